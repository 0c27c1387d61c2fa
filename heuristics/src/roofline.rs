//! Stage 1: where the kernel sits against the hardware's ceilings. The class decides
//! which stage-2 tools are worth running.

use crate::facts::{metric, Kernel};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// DRAM (or the best compute unit) near its peak: only doing less work helps.
    AtRoofline,
    /// A memory unit (DRAM, L2 or L1/shared) is the busiest part of the GPU.
    MemoryBound,
    /// An SM pipe is the busiest part of the GPU.
    ComputeBound,
    /// Neither is busy: too little work in flight to hide latency.
    LatencyBound,
    /// No counters to judge by (SASS-only diagnosis).
    Unknown,
}

impl Bound {
    pub fn name(self) -> &'static str {
        match self {
            Bound::AtRoofline => "at-roofline",
            Bound::MemoryBound => "memory-bound",
            Bound::ComputeBound => "compute-bound",
            Bound::LatencyBound => "latency-bound",
            Bound::Unknown => "unknown",
        }
    }
}

/// DRAM throughput at which a kernel counts as at the roofline (practical peak is ~90%).
pub const AT_ROOFLINE_DRAM_PCT: f64 = 80.0;
/// Speed-of-light throughput at which a unit counts as the bottleneck.
pub const BOUND_PCT: f64 = 50.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Roofline {
    pub class: Bound,
    /// The unit that limits: dram, l2, l1, or the busiest pipe.
    pub limiter: String,
    pub dram_pct: Option<f64>,
    pub memory_pct: Option<f64>,
    pub compute_pct: Option<f64>,
    pub l1_pct: Option<f64>,
    pub l2_pct: Option<f64>,
    pub duration_us: Option<f64>,
    pub dram_gbs: Option<f64>,
    pub gflops: Option<f64>,
    /// FLOP per DRAM byte.
    pub arithmetic_intensity: Option<f64>,
    /// Kernel time over the least time the task's bytes and flops need, when known.
    pub floor_us: Option<f64>,
    pub reason: String,
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub fn classify(k: &Kernel) -> Roofline {
    let dram = k.opt(metric::DRAM_PCT);
    let mem = k.opt(metric::MEM_SOL);
    let sm = k.opt(metric::SM_SOL);
    let l1 = k.opt(metric::L1_PCT);
    let l2 = k.opt(metric::L2_PCT);
    let dur = k.opt(metric::DURATION);
    let bytes = k.dram_bytes();
    let flops = k.achieved_flops();
    let dram_gbs = match (bytes, dur) {
        (Some(b), Some(t)) if t > 0.0 => Some(b / t / 1e9),
        _ => None,
    };
    let gflops = flops.map(|f| f / 1e9);
    let ai = match (flops, bytes, dur) {
        (Some(f), Some(b), Some(t)) if b > 0.0 => Some(f * t / b),
        _ => None,
    };
    let floor_us = match (k.hints.min_bytes, k.device.peak_dram_bytes_per_s) {
        (Some(b), Some(p)) if p > 0.0 => Some(b / p * 1e6),
        _ => None,
    };
    let memory_limiter = || {
        let units = [("dram", dram), ("l2", l2), ("l1", l1)];
        units
            .iter()
            .filter_map(|(n, v)| v.map(|v| (*n, v)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(n, _)| n.to_string())
            .unwrap_or_else(|| "memory".into())
    };
    let busiest_pipe = || {
        let pipes = [
            ("fma", metric::FMA_PIPE_PCT),
            ("tensor", metric::TENSOR_PCT),
            ("fp64", metric::FP64_PIPE_PCT),
            ("xu", metric::XU_PCT),
            ("lsu", metric::LSU_PCT),
        ];
        pipes
            .iter()
            .filter_map(|(n, m)| k.opt(m).map(|v| (*n, v)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(n, _)| format!("{n} pipe"))
            .unwrap_or_else(|| "sm".into())
    };
    let (class, limiter, reason) = match (dram, mem, sm) {
        (None, None, None) => {
            (Bound::Unknown, String::new(), "no speed-of-light counters: SASS and ptxas facts only".to_string())
        }
        _ => {
            let (d, m, s) = (dram.unwrap_or(0.0), mem.unwrap_or(0.0), sm.unwrap_or(0.0));
            if d >= AT_ROOFLINE_DRAM_PCT {
                (
                    Bound::AtRoofline,
                    "dram".to_string(),
                    format!("DRAM throughput {d:.1}% of peak is at the practical ceiling (>= {AT_ROOFLINE_DRAM_PCT}%)"),
                )
            } else if m >= BOUND_PCT && m >= s {
                let lim = memory_limiter();
                (
                    Bound::MemoryBound,
                    lim.clone(),
                    format!(
                        "memory throughput {m:.1}% of peak ({lim} busiest) >= {BOUND_PCT}% and above compute {s:.1}%"
                    ),
                )
            } else if s >= BOUND_PCT {
                let lim = busiest_pipe();
                (
                    Bound::ComputeBound,
                    lim.clone(),
                    format!("SM throughput {s:.1}% of peak ({lim} busiest) >= {BOUND_PCT}% and above memory {m:.1}%"),
                )
            } else {
                (
                    Bound::LatencyBound,
                    "latency".to_string(),
                    format!("memory {m:.1}% and compute {s:.1}% are both under {BOUND_PCT}% of peak: too little work in flight to hide latency"),
                )
            }
        }
    };
    Roofline {
        class,
        limiter,
        dram_pct: dram.map(r1),
        memory_pct: mem.map(r1),
        compute_pct: sm.map(r1),
        l1_pct: l1.map(r1),
        l2_pct: l2.map(r1),
        duration_us: dur.map(|t| (t * 1e6 * 1000.0).round() / 1000.0),
        dram_gbs: dram_gbs.map(r1),
        gflops: gflops.map(r1),
        arithmetic_intensity: ai.map(|x| (x * 100.0).round() / 100.0),
        floor_us: floor_us.map(|x| (x * 1000.0).round() / 1000.0),
        reason,
    }
}
