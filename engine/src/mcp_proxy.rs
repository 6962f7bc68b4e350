//! cairn between an MCP client and a real MCP server (`cairn mcp proxy NAME --
//! COMMAND ARGS…`): every message goes through unchanged both ways (`initialize`,
//! `tools/list`, resources, prompts, pings, progress, cancellations, the server's
//! own requests and the client's answers to them) except `tools/call`, which runs
//! through [`Engine::call`] as a call of cairn's own MCP client would: tool
//! `mcp__{NAME}__{tool}`, permission key `mcp:{NAME}:{tool}` answered by the allow
//! list or the policy, the repeat rule, redaction, the output cap, and the server's raw
//! result kept as a blob, so that replay answers it from the recording
//! ([`crate::mcp::Recorded`]) exactly as it answers cairn's own MCP calls. The client
//! is answered the server's result as recorded (redacted; images and structured
//! content kept), or, for a call that never reached the server or got no answer, the
//! text a model of cairn's would see, with `isError`.
//!
//! Three threads: the client's messages are read on one (forwarded at once, a
//! `tools/call` queued for the session), the server's on another (forwarded at once,
//! an answer to cairn's own request handed to the waiting call), and the session runs
//! the calls one after the other on the caller's thread. The session is the one of
//! `mcp serve` ([`crate::mcp_serve`]): started at the first `tools/call` (a health
//! check records nothing), ended when the client closes stdin, on SIGINT, SIGTERM or
//! SIGHUP, or when the server exits; the server is then stopped with its process
//! group.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_mcp::{ListedTool, McpBackend, McpError, ServerConfig};
use cairn_store::Head;
use cairn_tools::process::Process;
use cairn_tools::{CancelHandle, EngineError, Result};
use serde_json::{Value, json};

use crate::engine::EngineConfig;
use crate::event::Status;
use crate::mcp_serve::{MESSAGE_BYTES_MAX, Pending, REASON_STDIN_CLOSED, Session};
use crate::permission::Policy;
use crate::project::Home;

/// The `session_ended` reason when the proxied server exited.
pub const REASON_SERVER_EXITED: &str = "mcp server exited";

/// How long the server has to exit once its stdin is closed, then after SIGTERM.
pub const SERVER_EXIT_WAIT_MS: u64 = 2000;

/// How often waits look at the cancel token and the signal flag.
const TICK_MS: u64 = 50;

/// The prefix of the ids of cairn's own requests to the server: their answers are
/// cairn's, never forwarded.
const OWN_ID_PREFIX: &str = "cairn-proxy-";

type Out = Arc<Mutex<Box<dyn Write + Send>>>;

/// Writes one message to `out`, a line; false when it could not be written.
fn send(out: &Out, message: &[u8]) -> bool {
    let Ok(mut w) = out.lock() else {
        return false;
    };
    w.write_all(message)
        .and_then(|()| w.write_all(b"\n"))
        .and_then(|()| w.flush())
        .is_ok()
}

/// The link to the server that the session's MCP backend uses.
#[derive(Clone)]
struct Link {
    name: String,
    stdin: Out,
    next: Arc<AtomicU64>,
    waiting: Arc<Mutex<HashMap<String, Sender<Value>>>>,
    dead: Arc<AtomicBool>,
    changed: Arc<AtomicBool>,
    /// The `_meta` of the client's `tools/call` being run (its progress token).
    meta: Arc<Mutex<Option<Value>>>,
}

impl Link {
    fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: Option<&CancelHandle>,
    ) -> std::result::Result<Value, McpError> {
        let crashed = || McpError::Crashed {
            server: self.name.clone(),
            detail: "it closed its output".into(),
        };
        if self.dead.load(Ordering::SeqCst) {
            return Err(crashed());
        }
        let id = format!(
            "{OWN_ID_PREFIX}{}",
            self.next.fetch_add(1, Ordering::SeqCst)
        );
        let (tx, rx) = channel();
        if let Ok(mut w) = self.waiting.lock() {
            w.insert(id.clone(), tx);
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if !send(&self.stdin, message.to_string().as_bytes()) {
            return Err(crashed());
        }
        let deadline = Instant::now() + timeout;
        let forget = |why: &str| {
            if let Ok(mut w) = self.waiting.lock() {
                w.remove(&id);
            }
            let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": why}});
            send(&self.stdin, note.to_string().as_bytes());
        };
        loop {
            if cancel.is_some_and(CancelHandle::is_cancelled) {
                forget("cancelled by the user");
                return Err(McpError::Cancelled {
                    server: self.name.clone(),
                    method: method.to_string(),
                });
            }
            let left = deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(TICK_MS));
            match rx.recv_timeout(left) {
                Ok(m) => return cairn_mcp::client::response_result(&self.name, method, &m),
                Err(RecvTimeoutError::Disconnected) => return Err(crashed()),
                Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(RecvTimeoutError::Timeout) => {
                    forget("timed out");
                    return Err(McpError::Timeout {
                        server: self.name.clone(),
                        method: method.to_string(),
                        ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                    });
                }
            }
        }
    }
}

