//! Claude Code transcripts: one JSON object per line, `user` and `assistant` lines
//! carrying Anthropic Messages API messages (content blocks `text`, `thinking`,
//! `tool_use`, `tool_result`, `image`), linked into a tree by `uuid`/`parentUuid`
//! (`logicalParentUuid` across a compaction), and lines of other types (`summary`,
//! `system`, `file-history-snapshot`, `queue-operation`, `progress`, …) kept as they
//! are. One API response may be split over several lines sharing `message.id`: they
//! are gathered into one model turn, its usage counted once.

use std::collections::{HashMap, HashSet};

use cairn_core::event::{McpRef, Status};
use serde_json::Value;

use crate::step::{ModelCall, Shell, Step, Write, WriteKind};

/// Line types this version knows and keeps as they are.
const KEPT: &[&str] = &[
    "summary",
    "system",
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "api-request",
    "tools-used",
    "cost-state",
    "mode",
    "permission-mode",
    "attachment",
    "custom-title",
    "tag",
    "agent-name",
    "last-prompt",
    // Claude Code 2.1.332: the shape and parts of each API request, by hash, and a
    // marker line of its own.
    "api-request-shape",
    "api-request-blob",
    "atis-latch",
];

/// Whether a parsed line looks like a Claude Code transcript line.
pub fn is_claude(v: &Value) -> bool {
    let t = v.get("type").and_then(Value::as_str).unwrap_or("");
    (matches!(t, "user" | "assistant") && v.get("message").is_some())
        || (t == "summary" && v.get("leafUuid").is_some())
        || (v.get("sessionId").is_some() && (t == "system" || KEPT.contains(&t)))
        || t == "file-history-snapshot"
}

/// A line's place in the conversation tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub uuid: String,
    /// `parentUuid`, or across a compaction `logicalParentUuid`.
    pub parent: Option<String>,
    pub sidechain: bool,
    /// A user or assistant message (what a branch's leaf is).
    pub message: bool,
}

pub fn node(v: &Value) -> Option<Node> {
    let uuid = v.get("uuid").and_then(Value::as_str)?.to_string();
    let parent = v
        .get("parentUuid")
        .and_then(Value::as_str)
        .or_else(|| v.get("logicalParentUuid").and_then(Value::as_str))
        .map(str::to_string);
    let t = v.get("type").and_then(Value::as_str).unwrap_or("");
    Some(Node {
        uuid,
        parent,
        sidechain: v
            .get("isSidechain")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        message: matches!(t, "user" | "assistant"),
    })
}

/// What the lines tell about the session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    pub id: Option<String>,
    pub cwd: Option<String>,
    pub version: Option<String>,
    pub started_at: Option<String>,
}

pub fn meta(v: &Value, meta: &mut Meta) {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    if meta.id.is_none() {
        meta.id = s("sessionId");
    }
    if meta.cwd.is_none() {
        meta.cwd = s("cwd");
    }
    if meta.version.is_none() {
        meta.version = s("version");
    }
    if meta.started_at.is_none() {
        meta.started_at = s("timestamp");
    }
}

/// An assistant response being gathered over its lines.
struct Response {
    /// The source's time of its first line.
    at: Option<String>,
    id: String,
    model: String,
    text: String,
    calls: Vec<ModelCall>,
    starts: Vec<Step>,
    usage: Option<Value>,
}

/// The state of one branch being read.
#[derive(Default)]
pub struct Claude {
    response: Option<Response>,
    /// Responses whose usage was counted.
    counted: HashSet<String>,
    /// Calls started and not finished: (tool, input).
    tools: HashMap<String, (String, Value)>,
    /// The source's time of the line being read.
    now: Option<String>,
}

impl Claude {
    pub fn new() -> Claude {
        Claude::default()
    }

    fn flush(&mut self, out: &mut Vec<Step>) {
        if let Some(r) = self.response.take() {
            out.push(Step::At(r.at));
            out.push(Step::Model {
                model: r.model,
                text: r.text,
                calls: r.calls,
                usage: r.usage,
            });
            out.extend(r.starts);
            out.push(Step::At(self.now.clone()));
        }
    }

