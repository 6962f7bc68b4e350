//! Anthropic Messages (`POST {base}/v1/messages`) with tool use, streamed or not.
//! Thinking blocks are the model's hidden reasoning: they are skipped, never recorded.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{
    GiveUpFn, Message, ProgressFn, Provider, ProviderConfig, ProviderError, Request, ToolCall,
    Turn, Usage, http, parse_arguments,
};

/// The API version sent in `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";

/// The Anthropic Messages API.
pub struct Anthropic {
    config: ProviderConfig,
    wire: http::Wire,
    progress: Option<ProgressFn>,
    give_up: Option<GiveUpFn>,
}

impl Anthropic {
    pub fn new(config: ProviderConfig) -> Result<Anthropic, ProviderError> {
        let wire = http::Wire::new(&config)?;
        Ok(Anthropic {
            config,
            wire,
            progress: None,
            give_up: None,
        })
    }
}

/// The request body. Tool results travel in a user message; consecutive messages of
/// one role are merged, as the API wants roles to alternate.
pub fn body(model: &str, max_tokens: u32, request: &Request<'_>, stream: bool) -> Value {
    let mut messages: Vec<(String, Vec<Value>)> = Vec::new();
    for m in request.messages {
        let (role, blocks) = match m {
            Message::User { text } => ("user", vec![json!({"type": "text", "text": text})]),
            Message::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() || tool_calls.is_empty() {
                    blocks.push(json!({"type": "text", "text": if text.is_empty() { "(no answer)" } else { text }}));
                }
                for c in tool_calls {
                    let input = if c.input.is_object() {
                        c.input.clone()
                    } else {
                        json!({"_arguments": c.input})
                    };
                    blocks.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
                ("assistant", blocks)
            }
            Message::Tool {
                call_id,
                output,
                is_error,
                ..
            } => (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": output, "is_error": is_error}),
                ],
            ),
        };
        match messages.last_mut() {
            Some((r, b)) if r == role => {
                // Tool results come first in a user message.
                b.extend(blocks);
            }
            _ => messages.push((role.to_string(), blocks)),
        }
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let tools: Vec<Value> = request
        .tools
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| json!({"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}))
                .collect()
        })
        .unwrap_or_default();
    let mut body = json!({
        "model": model, "max_tokens": max_tokens, "system": request.system, "messages": messages,
    });
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    if stream {
        body["stream"] = json!(true);
    }
    body
}

/// Reads a whole (not streamed) answer.
pub fn parse_response(v: &Value) -> Result<Turn, ProviderError> {
    let content = v["content"]
        .as_array()
        .ok_or_else(|| ProviderError::Malformed("no content array in the answer".into()))?;
    let mut turn = Turn::default();
    for b in content {
        match b["type"].as_str() {
            Some("text") => turn.text.push_str(b["text"].as_str().unwrap_or("")),
            Some("tool_use") => turn.tool_calls.push(ToolCall {
                id: b["id"].as_str().unwrap_or("").to_string(),
                name: b["name"]
                    .as_str()
                    .ok_or_else(|| {
                        ProviderError::Malformed(format!("tool_use without a name: {b}"))
                    })?
                    .to_string(),
                input: b["input"].clone(),
            }),
            // thinking, redacted_thinking: hidden reasoning, never kept.
            _ => {}
        }
    }
    turn.usage = v.get("usage").map(usage_of);
    Ok(turn)
}

/// A Messages `usage` object as a [`Usage`]: Anthropic's `input_tokens` leaves out the
/// tokens read from and written to the prompt cache, cairn's counts them all.
fn usage_of(u: &Value) -> Usage {
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    let (cached, written) = (
        n("cache_read_input_tokens"),
        n("cache_creation_input_tokens"),
    );
    Usage {
        input_tokens: n("input_tokens") + cached + written,
        output_tokens: n("output_tokens"),
        cached_tokens: cached,
        cache_write_tokens: written,
    }
}

enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
    },
    Hidden,
}

/// Folds streamed events into a turn.
#[derive(Default)]
pub struct StreamState {
    text: String,
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    stopped: bool,
}

