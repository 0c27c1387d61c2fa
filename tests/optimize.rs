//! The optimize loop end to end, on any machine: the real binary, real nvcc builds (the
//! wheel toolchain), real isolated workers, with the test-only simulated evaluator in
//! place of the GPU, and a real HTTP server on loopback speaking the OpenAI chat API.

mod common;

use common::events;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "sk-nightshift-test-SECRET-4242";

fn nightshift() -> Command {
    common::building_command()
}

fn of_kind<'a>(ev: &'a [Value], kind: &str) -> Vec<&'a Value> {
    ev.iter().filter(|e| e["event"] == kind).collect()
}

/// The node ids of the events of one kind.
fn ids(ev: &[Value], kind: &str) -> BTreeSet<u64> {
    of_kind(ev, kind).iter().map(|e| e["id"].as_u64().unwrap()).collect()
}

/// The nodes that landed within their parent's interval, counted from the event log
/// alone: a correct child whose speedup lies inside its correct parent's 95% interval, or
/// within `min_gain` of the parent's speedup.
fn within_parent_interval(ev: &[Value], min_gain: f64) -> u64 {
    let mut summaries: BTreeMap<u64, &Value> = BTreeMap::new();
    let mut parents: BTreeMap<u64, u64> = BTreeMap::new();
    for e in ev {
        match e["event"].as_str() {
            Some("baseline") => drop(summaries.insert(0, &e["summary"])),
            Some("node-started") => drop(parents.insert(e["id"].as_u64().unwrap(), e["parent"].as_u64().unwrap())),
            Some("node-finished") => drop(summaries.insert(e["id"].as_u64().unwrap(), &e["summary"])),
            _ => {}
        }
    }
    let mut within = 0;
    for (id, child) in &summaries {
        let Some(parent) = parents.get(id).and_then(|p| summaries.get(p)) else { continue };
        if child["passed"] != true || parent["passed"] != true {
            continue;
        }
        let (s, p) = (child["speedup"].as_f64().unwrap(), parent["speedup"].as_f64().unwrap());
        let inside = match (parent["speedup_low"].as_f64(), parent["speedup_high"].as_f64()) {
            (Some(low), Some(high)) => low <= s && s <= high,
            _ => false,
        };
        if inside || (s / p).ln().abs() < min_gain.ln_1p() {
            within += 1;
        }
    }
    within
}

fn chat(content: &str, finish: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1, "model": "scripted",
        "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}
    })
    .to_string()
}

