//! The command line as users and scripts see it: JSON contracts, exit codes, messages.

mod common;

use serde_json::Value;

#[test]
fn diagnose_json_follows_the_contract() {
    let f = |p: &str| common::path(&format!("tests/fixtures/{p}"));
    let (code, out, err) = common::run(&[
        "diagnose",
        "--ncu",
        &f("h200/ncu_full_raw_all.csv"),
        "--sass",
        &f("generated/probe_nvdisasm_lines.txt"),
        "--ptxas",
        &f("h200/ptxas_verbose.txt"),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let kernels = v["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 13);
    for k in kernels {
        assert!(k["name"].is_string());
        assert!(k["roofline"]["class"].is_string());
        for d in k["diagnoses"].as_array().unwrap() {
            assert!(d["tool"].is_string());
            assert!(["high", "medium", "low", "info"].contains(&d["severity"].as_str().unwrap()), "{d}");
            assert!(d["score"].is_f64());
            assert!(d["evidence"].is_object());
            assert!(d["analysis"].is_string() && d["prescription"].is_string());
            assert!(d["location"].is_null() || d["location"].as_str().unwrap().contains(".cu:"), "{d}");
        }
    }
    let fp64 = kernels.iter().find(|k| k["name"] == "fp64_accident").unwrap();
    assert_eq!(fp64["diagnoses"][0]["tool"], "fp64-in-fp32");
    assert_eq!(fp64["diagnoses"][0]["location"], "probe_kernels.cu:49");
}

#[test]
fn diagnose_without_a_profile_or_task_is_a_usage_error() {
    let (code, _, err) = common::run(&["diagnose"]);
    assert_eq!(code, 2);
    assert!(err.contains("--ncu RAW.csv"), "{err}");
    let (code, _, err) = common::run(&["diagnose", "--ncu", "/nonexistent.csv"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent.csv"), "{err}");
    let junk = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(junk.path(), "not a profile\n").unwrap();
    let (code, _, err) = common::run(&["diagnose", "--ncu", junk.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("--csv --page raw"), "{err}");
}

#[test]
fn diagnose_timings_name_each_offline_step() {
    let f = |p: &str| common::path(&format!("tests/fixtures/{p}"));
    let (csv, sass, ptxas) =
        (f("h200/ncu_full_raw_all.csv"), f("generated/probe_nvdisasm_lines.txt"), f("h200/ptxas_verbose.txt"));
    let offline = ["diagnose", "--ncu", &csv, "--sass", &sass, "--ptxas", &ptxas];
    let steps = ["csv-read", "csv-parse", "sass", "ptxas", "diagnose", "total"];

    // People: the report on stdout, the steps on stderr.
    let (code, out, err) = common::run(&[&offline[..], &["--timings"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fp64_accident") && !out.contains("timings"), "{out}");
    assert!(err.contains("timings:"), "{err}");
    for step in steps {
        assert!(err.lines().any(|l| l.trim_start().starts_with(step) && l.trim_end().ends_with(" s")), "{step}: {err}");
    }

    // Scripts: a `timings` object beside the kernels, its steps in seconds.
    let (code, out, err) = common::run(&[&offline[..], &["--timings", "--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kernels"].as_array().unwrap().len(), 13);
    let timings = v["timings"].as_object().unwrap();
    assert_eq!(timings.keys().map(String::as_str).collect::<std::collections::BTreeSet<_>>(), steps.into());
    assert!(timings.values().all(|s| s.as_f64().is_some_and(|s| s >= 0.0)), "{timings:?}");
    let sum: f64 = steps[..5].iter().map(|s| timings[*s].as_f64().unwrap()).sum();
    assert!((sum - timings["total"].as_f64().unwrap()).abs() < 1e-5, "{timings:?}");

    // Without the flag the contract is as it was.
    let (_, out, _) = common::run(&[&offline[..], &["--json"]].concat());
    assert!(serde_json::from_str::<Value>(&out).unwrap().get("timings").is_none());
}

#[test]
fn diagnose_full_is_for_profiling_a_task() {
    let (code, _, err) = common::run(&["diagnose", "--full"]);
    assert_eq!(code, 2);
    assert!(err.contains("give a TASK_DIR"), "{err}");
    let csv = common::path("tests/fixtures/h200/ncu_full_raw_all.csv");
    let (code, out, err) = common::run(&["diagnose", "--ncu", &csv, "--full"]);
    assert_eq!(code, 2, "a saved profile is not profiled again: {out}");
    assert!(err.contains("--full") && err.contains("saved --ncu CSV"), "{err}");
    if nightshift::wall::gpu::driver_present() {
        return;
    }
    // With a task but no GPU (nor ncu), an environment error, not a usage one.
    let (code, _, err) = common::run(&["diagnose", "tasks/vector_add", "--full"]);
    assert_eq!(code, 3, "{err}");
}

#[test]
fn check_env_says_what_is_missing_without_a_gpu() {
    let (code, out, _) = common::run(&["check-env", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let gpu = v["items"].as_array().unwrap().iter().find(|i| i["name"] == "gpu").unwrap().clone();
    if nightshift::wall::gpu::driver_present() {
        assert_eq!(gpu["found"], true);
    } else {
        assert_eq!(code, 3, "no GPU: exit 3");
        assert_eq!(gpu["found"], false);
        assert!(gpu["hint"].as_str().unwrap().contains("libcuda"), "{gpu}");
        let (code, out, _) = common::run(&["check-env"]);
        assert_eq!(code, 3);
        assert!(out.contains("MISSING"), "{out}");
    }
}

#[test]
fn eval_without_a_gpu_exits_3_after_building() {
    if nightshift::wall::gpu::driver_present() {
        return;
    }
    common::require_toolchain();
    let (code, _, err) = common::run(&["eval", "tasks/vector_add", "--arch", "sm_90a"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no CUDA driver"), "{err}");
    let (code, _, err) = common::run(&["eval", "tasks/vector_add"]);
    assert_eq!(code, 3, "{err}");
}

#[test]
fn eval_rejects_a_broken_build_with_exit_1_even_without_a_gpu() {
    common::require_toolchain();
    let (code, out, _) = common::run(&[
        "eval",
        "tasks/softmax",
        "tests/candidates/softmax/wrong_signature.cu",
        "--arch",
        "sm_90a",
        "--json",
    ]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["failure"]["class"], "build-error");
    assert!(v["phases"]["build"].as_f64().unwrap() > 0.0);
}

#[test]
fn tasks_and_validate() {
    let (code, out, _) = common::run(&["tasks", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = v["tasks"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"softmax") && names.contains(&"vector_add"), "{names:?}");
    let (code, out, _) = common::run(&["tasks"]);
    assert_eq!(code, 0);
    assert!(out.contains("Row-wise softmax"), "{out}");

    let (code, out, _) = common::run(&["validate", "tasks/softmax"]);
    assert_eq!(code, 0);
    assert!(out.ends_with("valid\n"), "{out}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("task.toml"), "[task]\nname = \"t\"\nentry = \"bad name\"\nbaseline = \"b.cu\"\n[sizes]\nbench = { n = 1 }\ncheck = [{ n = 1 }]\n").unwrap();
    let (code, _, err) = common::run(&["validate", dir.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("task.toml:3: task.entry: `bad name` is not a C identifier"), "{err}");
}

#[test]
fn bad_usage_exits_2() {
    assert_eq!(common::run(&["eval"]).0, 2);
    assert_eq!(common::run(&["frobnicate"]).0, 2);
    assert_eq!(common::run(&["eval", "tasks/softmax", "no_such.cu"]).0, 2);
    assert_eq!(common::run(&["eval", "tasks/softmax", "-D", "NOEQUALS"]).0, 2);
    assert_eq!(common::run(&["eval", "tasks/softmax", "--arch", "sm90"]).0, 2);
}

#[test]
fn budget_errors_are_one_message_that_lists_the_forms() {
    let optimize = |budget: &str| common::run(&["optimize", "tasks/softmax", "--simulate-gpu", "--budget", budget]);
    // Each malformed budget gets the same explanation, naming the flag and the forms.
    for malformed in ["soon", "10", "10ms", "5 parsecs"] {
        let (code, _, err) = optimize(malformed);
        assert_eq!(code, 2, "{malformed}: {err}");
        let expected = format!(
            "error: invalid value '{malformed}' for '--budget <DURATION>': a budget is a number and a unit, \
             s (seconds), m (minutes), h (hours) or d (days), whole or decimal, or several in a row: \
             90s, 10m, 1.5h, 8h, 1h30m\n"
        );
        assert!(err.starts_with(&expected), "{malformed}: {err}");
        // humantime's own wording once contradicted ours.
        for foreign in ["10sec", "expected e.g."] {
            assert!(!err.contains(foreign), "{malformed}: {err}");
        }
    }
    // A negative budget reaches the parser (it is not taken for a flag `-5`).
    for not_positive in ["-5m", "0s", "0h0m"] {
        let (code, _, err) = optimize(not_positive);
        assert_eq!(code, 2, "{not_positive}: {err}");
        assert!(err.contains("the budget must be positive"), "{not_positive}: {err}");
        assert!(!err.contains("unexpected argument"), "{not_positive}: {err}");
    }
    let (code, _, err) = common::run(&["optimize", "tasks/softmax", "--simulate-gpu", "--budget=-5m"]);
    assert_eq!(code, 2);
    assert!(err.contains("the budget must be positive"), "{err}");
}

#[test]
fn the_help_shows_a_line_for_every_argument() {
    // The exhaustive walk over clap's definition is a unit test (src/cli); this is what a
    // user sees: positional arguments and --json explained.
    let (code, out, _) = common::run(&["report", "--help"]);
    assert_eq!(code, 0);
    let line = |start: &str| out.lines().find(|l| l.trim_start().starts_with(start)).unwrap_or_default().to_string();
    assert!(line("<RUN_DIR>").contains("The run directory"), "{out}");
    assert!(line("--json").contains("Print the paths written as JSON"), "{out}");
    let (code, out, _) = common::run(&["optimize", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("--budget <DURATION>") && out.contains("1h30m"), "{out}");
}

#[test]
fn validate_speaks_task_toml_not_rust() {
    // Rust's Debug output (`Int("rows")`, `(Fp32)`, `Some(..)`, `None`) must never reach
    // the user, on any task or example, nor in the task list.
    // A variant name called like a function or alone in parentheses (`Fp32`, CamelCase),
    // a string in parentheses, Option's words, a struct's fields.
    let debug =
        regex::Regex::new(r#"\b[A-Z]\w*\(|\w+\("|\([A-Z][a-z]+[A-Z0-9]\w*\)|\bSome\(|\bNone\b|\{ \w+: "#).unwrap();
    let dirs = common::project_task_dirs();
    assert!(dirs.len() >= 15, "{dirs:?}");
    for d in &dirs {
        let (code, out, err) = common::run(&["validate", d.to_str().unwrap()]);
        assert_eq!(code, 0, "{}: {err}", d.display());
        assert!(out.contains("  arg "), "{out}");
        if let Some(m) = debug.find(&out) {
            panic!("{}: Debug text `{}` in:\n{out}", d.display(), m.as_str());
        }
    }
    let (_, out, _) = common::run(&["tasks"]);
    assert!(debug.find(&out).is_none(), "{out}");
    // What the check would catch: the rendering this test was written against.
    assert!(debug.is_match("  arg        rows       int                      value Int(\"rows\")"));
    assert!(debug.is_match("  roofline   1 MB and 1e8 flops (Fp32) at the bench size"));
}

#[test]
fn without_a_gpu_the_hints_lead_to_commands_that_work() {
    if nightshift::wall::gpu::driver_present() {
        return;
    }
    // eval and optimize need a GPU; their hint must not send the user to `--arch`, which
    // would only build and then stop at the same missing GPU.
    let (code, _, err) = common::run(&["eval", "tasks/vector_add"]);
    assert_eq!(code, 3, "{err}");
    let suggested = "nightshift validate TASK --build --arch sm_90a";
    assert!(err.contains(suggested), "{err}");
    assert!(!err.contains("with `--arch sm_90a`"), "the old hint: {err}");
    let (code, _, err) = common::run(&["optimize", "tasks/vector_add", "--arch", "sm_90a", "--max-nodes", "1"]);
    assert_eq!(code, 3, "optimize with --arch still needs a GPU: {err}");
    assert!(err.contains(suggested), "{err}");
    // validate --build without --arch names the flag that makes it work here...
    common::require_toolchain();
    let (code, _, err) = common::run(&["validate", "tasks/vector_add", "--build"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("Pass --arch sm_90a"), "{err}");
    // ...and the suggested command does work on this machine.
    let out = common::building_command()
        .args(["validate", "tasks/vector_add", "--build", "--arch", "sm_90a"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `nightshift validate ... | head -0`: a reader that has gone ends the command quietly,
/// as it ends any Unix tool, not with a panic about stdout.
#[test]
fn a_printing_command_whose_reader_has_gone_ends_without_a_panic() {
    use std::process::{Command, Stdio};
    let mut child = Command::new(common::nightshift_bin())
        .args(["validate", &common::path("tasks/softmax"), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");
}
