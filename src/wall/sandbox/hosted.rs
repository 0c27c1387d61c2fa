//! The hosted arrangement: `nightshift hosted --report FILE [--keep DIR]... -- TOOL ARGS...`,
//! the trampoline every run under a hosting tool goes through (ncu for profiles,
//! compute-sanitizer for `--sanitize`).
//!
//! Such a tool starts the worker as its child and injects code into it that talks to the
//! tool's front end over TCP and through files in /tmp, so the worker's hosted policy has
//! to leave TCP, /tmp, /dev/shm and /var/tmp open. The trampoline makes what stays open
//! reach nothing of the host's, by running the tool, and everything it starts, in
//! namespaces of its own:
//! - *mount*: propagation made private first (nothing mounted here shows outside), then
//!   fresh tmpfs on /tmp, /dev/shm and /var/tmp. What the tool and the worker write there
//!   vanishes with the run; the host's /tmp (other runs' files, other users' sockets) is out
//!   of sight. Folders the orchestrator hands over and reads back (`--keep`: the evaluation
//!   folder, the tool's output folder) normally lie outside those folders; one that lies
//!   under them is bound back in at its own path.
//! - *network*: only a loopback of its own, brought up; the tool reaches its injected
//!   code over it, and nothing leaves (the host's 127.0.0.1 is another interface).
//! - *PID*: the tool runs below a small init of ours; nothing inside can see or signal a
//!   process outside, and when the trampoline dies (the orchestrator kills its process
//!   group at the deadline) the init dies with it, and the kernel ends everything else
//!   inside, including processes that left the group. The tool's exit status comes back
//!   as the trampoline's own.
//! - *user*: what lets an unprivileged user make the others. Run as root, the trampoline
//!   makes none: Nsight Compute reads GPU counters only for processes with CAP_SYS_ADMIN
//!   in the initial user namespace when the driver restricts profiling to admins
//!   (NVreg_RestrictProfilingToAdminUsers, the default), and a user namespace would take
//!   that away. Root needs no user namespace for the other three.
//!
//! The arrangement is written to `--report` before the tool starts: which layers hold and
//! why not. Where mount, network or PID namespace cannot be made (a kernel that forbids
//! unprivileged user namespaces), the tool is not started unless `--allow-unconfined`
//! says so; the orchestrator turns that into an error naming the cause and the waiver.

use super::{Layer, SandboxError};
use serde::{Deserialize, Serialize};
use std::ffi::{CString, OsString};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const USER: &str = "user namespace";
pub const MOUNT: &str = "mount namespace";
pub const NETWORK: &str = "network namespace";
pub const PID: &str = "pid namespace";

/// The layers that confine; the user namespace is only the means to make them.
pub const CONFINING: [&str; 3] = [MOUNT, NETWORK, PID];

/// What hosting tools and their injected code write: replaced by private tmpfs mounts.
pub const PRIVATE_FOLDERS: [&str; 3] = ["/tmp", "/dev/shm", "/var/tmp"];

/// Exit code of a trampoline that did not start the tool (its report says why).
pub const REFUSED_EXIT: u8 = 125;

/// What the trampoline made, as written to its report before the tool starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arrangement {
    /// User, mount, network and PID namespace, in that order.
    pub layers: Vec<Layer>,
    /// Mount, network and PID namespaces all hold.
    pub confined: bool,
    /// Run as root without a user namespace, on purpose: the tool keeps its capabilities.
    pub kept_root_capabilities: bool,
    /// Whether the tool was started: confined, or allowed to run unconfined.
    pub started: bool,
}

impl Arrangement {
    /// What does not hold, one clause per layer, for errors and notes.
    pub fn shortfall(&self) -> String {
        // Layers that fail for one reason (all four, where no namespace can be made) are
        // named together, the reason once.
        let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
        for l in self.layers.iter().filter(|l| !self.holds(l)) {
            match groups.iter_mut().find(|(_, why)| *why == l.detail) {
                Some((names, _)) => names.push(&l.name),
                None => groups.push((vec![&l.name], &l.detail)),
            }
        }
        groups.iter().map(|(names, why)| format!("{}: {why}", names.join(", "))).collect::<Vec<_>>().join("; ")
    }

