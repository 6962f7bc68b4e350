//! Another agent's tool calls put to cairn's permission rules: what cairn would ask
//! before it ran the same call itself (the key of each program a command line runs,
//! `edit_file` for an edit, `web_fetch:<host>` for a fetch, `<tool>@<folder>` outside
//! the workspace, a credential file every time), answered from the session's allow
//! list with [`cairn_core::decide::permission`], the function cairn's own calls and
//! `verify` use.
//!
//! The agents' hooks (Claude Code's and Codex's `PreToolUse`) call this before each
//! of their built-in tools runs; the agent then runs it, or not, as the verdict says.

use std::path::Path;

use cairn_core::command::Guard;
use cairn_core::decide::{self, Permission};
use cairn_core::permission::{CredentialFiles, Need};
use serde_json::Value;

/// What the agent is told before a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it: cairn would not ask, or the allow list covers it.
    Allow { reason: String },
    /// Ask the person at the agent (cairn would ask, and nobody answers for it here).
    Ask { reason: String },
    /// Refuse it, telling the agent why.
    Deny { reason: String },
    /// cairn has no rule for this tool: the agent decides as it would without cairn.
    Abstain,
}

/// Who answers a question cairn would ask, when the allow list does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unlisted {
    /// The person at the agent, through the agent's own prompt.
    Ask,
    /// Nobody: refused.
    Deny,
    /// Yes, once.
    Allow,
}

/// The default credential-file patterns, compiled on first use: their glob set was
/// most of a hook process's own work (3.0 of 7.6 million instructions of a
/// `PreToolUse`), and a call of a tool that names no file (Bash, a fetch, an MCP tool)
/// never asks.
#[derive(Debug, Default)]
pub struct DefaultCredentials(std::sync::OnceLock<CredentialFiles>);

impl DefaultCredentials {
    /// The patterns, compiled now if not yet.
    pub fn get(&self) -> &CredentialFiles {
        self.0.get_or_init(|| {
            CredentialFiles::new(&cairn_core::permission::default_credential_files())
                .unwrap_or_else(|e| panic!("the default credential patterns do not compile: {e}"))
        })
    }

    /// True once compiled.
    pub fn compiled(&self) -> bool {
        self.0.get().is_some()
    }
}

