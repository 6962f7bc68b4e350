//! Another agent recorded live, through its hooks: Claude Code (and Codex, whose
//! hooks speak the same protocol) run `cairn hook <agent>` before and after each
//! built-in tool call, at each prompt and at the session's start and end, with one
//! JSON object on stdin (`session_id`, `transcript_path`, `cwd`, `hook_event_name`,
//! `tool_name`, `tool_input`, `tool_use_id`, `tool_response`, …).
//!
//! Each agent session is one cairn session (`session_started.agent`), in the project
//! of the agent's project folder. Every hook is a process of its own: it takes the
//! agent session's lock (`<project>/hooks/<agent>-<session id>.lock`, so that
//! parallel calls append one after the other), reopens the log, appends, and goes.
//! What a call started and has not finished yet (its cairn id, the content of the
//! file it is about to write) waits in `<agent>-<session id>.json` beside the lock,
//! a cache of facts the log holds too.
//!
//! `PreToolUse` records `tool_started` and cairn's permission question and answer
//! ([`cairn_engine::hook`]), and keeps the content of a file an edit is about to
//! change as a blob; `PostToolUse` (or `PostToolUseFailure`) records what the call
//! did (a command as `shell_exec`, a write as `file_write` with the content after
//! read from disk, lines read as `file_read`, a fetch as `web_fetched`) and
//! `tool_finished`; `SessionEnd` ends the session, finishing calls left open as
//! interrupted. An event after the end resumes the session (`session_resumed`).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use cairn_core::event::{Agent, Answer, AnswerSource, Event, Status, WriteOp};
use cairn_core::permission::CredentialFiles;
use cairn_engine::Home;
use cairn_engine::hook::{Unlisted, Verdict};
use cairn_store::{BlobRef, Hash};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{ImportError, Result};
use crate::step::Step;
use crate::writer::Writer;

/// The largest file whose content before and after a write is kept; a larger one is
/// recorded as written, its content unknown.
pub const HOOK_FILE_BYTES_MAX: u64 = 64 << 20;

/// The largest hook input read, in bytes (a tool's whole response can be large).
pub const HOOK_INPUT_BYTES_MAX: u64 = 64 << 20;

/// Bytes read from each end of a transcript to find the agent's version.
pub const VERSION_SCAN_BYTES_MAX: u64 = 64 << 10;

/// What the hook answers the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    /// The JSON to print on stdout, if any.
    pub output: Option<Value>,
    /// The cairn session the event was recorded in.
    pub session: String,
    pub verdict: Option<Verdict>,
}

/// The hook's settings.
#[derive(Debug, Clone)]
pub struct HookOptions {
    /// `claude`, `codex`, `gemini` or `opencode`.
    pub agent: String,
    /// Who answers what the allow list does not cover.
    pub unlisted: Unlisted,
    /// The agent's project folder, when it says it apart from `cwd`
    /// (`CLAUDE_PROJECT_DIR`).
    pub project_dir: Option<PathBuf>,
    /// The agent's version, when known without looking (else read from its
    /// transcript, or its package beside the program that started the hook).
    pub agent_version: Option<String>,
}

/// A call started and not finished yet.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Open {
    call: String,
    tool: String,
    /// A question was put to the person at the agent: answered yes if the call ran.
    #[serde(default)]
    asked: Option<String>,
    /// The files the call writes, each with its content before.
    #[serde(default)]
    files: Vec<OpenFile>,
}

/// A file a call is about to write.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct OpenFile {
    path: String,
    /// Its content before (`None`: there was none).
    #[serde(default)]
    before: Option<BlobRef>,
    /// The content before could not be kept (too large, a credential file, not
    /// readable).
    #[serde(default)]
    before_unknown: bool,
}

/// What one agent session's hooks keep between calls.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Sidecar {
    session: String,
    #[serde(default)]
    ended: bool,
    /// Open calls by the agent's call id.
    #[serde(default)]
    calls: BTreeMap<String, Open>,
}

fn bad(what: impl Into<String>) -> ImportError {
    ImportError::HookInput { what: what.into() }
}

/// The hook events cairn records.
const EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "SubagentStop",
    "Notification",
    "PreCompact",
    "SessionEnd",
];

/// A hook event read and checked whole, before anything is written: an event that
/// cannot be read is told so with the home left exactly as it was (no project folder,
/// no session, no allow list rewritten).
struct Incoming<'a> {
    event: &'a str,
    source_id: &'a str,
    /// The workspace, canonical.
    root: PathBuf,
    /// A `PreToolUse`'s tool and the need of its call (`None`: a tool cairn has no rule
    /// for).
    pre: Option<(&'a str, Option<cairn_core::permission::Need>)>,
    credentials: cairn_engine::hook::DefaultCredentials,
}

