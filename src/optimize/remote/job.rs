//! What travels to a remote lane and back: a job names what to do (judge, re-verify,
//! profile, the baseline), carries the task folder and the candidate as text (the host
//! may share no filesystem with the orchestrator), and the settings every judgment of
//! the run starts from. The reply is a verdict, a profile's counters, or why the lane
//! could not do the job at all.

use crate::run::config::SimSettings;
use crate::wall::Verdict;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// A task folder larger than this is not shipped: a task is sources and a toml.
pub const MAX_TASK_BYTES: u64 = 16 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaneJob {
    pub task: TaskFiles,
    pub kind: JobKind,
    /// The kernel to judge or profile; none for the baseline.
    pub candidate: Option<CandidateSource>,
    pub settings: LaneSettings,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum JobKind {
    /// The baseline checked against the reference and timed against itself.
    Baseline,
    Judge,
    FinalCheck {
        seeds: u32,
        sanitize: bool,
    },
    Profile,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CandidateSource {
    /// The file name it is built under (`kernel.cu`).
    pub file_name: String,
    pub source: String,
    #[serde(default)]
    pub defines: BTreeMap<String, String>,
    #[serde(default)]
    pub flags: Vec<String>,
}

/// What every judgment of the run starts from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaneSettings {
    pub simulated: Option<SimSettings>,
    pub timeout_s: Option<f64>,
    pub build_timeout_s: Option<f64>,
    pub input_seed_base: u64,
    pub energy: bool,
    pub allow_unconfined_profiling: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "reply")]
pub enum LaneReply {
    Verdict {
        verdict: Box<Verdict>,
    },
    Profile {
        csv: Option<String>,
        note: String,
        seconds: f64,
    },
    /// The lane could not do the job: no verdict on the candidate. `env` when the lane's
    /// host is at fault (no toolkit or GPU there, a task that does not load), which stops
    /// the run as a local GPU's failure does; otherwise a failure of this job alone.
    Failed {
        message: String,
        env: bool,
    },
}

/// A task folder as text, by path relative to it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskFiles {
    /// The folder's own name (the task is loaded from a folder of this name).
    pub name: String,
    pub files: BTreeMap<String, String>,
}

impl TaskFiles {
    /// Every regular file under `dir` but hidden ones and run folders, as UTF-8 text; a
    /// symbolic link is refused, since what it points to would not travel.
    pub fn read(dir: &Path) -> Result<TaskFiles, String> {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("task").to_string();
        let mut files = BTreeMap::new();
        let mut total = 0u64;
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let entries = std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
            for entry in entries {
                let entry = entry.map_err(|e| format!("{}: {e}", d.display()))?;
                let path = entry.path();
                let file_name = entry.file_name();
                let hidden = file_name.to_string_lossy().starts_with('.');
                let kind = entry.file_type().map_err(|e| format!("{}: {e}", path.display()))?;
                if hidden || (kind.is_dir() && file_name == "runs") {
                    continue;
                }
                if kind.is_symlink() {
                    return Err(format!(
                        "{}: a symbolic link: remote lanes take task folders of plain files (copy what it points to)",
                        path.display()
                    ));
                }
                if kind.is_dir() {
                    stack.push(path);
                } else if kind.is_file() {
                    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                    total += bytes.len() as u64;
                    if total > MAX_TASK_BYTES {
                        return Err(format!(
                            "{}: the task folder holds more than {} MiB, too much to send to a remote lane",
                            dir.display(),
                            MAX_TASK_BYTES >> 20
                        ));
                    }
                    let text = String::from_utf8(bytes).map_err(|_| {
                        format!("{}: not UTF-8 text: remote lanes take task folders of text files", path.display())
                    })?;
                    let rel = path.strip_prefix(dir).map_err(|e| e.to_string())?;
                    files.insert(rel.to_string_lossy().replace('\\', "/"), text);
                }
            }
        }
        Ok(TaskFiles { name, files })
    }

    /// Writes the folder under `root` and returns its path. A path that climbs out of the
    /// folder or is absolute is refused: the job comes over the network.
    pub fn write(&self, root: &Path) -> Result<PathBuf, String> {
        let name = safe_relative(&self.name)
            .filter(|p| p.components().count() == 1)
            .ok_or_else(|| format!("the task's folder name {:?} is not a plain name", self.name))?;
        let dir = root.join(name);
        for (rel, text) in &self.files {
            let rel = safe_relative(rel).ok_or_else(|| format!("the task file {rel:?} leaves its folder"))?;
            let path = dir.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(dir)
    }
}

