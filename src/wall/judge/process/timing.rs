//! The timing report, from the rounds of the three phases (baseline, candidate, baseline).
//!
//! Each round has the judge's window and the worker's event time of every call. What a
//! window holds beyond its events (its gap: the command's round trip and the judge's own
//! comparison of the outputs) is, per call, the same for any two kernels of one task up to
//! the noise: the comparison depends only on the outputs' sizes. So the baseline's gap,
//! from both its phases, is the yardstick: where the candidate's gap exceeds it by no more
//! than the noise, its events account for all of its work and the figures come from the
//! events; where by more, the figures come from the judge's windows less the baseline's gap
//! (whatever the events missed is counted); where by far more, work ran outside the
//! candidate's events and the verdict is a timing anomaly.
//!
//! The baseline's rounds before and after the candidate pair up, by their geometric mean,
//! with the candidate's rounds, so that a drift of the GPU's clocks over the judgment
//! cancels in each paired ratio.

use super::energy::Loop;
use super::floor::{achievable_floor_ms, floor_ms};
use super::rounds::{Bench, PhaseResult, Round};
use super::{Halt, Judge};
use crate::wall::protocol::{
    median, ClockCheck, ClockReport, EnergyReport, EnergySample, Failure, FailureClass, Figure, Outcome, SideEnergy,
    SideTiming, TimingReport,
};

/// Past these a side's timing is flagged as unreliable.
pub const NOISY_CV: f64 = 0.10;
pub const NOISY_MEDIAN_SPREAD: f64 = 0.05;

fn noisy(t: &SideTiming) -> bool {
    t.cv > NOISY_CV || t.median_spread() > NOISY_MEDIAN_SPREAD
}

/// The gap of one round, per call.
fn gap(r: &Round) -> f64 {
    let n = r.events_ms.len().max(1) as f64;
    (r.window_ms - r.events_ms.iter().sum::<f64>()) / n
}

/// The median absolute deviation as a standard deviation (1.4826 x MAD).
fn spread(v: &[f64]) -> f64 {
    let m = median(v);
    let dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    1.4826 * median(&dev)
}

/// How the candidate's events stand against the judge's clock.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Agreement {
    Events,
    /// Use the windows; the excess per call, in ms.
    Judge(f64),
    /// Work outside the events: the excess per call, in ms.
    Anomaly(f64),
}

/// The decision, from the baseline's and the candidate's gaps and the candidate's median
/// call time (all in ms per call).
pub(crate) fn agreement(baseline_gaps: &[f64], candidate_gaps: &[f64], candidate_ms: f64) -> (Agreement, ClockCheck) {
    let gb = median(baseline_gaps);
    let gc = median(candidate_gaps);
    let noise = spread(baseline_gaps);
    let tolerance = (3.0 * noise).max(0.005 * candidate_ms).max(0.0005);
    let excess = gc - gb;
    // A NaN excess (no rounds) agrees: there is nothing the events could have hidden.
    let decision = if excess.is_nan() || excess <= tolerance {
        Agreement::Events
    } else if excess > (0.10 * candidate_ms).max(10.0 * noise).max(0.002) {
        Agreement::Anomaly(excess)
    } else {
        Agreement::Judge(excess)
    };
    let figure = if decision == Agreement::Events { Figure::Events } else { Figure::Judge };
    (decision, ClockCheck { baseline_gap_ms: gb, candidate_gap_ms: gc, tolerance_ms: tolerance, figure })
}

/// A round's value per call under the chosen figure: its events' sum over its calls, or
/// its window over its calls less the baseline's gap. Never a median of the events: the
/// window bounds only their sum, and a worker can spread a sum as it likes (a few long
/// calls and many short ones make a short median).
fn round_value(r: &Round, figure: Figure, baseline_gap: f64) -> f64 {
    let n = r.events_ms.len().max(1) as f64;
    match figure {
        Figure::Events => r.events_ms.iter().sum::<f64>() / n,
        Figure::Judge => r.window_ms / n - baseline_gap,
    }
}

fn samples(rounds: &[&Round], figure: Figure, baseline_gap: f64) -> Vec<f64> {
    rounds.iter().map(|r| round_value(r, figure, baseline_gap)).collect()
}

