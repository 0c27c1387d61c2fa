//! `nightshift eval`: build reference, baseline and candidate, run one worker process
//! under a deadline, and turn whatever happened into a [`Verdict`].
//!
//! The orchestrator never loads candidate code. It classifies every way a worker can end:
//! a report (passed, rejected with a class, task error), a signal, an exit code, or the
//! deadline, using the last phase the worker announced to tell a candidate's crash from
//! an infrastructure failure.

use crate::build::{self, BuildError, BuildFailure, BuildSpec, Built};
use crate::wall::protocol::*;
use crate::wall::sanitizer::{parse_sanitizer, SanitizerReport};
use crate::task::Task;
use crate::toolchain::{EnvError, Toolchain};
use crate::process;
use crate::wall::gpu;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct EvalOptions {
    pub arch: Option<String>,
    pub extra_flags: Vec<String>,
    pub defines: BTreeMap<String, String>,
    pub device: usize,
    pub timeout: Option<Duration>,
    pub time: bool,
    pub energy: bool,
    pub sanitize: bool,
    pub timing: TimingPlan,
    pub cache: PathBuf,
    /// The executable that provides `worker` (this binary, unless a test says otherwise).
    pub worker_exe: PathBuf,
    pub threads: usize,
    /// Where input seeds start: random per `eval`, per run for `optimize`, so that no
    /// candidate can know its inputs (or their outputs) in advance.
    pub seed_base: u64,
    /// `--allow-unconfined-profiling`: run ncu and compute-sanitizer even where the hosted
    /// arrangement's namespaces cannot be made (the worker's own hosted sandbox only).
    pub allow_unconfined_profiling: bool,
    /// The measured DRAM bandwidth, when the caller already has it; timed judgments
    /// otherwise read it from the cache (measuring once per device when missing).
    pub achievable_dram_gbs: Option<f64>,
}

impl EvalOptions {
    pub fn new(worker_exe: PathBuf) -> EvalOptions {
        EvalOptions {
            arch: None,
            extra_flags: Vec::new(),
            defines: BTreeMap::new(),
            device: 0,
            timeout: None,
            time: true,
            energy: false,
            sanitize: false,
            timing: TimingPlan::default(),
            cache: build::cache_root(),
            worker_exe,
            threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(4).min(16),
            seed_base: fresh_seed_base(),
            allow_unconfined_profiling: false,
            achievable_dram_gbs: None,
        }
    }
}

/// A seed base nobody can predict; below 2^62 so that offsets never wrap.
pub fn fresh_seed_base() -> u64 {
    rand::random::<u64>() >> 2
}

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

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
    fn from_built(b: &Built) -> BuildSummary {
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

/// The build target: `--arch`, else the device's own.
pub fn resolve_arch(opts: &EvalOptions) -> Result<String, EvalError> {
    if let Some(a) = &opts.arch {
        build::gencode(a).map_err(EvalError::Task)?;
        return Ok(a.clone());
    }
    let (_, cc, _) = require_gpu(opts.device)?;
    Ok(build::arch_for_capability(cc.0, cc.1))
}

/// What to do on a machine without a GPU: the commands that need one cannot run, but the
/// task can still be checked and built (no `--arch` hint here: `eval --arch` would build
/// and then stop at the same missing GPU).
pub const NO_GPU_HINT: &str = "eval, optimize, diagnose and profiling run kernels on an NVIDIA GPU: run them on a machine with one and its driver. Without a GPU, `nightshift validate TASK --build --arch sm_90a` checks the task and builds its kernels";

/// The device's name, capability and driver version, or a clear environment error.
pub fn require_gpu(device: usize) -> Result<(String, (i32, i32), i32), EnvError> {
    if !gpu::driver_present() {
        return Err(EnvError { what: "a CUDA driver (libcuda.so)".into(), hint: NO_GPU_HINT.into() });
    }
    gpu::query_device(device)
        .map_err(|e| EnvError { what: format!("GPU {device}"), hint: format!("the driver answered {e}") })
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
    build::build(tc, &opts.cache, &spec)
}

fn failure_from_build(f: &BuildFailure) -> Failure {
    let class = match f {
        BuildFailure::Compile { .. } => FailureClass::BuildError,
        BuildFailure::MissingEntry { .. } => FailureClass::MissingEntry,
        BuildFailure::ForbiddenImport { .. } => FailureClass::ForbiddenImport,
    };
    Failure::new(class, f.summary())
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
        if let BuildFailure::Compile { log } = failure {
            verdict.stderr_tail = Some(tail(log, 4000));
        }
        f.message.push_str(&format!(" (build folder {})", dir.display()));
        verdict.failure = Some(f);
        verdict
    }
}

