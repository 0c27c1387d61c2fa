//! The simulator: synthetic kernel-optimization landscapes on which search strategies
//! are compared at equal evaluation budgets.
//!
//! A landscape has a set of techniques. Each multiplies speed by its own factor
//! (log2 effect, some harmful), some pairs interact (an "enabler" that is slower alone
//! but unlocks a partner, or two that conflict), gains saturate, measurements are noisy,
//! and applying a technique breaks correctness with its own probability; a repair
//! succeeds half the time. The simulated generator follows the diagnosis (the technique
//! with the best one-step gain, right with some probability) or picks at random, and
//! with search memory it avoids techniques that keep failing. Like an LLM it never runs
//! out of proposals: some are lateral rewrites that change nothing that matters (and
//! every proposal is lateral once a kernel has every technique).

use crate::reward::{Outcome, RewardConfig};
use crate::rng::SplitMix64;
use crate::tree::{Backup, Config, Expansion, Intent, Tree};
use crate::Memory;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Landscape {
    pub techniques: usize,
    effect: Vec<f64>,
    fail: Vec<f64>,
    pairs: Vec<(usize, usize, f64)>,
    cap: f64,
    noise: f64,
    repair_success: f64,
}

impl Landscape {
    pub fn random(seed: u64) -> Landscape {
        let mut r = SplitMix64::new(seed ^ 0x5eed_1a4d);
        let t = 10;
        let mut effect: Vec<f64> = (0..t).map(|_| 0.1 + 0.35 * r.normal()).collect();
        let fail: Vec<f64> = (0..t).map(|_| 0.05 + 0.55 * r.unit()).collect();
        let mut pairs = Vec::new();
        let pick_pair = |r: &mut SplitMix64| loop {
            let (a, b) = (r.below(t), r.below(t));
            if a != b {
                return (a, b);
            }
        };
        for _ in 0..3 {
            // An enabler: slower alone, a large gain together with its partner.
            let (a, b) = pick_pair(&mut r);
            effect[a] = -0.3 + 0.15 * r.normal();
            pairs.push((a, b, 0.9 + 0.3 * r.normal()));
        }
        for _ in 0..2 {
            let (a, b) = pick_pair(&mut r);
            pairs.push((a, b, -0.6 + 0.2 * r.normal()));
        }
        Landscape { techniques: t, effect, fail, pairs, cap: 3.5, noise: 0.03, repair_success: 0.5 }
    }

    /// True log2 speedup of a set of applied techniques.
    pub fn value(&self, state: u32) -> f64 {
        let has = |t: usize| state & (1 << t) != 0;
        let mut raw: f64 = (0..self.techniques).filter(|t| has(*t)).map(|t| self.effect[t]).sum();
        raw += self.pairs.iter().filter(|(a, b, _)| has(*a) && has(*b)).map(|(_, _, v)| v).sum::<f64>();
        self.cap * (raw / self.cap).tanh()
    }

    /// The best any combination reaches (exhaustive).
    pub fn optimum(&self) -> f64 {
        (0..1u32 << self.techniques).map(|s| self.value(s)).fold(f64::NEG_INFINITY, f64::max)
    }
}

/// A simulated kernel: the techniques applied, and for a broken one the technique that broke it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimKernel {
    pub state: u32,
    pub broken_by: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GeneratorModel {
    /// Probability the diagnosis names the technique with the best one-step gain.
    pub diagnosis_accuracy: f64,
    /// Probability the generator follows the diagnosis.
    pub follow: f64,
    /// Probability a proposal is a lateral rewrite (same speed, may still break).
    pub lateral: f64,
    pub use_memory: bool,
}

impl Default for GeneratorModel {
    fn default() -> Self {
        GeneratorModel { diagnosis_accuracy: 0.6, follow: 0.7, lateral: 0.2, use_memory: true }
    }
}

/// What the generator does to a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    Apply(usize),
    Lateral,
}

const LATERAL_FAILURE: f64 = 0.2;

fn technique_name(t: usize) -> String {
    format!("t{t}")
}

