//! The orchestrator and the judge: what one judgment is asked to do, and the lines the
//! judge prints while it works. The judge is our code alone and no worker can reach its
//! output (its workers get pipes of their own), so its lines need no seal: its report is
//! the verdict's source.

use super::report::{JudgeReport, TimingPlan};
use crate::task::Task;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One judgment: the task, the three libraries, what to measure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JudgeRequest {
    pub task: Task,
    pub reference: PathBuf,
    pub baseline: PathBuf,
    pub candidate: PathBuf,
    pub mode: Mode,
    pub device: usize,
    pub timing: TimingPlan,
    /// Seeds of every input set are keyed by this secret: fresh per `eval`, per run for
    /// `optimize` (in run.json, for `--resume`), per final check; never in a worker's reach.
    pub seed_base: u64,
    /// The orchestrator's deadline for the whole judgment (the workers' CPU backstop).
    #[serde(deserialize_with = "super::lenient_f64::deserialize")]
    pub deadline_s: f64,
    /// Where the judge makes its workers' scratch folders: the orchestrator's private
    /// evaluation folder, outside the shared /tmp.
    pub folder: PathBuf,
    /// The executable whose `worker` subcommand the judge starts.
    pub worker_exe: PathBuf,
    /// Whether workers fence themselves in; off only to find which layer a driver trips
    /// over (`NIGHTSHIFT_SANDBOX=off`).
    #[serde(default = "yes")]
    pub sandbox: bool,
    /// Layers left out (`NIGHTSHIFT_SANDBOX=no-landlock,no-seccomp`).
    #[serde(default)]
    pub sandbox_skip: Vec<String>,
    /// The measured DRAM bandwidth (`bandwidth::achievable`), for the floor beside the
    /// datasheet one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achievable_dram_gbs: Option<f64>,
}

fn yes() -> bool {
    true
}

impl JudgeRequest {
    /// CPU seconds over all threads a worker may use before the kernel stops it: far past
    /// what the deadline allows on every core, a backstop to a deadline somehow missed.
    pub fn cpu_seconds(&self) -> u64 {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(8) as f64;
        (self.deadline_s * (cores + 2.0) * 2.0).max(60.0) as u64
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum Mode {
    /// Check, then (optionally) time and measure energy. `check_baseline: false` skips
    /// checking a baseline the run already checked once (optimize).
    Evaluate {
        time: bool,
        energy: bool,
        #[serde(default = "yes")]
        check_baseline: bool,
    },
    /// For tests of the optimize loop on machines without a GPU: the judge starts the
    /// candidate's worker and has it load the library (its constructors run, sandboxed as
    /// always), touches no GPU, waits `delay_ms` and reports `outcome` as the simulated
    /// evaluator decided, unless the worker died first.
    Simulate { delay_ms: u64, outcome: Box<JudgeReport> },
}

/// A step of a judgment, announced before it starts, for progress and phase times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The judge's GPU context, buffers and its workers' starts.
    Init,
    /// Input sets generated and the reference run on them.
    Reference,
    CheckBaseline,
    /// The candidate's worker loads the library.
    LoadCandidate,
    Check,
    Time,
    Energy,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Init => "init",
            Phase::Reference => "reference",
            Phase::CheckBaseline => "check-baseline",
            Phase::LoadCandidate => "load-candidate",
            Phase::Check => "check",
            Phase::Time => "time",
            Phase::Energy => "energy",
        }
    }
}

/// One line of the judge's output.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum JudgeMessage {
    Phase { phase: Phase, detail: String },
    Done { report: Box<JudgeReport> },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wall::protocol::Outcome;

    #[test]
    fn messages_round_trip() {
        let m = JudgeMessage::Phase { phase: Phase::Check, detail: "n=3 seed 1".into() };
        let back: JudgeMessage = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert!(matches!(back, JudgeMessage::Phase { phase: Phase::Check, .. }));
        let done = JudgeMessage::Done { report: Box::new(JudgeReport::of(Outcome::Passed)) };
        let back: JudgeMessage = serde_json::from_str(&serde_json::to_string(&done).unwrap()).unwrap();
        assert!(matches!(back, JudgeMessage::Done { report } if matches!(report.outcome, Outcome::Passed)));
    }
}
