//! nightshift's own files on this machine, outside the shared /tmp: the GPU lock files and
//! every evaluation's folder (the request, the worker's scratch folder, the hosted run's
//! report, the sanitizer logs).
//!
//! A file in /tmp can be written by anything that can write /tmp: a candidate run with
//! `--allow-unconfined-profiling`, or another user, who could plant, replace or pre-create
//! a lock or a request. This folder is the user's own and nobody else's (0700):
//! `$XDG_RUNTIME_DIR/nightshift` where the session has one (a per-user tmpfs, cleaned at
//! logout), else `~/.cache/nightshift` (`$XDG_CACHE_HOME/nightshift` when set). No worker
//! can write it either: Landlock grants a worker its scratch folder (and, hosted, the
//! private /tmp, /dev/shm and /var/tmp) and nothing else.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the runtime folder (or a folder in it) cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeDirError {
    /// Neither XDG_RUNTIME_DIR nor HOME says where it could be.
    #[error("no private folder for nightshift's own files: neither XDG_RUNTIME_DIR nor HOME is set (set either; the shared /tmp is not used, as other users and hosted candidates can write it)")]
    Unplaced,
    #[error("cannot create {}: {source}", path.display())]
    Create { path: PathBuf, source: std::io::Error },
    /// Its metadata cannot be read.
    #[error("{}: {source}", path.display())]
    Inspect { path: PathBuf, source: std::io::Error },
    /// It exists but is not a folder of this user.
    #[error("{} is not a folder of user {uid}: nightshift keeps its locks and evaluation files there and needs it to be its own", path.display())]
    NotOurs { path: PathBuf, uid: libc::uid_t },
    #[error("cannot close {} to other users: {source}", path.display())]
    Close { path: PathBuf, source: std::io::Error },
    /// No evaluation folder could be made in `parent`.
    #[error("cannot create a folder in {}: {source}", parent.display())]
    Evaluation { parent: PathBuf, source: std::io::Error },
}

/// The folder, created 0700 if need be.
pub fn root() -> Result<PathBuf, RuntimeDirError> {
    let dir = locate()?;
    ensure_private(&dir)?;
    Ok(dir)
}

/// Where the GPU lock files live.
pub fn locks() -> Result<PathBuf, RuntimeDirError> {
    let dir = root()?.join("locks");
    ensure_private(&dir)?;
    Ok(dir)
}

/// A fresh folder for one evaluation, removed when dropped.
pub fn evaluation_dir() -> Result<tempfile::TempDir, RuntimeDirError> {
    let parent = root()?.join("work");
    ensure_private(&parent)?;
    remove_stale(&parent);
    tempfile::Builder::new()
        .prefix(EVALUATION_PREFIX)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(&parent)
        .map_err(|source| RuntimeDirError::Evaluation { parent, source })
}

const EVALUATION_PREFIX: &str = "eval-";

/// Evaluation folders untouched for this long belong to a process that was killed (no
/// evaluation runs a day): unlike /tmp, nothing else ever clears this folder.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for e in entries.flatten() {
        let stale =
            e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_AFTER));
        if stale && e.file_name().to_string_lossy().starts_with(EVALUATION_PREFIX) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn locate() -> Result<PathBuf, RuntimeDirError> {
    let var = |name: &str| std::env::var_os(name).map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(runtime) = var("XDG_RUNTIME_DIR").filter(|p| own_writable_dir(p)) {
        return Ok(runtime.join("nightshift"));
    }
    if let Some(cache) = var("XDG_CACHE_HOME") {
        return Ok(cache.join("nightshift"));
    }
    if let Some(home) = var("HOME") {
        return Ok(home.join(".cache").join("nightshift"));
    }
    Err(RuntimeDirError::Unplaced)
}

/// A session's runtime folder that is really this user's (a `sudo -E` may hand root
/// another user's).
fn own_writable_dir(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: plain syscalls; the path is NUL-terminated.
    let (me, writable) = unsafe { (libc::geteuid(), libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0) };
    writable && std::fs::metadata(p).is_ok_and(|m| m.is_dir() && m.uid() == me)
}

/// Creates `dir` 0700 (and its missing parents), or checks that the existing one is ours
/// and closed to everyone else, closing it where it is ours but open.
fn ensure_private(dir: &Path) -> Result<(), RuntimeDirError> {
    let path = || dir.to_path_buf();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| RuntimeDirError::Create { path: path(), source })?;
    let meta = std::fs::symlink_metadata(dir).map_err(|source| RuntimeDirError::Inspect { path: path(), source })?;
    // SAFETY: plain syscall.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me {
        return Err(RuntimeDirError::NotOurs { path: path(), uid: me });
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|source| RuntimeDirError::Close { path: path(), source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_folder_of_ours_is_closed_and_a_missing_one_is_made_private() {
        let tmp = tempfile::tempdir().unwrap();
        let made = tmp.path().join("a/b");
        ensure_private(&made).unwrap();
        assert_eq!(std::fs::metadata(&made).unwrap().mode() & 0o777, 0o700);
        std::fs::set_permissions(&made, std::fs::Permissions::from_mode(0o777)).unwrap();
        ensure_private(&made).unwrap();
        assert_eq!(std::fs::metadata(&made).unwrap().mode() & 0o777, 0o700, "reopened folders are closed again");
    }

    #[test]
    fn evaluation_folders_left_by_a_killed_process_go_after_a_day_and_fresh_ones_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let (old, fresh, other) =
            (tmp.path().join("eval-old"), tmp.path().join("eval-fresh"), tmp.path().join("locks"));
        for d in [&old, &fresh, &other] {
            std::fs::create_dir(d).unwrap();
        }
        let long_ago = std::time::SystemTime::now() - 2 * STALE_AFTER;
        for d in [&old, &other] {
            std::fs::File::open(d).unwrap().set_modified(long_ago).unwrap();
        }
        remove_stale(tmp.path());
        assert!(!old.exists(), "a day-old evaluation folder stayed");
        assert!(fresh.exists() && other.exists(), "only stale evaluation folders go");
    }

    #[test]
    fn a_symlink_in_place_of_the_folder_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        let link = tmp.path().join("nightshift");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = ensure_private(&link).unwrap_err();
        assert!(err.to_string().contains("not a folder"), "{err}");
    }
}
