//! `nightshift optimize`: the overnight loop. A run starts from the baseline (built once,
//! checked against the reference and timed once, by trusted code), then the orchestrator
//! ([`orchestrator`]) drives the `search` crate's tree: each selection becomes an
//! expansion task ([`expand`]) that profiles the parent once, asks the generator, builds
//! on a CPU slot and is judged on a GPU lane ([`lanes`]) by a fresh isolated worker
//! ([`evaluator`]). Everything lands in the run directory ([`store`]), whose append-only
//! event log ([`events`]) is the source of truth for `--resume`. At the end the best
//! kernel is re-verified with more seeds and the sanitizers ([`finish`]) and the result
//! summarized ([`summary`]).

pub mod evaluator;
pub mod expand;
pub mod finish;
pub mod lanes;
pub mod orchestrator;
pub mod progress;
pub mod summary;
pub mod waits;

use crate::generate::{self, Generator};
use crate::run::config::{self, GeneratorSpec, RunConfig, RunFile};
use crate::run::events::{self, Candidate, Event, NodeSummary, Usage};
use crate::run::store::{self, node_rel, RunStore};
use crate::stats::Bar;
use crate::task::Task;
use crate::toolkit::toolchain::Toolchain;
use crate::wall::{self, EvalError, EvalOptions};
use expand::{content_key, Ctx, Job, PhaseTimes};
use orchestrator::Search;
use std::collections::{BTreeSet, HashMap};
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
fn default_run_dir(task: &str) -> PathBuf {
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
    opts.seed_base = cfg.input_seed_base;
    opts.allow_unconfined_profiling = cfg.allow_unconfined_profiling;
    // Several lanes share the host's cores for input generation and comparison.
    opts.threads = (opts.threads / cfg.gpus.len().max(1)).max(2);
    Ok(opts)
}

fn make_generator(cfg: &RunConfig, task: &Task, api_key: Option<String>) -> Result<Generator, RunError> {
    Ok(match &cfg.generator {
        GeneratorSpec::Tune => {
            let source = std::fs::read_to_string(&task.baseline)
                .map_err(|e| RunError::Usage(format!("{}: {e}", task.baseline.display())))?;
            Generator::Tune(generate::tune::Tuner::new(task, &source, cfg.seed, cfg.guidance))
        }
        GeneratorSpec::Llm(s) => Generator::Llm(
            generate::llm::LlmGenerator::new(s.clone(), api_key).map_err(|e| RunError::Env(e.to_string()))?,
        ),
        GeneratorSpec::Replay { dir } => {
            Generator::Replay(generate::replay::Replay::load(dir).map_err(RunError::usage)?)
        }
    })
}

