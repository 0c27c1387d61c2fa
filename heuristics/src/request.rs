//! What to ask Nsight Compute for. Each part of the analysis that reads a launch declares
//! the metrics it reads next to itself (stage 1 here, each tool in [`crate::tools::ALL`]);
//! the profile collects their union with `--metrics` instead of `--set full`, and the
//! tests hold every part to its declaration on real profiles.
//!
//! No part reads a `derived__` metric: ncu defines those inside section files, and the
//! only ones the tools used (excess sectors and shared wavefronts, conflict ways) come
//! with SourceCounters, whose instrumented passes took 7 of gemm_f32's 10 s of profile on
//! an H100. The hardware counters answer the same questions (see the coalescing and
//! bank-conflict tools), so no section is collected.

use crate::facts::{DeviceFacts, Needs};
use std::collections::BTreeSet;

/// Every part of the analysis that reads a launch, by name, with what it reads: the
/// device facts and the roofline (stage 1), each stage-2 tool, and the raw counters a
/// generator may be shown instead of diagnoses (`--guidance raw`).
pub fn parts() -> impl Iterator<Item = (&'static str, Needs)> {
    [
        ("device facts", DeviceFacts::NEEDS),
        ("roofline", crate::roofline::NEEDS),
        ("raw counters", crate::render::RAW_COUNTERS),
    ]
    .into_iter()
    .chain(crate::tools::ALL.iter().map(|t| (t.id.as_str(), t.needs)))
}

/// Every metric the analysis reads, sorted, each once: what `ncu --metrics` collects.
pub fn required_metrics() -> Vec<&'static str> {
    let all: BTreeSet<&'static str> = parts().flat_map(|(_, needs)| needs.all()).collect();
    all.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_union_is_sorted_unique_and_covers_every_part() {
        let required = required_metrics();
        assert!(required.windows(2).all(|w| w[0] < w[1]), "sorted, each once");
        for (part, needs) in parts() {
            for name in needs.all() {
                assert!(required.contains(&name), "{part} reads {name}");
            }
        }
        // Far fewer than the ~2,200 columns of a full set.
        assert!((50..200).contains(&required.len()), "{}", required.len());
    }

    #[test]
    fn every_metric_can_be_named_on_the_command_line() {
        for name in required_metrics() {
            assert!(!name.starts_with("derived__"), "{name}: ncu defines derived metrics in section files");
            // One comma-separated argument carries them all.
            assert!(name.contains("__") && !name.contains([',', ' ', '"']), "{name}");
        }
    }
}
