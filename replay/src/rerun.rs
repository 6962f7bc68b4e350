//! Re-executing a session: its starting workspace is materialised from the manifest
//! and its blobs in a temporary folder (the original workspace is never touched), a
//! new session whose parent is the original runs every recorded user message and call
//! again through the engine, and each result is compared with the recorded one (see
//! `compare` for the normalisation). The first divergence and every later one are
//! reported.
//!
//! Shell tools: with [`ShellMode::Rerun`] (the default) their calls run again like any
//! other; with [`ShellMode::Recorded`] a call that recorded `shell_exec` events is not
//! run: its recorded answer stands and its recorded workspace changes are applied to
//! the replay's folder, so later calls see the same files. Only such calls differ
//! between the modes.

use std::path::{Path, PathBuf};

use cairn_engine::event::{Event, Feature, Parent, SandboxMode, Sandboxed};
use cairn_engine::{AnsweredCall, AnsweredWrite, Engine, EngineConfig, Home};
use serde::Serialize;

use crate::checkout::{Contents, Dest, WithheldFile};
use crate::compare::{Field, FieldDiff, Norm, compare_calls, unified};
use crate::error::{ReplayError, Result, io_at};
use crate::session::{Call, FileAt, Session};

/// How shell tools are replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShellMode {
    /// Run shell commands again, in the strict sandbox: only the materialised copy and
    /// a temporary folder are writable, no TCP. Where the kernel cannot enforce that
    /// sandbox fully, commands are answered from the recording instead, and the report
    /// says so.
    #[default]
    Rerun,
    /// Answer them from the recording.
    Recorded,
    /// Run them again without any sandbox: they may write anywhere the user may, and
    /// reach the network. Only when asked for by name.
    RerunUnsandboxed,
}

impl ShellMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            ShellMode::Rerun => "rerun",
            ShellMode::Recorded => "recorded",
            ShellMode::RerunUnsandboxed => "rerun-unsandboxed",
        }
    }
}

impl std::fmt::Display for ShellMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl std::str::FromStr for ShellMode {
    type Err = cairn_store::ParseNameError;
    fn from_str(s: &str) -> Result<ShellMode, cairn_store::ParseNameError> {
        match s {
            "rerun" => Ok(ShellMode::Rerun),
            "recorded" => Ok(ShellMode::Recorded),
            "rerun-unsandboxed" => Ok(ShellMode::RerunUnsandboxed),
            _ => Err(cairn_store::ParseNameError {
                what: "shell mode",
                name: s.to_string(),
                expected: &["rerun", "recorded", "rerun-unsandboxed"],
            }),
        }
    }
}

/// A hook run on the materialised workspace before the replay starts.
pub type Prepare = Box<dyn FnOnce(&Path) -> std::io::Result<()>>;

/// Settings of a replay.
#[derive(Default)]
pub struct ReplayOptions {
    pub shell: ShellMode,
    /// The cairn home the replay session is recorded in (default: the original's, the
    /// folder four levels above its session folder).
    pub home: Option<Home>,
    /// Run with this configuration instead of the recorded one: a what-if (and how
    /// tests simulate a tool whose behaviour changed).
    pub config: Option<EngineConfig>,
    /// Changes the materialised workspace before the replay starts (tests, what-ifs).
    pub prepare: Option<Prepare>,
    /// Materialise the workspace here (must be new or empty) and keep it, instead of in
    /// a temporary folder removed at the end.
    pub keep_workspace: Option<PathBuf>,
    /// Record the replay with this durability instead of the recorded session's: many
    /// replays at once (`replay --all`, a worker's scratch home) write theirs with
    /// `none` and sync once at the end, not one flush per file of each.
    pub durability: Option<cairn_store::Durability>,
}

/// One difference between a recorded call and its replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Divergence {
    /// The seq of the recorded call's `tool_started` (0 for the workspace).
    pub seq: u64,
    pub call: String,
    pub tool: String,
    #[serde(flatten)]
    pub diff: FieldDiff,
}

