//! The one redaction pass every record goes through before it is written: every string
//! of the event, whatever its field, is given to the [`Redactor`]. Callers that redact
//! on their own to count what they redacted (a call's input and output) find nothing
//! left here; this pass is what makes "no secret in the log" hold for every field,
//! including the ones added later.
//!
//! A command line is the one value replay would need raw to run again. Where redaction
//! changed a `shell_exec`'s argv, the record keeps a keyed hash of the raw argv
//! (HMAC-SHA256 under the project's [`SecretKey`]), so that two runs can be told to
//! have used the same secret or a different one without either being stored.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::event::Event;
use crate::redact::{Counts, Redactor};

/// Bytes of a [`SecretKey`].
pub const SECRET_KEY_BYTES: usize = 32;

/// The key of a project's keyed hashes. It is kept in the home (mode 0600), never in a
/// log; sessions of one project share it, so their hashes compare.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey(pub [u8; SECRET_KEY_BYTES]);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

/// The prefix of every keyed hash, naming its algorithm.
pub const KEYED_HASH_PREFIX: &str = "hmac-sha256:";

/// `hmac-sha256:<hex>` of `bytes` under `key`.
pub fn keyed_hash(key: &SecretKey, bytes: &[u8]) -> String {
    // HMAC takes a key of any length: this cannot fail.
    let mut mac = match <Hmac<Sha256> as Mac>::new_from_slice(&key.0) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    };
    mac.update(bytes);
    let tag = mac.finalize().into_bytes();
    let mut out = String::with_capacity(KEYED_HASH_PREFIX.len() + 2 * tag.len());
    out.push_str(KEYED_HASH_PREFIX);
    for b in tag {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The keyed hash of an argv: its JSON array, so that `["a b"]` and `["a", "b"]`
/// differ.
pub fn argv_hash(key: &SecretKey, argv: &[String]) -> String {
    let json = serde_json::to_vec(argv).unwrap_or_default();
    keyed_hash(key, &json)
}

/// The keyed hash of a text as given (a user message): a script's step is matched by it
/// with a message the log holds redacted.
pub fn text_hash(key: &SecretKey, text: &str) -> String {
    keyed_hash(key, text.as_bytes())
}

/// The keyed hash of a call's input as given: of its canonical JSON (the keys of every
/// object sorted), so that the same input hashes the same whatever its keys' order.
pub fn input_hash(key: &SecretKey, input: &serde_json::Value) -> String {
    let mut json = String::new();
    canonical_json(input, &mut json);
    keyed_hash(key, json.as_bytes())
}

/// `v` as JSON with the keys of every object in order.
fn canonical_json(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_json(&m[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Why an event could not be redacted: its redacted form is no longer a valid event
/// (a secret inside a field that must hold a hash or a name).
#[derive(Debug, thiserror::Error)]
#[error("a record could not be redacted without breaking it: {0}; nothing was written")]
pub struct ScrubError(String);

/// `event` with every string redacted, and what was redacted; `None` when it held no
/// secret (the event is written as it is). When a key is given, the strings a replay or
/// a resume compares keep a keyed hash of what they were: a `shell_exec`'s argv
/// (`argv_hash`), a user message's text (`text_hash`), a call's input (`input_hash`).
pub fn event(
    redactor: &Redactor,
    key: Option<&SecretKey>,
    event: &Event,
) -> Result<Option<(Event, Counts)>, ScrubError> {
    let value = serde_json::to_value(event).map_err(|e| ScrubError(e.to_string()))?;
    let mut counts = Counts::new();
    let redacted = redactor.redact_json(&value, &mut counts);
    if counts.is_empty() {
        return Ok(None);
    }
    let mut out: Event = serde_json::from_value(redacted).map_err(|e| ScrubError(e.to_string()))?;
    let Some(key) = key else {
        return Ok(Some((out, counts)));
    };
    match (event, &mut out) {
        (Event::ShellExec(raw), Event::ShellExec(x)) if raw.argv != x.argv => {
            x.argv_hash = Some(argv_hash(key, &raw.argv));
        }
        (
            Event::UserMessage { text, .. },
            Event::UserMessage {
                text: redacted,
                text_hash: hash,
                ..
            },
        ) if text != redacted => *hash = Some(text_hash(key, text)),
        (
            Event::ToolStarted { input, .. },
            Event::ToolStarted {
                input: redacted,
                input_hash: hash,
                ..
            },
        ) if input != redacted => *hash = Some(input_hash(key, input)),
        _ => {}
    }
    Ok(Some((out, counts)))
}

/// Any redaction marker (`[REDACTED:github_token]`, `[REDACTED:env:NAME]`).
static ANY_MARKER: std::sync::LazyLock<Option<regex::Regex>> =
    std::sync::LazyLock::new(|| regex::Regex::new(r"\[REDACTED:[^\]\n]{1,200}\]").ok());

/// The expression of any redaction marker (`None` only if it failed to compile).
pub fn marker_regex() -> Option<&'static regex::Regex> {
    ANY_MARKER.as_ref()
}

/// True when `text` holds a redaction marker: the value it stands for was a secret the
/// log does not keep.
pub fn holds_marker(text: &str) -> bool {
    marker_regex().is_some_and(|re| re.is_match(text))
}

/// True when some string inside `v` holds a redaction marker.
pub fn json_holds_marker(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::String(s) => holds_marker(s),
        serde_json::Value::Array(a) => a.iter().any(json_holds_marker),
        serde_json::Value::Object(m) => m.values().any(json_holds_marker),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ProcKind, ShellExec, ShellPhase};

    fn exec(argv: &[&str]) -> Event {
        Event::ShellExec(ShellExec {
            call: "c1".into(),
            id: None,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            argv_hash: None,
            cwd: String::new(),
            pid: Some(7),
            start_time: None,
            kind: ProcKind::Foreground,
            timeout_ms: Some(1000),
            log: None,
            sandbox: None,
            phase: ShellPhase::Started,
        })
    }

    fn token(c: char) -> String {
        format!("ghp_{}", c.to_string().repeat(36))
    }

    #[test]
    fn a_command_line_holding_a_secret_is_redacted_and_keeps_a_keyed_hash() {
        let key = SecretKey([7; SECRET_KEY_BYTES]);
        let r = Redactor::default();
        let line = format!("curl -H 'Authorization: token {}' x", token('a'));
        let (out, counts) = event(&r, Some(&key), &exec(&["sh", "-c", &line]))
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("the secret was not found"));
        assert_eq!(counts.get("github_token"), Some(&1));
        let Event::ShellExec(x) = &out else {
            panic!("not a shell_exec: {out:?}")
        };
        assert!(!x.argv.join(" ").contains(&token('a')), "{:?}", x.argv);
        assert!(x.argv[2].contains("[REDACTED:github_token]"));
        let hash = x.argv_hash.clone().unwrap_or_default();
        assert!(hash.starts_with(KEYED_HASH_PREFIX), "{hash}");
        assert_eq!(hash.len(), KEYED_HASH_PREFIX.len() + 64);
        // The same secret hashes the same; another secret, or another key, does not.
        let again =
            |line: &str, key: &SecretKey| match event(&r, Some(key), &exec(&["sh", "-c", line])) {
                Ok(Some((Event::ShellExec(x), _))) => x.argv_hash,
                other => panic!("{other:?}"),
            };
        assert_eq!(again(&line, &key), Some(hash.clone()));
        let other = format!("curl -H 'Authorization: token {}' x", token('b'));
        assert_ne!(again(&other, &key), Some(hash.clone()));
        assert_ne!(again(&line, &SecretKey([8; SECRET_KEY_BYTES])), Some(hash));
    }

    /// A user message and a call's input redacted keep the keyed hash of what they
    /// were: the same text (an input's keys in any order) hashes the same, another
    /// secret does not, and nothing is kept without a key or without a redaction.
    #[test]
    fn a_message_and_an_input_redacted_keep_their_keyed_hash() {
        let key = SecretKey([7; SECRET_KEY_BYTES]);
        let r = Redactor::default();
        let message = |t: &str| Event::UserMessage {
            at: None,
            text: format!("deploy with {t}"),
            text_hash: None,
        };
        let started = |input: serde_json::Value| Event::ToolStarted {
            at: None,
            call: "c1".into(),
            tool: "shell".into(),
            input,
            input_hash: None,
            mcp: None,
            observed: None,
        };
        let hashes = |e: &Event, key: Option<&SecretKey>| match event(&r, key, e) {
            Ok(Some((Event::UserMessage { text_hash, .. }, _))) => text_hash,
            Ok(Some((Event::ToolStarted { input_hash, .. }, _))) => input_hash,
            other => panic!("{other:?}"),
        };
        let (a, b) = (token('a'), token('b'));
        let text_hash = hashes(&message(&a), Some(&key));
        assert_eq!(
            text_hash,
            Some(super::text_hash(&key, &format!("deploy with {a}")))
        );
        assert_ne!(hashes(&message(&b), Some(&key)), text_hash);
        assert_eq!(hashes(&message(&a), None), None);
        let input = serde_json::json!({"command": format!("echo {a}"), "timeout_ms": 5});
        let reordered = serde_json::json!({"timeout_ms": 5, "command": format!("echo {a}")});
        let input_hash = hashes(&started(input.clone()), Some(&key));
        assert_eq!(input_hash, Some(super::input_hash(&key, &input)));
        assert_eq!(
            super::input_hash(&key, &reordered),
            super::input_hash(&key, &input)
        );
        let other = serde_json::json!({"command": format!("echo {b}"), "timeout_ms": 5});
        assert_ne!(hashes(&started(other), Some(&key)), input_hash);
        assert!(matches!(
            event(
                &r,
                Some(&key),
                &started(serde_json::json!({"command": "ls"}))
            ),
            Ok(None)
        ));
    }

    #[test]
    fn an_event_without_a_secret_is_left_alone() {
        let key = SecretKey([7; SECRET_KEY_BYTES]);
        let e = exec(&["git", "log", "--format=%H", "max_tokens=4096"]);
        assert!(matches!(
            event(&Redactor::default(), Some(&key), &e),
            Ok(None)
        ));
    }

    #[test]
    fn every_field_is_redacted_not_only_known_ones() {
        let r = Redactor::default();
        let e = Event::UserMessage {
            at: None,
            text: format!("use {} please", token('c')),
            text_hash: None,
        };
        let Ok(Some((Event::UserMessage { text, .. }, _))) = event(&r, None, &e) else {
            panic!("not redacted")
        };
        assert_eq!(text, "use [REDACTED:github_token] please");
        assert!(holds_marker(&text));
        assert!(json_holds_marker(&serde_json::json!({"a": [1, text]})));
        assert!(!json_holds_marker(
            &serde_json::json!({"a": [1, "REDACTED"]})
        ));
    }

    #[test]
    fn a_secret_inside_a_field_that_must_stay_a_hash_is_an_error_not_a_broken_record() {
        // An environment secret that happens to be part of a hash's hex: redacting it
        // would leave no hash; the record is refused rather than written broken or raw.
        let r = Redactor::with_env([("MY_TOKEN".to_string(), "0".repeat(12))]);
        let e = Event::Checkpoint {
            state_hash: cairn_store::Hash([0; 32]),
            at_seq: 3,
        };
        let err = event(&r, None, &e).map(|_| ()).unwrap_err().to_string();
        assert!(
            err.starts_with("a record could not be redacted without breaking it: "),
            "{err}"
        );
        assert!(err.ends_with("; nothing was written"), "{err}");
    }

    #[test]
    fn the_keyed_hash_matches_rfc_4231_case_2() {
        // RFC 4231 test case 2 with the key padded: HMAC-SHA256 itself is checked on
        // a key of our length against an independent computation in the next line.
        let mut key = [0u8; SECRET_KEY_BYTES];
        key[..4].copy_from_slice(b"Jefe");
        let got = keyed_hash(&SecretKey(key), b"what do ya want for nothing?");
        // HMAC pads a short key with zeros to the block size: "Jefe" and "Jefe\0…" are
        // the same key, so RFC 4231's expected tag applies.
        assert_eq!(
            got,
            "hmac-sha256:5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
