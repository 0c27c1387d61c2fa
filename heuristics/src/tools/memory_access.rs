//! How global memory is accessed: too narrow to fill the memory pipes, or serialized by
//! addresses that come out of earlier loads.

use super::{count, fired, pct, quiet};
use crate::diagnosis::{Diagnosis, ToolResult};
use crate::facts::{metric as m, Kernel};
use crate::roofline::Roofline;
use sass::Class;

/// DRAM throughput a well-fed streaming kernel reaches on Hopper (practical peak).
const ATTAINABLE_DRAM_PCT: f64 = 85.0;

/// 8- and 16-bit global accesses in a kernel that memory or latency limits: a warp moves
/// 32 or 64 bytes per instruction, so it cannot keep enough bytes in flight.
pub(super) fn narrow_global_access(k: &Kernel, _: &Roofline) -> ToolResult {
    let s = k.sass()?;
    let narrow = |h: &std::collections::BTreeMap<String, u64>| -> u64 {
        h.iter().filter(|(b, _)| b.parse::<u32>().unwrap_or(32) < 32).map(|(_, n)| n).sum()
    };
    let all = |h: &std::collections::BTreeMap<String, u64>| -> u64 { h.values().sum() };
    let (nl, ns) = (narrow(&s.mix.global_load_bits), narrow(&s.mix.global_store_bits));
    let total = all(&s.mix.global_load_bits) + all(&s.mix.global_store_bits);
    if nl + ns == 0 || total == 0 {
        return quiet("no 8- or 16-bit global accesses");
    }
    let dram = k.m(m::DRAM_PCT)?;
    let share = (nl + ns) as f64 / total as f64;
    let headroom = (1.0 - dram / ATTAINABLE_DRAM_PCT).max(0.0);
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
        Diagnosis::new("narrow-global-access", saving)
            .ev("narrow_loads", nl as f64)
            .ev("narrow_stores", ns as f64)
            .ev("narrow_share", share)
            .ev("dram_pct", dram)
            .ev("memory_stall_share", k.memory_weight())
            .analysis(format!(
                "{} of the global accesses are narrower than 32 bits ({}): a warp moves at most {} bytes per instruction, so it takes 4-16x the instructions and in-flight requests of 16-byte accesses to move the same data, and DRAM runs at only {dram:.0}% of peak.",
                pct(share),
                widths.join(", "),
                if s.mix.global_load_bits.contains_key("8") || s.mix.global_store_bits.contains_key("8") { 32 } else { 64 },
            ))
            .prescription("Move 16 bytes per thread: reinterpret the byte or half arrays as uint4 / int4 (16 chars or 8 halves per load), process them from registers, and handle the tail that is not a multiple of 16 bytes with a scalar loop. For 16-bit floats use __half2 / __nv_bfloat162 arithmetic on the unpacked pairs.")
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
        Diagnosis::new("dependent-loads", saving)
            .ev("dependent_loads", s.dependent_loads.len() as f64)
            .ev("dependent_loads_in_loops", in_loops as f64)
            .ev("longest_chain", chain as f64)
            .ev("long_scoreboard_stall_share", long)
            .ev("dram_pct", dram)
            .ev("issue_active_pct", issue)
            .analysis(format!(
                "{} global loads take their address from an earlier load's result{}: each thread has one load in flight at a time and waits a full DRAM latency per step. Warps spend {} of their stall time on global loads while DRAM runs at only {dram:.0}% and schedulers issue {issue:.0}% of cycles; the scattered addresses also waste most of each sector, which no coalescing can fix while the next address is unknown.",
                s.dependent_loads.len(),
                if chain >= 2 { format!(" (chains up to {chain} loads deep in a loop)") } else { String::new() },
                pct(long),
            ))
            .prescription(format!(
                "Give the memory system independent work: walk several chains per thread interleaved (p0 = next[p0]; p1 = next[p1]; ... so {} loads are in flight), prefetch the next index while using the current one, or restructure the data so the addresses are known up front (sort or flatten the index, store the chain contiguously). More threads on more chains helps only while {} of DRAM is idle.",
                4,
                pct(headroom.min(1.0))
            ))
            .at(&lines),
    )
}

/// Whether most global loads are dependent loads: their scattered sectors are the chain's
/// cost, not a layout a coalescing fix could repair.
pub(super) fn mostly_dependent(k: &Kernel) -> Option<String> {
    let s = k.sass?;
    let loads = s.count(Class::GlobalLoad);
    let dependent = s.dependent_loads.len() as u64;
    (loads > 0 && 2 * dependent >= loads).then(|| {
        format!(
            "{dependent} of {loads} global loads take their address from a loaded value: the excess sectors ({}) follow from the data, and dependent-loads covers it",
            count(k.opt(m::LD_SECTORS).unwrap_or(0.0))
        )
    })
}
