//! Stage 2: the micro-profiling tools. Each one is a trigger on the evidence, an analysis
//! that sizes the problem, a prescription an expert would give, and an estimated saving
//! (share of kernel time) that ranks it against the others. Tools never guess a missing
//! counter: they report it as missing evidence instead. One file per area:
//! `memory_access`, `shared`, `atomics`, `arithmetic`, `parallelism`, and `summary` (stage
//! 1 restated); this file holds the table that orders and gates them.

use crate::diagnosis::{Diagnosis, ToolResult, Verdict};
use crate::facts::Kernel;
use crate::roofline::Roofline;

mod arithmetic;
mod atomics;
mod memory_access;
mod parallelism;
mod shared;
mod summary;

use arithmetic::{
    accurate_math, conversion_overhead, fp64_in_fp32, integer_overhead, no_tensor_cores, register_tiling,
    special_function_bound, warp_divergence,
};
use atomics::atomic_contention;
use memory_access::{
    async_copy_opportunity, dependent_loads, local_memory, memory_latency_bound, narrow_global_access,
    redundant_dram_traffic, redundant_l2_traffic, scalar_global_access, uncoalesced_global,
};
use parallelism::{launch_overhead, low_occupancy, register_pressure, under_filled_grid};
use shared::{barrier_stalls, shared_bank_conflicts, shared_memory_bound};
use summary::{at_roofline, roofline};

/// Which stage-1 classes a tool applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Runs for every kernel: the problem costs time whatever the bottleneck.
    Always,
    /// Memory-side tools: memory- and latency-bound kernels.
    Memory,
    /// Compute-side tools: compute- and latency-bound kernels.
    Compute,
    /// Parallelism tools: latency- and memory-bound kernels.
    Latency,
    /// Shared-memory and barrier tools: whenever L1 or the LSU pipe limits, whatever
    /// the class, and for latency-bound kernels.
    Shared,
}

impl Gate {
    pub fn name(self) -> &'static str {
        match self {
            Gate::Always => "always-on",
            Gate::Memory => "memory-side",
            Gate::Compute => "compute-side",
            Gate::Latency => "parallelism",
            Gate::Shared => "shared-memory",
        }
    }
}

pub struct Tool {
    pub id: &'static str,
    pub gate: Gate,
    pub run: fn(&Kernel, &Roofline) -> ToolResult,
}

/// Every tool, in tie-break order.
pub const ALL: &[Tool] = &[
    Tool { id: "register-tiling", gate: Gate::Shared, run: register_tiling },
    Tool { id: "no-tensor-cores", gate: Gate::Always, run: no_tensor_cores },
    Tool { id: "local-memory", gate: Gate::Always, run: local_memory },
    Tool { id: "uncoalesced-global", gate: Gate::Always, run: uncoalesced_global },
    Tool { id: "dependent-loads", gate: Gate::Latency, run: dependent_loads },
    Tool { id: "narrow-global-access", gate: Gate::Memory, run: narrow_global_access },
    Tool { id: "shared-bank-conflicts", gate: Gate::Shared, run: shared_bank_conflicts },
    Tool { id: "shared-memory-bound", gate: Gate::Shared, run: shared_memory_bound },
    Tool { id: "atomic-contention", gate: Gate::Always, run: atomic_contention },
    Tool { id: "fp64-in-fp32", gate: Gate::Always, run: fp64_in_fp32 },
    Tool { id: "under-filled-grid", gate: Gate::Always, run: under_filled_grid },
    Tool { id: "warp-divergence", gate: Gate::Compute, run: warp_divergence },
    Tool { id: "scalar-global-access", gate: Gate::Memory, run: scalar_global_access },
    Tool { id: "redundant-dram-traffic", gate: Gate::Always, run: redundant_dram_traffic },
    Tool { id: "redundant-l2-traffic", gate: Gate::Memory, run: redundant_l2_traffic },
    Tool { id: "register-pressure", gate: Gate::Always, run: register_pressure },
    Tool { id: "low-occupancy", gate: Gate::Latency, run: low_occupancy },
    Tool { id: "accurate-math", gate: Gate::Compute, run: accurate_math },
    Tool { id: "special-function-bound", gate: Gate::Compute, run: special_function_bound },
    Tool { id: "barrier-stalls", gate: Gate::Shared, run: barrier_stalls },
    Tool { id: "memory-latency-bound", gate: Gate::Latency, run: memory_latency_bound },
    Tool { id: "async-copy-opportunity", gate: Gate::Memory, run: async_copy_opportunity },
    Tool { id: "integer-overhead", gate: Gate::Compute, run: integer_overhead },
    Tool { id: "conversion-overhead", gate: Gate::Compute, run: conversion_overhead },
    Tool { id: "launch-overhead", gate: Gate::Always, run: launch_overhead },
    Tool { id: "at-roofline", gate: Gate::Always, run: at_roofline },
    Tool { id: "roofline", gate: Gate::Always, run: roofline },
];

fn fired(d: Diagnosis) -> ToolResult {
    Ok(Verdict::Fired(d))
}

fn quiet(why: impl Into<String>) -> ToolResult {
    Ok(Verdict::Quiet(why.into()))
}

fn pct(x: f64) -> String {
    format!("{:.0}%", 100.0 * x)
}

fn count(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.1}M", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.0}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}