/// The need of a call of the agent's tool `tool` with `input`, in workspace `root`:
/// `None` for a tool cairn has no rule for (its to-do lists, subagents, …).
/// Tools are named as Claude Code names them (`Bash`, `Edit`, `MultiEdit`, `Write`,
/// `NotebookEdit`, `Read`, `Grep`, `Glob`, `LS`, `WebFetch`, `WebSearch`,
/// `mcp__<server>__<tool>`) and as Codex does (`Bash`, `apply_patch`, `mcp__…`).
pub fn need(
    tool: &str,
    input: &Value,
    root: &Path,
    credentials: &DefaultCredentials,
) -> Option<Need> {
    let s = |k: &str| input.get(k).and_then(Value::as_str);
    let root_text = root.to_string_lossy();
    match tool {
        "Bash" | "shell" | "exec_command" | "local_shell" => {
            let line = s("command")
                .map(str::to_string)
                .or_else(|| argv_line(input.get("command")))?;
            let mut analysis = cairn_core::command::analyse(&line, &root_text);
            cairn_tools::links::confirm_writes(
                &mut analysis,
                root,
                cairn_tools::links::Links::Disk,
            );
            let context = if input.get("run_in_background").and_then(Value::as_bool) == Some(true) {
                "\n(in the background)"
            } else {
                ""
            };
            Some(cairn_core::permission::shell_need(analysis, context))
        }
        "Edit" | "MultiEdit" | "NotebookEdit" | "Write" => {
            let path = s("file_path").or(s("notebook_path"))?;
            let key = if tool == "Write" {
                "write_file"
            } else {
                "edit_file"
            };
            let detail = match tool {
                "Write" => format!("{key} {path}:\n{}", s("content").unwrap_or("")),
                _ => format!(
                    "{key} {path}:\n{}",
                    serde_json::to_string_pretty(input).unwrap_or_default()
                ),
            };
            let inner = match rel(root, path) {
                Some(r) if credentials.get().matches(&r) => {
                    cairn_core::permission::read_need(key, &r, credentials.get())
                }
                _ => Need::ask(key, detail),
            };
            Some(place(root, path, key, inner, input))
        }
        "apply_patch" => {
            let patch = s("command").or(s("input")).or(s("patch"))?;
            Some(Need::ask("write_patch", format!("write_patch:\n{patch}")))
        }
        "Read" | "Grep" | "Glob" | "LS" => {
            let path = s("file_path").or(s("path")).unwrap_or(".");
            let abs = absolute(root, path);
            let inner = match rel(root, &abs) {
                Some(r) => cairn_core::permission::read_need("read_file", &r, credentials.get()),
                None => Need::Auto,
            };
            Some(place(root, &abs, "read_file", inner, input))
        }
        "WebFetch" => Some(cairn_tools::web::fetch_need("web_fetch", s("url")?)),
        "WebSearch" => Some(Need::ask(
            "web_search",
            format!("web_search: {}", s("query").unwrap_or("")),
        )),
        _ => {
            let rest = tool.strip_prefix(cairn_tools::mcp_names::MCP_PREFIX)?;
            let (server, name) = rest.split_once("__")?;
            Some(Need::ask(
                format!("mcp:{server}:{name}"),
                format!(
                    "tool {name} of MCP server {server}, with input:\n{}",
                    serde_json::to_string_pretty(input).unwrap_or_default()
                ),
            ))
        }
    }
}

/// The verdict on `need` for a session whose fold is `state`: what the allow list
/// covers is allowed, a question nobody here can answer goes to `unlisted`.
pub fn verdict(
    state: &cairn_core::State,
    need: Need,
    guards: &[Guard],
    unlisted: Unlisted,
) -> (Permission, Verdict) {
    let permission = decide::permission(state, need, guards);
    let verdict = match &permission {
        Permission::Auto => Verdict::Allow {
            reason: "cairn: nothing to ask".into(),
        },
        Permission::AllowList(q) => Verdict::Allow {
            reason: format!("cairn: {} is on the project's allow list", q.keys.join(" ")),
        },
        Permission::Ask(q) => {
            let why = if q.guarded && !q.guards.is_empty() {
                format!("it matches a guarded command ({})", q.guards.join(", "))
            } else if !q.reasons.is_empty() {
                q.reasons.join("; ")
            } else {
                let missing: Vec<&str> = q
                    .keys
                    .iter()
                    .filter(|k| !state.allow.contains_key(*k))
                    .map(String::as_str)
                    .collect();
                format!(
                    "{} {} not on the project's allow list (an \"always\" answer in a cairn session puts it there)",
                    missing.join(" "),
                    if missing.len() == 1 { "is" } else { "are" }
                )
            };
            match unlisted {
                Unlisted::Ask => Verdict::Ask {
                    reason: format!("cairn asks: {why}"),
                },
                Unlisted::Deny => Verdict::Deny {
                    reason: format!("cairn refuses this call: {why}"),
                },
                Unlisted::Allow => Verdict::Allow {
                    reason: format!("cairn: allowed once ({why})"),
                },
            }
        }
    };
    (permission, verdict)
}

/// `inner`, or a question for `<key>@<folder>` when `path` lies outside the workspace.
fn place(root: &Path, path: &str, key: &str, inner: Need, input: &Value) -> Need {
    let abs = absolute(root, path);
    if rel(root, &abs).is_some() {
        return inner;
    }
    let dir = Path::new(&abs)
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or(abs.clone());
    cairn_core::permission::outside_need(key, &dir, inner, input)
}

