//! `nightshift sandbox-probe`: applies a worker's policy to itself and tries what a
//! hostile candidate would (every escape an outside red team found, and the classics),
//! reporting each attempt. `check-env` and the tests run it as a real subprocess, so they
//! see exactly what a worker's kernel enforces: strict, as every judgment's worker; or
//! hosted, under the hosted arrangement (`nightshift hosted`), as a worker under ncu or
//! compute-sanitizer; or under the namespaces alone.
//!
//! The spawner sets the targets up (listeners on Unix paths under /tmp and $HOME, on an
//! abstract name, on loopback TCP and UDP ports; a key in the session keyring; a library
//! the policy grants and one it does not) and checks afterwards, from outside, that
//! nothing reached them; the probe's own account says what the system call returned.

use super::hosted::{self, Arrangement};
use super::{Layer, Policy, SandboxError};
use serde::{Deserialize, Serialize};
use std::ffi::{CString, OsString};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    pub action: String,
    /// Whether the system let it happen.
    pub allowed: bool,
    /// Whether a worker should be let: writes to the scratch folder, reads of its own
    /// /proc status, loading the library its policy grants, must work; everything else
    /// must not (under the namespaces alone, what stays inside them may work).
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
    /// A judging worker's.
    Strict,
    /// A worker's under a hosting tool.
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

/// What to try beyond the fixed list, set up by the spawner.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Extra {
    /// A loopback TCP port someone listens on.
    #[arg(long)]
    pub port: Option<u16>,
    /// A loopback UDP port someone listens on.
    #[arg(long)]
    pub udp_port: Option<u16>,
    /// Unix socket paths someone listens on (stream, or seqpacket at PATH.seq).
    #[arg(long = "unix")]
    pub unix: Vec<PathBuf>,
    /// Abstract Unix socket names someone listens on (stream, or seqpacket at NAME.seq).
    #[arg(long = "abstract")]
    pub abstract_names: Vec<String>,
    /// The serial of a key in the session keyring the probe starts with.
    #[arg(long)]
    pub key: Option<i64>,
    /// An address in the parent's memory to read with process_vm_readv.
    #[arg(long)]
    pub peek: Option<u64>,
    /// A kernel library the probe's policy grants (it must load).
    #[arg(long)]
    pub library: Option<PathBuf>,
    /// A library its policy does not grant (it must not load, nor be read).
    #[arg(long)]
    pub forbidden_library: Option<PathBuf>,
    /// Vendor libraries its policy grants by name (then the forbidden one must load).
    #[arg(long)]
    pub vendor: Vec<String>,
    /// An environment variable the probe starts with, which must be gone from its
    /// environment and its memory after `scrub_environment()`.
    #[arg(long)]
    pub secret_var: Option<String>,
}

impl Extra {
    fn args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut opt = |name: &str, v: Option<OsString>| {
            if let Some(v) = v {
                a.extend([name.into(), v]);
            }
        };
        opt("--port", self.port.map(|p| p.to_string().into()));
        opt("--udp-port", self.udp_port.map(|p| p.to_string().into()));
        opt("--key", self.key.map(|k| k.to_string().into()));
        opt("--peek", self.peek.map(|p| p.to_string().into()));
        opt("--library", self.library.clone().map(Into::into));
        opt("--forbidden-library", self.forbidden_library.clone().map(Into::into));
        opt("--secret-var", self.secret_var.clone().map(Into::into));
        for p in &self.unix {
            a.extend(["--unix".into(), p.into()]);
        }
        for n in &self.abstract_names {
            a.extend(["--abstract".into(), n.into()]);
        }
        for v in &self.vendor {
            a.extend(["--vendor".into(), v.into()]);
        }
        a
    }
}

