//! The task folder's commands: `tasks` (list), `init` (write a task from a launcher),
//! `validate` (load it, and with `--build` build its baseline and reference).

use super::{fail, load_task, print_json, render, EXIT_ENV, EXIT_PASSED, EXIT_REJECTED, EXIT_USAGE};
use crate::task::{self, Task, TaskError};
use crate::wall::{self, EvalError, EvalOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub fn list(dir: &Path, json: bool) -> ExitCode {
    let dirs = match task::discover(dir) {
        Ok(d) => d,
        Err(e) => return fail(EXIT_USAGE, &format!("cannot list tasks in {}: {e}", dir.display())),
    };
    let loaded: Vec<(PathBuf, Result<Task, TaskError>)> =
        dirs.into_iter().map(|d| (d.clone(), Task::load(&d))).collect();
    let bad = loaded.iter().filter(|(_, t)| t.is_err()).count();
    if json {
        let rows: Vec<serde_json::Value> = loaded
            .iter()
            .map(|(d, t)| match t {
                Ok(t) => serde_json::json!({"dir": d, "name": t.name, "summary": t.summary, "entry": t.entry, "bench": t.bench.vars, "serve": t.serve, "serve_weights": t.serve_weights, "checks": t.checks.len(), "has_reference": t.has_reference(), "tune": t.tune, "valid": true}),
                Err(e) => serde_json::json!({"dir": d, "valid": false, "error": e.to_string()}),
            })
            .collect();
        print_json(&serde_json::json!({ "tasks": rows }));
    } else {
        print!("{}", render::task_list(&loaded));
        if loaded.is_empty() {
            eprintln!("no tasks in {} (a task is a folder with a task.toml)", dir.display());
        }
    }
    ExitCode::from(if bad > 0 { EXIT_USAGE } else { EXIT_PASSED })
}

pub fn init(args: &crate::scaffold::Args, json: bool) -> ExitCode {
    match crate::scaffold::run(args) {
        Ok(outcome) => {
            if json {
                print_json(&outcome);
            } else {
                print!("{}", crate::scaffold::render(&outcome));
            }
            ExitCode::from(if outcome.valid { EXIT_PASSED } else { EXIT_REJECTED })
        }
        Err(crate::scaffold::Refusal(message)) => {
            if json {
                print_json(&serde_json::json!({"written": false, "error": message}));
            }
            fail(EXIT_USAGE, &message)
        }
    }
}

/// What building without running needs: nvcc, build options, and the target (`--arch`,
/// else the GPU's own); a missing tool or GPU is the environment's exit code.
pub(crate) fn build_target(
    arch: Option<String>,
) -> Result<(crate::toolkit::toolchain::Toolchain, EvalOptions, String), ExitCode> {
    let tc = crate::toolkit::toolchain::Toolchain::find().map_err(|e| fail(EXIT_ENV, &e.to_string()))?;
    // This binary confines the builds (`nightshift confine`).
    let exe =
        std::env::current_exe().map_err(|e| fail(EXIT_ENV, &format!("cannot find the nightshift executable: {e}")))?;
    let mut opts = EvalOptions::new(exe);
    opts.arch = arch;
    match wall::resolve_arch(&opts) {
        Ok(a) => Ok((tc, opts, a)),
        // Building alone needs no GPU, only a target: say how to name one.
        Err(EvalError::Env(e)) => Err(fail(
            EXIT_ENV,
            &format!(
                "{} not found: without --arch, --build compiles for this machine's GPU. Pass --arch sm_90a (or the architecture you deploy to) to build without one",
                e.what
            ),
        )),
        Err(e) => Err(fail(EXIT_USAGE, &e.to_string())),
    }
}

pub fn validate(dir: &Path, build: bool, arch: Option<String>, json: bool) -> ExitCode {
    let task = match load_task(dir) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let mut builds = Vec::new();
    if build {
        let (tc, opts, arch) = match build_target(arch) {
            Ok(b) => b,
            Err(code) => return code,
        };
        let mut sources = vec![("baseline", task.baseline.clone())];
        if task.has_reference() {
            sources.push(("reference", task.reference.clone()));
        }
        for (what, src) in sources {
            match wall::build_one(&tc, &opts, &task, &src, true, &arch) {
                Ok(b) => builds.push(serde_json::json!({"what": what, "ok": true, "cached": b.cached, "seconds": b.seconds, "kernels": b.ptxas.kernels, "dir": b.dir})),
                Err(crate::toolkit::build::BuildError::Rejected { failure, dir, .. }) => {
                    return fail(EXIT_USAGE, &format!("{}: the {what} does not build: {} (log in {})", task.dir.display(), failure.summary(), dir.join(crate::toolkit::build::LOG_NAME).display()));
                }
                Err(crate::toolkit::build::BuildError::Env(e)) => return fail(EXIT_ENV, &e.to_string()),
                Err(crate::toolkit::build::BuildError::Io(m)) => return fail(EXIT_USAGE, &m),
            }
        }
    }
    let warnings = task.warnings();
    if json {
        print_json(&serde_json::json!({"valid": true, "task": task, "builds": builds, "warnings": warnings}));
    } else {
        print!("{}", render::task_detail(&task));
        for w in &warnings {
            println!("warning: {w}");
        }
        for b in &builds {
            println!(
                "built {}: {}",
                b["what"].as_str().unwrap_or(""),
                if b["cached"].as_bool() == Some(true) { "cached" } else { "compiled" }
            );
        }
        println!("valid");
    }
    ExitCode::from(EXIT_PASSED)
}
