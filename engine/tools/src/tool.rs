//! The tool trait and what a tool sees while it runs. A tool is one type in one file
//! (`tools/`), listed once in the registry. A tool never writes to the log directly:
//! it asks its [`Ctx`] to record side effects, which folds them into the state too.

use std::path::Path;

use cairn_store::{BlobRef, BlobStore, Hash};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::error::Result;
use cairn_core::decide::Refused;

use crate::event::{Event, FileRead, Refusal, Rule, Status, WriteStatus};
use crate::limits::Limits;
use crate::paths::{PathError, Root, WsPath};
use crate::permission::{CredentialFiles, Need};
use crate::recorder::Recorder;
use crate::shell::Runtime;
use crate::state::State;

/// What a call gives back to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub status: Status,
    pub text: String,
    pub refusal: Option<Refusal>,
    /// `text` is redacted already, by the call's redactor ([`Ctx::redactor`], its
    /// counts added to [`Ctx::redactions`]): the engine does not search it again. A
    /// tool that redacts its answer in parts on its own threads (a search) says so.
    pub redacted: bool,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            status: Status::Ok,
            text: text.into(),
            refusal: None,
            redacted: false,
        }
    }

    /// A successful answer the tool redacted itself (see [`ToolOutput::redacted`]).
    pub fn ok_redacted(text: String) -> ToolOutput {
        ToolOutput {
            redacted: true,
            ..ToolOutput::ok(text)
        }
    }

    pub fn error(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            status: Status::Error,
            text: text.into(),
            refusal: None,
            redacted: false,
        }
    }

    /// A call a rule refused, with the facts it decided on.
    pub fn refused(
        rule: Rule,
        path: Option<&str>,
        observed: Option<Hash>,
        text: impl Into<String>,
    ) -> ToolOutput {
        ToolOutput {
            status: cairn_core::decide::refusal_status(rule),
            text: text.into(),
            refusal: Some(Refusal {
                rule,
                path: path.map(str::to_string),
                observed,
            }),
            redacted: false,
        }
    }
}

/// What a tool does besides answering, so that replay, verify, diff and audit can ask
/// the tool instead of knowing it by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Effects {
    /// A successful call changes workspace files itself (and so records a write).
    pub writes: bool,
    /// It runs programs: what they change is found by a scan and may be nothing; its
    /// output carries times, pids and the session's own folders, which differ per run.
    pub runs_commands: bool,
    /// It answers with its command's own output: how the command ended, each stream's
    /// preview, the files it changed (`shell::foreground_text`), and the command's
    /// status; verify rebuilds both from the `shell_exec` records.
    pub command_output: bool,
    /// Its answer comes from outside cairn (the network, an MCP server): a replay
    /// answers it from the recording instead of asking again.
    pub external: bool,
    /// The input field holding the query of a web search, for the audit's network
    /// section.
    pub search_query: Option<&'static str>,
    /// It lists folders and marks ignored entries, which a replay's copy of the
    /// workspace lacks (ignored files are not in the manifest).
    pub lists_ignored: bool,
    /// The input field a command tool takes its timeout in (its schema's own name and
    /// unit), for the notes that speak of it and for verify, which rebuilds them.
    pub timeout: Option<TimeoutField>,
    /// The boolean input field that runs a command tool's command in the background
    /// (the call returns once it started; its end is recorded when it exits).
    pub background: Option<&'static str>,
    /// The input field naming the folder a command tool runs its command in: a call
    /// naming one that is not a folder of the workspace fails before it runs anything.
    pub cwd: Option<&'static str>,
    /// It shows the model lines of the one file it names, recorded as its `file_read`.
    pub reads_file: bool,
    /// The pages it fetches, each recorded as a `web_fetched`.
    pub fetches: Fetches,
    /// It adds a fact to the project's memory, recorded as its `memory_written`.
    pub remembers: bool,
    /// It is a tool of an MCP server: its answer is the server's `tools/call` result,
    /// kept as the call's `mcp_result`.
    pub mcp: bool,
}

/// What a tool fetches from the web (see [`Effects::fetches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fetches {
    /// Nothing.
    #[default]
    Nothing,
    /// The one page its input names, recorded whether or not it came.
    Page,
    /// A search backend's answer, then some of the pages it lists.
    Search,
}

