//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`) with tool calling,
//! streamed or not. In a stream, tool calls arrive in pieces keyed by `index`: the first
//! piece carries the id and name, later ones pieces of the arguments text.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{
    GiveUpFn, Message, ProgressFn, Provider, ProviderConfig, ProviderError, Request, ToolCall,
    Turn, Usage, http, parse_arguments,
};

/// An OpenAI-compatible server.
pub struct OpenAi {
    config: ProviderConfig,
    wire: http::Wire,
    progress: Option<ProgressFn>,
    give_up: Option<GiveUpFn>,
}

impl OpenAi {
    pub fn new(config: ProviderConfig) -> Result<OpenAi, ProviderError> {
        let wire = http::Wire::new(&config)?;
        Ok(OpenAi {
            config,
            wire,
            progress: None,
            give_up: None,
        })
    }
}

/// The request body for `request`.
pub fn body(model: &str, request: &Request<'_>, stream: bool) -> Value {
    let mut messages = vec![json!({"role": "system", "content": request.system})];
    for m in request.messages {
        messages.push(match m {
            Message::User { text } => json!({"role": "user", "content": text}),
            Message::Assistant { text, tool_calls } => {
                let mut v = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
                if !tool_calls.is_empty() {
                    v["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function", "function": {
                                "name": c.name,
                                "arguments": match &c.input { Value::String(s) => s.clone(), v => v.to_string() },
                            }})
                        })
                        .collect();
                }
                v
            }
            Message::Tool {
                call_id, output, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": output}),
        });
    }
    let tools: Vec<Value> = request
        .tools
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t["name"], "description": t["description"], "parameters": t["input_schema"],
                    }})
                })
                .collect()
        })
        .unwrap_or_default();
    let mut body = json!({"model": model, "messages": messages});
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

fn usage_of(v: &Value) -> Option<Usage> {
    let u = v.get("usage").filter(|u| u.is_object())?;
    Some(Usage {
        input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
        cached_tokens: u
            .pointer("/prompt_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        cache_write_tokens: 0,
    })
}

/// Reads a whole (not streamed) answer.
pub fn parse_response(v: &Value) -> Result<Turn, ProviderError> {
    let message = v
        .pointer("/choices/0/message")
        .ok_or_else(|| ProviderError::Malformed("no choices[0].message in the answer".into()))?;
    let text = message["content"].as_str().unwrap_or("").to_string();
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(|c| c.as_array()) {
        for c in calls {
            let name = c
                .pointer("/function/name")
                .and_then(|n| n.as_str())
                .ok_or_else(|| ProviderError::Malformed(format!("a tool call has no name: {c}")))?;
            tool_calls.push(ToolCall {
                id: c["id"].as_str().unwrap_or("").to_string(),
                name: name.to_string(),
                input: parse_arguments(
                    c.pointer("/function/arguments")
                        .and_then(|a| a.as_str())
                        .unwrap_or(""),
                ),
            });
        }
    }
    Ok(Turn {
        text,
        tool_calls,
        usage: usage_of(v),
    })
}

#[derive(Default)]
struct Partial {
    id: String,
    name: String,
    arguments: String,
}

/// Folds streamed chunks into a turn.
#[derive(Default)]
pub struct StreamState {
    text: String,
    calls: BTreeMap<u64, Partial>,
    usage: Option<Usage>,
    finished: bool,
    done: bool,
}

impl StreamState {
    /// Takes one `data:` payload; true at `[DONE]`.
    pub fn feed(&mut self, data: &str) -> Result<bool, ProviderError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            ProviderError::Malformed(format!("stream chunk is not JSON ({e}): {data:.120}"))
        })?;
        if let Some(err) = v.get("error") {
            return Err(ProviderError::Http {
                status: 0,
                message: err["message"]
                    .as_str()
                    .unwrap_or(&err.to_string())
                    .to_string(),
            });
        }
        if let Some(u) = usage_of(&v) {
            self.usage = Some(u);
        }
        let Some(choice) = v.pointer("/choices/0") else {
            return Ok(false);
        };
        if choice["finish_reason"].is_string() {
            self.finished = true;
        }
        let delta = &choice["delta"];
        if let Some(t) = delta["content"].as_str() {
            self.text.push_str(t);
        }
        if let Some(calls) = delta["tool_calls"].as_array() {
            for (pos, c) in calls.iter().enumerate() {
                let index = c["index"].as_u64().unwrap_or(pos as u64);
                let p = self.calls.entry(index).or_default();
                if let Some(id) = c["id"].as_str() {
                    p.id.push_str(id);
                }
                if let Some(n) = c.pointer("/function/name").and_then(|n| n.as_str()) {
                    p.name.push_str(n);
                }
                if let Some(a) = c.pointer("/function/arguments").and_then(|a| a.as_str()) {
                    p.arguments.push_str(a);
                }
            }
        }
        Ok(false)
    }

    /// The turn, once the stream ended; a stream without `[DONE]` or a finish reason
    /// was cut.
    pub fn finish(self) -> Result<Turn, ProviderError> {
        if !self.done && !self.finished {
            return Err(ProviderError::StreamCut(format!(
                "no finish_reason or [DONE] after {} characters of text and {} tool calls",
                self.text.chars().count(),
                self.calls.len()
            )));
        }
        let mut tool_calls = Vec::new();
        for (i, p) in self.calls {
            if p.name.is_empty() {
                return Err(ProviderError::Malformed(format!(
                    "streamed tool call {i} has no name"
                )));
            }
            tool_calls.push(ToolCall {
                id: if p.id.is_empty() {
                    format!("call_{i}")
                } else {
                    p.id
                },
                name: p.name,
                input: parse_arguments(&p.arguments),
            });
        }
        Ok(Turn {
            text: self.text,
            tool_calls,
            usage: self.usage,
        })
    }
}

impl http::Streamed for StreamState {
    fn feed(&mut self, _event: &str, data: &str) -> Result<bool, ProviderError> {
        StreamState::feed(self, data)
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

impl Provider for OpenAi {
    fn name(&self) -> &str {
        "openai"
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
        let url = format!("{}/chat/completions", c.base_url);
        let mut headers = Vec::new();
        if let Some(k) = c.api_key.expose() {
            headers.push(("authorization", format!("Bearer {k}")));
        }
        let body = body(&c.model, request, c.stream);
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
