//! Walking and matching shared by the search and listing tools.
//!
//! The walk always starts at the workspace root, so `.gitignore`/`.ignore` rules are
//! anchored where the manifest anchors them (with or without a git repository), and is
//! pruned to the folder asked for. Hidden entries are left out unless asked for (a
//! folder the call names is never "hidden"), `.git` and the cairn home never appear,
//! and symlinks are only followed when asked, and then never out of the workspace.
//!
//! Content search runs in process with ripgrep's crates, one file at a time in sorted
//! order (files in parallel, results merged in order), so a capped answer always shows
//! the same first matches and replay compares equal.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};

use cairn_core::redact::{Counts, Piece, Redactor};

use crate::open::{self, OpenError};
use crate::paths::{Root, WsPath};
use crate::permission::CredentialFiles;
use crate::tool::{Ctx, ToolOutput};
use crate::tools::text;

/// Threads used to sniff and search files.
const THREADS_MAX: usize = 8;

/// What a walk admits.
#[derive(Debug, Clone, Copy, Default)]
pub struct WalkOptions {
    /// Include entries whose name starts with `.` (`.git` never appears).
    pub hidden: bool,
    /// Follow symlinks (never out of the workspace).
    pub follow_symlinks: bool,
    /// Levels below the base folder to descend; 1 = its direct entries.
    pub depth_max: Option<usize>,
    /// Leave out the folders of [`BUILD_FOLDERS`] below the base folder, as thoth's
    /// `glob` and `grep` do even where no ignore file names them.
    pub skip_build_folders: bool,
}

/// The folders thoth never walks into when it globs or greps (its fixed list): build
/// output, dependencies and virtual environments.
pub const BUILD_FOLDERS: [&str; 7] = [
    "node_modules",
    "target",
    "dist",
    "build",
    "venv",
    "__pycache__",
    "vendor",
];

/// True when a pattern names one of the [`BUILD_FOLDERS`] (a path component equal to
/// one, such as `target/**/*.rs`): that counts as asking for it.
pub fn names_build_folder(pattern: &str) -> bool {
    pattern.split('/').any(|c| BUILD_FOLDERS.contains(&c))
}

/// The kind of a walked entry (of the link's target when symlinks are followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One entry of a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Workspace-relative, `/`-separated.
    pub rel: String,
    pub abs: PathBuf,
    pub kind: Kind,
}

/// The result of a walk.
#[derive(Debug, Default)]
pub struct Walked {
    /// Entries below the base folder, sorted by path.
    pub entries: Vec<Found>,
    /// Symlinks that lead outside the workspace, left unfollowed (sorted).
    pub escaping_links: Vec<String>,
    /// The base folder is ignored by the workspace's ignore rules; it was walked
    /// because the call named it, with only the rules found inside it.
    pub base_ignored: bool,
    /// Build folders left out ([`WalkOptions::skip_build_folders`]), sorted.
    pub build_folders: Vec<String>,
}

impl Walked {
    /// The files, in path order.
    pub fn files(&self) -> impl Iterator<Item = &Found> {
        self.entries.iter().filter(|e| e.kind == Kind::File)
    }

    /// Notes about how the walk went, one per line (empty when there is nothing to say).
    pub fn notes(&self, base_rel: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.base_ignored {
            out.push(format!(
                "({base_rel} is ignored by the workspace's ignore rules; it was walked because the call names it)"
            ));
        }
        if !self.build_folders.is_empty() {
            out.push(format!(
                "({} left out, as thoth leaves build folders out: {}; name one in the path or the pattern to search it)",
                plural(self.build_folders.len(), "build folder", "build folders"),
                self.build_folders.join(", ")
            ));
        }
        if !self.escaping_links.is_empty() {
            out.push(format!(
                "({} leading outside the workspace not followed: {})",
                plural(self.escaping_links.len(), "symlink", "symlinks"),
                self.escaping_links.join(", ")
            ));
        }
        out
    }
}

/// A folder inside the workspace to walk.
pub struct Folder {
    pub ws: WsPath,
    /// Workspace-relative path of the folder with symlinks resolved ("" for the root).
    pub rel: String,
}

impl Folder {
    /// How to name the folder in a message.
    pub fn display(&self) -> &str {
        if self.rel.is_empty() {
            "the workspace root"
        } else {
            &self.rel
        }
    }
}

/// What a path given to a search tool turned out to be.
pub enum Target {
    Folder(Folder),
    File(Found),
}

/// Resolves an optional `path` input (default: the workspace root) to a folder or file.
pub fn target(ctx: &Ctx<'_>, path: Option<&str>) -> Result<Target, ToolOutput> {
    let given = match path {
        None => ".",
        Some(p) if p.trim().is_empty() => ".",
        Some(p) => p,
    };
    let ws = ctx.resolve(given)?;
    // Beneath the root: the walk starts from what this finds, not from a folder
    // swapped for a symlink since the check.
    let (meta, real) = ctx.fs.stat(&ws).map_err(|e| match e {
        OpenError::Outside(why) => Ctx::refuse_outside(given, why),
        OpenError::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
            ctx.not_found("file or folder", &ws.rel, "")
        }
        OpenError::Io(e) => ToolOutput::error(format!("cannot open {}: {e}", ws.rel)),
        OpenError::NotRegular(kind) => {
            ToolOutput::error(format!("cannot open {}: {}", ws.rel, kind.describe()))
        }
    })?;
    // The real path as the descriptor walk found it; a file in a granted folder
    // outside has none inside.
    let rel = if Path::new(&real).is_absolute() {
        String::new()
    } else {
        real
    };
    if rel.split('/').any(|c| c == ".git") {
        return Err(ToolOutput::error(format!(
            "{rel}: the search and listing tools never look into .git"
        )));
    }
    if meta.is_dir() {
        Ok(Target::Folder(Folder { ws, rel }))
    } else if meta.is_file() {
        Ok(Target::File(Found {
            rel,
            abs: ws.abs,
            kind: Kind::File,
        }))
    } else {
        let what =
            open::Kind::of(&meta).map_or("neither a file nor a folder", open::Kind::describe);
        Err(ToolOutput::error(format!(
            "{} is {what}; the search tools read regular files and folders only",
            ws.rel
        )))
    }
}

