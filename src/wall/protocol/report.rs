//! What the judge finds: its report to the orchestrator (the outcome, the check, the
//! timing, the energy, the notes) and the measurement types inside it. The judge is the
//! only process that writes one; nothing a worker says is part of it except as data the
//! judge checked.
//!
//! Floating-point fields that a broken kernel can make NaN or infinite (errors,
//! mismatching values) read back JSON's `null` as NaN: a report must never be lost to the
//! very numbers that explain a rejection.

use super::failure::Failure;
use serde::{Deserialize, Serialize};

/// Calls on one case after the check, each verified: a kernel wrong on one call in
/// fifty, or one that changes after so many calls, shows here.
pub const REPEAT_CALLS: usize = 48;

/// Reads JSON `null` (what serde_json writes for NaN and infinities) as NaN.
pub mod lenient_f64 {
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

/// How much timing a judgment does. Each side is timed in rounds: one round is a batch of
/// calls back to back, each on an input set made for it, inside one window of the judge's
/// clock. The baseline is timed in two phases (before the timed candidate process loads its
/// library and after it is gone), the candidate in one, each of `rounds` rounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimingPlan {
    /// Rounds per phase.
    #[serde(default = "default_rounds")]
    pub rounds: usize,
    /// The least a round's window should hold of calls, in milliseconds: enough that the
    /// round trip to the worker and the judge's own checks weigh little beside the calls.
    #[serde(default = "default_round_ms", deserialize_with = "lenient_f64::deserialize")]
    pub round_ms: f64,
    /// The most calls (input sets) in one round; GPU memory may allow fewer.
    #[serde(default = "default_max_calls")]
    pub max_calls: usize,
    /// Seconds of back-to-back calls per side for an energy reading.
    #[serde(default = "default_energy_seconds", deserialize_with = "lenient_f64::deserialize")]
    pub energy_seconds: f64,
}

fn yes() -> bool {
    true
}

fn default_rounds() -> usize {
    5
}
fn default_round_ms() -> f64 {
    10.0
}
fn default_max_calls() -> usize {
    128
}
fn default_energy_seconds() -> f64 {
    1.0
}

impl Default for TimingPlan {
    fn default() -> Self {
        TimingPlan {
            rounds: default_rounds(),
            round_ms: default_round_ms(),
            max_calls: default_max_calls(),
            energy_seconds: default_energy_seconds(),
        }
    }
}

/// How a judgment ended.
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

/// The judge's last word on one judgment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JudgeReport {
    pub outcome: Outcome,
    #[serde(default)]
    pub check: Option<CheckSummary>,
    #[serde(default)]
    pub timing: Option<TimingReport>,
    #[serde(default)]
    pub energy: Option<EnergyReport>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// The GPU the judgment ran on.
    #[serde(default)]
    pub device: Option<DeviceInfo>,
    /// The sandbox layers the candidate's worker put up before it loaded anything.
    #[serde(default)]
    pub sandbox: Vec<crate::wall::sandbox::Layer>,
    /// Seconds that worker took to put them up.
    #[serde(default)]
    pub sandbox_s: f64,
    /// Seconds per phase of the judgment, by the judge's clock.
    #[serde(default)]
    pub phases: std::collections::BTreeMap<String, f64>,
    /// The end of what the candidate's process printed, when it was rejected.
    #[serde(default)]
    pub stderr_tail: Option<String>,
    /// Every served shape's timing, when the task serves shapes (`[sizes] serve`);
    /// `timing` is then the heaviest shape's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub served: Vec<ShapeTiming>,
}

impl ShapeTiming {
    /// Each shape's weight in the objective: its share of the baseline's time when the
    /// weights are shares of calls, else the weight ([`crate::task::serve::WeightBasis`]).
    pub fn time_shares(served: &[ShapeTiming], basis: crate::task::serve::WeightBasis) -> Vec<f64> {
        let weights: Vec<f64> = served.iter().map(|s| s.weight).collect();
        let baseline_ms: Vec<f64> = served.iter().map(|s| s.timing.baseline.median_ms).collect();
        basis.time_shares(&weights, &baseline_ms)
    }
}

