//! Synthetic but realistic session events: what a coding agent's log holds between
//! tool calls (`tool_started`, `file_read`, `shell_exec`, `file_write`, `tool_finished`,
//! `model_turn`, `permission_decided`), each 200–800 bytes of compact JSON.
//!
//! Deterministic (a seeded generator, no clock in the events), so two runs write logs of
//! the same shape; only the envelope's `ts` differs.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use cairn_store::{Durability, LogWriter, Options, log_path};
use serde_json::{Value, json};

/// Smallest and largest event, in bytes of compact JSON.
pub const EVENT_BYTES_MIN: usize = 200;
pub const EVENT_BYTES_MAX: usize = 800;

/// splitmix64: small, fast and good enough to vary sizes and names.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next_u64() % items.len() as u64) as usize]
    }

    fn hex(&mut self) -> String {
        let mut bytes = [0u8; 32];
        for chunk in bytes.chunks_mut(8) {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        blake3::Hash::from_bytes(bytes).to_hex().to_string()
    }
}

const PATHS: &[&str] = &[
    "src/main.rs",
    "src/lib.rs",
    "store/src/log.rs",
    "store/src/reader.rs",
    "store/src/verify.rs",
    "engine/src/fold.rs",
    "engine/src/tools/shell.rs",
    "engine/src/tools/read.rs",
    "engine/src/policy/allow.rs",
    "replay/src/diff.rs",
    "cli/src/commands/verify.rs",
    "tests/crash/torn_tail.rs",
    "docs/FORMAT.md",
    "README.md",
    "Cargo.toml",
    "web/src/components/SessionView.tsx",
    "scripts/release.sh",
];

const TOOLS: &[&str] = &["read", "search", "edit", "shell", "fetch", "list", "write"];

const ARGVS: &[&[&str]] = &[
    &["cargo", "test", "-p", "cairn-store"],
    &["cargo", "clippy", "--all-targets", "--", "-D", "warnings"],
    &["git", "status", "--porcelain"],
    &["git", "diff", "--stat"],
    &["rg", "-n", "fn append", "store/src"],
    &["ls", "-la", "engine/src/tools"],
    &["npm", "run", "build"],
];

const MODELS: &[&str] = &["claude-sonnet-4-5", "gpt-5-codex", "qwen3-coder-30b"];

/// Code and tool output as they appear in events; no `"` or `\` so that the size of
/// the JSON is easy to control (newlines are counted as their two-byte escape).
const CORPUS: &str = "fn append(&mut self, event: &Event) -> Result<Appended> {
    let line = encode(&self.prev, self.next_seq, ts, event)?;
    self.file.write_all(&line)?;
}
running 42 tests
test log::tests::torn_tail_is_quarantined ... ok
test reader::tests::records_stream_in_bounded_memory ... ok
test verify::tests::every_problem_is_reported ... ok
test result: ok. 42 passed; 0 failed; 0 ignored; finished in 0.31s
warning: unused variable: `len` --> store/src/log.rs:211:13
   Compiling cairn-engine v0.1.0 (/work/main/engine)
    Finished `release` profile [optimized + debuginfo] target(s) in 41.07s
 M store/src/log.rs
?? bench/RESULTS.md
error[E0308]: mismatched types: expected `u64`, found `usize`
The fold is pure: no clock, no I/O, no randomness; times and ids come from records.
impl State { pub fn apply(&mut self, record: &Record) { match record.event { } } }
";

/// Up to `budget` bytes of JSON string content taken from the corpus at `start`.
fn filler(start: usize, budget: usize) -> String {
    let corpus = CORPUS.as_bytes();
    let mut out = String::with_capacity(budget);
    let mut used = 0;
    let mut i = start % corpus.len();
    while used < budget {
        let b = corpus[i];
        let cost = if b == b'\n' { 2 } else { 1 };
        if used + cost > budget {
            out.push(' ');
            used += 1;
        } else {
            out.push(char::from(b));
            used += cost;
        }
        i = (i + 1) % corpus.len();
    }
    out
}

