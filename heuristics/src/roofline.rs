//! Stage 1: where the kernel sits against the hardware's ceilings. The class decides
//! which stage-2 tools are worth running.

use crate::facts::{metric, Derived, Kernel, Needs};
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

/// DRAM throughput (ncu's percentage of the datasheet peak) at which a kernel counts as
/// near its floor where nothing better is known; the tuner reads it against the share of
/// the physical floor a kernel reaches.
pub const AT_ROOFLINE_DRAM_PCT: f64 = 80.0;
/// Share of the DRAM ceiling (what this GPU reaches: measured, or the architecture's
/// figure) at which a kernel counts as at the roofline: what is left is the spread of
/// the measurement itself.
pub const AT_ROOFLINE_ACHIEVABLE_PCT: f64 = 90.0;

/// DRAM throughput, as ncu's percentage of the datasheet peak, that streaming kernels
/// reach on an architecture: 16-byte streams measured 88-91% on H100 (the corpus's
/// controls) and 92-94% on H100 and H200 under the bandwidth probe. Other and unknown
/// parts are taken at 90%. The ceiling where this GPU's bandwidth was not measured.
pub fn reachable_dram_pct(compute_capability: Option<(u32, u32)>) -> f64 {
    match compute_capability {
        Some((9, _)) => 92.0,
        _ => 90.0,
    }
}

/// Share of the moved bytes that must be useful for busy DRAM to count as the roofline:
/// a kernel that moves 8 bytes for every 1 it needs is busy, not done.
pub const USEFUL_BYTES_FRACTION: f64 = 0.8;
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
    /// The least time the task's bytes and flops need, when known: bytes at the DRAM
    /// peak, flops on the fastest arithmetic path the task's tolerance admits.
    pub floor_us: Option<f64>,
    /// DRAM throughput as a share of the bandwidth this GPU was measured to reach, when
    /// the caller measured it (`Hints::achievable_dram_gbs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_pct_of_achievable: Option<f64>,
    /// Requested over moved bytes of global accesses (ncu's bytes per sector / 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sector_efficiency: Option<f64>,
    /// The task's least bytes over the bytes DRAM moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub useful_dram_fraction: Option<f64>,
    /// The busiest SM pipe (`lsu`, `fma`, ...) and its utilization, whatever the class:
    /// stage 2 gates shared-memory tools on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_pipe: Option<(String, f64)>,
    /// The share of DRAM time that moving the same bytes at the GPU's ceiling would save
    /// (0 at or above it): the most any access-pattern fix can gain on DRAM, so the
    /// memory tools' estimates scale by it even above the at-roofline cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_headroom: Option<f64>,
    /// The share of each warp's 32 lanes doing work per instruction (active and not
    /// predicated off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_lanes: Option<f64>,
    /// The busiest pipe's utilization weighted by the working lanes: the useful compute,
    /// as useful bytes are for memory. 83% busy with half the lanes idle is about 42%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub useful_pipe_pct: Option<f64>,
    pub reason: String,
}

impl Roofline {
    /// Whether the L1/shared-memory unit or the LSU pipe that feeds it limits.
    pub fn shared_side_limits(&self) -> bool {
        self.limiter == "l1"
            || self.limiter == "lsu pipe"
            || self.busiest_pipe.as_ref().is_some_and(|(p, v)| p == "lsu" && *v >= BOUND_PCT)
    }
}

/// What [`classify`] reads; stage 2's gates read only its result.
pub const NEEDS: Needs = Needs {
    metrics: &[metric::DRAM_PCT, metric::MEM_SOL, metric::SM_SOL, metric::L1_PCT, metric::L2_PCT, metric::DURATION],
    derived: &[
        Derived::DramBytes,
        Derived::Flops,
        Derived::SectorEfficiency,
        Derived::BusiestPipe,
        Derived::WorkingLanes,
    ],
};

/// DRAM throughput as a share of the measured achievable bandwidth: from the bytes and
/// duration when ncu gave both, else from its percentage of the datasheet peak.
pub fn pct_of_achievable(
    dram_pct: Option<f64>,
    achieved_gbs: Option<f64>,
    peak_gbs: Option<f64>,
    achievable_gbs: Option<f64>,
) -> Option<f64> {
    let roof = achievable_gbs.filter(|g| g.is_finite() && *g > 0.0)?;
    let achieved = achieved_gbs.or_else(|| Some(dram_pct? / 100.0 * peak_gbs?))?;
    Some(100.0 * achieved / roof)
}