/// Reads `input` (see [`Incoming`]).
fn incoming<'a>(home: &Home, options: &HookOptions, input: &'a Value) -> Result<Incoming<'a>> {
    if !input.is_object() {
        return Err(bad("the hook input is not a JSON object"));
    }
    let string = |k: &str| -> Result<Option<&'a str>> {
        match input.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(v)) => Ok(Some(v.as_str())),
            Some(other) => Err(bad(format!("{k} is not a string but {other}"))),
        }
    };
    // Every field cairn reads, of the type the agents send.
    for k in [
        "transcript_path",
        "tool_use_id",
        "prompt",
        "reason",
        "error",
    ] {
        string(k)?;
    }
    let event = string("hook_event_name")?
        .ok_or_else(|| bad("no hook_event_name: is this command run by the agent's hooks?"))?;
    if !EVENTS.contains(&event) {
        return Err(bad(format!(
            "hook_event_name {event:?} is not one cairn records (SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, PostToolUseFailure, Stop, SessionEnd)"
        )));
    }
    let source_id = string("session_id")?.ok_or_else(|| bad("no session_id"))?;
    if source_id.is_empty()
        || !source_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(bad(format!(
            "session_id {source_id:?} is not a plain id (letters, digits, - and _)"
        )));
    }
    let cwd = string("cwd")?;
    let folder = match (&options.project_dir, cwd) {
        (Some(p), _) => p.clone(),
        (None, Some("")) => return Err(bad("cwd is empty: the agent names no folder")),
        (None, Some(c)) => PathBuf::from(c),
        (None, None) => return Err(bad("no cwd")),
    };
    let root = folder.canonicalize().map_err(ImportError::io(&folder))?;
    let tool = match event {
        "PreToolUse" | "PostToolUse" | "PostToolUseFailure" => {
            Some(string("tool_name")?.ok_or_else(|| bad(format!("{event} without tool_name")))?)
        }
        _ => None,
    };
    let credentials = cairn_engine::hook::DefaultCredentials::default();
    let pre = match (event, tool) {
        ("PreToolUse", Some(tool)) => {
            let cwd = cwd.map_or_else(|| root.clone(), |c| root.join(c));
            let exec_path = std::env::var_os("PATH");
            let at = cairn_engine::hook::At {
                root: &root,
                cwd: &cwd,
                home: &home.root,
                exec_path: exec_path.as_deref(),
            };
            let tool_input = input.get("tool_input").unwrap_or(&Value::Null);
            let need = cairn_engine::hook::need(tool, tool_input, &at, &credentials)
                .map_err(|e| bad(e.to_string()))?;
            Some((tool, need))
        }
        _ => None,
    };
    Ok(Incoming {
        event,
        source_id,
        root,
        pre,
        credentials,
    })
}

/// A Gemini CLI hook event in the words Claude Code's hooks use: `BeforeTool` is a
/// `PreToolUse`, `AfterTool` a `PostToolUse` (a `PostToolUseFailure`, its `error` the
/// message, when the tool's response carries an error), `BeforeAgent` a
/// `UserPromptSubmit`, `AfterAgent` a `Stop`, `PreCompress` a `PreCompact`; an MCP
/// server's tool (its `mcp_context`) is named `mcp__<server>__<tool>`, as Claude Code
/// names one, so that it is asked as `mcp:<server>:<tool>`. The other fields are the
/// same.
fn gemini_input(input: &Value) -> Value {
    let mut v = input.clone();
    if let (Some(server), Some(tool)) = (
        input
            .pointer("/mcp_context/server_name")
            .and_then(Value::as_str),
        input
            .pointer("/mcp_context/tool_name")
            .and_then(Value::as_str),
    ) {
        v["tool_name"] = json!(format!("mcp__{server}__{tool}"));
    }
    let error = input
        .pointer("/tool_response/error")
        .filter(|e| !e.is_null())
        .map(|e| {
            e.get("message")
                .and_then(Value::as_str)
                .map_or_else(|| e.to_string(), str::to_string)
        });
    let name = match input.get("hook_event_name").and_then(Value::as_str) {
        Some("BeforeTool") => "PreToolUse",
        Some("AfterTool") if error.is_some() => "PostToolUseFailure",
        Some("AfterTool") => "PostToolUse",
        Some("BeforeAgent") => "UserPromptSubmit",
        Some("AfterAgent") => "Stop",
        Some("PreCompress") => "PreCompact",
        _ => return v,
    };
    v["hook_event_name"] = json!(name);
    if let Some(e) = error {
        v["error"] = json!(e);
    }
    v
}

