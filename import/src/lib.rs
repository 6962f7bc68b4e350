//! Importing other agents' sessions: Codex CLI rollouts (`rollout-*.jsonl`, also
//! `.jsonl.zst`), Claude Code transcripts (`<project>/<session>.jsonl`, their
//! subagents' files), Gemini CLI chats (`<project>/chats/session-*.jsonl`) and ATIF
//! trajectories (`*.atif.json`, `trajectory.json`: Harbor's interchange format, what
//! `cairn export atif` writes) become cairn sessions, so that every review verb works
//! on them.
//!
//! Each source session becomes a session in the project of its working directory,
//! written through the [`cairn_tools::Recorder`]: hash-chained, every record redacted.
//! `session_started.imported` says where it came from (agent, version, path, the
//! BLAKE3 of the file; its bytes only when asked, as they hold secrets raw), and each
//! pass ends with `session_ended.imported`: how far the file was read, the warnings,
//! the lines of unknown types, the secrets the source held. Importing a file again
//! does nothing; a file that grew is imported from where the last pass stopped, as a
//! continuation (`session_resumed.imported`, then the new records).
//!
//! Reading streams the file line by line: memory is bounded by `line_bytes_max` (and,
//! for a Claude Code transcript, a few words per line for its tree). A line that is
//! not JSON, too long or cut short is a warning, never a failure; a line of a type
//! this version does not map is kept, raw, in a blob (`source_item`).
//!
//! ```no_run
//! let home = cairn_engine::Home::at(std::path::Path::new("/tmp/cairn-home"));
//! let summary = cairn_import::import_paths(
//!     &home,
//!     &[std::path::PathBuf::from("/tmp/rollout.jsonl")],
//!     &cairn_import::Options::default(),
//!     &mut |_, _| {},
//! );
//! println!("{} sessions, {} calls", summary.sessions, summary.calls);
//! ```

pub mod agent_settings;
mod atif;
mod claude;
mod codex;
mod error;
mod gemini;
pub mod hook;
pub mod hook_install;
mod index;
pub mod opencode;
mod patch;
mod source;
mod step;
mod writer;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use cairn_core::event::{ImportProgress, Imported, ImportedFile, Parent};
use cairn_core::redact::{Counts, Redactor};
use cairn_engine::Home;
use cairn_store::{BlobStore, Hash};
use serde::Serialize;

pub use error::{ImportError, Result};
pub use index::Index;
pub use source::{Format, Line, Source};
pub use step::Step;
pub use writer::{Finished, OUTPUT_INLINE_BYTES_MAX, Writer};

/// The longest source line read, in bytes: a longer one is skipped with a warning, so
/// memory stays bounded whatever the file holds.
pub const LINE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Lines read to tell a file's format before giving up.
pub const DETECT_LINES_MAX: u64 = 64;

/// Rotated segments followed back from a live Codex rollout.
pub const SEGMENTS_MAX: usize = 256;

/// Warnings kept word for word in a summary (all are counted).
pub const WARNINGS_KEPT_MAX: usize = 100;

/// How to import.
#[derive(Debug, Clone)]
pub struct Options {
    /// Keep each source file's bytes as a blob (they hold its secrets raw).
    pub keep_original: bool,
    /// Only files modified at or after this time.
    pub since: Option<jiff::Timestamp>,
    pub line_bytes_max: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            keep_original: false,
            since: None,
            line_bytes_max: LINE_BYTES_MAX,
        }
    }
}

/// One session an import wrote or continued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionSummary {
    pub id: String,
    pub dir: PathBuf,
    pub source: PathBuf,
    pub agent: &'static str,
    /// `main`, `fork`, `sidechain` or `subagent`.
    pub branch: String,
    /// A continuation of a session imported before.
    pub continued: bool,
    pub calls: u64,
    pub records: u64,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Source files looked at.
    pub files: u64,
    /// Sessions written (new ones and continuations).
    pub sessions: u64,
    /// Of them, continuations of sessions imported before.
    pub continued: u64,
    /// Files imported before and unchanged since: nothing done.
    pub unchanged: u64,
    /// Files left out by `since`.
    pub skipped: u64,
    pub calls: u64,
    /// Calls with no result in the source, finished as interrupted.
    pub interrupted: u64,
    pub lines: u64,
    pub bytes: u64,
    /// Lines that were not JSON, too long or cut short, and other oddities.
    pub warnings: u64,
    /// Lines of a type this version does not map (kept as blobs).
    pub unknown: u64,
    /// Secrets the sources held, by kind (redacted in what cairn stores).
    pub secrets: BTreeMap<String, u64>,
    /// Files that could not be imported, with why.
    pub errors: Vec<(PathBuf, String)>,
    /// The first warnings, word for word but redacted.
    pub warning_list: Vec<String>,
    pub imported: Vec<SessionSummary>,
}

