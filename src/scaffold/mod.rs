//! `nightshift init`: from a production .cu file to a task directory. It finds the
//! `extern "C"` launcher ([`signature`]), copies the kernel and the headers it includes
//! ([`includes`]), reads each pointer's length from the kernels' indexing
//! ([`rewrite::extent`]), writes a task.toml whose guesses are all commented
//! ([`task_toml`]), then validates it and lists exactly what is left: fields to fill in,
//! lengths it guessed from names, headers it could not find (with the command that
//! finishes the job). A folder it wrote keeps a [`MANIFEST`], so init can run there again.

pub mod includes;
pub mod signature;
mod sizes;
pub mod task_toml;

use includes::Missing;
use sha2::{Digest, Sha256};
use signature::{SignatureError, WRAPPING_HINT};
use std::path::{Path, PathBuf};
use task_toml::{Length, Todo, TodoKind};

pub struct Args {
    pub dir: PathBuf,
    pub from: PathBuf,
    pub entry: Option<String>,
    pub include_dirs: Vec<PathBuf>,
    /// Write into a folder init did not write, or over files edited since it did.
    pub force: bool,
}

/// The file init leaves in a task folder: what it wrote, with content hashes, so that
/// running init again on the folder can replace its own files and nothing else.
pub const MANIFEST: &str = ".nightshift-init.json";

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Manifest {
    written_by: String,
    /// Paths relative to the task folder, with the SHA-256 of what init wrote there.
    files: Vec<ManifestFile>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct ManifestFile {
    path: PathBuf,
    sha256: String,
}

const WRITTEN_BY: &str = "nightshift init";

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// What init did, for the summary and `--json`.
#[derive(Debug, serde::Serialize)]
pub struct Outcome {
    pub dir: PathBuf,
    pub entry: String,
    pub files: Vec<PathBuf>,
    /// Init replaced the files of an earlier run of its own in this folder.
    pub rewrote: bool,
    /// Everything left: fields to fill in, guesses to check, includes to find.
    pub todos: Vec<Todo>,
    /// Each pointer's length and where it came from.
    pub lengths: Vec<Length>,
    pub unresolved_includes: Vec<String>,
    /// Whether task.toml loads as written (validation), whatever is left to check.
    pub loads: bool,
    /// The task is ready: it loads and nothing is left to do. Init exits 0 only then.
    pub valid: bool,
    /// The validation error, when the task does not load yet.
    pub error: Option<String>,
    /// The command that finishes the job when it is running init again (headers missing).
    pub rerun: Option<String>,
}

/// Why init wrote nothing.
#[derive(Debug)]
pub struct Refusal(pub String);

fn listing(found: &[(String, usize)], file: &Path) -> String {
    found.iter().map(|(n, l)| format!("{n} ({}:{l})", file.display())).collect::<Vec<_>>().join(", ")
}

fn explain(e: SignatureError, file: &Path) -> Refusal {
    Refusal(match e {
        SignatureError::NoEntry { cpp_candidates } if cpp_candidates.is_empty() => format!(
            "{}: no extern \"C\" host function (the launcher nightshift calls).\n\n{WRAPPING_HINT}",
            file.display()
        ),
        SignatureError::NoEntry { cpp_candidates } => format!(
            "{}: no extern \"C\" launcher; these C++ functions take a stream and look like launchers: {}.\n\n{WRAPPING_HINT}",
            file.display(),
            listing(&cpp_candidates, file)
        ),
        SignatureError::Ambiguous(found) => format!(
            "{}: {} extern \"C\" functions: {}. Pick the launcher with --entry NAME.",
            file.display(),
            found.len(),
            listing(&found, file)
        ),
        SignatureError::NotFound { wanted, found } if found.is_empty() => format!(
            "{}: --entry {wanted}: the file has no extern \"C\" host function.\n\n{WRAPPING_HINT}",
            file.display()
        ),
        SignatureError::NotFound { wanted, found } => format!(
            "{}: --entry {wanted}: no extern \"C\" function of that name; the file has {}",
            file.display(),
            listing(&found, file)
        ),
        SignatureError::Unsupported { name, line, why } => format!(
            "{}:{line}: `{name}` cannot be the entry as written: {why}.\n\n{WRAPPING_HINT}",
            file.display()
        ),
    })
}

fn task_name(dir: &Path) -> String {
    let raw = dir.file_name().and_then(|n| n.to_str()).unwrap_or("task");
    let name: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    if name.is_empty() {
        "task".into()
    } else {
        name
    }
}

/// A word for a shell command line: quoted when it holds anything but plain characters.
fn shell_word(p: &str) -> String {
    if !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || "_-./=:+,@%".contains(c)) {
        p.to_string()
    } else {
        format!("'{}'", p.replace('\'', "'\\''"))
    }
}

