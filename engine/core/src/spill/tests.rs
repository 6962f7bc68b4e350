//! Spilling at and past the limit, which fields move, and loading them back exactly or
//! saying what is wrong.

use std::collections::HashMap;

use super::*;
use crate::event::Event;

/// Blobs in memory, as the recorder's store would hold them.
#[derive(Default)]
struct Blobs(HashMap<Hash, Vec<u8>>);

impl Blobs {
    fn put(&mut self, bytes: &[u8]) -> Result<BlobRef, String> {
        let hash = Hash::of(bytes);
        self.0.insert(hash, bytes.to_vec());
        Ok(BlobRef {
            hash,
            len: bytes.len() as u64,
        })
    }

    fn get(&self, blob: &BlobRef) -> Result<Vec<u8>, String> {
        self.0
            .get(&blob.hash)
            .cloned()
            .ok_or_else(|| format!("blob {} is missing", blob.hash.short(12)))
    }
}

fn json(e: &Event) -> String {
    serde_json::to_string(e).unwrap()
}

/// Spills `event` at `max`, loads it back, and checks the round trip; returns the
/// record's event text and the blobs.
fn spill_and_load(event: &Event, max: usize) -> (String, Blobs) {
    let text = json(event);
    let mut blobs = Blobs::default();
    let out = spill(&text, max, |b| blobs.put(b)).unwrap().into_owned();
    let back = match load(&out, |b| blobs.get(b)).unwrap() {
        Some(v) => serde_json::from_value::<Event>(v).unwrap(),
        None => serde_json::from_str::<Event>(&out).unwrap(),
    };
    assert_eq!(&back, event, "the event read back is the event spilled");
    (out, blobs)
}

fn entry(bytes: &[u8], form: &str) -> String {
    format!(
        r#"{{"hash":"{}","len":{},"as":"{form}"}}"#,
        Hash::of(bytes).to_hex(),
        bytes.len()
    )
}

/// `{"type":"user_message","text":"…"}` is 33 bytes around its text.
fn user_message_of_json_bytes(n: usize) -> Event {
    Event::UserMessage {
        at: None,
        text: "x".repeat(n - 33),
        text_hash: None,
    }
}

#[test]
fn an_event_at_the_limit_stays_whole_and_one_byte_past_it_spills() {
    let at = user_message_of_json_bytes(1000);
    assert_eq!(json(&at).len(), 1000);
    let (out, blobs) = spill_and_load(&at, 1000);
    assert_eq!(out, json(&at));
    assert!(blobs.0.is_empty());

    let past = user_message_of_json_bytes(1001);
    let (out, blobs) = spill_and_load(&past, 1000);
    let text = "x".repeat(1001 - 33);
    assert_eq!(
        out,
        format!(
            r#"{{"type":"user_message","spilled":{{"text":{}}}}}"#,
            entry(text.as_bytes(), "text")
        )
    );
    assert_eq!(blobs.0.len(), 1);
    assert_eq!(spilled(&out).unwrap()[0].0, "text");
}

#[test]
fn the_default_limit_is_exact_too() {
    let at = user_message_of_json_bytes(EVENT_INLINE_BYTES_MAX);
    assert_eq!(spill_and_load(&at, EVENT_INLINE_BYTES_MAX).1.0.len(), 0);
    let past = user_message_of_json_bytes(EVENT_INLINE_BYTES_MAX + 1);
    assert_eq!(spill_and_load(&past, EVENT_INLINE_BYTES_MAX).1.0.len(), 1);
}

fn turn(text_bytes: usize, input_bytes: usize) -> Event {
    Event::ModelTurn {
        at: None,
        provider: "openai".into(),
        model: "m-1".into(),
        text: "t".repeat(text_bytes),
        tool_calls: vec![serde_json::json!({
            "id": "call_1",
            "name": "write_file",
            "input": {"path": "a.txt", "content": "\"\u{1}".repeat(input_bytes / 8)},
        })],
        usage: Some(serde_json::json!({"input_tokens": 10, "output_tokens": 2})),
        interrupted: false,
    }
}

#[test]
fn the_largest_field_moves_first_and_only_what_is_needed() {
    // tool_calls (~8,000 bytes of JSON: quotes and controls are escaped) is the
    // largest; once it is out the event fits, so the text stays.
    let e = turn(2_000, 8_000);
    let (out, _) = spill_and_load(&e, 3_000);
    let calls = serde_json::to_string(&serde_json::json!([{
        "id": "call_1",
        "name": "write_file",
        "input": {"path": "a.txt", "content": "\"\u{1}".repeat(1_000)},
    }]))
    .unwrap();
    assert_eq!(
        out,
        format!(
            r#"{{"type":"model_turn","provider":"openai","model":"m-1","text":"{}","usage":{{"input_tokens":10,"output_tokens":2}},"spilled":{{"tool_calls":{}}}}}"#,
            "t".repeat(2_000),
            entry(calls.as_bytes(), "json")
        )
    );
    // Past both: the text goes too, after the calls.
    let (out, _) = spill_and_load(&e, 1_000);
    let names: Vec<String> = spilled(&out).unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(names, ["tool_calls", "text"]);
    assert!(out.len() <= 1_000, "{}", out.len());
}

