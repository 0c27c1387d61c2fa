//! The seccomp filter's report mode, for experiments: with `NIGHTSHIFT_SECCOMP_REPORT=DIR`
//! every refusal traps (SIGSYS) instead of returning at once, and this handler writes the
//! call to `DIR/seccomp-PID.log` (one line: pid, thread, name, number, the errno it gets,
//! the first three arguments) and then answers it with the errno the filter chose (carried
//! in the trap's data). Nothing that was refused becomes allowed: the sandbox is the same,
//! only louder, so a GPU run under it shows every call the allow-list lacks.
//!
//! The log is opened before the sandbox (Landlock keeps the folder closed afterwards) and
//! written with one `write` per line from the handler, which does nothing else a signal
//! handler may not do.

use super::syscalls::Sys;
use super::SandboxError;
use std::os::fd::IntoRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

/// The variable that turns the report mode on, naming the folder for the logs.
pub const REPORT_VAR: &str = "NIGHTSHIFT_SECCOMP_REPORT";

static LOG_FD: AtomicI32 = AtomicI32::new(-1);
static NAMES: OnceLock<Vec<Sys>> = OnceLock::new();

/// The folder the report mode writes to, when it is asked for.
pub(super) fn requested() -> Option<PathBuf> {
    std::env::var_os(REPORT_VAR).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Opens the log, when the report mode is asked for: before the sandbox (Landlock closes
/// the folder). Whether it is open, or why not.
pub(super) fn prepare() -> Option<Result<(), SandboxError>> {
    let dir = requested()?;
    Some(open_log(&dir))
}

/// Whether the log is open.
pub(super) fn ready() -> bool {
    LOG_FD.load(Ordering::SeqCst) >= 0
}

fn open_log(dir: &Path) -> Result<(), SandboxError> {
    if ready() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|source| SandboxError::File { path: dir.to_path_buf(), source })?;
    let path = dir.join(format!("seccomp-{}.log", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|source| SandboxError::File { path: path.clone(), source })?;
    LOG_FD.store(file.into_raw_fd(), Ordering::SeqCst);
    Ok(())
}

/// Installs the SIGSYS handler that writes to the open log.
pub(super) fn install(names: Vec<Sys>) -> Result<(), SandboxError> {
    let _ = NAMES.set(names);
    // SAFETY: a zeroed sigaction with a handler of the SA_SIGINFO shape, installed once.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigsys as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGSYS, &action, std::ptr::null_mut()) != 0 {
            return Err(SandboxError::last("sigaction SIGSYS"));
        }
    }
    Ok(())
}

/// A line built without allocating (the handler may run anywhere).
struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Line {
    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn num(&mut self, mut v: u64, hex: bool) {
        let base = if hex { 16 } else { 10 };
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b"0123456789abcdef"[(v % base) as usize];
            v /= base;
            if v == 0 {
                break;
            }
        }
        if hex {
            self.push(b"0x");
        }
        self.push(&digits[i..]);
    }
}

/// The SIGSYS fields (`struct siginfo`'s `_sigsys`): the syscall number sits after the
/// common header (16 bytes) and the call address (8).
const SI_SYSCALL_OFFSET: usize = 24;

extern "C" fn on_sigsys(_sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel hands a valid siginfo and ucontext for a SA_SIGINFO handler; the
    // reads and the one register write stay inside them.
    unsafe {
        let errno = (*info).si_errno;
        let nr = *((info as *const u8).add(SI_SYSCALL_OFFSET) as *const i32) as i64;
        let uc = context as *mut libc::ucontext_t;
        #[cfg(target_arch = "x86_64")]
        let (args, ret): ([u64; 3], *mut i64) = {
            let g = &mut (*uc).uc_mcontext.gregs;
            (
                [g[libc::REG_RDI as usize] as u64, g[libc::REG_RSI as usize] as u64, g[libc::REG_RDX as usize] as u64],
                &mut g[libc::REG_RAX as usize] as *mut i64,
            )
        };
        #[cfg(target_arch = "aarch64")]
        let (args, ret): ([u64; 3], *mut i64) = {
            let r = &mut (*uc).uc_mcontext.regs;
            ([r[0], r[1], r[2]], &mut r[0] as *mut u64 as *mut i64)
        };
        let mut line = Line { buf: [0; 256], len: 0 };
        line.push(b"nightshift-seccomp pid ");
        line.num(libc::getpid() as u64, false);
        line.push(b" tid ");
        line.num(libc::syscall(libc::SYS_gettid) as u64, false);
        line.push(b" refused ");
        match NAMES.get().and_then(|n| n.iter().find(|s| s.0 == nr)) {
            Some((_, name)) => line.push(name.strip_prefix("SYS_").unwrap_or(name).as_bytes()),
            None => line.push(b"?"),
        }
        line.push(b" nr ");
        line.num(nr as u64, false);
        line.push(b" errno ");
        line.num(errno as u64, false);
        line.push(b" args");
        for a in args {
            line.push(b" ");
            line.num(a, true);
        }
        line.push(b"\n");
        let fd = LOG_FD.load(Ordering::Relaxed);
        if fd >= 0 {
            libc::write(fd, line.buf.as_ptr() as *const libc::c_void, line.len);
        }
        *ret = -(errno as i64);
    }
}
