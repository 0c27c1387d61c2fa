//! The verdict model: what one evaluation of a candidate found, as printed and stored,
//! and the errors that are not the candidate's fault.

use super::sanitizer::SanitizerReport;
use crate::task::Task;
use crate::toolkit::build::{BuildFailure, Built};
use crate::toolkit::toolchain::EnvError;
use crate::wall::protocol::{CheckSummary, DeviceInfo, EnergyReport, Failure, FailureClass, TimingReport};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Passed,
    Rejected,
}

#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Default, Serialize)]
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

#[derive(Debug, Clone, Serialize)]
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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosted_sandbox: Vec<crate::wall::sandbox::Layer>,
    /// The end of what candidate code and the worker printed, when something went wrong.
    pub stderr_tail: Option<String>,
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
}
