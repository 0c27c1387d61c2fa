//! The run directory. Every file is written whole or not at all (a temporary file in the
//! same folder, synced, then renamed over the target), and the event log is appended one
//! synced line at a time, so a run killed at any instant leaves a directory `--resume`
//! can carry on from. One process at a time holds a run (an advisory lock).
//!
//! A run made with the simulated evaluator says so in every file: a `simulated` field in
//! JSON objects and in every line of the event log, a first comment line in text files.
//! The store alone writes that marker, in one place for files ([`contents`]) and one for
//! log lines ([`RunStore::append`]), and no reader ever strips it:
//! - JSON readers never see it: serde skips a field their type does not name.
//! - The text files the program reads back as its own input are kernel sources (a node's
//!   `kernel.cu`: the generator's parent, the content key, resume, `replay:RUN`,
//!   `best.cu`, the report's diffs). For each, a simulated run keeps the program's copy,
//!   unmarked, under [`SIMULATED_SOURCES`] (a folder whose name says what it holds),
//!   written before the marked file people open ([`RunStore::write_source`]);
//!   [`read_source`] reads that copy where there is one, else the file itself: a run on a
//!   GPU marks nothing.
//! - The other text files the program reads back (a build log for a repair prompt, the raw
//!   counters of a profile) it only shows, to a model or a person, as they are, marker
//!   included.

use super::events::{parse_log, Event, LogError, Record};
use search::NodeId;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub const EVENTS: &str = "events.jsonl";
pub const CONFIG: &str = "run.json";
const LOCK: &str = ".lock";
pub const SIMULATED_NOTE: &str =
    "SIMULATED RUN: no GPU judged these kernels (nightshift's test-only simulated evaluator)";
/// Where a simulated run keeps the program's own, unmarked copies of its kernel sources,
/// at the same relative paths.
pub const SIMULATED_SOURCES: &str = ".simulated-run-sources";

/// Why the run directory cannot be made, held, read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A new run's directory holds files already.
    #[error("{} already exists and is not empty: pass another --out, or --resume {} to carry on", dir.display(), dir.display())]
    NotEmpty { dir: PathBuf },
    /// `--resume` of a folder with no event log.
    #[error("{} is not a nightshift run directory (no {EVENTS})", dir.display())]
    NotARun { dir: PathBuf },
    /// Another process holds the run's lock.
    #[error("{} is in use by another nightshift process", dir.display())]
    InUse { dir: PathBuf },
    #[error("cannot create {}: {source}", path.display())]
    Create { path: PathBuf, source: std::io::Error },
    #[error("cannot open {}: {source}", path.display())]
    Open { path: PathBuf, source: std::io::Error },
    /// The event log, opened to cut a torn last line off; the error alone says it.
    #[error(transparent)]
    Reopen(std::io::Error),
    /// Its torn last line could not be cut off.
    #[error("cannot repair {}: {source}", path.display())]
    Repair { path: PathBuf, source: std::io::Error },
    #[error("the event log lock is poisoned")]
    Poisoned,
    #[error("cannot append to {EVENTS}: {0}")]
    Append(#[source] std::io::Error),
    #[error("cannot read {EVENTS}: {0}")]
    ReadLog(#[source] std::io::Error),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// No temporary file could be made in `dir`.
    #[error("cannot write in {}: {source}", dir.display())]
    WriteIn { dir: PathBuf, source: std::io::Error },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    /// The temporary file could not be renamed over `path`.
    #[error("cannot write {}: {source}", path.display())]
    Persist { path: PathBuf, source: tempfile::PersistError },
    /// `rel`, a file of the run, could not be removed.
    #[error("cannot remove {rel}: {source}")]
    Remove { rel: String, source: std::io::Error },
}

pub struct RunStore {
    dir: PathBuf,
    events: Mutex<File>,
    simulated: bool,
    _lock: File,
}

fn lock(dir: &Path) -> Result<File, StoreError> {
    let path = dir.join(LOCK);
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| StoreError::Open { path, source })?;
    // SAFETY: flock on a file descriptor we own.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r != 0 {
        return Err(StoreError::InUse { dir: dir.to_path_buf() });
    }
    Ok(f)
}

