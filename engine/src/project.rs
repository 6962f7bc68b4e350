//! Where cairn keeps its data: `$CAIRN_HOME` (default `~/.cairn`), one folder per
//! workspace under `projects/<key>/` with its sessions, blobs and caches. Never inside
//! the workspace, so the agent's tools cannot reach it.

use std::path::{Path, PathBuf};

use cairn_core::scrub::{SECRET_KEY_BYTES, SecretKey};
use cairn_tools::{EngineError, RecordSink, Result, SinkStart, io_at};

/// The cairn home.
#[derive(Clone)]
pub struct Home {
    pub root: PathBuf,
    /// What starts the sink of each session whose configuration asks for one
    /// ([`cairn_tools::EngineConfig::search_index`]); see [`Home::with_sink`].
    sink: Option<SinkStart>,
    /// What starts the export sink of every session (the live OpenTelemetry export);
    /// see [`Home::with_export`].
    export: Option<SinkStart>,
}

impl std::fmt::Debug for Home {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Home")
            .field("root", &self.root)
            .field("sink", &self.sink.as_ref().map(|_| "(a sink start)"))
            .field("export", &self.export.as_ref().map(|_| "(a sink start)"))
            .finish()
    }
}

/// Two homes are equal at the same root with the same sink start (the same one, not
/// one that does the same).
impl PartialEq for Home {
    fn eq(&self, other: &Home) -> bool {
        let same = |a: &Option<SinkStart>, b: &Option<SinkStart>| match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
            _ => false,
        };
        self.root == other.root
            && same(&self.sink, &other.sink)
            && same(&self.export, &other.export)
    }
}

impl Eq for Home {}

/// Two sinks handed the same records.
struct Both(Box<dyn RecordSink>, Box<dyn RecordSink>);

impl RecordSink for Both {
    fn record(&mut self, record: &cairn_core::Record, log_bytes: u64) {
        self.0.record(record, log_bytes);
        self.1.record(record, log_bytes);
    }

    fn record_owned(&mut self, record: cairn_core::Record, log_bytes: u64) {
        self.0.record(&record, log_bytes);
        self.1.record_owned(record, log_bytes);
    }

    fn finish(&mut self) {
        self.0.finish();
        self.1.finish();
    }
}

/// `path` absolute, with its longest existing prefix canonicalised and the rest
/// appended lexically (`.` dropped, `..` removing the last component).
pub fn canonical_prefix(path: &Path) -> std::path::PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let parts: Vec<std::path::Component<'_>> = abs.components().collect();
    for k in (1..=parts.len()).rev() {
        let prefix: std::path::PathBuf = parts[..k].iter().collect();
        let Ok(mut out) = prefix.canonicalize() else {
            continue;
        };
        for c in &parts[k..] {
            match c {
                std::path::Component::ParentDir => {
                    // `..` of a folder that does not exist yet: lexical, as creating it
                    // and going back up would be.
                    out.pop();
                }
                std::path::Component::Normal(n) => out.push(n),
                _ => {}
            }
        }
        return out;
    }
    abs
}

/// The name of the log key file in the home.
pub const LOG_KEY_FILE: &str = "log.key";

