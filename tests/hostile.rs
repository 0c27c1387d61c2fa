//! Hostile candidates against the wall, on a real GPU. Each file in tests/hostile/ is
//! one attack with the verdict class it must get in its header:
//!
//! ```text
//! // expect: forged-report
//! // task: vector_add
//! // flags: --sanitize        (optional)
//! // why: what it does
//! ```
//!
//! Run on the GPU machine: `.device/tests/hostile-* --ignored --nocapture` (or
//! `bash .device/gpu-run.sh tests -- --ignored`). It prints one table row per case and
//! fails if any case gets another class, if the caller does not survive one, if a file
//! appears outside the scratch folders, or if the orchestrator's API key reaches a verdict.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const CANARY: &str = "sk-hostile-canary-0a1b2c3d";
const ESCAPE_NAME: &str = "nightshift-hostile-escape.txt";

struct Case {
    name: String,
    path: PathBuf,
    expect: String,
    task: String,
    flags: Vec<String>,
    why: String,
}

fn header(text: &str, key: &str) -> Option<String> {
    text.lines().take(8).find_map(|l| l.strip_prefix(&format!("// {key}:")).map(|v| v.trim().to_string()))
}

fn cases() -> Vec<Case> {
    let dir = common::root().join("tests/hostile");
    let mut out: Vec<Case> = std::fs::read_dir(&dir)
        .expect("tests/hostile")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            Case {
                expect: header(&text, "expect").unwrap_or_else(|| panic!("{name}: no `// expect:` line")),
                task: header(&text, "task").unwrap_or_else(|| panic!("{name}: no `// task:` line")),
                flags: header(&text, "flags")
                    .map(|f| f.split_whitespace().map(String::from).collect())
                    .unwrap_or_default(),
                why: header(&text, "why").unwrap_or_default(),
                name,
                path,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[test]
fn every_case_says_what_it_expects() {
    let all = cases();
    assert!(all.len() >= 24, "the issue asks for at least 24 cases, there are {}", all.len());
    for c in &all {
        assert!(common::root().join("tasks").join(&c.task).is_dir(), "{}: no task {}", c.name, c.task);
        assert!(!c.why.is_empty(), "{}: say why", c.name);
    }
}

/// Every file named ESCAPE_NAME in the places a candidate would try, to a small depth.
fn escapes(cache: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> =
        vec!["/tmp".into(), "/var/tmp".into(), "/dev/shm".into(), common::root(), cache.into()];
    roots.extend(std::env::var_os("HOME").map(PathBuf::from));
    let mut found = Vec::new();
    let mut stack: Vec<(PathBuf, usize)> = roots.into_iter().map(|r| (r, 0)).collect();
    while let Some((dir, depth)) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_name() == ESCAPE_NAME {
                found.push(p.clone());
            }
            if depth < 3 && e.file_type().is_ok_and(|t| t.is_dir() && !t.is_symlink()) {
                stack.push((p, depth + 1));
            }
        }
    }
    found
}

#[test]
#[ignore = "needs a GPU"]
fn every_hostile_case_gets_its_class_and_the_caller_survives() {
    let cache =
        std::env::var_os("NIGHTSHIFT_CACHE_DIR").map(PathBuf::from).unwrap_or_else(nightshift::build::cache_root);
    for old in escapes(&cache) {
        let _ = std::fs::remove_file(old);
    }
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for c in cases() {
        let started = Instant::now();
        let out = Command::new(common::nightshift_bin())
            .arg("eval")
            .arg(format!("tasks/{}", c.task))
            .arg(&c.path)
            .args(&c.flags)
            .args(["--timeout", "90", "--json"])
            .env("OPENAI_API_KEY", CANARY)
            .env("NIGHTSHIFT_TEST_API_KEY", CANARY)
            .current_dir(common::root())
            .output()
            .expect("nightshift runs");
        let seconds = started.elapsed().as_secs_f64();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let verdict: Option<Value> = serde_json::from_str(&stdout).ok();
        let got = match &verdict {
            Some(v) if v["status"] == "passed" => "passed".to_string(),
            Some(v) => v["failure"]["class"].as_str().unwrap_or("?").to_string(),
            None => format!("no verdict (exit {:?})", out.status.code()),
        };
        let speedup = verdict.as_ref().and_then(|v| v["timing"]["speedup"].as_f64());
        let survived = matches!(out.status.code(), Some(0) | Some(1));
        let leaked = stdout.contains(CANARY) || stderr.contains(CANARY);
        let ok = got == c.expect && survived && !leaked;
        if !ok {
            failures.push(format!(
                "{}: expected {}, got {got} (exit {:?}, leaked key: {leaked})\n{}\n{}",
                c.name,
                c.expect,
                out.status.code(),
                verdict.as_ref().map(|v| v["failure"]["message"].to_string()).unwrap_or_default(),
                stderr.chars().take(2000).collect::<String>()
            ));
        }
        let message = verdict
            .as_ref()
            .and_then(|v| v["failure"]["message"].as_str().map(|m| m.chars().take(110).collect::<String>()))
            .unwrap_or_else(|| speedup.map(|s| format!("speedup {s:.3}x")).unwrap_or_default());
        rows.push(format!(
            "| {} | {} | {} | {} | {:.1} | {} |",
            c.name,
            c.expect,
            got,
            out.status.code().map(|c| c.to_string()).unwrap_or_else(|| "signal".into()),
            seconds,
            if ok { message } else { format!("**MISMATCH** {message}") }
        ));
    }
    let escaped = escapes(&cache);
    println!("\n| case | expected | got | exit | s | detail |\n|---|---|---|---|---|---|");
    for r in &rows {
        println!("{r}");
    }
    println!(
        "\nfiles outside the scratch folders: {}",
        if escaped.is_empty() { "none".to_string() } else { format!("{escaped:?}") }
    );
    assert!(escaped.is_empty(), "candidates wrote outside their scratch folders: {escaped:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