/// The outcome of a replay.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    pub original: String,
    /// The replay session's id and folder.
    pub replay: String,
    pub replay_dir: PathBuf,
    /// How shell calls were replayed: what was asked for, or `recorded` when the
    /// sandbox a rerun needs could not be enforced (then `note` says why).
    pub shell: ShellMode,
    /// The sandbox the replay's commands ran under.
    pub sandbox: Sandboxed,
    /// Why shell calls were not run again although asked to be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub calls: u64,
    pub rerun: u64,
    /// Calls answered from the recording: network and MCP calls, shell calls with
    /// `--shell recorded`, and calls whose input held a secret.
    pub from_recording: u64,
    /// Of those, the calls answered from the recording because their input held a
    /// secret, which the log keeps only as a redaction marker.
    pub held_secret: u64,
    /// In the order of the recorded calls: the first is the first divergence.
    pub divergences: Vec<Divergence>,
    /// The withheld files the replay's workspace needed (at its start, and written by
    /// calls answered from the recording), each copied from the recorded session's
    /// workspace.
    pub withheld: Vec<WithheldFile>,
}

impl ReplayReport {
    pub fn is_identical(&self) -> bool {
        self.divergences.is_empty()
    }
}

/// Writes the files of `session`'s manifest into `dir`; returns the withheld files
/// copied from the session's workspace.
fn materialise(session: &Session, dir: &Path) -> Result<Vec<WithheldFile>> {
    let files: Vec<(String, FileAt)> = session
        .manifest()?
        .iter()
        .filter(|e| e.special.is_none())
        .map(|e| (e.path.clone(), FileAt::of(e)))
        .collect();
    let contents = Contents::gather(session, files.iter().map(|(p, f)| (p, f)))?;
    let out = Dest::open(dir)?;
    // A file recorded by hash and size only has no content to write.
    for (path, f) in files.iter().filter(|(_, f)| f.not_kept.is_none()) {
        out.write(path, &contents.bytes(session, path, f)?, f.mode)?;
    }
    Ok(contents.withheld)
}

/// The cairn home a session folder lives in (`<home>/projects/<key>/sessions/<id>`).
pub fn home_of(dir: &Path) -> Result<Home> {
    let home = dir.ancestors().nth(4).ok_or_else(|| ReplayError::Session {
        path: dir.to_path_buf(),
        what: "not inside a cairn home (<home>/projects/<key>/sessions/<id>)".into(),
    })?;
    Ok(Home::at(home))
}

/// Re-runs the session at `dir` and compares every result with the recording.
pub fn replay(dir: &Path, options: ReplayOptions) -> Result<ReplayReport> {
    let original = Session::load(dir)?;
    // Every path the replay would write from the log is checked before anything is.
    original.check_write_paths()?;
    original.manifest()?;
    let mut config = match options.config {
        Some(c) => c,
        None => original.config()?,
    };
    // A replayed command may write only in the copy and its temporary folder, and
    // reaches no TCP peer: whatever the recording was allowed, a replay cannot hurt.
    config.sandbox = match options.shell {
        ShellMode::RerunUnsandboxed => SandboxMode::Off,
        _ => SandboxMode::Strict,
    };
    config.sandbox_write_roots = Vec::new();
    if let Some(d) = options.durability {
        config.durability = d;
    }
    let home = match options.home {
        Some(h) => h,
        None => home_of(&original.dir)?,
    };
    let (_tmp, root) = replay_root(options.keep_workspace.as_deref(), &original)?;
    let mut withheld = materialise(&original, &root)?;
    if let Some(prepare) = options.prepare {
        prepare(&root).map_err(io_at(&root))?;
    }
    let parent = Parent {
        session: original.id.clone(),
        seq: original.head.seq,
        hash: original.head.hash,
    };
    let mut engine = Engine::start_with_parent(&home, &root, config, Some(parent))?;
    let new_root = engine.root().to_path_buf();
    let sandbox = engine.sandbox().clone();
    let (shell, note) = shell_mode(options.shell, &sandbox);
    let calls = original.calls();
    // The replay's call id of each recorded call that was run again.
    let mut ran: Vec<(usize, String)> = Vec::new();
    let mut from_recording = 0u64;
    let mut held_secret = 0u64;
    let mut next = 0usize;
    for r in &original.records {
        match &r.event {
            Event::UserMessage { text, .. } => engine.user_message(text)?,
            Event::ToolStarted { .. } => {
                let Some(c) = calls.get(next) else { continue };
                let i = next;
                next += 1;
                // The network and MCP servers are never asked again: their answers come
                // from the recording, as do commands with `--shell recorded`.
                let network = cairn_tools::effects_of(&c.tool).is_some_and(|e| e.external);
                let recorded_shell = c.shell && shell == ShellMode::Recorded;
                // A call whose input held a secret has only its marker in the log: run
                // again, it would run something else (a command with the marker in
                // its argument, a file written with it).
                let secret = c.input_redacted();
                if (network || recorded_shell || secret)
                    && let Some((_, f)) = &c.finished
                {
                    from_recording += 1;
                    if secret && !network {
                        held_secret += 1;
                    }
                    // Its recorded writes applied to the copy, as the command or the
                    // write would have made them.
                    let apply = recorded_shell || (secret && !network);
                    let call = answer_from_recording(
                        &mut engine,
                        (&original, c, f),
                        apply.then_some(new_root.as_path()),
                        &mut withheld,
                    )?;
                    ran.push((i, call));
                    continue;
                }
                let out = engine.call_with(&c.tool, c.input.clone(), c.answer)?;
                ran.push((i, out.call));
            }
            // Permission answers are given with their calls; model turns are inputs the
            // calls already carry.
            _ => {}
        }
    }
    let replay_id = engine.id().to_string();
    let replay_dir = engine.dir().to_path_buf();
    engine.end(&format!("replay of {}", original.id))?;
    let replayed = Session::load(&replay_dir)?;
    let norm = Norm {
        roots: Some((
            new_root.to_string_lossy().into_owned(),
            original.started.workspace.clone(),
        )),
    };
    let divergences = divergences(&original, &replayed, &calls, &ran, &norm);
    Ok(ReplayReport {
        original: original.id.clone(),
        replay: replay_id,
        replay_dir,
        shell,
        sandbox,
        note,
        calls: calls.len() as u64,
        rerun: ran.len() as u64 - from_recording,
        from_recording,
        held_secret,
        divergences,
        withheld,
    })
}

