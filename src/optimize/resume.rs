//! `--resume`: a run carried on from its directory. The event log, folded once
//! ([`RunLog`]), gives the tree's history, which is replayed in the order it happened so
//! the tree comes back with the same ids and statistics; the generator is told every
//! kernel already proposed, what was judged is not judged again, profiles of earlier
//! sessions are read back from the node folders, and nodes that were in flight are redone
//! (from their saved proposal when there is one).

use super::expand::{content_key, Ctx, Job};
use super::orchestrator::Search;
use super::{drive, init_logging, preflight, prepare, progress, runtime, summary, Ready, RunError};
use crate::generate::{self, Generator};
use crate::run::config::RunFile;
use crate::run::events::Event;
use crate::run::log::{RunLog, TreeChange};
use crate::run::store::{self, RunStore};
use std::path::Path;
use std::sync::Arc;

/// What `--resume` may change about a run: how long and how far it goes on, and whether
/// this session may profile unconfined.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub budget_s: Option<f64>,
    pub max_nodes: Option<usize>,
    pub allow_unconfined_profiling: bool,
}

/// Carries on a run from its directory.
///
/// Everything it needs (the run's files, the task, the toolkit, the GPUs) is checked
/// before the directory is locked or written, so a resume that cannot go on leaves every
/// file as it was.
pub fn resume(
    dir: &Path,
    json: bool,
    api_key: Option<String>,
    overrides: Overrides,
) -> Result<summary::Summary, RunError> {
    let text = std::fs::read(dir.join(store::CONFIG))
        .map_err(|e| RunError::Usage(format!("{}: not a run directory ({}: {e})", dir.display(), store::CONFIG)))?;
    let mut run_file: RunFile = serde_json::from_slice(&text)
        .map_err(|e| RunError::Usage(format!("{}: {e}", dir.join(store::CONFIG).display())))?;
    let text = std::fs::read_to_string(dir.join(store::EVENTS))
        .map_err(|e| RunError::Usage(format!("{}: not a run directory ({}: {e})", dir.display(), store::EVENTS)))?;
    let log = RunLog::parse(&text).map_err(|e| RunError::Usage(format!("{}: {e}", dir.display())))?;
    let changed = overrides.budget_s.is_some() || overrides.max_nodes.is_some();
    if let Some(b) = overrides.budget_s {
        run_file.config.budget_s = Some(b);
    }
    if let Some(n) = overrides.max_nodes {
        run_file.config.max_nodes = Some(n);
    }
    run_file.config.allow_unconfined_profiling = overrides.allow_unconfined_profiling;
    let cfg = run_file.config.clone();
    let Ready { task, toolchain, generator } = preflight(&cfg, api_key)?;
    let store = Arc::new(RunStore::open(dir, cfg.simulated.is_some()).map_err(RunError::usage)?);
    init_logging(dir);
    if changed {
        store.write_json(store::CONFIG, &run_file).map_err(RunError::internal)?;
    }
    let prior = log.ever_finished.then(|| crate::run::best::read_best(dir)).flatten();

    let search = rebuild(&log, &cfg)?;
    remember_proposals(&log, dir, &generator);
    let mut search = search.ok_or_else(|| {
        RunError::Usage(format!("{}: the run never judged its baseline; start a new one", dir.display()))
    })?;
    if let Generator::Llm(l) = &generator {
        l.add_spent(&log.usage.clone().unwrap_or_default());
    }
    store.append(Event::Session { resumed: true, pid: std::process::id() }).map_err(RunError::internal)?;
    let rt = runtime()?;
    let progress = progress::Progress::new(cfg.budget(), json);
    let root_summary = search.summaries.get(&0).cloned().unwrap_or_default();
    let prepared = prepare(&cfg, &task, toolchain, store.clone(), generator, Some(root_summary), &rt)?;
    let ctx = prepared.ctx;

    remember_judged(&ctx, &log, dir);
    read_back_profiles(&ctx, &store, &log);
    redo_unfinished(&mut search, &log);
    progress.message(&format!(
        "resuming {}: {} nodes judged, {} to redo, {:.1} min of search done",
        dir.display(),
        search.summaries.len().saturating_sub(1),
        search.redo.len(),
        log.active_s / 60.0
    ));
    drive(&cfg, &task, ctx, &mut search, log.active_s, prior, &rt, progress)
}