/// The init command line for `a`, with `extra_includes` added as -I folders.
fn command_line(a: &Args, extra_includes: &[String]) -> String {
    let mut words = vec!["nightshift".to_string(), "init".into(), shell_word(&a.dir.to_string_lossy())];
    words.push("--from".into());
    words.push(shell_word(&a.from.to_string_lossy()));
    if let Some(e) = &a.entry {
        words.push("--entry".into());
        words.push(shell_word(e));
    }
    for d in &a.include_dirs {
        words.push("-I".into());
        words.push(shell_word(&d.to_string_lossy()));
    }
    for d in extra_includes {
        words.push("-I".into());
        words.push(d.clone());
    }
    words.join(" ")
}

/// Whether init may write into `dir`, and the files of an earlier run of its own there
/// (to replace). `writes`: the paths (relative to `dir`) this run writes.
fn may_write(dir: &Path, writes: &[PathBuf], force: bool) -> Result<Option<Manifest>, Refusal> {
    let empty = std::fs::read_dir(dir).map(|mut r| r.next().is_none()).unwrap_or(true);
    if !dir.exists() || empty {
        return Ok(None);
    }
    let manifest: Option<Manifest> = std::fs::read_to_string(dir.join(MANIFEST))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .filter(|m: &Manifest| m.written_by == WRITTEN_BY);
    let Some(manifest) = manifest else {
        if force {
            return Ok(None);
        }
        return Err(Refusal(format!(
            "{} already exists and was not written by `nightshift init` (it has no {MANIFEST}): init writes a new task folder. Choose another folder, or pass --force to write into this one (files with the names init writes are replaced, others are left alone)",
            dir.display()
        )));
    };
    // Files this run would replace that are not init's own as it left them.
    let (mut edited, mut foreign) = (Vec::new(), Vec::new());
    for w in writes {
        let path = dir.join(w);
        let Ok(now) = std::fs::read(&path) else { continue };
        match manifest.files.iter().find(|f| f.path == *w) {
            Some(f) if f.sha256 == sha256(&now) => {}
            Some(_) => edited.push(w.display().to_string()),
            None => foreign.push(w.display().to_string()),
        }
    }
    if (!edited.is_empty() || !foreign.is_empty()) && !force {
        let mut why = Vec::new();
        if !edited.is_empty() {
            why.push(format!("{} edited since", edited.join(", ")));
        }
        if !foreign.is_empty() {
            why.push(format!("{} not written by init", foreign.join(", ")));
        }
        return Err(Refusal(format!(
            "{}: init wrote this folder, but running it again would replace {}. Pass --force to replace them anyway",
            dir.display(),
            why.join(", and ")
        )));
    }
    Ok(Some(manifest))
}