/// What the summary's words are redacted with: a warning or an error names what a
/// source file holds (a session id, a parent thread), which may be a secret, and the
/// summary is printed and written as JSON.
static SUMMARY_REDACTOR: std::sync::LazyLock<Redactor> =
    std::sync::LazyLock::new(|| Redactor::with_env(std::env::vars()));

/// `text` redacted as every word of a [`Summary`] is.
fn redacted(text: String) -> String {
    SUMMARY_REDACTOR.redact_string(text, &mut Counts::new())
}

impl Summary {
    fn warn(&mut self, what: String) {
        self.warnings += 1;
        if self.warning_list.len() < WARNINGS_KEPT_MAX {
            self.warning_list.push(redacted(what));
        }
    }

    fn error(&mut self, file: PathBuf, what: String) {
        self.errors.push((file, redacted(what)));
    }
}

/// The source files under `paths` (files as given; folders walked for `*.jsonl`,
/// `*.jsonl.zst`, `*.atif.json` and `trajectory.json`), sorted, each once.
pub fn source_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out);
        } else {
            out.push(p.clone());
        }
    }
    // By their bytes, not by components: `<session>.jsonl` then comes before
    // `<session>/subagents/…`, so a subagent finds its main session imported.
    out.sort_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
    out.dedup();
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            walk(&p, out);
        } else if t.is_file() {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.ends_with(".jsonl") || name.ends_with(".jsonl.zst") || atif::is_atif_name(&name)
            {
                out.push(p);
            }
        }
    }
}

/// Imports every source file under `paths` into `home`. `progress` is called after
/// each file with its path and size. A file that cannot be imported is listed in the
/// summary's errors; the others go on.
pub fn import_paths(
    home: &Home,
    paths: &[PathBuf],
    options: &Options,
    progress: &mut dyn FnMut(&Path, u64),
) -> Summary {
    let mut summary = Summary::default();
    let mut index = Index::load(home);
    // Subagents whose parent session is not imported yet: taken up after the others,
    // so that a parent later in the order is there to link to.
    let mut deferred = Vec::new();
    for file in source_files(paths) {
        summary.files += 1;
        let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        if let Some(since) = options.since {
            let modified = std::fs::metadata(&file)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| jiff::Timestamp::try_from(t).ok());
            if modified.is_some_and(|m| m < since) {
                summary.skipped += 1;
                progress(&file, size);
                continue;
            }
        }
        match import_file(home, &file, options, &mut index, &mut summary, 0, true) {
            Ok(true) => {
                deferred.push((file, size));
                continue;
            }
            Ok(false) => {}
            Err(e) => summary.error(file.clone(), e.to_string()),
        }
        progress(&file, size);
    }
    for (file, size) in deferred {
        if let Err(e) = import_file(home, &file, options, &mut index, &mut summary, 0, false) {
            summary.error(file.clone(), e.to_string());
        }
        progress(&file, size);
    }
    summary
}

/// What the first pass over a file found.
struct Scan {
    format: Format,
    source_id: String,
    cwd: Option<String>,
    version: Option<String>,
    started_at: Option<String>,
    previous: Option<String>,
    /// A Codex subagent's rollout: the source id of the session that spawned it.
    parent: Option<String>,
    /// Claude Code: each line's node (none for lines outside the tree).
    nodes: Vec<Option<claude::Node>>,
    file: ImportedFile,
    read_to: u64,
    read_hash: Hash,
    /// Bytes after the last complete line: a line cut short (a live file mid-write,
    /// or a crash), left for a later import.
    torn: u64,
}

