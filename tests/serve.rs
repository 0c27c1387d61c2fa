//! Served shapes on the real binary: a task with weighted shapes validates and shows
//! them; a simulated run never hands over a kernel that loses a served shape, whatever its
//! mean, and ends with the best kernel of each shape combined into one dispatched library,
//! built for real and judged like any node. Runs use the simulated evaluator (real
//! builds, real workers, per-shape speedups from `shape.NAME=X` markers).

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};

const SERVE: &str = "serve = [{ name = \"decode\", rows = 8, weight = 0.6 }, { name = \"chunk\", rows = 512, weight = 0.3 }, { name = \"prefill\", weight = 0.1 }]";

/// tasks/softmax with three served shapes: decode and chunk change `rows`, prefill is the
/// bench size.
fn served_softmax(tmp: &Path) -> PathBuf {
    let dir = tmp.join("softmax");
    common::copy_dir(&common::root().join("tasks/softmax"), &dir);
    let toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
    let at = toml.find("\ncheck = [").expect("softmax has check sizes");
    let end = at + 1 + toml[at + 1..].find('\n').unwrap();
    let text = format!("{}\n{SERVE}{}", &toml[..end], &toml[end..]);
    std::fs::write(dir.join("task.toml"), text).unwrap();
    dir
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

fn events(run: &Path) -> Vec<Value> {
    std::fs::read_to_string(run.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect()
}

/// A simulated run of the served softmax over replies carrying these markers, in order,
/// up to as many nodes as there are replies; its directory, once it exited 0.
fn simulated_run(tmp: &Path, markers: &[&str]) -> PathBuf {
    let task = served_softmax(tmp);
    let replies = tmp.join("replies");
    std::fs::create_dir_all(&replies).unwrap();
    for (i, marker) in markers.iter().enumerate() {
        std::fs::write(replies.join(format!("{:02}.cu", i + 1)), common::sim_kernel(marker, "")).unwrap();
    }
    let run = tmp.join("run");
    let out = common::building_command()
        .args(["optimize", "--simulate-gpu", "5", "--no-final-sanitize", "--max-nodes"])
        .arg(markers.len().to_string())
        .arg("--generator")
        .arg(format!("replay:{}", replies.display()))
        .arg("--out")
        .arg(&run)
        .arg(&task)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    run
}

#[test]
fn a_task_with_three_weighted_shapes_validates_and_shows_them() {
    let tmp = tempfile::tempdir().unwrap();
    let task = served_softmax(tmp.path());
    let out = common::building_command().arg("validate").arg(&task).arg("--json").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let shown = common::building_command().arg("validate").arg(&task).output().unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    for line in ["decode", "60.0% of the calls", "rows=8 cols=4096", "chunk", "prefill", "rows=8192 cols=4096"] {
        assert!(text.contains(line), "`{line}` in:\n{text}");
    }
    // A weight left out is an error at its line, naming the field.
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    std::fs::write(task.join("task.toml"), toml.replace("rows = 512, weight = 0.3", "rows = 512")).unwrap();
    let out = common::building_command().arg("validate").arg(&task).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("task.toml:") && stderr.contains("sizes.serve[1].weight"), "{stderr}");
}

#[test]
fn a_kernel_that_loses_a_shape_is_never_chosen_and_the_dispatch_of_each_shapes_best_is() {
    let tmp = tempfile::tempdir().unwrap();
    // Node 1: fastest on the mean (2x at chunk and prefill) but 0.9x at decode.
    // Node 2: 1.2x everywhere.
    let run = simulated_run(tmp.path(), &["speedup=2.0, shape.decode=0.9", "speedup=1.2"]);

    let log = events(&run);
    let finished = |id: u64| {
        log.iter()
            .find(|e| e["event"] == "node-finished" && e["id"] == id)
            .unwrap_or_else(|| panic!("node {id} finished: {log:?}"))["summary"]
            .clone()
    };
    // Node 1's mean is the highest of the two, and it loses decode.
    let one = finished(1);
    assert_eq!(one["served"].as_array().unwrap().len(), 3);
    assert!(one["speedup"].as_f64().unwrap() > finished(2)["speedup"].as_f64().unwrap());
    assert_eq!(one["served"][0]["name"], "decode");
    assert!(one["served"][0]["speedup"]["point"].as_f64().unwrap() < 0.95);
    assert!(
        !log.iter().any(|e| e["event"] == "final-check" && e["id"] == 1),
        "a kernel that loses a served shape never reaches the final check"
    );

    // The search's last node: node 2 at decode, node 1 at chunk and prefill, split on rows.
    let dispatch = log.iter().find(|e| e["event"] == "shape-dispatch").expect("a shape-dispatch event");
    assert_eq!(dispatch["node"], 3, "{dispatch}");
    let note = dispatch["note"].as_str().unwrap();
    assert!(note.contains("decode by node 2") && note.contains("chunk by node 1"), "{note}");
    let source = std::fs::read_to_string(run.join("nodes/0003/kernel.cu")).unwrap();
    assert!(source.contains("namespace nightshift_v0") && source.contains("namespace nightshift_v1"), "{source}");
    assert!(
        source.contains("if (a2 <= 64LL) {\n    nightshift_v0::"),
        "rows 8 and 512 split at their geometric midpoint, decode to the first variant: {source}"
    );
    let v0 = source.find("namespace nightshift_v0 {").unwrap();
    let v1 = source.find("namespace nightshift_v1 {").unwrap();
    assert!(source[v0..v1].contains("speedup=1.2"), "node 2's kernel serves decode: {source}");
    assert!(source[v1..].contains("speedup=2.0"), "node 1's the rest");
    let built = log.iter().find(|e| e["event"] == "node-built" && e["id"] == 3).expect("node 3 was built");
    assert_eq!(built["ok"], true, "the combined library builds with nvcc: {built}");
    let three = finished(3);
    assert_eq!(three["passed"], true, "{three}");

    // The dispatched kernel is the run's result: it loses no shape.
    let best = json(&run.join("best.json"));
    assert_eq!(best["node"], 3, "{best}");
    assert_eq!(best["verified"], true);
    let served = best["served"].as_array().unwrap();
    assert_eq!(served.len(), 3);
    for s in served {
        assert!(s["speedup"]["point"].as_f64().unwrap() > 1.1, "{s}");
    }
    let expected = 1.2f64.powf(0.6) * 2.0f64.powf(0.4);
    assert!((best["speedup"].as_f64().unwrap() - expected).abs() < 1e-6, "{best}");
}

#[test]
fn the_reports_show_every_served_shape_and_the_baseline_keeps_the_shape_no_kernel_improves() {
    let tmp = tempfile::tempdir().unwrap();
    let run = simulated_run(tmp.path(), &["speedup=2.0, shape.decode=0.9"]);
    let task = tmp.path().join("softmax");
    // Node 1 loses decode; the baseline's own kernel serves decode in the dispatch.
    let node = std::fs::read_to_string(run.join("nodes/0001/report.md")).unwrap();
    for want in ["| decode | rows=8 cols=4096 | 60.0% |", "(slower)", "Slower than the baseline at decode"] {
        assert!(node.contains(want), "`{want}` in:\n{node}");
    }
    let best = json(&run.join("best.json"));
    assert_eq!(best["node"], 2, "{best}");
    let source = std::fs::read_to_string(run.join("nodes/0002/kernel.cu")).unwrap();
    let baseline = std::fs::read_to_string(task.join("baseline.cu")).unwrap();
    assert!(source.contains(baseline.trim()), "the baseline's kernel is one variant");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    for want in [
        "passed, slower at decode",
        "### Served shapes",
        "| decode | rows=8 cols=4096 | 60.0% | 60.0% |",
        "Dispatch by shape: decode by node 0, chunk by node 1, prefill by node 1",
        "| served shapes | decode rows=8 cols=4096 (60% of the calls); chunk",
    ] {
        assert!(report.contains(want), "`{want}` in:\n{report}");
    }
    let table = &report[report.find("### Served shapes").unwrap()..report.find("## Certificate").unwrap()];
    assert!(!table.contains("(slower)"), "the result loses no shape: {table}");
    let show = common::building_command().arg("show").arg(&run).arg("--json").output().unwrap();
    let v: Value = serde_json::from_slice(&show.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&show.stdout)));
    let n1 = v["nodes"].as_array().unwrap().iter().find(|n| n["id"] == 1).unwrap().clone();
    assert_eq!(n1["regresses"], serde_json::json!(["decode"]), "{n1}");
    assert_eq!(v["served"].as_array().unwrap().len(), 3, "{}", v["served"]);
    let plain = common::building_command().arg("show").arg(&run).output().unwrap();
    assert!(String::from_utf8_lossy(&plain.stdout).contains("### Served shapes"));
}