enum Scripted {
    Reply(String),
    Status(u16, Option<&'static str>),
    Slow(Duration, String),
}

/// A loopback OpenAI-compatible server answering from a script, then "no code" forever.
struct MockServer {
    url: String,
    requests: Arc<Mutex<Vec<(String, String)>>>,
}

fn serve(script: Vec<Scripted>) -> MockServer {
    let server = tiny_http::Server::http("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let script = Arc::new(Mutex::new(script.into_iter().collect::<std::collections::VecDeque<_>>()));
    std::thread::spawn(move || {
        for mut req in server.incoming_requests() {
            let mut body = String::new();
            let _ = req.as_reader().read_to_string(&mut body);
            let auth = req
                .headers()
                .iter()
                .find(|h| h.field.equiv("Authorization"))
                .map(|h| h.value.to_string())
                .unwrap_or_default();
            seen.lock().unwrap().push((auth, body));
            let next = script.lock().unwrap().pop_front();
            std::thread::spawn(move || {
                let json = tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap();
                let resp = match next {
                    Some(Scripted::Reply(c)) => tiny_http::Response::from_string(c).with_header(json),
                    Some(Scripted::Status(code, retry_after)) => {
                        let mut r = tiny_http::Response::from_string(
                            r#"{"error":{"message":"scripted failure","type":"server_error","param":null,"code":null}}"#,
                        )
                        .with_status_code(code)
                        .with_header(json);
                        if let Some(s) = retry_after {
                            r = r.with_header(tiny_http::Header::from_bytes("Retry-After", s).unwrap());
                        }
                        r
                    }
                    Some(Scripted::Slow(d, c)) => {
                        std::thread::sleep(d);
                        tiny_http::Response::from_string(c).with_header(json)
                    }
                    None => {
                        tiny_http::Response::from_string(chat("Nothing more to suggest.", "stop")).with_header(json)
                    }
                };
                let _ = req.respond(resp);
            });
        }
    });
    MockServer { url, requests }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn the_llm_loop_goes_on_through_every_kind_of_bad_reply_and_keeps_the_key_out() {
    let tmp = tempfile::tempdir().unwrap();
    let env_dump = tmp.path().join("candidate_env.txt");
    // A candidate whose constructor looks for the key in its own environment and in its
    // parent's (the orchestrator's), dies if it finds it, and tries to write outside its
    // scratch folder: the node passing and no file appearing is the sandbox holding.
    let spy = format!(
        r#"#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
extern char** environ;
__attribute__((constructor)) static void spy() {{
  for (char** e = environ; *e; ++e) if (strstr(*e, "OPENAI")) abort();
  char path[64]; snprintf(path, sizeof path, "/proc/%d/environ", (int)getppid());
  FILE* p = fopen(path, "r");
  if (p) {{ char buf[65536]; size_t n = fread(buf, 1, sizeof buf, p); fclose(p);
    for (size_t i = 0; i + 6 < n; ++i) if (!memcmp(buf + i, "OPENAI", 6)) abort(); }}
  FILE* f = fopen("{}", "w"); if (!f) return;
  for (char** e = environ; *e; ++e) fprintf(f, "%s\n", *e); fclose(f);
}}
"#,
        env_dump.display()
    );
    let good = |speedup: &str, technique: &str, extra: &str| {
        chat(
            &format!(
                "```cuda\n{}```\nTechnique: {technique}\nAddresses: scalar-global-access\n",
                common::sim_kernel(&format!("speedup={speedup}"), extra)
            ),
            "stop",
        )
    };
    let wrong_signature = chat(
        "```cuda\n#include <cuda_runtime.h>\nextern \"C\" void softmax(const double* x, float* y, int rows, int cols, cudaStream_t s) {}\n```\nTechnique: doubles\n",
        "stop",
    );
    let server = serve(vec![
        // Timed with 20% noise: its children up to about 1.6x land within its interval.
        Scripted::Reply(good("1.30, cv=0.2", "vectorize", &spy)),
        Scripted::Reply(chat("I would use warp shuffles here, but I am not sure.", "stop")),
        Scripted::Reply(chat("```cuda\nextern \"C\" void softmax(const float* x, float* y, int rows, int cols, cudaStream_t s) {\n  for (int i = 0;", "length")),
        Scripted::Reply(wrong_signature),
        Scripted::Status(429, Some("1")),
        Scripted::Reply(good("1.50", "warp-per-row", "")),
        Scripted::Status(500, None),
        Scripted::Status(500, None),
        Scripted::Slow(Duration::from_secs(4), good("9.0", "too-late", "")),
        Scripted::Reply(good("1.10", "unroll", "")),
    ]);
    let run = tmp.path().join("run");
    let started = Instant::now();
    let out = nightshift()
        .args(["optimize", "tasks/softmax", "--simulate-gpu", "20", "--generator", "llm", "--model", "scripted"])
        .args(["--parallel", "1", "--max-nodes", "8", "--retries", "1", "--request-timeout", "2", "--json", "--out"])
        .arg(&run)
        .env("OPENAI_BASE_URL", &server.url)
        .env("OPENAI_API_KEY", SECRET)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stdout: {stdout}\nstderr: {stderr}");
    let summary: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert!(started.elapsed() < Duration::from_secs(240));

    let ev = events(&run);
    let finished = of_kind(&ev, "node-finished");
    let classes: Vec<String> = finished
        .iter()
        .map(|e| {
            e["summary"]["failure_class"]
                .as_str()
                .unwrap_or(if e["summary"]["passed"] == true { "passed" } else { "?" })
                .to_string()
        })
        .collect();
    for expected in ["passed", "no-code", "truncated-reply", "build-error", "api-error"] {
        assert!(classes.iter().any(|c| c == expected), "no {expected} node in {classes:?}");
    }
    assert_eq!(finished.len(), 8, "every node is recorded: {classes:?}");
    assert!(!classes.iter().any(|c| c == "crash"), "the spy found the key in reach: {classes:?}");
    let attempts = of_kind(&ev, "llm-attempt");
    let status = |s: &str| attempts.iter().any(|a| a["status"].as_str().unwrap_or("").contains(s));
    assert!(status("429"), "{attempts:?}");
    assert!(status("500"), "{attempts:?}");
    assert!(status("no reply within 2 s"), "the slow reply timed out: {attempts:?}");
    let waited = attempts.iter().find(|a| a["status"].as_str().unwrap_or("").contains("429")).unwrap();
    assert_eq!(waited["wait_s"].as_f64(), Some(1.0), "Retry-After: 1 was honoured");

    // The best is the 1.5x reply; the late 9x reply never counted.
    assert_eq!(summary["best"]["speedup"].as_f64(), Some(1.5), "{summary}");
    assert_eq!(summary["simulated"], true);
    assert!(summary["usage"]["requests"].as_u64().unwrap() >= 8, "{summary}");
    assert!(summary["usage"]["prompt_tokens"].as_u64().unwrap() >= 6000, "{summary}");
    // The nodes that told the search nothing the timing could tell from noise: the 1.5x
    // reply is a child of the noisy 1.3x node.
    let within = summary["within_parent_interval"].as_u64().expect("the count is in --json");
    assert_eq!(within, within_parent_interval(&ev, 0.01), "{summary}");
    assert!(within >= 1, "{summary}");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(written["within_parent_interval"], summary["within_parent_interval"], "summary.json has it too");
    assert!(std::fs::read_to_string(run.join("report.md"))
        .unwrap()
        .contains(&format!("{within} landed within their parent's interval")));

    // What the model was told: the task card, and for nodes after the first, the memory.
    let requests = server.requests.lock().unwrap().clone();
    assert!(requests.iter().all(|(auth, _)| auth == &format!("Bearer {SECRET}")), "the key goes to the endpoint only");
    let first: Value = serde_json::from_str(&requests[0].1).unwrap();
    let prompt = first["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.contains("extern \"C\" void softmax(const float* x, float* y, int rows, int cols, cudaStream_t stream)"),
        "{prompt}"
    );
    assert!(prompt.contains("rows=8192 cols=4096") && prompt.contains("1e-5 * |ref|"), "{prompt}");
    let later: Value = serde_json::from_str(&requests.last().unwrap().1).unwrap();
    assert!(
        later["messages"][1]["content"].as_str().unwrap().contains("Tried so far"),
        "search memory reaches the prompt"
    );

    // Prompts and replies are kept per node.
    let node1 = run.join("nodes/0001");
    assert!(std::fs::read_to_string(node1.join("prompt.md")).unwrap().contains("## Task: softmax"));
    assert!(std::fs::read_to_string(node1.join("reply.md")).unwrap().contains("Technique: vectorize"));

    // The key is in no file of the run directory (the log included) and not in the
    // environment the candidate's code was loaded with.
    for f in files_under(&run) {
        let bytes = std::fs::read(&f).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains(SECRET), "the API key leaked into {}", f.display());
    }
    assert!(run.join("log.jsonl").is_file(), "tracing logs are in the run directory");
    // Reports: the run's at the end, each node's as it finished (or at the end).
    let html = std::fs::read_to_string(run.join("report.html")).expect("the run report");
    assert!(html.contains("SIMULATED run"), "a simulated run says so in its report");
    for id in 1..=8 {
        assert!(run.join(format!("nodes/{id:04}/report.md")).is_file(), "node {id}'s report");
    }
    assert!(!env_dump.exists(), "a candidate wrote outside its scratch folder");
    assert!(!stderr.contains(SECRET));
}

/// Starts a simulated softmax run in `run`, SIGKILLs it once three nodes have finished
/// with more in flight, and returns the ids finished and started before the kill.
fn start_and_kill(run: &Path) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let mut child = nightshift()
        .args(["optimize", "tasks/softmax", "--simulate-gpu", "600", "--max-nodes", "9", "--parallel", "2", "--out"])
        .arg(run)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let done = of_kind(&events(run), "node-finished").len();
        if done >= 3 {
            break;
        }
        assert!(Instant::now() < deadline, "the run never got going");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be killed");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = events(run);
    let finished_before = ids(&before, "node-finished");
    let started_before = ids(&before, "node-started");
    assert!(started_before.len() > finished_before.len(), "something was in flight when it was killed");
    (finished_before, started_before)
}

