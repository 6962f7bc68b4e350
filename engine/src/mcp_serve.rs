//! cairn as an MCP server over stdio: `initialize`, `tools/list` (the catalogue's
//! built-ins with their input schemas), `tools/call` through [`Engine::call`] in one
//! recorded session per connection, `ping`. There is no terminal to ask, so permission
//! requests are answered by the engine's approver (a policy).
//!
//! The session starts at the first `tools/call`: a client's health check (initialize,
//! tools/list, quit, as `claude mcp list` does) records nothing. Once started, it ends
//! cleanly (`session_ended`) when the client closes stdin (`stdin closed`) or stdout
//! (`stdout closed`), or on SIGINT, SIGTERM or SIGHUP (`signal: SIGTERM`) once
//! [`crate::signal::install`] ran: Codex sends SIGTERM to the server's process group,
//! Claude Code SIGINT, neither closing stdin first.

use std::io::{BufRead, Write};
use std::path::Path;

use cairn_store::Head;
use serde_json::{Value, json};

use crate::engine::{Engine, EngineConfig};
use crate::event::Status;
use crate::permission::Policy;
use crate::project::Home;
use cairn_mcp::PROTOCOL_VERSIONS;
use cairn_tools::{EngineError, Registry, Result};

/// The largest message read from a client.
pub const MESSAGE_BYTES_MAX: usize = 64 << 20;

/// The `session_ended` reason when the client closed the server's standard input.
pub const REASON_STDIN_CLOSED: &str = "stdin closed";
/// The `session_ended` reason when an answer could not be written (the client closed
/// the server's standard output).
pub const REASON_STDOUT_CLOSED: &str = "stdout closed";

/// Serves `input`/`output` until the client disconnects or a signal stops the server.
/// The first `tools/call` starts a session in `workspace` with `config`, its permission
/// requests answered with `policy`; the head of the ended session is returned, or
/// `None` when the client called no tool (nothing was recorded).
pub fn serve_session(
    home: &Home,
    workspace: &Path,
    config: EngineConfig,
    policy: Policy,
    input: impl BufRead,
    output: impl Write,
) -> Result<Option<Head>> {
    let session = Session::Pending(Box::new(Pending::new(home, workspace, config, policy)));
    serve_in(session, input, output)
}

/// Serves `engine`, a session already started, until `input` ends or the session is
/// stopped by a signal ([`Engine::stopped`]: the running call is cancelled and
/// answered, then nothing more is read), then ends the session. For the stop to end a
/// wait for the next message, `input` reads through [`crate::signal::Interruptible`].
pub fn serve(engine: Engine, input: impl BufRead, output: impl Write) -> Result<Head> {
    match serve_in(Session::Started(Box::new(engine)), input, output)? {
        Some(head) => Ok(head),
        None => unreachable!("a started session ends with a head"),
    }
}

/// What a session needs to start at the first call.
pub(crate) struct Pending<'a> {
    /// The tools offered before the session starts (the session's registry after).
    registry: Registry,
    home: &'a Home,
    workspace: &'a Path,
    config: EngineConfig,
    policy: Policy,
    /// The client, from its `initialize` (`clientInfo`).
    pub(crate) agent: Option<crate::event::Agent>,
}

impl<'a> Pending<'a> {
    pub(crate) fn new(
        home: &'a Home,
        workspace: &'a Path,
        config: EngineConfig,
        policy: Policy,
    ) -> Pending<'a> {
        Pending {
            registry: Registry::new(config.catalog),
            home,
            workspace,
            config,
            policy,
            agent: None,
        }
    }
}

/// The client an `initialize` request names (`clientInfo`), seen `via` `mcp` (a
/// client of `mcp serve`) or `proxy`.
pub(crate) fn client_agent(params: &Value, via: &str) -> Option<crate::event::Agent> {
    let info = params.get("clientInfo")?;
    Some(crate::event::Agent {
        name: info.get("name")?.as_str()?.to_string(),
        version: info
            .get("version")
            .and_then(Value::as_str)
            .map(str::to_string),
        via: via.to_string(),
        source_id: None,
    })
}

/// The connection's session: not started until a tool is called.
pub(crate) enum Session<'a> {
    Pending(Box<Pending<'a>>),
    Started(Box<Engine>),
}

