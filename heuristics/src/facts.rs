//! Everything a tool may know about one kernel, behind accessors that name the counter
//! they read: a missing counter becomes [`Missing`] evidence, never a panic or a guess.

use crate::ncu::Launch;
use sass::ptxas::KernelResources;
use sass::{Class, FunctionReport};
use serde::{Deserialize, Serialize};

pub mod metric {
    pub const DURATION: &str = "gpu__time_duration.sum";
    pub const SM_HZ: &str = "sm__cycles_elapsed.avg.per_second";
    pub const CYCLES: &str = "sm__cycles_elapsed.avg";
    pub const DRAM_PCT: &str = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed";
    pub const MEM_SOL: &str = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";
    pub const SM_SOL: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
    pub const L1_PCT: &str = "l1tex__throughput.avg.pct_of_peak_sustained_elapsed";
    pub const L2_PCT: &str = "lts__throughput.avg.pct_of_peak_sustained_elapsed";
    pub const DRAM_READ: &str = "dram__bytes_read.sum";
    pub const DRAM_WRITE: &str = "dram__bytes_write.sum";
    pub const ISSUE_ACTIVE: &str = "smsp__issue_active.avg.pct_of_peak_sustained_active";
    pub const ELIGIBLE: &str = "smsp__warps_eligible.avg.per_cycle_active";
    pub const LD_SECTORS: &str = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum";
    pub const LD_REQUESTS: &str = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum";
    pub const ST_SECTORS: &str = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum";
    pub const ST_REQUESTS: &str = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum";
    pub const SHARED_WAVEFRONTS: &str = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum";
    pub const SHARED_LD_CONFLICTS: &str = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum";
    pub const SHARED_ST_CONFLICTS: &str = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum";
    pub const ACHIEVED_OCC: &str = "sm__warps_active.avg.pct_of_peak_sustained_active";
    pub const LIMIT_REGS: &str = "launch__occupancy_limit_registers";
    pub const LIMIT_SMEM: &str = "launch__occupancy_limit_shared_mem";
    pub const LIMIT_WARPS: &str = "launch__occupancy_limit_warps";
    pub const LIMIT_BLOCKS: &str = "launch__occupancy_limit_blocks";
    pub const REGS: &str = "launch__registers_per_thread";
    pub const BLOCK: &str = "launch__block_size";
    pub const GRID: &str = "launch__grid_size";
    pub const WAVES: &str = "launch__waves_per_multiprocessor";
    pub const THREADS_PER_INST: &str = "smsp__thread_inst_executed_per_inst_executed.ratio";
    /// Lanes that execute an instruction and are not predicated off, per warp instruction.
    pub const THREADS_PRED_ON_PER_INST: &str = "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio";
    pub const DIVERGENT_TARGETS: &str = "smsp__sass_branch_targets_threads_divergent.sum";
    pub const FFMA_PER_CYCLE: &str = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed";
    pub const FADD_PER_CYCLE: &str = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed";
    pub const FMUL_PER_CYCLE: &str = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed";
    pub const DFMA_PER_CYCLE: &str = "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed";
    pub const DMUL_PER_CYCLE: &str = "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed";
    pub const DADD_PER_CYCLE: &str = "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed";
    pub const TENSOR_PCT: &str = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active";
    pub const FMA_PIPE_PCT: &str = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active";
    pub const FP64_PIPE_PCT: &str = "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active";
    pub const XU_PCT: &str = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active";
    pub const LSU_PCT: &str = "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active";
    pub const ALU_PCT: &str = "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active";
    pub const LD_BYTES_PER_SECTOR: &str = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio";
    pub const ST_BYTES_PER_SECTOR: &str = "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio";
    pub const INST_EXECUTED: &str = "smsp__inst_executed.sum";
    pub const SHARED_ATOM_INST: &str = "smsp__inst_executed_op_shared_atom.sum";
    pub const SHARED_ATOM_WAVEFRONTS: &str = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum";
    pub const SHARED_LD_WAVEFRONTS: &str = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum";
    pub const SHARED_ST_WAVEFRONTS: &str = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum";
    pub const GLOBAL_RED: &str = "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum";
    pub const GLOBAL_ATOM: &str = "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum";
    pub const LOCAL_LD_INST: &str = "smsp__sass_inst_executed_op_local_ld.sum";
    pub const LOCAL_ST_INST: &str = "smsp__sass_inst_executed_op_local_st.sum";
    pub const LOCAL_LD_SECTORS: &str = "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum";
    pub const LOCAL_ST_SECTORS: &str = "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum";
    pub const SMS: &str = "device__attribute_multiprocessor_count";
    pub const MAX_WARPS_PER_SM: &str = "device__attribute_max_warps_per_multiprocessor";
    pub const MEM_CLOCK_KHZ: &str = "device__attribute_memory_clock_rate";
    pub const BUS_BITS: &str = "device__attribute_global_memory_bus_width";
    pub const SM_CLOCK_KHZ: &str = "device__attribute_clock_rate";
    pub const L2_BYTES: &str = "device__attribute_l2_cache_size";
    pub const CC_MAJOR: &str = "device__attribute_compute_capability_major";
    pub const CC_MINOR: &str = "device__attribute_compute_capability_minor";