/// The probe's command line.
#[derive(Debug, Clone, clap::Args)]
pub struct Targets {
    /// The folder the sandbox lets the probe write.
    #[arg(long)]
    pub scratch: PathBuf,
    /// A file outside the scratch folder the probe tries to create.
    #[arg(long)]
    pub outside: PathBuf,
    /// A process outside the sandbox to try to signal.
    #[arg(long)]
    pub signal_pid: Option<i32>,
    /// Which arrangement to probe.
    #[arg(long, value_enum, default_value = "strict")]
    pub policy: ProbePolicy,
    #[command(flatten)]
    pub extra: Extra,
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
        if let Some(pid) = self.signal_pid {
            a.extend(["--signal-pid".into(), pid.to_string().into()]);
        }
        a.extend(self.extra.args());
        a
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

/// Listens on the loopback and connects to itself.
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

/// A Unix socket address: a path, or an abstract name (a leading NUL).
fn unix_address(path: Option<&Path>, abstract_name: Option<&str>) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: a zeroed sockaddr_un is a valid empty address.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let (bytes, offset) = match (path, abstract_name) {
        (Some(p), _) => (p.as_os_str().as_bytes().to_vec(), 0),
        (None, Some(n)) => (n.as_bytes().to_vec(), 1),
        (None, None) => (Vec::new(), 0),
    };
    let n = bytes.len().min(addr.sun_path.len() - 1 - offset);
    for (i, b) in bytes[..n].iter().enumerate() {
        addr.sun_path[offset + i] = *b as libc::c_char;
    }
    let base = std::mem::size_of::<libc::sa_family_t>();
    let len = if offset == 1 { base + 1 + n } else { base + n + 1 };
    (addr, len as libc::socklen_t)
}

/// Connects a Unix socket of `kind` to an address; closes it again.
fn unix_connect(kind: libc::c_int, path: Option<&Path>, abstract_name: Option<&str>) -> std::io::Result<()> {
    // SAFETY: plain syscalls on a descriptor owned here and a valid address.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, kind | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let (addr, len) = unix_address(path, abstract_name);
        let rc = libc::connect(fd, &addr as *const libc::sockaddr_un as *const libc::sockaddr, len);
        let e = std::io::Error::last_os_error();
        libc::close(fd);
        if rc != 0 {
            return Err(e);
        }
    }
    Ok(())
}

/// A stream connection to `target`, else a seqpacket one to `target.seq`: the error of
/// each if neither works.
fn either_kind(connect: impl Fn(libc::c_int, bool) -> std::io::Result<()>) -> std::io::Result<()> {
    match connect(libc::SOCK_STREAM, false) {
        Ok(()) => Ok(()),
        Err(stream) => connect(libc::SOCK_SEQPACKET, true)
            .map_err(|seq| std::io::Error::other(format!("stream: {stream}; seqpacket: {seq}"))),
    }
}

fn udp_send(port: u16) -> std::io::Result<()> {
    let socket = std::net::UdpSocket::bind(("127.0.0.1", 0))?;
    socket.send_to(b"escaped", ("127.0.0.1", port)).map(drop)
}

fn io_uring() -> std::io::Result<()> {
    let mut params = [0u8; 120];
    // SAFETY: io_uring_setup reads and writes the 120-byte params struct given.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4, params.as_mut_ptr()) };
    if fd >= 0 {
        // SAFETY: a descriptor the call just returned.
        unsafe { libc::close(fd as i32) };
    }
    errno_result(fd)
}

const KEYCTL_READ: libc::c_long = 11;
const KEY_SPEC_SESSION_KEYRING: libc::c_long = -3;

fn keyctl_read(id: libc::c_long) -> std::io::Result<()> {
    let mut buf = [0u8; 256];
    // SAFETY: keyctl writes at most buf.len() bytes into buf.
    errno_result(unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_READ, id, buf.as_mut_ptr(), buf.len()) })
}

fn request_key() -> std::io::Result<()> {
    // SAFETY: NUL-terminated strings.
    errno_result(unsafe {
        libc::syscall(
            libc::SYS_request_key,
            c"user".as_ptr(),
            c"nightshift-probe".as_ptr(),
            std::ptr::null::<libc::c_char>(),
            0,
        )
    })
}

