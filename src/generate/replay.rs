//! `replay:DIR`: proposals read from files, issued in order to whatever node the search
//! selects. DIR is either a folder of replies (`*.cu` kernels, or `*.md`/`*.txt` model
//! replies parsed like live ones), sorted by name, or an earlier run directory, whose
//! nodes are re-issued in node order with the macros and flags they were built with: the
//! way to re-judge a run's proposals on another GPU. A `.cu` file may name its technique
//! in a `// technique: TAG` line.

use super::llm::reply;
use super::{Kernel, Proposal, Request};
use crate::run::events::LogError;
use crate::run::log::RunLog;
use crate::run::store::{node_rel, read_source};
use regex::Regex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;

/// Why a replay source gives no proposals.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A reply or kernel file cannot be read.
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("replay folder {}: {source}", dir.display())]
    Folder { dir: PathBuf, source: std::io::Error },
    /// The run directory's event log cannot be read; the error alone says it.
    #[error(transparent)]
    ReadLog(std::io::Error),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("{}: no replies to replay (expected .cu, .md or .txt files, or a run directory)", dir.display())]
    Empty { dir: PathBuf },
}

#[derive(Debug, Clone)]
enum Item {
    Kernel(Kernel),
    Reply { name: String, text: String },
}

pub struct Replay {
    items: Vec<Item>,
    next: AtomicUsize,
}

static TECHNIQUE_COMMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?im)^\s*//\s*technique\s*:\s*(.+?)\s*$").unwrap());

fn read(path: &Path) -> Result<String, ReplayError> {
    std::fs::read_to_string(path).map_err(|source| ReplayError::Read { path: path.to_path_buf(), source })
}

fn kernel_file(path: &Path) -> Result<Kernel, ReplayError> {
    let source = read(path)?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("replay");
    let technique = TECHNIQUE_COMMENT.captures(&source).map(|c| reply::tag(&c[1])).unwrap_or_else(|| reply::tag(stem));
    Ok(Kernel { source, defines: Default::default(), flags: Vec::new(), technique, tool: None })
}

impl Replay {
    pub fn load(dir: &Path) -> Result<Replay, ReplayError> {
        let items =
            if dir.join(crate::run::store::EVENTS).is_file() { Self::from_run(dir)? } else { Self::from_folder(dir)? };
        if items.is_empty() {
            return Err(ReplayError::Empty { dir: dir.to_path_buf() });
        }
        Ok(Replay { items, next: AtomicUsize::new(0) })
    }

    fn from_folder(dir: &Path) -> Result<Vec<Item>, ReplayError> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|source| ReplayError::Folder { dir: dir.to_path_buf(), source })?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file() && matches!(p.extension().and_then(|x| x.to_str()), Some("cu" | "md" | "txt")))
            .collect();
        files.sort();
        files
            .iter()
            .map(|p| match p.extension().and_then(|x| x.to_str()) {
                Some("cu") => kernel_file(p).map(Item::Kernel),
                _ => read(p).map(|text| Item::Reply { name: p.display().to_string(), text }),
            })
            .collect()
    }

    fn from_run(dir: &Path) -> Result<Vec<Item>, ReplayError> {
        let text = std::fs::read_to_string(dir.join(crate::run::store::EVENTS)).map_err(ReplayError::ReadLog)?;
        let mut items = Vec::new();
        // A reply that held no kernel is not among the kernels.
        for p in RunLog::parse(&text)?.kernels {
            let path = dir.join(node_rel(p.id)).join("kernel.cu");
            let source = read_source(dir, &format!("{}/kernel.cu", node_rel(p.id)))
                .map_err(|source| ReplayError::Read { path, source })?;
            items.push(Item::Kernel(Kernel {
                source,
                defines: p.candidate.defines,
                flags: p.candidate.flags,
                technique: p.technique,
                tool: p.tool,
            }));
        }
        Ok(items)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Skips one item (already issued before a resume).
    pub fn skip_one(&self) {
        self.next.fetch_add(1, Ordering::SeqCst);
    }

    pub fn propose(&self, req: &Request) -> Proposal {
        let i = self.next.fetch_add(1, Ordering::SeqCst);
        match self.items.get(i) {
            None => Proposal::Stop(format!("the replay is exhausted ({} proposals issued)", self.items.len())),
            Some(Item::Kernel(k)) => Proposal::Kernel(k.clone()),
            Some(Item::Reply { name, text }) => match reply::parse(text, &req.task.entry, false) {
                Ok(p) => Proposal::Kernel(Kernel {
                    source: p.code,
                    defines: Default::default(),
                    flags: Vec::new(),
                    technique: p.technique,
                    tool: p.tool,
                }),
                Err(problem) => {
                    Proposal::Failed { class: problem.class, message: format!("{name}: {}", problem.message) }
                }
            },
        }
    }
}