/// A call answered from its recording (`f`, how it finished), its recorded writes
/// applied to the copy at `apply_at` when given; the replay's call id.
fn answer_from_recording(
    engine: &mut Engine,
    (original, c, f): (&Session, &Call, &cairn_core::event::ToolFinished),
    apply_at: Option<&Path>,
    withheld: &mut Vec<WithheldFile>,
) -> Result<String> {
    let writes = match apply_at {
        Some(root) => {
            let (writes, copied) = apply_recorded_writes(original, c, root)?;
            withheld.extend(copied);
            writes
        }
        None => Vec::new(),
    };
    let out = engine.call_answered(
        &c.tool,
        c.input.clone(),
        AnsweredCall {
            status: f.status,
            output: &f.output,
            refusal: f.refusal.as_ref(),
            writes: &writes,
        },
    )?;
    Ok(out.call)
}

/// The folder the replay runs in: `keep` (which must be empty), or a temporary one
/// named as the original workspace, so that a path just outside the workspace (its
/// parent) maps back too.
fn replay_root(
    keep: Option<&Path>,
    original: &Session,
) -> Result<(Option<tempfile::TempDir>, PathBuf)> {
    Ok(match keep {
        Some(d) => {
            if d.exists() && std::fs::read_dir(d).map_err(io_at(d))?.next().is_some() {
                return Err(ReplayError::NotEmpty(d.to_path_buf()));
            }
            std::fs::create_dir_all(d).map_err(io_at(d))?;
            (None, d.to_path_buf())
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("cairn-replay-")
                .tempdir()
                .map_err(io_at(&std::env::temp_dir()))?;
            let name = Path::new(&original.started.workspace)
                .file_name()
                .map_or("workspace".into(), |n| n.to_os_string());
            let root = t.path().join(name);
            std::fs::create_dir_all(&root).map_err(io_at(&root))?;
            (Some(t), root)
        }
    })
}

/// How shell calls are replayed, and a note when they cannot be rerun as asked. What
/// a replay needs of strict mode: writes confined and TCP cut (the scopes of Landlock
/// ABI 6 matter less to it than running at all on a kernel before them).
fn shell_mode(asked: ShellMode, sandbox: &Sandboxed) -> (ShellMode, Option<String>) {
    let confined = sandbox
        .features
        .as_ref()
        .is_some_and(|f| f.filesystem == Feature::Enforced && f.tcp == Feature::Enforced);
    match asked {
        ShellMode::Rerun if !confined => (
            ShellMode::Recorded,
            Some(format!(
                "shell calls answered from the recording: this kernel cannot enforce the strict sandbox (Landlock ABI {}, enforcement {}); the shell mode rerun-unsandboxed runs them without it",
                sandbox.abi,
                sandbox.enforced.as_str()
            )),
        ),
        s => (s, None),
    }
}

