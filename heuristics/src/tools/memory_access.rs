//! Global and local memory: accesses that waste sectors (uncoalesced, narrow, scalar),
//! loads serialized by addresses that come out of earlier loads, bytes moved more than
//! once (DRAM, L2), local-memory traffic, and too few requests in flight.

use super::{count, fired, pct, quiet};
use crate::diagnosis::{Diagnosis, ToolResult};
use crate::facts::{metric as m, Kernel, Missing};
use crate::roofline::{Bound, Roofline};
use crate::tool_id::ToolId;
use sass::Class;

/// The share of DRAM time a better access pattern can save: the roofline's headroom to
/// what this GPU reaches, or the architecture's figure where stage 1 had no DRAM counter.
fn dram_headroom(k: &Kernel, r: &Roofline, dram_pct: f64) -> f64 {
    use crate::roofline::{dram_headroom, reachable_dram_pct};
    r.dram_headroom
        .or_else(|| dram_headroom(Some(dram_pct), None, reachable_dram_pct(k.device.compute_capability)))
        .unwrap_or(0.0)
}

/// 8- and 16-bit global accesses in a kernel that memory or latency limits: a warp moves
/// 32 or 64 bytes per instruction, so it cannot keep enough bytes in flight.
pub(super) fn narrow_global_access(k: &Kernel, r: &Roofline) -> ToolResult {
    let s = k.sass()?;
    let (nl, ns) = s.mix.global_accesses(|b| b < 32);
    let (all_l, all_s) = s.mix.global_accesses(|_| true);
    let total = all_l + all_s;
    if nl + ns == 0 || total == 0 {
        return quiet("no 8- or 16-bit global accesses");
    }
    let dram = k.m(m::DRAM_PCT)?;
    let share = (nl + ns) as f64 / total as f64;
    let headroom = dram_headroom(k, r, dram);
    let saving = share * headroom * k.memory_weight().max(0.5);
    let widths: Vec<String> = s
        .mix
        .global_load_bits
        .iter()
        .chain(&s.mix.global_store_bits)
        .filter(|(b, _)| b.parse::<u32>().unwrap_or(32) < 32)
        .map(|(b, n)| format!("{n}x{b}-bit"))
        .collect();
    let lines = k.lines_of(&[Class::GlobalLoad, Class::GlobalStore]);
    fired(
        Diagnosis::new(ToolId::NarrowGlobalAccess, saving)
            .ev("narrow_loads", nl as f64)
            .ev("narrow_stores", ns as f64)
            .ev("narrow_share", share)
            .ev("dram_pct", dram)
            .ev("memory_stall_share", k.memory_weight())
            .analysis(format!(
                "{} of the global accesses are narrower than 32 bits ({}): a warp moves at most {} bytes per \
                    instruction, so it takes 4-16x the instructions and in-flight requests of 16-byte accesses to move \
                    the same data; DRAM runs at {dram:.0}% of peak.",
                pct(share),
                widths.join(", "),
                if s.mix.global_load_bits.contains_key("8") || s.mix.global_store_bits.contains_key("8") {
                    32
                } else {
                    64
                },
            ))
            .prescription(
                "Move 16 bytes per thread: reinterpret the byte or half arrays as uint4 / int4 (16 chars or \
                8 halves per load), process them from registers, and handle the tail that is not a multiple of 16 \
                bytes with a scalar loop. For 16-bit floats use __half2 / __nv_bfloat162 arithmetic on the unpacked \
                pairs.",
            )
            .at(&lines),
    )
}

