//! No record too large: an event whose JSON is longer than [`EVENT_INLINE_BYTES_MAX`]
//! has its largest fields moved into blobs, one at a time, until it is not. A moved
//! field leaves the event and is listed, with its blob, under the event's `spilled`
//! key:
//!
//! ```text
//! {"type":"user_message","spilled":{"text":{"hash":"<64 hex>","len":2000000,"as":"text"}}}
//! ```
//!
//! A string field's blob holds its text (`"as":"text"`), any other field's its compact
//! JSON (`"as":"json"`). Readers put the fields back before they parse the event
//! ([`load`]), so the fold sees exactly the event that was recorded; the engine folds
//! the event it appends, never the record read back.
//!
//! Only top-level fields move, and the list lives at the top level beside `type`: a
//! reader never mistakes a value that only looks like a reference (a tool input holding
//! `{"spilled": …}`, say) for one. No event has a field named `spilled`.
//!
//! The blobs are written (through the caller's `put`) before the record that names
//! them; the functions here do no I/O themselves.

use std::borrow::Cow;

use cairn_store::{BlobRef, Hash, RECORD_BYTES_MAX};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The longest event JSON a record holds inline, in bytes: a longer event has its
/// largest fields moved into blobs until it is at most this long. Far enough under the
/// store's `RECORD_BYTES_MAX` (the envelope adds under 256 bytes) that no record is
/// ever refused for its size.
pub const EVENT_INLINE_BYTES_MAX: usize = 256 * 1024;

const _: () = assert!(EVENT_INLINE_BYTES_MAX + 4096 <= RECORD_BYTES_MAX);

/// The event key listing the fields moved into blobs.
pub const SPILLED_KEY: &str = "spilled";

/// A field shorter than this (its JSON, in bytes) is never moved: its entry under
/// `spilled` would be about as long as the field.
const FIELD_SPILL_BYTES_MIN: usize = 256;

/// A field moved into a blob, as `spilled` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spilled {
    /// The blob's name: the plain BLAKE3 of its content.
    pub hash: Hash,
    /// The blob's length in bytes.
    pub len: u64,
    #[serde(rename = "as")]
    pub form: Form,
}

impl Spilled {
    /// The blob, as other events refer to blobs.
    pub fn blob(&self) -> BlobRef {
        BlobRef {
            hash: self.hash,
            len: self.len,
        }
    }
}

/// What a spilled field's blob holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// The field was a string: the blob is its text (UTF-8).
    Text,
    /// The field was another JSON value: the blob is its compact JSON.
    Json,
}

/// The event JSON `event` as a record holds it: unchanged when it is at most
/// `inline_bytes_max` bytes long, else with its largest fields (by the length of their
/// JSON; `type` never) moved one at a time into blobs stored with `put`, until it
/// fits. Fields shorter than a `spilled` entry stay, so with an `inline_bytes_max` far
/// below a few kilobytes the result may still be longer: the store's record limit is
/// the last word.
///
/// `event` must be one JSON object without a `spilled` key (every [`crate::Event`]
/// serialises so).
pub fn spill<E>(
    event: &str,
    inline_bytes_max: usize,
    mut put: impl FnMut(&[u8]) -> Result<BlobRef, E>,
) -> Result<Cow<'_, str>, E> {
    if event.len() <= inline_bytes_max {
        return Ok(Cow::Borrowed(event));
    }
    let mut fields: Map<String, Value> = match serde_json::from_str(event) {
        Ok(Value::Object(m)) => m,
        // The recorder serialises an `Event`: always one object.
        _ => panic!("an event to spill is not a JSON object"),
    };
    assert!(
        !fields.contains_key(SPILLED_KEY),
        "an event has a field named `{SPILLED_KEY}`, which is reserved"
    );
    let mut spilled = Map::new();
    let mut len = event.len();
    while len > inline_bytes_max {
        let mut largest: Option<(&str, usize)> = None;
        for (k, v) in &fields {
            let n = json_len(v);
            if k != "type" && largest.is_none_or(|(_, m)| n > m) {
                largest = Some((k, n));
            }
        }
        let Some((key, n)) = largest.filter(|(_, n)| *n >= FIELD_SPILL_BYTES_MIN) else {
            break;
        };
        let key = key.to_string();
        let Some(value) = fields.shift_remove(&key) else {
            unreachable!("the field was just found")
        };
        let (bytes, form) = match value {
            Value::String(s) => (s.into_bytes(), Form::Text),
            v => (v.to_string().into_bytes(), Form::Json),
        };
        debug_assert!(form == Form::Text || bytes.len() == n);
        let blob = put(&bytes)?;
        debug_assert_eq!(blob.len, bytes.len() as u64);
        let entry = Spilled {
            hash: blob.hash,
            len: blob.len,
            form,
        };
        spilled.insert(key, to_value(&entry));
        // `{…fields…,"spilled":{…}}`: `type` stays, so a comma separates them.
        len = json_len(&fields) + ",\"spilled\":".len() + json_len(&spilled);
    }
    if spilled.is_empty() {
        return Ok(Cow::Borrowed(event));
    }
    fields.insert(SPILLED_KEY.to_string(), Value::Object(spilled));
    let out = Value::Object(fields).to_string();
    debug_assert_eq!(out.len(), len);
    Ok(Cow::Owned(out))
}

