//! Trusted builds: the reference and the baseline, built once and reused by every
//! evaluation of a task; one candidate's build, with its failure as a verdict's.

use crate::task::Task;
use crate::toolkit::build::{self, BuildError, BuildSpec, Built};
use crate::toolkit::toolchain::Toolchain;
use crate::wall::options::EvalOptions;
use crate::wall::verdict::EvalError;
use std::collections::BTreeMap;
use std::path::Path;

pub(crate) fn build_one(
    tc: &Toolchain,
    opts: &EvalOptions,
    task: &Task,
    source: &Path,
    trusted: bool,
    arch: &str,
) -> Result<Built, BuildError> {
    let spec = BuildSpec {
        task,
        source,
        trusted,
        arch: arch.to_string(),
        extra_flags: opts.extra_flags.clone(),
        defines: if trusted { BTreeMap::new() } else { opts.defines.clone() },
    };
    build::build(tc, &opts.cache, &spec)
}

fn trusted_build(result: Result<Built, BuildError>, what: &str) -> Result<Built, EvalError> {
    match result {
        Ok(b) => Ok(b),
        Err(BuildError::Rejected { failure, dir, .. }) => Err(EvalError::Task(format!(
            "the {what} does not build ({}); log in {}",
            failure.summary(),
            dir.join(build::LOG_NAME).display()
        ))),
        Err(BuildError::Env(e)) => Err(EvalError::Env(e)),
        Err(BuildError::Io(m)) => Err(EvalError::Internal(m)),
    }
}

/// The trusted builds every evaluation of a task reuses: the reference and the baseline.
#[derive(Debug, Clone)]
pub struct TrustedBuilds {
    pub reference: Built,
    pub baseline: Built,
}

/// Builds the reference (when the task has one) and the baseline, in parallel.
pub fn build_trusted(tc: &Toolchain, opts: &EvalOptions, task: &Task, arch: &str) -> Result<TrustedBuilds, EvalError> {
    let (reference, baseline) = std::thread::scope(|s| {
        let r = task.has_reference().then(|| s.spawn(|| build_one(tc, opts, task, &task.reference, true, arch)));
        let b = build_one(tc, opts, task, &task.baseline, true, arch);
        (r.map(|h| h.join().expect("build thread")), b)
    });
    let baseline = trusted_build(baseline, "baseline")?;
    let reference = match reference {
        Some(r) => trusted_build(r, "reference")?,
        None => baseline.clone(),
    };
    Ok(TrustedBuilds { reference, baseline })
}
