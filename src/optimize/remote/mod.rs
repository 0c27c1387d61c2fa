//! Remote lanes: `optimize --ray ADDRESS` judges on the GPUs of a Ray cluster. The
//! orchestrator keeps the run directory, the search, the builds that decide whether a
//! kernel compiles, and the reports; each lane is a Ray actor holding one GPU that runs
//! `nightshift lane-job` on its own host: the same judge, sandbox and builds as a local
//! lane, built for that GPU's arch, so each speedup is against the baseline on the GPU
//! that measured it. The rest of the run sees an [`Evaluator`] like any other: lane k of
//! [`super::lanes::Lanes`] is actor k of the bridge.
//!
//! Faults are the bridge's (`bridge.py`): a job whose actor or node is lost is sent to a
//! live lane (every actor of a lost node is taken as lost) and answered once, so no node
//! counts twice or is lost; a lane whose host cannot work, or the loss of every lane,
//! stops the run as a local GPU's failure does, keeping what was found. `ray.jsonl` in the
//! run directory records each answered job, lost lane and resent job; each verdict says
//! where it was judged.
//!
//! The cluster's hosts are the user's and run only this binary: a candidate runs only in
//! a lane's sandboxed worker, as it would locally, and the reply is printed by the lane's
//! own process, never by the candidate's.

pub mod bridge;
pub mod job;
pub mod lane_job;

use self::bridge::{Bridge, BridgeEvent};
use self::job::{CandidateSource, JobKind, LaneJob, LaneReply, LaneSettings, TaskFiles};
use super::evaluator::{self, Bench, Counters, Evaluator, Profiled};
use crate::run::events::Candidate;
use crate::toolkit::build::Built;
use crate::toolkit::toolchain::EnvError;
use crate::wall::{EvalError, Verdict};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub use self::bridge::RaySettings;

/// Judges on remote lanes through the bridge.
pub struct RemoteEvaluator {
    /// The run's bench on the orchestrator's host: what the reports and builds read.
    bench: Bench,
    bridge: Arc<Bridge>,
    task: TaskFiles,
    settings: LaneSettings,
    /// Ray's events as they came (lost lanes, resent jobs), appended to `ray.jsonl`.
    log: std::path::PathBuf,
    logged: std::sync::Mutex<usize>,
    /// `--ray-verify-gpu`: the final check goes to a lane whose GPU's name holds this.
    verify_gpu: Option<String>,
}

impl RemoteEvaluator {
    pub fn new(
        bench: Bench,
        bridge: Arc<Bridge>,
        settings: LaneSettings,
        verify_gpu: Option<String>,
        run_dir: &Path,
    ) -> Result<RemoteEvaluator, String> {
        let dir = &bench.task.dir;
        for (what, path) in [("baseline", &bench.task.baseline), ("reference", &bench.task.reference)] {
            if !path.starts_with(dir) {
                return Err(format!(
                    "{}: the task's {what} {} lies outside its folder, and remote lanes get the folder alone",
                    dir.display(),
                    path.display()
                ));
            }
        }
        if let Some(inc) = bench.task.build.include.iter().find(|i| !safe_below(i)) {
            return Err(format!(
                "{}: the include folder {inc:?} lies outside the task folder, and remote lanes get the folder alone",
                dir.display()
            ));
        }
        let task = TaskFiles::read(dir)?;
        Ok(RemoteEvaluator {
            bench,
            bridge,
            task,
            settings,
            log: run_dir.join("ray.jsonl"),
            logged: std::sync::Mutex::new(0),
            verify_gpu,
        })
    }

    fn job(&self, kind: JobKind, source: Option<(&Path, &Candidate)>) -> Result<LaneJob, EvalError> {
        let candidate = match source {
            None => None,
            Some((path, c)) => Some(CandidateSource {
                file_name: path.file_name().and_then(|n| n.to_str()).unwrap_or("kernel.cu").to_string(),
                source: std::fs::read_to_string(path)
                    .map_err(|e| EvalError::Internal(format!("{}: {e}", path.display())))?,
                defines: c.defines.clone(),
                flags: c.flags.clone(),
            }),
        };
        Ok(LaneJob { task: self.task.clone(), kind, candidate, settings: self.settings.clone() })
    }

