//! The hosted arrangement's mounts: propagation made private, then fresh tmpfs over every
//! folder where the host keeps what a tool's run must not reach: /tmp, /dev/shm and
//! /var/tmp (other runs' files, other users' sockets), the user's home (keys, tokens,
//! agent sockets such as ~/x.sock) and /run (with /var/run where it is not a link to it:
//! docker.sock, D-Bus, systemd, the user's runtime folder). What must stay reachable is
//! held open before and bound back in at its own path: the folders the orchestrator hands
//! over and reads back, the executable, the tool, the libraries and their folders, the
//! toolkit, LD_LIBRARY_PATH, and /run/nvidia-persistenced. So a checkout, a cache or a
//! toolkit under /tmp or $HOME works hosted as it does elsewhere, while the rest of those
//! folders is out of sight. The working directory is entered again afterwards.
//!
//! A folder to keep that is itself one of the folders to hide (the executable straight in
//! $HOME) is not bound whole: the files asked for are bound one by one instead.

use super::hosted::{MOUNT, PRIVATE_FOLDERS};
use super::hosted_namespaces::restrictions;
use super::libraries::{self, Search};
use super::{Layer, SandboxError};
use std::collections::BTreeSet;
use std::ffi::{CString, OsString};
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

/// Folders no home may be (a service account's home of / or /usr is left alone).
const NOT_A_HOME: &[&str] = &[
    "/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/opt", "/proc", "/run", "/sbin", "/sys", "/usr", "/var",
    "/tmp",
];

/// Where this user's home is: $HOME and the password database's entry.
fn homes() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::env::var_os("HOME").map(PathBuf::from).into_iter().collect();
    // SAFETY: getpwuid_r fills `pwd` with pointers into `buf`, both ours.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 4096];
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        if libc::getpwuid_r(libc::getuid(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) == 0
            && !result.is_null()
            && !pwd.pw_dir.is_null()
        {
            out.push(PathBuf::from(OsString::from(std::ffi::OsStr::from_bytes(
                std::ffi::CStr::from_ptr(pwd.pw_dir).to_bytes(),
            ))));
        }
    }
    out
}

/// The folders the arrangement hides, canonical, outermost only, parents first.
pub(super) fn folders_to_hide() -> Vec<PathBuf> {
    let mut wanted: Vec<PathBuf> = PRIVATE_FOLDERS.iter().map(PathBuf::from).collect();
    wanted.extend(homes().into_iter().filter(|h| h.is_absolute()));
    wanted.push(PathBuf::from("/run"));
    wanted.push(PathBuf::from("/var/run"));
    let mut out: Vec<PathBuf> = Vec::new();
    for w in wanted {
        // A link (/var/run -> /run, /var/tmp -> /tmp) is covered by its target.
        if !std::fs::symlink_metadata(&w).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let Ok(c) = w.canonicalize() else { continue };
        if NOT_A_HOME.iter().any(|n| Path::new(n) == c)
            && !PRIVATE_FOLDERS.iter().chain(&["/run"]).any(|p| Path::new(p) == c)
        {
            continue;
        }
        out.push(c);
    }
    out.sort();
    out.dedup();
    let all = out.clone();
    out.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q)));
    out
}

/// What to bring back: folders (bound whole) and files (bound alone).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Keep {
    pub(super) folders: Vec<PathBuf>,
    pub(super) files: Vec<PathBuf>,
}

/// What the run needs at its own path: `keep` (folders; files bring their folders and,
/// for libraries, the folders of what they need), and of this process's own: its
/// executable, the tool, LD_LIBRARY_PATH, the toolkit, /run/nvidia-persistenced. Only
/// what lies under a folder to hide is returned.
pub(super) fn what_to_keep(keep: &[PathBuf], tool: Option<&Path>, hidden: &[PathBuf]) -> Keep {
    let search = Search::of_this_process();
    let mut folders: Vec<PathBuf> = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    let add_file = |f: &Path, folders: &mut Vec<PathBuf>, files: &mut Vec<PathBuf>| {
        files.push(f.to_path_buf());
        folders.extend(f.parent().map(Path::to_path_buf));
    };
    let mut libs: Vec<PathBuf> = Vec::new();
    for k in keep {
        if k.is_file() {
            add_file(k, &mut folders, &mut files);
            libs.push(k.clone());
        } else {
            folders.push(k.clone());
        }
    }
    if let Ok(exe) = std::env::current_exe() {
        add_file(&exe, &mut folders, &mut files);
        libs.push(exe);
    }
    if let Some(tool) = tool {
        let found = if tool.is_absolute() { Some(tool.to_path_buf()) } else { which::which(tool).ok() };
        for t in found.into_iter().flat_map(|t| [t.clone(), t.canonicalize().unwrap_or(t)]) {
            add_file(&t, &mut folders, &mut files);
            // The tool's installation: bin/ncu's and compute-sanitizer's siblings.
            folders.extend(t.parent().and_then(Path::parent).map(Path::to_path_buf));
        }
    }
    folders.extend(search.ld_library_path.iter().cloned());
    for var in ["NIGHTSHIFT_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"] {
        if let Some(v) = std::env::var_os(var) {
            folders.extend(std::env::split_paths(&v).filter(|p| p.is_absolute()));
        }
    }
    folders.push(PathBuf::from("/run/nvidia-persistenced"));
    // An experiment's seccomp report folder (see `seccomp_report`), written by the worker.
    folders.extend(super::seccomp_report::requested());
    let mut closure = BTreeSet::new();
    libraries::closure(&libs, &search, &mut closure);
    for f in closure {
        add_file(&f, &mut folders, &mut files);
    }
    // Both the paths as given and where they lead.
    let both = |v: Vec<PathBuf>| -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> =
            v.iter().flat_map(|p| [p.clone(), p.canonicalize().unwrap_or_else(|_| p.clone())]).collect();
        out.retain(|p| p.is_absolute() && p.exists());
        out.sort();
        out.dedup();
        out
    };
    let under_hidden = |p: &Path| hidden.iter().any(|h| p.starts_with(h) && p != h);
    let is_or_holds_hidden = |p: &Path| hidden.iter().any(|h| h.starts_with(p));
    let mut kept_folders: Vec<PathBuf> =
        both(folders).into_iter().filter(|f| under_hidden(f) && !is_or_holds_hidden(f)).collect();
    let outer = kept_folders.clone();
    kept_folders.retain(|f| !outer.iter().any(|o| o != f && f.starts_with(o)));
    let kept_files: Vec<PathBuf> =
        both(files).into_iter().filter(|f| under_hidden(f) && !kept_folders.iter().any(|k| f.starts_with(k))).collect();
    Keep { folders: kept_folders, files: kept_files }
}

