//! `task.toml` as written: the serde structs, with the span of every value kept so that
//! `resolve` can name the line of any field it refuses. Defaults live here; meaning does
//! not.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TaskFile {
    pub(super) task: TaskSection,
    #[serde(default)]
    pub(super) arg: Vec<Spanned<ArgSection>>,
    pub(super) sizes: Spanned<SizesSection>,
    #[serde(default)]
    pub(super) check: CheckSection,
    pub(super) roofline: Option<RooflineSection>,
    #[serde(default)]
    pub(super) tune: BTreeMap<String, Spanned<Vec<toml::Value>>>,
    #[serde(default)]
    pub(super) timing: TimingSection,
    #[serde(default)]
    pub(super) build: BuildSection,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TaskSection {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) summary: String,
    pub(super) entry: Spanned<String>,
    pub(super) baseline: Spanned<String>,
    pub(super) reference: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ArgSection {
    pub(super) name: Spanned<String>,
    #[serde(rename = "type")]
    pub(super) ty: Spanned<String>,
    pub(super) len: Option<Spanned<String>>,
    pub(super) init: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) output: bool,
    pub(super) value: Option<Spanned<toml::Value>>,
    pub(super) rtol: Option<f64>,
    pub(super) atol: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SizesSection {
    pub(super) bench: Spanned<SizeTable>,
    pub(super) check: Vec<Spanned<SizeTable>>,
    /// The shapes the kernel serves: size variables changed from the bench, a `weight`
    /// and an optional `name` each (`serve.rs`).
    #[serde(default)]
    pub(super) serve: Vec<Spanned<SizeTable>>,
    /// What the weights are shares of: "calls" (the default) or "time".
    #[serde(default)]
    pub(super) serve_weights: Option<Spanned<String>>,
}

/// A table of sizes as written: names in order, each value with its place in the file
/// (so that an error names the line of `rows = "many"`, not of the table).
#[derive(Debug)]
pub(super) struct SizeTable(pub(super) Vec<(String, Spanned<toml::Value>)>);

impl<'de> Deserialize<'de> for SizeTable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = SizeTable;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of sizes")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<SizeTable, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Spanned<toml::Value>>()? {
                    entries.push((k, v));
                }
                Ok(SizeTable(entries))
            }
        }
        d.deserialize_map(Entries)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckSection {
    #[serde(default = "default_rtol")]
    pub(super) rtol: Spanned<f64>,
    #[serde(default = "default_atol")]
    pub(super) atol: Spanned<f64>,
    #[serde(default = "default_seeds")]
    pub(super) seeds: Spanned<i64>,
    #[serde(default = "default_true")]
    pub(super) deterministic: bool,
    /// Whether the reference may produce NaN or infinite outputs (and a kernel must match
    /// them); without it, a reference that does is a task error.
    #[serde(default)]
    pub(super) nonfinite: bool,
}

impl Default for CheckSection {
    fn default() -> Self {
        CheckSection {
            rtol: default_rtol(),
            atol: default_atol(),
            seeds: default_seeds(),
            deterministic: true,
            nonfinite: false,
        }
    }
}

fn default_rtol() -> Spanned<f64> {
    Spanned::new(0..0, 1e-5)
}
fn default_atol() -> Spanned<f64> {
    Spanned::new(0..0, 1e-6)
}
fn default_seeds() -> Spanned<i64> {
    Spanned::new(0..0, 3)
}
fn default_true() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RooflineSection {
    pub(super) bytes: Spanned<String>,
    pub(super) flops: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) flops_kind: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TimingSection {
    #[serde(default = "default_true")]
    pub(super) flush_l2: bool,
    pub(super) timeout_s: Option<Spanned<f64>>,
}

impl Default for TimingSection {
    fn default() -> Self {
        TimingSection { flush_l2: true, timeout_s: None }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BuildSection {
    #[serde(default)]
    pub(super) flags: Vec<String>,
    #[serde(default)]
    pub(super) libs: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) baseline_libs: Vec<Spanned<String>>,
    /// Header folders inside the task directory, passed as -I and hashed into the build.
    #[serde(default)]
    pub(super) include: Vec<Spanned<String>>,
    /// Seconds one build may take before it is killed (`build-timeout`, not cached).
    pub(super) timeout_s: Option<Spanned<f64>>,
}
