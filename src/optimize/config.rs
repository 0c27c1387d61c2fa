//! The resolved configuration of one run, as written to `run.json`. It holds everything a
//! resume needs to carry on exactly as the run started, and nothing secret: the API key
//! is read from the environment at each start and never stored.

use search::Objective;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

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
    pub fn parse(s: &str, llm: Option<LlmSettings>) -> Result<GeneratorSpec, String> {
        match s {
            "tune" => Ok(GeneratorSpec::Tune),
            "llm" => llm
                .map(GeneratorSpec::Llm)
                .ok_or_else(|| "--generator llm needs --model (or [llm] model in nightshift.toml)".into()),
            _ => match s.strip_prefix("replay:") {
                Some(dir) if !dir.is_empty() => Ok(GeneratorSpec::Replay { dir: PathBuf::from(dir) }),
                _ => Err(format!("--generator `{s}`: expected tune, llm or replay:DIR")),
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
pub fn parse_objective(s: &str) -> Result<Objective, String> {
    match s {
        "time" => Ok(Objective::Time),
        "energy" => Ok(Objective::Energy),
        _ => {
            let w = s
                .strip_prefix("weighted:")
                .and_then(|w| w.parse::<f64>().ok())
                .filter(|w| (0.0..=1.0).contains(w))
                .ok_or_else(|| {
                    format!(
                        "--objective `{s}`: expected time, energy or weighted:W with W in 0..1 (the weight of time)"
                    )
                })?;
            Ok(Objective::Mix { time_weight: w })
        }
    }
}

/// `8h`, `10m`, `90s`, `1h30m`.
pub fn parse_budget(s: &str) -> Result<Duration, String> {
    let d =
        humantime::parse_duration(s.trim()).map_err(|e| format!("--budget `{s}`: {e} (expected e.g. 8h, 10m, 90s)"))?;
    if d.is_zero() {
        return Err(format!("--budget `{s}`: must be more than zero"));
    }
    Ok(d)
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
    /// Expansions in flight at once (generation, build, queued for a GPU).
    pub parallel: usize,
    pub timeout_s: Option<f64>,
    /// Re-verification of the best kernel at the end: check seeds and sanitizers.
    pub final_seeds: u32,
    pub final_sanitize: bool,
    pub simulated: Option<SimSettings>,
    /// Where the run's input seeds start: drawn fresh for each run (kept for resume), so
    /// no candidate can know its inputs or their outputs in advance.
    #[serde(default = "crate::eval::fresh_seed_base")]
    pub input_seed_base: u64,
    /// The gain a kernel must show beyond its speedup interval to be called faster, as a
    /// fraction (0.01: the interval's lower end must clear 1.01x).
    #[serde(default = "default_min_gain")]
    pub min_gain: f64,
    /// `--allow-unconfined-profiling`: a waiver for this session only, never kept in
    /// run.json, so a resume has to ask for it again.
    #[serde(skip)]
    pub allow_unconfined_profiling: bool,
}

fn default_min_gain() -> f64 {
    crate::stats::DEFAULT_MIN_GAIN
}

/// `1%`, `0.5%` or `1` (percent): a gain of at least zero and below 100%.
pub fn parse_min_gain(s: &str) -> Result<f64, String> {
    let number = s.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(p) if p.is_finite() && (0.0..100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(format!("--min-gain `{s}`: expected a percentage from 0 to below 100, e.g. 1% or 0.5%")),
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
        assert!(parse_budget("soon").unwrap_err().contains("expected e.g. 8h"));
        assert!(parse_budget("0s").is_err());
        assert_eq!(parse_objective("energy").unwrap(), Objective::Energy);
        assert_eq!(parse_objective("weighted:0.25").unwrap(), Objective::Mix { time_weight: 0.25 });
        assert!(parse_objective("weighted:2").is_err());
        assert!(parse_objective("speed").unwrap_err().contains("time, energy or weighted:W"));
        assert_eq!(GeneratorSpec::parse("tune", None).unwrap(), GeneratorSpec::Tune);
        assert_eq!(
            GeneratorSpec::parse("replay:runs/x", None).unwrap(),
            GeneratorSpec::Replay { dir: PathBuf::from("runs/x") }
        );
        assert!(GeneratorSpec::parse("llm", None).unwrap_err().contains("--model"));
        assert!(GeneratorSpec::parse("replay:", None).is_err());
        assert_eq!(parse_min_gain("1%").unwrap(), 0.01);
        assert_eq!(parse_min_gain("0.5").unwrap(), 0.005);
        assert!(parse_min_gain("-1%").unwrap_err().contains("from 0 to below 100"));
        assert!(parse_min_gain("lots").is_err());
    }
}
