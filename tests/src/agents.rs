//! The real coding agents, offline: Codex CLI and Claude Code as published (pinned in
//! `tests/agents/package-lock.json`, installed by `tests/agents/setup.sh`), run against
//! a fake model server that the test owns, on 127.0.0.1.
//!
//! The model is a [`Script`]: turns of text and tool calls. Which turn a request gets
//! is read from the request itself, so an agent that retries, adds side requests or
//! runs a subagent still follows the script: every call id the fake model hands out
//! says its conversation and turn (`call_<conv>_<turn>_<n>`), and the next turn of a
//! conversation is the one after the highest turn whose ids the request carries back.
//! A request that carries none starts a conversation: the subagent one whose marker
//! its first user message holds, else the main one. A request offering no tools (a
//! title, a summary) gets a plain text answer. Past its last turn a conversation ends
//! with the text `done`.
//!
//! Codex speaks the Responses API over SSE (`POST /v1/responses`), Claude Code the
//! Anthropic Messages API over SSE (`POST /v1/messages`), Gemini CLI the Gemini API
//! (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`, its `functionCall`
//! ids carried back): one server answers all three.
//! Tools the agent marks as custom (Codex's `apply_patch`) are called with the raw
//! text input; a [`Call`] with a namespace is an MCP call as Codex names it.
//!
//! Each agent runs with a private home (`CODEX_HOME`, or `HOME` for Claude Code, with
//! the first-run answers filled in), a cleared environment and every non-essential
//! network switch off; see [`Codex`] and [`Claude`]. A failed run panics with the
//! agent's stderr and the requests the model saw.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::http::{Req, Server, sse};

/// How long one agent run may take before the test fails.
pub const RUN_MS_MAX: u64 = 90_000;

/// One tool call the fake model makes.
#[derive(Debug, Clone)]
pub struct Call {
    pub name: String,
    /// The arguments; a string for a custom (free-form) tool such as Codex's
    /// `apply_patch`.
    pub input: Value,
    /// Codex's namespace of an MCP tool (`mcp__cairn`), found through `tool_search`.
    pub namespace: Option<String>,
}

/// A call of tool `name` with `input`.
pub fn call(name: &str, input: Value) -> Call {
    Call {
        name: name.into(),
        input,
        namespace: None,
    }
}

/// Codex's call of MCP tool `tool` of `server` (`function_call` with a namespace).
pub fn mcp_call(server: &str, tool: &str, input: Value) -> Call {
    Call {
        name: tool.into(),
        input,
        namespace: Some(format!("mcp__{server}")),
    }
}

/// Codex's call of tool `name` of namespace `namespace` (a `function_call` with a
/// `namespace`), such as `collaboration`'s `spawn_agent` (multi-agent v2).
pub fn ns_call(namespace: &str, name: &str, input: Value) -> Call {
    Call {
        name: name.into(),
        input,
        namespace: Some(namespace.into()),
    }
}

/// One answer of the model: some text, then tool calls (parallel when several).
#[derive(Debug, Clone, Default)]
pub struct Turn {
    pub text: String,
    pub calls: Vec<Call>,
}

impl Turn {
    pub fn text(text: &str) -> Turn {
        Turn {
            text: text.into(),
            calls: Vec::new(),
        }
    }

    pub fn calls(calls: Vec<Call>) -> Turn {
        Turn {
            text: String::new(),
            calls,
        }
    }
}

/// What the fake model says: the main conversation's turns, and those of subagents
/// (a conversation whose first user message holds the marker).
#[derive(Debug, Clone, Default)]
pub struct Script {
    pub main: Vec<Turn>,
    pub subagents: Vec<(String, Vec<Turn>)>,
}

impl Script {
    pub fn new(main: Vec<Turn>) -> Script {
        Script {
            main,
            subagents: Vec::new(),
        }
    }

    /// Turns for the conversation whose first user message holds `marker`.
    pub fn subagent(mut self, marker: &str, turns: Vec<Turn>) -> Script {
        self.subagents.push((marker.into(), turns));
        self
    }

    fn turns(&self, conv: usize) -> &[Turn] {
        if conv == 0 {
            &self.main
        } else {
            self.subagents.get(conv - 1).map_or(&[], |(_, t)| t)
        }
    }
}

/// Where a request was in the script: (conversation, turn), `None` for a side request.
pub type Position = Option<(usize, usize)>;

/// The fake model server.
pub struct FakeModel {
    pub server: Server,
    /// Each answer given: (conversation, turn) per request, `None` for a side request.
    pub answered: Arc<Mutex<Vec<Position>>>,
}