/// Loads whose address comes from an earlier load: each waits a full memory latency for
/// the one before, and no amount of coalescing shortens the chain.
pub(super) fn dependent_loads(k: &Kernel, _: &Roofline) -> ToolResult {
    let s = k.sass()?;
    if s.dependent_loads.is_empty() {
        return quiet("no global load takes its address from another load's result");
    }
    let chain = s.loops.iter().map(|l| l.load_chain).max().unwrap_or(0);
    let in_loops = s.loops.iter().map(|l| l.dependent_loads).sum::<u64>();
    // Outside loops, a few loads behind one index load cost one extra latency per thread;
    // only when they are most of the traffic, or repeat per iteration, is the chain the cost.
    let (dependent, loads, most) = dependent_share(s);
    if in_loops == 0 && !most {
        return quiet(format!(
            "{dependent} of {loads} global loads take their address from a loaded value, none of them per loop \
                iteration: one wait per thread, not a chain"
        ));
    }
    let long =
        k.stall_share(&["long_scoreboard"]).ok_or_else(|| crate::facts::Missing(vec![m::stall("long_scoreboard")]))?;
    let dram = k.m(m::DRAM_PCT)?;
    if long < 0.4 {
        return quiet(format!(
            "{} dependent loads, but global-load waits are only {} of stall time",
            s.dependent_loads.len(),
            pct(long)
        ));
    }
    // Latency, not bandwidth, is what more chains in flight buys back.
    let headroom = (1.0 - dram / 70.0).max(0.0);
    let saving = long * headroom;
    if saving < 0.03 {
        return quiet(format!(
            "dependent loads, but DRAM is already {dram:.0}% busy: more chains in flight would not help"
        ));
    }
    let issue = k.opt(m::ISSUE_ACTIVE).unwrap_or(0.0);
    let lines = sass::analysis::lines_by_frequency(&s.dependent_loads);
    fired(
        Diagnosis::new(ToolId::DependentLoads, saving)
            .ev("dependent_loads", s.dependent_loads.len() as f64)
            .ev("dependent_loads_in_loops", in_loops as f64)
            .ev("longest_chain", chain as f64)
            .ev("long_scoreboard_stall_share", long)
            .ev("dram_pct", dram)
            .ev("issue_active_pct", issue)
            .analysis(format!(
                "{} global loads take their address from an earlier load's result{}: each thread has one load in \
                    flight at a time and waits a full DRAM latency per step. Warps spend {} of their stall time on \
                    global loads while DRAM runs at only {dram:.0}% and schedulers issue {issue:.0}% of cycles; the \
                    scattered addresses also waste most of each sector, which no coalescing can fix while the next \
                    address is unknown.",
                s.dependent_loads.len(),
                if chain >= 2 { format!(" (chains up to {chain} loads deep in a loop)") } else { String::new() },
                pct(long),
            ))
            .prescription(format!(
                "Give the memory system independent work: walk several chains per thread interleaved (p0 = next[p0]; \
                    p1 = next[p1]; ... so {} loads are in flight), prefetch the next index while using the current \
                    one, or restructure the data so the addresses are known up front (sort or flatten the index, store \
                    the chain contiguously). More threads on more chains helps only while {} of DRAM is idle.",
                4,
                pct(headroom.min(1.0))
            ))
            .at(&lines),
    )
}

/// Whether most global loads are dependent loads: their scattered sectors are the chain's
/// cost, not a layout a coalescing fix could repair.
pub(super) fn mostly_dependent(k: &Kernel) -> Option<String> {
    let (dependent, loads, most) = dependent_share(k.sass?);
    most.then(|| {
        format!(
            "{dependent} of {loads} global loads take their address from a loaded value: the excess sectors ({}) \
                follow from the data, and dependent-loads covers it",
            count(k.opt(m::LD_SECTORS).unwrap_or(0.0))
        )
    })
}

/// Dependent global loads, all global loads, and whether the first are at least half.
fn dependent_share(s: &sass::FunctionReport) -> (u64, u64, bool) {
    let loads = s.count(Class::GlobalLoad);
    let dependent = s.dependent_loads.len() as u64;
    (dependent, loads, loads > 0 && 2 * dependent >= loads)
}

/// Sectors a fully coalesced warp request needs for the access widths the SASS shows
/// (32-bit: 4 sectors of 32 bytes; 128-bit: 16); 4 when the SASS is unknown.
fn ideal_sectors(hist: Option<&std::collections::BTreeMap<String, u64>>) -> f64 {
    let Some(h) = hist.filter(|h| !h.is_empty()) else { return 4.0 };
    let (mut n, mut total) = (0.0, 0.0);
    for (bits, c) in h {
        let b: f64 = bits.parse().unwrap_or(32.0);
        n += *c as f64;
        total += *c as f64 * b / 8.0;
    }
    if n > 0.0 {
        total / n
    } else {
        4.0
    }
}

