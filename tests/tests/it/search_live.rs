//! The search index kept off the call path: the engine's background indexer (what it
//! adds equals what a catch-up adds; its queue and batch limits; a process killed
//! before its commit loses nothing), and the catch-up that reads the home's written
//! set instead of listing every session, after each kind of writer.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_engine::RecordSink;
use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Engine, EngineConfig, Home, ResumeOptions};
use cairn_search::sqlite::{INDEX_FILE, Index};
use cairn_search::{Filter, Hit, Indexer, IndexerLimits, Query};
use cairn_store::Durability;
use serde_json::json;

fn config(search_index: bool) -> EngineConfig {
    let mut c = EngineConfig::new(Catalog::Thoth);
    c.durability = Durability::None;
    c.search_index = search_index;
    c
}

struct Env {
    tmp: tempfile::TempDir,
    home: Home,
    ws: PathBuf,
}

fn env() -> Env {
    let (tmp, home, ws) = cairn_tests::home_and_workspace();
    // As the cli gives it: a session that asks (`search_index`) is indexed as written.
    let start = Indexer::start_in_home(&home.root, IndexerLimits::default());
    let home = home.with_sink(start);
    Env { tmp, home, ws }
}

impl Env {
    /// A session: a message, a shell call per command; returns its folder.
    fn session(&self, index_it: bool, message: &str, commands: &[&str]) -> PathBuf {
        super::search::session_with(&self.home, &self.ws, config(index_it), message, commands)
    }

    fn index(&self) -> Index {
        Index::open(&self.home.root.join(INDEX_FILE)).unwrap()
    }

    /// An index caught up by listing the home, which holds one session.
    fn caught_up(&self) -> Index {
        self.session(false, "the first session", &[]);
        let mut index = self.index();
        let up = index.catch_up(&self.home.root).unwrap();
        assert!(up.listed_home);
        all_cleared(&mut index, &self.home);
        index
    }
}

fn marked(home: &Home) -> Vec<PathBuf> {
    cairn_store::written::Written::at(&home.root)
        .list()
        .unwrap()
}

fn search(index: &Index, q: &str) -> Vec<Hit> {
    index
        .search(&Query::parse(q).unwrap(), &Filter::default())
        .unwrap()
}

/// The hits of `q` as (session folder name, seq, kind, tool, snippet).
fn brief(index: &Index, q: &str) -> Vec<(String, u64, String, Option<String>, String)> {
    search(index, q)
        .into_iter()
        .map(|h| (h.session, h.seq, h.kind.as_str().into(), h.tool, h.snippet))
        .collect()
}

/// A catch-up that goes by the written set alone finds `word` in session `dir`, and
/// clears its mark; another finds nothing new.
fn found_by_marks(index: &mut Index, home: &Home, dir: &Path, word: &str) {
    assert!(
        marked(home).contains(&dir.to_path_buf()),
        "{marked:?}",
        marked = marked(home)
    );
    let up = index.catch_up(&home.root).unwrap();
    assert!(!up.listed_home, "{up:?}");
    assert!(up.docs > 0, "{up:?}");
    assert!(up.problems.is_empty(), "{up:?}");
    let hits = search(index, word);
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(hits.iter().any(|h| h.session == name), "{word}: {hits:?}");
    let again = index.catch_up(&home.root).unwrap();
    assert_eq!((again.listed_home, again.docs), (false, 0));
    all_cleared(index, home);
}

/// Every mark is gone after at most a few more catch-ups, each finding nothing new.
/// A mark is cleared only when no process holds the log's writer lock; a child that
/// another test of this process forks holds the lock's descriptor until its exec, and
/// a catch-up in that moment keeps the mark for the next one.
fn all_cleared(index: &mut Index, home: &Home) {
    let clock = Instant::now();
    while !marked(home).is_empty() {
        assert!(
            clock.elapsed() < Duration::from_secs(10),
            "marks never cleared: {:?}",
            marked(home)
        );
        std::thread::sleep(Duration::from_millis(20));
        let again = index.catch_up(&home.root).unwrap();
        assert_eq!((again.listed_home, again.docs), (false, 0));
    }
}