impl FakeModel {
    pub fn start(script: Script) -> FakeModel {
        let answered: Arc<Mutex<Vec<Position>>> = Arc::default();
        let log = answered.clone();
        let server = Server::start(move |req, _| {
            let (answer, which) = answer(&script, req);
            log.lock().unwrap_or_else(|p| p.into_inner()).push(which);
            answer
        });
        FakeModel { server, answered }
    }

    pub fn url(&self) -> &str {
        &self.server.url
    }

    /// The requests so far.
    pub fn seen(&self) -> Vec<Req> {
        self.server.seen()
    }

    /// Every request's path and, for a model request, its tool results in order (a
    /// summary for failure messages).
    pub fn describe(&self) -> String {
        let answered = self
            .answered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut out = String::new();
        for (i, r) in self.seen().iter().enumerate() {
            let results: Vec<String> = tool_results(&r.json())
                .into_iter()
                .map(|(id, text)| format!("{id}: {}", text.chars().take(200).collect::<String>()))
                .collect();
            out.push_str(&format!(
                "request {i}: {} {} → {:?}\n  results: {results:#?}\n",
                r.method,
                r.path,
                answered.get(i).copied().flatten()
            ));
        }
        out
    }
}

/// The (call id, output text) pairs a request carries back, in order.
pub fn tool_results(body: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(items) = body["input"].as_array() {
        for i in items {
            let t = i["type"].as_str().unwrap_or("");
            if t.ends_with("_output") {
                let text = match &i["output"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push((i["call_id"].as_str().unwrap_or("").to_string(), text));
            }
        }
    }
    for c in body["contents"].as_array().into_iter().flatten() {
        for p in c["parts"].as_array().into_iter().flatten() {
            let r = &p["functionResponse"];
            if r.is_object() {
                let text = match &r["response"]["output"] {
                    Value::String(s) => s.clone(),
                    _ => r["response"].to_string(),
                };
                out.push((r["id"].as_str().unwrap_or("").to_string(), text));
            }
        }
    }
    if let Some(messages) = body["messages"].as_array() {
        for m in messages {
            if m["role"] == "tool" {
                let text = match &m["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push((m["tool_call_id"].as_str().unwrap_or("").to_string(), text));
            }
            for b in m["content"].as_array().into_iter().flatten() {
                if b["type"] == "tool_result" {
                    let text = match &b["content"] {
                        Value::String(s) => s.clone(),
                        Value::Array(parts) => parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join("\n"),
                        other => other.to_string(),
                    };
                    out.push((b["tool_use_id"].as_str().unwrap_or("").to_string(), text));
                }
            }
        }
    }
    out
}

/// `call_<conv>_<turn>_<n>` (Codex) or `toolu_<conv>_<turn>_<n>` (Claude Code).
fn parse_id(id: &str) -> Option<(usize, usize)> {
    let rest = id
        .strip_prefix("call_")
        .or_else(|| id.strip_prefix("toolu_"))?;
    let mut parts = rest.split('_');
    let conv = parts.next()?.parse().ok()?;
    let turn = parts.next()?.parse().ok()?;
    parts.next()?.parse::<usize>().ok()?;
    Some((conv, turn))
}

/// The call ids a request carries (calls the model made earlier in it).
fn call_ids(body: &Value) -> Vec<String> {
    let mut ids = Vec::new();
    for i in body["input"].as_array().into_iter().flatten() {
        if let Some(id) = i["call_id"].as_str() {
            ids.push(id.to_string());
        }
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            if let Some(id) = c["id"].as_str() {
                ids.push(id.to_string());
            }
        }
        for b in m["content"].as_array().into_iter().flatten() {
            if let Some(id) = b["id"].as_str().or(b["tool_use_id"].as_str()) {
                ids.push(id.to_string());
            }
        }
    }
    for c in body["contents"].as_array().into_iter().flatten() {
        for p in c["parts"].as_array().into_iter().flatten() {
            if let Some(id) = p["functionCall"]["id"].as_str() {
                ids.push(id.to_string());
            }
        }
    }
    ids
}

/// The text of the first user message (Claude Code: all its text blocks; Codex: the
/// user messages, and the messages from other agents: a subagent's task comes as an
/// `agent_message` whose payload is `encrypted_content`, which Codex passes through as
/// the model wrote it).
fn first_user_text(body: &Value) -> String {
    let text_of = |content: &Value| -> String {
        match content {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    };
    if let Some(contents) = body["contents"].as_array() {
        return contents
            .iter()
            .filter(|c| c["role"] == "user")
            .map(|c| text_of(&c["parts"]))
            .collect::<Vec<_>>()
            .join("\n");
    }
    if let Some(messages) = body["messages"].as_array() {
        return messages
            .iter()
            .find(|m| m["role"] == "user")
            .map(|m| text_of(&m["content"]))
            .unwrap_or_default();
    }
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "message" && i["role"] == "user" || i["type"] == "agent_message")
        .map(|i| {
            let mut text = text_of(&i["content"]);
            for p in i["content"].as_array().into_iter().flatten() {
                if let Some(e) = p["encrypted_content"].as_str() {
                    text.push('\n');
                    text.push_str(e);
                }
            }
            text
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text of the messages from other agents a Codex request carries (multi-agent v2's
/// `agent_message`: a task for a subagent, a subagent's answer).
fn agent_messages_text(body: &Value) -> String {
    let mut text = String::new();
    for i in body["input"].as_array().into_iter().flatten() {
        if i["type"] != "agent_message" {
            continue;
        }
        for p in i["content"].as_array().into_iter().flatten() {
            for k in ["text", "encrypted_content"] {
                if let Some(t) = p[k].as_str() {
                    text.push_str(t);
                    text.push('\n');
                }
            }
        }
    }
    text
}

/// Which (conversation, turn) this request is at, or `None` for a side request.
fn position(script: &Script, body: &Value) -> Option<(usize, usize)> {
    let tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let ours: Vec<(usize, usize)> = call_ids(body)
        .iter()
        .filter_map(|id| parse_id(id))
        .collect();
    // A Codex subagent spawned with its parent's history (`fork_turns: all`, the
    // default) carries the parent's call ids too: its task, an `agent_message` holding
    // its marker, says whose it is.
    let tasks = agent_messages_text(body);
    if let Some(i) = script
        .subagents
        .iter()
        .position(|(marker, _)| tasks.contains(marker.as_str()))
    {
        let conv = i + 1;
        let turn = ours
            .iter()
            .filter(|(c, _)| *c == conv)
            .map(|(_, t)| t + 1)
            .max()
            .unwrap_or(0);
        return Some((conv, turn));
    }
    if let Some(conv) = ours.iter().map(|(c, _)| *c).max() {
        // A subagent's conversation never carries the main one's ids, and the main one
        // only carries a subagent's result as text: the highest conversation is ours.
        let turn = ours
            .iter()
            .filter(|(c, _)| *c == conv)
            .map(|(_, t)| *t)
            .max()
            .unwrap_or(0);
        return Some((conv, turn + 1));
    }
    if !tools {
        return None;
    }
    let first = first_user_text(body);
    let conv = script
        .subagents
        .iter()
        .position(|(marker, _)| first.contains(marker.as_str()))
        .map_or(0, |i| i + 1);
    Some((conv, 0))
}

fn answer(script: &Script, req: &Req) -> (Vec<u8>, Option<(usize, usize)>) {
    if req.method != "POST" {
        return (crate::http::json(404, &json!({"error": "not here"})), None);
    }
    let body = req.json();
    let which = position(script, &body);
    let turn = match which {
        Some((conv, t)) => script
            .turns(conv)
            .get(t)
            .cloned()
            .unwrap_or_else(|| Turn::text("done")),
        None => Turn::text("ok"),
    };
    let (conv, t) = which.unwrap_or((0, 0));
    let ids: Vec<String> = (0..turn.calls.len())
        .map(|n| format!("{conv}_{t}_{n}"))
        .collect();
    let bytes = if req.path.contains("/chat/completions") {
        chat_answer(&turn, &ids)
    } else if req.path.contains(":streamGenerateContent") {
        gemini_answer(&turn, &ids, true)
    } else if req.path.contains(":generateContent") {
        gemini_answer(&turn, &ids, false)
    } else if req.path.contains("/messages") {
        anthropic_answer(&body, &turn, &ids)
    } else if req.path.contains("/responses") {
        responses_answer(&body, &turn, &ids)
    } else {
        crate::http::json(404, &json!({"error": "not here"}))
    };
    (bytes, which)
}

/// A Chat Completions stream (OpenCode's OpenAI-compatible provider): the text, then
/// each call whole in one delta, then the finish reason with usage, then `[DONE]`.
fn chat_answer(turn: &Turn, ids: &[String]) -> Vec<u8> {
    let chunk = |delta: Value, finish: Value, usage: Value| {
        json!({"id": "chatcmpl_fake", "object": "chat.completion.chunk", "created": 1,
            "model": "fake", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": usage})
    };
    let mut chunks = Vec::new();
    if !turn.text.is_empty() {
        chunks.push(chunk(
            json!({"role": "assistant", "content": turn.text}),
            Value::Null,
            Value::Null,
        ));
    }
    let calls: Vec<Value> = turn
        .calls
        .iter()
        .zip(ids)
        .enumerate()
        .map(|(i, (c, id))| {
            json!({"index": i, "id": format!("call_{id}"), "type": "function",
                "function": {"name": c.name, "arguments": c.input.to_string()}})
        })
        .collect();
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    if !calls.is_empty() {
        chunks.push(chunk(
            json!({"role": "assistant", "tool_calls": calls}),
            Value::Null,
            Value::Null,
        ));
    }
    chunks.push(chunk(
        json!({}),
        json!(finish),
        json!({"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}),
    ));
    let mut out = String::new();
    for c in chunks {
        out.push_str(&format!("data: {c}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    sse(&out)
}

/// A Responses API stream: each output item whole (`response.output_item.done`), then
/// `response.completed` with usage.
fn responses_answer(body: &Value, turn: &Turn, ids: &[String]) -> Vec<u8> {
    let custom: Vec<&str> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "custom")
        .filter_map(|t| t["name"].as_str())
        .collect();
    let mut items = Vec::new();
    if !turn.text.is_empty() {
        items.push(
            json!({"type": "message", "role": "assistant", "id": "msg_fake",
            "content": [{"type": "output_text", "text": turn.text, "annotations": []}]}),
        );
    }
    for (c, id) in turn.calls.iter().zip(ids) {
        let call_id = format!("call_{id}");
        let item = if c.name == "tool_search" {
            json!({"type": "tool_search_call", "call_id": call_id, "execution": "client", "arguments": c.input})
        } else if custom.contains(&c.name.as_str()) {
            json!({"type": "custom_tool_call", "id": format!("ctc_{id}"), "call_id": call_id, "name": c.name,
                "input": c.input.as_str().unwrap_or_default()})
        } else {
            let mut item = json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": call_id,
                "name": c.name, "arguments": c.input.to_string()});
            if let Some(ns) = &c.namespace {
                item["namespace"] = json!(ns);
            }
            item
        };
        items.push(item);
    }
    let mut events = vec![json!({"type": "response.created", "response": {"id": "resp_fake"}})];
    for (i, item) in items.into_iter().enumerate() {
        events.push(json!({"type": "response.output_item.done", "output_index": i, "item": item}));
    }
    events.push(json!({"type": "response.completed", "response": {"id": "resp_fake", "usage": {
        "input_tokens": 120, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 150}}}));
    let mut out = String::new();
    for e in events {
        out.push_str(&format!(
            "event: {}\ndata: {e}\n\n",
            e["type"].as_str().unwrap_or("")
        ));
    }
    sse(&out)
}

/// A Gemini API answer: one candidate with the turn's text and a `functionCall` per
/// call (its id `call_<conv>_<turn>_<n>`), as one SSE event when streamed.
fn gemini_answer(turn: &Turn, ids: &[String], stream: bool) -> Vec<u8> {
    let mut parts = Vec::new();
    if !turn.text.is_empty() {
        parts.push(json!({"text": turn.text}));
    }
    for (c, id) in turn.calls.iter().zip(ids) {
        parts.push(
            json!({"functionCall": {"id": format!("call_{id}"), "name": c.name, "args": c.input}}),
        );
    }
    let answer = json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 30, "totalTokenCount": 150},
        "modelVersion": GEMINI_MODEL,
    });
    if stream {
        sse(&format!("data: {answer}\r\n\r\n"))
    } else {
        crate::http::json(200, &answer)
    }
}

/// A Messages API stream: message_start, a text block, one tool_use block per call
/// (its input in one `input_json_delta`), message_delta with the stop reason.
fn anthropic_answer(body: &Value, turn: &Turn, ids: &[String]) -> Vec<u8> {
    let model = body["model"].as_str().unwrap_or("claude-sonnet-4-5");
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message",
        "role": "assistant", "content": [], "model": model, "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 120, "output_tokens": 1}}}),
    ];
    let mut index = 0;
    if !turn.text.is_empty() {
        events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}));
        events.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": turn.text}}));
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    for (c, id) in turn.calls.iter().zip(ids) {
        events.push(
            json!({"type": "content_block_start", "index": index, "content_block":
            {"type": "tool_use", "id": format!("toolu_{id}"), "name": c.name, "input": {}}}),
        );
        events.push(
            json!({"type": "content_block_delta", "index": index, "delta":
            {"type": "input_json_delta", "partial_json": c.input.to_string()}}),
        );
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    let stop = if turn.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": 30}}),
    );
    events.push(json!({"type": "message_stop"}));
    let mut out = String::new();
    for e in events {
        out.push_str(&format!(
            "event: {}\ndata: {e}\n\n",
            e["type"].as_str().unwrap_or("")
        ));
    }
    sse(&out)
}

/// The folder of the installed agents (`tests/agents`), installing them first if
/// needed (see [`crate::installed`]). `None` when `CAIRN_SKIP_PEERS=1`.
pub fn agents_dir() -> Option<PathBuf> {
    crate::installed(
        "agents",
        &[
            "node_modules/.bin/codex",
            "node_modules/@anthropic-ai/claude-code/bin/claude.exe",
            "node_modules/@google/gemini-cli/bundle/gemini.js",
        ],
    )
}

/// Codex's native binary (not the node wrapper, so that a signal reaches the agent).
fn codex_bin(dir: &Path) -> PathBuf {
    let vendor =
        dir.join("node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex");
    if vendor.exists() {
        vendor
    } else {
        dir.join("node_modules/.bin/codex")
    }
}

/// An MCP server as the agents start it.
#[derive(Debug, Clone)]
pub struct McpServer {
    pub name: String,
    pub command: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// A finished run.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// A running agent in a process group of its own.
pub struct Running {
    pub child: Child,
    what: String,
}

impl Running {
    /// Sends `signal` to the agent's whole process group (the agent, its commands, its
    /// MCP servers).
    pub fn signal_group(&self, signal: libc::c_int) {
        let pgid = libc::pid_t::try_from(self.child.id()).unwrap_or(0);
        assert!(pgid > 0);
        // SAFETY: killpg only sends a signal, to the group this harness made for a child
        // it started and has not reaped.
        unsafe { libc::killpg(pgid, signal) };
    }

    /// Waits for the agent to exit, at most [`RUN_MS_MAX`]; on a timeout the group is
    /// killed and the test fails with the agent's stderr.
    pub fn wait(mut self) -> Output {
        let deadline = Instant::now() + Duration::from_millis(RUN_MS_MAX);
        let mut stdout = self.child.stdout.take();
        let mut stderr = self.child.stderr.take();
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(o) = stdout.as_mut() {
                let _ = o.read_to_string(&mut s);
            }
            s
        });
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(e) = stderr.as_mut() {
                let _ = e.read_to_string(&mut s);
            }
            s
        });
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(None) => {
                    self.signal_group(libc::SIGKILL);
                    let _ = self.child.wait();
                    let stderr = err.join().unwrap_or_default();
                    panic!(
                        "{} did not finish in {RUN_MS_MAX} ms; stderr:\n{stderr}",
                        self.what
                    );
                }
                Err(e) => panic!("wait for {}: {e}", self.what),
            }
        };
        Output {
            status,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        }
    }

    /// Kills the whole group with SIGKILL and reaps the agent.
    pub fn kill(mut self) -> ExitStatus {
        self.signal_group(libc::SIGKILL);
        self.child
            .wait()
            .unwrap_or_else(|e| panic!("wait for {}: {e}", self.what))
    }
}