    pub const L2_TEX_READ_SECTORS: &str = "lts__t_sectors_srcunit_tex_op_read.sum";
    pub const L2_RED_REQUESTS: &str = "lts__t_requests_srcunit_tex_op_red.sum";
    pub const L2_ATOM_REQUESTS: &str = "lts__t_requests_srcunit_tex_op_atom.sum";
    pub const BARRIER_COUNT: &str = "launch__barrier_count";

    /// One list of reasons makes both tables, so the two cannot drift apart.
    macro_rules! stall_reasons {
        ($($reason:literal),* $(,)?) => {
            /// Warp stall reasons, as `smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio`.
            pub const STALLS: &[&str] = &[$($reason),*];
            /// The metric of each reason in [`STALLS`], in the same order.
            pub const STALL_METRICS: &[&str] =
                &[$(concat!("smsp__average_warps_issue_stalled_", $reason, "_per_issue_active.ratio")),*];
        };
    }

    stall_reasons![
        "barrier",
        "branch_resolving",
        "dispatch_stall",
        "drain",
        "imc_miss",
        "lg_throttle",
        "long_scoreboard",
        "math_pipe_throttle",
        "membar",
        "mio_throttle",
        "misc",
        "no_instruction",
        "short_scoreboard",
        "sleeping",
        "tex_throttle",
        "wait",
        "gmma",
    ];

    pub fn stall(reason: &str) -> String {
        format!("smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio")
    }
}

/// The quantities [`Kernel`] derives from several counters. A tool that uses one reads
/// every counter behind it, so it declares the quantity instead of repeating the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Derived {
    /// [`Kernel::stalls`] and what is built on it: [`Kernel::stall_share`],
    /// [`Kernel::memory_weight`], [`Kernel::shared_weight`].
    Stalls,
    /// [`Kernel::issue_weight`].
    IssueWeight,
    /// [`Kernel::achieved_flops`].
    Flops,
    /// [`Kernel::sector_efficiency`].
    SectorEfficiency,
    /// [`Kernel::dram_bytes`] and [`Kernel::useful_dram_fraction`].
    DramBytes,
    /// [`Kernel::busiest_pipe`].
    BusiestPipe,
    /// [`Kernel::working_lanes`].
    WorkingLanes,
}

impl Derived {
    pub fn metrics(self) -> &'static [&'static str] {
        use metric::*;
        match self {
            Derived::Stalls => STALL_METRICS,
            Derived::IssueWeight => &[ISSUE_ACTIVE],
            Derived::Flops => {
                &[SM_HZ, FFMA_PER_CYCLE, FADD_PER_CYCLE, FMUL_PER_CYCLE, DFMA_PER_CYCLE, DMUL_PER_CYCLE, DADD_PER_CYCLE]
            }
            Derived::SectorEfficiency => &[LD_SECTORS, ST_SECTORS, LD_BYTES_PER_SECTOR, ST_BYTES_PER_SECTOR],
            Derived::DramBytes => &[DRAM_READ, DRAM_WRITE],
            Derived::BusiestPipe => &[FMA_PIPE_PCT, ALU_PCT, TENSOR_PCT, FP64_PIPE_PCT, XU_PCT, LSU_PCT],
            Derived::WorkingLanes => &[THREADS_PER_INST, THREADS_PRED_ON_PER_INST],
        }
    }
}