/// The fields of the event JSON `event` that were moved into blobs, in the order they
/// were moved; empty for an event held whole. An error says what is wrong with the
/// `spilled` list.
pub fn spilled(event: &str) -> Result<Vec<(String, Spilled)>, String> {
    if !may_have_spilled(event) {
        return Ok(Vec::new());
    }
    let fields: Map<String, Value> =
        serde_json::from_str(event).map_err(|e| format!("event is not a JSON object: {e}"))?;
    list(&fields)
}

/// The event JSON `event` with its spilled fields put back, each read with `get` and
/// checked against its entry (length, hash, form); `None` when nothing was spilled,
/// which is the event as it is. An error names the field and what is wrong.
pub fn load(
    event: &str,
    mut get: impl FnMut(&BlobRef) -> Result<Vec<u8>, String>,
) -> Result<Option<Value>, String> {
    if !may_have_spilled(event) {
        return Ok(None);
    }
    let mut fields: Map<String, Value> =
        serde_json::from_str(event).map_err(|e| format!("event is not a JSON object: {e}"))?;
    let list = list(&fields)?;
    if list.is_empty() {
        return Ok(None);
    }
    fields.shift_remove(SPILLED_KEY);
    for (name, s) in list {
        let field = |what: String| format!("spilled field `{name}`: {what}");
        if name == "type" {
            return Err(field("the type of an event is never spilled".into()));
        }
        if fields.contains_key(&name) {
            return Err(field("the event also holds it inline".into()));
        }
        let bytes = get(&s.blob()).map_err(field)?;
        if bytes.len() as u64 != s.len {
            return Err(field(format!(
                "blob {} is {} bytes, the record says {}",
                s.hash.short(12),
                bytes.len(),
                s.len
            )));
        }
        let actual = Hash::of(&bytes);
        if actual != s.hash {
            return Err(field(format!(
                "blob {} is damaged: its content hashes to {actual}",
                s.hash
            )));
        }
        let value =
            match s.form {
                Form::Text => Value::String(String::from_utf8(bytes).map_err(|e| {
                    field(format!("blob {} is not UTF-8 text: {e}", s.hash.short(12)))
                })?),
                Form::Json => serde_json::from_slice(&bytes)
                    .map_err(|e| field(format!("blob {} is not JSON: {e}", s.hash.short(12))))?,
            };
        fields.insert(name, value);
    }
    Ok(Some(Value::Object(fields)))
}

/// A quick test on the text: `"spilled":` outside a string is a key (a `"` inside a
/// string is escaped). A nested key of that name passes it, and [`list`] rules it out.
fn may_have_spilled(event: &str) -> bool {
    event.contains("\"spilled\":")
}

fn list(fields: &Map<String, Value>) -> Result<Vec<(String, Spilled)>, String> {
    let Some(v) = fields.get(SPILLED_KEY) else {
        return Ok(Vec::new());
    };
    let bad = |what: String| format!("`{SPILLED_KEY}` is not {{field: {{hash, len, as}}}}: {what}");
    let Value::Object(m) = v else {
        return Err(bad("not an object".into()));
    };
    m.iter()
        .map(|(k, v)| {
            Spilled::deserialize(v)
                .map(|s| (k.clone(), s))
                .map_err(|e| bad(format!("`{k}`: {e}")))
        })
        .collect()
}

/// The length of `v`'s compact JSON, counted as it is written (no text is made).
pub fn json_len(v: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    match serde_json::to_writer(&mut c, v) {
        Ok(()) => c.0,
        // JSON values always serialise (their keys are strings, their numbers finite).
        Err(e) => panic!("a JSON value does not serialise: {e}"),
    }
}

fn to_value(s: &Spilled) -> Value {
    match serde_json::to_value(s) {
        Ok(v) => v,
        Err(e) => panic!("a spilled entry does not serialise: {e}"),
    }
}

#[cfg(test)]
mod tests;