/// Handles one hook event `input` of an agent session.
pub fn handle(home: &Home, options: &HookOptions, input: &Value) -> Result<Answered> {
    let shaped;
    let input = match options.agent.as_str() {
        "gemini" => {
            shaped = gemini_input(input);
            &shaped
        }
        "opencode" => {
            shaped = crate::opencode::hook_input(input);
            &shaped
        }
        _ => input,
    };
    // OpenCode's plugin says the version its session was made by.
    let with_version;
    let options = match input.get("version").and_then(Value::as_str) {
        Some(v) if options.agent == "opencode" && options.agent_version.is_none() => {
            with_version = HookOptions {
                agent_version: Some(v.to_string()),
                ..options.clone()
            };
            &with_version
        }
        _ => options,
    };
    let Incoming {
        event,
        source_id,
        root,
        pre,
        credentials,
    } = incoming(home, options, input)?;
    let root = root.as_path();
    let project = home.project(root);
    let hooks_dir = project.dir.join("hooks");
    cairn_store::private::create_dir_all(&hooks_dir).map_err(ImportError::io(&hooks_dir))?;
    let stem = format!("{}-{source_id}", options.agent);
    let lock = lock_session(&hooks_dir.join(format!("{stem}.lock")))?;
    let side_path = hooks_dir.join(format!("{stem}.json"));
    let mut side = read_sidecar(&side_path)?;
    let mut writer = match &mut side {
        Some(sc) => reopen_writer(home, &project, sc, &options.agent)?,
        None => {
            let w = create_writer(home, options, &project, root, source_id, input)?;
            side = Some(Sidecar {
                session: w.id.clone(),
                ..Sidecar::default()
            });
            w
        }
    };
    let Some(side_ref) = side.as_mut() else {
        unreachable!("the sidecar was read or made above");
    };
    let reply = record_event(
        &mut writer,
        side_ref,
        options,
        root,
        input,
        (event, pre),
        &credentials,
    )?;
    let session = writer.id.clone();
    match reply.end {
        Some(reason) => {
            writer.end_live(&reason)?;
            side_ref.ended = true;
            side_ref.calls.clear();
        }
        None => {
            // The state at the head kept as the session's snapshot: the next event's
            // process reads it instead of folding the log from its start.
            writer.close_cached()?;
        }
    }
    write_atomic(
        &side_path,
        &serde_json::to_vec(&side).map_err(|e| bad(e.to_string()))?,
    )?;
    drop(lock);
    Ok(Answered {
        output: reply.output,
        session,
        verdict: reply.verdict,
    })
}

/// The version of `agent` that the session recorded live through its hook for the
/// agent's session `source_id` in the workspace `root` was labelled with: what an
/// import of the agent's own saved session labels it with when the file names no
/// version (Gemini CLI's chats). `None` when no hook saw that session.
pub(crate) fn live_version(
    home: &Home,
    root: &Path,
    agent: &str,
    source_id: &str,
) -> Option<String> {
    if source_id.is_empty()
        || !source_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return None;
    }
    let project = home.project(root);
    let side_path = project
        .dir
        .join("hooks")
        .join(format!("{agent}-{source_id}.json"));
    let side = read_sidecar(&side_path).ok()??;
    let started = crate::writer::first_started(&project.session_dir(&side.session)).ok()?;
    started
        .agent
        .filter(|a| a.name == agent)
        .and_then(|a| a.version)
}

/// The agent session's lock, taken: parallel calls of one agent session append one
/// after the other.
fn lock_session(lock_path: &Path) -> Result<std::fs::File> {
    let lock = cairn_store::private::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(lock_path)
        .map_err(ImportError::io(lock_path))?;
    lock.lock().map_err(ImportError::io(lock_path))?;
    Ok(lock)
}

/// The sidecar of the agent session, `None` before its first event.
fn read_sidecar(side_path: &Path) -> Result<Option<Sidecar>> {
    match std::fs::read(side_path) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).map_err(|e| {
            bad(format!(
                "{}: {e} (remove it to start a new cairn session for this agent session)",
                side_path.display()
            ))
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ImportError::io(side_path)(e)),
    }
}

