//! What a report shows, read from a run directory (finished or still going): the run's
//! config and GPU, every node from the event log with its files, the best and its
//! certificate. Reading never writes and never takes the run's lock.

use super::ReportError;
use crate::run::best::{best_of_json, Best};
use crate::run::config::RunFile;
use crate::run::events::Usage;
use crate::run::log::{NodeLog, RunLog};
use crate::run::store::node_rel;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The outcome of a node that a finished run never judged.
const NOT_JUDGED: &str = "not judged: the search stopped first";

#[derive(Debug, Clone, Serialize)]
pub struct NodeView {
    pub id: usize,
    pub parent: Option<usize>,
    /// improve / repair / root.
    pub kind: String,
    pub technique: String,
    pub config: String,
    /// "passed", a failure class, "in flight", or [`NOT_JUDGED`].
    pub outcome: String,
    pub passed: bool,
    pub speedup: Option<f64>,
    /// `1.150x [1.142, 1.158]`: the speedup as every output prints it ("-" if none).
    pub speedup_text: String,
    /// The 95% interval's ends, when the timing had rounds.
    pub speedup_low: Option<f64>,
    pub speedup_high: Option<f64>,
    pub ms: Option<f64>,
    pub cv_pct: Option<f64>,
    pub pct_of_floor: Option<f64>,
    pub joules_per_call: Option<f64>,
    pub registers: Option<u32>,
    pub spill_bytes: Option<u64>,
    pub message: Option<String>,
    /// Seconds since the run started when the node finished.
    pub finished_s: Option<f64>,
    /// Top diagnoses its children were written from: its own profile's, or those of the
    /// ancestor whose profile it shared.
    pub diagnoses: Vec<String>,
    pub duplicate_of: Option<usize>,
    /// The node's folder, relative to the run directory.
    pub dir: String,
    /// Per served shape, when the task serves shapes.
    pub served: Vec<ShapeRow>,
    /// The served shapes where it is slower than the baseline beyond the run's margin: a
    /// kernel with any is never the best.
    pub regresses: Vec<String>,
}

/// One served shape of a node or of the run's result, as the tables show it.
#[derive(Debug, Clone, Serialize)]
pub struct ShapeRow {
    pub name: String,
    pub size: String,
    /// Its weight as the task gives it, in percent.
    pub weight_pct: f64,
    /// Its weight in the objective (its share of the baseline's time), in percent.
    pub share_pct: f64,
    pub baseline_ms: f64,
    pub ms: f64,
    pub speedup: f64,
    pub speedup_text: String,
    pub pct_of_floor: Option<f64>,
    pub baseline_pct_of_floor: Option<f64>,
    /// Slower than the baseline beyond the run's margin.
    pub regressed: bool,
}

