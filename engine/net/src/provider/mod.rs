//! Model providers: one [`Provider`] trait, given the conversation and the catalog's tool
//! schemas, returns one model turn (text, tool calls with ids and parsed JSON arguments,
//! usage). Two wire formats are spoken — OpenAI-compatible Chat Completions (hosted
//! services and local servers such as Ollama, llama.cpp's server, vLLM) and Anthropic
//! Messages — both with streaming; a recorded provider answers from a session's
//! `model_turn` events, for replay and tests.
//!
//! Providers are blocking, so the engine stays synchronous: each request runs on
//! reqwest's async client in a runtime the provider blocks on, so that a turn given up
//! ([`Provider::set_give_up`]) drops its request and closes its connection at once.
//! The API key is a [`Secret`]: it is never formatted, and every error text that could
//! carry it (a response body echoing it) is scrubbed before it leaves this module.

pub mod anthropic;
mod http;
pub mod openai;
pub mod recorded;
mod sse;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use anthropic::Anthropic;
pub use http::GIVE_UP_CHECK_MS;
pub use openai::OpenAi;
pub use recorded::Recorded;

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call, echoed with its result.
    pub id: String,
    pub name: String,
    /// The parsed arguments; arguments that are not JSON are kept as a string, which the
    /// tool's input check then refuses with a message the model can act on.
    pub input: serde_json::Value,
}

/// Tokens used by one turn, with one meaning for every provider: `input_tokens` counts
/// every input token, those read from or written to a prompt cache included (OpenAI's
/// `prompt_tokens`; Anthropic's `input_tokens + cache_read_input_tokens +
/// cache_creation_input_tokens`), so a price per input token applies to
/// `input_tokens - cached_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The part of `input_tokens` read from the provider's prompt cache (OpenAI's
    /// `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
    /// The part of `input_tokens` written to the prompt cache (Anthropic's
    /// `cache_creation_input_tokens`; OpenAI reports none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One model turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Turn {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
}

/// One message of the conversation, in a provider-neutral form.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    User {
        text: String,
    },
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    /// The result of a tool call, answering the call with id `call_id`.
    Tool {
        call_id: String,
        name: String,
        output: String,
        is_error: bool,
    },
}

/// What a provider is asked.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub system: &'a str,
    pub messages: &'a [Message],
    /// The catalog's tool schemas, as `cairn_tools::Registry::to_json` gives them.
    pub tools: &'a serde_json::Value,
}

/// What a provider reports while a turn is awaited, before the turn itself: so a
/// person watching sees the model's text as it streams and each failed attempt as it
/// fails, instead of silence. Nothing of it is recorded: the recorded turn is the whole
/// answer, and an attempt that failed left nothing to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The next piece of the turn's text, as streamed (not redacted: the recorded turn
    /// is).
    Text(String),
    /// An attempt failed with `reason` and is tried again in `wait_ms`: retry `retry`
    /// (from 1) of `retries_max`.
    Retry {
        retry: u32,
        retries_max: u32,
        wait_ms: u64,
        reason: String,
    },
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Progress::Text(t) => f.write_str(t),
            Progress::Retry {
                retry,
                retries_max,
                wait_ms,
                reason,
            } => write!(
                f,
                "retry {retry} of {retries_max} in {:.1} s: {reason}",
                *wait_ms as f64 / 1000.0
            ),
        }
    }
}

/// Where a provider sends its [`Progress`]; called on the thread awaiting the turn.
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

/// Why a turn being awaited is given up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GiveUp {
    /// The session was stopped (a signal), for this reason.
    Stopped(String),
    /// The person watching interrupted the model (Esc in the chat).
    Interrupted,
}

/// Asked again and again while a turn is awaited (every
/// [`GIVE_UP_CHECK_MS`]); `Some` gives the turn up at once.
pub type GiveUpFn = std::sync::Arc<dyn Fn() -> Option<GiveUp> + Send + Sync>;

impl GiveUp {
    /// The turn's error: an interruption keeps the text streamed so far.
    pub fn error(self, text: String) -> ProviderError {
        match self {
            GiveUp::Stopped(reason) => ProviderError::Stopped(reason),
            GiveUp::Interrupted => ProviderError::Interrupted { text },
        }
    }
}

