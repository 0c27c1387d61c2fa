//! The one fold of `events.jsonl`: the log read once, in order, into typed state that
//! every reader of a run takes its facts from, so no reader matches events itself.
//!
//! - [`RunLog::nodes`]: each node's state (its parent and kind, its latest proposal, its
//!   verdict with the search clock at which it came, the profiles made of it, whether the
//!   generator dropped it). The report's node views are made from these.
//! - [`RunLog::changes`]: the search tree's history (the baseline, each node started,
//!   finished or dropped), in the order it happened. `--resume` replays it to rebuild the
//!   tree as it stood, with the same ids and the same statistics.
//! - [`RunLog::kernels`]: every proposal that held a kernel, in the order proposed. The
//!   tuner is told each again on resume; `replay:RUN` re-issues them.
//! - The run's own markers: its sessions (the last one's pid, whether it finished, why it
//!   stopped), why the search stopped, LLM usage, the search time summed over sessions
//!   ([`active_clock`]) and whether the run was simulated.
//!
//! Nothing here reads a node's files: the fold is of the log alone.

use super::events::{active_clock, parse_log, Candidate, Event, NodeSummary, Record, Usage};
use search::{Expansion, NodeId};
use std::collections::BTreeMap;

/// What the generator proposed for a node.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub id: NodeId,
    pub candidate: Candidate,
    pub technique: String,
    /// The diagnosis tool the proposal answers, as the generator named it.
    pub tool: Option<String>,
}

impl Proposal {
    /// A reply that held no kernel is logged as a proposal with an empty source (its tokens
    /// count); it has no kernel to build, remember or replay.
    pub fn has_kernel(&self) -> bool {
        !self.candidate.source.is_empty()
    }
}

/// A node's verdict as the log has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub summary: NodeSummary,
    /// Seconds of search (summed over sessions) when it came.
    pub at: f64,
    pub lane: Option<usize>,
    /// Set when the node duplicated an already judged kernel.
    pub duplicate_of: Option<NodeId>,
}

/// A profile of a node (ncu and diagnoses), or the profile of an ancestor it used.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub ok: bool,
    /// The top diagnoses, as the event lists them.
    pub top: Vec<String>,
    /// Not profiled: the profile of this ancestor was used instead.
    pub shared_from: Option<NodeId>,
}

/// Why the generator offered nothing for a node (it left the tree).
#[derive(Debug, Clone, PartialEq)]
pub struct Dropped {
    pub why: String,
    /// Nothing more at all, not only from this node's parent.
    pub stop: bool,
}

/// One node as the log tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeLog {
    pub id: NodeId,
    /// None for the root (the baseline).
    pub parent: Option<NodeId>,
    /// None for the root.
    pub kind: Option<Expansion>,
    /// The latest proposal, with or without a kernel; the root's is the baseline itself
    /// (technique `baseline`).
    pub proposal: Option<Proposal>,
    pub finished: Option<Finished>,
    pub dropped: Option<Dropped>,
    /// Every `profiled` event of this node, in order.
    pub profiles: Vec<Profile>,
}

impl NodeLog {
    fn new(id: NodeId, parent: Option<NodeId>, kind: Option<Expansion>) -> NodeLog {
        NodeLog { id, parent, kind, proposal: None, finished: None, dropped: None, profiles: Vec::new() }
    }

    /// The top diagnoses its children were written from: those of its latest profile
    /// (its own, or the ancestor's it shared).
    pub fn top_diagnoses(&self) -> Option<&[String]> {
        self.profiles.last().map(|p| &p.top[..])
    }

    /// Profiled on its own (not only through an ancestor's profile), in any session.
    pub fn measured(&self) -> bool {
        self.profiles.iter().any(|p| p.shared_from.is_none())
    }
}

/// A change to the search tree, in the order the log recorded it.
#[derive(Debug, Clone, PartialEq)]
pub enum TreeChange {
    /// The root: the baseline judged.
    Baseline { candidate: Candidate, summary: NodeSummary },
    /// The search selected `parent` for expansion; node `id` was added as pending.
    Started { id: NodeId, parent: NodeId, kind: Expansion },
    /// Node `id` got its verdict, `at` seconds of search into the run.
    Finished { id: NodeId, summary: NodeSummary, at: f64 },
    /// The generator had nothing for node `id` (`stop`: nothing more at all).
    Dropped { id: NodeId, parent: NodeId, stop: bool },
}

