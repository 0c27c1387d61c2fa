//! Too little work in flight or too little per launch: registers, occupancy, grid size,
//! launch latency.

use super::{fired, pct, quiet};
use crate::diagnosis::{Diagnosis, Severity, ToolResult};
use crate::facts::{metric as m, Kernel, Missing};
use crate::roofline::{Bound, Roofline};
use crate::tool_id::ToolId;

pub(super) fn register_pressure(k: &Kernel, _: &Roofline) -> ToolResult {
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
        Diagnosis::new(ToolId::RegisterPressure, saving)
            .ev("registers_per_thread", regs)
            .ev("spill_bytes", spills as f64)
            .ev("blocks_per_sm_by_registers", limit_regs.unwrap_or(0.0))
            .ev("achieved_occupancy_pct", occupancy)
            .analysis(format!(
                "{regs:.0} registers per thread{}{}.",
                if spills > 0 { format!(" and {spills} bytes spilled to local memory") } else { String::new() },
                if binding {
                    format!(
                        "; registers cap residency at {:.0} blocks per \
                    SM",
                        limit_regs.unwrap_or(0.0)
                    )
                } else {
                    String::new()
                }
            ))
            .prescription(
                "Lower the register count: __launch_bounds__(BLOCK, MIN_BLOCKS) lets ptxas target more \
                resident blocks; recompute cheap values instead of keeping them live; split very long unrolled loops; \
                keep per-thread arrays small.",
            ),
    )
}

pub(super) fn low_occupancy(k: &Kernel, r: &Roofline) -> ToolResult {
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
    if theoretical >= 0.5 || !matches!(r.class, Bound::LatencyBound | Bound::ComputeBound) {
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
        Diagnosis::new(ToolId::LowOccupancy, saving)
            .ev("theoretical_occupancy", theoretical)
            .ev("achieved_occupancy_pct", achieved)
            .ev("blocks_per_sm", blocks)
            .ev("limiter", limiter)
            .ev("issue_active_pct", issue)
            .analysis(format!(
                "{limiter} limit residency to {blocks:.0} blocks of {block:.0} threads per SM: {} of the SM's warp \
                    slots at best ({achieved:.0}% achieved), too few warps to hide latency while issue slots sit \
                    {:.0}% idle.",
                pct(theoretical),
                100.0 - issue
            ))
            .prescription(format!(
                "Raise occupancy with {advice}, or add independent work per thread (ILP) so fewer \
                warps suffice."
            )),
    )
}

/// What a partial last wave costs a kernel the pipes limit.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ComputeTail {
    waves: f64,
    /// Resident blocks per SM (ncu's waves are blocks over SMs x this).
    per_sm: f64,
    /// Whole waves before the last.
    full: f64,
    /// Blocks in the last wave.
    last: f64,
    /// The most blocks one SM runs in the last wave, and how many SMs run that many.
    deepest: f64,
    longest_sms: f64,
    /// The last wave's time as a share of a full wave's.
    last_wave_time: f64,
    /// The share of the kernel's time a balanced grid saves.
    saving: f64,
}

/// The tail of a compute-bound grid. Blocks take the same time, and an SM's pipes run as
/// fast with fewer blocks resident (a lone block's warps take the issue slots its absent
/// neighbours leave), so the last wave lasts as long as its busiest SM needs to finish
/// `ceil(last / SMs)` of its `per_sm` blocks. That makes the estimate a lower bound: where
/// a lone block cannot fill the pipes the tail costs more. Memory-bound kernels are not
/// sized this way: the last wave's few SMs draw on all of DRAM.
fn compute_tail(grid: f64, sms: f64, waves: f64) -> Option<ComputeTail> {
    // Fewer blocks than SMs is an under-filled grid, not a tail; a grid of less than a
    // wave that reaches every SM still stacks blocks unevenly.
    if !(grid >= sms && sms > 0.0 && waves > 0.0) {
        return None;
    }
    let per_sm = (grid / (waves * sms)).round().max(1.0);
    let wave = per_sm * sms;
    let full = ((grid - 1.0) / wave).floor();
    let last = grid - full * wave;
    let deepest = (last / sms).ceil();
    let longest_sms = last - (deepest - 1.0) * sms;
    let last_wave_time = (deepest / per_sm).min(1.0);
    let took = full + last_wave_time;
    let need = grid / wave;
    Some(ComputeTail {
        waves: need,
        per_sm,
        full,
        last,
        deepest,
        longest_sms,
        last_wave_time,
        saving: (1.0 - need / took).max(0.0),
    })
}

