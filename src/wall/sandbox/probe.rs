//! `nightshift sandbox-probe`: applies a worker's policy to itself and tries what a
//! hostile candidate would, reporting each attempt. `check-env` and the tests run it as a
//! real subprocess, so they see exactly what a worker's kernel enforces: strict, as every
//! judgment's worker; or hosted, under the hosted arrangement (`nightshift hosted`), as a
//! worker under ncu or compute-sanitizer.

use super::hosted::{self, Arrangement};
use super::{Layer, Policy, SandboxError};
use serde::{Deserialize, Serialize};
use std::ffi::{CString, OsString};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    pub action: String,
    /// Whether the system let it happen.
    pub allowed: bool,
    /// Whether a worker should be let: writes to the scratch folder and reads of its own
    /// /proc entry must work (and, hosted, its own /tmp and loopback), everything else
    /// must not.
    pub should_be_allowed: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeReport {
    pub layers: Vec<Layer>,
    pub attempts: Vec<Attempt>,
}

impl ProbeReport {
    /// Attempts whose outcome is not what the sandbox promises.
    pub fn breaches(&self) -> Vec<&Attempt> {
        self.attempts.iter().filter(|a| a.allowed != a.should_be_allowed).collect()
    }
}

/// Which sandbox the probe puts itself in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProbePolicy {
    /// A judging worker's: no TCP, no /tmp, no exec.
    Strict,
    /// A worker's under a hosting tool: TCP, exec and the temporary folders open.
    Hosted,
    /// None at all: what the hosted arrangement's namespaces hold by themselves.
    None,
}

impl ProbePolicy {
    fn name(self) -> &'static str {
        match self {
            ProbePolicy::Strict => "strict",
            ProbePolicy::Hosted => "hosted",
            ProbePolicy::None => "none",
        }
    }
}

fn outcome(r: std::io::Result<()>) -> (bool, String) {
    match r {
        Ok(()) => (true, "done".into()),
        Err(e) => (false, e.to_string()),
    }
}

fn errno_result(rc: i64) -> std::io::Result<()> {
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// What to try beyond the fixed list.
pub struct Targets {
    pub scratch: PathBuf,
    /// A file outside the scratch folder to create (hosted: one in the shared /tmp).
    pub outside: PathBuf,
    /// A loopback TCP port to connect to (someone listens there).
    pub port: Option<u16>,
    /// A process outside the sandbox to signal (the one that started the probe).
    pub signal_pid: Option<i32>,
    pub policy: ProbePolicy,
}

impl Targets {
    /// `sandbox-probe` and its arguments.
    fn args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec![
            "sandbox-probe".into(),
            "--policy".into(),
            self.policy.name().into(),
            "--scratch".into(),
            self.scratch.clone().into(),
            "--outside".into(),
            self.outside.clone().into(),
        ];
        if let Some(p) = self.port {
            a.extend(["--port".into(), p.to_string().into()]);
        }
        if let Some(pid) = self.signal_pid {
            a.extend(["--signal-pid".into(), pid.to_string().into()]);
        }
        a
    }
}

fn write_file(p: &Path) -> std::io::Result<()> {
    std::fs::File::create(p).and_then(|mut f| f.write_all(b"escaped\n"))
}

/// A file written and read back in /tmp, then removed.
fn own_tmp_round_trip() -> std::io::Result<()> {
    let path = PathBuf::from(format!("/tmp/nightshift-probe-own-{}", std::process::id()));
    std::fs::write(&path, b"mine\n")?;
    let back = std::fs::read(&path)?;
    let _ = std::fs::remove_file(&path);
    if back != b"mine\n" {
        return Err(std::io::Error::other("read back something else"));
    }
    Ok(())
}

/// Listens on the loopback and connects to itself: what a hosting tool's front end and
/// its injected code do.
fn loopback_round_trip() -> std::io::Result<()> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    let mut client = std::net::TcpStream::connect(listener.local_addr()?)?;
    let (mut server, _) = listener.accept()?;
    client.write_all(b"ping")?;
    let mut got = [0u8; 4];
    server.read_exact(&mut got)?;
    if &got != b"ping" {
        return Err(std::io::Error::other("read back something else"));
    }
    Ok(())
}

