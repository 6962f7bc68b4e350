//! OpenTelemetry: a session as GenAI spans over OTLP, sent from its log
//! ([`spans_of`], `cairn export otel`) or live as its records are appended
//! ([`LiveExporter`], a [`cairn_tools::RecordSink`]).

mod batch;
mod live;
mod map;
mod send;

pub use batch::{SessionSpans, spans_of};
pub use live::{
    LiveExporter, LiveLimits, LiveReport, Note, OTEL_DRAIN_MS, OTEL_LIVE_BATCH_MS, OTEL_QUIET_MS,
};
pub use map::{Mapper, SCOPE_NAME, span_id, time_of, trace_id};
pub use send::{
    OTEL_BATCH_SPANS_MAX, OTEL_EXPORT_TIMEOUT_MS, OTLP_GRPC, OTLP_GRPC_PORT, OTLP_PROTOCOL,
    OtelConfig, OtelTable, Sender,
};
