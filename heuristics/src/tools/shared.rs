//! Shared memory and barriers: bank-conflict replays, too many shared accesses per result
//! when L1 or the LSU pipe limits, and warps waiting at block barriers.

use super::arithmetic::mac_loop_without_reuse;
use super::{count, fired, pct, quiet};
use crate::diagnosis::{Diagnosis, Severity, ToolResult};
use crate::facts::{metric as m, Kernel, Missing};
use crate::roofline::Roofline;
use crate::tool_id::ToolId;
use sass::Class;

/// How much a register-resident rewrite typically cuts shared-memory instructions per
/// result (a thread keeping four elements or a 4x4 micro-tile in registers).
pub(super) const REGISTER_REUSE: f64 = 4.0;

/// L1 or the LSU pipe is the busiest unit, its traffic is shared memory, and bank
/// conflicts do not explain it: the kernel issues too many shared accesses per result.
pub(super) fn shared_memory_bound(k: &Kernel, r: &Roofline) -> ToolResult {
    let ld = k.m0(m::SHARED_LD_WAVEFRONTS)?;
    let st = k.m0(m::SHARED_ST_WAVEFRONTS)?;
    let atom = k.opt(m::SHARED_ATOM_WAVEFRONTS).unwrap_or(0.0);
    let shared = ld + st + atom;
    if shared == 0.0 {
        return quiet("no shared-memory traffic");
    }
    let l1 = k.m(m::L1_PCT)?;
    let lsu = k.opt(m::LSU_PCT).unwrap_or(0.0);
    let busy = l1.max(lsu);
    if busy < 60.0 {
        return quiet(format!("L1 {l1:.0}% and LSU pipe {lsu:.0}% busy: shared memory does not limit"));
    }
    let global = k.opt(m::LD_SECTORS).unwrap_or(0.0) + k.opt(m::ST_SECTORS).unwrap_or(0.0);
    let shared_share = shared / (shared + global);
    if shared_share < 0.5 {
        return quiet(format!("L1 is busy with global traffic ({} of its wavefronts are shared)", pct(shared_share)));
    }
    let conflicts = k.opt(m::SHARED_LD_CONFLICTS).unwrap_or(0.0) + k.opt(m::SHARED_ST_CONFLICTS).unwrap_or(0.0);
    if conflicts > 0.2 * (ld + st) {
        return quiet("bank-conflict replays are a large part of the traffic: shared-bank-conflicts covers it");
    }
    if atom > 0.3 * shared {
        return quiet("shared atomics make up the traffic: atomic-contention covers it");
    }
    if let Some(s) = k.sass {
        if mac_loop_without_reuse(s).is_some() {
            return quiet("a multiply-accumulate loop loads an operand per FMA: register-tiling covers it");
        }
    }
    let fma = k.opt(m::FMA_PIPE_PCT).unwrap_or(0.0) / 100.0;
    let saving = (1.0 - (busy / 100.0 / REGISTER_REUSE).max(fma)) * shared_share;
    let barriers = k.stall_share(&["barrier"]).unwrap_or(0.0);
    let lines = k.lines_of(&[Class::SharedLoad, Class::SharedStore]);
    fired(
        Diagnosis::new(ToolId::SharedMemoryBound, saving)
            .ev("l1_pct", l1)
            .ev("lsu_pipe_pct", lsu)
            .ev("shared_wavefronts", shared)
            .ev("shared_share_of_l1", shared_share)
            .ev("fma_pipe_pct", 100.0 * fma)
            .ev("barrier_stall_share", barriers)
            .analysis(format!(
                "Shared memory is the bottleneck ({}: L1 {l1:.0}% and the LSU pipe {lsu:.0}% busy, {} of L1 wavefronts \
                    are shared-memory accesses, without bank conflicts): every result costs several shared loads and \
                    stores while the FMA pipe runs at {:.0}%.",
                r.limiter,
                pct(shared_share),
                100.0 * fma
            ))
            .prescription(
                "Cut shared-memory accesses per result: have each thread keep several consecutive elements \
                in registers and exchange only the edges through shared memory (or with \
                __shfl_up_sync/__shfl_down_sync inside a warp), read 8 or 16 bytes per shared access (float2/float4), \
                and fuse several rounds per barrier. Aim for one shared access per several FMAs.",
            )
            .at(&lines),
    )
}

/// The average conflict degree of the worse direction (loads or stores): each conflict
/// counter is the wavefronts beyond one per ideal pass, so wavefronts over their ideal
/// part is how many ways an access splits (32 for a column walk of a 32x32 float tile).
/// ncu's own `derived__memory_l1_conflicts_shared_nway` comes only with SourceCounters'
/// instrumented passes; on every capture that has both, the hardware conflicts were at
/// least ncu's excess wavefronts.
fn conflict_ways(directions: [(f64, f64); 2]) -> Option<f64> {
    directions
        .iter()
        .filter(|(waves, conflicts)| *conflicts > 0.0 && waves > conflicts)
        .map(|(waves, conflicts)| waves / (waves - conflicts))
        .max_by(f64::total_cmp)
}