    /// Sends `job` to `lane` and reads the lane's reply; notes where it ran.
    fn send(&self, lane: usize, job: &LaneJob) -> Result<(LaneReply, String), EvalError> {
        let payload = serde_json::to_string(job).map_err(|e| EvalError::Internal(e.to_string()))?;
        let answer = self.bridge.call(lane, &payload).map_err(|e| lane_env(lane, e.to_string()));
        self.flush_events();
        let answer = answer?;
        if !answer.ok {
            let error = answer.error.unwrap_or_else(|| "the job failed".into());
            self.append(&[
                serde_json::json!({ "event": "job-failed", "kind": job.kind, "lane": lane, "error": error }),
            ]);
            return Err(lane_env(lane, error));
        }
        let reply: LaneReply = serde_json::from_str(answer.stdout.trim()).map_err(|e| {
            lane_env(
                lane,
                format!("nightshift lane-job answered no reply ({e}; exit {:?}): {}", answer.rc, answer.stderr.trim()),
            )
        })?;
        let at = answer.at.unwrap_or_default();
        self.append(&[serde_json::json!({
            "event": "job-done",
            "kind": job.kind,
            "lane": lane,
            "host": at.host,
            "node": at.node,
            "gpu": at.gpu,
            "tries": answer.tries.unwrap_or(1),
        })]);
        let mut note = format!(
            "judged on {} at {} (Ray lane {lane}, node {})",
            if at.gpu.is_empty() { "its GPU" } else { &at.gpu },
            at.host,
            at.node
        );
        if let Some(t) = answer.tries.filter(|&t| t > 1) {
            note.push_str(&format!("; sent {t} times: the lanes before were lost"));
        }
        Ok((reply, note))
    }

    fn verdict(&self, lane: usize, job: LaneJob, source: &Path) -> Result<Verdict, EvalError> {
        match self.send(lane, &job)? {
            (LaneReply::Verdict { mut verdict }, note) => {
                verdict.candidate = source.to_path_buf();
                verdict.notes.push(note);
                Ok(*verdict)
            }
            (LaneReply::Failed { message, env: true }, _) => Err(lane_env(lane, message)),
            (LaneReply::Failed { message, env: false }, _) => {
                Err(EvalError::Internal(format!("Ray lane {lane}: {message}")))
            }
            (LaneReply::Profile { .. }, _) => {
                Err(EvalError::Internal(format!("Ray lane {lane} answered a judgment with a profile")))
            }
        }
    }

    /// Appends the bridge's new events to `ray.jsonl`.
    fn flush_events(&self) {
        let events: Vec<BridgeEvent> = self.bridge.events();
        let mut done = self.logged.lock().unwrap();
        if events.len() <= *done {
            return;
        }
        let lines: Vec<serde_json::Value> =
            events[*done..].iter().filter_map(|e| serde_json::to_value(e).ok()).collect();
        self.append(&lines);
        *done = events.len();
    }

    /// Appends `lines` to `ray.jsonl`, the run's record of what each lane did.
    fn append(&self, lines: &[serde_json::Value]) {
        use std::io::Write;
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = written {
            tracing::warn!("{}: {e}", self.log.display());
        }
    }
}

/// Whether `rel` names a path below its folder (plain names only).
fn safe_below(rel: &str) -> bool {
    let p = Path::new(rel);
    !rel.is_empty()
        && p.components().all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir))
}

/// The first lane whose GPU's name holds `name`, case aside. Its actor takes the job after
/// any it has queued: one job at a time per GPU still holds.
fn lane_with_gpu(lanes: &[bridge::LaneWhere], name: &str) -> Option<usize> {
    let want = name.to_lowercase();
    lanes.iter().position(|l| l.gpu.to_lowercase().contains(&want))
}