/// Mounts a tmpfs on a folder of the scratch folder, and takes it down again at once if
/// that worked.
fn mount_in_scratch(scratch: &Path) -> std::io::Result<()> {
    let target = scratch.join("mountpoint");
    std::fs::create_dir_all(&target)?;
    let c = |s: &[u8]| CString::new(s).map_err(std::io::Error::other);
    let (source, path, fstype) = (c(b"tmpfs")?, c(target.as_os_str().as_encoded_bytes())?, c(b"tmpfs")?);
    // SAFETY: NUL-terminated strings that outlive the calls.
    unsafe {
        if libc::mount(source.as_ptr(), path.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        libc::umount2(path.as_ptr(), libc::MNT_DETACH);
    }
    Ok(())
}

pub fn run(targets: &Targets) -> ProbeReport {
    let mut policy = Policy::strict(targets.scratch.clone(), &[], 60);
    policy.hosted = targets.policy == ProbePolicy::Hosted;
    let sandboxed = targets.policy != ProbePolicy::None;
    let strict = targets.policy == ProbePolicy::Strict;
    let layers = if sandboxed { super::apply(&policy) } else { Vec::new() };
    let mut attempts = Vec::new();
    let mut attempt = |action: &str, should: bool, r: std::io::Result<()>| {
        let (allowed, detail) = outcome(r);
        attempts.push(Attempt { action: action.into(), allowed, should_be_allowed: should, detail });
    };
    attempt("write a file in the scratch folder", true, write_file(&targets.scratch.join("inside.txt")));
    attempt(&format!("write {}", targets.outside.display()), false, write_file(&targets.outside));
    if !strict {
        attempt("write and read back a file in its own /tmp", true, own_tmp_round_trip());
    }
    if sandboxed {
        attempt("read /proc/self/status", true, std::fs::read("/proc/self/status").map(drop));
    }
    // SAFETY: plain syscalls; none of them touches memory we own.
    let ppid = unsafe { libc::getppid() };
    if sandboxed {
        attempt(
            &format!("read /proc/{ppid}/environ (the parent's environment)"),
            false,
            std::fs::read(format!("/proc/{ppid}/environ")).map(drop),
        );
        attempt(
            &format!("signal the parent (kill({ppid}, 0))"),
            false,
            errno_result(unsafe { libc::kill(ppid, 0) } as i64),
        );
    }
    if let Some(pid) = targets.signal_pid {
        attempt(
            &format!("signal the process that started it (kill({pid}, 0))"),
            false,
            errno_result(unsafe { libc::kill(pid, 0) } as i64),
        );
    }
    if sandboxed {
        attempt("signal our own process group (kill(0, 0))", false, errno_result(unsafe { libc::kill(0, 0) } as i64));
        attempt("leave the process group (setsid)", false, errno_result(unsafe { libc::setsid() } as i64));
        let forked = unsafe { libc::fork() };
        if forked == 0 {
            // SAFETY: the child of a successful fork leaves at once.
            unsafe { libc::_exit(0) };
        }
        if forked > 0 {
            let mut status = 0;
            unsafe { libc::waitpid(forked, &mut status, 0) };
        }
        attempt("fork a process", false, errno_result(forked as i64));
        attempt("mount a tmpfs in its scratch folder", false, mount_in_scratch(&targets.scratch));
    }
    if strict {
        let path = CString::new("/bin/true").expect("no NUL");
        let argv = [path.as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null()];
        // SAFETY: valid NUL-terminated arrays; on success this process would be replaced.
        attempt(
            "exec /bin/true",
            false,
            errno_result(unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) } as i64),
        );
    }
    if sandboxed {
        // Hosted workers may: their tool's injected code talks TCP (on a private loopback).
        attempt("open an IPv4 socket", !strict, {
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
            if fd >= 0 {
                unsafe { libc::close(fd) };
            }
            errno_result(fd as i64)
        });
    }
    if let Some(port) = targets.port {
        attempt(
            &format!("connect to 127.0.0.1:{port} (a listener of the process that started it)"),
            false,
            std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(5)).map(drop),
        );
    }
    if !strict {
        attempt("listen on the loopback and connect to itself", true, loopback_round_trip());
    }
    ProbeReport { layers, attempts }
}

/// The file system decides whether the write outside happened, not the probe's own
/// account: hosted, the probe's write lands in its private /tmp and looks done from inside.
fn judge_outside_write(report: &mut ProbeReport, outside: &Path) {
    let escaped = outside.exists();
    let action = format!("write {}", outside.display());
    if let Some(a) = report.attempts.iter_mut().find(|a| a.action == action) {
        if a.allowed && !escaped {
            a.detail = "written inside, into a private /tmp: the shared one has no such file".into();
        }
        a.allowed = escaped;
    }
    if escaped {
        let _ = std::fs::remove_file(outside);
    }
}

fn parse_report(got: &crate::toolkit::process::Captured, timeout: Duration) -> Result<ProbeReport, SandboxError> {
    serde_json::from_str(&got.stdout).map_err(|source| SandboxError::NoProbeReport {
        end: got.describe_end(timeout),
        stderr: got.stderr.trim().to_string(),
        source,
    })
}