/// The input field a command tool takes its timeout in: thndrs' `run_shell` has
/// `timeout_ms`, thoth's `shell` `timeout_secs`, each as its own agent defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutField {
    /// The field's name.
    pub name: &'static str,
    /// Milliseconds in one unit of the field.
    pub unit_ms: u64,
}

impl TimeoutField {
    /// `timeout_ms`, in milliseconds.
    pub const MS: TimeoutField = TimeoutField {
        name: "timeout_ms",
        unit_ms: 1,
    };
    /// `timeout_secs`, in seconds.
    pub const SECS: TimeoutField = TimeoutField {
        name: "timeout_secs",
        unit_ms: 1_000,
    };

    /// The field's value in `input`, in milliseconds (saturating).
    pub fn asked_ms(&self, input: &serde_json::Value) -> Option<u64> {
        input
            .get(self.name)
            .and_then(serde_json::Value::as_u64)
            .map(|v| v.saturating_mul(self.unit_ms))
    }

    /// `ms` in the field's unit (rounded down).
    pub fn show(&self, ms: u64) -> u64 {
        ms / self.unit_ms
    }

    /// What a call is told when it asked for `asked_ms`, over `max_ms`: the maximum
    /// is used instead.
    pub fn over_max_note(&self, asked_ms: u64, max_ms: u64) -> String {
        format!(
            "note: {} {} is over the maximum; {} was used\n",
            self.name,
            self.show(asked_ms),
            self.show(max_ms)
        )
    }
}

impl Effects {
    /// Reads only, inside cairn.
    pub const NONE: Effects = Effects {
        writes: false,
        runs_commands: false,
        command_output: false,
        external: false,
        search_query: None,
        lists_ignored: false,
        timeout: None,
        background: None,
        cwd: None,
        reads_file: false,
        fetches: Fetches::Nothing,
        remembers: false,
        mcp: false,
    };

    /// What a tool of an MCP server does: it answers from outside.
    pub const MCP: Effects = Effects {
        external: true,
        mcp: true,
        ..Effects::NONE
    };
}

/// A rule's refusal ([`cairn_core::decide`]) is the call's answer.
impl From<Refused> for ToolOutput {
    fn from(r: Refused) -> ToolOutput {
        ToolOutput {
            status: r.status(),
            refusal: Some(r.refusal()),
            text: r.message,
            redacted: false,
        }
    }
}

/// A tool as the engine sees it.
pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    /// The JSON Schema of the input.
    fn schema(&self) -> serde_json::Value;
    /// True when the tool can change the workspace.
    fn is_mutating(&self) -> bool;
    /// What the tool does besides answering.
    fn effects(&self) -> Effects;
    /// Checks the input against the schema; the error names the field.
    fn validate(&self, input: &serde_json::Value) -> Result<(), InputError>;
    /// Runs the call. `Err` only when the engine itself fails (the log); a tool's own
    /// failure is an output with status `error`.
    fn run(&self, ctx: &mut Ctx<'_>, input: &serde_json::Value) -> Result<ToolOutput>;
    /// What the call needs before it may act (input already validated), asked in
    /// `at`: the workspace root (a command's paths are keyed against it) and the
    /// session's credential files (reading one asks first).
    fn permission(&self, input: &serde_json::Value, at: &Asking<'_>) -> Need;
    /// What a permission prompt shows of the call instead of the detail of its
    /// [`Tool::permission`], when the workspace tells more: a write as a diff of the
    /// whole file, with the file's own line numbers. `read(path)` is a workspace
    /// file's text: `Some(None)` when there is no such file, `None` when it cannot be
    /// told (outside the workspace, a credential file, too large, not UTF-8), and then
    /// there is no preview either. None by default.
    fn preview(&self, input: &serde_json::Value, read: &mut Preview<'_>) -> Option<String> {
        let _ = (input, read);
        None
    }
    /// True when the call may write a file it has not read at its current content (an
    /// append): the engine then records what the file holds when it admits the call
    /// (`tool_started`'s `observed`), so that the log knows the content the write
    /// starts from even when another program changed it unannounced.
    fn observes(&self, input: &serde_json::Value) -> bool;
}

/// How [`Tool::preview`] reads a workspace file's text (see there).
pub type Preview<'a> = dyn FnMut(&str) -> Option<Option<String>> + 'a;

/// Where a call's permission is asked: what [`Tool::permission`] needs besides the input.
#[derive(Debug, Clone, Copy)]
pub struct Asking<'a> {
    /// The workspace root.
    pub root: &'a Path,
    /// The session's credential files.
    pub credential_files: &'a CredentialFiles,
    /// How a command's written files are checked for symbolic links that lead out of
    /// the workspace (see [`crate::links`]).
    pub links: crate::links::Links<'a>,
}

