//! The end of a run: the best kernels are judged again, with more check seeds (fresh
//! inputs), compute-sanitizer and a fresh timing, before one is called best. A kernel is
//! confirmed only when it passes and its new speedup interval clears the run's bar
//! ([`crate::stats::Bar`]); otherwise the next is tried, up to three, and then the run
//! says "no faster kernel". The confirmed result ([`Best`]) is the one set of numbers the
//! summary, `best.json`, the report and `show` all print.
//!
//! A failure of the environment (no GPU, a driver error, the GPU lock, a tool gone) is not
//! a failure of the kernel: the check stops there with [`EnvFailure`] and nothing in the
//! run directory is touched, so an earlier session's `best.cu` and `best.json` survive.

use super::expand::Ctx;
use super::orchestrator::Search;
use crate::run::events::{Event, NodeSummary};
use crate::run::store::{node_rel, RunStore};
use crate::stats::{Bar, Speedup};
use crate::toolkit::build::{self, BuildError, BuildSpec};
use crate::wall::protocol::TimingReport;
use crate::wall::{EvalError, Verdict};
use search::NodeId;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

pub const BEST_JSON: &str = "best.json";
pub const BEST_CU: &str = "best.cu";

/// The run's result: the confirmed kernel and its numbers from the final check, or the
/// baseline (node 0) when nothing was confirmed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Best {
    pub node: NodeId,
    /// Confirmed by the final check (passed, and faster beyond the bar).
    pub verified: bool,
    /// 1 for the baseline.
    pub speedup: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_high: Option<f64>,
    pub ms: Option<f64>,
    pub baseline_ms: Option<f64>,
    pub cv: Option<f64>,
    pub baseline_cv: Option<f64>,
    pub pct_of_floor: Option<f64>,
    pub baseline_pct_of_floor: Option<f64>,
    /// The same floor at the DRAM bandwidth this GPU was measured to reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pct_of_achievable: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_pct_of_achievable: Option<f64>,
    #[serde(default)]
    pub technique: String,
    #[serde(default)]
    pub config: String,
    /// What the final check found (passed seeds and sanitizers, or why nothing was confirmed).
    #[serde(default)]
    pub note: String,
    /// The bar the interval had to clear.
    #[serde(default)]
    pub bar: Option<Bar>,
}

impl Best {
    /// The speedup with its interval, as every output prints it.
    pub fn measured(&self) -> Speedup {
        match (self.speedup_low, self.speedup_high) {
            (Some(low), Some(high)) => Speedup { point: self.speedup, low, high },
            _ => Speedup::unmeasured(self.speedup),
        }
    }

    pub fn none(bar: Bar, baseline: &NodeSummary, note: String) -> Best {
        Best {
            node: 0,
            verified: false,
            speedup: 1.0,
            speedup_low: None,
            speedup_high: None,
            ms: baseline.candidate_ms,
            baseline_ms: baseline.candidate_ms,
            cv: baseline.cv,
            baseline_cv: baseline.cv,
            pct_of_floor: baseline.pct_of_floor,
            baseline_pct_of_floor: baseline.pct_of_floor,
            pct_of_achievable: None,
            baseline_pct_of_achievable: None,
            technique: "baseline".into(),
            config: "defaults".into(),
            note,
            bar: Some(bar),
        }
    }

    fn confirmed(node: NodeId, t: &TimingReport, technique: String, config: String, note: String, bar: Bar) -> Best {
        let s = Speedup::from_rounds(t.speedup, &t.baseline.round_medians_ms, &t.candidate.round_medians_ms);
        Best {
            node,
            verified: true,
            speedup: t.speedup,
            speedup_low: s.map(|s| s.low),
            speedup_high: s.map(|s| s.high),
            ms: Some(t.candidate.median_ms),
            baseline_ms: Some(t.baseline.median_ms),
            cv: Some(t.candidate.cv),
            baseline_cv: Some(t.baseline.cv),
            pct_of_floor: t.pct_of_floor,
            baseline_pct_of_floor: t.baseline_pct_of_floor,
            pct_of_achievable: t.pct_of_achievable,
            baseline_pct_of_achievable: t.baseline_pct_of_achievable,
            technique,
            config,
            note,
            bar: Some(bar),
        }
    }
}

