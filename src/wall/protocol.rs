//! What the orchestrator and a worker say to each other. The request is a JSON file; the
//! worker answers with JSON lines on a private pipe (its stdout is handed to the
//! candidate's printf as stderr), sealed line by line (`channel`), announcing each phase
//! before entering it, so that when the worker dies the orchestrator knows what it was
//! doing.
//!
//! Floating-point fields that a broken kernel can make NaN or infinite (errors,
//! mismatching values) read back JSON's `null` as NaN: a report must never be lost to the
//! very numbers that explain a rejection.

use crate::task::Task;
use crate::wall::verify::Comparison;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// Calls on one case after the check, each verified: a kernel wrong on one call in
/// fifty, or one that changes after so many calls, shows here. The worker makes them; the
/// orchestrator checks a passing report counted them (`report_check`).
pub const REPEAT_CALLS: usize = 48;

/// Exit code of a worker whose report channel broke under it: candidate code closed or
/// replaced the descriptor. The worker exits with it; the orchestrator recognizes it.
pub const CHANNEL_LOST_EXIT: i32 = 86;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerRequest {
    pub task: Task,
    pub reference: PathBuf,
    pub baseline: PathBuf,
    pub candidate: PathBuf,
    pub mode: Mode,
    pub device: usize,
    pub timing: TimingPlan,
    /// CPU threads for data generation and comparison.
    pub threads: usize,
    /// Check seeds are `seed_base + 1000 * size + k`, bench seeds `seed_base + 1_000_000 + k`:
    /// fresh per run, so no candidate can know its inputs in advance.
    #[serde(default)]
    pub seed_base: u64,
    /// The orchestrator's deadline for this worker (sets the CPU-time backstop).
    #[serde(default = "default_deadline")]
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub deadline_s: f64,
    /// Whether the worker fences itself in (`sandbox`); off only for diagnosing the sandbox.
    #[serde(default = "yes")]
    pub sandbox: bool,
    /// Layers left out (`NIGHTSHIFT_SANDBOX=no-landlock,no-seccomp`), to find which one a
    /// driver trips over.
    #[serde(default)]
    pub sandbox_skip: Vec<String>,
    /// The measured DRAM bandwidth (`bandwidth::achievable`), for the floor beside the
    /// datasheet one; the worker never measures it (candidate code shares its process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achievable_dram_gbs: Option<f64>,
    /// The folders a hosting tool writes (ncu's log and report, the sanitizer's logs).
    /// The tool hands its open files down to the worker (ncu does, its log), so the worker
    /// closes every descriptor onto a file in them before it loads any library: no
    /// candidate can write into what the orchestrator reads as the tool's own output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_outputs: Vec<PathBuf>,
}

fn default_deadline() -> f64 {
    120.0
}

impl WorkerRequest {
    /// CPU seconds over all threads before the kernel stops the worker: far past what the
    /// deadline allows on every core, so that only a deadline the orchestrator somehow
    /// missed ever meets it.
    pub fn cpu_seconds(&self) -> u64 {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(8) as f64;
        (self.deadline_s * (cores + 2.0) * 2.0).max(60.0) as u64
    }
}

