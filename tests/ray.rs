//! Lanes on a Ray cluster, on the CI machine: a head and two worker nodes with one fake
//! GPU each (`tests/ray/cluster.py`), the simulated evaluator, real builds and real
//! `nightshift lane-job` processes started by Ray actors. Needs Ray: `.ci/run` installs
//! `ray[default]==2.60.0` into `.ray/` (or set NIGHTSHIFT_RAY_PYTHON).

mod common;

use common::events;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One cluster at a time: three raylets are most of a CI machine.
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

fn ray_python() -> PathBuf {
    if let Some(p) = std::env::var_os("NIGHTSHIFT_RAY_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = common::root().join(".ray/bin/python");
    assert!(
        venv.exists(),
        "these tests start a local Ray cluster: run .ci/run once (it installs ray[default]==2.60.0 into .ray/), or set NIGHTSHIFT_RAY_PYTHON"
    );
    venv
}

struct Cluster {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    address: String,
}

impl Cluster {
    fn start() -> Cluster {
        common::require_toolchain();
        let mut child = Command::new(ray_python())
            .arg(common::root().join("tests/ray/cluster.py"))
            .current_dir(common::root())
            // Ray's workers inherit this environment: the lanes build with the wheel
            // toolkit into the tests' shared cache.
            .env("NIGHTSHIFT_CACHE_DIR", common::test_cache())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the Ray cluster script starts");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).expect("the cluster's address");
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("no cluster address ({e}): {line:?}"));
        let address = v["address"].as_str().expect("an address").to_string();
        Cluster { child, stdin, stdout, address }
    }

    /// Removes worker `k` at once: its raylet and every process on it die.
    fn kill_worker(&mut self, k: usize) {
        writeln!(self.stdin, "kill {k}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(line.contains("killed"), "{line}");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "stop");
        let _ = self.stdin.flush();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ids(events: &[Value], kind: &str) -> Vec<u64> {
    events.iter().filter(|e| e["event"] == kind).filter_map(|e| e["id"].as_u64()).collect()
}

/// Each verdict's "judged on ... (Ray lane K, node N)" note: node id, and whether it
/// says the job was sent again.
fn judged_on(run: &Path) -> BTreeMap<String, (String, bool)> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(run.join("nodes")).unwrap().flatten() {
        for file in ["verdict.json", "final_verdict.json"] {
            let Ok(text) = std::fs::read_to_string(entry.path().join(file)) else { continue };
            let v: Value = serde_json::from_str(&text).unwrap();
            assert!(v.get("status").is_some(), "{}/{file} is no verdict: {text}", entry.path().display());
            let note =
                v["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).find(|n| n.starts_with("judged on"));
            // A kernel that does not compile here never goes to a lane; every judged one says where.
            let Some(note) = note else {
                assert_ne!(v["status"], "passed", "{}/{file} does not say where it was judged", entry.path().display());
                continue;
            };
            let node = note.split(", node ").nth(1).unwrap().split(')').next().unwrap().to_string();
            out.insert(
                format!("{}/{file}", entry.file_name().to_string_lossy()),
                (node, note.contains("sent 2 times")),
            );
        }
    }
    out
}

/// Each job a lane answered, from `ray.jsonl`: the Ray node it ran on and its kind.
fn jobs_done(run: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(run.join("ray.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "job-done")
        .map(|e| (e["node"].as_str().unwrap_or("").to_string(), e["kind"]["kind"].as_str().unwrap_or("").to_string()))
        .collect()
}

#[test]
fn a_run_keeps_both_workers_busy_and_survives_losing_one() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let mut cluster = Cluster::start();
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let python = ray_python();
    let mut child = common::building_command()
        .args(["optimize", "tasks/softmax", "--simulate-gpu", "300", "--max-nodes", "10", "--json"])
        .args(["--ray", &cluster.address, "--ray-python"])
        .arg(&python)
        .arg("--out")
        .arg(&run)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Worker 0 goes once two nodes are judged, with the rest of the run still to come (ten
    // nodes: a lane whose host caches the builds judges six before a kill takes effect).
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut before_kill = BTreeMap::new();
    let mut workers_before = BTreeSet::new();
    loop {
        if ids(&events(&run), "node-finished").len() >= 2 {
            before_kill = judged_on(&run);
            workers_before = jobs_done(&run).into_iter().map(|(node, _)| node).collect();
            cluster.kill_worker(0);
            break;
        }
        assert!(Instant::now() < deadline, "the run never got going");
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!before_kill.is_empty(), "the run ended before a worker could be killed: {stderr}");
    // A normal end: with or without a faster kernel, and its summary.
    assert!(matches!(out.status.code(), Some(0) | Some(1)), "exit {:?}\n{stderr}", out.status.code());
    let summary: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("no summary ({e}): {stdout}\n{stderr}"));
    assert_eq!(summary["judged"], 10, "{summary}");

    // Both workers had jobs (judgments, profiles) before one was lost, and both lanes
    // were busy over the run.
    assert_eq!(workers_before.len(), 2, "the lanes sat on one worker: {workers_before:?}");
    for lane in summary["gpus"].as_array().unwrap() {
        assert!(lane["jobs"].as_u64().unwrap() > 0 && lane["busy_s"].as_f64().unwrap() > 0.0, "an idle lane: {lane}");
    }

    // Nothing lost, nothing judged twice: every node started once and finished once.
    let ev = events(&run);
    let started = ids(&ev, "node-started");
    let finished = ids(&ev, "node-finished");
    assert_eq!(started.len(), 10, "{started:?}");
    assert_eq!(finished.iter().collect::<BTreeSet<_>>().len(), finished.len(), "a node finished twice: {finished:?}");
    assert_eq!(finished.iter().collect::<BTreeSet<_>>(), started.iter().collect::<BTreeSet<_>>());
    assert!(ev.iter().any(|e| e["event"] == "run-finished"), "the run did not finish");

    // Each node's report says where it was judged.
    let report = std::fs::read_to_string(run.join("nodes/0001/report.md")).unwrap();
    assert!(report.contains("· judged on ") && report.contains("(Ray lane "), "{report}");

    // The lost worker's job ran again elsewhere, and everything after ran on the survivor.
    let ray_log = std::fs::read_to_string(run.join("ray.jsonl")).unwrap_or_default();
    assert!(ray_log.contains("\"lane-lost\""), "no lost lane in ray.jsonl: {ray_log}");
    let after = judged_on(&run);
    let lost_node = ray_log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "lane-lost")
        .and_then(|e| e["where"]["node"].as_str().map(String::from))
        .expect("ray.jsonl names the node it lost");
    assert!(workers_before.contains(&lost_node), "{lost_node} is not a worker that had jobs");
    let later: Vec<&(String, bool)> =
        after.iter().filter(|(k, _)| !before_kill.contains_key(*k)).map(|(_, v)| v).collect();
    assert!(!later.is_empty());
    // Once the bridge has seen the node go, no job is answered from it. (A verdict written
    // after the kill may still come from there: a job it finished just before it went.)
    let since_lost: Vec<&str> = ray_log.lines().skip_while(|l| !l.contains("\"lane-lost\"")).collect();
    assert!(
        since_lost.iter().all(|l| !(l.contains("\"job-done\"") && l.contains(&lost_node))),
        "a job ran on the lost node after it was gone: {after:?}\n{ray_log}"
    );
    assert!(later.iter().any(|(n, _)| *n != lost_node), "nothing was judged on the survivor: {after:?}");
    // Jobs keep going to lane 0 after its worker is gone (lanes take jobs in turn), so at
    // least one was lost with it and answered once, by the survivor, on its second send.
    assert!(ray_log.contains("\"job-requeued\""), "no job was sent again: {ray_log}");
    let resent: Vec<&str> =
        ray_log.lines().filter(|l| l.contains("\"job-done\"") && l.contains("\"tries\":2")).collect();
    assert!(!resent.is_empty() && resent.iter().all(|l| !l.contains(&lost_node)), "{ray_log}");
    let resent_verdicts = later.iter().filter(|(_, again)| *again).count();
    let resent_judgments = resent.iter().filter(|l| !l.contains("\"profile\"")).count();
    assert_eq!(resent_verdicts, resent_judgments, "a resent judgment's verdict does not say so: {after:?}");
}

#[test]
fn optimize_all_runs_three_tasks_on_the_cluster_and_writes_one_summary() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start();
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("all");
    let out = common::building_command()
        .args(["optimize-all", "tasks/softmax", "tasks/rmsnorm", "tasks/vector_add"])
        .args(["--simulate-gpu", "50", "--max-nodes", "2", "--json", "--ray", &cluster.address, "--ray-python"])
        .arg(ray_python())
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let runs: Value = serde_json::from_str(&stdout).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let summary = std::fs::read_to_string(out_dir.join("summary.md")).unwrap();
    for task in ["softmax", "rmsnorm", "vector_add"] {
        let run = out_dir.join(task);
        assert!(run.join("report.html").exists() && run.join("events.jsonl").exists(), "{task}: no run came back");
        assert!(summary.contains(&format!("[md]({task}/report.md)")), "{task} is not linked: {summary}");
        let r = runs.iter().find(|r| r["task"] == task).unwrap();
        assert_eq!(r["summary"]["judged"], 2, "{r}");
        assert!(r["where"]["node"].as_str().is_some_and(|n| !n.is_empty()), "{r}");
    }
}
