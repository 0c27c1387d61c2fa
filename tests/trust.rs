//! A result you can trust and a run you cannot lose, on the real binary: noise is not a
//! win, the final check confirms or declines, a broken environment costs nothing already
//! earned, and a run that cannot start leaves nothing behind. Runs use the test-only
//! simulated evaluator (real builds, real workers, outcomes from markers in the source);
//! the no-GPU cases run for real on a machine without one and skip where a GPU is.

mod common;

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

fn nightshift() -> std::process::Command {
    common::building_command()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A replay folder whose replies are these simulated kernels, in order.
fn replies(dir: &Path, markers: &[&str]) -> PathBuf {
    let folder = dir.join("replies");
    std::fs::create_dir_all(&folder).unwrap();
    for (i, m) in markers.iter().enumerate() {
        std::fs::write(folder.join(format!("{:02}.cu", i + 1)), common::sim_kernel(m, "")).unwrap();
    }
    folder
}

/// A simulated softmax run over the given replies.
fn optimize(tmp: &Path, markers: &[&str], max_nodes: usize) -> (Output, PathBuf) {
    let folder = replies(tmp, markers);
    let run = tmp.join("run");
    let out = nightshift()
        .args(["optimize", "tasks/softmax", "--simulate-gpu", "5", "--no-final-sanitize", "--max-nodes"])
        .arg(max_nodes.to_string())
        .arg("--generator")
        .arg(format!("replay:{}", folder.display()))
        .arg("--out")
        .arg(&run)
        .output()
        .unwrap();
    (out, run)
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// Every file under `dir` and its hash.
fn hashes(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let digest = Sha256::digest(std::fs::read(&p).unwrap());
                out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), format!("{digest:x}"));
            }
        }
    }
    out
}

fn gpu_here() -> bool {
    let gpu = nightshift::wall::gpu::driver_present();
    if gpu {
        eprintln!("skipped: this machine has a CUDA driver; the case is about a machine without one");
    }
    gpu
}

#[test]
fn a_point_estimate_inside_the_noise_is_no_faster_kernel() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, run) = optimize(tmp.path(), &["speedup=1.004, cv=0.02"], 1);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("no faster kernel found"), "{stdout}");
    assert!(stdout.contains("clears 1.010x"), "the run prints its bar: {stdout}");
    let best = json(&run.join("best.json"));
    assert_eq!(best["node"], 0);
    assert_eq!(best["verified"], false);
    assert!(!run.join("best.cu").exists(), "no kernel is handed over");
    let summary = json(&run.join("summary.json"));
    assert_eq!(summary["best"]["verified"], false);
    assert_eq!(summary["best"]["speedup"], 1.0);
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("## No faster kernel"), "{report}");
}

#[test]
fn a_clear_win_prints_one_interval_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, run) = optimize(tmp.path(), &["speedup=1.20, cv=0.01"], 1);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", text(&out.stderr));
    let best = json(&run.join("best.json"));
    let (low, high) = (best["speedup_low"].as_f64().unwrap(), best["speedup_high"].as_f64().unwrap());
    assert!(low > 1.01 && low < 1.2 && high > 1.2, "[{low}, {high}]");
    let shown = format!("1.200x [{low:.3}, {high:.3}]");
    assert!(stdout.contains(&format!("best {shown} over the baseline")), "{stdout}");
    assert!(run.join("best.cu").is_file());
    // summary.json, the report, `show` and --json read the same verdict.
    let summary = json(&run.join("summary.json"));
    for key in ["node", "speedup", "speedup_low", "speedup_high", "ms", "baseline_ms"] {
        assert_eq!(summary["best"][key], best[key], "summary.json and best.json differ on {key}");
    }
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains(&format!("## Best: node 1, {shown} the baseline (re-verified)")), "{report}");
    assert!(report.contains(&format!("{shown} |")), "the certificate's row: {report}");
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains(&shown), "the HTML headline");
    let show = nightshift().arg("show").arg(&run).output().unwrap();
    assert!(text(&show.stdout).contains(&shown), "{}", text(&show.stdout));
    assert!(!report.contains("Still running") && !report.contains("Stopped before"), "{report}");
}

