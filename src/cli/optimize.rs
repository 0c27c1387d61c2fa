//! `nightshift optimize`: flags and `nightshift.toml` resolved into a run configuration,
//! then the run (or its resume), its summary and the exit code: 0 a faster kernel was
//! found and re-verified, 1 the run ended without one, 2 bad usage or task, 3 the
//! environment (GPU, driver, tools, endpoint).

use super::{fail, print_json, EXIT_ENV, EXIT_PASSED, EXIT_REJECTED, EXIT_USAGE};
use crate::optimize::{self, RunError, Start};
use crate::run::config::{self, GeneratorSpec, Guidance, LlmSettings, RunConfig, SimSettings, Strategy};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The task directory (task.toml + baseline), or nothing with --resume.
    pub task: Option<PathBuf>,
    /// Carry on a run from its directory (after a kill, a Ctrl-C, or with a larger --budget
    /// or --max-nodes, which then replace the run's).
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "task")]
    pub resume: Option<PathBuf>,
    /// Wall time for the search: a number and a unit (s, m, h, d), e.g. 90s, 10m, 1.5h, 8h,
    /// 1h30m (default: until nothing is left or --max-nodes).
    // Hyphen values reach the parser, so `-5m` is told the budget must be positive
    // instead of clap's "unexpected argument '-5'".
    #[arg(long, value_name = "DURATION", value_parser = config::parse_budget, allow_hyphen_values = true)]
    pub budget: Option<std::time::Duration>,
    /// Stop after this many nodes (kernels proposed after the baseline).
    #[arg(long)]
    pub max_nodes: Option<usize>,
    /// tune (built in, no network), llm (OPENAI_BASE_URL, OPENAI_API_KEY, --model), or replay:DIR.
    #[arg(long, default_value = "tune")]
    pub generator: String,
    /// time, energy, or weighted:W (W = weight of time, 0..1).
    #[arg(long, default_value = "time")]
    pub objective: String,
    /// Seed of the search's and the tuner's choices (input data is drawn fresh for every run regardless).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// CUDA devices to use, one GPU lane each: 0,1 (default 0). With --ray, one number:
    /// at most this many lanes.
    #[arg(long, value_delimiter = ',')]
    pub gpus: Option<Vec<usize>>,
    #[command(flatten)]
    pub cluster: RayArgs,
    /// With --ray: re-verify the best kernel on a lane whose GPU's name holds this
    /// (e.g. H200); the run's final check says so, or that no lane has one.
    #[arg(long, value_name = "GPU", requires = "ray")]
    pub ray_verify_gpu: Option<String>,
    /// The run directory (default: runs/<task>-<UTC time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Which search decides what to expand next.
    #[arg(long, value_enum, default_value = "mcts")]
    pub strategy: Strategy,
    /// What the generator is told about the parent's profile.
    #[arg(long, value_enum, default_value = "tools")]
    pub guidance: Guidance,
    /// Expansions in flight at once (generation requests, builds, queued judgments).
    #[arg(long)]
    pub parallel: Option<usize>,
    /// The LLM's model name.
    #[arg(long)]
    pub model: Option<String>,
    /// Dollars per million prompt tokens, for cost accounting.
    #[arg(long)]
    pub price_in: Option<f64>,
    /// Dollars per million completion tokens.
    #[arg(long)]
    pub price_out: Option<f64>,
    /// Stop generating once this many tokens are spent.
    #[arg(long)]
    pub max_tokens: Option<u64>,
    /// Stop generating once this many dollars are spent.
    #[arg(long)]
    pub max_cost: Option<f64>,
    /// Longest reply, in tokens.
    #[arg(long)]
    pub max_reply_tokens: Option<u32>,
    /// Seconds before an LLM request is given up (then retried).
    #[arg(long)]
    pub request_timeout: Option<f64>,
    /// Retries of an LLM request after a 429, 5xx or timeout.
    #[arg(long)]
    pub retries: Option<u32>,
    /// A nightshift.toml with an [llm] table (default: ./nightshift.toml if present).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Seconds before a judgment (the judge and its workers) is killed (default: the task's, else 120).
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Seconds one build may take before nvcc is killed: the kernel's verdict is
    /// `build-timeout`, never cached (default: the task's [build] timeout_s, else 120).
    #[arg(long, value_name = "SECONDS")]
    pub build_timeout: Option<f64>,
    /// Build target (default: the first GPU's own).
    #[arg(long)]
    pub arch: Option<String>,
    /// Check seeds for the end-of-run re-verification of the best kernel.
    #[arg(long)]
    pub final_seeds: Option<u32>,
    /// The gain a kernel must show to be called faster: the lower end of its 95% speedup
    /// interval must clear 1 + this (default 1%; raised when the baseline timed against
    /// itself strays further).
    #[arg(long, value_name = "PCT", allow_hyphen_values = true)]
    pub min_gain: Option<String>,
    /// Skip compute-sanitizer in the end-of-run re-verification.
    #[arg(long)]
    pub no_final_sanitize: bool,
    /// Run ncu and compute-sanitizer even where they cannot be confined in private
    /// namespaces (a kernel that forbids user namespaces): only the worker's own sandbox
    /// then stands between candidates and the host's /tmp, $HOME, /run and network.
    /// Needed again with --resume.
    #[arg(long)]
    pub allow_unconfined_profiling: bool,
    /// Print the final summary as JSON on stdout (and no progress display).
    #[arg(long)]
    pub json: bool,
    /// Tests only: a simulated evaluator instead of the GPU (builds are real; each
    /// judgment holds its lane MS milliseconds). Every file of such a run says so.
    #[arg(long, hide = true, value_name = "MS", num_args = 0..=1, default_missing_value = "50")]
    pub simulate_gpu: Option<u64>,
}