impl Home {
    /// `$CAIRN_HOME`, or `~/.cairn`.
    pub fn from_env() -> Result<Home> {
        if let Some(h) = std::env::var_os("CAIRN_HOME").filter(|h| !h.is_empty()) {
            return Ok(Home::at(Path::new(&h)));
        }
        match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            Some(h) => Ok(Home::at(&Path::new(&h).join(".cairn"))),
            None => Err(EngineError::NoHome),
        }
    }

    /// A home at `root`, made absolute and canonical even when it does not exist yet:
    /// its longest existing prefix is resolved (symlinks followed) and the rest joined
    /// with `.` and `..` taken lexically. The engine refuses the home to tools by this
    /// path, so a home spelled through a symlink or `..` is refused however the tools
    /// spell it.
    pub fn at(root: &Path) -> Home {
        Home {
            root: canonical_prefix(root),
            sink: None,
            export: None,
        }
    }

    /// This home, where each session whose configuration asks for it
    /// ([`cairn_tools::EngineConfig::search_index`]), started or resumed, hands its
    /// records to the sink `start` gives for its folder, off the call path (see
    /// [`RecordSink`]). The cli gives the search index's background indexer; the engine
    /// knows none by name. Without one (the default) the setting does nothing.
    pub fn with_sink(mut self, start: SinkStart) -> Home {
        self.sink = Some(start);
        self
    }

    /// This home, where every session started or resumed also hands its records to the
    /// sink `start` gives for its folder, whatever its configuration says: the cli
    /// gives the live OpenTelemetry export when an endpoint is configured (it is not
    /// part of a session's recorded configuration, like any destination of a copy).
    pub fn with_export(mut self, start: SinkStart) -> Home {
        self.export = Some(start);
        self
    }

    /// The sinks of session folder `dir`: the sink when `wanted` and this home has a
    /// sink start, and the export sink when it has one.
    pub fn start_sink(&self, dir: &Path, wanted: bool) -> Option<Box<dyn RecordSink>> {
        let sink = self
            .sink
            .as_ref()
            .filter(|_| wanted)
            .map(|start| start(dir));
        let export = self.export.as_ref().map(|start| start(dir));
        match (sink, export) {
            (Some(a), Some(b)) => Some(Box::new(Both(a, b))),
            (a, b) => a.or(b),
        }
    }

    /// The project folder of a (canonical) workspace.
    pub fn project(&self, workspace: &Path) -> Project {
        Project {
            dir: self.root.join("projects").join(project_key(workspace)),
        }
    }

    /// The log key file (`log.key`, mode 0600): the Ed25519 key that signs tree
    /// checkpoints, in the signed-note private key format (`cairn_tlog::Signer`).
    pub fn log_key_file(&self) -> PathBuf {
        self.root.join(LOG_KEY_FILE)
    }

    /// The log key, when the home holds one.
    pub fn log_signer(&self) -> Result<Option<cairn_tlog::Signer>> {
        let path = self.log_key_file();
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(cairn_tlog::Signer::parse(&text).map_err(|e| {
                EngineError::KeyFile {
                    path: path.clone(),
                    what: e.to_string(),
                }
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_at(&path)(e)),
        }
    }

    /// Every project folder.
    pub fn projects(&self) -> Vec<Project> {
        let Ok(entries) = std::fs::read_dir(self.root.join("projects")) else {
            return Vec::new();
        };
        let mut out: Vec<Project> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| Project { dir: e.path() })
            .collect();
        out.sort_by(|a, b| a.dir.cmp(&b.dir));
        out
    }
}

/// The folder of one workspace's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub dir: PathBuf,
}

impl Project {
    pub fn sessions_dir(&self) -> PathBuf {
        self.dir.join("sessions")
    }
    pub fn blobs_dir(&self) -> PathBuf {
        self.dir.join("blobs")
    }
    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.sessions_dir().join(id)
    }
    pub fn manifest_cache(&self) -> PathBuf {
        self.dir.join("manifest-cache.jsonl")
    }
    /// The project's key of keyed hashes (mode 0600).
    pub fn secret_key_file(&self) -> PathBuf {
        self.dir.join(SECRET_KEY_FILE)
    }

    /// The project's key of the keyed hashes of redacted command lines, made (32
    /// random bytes, mode 0600) the first time. Sessions started at once agree on one
    /// key: it is written aside, then linked into place only if none is there yet.
    pub fn secret_key(&self) -> Result<SecretKey> {
        let path = self.secret_key_file();
        if let Some(key) = read_key(&path)? {
            return Ok(key);
        }
        cairn_store::private::create_dir_all(&self.dir).map_err(io_at(&self.dir))?;
        let mut bytes = [0u8; SECRET_KEY_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| EngineError::Io {
            path: path.clone(),
            source: std::io::Error::other(format!("no random bytes for a new key: {e}")),
        })?;
        let tmp = tempfile::Builder::new()
            .prefix(".secret-key-")
            .tempfile_in(&self.dir)
            .map_err(io_at(&self.dir))?;
        {
            use std::io::Write;
            let mut f = tmp.as_file();
            f.write_all(&bytes).map_err(io_at(tmp.path()))?;
            f.sync_all().map_err(io_at(tmp.path()))?;
        }
        match std::fs::hard_link(tmp.path(), &path) {
            Ok(()) => Ok(SecretKey(bytes)),
            // Another session made it first: theirs is the key.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_key(&path)?
                .ok_or_else(|| io_at(&path)(std::io::Error::other("the key vanished"))),
            Err(e) => Err(io_at(&path)(e)),
        }
    }

    /// Session ids of this project, oldest first (ids sort by start time): the
    /// folders whose log holds something. A session being created is not one yet (its
    /// folder has a name the store marks unborn), nor is one whose log is empty (see
    /// [`Project::never_started`]).
    pub fn sessions(&self) -> Vec<String> {
        self.list_sessions(|len| len > 0)
    }

    /// Session folders of this project whose log is empty, oldest first: sessions that
    /// never started, left by a cairn that was killed while it created them, before
    /// sessions were born whole (with their first record). Nothing to resume or verify:
    /// listings skip them.
    pub fn never_started(&self) -> Vec<String> {
        self.list_sessions(|len| len == 0)
    }

    /// The ids of the session folders whose log's length `keep` accepts, sorted.
    fn list_sessions(&self, keep: impl Fn(u64) -> bool) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.sessions_dir()) else {
            return Vec::new();
        };
        let mut out: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| !cairn_store::is_unborn(&e.file_name()))
            .filter(|e| {
                std::fs::metadata(e.path().join(cairn_store::LOG_FILE))
                    .is_ok_and(|m| m.is_file() && keep(m.len()))
            })
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        out.sort();
        out
    }

    /// Removes the folders of sessions whose creation a crash cut short (see
    /// [`cairn_store::remove_unborn`]); returns them.
    pub fn remove_unborn(&self) -> Result<Vec<PathBuf>> {
        Ok(cairn_store::remove_unborn(&self.sessions_dir())?)
    }
}

