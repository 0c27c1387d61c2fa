//! `nightshift optimize`: the overnight loop. A run starts from the baseline (built once,
//! checked against the reference and timed once, by trusted code), then the orchestrator
//! ([`orchestrator`]) drives the `search` crate's tree: each selection becomes an
//! expansion task ([`expand`]) that profiles the parent once, asks the generator, builds
//! on a CPU slot and is judged on a GPU lane ([`lanes`]) by a judge process and its
//! sandboxed workers ([`evaluator`]). Everything lands in the run directory ([`store`]), whose append-only
//! event log ([`crate::run::events`]) is the source of truth for `--resume` ([`mod@resume`]).
//! At the end the best kernel is re-verified with more seeds and the sanitizers
//! ([`finish`]) and the result summarized ([`summary`]).
//!
//! This file starts a run: the preflight checks, the run directory, the baseline, and the
//! drive of a session from the search to the final check.

pub mod all;
pub mod dispatch;
pub mod evaluator;
pub mod expand;
pub mod finish;
pub mod lanes;
pub mod orchestrator;
pub mod progress;
pub mod remote;
pub mod resume;
pub mod simulated;
pub mod summary;
pub mod waits;

use crate::generate::{self, Generator};
use crate::run::config::{self, GeneratorSpec, RunConfig, RunFile};
use crate::run::events::{Candidate, Event, NodeSummary};
use crate::run::store::{self, node_rel, RunStore};
use crate::stats::Bar;
use crate::task::Task;
use crate::toolkit::toolchain::Toolchain;
use crate::wall::{self, EvalError, EvalOptions};
use expand::{Ctx, PhaseTimes};
use orchestrator::Search;
pub use resume::{resume, Overrides};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Why a run could not start or go on; maps to exit codes 2 (usage, task) and 3 (environment).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Env(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl RunError {
    /// A usage error saying what `e` says (the run directory, a replay source).
    fn usage(e: impl std::fmt::Display) -> RunError {
        RunError::Usage(e.to_string())
    }

    /// An internal error saying what `e` says (the run directory cannot be written).
    fn internal(e: impl std::fmt::Display) -> RunError {
        RunError::Internal(e.to_string())
    }
}

impl From<EvalError> for RunError {
    fn from(e: EvalError) -> Self {
        match e {
            EvalError::Task(m) => RunError::Usage(m),
            EvalError::Env(e) => RunError::Env(e.to_string()),
            EvalError::Internal(m) => RunError::Internal(m),
        }
    }
}

/// How to start a run, as the command line says.
pub struct Start {
    pub config: RunConfig,
    pub out: Option<PathBuf>,
    pub json: bool,
    pub api_key: Option<String>,
}

/// `runs/<task>-<YYYYmmdd-HHMMSS>` in UTC.
pub fn default_run_dir(task: &str) -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let digits: String = stamp.chars().filter(|c| c.is_ascii_digit()).collect();
    let (date, time) = digits.split_at(8.min(digits.len()));
    PathBuf::from("runs").join(format!("{task}-{date}-{time}"))
}

fn runtime() -> Result<tokio::runtime::Runtime, RunError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| RunError::Internal(format!("cannot start the async runtime: {e}")))
}

fn init_logging(dir: &Path) {
    let Ok(file) = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("log.jsonl")) else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .json()
        .with_writer(Mutex::new(file))
        .with_env_filter(tracing_subscriber::EnvFilter::new("nightshift=info"))
        .try_init();
}

fn eval_options(cfg: &RunConfig) -> Result<EvalOptions, RunError> {
    let exe =
        std::env::current_exe().map_err(|e| RunError::Env(format!("cannot find the nightshift executable: {e}")))?;
    let mut opts = EvalOptions::new(exe);
    opts.arch = Some(cfg.arch.clone());
    opts.timeout = cfg.timeout_s.map(Duration::from_secs_f64);
    opts.build_timeout = cfg.build_timeout_s.map(Duration::from_secs_f64);
    opts.seed_base = cfg.input_seed_base;
    opts.allow_unconfined_profiling = cfg.allow_unconfined_profiling;
    // Several lanes share the host's cores for input generation and comparison; remote
    // lanes use their own hosts', so here the cores are the builds'.
    if cfg.ray.is_none() {
        opts.threads = (opts.threads / cfg.gpus.len().max(1)).max(2);
    }
    Ok(opts)
}

