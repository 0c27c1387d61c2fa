//! Stage 1 restated as findings: at the roofline, and the roofline class itself.

use super::{fired, quiet};
use crate::diagnosis::{Diagnosis, Severity, ToolResult};
use crate::facts::Kernel;
use crate::roofline::{Bound, Roofline};
use crate::tool_id::ToolId;

pub(super) fn at_roofline(k: &Kernel, r: &Roofline) -> ToolResult {
    if r.class != Bound::AtRoofline {
        return quiet(format!("{}: not at a roofline", r.class.name()));
    }
    let dram = r.dram_pct.unwrap_or(0.0);
    let reach = match r.dram_pct_of_achievable {
        Some(a) => format!(", {a:.0}% of what this GPU was measured to reach"),
        None => format!(
            ", within reach of the {:.0}% streaming kernels reach on this architecture",
            crate::roofline::reachable_dram_pct(k.device.compute_capability)
        ),
    };
    let mut d = Diagnosis::new(ToolId::AtRoofline, 0.0);
    if let Some(a) = r.dram_pct_of_achievable {
        d = d.ev("dram_pct_of_achievable", a);
    }
    fired(
        d.ev("dram_pct", dram)
            .ev("dram_gbs", r.dram_gbs.unwrap_or(0.0))
            .ev("duration_us", r.duration_us.unwrap_or(0.0))
            .ev("floor_us", r.floor_us.unwrap_or(0.0))
            .analysis(format!(
                "DRAM runs at {dram:.0}% of its theoretical peak ({:.0} GB/s){reach}{}.",
                r.dram_gbs.unwrap_or(0.0),
                match (r.floor_us, r.duration_us) {
                    (Some(f), Some(d)) => format!("; {d:.1} us against a floor of {f:.1} us for the task's bytes"),
                    _ => String::new(),
                }
            ))
            .prescription(match r.dram_headroom.filter(|h| *h >= 0.03) {
                Some(h) => format!(
                    "About {:.0}% of the DRAM time is left below what this GPU reaches: the memory-side findings \
                    beside this one say how to take it. Beyond that only moving fewer bytes helps (fuse it with its \
                    producer or consumer, narrower data types, avoid re-reading).",
                    100.0 * h
                ),
                None => "Little is left in this kernel as written: only moving fewer bytes helps now (fuse it with \
                    its producer or consumer, narrower data types, avoid re-reading)."
                    .to_string(),
            })
            .cap(Severity::Info),
    )
}

pub(super) fn roofline(_: &Kernel, r: &Roofline) -> ToolResult {
    let advice = match r.class {
        Bound::AtRoofline => "Cut the bytes, not the instructions.",
        Bound::MemoryBound => {
            "Cut the bytes moved through the busiest memory unit, or move them more efficiently \
            (coalesced, wide, reused from shared memory)."
        }
        Bound::ComputeBound => {
            "Cut instructions on the busiest pipe, or move the work to a faster unit (tensor cores, \
            fast intrinsics)."
        }
        Bound::LatencyBound => {
            "Put more independent work in flight: more resident warps, more loads per thread before \
            first use, fewer barriers."
        }
        Bound::Unknown => "Profile with ncu for a bottleneck classification.",
    };
    fired(
        Diagnosis::new(ToolId::Roofline, 0.0)
            .ev("class", r.class.name())
            .ev("limiter", r.limiter.clone())
            .ev("dram_pct", r.dram_pct.unwrap_or(0.0))
            .ev("memory_pct", r.memory_pct.unwrap_or(0.0))
            .ev("compute_pct", r.compute_pct.unwrap_or(0.0))
            .ev("flop_per_dram_byte", r.arithmetic_intensity.unwrap_or(0.0))
            .analysis(format!("{}: {}.", r.class.name(), r.reason))
            .prescription(advice)
            .cap(Severity::Info),
    )
}