impl TaskFiles {
    /// A hash of the folder's name and every file, path and text: two jobs of one task
    /// have the same key, and a changed byte gives another.
    pub fn content_key(&self) -> String {
        let mut h = Sha256::new();
        for part in
            std::iter::once(self.name.as_str()).chain(self.files.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]))
        {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        h.finalize().iter().take(12).map(|b| format!("{b:02x}")).collect()
    }

    /// The folder at `root/<content key>/<name>`, written once and shared by every job of
    /// this task on this host (lanes of one host included): the build cache keys on the
    /// task's path, so a folder of its own per job would rebuild the baseline, the
    /// reference and every candidate on every job. It is written aside and renamed into
    /// place, so a folder found there is whole, and read back file for file before use:
    /// one that does not hold exactly these files is written again, never built from.
    pub fn place(&self, root: &Path) -> Result<PathBuf, String> {
        match self.place_once(root)? {
            Some(dir) => Ok(dir),
            // Not what its name says (a lane killed mid-way on a file system without atomic
            // rename, or a hand edit): written again from the job's files, once.
            None => {
                let entry = root.join(self.content_key());
                // Another lane of this host may be doing the same: its removal is ours.
                match std::fs::remove_dir_all(&entry) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(format!("{}: {e}", entry.display()))
                    }
                    _ => {}
                }
                self.place_once(root)?.ok_or_else(|| {
                    format!(
                        "{}: this lane's copy of the task does not hold the job's files, even written again",
                        entry.display()
                    )
                })
            }
        }
    }

    fn place_once(&self, root: &Path) -> Result<Option<PathBuf>, String> {
        let entry = root.join(self.content_key());
        if !entry.exists() {
            std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
            let aside = tempfile::Builder::new()
                .prefix(".writing-")
                .tempdir_in(root)
                .map_err(|e| format!("{}: {e}", root.display()))?;
            self.write(aside.path())?;
            // Another lane of this host may have placed it meanwhile: either folder is whole.
            match std::fs::rename(aside.path(), &entry) {
                Ok(()) => std::mem::forget(aside),
                Err(e) if !entry.exists() => return Err(format!("{}: {e}", entry.display())),
                Err(_) => {}
            }
        }
        let dir = entry.join(&self.name);
        match TaskFiles::read(&dir) {
            Ok(found) => Ok((found == *self).then_some(dir)),
            Err(_) if dir.exists() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// `rel` as a path of plain names below its folder, or None.
fn safe_relative(rel: &str) -> Option<PathBuf> {
    let p = Path::new(rel);
    let plain = !rel.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)));
    plain.then(|| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_folder_goes_and_comes_back_file_for_file() {
        let src = tempfile::tempdir().unwrap();
        let task = src.path().join("softmax");
        std::fs::create_dir_all(task.join("include")).unwrap();
        std::fs::create_dir_all(task.join("runs/old")).unwrap();
        std::fs::write(task.join("task.toml"), "[task]\n").unwrap();
        std::fs::write(task.join("include/helper.cuh"), "#pragma once\n").unwrap();
        std::fs::write(task.join("runs/old/best.cu"), "left behind").unwrap();
        std::fs::write(task.join(".hidden"), "left behind").unwrap();
        let files = TaskFiles::read(&task).unwrap();
        assert_eq!(files.name, "softmax");
        assert_eq!(files.files.keys().collect::<Vec<_>>(), ["include/helper.cuh", "task.toml"]);
        let dst = tempfile::tempdir().unwrap();
        let written = files.write(dst.path()).unwrap();
        assert_eq!(written, dst.path().join("softmax"));
        assert_eq!(std::fs::read_to_string(written.join("include/helper.cuh")).unwrap(), "#pragma once\n");
    }

    #[test]
    fn jobs_of_one_task_share_one_placed_folder_and_a_changed_file_gets_its_own() {
        let root = tempfile::tempdir().unwrap();
        let mut files =
            TaskFiles { name: "softmax".into(), files: [("task.toml".to_string(), "[task]\n".to_string())].into() };
        let first = files.place(root.path()).unwrap();
        let again = files.place(root.path()).unwrap();
        assert_eq!(first, again, "a second job of the same task reuses the folder (and so the build cache)");
        assert!(first.ends_with("softmax"));
        files.files.insert("kernel.cu".into(), "__global__ void k() {}\n".into());
        let changed = files.place(root.path()).unwrap();
        assert_ne!(changed, first);
        assert_eq!(std::fs::read_to_string(changed.join("kernel.cu")).unwrap(), "__global__ void k() {}\n");
        // Nothing half-written is left beside the entries.
        let names: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_placed_folder_that_does_not_hold_its_files_is_written_again() {
        let root = tempfile::tempdir().unwrap();
        let files = TaskFiles { name: "t".into(), files: [("task.toml".to_string(), "[task]\n".to_string())].into() };
        let dir = files.place(root.path()).unwrap();
        std::fs::write(dir.join("task.toml"), "[task]\nchanged = true\n").unwrap();
        assert_eq!(files.place(root.path()).unwrap(), dir, "written again from the job's files");
        assert_eq!(std::fs::read_to_string(dir.join("task.toml")).unwrap(), "[task]\n");
        std::fs::write(dir.join("extra.h"), "#define SHADOW 1\n").unwrap();
        files.place(root.path()).unwrap();
        assert!(!dir.join("extra.h").exists(), "an extra header could shadow an include");
    }

    #[test]
    fn a_symbolic_link_in_the_task_folder_is_refused_not_skipped() {
        let src = tempfile::tempdir().unwrap();
        let task = src.path().join("t");
        std::fs::create_dir_all(&task).unwrap();
        std::fs::write(src.path().join("shared.cuh"), "x").unwrap();
        std::os::unix::fs::symlink(src.path().join("shared.cuh"), task.join("shared.cuh")).unwrap();
        let e = TaskFiles::read(&task).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn a_job_cannot_write_outside_its_folder() {
        let dst = tempfile::tempdir().unwrap();
        for bad in ["../escape.cu", "/etc/passwd", "a/../../b", ""] {
            let files = TaskFiles { name: "t".into(), files: [(bad.to_string(), "x".to_string())].into() };
            assert!(files.write(dst.path()).is_err(), "{bad:?} was written");
        }
        for bad_name in ["..", "a/b", "/tmp"] {
            let files = TaskFiles { name: bad_name.into(), files: BTreeMap::new() };
            assert!(files.write(dst.path()).is_err(), "folder {bad_name:?} was accepted");
        }
    }

    #[test]
    fn jobs_and_replies_read_back_as_written() {
        let job = LaneJob {
            task: TaskFiles { name: "t".into(), files: [("task.toml".into(), "[task]".into())].into() },
            kind: JobKind::FinalCheck { seeds: 8, sanitize: true },
            candidate: Some(CandidateSource {
                file_name: "kernel.cu".into(),
                source: "__global__ void k() {}".into(),
                defines: [("BLOCK".into(), "256".into())].into(),
                flags: vec!["-maxrregcount=64".into()],
            }),
            settings: LaneSettings {
                simulated: Some(SimSettings { delay_ms: 5 }),
                timeout_s: None,
                build_timeout_s: Some(30.0),
                input_seed_base: 7,
                energy: false,
                allow_unconfined_profiling: false,
            },
        };
        let back: LaneJob = serde_json::from_str(&serde_json::to_string(&job).unwrap()).unwrap();
        assert_eq!(back.kind, JobKind::FinalCheck { seeds: 8, sanitize: true });
        assert_eq!(back.candidate.unwrap().defines["BLOCK"], "256");
        let reply = LaneReply::Failed { message: "no nvcc".into(), env: true };
        let text = serde_json::to_string(&reply).unwrap();
        assert!(matches!(serde_json::from_str::<LaneReply>(&text).unwrap(), LaneReply::Failed { env: true, .. }));
        let reply = LaneReply::Profile { csv: None, note: "simulated".into(), seconds: 0.5 };
        let text = serde_json::to_string(&reply).unwrap();
        assert!(matches!(serde_json::from_str::<LaneReply>(&text).unwrap(), LaneReply::Profile { .. }), "{text}");
    }
}
