//! Hostile candidates against the wall, on a real GPU. Each file in tests/hostile/ is
//! one attack with the verdict class it must get in its header:
//!
//! ```text
//! // expect: forged-report
//! // task: vector_add
//! // flags: --sanitize        (optional)
//! // hosted: sanitize diagnose (optional: also run under compute-sanitizer and ncu)
//! // why: what it does
//! ```
//!
//! A case with a `#define NIGHTSHIFT_LISTENER_PORT 0` line gets there the port of a TCP
//! listener the test holds open on the host's loopback, and fails if a connection reaches it.
//! Hosted runs are the ones a hosting tool starts (compute-sanitizer for `eval
//! --sanitize`, ncu for `diagnose`): their worker must leave /tmp and TCP open for the
//! tool, so the hosted arrangement's namespaces are what keep the case in.
//!
//! Run on the GPU machine: `.device/tests/hostile-* --ignored --nocapture` (or
//! `bash .device/gpu-run.sh tests -- --ignored`). It prints one table row per case and
//! fails if any case gets another class, if the caller does not survive one, if a file
//! appears outside the scratch folders, if the orchestrator's API key reaches a verdict, or
//! if a kernel name a case forged (`nightshift_forged...`) reaches one.

mod common;

use serde_json::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const CANARY: &str = "sk-hostile-canary-0a1b2c3d";
const ESCAPE_NAME: &str = "nightshift-hostile-escape.txt";
/// What the names in a case's forged tool output start with: a verdict or a diagnosis
/// that repeats one was read from the candidate, not from the tool.
const FORGED_MARK: &str = "nightshift_forged";
const LISTENER_LINE: &str = "#define NIGHTSHIFT_LISTENER_PORT";

/// How a case is run: judged plainly, or under one of the hosting tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Eval,
    Sanitize,
    Diagnose,
}

impl Mode {
    fn parse(word: &str) -> Option<Mode> {
        match word {
            "sanitize" => Some(Mode::Sanitize),
            "diagnose" => Some(Mode::Diagnose),
            _ => None,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mode::Eval => "eval",
            Mode::Sanitize => "eval --sanitize",
            Mode::Diagnose => "diagnose",
        }
    }
}

