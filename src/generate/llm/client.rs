//! The chat client: async-openai over a tower service of our own that retries what is
//! worth retrying (429, 5xx, timeouts, refused connections) with exponential backoff,
//! waits what a `Retry-After` header asks for (capped), and records every attempt that
//! did not simply succeed so the run's event log can show it.

use crate::generate::Attempt;
use crate::run::failure::NodeFailure;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use async_openai::types::chat::{
    ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage, CreateChatCompletionRequestArgs, FinishReason,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest a `Retry-After` header can make us wait.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
pub struct ClientSettings {
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    pub timeout: Duration,
    pub retries: u32,
    pub max_reply_tokens: u32,
    pub temperature: f32,
    /// The first backoff step (doubles per attempt).
    pub backoff: Duration,
}

/// A completed exchange.
#[derive(Debug, Clone)]
pub struct Reply {
    pub text: String,
    /// The server stopped at `max_tokens`.
    pub cut_at_limit: bool,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// Why there is no reply, after retries.
#[derive(Debug, Clone)]
pub struct CallError {
    /// `api-timeout`, `api-error`, or `api-refused` (authentication or a wrong model: a
    /// configuration problem no retry fixes).
    pub class: NodeFailure,
    pub message: String,
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    let secs: f64 = v.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs).min(MAX_RETRY_AFTER))
}

fn backoff(base: Duration, attempt: u32) -> Duration {
    (base * 2u32.saturating_pow(attempt.saturating_sub(1).min(6))).min(Duration::from_secs(60))
}

/// The HTTP client could not be built (a TLS backend that will not start, say).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct ClientError(#[source] reqwest::Error);

pub struct ChatClient {
    settings: ClientSettings,
    http: reqwest::Client,
}

impl ChatClient {
    pub fn new(settings: ClientSettings) -> Result<ChatClient, ClientError> {
        // One crypto provider for https endpoints; a second install is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().timeout(settings.timeout).build().map_err(ClientError)?;
        Ok(ChatClient { settings, http })
    }

    /// One chat completion with retries; `attempts` receives every attempt that failed.
    pub async fn complete(
        &self,
        system: &str,
        user: &str,
        attempts: &Arc<Mutex<Vec<Attempt>>>,
    ) -> Result<Reply, CallError> {
        let s = &self.settings;
        let mut config = OpenAIConfig::new().with_api_base(s.base_url.trim_end_matches('/'));
        if let Some(k) = &s.api_key {
            config = config.with_api_key(k.clone());
        }
        let http = self.http.clone();
        let (retries, base, timeout) = (s.retries, s.backoff, s.timeout);
        let log = attempts.clone();
        let service = tower::service_fn(move |factory: HttpRequestFactory| {
            let http = http.clone();
            let log = log.clone();
            async move {
                let mut attempt = 0u32;
                loop {
                    attempt += 1;
                    let request = factory.build().await?;
                    let result = http.execute(request).await;
                    let last = attempt > retries;
                    let (status, wait) = match result {
                        Ok(resp) if resp.status().as_u16() == 429 || resp.status().is_server_error() => {
                            let wait = retry_after(resp.headers()).unwrap_or_else(|| backoff(base, attempt));
                            if last {
                                log.lock().unwrap().push(Attempt {
                                    attempt,
                                    status: resp.status().to_string(),
                                    wait_s: 0.0,
                                });
                                return Ok(resp);
                            }
                            (resp.status().to_string(), wait)
                        }
                        Ok(resp) => return Ok(resp),
                        Err(e) if e.is_timeout() || e.is_connect() => {
                            let what = if e.is_timeout() {
                                format!("no reply within {:.0} s", timeout.as_secs_f64())
                            } else {
                                format!("cannot connect: {e}")
                            };
                            if last {
                                log.lock().unwrap().push(Attempt { attempt, status: what, wait_s: 0.0 });
                                return Err(OpenAIError::Reqwest(e));
                            }
                            (what, backoff(base, attempt))
                        }
                        Err(e) => return Err(OpenAIError::Reqwest(e)),
                    };
                    log.lock().unwrap().push(Attempt { attempt, status, wait_s: wait.as_secs_f64() });
                    tokio::time::sleep(wait).await;
                }
            }
        });
        let client = async_openai::Client::with_config(config).with_http_service(service);
        let request = CreateChatCompletionRequestArgs::default()
            .model(s.model.clone())
            .max_completion_tokens(s.max_reply_tokens)
            .temperature(s.temperature)
            .messages([
                ChatCompletionRequestSystemMessage::from(system).into(),
                ChatCompletionRequestUserMessage::from(user).into(),
            ])
            .build()
            .map_err(|e| CallError {
                class: NodeFailure::ApiError,
                message: format!("cannot build the request: {e}"),
            })?;
        let response = client.chat().create(request).await.map_err(|e| classify(e, s))?;
        let Some(choice) = response.choices.into_iter().next() else {
            return Err(CallError { class: NodeFailure::ApiError, message: "the reply has no choices".into() });
        };
        let usage = response.usage;
        Ok(Reply {
            text: choice.message.content.unwrap_or_default(),
            cut_at_limit: matches!(choice.finish_reason, Some(FinishReason::Length)),
            prompt_tokens: usage.as_ref().map(|u| u.prompt_tokens as u64).unwrap_or(0),
            completion_tokens: usage.as_ref().map(|u| u.completion_tokens as u64).unwrap_or(0),
        })
    }
}

fn classify(e: OpenAIError, s: &ClientSettings) -> CallError {
    match e {
        OpenAIError::ApiError(r) => {
            let code = r.status_code.as_u16();
            let class = if matches!(code, 401 | 403 | 404) { NodeFailure::ApiRefused } else { NodeFailure::ApiError };
            let hint = match code {
                401 | 403 => " (check OPENAI_API_KEY)",
                404 => " (check OPENAI_BASE_URL, which must end in /v1, and --model)",
                _ => "",
            };
            let msg: String = r.api_error.message.chars().take(300).collect();
            CallError { class, message: format!("HTTP {}{hint}: {}", r.status_code, msg.trim()) }
        }
        OpenAIError::Reqwest(e) if e.is_timeout() => CallError {
            class: NodeFailure::ApiTimeout,
            message: format!("no reply within {:.0} s, {} attempts", s.timeout.as_secs_f64(), s.retries + 1),
        },
        OpenAIError::Reqwest(e) if e.is_connect() => CallError {
            class: NodeFailure::ApiError,
            message: format!("cannot reach {} after {} attempts: {e}", s.base_url, s.retries + 1),
        },
        OpenAIError::JSONDeserialize(err, content) => CallError {
            class: NodeFailure::ApiError,
            message: format!(
                "the reply is not a chat completion ({err}): {}",
                content.chars().take(200).collect::<String>()
            ),
        },
        other => CallError { class: NodeFailure::ApiError, message: other.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_in_seconds_and_capped() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert(reqwest::header::RETRY_AFTER, "0.5".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(500)));
        h.insert(reqwest::header::RETRY_AFTER, "86400".parse().unwrap());
        assert_eq!(retry_after(&h), Some(MAX_RETRY_AFTER));
        h.insert(reqwest::header::RETRY_AFTER, "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap());
        assert_eq!(retry_after(&h), None, "dates fall back to our own backoff");
        assert_eq!(backoff(Duration::from_secs(1), 1), Duration::from_secs(1));
        assert_eq!(backoff(Duration::from_secs(1), 3), Duration::from_secs(4));
        assert_eq!(backoff(Duration::from_secs(1), 30), Duration::from_secs(60));
    }
}