/// How much the memory of earlier tries favors technique `t` (1 = neutral): what keeps
/// breaking is avoided, what paid before is preferred. A negative mean gain is not held
/// against a technique: its effect depends on what else is applied (enablers).
fn memory_weight(memory: &Memory, t: usize) -> f64 {
    match memory.technique(&technique_name(t)) {
        Some(s) if s.tries >= 3 && s.correct_rate() < 0.34 => 0.3,
        Some(s) if s.mean_delta().unwrap_or(0.0) > 0.1 => 1.5,
        _ => 1.0,
    }
}

impl GeneratorModel {
    /// What the generator does to `state`.
    pub fn propose(&self, land: &Landscape, state: u32, memory: Option<&Memory>, r: &mut SplitMix64) -> Move {
        let open: Vec<usize> = (0..land.techniques).filter(|t| state & (1 << t) == 0).collect();
        if open.is_empty() || r.unit() < self.lateral {
            return Move::Lateral;
        }
        Move::Apply(self.pick(land, state, &open, memory, r))
    }

    fn pick(&self, land: &Landscape, state: u32, open: &[usize], memory: Option<&Memory>, r: &mut SplitMix64) -> usize {
        let best_step = *open
            .iter()
            .max_by(|a, b| land.value(state | 1 << **a).total_cmp(&land.value(state | 1 << **b)))
            .expect("non-empty");
        let diagnosis = if r.unit() < self.diagnosis_accuracy { best_step } else { open[r.below(open.len())] };
        let weight = |t: usize| if self.use_memory { memory.map(|m| memory_weight(m, t)).unwrap_or(1.0) } else { 1.0 };
        if r.unit() < self.follow * weight(diagnosis).min(1.0) {
            return diagnosis;
        }
        let weights: Vec<f64> = open.iter().map(|t| weight(*t)).collect();
        let total: f64 = weights.iter().sum();
        let mut x = r.unit() * total;
        for (t, w) in open.iter().zip(&weights) {
            if x < *w {
                return *t;
            }
            x -= w;
        }
        *open.last().expect("non-empty")
    }
}

/// Evaluates a child: applies the move (or repairs), with noise and failures.
fn evaluate(
    land: &Landscape,
    parent: &SimKernel,
    kind: Expansion,
    mv: Option<Move>,
    r: &mut SplitMix64,
) -> (SimKernel, Outcome, f64) {
    let technique = match mv {
        Some(Move::Apply(t)) => Some(t),
        _ => None,
    };
    let (state, correct) = match (kind, parent.broken_by, mv) {
        (Expansion::Repair, Some(_), _) => (parent.state, r.unit() < land.repair_success),
        (_, _, Some(Move::Apply(t))) => (parent.state | 1 << t, r.unit() >= land.fail[t]),
        _ => (parent.state, r.unit() >= LATERAL_FAILURE),
    };
    let truth = land.value(state);
    if !correct {
        // A broken lateral rewrite is repaired back to the same state (technique 0 marks it).
        let broken_by = technique.or(parent.broken_by).or(Some(usize::MAX));
        return (SimKernel { state, broken_by }, Outcome::failed("wrong-answer"), truth);
    }
    let measured = 2f64.powf(truth + land.noise * r.normal());
    (SimKernel { state, broken_by: None }, Outcome::correct(measured), truth)
}

#[derive(Debug, Clone, PartialEq)]
pub enum Strategy {
    Mcts {
        config: Config,
        generator: GeneratorModel,
        parallel: usize,
    },
    /// Always refine the best kernel so far (one repair try after a failure).
    Greedy,
    /// N independent children of the baseline.
    BestOfN,
    /// Keep the `width` best kernels; expand each by two per round.
    Beam {
        width: usize,
    },
}

