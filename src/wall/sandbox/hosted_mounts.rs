//! The hosted arrangement's mounts: propagation made private, fresh tmpfs on /tmp,
//! /dev/shm and /var/tmp, the folders to keep that lie under them held open and bound
//! back in at their own paths, and the working directory entered again after.

use super::hosted::{MOUNT, PRIVATE_FOLDERS};
use super::hosted_namespaces::restrictions;
use super::{Layer, SandboxError};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub(super) fn mount(
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

pub(super) struct Mounts {
    pub(super) layer: Layer,
    /// Propagation is private: mounting more (a fresh /proc) cannot reach the host.
    pub(super) private: bool,
}

pub(super) fn private_mounts(keep: &[PathBuf], cwd: Option<&Path>) -> Mounts {
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