/// Waits until `path` exists (a command's marker that it started), at most
/// [`RUN_MS_MAX`]; fails naming `what` on a timeout.
pub fn wait_for_file(path: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_millis(RUN_MS_MAX);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{what}: {} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The environment every agent gets: the variables it needs and nothing of the user's.
fn base_command(program: &Path, home: &Path, workspace: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .env("TERM", "dumb")
        .env("NO_COLOR", "1")
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    cmd
}

fn spawn(mut cmd: Command, what: &str) -> Running {
    let child = cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
    Running {
        child,
        what: what.into(),
    }
}

/// Codex CLI with a private `CODEX_HOME` under `home`: the model `gpt-5.5` (a slug
/// Codex knows, so it offers `apply_patch`) from a provider `fake` speaking the
/// Responses API at the fake model, approval `never`, no sandbox (the tests' own
/// temporary workspace is the boundary).
pub struct Codex {
    pub bin: PathBuf,
    /// `HOME` of the run; `CODEX_HOME` is `home/.codex`.
    pub home: PathBuf,
    pub workspace: PathBuf,
    /// More environment for the run (and so for its hooks and MCP servers).
    pub env: Vec<(String, String)>,
    /// More arguments of `codex exec`, before the prompt.
    pub exec_args: Vec<String>,
}

/// Codex's model slug in these tests.
pub const CODEX_MODEL: &str = "gpt-5.5";

impl Codex {
    /// Writes `config.toml` (with `mcp` as MCP servers, their tools approved) and the
    /// run's folders.
    pub fn new(
        dir: &Path,
        model: &FakeModel,
        home: &Path,
        workspace: &Path,
        mcp: &[McpServer],
    ) -> Codex {
        let codex_home = home.join(".codex");
        std::fs::create_dir_all(&codex_home)
            .unwrap_or_else(|e| panic!("make {}: {e}", codex_home.display()));
        let mut config = format!(
            "model = \"{CODEX_MODEL}\"\nmodel_provider = \"fake\"\napproval_policy = \"never\"\n\
             sandbox_mode = \"danger-full-access\"\ncheck_for_update_on_startup = false\n\n\
             [model_providers.fake]\nname = \"fake\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n\
             env_key = \"FAKE_MODEL_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
            model.url()
        );
        for s in mcp {
            config.push_str(&format!(
                "\n[mcp_servers.{}]\ncommand = {}\nargs = {}\ndefault_tools_approval_mode = \"approve\"\n",
                s.name,
                toml_str(&s.command.to_string_lossy()),
                toml_array(&s.args)
            ));
            if !s.env.is_empty() {
                config.push_str(&format!("\n[mcp_servers.{}.env]\n", s.name));
                for (k, v) in &s.env {
                    config.push_str(&format!("{k} = {}\n", toml_str(v)));
                }
            }
        }
        let path = codex_home.join("config.toml");
        std::fs::write(&path, config).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        Codex {
            bin: codex_bin(dir),
            home: home.to_path_buf(),
            workspace: workspace.to_path_buf(),
            env: Vec::new(),
            exec_args: Vec::new(),
        }
    }

    pub fn codex_home(&self) -> PathBuf {
        self.home.join(".codex")
    }

    /// Turns on Codex's feature flags `features` (`[features]` in `config.toml`), such
    /// as `multi_agent_v2`, which offers the `collaboration` tools that spawn subagents.
    pub fn with_features(self, features: &[&str]) -> Codex {
        let path = self.codex_home().join("config.toml");
        let mut config = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        config.push_str("\n[features]\n");
        for f in features {
            config.push_str(&format!("{f} = true\n"));
        }
        std::fs::write(&path, config).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        self
    }

    /// Where Codex writes its rollouts.
    pub fn sessions_dir(&self) -> PathBuf {
        self.codex_home().join("sessions")
    }

    /// `codex exec PROMPT`, started.
    pub fn spawn(&self, prompt: &str) -> Running {
        let mut cmd = base_command(&self.bin, &self.home, &self.workspace);
        cmd.env("CODEX_HOME", self.codex_home())
            .env("FAKE_MODEL_KEY", "fake-key")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(["exec", "--skip-git-repo-check"])
            .args(&self.exec_args)
            .arg(prompt);
        spawn(cmd, "codex exec")
    }

    /// `codex exec PROMPT` to its end; fails on a non-zero exit, with stderr.
    pub fn run(&self, prompt: &str, model: &FakeModel) -> Output {
        let out = self.spawn(prompt).wait();
        assert!(
            out.status.success(),
            "codex exec failed ({}):\nstdout:\n{}\nstderr:\n{}\nmodel:\n{}",
            out.status,
            out.stdout,
            out.stderr,
            model.describe()
        );
        out
    }
}

/// Claude Code with a private `HOME` (onboarding done, the workspace trusted, the
/// skip-permissions mode accepted), `ANTHROPIC_BASE_URL` at the fake model, run as
/// `claude -p PROMPT --dangerously-skip-permissions` (`IS_SANDBOX=1`, which root
/// needs for it), every non-essential request off.
pub struct Claude {
    pub bin: PathBuf,
    pub home: PathBuf,
    pub workspace: PathBuf,
    pub url: String,
    /// More environment for the run (and so for its hooks and MCP servers), such as
    /// `CAIRN_HOME`.
    pub env: Vec<(String, String)>,
}

impl Claude {
    /// Writes `~/.claude.json` with `mcp` as user-scope MCP servers.
    pub fn new(
        dir: &Path,
        model: &FakeModel,
        home: &Path,
        workspace: &Path,
        mcp: &[McpServer],
    ) -> Claude {
        std::fs::create_dir_all(home).unwrap_or_else(|e| panic!("make {}: {e}", home.display()));
        let mut servers = serde_json::Map::new();
        for s in mcp {
            let env: serde_json::Map<String, Value> =
                s.env.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            servers.insert(
                s.name.clone(),
                json!({"type": "stdio", "command": s.command, "args": s.args, "env": env}),
            );
        }
        let ws = workspace.to_string_lossy().into_owned();
        let config = json!({
            "hasCompletedOnboarding": true,
            "numStartups": 1,
            "bypassPermissionsModeAccepted": true,
            "autoUpdates": false,
            "mcpServers": servers,
            "projects": {ws: {"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true,
                "allowedTools": [], "mcpServers": {}}},
        });
        let path = home.join(".claude.json");
        std::fs::write(&path, config.to_string())
            .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        Claude {
            bin: dir.join("node_modules/@anthropic-ai/claude-code/bin/claude.exe"),
            home: home.to_path_buf(),
            workspace: workspace.to_path_buf(),
            url: model.url().to_string(),
            env: Vec::new(),
        }
    }

    /// Where Claude Code writes its transcripts.
    pub fn projects_dir(&self) -> PathBuf {
        self.home.join(".claude/projects")
    }

    /// `claude ARGS…` with the run's environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = base_command(&self.bin, &self.home, &self.workspace);
        cmd.env("ANTHROPIC_BASE_URL", &self.url)
            .env("ANTHROPIC_API_KEY", "sk-ant-fake-key")
            .env("IS_SANDBOX", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("DISABLE_BUG_COMMAND", "1")
            .env("CLAUDE_CODE_DISABLE_TERMINAL_TITLE", "1")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(args);
        cmd
    }

    /// `claude -p PROMPT --dangerously-skip-permissions`, started.
    pub fn spawn(&self, prompt: &str) -> Running {
        let cmd = self.command(&["-p", prompt, "--dangerously-skip-permissions"]);
        spawn(cmd, "claude -p")
    }

    /// `claude -p PROMPT` to its end; fails on a non-zero exit, with stderr.
    pub fn run(&self, prompt: &str, model: &FakeModel) -> Output {
        let out = self.spawn(prompt).wait();
        assert!(
            out.status.success(),
            "claude -p failed ({}):\nstdout:\n{}\nstderr:\n{}\nmodel:\n{}",
            out.status,
            out.stdout,
            out.stderr,
            model.describe()
        );
        out
    }
}

fn toml_str(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn toml_array(items: &[String]) -> String {
    let parts: Vec<String> = items.iter().map(|s| toml_str(s)).collect();
    format!("[{}]", parts.join(", "))
}

/// Every file under `dir` whose name ends with `suffix`, sorted.
pub fn files_under(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                found.push(p);
            }
        }
    }
    found.sort();
    found
}

