//! Both providers against a local server speaking their documented wire formats: whole
//! and streamed answers, tool-call arguments in pieces, parallel calls, hidden
//! reasoning dropped, retries on 429 (retry-after honoured) and 5xx, clear errors for
//! 401, 404, malformed bodies and streams cut in the middle, turns given up mid-stream
//! and mid-retry, and the key never in an error.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_engine::provider::{
    GiveUp, Kind, Message, Overrides, Provider, ProviderConfig, ProviderError, Request, ToolCall,
    Turn, Usage,
};
use cairn_tests::http::{Server, anthropic_stream, json, openai_stream, response};
use serde_json::json;

const KEY: &str = "sk-test-abcdefghijklmnopqrstuvwxyz0123456789";

fn provider(kind: Kind, server: &Server, stream: bool) -> Box<dyn Provider> {
    let env = |k: &str| match k {
        "CAIRN_API_KEY" => Some(KEY.to_string()),
        "CAIRN_MODEL" => Some("m-1".to_string()),
        _ => None,
    };
    let base = match kind {
        Kind::Openai => format!("{}/v1", server.url),
        Kind::Anthropic => server.url.clone(),
    };
    let mut c = ProviderConfig::from_env(
        kind,
        &Overrides {
            base_url: Some(base),
            stream: Some(stream),
            ..Overrides::default()
        },
        env,
    )
    .unwrap();
    c.retry.retries_max = 2;
    c.retry.backoff_initial_ms = 10;
    c.retry.backoff_max_ms = 20;
    c.retry.request_timeout_ms = 5_000;
    c.build().unwrap()
}

fn ask(p: &mut dyn Provider) -> Result<Turn, ProviderError> {
    let tools = cairn_engine::Registry::new(cairn_engine::Catalog::Thoth).to_json();
    let messages = vec![
        Message::User {
            text: "fix it".into(),
        },
        Message::Assistant {
            text: "reading".into(),
            tool_calls: vec![ToolCall {
                id: "call_0".into(),
                name: "read_file".into(),
                input: json!({"path": "a.txt"}),
            }],
        },
        Message::Tool {
            call_id: "call_0".into(),
            name: "read_file".into(),
            output: "1: one".into(),
            is_error: false,
        },
    ];
    p.turn(&Request {
        system: "be brief",
        messages: &messages,
        tools: &tools,
    })
}

fn two_calls() -> Vec<(&'static str, &'static str, serde_json::Value)> {
    vec![
        (
            "call_a",
            "read_file",
            json!({"path": "src/main.rs", "offset": 1}),
        ),
        (
            "call_b",
            "grep",
            json!({"pattern": "fn main\\(\\)", "path": "."}),
        ),
    ]
}

fn expected_two_calls(text: &str, usage: Usage) -> Turn {
    Turn {
        text: text.into(),
        tool_calls: two_calls()
            .into_iter()
            .map(|(id, name, input)| ToolCall {
                id: id.into(),
                name: name.into(),
                input,
            })
            .collect(),
        usage: Some(usage),
    }
}

