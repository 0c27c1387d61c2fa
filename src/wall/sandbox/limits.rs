//! rlimits: no core dumps, bounded files, and CPU time as a backstop to the deadline.

use super::{Layer, Policy};

fn set(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    let lim = libc::rlimit { rlim_cur: value as libc::rlim_t, rlim_max: value as libc::rlim_t };
    // SAFETY: plain syscall with a valid struct.
    if unsafe { libc::setrlimit(resource, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn apply(policy: &Policy) -> Layer {
    let result = set(libc::RLIMIT_CORE, 0)
        .and_then(|_| set(libc::RLIMIT_FSIZE, policy.max_file_bytes))
        .and_then(|_| set(libc::RLIMIT_CPU, policy.cpu_seconds.max(1)));
    match result {
        Ok(()) => Layer::on(
            "rlimits",
            format!(
                "no core dumps, files up to {} MiB, {} s of CPU time",
                policy.max_file_bytes >> 20,
                policy.cpu_seconds
            ),
        ),
        Err(e) => Layer::off("rlimits", e.to_string()),
    }
}
