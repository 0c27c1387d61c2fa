//! Stage 2: the micro-profiling tools. Each one is a trigger on the evidence, an analysis
//! that sizes the problem, a prescription an expert would give, and an estimated saving
//! (share of kernel time) that ranks it against the others. Tools never guess a missing
//! counter: they report it as missing evidence instead. One file per area:
//! `memory_access`, `shared`, `atomics`, `arithmetic`, `parallelism`, and `summary` (stage
//! 1 restated); this file holds the table that orders and gates them.

use crate::diagnosis::{Diagnosis, ToolResult, Verdict};
use crate::facts::{metric as m, Derived, Kernel, Needs};
use crate::roofline::Roofline;
use crate::tool_id::ToolId;

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
    /// Memory-side tools: memory- and latency-bound kernels, and kernels at the roofline
    /// (held to the DRAM headroom left).
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
    pub id: ToolId,
    pub gate: Gate,
    /// The ncu metrics the tool reads, on any path: a profile collects the union of these
    /// (and stage 1's), so a metric read but not declared would be missing at search speed.
    pub needs: Needs,
    pub run: fn(&Kernel, &Roofline) -> ToolResult,
}

/// Every tool, in tie-break order.
pub const ALL: &[Tool] = &[
    Tool {
        id: ToolId::RegisterTiling,
        gate: Gate::Shared,
        needs: Needs { metrics: &[m::L1_PCT, m::LSU_PCT, m::FMA_PIPE_PCT], derived: &[] },
        run: register_tiling,
    },
    Tool {
        id: ToolId::NoTensorCores,
        gate: Gate::Always,
        needs: Needs {
            metrics: &[m::TENSOR_PCT, m::DURATION, m::FMA_PIPE_PCT],
            derived: &[Derived::Flops, Derived::DramBytes],
        },
        run: no_tensor_cores,
    },
    Tool {
        id: ToolId::LocalMemory,
        gate: Gate::Always,
        needs: Needs {
            metrics: &[
                m::LOCAL_LD_INST,
                m::LOCAL_ST_INST,
                m::LOCAL_LD_SECTORS,
                m::LOCAL_ST_SECTORS,
                m::LD_SECTORS,
                m::ST_SECTORS,
            ],
            derived: &[Derived::Stalls],
        },
        run: local_memory,
    },
    Tool {
        id: ToolId::UncoalescedGlobal,
        gate: Gate::Always,
        needs: Needs {
            metrics: &[m::LD_SECTORS, m::LD_REQUESTS, m::ST_SECTORS, m::ST_REQUESTS],
            derived: &[Derived::Stalls, Derived::SectorEfficiency],
        },
        run: uncoalesced_global,
    },
    Tool {
        id: ToolId::DependentLoads,
        gate: Gate::Latency,
        needs: Needs { metrics: &[m::DRAM_PCT, m::ISSUE_ACTIVE], derived: &[Derived::Stalls] },
        run: dependent_loads,
    },
    Tool {
        id: ToolId::NarrowGlobalAccess,
        gate: Gate::Memory,
        needs: Needs { metrics: &[m::DRAM_PCT], derived: &[Derived::Stalls] },
        run: narrow_global_access,
    },
    Tool {
        id: ToolId::SharedBankConflicts,
        gate: Gate::Shared,
        needs: Needs {
            metrics: &[
                m::SHARED_LD_WAVEFRONTS,
                m::SHARED_ST_WAVEFRONTS,
                m::SHARED_LD_CONFLICTS,
                m::SHARED_ST_CONFLICTS,
            ],
            derived: &[Derived::Stalls],
        },
        run: shared_bank_conflicts,
    },
    Tool {
        id: ToolId::SharedMemoryBound,
        gate: Gate::Shared,
        needs: Needs {
            metrics: &[
                m::SHARED_LD_WAVEFRONTS,
                m::SHARED_ST_WAVEFRONTS,
                m::SHARED_ATOM_WAVEFRONTS,
                m::L1_PCT,
                m::LSU_PCT,
                m::LD_SECTORS,
                m::ST_SECTORS,
                m::SHARED_LD_CONFLICTS,
                m::SHARED_ST_CONFLICTS,
                m::FMA_PIPE_PCT,
            ],
            derived: &[Derived::Stalls],
        },
        run: shared_memory_bound,
    },
    Tool {
        id: ToolId::AtomicContention,
        gate: Gate::Always,
        needs: Needs {
            metrics: &[
                m::GLOBAL_RED,
                m::GLOBAL_ATOM,
                m::LD_REQUESTS,
                m::ST_REQUESTS,
                m::L2_RED_REQUESTS,
                m::L2_ATOM_REQUESTS,
                m::SHARED_ATOM_INST,
                m::SHARED_ATOM_WAVEFRONTS,
                m::INST_EXECUTED,
            ],
            derived: &[Derived::Stalls],
        },
        run: atomic_contention,
    },
    Tool {
        id: ToolId::Fp64InFp32,
        gate: Gate::Always,
        needs: Needs {
            metrics: &[m::DFMA_PER_CYCLE, m::DMUL_PER_CYCLE, m::DADD_PER_CYCLE, m::FP64_PIPE_PCT, m::XU_PCT],
            derived: &[Derived::IssueWeight],
        },
        run: fp64_in_fp32,
    },
    Tool {
        id: ToolId::UnderFilledGrid,
        gate: Gate::Always,
        needs: Needs { metrics: &[m::GRID, m::WAVES, m::BLOCK], derived: &[] },
        run: under_filled_grid,
    },
    Tool {
        id: ToolId::WarpDivergence,
        gate: Gate::Compute,
        needs: Needs {
            metrics: &[m::THREADS_PER_INST, m::DIVERGENT_TARGETS, m::ISSUE_ACTIVE, m::BLOCK],
            derived: &[Derived::IssueWeight, Derived::WorkingLanes],
        },
        run: warp_divergence,
    },
    Tool {
        id: ToolId::ScalarGlobalAccess,
        gate: Gate::Memory,
        needs: Needs { metrics: &[m::DRAM_PCT, m::LD_SECTORS, m::LD_REQUESTS], derived: &[Derived::Stalls] },
        run: scalar_global_access,
    },
    Tool {
        id: ToolId::RedundantDramTraffic,
        gate: Gate::Always,
        needs: Needs { metrics: &[], derived: &[Derived::DramBytes, Derived::Stalls] },
        run: redundant_dram_traffic,
    },
    Tool {
        id: ToolId::RedundantL2Traffic,
        gate: Gate::Memory,
        needs: Needs { metrics: &[m::L2_TEX_READ_SECTORS, m::DRAM_READ, m::L2_PCT, m::LOCAL_LD_INST], derived: &[] },
        run: redundant_l2_traffic,
    },
    Tool {
        id: ToolId::RegisterPressure,
        gate: Gate::Always,
        needs: Needs {
            metrics: &[m::REGS, m::LIMIT_REGS, m::LIMIT_SMEM, m::LIMIT_WARPS, m::LIMIT_BLOCKS, m::ACHIEVED_OCC],
            derived: &[],
        },
        run: register_pressure,
    },
    // Compute-bound kernels too: too few warps leave a busy pipe's issue slots idle.
    Tool {
        id: ToolId::LowOccupancy,
        gate: Gate::Compute,
        needs: Needs {
            metrics: &[
                m::ACHIEVED_OCC,
                m::WAVES,
                m::BLOCK,
                m::LIMIT_REGS,
                m::LIMIT_SMEM,
                m::LIMIT_WARPS,
                m::LIMIT_BLOCKS,
                m::ISSUE_ACTIVE,
            ],
            derived: &[],
        },
        run: low_occupancy,
    },
    Tool {
        id: ToolId::AccurateMath,
        gate: Gate::Compute,
        needs: Needs { metrics: &[m::SM_SOL, m::XU_PCT], derived: &[] },
        run: accurate_math,
    },
    Tool {
        id: ToolId::SpecialFunctionBound,
        gate: Gate::Compute,
        needs: Needs { metrics: &[m::XU_PCT], derived: &[] },
        run: special_function_bound,
    },
    Tool {
        id: ToolId::BarrierStalls,
        gate: Gate::Shared,
        needs: Needs { metrics: &[m::BARRIER_COUNT], derived: &[Derived::Stalls] },
        run: barrier_stalls,
    },
    Tool {
        id: ToolId::MemoryLatencyBound,
        gate: Gate::Latency,
        needs: Needs {
            metrics: &[
                m::DRAM_PCT,
                m::ISSUE_ACTIVE,
                m::GLOBAL_RED,
                m::GLOBAL_ATOM,
                m::LD_REQUESTS,
                m::ST_REQUESTS,
                m::ELIGIBLE,
                m::GRID,
            ],
            derived: &[Derived::Stalls],
        },
        run: memory_latency_bound,
    },
    Tool {
        id: ToolId::AsyncCopyOpportunity,
        gate: Gate::Memory,
        needs: Needs { metrics: &[], derived: &[Derived::Stalls] },
        run: async_copy_opportunity,
    },
    Tool {
        id: ToolId::IntegerOverhead,
        gate: Gate::Compute,
        needs: Needs { metrics: &[m::ISSUE_ACTIVE], derived: &[Derived::IssueWeight] },
        run: integer_overhead,
    },
    Tool {
        id: ToolId::ConversionOverhead,
        gate: Gate::Compute,
        needs: Needs { metrics: &[], derived: &[Derived::IssueWeight] },
        run: conversion_overhead,
    },
    Tool {
        id: ToolId::LaunchOverhead,
        gate: Gate::Always,
        needs: Needs { metrics: &[m::DURATION, m::WAVES], derived: &[] },
        run: launch_overhead,
    },
    // Both restate stage 1: they read the roofline, never the launch.
    Tool { id: ToolId::AtRoofline, gate: Gate::Always, needs: Needs::NONE, run: at_roofline },
    Tool { id: ToolId::Roofline, gate: Gate::Always, needs: Needs::NONE, run: roofline },
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