#[test]
fn an_environment_failure_in_the_final_check_keeps_the_earlier_result() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, run) = optimize(tmp.path(), &["speedup=1.5", "speedup=2.0, final=env-error"], 1);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let kept = ["best.cu", "best.json", "summary.json"];
    let before: Vec<Vec<u8>> = kept.iter().map(|f| std::fs::read(run.join(f)).unwrap()).collect();

    // A second session judges a faster kernel; the GPU is gone by its final check.
    let out = nightshift().args(["optimize", "--max-nodes", "2", "--resume"]).arg(&run).output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "an environment error: {stderr}");
    assert!(stderr.contains("not a kernel") && stderr.contains("--resume"), "{stderr}");
    for (f, bytes) in kept.iter().zip(&before) {
        assert_eq!(&std::fs::read(run.join(f)).unwrap(), bytes, "{f} changed");
    }
    assert_eq!(json(&run.join("best.json"))["node"], 1);
    // The report still leads with the confirmed kernel and says what waits.
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("## Best: node 1, 1.500x ["), "{report}");
    assert!(report.contains("(re-verified)") && report.contains("not yet re-verified: node 2 at 2.000x"), "{report}");
    assert!(report.contains("Stopped before it finished"), "{report}");
    let node2 = json(&run.join("nodes/0002/verdict.json"));
    assert_eq!(node2["status"], "passed", "the faster kernel itself was judged and kept");
}

#[test]
fn resuming_a_finished_run_without_a_gpu_changes_nothing() {
    if gpu_here() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for name in ["softmax-tune", "softmax-replay"] {
        let run = tmp.path().join(name);
        common::copy_dir(&common::root().join("tests/runs").join(name), &run);
        // The runs were made elsewhere: point them at this checkout's task.
        let mut config = json(&run.join("run.json"));
        config["config"]["task_dir"] = Value::String(common::path("tasks/softmax"));
        std::fs::write(run.join("run.json"), serde_json::to_vec_pretty(&config).unwrap()).unwrap();
        let before = hashes(&run);

        let out = nightshift().args(["optimize", "--budget", "10s", "--resume"]).arg(&run).output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{name}: {stderr}");
        assert!(stderr.contains("GPU") || stderr.contains("driver"), "{name}: {stderr}");
        assert_eq!(hashes(&run), before, "{name}: a file was added, removed or changed");
    }
}

#[test]
fn a_run_that_cannot_start_leaves_no_directory() {
    let tmp = tempfile::tempdir().unwrap();
    // No GPU: refused before anything is created.
    if !gpu_here() {
        let run = tmp.path().join("no-gpu");
        let out =
            nightshift().args(["optimize", "tasks/softmax", "--arch", "sm_90a", "--out"]).arg(&run).output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
        assert!(!run.exists(), "a run that never started left {}", run.display());
    }
    // A baseline that does not build fails after the directory exists: it goes again.
    let task = tmp.path().join("task");
    common::copy_dir(&common::root().join("tasks/softmax"), &task);
    let baseline = task.join("baseline.cu");
    let source = std::fs::read_to_string(&baseline).unwrap();
    std::fs::write(&baseline, format!("{source}\nthis is not CUDA;\n")).unwrap();
    let run = tmp.path().join("broken-baseline");
    let out = nightshift().args(["optimize", "--simulate-gpu", "5", "--out"]).arg(&run).arg(&task).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(!run.exists(), "a half-made run was left: {}", text(&out.stderr));
    // A folder the user made stays, empty.
    let named = tmp.path().join("named");
    std::fs::create_dir(&named).unwrap();
    let out = nightshift().args(["optimize", "--simulate-gpu", "5", "--out"]).arg(&named).arg(&task).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_dir(&named).unwrap().count(), 0, "{}", text(&out.stderr));
}