/// Gemini CLI's model in these tests: named on the command line, so that no routing
/// request (a side request whose answer must be JSON) is made.
pub const GEMINI_MODEL: &str = "gemini-2.5-pro";

/// `gemini -m gemini-2.5-pro -p PROMPT --approval-mode yolo`, its home `HOME/.gemini`
/// (`settings.json`: the API key as the way in, no telemetry, no update check), the
/// Gemini API at the fake model (`GOOGLE_GEMINI_BASE_URL`), the workspace trusted
/// (`GEMINI_CLI_TRUST_WORKSPACE`: project settings and hooks are read only in a trusted
/// folder).
pub struct Gemini {
    pub bin: PathBuf,
    pub home: PathBuf,
    pub workspace: PathBuf,
    pub url: String,
    /// More environment for the run (and so for its hooks).
    pub env: Vec<(String, String)>,
}

impl Gemini {
    pub fn new(dir: &Path, model: &FakeModel, home: &Path, workspace: &Path) -> Gemini {
        let settings_dir = home.join(".gemini");
        std::fs::create_dir_all(&settings_dir)
            .unwrap_or_else(|e| panic!("make {}: {e}", settings_dir.display()));
        let settings = json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        });
        let path = settings_dir.join("settings.json");
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&settings).unwrap_or_default(),
        )
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        Gemini {
            bin: dir.join("node_modules/@google/gemini-cli/bundle/gemini.js"),
            home: home.to_path_buf(),
            workspace: workspace.to_path_buf(),
            url: model.url().to_string(),
            env: Vec::new(),
        }
    }

    /// Where Gemini CLI keeps its projects' chats (`<project>/chats`).
    pub fn tmp_dir(&self) -> PathBuf {
        self.home.join(".gemini/tmp")
    }

    /// `gemini -p PROMPT`, started.
    pub fn spawn(&self, prompt: &str) -> Running {
        let mut cmd = base_command(Path::new("node"), &self.home, &self.workspace);
        cmd.env("GEMINI_API_KEY", "fake-gemini-key")
            .env("GOOGLE_GEMINI_BASE_URL", &self.url)
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .arg(&self.bin)
            .args(["-m", GEMINI_MODEL, "-p", prompt, "--approval-mode", "yolo"]);
        spawn(cmd, "gemini -p")
    }

    /// `gemini -p PROMPT` to its end; fails on a non-zero exit, with stderr.
    pub fn run(&self, prompt: &str, model: &FakeModel) -> Output {
        let out = self.spawn(prompt).wait();
        assert!(
            out.status.success(),
            "gemini -p failed ({}):\nstdout:\n{}\nstderr:\n{}\nmodel:\n{}",
            out.status,
            out.stdout,
            out.stderr,
            model.describe()
        );
        out
    }
}

