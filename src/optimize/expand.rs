//! One expansion, from selection to verdict, as an async task: profile the parent (once
//! per node, shared by every expansion that needs it), ask the generator, save the
//! proposal, build it on a CPU slot, judge it on a GPU lane, save the verdict. It reports
//! back to the orchestrator with one [`Done`] message; the tree is only touched there.

use super::evaluator::{Evaluator, Profiled};
use super::lanes::Lanes;
use super::waits::Stage;
use crate::generate::{Generator, ParentProfile, Proposal, Request};
use crate::run::events::{Candidate, Event, NodeSummary};
use crate::run::failure::NodeFailure;
use crate::run::store::{node_rel, RunStore};
use crate::task::Task;
use crate::toolkit::build::{self, BuildSpec};
use crate::toolkit::toolchain::Toolchain;
use crate::wall::protocol::FailureClass;
use crate::wall::{EvalError, Verdict};
use search::{Expansion, NodeId};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{OnceCell, Semaphore};

/// What every expansion shares.
pub struct Ctx {
    pub task: Arc<Task>,
    pub store: Arc<RunStore>,
    pub generator: Arc<Generator>,
    pub evaluator: Arc<dyn Evaluator>,
    pub lanes: Arc<Lanes>,
    pub toolchain: Toolchain,
    pub cache: PathBuf,
    pub builds: Semaphore,
    /// Where the expansions are, for what an idle lane waits for.
    pub stages: Arc<super::waits::Stages>,
    pub guidance: crate::run::config::Guidance,
    pub baseline: NodeSummary,
    pub floor_ms: Option<f64>,
    pub seed: u64,
    /// Profiles by node, computed at most once.
    pub profiles: Mutex<HashMap<NodeId, Arc<OnceCell<ParentProfile>>>>,
    /// Two kernels whose speedups differ by less than this fraction (`--min-gain`) run at
    /// the same speed: a node that matches its nearest profiled ancestor uses its profile.
    pub same_speed: f64,
    /// Judged kernels by content key: a repeat is not judged again.
    pub judged: Mutex<HashMap<String, (NodeId, NodeSummary)>>,
    pub times: Mutex<PhaseTimes>,
}

pub use crate::run::summary::PhaseTimes;

/// The selection and the parent's state at the time it was made.
pub struct Job {
    pub id: NodeId,
    pub parent: NodeId,
    pub kind: Expansion,
    pub parent_candidate: Candidate,
    pub parent_summary: NodeSummary,
    pub memory: search::memory::Memory,
    /// The techniques from the baseline to the parent.
    pub path: Vec<String>,
    /// The parent's ancestors, nearest first, with their speedups where they passed.
    pub ancestors: Vec<(NodeId, Option<f64>)>,
    /// A proposal saved before a resume: build and judge it, no new generation.
    pub redo: Option<(Candidate, String, Option<String>)>,
}

pub enum Done {
    Finished {
        id: NodeId,
        summary: Box<NodeSummary>,
        candidate: Option<Candidate>,
        technique: String,
        tool: Option<String>,
        lane: Option<usize>,
        duplicate_of: Option<NodeId>,
        /// The failure is the generator's or ours, not a kernel's: nothing to repair.
        no_kernel: bool,
    },
    /// Nothing from this parent (`stop`: nothing more at all).
    Dropped { id: NodeId, parent: NodeId, why: String, stop: bool },
    /// The environment failed (no GPU any more): the run cannot go on.
    Fatal { id: NodeId, message: String },
}

/// The content key of a candidate: its source and its build configuration.
pub fn content_key(source: &str, c: &Candidate) -> String {
    let mut h = Sha256::new();
    h.update(source.as_bytes());
    h.update([0]);
    h.update(c.config_label().as_bytes());
    h.finalize().iter().take(12).map(|b| format!("{b:02x}")).collect()
}

fn read_source(store: &RunStore, rel: &str) -> String {
    crate::run::store::read_source(store.dir(), rel).unwrap_or_default()
}

