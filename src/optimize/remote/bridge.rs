//! The orchestrator's end of the Ray bridge: starts `bridge.py` (shipped inside this
//! binary) under the given Python, reads the lanes it started, then sends jobs as JSON
//! lines and hands each reply to the thread that waits for it. A reply comes once per
//! job: the bridge resends a job whose lane was lost, and says so in an event line that
//! is kept for the run's records.

pub use crate::run::config::RaySettings;
use serde::Deserialize;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// The bridge, shipped inside this binary and written to a temporary file to run.
pub const SCRIPT: &str = include_str!("bridge.py");

/// Where one lane runs, as its actor reported it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, Deserialize)]
pub struct LaneWhere {
    pub host: String,
    pub node: String,
    #[serde(default)]
    pub gpu: String,
}

/// One job's answer from the bridge.
#[derive(Debug, Clone, Deserialize)]
pub struct Answer {
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    #[serde(default)]
    pub rc: Option<i32>,
    #[serde(default)]
    pub actor: Option<usize>,
    #[serde(default, rename = "where")]
    pub at: Option<LaneWhere>,
    /// 1 when the first lane answered; more when the job was sent again after a loss.
    #[serde(default)]
    pub tries: Option<u32>,
}

/// Something the bridge reported that is no job's answer: a lost lane, a resent job.
#[derive(Debug, Clone, PartialEq, serde::Serialize, Deserialize)]
pub struct BridgeEvent {
    pub event: String,
    #[serde(flatten)]
    pub detail: serde_json::Map<String, serde_json::Value>,
}

type Waiting = Arc<Mutex<Option<HashMap<u64, mpsc::Sender<Answer>>>>>;

pub struct Bridge {
    stdin: Mutex<Option<ChildStdin>>,
    child: Mutex<Child>,
    /// The jobs sent and not yet answered; None once the bridge has ended.
    waiting: Waiting,
    next: AtomicU64,
    pub lanes: Vec<LaneWhere>,
    pub events: Arc<Mutex<Vec<BridgeEvent>>>,
    _script: tempfile::TempPath,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct BridgeError(pub String);

impl Bridge {
    /// Starts the bridge and waits (up to `ready`) for its lanes; its stderr goes to `log`.
    pub fn start(s: &RaySettings, log: &Path, ready: Duration) -> Result<Bridge, BridgeError> {
        let err = |m: String| BridgeError(m);
        let gpus = s.max_lanes.unwrap_or(0).to_string();
        // Out of the terminal's process group, as the judges are: a Ctrl-C is the
        // orchestrator's, which lets the jobs in flight finish through the bridge.
        let (mut child, script) = spawn(s, &["--gpus".as_ref(), gpus.as_ref()], log, true).map_err(err)?;
        let stdout = child.stdout.take().ok_or_else(|| err("the Ray bridge has no stdout".into()))?;
        let stdin = child.stdin.take();
        let (first_tx, first_rx) = mpsc::channel::<Result<Vec<LaneWhere>, String>>();
        let waiting: Waiting = Arc::new(Mutex::new(Some(HashMap::new())));
        let events = Arc::new(Mutex::new(Vec::new()));
        {
            let (waiting, events) = (waiting.clone(), events.clone());
            std::thread::spawn(move || read_replies(BufReader::new(stdout), first_tx, waiting, events));
        }
        let lanes = match first_rx.recv_timeout(ready) {
            Ok(Ok(lanes)) if !lanes.is_empty() => lanes,
            Ok(Ok(_)) => return Err(stop(child, "the Ray bridge started no lane".into())),
            Ok(Err(m)) => return Err(stop(child, format!("{m}{}", log_tail(log)))),
            Err(_) => {
                return Err(stop(
                    child,
                    format!("the Ray bridge listed no lanes within {} s (its log: {})", ready.as_secs(), log.display()),
                ))
            }
        };
        Ok(Bridge {
            stdin: Mutex::new(stdin),
            child: Mutex::new(child),
            waiting,
            next: AtomicU64::new(1),
            lanes,
            events,
            _script: script,
        })
    }

