//! Where spans go and how: the configuration (OpenTelemetry's environment variables,
//! then the `[otel]` table of `config.toml`) and the OTLP exporter of
//! `opentelemetry-otlp` (HTTP/protobuf, reqwest's blocking client), driven batch by
//! batch from the caller's thread.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};

use crate::error::{Error, Result};

/// How long, in milliseconds, one export request may take before it is given up (the
/// `OTEL_EXPORTER_OTLP_TIMEOUT` default of OpenTelemetry is 10 s; a session's live
/// export waits for no request, so this only bounds how stale its queue gets).
pub const OTEL_EXPORT_TIMEOUT_MS: u64 = 10_000;

/// The most spans one export request carries.
pub const OTEL_BATCH_SPANS_MAX: usize = 512;

/// The `[otel]` table of `config.toml`, each key under the environment's variable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtelTable {
    /// The collector's base URL (`http://localhost:4318`); traces go to
    /// `<endpoint>/v1/traces`.
    pub endpoint: Option<String>,
    /// Headers sent with every request (an API key of a hosted backend).
    pub headers: Vec<(String, String)>,
    pub service_name: Option<String>,
    /// Whether messages, tool inputs and outputs are exported (redacted as the log
    /// holds them).
    pub capture_content: Option<bool>,
    pub timeout_ms: Option<u64>,
}

/// Where and how spans are sent, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtelConfig {
    /// The full URL traces are posted to (`…/v1/traces`).
    pub traces_url: String,
    pub headers: Vec<(String, String)>,
    /// `service.name`, when the environment's `OTEL_SERVICE_NAME` does not give it.
    pub service_name: String,
    pub capture_content: bool,
    pub timeout_ms: u64,
    /// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`:
    /// `http/protobuf` (the default) is the one built in; another is refused by
    /// [`Sender::new`] with a hint.
    pub protocol: String,
}

/// The one OTLP protocol this build sends.
pub const OTLP_PROTOCOL: &str = "http/protobuf";