/// A tool with a typed input; implements [`Tool`].
pub trait TypedTool: Send + Sync + 'static {
    type Input: DeserializeOwned + JsonSchema;
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    const MUTATING: bool;
    /// By default a mutating tool writes the workspace itself, and nothing else.
    const EFFECTS: Effects = Effects {
        writes: Self::MUTATING,
        ..Effects::NONE
    };
    fn run(&self, ctx: &mut Ctx<'_>, input: Self::Input) -> Result<ToolOutput>;
    /// What the input must be beyond its schema (a non-empty command line…): part of
    /// [`Tool::validate`], so a bad input is refused by the engine's admission rule
    /// (`cairn_core::decide::input_valid`) before anything is asked or run.
    fn check(&self, input: &Self::Input) -> std::result::Result<(), InputError> {
        let _ = input;
        Ok(())
    }
    /// See [`Tool::observes`]; none by default.
    fn observes(&self, input: &Self::Input) -> bool {
        let _ = input;
        false
    }
    /// See [`Tool::preview`]; none by default.
    fn preview(&self, input: &Self::Input, read: &mut Preview<'_>) -> Option<String> {
        let _ = (input, read);
        None
    }
    /// By default a tool that writes asks first (key: its name, detail: its input) and
    /// one that only reads runs at once, as the thoth seed's table has it. A tool that
    /// reads a file the call names asks for a credential file
    /// ([`crate::permission::read_need`]).
    fn permission(&self, input: &Self::Input, raw: &serde_json::Value, at: &Asking<'_>) -> Need {
        let _ = (input, at);
        if Self::MUTATING {
            Need::ask(
                Self::NAME,
                serde_json::to_string_pretty(raw).unwrap_or_default(),
            )
        } else {
            Need::Auto
        }
    }
}

/// An input a tool refuses. Its text is what the model is answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// It does not fit the tool's schema.
    #[error(
        "invalid input for {tool}: {}{what}",
        field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default()
    )]
    Schema {
        tool: String,
        /// The path of the field at fault (`patches[0].old_string`); `None` for the
        /// whole input (not an object, a missing or unknown field).
        field: Option<String>,
        /// What is wrong with it.
        what: String,
    },
    /// It fits the schema but not the tool's own rule (an empty command line), which
    /// says what is wrong in its own words.
    #[error("{0}")]
    Rule(String),
}

/// Parses an input, naming the field at fault. A missing field's error also lists
/// every field the schema requires there: serde names the first one missing and stops,
/// and a model resending the call needs all of them.
pub fn parse_input<I: DeserializeOwned + JsonSchema>(
    tool: &str,
    input: &serde_json::Value,
) -> Result<I, InputError> {
    // A call parses its input a few times (its check, its permission, its run): the
    // path to a field at fault is tracked only once the input proved faulty.
    if let Ok(parsed) = I::deserialize(input) {
        return Ok(parsed);
    }
    serde_path_to_error::deserialize(input).map_err(|e| {
        let path = e.path().to_string();
        let mut what = e.into_inner().to_string();
        if what.starts_with("missing field") {
            let schema = serde_json::to_value(schemars::schema_for!(I)).unwrap_or_default();
            let required = required_at(&schema, &path);
            if !required.is_empty() {
                what.push_str(&format!(
                    "; send the call again with every required field: {}",
                    required.join(", ")
                ));
            }
        }
        InputError::Schema {
            tool: tool.to_string(),
            field: (path != "." && !path.is_empty()).then_some(path),
            what,
        }
    })
}

