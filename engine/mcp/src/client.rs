//! One MCP server process spoken to over stdio: JSON-RPC 2.0, one message per line.
//!
//! A reader thread turns the server's stdout into messages on a channel, so that every
//! request can wait with a deadline; another keeps the tail of its stderr for error
//! messages. Requests from the server (`ping`, anything else is "method not found") are
//! answered while waiting; `notifications/tools/list_changed` sets a flag the owner
//! polls. A line that is not JSON-RPC, or the end of stdout, closes the connection with
//! a clear error; the owner may start the server again.
//!
//! The server is a [`Process`] of cairn's one runner: the leader of its own process
//! group, so that stopping it stops what it started too (`npx` and the server it
//! runs, a wrapper script and its child).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::config::ServerConfig;
use super::{ListedTool, McpError, PROTOCOL_VERSIONS};
use cairn_tools::CancelHandle;
use cairn_tools::process::Process;

/// How often a call's wait looks at the cancel token.
const CANCEL_CHECK_MS: u64 = 50;

/// The largest message read from a server; a longer line closes the connection.
pub const MESSAGE_BYTES_MAX: usize = 64 << 20;
/// Pages of `tools/list` followed before giving up (a server looping on its cursor).
pub const LIST_PAGES_MAX: usize = 100;
/// Bytes of a server's stderr kept for error messages.
pub const STDERR_TAIL_BYTES_MAX: usize = 2048;
/// How long a server has to exit after its stdin is closed, then after SIGTERM to its
/// process group (then SIGKILL to the group).
pub const EXIT_WAIT_MS: u64 = 2000;

enum Incoming {
    Message(Value),
    Garbage(String),
    Eof(String),
}

/// A running, initialised server.
pub struct Client {
    name: String,
    process: Process,
    stdin: Option<ChildStdin>,
    rx: Receiver<Incoming>,
    next_id: u64,
    stderr_tail: Arc<Mutex<VecDeque<u8>>>,
    /// The version agreed in `initialize`.
    pub protocol_version: String,
    /// `serverInfo` from `initialize`.
    pub server_info: Value,
    list_changed: bool,
    dead: Option<McpError>,
}

