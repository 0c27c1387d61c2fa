//! Does a sealed report fit the request it answers? The seal proves the worker wrote a
//! line; this proves the line describes the evaluation that was asked for: the mode's
//! phases were announced in order, the check covered every case twice, timing has
//! samples on both sides and a speedup that follows from them. A key stolen from the
//! worker's memory still has to forge a report that passes all of this.

use crate::wall::client::WorkerRun;
use crate::wall::protocol::{Mode, Outcome, Phase, WorkerReport, WorkerRequest};

/// What in a passing report does not fit its request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Misfit {
    /// Something the request implies is missing or wrong, said in a fixed phrase.
    #[error("{0}")]
    Unfit(&'static str),
    /// The check's counts are not the task's.
    #[error("the check covered {cases} cases in {calls} calls ({repeats} repeats); the task has {want_cases} cases of 2 calls each and {want_repeats} repeats")]
    CheckCounts { cases: usize, calls: usize, repeats: usize, want_cases: usize, want_repeats: usize },
}

/// Ok, or what does not fit. Only passing reports are held to the request: a rejection
/// or an error never helps a candidate.
pub fn check(request: &WorkerRequest, run: &WorkerRun, report: &WorkerReport) -> Result<(), Misfit> {
    if !matches!(report.outcome, Outcome::Passed) {
        return Ok(());
    }
    if run.sandbox_requested && run.sandbox.is_empty() {
        return Err(Misfit::Unfit("no sandbox announcement before the report"));
    }
    let seen = |p: Phase| run.phases_seen.contains(&p);
    match &request.mode {
        Mode::Simulate { .. } => Ok(()),
        Mode::Profile => require(seen(Phase::Profile), "a profile that never announced its profile phase"),
        Mode::Sanitize => require(seen(Phase::Sanitize), "a sanitizer run that never announced its sanitize phase"),
        Mode::Evaluate { time, energy, .. } => {
            require(run.device.is_some(), "no device announcement")?;
            require(seen(Phase::Reference), "no reference phase: the reference outputs were never computed")?;
            require(seen(Phase::Check), "no check phase")?;
            let order = [Phase::Reference, Phase::LoadCandidate, Phase::Check];
            let positions: Vec<usize> =
                order.iter().filter_map(|p| run.phases_seen.iter().position(|q| q == p)).collect();
            require(positions.windows(2).all(|w| w[0] < w[1]), "phases out of order")?;
            let check = report.check.as_ref().ok_or(Misfit::Unfit("a pass without a check summary"))?;
            let cases = request.task.checks.len() * request.task.seeds as usize;
            let repeats = crate::wall::protocol::REPEAT_CALLS;
            if check.cases != cases || check.repeat_calls != repeats || check.calls != 2 * cases + repeats {
                return Err(Misfit::CheckCounts {
                    cases: check.cases,
                    calls: check.calls,
                    repeats: check.repeat_calls,
                    want_cases: cases,
                    want_repeats: repeats,
                });
            }
            require(check.elements_compared > 0, "a check that compared no elements")?;
            if *time {
                require(seen(Phase::Time), "no time phase")?;
                let t = report.timing.as_ref().ok_or(Misfit::Unfit("a timed pass without timing"))?;
                require(t.baseline.samples >= 2 && t.candidate.samples >= 2, "fewer than two timing samples a side")?;
                require(t.candidate.median_ms > 0.0 && t.baseline.median_ms > 0.0, "non-positive times")?;
                let implied = t.baseline.median_ms / t.candidate.median_ms;
                require(
                    t.speedup.is_finite() && (t.speedup / implied - 1.0).abs() < 1e-6,
                    "a speedup that does not follow from the medians",
                )?;
                require(t.host_check.calls > 0, "no host-clock cross-check")?;
                require(t.cold.as_ref().is_some_and(|c| !c.candidate_ms.is_empty()), "no cold-input timing")?;
            } else {
                require(report.timing.is_none(), "timing that was not asked for")?;
            }
            if *energy {
                require(report.energy.is_some(), "an energy run without energy")?;
            }
            Ok(())
        }
    }
}

fn require(ok: bool, why: &'static str) -> Result<(), Misfit> {
    if ok {
        Ok(())
    } else {
        Err(Misfit::Unfit(why))
    }
}
