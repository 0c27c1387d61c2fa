//! Stage 2: the micro-profiling tools. Each one is a trigger on the evidence, an analysis
//! that sizes the problem, a prescription an expert would give, and an estimated saving
//! (share of kernel time) that ranks it against the others. Tools never guess a missing
//! counter: they report it as missing evidence instead.

use crate::diagnosis::{Diagnosis, Severity, ToolResult, Verdict};
use crate::facts::{metric as m, Kernel, Missing};
use crate::roofline::{Bound, Roofline};
use sass::Class;

mod arithmetic;
mod memory_access;
mod shared;

use arithmetic::{accurate_math, mac_loop_without_reuse, register_tiling};
use memory_access::{dependent_loads, narrow_global_access};

use shared::shared_memory_bound;

/// Which stage-1 classes a tool applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Runs for every kernel: the problem costs time whatever the bottleneck.
    Always,
    /// Memory-side tools: memory- and latency-bound kernels.
    Memory,
    /// Compute-side tools: compute- and latency-bound kernels.
    Compute,
    /// Parallelism tools: latency- and memory-bound kernels.
    Latency,
    /// Shared-memory and barrier tools: whenever L1 or the LSU pipe limits, whatever
    /// the class, and for latency-bound kernels.
    Shared,
}

impl Gate {
    pub fn name(self) -> &'static str {
        match self {
            Gate::Always => "always-on",
            Gate::Memory => "memory-side",
            Gate::Compute => "compute-side",
            Gate::Latency => "parallelism",
            Gate::Shared => "shared-memory",
        }
    }
}

pub struct Tool {
    pub id: &'static str,
    pub gate: Gate,
    pub run: fn(&Kernel, &Roofline) -> ToolResult,
}

/// Every tool, in tie-break order.
pub const ALL: &[Tool] = &[
    Tool { id: "register-tiling", gate: Gate::Shared, run: register_tiling },
    Tool { id: "no-tensor-cores", gate: Gate::Always, run: no_tensor_cores },
    Tool { id: "local-memory", gate: Gate::Always, run: local_memory },
    Tool { id: "uncoalesced-global", gate: Gate::Always, run: uncoalesced_global },
    Tool { id: "dependent-loads", gate: Gate::Latency, run: dependent_loads },
    Tool { id: "narrow-global-access", gate: Gate::Memory, run: narrow_global_access },
    Tool { id: "shared-bank-conflicts", gate: Gate::Shared, run: shared_bank_conflicts },
    Tool { id: "shared-memory-bound", gate: Gate::Shared, run: shared_memory_bound },
    Tool { id: "atomic-contention", gate: Gate::Always, run: atomic_contention },
    Tool { id: "fp64-in-fp32", gate: Gate::Always, run: fp64_in_fp32 },
    Tool { id: "under-filled-grid", gate: Gate::Always, run: under_filled_grid },
    Tool { id: "warp-divergence", gate: Gate::Compute, run: warp_divergence },
    Tool { id: "scalar-global-access", gate: Gate::Memory, run: scalar_global_access },
    Tool { id: "redundant-dram-traffic", gate: Gate::Always, run: redundant_dram_traffic },
    Tool { id: "redundant-l2-traffic", gate: Gate::Memory, run: redundant_l2_traffic },
    Tool { id: "register-pressure", gate: Gate::Always, run: register_pressure },
    Tool { id: "low-occupancy", gate: Gate::Latency, run: low_occupancy },
    Tool { id: "accurate-math", gate: Gate::Compute, run: accurate_math },
    Tool { id: "special-function-bound", gate: Gate::Compute, run: special_function_bound },
    Tool { id: "barrier-stalls", gate: Gate::Shared, run: barrier_stalls },
    Tool { id: "memory-latency-bound", gate: Gate::Latency, run: memory_latency_bound },
    Tool { id: "async-copy-opportunity", gate: Gate::Memory, run: async_copy_opportunity },
    Tool { id: "integer-overhead", gate: Gate::Compute, run: integer_overhead },
    Tool { id: "conversion-overhead", gate: Gate::Compute, run: conversion_overhead },
    Tool { id: "launch-overhead", gate: Gate::Always, run: launch_overhead },
    Tool { id: "at-roofline", gate: Gate::Always, run: at_roofline },
    Tool { id: "roofline", gate: Gate::Always, run: roofline },
];

fn fired(d: Diagnosis) -> ToolResult {
    Ok(Verdict::Fired(d))
}

fn quiet(why: impl Into<String>) -> ToolResult {
    Ok(Verdict::Quiet(why.into()))
}

fn pct(x: f64) -> String {
    format!("{:.0}%", 100.0 * x)
}

fn count(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.1}M", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.0}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
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