#[test]
fn the_engines_indexer_adds_what_a_catch_up_would_and_leaves_it_nothing() {
    let e = env();
    let a = e.session(
        true,
        "please run the unit tests",
        &["echo cargo test: 12 passed", "printf 'b%.0s' $(seq 9000)"],
    );
    // Resumed with the indexer on, a session never indexed: what came before the
    // resume is read from the log.
    let b = e.session(false, "deploy the unit to staging", &["echo staging ok"]);
    let (mut r, _) = Engine::resume(
        &e.home,
        &b,
        ResumeOptions {
            config: Some(config(false)),
            search_index: Some(true),
            ..Default::default()
        },
    )
    .unwrap();
    r.set_approver(Box::new(Policy::AllowAll));
    r.user_message("resumed to check the unit").unwrap();
    r.call("shell", json!({ "command": "echo resumed output" }))
        .unwrap();
    r.end("done").unwrap();

    let live = e.index();
    let log_bytes = |d: &Path| std::fs::metadata(cairn_store::log_path(d)).unwrap().len();
    for d in [&a, &b] {
        assert_eq!(live.indexed_bytes(d).unwrap(), Some(log_bytes(d)), "{d:?}");
    }
    // The same hits as an index made by a catch-up alone.
    let mut rebuilt = Index::open(&e.tmp.path().join("rebuilt.db")).unwrap();
    rebuilt.update([a.clone(), b.clone()]).unwrap();
    assert_eq!(live.doc_count().unwrap(), rebuilt.doc_count().unwrap());
    for q in ["unit", "passed", "staging", "resumed", "echo", "b*"] {
        let hits = brief(&live, q);
        assert!(!hits.is_empty(), "{q}");
        assert_eq!(hits, brief(&rebuilt, q), "{q}");
    }
    // Nothing left for the catch-up.
    let mut live = live;
    assert_eq!(live.catch_up(&e.home.root).unwrap().docs, 0);
}

/// The records of session `dir` as a writer hands them: parsed, each with the log's
/// length after it.
fn handed(dir: &Path) -> Vec<(cairn_engine::Record, u64)> {
    let blobs =
        cairn_store::BlobStore::open(&dir.parent().unwrap().parent().unwrap().join("blobs"))
            .unwrap();
    let len = std::fs::metadata(cairn_store::log_path(dir)).unwrap().len();
    let records: Vec<_> = cairn_store::LogReader::open(dir)
        .unwrap()
        .records()
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let ends: Vec<u64> = records
        .iter()
        .skip(1)
        .map(|r| r.offset)
        .chain([len])
        .collect();
    records
        .iter()
        .zip(ends)
        .map(|(r, end)| (cairn_engine::fold::parse_in(r, &blobs).unwrap(), end))
        .collect()
}

/// Hands `records` to `sink` up to, not including, the `n`+1-th the indexer takes;
/// returns how many were handed.
fn hand(sink: &mut Indexer, records: &[(cairn_engine::Record, u64)], n: usize) -> usize {
    let (mut taken, mut at) = (0, 0);
    for (r, b) in records {
        let takes = Indexer::takes(&r.event);
        if takes && taken == n {
            break;
        }
        sink.record(r, *b);
        taken += usize::from(takes);
        at += 1;
    }
    at
}

/// The number of records up to and including the `n`th one the indexer takes.
fn hand_count(records: &[(cairn_engine::Record, u64)], n: usize) -> usize {
    let mut taken = 0;
    for (i, (r, _)) in records.iter().enumerate() {
        taken += usize::from(Indexer::takes(&r.event));
        if taken == n {
            return i + 1;
        }
    }
    records.len()
}

/// A new index file at `db` locked by this connection until it commits: an indexer
/// waits to open it.
fn locked(db: &Path) -> rusqlite::Connection {
    let lock = rusqlite::Connection::open(db).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    lock
}