#[expect(
    clippy::too_many_lines,
    reason = "one pass over the file: each format's detection and metadata side by side"
)]
fn scan(path: &Path, options: &Options) -> Result<Scan> {
    let mut src = Source::open(path, options.line_bytes_max)?;
    let mut buf = Vec::new();
    let mut format = None;
    let mut cmeta = codex::Meta::default();
    let mut lmeta = claude::Meta::default();
    let mut gmeta = gemini::Meta::default();
    let mut ometa = None;
    let mut nodes = Vec::new();
    let mut first = true;
    let mut torn = 0;
    while let Some(line) = src.next_line(&mut buf)? {
        if let Line::Torn(n) = line {
            torn = n;
        }
        let v = match line {
            Line::Complete => serde_json::from_slice::<serde_json::Value>(&buf).ok(),
            _ => None,
        };
        let Some(v) = v else {
            nodes.push(None);
            if format.is_none() && src.index >= DETECT_LINES_MAX {
                break;
            }
            continue;
        };
        if format.is_none() {
            if codex::is_codex(&v) || (first && codex::is_legacy_header(&v)) {
                format = Some(Format::Codex);
            } else if gemini::is_gemini(&v) {
                format = Some(Format::Gemini);
            } else if first && opencode::is_opencode(&v) {
                format = Some(Format::OpenCode);
            } else if claude::is_claude(&v) {
                format = Some(Format::Claude);
            } else if src.index >= DETECT_LINES_MAX {
                break;
            }
        }
        match format {
            Some(Format::Codex) => {
                codex::meta(&v, first, &mut cmeta);
                nodes.push(None);
            }
            Some(Format::Claude) => {
                claude::meta(&v, &mut lmeta);
                nodes.push(claude::node(&v));
            }
            Some(Format::Gemini) => {
                gemini::meta(&v, &mut gmeta);
                nodes.push(None);
            }
            Some(Format::OpenCode) => {
                if ometa.is_none() {
                    ometa = opencode::meta(&v);
                }
                nodes.push(None);
            }
            None => nodes.push(None),
        }
        first = false;
    }
    let Some(format) = format else {
        return Err(ImportError::UnknownFormat {
            path: path.to_path_buf(),
            lines: src.index,
        });
    };
    let read_to = src.offset();
    let read_hash = src.content_hash();
    let (hash, bytes) = src.raw_hash()?;
    let stem = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = cmeta.parent.filter(|_| format == Format::Codex);
    let (source_id, cwd, version, started_at, previous) = match format {
        Format::Codex => (
            cmeta.id,
            cmeta.cwd,
            cmeta.version,
            cmeta.started_at,
            cmeta.previous,
        ),
        Format::Claude => (lmeta.id, lmeta.cwd, lmeta.version, lmeta.started_at, None),
        Format::Gemini => gmeta.identity(path),
        Format::OpenCode => match ometa {
            Some(m) => (Some(m.id), m.cwd, m.version, m.started_at, None),
            None => (None, None, None, None, None),
        },
    };
    let parent = parent.or_else(|| gmeta.parent(path).filter(|_| format == Format::Gemini));
    Ok(Scan {
        format,
        source_id: source_id.unwrap_or(stem),
        cwd,
        version,
        started_at,
        previous,
        parent,
        nodes: if format == Format::Claude {
            nodes
        } else {
            Vec::new()
        },
        file: ImportedFile {
            path: path.to_string_lossy().into_owned(),
            hash,
            bytes,
            original: None,
        },
        read_to,
        read_hash,
        torn,
    })
}

/// Which session of a Claude Code file each line goes to.
struct Branches {
    /// Per line: the branch index (0: main), or `None` for a line of no branch.
    of_line: Vec<Option<u32>>,
    /// Per branch after main: its kind and the line its fork point is (none: the
    /// start or end of main).
    branches: Vec<(String, Option<usize>)>,
}