#[test]
fn openai_whole_answer_with_parallel_tool_calls_and_the_request_it_sent() {
    let body = json!({"id": "chatcmpl-abc123", "object": "chat.completion", "created": 1_699_896_916, "model": "m-1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"src/main.rs\", \"offset\": 1}"}},
            {"id": "call_b", "type": "function", "function": {"name": "grep", "arguments": "{\"pattern\":\"fn main\\\\(\\\\)\",\"path\":\".\"}"}}
        ]}, "logprobs": null, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99,
            "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0}}});
    let server = Server::canned(vec![json(200, &body)]);
    let mut p = provider(Kind::Openai, &server, false);
    let turn = ask(p.as_mut()).unwrap();
    assert_eq!(
        turn,
        expected_two_calls(
            "Let me look.",
            Usage {
                input_tokens: 82,
                output_tokens: 17,
                cached_tokens: 64,
                cache_write_tokens: 0,
            }
        )
    );
    let req = &server.seen()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let b = req.json();
    assert_eq!(b["model"], "m-1");
    assert_eq!(
        b["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    assert_eq!(
        b["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{\"path\":\"a.txt\"}"
    );
    assert_eq!(
        b["messages"][3],
        json!({"role": "tool", "tool_call_id": "call_0", "content": "1: one"})
    );
    assert_eq!(b["tools"][0]["type"], "function");
    assert_eq!(b["tools"][0]["function"]["name"], "read_file");
    assert!(b["tools"][0]["function"]["parameters"]["properties"]["path"].is_object());
    assert!(b.get("stream").is_none());
}

#[test]
fn openai_streamed_tool_calls_arrive_in_pieces_and_in_parallel() {
    let server = Server::canned(vec![openai_stream("Looking at both.", &two_calls(), None)]);
    let mut p = provider(Kind::Openai, &server, true);
    let turn = ask(p.as_mut()).unwrap();
    assert_eq!(
        turn,
        expected_two_calls(
            "Looking at both.",
            Usage {
                input_tokens: 120,
                output_tokens: 30,
                ..Usage::default()
            }
        )
    );
    let b = server.seen()[0].json();
    assert_eq!(b["stream"], true);
    assert_eq!(b["stream_options"]["include_usage"], true);
}

#[test]
fn anthropic_whole_answer_drops_thinking_and_sends_tool_results_in_a_user_message() {
    let body = json!({"id": "msg_01", "type": "message", "role": "assistant", "model": "m-1",
        "content": [
            {"type": "thinking", "thinking": "SECRET-REASONING", "signature": "sig"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "call_a", "name": "read_file", "input": {"path": "src/main.rs", "offset": 1}},
            {"type": "tool_use", "id": "call_b", "name": "grep", "input": {"pattern": "fn main\\(\\)", "path": "."}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 82, "output_tokens": 17,
            "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 50}});
    let server = Server::canned(vec![json(200, &body)]);
    let mut p = provider(Kind::Anthropic, &server, false);
    let turn = ask(p.as_mut()).unwrap();
    assert_eq!(
        turn,
        expected_two_calls(
            "Let me look.",
            // Anthropic's input_tokens leaves the cached tokens out; cairn's counts them.
            Usage {
                input_tokens: 1132,
                output_tokens: 17,
                cached_tokens: 1000,
                cache_write_tokens: 50,
            }
        )
    );
    let req = &server.seen()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some(KEY));
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    let b = req.json();
    assert_eq!(b["system"], "be brief");
    assert!(b["max_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        b["messages"][1]["content"][1],
        json!({"type": "tool_use", "id": "call_0", "name": "read_file", "input": {"path": "a.txt"}})
    );
    assert_eq!(b["messages"][2]["role"], "user");
    assert_eq!(
        b["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "call_0", "content": "1: one", "is_error": false})
    );
    assert_eq!(b["tools"][0]["name"], "read_file");
    assert!(b["tools"][0]["input_schema"].is_object());
}

#[test]
fn anthropic_streamed_tool_use_in_pieces_and_in_parallel() {
    let server = Server::canned(vec![anthropic_stream(
        "Looking at both.",
        &two_calls(),
        None,
    )]);
    let mut p = provider(Kind::Anthropic, &server, true);
    let turn = ask(p.as_mut()).unwrap();
    assert_eq!(
        turn,
        expected_two_calls(
            "Looking at both.",
            Usage {
                input_tokens: 200,
                output_tokens: 42,
                ..Usage::default()
            }
        )
    );
    assert!(!format!("{turn:?}").contains("SECRET-REASONING"));
}

#[test]
fn streamed_usage_records_the_cached_input_tokens_of_both_wire_formats() {
    use cairn_tests::http::{anthropic_stream_cached, openai_stream_cached};
    let server = Server::canned(vec![openai_stream_cached("ok", &[], None, 100)]);
    let turn = ask(provider(Kind::Openai, &server, true).as_mut()).unwrap();
    assert_eq!(
        turn.usage,
        Some(Usage {
            input_tokens: 120,
            output_tokens: 30,
            cached_tokens: 100,
            cache_write_tokens: 0,
        })
    );
    let server = Server::canned(vec![anthropic_stream_cached("ok", &[], None, (700, 30))]);
    let turn = ask(provider(Kind::Anthropic, &server, true).as_mut()).unwrap();
    assert_eq!(
        turn.usage,
        Some(Usage {
            input_tokens: 930,
            output_tokens: 42,
            cached_tokens: 700,
            cache_write_tokens: 30,
        })
    );
    // Recorded as the model_turn's usage, zero counts left out.
    assert_eq!(
        serde_json::to_value(turn.usage.unwrap()).unwrap(),
        json!({"input_tokens": 930, "output_tokens": 42, "cached_tokens": 700, "cache_write_tokens": 30})
    );
    assert_eq!(
        serde_json::to_value(Usage {
            input_tokens: 1,
            output_tokens: 2,
            ..Usage::default()
        })
        .unwrap(),
        json!({"input_tokens": 1, "output_tokens": 2})
    );
}

#[test]
fn a_429_is_retried_after_the_retry_after_it_names() {
    for kind in [Kind::Openai, Kind::Anthropic] {
        let ok = match kind {
            Kind::Openai => openai_stream("done", &[], None),
            Kind::Anthropic => anthropic_stream("done", &[], None),
        };
        let server = Server::canned(vec![
            response(
                429,
                &[("retry-after", "1"), ("content-type", "application/json")],
                r#"{"error":{"message":"rate limited","type":"rate_limit_error"}}"#,
            ),
            ok,
        ]);
        let mut p = provider(kind, &server, true);
        let started = Instant::now();
        let turn = ask(p.as_mut()).unwrap();
        assert_eq!(turn.text, "done");
        assert!(turn.tool_calls.is_empty());
        assert!(
            started.elapsed() >= Duration::from_millis(950),
            "retry-after ignored: {:?}",
            started.elapsed()
        );
        assert_eq!(server.seen().len(), 2);
    }
}

#[test]
fn a_500_is_retried_up_to_the_limit_then_reported() {
    let server = Server::start(|_, _| response(500, &[], r#"{"error":{"message":"overloaded"}}"#));
    let mut p = provider(Kind::Openai, &server, true);
    let err = ask(p.as_mut()).unwrap_err();
    assert_eq!(
        err,
        ProviderError::Retries {
            attempts: 3,
            last: "the provider answered 500: overloaded".into()
        }
    );
    assert_eq!(
        server.seen().len(),
        3,
        "one attempt and retries_max = 2 retries"
    );
    // A 500 then success recovers.
    let server = Server::canned(vec![
        response(503, &[], "busy"),
        openai_stream("ok", &[], None),
    ]);
    let mut p = provider(Kind::Openai, &server, true);
    assert_eq!(ask(p.as_mut()).unwrap().text, "ok");
}

#[test]
fn malformed_answers_are_clear_errors() {
    let server = Server::canned(vec![response(
        200,
        &[("content-type", "application/json")],
        "{\"choices\": [",
    )]);
    let mut p = provider(Kind::Openai, &server, false);
    assert!(
        matches!(ask(p.as_mut()).unwrap_err(), ProviderError::Malformed(m) if m.contains("EOF"))
    );
    let server = Server::canned(vec![json(200, &json!({"choices": []}))]);
    let mut p = provider(Kind::Openai, &server, false);
    assert_eq!(
        ask(p.as_mut()).unwrap_err(),
        ProviderError::Malformed("no choices[0].message in the answer".into())
    );
    let server = Server::canned(vec![cairn_tests::http::sse("data: {not json}\n\n")]);
    let mut p = provider(Kind::Openai, &server, true);
    assert!(
        matches!(ask(p.as_mut()).unwrap_err(), ProviderError::Malformed(m) if m.starts_with("stream chunk is not JSON"))
    );
    let server = Server::canned(vec![json(200, &json!({"type": "message"}))]);
    let mut p = provider(Kind::Anthropic, &server, false);
    assert_eq!(
        ask(p.as_mut()).unwrap_err(),
        ProviderError::Malformed("no content array in the answer".into())
    );
}

#[test]
fn a_stream_cut_in_the_middle_is_an_error_not_a_short_turn() {
    let server = Server::canned(vec![openai_stream(
        "Looking at both.",
        &two_calls(),
        Some(8),
    )]);
    let mut p = provider(Kind::Openai, &server, true);
    let err = ask(p.as_mut()).unwrap_err();
    assert!(
        matches!(
            err,
            ProviderError::StreamCut(_) | ProviderError::Malformed(_)
        ),
        "{err}"
    );
    let server = Server::canned(vec![anthropic_stream(
        "Looking at both.",
        &two_calls(),
        Some(12),
    )]);
    let mut p = provider(Kind::Anthropic, &server, true);
    let err = ask(p.as_mut()).unwrap_err();
    assert!(
        matches!(&err, ProviderError::StreamCut(m) if m.starts_with("no message_stop")),
        "{err}"
    );
}

#[test]
fn auth_and_not_found_errors_say_what_to_check_and_never_show_the_key() {
    // The server echoes the key, as real APIs partly do.
    let echo = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}. Also {}...{}","type":"invalid_request_error"}}}}"#,
        &KEY[..8],
        &KEY[KEY.len() - 8..]
    );
    for kind in [Kind::Openai, Kind::Anthropic] {
        let server = Server::canned(vec![response(
            401,
            &[("content-type", "application/json")],
            &echo,
        )]);
        let mut p = provider(kind, &server, true);
        let err = ask(p.as_mut()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("authentication failed (401): Incorrect API key provided: [REDACTED"),
            "{text}"
        );
        assert!(
            matches!(&err, ProviderError::Auth { key_var, .. } if key_var.contains("CAIRN_API_KEY")),
            "{err:?}"
        );
        assert!(
            !text.contains(KEY)
                && !text.contains(&KEY[..8])
                && !text.contains(&KEY[KEY.len() - 8..]),
            "{text}"
        );
        assert_eq!(server.seen().len(), 1, "401 is not retried");
    }
    let server = Server::canned(vec![response(
        404,
        &[],
        r#"{"error":{"message":"The model `m-1` does not exist"}}"#,
    )]);
    let mut p = provider(Kind::Openai, &server, true);
    let text = ask(p.as_mut()).unwrap_err().to_string();
    assert_eq!(
        text,
        format!(
            "not found (404) at {}/v1/chat/completions: The model `m-1` does not exist",
            server.url
        )
    );
}

#[test]
fn configuration_comes_from_flags_then_cairn_variables_then_the_usual_ones() {
    let env = |k: &str| match k {
        "CAIRN_MODEL" => Some("env-model".to_string()),
        "OPENAI_API_KEY" => Some("sk-openai-usual-key-0000000000".to_string()),
        _ => None,
    };
    let c = ProviderConfig::from_env(Kind::Openai, &Overrides::default(), env).unwrap();
    assert_eq!(
        (c.base_url.as_str(), c.model.as_str(), c.key_var.as_str()),
        ("https://api.openai.com/v1", "env-model", "OPENAI_API_KEY")
    );
    assert!(
        !format!("{c:?}").contains("usual-key"),
        "Debug shows the key"
    );
    let c = ProviderConfig::from_env(
        Kind::Openai,
        &Overrides {
            model: Some("flag".into()),
            base_url: Some("http://x/v1/".into()),
            ..Overrides::default()
        },
        env,
    )
    .unwrap();
    assert_eq!(
        (c.base_url.as_str(), c.model.as_str()),
        ("http://x/v1", "flag")
    );
    let err =
        ProviderConfig::from_env(Kind::Anthropic, &Overrides::default(), |_| None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no API key: set CAIRN_API_KEY or ANTHROPIC_API_KEY (Anthropic needs one)"
    );
    let err = ProviderConfig::from_env(Kind::Openai, &Overrides::default(), |_| None).unwrap_err();
    assert_eq!(err, ProviderError::NoModel);
}

/// What a provider reports while a turn is awaited: each failed attempt as it fails
/// (retry n of m, the wait, the reason, no key), then the streamed text in pieces that
/// add up to the turn's text; a whole (not streamed) answer reports no text.
#[test]
fn progress_reports_each_retry_then_the_streamed_text() {
    use cairn_engine::provider::Progress;
    use std::sync::{Arc, Mutex};
    for kind in [Kind::Openai, Kind::Anthropic] {
        for stream in [true, false] {
            let text = "Hello there, this is streamed in pieces.";
            let answer = match (kind, stream) {
                (Kind::Openai, true) => openai_stream(text, &[], None),
                (Kind::Anthropic, true) => anthropic_stream(text, &[], None),
                (Kind::Openai, false) => json(
                    200,
                    &json!({"choices": [{"message": {"role": "assistant", "content": text}}]}),
                ),
                (Kind::Anthropic, false) => json(
                    200,
                    &json!({"id": "msg_01", "type": "message", "role": "assistant", "model": "m-1",
                        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                        "stop_sequence": null, "usage": {"input_tokens": 8, "output_tokens": 7}}),
                ),
            };
            let busy = response(
                503,
                &[],
                &format!("{{\"error\":{{\"message\":\"busy {KEY}\"}}}}"),
            );
            let server = Server::canned(vec![busy, answer]);
            let mut p = provider(kind, &server, stream);
            let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
            let into = seen.clone();
            p.set_progress(Some(Arc::new(move |e: &Progress| {
                into.lock().unwrap().push(e.clone())
            })));
            let turn = ask(p.as_mut()).unwrap();
            assert_eq!(turn.text, text);
            let seen = seen.lock().unwrap().clone();
            assert_eq!(
                seen[0].to_string(),
                "retry 1 of 2 in 0.0 s: the provider answered 503: busy [REDACTED:api_key]",
                "{kind:?} {stream}"
            );
            let streamed: Vec<String> = seen[1..]
                .iter()
                .map(|e| match e {
                    Progress::Text(t) => t.clone(),
                    other => panic!("{other:?} after the retry"),
                })
                .collect();
            if stream {
                assert!(streamed.len() > 1, "{kind:?}: {streamed:?}");
                assert_eq!(streamed.concat(), text);
            } else {
                assert!(streamed.is_empty(), "{kind:?}: {streamed:?}");
            }
        }
    }
}

/// A give-up that says `why` once `after` has passed.
fn give_up_after(after: Duration, why: GiveUp) -> cairn_engine::provider::GiveUpFn {
    let t0 = Instant::now();
    let said = Arc::new(AtomicBool::new(false));
    Arc::new(move || {
        if t0.elapsed() >= after {
            said.store(true, Ordering::SeqCst);
        }
        said.load(Ordering::SeqCst).then(|| why.clone())
    })
}

/// Both providers give a turn up while it streams and the server pauses: the turn ends
/// at once with `Interrupted` and the text streamed so far, and the request's
/// connection is closed (the server sees it go).
#[test]
fn a_turn_given_up_mid_stream_keeps_its_text_and_closes_its_connection() {
    for kind in [Kind::Openai, Kind::Anthropic] {
        let closed: Arc<Mutex<Option<Instant>>> = Arc::default();
        let closed_at = closed.clone();
        let server = Server::streaming(move |_, _, stream| {
            let first = match kind {
                Kind::Openai => cairn_tests::http::openai_text_event("Thinking "),
                Kind::Anthropic => [
                    r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m-1","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}"#,
                    r#"event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                    r#"event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Thinking "}}"#,
                ]
                .map(|e| format!("{e}\n\n"))
                .concat(),
            };
            let _ = stream.write_all(cairn_tests::http::sse_head());
            let _ = stream.write_all(first.as_bytes());
            let _ = stream.flush();
            if cairn_tests::http::closed_by_client(stream, Duration::from_secs(30)) {
                *closed_at.lock().unwrap() = Some(Instant::now());
            }
        });
        let mut p = provider(kind, &server, true);
        let after = Duration::from_millis(300);
        p.set_give_up(Some(give_up_after(after, GiveUp::Interrupted)));
        let t0 = Instant::now();
        assert_eq!(
            ask(p.as_mut()),
            Err(ProviderError::Interrupted {
                text: "Thinking ".into()
            }),
            "{kind:?}"
        );
        let ended = Instant::now();
        assert!(ended - t0 < after + Duration::from_secs(1), "{kind:?}");
        let t1 = Instant::now();
        while closed.lock().unwrap().is_none() && t1.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let seen = closed
            .lock()
            .unwrap()
            .map(|at| at.saturating_duration_since(ended));
        assert!(
            seen.is_some_and(|d| d < Duration::from_secs(1)),
            "{kind:?}: the connection was not closed: {seen:?}"
        );
    }
}

/// A turn given up while it waits to retry (a 503 asking for 30 s) ends at once, with
/// the reason of the stop.
#[test]
fn a_turn_given_up_in_a_retry_wait_ends_at_once() {
    let server = Server::canned(vec![response(
        503,
        &[("retry-after", "30")],
        "{\"error\":{\"message\":\"busy\"}}",
    )]);
    let mut p = provider(Kind::Openai, &server, true);
    p.set_give_up(Some(give_up_after(
        Duration::from_millis(200),
        GiveUp::Stopped("signal: SIGTERM".into()),
    )));
    let t0 = Instant::now();
    assert_eq!(
        ask(p.as_mut()),
        Err(ProviderError::Stopped("signal: SIGTERM".into()))
    );
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(server.seen().len(), 1);
}