impl RunStore {
    /// Creates a new run directory (it must not exist, or be empty).
    pub fn create(dir: &Path, simulated: bool) -> Result<RunStore, StoreError> {
        if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
            return Err(StoreError::NotEmpty { dir: dir.to_path_buf() });
        }
        std::fs::create_dir_all(dir.join("nodes"))
            .map_err(|source| StoreError::Create { path: dir.to_path_buf(), source })?;
        Self::open_at(dir, simulated)
    }

    /// Opens an existing run for `--resume`.
    pub fn open(dir: &Path, simulated: bool) -> Result<RunStore, StoreError> {
        if !dir.join(EVENTS).is_file() {
            return Err(StoreError::NotARun { dir: dir.to_path_buf() });
        }
        Self::open_at(dir, simulated)
    }

    fn open_at(dir: &Path, simulated: bool) -> Result<RunStore, StoreError> {
        let lock = lock(dir)?;
        let path = dir.join(EVENTS);
        // A line torn by a kill is cut off before anything is appended after it.
        if let Ok(text) = std::fs::read_to_string(&path) {
            if !text.is_empty() && !text.ends_with('\n') {
                let keep = text.rfind('\n').map(|i| i + 1).unwrap_or(0);
                let f = OpenOptions::new().write(true).open(&path).map_err(StoreError::Reopen)?;
                f.set_len(keep as u64).map_err(|source| StoreError::Repair { path: path.clone(), source })?;
            }
        }
        let events = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| StoreError::Open { path, source })?;
        Ok(RunStore { dir: dir.to_path_buf(), events: Mutex::new(events), simulated, _lock: lock })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn simulated(&self) -> bool {
        self.simulated
    }

    pub fn node_dir(&self, id: NodeId) -> PathBuf {
        self.dir.join(node_rel(id))
    }

    /// Appends one event and syncs it to disk before returning.
    pub fn append(&self, event: Event) -> Result<(), StoreError> {
        let record = Record { at: now(), event, simulated: self.simulated };
        let mut line = serde_json::to_string(&record).expect("events serialize");
        line.push('\n');
        let mut f = self.events.lock().map_err(|_| StoreError::Poisoned)?;
        f.write_all(line.as_bytes()).and_then(|_| f.sync_data()).map_err(StoreError::Append)
    }

    /// Writes `rel` (relative to the run directory) atomically, marking it when simulated.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> Result<PathBuf, StoreError> {
        self.put(rel, Content::Text(bytes))
    }

    /// Writes a value as pretty JSON, with a `simulated` field when simulated.
    pub fn write_json<T: serde::Serialize>(&self, rel: &str, value: &T) -> Result<PathBuf, StoreError> {
        self.put(rel, Content::Json(serde_json::to_value(value)?))
    }

    /// Writes a kernel source that the program reads back ([`read_source`]): in a simulated
    /// run, its unmarked copy under [`SIMULATED_SOURCES`] first, then the marked file.
    pub fn write_source(&self, rel: &str, bytes: &[u8]) -> Result<PathBuf, StoreError> {
        if self.simulated {
            write_atomic(&self.dir.join(SIMULATED_SOURCES).join(rel), bytes)?;
        }
        self.write(rel, bytes)
    }

    fn put(&self, rel: &str, content: Content) -> Result<PathBuf, StoreError> {
        let path = self.dir.join(rel);
        write_atomic(&path, &contents(rel, content, self.simulated)?)?;
        Ok(path)
    }

    pub fn read_events(&self) -> Result<Vec<Record>, StoreError> {
        let text = std::fs::read_to_string(self.dir.join(EVENTS)).map_err(StoreError::ReadLog)?;
        Ok(parse_log(&text)?)
    }
}

/// A kernel source of the run in `dir` as the program wrote it ([`RunStore::write_source`]):
/// a simulated run's unmarked copy, else the file itself.
pub fn read_source(dir: &Path, rel: &str) -> std::io::Result<String> {
    match std::fs::read_to_string(dir.join(SIMULATED_SOURCES).join(rel)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::read_to_string(dir.join(rel)),
        read => read,
    }
}

/// `nodes/0007`.
pub fn node_rel(id: NodeId) -> String {
    format!("nodes/{id:04}")
}

pub fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// What a file holds before it is written.
enum Content<'a> {
    Text(&'a [u8]),
    Json(serde_json::Value),
}