/// A model behind an API (or a recording of one).
pub trait Provider {
    /// `openai`, `anthropic` or `recorded`.
    fn name(&self) -> &str;
    fn model(&self) -> &str;
    /// Asks for the next turn.
    fn turn(&mut self, request: &Request<'_>) -> Result<Turn, ProviderError>;
    /// Sends the progress of every later turn to `progress` (none: nowhere). A provider
    /// with nothing to report (a recording) ignores it.
    fn set_progress(&mut self, progress: Option<ProgressFn>) {
        let _ = progress;
    }
    /// Gives up every later turn as soon as `give_up` says so: the request is dropped
    /// (its connection closed) and the turn fails with [`GiveUp::error`]. A provider
    /// that cannot give up a turn (a recording answers at once) ignores it.
    fn set_give_up(&mut self, give_up: Option<GiveUpFn>) {
        let _ = give_up;
    }
}

/// Why a provider gave no turn. No variant ever holds the API key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The provider refused the API key (401 or 403).
    #[error("authentication failed ({status}): {message}")]
    Auth {
        status: u16,
        message: String,
        /// Where the key was looked for (`CAIRN_API_KEY or OPENAI_API_KEY`).
        key_var: String,
    },
    /// The URL or the model does not exist (404).
    #[error("not found (404) at {url}: {message}")]
    NotFound { url: String, message: String },
    #[error("the provider answered {status}: {message}")]
    Http { status: u16, message: String },
    #[error("gave up after {attempts} attempts: {last}")]
    Retries { attempts: u32, last: String },
    #[error("malformed response: {0}")]
    Malformed(String),
    #[error("the stream was cut before it finished: {0}")]
    StreamCut(String),
    #[error("could not reach the provider: {0}")]
    Transport(String),
    /// No model was given, and the provider has no default.
    #[error("no model given")]
    NoModel,
    /// A setting that cannot work (no key where one is needed, no HTTP client).
    #[error("{0}")]
    Config(String),
    #[error("the recording has no more model turns (it had {0})")]
    Exhausted(usize),
    /// The session was stopped (a signal) while the turn was awaited; its answer, if
    /// one comes, is dropped.
    #[error("stopped while waiting for the model ({0})")]
    Stopped(String),
    /// The person watching interrupted the turn being awaited (the session goes on):
    /// `text` is what the model had streamed by then; the rest of its answer, and any
    /// tool call, is dropped.
    #[error("interrupted while waiting for the model")]
    Interrupted { text: String },
}

/// The API key. Its `Debug` shows only that one is set.
#[derive(Clone, Default)]
pub struct Secret(Option<String>);

impl Secret {
    pub fn new(value: Option<String>) -> Secret {
        Secret(value.filter(|v| !v.is_empty()))
    }
    pub fn expose(&self) -> Option<&str> {
        self.0.as_deref()
    }
    /// `text` with the key (if any) and any other secret-looking token replaced.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        if let Some(k) = &self.0 {
            out = out.replace(k.as_str(), "[REDACTED:api_key]");
            // Providers echo keys partly ("sk-abc…xyz"): hide any 8-character piece.
            if k.len() >= 16 {
                for piece in [&k[..8], &k[k.len() - 8..]] {
                    out = out.replace(piece, "[REDACTED:api_key]");
                }
            }
        }
        crate::redact::Redactor::default()
            .redact(&out, &mut Default::default())
            .into_owned()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Secret(set)"
        } else {
            "Secret(none)"
        })
    }
}

/// Which wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Openai,
    Anthropic,
}

impl std::str::FromStr for Kind {
    type Err = cairn_store::ParseNameError;
    fn from_str(s: &str) -> Result<Kind, cairn_store::ParseNameError> {
        match s {
            "openai" => Ok(Kind::Openai),
            "anthropic" => Ok(Kind::Anthropic),
            _ => Err(cairn_store::ParseNameError {
                what: "provider",
                name: s.to_string(),
                expected: &["openai", "anthropic"],
            }),
        }
    }
}

/// Retries and the request timeout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryLimits {
    /// Retries after the first attempt, on 429, 5xx and transport failures.
    pub retries_max: u32,
    /// The first backoff; doubled at each retry.
    pub backoff_initial_ms: u64,
    pub backoff_max_ms: u64,
    /// A `retry-after` longer than this is cut to it.
    pub retry_after_max_ms: u64,
    /// The whole request, streamed body included.
    pub request_timeout_ms: u64,
}

