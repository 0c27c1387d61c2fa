//! The built-in tuner: moves over the task's `[tune]` knobs (set with `-D`) and a few
//! compiler flags that cannot change a correct kernel's meaning (`-maxrregcount`,
//! `--extra-device-vectorization`; `--use_fast_math` only where the task's tolerance can
//! absorb approximate transcendentals). A child differs from its parent in one dimension.
//!
//! The diagnoses decide which move comes first: each tool votes for the direction an
//! expert would try (low occupancy or an under-filled grid: smaller blocks or tiles;
//! register pressure: a register cap; scalar or latency-bound memory access: larger blocks
//! and vectorization; special-function or conversion cost: fast math), weighted by the
//! share of time the tool says its fix saves. Without diagnoses the order is a seeded
//! shuffle. Never proposes a configuration already tried anywhere in the run, and is
//! deterministic for a seed.

use super::{Kernel, Proposal, Request};
use crate::optimize::config::Guidance;
use crate::optimize::events::Candidate;
use crate::task::Task;
use search::rng::SplitMix64;
use search::Expansion;
use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

const REGISTER_CAPS: [&str; 3] = ["32", "64", "128"];
const VECTORIZE: &str = "--extra-device-vectorization";
const FAST_MATH: &str = "--use_fast_math";

#[derive(Debug, Clone, PartialEq)]
enum DimKind {
    /// A `-D` macro of the task.
    Knob,
    RegisterCap,
    Vectorize,
    FastMath,
}

#[derive(Debug, Clone)]
struct Dim {
    name: String,
    kind: DimKind,
    /// None: leave it as the source has it.
    values: Vec<Option<String>>,
}

/// One point of the space: a value index per dimension.
type Config = Vec<usize>;

pub struct Tuner {
    dims: Vec<Dim>,
    baseline: Config,
    tried: Mutex<HashSet<String>>,
    seed: u64,
    guidance: Guidance,
}

/// Whether `--use_fast_math` can pass this task's check: approximate `__expf` and friends
/// are good to about 2^-21 relative plus a few ulp, and flush denormals to zero, so only
/// tolerances of at least 1e-3 relative, or 16-bit outputs, can absorb them.
pub fn fast_math_allowed(task: &Task) -> bool {
    use crate::task::types::ElemType;
    let outs = crate::task::output_elems(task);
    let sixteen = !outs.is_empty() && outs.iter().all(|e| matches!(e, ElemType::F16 | ElemType::Bf16));
    sixteen || task.tolerance.rtol >= 1e-3
}

/// The value the baseline gives `name` when it is not set: `#define NAME VALUE`.
fn source_default(source: &str, name: &str) -> Option<String> {
    let re = regex::Regex::new(&format!(r"(?m)^\s*#\s*define\s+{}\s+(\S+)", regex::escape(name))).ok()?;
    re.captures(source).map(|c| c[1].to_string())
}

fn numeric(v: &Option<String>) -> Option<f64> {
    v.as_deref().and_then(|s| s.parse::<f64>().ok())
}

impl Tuner {
    pub fn new(task: &Task, baseline_source: &str, seed: u64, guidance: Guidance) -> Tuner {
        let mut dims = Vec::new();
        let mut baseline = Vec::new();
        for (name, values) in &task.tune {
            let default = source_default(baseline_source, name);
            let mut vals: Vec<Option<String>> = values.iter().cloned().map(Some).collect();
            let start = match default.as_ref().and_then(|d| values.iter().position(|v| v == d)) {
                Some(i) => i,
                None => {
                    vals.insert(0, None);
                    0
                }
            };
            dims.push(Dim { name: name.clone(), kind: DimKind::Knob, values: vals });
            baseline.push(start);
        }
        let mut caps: Vec<Option<String>> = vec![None];
        caps.extend(REGISTER_CAPS.iter().map(|c| Some(format!("-maxrregcount={c}"))));
        dims.push(Dim { name: "maxrregcount".into(), kind: DimKind::RegisterCap, values: caps });
        baseline.push(0);
        dims.push(Dim {
            name: "vectorize".into(),
            kind: DimKind::Vectorize,
            values: vec![None, Some(VECTORIZE.into())],
        });
        baseline.push(0);
        if fast_math_allowed(task) {
            dims.push(Dim {
                name: "fast-math".into(),
                kind: DimKind::FastMath,
                values: vec![None, Some(FAST_MATH.into())],
            });
            baseline.push(0);
        }
        let t = Tuner { dims, baseline: baseline.clone(), tried: Mutex::new(HashSet::new()), seed, guidance };
        t.tried.lock().unwrap().insert(t.key(&baseline));
        t
    }