/// A session of the run: from its `session` event to the next.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Session {
    pub pid: Option<u32>,
    pub resumed: bool,
    /// Why it stopped without finishing, when it said (`session-stopped`).
    pub stopped: Option<String>,
    /// It finished the run (`run-finished`).
    pub finished: bool,
}

/// A run's event log, folded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunLog {
    /// Every node started, the root included, by id. A node the generator dropped stays
    /// here with [`NodeLog::dropped`] set.
    pub nodes: BTreeMap<NodeId, NodeLog>,
    /// The tree's history, in order.
    pub changes: Vec<TreeChange>,
    /// Every proposal that held a kernel, in the order proposed.
    pub kernels: Vec<Proposal>,
    /// Tokens and cost of every generation, summed (None when no generation reported any).
    pub usage: Option<Usage>,
    /// The last session (its state before any `session` event, for a log without one).
    pub session: Session,
    /// Some session finished the run (a final check ran and its result was written).
    pub ever_finished: bool,
    /// Why the search last stopped.
    pub search_stopped: Option<String>,
    /// What the last search over served shapes did about dispatch by shape.
    pub shape_dispatch: Option<String>,
    /// Seconds of search, summed over sessions.
    pub active_s: f64,
    /// The run was made with the simulated evaluator (its lines say so).
    pub simulated: bool,
}

impl RunLog {
    /// Parses and folds the text of an `events.jsonl` ([`parse_log`]'s errors).
    pub fn parse(text: &str) -> Result<RunLog, crate::run::events::LogError> {
        Ok(RunLog::fold(&parse_log(text)?))
    }

    /// Folds records in the order they were written.
    pub fn fold(records: &[Record]) -> RunLog {
        let clock = active_clock(records);
        let mut log = RunLog { active_s: clock.last().copied().unwrap_or(0.0), ..RunLog::default() };
        for (r, &at) in records.iter().zip(&clock) {
            log.simulated |= r.simulated;
            log.apply(&r.event, at);
        }
        log
    }

    fn apply(&mut self, event: &Event, at: f64) {
        match event {
            Event::Session { resumed, pid } => {
                self.session = Session { pid: Some(*pid), resumed: *resumed, ..Session::default() };
            }
            Event::SessionStopped { why } => self.session.stopped = Some(why.clone()),
            Event::RunFinished { .. } => {
                self.session.finished = true;
                self.ever_finished = true;
            }
            Event::SearchStopped { why } => self.search_stopped = Some(why.clone()),
            Event::ShapeDispatch { note, .. } => self.shape_dispatch = Some(note.clone()),
            Event::Baseline { summary, candidate } => {
                let root = self.nodes.entry(0).or_insert_with(|| NodeLog::new(0, None, None));
                root.proposal =
                    Some(Proposal { id: 0, candidate: candidate.clone(), technique: "baseline".into(), tool: None });
                root.finished = Some(Finished { summary: summary.clone(), at, lane: None, duplicate_of: None });
                self.changes.push(TreeChange::Baseline { candidate: candidate.clone(), summary: summary.clone() });
            }
            Event::NodeStarted { id, parent, kind } => {
                self.nodes.insert(*id, NodeLog::new(*id, Some(*parent), Some(*kind)));
                self.changes.push(TreeChange::Started { id: *id, parent: *parent, kind: *kind });
            }
            Event::NodeProposed { id, candidate, technique, tool, usage } => {
                if let Some(u) = usage {
                    self.usage.get_or_insert_with(Usage::default).add(u);
                }
                let proposal = Proposal {
                    id: *id,
                    candidate: candidate.clone(),
                    technique: technique.clone(),
                    tool: tool.clone(),
                };
                if proposal.has_kernel() {
                    self.kernels.push(proposal.clone());
                }
                if let Some(n) = self.nodes.get_mut(id) {
                    n.proposal = Some(proposal);
                }
            }
            Event::NoProposal { id, parent, why, stop } => {
                if let Some(n) = self.nodes.get_mut(id) {
                    n.dropped = Some(Dropped { why: why.clone(), stop: *stop });
                }
                self.changes.push(TreeChange::Dropped { id: *id, parent: *parent, stop: *stop });
            }
            Event::NodeFinished { id, summary, lane, duplicate_of } => {
                if let Some(n) = self.nodes.get_mut(id) {
                    n.finished =
                        Some(Finished { summary: summary.clone(), at, lane: *lane, duplicate_of: *duplicate_of });
                }
                self.changes.push(TreeChange::Finished { id: *id, summary: summary.clone(), at });
            }
            Event::Profiled { id, ok, top, shared_from, .. } => {
                if let Some(n) = self.nodes.get_mut(id) {
                    n.profiles.push(Profile { ok: *ok, top: top.clone(), shared_from: *shared_from });
                }
            }
            Event::LlmAttempt { .. } | Event::NodeBuilt { .. } | Event::FinalCheck { .. } => {}
        }
    }