/// Waits, up to 10 s, for the index to hold session `dir` up to seq `to` (a commit
/// of the indexer's thread).
fn committed(index: &Index, dir: &Path, to: u64) {
    let clock = Instant::now();
    while index.indexed_to(dir).unwrap() == 0 {
        assert!(clock.elapsed() < Duration::from_secs(10), "not committed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(index.indexed_to(dir).unwrap(), to);
}

/// The position after the last of `records` the indexer takes.
fn after_last_taken(records: &[(cairn_engine::Record, u64)]) -> u64 {
    records
        .iter()
        .rev()
        .find(|(r, _)| Indexer::takes(&r.event))
        .map_or(0, |(r, _)| r.seq + 1)
}

// The queue holds `queue_docs_max` records; past it the call is not held up: the
// record is dropped, nothing more of the session is handed, and the index stops short
// of the drop, for the catch-up to finish exactly.
#[test]
fn a_full_queue_drops_the_rest_of_the_session_for_the_catch_up() {
    for dropped in [0, 1] {
        let e = env();
        // Three messages first: the drop (the 4th or 5th record the indexer takes)
        // falls before any command, so the position is known exactly. (Positions
        // inside a command's call: see the test after this one.)
        let dir = {
            let mut s = Engine::start(&e.home, &e.ws, config(false)).unwrap();
            s.set_approver(Box::new(Policy::AllowAll));
            for m in ["queued words", "more queued words", "the last queued words"] {
                s.user_message(m).unwrap();
            }
            for c in ["echo one", "echo two"] {
                s.call("shell", json!({ "command": c })).unwrap();
            }
            let dir = s.dir().to_path_buf();
            s.end("done").unwrap();
            dir
        };
        let records = handed(&dir);
        let db = e.home.root.join(INDEX_FILE);
        // The thread takes at most one record (a batch of one), then waits on this lock
        // to open the index: the others stay in the queue.
        let lock = locked(&db);
        let limits = IndexerLimits {
            queue_docs_max: 3,
            batch_docs_max: 1,
            ..IndexerLimits::default()
        };
        let mut sink = Indexer::start(&db, &dir, limits);
        let clock = Instant::now();
        // At the limit: three records the indexer takes, and those between them.
        let mut at = hand(&mut sink, &records, 3);
        // Past it (one more when the thread took its batch of one already), the next
        // one it takes is dropped at once.
        if dropped > 0 {
            while sink.dropped() == 0 {
                assert!(at < records.len(), "nothing dropped past the queue's limit");
                sink.record(&records[at].0, records[at].1);
                at += 1;
            }
            assert!(
                at <= hand_count(&records, 5),
                "dropped later than one past the limit"
            );
        }
        assert!(clock.elapsed() < Duration::from_secs(2));
        assert_eq!(sink.dropped(), dropped);
        lock.execute_batch("COMMIT").unwrap();
        drop(lock);
        sink.finish();
        let report = sink.report().unwrap().clone();
        assert_eq!(report.failed, None);
        let index = Index::open(&db).unwrap();
        let full = std::fs::metadata(cairn_store::log_path(&dir))
            .unwrap()
            .len();
        let held = index.indexed_bytes(&dir).unwrap();
        assert!(held < Some(full));
        if dropped == 0 {
            // Everything handed: the last record handed is the position.
            assert_eq!(index.indexed_to(&dir).unwrap(), records[at - 1].0.seq + 1);
            assert_eq!(held, Some(records[at - 1].1));
        } else {
            // Up to the last record queued, not one past it.
            assert_eq!(
                index.indexed_to(&dir).unwrap(),
                after_last_taken(&records[..at - 1])
            );
        }
        let mut index = index;
        index.update([dir.clone()]).unwrap();
        let mut rebuilt = Index::open(&e.tmp.path().join("rebuilt.db")).unwrap();
        rebuilt.update([dir.clone()]).unwrap();
        assert_eq!(index.doc_count().unwrap(), rebuilt.doc_count().unwrap());
        for q in ["queued", "one", "two", "echo"] {
            assert_eq!(brief(&index, q), brief(&rebuilt, q), "{q}");
        }
    }
}

/// A document as the index holds it: (seq, kind, call, tool, text).
type DocRow = (u64, String, Option<String>, Option<String>, String);

/// Every document of the index at `db`, in seq order.
fn all_docs(db: &Path) -> Vec<DocRow> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn
        .prepare("SELECT seq, kind, call, tool, body FROM docs ORDER BY session, seq")
        .unwrap();
    st.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
    .unwrap()
    .collect::<rusqlite::Result<_>>()
    .unwrap()
}

/// A session whose calls' outputs, as indexed, are their commands' own stdout and
/// stderr (not the shell tool's text for the model).
fn commands_session(e: &Env) -> (PathBuf, Vec<DocRow>) {
    let dir = e.session(
        false,
        "run the split commands",
        &[
            "printf 'alpha out\\n'; printf 'beta err\\n' >&2",
            "echo gamma; exit 3",
            "printf 'delta %.0s' $(seq 3)",
        ],
    );
    let db = e.tmp.path().join("whole.db");
    Index::open(&db).unwrap().update([dir.clone()]).unwrap();
    let whole = all_docs(&db);
    // Each command's stderr is in its call's output document: indexed from its blobs.
    assert!(
        whole
            .iter()
            .any(|d| d.1 == "output" && d.4.contains("alpha out") && d.4.contains("beta err")),
        "{whole:#?}"
    );
    (dir, whole)
}

// Wherever the live indexer's last commit leaves the position before the process dies
// (after any record it takes, in particular between a command's end and its call's
// end), the catch-up that goes on from it indexes exactly what a whole read of the log
// does: the position keeps the output blobs of the commands still open.
#[test]
fn a_catch_up_after_any_commit_of_a_dead_indexer_indexes_what_a_whole_read_does() {
    let e = env();
    let (dir, whole) = commands_session(&e);
    let records = handed(&dir);
    let taken = records
        .iter()
        .filter(|(r, _)| Indexer::takes(&r.event))
        .count();
    let mut inside_a_command = 0;
    for k in 1..=taken {
        let db = e.tmp.path().join(format!("dead-{k}.db"));
        let limits = IndexerLimits {
            batch_docs_max: k,
            batch_ms: 600_000,
            ..IndexerLimits::default()
        };
        let mut sink = Indexer::start(&db, &dir, limits);
        let at = hand(&mut sink, &records, k);
        let to = after_last_taken(&records[..at]);
        if !committed_to(&db, &dir, to) {
            sink.finish();
            panic!(
                "the {k}th record taken was not committed: position {:?}, indexer {:?}",
                Index::open(&db).map(|i| i.indexed_to(&dir)),
                sink.report()
            );
        }
        // The process dies: nothing more is handed, nothing drained.
        std::mem::forget(sink);
        let open = matches!(&records[to as usize - 1].0.event,
            cairn_engine::event::Event::ShellExec(x)
                if matches!(x.phase, cairn_engine::event::ShellPhase::Finished(_)));
        inside_a_command += usize::from(open);
        let mut index = Index::open(&db).unwrap();
        index.update([dir.clone()]).unwrap();
        assert_eq!(
            all_docs(&db),
            whole,
            "position after the {k}th record taken"
        );
    }
    assert_eq!(inside_a_command, 3, "a position after each command's end");
}

// A catch-up that reads a log ending anywhere (a session still being written, or one
// that died), then the rest once it is written, indexes what a whole read does.
#[test]
fn a_catch_up_of_a_log_cut_anywhere_then_of_the_rest_indexes_what_a_whole_read_does() {
    let e = env();
    let (dir, whole) = commands_session(&e);
    let records = handed(&dir);
    let log = std::fs::read(cairn_store::log_path(&dir)).unwrap();
    for (i, (_, end)) in records.iter().enumerate() {
        let cut = dir.with_file_name(format!("cut-{i}"));
        std::fs::create_dir(&cut).unwrap();
        let cut_log = cairn_store::log_path(&cut);
        std::fs::write(&cut_log, &log[..*end as usize]).unwrap();
        let db = e.tmp.path().join(format!("cut-{i}.db"));
        let mut index = Index::open(&db).unwrap();
        index.update([cut.clone()]).unwrap();
        assert_eq!(index.indexed_to(&cut).unwrap(), i as u64 + 1);
        std::fs::write(&cut_log, &log).unwrap();
        index.update([cut.clone()]).unwrap();
        assert_eq!(all_docs(&db), whole, "log cut after seq {i}");
    }
}

/// Whether the index at `db` holds session `dir` up to seq `to` within 30 s. Read
/// only, with no [`Index::open`]: the indexer's thread lays the file out alone.
fn committed_to(db: &Path, dir: &Path, to: u64) -> bool {
    let clock = Instant::now();
    while clock.elapsed() < Duration::from_secs(30) {
        let at: Option<u64> =
            rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .and_then(|c| {
                    c.query_row(
                        "SELECT next_seq FROM sessions WHERE dir = ?1",
                        [dir.to_string_lossy()],
                        |r| r.get(0),
                    )
                })
                .ok();
        if at == Some(to) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

// A batch is committed when `batch_docs_max` records wait, without waiting for the
// time limit or the writer's end; fewer wait for them.
#[test]
fn a_batch_is_committed_at_its_size() {
    let e = env();
    let dir = e.session(false, "batched words", &["echo one", "echo two"]);
    let records = handed(&dir);
    let db = e.home.root.join(INDEX_FILE);
    let limits = IndexerLimits {
        batch_docs_max: 2,
        batch_ms: 3_600_000,
        ..IndexerLimits::default()
    };
    let mut sink = Indexer::start(&db, &dir, limits);
    // One below the size: nothing is committed (a second would be, within 10 s).
    let one = hand(&mut sink, &records, 1);
    std::thread::sleep(Duration::from_millis(300));
    let index = Index::open(&db).unwrap();
    assert_eq!(index.indexed_to(&dir).unwrap(), 0);
    // At the size: session_started and the message, committed.
    let two = hand(&mut sink, &records[one..], 1) + one;
    committed(&index, &dir, after_last_taken(&records[..two]));
    assert_eq!(search(&index, "batched").len(), 1);
    for (r, b) in &records[two..] {
        sink.record(r, *b);
    }
    sink.finish();
    assert_eq!(
        index.indexed_bytes(&dir).unwrap(),
        Some(records.last().unwrap().1)
    );
}

// The crash test: a process killed after its call and before its indexer committed
// leaves the call in the log only; the catch-up `cairn search` runs finds it by the
// session's mark, without listing the home.
#[test]
fn a_call_of_a_process_killed_before_the_indexer_committed_is_found_by_the_catch_up() {
    let e = env();
    std::fs::write(e.ws.join("f.txt"), "a zanzibar line\n").unwrap();
    let mut index = e.caught_up();
    let mut child = Command::new(env!("CARGO_BIN_EXE_search_helper"))
        .arg(&e.home.root)
        .arg(&e.ws)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let line = cairn_tests::first_line(&mut child);
    let dir = PathBuf::from(line.trim().strip_prefix("called ").unwrap());
    child.kill().unwrap();
    child.wait().unwrap();
    // Not committed by the indexer.
    assert!(search(&index, "zanzibar").is_empty());
    found_by_marks(&mut index, &e.home, &dir, "zanzibar");
    let hit = &search(&index, "zanzibar")[0];
    assert_eq!(
        (hit.kind.as_str(), hit.tool.as_deref()),
        ("output", Some("read_file"))
    );
}

#[test]
fn the_catch_up_finds_a_new_session_by_its_mark() {
    let e = env();
    let mut index = e.caught_up();
    let dir = e.session(false, "a brand new session", &["echo quokka"]);
    found_by_marks(&mut index, &e.home, &dir, "quokka");
}

#[test]
fn the_catch_up_finds_a_resumed_session_by_its_mark() {
    let e = env();
    let dir = e.session(false, "before the resume", &[]);
    let mut index = e.caught_up();
    assert_eq!(marked(&e.home), Vec::<PathBuf>::new());
    let (mut r, _) = Engine::resume(&e.home, &dir, ResumeOptions::default()).unwrap();
    r.set_approver(Box::new(Policy::AllowAll));
    r.user_message("after the resume: wombat").unwrap();
    r.end("done").unwrap();
    found_by_marks(&mut index, &e.home, &dir, "wombat");
}

#[test]
fn the_catch_up_finds_a_hook_session_by_its_mark() {
    use cairn_engine::hook::Unlisted;
    use cairn_import::hook::{HookOptions, handle};
    let e = env();
    let mut index = e.caught_up();
    let options = HookOptions {
        agent: "claude".into(),
        unlisted: Unlisted::Ask,
        project_dir: None,
        agent_version: Some("2.1.332".into()),
    };
    let send = |name: &str, mut extra: serde_json::Value| {
        extra["session_id"] = json!("5d0a3c1e-aaaa-bbbb-cccc-000000000009");
        extra["cwd"] = json!(e.ws.to_string_lossy());
        extra["transcript_path"] = json!("/nonexistent/transcript.jsonl");
        extra["hook_event_name"] = json!(name);
        handle(&e.home, &options, &extra).unwrap();
    };
    send("SessionStart", json!({"source": "startup"}));
    send("UserPromptSubmit", json!({"prompt": "find the platypus"}));
    let dirs: Vec<PathBuf> = marked(&e.home);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    found_by_marks(&mut index, &e.home, &dirs[0], "platypus");
    // The next hook call of the same session reopens its log: marked again.
    send("UserPromptSubmit", json!({"prompt": "and the echidna"}));
    found_by_marks(&mut index, &e.home, &dirs[0], "echidna");
}

#[test]
fn the_catch_up_finds_an_imported_session_by_its_mark() {
    let e = env();
    let mut index = e.caught_up();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/import/claude-session.jsonl");
    let text = std::fs::read_to_string(data)
        .unwrap()
        .replace("@WS@", &e.ws.to_string_lossy())
        .replace("@TOKEN@", "not-a-token");
    let src = e.tmp.path().join("claude-s.jsonl");
    std::fs::write(&src, text).unwrap();
    let s = cairn_import::import_paths(
        &e.home,
        &[src],
        &cairn_import::Options::default(),
        &mut |_, _| {},
    );
    assert_eq!(s.errors, Vec::<(PathBuf, String)>::new());
    let dir = s.imported[0].dir.clone();
    found_by_marks(&mut index, &e.home, &dir, "greeting");
}

// Without the written set's `.complete` (a home from before it, or the first search)
// the catch-up lists the home; so it does when the index holds no session.
#[test]
fn the_catch_up_lists_the_home_when_it_has_no_written_set_to_go_by() {
    let e = env();
    let mut index = e.caught_up();
    e.session(false, "listed again", &[]);
    std::fs::remove_file(
        e.home
            .root
            .join(cairn_store::written::WRITTEN_DIR)
            .join(cairn_store::written::WRITTEN_COMPLETE_FILE),
    )
    .unwrap();
    let up = index.catch_up(&e.home.root).unwrap();
    assert!(up.listed_home);
    assert_eq!(search(&index, "listed").len(), 1);
    all_cleared(&mut index, &e.home);
    // A fresh index in a home whose written set is complete.
    let mut fresh = Index::open(&e.tmp.path().join("fresh.db")).unwrap();
    let up = fresh.catch_up(&e.home.root).unwrap();
    assert!(up.listed_home);
    assert_eq!(up.sessions, 2);
}

// A record waits at most `batch_ms` before it is committed, though fewer than
// `batch_docs_max` came and the writer is not done.
#[test]
fn a_batch_is_committed_at_its_time() {
    let e = env();
    let dir = e.session(false, "timed words", &[]);
    let records = handed(&dir);
    let db = e.home.root.join(INDEX_FILE);
    let limits = IndexerLimits {
        batch_ms: 50,
        ..IndexerLimits::default()
    };
    let mut sink = Indexer::start(&db, &dir, limits);
    let two = hand(&mut sink, &records, 2);
    let index = Index::open(&db).unwrap();
    committed(&index, &dir, after_last_taken(&records[..two]));
    assert_eq!(search(&index, "timed").len(), 1);
    drop(sink);
}

// A writer that is done waits `drain_ms` for the indexer, no longer: past it, it goes
// on and the thread commits on its own (or the catch-up reads the log).
#[test]
fn the_writer_waits_for_the_indexer_up_to_the_drain_limit() {
    let e = env();
    let dir = e.session(false, "drained words", &[]);
    let records = handed(&dir);
    let db = e.home.root.join(INDEX_FILE);
    let lock = locked(&db);
    let limits = IndexerLimits {
        drain_ms: 200,
        ..IndexerLimits::default()
    };
    let mut sink = Indexer::start(&db, &dir, limits);
    for (r, b) in &records {
        sink.record(r, *b);
    }
    let clock = Instant::now();
    sink.finish();
    let waited = clock.elapsed();
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    assert_eq!(sink.report(), None);
    lock.execute_batch("COMMIT").unwrap();
    drop(lock);
    // The thread finishes on its own.
    let clock = Instant::now();
    let index = loop {
        if let Ok(index) = Index::open(&db)
            && index.indexed_bytes(&dir).unwrap() == Some(records.last().unwrap().1)
        {
            break index;
        }
        assert!(clock.elapsed() < Duration::from_secs(20), "never committed");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(search(&index, "drained").len(), 1);
}

/// A session whose log was cut by a power loss after its first command's call (the
/// index had read further), then written on by a resume with a new message and
/// command, its live indexing `live`; returns its folder and the index of the home,
/// read before the cut.
fn cut_and_written_on(e: &Env, live: bool) -> (PathBuf, Index) {
    let dir = e.session(
        false,
        "before the cut",
        &["echo kept-aardvark", "echo lost-axolotl"],
    );
    let mut index = e.index();
    index.update([dir.clone()]).unwrap();
    assert_eq!(brief(&index, "axolotl").len(), 2, "indexed before the cut");
    assert_eq!(term_rows(&e.home.root.join(INDEX_FILE), "axolotl"), 2);
    let records = handed(&dir);
    let (_, cut) = records
        .iter()
        .find(|(r, _)| matches!(r.event, cairn_engine::event::Event::ToolFinished(_)))
        .unwrap();
    let log = cairn_store::log_path(&dir);
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..*cut as usize]).unwrap();
    let options = ResumeOptions {
        search_index: Some(live),
        ..ResumeOptions::default()
    };
    let (mut r, _) = Engine::resume(&e.home, &dir, options).unwrap();
    r.set_approver(Box::new(Policy::AllowAll));
    r.user_message("after the cut: wombat").unwrap();
    r.call("shell", json!({ "command": "echo new-numbat" }))
        .unwrap();
    r.end("done").unwrap();
    (dir, index)
}

/// The rows of the index at `db` whose terms hold `term`, whatever documents remain:
/// a dropped document's terms must go with it.
fn term_rows(db: &Path, term: &str) -> u64 {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM docs_fts WHERE docs_fts MATCH ?1",
            [format!("\"{term}\"")],
            |r| r.get(0),
        )
        .unwrap()
}

/// What a whole read of session `dir`'s log indexes, in a new index file.
fn whole_read(e: &Env, dir: &Path, name: &str) -> Vec<DocRow> {
    let db = e.tmp.path().join(name);
    Index::open(&db)
        .unwrap()
        .update([dir.to_path_buf()])
        .unwrap();
    all_docs(&db)
}

// A log that no longer holds the record indexed last (cut by a power loss, then
// written on) is indexed again from its start by the catch-up: nothing of the lost
// records is found, everything of the new ones is, as a whole read of the log finds.
#[test]
fn a_catch_up_indexes_a_log_cut_and_written_on_again_from_its_start() {
    let e = env();
    let (dir, mut index) = cut_and_written_on(&e, false);
    index.update([dir.clone()]).unwrap();
    assert_eq!(brief(&index, "axolotl"), vec![]);
    assert_eq!(term_rows(&e.home.root.join(INDEX_FILE), "axolotl"), 0);
    assert_eq!(brief(&index, "kept-aardvark").len(), 2);
    assert!(!brief(&index, "numbat").is_empty());
    assert!(!brief(&index, "wombat").is_empty());
    assert_eq!(
        all_docs(&e.home.root.join(INDEX_FILE)),
        whole_read(&e, &dir, "whole.db")
    );
}

// The same when the resumed writer's own indexer meets the index's stale position:
// the records it is handed start before it, and the log no longer holds the record
// indexed last.
#[test]
fn the_live_indexer_of_a_log_cut_and_written_on_indexes_it_again_from_its_start() {
    let e = env();
    let (dir, index) = cut_and_written_on(&e, true);
    assert_eq!(brief(&index, "axolotl"), vec![]);
    assert_eq!(term_rows(&e.home.root.join(INDEX_FILE), "axolotl"), 0);
    assert!(!brief(&index, "numbat").is_empty());
    assert_eq!(
        all_docs(&e.home.root.join(INDEX_FILE)),
        whole_read(&e, &dir, "whole.db")
    );
}

// An index brought forward from layout 4 keeps no last hash (and a damaged one does not
// read): whether the log still holds what was indexed is unknown, so the session is
// indexed again from its start, here of a log cut and written on before the upgrade.
#[test]
fn a_position_with_no_last_hash_or_one_that_does_not_read_is_indexed_again() {
    for last_hash in [None, Some("not a hash")] {
        let e = env();
        let (dir, mut index) = cut_and_written_on(&e, false);
        let db = e.home.root.join(INDEX_FILE);
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute("UPDATE sessions SET last_hash = ?1", [last_hash])
            .unwrap();
        index.update([dir.clone()]).unwrap();
        assert_eq!(term_rows(&db, "axolotl"), 0, "{last_hash:?}");
        assert_eq!(
            all_docs(&db),
            whole_read(&e, &dir, "whole.db"),
            "{last_hash:?}"
        );
    }
}