/// Resolves an optional `path` input that must be a folder.
pub fn folder(ctx: &Ctx<'_>, path: Option<&str>, file_hint: &str) -> Result<Folder, ToolOutput> {
    match target(ctx, path)? {
        Target::Folder(f) => Ok(f),
        Target::File(f) => Err(ToolOutput::error(format!(
            "{} is a file, not a folder; {file_hint}",
            f.rel
        ))),
    }
}

/// Workspace-relative `/`-separated path of `abs`, if it is inside `root`.
pub fn rel_of(root: &Path, abs: &Path) -> Option<String> {
    rel_view(root, abs).map(std::borrow::Cow::into_owned)
}

/// [`rel_of`] without allocating in the common case: a walked path is `root` joined
/// with clean components, so its tail after `root/` is already the answer. Anything
/// else (`.` or empty components, a root ending in `/`) goes the component way.
fn rel_view<'a>(root: &Path, abs: &'a Path) -> Option<std::borrow::Cow<'a, str>> {
    use std::os::unix::ffi::OsStrExt;
    let (r, a) = (root.as_os_str().as_bytes(), abs.as_os_str().as_bytes());
    if !r.ends_with(b"/")
        && let Some(rest) = a.strip_prefix(r)
        && (rest.is_empty() || rest[0] == b'/')
    {
        let rest = rest.strip_prefix(b"/").unwrap_or(rest);
        let clean = rest.is_empty()
            || rest
                .split(|&b| b == b'/')
                .all(|c| !c.is_empty() && c != b".");
        if clean {
            return Some(String::from_utf8_lossy(rest));
        }
    }
    rel_components(root, abs).map(std::borrow::Cow::Owned)
}

/// True when `path` is `dir` or below it, compared as bytes (both as a walk makes
/// them: absolute, without `.` components).
fn under_bytes(path: &Path, dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let (p, d) = (path.as_os_str().as_bytes(), dir.as_os_str().as_bytes());
    let d = d.strip_suffix(b"/").unwrap_or(d);
    p.strip_prefix(d)
        .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
}

/// True when `path` is absolute and has no empty or `.` component (a trailing `/`
/// aside): two such paths are below one another exactly when their bytes say so.
fn spelled_clean(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let b = path.as_os_str().as_bytes();
    let Some(b) = b.strip_prefix(b"/") else {
        return false;
    };
    let b = b.strip_suffix(b"/").unwrap_or(b);
    b.is_empty() || b.split(|&c| c == b'/').all(|c| !c.is_empty() && c != b".")
}

fn rel_components(root: &Path, abs: &Path) -> Option<String> {
    let rel = abs.strip_prefix(root).ok()?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(parts.join("/"))
}

/// Walks `base` (a folder inside the workspace) with the workspace's ignore rules.
pub fn walk(ctx: &Ctx<'_>, base: &Folder, opts: WalkOptions) -> Walked {
    let first = walk_from(ctx.root, ctx.root, ctx.home, &base.rel, opts);
    if first.base_seen {
        return first.walked;
    }
    // The folder itself is ignored: a call that names it still gets to look inside,
    // as ripgrep does with a path given on its command line.
    let mut second = walk_from(ctx.root, &base.ws.abs, ctx.home, &base.rel, opts).walked;
    second.base_ignored = true;
    second
}

struct WalkRun {
    walked: Walked,
    base_seen: bool,
}

fn walk_from(root: &Path, start: &Path, home: &Path, base_rel: &str, opts: WalkOptions) -> WalkRun {
    let base_depth = if base_rel.is_empty() {
        0
    } else {
        base_rel.split('/').count()
    };
    let start_depth = rel_of(root, start).map_or(0, |r| {
        if r.is_empty() {
            0
        } else {
            r.split('/').count()
        }
    });
    let seen = Arc::new(AtomicBool::new(
        base_rel.is_empty() || start_depth == base_depth,
    ));
    let escaping = Arc::new(Mutex::new(Vec::new()));
    let build = Arc::new(Mutex::new(Vec::new()));
    let mut builder = ignore::WalkBuilder::new(start);
    builder
        .hidden(false)
        .ignore(true)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(true)
        .require_git(false)
        .parents(false)
        .follow_links(opts.follow_symlinks)
        .max_depth(opts.depth_max.map(|d| base_depth - start_depth + d));
    // Walked paths are `start` joined with names: when the three are spelled
    // cleanly, comparing bytes is comparing components, without the iteration.
    let admit = Admit {
        root: root.to_path_buf(),
        home: home.to_path_buf(),
        base_rel: base_rel.to_string(),
        spelled_clean: spelled_clean(root) && spelled_clean(start) && spelled_clean(home),
        opts,
        seen: Arc::clone(&seen),
        escaping: Arc::clone(&escaping),
        build: Arc::clone(&build),
    };
    builder.filter_entry(move |e| admit.admits(e));
    let found = Mutex::new(Vec::new());
    builder.build_parallel().run(|| {
        // Each walker thread keeps what it finds and hands it over once, when it ends.
        let mut batch = Batch {
            out: &found,
            found: Vec::new(),
        };
        let root = root.to_path_buf();
        let base_rel = base_rel.to_string();
        Box::new(move |entry| {
            let Ok(entry) = entry else {
                // Unreadable folders, loops and dangling links are left out.
                return ignore::WalkState::Continue;
            };
            if entry.depth() == 0 {
                return ignore::WalkState::Continue;
            }
            let Some(rel) = rel_of(&root, entry.path()) else {
                return ignore::WalkState::Continue;
            };
            if relation(&rel, &base_rel) != Relation::Inside {
                return ignore::WalkState::Continue;
            }
            let kind = match entry.file_type() {
                Some(t) if t.is_file() => Kind::File,
                Some(t) if t.is_dir() => Kind::Dir,
                Some(t) if t.is_symlink() => Kind::Symlink,
                _ => Kind::Other,
            };
            batch.found.push(Found {
                rel,
                abs: entry.into_path(),
                kind,
            });
            ignore::WalkState::Continue
        })
    });
    let mut entries = match found.into_inner() {
        Ok(v) => v,
        Err(poisoned) => poisoned.into_inner(),
    };
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    entries.dedup_by(|a, b| a.rel == b.rel);
    let mut escaping_links = escaping.lock().map(|v| v.clone()).unwrap_or_default();
    escaping_links.sort();
    escaping_links.dedup();
    let mut build_folders = build.lock().map(|v| v.clone()).unwrap_or_default();
    build_folders.sort();
    build_folders.dedup();
    WalkRun {
        walked: Walked {
            entries,
            escaping_links,
            base_ignored: false,
            build_folders,
        },
        base_seen: seen.load(Ordering::Relaxed),
    }
}