fn mknod_block(scratch: &Path) -> std::io::Result<()> {
    let target = scratch.join("disk");
    // The device of the root file system's partition: the disk a red-team worker read.
    let dev = std::fs::metadata("/").map(|m| std::os::unix::fs::MetadataExt::dev(&m)).unwrap_or(0);
    let c = CString::new(target.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: a NUL-terminated path.
    let rc = unsafe { libc::mknodat(libc::AT_FDCWD, c.as_ptr(), libc::S_IFBLK | 0o600, dev as libc::dev_t) };
    let result = errno_result(rc as i64);
    let made = target.exists();
    let _ = std::fs::remove_file(&target);
    match (result, made) {
        (Ok(()), _) | (_, true) => Ok(()),
        (Err(e), false) => Err(e),
    }
}

fn dlopen(path: &Path) -> std::io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: dlopen of a NUL-terminated path; the handle is left open (the probe exits).
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns a NUL-terminated message or null.
        let why = unsafe {
            let e = libc::dlerror();
            if e.is_null() {
                "dlopen failed".to_string()
            } else {
                std::ffi::CStr::from_ptr(e).to_string_lossy().into_owned()
            }
        };
        return Err(std::io::Error::other(why));
    }
    Ok(())
}

/// Whether `secret` is anywhere in the kernel's environment block (read through
/// /proc/self/stat's env_start..env_end, in this process's own memory).
fn secret_in_memory(secret: &[u8]) -> std::io::Result<()> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let rest = &stat[stat.rfind(')').map(|i| i + 1).unwrap_or(0)..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let (Some(start), Some(end)) =
        (fields.get(47).and_then(|f| f.parse::<usize>().ok()), fields.get(48).and_then(|f| f.parse::<usize>().ok()))
    else {
        return Err(std::io::Error::other("no environment block in /proc/self/stat"));
    };
    // SAFETY: the kernel's environment block of this very process, mapped and readable.
    let block = unsafe { std::slice::from_raw_parts(start as *const u8, end.saturating_sub(start)) };
    if block.windows(secret.len().max(1)).any(|w| w == secret) {
        Ok(())
    } else {
        Err(std::io::Error::other("not in the environment block any more"))
    }
}