/// The fields `schema` requires of the object at `path` (`.`, `patches[0]`, `a.b`), as
/// serde_path_to_error spells it; empty when the path leads nowhere the schema says.
fn required_at(schema: &serde_json::Value, path: &str) -> Vec<String> {
    // A `$ref` inside the same schema (`#/$defs/Patch`), followed a few times at most.
    fn deref_in<'a>(
        schema: &'a serde_json::Value,
        mut v: &'a serde_json::Value,
    ) -> Option<&'a serde_json::Value> {
        for _ in 0..8 {
            match v.get("$ref").and_then(|r| r.as_str()) {
                Some(r) => v = schema.pointer(r.strip_prefix('#')?)?,
                None => return Some(v),
            }
        }
        None
    }
    let deref = |v| deref_in(schema, v);
    let mut node = schema;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, indexes) = part.split_once('[').unwrap_or((part, ""));
        if !name.is_empty() {
            let Some(n) = deref(node).and_then(|n| n.get("properties")?.get(name)) else {
                return Vec::new();
            };
            node = n;
        }
        for _ in indexes.matches(']') {
            let Some(n) = deref(node).and_then(|n| n.get("items")) else {
                return Vec::new();
            };
            node = n;
        }
    }
    deref(node)
        .and_then(|n| n.get("required")?.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &'static str {
        T::NAME
    }
    fn description(&self) -> &'static str {
        T::DESCRIPTION
    }
    fn schema(&self) -> serde_json::Value {
        let mut schema = serde_json::to_value(schemars::schema_for!(T::Input)).unwrap_or_default();
        if let Some(map) = schema.as_object_mut() {
            map.remove("$schema");
            map.remove("title");
        }
        schema
    }
    fn is_mutating(&self) -> bool {
        T::MUTATING
    }
    fn effects(&self) -> Effects {
        T::EFFECTS
    }
    fn validate(&self, input: &serde_json::Value) -> Result<(), InputError> {
        let i = parse_input::<T::Input>(T::NAME, input)?;
        TypedTool::check(self, &i)
    }
    fn run(&self, ctx: &mut Ctx<'_>, input: &serde_json::Value) -> Result<ToolOutput> {
        match parse_input::<T::Input>(T::NAME, input)
            .and_then(|i| TypedTool::check(self, &i).map(|()| i))
        {
            Ok(i) => TypedTool::run(self, ctx, i),
            Err(e) => Ok(ToolOutput::refused(Rule::Input, None, None, e.to_string())),
        }
    }
    fn permission(&self, input: &serde_json::Value, at: &Asking<'_>) -> Need {
        match parse_input::<T::Input>(T::NAME, input) {
            Ok(i) if T::MUTATING => {
                guard_git_writes(TypedTool::permission(self, &i, input, at), input, at.root)
            }
            Ok(i) => TypedTool::permission(self, &i, input, at),
            Err(_) => Need::Auto,
        }
    }
    fn observes(&self, input: &serde_json::Value) -> bool {
        parse_input::<T::Input>(T::NAME, input).is_ok_and(|i| TypedTool::observes(self, &i))
    }
    fn preview(&self, input: &serde_json::Value, read: &mut Preview<'_>) -> Option<String> {
        let i = parse_input::<T::Input>(T::NAME, input).ok()?;
        TypedTool::preview(self, &i, read)
    }
}

/// The paths a file tool's input names: `path`, and each `patches[].path`.
pub fn written_paths(input: &serde_json::Value) -> Vec<&str> {
    let mut raws: Vec<&str> = input
        .get("path")
        .and_then(|v| v.as_str())
        .into_iter()
        .collect();
    if let Some(patches) = input.get("patches").and_then(|p| p.as_array()) {
        raws.extend(
            patches
                .iter()
                .filter_map(|p| p.get("path").and_then(|v| v.as_str())),
        );
    }
    raws
}

/// A write into git's hooks or configuration (`.git/hooks/pre-commit`, `.git/config`,
/// `.gitattributes`) names a program a later `git` runs, so no grant of the writing
/// tool covers it: the question is guarded and asks every time, as the same write by a
/// command does (`cairn_core::command::runs_git`).
fn guard_git_writes(need: Need, input: &serde_json::Value, root: &Path) -> Need {
    let names_git = written_paths(input).into_iter().any(|raw| {
        let path = crate::links::normalise(&root.join(raw));
        cairn_core::command::runs_git(&path.to_string_lossy())
    });
    match need {
        Need::Ask {
            key,
            detail,
            command,
            ..
        } if names_git => Need::Ask {
            key,
            detail: format!("{detail}\n{}", cairn_core::permission::GIT_WRITE_NOTE),
            guarded: true,
            command,
        },
        need => need,
    }
}