/// `path` made absolute against `root`, `.` and `..` taken lexically.
fn absolute(root: &Path, path: &str) -> String {
    let joined = root.join(path);
    let mut out = std::path::PathBuf::new();
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.to_string_lossy().into_owned()
}

/// `path` relative to `root` when it lies inside it (`.` for the root itself).
fn rel(root: &Path, path: &str) -> Option<String> {
    let abs = absolute(root, path);
    let r = Path::new(&abs).strip_prefix(root).ok()?;
    let r = r.to_string_lossy().into_owned();
    Some(if r.is_empty() { ".".into() } else { r })
}

/// A command given as argv (Codex's `["bash", "-lc", "…"]`) as the line it runs.
fn argv_line(v: Option<&Value>) -> Option<String> {
    let argv: Vec<String> = v?
        .as_array()?
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    match argv.as_slice() {
        [sh, flag, line] if sh.ends_with("sh") && flag.starts_with('-') && flag.ends_with('c') => {
            Some(line.clone())
        }
        _ => Some(cairn_core::command::quote_argv(&argv)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(tool: &str, input: Value) -> Option<String> {
        let creds = DefaultCredentials::default();
        match need(tool, &input, Path::new("/w"), &creds)? {
            Need::Auto => Some("auto".into()),
            Need::Ask { key, .. } => Some(key),
        }
    }

    /// Guards a hook process's cost: the need of a call of a tool that names no file
    /// leaves the credential patterns uncompiled (their glob set was 40 % of a
    /// `PreToolUse` process's own instructions).
    #[test]
    fn only_a_tool_that_names_files_compiles_the_credential_patterns() {
        let cases: Vec<(&str, Value, bool)> = vec![
            ("Bash", json!({"command": "ls -l"}), false),
            ("WebFetch", json!({"url": "https://example.org/a"}), false),
            ("mcp__everything__echo", json!({"message": "hi"}), false),
            ("TodoWrite", json!({"todos": []}), false),
            ("Read", json!({"file_path": "/w/src/a.rs"}), true),
            ("Edit", json!({"file_path": "/w/src/a.rs"}), true),
        ];
        for (tool, input, compiled) in cases {
            let creds = DefaultCredentials::default();
            need(tool, &input, Path::new("/w"), &creds);
            assert_eq!(creds.compiled(), compiled, "{tool}");
        }
    }

    #[test]
    fn each_tool_asks_under_the_key_cairn_would() {
        let cases: Vec<(&str, Value, Option<&str>)> = vec![
            (
                "Bash",
                json!({"command": "git status && cargo test"}),
                Some("shell:git shell:cargo"),
            ),
            (
                "Bash",
                json!({"command": ["bash", "-lc", "ls -l"]}),
                Some("shell:ls"),
            ),
            (
                "Edit",
                json!({"file_path": "/w/src/a.rs", "old_string": "a", "new_string": "b"}),
                Some("edit_file"),
            ),
            (
                "Write",
                json!({"file_path": "/w/b.txt", "content": "x"}),
                Some("write_file"),
            ),
            (
                "Write",
                json!({"file_path": "/etc/motd", "content": "x"}),
                Some("write_file@/etc"),
            ),
            ("Read", json!({"file_path": "/w/src/a.rs"}), Some("auto")),
            (
                "Read",
                json!({"file_path": "/w/.env"}),
                Some("read_credentials:.env"),
            ),
            (
                "Read",
                json!({"file_path": "/etc/passwd"}),
                Some("read_file@/etc"),
            ),
            ("Grep", json!({"pattern": "x"}), Some("auto")),
            (
                "WebFetch",
                json!({"url": "https://example.org/a"}),
                Some("web_fetch:example.org"),
            ),
            (
                "mcp__everything__echo",
                json!({"message": "hi"}),
                Some("mcp:everything:echo"),
            ),
            ("TodoWrite", json!({"todos": []}), None),
        ];
        for (tool, input, want) in cases {
            assert_eq!(key(tool, input.clone()).as_deref(), want, "{tool} {input}");
        }
    }
}