pub(super) fn under_filled_grid(k: &Kernel, r: &Roofline) -> ToolResult {
    let grid = k.m(m::GRID)?;
    let sms = k.device.sms.ok_or_else(|| Missing(vec![m::SMS.into()]))?;
    let waves = k.opt(m::WAVES);
    let block = k.opt(m::BLOCK).unwrap_or(0.0);
    if grid < sms {
        let saving = (1.0 - grid / sms).min(0.95);
        return fired(
            Diagnosis::new(ToolId::UnderFilledGrid, saving)
                .ev("blocks", grid)
                .ev("sms", sms)
                .ev("block_size", block)
                .ev("waves", waves.unwrap_or(0.0))
                .analysis(format!(
                    "{grid:.0} blocks of {block:.0} threads for {sms:.0} SMs: {:.0} SMs sit idle for the \
                    whole kernel.",
                    sms - grid
                ))
                .prescription(format!(
                    "Launch at least {:.0} blocks (two or more per SM): give each thread or warp less work (one \
                        element per thread with 256-thread blocks, a block per row), or split long per-thread loops \
                        across blocks and combine partial results.",
                    2.0 * sms
                )),
        );
    }
    if r.class == Bound::ComputeBound {
        if let Some(tail) = waves.and_then(|w| compute_tail(grid, sms, w)).filter(|t| t.saving >= 0.05) {
            return fired(
                Diagnosis::new(ToolId::UnderFilledGrid, tail.saving)
                    .ev("blocks", grid)
                    .ev("waves", tail.waves)
                    .ev("blocks_per_sm", tail.per_sm)
                    .ev("blocks_in_last_wave", tail.last)
                    .ev("sms_running_longest", tail.longest_sms)
                    .analysis(format!(
                        "{grid:.0} blocks at {:.0} per SM make {:.2} waves, and the pipes are the limit: the last \
                        wave's {:.0} blocks put {:.0} on {:.0} of the {sms:.0} SMs, which run for {} of a full wave's \
                        time while the rest finish early, so the kernel runs as long as {:.2} waves for {:.2} waves of \
                        work (about {} of its time).",
                        tail.per_sm,
                        tail.waves,
                        tail.last,
                        tail.deepest,
                        tail.longest_sms,
                        pct(tail.last_wave_time),
                        tail.full + tail.last_wave_time,
                        tail.waves,
                        pct(tail.saving)
                    ))
                    .prescription(
                        "Spread the last wave's work over every SM: a persistent grid of exactly SMs x resident \
                        blocks (cudaOccupancyMaxActiveBlocksPerMultiprocessor) with a grid-stride loop over elements, \
                        or finer work items (smaller blocks, or each row or tile split over several blocks) so the \
                        imbalance is a small share of the work.",
                    ),
            );
        }
    } else if let Some(w) = waves.filter(|w| (1.0..4.0).contains(w)) {
        let tail = (w.ceil() - w) / w.ceil();
        if tail >= 0.2 {
            return fired(
                Diagnosis::new(ToolId::UnderFilledGrid, tail * 0.3)
                    .ev("blocks", grid)
                    .ev("waves", w)
                    .ev("idle_fraction_of_last_wave", 1.0 - w.fract())
                    .analysis(format!(
                        "{grid:.0} blocks make {w:.2} waves: the last wave leaves {} of the GPU idle \
                        while it runs.",
                        pct(1.0 - w.fract())
                    ))
                    .prescription(
                        "Size the grid to whole waves (a multiple of SMs x resident blocks), or use a \
                        persistent grid-stride loop with exactly SMs x resident blocks.",
                    )
                    .cap(Severity::Medium),
            );
        }
    }
    quiet(format!("{grid:.0} blocks on {sms:.0} SMs{}", waves.map(|w| format!(", {w:.2} waves")).unwrap_or_default()))
}

/// What one launch costs beyond its kernel when launches follow each other on a stream:
/// host submission and front-end work, measured at 2-4 us on H100 (3 us taken).
const LAUNCH_COST_S: f64 = 3e-6;