/// The ncu metrics one part of the analysis reads: the counters it names, and the derived
/// quantities it uses. [`crate::required_metrics`] is the union over every part, which is
/// what a profile collects; tests check each part's reads against its declaration.
#[derive(Debug, Clone, Copy)]
pub struct Needs {
    pub metrics: &'static [&'static str],
    pub derived: &'static [Derived],
}

impl Needs {
    pub const NONE: Needs = Needs { metrics: &[], derived: &[] };

    /// Every metric name, those behind the derived quantities included (may repeat).
    pub fn all(self) -> impl Iterator<Item = &'static str> {
        self.metrics.iter().chain(self.derived.iter().flat_map(|d| d.metrics())).copied()
    }
}

/// Counters a tool needed and did not find.
#[derive(Debug, Clone, PartialEq)]
pub struct Missing(pub Vec<String>);

/// Facts about the GPU the kernel ran on, from ncu's `device__attribute_*` columns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceFacts {
    pub sms: Option<f64>,
    pub sm_clock_hz: Option<f64>,
    pub peak_dram_bytes_per_s: Option<f64>,
    pub l2_bytes: Option<f64>,
    pub max_warps_per_sm: Option<f64>,
    pub compute_capability: Option<(u32, u32)>,
}

impl DeviceFacts {
    /// What [`DeviceFacts::from_launch`] reads: every kernel's facts start here.
    pub const NEEDS: Needs = Needs {
        metrics: &[
            metric::MEM_CLOCK_KHZ,
            metric::BUS_BITS,
            metric::SMS,
            metric::SM_CLOCK_KHZ,
            metric::L2_BYTES,
            metric::MAX_WARPS_PER_SM,
            metric::CC_MAJOR,
            metric::CC_MINOR,
        ],
        derived: &[],
    };

    pub fn from_launch(l: &Launch) -> DeviceFacts {
        use metric::*;
        let peak = match (l.get(MEM_CLOCK_KHZ), l.get(BUS_BITS)) {
            (Some(khz), Some(bits)) => Some(2.0 * khz * 1e3 * bits / 8.0),
            _ => None,
        };
        DeviceFacts {
            sms: l.get(SMS),
            sm_clock_hz: l.get(SM_CLOCK_KHZ).map(|k| k * 1e3),
            peak_dram_bytes_per_s: peak,
            l2_bytes: l.get(L2_BYTES),
            max_warps_per_sm: l.get(MAX_WARPS_PER_SM),
            compute_capability: match (l.get(CC_MAJOR), l.get(CC_MINOR)) {
                (Some(a), Some(b)) => Some((a as u32, b as u32)),
                _ => None,
            },
        }
    }

    /// The least time any correct kernel needs, in seconds: `bytes` at the DRAM peak, or
    /// `flops` on the fastest arithmetic path the task's tolerance admits, whichever is
    /// longer. A part whose numbers are missing is left out; None when neither is known.
    pub fn floor_seconds(
        &self,
        bytes: Option<f64>,
        flops: Option<f64>,
        accuracy: &crate::precision::Accuracy,
    ) -> Option<f64> {
        let by_bytes = match (bytes, self.peak_dram_bytes_per_s) {
            (Some(b), Some(p)) if p > 0.0 => Some(b / p),
            _ => None,
        };
        let by_flops = match (flops, self.sms, self.sm_clock_hz) {
            (Some(f), Some(n), Some(hz)) if f > 0.0 && n * hz > 0.0 => {
                let cc = self.compute_capability.map(|c| c.0).unwrap_or(9);
                let (_, per_clock) = crate::precision::fastest_admissible(accuracy, cc);
                Some(f / (n * hz * per_clock))
            }
            _ => None,
        };
        by_bytes.into_iter().chain(by_flops).reduce(f64::max).filter(|t| *t > 0.0 && t.is_finite())
    }
}