fn uncoalesced_global(k: &Kernel, r: &Roofline) -> ToolResult {
    let (ld_s, ld_r) = (k.m0(m::LD_SECTORS)?, k.m0(m::LD_REQUESTS)?);
    let (st_s, st_r) = (k.m0(m::ST_SECTORS)?, k.m0(m::ST_REQUESTS)?);
    if ld_r + st_r == 0.0 {
        return quiet("no global loads or stores");
    }
    let ideal_ld = ideal_sectors(k.sass.map(|s| &s.mix.global_load_bits));
    let ideal_st = ideal_sectors(k.sass.map(|s| &s.mix.global_store_bits));
    let mine = (ld_s - ld_r * ideal_ld).max(0.0) + (st_s - st_r * ideal_st).max(0.0);
    let excess = if k.sass.is_some() { mine } else { k.opt(m::EXCESS_SECTORS).unwrap_or(mine).max(mine) };
    let total = ld_s + st_s;
    let frac = if total > 0.0 { excess / total } else { 0.0 };
    let spr = |s: f64, r: f64| if r > 0.0 { s / r } else { 0.0 };
    let (spr_ld, spr_st) = (spr(ld_s, ld_r), spr(st_s, st_r));
    if frac < 0.2 {
        return quiet(format!(
            "{spr_ld:.1} sectors per load request and {spr_st:.1} per store request: {} excess",
            pct(frac)
        ));
    }
    if let Some(why) = memory_access::mostly_dependent(k) {
        return quiet(why);
    }
    // When DRAM limits, wasted sectors are wasted DRAM time one for one.
    let weight = if r.limiter == "dram" { 1.0 } else { k.memory_weight() };
    let saving = frac * weight;
    let efficiency = k.sector_efficiency();
    // One lane per sector, a few bytes used of each: lanes read one field of a record.
    let strided_field = spr_ld >= 16.0 && efficiency.is_some_and(|e| e <= 0.25);
    let layout = if strided_field {
        format!(
            "Each lane reads its own sector and uses {:.0} of its 32 bytes: the lanes read one field of consecutive records (array of structures). Store that field in its own array (structure of arrays) so a warp reads 128 contiguous bytes, or, if the record must stay, have a warp read whole records cooperatively and pick the field from registers or shared memory. ",
            32.0 * efficiency.unwrap_or(0.0)
        )
    } else {
        String::new()
    };
    let lines = k.lines_of(&[Class::GlobalLoad, Class::GlobalStore]);
    fired(
        Diagnosis::new("uncoalesced-global", saving)
            .ev("sector_efficiency", efficiency.unwrap_or(-1.0))
            .ev("load_sectors_per_request", spr_ld)
            .ev("store_sectors_per_request", spr_st)
            .ev("ideal_sectors_per_request", ideal_ld)
            .ev("excess_sectors", excess)
            .ev("total_sectors", total)
            .ev("excess_fraction", frac)
            .ev("memory_stall_share", k.memory_weight())
            .analysis(format!(
                "Each warp-wide global load fetches {spr_ld:.1} sectors of 32 bytes where {ideal_ld:.0} would carry its data (stores: {spr_st:.1} per request). {} of the {} sectors that move between L1 and L2 are waste ({} excess), and memory waits are {} of the warps' stall time.",
                pct(frac),
                count(total),
                count(excess),
                pct(k.memory_weight())
            ))
            .prescription(format!(
                "{layout}Make the 32 lanes of a warp read consecutive addresses: put threadIdx.x on the contiguous (innermost) dimension. If each thread walks its own row or column, give that row to a warp or a block instead (lanes stride through it together), or stage a tile through shared memory: load it coalesced, read it transposed. Target {ideal_ld:.0} sectors per request."
            ))
            .at(&lines),
    )
}

fn scalar_global_access(k: &Kernel, _: &Roofline) -> ToolResult {
    let s = k.sass()?;
    let (loads, stores) = (s.count(Class::GlobalLoad), s.count(Class::GlobalStore));
    if loads + stores == 0 {
        return quiet("no global loads or stores in the SASS");
    }
    let wide: u64 = s
        .mix
        .global_load_bits
        .iter()
        .chain(&s.mix.global_store_bits)
        .filter(|(b, _)| b.parse::<u32>().unwrap_or(0) >= 64)
        .map(|(_, n)| n)
        .sum();
    if wide > 0 {
        return quiet(format!("{wide} global accesses are already 64 or 128 bits wide"));
    }
    let narrow = s
        .mix
        .global_load_bits
        .keys()
        .chain(s.mix.global_store_bits.keys())
        .any(|b| b.parse::<u32>().unwrap_or(32) < 32);
    if narrow {
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
    let bandwidth_saving =
        if dram >= 40.0 { (1.0 - dram / 90.0).max(0.0) * streaming * k.memory_weight() } else { 0.0 };
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
        Diagnosis::new("scalar-global-access", saving)
            .ev("global_loads", loads as f64)
            .ev("global_stores", stores as f64)
            .ev("widest_access_bits", 32.0)
            .ev("dram_pct", dram)
            .ev("lsu_throttle_stall_share", lg)
            .ev("instructions_per_global_access", per_access)
            .analysis(format!(
                "Every global access is 32 bits or narrower ({loads} loads, {stores} stores in the SASS): a warp moves at most 128 bytes per instruction, so the kernel needs four times the load/store instructions and in-flight requests that 128-bit accesses would. DRAM runs at {dram:.0}% of peak; {} of stall time is the LSU queue being full.",
                pct(lg)
            ))
            .prescription(
                "Load and store 16 bytes per thread: reinterpret the arrays as float4 (int4 for 8 bf16/half values), process four elements per thread, and handle the last n % 4 elements in a scalar tail. cudaMalloc pointers are 256-byte aligned; keep row pitches multiples of 16 bytes.",
            )
            .at(&lines),
    )
}

fn shared_bank_conflicts(k: &Kernel, _: &Roofline) -> ToolResult {
    let wave_ld = k.m0("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum")?;
    let wave_st = k.m0("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum")?;
    let waves = wave_ld + wave_st;
    if waves == 0.0 {
        return quiet("no shared-memory loads or stores");
    }
    let conflicts = k.m0(m::SHARED_LD_CONFLICTS)? + k.m0(m::SHARED_ST_CONFLICTS)?;
    let excess = k.opt(m::SHARED_EXCESS).unwrap_or(0.0).max(conflicts).min(waves);
    let frac = excess / waves;
    let ways = k.opt(m::SHARED_NWAY);
    if frac < 0.2 {
        return quiet(format!(
            "{} of shared wavefronts are conflict replays{}",
            pct(frac),
            ways.map(|w| format!(" ({w:.0}-way at worst)")).unwrap_or_default()
        ));
    }
    let saving = frac * k.shared_weight();
    let lines = k.lines_of(&[Class::SharedLoad, Class::SharedStore]);
    let ways_text = ways.map(|w| format!("{w:.0}-way")).unwrap_or_else(|| "multi-way".into());
    fired(
        Diagnosis::new("shared-bank-conflicts", saving)
            .ev("conflict_ways", ways.unwrap_or(0.0))
            .ev("excess_wavefronts", excess)
            .ev("shared_wavefronts", waves)
            .ev("excess_fraction", frac)
            .ev("shared_stall_share", k.shared_weight())
            .analysis(format!(
                "Shared-memory accesses hit the same bank {ways_text}: {} of {} wavefronts ({}) are replays, each a serialized pass through the 32 banks; warps spend {} of their stall time on shared memory and barriers.",
                count(excess),
                count(waves),
                pct(frac),
                pct(k.shared_weight())
            ))
            .prescription(
                "Pad the shared tile by one element per row (float tile[32][33]) so a column walk lands in 32 different banks, or XOR-swizzle the column index (col ^ row) when padding breaks vector accesses; for 16-byte accesses pad by 16 bytes.",
            )
            .at(&lines),
    )
}