    /// The baseline and its verdict (None before it was judged).
    pub fn baseline(&self) -> Option<(&Candidate, &NodeSummary)> {
        let root = self.nodes.get(&0)?;
        Some((&root.proposal.as_ref()?.candidate, &root.finished.as_ref()?.summary))
    }

    /// The latest proposal with a kernel of each node.
    pub fn kernel_of(&self, id: NodeId) -> Option<&Proposal> {
        self.kernels.iter().rev().find(|p| p.id == id)
    }

    /// Nodes still in the tree (not dropped), the root first.
    pub fn live_nodes(&self) -> impl Iterator<Item = &NodeLog> {
        self.nodes.values().filter(|n| n.dropped.is_none())
    }

    /// How many judged nodes landed within their parent's interval, under the run's
    /// `--min-gain` ([`NodeSummary::within_interval_of`]).
    pub fn within_parent_interval(&self, min_gain: f64) -> usize {
        let summary = |id: NodeId| self.nodes.get(&id).and_then(|n| n.finished.as_ref()).map(|f| &f.summary);
        self.nodes
            .values()
            .filter(|n| match (n.finished.as_ref(), n.parent.and_then(summary)) {
                (Some(f), Some(parent)) => f.summary.within_interval_of(parent, min_gain),
                _ => false,
            })
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(at: f64, event: Event) -> Record {
        Record { at, event, simulated: true }
    }

    fn candidate(source: &str) -> Candidate {
        Candidate { source: source.into(), defines: Default::default(), flags: vec![] }
    }

    fn passed(speedup: f64) -> NodeSummary {
        NodeSummary { passed: true, speedup: Some(speedup), ..Default::default() }
    }

    /// Two sessions: node 1 finished, node 2 in flight at a kill, node 3 dropped; then a
    /// resume that redid node 2 and finished the run.
    fn two_sessions() -> Vec<Record> {
        let proposed = |id, source: &str, usage| Event::NodeProposed {
            id,
            candidate: candidate(source),
            technique: format!("t{id}"),
            tool: None,
            usage,
        };
        let tokens = Usage { prompt_tokens: 10, completion_tokens: 2, cost: 0.5, requests: 1 };
        vec![
            rec(100.0, Event::Session { resumed: false, pid: 7 }),
            rec(101.0, Event::Baseline { summary: passed(1.0), candidate: candidate("nodes/0000/kernel.cu") }),
            rec(102.0, Event::NodeStarted { id: 1, parent: 0, kind: Expansion::Improve }),
            rec(102.5, Event::NodeStarted { id: 2, parent: 0, kind: Expansion::Improve }),
            rec(103.0, proposed(1, "nodes/0001/kernel.cu", Some(tokens.clone()))),
            rec(103.5, proposed(2, "", Some(tokens.clone()))),
            rec(104.0, Event::NodeFinished { id: 1, summary: passed(1.5), lane: Some(0), duplicate_of: None }),
            rec(
                104.5,
                Event::Profiled {
                    id: 1,
                    ok: true,
                    seconds: 1.0,
                    top: vec!["a 50%".into()],
                    note: String::new(),
                    sandbox: vec![],
                    shared_from: None,
                },
            ),
            rec(105.0, Event::NodeStarted { id: 3, parent: 1, kind: Expansion::Improve }),
            rec(105.5, Event::NoProposal { id: 3, parent: 1, why: "nothing new".into(), stop: false }),
            // Killed at 105.5; resumed an hour later.
            rec(3700.0, Event::Session { resumed: true, pid: 8 }),
            rec(3701.0, proposed(2, "nodes/0002/kernel.cu", None)),
            rec(3702.0, Event::NodeFinished { id: 2, summary: passed(1.2), lane: Some(0), duplicate_of: Some(1) }),
            rec(3703.0, Event::SearchStopped { why: "done".into() }),
            rec(3704.0, Event::RunFinished { best: 1, speedup: 1.5, verified: true }),
        ]
    }

    #[test]
    fn nodes_carry_their_latest_proposal_verdict_and_profiles() {
        let log = RunLog::fold(&two_sessions());
        let (root, summary) = log.baseline().unwrap();
        assert_eq!((root.source.as_str(), summary.speedup), ("nodes/0000/kernel.cu", Some(1.0)));
        assert_eq!(log.nodes[&0].proposal.as_ref().unwrap().technique, "baseline");
        let one = &log.nodes[&1];
        assert_eq!((one.parent, one.kind), (Some(0), Some(Expansion::Improve)));
        assert_eq!(one.finished.as_ref().unwrap().at, 4.0);
        assert_eq!(one.top_diagnoses(), Some(&["a 50%".to_string()][..]));
        assert!(one.measured());
        // Node 2's first reply held no kernel; the resumed session proposed one.
        let two = &log.nodes[&2];
        assert!(two.proposal.as_ref().unwrap().has_kernel());
        assert_eq!(two.finished.as_ref().unwrap().duplicate_of, Some(1));
        assert_eq!(two.finished.as_ref().unwrap().at, 5.5 + 2.0, "the hour between sessions counts for nothing");
        assert_eq!(log.nodes[&3].dropped.as_ref().unwrap().why, "nothing new");
        assert_eq!(log.live_nodes().map(|n| n.id).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(log.kernels.iter().map(|p| p.id).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(log.kernel_of(2).unwrap().candidate.source, "nodes/0002/kernel.cu");
        assert!(log.kernel_of(3).is_none());
        assert_eq!(log.usage.as_ref().unwrap().prompt_tokens, 20, "a reply without a kernel spent tokens too");
    }

    #[test]
    fn nodes_within_their_parents_interval_are_counted() {
        let log = RunLog::fold(&two_sessions());
        // 1.5x and 1.2x over a 1.0x root: gains, at any margin below 20%.
        assert_eq!(log.within_parent_interval(0.01), 0);
        assert_eq!(log.within_parent_interval(0.25), 1, "1.2x is within 25% of the root");
        let mut records = two_sessions();
        let wide = NodeSummary { speedup_low: Some(1.40), speedup_high: Some(1.60), ..passed(1.5) };
        records[6] = rec(104.0, Event::NodeFinished { id: 1, summary: wide, lane: Some(0), duplicate_of: None });
        records.insert(10, rec(105.6, Event::NodeStarted { id: 4, parent: 1, kind: Expansion::Improve }));
        let finished = |summary| Event::NodeFinished { id: 4, summary, lane: Some(0), duplicate_of: None };
        let mut inside = records.clone();
        inside.insert(11, rec(105.7, finished(passed(1.58))));
        assert_eq!(RunLog::fold(&inside).within_parent_interval(0.01), 1, "inside node 1's interval");
        records.insert(11, rec(105.7, finished(passed(1.65))));
        assert_eq!(RunLog::fold(&records).within_parent_interval(0.01), 0, "above it");
    }

    #[test]
    fn the_tree_history_keeps_the_order_things_happened() {
        let log = RunLog::fold(&two_sessions());
        let kinds: Vec<String> = log
            .changes
            .iter()
            .map(|c| match c {
                TreeChange::Baseline { .. } => "baseline".to_string(),
                TreeChange::Started { id, .. } => format!("start {id}"),
                TreeChange::Finished { id, .. } => format!("finish {id}"),
                TreeChange::Dropped { id, .. } => format!("drop {id}"),
            })
            .collect();
        assert_eq!(kinds, ["baseline", "start 1", "start 2", "finish 1", "start 3", "drop 3", "finish 2"]);
    }

    #[test]
    fn the_run_markers_are_those_of_its_last_session() {
        let log = RunLog::fold(&two_sessions());
        assert_eq!(log.session.pid, Some(8));
        assert!(log.session.resumed && log.session.finished && log.ever_finished);
        assert_eq!(log.search_stopped.as_deref(), Some("done"));
        assert_eq!(log.active_s, 5.5 + 4.0);
        assert!(log.simulated);
        // A new session after a finished one has not finished (yet); the run once did.
        let mut records = two_sessions();
        records.push(rec(9000.0, Event::Session { resumed: true, pid: 9 }));
        records.push(rec(9001.0, Event::SessionStopped { why: "the GPU fell off the bus".into() }));
        let log = RunLog::fold(&records);
        assert!(!log.session.finished && log.ever_finished);
        assert_eq!(log.session.stopped.as_deref(), Some("the GPU fell off the bus"));
        assert_eq!(RunLog::parse("").unwrap(), RunLog::default());
    }
}