fn search_config(cfg: &RunConfig) -> search::Config {
    let mut c = search::Config::default();
    c.reward.objective = cfg.objective;
    c
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
    if cfg.simulated.is_none() && (cfg.guidance != config::Guidance::None || cfg.final_sanitize) {
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
    if cfg.simulated.is_none() {
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
    let evaluator = Arc::new(evaluator::Evaluator::new(task, trusted, &cfg.arch, opts.clone(), cfg));
    let stages = Arc::new(waits::Stages::default());
    let lanes = {
        let _guard = rt.enter();
        Arc::new(lanes::Lanes::start(&cfg.gpus, stages.clone()))
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
    store.write(&root_candidate.source, &baseline_source).map_err(RunError::internal)?;
    store.write_json(&format!("{}/verdict.json", node_rel(0)), &root_verdict).map_err(RunError::internal)?;
    store.write_json(&format!("{}/candidate.json", node_rel(0)), &root_candidate).map_err(RunError::internal)?;
    store
        .append(Event::Baseline { summary: root_summary.clone(), candidate: root_candidate.clone() })
        .map_err(RunError::internal)?;
    unstarted.started();
    progress.node(0, "baseline", &root_summary, None);
    let mut search = Search {
        tree: search::Tree::new(root_candidate, search_config(&cfg), cfg.seed),
        summaries: HashMap::from([(0, root_summary)]),
        strategy: cfg.strategy,
        repairs: matches!(cfg.generator, GeneratorSpec::Llm(_)),
        max_nodes: cfg.max_nodes,
        redo: Vec::new(),
        stop_reason: None,
        outcomes: Default::default(),
        timeline: Vec::new(),
    };
    drive(&cfg, &task, ctx, &mut search, 0.0, None, &rt, progress)
}

/// What `--resume` may change about a run: how long and how far it goes on, and whether
/// this session may profile unconfined.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub budget_s: Option<f64>,
    pub max_nodes: Option<usize>,
    pub allow_unconfined_profiling: bool,
}

/// Carries on a run from its directory.
///
/// Everything it needs (the run's files, the task, the toolkit, the GPUs) is checked
/// before the directory is locked or written, so a resume that cannot go on leaves every
/// file as it was.
pub fn resume(
    dir: &Path,
    json: bool,
    api_key: Option<String>,
    overrides: Overrides,
) -> Result<summary::Summary, RunError> {
    let text = std::fs::read(dir.join(store::CONFIG))
        .map_err(|e| RunError::Usage(format!("{}: not a run directory ({}: {e})", dir.display(), store::CONFIG)))?;
    let mut run_file: RunFile = serde_json::from_slice(&text)
        .map_err(|e| RunError::Usage(format!("{}: {e}", dir.join(store::CONFIG).display())))?;
    let log = std::fs::read_to_string(dir.join(store::EVENTS))
        .map_err(|e| RunError::Usage(format!("{}: not a run directory ({}: {e})", dir.display(), store::EVENTS)))?;
    let records = events::parse_log(&log).map_err(|e| RunError::Usage(format!("{}: {e}", dir.display())))?;
    let changed = overrides.budget_s.is_some() || overrides.max_nodes.is_some();
    if let Some(b) = overrides.budget_s {
        run_file.config.budget_s = Some(b);
    }
    if let Some(n) = overrides.max_nodes {
        run_file.config.max_nodes = Some(n);
    }
    run_file.config.allow_unconfined_profiling = overrides.allow_unconfined_profiling;
    let cfg = run_file.config.clone();
    let Ready { task, toolchain, generator } = preflight(&cfg, api_key)?;
    let store = Arc::new(RunStore::open(dir, cfg.simulated.is_some()).map_err(RunError::usage)?);
    init_logging(dir);
    if changed {
        store.write_json(store::CONFIG, &run_file).map_err(RunError::internal)?;
    }
    let finished_before = records.iter().any(|r| matches!(r.event, Event::RunFinished { .. }));
    let prior = finished_before.then(|| crate::run::best::read_best(dir)).flatten();

    let Replayed { search, proposals, finished, profiled, usage, active } = replay(&records, &cfg, dir, &generator)?;
    let mut search = search.ok_or_else(|| {
        RunError::Usage(format!("{}: the run never judged its baseline; start a new one", dir.display()))
    })?;
    if let Generator::Llm(l) = &generator {
        l.add_spent(&usage);
    }
    store.append(Event::Session { resumed: true, pid: std::process::id() }).map_err(RunError::internal)?;
    let rt = runtime()?;
    let progress = progress::Progress::new(cfg.budget(), json);
    let root_summary = search.summaries.get(&0).cloned().unwrap_or_default();
    let prepared = prepare(&cfg, &task, toolchain, store.clone(), generator, Some(root_summary), &rt)?;
    let ctx = prepared.ctx;

    remember_judged(&ctx, &search, &proposals, &finished, dir);
    read_back_profiles(&ctx, &store, profiled);
    redo_unfinished(&mut search, &proposals);
    progress.message(&format!(
        "resuming {}: {} nodes judged, {} to redo, {:.1} min of search done",
        dir.display(),
        search.summaries.len().saturating_sub(1),
        search.redo.len(),
        active / 60.0
    ));
    drive(&cfg, &task, ctx, &mut search, active, prior, &rt, progress)
}

/// A run's log replayed: the tree as it stood, and what the new session must know.
struct Replayed {
    search: Option<Search>,
    proposals: HashMap<usize, (Candidate, String, Option<String>)>,
    /// Nodes that got a verdict (or none to get).
    finished: BTreeSet<usize>,
    /// Nodes profiled on their own.
    profiled: BTreeSet<usize>,
    usage: Usage,
    /// Seconds of search before this session.
    active: f64,
}

/// Rebuilds the tree from the log, in the order things happened; the generator
/// remembers every proposal, so it never proposes one again.
fn replay(
    records: &[events::Record],
    cfg: &RunConfig,
    dir: &Path,
    generator: &Generator,
) -> Result<Replayed, RunError> {
    let mut search: Option<Search> = None;
    let mut proposals: HashMap<usize, (Candidate, String, Option<String>)> = HashMap::new();
    let mut finished: BTreeSet<usize> = BTreeSet::new();
    let mut profiled: BTreeSet<usize> = BTreeSet::new();
    let mut usage = Usage::default();
    let clock = events::active_clock(records);
    let active = clock.last().copied().unwrap_or(0.0);
    for (r, &at) in records.iter().zip(&clock) {
        match &r.event {
            Event::Baseline { summary, candidate } => {
                search = Some(Search {
                    tree: search::Tree::new(candidate.clone(), search_config(cfg), cfg.seed),
                    summaries: HashMap::from([(0, summary.clone())]),
                    strategy: cfg.strategy,
                    repairs: matches!(cfg.generator, GeneratorSpec::Llm(_)),
                    max_nodes: cfg.max_nodes,
                    redo: Vec::new(),
                    stop_reason: None,
                    outcomes: Default::default(),
                    timeline: Vec::new(),
                });
            }
            Event::NodeStarted { id, parent, kind } => {
                let s = search
                    .as_mut()
                    .ok_or_else(|| RunError::Usage("events.jsonl: a node before the baseline".into()))?;
                let payload = s.tree.node(*parent).payload.clone();
                let got = s.tree.add_pending(
                    &search::Selection { parent: *parent, kind: *kind },
                    payload,
                    Default::default(),
                );
                if got != *id {
                    return Err(RunError::Usage(format!(
                        "events.jsonl: node {id} replays as {got}: the log is inconsistent"
                    )));
                }
            }
            Event::NodeProposed { id, candidate, technique, tool, usage: u } => {
                if let Some(u) = u {
                    usage.add(u);
                }
                if !candidate.source.is_empty() {
                    let source =
                        store::unmarked(std::fs::read_to_string(dir.join(&candidate.source)).unwrap_or_default());
                    generator.remember(candidate, &source);
                    proposals.insert(*id, (candidate.clone(), technique.clone(), tool.clone()));
                }
            }
            Event::NoProposal { id, parent, stop, .. } => {
                if let Some(s) = search.as_mut() {
                    s.drop_node(*id, *parent, *stop);
                }
                finished.insert(*id);
            }
            Event::NodeFinished { id, summary, .. } => {
                let s = search
                    .as_mut()
                    .ok_or_else(|| RunError::Usage("events.jsonl: a node before the baseline".into()))?;
                let p = proposals.get(id).cloned();
                let intent = search::Intent {
                    technique: p.as_ref().map(|p| p.1.clone()).unwrap_or_else(|| "none".into()),
                    tool: p.as_ref().and_then(|p| p.2.clone()),
                };
                let no_kernel = p.is_none();
                s.finish(*id, summary.clone(), p.map(|p| p.0), intent, no_kernel, at);
                finished.insert(*id);
            }
            // A shared profile is decided again: its ancestor's is read back below.
            Event::Profiled { id, shared_from: None, .. } => {
                profiled.insert(*id);
            }
            _ => {}
        }
    }
    Ok(Replayed { search, proposals, finished, profiled, usage, active })
}

/// What was already judged is never judged again.
fn remember_judged(
    ctx: &Ctx,
    search: &Search,
    proposals: &HashMap<usize, (Candidate, String, Option<String>)>,
    finished: &BTreeSet<usize>,
    dir: &Path,
) {
    for id in finished {
        if let (Some(s), Some((c, _, _))) = (search.summaries.get(id), proposals.get(id)) {
            let source = store::unmarked(std::fs::read_to_string(dir.join(&c.source)).unwrap_or_default());
            ctx.judged.lock().unwrap().insert(content_key(&source, c), (*id, s.clone()));
        }
    }
}

/// Profiles taken in earlier sessions, read back from the node folders.
fn read_back_profiles(ctx: &Ctx, store: &RunStore, profiled: BTreeSet<usize>) {
    for id in profiled {
        let node_dir = store.node_dir(id);
        let diagnoses = std::fs::read(node_dir.join("diagnoses.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|mut v| {
                v.as_object_mut().map(|o| o.remove("simulated"));
                serde_json::from_value::<heuristics::Report>(v).ok()
            });
        let raw = std::fs::read_to_string(node_dir.join("counters.txt")).ok();
        let note = "read back from an earlier session".into();
        let p = generate::ParentProfile { diagnoses, raw, note, shared_from: None };
        ctx.profiles.lock().unwrap().insert(id, Arc::new(tokio::sync::OnceCell::new_with(Some(p))));
    }
}

/// Nodes that were in flight when the run stopped are redone, their saved proposals
/// judged without asking the generator again.
fn redo_unfinished(search: &mut Search, proposals: &HashMap<usize, (Candidate, String, Option<String>)>) {
    let pending: Vec<usize> =
        search.tree.nodes().iter().filter(|n| n.id != 0 && n.outcome.is_none() && !n.cancelled).map(|n| n.id).collect();
    for id in pending {
        let n = search.tree.node(id);
        let parent = n.parent.unwrap_or(0);
        search.redo.push(Job {
            id,
            parent,
            kind: n.kind,
            parent_candidate: search.tree.node(parent).payload.clone(),
            parent_summary: search.summaries.get(&parent).cloned().unwrap_or_default(),
            memory: search.tree.memory.clone(),
            path: search.path_to(parent),
            ancestors: search.ancestors_of(parent),
            redo: proposals.get(&id).cloned(),
        });
    }
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
        cfg.parallel.max(1),
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
    let _ = ctx.store.write_json("summary.json", &summary);
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