    /// Whether a layer holds, or is left out on purpose (the user namespace, as root).
    pub fn holds(&self, layer: &Layer) -> bool {
        layer.active || (layer.name == USER && self.kept_root_capabilities)
    }
}

/// The trampoline's command line.
#[derive(Debug, Clone)]
pub struct Args {
    /// Where the arrangement is written (outside any folder the tool's child may write).
    pub report: PathBuf,
    /// Folders that must stay reachable at their own paths.
    pub keep: Vec<PathBuf>,
    /// Start the tool even where the namespaces cannot be made.
    pub allow_unconfined: bool,
    /// The tool and its arguments.
    pub command: Vec<OsString>,
}

/// `exe hosted --report REPORT --keep K... [--allow-unconfined] --`; the caller appends
/// the tool's command line.
pub fn command_line(exe: &Path, report: &Path, keep: &[PathBuf], allow_unconfined: bool) -> Vec<OsString> {
    let mut line: Vec<OsString> = vec![exe.into(), "hosted".into(), "--report".into(), report.into()];
    for k in keep {
        line.extend(["--keep".into(), k.into()]);
    }
    if allow_unconfined {
        line.push("--allow-unconfined".into());
    }
    line.push("--".into());
    line
}

/// The arrangement a trampoline wrote.
pub fn read_report(path: &Path) -> Result<Arrangement, SandboxError> {
    let text = std::fs::read(path).map_err(|source| SandboxError::File { path: path.to_path_buf(), source })?;
    serde_json::from_slice(&text).map_err(|source| SandboxError::Report { path: path.to_path_buf(), source })
}

/// Entry point of `nightshift hosted`. Must run single-threaded: a process with threads
/// cannot enter a new user namespace.
pub fn main(args: &Args) -> ExitCode {
    let program = match Program::new(&args.command) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("nightshift hosted: {e}");
            return ExitCode::from(2);
        }
    };
    // Opened before anything is mounted: its folder may lie under /tmp.
    let report = match std::fs::File::create(&args.report) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("nightshift hosted: cannot write {}: {e}", args.report.display());
            return ExitCode::from(REFUSED_EXIT);
        }
    };
    let cwd = std::env::current_dir().ok();
    let entered = enter_namespaces();
    let kept_root_capabilities = entered.kept_root_capabilities;
    let mut layers = vec![entered.user];
    let finish = |layers: Vec<Layer>| Arrangement {
        confined: CONFINING.iter().all(|name| layers.iter().any(|l| l.name == *name && l.active)),
        started: false,
        kept_root_capabilities,
        layers,
    };
    if let Err(why) = entered.unshared {
        layers.extend([MOUNT, NETWORK, PID].map(|name| Layer::off(name, why.clone())));
        let mut arrangement = finish(layers);
        arrangement.started = args.allow_unconfined;
        write_report(&report, &arrangement);
        if !arrangement.started {
            return ExitCode::from(REFUSED_EXIT);
        }
        program.exec();
    }
    let mounts = private_mounts(&args.keep, cwd.as_deref());
    layers.push(mounts.layer);
    layers.push(loopback_only());
    let below = Below { program, report, layers, mounts_private: mounts.private, allow: args.allow_unconfined };
    run_below_init(below, finish)
}

/// A command line ready for execvp, prepared before any fork.
struct Program {
    args: Vec<CString>,
}

impl Program {
    fn new(command: &[OsString]) -> Result<Program, SandboxError> {
        if command.is_empty() {
            return Err(SandboxError::NoTool);
        }
        let args = command
            .iter()
            .map(|a| CString::new(a.as_bytes()).map_err(|_| SandboxError::NulArgument(a.to_string_lossy().into())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Program { args })
    }

    /// Replaces this process with the tool; never returns.
    fn exec(&self) -> ! {
        let mut argv: Vec<*const libc::c_char> = self.args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        // SAFETY: argv is NUL-terminated and outlives the call. Rust ignores SIGPIPE; the
        // tool gets the default back, as std's Command would give it.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::execvp(argv[0], argv.as_ptr());
        }
        let e = std::io::Error::last_os_error();
        eprintln!("nightshift hosted: cannot run {}: {e}", self.args[0].to_string_lossy());
        // SAFETY: terminates the process.
        unsafe { libc::_exit(127) }
    }
}

