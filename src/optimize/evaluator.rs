//! What a GPU lane does with a built candidate: judge it, profile it, re-verify it. One
//! interface, [`Evaluator`], with two implementations chosen once where the run starts
//! ([`for_run`]): [`GpuEvaluator`] here (a judge process per judgment, ncu for
//! profiles) and [`super::simulated::SimulatedEvaluator`], for tests on machines without a
//! GPU. Both judge against one [`Bench`]: the task, its trusted builds, the target and
//! the options every judgment starts from.

use super::simulated::SimulatedEvaluator;
use crate::generate::ParentProfile;
use crate::run::config::RunConfig;
use crate::run::events::Candidate;
use crate::task::Task;
use crate::toolkit::build::Built;
use crate::wall::protocol::{Failure, FailureClass, Mode};
use crate::wall::{self, EvalError, EvalOptions, TrustedBuilds, Verdict};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// A profile and its diagnoses, as a lane returns them.
#[derive(Debug, Clone, Default)]
pub struct Profiled {
    pub profile: ParentProfile,
    /// The raw CSV, to keep in the node's folder.
    pub csv: Option<String>,
    pub seconds: f64,
    /// The layers ncu ran in (empty when it did not run).
    pub sandbox: Vec<crate::wall::sandbox::Layer>,
}

/// What every judgment of a run is made against.
pub struct Bench {
    pub task: Task,
    pub trusted: TrustedBuilds,
    pub arch: String,
    /// Options every judgment starts from; the lane sets the device.
    pub opts: EvalOptions,
    /// Energy is measured (the objective is not time alone).
    pub energy: bool,
}

impl Bench {
    pub fn new(task: &Task, trusted: TrustedBuilds, arch: &str, opts: EvalOptions, cfg: &RunConfig) -> Bench {
        Bench {
            task: task.clone(),
            trusted,
            arch: arch.to_string(),
            opts,
            energy: !matches!(cfg.objective, search::Objective::Time),
        }
    }

    /// A remote lane's bench: the run's settings, this host's trusted builds and arch.
    pub fn for_lane(task: &Task, trusted: TrustedBuilds, arch: &str, opts: EvalOptions, energy: bool) -> Bench {
        Bench { task: task.clone(), trusted, arch: arch.to_string(), opts, energy }
    }

    pub(super) fn opts_for(&self, device: usize) -> EvalOptions {
        let mut o = self.opts.clone();
        o.device = device;
        o
    }

    /// The final check's task and options: more check seeds, inputs drawn afresh.
    pub(super) fn final_check_setup(&self, device: usize, seeds: u32) -> (Task, EvalOptions) {
        let mut task = self.task.clone();
        task.seeds = seeds.max(task.seeds);
        let mut opts = self.opts_for(device);
        opts.seed_base = wall::fresh_seed_base();
        (task, opts)
    }

    /// One worker's judgment of `built` against this bench.
    pub(super) fn run(
        &self,
        task: &Task,
        built: &Built,
        source_path: &Path,
        opts: &EvalOptions,
        mode: Mode,
    ) -> Result<Verdict, EvalError> {
        wall::judge(task, &self.trusted, built, source_path, opts, &self.arch, mode)
    }
}

/// Judging, profiling and re-verifying, on a GPU or simulated.
pub trait Evaluator: Send + Sync {
    /// What it judges against.
    fn bench(&self) -> &Bench;

    /// The root: the baseline checked against the reference and timed against itself.
    fn baseline(&self, device: usize) -> Result<Verdict, EvalError>;

    /// Judges one candidate in a judge process of its own; the baseline (checked once at
    /// the start of the run) is timed before and after it on the same GPU.
    fn judge(
        &self,
        device: usize,
        built: &Built,
        source_path: &Path,
        candidate: &Candidate,
    ) -> Result<Verdict, EvalError>;

    /// The end-of-run re-verification: more check seeds, fresh inputs, the sanitizers
    /// when `sanitize`.
    fn final_check(
        &self,
        device: usize,
        built: &Built,
        source_path: &Path,
        candidate: &Candidate,
        seeds: u32,
        sanitize: bool,
    ) -> Result<Verdict, EvalError>;

    /// ncu + SASS + diagnoses of a built kernel; files go to `dir`. `source` is the
    /// candidate's file and build options (None: the task's baseline), for a lane that
    /// builds it again on its own host.
    fn profile(&self, device: usize, built: &Built, source: Option<(&Path, &Candidate)>, dir: &Path) -> Profiled;

    /// Whether the final check can run compute-sanitizer: None when this evaluator runs
    /// no sanitizer at all, else whether the tool was found.
    fn sanitizer(&self) -> Option<bool>;
}

/// The evaluator the run's configuration asks for: simulated under `--simulate-gpu`,
/// else the GPU's.
pub fn for_run(bench: Bench, cfg: &RunConfig) -> Arc<dyn Evaluator> {
    local(bench, cfg.simulated.as_ref())
}

/// The evaluator of this host's GPUs (or the simulated one).
pub fn local(bench: Bench, simulated: Option<&crate::run::config::SimSettings>) -> Arc<dyn Evaluator> {
    match simulated {
        Some(settings) => Arc::new(SimulatedEvaluator::new(bench, settings.clone())),
        None => Arc::new(GpuEvaluator { bench }),
    }
}

fn unreliable(v: &Verdict) -> bool {
    v.passed() && v.timing.as_ref().is_some_and(|t| !t.reliable)
}

