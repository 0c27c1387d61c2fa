//! What a build process holds besides files: no new privileges, no capabilities (root
//! included: a build run as root gets none back at exec), a fresh empty session keyring,
//! and rlimits (memory, file size, CPU time, no core dumps).

use super::policy::Policy;
use libc::c_ulong;

/// prctl(option, arg, 0, 0, 0), every argument at its full width.
fn prctl(option: libc::c_int, arg: c_ulong) -> libc::c_int {
    let zero: c_ulong = 0;
    // SAFETY: prctl with plain integer arguments, on ourselves.
    unsafe { libc::prctl(option, arg, zero, zero, zero) }
}

/// Sets no_new_privs: nothing the build runs gains privileges at exec (setuid, file
/// capabilities). Landlock and seccomp need it anyway.
pub(super) fn no_new_privs() -> Result<String, String> {
    if prctl(libc::PR_SET_NO_NEW_PRIVS, 1) != 0 {
        return Err(format!("prctl(PR_SET_NO_NEW_PRIVS): {}", std::io::Error::last_os_error()));
    }
    Ok("set".into())
}

/// Replaces the session keyring with a new, empty, anonymous one: keys the user's session
/// holds are out of reach even before seccomp refuses keyctl.
pub(super) fn fresh_keyring() -> Result<String, String> {
    const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;
    // SAFETY: keyctl(JOIN_SESSION_KEYRING, NULL) takes no pointer but the null name.
    let id = unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, std::ptr::null::<libc::c_char>()) };
    if id < 0 {
        return Err(format!(
            "keyctl(JOIN_SESSION_KEYRING): {} (seccomp refuses every keyctl call anyway)",
            std::io::Error::last_os_error()
        ));
    }
    Ok("a fresh empty session keyring".into())
}

fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    let lim = libc::rlimit { rlim_cur: value as libc::rlim_t, rlim_max: value as libc::rlim_t };
    // SAFETY: plain syscall with a valid struct.
    if unsafe { libc::setrlimit(resource, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Soft and hard limits alike: nothing in the build can raise them again.
pub(super) fn limits(policy: &Policy) -> Result<String, String> {
    set_limit(libc::RLIMIT_CORE, 0)
        .and_then(|_| set_limit(libc::RLIMIT_AS, policy.memory_bytes))
        .and_then(|_| set_limit(libc::RLIMIT_FSIZE, policy.file_bytes))
        .and_then(|_| set_limit(libc::RLIMIT_CPU, policy.cpu_seconds.max(1)))
        .map_err(|e| format!("setrlimit: {e}"))?;
    Ok(format!(
        "{} MiB of address space, files up to {} MiB, {} s of CPU per process, no core dumps",
        policy.memory_bytes >> 20,
        policy.file_bytes >> 20,
        policy.cpu_seconds
    ))
}

/// securebits: root is not given capabilities at exec (NOROOT), a uid change keeps none
/// (NO_SETUID_FIXUP), nothing may be raised into the ambient set, each bit locked.
const SECUREBITS: c_ulong = 0b1110_1111;

/// Drops every capability, for good: the bounding set emptied and root's exec-time grant
/// switched off (where this process may: root), the ambient, inheritable, permitted and
/// effective sets cleared.
pub(super) fn drop_capabilities() -> Result<String, String> {
    let mut bounding_emptied = true;
    for cap in 0..64 {
        // EINVAL past the last capability.
        if prctl(libc::PR_CAPBSET_DROP, cap) != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINVAL) {
                bounding_emptied = false;
            }
            break;
        }
    }
    let securebits = prctl(libc::PR_SET_SECUREBITS, SECUREBITS) == 0;
    // Fails only where ambient capabilities do not exist (before Linux 4.3): none to clear.
    let _ = prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as c_ulong);
    crate::wall::sandbox::capset_none().map_err(|e| format!("capset: {e}"))?;
    if crate::wall::sandbox::capabilities_held().map_err(|e| format!("capget: {e}"))? {
        return Err("capabilities remain after capset".into());
    }
    Ok(if bounding_emptied && securebits {
        "none, and none at exec (bounding set emptied, root's grant off)".into()
    } else {
        "none (the bounding set stays: not root; no_new_privs stops any gain at exec)".into()
    })
}
