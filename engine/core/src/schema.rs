//! The JSON Schema of a log line (`docs/event.schema.json`), generated from the event
//! types with `schemars`, so that it cannot drift from them: a test of the command line
//! (`cairn schema events`) compares the committed file with what this generates.

use cairn_store::Hash;

use crate::event::Event;

/// One line of `events.jsonl`: the store's envelope around one event.
#[derive(schemars::JsonSchema)]
#[schemars(
    title = "cairn log line",
    description = "One line of a session's events.jsonl (docs/FORMAT.md): the store's envelope (prev, seq, ts, hash) around one event. `hash` is BLAKE3 in derive-key mode over the line's bytes before `,\"hash\":\"`."
)]
#[allow(dead_code)] // Only its schema is used.
struct LogLine {
    /// The previous record's `hash`; 64 zeros for seq 0.
    prev: Hash,
    /// Counts from 0 with no gaps.
    seq: u64,
    /// UTC, RFC 3339 with microseconds.
    ts: String,
    event: Event,
    hash: Hash,
}

/// The schema of a log line, as `docs/event.schema.json` holds it (pretty-printed,
/// with a final newline).
pub fn log_line_schema() -> String {
    let schema = schemars::schema_for!(LogLine);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_knows_every_event_type() {
        let schema = log_line_schema();
        for kind in Event::KINDS {
            assert!(schema.contains(&format!("\"const\": \"{kind}\"")), "{kind}");
        }
    }
}
