//! The resolved configuration of one run, as written to `run.json`. It holds everything a
//! resume needs to carry on exactly as the run started, and nothing secret: the API key
//! is read from the environment at each start and never stored.

use search::Objective;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// A command-line value of the run's configuration that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("--generator llm needs --model (or [llm] model in nightshift.toml)")]
    LlmWithoutModel,
    #[error("--generator `{0}`: expected tune, llm or replay:DIR")]
    Generator(String),
    #[error("--objective `{0}`: expected time, energy or weighted:W with W in 0..1 (the weight of time)")]
    Objective(String),
    #[error("the budget must be positive")]
    BudgetNotPositive,
    #[error("{BUDGET_FORMS}")]
    BudgetMalformed,
    #[error("longer than any budget can be")]
    BudgetTooLong,
    #[error("--min-gain `{0}`: expected a percentage from 0 to below 100, e.g. 1% or 0.5%")]
    MinGain(String),
}

/// How the next kernel is written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum GeneratorSpec {
    /// Diagnosis-guided moves over the task's knobs and safe compiler flags.
    Tune,
    /// An OpenAI-compatible chat endpoint.
    Llm(LlmSettings),
    /// Proposals read from files, in order.
    Replay { dir: PathBuf },
}

impl GeneratorSpec {
    /// `tune`, `llm` or `replay:DIR`.
    pub fn parse(s: &str, llm: Option<LlmSettings>) -> Result<GeneratorSpec, ConfigError> {
        match s {
            "tune" => Ok(GeneratorSpec::Tune),
            "llm" => llm.map(GeneratorSpec::Llm).ok_or(ConfigError::LlmWithoutModel),
            _ => match s.strip_prefix("replay:") {
                Some(dir) if !dir.is_empty() => Ok(GeneratorSpec::Replay { dir: PathBuf::from(dir) }),
                _ => Err(ConfigError::Generator(s.into())),
            },
        }
    }

    pub fn name(&self) -> String {
        match self {
            GeneratorSpec::Tune => "tune".into(),
            GeneratorSpec::Llm(s) => format!("llm ({})", s.model),
            GeneratorSpec::Replay { dir } => format!("replay:{}", dir.display()),
        }
    }
}

/// The LLM client's settings; the key itself is never part of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmSettings {
    pub model: String,
    /// With its `/v1`, e.g. `http://localhost:8000/v1`.
    pub base_url: String,
    /// Whether `OPENAI_API_KEY` was set when the run started (the value is not kept).
    pub key_from_env: bool,
    pub timeout_s: f64,
    pub retries: u32,
    pub max_reply_tokens: u32,
    pub temperature: f32,
    /// Dollars per million prompt / completion tokens.
    pub price_in: f64,
    pub price_out: f64,
    /// Run-wide budgets; the run stops generating when one is spent.
    pub max_tokens: Option<u64>,
    pub max_cost: Option<f64>,
}

/// Which search decides what to expand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Monte Carlo tree search (progressive widening, repairs, search memory).
    Mcts,
    /// Always refine the best kernel so far (one repair after a failure).
    Greedy,
    /// Independent children of the baseline.
    BestOfN,
}

/// What the generator is told about the parent's profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Guidance {
    /// The ranked diagnoses (prescriptions, evidence, source lines).
    Tools,
    /// The raw Nsight Compute counters.
    Raw,
    /// Nothing: no profiling at all.
    None,
}

/// `time`, `energy` or `weighted:W` (W is the weight of time, 0..1).
pub fn parse_objective(s: &str) -> Result<Objective, ConfigError> {
    match s {
        "time" => Ok(Objective::Time),
        "energy" => Ok(Objective::Energy),
        _ => {
            let w = s
                .strip_prefix("weighted:")
                .and_then(|w| w.parse::<f64>().ok())
                .filter(|w| (0.0..=1.0).contains(w))
                .ok_or_else(|| ConfigError::Objective(s.into()))?;
            Ok(Objective::Mix { time_weight: w })
        }
    }
}

/// What `--budget` accepts, said once for every way a budget can be written wrong.
const BUDGET_FORMS: &str = "a budget is a number and a unit, s (seconds), m (minutes), h (hours) \
or d (days), whole or decimal, or several in a row: 90s, 10m, 1.5h, 8h, 1h30m";

/// A wall-time budget: `90s`, `10m`, `1.5h`, `8h`, `1h30m` (units also spelled out:
/// sec, min, hours, days). Zero and negative budgets are refused as such, not as
/// malformed. Used as clap's parser for `--budget`, so every error reads the same and
/// comes after clap's "invalid value 'X' for '--budget <DURATION>': ".
pub fn parse_budget(s: &str) -> Result<Duration, ConfigError> {
    let text = s.trim();
    if text.starts_with('-') {
        return Err(ConfigError::BudgetNotPositive);
    }
    let malformed = || ConfigError::BudgetMalformed;
    let mut rest = text;
    let mut seconds = 0.0f64;
    if rest.is_empty() {
        return Err(malformed());
    }
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().map_err(|_| malformed())?;
        rest = rest[number_len..].trim_start();
        let unit_len = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let unit = match rest[..unit_len].to_ascii_lowercase().as_str() {
            "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
            "d" | "day" | "days" => 86400.0,
            _ => return Err(malformed()),
        };
        seconds += number * unit;
        rest = rest[unit_len..].trim_start();
    }
    if seconds <= 0.0 {
        return Err(ConfigError::BudgetNotPositive);
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| ConfigError::BudgetTooLong)
}