/// A file's bytes; the one place a simulated run's marker goes into a file: a `simulated`
/// field in a JSON object, else a first line in the file's own comment syntax (JSON written
/// as text is left as it is).
fn contents(rel: &str, content: Content, simulated: bool) -> Result<Vec<u8>, StoreError> {
    let bytes = match content {
        Content::Json(mut v) => {
            if simulated {
                if let Some(o) = v.as_object_mut() {
                    o.insert("simulated".into(), serde_json::Value::String(SIMULATED_NOTE.into()));
                }
            }
            return Ok(serde_json::to_vec_pretty(&v)?);
        }
        Content::Text(bytes) => bytes,
    };
    if !simulated {
        return Ok(bytes.to_vec());
    }
    let ext = Path::new(rel).extension().and_then(|e| e.to_str()).unwrap_or("");
    let prefix = match ext {
        "cu" | "cuh" | "h" | "c" | "cpp" => format!("// {SIMULATED_NOTE}\n"),
        "json" | "jsonl" => return Ok(bytes.to_vec()),
        "md" => format!("> **{SIMULATED_NOTE}**\n\n"),
        "csv" => format!("# {SIMULATED_NOTE}\n"),
        _ => format!("# {SIMULATED_NOTE}\n"),
    };
    let mut out = prefix.into_bytes();
    out.extend_from_slice(bytes);
    Ok(out)
}

pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|source| StoreError::Create { path: dir.to_path_buf(), source })?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(|source| StoreError::WriteIn { dir: dir.to_path_buf(), source })?;
    tmp.write_all(bytes)
        .and_then(|_| tmp.as_file().sync_data())
        .map_err(|source| StoreError::Write { path: path.to_path_buf(), source })?;
    tmp.persist(path).map_err(|source| StoreError::Persist { path: path.to_path_buf(), source })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_runs_mark_every_file_and_line() {
        let tmp = tempfile::tempdir().unwrap();
        let store = RunStore::create(&tmp.path().join("run"), true).unwrap();
        store.write("nodes/0001/kernel.cu", b"__global__ void k() {}").unwrap();
        store.write_json("run.json", &serde_json::json!({"a": 1})).unwrap();
        store.append(Event::SearchStopped { why: "test".into() }).unwrap();
        let cu = std::fs::read_to_string(store.dir().join("nodes/0001/kernel.cu")).unwrap();
        assert!(cu.starts_with("// SIMULATED RUN"), "{cu}");
        let json = std::fs::read_to_string(store.dir().join("run.json")).unwrap();
        assert!(json.contains("SIMULATED RUN"), "{json}");
        assert!(store.read_events().unwrap()[0].simulated);
    }

    #[test]
    fn the_program_reads_its_sources_back_as_written_in_either_kind_of_run() {
        let tmp = tempfile::tempdir().unwrap();
        let source = "__global__ void k() {}\n";
        for simulated in [true, false] {
            let dir = tmp.path().join(format!("run-{simulated}"));
            let store = RunStore::create(&dir, simulated).unwrap();
            store.write_source("nodes/0001/kernel.cu", source.as_bytes()).unwrap();
            let people = std::fs::read_to_string(dir.join("nodes/0001/kernel.cu")).unwrap();
            assert_eq!(people.starts_with("// SIMULATED RUN"), simulated, "{people}");
            assert_eq!(read_source(&dir, "nodes/0001/kernel.cu").unwrap(), source);
            assert_eq!(dir.join(SIMULATED_SOURCES).is_dir(), simulated);
        }
        let missing = read_source(tmp.path(), "nodes/0009/kernel.cu").unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn a_run_is_held_by_one_process_and_a_torn_line_is_repaired() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let store = RunStore::create(&dir, false).unwrap();
        store.append(Event::SearchStopped { why: "a".into() }).unwrap();
        assert!(RunStore::open(&dir, false).err().unwrap().to_string().contains("in use"));
        assert!(RunStore::create(&dir, false).err().unwrap().to_string().contains("--resume"));
        drop(store);
        let mut f = OpenOptions::new().append(true).open(dir.join(EVENTS)).unwrap();
        f.write_all(b"{\"at\":1,\"ev").unwrap();
        let store = RunStore::open(&dir, false).unwrap();
        store.append(Event::SearchStopped { why: "b".into() }).unwrap();
        let events = store.read_events().unwrap();
        assert_eq!(events.len(), 2, "the torn line is gone, both good ones stay");
    }
}