/// The profile of the nearest ancestor that has one, when a parent at `speedup` runs at
/// the speed of the node that profile was made on (within `same_speed`, a fraction): the
/// same code, or a change that moved nothing, has the same bottlenecks, and a profile
/// costs a lane more than a judgment. Compared with the node that was profiled, never with
/// one that shared, so that small steps cannot drift away from what was measured.
fn shared_profile(
    profiles: &HashMap<NodeId, Arc<OnceCell<ParentProfile>>>,
    speedup: Option<f64>,
    ancestors: &[(NodeId, Option<f64>)],
    same_speed: f64,
) -> Option<ParentProfile> {
    let speedup = speedup?;
    let (at, profile) = ancestors.iter().find_map(|(id, _)| profiles.get(id)?.get().map(|p| (*id, p)))?;
    profile.diagnoses.as_ref()?;
    let origin = profile.shared_from.unwrap_or(at);
    let origin_speedup = ancestors.iter().find(|(id, _)| *id == origin)?.1?;
    // Only the points are kept for ancestors: the margin alone decides.
    if !crate::stats::Speedup::unmeasured(origin_speedup).same_speed(speedup, same_speed) {
        return None;
    }
    Some(ParentProfile {
        note: format!(
            "the profile of node {origin}: this kernel's speedup ({speedup:.3}x) is within {:.1}% of that node's ({origin_speedup:.3}x), so it was not profiled again (the source lines are node {origin}'s)",
            100.0 * same_speed
        ),
        shared_from: Some(origin),
        ..profile.clone()
    })
}

/// The first three diagnoses of each kernel, as the event log lists them.
fn top_diagnoses(p: &ParentProfile) -> Vec<String> {
    p.diagnoses
        .iter()
        .flat_map(|r| r.kernels.iter().flat_map(|k| k.diagnoses.iter().take(3)))
        .map(|d| format!("{} {:.0}%", d.tool, 100.0 * d.score))
        .collect()
}

fn log_error(r: Result<impl Sized, impl std::fmt::Display>) {
    if let Err(e) = r {
        tracing::error!("{e}");
        eprintln!("warning: {e}");
    }
}

impl Ctx {
    /// The parent's profile: computed on the first request, then shared by every
    /// expansion of the parent. A parent that runs at its nearest profiled ancestor's speed
    /// is not profiled at all: it uses that ancestor's profile ([`Ctx::same_speed`]).
    async fn profile_of(self: &Arc<Self>, job: &Job) -> ParentProfile {
        let parent = job.parent;
        let cell = self.profiles.lock().unwrap().entry(parent).or_default().clone();
        let ctx = self.clone();
        let candidate = job.parent_candidate.clone();
        let speedup = job.parent_summary.passed.then_some(job.parent_summary.speedup).flatten();
        let ancestors = job.ancestors.clone();
        cell.get_or_init(|| async move {
            if let Some(shared) = ctx.ancestor_profile(speedup, &ancestors) {
                ctx.times.lock().unwrap().profiles_shared += 1;
                log_error(ctx.store.append(Event::Profiled {
                    id: parent,
                    ok: true,
                    seconds: 0.0,
                    top: top_diagnoses(&shared),
                    note: shared.note.clone(),
                    sandbox: Vec::new(),
                    shared_from: shared.shared_from,
                }));
                return shared;
            }
            // The root is the baseline, built once as trusted (it may link cuBLAS).
            let built = if parent == 0 {
                Ok(ctx.evaluator.bench().trusted.baseline.clone())
            } else {
                ctx.build(&candidate).await
            };
            let built = match built {
                Ok(b) => b,
                Err(note) => return ParentProfile { note, ..Default::default() },
            };
            let dir = ctx.store.node_dir(parent).join("profile");
            let ev = ctx.evaluator.clone();
            let what = format!("profiling node {parent}");
            // A remote lane builds the kernel again from its source; the root from the task's.
            let source = (parent != 0).then(|| (ctx.store.dir().join(&candidate.source), candidate.clone()));
            let got: Profiled = match ctx
                .lanes
                .run(true, what, move |device| {
                    ev.profile(device, &built, source.as_ref().map(|(p, c)| (p.as_path(), c)), &dir)
                })
                .await
            {
                Some((_, p)) => p,
                None => return ParentProfile { note: "no GPU lane".into(), ..Default::default() },
            };
            let rel = node_rel(parent);
            if let Some(r) = &got.profile.diagnoses {
                log_error(ctx.store.write_json(&format!("{rel}/diagnoses.json"), r));
            }
            if let Some(raw) = &got.profile.raw {
                log_error(ctx.store.write(&format!("{rel}/counters.txt"), raw.as_bytes()));
            }
            let top = top_diagnoses(&got.profile);
            {
                let mut t = ctx.times.lock().unwrap();
                t.profile_s += got.seconds;
                t.profiles += 1;
            }
            log_error(ctx.store.append(Event::Profiled {
                id: parent,
                ok: got.profile.diagnoses.is_some(),
                seconds: got.seconds,
                top,
                note: got.profile.note.clone(),
                sandbox: got.sandbox.clone(),
                shared_from: None,
            }));
            got.profile
        })
        .await
        .clone()
    }

