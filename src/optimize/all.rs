//! `optimize-all`: a night's batch, one optimize run per task, and one summary in the
//! morning that links each run's report. Locally the runs go one after another on this
//! host's GPUs; with `--ray` each run is a Ray task holding one GPU of the cluster
//! (`bridge.py --batch`), which Ray runs again on another node if its node is lost, and
//! whose run folder comes back here. Each run is a whole `nightshift optimize` of its
//! own: nothing here judges anything.

use super::remote::bridge::LaneWhere;
use super::remote::job::TaskFiles;
use crate::run::config::RaySettings;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What to run.
pub struct AllSpec {
    pub tasks: Vec<PathBuf>,
    pub out: PathBuf,
    /// Passed to every `optimize` (budget, generator, seed, ...).
    pub args: Vec<String>,
    pub ray: Option<RaySettings>,
}

/// How one task's run went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskRun {
    pub task: String,
    /// The run folder, under the batch's folder.
    pub run_dir: Option<PathBuf>,
    /// optimize's exit code: 0 a faster kernel re-verified, 1 none found.
    pub exit: Option<i32>,
    /// Why the run did not happen or did not end normally.
    pub error: Option<String>,
    /// The run's summary.json as it wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "where")]
    pub at: Option<LaneWhere>,
    pub seconds: f64,
}

impl TaskRun {
    fn failed(task: &str, error: String) -> TaskRun {
        TaskRun {
            task: task.into(),
            run_dir: None,
            exit: None,
            error: Some(error),
            summary: None,
            at: None,
            seconds: 0.0,
        }
    }

    /// Ended as optimize ends when nothing broke: with or without a faster kernel.
    pub fn ended(&self) -> bool {
        self.error.is_none() && matches!(self.exit, Some(0) | Some(1))
    }
}

/// The run folder names: each task's folder name, made unique.
pub fn run_names(tasks: &[PathBuf]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for t in tasks {
        let base = t.file_name().and_then(|n| n.to_str()).unwrap_or("task").to_string();
        let mut name = base.clone();
        let mut k = 2;
        while names.contains(&name) {
            name = format!("{base}-{k}");
            k += 1;
        }
        names.push(name);
    }
    names
}

/// Runs every task and returns how each went, in the order given; `progress` hears of
/// each as it ends.
pub fn run(spec: &AllSpec, progress: &mut dyn FnMut(&TaskRun)) -> Result<Vec<TaskRun>, String> {
    std::fs::create_dir_all(&spec.out).map_err(|e| format!("{}: {e}", spec.out.display()))?;
    let names = run_names(&spec.tasks);
    match &spec.ray {
        None => Ok(spec.tasks.iter().zip(&names).map(|(t, n)| local_run(spec, t, n, progress)).collect()),
        Some(ray) => ray_runs(spec, ray, &names, progress),
    }
}

fn local_run(spec: &AllSpec, task: &Path, name: &str, progress: &mut dyn FnMut(&TaskRun)) -> TaskRun {
    let started = std::time::Instant::now();
    let dir = spec.out.join(name);
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return TaskRun::failed(name, format!("cannot find the nightshift executable: {e}")),
    };
    let out = Command::new(exe)
        .arg("optimize")
        .arg(task)
        .arg("--out")
        .arg(&dir)
        .arg("--json")
        .args(&spec.args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output();
    let r = match out {
        Ok(o) => finished(name, &dir, o.status.code(), &String::from_utf8_lossy(&o.stdout), "", None, started),
        Err(e) => TaskRun::failed(name, format!("cannot start optimize: {e}")),
    };
    progress(&r);
    r
}

fn finished(
    name: &str,
    dir: &Path,
    exit: Option<i32>,
    stdout: &str,
    stderr: &str,
    at: Option<LaneWhere>,
    started: std::time::Instant,
) -> TaskRun {
    let summary = serde_json::from_str::<serde_json::Value>(stdout.trim()).ok();
    let error = match exit {
        Some(0) | Some(1) => None,
        code => Some(format!(
            "optimize ended with {}{}",
            code.map(|c| format!("exit code {c}")).unwrap_or_else(|| "a signal".into()),
            if stderr.trim().is_empty() { String::new() } else { format!(": {}", last_line(stderr)) }
        )),
    };
    TaskRun {
        task: name.into(),
        run_dir: dir.is_dir().then(|| dir.to_path_buf()),
        exit,
        error,
        summary,
        at,
        seconds: started.elapsed().as_secs_f64(),
    }
}

fn last_line(s: &str) -> &str {
    s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim()
}

