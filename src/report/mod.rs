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

/// A value as one markdown table cell: `|` would end the cell and a newline the row, so
/// pipes are escaped (`\|`, which GitHub also honours inside code spans) and line breaks
/// become `<br>`. Every interpolation inside a table row of the markdown templates goes
/// through it, numbers from `num`, `sci` and `mj` aside (they cannot hold either).
fn cell(v: Value) -> String {
    let text = if v.is_none() || v.is_undefined() { String::new() } else { v.to_string() };
    text.replace("\r\n", "\n").replace('|', "\\|").replace('\n', "<br>")
}

/// One line of a unified diff, with the class the HTML report colours it by.
#[derive(Debug, Serialize, PartialEq)]
struct DiffLine {
    class: &'static str,
    text: String,
}

/// A unified diff's lines, classified: file headers, hunk headers, added, removed, context.
fn diff_lines(diff: &str) -> Vec<DiffLine> {
    diff.lines()
        .map(|line| {
            let class = if line.starts_with("+++ ") || line.starts_with("--- ") {
                "d-file"
            } else if line.starts_with("@@") {
                "d-hunk"
            } else if line.starts_with('+') {
                "d-add"
            } else if line.starts_with('-') {
                "d-del"
            } else {
                "d-ctx"
            };
            DiffLine { class, text: line.to_string() }
        })
        .collect()
}

fn diff_lines_filter(diff: String) -> Value {
    Value::from(Serde(diff_lines(&diff)))
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.add_filter("num", num);
    env.add_filter("sci", sci);
    env.add_filter("mj", mj);
    env.add_filter("cell", cell);
    env.add_filter("diff_lines", diff_lines_filter);
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

/// Why a report cannot be read from its run directory, rendered or written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// run.json cannot be read.
    #[error("{}: {source} (is this a nightshift run directory?)", path.display())]
    NoRun { path: PathBuf, source: std::io::Error },
    /// run.json does not parse.
    #[error("{}: {source}", path.display())]
    RunJson { path: PathBuf, source: serde_json::Error },
    /// events.jsonl holds a bad line.
    #[error("{}: {source}", path.display())]
    Log { path: PathBuf, source: crate::run::events::LogError },
    /// A template failed to render: `what` names the report ("node 3 report", "run
    /// report", "HTML report").
    #[error("{what}: {source}")]
    Render { what: String, source: minijinja::Error },
    /// A template failed to render for `show`, which says only the template's error.
    #[error(transparent)]
    Show(minijinja::Error),
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    /// The loop asked for the report of a node the log does not have yet.
    #[error("node {0} is not in the log yet")]
    NotYetLogged(usize),
    /// `show --node` named a node the run does not have.
    #[error("{}: no node {id} (nodes 0 to {last})", dir.display())]
    NoNode { dir: PathBuf, id: usize, last: usize },
}

/// What `render` wrote.
#[derive(Debug, Serialize)]
pub struct Written {
    pub run_md: PathBuf,
    pub run_html: PathBuf,
    pub node_reports: usize,
}

fn write(path: &Path, text: &str) -> Result<(), ReportError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|source| ReportError::Write { path: path.to_path_buf(), source })
}

/// Renders one node's report files; the run view must already include it.
pub fn write_node(run: &RunView, node: &NodeView) -> Result<NodeReport, ReportError> {
    let report = NodeReport::build(run, node);
    let dir = run.dir.join(&node.dir);
    if !dir.is_dir() {
        return Ok(report);
    }
    let md = environment()
        .get_template("node.md")
        .and_then(|t| t.render(Serde(&report)))
        .map_err(|source| ReportError::Render { what: format!("node {} report", node.id), source })?;
    write(&dir.join("report.md"), &md)?;
    write(&dir.join("report.json"), &serde_json::to_string_pretty(&report).expect("reports serialize"))?;
    Ok(report)
}

/// The best kernel against the baseline: its source and its build options (a tuner's
/// best often differs in the options alone, with the very same kernel.cu).
fn best_change(run: &RunView) -> Option<node::Change> {
    let best = run.best.as_ref().filter(|b| b.id != 0)?;
    node::change(run, (run.node(0)?, "baseline"), (best, &format!("node {}", best.id)))
}

