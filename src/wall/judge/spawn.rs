//! Running one judgment from the orchestrator: `nightshift judge REQUEST` in a process
//! group of its own with a scrubbed environment, holding the GPU's lock, its lines followed
//! until it reports or the deadline passes. The judge is our code alone and its stdout is
//! a pipe no worker holds, so its report is believed; a judge that dies without one is a
//! nightshift failure, never a kernel's.

use crate::toolkit::process;
use crate::wall::judge::verdict::EvalError;
use crate::wall::protocol::{JudgeMessage, JudgeReport, JudgeRequest, Mode, Phase};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The longest line read from the judge (its report, notes included, is a few kilobytes).
const MAX_LINE: u64 = 16 << 20;

/// Time the orchestrator gives the judge past its own deadline to report.
pub const GRACE: Duration = Duration::from_secs(20);

/// Everything observed about one judge process.
#[derive(Debug, Default)]
pub struct JudgeRun {
    pub report: Option<Box<JudgeReport>>,
    pub last_phase: Option<(Phase, String)>,
    /// Seconds per phase by the orchestrator's clock, from one announcement to the next.
    pub phase_seconds: BTreeMap<String, f64>,
    /// A line that did not parse (a nightshift bug).
    pub unreadable: Option<String>,
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub stderr: String,
    pub seconds: f64,
    /// Seconds spent waiting for another process to finish with the GPU.
    pub gpu_wait_s: f64,
}

impl JudgeRun {
    /// The report, or what the judge's end says without one.
    pub fn into_report(self, timeout: Duration) -> Result<JudgeReport, EvalError> {
        if let Some(r) = self.report {
            return Ok(*r);
        }
        let where_ = match &self.last_phase {
            Some((p, d)) => format!("during {} ({d})", p.name()),
            None => "before it said anything".into(),
        };
        let stderr = crate::wall::tail(&self.stderr, 2000);
        if let Some(u) = self.unreadable {
            return Err(EvalError::Internal(format!("the judge printed a line that does not parse {where_}: {u}")));
        }
        if self.timed_out {
            return Err(EvalError::Internal(format!(
                "the judge ran past the {:.0} s deadline {where_} without a report: {stderr}",
                (timeout + GRACE).as_secs_f64()
            )));
        }
        Err(EvalError::Internal(format!(
            "the judge ended with {} {where_} without a report: {stderr}",
            self.status.map(process::describe_status).unwrap_or_else(|| "no status".into())
        )))
    }
}

fn follow(stdout: impl Read) -> JudgeRun {
    let mut run = JudgeRun::default();
    let mut current: Option<(Phase, Instant)> = None;
    let close = |run: &mut JudgeRun, current: &mut Option<(Phase, Instant)>| {
        if let Some((p, t)) = current.take() {
            *run.phase_seconds.entry(p.name().to_string()).or_default() += t.elapsed().as_secs_f64();
        }
    };
    let mut reader = BufReader::new(stdout);
    loop {
        let mut raw = Vec::new();
        match (&mut reader).take(MAX_LINE).read_until(b'\n', &mut raw) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&raw);
        match serde_json::from_str::<JudgeMessage>(line.trim_end()) {
            Ok(JudgeMessage::Phase { phase, detail }) => {
                close(&mut run, &mut current);
                current = Some((phase, Instant::now()));
                run.last_phase = Some((phase, detail));
            }
            Ok(JudgeMessage::Done { report }) => {
                close(&mut run, &mut current);
                run.report = Some(report);
            }
            Err(e) => {
                let excerpt: String = line.chars().take(300).collect();
                run.unreadable.get_or_insert(format!("{e}: {excerpt}"));
            }
        }
    }
    close(&mut run, &mut current);
    run
}

/// Runs `exe judge` on `request` (its folder the orchestrator's private evaluation
/// folder), holding the GPU lock unless simulated, for at most `timeout` plus [`GRACE`].
pub fn run_judge(exe: &Path, request: &JudgeRequest, timeout: Duration) -> Result<JudgeRun, EvalError> {
    let folder = &request.folder;
    let req_path = folder.join("judge.json");
    let bytes = serde_json::to_vec(request).map_err(|e| EvalError::Internal(format!("the judge's request: {e}")))?;
    std::fs::write(&req_path, bytes)
        .map_err(|e| EvalError::Internal(format!("cannot write {}: {e}", req_path.display())))?;
    let mut cmd = Command::new(exe);
    cmd.arg("judge").arg(&req_path).current_dir(folder);
    process::isolate(&mut cmd).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let simulated = matches!(request.mode, Mode::Simulate { .. });
    let lock = if simulated || std::env::var_os("NIGHTSHIFT_GPU_LOCK").is_some_and(|v| v == "off") {
        None
    } else {
        let path = crate::wall::gpu_lock::lock_path(request.device).map_err(|e| EvalError::Internal(e.to_string()))?;
        Some(
            crate::wall::gpu_lock::acquire(&path)
                .map_err(|e| EvalError::Internal(format!("cannot take the GPU lock {}: {e}", path.display())))?,
        )
    };
    let started = Instant::now();
    let mut child =
        cmd.spawn().map_err(|e| EvalError::Internal(format!("cannot start the judge {}: {e}", exe.display())))?;
    let stdout = child.stdout.take().ok_or_else(|| EvalError::Internal("the judge's stdout".into()))?;
    let mut stderr = child.stderr.take().ok_or_else(|| EvalError::Internal("the judge's stderr".into()))?;
    let lines = std::thread::spawn(move || follow(stdout));
    let errors = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let _ = (&mut stderr).take(1 << 20).read_to_end(&mut kept);
        // Drain the rest so the judge never blocks on a full pipe.
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        String::from_utf8_lossy(&kept).into_owned()
    });
    process::track_group(&child);
    let waited = process::wait_or_kill(&mut child, started + timeout + GRACE);
    process::forget_group(&child);
    let (status, timed_out) = waited.map_err(|e| EvalError::Internal(e.to_string()))?;
    let mut run = lines.join().unwrap_or_default();
    run.stderr = errors.join().unwrap_or_default();
    run.status = status;
    run.timed_out = timed_out;
    run.seconds = started.elapsed().as_secs_f64();
    run.gpu_wait_s = lock.map(|l| l.waited.as_secs_f64()).unwrap_or(0.0);
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wall::protocol::Outcome;

    #[test]
    fn the_report_and_the_phases_are_read_and_garbage_is_named() {
        let lines = [
            serde_json::to_string(&JudgeMessage::Phase { phase: Phase::Check, detail: "3 cases".into() }).unwrap(),
            serde_json::to_string(&JudgeMessage::Done { report: Box::new(JudgeReport::of(Outcome::Passed)) }).unwrap(),
        ]
        .join("\n");
        let run = follow(lines.as_bytes());
        assert!(matches!(run.report.as_ref().unwrap().outcome, Outcome::Passed));
        assert!(run.phase_seconds.contains_key("check"));
        assert!(run.unreadable.is_none());
        let bad = follow("not json\n".as_bytes());
        assert!(bad.unreadable.is_some());
        assert!(
            matches!(bad.into_report(Duration::from_secs(1)), Err(EvalError::Internal(m)) if m.contains("does not parse"))
        );
    }
}