/// How to reach the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RaySettings {
    /// `ray://host:10001`, `host:6379` or `auto`.
    pub address: String,
    /// At most this many lanes (None: one per GPU the cluster offers).
    pub max_lanes: Option<usize>,
    /// nightshift on the workers' hosts (a path there, or a name on their PATH).
    pub binary: PathBuf,
    /// The Python that has `ray` installed.
    pub python: String,
    /// Re-verify the best kernel on a lane whose GPU's name holds this (`H200`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_gpu: Option<String>,
}

/// The simulated evaluator (tests only; never a default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimSettings {
    /// How long each simulated evaluation holds its GPU lane.
    pub delay_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub task_dir: PathBuf,
    pub task: String,
    pub budget_s: Option<f64>,
    pub max_nodes: Option<usize>,
    pub generator: GeneratorSpec,
    pub objective: Objective,
    pub strategy: Strategy,
    pub guidance: Guidance,
    pub seed: u64,
    pub gpus: Vec<usize>,
    pub arch: String,
    /// Expansions in flight at once (generation, build, queued for a GPU); 0 under
    /// `--ray` without `--gpus`: three per lane the cluster gives.
    pub parallel: usize,
    pub timeout_s: Option<f64>,
    /// `--build-timeout`: seconds one build may take (else the task's, else 120).
    #[serde(default)]
    pub build_timeout_s: Option<f64>,
    /// Re-verification of the best kernel at the end: check seeds and sanitizers.
    pub final_seeds: u32,
    pub final_sanitize: bool,
    pub simulated: Option<SimSettings>,
    /// Where the run's input seeds start: drawn fresh for each run (kept for resume), so
    /// no candidate can know its inputs or their outputs in advance.
    #[serde(default = "crate::wall::fresh_seed_base")]
    pub input_seed_base: u64,
    /// The gain a kernel must show beyond its speedup interval to be called faster, as a
    /// fraction (0.01: the interval's lower end must clear 1.01x).
    #[serde(default = "default_min_gain")]
    pub min_gain: f64,
    /// `--allow-unconfined-profiling`: a waiver for this session only, never kept in
    /// run.json, so a resume has to ask for it again.
    #[serde(skip)]
    pub allow_unconfined_profiling: bool,
    /// `--ray`: the lanes are the GPUs of a Ray cluster (`gpus` then numbers lanes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray: Option<RaySettings>,
}

fn default_min_gain() -> f64 {
    crate::stats::DEFAULT_MIN_GAIN
}

/// `1%`, `0.5%` or `1` (percent): a gain of at least zero and below 100%.
pub fn parse_min_gain(s: &str) -> Result<f64, ConfigError> {
    let number = s.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(p) if p.is_finite() && (0.0..100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(ConfigError::MinGain(s.into())),
    }
}

impl RunConfig {
    pub fn budget(&self) -> Option<Duration> {
        self.budget_s.map(Duration::from_secs_f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_objectives_and_generators_parse_or_explain() {
        assert_eq!(parse_budget("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_budget("8h").unwrap(), Duration::from_secs(8 * 3600));
        assert_eq!(parse_budget("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_budget("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_budget("2 hours 5 min").unwrap(), Duration::from_secs(7500));
        assert_eq!(parse_budget("90S").unwrap(), Duration::from_secs(90));
        for malformed in ["soon", "10", "10ms", "h", "", "1.2.3m", "10m+", "5 parsecs"] {
            let e = parse_budget(malformed).unwrap_err();
            assert_eq!(e.to_string(), BUDGET_FORMS, "{malformed}");
        }
        for not_positive in ["0s", "-5m", "-1h30m", "0h0m"] {
            assert_eq!(
                parse_budget(not_positive).unwrap_err().to_string(),
                "the budget must be positive",
                "{not_positive}"
            );
        }
        assert!(
            parse_budget("99999999999999999999d").unwrap_err().to_string().contains("longer than"),
            "no panic on absurd lengths"
        );
        assert_eq!(parse_objective("energy").unwrap(), Objective::Energy);
        assert_eq!(parse_objective("weighted:0.25").unwrap(), Objective::Mix { time_weight: 0.25 });
        assert!(parse_objective("weighted:2").is_err());
        assert!(parse_objective("speed").unwrap_err().to_string().contains("time, energy or weighted:W"));
        assert_eq!(GeneratorSpec::parse("tune", None).unwrap(), GeneratorSpec::Tune);
        assert_eq!(
            GeneratorSpec::parse("replay:runs/x", None).unwrap(),
            GeneratorSpec::Replay { dir: PathBuf::from("runs/x") }
        );
        assert!(GeneratorSpec::parse("llm", None).unwrap_err().to_string().contains("--model"));
        assert!(GeneratorSpec::parse("replay:", None).is_err());
        assert_eq!(parse_min_gain("1%").unwrap(), 0.01);
        assert_eq!(parse_min_gain("0.5").unwrap(), 0.005);
        assert!(parse_min_gain("-1%").unwrap_err().to_string().contains("from 0 to below 100"));
        assert!(parse_min_gain("lots").is_err());
    }
}

/// Everything about the machine and tools a run was made with, next to its config.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunFile {
    pub config: RunConfig,
    pub nightshift: String,
    pub nvcc: String,
    pub started_at: String,
    #[serde(default)]
    pub devices: Vec<crate::wall::protocol::DeviceInfo>,
}