pub(super) fn launch_overhead(k: &Kernel, _: &Roofline) -> ToolResult {
    let dur = k.m(m::DURATION)?;
    let limit = 5e-6;
    let n = k.launches_in_call.max(1) as f64;
    // Many launches of one kernel in a call, each shorter than a launch is worth: one
    // launch over all their blocks runs about as long as its waves need.
    if n >= 4.0 && dur < 4.0 * LAUNCH_COST_S {
        let waves = k.opt(m::WAVES).filter(|w| *w > 0.0).unwrap_or(1.0);
        let merged = dur * (n * waves).max(1.0);
        let now = n * dur.max(LAUNCH_COST_S);
        let saving = (1.0 - merged / now).max(0.0);
        if saving >= 0.1 {
            return fired(
                Diagnosis::new(ToolId::LaunchOverhead, saving.min(0.98))
                    .ev("duration_us", dur * 1e6)
                    .ev("launches", n)
                    .ev("waves_per_launch", waves)
                    .analysis(format!(
                        "The call launches this kernel {n:.0} times, {:.2} us each with {} of a wave: launch cost (2-4 \
                            us each) and idle SMs, not the work, set the pace. One launch over all of it would need \
                            about {:.1} us against about {:.0} us now.",
                        dur * 1e6,
                        if waves < 1.0 { format!("{:.0}%", 100.0 * waves) } else { format!("{waves:.1}") },
                        merged * 1e6,
                        now * 1e6
                    ))
                    .prescription(
                        "Launch once over all of it: add the loop's index as a grid dimension (blockIdx.y) \
                        or fold it into the flat index, and pass base pointers and strides instead of offset pointers; \
                        if the launches depend on each other, run the steps in one persistent kernel with a grid-wide \
                        sync, or capture them in a CUDA graph.",
                    ),
            );
        }
    }
    if dur >= limit {
        return quiet(format!("{:.1} us per launch", dur * 1e6));
    }
    fired(
        Diagnosis::new(ToolId::LaunchOverhead, 0.5 * (limit - dur) / limit)
            .ev("duration_us", dur * 1e6)
            .analysis(format!(
                "The kernel runs {:.2} us, about as long as launching it (2-4 us of host and front-end \
                work): launch latency, not the kernel, sets the pace.",
                dur * 1e6
            ))
            .prescription(
                "Fuse it with the kernels before or after it, capture the sequence in a CUDA graph, or make \
                one persistent kernel process several batches.",
            )
            .cap(Severity::Medium),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compute_bound_tail_costs_what_its_busiest_sm_needs() {
        // 300 blocks at 2 per SM on 132 SMs: 1.14 waves; the last 36 blocks sit alone on
        // their SMs for half a wave, so the kernel runs 1.5 waves of time.
        let t = compute_tail(300.0, 132.0, 300.0 / 264.0).unwrap();
        assert_eq!((t.per_sm, t.full, t.last), (2.0, 1.0, 36.0));
        assert!((t.last_wave_time - 0.5).abs() < 1e-12);
        assert!((t.saving - (1.0 - (300.0 / 264.0) / 1.5)).abs() < 1e-12, "{t:?}");
        // One block per SM: the 18 blocks of the second wave take a whole wave's time.
        let one = compute_tail(150.0, 132.0, 150.0 / 132.0).unwrap();
        assert!((one.saving - (1.0 - 150.0 / 264.0)).abs() < 1e-12, "{one:?}");
        // 400 blocks at 2 per SM: the last wave puts 2 blocks on 4 SMs, a full wave.
        let full = compute_tail(400.0, 132.0, 400.0 / 264.0).unwrap();
        assert_eq!(full.last_wave_time, 1.0);
        assert_eq!((full.deepest, full.longest_sms), (2.0, 4.0));
        // Less than a wave that reaches every SM: 200 blocks put 2 on 68 SMs, so the run
        // lasts a wave for 0.76 of one.
        let short = compute_tail(200.0, 132.0, 200.0 / 264.0).unwrap();
        assert_eq!((short.full, short.deepest, short.longest_sms), (0.0, 2.0, 68.0));
        assert!((short.saving - (1.0 - 200.0 / 264.0)).abs() < 1e-12, "{short:?}");
        // Whole waves have no tail; fewer blocks than SMs is under-filled, not a tail.
        assert_eq!(compute_tail(264.0, 132.0, 1.0).unwrap().saving, 0.0);
        assert_eq!(compute_tail(528.0, 132.0, 2.0).unwrap().saving, 0.0);
        assert!(compute_tail(100.0, 132.0, 100.0 / 264.0).is_none());
        assert!(compute_tail(0.0, 132.0, 1.0).is_none());
        assert!(compute_tail(300.0, 132.0, f64::NAN).is_none());
    }
}
