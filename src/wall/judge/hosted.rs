//! Standalone workers under a hosting tool (ncu for profiles, compute-sanitizer for memory
//! checks): each runs through the hosted arrangement (`nightshift hosted`: private
//! namespaces), holding the GPU's lock, its lines followed to the end; and the check that
//! hosted runs can be confined here at all.

use super::verdict::{tail, EvalError};
use crate::toolkit::process;
use crate::toolkit::toolchain::EnvError;
use crate::wall::protocol::{DeviceInfo, StandaloneMessage, StandalonePhase, StandaloneRequest};
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
/// Everything observed about one standalone worker. What it said before `Loading` is
/// ours; after, its library could have written any of it.
#[derive(Debug, Default)]
pub struct StandaloneRun {
    pub last_phase: Option<(StandalonePhase, String)>,
    /// It announced `Loading`: from then on whatever happened is the library's.
    pub loaded: bool,
    /// Seconds per phase by the orchestrator's clock (from one announcement to the next).
    pub phase_seconds: BTreeMap<String, f64>,
    /// Seconds from the spawn to the first announced phase: the process start, and under
    /// a hosting tool the trampoline's namespaces and the tool's own start.
    pub first_phase_s: Option<f64>,
    pub device: Option<DeviceInfo>,
    pub sandbox: Vec<crate::wall::sandbox::Layer>,
    pub sandbox_s: f64,
    /// Its last word: an error (and whether it was ours), or None for a clean call.
    pub done: Option<(Option<String>, bool)>,
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub stderr: String,
    pub seconds: f64,
    /// Seconds spent waiting for another process to finish with the GPU.
    pub gpu_wait_s: f64,
    /// Under a hosting tool: the arrangement the trampoline made around it.
    pub hosting: Option<crate::wall::sandbox::hosted::Arrangement>,
}

impl StandaloneRun {
    /// The hosted arrangement's layers, then the worker's own (empty when not hosted).
    pub fn hosted_layers(&self) -> Vec<crate::wall::sandbox::Layer> {
        match &self.hosting {
            Some(a) => a.layers.iter().chain(&self.sandbox).cloned().collect(),
            None => Vec::new(),
        }
    }
}

/// The longest line read from a standalone worker's stdout.
pub(super) const MAX_LINE: usize = 4 << 20;

/// Follows a standalone worker's lines (a hosting tool prints its own among them: lines
/// that are not the worker's messages are skipped), timing the phases as announced.
pub(super) fn follow(stdout: impl Read, spawned: Instant) -> StandaloneRun {
    let mut run = StandaloneRun::default();
    let mut current: Option<(StandalonePhase, Instant)> = None;
    let close = |run: &mut StandaloneRun, current: &mut Option<(StandalonePhase, Instant)>| {
        if let Some((p, t)) = current.take() {
            *run.phase_seconds.entry(p.name().to_string()).or_default() += t.elapsed().as_secs_f64();
        }
    };
    let mut reader = BufReader::new(stdout);
    loop {
        // Lines are capped: a library writing endlessly without a newline must not
        // exhaust the orchestrator's memory; the rest of such a line is dropped.
        let mut raw = Vec::new();
        match (&mut reader).take(MAX_LINE as u64).read_until(b'\n', &mut raw) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if !raw.ends_with(b"\n") && raw.len() >= MAX_LINE {
            let mut sink = Vec::new();
            while let Ok(n) = (&mut reader).take(MAX_LINE as u64).read_until(b'\n', &mut sink) {
                if n == 0 || sink.ends_with(b"\n") {
                    break;
                }
                sink.clear();
            }
            continue;
        }
        let line = String::from_utf8_lossy(&raw);
        let Ok(msg) = serde_json::from_str::<StandaloneMessage>(line.trim_end()) else { continue };
        // After `Loading`, the library may write these lines itself: only the first
        // `Done` counts, and nothing it says moves the boundary back.
        match msg {
            StandaloneMessage::Phase { phase, detail } => {
                close(&mut run, &mut current);
                run.first_phase_s.get_or_insert_with(|| spawned.elapsed().as_secs_f64());
                current = Some((phase, Instant::now()));
                run.loaded |= phase >= StandalonePhase::Loading;
                run.last_phase = Some((phase, detail));
            }
            StandaloneMessage::Device { device } if !run.loaded => run.device = Some(device),
            StandaloneMessage::Sandbox { layers, seconds } if !run.loaded => {
                run.sandbox = layers;
                run.sandbox_s = seconds;
            }
            StandaloneMessage::Done { error, ours } if run.done.is_none() => {
                close(&mut run, &mut current);
                // After the library loaded, "ours" is its word, worth nothing.
                run.done = Some((error, ours && !run.loaded));
            }
            _ => {}
        }
    }
    close(&mut run, &mut current);
    run
}

