//! Timing and energy at the bench size. Baseline and candidate are interleaved sample by
//! sample in this one process (alternating which goes first), each sample on its own
//! rotated input set, with outputs poisoned and L2 flushed outside the timed region.
//! Every timed output is verified afterwards, and the event times are cross-checked
//! against a host clock that waits for the whole device. The input sets are
//! `bench_sets`'s, the physical floor `floor`'s, and what a timing says against the
//! candidate beyond its outputs `anomalies`'.

use super::anomalies::{below_floor, escaped_stream, host_cross_check, memoized};
use super::bench_sets::{BenchSets, Sets};
use super::buffers::DeviceCase;
use super::cases;
use super::floor::{achievable_floor_ms, floor_ms};
use super::inputs::HostCase;
use super::{gpu_stop, Entry, Stop, Worker};
use crate::wall::protocol::{
    ClockReport, ColdCheck, Failure, FailureClass, Outcome, SideTiming, TimingPlan, TimingReport,
};
use std::time::Instant;

pub(super) const SIDES: [&str; 2] = ["baseline", "candidate"];

/// What the outputs left in `dev` (by a call after `prepare(_, false)`) say against
/// `refs`: None if right, else the failure, in `role`'s name.
fn verify_outputs(
    w: &Worker,
    role: &str,
    dev: &DeviceCase,
    refs: &[Option<Vec<u8>>],
    host: &HostCase,
) -> Result<Option<Failure>, Stop> {
    let outs = dev.download_outputs(w).map_err(gpu_stop)?;
    Ok(cases::output_mismatch(w, role, &outs, refs, host, false))
}

/// Timing's result: the report, if timing got that far, and the candidate's failure.
pub(crate) struct Timed {
    pub report: Option<TimingReport>,
    pub failure: Option<Failure>,
}

/// Past these a timing is repeated, and if still past them, flagged as unreliable.
pub const NOISY_CV: f64 = 0.10;
pub const NOISY_MEDIAN_SPREAD: f64 = 0.05;

fn noisy(t: &SideTiming) -> bool {
    t.cv > NOISY_CV || t.median_spread() > NOISY_MEDIAN_SPREAD
}

fn clock_snapshot(
    nvml: &Option<crate::wall::nvml::NvmlDevice>,
) -> (Option<u32>, Option<u32>, Vec<String>, Option<u32>) {
    match nvml {
        Some(n) => {
            (n.sm_clock_mhz(), n.memory_clock_mhz(), n.throttle_reasons().unwrap_or_default(), n.temperature_c())
        }
        None => (None, None, Vec::new(), None),
    }
}

pub(super) fn record(ev: &cudarc::driver::CudaEvent, w: &Worker) -> Result<(), Stop> {
    ev.record(&w.gpu.stream).map_err(|e| gpu_stop(crate::wall::gpu::GpuError::from_driver(e, "recording an event")))
}

fn elapsed(a: &cudarc::driver::CudaEvent, b: &cudarc::driver::CudaEvent) -> Result<f64, Stop> {
    a.elapsed_ms(b)
        .map(|ms| ms as f64)
        .map_err(|e| gpu_stop(crate::wall::gpu::GpuError::from_driver(e, "reading an event")))
}

/// Samples per side, all and by round.
type Samples = ([Vec<f64>; 2], [Vec<Vec<f64>>; 2]);

