//! One node's report: its numbers beside its parent's and the baseline's, build and
//! SASS facts, the diagnoses it was generated from and its own, the diff against its
//! parent (source and build options), and the outcome. Written as `nodes/NNNN/report.md`
//! and `report.json`.

use super::model::{read_json, read_text, NodeView, RunView};
use crate::run::store::read_source;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub label: String,
    pub ms: Option<f64>,
    pub cv_pct: Option<f64>,
    pub pct_of_floor: Option<f64>,
    pub speedup: Option<f64>,
    pub joules_per_call: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct KernelFacts {
    pub name: String,
    pub registers: u64,
    pub shared_bytes: u64,
    pub spill_bytes: u64,
    pub stack_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    pub kernel: String,
    pub tool: String,
    pub severity: String,
    pub score: f64,
    pub location: String,
    pub analysis: String,
    pub prescription: String,
    pub evidence: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeReport {
    pub node: NodeView,
    pub task: String,
    /// This node, its parent, the baseline.
    pub sides: Vec<Side>,
    pub kernels: Vec<KernelFacts>,
    /// SASS facts of the node's kernels, as the `sass` crate tabulates them.
    pub sass: Vec<String>,
    /// What the generator was shown: the parent's ranked diagnoses.
    pub asked: Vec<Diagnosis>,
    /// This node's own diagnoses, when it was profiled.
    pub diagnoses: Vec<Diagnosis>,
    pub failure_at: Option<String>,
    /// Against the parent: kernel.cu, then the build options (see `Change`).
    pub diff: String,
    /// Which GPU judged it (and, on a Ray lane, which host and lane): speedups are per GPU.
    pub judged_on: Option<String>,
}

fn side(label: &str, n: &NodeView) -> Side {
    Side {
        label: label.into(),
        ms: n.ms,
        cv_pct: n.cv_pct,
        pct_of_floor: n.pct_of_floor,
        speedup: n.speedup,
        joules_per_call: n.joules_per_call,
    }
}

fn diagnoses(dir: &Path) -> Vec<Diagnosis> {
    let Some(v) = read_json(&dir.join("diagnoses.json")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for k in v["kernels"].as_array().into_iter().flatten() {
        let kernel = sass::short_name(k["name"].as_str().unwrap_or("?")).to_string();
        for d in k["diagnoses"].as_array().into_iter().flatten() {
            let evidence = d["evidence"]
                .as_object()
                .map(|o| o.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", "))
                .unwrap_or_default();
            out.push(Diagnosis {
                kernel: kernel.clone(),
                tool: d["tool"].as_str().unwrap_or("?").into(),
                severity: d["severity"].as_str().unwrap_or("").into(),
                score: d["score"].as_f64().unwrap_or(0.0),
                location: d["location"].as_str().unwrap_or("").into(),
                analysis: d["analysis"].as_str().unwrap_or("").into(),
                prescription: d["prescription"].as_str().unwrap_or("").into(),
                evidence,
            });
        }
    }
    out
}

/// Instruction mix, access widths, loops and local memory per kernel, one table.
fn sass_facts(text: &str) -> Vec<String> {
    sass::analysis::table(&sass::analyze_all(&sass::parse(text))).lines().map(String::from).collect()
}

/// A unified diff of two texts (empty when identical).
pub fn diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new).unified_diff().context_radius(3).header(old_name, new_name).to_string()
}

/// One kernel against another. A node is its source *and* its build options (`-D` macros
/// and nvcc flags): the tuner's knob and flag moves change only the options, so a diff
/// of kernel.cu alone would show nothing for them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Change {
    /// Unified diffs: kernel.cu, then the build options (one per line); empty when both
    /// are the same.
    pub diff: String,
    pub source_changed: bool,
    pub options_changed: bool,
}