/// Best found by `strategy` on `land` within `budget` evaluations: the true log2 speedup
/// of the kernel with the best measured speedup (what a user would take).
pub fn run(strategy: &Strategy, land: &Landscape, budget: usize, seed: u64) -> f64 {
    let mut r = SplitMix64::new(seed);
    match strategy {
        Strategy::Mcts { config, generator, parallel } => {
            let mut tree = Tree::new(SimKernel { state: 0, broken_by: None }, config.clone(), seed ^ 0xA11CE);
            let mut truths = vec![0.0f64];
            let mut evals = 0;
            while evals < budget {
                let mut batch = Vec::new();
                for _ in 0..(*parallel).max(1).min(budget - evals) {
                    let Some(sel) = tree.select() else { break };
                    let parent = tree.node(sel.parent).payload.clone();
                    let mv = match sel.kind {
                        Expansion::Improve => Some(generator.propose(land, parent.state, Some(&tree.memory), &mut r)),
                        Expansion::Repair => None,
                    };
                    let name = match (mv, parent.broken_by) {
                        (Some(Move::Apply(t)), _) => technique_name(t),
                        (Some(Move::Lateral), _) => "lateral".into(),
                        (None, Some(t)) if t != usize::MAX => technique_name(t),
                        _ => "lateral".into(),
                    };
                    let id = tree.add_pending(&sel, parent.clone(), Intent { technique: name, ..Default::default() });
                    batch.push((id, parent, sel.kind, mv));
                }
                if batch.is_empty() {
                    break;
                }
                for (id, parent, kind, mv) in batch {
                    let (kernel, outcome, truth) = evaluate(land, &parent, kind, mv, &mut r);
                    tree.set_payload(id, kernel);
                    tree.record(id, outcome);
                    truths.resize(tree.len(), f64::NEG_INFINITY);
                    truths[id] = truth;
                    evals += 1;
                }
            }
            truths[tree.best().id]
        }
        Strategy::Greedy => {
            let generator = GeneratorModel { use_memory: false, ..Default::default() };
            let (mut best, mut best_measured, mut best_truth) = (SimKernel { state: 0, broken_by: None }, 1.0, 0.0);
            let mut evals = 0;
            while evals < budget {
                let mv = generator.propose(land, best.state, None, &mut r);
                let (child, outcome, truth) = evaluate(land, &best, Expansion::Improve, Some(mv), &mut r);
                evals += 1;
                let (child, outcome, truth) = if !outcome.correct && evals < budget {
                    evals += 1;
                    evaluate(land, &child, Expansion::Repair, None, &mut r)
                } else {
                    (child, outcome, truth)
                };
                if outcome.correct && outcome.speedup > best_measured {
                    best = child;
                    best_measured = outcome.speedup;
                    best_truth = truth;
                }
            }
            best_truth
        }
        Strategy::BestOfN => {
            let generator = GeneratorModel { use_memory: false, ..Default::default() };
            let root = SimKernel { state: 0, broken_by: None };
            let (mut best_measured, mut best_truth) = (1.0, 0.0);
            for _ in 0..budget {
                let mv = generator.propose(land, 0, None, &mut r);
                let (_, outcome, truth) = evaluate(land, &root, Expansion::Improve, Some(mv), &mut r);
                if outcome.correct && outcome.speedup > best_measured {
                    best_measured = outcome.speedup;
                    best_truth = truth;
                }
            }
            best_truth
        }
        Strategy::Beam { width } => {
            let generator = GeneratorModel { use_memory: false, ..Default::default() };
            // (kernel, measured speedup, truth)
            let mut beam = vec![(SimKernel { state: 0, broken_by: None }, 1.0, 0.0)];
            let mut all = beam.clone();
            let mut evals = 0;
            while evals < budget {
                let mut next = beam.clone();
                for (k, _, _) in &beam {
                    for _ in 0..2 {
                        if evals >= budget {
                            break;
                        }
                        let mv = generator.propose(land, k.state, None, &mut r);
                        let (child, outcome, truth) = evaluate(land, k, Expansion::Improve, Some(mv), &mut r);
                        evals += 1;
                        if outcome.correct {
                            next.push((child.clone(), outcome.speedup, truth));
                            all.push((child, outcome.speedup, truth));
                        }
                    }
                }
                next.sort_by(|a, b| b.1.total_cmp(&a.1));
                next.dedup_by(|a, b| a.0.state == b.0.state);
                next.truncate(*width);
                beam = next;
            }
            all.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map(|x| x.2).unwrap_or(0.0)
        }
    }
}