pub(super) fn uncoalesced_global(k: &Kernel, r: &Roofline) -> ToolResult {
    let (ld_s, ld_r) = (k.m0(m::LD_SECTORS)?, k.m0(m::LD_REQUESTS)?);
    let (st_s, st_r) = (k.m0(m::ST_SECTORS)?, k.m0(m::ST_REQUESTS)?);
    if ld_r + st_r == 0.0 {
        return quiet("no global loads or stores");
    }
    let total = ld_s + st_s;
    let efficiency = k.sector_efficiency();
    // Two estimates of the waste, each blind where the other sees; the smaller counts.
    // Hardware sectors against the ideal for the access widths the SASS shows (4 bytes
    // without SASS) read a static mix: a kernel written twice (a wide copy that runs, a
    // scalar one that does not) averages the two, and its 16-byte loads read as 3x too
    // many sectors. The bytes each executed access used of the sectors it fetched (ncu's
    // ratio) see what ran, but take a broadcast (a warp's one sector, 4 of its bytes read)
    // for waste, which no layout could remove. ncu's instrumented `derived__` excess would
    // need SourceCounters, whose passes cost gemm_f32 7 of its 10 s of profile.
    let ideal_ld = ideal_sectors(k.sass.map(|s| &s.mix.global_load_bits));
    let ideal_st = ideal_sectors(k.sass.map(|s| &s.mix.global_store_bits));
    let by_width = (ld_s - ld_r * ideal_ld).max(0.0) + (st_s - st_r * ideal_st).max(0.0);
    let (excess, ideal_ld) = match efficiency {
        Some(e) if total * (1.0 - e) < by_width && ld_r > 0.0 => (total * (1.0 - e), ld_s / ld_r * e),
        _ => (by_width, ideal_ld),
    };
    let frac = if total > 0.0 { excess / total } else { 0.0 };
    let spr = |s: f64, r: f64| if r > 0.0 { s / r } else { 0.0 };
    let (spr_ld, spr_st) = (spr(ld_s, ld_r), spr(st_s, st_r));
    if frac < 0.2 {
        return quiet(format!(
            "{spr_ld:.1} sectors per load request and {spr_st:.1} per store request: {} excess",
            pct(frac)
        ));
    }
    if let Some(why) = mostly_dependent(k) {
        return quiet(why);
    }
    // When DRAM limits, wasted sectors are wasted DRAM time one for one.
    let weight = if r.limiter == "dram" { 1.0 } else { k.memory_weight() };
    let saving = frac * weight;
    // One lane per sector, a few bytes used of each: lanes read one field of a record.
    let strided_field = spr_ld >= 16.0 && efficiency.is_some_and(|e| e <= 0.25);
    let layout = if strided_field {
        format!(
            "Each lane reads its own sector and uses {:.0} of its 32 bytes: the lanes read one field of consecutive \
                records (array of structures). Store that field in its own array (structure of arrays) so a warp reads \
                128 contiguous bytes, or, if the record must stay, have a warp read whole records cooperatively and \
                pick the field from registers or shared memory. ",
            32.0 * efficiency.unwrap_or(0.0)
        )
    } else {
        String::new()
    };
    let lines = k.lines_of(&[Class::GlobalLoad, Class::GlobalStore]);
    fired(
        Diagnosis::new(ToolId::UncoalescedGlobal, saving)
            .ev("sector_efficiency", efficiency.unwrap_or(-1.0))
            .ev("load_sectors_per_request", spr_ld)
            .ev("store_sectors_per_request", spr_st)
            .ev("ideal_sectors_per_request", ideal_ld)
            .ev("excess_sectors", excess)
            .ev("total_sectors", total)
            .ev("excess_fraction", frac)
            .ev("memory_stall_share", k.memory_weight())
            .analysis(format!(
                "Each warp-wide global load fetches {spr_ld:.1} sectors of 32 bytes where {ideal_ld:.0} would carry \
                    its data (stores: {spr_st:.1} per request). {} of the {} sectors that move between L1 and L2 are \
                    waste ({} excess), and memory waits are {} of the warps' stall time.",
                pct(frac),
                count(total),
                count(excess),
                pct(k.memory_weight())
            ))
            .prescription(format!(
                "{layout}Make the 32 lanes of a warp read consecutive addresses: put threadIdx.x on the contiguous \
                    (innermost) dimension. If each thread walks its own row or column, give that row to a warp or a \
                    block instead (lanes stride through it together), or stage a tile through shared memory: load it \
                    coalesced, read it transposed. Target {ideal_ld:.0} sectors per request."
            ))
            .at(&lines),
    )
}

