//! The judge's workers: one process per library, started with a socket pair on fd 3, its
//! stdout and stderr into a capped tail, dying with the judge (PR_SET_PDEATHSIG), in the
//! judge's process group (the orchestrator's deadline kills them all at once; the sandbox
//! forbids leaving it).
//!
//! Blame follows one fact the judge knows itself: whether it has told the worker to load
//! its library. Before, a worker that fails is ours (the sandbox, the GPU); after, nothing
//! it says or does can be told apart from its library's doing, so every fault is the
//! library's: the candidate's rejection, or the task's error for the reference and the
//! baseline.

use crate::wall::gpu::vmm::Exported;
use crate::wall::protocol::wire::{self, WireError};
use crate::wall::protocol::{
    Call, Command, DeviceInfo, Failure, FailureClass, Outcome, Reply, Role, ServeRequest, SOCKET_LOST_EXIT,
};
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most of a worker's output kept (its tail).
const OUTPUT_TAIL: usize = 256 << 10;

/// What a worker's scratch folder may hold: bytes on disk, and entries. Past either the
/// judge ends the worker: a library that fills the disk is judged for it, before the disk
/// it shares with the run is full.
pub const SCRATCH_BYTES: u64 = 64 << 20;
const SCRATCH_ENTRIES: u64 = 100_000;
/// How often the scratch folder is measured.
const SCRATCH_EVERY: Duration = Duration::from_millis(100);

/// What went wrong with a worker, as the judge saw it.
#[derive(Debug, Clone)]
pub enum Fault {
    /// It could not be started (ours).
    Spawn(String),
    /// It died: how.
    Died(String),
    /// It did not answer in time.
    Timeout(Duration),
    /// It broke the protocol: a frame that does not parse, a reply to another command, a
    /// closed socket while it lives.
    Protocol(String),
    /// The entry returned a CUDA error, or the wait after the calls did.
    Cuda { call: Option<usize>, error: String },
    /// The library did not load or has no entry to call.
    Load(String),
    /// It reported itself broken before loading anything: ours, or the machine's
    /// (`true`: no driver, no such GPU).
    Broken(String, bool),
    /// It filled its scratch folder past the quota, and the judge ended it.
    Exhausted(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Spawn(m) => write!(f, "could not be started: {m}"),
            Fault::Died(how) => write!(f, "died: {how}"),
            Fault::Timeout(d) => write!(f, "did not answer within {:.0} s", d.as_secs_f64()),
            Fault::Protocol(m) => write!(f, "broke the protocol with the judge: {m}"),
            Fault::Cuda { call: Some(c), error } => write!(f, "{error} on call {}", c + 1),
            Fault::Cuda { call: None, error } => write!(f, "{error} while the judge waited for its calls"),
            Fault::Broken(m, _) => write!(f, "{m}"),
            Fault::Load(m) => write!(f, "could not load its library: {m}"),
            Fault::Exhausted(m) => write!(f, "was ended: {m}"),
        }
    }
}

/// A running worker.
pub struct Worker {
    pub role: Role,
    pub pid: u32,
    child: Child,
    sock: OwnedFd,
    /// The judge told it to load its library: from then on its faults are the library's.
    pub loaded: bool,
    /// Calls of its entry so far (failures name the call that produced them).
    pub calls: u64,
    output: Arc<Mutex<Vec<u8>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    pub device: Option<DeviceInfo>,
    pub sandbox: Vec<crate::wall::sandbox::Layer>,
    pub sandbox_s: f64,
    /// Set once it is known dead (reaped).
    dead: Option<String>,
    /// The scratch folder's watch: what it found past the quota, and its stop.
    over_quota: Arc<Mutex<Option<String>>>,
    watching: Arc<std::sync::atomic::AtomicBool>,
}

/// How a worker is started.
pub struct Spawn<'a> {
    pub exe: &'a Path,
    pub role: Role,
    pub library: PathBuf,
    pub device: usize,
    pub scratch: PathBuf,
    pub policy: Option<crate::wall::sandbox::Policy>,
    pub simulate: bool,
    /// How long it may take to sandbox itself and open the GPU.
    pub ready_within: Duration,
}