struct Case {
    name: String,
    path: PathBuf,
    expect: String,
    task: String,
    flags: Vec<String>,
    /// Plain eval first, then the hosted runs the header asks for.
    modes: Vec<Mode>,
    /// Whether it has a `#define NIGHTSHIFT_LISTENER_PORT` line for a live listener's port.
    wants_listener: bool,
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
                modes: std::iter::once(Mode::Eval)
                    .chain(
                        header(&text, "hosted")
                            .unwrap_or_default()
                            .split_whitespace()
                            .map(|w| Mode::parse(w).unwrap_or_else(|| panic!("{name}: unknown hosted mode `{w}`"))),
                    )
                    .collect(),
                wants_listener: text.lines().any(|l| l.starts_with(LISTENER_LINE)),
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

/// The source a case runs: its file, or a copy naming the live listener's port.
fn staged_source(case: &Case, listener: Option<&TcpListener>, scratch: &Path) -> PathBuf {
    let Some(listener) = listener else { return case.path.clone() };
    let port = listener.local_addr().expect("a bound listener").port();
    let text: String = std::fs::read_to_string(&case.path)
        .unwrap()
        .lines()
        .map(|l| if l.starts_with(LISTENER_LINE) { format!("{LISTENER_LINE} {port}\n") } else { format!("{l}\n") })
        .collect();
    let path = scratch.join(case.path.file_name().unwrap());
    std::fs::write(&path, text).unwrap();
    path
}

/// Connections that reached the listener while the case ran.
fn arrivals(listener: &TcpListener) -> usize {
    listener.set_nonblocking(true).expect("a non-blocking listener");
    std::iter::from_fn(|| listener.accept().ok()).count()
}

/// The class a run got: `passed`, the failure class, or why there is no verdict.
fn class_of(mode: Mode, verdict: Option<&Value>, exit: Option<i32>) -> String {
    match (mode, verdict) {
        (Mode::Diagnose, Some(v)) if exit == Some(0) && v["kernels"].as_array().is_some_and(|k| !k.is_empty()) => {
            "passed".into()
        }
        (Mode::Eval | Mode::Sanitize, Some(v)) if v["status"] == "passed" => "passed".into(),
        (_, Some(v)) if v["failure"]["class"].is_string() => v["failure"]["class"].as_str().unwrap().to_string(),
        _ => format!("no verdict (exit {exit:?})"),
    }
}

#[test]
#[ignore = "needs a GPU"]
fn every_hostile_case_gets_its_class_and_the_caller_survives() {
    let cache = std::env::var_os("NIGHTSHIFT_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(nightshift::toolkit::build::cache_root);
    for old in escapes(&cache) {
        let _ = std::fs::remove_file(old);
    }
    let staging = tempfile::tempdir().expect("a staging folder");
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    // A comma-separated list of case names runs only those (a rerun after a fix).
    let only: Option<Vec<String>> =
        std::env::var("NIGHTSHIFT_HOSTILE_CASES").ok().map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    for c in cases().into_iter().filter(|c| only.as_ref().is_none_or(|o| o.contains(&c.name))) {
        for &mode in &c.modes {
            let listener = c.wants_listener.then(|| TcpListener::bind("127.0.0.1:0").expect("a loopback listener"));
            let source = staged_source(&c, listener.as_ref(), staging.path());
            let mut cmd = Command::new(common::nightshift_bin());
            match mode {
                Mode::Eval | Mode::Sanitize => {
                    cmd.arg("eval").arg(format!("tasks/{}", c.task)).arg(&source).args(&c.flags);
                    if mode == Mode::Sanitize && !c.flags.iter().any(|f| f == "--sanitize") {
                        cmd.arg("--sanitize");
                    }
                    cmd.args(["--timeout", "90", "--json"]);
                }
                Mode::Diagnose => {
                    cmd.arg("diagnose").arg(format!("tasks/{}", c.task)).arg(&source);
                    cmd.args(["--timeout", "120", "--json"]);
                }
            }
            let started = Instant::now();
            let out = cmd
                .env("OPENAI_API_KEY", CANARY)
                .env("NIGHTSHIFT_TEST_API_KEY", CANARY)
                .current_dir(common::root())
                .output()
                .expect("nightshift runs");
            let seconds = started.elapsed().as_secs_f64();
            let connections = listener.as_ref().map(arrivals).unwrap_or(0);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let verdict: Option<Value> = serde_json::from_str(&stdout).ok();
            let got = class_of(mode, verdict.as_ref(), out.status.code());
            let survived = matches!(out.status.code(), Some(0) | Some(1));
            let leaked = stdout.contains(CANARY) || stderr.contains(CANARY);
            let believed_forgery = stdout.contains(FORGED_MARK);
            let ok = got == c.expect && survived && !leaked && !believed_forgery && connections == 0;
            let name = match mode {
                Mode::Eval => c.name.clone(),
                hosted => format!("{} ({})", c.name, hosted.label()),
            };
            if !ok {
                failures.push(format!(
                    "{name}: expected {}, got {got} (exit {:?}, leaked key: {leaked}, forged output believed: {believed_forgery}, connections to the listener: {connections})\n{}\n{}",
                    c.expect,
                    out.status.code(),
                    verdict.as_ref().map(|v| v["failure"]["message"].to_string()).unwrap_or_default(),
                    stderr.chars().take(2000).collect::<String>()
                ));
            }
            let speedup = verdict.as_ref().and_then(|v| v["timing"]["speedup"].as_f64());
            let mut message = verdict
                .as_ref()
                .and_then(|v| v["failure"]["message"].as_str().map(|m| m.chars().take(110).collect::<String>()))
                .unwrap_or_else(|| speedup.map(|s| format!("speedup {s:.3}x")).unwrap_or_default());
            if listener.is_some() {
                message = format!("{connections} connection(s) reached the listener; {message}");
            }
            rows.push(format!(
                "| {name} | {} | {got} | {} | {seconds:.1} | {} |",
                c.expect,
                out.status.code().map(|c| c.to_string()).unwrap_or_else(|| "signal".into()),
                if ok { message } else { format!("**MISMATCH** {message}") }
            ));
        }
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