pub(super) fn scalar_global_access(k: &Kernel, r: &Roofline) -> ToolResult {
    let s = k.sass()?;
    let (loads, stores) = (s.count(Class::GlobalLoad), s.count(Class::GlobalStore));
    if loads + stores == 0 {
        return quiet("no global loads or stores in the SASS");
    }
    let (wide_l, wide_s) = s.mix.global_accesses(|b| b >= 64);
    if wide_l + wide_s > 0 {
        return quiet(format!("{} global accesses are already 64 or 128 bits wide", wide_l + wide_s));
    }
    let (narrow_l, narrow_s) = s.mix.global_accesses(|b| b < 32);
    if narrow_l + narrow_s > 0 {
        return quiet("8- or 16-bit accesses: narrow-global-access covers them");
    }
    let dram = k.m(m::DRAM_PCT)?;
    let (ld_s, ld_r) = (k.m0(m::LD_SECTORS)?, k.m0(m::LD_REQUESTS)?);
    let ideal = ideal_sectors(Some(&s.mix.global_load_bits));
    if ld_r > 0.0 && ld_s / ld_r > 1.25 * ideal {
        return quiet("accesses are uncoalesced: coalesce first (uncoalesced-global), then widen");
    }
    let lg = k.stall_share(&["lg_throttle"]).unwrap_or(0.0);
    if dram < 40.0 && lg < 0.15 {
        return quiet(format!("DRAM at {dram:.0}% and {} LSU-throttle stalls: load width does not limit", pct(lg)));
    }
    let per_access = s.instructions as f64 / (loads + stores) as f64;
    let streaming = (16.0 / per_access).min(1.0);
    // Two ways narrow accesses cost time: too few bytes in flight to reach DRAM bandwidth
    // (when DRAM is the unit being fed), and 4x the load-store instructions queuing at the
    // LSU (shared with local and shared-memory instructions, so only the global share).
    let headroom = dram_headroom(k, r, dram);
    let bandwidth_saving = if dram >= 40.0 { headroom * streaming * k.memory_weight() } else { 0.0 };
    let lsu_total = (loads
        + stores
        + s.count(Class::LocalLoad)
        + s.count(Class::LocalStore)
        + s.count(Class::SharedLoad)
        + s.count(Class::SharedStore)) as f64;
    let lsu_saving = lg * 0.75 * (loads + stores) as f64 / lsu_total;
    let saving = bandwidth_saving.max(lsu_saving);
    let lines = k.lines_of(&[Class::GlobalLoad, Class::GlobalStore]);
    fired(
        Diagnosis::new(ToolId::ScalarGlobalAccess, saving)
            .ev("global_loads", loads as f64)
            .ev("global_stores", stores as f64)
            .ev("widest_access_bits", 32.0)
            .ev("dram_pct", dram)
            .ev("dram_headroom", headroom)
            .ev("lsu_throttle_stall_share", lg)
            .ev("instructions_per_global_access", per_access)
            .analysis(format!(
                "Every global access is 32 bits or narrower ({loads} loads, {stores} stores in the SASS): a warp moves \
                    at most 128 bytes per instruction, so the kernel needs four times the load/store instructions and \
                    in-flight requests that 128-bit accesses would. DRAM runs at {dram:.0}% of peak, {} of its time \
                    short of what this GPU reaches; {} of stall time is the LSU queue being full.",
                pct(headroom),
                pct(lg)
            ))
            .prescription(
                "Load and store 16 bytes per thread: reinterpret the arrays as float4 (int4 for 8 bf16/half values), \
                    process four elements per thread, and handle the last n % 4 elements in a scalar tail. cudaMalloc \
                    pointers are 256-byte aligned; keep row pitches multiples of 16 bytes.",
            )
            .at(&lines),
    )
}

