//! Codex CLI rollouts: `{timestamp, type, payload}` lines (newer files add `ordinal`,
//! and `metadata` on response items). What each line means is read from the line
//! alone and a little state: the model of the last turn context, the model response
//! being gathered (its text and calls, until its usage or the next input arrives), the
//! shell-like calls waiting for their outcome, the patches waiting for theirs.
//!
//! The format is Codex's protocol types (`codex-rs/protocol`), read tolerantly: a
//! field missing or of another shape is taken as absent, never as an error.

use std::collections::{HashMap, HashSet};

use cairn_core::event::{McpRef, Status};
use serde_json::Value;

use crate::patch;
use crate::step::{ModelCall, Shell, Step, Write};

/// Names of the calls that run a command.
const SHELL_TOOLS: &[&str] = &[
    "shell",
    "shell_command",
    "exec_command",
    "container.exec",
    "local_shell",
];

/// What a session's first lines say about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    pub id: Option<String>,
    pub cwd: Option<String>,
    pub version: Option<String>,
    pub started_at: Option<String>,
    /// The previous segment of a rotated rollout, as the first line names it.
    pub previous: Option<String>,
    /// A subagent's rollout: the thread that spawned it (`parent_thread_id`, or
    /// `source.subagent.thread_spawn.parent_thread_id`).
    pub parent: Option<String>,
}

/// Whether a parsed line looks like a Codex rollout line.
pub fn is_codex(v: &Value) -> bool {
    let t = v.get("type").and_then(Value::as_str).unwrap_or("");
    v.get("payload").is_some()
        && matches!(
            t,
            "session_meta" | "turn_context" | "response_item" | "event_msg" | "compacted"
        )
}

/// Whether a parsed first line is the header of the oldest rollout format: `{id,
/// timestamp}` (and `instructions`), no `type`; the lines after it are bare response
/// items (`{type: "message", …}`) and `{record_type: "state"}` markers.
pub fn is_legacy_header(v: &Value) -> bool {
    v.get("type").is_none()
        && v.get("payload").is_none()
        && v.get("id").is_some_and(Value::is_string)
        && v.get("timestamp").is_some_and(Value::is_string)
}

/// The working folder an `<environment_context>` message names (`<cwd>…</cwd>`): the
/// only place the oldest rollouts say it.
fn context_cwd(text: &str) -> Option<String> {
    let start = text.find("<cwd>")? + "<cwd>".len();
    let end = text[start..].find("</cwd>")? + start;
    let cwd = text[start..end].trim();
    (!cwd.is_empty()).then(|| cwd.to_string())
}

/// The keys by which a segment's first line may name the segment before it.
const PREVIOUS_KEYS: &[&str] = &[
    "previous_rollout_path",
    "previous_segment",
    "previous_segment_path",
    "previous_path",
];

/// Reads what a line tells about the session (`session_meta`, the first turn
/// context's working directory, a previous segment).
pub fn meta(v: &Value, first: bool, meta: &mut Meta) {
    let t = v.get("type").and_then(Value::as_str).unwrap_or("");
    if v.get("payload").is_none() {
        // The oldest format: its header, then bare items.
        if first && is_legacy_header(v) {
            meta.id = str_of(v, "id");
            meta.started_at = str_of(v, "timestamp");
        } else if t == "message" && meta.cwd.is_none() {
            meta.cwd = context_cwd(&content_text(v.get("content")));
        }
        return;
    }
    let p = v.get("payload").unwrap_or(&Value::Null);
    if first {
        for k in PREVIOUS_KEYS {
            if let Some(s) = p.get(*k).or_else(|| v.get(*k)).and_then(Value::as_str) {
                meta.previous = Some(s.to_string());
            }
        }
    }
    match t {
        "session_meta" => {
            let m = p.get("meta").unwrap_or(p);
            if meta.id.is_none() {
                meta.id = str_of(m, "id");
            }
            if meta.cwd.is_none() {
                meta.cwd = str_of(m, "cwd");
            }
            if meta.version.is_none() {
                meta.version = str_of(m, "cli_version");
            }
            if meta.started_at.is_none() {
                meta.started_at = str_of(m, "timestamp");
            }
            if meta.parent.is_none() {
                meta.parent = str_of(m, "parent_thread_id").or_else(|| {
                    m.pointer("/source/subagent/thread_spawn/parent_thread_id")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                });
            }
        }
        "turn_context" if meta.cwd.is_none() => meta.cwd = str_of(p, "cwd"),
        _ => {}
    }
}