/// `best.json`: the result, where its kernel lives, and the proof.
#[derive(Debug, Serialize)]
struct BestFile<'a> {
    #[serde(flatten)]
    best: &'a Best,
    folder: String,
    candidate: Option<&'a crate::run::events::Candidate>,
    final_verdict: Option<&'a Verdict>,
    tried: &'a [Tried],
    /// The result this one replaced, when an earlier session had confirmed another.
    #[serde(skip_serializing_if = "Option::is_none")]
    superseded: Option<serde_json::Value>,
}

/// One kernel the final check looked at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tried {
    pub node: NodeId,
    pub confirmed: bool,
    pub note: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Final {
    pub best: Best,
    pub tried: Vec<Tried>,
}

/// The environment failed during the final check; nothing was written.
#[derive(Debug)]
pub struct EnvFailure(pub String);

/// `best.json` as JSON, without a simulated run's marker (None when there is none).
fn read_best_json(dir: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join(BEST_JSON)).ok()?;
    serde_json::from_str(&crate::run::store::unmarked(text)).ok()
}

/// Reads the result an earlier session wrote (None when there is none).
pub fn read_best(dir: &Path) -> Option<Best> {
    best_of_json(&read_best_json(dir)?)
}

/// The result in a `best.json` already read. Files written before intervals existed are
/// read through their final verdict's timing.
pub fn best_of_json(v: &serde_json::Value) -> Option<Best> {
    if let Ok(b) = serde_json::from_value::<Best>(v.clone()) {
        return Some(b);
    }
    let node = v["node"].as_u64()? as NodeId;
    let verified = v["verified"].as_bool().unwrap_or(false);
    let timing = serde_json::from_value::<TimingReport>(v["final_verdict"]["timing"].clone()).ok();
    let technique = v["technique"].as_str().unwrap_or_default().to_string();
    let config = serde_json::from_value::<crate::run::events::Candidate>(v["candidate"].clone())
        .map(|c| c.config_label())
        .unwrap_or_default();
    let note = v["final_check"].as_str().or(v["note"].as_str()).unwrap_or_default().to_string();
    match timing {
        Some(t) if verified && node != 0 => Some(Best::confirmed(node, &t, technique, config, note, Bar::default())),
        _ => Some(Best::none(Bar::default(), &NodeSummary::default(), note)),
    }
}

/// Writes the result: the kernel first, then `best.json` (which points at it), each atomic.
fn write_best(
    store: &RunStore,
    best: &Best,
    source: Option<&[u8]>,
    candidate: Option<&crate::run::events::Candidate>,
    verdict: Option<&Verdict>,
    tried: &[Tried],
) -> Result<(), String> {
    let superseded = read_best_json(store.dir())
        .filter(|v| best_of_json(v).is_some_and(|b| b.verified && b.node != best.node))
        .map(|mut v| {
            // Only its headline: the earlier proof stays in that node's final_verdict.json.
            if let Some(o) = v.as_object_mut() {
                o.remove("final_verdict");
                o.remove("superseded");
            }
            v
        });
    match source {
        Some(bytes) => {
            store.write(BEST_CU, bytes)?;
        }
        None => {
            // The kernel it named stays in its node folder; best.cu names the result only.
            match std::fs::remove_file(store.dir().join(BEST_CU)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot remove {BEST_CU}: {e}")),
            }
        }
    }
    let file = BestFile { best, folder: node_rel(best.node), candidate, final_verdict: verdict, tried, superseded };
    store.write_json(BEST_JSON, &file).map(drop)
}