fn local_memory(k: &Kernel, _: &Roofline) -> ToolResult {
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
        format!("Cut register pressure so nothing spills ({spills} B now): shorten live ranges (compute values where they are used), avoid large per-thread arrays, give the compiler room with __launch_bounds__(BLOCK, 1), or split the kernel.")
    } else {
        "Keep the array in registers: index it only with compile-time constants (make loop bounds constexpr and #pragma unroll every loop that indexes it); a run-time index such as buf[(k * sel + i) & 63] forces the whole array into local memory. If the index must stay dynamic, hold the array in shared memory, one slice per thread.".to_string()
    };
    fired(
        Diagnosis::new("local-memory", saving)
            .ev("ldl", ldl)
            .ev("stl", stl)
            .ev("local_instructions_executed", executed)
            .ev("local_sectors", local)
            .ev("global_sectors", global)
            .ev("stack_frame_bytes", stack as f64)
            .ev("spill_bytes", spills as f64)
            .analysis(format!(
                "{ldl:.0} LDL and {stl:.0} STL in the SASS{}: {cause}. Local memory is per-thread DRAM behind L1: {} sectors of local traffic against {} of global.",
                if executed > 0.0 { format!(" ({} executed)", count(executed)) } else { String::new() },
                count(local),
                count(global)
            ))
            .prescription(prescription)
            .at(&lines),
    )
}

fn register_pressure(k: &Kernel, _: &Roofline) -> ToolResult {
    let regs = k.opt(m::REGS).or(k.ptxas.map(|p| p.registers as f64));
    let Some(regs) = regs else {
        return Err(Missing(vec![m::REGS.into(), "or the ptxas report".into()]));
    };
    let spills = k.ptxas.map(|p| p.spill_store_bytes + p.spill_load_bytes).unwrap_or(0);
    let limit_regs = k.opt(m::LIMIT_REGS);
    let others = [k.opt(m::LIMIT_SMEM), k.opt(m::LIMIT_WARPS), k.opt(m::LIMIT_BLOCKS)]
        .into_iter()
        .flatten()
        .fold(f64::INFINITY, f64::min);
    let binding = limit_regs.is_some_and(|r| r < others);
    let occupancy = k.opt(m::ACHIEVED_OCC).unwrap_or(100.0);
    if spills == 0 && !(regs >= 128.0 && binding && occupancy < 40.0) {
        return quiet(format!(
            "{regs:.0} registers per thread, no spills{}",
            if binding { " (registers limit occupancy)" } else { "" }
        ));
    }
    let saving = if spills > 0 { 0.15 } else { 0.1 };
    fired(
        Diagnosis::new("register-pressure", saving)
            .ev("registers_per_thread", regs)
            .ev("spill_bytes", spills as f64)
            .ev("blocks_per_sm_by_registers", limit_regs.unwrap_or(0.0))
            .ev("achieved_occupancy_pct", occupancy)
            .analysis(format!(
                "{regs:.0} registers per thread{}{}.",
                if spills > 0 { format!(" and {spills} bytes spilled to local memory") } else { String::new() },
                if binding { format!("; registers cap residency at {:.0} blocks per SM", limit_regs.unwrap_or(0.0)) } else { String::new() }
            ))
            .prescription("Lower the register count: __launch_bounds__(BLOCK, MIN_BLOCKS) lets ptxas target more resident blocks; recompute cheap values instead of keeping them live; split very long unrolled loops; keep per-thread arrays small."),
    )
}

fn low_occupancy(k: &Kernel, r: &Roofline) -> ToolResult {
    let achieved = k.m(m::ACHIEVED_OCC)?;
    let waves = k.m(m::WAVES)?;
    if waves < 1.0 {
        return quiet("the grid fills less than one wave: under-filled-grid explains the occupancy");
    }
    let block = k.m(m::BLOCK)?;
    let limits = [
        ("registers", k.m(m::LIMIT_REGS)?),
        ("shared memory", k.m(m::LIMIT_SMEM)?),
        ("warps", k.m(m::LIMIT_WARPS)?),
        ("blocks", k.m(m::LIMIT_BLOCKS)?),
    ];
    let (limiter, blocks) = limits.iter().cloned().min_by(|a, b| a.1.total_cmp(&b.1)).expect("four limits");
    let max_warps = k.device.max_warps_per_sm.unwrap_or(64.0);
    let theoretical = (blocks * (block / 32.0).ceil() / max_warps).min(1.0);
    let issue = k.opt(m::ISSUE_ACTIVE).unwrap_or(50.0);
    if theoretical >= 0.5 || r.class != Bound::LatencyBound {
        return quiet(format!("theoretical occupancy {}, achieved {achieved:.0}%", pct(theoretical)));
    }
    let saving = ((0.5 - theoretical) / 0.5).max(0.0) * (1.0 - issue / 100.0) * 0.5;
    let advice = match limiter {
        "registers" => "fewer registers per thread (__launch_bounds__(BLOCK, MIN_BLOCKS), shorter live ranges)",
        "shared memory" => "less shared memory per block (smaller tiles, or fewer pipeline stages)",
        "warps" => "smaller blocks so more of them fit",
        _ => "larger blocks (too few threads per block to fill the SM's block slots)",
    };
    fired(
        Diagnosis::new("low-occupancy", saving)
            .ev("theoretical_occupancy", theoretical)
            .ev("achieved_occupancy_pct", achieved)
            .ev("blocks_per_sm", blocks)
            .ev("limiter", limiter)
            .ev("issue_active_pct", issue)
            .analysis(format!(
                "{limiter} limit residency to {blocks:.0} blocks of {block:.0} threads per SM: {} of the SM's warp slots at best ({achieved:.0}% achieved), too few warps to hide latency while issue slots sit {:.0}% idle.",
                pct(theoretical),
                100.0 - issue
            ))
            .prescription(format!("Raise occupancy with {advice}, or add independent work per thread (ILP) so fewer warps suffice.")),
    )
}