/// Reads, writes and validates. Nothing is written when the input is refused.
pub fn run(a: &Args) -> Result<Outcome, Refusal> {
    let source = std::fs::read_to_string(&a.from)
        .map_err(|e| Refusal(format!("--from {}: cannot read: {e}", a.from.display())))?;
    for d in &a.include_dirs {
        if !d.is_dir() {
            return Err(Refusal(format!("-I {}: no such folder", d.display())));
        }
    }
    let entry = signature::find_entry(&source, a.entry.as_deref()).map_err(|e| explain(e, &a.from))?;
    let file_name = a
        .from
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| n.ends_with(".cu") && !n.contains('"'))
        .ok_or_else(|| Refusal(format!("--from {}: expected a .cu file", a.from.display())))?
        .to_string();
    let (headers, unresolved) = includes::collect(&a.from, &a.include_dirs);

    // What the kernels' indexing says about each pointer's length.
    let header_sources: Vec<rewrite::Source> = headers
        .iter()
        .filter_map(|h| std::fs::read_to_string(&h.source).ok())
        .map(|t| rewrite::Source::parse(&t))
        .collect();
    let parsed = rewrite::Source::parse(&source);
    let extents = rewrite::extent::pointer_extents(&parsed, &header_sources, &entry.name);
    // Which pointers the kernels read, write or both: an array updated in place is an
    // input and an output.
    let uses = rewrite::extent::pointer_uses(&parsed, &header_sources, &entry.name);
    // What each integer does: sizes the work, selects behaviour, or is a value.
    let scalars = rewrite::extent::scalar_uses(&parsed, &header_sources, &entry.name);
    // What each output holds: copies are checked exactly, sums with their order's slack.
    let stores = rewrite::extent::pointer_stores(&parsed, &header_sources, &entry.name);

    let name = task_name(&a.dir);
    let via_include = headers.iter().any(|h| h.via_include_dir);
    let toml_path = a.dir.join(crate::task::TASK_FILE);
    let draft = task_toml::draft(
        &name,
        &entry,
        &file_name,
        via_include,
        &task_toml::KernelReading { extents: &extents, uses: &uses, scalars: &scalars, stores: &stores },
        &toml_path,
    );

    // Everything this run writes, relative to the task folder, with its contents.
    let mut writes: Vec<(PathBuf, Vec<u8>)> = vec![(PathBuf::from(&file_name), source.clone().into_bytes())];
    for h in &headers {
        let bytes =
            std::fs::read(&h.source).map_err(|e| Refusal(format!("cannot read {}: {e}", h.source.display())))?;
        writes.push((h.dest.clone(), bytes));
    }
    writes.push((PathBuf::from(crate::task::TASK_FILE), draft.text.clone().into_bytes()));
    let names: Vec<PathBuf> = writes.iter().map(|(p, _)| p.clone()).collect();
    let earlier = may_write(&a.dir, &names, a.force)?;

    let io = |what: &str, p: &Path, e: std::io::Error| Refusal(format!("{what} {}: {e}", p.display()));
    std::fs::create_dir_all(&a.dir).map_err(|e| io("cannot create", &a.dir, e))?;
    // Files of the earlier run that this one does not write again (a header that moved)
    // go, if they are still as init left them.
    if let Some(m) = &earlier {
        for f in m.files.iter().filter(|f| !names.contains(&f.path)) {
            let path = a.dir.join(&f.path);
            if std::fs::read(&path).is_ok_and(|b| sha256(&b) == f.sha256) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let mut files = Vec::new();
    let mut manifest = Manifest { written_by: WRITTEN_BY.into(), files: Vec::new() };
    for (rel, bytes) in &writes {
        let dest = a.dir.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io("cannot create", parent, e))?;
        }
        std::fs::write(&dest, bytes).map_err(|e| io("cannot write", &dest, e))?;
        manifest.files.push(ManifestFile { path: rel.clone(), sha256: sha256(bytes) });
        files.push(dest);
    }
    let manifest_path = a.dir.join(MANIFEST);
    let manifest_text = serde_json::to_string_pretty(&manifest).expect("the manifest serializes");
    std::fs::write(&manifest_path, manifest_text).map_err(|e| io("cannot write", &manifest_path, e))?;

    let mut todos = draft.todos;
    let mut missing_folders: Vec<String> = Vec::new();
    let mut unresolved_includes = Vec::new();
    for u in &unresolved {
        let at = format!("{}:{}: \"{}\"", u.from.display(), u.line, u.name);
        let what = match &u.why {
            Missing::NotFound { nearby: Some(dir) } => {
                let d = shell_word(&dir.to_string_lossy());
                if !missing_folders.contains(&d) {
                    missing_folders.push(d);
                }
                format!("not found next to the file or in an -I folder; {} holds it: add -I {}", dir.display(), dir.display())
            }
            Missing::NotFound { nearby: None } => {
                let placeholder = "DIR".to_string();
                if !missing_folders.contains(&placeholder) {
                    missing_folders.push(placeholder);
                }
                format!("not found next to the file or in an -I folder: add -I DIR, where DIR holds {}", u.name)
            }
            Missing::Outside { found } => format!(
                "found at {}, by a path that leaves the folder: a task holds its headers inside it, so include it by a path below the kernel's folder or an -I folder",
                found.display()
            ),
        };
        unresolved_includes.push(format!("{at} {what}"));
        todos.push(Todo {
            kind: TodoKind::MissingInclude,
            file: u.from.clone(),
            line: u.line,
            field: String::new(),
            what: format!("\"{}\" {what}", u.name),
        });
    }
    let rerun = (!missing_folders.is_empty()).then(|| command_line(a, &missing_folders));
    let (loads, error) = match crate::task::Task::load(&a.dir) {
        Ok(_) => (true, None),
        Err(e) => (false, Some(e.to_string())),
    };
    Ok(Outcome {
        dir: a.dir.clone(),
        entry: entry.name,
        files,
        rewrote: earlier.is_some(),
        valid: loads && todos.is_empty(),
        todos,
        lengths: draft.lengths,
        unresolved_includes,
        loads,
        error,
        rerun,
    })
}