/// The base endpoint's traces URL (`/v1/traces` appended, as OTLP/HTTP says).
fn traces_url_of(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

impl OtelConfig {
    /// The configuration from the environment (`env`), then `table`; `None` when
    /// neither names an endpoint (no export). `given` (a command's `--endpoint`) is a
    /// base endpoint over both. Variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the
    /// full URL), `OTEL_EXPORTER_OTLP_ENDPOINT` (a base), `OTEL_SERVICE_NAME`,
    /// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`,
    /// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` / `OTEL_EXPORTER_OTLP_TIMEOUT` (ms); the
    /// exporter itself adds `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_RESOURCE_ATTRIBUTES`.
    pub fn resolve(
        given: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
        table: &OtelTable,
    ) -> Option<OtelConfig> {
        let env = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let traces_url = given
            .map(traces_url_of)
            .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
            .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT").map(|b| traces_url_of(&b)))
            .or_else(|| table.endpoint.as_deref().map(traces_url_of))?;
        let capture_content = env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
            .map(|v| v.trim().eq_ignore_ascii_case("true"))
            .or(table.capture_content)
            .unwrap_or(false);
        let timeout_ms = env("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .or_else(|| env("OTEL_EXPORTER_OTLP_TIMEOUT"))
            .and_then(|v| v.trim().parse().ok())
            .or(table.timeout_ms)
            .unwrap_or(OTEL_EXPORT_TIMEOUT_MS);
        Some(OtelConfig {
            traces_url,
            headers: table.headers.clone(),
            service_name: env("OTEL_SERVICE_NAME")
                .or_else(|| table.service_name.clone())
                .unwrap_or_else(|| "cairn".into()),
            capture_content,
            timeout_ms,
            protocol: env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
                .map(|p| p.trim().to_ascii_lowercase())
                .unwrap_or_else(|| OTLP_PROTOCOL.into()),
        })
    }
}

/// Sends spans to one collector.
pub struct Sender {
    exporter: opentelemetry_otlp::SpanExporter,
    url: String,
}

impl Sender {
    /// The exporter of `config` (no connection is made yet).
    pub fn new(config: &OtelConfig) -> Result<Sender> {
        if config.protocol != OTLP_PROTOCOL {
            return Err(Error::Exporter {
                url: config.traces_url.clone(),
                what: format!(
                    "the OTLP protocol {:?} is not built in, only {OTLP_PROTOCOL}: set OTEL_EXPORTER_OTLP_PROTOCOL={OTLP_PROTOCOL} and give the collector's OTLP/HTTP port (4318)",
                    config.protocol
                ),
            });
        }
        let headers: HashMap<String, String> = config.headers.iter().cloned().collect();
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(config.traces_url.clone())
            .with_timeout(Duration::from_millis(config.timeout_ms))
            .with_headers(headers)
            .build()
            .map_err(|e| Error::Exporter {
                url: config.traces_url.clone(),
                what: e.to_string(),
            })?;
        // The SDK's detectors read `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`;
        // the configured name stands in only when the first is not set.
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name(config.service_name.clone());
        }
        exporter.set_resource(&resource.build());
        Ok(Sender {
            exporter,
            url: config.traces_url.clone(),
        })
    }

    /// Sends `spans`, [`OTEL_BATCH_SPANS_MAX`] a request; stops at the first request
    /// that fails.
    pub fn send(&self, spans: Vec<SpanData>) -> Result<()> {
        let mut spans = spans.into_iter().peekable();
        while spans.peek().is_some() {
            let batch: Vec<SpanData> = spans.by_ref().take(OTEL_BATCH_SPANS_MAX).collect();
            block_on(self.exporter.export(batch)).map_err(|e| Error::Send {
                url: self.url.clone(),
                what: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// The URL spans are posted to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// Wakes the thread that waits in [`block_on`].
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `f` to its end on this thread. The exporter's future, with reqwest's blocking
/// client, does its work in its first poll; the loop is for any that does not.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(out) => return out,
            Poll::Pending => std::thread::park(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(given: Option<&str>, vars: &[(&str, &str)], table: OtelTable) -> Option<OtelConfig> {
        OtelConfig::resolve(
            given,
            |k| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            },
            &table,
        )
    }

    #[test]
    fn the_endpoint_comes_from_the_flag_then_the_environment_then_the_table() {
        let table = OtelTable {
            endpoint: Some("http://t:4318/".into()),
            ..OtelTable::default()
        };
        let url = |c: Option<OtelConfig>| c.map(|c| c.traces_url);
        assert_eq!(url(check(None, &[], OtelTable::default())), None);
        assert_eq!(
            url(check(None, &[], table.clone())).as_deref(),
            Some("http://t:4318/v1/traces")
        );
        let base = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://e:4318")];
        assert_eq!(
            url(check(None, &base, table.clone())).as_deref(),
            Some("http://e:4318/v1/traces")
        );
        let full = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://e:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://f/x"),
        ];
        assert_eq!(
            url(check(None, &full, table.clone())).as_deref(),
            Some("http://f/x")
        );
        assert_eq!(
            url(check(Some("http://g"), &full, table)).as_deref(),
            Some("http://g/v1/traces")
        );
    }

    #[test]
    fn content_is_captured_only_when_asked() {
        let on = |vars: &[(&str, &str)], table: Option<bool>| {
            check(
                Some("http://x"),
                vars,
                OtelTable {
                    capture_content: table,
                    ..OtelTable::default()
                },
            )
            .map(|c| c.capture_content)
        };
        let var = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";
        assert_eq!(on(&[], None), Some(false));
        assert_eq!(on(&[], Some(true)), Some(true));
        assert_eq!(on(&[(var, "TRUE")], None), Some(true));
        assert_eq!(on(&[(var, "false")], Some(true)), Some(false));
    }

    #[test]
    fn a_protocol_not_built_in_is_refused_with_a_hint() {
        let with = |p: &str| {
            let vars = [("OTEL_EXPORTER_OTLP_PROTOCOL", p)];
            check(Some("http://127.0.0.1:9"), &vars, OtelTable::default())
                .map(|c| Sender::new(&c).map(|_| ()).map_err(|e| e.to_string()))
        };
        assert_eq!(with("http/protobuf"), Some(Ok(())));
        let e = with("grpc").and_then(|r| r.err()).unwrap_or_default();
        assert!(e.contains("\"grpc\" is not built in"), "{e}");
        assert!(e.contains("4318"), "{e}");
    }
}