/// The strategies the simulator compares: MCTS, the baselines, and MCTS with each
/// feature switched off in turn.
pub fn strategies() -> Vec<(&'static str, Strategy)> {
    let base = Config::default();
    let g = GeneratorModel::default();
    let mcts =
        |config: Config, generator: GeneratorModel, parallel: usize| Strategy::Mcts { config, generator, parallel };
    vec![
        ("mcts", mcts(base.clone(), g, 4)),
        ("mcts sequential", mcts(base.clone(), g, 1)),
        ("greedy", Strategy::Greedy),
        ("best-of-n", Strategy::BestOfN),
        ("beam(4)", Strategy::Beam { width: 4 }),
        ("mcts -widening", mcts(Config { widen_alpha: 0.0, widen_k: 3.0, ..base.clone() }, g, 4)),
        ("mcts mean-backup", mcts(Config { backup: Backup::Mean, ..base.clone() }, g, 4)),
        ("mcts -asymmetric", mcts(Config { asymmetric: false, ..base.clone() }, g, 4)),
        ("mcts -log-reward", mcts(Config { reward: RewardConfig::linear(), ..base.clone() }, g, 4)),
        ("mcts +pruning", mcts(Config { pruning: true, ..base.clone() }, g, 4)),
        ("mcts -memory", mcts(base.clone(), GeneratorModel { use_memory: false, ..g }, 4)),
        ("mcts -virtual-loss", mcts(Config { virtual_loss: false, ..base.clone() }, g, 4)),
    ]
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub strategy: String,
    pub geomean: f64,
    pub ci: (f64, f64),
    /// Paired geometric-mean ratio against greedy, with its 95% interval.
    pub vs_greedy: f64,
    pub vs_greedy_ci: (f64, f64),
    /// Paired ratio against full MCTS: what switching a feature off does.
    pub vs_mcts: f64,
    pub vs_mcts_ci: (f64, f64),
    pub of_optimum: f64,
}

fn mean_ci(v: &[f64]) -> (f64, f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    let half = 1.96 * (var / n).sqrt();
    (mean, mean - half, mean + half)
}

/// Runs every strategy on `landscapes` seeded landscapes with `budget` evaluations each.
pub fn compare(landscapes: usize, budget: usize, seed: u64) -> Vec<Row> {
    let lands: Vec<(Landscape, f64)> = (0..landscapes)
        .map(|i| Landscape::random(seed.wrapping_add(i as u64 * 7919)))
        .map(|l| {
            let o = l.optimum();
            (l, o)
        })
        .collect();
    let strategies = strategies();
    let results: Vec<Vec<f64>> = strategies
        .iter()
        .map(|(_, s)| {
            lands
                .iter()
                .enumerate()
                .map(|(i, (l, _))| run(s, l, budget, seed ^ (i as u64).wrapping_mul(0x9E37_79B9)))
                .collect()
        })
        .collect();
    let greedy = strategies.iter().position(|(n, _)| *n == "greedy").expect("greedy is compared");
    let full = strategies.iter().position(|(n, _)| *n == "mcts").expect("mcts is compared");
    strategies
        .iter()
        .zip(&results)
        .map(|((name, _), vals)| {
            let (m, lo, hi) = mean_ci(vals);
            let diffs: Vec<f64> = vals.iter().zip(&results[greedy]).map(|(a, b)| a - b).collect();
            let (dm, dlo, dhi) = mean_ci(&diffs);
            let vs: Vec<f64> = vals.iter().zip(&results[full]).map(|(a, b)| a - b).collect();
            let (vm, vlo, vhi) = mean_ci(&vs);
            let of_opt: Vec<f64> = vals.iter().zip(&lands).map(|(v, (_, o))| v - o).collect();
            Row {
                strategy: name.to_string(),
                geomean: 2f64.powf(m),
                ci: (2f64.powf(lo), 2f64.powf(hi)),
                vs_greedy: 2f64.powf(dm),
                vs_greedy_ci: (2f64.powf(dlo), 2f64.powf(dhi)),
                vs_mcts: 2f64.powf(vm),
                vs_mcts_ci: (2f64.powf(vlo), 2f64.powf(vhi)),
                of_optimum: 2f64.powf(of_opt.iter().sum::<f64>() / of_opt.len() as f64),
            }
        })
        .collect()
}

