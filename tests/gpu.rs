//! End-to-end checks on a real GPU (run on the device machine:
//! `bash .device/gpu-run.sh tests -- --ignored`). Each runs the nightshift binary the way a
//! user does and reads its --json verdict.

mod common;

use serde_json::Value;
use std::time::Instant;

fn eval(args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["eval"];
    all.extend_from_slice(args);
    all.push("--json");
    let (code, out, err) = common::run(&all);
    let v: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("no JSON verdict ({e}); exit {code}\nstdout: {out}\nstderr: {err}"));
    (code, v, err)
}

fn class(v: &Value) -> &str {
    v["failure"]["class"].as_str().unwrap_or("none")
}

#[test]
#[ignore = "needs a GPU"]
fn check_env_finds_every_tool() {
    let (code, out, err) = common::run(&["check-env", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    for item in v["items"].as_array().unwrap() {
        assert_eq!(item["found"], Value::Bool(true), "{item}");
    }
    assert_eq!(code, 0, "{err}");
}

#[test]
#[ignore = "needs a GPU"]
fn softmax_baseline_against_itself_is_a_wash() {
    let (code, v, err) = eval(&["tasks/softmax"]);
    assert_eq!(code, 0, "{v}\n{err}");
    let t = &v["timing"];
    let speedup = t["speedup"].as_f64().unwrap();
    assert!((0.97..=1.03).contains(&speedup), "speedup {speedup}");
    for side in ["baseline", "candidate"] {
        let cv = t[side]["cv"].as_f64().unwrap();
        assert!(cv <= 0.02, "{side} CV {cv}");
    }
    // The same library on both sides: its events account for all of its time.
    assert_eq!(t["clock_check"]["figure"], Value::String("events".into()), "{t}");
}

#[test]
#[ignore = "needs a GPU"]
fn a_faster_softmax_is_accepted_with_its_speedup_and_floor() {
    let (code, v, err) = eval(&["tasks/softmax", "tests/candidates/softmax/fast.cu"]);
    assert_eq!(code, 0, "{v}\n{err}");
    let t = &v["timing"];
    assert!(t["speedup"].as_f64().unwrap() > 1.1, "{t}");
    let pct = t["pct_of_floor"].as_f64().unwrap();
    assert!(pct > 0.0 && pct <= 100.0, "{pct}");
}

#[test]
#[ignore = "needs a GPU"]
fn planted_defects_are_rejected_with_their_class() {
    let cases = [
        ("off_by_one", "out-of-bounds-write"),
        ("skip_last_row", "unwritten-output"),
        ("writes_input", "input-mutation"),
        ("cached", "stale-output"),
        ("illegal_address", "illegal-address"),
        ("exits", "process-exit"),
        ("segfault", "crash"),
        ("wrong", "wrong-answer"),
        ("default_stream", "timing-anomaly"),
        ("no_entry", "missing-entry"),
        ("wrong_signature", "build-error"),
        ("dlopen", "forbidden-import"),
    ];
    let mut wrong = Vec::new();
    for (name, expected) in cases {
        let path = format!("tests/candidates/softmax/{name}.cu");
        let (code, v, _) = eval(&["tasks/softmax", &path, "--timeout", "30"]);
        if code != 1 || class(&v) != expected {
            wrong.push(format!(
                "{name}: exit {code}, class {} (expected {expected}): {}",
                class(&v),
                v["failure"]["message"]
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
#[ignore = "needs a GPU"]
fn an_endless_kernel_is_killed_at_the_timeout() {
    let started = Instant::now();
    let (code, v, _) = eval(&["tasks/softmax", "tests/candidates/softmax/infinite_loop.cu", "--timeout", "10"]);
    let took = started.elapsed().as_secs_f64();
    assert_eq!((code, class(&v)), (1, "timeout"), "{v}");
    assert!(took < 10.0 + 20.0, "killed promptly: {took:.1} s including builds");
}

#[test]
#[ignore = "needs a GPU"]
fn candidates_never_see_api_keys() {
    let out = std::process::Command::new(common::nightshift_bin())
        .args(["eval", "tasks/softmax", "tests/candidates/softmax/reads_secret.cu", "--no-time", "--json"])
        .env("OPENAI_API_KEY", "sk-test-secret")
        .current_dir(common::root())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "the candidate saw the key: {v}");
}

#[test]
#[ignore = "needs a GPU"]
fn sanitizer_catches_an_out_of_bounds_read_the_check_cannot_see() {
    let (code, v, _) =
        eval(&["tasks/softmax", "tests/candidates/softmax/reads_past_end.cu", "--sanitize", "--no-time"]);
    assert_eq!((code, class(&v)), (1, "sanitizer-error"), "{v}");
    let (code, v, _) = eval(&["tasks/softmax", "tests/candidates/softmax/fast.cu", "--sanitize", "--no-time"]);
    assert_eq!(code, 0, "{v}");
    let tools: Vec<&str> = v["sanitizer"].as_array().unwrap().iter().map(|r| r["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, nightshift::wall::SANITIZER_TOOLS, "{v}");
}

#[test]
#[ignore = "needs a GPU"]
fn energy_is_measured_per_call_for_both_sides() {
    let (code, v, _) = eval(&["tasks/vector_add", "tests/candidates/vector_add/vec4.cu", "--energy"]);
    assert_eq!(code, 0, "{v}");
    for side in ["baseline", "candidate"] {
        let e = &v["energy"][side];
        let j = e["joules_per_call"].as_f64().unwrap();
        let w = e["watts"].as_f64().unwrap();
        assert!(j > 0.0 && j < 1.0, "{side}: {j} J per call");
        assert!((50.0..1000.0).contains(&w), "{side}: {w} W");
        for s in e["samples"].as_array().unwrap() {
            assert!(s["counter_updates"].as_u64().unwrap() >= 10, "{s}");
        }
    }
}

#[test]
#[ignore = "needs a GPU"]
fn vector_add_phases_fit_their_budget() {
    // A fresh cache so nvcc really runs; one build first so nvcc's files are warm.
    let cache = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(common::nightshift_bin())
            .args(args)
            .env("NIGHTSHIFT_CACHE_DIR", cache.path())
            .current_dir(common::root())
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    run(&["eval", "tasks/softmax", "--no-time", "--json"]);
    let v = run(&["eval", "tasks/vector_add", "--json"]);
    let p = &v["phases"];
    let build = p["build"].as_f64().unwrap();
    let check_time = p["setup"].as_f64().unwrap() + p["check"].as_f64().unwrap() + p["time"].as_f64().unwrap();
    eprintln!("vector_add phases: {p}");
    assert!(build <= 2.0, "build {build:.2} s");
    assert!(check_time <= 3.0, "check + time {check_time:.2} s");
}

#[test]
#[ignore = "needs a GPU"]
fn diagnose_profiles_both_starter_tasks_and_the_saved_csv_agrees() {
    for (task, expect_near_roofline) in [("tasks/softmax", false), ("tasks/vector_add", true)] {
        let out = std::process::Command::new(common::nightshift_bin())
            .args(["diagnose", task, "--json", "--timings"])
            .current_dir(common::root())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(0), "{err}");
        let live: Value = serde_json::from_slice(&out.stdout).unwrap();
        let kernels = live["kernels"].as_array().unwrap();
        assert!(!kernels.is_empty(), "{err}");
        // One ncu per profile: the raw page came from the profiling ncu's own log.
        let timings = &live["timings"];
        assert!(timings["profiled-call"].is_number(), "{timings}");
        assert!(
            timings.get("export").is_none(),
            "{task}: ncu's log held no raw page, the report was read back: {timings}"
        );
        let class = kernels[0]["roofline"]["class"].as_str().unwrap();
        eprintln!("{task}: {class}: {}", kernels[0]["diagnoses"]);
        if expect_near_roofline {
            assert!(class == "at-roofline" || class == "memory-bound", "{task}: {class}");
        } else {
            assert!(
                kernels[0]["diagnoses"].as_array().unwrap().iter().any(|d| d["severity"] != "info"),
                "{task}: a real problem is named"
            );
        }
        // Offline, from the files the run saved: the same ranking.
        let csv = err
            .lines()
            .find_map(|l| l.strip_prefix("profile saved: "))
            .expect("the CSV path is printed")
            .trim()
            .to_string();
        let offline_cmd = err.lines().find(|l| l.contains("offline: nightshift diagnose")).unwrap();
        let sass = offline_cmd.split(" --sass ").nth(1).map(|s| s.split_whitespace().next().unwrap().to_string());
        let ptxas = offline_cmd.split(" --ptxas ").nth(1).unwrap().trim_end_matches(')').trim().to_string();
        let mut args = vec![
            "diagnose".to_string(),
            task.to_string(),
            "--ncu".into(),
            csv,
            "--ptxas".into(),
            ptxas,
            "--json".into(),
        ];
        if let Some(s) = sass {
            args.extend(["--sass".into(), s]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = common::run(&args);
        assert_eq!(code, 0, "{err}");
        let offline: Value = serde_json::from_str(&out).unwrap();
        let tools = |v: &Value| {
            v["kernels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k["diagnoses"].as_array().unwrap().iter().map(|d| d["tool"].clone()).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        };
        assert_eq!(tools(&live), tools(&offline), "{task}: live and offline rankings agree");
    }
}

#[test]
#[ignore = "needs a GPU"]
fn every_task_baseline_passes_its_own_check_with_stable_timing() {
    let dirs = nightshift::task::discover(&common::root().join("tasks")).unwrap();
    let mut rows = vec![
        "| task | bench size | baseline (ms) | CV | floor (ms) | % of floor | GPU |".to_string(),
        "| --- | --- | --- | --- | --- | --- | --- |".to_string(),
    ];
    let mut problems = Vec::new();
    for dir in dirs {
        let rel = format!("tasks/{}", dir.file_name().unwrap().to_str().unwrap());
        let (code, v, err) = eval(&[&rel]);
        if code != 0 {
            problems.push(format!("{rel}: exit {code}: {} {err}", v["failure"]));
            continue;
        }
        let t = &v["timing"];
        let cv = t["baseline"]["cv"].as_f64().unwrap().max(t["candidate"]["cv"].as_f64().unwrap());
        if cv > 0.02 {
            problems.push(format!("{rel}: CV {:.2}%", 100.0 * cv));
        }
        rows.push(format!(
            "| {} | {} | {:.4} | {:.2}% | {} | {} | {} |",
            v["task"].as_str().unwrap(),
            t["size"].as_str().unwrap(),
            t["baseline"]["median_ms"].as_f64().unwrap(),
            100.0 * cv,
            t["floor_ms"].as_f64().map(|f| format!("{f:.4}")).unwrap_or("-".into()),
            t["baseline_pct_of_floor"].as_f64().map(|p| format!("{p:.1}%")).unwrap_or("-".into()),
            v["device"]["name"].as_str().unwrap_or("?")
        ));
    }
    eprintln!("{}", rows.join("\n"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
#[ignore = "needs a GPU"]
fn gemm_f32_diagnosis_respects_the_tolerance_and_3xtf32_is_timed_not_rejected() {
    let out = std::process::Command::new(common::nightshift_bin())
        .args(["diagnose", "tasks/gemm_f32", "--json"])
        .current_dir(common::root())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let diagnoses = v["kernels"][0]["diagnoses"].as_array().unwrap().clone();
    eprintln!("gemm_f32 baseline: {}", serde_json::to_string_pretty(&diagnoses).unwrap());
    for d in &diagnoses {
        let p = d["prescription"].as_str().unwrap();
        assert!(!p.contains("Use TF32 tensor cores"), "plain TF32 prescribed: {p}");
    }
    if let Some(t) = diagnoses.iter().find(|d| d["tool"] == "no-tensor-cores") {
        assert!(t["prescription"].as_str().unwrap().contains("3xTF32"), "{t}");
    }

    // 3xTF32 keeps fp32 accuracy and may beat the FP32 FMA peak: the floor must allow it.
    let (code, v, err) = eval(&["tasks/gemm_f32", "tests/candidates/gemm_f32/three_tf32.cu"]);
    eprintln!("3xTF32: {}", v["timing"]);
    assert_eq!(code, 0, "{v}\n{err}");
    assert!(v["timing"]["speedup"].as_f64().unwrap() > 1.0);
    // Plain TF32 is what the tolerance refuses.
    let (code, v, _) = eval(&["tasks/gemm_f32", "tests/candidates/gemm_f32/plain_tf32.cu"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(class(&v), "wrong-answer");
}

#[test]
#[ignore = "needs a GPU"]
fn every_served_shape_is_timed_with_its_own_interval() {
    // softmax with a decode shape (8 rows, 80% of the calls) and the bench size (20%).
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("softmax");
    common::copy_dir(&common::root().join("tasks/softmax"), &task);
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    let toml = toml.replacen(
        "[sizes]\n",
        "[sizes]\nserve = [{ name = \"decode\", rows = 8, weight = 0.8 }, { name = \"prefill\", weight = 0.2 }]\n",
        1,
    );
    std::fs::write(task.join("task.toml"), toml).unwrap();
    let fast = common::root().join("tests/candidates/softmax/fast.cu");
    let (code, v, err) = eval(&[task.to_str().unwrap(), fast.to_str().unwrap()]);
    assert_eq!(code, 0, "{v}\n{err}");
    let served = v["served"].as_array().expect("a served table");
    assert_eq!(served.len(), 2, "{v}");
    assert_eq!(served[0]["size"], "rows=8 cols=4096");
    for s in served {
        let sp = &s["speedup"];
        let (low, point, high) =
            (sp["low"].as_f64().unwrap(), sp["point"].as_f64().unwrap(), sp["high"].as_f64().unwrap());
        assert!(low <= point && point <= high && low > 0.0, "{s}");
        assert!(s["baseline_ms"].as_f64().unwrap() > 0.0 && s["candidate_ms"].as_f64().unwrap() > 0.0, "{s}");
    }
    // The verdict's speedup is the mean of the shapes' weighted by their share of time.
    let mean: f64 = served
        .iter()
        .map(|s| s["time_share"].as_f64().unwrap() * s["speedup"]["point"].as_f64().unwrap().ln())
        .sum::<f64>()
        .exp();
    assert!((v["speedup"]["point"].as_f64().unwrap() - mean).abs() < 1e-9, "{v}");
    let decode_share = served[0]["time_share"].as_f64().unwrap();
    assert!(decode_share < 0.8, "8 rows take less time than 8192: {decode_share}");
}

/// `row-strip`'s 4 columns a thread on the stencil example agree with the reference at
/// every check size, and the sanitizers find nothing where whole strips run: a copy of
/// the task whose only check sizes are an odd width (rows not 16-byte aligned, the edge
/// path and the one-load-each fallback) and a width of 64 (every row aligned, the wide
/// loads and stores), since `--sanitize` runs the smallest check size.
#[test]
#[ignore = "needs a GPU"]
fn row_strips_on_the_stencil_example_agree_inside_and_at_the_edges_and_pass_the_sanitizers() {
    let example = common::root().join("examples/stencil2d_3x3");
    let task = nightshift::task::Task::load(&example).unwrap();
    let facts = nightshift::task::facts::rewrite_facts(&task);
    let baseline = std::fs::read_to_string(&task.baseline).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Strips inside the image (their taps' tests known), whole strips at the edges and
    // the edges' plain loop, at one column a thread and at four.
    for (rows, cols) in [("8", "1"), ("8", "4"), ("16", "4")] {
        let chain = ["index-width", &format!("row-strip:rows={rows},cols={cols}"), "register-table", "read-only"];
        let source = common::apply_path(&baseline, &chain, &facts);
        assert!(source.contains("if (ns_inside) {") && source.contains("} else if (ns_whole) {"), "{source}");
        if cols == "4" {
            assert!(source.contains("ns_store16(") && source.contains("float4"), "{source}");
        }
        let rows = format!("{rows}x{cols}");
        let cu = dir.path().join(format!("strip-{rows}.cu"));
        std::fs::write(&cu, &source).unwrap();
        let cu = cu.display().to_string();
        let (code, v, err) = eval(&[example.to_str().unwrap(), &cu, "--no-time"]);
        assert_eq!(code, 0, "rows={rows}: {v}\n{err}");
        let toml = std::fs::read_to_string(example.join("task.toml")).unwrap();
        let (head, rest) = toml.split_once("check = [").unwrap();
        let (_, tail) = rest.split_once(']').unwrap();
        for (n, sizes) in ["{ N = 2, H = 19, W = 37 }", "{ N = 1, H = 16, W = 64 }"].iter().enumerate() {
            let copy = dir.path().join(format!("task-rows{rows}-{n}"));
            std::fs::create_dir_all(&copy).unwrap();
            for f in ["baseline.cu", "reference.cu"] {
                std::fs::copy(example.join(f), copy.join(f)).unwrap();
            }
            std::fs::write(copy.join("task.toml"), format!("{head}check = [{sizes}]{tail}")).unwrap();
            let (code, v, err) = eval(&[copy.to_str().unwrap(), &cu, "--sanitize", "--no-time"]);
            assert_eq!(code, 0, "rows={rows} at {sizes}: {v}\n{err}");
        }
    }
}

/// `tensor-tile` and `prefetch` (also four elements a load), alone and chained both ways,
/// pass the wall on the GPU: the split-K linear layer at three tile sizes (split K and not,
/// rows padded for the banks and not) and the tiled GEMM at both tiles, all check sizes,
/// then the sanitizers on four. The speed is for the bench command (`scripts/vs-torch.py`),
/// not this test.
#[test]
#[ignore = "needs a GPU"]
fn tensor_tiles_and_prefetch_pass_the_wall_and_the_sanitizers() {
    let dir = tempfile::tempdir().unwrap();
    // (task, chains of applications, knob settings each is evaluated at); the sanitizers
    // run at the last setting of the chains marked `true`.
    type Case<'a> = (&'a str, &'a [(&'a [&'a str], bool)], &'a [&'a [&'a str]]);
    let cases: [Case; 2] = [
        (
            "examples/linear_splitk_f32",
            &[
                (&["tensor-tile"], true),
                (&["tensor-tile:pad=keep"], false),
                (&["tensor-tile", "prefetch:width=1"], true),
                (&["prefetch:width=1"], false),
                (&["tensor-tile", "prefetch:width=4"], true),
                (&["prefetch:width=4"], false),
            ],
            &[
                &[],
                &["-D", "BN=128", "-D", "BT=64", "-D", "SPLIT_K=1"],
                &["-D", "BN=64", "-D", "BT=32", "-D", "SPLIT_K=2"],
            ],
        ),
        (
            "tasks/gemm_f32",
            &[(&["tensor-tile"], false), (&["prefetch:width=1", "tensor-tile"], true)],
            &[&[], &["-D", "TILE=32"]],
        ),
    ];
    for (task_dir, chains, knobs) in cases {
        let root = common::root().join(task_dir);
        let task = nightshift::task::Task::load(&root).unwrap();
        let facts = nightshift::task::facts::rewrite_facts(&task);
        let baseline = std::fs::read_to_string(&task.baseline).unwrap();
        for (i, (chain, sanitize)) in chains.iter().enumerate() {
            let source = common::apply_path(&baseline, chain, &facts);
            let cu = dir.path().join(format!("{}-{i}.cu", task.name));
            std::fs::write(&cu, &source).unwrap();
            let cu = cu.display().to_string();
            for (j, d) in knobs.iter().enumerate() {
                let mut args = vec![root.to_str().unwrap(), cu.as_str(), "--no-time"];
                args.extend_from_slice(d);
                if *sanitize && j + 1 == knobs.len() {
                    args.push("--sanitize");
                }
                let (code, v, err) = eval(&args);
                assert_eq!(code, 0, "{chain:?} {d:?}: {v}\n{err}");
            }
        }
    }
}