fn under_filled_grid(k: &Kernel, _: &Roofline) -> ToolResult {
    let grid = k.m(m::GRID)?;
    let sms = k.device.sms.ok_or_else(|| Missing(vec![m::SMS.into()]))?;
    let waves = k.opt(m::WAVES);
    let block = k.opt(m::BLOCK).unwrap_or(0.0);
    if grid < sms {
        let saving = (1.0 - grid / sms).min(0.95);
        return fired(
            Diagnosis::new("under-filled-grid", saving)
                .ev("blocks", grid)
                .ev("sms", sms)
                .ev("block_size", block)
                .ev("waves", waves.unwrap_or(0.0))
                .analysis(format!("{grid:.0} blocks of {block:.0} threads for {sms:.0} SMs: {:.0} SMs sit idle for the whole kernel.", sms - grid))
                .prescription(format!(
                    "Launch at least {:.0} blocks (two or more per SM): give each thread or warp less work (one element per thread with 256-thread blocks, a block per row), or split long per-thread loops across blocks and combine partial results.",
                    2.0 * sms
                )),
        );
    }
    if let Some(w) = waves.filter(|w| (1.0..4.0).contains(w)) {
        let tail = (w.ceil() - w) / w.ceil();
        if tail >= 0.2 {
            return fired(
                Diagnosis::new("under-filled-grid", tail * 0.3)
                    .ev("blocks", grid)
                    .ev("waves", w)
                    .ev("idle_fraction_of_last_wave", 1.0 - w.fract())
                    .analysis(format!("{grid:.0} blocks make {w:.2} waves: the last wave leaves {} of the GPU idle while it runs.", pct(1.0 - w.fract())))
                    .prescription("Size the grid to whole waves (a multiple of SMs x resident blocks), or use a persistent grid-stride loop with exactly SMs x resident blocks.")
                    .cap(Severity::Medium),
            );
        }
    }
    quiet(format!("{grid:.0} blocks on {sms:.0} SMs{}", waves.map(|w| format!(", {w:.2} waves")).unwrap_or_default()))
}

fn fp64_in_fp32(k: &Kernel, _: &Roofline) -> ToolResult {
    let Some(s) = k.sass else {
        // Without SASS only the pipe counters can tell.
        let fp64 =
            k.m(m::DFMA_PER_CYCLE)? + k.opt(m::DMUL_PER_CYCLE).unwrap_or(0.0) + k.opt(m::DADD_PER_CYCLE).unwrap_or(0.0);
        if fp64 == 0.0 {
            return quiet("no fp64 instructions executed");
        }
        let pipe = k.opt(m::FP64_PIPE_PCT).unwrap_or(0.0);
        return fired(
            Diagnosis::new("fp64-in-fp32", (pipe / 100.0).max(0.05))
                .ev("fp64_pipe_pct", pipe)
                .analysis(format!("fp64 instructions run ({fp64:.1} per cycle across the GPU); pass --sass to see where and whether floats are promoted."))
                .prescription("If the data is float, keep the arithmetic in float: float literals (0.5f), float math functions (sinf, expf)."),
        );
    };
    let fp64_ops = s.count(Class::Fp64) as f64;
    let conversions = s.fp64_conversions() as f64;
    let promotions =
        s.fp64.iter().filter(|x| x.opcode.starts_with("F2F.F64") || x.opcode.starts_with("I2F.F64")).count();
    if fp64_ops + conversions == 0.0 {
        return quiet("no fp64 instructions or conversions in the SASS");
    }
    let reads_64bit = s.mix.global_load_bits.contains_key("64");
    if promotions == 0 && reads_64bit {
        return quiet("fp64 arithmetic on 64-bit data without float promotions: intended double precision");
    }
    // Issue cost relative to an FP32 instruction on Hopper: DFMA runs at half the FP32
    // rate, conversions to and from fp64 at an eighth (16 per SM per clock).
    let cost = 2.0 * fp64_ops + 8.0 * conversions;
    let share = cost / (s.instructions as f64 - fp64_ops - conversions + cost).max(1.0);
    // The chains also serialize through the XU pipe, so even an issue-light kernel pays.
    let saving = share * (0.5 + 0.5 * k.issue_weight());
    let lines = s.finding("fp64").map(|f| f.lines.clone()).unwrap_or_default();
    let at = lines.first().map(|l| format!(" at {l}")).unwrap_or_default();
    fired(
        Diagnosis::new("fp64-in-fp32", saving)
            .ev("fp64_instructions", fp64_ops)
            .ev("fp64_conversions", conversions)
            .ev("float_promotions", promotions as f64)
            .ev("issue_cost_share", share)
            .ev("fp64_pipe_pct", k.opt(m::FP64_PIPE_PCT).unwrap_or(0.0))
            .ev("xu_pipe_pct", k.opt(m::XU_PCT).unwrap_or(0.0))
            .analysis(format!(
                "{fp64_ops:.0} fp64 instructions and {conversions:.0} conversions to or from fp64{at} in a kernel whose data is float: a double literal or a double math call promotes the expression. They take {} of the issue cost (DFMA at half rate, F2F.F64 at an eighth) and lengthen every dependency chain.",
                pct(share)
            ))
            .prescription(format!("Keep the arithmetic in float: write float literals (0.5f, 1.0001f), call float math (sinf, expf, or __sinf/__expf when the tolerance allows) instead of sin/exp on a promoted value, and keep intermediates in float variables{at}."))
            .at(&lines),
    )
}

fn warp_divergence(k: &Kernel, _: &Roofline) -> ToolResult {
    let ratio = k.m(m::THREADS_PER_INST)?;
    let efficiency = ratio / 32.0;
    let divergent = k.opt(m::DIVERGENT_TARGETS).unwrap_or(0.0);
    if efficiency >= 0.9 {
        return quiet(format!("{ratio:.1} of 32 threads active per instruction"));
    }
    if divergent == 0.0 && k.sass.is_some_and(|s| s.predicated_ratio < 0.3) {
        return quiet(format!(
            "{ratio:.1} threads per instruction, but no divergent branches: idle lanes come from partial warps"
        ));
    }
    let saving = (1.0 - efficiency) * k.issue_weight().max(0.3);
    let lines = k.lines_of_sites(&["branch"]);
    fired(
        Diagnosis::new("warp-divergence", saving)
            .ev("threads_per_instruction", ratio)
            .ev("simt_efficiency", efficiency)
            .ev("divergent_branch_targets", divergent)
            .ev("issue_active_pct", k.opt(m::ISSUE_ACTIVE).unwrap_or(0.0))
            .analysis(format!(
                "Warps execute {ratio:.1} of 32 threads per instruction ({} SIMT efficiency); {} branch targets diverged: lanes of one warp take different paths, and each path runs with the other lanes masked off.",
                pct(efficiency),
                count(divergent)
            ))
            .prescription("Make the branch uniform within a warp: branch on the warp index (threadIdx.x / 32) or on data sorted so a warp shares one path, not on lane parity; for short bodies compute both sides and select without branching.")
            .at(&lines),
    )
}