/// A tool that hosts the worker (ncu, compute-sanitizer): it runs through the hosted
/// arrangement (`nightshift hosted`, private namespaces), the worker's command line after
/// the tool's.
#[derive(Debug, Clone)]
pub struct HostTool {
    pub argv: Vec<String>,
    /// Folders the tool writes and the orchestrator reads afterwards (ncu's report, the
    /// sanitizer's logs): they stay reachable at their own paths.
    pub outputs: Vec<PathBuf>,
    /// `--allow-unconfined-profiling`.
    pub allow_unconfined: bool,
}

/// Why a hosted run is refused: what the hosted arrangement lacks, and the ways out.
pub fn unconfined_refusal(arrangement: &crate::wall::sandbox::hosted::Arrangement) -> EnvError {
    EnvError {
        what: "private namespaces for ncu and compute-sanitizer".into(),
        hint: format!(
            "{}. These tools run candidate code with /tmp, /dev/shm and TCP open to their front end, so nightshift runs them in private user, mount, network and PID namespaces, which this machine refuses. Allow unprivileged user namespaces (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone=1 or kernel.apparmor_restrict_unprivileged_userns=0, whichever is set), run as root, or pass --allow-unconfined-profiling to run them under the worker's own sandbox only (candidate code may then write the shared /tmp and /dev/shm and open TCP connections)",
            arrangement.shortfall()
        ),
    }
}

/// Checks, with a trivial tool, that hosted runs can be confined here (or are allowed not
/// to be), before any work that a refusal would waste. The arrangement says which layers
/// hold.
pub fn check_hosting(exe: &Path, allow_unconfined: bool) -> Result<crate::wall::sandbox::hosted::Arrangement, EvalError> {
    let dir = crate::wall::runtime_dir::evaluation_dir().map_err(EvalError::Internal)?;
    let report = dir.path().join("hosting.json");
    let line = crate::wall::sandbox::hosted::command_line(exe, &report, &[dir.path().to_path_buf()], allow_unconfined);
    let mut cmd = Command::new(&line[0]);
    cmd.args(&line[1..]).arg(exe).arg("--version");
    let got = process::run_captured(&mut cmd, Duration::from_secs(30))
        .map_err(|e| EvalError::Internal(format!("cannot run {} hosted: {e}", exe.display())))?;
    let arrangement = crate::wall::sandbox::hosted::read_report(&report).map_err(|e| {
        EvalError::Internal(format!(
            "the hosted trampoline said nothing of its arrangement ({e}); it ended with {}: {}",
            got.describe_end(Duration::from_secs(30)),
            got.stderr.trim()
        ))
    })?;
    if !arrangement.started {
        return Err(EvalError::Env(unconfined_refusal(&arrangement)));
    }
    Ok(arrangement)
}

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
        Mode::Evaluate { time: true, .. } => {
            opts.achievable_dram_gbs.or_else(|| crate::wall::bandwidth::achievable_or_note(opts.device, &mut verdict.notes))
        }
        _ => None,
    };
    let request = WorkerRequest {
        task: task.clone(),
        reference: trusted.reference.library.clone(),
        baseline: trusted.baseline.library.clone(),
        candidate: cand.library.clone(),
        mode,
        device: opts.device,
        timing: opts.timing.clone(),
        threads: opts.threads,
        seed_base: opts.seed_base,
        deadline_s: 0.0,
        sandbox: true,
        sandbox_skip: Vec::new(),
        achievable_dram_gbs: achievable,
        host_outputs: Vec::new(),
    };
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
    let tool = crate::toolchain::find_profiler("compute-sanitizer").ok_or_else(|| EnvError {
        what: "compute-sanitizer".into(),
        hint: "install the CUDA toolkit's compute-sanitizer (it ships with CUDA 13.0), or leave out --sanitize".into(),
    })?;
    let mut req = request.clone();
    req.mode = Mode::Sanitize;
    let mut out = Vec::new();
    let mut layers = Vec::new();
    // Outside the shared /tmp and outside the worker's scratch folder: nothing the
    // candidate runs can rewrite a log before it is read.
    let logs = crate::wall::runtime_dir::evaluation_dir().map_err(EvalError::Internal)?;
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

