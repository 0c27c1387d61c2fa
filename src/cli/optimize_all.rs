//! `nightshift optimize-all TASK... --budget 8h [--ray ADDRESS]`: one optimize run per
//! task (one after another here, or one Ray task with a GPU each), then one summary.
//! Exit 0 when every run ended (with or without a faster kernel), 2 bad usage, 3 when a
//! run could not run or ended on an error.

use super::{fail, print_json, EXIT_ENV, EXIT_PASSED, EXIT_USAGE};
use crate::optimize::all::{self, AllSpec};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Task directories (task.toml + baseline).
    #[arg(required = true)]
    pub tasks: Vec<PathBuf>,
    /// Wall time of each task's search (as optimize's --budget).
    #[arg(long, value_name = "DURATION")]
    pub budget: Option<String>,
    /// Stop each run after this many nodes.
    #[arg(long)]
    pub max_nodes: Option<usize>,
    /// Each run's generator (as optimize's --generator).
    #[arg(long)]
    pub generator: Option<String>,
    /// Each run's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// The batch's folder: one run folder per task and summary.md (default:
    /// runs/all-<UTC time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// With --ray, each task is a Ray task holding one GPU of the cluster.
    #[command(flatten)]
    pub cluster: super::optimize::RayArgs,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Tests only: each run uses the simulated evaluator (as optimize's --simulate-gpu).
    #[arg(long, hide = true, value_name = "MS", num_args = 0..=1, default_missing_value = "50")]
    pub simulate_gpu: Option<u64>,
}

pub fn run(a: Args) -> ExitCode {
    for t in &a.tasks {
        if let Err(e) = crate::task::Task::load(t) {
            return fail(EXIT_USAGE, &format!("{}: {e}", t.display()));
        }
    }
    let mut args: Vec<String> = Vec::new();
    if let Some(b) = &a.budget {
        if let Err(e) = crate::run::config::parse_budget(b) {
            return fail(EXIT_USAGE, &format!("--budget {b}: {e}"));
        }
        args.extend(["--budget".into(), b.clone()]);
    }
    if let Some(n) = a.max_nodes {
        args.extend(["--max-nodes".into(), n.to_string()]);
    }
    if let Some(g) = &a.generator {
        args.extend(["--generator".into(), g.clone()]);
    }
    if let Some(s) = a.seed {
        args.extend(["--seed".into(), s.to_string()]);
    }
    if let Some(ms) = a.simulate_gpu {
        args.extend(["--simulate-gpu".into(), ms.to_string()]);
    }
    let ray = match a.cluster.settings(None, None) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let out = a.out.clone().unwrap_or_else(|| crate::optimize::default_run_dir("all"));
    let tasks: Vec<PathBuf> = a.tasks.iter().map(|t| t.canonicalize().unwrap_or_else(|_| t.clone())).collect();
    let spec = AllSpec { tasks, out: out.clone(), args, ray };
    let json = a.json;
    let mut progress = |r: &all::TaskRun| {
        if !json {
            let how = match (&r.error, r.exit) {
                (Some(e), _) => format!("failed: {e}"),
                (None, Some(0)) => "a faster kernel, re-verified".into(),
                _ => "no faster kernel".into(),
            };
            eprintln!("{}: {how} ({:.0} s)", r.task, r.seconds);
        }
    };
    let runs = match all::run(&spec, &mut progress) {
        Ok(r) => r,
        Err(m) => return fail(EXIT_ENV, &m),
    };
    let summary = match all::write_summary(&out, &runs) {
        Ok(p) => p,
        Err(m) => return fail(EXIT_ENV, &m),
    };
    if json {
        print_json(&runs);
    } else {
        println!("summary: {}", summary.display());
    }
    ExitCode::from(if runs.iter().all(|r| r.ended()) { EXIT_PASSED } else { EXIT_ENV })
}