    /// Sends `payload` to lane `lane` and waits for its answer.
    pub fn call(&self, lane: usize, payload: &str) -> Result<Answer, BridgeError> {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        match self.waiting.lock().unwrap().as_mut() {
            Some(w) => w.insert(id, tx),
            None => return Err(BridgeError("the Ray bridge has ended".into())),
        };
        let line = serde_json::json!({ "job": id, "lane": lane, "payload": payload }).to_string();
        let sent = match self.stdin.lock().unwrap().as_mut() {
            Some(stdin) => writeln!(stdin, "{line}").and_then(|_| stdin.flush()).is_ok(),
            None => false,
        };
        if !sent {
            if let Some(w) = self.waiting.lock().unwrap().as_mut() {
                w.remove(&id);
            }
            return Err(BridgeError("the Ray bridge does not take jobs any more".into()));
        }
        rx.recv().map_err(|_| BridgeError("the Ray bridge ended before answering".into()))
    }

    pub fn events(&self) -> Vec<BridgeEvent> {
        self.events.lock().unwrap().clone()
    }
}

impl Drop for Bridge {
    /// Closing stdin lets the bridge finish what is in flight and release its actors.
    fn drop(&mut self) {
        self.stdin.lock().unwrap().take();
        let mut child = self.child.lock().unwrap();
        for _ in 0..100 {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Starts the bridge (written to a temporary file, removed when the returned path is
/// dropped) on `s`'s cluster with `extra` arguments, its stdin and stdout piped to us
/// and its stderr appended to `log` (a resumed run keeps its earlier sessions' log);
/// in a process group of its own when `own_group`.
pub fn spawn(
    s: &RaySettings,
    extra: &[&std::ffi::OsStr],
    log: &Path,
    own_group: bool,
) -> Result<(Child, tempfile::TempPath), String> {
    let mut script = tempfile::Builder::new()
        .prefix("nightshift-ray-bridge-")
        .suffix(".py")
        .tempfile()
        .map_err(|e| format!("cannot write the Ray bridge: {e}"))?;
    script.write_all(SCRIPT.as_bytes()).map_err(|e| format!("cannot write the Ray bridge: {e}"))?;
    let script = script.into_temp_path();
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let mut cmd = Command::new(&s.python);
    cmd.arg("-u")
        .arg(&*script)
        .arg("--address")
        .arg(&s.address)
        .arg("--binary")
        .arg(&s.binary)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file));
    if own_group {
        cmd.process_group(0);
    }
    let child = cmd.spawn().map_err(|e| {
        format!("cannot start {} for the Ray bridge: {e} (install Ray: pip install \"ray[default]==2.60.0\")", s.python)
    })?;
    Ok((child, script))
}

/// The last lines of the bridge's log, to say why it ended.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    match lines.len() {
        0 => String::new(),
        n => format!(" (the bridge's log, {}, ends: {})", log.display(), lines[n.saturating_sub(3)..].join(" | ")),
    }
}

fn stop(mut child: Child, message: String) -> BridgeError {
    let _ = child.kill();
    let _ = child.wait();
    BridgeError(message)
}

fn read_replies(
    out: impl BufRead,
    first: mpsc::Sender<Result<Vec<LaneWhere>, String>>,
    waiting: Waiting,
    events: Arc<Mutex<Vec<BridgeEvent>>>,
) {
    #[derive(Deserialize)]
    struct Line {
        #[serde(default)]
        job: Option<u64>,
        #[serde(default)]
        event: Option<String>,
        #[serde(default)]
        lanes: Option<Vec<LaneWhere>>,
        #[serde(default)]
        message: Option<String>,
    }
    for line in out.lines() {
        let Ok(line) = line else { break };
        let Ok(head) = serde_json::from_str::<Line>(&line) else {
            tracing::warn!("the Ray bridge wrote a line that is not JSON: {line}");
            continue;
        };
        // An event may name a job (one sent again): only a line without an event answers.
        match (head.job, head.event.as_deref()) {
            (Some(id), None) => {
                let tx = waiting.lock().unwrap().as_mut().and_then(|w| w.remove(&id));
                match (tx, serde_json::from_str::<Answer>(&line)) {
                    (Some(tx), Ok(answer)) => {
                        let _ = tx.send(answer);
                    }
                    (Some(tx), Err(e)) => {
                        let error = Some(format!("the Ray bridge's answer does not read: {e}"));
                        let _ = tx.send(Answer {
                            ok: false,
                            error,
                            stdout: String::new(),
                            stderr: String::new(),
                            rc: None,
                            actor: None,
                            at: None,
                            tries: None,
                        });
                    }
                    (None, _) => tracing::warn!("the Ray bridge answered job {id} twice, or one never asked"),
                }
            }
            (_, Some("lanes")) => {
                let _ = first.send(Ok(head.lanes.unwrap_or_default()));
            }
            (_, Some("error")) => {
                let _ = first.send(Err(head.message.unwrap_or_else(|| "the Ray bridge failed".into())));
            }
            (_, Some(_)) => {
                if let Ok(e) = serde_json::from_str::<BridgeEvent>(&line) {
                    tracing::warn!("ray: {line}");
                    events.lock().unwrap().push(e);
                }
            }
            (None, None) => {}
        }
    }
    // The bridge is gone: every waiting job gets its channel closed, so no caller hangs,
    // and a start still waiting for the lanes hears why.
    waiting.lock().unwrap().take();
    let _ = first.send(Err("the Ray bridge ended before it listed its lanes".into()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_job_gets_its_own_answer_once_and_the_end_releases_every_waiter() {
        let lines = [
            r#"{"event": "lanes", "lanes": [{"host": "a", "node": "n0"}, {"host": "b", "node": "n1"}]}"#,
            r#"{"event": "lane-lost", "actor": 0, "where": {"host": "a", "node": "n0"}}"#,
            // An event naming a job is no answer to it.
            r#"{"event": "job-requeued", "job": 5, "lane": 0, "from_actor": 0}"#,
            r#"{"job": 5, "ok": true, "stdout": "{}", "tries": 2, "where": {"host": "b", "node": "n1"}}"#,
            r#"{"job": 5, "ok": true, "stdout": "again"}"#,
        ]
        .join("\n");
        let (first_tx, first_rx) = mpsc::channel();
        let waiting: Waiting = Arc::new(Mutex::new(Some(HashMap::new())));
        let (five_tx, five_rx) = mpsc::channel();
        let (six_tx, six_rx) = mpsc::channel();
        waiting.lock().unwrap().as_mut().unwrap().insert(5, five_tx);
        waiting.lock().unwrap().as_mut().unwrap().insert(6, six_tx);
        let events = Arc::new(Mutex::new(Vec::new()));
        read_replies(std::io::Cursor::new(lines), first_tx, waiting.clone(), events.clone());
        let lanes = first_rx.recv().unwrap().unwrap();
        assert_eq!(lanes.len(), 2);
        let five = five_rx.recv().unwrap();
        assert!(five.ok && five.tries == Some(2) && five.at.unwrap().node == "n1");
        assert!(five_rx.recv().is_err(), "job 5 was answered twice");
        // The bridge ended without answering job 6: its caller is released, not left waiting.
        assert!(six_rx.recv().is_err());
        assert!(waiting.lock().unwrap().is_none(), "a job sent after the end would wait forever");
        let kinds: Vec<String> = events.lock().unwrap().iter().map(|e| e.event.clone()).collect();
        assert_eq!(kinds, ["lane-lost", "job-requeued"]);
    }
}