fn branches(nodes: &[Option<claude::Node>], subagent_file: bool) -> Branches {
    let by_uuid: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| n.as_ref().map(|n| (n.uuid.as_str(), i)))
        .collect();
    let parent_of = |i: usize| -> Option<usize> {
        nodes[i]
            .as_ref()
            .and_then(|n| n.parent.as_deref())
            .and_then(|p| by_uuid.get(p).copied())
    };
    let mut of_line: Vec<Option<u32>> = vec![None; nodes.len()];
    let mut out = Branches {
        of_line: Vec::new(),
        branches: Vec::new(),
    };
    if subagent_file {
        // A subagent's own file: all of it is one session.
        out.of_line = vec![Some(0); nodes.len()];
        return out;
    }
    let main_side = |i: usize| nodes[i].as_ref().is_some_and(|n| !n.sidechain);
    // Main: the ancestors of the last message of the main conversation.
    if let Some(leaf) = (0..nodes.len())
        .rev()
        .find(|&i| main_side(i) && nodes[i].as_ref().is_some_and(|n| n.message))
    {
        let mut at = Some(leaf);
        let mut steps = 0;
        while let Some(i) = at {
            if of_line[i].is_some() || steps > nodes.len() {
                break;
            }
            of_line[i] = Some(0);
            at = parent_of(i);
            steps += 1;
        }
    }
    let has_child: HashSet<usize> = (0..nodes.len()).filter_map(parent_of).collect();
    // Other branches: each other leaf message, up to where it meets one already placed.
    for leaf in 0..nodes.len() {
        let is_leaf = main_side(leaf)
            && nodes[leaf].as_ref().is_some_and(|n| n.message)
            && !has_child.contains(&leaf)
            && of_line[leaf].is_none();
        if !is_leaf {
            continue;
        }
        let b = out.branches.len() as u32 + 1;
        let mut at = Some(leaf);
        let mut point = None;
        let mut steps = 0;
        while let Some(i) = at {
            if of_line[i].is_some() {
                point = Some(i);
                break;
            }
            if steps > nodes.len() {
                break;
            }
            of_line[i] = Some(b);
            at = parent_of(i);
            steps += 1;
        }
        out.branches.push(("fork".into(), point));
    }
    // Sidechains: each tree of sidechain lines, from its first line.
    let mut side_of_root: HashMap<usize, u32> = HashMap::new();
    for i in 0..nodes.len() {
        if !nodes[i].as_ref().is_some_and(|n| n.sidechain) || of_line[i].is_some() {
            continue;
        }
        let mut root = i;
        let mut steps = 0;
        while let Some(p) = parent_of(root) {
            if !nodes[p].as_ref().is_some_and(|n| n.sidechain) || steps > nodes.len() {
                break;
            }
            root = p;
            steps += 1;
        }
        let b = *side_of_root.entry(root).or_insert_with(|| {
            out.branches.push((
                "sidechain".into(),
                parent_of(root).filter(|&p| of_line[p] == Some(0)),
            ));
            out.branches.len() as u32
        });
        of_line[i] = Some(b);
    }
    // Lines outside the tree, and tree lines on no branch: main's.
    for (i, slot) in of_line.iter_mut().enumerate() {
        if slot.is_none() && !nodes[i].as_ref().is_some_and(|n| n.sidechain) {
            *slot = Some(0);
        }
    }
    out.of_line = of_line;
    out
}

/// A pass over a file that writes lines into a session.
struct Pass<'a> {
    writer: Writer,
    format: Format,
    codex: codex::Codex,
    claude: claude::Claude,
    gemini: gemini::Gemini,
    /// The session's workspace, for an OpenCode command that names none.
    cwd: Option<String>,
    redactor: &'a Redactor,
    secrets: Counts,
    lines: u64,
    warnings: u64,
    unknown: u64,
}

impl Pass<'_> {
    fn line(&mut self, v: &serde_json::Value, raw: &[u8]) -> Result<()> {
        let mut steps = Vec::new();
        match self.format {
            Format::Codex => self.codex.line(v, raw, &mut steps),
            Format::Claude => self.claude.line(v, raw, &mut steps),
            Format::Gemini => self.gemini.line(v, raw, &mut steps),
            Format::OpenCode => {
                // Its file was redacted as it was written: the secrets it held are
                // the ones its lines name.
                opencode::add_redacted(v, &mut self.secrets);
                opencode::line(v, raw, self.cwd.as_deref(), &mut steps);
            }
        }
        self.record(steps)
    }

    fn record(&mut self, steps: Vec<Step>) -> Result<()> {
        for s in steps {
            if let Step::Item { unknown: true, .. } = &s {
                self.unknown += 1;
            }
            self.writer.step(s)?;
        }
        Ok(())
    }

    /// Writes the response gathered so far.
    fn flush(&mut self) -> Result<()> {
        let mut steps = Vec::new();
        match self.format {
            Format::Codex => self.codex.finish(&mut steps),
            Format::Claude => self.claude.finish(&mut steps),
            Format::Gemini | Format::OpenCode => {}
        }
        self.record(steps)
    }

    fn finish(mut self, read_to: u64, read_hash: Hash) -> Result<(Writer, ImportProgress)> {
        self.flush()?;
        let progress = ImportProgress {
            read_to,
            read_hash,
            lines: self.lines,
            warnings: self.warnings,
            unknown: self.unknown,
            secrets: self
                .secrets
                .iter()
                .map(|(k, n)| (k.clone(), u64::from(*n)))
                .collect(),
        };
        Ok((self.writer, progress))
    }
}