/// The Ray cluster's lanes: the bridge started, one lane per actor it reports.
fn remote_lanes(
    bench: evaluator::Bench,
    ray: &config::RaySettings,
    cfg: &RunConfig,
    run_dir: &Path,
) -> Result<(Arc<dyn evaluator::Evaluator>, Vec<usize>), RunError> {
    let log = run_dir.join("ray-bridge.log");
    let bridge = remote::bridge::Bridge::start(ray, &log, Duration::from_secs(300))
        .map_err(|e| RunError::Env(format!("--ray {}: {e}", ray.address)))?;
    for (k, at) in bridge.lanes.iter().enumerate() {
        let gpu = if at.gpu.is_empty() { "a GPU" } else { at.gpu.as_str() };
        tracing::info!(lane = k, host = %at.host, node = %at.node, "Ray lane on {gpu}");
    }
    let lanes: Vec<usize> = (0..bridge.lanes.len()).collect();
    let settings = remote::job::LaneSettings {
        simulated: cfg.simulated.clone(),
        timeout_s: cfg.timeout_s,
        build_timeout_s: cfg.build_timeout_s,
        input_seed_base: cfg.input_seed_base,
        energy: bench.energy,
        allow_unconfined_profiling: cfg.allow_unconfined_profiling,
    };
    let ev = remote::RemoteEvaluator::new(bench, Arc::new(bridge), settings, ray.verify_gpu.clone(), run_dir)
        .map_err(RunError::Usage)?;
    Ok((Arc::new(ev), lanes))
}

fn make_generator(cfg: &RunConfig, task: &Task, api_key: Option<String>) -> Result<Generator, RunError> {
    Ok(match &cfg.generator {
        GeneratorSpec::Tune => {
            let source = std::fs::read_to_string(&task.baseline)
                .map_err(|e| RunError::Usage(format!("{}: {e}", task.baseline.display())))?;
            let mut tuner = generate::tune::Tuner::new(task, &source, cfg.seed, cfg.guidance);
            if task.has_reference() {
                let reference = std::fs::read_to_string(&task.reference)
                    .map_err(|e| RunError::Usage(format!("{}: {e}", task.reference.display())))?;
                let name = task.reference.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                tuner = tuner.starting_from(&name, reference);
            }
            Generator::Tune(tuner)
        }
        GeneratorSpec::Llm(s) => Generator::Llm(
            generate::llm::LlmGenerator::new(s.clone(), api_key).map_err(|e| RunError::Env(e.to_string()))?,
        ),
        GeneratorSpec::Replay { dir } => {
            Generator::Replay(generate::replay::Replay::load(dir).map_err(RunError::usage)?)
        }
    })
}

/// What a run needs before it may touch its directory.
struct Ready {
    task: Task,
    toolchain: Toolchain,
    generator: Generator,
}

/// The task, the toolkit, every GPU of the run and the generator, checked before a run
/// directory is created or opened: a run that cannot go on leaves nothing behind and
/// changes nothing.
fn preflight(cfg: &RunConfig, api_key: Option<String>) -> Result<Ready, RunError> {
    let task = Task::load(&cfg.task_dir).map_err(|e| RunError::Usage(format!("the run's task: {e}")))?;
    let toolchain = Toolchain::find().map_err(|e| RunError::Env(e.to_string()))?;
    // Remote lanes check their own hosts: a lane checks its GPU, and its hosted tools
    // before it profiles or sanitizes (`remote::lane_job`).
    let local_gpus = cfg.simulated.is_none() && cfg.ray.is_none();
    if local_gpus && (cfg.guidance != config::Guidance::None || cfg.final_sanitize) {
        // Profiles and the final sanitizer pass run hosted: a machine that refuses the
        // hosted arrangement would otherwise stop the run at its final check.
        let exe = std::env::current_exe()
            .map_err(|e| RunError::Env(format!("cannot find the nightshift executable: {e}")))?;
        let arrangement = wall::check_hosting(&exe, cfg.allow_unconfined_profiling)?;
        if !arrangement.confined {
            eprintln!(
                "warning: ncu and compute-sanitizer run unconfined (--allow-unconfined-profiling): {}",
                arrangement.shortfall()
            );
        }
    }
    if local_gpus {
        for &device in &cfg.gpus {
            wall::require_gpu(device).map_err(|e| RunError::Env(e.to_string()))?;
        }
    }
    let generator = make_generator(cfg, &task, api_key)?;
    Ok(Ready { task, toolchain, generator })
}

/// A new run directory until its baseline is judged: if the start fails before that, what
/// was created goes again, so no half-made run is left to look "still running".
struct Unstarted {
    dir: PathBuf,
    existed: bool,
    armed: bool,
}

impl Unstarted {
    fn started(mut self) {
        self.armed = false;
    }
}