/// Where a Ray cluster is and how its hosts run nightshift (optimize and optimize-all).
#[derive(clap::Args, Debug)]
pub struct RayArgs {
    /// Judge on the GPUs of a Ray cluster at this address (`auto`, `host:6379`,
    /// `ray://host:10001`): one lane per GPU it offers, each a Ray actor running
    /// nightshift's own lane on its host. Needs `pip install "ray[default]==2.60.0"`.
    #[arg(long, value_name = "ADDRESS")]
    pub ray: Option<String>,
    /// With --ray: nightshift on the workers' hosts (default: this executable's path).
    #[arg(long, value_name = "PATH", requires = "ray")]
    pub ray_binary: Option<PathBuf>,
    /// With --ray: the Python that has Ray installed (default: python3).
    #[arg(long, value_name = "PYTHON", requires = "ray")]
    pub ray_python: Option<String>,
}

impl RayArgs {
    /// The cluster's settings, None without --ray.
    pub fn settings(
        &self,
        max_lanes: Option<usize>,
        verify_gpu: Option<String>,
    ) -> Result<Option<crate::run::config::RaySettings>, ExitCode> {
        let Some(address) = &self.ray else { return Ok(None) };
        let binary = match &self.ray_binary {
            Some(b) => b.clone(),
            None => std::env::current_exe()
                .map_err(|e| fail(EXIT_ENV, &format!("cannot find the nightshift executable: {e}")))?,
        };
        let python = self.ray_python.clone().unwrap_or_else(|| "python3".into());
        Ok(Some(crate::run::config::RaySettings { address: address.clone(), max_lanes, binary, python, verify_gpu }))
    }
}

/// The optional `nightshift.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    llm: LlmFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LlmFile {
    model: Option<String>,
    base_url: Option<String>,
    timeout_s: Option<f64>,
    retries: Option<u32>,
    max_reply_tokens: Option<u32>,
    temperature: Option<f32>,
    price_in: Option<f64>,
    price_out: Option<f64>,
    max_tokens: Option<u64>,
    max_cost: Option<f64>,
    parallel: Option<usize>,
}

/// Why nightshift.toml (or `--config`'s file) is refused.
#[derive(Debug, thiserror::Error)]
enum FileConfigError {
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: keep the API key out of files: set OPENAI_API_KEY instead", path.display())]
    ApiKey { path: PathBuf },
    #[error("{}: {source}", path.display())]
    Toml { path: PathBuf, source: toml::de::Error },
}