/// Reads `path` from content offset `from` (its first `from` bytes must hash to
/// `from_hash`) to `to`, giving each line (`Some(index)` picks lines by index) to
/// the pass. Returns the content hash up to `to`.
#[allow(clippy::too_many_arguments)]
fn run_pass(
    path: &Path,
    options: &Options,
    pass: &mut Pass<'_>,
    from: Option<(u64, Hash)>,
    to: u64,
    pick: &dyn Fn(u64) -> bool,
    points: &HashSet<usize>,
    heads: &mut HashMap<usize, (u64, Hash)>,
    summary: &mut Summary,
) -> Result<Hash> {
    let mut src = Source::open(path, options.line_bytes_max)?;
    let mut buf = Vec::new();
    let (start, start_hash) = from.unwrap_or((0, Hash::of(b"")));
    let name = path.display().to_string();
    loop {
        if src.offset() == start && src.content_hash() != start_hash {
            return Err(ImportError::Changed {
                path: path.to_path_buf(),
                bytes: start,
            });
        }
        if src.offset() >= to {
            break;
        }
        let index = src.index;
        let before = src.offset();
        let Some(line) = src.next_line(&mut buf)? else {
            break;
        };
        if before < start {
            // A Gemini CLI chat writes a message again as it changes: what the
            // earlier pass wrote is taken in, so that it is not written twice.
            if pass.format == Format::Gemini
                && matches!(line, Line::Complete)
                && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&buf)
            {
                pass.gemini.prime(&v);
            }
            continue;
        }
        match line {
            Line::Complete => {}
            Line::TooLong(n) => {
                pass.warnings += 1;
                summary.warn(format!(
                    "{name}: line {} is {n} bytes, longer than {} bytes: skipped",
                    index + 1,
                    options.line_bytes_max
                ));
                continue;
            }
            // Before `to`, where the scan found a whole line: the file changed (reported
            // below).
            Line::Torn(_) => break,
        }
        if !pick(index) {
            continue;
        }
        pass.lines += 1;
        pass.redactor.redact_bytes(&buf, &mut pass.secrets);
        match serde_json::from_slice::<serde_json::Value>(&buf) {
            Ok(v) => pass.line(&v, &buf)?,
            Err(e) => {
                pass.warnings += 1;
                summary.warn(format!(
                    "{name}: line {} is not JSON ({e}): skipped",
                    index + 1
                ));
            }
        }
        if points.contains(&(index as usize)) {
            // Where another branch parts from this one: what was gathered of the
            // response is written, so the point is after it.
            pass.flush()?;
            heads.insert(index as usize, pass.writer.head());
        }
    }
    if src.offset() != to {
        return Err(ImportError::Changed {
            path: path.to_path_buf(),
            bytes: to,
        });
    }
    Ok(src.content_hash())
}

/// The workspace root of a source's working directory: this machine's path made
/// canonical, or, for another system's path ([`foreign_path`]: `e:\Workspace\app`),
/// the source's own text, never joined to the folder the import runs in.
pub(crate) fn root_of(cwd: &str) -> PathBuf {
    if foreign_path(cwd) {
        return PathBuf::from(cwd);
    }
    cairn_engine::project::canonical_prefix(Path::new(cwd))
}

/// True for an absolute path of another system, which this one would read as relative:
/// a Windows drive path (`C:\x`, `c:/x`, `C:`) or a UNC path (`\\server\share`).
pub(crate) fn foreign_path(path: &str) -> bool {
    let b = path.as_bytes();
    let drive = b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b[1] == b':'
        && (b.len() == 2 || b[2] == b'\\' || b[2] == b'/');
    drive || path.starts_with("\\\\")
}