/// Interleaved samples: `pairs` per side per round, rounds until the plan is satisfied.
fn sample(
    w: &mut Worker,
    sets: &mut Sets,
    entries: [&Entry; 2],
    pairs: usize,
    plan: &TimingPlan,
    next_set: &mut [usize; 2],
    fail: &dyn Fn(usize, super::CallError) -> Stop,
) -> Result<Samples, Stop> {
    let starts: Vec<_> = (0..2 * pairs).map(|_| w.gpu.event()).collect::<Result<_, _>>().map_err(gpu_stop)?;
    let ends: Vec<_> = (0..2 * pairs).map(|_| w.gpu.event()).collect::<Result<_, _>>().map_err(gpu_stop)?;
    let mut samples: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut rounds: [Vec<Vec<f64>>; 2] = [Vec::new(), Vec::new()];
    let rounds_min = plan.rounds.max(2);
    let started = Instant::now();
    for round in 0..100 {
        let mut order = Vec::with_capacity(2 * pairs);
        for j in 0..pairs {
            order.extend(if (round + j) % 2 == 0 { [0, 1] } else { [1, 0] });
        }
        for (slot, &side) in order.iter().enumerate() {
            let k = next_set[side] % sets.len();
            next_set[side] += 1;
            let dev = &mut sets.dev[side][k];
            dev.prepare(w, false).map_err(gpu_stop)?;
            w.gpu.flush_l2_async().map_err(gpu_stop)?;
            record(&starts[slot], w)?;
            w.invoke_async(entries[side], &mut dev.values).map_err(|e| fail(side, e))?;
            record(&ends[slot], w)?;
        }
        w.gpu.sync_all().map_err(|e| fail(1, super::CallError::Device(e)))?;
        let mut this_round: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for (slot, &side) in order.iter().enumerate() {
            this_round[side].push(elapsed(&starts[slot], &ends[slot])?);
        }
        for side in 0..2 {
            samples[side].extend_from_slice(&this_round[side]);
            rounds[side].push(std::mem::take(&mut this_round[side]));
        }
        let secs = started.elapsed().as_secs_f64();
        let enough = round + 1 >= rounds_min && samples[1].len() >= plan.min_samples && secs >= plan.min_seconds;
        if enough || (secs >= plan.max_seconds && round + 1 >= 2) {
            break;
        }
    }
    Ok((samples, rounds))
}

/// Times per side on cold sets and on warm sets beside them, and the candidate's failure
/// on a cold set.
struct ColdTimes {
    cold: [Vec<f64>; 2],
    warm: [Vec<f64>; 2],
    failure: Option<Failure>,
}

/// Each cold set once a side, each beside a call on a warm set timed the same way (so
/// that launch overheads and first-touch costs weigh the same on both), interleaved.
fn time_cold(
    w: &mut Worker,
    bench: &mut BenchSets,
    entries: [&Entry; 2],
    fail: &dyn Fn(usize, super::CallError) -> Stop,
) -> Result<ColdTimes, Stop> {
    let mut cold_ms: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut warm_ms: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let (a, b) = (w.gpu.event().map_err(gpu_stop)?, w.gpu.event().map_err(gpu_stop)?);
    let mut failure = None;
    let warm_sets = bench.warm.len();
    for k in 0..bench.cold.len() {
        for side in if k % 2 == 0 { [0, 1] } else { [1, 0] } {
            for cold in if k % 2 == 0 { [false, true] } else { [true, false] } {
                // Each call starts on an idle device: the one before it ended in sync_all.
                let dev = if cold { &mut bench.cold.dev[0][k] } else { &mut bench.warm.dev[side][k % warm_sets] };
                dev.prepare(w, false).map_err(gpu_stop)?;
                w.gpu.flush_l2_async().map_err(gpu_stop)?;
                record(&a, w)?;
                w.invoke_async(entries[side], &mut dev.values).map_err(|e| fail(side, e))?;
                record(&b, w)?;
                w.gpu.sync_all().map_err(|e| fail(side, super::CallError::Device(e)))?;
                let ms = elapsed(&a, &b)?;
                if cold {
                    cold_ms[side].push(ms);
                } else {
                    warm_ms[side].push(ms);
                }
                if cold && side == 1 && failure.is_none() {
                    failure = verify_outputs(
                        w,
                        "candidate",
                        &bench.cold.dev[0][k],
                        &bench.cold.refs[k],
                        &bench.cold.hosts[k],
                    )?
                    .map(|f| f.at_call(entries[1].calls.get()));
                }
            }
        }
    }
    Ok(ColdTimes { cold: cold_ms, warm: warm_ms, failure })
}