#[test]
fn a_resumed_served_run_keeps_its_result_and_proposes_no_second_dispatch() {
    let tmp = tempfile::tempdir().unwrap();
    let run = simulated_run(tmp.path(), &["speedup=2.0, shape.decode=0.9", "speedup=1.2"]);
    let out = common::building_command()
        .args(["optimize", "--resume"])
        .arg(&run)
        .args(["--max-nodes", "4", "--no-final-sanitize"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some_and(|c| c <= 1), "{stderr}");
    let log = events(&run);
    let dispatched: Vec<&Value> =
        log.iter().filter(|e| e["event"] == "shape-dispatch" && !e["node"].is_null()).collect();
    assert_eq!(dispatched.len(), 1, "one dispatched node per run: {dispatched:?}");
    let combined =
        log.iter().filter(|e| e["event"] == "node-proposed" && e["technique"] == "dispatch-by-shape").count();
    assert_eq!(combined, 1, "the resume proposed no second dispatched kernel");
    // The served figures and the regression flags are rebuilt from the log: node 1 (losing
    // decode) is still not the result, the dispatched kernel still is.
    let best = json(&run.join("best.json"));
    assert_eq!((best["node"].as_u64(), best["verified"].as_bool()), (Some(3), Some(true)), "{best}");
    assert_eq!(best["served"].as_array().map(Vec::len), Some(3));
}