/// Runs `exe worker --standalone REQUEST` under `host` (ncu, compute-sanitizer) through
/// the hosted arrangement, sandboxed, holding the GPU's lock, until it ends or `timeout`
/// passes. A hosted run the arrangement cannot confine, and that is not allowed to run
/// unconfined, is an environment error.
pub fn run_standalone(
    exe: &Path,
    mut request: StandaloneRequest,
    timeout: Duration,
    host: &HostTool,
) -> Result<StandaloneRun, EvalError> {
    // Not in the shared /tmp: a hosted library run unconfined, or another user, could
    // write there (a request swapped before the worker reads it).
    let dir = crate::wall::runtime_dir::evaluation_dir().map_err(|e| EvalError::Internal(e.to_string()))?;
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch)
        .map_err(|e| EvalError::Internal(format!("cannot create {}: {e}", scratch.display())))?;
    request.host_outputs = host.outputs.clone();
    let setting = std::env::var("NIGHTSHIFT_SANDBOX").unwrap_or_default();
    if setting != "off" {
        let cpu = ((timeout.as_secs_f64() * 8.0) as u64).max(60);
        let mut p = crate::wall::sandbox::Policy::strict(scratch.clone(), &[request.library.clone()], cpu);
        p.vendor_libraries = request.task.libs_for(request.trusted);
        p.hosted = true;
        p.skip = super::options::sandbox_skip(&setting);
        request.policy = Some(p);
    }
    // The request sits outside the scratch folder: the worker reads it before the sandbox.
    let req_path = dir.path().join("request.json");
    let bytes = serde_json::to_vec(&request).map_err(|e| EvalError::Internal(format!("the worker's request: {e}")))?;
    std::fs::write(&req_path, bytes).map_err(|e| EvalError::Internal(e.to_string()))?;
    let hosting_report = dir.path().join("hosting.json");
    // The evaluation folder, the tool's outputs, and what the worker loads and reads:
    // they stay reachable at their own paths wherever they lie (under /tmp or $HOME the
    // arrangement hides the rest).
    let keep: Vec<PathBuf> = std::iter::once(dir.path().to_path_buf())
        .chain(host.outputs.iter().cloned())
        .chain(std::iter::once(request.library.clone()).filter(|l| l.is_file()))
        .chain(std::path::absolute(&request.task.dir).ok().filter(|d| d.is_dir()))
        .collect();
    let line = crate::wall::sandbox::hosted::command_line(exe, &hosting_report, &keep, host.allow_unconfined);
    let mut cmd = Command::new(&line[0]);
    cmd.args(&line[1..])
        .args(&host.argv)
        .arg(exe)
        .arg("worker")
        .arg("--standalone")
        .arg(&req_path)
        .current_dir(&scratch);
    process::isolate(&mut cmd)
        .env("TMPDIR", &scratch)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let lock = if std::env::var_os("NIGHTSHIFT_GPU_LOCK").is_some_and(|v| v == "off") {
        None
    } else {
        let path = crate::wall::gpu_lock::lock_path(request.device).map_err(|e| EvalError::Internal(e.to_string()))?;
        Some(
            crate::wall::gpu_lock::acquire(&path)
                .map_err(|e| EvalError::Internal(format!("cannot take the GPU lock {}: {e}", path.display())))?,
        )
    };
    let started = Instant::now();
    let mut child =
        cmd.spawn().map_err(|e| EvalError::Internal(format!("cannot start the worker {}: {e}", exe.display())))?;
    let stdout = child.stdout.take().ok_or_else(|| EvalError::Internal("the worker's stdout".into()))?;
    let mut stderr = child.stderr.take().ok_or_else(|| EvalError::Internal("the worker's stderr".into()))?;
    let messages = std::thread::spawn(move || follow(stdout, started));
    let errors = std::thread::spawn(move || {
        // Keep the tail: a chatty library must not exhaust memory.
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
    Ok(run)
}
