//! What a GPU lane does with a built candidate: judge it, profile it, re-verify it. One
//! interface, two implementations: the real one (a fresh isolated worker per judgment,
//! ncu for profiles) and a simulated one for tests on machines without a GPU. The
//! simulated evaluator still builds for real and still runs every candidate's library in
//! a fresh isolated worker (so isolation is tested for real); only the GPU work is
//! replaced by an outcome decided from the candidate: a `NIGHTSHIFT_SIM(speedup=X)` (with
//! an optional `, cv=C`: round-to-round timing noise, 1% unless given) or
//! `NIGHTSHIFT_SIM(fail=CLASS)` marker in its source (`final=env-error` makes the end-of-run
//! check meet a broken environment), else a deterministic speedup from a
//! hash of its source and build configuration.

use crate::generate::ParentProfile;
use crate::run::config::{RunConfig, SimSettings};
use crate::run::events::Candidate;
use crate::task::Task;
use crate::toolkit::build::Built;
use crate::wall::protocol::{
    CheckSummary, EnergyReport, Failure, FailureClass, HostCheck, Mode, Outcome, SideEnergy, SideTiming, TimingReport,
    WorkerReport,
};
use crate::wall::{self, EvalError, EvalOptions, TrustedBuilds, Verdict};
use regex::Regex;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::LazyLock;
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

pub struct Evaluator {
    pub task: Task,
    pub trusted: TrustedBuilds,
    pub arch: String,
    /// Options every judgment starts from; the lane sets the device.
    pub opts: EvalOptions,
    pub energy: bool,
    pub sim: Option<SimSettings>,
}

fn unreliable(v: &Verdict) -> bool {
    v.passed() && v.timing.as_ref().is_some_and(|t| !t.reliable)
}

static SIM_MARKER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"NIGHTSHIFT_SIM\(([^)]*)\)").unwrap());

/// The round-to-round noise of a simulated timing when the marker names none.
const SIM_CV: f64 = 0.01;

impl Evaluator {
    pub fn new(task: &Task, trusted: TrustedBuilds, arch: &str, opts: EvalOptions, cfg: &RunConfig) -> Evaluator {
        Evaluator {
            task: task.clone(),
            trusted,
            arch: arch.to_string(),
            opts,
            energy: !matches!(cfg.objective, search::Objective::Time),
            sim: cfg.simulated.clone(),
        }
    }

    fn opts_for(&self, device: usize) -> EvalOptions {
        let mut o = self.opts.clone();
        o.device = device;
        o
    }

    fn mode(&self, simulated: Option<WorkerReport>, check_baseline: bool) -> Mode {
        match (simulated, &self.sim) {
            (Some(outcome), Some(s)) => Mode::Simulate { delay_ms: s.delay_ms, outcome: Box::new(outcome) },
            _ => Mode::Evaluate { time: true, energy: self.energy, check_baseline },
        }
    }

    /// The root: the baseline checked against the reference and timed against itself.
    pub fn baseline(&self, device: usize) -> Result<Verdict, EvalError> {
        let b = &self.trusted.baseline;
        let sim = self.sim.as_ref().map(|_| simulated_report(1.0, SIM_CV / 2.0, self.energy));
        wall::judge(
            &self.task,
            &self.trusted,
            b,
            &self.task.baseline,
            &self.opts_for(device),
            &self.arch,
            self.mode(sim, true),
        )
    }

    /// Judges one candidate: a fresh worker; the baseline (checked once at the start of
    /// the run) is timed beside it on the same GPU.
    pub fn judge(
        &self,
        device: usize,
        built: &Built,
        source_path: &Path,
        candidate: &Candidate,
    ) -> Result<Verdict, EvalError> {
        let sim = self.sim.as_ref().map(|_| simulate(source_path, candidate, self.energy, false));
        let opts = self.opts_for(device);
        let judge = || {
            wall::judge(&self.task, &self.trusted, built, source_path, &opts, &self.arch, self.mode(sim.clone(), false))
        };
        let mut verdict = judge()?;
        // A timing that stayed noisy within the worker gets one more worker (the disturbance
        // may have passed); if that is noisy too, it is no measurement and must not steer
        // the search.
        if unreliable(&verdict) {
            let again = judge()?;
            let mut notes = std::mem::take(&mut verdict.notes);
            verdict = again;
            notes.push("judged again: the first judgment's timing was unreliable".into());
            notes.append(&mut verdict.notes);
            verdict.notes = notes;
            if unreliable(&verdict) {
                verdict.status = wall::Status::Rejected;
                verdict.failure = Some(crate::wall::protocol::Failure::new(
                    crate::wall::protocol::FailureClass::NoisyTiming,
                    "correct, but its timing stayed too noisy in two workers to count as a measurement (another job on the GPU?)",
                ));
            }
        }
        Ok(verdict)
    }

    /// The end-of-run re-verification: more check seeds, fresh inputs, the sanitizers.
    pub fn final_check(
        &self,
        device: usize,
        built: &Built,
        source_path: &Path,
        candidate: &Candidate,
        seeds: u32,
        sanitize: bool,
    ) -> Result<Verdict, EvalError> {
        let mut task = self.task.clone();
        task.seeds = seeds.max(task.seeds);
        let mut opts = self.opts_for(device);
        opts.seed_base = wall::fresh_seed_base();
        opts.sanitize = sanitize && self.sim.is_none();
        let sim = self.sim.as_ref().map(|_| simulate(source_path, candidate, self.energy, true));
        wall::judge(&task, &self.trusted, built, source_path, &opts, &self.arch, self.mode(sim, true))
    }

