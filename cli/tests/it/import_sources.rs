//! `cairn import` of transcripts in shapes the other fixtures do not have: the oldest
//! Codex rollout format, and a Claude Code session recorded on Windows. Each is
//! imported, listed and shown as a person would.

use std::path::Path;
use std::process::Command;

use super::import::{cairn, text};

fn data(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/import")
            .join(name),
    )
    .unwrap()
}

/// The rows of `cairn sessions --json`.
fn sessions(home: &Path, user: &Path) -> Vec<serde_json::Value> {
    let out = cairn(home, user, &["sessions", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

// Regression: a rollout of the oldest format (a first line `{id, timestamp}`, then
// bare items) was refused as a file of no known format.
#[test]
fn the_oldest_codex_rollout_format_is_imported_and_shown() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, user) = (tmp.path().join("home"), tmp.path().join("user"));
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let file = tmp
        .path()
        .join("rollouts/rollout-2025-04-20T09-00-00-legacy.jsonl");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(
        &file,
        data("codex-legacy.jsonl").replace("@WS@", &ws.to_string_lossy()),
    )
    .unwrap();
    let out = cairn(&home, &user, &["import", file.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["sessions"], 1, "{summary}");
    assert_eq!(summary["calls"], 1, "{summary}");

    let rows = sessions(&home, &user);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["workspace"], ws.to_string_lossy().as_ref());
    // No version in the oldest format: the agent's name alone.
    assert_eq!(rows[0]["catalog"], "codex");
    assert_eq!(rows[0]["task"], "list the legacy files");
    // The session's own start, not the import's.
    assert!(
        rows[0]["started"]
            .as_str()
            .unwrap()
            .starts_with("2025-04-20T09:00:00"),
        "{}",
        rows[0]
    );
    let out = cairn(&home, &user, &["show", "last"]);
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(shown.contains("(imported from Codex)"), "{shown}");
    assert!(shown.contains("There is one file: README.md."), "{shown}");
    let out = cairn(&home, &user, &["verify", "last"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    // A file of no known format: its error starts `cairn:` and names it once.
    let other = tmp.path().join("rollouts/notes.jsonl");
    std::fs::write(&other, "{\"hello\": 1}\n").unwrap();
    let out = cairn(&home, &user, &["import", other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    let said = format!("cairn: {}: neither a Codex rollout", other.display());
    assert!(err.contains(&said), "{err}");
    assert_eq!(err.matches(other.to_str().unwrap()).count(), 1, "{err}");
}

// Regression: a transcript whose `cwd` is a Windows path was given the workspace
// `/folder/the/import/ran/in/e:\Workspace\app`, and imports were labelled "thoth".
#[test]
fn a_windows_claude_code_session_keeps_its_paths_and_its_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, user) = (tmp.path().join("home"), tmp.path().join("user"));
    let root = r"e:\Workspace\app";
    let json_root = root.replace('\\', r"\\");
    let transcript = data("claude-session.jsonl")
        .replace("@WS@/", &format!(r"{json_root}\\"))
        .replace("@WS@", &json_root)
        .replace("@TOKEN@", "no-token-here");
    let file = user.join(".claude/projects/e--Workspace-app/5b7c0c1e.jsonl");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, transcript).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["import", file.to_str().unwrap()])
        .env("CAIRN_HOME", &home)
        .env("HOME", &user)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let rows = sessions(&home, &user);
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(r["workspace"], root, "{r}");
        assert_eq!(r["catalog"], "claude-code 2.1.3", "{r}");
        assert!(
            r["started"]
                .as_str()
                .unwrap()
                .starts_with("2026-10-03T10:00:0"),
            "{r}"
        );
    }
    let out = cairn(&home, &user, &["sessions"]);
    let listed = text(&out.stdout);
    assert!(listed.contains("claude-code 2.1.3"), "{listed}");
    assert!(!listed.contains("thoth"), "{listed}");
    assert!(
        !listed.contains(&tmp.path().to_string_lossy().to_string()),
        "{listed}"
    );
    let id = rows[0]["id"].as_str().unwrap();
    let out = cairn(&home, &user, &["show", id]);
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        shown.contains(&format!("(imported from Claude Code 2.1.3) in {root}")),
        "{shown}"
    );
    assert!(!shown.contains("/e:"), "{shown}");
    let out = cairn(&home, &user, &["audit", id]);
    let audit = text(&out.stdout);
    assert!(
        audit.contains("Claude Code 2.1.3 (imported by cairn"),
        "{audit}"
    );
    assert!(!audit.contains("thoth"), "{audit}");
}