/// Imports one file (and, for a rotated rollout, the segments before it first).
/// Returns true, having written nothing, for a subagent whose parent session is not
/// imported yet when `defer` allows it to wait for it.
fn import_file(
    home: &Home,
    path: &Path,
    options: &Options,
    index: &mut Index,
    summary: &mut Summary,
    depth: usize,
    defer: bool,
) -> Result<bool> {
    let path = &cairn_engine::project::canonical_prefix(path);
    if atif::is_atif_path(path) {
        return atif::import(home, path, options, index, summary).map(|()| false);
    }
    let mut s = scan(path, options)?;
    // Gemini CLI's chats name no version: the one its hook saw, if it recorded the
    // same session live.
    if s.format == Format::Gemini
        && s.version.is_none()
        && let Some(cwd) = &s.cwd
    {
        s.version = hook::live_version(home, &root_of(cwd), "gemini", &s.source_id);
    }
    let redactor = Redactor::with_env(std::env::vars());
    // Imported before: nothing new, a continuation, or a file changed otherwise.
    if let Some(entry) = index.get(path).cloned() {
        if entry.progress.read_to == s.read_to && entry.progress.read_hash == s.read_hash {
            summary.unchanged += 1;
            return Ok(false);
        }
        if s.read_to < entry.progress.read_to {
            summary.warn(format!(
                "{}: shorter than when it was imported into session {}: left as it is",
                path.display(),
                entry.id
            ));
            return Ok(false);
        }
        let from = (entry.progress.read_to, entry.progress.read_hash);
        return continue_into(
            home,
            path,
            options,
            &s,
            &entry.dir,
            Some(from),
            index,
            summary,
            &redactor,
        )
        .map(|()| false);
    }
    // A later segment of a rotated rollout: a continuation of the session the
    // segments before it are in.
    if let Some(prev) = &s.previous
        && let Some(dir) = previous_segment(home, path, prev, options, index, summary, depth)?
    {
        return continue_into(
            home, path, options, &s, &dir, None, index, summary, &redactor,
        )
        .map(|()| false);
    }
    let cwd = s.cwd.clone().ok_or_else(|| ImportError::NoWorkspace {
        path: path.to_path_buf(),
    })?;
    let root = root_of(&cwd);
    let mut file = s.file.clone();
    if options.keep_original {
        file.original = Some(keep(home, &root, path, &file)?);
    }
    let subagent = is_subagent(path, &s);
    // A Codex subagent names its parent thread; a Claude Code one shares its parent's
    // session id.
    let parent_source = s.parent.as_deref().unwrap_or(&s.source_id);
    let parent = if subagent {
        index
            .main_of(parent_source)
            .map(|(session, seq, hash)| Parent { session, seq, hash })
    } else {
        None
    };
    if subagent && parent.is_none() {
        if defer {
            return Ok(true);
        }
        summary.warn(format!(
            "{}: a subagent of session {parent_source}, which is not imported (import its file too): imported without a link to it",
            path.display()
        ));
    }
    let fresh = Fresh {
        home,
        path,
        options,
        s: &s,
        root,
        file,
        redactor: &redactor,
    };
    fresh.import(cwd, subagent, parent, index, summary)?;
    Ok(false)
}

/// The session dir of the segment before a rotated rollout's `path`, imported first
/// when it is not yet; `None`, with a warning, when it could not be.
fn previous_segment(
    home: &Home,
    path: &Path,
    prev: &str,
    options: &Options,
    index: &mut Index,
    summary: &mut Summary,
    depth: usize,
) -> Result<Option<PathBuf>> {
    let prev = match Path::new(prev) {
        p if p.is_absolute() => p.to_path_buf(),
        p => path.parent().map_or(p.to_path_buf(), |d| d.join(p)),
    };
    let prev = cairn_engine::project::canonical_prefix(&prev);
    if depth >= SEGMENTS_MAX || prev == *path {
        return Err(ImportError::SegmentChain {
            path: path.to_path_buf(),
            max: SEGMENTS_MAX,
        });
    }
    if index.get(&prev).is_none() {
        import_file(home, &prev, options, index, summary, depth + 1, false)?;
    }
    if let Some(entry) = index.get(&prev) {
        return Ok(Some(entry.dir.clone()));
    }
    summary.warn(format!(
        "{}: its previous segment {} could not be imported: imported alone",
        path.display(),
        prev.display()
    ));
    Ok(None)
}

/// Whether the file is a subagent's: a Codex thread naming its parent, or a Claude
/// Code transcript under `subagents/` or made only of side-chain messages.
fn is_subagent(path: &Path, s: &Scan) -> bool {
    s.parent.is_some()
        || s.format == Format::Claude
            && (path.components().any(|c| c.as_os_str() == "subagents")
                || s.nodes.iter().flatten().all(|n| n.sidechain)
                    && s.nodes.iter().flatten().next().is_some())
}

/// A file imported into new sessions: its main branch (or the subagent's), then each
/// other branch of a Claude Code conversation as a session of its own.
struct Fresh<'a> {
    home: &'a Home,
    path: &'a Path,
    options: &'a Options,
    s: &'a Scan,
    root: PathBuf,
    file: ImportedFile,
    redactor: &'a Redactor,
}

