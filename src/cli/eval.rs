//! `nightshift eval`: one candidate (or the baseline) through the wall, as a verdict.

use super::{fail, gpu_options, load_task, print_json, render, EXIT_ENV, EXIT_PASSED, EXIT_REJECTED, EXIT_USAGE};
use crate::toolkit::toolchain::EnvError;
use crate::wall::{self, EvalError, EvalOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub struct Args {
    pub task: PathBuf,
    pub candidate: Option<PathBuf>,
    pub energy: bool,
    pub sanitize: bool,
    pub allow_unconfined_profiling: bool,
    pub no_time: bool,
    pub arch: Option<String>,
    pub nvcc_flags: Vec<String>,
    pub defines: Vec<String>,
    pub timeout: Option<f64>,
    pub device: usize,
    pub samples: usize,
    pub json: bool,
}

pub fn run(a: Args) -> ExitCode {
    let mut opts = match gpu_options(a.arch, a.device, a.timeout) {
        Ok(o) => o,
        Err(code) => return code,
    };
    opts.energy = a.energy;
    opts.sanitize = a.sanitize;
    opts.allow_unconfined_profiling = a.allow_unconfined_profiling;
    opts.time = !a.no_time;
    opts.extra_flags = a.nvcc_flags;
    opts.timing.min_samples = a.samples.max(5);
    for d in a.defines {
        match d.split_once('=') {
            Some((k, v)) if !k.is_empty() => {
                opts.defines.insert(k.to_string(), v.to_string());
            }
            _ => return fail(EXIT_USAGE, &format!("-D {d}: expected NAME=VALUE")),
        }
    }
    eval_cmd(&a.task, a.candidate.as_deref(), &opts, a.json)
}

fn eval_cmd(dir: &Path, candidate: Option<&Path>, opts: &EvalOptions, json: bool) -> ExitCode {
    let task = match load_task(dir) {
        Ok(t) => t,
        Err(code) => return code,
    };
    if let Some(c) = candidate {
        if !c.is_file() {
            return fail(EXIT_USAGE, &format!("{}: no such candidate file", c.display()));
        }
    }
    match wall::evaluate(&task, candidate, opts) {
        Ok(v) => {
            if json {
                print_json(&v);
            } else {
                print!("{}", render::verdict(&v, &task));
            }
            ExitCode::from(if v.passed() { EXIT_PASSED } else { EXIT_REJECTED })
        }
        Err(EvalError::Env(e)) => env_fail(&e, json),
        Err(EvalError::Task(m)) => fail(EXIT_USAGE, &format!("{}: {m}", task.dir.display())),
        Err(EvalError::Internal(m)) => fail(EXIT_ENV, &format!("internal error: {m}")),
    }
}

fn env_fail(e: &EnvError, json: bool) -> ExitCode {
    if json {
        print_json(&serde_json::json!({"error": "environment", "missing": e.what, "hint": e.hint}));
    }
    fail(EXIT_ENV, &e.to_string())
}
