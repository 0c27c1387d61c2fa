//! The loop. It alone owns the search tree: it selects (MCTS, greedy or best-of-n),
//! starts an [`expand`] task per selection up to `--parallel` in flight, so generation
//! and builds run ahead of the GPU lanes, and records each result as it comes back. It
//! stops launching at the budget, the node cap, the first Ctrl-C or when nothing is left
//! to expand; in-flight work then finishes, unless a second Ctrl-C abandons it (the
//! workers are killed; `--resume` redoes those nodes).

use super::expand::{expand, Ctx, Done, Job};
use super::progress::Progress;
use crate::run::config::{GeneratorSpec, RunConfig, Strategy};
use crate::run::events::{Candidate, Event, NodeSummary};
use search::{Expansion, Intent, NodeId, Selection, Tree};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub struct Search {
    pub tree: Tree<Candidate>,
    pub summaries: HashMap<NodeId, NodeSummary>,
    pub strategy: Strategy,
    /// Failed kernels get repair children only from generators that can repair.
    pub repairs: bool,
    pub max_nodes: Option<usize>,
    /// Nodes started in earlier sessions and still unfinished: redone first, while the
    /// budget lasts; those left stay unfinished in the log for a later `--resume`.
    pub redo: Vec<Job>,
    pub stop_reason: Option<String>,
    /// Evaluated nodes by failure class, and passed ones under "passed".
    pub outcomes: BTreeMap<String, usize>,
    /// When each node finished, relative to the search's active time, and its speedup.
    pub timeline: Vec<(f64, NodeId, Option<f64>)>,
    /// `--min-gain`: a child within it of its parent's speedup (or inside the parent's
    /// interval) is no gain that clears the noise.
    pub min_gain: f64,
}

impl Search {
    /// A tree of the baseline alone, as the run's configuration sets it up.
    pub fn new(cfg: &RunConfig, root: Candidate, root_summary: NodeSummary) -> Search {
        let mut config = search::Config::default();
        config.reward.objective = cfg.objective;
        Search {
            tree: Tree::new(root, config, cfg.seed),
            summaries: HashMap::from([(0, root_summary)]),
            strategy: cfg.strategy,
            repairs: matches!(cfg.generator, GeneratorSpec::Llm(_)),
            max_nodes: cfg.max_nodes,
            redo: Vec::new(),
            stop_reason: None,
            outcomes: Default::default(),
            timeline: Vec::new(),
            min_gain: cfg.min_gain,
        }
    }

    pub fn started_nodes(&self) -> usize {
        self.tree.nodes().iter().filter(|n| n.id != 0 && !n.cancelled).count()
    }

    fn cap_reached(&self) -> bool {
        self.max_nodes.is_some_and(|m| self.started_nodes() >= m)
    }

    fn select(&mut self) -> Option<Selection> {
        match self.strategy {
            Strategy::Mcts => self.tree.select(),
            Strategy::BestOfN => {
                (!self.tree.node(0).saturated).then_some(Selection { parent: 0, kind: Expansion::Improve })
            }
            Strategy::Greedy => {
                let best = self.tree.best().id;
                // One repair after a failure of the best kernel's latest child.
                if self.repairs {
                    if let Some(&last) =
                        self.tree.node(best).children.iter().rev().find(|c| self.tree.node(**c).outcome.is_some())
                    {
                        let n = self.tree.node(last);
                        if n.is_failed() && !n.closed && n.children.is_empty() {
                            return Some(Selection { parent: last, kind: Expansion::Repair });
                        }
                    }
                }
                (!self.tree.node(best).saturated).then_some(Selection { parent: best, kind: Expansion::Improve })
            }
        }
    }

    /// Applies one finished node to the tree (live, and when replaying the log).
    pub fn finish(
        &mut self,
        id: NodeId,
        summary: NodeSummary,
        candidate: Option<Candidate>,
        intent: Intent,
        no_kernel: bool,
        at: f64,
    ) {
        if let Some(c) = candidate {
            self.tree.set_payload(id, c);
        }
        self.tree.set_intent(id, intent);
        let against_parent = self.speed_against_parent(id, &summary);
        let regresses = !summary.regressed_shapes(self.min_gain, self.summaries.get(&0)).is_empty();
        self.tree.record(id, summary.outcome().against_parent(against_parent).regressing(regresses));
        let class = summary.failure_class.as_ref().map_or_else(|| "passed".into(), |c| c.name().to_string());
        let generation = summary.failure_class.as_ref().is_some_and(|c| c.is_generation());
        if !summary.passed && (no_kernel || generation || !self.repairs) {
            self.tree.close_node(id, "no kernel to repair");
        }
        *self.outcomes.entry(class).or_default() += 1;
        self.timeline.push((at, id, summary.passed.then_some(summary.speedup).flatten()));
        self.summaries.insert(id, summary);
    }