impl<'a> Fresh<'a> {
    fn imported(&self, branch: &str) -> Imported {
        Imported {
            agent: self.s.format.agent().to_string(),
            agent_version: self.s.version.clone(),
            source_id: self.s.source_id.clone(),
            branch: branch.to_string(),
            file: self.file.clone(),
            started_at: self.s.started_at.clone(),
        }
    }

    fn pass(&self, branch: &str, parent: Option<Parent>, cwd: Option<String>) -> Result<Pass<'a>> {
        let writer = Writer::create(self.home, &self.root, self.imported(branch), parent)?;
        Ok(Pass {
            writer,
            format: self.s.format,
            codex: codex::Codex::new(cwd.clone()),
            claude: claude::Claude::new(),
            gemini: gemini::Gemini::new(cwd.clone()),
            cwd,
            redactor: self.redactor,
            secrets: Counts::new(),
            lines: 0,
            warnings: 0,
            unknown: 0,
        })
    }

    fn import(
        &self,
        cwd: String,
        subagent: bool,
        parent: Option<Parent>,
        index: &mut Index,
        summary: &mut Summary,
    ) -> Result<()> {
        let (path, s) = (self.path, self.s);
        let plan = match s.format {
            Format::Claude => Some(branches(&s.nodes, subagent)),
            Format::Codex | Format::Gemini | Format::OpenCode => None,
        };
        let branch = if subagent { "subagent" } else { "main" };
        let mut pass = self.pass(branch, parent, Some(cwd))?;
        // Where main stood after each fork point's line: what forks name as parent.
        let points: HashSet<usize> = plan
            .as_ref()
            .map(|p| p.branches.iter().filter_map(|(_, at)| *at).collect())
            .unwrap_or_default();
        let mut heads: HashMap<usize, (u64, Hash)> = HashMap::new();
        let pick = |i: u64| match &plan {
            Some(p) => p.of_line.get(i as usize).copied().flatten() == Some(0),
            None => true,
        };
        let hash = run_pass(
            path,
            self.options,
            &mut pass,
            None,
            s.read_to,
            &pick,
            &points,
            &mut heads,
            summary,
        )?;
        torn_warning(path, s, &mut pass, summary);
        let (writer, progress) = pass.finish(s.read_to, hash)?;
        let done = writer.finish(progress.clone())?;
        index.add(
            path,
            index::Entry {
                id: done.id.clone(),
                dir: done.dir.clone(),
                progress: progress.clone(),
            },
            (!subagent).then_some(s.source_id.as_str()),
            done.head,
        )?;
        tally(summary, &progress, done.interrupted, s.read_to);
        summary.sessions += 1;
        summary.calls += done.written.calls;
        summary.imported.push(SessionSummary {
            id: done.id.clone(),
            dir: done.dir.clone(),
            source: path.to_path_buf(),
            agent: s.format.agent(),
            branch: branch.into(),
            continued: false,
            calls: done.written.calls,
            records: done.written.records,
        });
        let (id, end) = (done.id, done.head);
        // The other branches of a Claude Code conversation, each its own session.
        if let Some(plan) = &plan {
            for (k, (kind, at)) in plan.branches.iter().enumerate() {
                let (seq, hash) = at.and_then(|i| heads.get(&i).copied()).unwrap_or(end);
                let parent = Parent {
                    session: id.clone(),
                    seq,
                    hash,
                };
                self.branch(plan, k as u32 + 1, kind, parent, summary)?;
            }
        }
        Ok(())
    }

    /// Branch `b` of the conversation, of `kind`, parted from main at `parent`.
    fn branch(
        &self,
        plan: &Branches,
        b: u32,
        kind: &str,
        parent: Parent,
        summary: &mut Summary,
    ) -> Result<()> {
        let (path, s) = (self.path, self.s);
        let mut pass = self.pass(kind, Some(parent), None)?;
        let pick = |i: u64| plan.of_line.get(i as usize).copied().flatten() == Some(b);
        let hash = run_pass(
            path,
            self.options,
            &mut pass,
            None,
            s.read_to,
            &pick,
            &HashSet::new(),
            &mut HashMap::new(),
            summary,
        )?;
        let (writer, progress) = pass.finish(s.read_to, hash)?;
        let done = writer.finish(progress.clone())?;
        summary.sessions += 1;
        summary.calls += done.written.calls;
        summary.interrupted += done.interrupted;
        summary.unknown += progress.unknown;
        summary.lines += progress.lines;
        for (k, n) in &progress.secrets {
            *summary.secrets.entry(k.clone()).or_default() += n;
        }
        summary.imported.push(SessionSummary {
            id: done.id,
            dir: done.dir,
            source: path.to_path_buf(),
            agent: s.format.agent(),
            branch: kind.to_string(),
            continued: false,
            calls: done.written.calls,
            records: done.written.records,
        });
        Ok(())
    }
}

