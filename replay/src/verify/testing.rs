//! What the folds' tests share: a verifier over an empty blob store, records written
//! as they are logged, and the problems found.

use serde_json::Value;

use super::*;

/// A verifier of a session in `dir` (its blob store there, empty).
pub fn verifier(dir: &Path) -> Verifier {
    let blobs = BlobStore::open(dir).unwrap();
    Verifier::new(dir, blobs, &VerifyOptions::default())
}

/// Record `seq`: the event is written as it is logged.
pub fn rec(seq: u64, event: Value) -> Record {
    let event: Event = serde_json::from_value(event).unwrap();
    Record {
        seq,
        ts: "2025-01-02T03:04:05Z".into(),
        hash: Hash::of(seq.to_string().as_bytes()),
        event,
    }
}

/// `fold` over `records` as the verifier runs it: where each is, the fold, then the
/// engine's fold applies it.
pub fn run(v: &mut Verifier, fold: &mut dyn Fold, records: &[Record]) {
    for r in records {
        v.at = (r.seq, r.seq + 1, 100 * r.seq);
        fold.apply(v, r);
        v.state.apply(r);
    }
}

/// The problems found so far, as (seq, kind, what).
pub fn found(v: Verifier) -> Vec<(Option<u64>, ProblemKind, String)> {
    v.problems
        .into_sorted()
        .into_iter()
        .map(|p| (p.seq, p.kind, p.what))
        .collect()
}

/// `tool_started` of `call`, a `tool` with `input`.
pub fn started(seq: u64, call: &str, tool: &str, input: Value) -> Record {
    rec(
        seq,
        serde_json::json!({"type": "tool_started", "call": call, "tool": tool, "input": input}),
    )
}

/// `tool_finished` of `call` with `status` and `output`.
pub fn finished(seq: u64, call: &str, status: &str, output: &str) -> Record {
    rec(
        seq,
        serde_json::json!({"type": "tool_finished", "call": call, "status": status,
            "output": output, "elapsed_us": 1000}),
    )
}

/// Call `call` of `tool` with `input` pending, as the calls' fold leaves it.
pub fn pending(v: &mut Verifier, seq: u64, call: &str, tool: &str, input: Value) {
    let p = Pending::new(seq, tool, &input, None, None, 0);
    v.pending.insert(call.into(), p);
}
