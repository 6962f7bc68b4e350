//! cairn as an MCP server over stdio: `initialize`, `tools/list` (the catalogue's
//! built-ins with their input schemas), `tools/call` through [`Engine::call`] in one
//! recorded session per connection, `ping`. There is no terminal to ask, so permission
//! requests are answered by the engine's approver (a policy). The session ends cleanly
//! (`session_ended`) when the client closes stdin, or on SIGINT, SIGTERM or SIGHUP
//! (`signal: SIGTERM`) once [`crate::signal::install`] ran: Codex sends SIGTERM to
//! the server's process group, Claude Code SIGINT without closing stdin.

use std::io::{BufRead, Write};
use std::path::Path;

use cairn_store::Head;
use serde_json::{Value, json};

use crate::engine::{Engine, EngineConfig};
use crate::event::Status;
use crate::permission::Policy;
use crate::project::Home;
use cairn_mcp::PROTOCOL_VERSIONS;
use cairn_tools::{EngineError, Result};

/// The largest message read from a client.
pub const MESSAGE_BYTES_MAX: usize = 64 << 20;

/// Starts a session in `workspace` with `config`, answers permission requests with
/// `policy`, and serves it on `input`/`output` until the client disconnects.
pub fn serve_session(
    home: &Home,
    workspace: &Path,
    config: EngineConfig,
    policy: Policy,
    input: impl BufRead,
    output: impl Write,
) -> Result<Head> {
    let mut engine = Engine::start(home, workspace, config)?;
    engine.set_approver(Box::new(policy));
    serve(engine, input, output)
}

/// Serves `engine` until `input` ends or the session is stopped by a signal
/// ([`Engine::stopped`]: the running call is cancelled and answered, then nothing more
/// is read), then ends the session. For the stop to end a wait for the next message,
/// `input` reads through [`crate::signal::Interruptible`].
pub fn serve(mut engine: Engine, mut input: impl BufRead, mut output: impl Write) -> Result<Head> {
    let mut line = Vec::new();
    loop {
        if let Some(s) = engine.stopped() {
            return engine.end(&s.reason());
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
            if let Some(s) = engine.stopped() {
                return engine.end(&s.reason());
            }
            break;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let replies = match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(batch)) => batch
                .into_iter()
                .filter_map(|m| handle(&mut engine, m).transpose())
                .collect::<Result<Vec<Value>>>()?,
            Ok(m) => handle(&mut engine, m)?.into_iter().collect(),
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
                return engine.end("mcp client disconnected");
            }
        }
    }
    engine.end("mcp client disconnected")
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The reply to one message (none for a notification or a response).
fn handle(engine: &mut Engine, m: Value) -> Result<Option<Value>> {
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
                "instructions": format!(
                    "cairn runs every call through its rules (read before edit, confinement to the workspace, caps, redaction) and records it in a verifiable log; session {}",
                    engine.id()
                ),
            })
        }
        "ping" => json!({}),
        "tools/list" => json!({"tools": tools(engine)}),
        "tools/call" => {
            let Some(name) = params["name"].as_str() else {
                return Ok(Some(error(id, -32602, "tools/call needs params.name")));
            };
            let args = match params.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(a) => a.clone(),
            };
            if engine.registry().get(name).is_none() {
                return Ok(Some(error(id, -32602, &format!("unknown tool: {name}"))));
            }
            let out = engine.call(name, args)?;
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

fn tools(engine: &Engine) -> Vec<Value> {
    engine
        .registry()
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