/// The cairn session of a known agent session, reopened: resumed if it had ended,
/// with the calls it left open adopted.
fn reopen_writer(
    home: &Home,
    project: &cairn_engine::Project,
    sc: &mut Sidecar,
    agent: &str,
) -> Result<Writer> {
    let mut w = Writer::reopen(home, &project.session_dir(&sc.session), agent)?;
    if sc.ended {
        let head = w.head();
        w.record(&Event::SessionResumed {
            previous_head: head.1,
            findings: Vec::new(),
            interrupted_steps: Vec::new(),
            sandbox: None,
            imported: None,
        })?;
        sc.ended = false;
    }
    for (id, open) in &sc.calls {
        w.adopt(id, &open.call, &open.tool);
    }
    Ok(w)
}

/// A new cairn session for an agent session seen for the first time, marked the
/// project's last.
fn create_writer(
    home: &Home,
    options: &HookOptions,
    project: &cairn_engine::Project,
    root: &Path,
    source_id: &str,
    input: &Value,
) -> Result<Writer> {
    let version = options
        .agent_version
        .clone()
        .or_else(|| {
            input
                .get("transcript_path")
                .and_then(Value::as_str)
                .and_then(|p| version_in(Path::new(p)))
        })
        .or_else(|| version_of_parent(&options.agent));
    let allow = cairn_engine::permission::AllowList::new(&project.dir)
        .with_signer(home.log_signer()?)
        .audit()?
        .keys
        .into_iter()
        .collect();
    let w = Writer::create_live(
        home,
        root,
        Agent {
            name: options.agent.clone(),
            version,
            via: "hook".into(),
            source_id: Some(source_id.to_string()),
        },
        allow,
    )?;
    project.mark(home, &w.id, cairn_engine::Handle::Last)?;
    Ok(w)
}

/// What recording one event gives back: the JSON for the agent, the verdict on a
/// call, and the reason the session ends.
#[derive(Default)]
struct Reply {
    output: Option<Value>,
    verdict: Option<Verdict>,
    end: Option<String>,
}

/// Records one event in the session.
fn record_event(
    writer: &mut Writer,
    side: &mut Sidecar,
    options: &HookOptions,
    root: &Path,
    input: &Value,
    (event, pre): (&str, Option<(&str, Option<cairn_core::permission::Need>)>),
    credentials: &cairn_engine::hook::DefaultCredentials,
) -> Result<Reply> {
    let s = |k: &str| input.get(k).and_then(Value::as_str);
    let mut reply = Reply::default();
    match event {
        "SessionStart" | "Stop" | "SubagentStop" | "Notification" | "PreCompact" => {}
        "UserPromptSubmit" => {
            if let Some(p) = s("prompt") {
                writer.step(Step::User {
                    text: p.to_string(),
                })?;
            }
        }
        "PreToolUse" => {
            let Some(pre) = pre else {
                unreachable!("a PreToolUse is read with its tool");
            };
            let (v, out) = pre_tool_use(writer, side, options, root, input, pre, credentials)?;
            reply.verdict = Some(v);
            reply.output = out;
        }
        "PostToolUse" | "PostToolUseFailure" => {
            post_tool_use(
                writer,
                side,
                options,
                root,
                input,
                event == "PostToolUseFailure",
            )?;
        }
        "SessionEnd" => {
            reply.end = Some(format!(
                "{} session ended ({})",
                options.agent,
                s("reason").unwrap_or("no reason given")
            ));
        }
        other => unreachable!("{other} is checked above"),
    }
    Ok(reply)
}

