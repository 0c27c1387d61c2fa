//! `nightshift sandbox-probe`: applies the worker's strict policy to itself and tries
//! what a hostile candidate would, reporting each attempt. `check-env` and the tests
//! run it as a real subprocess, so they see exactly what a worker's kernel enforces.

use super::{Layer, Policy};
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    pub action: String,
    /// Whether the system let it happen.
    pub allowed: bool,
    /// Whether a worker should be let: writes to the scratch folder and reads of its own
    /// /proc entry must work, everything else must not.
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
    /// A file outside the scratch folder to create.
    pub outside: PathBuf,
    /// A loopback TCP port to connect to (someone listens there).
    pub port: Option<u16>,
}

pub fn run(targets: &Targets) -> ProbeReport {
    let layers = super::apply(&Policy::strict(targets.scratch.clone(), &[], 60));
    let mut attempts = Vec::new();
    let mut attempt = |action: &str, should: bool, r: std::io::Result<()>| {
        let (allowed, detail) = outcome(r);
        attempts.push(Attempt { action: action.into(), allowed, should_be_allowed: should, detail });
    };
    let write = |p: &Path| std::fs::File::create(p).and_then(|mut f| f.write_all(b"escaped\n"));
    attempt("write a file in the scratch folder", true, write(&targets.scratch.join("inside.txt")));
    attempt(&format!("write {}", targets.outside.display()), false, write(&targets.outside));
    attempt("read /proc/self/status", true, std::fs::read("/proc/self/status").map(drop));
    // SAFETY: plain syscalls; none of them touches memory we own.
    let ppid = unsafe { libc::getppid() };
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
    let path = CString::new("/bin/true").expect("no NUL");
    let argv = [path.as_ptr(), std::ptr::null()];
    let envp = [std::ptr::null()];
    // SAFETY: valid NUL-terminated arrays; on success this process would be replaced.
    attempt(
        "exec /bin/true",
        false,
        errno_result(unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) } as i64),
    );
    attempt("open an IPv4 socket", false, {
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        if fd >= 0 {
            unsafe { libc::close(fd) };
        }
        errno_result(fd as i64)
    });
    if let Some(port) = targets.port {
        attempt(
            &format!("connect to 127.0.0.1:{port}"),
            false,
            std::net::TcpStream::connect(("127.0.0.1", port)).map(drop),
        );
    }
    ProbeReport { layers, attempts }
}

/// Runs `exe sandbox-probe` in a fresh scratch folder as a child of this process and
/// reads its report.
pub fn spawn(exe: &Path, port: Option<u16>) -> Result<ProbeReport, String> {
    let root = tempfile::tempdir().map_err(|e| format!("cannot create a temporary folder: {e}"))?;
    let scratch = root.path().join("scratch");
    std::fs::create_dir(&scratch).map_err(|e| e.to_string())?;
    let outside = root.path().join("escaped.txt");
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("sandbox-probe").arg("--scratch").arg(&scratch).arg("--outside").arg(&outside);
    if let Some(p) = port {
        cmd.arg("--port").arg(p.to_string());
    }
    let got = crate::process::run_captured(&mut cmd, std::time::Duration::from_secs(30))
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let mut report: ProbeReport = serde_json::from_str(&got.stdout).map_err(|e| {
        format!(
            "the sandbox probe ended with {} and no report ({e}): {}",
            got.describe_end(std::time::Duration::from_secs(30)),
            got.stderr.trim()
        )
    })?;
    // Trust the file system over the probe's own account.
    if outside.exists() {
        if let Some(a) = report.attempts.iter_mut().find(|a| a.action.starts_with("write ") && !a.should_be_allowed) {
            a.allowed = true;
        }
    }
    Ok(report)
}