impl StreamState {
    /// Takes one event; true at `message_stop`.
    pub fn feed(&mut self, event: &str, data: &str) -> Result<bool, ProviderError> {
        let v: Value = serde_json::from_str(data).map_err(|e| {
            ProviderError::Malformed(format!("stream event is not JSON ({e}): {data:.120}"))
        })?;
        let kind = v["type"].as_str().unwrap_or(event);
        let index = v["index"].as_u64().unwrap_or(0);
        match kind {
            "message_start" => {
                self.usage = usage_of(&v["message"]["usage"]);
            }
            "content_block_start" => {
                let b = &v["content_block"];
                let block = match b["type"].as_str() {
                    Some("text") => {
                        self.text.push_str(b["text"].as_str().unwrap_or(""));
                        Block::Text
                    }
                    Some("tool_use") => Block::Tool {
                        id: b["id"].as_str().unwrap_or("").to_string(),
                        name: b["name"].as_str().unwrap_or("").to_string(),
                        json: String::new(),
                    },
                    _ => Block::Hidden,
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let d = &v["delta"];
                match (self.blocks.get_mut(&index), d["type"].as_str()) {
                    (Some(Block::Text), Some("text_delta")) => {
                        self.text.push_str(d["text"].as_str().unwrap_or(""))
                    }
                    (Some(Block::Tool { json, .. }), Some("input_json_delta")) => {
                        json.push_str(d["partial_json"].as_str().unwrap_or(""))
                    }
                    (None, _) => {
                        return Err(ProviderError::Malformed(format!(
                            "delta for block {index}, which never started"
                        )));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                // Counts here are cumulative; newer servers repeat the input counts.
                let u = &v["usage"];
                if u.get("input_tokens").is_some() {
                    self.usage = usage_of(u);
                } else if let Some(n) = u["output_tokens"].as_u64() {
                    self.usage.output_tokens = n;
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => {
                return Err(ProviderError::Http {
                    status: 0,
                    message: format!(
                        "{}: {}",
                        v["error"]["type"].as_str().unwrap_or("error"),
                        v["error"]["message"].as_str().unwrap_or("")
                    ),
                });
            }
            _ => {}
        }
        Ok(false)
    }

    /// The turn; a stream without `message_stop` was cut.
    pub fn finish(self) -> Result<Turn, ProviderError> {
        if !self.stopped {
            return Err(ProviderError::StreamCut(format!(
                "no message_stop after {} content blocks",
                self.blocks.len()
            )));
        }
        let mut tool_calls = Vec::new();
        for b in self.blocks.into_values() {
            if let Block::Tool { id, name, json } = b {
                if name.is_empty() {
                    return Err(ProviderError::Malformed("tool_use without a name".into()));
                }
                tool_calls.push(ToolCall {
                    id,
                    name,
                    input: parse_arguments(&json),
                });
            }
        }
        Ok(Turn {
            text: self.text,
            tool_calls,
            usage: Some(self.usage),
        })
    }
}

impl http::Streamed for StreamState {
    fn feed(&mut self, event: &str, data: &str) -> Result<bool, ProviderError> {
        StreamState::feed(self, event, data)
    }

    fn text(&self) -> &str {
        &self.text
    }

    fn into_text(self) -> String {
        self.text
    }

    fn finish(self) -> Result<Turn, ProviderError> {
        StreamState::finish(self)
    }
}

impl Provider for Anthropic {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    fn set_progress(&mut self, progress: Option<ProgressFn>) {
        self.progress = progress;
    }

    fn set_give_up(&mut self, give_up: Option<GiveUpFn>) {
        self.give_up = give_up;
    }

    fn turn(&mut self, request: &Request<'_>) -> Result<Turn, ProviderError> {
        let c = &self.config;
        let url = format!("{}/v1/messages", c.base_url);
        let mut headers = vec![("anthropic-version", API_VERSION.to_string())];
        if let Some(k) = c.api_key.expose() {
            headers.push(("x-api-key", k.to_string()));
        }
        let body = body(&c.model, c.output_tokens_max, request, c.stream);
        http::turn::<StreamState>(
            &self.wire,
            c,
            self.give_up.as_ref(),
            self.progress.clone(),
            &http::Exchange {
                url: &url,
                headers: &headers,
                body: &body,
                parse: parse_response,
            },
        )
    }
}
