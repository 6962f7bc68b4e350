//! Another agent's tool calls put to cairn's permission rules: what cairn would ask
//! before it ran the same call itself (the key of each program a command line runs,
//! `edit_file` for an edit, `web_fetch:<host>` for a fetch, `<tool>@<folder>` outside
//! the workspace, a credential file every time), answered from the session's allow
//! list with [`cairn_core::decide::permission`], the function cairn's own calls and
//! `verify` use.
//!
//! The agents' hooks (Claude Code's and Codex's `PreToolUse`) call this before each
//! of their built-in tools runs; the agent then runs it, or not, as the verdict says.
//! That verdict is the only guard: the agent opens the paths and runs the programs
//! itself. So a path is judged where the kernel takes it, symlinks followed by
//! descriptor and `..` physically ([`cairn_tools::landing`]), not where its text seems
//! to point, and an argv is read as a shell line only when its program is one of the
//! system's shells, found as `execvp` finds it.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use cairn_core::command::{Analysis, Guard};
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

/// Where a call's paths and programs are judged: the agent's workspace, the folder its
/// tool runs in, the cairn home and the `PATH` its commands are looked up on.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    /// The workspace root, canonical.
    pub root: &'a Path,
    /// The folder a relative path is taken from (the event's `cwd`), absolute.
    pub cwd: &'a Path,
    /// The cairn home, canonical (as [`crate::Home::at`] makes it).
    pub home: &'a Path,
    /// `PATH` as the agent runs its commands (`None`: unset).
    pub exec_path: Option<&'a OsStr>,
}

/// A call whose input does not say what cairn needs to judge it: a tool cairn has a
/// rule for without the path, command, patch or URL the rule is about, or with one of
/// another type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {tool} call {what}")]
pub struct Unreadable {
    pub tool: String,
    pub what: String,
}

/// The need of a call of the agent's tool `tool` with `input`, judged `at` the
/// agent's workspace: `None` for a tool cairn has no rule for (its to-do lists,
/// subagents, …). Tools are named as Claude Code names them (`Bash`, `Edit`,
/// `MultiEdit`, `Write`, `NotebookEdit`, `Read`, `Grep`, `Glob`, `LS`, `WebFetch`,
/// `WebSearch`, `mcp__<server>__<tool>`) and as Codex does (`Bash`, `apply_patch`,
/// `mcp__…`).
///
/// The agent opens a path itself, after this answer, so a path is judged where the
/// kernel takes it ([`cairn_tools::landing`]): a path inside the workspace that leads
/// out through a symlink asks for `<tool>@<folder>` of the folder it really reaches,
/// never answered by a grant of the tool inside.
pub fn need(
    tool: &str,
    input: &Value,
    at: &At<'_>,
    credentials: &DefaultCredentials,
) -> Result<Option<Need>, Unreadable> {
    if let Some((shaped, input)) = claude_shaped(tool, input) {
        return need(shaped, &input, at, credentials);
    }
    let f = Fields { tool, input };
    Ok(Some(match tool {
        "Bash" | "shell" | "exec_command" | "local_shell" => {
            f.object()?;
            command_need(&f, at)?
        }
        "Edit" | "MultiEdit" | "NotebookEdit" | "Write" => {
            f.object()?;
            edit_need(&f, at, credentials)?
        }
        "apply_patch" => {
            // Codex gives the patch as `{"command": …}` (or `input`, `patch`), or whole.
            let patch = match input {
                Value::String(p) => p.as_str(),
                Value::Object(_) => match f.field("command")?.or(f.field("input")?) {
                    Some(p) => p,
                    None => f.required("patch")?,
                },
                _ => return Err(f.unreadable("has a tool_input that is not a patch")),
            };
            let paths = patch_paths(patch);
            let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
            let detail = format!("write_patch:\n{patch}");
            files_need(at, "write_patch", Some(detail), &paths, input, credentials)
        }
        "Read" | "Grep" | "Glob" | "LS" => {
            f.object()?;
            read_need(&f, at, credentials)?
        }
        "WebFetch" => {
            f.object()?;
            cairn_tools::web::fetch_need("web_fetch", f.required("url")?)
        }
        "WebSearch" => {
            f.object()?;
            Need::ask(
                "web_search",
                format!("web_search: {}", f.field("query")?.unwrap_or("")),
            )
        }
        _ => {
            let Some((server, name)) = tool
                .strip_prefix(cairn_tools::mcp_names::MCP_PREFIX)
                .and_then(|rest| rest.split_once("__"))
            else {
                return Ok(None);
            };
            Need::ask(
                format!("mcp:{server}:{name}"),
                format!(
                    "tool {name} of MCP server {server}, with input:\n{}",
                    serde_json::to_string_pretty(input).unwrap_or_default()
                ),
            )
        }
    }))
}