/// The folder of the installed OpenCode (`tests/agents/opencode`: its Linux x64 native
/// package pinned alone, see its `setup.sh`), installing it first if needed. `None`
/// when `CAIRN_SKIP_PEERS=1`.
pub fn opencode_dir() -> Option<PathBuf> {
    crate::installed(
        "agents/opencode",
        &["node_modules/opencode-linux-x64/bin/opencode"],
    )
}

/// OpenCode's model in these tests, `<provider>/<model>`.
pub const OPENCODE_MODEL: &str = "fake/fake-model";

/// `opencode run PROMPT`, its native binary run directly, with a private `HOME` and XDG
/// folders under it (its sessions in `HOME/.local/share/opencode/opencode.db`), the
/// workspace's `opencode.json` naming one provider `fake` (`@ai-sdk/openai-compatible`,
/// which OpenCode carries built in) at the fake model, every tool allowed, no sharing,
/// no update, no models list fetched, no LSP download.
pub struct OpenCode {
    pub bin: PathBuf,
    pub home: PathBuf,
    pub workspace: PathBuf,
    /// More environment for the run (and so for its plugins).
    pub env: Vec<(String, String)>,
    /// More arguments of `opencode run`, before the prompt (`--continue`).
    pub run_args: Vec<String>,
}

