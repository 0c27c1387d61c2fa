//! The simulated evaluator (`optimize --simulate-gpu`, hidden: tests on machines without a
//! GPU). It still builds for real and still runs a judge process per judgment whose
//! sandboxed worker loads the candidate's library (so isolation is tested for real); only
//! the GPU work is replaced by an
//! outcome decided from the candidate: a `NIGHTSHIFT_SIM(speedup=X)` (with an optional
//! `, cv=C`: round-to-round timing noise, 1% unless given) or `NIGHTSHIFT_SIM(fail=CLASS)`
//! marker in its source (`final=env-error` makes the end-of-run check meet a broken
//! environment), else a deterministic speedup from a hash of its source and build
//! configuration. It profiles nothing and runs no sanitizer.

use super::evaluator::{judge_until_steady, Bench, Evaluator, Profiled};
use crate::generate::ParentProfile;
use crate::run::config::SimSettings;
use crate::run::events::Candidate;
use crate::toolkit::build::Built;
use crate::wall::protocol::{
    CheckSummary, EnergyReport, Failure, FailureClass, JudgeReport, Mode, Outcome, SideEnergy, SideTiming,
    TimingReport, REPEAT_CALLS,
};
use crate::wall::{EvalError, Verdict};
use regex::Regex;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::LazyLock;

static SIM_MARKER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"NIGHTSHIFT_SIM\(([^)]*)\)").unwrap());

/// The round-to-round noise of a simulated timing when the marker names none.
const SIM_CV: f64 = 0.01;

pub struct SimulatedEvaluator {
    bench: Bench,
    settings: SimSettings,
}

impl SimulatedEvaluator {
    pub fn new(bench: Bench, settings: SimSettings) -> SimulatedEvaluator {
        SimulatedEvaluator { bench, settings }
    }

    /// The judge reports `outcome` after the configured delay, touching no GPU.
    fn mode(&self, outcome: JudgeReport) -> Mode {
        Mode::Simulate { delay_ms: self.settings.delay_ms, outcome: Box::new(outcome) }
    }
}

impl Evaluator for SimulatedEvaluator {
    fn bench(&self) -> &Bench {
        &self.bench
    }

    fn baseline(&self, device: usize) -> Result<Verdict, EvalError> {
        let b = &self.bench;
        let outcome = simulated_report(1.0, SIM_CV / 2.0, b.energy);
        b.run(&b.task, &b.trusted.baseline, &b.task.baseline, &b.opts_for(device), self.mode(outcome))
    }

    fn judge(
        &self,
        device: usize,
        built: &Built,
        source_path: &Path,
        candidate: &Candidate,
    ) -> Result<Verdict, EvalError> {
        let b = &self.bench;
        let outcome = simulate(source_path, candidate, b.energy, false);
        let opts = b.opts_for(device);
        judge_until_steady(|| b.run(&b.task, built, source_path, &opts, self.mode(outcome.clone())))
    }

    fn final_check(
        &self,
        device: usize,
        built: &Built,
        source_path: &Path,
        candidate: &Candidate,
        seeds: u32,
        _sanitize: bool,
    ) -> Result<Verdict, EvalError> {
        let (task, mut opts) = self.bench.final_check_setup(device, seeds);
        opts.sanitize = false;
        let outcome = simulate(source_path, candidate, self.bench.energy, true);
        self.bench.run(&task, built, source_path, &opts, self.mode(outcome))
    }

    fn profile(&self, _device: usize, _built: &Built, _dir: &Path) -> Profiled {
        Profiled {
            profile: ParentProfile { note: "simulated run: no Nsight Compute counters".into(), ..Default::default() },
            csv: None,
            seconds: 0.0,
            sandbox: Vec::new(),
        }
    }

    fn sanitizer(&self) -> Option<bool> {
        None
    }
}

fn simulated_report(speedup: f64, cv: f64, energy: bool) -> JudgeReport {
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
    let mut r = JudgeReport::of(Outcome::Passed);
    r.check = Some(CheckSummary {
        cases: 3,
        calls: 6 + REPEAT_CALLS,
        repeat_calls: REPEAT_CALLS,
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
fn simulate(source_path: &Path, candidate: &Candidate, energy: bool, final_check: bool) -> JudgeReport {
    let source = std::fs::read_to_string(source_path).unwrap_or_default();
    if let Some(c) = SIM_MARKER.captures(&source) {
        let fields: std::collections::HashMap<&str, &str> =
            c[1].split(',').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.trim(), v.trim())).collect();
        if final_check && fields.get("final") == Some(&"env-error") {
            return JudgeReport::of(Outcome::EnvError { message: "simulated: the GPU fell off the bus".into() });
        }
        if let Some(class) = fields.get("fail") {
            let class: FailureClass = serde_json::from_value(serde_json::Value::String(class.to_string()))
                .unwrap_or(FailureClass::WrongAnswer);
            return JudgeReport::of(Outcome::Rejected {
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