fn str_of(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

/// A model response being gathered.
#[derive(Default)]
struct Response {
    /// The source's time of its first line.
    at: Option<String>,
    text: String,
    calls: Vec<ModelCall>,
    /// Calls to start once the turn is written (tool, input, mcp).
    starts: Vec<Step>,
}

/// The state of one rollout being read.
#[derive(Default)]
pub struct Codex {
    model: String,
    response: Option<Response>,
    /// Shell-like calls by id, with their command and working folder.
    shells: HashMap<String, (Vec<String>, Option<String>)>,
    /// Calls whose command outcome is recorded.
    ran: HashSet<String>,
    /// apply_patch calls by id, with their patch.
    patches: HashMap<String, String>,
    /// Patches whose outcome is recorded.
    patched: HashSet<String>,
    /// The last cumulative usage seen, to count each response once.
    last_total: Option<Value>,
    cwd: Option<String>,
    /// The source's time of the line being read.
    now: Option<String>,
}

impl Codex {
    pub fn new(cwd: Option<String>) -> Codex {
        Codex {
            cwd,
            ..Codex::default()
        }
    }

    /// The steps of one line (`raw` is its JSON, kept for items stored as they are).
    pub fn line(&mut self, v: &Value, raw: &[u8], out: &mut Vec<Step>) {
        // The oldest format's bare items carry no time: only its header does.
        self.now = str_of(v, "timestamp");
        out.push(Step::At(self.now.clone()));
        let t = v.get("type").and_then(Value::as_str).unwrap_or("");
        let p = v.get("payload").unwrap_or(&Value::Null);
        let pt = p.get("type").and_then(Value::as_str).unwrap_or("");
        let item = |kind: String, unknown: bool| Step::Item {
            kind,
            unknown,
            raw: raw.to_vec(),
        };
        if v.get("payload").is_none() {
            // The oldest format: a header, bare response items, state markers.
            if is_legacy_header(v) {
                out.push(item("session_meta".into(), false));
            } else if v.get("record_type").is_some() {
                out.push(item("record_type:state".into(), false));
            } else if !t.is_empty() {
                self.response_item(v, t, raw, out);
            } else {
                out.push(item(String::new(), true));
            }
            return;
        }
        match t {
            "session_meta" => out.push(item(t.into(), false)),
            "turn_context" => {
                if let Some(m) = p.get("model").and_then(Value::as_str) {
                    self.model = m.to_string();
                }
                if let Some(c) = p.get("cwd").and_then(Value::as_str) {
                    self.cwd = Some(c.to_string());
                }
                out.push(item(t.into(), false));
            }
            // A thread forked with its parent's history (a subagent spawned with
            // `fork_turns: all`, Codex 0.171) starts with that history, each item marked
            // inherited: the parent's, kept as it is, not this session's own.
            "response_item"
                if v.pointer("/metadata/inherited_user_message") == Some(&Value::Bool(true)) =>
            {
                self.flush(None, out);
                out.push(item(format!("response_item:inherited:{pt}"), false));
            }
            "response_item" => self.response_item(p, pt, raw, out),
            "event_msg" => self.event_msg(p, pt, raw, out),
            // Codex 0.171: the world the model was shown, the usage of each response,
            // and how a message between agents (multi-agent v2) was delivered.
            "compacted"
            | "world_state"
            | "token_usage_record"
            | "inter_agent_communication_metadata" => {
                self.flush(None, out);
                out.push(item(t.into(), false));
            }
            _ => out.push(item(t.into(), true)),
        }
    }

    /// Writes the response gathered so far (with `usage`, when given).
    fn flush(&mut self, usage: Option<Value>, out: &mut Vec<Step>) {
        let Some(r) = self.response.take() else {
            if let Some(u) = usage {
                out.push(Step::At(self.now.clone()));
                out.push(Step::Model {
                    model: self.model.clone(),
                    text: String::new(),
                    calls: Vec::new(),
                    usage: Some(u),
                });
            }
            return;
        };
        out.push(Step::At(r.at));
        out.push(Step::Model {
            model: self.model.clone(),
            text: r.text,
            calls: r.calls,
            usage,
        });
        out.extend(r.starts);
        out.push(Step::At(self.now.clone()));
    }

    fn response(&mut self) -> &mut Response {
        let now = &self.now;
        self.response.get_or_insert_with(|| Response {
            at: now.clone(),
            ..Response::default()
        })
    }

    /// A call the model asked for. An MCP call's tool is named `mcp__server__tool`
    /// whatever the model called it, as when Codex records only its end.
    fn start_call(&mut self, id: String, name: String, input: Value, mcp: Option<McpRef>) {
        let tool = match &mcp {
            Some(m) => format!("mcp__{}__{}", m.server, m.tool),
            None => name.clone(),
        };
        let now = self.now.clone();
        let r = self.response();
        r.calls.push(ModelCall {
            id: id.clone(),
            name,
            input: input.clone(),
        });
        // A call starts when the line that asked for it was written, not when the
        // response it is part of began.
        r.starts.push(Step::At(now));
        r.starts.push(Step::Call {
            id,
            tool,
            input,
            mcp,
        });
    }

    fn response_item(&mut self, p: &Value, pt: &str, raw: &[u8], out: &mut Vec<Step>) {
        match pt {
            "message" => {
                let role = p.get("role").and_then(Value::as_str).unwrap_or("");
                let text = content_text(p.get("content"));
                match role {
                    "assistant" => {
                        let r = self.response();
                        if !r.text.is_empty() {
                            r.text.push('\n');
                        }
                        r.text.push_str(&text);
                    }
                    "user" if !is_context(&text) => {
                        self.flush(None, out);
                        out.push(Step::User { text });
                    }
                    _ => {
                        self.flush(None, out);
                        out.push(Step::Item {
                            kind: format!("response_item:message:{role}"),
                            unknown: false,
                            raw: raw.to_vec(),
                        });
                    }
                }
            }
            "reasoning" => out.push(Step::Item {
                kind: "response_item:reasoning".into(),
                unknown: false,
                raw: raw.to_vec(),
            }),
            "function_call" | "custom_tool_call" => self.function_call(p),
            // Codex 0.171 finds deferred tools (MCP tools among them) by a search the
            // client runs: a call like any other, its output the tools found.
            "tool_search_call" => {
                let id = call_id(p);
                let input = p.get("arguments").cloned().unwrap_or(Value::Null);
                self.start_call(id, "tool_search".into(), input, None);
            }
            "tool_search_output" => {
                self.flush(None, out);
                let done = p.get("status").and_then(Value::as_str) != Some("failed");
                out.push(Step::End {
                    id: call_id(p),
                    status: if done { Status::Ok } else { Status::Error },
                    output: p.get("tools").map(Value::to_string).unwrap_or_default(),
                });
            }
            // A message between agents (multi-agent v2: a task for a subagent, its final
            // answer for its parent): kept as it is, its payload may be encrypted.
            "agent_message" => {
                self.flush(None, out);
                out.push(Step::Item {
                    kind: "response_item:agent_message".into(),
                    unknown: false,
                    raw: raw.to_vec(),
                });
            }
            "local_shell_call" => {
                let id = call_id(p);
                let action = p.get("action").unwrap_or(&Value::Null);
                let (argv, cwd) = command_of(action);
                self.shells.insert(id.clone(), (argv, cwd));
                self.start_call(id, "local_shell".into(), action.clone(), None);
            }
            "web_search_call" => self.web_search_call(p, out),
            "function_call_output" | "custom_tool_call_output" => self.call_output(p, out),
            _ => {
                self.flush(None, out);
                out.push(Step::Item {
                    kind: format!("response_item:{pt}"),
                    unknown: true,
                    raw: raw.to_vec(),
                })
            }
        }
    }

    /// A call of a function or custom tool: remembered as a command when it runs one,
    /// as a patch when it applies one, and started once the response is written.
    fn function_call(&mut self, p: &Value) {
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let id = call_id(p);
        let input = match p.get("arguments").or_else(|| p.get("input")) {
            Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
            Some(v) => v.clone(),
            None => Value::Null,
        };
        let namespace = p.get("namespace").and_then(Value::as_str);
        let mcp = mcp_of(namespace, &name);
        if SHELL_TOOLS.contains(&name.as_str()) && mcp.is_none() {
            let (argv, cwd) = command_of(&input);
            self.shells.insert(id.clone(), (argv, cwd));
        }
        if name == "apply_patch" {
            let text = match &input {
                Value::String(s) => Some(s.clone()),
                v => v
                    .get("input")
                    .or_else(|| v.get("patch"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
            };
            if let Some(t) = text {
                self.patches.insert(id.clone(), t);
            }
        }
        // An apply_patch run through the shell tool (`["apply_patch", patch]`).
        if let Some((argv, _)) = self.shells.get(&id)
            && argv.first().is_some_and(|a| a == "apply_patch")
            && let Some(t) = argv.get(1)
        {
            self.patches.insert(id.clone(), t.clone());
        }
        self.start_call(id, name, input, mcp);
    }

    /// A web search Codex ran itself: started, fetched and ended at once.
    fn web_search_call(&mut self, p: &Value, out: &mut Vec<Step>) {
        let id = call_id(p);
        let action = p.get("action").cloned().unwrap_or(Value::Null);
        self.start_call(id.clone(), "web_search".into(), action.clone(), None);
        self.flush(None, out);
        let url = action
            .get("url")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| {
                action
                    .get("query")
                    .and_then(Value::as_str)
                    .map(|q| format!("search:{q}"))
            })
            .unwrap_or_else(|| "search:".into());
        let done = p.get("status").and_then(Value::as_str) == Some("completed");
        out.push(Step::Fetch {
            id: id.clone(),
            url,
            status: None,
            text: None,
            error: (!done).then(|| "the search did not complete".to_string()),
        });
        out.push(Step::End {
            id,
            status: if done { Status::Ok } else { Status::Error },
            output: String::new(),
        });
    }

    /// A call's output: the command it ran and the patch it applied, when not recorded
    /// already, then its end.
    fn call_output(&mut self, p: &Value, out: &mut Vec<Step>) {
        self.flush(None, out);
        let id = call_id(p);
        let (text, success, meta_exit) = output_of(p.get("output"));
        if let Some((argv, cwd)) = self.shells.get(&id).cloned()
            && !self.ran.contains(&id)
        {
            self.ran.insert(id.clone());
            let parsed = parse_exec_output(&text);
            let exit = meta_exit.or(parsed.exit_code);
            out.push(Step::Shell(Shell {
                id: id.clone(),
                argv,
                cwd: cwd.or_else(|| self.cwd.clone()),
                exit_code: exit,
                interrupted: false,
                stdout: parsed.output,
                stderr: String::new(),
                elapsed_us: parsed.elapsed_us,
            }));
        }
        if let Some(patch) = self.patches.remove(&id)
            && !self.patched.contains(&id)
        {
            let ok = success.unwrap_or_else(|| patch_succeeded(&text));
            for w in patch::parse(&patch) {
                out.push(Step::Write(Write {
                    id: id.clone(),
                    ok,
                    ..w
                }));
            }
        }
        let failed = success == Some(false)
            || meta_exit.is_some_and(|c| c != 0)
            || (self.shells.contains_key(&id)
                && parse_exec_output(&text).exit_code.is_some_and(|c| c != 0));
        out.push(Step::End {
            id,
            status: if failed { Status::Error } else { Status::Ok },
            output: text,
        });
    }

    fn event_msg(&mut self, p: &Value, pt: &str, raw: &[u8], out: &mut Vec<Step>) {
        match pt {
            // What the response items already hold, said again for the terminal.
            "user_message"
            | "agent_message"
            | "agent_message_delta"
            | "agent_reasoning"
            | "agent_reasoning_delta"
            | "agent_reasoning_raw_content"
            | "agent_reasoning_section_break"
            | "exec_command_begin"
            | "exec_command_output_delta"
            | "patch_apply_begin"
            | "mcp_tool_call_begin"
            | "item_started"
            | "web_search_begin"
            | "web_search_end" => {}
            "token_count" => {
                let info = p.get("info").unwrap_or(&Value::Null);
                if info.is_null() {
                    return;
                }
                let total = info.get("total_token_usage").cloned();
                if total.is_some() && total == self.last_total {
                    // The same totals again: no new response.
                    return;
                }
                self.last_total = total;
                let usage = info
                    .get("last_token_usage")
                    .cloned()
                    .unwrap_or_else(|| info.clone());
                self.flush(Some(usage), out);
            }
            "exec_command_end" => self.exec_command_end(p, out),
            "patch_apply_end" => self.patch_apply_end(p, out),
            "mcp_tool_call_end" => {
                self.flush(None, out);
                let id = call_id(p);
                let inv = p.get("invocation").unwrap_or(&Value::Null);
                let mcp = McpRef {
                    server: str_of(inv, "server").unwrap_or_default(),
                    tool: str_of(inv, "tool").unwrap_or_default(),
                };
                out.push(Step::Call {
                    id: id.clone(),
                    tool: format!("mcp__{}__{}", mcp.server, mcp.tool),
                    input: inv.get("arguments").cloned().unwrap_or(Value::Null),
                    mcp: Some(mcp),
                });
            }
            "item_completed" => {
                self.flush(None, out);
                let item = p.get("item").unwrap_or(&Value::Null);
                self.item_completed(item, raw, out);
            }
            "task_started"
            | "task_complete"
            | "turn_aborted"
            | "turn_started"
            | "turn_complete"
            | "session_configured"
            | "error"
            | "stream_error"
            | "background_event"
            | "turn_diff"
            | "plan_update"
            | "entered_review_mode"
            | "exited_review_mode"
            | "context_compacted"
            | "get_history_entry_response"
            | "list_custom_prompts_response"
            | "shutdown_complete"
            // Codex 0.171: the model, approval and permission settings a thread runs with.
            | "thread_settings_applied" => out.push(Step::Item {
                kind: format!("event_msg:{pt}"),
                unknown: false,
                raw: raw.to_vec(),
            }),
            _ => out.push(Step::Item {
                kind: format!("event_msg:{pt}"),
                unknown: true,
                raw: raw.to_vec(),
            }),
        }
    }

    /// A command Codex ran, as it ended.
    fn exec_command_end(&mut self, p: &Value, out: &mut Vec<Step>) {
        self.flush(None, out);
        let id = call_id(p);
        let (argv, cwd) = match self.shells.get(&id) {
            Some((a, c)) => (a.clone(), c.clone()),
            None => (command_of(p).0, None),
        };
        let cwd = str_of(p, "cwd").or(cwd).or_else(|| self.cwd.clone());
        self.ran.insert(id.clone());
        out.push(Step::Shell(Shell {
            id,
            argv,
            cwd,
            exit_code: p.get("exit_code").and_then(Value::as_i64).map(|c| c as i32),
            interrupted: false,
            stdout: str_of(p, "stdout")
                .or_else(|| str_of(p, "aggregated_output"))
                .unwrap_or_default(),
            stderr: str_of(p, "stderr").unwrap_or_default(),
            elapsed_us: duration_us(p.get("duration")),
        }));
    }

    /// A patch Codex applied, as it ended: its changes, or else the patch the call held.
    fn patch_apply_end(&mut self, p: &Value, out: &mut Vec<Step>) {
        self.flush(None, out);
        let id = call_id(p);
        let ok = p.get("success").and_then(Value::as_bool).unwrap_or(false);
        self.patched.insert(id.clone());
        let writes = match p.get("changes") {
            Some(Value::Object(changes)) => changes
                .iter()
                .filter_map(|(path, c)| patch::change(path, c))
                .collect(),
            _ => self
                .patches
                .get(&id)
                .map(|t| patch::parse(t))
                .unwrap_or_default(),
        };
        self.patches.remove(&id);
        for w in writes {
            out.push(Step::Write(Write {
                id: id.clone(),
                ok,
                ..w
            }));
        }
    }

    /// A completed turn item (newer Codex): a command, a file change or an MCP call.
    fn item_completed(&mut self, item: &Value, raw: &[u8], out: &mut Vec<Step>) {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        let id = item
            .get("call_id")
            .or_else(|| item.get("id"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let norm: String = kind
            .chars()
            .filter(|c| *c != '_')
            .collect::<String>()
            .to_ascii_lowercase();
        match norm.as_str() {
            "commandexecution" => self.command_execution(item, id, out),
            "filechange" => self.file_change(item, id, out),
            "mcptoolcall" => Self::mcp_tool_call(item, id, out),
            _ => out.push(Step::Item {
                kind: format!("event_msg:item_completed:{kind}"),
                unknown: !matches!(
                    norm.as_str(),
                    "agentmessage"
                        | "usermessage"
                        | "reasoning"
                        | "websearch"
                        | "plan"
                        | "todolist"
                        // Codex 0.171, multi-agent v2: a subagent's progress, and a call
                        // of a collaboration tool (spawn, wait, message) as it ended.
                        | "subagentactivity"
                        | "collabagenttoolcall"
                ),
                raw: raw.to_vec(),
            }),
        }
    }

    /// A completed command, unless its outcome is recorded already.
    fn command_execution(&mut self, item: &Value, id: String, out: &mut Vec<Step>) {
        if self.ran.contains(&id) {
            return;
        }
        self.ran.insert(id.clone());
        let argv = match self.shells.get(&id) {
            Some((a, _)) => a.clone(),
            None => command_of(item).0,
        };
        let exit = item
            .get("exit_code")
            .or_else(|| item.get("exitCode"))
            .and_then(Value::as_i64)
            .map(|c| c as i32);
        let status = item.get("status").and_then(Value::as_str).unwrap_or("");
        out.push(Step::Shell(Shell {
            id,
            argv,
            cwd: str_of(item, "cwd").or_else(|| self.cwd.clone()),
            exit_code: exit,
            interrupted: matches!(status, "interrupted" | "cancelled" | "declined"),
            stdout: str_of(item, "aggregated_output")
                .or_else(|| str_of(item, "aggregatedOutput"))
                .unwrap_or_default(),
            stderr: String::new(),
            elapsed_us: item
                .get("duration_ms")
                .or_else(|| item.get("durationMs"))
                .and_then(Value::as_u64)
                .map(|ms| ms * 1000),
        }));
    }

    /// A completed file change, unless its outcome is recorded already.
    fn file_change(&mut self, item: &Value, id: String, out: &mut Vec<Step>) {
        if self.patched.contains(&id) {
            return;
        }
        self.patched.insert(id.clone());
        self.patches.remove(&id);
        let status = item.get("status").and_then(Value::as_str).unwrap_or("");
        let ok = matches!(status, "completed" | "applied" | "success" | "");
        // A list of changes each naming its path, or (Codex 0.171) a map from
        // path to change.
        let writes: Vec<_> = match item.get("changes") {
            Some(Value::Array(changes)) => changes
                .iter()
                .filter_map(|c| {
                    let path = c.get("path").and_then(Value::as_str)?;
                    patch::change(path, c)
                })
                .collect(),
            Some(Value::Object(changes)) => changes
                .iter()
                .filter_map(|(path, c)| patch::change(path, c))
                .collect(),
            _ => Vec::new(),
        };
        for w in writes {
            out.push(Step::Write(Write {
                id: id.clone(),
                ok,
                ..w
            }));
        }
    }

    /// A completed MCP call: the call, then the server's answer when it holds one.
    fn mcp_tool_call(item: &Value, id: String, out: &mut Vec<Step>) {
        let mcp = McpRef {
            server: str_of(item, "server").unwrap_or_default(),
            tool: str_of(item, "tool").unwrap_or_default(),
        };
        out.push(Step::Call {
            id: id.clone(),
            tool: format!("mcp__{}__{}", mcp.server, mcp.tool),
            input: item.get("arguments").cloned().unwrap_or(Value::Null),
            mcp: Some(mcp),
        });
        // The server's answer, or the error that stood for one.
        let status = item.get("status").and_then(Value::as_str).unwrap_or("");
        let result = item
            .get("result")
            .filter(|r| !r.is_null())
            .or_else(|| item.get("error").filter(|e| !e.is_null()));
        if let Some(result) = result {
            let failed = status == "failed"
                || item.get("error").is_some_and(|e| !e.is_null())
                || result.get("isError").and_then(Value::as_bool) == Some(true);
            out.push(Step::McpResult {
                id,
                result: result.clone(),
                failed,
            });
        }
    }

    /// Ends the file: a response still gathered is written.
    pub fn finish(&mut self, out: &mut Vec<Step>) {
        self.flush(None, out);
    }
}

fn call_id(p: &Value) -> String {
    p.get("call_id")
        .or_else(|| p.get("id"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The MCP server and tool of a call: a `namespace` (`mcp__server`) or a qualified
/// name (`mcp__server__tool`). Other namespaces are Codex's own tools (multi-agent
/// v2's `collaboration`).
fn mcp_of(namespace: Option<&str>, name: &str) -> Option<McpRef> {
    if let Some(ns) = namespace {
        let server = ns.strip_prefix("mcp__")?;
        return Some(McpRef {
            server: server.to_string(),
            tool: name.to_string(),
        });
    }
    let rest = name.strip_prefix("mcp__")?;
    let (server, tool) = rest.split_once("__")?;
    Some(McpRef {
        server: server.to_string(),
        tool: tool.to_string(),
    })
}

/// The command of a shell-like call's input: `command` as an array or a string, or
/// `cmd`; and its working folder (`workdir`, `cwd`, `working_directory`).
fn command_of(input: &Value) -> (Vec<String>, Option<String>) {
    let cmd = input
        .get("command")
        .or_else(|| input.get("cmd"))
        .unwrap_or(&Value::Null);
    let argv = match cmd {
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
            .collect(),
        Value::String(s) => vec![s.clone()],
        _ => Vec::new(),
    };
    let cwd = ["workdir", "cwd", "working_directory"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .map(str::to_string);
    (argv, cwd)
}

/// A user message Codex adds itself (the environment, the user's instructions).
fn is_context(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("<environment_context>")
        || t.starts_with("<user_instructions>")
        || t.starts_with("# AGENTS.md instructions")
}

/// The text of a message's content: a string, or its text parts.
pub fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A call output: its text, whether it says it succeeded, and the exit code an older
/// file keeps in its `metadata`.
fn output_of(v: Option<&Value>) -> (String, Option<bool>, Option<i32>) {
    match v {
        Some(Value::String(s)) => {
            // Older files: the output is itself JSON, `{"output":…,"metadata":{…}}`.
            if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(s)
                && let Some(text) = o.get("output").and_then(Value::as_str)
            {
                let exit = o
                    .get("metadata")
                    .and_then(|m| m.get("exit_code"))
                    .and_then(Value::as_i64)
                    .map(|c| c as i32);
                return (text.to_string(), None, exit);
            }
            (s.clone(), None, None)
        }
        Some(Value::Object(o)) => {
            let text = match o.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(c) => content_text(Some(c)),
                None => String::new(),
            };
            (text, o.get("success").and_then(Value::as_bool), None)
        }
        // Codex 0.171: content parts (`input_text`, …), an MCP call's output among them.
        Some(parts @ Value::Array(_)) => (content_text(Some(parts)), None, None),
        Some(other) => (other.to_string(), None, None),
        None => (String::new(), None, None),
    }
}

/// What a shell tool's output text says: `Exit code: N` (or `Process exited with code
/// N`), `Wall time: S seconds`, and the output after `Output:`.
pub struct ExecText {
    pub exit_code: Option<i32>,
    pub elapsed_us: Option<u64>,
    pub output: String,
}

pub fn parse_exec_output(text: &str) -> ExecText {
    let mut exit_code = None;
    let mut elapsed_us = None;
    let mut output = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let l = line.trim_end();
        if exit_code.is_none()
            && let Some(n) = l
                .strip_prefix("Exit code: ")
                .or_else(|| l.strip_prefix("Process exited with code "))
        {
            exit_code = n.trim().parse().ok();
        } else if elapsed_us.is_none()
            && let Some(s) = l.strip_prefix("Wall time: ")
        {
            elapsed_us = s
                .trim_end_matches("seconds")
                .trim()
                .parse::<f64>()
                .ok()
                .map(|s| (s * 1e6) as u64);
        } else if l == "Output:" {
            output = Some(text[offset + line.len()..].to_string());
            break;
        }
        offset += line.len();
    }
    ExecText {
        exit_code,
        elapsed_us,
        output: output.unwrap_or_else(|| text.to_string()),
    }
}

fn patch_succeeded(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("Success")
        || t.starts_with("Done!")
        || parse_exec_output(text).exit_code == Some(0)
}

/// `{"secs":…,"nanos":…}` or a number of seconds, in microseconds.
fn duration_us(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Object(o) => {
            let s = o.get("secs").and_then(Value::as_u64).unwrap_or(0);
            let n = o.get("nanos").and_then(Value::as_u64).unwrap_or(0);
            Some(s * 1_000_000 + n / 1000)
        }
        Value::Number(n) => n.as_f64().map(|s| (s * 1e6) as u64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_output_text_gives_exit_code_time_and_output() {
        let t = parse_exec_output("Exit code: 2\nWall time: 0.5 seconds\nOutput:\nno such file\n");
        assert_eq!(
            (t.exit_code, t.elapsed_us, t.output.as_str()),
            (Some(2), Some(500_000), "no such file\n")
        );
        let t = parse_exec_output("Process exited with code 0\nOutput:\nok\n");
        assert_eq!((t.exit_code, t.output.as_str()), (Some(0), "ok\n"));
        let t = parse_exec_output("plain");
        assert_eq!((t.exit_code, t.output.as_str()), (None, "plain"));
    }

    #[test]
    fn mcp_calls_are_named_by_namespace_or_qualified_name() {
        let m = |server: &str, tool: &str| {
            Some(McpRef {
                server: server.into(),
                tool: tool.into(),
            })
        };
        assert_eq!(mcp_of(Some("mcp__cairn"), "read"), m("cairn", "read"));
        assert_eq!(mcp_of(None, "mcp__docs__search"), m("docs", "search"));
        assert_eq!(mcp_of(None, "shell"), None);
        assert_eq!(mcp_of(Some("collaboration"), "spawn_agent"), None);
    }
}