impl Drop for Unstarted {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if self.existed {
            // It was an empty folder the user named: empty it again.
            if let Ok(entries) = std::fs::read_dir(&self.dir) {
                for e in entries.flatten() {
                    let p = e.path();
                    let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
                }
            }
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The shared context and the trusted builds; the baseline judged when `judge_root`.
struct Prepared {
    ctx: Arc<Ctx>,
    root: Option<(NodeSummary, wall::Verdict)>,
}

fn prepare(
    cfg: &RunConfig,
    task: &Task,
    tc: Toolchain,
    store: Arc<RunStore>,
    generator: Generator,
    root_summary: Option<NodeSummary>,
    rt: &tokio::runtime::Runtime,
) -> Result<Prepared, RunError> {
    let opts = eval_options(cfg)?;
    let trusted = wall::build_trusted(&tc, &opts, task, &cfg.arch)?;
    let bench = evaluator::Bench::new(task, trusted, &cfg.arch, opts.clone(), cfg);
    let (evaluator, devices) = match &cfg.ray {
        None => (evaluator::for_run(bench, cfg), cfg.gpus.clone()),
        Some(ray) => remote_lanes(bench, ray, cfg, store.dir())?,
    };
    let stages = Arc::new(waits::Stages::default());
    let lanes = {
        let _guard = rt.enter();
        Arc::new(lanes::Lanes::start(&devices, stages.clone()))
    };
    let (root_summary, root) = match root_summary {
        Some(s) => (s, None),
        None => {
            let ev = evaluator.clone();
            let verdict = rt
                .block_on(lanes.run(true, "judging the baseline".into(), move |device| ev.baseline(device)))
                .ok_or_else(|| RunError::Internal("no GPU lane".into()))?
                .1?;
            if !verdict.passed() {
                let f = verdict.failure.as_ref().map(|f| format!("{}: {}", f.class, f.message)).unwrap_or_default();
                return Err(RunError::Usage(format!(
                    "the baseline does not pass its own check, so nothing can be optimized: {f}"
                )));
            }
            (NodeSummary::of(&verdict), Some(verdict))
        }
    };
    let floor_ms = root_summary.pct_of_floor.zip(root_summary.candidate_ms).map(|(p, ms)| ms * p / 100.0);
    let ctx = Arc::new(Ctx {
        task: Arc::new(task.clone()),
        store,
        generator: Arc::new(generator),
        evaluator,
        lanes,
        toolchain: tc,
        cache: opts.cache.clone(),
        builds: tokio::sync::Semaphore::new(opts.threads.max(2)),
        stages,
        guidance: cfg.guidance,
        baseline: root_summary.clone(),
        floor_ms,
        seed: cfg.seed,
        profiles: Mutex::new(HashMap::new()),
        same_speed: cfg.min_gain,
        judged: Mutex::new(HashMap::new()),
        times: Mutex::new(PhaseTimes::default()),
    });
    Ok(Prepared { ctx, root: root.map(|v| (root_summary, v)) })
}

/// Starts a new run.
pub fn start(s: Start) -> Result<summary::Summary, RunError> {
    let cfg = s.config;
    let Ready { task, toolchain: tc, generator } = preflight(&cfg, s.api_key)?;
    let dir = s.out.clone().unwrap_or_else(|| default_run_dir(&task.name));
    let existed = dir.exists();
    let store = Arc::new(RunStore::create(&dir, cfg.simulated.is_some()).map_err(RunError::usage)?);
    let unstarted = Unstarted { dir: dir.clone(), existed, armed: true };
    init_logging(&dir);
    let mut run_file = RunFile {
        config: cfg.clone(),
        nightshift: env!("CARGO_PKG_VERSION").into(),
        nvcc: tc.nvcc_version.clone(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        devices: Vec::new(),
    };
    store.write_json(store::CONFIG, &run_file).map_err(RunError::internal)?;
    store.append(Event::Session { resumed: false, pid: std::process::id() }).map_err(RunError::internal)?;
    tracing::info!(task = %task.name, dir = %dir.display(), "run started");
    let rt = runtime()?;
    let progress = progress::Progress::new(cfg.budget(), s.json);
    progress.message(&format!(
        "nightshift optimize {}: judging the baseline; run directory {}",
        task.name,
        dir.display()
    ));
    let prepared = prepare(&cfg, &task, tc, store.clone(), generator, None, &rt).map_err(|e| match e {
        RunError::Env(m) => RunError::Env(format!("{m} (the run did not start; nothing was kept)")),
        other => other,
    })?;
    let ctx = prepared.ctx;
    let (root_summary, root_verdict) = prepared.root.expect("a new run judges its baseline");
    run_file.devices = root_verdict.device.clone().into_iter().collect();
    store.write_json(store::CONFIG, &run_file).map_err(RunError::internal)?;
    let baseline_source = std::fs::read(&task.baseline).map_err(|e| RunError::Usage(e.to_string()))?;
    let root_candidate =
        Candidate { source: format!("{}/kernel.cu", node_rel(0)), defines: Default::default(), flags: vec![] };
    store.write_source(&root_candidate.source, &baseline_source).map_err(RunError::internal)?;
    store.write_json(&format!("{}/verdict.json", node_rel(0)), &root_verdict).map_err(RunError::internal)?;
    store.write_json(&format!("{}/candidate.json", node_rel(0)), &root_candidate).map_err(RunError::internal)?;
    store
        .append(Event::Baseline { summary: root_summary.clone(), candidate: root_candidate.clone() })
        .map_err(RunError::internal)?;
    unstarted.started();
    progress.node(0, "baseline", &root_summary, None);
    let mut search = Search::new(&cfg, root_candidate, root_summary);
    drive(&cfg, &task, ctx, &mut search, 0.0, None, &rt, progress)
}

/// The search, then the final re-verification and the summary. `prior` is the result an
/// earlier session confirmed: it stands when this session judged nothing new.
#[allow(clippy::too_many_arguments)]
fn drive(
    cfg: &RunConfig,
    task: &Task,
    ctx: Arc<Ctx>,
    search: &mut Search,
    active_before: f64,
    prior: Option<crate::run::best::Best>,
    rt: &tokio::runtime::Runtime,
    progress: progress::Progress,
) -> Result<summary::Summary, RunError> {
    let baseline = search.summaries.get(&0).cloned().unwrap_or_default();
    let bar = Bar::new(cfg.min_gain, baseline.measured_speedup().as_ref());
    progress.message(&bar.describe());
    let judged_before = search.summaries.len();
    let ended = rt.block_on(orchestrator::run(
        ctx.clone(),
        search,
        cfg.budget(),
        active_before,
        match cfg.parallel {
            // A Ray run's default: three per lane the cluster gave.
            0 => 3 * ctx.lanes.len().max(1),
            p => p,
        },
        &progress,
    ));
    let dir = ctx.store.dir().display().to_string();
    if let Some(m) = &ended.fatal {
        progress.finish();
        let _ = ctx.store.append(Event::SessionStopped { why: format!("cannot go on: {m}") });
        if let Err(e) = crate::report::render(ctx.store.dir()) {
            tracing::warn!(error = %e, "the run report was not written");
        }
        return Err(RunError::Env(format!(
            "{m} (the run directory keeps everything judged so far: --resume {dir} carries on)"
        )));
    }
    let session_s = ended.active_s - active_before;
    let judged_now = search.summaries.len() > judged_before;
    let final_check = match prior {
        Some(best) if ended.abandoned || !judged_now => finish::Final { best, tried: vec![] },
        _ if ended.abandoned => finish::Final {
            best: crate::run::best::Best::none(
                bar,
                &baseline,
                "abandoned before the final check: --resume re-verifies".into(),
            ),
            tried: vec![],
        },
        _ => {
            progress.message("re-verifying the best kernels (more seeds, compute-sanitizer, a fresh timing)");
            match rt.block_on(finish::verify_best(&ctx, search, bar, cfg.final_seeds, cfg.final_sanitize)) {
                Ok(f) => f,
                Err(finish::EnvFailure(m)) => {
                    progress.finish();
                    let _ =
                        ctx.store.append(Event::SessionStopped { why: format!("the final check could not run: {m}") });
                    // The live report was written mid-search: let it say where things stand.
                    if let Err(e) = crate::report::render(ctx.store.dir()) {
                        tracing::warn!(error = %e, "the run report was not written");
                    }
                    return Err(RunError::Env(format!(
                        "the final check could not run: {m}. This is the environment, not a kernel: nothing in {dir} was changed (best.cu and best.json are as they were); --resume {dir} re-verifies"
                    )));
                }
            }
        }
    };
    progress.finish();
    let summary = summary::Summary::build(
        ctx.store.dir().to_path_buf(),
        &task.name,
        ctx.store.simulated(),
        cfg.generator.name(),
        search,
        session_s,
        ended.active_s,
        ctx.times.lock().unwrap().clone(),
        ctx.lanes.stats(),
        ctx.generator.usage(),
        final_check,
    );
    let _ = ctx.store.write_json(crate::run::summary::SUMMARY, &summary);
    let _ = ctx.store.append(Event::RunFinished {
        best: summary.best.node,
        speedup: summary.best.speedup,
        verified: summary.best.verified,
    });
    tracing::info!(best = summary.best.node, speedup = summary.best.speedup, "run finished");
    if let Err(e) = crate::report::render(ctx.store.dir()) {
        tracing::warn!(error = %e, "the run report was not written");
    }
    Ok(summary)
}