impl Worker {
    /// Starts the worker and hands it its request; [`Worker::ready`] waits for it to be
    /// ready, so that its start overlaps the judge's own.
    pub fn spawn(s: Spawn<'_>) -> Result<Worker, Fault> {
        let (mine, theirs) = wire::pair().map_err(|e| Fault::Spawn(format!("socket pair: {e}")))?;
        std::fs::create_dir_all(&s.scratch)
            .map_err(|e| Fault::Spawn(format!("cannot create {}: {e}", s.scratch.display())))?;
        let mut cmd = std::process::Command::new(s.exe);
        cmd.arg("worker")
            .arg("--serve")
            .current_dir(&s.scratch)
            .env_clear()
            .envs(crate::toolkit::process::scrubbed_env())
            .env("TMPDIR", &s.scratch)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let theirs_fd = theirs.as_raw_fd();
        // SAFETY: only async-signal-safe system calls between fork and exec, on constants
        // and descriptors that exist before the fork (no allocation).
        unsafe {
            cmd.pre_exec(move || {
                if theirs_fd == 3 {
                    // Already in place: only the close-on-exec flag must go.
                    if libc::fcntl(3, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(theirs_fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Nothing of the judge's but the socket: not its GPU driver's descriptors
                // (a process holding them could reach the judge's memory), not NVML's.
                if libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) != 0 {
                    for fd in 4..65536 {
                        libc::close(fd);
                    }
                }
                // The worker dies with the judge, whatever killed the judge.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // If the machine runs out of memory, a worker goes first, never the judge.
                let adj = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if adj >= 0 {
                    libc::write(adj, b"1000".as_ptr() as *const libc::c_void, 4);
                    libc::close(adj);
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| Fault::Spawn(format!("{}: {e}", s.exe.display())))?;
        drop(theirs);
        let output = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        for stream in [
            child.stdout.take().map(|o| Box::new(o) as Box<dyn Read + Send>),
            child.stderr.take().map(|e| Box::new(e) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let out = output.clone();
            readers.push(std::thread::spawn(move || keep_tail(stream, out)));
        }
        let over_quota = Arc::new(Mutex::new(None));
        let watching = Arc::new(std::sync::atomic::AtomicBool::new(true));
        watch_scratch(child.id(), s.scratch.clone(), over_quota.clone(), watching.clone());
        let mut w = Worker {
            over_quota,
            watching,
            role: s.role,
            pid: child.id(),
            child,
            sock: mine,
            loaded: false,
            calls: 0,
            output,
            readers,
            device: None,
            sandbox: Vec::new(),
            sandbox_s: 0.0,
            dead: None,
        };
        let request =
            ServeRequest { role: s.role, library: s.library, device: s.device, policy: s.policy, simulate: s.simulate };
        wire::send(w.sock.as_fd(), &request, &[]).map_err(|e| w.fault_from(e, s.ready_within))?;
        Ok(w)
    }

    /// Waits for the worker's first answer: sandboxed and on the GPU, or broken.
    pub fn ready(&mut self, within: Duration) -> Result<(), Fault> {
        match self.receive(within)? {
            Reply::Ready { device, sandbox, sandbox_s } => {
                self.device = device;
                self.sandbox = sandbox;
                self.sandbox_s = sandbox_s;
                Ok(())
            }
            Reply::Broken { message, environment } => Err(Fault::Broken(message, environment)),
            other => Err(Fault::Protocol(format!("answered {other:?} before it was ready"))),
        }
    }

    /// Lends `pool`'s buffer to the worker, to be mapped as pool `id`.
    pub fn import(&mut self, id: u32, pool: &Exported, within: Duration) -> Result<(), Fault> {
        let cmd = Command::Import { pool: id, bytes: pool.mapped.bytes as u64 };
        match self.ask(&cmd, &[pool.fd()], within)? {
            Reply::Imported { pool } if pool == id => Ok(()),
            other => Err(self.unexpected(other)),
        }
    }

    /// Loads the library: from here on every fault is the library's.
    pub fn load(&mut self, within: Duration) -> Result<(), Fault> {
        self.loaded = true;
        match self.ask(&Command::Load, &[], within)? {
            Reply::Loaded => Ok(()),
            Reply::Failed { error, .. } => Err(Fault::Load(error)),
            other => Err(self.unexpected(other)),
        }
    }

    /// Lets go of pool `id` (a cooperative worker unmaps it).
    pub fn release(&mut self, id: u32, within: Duration) -> Result<(), Fault> {
        match self.ask(&Command::Release { pool: id }, &[], within)? {
            Reply::Released { pool } if pool == id => Ok(()),
            other => Err(self.unexpected(other)),
        }
    }

    /// Runs `calls` (`repeat` times over) and returns the worker's event times.
    pub fn run(&mut self, calls: Vec<Call>, repeat: u32, within: Duration) -> Result<Vec<f64>, Fault> {
        let n = calls.len();
        self.calls += n as u64 * repeat.max(1) as u64;
        match self.ask(&Command::Run { calls, repeat }, &[], within)? {
            Reply::Ran { event_ms } if event_ms.len() == n => Ok(event_ms),
            Reply::Ran { event_ms } => Err(Fault::Protocol(format!("{} event times for {n} calls", event_ms.len()))),
            other => Err(self.unexpected(other)),
        }
    }

    fn unexpected(&mut self, reply: Reply) -> Fault {
        match reply {
            Reply::Failed { call, error } => Fault::Cuda { call, error },
            // Before the library loaded, a broken worker is ours; after, only the library
            // could have made our worker say so.
            Reply::Broken { message, environment } if !self.loaded => Fault::Broken(message, environment),
            other => {
                let text: String = format!("{other:?}").chars().take(200).collect();
                Fault::Protocol(format!("an answer out of turn: {text}"))
            }
        }
    }

    fn ask(&mut self, cmd: &Command, fds: &[std::os::fd::RawFd], within: Duration) -> Result<Reply, Fault> {
        if let Some(how) = &self.dead {
            return Err(Fault::Died(how.clone()));
        }
        wire::send(self.sock.as_fd(), cmd, fds).map_err(|e| self.fault_from(e, within))?;
        self.receive(within)
    }

    fn receive(&mut self, within: Duration) -> Result<Reply, Fault> {
        match wire::recv::<Reply>(self.sock.as_fd(), Some(Instant::now() + within)) {
            // A worker never sends descriptors: any that came are dropped (closed) here.
            Ok((reply, _fds)) => Ok(reply),
            Err(e) => Err(self.fault_from(e, within)),
        }
    }

    /// A socket error, read with what became of the process: a closed socket of a process
    /// that died is its death.
    fn fault_from(&mut self, e: WireError, within: Duration) -> Fault {
        if let Some(how) = self.reap(Duration::from_millis(500)) {
            if let Some(m) = self.over_quota.lock().ok().and_then(|o| o.clone()) {
                return Fault::Exhausted(m);
            }
            return Fault::Died(how);
        }
        match e {
            WireError::Timeout(_) => Fault::Timeout(within),
            WireError::Closed => Fault::Protocol("it closed the judge's socket".into()),
            other => Fault::Protocol(other.to_string()),
        }
    }

    /// Waits up to `grace` for the process to end; how it ended, if it did.
    fn reap(&mut self, grace: Duration) -> Option<String> {
        if self.dead.is_some() {
            return self.dead.clone();
        }
        let until = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    // Reaped: its pid may be reused, so the watch must never signal it again.
                    self.watching.store(false, std::sync::atomic::Ordering::Relaxed);
                    let how = describe_status(status);
                    self.dead = Some(how.clone());
                    return Some(how);
                }
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
                _ => return None,
            }
        }
    }

    /// Ends the worker (SIGKILL) and waits for the kernel to reap it, which tears its
    /// GPU context down with it.
    pub fn kill(&mut self) -> Duration {
        let started = Instant::now();
        self.watching.store(false, std::sync::atomic::Ordering::Relaxed);
        if self.dead.is_none() {
            let _ = self.child.kill();
            if let Ok(status) = self.child.wait() {
                self.dead.get_or_insert_with(|| describe_status(status));
            }
        }
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        started.elapsed()
    }

    /// Asks the worker to leave, then makes sure it has.
    pub fn quit(&mut self) {
        if self.dead.is_none() {
            let _ = wire::send(self.sock.as_fd(), &Command::Quit, &[]);
            let _ = self.reap(Duration::from_secs(2));
        }
        self.kill();
    }

    /// The end of what the process printed.
    pub fn output_tail(&self, max: usize) -> String {
        let kept = self.output.lock().map(|o| o.clone()).unwrap_or_default();
        crate::wall::tail(&String::from_utf8_lossy(&kept), max)
    }

    /// What a fault of this worker amounts to.
    pub fn blame(&self, fault: &Fault, at: &str) -> Outcome {
        let role = self.role.name();
        let what = format!("the {role}'s process {fault} {at}");
        if !self.loaded {
            return match fault {
                Fault::Broken(m, true) => Outcome::EnvError { message: m.clone() },
                _ => Outcome::InternalError {
                    message: format!("{what}, before it loaded its library: {}", self.output_tail(2000)),
                },
            };
        }
        match self.role {
            Role::Candidate => Outcome::Rejected { failure: candidate_failure(fault, &what) },
            Role::Reference | Role::Baseline => Outcome::TaskError { message: what },
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The failure class of a candidate's fault.
pub fn candidate_failure(fault: &Fault, what: &str) -> Failure {
    let socket_lost = format!("exit code {SOCKET_LOST_EXIT}");
    let class = match fault {
        Fault::Died(how) if how.starts_with("signal") => FailureClass::Crash,
        Fault::Died(how) if *how == socket_lost => FailureClass::ForgedReport,
        Fault::Died(_) => FailureClass::ProcessExit,
        Fault::Timeout(_) => FailureClass::Timeout,
        Fault::Cuda { error, .. } if error.contains("ILLEGAL_ADDRESS") || error.contains("IllegalAddress") => {
            FailureClass::IllegalAddress
        }
        Fault::Cuda { .. } => FailureClass::LaunchError,
        Fault::Load(_) => FailureClass::MissingEntry,
        Fault::Exhausted(_) => FailureClass::ResourceLeak,
        Fault::Protocol(_) | Fault::Broken(..) | Fault::Spawn(_) => FailureClass::ForgedReport,
    };
    let hint = match class {
        FailureClass::ProcessExit => ": kernels and launchers must return, never exit",
        FailureClass::Timeout => ": an endless loop or a deadlock?",
        FailureClass::IllegalAddress => ": a kernel read or wrote outside any allocation",
        FailureClass::ForgedReport => ": its socket to the judge was closed or written over; candidate code must not touch descriptors it did not open",
        _ => "",
    };
    Failure::new(class, format!("{what}{hint}"))
}

/// Measures `scratch` every [`SCRATCH_EVERY`] while `watching`; past the quota, notes why
/// and ends process `pid`.
fn watch_scratch(
    pid: u32,
    scratch: PathBuf,
    over: Arc<Mutex<Option<String>>>,
    watching: Arc<std::sync::atomic::AtomicBool>,
) {
    // A pidfd names this very process: once it is reaped, a signal through it reaches
    // nothing, whoever reuses the number.
    // SAFETY: plain syscall; the result is checked.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_long, 0) } as i32;
    std::thread::spawn(move || {
        while watching.load(std::sync::atomic::Ordering::Relaxed) {
            let (bytes, entries) = usage(&scratch);
            if bytes > SCRATCH_BYTES || entries > SCRATCH_ENTRIES {
                if let Ok(mut o) = over.lock() {
                    *o = Some(format!(
                        "its scratch folder held {:.0} MiB in {entries} entries, past the {} MiB and {SCRATCH_ENTRIES} entries a worker may use",
                        bytes as f64 / (1 << 20) as f64,
                        SCRATCH_BYTES >> 20
                    ));
                }
                // SAFETY: plain syscalls on our child's pidfd (or, where the kernel has
                // none, its pid, which the judge has not reaped while it watches).
                unsafe {
                    if pidfd >= 0 {
                        libc::syscall(libc::SYS_pidfd_send_signal, pidfd, libc::SIGKILL, std::ptr::null::<u8>(), 0);
                    } else {
                        libc::kill(pid as libc::pid_t, libc::SIGKILL);
                    }
                }
                break;
            }
            std::thread::sleep(SCRATCH_EVERY);
        }
        if pidfd >= 0 {
            // SAFETY: the descriptor opened above, closed once.
            unsafe { libc::close(pidfd) };
        }
    });
}

/// Bytes on disk and entries under `dir`, links not followed.
fn usage(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let (mut bytes, mut entries) = (0u64, 0u64);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(list) = std::fs::read_dir(&d) else { continue };
        for e in list.flatten() {
            entries += 1;
            if entries > SCRATCH_ENTRIES {
                return (bytes, entries);
            }
            let Ok(m) = std::fs::symlink_metadata(e.path()) else { continue };
            bytes += m.blocks() * 512;
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    (bytes, entries)
}

fn describe_status(status: std::process::ExitStatus) -> String {
    match (status.signal(), status.code()) {
        (Some(sig), _) => format!(
            "signal {sig} ({}){}",
            crate::toolkit::process::signal_name(sig),
            if sig == libc::SIGXCPU { ": the CPU-time limit of the sandbox" } else { "" }
        ),
        (None, Some(code)) => format!("exit code {code}"),
        _ => "an unknown end".into(),
    }
}

fn keep_tail(mut stream: Box<dyn Read + Send>, out: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Ok(mut kept) = out.lock() {
                    kept.extend_from_slice(&buf[..n]);
                    if kept.len() > 2 * OUTPUT_TAIL {
                        let cut = kept.len() - OUTPUT_TAIL;
                        kept.drain(..cut);
                    }
                }
            }
        }
    }
}