pub(super) fn local_memory(k: &Kernel, _: &Roofline) -> ToolResult {
    let (ldl, stl) = (k.count(Class::LocalLoad).unwrap_or(0) as f64, k.count(Class::LocalStore).unwrap_or(0) as f64);
    let executed = k.opt(m::LOCAL_LD_INST).unwrap_or(0.0) + k.opt(m::LOCAL_ST_INST).unwrap_or(0.0);
    let (stack, spills) =
        k.ptxas.map(|p| (p.stack_frame_bytes, p.spill_store_bytes + p.spill_load_bytes)).unwrap_or((0, 0));
    if k.sass.is_none() && k.launch.is_none() && k.ptxas.is_none() {
        return Err(Missing(vec!["SASS, ncu counters or the ptxas report".into()]));
    }
    if ldl + stl == 0.0 && executed == 0.0 && spills == 0 {
        return quiet("no LDL/STL and no local traffic");
    }
    let local = k.opt(m::LOCAL_LD_SECTORS).unwrap_or(0.0) + k.opt(m::LOCAL_ST_SECTORS).unwrap_or(0.0);
    let global = k.opt(m::LD_SECTORS).unwrap_or(0.0) + k.opt(m::ST_SECTORS).unwrap_or(0.0);
    let saving = if local + global > 0.0 { (local / (local + global)) * k.memory_weight() } else { 0.3 };
    let cause = if spills > 0 {
        format!("register spills ({spills} bytes spilled)")
    } else if stack > 0 {
        format!("a local array indexed at run time ({stack}-byte stack frame, no spills)")
    } else {
        "a local array or spilled registers".to_string()
    };
    let lines =
        k.sass.map(|s| s.finding("local-memory").map(|f| f.lines.clone()).unwrap_or_default()).unwrap_or_default();
    let prescription = if spills > 0 {
        format!(
            "Cut register pressure so nothing spills ({spills} B now): shorten live ranges (compute values where \
            they are used), avoid large per-thread arrays, give the compiler room with __launch_bounds__(BLOCK, 1), or \
            split the kernel."
        )
    } else {
        "Keep the array in registers: index it only with compile-time constants (make loop bounds constexpr and \
            #pragma unroll every loop that indexes it); a run-time index such as buf[(k * sel + i) & 63] forces the \
            whole array into local memory. If the index must stay dynamic, hold the array in shared memory, one slice \
            per thread."
            .to_string()
    };
    fired(
        Diagnosis::new(ToolId::LocalMemory, saving)
            .ev("ldl", ldl)
            .ev("stl", stl)
            .ev("local_instructions_executed", executed)
            .ev("local_sectors", local)
            .ev("global_sectors", global)
            .ev("stack_frame_bytes", stack as f64)
            .ev("spill_bytes", spills as f64)
            .analysis(format!(
                "{ldl:.0} LDL and {stl:.0} STL in the SASS{}: {cause}. Local memory is per-thread DRAM behind L1: {} \
                    sectors of local traffic against {} of global.",
                if executed > 0.0 { format!(" ({} executed)", count(executed)) } else { String::new() },
                count(local),
                count(global)
            ))
            .prescription(prescription)
            .at(&lines),
    )
}

