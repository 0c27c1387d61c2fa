//! What to ask Nsight Compute for. Each part of the analysis that reads a launch declares
//! the metrics it reads next to itself (stage 1 here, each tool in [`crate::tools::ALL`]);
//! the profile collects their union instead of `--set full`, and the tests hold every
//! part to its declaration on real profiles. A few metrics are definitions inside one of
//! ncu's section files and come only with that section: [`required_sections`] names them.

use crate::facts::{metric, DeviceFacts, Needs};
use std::collections::BTreeSet;

/// Metrics that a section's own file defines (ncu's `MetricDefinitions`): `--metrics`
/// cannot name them, collecting the section yields them.
#[derive(Debug, Clone, Copy)]
pub struct SectionMetrics {
    pub section: &'static str,
    pub metrics: &'static [&'static str],
}

/// The `derived__` metrics the tools read: SourceCounters defines them over its
/// instruction-level counters (excess sectors and wavefronts are actual minus ideal,
/// summed over the instructions).
pub const SECTION_METRICS: &[SectionMetrics] = &[SectionMetrics {
    section: "SourceCounters",
    metrics: &[metric::EXCESS_SECTORS, metric::SHARED_EXCESS, metric::SHARED_NWAY],
}];

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

/// Every metric the analysis reads, sorted, each once.
pub fn required_metrics() -> Vec<&'static str> {
    let all: BTreeSet<&'static str> = parts().flat_map(|(_, needs)| needs.all()).collect();
    all.into_iter().collect()
}

fn supplied_by_a_section(name: &str) -> bool {
    SECTION_METRICS.iter().any(|s| s.metrics.contains(&name))
}

/// The sections ncu must collect for the required metrics that only a section supplies.
pub fn required_sections() -> Vec<&'static str> {
    let required = required_metrics();
    SECTION_METRICS.iter().filter(|s| s.metrics.iter().any(|m| required.contains(m))).map(|s| s.section).collect()
}

/// The required metrics that `--metrics` collects: all but those a section supplies.
pub fn requested_metrics() -> Vec<&'static str> {
    required_metrics().into_iter().filter(|m| !supplied_by_a_section(m)).collect()
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
    fn sections_and_metrics_split_the_union() {
        let requested = requested_metrics();
        assert_eq!(required_sections(), vec!["SourceCounters"]);
        for name in required_metrics() {
            assert_ne!(
                requested.contains(&name),
                supplied_by_a_section(name),
                "{name}: requested or supplied, not both"
            );
        }
        for name in &requested {
            assert!(!name.starts_with("derived__"), "{name}: ncu defines derived metrics in section files");
            // One comma-separated argument carries them all.
            assert!(name.contains("__") && !name.contains([',', ' ', '"']), "{name}");
        }
    }
}