/// A Gemini CLI or OpenCode tool call as the Claude Code tool it is the same as, its
/// input's fields renamed (`file_path`, `path`, `command`, `url`, …): Gemini CLI's
/// `run_shell_command`, `write_file`, `replace`, `read_file`, `list_directory`,
/// `glob`, `grep_search` (`search_file_content`), `web_fetch` (the first URL its
/// prompt names), `google_web_search`; OpenCode's `bash`, `write`, `edit`, `read`,
/// `list`, `glob`, `grep`, `webfetch`, `websearch`, and `patch` / `apply_patch` (a
/// Codex envelope in `patchText`). `None` for any other tool. An input that is not an
/// object is passed on as it is, for the rule to refuse.
pub fn claude_shaped(tool: &str, input: &Value) -> Option<(&'static str, Value)> {
    let renames: (&'static str, &[(&str, &str)]) = match tool {
        "run_shell_command" => ("Bash", &[("command", "command")]),
        "bash" => ("Bash", &[("command", "command")]),
        "write_file" => (
            "Write",
            &[("file_path", "file_path"), ("content", "content")],
        ),
        "write" => (
            "Write",
            &[("filePath", "file_path"), ("content", "content")],
        ),
        "replace" => (
            "Edit",
            &[
                ("file_path", "file_path"),
                ("old_string", "old_string"),
                ("new_string", "new_string"),
            ],
        ),
        "edit" => (
            "Edit",
            &[
                ("filePath", "file_path"),
                ("oldString", "old_string"),
                ("newString", "new_string"),
            ],
        ),
        "read_file" => (
            "Read",
            &[("file_path", "file_path"), ("absolute_path", "file_path")],
        ),
        "read" => ("Read", &[("filePath", "file_path")]),
        "list_directory" => ("LS", &[("dir_path", "path"), ("path", "path")]),
        "list" => ("LS", &[("path", "path")]),
        "glob" => (
            "Glob",
            &[
                ("pattern", "pattern"),
                ("dir_path", "path"),
                ("path", "path"),
            ],
        ),
        "grep_search" | "search_file_content" | "grep" => (
            "Grep",
            &[
                ("pattern", "pattern"),
                ("dir_path", "path"),
                ("path", "path"),
            ],
        ),
        "webfetch" => ("WebFetch", &[("url", "url")]),
        "google_web_search" | "websearch" => ("WebSearch", &[("query", "query")]),
        "patch" | "apply_patch" if input.get("patchText").is_some() => {
            ("apply_patch", &[("patchText", "input")])
        }
        "web_fetch" => {
            let prompt = input.get("prompt").and_then(Value::as_str).unwrap_or("");
            let url = prompt
                .split_whitespace()
                .find(|w| w.starts_with("https://") || w.starts_with("http://"))
                .map(|w| w.trim_end_matches(|c: char| ",.;:)]}>\"'".contains(c)));
            return Some(("WebFetch", serde_json::json!({ "url": url })));
        }
        _ => return None,
    };
    let (shaped, fields) = renames;
    let Value::Object(from) = input else {
        return Some((shaped, input.clone()));
    };
    let mut out = serde_json::Map::new();
    for (from_key, to_key) in fields {
        if let Some(v) = from.get(*from_key)
            && !out.contains_key(*to_key)
        {
            out.insert((*to_key).to_string(), v.clone());
        }
    }
    Some((shaped, Value::Object(out)))
}

/// The fields of a call's input, read as the agent's tool gives them.
struct Fields<'a> {
    tool: &'a str,
    input: &'a Value,
}

impl<'a> Fields<'a> {
    fn unreadable(&self, what: &str) -> Unreadable {
        Unreadable {
            tool: self.tool.to_string(),
            what: what.to_string(),
        }
    }

    /// A string field: absent, or a string.
    fn field(&self, k: &str) -> Result<Option<&'a str>, Unreadable> {
        match self.input.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(v)) => Ok(Some(v.as_str())),
            Some(_) => Err(self.unreadable(&format!("has a {k} that is not a string"))),
        }
    }

    fn required(&self, k: &str) -> Result<&'a str, Unreadable> {
        self.field(k)?
            .ok_or_else(|| self.unreadable(&format!("has no {k}")))
    }

    fn object(&self) -> Result<(), Unreadable> {
        if self.input.is_object() {
            Ok(())
        } else {
            Err(self.unreadable("has a tool_input that is not an object"))
        }
    }
}

