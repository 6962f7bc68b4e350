//! cairn sessions in the formats other tools read. `otel`: a session as OpenTelemetry
//! traces (GenAI semantic conventions) over OTLP, from its log (`cairn export otel`)
//! or live as its records are appended (a [`cairn_tools::RecordSink`] the cli gives a
//! writer's home). `atif`: a session as one trajectory of Harbor's Agent Trajectory
//! Interchange Format (`cairn export atif`). `docs/EXPORT.md` has the mapping field by
//! field.
//!
//! ```
//! use cairn_export::otel::{span_id, trace_id};
//! // Ids derive from the session id and the seq that opens a span: exporting a
//! // session twice, or live and then from its log, gives the same ids.
//! assert_eq!(trace_id("s1"), trace_id("s1"));
//! assert_ne!(span_id("s1", 0), span_id("s1", 1));
//! ```
//!
//! Must never: write a session, block or fail the call path (the live exporter is
//! told only the log's length, and reads the records from the log), decide what a session holds (it reads logs with the
//! engine's parser).

pub mod atif;
mod error;
pub mod otel;
mod session;

pub use error::{Error, Result};
