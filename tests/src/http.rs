//! A tiny HTTP/1.1 server on 127.0.0.1 for provider and web tests: each connection gets
//! one answer made by a handler (raw bytes, so a test can send any status, any header
//! and a stream cut in the middle), then the connection is closed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// When the whole request had arrived (the bench times an agent's rounds by it).
    pub at: std::time::Instant,
}

impl Req {
    /// A header's value (name matched without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// A running server; it lives until the test process ends.
pub struct Server {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    pub requests: Arc<Mutex<Vec<Req>>>,
}

type Handler = dyn Fn(&Req, usize) -> Vec<u8> + Send + Sync;

impl Server {
    /// Answers request number `n` (from 0) with `handler(req, n)`.
    pub fn start(handler: impl Fn(&Req, usize) -> Vec<u8> + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let requests: Arc<Mutex<Vec<Req>>> = Arc::default();
        let seen = requests.clone();
        let handler: Arc<Handler> = Arc::new(handler);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let Some(req) = read_request(&mut stream) else {
                    continue;
                };
                let n = {
                    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                    s.push(req.clone());
                    s.len() - 1
                };
                let answer = handler(&req, n);
                let _ = stream.write_all(&answer);
                let _ = stream.flush();
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        });
        Server {
            url: format!("http://127.0.0.1:{port}"),
            requests,
        }
    }

    /// Hands request number `n` (from 0) and its connection to `handler`, which writes
    /// its answer as it likes (a piece, a pause, another piece): each connection on a
    /// thread of its own, so a later request is answered while an earlier one still
    /// streams. The connection is closed when the handler returns.
    pub fn streaming(
        handler: impl Fn(&Req, usize, &mut std::net::TcpStream) + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let requests: Arc<Mutex<Vec<Req>>> = Arc::default();
        let seen = requests.clone();
        let handler = Arc::new(handler);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (seen, handler) = (seen.clone(), handler.clone());
                std::thread::spawn(move || {
                    let Some(req) = read_request(&mut stream) else {
                        return;
                    };
                    let n = {
                        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                        s.push(req.clone());
                        s.len() - 1
                    };
                    handler(&req, n, &mut stream);
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Server {
            url: format!("http://127.0.0.1:{port}"),
            requests,
        }
    }

    /// Answers the n-th request with `answers[n]`, and 500 past the end.
    pub fn canned(answers: Vec<Vec<u8>>) -> Server {
        Server::start(move |_, n| {
            answers
                .get(n)
                .cloned()
                .unwrap_or_else(|| response(500, &[], "no more canned answers"))
        })
    }

    /// The requests so far.
    pub fn seen(&self) -> Vec<Req> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

fn read_request(stream: &mut std::net::TcpStream) -> Option<Req> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some(Req {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        at: std::time::Instant::now(),
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        302 => "Found",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// A whole response with a content length.
pub fn response(status: u16, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ));
    out.into_bytes()
}

/// A JSON response.
pub fn json(status: u16, body: &serde_json::Value) -> Vec<u8> {
    response(
        status,
        &[("content-type", "application/json")],
        &body.to_string(),
    )
}

/// A server-sent event stream without a content length: it ends when the connection
/// closes, so a test can cut it anywhere.
pub fn sse(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n{body}"
    )
    .into_bytes()
}

/// Waits until the client closes `stream` (or `wait_max` passes); true when it did.
/// What the client sends meanwhile is read and dropped.
pub fn closed_by_client(stream: &mut std::net::TcpStream, wait_max: std::time::Duration) -> bool {
    let t0 = std::time::Instant::now();
    let mut buf = [0u8; 256];
    while t0.elapsed() < wait_max {
        let left = wait_max
            .saturating_sub(t0.elapsed())
            .max(std::time::Duration::from_millis(1));
        if stream.set_read_timeout(Some(left)).is_err() {
            return false;
        }
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
    false
}

/// The head of a server-sent event stream (no content length: it ends at close), to
/// write before its events.
pub fn sse_head() -> &'static [u8] {
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
}

/// One OpenAI `chat.completion.chunk` event carrying `text`.
pub fn openai_text_event(text: &str) -> String {
    let chunk = serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "m-1",
        "choices": [{"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

/// A body without a content length (ends at close).
pub fn until_close(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n",
        reason(status)
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// An OpenAI Chat Completions stream (`chat.completion.chunk` events, as documented):
/// the text in pieces, each tool call's arguments in 4-character pieces, the calls
/// interleaved by `index`, a usage chunk, then `[DONE]`. `cut_after` stops after that
/// many events (no `[DONE]`), as a dropped connection would.
pub fn openai_stream(
    text: &str,
    calls: &[(&str, &str, serde_json::Value)],
    cut_after: Option<usize>,
) -> Vec<u8> {
    openai_stream_cached(text, calls, cut_after, 0)
}

/// [`openai_stream`] whose usage says `cached` of its 120 prompt tokens were read from
/// the prompt cache (`prompt_tokens_details.cached_tokens`; left out when 0).
pub fn openai_stream_cached(
    text: &str,
    calls: &[(&str, &str, serde_json::Value)],
    cut_after: Option<usize>,
    cached: u64,
) -> Vec<u8> {
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "m-1",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(
        serde_json::json!({"role": "assistant", "content": ""}),
        serde_json::Value::Null,
    )];
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(5) {
        events.push(chunk(
            serde_json::json!({"content": piece.iter().collect::<String>()}),
            serde_json::Value::Null,
        ));
    }
    for (i, (id, name, _)) in calls.iter().enumerate() {
        events.push(chunk(serde_json::json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}), serde_json::Value::Null));
    }
    let args: Vec<Vec<char>> = calls
        .iter()
        .map(|(_, _, a)| a.to_string().chars().collect())
        .collect();
    let longest = args.iter().map(|a| a.len().div_ceil(4)).max().unwrap_or(0);
    for p in 0..longest {
        for (i, a) in args.iter().enumerate() {
            if p * 4 < a.len() {
                let piece: String = a[p * 4..(p * 4 + 4).min(a.len())].iter().collect();
                events.push(chunk(serde_json::json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}), serde_json::Value::Null));
            }
        }
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    events.push(chunk(serde_json::json!({}), serde_json::json!(finish)));
    let mut usage =
        serde_json::json!({"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150});
    if cached > 0 {
        usage["prompt_tokens_details"] =
            serde_json::json!({"cached_tokens": cached, "audio_tokens": 0});
    }
    events.push(serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "m-1",
        "choices": [], "usage": usage}));
    let mut body = String::new();
    let n = cut_after.unwrap_or(usize::MAX);
    for e in events.iter().take(n) {
        body.push_str(&format!("data: {e}\n\n"));
    }
    if cut_after.is_none() {
        body.push_str("data: [DONE]\n\n");
    } else {
        body.push_str("data: {\"id\":\"chatcmpl-1\",\"choi");
    }
    sse(&body)
}

/// An Anthropic Messages stream (as documented): message_start, a thinking block (which
/// must be dropped), a text block in pieces, tool_use blocks with `input_json_delta`
/// pieces, message_delta with usage, message_stop. `cut_after` stops after that many
/// events.
pub fn anthropic_stream(
    text: &str,
    calls: &[(&str, &str, serde_json::Value)],
    cut_after: Option<usize>,
) -> Vec<u8> {
    anthropic_stream_cached(text, calls, cut_after, (0, 0))
}

/// [`anthropic_stream`] whose `message_start` usage also counts `(read, written)`
/// prompt-cache tokens (`cache_read_input_tokens`, `cache_creation_input_tokens`; left
/// out when both are 0), besides its 200 uncached input tokens.
pub fn anthropic_stream_cached(
    text: &str,
    calls: &[(&str, &str, serde_json::Value)],
    cut_after: Option<usize>,
    cache: (u64, u64),
) -> Vec<u8> {
    let mut usage = serde_json::json!({"input_tokens": 200, "output_tokens": 1});
    if cache != (0, 0) {
        usage["cache_read_input_tokens"] = serde_json::json!(cache.0);
        usage["cache_creation_input_tokens"] = serde_json::json!(cache.1);
    }
    let mut events: Vec<(&str, serde_json::Value)> = vec![
        (
            "message_start",
            serde_json::json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-x", "stop_reason": null, "stop_sequence": null, "usage": usage}}),
        ),
        (
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        (
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "SECRET-REASONING"}}),
        ),
        (
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": 0}),
        ),
        ("ping", serde_json::json!({"type": "ping"})),
        (
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(5) {
        events.push(("content_block_delta", serde_json::json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": piece.iter().collect::<String>()}})));
    }
    events.push((
        "content_block_stop",
        serde_json::json!({"type": "content_block_stop", "index": 1}),
    ));
    for (i, (id, name, input)) in calls.iter().enumerate() {
        let index = i + 2;
        events.push(("content_block_start", serde_json::json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})));
        let a: Vec<char> = input.to_string().chars().collect();
        events.push(("content_block_delta", serde_json::json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": ""}})));
        for piece in a.chunks(4) {
            events.push(("content_block_delta", serde_json::json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece.iter().collect::<String>()}})));
        }
        events.push((
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": index}),
        ));
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    events.push(("message_delta", serde_json::json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 42}})));
    events.push(("message_stop", serde_json::json!({"type": "message_stop"})));
    let mut body = String::new();
    for (name, e) in events.iter().take(cut_after.unwrap_or(usize::MAX)) {
        body.push_str(&format!("event: {name}\ndata: {e}\n\n"));
    }
    sse(&body)
}

/// An OpenAI-compatible provider (model `m-1`) whose requests go to `server`.
pub fn openai_provider(server: &Server) -> Box<dyn cairn_engine::provider::Provider + Send> {
    use cairn_engine::provider::{Kind, Overrides, ProviderConfig};
    let config = ProviderConfig::from_env(
        Kind::Openai,
        &Overrides {
            base_url: Some(format!("{}/v1", server.url)),
            model: Some("m-1".into()),
            ..Overrides::default()
        },
        |_| None,
    )
    .unwrap_or_else(|e| panic!("a provider for {}: {e}", server.url));
    config
        .build()
        .unwrap_or_else(|e| panic!("a provider for {}: {e}", server.url))
}