fn atomic_contention(k: &Kernel, r: &Roofline) -> ToolResult {
    let global = global_atomic_contention(k)?;
    let shared = shared_atomic_contention(k, r);
    match (global, shared) {
        (Some(g), Some(s)) => fired(if s.score >= g.score { s } else { g }),
        (Some(d), None) | (None, Some(d)) => fired(d),
        (None, None) => quiet(if k.opt(m::SHARED_ATOM_INST).unwrap_or(0.0) > 0.0 {
            "global and shared atomics are few or uncontended"
        } else {
            "no contended global atomics, no shared atomics"
        }),
    }
}

fn global_atomic_contention(k: &Kernel) -> Result<Option<Diagnosis>, Missing> {
    let atomics = k.m0(m::GLOBAL_RED)? + k.m0(m::GLOBAL_ATOM)?;
    if atomics == 0.0 {
        return Ok(None);
    }
    let others = k.opt(m::LD_REQUESTS).unwrap_or(0.0) + k.opt(m::ST_REQUESTS).unwrap_or(0.0);
    let share = atomics / (atomics + others);
    let waits = k.stall_share(&["long_scoreboard", "short_scoreboard", "lg_throttle"]).unwrap_or(0.5);
    let saving = waits * (2.0 * share).min(1.0);
    if saving < 0.03 {
        return Ok(None);
    }
    let lines = k.lines_of(&[Class::Atomic]);
    Ok(Some(
        Diagnosis::new("atomic-contention", saving)
            .ev("global_atomic_requests", atomics)
            .ev("share_of_global_requests", share)
            .ev("memory_wait_stall_share", waits)
            .ev("l2_atomic_requests", k.opt("lts__t_requests_srcunit_tex_op_red.sum").unwrap_or(0.0) + k.opt("lts__t_requests_srcunit_tex_op_atom.sum").unwrap_or(0.0))
            .analysis(format!(
                "{} global atomic or reduction requests, {} of all global requests; warps spend {} of their stall time waiting on memory results. Updates to a few hot addresses serialize in L2: each waits for the one before.",
                count(atomics),
                pct(share),
                pct(waits)
            ))
            .prescription("Privatize the counters: accumulate per block in shared memory (atomicAdd on __shared__ bins, after warp aggregation with __match_any_sync / __reduce_add_sync so one lane per distinct bin updates), then add each block's partial result to global memory once per bin.")
            .at(&lines),
    ))
}

/// Shared-memory atomics that serialize: lanes of a warp on the same address replay
/// (more wavefronts than instructions), and float atomics without a native shared
/// instruction become compare-and-swap loops that retry under contention.
fn shared_atomic_contention(k: &Kernel, _: &Roofline) -> Option<Diagnosis> {
    let executed = k.opt(m::SHARED_ATOM_INST).filter(|x| *x > 0.0)?;
    let wavefronts = k.opt(m::SHARED_ATOM_WAVEFRONTS).unwrap_or(executed);
    let total = k.opt(m::INST_EXECUTED)?;
    let cas_loop = k.sass.and_then(|s| {
        s.loops.iter().find(|l| {
            l.mix.count(Class::Atomic) > 0
                && s.sites.get("atomic").is_some_and(|v| {
                    v.iter().any(|x| x.offset >= l.start && x.offset <= l.end && x.opcode.starts_with("ATOMS.CAS"))
                })
                && l.instructions <= 12
        })
    });
    // A retry loop executes its whole body per attempt; a native atomic one instruction.
    let per_attempt = cas_loop.map(|l| l.instructions as f64).unwrap_or(1.0);
    let atom_share = (executed * per_attempt / total).min(1.0);
    let replays = wavefronts / executed;
    let waits = k.stall_share(&["short_scoreboard", "mio_throttle"]).unwrap_or(0.5);
    let serialized = if cas_loop.is_some() { 1.0 } else { (1.0 - 1.0 / replays).max(0.0) };
    let saving = atom_share * serialized * waits.max(0.3);
    if saving < 0.05 {
        return None;
    }
    let lines = k.lines_of(&[Class::Atomic]);
    let how = match cas_loop {
        Some(l) => format!(
            "Float atomicAdd on shared memory compiles to a compare-and-swap retry loop ({} instructions per attempt, ATOMS.CAS): lanes that hit the same bin fail and retry one after another",
            l.instructions
        ),
        None => format!("Lanes of a warp that hit the same shared address are replayed: {replays:.1} wavefronts per atomic instruction"),
    };
    Some(
        Diagnosis::new("atomic-contention", saving)
            .ev("shared_atomic_instructions", executed)
            .ev("shared_atomic_wavefronts", wavefronts)
            .ev("wavefronts_per_instruction", replays)
            .ev("share_of_executed_instructions", atom_share)
            .ev("shared_wait_stall_share", waits)
            .ev("cas_retry_loop", if cas_loop.is_some() { 1.0 } else { 0.0 })
            .analysis(format!(
                "{how}. Shared atomics and their retries are {} of the instructions executed ({} atomic instructions), and warps spend {} of their stall time waiting on shared-memory results.",
                pct(atom_share),
                count(executed),
                pct(waits)
            ))
            .prescription("Aggregate before the atomic: keep per-thread partial sums in registers when the bins are few (one register per bin), or combine lanes with the same bin first (__match_any_sync, then __reduce_add_sync or a shuffle reduction) so one lane per distinct bin and warp updates shared memory; with many bins, give each warp its own sub-histogram and merge them at the end.")
            .at(&lines),
    )
}