fn pre_tool_use(
    w: &mut Writer,
    side: &mut Sidecar,
    options: &HookOptions,
    root: &Path,
    input: &Value,
    (tool, need): (&str, Option<cairn_core::permission::Need>),
    credentials: &cairn_engine::hook::DefaultCredentials,
) -> Result<(Verdict, Option<Value>)> {
    let tool_input = input.get("tool_input").cloned().unwrap_or(Value::Null);
    let id = call_id(input, w);
    w.step(Step::Call {
        id: id.clone(),
        tool: tool.to_string(),
        input: tool_input.clone(),
        mcp: mcp_ref(tool),
    })?;
    let call = w.call_id(&id).unwrap_or_default().to_string();
    let mut open = Open {
        call: call.clone(),
        tool: tool.to_string(),
        ..Open::default()
    };
    let verdict = match need {
        None => Verdict::Abstain,
        Some(need) => {
            let guards = cairn_core::command::default_guards();
            let (permission, verdict) =
                cairn_engine::hook::verdict(w.state(), need, &guards, options.unlisted);
            record_permission(w, &call, tool, &permission, &verdict)?;
            // Asked of the person, by cairn or (a read-only line) by the agent as it
            // would be without cairn: the answer is known when the call runs.
            if let (
                Verdict::Ask { .. } | Verdict::Abstain,
                cairn_core::decide::Permission::Ask(q),
            ) = (&verdict, &permission)
            {
                open.asked = Some(q.key.clone());
            }
            verdict
        }
    };
    if let Verdict::Deny { reason } = &verdict {
        // It will not run: finished here, as cairn's own denied calls are.
        w.step(Step::End {
            id: id.clone(),
            status: Status::Denied,
            output: reason.clone(),
        })?;
    } else {
        let cwd = input
            .get("cwd")
            .and_then(Value::as_str)
            .map_or(root.to_path_buf(), PathBuf::from);
        for path in written_paths(tool, &tool_input) {
            let abs = cwd.join(&path);
            let mut file = OpenFile {
                path: abs.to_string_lossy().into_owned(),
                ..OpenFile::default()
            };
            match capture(&abs, root, credentials.get()) {
                Captured::Content(bytes) => file.before = Some(w.blob(&bytes)?),
                Captured::Missing => {}
                Captured::Unknown => file.before_unknown = true,
            }
            open.files.push(file);
        }
        side.calls.insert(id, open);
    }
    Ok((verdict.clone(), answer(&options.agent, &verdict)))
}

fn record_permission(
    w: &mut Writer,
    call: &str,
    tool: &str,
    permission: &cairn_core::decide::Permission,
    verdict: &Verdict,
) -> Result<()> {
    use cairn_core::decide::Permission;
    match permission {
        Permission::Auto => Ok(()),
        Permission::AllowList(q) => w.record(&Event::PermissionDecided {
            call: call.to_string(),
            key: q.key.clone(),
            answer: Answer::Always,
            source: AnswerSource::AllowList,
            grants: Some(Vec::new()),
        }),
        Permission::Ask(q) => {
            w.record(&Event::PermissionRequested {
                call: call.to_string(),
                key: q.key.clone(),
                detail: q.detail.clone(),
                tool: tool.to_string(),
                guarded: q.guarded,
                keys: q.keys.clone(),
                reasons: q.reasons.clone(),
                guards: q.guards.clone(),
            })?;
            let answer = match verdict {
                Verdict::Deny { .. } => Answer::Deny,
                Verdict::Allow { .. } => Answer::Once,
                // Answered by the person at the agent: known when the call runs.
                _ => return Ok(()),
            };
            w.record(&Event::PermissionDecided {
                call: call.to_string(),
                key: q.key.clone(),
                answer,
                source: AnswerSource::Policy,
                grants: None,
            })
        }
    }
}