/// A stream of events shaped like a coding session: calls that start, do their work
/// (read, shell, write) and finish, with model turns and permission decisions between.
#[derive(Debug)]
pub struct EventGen {
    rng: Rng,
    call: u64,
    open_call: Option<(u64, &'static str)>,
}

impl EventGen {
    pub fn new(seed: u64) -> EventGen {
        EventGen {
            rng: Rng::new(seed),
            call: 0,
            open_call: None,
        }
    }

    /// The next event, serialised to compact JSON of 200–800 bytes.
    pub fn next_json(&mut self) -> Result<String> {
        let target = self
            .rng
            .range(EVENT_BYTES_MIN as u64, EVENT_BYTES_MAX as u64) as usize;
        let (mut event, field) = self.next_event();
        let bare = serde_json::to_string(&event)?.len();
        let start = self.rng.next_u64() as usize;
        if let Some(slot) = event.get_mut(field) {
            *slot = Value::String(filler(start, target.saturating_sub(bare)));
        }
        Ok(serde_json::to_string(&event)?)
    }

    /// An event with an empty string in the field returned beside it, to be filled up
    /// to the wanted size.
    fn next_event(&mut self) -> (Value, &'static str) {
        match self.open_call.take() {
            None => self.between_calls(),
            Some((call, tool)) => self.in_call(call, tool),
        }
    }

    /// No call is open: a model turn, a permission answer, or a call started.
    fn between_calls(&mut self) -> (Value, &'static str) {
        let r = &mut self.rng;
        let n = r.range(0, 9);
        if n == 0 {
            let model = *r.pick(MODELS);
            let event = json!({
                "type": "model_turn",
                "provider": "anthropic",
                "model": model,
                "text": "",
                "tool_calls": 1,
                "usage": {"input_tokens": r.range(2_000, 90_000), "output_tokens": r.range(20, 900)},
            });
            return (event, "text");
        }
        if n == 1 {
            let key = format!("shell:{}", r.pick(ARGVS)[0]);
            let answer = *r.pick(&["once", "always", "deny"]);
            let event = json!({
                "type": "permission_decided",
                "key": key,
                "answer": answer,
                "source": "user",
                "reason": "",
            });
            return (event, "reason");
        }
        self.call += 1;
        let tool = *r.pick(TOOLS);
        let call_id = format!("call_{:08}", self.call);
        let input = match tool {
            "shell" => json!({"argv": r.pick(ARGVS), "timeout_ms": 120_000}),
            "search" => json!({"pattern": "fn (append|sync)", "path": r.pick(PATHS)}),
            "fetch" => json!({"url": "https://docs.rs/blake3/latest/blake3/"}),
            _ => json!({"path": r.pick(PATHS), "offset": r.range(1, 400), "limit": 200}),
        };
        self.open_call = Some((self.call, tool));
        let event = json!({
            "type": "tool_started",
            "call_id": call_id,
            "tool": tool,
            "input": input,
            "note": "",
        });
        (event, "note")
    }