/// Times baseline and candidate. The candidate's first call on each input set is
/// verified at once (so a kernel wrong only at the bench size is named as such, and a
/// kernel that goes wrong later is told apart by the call count); every timed output is
/// verified afterwards; cold sets catch memoization; a noisy timing is repeated once and
/// flagged if still noisy.
pub(crate) fn time(
    w: &mut Worker,
    bench: &mut BenchSets,
    reference: &Entry,
    baseline: &Entry,
    candidate: &Entry,
    plan: &TimingPlan,
) -> Result<Timed, Stop> {
    let task = w.task.clone();
    if task.flush_l2 {
        w.gpu.enable_l2_flush().map_err(gpu_stop)?;
    }
    let nvml = crate::wall::nvml::NvmlDevice::open(&w.gpu.info.uuid).map_err(|e| w.notes.push(e.to_string())).ok();
    let others_before = nvml.as_ref().map(|n| n.other_processes()).unwrap_or_default();
    let (sm_before, _, _, _) = clock_snapshot(&nvml);
    let entries = [baseline, candidate];
    let at = format!("bench size {}", task.bench);
    let call_failure = |side: usize, e: super::CallError| -> Stop {
        let f = e.failure(SIDES[side], &at);
        if side == 0 {
            Outcome::TaskError { message: format!("the baseline fails at the bench size: {}", f.message) }
        } else {
            Outcome::Rejected { failure: f }
        }
    };

    let warm = match warm_up(w, bench, entries, &call_failure)? {
        Ok(warm) => warm,
        Err(f) => return Ok(Timed { report: None, failure: Some(f) }),
    };
    let pairs = pairs_per_round(plan, &warm.estimate_ms);
    let (sides, repeats, reliable) = sample_until_steady(w, bench, entries, pairs, plan, &call_failure)?;
    let (mut failure, baseline_ok) = verify_timed(w, bench, candidate, &warm.first_ok_call)?;

    // Inputs never seen before: a cache of results misses here and nowhere else.
    let mut cold_run = time_cold(w, bench, entries, &call_failure)?;
    let mut cold = ColdCheck::new(&cold_run.cold, &cold_run.warm);
    if failure.is_none() && cold_run.failure.is_none() && cold.memoized() {
        // A side gets one call per cold set, so one slow host-side call (a launcher whose
        // writes block on a full pipe) can pass for a cache miss: a cache misses again on
        // sets it has never seen, jitter does not come back on cue.
        bench.renew_cold(w, reference)?;
        cold_run = time_cold(w, bench, entries, &call_failure)?;
        let second = ColdCheck::new(&cold_run.cold, &cold_run.warm);
        if !second.memoized() {
            w.notes.push(format!(
                "fresh input sets ran {:.2}x slower than seen ones (the baseline {:.2}x), and {:.2}x on a second pair of fresh sets: host-side jitter, not a cache",
                cold.candidate_ratio, cold.baseline_ratio, second.candidate_ratio
            ));
        }
        cold = second;
    }
    if failure.is_none() {
        failure = cold_run.failure.map(|f| prefix(f, "on a fresh input set after timing: "));
    }
    let others_after = nvml.as_ref().map(|n| n.other_processes()).unwrap_or_default();
    let (sm_after, mem_mhz, throttle, temperature) = clock_snapshot(&nvml);

    // Host-clock cross-check: work that escapes the stream is invisible to its events.
    let host_check = host_cross_check(w, bench, candidate, warm.estimate_ms[1]).map_err(|e| call_failure(1, e))?;

    let [baseline_t, candidate_t] = sides;
    let floor = floor_ms(&task, &w.gpu.info);
    let achievable_floor = achievable_floor_ms(&task, &w.gpu.info);
    let mut other_processes: Vec<u32> = others_before.into_iter().chain(others_after).collect();
    other_processes.sort_unstable();
    other_processes.dedup();
    note_conditions(w, &other_processes, reliable, &baseline_t, &candidate_t);
    let mut report = TimingReport {
        speedup: baseline_t.median_ms / candidate_t.median_ms,
        pct_of_floor: floor.map(|f| 100.0 * f / candidate_t.median_ms),
        baseline_pct_of_floor: floor.map(|f| 100.0 * f / baseline_t.median_ms),
        achievable_floor_ms: achievable_floor,
        pct_of_achievable: achievable_floor.map(|f| 100.0 * f / candidate_t.median_ms),
        baseline_pct_of_achievable: achievable_floor.map(|f| 100.0 * f / baseline_t.median_ms),
        baseline: baseline_t,
        candidate: candidate_t,
        same_library: std::ptr::eq(baseline, candidate),
        size: task.bench.to_string(),
        flush_l2: task.flush_l2,
        input_sets: bench.len(),
        host_check,
        floor_ms: floor,
        clocks: ClockReport {
            sm_mhz_before: sm_before,
            sm_mhz_after: sm_after,
            memory_mhz: mem_mhz,
            throttle_reasons: throttle,
            temperature_c: temperature,
        },
        baseline_outputs_ok: baseline_ok,
        reliable,
        repeats,
        other_processes,
        cold: Some(cold.clone()),
    };
    let failure =
        escaped_stream(&report).or(failure).or_else(|| memoized(&cold)).or_else(|| below_floor(&report, floor));
    if !report.speedup.is_finite() {
        report.speedup = 0.0;
    }
    Ok(Timed { report: Some(report), failure })
}

