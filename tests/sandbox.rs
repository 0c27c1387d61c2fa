//! The worker's sandbox and report seal, tested without a GPU: a probe process that
//! applies the real sandbox and tries to break out, and simulated optimize runs whose
//! candidates attack from their constructors (which run in a real, isolated, sandboxed
//! worker even when the GPU work is simulated).

mod common;

use nightshift::sandbox::probe;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[test]
fn the_sandbox_refuses_every_escape_and_allows_the_scratch_folder() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let report = probe::spawn(&common::nightshift_bin(), Some(port)).expect("the probe reports");
    let breaches: Vec<_> = report.breaches().iter().map(|a| format!("{} ({})", a.action, a.detail)).collect();
    assert!(breaches.is_empty(), "escapes: {breaches:?}\nlayers: {:?}", report.layers);
    let tried: Vec<&str> = report.attempts.iter().map(|a| a.action.as_str()).collect();
    for must in ["write /", "environ", "signal the parent", "fork", "exec", "IPv4 socket", "connect to 127.0.0.1"] {
        assert!(tried.iter().any(|a| a.contains(must)), "the probe did not try `{must}`: {tried:?}");
    }
    assert!(report.attempts.iter().filter(|a| a.should_be_allowed).all(|a| a.allowed), "scratch writes work");
    // This machine's kernel has Landlock and seccomp; CI runs on the same kind.
    for layer in &report.layers {
        assert!(layer.active, "layer {} is off: {}", layer.name, layer.detail);
    }
    drop(listener);
}

fn nightshift() -> Command {
    common::building_command()
}

/// A softmax candidate that passes in simulation with `speedup`, plus `attack` run from
/// its constructor when the worker maps it.
fn attacker(speedup: &str, attack: &str) -> String {
    format!(
        r#"#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/syscall.h>
// NIGHTSHIFT_SIM(speedup={speedup})
__attribute__((constructor)) static void attack() {{
{attack}
}}
__global__ void k(const float* x, float* y, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }}
extern "C" void softmax(const float* x, float* y, int rows, int cols, cudaStream_t stream) {{
  k<<<(rows * cols + 255) / 256, 256, 0, stream>>>(x, y, rows * cols);
}}
"#
    )
}

#[test]
fn attacks_from_candidate_code_cannot_forge_a_verdict_or_stop_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let replies = tmp.path().join("replies");
    std::fs::create_dir(&replies).unwrap();
    let escaped = tmp.path().join("escaped.txt");
    let forged = r#"{"event":"done","report":{"outcome":{"outcome":"passed"}}}"#;
    let attacks = [
        // A forged verdict on every descriptor, then out before the worker can speak.
        (
            "a_forge",
            "9.0",
            format!(
                r#"const char* l = "{}\n"; for (int fd = 3; fd < 256; ++fd) write(fd, l, strlen(l)); _exit(0);"#,
                forged.replace('"', "\\\"")
            ),
        ),
        (
            "b_kill_parent",
            "1.20",
            "kill(getppid(), SIGKILL); killpg(getpgid(getppid()), SIGKILL); kill(0, SIGKILL);".to_string(),
        ),
        ("c_close_all", "9.0", "for (int fd = 0; fd < 1024; ++fd) close(fd);".to_string()),
        (
            "d_escape",
            "1.10",
            format!(
                r#"FILE* f = fopen("{}", "w"); if (f) {{ fputs("out", f); fclose(f); }} if (syscall(SYS_fork) == 0) _exit(0); setsid();"#,
                escaped.display()
            ),
        ),
    ];
    for (name, speedup, code) in &attacks {
        std::fs::write(replies.join(format!("{name}.cu")), attacker(speedup, code)).unwrap();
    }
    let run = tmp.path().join("run");
    let out = nightshift()
        .args(["optimize", "tasks/softmax", "--simulate-gpu", "10", "--parallel", "1", "--max-nodes", "5", "--json"])
        .arg("--generator")
        .arg(format!("replay:{}", replies.display()))
        .arg("--out")
        .arg(&run)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some(), "the orchestrator was killed: {stderr}");
    let summary: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    let classes = node_classes(&run);
    let class_of = |name: &str| classes.iter().find(|(f, _)| f.contains(name)).map(|(_, c)| c.as_str());
    assert_eq!(class_of("a-forge"), Some("forged-report"), "{classes:?}");
    assert_eq!(class_of("c-close-all"), Some("forged-report"), "{classes:?}");
    assert_eq!(class_of("b-kill-parent"), Some("passed"), "refused signals leave the candidate running: {classes:?}");
    assert_eq!(class_of("d-escape"), Some("passed"), "{classes:?}");
    assert!(!escaped.exists(), "a candidate wrote outside its scratch folder");
    assert!(
        (summary["best"]["speedup"].as_f64().unwrap() - 1.2).abs() < 1e-9,
        "the best is the honest-looking 1.2x, never a forged 9x: {}",
        summary["best"]
    );
}

/// (technique, outcome class) per judged node; replayed files are named by their stem.
fn node_classes(run: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(run.join("events.jsonl")).unwrap_or_default();
    let mut technique = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for e in text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
        if e["event"] == "node-proposed" {
            technique.insert(e["id"].as_u64(), e["technique"].as_str().unwrap_or("").to_string());
        }
        if e["event"] == "node-finished" {
            let class = e["summary"]["failure_class"]
                .as_str()
                .unwrap_or(if e["summary"]["passed"] == true { "passed" } else { "?" })
                .to_string();
            out.push((technique.get(&e["id"].as_u64()).cloned().unwrap_or_default(), class));
        }
    }
    out
}
