//! The end of a run: the best kernel is judged again, with more check seeds (fresh inputs)
//! and compute-sanitizer, before it is called best. If it fails, the next best is tried,
//! up to three. `best.cu` and `best.json` then hold the kernel and its proof.

use super::events::{Event, NodeSummary};
use super::expand::Ctx;
use super::orchestrator::Search;
use super::store::node_rel;
use crate::build::{self, BuildSpec};
use search::NodeId;
use serde::Serialize;
use std::sync::Arc;

#[derive(Debug, Clone, Serialize)]
pub struct Final {
    /// The verified best node (0: nothing beat the baseline, or nothing verified).
    pub node: NodeId,
    pub verified: bool,
    pub summary: Option<NodeSummary>,
    pub tried: Vec<(NodeId, bool, String)>,
    pub note: String,
}

pub async fn verify_best(ctx: &Arc<Ctx>, search: &Search, seeds: u32, sanitize: bool) -> Final {
    let sanitizer_found = crate::toolchain::find_profiler("compute-sanitizer").is_some();
    let sanitize = sanitize && sanitizer_found && !ctx.store.simulated();
    let ranking: Vec<NodeId> = search
        .tree
        .ranking()
        .into_iter()
        .filter(|id| *id != 0 && search.tree.node(*id).is_correct())
        .filter(|id| search.tree.node(*id).outcome.as_ref().is_some_and(|o| o.speedup > 1.0))
        .take(3)
        .collect();
    let mut tried = Vec::new();
    for id in ranking {
        let candidate = search.tree.node(id).payload.clone();
        let path = ctx.store.dir().join(&candidate.source);
        let (task, arch, tc, cache) =
            (ctx.task.clone(), ctx.evaluator.arch.clone(), ctx.toolchain.clone(), ctx.cache.clone());
        let (p, c) = (path.clone(), candidate.clone());
        let built = tokio::task::spawn_blocking(move || {
            let spec =
                BuildSpec { task: &task, source: &p, trusted: false, arch, extra_flags: c.flags, defines: c.defines };
            build::build(&tc, &cache, &spec).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        let built = match built {
            Ok(b) => b,
            Err(e) => {
                tried.push((id, false, format!("does not rebuild: {e}")));
                continue;
            }
        };
        let ev = ctx.evaluator.clone();
        let result = ctx
            .lanes
            .run(true, format!("re-verifying node {id}"), move |device| {
                ev.final_check(device, &built, &path, &candidate, seeds, sanitize)
            })
            .await;
        let verdict = match result {
            Some((_, Ok(v))) => v,
            Some((_, Err(e))) => {
                tried.push((id, false, e.to_string()));
                continue;
            }
            None => break,
        };
        let _ = ctx.store.write_json(&format!("{}/final_verdict.json", node_rel(id)), &verdict);
        let summary = NodeSummary::of(&verdict);
        let note = match &verdict.failure {
            None => format!(
                "passed {} check seeds{}",
                seeds,
                if sanitize { " and compute-sanitizer memcheck, racecheck, initcheck and synccheck" } else { "" }
            ),
            Some(f) => format!("{}: {}", f.class, f.message),
        };
        let _ = ctx.store.append(Event::FinalCheck {
            id,
            passed: verdict.passed(),
            seeds,
            sanitized: sanitize,
            note: note.clone(),
        });
        tried.push((id, verdict.passed(), note.clone()));
        if verdict.passed() {
            let node = search.tree.node(id);
            let source = std::fs::read(ctx.store.dir().join(&node.payload.source)).unwrap_or_default();
            let _ = ctx.store.write("best.cu", &source);
            let _ = ctx.store.write_json(
                "best.json",
                &serde_json::json!({
                    "node": id,
                    "folder": node_rel(id),
                    "candidate": node.payload,
                    "technique": node.intent.technique,
                    "summary": search.summaries.get(&id),
                    "verified": true,
                    "final_check": note,
                    "final_verdict": verdict,
                }),
            );
            return Final { node: id, verified: true, summary: Some(summary), tried, note: String::new() };
        }
    }
    let note = if tried.is_empty() {
        "no correct kernel beat the baseline".to_string()
    } else {
        "no candidate passed the final re-verification".to_string()
    };
    let _ = ctx
        .store
        .write_json("best.json", &serde_json::json!({"node": 0, "verified": false, "note": note, "tried": tried}));
    let _ = std::fs::remove_file(ctx.store.dir().join("best.cu"));
    Final {
        node: 0,
        verified: false,
        summary: None,
        tried,
        note: if sanitizer_found { note } else { format!("{note} (compute-sanitizer not found: no sanitizer pass)") },
    }
}
