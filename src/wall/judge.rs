//! `nightshift eval` and judging: build reference, baseline and candidate, run one worker process
//! under a deadline, and turn whatever happened into a [`Verdict`].
//!
//! The orchestrator never loads candidate code. It classifies every way a worker can end:
//! a report (passed, rejected with a class, task error), a signal, an exit code, or the
//! deadline, using the last phase the worker announced to tell a candidate's crash from
//! an infrastructure failure.

use crate::task::Task;
use crate::toolkit::build::{BuildError, Built};
use crate::toolkit::toolchain::{EnvError, Toolchain};
use crate::wall::build::{build_one, build_trusted, TrustedBuilds};
use crate::wall::classify::{classify, Classified};
use crate::wall::client::{check_hosting, run_worker, HostTool, WorkerRun};
use crate::wall::options::{resolve_arch, EvalOptions, DEFAULT_TIMEOUT};
use crate::wall::protocol::{Failure, FailureClass, Mode, Outcome, WorkerRequest};
use crate::wall::sanitizer::{parse_sanitizer, SanitizerReport};
use crate::wall::verdict::{tail, BuildSummary, EvalError, Phases, Status, Verdict};
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

/// Judges a built candidate against the trusted builds: one worker in `mode` under the
/// deadline, classified, then the sanitizers when asked for and the candidate passed.
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
    // Measured here, in a process that never loads candidate code, and only for timings:
    // a failure is a note, never the evaluation's.
    let achievable = match mode {
        Mode::Evaluate { time: true, .. } => opts
            .achievable_dram_gbs
            .or_else(|| crate::wall::bandwidth::achievable_or_note(opts.device, &mut verdict.notes)),
        _ => None,
    };
    let libraries = [trusted.reference.library.clone(), trusted.baseline.library.clone(), cand.library.clone()];
    let request = opts.worker_request(task, libraries, mode, achievable);
    let timeout = opts.timeout.or(task.timeout_s.map(Duration::from_secs_f64)).unwrap_or(DEFAULT_TIMEOUT);
    let run = run_worker(&opts.worker_exe, &request, timeout, None)?;
    verdict.device = run.device.clone();
    verdict.sandbox = run.sandbox.clone();
    if run.gpu_wait_s >= 0.5 {
        verdict.notes.push(format!(
            "waited {:.1} s for the GPU: another nightshift process was using it (one measurement at a time per GPU)",
            run.gpu_wait_s
        ));
    }
    apply_phases(&mut verdict.phases, &run);
    let classified = classify(&run, &request, timeout);
    match classified {
        Classified::Report(report) => {
            verdict.check = report.check;
            verdict.speedup = report.timing.as_ref().and_then(|t| {
                crate::stats::Speedup::from_rounds(
                    t.speedup,
                    &t.baseline.round_medians_ms,
                    &t.candidate.round_medians_ms,
                )
            });
            verdict.timing = report.timing;
            verdict.energy = report.energy;
            verdict.notes.extend(report.notes);
            match report.outcome {
                Outcome::Passed => verdict.status = Status::Passed,
                Outcome::Rejected { failure } => {
                    verdict.failure = Some(failure);
                    verdict.stderr_tail = Some(tail(&run.stderr, 4000)).filter(|t| !t.trim().is_empty());
                }
                Outcome::TaskError { message } => return Err(EvalError::Task(message)),
                Outcome::EnvError { message } => {
                    return Err(EvalError::Env(EnvError { what: "a usable GPU".into(), hint: message }))
                }
                Outcome::InternalError { message } => {
                    return Err(EvalError::Internal(format!("{message}\n{}", tail(&run.stderr, 2000))))
                }
            }
        }
        Classified::Rejected(failure) => {
            verdict.failure = Some(failure);
            verdict.stderr_tail = Some(tail(&run.stderr, 4000)).filter(|t| !t.trim().is_empty());
        }
        Classified::TaskError(m) => return Err(EvalError::Task(m)),
        Classified::Internal(m) => return Err(EvalError::Internal(format!("{m}\n{}", tail(&run.stderr, 2000)))),
    }

    if verdict.passed() && opts.sanitize {
        let sanitize_started = Instant::now();
        let (reports, hosted_layers) = sanitize(&request, opts, timeout)?;
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
                        if r.summary.is_empty() { "no summary: the tool failed" } else { &r.summary }
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

/// Phase seconds by the orchestrator's clock: right even when the worker died.
fn apply_phases(p: &mut Phases, run: &WorkerRun) {
    let get = |names: &[&str]| names.iter().map(|n| run.phase_seconds.get(*n).copied().unwrap_or(0.0)).sum::<f64>();
    p.check = get(&["load-candidate", "check-baseline", "check"]);
    p.time = get(&["time"]);
    p.energy = get(&["energy"]);
    p.setup = (run.seconds - p.check - p.time - p.energy).max(0.0);
    p.sandbox = run.sandbox_s;
    p.worker = run.phase_seconds.clone();
}

/// The compute-sanitizer tools `--sanitize` runs: out-of-bounds and misaligned accesses,
/// shared-memory races, reads of uninitialized global memory, and barrier misuse.
pub const SANITIZER_TOOLS: [&str; 4] = ["memcheck", "racecheck", "initcheck", "synccheck"];

/// Every tool of [`SANITIZER_TOOLS`] on the smallest check size, with the layers the
/// first tool's run held (the hosted arrangement's, then the worker's).
pub fn sanitize(
    request: &WorkerRequest,
    opts: &EvalOptions,
    timeout: Duration,
) -> Result<(Vec<SanitizerReport>, Vec<crate::wall::sandbox::Layer>), EvalError> {
    let tool = crate::toolkit::toolchain::find_profiler("compute-sanitizer").ok_or_else(|| EnvError {
        what: "compute-sanitizer".into(),
        hint: "install the CUDA toolkit's compute-sanitizer (it ships with CUDA 13.0), or leave out --sanitize".into(),
    })?;
    let mut req = request.clone();
    req.mode = Mode::Sanitize;
    let mut out = Vec::new();
    let mut layers = Vec::new();
    // Outside the shared /tmp and outside the worker's scratch folder: nothing the
    // candidate runs can rewrite a log before it is read.
    let logs = crate::wall::runtime_dir::evaluation_dir().map_err(|e| EvalError::Internal(e.to_string()))?;
    for check in SANITIZER_TOOLS {
        // The tool's report goes to a file: the worker's stdout carries the protocol.
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
        let run = run_worker(&opts.worker_exe, &req, timeout * 4, Some(&host))?;
        if layers.is_empty() {
            layers = run.hosted_layers();
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let mut report = parse_sanitizer(check, &text);
        if let Classified::Rejected(f) = classify(&run, &req, timeout * 4) {
            report.findings.push(format!("under {check} the candidate failed: {}", f.message));
            report.errors = Some(report.errors.unwrap_or(0).max(1));
        }
        out.push(report);
    }
    Ok((out, layers))
}
