//! Dispatch by shape: when the task serves several shapes and the fastest kernel at one
//! is not the fastest at another, the search's last node is one library holding the best
//! kernel of each shape behind a launcher that picks by an integer parameter
//! (`rewrite::dispatch`), judged like any node: checked at every check size, timed at
//! every served shape. Only kernels built with the same nvcc flags can share a
//! translation unit, so the combination is chosen within one flag set; macros are baked
//! into each variant's own part of the file.

use super::expand::{Ctx, Job};
use super::orchestrator::Search;
use crate::run::events::{Candidate, Event};
use crate::run::store::node_rel;
use crate::task::expr::Expr;
use crate::task::types::ParamType;
use crate::task::{ArgRole, ScalarValue, Task};
use search::{Expansion, Intent, NodeId, Selection};
use std::collections::BTreeMap;
use std::path::Path;

/// The technique name of a dispatched node.
pub const TECHNIQUE: &str = "dispatch-by-shape";

/// A combination worth judging.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The node it descends from in the tree: the best kernel the search has.
    pub parent: NodeId,
    /// Per served shape, the node whose kernel serves it.
    pub chosen: Vec<NodeId>,
    pub source: String,
    pub flags: Vec<String>,
    /// The weighted geometric mean of the chosen kernels' speedups, as judged.
    pub expected: f64,
    /// Which node serves which shape, in words.
    pub serves: String,
}

/// The combination of the best kernel at each served shape, or why there is none.
pub fn plan(task: &Task, search: &Search, run_dir: &Path) -> Result<Plan, String> {
    let shapes = task.served();
    if shapes.len() < 2 {
        return Err("the task serves one shape".into());
    }
    // The baseline (node 0) is a variant like any: at a shape no kernel improves, it serves.
    // Timed at the task's shapes as they are now (a resumed run's task.toml may have changed).
    let same_shapes = |s: &crate::run::events::NodeSummary| {
        s.served.len() == shapes.len() && s.served.iter().zip(&shapes).all(|(a, b)| a.name == b.name)
    };
    let mut nodes: Vec<NodeId> = search
        .summaries
        .iter()
        .filter(|(id, s)| s.passed && same_shapes(s) && search.tree.node(**id).intent.technique != TECHNIQUE)
        .map(|(id, _)| *id)
        .collect();
    nodes.sort_unstable();
    let root = search.summaries.get(&0).filter(|s| same_shapes(s));
    let shares: Vec<f64> = match root {
        Some(r) => r.served.iter().map(|s| s.time_share).collect(),
        None => shapes.iter().map(|s| s.weight).collect(),
    };
    let mut groups: BTreeMap<Vec<String>, Vec<NodeId>> = BTreeMap::new();
    for id in nodes {
        groups.entry(search.tree.node(id).payload.flags.clone()).or_default().push(id);
    }
    let point = |id: NodeId, s: usize| search.summaries[&id].served[s].speedup.point;
    // A group whose best at some shape still loses it to the baseline (a flag set the
    // baseline's kernel is not in) would make a kernel that is never the result.
    let loses = |id: NodeId, s: usize| {
        search.summaries[&id].served[s].regressed(search.min_gain, root.and_then(|r| r.served.get(s)))
    };
    let mut best: Option<(f64, Vec<String>, Vec<NodeId>)> = None;
    for (flags, ids) in &groups {
        let chosen: Vec<NodeId> = (0..shapes.len())
            .map(|s| {
                *ids.iter()
                    .max_by(|a, b| point(**a, s).total_cmp(&point(**b, s)).then(b.cmp(a)))
                    .expect("a group has a node")
            })
            .collect();
        if chosen.iter().enumerate().any(|(s, id)| loses(*id, s)) {
            continue;
        }
        let expected =
            chosen.iter().enumerate().map(|(s, id)| shares[s] * point(*id, s).max(1e-9).ln()).sum::<f64>().exp();
        if best.as_ref().is_none_or(|(e, _, _)| expected > *e) {
            best = Some((expected, flags.clone(), chosen));
        }
    }
    let Some((expected, flags, chosen)) = best else {
        return Err(
            "no set of build flags has a kernel at every served shape that is not slower than the baseline".into()
        );
    };
    let mut variants: Vec<NodeId> = chosen.clone();
    variants.sort_unstable();
    variants.dedup();
    if variants.len() < 2 {
        return Err(format!("node {} is the fastest at every served shape", chosen[0]));
    }
    let incumbent = search.tree.best();
    let incumbent_speedup = incumbent.outcome.as_ref().map_or(1.0, |o| o.speedup);
    if expected <= incumbent_speedup * (1.0 + search.min_gain) {
        return Err(format!(
            "the best kernel of each shape together would reach {expected:.3}x, no more than --min-gain past node {}'s {incumbent_speedup:.3}x",
            incumbent.id
        ));
    }

    let (params, values) = integer_parameters(task);
    let per_shape: Vec<usize> =
        chosen.iter().map(|id| variants.iter().position(|v| v == id).expect("chosen")).collect();
    let by_param: Vec<(usize, Vec<i64>)> = values
        .iter()
        .map(|(p, expr)| (*p, shapes.iter().map(|s| expr.eval(&s.size.vars).unwrap_or(i64::MIN)).collect()))
        .filter(|(_, v): &(usize, Vec<i64>)| v.iter().all(|x| *x != i64::MIN))
        .collect();
    let Some((rule, order)) = rewrite::dispatch::choose_rule(&by_param, &per_shape) else {
        return Err(format!(
            "no integer parameter of `{}` separates the shapes each kernel serves ({})",
            task.entry,
            describe(&shapes, &chosen)
        ));
    };
    let mut texts = Vec::new();
    for v in &order {
        let candidate = &search.tree.node(variants[*v]).payload;
        let text = crate::run::store::read_source(run_dir, &candidate.source)
            .map_err(|e| format!("node {}'s kernel cannot be read: {e}", variants[*v]))?;
        let defines: Vec<(String, String)> = candidate.defines.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        texts.push((text, defines));
    }
    let parts: Vec<rewrite::dispatch::Variant> =
        texts.iter().map(|(source, defines)| rewrite::dispatch::Variant { source, defines }).collect();
    let source = rewrite::dispatch::dispatch(&task.entry, &params, &parts, &rule).map_err(|e| e.to_string())?;
    let parent = if variants.contains(&incumbent.id) { incumbent.id } else { chosen[0] };
    Ok(Plan { parent, serves: describe(&shapes, &chosen), chosen, source, flags, expected })
}