impl McpBackend for Link {
    fn servers(&self) -> Vec<String> {
        vec![self.name.clone()]
    }

    fn list_tools(
        &mut self,
        server: &str,
        timeout: Duration,
    ) -> std::result::Result<Vec<ListedTool>, McpError> {
        if server != self.name {
            return Err(McpError::Unknown {
                server: server.to_string(),
            });
        }
        cairn_mcp::client::list_all_tools(&self.name, |params| {
            self.request("tools/list", params, timeout, None)
        })
    }

    fn call_tool(
        &mut self,
        server: &str,
        tool: &str,
        arguments: &Value,
        timeout: Duration,
        cancel: &CancelHandle,
    ) -> std::result::Result<Value, McpError> {
        if server != self.name {
            return Err(McpError::Unknown {
                server: server.to_string(),
            });
        }
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some(meta) = self.meta.lock().ok().and_then(|m| m.clone()) {
            params["_meta"] = meta;
        }
        self.request("tools/call", params, timeout, Some(cancel))
    }

    fn take_changed(&mut self) -> Vec<String> {
        if self.changed.swap(false, Ordering::SeqCst) {
            vec![self.name.clone()]
        } else {
            Vec::new()
        }
    }

    /// The proxy stops the server itself, when the session ends.
    fn shutdown(&mut self) {}
}

/// What the client's reader hands the session.
enum FromClient {
    /// A `tools/call` request.
    Call(Value),
    /// No more: the reason the session ends with.
    End(&'static str),
}

/// Proxies `input`/`output` (the client) to the server `name` started with
/// `server`, recording each `tools/call` in a session of `workspace` started at the
/// first one; returns the head of the ended session, or `None` when no tool was
/// called. Fails only when the server cannot be started (or the session not
/// recorded).
#[allow(clippy::too_many_arguments)]
pub fn proxy_session(
    home: &Home,
    workspace: &Path,
    config: EngineConfig,
    policy: Policy,
    name: &str,
    server: &ServerConfig,
    input: impl Read + Send + 'static,
    output: impl Write + Send + 'static,
) -> Result<Option<Head>> {
    let (mut process, server_in, server_out) = spawn_server(workspace, server)?;
    let client_out: Out = Arc::new(Mutex::new(Box::new(output)));
    let link = Link {
        name: name.to_string(),
        stdin: Arc::new(Mutex::new(Box::new(server_in))),
        next: Arc::new(AtomicU64::new(1)),
        waiting: Default::default(),
        dead: Default::default(),
        changed: Default::default(),
        meta: Default::default(),
    };
    let (tx, rx) = channel::<FromClient>();
    // The client's identity, from its `initialize`, for `session_started.agent`.
    let agent: Arc<Mutex<Option<crate::event::Agent>>> = Default::default();
    // The id of the client's call being run, and the calls it cancelled before their turn.
    let running: Arc<Mutex<Option<Value>>> = Default::default();
    let cancelled: Arc<Mutex<BTreeSet<String>>> = Default::default();
    let cancel_slot: Arc<Mutex<Option<CancelHandle>>> = Default::default();
    let server_thread = {
        let link = link.clone();
        let client_out = client_out.clone();
        let tx = tx.clone();
        std::thread::spawn(move || server_reader(server_out, &link, &client_out, &tx))
    };
    {
        let link = link.clone();
        let client_out = client_out.clone();
        let agent = agent.clone();
        let running = running.clone();
        let cancelled = cancelled.clone();
        let cancel_slot = cancel_slot.clone();
        std::thread::spawn(move || {
            client_reader(
                input,
                &link,
                &client_out,
                &tx,
                &agent,
                &running,
                &cancelled,
                &cancel_slot,
            );
        });
    }
    let mut session = Session::Pending(Box::new(Pending::new(home, workspace, config, policy)));
    let reason: String = loop {
        if let Some(s) = session.stopped() {
            break s.reason();
        }
        let message = match rx.recv_timeout(Duration::from_millis(TICK_MS)) {
            Ok(FromClient::Call(m)) => m,
            Ok(FromClient::End(reason)) => {
                break match session.stopped() {
                    Some(s) => s.reason(),
                    None => reason.to_string(),
                };
            }
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break REASON_STDIN_CLOSED.to_string(),
        };
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        if cancelled
            .lock()
            .map(|mut c| c.remove(&id.to_string()))
            .unwrap_or(false)
        {
            continue;
        }
        if let Session::Pending(p) = &mut session {
            p.agent = agent.lock().ok().and_then(|a| a.clone());
        }
        let fresh = matches!(session, Session::Pending(_));
        let engine = match session.engine() {
            Ok(e) => e,
            Err(e) => {
                stop(&mut process, &link);
                return Err(e);
            }
        };
        if fresh {
            connect(engine, &link, &cancel_slot);
        }
        let (reply, was_cancelled) = run_call(engine, &link, &running, name, &id, &message);
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                stop(&mut process, &link);
                return Err(e);
            }
        };
        // A call the client cancelled is not answered (the protocol says so).
        if !was_cancelled && !send(&client_out, reply.to_string().as_bytes()) {
            break crate::mcp_serve::REASON_STDOUT_CLOSED.to_string();
        }
    };
    stop(&mut process, &link);
    // What the server wrote before it exited reaches the client (answers to requests
    // the client sent just before closing its end).
    let _ = server_thread.join();
    session.end(&reason)
}