/// What a running tool can see and do.
pub struct Ctx<'a> {
    /// The call id.
    pub call: String,
    /// The workspace root (canonical).
    pub root: &'a Path,
    /// The session's redactor: what a tool keeps beyond its call (memory) is redacted
    /// with it, as the engine redacts what the call gives back.
    pub redactor: &'a cairn_core::redact::Redactor,
    /// What the tool redacted itself before the engine saw it (a command's output is
    /// redacted as it streams), by kind: it counts with the call's redactions.
    pub redactions: &'a mut cairn_core::redact::Counts,
    /// The workspace root's open descriptor: every path a tool opens, lists or writes
    /// resolves beneath it, never by its string.
    pub fs: &'a Root,
    /// The cairn home (never touched by tools).
    pub home: &'a Path,
    pub limits: &'a Limits,
    /// The web tools' backends and limits.
    pub web_config: &'a crate::web::WebConfig,
    /// The network, for the web tools.
    pub web: &'a dyn crate::web::Web,
    /// The command `problems` runs, if one is configured.
    pub check_command: Option<&'a [String]>,
    /// Milliseconds the check command may run.
    pub check_timeout_ms: u64,
    /// The session's credential files: a search of a folder leaves them out.
    pub credential_files: &'a CredentialFiles,
    /// The project folder (memory, allow list).
    pub project_dir: &'a Path,
    /// The session id.
    pub session: &'a str,
    pub rec: &'a mut Recorder,
    /// Folders outside the workspace whose files (not subfolders) this call may touch
    /// (granted permissions).
    pub outside_ok: Vec<std::path::PathBuf>,
    /// Background children and the workspace manifest (the shell tools' runtime).
    pub rt: &'a mut Runtime,
    /// The call's `path` as the engine resolved it before the call (checking where it
    /// leads), which [`Ctx::resolve`] takes rather than resolving it again.
    pub resolved: Option<crate::Resolved>,
}