fn read_file_config(path: Option<&Path>) -> Result<FileConfig, FileConfigError> {
    let (path, required) = match path {
        Some(p) => (p.to_path_buf(), true),
        None => (PathBuf::from("nightshift.toml"), false),
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(_) if !required => return Ok(FileConfig::default()),
        Err(source) => return Err(FileConfigError::Read { path, source }),
    };
    if text.contains("api_key") {
        return Err(FileConfigError::ApiKey { path });
    }
    toml::from_str(&text).map_err(|source| FileConfigError::Toml { path, source })
}

/// A flag that must be a positive number and is not.
#[derive(Debug, thiserror::Error)]
#[error("{0} must be a positive number")]
struct NotPositive(&'static str);

fn positive(x: Option<f64>, what: &'static str) -> Result<Option<f64>, NotPositive> {
    match x {
        Some(v) if !(v.is_finite() && v > 0.0) => Err(NotPositive(what)),
        other => Ok(other),
    }
}

fn usage(m: impl std::fmt::Display) -> ExitCode {
    fail(EXIT_USAGE, &m.to_string())
}

fn resolve(a: &Args) -> Result<RunConfig, ExitCode> {
    let task_dir = a.task.clone().ok_or_else(|| usage("give a TASK directory, or --resume RUN_DIR"))?;
    let file = read_file_config(a.config.as_deref()).map_err(usage)?;
    let f = &file.llm;
    let llm = match a.model.clone().or(f.model.clone()) {
        Some(model) => Some(LlmSettings {
            model,
            base_url: f
                .base_url
                .clone()
                .or_else(|| std::env::var("OPENAI_BASE_URL").ok().filter(|s| !s.is_empty()))
                .unwrap_or_else(|| "https://api.openai.com/v1".into()),
            key_from_env: std::env::var_os("OPENAI_API_KEY").is_some(),
            timeout_s: positive(a.request_timeout.or(f.timeout_s), "--request-timeout")
                .map_err(usage)?
                .unwrap_or(300.0),
            retries: a.retries.or(f.retries).unwrap_or(3),
            max_reply_tokens: a.max_reply_tokens.or(f.max_reply_tokens).unwrap_or(16_000),
            temperature: f.temperature.unwrap_or(0.7),
            price_in: a.price_in.or(f.price_in).unwrap_or(0.0),
            price_out: a.price_out.or(f.price_out).unwrap_or(0.0),
            max_tokens: a.max_tokens.or(f.max_tokens),
            max_cost: positive(a.max_cost.or(f.max_cost), "--max-cost").map_err(usage)?,
        }),
        None => None,
    };
    let generator = GeneratorSpec::parse(&a.generator, llm).map_err(usage)?;
    if let GeneratorSpec::Replay { dir } = &generator {
        if !dir.is_dir() {
            return Err(usage(format!("--generator replay:{}: no such folder", dir.display())));
        }
    }
    let max_lanes = match (&a.cluster.ray, a.gpus.as_deref()) {
        (None, _) | (Some(_), None) => None,
        (Some(_), Some([n])) if *n > 0 => Some(*n),
        (Some(_), Some(_)) => return Err(usage("with --ray, --gpus is one number: at most this many lanes")),
    };
    let ray = a.cluster.settings(max_lanes, a.ray_verify_gpu.clone())?;
    let mut gpus = match (&ray, &a.gpus) {
        // Lane k of a Ray run is the bridge's actor k; how many there are is the
        // cluster's to say, so the configuration counts the cap (or one) here.
        (Some(r), _) => (0..r.max_lanes.unwrap_or(1)).collect(),
        (None, Some(g)) => g.clone(),
        (None, None) => vec![0],
    };
    if gpus.is_empty() {
        return Err(usage("--gpus needs at least one device"));
    }
    gpus.dedup();
    let per_lane = match generator {
        GeneratorSpec::Llm(_) => 4,
        _ => 3,
    };
    let parallel = match (a.parallel.or(f.parallel), &ray) {
        (Some(0), _) => return Err(usage("--parallel must be at least 1")),
        (Some(p), _) => p,
        // 0: as many per lane as the cluster turns out to have lanes.
        (None, Some(r)) if r.max_lanes.is_none() => 0,
        (None, _) => per_lane * gpus.len(),
    };
    if a.max_nodes == Some(0) {
        return Err(usage("--max-nodes must be at least 1"));
    }
    let simulated = a.simulate_gpu.map(|delay_ms| SimSettings { delay_ms });
    let arch = match (&a.arch, &simulated) {
        (Some(arch), _) => {
            crate::toolkit::build::gencode(arch).map_err(usage)?;
            arch.clone()
        }
        (None, Some(_)) => "sm_90a".into(),
        // The orchestrator's builds only tell whether a kernel compiles; each lane builds
        // again for its own GPU.
        (None, None) if ray.is_some() => "sm_90a".into(),
        (None, None) => {
            let (_, cc, _) = crate::wall::require_gpu(gpus[0])
                .map_err(|e| fail(EXIT_ENV, &format!("optimize judges every kernel on a GPU: {e}")))?;
            crate::toolkit::build::arch_for_capability(cc.0, cc.1)
        }
    };
    let task_dir = task_dir.canonicalize().unwrap_or(task_dir);
    Ok(RunConfig {
        task: task_dir.file_name().and_then(|n| n.to_str()).unwrap_or("task").to_string(),
        task_dir,
        budget_s: a.budget.map(|d| d.as_secs_f64()),
        max_nodes: a.max_nodes,
        generator,
        objective: config::parse_objective(&a.objective).map_err(usage)?,
        strategy: a.strategy,
        guidance: a.guidance,
        seed: a.seed,
        gpus,
        arch,
        parallel,
        timeout_s: positive(a.timeout, "--timeout").map_err(usage)?,
        build_timeout_s: positive(a.build_timeout, "--build-timeout").map_err(usage)?,
        final_seeds: a.final_seeds.unwrap_or(8),
        final_sanitize: !a.no_final_sanitize,
        simulated,
        input_seed_base: crate::wall::fresh_seed_base(),
        min_gain: match &a.min_gain {
            Some(g) => config::parse_min_gain(g).map_err(usage)?,
            None => crate::stats::DEFAULT_MIN_GAIN,
        },
        allow_unconfined_profiling: a.allow_unconfined_profiling,
        ray,
    })
}

pub fn run(a: Args) -> ExitCode {
    let api_key = std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.is_empty());
    let result = match &a.resume {
        Some(dir) => {
            if a.max_nodes == Some(0) {
                return usage("--max-nodes must be at least 1");
            }
            let overrides = optimize::Overrides {
                budget_s: a.budget.map(|d| d.as_secs_f64()),
                max_nodes: a.max_nodes,
                allow_unconfined_profiling: a.allow_unconfined_profiling,
            };
            optimize::resume(dir, a.json, api_key, overrides)
        }
        None => match resolve(&a) {
            Ok(config) => {
                if let (GeneratorSpec::Llm(_), None) = (&config.generator, &api_key) {
                    eprintln!("note: OPENAI_API_KEY is not set; requests go out without a key");
                }
                optimize::start(Start { config, out: a.out.clone(), json: a.json, api_key })
            }
            Err(code) => return code,
        },
    };
    match result {
        Ok(summary) => {
            if a.json {
                print_json(&summary);
            } else {
                print!("{}", summary.human());
            }
            ExitCode::from(if summary.best.verified { EXIT_PASSED } else { EXIT_REJECTED })
        }
        Err(RunError::Usage(m)) => fail(EXIT_USAGE, &m),
        Err(RunError::Env(m)) => fail(EXIT_ENV, &m),
        Err(e @ RunError::Internal(_)) => fail(EXIT_ENV, &e.to_string()),
    }
}

/// `nightshift lane-job`: one remote lane's job from stdin, its reply on stdout. The reply
/// carries any failure; exit 2 only when stdin holds no job at all.
pub fn lane_job() -> ExitCode {
    use crate::optimize::remote::{job::LaneJob, lane_job};
    use std::io::Read;
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        return usage(format!("lane-job reads its job on stdin: {e}"));
    }
    let job: LaneJob = match serde_json::from_str(&input) {
        Ok(j) => j,
        Err(e) => return usage(format!("lane-job: the job on stdin does not read: {e}")),
    };
    match serde_json::to_string(&lane_job::run(&job)) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(EXIT_ENV, &format!("lane-job: the reply does not serialize: {e}")),
    }
}
