//! `nightshift confine --policy JSON --probe`: applies a build's policy to itself, as the
//! trampoline does before it execs nvcc, and then tries what a hostile build would, one
//! attempt at a time, printing a JSON report. The tests run it as a real subprocess, so
//! they see exactly what the kernel enforces on a build.

use super::confine::{self, Layer};
use super::policy::Policy;
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    pub action: String,
    /// Whether the system let it happen.
    pub allowed: bool,
    /// Whether a build should be let: the scratch folder and the toolkit's programs yes,
    /// everything else no.
    pub should_be_allowed: bool,
    pub detail: String,
}

/// A layer as the report gives it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LayerReport {
    pub name: String,
    pub active: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeReport {
    pub layers: Vec<LayerReport>,
    /// How long applying the policy took, in milliseconds (what the trampoline adds to
    /// every tool, besides starting this binary).
    pub apply_ms: f64,
    pub attempts: Vec<Attempt>,
}

impl ProbeReport {
    /// Attempts whose outcome is not what the confinement promises.
    pub fn breaches(&self) -> Vec<&Attempt> {
        self.attempts.iter().filter(|a| a.allowed != a.should_be_allowed).collect()
    }
}

fn outcome(action: impl Into<String>, should: bool, result: Result<String, std::io::Error>) -> Attempt {
    let (allowed, detail) = match result {
        Ok(d) => (true, d),
        Err(e) => (false, e.to_string()),
    };
    Attempt { action: action.into(), allowed, should_be_allowed: should, detail }
}

/// A syscall's return value as a result (errno read now).
fn sys(ret: libc::c_long) -> Result<String, std::io::Error> {
    if ret < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(format!("returned {ret}"))
    }
}

fn c_path(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap_or_default()
}

/// What a probe tries besides its fixed list.
#[derive(Debug, Clone, Default)]
pub struct Targets {
    /// Files a build must not read.
    pub secrets: Vec<PathBuf>,
    /// Files a build must be able to read.
    pub readable: Vec<PathBuf>,
    /// A folder a build must not write.
    pub outside: Option<PathBuf>,
}