pub fn run(targets: &Targets) -> ProbeReport {
    let x = &targets.extra;
    let mut policy = Policy::strict(targets.scratch.clone(), &x.library.iter().cloned().collect::<Vec<_>>(), 60);
    policy.hosted = targets.policy == ProbePolicy::Hosted;
    policy.vendor_libraries = x.vendor.clone();
    let sandboxed = targets.policy != ProbePolicy::None;
    let namespaces_only = !sandboxed;
    // SAFETY: plain syscalls; none of them touches memory we own.
    let ppid = unsafe { libc::getppid() };
    // The parent's own core limit, read before the sandbox: setting it again changes
    // nothing if the sandbox fails.
    // SAFETY: prlimit64 writes the old limit into `old`.
    let mut old = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    let parent_limit = unsafe { libc::prlimit(ppid, libc::RLIMIT_CORE, std::ptr::null(), &mut old) } == 0;
    let secret = x.secret_var.as_ref().and_then(|v| std::env::var(v).ok());
    let mut layers = if sandboxed { super::apply(&policy) } else { Vec::new() };
    if sandboxed {
        layers.push(super::scrub_environment());
    }
    let mut attempts = Vec::new();
    let mut attempt = |action: &str, should: bool, r: std::io::Result<()>| {
        let (allowed, detail) = outcome(r);
        attempts.push(Attempt { action: action.into(), allowed, should_be_allowed: should, detail });
    };
    attempt("write a file in the scratch folder", true, write_file(&targets.scratch.join("inside.txt")));
    attempt(&format!("write {}", targets.outside.display()), false, write_file(&targets.outside));
    if namespaces_only {
        attempt("write and read back a file in its own /tmp", true, own_tmp_round_trip());
    } else {
        attempt("write a file in /tmp", false, own_tmp_round_trip());
    }
    if sandboxed {
        attempt("read /proc/self/status", true, std::fs::read("/proc/self/status").map(drop));
        // The driver reads it at cuInit (every trace): granted, see fs.rs.
        attempt("read /proc/self/maps (the driver reads it)", true, std::fs::read("/proc/self/maps").map(drop));
        for file in ["environ", "mem", "auxv", "smaps", "pagemap"] {
            attempt(&format!("read /proc/self/{file}"), false, std::fs::read(format!("/proc/self/{file}")).map(drop));
        }
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
        attempt(
            &format!("signal the parent's thread (tgkill({ppid}, {ppid}, 0))"),
            false,
            errno_result(unsafe { libc::syscall(libc::SYS_tgkill, ppid, ppid, 0) }),
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
        let path = CString::new("/bin/true").expect("no NUL");
        let argv = [path.as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null()];
        // SAFETY: valid NUL-terminated arrays; on success this process would be replaced.
        attempt(
            "exec /bin/true",
            false,
            errno_result(unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) } as i64),
        );
        attempt(
            &format!("set the parent's limits (prlimit64({ppid}, RLIMIT_CORE))"),
            false,
            if parent_limit {
                // SAFETY: the limit it already has; prlimit64 reads `old`.
                errno_result(unsafe { libc::prlimit(ppid, libc::RLIMIT_CORE, &old, std::ptr::null_mut()) } as i64)
            } else {
                Err(std::io::Error::other("its limits could not be read even before the sandbox"))
            },
        );
        attempt(&format!("ptrace the parent (PTRACE_SEIZE {ppid})"), false, {
            // SAFETY: PTRACE_SEIZE neither stops nor changes the tracee; detached at once
            // if it worked.
            let rc = unsafe { libc::ptrace(libc::PTRACE_SEIZE, ppid, 0, 0) };
            if rc == 0 {
                unsafe { libc::ptrace(libc::PTRACE_DETACH, ppid, 0, 0) };
            }
            errno_result(rc)
        });
        attempt(&format!("read the parent's memory (process_vm_readv {ppid})"), false, {
            let mut buf = [0u8; 8];
            let local = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
            let remote = libc::iovec { iov_base: x.peek.unwrap_or(0x1000) as *mut libc::c_void, iov_len: buf.len() };
            // SAFETY: the local buffer is ours and 8 bytes long.
            errno_result(unsafe { libc::process_vm_readv(ppid, &local, 1, &remote, 1, 0) } as i64)
        });
        attempt("set up an io_uring", false, io_uring());
        attempt(
            "make a block device of the root disk in the scratch folder (mknod)",
            false,
            mknod_block(&targets.scratch),
        );
        attempt("read the session keyring (keyctl)", false, keyctl_read(KEY_SPEC_SESSION_KEYRING));
        attempt("ask for a key (request_key)", false, request_key());
        if let Some(serial) = x.key {
            attempt(&format!("read the planted key {serial} (keyctl)"), false, keyctl_read(serial as libc::c_long));
        }
        attempt("open an IPv4 socket", false, {
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
            if fd >= 0 {
                unsafe { libc::close(fd) };
            }
            errno_result(fd as i64)
        });
        attempt("open a Unix socket pair", false, {
            let mut fds = [0; 2];
            let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) };
            if rc == 0 {
                unsafe {
                    libc::close(fds[0]);
                    libc::close(fds[1]);
                }
            }
            errno_result(rc as i64)
        });
    }
    if let Some(port) = x.port {
        attempt(
            &format!("connect to 127.0.0.1:{port} (a listener of the process that started it)"),
            false,
            std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(5)).map(drop),
        );
    }
    if let Some(port) = x.udp_port {
        // Inside the namespaces alone a datagram goes out on the namespace's own loopback,
        // where nobody listens: the spawner checks its listener got nothing.
        attempt(&format!("send a UDP datagram to 127.0.0.1:{port}"), namespaces_only, udp_send(port));
    }
    for path in &x.unix {
        let seq = PathBuf::from(format!("{}.seq", path.display()));
        attempt(
            &format!("connect to the Unix socket {}", path.display()),
            false,
            either_kind(|kind, is_seq| unix_connect(kind, Some(if is_seq { &seq } else { path }), None)),
        );
    }
    for name in &x.abstract_names {
        let seq = format!("{name}.seq");
        attempt(
            &format!("connect to the abstract Unix socket @{name}"),
            false,
            either_kind(|kind, is_seq| unix_connect(kind, None, Some(if is_seq { &seq } else { name }))),
        );
    }
    if namespaces_only {
        attempt("listen on the loopback and connect to itself", true, loopback_round_trip());
    } else {
        attempt("listen on the loopback and connect to itself", false, loopback_round_trip());
    }
    if sandboxed {
        if let Some(lib) = &x.library {
            attempt(&format!("load the granted library {}", lib.display()), true, dlopen(lib));
        }
        if let Some(lib) = &x.forbidden_library {
            let granted = !x.vendor.is_empty();
            attempt(&format!("load {}", lib.display()), granted, dlopen(lib));
            attempt(&format!("read the bytes of {}", lib.display()), granted, {
                std::fs::File::open(lib).and_then(|mut f| f.read_exact(&mut [0u8; 64]))
            });
            attempt(
                &format!("copy {} into the scratch folder", lib.display()),
                granted,
                // Bytes only (std::fs::copy would also fchmod the copy, which the filter
                // refuses whatever the file).
                std::fs::File::open(lib).and_then(|f| {
                    let mut to = std::fs::File::create(targets.scratch.join("copy.so"))?;
                    std::io::copy(&mut f.take(1 << 20), &mut to).map(drop)
                }),
            );
        }
        if let (Some(var), Some(value)) = (&x.secret_var, &secret) {
            attempt(
                &format!("read ${var} after the scrub"),
                false,
                match std::env::var(var) {
                    Ok(_) => Ok(()),
                    Err(e) => Err(std::io::Error::other(e.to_string())),
                },
            );
            attempt(
                &format!("find ${var}'s value in the kernel's environment block"),
                false,
                secret_in_memory(value.as_bytes()),
            );
        }
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
    spawn_with(exe, Extra { port, ..Extra::default() }, &[])
}

