//! One GPU, one measurement at a time, across processes: an exclusive `flock` on a file
//! named after the GPU's UUID, shared by every nightshift process of every run of this
//! user on the machine. The orchestrator holds it for the whole of every judge's and
//! standalone worker's run; two `eval`s started together run one after the other instead of timing each other.
//!
//! The file lives in the user's own runtime folder ([`crate::wall::runtime_dir`]), not in /tmp:
//! there nothing else (another user, a candidate run with `--allow-unconfined-profiling`)
//! can remove, replace or pre-create it, which would let two measurements overlap or
//! block every run. The price: two users on one machine no longer wait for each other;
//! the verdict still names other processes NVML sees on the GPU.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Held until dropped (the kernel also drops it if the process dies).
#[derive(Debug)]
pub struct GpuLock {
    _file: File,
    /// How long we waited for another process to finish with the GPU.
    pub waited: Duration,
}

/// The lock file for a device: by UUID where the driver answers, else by ordinal.
pub fn lock_path(device: usize) -> Result<PathBuf, crate::wall::runtime_dir::RuntimeDirError> {
    // Without a driver there is nothing to ask (and cudarc would panic trying).
    let uuid = crate::wall::gpu::driver_present().then(|| crate::wall::gpu::device_uuid(device).ok()).flatten();
    let id = uuid.unwrap_or_else(|| format!("ordinal-{device}"));
    Ok(crate::wall::runtime_dir::locks()?.join(format!("nightshift-{id}.lock")))
}

/// Blocks until this process holds `path` exclusively.
pub fn acquire(path: &std::path::Path) -> std::io::Result<GpuLock> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(path)?;
    let started = Instant::now();
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(GpuLock { _file: file, waited: started.elapsed() });
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_for_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu.lock");
        let first = acquire(&path).unwrap();
        let p = path.clone();
        let second = std::thread::spawn(move || acquire(&p).unwrap().waited);
        std::thread::sleep(Duration::from_millis(300));
        drop(first);
        let waited = second.join().unwrap();
        assert!(waited >= Duration::from_millis(250), "waited only {waited:?}");
    }
}
