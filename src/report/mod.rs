//! Reports of an optimize run, read from its directory alone (so they render while the
//! run goes on, and again at any time later): a report per node (`nodes/NNNN/report.md`
//! and `report.json`) and a run report (`report.md` and a self-contained `report.html`:
//! inline CSS and SVG plots, no scripts, nothing fetched).
//!
//! `model` turns run.json, events.jsonl and the node folders into plain data; `node`
//! gathers one node's facts; `plots` draws with plotters' SVG backend; the templates
//! (minijinja) only lay out what those computed.

pub mod model;
pub mod node;
mod plots;

use minijinja::value::Serde;
use minijinja::{context, Environment, Value};
use model::{NodeView, RunView};
use node::NodeReport;
use serde::Serialize;
use std::path::{Path, PathBuf};

fn num(v: Value, precision: Option<usize>) -> String {
    match f64::try_from(v) {
        Ok(x) if x.is_finite() => format!("{x:.*}", precision.unwrap_or(3)),
        _ => "-".into(),
    }
}

fn sci(v: Value) -> String {
    match f64::try_from(v) {
        Ok(x) if x.is_finite() => format!("{x:.2e}"),
        _ => "-".into(),
    }
}

fn mj(v: Value) -> String {
    match f64::try_from(v) {
        Ok(x) if x.is_finite() => format!("{:.4}", 1e3 * x),
        _ => "-".into(),
    }
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.add_filter("num", num);
    env.add_filter("sci", sci);
    env.add_filter("mj", mj);
    env.add_template("node.md", include_str!("templates/node.md.j2")).expect("the node template parses");
    env.add_template("run.md", include_str!("templates/run.md.j2")).expect("the run template parses");
    env.add_template("run.html", include_str!("templates/run.html.j2")).expect("the HTML template parses");
    env
}

/// A node and its depth, in depth-first order from the root.
#[derive(Debug, Serialize)]
struct TreeRow<'a> {
    depth: usize,
    node: &'a NodeView,
}

fn tree(run: &RunView) -> Vec<TreeRow<'_>> {
    fn walk<'a>(run: &'a RunView, id: usize, depth: usize, out: &mut Vec<TreeRow<'a>>) {
        let Some(n) = run.node(id) else { return };
        out.push(TreeRow { depth, node: n });
        for child in run.nodes.iter().filter(|c| c.parent == Some(id)) {
            walk(run, child.id, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    walk(run, 0, 0, &mut out);
    out
}

/// What `render` wrote.
#[derive(Debug, Serialize)]
pub struct Written {
    pub run_md: PathBuf,
    pub run_html: PathBuf,
    pub node_reports: usize,
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Renders one node's report files; the run view must already include it.
pub fn write_node(run: &RunView, node: &NodeView) -> Result<NodeReport, String> {
    let report = NodeReport::build(run, node);
    let dir = run.dir.join(&node.dir);
    if !dir.is_dir() {
        return Ok(report);
    }
    let md = environment()
        .get_template("node.md")
        .and_then(|t| t.render(Serde(&report)))
        .map_err(|e| format!("node {} report: {e}", node.id))?;
    write(&dir.join("report.md"), &md)?;
    write(&dir.join("report.json"), &serde_json::to_string_pretty(&report).expect("reports serialize"))?;
    Ok(report)
}

/// The best kernel's diff against the baseline.
fn best_diff(run: &RunView) -> String {
    let Some(best) = run.best.as_ref().filter(|b| b.id != 0) else { return String::new() };
    let read = |n: &NodeView| model::read_text(&run.dir.join(&n.dir).join("kernel.cu"));
    match (run.node(0).and_then(read), read(best)) {
        (Some(base), Some(src)) => node::diff(&base, &src, "baseline", &format!("node {}", best.id)),
        _ => String::new(),
    }
}

/// (Re)renders every node's report and the run's report.md and report.html.
pub fn render(dir: &Path) -> Result<Written, String> {
    let run = RunView::load(dir)?;
    let mut reports = Vec::new();
    for n in run.nodes.iter().filter(|n| n.finished_s.is_some()) {
        reports.push(write_node(&run, n)?);
    }
    let env = environment();
    let plot_time = plots::best_so_far(&run.best_over_time, "seconds since the start", "best speedup over wall time");
    let plot_nodes = plots::best_so_far(
        &run.best_over_nodes.iter().map(|&(n, s)| (n as f64, s)).collect::<Vec<_>>(),
        "node",
        "best speedup over nodes",
    );
    // Energy runs: time against energy for every correct node, with the Pareto front.
    let energy_points: Vec<(f64, f64)> =
        run.nodes.iter().filter(|n| n.passed).filter_map(|n| Some((n.ms?, 1e3 * n.joules_per_call?))).collect();
    let plot_energy = (!energy_points.is_empty()).then(|| plots::time_energy(&energy_points));
    let ctx = context! {
        run => Serde(&run),
        plot_energy => plot_energy,
        cert => Serde(&run.certificate),
        tree => Serde(tree(&run)),
        reports => Serde(&reports),
        plot_time => plot_time,
        plot_nodes => plot_nodes,
        best_diff => best_diff(&run),
    };
    let md = env.get_template("run.md").and_then(|t| t.render(&ctx)).map_err(|e| format!("run report: {e}"))?;
    let html = env.get_template("run.html").and_then(|t| t.render(&ctx)).map_err(|e| format!("HTML report: {e}"))?;
    let written =
        Written { run_md: dir.join("report.md"), run_html: dir.join("report.html"), node_reports: reports.len() };
    write(&written.run_md, &md)?;
    write(&written.run_html, &html)?;
    Ok(written)
}

/// Called by the optimize loop when node `id` finished: writes its report, and refreshes
/// the run's report when `refresh_run` (the loop rate-limits that). Errors are returned
/// for the log; a report never stops a run.
pub fn node_finished(dir: &Path, id: usize, refresh_run: bool) -> Result<(), String> {
    if refresh_run {
        return render(dir).map(drop);
    }
    let run = RunView::load(dir)?;
    let node = run.node(id).ok_or_else(|| format!("node {id} is not in the log yet"))?;
    write_node(&run, node).map(drop)
}

/// The run summary (or one node's report) as terminal text, without writing anything.
pub fn show(dir: &Path, node: Option<usize>) -> Result<String, String> {
    let run = RunView::load(dir)?;
    let env = environment();
    match node {
        Some(id) => {
            let n = run.node(id).ok_or_else(|| {
                format!("{}: no node {id} (nodes 0 to {})", dir.display(), run.nodes.last().map(|n| n.id).unwrap_or(0))
            })?;
            let report = NodeReport::build(&run, n);
            env.get_template("node.md").and_then(|t| t.render(Serde(&report))).map_err(|e| e.to_string())
        }
        None => {
            let ctx = context! { run => Serde(&run), cert => Serde(&run.certificate), best_diff => "" };
            env.get_template("run.md").and_then(|t| t.render(&ctx)).map_err(|e| e.to_string())
        }
    }
}