/// The same, with targets set up by the caller, and variables added to the probe's
/// environment.
pub fn spawn_with(exe: &Path, extra: Extra, env: &[(String, String)]) -> Result<ProbeReport, SandboxError> {
    let root = crate::wall::runtime_dir::evaluation_dir()?;
    let scratch = root.path().join("scratch");
    std::fs::create_dir(&scratch).map_err(SandboxError::Io)?;
    let targets = Targets {
        outside: root.path().join("escaped.txt"),
        scratch,
        signal_pid: Some(std::process::id() as i32),
        policy: ProbePolicy::Strict,
        extra,
    };
    let mut cmd = std::process::Command::new(exe);
    crate::toolkit::process::isolate(&mut cmd).args(targets.args()).envs(env.iter().map(|(k, v)| (k, v)));
    let got = crate::toolkit::process::capture(&mut cmd, PROBE_TIMEOUT)
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
    /// What to try beyond the fixed list.
    pub extra: Extra,
    /// A stand-in for the hosting tool, which runs the probe as its child the way ncu
    /// runs the worker (its command line, the probe's appended); empty: the probe is the
    /// tool itself.
    pub host: Vec<OsString>,
    /// What the trampoline itself runs under, e.g. a kernel setting that forbids user
    /// namespaces (tests); empty: nothing.
    pub launcher: Vec<OsString>,
    /// `--allow-unconfined-profiling`.
    pub allow_unconfined: bool,
    /// $HOME for the trampoline and the probe (the arrangement hides it); None: this
    /// process's.
    pub home: Option<PathBuf>,
    /// Variables added to the trampoline's (and so the probe's) environment.
    pub env: Vec<(String, String)>,
}

impl HostedSpec {
    /// A worker's policy under the arrangement, the probe being the tool.
    pub fn worker() -> HostedSpec {
        HostedSpec {
            policy: ProbePolicy::Hosted,
            extra: Extra::default(),
            host: Vec::new(),
            launcher: Vec::new(),
            allow_unconfined: false,
            home: None,
            env: Vec::new(),
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
        signal_pid: Some(std::process::id() as i32),
        policy: spec.policy,
        extra: spec.extra.clone(),
    };
    let report_path = root.path().join("hosting.json");
    let keep: Vec<PathBuf> = std::iter::once(root.path().to_path_buf())
        .chain(spec.extra.library.iter().chain(&spec.extra.forbidden_library).cloned())
        .collect();
    let trampoline = hosted::command_line(exe, &report_path, &keep, spec.allow_unconfined);
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
    crate::toolkit::process::isolate(&mut cmd).args(&line[1..]).current_dir(&targets.scratch);
    if let Some(home) = &spec.home {
        cmd.env("HOME", home);
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    let got = crate::toolkit::process::capture(&mut cmd, PROBE_TIMEOUT)
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