/// (Re)renders every node's report and the run's report.md and report.html.
pub fn render(dir: &Path) -> Result<Written, ReportError> {
    let run = RunView::load(dir)?;
    let mut reports = Vec::new();
    for n in run.nodes.iter().filter(|n| n.finished_s.is_some()) {
        reports.push(write_node(&run, n)?);
    }
    let env = environment();
    let plot_time = plots::best_over_time(&run.best_over_time);
    let plot_nodes = plots::best_over_nodes(&run.best_over_nodes);
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
        best_change => Serde(best_change(&run)),
    };
    let rendered = |name: &str, what: &str| {
        env.get_template(name)
            .and_then(|t| t.render(&ctx))
            .map_err(|source| ReportError::Render { what: what.into(), source })
    };
    let md = rendered("run.md", "run report")?;
    let html = rendered("run.html", "HTML report")?;
    let written =
        Written { run_md: dir.join("report.md"), run_html: dir.join("report.html"), node_reports: reports.len() };
    write(&written.run_md, &md)?;
    write(&written.run_html, &html)?;
    Ok(written)
}

/// Called by the optimize loop when node `id` finished: writes its report, and refreshes
/// the run's report when `refresh_run` (the loop rate-limits that). Errors are returned
/// for the log; a report never stops a run.
pub fn node_finished(dir: &Path, id: usize, refresh_run: bool) -> Result<(), ReportError> {
    if refresh_run {
        return render(dir).map(drop);
    }
    let run = RunView::load(dir)?;
    let node = run.node(id).ok_or(ReportError::NotYetLogged(id))?;
    write_node(&run, node).map(drop)
}

/// The run summary (or one node's report) as terminal text, without writing anything.
pub fn show(dir: &Path, node: Option<usize>) -> Result<String, ReportError> {
    let run = RunView::load(dir)?;
    let env = environment();
    match node {
        Some(id) => {
            let n = run.node(id).ok_or_else(|| ReportError::NoNode {
                dir: dir.to_path_buf(),
                id,
                last: run.nodes.last().map(|n| n.id).unwrap_or(0),
            })?;
            let report = NodeReport::build(&run, n);
            env.get_template("node.md").and_then(|t| t.render(Serde(&report))).map_err(ReportError::Show)
        }
        None => {
            let ctx = context! { run => Serde(&run), cert => Serde(&run.certificate) };
            env.get_template("run.md").and_then(|t| t.render(&ctx)).map_err(ReportError::Show)
        }
    }
}

/// What `show --json` prints: the run's model (its nodes, best, certificate and served
/// shapes), or one node's.
pub fn show_json(dir: &Path, node: Option<usize>) -> Result<serde_json::Value, ReportError> {
    let run = RunView::load(dir)?;
    let value = match node {
        Some(id) => serde_json::to_value(run.node(id).ok_or_else(|| ReportError::NoNode {
            dir: dir.to_path_buf(),
            id,
            last: run.nodes.last().map(|n| n.id).unwrap_or(0),
        })?),
        None => serde_json::to_value(&run),
    };
    Ok(value.unwrap_or(serde_json::Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cells of one markdown table row, split where GitHub splits them: at pipes not
    /// escaped with a backslash.
    fn cells(row: &str) -> Vec<String> {
        let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
        let mut out = vec![String::new()];
        let mut escaped = false;
        for c in inner.chars() {
            match c {
                '|' if !escaped => out.push(String::new()),
                _ => out.last_mut().unwrap().push(c),
            }
            escaped = c == '\\' && !escaped;
        }
        out.into_iter().map(|c| c.trim().to_string()).collect()
    }

    #[test]
    fn a_cell_with_pipes_and_newlines_stays_one_cell_of_one_row() {
        let env = environment();
        let row =
            env.render_str("| tolerance | {{ v|cell }} |", context! { v => "|a - b| <= 1e-8\n+ 1e-5 x |b|" }).unwrap();
        assert_eq!(row.lines().count(), 1, "{row}");
        assert_eq!(cells(&row), ["tolerance", "\\|a - b\\| <= 1e-8<br>+ 1e-5 x \\|b\\|"], "{row}");
        assert_eq!(env.render_str("|{{ none|cell }}|", context! { none => Value::from(()) }).unwrap(), "||");
    }

    #[test]
    fn diff_lines_are_classified_for_colour() {
        let diff = node::diff("a\nb\nc\n", "a\nB\nc\n", "old", "new");
        let classes: Vec<&str> = diff_lines(&diff).iter().map(|l| l.class).collect();
        assert_eq!(classes, ["d-file", "d-file", "d-hunk", "d-ctx", "d-del", "d-add", "d-ctx"], "{diff}");
    }
}