/// The summary a person reads after init.
pub fn render(o: &Outcome) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let verb = if o.rewrote { "rewrote" } else { "wrote" };
    let _ = writeln!(s, "{verb} {} (entry `{}`):", o.dir.display(), o.entry);
    for f in &o.files {
        let _ = writeln!(s, "  {}", f.display());
    }
    if !o.lengths.is_empty() {
        let _ = writeln!(s, "\nlengths:");
        let width = o.lengths.iter().map(|l| l.arg.len()).max().unwrap_or(0);
        let len_width = o.lengths.iter().map(|l| l.len.as_deref().unwrap_or("TODO").len()).max().unwrap_or(0);
        for l in &o.lengths {
            let len = l.len.as_deref().unwrap_or("TODO");
            let how = match l.from {
                task_toml::LengthSource::Indexing => format!("from the kernel's indexing: {}", l.evidence),
                task_toml::LengthSource::Name => format!("GUESSED from the names: {}", l.evidence),
                task_toml::LengthSource::Unknown => format!("unknown: {}", l.evidence),
            };
            let _ = writeln!(s, "  {:<width$}  {len:<len_width$}  {how}", l.arg);
        }
    }
    let toml = o.dir.join(crate::task::TASK_FILE);
    if o.valid {
        let _ = writeln!(
            s,
            "\nvalid. Every other guess (sizes, served shapes, tolerances, input ranges) is commented in {}: read them, then",
            toml.display()
        );
    } else {
        let _ = writeln!(s, "\nnot ready; left to do:");
        for t in &o.todos {
            let field = if t.field.is_empty() { String::new() } else { format!(" {}:", t.field) };
            let _ = writeln!(s, "  {}:{}:{field} {}", t.file.display(), t.line, t.what);
        }
        if let Some(e) = &o.error {
            let _ = writeln!(s, "  validate says: {e}");
        }
        if let Some(cmd) = &o.rerun {
            let _ = writeln!(
                s,
                "\nwith the headers' folder, run init again (it replaces the files it wrote here):\n  {cmd}"
            );
        }
        let _ = writeln!(s, "\nthen");
    }
    let d = shell_word(&o.dir.to_string_lossy());
    let _ = writeln!(s, "  nightshift validate {d} --build   # checks every expression and builds the baseline (add --arch sm_90a without a GPU)");
    let _ = writeln!(s, "  nightshift eval {d}               # on a GPU machine: the baseline against itself");
    let _ = writeln!(s, "  nightshift optimize {d} --budget 8h   # on a GPU machine");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_copied_header_is_one_the_build_hashes() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        let inc = tmp.path().join("inc");
        std::fs::create_dir_all(src.join("detail")).unwrap();
        std::fs::create_dir_all(inc.join("ops")).unwrap();
        std::fs::write(
            src.join("k.cu"),
            "#include \"detail/math.cuh\"\n#include \"ops/act.cuh\"\nextern \"C\" void f(const float* x, float* y, int n, cudaStream_t s) {}\n",
        )
        .unwrap();
        std::fs::write(src.join("detail/math.cuh"), "#pragma once\n").unwrap();
        std::fs::write(inc.join("ops/act.cuh"), "#pragma once\n").unwrap();
        let args = Args {
            dir: tmp.path().join("t"),
            from: src.join("k.cu"),
            entry: None,
            include_dirs: vec![inc],
            force: false,
        };
        let outcome = run(&args).unwrap();
        assert!(outcome.loads, "{outcome:?}");
        let task = crate::task::Task::load(&args.dir).unwrap();
        let names: Vec<String> = task.header_files().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, vec!["detail/math.cuh", "include/ops/act.cuh"]);
    }
}