#[test]
fn a_sigkilled_run_resumes_without_losing_or_repeating_a_node() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let (finished_before, started_before) = start_and_kill(&run);

    let out = nightshift().args(["optimize", "--resume"]).arg(&run).arg("--json").output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    let after = events(&run);
    let mut count: BTreeMap<u64, usize> = BTreeMap::new();
    for e in of_kind(&after, "node-finished") {
        *count.entry(e["id"].as_u64().unwrap()).or_default() += 1;
    }
    for (id, n) in &count {
        assert_eq!(*n, 1, "node {id} was judged {n} times");
    }
    for id in &finished_before {
        assert!(count.contains_key(id), "node {id} was lost");
    }
    let dropped = ids(&after, "no-proposal");
    for id in &started_before {
        assert!(count.contains_key(id) || dropped.contains(id), "node {id}, in flight at the kill, was not redone");
    }
    assert_eq!(of_kind(&after, "session").len(), 2);
    assert!(after.iter().all(|e| e["simulated"] == true), "every line of a simulated run says so");
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["judged"].as_u64().unwrap() as usize, count.len());
    // Counted over both sessions, as the log has them.
    assert_eq!(summary["within_parent_interval"].as_u64(), Some(within_parent_interval(&after, 0.01)), "{summary}");
    assert!(run.join("best.json").is_file());
}

