//! Codex's patches as file writes: the `apply_patch` envelope (`*** Add File:`,
//! `*** Update File:`, `*** Delete File:`) and the per-path changes its outcome events
//! carry. An added file's content is known whole; an update is known as its diff only
//! (its content after is unknown to checkout).

use serde_json::Value;

use crate::step::{Write, WriteKind};

fn write(path: &str, kind: WriteKind, after: Option<String>, diff: Option<String>) -> Write {
    Write {
        id: String::new(),
        path: path.to_string(),
        kind,
        before: None,
        after,
        diff,
        ok: true,
    }
}

/// The writes of an `apply_patch` text (ids and outcome are the caller's).
pub fn parse(text: &str) -> Vec<Write> {
    let mut out: Vec<Write> = Vec::new();
    // (path, kind, body lines)
    let mut cur: Option<(String, WriteKind, Vec<&str>)> = None;
    let close = |cur: &mut Option<(String, WriteKind, Vec<&str>)>, out: &mut Vec<Write>| {
        if let Some((path, kind, body)) = cur.take() {
            out.push(match kind {
                WriteKind::Create => {
                    let mut content: String = body
                        .iter()
                        .map(|l| l.strip_prefix('+').unwrap_or(l))
                        .collect::<Vec<_>>()
                        .join("\n");
                    if !body.is_empty() {
                        content.push('\n');
                    }
                    write(&path, WriteKind::Create, Some(content), None)
                }
                WriteKind::Delete => write(&path, WriteKind::Delete, None, None),
                _ => {
                    let mut diff = body.join("\n");
                    diff.push('\n');
                    write(&path, WriteKind::Edit, None, Some(diff))
                }
            });
        }
    };
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("*** Add File: ") {
            close(&mut cur, &mut out);
            cur = Some((p.trim().to_string(), WriteKind::Create, Vec::new()));
        } else if let Some(p) = line.strip_prefix("*** Update File: ") {
            close(&mut cur, &mut out);
            cur = Some((p.trim().to_string(), WriteKind::Edit, Vec::new()));
        } else if let Some(p) = line.strip_prefix("*** Delete File: ") {
            close(&mut cur, &mut out);
            cur = Some((p.trim().to_string(), WriteKind::Delete, Vec::new()));
        } else if line.starts_with("*** End Patch") || line.starts_with("*** Begin Patch") {
            close(&mut cur, &mut out);
        } else if let Some((_, _, body)) = cur.as_mut()
            && !line.starts_with("*** End of File")
        {
            body.push(line);
        }
    }
    close(&mut cur, &mut out);
    out
}

/// The write of one path of a patch outcome: `{"add":{"content"}}`,
/// `{"delete":{…}}`, `{"update":{"unified_diff"}}`, or a newer item's
/// `{"kind":"add"|{"type":"add"},"diff":…}`, or Codex 0.171's
/// `{"type":"add","content":…}` / `{"type":"update","unified_diff":…}`.
pub fn change(path: &str, c: &Value) -> Option<Write> {
    if let Some(a) = c.get("add") {
        let content = a.get("content").and_then(Value::as_str).map(str::to_string);
        return Some(write(path, WriteKind::Create, content, None));
    }
    if c.get("delete").is_some() {
        return Some(write(path, WriteKind::Delete, None, None));
    }
    if let Some(u) = c.get("update") {
        let diff = u
            .get("unified_diff")
            .and_then(Value::as_str)
            .map(str::to_string);
        return Some(write(path, WriteKind::Edit, None, diff));
    }
    let kind = c.get("kind").or_else(|| c.get("type"))?;
    let kind = kind
        .as_str()
        .or_else(|| kind.get("type").and_then(Value::as_str))?;
    let diff = c
        .get("diff")
        .or_else(|| c.get("unified_diff"))
        .and_then(Value::as_str)
        .map(str::to_string);
    match kind {
        "add" => {
            let content = c
                .get("content")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| diff.as_deref().map(added_content));
            Some(write(path, WriteKind::Create, content, diff))
        }
        "delete" => Some(write(path, WriteKind::Delete, None, diff)),
        "update" => Some(write(path, WriteKind::Edit, None, diff)),
        _ => None,
    }
}

/// The content of an added file from its diff (every `+` line).
fn added_content(diff: &str) -> String {
    let mut out = String::new();
    for l in diff.lines() {
        if l.starts_with("+++") {
            continue;
        }
        if let Some(rest) = l.strip_prefix('+') {
            out.push_str(rest);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_gives_one_write_per_path() {
        let p = "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** Update File: b.rs\n@@ fn x\n-old\n+new\n*** Delete File: c.md\n*** End Patch\n";
        let w = parse(p);
        assert_eq!(
            w,
            vec![
                write("a.txt", WriteKind::Create, Some("one\ntwo\n".into()), None),
                write(
                    "b.rs",
                    WriteKind::Edit,
                    None,
                    Some("@@ fn x\n-old\n+new\n".into())
                ),
                write("c.md", WriteKind::Delete, None, None),
            ]
        );
    }

    #[test]
    fn outcome_changes_of_both_shapes() {
        let add = serde_json::json!({"add": {"content": "x\n"}});
        assert_eq!(
            change("n.txt", &add),
            Some(write("n.txt", WriteKind::Create, Some("x\n".into()), None))
        );
        let upd = serde_json::json!({"kind": {"type": "update"}, "diff": "@@\n-a\n+b\n"});
        assert_eq!(
            change("m.txt", &upd),
            Some(write(
                "m.txt",
                WriteKind::Edit,
                None,
                Some("@@\n-a\n+b\n".into())
            ))
        );
        // Codex 0.171's `item_completed` `FileChange`: `type` and `unified_diff`.
        let upd = serde_json::json!({"type": "update", "unified_diff": "@@ -1 +1 @@\n-a\n+b\n", "move_path": null});
        assert_eq!(
            change("m.txt", &upd),
            Some(write(
                "m.txt",
                WriteKind::Edit,
                None,
                Some("@@ -1 +1 @@\n-a\n+b\n".into())
            ))
        );
        let add = serde_json::json!({"type": "add", "content": "new\n"});
        assert_eq!(
            change("n.txt", &add),
            Some(write(
                "n.txt",
                WriteKind::Create,
                Some("new\n".into()),
                None
            ))
        );
        assert_eq!(change("z", &serde_json::json!({"kind": "rename"})), None);
    }
}