    /// Whether node `id`, judged `summary`, landed within its parent's interval
    /// ([`NodeSummary::within_interval_of`]).
    fn within_parent_interval(&self, id: NodeId, summary: &NodeSummary) -> bool {
        self.speed_against_parent(id, summary) == search::ParentSpeed::Same
    }

    /// Node `id`'s time against its parent's ([`NodeSummary::speed_against`]); unknown
    /// for the root and for a parent never judged.
    fn speed_against_parent(&self, id: NodeId, summary: &NodeSummary) -> search::ParentSpeed {
        let parent = self.tree.node(id).parent.and_then(|p| self.summaries.get(&p));
        parent.map_or(search::ParentSpeed::Unknown, |p| summary.speed_against(p, self.min_gain))
    }

    /// How many judged nodes landed within their parent's interval: kernels that cost a
    /// judgment and told the search nothing the timing could tell from noise.
    pub fn within_parent_count(&self) -> usize {
        self.summaries.iter().filter(|(id, s)| **id != 0 && self.within_parent_interval(**id, s)).count()
    }

    pub fn drop_node(&mut self, id: NodeId, parent: NodeId, stop: bool) {
        self.tree.cancel(id);
        if !stop {
            self.tree.saturate(parent);
        }
    }

    pub(super) fn job(&self, sel: &Selection, id: NodeId) -> Job {
        let parent = self.tree.node(sel.parent);
        Job {
            id,
            parent: sel.parent,
            kind: sel.kind,
            parent_candidate: parent.payload.clone(),
            parent_summary: self.summaries.get(&sel.parent).cloned().unwrap_or_default(),
            memory: self.tree.memory.clone(),
            path: self.path_to(sel.parent),
            ancestors: self.ancestors_of(sel.parent),
            redo: None,
        }
    }

    /// The ancestors of `id`, nearest first, with the speedups of those that passed.
    pub fn ancestors_of(&self, id: NodeId) -> Vec<(NodeId, Option<f64>)> {
        let mut line = self.tree.lineage(id);
        line.pop();
        line.into_iter()
            .rev()
            .map(|a| (a, self.summaries.get(&a).filter(|s| s.passed).and_then(|s| s.speedup)))
            .collect()
    }

    /// The techniques on the path from the baseline to `id`, in order.
    pub fn path_to(&self, id: NodeId) -> Vec<String> {
        self.tree
            .lineage(id)
            .into_iter()
            .map(|n| self.tree.node(n).intent.technique.clone())
            .filter(|t| !t.is_empty() && t != "baseline")
            .collect()
    }

    pub fn best(&self) -> (NodeId, f64) {
        let b = self.tree.best();
        (b.id, b.outcome.as_ref().map(|o| o.speedup).unwrap_or(1.0))
    }
}

/// How the loop ended.
pub struct Ended {
    pub abandoned: bool,
    pub fatal: Option<String>,
    pub active_s: f64,
}

