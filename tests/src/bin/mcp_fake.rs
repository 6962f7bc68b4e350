//! A small MCP server for the client's failure paths, deterministic and fast: tools
//! listed over two pages, a tool named like a built-in, results of every content kind,
//! and tools that time out, crash, print garbage or change the tool list.
//! `mcp_fake old-version` answers `initialize` with a version cairn does not speak.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

fn send(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": format!("fake {name}"), "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": if name == "echo" { json!(["text"]) } else { json!([]) }}})
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    // "ms" for the slow tool is not a declared property: schemas are passed through.
    let mut changed = false;
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(m) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = m.get("id").cloned() else {
            continue;
        };
        let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
        match m["method"].as_str().unwrap_or("") {
            "initialize" => {
                let version = if mode == "old-version" {
                    "1999-01-01".to_string()
                } else {
                    m["params"]["protocolVersion"]
                        .as_str()
                        .unwrap_or("")
                        .to_string()
                };
                send(&reply(
                    json!({"protocolVersion": version, "capabilities": {"tools": {"listChanged": true}}, "serverInfo": {"name": "fake", "version": "1"}}),
                ));
            }
            "tools/list" => {
                let page = if m["params"]["cursor"] == "p2" {
                    let mut tools = vec![tool("crash"), tool("garbage"), tool("change")];
                    if changed {
                        tools.push(tool("added"));
                    }
                    json!({"tools": tools})
                } else {
                    json!({"tools": [tool("echo"), tool("read_file"), tool("media"), tool("fail"), tool("slow")], "nextCursor": "p2"})
                };
                send(&reply(page));
            }
            "tools/call" => {
                let args = &m["params"]["arguments"];
                let text = args["text"].as_str().unwrap_or("");
                match m["params"]["name"].as_str().unwrap_or("") {
                    "echo" | "added" | "read_file" => {
                        // A request of the server's own while the call is open.
                        send(&json!({"jsonrpc": "2.0", "id": "s1", "method": "ping"}));
                        send(
                            &json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "echoing"}}),
                        );
                        send(&reply(
                            json!({"content": [{"type": "text", "text": format!("echo: {text}")}]}),
                        ))
                    }
                    "media" => send(&reply(json!({"content": [
                        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
                    ], "structuredContent": {"width": 1, "height": 1}}))),
                    "fail" => send(&reply(
                        json!({"content": [{"type": "text", "text": "it failed"}], "isError": true}),
                    )),
                    "slow" => {
                        let ms = args["ms"].as_u64().unwrap_or(0);
                        std::thread::sleep(std::time::Duration::from_millis(ms));
                        send(&reply(
                            json!({"content": [{"type": "text", "text": "late"}]}),
                        ));
                    }
                    "crash" => {
                        eprintln!("fake: crashing on purpose");
                        std::process::exit(3);
                    }
                    "garbage" => {
                        let mut out = std::io::stdout().lock();
                        let _ = writeln!(out, "this is not json");
                        let _ = out.flush();
                    }
                    "change" => {
                        changed = true;
                        send(
                            &json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
                        );
                        send(&reply(
                            json!({"content": [{"type": "text", "text": "changed"}]}),
                        ));
                    }
                    other => send(
                        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": format!("unknown tool {other}")}}),
                    ),
                }
            }
            _ => send(
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}}),
            ),
        }
    }
}
