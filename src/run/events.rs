//! The run's event log, `events.jsonl`: one JSON object per line, appended and synced as
//! things happen. It is the source of truth: `--resume` rebuilds the search tree, the
//! tuner's memory of what it tried and the replay position from it alone.

use super::failure::NodeFailure;
use crate::stats::Speedup;
use crate::wall::Verdict;
use search::{Expansion, NodeId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one node is: its source file (relative to the run directory) plus the macros and
/// extra nvcc flags it is built with.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Candidate {
    pub source: String,
    #[serde(default)]
    pub defines: BTreeMap<String, String>,
    #[serde(default)]
    pub flags: Vec<String>,
}

impl Candidate {
    /// A short text for tables: `BLOCK=512 -maxrregcount=64`.
    pub fn config_label(&self) -> String {
        let mut parts: Vec<String> = self.defines.iter().map(|(k, v)| format!("{k}={v}")).collect();
        parts.extend(self.flags.iter().cloned());
        if parts.is_empty() {
            "defaults".into()
        } else {
            parts.join(" ")
        }
    }
}

/// The numbers of one judged node, small enough to live in the event log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeSummary {
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_class: Option<NodeFailure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// The 95% interval of `speedup` from the paired timing rounds ([`crate::stats`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_high: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pct_of_floor: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_saving: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules_per_call: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_bytes: Option<u64>,
    /// Seconds per verifier phase (setup, check, time, energy, sanitize).
    #[serde(default)]
    pub phases: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Per served shape, when the task serves shapes; `speedup` is then their weighted
    /// geometric mean.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub served: Vec<crate::wall::ShapeResult>,
}

impl NodeSummary {
    pub fn of(v: &Verdict) -> NodeSummary {
        let t = v.timing.as_ref();
        let interval = v.speedup.filter(|s| s.has_interval());
        let kernels = v.build.as_ref().map(|b| &b.kernels[..]).unwrap_or(&[]);
        let mut phases = BTreeMap::new();
        for (k, x) in [
            ("setup", v.phases.setup),
            ("check", v.phases.check),
            ("time", v.phases.time),
            ("energy", v.phases.energy),
            ("sanitize", v.phases.sanitize),
        ] {
            if x > 0.0 {
                phases.insert(k.to_string(), (x * 1e4).round() / 1e4);
            }
        }
        NodeSummary {
            passed: v.passed(),
            failure_class: v.failure.as_ref().map(|f| NodeFailure::Kernel(f.class)),
            failure_message: v.failure.as_ref().map(|f| f.message.clone()),
            // Over the served shapes when there are several: never one shape's figure instead.
            speedup: if v.served.is_empty() { t.map(|t| t.speedup) } else { v.speedup.map(|s| s.point) },
            speedup_low: interval.map(|i| i.low),
            speedup_high: interval.map(|i| i.high),
            candidate_ms: t.map(|t| t.candidate.median_ms),
            baseline_ms: t.map(|t| t.baseline.median_ms),
            cv: t.map(|t| t.candidate.cv),
            pct_of_floor: t.and_then(|t| t.pct_of_floor),
            energy_saving: v.energy.as_ref().map(|e| e.saving),
            joules_per_call: v.energy.as_ref().map(|e| e.candidate.joules_per_call),
            registers: kernels.iter().map(|k| k.registers).max(),
            spill_bytes: kernels.iter().map(|k| k.spill_store_bytes + k.spill_load_bytes).max(),
            phases,
            device: v.device.as_ref().map(|d| d.name.clone()),
            served: v.served.clone(),
        }
    }

    pub fn failed(class: NodeFailure, message: &str) -> NodeSummary {
        NodeSummary {
            passed: false,
            failure_class: Some(class),
            failure_message: Some(message.to_string()),
            ..Default::default()
        }
    }

    /// The speedup with its interval (None for a node that was not timed).
    pub fn measured_speedup(&self) -> Option<Speedup> {
        let point = self.speedup?;
        Some(match (self.speedup_low, self.speedup_high) {
            (Some(low), Some(high)) => Speedup { point, low, high },
            _ => Speedup::unmeasured(point),
        })
    }

    /// The served shapes where this node is slower than the baseline beyond the margin
    /// ([`crate::wall::ShapeResult::regressed`]; `baseline` is the baseline timed against
    /// itself): a kernel with any is never the best, whatever its mean.
    pub fn regressed_shapes(&self, min_gain: f64, baseline: Option<&NodeSummary>) -> Vec<&crate::wall::ShapeResult> {
        let own = |i: usize| baseline.and_then(|b| b.served.get(i));
        self.served.iter().enumerate().filter(|(i, s)| s.regressed(min_gain, own(*i))).map(|(_, s)| s).collect()
    }

