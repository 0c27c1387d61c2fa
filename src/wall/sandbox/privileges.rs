//! What a worker holds by who it is, given up before the other layers go up: the user's
//! session keyring (replaced by a fresh, empty, anonymous one; seccomp then forbids every
//! keyring call, so no key of the user's is within reach even by serial number) and every
//! capability (bounding set, ambient, inheritable, permitted, effective), with
//! no_new_privs set, whether the worker runs as root or not.
//!
//! Root without capabilities is still uid 0: it owns the host's root-owned files and may
//! signal or set the limits of root's processes by the ordinary permission checks. Those
//! are Landlock's (files) and seccomp's (signals, limits, file modes) to refuse; this
//! layer takes away what no filter could see: CAP_SYS_ADMIN, CAP_DAC_OVERRIDE,
//! CAP_MKNOD, CAP_SYS_PTRACE and the rest.

use super::Layer;

const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;

/// Joins a fresh anonymous session keyring: the user's session keyring (and the user
/// keyring it links) are no longer this process's.
pub(super) fn fresh_keyring() -> Layer {
    // SAFETY: keyctl with a null name takes no pointer the kernel writes to.
    let serial =
        unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, std::ptr::null::<libc::c_char>()) };
    if serial >= 0 {
        return Layer::on(
            "keyring",
            format!("a fresh, empty session keyring (serial {serial}); no keyring call is allowed after it (seccomp)"),
        );
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        // No keyrings in this kernel, or none for this process (a container's own seccomp
        // profile refuses keyctl): no key can be reached either.
        Some(libc::ENOSYS) => Layer::on("keyring", "this kernel has no keyrings: no key to reach"),
        Some(libc::EPERM) | Some(libc::EACCES) => {
            Layer::on("keyring", format!("keyring calls are refused to this process already ({e}): no key to reach"))
        }
        _ => Layer::off("keyring", format!("no fresh session keyring ({e}); seccomp still refuses every keyring call")),
    }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

fn capget() -> std::io::Result<[CapData; 2]> {
    let mut header = CapHeader { version: CAPABILITY_VERSION_3, pid: 0 };
    let mut data = [CapData::default(); 2];
    // SAFETY: a v3 header and the two data words the v3 call fills.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(data)
}

/// Whether any capability is still held in the effective, permitted or inheritable set.
pub(crate) fn capabilities_held() -> std::io::Result<bool> {
    Ok(capget()?.iter().any(|w| w.effective | w.permitted | w.inheritable != 0))
}

/// Clears the effective, permitted and inheritable sets (the worker's and a build's).
pub(crate) fn capset_none() -> std::io::Result<()> {
    let mut header = CapHeader { version: CAPABILITY_VERSION_3, pid: 0 };
    let data = [CapData::default(); 2];
    // SAFETY: a v3 header and two zeroed data words: drop everything.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The highest capability number this kernel knows.
fn last_cap() -> u32 {
    if let Some(n) = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap").ok().and_then(|s| s.trim().parse().ok()) {
        return n;
    }
    // SAFETY: PR_CAPBSET_READ only reads.
    (0..64)
        .take_while(|c| unsafe { libc::prctl(libc::PR_CAPBSET_READ, *c as libc::c_ulong, 0, 0, 0) } >= 0)
        .last()
        .unwrap_or(40)
}

/// Drops every capability and sets no_new_privs.
pub(super) fn drop_capabilities() -> Layer {
    let mut kept_bounding = 0;
    let mut bounding_error = None;
    for cap in 0..=last_cap() {
        // SAFETY: prctl on this process's own bounding set.
        unsafe {
            if libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) == 1
                && libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0
            {
                kept_bounding += 1;
                bounding_error.get_or_insert_with(std::io::Error::last_os_error);
            }
        }
    }
    // SAFETY: prctl on this process; EINVAL on kernels without ambient capabilities (< 4.3),
    // which then have none to clear.
    unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0) };
    let set = capset_none();
    // SAFETY: prctl on this process.
    let nnp = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == 0;
    let left = capabilities_held();
    // SAFETY: a read-only prctl.
    let ambient = unsafe {
        (0..=last_cap()).any(|c| {
            libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_IS_SET as libc::c_ulong, c as libc::c_ulong, 0, 0)
                == 1
        })
    };
    match (set, left, nnp) {
        (Ok(()), Ok(false), true) if !ambient => {
            let bounding = if kept_bounding == 0 {
                "bounding set emptied".to_string()
            } else {
                format!(
                    "{kept_bounding} left in the bounding set ({}), which only exec could use and exec is refused",
                    bounding_error.map(|e| e.to_string()).unwrap_or_default()
                )
            };
            Layer::on("capabilities", format!("none held (effective, permitted, inheritable, ambient empty; {bounding}); no_new_privs set"))
        }
        (set, left, nnp) => Layer::off(
            "capabilities",
            format!(
                "could not drop them all (capset: {}; left: {}; ambient left: {ambient}; no_new_privs: {nnp}); seccomp and Landlock still hold",
                set.err().map(|e| e.to_string()).unwrap_or_else(|| "ok".into()),
                match left {
                    Ok(l) => l.to_string(),
                    Err(e) => e.to_string(),
                }
            ),
        ),
    }
}
