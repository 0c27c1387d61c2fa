//! Generators write the next child kernel. The orchestrator hands one a [`Request`] (the
//! parent's source, numbers and diagnoses, the search memory, what to do) and gets a
//! [`Generated`] back: a kernel, a failure to record (a reply with no code...), nothing
//! new to offer from this parent, or a reason to stop generating altogether.
//!
//! Three kinds: [`tune::Tuner`] (the default; rewrite recipes, knobs and safe compiler
//! flags, ordered by the diagnoses; no network), [`llm::LlmGenerator`] (any
//! OpenAI-compatible endpoint) and [`replay::Replay`] (proposals from files).

pub mod llm;
pub mod reorder;
pub mod replay;
pub mod tune;

use crate::run::config::Guidance;
use crate::run::events::{Candidate, NodeSummary, Usage};
use crate::task::Task;
use search::{Expansion, NodeId};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the generator knows about the parent's profile.
#[derive(Debug, Clone, Default)]
pub struct ParentProfile {
    /// The ranked diagnoses of every kernel the entry launched.
    pub diagnoses: Option<heuristics::Report>,
    /// A digest of the raw counters (for `--guidance raw`).
    pub raw: Option<String>,
    /// Why there is no profile, when there is none; where it came from, when shared.
    pub note: String,
    /// The ancestor whose profile this is, when the node was not profiled itself: its
    /// time is within the run's `--min-gain` of that ancestor's, so the same bottlenecks
    /// are taken to hold (the source lines are the ancestor's).
    pub shared_from: Option<NodeId>,
}

/// Everything a generator may use to write one child.
#[derive(Debug, Clone)]
pub struct Request {
    pub node: NodeId,
    pub parent: NodeId,
    pub kind: Expansion,
    pub task: Arc<Task>,
    pub parent_candidate: Candidate,
    pub parent_source: String,
    pub parent_summary: NodeSummary,
    pub baseline_summary: NodeSummary,
    /// The end of the build log or the mismatch report, for repairs.
    pub failure_detail: Option<String>,
    pub profile: ParentProfile,
    pub guidance: Guidance,
    /// Search memory: what each technique did across the tree (summarized for prompts,
    /// weighed per technique by the tuner).
    pub memory: search::memory::Memory,
    /// The techniques on the path from the baseline to the parent, in order (the
    /// recipes applied, the knobs moved, the LLM's tags).
    pub path: Vec<String>,
    /// The floor in ms at the bench size, when the task has a roofline.
    pub floor_ms: Option<f64>,
    pub seed: u64,
}

/// What the search records of a proposal, live and when a resume replays the log: its
/// technique and tool, and for the memory's lineage its family, whether it made a new
/// kernel and whether it rewrote the source. A tuner technique names its family
/// ([`tune::Family`]); any other (an LLM's tag, the library-free start) is a family of its
/// own and a kernel written anew.
pub fn intent(technique: String, tool: Option<String>) -> search::Intent {
    let (family, structural, rewrites) = match technique.parse::<tune::Family>() {
        Ok(f) => (f.to_string(), f.structural(), matches!(f, tune::Family::Recipe(_))),
        Err(_) => (technique.clone(), true, true),
    };
    search::Intent { technique, tool, family, structural, rewrites }
}

/// One proposed child.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub source: String,
    pub defines: BTreeMap<String, String>,
    pub flags: Vec<String>,
    pub technique: String,
    /// The diagnosis tool the change answers, when known.
    pub tool: Option<String>,
}

#[derive(Debug, Clone)]
pub enum Proposal {
    Kernel(Kernel),
    /// The generator failed for this child (no code in the reply, API error...): recorded
    /// as a failed node of this class.
    Failed {
        class: crate::run::failure::NodeFailure,
        message: String,
    },
    /// Nothing new from this parent: the node is dropped and the parent takes no more.
    Nothing(String),
    /// Stop generating for the rest of the run (a token or cost budget is spent, the
    /// replay is exhausted).
    Stop(String),
}

/// One HTTP attempt that did not simply succeed (for the event log).
#[derive(Debug, Clone)]
pub struct Attempt {
    pub attempt: u32,
    pub status: String,
    pub wait_s: f64,
}

#[derive(Debug, Clone)]
pub struct Generated {
    pub proposal: Proposal,
    pub prompt: Option<String>,
    pub reply: Option<String>,
    pub usage: Option<Usage>,
    pub attempts: Vec<Attempt>,
}

impl Generated {
    pub fn plain(proposal: Proposal) -> Generated {
        Generated { proposal, prompt: None, reply: None, usage: None, attempts: Vec::new() }
    }
}

pub enum Generator {
    Tune(tune::Tuner),
    Llm(llm::LlmGenerator),
    Replay(replay::Replay),
}

impl Generator {
    pub async fn propose(&self, req: &Request) -> Generated {
        match self {
            // Rewriting a parent with every recipe takes milliseconds of CPU: off the
            // async workers' hands, so lanes and other expansions go on meanwhile.
            Generator::Tune(t) => Generated::plain(tokio::task::block_in_place(|| t.propose(req))),
            Generator::Llm(l) => l.propose(req).await,
            Generator::Replay(r) => Generated::plain(r.propose(req)),
        }
    }

    /// Tells the generator about node `id`'s proposal, made before a resume (so the tuner
    /// does not repeat it and knows its knobs, and the replay does not reissue it).
    pub fn remember(&self, id: NodeId, candidate: &Candidate, source: &str) {
        match self {
            Generator::Tune(t) => t.remember(id, candidate, source),
            Generator::Replay(r) => r.skip_one(),
            Generator::Llm(_) => {}
        }
    }

    /// Tokens and cost spent so far (LLM only).
    pub fn usage(&self) -> Option<Usage> {
        match self {
            Generator::Llm(l) => Some(l.usage()),
            _ => None,
        }
    }
}