pub fn table(rows: &[Row], landscapes: usize, budget: usize) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{landscapes} landscapes, {budget} evaluations each (MCTS: 4 expansions in flight unless sequential); 95% CIs"
    );
    let _ = writeln!(
        out,
        "{:<18} {:>9}  {:<16}  {:>9}  {:<16}  {:>8}  {:<16}  {:>7}",
        "strategy", "geomean", "CI", "vs greedy", "CI (paired)", "vs mcts", "CI (paired)", "of best"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<18} {:>8.3}x  [{:.3}, {:.3}]  {:>8.3}x  [{:.3}, {:.3}]  {:>7.3}x  [{:.3}, {:.3}]  {:>6.1}%",
            r.strategy,
            r.geomean,
            r.ci.0,
            r.ci.1,
            r.vs_greedy,
            r.vs_greedy_ci.0,
            r.vs_greedy_ci.1,
            r.vs_mcts,
            r.vs_mcts_ci.0,
            r.vs_mcts_ci.1,
            100.0 * r.of_optimum
        );
    }
    let mcts = rows.iter().find(|r| r.strategy == "mcts").map(|r| r.geomean).unwrap_or(f64::NAN);
    let greedy = rows.iter().find(|r| r.strategy == "greedy").map(|r| r.geomean).unwrap_or(f64::NAN);
    let _ = writeln!(out, "mcts/greedy geomean ratio: {:.3}", mcts / greedy);
    out
}

/// Share of the optimum reached by MCTS, greedy and beam at several budgets.
pub fn budget_table(landscapes: usize, budgets: &[usize], seed: u64) -> String {
    use std::fmt::Write;
    let lands: Vec<Landscape> =
        (0..landscapes).map(|i| Landscape::random(seed.wrapping_add(i as u64 * 7919))).collect();
    let optima: Vec<f64> = lands.iter().map(Landscape::optimum).collect();
    let all = strategies();
    let pick: Vec<&(&str, Strategy)> =
        all.iter().filter(|(n, _)| matches!(*n, "mcts" | "greedy" | "beam(4)")).collect();
    let mut out = format!("{:<10}", "budget");
    for (n, _) in &pick {
        let _ = write!(out, " {n:>10}");
    }
    out.push('\n');
    for &budget in budgets {
        let _ = write!(out, "{budget:<10}");
        for (_, s) in &pick {
            let share = lands
                .iter()
                .zip(&optima)
                .enumerate()
                .map(|(i, (l, o))| run(s, l, budget, seed ^ (i as u64).wrapping_mul(0x9E37_79B9)) - o)
                .sum::<f64>()
                / lands.len() as f64;
            let _ = write!(out, " {:>9.1}%", 100.0 * 2f64.powf(share));
        }
        out.push('\n');
    }
    out
}

/// A grid over the MCTS parameters, scored on landscapes disjoint from [`compare`]'s
/// (seeded differently), so the defaults are not fitted to the numbers they are judged by.
pub fn sweep(landscapes: usize, budget: usize, seed: u64) -> Vec<(Config, f64)> {
    let lands: Vec<Landscape> =
        (0..landscapes).map(|i| Landscape::random(seed.wrapping_add(1_000_003 + i as u64 * 104_729))).collect();
    let mut grid = Vec::new();
    for (widen_k, widen_alpha) in [(1.0, 0.3), (1.0, 0.5), (2.0, 0.3)] {
        for exploration in [0.2, 0.4] {
            for (pruning, dead_end_failures, stale_children) in [(false, 3, 5), (true, 3, 5), (true, 5, 8)] {
                for promising_boost in [1.5, 2.0] {
                    grid.push(Config {
                        widen_k,
                        widen_alpha,
                        exploration,
                        pruning,
                        dead_end_failures,
                        stale_children,
                        promising_boost,
                        ..Config::default()
                    });
                }
            }
        }
    }
    let mut out: Vec<(Config, f64)> = grid
        .into_iter()
        .map(|config| {
            let s = Strategy::Mcts { config: config.clone(), generator: GeneratorModel::default(), parallel: 4 };
            let mean = lands
                .iter()
                .enumerate()
                .map(|(i, l)| run(&s, l, budget, seed ^ (i as u64 + 17).wrapping_mul(0x2545_F491)))
                .sum::<f64>()
                / lands.len() as f64;
            (config, 2f64.powf(mean))
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}
