//! A session's records to OpenTelemetry spans, following the GenAI semantic conventions
//! (their development version, `gen_ai_latest_experimental`): one `invoke_agent` span
//! per session, a `chat {model}` span per model turn and an `execute_tool {tool}` span
//! per call, children of it; cairn's own facts under `cairn.*`. `docs/EXPORT.md` has
//! the mapping field by field.
//!
//! The mapping is a fold ([`Mapper::push`], record by record, in seq order), so the
//! batch export and the live sink make the same spans: a call's span is complete at its
//! `tool_finished`, a turn's at its `model_turn`, the session's when the records end
//! ([`Mapper::finish`]). Every id and time comes from the records: ids from the session
//! id and the seq that opens the span ([`trace_id`], [`span_id`]), times from the
//! records' `ts`, so the same records always give the same spans.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::SystemTime;

use cairn_core::Record;
use cairn_core::event::{Event, Status as CallStatus};
use opentelemetry::trace::{
    Event as SpanEvent, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId,
    TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

/// The instrumentation scope every span names: this crate.
pub const SCOPE_NAME: &str = "cairn";

/// The trace of session `session`: the first 16 bytes of a BLAKE3 key derivation over
/// its id (never all zero: an invalid id in OTLP).
pub fn trace_id(session: &str) -> TraceId {
    let h = blake3::Hasher::new_derive_key("cairn-otel v1 trace")
        .update(session.as_bytes())
        .finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&h.as_bytes()[..16]);
    if b == [0; 16] {
        b[15] = 1;
    }
    TraceId::from_bytes(b)
}

/// The span that record `seq` of session `session` opens: the first 8 bytes of a BLAKE3
/// key derivation over the id and the seq (never all zero).
pub fn span_id(session: &str, seq: u64) -> SpanId {
    let h = blake3::Hasher::new_derive_key("cairn-otel v1 span")
        .update(session.as_bytes())
        .update(&seq.to_le_bytes())
        .finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&h.as_bytes()[..8]);
    if b == [0; 8] {
        b[7] = 1;
    }
    SpanId::from_bytes(b)
}

