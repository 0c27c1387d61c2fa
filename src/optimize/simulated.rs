//! The simulated evaluator (`optimize --simulate-gpu`, hidden: tests on machines without a
//! GPU). It still builds for real and still runs a judge process per judgment whose
//! sandboxed worker loads the candidate's library (so isolation is tested for real); only
//! the GPU work is replaced by an
//! outcome decided from the candidate: a `NIGHTSHIFT_SIM(speedup=X)` (with an optional
//! `, cv=C`: round-to-round timing noise, 1% unless given) or `NIGHTSHIFT_SIM(fail=CLASS)`
//! marker in its source (`final=env-error` makes the end-of-run check meet a broken
//! environment), else a deterministic speedup from a hash of its source and build
//! configuration. A task that serves several shapes gets each timed alike; a
//! `shape.NAME=X` field gives shape NAME a speedup of its own, and a dispatched kernel
//! runs each shape at the speed of the variant its launcher picks there (a variant
//! without a marker, the baseline's kernel, at 1x). It profiles nothing and runs no
//! sanitizer.

use super::evaluator::{judge_until_steady, Bench, Evaluator, Profiled};
use crate::generate::ParentProfile;
use crate::run::config::SimSettings;
use crate::run::events::Candidate;
use crate::toolkit::build::Built;
use crate::wall::protocol::{
    CheckSummary, EnergyReport, Failure, FailureClass, JudgeReport, Mode, Outcome, ShapeTiming, SideEnergy, SideTiming,
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
        let outcome = simulated_report(&b.task, 1.0, &Default::default(), SIM_CV / 2.0, b.energy);
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
        let outcome = simulate(&b.task, source_path, candidate, b.energy, false);
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
        let outcome = simulate(&task, source_path, candidate, self.bench.energy, true);
        self.bench.run(&task, built, source_path, &opts, self.mode(outcome))
    }

    fn profile(
        &self,
        _device: usize,
        _built: &Built,
        _source: Option<(&Path, &crate::run::events::Candidate)>,
        _dir: &Path,
    ) -> Profiled {
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

/// A passed report: `speedup` at every timed shape but those `per_shape` names.
fn simulated_report(
    task: &crate::task::Task,
    speedup: f64,
    per_shape: &std::collections::HashMap<String, f64>,
    cv: f64,
    energy: bool,
) -> JudgeReport {
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
    let timing = |speedup: f64, size: String| TimingReport {
        baseline: side(baseline_ms, 0.0),
        candidate: side(baseline_ms / speedup, cv),
        speedup,
        size,
        input_sets: 2,
        floor_ms: Some(0.5),
        pct_of_floor: Some(50.0 * speedup),
        baseline_pct_of_floor: Some(50.0),
        baseline_outputs_ok: true,
        reliable: true,
        ..Default::default()
    };
    let energy_of = |speedup: f64| {
        energy.then(|| {
            let saving = speedup.powf(0.8);
            let side = |j: f64| SideEnergy {
                joules_per_call: j,
                joules_per_call_min: j,
                joules_per_call_max: j,
                watts: 500.0,
                samples: vec![],
            };
            EnergyReport { baseline: side(0.5), candidate: side(0.5 / saving), saving, note: "simulated".into() }
        })
    };
    r.timing = Some(timing(speedup, "simulated".into()));
    r.energy = energy_of(speedup);
    if task.serves_shapes() {
        r.served = task
            .served()
            .into_iter()
            .map(|shape| {
                let s = per_shape.get(&shape.name).copied().unwrap_or(speedup);
                ShapeTiming {
                    timing: timing(s, shape.size.to_string()),
                    energy: energy_of(s),
                    name: shape.name,
                    weight: shape.weight,
                }
            })
            .collect();
    }
    r.notes.push(crate::run::store::SIMULATED_NOTE.into());
    r
}

/// The simulated outcome of a candidate.
fn simulate(
    task: &crate::task::Task,
    source_path: &Path,
    candidate: &Candidate,
    energy: bool,
    final_check: bool,
) -> JudgeReport {
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
        let cv = fields
            .get("cv")
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|x| x.is_finite())
            .unwrap_or(SIM_CV)
            .clamp(0.0, 0.5);
        let parse = |text: &str| -> std::collections::HashMap<String, String> {
            SIM_MARKER
                .captures(text)
                .and_then(|c| c.get(1))
                .map_or("", |m| m.as_str())
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect()
        };
        let at_shape = |m: &std::collections::HashMap<String, String>, shape: &str| -> f64 {
            let own = m.get("speedup").and_then(|v| v.parse::<f64>().ok()).filter(|x| x.is_finite());
            m.get(&format!("shape.{shape}")).and_then(|v| v.parse::<f64>().ok()).or(own).unwrap_or(1.0).max(1e-3)
        };
        let mut per_shape: std::collections::HashMap<String, f64> = Default::default();
        let speedup;
        match dispatched(task, &source) {
            // A dispatched kernel: each shape runs at the speed of the variant its launcher
            // picks there (a variant without a marker, the baseline's kernel, at 1x).
            Some((variants, route)) => {
                let markers: Vec<_> = variants.iter().map(|v| parse(v)).collect();
                for (shape, v) in task.served().iter().zip(route) {
                    let m = &markers[v.min(markers.len() - 1)];
                    let x = if m.is_empty() { 1.0 } else { at_shape(m, &shape.name) };
                    per_shape.insert(shape.name.clone(), x);
                }
                speedup = per_shape.values().cloned().fold(1e-3, f64::max);
            }
            None => {
                let m = parse(&source);
                speedup = m
                    .get("speedup")
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|x| x.is_finite())
                    .unwrap_or(1.0)
                    .max(1e-3);
                for shape in task.served() {
                    per_shape.insert(shape.name.clone(), at_shape(&m, &shape.name));
                }
            }
        }
        return simulated_report(task, speedup, &per_shape, cv, energy);
    }
    let mut h = Sha256::new();
    h.update(source.as_bytes());
    h.update(candidate.config_label().as_bytes());
    let d = h.finalize();
    let u = u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as f64 / u32::MAX as f64;
    simulated_report(task, 0.85 + 0.4 * u, &Default::default(), SIM_CV, energy)
}