    /// The steps of one line.
    pub fn line(&mut self, v: &Value, raw: &[u8], out: &mut Vec<Step>) {
        self.now = v.get("timestamp").and_then(Value::as_str).map(String::from);
        out.push(Step::At(self.now.clone()));
        let t = v.get("type").and_then(Value::as_str).unwrap_or("");
        match t {
            "assistant" => self.assistant(v, raw, out),
            "user" => self.user(v, out),
            _ => {
                self.flush(out);
                out.push(Step::Item {
                    kind: t.to_string(),
                    unknown: !KEPT.contains(&t),
                    raw: raw.to_vec(),
                });
            }
        }
    }

    fn assistant(&mut self, v: &Value, raw: &[u8], out: &mut Vec<Step>) {
        let msg = v.get("message").unwrap_or(&Value::Null);
        let id = msg
            .get("id")
            .and_then(Value::as_str)
            .or_else(|| v.get("requestId").and_then(Value::as_str))
            .or_else(|| v.get("uuid").and_then(Value::as_str))
            .unwrap_or("")
            .to_string();
        if self.response.as_ref().is_some_and(|r| r.id != id) {
            self.flush(out);
        }
        let usage = if self.counted.insert(id.clone()) {
            msg.get("usage").cloned()
        } else {
            None
        };
        let now = &self.now;
        let r = self.response.get_or_insert_with(|| Response {
            at: now.clone(),
            id: id.clone(),
            model: msg
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            text: String::new(),
            calls: Vec::new(),
            starts: Vec::new(),
            usage: None,
        });
        if usage.is_some() {
            r.usage = usage;
        }
        let blocks: Vec<Value> = match msg.get("content") {
            Some(Value::Array(a)) => a.clone(),
            Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
            _ => Vec::new(),
        };
        let mut thinking = false;
        for b in &blocks {
            match b.get("type").and_then(Value::as_str).unwrap_or("") {
                "text" => {
                    if !r.text.is_empty() {
                        r.text.push('\n');
                    }
                    r.text
                        .push_str(b.get("text").and_then(Value::as_str).unwrap_or(""));
                }
                "tool_use" | "server_tool_use" => {
                    let id = b
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let name = b
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let input = b.get("input").cloned().unwrap_or(Value::Null);
                    let mcp = name.strip_prefix("mcp__").and_then(|rest| {
                        rest.split_once("__").map(|(s, t)| McpRef {
                            server: s.to_string(),
                            tool: t.to_string(),
                        })
                    });
                    self.tools.insert(id.clone(), (name.clone(), input.clone()));
                    r.calls.push(ModelCall {
                        id: id.clone(),
                        name: name.clone(),
                        input: input.clone(),
                    });
                    r.starts.push(Step::At(now.clone()));
                    r.starts.push(Step::Call {
                        id,
                        tool: name,
                        input,
                        mcp,
                    });
                }
                _ => thinking = true,
            }
        }
        if thinking {
            // Thinking (and blocks of other types) kept as the line they came in.
            out.push(Step::Item {
                kind: "assistant:thinking".into(),
                unknown: false,
                raw: raw.to_vec(),
            });
        }
    }

    fn user(&mut self, v: &Value, out: &mut Vec<Step>) {
        self.flush(out);
        let msg = v.get("message").unwrap_or(&Value::Null);
        let tur = v.get("toolUseResult").unwrap_or(&Value::Null);
        let cwd = v.get("cwd").and_then(Value::as_str).map(str::to_string);
        match msg.get("content") {
            Some(Value::String(s)) => out.push(Step::User { text: s.clone() }),
            Some(Value::Array(blocks)) => {
                let mut text: Vec<String> = Vec::new();
                for b in blocks {
                    match b.get("type").and_then(Value::as_str).unwrap_or("") {
                        "text" => text.push(
                            b.get("text")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        ),
                        "image" => text.push("[image]".into()),
                        "tool_result" => self.result(b, tur, cwd.clone(), out),
                        _ => {}
                    }
                }
                if !text.is_empty() {
                    out.push(Step::User {
                        text: text.join("\n"),
                    });
                }
            }
            _ => {}
        }
    }