pub(super) fn memory_latency_bound(k: &Kernel, r: &Roofline) -> ToolResult {
    if r.class != Bound::LatencyBound {
        return quiet(format!("{} kernel", r.class.name()));
    }
    let dram = k.m(m::DRAM_PCT)?;
    let issue = k.m(m::ISSUE_ACTIVE)?;
    let long = k.stall_share(&["long_scoreboard"]).ok_or_else(|| Missing(vec![m::stall("long_scoreboard")]))?;
    let atomics = k.opt(m::GLOBAL_RED).unwrap_or(0.0) + k.opt(m::GLOBAL_ATOM).unwrap_or(0.0);
    let requests = k.opt(m::LD_REQUESTS).unwrap_or(0.0) + k.opt(m::ST_REQUESTS).unwrap_or(0.0);
    if atomics > 0.25 * (atomics + requests) {
        return quiet("the waits are on atomics: atomic-contention explains them");
    }
    if dram >= 40.0 || issue >= 40.0 || long < 0.4 {
        return quiet(format!("DRAM {dram:.0}%, issue {issue:.0}%, global-load waits {} of stalls", pct(long)));
    }
    // Idle SMs keep DRAM idle whatever each thread keeps in flight: the grid comes first.
    if let (Some(grid), Some(sms)) = (k.opt(m::GRID), k.device.sms) {
        if grid < sms {
            return quiet(format!(
                "{grid:.0} blocks for {sms:.0} SMs: the idle SMs, not the loads in flight, keep DRAM idle \
                    (under-filled-grid)"
            ));
        }
    }
    if k.sass.is_some_and(|s| s.loops.iter().any(|l| l.dependent_loads > 0)) {
        return quiet("the loads in loops wait on each other's results: dependent-loads explains the latency");
    }
    let eligible = k.opt(m::ELIGIBLE).unwrap_or(0.0);
    // With enough bytes in flight the kernel runs at the DRAM roof this GPU reaches (85%
    // of the datasheet peak when unmeasured), so the time left is the share of that roof
    // it already uses; the waits on loads bound how much of the rest is latency, and
    // issue slots already in use (up to the 40% that ends this tool) are work that more
    // loads in flight would not shorten.
    let roof = r.dram_pct_of_achievable.filter(|a| *a > 0.0).map(|a| 100.0 * dram / a).unwrap_or(85.0);
    let saving = long * (1.0 - dram / roof.max(dram)).max(0.0) * (1.0 - issue / 40.0);
    let lines = k.lines_of(&[Class::GlobalLoad]);
    fired(
        Diagnosis::new(ToolId::MemoryLatencyBound, saving)
            .ev("dram_pct", dram)
            .ev("issue_active_pct", issue)
            .ev("long_scoreboard_stall_share", long)
            .ev("eligible_warps_per_cycle", eligible)
            .analysis(format!(
                "Warps wait on global loads ({} of stall time) while DRAM runs at only {dram:.0}% and schedulers issue \
                    {issue:.0}% of cycles ({eligible:.2} eligible warps per cycle): too few requests are in flight to \
                    cover DRAM latency.",
                pct(long)
            ))
            .prescription(
                "Put more bytes in flight: have each thread issue several independent loads before using any \
                (unroll by 4 or load 16 bytes at a time), keep at least 4 blocks resident per SM, and prefetch the \
                next tile (cp.async) while computing on the current one.",
            )
            .at(&lines),
    )
}

pub(super) fn redundant_dram_traffic(k: &Kernel, r: &Roofline) -> ToolResult {
    let Some(min) = k.hints.min_bytes.filter(|b| *b > 0.0) else {
        return quiet("no task roofline to compare DRAM bytes with (diagnose a task, or pass --min-bytes)");
    };
    let bytes = k.dram_bytes().ok_or_else(|| Missing(vec![m::DRAM_READ.into(), m::DRAM_WRITE.into()]))?;
    let ratio = bytes / min;
    if ratio <= 1.25 {
        return quiet(format!("DRAM moves {ratio:.2}x the least the task needs"));
    }
    let weight = if matches!(r.class, Bound::AtRoofline) || r.limiter == "dram" { 1.0 } else { k.memory_weight() };
    let saving = (1.0 - 1.0 / ratio) * weight;
    fired(
        Diagnosis::new(ToolId::RedundantDramTraffic, saving)
            .ev("dram_bytes", bytes)
            .ev("min_bytes", min)
            .ev("ratio", ratio)
            .analysis(format!(
                "DRAM moves {} bytes, {ratio:.2}x the {} bytes the task needs at minimum: data is read \
                more than once or written and re-read.",
                count(bytes),
                count(min)
            ))
            .prescription(
                "Read each input once: fuse passes over the same data (keep a row or tile in registers or \
                shared memory between them), avoid writing intermediates to global memory, and order blocks so reused \
                data is still in L2.",
            ),
    )
}

