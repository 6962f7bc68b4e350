//! The `--json` event stream of `run` and `resume`: JSON Lines on standard output, one
//! event per line, built from the records the engine appends (its observer) — never
//! from reading the log back. The shape is documented in `docs/STREAM.md` and checked
//! against `docs/stream.schema.json` by the command line's tests.
//!
//! A turn runs from a user message (or the start of a resumed model run) to the next
//! user message or the end of the session; its usage is the sum of its model turns'.
//! Items are what happens inside a turn: the model's messages, tool calls and the
//! commands they run, each started, maybe updated, then completed.

use std::sync::{Arc, Mutex};

use cairn_engine::Record;
use cairn_engine::event::{Event, FileWrite, ShellExec, ShellPhase};
use serde_json::{Value, json};

/// The JSON Schema of one line of the stream (`cairn schema stream`).
pub const SCHEMA: &str = include_str!("../../docs/stream.schema.json");

/// The stream's version, in every `session.started`.
pub const STREAM_VERSION: u32 = 1;

/// Where the events go, shared by the observer and the command that runs the session.
#[derive(Clone, Default)]
pub struct Stream {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    /// The turn running, counted from 1.
    turn: Option<u64>,
    turns: u64,
    input_tokens: u64,
    output_tokens: u64,
    cached_tokens: u64,
    /// The first error writing to standard output (a closed pipe): later lines are
    /// dropped, the session goes on and ends cleanly.
    failed: Option<std::io::ErrorKind>,
}

impl Stream {
    /// The observer to give `Engine::set_observer`.
    pub fn observer(&self) -> cairn_engine::Observer {
        let me = self.clone();
        Box::new(move |r: &Record| me.record(r))
    }

    /// Emits one event.
    pub fn emit(&self, event: &Value) {
        let mut inner = self.lock();
        inner.write(event);
    }

    /// `session.started`: the session's id and workspace; for a resumed session, what
    /// the resume found (`cairn_engine::ResumeReport`).
    pub fn started(&self, session: &str, workspace: &str, resume: Option<Value>) {
        let mut e = json!({
            "type": "session.started", "version": STREAM_VERSION, "session": session,
            "workspace": workspace, "resumed": resume.is_some(),
        });
        if let Some(r) = resume {
            e["resume"] = r;
        }
        self.emit(&e);
    }

    /// `text.delta`: the next piece of the model's text as the provider streams it,
    /// before its model turn is recorded (and its `agent_message` completed).
    pub fn text_delta(&self, text: &str) {
        if !text.is_empty() {
            self.emit(&json!({"type": "text.delta", "text": text}));
        }
    }

    /// `error`: what stopped the run, before the session's end.
    pub fn error(&self, message: &str) {
        self.emit(&json!({"type": "error", "message": message}));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while writing a line leaves nothing half-done that matters here.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Turns one appended record into the events it means.
    pub fn record(&self, r: &Record) {
        let mut s = self.lock();
        for e in events(&mut s, r) {
            s.write(&e);
        }
    }
}

impl Inner {
    fn write(&mut self, event: &Value) {
        use std::io::Write;
        if self.failed.is_some() {
            return;
        }
        let mut out = std::io::stdout().lock();
        let line = format!("{event}\n");
        if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
            self.failed = Some(e.kind());
        }
    }

    /// Adds a model turn's tokens to the session's.
    fn add_usage(&mut self, u: &Value) {
        self.input_tokens += u["input_tokens"].as_u64().unwrap_or(0);
        self.output_tokens += u["output_tokens"].as_u64().unwrap_or(0);
        self.cached_tokens += u["cached_tokens"].as_u64().unwrap_or(0);
    }

    fn begin_turn(&mut self, seq: u64, out: &mut Vec<Value>) -> u64 {
        if let Some(t) = self.turn {
            return t;
        }
        self.turns += 1;
        self.turn = Some(self.turns);
        self.input_tokens = 0;
        self.output_tokens = 0;
        self.cached_tokens = 0;
        out.push(json!({"type": "turn.started", "turn": self.turns, "seq": seq}));
        self.turns
    }

    fn end_turn(&mut self, seq: u64, out: &mut Vec<Value>) {
        if let Some(t) = self.turn.take() {
            out.push(json!({
                "type": "turn.completed", "turn": t, "seq": seq,
                "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                          "cached_tokens": self.cached_tokens},
            }));
        }
    }
}

/// The event of a command as it starts or ends.
fn shell_exec(s: &mut Inner, seq: u64, x: &ShellExec, out: &mut Vec<Value>) {
    let turn = s.begin_turn(seq, out);
    let id = format!("{}:{}", x.call, x.id.as_deref().unwrap_or("fg"));
    match &x.phase {
        ShellPhase::Started => out.push(item(
            "item.started",
            turn,
            seq,
            json!({"id": id, "kind": "command_execution", "call": x.call,
                   "argv": x.argv, "cwd": x.cwd, "pid": x.pid}),
        )),
        ShellPhase::Finished(end) => out.push(item(
            "item.completed",
            turn,
            seq,
            json!({"id": id, "kind": "command_execution", "call": x.call,
                   "argv": x.argv, "cwd": x.cwd, "pid": x.pid,
                   "status": end.status, "exit_code": end.exit_code,
                   "elapsed_us": end.elapsed_us}),
        )),
    }
}