/// The datasheet-peak percentage at which DRAM counts as at the roof on an architecture
/// that reaches `reachable_pct`.
fn architecture_cut(reachable_pct: f64) -> f64 {
    AT_ROOFLINE_ACHIEVABLE_PCT / 100.0 * reachable_pct
}

/// Whether DRAM runs at the roof: against the measured roof when there is one, else
/// against what the architecture reaches (`reachable_pct`, ncu's scale).
pub fn dram_at_roof(dram_pct: f64, pct_of_achievable: Option<f64>, reachable_pct: f64) -> bool {
    match pct_of_achievable {
        Some(a) => a >= AT_ROOFLINE_ACHIEVABLE_PCT,
        None => dram_pct >= architecture_cut(reachable_pct),
    }
}

/// The share of DRAM time left above the kernel's throughput. Both the measured roof and
/// the architecture's figure are bandwidths this GPU reaches, so the higher of the two
/// bounds the headroom: a triad timed end to end reads a few percent under what ncu sees
/// a 16-byte stream reach (H100: 2893 GB/s by the probe, 91% of the 3352 GB/s peak under
/// ncu). The at-roofline class still follows the measurement ([`dram_at_roof`]); only
/// how much the memory tools may promise reads the higher roof.
pub fn dram_headroom(dram_pct: Option<f64>, pct_of_achievable: Option<f64>, reachable_pct: f64) -> Option<f64> {
    let by_architecture = dram_pct.map(|d| 1.0 - d / reachable_pct);
    let measured = pct_of_achievable.map(|a| 1.0 - a / 100.0);
    let left = match (by_architecture, measured) {
        (Some(a), Some(m)) => a.max(m),
        (a, m) => a.or(m)?,
    };
    Some(left.clamp(0.0, 1.0))
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
    let floor_us = k
        .device
        .floor_seconds(k.hints.min_bytes, k.hints.min_flops, &k.hints.accuracy.clone().unwrap_or_default())
        .map(|t| t * 1e6);
    let sector_efficiency = k.sector_efficiency();
    let useful_dram = k.useful_dram_fraction();
    let busiest = k.busiest_pipe();
    let of_achievable =
        pct_of_achievable(dram, dram_gbs, k.device.peak_dram_bytes_per_s.map(|b| b / 1e9), k.hints.achievable_dram_gbs);
    let reachable = reachable_dram_pct(k.device.compute_capability);
    let headroom = dram_headroom(dram, of_achievable, reachable);
    let lanes = k.working_lanes();
    let useful_pipe = busiest.zip(lanes).map(|((_, busy), l)| busy * l);
    let (waste, unknown_use) = wasted_bytes(sector_efficiency, useful_dram);
    let levels = Levels { dram, mem, sm, l1, l2, of_achievable, reachable };
    let (class, limiter, mut reason) = bound(&levels, k.hints.achievable_dram_gbs, busiest, waste, unknown_use);
    if let (Bound::ComputeBound, Some(((pipe, busy), l))) = (class, busiest.zip(lanes)) {
        if l < IDLE_LANES_WORTH_SAYING {
            reason.push_str(&format!(
                ", but only {:.0}% of each warp's lanes do work: the {pipe} pipe is {busy:.0}% busy and about {:.0}% useful",
                100.0 * l,
                busy * l
            ));
        }
    }
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
        dram_pct_of_achievable: of_achievable.map(r1),
        sector_efficiency: sector_efficiency.map(|x| (x * 1000.0).round() / 1000.0),
        useful_dram_fraction: useful_dram.map(|x| (x * 1000.0).round() / 1000.0),
        busiest_pipe: busiest.map(|(n, v)| (n.to_string(), r1(v))),
        dram_headroom: headroom.map(|x| (x * 1000.0).round() / 1000.0),
        working_lanes: lanes.map(|x| (x * 1000.0).round() / 1000.0),
        useful_pipe_pct: useful_pipe.map(r1),
        reason,
    }
}

/// The speed-of-light percentages a class is read from.
struct Levels {
    dram: Option<f64>,
    mem: Option<f64>,
    sm: Option<f64>,
    l1: Option<f64>,
    l2: Option<f64>,
    /// DRAM throughput as a share of what this GPU was measured to reach.
    of_achievable: Option<f64>,
    /// What the architecture reaches, in ncu's percentage of the datasheet peak.
    reachable: f64,
}

/// Working lanes below which a compute-bound kernel's reason says how much of its busy
/// pipe is useful.
const IDLE_LANES_WORTH_SAYING: f64 = 0.8;