fn no_tensor_cores(k: &Kernel, _: &Roofline) -> ToolResult {
    let s = k.sass()?;
    if s.count(Class::Tensor) > 0 {
        return quiet(format!("{} tensor instructions already in the SASS", s.count(Class::Tensor)));
    }
    if let Some(t) = k.opt(m::TENSOR_PCT).filter(|t| *t > 1.0) {
        return quiet(format!("tensor pipe {t:.1}% active"));
    }
    // A multiply-accumulate loop over loaded operands is the shape tensor cores serve.
    let mac_loop = s.loops.iter().find(|l| {
        let fp = l.mix.count(Class::Fp32) + l.mix.count(Class::Fp16);
        let loads = l.mix.count(Class::GlobalLoad) + l.mix.count(Class::SharedLoad);
        loads > 0 && fp > 0 && 4 * fp >= loads && l.mix.count(Class::Mufu) == 0
    });
    let Some(lp) = mac_loop else {
        return quiet("no loop multiplies loaded operands");
    };
    let flops = k.achieved_flops();
    let dur = k.opt(m::DURATION);
    let ai = match (flops, k.dram_bytes(), dur) {
        (Some(f), Some(b), Some(t)) if b > 0.0 => Some(f * t / b),
        _ => None,
    };
    if let Some(ai) = ai.filter(|a| *a < 8.0) {
        return quiet(format!("{ai:.1} FLOP per DRAM byte: too little reuse for tensor cores to pay"));
    }
    let cc = k.device.compute_capability.map(|c| c.0).unwrap_or(9);
    let accuracy = k.hints.accuracy.as_ref();
    let (path, per_clock) = match accuracy {
        Some(a) => crate::precision::fastest_admissible(a, cc),
        None => (crate::precision::MathPath::Tf32, crate::precision::MathPath::Tf32.flops_per_sm_clock(cc)),
    };
    if path == crate::precision::MathPath::Fp32Fma {
        return quiet(format!(
            "the task's rtol {:.0e} admits no tensor-core path for its data: FFMA stays",
            accuracy.map(|a| a.rtol).unwrap_or(0.0)
        ));
    }
    let peak = match (k.device.sms, k.device.sm_clock_hz) {
        (Some(n), Some(hz)) => Some(n * hz * per_clock),
        _ => None,
    };
    let mut saving = match (flops, peak) {
        (Some(f), Some(p)) if p > 0.0 => (1.0 - f / (0.6 * p)).clamp(0.0, 0.9),
        _ => 0.3,
    };
    // Tensor cores need operands staged once and reused; while every FMA still loads
    // its own operands from shared memory, register tiling is the step that pays first.
    let needs_tiling = mac_loop_without_reuse(s).is_some();
    if needs_tiling {
        saving *= 0.5;
    }
    let line = lp.line.clone().map(|l| vec![l]).unwrap_or_default();
    let at = lp.line.as_ref().map(|l| format!(" at {l}")).unwrap_or_default();
    let how = match (path, accuracy) {
        (crate::precision::MathPath::ThreeTf32, Some(a)) => format!(
            "Use 3xTF32: split each fp32 operand into a TF32 high part and a TF32 remainder (hi = tf32(x), lo = tf32(x - hi)) and accumulate lo*hi + hi*lo + hi*hi with mma.sync m16n8k8 TF32 in fp32; it keeps fp32 accuracy (~{:.0e}) at up to 8/3 the FFMA peak. Tensor cores do not round their accumulation to nearest, so over a long K the error drifts one way: accumulate each k tile in fresh fragments and add them to the running sum with FADD (on an H100 at K = 4096 that took gemm_f32's max error from 7e-3 to 1.2e-4). Plain TF32 (~{:.0e} relative) fails this task's rtol {:.0e}.",
            crate::precision::MathPath::ThreeTf32.unit_roundoff(),
            crate::precision::MathPath::Tf32.unit_roundoff(),
            a.rtol
        ),
        (crate::precision::MathPath::Tf32, Some(a)) => format!(
            "Use TF32 tensor cores (mma.sync m16n8k8 .tf32, or wmma with precision::tf32): the task's rtol {:.0e} admits TF32's ~5e-4 relative rounding.",
            a.rtol
        ),
        (crate::precision::MathPath::Half, _) => "Use 16-bit tensor cores with fp32 accumulation (mma.sync / wmma on half or bf16 fragments; wgmma on sm_90a).".to_string(),
        _ => "Use mma.sync / wmma (TF32 for float data, or bf16/fp16 inputs with fp32 accumulation). TF32 keeps 10 mantissa bits (~5e-4 relative): check the task's tolerance, or split into 3xTF32 for fp32 accuracy.".to_string(),
    };
    let first = if needs_tiling { "After register tiling (register-tiling), move" } else { "Move" };
    let d = Diagnosis::new("no-tensor-cores", saving)
        .ev("achieved_gflops", flops.unwrap_or(0.0) / 1e9)
        .ev("admissible_path", path.name())
        .ev("admissible_peak_tflops", peak.unwrap_or(0.0) / 1e12)
        .ev("flop_per_dram_byte", ai.unwrap_or(0.0))
        .ev("tensor_pipe_pct", k.opt(m::TENSOR_PCT).unwrap_or(0.0))
        .ev("fma_pipe_pct", k.opt(m::FMA_PIPE_PCT).unwrap_or(0.0))
        .ev("loop_fp_instructions", (lp.mix.count(Class::Fp32) + lp.mix.count(Class::Fp16)) as f64)
        .ev("loop_loads", (lp.mix.count(Class::GlobalLoad) + lp.mix.count(Class::SharedLoad)) as f64)
        .analysis(format!(
            "The multiply-accumulate loop{at} runs on the FMA pipe at {:.0} GFLOP/s while the tensor pipe is idle; {} offer ~{:.0} TFLOP/s here{}{}.",
            flops.unwrap_or(0.0) / 1e9,
            path.name(),
            peak.unwrap_or(0.0) / 1e12,
            if accuracy.is_some() { " within the task's tolerance" } else { " (the task's tolerance is unknown: TF32 assumed)" },
            ai.map(|a| format!(", and {a:.0} FLOP per DRAM byte shows the reuse they need")).unwrap_or_default()
        ))
        .prescription(format!(
            "{first} the product onto tensor cores: stage A and B tiles in shared memory and feed mma.sync fragments from them (ldmatrix); on sm_90a use wgmma fed from shared-memory descriptors. {how}"
        ))
        .at(&line);
    fired(if needs_tiling { d.cap(Severity::Medium) } else { d })
}