/// The final check over the three best candidates whose search-time interval cleared the
/// bar, best first.
pub async fn verify_best(
    ctx: &Arc<Ctx>,
    search: &Search,
    bar: Bar,
    seeds: u32,
    sanitize: bool,
) -> Result<Final, EnvFailure> {
    let sanitizer_found = crate::toolkit::toolchain::find_profiler("compute-sanitizer").is_some();
    let sanitize = sanitize && sanitizer_found && !ctx.store.simulated();
    let baseline = search.summaries.get(&0).cloned().unwrap_or_default();
    let ranking: Vec<NodeId> = search
        .tree
        .ranking()
        .into_iter()
        .filter(|id| *id != 0 && search.tree.node(*id).is_correct())
        .filter(|id| search.summaries.get(id).and_then(|s| s.measured_speedup()).is_some_and(|s| bar.is_win(&s)))
        .take(3)
        .collect();
    let mut tried = Vec::new();
    for id in ranking {
        let node = search.tree.node(id);
        let candidate = node.payload.clone();
        let path = ctx.store.dir().join(&candidate.source);
        let (task, arch, tc, cache) =
            (ctx.task.clone(), ctx.evaluator.arch.clone(), ctx.toolchain.clone(), ctx.cache.clone());
        let (p, c) = (path.clone(), candidate.clone());
        let built = tokio::task::spawn_blocking(move || {
            let spec =
                BuildSpec { task: &task, source: &p, trusted: false, arch, extra_flags: c.flags, defines: c.defines };
            build::build(&tc, &cache, &spec)
        })
        .await
        .map_err(|e| EnvFailure(format!("the rebuild of node {id} did not finish: {e}")))?;
        let built = match built {
            Ok(b) => b,
            Err(BuildError::Env(e)) => return Err(EnvFailure(format!("rebuilding node {id}: {e}"))),
            Err(e) => {
                tried.push(Tried { node: id, confirmed: false, note: format!("does not rebuild: {e}") });
                continue;
            }
        };
        let ev = ctx.evaluator.clone();
        let (b, p, c) = (built, path.clone(), candidate.clone());
        let result = ctx
            .lanes
            .run(true, format!("re-verifying node {id}"), move |device| {
                ev.final_check(device, &b, &p, &c, seeds, sanitize)
            })
            .await;
        let verdict = match result {
            None => return Err(EnvFailure("the GPU lanes stopped before the final check".into())),
            Some((_, Ok(v))) => v,
            // Neither the task nor the worker's own troubles are the kernel's doing.
            Some((_, Err(EvalError::Env(e)))) => return Err(EnvFailure(e.to_string())),
            Some((_, Err(e))) => return Err(EnvFailure(format!("re-verifying node {id}: {e}"))),
        };
        ctx.store
            .write_json(&format!("{}/final_verdict.json", node_rel(id)), &verdict)
            .map_err(|e| EnvFailure(format!("the run directory cannot be written: {e}")))?;
        let summary = NodeSummary::of(&verdict);
        let measured = summary.measured_speedup();
        let (confirmed, note) = match (&verdict.failure, &verdict.timing, measured) {
            (Some(f), _, _) => (false, format!("{}: {}", f.class, f.message)),
            (None, Some(_), Some(s)) if bar.is_win(&s) => (
                true,
                format!(
                    "passed {seeds} check seeds{}; timed again at {s}",
                    if sanitize { " and compute-sanitizer memcheck, racecheck, initcheck and synccheck" } else { "" }
                ),
            ),
            (None, _, Some(s)) => (
                false,
                format!(
                    "correct, but not confirmed faster: timed again at {s}, whose lower end does not clear {:.3}x",
                    bar.threshold()
                ),
            ),
            (None, _, None) => (false, "correct, but the final check has no timing".into()),
        };
        ctx.store
            .append(Event::FinalCheck { id, passed: confirmed, seeds, sanitized: sanitize, note: note.clone() })
            .map_err(EnvFailure)?;
        tried.push(Tried { node: id, confirmed, note: note.clone() });
        if confirmed {
            let t = verdict.timing.as_ref().expect("a confirmed verdict is timed");
            let best = Best::confirmed(id, t, node.intent.technique.clone(), candidate.config_label(), note, bar);
            let source =
                std::fs::read(&path).map_err(|e| EnvFailure(format!("cannot read {}: {e}", path.display())))?;
            let source = crate::run::store::unmarked(String::from_utf8_lossy(&source).into_owned());
            write_best(&ctx.store, &best, Some(source.as_bytes()), Some(&candidate), Some(&verdict), &tried)
                .map_err(EnvFailure)?;
            return Ok(Final { best, tried });
        }
    }
    let mut note = if tried.is_empty() {
        format!("no correct kernel was faster beyond the timing noise ({})", bar.describe())
    } else {
        "no candidate was confirmed by the final re-verification".to_string()
    };
    if !sanitizer_found && !ctx.store.simulated() {
        note.push_str(" (compute-sanitizer not found: no sanitizer pass)");
    }
    let best = Best::none(bar, &baseline, note);
    write_best(&ctx.store, &best, None, None, None, &tried).map_err(EnvFailure)?;
    Ok(Final { best, tried })
}