    fn result(&mut self, b: &Value, tur: &Value, cwd: Option<String>, out: &mut Vec<Step>) {
        let id = b
            .get("tool_use_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let is_error = b.get("is_error").and_then(Value::as_bool).unwrap_or(false);
        let output = match b.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        let (tool, input) = self
            .tools
            .remove(&id)
            .unwrap_or_else(|| ("unknown".to_string(), Value::Null));
        result_steps(&id, &tool, &input, tur, output, is_error, cwd, out);
    }

    /// Ends a branch: a response still gathered is written.
    pub fn finish(&mut self, out: &mut Vec<Step>) {
        self.flush(out);
    }
}

/// The steps of a call's result: its effects by tool (`Bash` a command, `Edit`,
/// `MultiEdit` and `Write` a file written, `Read` lines read, `WebFetch` and
/// `WebSearch` a fetch), then its end. `tur` is Claude Code's structured result
/// (`toolUseResult` in a transcript, `tool_response` in a hook), `output` what the
/// model was given.
#[allow(clippy::too_many_arguments)]
pub(crate) fn result_steps(
    id: &str,
    tool: &str,
    input: &Value,
    tur: &Value,
    output: String,
    is_error: bool,
    cwd: Option<String>,
    out: &mut Vec<Step>,
) {
    let id = id.to_string();
    let mut status = if is_error { Status::Error } else { Status::Ok };
    match tool {
        "Bash" => {
            let (shell, interrupted) = bash_step(&id, input, tur, &output, is_error, cwd);
            if interrupted {
                status = Status::Cancelled;
            }
            out.push(Step::Shell(shell));
        }
        "Edit" | "MultiEdit" => out.push(Step::Write(edit_step(&id, input, tur, is_error))),
        "Write" => out.push(Step::Write(write_step(&id, input, tur, is_error))),
        "Read" => out.extend(read_step(&id, input, tur)),
        "WebFetch" => out.push(Step::Fetch {
            id: id.clone(),
            url: str_at(input, "url")
                .or_else(|| str_at(tur, "url"))
                .unwrap_or_default(),
            status: tur.get("code").and_then(Value::as_u64).map(|c| c as u16),
            text: str_at(tur, "result").or_else(|| Some(output.clone())),
            error: is_error.then(|| output.clone()),
        }),
        "WebSearch" => out.push(Step::Fetch {
            id: id.clone(),
            url: format!("search:{}", str_at(input, "query").unwrap_or_default()),
            status: None,
            text: Some(output.clone()),
            error: is_error.then(|| output.clone()),
        }),
        _ => {}
    }
    out.push(Step::End { id, status, output });
}

fn str_at(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

/// A `Bash` call's command, and whether it was interrupted.
fn bash_step(
    id: &str,
    input: &Value,
    tur: &Value,
    output: &str,
    is_error: bool,
    cwd: Option<String>,
) -> (Shell, bool) {
    let interrupted = tur
        .get("interrupted")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let exit_code = if interrupted {
        None
    } else if is_error {
        exit_code_of(output).or(Some(1))
    } else {
        Some(0)
    };
    let shell = Shell {
        id: id.to_string(),
        argv: vec![str_at(input, "command").unwrap_or_default()],
        cwd,
        exit_code,
        interrupted,
        stdout: str_at(tur, "stdout").unwrap_or_else(|| output.to_string()),
        stderr: str_at(tur, "stderr").unwrap_or_default(),
        elapsed_us: None,
    };
    (shell, interrupted)
}

/// An `Edit` or `MultiEdit` call's write: the content after is the edits applied to
/// the original, when it is given.
fn edit_step(id: &str, input: &Value, tur: &Value, is_error: bool) -> Write {
    let path = str_at(input, "file_path")
        .or_else(|| str_at(tur, "filePath"))
        .unwrap_or_default();
    let edits: Vec<(String, String, bool)> = match input.get("edits") {
        Some(Value::Array(es)) => es.iter().map(edit_of).collect(),
        _ => vec![edit_of(input)],
    };
    let before = str_at(tur, "originalFile");
    let after = if is_error {
        None
    } else {
        before.as_deref().and_then(|b| apply_edits(b, &edits))
    };
    Write {
        id: id.to_string(),
        path,
        kind: WriteKind::Edit,
        before,
        after,
        diff: structured_patch(tur.get("structuredPatch")),
        ok: !is_error,
    }
}

/// A `Write` call's write: a file created or replaced.
fn write_step(id: &str, input: &Value, tur: &Value, is_error: bool) -> Write {
    let path = str_at(input, "file_path")
        .or_else(|| str_at(tur, "filePath"))
        .unwrap_or_default();
    let before = str_at(tur, "originalFile");
    let create = str_at(tur, "type").as_deref() == Some("create");
    Write {
        id: id.to_string(),
        path,
        kind: if create {
            WriteKind::Create
        } else {
            WriteKind::Replace
        },
        before,
        after: if is_error {
            None
        } else {
            str_at(input, "content")
        },
        diff: structured_patch(tur.get("structuredPatch")),
        ok: !is_error,
    }
}

/// A `Read` call's lines read, when its result names the file.
fn read_step(id: &str, input: &Value, tur: &Value) -> Option<Step> {
    let f = tur.get("file")?;
    let n = |k: &str| f.get(k).and_then(Value::as_u64).unwrap_or(0) as u32;
    Some(Step::Read {
        id: id.to_string(),
        path: str_at(f, "filePath")
            .or_else(|| str_at(input, "file_path"))
            .unwrap_or_default(),
        first: n("startLine").max(1),
        lines: n("numLines"),
        total_lines: n("totalLines"),
        content: str_at(f, "content").unwrap_or_default(),
    })
}

fn edit_of(v: &Value) -> (String, String, bool) {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    (
        s("old_string"),
        s("new_string"),
        v.get("replace_all")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    )
}

/// `content` with each edit applied in turn (the first occurrence, or all); `None`
/// when an old string is not there (the content after is then unknown).
pub fn apply_edits(content: &str, edits: &[(String, String, bool)]) -> Option<String> {
    let mut text = content.to_string();
    for (old, new, all) in edits {
        if old.is_empty() || !text.contains(old.as_str()) {
            return None;
        }
        text = if *all {
            text.replace(old.as_str(), new)
        } else {
            text.replacen(old.as_str(), new, 1)
        };
    }
    Some(text)
}

/// A `structuredPatch` (hunks of `oldStart`, `oldLines`, `newStart`, `newLines`,
/// `lines`) as a unified diff.
fn structured_patch(v: Option<&Value>) -> Option<String> {
    let hunks = v?.as_array()?;
    let mut out = String::new();
    for h in hunks {
        let n = |k: &str| h.get(k).and_then(Value::as_u64).unwrap_or(0);
        out.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            n("oldStart"),
            n("oldLines"),
            n("newStart"),
            n("newLines")
        ));
        for l in h
            .get("lines")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.push_str(l.as_str().unwrap_or(""));
            out.push('\n');
        }
    }
    (!out.is_empty()).then_some(out)
}

/// `Exit code N` at the start of a failed command's output.
fn exit_code_of(text: &str) -> Option<i32> {
    let rest = text.trim_start().strip_prefix("Exit code ")?;
    rest.split(|c: char| !c.is_ascii_digit() && c != '-')
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_apply_in_turn_and_an_absent_old_string_makes_it_unknown() {
        let e = |o: &str, n: &str, all| (o.to_string(), n.to_string(), all);
        assert_eq!(
            apply_edits("a a b", &[e("a", "x", false), e("b", "y", false)]),
            Some("x a y".into())
        );
        assert_eq!(apply_edits("a a", &[e("a", "x", true)]), Some("x x".into()));
        assert_eq!(apply_edits("a", &[e("z", "x", false)]), None);
    }

    #[test]
    fn exit_code_from_a_failed_command() {
        assert_eq!(exit_code_of("Exit code 2\nls: nope"), Some(2));
        assert_eq!(exit_code_of("nope"), None);
    }
}