/// The launcher's parameters as the dispatcher declares them, and the integer ones with
/// the expression each takes over the size variables.
fn integer_parameters(task: &Task) -> (Vec<rewrite::dispatch::Param>, Vec<(usize, Expr)>) {
    let params = task
        .args
        .iter()
        .map(|a| rewrite::dispatch::Param { name: a.name.clone(), spelling: a.spelling.clone() })
        .collect();
    let ints = task
        .args
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match (&a.role, a.ty) {
            (ArgRole::Scalar { value: ScalarValue::Int(e) }, ParamType::Scalar { scalar }) if !scalar.is_float() => {
                Some((i, Expr::parse(e).ok()?))
            }
            _ => None,
        })
        .collect();
    (params, ints)
}

fn describe(shapes: &[crate::task::serve::ServedShape], chosen: &[NodeId]) -> String {
    shapes.iter().zip(chosen).map(|(s, id)| format!("{} by node {id}", s.name)).collect::<Vec<_>>().join(", ")
}

/// Starts the dispatched node of `plan` as a child of its parent: proposed, saved and
/// logged like a generated kernel, so reports and `--resume` read it as any other.
pub fn start(ctx: &Ctx, search: &mut Search, plan: Plan) -> Result<Job, String> {
    let sel = Selection { parent: plan.parent, kind: Expansion::Improve };
    let placeholder = search.tree.node(plan.parent).payload.clone();
    let intent =
        Intent { technique: TECHNIQUE.into(), family: TECHNIQUE.into(), structural: true, rewrites: true, tool: None };
    let id = search.tree.add_pending(&sel, placeholder, intent);
    let rel = node_rel(id);
    let candidate = Candidate { source: format!("{rel}/kernel.cu"), defines: Default::default(), flags: plan.flags };
    let saved = ctx
        .store
        .append(Event::NodeStarted { id, parent: plan.parent, kind: Expansion::Improve })
        .and_then(|_| ctx.store.write_source(&candidate.source, plan.source.as_bytes()).map(drop))
        .and_then(|_| ctx.store.write_json(&format!("{rel}/candidate.json"), &candidate).map(drop))
        .and_then(|_| {
            ctx.store.append(Event::NodeProposed {
                id,
                candidate: candidate.clone(),
                technique: TECHNIQUE.into(),
                tool: None,
                usage: None,
            })
        });
    if let Err(e) = saved {
        search.tree.cancel(id);
        return Err(e.to_string());
    }
    let mut job = search.job(&sel, id);
    job.redo = Some((candidate, TECHNIQUE.into(), None));
    Ok(job)
}