fn write_report(mut file: &std::fs::File, arrangement: &Arrangement) {
    let text = serde_json::to_vec(arrangement).expect("arrangements serialize");
    if let Err(e) = file.write_all(&text).and_then(|_| file.flush()) {
        eprintln!("nightshift hosted: cannot write the report: {e}");
    }
}

struct Entered {
    user: Layer,
    kept_root_capabilities: bool,
    /// Whether the mount, network and PID namespaces were made (not yet filled), or why
    /// not: the detail their layers will carry.
    unshared: Result<(), String>,
}

fn unshare(flags: libc::c_int) -> Result<(), SandboxError> {
    // SAFETY: plain syscall; this process has a single thread.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(SandboxError::last("unshare"));
    }
    Ok(())
}

fn enter_namespaces() -> Entered {
    // SAFETY: plain syscalls.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let others = libc::CLONE_NEWNS | libc::CLONE_NEWNET | libc::CLONE_NEWPID;
    let mut as_root = String::new();
    if uid == 0 {
        match unshare(others) {
            Ok(()) => {
                return Entered {
                    user: Layer::off(
                        USER,
                        "not made, on purpose: running as root, the tool keeps the capabilities Nsight Compute needs for GPU counters restricted to admins (the other namespaces need no user namespace as root)",
                    ),
                    kept_root_capabilities: true,
                    unshared: Ok(()),
                }
            }
            // Root without CAP_SYS_ADMIN (a container): a user namespace may still give it.
            Err(e) => as_root = format!("as root without one: {e}; "),
        }
    }
    if let Err(e) = unshare(others | libc::CLONE_NEWUSER) {
        let why = format!("cannot be made ({as_root}with a user namespace: {e}){}", restrictions());
        return Entered { user: Layer::off(USER, why.clone()), kept_root_capabilities: false, unshared: Err(why) };
    }
    let user = match map_ids(uid, gid) {
        Ok(()) if uid == 0 => Layer::on(
            USER,
            "made (root without CAP_SYS_ADMIN, a container?): root mapped to itself; capabilities hold inside only, so GPU counters restricted to admins may be refused",
        ),
        Ok(()) => Layer::on(
            USER,
            format!("made: user {uid} mapped to itself; the tool and the worker hold no capabilities outside it"),
        ),
        Err(e) => Layer::off(USER, format!("made, but its ids could not be mapped: {e}{}", restrictions())),
    };
    Entered { user, kept_root_capabilities: false, unshared: Ok(()) }
}

/// Maps this user and group to themselves in the new user namespace (setgroups denied
/// first, as the kernel requires of an unprivileged writer).
fn map_ids(uid: libc::uid_t, gid: libc::gid_t) -> Result<(), SandboxError> {
    let write = |file: &str, text: String| {
        let path = PathBuf::from(format!("/proc/self/{file}"));
        std::fs::write(&path, text).map_err(|source| SandboxError::File { path, source })
    };
    match write("setgroups", "deny".into()) {
        Err(_) if !Path::new("/proc/self/setgroups").exists() => {}
        other => other?,
    }
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("gid_map", format!("{gid} {gid} 1\n"))
}

/// The kernel settings that forbid user namespaces, as a parenthesis (or nothing).
pub fn restrictions() -> String {
    let read = |path: &str| std::fs::read_to_string(path).ok().map(|s| s.trim().to_string());
    let mut found = Vec::new();
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        found.push("kernel.unprivileged_userns_clone = 0 forbids unprivileged user namespaces");
    }
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        found.push("user.max_user_namespaces = 0 forbids user namespaces");
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        found
            .push("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)");
    }
    if found.is_empty() {
        String::new()
    } else {
        format!(" ({})", found.join("; "))
    }
}

