//! The LLM generator: a prompt from the request ([`prompt`]), one chat completion with
//! retries ([`client`]), a tolerant read of the reply ([`reply`]), and run-wide token and
//! cost accounting that stops generation when `--max-tokens` or `--max-cost` is spent.
//! How many requests are in flight is the orchestrator's `--parallel`.

pub mod client;
pub mod prompt;
pub mod reply;

use super::{Attempt, Generated, Kernel, Proposal, Request};
use crate::run::config::LlmSettings;
use crate::run::events::Usage;
use crate::run::failure::NodeFailure;
use client::{ChatClient, ClientError, ClientSettings};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A run-wide budget that is spent: generation stops.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum BudgetSpent {
    #[error("the token budget is spent ({used} of {max} tokens)")]
    Tokens { used: u64, max: u64 },
    #[error("the cost budget is spent (${spent:.2} of ${max:.2})")]
    Cost { spent: f64, max: f64 },
}

pub struct LlmGenerator {
    settings: LlmSettings,
    client: ChatClient,
    spent: Mutex<Usage>,
}

impl LlmGenerator {
    /// `api_key` comes from the environment at each start and is kept in memory only.
    pub fn new(settings: LlmSettings, api_key: Option<String>) -> Result<LlmGenerator, ClientError> {
        let client = ChatClient::new(ClientSettings {
            base_url: settings.base_url.clone(),
            api_key,
            model: settings.model.clone(),
            timeout: Duration::from_secs_f64(settings.timeout_s),
            retries: settings.retries,
            max_reply_tokens: settings.max_reply_tokens,
            temperature: settings.temperature,
            backoff: Duration::from_millis(500),
        })?;
        Ok(LlmGenerator { settings, client, spent: Mutex::new(Usage::default()) })
    }

    pub fn usage(&self) -> Usage {
        self.spent.lock().unwrap().clone()
    }

    /// Adds what an earlier session of the run spent (on resume).
    pub fn add_spent(&self, u: &Usage) {
        self.spent.lock().unwrap().add(u);
    }

    fn budget_left(&self) -> Result<(), BudgetSpent> {
        let spent = self.spent.lock().unwrap();
        if let Some(max) = self.settings.max_tokens {
            let used = spent.prompt_tokens + spent.completion_tokens;
            if used >= max {
                return Err(BudgetSpent::Tokens { used, max });
            }
        }
        if let Some(max) = self.settings.max_cost {
            if spent.cost >= max {
                return Err(BudgetSpent::Cost { spent: spent.cost, max });
            }
        }
        Ok(())
    }

    pub async fn propose(&self, req: &Request) -> Generated {
        if let Err(why) = self.budget_left() {
            return Generated::plain(Proposal::Stop(why.to_string()));
        }
        let user = prompt::user_message(req);
        let prompt_text = format!("# system\n\n{}\n\n# user\n\n{user}", prompt::SYSTEM);
        let attempts: Arc<Mutex<Vec<Attempt>>> = Arc::new(Mutex::new(Vec::new()));
        let result = self.client.complete(prompt::SYSTEM, &user, &attempts).await;
        let attempts = attempts.lock().unwrap().clone();
        let (reply, usage) = match &result {
            Ok(r) => {
                let usage = Usage {
                    prompt_tokens: r.prompt_tokens,
                    completion_tokens: r.completion_tokens,
                    cost: (r.prompt_tokens as f64 * self.settings.price_in
                        + r.completion_tokens as f64 * self.settings.price_out)
                        / 1e6,
                    requests: 1,
                };
                (Some(r.text.clone()), usage)
            }
            Err(_) => (None, Usage { requests: 1, ..Default::default() }),
        };
        self.spent.lock().unwrap().add(&usage);
        let proposal = match result {
            Err(e) if e.class == NodeFailure::ApiRefused => {
                Proposal::Stop(format!("the endpoint refuses our requests: {}", e.message))
            }
            Err(e) => Proposal::Failed { class: e.class, message: e.message },
            Ok(r) => match reply::parse(&r.text, &req.task.entry, r.cut_at_limit) {
                Ok(p) => Proposal::Kernel(Kernel {
                    source: p.code,
                    defines: Default::default(),
                    flags: Vec::new(),
                    technique: p.technique,
                    tool: p.tool.or_else(|| top_tool(req)),
                }),
                Err(problem) => Proposal::Failed { class: problem.class, message: problem.message },
            },
        };
        Generated { proposal, prompt: Some(prompt_text), reply, usage: Some(usage), attempts }
    }
}

/// The diagnosis the prompt put first, for search memory when the reply names none.
fn top_tool(req: &Request) -> Option<String> {
    let report = req.profile.diagnoses.as_ref()?;
    report
        .kernels
        .iter()
        .flat_map(|k| k.diagnoses.iter())
        .filter(|d| d.severity > heuristics::Severity::Info)
        .max_by(|a, b| a.score.total_cmp(&b.score))
        .map(|d| d.tool.to_string())
}
