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
use crate::run::best::{best_of_json, read_best_json, Best, Tried, BEST_CU, BEST_JSON};
use crate::run::events::{Event, NodeSummary};
use crate::run::store::{node_rel, RunStore, StoreError};
use crate::stats::Bar;
use crate::toolkit::build::{BuildError, BuildSpec};
use crate::wall::{EvalError, Verdict};
use search::NodeId;
use serde::Serialize;
use std::sync::Arc;

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

#[derive(Debug, Clone, Serialize)]
pub struct Final {
    pub best: Best,
    pub tried: Vec<Tried>,
}

/// The environment failed during the final check; nothing was written.
#[derive(Debug)]
pub struct EnvFailure(pub String);

impl EnvFailure {
    /// The failure `e` describes (the run directory cannot be written).
    fn of(e: impl std::fmt::Display) -> EnvFailure {
        EnvFailure(e.to_string())
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
) -> Result<(), StoreError> {
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
                Err(source) => return Err(StoreError::Remove { rel: BEST_CU.into(), source }),
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
    // None: this evaluator runs no sanitizer (the simulated one).
    let sanitizer = ctx.evaluator.sanitizer();
    let sanitize = sanitize && sanitizer == Some(true);
    let baseline = search.summaries.get(&0).cloned().unwrap_or_default();
    let ranking: Vec<NodeId> = search
        .tree
        .ranking()
        .into_iter()
        .filter(|id| *id != 0 && search.tree.node(*id).is_correct())
        .filter(|id| search.summaries.get(id).and_then(|s| s.measured_speedup()).is_some_and(|s| bar.is_win(&s)))
        .filter(|id| {
            search.summaries.get(id).is_some_and(|s| s.regressed_shapes(bar.min_gain, Some(&baseline)).is_empty())
        })
        .take(3)
        .collect();
    let mut tried = Vec::new();
    for id in ranking {
        let node = search.tree.node(id);
        let candidate = node.payload.clone();
        let path = ctx.store.dir().join(&candidate.source);
        let (task, arch, tc, opts) = (
            ctx.task.clone(),
            ctx.evaluator.bench().arch.clone(),
            ctx.toolchain.clone(),
            ctx.evaluator.bench().opts.clone(),
        );
        let (p, c) = (path.clone(), candidate.clone());
        let built = tokio::task::spawn_blocking(move || {
            let spec =
                BuildSpec { task: &task, source: &p, trusted: false, arch, extra_flags: c.flags, defines: c.defines };
            crate::wall::build_confined(&tc, &opts, &spec)
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
        let regressed = summary.regressed_shapes(bar.min_gain, Some(&baseline));
        let (confirmed, note) = match (&verdict.failure, &verdict.timing, measured) {
            (Some(f), _, _) => (false, format!("{}: {}", f.class, f.message)),
            (None, _, Some(s)) if !regressed.is_empty() => (
                false,
                format!(
                    "correct and {s} over the served shapes, but slower than the baseline at {}: a kernel may lose no served shape",
                    regressed.iter().map(|r| format!("{} ({}, {})", r.name, r.size, r.speedup)).collect::<Vec<_>>().join(", ")
                ),
            ),
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
            .map_err(EnvFailure::of)?;
        tried.push(Tried { node: id, confirmed, note: note.clone() });
        if confirmed {
            let t = verdict.timing.as_ref().expect("a confirmed verdict is timed");
            let best = Best::confirmed(
                id,
                t,
                &verdict.served,
                node.intent.technique.clone(),
                candidate.config_label(),
                note,
                bar,
            );
            let source = crate::run::store::read_source(ctx.store.dir(), &candidate.source)
                .map_err(|e| EnvFailure(format!("cannot read {}: {e}", path.display())))?;
            write_best(&ctx.store, &best, Some(source.as_bytes()), Some(&candidate), Some(&verdict), &tried)
                .map_err(EnvFailure::of)?;
            return Ok(Final { best, tried });
        }
    }
    let mut note = if tried.is_empty() {
        format!("no correct kernel was faster beyond the timing noise ({})", bar.describe())
    } else {
        "no candidate was confirmed by the final re-verification".to_string()
    };
    if sanitizer == Some(false) {
        note.push_str(" (compute-sanitizer not found: no sanitizer pass)");
    }
    let best = Best::none(bar, &baseline, note);
    write_best(&ctx.store, &best, None, None, None, &tried).map_err(EnvFailure::of)?;
    Ok(Final { best, tried })
}