fn barrier_stalls(k: &Kernel, _: &Roofline) -> ToolResult {
    let share = k.stall_share(&["barrier"]).ok_or_else(|| Missing(vec![m::stall("barrier")]))?;
    if share < 0.15 {
        return quiet(format!("barrier stalls are {} of stall time", pct(share)));
    }
    let lines =
        k.sass.map(|s| s.finding("barrier-in-loop").map(|f| f.lines.clone()).unwrap_or_default()).unwrap_or_default();
    let lines = if lines.is_empty() { k.lines_of(&[Class::Barrier]) } else { lines };
    let d = Diagnosis::new("barrier-stalls", 0.5 * share)
        .ev("barrier_stall_share", share)
        .ev("barriers_per_block", k.opt("launch__barrier_count").unwrap_or(0.0))
        .analysis(format!("Warps spend {} of their stall time waiting at block barriers (__syncthreads): every barrier waits for the block's slowest warp, and little work happens between barriers.", pct(share)))
        .prescription("Do more work per barrier: give each thread several elements between __syncthreads (e.g. 32x8 threads per 32x32 tile, 4 rows each), double-buffer shared tiles so the next load overlaps the current compute, and use __syncwarp when only one warp shares the data.")
        .at(&lines);
    fired(if share < 0.5 { d.cap(Severity::Medium) } else { d })
}

fn special_function_bound(k: &Kernel, _: &Roofline) -> ToolResult {
    let mufu = k.sass()?.count(Class::Mufu);
    if mufu == 0 {
        return quiet("no MUFU instructions");
    }
    let xu = k.m(m::XU_PCT)?;
    if xu < 30.0 {
        return quiet(format!("XU pipe {xu:.0}% busy"));
    }
    let lines = k.lines_of(&[Class::Mufu]);
    fired(
        Diagnosis::new("special-function-bound", 0.5 * xu / 100.0)
            .ev("mufu_instructions", mufu as f64)
            .ev("xu_pipe_pct", xu)
            .analysis(format!("The special-function pipe (XU: exp, log, sin, reciprocal, sqrt at 16 per SM per clock) is {xu:.0}% busy with {mufu} MUFU instructions in the code."))
            .prescription(format!("Use the fast intrinsics where the tolerance allows (__expf, __logf, __sinf: {}), write exp(x) as exp2f(x * log2e) with the constant folded into a preceding multiply, and compute one reciprocal and multiply instead of dividing repeatedly.", crate::precision::fast_math_verdict(k.hints.accuracy.as_ref()).1))
            .at(&lines),
    )
}

fn memory_latency_bound(k: &Kernel, r: &Roofline) -> ToolResult {
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
    let eligible = k.opt(m::ELIGIBLE).unwrap_or(0.0);
    let saving = 0.5 * long * (1.0 - dram / 60.0).max(0.0);
    let lines = k.lines_of(&[Class::GlobalLoad]);
    fired(
        Diagnosis::new("memory-latency-bound", saving)
            .ev("dram_pct", dram)
            .ev("issue_active_pct", issue)
            .ev("long_scoreboard_stall_share", long)
            .ev("eligible_warps_per_cycle", eligible)
            .analysis(format!(
                "Warps wait on global loads ({} of stall time) while DRAM runs at only {dram:.0}% and schedulers issue {issue:.0}% of cycles ({eligible:.2} eligible warps per cycle): too few requests are in flight to cover DRAM latency.",
                pct(long)
            ))
            .prescription("Put more bytes in flight: have each thread issue several independent loads before using any (unroll by 4 or load 16 bytes at a time), keep at least 4 blocks resident per SM, and prefetch the next tile (cp.async) while computing on the current one.")
            .at(&lines),
    )
}

fn redundant_dram_traffic(k: &Kernel, r: &Roofline) -> ToolResult {
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
        Diagnosis::new("redundant-dram-traffic", saving)
            .ev("dram_bytes", bytes)
            .ev("min_bytes", min)
            .ev("ratio", ratio)
            .analysis(format!("DRAM moves {} bytes, {ratio:.2}x the {} bytes the task needs at minimum: data is read more than once or written and re-read.", count(bytes), count(min)))
            .prescription("Read each input once: fuse passes over the same data (keep a row or tile in registers or shared memory between them), avoid writing intermediates to global memory, and order blocks so reused data is still in L2."),
    )
}

fn redundant_l2_traffic(k: &Kernel, _: &Roofline) -> ToolResult {
    let l2_read = k.m0("lts__t_sectors_srcunit_tex_op_read.sum")?;
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
        Diagnosis::new("redundant-l2-traffic", saving)
            .ev("l2_read_sectors", l2_read)
            .ev("dram_read_sectors", dram_read)
            .ev("reads_per_dram_read", ratio)
            .ev("l2_pct", l2_pct)
            .analysis(format!(
                "L2 serves {ratio:.1}x as many sectors as DRAM supplies ({} against {}): the kernel reads the same data several times and L2, {l2_pct:.0}% busy, absorbs the re-reads.",
                count(l2_read),
                count(dram_read)
            ))
            .prescription("Read each element once: keep the row or tile in registers (or shared memory) across passes (max, sum, normalize in one sweep), or fuse the passes with an online algorithm (running max and rescaled sum).")
            .at(&lines),
    )
}

fn async_copy_opportunity(k: &Kernel, _: &Roofline) -> ToolResult {
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
        Diagnosis::new("async-copy-opportunity", 0.15 * k.memory_weight())
            .ev("loop_global_loads", lp.mix.count(Class::GlobalLoad) as f64)
            .ev("loop_shared_stores", lp.mix.count(Class::SharedStore) as f64)
            .ev("loop_barriers", lp.barriers as f64)
            .analysis("A loop copies global data into shared memory through registers (LDG then STS) and waits at a barrier each iteration: the copy and the compute do not overlap.")
            .prescription("Copy asynchronously and pipeline: cp.async (cuda::memcpy_async / __pipeline_memcpy_async) or a TMA bulk tensor copy on sm_90 into 2-3 shared-memory stages, waiting only for the stage about to be used.")
            .at(&line),
    )
}

/// Integer share a lean kernel still has (addresses, loop counters, predicates).
const LEAN_INTEGER_SHARE: f64 = 0.25;
/// Issue utilization at which a kernel counts as issue-bound (dual issue is rare, so
/// schedulers saturate well below 100%).
const ISSUE_BOUND_PCT: f64 = 70.0;