fn mount(
    source: &str,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), SandboxError> {
    let c = |s: &str| CString::new(s).map_err(|_| SandboxError::Nul(s.into()));
    let source = c(source)?;
    let target_c = CString::new(target.as_os_str().as_bytes()).map_err(|_| SandboxError::NulPath)?;
    let fstype = fstype.map(c).transpose()?;
    let data = data.map(c).transpose()?;
    // SAFETY: NUL-terminated strings that outlive the call; null where absent.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target_c.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |f| f.as_ptr()),
            flags,
            data.as_ref().map_or(std::ptr::null(), |d| d.as_ptr() as *const libc::c_void),
        )
    };
    if rc != 0 {
        return Err(SandboxError::last(format!("mount on {}", target.display())));
    }
    Ok(())
}

struct Mounts {
    layer: Layer,
    /// Propagation is private: mounting more (a fresh /proc) cannot reach the host.
    private: bool,
}

fn private_mounts(keep: &[PathBuf], cwd: Option<&Path>) -> Mounts {
    let off = |why: String, private: bool| Mounts { layer: Layer::off(MOUNT, why), private };
    if let Err(e) = mount("none", Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None) {
        return off(format!("mount propagation could not be made private ({e}){}", restrictions()), false);
    }
    // A symlinked folder (/var/tmp -> /tmp) is covered by its target.
    let covered: Vec<&Path> = PRIVATE_FOLDERS
        .iter()
        .map(Path::new)
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect();
    // Folders to keep that the tmpfs mounts would hide: held open, bound back in after.
    let mut held: Vec<(&Path, OwnedFd)> = Vec::new();
    for k in keep {
        if !covered.iter().any(|c| k.starts_with(c)) {
            continue;
        }
        if covered.iter().any(|c| k == c) {
            return off(format!("{} cannot be kept: it is what is made private", k.display()), true);
        }
        match open_path(k) {
            Ok(fd) => held.push((k, fd)),
            Err(e) => return off(format!("cannot hold {} open: {e}", k.display()), true),
        }
    }
    for folder in &covered {
        let flags = libc::MS_NOSUID | libc::MS_NODEV;
        if let Err(e) = mount("tmpfs", folder, Some("tmpfs"), flags, Some("mode=1777")) {
            return off(format!("no private tmpfs on {} ({e}){}", folder.display(), restrictions()), true);
        }
    }
    for (path, fd) in &held {
        let source = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let made = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path);
        if let Err(e) =
            made.map_err(SandboxError::Io).and_then(|_| mount(&source, path, None, libc::MS_BIND | libc::MS_REC, None))
        {
            return off(format!("cannot bind {} into the private folders: {e}", path.display()), true);
        }
    }
    // The working directory was resolved before the mounts; resolved again, its `..`
    // leads into the private folders rather than the host's.
    if let Some(dir) = cwd {
        if let Err(e) = std::env::set_current_dir(dir) {
            return off(format!("cannot enter {} again after the mounts: {e}", dir.display()), true);
        }
    }
    let names: Vec<String> = covered.iter().map(|p| p.display().to_string()).collect();
    let kept = if held.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = held.iter().map(|(p, _)| p.display().to_string()).collect();
        format!("; {} bound back in at the same path", list.join(", "))
    };
    Mounts {
        layer: Layer::on(
            MOUNT,
            format!(
                "fresh private tmpfs on {} (propagation private): what the tool and the worker write there stays inside and vanishes with the run{kept}",
                names.join(", ")
            ),
        ),
        private: true,
    }
}

fn open_path(path: &Path) -> Result<OwnedFd, SandboxError> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| SandboxError::NulPath)?;
    // SAFETY: plain syscall on a NUL-terminated path; the descriptor is owned below.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(SandboxError::Io(std::io::Error::last_os_error()));
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `struct ifreq` with the flags member of its union (40 bytes on Linux).
#[repr(C)]
struct InterfaceFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _rest: [u8; 22],
}

fn loopback_only() -> Layer {
    match bring_up_loopback() {
        Ok(()) => Layer::on(
            NETWORK,
            "only a loopback of its own, brought up: the tool reaches its injected code over it, and nothing leaves",
        ),
        Err(e) => Layer::on(
            NETWORK,
            format!("only a loopback of its own, which could not be brought up ({e}): nothing leaves, but the tool may not reach its injected code"),
        ),
    }
}