    /// The number of configurations in the space.
    pub fn space_size(&self) -> usize {
        self.dims.iter().map(|d| d.values.len()).product()
    }

    fn candidate(&self, c: &Config) -> (BTreeMap<String, String>, Vec<String>) {
        let mut defines = BTreeMap::new();
        let mut flags = Vec::new();
        for (d, &i) in self.dims.iter().zip(c) {
            let (Some(v), false) = (&d.values[i], d.kind == DimKind::Knob && i == self.baseline_index(d)) else {
                continue;
            };
            match d.kind {
                DimKind::Knob => {
                    defines.insert(d.name.clone(), v.clone());
                }
                _ => flags.push(v.clone()),
            }
        }
        (defines, flags)
    }

    fn baseline_index(&self, d: &Dim) -> usize {
        let i = self.dims.iter().position(|x| x.name == d.name).unwrap_or(0);
        self.baseline[i]
    }

    fn key(&self, c: &Config) -> String {
        let (defines, flags) = self.candidate(c);
        Candidate { source: String::new(), defines, flags }.config_label()
    }

    /// The configuration a candidate stands for (None if it is not one of ours).
    fn config_of(&self, cand: &Candidate) -> Option<Config> {
        let mut c = Vec::new();
        for (i, d) in self.dims.iter().enumerate() {
            let idx = match d.kind {
                DimKind::Knob => match cand.defines.get(&d.name) {
                    Some(v) => d.values.iter().position(|x| x.as_deref() == Some(v.as_str()))?,
                    None => self.baseline[i],
                },
                _ => d.values.iter().position(|x| x.as_ref().is_some_and(|f| cand.flags.contains(f))).unwrap_or(0),
            };
            c.push(idx);
        }
        Some(c)
    }

    pub fn remember(&self, cand: &Candidate) {
        if let Some(c) = self.config_of(cand) {
            let key = self.key(&c);
            self.tried.lock().unwrap().insert(key);
        }
    }

    /// How much the diagnoses favour moving dimension `d` from value `from` to `to`, and
    /// the tool that favours it most.
    fn vote(&self, d: &Dim, from: usize, to: usize, diagnoses: &[(String, f64)]) -> (f64, Option<String>) {
        let dir = match (numeric(&d.values[from]), numeric(&d.values[to])) {
            (Some(a), Some(b)) => (b - a).signum(),
            // Leaving a knob at the source's default: unknown direction.
            _ => match d.kind {
                DimKind::RegisterCap => {
                    if to == 0 {
                        1.0 // removing the cap gives the compiler more registers
                    } else if from == 0 {
                        -1.0
                    } else {
                        (to as f64 - from as f64).signum()
                    }
                }
                _ => {
                    if to > from {
                        1.0
                    } else {
                        -1.0
                    }
                }
            },
        };
        let mut total = 0.0;
        let mut best: Option<(f64, String)> = None;
        for (tool, score) in diagnoses {
            let want: f64 = match (&d.kind, tool.as_str()) {
                (DimKind::Knob, "low-occupancy" | "under-filled-grid" | "barrier-stalls" | "shared-bank-conflicts") => {
                    -1.0
                }
                (DimKind::Knob, "register-pressure" | "local-memory") => -0.5,
                (
                    DimKind::Knob,
                    "memory-latency-bound"
                    | "launch-overhead"
                    | "scalar-global-access"
                    | "narrow-global-access"
                    | "uncoalesced-global"
                    | "redundant-dram-traffic"
                    | "redundant-l2-traffic",
                ) => 1.0,
                (DimKind::RegisterCap, "register-pressure" | "low-occupancy") => -1.0,
                (DimKind::RegisterCap, "local-memory") => 1.0,
                (
                    DimKind::Vectorize,
                    "scalar-global-access" | "narrow-global-access" | "memory-latency-bound" | "uncoalesced-global",
                ) => 1.0,
                (
                    DimKind::FastMath,
                    "special-function-bound" | "accurate-math" | "conversion-overhead" | "fp64-in-fp32",
                ) => 1.0,
                _ => 0.0,
            };
            let v = want * dir * score;
            total += v;
            if v > 0.0 && best.as_ref().is_none_or(|(b, _)| v > *b) {
                best = Some((v, tool.clone()));
            }
        }
        (total, best.map(|(_, t)| t))
    }