/// The tree as the log left it: its history replayed in the order it happened (None when
/// the baseline was never judged).
fn rebuild(log: &RunLog, cfg: &crate::run::config::RunConfig) -> Result<Option<Search>, RunError> {
    let before_baseline = || RunError::Usage("events.jsonl: a node before the baseline".into());
    let mut search: Option<Search> = None;
    for change in &log.changes {
        match change {
            TreeChange::Baseline { candidate, summary } => {
                search = Some(Search::new(cfg, candidate.clone(), summary.clone()));
            }
            TreeChange::Started { id, parent, kind } => {
                let s = search.as_mut().ok_or_else(before_baseline)?;
                let payload = s.tree.node(*parent).payload.clone();
                let got = s.tree.add_pending(
                    &search::Selection { parent: *parent, kind: *kind },
                    payload,
                    Default::default(),
                );
                if got != *id {
                    return Err(RunError::Usage(format!(
                        "events.jsonl: node {id} replays as {got}: the log is inconsistent"
                    )));
                }
            }
            TreeChange::Dropped { id, parent, stop } => {
                if let Some(s) = search.as_mut() {
                    s.drop_node(*id, *parent, *stop);
                }
            }
            TreeChange::Finished { id, summary, at } => {
                let s = search.as_mut().ok_or_else(before_baseline)?;
                let p = log.kernel_of(*id);
                let intent = crate::generate::intent(
                    p.map(|p| p.technique.clone()).unwrap_or_else(|| "none".into()),
                    p.and_then(|p| p.tool.clone()),
                );
                s.finish(*id, summary.clone(), p.map(|p| p.candidate.clone()), intent, p.is_none(), *at);
            }
        }
    }
    Ok(search)
}

/// The generator is told every kernel already proposed, so it never proposes one again
/// (the replay generator: how many it issued).
fn remember_proposals(log: &RunLog, dir: &Path, generator: &Generator) {
    for p in &log.kernels {
        let source = store::read_source(dir, &p.candidate.source).unwrap_or_default();
        generator.remember(p.id, &p.candidate, &source);
    }
}

/// What was already judged is never judged again.
fn remember_judged(ctx: &Ctx, log: &RunLog, dir: &Path) {
    for n in log.nodes.values() {
        if let (Some(f), Some(p)) = (&n.finished, log.kernel_of(n.id)) {
            let c = &p.candidate;
            let source = store::read_source(dir, &c.source).unwrap_or_default();
            ctx.judged.lock().unwrap().insert(content_key(&source, c), (n.id, f.summary.clone()));
        }
    }
}

/// Profiles taken in earlier sessions, read back from the node folders. A shared profile
/// is decided again: its ancestor's is read back here.
fn read_back_profiles(ctx: &Ctx, store: &RunStore, log: &RunLog) {
    for id in log.nodes.values().filter(|n| n.measured()).map(|n| n.id) {
        let node_dir = store.node_dir(id);
        // (A simulated run's `simulated` field is one the report does not name.)
        let diagnoses = std::fs::read(node_dir.join("diagnoses.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<heuristics::Report>(&b).ok());
        let raw = std::fs::read_to_string(node_dir.join("counters.txt")).ok();
        let note = "read back from an earlier session".into();
        let p = generate::ParentProfile { diagnoses, raw, note, shared_from: None };
        ctx.profiles.lock().unwrap().insert(id, Arc::new(tokio::sync::OnceCell::new_with(Some(p))));
    }
}

/// Nodes that were in flight when the run stopped are redone, their saved proposals
/// judged without asking the generator again.
fn redo_unfinished(search: &mut Search, log: &RunLog) {
    let pending: Vec<usize> =
        search.tree.nodes().iter().filter(|n| n.id != 0 && n.outcome.is_none() && !n.cancelled).map(|n| n.id).collect();
    for id in pending {
        let n = search.tree.node(id);
        let parent = n.parent.unwrap_or(0);
        search.redo.push(Job {
            id,
            parent,
            kind: n.kind,
            parent_candidate: search.tree.node(parent).payload.clone(),
            parent_summary: search.summaries.get(&parent).cloned().unwrap_or_default(),
            memory: search.tree.memory.clone(),
            path: search.path_to(parent),
            ancestors: search.ancestors_of(parent),
            redo: log.kernel_of(id).map(|p| (p.candidate.clone(), p.technique.clone(), p.tool.clone())),
        });
    }
}