const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `exe sandbox-probe` under the strict policy in a fresh scratch folder as a child
/// of this process and reads its report.
pub fn spawn(exe: &Path, port: Option<u16>) -> Result<ProbeReport, SandboxError> {
    let root = crate::wall::runtime_dir::evaluation_dir()?;
    let scratch = root.path().join("scratch");
    std::fs::create_dir(&scratch).map_err(SandboxError::Io)?;
    let targets = Targets {
        outside: root.path().join("escaped.txt"),
        scratch,
        port,
        signal_pid: Some(std::process::id() as i32),
        policy: ProbePolicy::Strict,
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.args(targets.args());
    let got = crate::toolkit::process::run_captured(&mut cmd, PROBE_TIMEOUT)
        .map_err(|source| SandboxError::Run { program: exe.to_path_buf(), source })?;
    let mut report = parse_report(&got, PROBE_TIMEOUT)?;
    judge_outside_write(&mut report, &targets.outside);
    Ok(report)
}

/// How to run the probe under the hosted arrangement.
#[derive(Debug, Clone)]
pub struct HostedSpec {
    /// `Hosted` (a worker under a tool) or `None` (the namespaces alone).
    pub policy: ProbePolicy,
    /// A listener of this process's to try to reach.
    pub port: Option<u16>,
    /// A stand-in for the hosting tool, which runs the probe as its child the way ncu
    /// runs the worker (its command line, the probe's appended); empty: the probe is the
    /// tool itself.
    pub host: Vec<OsString>,
    /// What the trampoline itself runs under, e.g. a kernel setting that forbids user
    /// namespaces (tests); empty: nothing.
    pub launcher: Vec<OsString>,
    /// `--allow-unconfined-profiling`.
    pub allow_unconfined: bool,
}

impl HostedSpec {
    /// A worker's policy under the arrangement, the probe being the tool.
    pub fn worker() -> HostedSpec {
        HostedSpec {
            policy: ProbePolicy::Hosted,
            port: None,
            host: Vec::new(),
            launcher: Vec::new(),
            allow_unconfined: false,
        }
    }
}

/// What a hosted probe found: the arrangement the trampoline made, and the probe's report
/// when the tool was started.
#[derive(Debug, Clone)]
pub struct HostedProbe {
    pub arrangement: Arrangement,
    pub report: Option<ProbeReport>,
    /// The trampoline's (and tool's) own output on stderr.
    pub stderr: String,
}

/// Runs `exe sandbox-probe` the way a hosted worker runs: through `exe hosted`, below a
/// stand-in tool when one is given. Its write outside goes to the shared /tmp.
pub fn spawn_hosted(exe: &Path, spec: &HostedSpec) -> Result<HostedProbe, SandboxError> {
    let root = crate::wall::runtime_dir::evaluation_dir()?;
    let scratch = root.path().join("scratch");
    std::fs::create_dir(&scratch).map_err(SandboxError::Io)?;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let targets = Targets {
        outside: PathBuf::from(format!("/tmp/nightshift-probe-escape-{}-{nanos}", std::process::id())),
        scratch,
        port: spec.port,
        signal_pid: Some(std::process::id() as i32),
        policy: spec.policy,
    };
    let report_path = root.path().join("hosting.json");
    let trampoline = hosted::command_line(exe, &report_path, &[root.path().to_path_buf()], spec.allow_unconfined);
    let line: Vec<OsString> = spec
        .launcher
        .iter()
        .cloned()
        .chain(trampoline)
        .chain(spec.host.iter().cloned())
        .chain(std::iter::once(exe.as_os_str().to_owned()))
        .chain(targets.args())
        .collect();
    let mut cmd = std::process::Command::new(&line[0]);
    cmd.args(&line[1..]).current_dir(&targets.scratch);
    let got = crate::toolkit::process::run_captured(&mut cmd, PROBE_TIMEOUT)
        .map_err(|source| SandboxError::Run { program: PathBuf::from(&line[0]), source })?;
    let arrangement = hosted::read_report(&report_path).map_err(|e| SandboxError::NoArrangement {
        end: got.describe_end(PROBE_TIMEOUT),
        stderr: got.stderr.trim().to_string(),
        source: Box::new(e),
    })?;
    let report = if arrangement.started {
        let mut report = parse_report(&got, PROBE_TIMEOUT)?;
        judge_outside_write(&mut report, &targets.outside);
        Some(report)
    } else {
        let _ = std::fs::remove_file(&targets.outside);
        None
    };
    Ok(HostedProbe { arrangement, report, stderr: got.stderr })
}