pub(crate) fn report(
    j: &mut Judge,
    bench: &Bench,
    before: &PhaseResult,
    middle: &PhaseResult,
    after: &PhaseResult,
    same_library: bool,
) -> Result<(TimingReport, Option<EnergyReport>), Halt> {
    j.task.bench.clone_from(&bench.size);
    let baseline_rounds: Vec<&Round> = before.rounds.iter().chain(&after.rounds).collect();
    let candidate_rounds: Vec<&Round> = middle.rounds.iter().collect();
    let baseline_gaps: Vec<f64> = baseline_rounds.iter().map(|r| gap(r)).collect();
    let candidate_gaps: Vec<f64> = candidate_rounds.iter().map(|r| gap(r)).collect();
    let candidate_means: Vec<f64> = candidate_rounds.iter().map(|r| round_value(r, Figure::Events, 0.0)).collect();
    let (decision, clock_check) = agreement(&baseline_gaps, &candidate_gaps, median(&candidate_means));
    let figure = clock_check.figure;
    let gb = clock_check.baseline_gap_ms;
    match decision {
        Agreement::Events => {}
        Agreement::Judge(excess) => j.notes.push(format!(
            "the candidate's events left out {excess:.4} ms a call that the judge's clock saw (the baseline's gap {gb:.4} ms, the tolerance {:.4} ms): its figures are the judge's windows",
            clock_check.tolerance_ms
        )),
        Agreement::Anomaly(excess) => {
            return Err(Halt::Failure(Failure::new(
                FailureClass::TimingAnomaly,
                format!(
                    "the judge's clock held {excess:.4} ms a call more than the candidate's own events account for (beyond the {gb:.4} ms a call the baseline's rounds hold): work ran outside its timed events (another stream or thread, or a kernel left running), or its launcher worked while the GPU idled; its events would claim {:.4} ms a call",
                    median(&candidate_means)
                ),
            )))
        }
    }

    // Paired rounds: the baseline before and after each candidate round, by geometric mean.
    let k = middle.rounds.len().min(before.rounds.len()).min(after.rounds.len());
    let paired: Vec<Vec<f64>> = (0..k)
        .map(|i| vec![(round_value(&before.rounds[i], figure, gb) * round_value(&after.rounds[i], figure, gb)).sqrt()])
        .collect();
    let candidate_by_round: Vec<Vec<f64>> =
        middle.rounds[..k].iter().map(|r| vec![round_value(r, figure, gb)]).collect();
    let baseline_t = SideTiming::from_samples(&samples(&baseline_rounds, figure, gb), &paired);
    let candidate_t = SideTiming::from_samples(&samples(&candidate_rounds, figure, gb), &candidate_by_round);
    let floor = floor_ms(&j.task, &j.gpu.info);
    let achievable = achievable_floor_ms(&j.task, &j.gpu.info);
    let reliable = !(noisy(&baseline_t) || noisy(&candidate_t));
    if !reliable {
        j.notes.push(format!(
            "the timing stayed noisy (CV {:.1}% baseline, {:.1}% candidate; round medians spread {:.1}% and {:.1}%): the speedup is unreliable",
            baseline_t.cv * 100.0,
            candidate_t.cv * 100.0,
            baseline_t.median_spread() * 100.0,
            candidate_t.median_spread() * 100.0
        ));
    }
    if let Some(w) = &bench.baseline_wrong {
        j.notes.push(format!("the baseline's timed output does not match the reference: {w}"));
    }
    let others = others_on_gpu(j);
    if !others.is_empty() {
        j.notes.push(format!(
            "other processes used this GPU while it was timed (pids {}): times may be inflated",
            others.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    let mut report = TimingReport {
        speedup: baseline_t.median_ms / candidate_t.median_ms,
        pct_of_floor: floor.map(|f| 100.0 * f / candidate_t.median_ms),
        baseline_pct_of_floor: floor.map(|f| 100.0 * f / baseline_t.median_ms),
        achievable_floor_ms: achievable,
        pct_of_achievable: achievable.map(|f| 100.0 * f / candidate_t.median_ms),
        baseline_pct_of_achievable: achievable.map(|f| 100.0 * f / baseline_t.median_ms),
        baseline: baseline_t,
        candidate: candidate_t,
        baseline_before_ms: before.rounds.iter().map(|r| round_value(r, figure, gb)).collect(),
        baseline_after_ms: after.rounds.iter().map(|r| round_value(r, figure, gb)).collect(),
        same_library,
        size: j.task.bench.to_string(),
        flush_l2: j.task.flush_l2,
        input_sets: middle.rounds.len() * bench.slots,
        clock_check,
        floor_ms: floor,
        clocks: clocks(j),
        baseline_outputs_ok: bench.baseline_wrong.is_none(),
        reliable,
        other_processes: others,
    };
    if let Some(f) = floor {
        if report.candidate.median_ms < f {
            return Err(Halt::Failure(Failure::new(
                FailureClass::TimingAnomaly,
                format!(
                    "{:.4} ms a call is below the physical floor of {f:.4} ms at this size (the task's roofline at this GPU's peaks): no correct kernel is that fast",
                    report.candidate.median_ms
                ),
            )));
        }
    }
    if !report.speedup.is_finite() {
        report.speedup = 0.0;
    }
    let energy = match (&before.energy, &middle.energy, &after.energy) {
        (Some(b0), Some(c), Some(b1)) => {
            Some(energy_report([b0, b1], c, report.baseline.median_ms, report.candidate.median_ms)?)
        }
        _ => None,
    };
    Ok((report, energy))
}

/// Energy per call from the loops' power and each side's time per call; a candidate loop
/// that ended sooner than its calls take did less work than it was asked.
fn energy_report(
    baseline: [&Loop; 2],
    candidate: &Loop,
    baseline_ms: f64,
    candidate_ms: f64,
) -> Result<EnergyReport, Halt> {
    let expected_ms = candidate.calls as f64 * candidate_ms;
    if candidate.window_ms < 0.8 * expected_ms {
        return Err(Halt::Failure(Failure::new(
            FailureClass::TimingAnomaly,
            format!(
                "the energy loop's {} calls took {:.1} ms by the judge's clock, where its timed calls take {:.1} ms: it did less work than it was asked",
                candidate.calls, candidate.window_ms, expected_ms
            ),
        )));
    }
    let sample = |l: &Loop, ms: f64| -> Result<EnergySample, Halt> {
        if l.updates < 2 || !l.watts.is_finite() {
            return Err(Halt::Outcome(Outcome::EnvError {
                message: format!(
                    "the NVML energy counter moved {} times during a {:.1} s energy loop: no reading",
                    l.updates,
                    l.window_ms / 1e3
                ),
            }));
        }
        Ok(EnergySample {
            joules_per_call: l.watts * ms / 1e3,
            watts: l.watts,
            calls: l.calls,
            seconds: l.span_s,
            counter_updates: l.updates,
        })
    };
    let baseline = SideEnergy::from_samples(vec![sample(baseline[0], baseline_ms)?, sample(baseline[1], baseline_ms)?]);
    let candidate = SideEnergy::from_samples(vec![sample(candidate, candidate_ms)?]);
    Ok(EnergyReport {
        saving: baseline.joules_per_call / candidate.joules_per_call,
        baseline,
        candidate,
        note: "power from NVML's device-wide energy counter while each side ran back to back, times each side's time per call; anything else on this GPU is counted too".into(),
    })
}

fn clocks(j: &Judge) -> ClockReport {
    match crate::wall::nvml::NvmlDevice::open(&j.gpu.info.uuid) {
        Ok(n) => ClockReport {
            sm_mhz_before: j.sm_mhz_at_start,
            sm_mhz_after: n.sm_clock_mhz(),
            memory_mhz: n.memory_clock_mhz(),
            throttle_reasons: n.throttle_reasons().unwrap_or_default(),
            temperature_c: n.temperature_c(),
        },
        Err(_) => ClockReport::default(),
    }
}

/// Processes NVML sees on the GPU besides the judge and its workers.
fn others_on_gpu(j: &Judge) -> Vec<u32> {
    let Ok(n) = crate::wall::nvml::NvmlDevice::open(&j.gpu.info.uuid) else { return Vec::new() };
    n.other_processes().into_iter().filter(|p| !j.worker_pids.contains(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(window: f64, events: &[f64]) -> Round {
        Round { window_ms: window, events_ms: events.to_vec() }
    }

    #[test]
    fn events_that_account_for_the_window_are_used() {
        // Baseline: 1.0 ms calls, a 0.2 ms gap a call; candidate: 0.5 ms calls, the same gap.
        let b: Vec<f64> = (0..8).map(|i| gap(&round(4.0 * 1.2 + 0.001 * i as f64, &[1.0; 4]))).collect();
        let c: Vec<f64> = (0..4).map(|_| gap(&round(4.0 * 0.7, &[0.5; 4]))).collect();
        let (d, check) = agreement(&b, &c, 0.5);
        assert_eq!(d, Agreement::Events);
        assert_eq!(check.figure, Figure::Events);
        assert!((check.baseline_gap_ms - 0.2).abs() < 0.01);
    }

    #[test]
    fn work_hidden_from_the_events_is_counted_or_rejected() {
        let b: Vec<f64> = (0..8).map(|_| gap(&round(4.0 * 1.2, &[1.0; 4]))).collect();
        // A candidate whose events claim 0.75 ms while its windows hold 1.0 ms of work.
        let hidden: Vec<f64> = (0..4).map(|_| gap(&round(4.0 * 1.2, &[0.75; 4]))).collect();
        let (d, check) = agreement(&b, &hidden, 0.75);
        assert!(matches!(d, Agreement::Anomaly(x) if (x - 0.25).abs() < 1e-9), "{d:?}");
        assert_eq!(check.figure, Figure::Judge);
        // A small excess (2% of the call): the judge's figure, no rejection.
        let small: Vec<f64> = (0..4).map(|_| gap(&round(4.0 * 1.2, &[0.98; 4]))).collect();
        assert!(matches!(agreement(&b, &small, 0.98).0, Agreement::Judge(_)));
        // The judge's figure for a round adds back what the events missed.
        let r = round(4.0 * 1.2, &[0.98; 4]);
        assert!((round_value(&r, Figure::Judge, 0.2) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn noise_in_the_baseline_widens_the_tolerance() {
        let b: Vec<f64> = [0.2, 0.25, 0.15, 0.3, 0.1, 0.22, 0.18, 0.2].to_vec();
        let c = vec![0.3; 4];
        let (d, check) = agreement(&b, &c, 1.0);
        assert!(check.tolerance_ms > 0.1, "{check:?}");
        assert_eq!(d, Agreement::Events);
    }
}
