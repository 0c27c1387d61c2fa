//! `nightshift eval`: one candidate (or the baseline) through the wall, as a verdict.

use super::{fail, gpu_options, load_task, print_json, render, EXIT_ENV, EXIT_PASSED, EXIT_REJECTED, EXIT_USAGE};
use crate::toolkit::toolchain::EnvError;
use crate::wall::{self, EvalError, EvalOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The task directory (task.toml, baseline, optional reference).
    pub task: PathBuf,
    /// The candidate .cu (default: the task's baseline, timed against itself).
    pub candidate: Option<PathBuf>,
    /// Also measure energy per call with NVML.
    #[arg(long)]
    pub energy: bool,
    /// Also run compute-sanitizer memcheck, racecheck, initcheck and synccheck on the smallest check size.
    #[arg(long)]
    pub sanitize: bool,
    /// With --sanitize: run compute-sanitizer even where it cannot be confined in private
    /// namespaces (a kernel that forbids user namespaces); the tool then sees the host's
    /// /tmp, $HOME, /run and network, and only the worker's own sandbox guards them.
    #[arg(long, requires = "sanitize")]
    pub allow_unconfined_profiling: bool,
    /// Check only; skip timing.
    #[arg(long)]
    pub no_time: bool,
    /// Build target, e.g. sm_90a (default: the GPU's own).
    #[arg(long)]
    pub arch: Option<String>,
    /// Extra nvcc flag (repeatable).
    #[arg(long = "nvcc-flag", allow_hyphen_values = true)]
    pub nvcc_flags: Vec<String>,
    /// Macro for the candidate, NAME=VALUE (repeatable; the tuner's knobs).
    #[arg(short = 'D', value_name = "NAME=VALUE")]
    pub defines: Vec<String>,
    /// Seconds before the judgment (the judge and its workers) is killed (default: the task's, else 120).
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Seconds one build may take before nvcc is killed: a candidate's is `build-timeout`,
    /// never cached (default: the task's [build] timeout_s, else 120).
    #[arg(long, value_name = "SECONDS")]
    pub build_timeout: Option<f64>,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Timed rounds per phase (baseline before, candidate, baseline after); each round is a
    /// batch of calls on input sets of their own.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Print the verdict as JSON: {"status", "failure", "check", "timing", "energy", "build", ...}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> ExitCode {
    let mut opts = match gpu_options(a.arch, a.device, a.timeout) {
        Ok(o) => o,
        Err(code) => return code,
    };
    match super::build_timeout(a.build_timeout) {
        Ok(t) => opts.build_timeout = t,
        Err(code) => return code,
    }
    opts.energy = a.energy;
    opts.sanitize = a.sanitize;
    opts.allow_unconfined_profiling = a.allow_unconfined_profiling;
    opts.time = !a.no_time;
    opts.extra_flags = a.nvcc_flags;
    opts.timing.rounds = a.rounds.max(2);
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