impl Ctx<'_> {
    /// The folded state so far.
    pub fn state(&self) -> &State {
        &self.rec.state
    }

    /// Resolves a path inside the workspace, or the refusal to return.
    pub fn resolve(&self, path: &str) -> Result<WsPath, ToolOutput> {
        crate::Resolved::plain_in(self.resolved.as_ref(), self.fs, self.home, path)
            // A path with no symlink on it names its real file already.
            .map(|(ws, plain)| if plain { ws } else { self.real(ws) })
            .or_else(|e| match e {
                PathError::Outside(m) => {
                    // A folder outside the workspace the user allowed for this tool: the
                    // files directly in it, not its subfolders (another folder asks again).
                    if let Some(t) = crate::paths::target(self.root, path)
                        && !t.starts_with(self.home)
                        && self
                            .outside_ok
                            .iter()
                            .any(|d| t.parent() == Some(d.as_path()))
                    {
                        let rel = t.to_string_lossy().into_owned();
                        return Ok(WsPath { abs: t, rel });
                    }
                    Err(ToolOutput::refused(Rule::Confinement, Some(path), None, m))
                }
                PathError::Invalid(m) => Err(ToolOutput::error(m)),
            })
    }

    /// `ws` named by its real path when symlinks inside the workspace lead elsewhere
    /// (`link.txt` → `target.txt`): reads, writes and the rules then all speak of the
    /// file that is really read and written. Left as named when it cannot be reached
    /// (the open that follows says why).
    fn real(&self, mut ws: WsPath) -> WsPath {
        let real = match self.fs.stat(&ws) {
            Ok((_, real)) => Some(real),
            Err(_) => self
                .fs
                .parent(&ws, false)
                .ok()
                .map(|p| p.real().to_string()),
        };
        if let Some(real) = real
            && real != ws.rel
            && !real.starts_with('/')
        {
            ws.abs = self.root.join(&real);
            ws.rel = real;
        }
        ws
    }

    /// The answer for a path that names nothing there: what was looked for (`file`,
    /// `file or folder`), the path as resolved (`rel`), anything the tool adds
    /// (`also`), and the folder relative paths are resolved against, so that a model
    /// that guessed a path can correct it instead of guessing again.
    pub fn not_found(&self, what: &str, rel: &str, also: &str) -> ToolOutput {
        ToolOutput::error(format!(
            "no such {what}: {rel} ({also}paths are resolved against the workspace root {}; give one relative to it, such as src/main.rs)",
            self.root.display()
        ))
    }

    /// The answer for `path` (as the model named it) when opening it beneath the root
    /// found it leading outside (`why`): a confinement refusal, as the string check
    /// gives.
    pub fn refuse_outside(path: &str, why: String) -> ToolOutput {
        ToolOutput::refused(Rule::Confinement, Some(path), None, why)
    }

    /// The project's blob store.
    pub fn blobs(&self) -> &BlobStore {
        &self.rec.blobs
    }

    /// Stores bytes as a blob (made durable before the records that name it).
    pub fn put_blob(&mut self, bytes: &[u8]) -> Result<BlobRef> {
        self.rec.put_blob(bytes)
    }

    /// Reads a blob of the project.
    pub fn read_blob(&self, hash: &Hash) -> Option<Vec<u8>> {
        self.rec.blobs.get(hash).ok()
    }

    /// Appends a side-effect event for this call and folds it.
    pub fn record(&mut self, event: Event) -> Result<()> {
        if let Event::FileWrite(w) = &event
            && w.status == WriteStatus::Ok
        {
            // Keeps the manifest in step, so the next scan does not call it external.
            self.rt.note_write(w);
        }
        self.rec.append(&event).map(|_| ())
    }

    /// Records that the model was shown `ranges` of `path`.
    pub fn record_read(
        &mut self,
        rel: &str,
        ranges: Vec<(u32, u32)>,
        total_lines: u32,
        hash: Hash,
    ) -> Result<()> {
        let call = self.call.clone();
        self.record(Event::FileRead(FileRead {
            call,
            path: rel.to_string(),
            ranges,
            total_lines,
            hash,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct In {
        path: String,
        lines: Option<Vec<u32>>,
        parts: Option<Vec<Part>>,
    }

    #[derive(Debug, serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Part {
        op: String,
        text: String,
        note: Option<String>,
    }

    #[derive(Debug, serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Nothing {
        path: Option<String>,
    }

    #[test]
    fn input_errors_read_as_before() {
        let e = InputError::Schema {
            tool: "read_file".into(),
            field: None,
            what: "missing field `path`".into(),
        };
        assert_eq!(
            e.to_string(),
            "invalid input for read_file: missing field `path`"
        );
        let e = InputError::Schema {
            tool: "read_file".into(),
            field: Some("lines[1]".into()),
            what: "invalid type: string \"x\", expected u32".into(),
        };
        assert_eq!(
            e.to_string(),
            "invalid input for read_file: field `lines[1]`: invalid type: string \"x\", expected u32"
        );
    }

    #[test]
    fn parse_input_names_the_field() {
        let e = parse_input::<In>("t", &serde_json::json!({})).unwrap_err();
        assert!(
            matches!(&e, InputError::Schema { field: None, .. }),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "invalid input for t: missing field `path`; send the call again with every required field: path"
        );
        let e = parse_input::<In>(
            "t",
            &serde_json::json!({"path": "a", "parts": [{"op": "x"}]}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid input for t: field `parts[0]`: missing field `text`; send the call again with every required field: op, text"
        );
        // A schema that requires nothing lists nothing.
        let e = parse_input::<Nothing>("t", &serde_json::json!("not an object")).unwrap_err();
        assert!(!e.to_string().contains("required"), "{e}");
        let e = parse_input::<In>("t", &serde_json::json!({"path": "a", "lines": [1, "x"]}))
            .unwrap_err();
        assert!(
            matches!(&e, InputError::Schema { field: Some(f), .. } if f == "lines[1]"),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with("invalid input for t: field `lines[1]`: invalid type"),
            "{e}"
        );
    }
}