/// Everything observed about one worker process.
#[derive(Debug, Default)]
pub struct WorkerRun {
    pub last_phase: Option<(Phase, String)>,
    /// Every phase announced, in order.
    pub phases_seen: Vec<Phase>,
    /// Seconds per phase by the orchestrator's clock (from one announcement to the next),
    /// which holds even when the worker dies without a report.
    pub phase_seconds: BTreeMap<String, f64>,
    /// Seconds from the spawn to the first announced phase: the process start, and under
    /// a hosting tool the trampoline's namespaces and the tool's own start.
    pub first_phase_s: Option<f64>,
    pub device: Option<DeviceInfo>,
    pub sandbox: Vec<crate::wall::sandbox::Layer>,
    /// Seconds the worker took to put its sandbox up.
    pub sandbox_s: f64,
    /// Whether the worker was asked to sandbox itself (NIGHTSHIFT_SANDBOX=off says no).
    pub sandbox_requested: bool,
    pub report: Option<Box<WorkerReport>>,
    /// The first line on the report channel that the worker did not write.
    pub tampering: Option<String>,
    /// A sealed line that did not parse (a worker bug, never the candidate's doing).
    pub unreadable: Option<String>,
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub stderr: String,
    pub seconds: f64,
    /// Seconds spent waiting for another process to finish with the GPU.
    pub gpu_wait_s: f64,
    /// Under a hosting tool: the arrangement the trampoline made around it.
    pub hosting: Option<crate::wall::sandbox::hosted::Arrangement>,
}

impl WorkerRun {
    /// The hosted arrangement's layers, then the worker's own (empty when not hosted).
    pub fn hosted_layers(&self) -> Vec<crate::wall::sandbox::Layer> {
        match &self.hosting {
            Some(a) => a.layers.iter().chain(&self.sandbox).cloned().collect(),
            None => Vec::new(),
        }
    }
}

/// The longest line the orchestrator reads from a worker's report channel.
const MAX_CHANNEL_LINE: usize = 4 << 20;

/// Follows the report channel: opens each sealed line, notes the first that is not the
/// worker's, and times the phases as they are announced (the first one from `spawned`).
fn follow_channel(stdout: impl Read, key: crate::wall::channel::Key, hosted: bool, spawned: Instant) -> WorkerRun {
    let mut run = WorkerRun::default();
    let mut opener = crate::wall::channel::Opener::new(key);
    let mut current: Option<(Phase, Instant)> = None;
    let close = |run: &mut WorkerRun, current: &mut Option<(Phase, Instant)>| {
        if let Some((p, t)) = current.take() {
            *run.phase_seconds.entry(p.name().to_string()).or_default() += t.elapsed().as_secs_f64();
        }
    };
    let mut reader = BufReader::new(stdout);
    loop {
        // Lines are capped: candidate code writing endlessly without a newline must not
        // exhaust the orchestrator's memory. An overlong line is tampering (the worker's
        // own lines are a few kilobytes); the rest of it is read and dropped.
        let mut raw = Vec::new();
        match (&mut reader).take(MAX_CHANNEL_LINE as u64).read_until(b'\n', &mut raw) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if !raw.ends_with(b"\n") && raw.len() >= MAX_CHANNEL_LINE {
            run.tampering.get_or_insert(format!("a line longer than {} MiB", MAX_CHANNEL_LINE >> 20));
            let mut sink = Vec::new();
            while let Ok(n) = (&mut reader).take(MAX_CHANNEL_LINE as u64).read_until(b'\n', &mut sink) {
                if n == 0 || sink.ends_with(b"\n") {
                    break;
                }
                sink.clear();
            }
            continue;
        }
        let line = String::from_utf8_lossy(&raw);
        let line = line.strip_suffix('\n').unwrap_or(&line);
        let body = match opener.open(line) {
            Ok(body) => body.to_string(),
            // A hosting tool (ncu, compute-sanitizer) prints its own lines on this pipe.
            Err(crate::wall::channel::Tamper::Malformed) if hosted && !line.trim_start().starts_with('{') => continue,
            Err(t) => {
                if run.tampering.is_none() {
                    let excerpt: String = line.chars().take(160).collect();
                    run.tampering = Some(format!("{t}: `{excerpt}`"));
                }
                continue;
            }
        };
        if run.report.is_some() && run.tampering.is_none() {
            run.tampering = Some("a sealed line after the final report".into());
        }
        match serde_json::from_str::<WorkerMessage>(&body) {
            Ok(WorkerMessage::Phase { phase, detail }) => {
                close(&mut run, &mut current);
                run.first_phase_s.get_or_insert_with(|| spawned.elapsed().as_secs_f64());
                current = Some((phase, Instant::now()));
                run.phases_seen.push(phase);
                run.last_phase = Some((phase, detail));
            }
            Ok(WorkerMessage::Device { device }) => run.device = Some(device),
            Ok(WorkerMessage::Sandbox { layers, seconds }) => {
                run.sandbox = layers;
                run.sandbox_s = seconds;
            }
            Ok(WorkerMessage::Done { report }) => {
                close(&mut run, &mut current);
                run.report = Some(report);
            }
            Err(e) => {
                let excerpt: String = body.chars().take(300).collect();
                run.unreadable.get_or_insert(format!("{e}: {excerpt}"));
            }
        }
    }
    close(&mut run, &mut current);
    run
}