impl OpenCode {
    pub fn new(dir: &Path, model: &FakeModel, home: &Path, workspace: &Path) -> OpenCode {
        std::fs::create_dir_all(home).unwrap_or_else(|e| panic!("make {}: {e}", home.display()));
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": format!("{}/v1", model.url()), "apiKey": "fake-opencode-key"},
                "models": {"fake-model": {"name": "Fake model", "tool_call": true}},
            }},
            "model": OPENCODE_MODEL,
            "small_model": OPENCODE_MODEL,
            "autoupdate": false,
            "share": "disabled",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
        });
        let path = workspace.join("opencode.json");
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&config).unwrap_or_default(),
        )
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        OpenCode {
            bin: dir.join("node_modules/opencode-linux-x64/bin/opencode"),
            home: home.to_path_buf(),
            workspace: workspace.to_path_buf(),
            env: Vec::new(),
            run_args: Vec::new(),
        }
    }

    /// Where OpenCode keeps its data (`XDG_DATA_HOME/opencode`): `opencode.db`.
    pub fn data_dir(&self) -> PathBuf {
        self.home.join(".local/share/opencode")
    }

    /// `opencode run PROMPT`, started.
    pub fn spawn(&self, prompt: &str) -> Running {
        let mut cmd = base_command(&self.bin, &self.home, &self.workspace);
        cmd.env("XDG_DATA_HOME", self.home.join(".local/share"))
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_CACHE_HOME", self.home.join(".cache"))
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
            .env("OPENCODE_DISABLE_SHARE", "1")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(["run", "--model", OPENCODE_MODEL])
            .args(&self.run_args)
            .arg(prompt);
        spawn(cmd, "opencode run")
    }

    /// `opencode run PROMPT` to its end; fails on a non-zero exit, with stderr.
    pub fn run(&self, prompt: &str, model: &FakeModel) -> Output {
        let out = self.spawn(prompt).wait();
        assert!(
            out.status.success(),
            "opencode run failed ({}):\nstdout:\n{}\nstderr:\n{}\nmodel:\n{}",
            out.status,
            out.stdout,
            out.stderr,
            model.describe()
        );
        out
    }
}