    /// Whether this node, correct, ran at the speed of its `parent` (correct too) as far as
    /// the timing can tell: inside the parent's 95% interval or within `min_gain` of its
    /// speedup ([`Speedup::same_speed`]). Such a child is no gain that clears the noise.
    pub fn within_interval_of(&self, parent: &NodeSummary, min_gain: f64) -> bool {
        self.speed_against(parent, min_gain) == search::ParentSpeed::Same
    }

    /// This node's time against its `parent`'s: the same as far as the timing can tell
    /// ([`Self::within_interval_of`]), apart, or unknown where either failed or has no
    /// timing.
    pub fn speed_against(&self, parent: &NodeSummary, min_gain: f64) -> search::ParentSpeed {
        if !(self.passed && parent.passed) {
            return search::ParentSpeed::Unknown;
        }
        match (parent.measured_speedup(), self.speedup) {
            (Some(p), Some(s)) if p.same_speed(s, min_gain) => search::ParentSpeed::Same,
            (Some(_), Some(_)) => search::ParentSpeed::Apart,
            _ => search::ParentSpeed::Unknown,
        }
    }

    /// What the search sees of this node.
    pub fn outcome(&self) -> search::Outcome {
        if self.passed {
            search::Outcome {
                energy_saving: self.energy_saving,
                ..search::Outcome::correct(self.speedup.unwrap_or(1.0))
            }
        } else {
            search::Outcome::failed(self.failure_class.as_ref().map_or("unknown", |c| c.name()))
        }
    }
}

/// Token use of one generation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost: f64,
    pub requests: u32,
}

impl Usage {
    pub fn add(&mut self, o: &Usage) {
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
        self.cost += o.cost;
        self.requests += o.requests;
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// A session began (the first one, or a resume).
    Session {
        resumed: bool,
        pid: u32,
    },
    /// The root: the baseline checked against the reference and timed against itself.
    Baseline {
        summary: NodeSummary,
        candidate: Candidate,
    },
    /// The search chose to expand `parent`; node `id` is now in flight.
    NodeStarted {
        id: NodeId,
        parent: NodeId,
        kind: Expansion,
    },
    /// The generator wrote node `id`; its files are in its folder.
    NodeProposed {
        id: NodeId,
        candidate: Candidate,
        technique: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// The generator had nothing new to offer from `parent` (the node is dropped).
    NoProposal {
        id: NodeId,
        parent: NodeId,
        why: String,
        /// Nothing more at all (a budget spent, the replay exhausted), not only from `parent`.
        #[serde(default)]
        stop: bool,
    },
    /// One HTTP attempt of the LLM client that did not simply succeed (429, 5xx, timeout).
    LlmAttempt {
        id: NodeId,
        attempt: u32,
        status: String,
        wait_s: f64,
    },
    NodeBuilt {
        id: NodeId,
        ok: bool,
        cached: bool,
        seconds: f64,
    },
    /// The node's verdict (also for generation and build failures).
    NodeFinished {
        id: NodeId,
        summary: NodeSummary,
        #[serde(default)]
        lane: Option<usize>,
        /// Set when the node duplicated an already judged kernel.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duplicate_of: Option<NodeId>,
    },
    /// ncu + SASS + diagnoses of a correct node, done the first time it was selected.
    Profiled {
        id: NodeId,
        ok: bool,
        seconds: f64,
        top: Vec<String>,
        note: String,
        /// The layers ncu ran in: the hosted arrangement's namespaces, then the worker's.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        sandbox: Vec<crate::wall::sandbox::Layer>,
        /// Not profiled: the profile of this ancestor used instead
        /// ([`crate::generate::ParentProfile::shared_from`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shared_from: Option<NodeId>,
    },
    /// The end of the search: why it stopped.
    SearchStopped {
        why: String,
    },
    /// The end-of-run re-verification of a best candidate.
    FinalCheck {
        id: NodeId,
        passed: bool,
        seeds: u32,
        sanitized: bool,
        note: String,
    },
    /// The end of a search over served shapes: the combination of each shape's best
    /// kernel that became `node`, or why there is none.
    ShapeDispatch {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<NodeId>,
        note: String,
    },
    /// The session stopped without finishing, for a reason outside any kernel (the GPU or
    /// the driver failed, the run directory could not be written); `--resume` carries on.
    SessionStopped {
        why: String,
    },
    RunFinished {
        best: NodeId,
        speedup: f64,
        verified: bool,
    },
}

/// One line of `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Seconds since the Unix epoch.
    pub at: f64,
    #[serde(flatten)]
    pub event: Event,
    /// Present (and true) in every line of a run made with the simulated evaluator.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
}

/// A line of `events.jsonl` that does not parse, and is not the last (a torn last line is
/// dropped, not an error).
#[derive(Debug, thiserror::Error)]
#[error("events.jsonl:{line}: {source}")]
pub struct LogError {
    /// 1-based.
    pub line: usize,
    pub source: serde_json::Error,
}

/// Parses an event log. A final line cut short by a kill is dropped (it was never
/// acknowledged); a bad line anywhere else is an error naming its line number.
pub fn parse_log(text: &str) -> Result<Vec<Record>, LogError> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.split('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(line) {
            Ok(r) => out.push(r),
            Err(_) if i + 1 == lines.len() => break,
            Err(source) => return Err(LogError { line: i + 1, source }),
        }
    }
    Ok(out)
}