/// Spawns `exe worker REQUEST` (under `host` if given, e.g. compute-sanitizer, through
/// the hosted arrangement), isolated, with a fresh evaluation key on its stdin, holding
/// the GPU's lock while it runs, and follows it until it ends or `timeout` passes. A
/// hosted run the arrangement cannot confine, and that is not allowed to run unconfined,
/// is an environment error.
pub fn run_worker(
    exe: &Path,
    request: &WorkerRequest,
    timeout: Duration,
    host: Option<&HostTool>,
) -> Result<WorkerRun, EvalError> {
    // Not in the shared /tmp: a hosted candidate run unconfined, or another user, could
    // write there (a request swapped before the worker reads it).
    let dir = crate::wall::runtime_dir::evaluation_dir().map_err(EvalError::Internal)?;
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch)
        .map_err(|e| EvalError::Internal(format!("cannot create {}: {e}", scratch.display())))?;
    let mut request = request.clone();
    request.deadline_s = timeout.as_secs_f64();
    if let Some(h) = host {
        request.host_outputs = h.outputs.clone();
    }
    let setting = std::env::var("NIGHTSHIFT_SANDBOX").unwrap_or_default();
    request.sandbox = request.sandbox && setting != "off";
    request.sandbox_skip =
        setting.split(',').filter_map(|s| s.trim().strip_prefix("no-")).map(str::to_string).collect();
    // The request sits outside the scratch folder: the worker reads it before the sandbox.
    let req_path = dir.path().join("request.json");
    std::fs::write(&req_path, serde_json::to_vec(&request).expect("requests serialize"))
        .map_err(|e| EvalError::Internal(e.to_string()))?;
    let hosting_report = dir.path().join("hosting.json");
    let mut cmd = match host {
        Some(h) => {
            let keep: Vec<PathBuf> =
                std::iter::once(dir.path().to_path_buf()).chain(h.outputs.iter().cloned()).collect();
            let line = crate::wall::sandbox::hosted::command_line(exe, &hosting_report, &keep, h.allow_unconfined);
            let mut c = Command::new(&line[0]);
            c.args(&line[1..]).args(&h.argv).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    cmd.arg("worker").arg(&req_path).current_dir(&scratch);
    process::isolate(&mut cmd)
        .env("TMPDIR", &scratch)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let lock = if matches!(request.mode, Mode::Simulate { .. })
        || std::env::var_os("NIGHTSHIFT_GPU_LOCK").is_some_and(|v| v == "off")
    {
        None
    } else {
        let path = crate::wall::gpu_lock::lock_path(request.device).map_err(EvalError::Internal)?;
        Some(
            crate::wall::gpu_lock::acquire(&path)
                .map_err(|e| EvalError::Internal(format!("cannot take the GPU lock {}: {e}", path.display())))?,
        )
    };
    let key = crate::wall::channel::Key::fresh();
    let started = Instant::now();
    let mut child =
        cmd.spawn().map_err(|e| EvalError::Internal(format!("cannot start the worker {}: {e}", exe.display())))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A worker that died at once closed the pipe: its exit says the rest.
        let _ = std::io::Write::write_all(&mut stdin, format!("{}\n", key.to_hex()).as_bytes());
    }
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let hosted = host.is_some();
    let messages = std::thread::spawn(move || follow_channel(stdout, key, hosted, started));
    let errors = std::thread::spawn(move || {
        // Keep the tail: a chatty candidate must not exhaust memory.
        let mut kept: Vec<u8> = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match stderr.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    kept.extend_from_slice(&buf[..n]);
                    if kept.len() > 1 << 20 {
                        kept.drain(..kept.len() - (512 << 10));
                    }
                }
            }
        }
        String::from_utf8_lossy(&kept).into_owned()
    });
    process::track_group(&child);
    let waited = process::wait_or_kill(&mut child, started + timeout);
    process::forget_group(&child);
    let (status, timed_out) = waited.map_err(|e| EvalError::Internal(e.to_string()))?;
    let mut run = messages.join().unwrap_or_default();
    run.stderr = errors.join().unwrap_or_default();
    run.status = status;
    run.timed_out = timed_out;
    run.seconds = started.elapsed().as_secs_f64();
    run.gpu_wait_s = lock.map(|l| l.waited.as_secs_f64()).unwrap_or(0.0);
    run.sandbox_requested = request.sandbox;
    if hosted {
        // The trampoline writes its arrangement before it starts the tool: no report, no
        // tool run.
        let arrangement = crate::wall::sandbox::hosted::read_report(&hosting_report).map_err(|e| {
            EvalError::Internal(format!(
                "the hosted trampoline said nothing of its arrangement ({e}): {}",
                tail(&run.stderr, 2000)
            ))
        })?;
        if !arrangement.started {
            return Err(EvalError::Env(unconfined_refusal(&arrangement)));
        }
        run.hosting = Some(arrangement);
    }
    Ok(run)
}

