//! `nightshift init`: from a production .cu file to a task directory. It finds the
//! `extern "C"` launcher ([`signature`]), copies the kernel and the headers it includes
//! ([`includes`]), writes a task.toml whose guesses are all commented ([`task_toml`]),
//! then validates it and lists exactly what is left to fill in.

pub mod includes;
pub mod signature;
pub mod task_toml;

use signature::{SignatureError, WRAPPING_HINT};
use std::path::{Path, PathBuf};

pub struct Args {
    pub dir: PathBuf,
    pub from: PathBuf,
    pub entry: Option<String>,
    pub include_dirs: Vec<PathBuf>,
}

/// What init did, for the summary and `--json`.
#[derive(Debug, serde::Serialize)]
pub struct Outcome {
    pub dir: PathBuf,
    pub entry: String,
    pub files: Vec<PathBuf>,
    pub todos: Vec<task_toml::Todo>,
    pub unresolved_includes: Vec<String>,
    pub valid: bool,
    /// The validation error, when the task does not load yet.
    pub error: Option<String>,
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

/// Reads, writes and validates. Nothing is written when the input is refused.
pub fn run(a: &Args) -> Result<Outcome, Refusal> {
    let source = std::fs::read_to_string(&a.from)
        .map_err(|e| Refusal(format!("--from {}: cannot read: {e}", a.from.display())))?;
    for d in &a.include_dirs {
        if !d.is_dir() {
            return Err(Refusal(format!("-I {}: no such folder", d.display())));
        }
    }
    if a.dir.exists() && std::fs::read_dir(&a.dir).map(|mut r| r.next().is_some()).unwrap_or(true) {
        return Err(Refusal(format!(
            "{} already exists and is not empty: init writes a new task folder and never overwrites one",
            a.dir.display()
        )));
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

    let io = |what: &str, p: &Path, e: std::io::Error| Refusal(format!("{what} {}: {e}", p.display()));
    std::fs::create_dir_all(&a.dir).map_err(|e| io("cannot create", &a.dir, e))?;
    let mut files = Vec::new();
    let kernel_dest = a.dir.join(&file_name);
    std::fs::write(&kernel_dest, &source).map_err(|e| io("cannot write", &kernel_dest, e))?;
    files.push(kernel_dest);
    for h in &headers {
        let dest = a.dir.join(&h.dest);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io("cannot create", parent, e))?;
        }
        std::fs::copy(&h.source, &dest).map_err(|e| io("cannot copy to", &dest, e))?;
        files.push(dest);
    }
    let name = task_name(&a.dir);
    let via_include = headers.iter().any(|h| h.via_include_dir);
    let draft = task_toml::draft(&name, &entry, &file_name, via_include);
    let toml_path = a.dir.join(crate::task::TASK_FILE);
    std::fs::write(&toml_path, &draft.text).map_err(|e| io("cannot write", &toml_path, e))?;
    files.push(toml_path);

    let unresolved_includes: Vec<String> =
        unresolved.iter().map(|u| format!("{}:{}: \"{}\" not found", u.from.display(), u.line, u.name)).collect();
    let (valid, error) = match crate::task::Task::load(&a.dir) {
        Ok(_) => (true, None),
        Err(e) => (false, Some(e.to_string())),
    };
    Ok(Outcome { dir: a.dir.clone(), entry: entry.name, files, todos: draft.todos, unresolved_includes, valid, error })
}

/// The summary a person reads after init.
pub fn render(o: &Outcome) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "wrote {} (entry `{}`):", o.dir.display(), o.entry);
    for f in &o.files {
        let _ = writeln!(s, "  {}", f.display());
    }
    let toml = o.dir.join(crate::task::TASK_FILE);
    if o.todos.is_empty() && o.unresolved_includes.is_empty() && o.valid {
        let _ = writeln!(s, "\nvalid. Every guess is commented in {}: read them, then", toml.display());
    } else {
        let _ = writeln!(s, "\nleft to fill in:");
        for t in &o.todos {
            let _ = writeln!(s, "  {}:{}: {}: {}", toml.display(), t.line, t.field, t.what);
        }
        for u in &o.unresolved_includes {
            let _ = writeln!(s, "  {u}: pass the folder that holds it with -I and run init again");
        }
        if let Some(e) = &o.error {
            let _ = writeln!(s, "  validate says: {e}");
        }
        let _ = writeln!(s, "then");
    }
    let d = o.dir.display();
    let _ = writeln!(s, "  nightshift validate {d} --build      # checks every expression and builds the baseline");
    let _ = writeln!(s, "  nightshift eval {d}                  # the baseline against itself on this GPU");
    let _ = writeln!(s, "  nightshift optimize {d} --budget 8h");
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
        let args = Args { dir: tmp.path().join("t"), from: src.join("k.cu"), entry: None, include_dirs: vec![inc] };
        let outcome = run(&args).unwrap();
        assert!(outcome.valid && outcome.todos.is_empty(), "{outcome:?}");
        let task = crate::task::Task::load(&args.dir).unwrap();
        let names: Vec<String> = task.header_files().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, vec!["detail/math.cuh", "include/ops/act.cuh"]);
    }
}