/// Starts the server, its stdin and stdout piped to the proxy.
fn spawn_server(
    workspace: &Path,
    server: &ServerConfig,
) -> Result<(Process, ChildStdin, std::process::ChildStdout)> {
    let mut process = Process::spawn(
        Command::new(&server.command)
            .args(&server.args)
            .envs(&server.env)
            .current_dir(workspace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit()),
    )
    .map_err(|e| EngineError::Io {
        path: std::path::PathBuf::from(&server.command),
        source: e,
    })?;
    let (Some(server_in), Some(server_out)) = (process.take_stdin(), process.take_stdout()) else {
        unreachable!("the server's stdin and stdout were piped just above");
    };
    Ok((process, server_in, server_out))
}

/// The engine of a session just started, connected to the server: its calls go
/// through `link`, and the client's cancellations reach it.
fn connect(engine: &mut crate::Engine, link: &Link, cancel_slot: &Mutex<Option<CancelHandle>>) {
    engine.set_mcp_backend(Box::new(link.clone()));
    // A server that cannot list its tools: every call says why.
    let _failed = engine.start_mcp();
    if let Ok(mut slot) = cancel_slot.lock() {
        *slot = Some(engine.cancel_handle());
    }
}

/// Runs one client call, noted as the one running (for the client to cancel) with its
/// `_meta` passed on to the server; the reply, and whether the client cancelled it.
fn run_call(
    engine: &mut crate::Engine,
    link: &Link,
    running: &Mutex<Option<Value>>,
    name: &str,
    id: &Value,
    message: &Value,
) -> (Result<Value>, bool) {
    if let Ok(mut r) = running.lock() {
        *r = Some(id.clone());
    }
    if let Ok(mut m) = link.meta.lock() {
        *m = message["params"].get("_meta").cloned();
    }
    let reply = call(engine, name, id, &message["params"]);
    let was_cancelled = running
        .lock()
        .map(|mut r| r.take().is_none())
        .unwrap_or(false);
    (reply, was_cancelled)
}

/// Runs the client's `tools/call` through the engine; the reply to send.
fn call(engine: &mut crate::Engine, server: &str, id: &Value, params: &Value) -> Result<Value> {
    let error = |code: i64, message: String| json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    let Some(tool) = params["name"].as_str() else {
        return Ok(error(-32602, "tools/call needs params.name".into()));
    };
    let args = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(a) => a.clone(),
    };
    let find = |e: &crate::Engine| {
        e.registry()
            .mcp_tools()
            .iter()
            .find(|t| t.server == server && t.tool == tool)
            .map(|t| t.name.clone())
    };
    let name = match find(engine) {
        Some(n) => n,
        None => {
            // Listed again: the server may have added it since.
            engine.start_mcp();
            match find(engine) {
                Some(n) => n,
                None => {
                    return Ok(error(
                        -32602,
                        format!("unknown tool: {tool} (mcp server {server} does not list it)"),
                    ));
                }
            }
        }
    };
    let out = engine.call(&name, args)?;
    Ok(json!({"jsonrpc": "2.0", "id": id, "result": reply_result(&out)}))
}

