//! The remote side of a lane: `nightshift lane-job` reads one job on stdin, does it on
//! this host's GPU (the one the Ray actor holds, as device 0) with the same judge, sandbox
//! and builds as a local lane, and prints the reply as one JSON line. The candidate is
//! written to a folder of its own, the task to one shared by its jobs on this host (so
//! the build cache serves them, as it serves a local lane); the baseline and the
//! reference are built here, for this GPU's arch, so every speedup it reports is against
//! the baseline on this GPU.

use super::job::{JobKind, LaneJob, LaneReply};
use crate::optimize::evaluator::{self, Bench, GpuEvaluator};
use crate::run::events::Candidate;
use crate::task::Task;
use crate::toolkit::build::{self, BuildSpec};
use crate::toolkit::toolchain::Toolchain;
use crate::wall::{self, EvalOptions, Verdict};
use std::time::{Duration, Instant};

/// The GPU a lane's job runs on: the actor's, which Ray made the only one visible.
const DEVICE: usize = 0;

/// Does `job` and returns the reply; never panics on what the job holds.
pub fn run(job: &LaneJob) -> LaneReply {
    match attempt(job) {
        Ok(reply) => reply,
        // Whatever stops a lane before or around a judgment is its host's.
        Err(message) => LaneReply::Failed { message, env: true },
    }
}

fn attempt(job: &LaneJob) -> Result<LaneReply, String> {
    if job.kind == JobKind::Profile && job.settings.simulated.is_some() {
        let note = "simulated run: no Nsight Compute counters".to_string();
        return Ok(LaneReply::Profile { csv: None, note, seconds: 0.0 });
    }
    let scratch = tempfile::Builder::new().prefix("nightshift-lane-").tempdir().map_err(|e| e.to_string())?;
    let task_dir = job.task.place(&build::cache_root().join("lane-tasks"))?;
    let task = Task::load(&task_dir).map_err(|e| format!("the task does not load on this host: {e}"))?;
    let toolchain = Toolchain::find().map_err(|e| format!("this host has no CUDA toolkit: {e}"))?;
    let s = &job.settings;
    let arch = match &s.simulated {
        Some(_) => "sm_90a".to_string(),
        None => {
            let (_, cc, _) = wall::require_gpu(DEVICE).map_err(|e| format!("this lane has no GPU: {e}"))?;
            build::arch_for_capability(cc.0, cc.1)
        }
    };
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the nightshift executable: {e}"))?;
    let mut opts = EvalOptions::new(exe);
    opts.arch = Some(arch.clone());
    opts.device = DEVICE;
    opts.timeout = s.timeout_s.map(Duration::from_secs_f64);
    opts.build_timeout = s.build_timeout_s.map(Duration::from_secs_f64);
    opts.seed_base = s.input_seed_base;
    opts.allow_unconfined_profiling = s.allow_unconfined_profiling;
    let trusted = wall::build_trusted(&toolchain, &opts, &task, &arch).map_err(|e| e.to_string())?;
    let bench = Bench::for_lane(&task, trusted, &arch, opts.clone(), s.energy);
    let Some(c) = job.candidate.as_ref() else {
        return match job.kind {
            JobKind::Baseline => Ok(verdict(evaluator::local(bench, s.simulated.as_ref()).baseline(DEVICE))),
            JobKind::Profile => {
                let built = bench.trusted.baseline.clone();
                Ok(profile(bench, &built, scratch.path()))
            }
            _ => Ok(LaneReply::Failed { message: "the job names no candidate".into(), env: false }),
        };
    };
    let name = std::path::Path::new(&c.file_name)
        .file_name()
        .filter(|n| n.to_str() == Some(c.file_name.as_str()))
        .ok_or_else(|| format!("the candidate's file name {:?} is not a plain name", c.file_name))?;
    let cand_dir = scratch.path().join("candidate");
    std::fs::create_dir_all(&cand_dir).map_err(|e| e.to_string())?;
    let source = cand_dir.join(name);
    std::fs::write(&source, &c.source).map_err(|e| format!("{}: {e}", source.display()))?;
    let spec = BuildSpec {
        task: &task,
        source: &source,
        trusted: false,
        arch: arch.clone(),
        extra_flags: c.flags.clone(),
        defines: c.defines.clone(),
    };
    let built = match wall::build_confined(&toolchain, &opts, &spec) {
        Ok(b) => b,
        Err(build::BuildError::Rejected { failure, dir, .. }) => {
            let v = Verdict::build_rejected(&task, &source, &arch, &failure, &dir);
            return Ok(LaneReply::Verdict { verdict: Box::new(v) });
        }
        Err(e) => return Err(format!("the build could not run on this host: {e}")),
    };
    let candidate = Candidate { source: c.file_name.clone(), defines: c.defines.clone(), flags: c.flags.clone() };
    match job.kind {
        JobKind::Baseline => Ok(LaneReply::Failed { message: "a baseline job with a candidate".into(), env: false }),
        JobKind::Judge => {
            let ev = evaluator::local(bench, s.simulated.as_ref());
            Ok(verdict(ev.judge(DEVICE, &built, &source, &candidate)))
        }
        JobKind::FinalCheck { seeds, sanitize } => {
            // The sanitizers run hosted, as on a local lane: this host must allow it.
            let sanitize = sanitize && s.simulated.is_none();
            if sanitize {
                check_tools(s.allow_unconfined_profiling, "compute-sanitizer")?;
            }
            let ev = evaluator::local(bench, s.simulated.as_ref());
            Ok(verdict(ev.final_check(DEVICE, &built, &source, &candidate, seeds, sanitize)))
        }
        JobKind::Profile => Ok(profile(bench, &built, scratch.path())),
    }
}

/// The preflight a local run makes for its hosted tools, made here for this host: the
/// tool is installed, and it can run confined (or the run waived that).
fn check_tools(allow_unconfined: bool, tool: &str) -> Result<(), String> {
    if crate::toolkit::toolchain::find_profiler(tool).is_none() {
        return Err(format!("{tool} is not installed on this host"));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the nightshift executable: {e}"))?;
    wall::check_hosting(&exe, allow_unconfined).map(|_| ()).map_err(|e| e.to_string())
}

/// ncu's counters of `built` on this lane's GPU, or why there are none.
fn profile(bench: Bench, built: &crate::toolkit::build::Built, scratch: &std::path::Path) -> LaneReply {
    let started = Instant::now();
    if let Err(note) = check_tools(bench.opts.allow_unconfined_profiling, "ncu") {
        return LaneReply::Profile { csv: None, note, seconds: started.elapsed().as_secs_f64() };
    }
    let dir = scratch.join("profile");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return LaneReply::Failed { message: format!("{}: {e}", dir.display()), env: true };
    }
    let (csv, note) = match GpuEvaluator::new(bench).counters(DEVICE, built, &dir) {
        Ok(c) => (Some(c.csv), String::new()),
        Err(note) => (None, note),
    };
    LaneReply::Profile { csv, note, seconds: started.elapsed().as_secs_f64() }
}

fn verdict(v: Result<Verdict, wall::EvalError>) -> LaneReply {
    match v {
        Ok(v) => LaneReply::Verdict { verdict: Box::new(v) },
        Err(e @ wall::EvalError::Env(_)) => LaneReply::Failed { message: e.to_string(), env: true },
        // A judgment that failed on its own (a worker bug, a GPU error outside the kernel):
        // that node fails, as it would on a local lane, and the run goes on.
        Err(e) => LaneReply::Failed { message: e.to_string(), env: false },
    }
}