/// The name of a project's key file.
pub const SECRET_KEY_FILE: &str = "secret.key";

/// The key at `path`; `None` when there is none.
fn read_key(path: &Path) -> Result<Option<SecretKey>> {
    match std::fs::read(path) {
        Ok(bytes) => match <[u8; SECRET_KEY_BYTES]>::try_from(bytes.as_slice()) {
            Ok(b) => Ok(Some(SecretKey(b))),
            Err(_) => Err(io_at(path)(std::io::Error::other(format!(
                "holds {} bytes, not a key of {SECRET_KEY_BYTES}: remove it and a new key is made (keyed hashes of earlier sessions then no longer compare with new ones)",
                bytes.len()
            )))),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_at(path)(e)),
    }
}

/// `sanitised-path-<8 hex>`: readable, and unique through the hash of the full path.
pub fn project_key(workspace: &Path) -> String {
    let text = workspace.to_string_lossy();
    let mut name: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    name = name.trim_matches('-').to_string();
    if name.len() > 48 {
        name = name[name.len() - 48..].trim_start_matches('-').to_string();
    }
    format!("{name}-{}", cairn_store::Hash::of(text.as_bytes()).short(8))
}

/// A new session id: UTC start time to the microsecond (so ids sort by age, even for
/// sessions started within one second, as the demo's are) and 6 random hex digits.
pub fn new_session_id() -> String {
    let now = jiff::Timestamp::now();
    let stamp = now.strftime("%Y%m%dT%H%M%S").to_string();
    let mut seed = [0u8; 8];
    let _ = getrandom_bytes(&mut seed);
    let noise =
        cairn_store::Hash::of(&[&seed[..], &now.as_nanosecond().to_le_bytes()[..]].concat())
            .short(6);
    format!("{stamp}.{:06}-{noise}", now.subsec_microsecond())
}

fn getrandom_bytes(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// Where a session lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRef {
    pub id: String,
    pub dir: PathBuf,
    pub project: Project,
}

/// The file in a project folder naming its `last` session: the newest one the user
/// started or resumed there (a run, a resume, a fork, a chat, a demo); never a replay.
pub const LAST_FILE: &str = "last";
/// The file in a project folder naming its newest replay (`last-replay`).
pub const LAST_REPLAY_FILE: &str = "last-replay";

/// What a session is to the `last` handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handle {
    /// A session the user started or resumed: it becomes `last`.
    Last,
    /// A replay: it becomes `last-replay`, never `last`.
    Replay,
}

impl Handle {
    fn file(self) -> &'static str {
        match self {
            Handle::Last => LAST_FILE,
            Handle::Replay => LAST_REPLAY_FILE,
        }
    }
}

impl Project {
    /// Makes `id` this project's `last` (or `last-replay`), in the project folder and in
    /// the home (`<home>/last`, what `last` means outside any project's workspace).
    /// Written aside and renamed into place: a reader sees the old id or the new.
    pub fn mark(&self, home: &Home, id: &str, handle: Handle) -> Result<()> {
        write_pointer(&self.dir.join(handle.file()), &self.dir, id)?;
        let global = format!("{}\n{id}", self.dir.display());
        write_pointer(&home.root.join(handle.file()), &home.root, &global)
    }

    /// The session this project's `last` (or `last-replay`) names, if it still exists.
    pub fn marked(&self, handle: Handle) -> Option<String> {
        let id = std::fs::read_to_string(self.dir.join(handle.file())).ok()?;
        let id = id.trim();
        (!id.is_empty() && self.session_dir(id).join(cairn_store::LOG_FILE).is_file())
            .then(|| id.to_string())
    }
}

