//! `nightshift eval` and judging from the orchestrator: build reference, baseline and
//! candidate, run one judge process under a deadline (`spawn`), and turn its report into a
//! [`Verdict`]; then, when asked, the sanitizers on standalone workers (`hosted`).
//!
//! The orchestrator never loads kernel code and never opens the GPU for it: the judge
//! decides, from what it observed itself, and this side only words the verdict.

use super::classify::{classify, Classified};
use super::hosted::{check_hosting, run_standalone, HostTool};
use super::options::{resolve_arch, EvalOptions, DEFAULT_TIMEOUT};
use super::sanitizer::{parse_sanitizer, SanitizerReport};
use super::spawn::run_judge;
use super::verdict::{tail, BuildSummary, EvalError, Phases, Status, Verdict};
use crate::task::Task;
use crate::toolkit::build::{BuildError, Built};
use crate::toolkit::toolchain::{EnvError, Toolchain};
use crate::wall::build::{build_one, build_trusted, TrustedBuilds};
use crate::wall::protocol::{Failure, FailureClass, JudgeReport, Mode, Outcome, Standalone};
use std::path::Path;
use std::time::{Duration, Instant};

/// Evaluates `candidate` (the baseline when None) on `task`.
pub fn evaluate(task: &Task, candidate: Option<&Path>, opts: &EvalOptions) -> Result<Verdict, EvalError> {
    let started = Instant::now();
    if opts.sanitize {
        // Refused sanitizer runs would come after the builds and the check: say so first.
        check_hosting(&opts.worker_exe, opts.allow_unconfined_profiling)?;
    }
    let tc = Toolchain::find()?;
    let arch = resolve_arch(opts)?;
    let candidate_path = candidate.unwrap_or(&task.baseline).to_path_buf();
    let candidate_is_baseline = std::fs::read(&candidate_path)
        .map_err(|e| EvalError::Task(format!("cannot read {}: {e}", candidate_path.display())))?
        == std::fs::read(&task.baseline)
            .map_err(|e| EvalError::Task(format!("cannot read {}: {e}", task.baseline.display())))?
        && opts.defines.is_empty();

    // Three builds in parallel; only the candidate's failure is the candidate's fault.
    let build_started = Instant::now();
    let (trusted, cand) = std::thread::scope(|s| {
        let c = (!candidate_is_baseline).then(|| s.spawn(|| build_one(&tc, opts, task, &candidate_path, false, &arch)));
        let t = build_trusted(&tc, opts, task, &arch);
        (t, c.map(|h| h.join().expect("build thread")))
    });
    let build_seconds = build_started.elapsed().as_secs_f64();
    let trusted = trusted?;
    let cand = match cand {
        None => trusted.baseline.clone(),
        Some(Ok(b)) => b,
        Some(Err(BuildError::Rejected { failure, dir, .. })) => {
            let mut verdict = Verdict::build_rejected(task, &candidate_path, &arch, &failure, &dir);
            verdict.phases.build = build_seconds;
            verdict.phases.total = started.elapsed().as_secs_f64();
            return Ok(verdict);
        }
        Some(Err(BuildError::Env(e))) => return Err(EvalError::Env(e)),
        Some(Err(BuildError::Io(m))) => return Err(EvalError::Internal(m)),
    };
    let mode = Mode::Evaluate { time: opts.time, energy: opts.energy, check_baseline: true };
    let mut verdict = judge(task, &trusted, &cand, &candidate_path, opts, &arch, mode)?;
    verdict.phases.build = build_seconds;
    verdict.phases.total = started.elapsed().as_secs_f64();
    Ok(verdict)
}

