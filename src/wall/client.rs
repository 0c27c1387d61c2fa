//! The worker client: spawns one worker (hosted under a tool or not) holding the GPU's lock,
//! hands it a fresh evaluation key, and follows its sealed report channel to the end.

use crate::toolkit::process;
use crate::toolkit::toolchain::EnvError;
use crate::wall::protocol::{DeviceInfo, Mode, Phase, WorkerMessage, WorkerReport, WorkerRequest};
use crate::wall::verdict::{tail, EvalError};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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
            "{}. These tools run candidate code beside code of their own that talks to their front end, so nightshift runs them in private user, mount, network and PID namespaces, which this machine refuses. Allow unprivileged user namespaces (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone=1 or kernel.apparmor_restrict_unprivileged_userns=0, whichever is set), run as root, or pass --allow-unconfined-profiling to run them under the worker's own sandbox alone (the tool and its injected code then see the host's /tmp, $HOME, /run and network; the worker's sandbox still keeps candidate code from them)",
            arrangement.shortfall()
        ),
    }
}

/// Checks, with a trivial tool, that hosted runs can be confined here (or are allowed not
/// to be), before any work that a refusal would waste. The arrangement says which layers
/// hold.
pub fn check_hosting(
    exe: &Path,
    allow_unconfined: bool,
) -> Result<crate::wall::sandbox::hosted::Arrangement, EvalError> {
    let dir = crate::wall::runtime_dir::evaluation_dir().map_err(|e| EvalError::Internal(e.to_string()))?;
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
pub(super) const MAX_CHANNEL_LINE: usize = 4 << 20;

/// Follows the report channel: opens each sealed line, notes the first that is not the
/// worker's, and times the phases as they are announced (the first one from `spawned`).
pub(super) fn follow_channel(
    stdout: impl Read,
    key: crate::wall::channel::Key,
    hosted: bool,
    spawned: Instant,
) -> WorkerRun {
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
    let dir = crate::wall::runtime_dir::evaluation_dir().map_err(|e| EvalError::Internal(e.to_string()))?;
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
            // The evaluation folder, the tool's outputs, and what the worker loads and
            // reads: they stay reachable at their own paths wherever they lie (under /tmp
            // or $HOME the arrangement hides the rest).
            let keep: Vec<PathBuf> = std::iter::once(dir.path().to_path_buf())
                .chain(h.outputs.iter().cloned())
                .chain(
                    [&request.reference, &request.baseline, &request.candidate]
                        .into_iter()
                        .filter(|l| l.is_file())
                        .cloned(),
                )
                .chain(std::path::absolute(&request.task.dir).ok().filter(|d| d.is_dir()))
                .collect();
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
        let path = crate::wall::gpu_lock::lock_path(request.device).map_err(|e| EvalError::Internal(e.to_string()))?;
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