/// The bytes DRAM moves count only as far as they are used: waste keeps a busy DRAM off
/// the roofline, and the waste tools then say where it comes from. Returns the worst
/// waste below the useful fraction, and a note where nothing says how much is useful.
fn wasted_bytes(sector_efficiency: Option<f64>, useful_dram: Option<f64>) -> (Option<String>, &'static str) {
    let waste = [
        sector_efficiency
            .map(|e| (e, format!("only {:.0}% of the bytes in each moved sector are requested", 100.0 * e))),
        useful_dram.map(|u| (u, format!("the task needs only {:.0}% of the bytes DRAM moves", 100.0 * u))),
    ]
    .into_iter()
    .flatten()
    .filter(|(f, _)| *f < USEFUL_BYTES_FRACTION)
    .min_by(|a, b| a.0.total_cmp(&b.0))
    .map(|(_, why)| why);
    let unknown_use = if sector_efficiency.is_none() && useful_dram.is_none() {
        " (how many of those bytes are useful is unknown: no bytes-per-sector counters and no task roofline)"
    } else {
        ""
    };
    (waste, unknown_use)
}

/// The class, its limiter and the reason, from the throughputs.
fn bound(
    levels: &Levels,
    achievable_dram_gbs: Option<f64>,
    busiest: Option<(&str, f64)>,
    waste: Option<String>,
    unknown_use: &str,
) -> (Bound, String, String) {
    let Levels { dram, mem, sm, l1, l2, of_achievable, reachable } = *levels;
    let memory_limiter = || {
        let units = [("dram", dram), ("l2", l2), ("l1", l1)];
        units
            .iter()
            .filter_map(|(n, v)| v.map(|v| (*n, v)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(n, _)| n.to_string())
            .unwrap_or_else(|| "memory".into())
    };
    let busiest_pipe = || busiest.map(|(n, _)| format!("{n} pipe")).unwrap_or_else(|| "sm".into());
    match (dram, mem, sm) {
        (None, None, None) => {
            (Bound::Unknown, String::new(), "no speed-of-light counters: SASS and ptxas facts only".to_string())
        }
        _ => {
            let (d, m, s) = (dram.unwrap_or(0.0), mem.unwrap_or(0.0), sm.unwrap_or(0.0));
            let at_roof = dram_at_roof(d, of_achievable, reachable);
            let measured = match (of_achievable, achievable_dram_gbs) {
                (Some(a), Some(g)) => format!(", {a:.1}% of the {g:.0} GB/s this GPU was measured to reach"),
                _ => String::new(),
            };
            if at_roof && waste.is_none() {
                let ceiling = match of_achievable {
                    Some(_) => format!(">= {AT_ROOFLINE_ACHIEVABLE_PCT}% of the measured roof"),
                    None => format!(
                        ">= {AT_ROOFLINE_ACHIEVABLE_PCT}% of the {reachable:.0}% streaming kernels reach on this architecture"
                    ),
                };
                (
                    Bound::AtRoofline,
                    "dram".to_string(),
                    format!("DRAM throughput {d:.1}% of peak{measured} is at the practical ceiling ({ceiling}){unknown_use}"),
                )
            } else if let Some(why) = waste.filter(|_| at_roof) {
                (
                    Bound::MemoryBound,
                    "dram".to_string(),
                    format!("DRAM throughput {d:.1}% of peak{measured}, but {why}: busy, not at the roofline"),
                )
            } else if m >= BOUND_PCT && m >= s && !measured.is_empty() && d >= architecture_cut(reachable) {
                // Busy by the datasheet's measure, yet short of what this GPU reaches:
                // say so, so nobody reads the class as "nothing left".
                (
                    Bound::MemoryBound,
                    "dram".to_string(),
                    format!(
                        "DRAM throughput {d:.1}% of peak{measured}: below the measured roof (< {AT_ROOFLINE_ACHIEVABLE_PCT}%), not at the roofline"
                    ),
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
            } else if let Some((pipe, busy)) = busiest.filter(|(p, v)| *p != "lsu" && *v >= BOUND_PCT && m < BOUND_PCT)
            {
                // ncu's SM throughput averages over the whole elapsed time, so SMs idle in
                // a tail or an under-filled grid pull it down; the pipe's share of the
                // cycles its SMs were active says what limits the work that runs.
                (
                    Bound::ComputeBound,
                    format!("{pipe} pipe"),
                    format!(
                        "the {pipe} pipe is {busy:.1}% busy while its SMs are active (>= {BOUND_PCT}%), though SM \
                        throughput over the whole run is {s:.1}%: idle SMs, not idle pipes, pull the average down"
                    ),
                )
            } else {
                (
                    Bound::LatencyBound,
                    "latency".to_string(),
                    format!("memory {m:.1}% and compute {s:.1}% are both under {BOUND_PCT}% of peak: too little work in flight to hide latency"),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100_PEAK_GBS: f64 = 3352.3;
    const HOPPER: f64 = 92.0;

    /// The achievable roof at which `datasheet_pct` of the peak is `achievable_pct` of it.
    fn roof(datasheet_pct: f64, achievable_pct: f64) -> f64 {
        H100_PEAK_GBS * datasheet_pct / achievable_pct
    }

    fn of_achievable(datasheet_pct: f64, achievable_gbs: f64) -> Option<f64> {
        pct_of_achievable(Some(datasheet_pct), None, Some(H100_PEAK_GBS), Some(achievable_gbs))
    }

    #[test]
    fn near_the_measured_roof_is_at_the_roofline() {
        let a = of_achievable(85.0, roof(85.0, 95.0)).unwrap();
        assert!((a - 95.0).abs() < 1e-9, "{a}");
        assert!(dram_at_roof(85.0, Some(a), HOPPER));
    }

    #[test]
    fn well_below_the_measured_roof_is_not() {
        let a = of_achievable(70.0, roof(70.0, 78.0)).unwrap();
        assert!((a - 78.0).abs() < 1e-9, "{a}");
        assert!(!dram_at_roof(70.0, Some(a), HOPPER));
        // Where the architecture's figure and the measured roof disagree, the measurement
        // wins both ways: 84% of a peak this GPU reaches 95% of is not there yet...
        assert!(dram_at_roof(84.0, None, HOPPER));
        assert!(!dram_at_roof(84.0, of_achievable(84.0, 0.95 * H100_PEAK_GBS), HOPPER));
        // ...and 75% of a peak it reaches only 78% of is as far as it goes.
        assert!(!dram_at_roof(75.0, None, HOPPER));
        assert!(dram_at_roof(75.0, of_achievable(75.0, 0.78 * H100_PEAK_GBS), HOPPER));
    }

    #[test]
    fn the_ceiling_is_what_the_architecture_reaches_not_eighty_percent() {
        assert_eq!(reachable_dram_pct(Some((9, 0))), 92.0);
        assert_eq!(reachable_dram_pct(None), 90.0);
        // A 4-byte stream at 81% of an H200's datasheet peak is short of the 92% a
        // 16-byte one reaches: not at the roofline, and 12% of its DRAM time is headroom.
        assert!(!dram_at_roof(81.0, None, HOPPER));
        assert!(dram_at_roof(83.0, None, HOPPER));
        let left = dram_headroom(Some(81.0), None, HOPPER).unwrap();
        assert!((left - (1.0 - 81.0 / 92.0)).abs() < 1e-9, "{left}");
        // Above the cut the headroom shrinks but stays: the memory tools scale by it.
        assert!(dram_headroom(Some(88.0), None, HOPPER).unwrap() > 0.04);
        assert_eq!(dram_headroom(Some(95.0), None, HOPPER), Some(0.0));
        // A triad that reads under what ncu sees a stream reach does not hide headroom
        // (97% of a pessimistic roof, 9% under the architecture's figure)...
        let both = dram_headroom(Some(84.0), Some(97.0), HOPPER).unwrap();
        assert!((both - (1.0 - 84.0 / 92.0)).abs() < 1e-9, "{both}");
        // ...and a measured roof above it leaves more.
        assert!((dram_headroom(Some(84.0), Some(80.0), HOPPER).unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(dram_headroom(None, None, HOPPER), None);
    }

    #[test]
    fn measured_bytes_win_over_the_percentage_and_no_roof_means_the_architecture_cut() {
        // ncu's bytes over duration are what the triad's bytes over time compare with.
        assert_eq!(pct_of_achievable(Some(50.0), Some(2700.0), Some(H100_PEAK_GBS), Some(3000.0)), Some(90.0));
        assert_eq!(pct_of_achievable(Some(50.0), Some(2700.0), Some(H100_PEAK_GBS), None), None);
        assert_eq!(pct_of_achievable(Some(50.0), None, None, Some(3000.0)), None);
        for bogus in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(pct_of_achievable(Some(50.0), Some(2700.0), None, Some(bogus)), None);
        }
        let cut = architecture_cut(HOPPER);
        assert!(dram_at_roof(cut, None, HOPPER));
        assert!(!dram_at_roof(cut - 0.1, None, HOPPER));
    }
}