fn write_pointer(path: &Path, dir: &Path, text: &str) -> Result<()> {
    cairn_store::private::create_dir_all(dir).map_err(io_at(dir))?;
    let tmp = tempfile::Builder::new()
        .prefix(".last-")
        .tempfile_in(dir)
        .map_err(io_at(dir))?;
    std::fs::write(tmp.path(), format!("{text}\n")).map_err(io_at(tmp.path()))?;
    tmp.persist(path).map_err(|e| io_at(path)(e.error))?;
    Ok(())
}

/// The session the home's `last` (or `last-replay`) names: the newest over all projects.
fn marked_in_home(home: &Home, handle: Handle) -> Option<SessionRef> {
    let text = std::fs::read_to_string(home.root.join(handle.file())).ok()?;
    let mut lines = text.lines();
    let project = Project {
        dir: PathBuf::from(lines.next()?),
    };
    let id = lines.next()?.trim().to_string();
    let dir = project.session_dir(&id);
    dir.join(cairn_store::LOG_FILE)
        .is_file()
        .then_some(SessionRef { id, dir, project })
}

/// Candidates listed in full in an ambiguity error; past it, how many more.
pub const AMBIGUOUS_SHOWN_MAX: usize = 10;

/// Finds a session by:
/// - a session folder path;
/// - `last`: the newest session the user started or resumed in `workspace`'s project
///   (run, resume, fork, chat, never a replay), or in any project when it has none;
/// - `last-replay`: the newest replay, likewise;
/// - an id, or any part of one that only one session's id holds (its time, its random
///   suffix); a part several ids hold is an error listing them.
pub fn find_session(home: &Home, spec: &str, workspace: Option<&Path>) -> Result<SessionRef> {
    let path = Path::new(spec);
    if path.join(cairn_store::LOG_FILE).is_file() {
        let dir = path.canonicalize().unwrap_or(path.to_path_buf());
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let project = Project {
            dir: dir
                .parent()
                .and_then(|p| p.parent())
                .unwrap_or(&dir)
                .to_path_buf(),
        };
        return Ok(SessionRef { id, dir, project });
    }
    let all: Vec<(Project, String)> = home
        .projects()
        .into_iter()
        .flat_map(|p| p.sessions().into_iter().map(move |s| (p.clone(), s)))
        .collect();
    let handle = match spec {
        "last" => Some(Handle::Last),
        "last-replay" => Some(Handle::Replay),
        _ => None,
    };
    if let Some(handle) = handle {
        let own = workspace.map(|w| home.project(&w.canonicalize().unwrap_or(w.to_path_buf())));
        let found = own
            .as_ref()
            .and_then(|p| {
                p.marked(handle).map(|id| SessionRef {
                    dir: p.session_dir(&id),
                    id,
                    project: p.clone(),
                })
            })
            .or_else(|| marked_in_home(home, handle));
        if let Some(found) = found {
            return Ok(found);
        }
        // A home from before the handles were kept: `last` is the newest session.
        if handle == Handle::Replay {
            return Err(EngineError::NotFound(
                "no replay recorded yet (cairn replay SESSION makes one)".into(),
            ));
        }
        let pick = all
            .iter()
            .filter(|(p, _)| own.as_ref().is_none_or(|o| o == p))
            .max_by(|a, b| a.1.cmp(&b.1))
            .or_else(|| all.iter().max_by(|a, b| a.1.cmp(&b.1)));
        return match pick {
            Some((p, s)) => Ok(SessionRef {
                id: s.clone(),
                dir: p.session_dir(s),
                project: p.clone(),
            }),
            None => Err(EngineError::NoSessions {
                home: home.root.clone(),
            }),
        };
    }
    let exact: Vec<&(Project, String)> = all.iter().filter(|(_, s)| s == spec).collect();
    let matches: Vec<&(Project, String)> = if exact.is_empty() {
        all.iter().filter(|(_, s)| s.contains(spec)).collect()
    } else {
        exact
    };
    match matches.as_slice() {
        [(p, s)] => Ok(SessionRef {
            id: s.clone(),
            dir: p.session_dir(s),
            project: p.clone(),
        }),
        [] => Err(EngineError::NoSessionMatch {
            spec: spec.to_string(),
        }),
        many => {
            let mut ids: Vec<&str> = many.iter().map(|(_, s)| s.as_str()).collect();
            ids.sort_unstable_by(|a, b| b.cmp(a));
            let mut listed = ids
                .iter()
                .take(AMBIGUOUS_SHOWN_MAX)
                .copied()
                .collect::<Vec<_>>()
                .join(", ");
            if ids.len() > AMBIGUOUS_SHOWN_MAX {
                listed.push_str(&format!(", and {} more", ids.len() - AMBIGUOUS_SHOWN_MAX));
            }
            Err(EngineError::NotFound(format!(
                "'{spec}' matches {} sessions ({listed}): give more of the id",
                ids.len()
            )))
        }
    }
}

