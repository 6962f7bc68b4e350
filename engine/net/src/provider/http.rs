//! Sending a provider request: retries with backoff on 429, 5xx and transport failures
//! (honouring `retry-after`), clear errors for the rest, every error text scrubbed of
//! the key.

use std::time::Duration;

use reqwest::blocking::{Client, Response};

use super::{Progress, ProgressFn, ProviderConfig, ProviderError};

/// Bytes of an error body quoted in a message.
const ERROR_BODY_CHARS_MAX: usize = 300;

pub(crate) fn client(config: &ProviderConfig) -> Result<Client, ProviderError> {
    Client::builder()
        .timeout(Duration::from_millis(config.retry.request_timeout_ms))
        .connect_timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| ProviderError::Config(format!("cannot build the HTTP client: {e}")))
}

/// Posts `body` to `url` with `headers`, retrying as the limits allow (each retry told
/// to `progress` before its wait); returns a response with a 2xx status.
pub(crate) fn post(
    client: &Client,
    config: &ProviderConfig,
    url: &str,
    headers: &[(&str, String)],
    body: &serde_json::Value,
    progress: Option<&ProgressFn>,
) -> Result<Response, ProviderError> {
    let limits = &config.retry;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let mut req = client.post(url).json_body(body);
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let (err, wait) = match req.send() {
            Err(e) => (
                ProviderError::Transport(config.api_key.scrub(&transport_text(&e))),
                None,
            ),
            Ok(resp) if resp.status().is_success() => return Ok(resp),
            Ok(resp) => {
                let status = resp.status().as_u16();
                let retry_after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| (s * 1000.0) as u64);
                let text = resp.text().unwrap_or_default();
                let message = config.api_key.scrub(&error_message(&text));
                let err = match status {
                    401 | 403 => {
                        return Err(ProviderError::Auth {
                            status,
                            message,
                            key_var: config.key_var.clone(),
                        });
                    }
                    404 => {
                        return Err(ProviderError::NotFound {
                            url: url.to_string(),
                            message,
                        });
                    }
                    429 | 500..=599 => ProviderError::Http { status, message },
                    _ => return Err(ProviderError::Http { status, message }),
                };
                (err, retry_after)
            }
        };
        if attempt > limits.retries_max {
            return Err(ProviderError::Retries {
                attempts: attempt,
                last: err.to_string(),
            });
        }
        let backoff = limits
            .backoff_initial_ms
            .saturating_mul(1u64 << (attempt - 1).min(20))
            .min(limits.backoff_max_ms);
        let ms = wait.map_or(backoff, |w| w.min(limits.retry_after_max_ms));
        if let Some(p) = progress {
            p(&Progress::Retry {
                retry: attempt,
                retries_max: limits.retries_max,
                wait_ms: ms,
                reason: err.to_string(),
            });
        }
        std::thread::sleep(Duration::from_millis(ms));
    }
}

trait JsonBody {
    fn json_body(self, body: &serde_json::Value) -> Self;
}

impl JsonBody for reqwest::blocking::RequestBuilder {
    fn json_body(self, body: &serde_json::Value) -> Self {
        self.header("content-type", "application/json")
            .body(body.to_string())
    }
}

fn transport_text(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    if e.is_timeout() {
        s.push_str(" (the request timed out)");
    }
    s
}

/// The provider's own error message when the body is the usual JSON
/// (`{"error": {"message": …}}`), else the start of the body.
fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let msg = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("error"))
        })
        .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
        .unwrap_or_else(|| body.trim().to_string());
    let msg: String = msg.chars().take(ERROR_BODY_CHARS_MAX).collect();
    if msg.is_empty() {
        "(empty body)".to_string()
    } else {
        msg
    }
}

/// The body of a non-streamed answer as JSON.
pub(crate) fn json_of(
    resp: Response,
    key: &super::Secret,
) -> Result<serde_json::Value, ProviderError> {
    let text = resp
        .text()
        .map_err(|e| ProviderError::Transport(key.scrub(&transport_text(&e))))?;
    serde_json::from_str(&text).map_err(|e| {
        let start: String = text.chars().take(120).collect();
        ProviderError::Malformed(key.scrub(&format!("{e} in {start:?}")))
    })
}
