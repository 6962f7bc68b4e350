//! Batch durability is a group commit: a call that only reads is made durable within
//! the commit window, but the records announcing an action that cannot be taken back (a
//! command run) are on the disk before it starts. The log's syncs are traced (the store's
//! `CAIRN_SYNC_TRACE`) into the same file the commands write to, so the file's order is
//! the order in which syncs returned and commands ran.

use std::path::Path;
use std::process::Command;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The byte offset just past the first record of the log at `log` whose event has
/// `type` and `field` equal to `value`.
fn end_of(log: &Path, kind: &str, field: &str, value: &str) -> u64 {
    let bytes = std::fs::read(log).unwrap();
    let mut offset = 0u64;
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        offset += line.len() as u64;
        let record: serde_json::Value = serde_json::from_slice(line).unwrap();
        let e = &record["event"];
        if e["type"] == kind && e[field] == value {
            return offset;
        }
    }
    panic!("no {kind} with {field} {value} in {}", log.display());
}

#[test]
fn a_command_runs_only_once_the_records_announcing_it_are_durable() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let traced = tempfile::tempdir().unwrap();
    let trace = traced.path().join("trace");
    std::fs::write(ws.path().join("a.txt"), "one\ntwo\n").unwrap();
    let t = trace.to_str().unwrap();
    let mut script = String::from("{\"user\":\"go\"}\n");
    // Reads between the commands leave records that only a commit covers.
    for n in 0..4 {
        script.push_str("{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n");
        script.push_str(&format!(
            "{{\"tool\":\"shell\",\"input\":{{\"command\":\"echo ran c{} >> {t}\"}}}}\n",
            2 * n + 2
        ));
    }
    script.push_str(
        "{\"tool\":\"write_file\",\"input\":{\"path\":\"b.txt\",\"content\":\"new\\n\"}}\n",
    );
    let script_path = ws.path().join("s.jsonl");
    std::fs::write(&script_path, script).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "run",
            "--script",
            script_path.to_str().unwrap(),
            "--workspace",
            ws.path().to_str().unwrap(),
            "--approve",
            "always",
            "--sandbox-write-root",
            traced.path().to_str().unwrap(),
        ])
        .env("CAIRN_HOME", home.path())
        .env("CAIRN_SYNC_TRACE", &trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let id = text(&out.stdout).trim().to_string();
    let log = walkdir(home.path())
        .into_iter()
        .find(|p| p.ends_with(Path::new(&id).join("events.jsonl")))
        .unwrap_or_else(|| panic!("no log of {id} under the home"));
    let log_name = log.display().to_string();

    let trace_text = std::fs::read_to_string(&trace).unwrap();
    let mut durable = 0u64;
    let mut ran = Vec::new();
    for line in trace_text.lines() {
        if let Some(rest) = line.strip_prefix("synced ") {
            let (path, len) = rest.rsplit_once(' ').unwrap();
            if path == log_name {
                durable = durable.max(len.parse().unwrap());
            }
        } else if let Some(call) = line.strip_prefix("ran ") {
            let needed = end_of(&log, "tool_started", "call", call);
            assert!(
                durable >= needed,
                "{call} ran when the log was durable to byte {durable}, but its tool_started ends at {needed}:\n{trace_text}"
            );
            ran.push(call.to_string());
        }
    }
    assert_eq!(ran, ["c2", "c4", "c6", "c8"], "{trace_text}");
    // The write's intent was synced alone, before the file changed and the outcome was
    // recorded.
    let intent_end = end_of(&log, "file_write", "status", "intent");
    assert!(
        trace_text.contains(&format!("synced {log_name} {intent_end}\n")),
        "no sync ends at the write's intent (byte {intent_end}):\n{trace_text}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("b.txt")).unwrap(),
        "new\n"
    );
    // The whole log is durable once the session has ended.
    let len = std::fs::metadata(&log).unwrap().len();
    assert_eq!(durable, len, "{trace_text}");
}

fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walkdir(&path));
        } else {
            out.push(path);
        }
    }
    out
}