fn bring_up_loopback() -> Result<(), SandboxError> {
    // SAFETY: plain syscalls on a socket owned here and a request struct of the kernel's layout.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(SandboxError::last("socket"));
        }
        let socket = OwnedFd::from_raw_fd(fd);
        let mut req = InterfaceFlags { name: [0; libc::IFNAMSIZ], flags: 0, _rest: [0; 22] };
        req.name[0] = b'l' as libc::c_char;
        req.name[1] = b'o' as libc::c_char;
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) != 0 {
            return Err(SandboxError::last("SIOCGIFFLAGS lo"));
        }
        req.flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS as _, &req) != 0 {
            return Err(SandboxError::last("SIOCSIFFLAGS lo"));
        }
    }
    Ok(())
}

/// What the init inside the PID namespace needs.
struct Below {
    program: Program,
    report: std::fs::File,
    layers: Vec<Layer>,
    mounts_private: bool,
    allow: bool,
}

fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let mut fds = [0; 2];
    // SAFETY: plain syscall filling two descriptors owned below.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(SandboxError::last("pipe"));
    }
    // SAFETY: fresh descriptors nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Forks the PID namespace's init, which starts the tool; waits for it and ends the way
/// the tool ended.
fn run_below_init(mut below: Below, finish: impl Fn(Vec<Layer>) -> Arrangement) -> ExitCode {
    // The life pipe: the init sees its write end close when this process dies. The status
    // pipe: the tool's raw wait status, which a PID 1 cannot reproduce by dying itself.
    let pipes = pipe().and_then(|life| pipe().map(|status| (life, status)));
    // SAFETY: this process is single-threaded, so the child may do anything.
    let child = if pipes.is_ok() { unsafe { libc::fork() } } else { -1 };
    let ((life_read, life_write), (status_read, status_write)) = match (pipes, child) {
        (Ok(p), c) if c >= 0 => p,
        (pipes, _) => {
            let why = pipes.err().unwrap_or_else(|| SandboxError::last("fork"));
            below.layers.push(Layer::off(PID, format!("no process could be started in it ({why})")));
            let mut arrangement = finish(below.layers);
            arrangement.started = below.allow;
            write_report(&below.report, &arrangement);
            if !arrangement.started {
                return ExitCode::from(REFUSED_EXIT);
            }
            below.program.exec();
        }
    };
    if child == 0 {
        drop(life_write);
        drop(status_read);
        init(below, life_read, status_write, finish);
    }
    drop(life_read);
    drop(status_write);
    drop(below);
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(child, &mut status, 0) };
        if r == child {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            eprintln!("nightshift hosted: {}", SandboxError::last("waitpid"));
            return ExitCode::from(REFUSED_EXIT);
        }
    }
    let mut tool_status = [0u8; 4];
    let mut from_init = std::fs::File::from(status_read);
    match std::io::Read::read_exact(&mut from_init, &mut tool_status) {
        Ok(()) => end_like(i32::from_ne_bytes(tool_status)),
        // The init ended before the tool did (refused, or killed): its own status says it.
        Err(_) => end_like(status),
    }
}

