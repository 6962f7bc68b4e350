//! Sending a provider request: retries with backoff on 429, 5xx and transport failures
//! (honouring `retry-after`), clear errors for the rest, every error text scrubbed of
//! the key.
//!
//! A request runs on reqwest's async client, driven by a runtime of one worker thread
//! that [`Wire::run`] blocks on, so the providers stay synchronous. While it runs, the
//! provider's [`GiveUpFn`] is asked every [`GIVE_UP_CHECK_MS`]: when it says so, the
//! request's future is dropped, which closes its connection at once — in the middle of
//! a stream, of a retry's wait or of a connect.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use reqwest::{Client, Response};

use super::{GiveUp, GiveUpFn, Progress, ProgressFn, ProviderConfig, ProviderError, Turn};

/// Bytes of an error body quoted in a message.
const ERROR_BODY_CHARS_MAX: usize = 300;

/// How often a running request asks whether to give up, in milliseconds.
pub const GIVE_UP_CHECK_MS: u64 = 20;

/// The HTTP client of a provider and the runtime its requests run on.
pub(crate) struct Wire {
    pub(crate) client: Client,
    rt: tokio::runtime::Runtime,
}

impl Wire {
    pub(crate) fn new(config: &ProviderConfig) -> Result<Wire, ProviderError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cairn-provider")
            .enable_all()
            .build()
            .map_err(|e| ProviderError::Config(format!("cannot start the HTTP runtime: {e}")))?;
        let client = {
            let _in = rt.enter();
            Client::builder()
                .timeout(Duration::from_millis(config.retry.request_timeout_ms))
                .connect_timeout(Duration::from_secs(30))
                .build()
                .map_err(|e| ProviderError::Config(format!("cannot build the HTTP client: {e}")))?
        };
        Ok(Wire { client, rt })
    }

    /// Runs `work` to its end, or until `give_up` says why not to wait any longer:
    /// then `work` is dropped (its request and connection with it) and the answer is
    /// `Err` with that reason.
    pub(crate) fn run<T>(
        &self,
        give_up: Option<&GiveUpFn>,
        work: impl Future<Output = T>,
    ) -> Result<T, GiveUp> {
        self.rt.block_on(async {
            let mut work = std::pin::pin!(work);
            let mut tick = tokio::time::interval(Duration::from_millis(GIVE_UP_CHECK_MS));
            std::future::poll_fn(|cx| {
                // Asked first: a turn given up before it starts sends nothing.
                if let Some(g) = give_up {
                    while tick.poll_tick(cx).is_ready() {
                        if let Some(why) = g() {
                            return Poll::Ready(Err(why));
                        }
                    }
                }
                work.as_mut().poll(cx).map(Ok)
            })
            .await
        })
    }
}

/// What a provider's streamed answer is folded into, event by event.
pub(crate) trait Streamed: Default {
    /// Takes one server-sent event (its `event:` name and `data:`); true when the
    /// answer is complete.
    fn feed(&mut self, event: &str, data: &str) -> Result<bool, ProviderError>;
    /// The text streamed so far.
    fn text(&self) -> &str;
    /// The text streamed so far, for a turn given up half-way.
    fn into_text(self) -> String;
    /// The whole turn, once the stream has ended.
    fn finish(self) -> Result<Turn, ProviderError>;
}

/// One request of a turn: where it goes and what it says.
pub(crate) struct Exchange<'a> {
    pub(crate) url: &'a str,
    pub(crate) headers: &'a [(&'a str, String)],
    pub(crate) body: &'a serde_json::Value,
    /// The whole answer as one JSON body (a request that did not ask to stream).
    pub(crate) parse: fn(&serde_json::Value) -> Result<Turn, ProviderError>,
}

/// Runs one turn: posts the request (with retries), then reads the answer whole or
/// streams it through `S`, telling `progress` the text as it comes. When `give_up`
/// says so the request is dropped and the error keeps the text streamed until then.
pub(crate) fn turn<S: Streamed>(
    wire: &Wire,
    config: &ProviderConfig,
    give_up: Option<&GiveUpFn>,
    progress: Option<ProgressFn>,
    exchange: &Exchange<'_>,
) -> Result<Turn, ProviderError> {
    let mut state = S::default();
    let answered = wire.run(give_up, async {
        let resp = post(
            &wire.client,
            config,
            exchange.url,
            exchange.headers,
            exchange.body,
            progress.as_ref(),
        )
        .await?;
        if !config.stream {
            return (exchange.parse)(&json_of(resp, &config.api_key).await?).map(Some);
        }
        super::sse::read(resp, &config.api_key, |event, data| {
            let shown = state.text().len();
            let done = state.feed(event, data)?;
            super::tell_text(progress.as_ref(), &state.text()[shown..]);
            Ok(done)
        })
        .await?;
        Ok(None)
    });
    match answered {
        Err(why) => Err(why.error(state.into_text())),
        Ok(Err(e)) => Err(e),
        Ok(Ok(Some(whole))) => Ok(whole),
        Ok(Ok(None)) => state.finish(),
    }
}

/// Posts `body` to `url` with `headers`, retrying as the limits allow (each retry told
/// to `progress` before its wait); returns a response with a 2xx status.
pub(crate) async fn post(
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
        let mut req = client
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string());
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let (err, wait) = match req.send().await {
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
                // The body only words the error: one that cannot be read has none.
                let text = resp.text().await.unwrap_or_default();
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
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

pub(crate) fn transport_text(e: &reqwest::Error) -> String {
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
pub(crate) async fn json_of(
    resp: Response,
    key: &super::Secret,
) -> Result<serde_json::Value, ProviderError> {
    let text = resp
        .text()
        .await
        .map_err(|e| ProviderError::Transport(key.scrub(&transport_text(&e))))?;
    serde_json::from_str(&text).map_err(|e| {
        let start: String = text.chars().take(120).collect();
        ProviderError::Malformed(key.scrub(&format!("{e} in {start:?}")))
    })
}