    /// ncu + SASS + diagnoses of a built kernel; files go to `dir`.
    pub fn profile(&self, device: usize, built: &Built, dir: &Path) -> Profiled {
        let started = Instant::now();
        if self.sim.is_some() {
            return Profiled {
                profile: ParentProfile {
                    note: "simulated run: no Nsight Compute counters".into(),
                    ..Default::default()
                },
                csv: None,
                seconds: 0.0,
                sandbox: Vec::new(),
            };
        }
        let fail = |note: String| Profiled {
            profile: ParentProfile { note, ..Default::default() },
            csv: None,
            seconds: started.elapsed().as_secs_f64(),
            sandbox: Vec::new(),
        };
        let profiled = match crate::toolkit::profile::profile_built(
            &self.task,
            built.clone(),
            &self.opts_for(device),
            crate::toolkit::profile::MetricSet::Required,
            dir,
        ) {
            Ok(p) => p,
            Err(crate::toolkit::profile::ProfileFailure::Rejected(f)) => {
                return fail(format!("the kernel failed under ncu: {}: {}", f.class, f.message))
            }
            Err(crate::toolkit::profile::ProfileFailure::Error(e)) => return fail(format!("profiling failed: {e}")),
        };
        let profile = match heuristics::ncu::parse(&profiled.csv) {
            Ok(p) => p,
            Err(e) => return fail(format!("the ncu CSV does not parse: {e}")),
        };
        let sass = built
            .sass_lines
            .clone()
            .or(built.sass.clone())
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|t| sass::analyze_all(&sass::parse(&t)))
            .unwrap_or_default();
        let hints = self.task.diagnosis_hints();
        let report = heuristics::diagnose_profile(&profile, &sass, Some(&built.ptxas), &hints, None);
        let raw: Vec<String> = profile.launches.iter().map(heuristics::render::raw_counters).collect();
        Profiled {
            profile: ParentProfile { diagnoses: Some(report), raw: Some(raw.join("\n")), ..Default::default() },
            csv: Some(profiled.csv),
            seconds: started.elapsed().as_secs_f64(),
            sandbox: profiled.sandbox,
        }
    }
}

fn simulated_report(speedup: f64, cv: f64, energy: bool) -> WorkerReport {
    let baseline_ms = 1.0;
    // Five rounds whose medians scatter with a sample deviation of `cv` around the
    // median, the baseline's rounds steady: the speedup's interval is as wide as `cv`.
    const SCATTER: [f64; 5] = [0.0, 1.26, -1.26, 0.63, -0.63];
    let side = |ms: f64, cv: f64| SideTiming {
        median_ms: ms,
        mean_ms: ms,
        min_ms: ms * (1.0 - 1.26 * cv),
        max_ms: ms * (1.0 + 1.26 * cv),
        cv,
        samples: 100,
        round_medians_ms: SCATTER.iter().map(|z| ms * (1.0 + cv * z)).collect(),
    };
    let mut r = WorkerReport::of(Outcome::Passed);
    r.check = Some(CheckSummary {
        cases: 3,
        calls: 6 + crate::wall::protocol::REPEAT_CALLS,
        repeat_calls: crate::wall::protocol::REPEAT_CALLS,
        elements_compared: 1000,
        max_abs_err: 0.0,
        max_rel_err: 0.0,
    });
    r.timing = Some(TimingReport {
        baseline: side(baseline_ms, 0.0),
        candidate: side(baseline_ms / speedup, cv),
        speedup,
        size: "simulated".into(),
        input_sets: 2,
        host_check: HostCheck { calls: 10, host_ms_per_call: baseline_ms, event_ms_per_call: baseline_ms, ok: true },
        floor_ms: Some(0.5),
        pct_of_floor: Some(50.0 * speedup),
        baseline_pct_of_floor: Some(50.0),
        baseline_outputs_ok: true,
        reliable: true,
        ..Default::default()
    });
    if energy {
        let saving = speedup.powf(0.8);
        let side = |j: f64| SideEnergy {
            joules_per_call: j,
            joules_per_call_min: j,
            joules_per_call_max: j,
            watts: 500.0,
            samples: vec![],
        };
        r.energy =
            Some(EnergyReport { baseline: side(0.5), candidate: side(0.5 / saving), saving, note: "simulated".into() });
    }
    r.notes.push(crate::run::store::SIMULATED_NOTE.into());
    r
}

/// The simulated outcome of a candidate.
fn simulate(source_path: &Path, candidate: &Candidate, energy: bool, final_check: bool) -> WorkerReport {
    let source = std::fs::read_to_string(source_path).unwrap_or_default();
    if let Some(c) = SIM_MARKER.captures(&source) {
        let fields: std::collections::HashMap<&str, &str> =
            c[1].split(',').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.trim(), v.trim())).collect();
        if final_check && fields.get("final") == Some(&"env-error") {
            return WorkerReport::of(Outcome::EnvError { message: "simulated: the GPU fell off the bus".into() });
        }
        if let Some(class) = fields.get("fail") {
            let class: FailureClass = serde_json::from_value(serde_json::Value::String(class.to_string()))
                .unwrap_or(FailureClass::WrongAnswer);
            return WorkerReport::of(Outcome::Rejected {
                failure: Failure::new(class, format!("simulated {class}: the source asks for it")),
            });
        }
        let number = |k: &str| fields.get(k).and_then(|v| v.parse::<f64>().ok()).filter(|x| x.is_finite());
        let speedup = number("speedup").unwrap_or(1.0).max(1e-3);
        return simulated_report(speedup, number("cv").unwrap_or(SIM_CV).clamp(0.0, 0.5), energy);
    }
    let mut h = Sha256::new();
    h.update(source.as_bytes());
    h.update(candidate.config_label().as_bytes());
    let d = h.finalize();
    let u = u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as f64 / u32::MAX as f64;
    simulated_report(0.85 + 0.4 * u, SIM_CV, energy)
}
