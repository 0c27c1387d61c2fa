//! Running subprocesses we do not trust to finish or to behave: each one in its own
//! process group (so a timeout kills everything it started), with a scrubbed environment
//! (no API keys or tokens reach candidate code or the tools that host it), with output
//! captured up to a cap.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Variables passed to subprocesses, by exact name or by prefix.
const KEEP_EXACT: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "TERM",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "TZ",
    // Experiments only, and only ever tighter or louder (see wall::sandbox): the seccomp
    // filter's report mode, and /proc/self/maps closed to the driver.
    "NIGHTSHIFT_SECCOMP_REPORT",
    "NIGHTSHIFT_SANDBOX_HIDE_MAPS",
];
const KEEP_PREFIX: &[&str] = &["LC_", "CUDA_", "NVIDIA_", "NIGHTSHIFT_CUDA_", "NV_"];
/// Never passed, whatever the prefix says.
const SECRET_MARKERS: &[&str] =
    &["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION"];

pub fn is_passed_to_subprocesses(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if SECRET_MARKERS.iter().any(|m| upper.contains(m)) {
        return false;
    }
    KEEP_EXACT.contains(&name) || KEEP_PREFIX.iter().any(|p| name.starts_with(p))
}

/// The current environment minus everything a kernel has no business seeing.
pub fn scrubbed_env() -> Vec<(OsString, OsString)> {
    std::env::vars_os().filter(|(k, _)| k.to_str().is_some_and(is_passed_to_subprocesses)).collect()
}

/// Puts `cmd` in its own process group with a scrubbed environment.
pub fn isolate(cmd: &mut Command) -> &mut Command {
    cmd.env_clear().envs(scrubbed_env()).process_group(0)
}

/// Process groups started by [`isolate`]d commands that are still running, so that an
/// orchestrator abandoning its work (a second Ctrl-C) can take them all down.
static LIVE_GROUPS: std::sync::Mutex<std::collections::BTreeSet<i32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Remembers `child`'s process group until [`forget_group`].
pub fn track_group(child: &Child) {
    if let Ok(mut g) = LIVE_GROUPS.lock() {
        g.insert(child.id() as i32);
    }
}

pub fn forget_group(child: &Child) {
    if let Ok(mut g) = LIVE_GROUPS.lock() {
        g.remove(&(child.id() as i32));
    }
}

/// SIGKILLs every tracked process group (workers, compilers, profilers).
pub fn kill_live_groups() {
    let groups: Vec<i32> = LIVE_GROUPS.lock().map(|g| g.iter().copied().collect()).unwrap_or_default();
    for pid in groups {
        // SAFETY: plain syscall on a group this process started.
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }
}

/// Kills the whole process group led by `child`.
pub fn kill_group(child: &Child) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: plain syscall; a stale pid at worst signals nothing (the group is ours).
    unsafe {
        libc::killpg(pid, libc::SIGKILL);
    }
}

#[derive(Debug)]
pub struct Captured {
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub seconds: f64,
}

impl Captured {
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// "exit code 3", "signal 11 (SIGSEGV)", "killed after the 10 s timeout".
    pub fn describe_end(&self, timeout: Duration) -> String {
        if self.timed_out {
            return format!("killed after the {:.0} s timeout", timeout.as_secs_f64());
        }
        match self.status {
            Some(s) => describe_status(s),
            None => "no exit status".into(),
        }
    }
}

pub fn describe_status(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(sig)) => format!("signal {sig} ({})", signal_name(sig)),
        _ => "unknown end".into(),
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTRAP => "SIGTRAP",
        _ => "signal",
    }
}

const CAPTURE_LIMIT: usize = 4 << 20;

fn drain<R: Read + Send + 'static>(reader: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(mut r) = reader {
            let mut buf = [0u8; 8192];
            loop {
                match r.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        // Keep reading past the cap so the child never blocks on a full pipe.
                        if out.len() < CAPTURE_LIMIT {
                            out.extend_from_slice(&buf[..n.min(CAPTURE_LIMIT - out.len())]);
                        }
                    }
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    })
}

/// Runs `cmd` isolated, capturing stdout and stderr, killing its process group if it
/// outlives `timeout`.
pub fn run_captured(cmd: &mut Command, timeout: Duration) -> std::io::Result<Captured> {
    isolate(cmd);
    capture(cmd, timeout)
}

/// [`run_captured`] for a command already [`isolate`]d (and given variables of its own
/// after that, which isolating again would drop).
pub fn capture(cmd: &mut Command, timeout: Duration) -> std::io::Result<Captured> {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    track_group(&child);
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let waited = wait_or_kill(&mut child, start + timeout);
    forget_group(&child);
    let (status, timed_out) = waited?;
    Ok(Captured {
        status,
        timed_out,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Waits for `child` until `deadline`; past it, kills the process group and reaps.
pub fn wait_or_kill(child: &mut Child, deadline: Instant) -> std::io::Result<(Option<ExitStatus>, bool)> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((Some(status), false));
        }
        if Instant::now() >= deadline {
            kill_group(child);
            // And the child itself, in case it left its group (the sandbox forbids that,
            // but a kernel may lack seccomp).
            // SAFETY: plain syscall on our own, not yet reaped, child.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGKILL);
            }
            let status = child.wait().ok();
            return Ok((status, true));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_pass_even_under_kept_prefixes() {
        assert!(is_passed_to_subprocesses("PATH"));
        assert!(is_passed_to_subprocesses("CUDA_VISIBLE_DEVICES"));
        assert!(is_passed_to_subprocesses("LC_ALL"));
        assert!(!is_passed_to_subprocesses("OPENAI_API_KEY"));
        assert!(!is_passed_to_subprocesses("OPENAI_BASE_URL"));
        assert!(!is_passed_to_subprocesses("AWS_SECRET_ACCESS_KEY"));
        assert!(!is_passed_to_subprocesses("CUDA_API_TOKEN"));
        assert!(!is_passed_to_subprocesses("GITHUB_TOKEN"));
    }

    #[test]
    fn a_hung_process_group_is_killed_at_the_deadline() {
        // The shell starts a grandchild that would outlive a plain kill of the shell.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30; echo never"]);
        let started = Instant::now();
        let got = run_captured(&mut cmd, Duration::from_millis(300)).unwrap();
        assert!(got.timed_out);
        assert!(started.elapsed() < Duration::from_secs(5), "pipes closed because the whole group died");
        assert!(!got.stdout.contains("never"));
        assert!(got.describe_end(Duration::from_millis(300)).contains("timeout"));
    }

    #[test]
    fn exit_codes_and_signals_are_told_apart() {
        let got =
            run_captured(Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]), Duration::from_secs(10))
                .unwrap();
        assert_eq!(got.stdout.trim(), "out");
        assert_eq!(got.stderr.trim(), "err");
        assert_eq!(got.describe_end(Duration::from_secs(10)), "exit code 3");
        let got = run_captured(Command::new("sh").args(["-c", "kill -SEGV $$"]), Duration::from_secs(10)).unwrap();
        assert_eq!(got.describe_end(Duration::from_secs(10)), "signal 11 (SIGSEGV)");
    }

    #[test]
    fn the_child_sees_no_secrets() {
        // SAFETY: tests in this binary do not read this variable concurrently.
        unsafe { std::env::set_var("NIGHTSHIFT_TEST_API_KEY", "sk-secret") };
        let got = run_captured(Command::new("sh").args(["-c", "env"]), Duration::from_secs(10)).unwrap();
        assert!(!got.stdout.contains("sk-secret"), "{}", got.stdout);
        assert!(got.stdout.contains("PATH="));
    }
}