/// What the client is answered: the server's result as recorded (redacted: images,
/// audio, resources and `structuredContent` as the server gave them) when the call ran
/// and the server answered; else, for a call cairn refused, a repeat it stopped, a
/// timeout or a crash, the text a model of cairn's would see, as an error.
fn reply_result(out: &crate::CallOutcome) -> Value {
    match &out.mcp_result {
        Some(result) if out.status == Status::Ok || result["isError"] == true => result.clone(),
        _ => json!({
            "content": [{"type": "text", "text": out.output}],
            "isError": out.status != Status::Ok,
        }),
    }
}

/// Reads the client: forwards every message to the server but `tools/call`
/// (queued for the session) and the cancellation of such a call (which cancels it).
#[allow(clippy::too_many_arguments)]
fn client_reader(
    input: impl Read,
    link: &Link,
    client_out: &Out,
    tx: &Sender<FromClient>,
    agent: &Mutex<Option<crate::event::Agent>>,
    running: &Mutex<Option<Value>>,
    cancelled: &Mutex<BTreeSet<String>>,
    cancel_slot: &Mutex<Option<CancelHandle>>,
) {
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut input)
            .take(MESSAGE_BYTES_MAX as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => {
                let _ = tx.send(FromClient::End(REASON_STDIN_CLOSED));
                return;
            }
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let messages = match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(batch)) => batch,
            Ok(m) => vec![m],
            Err(e) => {
                let reply = json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32700, "message": format!("parse error: {e}")}});
                send(client_out, reply.to_string().as_bytes());
                continue;
            }
        };
        for m in messages {
            let method = m.get("method").and_then(Value::as_str).unwrap_or("");
            match method {
                "tools/call" if m.get("id").is_some() => {
                    if tx.send(FromClient::Call(m)).is_err() {
                        return;
                    }
                    continue;
                }
                "notifications/cancelled" => {
                    let target = m["params"]["requestId"].clone();
                    let is_running = running
                        .lock()
                        .map(|mut r| {
                            if r.as_ref() == Some(&target) {
                                *r = None;
                                true
                            } else {
                                false
                            }
                        })
                        .unwrap_or(false);
                    if is_running {
                        if let Some(c) = cancel_slot.lock().ok().and_then(|c| c.clone()) {
                            c.cancel();
                        }
                        continue;
                    }
                    if let Ok(mut c) = cancelled.lock() {
                        c.insert(target.to_string());
                    }
                }
                "initialize" => {
                    if let Ok(mut a) = agent.lock() {
                        *a = crate::mcp_serve::client_agent(&m["params"], "proxy");
                    }
                }
                _ => {}
            }
            if !send(&link.stdin, m.to_string().as_bytes()) {
                // The server is gone: its reader ends the session.
                return;
            }
        }
    }
}

/// Reads the server: answers to cairn's own requests go to the call waiting for
/// them, everything else to the client.
fn server_reader(out: impl Read, link: &Link, client_out: &Out, tx: &Sender<FromClient>) {
    let mut reader = BufReader::new(out);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MESSAGE_BYTES_MAX as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let parsed = serde_json::from_str::<Value>(text).ok();
        if let Some(m) = &parsed {
            let own = m.get("method").is_none()
                && m.get("id")
                    .and_then(Value::as_str)
                    .is_some_and(|id| id.starts_with(OWN_ID_PREFIX));
            if own {
                let id = m["id"].as_str().unwrap_or("").to_string();
                if let Some(waiter) = link.waiting.lock().ok().and_then(|mut w| w.remove(&id)) {
                    let _ = waiter.send(m.clone());
                }
                continue;
            }
            if m.get("method").and_then(Value::as_str) == Some("notifications/tools/list_changed") {
                link.changed.store(true, Ordering::SeqCst);
            }
        }
        // Passed on as the server wrote it.
        send(client_out, text.as_bytes());
    }
    link.dead.store(true, Ordering::SeqCst);
    if let Ok(mut w) = link.waiting.lock() {
        w.clear();
    }
    let _ = tx.send(FromClient::End(REASON_SERVER_EXITED));
}

/// Stops the server and its process group: stdin closed, a wait, SIGTERM, SIGKILL.
fn stop(process: &mut Process, link: &Link) {
    if let Ok(mut w) = link.stdin.lock() {
        // Dropping the pipe's end closes the server's stdin.
        *w = Box::new(std::io::sink());
    }
    // The whole wait: a server still starting (node under load) answers what the
    // client sent before it closed its end, then exits on its own.
    let exited = process.wait_exit(Instant::now() + Duration::from_millis(SERVER_EXIT_WAIT_MS));
    process.stop_code(if exited { 0 } else { SERVER_EXIT_WAIT_MS });
}
