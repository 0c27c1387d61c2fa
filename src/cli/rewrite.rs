//! `nightshift rewrite`: which recipes apply to a task's kernel and why the others do
//! not, the variants as files with their diffs, built when asked. Runs anywhere (no GPU),
//! so a user sees what the tuner will try before a night is spent on it.

use super::{fail, load_task, print_json, EXIT_ENV, EXIT_PASSED, EXIT_REJECTED, EXIT_USAGE};
use crate::wall;
use rewrite::{Application, Params};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub struct Args {
    pub task: PathBuf,
    pub candidate: Option<PathBuf>,
    pub recipes: Vec<String>,
    pub out: Option<PathBuf>,
    pub build: bool,
    pub arch: Option<String>,
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct Row {
    id: String,
    params: String,
    applies: bool,
    /// Why not, when it does not apply.
    reason: Option<String>,
    description: Option<String>,
    /// The fast path's run-time conditions.
    guards: Vec<String>,
    file: Option<PathBuf>,
    /// null: not asked to build (or nothing to build).
    built: Option<bool>,
    build_error: Option<String>,
    #[serde(skip)]
    diff: String,
}

/// The file name of a variant: `vectorize.cu`, `vectorize-width8.cu`.
fn file_name(app: &Application) -> String {
    let mut name = app.recipe.to_string();
    for (k, v) in &app.params.0 {
        let v: String = v.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        name.push_str(&format!("-{k}{v}"));
    }
    format!("{name}.cu")
}

pub fn run(a: Args) -> ExitCode {
    let task = match load_task(&a.task) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let source_path = a.candidate.clone().unwrap_or_else(|| task.baseline.clone());
    let source = match std::fs::read_to_string(&source_path) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, &format!("{}: cannot read: {e}", source_path.display())),
    };
    let apps: Vec<Application> = if a.recipes.is_empty() {
        rewrite::recipes::ALL.iter().map(|r| Application { recipe: r.id, params: Params::default() }).collect()
    } else {
        let mut v = Vec::new();
        for r in &a.recipes {
            match r.parse::<Application>() {
                Ok(app) => v.push(app),
                Err(e) => return fail(EXIT_USAGE, &format!("--recipe {r}: {e}")),
            }
        }
        v
    };
    let facts = crate::task::facts::rewrite_facts(&task);
    // Variants are written where asked, or to a scratch folder when only building.
    let scratch;
    let out_dir: Option<PathBuf> = match (&a.out, a.build) {
        (Some(d), _) => {
            if let Err(e) = std::fs::create_dir_all(d) {
                return fail(EXIT_USAGE, &format!("{}: cannot create: {e}", d.display()));
            }
            Some(d.clone())
        }
        (None, true) => match tempfile::tempdir() {
            Ok(d) => {
                scratch = d;
                Some(scratch.path().to_path_buf())
            }
            Err(e) => return fail(EXIT_ENV, &format!("cannot make a scratch folder: {e}")),
        },
        (None, false) => None,
    };
    let build_env = if a.build {
        match super::tasks::build_target(a.arch.clone()) {
            Ok(b) => Some(b),
            Err(code) => return code,
        }
    } else {
        None
    };
    let name = source_path.file_name().and_then(|n| n.to_str()).unwrap_or("kernel.cu").to_string();
    let mut rows = Vec::new();
    for app in &apps {
        let mut row = Row {
            id: app.recipe.to_string(),
            params: app.params.label(),
            applies: false,
            reason: None,
            description: None,
            guards: Vec::new(),
            file: None,
            built: None,
            build_error: None,
            diff: String::new(),
        };
        match rewrite::apply(app, &source, &facts) {
            Err(why) => row.reason = Some(why.0),
            Ok(r) => {
                row.applies = true;
                row.description = Some(r.description.clone());
                row.guards = r.guards.clone();
                row.diff = similar::TextDiff::from_lines(&source, &r.source)
                    .unified_diff()
                    .context_radius(3)
                    .header(&name, &file_name(app))
                    .to_string();
                if let Some(dir) = &out_dir {
                    let path = dir.join(file_name(app));
                    if let Err(e) = std::fs::write(&path, &r.source) {
                        return fail(EXIT_USAGE, &format!("{}: cannot write: {e}", path.display()));
                    }
                    if let Some((tc, opts, arch)) = &build_env {
                        match wall::build_one(tc, opts, &task, &path, false, arch) {
                            Ok(_) => row.built = Some(true),
                            Err(crate::toolkit::build::BuildError::Rejected { failure, dir, .. }) => {
                                row.built = Some(false);
                                row.build_error = Some(format!(
                                    "{} (log in {})",
                                    failure.summary(),
                                    dir.join(crate::toolkit::build::LOG_NAME).display()
                                ));
                            }
                            Err(crate::toolkit::build::BuildError::Env(e)) => return fail(EXIT_ENV, &e.to_string()),
                            Err(crate::toolkit::build::BuildError::Io(m)) => return fail(EXIT_USAGE, &m),
                        }
                    }
                    if a.out.is_some() {
                        row.file = Some(path);
                    }
                }
            }
        }
        rows.push(row);
    }
    let failed_build = rows.iter().any(|r| r.built == Some(false));
    let refused_asked = !a.recipes.is_empty() && rows.iter().any(|r| !r.applies);
    if a.json {
        print_json(&serde_json::json!({
            "task": task.name,
            "source": source_path,
            "recipes": rows,
        }));
    } else {
        print!("{}", render(&task.name, &source_path, &rows));
    }
    ExitCode::from(if failed_build || refused_asked { EXIT_REJECTED } else { EXIT_PASSED })
}

fn render(task: &str, source: &Path, rows: &[Row]) -> String {
    let mut s = format!("{task}: recipes on {}\n\n", source.display());
    let applies = rows.iter().filter(|r| r.applies).count();
    for r in rows {
        let id = if r.params.is_empty() { r.id.clone() } else { format!("{}:{}", r.id, r.params) };
        if r.applies {
            s.push_str(&format!("applies  {id}: {}\n", r.description.as_deref().unwrap_or("")));
            if !r.guards.is_empty() {
                s.push_str(&format!("         fast path when: {}\n", r.guards.join(" && ")));
            }
            match (r.built, &r.build_error) {
                (Some(true), _) => s.push_str("         built\n"),
                (Some(false), Some(e)) => s.push_str(&format!("         does not build: {e}\n")),
                _ => {}
            }
            if let Some(f) = &r.file {
                s.push_str(&format!("         written to {}\n", f.display()));
            }
        } else {
            s.push_str(&format!("declines {id}: {}\n", r.reason.as_deref().unwrap_or("")));
        }
    }
    s.push_str(&format!("\n{applies} of {} recipes apply\n", rows.len()));
    for r in rows.iter().filter(|r| r.applies) {
        s.push_str(&format!("\n--- {} ---\n{}", r.id, r.diff));
    }
    s
}