    pub fn propose(&self, req: &Request) -> Proposal {
        if req.kind == Expansion::Repair {
            return Proposal::Nothing("the tuner does not repair failed configurations".into());
        }
        let Some(parent) = self.config_of(&req.parent_candidate) else {
            return Proposal::Nothing("the parent was not written by the tuner".into());
        };
        let diagnoses: Vec<(String, f64)> = match (self.guidance, &req.profile.diagnoses) {
            (Guidance::Tools, Some(report)) => {
                let mut by_tool: BTreeMap<String, f64> = BTreeMap::new();
                for k in &report.kernels {
                    for d in &k.diagnoses {
                        let e = by_tool.entry(d.tool.clone()).or_default();
                        *e = e.max(d.score);
                    }
                }
                by_tool.into_iter().collect()
            }
            _ => Vec::new(),
        };
        let mut rng =
            SplitMix64::new(self.seed ^ (req.parent as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ req.node as u64);
        let mut moves = Vec::new();
        for (di, d) in self.dims.iter().enumerate() {
            for to in 0..d.values.len() {
                if to == parent[di] {
                    continue;
                }
                let mut c = parent.clone();
                c[di] = to;
                let (vote, tool) = self.vote(d, parent[di], to, &diagnoses);
                // Neighbouring values first within a dimension; jitter breaks ties by seed.
                let distance = (to as f64 - parent[di] as f64).abs();
                let score = vote - 0.01 * distance + 0.001 * rng.unit();
                moves.push((score, di, to, c, tool));
            }
        }
        moves.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut tried = self.tried.lock().unwrap();
        for (_, di, to, c, tool) in moves {
            let key = self.key(&c);
            if tried.contains(&key) {
                continue;
            }
            tried.insert(key);
            let d = &self.dims[di];
            let from = &d.values[parent[di]];
            let technique = match d.kind {
                DimKind::Knob => {
                    let up = match (numeric(from), numeric(&d.values[to])) {
                        (Some(a), Some(b)) => b > a,
                        _ => to > parent[di],
                    };
                    format!("{}-{}", d.name, if up { "up" } else { "down" })
                }
                DimKind::RegisterCap => "register-cap".into(),
                DimKind::Vectorize => "vectorize".into(),
                DimKind::FastMath => "fast-math".into(),
            };
            let (defines, flags) = self.candidate(&c);
            return Proposal::Kernel(Kernel { source: req.parent_source.clone(), defines, flags, technique, tool });
        }
        Proposal::Nothing("every neighbouring configuration has been tried".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::ParentProfile;
    use crate::optimize::events::NodeSummary;
    use std::sync::Arc;

    fn task() -> Task {
        Task::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/softmax")).unwrap()
    }

    fn request(t: &Task, parent: Candidate, report: Option<heuristics::Report>, guidance: Guidance) -> Request {
        Request {
            node: 5,
            parent: 0,
            kind: Expansion::Improve,
            task: Arc::new(t.clone()),
            parent_candidate: parent,
            parent_source: std::fs::read_to_string(&t.baseline).unwrap(),
            parent_summary: NodeSummary::default(),
            baseline_summary: NodeSummary::default(),
            failure_detail: None,
            profile: ParentProfile { diagnoses: report, raw: None, note: String::new() },
            guidance,
            memory: String::new(),
            floor_ms: None,
            seed: 1,
        }
    }

    fn report(tool: &str, score: f64) -> heuristics::Report {
        let mut k: heuristics::KernelDiagnosis = serde_json::from_value(serde_json::json!({
            "name": "k", "roofline": {"class": "latency-bound", "limiter": "", "reason": "", "duration_us": null,
            "dram_pct": null, "memory_pct": null, "compute_pct": null}, "diagnoses": [], "tools": []
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        k.diagnoses.push(heuristics::Diagnosis::new(tool, score));
        heuristics::Report { kernels: vec![k] }
    }

    fn kernel(p: Proposal) -> Kernel {
        match p {
            Proposal::Kernel(k) => k,
            other => panic!("expected a kernel, got {other:?}"),
        }
    }

    #[test]
    fn the_baseline_default_is_read_from_the_source_and_not_reproposed() {
        let t = task();
        let tuner = Tuner::new(&t, &std::fs::read_to_string(&t.baseline).unwrap(), 1, Guidance::Tools);
        let base = Candidate { source: "baseline.cu".into(), defines: BTreeMap::new(), flags: vec![] };
        let mut seen = HashSet::new();
        seen.insert("defaults".to_string());
        // Walk the whole neighbourhood of the baseline: every proposal is new.
        loop {
            match tuner.propose(&request(&t, base.clone(), None, Guidance::None)) {
                Proposal::Kernel(k) => {
                    let label = Candidate { source: String::new(), defines: k.defines.clone(), flags: k.flags.clone() }
                        .config_label();
                    assert!(seen.insert(label.clone()), "proposed twice: {label}");
                    assert_ne!(k.defines.get("BLOCK").map(String::as_str), Some("256"), "256 is the source default");
                }
                Proposal::Nothing(_) => break,
                other => panic!("{other:?}"),
            }
        }
        // BLOCK 128/512/1024, three register caps, vectorize; softmax's 1e-5 rtol bars fast math.
        assert_eq!(seen.len(), 1 + 3 + 3 + 1, "{seen:?}");
        assert!(!fast_math_allowed(&t));
    }

    #[test]
    fn diagnoses_choose_the_first_move() {
        let t = task();
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let base = Candidate { source: "baseline.cu".into(), defines: BTreeMap::new(), flags: vec![] };
        let occupancy = Tuner::new(&t, &src, 1, Guidance::Tools);
        let k =
            kernel(occupancy.propose(&request(&t, base.clone(), Some(report("low-occupancy", 0.4)), Guidance::Tools)));
        // Low occupancy: smaller blocks or a register cap, both of which it answers.
        let smaller = k.defines.get("BLOCK").map(String::as_str) == Some("128");
        let capped = k.flags.iter().any(|f| f.starts_with("-maxrregcount"));
        assert!(smaller || capped, "{k:?}");
        assert!(k.technique == "BLOCK-down" || k.technique == "register-cap", "{}", k.technique);
        assert_eq!(k.tool.as_deref(), Some("low-occupancy"));
        let latency = Tuner::new(&t, &src, 1, Guidance::Tools);
        let k = kernel(latency.propose(&request(
            &t,
            base.clone(),
            Some(report("memory-latency-bound", 0.4)),
            Guidance::Tools,
        )));
        assert!(
            k.flags.contains(&VECTORIZE.to_string()) || k.defines.get("BLOCK").map(String::as_str) == Some("512"),
            "{k:?}"
        );
        let regs = Tuner::new(&t, &src, 1, Guidance::Tools);
        let k = kernel(regs.propose(&request(&t, base, Some(report("register-pressure", 0.5)), Guidance::Tools)));
        assert!(k.flags.iter().any(|f| f.starts_with("-maxrregcount")), "{k:?}");
    }

    #[test]
    fn same_seed_same_moves() {
        let t = task();
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let base = Candidate { source: "baseline.cu".into(), defines: BTreeMap::new(), flags: vec![] };
        let run = || {
            let tuner = Tuner::new(&t, &src, 7, Guidance::None);
            (0..5)
                .map(|_| kernel(tuner.propose(&request(&t, base.clone(), None, Guidance::None))).technique)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn remembered_configurations_are_not_proposed_again() {
        let t = task();
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let base = Candidate { source: "baseline.cu".into(), defines: BTreeMap::new(), flags: vec![] };
        let first =
            kernel(Tuner::new(&t, &src, 3, Guidance::None).propose(&request(&t, base.clone(), None, Guidance::None)));
        let tuner = Tuner::new(&t, &src, 3, Guidance::None);
        tuner.remember(&Candidate { source: "x".into(), defines: first.defines.clone(), flags: first.flags.clone() });
        let second = kernel(tuner.propose(&request(&t, base, None, Guidance::None)));
        assert!(second.defines != first.defines || second.flags != first.flags);
    }
}