/// What the task knows that the counters cannot: the least work a correct kernel does,
/// and how accurate it must be.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hints {
    /// Bytes any correct kernel must move through DRAM (the task's roofline).
    pub min_bytes: Option<f64>,
    /// Flops any correct kernel must do (the task's roofline).
    #[serde(default)]
    pub min_flops: Option<f64>,
    /// The task's tolerance and data types, which decide the arithmetic paths allowed.
    #[serde(default)]
    pub accuracy: Option<crate::precision::Accuracy>,
    /// The DRAM bandwidth this GPU was measured to reach (GB/s, a stream triad), beside
    /// the datasheet peak ncu's percentages are of: the at-roofline judgement reads it
    /// when given, since no kernel reaches the datasheet figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achievable_dram_gbs: Option<f64>,
}

/// One kernel's evidence: its ncu row, its SASS analysis and its ptxas resources.
pub struct Kernel<'a> {
    pub name: String,
    pub launch: Option<&'a Launch>,
    pub sass: Option<&'a FunctionReport>,
    pub ptxas: Option<&'a KernelResources>,
    pub device: DeviceFacts,
    pub hints: Hints,
    /// How many times the profiled call launched this kernel (1 when unknown): many
    /// short launches of one kernel pay the launch cost many times.
    pub launches_in_call: u32,
}