    fn ancestor_profile(&self, speedup: Option<f64>, ancestors: &[(NodeId, Option<f64>)]) -> Option<ParentProfile> {
        shared_profile(&self.profiles.lock().unwrap(), speedup, ancestors, self.same_speed)
    }

    /// Builds a candidate on a CPU slot (cached by content).
    async fn build(self: &Arc<Self>, c: &Candidate) -> Result<crate::toolkit::build::Built, String> {
        match self.build_verdict(c).await {
            Ok((b, _)) => Ok(b),
            Err(Ok(v)) => Err(v.failure.map(|f| f.message).unwrap_or_default()),
            Err(Err(e)) => Err(e),
        }
    }

    /// Ok(built, seconds), or Err(Ok(verdict)) for a rejected build, Err(Err(msg)) when
    /// the build could not run at all.
    async fn build_verdict(
        self: &Arc<Self>,
        c: &Candidate,
    ) -> Result<(crate::toolkit::build::Built, f64), Result<Box<Verdict>, String>> {
        let _building = self.stages.enter(Stage::Build);
        let _slot = self.builds.acquire().await.map_err(|e| Err(e.to_string()))?;
        let ctx = self.clone();
        let c = c.clone();
        let started = Instant::now();
        let path = self.store.dir().join(&c.source);
        let arch = self.evaluator.bench().arch.clone();
        let result = tokio::task::spawn_blocking(move || {
            let spec = BuildSpec {
                task: &ctx.task,
                source: &path,
                trusted: false,
                arch: arch.clone(),
                extra_flags: c.flags.clone(),
                defines: c.defines.clone(),
            };
            match crate::wall::build_confined(&ctx.toolchain, &ctx.evaluator.bench().opts, &spec) {
                Ok(b) => Ok(b),
                Err(build::BuildError::Rejected { failure, dir, .. }) => {
                    Err(Ok(Box::new(Verdict::build_rejected(&ctx.task, &path, &arch, &failure, &dir))))
                }
                Err(e) => Err(Err(e.to_string())),
            }
        })
        .await
        .map_err(|e| Err(format!("the build task failed: {e}")))?;
        let secs = started.elapsed().as_secs_f64();
        self.times.lock().unwrap().build_s += secs;
        result.map(|b| (b, secs))
    }
}

/// Runs one expansion to its end.
pub async fn expand(ctx: Arc<Ctx>, job: Job) -> Done {
    let id = job.id;
    let rel = node_rel(id);
    let (candidate, technique, tool) = match job.redo.clone() {
        Some(r) => r,
        None => match propose(&ctx, &job).await {
            Ok(p) => p,
            Err(done) => return done,
        },
    };
    let finished =
        |summary: NodeSummary, lane: Option<usize>, duplicate_of: Option<NodeId>, no_kernel: bool| Done::Finished {
            id,
            summary: Box::new(summary),
            candidate: Some(candidate.clone()),
            technique: technique.clone(),
            tool: tool.clone(),
            lane,
            duplicate_of,
            no_kernel,
        };

    let source = read_source(&ctx.store, &candidate.source);
    let key = content_key(&source, &candidate);
    if let Some((of, summary)) = ctx.judged.lock().unwrap().get(&key).cloned() {
        return finished(summary, None, Some(of), false);
    }

    let (built, seconds) = match ctx.build_verdict(&candidate).await {
        Ok(b) => b,
        Err(Ok(verdict)) => {
            log_error(ctx.store.append(Event::NodeBuilt { id, ok: false, cached: false, seconds: 0.0 }));
            if let Some(log) = &verdict.stderr_tail {
                log_error(ctx.store.write(&format!("{rel}/build.log"), log.as_bytes()));
            }
            log_error(ctx.store.write_json(&format!("{rel}/verdict.json"), &*verdict));
            let summary = NodeSummary::of(&verdict);
            // A build that ran out of time may finish next time: a repeat is built again.
            if verdict.failure.as_ref().is_none_or(|f| f.class != FailureClass::BuildTimeout) {
                ctx.judged.lock().unwrap().insert(key, (id, summary.clone()));
            }
            return finished(summary, None, None, false);
        }
        Err(Err(message)) => return finished(NodeSummary::failed(NodeFailure::Internal, &message), None, None, true),
    };
    log_error(ctx.store.append(Event::NodeBuilt { id, ok: true, cached: built.cached, seconds }));
    if let Ok(log) = std::fs::read(built.dir.join(build::LOG_NAME)) {
        log_error(ctx.store.write(&format!("{rel}/build.log"), &log));
    }
    if let Some(s) = built.sass_lines.as_ref().or(built.sass.as_ref()) {
        if let Ok(text) = std::fs::read(s) {
            log_error(ctx.store.write(&format!("{rel}/sass.txt"), &text));
        }
    }

    let ev = ctx.evaluator.clone();
    let path = ctx.store.dir().join(&candidate.source);
    let cand = candidate.clone();
    let result = ctx
        .lanes
        .run(false, format!("judging node {id}"), move |device| {
            let started = Instant::now();
            (ev.judge(device, &built, &path, &cand), started.elapsed().as_secs_f64())
        })
        .await;
    let (lane, verdict) = match result {
        None => return Done::Fatal { id, message: "the GPU lanes stopped".into() },
        Some((lane, (r, seconds))) => {
            let mut t = ctx.times.lock().unwrap();
            t.judge_s += seconds;
            t.judgments += 1;
            (lane, r)
        }
    };
    match verdict {
        Ok(v) => {
            log_error(ctx.store.write_json(&format!("{rel}/verdict.json"), &v));
            let summary = NodeSummary::of(&v);
            ctx.judged.lock().unwrap().insert(key, (id, summary.clone()));
            finished(summary, Some(lane), None, false)
        }
        Err(EvalError::Env(e)) => Done::Fatal { id, message: e.to_string() },
        Err(e) => {
            // Not the candidate's doing (a worker bug, a GPU error outside its code): kept
            // as a failure so it never ranks, and not repaired.
            let summary = NodeSummary::failed(NodeFailure::Internal, &e.to_string());
            log_error(ctx.store.write_json(&format!("{rel}/verdict.json"), &summary));
            finished(summary, Some(lane), None, true)
        }
    }
}