/// What a worker run amounts to.
#[derive(Debug, Clone)]
pub enum Classified {
    Report(Box<WorkerReport>),
    Rejected(Failure),
    TaskError(String),
    Internal(String),
}

/// Classifies a worker run against its request. Tampering with the report channel
/// decides first (whatever else happened, candidate code spoke for the worker); then a
/// sealed report that fits the request; without one, the deadline, a signal or an exit
/// code is the candidate's doing only if the last announced phase ran untrusted code.
pub fn classify(run: &WorkerRun, request: &WorkerRequest, timeout: Duration) -> Classified {
    let (phase, detail) = match &run.last_phase {
        Some((p, d)) => (Some(*p), d.clone()),
        None => (None, String::new()),
    };
    let where_ = match phase {
        Some(p) if detail.is_empty() => format!("during {}", p.name()),
        Some(p) => format!("during {} ({detail})", p.name()),
        None => "before it said anything".into(),
    };
    let untrusted = phase.is_some_and(Phase::runs_untrusted_code);
    if let Some(t) = &run.tampering {
        return Classified::Rejected(Failure::new(
            FailureClass::ForgedReport,
            format!("something other than the worker wrote on its report channel {where_}: {t}; candidate code must not touch file descriptors it did not open"),
        ));
    }
    if let Some(report) = &run.report {
        return match crate::wall::report_check::check(request, run, report) {
            Ok(()) => Classified::Report(report.clone()),
            Err(why) => Classified::Rejected(Failure::new(
                FailureClass::ForgedReport,
                format!("the worker's report does not fit the request: {why}"),
            )),
        };
    }
    if let Some(u) = &run.unreadable {
        return Classified::Internal(format!("the worker sent a report that does not parse (a nightshift bug): {u}"));
    }
    if run.timed_out {
        if untrusted {
            return Classified::Rejected(Failure::new(
                FailureClass::Timeout,
                format!(
                    "killed after the {:.0} s timeout {where_}: an endless loop or a deadlock?",
                    timeout.as_secs_f64()
                ),
            ));
        }
        return Classified::TaskError(format!(
            "the worker ran past the {:.0} s timeout {where_}, before any candidate code ran",
            timeout.as_secs_f64()
        ));
    }
    let Some(status) = run.status else {
        return Classified::Internal(format!("the worker vanished {where_}"));
    };
    if let Some(sig) = status.signal() {
        let what = format!("signal {sig} ({})", process::signal_name(sig));
        let cpu = if sig == libc::SIGXCPU { ": the CPU-time limit of the sandbox" } else { "" };
        return if untrusted {
            Classified::Rejected(Failure::new(FailureClass::Crash, format!("the worker died by {what}{cpu} {where_}")))
        } else {
            Classified::Internal(format!("the worker died by {what} {where_}"))
        };
    }
    let code = status.code().unwrap_or(-1);
    if untrusted && code == crate::wall::worker::CHANNEL_LOST_EXIT {
        return Classified::Rejected(Failure::new(
            FailureClass::ForgedReport,
            format!("the worker's report channel was closed or replaced under it {where_}: candidate code must not touch file descriptors it did not open"),
        ));
    }
    if untrusted {
        return Classified::Rejected(Failure::new(
            FailureClass::ProcessExit,
            format!("candidate code ended the process with exit code {code} {where_}, before the worker could report: kernels and launchers must return, never exit"),
        ));
    }
    Classified::Internal(format!("the worker exited with code {code} {where_} without a report"))
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

    fn run(phase: Option<Phase>, status: Option<ExitStatus>, timed_out: bool) -> WorkerRun {
        WorkerRun { last_phase: phase.map(|p| (p, "size n=3 seed 1".into())), status, timed_out, ..Default::default() }
    }

    fn exit(code: i32) -> Option<ExitStatus> {
        Some(ExitStatus::from_raw(code << 8))
    }

    fn signal(sig: i32) -> Option<ExitStatus> {
        Some(ExitStatus::from_raw(sig))
    }

    fn rejected_class(c: Classified) -> FailureClass {
        match c {
            Classified::Rejected(f) => f.class,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    const T: Duration = Duration::from_secs(10);

    fn request() -> WorkerRequest {
        let task = Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/vector_add")).unwrap();
        WorkerRequest {
            task,
            reference: "r.so".into(),
            baseline: "b.so".into(),
            candidate: "c.so".into(),
            mode: Mode::Evaluate { time: true, energy: false, check_baseline: false },
            device: 0,
            timing: TimingPlan::default(),
            threads: 1,
            seed_base: 7,
            deadline_s: 10.0,
            sandbox: true,
            sandbox_skip: Vec::new(),
            achievable_dram_gbs: None,
            host_outputs: Vec::new(),
        }
    }

    /// A run that went through every phase and sent a report that fits `request()`.
    fn honest_run() -> WorkerRun {
        let req = request();
        let cases = req.task.checks.len() * req.task.seeds as usize;
        let side = |ms: f64| SideTiming { median_ms: ms, samples: 100, ..Default::default() };
        let mut report = WorkerReport::of(Outcome::Passed);
        report.check = Some(CheckSummary {
            cases,
            calls: 2 * cases + crate::wall::worker::REPEAT_CALLS,
            repeat_calls: crate::wall::worker::REPEAT_CALLS,
            elements_compared: 1000,
            ..Default::default()
        });
        report.timing = Some(TimingReport {
            baseline: side(2.0),
            candidate: side(1.0),
            speedup: 2.0,
            host_check: HostCheck { calls: 10, ok: true, ..Default::default() },
            cold: Some(ColdCheck::new(&[vec![2.0, 2.0], vec![1.0, 1.0]], &[vec![2.0, 2.0], vec![1.0, 1.0]])),
            reliable: true,
            ..Default::default()
        });
        WorkerRun {
            phases_seen: vec![
                Phase::Init,
                Phase::LoadReference,
                Phase::Reference,
                Phase::LoadCandidate,
                Phase::Check,
                Phase::Time,
            ],
            last_phase: Some((Phase::Time, String::new())),
            device: Some(DeviceInfo::default()),
            sandbox: vec![crate::wall::sandbox::Layer { name: "seccomp".into(), active: true, detail: String::new() }],
            sandbox_requested: true,
            report: Some(Box::new(report)),
            status: exit(0),
            ..Default::default()
        }
    }

    #[test]
    fn an_honest_report_fits_its_request() {
        assert!(matches!(classify(&honest_run(), &request(), T), Classified::Report(_)));
    }

    #[test]
    fn tampering_outranks_any_report() {
        let mut r = honest_run();
        r.tampering = Some("line 0 with a MAC that does not match".into());
        assert_eq!(rejected_class(classify(&r, &request(), T)), FailureClass::ForgedReport);
        let mut r = run(Some(Phase::Check), exit(0), false);
        r.tampering = Some("a line that is not a sealed report line".into());
        assert_eq!(rejected_class(classify(&r, &request(), T)), FailureClass::ForgedReport);
    }

    #[test]
    fn reports_that_do_not_fit_the_request_are_forgeries() {
        type Edit = Box<dyn Fn(&mut WorkerRun)>;
        let edits: Vec<(&str, Edit)> = vec![
            ("too few cases", Box::new(|r| r.report.as_mut().unwrap().check.as_mut().unwrap().cases = 1)),
            ("no timing", Box::new(|r| r.report.as_mut().unwrap().timing = None)),
            ("no check phase", Box::new(|r| r.phases_seen.retain(|p| *p != Phase::Check))),
            ("no sandbox", Box::new(|r| r.sandbox.clear())),
            (
                "speedup not from medians",
                Box::new(|r| r.report.as_mut().unwrap().timing.as_mut().unwrap().speedup = 9.0),
            ),
            ("no cold check", Box::new(|r| r.report.as_mut().unwrap().timing.as_mut().unwrap().cold = None)),
            ("one sample", Box::new(|r| r.report.as_mut().unwrap().timing.as_mut().unwrap().candidate.samples = 1)),
        ];
        for (what, edit) in edits {
            let mut r = honest_run();
            edit(&mut r);
            let Classified::Rejected(f) = classify(&r, &request(), T) else { panic!("{what}: accepted") };
            assert_eq!(f.class, FailureClass::ForgedReport, "{what}");
        }
    }

    #[test]
    fn a_broken_channel_and_an_unparseable_report_are_told_apart() {
        let r = run(Some(Phase::Check), exit(crate::wall::worker::CHANNEL_LOST_EXIT), false);
        assert_eq!(rejected_class(classify(&r, &request(), T)), FailureClass::ForgedReport);
        let mut r = run(Some(Phase::Time), exit(0), false);
        r.unreadable = Some("invalid type: null, expected f64".into());
        assert!(matches!(classify(&r, &request(), T), Classified::Internal(_)), "a worker bug, not the candidate's");
    }

    #[test]
    fn the_channel_follower_reads_sealed_lines_and_flags_the_rest() {
        let key = crate::wall::channel::Key::fresh();
        let mut sealer = crate::wall::channel::Sealer::new(key.clone());
        let mut text = String::new();
        let msg = |m: &WorkerMessage| serde_json::to_string(m).unwrap();
        text += &sealer.seal(&msg(&WorkerMessage::Phase { phase: Phase::Check, detail: String::new() }));
        text += r#"{"event":"done","report":{"outcome":{"outcome":"passed"}}}"#;
        text += "\n";
        let got = follow_channel(text.as_bytes(), key.clone(), false, Instant::now());
        assert!(got.tampering.is_some());
        assert!(got.report.is_none(), "the forged report was not taken");
        assert_eq!(got.phases_seen, vec![Phase::Check]);
        // Under a tool, its own chatter is not tampering.
        let mut sealer = crate::wall::channel::Sealer::new(key.clone());
        let text = format!(
            "==PROF== Connected to process 12\n{}",
            sealer.seal(&msg(&WorkerMessage::Phase { phase: Phase::Profile, detail: String::new() }))
        );
        let spawned = Instant::now() - Duration::from_secs(2);
        let got = follow_channel(text.as_bytes(), key, true, spawned);
        assert!(got.tampering.is_none());
        assert_eq!(got.phases_seen, vec![Phase::Profile]);
        // ncu's start is timed from the spawn to the first phase.
        assert!(got.first_phase_s.is_some_and(|s| (2.0..60.0).contains(&s)), "{:?}", got.first_phase_s);
    }

    #[test]
    fn an_endless_line_on_the_channel_is_cut_and_counted_as_tampering() {
        let key = crate::wall::channel::Key::fresh();
        let mut sealer = crate::wall::channel::Sealer::new(key.clone());
        let mut text = vec![b'x'; 3 * MAX_CHANNEL_LINE];
        text.push(b'\n');
        let phase =
            serde_json::to_string(&WorkerMessage::Phase { phase: Phase::Check, detail: String::new() }).unwrap();
        text.extend_from_slice(sealer.seal(&phase).as_bytes());
        let got = follow_channel(&text[..], key, false, Instant::now());
        assert!(got.tampering.as_deref().is_some_and(|t| t.contains("longer than")), "{:?}", got.tampering);
        assert_eq!(got.phases_seen, vec![Phase::Check], "the channel is read on after the cut");
    }

    #[test]
    fn reports_with_nan_errors_survive_the_channel() {
        let mut f = Failure::new(FailureClass::WrongAnswer, "NaN everywhere");
        f.comparison = Some(Box::new(crate::wall::verify::Comparison {
            elements: 4,
            mismatches: 4,
            first_mismatch: Some(crate::wall::verify::Mismatch { index: 0, got: f64::NAN, expected: 1.0 }),
            max_abs_err: f64::INFINITY,
            max_rel_err: f64::NAN,
        }));
        let report = WorkerReport::of(Outcome::Rejected { failure: f });
        let line = serde_json::to_string(&WorkerMessage::Done { report: Box::new(report) }).unwrap();
        let back: WorkerMessage = serde_json::from_str(&line).expect("NaN and infinities read back");
        let WorkerMessage::Done { report } = back else { panic!() };
        let Outcome::Rejected { failure } = report.outcome else { panic!() };
        assert!(failure.comparison.unwrap().max_rel_err.is_nan());
    }

    #[test]
    fn a_sealed_rejection_is_believed() {
        let mut r = run(Some(Phase::Check), exit(0), false);
        let f = Failure::new(FailureClass::WrongAnswer, "off by one");
        r.report = Some(Box::new(WorkerReport::of(Outcome::Rejected { failure: f })));
        assert!(matches!(classify(&r, &request(), T), Classified::Report(_)));
        r.report = Some(Box::new(WorkerReport::of(Outcome::Passed)));
        assert!(matches!(classify(&r, &request(), T), Classified::Rejected(_)), "a bare pass fits no request");
    }

    #[test]
    fn deaths_in_candidate_phases_are_the_candidates() {
        assert_eq!(
            rejected_class(classify(&run(Some(Phase::Check), None, true), &request(), T)),
            FailureClass::Timeout
        );
        assert_eq!(
            rejected_class(classify(&run(Some(Phase::Check), signal(11), false), &request(), T)),
            FailureClass::Crash
        );
        assert_eq!(
            rejected_class(classify(&run(Some(Phase::Time), exit(3), false), &request(), T)),
            FailureClass::ProcessExit
        );
        assert_eq!(
            rejected_class(classify(&run(Some(Phase::LoadCandidate), signal(6), false), &request(), T)),
            FailureClass::Crash
        );
        assert_eq!(
            rejected_class(classify(&run(Some(Phase::Check), exit(0), false), &request(), T)),
            FailureClass::ProcessExit
        );
    }

    #[test]
    fn messages_say_where_and_why() {
        let Classified::Rejected(f) = classify(&run(Some(Phase::Check), exit(3), false), &request(), T) else {
            panic!()
        };
        assert!(f.message.contains("exit code 3"), "{}", f.message);
        assert!(f.message.contains("during check (size n=3 seed 1)"), "{}", f.message);
        let Classified::Rejected(f) = classify(&run(Some(Phase::Check), signal(11), false), &request(), T) else {
            panic!()
        };
        assert!(f.message.contains("SIGSEGV"), "{}", f.message);
        let Classified::Rejected(f) = classify(&run(Some(Phase::Check), None, true), &request(), T) else { panic!() };
        assert!(f.message.contains("10 s timeout"), "{}", f.message);
    }

    #[test]
    fn deaths_before_candidate_code_are_not_blamed_on_it() {
        assert!(matches!(
            classify(&run(Some(Phase::Reference), signal(11), false), &request(), T),
            Classified::Internal(_)
        ));
        assert!(matches!(classify(&run(Some(Phase::Init), exit(1), false), &request(), T), Classified::Internal(_)));
        assert!(matches!(classify(&run(Some(Phase::Reference), None, true), &request(), T), Classified::TaskError(_)));
        assert!(matches!(classify(&run(None, exit(101), false), &request(), T), Classified::Internal(_)));
    }

    #[test]
    fn a_refused_hosted_run_names_what_is_missing_and_the_waiver() {
        use crate::wall::sandbox::{hosted, Layer};
        let why =
            "cannot be made (unshare: No space left on device) (user.max_user_namespaces = 0 forbids user namespaces)";
        let layers = [hosted::USER, hosted::MOUNT, hosted::NETWORK, hosted::PID]
            .map(|name| Layer { name: name.into(), active: false, detail: why.into() })
            .to_vec();
        let refused = hosted::Arrangement { layers, confined: false, kept_root_capabilities: false, started: false };
        let message = unconfined_refusal(&refused).to_string();
        for must in ["max_user_namespaces", "--allow-unconfined-profiling", "mount namespace", "/tmp"] {
            assert!(message.contains(must), "`{must}` missing: {message}");
        }
        let run = WorkerRun { hosting: Some(refused.clone()), sandbox: honest_run().sandbox, ..Default::default() };
        let names: Vec<String> = run.hosted_layers().into_iter().map(|l| l.name).collect();
        assert_eq!(names, ["user namespace", "mount namespace", "network namespace", "pid namespace", "seccomp"]);
        assert!(WorkerRun::default().hosted_layers().is_empty(), "a run that was not hosted records none");
    }

    #[test]
    fn tails_keep_the_end_and_respect_utf8() {
        assert_eq!(tail("abcdef", 3), "...def");
        assert_eq!(tail("ab", 3), "ab");
        let t = tail("ééééé", 3);
        assert!(t.starts_with("..."));
    }
}