/// One served shape's timing within a judgment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShapeTiming {
    pub name: String,
    /// Its weight as the task gives it (summing to 1 over the shapes).
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub weight: f64,
    pub timing: TimingReport,
    #[serde(default)]
    pub energy: Option<EnergyReport>,
}

impl JudgeReport {
    /// A report with only an outcome (nothing measured yet).
    pub fn of(outcome: Outcome) -> JudgeReport {
        JudgeReport {
            outcome,
            check: None,
            timing: None,
            energy: None,
            notes: Vec::new(),
            device: None,
            sandbox: Vec::new(),
            sandbox_s: 0.0,
            phases: Default::default(),
            stderr_tail: None,
            served: Vec::new(),
        }
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
    /// handed to the judge by the orchestrator; absent where it could not be measured.
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
    /// The baseline's rounds before the candidate's library was loaded and after it ended
    /// (ms a call, by the figure used): `baseline.round_medians_ms` pairs them.
    #[serde(default)]
    pub baseline_before_ms: Vec<f64>,
    #[serde(default)]
    pub baseline_after_ms: Vec<f64>,
    /// baseline median / candidate median per call.
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub speedup: f64,
    pub same_library: bool,
    pub size: String,
    pub flush_l2: bool,
    /// Input sets per side: every timed call had one of its own, never seen before.
    pub input_sets: usize,
    /// The judge's clock against the workers' events, and which one the figures are from.
    #[serde(default)]
    pub clock_check: ClockCheck,
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
    /// Other processes NVML saw on the GPU before or after timing.
    #[serde(default)]
    pub other_processes: Vec<u32>,
}

impl TimingReport {
    /// The speedup with its interval from the paired rounds (None with fewer than two).
    pub fn interval(&self) -> Option<crate::stats::Speedup> {
        crate::stats::Speedup::from_rounds(
            self.speedup,
            &self.baseline.round_medians_ms,
            &self.candidate.round_medians_ms,
        )
    }
}

/// Which clock a timing's figures come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Figure {
    /// The workers' CUDA events, which agreed with the judge's clock within the noise.
    #[default]
    Events,
    /// The judge's own windows, less the baseline's overhead per call: the events did not
    /// account for all the time the candidate's calls took.
    Judge,
}

/// The judge's clock against the events each worker measured around its own calls. A
/// round's window runs from the judge's command to the end of its own verification of every
/// output, so work that escapes a worker's events still lands in it; what a window holds
/// beyond the events (the gap) is the same per call for any two kernels of one task, up to
/// the noise, unless one side's events leave work out.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClockCheck {
    /// Per call, the window beyond the events: the baseline's (median over its rounds) and
    /// the candidate's.
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub baseline_gap_ms: f64,
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub candidate_gap_ms: f64,
    /// How far the candidate's gap may exceed the baseline's and still agree.
    #[serde(deserialize_with = "lenient_f64::deserialize")]
    pub tolerance_ms: f64,
    pub figure: Figure,
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
    fn a_report_written_before_the_clock_check_reads_back() {
        let old = r#"{"baseline":{"median_ms":1,"mean_ms":1,"min_ms":1,"max_ms":1,"cv":0,"samples":1,"round_medians_ms":[1]},
            "candidate":{"median_ms":1,"mean_ms":1,"min_ms":1,"max_ms":1,"cv":0,"samples":1,"round_medians_ms":[1]},
            "speedup":1.0,"same_library":true,"size":"n=1","flush_l2":true,"input_sets":2,
            "host_check":{"calls":1,"host_ms_per_call":1,"event_ms_per_call":1,"ok":true},
            "floor_ms":null,"pct_of_floor":null,"baseline_pct_of_floor":null,
            "clocks":{"sm_mhz_before":null,"sm_mhz_after":null,"memory_mhz":null,"throttle_reasons":[],"temperature_c":null},
            "baseline_outputs_ok":true}"#;
        let t: TimingReport = serde_json::from_str(old).unwrap();
        assert_eq!(t.clock_check.figure, Figure::Events);
        assert_eq!(t.speedup, 1.0);
    }
}