/// A lane that cannot work (the bridge gone, every lane lost, a host without the toolkit)
/// is the environment's failure, never a candidate's: the run stops there and keeps what
/// it has, as it does when a local GPU fails.
fn lane_env(lane: usize, what: String) -> EvalError {
    EvalError::Env(EnvError {
        what: format!("a working Ray lane (lane {lane}: {what})"),
        hint: "the run folder's ray.jsonl and ray-bridge.log say what the cluster did".into(),
    })
}

impl Evaluator for RemoteEvaluator {
    fn bench(&self) -> &Bench {
        &self.bench
    }

    fn baseline(&self, lane: usize) -> Result<Verdict, EvalError> {
        let job = self.job(JobKind::Baseline, None)?;
        self.verdict(lane, job, &self.bench.task.baseline)
    }

    fn judge(&self, lane: usize, _built: &Built, source: &Path, candidate: &Candidate) -> Result<Verdict, EvalError> {
        let job = self.job(JobKind::Judge, Some((source, candidate)))?;
        self.verdict(lane, job, source)
    }

    fn final_check(
        &self,
        lane: usize,
        _built: &Built,
        source: &Path,
        candidate: &Candidate,
        seeds: u32,
        sanitize: bool,
    ) -> Result<Verdict, EvalError> {
        let job = self.job(JobKind::FinalCheck { seeds, sanitize }, Some((source, candidate)))?;
        let lane = match &self.verify_gpu {
            None => lane,
            Some(name) => lane_with_gpu(&self.bridge.lanes, name).ok_or_else(|| {
                lane_env(lane, format!("no lane of the cluster has a GPU named like {name:?} to re-verify on"))
            })?,
        };
        self.verdict(lane, job, source)
    }

    fn profile(&self, lane: usize, built: &Built, source: Option<(&Path, &Candidate)>, _dir: &Path) -> Profiled {
        let started = Instant::now();
        let job = match self.job(JobKind::Profile, source) {
            Ok(j) => j,
            Err(e) => return Profiled::unprofiled(e.to_string(), started),
        };
        match self.send(lane, &job) {
            Ok((LaneReply::Profile { csv: Some(csv), .. }, _)) => {
                // The counters are the lane's GPU's; the SASS is this host's build of the
                // same source, which the diagnoses cite by line.
                evaluator::diagnose(&self.bench, built, Counters { csv, sandbox: Vec::new() }, started)
            }
            Ok((LaneReply::Profile { csv: None, note, .. }, _)) => Profiled::unprofiled(note, started),
            Ok((LaneReply::Failed { message, .. }, _)) => {
                Profiled::unprofiled(format!("Ray lane {lane}: {message}"), started)
            }
            Ok((LaneReply::Verdict { .. }, _)) => {
                Profiled::unprofiled(format!("Ray lane {lane} answered a profile with a verdict"), started)
            }
            Err(e) => Profiled::unprofiled(e.to_string(), started),
        }
    }

    fn sanitizer(&self) -> Option<bool> {
        // Each lane's host runs its own compute-sanitizer: the final check's lane checks
        // it is there (and may run hosted) before it starts, and a lane without it stops
        // the run there, as a local host without it does.
        self.settings.simulated.is_none().then_some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::bridge::LaneWhere;
    use super::lane_with_gpu;

    #[test]
    fn the_final_check_goes_to_the_lane_of_the_gpu_the_user_named() {
        let lane = |gpu: &str| LaneWhere { host: "h".into(), node: "n".into(), gpu: gpu.into() };
        let lanes = [lane("NVIDIA H100 80GB HBM3"), lane(""), lane("NVIDIA H200")];
        assert_eq!(lane_with_gpu(&lanes, "h200"), Some(2));
        assert_eq!(lane_with_gpu(&lanes, "H100"), Some(0));
        assert_eq!(lane_with_gpu(&lanes, "B200"), None);
    }
}