/// The options a node was built with, one per line: `-D NAME=VALUE`, then the nvcc
/// flags. From its candidate.json; from the node's label when that file is missing.
fn build_options(run: &RunView, node: &NodeView) -> Vec<String> {
    let candidate = read_text(&run.dir.join(&node.dir).join("candidate.json"))
        .and_then(|t| serde_json::from_str::<crate::run::events::Candidate>(&t).ok());
    match candidate {
        Some(c) => c.defines.iter().map(|(k, v)| format!("-D {k}={v}")).chain(c.flags).collect(),
        None if node.config.is_empty() || node.config == "defaults" => Vec::new(),
        None => node.config.split_whitespace().map(String::from).collect(),
    }
}

/// `new` against `old`, with these names in the diff headers; None when either kernel.cu
/// cannot be read (a node that failed before its source was written).
pub fn change(run: &RunView, old: (&NodeView, &str), new: (&NodeView, &str)) -> Option<Change> {
    let source = |n: &NodeView| read_source(&run.dir, &format!("{}/kernel.cu", n.dir)).ok();
    let (old_src, new_src) = (source(old.0)?, source(new.0)?);
    let lines = |opts: Vec<String>| opts.iter().map(|o| format!("{o}\n")).collect::<String>();
    let (old_opts, new_opts) = (lines(build_options(run, old.0)), lines(build_options(run, new.0)));
    let mut text = diff(&old_src, &new_src, &format!("{} kernel.cu", old.1), &format!("{} kernel.cu", new.1));
    text.push_str(&diff(
        &old_opts,
        &new_opts,
        &format!("{} build options", old.1),
        &format!("{} build options", new.1),
    ));
    Some(Change { diff: text, source_changed: old_src != new_src, options_changed: old_opts != new_opts })
}

impl NodeReport {
    pub fn build(run: &RunView, node: &NodeView) -> NodeReport {
        let dir = run.dir.join(&node.dir);
        let verdict: Value = read_json(&dir.join("verdict.json")).unwrap_or(Value::Null);
        let parent = node.parent.and_then(|p| run.node(p));
        let mut sides = vec![side(&format!("node {}", node.id), node)];
        if let Some(p) = parent {
            sides.push(side(&format!("parent {}", p.id), p));
        }
        if let Some(b) = run.node(0).filter(|_| node.id != 0) {
            sides.push(side("baseline", b));
        }
        let kernels = verdict["build"]["kernels"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|k| {
                let n = |f: &str| k[f].as_u64().unwrap_or(0);
                KernelFacts {
                    name: sass::short_name(k["name"].as_str().unwrap_or("?")).to_string(),
                    registers: n("registers"),
                    shared_bytes: n("shared_bytes"),
                    spill_bytes: n("spill_store_bytes") + n("spill_load_bytes"),
                    stack_bytes: n("stack_frame_bytes"),
                }
            })
            .collect();
        let sass = read_text(&dir.join("sass.txt")).map(|t| sass_facts(&t)).unwrap_or_default();
        let asked = parent.map(|p| diagnoses(&run.dir.join(&p.dir))).unwrap_or_default();
        let failure_at = verdict["failure"]["at"].as_object().map(|at| {
            let mut s = format!("size {} seed {}", at["size"].as_str().unwrap_or("?"), at["seed"]);
            if let Some(a) = at.get("arg").and_then(|a| a.as_str()) {
                s.push_str(&format!(" output `{a}`"));
            }
            if let Some(c) = at.get("call").and_then(|c| c.as_u64()) {
                s.push_str(&format!(" call {c}"));
            }
            s
        });
        let diff = parent
            .and_then(|p| change(run, (p, &format!("node {}", p.id)), (node, &format!("node {}", node.id))))
            .map(|c| c.diff)
            .unwrap_or_default();
        let judged_on = verdict["notes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str())
            .find(|n| n.starts_with("judged on "))
            .map(String::from)
            .or_else(|| verdict["device"]["name"].as_str().map(|g| format!("judged on {g}")));
        NodeReport {
            node: node.clone(),
            task: run.task.clone(),
            judged_on,
            sides,
            kernels,
            sass,
            asked,
            diagnoses: diagnoses(&dir),
            failure_at,
            diff,
        }
    }
}