/// Which entries a walk goes into: none of `.git` or cairn's home, only the base and
/// what leads to it or lies in it, and (as asked) no hidden ones, no build folders and
/// no symlinks leading out of the workspace (those two noted).
struct Admit {
    root: PathBuf,
    home: PathBuf,
    base_rel: String,
    spelled_clean: bool,
    opts: WalkOptions,
    /// Set when the base itself is walked (not ignored).
    seen: Arc<AtomicBool>,
    escaping: Arc<Mutex<Vec<String>>>,
    build: Arc<Mutex<Vec<String>>>,
}

impl Admit {
    fn admits(&self, e: &ignore::DirEntry) -> bool {
        if e.file_name() == ".git" {
            return false;
        }
        let path = e.path();
        if under_bytes(path, &self.home) || (!self.spelled_clean && path.starts_with(&self.home)) {
            return false;
        }
        let Some(rel) = rel_view(&self.root, path) else {
            return false;
        };
        match relation(&rel, &self.base_rel) {
            Relation::Outside => return false,
            Relation::Ancestor => return true,
            Relation::Base => {
                self.seen.store(true, Ordering::Relaxed);
                return true;
            }
            Relation::Inside => {}
        }
        if !self.opts.hidden && e.file_name().to_string_lossy().starts_with('.') {
            return false;
        }
        if self.opts.skip_build_folders
            && e.file_type().is_some_and(|t| t.is_dir())
            && BUILD_FOLDERS.contains(&e.file_name().to_string_lossy().as_ref())
        {
            if let Ok(mut v) = self.build.lock() {
                v.push(rel.into_owned());
            }
            return false;
        }
        if self.opts.follow_symlinks && e.path_is_symlink() {
            let inside = std::fs::canonicalize(path)
                .is_ok_and(|t| t.starts_with(&self.root) && !t.starts_with(&self.home));
            if !inside {
                if let Ok(mut v) = self.escaping.lock() {
                    v.push(rel.into_owned());
                }
                return false;
            }
        }
        true
    }
}

/// What one walker thread found, added to `out` when the thread is done with it.
struct Batch<'a> {
    out: &'a Mutex<Vec<Found>>,
    found: Vec<Found>,
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        let mut out = match self.out.lock() {
            Ok(out) => out,
            Err(poisoned) => poisoned.into_inner(),
        };
        out.append(&mut self.found);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relation {
    Ancestor,
    Base,
    Inside,
    Outside,
}

fn relation(rel: &str, base: &str) -> Relation {
    if base.is_empty() {
        return if rel.is_empty() {
            Relation::Base
        } else {
            Relation::Inside
        };
    }
    if rel == base {
        Relation::Base
    } else if is_under(base, rel) {
        Relation::Ancestor
    } else if is_under(rel, base) {
        Relation::Inside
    } else {
        Relation::Outside
    }
}

/// True when `path` is strictly below `folder` (both relative, `/`-separated).
fn is_under(path: &str, folder: &str) -> bool {
    folder.is_empty()
        || (path.len() > folder.len()
            && path.starts_with(folder)
            && path.as_bytes()[folder.len()] == b'/')
}

/// True when a pattern names a hidden entry explicitly (a path component starting with
/// `.`, such as `.github/**` or `**/.env*`): that counts as asking for hidden files.
pub fn names_hidden(pattern: &str) -> bool {
    pattern
        .split('/')
        .any(|c| c.starts_with('.') && c != "." && c != "..")
}

/// A pattern, glob, regex or extension list a search tool cannot use. Its text is what
/// the model is answered.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PatternError {
    /// A name pattern that is empty.
    #[error("pattern is empty: give a file name or a glob such as `*.rs`")]
    EmptyName,
    /// A glob that is empty once `./` and `/` are trimmed.
    #[error("invalid glob `{pattern}`: it is empty; use `**/*` for every file")]
    EmptyGlob { pattern: String },
    /// A glob that does not compile.
    #[error("invalid glob `{pattern}`: {kind}")]
    Glob {
        pattern: String,
        kind: globset::ErrorKind,
    },
    /// A regex that does not compile.
    #[error("invalid regex `{pattern}`: {source}")]
    Regex {
        pattern: String,
        source: grep_regex::Error,
    },
    /// An extension that is empty or holds a `/`.
    #[error(
        "invalid extension `{extension}` in extensions: give extensions such as \"rs\" or \"tar.gz\""
    )]
    Extension { extension: String },
}