    /// Call `call` of `tool` is open: the work of the call, then (on the next event)
    /// its end.
    fn in_call(&mut self, call: u64, tool: &'static str) -> (Value, &'static str) {
        let r = &mut self.rng;
        let call_id = format!("call_{call:08}");
        let work = r.range(0, 2) != 0;
        if work && matches!(tool, "read" | "list" | "search") {
            let first = r.range(1, 400);
            let event = json!({
                "type": "file_read",
                "call_id": call_id,
                "path": r.pick(PATHS),
                "ranges": [[first, first + r.range(10, 200)]],
                "total_lines": r.range(400, 3_000),
                "content_hash": r.hex(),
                "excerpt": "",
            });
            self.open_call = Some((call, "done"));
            return (event, "excerpt");
        }
        if work && tool == "shell" {
            let elapsed = r.range(5, 60_000);
            let event = json!({
                "type": "shell_exec",
                "call_id": call_id,
                "argv": r.pick(ARGVS),
                "cwd": "/home/dev/cairn",
                "pid": r.range(1_000, 60_000),
                "kind": "foreground",
                "phase": "finished",
                "status": "ok",
                "exit_code": 0,
                "elapsed_ms": elapsed,
                "output_blobs": {"stdout": {"hash": r.hex(), "bytes": r.range(100, 90_000)}},
                "stderr_head": "",
            });
            self.open_call = Some((call, "done"));
            return (event, "stderr_head");
        }
        if work && matches!(tool, "edit" | "write") {
            let event = json!({
                "type": "file_write",
                "call_id": call_id,
                "operation": tool,
                "path": r.pick(PATHS),
                "before": {"hash": r.hex(), "bytes": r.range(100, 40_000)},
                "after": {"hash": r.hex(), "bytes": r.range(100, 40_000)},
                "status": "ok",
                "diff_head": "",
            });
            self.open_call = Some((call, "done"));
            return (event, "diff_head");
        }
        let status = if r.range(0, 19) == 0 { "error" } else { "ok" };
        let event = json!({
            "type": "tool_finished",
            "call_id": call_id,
            "status": status,
            "elapsed_ms": r.range(1, 30_000),
            "output_blob": null,
            "output": "",
        });
        (event, "output")
    }
}

/// What writing a log cost.
#[derive(Debug, Clone, Copy)]
pub struct Written {
    pub records: u64,
    pub bytes: u64,
    pub elapsed: Duration,
}

/// Writes a new log of at least `bytes` bytes into session directory `dir` with
/// durability `none`, then syncs it once so that later timings start from a log at rest.
pub fn write_log(dir: &Path, bytes: u64, seed: u64) -> Result<Written> {
    let started = Instant::now();
    let options = Options {
        durability: Durability::None,
        ..Options::default()
    };
    let mut log = LogWriter::create(dir, options)
        .with_context(|| format!("creating a log in {}", dir.display()))?;
    let mut events = EventGen::new(seed);
    let mut records = 0u64;
    while log.len_bytes() < bytes {
        let event = serde_json::value::RawValue::from_string(events.next_json()?)?;
        log.append(&event)?;
        records += 1;
    }
    let len = log.len_bytes();
    log.close()?;
    let path = log_path(dir);
    std::fs::File::open(&path)
        .and_then(|f| f.sync_all())
        .with_context(|| format!("syncing {}", path.display()))?;
    Ok(Written {
        records,
        bytes: len,
        elapsed: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_json_objects_of_200_to_800_bytes_with_a_type() {
        let mut events = EventGen::new(7);
        let mut kinds = std::collections::BTreeSet::new();
        for _ in 0..5_000 {
            let text = events.next_json().unwrap();
            assert!(
                (EVENT_BYTES_MIN..=EVENT_BYTES_MAX).contains(&text.len()),
                "{} bytes: {text}",
                text.len()
            );
            let v: Value = serde_json::from_str(&text).unwrap();
            kinds.insert(v["type"].as_str().unwrap().to_string());
        }
        let expected = [
            "file_read",
            "file_write",
            "model_turn",
            "permission_decided",
            "shell_exec",
            "tool_finished",
            "tool_started",
        ];
        assert_eq!(kinds.into_iter().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn a_written_log_verifies_clean() {
        let dir = tempfile::tempdir().unwrap();
        let w = write_log(dir.path(), 200_000, 1).unwrap();
        assert!(w.bytes >= 200_000);
        let report = cairn_store::verify_path(
            &log_path(dir.path()),
            &cairn_store::VerifyOptions::default(),
        )
        .unwrap();
        assert!(report.is_clean(), "{report:?}");
        assert_eq!(report.records, w.records);
    }
}
