//! The verdict model: what one evaluation of a candidate found, as printed and stored,
//! and the errors that are not the candidate's fault.

use super::sanitizer::SanitizerReport;
use crate::task::Task;
use crate::toolkit::build::{BuildFailure, Built};
use crate::toolkit::toolchain::EnvError;
use crate::wall::protocol::{CheckSummary, DeviceInfo, EnergyReport, Failure, FailureClass, TimingReport};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Passed,
    Rejected,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildSummary {
    pub cached: bool,
    pub seconds: f64,
    pub nvcc_seconds: f64,
    pub dir: PathBuf,
    pub kernels: Vec<sass::ptxas::KernelResources>,
    pub sass: Option<PathBuf>,
    pub sass_lines: Option<PathBuf>,
    pub notes: Vec<String>,
}

impl BuildSummary {
    pub(super) fn from_built(b: &Built) -> BuildSummary {
        BuildSummary {
            cached: b.cached,
            seconds: b.seconds,
            nvcc_seconds: b.nvcc_seconds,
            dir: b.dir.clone(),
            kernels: b.ptxas.kernels.clone(),
            sass: b.sass.clone(),
            sass_lines: b.sass_lines.clone(),
            notes: b.notes.clone(),
        }
    }
}

/// Seconds per phase, as printed in the verdict.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Phases {
    pub build: f64,
    /// Worker start, GPU context, inputs and reference outputs.
    pub setup: f64,
    pub check: f64,
    pub time: f64,
    pub energy: f64,
    pub sanitize: f64,
    /// Of `setup`, putting the worker's sandbox up.
    pub sandbox: f64,
    pub total: f64,
    /// Seconds per worker phase as announced (init, reference, check, time...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub worker: BTreeMap<String, f64>,
}

/// Deserialized where a remote lane sends its verdict back (`optimize --ray`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verdict {
    pub task: String,
    pub candidate: PathBuf,
    pub status: Status,
    pub failure: Option<Failure>,
    pub device: Option<DeviceInfo>,
    pub arch: String,
    pub build: Option<BuildSummary>,
    pub check: Option<CheckSummary>,
    pub timing: Option<TimingReport>,
    /// The speedup with its 95% interval from the timing's paired rounds.
    pub speedup: Option<crate::stats::Speedup>,
    pub energy: Option<EnergyReport>,
    pub sanitizer: Vec<SanitizerReport>,
    pub phases: Phases,
    pub notes: Vec<String>,
    /// The sandbox layers the worker put up, as it announced them.
    pub sandbox: Vec<crate::wall::sandbox::Layer>,
    /// Under compute-sanitizer: the hosted arrangement's namespaces, then the layers the
    /// worker under the tool put up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosted_sandbox: Vec<crate::wall::sandbox::Layer>,
    /// The end of what candidate code and the worker printed, when something went wrong.
    pub stderr_tail: Option<String>,
    /// Per served shape, when the task serves shapes: `speedup` is then their weighted
    /// geometric mean, and `timing` the heaviest shape's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub served: Vec<ShapeResult>,
}

/// What one served shape measured in a judgment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeResult {
    pub name: String,
    /// The size, as `tokens=8 hidden=4096`.
    pub size: String,
    /// The weight the task gives it (summing to 1 over the shapes).
    pub weight: f64,
    /// Its weight in the objective: its share of the baseline's time when the weights are
    /// shares of calls, else the weight.
    pub time_share: f64,
    pub speedup: crate::stats::Speedup,
    pub baseline_ms: f64,
    pub candidate_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pct_of_floor: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_pct_of_floor: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_saving: Option<f64>,
}

impl ShapeResult {
    /// Each served shape's result from the judge's timings, weighted for the objective.
    pub fn from_timings(
        served: &[crate::wall::protocol::ShapeTiming],
        basis: crate::task::serve::WeightBasis,
    ) -> Vec<ShapeResult> {
        let shares = crate::wall::protocol::ShapeTiming::time_shares(served, basis);
        served
            .iter()
            .zip(shares)
            .map(|(s, share)| {
                let t = &s.timing;
                ShapeResult {
                    name: s.name.clone(),
                    size: t.size.clone(),
                    weight: s.weight,
                    time_share: share,
                    speedup: t.interval().unwrap_or(crate::stats::Speedup::unmeasured(t.speedup)),
                    baseline_ms: t.baseline.median_ms,
                    candidate_ms: t.candidate.median_ms,
                    pct_of_floor: t.pct_of_floor,
                    baseline_pct_of_floor: t.baseline_pct_of_floor,
                    energy_saving: s.energy.as_ref().map(|e| e.saving),
                }
            })
            .collect()
    }