/// A glob matched against file paths, ripgrep style: without a `/` it matches the file
/// name at any depth; with one, the path relative to the folder searched (or to the
/// workspace root); a trailing `/` means everything below that folder.
#[derive(Debug, Clone)]
pub struct PathGlob {
    matcher: GlobMatcher,
    by_name: bool,
}

impl PathGlob {
    /// Compiles `pattern`; the error says what is wrong with it.
    pub fn new(pattern: &str) -> Result<PathGlob, PatternError> {
        let mut p = pattern.trim();
        while let Some(rest) = p.strip_prefix("./") {
            p = rest;
        }
        let p = p.trim_start_matches('/');
        if p.is_empty() {
            return Err(PatternError::EmptyGlob {
                pattern: pattern.to_string(),
            });
        }
        let p = match p.strip_suffix('/') {
            Some(dir) => format!("{dir}/**"),
            None => p.to_string(),
        };
        let by_name = !p.contains('/');
        let glob = GlobBuilder::new(&p)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| PatternError::Glob {
                pattern: pattern.to_string(),
                kind: e.kind().clone(),
            })?;
        Ok(PathGlob {
            matcher: glob.compile_matcher(),
            by_name,
        })
    }

    /// True when the file at workspace-relative `rel` matches; `base` is the folder
    /// searched ("" for the root).
    pub fn matches(&self, rel: &str, base: &str) -> bool {
        if self.by_name {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            return self.matcher.is_match(name);
        }
        let in_base = if base.is_empty() {
            rel
        } else {
            rel.strip_prefix(base)
                .map_or(rel, |r| r.trim_start_matches('/'))
        };
        self.matcher.is_match(in_base) || (in_base != rel && self.matcher.is_match(rel))
    }
}

/// An extension filter: `rs`, `.rs` and `tar.gz` all work; case is ignored.
#[derive(Debug, Clone)]
pub struct Extensions(Vec<String>);

impl Extensions {
    /// `None` when the list is absent or empty (no filter).
    pub fn new(list: Option<&[String]>) -> Result<Option<Extensions>, PatternError> {
        let Some(list) = list.filter(|l| !l.is_empty()) else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(list.len());
        for e in list {
            let e = e.trim().trim_start_matches('.');
            if e.is_empty() || e.contains('/') {
                return Err(PatternError::Extension {
                    extension: e.to_string(),
                });
            }
            out.push(format!(".{}", e.to_ascii_lowercase()));
        }
        Ok(Some(Extensions(out)))
    }

    pub fn matches(&self, rel: &str) -> bool {
        let name = rel.rsplit('/').next().unwrap_or(rel).to_ascii_lowercase();
        self.0
            .iter()
            .any(|e| name.len() > e.len() && name.ends_with(e.as_str()))
    }
}

/// Renders a capped listing: the first `max` paths, then a note on the rest.
/// `what` names one item and several, e.g. `("file", "files")`.
pub fn capped_list(items: &[String], max: usize, what: (&str, &str), hint: &str) -> Vec<String> {
    let mut out: Vec<String> = items.iter().take(max).cloned().collect();
    if items.len() > max {
        out.push(more_not_shown(items.len() - max, what, hint));
    }
    out
}

/// The note after a capped listing: `…(3 more files not shown; HINT)`.
pub fn more_not_shown(more: usize, what: (&str, &str), hint: &str) -> String {
    format!(
        "…({} not shown; {hint})",
        plural(
            more,
            &format!("more {}", what.0),
            &format!("more {}", what.1)
        )
    )
}

/// `1 file`, `2 files`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Appends `line` cut to `chars_max` characters (as [`cut_line`] cuts it) to `out`.
pub fn push_cut(out: &mut String, line: &str, chars_max: usize) {
    // No more bytes than the limit: no more characters either.
    if line.len() <= chars_max {
        out.push_str(line);
    } else {
        out.push_str(&cut_line(line, chars_max));
    }
}

/// Cuts a line to `chars_max` characters, saying how many were left out.
pub fn cut_line(line: &str, chars_max: usize) -> String {
    match line.char_indices().nth(chars_max) {
        None => line.to_string(),
        Some((at, _)) => format!(
            "{}…({})",
            &line[..at],
            plural(
                line[at..].chars().count(),
                "more character",
                "more characters"
            )
        ),
    }
}

/// Why a file was not searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    Binary,
    TooBig,
    Unreadable,
}

/// Files left out of a search, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    pub binary: usize,
    pub too_big: usize,
    pub unreadable: usize,
    /// Credential files a search of a folder left out ([`without_credentials`]).
    pub credentials: usize,
}

impl Skipped {
    pub fn add(&mut self, s: Skip) {
        match s {
            Skip::Binary => self.binary += 1,
            Skip::TooBig => self.too_big += 1,
            Skip::Unreadable => self.unreadable += 1,
        }
    }