/// Reads JSON `null` (what serde_json writes for NaN and infinities) as NaN.
pub mod lenient_f64 {
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum Mode {
    /// Check, then (optionally) time and measure energy. `check_baseline: false` skips
    /// re-checking a baseline the run already checked once (optimize).
    Evaluate {
        time: bool,
        energy: bool,
        #[serde(default = "yes")]
        check_baseline: bool,
    },
    /// One call at the bench size between cuProfilerStart/Stop (under ncu).
    Profile,
    /// One call at the smallest check size (under compute-sanitizer), on exact-size
    /// allocations so that the sanitizer sees every out-of-bounds access.
    Sanitize,
    /// For tests of the optimize loop on machines without a GPU: the worker maps the
    /// candidate (its constructors run, isolated as always), touches no GPU, waits
    /// `delay_ms` and reports `outcome` as decided by the simulated evaluator.
    Simulate { delay_ms: u64, outcome: Box<WorkerReport> },
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimingPlan {
    pub min_samples: usize,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub min_seconds: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub max_seconds: f64,
    pub rounds: usize,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub energy_seconds: f64,
    pub energy_repeats: usize,
}

impl Default for TimingPlan {
    fn default() -> Self {
        TimingPlan {
            min_samples: 100,
            min_seconds: 0.3,
            max_seconds: 3.0,
            rounds: 5,
            energy_seconds: 1.0,
            energy_repeats: 3,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Init,
    LoadReference,
    Reference,
    LoadCandidate,
    CheckBaseline,
    Check,
    Time,
    Energy,
    /// A profile's inputs and warm-up calls, apart from the profiled call they precede.
    ProfileSetup,
    Profile,
    Sanitize,
}

impl Phase {
    /// Whether candidate (or baseline) code runs in this phase: a death here is theirs.
    pub fn runs_untrusted_code(self) -> bool {
        matches!(
            self,
            Phase::LoadCandidate
                | Phase::CheckBaseline
                | Phase::Check
                | Phase::Time
                | Phase::Energy
                | Phase::ProfileSetup
                | Phase::Profile
                | Phase::Sanitize
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Phase::Init => "init",
            Phase::LoadReference => "load-reference",
            Phase::Reference => "reference",
            Phase::LoadCandidate => "load-candidate",
            Phase::CheckBaseline => "check-baseline",
            Phase::Check => "check",
            Phase::Time => "time",
            Phase::Energy => "energy",
            Phase::ProfileSetup => "profile-setup",
            Phase::Profile => "profile",
            Phase::Sanitize => "sanitize",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum WorkerMessage {
    Phase {
        phase: Phase,
        detail: String,
    },
    Device {
        device: DeviceInfo,
    },
    /// The sandbox layers the worker put up, before anything untrusted was loaded.
    Sandbox {
        layers: Vec<crate::wall::sandbox::Layer>,
        /// Seconds the worker spent putting them up.
        #[serde(default)]
        seconds: f64,
    },
    Done {
        report: Box<WorkerReport>,
    },
}

/// Every way a candidate can fail. Names are a stable contract (JSON, reports, search memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    BuildError,
    /// The build ran past its time limit (not cached: the next try may have more CPU).
    BuildTimeout,
    MissingEntry,
    ForbiddenImport,
    LaunchError,
    IllegalAddress,
    /// The worker died by a signal while candidate code ran.
    Crash,
    /// Candidate code ended the process (`exit(3)` in a launcher).
    ProcessExit,
    Timeout,
    WrongAnswer,
    UnwrittenOutput,
    OutOfBoundsWrite,
    InputMutation,
    Nondeterminism,
    /// Results reused across calls: outputs match earlier inputs, or a repeated call skips work.
    StaleOutput,
    TimingAnomaly,
    SanitizerError,
    /// Lines on the report channel that the worker did not write (a forged verdict), or a
    /// report that does not fit the request.
    ForgedReport,
    /// Right on early calls, wrong on later ones: behaviour that depends on the call count.
    CallDependent,
    /// Fast on input sets seen before, slow on new ones: results cached by content.
    Memoization,
    /// Correct, but the timing stayed too noisy to use even when repeated.
    NoisyTiming,
    /// GPU memory (or another resource) lost on every call.
    ResourceLeak,
}

impl FailureClass {
    pub fn name(self) -> &'static str {
        match self {
            FailureClass::BuildError => "build-error",
            FailureClass::BuildTimeout => "build-timeout",
            FailureClass::MissingEntry => "missing-entry",
            FailureClass::ForbiddenImport => "forbidden-import",
            FailureClass::LaunchError => "launch-error",
            FailureClass::IllegalAddress => "illegal-address",
            FailureClass::Crash => "crash",
            FailureClass::ProcessExit => "process-exit",
            FailureClass::Timeout => "timeout",
            FailureClass::WrongAnswer => "wrong-answer",
            FailureClass::UnwrittenOutput => "unwritten-output",
            FailureClass::OutOfBoundsWrite => "out-of-bounds-write",
            FailureClass::InputMutation => "input-mutation",
            FailureClass::Nondeterminism => "nondeterminism",
            FailureClass::StaleOutput => "stale-output",
            FailureClass::TimingAnomaly => "timing-anomaly",
            FailureClass::SanitizerError => "sanitizer-error",
            FailureClass::ForgedReport => "forged-report",
            FailureClass::CallDependent => "call-dependent",
            FailureClass::Memoization => "memoization",
            FailureClass::NoisyTiming => "noisy-timing",
            FailureClass::ResourceLeak => "resource-leak",
        }
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub class: FailureClass,
    pub message: String,
    /// Where it happened: argument, size and seed, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<CaseRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Box<Comparison>>,
}

impl Failure {
    pub fn new(class: FailureClass, message: impl Into<String>) -> Failure {
        Failure { class, message: message.into(), at: None, comparison: None }
    }

    /// Names the call of the library that produced it (where the case is known).
    pub fn at_call(mut self, call: u64) -> Failure {
        if let Some(at) = &mut self.at {
            at.call = Some(call);
        }
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseRef {
    pub size: String,
    pub seed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg: Option<String>,
    /// Which call of the library in this worker (1-based) produced it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<u64>,
}

/// The worker's last word.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    Passed,
    Rejected {
        failure: Failure,
    },
    /// The task itself is wrong (the reference fails, or the baseline fails its check).
    TaskError {
        message: String,
    },
    /// The machine lacks something (no GPU, no driver).
    EnvError {
        message: String,
    },
    /// A bug or a GPU failure outside candidate code.
    InternalError {
        message: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerReport {
    pub outcome: Outcome,
    #[serde(default)]
    pub check: Option<CheckSummary>,
    #[serde(default)]
    pub timing: Option<TimingReport>,
    #[serde(default)]
    pub energy: Option<EnergyReport>,
    #[serde(default)]
    pub notes: Vec<String>,
}

impl WorkerReport {
    /// A report with only an outcome (nothing measured yet).
    pub fn of(outcome: Outcome) -> WorkerReport {
        WorkerReport { outcome, check: None, timing: None, energy: None, notes: Vec::new() }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CheckSummary {
    pub cases: usize,
    pub calls: usize,
    /// Of `calls`, those repeated on one case after the check (each verified).
    #[serde(default)]
    pub repeat_calls: usize,
    pub elements_compared: usize,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub max_abs_err: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub max_rel_err: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub name: String,
    pub uuid: String,
    pub compute_capability: (i32, i32),
    pub sm_count: i32,
    pub l2_bytes: i64,
    pub memory_bytes: u64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub max_sm_clock_mhz: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub memory_clock_mhz: f64,
    pub memory_bus_bits: i32,
    /// Theoretical DRAM bandwidth from clock and bus width (GB/s, 1e9 bytes).
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub peak_dram_gbs: f64,
    pub driver_version: i32,
    /// DRAM bandwidth this GPU was measured to reach (GB/s, a stream triad; `bandwidth`),
    /// handed to the worker by the orchestrator; absent where it could not be measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achievable_dram_gbs: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SideTiming {
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub median_ms: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub mean_ms: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub min_ms: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub max_ms: f64,
    /// Standard deviation over mean of all samples.
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub cv: f64,
    pub samples: usize,
    /// Median of each round: their spread is how far the median itself moves.
    pub round_medians_ms: Vec<f64>,
}

impl SideTiming {
    pub fn from_samples(samples: &[f64], rounds: &[Vec<f64>]) -> SideTiming {
        let n = samples.len();
        if n == 0 {
            return SideTiming::default();
        }
        let mean = samples.iter().sum::<f64>() / n as f64;
        let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n.max(2) - 1) as f64;
        SideTiming {
            median_ms: median(samples),
            mean_ms: mean,
            min_ms: samples.iter().cloned().fold(f64::INFINITY, f64::min),
            max_ms: samples.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
            samples: n,
            round_medians_ms: rounds.iter().filter(|r| !r.is_empty()).map(|r| median(r)).collect(),
        }
    }

    /// (max - min) / median of the round medians.
    pub fn median_spread(&self) -> f64 {
        if self.round_medians_ms.len() < 2 || self.median_ms <= 0.0 {
            return 0.0;
        }
        let lo = self.round_medians_ms.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = self.round_medians_ms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        (hi - lo) / self.median_ms
    }
}

pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TimingReport {
    pub baseline: SideTiming,
    pub candidate: SideTiming,
    /// baseline median / candidate median, from interleaved samples in one process.
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub speedup: f64,
    pub same_library: bool,
    pub size: String,
    pub flush_l2: bool,
    pub input_sets: usize,
    pub host_check: HostCheck,
    pub floor_ms: Option<f64>,
    pub pct_of_floor: Option<f64>,
    pub baseline_pct_of_floor: Option<f64>,
    /// The floor at the measured DRAM bandwidth (`DeviceInfo::achievable_dram_gbs`), and
    /// each side's share of it: what this GPU can reach, beside the datasheet's floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achievable_floor_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pct_of_achievable: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_pct_of_achievable: Option<f64>,
    pub clocks: ClockReport,
    pub baseline_outputs_ok: bool,
    /// False when the samples stayed too noisy after a repeat: the speedup is not a
    /// measurement and the search must not use it as one.
    #[serde(default = "yes")]
    pub reliable: bool,
    /// How many times the timing was redone for noise.
    #[serde(default)]
    pub repeats: usize,
    /// Other processes NVML saw on the GPU before or after timing.
    #[serde(default)]
    pub other_processes: Vec<u32>,
    #[serde(default)]
    pub cold: Option<ColdCheck>,
}

/// Times on input sets used once, after the timing, each beside a call on a set seen
/// before that was timed the same way.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ColdCheck {
    pub baseline_ms: Vec<f64>,
    pub candidate_ms: Vec<f64>,
    #[serde(default)]
    pub baseline_warm_ms: Vec<f64>,
    #[serde(default)]
    pub candidate_warm_ms: Vec<f64>,
    /// Cold median / warm median.
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub baseline_ratio: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub candidate_ratio: f64,
}

impl ColdCheck {
    /// From (cold, warm) times per side, [baseline, candidate].
    pub fn new(cold: &[Vec<f64>; 2], warm: &[Vec<f64>; 2]) -> ColdCheck {
        ColdCheck {
            baseline_ratio: median(&cold[0]) / median(&warm[0]),
            candidate_ratio: median(&cold[1]) / median(&warm[1]),
            baseline_ms: cold[0].clone(),
            candidate_ms: cold[1].clone(),
            baseline_warm_ms: warm[0].clone(),
            candidate_warm_ms: warm[1].clone(),
        }
    }

    /// The candidate slows down on new inputs by [`MEMOIZATION_RATIO`] beyond whatever
    /// first-use cost the baseline shows on the same sets.
    pub fn memoized(&self) -> bool {
        self.candidate_ratio > MEMOIZATION_RATIO * self.baseline_ratio.max(1.0)
    }
}

/// See [`ColdCheck::memoized`].
pub const MEMOIZATION_RATIO: f64 = 1.5;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HostCheck {
    pub calls: usize,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub host_ms_per_call: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub event_ms_per_call: f64,
    pub ok: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClockReport {
    pub sm_mhz_before: Option<u32>,
    pub sm_mhz_after: Option<u32>,
    pub memory_mhz: Option<u32>,
    pub throttle_reasons: Vec<String>,
    pub temperature_c: Option<u32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EnergySample {
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub joules_per_call: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub watts: f64,
    pub calls: u64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub seconds: f64,
    pub counter_updates: u32,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SideEnergy {
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub joules_per_call: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub joules_per_call_min: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub joules_per_call_max: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub watts: f64,
    pub samples: Vec<EnergySample>,
}

impl SideEnergy {
    pub fn from_samples(samples: Vec<EnergySample>) -> SideEnergy {
        let n = samples.len().max(1) as f64;
        SideEnergy {
            joules_per_call: samples.iter().map(|s| s.joules_per_call).sum::<f64>() / n,
            joules_per_call_min: samples.iter().map(|s| s.joules_per_call).fold(f64::INFINITY, f64::min),
            joules_per_call_max: samples.iter().map(|s| s.joules_per_call).fold(f64::NEG_INFINITY, f64::max),
            watts: samples.iter().map(|s| s.watts).sum::<f64>() / n,
            samples,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EnergyReport {
    pub baseline: SideEnergy,
    pub candidate: SideEnergy,
    /// baseline joules per call / candidate joules per call.
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub saving: f64,
    pub note: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_statistics() {
        let samples = [1.0, 2.0, 3.0, 4.0, 10.0];
        let t = SideTiming::from_samples(&samples, &[vec![1.0, 2.0], vec![3.0, 4.0, 10.0]]);
        assert_eq!(t.median_ms, 3.0);
        assert_eq!(t.mean_ms, 4.0);
        assert_eq!((t.min_ms, t.max_ms), (1.0, 10.0));
        assert!((t.cv - (12.5f64).sqrt() / 4.0).abs() < 1e-12, "sample std / mean, got {}", t.cv);
        assert_eq!(t.round_medians_ms, vec![1.5, 4.0]);
        assert!((t.median_spread() - 2.5 / 3.0).abs() < 1e-12);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn failure_classes_serialize_as_their_names() {
        for class in [
            FailureClass::WrongAnswer,
            FailureClass::ProcessExit,
            FailureClass::OutOfBoundsWrite,
            FailureClass::IllegalAddress,
        ] {
            let json = serde_json::to_string(&class).unwrap();
            assert_eq!(json, format!("\"{}\"", class.name()));
        }
    }

    #[test]
    fn messages_round_trip() {
        let m = WorkerMessage::Phase { phase: Phase::Check, detail: "n=3 seed 1".into() };
        let back: WorkerMessage = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert!(matches!(back, WorkerMessage::Phase { phase: Phase::Check, .. }));
    }
}