/// A dispatched kernel's variants (each one's text) and, per served shape, the variant its
/// launcher picks there: read from `rewrite::dispatch`'s layout (the `if (aP <= T)` tests in
/// order, the last variant past them), with the parameter's value at each shape from the
/// task. None for any other source.
fn dispatched(task: &crate::task::Task, source: &str) -> Option<(Vec<String>, Vec<usize>)> {
    static TEST: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"if \(a(\d+) <= (-?\d+)LL\)").unwrap());
    let mut variants = Vec::new();
    for k in 0.. {
        let open = format!("namespace nightshift_v{k} {{\n");
        let close = format!("}}  // namespace nightshift_v{k}\n");
        let Some(start) = source.find(&open) else { break };
        let end = source[start..].find(&close)? + start;
        variants.push(source[start + open.len()..end].to_string());
    }
    if variants.len() < 2 {
        return None;
    }
    let tail = &source[source.rfind("namespace nightshift_v")?..];
    let tests: Vec<(usize, i64)> =
        TEST.captures_iter(tail).filter_map(|c| Some((c[1].parse().ok()?, c[2].parse().ok()?))).collect();
    let param = tests.first()?.0;
    let crate::task::ArgRole::Scalar { value: crate::task::ScalarValue::Int(e) } = &task.args.get(param)?.role else {
        return None;
    };
    let expr = crate::task::expr::Expr::parse(e).ok()?;
    let route = task
        .served()
        .iter()
        .map(|shape| {
            let v = expr.eval(&shape.size.vars).unwrap_or(i64::MAX);
            tests.iter().position(|(_, t)| v <= *t).unwrap_or(tests.len())
        })
        .collect();
    Some((variants, route))
}