#[test]
fn fields_shorter_than_an_entry_stay_even_past_a_tiny_limit() {
    // `"…"`: a text of n - 2 bytes is a field of n bytes of JSON.
    let text = |n: usize| Event::UserMessage {
        at: None,
        text: "h".repeat(n - 2),
        text_hash: None,
    };
    let at = text(FIELD_SPILL_BYTES_MIN);
    let (out, blobs) = spill_and_load(&at, 10);
    assert_eq!(spilled(&out).unwrap().len(), 1);
    assert_eq!(blobs.0.len(), 1);
    let under = text(FIELD_SPILL_BYTES_MIN - 1);
    let (out, blobs) = spill_and_load(&under, 10);
    assert_eq!(out, json(&under));
    assert!(blobs.0.is_empty());
}

#[test]
fn a_spilled_key_inside_a_field_is_data_not_a_reference() {
    let e = Event::ToolStarted {
        at: None,
        call: "c1".into(),
        tool: "x".into(),
        input: serde_json::json!({"spilled": {"text": {"hash": Hash::ZERO, "len": 1, "as": "text"}}}),
        input_hash: None,
        mcp: None,
        observed: None,
    };
    let text = json(&e);
    assert_eq!(spilled(&text).unwrap(), []);
    assert_eq!(load(&text, |_| Err("read nothing".into())).unwrap(), None);
}

#[test]
fn loading_says_what_is_wrong_with_a_spilled_field() {
    let text = "y".repeat(600);
    let good = entry(text.as_bytes(), "text");
    let mut blobs = Blobs::default();
    blobs.put(text.as_bytes()).unwrap();
    let h = Hash::of(text.as_bytes());
    let short = h.short(12);
    let check = |event: String, blobs: &Blobs, expected: &str| {
        assert_eq!(
            load(&event, |b| blobs.get(b)).unwrap_err(),
            expected,
            "{event}"
        );
    };
    let um = |spilled: &str| format!(r#"{{"type":"user_message","spilled":{spilled}}}"#);
    check(
        um(&format!(r#"{{"text":{good}}}"#)),
        &Blobs::default(),
        &format!("spilled field `text`: blob {short} is missing"),
    );
    check(
        format!(r#"{{"type":"user_message","text":"z","spilled":{{"text":{good}}}}}"#),
        &blobs,
        "spilled field `text`: the event also holds it inline",
    );
    check(
        um(&format!(r#"{{"type":{good}}}"#)),
        &blobs,
        "spilled field `type`: the type of an event is never spilled",
    );
    check(
        um(&format!(
            r#"{{"text":{{"hash":"{}","len":5,"as":"text"}}}}"#,
            h.to_hex()
        )),
        &blobs,
        &format!("spilled field `text`: blob {short} is 600 bytes, the record says 5"),
    );
    check(
        um(&format!(r#"{{"text":{}}}"#, entry(text.as_bytes(), "json"))),
        &blobs,
        &format!(
            "spilled field `text`: blob {short} is not JSON: expected value at line 1 column 1"
        ),
    );
    check(
        um("[]"),
        &blobs,
        "`spilled` is not {field: {hash, len, as}}: not an object",
    );
    check(
        um(&format!(
            r#"{{"text":{{"hash":"{}","len":600}}}}"#,
            h.to_hex()
        )),
        &blobs,
        "`spilled` is not {field: {hash, len, as}}: `text`: missing field `as`",
    );
    // A blob whose content is not what its name says.
    let mut damaged = Blobs::default();
    damaged.0.insert(h, "z".repeat(600).into_bytes());
    check(
        um(&format!(r#"{{"text":{good}}}"#)),
        &damaged,
        &format!(
            "spilled field `text`: blob {} is damaged: its content hashes to {}",
            h,
            Hash::of("z".repeat(600).as_bytes())
        ),
    );
    // Bytes that are not UTF-8, for a text field.
    let bad = [0xffu8; 300];
    let mut odd = Blobs::default();
    odd.put(&bad).unwrap();
    check(
        um(&format!(r#"{{"text":{}}}"#, entry(&bad, "text"))),
        &odd,
        &format!(
            "spilled field `text`: blob {} is not UTF-8 text: invalid utf-8 sequence of 1 bytes from index 0",
            Hash::of(&bad).short(12)
        ),
    );
}