/// The shortest way to name each of `ids` that no other id holds: its random suffix
/// (`a1b2c3`) when unique, else the whole id.
pub fn short_ids(ids: &[String]) -> Vec<String> {
    let suffix = |id: &str| id.rsplit('-').next().unwrap_or(id).to_string();
    ids.iter()
        .map(|id| {
            let s = suffix(id);
            let holders = ids.iter().filter(|other| other.contains(&s)).count();
            if holders == 1 { s } else { id.clone() }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ambiguous_part_lists_up_to_the_limit_then_counts_the_rest() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = Home::at(dir.path());
        let project = home.project(Path::new("/w"));
        let make = |n: usize| {
            for i in 0..n {
                let d = project.session_dir(&format!("20261130T000000.{i:06}-abc{i:03}"));
                std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
                // Listed: a log that holds something.
                std::fs::write(d.join(cairn_store::LOG_FILE), "{}\n")
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        };
        let err = || {
            find_session(&home, "abc", None)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        make(AMBIGUOUS_SHOWN_MAX);
        let e = err();
        assert!(
            e.starts_with("'abc' matches 10 sessions (20261130T000000.000009-abc009, "),
            "{e}"
        );
        assert!(
            e.ends_with("20261130T000000.000000-abc000): give more of the id"),
            "{e}"
        );
        make(AMBIGUOUS_SHOWN_MAX + 1);
        let e = err();
        assert!(
            e.starts_with("'abc' matches 11 sessions (20261130T000000.000010-abc010, "),
            "{e}"
        );
        assert!(
            e.ends_with("20261130T000000.000001-abc001, and 1 more): give more of the id"),
            "{e}"
        );
        // A unique part of the suffix finds one.
        let found = find_session(&home, "abc007", None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(found.id, "20261130T000000.000007-abc007");
    }

    /// Guards against a session killed while it was being created being listed (and
    /// taken for `last`) as interrupted for ever: a folder not born yet is no session,
    /// and one whose log an older cairn left empty never started.
    #[test]
    fn listings_skip_sessions_being_created_and_logs_left_empty() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = Home::at(dir.path());
        let project = home.project(Path::new("/w"));
        let ok = |r: std::io::Result<()>| r.unwrap_or_else(|e| panic!("{e}"));
        let log = |id: &str, text: &str| {
            let d = project.session_dir(id);
            ok(std::fs::create_dir_all(&d));
            ok(std::fs::write(d.join(cairn_store::LOG_FILE), text));
        };
        log("20261130T000000.000001-aaaaaa", "{}\n");
        log("20261130T000000.000002-bbbbbb", "");
        let born = project.session_dir("20261130T000000.000003-cccccc");
        let mut w = cairn_store::LogWriter::create(&born, Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(project.sessions(), ["20261130T000000.000001-aaaaaa"]);
        assert_eq!(project.never_started(), ["20261130T000000.000002-bbbbbb"]);
        let last = find_session(&home, "last", None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(last.id, "20261130T000000.000001-aaaaaa");
        assert!(find_session(&home, "bbbbbb", None).is_err());
        w.append(&serde_json::json!({"type": "session_started"}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            project.sessions(),
            [
                "20261130T000000.000001-aaaaaa",
                "20261130T000000.000003-cccccc"
            ]
        );
    }

    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_key_is_made_once_private_and_a_damaged_one_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let project = Project {
            dir: dir.path().join("p"),
        };
        let key = project.secret_key().unwrap_or_else(|e| panic!("{e}"));
        let file = project.secret_key_file();
        let meta = std::fs::metadata(&file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(meta.len(), SECRET_KEY_BYTES as u64);
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // Made once: the same key again.
        assert_eq!(project.secret_key().ok(), Some(key));
        // At and past the size: one byte short is refused, saying how to fix it.
        std::fs::write(&file, [7u8; SECRET_KEY_BYTES - 1]).unwrap_or_else(|e| panic!("{e}"));
        let e = project.secret_key().map(|_| ()).unwrap_err().to_string();
        assert!(
            e.contains("holds 31 bytes, not a key of 32: remove it and a new key is made"),
            "{e}"
        );
        std::fs::write(&file, [7u8; SECRET_KEY_BYTES]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            project.secret_key().ok(),
            Some(SecretKey([7; SECRET_KEY_BYTES]))
        );
    }
}