impl Default for RetryLimits {
    fn default() -> RetryLimits {
        RetryLimits {
            retries_max: 4,
            backoff_initial_ms: 500,
            backoff_max_ms: 30_000,
            retry_after_max_ms: 60_000,
            request_timeout_ms: 600_000,
        }
    }
}

/// How to reach a model.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    pub kind: Kind,
    /// For OpenAI-compatible servers, up to and including `/v1`.
    pub base_url: String,
    pub model: String,
    pub api_key: Secret,
    /// The environment variable the key came from (named in auth errors).
    pub key_var: String,
    pub stream: bool,
    /// Output tokens per turn (Anthropic requires it).
    pub output_tokens_max: u32,
    pub retry: RetryLimits,
}

/// Flags that override the environment.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// The name of an environment variable holding the key (never the key itself:
    /// a key on the command line ends up in shell history and `ps`).
    pub api_key_env: Option<String>,
    pub stream: Option<bool>,
}

impl ProviderConfig {
    /// From flags, then `CAIRN_BASE_URL`, `CAIRN_MODEL`, `CAIRN_API_KEY`, then the
    /// provider's usual variable (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`).
    pub fn from_env(
        kind: Kind,
        flags: &Overrides,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ProviderConfig, ProviderError> {
        let (default_url, default_model, usual) = match kind {
            Kind::Openai => ("https://api.openai.com/v1", None, "OPENAI_API_KEY"),
            Kind::Anthropic => (
                "https://api.anthropic.com",
                Some("claude-sonnet-4-5"),
                "ANTHROPIC_API_KEY",
            ),
        };
        let base_url = flags
            .base_url
            .clone()
            .or_else(|| env("CAIRN_BASE_URL"))
            .unwrap_or_else(|| default_url.to_string());
        let model = flags
            .model
            .clone()
            .or_else(|| env("CAIRN_MODEL"))
            .or(default_model.map(str::to_string))
            .ok_or(ProviderError::NoModel)?;
        let vars: Vec<String> = match &flags.api_key_env {
            Some(v) => vec![v.clone()],
            None => vec!["CAIRN_API_KEY".to_string(), usual.to_string()],
        };
        let (key_var, key) = vars
            .iter()
            .find_map(|v| env(v).filter(|k| !k.is_empty()).map(|k| (v.clone(), k)))
            .unwrap_or_else(|| (vars.join(" or "), String::new()));
        if kind == Kind::Anthropic && key.is_empty() {
            return Err(ProviderError::Config(format!(
                "no API key: set {} (Anthropic needs one)",
                vars.join(" or ")
            )));
        }
        Ok(ProviderConfig {
            kind,
            base_url: base_url.trim_end_matches('/').to_string(),
            model,
            api_key: Secret::new(Some(key)),
            key_var,
            stream: flags.stream.unwrap_or(true),
            output_tokens_max: 8192,
            retry: RetryLimits::default(),
        })
    }

    /// The provider this configuration names.
    pub fn build(self) -> Result<Box<dyn Provider + Send>, ProviderError> {
        Ok(match self.kind {
            Kind::Openai => Box::new(OpenAi::new(self)?),
            Kind::Anthropic => Box::new(Anthropic::new(self)?),
        })
    }
}

/// Tells `progress` the text a stream just added, if any.
pub(crate) fn tell_text(progress: Option<&ProgressFn>, added: &str) {
    if let Some(p) = progress
        && !added.is_empty()
    {
        p(&Progress::Text(added.to_string()));
    }
}

/// Parses tool-call arguments: empty means `{}`; text that is not JSON is kept as a
/// string so the tool's input check explains the problem to the model.
pub(crate) fn parse_arguments(raw: &str) -> serde_json::Value {
    if raw.trim().is_empty() {
        return serde_json::json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(|_| serde_json::Value::String(raw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_errors_name_no_flag() {
        assert_eq!(
            ProviderError::Auth {
                status: 401,
                message: "bad key".into(),
                key_var: "OPENAI_API_KEY".into(),
            }
            .to_string(),
            "authentication failed (401): bad key"
        );
        assert_eq!(
            ProviderError::NotFound {
                url: "http://h/v1".into(),
                message: "no model m".into(),
            }
            .to_string(),
            "not found (404) at http://h/v1: no model m"
        );
        assert_eq!(ProviderError::NoModel.to_string(), "no model given");
        assert_eq!(
            "x".parse::<Kind>().map_err(|e| e.to_string()),
            Err("unknown provider 'x': expected openai or anthropic".to_string())
        );
    }
}
