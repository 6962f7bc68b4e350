//! Where spans go and how: the configuration (OpenTelemetry's environment variables,
//! then the `[otel]` table of `config.toml`) and the OTLP exporter of
//! `opentelemetry-otlp` (HTTP/protobuf with reqwest's blocking client, or gRPC with
//! tonic on a current-thread runtime the sender owns), driven batch by batch from the
//! caller's thread.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};

use crate::error::{Error, Result};

/// How long, in milliseconds, one export request may take before it is given up (the
/// `OTEL_EXPORTER_OTLP_TIMEOUT` default of OpenTelemetry is 10 s; a session's live
/// export waits for no request, so this only bounds how far behind the log its thread gets).
pub const OTEL_EXPORT_TIMEOUT_MS: u64 = 10_000;

/// The most spans one export request carries.
pub const OTEL_BATCH_SPANS_MAX: usize = 512;

/// The `[otel]` table of `config.toml`, each key under the environment's variable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtelTable {
    /// The collector's base URL (`http://localhost:4318`); traces go to
    /// `<endpoint>/v1/traces` (with `grpc`, to the endpoint itself, port 4317 when it
    /// names none).
    pub endpoint: Option<String>,
    /// `http/protobuf` (the default) or `grpc`.
    pub protocol: Option<String>,
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
    /// The full URL traces are posted to (`…/v1/traces`); with `grpc`, the
    /// collector's endpoint (`http://host:4317`).
    pub traces_url: String,
    pub headers: Vec<(String, String)>,
    /// `service.name`, when the environment's `OTEL_SERVICE_NAME` does not give it.
    pub service_name: String,
    pub capture_content: bool,
    pub timeout_ms: u64,
    /// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`, then
    /// `protocol` of `[otel]`: [`OTLP_PROTOCOL`] (the default) or [`OTLP_GRPC`];
    /// another is refused by [`Sender::new`] with a hint.
    pub protocol: String,
}

/// The OTLP protocol sent by default: protobuf over HTTP.
pub const OTLP_PROTOCOL: &str = "http/protobuf";

/// OTLP over gRPC (plaintext HTTP/2: this build has no TLS for gRPC).
pub const OTLP_GRPC: &str = "grpc";

/// The port a gRPC collector listens on when its base endpoint names none (OTLP's
/// default for gRPC).
pub const OTLP_GRPC_PORT: u16 = 4317;

/// The base endpoint's traces URL (`/v1/traces` appended, as OTLP/HTTP says).
fn traces_url_of(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

/// The base endpoint as a gRPC target: no path appended (gRPC's path is the
/// service's), [`OTLP_GRPC_PORT`] when it names no port.
fn grpc_url_of(base: &str) -> String {
    let base = base.trim_end_matches('/');
    let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    // After an IPv6 literal's `]`, or anywhere in a name or IPv4 address.
    let host_end = authority.rfind(']').map_or(0, |i| i + 1);
    if authority[host_end..].contains(':') {
        format!("{scheme}://{authority}{path}")
    } else {
        format!("{scheme}://{authority}:{OTLP_GRPC_PORT}{path}")
    }
}

/// The protocol as OTLP names it, lowercased; `http/protobuf` when not given.
fn protocol_of(p: Option<String>) -> String {
    p.map(|p| p.trim().to_ascii_lowercase())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| OTLP_PROTOCOL.into())
}

impl OtelConfig {
    /// The configuration from the environment (`env`), then `table`; `None` when
    /// neither names an endpoint (no export). `given` (a command's `--endpoint`) is a
    /// base endpoint over both. Variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the
    /// full URL), `OTEL_EXPORTER_OTLP_ENDPOINT` (a base), `OTEL_SERVICE_NAME`,
    /// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`,
    /// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` / `OTEL_EXPORTER_OTLP_TIMEOUT` (ms),
    /// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`; the
    /// exporter itself adds `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_RESOURCE_ATTRIBUTES`.
    pub fn resolve(
        given: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
        table: &OtelTable,
    ) -> Option<OtelConfig> {
        OtelConfig::resolve_with(given, None, env, table)
    }

