//! Entering the hosted arrangement's namespaces: mount, network and PID unshared, made
//! from a user namespace with this user's ids mapped to themselves unless run as root
//! (who keeps the capabilities ncu needs); the kernel settings that forbid them, named;
//! and the network namespace's own loopback, brought up.

use super::hosted::{NETWORK, USER};
use super::{Layer, SandboxError};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

pub(super) struct Entered {
    pub(super) user: Layer,
    pub(super) kept_root_capabilities: bool,
    /// Whether the mount, network and PID namespaces were made (not yet filled), or why
    /// not: the detail their layers will carry.
    pub(super) unshared: Result<(), String>,
}

fn unshare(flags: libc::c_int) -> Result<(), SandboxError> {
    // SAFETY: plain syscall; this process has a single thread.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(SandboxError::last("unshare"));
    }
    Ok(())
}

pub(super) fn enter_namespaces() -> Entered {
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
pub(super) fn restrictions() -> String {
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

/// `struct ifreq` with the flags member of its union (40 bytes on Linux).
#[repr(C)]
struct InterfaceFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _rest: [u8; 22],
}

pub(super) fn loopback_only() -> Layer {
    match bring_up_loopback() {
        Ok(()) => Layer::on(
            NETWORK,
            "only a loopback of its own, brought up: nothing leaves, and abstract Unix socket names are the namespace's own (the tool's front end reaches its injected code through one)",
        ),
        Err(e) => Layer::on(
            NETWORK,
            format!("only a loopback of its own, which could not be brought up ({e}): nothing leaves"),
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