    /// `(skipped: 2 binary files, 1 file over read_file_bytes_max = 10 bytes)`, or `None`.
    pub fn note(&self, bytes_max: u64) -> Option<String> {
        let mut parts = Vec::new();
        if self.binary > 0 {
            parts.push(plural(self.binary, "binary file", "binary files"));
        }
        if self.too_big > 0 {
            parts.push(format!(
                "{} over read_file_bytes_max = {bytes_max} bytes",
                plural(self.too_big, "file", "files")
            ));
        }
        if self.unreadable > 0 {
            parts.push(format!(
                "{} unreadable",
                plural(self.unreadable, "file", "files")
            ));
        }
        if self.credentials > 0 {
            parts.push(format!(
                "{} (reading one asks first)",
                plural(self.credentials, "credential file", "credential files")
            ));
        }
        (!parts.is_empty()).then(|| format!("(skipped: {})", parts.join(", ")))
    }
}

/// Threads worth starting for `jobs` jobs.
fn worker_threads(jobs: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(THREADS_MAX)
        .min(jobs)
}

/// Runs `f` over `items` on a few threads; results come back in the items' order.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = worker_threads(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut slots: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut local = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        local.push((i, f(item)));
                    }
                    local
                })
            })
            .collect();
        for h in handles {
            match h.join() {
                Ok(done) => {
                    for (i, r) in done {
                        slots[i] = Some(r);
                    }
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    slots
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.unwrap_or_else(|| panic!("par_map: item {i} was never processed")))
        .collect()
}

/// Leaves the credential files out of `files` (a folder's search never reads them:
/// reading one asks first, which only a call naming the file does), and counts them.
pub fn without_credentials<'a>(
    files: Vec<&'a Found>,
    credential_files: &CredentialFiles,
) -> (Vec<&'a Found>, usize) {
    let before = files.len();
    let kept: Vec<&Found> = files
        .into_iter()
        .filter(|f| !credential_files.matches(&f.rel))
        .collect();
    let left_out = before - kept.len();
    (kept, left_out)
}

/// Sniffs `files` and keeps those worth a content search (text, within the size
/// limit), in order, with the count of those left out.
pub fn searchable<'a>(fs: &Root, files: &[&'a Found], bytes_max: u64) -> (Vec<&'a Found>, Skipped) {
    let verdicts = par_map(files, |f| sniff(fs, f, bytes_max));
    let mut keep = Vec::new();
    let mut skipped = Skipped::default();
    for (f, v) in files.iter().zip(verdicts) {
        match v {
            None => keep.push(*f),
            Some(s) => skipped.add(s),
        }
    }
    (keep, skipped)
}

/// Opens a walked file beneath the workspace root: a folder on its way swapped for a
/// symlink to outside since the walk listed it is not followed out.
fn open_found(fs: &Root, f: &Found) -> Result<(std::fs::File, std::fs::Metadata), OpenError> {
    fs.open_read_at(&f.abs, &f.rel)
}

fn sniff(fs: &Root, f: &Found, bytes_max: u64) -> Option<Skip> {
    // A file that turned into a FIFO or a device since the listing is not read.
    let Ok((file, meta)) = open_found(fs, f) else {
        return Some(Skip::Unreadable);
    };
    if meta.len() > bytes_max {
        return Some(Skip::TooBig);
    }
    let mut head = Vec::with_capacity(text::SNIFF_BYTES);
    if file
        .take(text::SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .is_err()
    {
        return Some(Skip::Unreadable);
    }
    text::is_binary(&head).then_some(Skip::Binary)
}

/// Compiles a line regex; the error says what is wrong with it.
pub fn regex(pattern: &str, case_insensitive: bool) -> Result<RegexMatcher, PatternError> {
    RegexMatcherBuilder::new()
        .case_insensitive(case_insensitive)
        .line_terminator(Some(b'\n'))
        .build(pattern)
        .map_err(|source| PatternError::Regex {
            pattern: pattern.to_string(),
            source,
        })
}

/// What a content search is asked to do.
pub struct LineSearch<'a> {
    /// Where the files are opened (beneath the workspace root).
    pub fs: &'a Root,
    /// The call's redactor: each file's lines are redacted as they are searched, on
    /// the search's threads ([`Redactor::piece`]).
    pub redactor: &'a Redactor,
    pub matcher: &'a RegexMatcher,
    /// Context lines before and after each match (already clamped).
    pub context: usize,
    pub matches_max: usize,
    pub chars_max: usize,
    pub bytes_max: u64,
}

/// The result of a content search.
#[derive(Debug, Default)]
pub struct SearchReport {
    /// The answer's lines, each followed by `\n`: `path:line:text` for matches,
    /// `path-line-text` for context, `--` between groups; one piece a file, redacted
    /// on its own, to be joined by [`render_search`].
    pub pieces: Vec<Piece>,
    /// Matching lines found, shown or not.
    pub matches: usize,
    pub shown: usize,
    pub files_searched: usize,
    pub skipped: Skipped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HitKind {
    Match,
    Before,
    After,
    Break,
}

/// One file's answer, already formatted and redacted: `piece` holds its lines, `marks`
/// where each starts in its text and what it is (so the merge can cut it after the
/// match the cap allows).
#[derive(Debug, Default)]
struct FileHits {
    matches: usize,
    piece: Piece,
    marks: Vec<(HitKind, usize)>,
    skip: Option<Skip>,
}

/// Formats up to `store_max` matching lines with their context straight into one
/// buffer, and counts the rest.
struct Collect<'a> {
    rel: &'a str,
    store_max: usize,
    chars_max: usize,
    matches: usize,
    full: bool,
    text: String,
    marks: Vec<(HitKind, usize)>,
}