/// Applies `policy` and tries everything.
pub fn run(policy: &Policy, targets: &Targets) -> ProbeReport {
    let started = std::time::Instant::now();
    let layers: Vec<Layer> = confine::apply(policy);
    let apply_ms = started.elapsed().as_secs_f64() * 1000.0;
    let layers = layers
        .into_iter()
        .map(|(name, r)| match r {
            Ok(d) => LayerReport { name: name.into(), active: true, detail: d },
            Err(d) => LayerReport { name: name.into(), active: false, detail: d },
        })
        .collect();
    let mut a = Vec::new();
    let scratch = &policy.scratch;
    a.push(outcome(
        "write the scratch folder",
        true,
        std::fs::write(scratch.join("probe-ok"), b"ok").map(|_| "written".into()),
    ));
    for s in &targets.secrets {
        a.push(outcome(
            format!("read {}", s.display()),
            false,
            std::fs::read(s).map(|b| format!("read {} bytes", b.len())),
        ));
    }
    for r in &targets.readable {
        a.push(outcome(format!("read {}", r.display()), true, std::fs::read(r).map(|b| format!("{} bytes", b.len()))));
    }
    if let Some(dir) = &targets.outside {
        let target = dir.join("nightshift-build-escape");
        a.push(outcome(
            format!("write {}", target.display()),
            false,
            std::fs::write(&target, b"escaped").map(|_| "written".into()),
        ));
    }
    for p in &policy.read {
        if p.is_file() {
            a.push(outcome(
                format!("read {}", p.display()),
                true,
                std::fs::read(p).map(|b| format!("{} bytes", b.len())),
            ));
            break;
        }
    }
    a.push(outcome(
        "run /bin/sh",
        true,
        std::process::Command::new("/bin/sh").args(["-c", "exit 0"]).status().map(|s| s.to_string()),
    ));
    // A program the build wrote itself: scratch files are never executable.
    let copy = scratch.join("probe-sh");
    let copied = std::fs::read("/bin/sh").and_then(|b| std::fs::write(&copy, b)).and_then(|_| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))
    });
    if copied.is_ok() {
        a.push(outcome(
            "run a program written to the scratch folder",
            false,
            std::process::Command::new(&copy).args(["-c", "exit 0"]).status().map(|s| s.to_string()),
        ));
    }
    for (name, family) in
        [("IPv4", libc::AF_INET), ("IPv6", libc::AF_INET6), ("Unix", libc::AF_UNIX), ("netlink", libc::AF_NETLINK)]
    {
        // SAFETY: plain syscall; the descriptor, if any, is closed at exit.
        let fd = unsafe { libc::socket(family, libc::SOCK_STREAM, 0) };
        a.push(outcome(format!("{name} socket"), false, sys(fd as libc::c_long)));
    }
    let mut pair = [0 as libc::c_int; 2];
    // SAFETY: plain syscall into a two-element array.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr()) };
    a.push(outcome("Unix socket pair", false, sys(r as libc::c_long)));
    const KEYCTL_GET_KEYRING_ID: libc::c_long = 0;
    const KEY_SPEC_USER_KEYRING: libc::c_long = -4;
    // SAFETY: keyctl with integer arguments.
    let r = unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0) };
    a.push(outcome("the user's keyring", false, sys(r)));
    let mut params = [0u8; 120];
    // SAFETY: io_uring_setup with a zeroed params struct of the kernel's size.
    let r = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, params.as_mut_ptr()) };
    a.push(outcome("io_uring", false, sys(r)));
    let fifo = c_path(&scratch.join("probe-node"));
    // SAFETY: mknod with a valid path.
    let r = unsafe { libc::mknod(fifo.as_ptr(), libc::S_IFIFO | 0o600, 0) };
    a.push(outcome("mknod in the scratch folder", false, sys(r as libc::c_long)));
    // SAFETY: getppid cannot fail.
    let parent = unsafe { libc::getppid() };
    // SAFETY: ptrace attach by pid; on success the parent would stop, so it must fail.
    let r = unsafe { libc::ptrace(libc::PTRACE_ATTACH, parent, 0, 0) };
    a.push(outcome("ptrace the parent", false, sys(r)));
    let mut old = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: prlimit reading into a valid struct.
    let r = unsafe { libc::prlimit(parent, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
    a.push(outcome("the parent's limits", false, sys(r as libc::c_long)));
    // SAFETY: signal 0 only checks whether a signal could be sent.
    let r = unsafe { libc::kill(parent, 0) };
    a.push(outcome("signal the parent", false, sys(r as libc::c_long)));
    // SAFETY: plain syscalls on ourselves.
    a.push(outcome(
        "unshare a user namespace",
        false,
        sys(unsafe { libc::unshare(libc::CLONE_NEWUSER) } as libc::c_long),
    ));
    // SAFETY: as above.
    a.push(outcome("a new session", false, sys(unsafe { libc::setsid() } as libc::c_long)));
    // SAFETY: as above.
    a.push(outcome("a new process group", false, sys(unsafe { libc::setpgid(0, 0) } as libc::c_long)));
    a.push(clone_new_user());
    let mut header = [0x2008_0522u32, 0];
    let mut data = [0u32; 6];
    // SAFETY: capget with a version-3 header and room for two data structs.
    let r = unsafe { libc::syscall(libc::SYS_capget, header.as_mut_ptr(), data.as_mut_ptr()) };
    a.push(Attempt {
        action: "hold a capability".into(),
        allowed: r == 0 && data.iter().any(|&d| d != 0),
        should_be_allowed: false,
        detail: format!("effective/permitted/inheritable: {data:x?}"),
    });
    // What a program the trampoline starts sees (the probe itself still has the caller's).
    let env = confine::program_command(policy, "/usr/bin/env").output();
    let names: Vec<String> = match &env {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
            .collect(),
        Err(_) => Vec::new(),
    };
    let foreign: Vec<&String> = names
        .iter()
        .filter(|k| !["PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TZ", "PWD"].contains(&k.as_str()))
        .collect();
    a.push(Attempt {
        action: "see the orchestrator's environment".into(),
        allowed: env.is_err() || !foreign.is_empty(),
        should_be_allowed: false,
        detail: format!("variables: {names:?}"),
    });
    ProbeReport { layers, apply_ms, attempts: a }
}

/// clone(CLONE_NEWUSER): a namespace made without unshare.
fn clone_new_user() -> Attempt {
    let flags = (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: a fork-like clone (no shared memory, no new stack): the child exits at once.
    let r = unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) };
    if r == 0 {
        // SAFETY: the child leaves without running anything of ours.
        unsafe { libc::_exit(0) };
    }
    if r > 0 {
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(r as libc::pid_t, &mut status, 0) };
    }
    outcome("clone into a user namespace", false, sys(r))
}

/// Runs `exe confine --probe` under `policy` (its scratch folder set) and reads its report.
pub fn spawn(exe: &Path, policy: &Policy, targets: &Targets) -> Result<ProbeReport, String> {
    let mut c = Command::new(exe);
    c.args(["confine", "--probe", "--policy"]).arg(serde_json::to_string(policy).expect("a policy serializes"));
    for s in &targets.secrets {
        c.arg("--secret").arg(s);
    }
    for r in &targets.readable {
        c.arg("--readable").arg(r);
    }
    if let Some(o) = &targets.outside {
        c.arg("--outside").arg(o);
    }
    crate::toolkit::process::isolate(&mut c).current_dir(&policy.scratch);
    let out = c.output().map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "the build probe ended with {} and no report ({e}): {}",
            crate::toolkit::process::describe_status(out.status),
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}