/// Judges a built candidate against the trusted builds: one judge process in `mode`
/// under the deadline, then the sanitizers when asked for and the candidate passed.
pub fn judge(
    task: &Task,
    trusted: &TrustedBuilds,
    cand: &Built,
    candidate_path: &Path,
    opts: &EvalOptions,
    arch: &str,
    mode: Mode,
) -> Result<Verdict, EvalError> {
    let started = Instant::now();
    let mut verdict = Verdict::pending(task, candidate_path, arch);
    verdict.build = Some(BuildSummary::from_built(cand));
    // Measured here, in a process that never loads kernel code, and only for timings:
    // a failure is a note, never the evaluation's.
    let achievable = match mode {
        Mode::Evaluate { time: true, .. } => opts
            .achievable_dram_gbs
            .or_else(|| crate::wall::bandwidth::achievable_or_note(opts.device, &mut verdict.notes)),
        _ => None,
    };
    let timeout = opts.timeout.or(task.timeout_s.map(Duration::from_secs_f64)).unwrap_or(DEFAULT_TIMEOUT);
    // Outside the shared /tmp: nothing another user or a worker writes can reach it.
    let folder = crate::wall::runtime_dir::evaluation_dir().map_err(|e| EvalError::Internal(e.to_string()))?;
    let request = opts.judge_request(task, trusted, cand, mode, achievable, timeout, folder.path());
    let run = run_judge(&opts.worker_exe, &request, timeout)?;
    if run.gpu_wait_s >= 0.5 {
        verdict.notes.push(format!(
            "waited {:.1} s for the GPU: another nightshift process was using it (one measurement at a time per GPU)",
            run.gpu_wait_s
        ));
    }
    let seconds = run.seconds;
    let report = run.into_report(timeout)?;
    verdict.device = report.device.clone();
    verdict.sandbox = report.sandbox.clone();
    apply_phases(&mut verdict.phases, &report, seconds);
    verdict.check = report.check;
    verdict.speedup = report.timing.as_ref().and_then(crate::wall::protocol::TimingReport::interval);
    verdict.timing = report.timing;
    verdict.energy = report.energy;
    if !report.served.is_empty() {
        verdict.served = super::verdict::ShapeResult::from_timings(&report.served, task.serve_weights);
        verdict.speedup = Some(super::verdict::ShapeResult::objective(&verdict.served));
        if let (Some(e), Some(saving)) =
            (verdict.energy.as_mut(), super::verdict::ShapeResult::energy_objective(&verdict.served))
        {
            e.saving = saving;
            e.note = format!("{} (the saving is the weighted geometric mean over the served shapes)", e.note);
        }
    }
    verdict.notes.extend(report.notes);
    match report.outcome {
        Outcome::Passed => verdict.status = Status::Passed,
        Outcome::Rejected { failure } => {
            verdict.failure = Some(failure);
            verdict.stderr_tail = report.stderr_tail;
        }
        Outcome::TaskError { message } => return Err(EvalError::Task(message)),
        Outcome::EnvError { message } => {
            return Err(EvalError::Env(EnvError { what: "a usable GPU".into(), hint: message }))
        }
        Outcome::InternalError { message } => return Err(EvalError::Internal(message)),
    }

    if verdict.passed() && opts.sanitize {
        let sanitize_started = Instant::now();
        let (reports, hosted_layers) = sanitize(task, &cand.library, opts, timeout)?;
        verdict.hosted_sandbox = hosted_layers;
        for r in &reports {
            if !r.clean() && verdict.failure.is_none() {
                verdict.status = Status::Rejected;
                let found = r.findings.first().cloned().unwrap_or_else(|| r.summary.clone());
                verdict.failure = Some(Failure::new(
                    FailureClass::SanitizerError,
                    format!(
                        "compute-sanitizer {} at the smallest check size {}: {} ({})",
                        r.tool,
                        task.smallest_check(),
                        found,
                        if r.summary.is_empty() { "no summary" } else { &r.summary }
                    ),
                ));
            }
        }
        verdict.sanitizer = reports;
        verdict.phases.sanitize = sanitize_started.elapsed().as_secs_f64();
    }
    verdict.phases.total = started.elapsed().as_secs_f64();
    Ok(verdict)
}

/// Phase seconds by the judge's clock.
fn apply_phases(p: &mut Phases, report: &JudgeReport, seconds: f64) {
    let get = |names: &[&str]| names.iter().map(|n| report.phases.get(*n).copied().unwrap_or(0.0)).sum::<f64>();
    p.check = get(&["load-candidate", "check-baseline", "check"]);
    p.time = get(&["time"]);
    p.energy = get(&["energy"]);
    p.setup = (seconds - p.check - p.time - p.energy).max(0.0);
    p.sandbox = report.sandbox_s;
    p.worker = report.phases.clone();
}

/// The compute-sanitizer tools `--sanitize` runs: out-of-bounds and misaligned accesses,
/// shared-memory races, reads of uninitialized global memory, and barrier misuse.
pub const SANITIZER_TOOLS: [&str; 4] = ["memcheck", "racecheck", "initcheck", "synccheck"];

/// Every tool of [`SANITIZER_TOOLS`] on the smallest check size, each on a standalone
/// worker of the candidate's library; with the layers the first tool's run held (the
/// hosted arrangement's, then the worker's). A tool that fails before the worker loaded
/// the library is an environment failure, never the candidate's.
pub fn sanitize(
    task: &Task,
    library: &Path,
    opts: &EvalOptions,
    timeout: Duration,
) -> Result<(Vec<SanitizerReport>, Vec<crate::wall::sandbox::Layer>), EvalError> {
    let tool = crate::toolkit::toolchain::find_profiler("compute-sanitizer").ok_or_else(|| EnvError {
        what: "compute-sanitizer".into(),
        hint: "install the CUDA toolkit's compute-sanitizer (it ships with CUDA 13.0), or leave out --sanitize".into(),
    })?;
    let mut out = Vec::new();
    let mut layers = Vec::new();
    // Outside the shared /tmp and outside the worker's scratch folder: nothing the
    // candidate runs can rewrite a log before it is read.
    let logs = crate::wall::runtime_dir::evaluation_dir().map_err(|e| EvalError::Internal(e.to_string()))?;
    for check in SANITIZER_TOOLS {
        // The tool's report goes to a file: the worker's stdout carries its progress.
        let log = logs.path().join(format!("{check}.log"));
        let host = HostTool {
            argv: vec![
                tool.display().to_string(),
                "--tool".into(),
                check.into(),
                "--print-limit".into(),
                "20".into(),
                "--log-file".into(),
                log.display().to_string(),
            ],
            outputs: vec![logs.path().to_path_buf()],
            allow_unconfined: opts.allow_unconfined_profiling,
        };
        let request = opts.standalone_request(task, library, false, Standalone::Sanitize);
        let run = run_standalone(&opts.worker_exe, request, timeout * 4, &host)?;
        if layers.is_empty() {
            layers = run.hosted_layers();
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let mut report = parse_sanitizer(check, &text);
        match classify(&run, timeout * 4) {
            Classified::Ran => {}
            Classified::Rejected(f) => {
                report.findings.push(format!("under {check} the candidate failed: {}", f.message));
                report.errors = Some(report.errors.unwrap_or(0).max(1));
            }
            Classified::Env(m) => return Err(EvalError::Env(EnvError { what: "a usable GPU".into(), hint: m })),
            Classified::Internal(m) => {
                return Err(EvalError::Internal(format!(
                    "compute-sanitizer {check} failed before the candidate loaded: {m}\n{}",
                    tail(&text, 1500)
                )))
            }
        }
        out.push(report);
    }
    Ok((out, layers))
}
