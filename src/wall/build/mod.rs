//! The confined build: every kernel nightshift builds (candidates, and the task's own
//! reference and baseline) is compiled by nvcc and disassembled by cuobjdump and nvdisasm
//! inside a confinement, because the source is untrusted and the compiler reads whatever
//! the source names (`#include "/home/me/.aws/credentials"`, `asm(".incbin ...")`).
//!
//! - `policy`: what a build may read (the toolkit's programs and headers, the host
//!   compiler and the system's headers and libraries, the task's folders, the CUDA runtime
//!   and, for a trusted build only, the libraries the task lets its baseline link, each by
//!   file: never a library folder of NVIDIA's), run (programs of the toolkit and the host
//!   compiler only), write (its scratch folder only), its environment and its limits.
//! - `confine`: the trampoline `nightshift confine --policy JSON -- PROGRAM ARGS...` that
//!   applies a policy to itself and execs the program; made of `fs` (Landlock),
//!   `syscalls` (seccomp) and `privileges` (no_new_privs, capabilities, keyring, rlimits).
//! - here: [`Confinement`], the hook `toolkit::build` starts every tool through, and the
//!   builds themselves: the trusted builds every evaluation of a task reuses, and one
//!   candidate's build, whose failure becomes a verdict.
//!
//! toolkit does not know any of this: `toolkit::build::build` takes a
//! [`build::Confine`] from its caller and writes only the scratch folder it gives it; the
//! cache entry is published by the (unconfined) orchestrator afterwards, as before.

pub mod confine;
mod fs;
pub mod policy;
mod privileges;
pub mod probe;
mod syscalls;

pub use fs::is_vendor_library;
pub use policy::{Limits, Policy, DEFAULT_TIMEOUT};

use crate::task::Task;
use crate::toolkit::build::{self, BuildError, BuildSpec, Built};
use crate::toolkit::toolchain::Toolchain;
use crate::wall::judge::{EvalError, EvalOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How a build's tools are started: through `exe confine` with the policy of this task
/// and trust, in the build's scratch folder.
#[derive(Debug, Clone)]
pub struct Confinement {
    /// The executable that provides `confine` (this binary, unless a test says otherwise).
    pub exe: PathBuf,
    /// The policy, less the scratch folder (set per build).
    pub policy: Policy,
    pub limits: Limits,
}

impl Confinement {
    pub fn new(exe: &Path, tc: &Toolchain, task: &Task, trusted: bool, limits: Limits) -> Confinement {
        Confinement { exe: exe.to_path_buf(), policy: Policy::new(tc, task, trusted, &limits), limits }
    }
}

impl build::Confine for Confinement {
    fn command(&self, program: &Path, scratch: &Path) -> Command {
        let mut c = confine::command_line(&self.exe, &self.policy.in_scratch(scratch));
        c.arg(program);
        c
    }

    fn timeout(&self) -> Duration {
        self.limits.timeout
    }

    fn memory_limit(&self) -> String {
        let bytes = self.limits.memory_bytes;
        let amount =
            if bytes & ((1 << 30) - 1) == 0 { format!("{} GiB", bytes >> 30) } else { format!("{} MiB", bytes >> 20) };
        format!("{amount} of address space per process")
    }

    fn notes(&self, stderr: &str) -> Vec<String> {
        confine::notes(stderr)
    }
}

/// How long a build may run: `--build-timeout`, else the task's `[build] timeout_s`, else
/// [`DEFAULT_TIMEOUT`].
pub fn timeout(opts: &EvalOptions, task: &Task) -> Duration {
    opts.build_timeout.or(task.build.timeout_s.map(Duration::from_secs_f64)).unwrap_or(DEFAULT_TIMEOUT)
}

/// Builds `spec` confined, with the limits `opts` and the task give it: the one way the
/// rest of nightshift builds a kernel.
pub fn build_confined(tc: &Toolchain, opts: &EvalOptions, spec: &BuildSpec) -> Result<Built, BuildError> {
    let limits = Limits::with_timeout(timeout(opts, spec.task));
    let confinement = Confinement::new(&opts.worker_exe, tc, spec.task, spec.trusted, limits);
    build::build(tc, &opts.cache, spec, &confinement)
}

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
    build_confined(tc, opts, &spec)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_beats_the_task_which_beats_the_default() {
        let mut task = Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/vector_add")).unwrap();
        let mut opts = EvalOptions::new(PathBuf::from("nightshift"));
        assert_eq!(timeout(&opts, &task), DEFAULT_TIMEOUT);
        task.build.timeout_s = Some(30.0);
        assert_eq!(timeout(&opts, &task), Duration::from_secs(30));
        opts.build_timeout = Some(Duration::from_secs(5));
        assert_eq!(timeout(&opts, &task), Duration::from_secs(5));
    }
}