pub(super) fn shared_bank_conflicts(k: &Kernel, _: &Roofline) -> ToolResult {
    let wave_ld = k.m0(m::SHARED_LD_WAVEFRONTS)?;
    let wave_st = k.m0(m::SHARED_ST_WAVEFRONTS)?;
    let waves = wave_ld + wave_st;
    if waves == 0.0 {
        return quiet("no shared-memory loads or stores");
    }
    let (conflict_ld, conflict_st) = (k.m0(m::SHARED_LD_CONFLICTS)?, k.m0(m::SHARED_ST_CONFLICTS)?);
    let excess = (conflict_ld + conflict_st).min(waves);
    let frac = excess / waves;
    let ways = conflict_ways([(wave_ld, conflict_ld), (wave_st, conflict_st)]);
    if frac < 0.2 {
        return quiet(format!(
            "{} of shared wavefronts are conflict replays{}",
            pct(frac),
            ways.map(|w| format!(" ({w:.1}-way on average, the worse of loads and stores)")).unwrap_or_default()
        ));
    }
    let saving = frac * k.shared_weight();
    let lines = k.lines_of(&[Class::SharedLoad, Class::SharedStore]);
    let ways_text = ways.map(|w| format!("{w:.0}-way")).unwrap_or_else(|| "multi-way".into());
    fired(
        Diagnosis::new(ToolId::SharedBankConflicts, saving)
            .ev("conflict_ways", ways.unwrap_or(0.0))
            .ev("excess_wavefronts", excess)
            .ev("shared_wavefronts", waves)
            .ev("excess_fraction", frac)
            .ev("shared_stall_share", k.shared_weight())
            .analysis(format!(
                "Shared-memory accesses hit the same bank {ways_text}: {} of {} wavefronts ({}) are replays, each a \
                    serialized pass through the 32 banks; warps spend {} of their stall time on shared memory and \
                    barriers.",
                count(excess),
                count(waves),
                pct(frac),
                pct(k.shared_weight())
            ))
            .prescription(
                "Pad the shared tile by one element per row (float tile[32][33]) so a column walk lands in 32 \
                    different banks, or XOR-swizzle the column index (col ^ row) when padding breaks vector accesses; \
                    for 16-byte accesses pad by 16 bytes.",
            )
            .at(&lines),
    )
}

pub(super) fn barrier_stalls(k: &Kernel, _: &Roofline) -> ToolResult {
    let share = k.stall_share(&["barrier"]).ok_or_else(|| Missing(vec![m::stall("barrier")]))?;
    if share < 0.15 {
        return quiet(format!("barrier stalls are {} of stall time", pct(share)));
    }
    let lines =
        k.sass.map(|s| s.finding("barrier-in-loop").map(|f| f.lines.clone()).unwrap_or_default()).unwrap_or_default();
    let lines = if lines.is_empty() { k.lines_of(&[Class::Barrier]) } else { lines };
    let d = Diagnosis::new(ToolId::BarrierStalls, 0.5 * share)
        .ev("barrier_stall_share", share)
        .ev("barriers_per_block", k.opt(m::BARRIER_COUNT).unwrap_or(0.0))
        .analysis(format!(
            "Warps spend {} of their stall time waiting at block barriers (__syncthreads): every barrier \
            waits for the block's slowest warp, and little work happens between barriers.",
            pct(share)
        ))
        .prescription(
            "Do more work per barrier: give each thread several elements between __syncthreads (e.g. 32x8 \
            threads per 32x32 tile, 4 rows each), double-buffer shared tiles so the next load overlaps the current \
            compute, and use __syncwarp when only one warp shares the data.",
        )
        .at(&lines);
    fired(if share < 0.5 { d.cap(Severity::Medium) } else { d })
}

#[cfg(test)]
mod tests {
    use super::conflict_ways;

    #[test]
    fn conflict_ways_are_the_worse_directions_wavefronts_over_their_ideal_part() {
        // An H200 capture of a 32x32 float tile read down its columns: loads replay 32
        // times, stores barely.
        let ways = conflict_ways([(4_213_605.0, 4_082_533.0), (138_777.0, 7_705.0)]).unwrap();
        assert!((32.0..32.2).contains(&ways), "{ways}");
        // No conflicts, or counters that make no sense, give no figure rather than a guess.
        assert_eq!(conflict_ways([(1000.0, 0.0), (0.0, 0.0)]), None);
        assert_eq!(conflict_ways([(10.0, 10.0), (5.0, 9.0)]), None);
    }
}