/// What the warm-up learned: a host-clock estimate of one call per side, and the call on
/// which the candidate first got each input set right.
struct WarmUp {
    estimate_ms: [f64; 2],
    first_ok_call: Vec<Option<u64>>,
}

/// Warm-up calls, and a host-clock estimate of one call to size the rounds. Heavy kernels
/// draw enough power to move the clocks; a quarter second of calls lets them settle
/// before the first sample. The candidate's first call on each set is verified at once:
/// `Err` names a kernel wrong at the bench size from its first call there.
fn warm_up(
    w: &mut Worker,
    bench: &mut BenchSets,
    entries: [&Entry; 2],
    call_failure: &dyn Fn(usize, super::CallError) -> Stop,
) -> Result<Result<WarmUp, Failure>, Stop> {
    let mut estimate_ms = [f64::INFINITY; 2];
    let mut first_ok_call: Vec<Option<u64>> = vec![None; bench.len()];
    let warm_start = Instant::now();
    let mut j = 0;
    while j < 4.max(bench.len()) || warm_start.elapsed().as_secs_f64() < 0.25 {
        for (side, entry) in entries.iter().enumerate() {
            let k = j % bench.len();
            let dev = &mut bench.warm.dev[side][k];
            dev.prepare(w, false).map_err(gpu_stop)?;
            w.gpu.sync_all().map_err(gpu_stop)?;
            let t = Instant::now();
            w.invoke(entry, &mut dev.values).map_err(|e| call_failure(side, e))?;
            estimate_ms[side] = estimate_ms[side].min(t.elapsed().as_secs_f64() * 1e3);
            if side == 1 && j < bench.len() {
                let dev = &bench.warm.dev[1][k];
                if let Some(f) = verify_outputs(w, "candidate", dev, &bench.warm.refs[k], &bench.warm.hosts[k])? {
                    let f = f.at_call(entry.calls.get());
                    return Ok(Err(prefix(f, "at the bench size, on its first call there: ")));
                }
                first_ok_call[k] = Some(entry.calls.get());
            }
        }
        j += 1;
        if j >= 10_000 {
            break;
        }
    }
    Ok(Ok(WarmUp { estimate_ms, first_ok_call }))
}

/// Pairs per side per round: enough for the plan's samples, few enough for its seconds.
fn pairs_per_round(plan: &TimingPlan, estimate_ms: &[f64; 2]) -> usize {
    let per_pair_ms = estimate_ms.iter().sum::<f64>() + 0.1;
    let rounds_min = plan.rounds.max(2);
    let by_samples = plan.min_samples.div_ceil(rounds_min);
    let by_time = ((plan.max_seconds * 1e3 / rounds_min as f64) / per_pair_ms).floor() as usize;
    by_samples.min(by_time).clamp(2, 200)
}