impl Collect<'_> {
    fn push(&mut self, kind: HitKind, n: u64, bytes: &[u8]) {
        self.marks.push((kind, self.text.len()));
        let sep = if kind == HitKind::Match { ':' } else { '-' };
        self.text.push_str(self.rel);
        self.text.push(sep);
        self.text.push_str(itoa::Buffer::new().format(n));
        self.text.push(sep);
        // Valid UTF-8 checked the fast way first: the lossy way reads a byte at a time.
        let line = match std::str::from_utf8(bytes) {
            Ok(line) => std::borrow::Cow::Borrowed(line),
            Err(_) => String::from_utf8_lossy(bytes),
        };
        let line = line.trim_end_matches('\n').trim_end_matches('\r');
        push_cut(&mut self.text, line, self.chars_max);
        self.text.push('\n');
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        let first = m.line_number().unwrap_or(0);
        for (i, line) in m.lines().enumerate() {
            self.matches += 1;
            if self.matches <= self.store_max {
                self.push(HitKind::Match, first + i as u64, line);
            } else {
                self.full = true;
            }
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        if !self.full {
            let kind = match c.kind() {
                SinkContextKind::Before => HitKind::Before,
                _ => HitKind::After,
            };
            self.push(kind, c.line_number().unwrap_or(0), c.bytes());
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, std::io::Error> {
        if !self.full {
            self.marks.push((HitKind::Break, self.text.len()));
            self.text.push_str("--\n");
        }
        Ok(true)
    }
}

/// The searchers one thread reuses from file to file (building one zeroes its
/// buffer): with the call's context lines, and without (for files past the cap).
struct Searchers {
    context: usize,
    with_context: Option<Searcher>,
    without: Option<Searcher>,
}

impl Searchers {
    fn new(context: usize) -> Searchers {
        Searchers {
            context,
            with_context: None,
            without: None,
        }
    }

    fn get(&mut self, context: bool) -> &mut Searcher {
        let (slot, lines) = if context && self.context > 0 {
            (&mut self.with_context, self.context)
        } else {
            (&mut self.without, 0)
        };
        slot.get_or_insert_with(|| {
            SearcherBuilder::new()
                .line_number(true)
                .before_context(lines)
                .after_context(lines)
                .binary_detection(BinaryDetection::none())
                .build()
        })
    }
}

/// The buffers one thread reuses from file to file: a file's bytes, its formatted
/// lines. New ones per file cost a growing series of copies for the lines, and page
/// faults for a big file's bytes.
#[derive(Default)]
struct Buffers {
    bytes: Vec<u8>,
    text: String,
}

fn search_file(
    q: &LineSearch<'_>,
    f: &Found,
    store_max: usize,
    searchers: &mut Searchers,
    buffers: &mut Buffers,
) -> FileHits {
    let skipped = |s| FileHits {
        skip: Some(s),
        ..FileHits::default()
    };
    let Ok((mut file, meta)) = open_found(q.fs, f) else {
        return skipped(Skip::Unreadable);
    };
    if meta.len() > q.bytes_max {
        return skipped(Skip::TooBig);
    }
    // At most one byte past the limit, even from a file that grows meanwhile; the
    // head first, so that a binary file is not read past it.
    let read_max = q.bytes_max.saturating_add(1);
    let bytes = &mut buffers.bytes;
    bytes.clear();
    bytes.reserve(usize::try_from(meta.len()).unwrap_or(0));
    let head = read_max.min(text::SNIFF_BYTES as u64);
    if (&mut file).take(head).read_to_end(bytes).is_err() {
        return skipped(Skip::Unreadable);
    }
    if (bytes.len() as u64) < head {
        // The whole file is in: nothing more to read.
    } else if text::is_binary(bytes) && bytes.len() as u64 <= q.bytes_max {
        return skipped(Skip::Binary);
    } else if file
        .take(read_max - bytes.len() as u64)
        .read_to_end(bytes)
        .is_err()
    {
        return skipped(Skip::Unreadable);
    }
    if bytes.len() as u64 > q.bytes_max {
        return skipped(Skip::TooBig);
    }
    if text::is_binary(bytes) {
        return skipped(Skip::Binary);
    }
    // Files past the cap are only counted: no context is gathered for them.
    let searcher = searchers.get(store_max > 0);
    let mut sink = Collect {
        rel: &f.rel,
        store_max,
        chars_max: q.chars_max,
        matches: 0,
        full: false,
        text: std::mem::take(&mut buffers.text),
        marks: Vec::new(),
    };
    sink.text.clear();
    let searched = searcher.search_slice(q.matcher, bytes, &mut sink);
    buffers.text = sink.text;
    if searched.is_err() {
        return skipped(Skip::Unreadable);
    }
    FileHits {
        matches: sink.matches,
        piece: q
            .redactor
            .piece_of_lines(buffers.text.as_str().to_owned(), &f.rel),
        marks: sink.marks,
        skip: None,
    }
}

/// Searches `files` (in the order given, which is path order) line by line.
///
/// Files are searched in parallel and merged strictly in order, so the answer is the
/// one a sequential search gives. A file is searched with room for as many matches as
/// the cap still allowed when it started; the cap only fills as files merge, so that
/// is always enough, and once the cap is full the remaining files are only counted.
/// Each file's lines are formatted as it is searched and appended to the answer as
/// it merges: no line is held as a value of its own.
pub fn search(q: &LineSearch<'_>, files: &[&Found]) -> SearchReport {
    let merge = Mutex::new(Merge {
        slots: (0..files.len()).map(|_| None).collect(),
        next: 0,
        report: SearchReport::default(),
    });
    let shown = AtomicUsize::new(0);
    let next = AtomicUsize::new(0);
    let work = || {
        let mut searchers = Searchers::new(q.context);
        let mut buffers = Buffers::default();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(f) = files.get(i) else { break };
            let store_max = q.matches_max.saturating_sub(shown.load(Ordering::Acquire));
            let hits = search_file(q, f, store_max, &mut searchers, &mut buffers);
            let mut m = match merge.lock() {
                Ok(m) => m,
                Err(poisoned) => poisoned.into_inner(),
            };
            m.slots[i] = Some(hits);
            m.drain(q);
            shown.store(m.report.shown, Ordering::Release);
        }
    };
    let threads = worker_threads(files.len());
    if threads <= 1 {
        work();
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
            for h in handles {
                if let Err(panic) = h.join() {
                    std::panic::resume_unwind(panic);
                }
            }
        });
    }
    let m = match merge.into_inner() {
        Ok(m) => m,
        Err(poisoned) => poisoned.into_inner(),
    };
    assert_eq!(m.next, files.len(), "search: every file is merged");
    m.report
}