fn post_tool_use(
    w: &mut Writer,
    side: &mut Sidecar,
    options: &HookOptions,
    root: &Path,
    input: &Value,
    failed: bool,
) -> Result<()> {
    let tool = input
        .get("tool_name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("PostToolUse without tool_name"))?
        .to_string();
    let tool_input = input.get("tool_input").cloned().unwrap_or(Value::Null);
    let id = call_id(input, w);
    let open = match side.calls.remove(&id) {
        Some(o) => o,
        None => start_unseen(w, root, &id, &tool, &tool_input)?,
    };
    if let Some(key) = &open.asked {
        // It ran: the person at the agent said yes.
        w.record(&Event::PermissionDecided {
            call: open.call.clone(),
            key: key.clone(),
            answer: Answer::Once,
            source: AnswerSource::User,
            grants: None,
        })?;
    }
    let response = input.get("tool_response").cloned().unwrap_or(Value::Null);
    let output = if failed {
        input
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("the call failed")
            .to_string()
    } else {
        response_text(&response)
    };
    let cwd = input.get("cwd").and_then(Value::as_str).map(str::to_string);
    let mut steps = Vec::new();
    if options.agent == "opencode" {
        let error = failed.then(|| output.clone());
        crate::opencode::result_steps(&id, &tool, &tool_input, &response, error, cwd, &mut steps);
    } else if options.agent == "gemini" {
        // `{llmContent, returnDisplay, error}`: what the model was told, and what the
        // person saw (an edit's content before and after).
        let told = response_text(response.get("llmContent").unwrap_or(&Value::Null));
        let display = response
            .get("returnDisplay")
            .cloned()
            .unwrap_or(Value::Null);
        crate::gemini::result_steps(
            &id,
            &tool,
            &tool_input,
            &display,
            told,
            failed.then(|| output.clone()),
            false,
            cwd,
            &mut steps,
        );
    } else {
        crate::claude::result_steps(
            &id,
            &tool,
            &tool_input,
            &response,
            output,
            failed,
            cwd,
            &mut steps,
        );
    }
    for step in steps {
        match step {
            // The write as the disk shows it, not as the agent said it.
            Step::Write(_) => {}
            // Codex 0.171 gives a command's output alone, as text, success or not: the
            // exit code is known only when the text says it, else it is unknown (the
            // command's status `lost`), never taken for 0.
            Step::Shell(mut sh) if response.is_string() && !failed => {
                sh.exit_code = text_exit_code(&sh.stdout);
                w.step(Step::Shell(sh))?;
            }
            Step::End {
                id: end_id,
                mut status,
                output,
            } => {
                // Codex's result text states how a patch or command exited, in its
                // header, when it does: a non-zero exit is a failed call.
                if let Some(text) = response.as_str()
                    && status == Status::Ok
                    && text_exit_code(text).is_some_and(|c| c != 0)
                {
                    status = Status::Error;
                }
                for file in &open.files {
                    record_write(w, &id, &tool, file, root, status == Status::Ok)?;
                }
                w.step(Step::End {
                    id: end_id,
                    status,
                    output,
                })?;
            }
            other => w.step(other)?,
        }
    }
    Ok(())
}

/// A call whose `PreToolUse` was not seen (hooks installed mid-call), started now:
/// the content before of the files it writes is unknown.
fn start_unseen(
    w: &mut Writer,
    root: &Path,
    id: &str,
    tool: &str,
    tool_input: &Value,
) -> Result<Open> {
    w.step(Step::Call {
        id: id.to_string(),
        tool: tool.to_string(),
        input: tool_input.clone(),
        mcp: mcp_ref(tool),
    })?;
    Ok(Open {
        call: w.call_id(id).unwrap_or_default().to_string(),
        tool: tool.to_string(),
        files: written_paths(tool, tool_input)
            .into_iter()
            .map(|p| OpenFile {
                path: root.join(p).to_string_lossy().into_owned(),
                before: None,
                before_unknown: true,
            })
            .collect(),
        ..Open::default()
    })
}

/// The exit code a command's result text states in its header, as Codex writes one
/// for the model (`Exit code: N` or `Process exited with code N`, then `Output:`);
/// `None` for text without such a header (what the command printed is never read
/// for it).
fn text_exit_code(text: &str) -> Option<i32> {
    let header: Vec<&str> = text.lines().take_while(|l| l.trim() != "Output:").collect();
    if header.len() == text.lines().count() {
        return None;
    }
    header.iter().find_map(|l| {
        let l = l.trim();
        l.strip_prefix("Exit code: ")
            .or_else(|| l.strip_prefix("Process exited with code "))
            .and_then(|n| n.trim().parse().ok())
    })
}

/// The files a call of `tool` writes, as given: Claude Code's edits and writes name
/// one, Codex's `apply_patch` names each in its envelope (`*** Add File:`,
/// `*** Update File:`, `*** Delete File:`, `*** Move to:`).
fn written_paths(tool: &str, input: &Value) -> Vec<String> {
    if let Some((shaped, input)) = cairn_engine::hook::claude_shaped(tool, input) {
        return written_paths(shaped, &input);
    }
    let s = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
    match tool {
        "Edit" | "MultiEdit" | "Write" => s("file_path").into_iter().collect(),
        "NotebookEdit" => s("notebook_path").into_iter().collect(),
        "apply_patch" => {
            let patch = match input {
                Value::String(p) => Some(p.clone()),
                _ => s("command").or(s("input")).or(s("patch")),
            };
            patch.map_or_else(Vec::new, |p| cairn_engine::hook::patch_paths(&p))
        }
        _ => Vec::new(),
    }
}

enum Captured {
    Content(Vec<u8>),
    Missing,
    Unknown,
}

/// A file's content as a write finds it: a credential file, a file past
/// [`HOOK_FILE_BYTES_MAX`] or one that is not a regular file is not kept.
fn capture(abs: &Path, root: &Path, credentials: &CredentialFiles) -> Captured {
    if let Ok(rel) = abs.strip_prefix(root)
        && credentials.matches(&rel.to_string_lossy())
    {
        return Captured::Unknown;
    }
    // Named harmlessly, a link to a credential file is one all the same.
    if let Ok(real) = std::fs::canonicalize(abs)
        && credentials.matches(&real.strip_prefix(root).unwrap_or(&real).to_string_lossy())
    {
        return Captured::Unknown;
    }
    let meta = match std::fs::symlink_metadata(abs) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Captured::Missing,
        Err(_) => return Captured::Unknown,
    };
    if !meta.is_file() || meta.len() > HOOK_FILE_BYTES_MAX {
        return Captured::Unknown;
    }
    let mut bytes = Vec::new();
    match std::fs::File::open(abs)
        .and_then(|f| f.take(HOOK_FILE_BYTES_MAX + 1).read_to_end(&mut bytes))
    {
        Ok(_) if bytes.len() as u64 <= HOOK_FILE_BYTES_MAX => Captured::Content(bytes),
        Ok(_) => Captured::Unknown,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Captured::Missing,
        Err(_) => Captured::Unknown,
    }
}