impl Session<'_> {
    fn registry(&self) -> &Registry {
        match self {
            Session::Pending(p) => &p.registry,
            Session::Started(e) => e.registry(),
        }
    }

    /// The signal that stopped the server, if one did.
    pub(crate) fn stopped(&self) -> Option<crate::signal::Signal> {
        match self {
            Session::Pending(_) => crate::signal::received(),
            Session::Started(e) => e.stopped(),
        }
    }

    /// The engine, the session started now if it was not yet.
    pub(crate) fn engine(&mut self) -> Result<&mut Engine> {
        if let Session::Pending(p) = self {
            let mut engine =
                Engine::start_for(p.home, p.workspace, p.config.clone(), p.agent.take())?;
            engine.set_approver(Box::new(p.policy));
            *self = Session::Started(Box::new(engine));
        }
        match self {
            Session::Started(e) => Ok(e),
            Session::Pending(_) => unreachable!("the session was started just above"),
        }
    }

    /// Ends the session with `reason`; `None` if it never started.
    pub(crate) fn end(self, reason: &str) -> Result<Option<Head>> {
        match self {
            Session::Pending(_) => Ok(None),
            Session::Started(e) => (*e).end(reason).map(Some),
        }
    }
}

fn serve_in(
    mut session: Session<'_>,
    mut input: impl BufRead,
    mut output: impl Write,
) -> Result<Option<Head>> {
    let mut line = Vec::new();
    loop {
        if let Some(s) = session.stopped() {
            return session.end(&s.reason());
        }
        line.clear();
        let n = std::io::Read::take(&mut input, MESSAGE_BYTES_MAX as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| EngineError::Io {
                path: std::path::PathBuf::from("stdin"),
                source: e,
            })?;
        if n == 0 {
            // The end of the input, or a read that a signal ended.
            if let Some(s) = session.stopped() {
                return session.end(&s.reason());
            }
            return session.end(REASON_STDIN_CLOSED);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let replies = match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(batch)) => batch
                .into_iter()
                .filter_map(|m| handle(&mut session, m).transpose())
                .collect::<Result<Vec<Value>>>()?,
            Ok(m) => handle(&mut session, m)?.into_iter().collect(),
            Err(e) => vec![error(Value::Null, -32700, &format!("parse error: {e}"))],
        };
        for r in replies {
            let mut bytes = r.to_string().into_bytes();
            bytes.push(b'\n');
            // A client that went away ends the session like one that closed stdin.
            if output
                .write_all(&bytes)
                .and_then(|()| output.flush())
                .is_err()
            {
                return session.end(REASON_STDOUT_CLOSED);
            }
        }
    }
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The reply to one message (none for a notification or a response).
fn handle(session: &mut Session<'_>, m: Value) -> Result<Option<Value>> {
    let Some(method) = m.get("method").and_then(Value::as_str) else {
        return Ok(None);
    };
    let Some(id) = m.get("id").cloned() else {
        // notifications/initialized, notifications/cancelled: nothing to answer.
        return Ok(None);
    };
    let params = m.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => {
            if let Session::Pending(p) = session {
                p.agent = client_agent(&params, "mcp");
            }
            let asked = params["protocolVersion"].as_str().unwrap_or("");
            // The client's version when cairn speaks it, else cairn's latest.
            let version = PROTOCOL_VERSIONS
                .iter()
                .find(|v| **v == asked)
                .unwrap_or(&PROTOCOL_VERSIONS[0]);
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "cairn", "version": env!("CARGO_PKG_VERSION")},
                "instructions": "cairn runs every call through its rules (read before edit, confinement to the workspace, caps, redaction) and records it in a verifiable log: one session per connection, started at its first tool call",
            })
        }
        "ping" => json!({}),
        "tools/list" => json!({"tools": tools(session.registry())}),
        "tools/call" => {
            let Some(name) = params["name"].as_str() else {
                return Ok(Some(error(id, -32602, "tools/call needs params.name")));
            };
            let args = match params.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(a) => a.clone(),
            };
            if session.registry().get(name).is_none() {
                return Ok(Some(error(id, -32602, &format!("unknown tool: {name}"))));
            }
            let out = session.engine()?.call(name, args)?;
            json!({
                "content": [{"type": "text", "text": out.output}],
                "isError": out.status != Status::Ok,
            })
        }
        other => {
            return Ok(Some(error(
                id,
                -32601,
                &format!("method not found: {other}"),
            )));
        }
    };
    Ok(Some(json!({"jsonrpc": "2.0", "id": id, "result": result})))
}

fn tools(registry: &Registry) -> Vec<Value> {
    registry
        .tools()
        .map(|t| {
            json!({
                "name": t.name(),
                "description": t.description(),
                "inputSchema": t.schema(),
                "annotations": {"readOnlyHint": !t.is_mutating()},
            })
        })
        .collect()
}