#[test]
fn a_resume_whose_budget_is_spent_judges_nothing_more() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let (finished_before, started_before) = start_and_kill(&run);

    let out = nightshift().args(["optimize", "--resume"]).arg(&run).args(["--budget", "1s"]).output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    let after = events(&run);
    let finished_after = ids(&after, "node-finished");
    assert_eq!(finished_after, finished_before, "nodes in flight at the kill were redone past the budget");
    assert_eq!(of_kind(&after, "run-finished").len(), 1, "the run still ends with its final check");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    let dropped = ids(&after, "no-proposal");
    let unjudged = started_before.iter().filter(|id| !finished_before.contains(id) && !dropped.contains(id)).count();
    assert_eq!(report.matches("not judged: the search stopped first").count(), unjudged, "{report}");
    assert!(!report.contains("in flight"), "a finished run has nothing in flight:\n{report}");
}

#[test]
fn bad_optimize_usage_is_a_clear_error() {
    let out = nightshift().args(["optimize", "tasks/softmax", "--budget", "soon", "--simulate-gpu"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("invalid value 'soon' for '--budget <DURATION>': a budget is a number and a unit"));
    let out =
        nightshift().args(["optimize", "tasks/softmax", "--generator", "llm", "--simulate-gpu"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--model"));
    let out = nightshift().args(["optimize", "--resume", "/nonexistent/run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a run directory"));
    // Ray: --gpus counts lanes there, and the bridge's flags need a cluster.
    let out = nightshift()
        .args(["optimize", "tasks/softmax", "--simulate-gpu", "--ray", "auto", "--gpus", "0,1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("with --ray, --gpus is one number"));
    let out = nightshift().args(["optimize-all", "tasks/softmax", "--ray-python", "python3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ray <ADDRESS>"));
    // A Python without the bridge's needs, or none at all: exit 3, saying how to install Ray,
    // and no run directory left behind.
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let out = nightshift()
        .args(["optimize", "tasks/softmax", "--simulate-gpu", "--ray", "auto", "--ray-python", "/nonexistent/python3"])
        .arg("--out")
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pip install \"ray[default]==2.60.0\""));
    assert!(!run.exists(), "a run that never started left its folder");
}