/// The event of a file written: an update of the call that wrote it, or a change of
/// its own.
fn file_write(s: &mut Inner, seq: u64, w: &FileWrite, out: &mut Vec<Value>) {
    let turn = s.begin_turn(seq, out);
    let change = json!({"path": w.path, "op": w.op, "status": w.status});
    out.push(match &w.call {
        Some(call) => item(
            "item.updated",
            turn,
            seq,
            json!({"id": call, "kind": "tool_call", "file_write": change}),
        ),
        // A change no call made (found by a scan at resume): an item of its own.
        None => item(
            "item.completed",
            turn,
            seq,
            json!({"id": format!("w{seq}"), "kind": "file_change", "file_write": change}),
        ),
    });
}

/// The events one record means, in order.
fn events(s: &mut Inner, r: &Record) -> Vec<Value> {
    let mut out = Vec::new();
    let seq = r.seq;
    match &r.event {
        Event::UserMessage { text, .. } => {
            s.end_turn(seq, &mut out);
            let turn = s.begin_turn(seq, &mut out);
            out.push(item(
                "item.completed",
                turn,
                seq,
                json!({"id": format!("u{seq}"), "kind": "user_message", "text": text}),
            ));
        }
        Event::ModelTurn {
            text,
            tool_calls,
            usage,
            model,
            interrupted,
            ..
        } => {
            let turn = s.begin_turn(seq, &mut out);
            if let Some(u) = usage {
                s.add_usage(u);
            }
            let mut message = json!({
                "id": format!("m{seq}"), "kind": "agent_message", "text": text,
                "model": model, "tool_calls": tool_calls.len(),
            });
            if *interrupted {
                message["interrupted"] = true.into();
            }
            out.push(item("item.completed", turn, seq, message));
        }
        Event::ToolStarted {
            call, tool, input, ..
        } => {
            let turn = s.begin_turn(seq, &mut out);
            out.push(item(
                "item.started",
                turn,
                seq,
                json!({"id": call, "kind": "tool_call", "tool": tool, "input": input}),
            ));
        }
        Event::PermissionRequested {
            call, key, detail, ..
        } => {
            let turn = s.begin_turn(seq, &mut out);
            out.push(item(
                "item.updated",
                turn,
                seq,
                json!({"id": call, "kind": "tool_call", "permission": {"key": key, "detail": detail}}),
            ));
        }
        Event::PermissionDecided {
            call,
            key,
            answer,
            source,
            ..
        } => {
            let turn = s.begin_turn(seq, &mut out);
            out.push(item(
                "item.updated",
                turn,
                seq,
                json!({"id": call, "kind": "tool_call",
                       "permission": {"key": key, "answer": answer, "source": source}}),
            ));
        }
        Event::ShellExec(x) => shell_exec(s, seq, x, &mut out),
        Event::FileWrite(w) => file_write(s, seq, w, &mut out),
        Event::ToolFinished(f) => {
            let turn = s.begin_turn(seq, &mut out);
            out.push(item(
                "item.completed",
                turn,
                seq,
                json!({"id": f.call, "kind": "tool_call", "status": f.status,
                       "output": f.output, "elapsed_us": f.elapsed_us,
                       "refusal": f.refusal.as_ref().map(|r| r.rule)}),
            ));
        }
        Event::SessionEnded { reason, .. } => {
            s.end_turn(seq, &mut out);
            out.push(json!({"type": "session.ended", "seq": seq, "reason": reason}));
        }
        _ => {}
    }
    out
}

fn item(kind: &str, turn: u64, seq: u64, item: Value) -> Value {
    json!({"type": kind, "turn": turn, "seq": seq, "item": item})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interrupted model turn is an `agent_message` marked `interrupted`, and the
    /// line matches the stream's schema; a whole turn's has no such mark.
    #[test]
    fn an_interrupted_turn_is_an_agent_message_marked_interrupted() {
        let schema: Value = serde_json::from_str(SCHEMA).unwrap_or_else(|e| panic!("{e}"));
        let validator = jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{e}"));
        let turn = |interrupted: bool| Record {
            seq: 2,
            ts: "2026-01-01T00:00:00.000000Z".into(),
            hash: cairn_store::Hash::ZERO,
            event: cairn_engine::event::Event::ModelTurn {
                at: None,
                provider: "openai".into(),
                model: "m-1".into(),
                text: "Thinking about".into(),
                tool_calls: vec![],
                usage: None,
                interrupted,
            },
        };
        for interrupted in [true, false] {
            let lines = events(&mut Inner::default(), &turn(interrupted));
            let message = lines
                .iter()
                .find(|l| l["item"]["kind"] == "agent_message")
                .unwrap_or_else(|| panic!("{lines:?}"));
            assert_eq!(
                message["item"].get("interrupted"),
                interrupted.then_some(&Value::Bool(true)),
                "{message}"
            );
            for l in &lines {
                assert!(validator.is_valid(l), "{l}");
            }
        }
    }
}