/// Search results waiting to be merged in path order.
struct Merge {
    slots: Vec<Option<FileHits>>,
    /// The first file not merged yet.
    next: usize,
    report: SearchReport,
}

impl Merge {
    /// Merges every finished file that follows the merged ones.
    fn drain(&mut self, q: &LineSearch<'_>) {
        while let Some(r) = self.slots.get_mut(self.next).and_then(Option::take) {
            self.next += 1;
            let report = &mut self.report;
            if let Some(s) = r.skip {
                report.skipped.add(s);
                continue;
            }
            report.files_searched += 1;
            report.matches += r.matches;
            let room = q.matches_max - report.shown;
            if r.matches == 0 || room == 0 {
                continue;
            }
            if q.context > 0 && !report.pieces.is_empty() {
                report.pieces.push(q.redactor.piece("--\n".to_string()));
            }
            let len = r.piece.text().len();
            let (end, shown) = cut_after(&r.marks, room, len);
            report.shown += shown;
            // Cut after a match the cap still shows: that part is redacted anew (its
            // redaction may differ from that of the whole).
            report.pieces.push(if end == len {
                r.piece
            } else {
                q.redactor.piece(r.piece.into_text()[..end].to_string())
            });
        }
    }
}

/// Where a file's answer ends when it may show `n` matches: after the `n`th match and
/// its after-context (context gathered for a match not shown goes with it), and how
/// many matches that keeps. `marks` are the kinds and start offsets of its lines,
/// `len` the length of its text.
fn cut_after(marks: &[(HitKind, usize)], n: usize, len: usize) -> (usize, usize) {
    let mut kept = marks.len();
    let mut seen = 0;
    for (i, (kind, _)) in marks.iter().enumerate() {
        if *kind == HitKind::Match {
            if seen == n {
                kept = i;
                break;
            }
            seen += 1;
        }
    }
    while kept > 0 && matches!(marks[kept - 1].0, HitKind::Before | HitKind::Break) {
        kept -= 1;
    }
    let end = marks.get(kept).map_or(len, |m| m.1);
    (end, seen)
}

/// The text of a search answer: matches, then notes, redacted by `redactor` (its
/// counts added to `counts`) as the whole text would be.
pub fn render_search(
    report: SearchReport,
    limits_bytes_max: u64,
    notes: &[String],
    no_match_hint: &str,
    redactor: &Redactor,
    counts: &mut Counts,
) -> String {
    let mut tail: Vec<String> = Vec::new();
    if report.matches == 0 {
        let mut line = format!(
            "no matches ({} searched)",
            plural(report.files_searched, "file", "files")
        );
        if !no_match_hint.is_empty() {
            line.push_str(&format!("; {no_match_hint}"));
        }
        tail.push(line);
    } else if report.matches > report.shown {
        let more = report.matches - report.shown;
        tail.push(format!(
            "…({} not shown; narrow the pattern or add a glob)",
            plural(more, "more match", "more matches")
        ));
    }
    tail.extend(notes.iter().cloned());
    if let Some(n) = report.skipped.note(limits_bytes_max) {
        tail.push(n);
    }
    // The lines joined by `\n`: the matches' lines each end with one already.
    let mut pieces = report.pieces;
    if tail.is_empty() {
        if let Some(last) = pieces.pop() {
            let mut text = last.into_text();
            if text.ends_with('\n') {
                text.pop();
            }
            pieces.push(redactor.piece(text));
        }
    } else {
        pieces.push(redactor.piece(tail.join("\n")));
    }
    redactor.join(pieces, counts)
}

