//! `summary.json`: the result of a run as scripts and reports read it, one typed struct
//! written by `optimize` and read back through serde ([`read_summary`]), with the lane
//! and phase figures it carries.

use super::best::{Best, Tried};
use super::events::Usage;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const SUMMARY: &str = "summary.json";

/// What an idle lane waits for, in the order the pipeline feeds it: a build that is
/// running comes first, since its kernel is the next one a lane can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Wait {
    /// A kernel is being built (or waits for a build slot).
    Build,
    /// The generator is writing a child.
    Generator,
    /// A parent's profile, running on another lane, is what the next child waits for.
    Profile,
    /// Jobs are queued on other lanes while this one has none.
    OtherLanes,
    /// Nothing is in flight: the search has nothing to expand, or is stopping.
    Search,
}

impl Wait {
    pub const ALL: [Wait; 5] = [Wait::Build, Wait::Generator, Wait::Profile, Wait::OtherLanes, Wait::Search];

    /// Words for the progress line and the summary: "waiting for {describe}".
    pub fn describe(self) -> &'static str {
        match self {
            Wait::Build => "a build",
            Wait::Generator => "the generator",
            Wait::Profile => "a profile on another GPU",
            Wait::OtherLanes => "jobs queued on other GPUs",
            Wait::Search => "the search (nothing in flight)",
        }
    }
}

/// Idle seconds by reason, for one lane.
pub type IdleWaits = BTreeMap<Wait, f64>;

/// Seconds spent per phase, summed over expansions (phases overlap across expansions).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PhaseTimes {
    pub generate_s: f64,
    pub build_s: f64,
    pub profile_s: f64,
    pub judge_s: f64,
    pub profiles: usize,
    /// Nodes that used an ancestor's profile instead of their own.
    #[serde(default)]
    pub profiles_shared: usize,
    pub judgments: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GpuLane {
    pub device: usize,
    /// Busy seconds over the whole session (baseline, search, final check).
    pub busy_s: f64,
    /// Busy seconds during the search over the search's wall time in this session.
    pub busy_fraction: f64,
    pub jobs: usize,
    /// Idle seconds during the search by what the lane waited for (`build`, `generator`,
    /// `profile`, `other-lanes`, `search`).
    pub idle_waiting: IdleWaits,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub run_dir: PathBuf,
    pub task: String,
    /// In a simulated run's file the store's marker stands here (a sentence, read as true).
    #[serde(deserialize_with = "flag_or_marker")]
    pub simulated: bool,
    pub generator: String,
    pub stop_reason: String,
    /// The final check's verdict: the one set of numbers every output prints.
    pub best: Best,
    /// `best.cu`, when a kernel was confirmed.
    pub best_file: Option<PathBuf>,
    /// Judged nodes by outcome: "passed" or the failure class.
    pub outcomes: BTreeMap<String, usize>,
    pub judged: usize,
    /// Judged nodes that landed within their parent's interval (inside it, or within
    /// `--min-gain` of the parent's speedup): no gain that clears the noise.
    #[serde(default)]
    pub within_parent_interval: usize,
    /// Wall time of the search in this session, and summed over sessions.
    pub search_s: f64,
    pub phases: PhaseTimes,
    pub gpus: Vec<GpuLane>,
    pub judged_per_minute: f64,
    /// Judged nodes, in finishing order, until the best so far first reached 95% of the
    /// run's best gain (log2 speedup); None when nothing beat the baseline.
    pub evaluations_to_95pct: Option<usize>,
    pub usage: Option<Usage>,
    /// What the final check looked at, best first.
    pub final_check: Vec<Tried>,
}

fn flag_or_marker<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum FlagOrMarker {
        Flag(bool),
        Marker(serde::de::IgnoredAny),
    }
    Ok(match FlagOrMarker::deserialize(d)? {
        FlagOrMarker::Flag(b) => b,
        FlagOrMarker::Marker(_) => true,
    })
}

/// A run's `summary.json`, when it has one this version can read.
pub fn read_summary(dir: &Path) -> Option<Summary> {
    serde_json::from_str(&std::fs::read_to_string(dir.join(SUMMARY)).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::store::RunStore;

    fn summary(simulated: bool) -> Summary {
        let baseline = crate::run::events::NodeSummary { passed: true, candidate_ms: Some(0.1), ..Default::default() };
        let best = Best::none(crate::stats::Bar::new(0.01, None), &baseline, "no faster kernel".into());
        Summary {
            run_dir: PathBuf::from("runs/x"),
            task: "softmax".into(),
            simulated,
            generator: "tune".into(),
            stop_reason: "the budget is spent".into(),
            best,
            best_file: None,
            outcomes: [("passed".to_string(), 3)].into(),
            judged: 3,
            within_parent_interval: 1,
            search_s: 12.5,
            phases: PhaseTimes { profiles: 2, profiles_shared: 1, judgments: 3, ..Default::default() },
            gpus: vec![GpuLane {
                device: 0,
                busy_s: 10.0,
                busy_fraction: 0.9,
                jobs: 4,
                idle_waiting: [(Wait::Build, 1.5)].into(),
            }],
            judged_per_minute: 14.4,
            evaluations_to_95pct: Some(2),
            usage: None,
            final_check: Vec::new(),
        }
    }

    #[test]
    fn the_summary_reads_back_as_written_simulated_marker_included() {
        for simulated in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let store = RunStore::create(&tmp.path().join("run"), simulated).unwrap();
            let written = summary(simulated);
            store.write_json(SUMMARY, &written).unwrap();
            let read = read_summary(store.dir()).expect("summary.json reads back");
            assert_eq!(serde_json::to_value(&read).unwrap(), serde_json::to_value(&written).unwrap());
        }
    }
}