/// The interleaved timing, taken once more when noisy: both sides' timings, how often it
/// was repeated, and whether it ended steady.
fn sample_until_steady(
    w: &mut Worker,
    bench: &mut BenchSets,
    entries: [&Entry; 2],
    pairs: usize,
    plan: &TimingPlan,
    call_failure: &dyn Fn(usize, super::CallError) -> Stop,
) -> Result<([SideTiming; 2], usize, bool), Stop> {
    let mut next_set = [0usize; 2];
    let side_timings = |(s, r): ([Vec<f64>; 2], [Vec<Vec<f64>>; 2])| {
        [SideTiming::from_samples(&s[0], &r[0]), SideTiming::from_samples(&s[1], &r[1])]
    };
    let mut sides = side_timings(sample(w, &mut bench.warm, entries, pairs, plan, &mut next_set, call_failure)?);
    let mut repeats = 0;
    if noisy(&sides[0]) || noisy(&sides[1]) {
        let noisy_cv = (sides[0].cv.max(sides[1].cv) * 100.0).round();
        w.notes.push(format!("the first timing was noisy (CV up to {noisy_cv}%): timed again"));
        repeats = 1;
        sides = side_timings(sample(w, &mut bench.warm, entries, pairs, plan, &mut next_set, call_failure)?);
    }
    let reliable = !(noisy(&sides[0]) || noisy(&sides[1]));
    Ok((sides, repeats, reliable))
}

/// Verifies what the timed calls wrote: the candidate's first failure (told apart as
/// call-dependent where the same set was right on an earlier call), and whether the
/// baseline's outputs held.
fn verify_timed(
    w: &mut Worker,
    bench: &BenchSets,
    candidate: &Entry,
    first_ok_call: &[Option<u64>],
) -> Result<(Option<Failure>, bool), Stop> {
    let mut failure = None;
    let mut baseline_ok = true;
    for (k, first_ok) in first_ok_call.iter().enumerate() {
        if verify_outputs(w, "baseline", &bench.warm.dev[0][k], &bench.warm.refs[k], &bench.warm.hosts[k])?.is_some() {
            baseline_ok = false;
            w.notes.push(format!(
                "the baseline's timed output does not match the reference at {}",
                bench.warm.hosts[k].label()
            ));
        }
        if failure.is_none() {
            if let Some(f) =
                verify_outputs(w, "candidate", &bench.warm.dev[1][k], &bench.warm.refs[k], &bench.warm.hosts[k])?
            {
                let last = candidate.calls.get();
                let f = match *first_ok {
                    Some(ok) => {
                        let mut g = Failure::new(
                            FailureClass::CallDependent,
                            format!(
                                "right on call {ok} and wrong by call {last} on the same inputs ({}): its results change with the call count; {}",
                                bench.warm.hosts[k].label(),
                                f.message
                            ),
                        );
                        g.at = f.at;
                        g.comparison = f.comparison;
                        g
                    }
                    None => f,
                };
                failure = Some(f.at_call(last));
            }
        }
    }
    Ok((failure, baseline_ok))
}

/// Notes on what may have disturbed the timing: other processes on the GPU, a timing
/// that stayed noisy.
fn note_conditions(w: &mut Worker, other_processes: &[u32], reliable: bool, base: &SideTiming, cand: &SideTiming) {
    if !other_processes.is_empty() {
        w.notes.push(format!(
            "other processes used this GPU while it was timed (pids {}): times may be inflated",
            other_processes.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    if !reliable {
        w.notes.push(format!(
            "the timing stayed noisy when repeated (CV {:.1}% baseline, {:.1}% candidate; round medians spread {:.1}% and {:.1}%): the speedup is unreliable",
            base.cv * 100.0,
            cand.cv * 100.0,
            base.median_spread() * 100.0,
            cand.median_spread() * 100.0
        ));
    }
}

fn prefix(mut f: Failure, p: &str) -> Failure {
    f.message = format!("{p}{}", f.message);
    f
}