/// The context lines to use: the request clamped to `context_lines_max`, with a note
/// when it was.
pub fn clamp_context(
    field: &str,
    asked: Option<u32>,
    limits: &crate::limits::Limits,
) -> (usize, Vec<String>) {
    let asked = asked.map_or(0, |n| n as usize);
    if asked > limits.context_lines_max {
        (
            limits.context_lines_max,
            vec![format!(
                "({field} {asked} clamped to context_lines_max = {})",
                limits.context_lines_max
            )],
        )
    } else {
        (asked, Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_errors_read_as_the_model_sees_them() {
        fn text<T>(r: Result<T, PatternError>) -> String {
            match r {
                Ok(_) => panic!("accepted"),
                Err(e) => e.to_string(),
            }
        }
        assert_eq!(
            PatternError::EmptyName.to_string(),
            "pattern is empty: give a file name or a glob such as `*.rs`"
        );
        assert_eq!(
            text(PathGlob::new("./")),
            "invalid glob `./`: it is empty; use `**/*` for every file"
        );
        assert!(
            text(PathGlob::new("src/{a")).starts_with("invalid glob `src/{a`: unclosed"),
            "{}",
            text(PathGlob::new("src/{a"))
        );
        assert!(text(regex("(", false)).starts_with("invalid regex `(`: "));
        assert_eq!(
            text(Extensions::new(Some(&["a/b".to_string()]))),
            "invalid extension `a/b` in extensions: give extensions such as \"rs\" or \"tar.gz\""
        );
    }

    #[test]
    fn cut_line_counts_characters() {
        assert_eq!(cut_line("héllo", 5), "héllo");
        assert_eq!(cut_line("héllo", 2), "hé…(3 more characters)");
        assert_eq!(cut_line("héllo", 4), "héll…(1 more character)");
        assert_eq!(cut_line("", 0), "");
    }

    #[test]
    fn path_globs_match_names_anywhere_and_paths_from_the_base() {
        let g = PathGlob::new("*.rs").unwrap();
        assert!(g.matches("a/b/c.rs", ""));
        assert!(!g.matches("a/b/c.rsx", ""));
        let g = PathGlob::new("b/*.rs").unwrap();
        assert!(g.matches("a/b/c.rs", "a"));
        assert!(!g.matches("a/b/c.rs", ""));
        assert!(!g.matches("a/b/d/c.rs", "a"));
        let g = PathGlob::new("./a/").unwrap();
        assert!(g.matches("a/b/c.rs", ""));
        assert!(matches!(
            PathGlob::new("a/{b"),
            Err(PatternError::Glob { .. })
        ));
        assert!(matches!(
            PathGlob::new(""),
            Err(PatternError::EmptyGlob { .. })
        ));
    }

    #[test]
    fn hidden_components_are_named_explicitly() {
        assert!(names_hidden(".github/**"));
        assert!(names_hidden("**/.env*"));
        assert!(!names_hidden("./src/*.rs"));
        assert!(!names_hidden("../x"));
        assert!(!names_hidden("*.rs"));
    }

    #[test]
    fn extensions_ignore_dots_and_case() {
        let e = Extensions::new(Some(&["RS".to_string(), ".tar.gz".to_string()]))
            .unwrap()
            .unwrap();
        assert!(e.matches("a/b.rs"));
        assert!(e.matches("x.TAR.GZ"));
        assert!(!e.matches("rs"));
        assert!(!e.matches("a.gz"));
        assert!(Extensions::new(Some(&[".".to_string()])).is_err());
        assert!(Extensions::new(Some(&[])).unwrap().is_none());
    }

    #[test]
    fn cut_after_drops_context_of_matches_not_shown() {
        let marks = [
            (HitKind::Match, 0),
            (HitKind::After, 10),
            (HitKind::Break, 20),
            (HitKind::Before, 23),
            (HitKind::Match, 33),
        ];
        // One match shown: it and its after-context, not the break or the next
        // match's before-context.
        assert_eq!(cut_after(&marks, 1, 43), (20, 1));
        assert_eq!(cut_after(&marks, 2, 43), (43, 2));
        assert_eq!(cut_after(&marks, 9, 43), (43, 2));
        assert_eq!(cut_after(&marks, 0, 43), (0, 0));
    }

    #[test]
    fn rel_of_matches_the_component_way() {
        for (root, abs) in [
            ("/w", "/w/a/b.rs"),
            ("/w", "/w"),
            ("/w/", "/w/a"),
            ("/w", "/w/./a//b"),
            ("/w", "/wx/a"),
            ("/w", "/v/a"),
            ("/w/./x", "/w/x/a"),
            ("/", "/a/b"),
        ] {
            let (root, abs) = (Path::new(root), Path::new(abs));
            assert_eq!(
                rel_of(root, abs),
                rel_components(root, abs),
                "{root:?} {abs:?}"
            );
        }
    }

    #[test]
    fn under_bytes_agrees_with_components_for_clean_paths() {
        for (path, dir, under) in [
            ("/h/a", "/h", true),
            ("/h", "/h", true),
            ("/h", "/h/", true),
            ("/hx/a", "/h", false),
            ("/g/a", "/h", false),
        ] {
            let (p, d) = (Path::new(path), Path::new(dir));
            assert!(spelled_clean(p) && spelled_clean(d));
            assert_eq!(under_bytes(p, d), under, "{path} {dir}");
            assert_eq!(p.starts_with(d), under, "{path} {dir}");
        }
        assert!(!spelled_clean(Path::new("/a/./b")));
        assert!(!spelled_clean(Path::new("/a//b")));
        assert!(!spelled_clean(Path::new("a/b")));
    }

    #[test]
    fn rendered_answer_joins_lines_and_notes() {
        let redactor = Redactor::default();
        let render = |report, notes: &[String], hint| {
            render_search(report, 10, notes, hint, &redactor, &mut Counts::new())
        };
        let report = |text: &str, matches, shown| SearchReport {
            pieces: vec![redactor.piece(text.to_string())],
            matches,
            shown,
            files_searched: 1,
            skipped: Skipped::default(),
        };
        assert_eq!(render(report("a:1:x\n", 1, 1), &[], ""), "a:1:x");
        assert_eq!(
            render(report("a:1:x\na:2:y\n", 3, 2), &["(note)".into()], ""),
            "a:1:x\na:2:y\n…(1 more match not shown; narrow the pattern or add a glob)\n(note)"
        );
        assert_eq!(
            render(report("", 0, 0), &[], "hint"),
            "no matches (1 file searched); hint"
        );
    }

    #[test]
    fn skipped_note_names_every_reason() {
        let s = Skipped {
            binary: 2,
            too_big: 1,
            unreadable: 0,
            credentials: 0,
        };
        assert_eq!(
            s.note(10).unwrap(),
            "(skipped: 2 binary files, 1 file over read_file_bytes_max = 10 bytes)"
        );
        let s = Skipped {
            unreadable: 1,
            credentials: 2,
            ..Skipped::default()
        };
        assert_eq!(
            s.note(10).unwrap(),
            "(skipped: 1 file unreadable, 2 credential files (reading one asks first))"
        );
        assert_eq!(Skipped::default().note(10), None);
    }
}