/// A command, as a line for a shell or an argv, its writes confirmed on disk.
fn command_need(f: &Fields<'_>, at: &At<'_>) -> Result<Need, Unreadable> {
    let root_text = at.root.to_string_lossy();
    let mut analysis = match f.input.get("command") {
        Some(Value::String(line)) => cairn_core::command::analyse(line, &root_text),
        Some(Value::Array(words)) => {
            let argv: Vec<String> = words
                .iter()
                .map(|w| w.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .filter(|a: &Vec<String>| !a.is_empty())
                .ok_or_else(|| {
                    f.unreadable("has a command argv that is empty or not all strings")
                })?;
            argv_analysis(&argv, at, f.field("workdir")?)
        }
        None | Some(Value::Null) => return Err(f.unreadable("has no command")),
        Some(_) => {
            return Err(f.unreadable("has a command that is neither a string nor an argv"));
        }
    };
    cairn_tools::links::confirm_writes(&mut analysis, at.root, cairn_tools::links::Links::Disk);
    let context = if f.input.get("run_in_background").and_then(Value::as_bool) == Some(true) {
        "\n(in the background)"
    } else {
        ""
    };
    Ok(cairn_core::permission::shell_need(analysis, context))
}

/// An edit or a write of one file (a notebook's too).
fn edit_need(
    f: &Fields<'_>,
    at: &At<'_>,
    credentials: &DefaultCredentials,
) -> Result<Need, Unreadable> {
    let tool = f.tool;
    let path = if tool == "NotebookEdit" {
        f.required("notebook_path")?
    } else {
        f.required("file_path")?
    };
    let key = if tool == "Write" {
        "write_file"
    } else {
        "edit_file"
    };
    let detail = match tool {
        "Write" => format!("{key} {path}:\n{}", f.field("content")?.unwrap_or("")),
        _ => format!(
            "{key} {path}:\n{}",
            serde_json::to_string_pretty(f.input).unwrap_or_default()
        ),
    };
    Ok(files_need(
        at,
        key,
        Some(detail),
        &[path],
        f.input,
        credentials,
    ))
}

/// A read, a search or a listing of a path (and, for a glob, of the folders its
/// pattern names).
fn read_need(
    f: &Fields<'_>,
    at: &At<'_>,
    credentials: &DefaultCredentials,
) -> Result<Need, Unreadable> {
    let path = match f.field("file_path")? {
        Some(p) => p,
        None => f.field("path")?.unwrap_or("."),
    };
    let mut paths = vec![path.to_string()];
    // A pattern that names folders (`../../etc/*`) reaches them too.
    if f.tool == "Glob"
        && let Some(prefix) = glob_prefix(f.required("pattern")?)
    {
        paths.push(Path::new(path).join(prefix).to_string_lossy().into_owned());
    }
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    Ok(files_need(
        at,
        "read_file",
        None,
        &paths,
        f.input,
        credentials,
    ))
}

/// The files a Codex patch names, each once, in its envelope's order: `*** Add File:`,
/// `*** Update File:`, `*** Delete File:`, `*** Move to:`.
pub fn patch_paths(patch: &str) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for line in patch.lines() {
        let path = [
            "*** Add File: ",
            "*** Update File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ]
        .iter()
        .find_map(|p| line.strip_prefix(p));
        if let Some(p) = path.map(str::trim)
            && !p.is_empty()
            && !paths.iter().any(|q| q == p)
        {
            paths.push(p.to_string());
        }
    }
    paths
}

/// The last line of a question's detail that says why it asks every time.
const ALWAYS_ASKS: &str = "(asked every time: ";

/// The verdict on `need` for a session whose fold is `state`: what the allow list
/// covers is allowed, a question nobody here can answer goes to `unlisted`; with
/// [`Unlisted::Ask`], a command line that only reads ([`cairn_core::command::read_only`],
/// the known-read-only programs, unguarded) is left to the agent
/// ([`Verdict::Abstain`]): it is asked of the person only where the agent itself
/// would ask, so recording adds no prompt. The permission is the same either way.
pub fn verdict(
    state: &cairn_core::State,
    need: Need,
    guards: &[Guard],
    unlisted: Unlisted,
) -> (Permission, Verdict) {
    let read_only = matches!(
        &need,
        Need::Ask { command: Some(a), guarded: false, .. } if cairn_core::command::read_only(a)
    );
    let permission = decide::permission(state, need, guards);
    let verdict = match &permission {
        Permission::Auto => Verdict::Allow {
            reason: "cairn: nothing to ask".into(),
        },
        Permission::AllowList(q) => Verdict::Allow {
            reason: format!("cairn: {} is on the project's allow list", q.keys.join(" ")),
        },
        Permission::Ask(q) => {
            let always = q
                .detail
                .lines()
                .last()
                .and_then(|l| l.strip_prefix(ALWAYS_ASKS))
                .and_then(|l| l.strip_suffix(')'));
            let why = if q.guarded && !q.guards.is_empty() {
                format!("it matches a guarded command ({})", q.guards.join(", "))
            } else if let Some(why) = always.filter(|_| q.guarded) {
                format!("{} is asked every time: {why}", q.key)
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
                Unlisted::Ask if read_only && !q.guarded && q.reasons.is_empty() => {
                    Verdict::Abstain
                }
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

/// Where a path named by a call lands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Landing {
    /// In the workspace: its real path relative to the root (`.` for the root).
    Inside(String),
    /// Outside it: the real path, and why no grant covers it, if none does (the cairn
    /// home; a path that cannot be resolved).
    Outside {
        real: PathBuf,
        always: Option<&'static str>,
    },
}

/// Where `raw` (absolute, or relative to the call's folder) may land: where the kernel
/// takes it, and, when it differs, where the same path with its `..` dropped by name
/// first leads (what a tool that tidies a path before opening it reaches). The outside
/// ones first.
fn land(at: &At<'_>, raw: &str) -> Vec<Landing> {
    let named = at.cwd.join(raw);
    let tidied = lexical(&named);
    // Without a `..`, both are the same path: resolved once.
    let paths = if tidied == named {
        vec![named]
    } else {
        vec![named, tidied]
    };
    let mut out: Vec<Landing> = Vec::new();
    for path in paths {
        let landing = match cairn_tools::landing(&path) {
            Ok(real) if real.starts_with(at.home) => Landing::Outside {
                real,
                always: Some("it is in the cairn home"),
            },
            Ok(real) => match real.strip_prefix(at.root) {
                // Real: no symlink and no `..` left in it, so its components say where
                // it is.
                Ok(rel) if rel.as_os_str().is_empty() => Landing::Inside(".".into()),
                Ok(rel) => Landing::Inside(rel.to_string_lossy().into_owned()),
                Err(_) => Landing::Outside { real, always: None },
            },
            Err(_) => Landing::Outside {
                real: path,
                always: Some("it cannot be resolved (a symlink loop?)"),
            },
        };
        if !out.contains(&landing) {
            out.push(landing);
        }
    }
    out.sort_by_key(|l| matches!(l, Landing::Inside(_)));
    out
}

/// `path` with `.` and `..` taken by name, as a string tidier does.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What a call of `key` naming `paths` needs. Inside the workspace: `ask` (a write's
/// question for `key`; `None` for a read, which asks nothing), or a question for a
/// credential file named or reached. Outside: a question for `<key>@<folder>` of the
/// folder the first outside path really lands in, asked every time when a credential
/// file is there, when it is the cairn home or cannot be resolved, or when the call
/// reaches more than one folder outside (one grant would answer for all of them).
fn files_need(
    at: &At<'_>,
    key: &str,
    ask: Option<String>,
    paths: &[&str],
    input: &Value,
    credentials: &DefaultCredentials,
) -> Need {
    let creds = credentials.get();
    let mut credential: Option<String> = None;
    let mut outside: Vec<String> = Vec::new();
    let mut always: Option<&str> = None;
    for raw in paths {
        // As named, too: `.env` asks even when it is a link to a harmless name.
        let named = lexical(&at.cwd.join(raw));
        let named = match named.strip_prefix(at.root) {
            Ok(r) if !r.as_os_str().is_empty() => r.to_string_lossy().into_owned(),
            Ok(_) => ".".to_string(),
            Err(_) => named.to_string_lossy().into_owned(),
        };
        if ask.is_some() && cairn_core::command::runs_git(&named) {
            always = always.or(Some(cairn_core::permission::GIT_WRITE_WHY));
        }
        if credential.is_none() && creds.matches(&named) {
            credential = Some(named);
        }
        for landing in land(at, raw) {
            match landing {
                Landing::Inside(rel) => {
                    // Through a link too: `hk -> .git/hooks`, then `hk/pre-commit`.
                    if ask.is_some() && cairn_core::command::runs_git(&rel) {
                        always = always.or(Some(cairn_core::permission::GIT_WRITE_WHY));
                    }
                    if credential.is_none() && creds.matches(&rel) {
                        credential = Some(rel);
                    }
                }
                Landing::Outside { real, always: why } => {
                    let text = real.to_string_lossy().into_owned();
                    if credential.is_none() && creds.matches(&text) {
                        credential = Some(text);
                    }
                    let dir = real
                        .parent()
                        .unwrap_or(&real)
                        .to_string_lossy()
                        .into_owned();
                    if !outside.contains(&dir) {
                        outside.push(dir);
                    }
                    always = always.or(why);
                }
            }
        }
    }
    let inner = match &credential {
        Some(path) => cairn_core::permission::read_need(key, path, creds),
        None => match ask {
            Some(detail) => Need::ask(key, detail),
            None => Need::Auto,
        },
    };
    let need = match outside.first() {
        Some(dir) => cairn_core::permission::outside_need(key, dir, inner, input),
        None if always.is_none() => return inner,
        None => inner,
    };
    let why = match (always, &credential) {
        (Some(why), _) => why.to_string(),
        (None, Some(path)) => format!("{path} looks like a credentials file"),
        (None, None) if outside.len() > 1 => {
            format!("it reaches {} folders outside the workspace", outside.len())
        }
        (None, None) => return need,
    };
    match need {
        Need::Ask {
            key,
            detail,
            command,
            ..
        } => Need::Ask {
            key,
            detail: format!("{detail}\n{ALWAYS_ASKS}{why})"),
            guarded: true,
            command,
        },
        Need::Auto => Need::Auto,
    }
}

/// The folders a glob pattern names before its first wildcard (`../../etc` of
/// `../../etc/*.conf`); `None` when it starts with one.
fn glob_prefix(pattern: &str) -> Option<String> {
    let literal: Vec<&str> = pattern
        .split('/')
        .take_while(|c| !c.contains(['*', '?', '[', '{']))
        .collect();
    // The last literal component may be a file name: the folders before it.
    let folders = if literal.len() == pattern.split('/').count() {
        &literal[..literal.len().saturating_sub(1)]
    } else {
        &literal[..]
    };
    let prefix = folders.join("/");
    match prefix.as_str() {
        "" if pattern.starts_with('/') => Some("/".into()),
        "" | "." => None,
        _ => Some(prefix),
    }
}

/// What a command given as argv runs (Codex's `["bash", "-lc", "…"]`, in `workdir`
/// when given): the line a real shell runs, analysed as a line, when `argv[0]` is one
/// of the system's shells; otherwise the argv as it is, its program keyed by its own
/// path when it is found in the workspace (a `bash` there is not the shell).
fn argv_analysis(argv: &[String], at: &At<'_>, workdir: Option<&str>) -> Analysis {
    let root = at.root.to_string_lossy();
    let cwd = workdir.map_or_else(|| at.cwd.to_path_buf(), |w| at.cwd.join(w));
    let program = argv
        .first()
        .and_then(|p| executable(p, &cwd, at.exec_path))
        .and_then(|p| p.canonicalize().ok());
    if let [_, flag, line] = argv
        && shell_flag(flag)
        && program.as_deref().is_some_and(|p| system_shell(p, at.root))
    {
        return cairn_core::command::analyse(line, &root);
    }
    let mut argv = argv.to_vec();
    if let Some(p) = program.filter(|p| p.starts_with(at.root)) {
        argv[0] = p.to_string_lossy().into_owned();
    }
    cairn_core::command::analyse_argv(&argv, &root, Some(&cwd.to_string_lossy()))
}

/// `-c`, `-lc`, `-ic`…: a shell's flags that end with the one that runs the next word.
fn shell_flag(flag: &str) -> bool {
    flag.strip_prefix('-')
        .is_some_and(|f| f.ends_with('c') && f.bytes().all(|b| b.is_ascii_alphabetic()))
}

/// The file `execvp` runs for `name` from folder `cwd`: a name with a `/` as it is, any
/// other looked up on `exec_path` (`/bin:/usr/bin` when unset, as glibc does; an empty
/// or relative entry from `cwd`), the first executable regular file.
pub fn executable(name: &str, cwd: &Path, exec_path: Option<&OsStr>) -> Option<PathBuf> {
    if name.is_empty() {
        return None;
    }
    if name.contains('/') {
        return Some(cwd.join(name));
    }
    let exec_path = exec_path.unwrap_or(OsStr::new("/bin:/usr/bin"));
    std::env::split_paths(exec_path)
        .map(|dir| cwd.join(dir).join(name))
        .find(|candidate| is_executable_file(candidate))
}

/// True when `path` is a regular file someone may execute (what `execvp` looks for).
pub fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The file names of the shells whose `-c` line cairn's parser reads as they do.
const SHELL_NAMES: &[&str] = &[
    "sh", "bash", "rbash", "dash", "zsh", "ksh", "ksh93", "mksh", "ash", "yash", "posh",
];

/// The system's list of shells.
const SHELLS_FILE: &str = "/etc/shells";

/// The shells assumed when [`SHELLS_FILE`] cannot be read.
const SHELLS_DEFAULT: &[&str] = &[
    "/bin/sh",
    "/usr/bin/sh",
    "/bin/bash",
    "/usr/bin/bash",
    "/bin/dash",
    "/usr/bin/dash",
    "/bin/zsh",
    "/usr/bin/zsh",
];

/// Whether `real` (a canonical path) is one of the system's shells: listed in
/// [`SHELLS_FILE`] (each entry resolved, so `/bin/sh` is the `dash` it leads to), with
/// the name of a shell (not `tmux`, which some systems list), and not in the workspace.
fn system_shell(real: &Path, root: &Path) -> bool {
    if real.starts_with(root)
        || !real
            .file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|n| SHELL_NAMES.contains(&n))
    {
        return false;
    }
    let listed = std::fs::read_to_string(SHELLS_FILE).unwrap_or_else(|_| SHELLS_DEFAULT.join("\n"));
    listed
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('/'))
        .any(|l| Path::new(l).canonicalize().is_ok_and(|c| c == real))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::symlink;

    /// Judged in a workspace `/w` that does not exist (no symlink on any path).
    fn at_w() -> At<'static> {
        At {
            root: Path::new("/w"),
            cwd: Path::new("/w"),
            home: Path::new("/nonexistent-cairn-home"),
            exec_path: None,
        }
    }

    /// The question's key (`auto` when none) and whether it is asked every time.
    fn asked(tool: &str, input: &Value, at: &At<'_>) -> Option<(String, bool)> {
        let creds = DefaultCredentials::default();
        match need(tool, input, at, &creds).unwrap()? {
            Need::Auto => Some(("auto".into(), false)),
            Need::Ask { key, guarded, .. } => Some((key, guarded)),
        }
    }

    fn key(tool: &str, input: Value) -> Option<String> {
        asked(tool, &input, &at_w()).map(|(k, _)| k)
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
            need(tool, &input, &at_w(), &creds).unwrap();
            assert_eq!(creds.compiled(), compiled, "{tool}");
        }
    }

    /// Gemini CLI's and OpenCode's tools ask what the same Claude Code tool asks: a
    /// write outside the workspace named by OpenCode's `filePath` is not let through
    /// as a tool cairn has no rule for.
    #[test]
    fn gemini_and_opencode_tools_ask_as_their_claude_code_twins() {
        let cases: Vec<(&str, Value, Option<&str>)> = vec![
            (
                "run_shell_command",
                json!({"command": "git status && cargo test", "dir_path": "."}),
                Some("shell:git shell:cargo"),
            ),
            ("bash", json!({"command": "ls -l"}), Some("shell:ls")),
            (
                "write_file",
                json!({"file_path": "b.txt", "content": "x"}),
                Some("write_file"),
            ),
            (
                "write",
                json!({"filePath": "/etc/motd", "content": "x"}),
                Some("write_file@/etc"),
            ),
            (
                "replace",
                json!({"file_path": "/w/a.rs", "old_string": "a", "new_string": "b"}),
                Some("edit_file"),
            ),
            (
                "edit",
                json!({"filePath": "/w/a.rs", "oldString": "a", "newString": "b"}),
                Some("edit_file"),
            ),
            (
                "read_file",
                json!({"file_path": "/w/.env"}),
                Some("read_credentials:.env"),
            ),
            (
                "read",
                json!({"filePath": "/etc/passwd"}),
                Some("read_file@/etc"),
            ),
            (
                "list_directory",
                json!({"dir_path": "/etc"}),
                Some("read_file@/"),
            ),
            ("glob", json!({"pattern": "**/*.rs"}), Some("auto")),
            (
                "grep_search",
                json!({"pattern": "x", "dir_path": "src"}),
                Some("auto"),
            ),
            (
                "web_fetch",
                json!({"prompt": "summarise https://example.org/a, please"}),
                Some("web_fetch:example.org"),
            ),
            (
                "webfetch",
                json!({"url": "https://example.org/a"}),
                Some("web_fetch:example.org"),
            ),
            (
                "google_web_search",
                json!({"query": "x"}),
                Some("web_search"),
            ),
            (
                "apply_patch",
                json!({"patchText": "*** Begin Patch\n*** Add File: ../etc/a\n+a\n*** End Patch\n"}),
                Some("write_patch@/etc"),
            ),
            ("write_todos", json!({"todos": []}), None),
            ("todowrite", json!({"todos": []}), None),
        ];
        for (tool, input, want) in cases {
            assert_eq!(key(tool, input.clone()).as_deref(), want, "{tool} {input}");
        }
        let creds = DefaultCredentials::default();
        let e = need("write", &json!({"content": "x"}), &at_w(), &creds).unwrap_err();
        assert_eq!(e.to_string(), "the Write call has no file_path");
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
                "Bash",
                json!({"command": ["git", "status"]}),
                Some("shell:git"),
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
            // `..` taken where it leads, not compared with the root as text.
            (
                "Write",
                json!({"file_path": "/w/../etc/motd", "content": "x"}),
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
            ("Glob", json!({"pattern": "**/*.rs"}), Some("auto")),
            (
                "Glob",
                json!({"pattern": "../etc/*.conf"}),
                Some("read_file@/"),
            ),
            (
                "apply_patch",
                json!({"command": "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n"}),
                Some("write_patch"),
            ),
            (
                "apply_patch",
                json!(
                    "*** Begin Patch\n*** Update File: a.txt\n*** Move to: ../etc/a\n*** End Patch\n"
                ),
                Some("write_patch@/etc"),
            ),
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
            ("TodoWrite", json!("anything"), None),
        ];
        for (tool, input, want) in cases {
            assert_eq!(key(tool, input.clone()).as_deref(), want, "{tool} {input}");
        }
    }

    #[test]
    fn a_call_without_what_its_rule_is_about_is_unreadable() {
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "Write",
                json!({"content": "x"}),
                "the Write call has no file_path",
            ),
            (
                "Edit",
                json!({"file_path": 7}),
                "the Edit call has a file_path that is not a string",
            ),
            (
                "NotebookEdit",
                json!({"file_path": "/w/n.ipynb"}),
                "the NotebookEdit call has no notebook_path",
            ),
            (
                "Read",
                json!("/etc/passwd"),
                "the Read call has a tool_input that is not an object",
            ),
            (
                "Read",
                json!({"file_path": ["/etc/passwd"]}),
                "the Read call has a file_path that is not a string",
            ),
            ("Bash", json!({}), "the Bash call has no command"),
            (
                "Bash",
                json!({"command": {"line": "ls"}}),
                "the Bash call has a command that is neither a string nor an argv",
            ),
            (
                "Bash",
                json!({"command": ["ls", 1]}),
                "the Bash call has a command argv that is empty or not all strings",
            ),
            (
                "Bash",
                json!({"command": []}),
                "the Bash call has a command argv that is empty or not all strings",
            ),
            (
                "apply_patch",
                json!({}),
                "the apply_patch call has no patch",
            ),
            (
                "WebFetch",
                json!({"url": null}),
                "the WebFetch call has no url",
            ),
            (
                "Glob",
                json!({"path": "/w"}),
                "the Glob call has no pattern",
            ),
        ];
        for (tool, input, want) in cases {
            let creds = DefaultCredentials::default();
            let e = need(tool, &input, &at_w(), &creds).unwrap_err();
            assert_eq!(e.to_string(), want, "{tool} {input}");
        }
    }

    /// A workspace with links out and in, a folder outside it, and a home.
    struct Fixture {
        _dir: tempfile::TempDir,
        root: PathBuf,
        out: PathBuf,
        home: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (root, out, home) = (base.join("ws"), base.join("out"), base.join("home"));
        for d in [root.join("src/deep"), out.clone(), home.clone()] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(out.join("passwd"), "root:x:0:0\n").unwrap();
        std::fs::write(out.join(".env"), "TOKEN=1\n").unwrap();
        std::fs::write(root.join("src/a.rs"), "fn a() {}\n").unwrap();
        symlink(&out, root.join("link")).unwrap();
        symlink(out.join("passwd"), root.join("f")).unwrap();
        symlink(out.join("new.txt"), root.join("dangling")).unwrap();
        symlink("src/deep", root.join("in")).unwrap();
        symlink(&home, root.join("to_home")).unwrap();
        symlink(out.join(".env"), root.join("harmless.txt")).unwrap();
        symlink("loop2", root.join("loop1")).unwrap();
        symlink("loop1", root.join("loop2")).unwrap();
        Fixture {
            _dir: dir,
            root,
            out,
            home,
        }
    }

    impl Fixture {
        fn at(&self) -> At<'_> {
            At {
                root: &self.root,
                cwd: &self.root,
                home: &self.home,
                exec_path: None,
            }
        }
    }

    /// Each escape through a symlink asks for the folder it really reaches: what the
    /// text of the path says (inside) was what the hook judged before.
    #[test]
    #[expect(
        clippy::too_many_lines,
        reason = "a data table: each path shape, the key it asks for, checked by one loop"
    )]
    fn a_path_is_judged_where_its_symlinks_lead() {
        let f = fixture();
        let out = f.out.to_string_lossy().into_owned();
        let base = f.root.parent().unwrap().to_string_lossy().into_owned();
        let ws = |rel: &str| f.root.join(rel).to_string_lossy().into_owned();
        let write = |rel: &str| json!({"file_path": ws(rel), "content": "x"});
        let cases: Vec<(&str, Value, String, bool)> = vec![
            ("Write", write("src/new.rs"), "write_file".into(), false),
            (
                "Write",
                write("link/passwd"),
                format!("write_file@{out}"),
                false,
            ),
            ("Write", write("f"), format!("write_file@{out}"), false),
            // A link to a file not there yet: where the create lands.
            (
                "Write",
                write("dangling"),
                format!("write_file@{out}"),
                false,
            ),
            // Its parent does not exist yet: judged by its deepest existing ancestor.
            (
                "Write",
                write("link/a/b/c.txt"),
                format!("write_file@{out}/a/b"),
                false,
            ),
            ("Write", write("no/such/dir/x"), "write_file".into(), false),
            // `..` after a link is the folder above its target.
            (
                "Write",
                write("link/../x"),
                format!("write_file@{base}"),
                false,
            ),
            // After a link inside, `..` by name climbs out; by the kernel it stays in:
            // the path is judged by the one that leaves.
            (
                "Write",
                write("in/../../x"),
                format!("write_file@{base}"),
                false,
            ),
            (
                "Edit",
                json!({"file_path": ws("link/passwd"), "old_string": "a", "new_string": "b"}),
                format!("edit_file@{out}"),
                false,
            ),
            (
                "Read",
                json!({"file_path": ws("f")}),
                format!("read_file@{out}"),
                false,
            ),
            (
                "Read",
                json!({"file_path": ws("in/x.rs")}),
                "auto".into(),
                false,
            ),
            // A credential file out there asks every time, however it is named.
            (
                "Read",
                json!({"file_path": ws("harmless.txt")}),
                format!("read_file@{out}"),
                true,
            ),
            (
                "Read",
                json!({"file_path": ws("link/.env")}),
                format!("read_file@{out}"),
                true,
            ),
            (
                "LS",
                json!({"path": ws("link")}),
                format!("read_file@{base}"),
                false,
            ),
            (
                "Grep",
                json!({"pattern": "x", "path": ws("link")}),
                format!("read_file@{base}"),
                false,
            ),
            // The cairn home, and a path that cannot be resolved, ask every time.
            (
                "Write",
                write("to_home/x"),
                format!("write_file@{}", f.home.display()),
                true,
            ),
            (
                "Write",
                write("loop1/x"),
                format!("write_file@{}", ws("loop1")),
                true,
            ),
            // A patch: each file it names, as Write does.
            (
                "apply_patch",
                json!({"command": "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-a\n+b\n*** Add File: link/p.txt\n+p\n*** End Patch\n"}),
                format!("write_patch@{out}"),
                false,
            ),
            (
                "apply_patch",
                json!({"command": "*** Begin Patch\n*** Delete File: f\n*** End Patch\n"}),
                format!("write_patch@{out}"),
                false,
            ),
            // Two folders outside: one grant would answer for both, so asked each time.
            (
                "apply_patch",
                json!({"command": "*** Begin Patch\n*** Add File: link/p.txt\n+p\n*** Add File: link/sub/q.txt\n+q\n*** End Patch\n"}),
                format!("write_patch@{out}"),
                true,
            ),
            (
                "apply_patch",
                json!({"command": "*** Begin Patch\n*** Update File: src/a.rs\n*** Move to: in/b.rs\n*** End Patch\n"}),
                "write_patch".into(),
                false,
            ),
        ];
        for (tool, input, want, always) in cases {
            assert_eq!(
                asked(tool, &input, &f.at()),
                Some((want, always)),
                "{tool} {input}"
            );
        }
    }

    #[test]
    fn a_question_asked_every_time_says_why() {
        let f = fixture();
        let input = json!({"file_path": f.root.join("harmless.txt")});
        let creds = DefaultCredentials::default();
        let need = need("Read", &input, &f.at(), &creds).unwrap().unwrap();
        let mut state = cairn_core::State::default();
        let key = format!("read_file@{}", f.out.display());
        state.allow.insert(key.clone(), Default::default());
        let (_, verdict) = verdict(&state, need, &[], Unlisted::Deny);
        assert_eq!(
            verdict,
            Verdict::Deny {
                reason: format!(
                    "cairn refuses this call: {key} is asked every time: {}/.env looks like a credentials file",
                    f.out.display()
                )
            }
        );
    }

    /// A `bash` in the workspace is not the shell: its argv is keyed by its own path,
    /// where the line it was given was analysed as a shell's before.
    #[test]
    fn an_argv_is_a_shell_line_only_for_a_system_shell() {
        let f = fixture();
        let fake = f.root.join("bin/bash");
        std::fs::create_dir_all(fake.parent().unwrap()).unwrap();
        std::fs::write(&fake, "#!/bin/sh\nexec \"$@\"\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let in_ws = format!("{}:/usr/bin:/bin", f.root.join("bin").display());
        let key = |argv: Value, exec_path: &str| {
            let at = At {
                exec_path: Some(OsStr::new(exec_path)),
                ..f.at()
            };
            asked("Bash", &json!({"command": argv}), &at).map(|(k, _)| k)
        };
        let cases: Vec<(Value, &str, &str)> = vec![
            (json!(["bash", "-lc", "ls -l"]), "/usr/bin:/bin", "shell:ls"),
            (
                json!(["/bin/sh", "-c", "ls -l"]),
                "/usr/bin:/bin",
                "shell:ls",
            ),
            (
                json!(["bash", "-lc", "ls -l"]),
                &in_ws,
                "shell:./bin/bash shell:ls",
            ),
            (
                json!(["./bin/bash", "-lc", "ls -l"]),
                "/usr/bin:/bin",
                "shell:./bin/bash shell:ls",
            ),
            (
                json!(["bash", "-lc", "ls -l"]),
                "bin:/usr/bin",
                "shell:./bin/bash shell:ls",
            ),
            (json!(["ls", "-l"]), "/usr/bin:/bin", "shell:ls"),
        ];
        for (argv, exec_path, want) in cases {
            assert_eq!(
                key(argv.clone(), exec_path).as_deref(),
                Some(want),
                "{argv} on {exec_path}"
            );
        }
    }

    #[test]
    fn shell_flags_and_glob_prefixes() {
        for (flag, want) in [
            ("-c", true),
            ("-lc", true),
            ("-ic", true),
            ("-l", false),
            ("--c", false),
            ("c", false),
            ("-c1", false),
        ] {
            assert_eq!(shell_flag(flag), want, "{flag}");
        }
        for (pattern, want) in [
            ("**/*.rs", None),
            ("*.rs", None),
            ("src/**/*.rs", Some("src")),
            ("../../etc/*.conf", Some("../../etc")),
            ("/etc/passwd", Some("/etc")),
            ("/*", Some("/")),
            ("a.txt", None),
        ] {
            assert_eq!(glob_prefix(pattern).as_deref(), want, "{pattern}");
        }
    }
}
