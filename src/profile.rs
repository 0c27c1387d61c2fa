//! Profiling a candidate with Nsight Compute: the worker calls the entry once at the
//! bench size between cuProfilerStart and cuProfilerStop under `ncu --set full`, so every
//! kernel the entry launches is profiled and nothing else is. The report is exported, then
//! re-read as the raw CSV page (`--print-units base`), which `heuristics` parses.

use crate::build::Built;
use crate::eval::{self, classify, run_worker, Classified, EvalError, EvalOptions};
use crate::process;
use crate::protocol::{Mode, Outcome, WorkerRequest};
use crate::task::Task;
use crate::toolchain::{find_profiler, EnvError, Toolchain};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub struct Profiled {
    pub built: Built,
    pub csv_path: PathBuf,
    pub report_path: PathBuf,
    pub csv: String,
    /// The hosted arrangement's namespaces around ncu, then the worker's own layers.
    pub sandbox: Vec<crate::sandbox::Layer>,
}

/// Why profiling produced no counters.
pub enum ProfileFailure {
    /// The candidate failed while being profiled (it would fail eval too).
    Rejected(crate::protocol::Failure),
    Error(EvalError),
}

impl From<EvalError> for ProfileFailure {
    fn from(e: EvalError) -> Self {
        ProfileFailure::Error(e)
    }
}

impl From<EnvError> for ProfileFailure {
    fn from(e: EnvError) -> Self {
        ProfileFailure::Error(EvalError::Env(e))
    }
}

fn find_ncu() -> Result<PathBuf, EnvError> {
    find_profiler("ncu").ok_or_else(|| EnvError {
        what: "ncu (Nsight Compute)".into(),
        hint: "install Nsight Compute (it ships with the CUDA toolkit), or diagnose a saved profile offline with --ncu RAW.csv".into(),
    })
}

/// Builds `candidate` (the baseline when None) and profiles one call of it with ncu.
/// Files go to `out` (default: `profile/` in the build folder).
pub fn profile(
    task: &Task,
    candidate: Option<&Path>,
    opts: &EvalOptions,
    out: Option<&Path>,
) -> Result<Profiled, ProfileFailure> {
    // A refusal would otherwise come after the build: say so first.
    eval::check_hosting(&opts.worker_exe, opts.allow_unconfined_profiling)?;
    find_ncu()?;
    let tc = Toolchain::find()?;
    let arch = eval::resolve_arch(opts)?;
    let source = candidate.unwrap_or(&task.baseline);
    let trusted = source == task.baseline.as_path();
    let built = match eval::build_one(&tc, opts, task, source, trusted, &arch) {
        Ok(b) => b,
        Err(crate::build::BuildError::Rejected { failure, dir, .. }) => {
            let mut f = crate::protocol::Failure::new(crate::protocol::FailureClass::BuildError, failure.summary());
            f.message.push_str(&format!(" (build folder {})", dir.display()));
            return Err(ProfileFailure::Rejected(f));
        }
        Err(crate::build::BuildError::Env(e)) => return Err(e.into()),
        Err(crate::build::BuildError::Io(m)) => return Err(EvalError::Internal(m).into()),
    };
    let dir = out.map(Path::to_path_buf).unwrap_or_else(|| built.dir.join("profile"));
    profile_built(task, built, opts, &dir)
}

/// Profiles an already-built library with ncu; the report and the raw CSV go to `dir`.
pub fn profile_built(task: &Task, built: Built, opts: &EvalOptions, dir: &Path) -> Result<Profiled, ProfileFailure> {
    let ncu = find_ncu()?;
    std::fs::create_dir_all(dir).map_err(|e| EvalError::Internal(format!("cannot create {}: {e}", dir.display())))?;
    let dir = dir.canonicalize().unwrap_or(dir.to_path_buf());
    let report_base = dir.join("profile");
    let request = WorkerRequest {
        task: task.clone(),
        reference: built.library.clone(),
        baseline: built.library.clone(),
        candidate: built.library.clone(),
        mode: Mode::Profile,
        device: opts.device,
        timing: opts.timing.clone(),
        threads: opts.threads,
        seed_base: opts.seed_base,
        deadline_s: 0.0,
        sandbox: true,
        sandbox_skip: Vec::new(),
    };
    let argv = vec![
        ncu.display().to_string(),
        "--set".into(),
        "full".into(),
        "--profile-from-start".into(),
        "off".into(),
        "--clock-control".into(),
        "none".into(),
        "--target-processes".into(),
        "all".into(),
        "--export".into(),
        report_base.display().to_string(),
        "--force-overwrite".into(),
    ];
    let host = eval::HostTool { argv, outputs: vec![dir.clone()], allow_unconfined: opts.allow_unconfined_profiling };
    // A full-set profile replays each kernel some 40 times.
    let timeout = opts.timeout.or(task.timeout_s.map(Duration::from_secs_f64)).unwrap_or(eval::DEFAULT_TIMEOUT) * 10;
    let run = run_worker(&opts.worker_exe, &request, timeout, Some(&host))?;
    match classify(&run, &request, timeout) {
        Classified::Report(r) => match r.outcome {
            Outcome::Passed => {}
            Outcome::Rejected { failure } => return Err(ProfileFailure::Rejected(failure)),
            Outcome::TaskError { message } => return Err(EvalError::Task(message).into()),
            Outcome::EnvError { message } => return Err(EnvError { what: "a usable GPU".into(), hint: message }.into()),
            Outcome::InternalError { message } => return Err(EvalError::Internal(message).into()),
        },
        Classified::Rejected(f) => return Err(ProfileFailure::Rejected(f)),
        Classified::TaskError(m) => return Err(EvalError::Task(m).into()),
        Classified::Internal(m) => return Err(EvalError::Internal(format!("{m}\n{}", run.stderr)).into()),
    }
    let report_path = report_base.with_extension("ncu-rep");
    if !report_path.is_file() {
        return Err(EvalError::Internal(format!(
            "ncu wrote no report to {} (its output: {})",
            report_path.display(),
            run.stderr.trim()
        ))
        .into());
    }
    let mut import = Command::new(&ncu);
    import.args(["--import"]).arg(&report_path).args(["--csv", "--page", "raw", "--print-units", "base"]);
    let out = process::run_captured(&mut import, Duration::from_secs(300))
        .map_err(|e| EvalError::Internal(format!("cannot run ncu --import: {e}")))?;
    if !out.success() {
        return Err(EvalError::Internal(format!("ncu --import failed: {}", out.stderr.trim())).into());
    }
    let csv_path = dir.join("ncu_raw.csv");
    std::fs::write(&csv_path, &out.stdout)
        .map_err(|e| EvalError::Internal(format!("cannot write {}: {e}", csv_path.display())))?;
    Ok(Profiled { built, csv_path, report_path, csv: out.stdout, sandbox: run.hosted_layers() })
}