/// Where the replay differs from the recording: the workspace at the start, then each
/// call run again (`ran`: the recorded call's index and the replay's call id).
fn divergences(
    original: &Session,
    replayed: &Session,
    calls: &[Call],
    ran: &[(usize, String)],
    norm: &Norm,
) -> Vec<Divergence> {
    let mut divergences = Vec::new();
    // Compared by what each file is (path, size, mode, content hash), not by the
    // manifest blob: a recording that captured by git ids and a copy captured in full
    // hold the same files in different manifests.
    if replayed.started.manifest.hash != original.started.manifest.hash {
        let (x, y) = (manifest_text(original), manifest_text(replayed));
        if x != y {
            divergences.push(workspace_divergence(x, y));
        }
    }
    let new_calls = replayed.calls();
    for (i, new_id) in ran {
        let a = &calls[*i];
        let Some(b) = new_calls.iter().find(|c| &c.call == new_id) else {
            continue;
        };
        if a.finished.is_none() {
            // Interrupted in the recording: there is no recorded result to compare.
            continue;
        }
        for d in compare_calls(a, &original.blobs, b, &replayed.blobs, norm) {
            divergences.push(Divergence {
                seq: a.seq,
                call: a.call.clone(),
                tool: a.tool.clone(),
                diff: d,
            });
        }
    }
    divergences
}

/// Applies a call's recorded workspace changes to the replay's folder. Gives them back
/// with their contents, for the replay to record as the call's, and the withheld files
/// copied from the session's workspace.
fn apply_recorded_writes(
    session: &Session,
    c: &Call,
    root: &Path,
) -> Result<(Vec<AnsweredWrite>, Vec<WithheldFile>)> {
    let applied = |w: &cairn_core::event::FileWrite| {
        w.status == cairn_engine::event::WriteStatus::Ok
            && cairn_core::state::recorded_path(&w.path)
                == cairn_core::state::RecordedPath::Workspace
    };
    let writes: Vec<_> = c
        .writes
        .iter()
        .filter(|(_, w)| applied(w))
        .map(|(_, w)| {
            let after = w.after.map(|a| FileAt {
                hash: a.hash,
                len: a.len,
                mode: w.mode,
                withheld: w.withheld,
                not_kept: None,
            });
            (w.path.clone(), after)
        })
        .collect();
    let contents = Contents::gather(
        session,
        writes
            .iter()
            .filter_map(|(p, f)| f.as_ref().map(|f| (p, f))),
    )?;
    let out = Dest::open(root)?;
    for (path, after) in &writes {
        match after {
            None => out.remove(path)?,
            Some(f) => out.write(path, &contents.bytes(session, path, f)?, f.mode)?,
        }
    }
    // Every recorded write, applied or not, is recorded again as the call's; a withheld
    // content stays withheld (its recorded reference, no blob).
    let mut answered = Vec::new();
    for (_, w) in &c.writes {
        let content = |b: &Option<cairn_store::BlobRef>| -> Result<Option<Vec<u8>>> {
            match b {
                Some(b) if !w.withheld && session.blobs.has(&b.hash) => {
                    session.blob(&b.hash, &w.path).map(Some)
                }
                _ => Ok(None),
            }
        };
        answered.push(AnsweredWrite {
            write: w.clone(),
            before: content(&w.before)?,
            after: content(&w.after)?,
        });
    }
    Ok((answered, contents.withheld))
}

fn manifest_text(s: &Session) -> String {
    s.manifest()
        .map(|m| {
            m.iter()
                .map(|e| {
                    let hash = e.hash.map_or("none".into(), |h| h.short(16));
                    format!("{} {} {:o} {hash}\n", e.path, e.size, e.mode)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn workspace_divergence(x: String, y: String) -> Divergence {
    Divergence {
        seq: 0,
        call: String::new(),
        tool: String::new(),
        diff: FieldDiff {
            field: Field::Workspace,
            diff: unified("a/manifest", "b/manifest", &x, &y),
            expected: x,
            actual: y,
        },
    }
}