/// A timing that stayed noisy in one judgment gets one more judgment (the disturbance may
/// have passed); if that is noisy too, it is no measurement and must not steer the search.
pub(super) fn judge_until_steady(judge: impl Fn() -> Result<Verdict, EvalError>) -> Result<Verdict, EvalError> {
    let mut verdict = judge()?;
    if unreliable(&verdict) {
        let again = judge()?;
        let mut notes = std::mem::take(&mut verdict.notes);
        verdict = again;
        notes.push("judged again: the first judgment's timing was unreliable".into());
        notes.append(&mut verdict.notes);
        verdict.notes = notes;
        if unreliable(&verdict) {
            verdict.status = wall::Status::Rejected;
            verdict.failure = Some(Failure::new(
                FailureClass::NoisyTiming,
                "correct, but its timing stayed too noisy in two judgments to count as a measurement (another job on the GPU?)",
            ));
        }
    }
    Ok(verdict)
}

/// The real evaluator: each judgment a judge process with sandboxed workers on the GPU, profiles by ncu.
pub struct GpuEvaluator {
    bench: Bench,
}

impl GpuEvaluator {
    pub(super) fn new(bench: Bench) -> GpuEvaluator {
        GpuEvaluator { bench }
    }

    fn mode(&self, check_baseline: bool) -> Mode {
        Mode::Evaluate { time: true, energy: self.bench.energy, check_baseline }
    }

    /// ncu's counters of a built kernel (the CSV and the layers ncu ran in), or why there
    /// are none. A remote lane sends these back; the orchestrator diagnoses them.
    pub(super) fn counters(&self, device: usize, built: &Built, dir: &Path) -> Result<Counters, String> {
        let b = &self.bench;
        // The task's own baseline (the root) may load what its task lets a baseline link.
        let trusted = built.key == b.trusted.baseline.key;
        match crate::wall::judge::profile::profile_built(
            &b.task,
            built.clone(),
            trusted,
            &b.opts_for(device),
            crate::wall::judge::profile::MetricSet::Required,
            dir,
        ) {
            Ok(p) => Ok(Counters { csv: p.csv, sandbox: p.sandbox }),
            Err(crate::wall::judge::profile::ProfileFailure::Rejected(f)) => {
                Err(format!("the kernel failed under ncu: {}: {}", f.class, f.message))
            }
            Err(crate::wall::judge::profile::ProfileFailure::Error(e)) => Err(format!("profiling failed: {e}")),
        }
    }
}

/// A kernel's Nsight Compute counters as ncu wrote them.
pub struct Counters {
    pub csv: String,
    pub sandbox: Vec<crate::wall::sandbox::Layer>,
}

impl Profiled {
    pub(super) fn unprofiled(note: String, started: Instant) -> Profiled {
        Profiled {
            profile: ParentProfile { note, ..Default::default() },
            csv: None,
            seconds: started.elapsed().as_secs_f64(),
            sandbox: Vec::new(),
        }
    }
}

/// The diagnoses of `built` from its counters and its own SASS.
pub(super) fn diagnose(bench: &Bench, built: &Built, counters: Counters, started: Instant) -> Profiled {
    let profile = match heuristics::ncu::parse(&counters.csv) {
        Ok(p) => p,
        Err(e) => return Profiled::unprofiled(format!("the ncu CSV does not parse: {e}"), started),
    };
    let sass = built
        .sass_lines
        .clone()
        .or(built.sass.clone())
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|t| sass::analyze_all(&sass::parse(&t)))
        .unwrap_or_default();
    let hints = bench.task.diagnosis_hints();
    let report = heuristics::diagnose_profile(&profile, &sass, Some(&built.ptxas), &hints, None);
    let raw: Vec<String> = profile.launches.iter().map(heuristics::render::raw_counters).collect();
    Profiled {
        profile: ParentProfile { diagnoses: Some(report), raw: Some(raw.join("\n")), ..Default::default() },
        csv: Some(counters.csv),
        seconds: started.elapsed().as_secs_f64(),
        sandbox: counters.sandbox,
    }
}

impl Evaluator for GpuEvaluator {
    fn bench(&self) -> &Bench {
        &self.bench
    }

    fn baseline(&self, device: usize) -> Result<Verdict, EvalError> {
        let b = &self.bench;
        b.run(&b.task, &b.trusted.baseline, &b.task.baseline, &b.opts_for(device), self.mode(true))
    }

    fn judge(
        &self,
        device: usize,
        built: &Built,
        source_path: &Path,
        _candidate: &Candidate,
    ) -> Result<Verdict, EvalError> {
        let b = &self.bench;
        let opts = b.opts_for(device);
        judge_until_steady(|| b.run(&b.task, built, source_path, &opts, self.mode(false)))
    }

    fn final_check(
        &self,
        device: usize,
        built: &Built,
        source_path: &Path,
        _candidate: &Candidate,
        seeds: u32,
        sanitize: bool,
    ) -> Result<Verdict, EvalError> {
        let (task, mut opts) = self.bench.final_check_setup(device, seeds);
        opts.sanitize = sanitize;
        self.bench.run(&task, built, source_path, &opts, self.mode(true))
    }

    fn profile(&self, device: usize, built: &Built, _source: Option<(&Path, &Candidate)>, dir: &Path) -> Profiled {
        let started = Instant::now();
        match self.counters(device, built, dir) {
            Ok(counters) => diagnose(&self.bench, built, counters, started),
            Err(note) => Profiled::unprofiled(note, started),
        }
    }

    fn sanitizer(&self) -> Option<bool> {
        Some(crate::toolkit::toolchain::find_profiler("compute-sanitizer").is_some())
    }
}