    /// [`OtelConfig::resolve`] with `protocol` (a command's `--protocol`) over the
    /// environment's and the table's.
    pub fn resolve_with(
        given: Option<&str>,
        protocol: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
        table: &OtelTable,
    ) -> Option<OtelConfig> {
        let env = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let protocol = protocol_of(
            protocol
                .map(str::to_string)
                .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
                .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
                .or_else(|| table.protocol.clone()),
        );
        let of_base = |base: &str| {
            if protocol == OTLP_GRPC {
                grpc_url_of(base)
            } else {
                traces_url_of(base)
            }
        };
        let traces_url = given
            .map(of_base)
            .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
            .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT").map(|b| of_base(&b)))
            .or_else(|| table.endpoint.as_deref().map(of_base))?;
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
            protocol,
        })
    }
}

/// Sends spans to one collector.
pub struct Sender {
    exporter: opentelemetry_otlp::SpanExporter,
    url: String,
    /// The gRPC exporter's runtime: its channel's connection and requests run on it,
    /// within each [`Sender::send`]. `None` over HTTP (reqwest's blocking client).
    runtime: Option<tokio::runtime::Runtime>,
    /// The bound of one request (gRPC's is also held by the runtime's timer).
    timeout: Duration,
}

impl Sender {
    /// The exporter of `config` (no connection is made yet).
    pub fn new(config: &OtelConfig) -> Result<Sender> {
        let built = |what: String| Error::Exporter {
            url: config.traces_url.clone(),
            what,
        };
        let timeout = Duration::from_millis(config.timeout_ms);
        let (mut exporter, runtime) = match config.protocol.as_str() {
            OTLP_PROTOCOL => {
                let headers: HashMap<String, String> = config.headers.iter().cloned().collect();
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(config.traces_url.clone())
                    .with_timeout(timeout)
                    .with_headers(headers)
                    .build()
                    .map_err(|e| built(e.to_string()))?;
                (exporter, None)
            }
            OTLP_GRPC => {
                if config.traces_url.starts_with("https:") {
                    return Err(built(format!(
                        "gRPC over TLS is not built in: give the collector's plaintext gRPC endpoint (http://…:{OTLP_GRPC_PORT}), or set OTEL_EXPORTER_OTLP_PROTOCOL={OTLP_PROTOCOL} for an https collector"
                    )));
                }
                let mut headers = http::HeaderMap::new();
                for (k, v) in &config.headers {
                    let key = http::HeaderName::from_bytes(k.as_bytes())
                        .map_err(|e| built(format!("header {k:?}: {e}")))?;
                    let value = http::HeaderValue::from_str(v)
                        .map_err(|e| built(format!("header {k:?}: {e}")))?;
                    headers.insert(key, value);
                }
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| built(format!("starting the gRPC runtime: {e}")))?;
                // tonic's lazy channel spawns its worker on the runtime it is made in.
                let exporter = {
                    let _in = runtime.enter();
                    opentelemetry_otlp::SpanExporter::builder()
                        .with_tonic()
                        .with_endpoint(config.traces_url.clone())
                        .with_timeout(timeout)
                        .with_metadata(tonic_metadata(headers))
                        .build()
                        .map_err(|e| built(e.to_string()))?
                };
                (exporter, Some(runtime))
            }
            other => {
                return Err(built(format!(
                    "the OTLP protocol {other:?} is not built in, only {OTLP_PROTOCOL} and {OTLP_GRPC}: set OTEL_EXPORTER_OTLP_PROTOCOL={OTLP_PROTOCOL} and give the collector's OTLP/HTTP port (4318), or {OTLP_GRPC} and its gRPC port ({OTLP_GRPC_PORT})"
                )));
            }
        };
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
            runtime,
            timeout,
        })
    }

    /// Sends `spans`, [`OTEL_BATCH_SPANS_MAX`] a request; stops at the first request
    /// that fails.
    pub fn send(&self, spans: Vec<SpanData>) -> Result<()> {
        let mut spans = spans.into_iter().peekable();
        while spans.peek().is_some() {
            let batch: Vec<SpanData> = spans.by_ref().take(OTEL_BATCH_SPANS_MAX).collect();
            let sent = match &self.runtime {
                None => block_on(self.exporter.export(batch)).map_err(|e| e.to_string()),
                // The channel's own timeout bounds the request; this one also bounds
                // a connection that never answers.
                Some(rt) => rt.block_on(async {
                    match tokio::time::timeout(self.timeout, self.exporter.export(batch)).await {
                        Ok(r) => r.map_err(|e| e.to_string()),
                        Err(_) => Err(format!("no answer in {} ms", self.timeout.as_millis())),
                    }
                }),
            };
            sent.map_err(|what| Error::Send {
                url: self.url.clone(),
                what,
            })?;
        }
        Ok(())
    }

    /// The URL spans are posted to (with gRPC, the collector's endpoint).
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// `headers` as gRPC metadata (the keys lowercased, as HTTP/2 sends them).
fn tonic_metadata(
    headers: http::HeaderMap,
) -> opentelemetry_otlp::tonic_types::metadata::MetadataMap {
    opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(headers)
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
        assert_eq!(with("GRPC"), Some(Ok(())));
        let e = with("http/json").and_then(|r| r.err()).unwrap_or_default();
        assert!(e.contains("\"http/json\" is not built in"), "{e}");
        assert!(e.contains("4318") && e.contains("4317"), "{e}");
    }

    #[test]
    fn grpc_over_tls_is_refused_with_a_hint() {
        let c = check(
            Some("https://collector.example:4317"),
            &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
            OtelTable::default(),
        );
        let e = c.map(|c| Sender::new(&c).err().map(|e| e.to_string()));
        let e = e.flatten().unwrap_or_default();
        assert!(e.contains("gRPC over TLS is not built in"), "{e}");
    }

    #[test]
    fn the_protocol_comes_from_the_flag_then_the_environment_then_the_table() {
        let table = OtelTable {
            protocol: Some("grpc".into()),
            ..OtelTable::default()
        };
        let protocol = |given: Option<&str>, vars: &[(&str, &str)], table: &OtelTable| {
            OtelConfig::resolve_with(
                Some("http://c"),
                given,
                |k| {
                    vars.iter()
                        .find(|(n, _)| *n == k)
                        .map(|(_, v)| v.to_string())
                },
                table,
            )
            .map(|c| c.protocol)
        };
        let both = [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ];
        let default = OtelTable::default();
        assert_eq!(
            protocol(None, &[], &default).as_deref(),
            Some(OTLP_PROTOCOL)
        );
        assert_eq!(protocol(None, &[], &table).as_deref(), Some(OTLP_GRPC));
        assert_eq!(
            protocol(None, &both[..1], &default).as_deref(),
            Some(OTLP_GRPC)
        );
        assert_eq!(
            protocol(None, &both, &table).as_deref(),
            Some(OTLP_PROTOCOL)
        );
        assert_eq!(
            protocol(Some("grpc"), &both, &default).as_deref(),
            Some(OTLP_GRPC)
        );
    }

    #[test]
    fn a_grpc_base_endpoint_gets_no_path_and_port_4317_when_it_names_none() {
        let url = |given: &str, vars: &[(&str, &str)]| {
            let mut vars = vars.to_vec();
            vars.push(("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"));
            check(Some(given), &vars, OtelTable::default()).map(|c| c.traces_url)
        };
        assert_eq!(url("http://c", &[]).as_deref(), Some("http://c:4317"));
        assert_eq!(url("http://c/", &[]).as_deref(), Some("http://c:4317"));
        assert_eq!(url("http://c:9000", &[]).as_deref(), Some("http://c:9000"));
        assert_eq!(
            url("http://[::1]", &[]).as_deref(),
            Some("http://[::1]:4317")
        );
        assert_eq!(
            url("http://[::1]:55/p", &[]).as_deref(),
            Some("http://[::1]:55/p")
        );
        assert_eq!(url("c", &[]).as_deref(), Some("http://c:4317"));
        // The full traces URL is taken as it is; a base from the environment too gets
        // the port.
        let full = check(
            None,
            &[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://f"),
            ],
            OtelTable::default(),
        );
        assert_eq!(full.map(|c| c.traces_url).as_deref(), Some("http://f"));
        let base = check(
            None,
            &[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://e"),
            ],
            OtelTable::default(),
        );
        assert_eq!(base.map(|c| c.traces_url).as_deref(), Some("http://e:4317"));
    }
}