fn ray_runs(
    spec: &AllSpec,
    ray: &RaySettings,
    names: &[String],
    progress: &mut dyn FnMut(&TaskRun),
) -> Result<Vec<TaskRun>, String> {
    let started = std::time::Instant::now();
    let mut tasks = Vec::new();
    for (t, name) in spec.tasks.iter().zip(names) {
        let mut files = TaskFiles::read(t)?;
        files.name = name.clone();
        tasks.push(serde_json::json!({ "name": name, "files": files.files }));
    }
    let log = spec.out.join("ray-bridge.log");
    // In the terminal's process group: a Ctrl-C ends the batch with its bridge.
    let extra = ["--batch".as_ref(), "--out".as_ref(), spec.out.as_os_str()];
    let (mut child, _script) = super::remote::bridge::spawn(ray, &extra, &log, false)?;
    let request = serde_json::json!({ "tasks": tasks, "args": spec.args });
    if let Some(mut stdin) = child.stdin.take() {
        // A bridge that could not join the cluster has closed its end; its own line
        // below says why, so a failed write is not the error to report.
        if let Err(e) = writeln!(stdin, "{request}") {
            tracing::warn!("the Ray bridge did not take the batch: {e}");
        }
    }
    let stdout = child.stdout.take().ok_or("the Ray bridge has no stdout")?;
    #[derive(Deserialize)]
    struct Line {
        #[serde(default)]
        task: Option<String>,
        #[serde(default)]
        ok: bool,
        #[serde(default)]
        error: Option<String>,
        #[serde(default)]
        event: Option<String>,
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        rc: Option<i32>,
        #[serde(default)]
        summary: String,
        #[serde(default)]
        stderr: String,
        #[serde(default, rename = "where")]
        at: Option<LaneWhere>,
    }
    let mut done: Vec<TaskRun> = Vec::new();
    let mut refused = None;
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let Ok(l) = serde_json::from_str::<Line>(&line) else { continue };
        if l.event.as_deref() == Some("error") {
            refused = l.message;
            continue;
        }
        let Some(task) = l.task else { continue };
        let r = if l.ok {
            finished(&task, &spec.out.join(&task), l.rc, &l.summary, &l.stderr, l.at, started)
        } else {
            TaskRun::failed(&task, l.error.unwrap_or_else(|| "the Ray task failed".into()))
        };
        progress(&r);
        done.push(r);
    }
    let _ = child.wait();
    if let Some(m) = refused {
        return Err(format!("--ray {}: {m} (the bridge's log: {})", ray.address, log.display()));
    }
    // In the order given; a task the bridge never answered for says so.
    Ok(names
        .iter()
        .map(|n| {
            done.iter().find(|r| &r.task == n).cloned().unwrap_or_else(|| {
                TaskRun::failed(n, format!("the Ray bridge ended without this run (its log: {})", log.display()))
            })
        })
        .collect())
}

/// `summary.md` and `summary.json` in the batch's folder: one row per task, linking its
/// run's report.
pub fn write_summary(out: &Path, runs: &[TaskRun]) -> Result<PathBuf, String> {
    let mut md = String::from("# nightshift: optimize-all\n\n");
    let ended = runs.iter().filter(|r| r.ended()).count();
    let faster = runs.iter().filter(|r| r.exit == Some(0)).count();
    md.push_str(&format!("{} tasks: {ended} runs ended, {faster} with a faster kernel re-verified.\n\n", runs.len()));
    md.push_str("| task | outcome | best | speedup | judged | stopped | where | report |\n");
    md.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for r in runs {
        let s = r.summary.as_ref();
        let best = s.and_then(|s| s.get("best"));
        let speedup = best.and_then(|b| b.get("speedup")).and_then(|v| v.as_f64());
        let node = best.and_then(|b| b.get("node")).and_then(|v| v.as_u64());
        let outcome = match (&r.error, r.exit) {
            (Some(e), _) => format!("failed: {}", e.replace('|', "\\|")),
            (None, Some(0)) => "faster, re-verified".into(),
            _ => "no faster kernel".into(),
        };
        let report = match &r.run_dir {
            Some(_) if Path::new(&out.join(&r.task).join("report.md")).exists() => {
                format!("[md]({0}/report.md) · [html]({0}/report.html)", r.task)
            }
            _ => "-".into(),
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.task,
            outcome,
            node.map(|n| format!("node {n}")).unwrap_or_else(|| "-".into()),
            speedup.map(|x| format!("{x:.3}x")).unwrap_or_else(|| "-".into()),
            s.and_then(|s| s.get("judged")).map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
            s.and_then(|s| s.get("stop_reason")).and_then(|v| v.as_str()).unwrap_or("-").replace('|', "\\|"),
            r.at.as_ref()
                .map(|a| format!("{} (node {})", a.host, a.node.get(..8).unwrap_or(&a.node)))
                .unwrap_or_else(|| "this host".into()),
            report,
        ));
    }
    let path = out.join("summary.md");
    std::fs::write(&path, md).map_err(|e| format!("{}: {e}", path.display()))?;
    let json = serde_json::to_string_pretty(runs).map_err(|e| e.to_string())?;
    std::fs::write(out.join("summary.json"), json).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_tasks_of_one_name_get_runs_of_their_own() {
        let tasks = [PathBuf::from("a/softmax"), PathBuf::from("b/softmax"), PathBuf::from("tasks/rmsnorm")];
        assert_eq!(run_names(&tasks), ["softmax", "softmax-2", "rmsnorm"]);
    }

    #[test]
    fn the_summary_links_each_report_and_says_what_failed() {
        let out = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(out.path().join("softmax")).unwrap();
        std::fs::write(out.path().join("softmax/report.md"), "# run").unwrap();
        let summary = serde_json::json!({ "best": { "speedup": 1.25, "node": 4 }, "judged": 9, "stop_reason": "the budget is spent" });
        let runs = vec![
            TaskRun {
                task: "softmax".into(),
                run_dir: Some(out.path().join("softmax")),
                exit: Some(0),
                error: None,
                summary: Some(summary),
                at: None,
                seconds: 1.0,
            },
            TaskRun::failed("rmsnorm", "optimize ended with exit code 3: no GPU | none".into()),
        ];
        let path = write_summary(out.path(), &runs).unwrap();
        let md = std::fs::read_to_string(path).unwrap();
        assert!(md.contains("| softmax | faster, re-verified | node 4 | 1.250x | 9 | the budget is spent | this host | [md](softmax/report.md)"), "{md}");
        assert!(md.contains("| rmsnorm | failed: optimize ended with exit code 3: no GPU \\| none |"), "{md}");
        assert!(md.contains("2 tasks: 1 runs ended, 1 with a faster kernel"), "{md}");
        let back: Vec<TaskRun> =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
        assert_eq!(back.len(), 2);
    }
}