fn integer_overhead(k: &Kernel, _: &Roofline) -> ToolResult {
    let s = k.sass()?;
    let share = s.count(Class::Int) as f64 / (s.instructions.max(1)) as f64;
    if share < 0.5 {
        return quiet(format!("integer instructions are {} of the code", pct(share)));
    }
    // Issue-bound, time follows instructions: trimming the integer work to a lean share
    // removes 1 - (1 - share) / (1 - lean) of them. Otherwise the static share (which
    // counts cold paths too, such as a range reduction's slow branch) is only a hint.
    let issue = k.opt(m::ISSUE_ACTIVE).unwrap_or(50.0);
    let saving = if issue >= ISSUE_BOUND_PCT - 10.0 {
        (1.0 - (1.0 - share) / (1.0 - LEAN_INTEGER_SHARE)).max(0.0) * (issue / ISSUE_BOUND_PCT).min(1.0)
    } else {
        (share - 0.4) * k.issue_weight()
    };
    fired(
        Diagnosis::new("integer-overhead", saving)
            .ev("integer_share", share)
            .ev("integer_instructions", s.count(Class::Int) as f64)
            .ev("instructions", s.instructions as f64)
            .ev("issue_active_pct", issue)
            .analysis(format!("{} of the instructions are integer arithmetic (index math, 64-bit address arithmetic, division and modulo sequences) competing with the real work for issue slots, and the schedulers issue {issue:.0}% of cycles: time follows the instruction count.", pct(share)))
            .prescription("Trim index math per element: process several elements per thread (8 bf16 or 4 floats per 16-byte access) so the index, bounds and address work is paid once per group, hoist invariant address computations out of loops, advance pointers instead of recomputing offsets, replace / and % (a 64-bit % is a ~20-instruction sequence) by shifts and masks for power-of-two sizes, a row loop, or precomputed reciprocals, and use 32-bit indices where sizes allow."),
    )
}

fn conversion_overhead(k: &Kernel, _: &Roofline) -> ToolResult {
    let s = k.sass()?;
    let fp64_conv = s.fp64_conversions() as u64;
    let conv = s.count(Class::Conversion).saturating_sub(fp64_conv);
    let share = conv as f64 / s.instructions.max(1) as f64;
    if share < 0.08 {
        return quiet(format!("{conv} conversions ({})", pct(share)));
    }
    let lines = k.lines_of(&[Class::Conversion]);
    fired(
        Diagnosis::new("conversion-overhead", share * k.issue_weight())
            .ev("conversions", conv as f64)
            .ev("share", share)
            .analysis(format!("{conv} type conversions (I2F, F2I, F2F) are {} of the instructions; they issue at a quarter of the FP32 rate or less.", pct(share)))
            .prescription("Convert once: keep loop counters and indices in the type they are used as, convert packed data with the paired intrinsics (__floats2bfloat162_rn, __half22float2), and hoist conversions of invariants out of loops.")
            .at(&lines),
    )
}

fn launch_overhead(k: &Kernel, _: &Roofline) -> ToolResult {
    let dur = k.m(m::DURATION)?;
    let limit = 5e-6;
    if dur >= limit {
        return quiet(format!("{:.1} us per launch", dur * 1e6));
    }
    fired(
        Diagnosis::new("launch-overhead", 0.5 * (limit - dur) / limit)
            .ev("duration_us", dur * 1e6)
            .analysis(format!("The kernel runs {:.2} us, about as long as launching it (2-4 us of host and front-end work): launch latency, not the kernel, sets the pace.", dur * 1e6))
            .prescription("Fuse it with the kernels before or after it, capture the sequence in a CUDA graph, or make one persistent kernel process several batches.")
            .cap(Severity::Medium),
    )
}

fn at_roofline(_: &Kernel, r: &Roofline) -> ToolResult {
    if r.class != Bound::AtRoofline {
        return quiet(format!("{}: not at a roofline", r.class.name()));
    }
    let dram = r.dram_pct.unwrap_or(0.0);
    fired(
        Diagnosis::new("at-roofline", 0.0)
            .ev("dram_pct", dram)
            .ev("dram_gbs", r.dram_gbs.unwrap_or(0.0))
            .ev("duration_us", r.duration_us.unwrap_or(0.0))
            .ev("floor_us", r.floor_us.unwrap_or(0.0))
            .analysis(format!(
                "DRAM runs at {dram:.0}% of its theoretical peak ({:.0} GB/s), within reach of the ~90% that is attainable in practice{}.",
                r.dram_gbs.unwrap_or(0.0),
                match (r.floor_us, r.duration_us) {
                    (Some(f), Some(d)) => format!("; {d:.1} us against a floor of {f:.1} us for the task's bytes"),
                    _ => String::new(),
                }
            ))
            .prescription("Little is left in this kernel as written: only moving fewer bytes helps now (fuse it with its producer or consumer, narrower data types, avoid re-reading).")
            .cap(Severity::Info),
    )
}

fn roofline(_: &Kernel, r: &Roofline) -> ToolResult {
    let advice = match r.class {
        Bound::AtRoofline => "Cut the bytes, not the instructions.",
        Bound::MemoryBound => "Cut the bytes moved through the busiest memory unit, or move them more efficiently (coalesced, wide, reused from shared memory).",
        Bound::ComputeBound => "Cut instructions on the busiest pipe, or move the work to a faster unit (tensor cores, fast intrinsics).",
        Bound::LatencyBound => "Put more independent work in flight: more resident warps, more loads per thread before first use, fewer barriers.",
        Bound::Unknown => "Profile with ncu for a bottleneck classification.",
    };
    fired(
        Diagnosis::new("roofline", 0.0)
            .ev("class", r.class.name())
            .ev("limiter", r.limiter.clone())
            .ev("dram_pct", r.dram_pct.unwrap_or(0.0))
            .ev("memory_pct", r.memory_pct.unwrap_or(0.0))
            .ev("compute_pct", r.compute_pct.unwrap_or(0.0))
            .ev("flop_per_dram_byte", r.arithmetic_intensity.unwrap_or(0.0))
            .analysis(format!("{}: {}.", r.class.name(), r.reason))
            .prescription(advice)
            .cap(Severity::Info),
    )
}