    /// Slower than the baseline beyond the margin: `min_gain`, or how far the baseline timed
    /// against itself strayed from 1 at this same shape (`baseline`, its point: the bias
    /// this shape's timing showed, not its interval's far end), whichever is larger. A
    /// short shape's timing strays further than a long one's, so each has its own margin.
    pub fn regressed(&self, min_gain: f64, baseline: Option<&ShapeResult>) -> bool {
        let stray = baseline
            .filter(|b| b.name == self.name && b.speedup.point.is_finite())
            .map_or(0.0, |b| (1.0 - b.speedup.point).abs());
        crate::stats::Bar { min_gain: min_gain.max(0.0), self_bias: stray }.is_regression(&self.speedup)
    }

    /// The objective over shapes: the weighted geometric mean of their speedups.
    pub fn objective(shapes: &[ShapeResult]) -> crate::stats::Speedup {
        crate::stats::weighted_geomean(&shapes.iter().map(|s| (s.time_share, s.speedup)).collect::<Vec<_>>())
    }

    /// The weighted geometric mean of the shapes' energy savings, when every one was read.
    pub fn energy_objective(shapes: &[ShapeResult]) -> Option<f64> {
        let parts: Option<Vec<(f64, crate::stats::Speedup)>> = shapes
            .iter()
            .map(|s| s.energy_saving.map(|e| (s.time_share, crate::stats::Speedup::unmeasured(e))))
            .collect();
        Some(crate::stats::weighted_geomean(&parts?).point).filter(|x| x.is_finite())
    }
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.status == Status::Passed
    }
}

/// Errors that are not the candidate's fault; they map to exit codes 2 and 3.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{0}")]
    Task(String),
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error("{0}")]
    Internal(String),
}
impl Verdict {
    /// A verdict with nothing decided yet (rejected until a report says otherwise).
    pub fn pending(task: &Task, candidate: &Path, arch: &str) -> Verdict {
        Verdict {
            task: task.name.clone(),
            candidate: candidate.to_path_buf(),
            status: Status::Rejected,
            failure: None,
            device: None,
            arch: arch.to_string(),
            build: None,
            check: None,
            timing: None,
            speedup: None,
            energy: None,
            sanitizer: Vec::new(),
            phases: Phases::default(),
            notes: Vec::new(),
            sandbox: Vec::new(),
            hosted_sandbox: Vec::new(),
            stderr_tail: None,
            served: Vec::new(),
        }
    }

    /// The verdict of a candidate that did not build into a loadable library.
    pub fn build_rejected(task: &Task, candidate: &Path, arch: &str, failure: &BuildFailure, dir: &Path) -> Verdict {
        let mut verdict = Verdict::pending(task, candidate, arch);
        let mut f = failure_from_build(failure);
        if let BuildFailure::Compile { log } | BuildFailure::Timeout { log, .. } = failure {
            verdict.stderr_tail = Some(tail(log, 4000));
        }
        f.message.push_str(&format!(" (build folder {})", dir.display()));
        verdict.failure = Some(f);
        verdict
    }
}

fn failure_from_build(f: &BuildFailure) -> Failure {
    let class = match f {
        BuildFailure::Compile { .. } => FailureClass::BuildError,
        BuildFailure::MissingEntry { .. } => FailureClass::MissingEntry,
        BuildFailure::ForbiddenImport { .. } => FailureClass::ForbiddenImport,
        BuildFailure::Timeout { .. } => FailureClass::BuildTimeout,
    };
    Failure::new(class, f.summary())
}

pub(crate) fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &s[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_keep_the_end_and_respect_utf8() {
        assert_eq!(tail("abcdef", 3), "...def");
        assert_eq!(tail("ab", 3), "ab");
        let t = tail("ééééé", 3);
        assert!(t.starts_with("..."));
    }

    fn shape(name: &str, point: f64, half: f64) -> ShapeResult {
        ShapeResult {
            name: name.into(),
            size: String::new(),
            weight: 0.5,
            time_share: 0.5,
            speedup: crate::stats::Speedup { point, low: point / (1.0 + half), high: point * (1.0 + half) },
            baseline_ms: 1.0,
            candidate_ms: 1.0 / point,
            pct_of_floor: None,
            baseline_pct_of_floor: None,
            energy_saving: None,
        }
    }

    #[test]
    fn each_shape_is_read_against_the_baselines_own_noise_at_that_shape() {
        // The baseline against itself strayed 8% at decode and 0.2% at prefill (an H200's
        // rope decode read 0.865x [0.724, 1.032] against itself): the point's stray counts,
        // not the interval's far end.
        let decode_self = shape("decode", 0.92, 0.3);
        let prefill_self = shape("prefill", 1.002, 0.001);
        assert!(!shape("decode", 0.95, 0.05).regressed(0.01, Some(&decode_self)), "inside decode's own noise");
        assert!(shape("decode", 0.90, 0.05).regressed(0.01, Some(&decode_self)), "past it");
        assert!(shape("prefill", 0.98, 0.002).regressed(0.01, Some(&prefill_self)), "2% at a quiet shape");
        assert!(shape("decode", 0.95, 0.05).regressed(0.01, None), "unknown noise: the margin alone");
        assert!(shape("decode", 0.95, 0.05).regressed(0.01, Some(&prefill_self)), "another shape's noise is not used");
    }
}