/// Runs the search until it stops. `active_before` is the search time spent in earlier
/// sessions (counted against the budget).
pub async fn run(
    ctx: Arc<Ctx>,
    search: &mut Search,
    budget: Option<Duration>,
    active_before: f64,
    parallel: usize,
    progress: &Progress,
) -> Ended {
    let started = Instant::now();
    let deadline = budget.map(|b| started + b.saturating_sub(Duration::from_secs_f64(active_before)));
    let (tx, mut rx) = mpsc::unbounded_channel::<Done>();
    let mut inflight: BTreeSet<NodeId> = BTreeSet::new();
    let mut reports = LiveReports::default();
    let mut stopping = search.stop_reason.clone();
    let mut fatal = None;
    let mut interrupts = 0u32;
    let mut dispatch_tried = false;
    let mut terminated = false;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let mut tick = tokio::time::interval(Duration::from_millis(500));

    let spawn = |job: Job, inflight: &mut BTreeSet<NodeId>| {
        inflight.insert(job.id);
        let (ctx, tx) = (ctx.clone(), tx.clone());
        tokio::spawn(async move {
            let done = expand(ctx, job).await;
            let _ = tx.send(done);
        });
    };
    ctx.lanes.set_search_phase(true);
    loop {
        if stopping.is_none() {
            stopping = limit_reached(search, deadline);
        }
        // Redone nodes go first, through the same gate as new ones: a resume whose budget
        // is already spent judges nothing more (they were counted against the node cap
        // when they started, so the cap does not hold them back).
        while stopping.is_none() && inflight.len() < parallel {
            if !search.redo.is_empty() {
                spawn(search.redo.remove(0), &mut inflight);
                continue;
            }
            if search.cap_reached() {
                break;
            }
            let Some(sel) = search.select() else { break };
            match start_node(&ctx, search, &sel) {
                Ok(job) => spawn(job, &mut inflight),
                Err(e) => {
                    fatal = Some(e);
                    stopping = Some("the run directory cannot be written".into());
                    break;
                }
            }
        }
        if inflight.is_empty() {
            // The last node of a search over served shapes: the best kernel of each shape
            // in one library, when they differ (judged like any node, past the budget).
            // Not after a signal, and once per run: a resumed run that has one judged does not
            // add another past its budget.
            let signalled = interrupts > 0 || terminated;
            let done_before = search.tree.nodes().iter().any(|n| n.intent.technique == super::dispatch::TECHNIQUE);
            if !dispatch_tried && fatal.is_none() && !signalled && !done_before && ctx.task.serves_shapes() {
                dispatch_tried = true;
                // The last node: nothing is selected after it, whatever it measures.
                stopping.get_or_insert_with(|| nothing_left(search.strategy));
                match super::dispatch::plan(&ctx.task, search, ctx.store.dir()) {
                    Ok(plan) => {
                        let note = format!(
                            "{} in one library (their judged speedups make {:.3}x over the shapes)",
                            plan.serves, plan.expected
                        );
                        progress.message(&format!("dispatch by shape: {note}"));
                        match super::dispatch::start(&ctx, search, plan) {
                            Ok(job) => {
                                let _ = ctx.store.append(Event::ShapeDispatch { node: Some(job.id), note });
                                spawn(job, &mut inflight);
                                continue;
                            }
                            Err(e) => {
                                fatal = Some(e);
                                stopping = Some("the run directory cannot be written".into());
                            }
                        }
                    }
                    Err(why) => {
                        progress.message(&format!("no dispatch by shape: {why}"));
                        let _ = ctx.store.append(Event::ShapeDispatch { node: None, note: why });
                    }
                }
            }
            stopping.get_or_insert_with(|| nothing_left(search.strategy));
            break;
        }
        progress.update(
            search,
            &ctx.lanes,
            inflight.len(),
            started.elapsed().as_secs_f64() + active_before,
            stopping.as_deref(),
        );
        tokio::select! {
            Some(done) = rx.recv() => {
                let at = active_before + started.elapsed().as_secs_f64();
                let landed = land(&ctx, search, done, at, progress, &mut reports);
                inflight.remove(&landed.id);
                if let Some(message) = landed.fatal {
                    stopping = Some(format!("cannot go on: {message}"));
                    fatal = Some(message);
                } else if let Some(why) = landed.stop {
                    stopping.get_or_insert(why);
                }
            }
            _ = tick.tick() => {}
            _ = async { match sigint.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {
                interrupts += 1;
                if interrupts >= 2 {
                    crate::toolkit::process::kill_live_groups();
                    progress.message("second Ctrl-C: abandoning the work in flight (--resume redoes it)");
                    let _ = ctx.store.append(Event::SearchStopped { why: "abandoned by a second Ctrl-C".into() });
                    reports.settle().await;
                    return Ended { abandoned: true, fatal, active_s: active_before + started.elapsed().as_secs_f64() };
                }
                progress.message("Ctrl-C: finishing the work in flight (press again to abandon it)");
                stopping.get_or_insert_with(|| "stopped by Ctrl-C".into());
            }
            _ = async { match sigterm.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {
                terminated = true;
                stopping.get_or_insert_with(|| "stopped by SIGTERM".into());
            }
        }
    }
    ctx.lanes.set_search_phase(false);
    reports.settle().await;
    let why = stopping.unwrap_or_else(|| "done".into());
    let _ = ctx.store.append(Event::SearchStopped { why: why.clone() });
    search.stop_reason = Some(why);
    Ended { abandoned: false, fatal, active_s: active_before + started.elapsed().as_secs_f64() }
}

/// Why the loop stops launching, if it must: the budget is spent or the node cap reached.
fn limit_reached(search: &Search, deadline: Option<Instant>) -> Option<String> {
    if deadline.is_some_and(|d| Instant::now() >= d) {
        Some("the budget is spent".into())
    } else if search.cap_reached() {
        Some(format!("--max-nodes {} reached", search.max_nodes.unwrap_or(0)))
    } else {
        None
    }
}

/// Why the search ends when nothing is in flight and nothing can be selected.
fn nothing_left(strategy: Strategy) -> String {
    match strategy {
        Strategy::Mcts => "nothing left to expand: every node is saturated or closed".into(),
        Strategy::Greedy => "greedy: the best kernel has nothing new to try".into(),
        Strategy::BestOfN => "best-of-n: the baseline has nothing new to try".into(),
    }
}

/// Adds the selection to the tree as pending and logs it; the job to run. When the log
/// cannot be written the node is cancelled and the error returned.
fn start_node(ctx: &Ctx, search: &mut Search, sel: &Selection) -> Result<Job, String> {
    let placeholder = search.tree.node(sel.parent).payload.clone();
    let id = search.tree.add_pending(sel, placeholder, Intent::default());
    if let Err(e) = ctx.store.append(Event::NodeStarted { id, parent: sel.parent, kind: sel.kind }) {
        search.tree.cancel(id);
        return Err(e.to_string());
    }
    Ok(search.job(sel, id))
}

/// What an expansion's end means for the loop.
struct Landed {
    id: NodeId,
    /// The generator has nothing more at all.
    stop: Option<String>,
    /// The environment failed: the run cannot go on.
    fatal: Option<String>,
}

/// Records an expansion's end: in the log, in the tree, on the display and in the node's
/// report.
fn land(ctx: &Ctx, search: &mut Search, done: Done, at: f64, progress: &Progress, reports: &mut LiveReports) -> Landed {
    match done {
        Done::Finished { id, summary, candidate, technique, tool, lane, duplicate_of, no_kernel } => {
            let summary = *summary;
            let _ = ctx.store.append(Event::NodeFinished { id, summary: summary.clone(), lane, duplicate_of });
            let intent = crate::generate::intent(technique.clone(), tool);
            search.finish(id, summary.clone(), candidate, intent, no_kernel, at);
            progress.node(id, &technique, &summary, duplicate_of);
            reports.node_finished(ctx.store.dir(), id);
            Landed { id, stop: None, fatal: None }
        }
        Done::Dropped { id, parent, why, stop } => {
            let _ = ctx.store.append(Event::NoProposal { id, parent, why: why.clone(), stop });
            search.drop_node(id, parent, stop);
            Landed { id, stop: stop.then_some(why), fatal: None }
        }
        Done::Fatal { id, message } => Landed { id, stop: None, fatal: Some(message) },
    }
}

/// Reports written as nodes finish, off the loop's thread: each node's own report at
/// once, the run's report at most every [`LiveReports::RUN_EVERY`] (it covers every node).
#[derive(Default)]
struct LiveReports {
    last_run_render: Option<std::time::Instant>,
    busy: std::sync::Arc<std::sync::atomic::AtomicBool>,
    rendering: Option<tokio::task::JoinHandle<()>>,
}

impl LiveReports {
    const RUN_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

    fn node_finished(&mut self, dir: &std::path::Path, id: NodeId) {
        use std::sync::atomic::Ordering;
        let refresh = self.last_run_render.is_none_or(|t| t.elapsed() >= Self::RUN_EVERY);
        // One render at a time: a node whose report would overlap a running render gets
        // its report from the next full render instead.
        if self.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        if refresh {
            self.last_run_render = Some(std::time::Instant::now());
        }
        let (dir, busy) = (dir.to_path_buf(), self.busy.clone());
        self.rendering = Some(tokio::task::spawn_blocking(move || {
            if let Err(e) = crate::report::node_finished(&dir, id, refresh) {
                tracing::warn!(node = id, error = %e, "report not written");
            }
            busy.store(false, Ordering::Release);
        }));
    }

    /// Waits for the render in flight, so that no live render lands after the final one.
    async fn settle(&mut self) {
        if let Some(h) = self.rendering.take() {
            let _ = h.await;
        }
    }
}