pub(super) fn redundant_l2_traffic(k: &Kernel, _: &Roofline) -> ToolResult {
    let l2_read = k.m0(m::L2_TEX_READ_SECTORS)?;
    let dram_read = k.m0(m::DRAM_READ)? / 32.0;
    let l2_pct = k.m(m::L2_PCT)?;
    if k.count(Class::LocalLoad).unwrap_or(0) + k.count(Class::LocalStore).unwrap_or(0) > 0
        || k.opt(m::LOCAL_LD_INST).unwrap_or(0.0) > 0.0
    {
        return quiet("local memory traffic goes through L2: local-memory explains it");
    }
    if dram_read <= 0.0 || l2_read < 1.8 * dram_read || l2_pct < 40.0 {
        return quiet(format!(
            "L2 serves {:.1}x the sectors DRAM supplies, L2 {l2_pct:.0}% busy",
            if dram_read > 0.0 { l2_read / dram_read } else { 0.0 }
        ));
    }
    let ratio = l2_read / dram_read;
    let saving = (1.0 - 1.0 / ratio) * (l2_pct / 100.0) * 0.5;
    let lines = k.lines_of(&[Class::GlobalLoad]);
    fired(
        Diagnosis::new(ToolId::RedundantL2Traffic, saving)
            .ev("l2_read_sectors", l2_read)
            .ev("dram_read_sectors", dram_read)
            .ev("reads_per_dram_read", ratio)
            .ev("l2_pct", l2_pct)
            .analysis(format!(
                "L2 serves {ratio:.1}x as many sectors as DRAM supplies ({} against {}): the kernel's threads or \
                    blocks read the same data several times and L2, {l2_pct:.0}% busy, absorbs the re-reads.",
                count(l2_read),
                count(dram_read)
            ))
            .prescription(
                "Read each element once per block. Passes over the same row (max, sum, normalize): keep the row or \
                tile in registers (or shared memory) across them, or fuse them with an online algorithm (running max \
                and rescaled sum). Overlapping windows (stencils, convolutions, sliding windows): give a block a wider \
                tile along the contiguous axis, so fewer of the sectors it reads are its neighbours' halo, and share \
                neighbouring values through warp shuffles or a shared-memory tile with its halo instead of reading \
                them again.",
            )
            .at(&lines),
    )
}

pub(super) fn async_copy_opportunity(k: &Kernel, _: &Roofline) -> ToolResult {
    let s = k.sass()?;
    if s.count(Class::AsyncCopy) > 0 {
        return quiet("already uses cp.async, bulk copies or TMA");
    }
    let staging = s
        .loops
        .iter()
        .find(|l| l.mix.count(Class::GlobalLoad) > 0 && l.mix.count(Class::SharedStore) > 0 && l.barriers > 0);
    let Some(lp) = staging else {
        return quiet("no loop stages global data through shared memory");
    };
    let line = lp.line.clone().map(|l| vec![l]).unwrap_or_default();
    fired(
        Diagnosis::new(ToolId::AsyncCopyOpportunity, 0.15 * k.memory_weight())
            .ev("loop_global_loads", lp.mix.count(Class::GlobalLoad) as f64)
            .ev("loop_shared_stores", lp.mix.count(Class::SharedStore) as f64)
            .ev("loop_barriers", lp.barriers as f64)
            .analysis(
                "A loop copies global data into shared memory through registers (LDG then STS) and waits at a \
                barrier each iteration: the copy and the compute do not overlap.",
            )
            .prescription(
                "Copy asynchronously and pipeline: cp.async (cuda::memcpy_async / __pipeline_memcpy_async) \
                or a TMA bulk tensor copy on sm_90 into 2-3 shared-memory stages, waiting only for the stage about to \
                be used.",
            )
            .at(&line),
    )
}