/// PID 1 of the namespace: mounts its /proc, writes the report, starts the tool, reaps
/// whatever is orphaned inside, and hands the tool's status out when it ends. Its own
/// end ends everything inside.
fn init(mut below: Below, life: OwnedFd, status_out: OwnedFd, finish: impl Fn(Vec<Layer>) -> Arrangement) -> ! {
    // SAFETY: plain prctl on ourselves; a dead trampoline kills the init and so the namespace.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) };
    // The trampoline may have died before the prctl: then its end of the pipe is closed.
    let mut poll = libc::pollfd { fd: life.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    if unsafe { libc::poll(&mut poll, 1, 0) } != 0 {
        // SAFETY: terminates the process.
        unsafe { libc::_exit(REFUSED_EXIT as i32) }
    }
    let proc_note = if below.mounts_private {
        match mount("proc", Path::new("/proc"), Some("proc"), libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC, None)
        {
            Ok(()) => "; /proc lists only them".to_string(),
            Err(e) => format!("; /proc still lists the host's processes ({e}), which Landlock keeps from the worker"),
        }
    } else {
        "; /proc still lists the host's processes (the mount namespace is not private), which Landlock keeps from the worker".to_string()
    };
    below.layers.push(Layer::on(
        PID,
        format!("the tool and the worker see and signal only processes inside, all of which end with the trampoline{proc_note}"),
    ));
    let mut arrangement = finish(below.layers);
    arrangement.started = arrangement.confined || below.allow;
    write_report(&below.report, &arrangement);
    drop(below.report);
    if !arrangement.started {
        // SAFETY: terminates the process.
        unsafe { libc::_exit(REFUSED_EXIT as i32) }
    }
    // SAFETY: single-threaded; the child execs at once.
    let tool = unsafe { libc::fork() };
    if tool == 0 {
        below.program.exec();
    }
    if tool < 0 {
        eprintln!("nightshift hosted: cannot start the tool: {}", SandboxError::last("fork"));
        // SAFETY: terminates the process.
        unsafe { libc::_exit(126) }
    }
    let mut status = 0;
    loop {
        // SAFETY: reaps any child; orphans inside the namespace are ours to reap.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r == tool {
            let mut out = std::fs::File::from(status_out);
            let _ = out.write_all(&status.to_ne_bytes());
            // SAFETY: terminates the process, and with it everything left inside.
            unsafe { libc::_exit(0) }
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            // SAFETY: terminates the process.
            unsafe { libc::_exit(126) }
        }
    }
}

/// Ends this process the way a child with wait status `status` ended: the same exit code,
/// or death by the same signal (without a core dump).
fn end_like(status: i32) -> ExitCode {
    if libc::WIFEXITED(status) {
        return ExitCode::from(libc::WEXITSTATUS(status) as u8);
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: plain syscalls on ourselves.
        unsafe {
            let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(sig);
        }
        return ExitCode::from(128u8.wrapping_add(sig as u8));
    }
    ExitCode::from(REFUSED_EXIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrangement(layers: &[(&str, bool)], kept_root: bool) -> Arrangement {
        let layers: Vec<Layer> = layers
            .iter()
            .map(|(n, on)| if *on { Layer::on(n, "holds") } else { Layer::off(n, "cannot be made (EPERM)") })
            .collect();
        Arrangement {
            confined: CONFINING.iter().all(|c| layers.iter().any(|l| l.name == *c && l.active)),
            layers,
            kept_root_capabilities: kept_root,
            started: false,
        }
    }

    #[test]
    fn the_shortfall_names_what_does_not_hold_but_not_roots_choice() {
        let a = arrangement(&[(USER, false), (MOUNT, true), (NETWORK, true), (PID, true)], true);
        assert!(a.confined);
        assert_eq!(a.shortfall(), "", "root's missing user namespace is a choice, not a shortfall");
        let a = arrangement(&[(USER, false), (MOUNT, false), (NETWORK, false), (PID, false)], false);
        assert!(!a.confined);
        let s = a.shortfall();
        for name in [USER, MOUNT, NETWORK, PID] {
            assert!(s.contains(name), "{s}");
        }
        assert_eq!(s.matches("EPERM").count(), 1, "one reason, said once: {s}");
        let a = arrangement(&[(USER, true), (MOUNT, true), (NETWORK, true), (PID, false)], false);
        assert!(!a.confined, "every confining layer must hold");
        assert!(a.shortfall().starts_with(PID), "{}", a.shortfall());
    }

    #[test]
    fn the_wait_status_of_an_exit_comes_back_as_the_same_exit_code() {
        assert_eq!(end_like(3 << 8), ExitCode::from(3));
        assert_eq!(end_like(0), ExitCode::from(0));
    }

    #[test]
    fn command_lines_keep_folders_and_pass_the_waiver() {
        let line = command_line(Path::new("/x/nightshift"), Path::new("/r/h.json"), &[PathBuf::from("/k")], true);
        let line: Vec<String> = line.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            line,
            ["/x/nightshift", "hosted", "--report", "/r/h.json", "--keep", "/k", "--allow-unconfined", "--"]
        );
        let line = command_line(Path::new("/x/nightshift"), Path::new("/r/h.json"), &[], false);
        assert!(!line.iter().any(|a| a == "--allow-unconfined"), "the waiver is never implied");
    }
}