/// The agent's id of a call: `tool_use_id`, else one made of the tool and input
/// (a PreToolUse and its PostToolUse carry the same).
fn call_id(input: &Value, _w: &Writer) -> String {
    if let Some(id) = input.get("tool_use_id").and_then(Value::as_str)
        && !id.is_empty()
    {
        return id.to_string();
    }
    let text = format!(
        "{}\n{}",
        input.get("tool_name").and_then(Value::as_str).unwrap_or(""),
        cairn_core::state::canonical_json(input.get("tool_input").unwrap_or(&Value::Null))
    );
    format!("h{}", &Hash::of(text.as_bytes()).to_string()[..16])
}

fn mcp_ref(tool: &str) -> Option<cairn_core::event::McpRef> {
    let rest = tool.strip_prefix("mcp__")?;
    let (server, name) = rest.split_once("__")?;
    Some(cairn_core::event::McpRef {
        server: server.to_string(),
        tool: name.to_string(),
    })
}

/// What a call's result says, as text.
fn response_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Object(o) if o.contains_key("stdout") => {
            let out = o.get("stdout").and_then(Value::as_str).unwrap_or("");
            let err = o.get("stderr").and_then(Value::as_str).unwrap_or("");
            if err.is_empty() {
                out.to_string()
            } else {
                format!("{out}\n{err}")
            }
        }
        // Gemini CLI's `llmContent` as parts.
        Value::Array(parts) if parts.iter().all(|p| p.get("text").is_some()) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// The JSON that tells the agent the verdict. Codex honours only a denial: to allow
/// or ask, its hook says nothing and Codex's own approval policy goes on. Gemini CLI
/// takes `{decision, reason}`.
fn answer(agent: &str, verdict: &Verdict) -> Option<Value> {
    let (decision, reason) = match verdict {
        Verdict::Abstain => return None,
        Verdict::Allow { reason } => ("allow", reason),
        Verdict::Ask { reason } => ("ask", reason),
        Verdict::Deny { reason } => ("deny", reason),
    };
    if agent == "codex" && decision != "deny" {
        return None;
    }
    // Gemini CLI: a denial refuses the call, an ask puts it to the person; to allow,
    // nothing is said and its own approval goes on.
    // OpenCode's plugin throws, so that the call does not run, for a denial and for
    // an ask alike: a plugin cannot put a question to the person.
    if agent == "opencode" {
        return (decision != "allow").then(|| json!({"decision": "deny", "reason": reason}));
    }
    if agent == "gemini" {
        return (decision != "allow").then(|| json!({"decision": decision, "reason": reason}));
    }
    Some(json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }))
}