/// Asks the generator for node `job.id` and saves what it said.
async fn propose(ctx: &Arc<Ctx>, job: &Job) -> Result<(Candidate, String, Option<String>), Done> {
    let id = job.id;
    let rel = node_rel(id);
    let parent_source = read_source(&ctx.store, &job.parent_candidate.source);
    let profile = if job.kind == Expansion::Improve
        && job.parent_summary.passed
        && ctx.guidance != crate::run::config::Guidance::None
    {
        let _waiting = ctx.stages.enter(Stage::Profile);
        ctx.profile_of(job).await
    } else {
        ParentProfile { note: "not profiled (--guidance none, or a repair)".into(), ..Default::default() }
    };
    let failure_detail = match job.kind {
        Expansion::Repair => {
            let dir = ctx.store.node_dir(job.parent);
            let log = std::fs::read_to_string(dir.join("build.log")).ok();
            let tail = |s: &str| s.chars().rev().take(3000).collect::<Vec<_>>().into_iter().rev().collect::<String>();
            log.filter(|_| job.parent_summary.failure_class == Some(NodeFailure::Kernel(FailureClass::BuildError)))
                .map(|l| tail(&l))
                .or_else(|| job.parent_summary.failure_message.clone())
        }
        Expansion::Improve => None,
    };
    let req = Request {
        node: id,
        parent: job.parent,
        kind: job.kind,
        task: ctx.task.clone(),
        parent_candidate: job.parent_candidate.clone(),
        parent_source,
        parent_summary: job.parent_summary.clone(),
        baseline_summary: ctx.baseline.clone(),
        failure_detail,
        profile,
        guidance: ctx.guidance,
        memory: job.memory.clone(),
        path: job.path.clone(),
        floor_ms: ctx.floor_ms,
        seed: ctx.seed,
    };
    let started = Instant::now();
    let generated = {
        let _generating = ctx.stages.enter(Stage::Generate);
        ctx.generator.propose(&req).await
    };
    ctx.times.lock().unwrap().generate_s += started.elapsed().as_secs_f64();
    for a in &generated.attempts {
        log_error(ctx.store.append(Event::LlmAttempt {
            id,
            attempt: a.attempt,
            status: a.status.clone(),
            wait_s: a.wait_s,
        }));
    }
    if let Some(p) = &generated.prompt {
        log_error(ctx.store.write(&format!("{rel}/prompt.md"), p.as_bytes()));
    }
    if let Some(r) = &generated.reply {
        log_error(ctx.store.write(&format!("{rel}/reply.md"), r.as_bytes()));
    }
    match generated.proposal {
        Proposal::Kernel(k) => {
            let candidate = Candidate { source: format!("{rel}/kernel.cu"), defines: k.defines, flags: k.flags };
            if let Err(e) = ctx.store.write_source(&candidate.source, k.source.as_bytes()) {
                return Err(Done::Fatal { id, message: e.to_string() });
            }
            log_error(ctx.store.write_json(&format!("{rel}/candidate.json"), &candidate));
            if let Err(e) = ctx.store.append(Event::NodeProposed {
                id,
                candidate: candidate.clone(),
                technique: k.technique.clone(),
                tool: k.tool.clone(),
                usage: generated.usage,
            }) {
                return Err(Done::Fatal { id, message: e.to_string() });
            }
            Ok((candidate, k.technique, k.tool))
        }
        Proposal::Failed { class, message } => {
            let summary = NodeSummary::failed(class, &message);
            log_error(ctx.store.write_json(&format!("{rel}/verdict.json"), &summary));
            if let Some(usage) = generated.usage {
                // Tokens spent on a failed reply count too.
                log_error(ctx.store.append(Event::NodeProposed {
                    id,
                    candidate: Candidate { source: String::new(), defines: Default::default(), flags: vec![] },
                    technique: "none".into(),
                    tool: None,
                    usage: Some(usage),
                }));
            }
            Err(Done::Finished {
                id,
                summary: Box::new(summary),
                candidate: None,
                technique: "none".into(),
                tool: None,
                lane: None,
                duplicate_of: None,
                no_kernel: true,
            })
        }
        Proposal::Nothing(why) => Err(Done::Dropped { id, parent: job.parent, why, stop: false }),
        Proposal::Stop(why) => Err(Done::Dropped { id, parent: job.parent, why, stop: true }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profiles(made: &[(NodeId, Option<NodeId>)]) -> HashMap<NodeId, Arc<OnceCell<ParentProfile>>> {
        made.iter()
            .map(|&(id, shared_from)| {
                let p =
                    ParentProfile { diagnoses: Some(heuristics::Report::default()), shared_from, ..Default::default() };
                (id, Arc::new(OnceCell::new_with(Some(p))))
            })
            .collect()
    }

    #[test]
    fn a_parent_at_its_profiled_ancestors_speed_shares_that_profile() {
        let made = profiles(&[(0, None), (1, None)]);
        // Parent 3 under 2 under 1: 1 was profiled at 1.219x, 2 never was.
        let ancestors = [(2, Some(1.22)), (1, Some(1.219)), (0, Some(1.0))];
        let shared = shared_profile(&made, Some(1.224), &ancestors, 0.01).expect("within 1% of node 1");
        assert_eq!(shared.shared_from, Some(1));
        assert!(shared.note.contains("node 1"), "{}", shared.note);
        assert!(shared_profile(&made, Some(1.12), &ancestors, 0.01).is_none(), "8% slower is profiled");
        assert!(shared_profile(&made, Some(1.30), &ancestors, 0.01).is_none(), "7% faster is profiled");
        assert!(shared_profile(&made, Some(1.219), &ancestors, 0.0).is_none(), "--min-gain 0 shares nothing");
        assert!(shared_profile(&made, None, &ancestors, 0.01).is_none(), "a failed parent has no speed");
    }

    #[test]
    fn sharing_compares_with_the_node_that_was_profiled_not_one_that_shared() {
        // Node 2 shared node 1's profile; its parent drifts 0.8% per step.
        let made = profiles(&[(1, None), (2, Some(1))]);
        let ancestors = [(2, Some(1.008)), (1, Some(1.0))];
        assert_eq!(shared_profile(&made, Some(1.009), &ancestors, 0.01).unwrap().shared_from, Some(1));
        assert!(shared_profile(&made, Some(1.016), &ancestors, 0.01).is_none(), "1.6% from node 1");
    }

    #[test]
    fn only_the_nearest_ancestor_with_a_profile_counts() {
        // Node 2 was profiled and is slower; node 1 matches but is further up.
        let made = profiles(&[(1, None), (2, None)]);
        let ancestors = [(2, Some(0.9)), (1, Some(1.0))];
        assert!(shared_profile(&made, Some(1.0), &ancestors, 0.01).is_none());
        // A profile that failed (no diagnoses) is nothing to share.
        let mut failed = profiles(&[]);
        failed.insert(1, Arc::new(OnceCell::new_with(Some(ParentProfile::default()))));
        assert!(shared_profile(&failed, Some(1.0), &[(1, Some(1.0))], 0.01).is_none());
    }
}