/// A record's time; the Unix epoch for one that does not parse (the store writes RFC
/// 3339 times, so only a hand-made log has such a time).
pub fn time_of(ts: &str) -> SystemTime {
    ts.parse::<jiff::Timestamp>()
        .map(SystemTime::from)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The `gen_ai.provider.name` of a cairn provider kind (`openai`, `anthropic`); another
/// name (an imported session's, a recorded provider's) is kept as it is.
fn provider_name(provider: &str) -> String {
    match provider {
        "anthropic" => "anthropic".into(),
        "openai" => "openai".into(),
        other => other.to_string(),
    }
}

/// The text of a unit enum as serde writes it (`workspace-write`, `always`).
fn enum_text<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// A call started and not yet finished.
struct OpenCall {
    seq: u64,
    start: SystemTime,
    tool: String,
    mcp_server: Option<String>,
    input: Option<String>,
    asked: Option<SystemTime>,
    events: Vec<SpanEvent>,
}

/// The session's span as it is folded.
#[derive(Default)]
struct Root {
    start: Option<SystemTime>,
    end: Option<SystemTime>,
    first_seq: Option<u64>,
    last_seq: u64,
    head: String,
    agent: String,
    sandbox: Option<String>,
    catalog: Option<String>,
    imported: Option<String>,
    parent: Option<(String, u64)>,
    failed: Option<String>,
    ended: Option<String>,
    model: Option<(String, String)>,
    events: Vec<SpanEvent>,
}

/// Records to spans, one record at a time (see the module's documentation).
pub struct Mapper {
    session: String,
    trace: TraceId,
    capture_content: bool,
    verified: String,
    root: Root,
    calls: HashMap<String, OpenCall>,
    prev_time: Option<SystemTime>,
    /// User messages since the last model turn (kept only when content is captured).
    user_texts: Vec<String>,
    scope: InstrumentationScope,
}

impl Mapper {
    /// The mapper of session `session`; `capture_content` exports messages, tool inputs
    /// and outputs (as the log holds them: redacted). `verified` is what was checked of
    /// the records (`cairn.verify`): `chain` when each record's hash and link were
    /// checked as it was read, `live` when they come from the writer.
    pub fn new(session: &str, capture_content: bool, verified: &str) -> Mapper {
        Mapper {
            session: session.to_string(),
            trace: trace_id(session),
            capture_content,
            verified: verified.to_string(),
            root: Root {
                agent: "cairn".into(),
                ..Root::default()
            },
            calls: HashMap::new(),
            prev_time: None,
            user_texts: Vec::new(),
            scope: InstrumentationScope::builder(SCOPE_NAME)
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        }
    }

    /// The session's span: opened by `session_started`, seq 0, whichever record the
    /// mapper saw first.
    fn root_id(&self) -> SpanId {
        span_id(&self.session, 0)
    }

    // Every part of a span but its parent, ids and scope, which are the mapper's.
    #[allow(clippy::too_many_arguments)]
    fn span(
        &self,
        id: SpanId,
        name: String,
        kind: SpanKind,
        (start, end): (SystemTime, SystemTime),
        attributes: Vec<KeyValue>,
        events: Vec<SpanEvent>,
        status: Status,
    ) -> SpanData {
        SpanData {
            span_context: SpanContext::new(
                self.trace,
                id,
                TraceFlags::SAMPLED,
                false,
                TraceState::NONE,
            ),
            parent_span_id: self.root_id(),
            parent_span_is_remote: false,
            span_kind: kind,
            name: Cow::Owned(name),
            start_time: start,
            end_time: end.max(start),
            attributes,
            dropped_attributes_count: 0,
            events: {
                let mut e = SpanEvents::default();
                e.events = events;
                e
            },
            links: SpanLinks::default(),
            status,
            instrumentation_scope: self.scope.clone(),
        }
    }

    /// Folds one record, adding to `out` the spans it completes.
    pub fn push(&mut self, r: &Record, out: &mut Vec<SpanData>) {
        let at = time_of(r.time());
        let prev = self.prev_time.unwrap_or(at);
        self.prev_time = Some(at);
        if self.root.first_seq.is_none() {
            self.root.first_seq = Some(r.seq);
            self.root.start = Some(at);
        }
        self.root.last_seq = r.seq;
        self.root.end = Some(at);
        self.root.head = r.hash.to_string();
        match &r.event {
            Event::SessionStarted(s) => self.session_started(s, at),
            Event::UserMessage { text, .. } if self.capture_content => {
                self.user_texts.push(text.clone());
            }
            Event::ModelTurn {
                at: _,
                provider,
                model,
                text,
                tool_calls,
                usage,
                interrupted,
            } => {
                self.root.model = Some((provider.clone(), model.clone()));
                out.push(self.chat_span(
                    r.seq,
                    (prev, at),
                    provider,
                    model,
                    text,
                    tool_calls,
                    usage.as_ref(),
                    *interrupted,
                ));
            }
            Event::ToolStarted {
                call,
                tool,
                input,
                mcp,
                ..
            } => self.tool_started(r.seq, at, call, tool, input, mcp.as_ref()),
            Event::PermissionRequested {
                call, key, guarded, ..
            } => self.permission_requested(call, key, *guarded, at),
            Event::PermissionDecided {
                call,
                key,
                answer,
                source,
                ..
            } => self.permission_decided(call, key, (enum_text(answer), enum_text(source)), at),
            Event::ToolFinished(f) => {
                if let Some(c) = self.calls.remove(&f.call) {
                    let output = self.capture_content.then(|| f.output.clone());
                    out.push(self.tool_span(
                        &f.call,
                        c,
                        at,
                        r.seq,
                        Some((f.status, f.elapsed_us)),
                        output,
                    ));
                }
            }
            Event::SessionResumed { .. } => {
                self.root.events.push(SpanEvent::new(
                    "cairn.session.resumed",
                    at,
                    vec![KeyValue::new("cairn.seq", r.seq as i64)],
                    0,
                ));
            }
            Event::SessionEnded { reason, failed, .. } => {
                self.root.ended = Some(reason.clone());
                self.root.failed = failed.then(|| reason.clone());
            }
            _ => {}
        }
    }

    fn session_started(&mut self, s: &cairn_core::event::SessionStarted, at: SystemTime) {
        self.root.start = Some(at);
        self.root.catalog = Some(s.catalog.clone());
        self.root.sandbox = s.sandbox.as_ref().map(|b| enum_text(&b.mode));
        self.root.parent = s.parent.as_ref().map(|p| (p.session.clone(), p.seq));
        if let Some(a) = &s.agent {
            self.root.agent = a.name.clone();
        }
        if let Some(i) = &s.imported {
            self.root.agent = i.agent.clone();
            self.root.imported = Some(i.agent.clone());
        }
    }

    fn tool_started(
        &mut self,
        seq: u64,
        at: SystemTime,
        call: &str,
        tool: &str,
        input: &serde_json::Value,
        mcp: Option<&cairn_core::event::McpRef>,
    ) {
        self.calls.insert(
            call.to_string(),
            OpenCall {
                seq,
                start: at,
                tool: tool.to_string(),
                mcp_server: mcp.map(|m| m.server.clone()),
                input: self.capture_content.then(|| input.to_string()),
                asked: None,
                events: Vec::new(),
            },
        );
    }

    /// The permission question, an event on its call's span.
    fn permission_requested(&mut self, call: &str, key: &str, guarded: bool, at: SystemTime) {
        if let Some(c) = self.calls.get_mut(call) {
            c.asked = Some(at);
            let mut attributes = vec![KeyValue::new("cairn.permission.key", key.to_string())];
            if guarded {
                attributes.push(KeyValue::new("cairn.permission.guarded", true));
            }
            c.events.push(SpanEvent::new(
                "cairn.permission.requested",
                at,
                attributes,
                0,
            ));
        }
    }

    /// The answer (and the source of the answer), with the wait since the question.
    fn permission_decided(
        &mut self,
        call: &str,
        key: &str,
        (answer, source): (String, String),
        at: SystemTime,
    ) {
        if let Some(c) = self.calls.get_mut(call) {
            let mut attributes = vec![
                KeyValue::new("cairn.permission.key", key.to_string()),
                KeyValue::new("cairn.permission.answer", answer),
                KeyValue::new("cairn.permission.source", source),
            ];
            if let Some(asked) = c.asked.take() {
                let waited = at.duration_since(asked).unwrap_or_default();
                attributes.push(KeyValue::new(
                    "cairn.permission.wait_ms",
                    waited.as_millis() as i64,
                ));
            }
            c.events.push(SpanEvent::new(
                "cairn.permission.decided",
                at,
                attributes,
                0,
            ));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn chat_span(
        &mut self,
        seq: u64,
        times: (SystemTime, SystemTime),
        provider: &str,
        model: &str,
        text: &str,
        tool_calls: &[serde_json::Value],
        usage: Option<&serde_json::Value>,
        interrupted: bool,
    ) -> SpanData {
        let mut a = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", provider_name(provider)),
            KeyValue::new("gen_ai.request.model", model.to_string()),
            KeyValue::new("gen_ai.conversation.id", self.session.clone()),
            KeyValue::new("cairn.seq", seq as i64),
        ];
        let finish = if interrupted {
            "interrupted"
        } else if tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        a.push(KeyValue::new(
            "gen_ai.response.finish_reasons",
            Value::Array(opentelemetry::Array::String(vec![finish.into()])),
        ));
        let count = |k: &str| usage.and_then(|u| u.get(k)).and_then(|v| v.as_u64());
        for (field, attr) in [
            ("input_tokens", "gen_ai.usage.input_tokens"),
            ("output_tokens", "gen_ai.usage.output_tokens"),
            ("cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
            (
                "cache_write_tokens",
                "gen_ai.usage.cache_creation.input_tokens",
            ),
        ] {
            if let Some(n) = count(field) {
                a.push(KeyValue::new(attr, n as i64));
            }
        }
        if self.capture_content {
            let inputs: Vec<serde_json::Value> = self
                .user_texts
                .drain(..)
                .map(|t| serde_json::json!({"role": "user", "parts": [{"type": "text", "content": t}]}))
                .collect();
            if !inputs.is_empty() {
                a.push(KeyValue::new(
                    "gen_ai.input.messages",
                    serde_json::Value::Array(inputs).to_string(),
                ));
            }
            let mut parts = Vec::new();
            if !text.is_empty() {
                parts.push(serde_json::json!({"type": "text", "content": text}));
            }
            for c in tool_calls {
                parts.push(serde_json::json!({"type": "tool_call", "call": c}));
            }
            let out =
                serde_json::json!([{"role": "assistant", "parts": parts, "finish_reason": finish}]);
            a.push(KeyValue::new("gen_ai.output.messages", out.to_string()));
        }
        let status = if interrupted {
            Status::error("interrupted")
        } else {
            Status::Unset
        };
        self.span(
            span_id(&self.session, seq),
            format!("chat {model}"),
            SpanKind::Client,
            times,
            a,
            Vec::new(),
            status,
        )
    }

    fn tool_span(
        &self,
        call: &str,
        c: OpenCall,
        end: SystemTime,
        end_seq: u64,
        finished: Option<(CallStatus, u64)>,
        output: Option<String>,
    ) -> SpanData {
        let mut a = vec![
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", c.tool.clone()),
            KeyValue::new("gen_ai.tool.call.id", call.to_string()),
            KeyValue::new(
                "gen_ai.tool.type",
                if c.mcp_server.is_some() {
                    "extension"
                } else {
                    "function"
                },
            ),
            KeyValue::new("cairn.seq.first", c.seq as i64),
            KeyValue::new("cairn.seq.last", end_seq as i64),
        ];
        if let Some(server) = &c.mcp_server {
            a.push(KeyValue::new("cairn.mcp.server", server.clone()));
        }
        let status = match finished {
            Some((s, elapsed_us)) => {
                a.push(KeyValue::new("cairn.call.status", s.as_str()));
                a.push(KeyValue::new("cairn.call.elapsed_us", elapsed_us as i64));
                s
            }
            None => CallStatus::Interrupted,
        };
        let span_status = if status == CallStatus::Ok {
            Status::Unset
        } else {
            a.push(KeyValue::new("error.type", status.as_str()));
            Status::error(status.as_str())
        };
        if let Some(input) = &c.input {
            a.push(KeyValue::new("gen_ai.tool.call.arguments", input.clone()));
        }
        if let Some(output) = output {
            a.push(KeyValue::new("gen_ai.tool.call.result", output));
        }
        self.span(
            span_id(&self.session, c.seq),
            format!("execute_tool {}", c.tool),
            SpanKind::Internal,
            (c.start, end),
            a,
            c.events,
            span_status,
        )
    }

    /// The records have ended (the log's end, or the writer is done): adds the spans of
    /// calls still open (ended at the last record, `error.type` `interrupted`) and the
    /// session's own span. Nothing when no record was folded.
    pub fn finish(mut self, out: &mut Vec<SpanData>) {
        let Some(first_seq) = self.root.first_seq else {
            return;
        };
        let end = self.root.end.unwrap_or(SystemTime::UNIX_EPOCH);
        let mut open: Vec<(String, OpenCall)> = self.calls.drain().collect();
        open.sort_by_key(|(_, c)| c.seq);
        for (call, c) in open {
            out.push(self.tool_span(&call, c, end, self.root.last_seq, None, None));
        }
        let root = std::mem::take(&mut self.root);
        let mut a = vec![
            KeyValue::new("gen_ai.operation.name", "invoke_agent"),
            KeyValue::new("gen_ai.agent.name", root.agent.clone()),
            KeyValue::new("gen_ai.agent.id", self.session.clone()),
            KeyValue::new("gen_ai.conversation.id", self.session.clone()),
            KeyValue::new("cairn.session.id", self.session.clone()),
            KeyValue::new("cairn.seq.first", first_seq as i64),
            KeyValue::new("cairn.seq.last", root.last_seq as i64),
            KeyValue::new("cairn.head.hash", root.head.clone()),
            KeyValue::new("cairn.verify", self.verified.clone()),
        ];
        if let Some((provider, model)) = &root.model {
            a.push(KeyValue::new(
                "gen_ai.provider.name",
                provider_name(provider),
            ));
            a.push(KeyValue::new("gen_ai.request.model", model.clone()));
        }
        if let Some(m) = &root.sandbox {
            a.push(KeyValue::new("cairn.sandbox.mode", m.clone()));
        }
        if let Some(c) = &root.catalog {
            a.push(KeyValue::new("cairn.catalog", c.clone()));
        }
        if let Some(i) = &root.imported {
            a.push(KeyValue::new("cairn.imported.agent", i.clone()));
        }
        if let Some(reason) = &root.ended {
            a.push(KeyValue::new("cairn.session.end_reason", reason.clone()));
        }
        let mut links = SpanLinks::default();
        if let Some((parent, seq)) = &root.parent {
            a.push(KeyValue::new("cairn.parent.session.id", parent.clone()));
            a.push(KeyValue::new("cairn.parent.seq", *seq as i64));
            links.links.push(Link::new(
                SpanContext::new(
                    trace_id(parent),
                    span_id(parent, 0),
                    TraceFlags::SAMPLED,
                    true,
                    TraceState::NONE,
                ),
                vec![KeyValue::new("cairn.link", "fork parent")],
                0,
            ));
        }
        let status = match &root.failed {
            Some(reason) => {
                a.push(KeyValue::new("error.type", "session_failed"));
                Status::error(reason.clone())
            }
            None => Status::Unset,
        };
        let mut span = self.span(
            self.root_id(),
            format!("invoke_agent {}", root.agent),
            SpanKind::Internal,
            (root.start.unwrap_or(end), end),
            a,
            root.events,
            status,
        );
        span.parent_span_id = SpanId::INVALID;
        span.links = links;
        out.push(span);
    }
}