impl Client {
    /// Starts the server in `cwd` and runs the `initialize` handshake.
    pub fn start(
        name: &str,
        config: &ServerConfig,
        cwd: &Path,
        timeout: Duration,
    ) -> Result<Client, McpError> {
        let mut process = Process::spawn(
            Command::new(&config.command)
                .args(&config.args)
                .envs(&config.env)
                .current_dir(cwd)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .map_err(|e| McpError::Start {
            server: name.to_string(),
            detail: format!("`{}`: {e}", config.command),
        })?;
        let (tx, rx) = channel();
        if let Some(out) = process.take_stdout() {
            std::thread::spawn(move || read_messages(out, &tx));
        }
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(mut err) = process.take_stderr() {
            let tail = stderr_tail.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut t) = tail.lock() {
                        t.extend(&buf[..n]);
                        let over = t.len().saturating_sub(STDERR_TAIL_BYTES_MAX);
                        t.drain(..over);
                    }
                }
            });
        }
        let mut client = Client {
            name: name.to_string(),
            stdin: process.take_stdin(),
            process,
            rx,
            next_id: 1,
            stderr_tail,
            protocol_version: String::new(),
            server_info: Value::Null,
            list_changed: false,
            dead: None,
        };
        let init = client.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSIONS[0],
                "capabilities": {},
                "clientInfo": {"name": "cairn", "version": env!("CARGO_PKG_VERSION")},
            }),
            timeout,
        );
        let init = match init {
            Ok(v) => v,
            Err(e) => {
                client.stop();
                return Err(e);
            }
        };
        let version = init["protocolVersion"].as_str().unwrap_or("").to_string();
        if !PROTOCOL_VERSIONS.contains(&version.as_str()) {
            client.stop();
            return Err(McpError::Protocol {
                server: name.to_string(),
                detail: format!(
                    "it answered protocol version '{version}', which cairn does not speak (cairn speaks {})",
                    PROTOCOL_VERSIONS.join(", ")
                ),
            });
        }
        client.protocol_version = version;
        client.server_info = init["serverInfo"].clone();
        client.notify("notifications/initialized", json!({}))?;
        Ok(client)
    }

    /// The server's name in the project configuration.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True once the connection failed; the owner should start the server again.
    pub fn is_dead(&self) -> bool {
        self.dead.is_some()
    }

    /// True (once) when the server said its tool list changed.
    pub fn take_list_changed(&mut self) -> bool {
        std::mem::take(&mut self.list_changed)
    }

    /// `tools/list`, following `nextCursor` through every page.
    pub fn list_tools(&mut self, timeout: Duration) -> Result<Vec<ListedTool>, McpError> {
        let name = self.name.clone();
        list_all_tools(&name, |params| self.request("tools/list", params, timeout))
    }

    /// `tools/call`: the raw result.
    pub fn call_tool(
        &mut self,
        tool: &str,
        arguments: &Value,
        timeout: Duration,
        cancel: &CancelHandle,
    ) -> Result<Value, McpError> {
        self.request_until(
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
            timeout,
            Some(cancel),
        )
    }

    fn stderr_tail(&self) -> String {
        let t = self
            .stderr_tail
            .lock()
            .map(|t| t.iter().copied().collect::<Vec<u8>>());
        let text = String::from_utf8_lossy(&t.unwrap_or_default())
            .trim()
            .to_string();
        if text.is_empty() {
            String::new()
        } else {
            format!("; its stderr ends with: {text}")
        }
    }

    fn fail(&mut self, e: McpError) -> McpError {
        self.dead = Some(e.clone());
        e
    }

    fn send(&mut self, message: &Value) -> Result<(), McpError> {
        if let Some(e) = &self.dead {
            return Err(e.clone());
        }
        let mut line = message.to_string();
        line.push('\n');
        let written = match self.stdin.as_mut() {
            Some(s) => s.write_all(line.as_bytes()).and_then(|()| s.flush()),
            None => Err(std::io::Error::other("stdin closed")),
        };
        if let Err(e) = written {
            // Give the process a moment to be reaped so the message says how it ended.
            std::thread::sleep(Duration::from_millis(20));
            let status = self.exit_status();
            let detail = format!("writing to it failed ({e}){status}{}", self.stderr_tail());
            return Err(self.fail(McpError::Crashed {
                server: self.name.clone(),
                detail,
            }));
        }
        Ok(())
    }

    /// How the server ended, if it did (seen without reaping it: its process group is
    /// only ever reaped by `stop`, after it was killed).
    fn exit_status(&mut self) -> String {
        match self.process.exit_status() {
            Some(s) => format!(" ({s})"),
            None => String::new(),
        }
    }

    fn notify(&mut self, method: &str, params: Value) -> Result<(), McpError> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// Sends a request and waits for its response, answering the server's own
    /// requests and noting its notifications meanwhile.
    pub fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, McpError> {
        self.request_until(method, params, timeout, None)
    }

    /// [`Client::request`], given up early (the request cancelled) when `cancel` is
    /// triggered; the server keeps running.
    fn request_until(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: Option<&CancelHandle>,
    ) -> Result<Value, McpError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + timeout;
        loop {
            if cancel.is_some_and(CancelHandle::is_cancelled) {
                let _ = self.notify(
                    "notifications/cancelled",
                    json!({"requestId": id, "reason": "cancelled by the user"}),
                );
                return Err(McpError::Cancelled {
                    server: self.name.clone(),
                    method: method.to_string(),
                });
            }
            let mut left = deadline.saturating_duration_since(Instant::now());
            if cancel.is_some() && left > Duration::from_millis(CANCEL_CHECK_MS) {
                // Wakes up now and then to look at the cancel token.
                left = Duration::from_millis(CANCEL_CHECK_MS);
            }
            match self.rx.recv_timeout(left) {
                Ok(Incoming::Message(m)) => {
                    if let Some(r) = self.handle(m, id, method)? {
                        return r;
                    }
                }
                Ok(Incoming::Garbage(line)) => {
                    self.stop();
                    return Err(self.fail(McpError::Garbage {
                        server: self.name.clone(),
                        line,
                    }));
                }
                Ok(Incoming::Eof(why)) => return Err(self.crashed(&why)),
                Err(RecvTimeoutError::Disconnected) => return Err(self.crashed("")),
                Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.notify(
                        "notifications/cancelled",
                        json!({"requestId": id, "reason": "timed out"}),
                    );
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

impl Client {
    fn crashed(&mut self, why: &str) -> McpError {
        // The reader saw stdout close: the process is exiting, or has.
        // On a loaded machine reaping can take a while; this is the failure path, so
        // waiting a little for a message that says how it ended is worth it.
        let deadline = Instant::now() + Duration::from_millis(2000);
        let mut status = self.exit_status();
        while status.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            status = self.exit_status();
        }
        // Its stderr is read on another thread: let it catch up with the last lines.
        let deadline = Instant::now() + Duration::from_millis(500);
        while self.stderr_tail().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let why = if why.is_empty() {
            String::new()
        } else {
            format!(" ({why})")
        };
        let detail = format!("it closed its output{why}{status}{}", self.stderr_tail());
        self.stop();
        self.fail(McpError::Crashed {
            server: self.name.clone(),
            detail,
        })
    }

    /// Handles one message while waiting for response `id`: `Some` is that response.
    fn handle(
        &mut self,
        m: Value,
        id: u64,
        method: &str,
    ) -> Result<Option<Result<Value, McpError>>, McpError> {
        let has_method = m.get("method").and_then(Value::as_str).map(str::to_string);
        match (has_method, m.get("id")) {
            (Some(req), Some(req_id)) => {
                // A request from the server.
                let reply = if req == "ping" {
                    json!({"jsonrpc": "2.0", "id": req_id, "result": {}})
                } else {
                    json!({"jsonrpc": "2.0", "id": req_id, "error": {"code": -32601, "message": format!("cairn does not offer {req}")}})
                };
                self.send(&reply)?;
                Ok(None)
            }
            (Some(note), None) => {
                if note == "notifications/tools/list_changed" {
                    self.list_changed = true;
                }
                Ok(None)
            }
            (None, Some(got)) if got.as_u64() == Some(id) => {
                Ok(Some(response_result(&self.name, method, &m)))
            }
            // A late answer to a request that timed out, or a stray response.
            _ => Ok(None),
        }
    }

    /// Stops the server and everything in its process group: close its stdin, wait up
    /// to [`EXIT_WAIT_MS`] for it to exit, then SIGTERM to the group, up to
    /// [`EXIT_WAIT_MS`] again, SIGKILL to the group; reaped. A server that exits on its
    /// own still takes its group with it (SIGKILL to what it left running).
    pub fn stop(&mut self) {
        drop(self.stdin.take());
        let exited = self
            .process
            .wait_exit(Instant::now() + Duration::from_millis(EXIT_WAIT_MS));
        // Its status, if any, was reported where it mattered (`crashed`); a server
        // that cannot be reaped is no longer ours to wait for.
        self.process
            .stop_code(if exited { 0 } else { EXIT_WAIT_MS });
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads newline-delimited messages until the end of the stream or a line that is not
/// a JSON-RPC object.
/// Every tool a server lists: `tools/list` asked through `request` (given the
/// params, it returns the result) page after page, following `nextCursor`, at most
/// [`LIST_PAGES_MAX`] pages. cairn's client and `cairn mcp proxy` both list so.
pub fn list_all_tools(
    server: &str,
    mut request: impl FnMut(Value) -> Result<Value, McpError>,
) -> Result<Vec<ListedTool>, McpError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..LIST_PAGES_MAX {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = request(params)?;
        for t in page["tools"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
            let Some(name) = t["name"].as_str() else {
                continue;
            };
            tools.push(ListedTool {
                name: name.to_string(),
                description: t["description"].as_str().unwrap_or("").to_string(),
                input_schema: t
                    .get("inputSchema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
                read_only: t["annotations"]["readOnlyHint"].as_bool() == Some(true),
            });
        }
        match page["nextCursor"].as_str() {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => return Ok(tools),
        }
    }
    Err(McpError::Protocol {
        server: server.to_string(),
        detail: format!("tools/list went on for more than {LIST_PAGES_MAX} pages"),
    })
}

/// The result of a JSON-RPC response `m` of `server` to `method`: its `result`, or its
/// `error` as [`McpError::Rpc`].
pub fn response_result(server: &str, method: &str, m: &Value) -> Result<Value, McpError> {
    if let Some(e) = m.get("error") {
        return Err(McpError::Rpc {
            server: server.to_string(),
            method: method.to_string(),
            code: e["code"].as_i64().unwrap_or(0),
            message: e["message"].as_str().unwrap_or("").to_string(),
        });
    }
    Ok(m.get("result").cloned().unwrap_or(Value::Null))
}

fn read_messages(out: impl Read, tx: &std::sync::mpsc::Sender<Incoming>) {
    let mut reader = BufReader::new(out);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = (&mut reader).take(MESSAGE_BYTES_MAX as u64 + 1);
        match limited.read_until(b'\n', &mut line) {
            Ok(0) => {
                let _ = tx.send(Incoming::Eof(String::new()));
                return;
            }
            Ok(_) if line.len() > MESSAGE_BYTES_MAX => {
                let _ = tx.send(Incoming::Garbage(format!(
                    "a message longer than {MESSAGE_BYTES_MAX} bytes"
                )));
                return;
            }
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                if text.is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(text) {
                    Ok(v) if v.is_object() && v["jsonrpc"] == "2.0" => {
                        if tx.send(Incoming::Message(v)).is_err() {
                            return;
                        }
                    }
                    _ => {
                        let shown: String = text.chars().take(200).collect();
                        let _ = tx.send(Incoming::Garbage(format!("{shown:?}")));
                        return;
                    }
                }
            }
            Err(e) => {
                let _ = tx.send(Incoming::Eof(e.to_string()));
                return;
            }
        }
    }
}