/// The tmpfs options for a hidden folder: the shared temporary folders stay
/// world-writable and sticky; a home is its owner's alone.
fn tmpfs_options(folder: &Path) -> &'static str {
    if PRIVATE_FOLDERS.iter().any(|p| Path::new(p) == folder) {
        "mode=1777"
    } else if folder.starts_with("/run") || folder.starts_with("/var/run") {
        "mode=0755"
    } else {
        "mode=0700"
    }
}

pub(super) fn private_mounts(hidden: &[PathBuf], keep: &Keep, cwd: Option<&Path>) -> Mounts {
    let off = |why: String, private: bool| Mounts { layer: Layer::off(MOUNT, why), private };
    if let Err(e) = mount("none", Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None) {
        return off(format!("mount propagation could not be made private ({e}){}", restrictions()), false);
    }
    // Held open before the tmpfs mounts hide them, bound back in after.
    let mut held: Vec<(&Path, OwnedFd, bool)> = Vec::new();
    for (path, is_dir) in keep.folders.iter().map(|f| (f, true)).chain(keep.files.iter().map(|f| (f, false))) {
        match open_path(path, is_dir) {
            Ok(fd) => held.push((path, fd, is_dir)),
            Err(e) => return off(format!("cannot hold {} open: {e}", path.display()), true),
        }
    }
    for folder in hidden {
        let flags = libc::MS_NOSUID | libc::MS_NODEV;
        if let Err(e) = mount("tmpfs", folder, Some("tmpfs"), flags, Some(tmpfs_options(folder))) {
            return off(format!("no private tmpfs on {} ({e}){}", folder.display(), restrictions()), true);
        }
        if folder == Path::new("/run") {
            // Tools that lock under /run/lock find it, empty and private.
            let _ = std::fs::DirBuilder::new().mode(0o1777).create("/run/lock");
        }
    }
    for (path, fd, is_dir) in &held {
        let source = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let made = if *is_dir {
            std::fs::DirBuilder::new().recursive(true).mode(0o755).create(path)
        } else {
            path.parent()
                .map_or(Ok(()), |p| std::fs::DirBuilder::new().recursive(true).mode(0o755).create(p))
                .and_then(|_| std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(path).map(drop))
        };
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
    let names: Vec<String> = hidden.iter().map(|p| p.display().to_string()).collect();
    let kept = if held.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = held.iter().map(|(p, _, _)| p.display().to_string()).collect();
        format!("; {} bound back in at the same path", list.join(", "))
    };
    Mounts {
        layer: Layer::on(
            MOUNT,
            format!(
                "fresh private tmpfs on {} (propagation private): the host's temporary files, the user's home and the runtime sockets are out of sight, and what the tool and the worker write there vanishes with the run{kept}",
                names.join(", ")
            ),
        ),
        private: true,
    }
}

fn open_path(path: &Path, dir: bool) -> Result<OwnedFd, SandboxError> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| SandboxError::NulPath)?;
    let flags = libc::O_PATH | libc::O_CLOEXEC | if dir { libc::O_DIRECTORY } else { 0 };
    // SAFETY: plain syscall on a NUL-terminated path; the descriptor is owned below.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(SandboxError::Io(std::io::Error::last_os_error()));
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_under_hidden_folders_are_bound_and_a_hidden_folder_itself_never_is() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        let project = home.join("project");
        std::fs::create_dir_all(project.join("sub")).unwrap();
        let lone = home.join("tool.bin");
        std::fs::write(&lone, b"").unwrap();
        let outside = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let hidden = vec![home.clone()];
        let keep = what_to_keep(
            &[project.clone(), project.join("sub"), lone.clone(), home.clone(), outside.path().to_path_buf()],
            None,
            &hidden,
        );
        assert!(keep.folders.contains(&project), "{keep:?}");
        assert!(!keep.folders.contains(&project.join("sub")), "nested keeps fold into their parent: {keep:?}");
        assert!(!keep.folders.contains(&home), "the hidden folder itself is never bound: {keep:?}");
        assert!(keep.files.contains(&lone), "a file straight in the hidden folder is bound alone: {keep:?}");
        assert!(!keep.folders.iter().any(|f| f.starts_with(outside.path())), "nothing outside the hidden folders");
    }

    #[test]
    fn the_home_and_run_are_hidden_but_never_the_root() {
        let hidden = folders_to_hide();
        assert!(hidden.iter().any(|h| h == Path::new("/tmp")), "{hidden:?}");
        assert!(!hidden.iter().any(|h| h == Path::new("/")), "{hidden:?}");
        if Path::new("/run").is_dir() {
            assert!(hidden.iter().any(|h| h == Path::new("/run")), "{hidden:?}");
        }
    }
}
