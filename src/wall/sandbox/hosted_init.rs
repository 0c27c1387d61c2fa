//! The PID namespace's side of the hosted arrangement: the init (PID 1) forked into it,
//! which mounts its own /proc, writes the report, starts the tool and reaps what is
//! orphaned inside, dying with the trampoline; and the trampoline ending the way the tool
//! ended.

use super::hosted::{write_report, Arrangement, Program, PID, REFUSED_EXIT};
use super::hosted_mounts::mount;
use super::{Layer, SandboxError};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::ExitCode;

/// What the init inside the PID namespace needs.
pub(super) struct Below {
    pub(super) program: Program,
    pub(super) report: std::fs::File,
    pub(super) layers: Vec<Layer>,
    pub(super) mounts_private: bool,
    pub(super) allow: bool,
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
pub(super) fn run_below_init(mut below: Below, finish: impl Fn(Vec<Layer>) -> Arrangement) -> ExitCode {
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

    #[test]
    fn the_wait_status_of_an_exit_comes_back_as_the_same_exit_code() {
        assert_eq!(end_like(3 << 8), ExitCode::from(3));
        assert_eq!(end_like(0), ExitCode::from(0));
    }
}