/// A line cut short at the end of the file: a warning, left for a later import.
fn torn_warning(path: &Path, s: &Scan, pass: &mut Pass<'_>, summary: &mut Summary) {
    if s.torn > 0 {
        pass.warnings += 1;
        summary.warn(format!(
            "{}: the last line ({} bytes) is cut short: left for a later import",
            path.display(),
            s.torn
        ));
    }
}

fn tally(summary: &mut Summary, progress: &ImportProgress, interrupted: u64, bytes: u64) {
    summary.lines += progress.lines;
    summary.bytes += bytes;
    summary.unknown += progress.unknown;
    summary.interrupted += interrupted;
    for (k, n) in &progress.secrets {
        *summary.secrets.entry(k.clone()).or_default() += n;
    }
}

/// Keeps the file's bytes as a blob of the project of `root`; they must still be the
/// bytes the scan hashed.
fn keep(
    home: &Home,
    root: &Path,
    path: &Path,
    file: &ImportedFile,
) -> Result<cairn_store::BlobRef> {
    let project = home.project(root);
    cairn_store::private::create_dir_all(&project.dir).map_err(ImportError::io(&project.dir))?;
    let blobs = BlobStore::open(&project.blobs_dir())?;
    let f = std::fs::File::open(path).map_err(ImportError::io(path))?;
    use std::io::Read;
    let blob = blobs.put_reader(f.take(file.bytes))?;
    if blob.hash != file.hash {
        return Err(ImportError::Changed {
            path: path.to_path_buf(),
            bytes: file.bytes,
        });
    }
    Ok(blob)
}

/// Appends to the session at `dir` the lines of `path` after `from` (all of them for
/// a rotated rollout's next segment).
#[allow(clippy::too_many_arguments)]
fn continue_into(
    home: &Home,
    path: &Path,
    options: &Options,
    s: &Scan,
    dir: &Path,
    from: Option<(u64, Hash)>,
    index: &mut Index,
    summary: &mut Summary,
    redactor: &Redactor,
) -> Result<()> {
    let started = writer::first_started(dir)?;
    let root = PathBuf::from(&started.workspace);
    let mut file = s.file.clone();
    if options.keep_original {
        file.original = Some(keep(home, &root, path, &file)?);
    }
    let writer = Writer::resume(home, dir, file)?;
    let mut pass = Pass {
        writer,
        format: s.format,
        codex: codex::Codex::new(s.cwd.clone().or(Some(started.workspace.clone()))),
        claude: claude::Claude::new(),
        gemini: gemini::Gemini::new(s.cwd.clone().or(Some(started.workspace.clone()))),
        cwd: s.cwd.clone().or(Some(started.workspace.clone())),
        redactor,
        secrets: Counts::new(),
        lines: 0,
        warnings: 0,
        unknown: 0,
    };
    // A continuation follows the conversation on: sidechain lines stay out.
    let nodes = &s.nodes;
    let pick = |i: u64| {
        !nodes
            .get(i as usize)
            .and_then(|n| n.as_ref())
            .is_some_and(|n| n.sidechain)
    };
    let hash = run_pass(
        path,
        options,
        &mut pass,
        from,
        s.read_to,
        &pick,
        &HashSet::new(),
        &mut HashMap::new(),
        summary,
    )?;
    torn_warning(path, s, &mut pass, summary);
    let (writer, progress) = pass.finish(s.read_to, hash)?;
    let done = writer.finish(progress.clone())?;
    let branch = started.imported.map_or_else(|| "main".into(), |i| i.branch);
    index.add(
        path,
        index::Entry {
            id: done.id.clone(),
            dir: done.dir.clone(),
            progress: progress.clone(),
        },
        (branch == "main").then_some(s.source_id.as_str()),
        done.head,
    )?;
    tally(
        summary,
        &progress,
        done.interrupted,
        s.read_to - from.map_or(0, |f| f.0),
    );
    summary.sessions += 1;
    summary.continued += 1;
    summary.calls += done.written.calls;
    summary.imported.push(SessionSummary {
        id: done.id,
        dir: done.dir,
        source: path.to_path_buf(),
        agent: s.format.agent(),
        branch,
        continued: true,
        calls: done.written.calls,
        records: done.written.records,
    });
    Ok(())
}