impl<'a> Kernel<'a> {
    pub fn new(
        name: &str,
        launch: Option<&'a Launch>,
        sass: Option<&'a FunctionReport>,
        ptxas: Option<&'a KernelResources>,
        hints: Hints,
    ) -> Kernel<'a> {
        Kernel {
            name: name.to_string(),
            device: launch.map(DeviceFacts::from_launch).unwrap_or_default(),
            launch,
            sass,
            ptxas,
            hints,
            launches_in_call: 1,
        }
    }

    /// A counter, or Missing naming it.
    pub fn m(&self, name: &str) -> Result<f64, Missing> {
        self.launch.and_then(|l| l.get(name)).ok_or_else(|| Missing(vec![name.to_string()]))
    }

    /// A counter that defaults to zero when the column exists but the cell is empty (ncu
    /// leaves counts of events that never happened blank on some versions).
    pub fn m0(&self, name: &str) -> Result<f64, Missing> {
        match self.launch {
            Some(l) if l.has(name) => Ok(l.get(name).unwrap_or(0.0)),
            _ => Err(Missing(vec![name.to_string()])),
        }
    }

    pub fn opt(&self, name: &str) -> Option<f64> {
        self.launch.and_then(|l| l.get(name))
    }

    pub fn sass(&self) -> Result<&'a FunctionReport, Missing> {
        self.sass.ok_or_else(|| Missing(vec!["SASS of the kernel (--sass)".into()]))
    }

    pub fn count(&self, class: Class) -> Option<u64> {
        self.sass.map(|s| s.count(class))
    }

    /// Stall cycles per issued instruction by reason, and their sum.
    pub fn stalls(&self) -> Option<(Vec<(&'static str, f64)>, f64)> {
        let l = self.launch?;
        let v: Vec<(&'static str, f64)> = metric::STALLS
            .iter()
            .zip(metric::STALL_METRICS)
            .filter_map(|(reason, name)| l.get(name).map(|x| (*reason, x)))
            .collect();
        if v.is_empty() {
            return None;
        }
        let total: f64 = v.iter().map(|(_, x)| x).sum();
        Some((v, total))
    }

    /// The share of stall cycles due to `reasons`.
    pub fn stall_share(&self, reasons: &[&str]) -> Option<f64> {
        let (v, total) = self.stalls()?;
        if total <= 0.0 {
            return Some(0.0);
        }
        Some(v.iter().filter(|(r, _)| reasons.contains(r)).map(|(_, x)| x).sum::<f64>() / total)
    }

    /// How much of the stall time waits on global or local memory: the weight a memory
    /// fix carries. Kept at least 0.3: profiles without stall data still rank memory fixes.
    pub fn memory_weight(&self) -> f64 {
        self.stall_share(&["long_scoreboard", "lg_throttle", "drain", "tex_throttle"]).unwrap_or(0.6).max(0.3)
    }

    /// How much of the stall time waits on shared memory or the MIO queue.
    pub fn shared_weight(&self) -> f64 {
        self.stall_share(&["mio_throttle", "short_scoreboard", "barrier"]).unwrap_or(0.5).max(0.3)
    }

    /// How busy the issue slots are: the weight an instruction-count fix carries.
    pub fn issue_weight(&self) -> f64 {
        self.opt(metric::ISSUE_ACTIVE).map(|p| p / 100.0).unwrap_or(0.5).clamp(0.1, 1.0)
    }

    /// Achieved FP32+FP64 FLOP/s, from the per-cycle thread instruction counters.
    pub fn achieved_flops(&self) -> Option<f64> {
        use metric::*;
        let hz = self.opt(SM_HZ).or(self.device.sm_clock_hz)?;
        let f = |n| self.opt(n).unwrap_or(0.0);
        let per_cycle = 2.0 * f(FFMA_PER_CYCLE)
            + f(FADD_PER_CYCLE)
            + f(FMUL_PER_CYCLE)
            + 2.0 * f(DFMA_PER_CYCLE)
            + f(DMUL_PER_CYCLE)
            + f(DADD_PER_CYCLE);
        self.launch?.has(FFMA_PER_CYCLE).then_some(per_cycle * hz)
    }

    /// Requested bytes over moved bytes for global loads and stores (1 when every byte
    /// of every 32-byte sector is used), from ncu's bytes-per-sector ratios.
    pub fn sector_efficiency(&self) -> Option<f64> {
        use metric::*;
        let (ld_s, st_s) = (self.opt(LD_SECTORS).unwrap_or(0.0), self.opt(ST_SECTORS).unwrap_or(0.0));
        if ld_s + st_s <= 0.0 {
            return None;
        }
        let ld = if ld_s > 0.0 { self.opt(LD_BYTES_PER_SECTOR)? } else { 0.0 };
        let st = if st_s > 0.0 { self.opt(ST_BYTES_PER_SECTOR)? } else { 0.0 };
        Some(((ld * ld_s + st * st_s) / (32.0 * (ld_s + st_s))).clamp(0.0, 1.0))
    }

    /// The task's least bytes over the bytes DRAM moved, when both are known.
    pub fn useful_dram_fraction(&self) -> Option<f64> {
        let min = self.hints.min_bytes.filter(|b| *b > 0.0)?;
        let moved = self.dram_bytes().filter(|b| *b > 0.0)?;
        Some((min / moved).min(1.0))
    }

    /// The busiest SM pipe and its utilization in percent.
    pub fn busiest_pipe(&self) -> Option<(&'static str, f64)> {
        use metric::*;
        [
            ("fma", FMA_PIPE_PCT),
            ("alu", ALU_PCT),
            ("tensor", TENSOR_PCT),
            ("fp64", FP64_PIPE_PCT),
            ("xu", XU_PCT),
            ("lsu", LSU_PCT),
        ]
        .iter()
        .filter_map(|(n, m)| self.opt(m).map(|v| (*n, v)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The share of a warp's 32 lanes that do work per issued instruction: active and
    /// not predicated off when ncu gave that ratio, else active. A pipe busy with warps
    /// half of whose lanes idle does half the useful work its utilization suggests.
    pub fn working_lanes(&self) -> Option<f64> {
        use metric::*;
        let lanes = self.opt(THREADS_PRED_ON_PER_INST).or_else(|| self.opt(THREADS_PER_INST))?;
        (lanes > 0.0).then(|| (lanes / 32.0).min(1.0))
    }

    pub fn dram_bytes(&self) -> Option<f64> {
        Some(self.opt(metric::DRAM_READ)? + self.opt(metric::DRAM_WRITE)?)
    }

    /// Most frequent source lines among SASS sites of `classes`, if line info exists.
    pub fn lines_of(&self, classes: &[Class]) -> Vec<String> {
        let keys: Vec<&str> = classes.iter().map(|c| c.name()).collect();
        self.lines_of_sites(&keys)
    }

    /// Most frequent source lines among the SASS sites kept under `keys` (class names,
    /// or `branch` for conditional branches).
    pub fn lines_of_sites(&self, keys: &[&str]) -> Vec<String> {
        let Some(s) = self.sass else { return Vec::new() };
        sass::analysis::lines_by_frequency(keys.iter().filter_map(|k| s.sites.get(*k)).flatten())
    }
}