/// The agent's version from its transcript: Claude Code writes `version` on each
/// line, Codex `cli_version` in its first.
fn version_in(path: &Path) -> Option<String> {
    use std::io::{Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let mut head = Vec::new();
    (&mut f)
        .take(VERSION_SCAN_BYTES_MAX)
        .read_to_end(&mut head)
        .ok()?;
    let mut tail = Vec::new();
    if len > VERSION_SCAN_BYTES_MAX {
        f.seek(SeekFrom::Start(len - VERSION_SCAN_BYTES_MAX)).ok()?;
        f.take(VERSION_SCAN_BYTES_MAX).read_to_end(&mut tail).ok()?;
    }
    for chunk in [&tail, &head] {
        for line in chunk.split(|b| *b == b'\n').rev() {
            let Ok(v) = serde_json::from_slice::<Value>(line) else {
                continue;
            };
            let found = v
                .get("version")
                .or_else(|| v.pointer("/payload/cli_version"))
                .and_then(Value::as_str);
            if let Some(found) = found {
                return Some(found.to_string());
            }
        }
    }
    None
}

/// The agent's version from the package of the program that ran this hook: the
/// first ancestor process (up to four up) whose command line names a script of
/// `@anthropic-ai/claude-code` or `@openai/codex`, read from its `package.json`.
fn version_of_parent(agent: &str) -> Option<String> {
    let package = match agent {
        "claude" => "@anthropic-ai/claude-code",
        "codex" => "@openai/codex",
        "gemini" => "@google/gemini-cli",
        "opencode" => "opencode-ai",
        _ => return None,
    };
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..4 {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        for arg in cmdline.split(|b| *b == 0) {
            let arg = Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(arg));
            let resolved = std::fs::canonicalize(arg).unwrap_or_else(|_| arg.to_path_buf());
            for dir in resolved.ancestors().skip(1).take(4) {
                let Ok(text) = std::fs::read(dir.join("package.json")) else {
                    continue;
                };
                let Ok(v) = serde_json::from_slice::<Value>(&text) else {
                    continue;
                };
                if v.get("name").and_then(Value::as_str) == Some(package) {
                    return v.get("version").and_then(Value::as_str).map(str::to_string);
                }
            }
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid …`: comm may hold spaces, so from the last `)`.
        let after = &stat[stat.rfind(')')? + 1..];
        pid = after.split_whitespace().nth(1)?.parse().ok()?;
        if pid <= 1 {
            return None;
        }
    }
    None
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes).map_err(ImportError::io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(ImportError::io(path))
}

/// The write of `file` by a finished call, recorded from disk.
fn record_write(
    w: &mut Writer,
    id: &str,
    tool: &str,
    file: &OpenFile,
    root: &Path,
    ok: bool,
) -> Result<()> {
    let credentials = cairn_engine::hook::DefaultCredentials::default();
    let (before, before_unknown) = (file.before, file.before_unknown);
    let captured = capture(Path::new(&file.path), root, credentials.get());
    let gone = matches!(captured, Captured::Missing);
    let after = match captured {
        Captured::Content(bytes) => {
            let lines = bytes.iter().filter(|b| **b == b'\n').count() as u32
                + u32::from(!bytes.is_empty() && !bytes.ends_with(b"\n"));
            Some((w.blob(&bytes)?, lines))
        }
        Captured::Missing | Captured::Unknown => None,
    };
    if after.map(|a| a.0) == before && !before_unknown && (!ok || before.is_some() || gone) {
        // Nothing changed (a failed call, a patch that left this file as it was, or a
        // file that was not there and still is not).
        return Ok(());
    }
    let op = match (before, before_unknown, tool) {
        (Some(_), _, _) if gone => WriteOp::Delete,
        (None, false, _) => WriteOp::Create,
        (_, _, "Write") => WriteOp::Replace,
        _ => WriteOp::Edit,
    };
    w.file_write(id, &file.path, op, before, after, ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_a_call_writes_are_named_by_its_input() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("Edit", json!({"file_path": "/w/a.rs"}), vec!["/w/a.rs"]),
            (
                "Write",
                json!({"file_path": "b.txt", "content": ""}),
                vec!["b.txt"],
            ),
            (
                "NotebookEdit",
                json!({"notebook_path": "n.ipynb"}),
                vec!["n.ipynb"],
            ),
            (
                "apply_patch",
                json!({"command": "*** Begin Patch\n*** Add File: new.txt\n+x\n*** Update File: a.rs\n*** Move to: b.rs\n@@\n-a\n+b\n*** Delete File: old.txt\n*** Update File: a.rs\n*** End Patch\n"}),
                vec!["new.txt", "a.rs", "b.rs", "old.txt"],
            ),
            ("Bash", json!({"command": "echo > x"}), vec![]),
            ("Read", json!({"file_path": "a.rs"}), vec![]),
        ];
        for (tool, input, want) in cases {
            assert_eq!(written_paths(tool, &input), want, "{tool} {input}");
        }
    }

    #[test]
    fn an_exit_code_is_read_only_where_the_text_states_it() {
        let cases = [
            ("Exit code: 0\nWall time: 0 seconds\nOutput:\nok\n", Some(0)),
            (
                "Chunk ID: e5\nProcess exited with code 2\nOutput:\nls: x\n",
                Some(2),
            ),
            ("ls: cannot access 'x': No such file or directory\n", None),
            ("the Exit code: 3 was printed by the program\n", None),
            ("Exit code: 3\n", None),
            ("Output:\nExit code: 3\n", None),
        ];
        for (text, want) in cases {
            assert_eq!(text_exit_code(text), want, "{text}");
        }
    }
}