impl ShapeRow {
    /// The rows of `served`, each read against the baseline timed against itself at that
    /// shape (`baseline`, empty when unknown) for whether it is slower.
    pub fn rows(
        served: &[crate::wall::ShapeResult],
        min_gain: f64,
        baseline: &[crate::wall::ShapeResult],
    ) -> Vec<ShapeRow> {
        served
            .iter()
            .enumerate()
            .map(|(i, s)| ShapeRow {
                name: s.name.clone(),
                size: s.size.clone(),
                weight_pct: 100.0 * s.weight,
                share_pct: 100.0 * s.time_share,
                baseline_ms: s.baseline_ms,
                ms: s.candidate_ms,
                speedup: s.speedup.point,
                speedup_text: s.speedup.to_string(),
                pct_of_floor: s.pct_of_floor,
                baseline_pct_of_floor: s.baseline_pct_of_floor,
                regressed: s.regressed(min_gain, baseline.get(i)),
            })
            .collect()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Certificate {
    pub task: String,
    pub reference: String,
    pub check_sizes: Vec<String>,
    pub bench_size: String,
    /// Every served shape with its weight, when the task serves shapes.
    pub served_sizes: Vec<String>,
    pub seeds: String,
    pub tolerance: String,
    pub cases: Option<usize>,
    pub max_abs_err: Option<f64>,
    pub max_rel_err: Option<f64>,
    pub gpu: String,
    pub driver: String,
    pub toolkit: String,
    pub baseline_ms: Option<f64>,
    pub baseline_cv_pct: Option<f64>,
    pub best_ms: Option<f64>,
    pub best_cv_pct: Option<f64>,
    pub speedup: Option<f64>,
    pub speedup_text: String,
    pub sanitizer: String,
    pub energy: Option<String>,
    pub final_check: String,
    pub sandbox: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    pub dir: PathBuf,
    pub task: String,
    pub generator: String,
    pub strategy: String,
    pub objective: String,
    pub started_at: String,
    pub nightshift: String,
    pub gpu: String,
    pub simulated: bool,
    /// Still going: its last session's process is alive and has not finished.
    pub running: bool,
    /// Stopped without finishing (killed, or its machine went away): `--resume` carries on.
    pub interrupted: bool,
    pub stop_reason: Option<String>,
    pub nodes: Vec<NodeView>,
    pub best: Option<NodeView>,
    pub verified: bool,
    /// The final check's result (`best.json`), when a session got that far.
    pub result: Option<Best>,
    /// Judged since that final check and faster by its point estimate: not yet confirmed.
    pub pending: Option<NodeView>,
    /// What a kernel had to show to be called faster.
    pub bar: Option<String>,
    pub certificate: Option<Certificate>,
    /// Per served shape, the best kernel against the baseline (the final check's figures
    /// once it ran), when the task serves shapes.
    pub served: Vec<ShapeRow>,
    /// What the search did about dispatch by shape, when the task serves shapes.
    pub shape_dispatch: Option<String>,
    pub outcomes: BTreeMap<String, usize>,
    /// Judged nodes that landed within their parent's interval: no gain that clears the
    /// noise.
    pub within_parent_interval: usize,
    pub usage: Option<Usage>,
    /// (seconds since start, best speedup so far) at each improvement, and (node, best).
    pub best_over_time: Vec<(f64, f64)>,
    pub best_over_nodes: Vec<(usize, f64)>,
    pub search_s: f64,
    /// Per diagnosis tool named in a parent's top diagnoses: children judged, and how
    /// many of them beat their parent.
    pub followed: Vec<Followed>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Followed {
    pub tool: String,
    pub children: usize,
    pub improved: usize,
}

/// A file of the run as it is; None if it is not there.
pub(super) fn read_text(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

pub(super) fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&read_text(path)?).ok()
}

impl RunView {
    pub fn load(dir: &Path) -> Result<RunView, ReportError> {
        let path = dir.join("run.json");
        let text =
            std::fs::read_to_string(&path).map_err(|source| ReportError::NoRun { path: path.clone(), source })?;
        let run: RunFile = serde_json::from_str(&text).map_err(|source| ReportError::RunJson { path, source })?;
        let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
        let log = RunLog::parse(&text).map_err(|source| ReportError::Log { path: dir.join("events.jsonl"), source })?;
        let finished_run = log.session.finished;
        let min_gain = run.config.min_gain;
        let baseline_served: Vec<crate::wall::ShapeResult> = log
            .live_nodes()
            .find(|n| n.parent.is_none())
            .and_then(|n| n.finished.as_ref())
            .map(|f| f.summary.served.clone())
            .unwrap_or_default();
        let mut nodes: Vec<NodeView> = log.live_nodes().map(|n| node_view(n, min_gain, &baseline_served)).collect();
        if finished_run {
            // Started in a session that was killed or abandoned, and not redone (the budget
            // was spent when the run resumed): nothing is in flight once the run has finished.
            for n in nodes.iter_mut().filter(|n| n.id != 0 && n.finished_s.is_none()) {
                n.outcome = NOT_JUDGED.into();
            }
        }
        let (best_over_time, best_over_nodes) = best_so_far_curves(&nodes);
        let running = !finished_run && log.session.stopped.is_none() && log.session.pid.is_some_and(process_alive);
        let stop_reason = log.session.stopped.clone().or(log.search_stopped.clone());
        let interrupted = !finished_run && !running;
        // The final check's result is the one set of numbers; before it, the best so far.
        let best_json = read_json(&dir.join("best.json"));
        let result = best_json.as_ref().and_then(best_of_json);
        let best_so_far = nodes
            .iter()
            .filter(|n| n.passed && n.id != 0 && n.regresses.is_empty())
            .max_by(|a, b| a.speedup.partial_cmp(&b.speedup).unwrap_or(std::cmp::Ordering::Equal))
            .cloned();
        let best = match &result {
            Some(r) if r.verified && r.node != 0 => nodes.iter().find(|n| n.id == r.node).cloned().map(|mut n| {
                n.speedup = Some(r.speedup);
                n.speedup_text = r.measured().to_string();
                n.ms = r.ms;
                n.cv_pct = r.cv.map(|c| 100.0 * c);
                n.pct_of_floor = r.pct_of_floor;
                n
            }),
            Some(_) if finished_run => None,
            _ => best_so_far.clone(),
        };
        // A candidate judged after the last final check that may beat its result.
        let pending = best_so_far.filter(|n| {
            !finished_run
                && result.as_ref().is_some_and(|r| r.verified && n.id != r.node && n.speedup > Some(r.speedup))
        });
        let verified = result.as_ref().is_some_and(|r| r.verified && r.node != 0);
        let mut outcomes = BTreeMap::new();
        for n in nodes.iter().filter(|n| n.id != 0 && n.finished_s.is_some()) {
            *outcomes.entry(n.outcome.clone()).or_insert(0) += 1;
        }
        let followed = followed(&nodes);
        let gpu = run
            .devices
            .first()
            .map(|d| {
                format!("{} (sm_{}{}, {} SMs)", d.name, d.compute_capability.0, d.compute_capability.1, d.sm_count)
            })
            .unwrap_or_else(|| "unknown".into());
        let certificate =
            best.as_ref().map(|b| certificate(dir, &run, best_json.as_ref().filter(|_| verified), result.as_ref(), b));
        let bar = result.as_ref().and_then(|r| r.bar).map(|b| b.describe());
        let served = match (&result, &best) {
            (Some(r), _) if r.verified && !r.served.is_empty() => {
                ShapeRow::rows(&r.served, r.bar.map_or(min_gain, |b| b.min_gain), &baseline_served)
            }
            (_, Some(b)) => b.served.clone(),
            _ => Vec::new(),
        };
        let summary = crate::run::summary::read_summary(dir);
        Ok(RunView {
            dir: dir.to_path_buf(),
            task: run.config.task.clone(),
            generator: summary.as_ref().map_or_else(|| run.config.generator.name(), |s| s.generator.clone()),
            strategy: clap::ValueEnum::to_possible_value(&run.config.strategy)
                .map(|v| v.get_name().to_string())
                .unwrap_or_default(),
            objective: run.config.objective.to_string(),
            started_at: run.started_at.clone(),
            nightshift: run.nightshift.clone(),
            gpu,
            simulated: log.simulated,
            running,
            interrupted,
            stop_reason,
            nodes,
            best,
            verified,
            result,
            pending,
            bar,
            certificate,
            served,
            shape_dispatch: log.shape_dispatch.clone(),
            outcomes,
            within_parent_interval: log.within_parent_interval(run.config.min_gain),
            usage: log.usage,
            best_over_time,
            best_over_nodes,
            // The search's own clock once the run has finished (the log's runs on through
            // the final check).
            search_s: summary.as_ref().filter(|_| finished_run).map_or(log.active_s, |s| s.search_s),
            followed,
        })
    }

    pub fn node(&self, id: usize) -> Option<&NodeView> {
        self.nodes.iter().find(|n| n.id == id)
    }
}

/// A node's view: what the log says of it ([`NodeLog`]), as the reports show it.
fn node_view(n: &NodeLog, min_gain: f64, baseline: &[crate::wall::ShapeResult]) -> NodeView {
    let kind = match n.kind {
        None => "root".to_string(),
        Some(kind) => serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
    };
    let mut v = NodeView {
        id: n.id,
        parent: n.parent,
        kind,
        technique: String::new(),
        config: String::new(),
        outcome: "in flight".into(),
        passed: false,
        speedup: None,
        speedup_text: "-".into(),
        speedup_low: None,
        speedup_high: None,
        ms: None,
        cv_pct: None,
        pct_of_floor: None,
        joules_per_call: None,
        registers: None,
        spill_bytes: None,
        message: None,
        finished_s: None,
        diagnoses: n.top_diagnoses().map(<[String]>::to_vec).unwrap_or_default(),
        duplicate_of: None,
        dir: node_rel(n.id),
        served: Vec::new(),
        regresses: Vec::new(),
    };
    if let Some(p) = &n.proposal {
        v.technique = p.technique.clone();
        v.config = p.candidate.config_label();
    }
    if let Some(f) = &n.finished {
        let s = &f.summary;
        v.passed = s.passed;
        v.outcome = if s.passed {
            "passed".into()
        } else {
            s.failure_class.as_ref().map_or("failed".into(), |c| c.name().to_string())
        };
        v.speedup = s.speedup.filter(|_| s.passed);
        v.speedup_text = s.measured_speedup().filter(|_| s.passed).map(|x| x.to_string()).unwrap_or("-".into());
        (v.speedup_low, v.speedup_high) = (s.speedup_low, s.speedup_high);
        v.ms = s.candidate_ms;
        v.cv_pct = s.cv.map(|c| 100.0 * c);
        v.pct_of_floor = s.pct_of_floor;
        v.joules_per_call = s.joules_per_call;
        v.registers = s.registers;
        v.spill_bytes = s.spill_bytes;
        v.message = s.failure_message.clone();
        v.finished_s = Some(f.at);
        v.duplicate_of = f.duplicate_of;
        v.served = ShapeRow::rows(&s.served, min_gain, baseline);
        if s.passed && n.parent.is_some() {
            v.regresses = v.served.iter().filter(|r| r.regressed).map(|r| r.name.clone()).collect();
        }
    }
    if n.parent.is_none() {
        // The root is the baseline, timed against itself.
        v.speedup = Some(1.0);
        v.speedup_text = "1.000x".into();
    }
    v
}

/// (seconds, best so far) at each finished node by time, and (node, best so far) by node order.
type Curves = (Vec<(f64, f64)>, Vec<(usize, f64)>);

/// The best speedup so far at each finished node, by time and by node order.
fn best_so_far_curves(nodes: &[NodeView]) -> Curves {
    let mut best_over_nodes = Vec::new();
    let mut best_over_time = Vec::new();
    let mut best = 1.0f64;
    let mut finished: Vec<&NodeView> = nodes.iter().filter(|n| n.finished_s.is_some()).collect();
    finished.sort_by(|a, b| a.finished_s.partial_cmp(&b.finished_s).unwrap_or(std::cmp::Ordering::Equal));
    for n in &finished {
        if n.passed {
            best = best.max(n.speedup.unwrap_or(1.0));
        }
        best_over_time.push((n.finished_s.unwrap_or(0.0), best));
    }
    let mut best_by_id = 1.0f64;
    for n in nodes {
        if n.passed {
            best_by_id = best_by_id.max(n.speedup.unwrap_or(1.0));
        }
        if n.finished_s.is_some() {
            best_over_nodes.push((n.id, best_by_id));
        }
    }
    (best_over_time, best_over_nodes)
}

/// For each diagnosis tool in a parent's top list, its children: judged, and better than
/// the parent. A tool at the top that keeps paying off is one the generator should follow.
/// "Better" is a claim, so it needs the intervals apart: the child's lower end above the
/// parent's upper end (the root, timed against itself, counts as exactly 1).
fn followed(nodes: &[NodeView]) -> Vec<Followed> {
    let mut by_tool: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for n in nodes {
        let Some(parent) = n.parent.and_then(|p| nodes.iter().find(|m| m.id == p)) else { continue };
        let Some(top) = parent.diagnoses.first() else { continue };
        if n.finished_s.is_none() {
            continue;
        }
        let tool = top.split_whitespace().next().unwrap_or(top).to_string();
        let e = by_tool.entry(tool).or_default();
        e.0 += 1;
        let parent_high = if parent.id == 0 { Some(1.0) } else { parent.speedup_high };
        if n.passed && n.speedup_low.zip(parent_high).is_some_and(|(low, high)| low > high) {
            e.1 += 1;
        }
    }
    by_tool.into_iter().map(|(tool, (children, improved))| Followed { tool, children, improved }).collect()
}

/// Whether the process with this pid is alive (a run's last session).
fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn certificate(dir: &Path, run: &RunFile, best: Option<&Value>, result: Option<&Best>, node: &NodeView) -> Certificate {
    let verdict = best
        .and_then(|b| b.get("final_verdict").cloned())
        .filter(|v| !v.is_null())
        .or_else(|| read_json(&dir.join(&node.dir).join("verdict.json")))
        .unwrap_or(Value::Null);
    let task_dir = {
        let d = PathBuf::from(&run.config.task_dir);
        if d.is_absolute() || d.is_dir() {
            d
        } else {
            dir.join(&d)
        }
    };
    let task = crate::task::Task::load(&task_dir).ok();
    let t = &verdict["timing"];
    let pct = |v: &Value| v.as_f64().map(|c| 100.0 * c);
    let device = &verdict["device"];
    let sanitizer = match verdict["sanitizer"].as_array() {
        Some(list) if !list.is_empty() => list
            .iter()
            .map(|s| {
                format!(
                    "{} {}",
                    s["tool"].as_str().unwrap_or("?"),
                    if s["errors"].as_u64() == Some(0) { "clean" } else { "FOUND ERRORS" }
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
        _ => "not run".into(),
    };
    let energy = verdict["energy"].as_object().map(|_| {
        format!(
            "{:.4} mJ/call baseline, {:.4} mJ/call best (saving {:.3}x; device-wide counter)",
            1e3 * verdict["energy"]["baseline"]["joules_per_call"].as_f64().unwrap_or(0.0),
            1e3 * verdict["energy"]["candidate"]["joules_per_call"].as_f64().unwrap_or(0.0),
            verdict["energy"]["saving"].as_f64().unwrap_or(0.0)
        )
    });
    let summary = |key: &str| {
        verdict[key]
            .as_array()
            .map(|l| {
                l.iter()
                    .map(|x| {
                        format!(
                            "{} {}",
                            x["name"].as_str().unwrap_or("?"),
                            if x["active"] == true { "on" } else { "off" }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .filter(|s| !s.is_empty())
    };
    let mut layers = summary("sandbox").unwrap_or_else(|| "not recorded".into());
    if let Some(hosted) = summary("hosted_sandbox") {
        layers.push_str(&format!("; compute-sanitizer ran in: {hosted}"));
    }
    Certificate {
        task: run.config.task.clone(),
        reference: task
            .as_ref()
            .map(|t| {
                if t.has_reference() {
                    t.reference.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
                } else {
                    "the baseline".into()
                }
            })
            .unwrap_or_else(|| "task not found".into()),
        check_sizes: task.as_ref().map(|t| t.checks.iter().map(|s| s.to_string()).collect()).unwrap_or_default(),
        served_sizes: task
            .as_ref()
            .filter(|t| t.serves_shapes())
            .map(crate::task::Task::served_in_words)
            .unwrap_or_default(),
        bench_size: t["size"].as_str().map(String::from).or(task.as_ref().map(|t| t.bench.to_string())).unwrap_or_default(),
        seeds: match (&task, verdict["check"]["cases"].as_u64()) {
            (Some(t), Some(cases)) if best.is_some_and(|b| b["final_verdict"].is_object()) => format!(
                "{} per check size in the search; {} per size, drawn afresh, in the final check (input seeds are new for every run)",
                t.seeds,
                cases as usize / t.checks.len().max(1)
            ),
            (Some(t), _) => format!("{} per check size (input seeds are new for every run)", t.seeds),
            _ => String::new(),
        },
        tolerance: task.as_ref().map(tolerance_line).unwrap_or_default(),
        cases: verdict["check"]["cases"].as_u64().map(|c| c as usize),
        max_abs_err: verdict["check"]["max_abs_err"].as_f64(),
        max_rel_err: verdict["check"]["max_rel_err"].as_f64(),
        gpu: device["name"].as_str().map(String::from).unwrap_or_else(|| "unknown".into()),
        driver: device["driver_version"]
            .as_i64()
            .map(|v| format!("CUDA driver {}.{}", v / 1000, (v % 1000) / 10))
            .unwrap_or_default(),
        toolkit: format!("nvcc {}", run.nvcc),
        baseline_ms: result.and_then(|r| r.baseline_ms).or(t["baseline"]["median_ms"].as_f64()),
        baseline_cv_pct: result.and_then(|r| r.baseline_cv).map(|c| 100.0 * c).or(pct(&t["baseline"]["cv"])),
        best_ms: node.ms,
        best_cv_pct: node.cv_pct,
        speedup: node.speedup,
        speedup_text: node.speedup_text.clone(),
        sanitizer,
        energy,
        final_check: match result {
            Some(r) if r.verified => r.note.clone(),
            _ => "not re-verified yet".into(),
        },
        sandbox: layers,
    }
}

/// The check's tolerance as the certificate states it: one line where every output is
/// held to the task-wide tolerance, else one line per output (an int8 output checked to
/// one unit beside a float one at rtol 1e-6), so a difference the check allowed does not
/// read as a failure.
fn tolerance_line(task: &crate::task::Task) -> String {
    use crate::task::ArgRole;
    let line = |atol: f64, rtol: f64| format!("|out - ref| <= {atol:e} + {rtol:e} x |ref|");
    let outputs: Vec<(&str, &crate::task::Tolerance)> = task
        .args
        .iter()
        .filter_map(|a| match &a.role {
            ArgRole::Output { tolerance, .. } | ArgRole::InOut { tolerance, .. } => Some((a.name.as_str(), tolerance)),
            _ => None,
        })
        .collect();
    let wide = &task.tolerance;
    if outputs.iter().all(|(_, t)| t.atol == wide.atol && t.rtol == wide.rtol) {
        return line(wide.atol, wide.rtol);
    }
    outputs.iter().map(|(name, t)| format!("{name}: {}", line(t.atol, t.rtol))).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tolerance_tests {
    use super::tolerance_line;
    use crate::task::Task;
    use std::path::Path;

    #[test]
    fn outputs_with_tolerances_of_their_own_are_listed_each() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let quant = Task::load(&root.join("examples/rowwise_quant_int8")).unwrap();
        assert_eq!(
            tolerance_line(&quant),
            "q: |out - ref| <= 1e0 + 0e0 x |ref|\nscale: |out - ref| <= 0e0 + 1e-6 x |ref|"
        );
        let softmax = Task::load(&root.join("tasks/softmax")).unwrap();
        assert!(!tolerance_line(&softmax).contains('\n'), "{}", tolerance_line(&softmax));
    }
}