/// The search clock at each record: seconds of sessions, not of wall time, so the hours
/// between a kill and its resume count for nothing. A session runs from its `session`
/// event to the last record before the next one.
pub fn active_clock(records: &[Record]) -> Vec<f64> {
    let (mut before, mut start, mut last) = (0.0f64, None::<f64>, 0.0f64);
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        if let Event::Session { .. } = r.event {
            if let Some(s) = start {
                before += (last - s).max(0.0);
            }
            start = Some(r.at);
        }
        let s = *start.get_or_insert(r.at);
        out.push(before + (r.at - s).max(0.0));
        last = r.at;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_speed_against_its_parent_is_unknown_where_either_failed_or_has_no_timing() {
        use search::ParentSpeed::{Apart, Same, Unknown};
        let passed = |s: f64| NodeSummary { passed: true, speedup: Some(s), ..Default::default() };
        let parent = NodeSummary { speedup_low: Some(1.40), speedup_high: Some(1.60), ..passed(1.5) };
        assert_eq!(passed(1.58).speed_against(&parent, 0.01), Same);
        assert_eq!(passed(1.65).speed_against(&parent, 0.01), Apart);
        assert_eq!(passed(1.20).speed_against(&parent, 0.01), Apart, "slower counts as apart");
        let failed = NodeSummary { passed: false, ..Default::default() };
        assert_eq!(passed(1.58).speed_against(&failed, 0.01), Unknown, "a failed parent");
        assert_eq!(failed.speed_against(&parent, 0.01), Unknown, "a failed child");
        let untimed = NodeSummary { passed: true, ..Default::default() };
        assert_eq!(untimed.speed_against(&parent, 0.01), Unknown, "a child without timing");
        assert_eq!(passed(1.58).speed_against(&untimed, 0.01), Unknown, "a parent without timing");
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_a_torn_middle_line_is_an_error() {
        let a = serde_json::to_string(&Record {
            at: 1.0,
            event: Event::SearchStopped { why: "x".into() },
            simulated: true,
        })
        .unwrap();
        let good = format!("{a}\n{a}\n");
        assert_eq!(parse_log(&good).unwrap().len(), 2);
        let torn = format!("{a}\n{}", &a[..10]);
        assert_eq!(parse_log(&torn).unwrap().len(), 1);
        let bad = format!("{}\n{a}\n", &a[..10]);
        assert!(parse_log(&bad).unwrap_err().to_string().starts_with("events.jsonl:1:"));
        assert!(a.contains("\"simulated\":true"), "{a}");
    }

    #[test]
    fn the_search_clock_skips_the_time_between_sessions() {
        let rec = |at: f64, event: Event| Record { at, event, simulated: false };
        let stop = || Event::SearchStopped { why: "x".into() };
        let log = [
            rec(100.0, Event::Session { resumed: false, pid: 1 }),
            rec(130.0, stop()),
            // Killed at 130; resumed a day later.
            rec(86_500.0, Event::Session { resumed: true, pid: 2 }),
            rec(86_510.0, stop()),
        ];
        assert_eq!(active_clock(&log), vec![0.0, 30.0, 30.0, 40.0]);
        assert!(active_clock(&[]).is_empty());
    }

    #[test]
    fn summaries_map_to_search_outcomes() {
        let ok = NodeSummary { passed: true, speedup: Some(1.5), ..Default::default() };
        assert!(ok.outcome().correct);
        assert_eq!(ok.outcome().speedup, 1.5);
        let bad = NodeSummary::failed(crate::wall::protocol::FailureClass::WrongAnswer.into(), "off by 1e-2");
        assert_eq!(bad.outcome().failure.as_deref(), Some("wrong-answer"));
    }
}
