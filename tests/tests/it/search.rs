//! `cairn search`'s two backends over real sessions recorded by the engine: what is
//! findable (user messages, model text, call inputs and outputs, capped outputs from
//! their blobs), what is not (a secret by its raw value), filters, incremental catch-up
//! after a log grew, and the embedded index and a throw-away PostgreSQL cluster giving
//! the same hits for the same queries.

use std::path::{Path, PathBuf};

use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Engine, EngineConfig, Home, ResumeOptions};
use cairn_search::sqlite::Index;
use cairn_search::{Filter, Hit, Kind, Query, SessionDocs};
use cairn_store::Durability;
use serde_json::json;

fn config() -> EngineConfig {
    let mut c = EngineConfig::new(Catalog::Thoth);
    c.durability = Durability::None;
    c
}

/// A session in `ws`: a message, a shell call per command; returns its folder.
fn session(home: &Home, ws: &Path, message: &str, commands: &[&str]) -> PathBuf {
    session_with(home, ws, config(), message, commands)
}

/// [`session`] with the engine's configuration `config`.
pub(crate) fn session_with(
    home: &Home,
    ws: &Path,
    config: EngineConfig,
    message: &str,
    commands: &[&str],
) -> PathBuf {
    let mut e = Engine::start(home, ws, config).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e.user_message(message).unwrap();
    for c in commands {
        e.call("shell", json!({ "command": c })).unwrap();
    }
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    dir
}

fn dirs(home: &Home) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for p in home.projects() {
        for id in p.sessions() {
            v.push(p.session_dir(&id));
        }
    }
    v
}

fn search(index: &Index, q: &str, f: &Filter) -> Vec<Hit> {
    index.search(&Query::parse(q).unwrap(), f).unwrap()
}

fn brief(hits: &[Hit]) -> Vec<(String, Kind, Option<String>, String)> {
    hits.iter()
        .map(|h| (h.short.clone(), h.kind, h.tool.clone(), h.snippet.clone()))
        .collect()
}

struct Corpus {
    home_dir: tempfile::TempDir,
    _ws: Vec<tempfile::TempDir>,
    a: PathBuf,
    b: PathBuf,
}

fn corpus() -> Corpus {
    let home_dir = tempfile::tempdir().unwrap();
    let home = Home::at(home_dir.path());
    let ws1 = tempfile::tempdir().unwrap();
    let ws2 = tempfile::tempdir().unwrap();
    let secret = format!("ghp_{}", "Ab1".repeat(12));
    let a = session(
        &home,
        ws1.path(),
        "please run the unit tests, Ünïcode café",
        &[
            "echo 'cargo test: 12 passed' ; echo naïve-résumé x.y@example.org",
            &format!("echo token {secret}"),
        ],
    );
    // Session ids begin with their start time: b is newer than a.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let b = session(
        &home,
        ws2.path(),
        "deploy the unit to staging",
        &["echo tests passed on staging; printf 'a%.0s' $(seq 70000)"],
    );
    Corpus {
        home_dir,
        _ws: vec![ws1, ws2],
        a,
        b,
    }
}

fn short_of(dir: &Path) -> String {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    cairn_search::short(&name).to_string()
}

#[test]
fn search_finds_messages_inputs_and_outputs_and_filters_them() {
    let c = corpus();
    let home = Home::at(c.home_dir.path());
    let mut index = Index::open(&c.home_dir.path().join("search.db")).unwrap();
    let up = index.update(dirs(&home)).unwrap();
    assert_eq!((up.sessions, up.problems.len()), (2, 0));
    let all = Filter::default();
    let (a, b) = (short_of(&c.a), short_of(&c.b));
    // Words are ANDed; newest session first.
    let hits = search(&index, "unit", &all);
    assert_eq!(
        brief(&hits),
        vec![
            (
                b.clone(),
                Kind::User,
                None,
                "deploy the **unit** to staging".into()
            ),
            (
                a.clone(),
                Kind::User,
                None,
                "please run the **unit** tests, Ünïcode café".into()
            ),
        ]
    );
    // A phrase in order, in an output; the input holds it too.
    let hits = search(&index, "\"12 passed\"", &all);
    let kinds: Vec<Kind> = hits.iter().map(|h| h.kind).collect();
    assert_eq!(kinds, vec![Kind::Input, Kind::Output]);
    assert!(
        hits[1].snippet.contains("cargo test: **12 passed**"),
        "{}",
        hits[1].snippet
    );
    assert!(search(&index, "\"passed 12\"", &all).is_empty());
    // Prefixes; unicode lower-cased, accents kept.
    assert_eq!(search(&index, "stag*", &all).len(), 3);
    assert_eq!(search(&index, "ünïcode", &all).len(), 1);
    assert!(search(&index, "unicode", &all).is_empty());
    assert_eq!(search(&index, "résumé", &all).len(), 2);
    // Filters: tool, project (by workspace), since.
    let shell = Filter {
        tool: Some("shell".into()),
        ..Filter::default()
    };
    assert!(search(&index, "unit", &shell).is_empty());
    assert_eq!(search(&index, "staging", &shell).len(), 2);
    let ws_a = cairn_search::SessionDocs::read(&c.a)
        .unwrap()
        .session
        .workspace;
    let only_a = Filter {
        project: Some(ws_a),
        ..Filter::default()
    };
    assert_eq!(brief(&search(&index, "unit", &only_a)).len(), 1);
    let later = Filter {
        since_us: Some(cairn_search::since("2999-01-01").unwrap()),
        ..Filter::default()
    };
    assert!(search(&index, "unit", &later).is_empty());
    // The limit.
    let one = Filter {
        limit: 1,
        ..Filter::default()
    };
    assert_eq!(brief(&search(&index, "unit", &one))[0].0, b);
}

#[test]
fn a_redacted_secret_is_not_findable_by_its_raw_value() {
    let c = corpus();
    let home = Home::at(c.home_dir.path());
    let mut index = Index::open(&c.home_dir.path().join("search.db")).unwrap();
    index.update(dirs(&home)).unwrap();
    let secret = format!("ghp_{}", "Ab1".repeat(12));
    assert!(search(&index, &secret, &Filter::default()).is_empty());
    assert!(search(&index, "ab1ab1*", &Filter::default()).is_empty());
    let hits = search(&index, "redacted github_token", &Filter::default());
    assert_eq!(hits.len(), 2, "{hits:?}");
}

#[test]
fn a_capped_output_is_searched_from_its_blob_up_to_the_document_limit() {
    let c = corpus();
    let docs = SessionDocs::read(&c.b).unwrap();
    let out = docs.docs.iter().find(|d| d.kind == Kind::Output).unwrap();

    // 70,000 bytes of output: more than the model was shown, cut at the limit.
    assert_eq!(out.text.len(), cairn_search::SEARCH_DOC_BYTES_MAX);
    assert!(out.text.starts_with("tests passed on staging"));
}

#[test]
fn the_index_catches_up_on_a_session_that_grew() {
    let home_dir = tempfile::tempdir().unwrap();
    let home = Home::at(home_dir.path());
    let ws = tempfile::tempdir().unwrap();
    let mut e = Engine::start(&home, ws.path(), config()).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e.user_message("first words").unwrap();
    let dir = e.dir().to_path_buf();
    let mut index = Index::open(&home_dir.path().join("search.db")).unwrap();
    assert_eq!(index.update_session(&dir).unwrap(), 1);
    let first = index.indexed_to(&dir).unwrap();
    // Unchanged log: nothing read.
    assert_eq!(index.update_session(&dir).unwrap(), 0);
    e.call("shell", json!({ "command": "echo later-output" }))
        .unwrap();
    e.end("done").unwrap();
    assert_eq!(index.update_session(&dir).unwrap(), 2);
    assert!(index.indexed_to(&dir).unwrap() > first);
    let hits = search(&index, "later output", &Filter::default());
    // The output found its tool through the input indexed in the same pass.
    assert_eq!(
        hits.iter()
            .map(|h| (h.kind, h.tool.clone()))
            .collect::<Vec<_>>(),
        vec![
            (Kind::Input, Some("shell".into())),
            (Kind::Output, Some("shell".into()))
        ]
    );
    assert_eq!(search(&index, "first", &Filter::default()).len(), 1);
}

// The catch-up `cairn search` runs lists the home's folders and stats each log once:
// a session written after the last update, and one that grew, are still found, and
// a folder or a file that is no session is passed over without a problem.
#[test]
fn a_catch_up_over_the_home_listing_finds_new_and_grown_sessions() {
    let home_dir = tempfile::tempdir().unwrap();
    let home = Home::at(home_dir.path());
    let ws = tempfile::tempdir().unwrap();
    let first = session(&home, ws.path(), "alpha words", &[]);
    let sessions = first.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(sessions.join("not-a-session")).unwrap();
    std::fs::write(sessions.join("stray-file"), "x").unwrap();
    let listed = |home: &Home| {
        let mut v = cairn_search::sqlite::home_session_dirs(&home.root);
        v.sort();
        v
    };
    assert_eq!(listed(&home).len(), 3);
    let mut index = Index::open(&home_dir.path().join("search.db")).unwrap();
    let up = index.update(listed(&home)).unwrap();
    assert_eq!((up.sessions, up.problems), (1, vec![]));
    // Up to date: nothing read.
    assert_eq!(index.update(listed(&home)).unwrap().sessions, 0);
    let ws2 = tempfile::tempdir().unwrap();
    let second = session(&home, ws2.path(), "bravo words", &[]);
    let (mut e, _) = Engine::resume(&home, &first, ResumeOptions::default()).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e.user_message("charlie words").unwrap();
    e.end("done").unwrap();
    let up = index.update(listed(&home)).unwrap();
    assert_eq!((up.sessions, up.docs, up.problems), (2, 2, vec![]));
    let found = |q: &str| {
        search(&index, q, &Filter::default())
            .iter()
            .map(|h| h.session.clone())
            .collect::<Vec<_>>()
    };
    let id = |d: &Path| d.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(found("bravo"), vec![id(&second)]);
    assert_eq!(found("charlie"), vec![id(&first)]);
    assert_eq!(found("words").len(), 3);
}

#[test]
fn both_backends_give_the_same_hits() {
    let c = corpus();
    let home = Home::at(c.home_dir.path());
    // Sessions sharing a start millisecond, and one whose id is no time: both order
    // them by the same key, then by id.
    for id in [
        "20261201T000000.000900-cccccc",
        "20261201T000000.000100-aaaaaa",
        "not-a-time-eeeeee",
    ] {
        copy_as(&c.a, id);
    }
    let mut index = Index::open(&c.home_dir.path().join("search.db")).unwrap();
    index.update(dirs(&home)).unwrap();
    let pg = cairn_tests::pg::Cluster::start();
    let url = pg.create_db("search");
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    cairn_search::pg::ensure_schema(&mut client).unwrap();
    for d in dirs(&home) {
        let docs = SessionDocs::read(&d).unwrap();
        let n = cairn_search::pg::index_session(&mut client, &docs).unwrap();
        assert!(n > 0);
        // Again: nothing new.
        assert_eq!(
            cairn_search::pg::index_session(&mut client, &docs).unwrap(),
            0
        );
    }
    let ws_a = SessionDocs::read(&c.a).unwrap().session.workspace;
    let filters = [
        Filter::default(),
        Filter {
            tool: Some("shell".into()),
            ..Filter::default()
        },
        Filter {
            project: Some(ws_a),
            ..Filter::default()
        },
        Filter {
            since_us: Some(cairn_search::since("2999-01-01").unwrap()),
            ..Filter::default()
        },
        Filter {
            limit: 1,
            ..Filter::default()
        },
    ];
    let queries = [
        "unit",
        "unit tests",
        "\"unit tests\"",
        "\"tests unit\"",
        "stag*",
        // Prefixes of every length: 1 and 5+ characters have no list of their own
        // (FTS5 merges the words'), 2-4 have one; multi-byte characters count once.
        "s*",
        "st*",
        "sta*",
        "stagi*",
        "staging*",
        "un*",
        "unit*",
        "naïv*",
        "naïve*",
        "résum*",
        "exam*",
        "examp*",
        "\"cargo te\"*",
        "Ünïcode",
        "CAFÉ",
        "naïve-résumé",
        "x.y@example.org",
        "echo token",
        "redacted",
        "12",
        "aaaa*",
        "nothing-like-this",
    ];
    let mut compared = 0;
    for q in queries {
        for f in &filters {
            let query = Query::parse(q).unwrap();
            let local = index.search(&query, f).unwrap();
            let archive = cairn_search::pg::search(&mut client, &query, f).unwrap();
            assert_eq!(local, archive, "query {q:?} filter {f:?}");
            compared += usize::from(!local.is_empty());
        }
    }
    // Not all empty: the comparison compared hits.
    assert!(compared > 20, "{compared}");
}

/// A copy of the session in `src` under id `id`, beside it: the same events, the id in
/// `session_started` replaced, each record chained again.
fn copy_as(src: &Path, id: &str) -> PathBuf {
    let dir = src.parent().unwrap().join(id);
    let mut log = cairn_store::LogWriter::create(&dir, cairn_store::Options::default()).unwrap();
    for r in cairn_store::LogReader::open(src)
        .unwrap()
        .records()
        .unwrap()
    {
        let r = r.unwrap();
        let mut ev: serde_json::Value = serde_json::from_str(r.event.get()).unwrap();
        if ev["type"] == "session_started" {
            ev["id"] = json!(id);
        }
        log.append_at(&r.ts, &ev).unwrap();
    }
    log.sync().unwrap();
    dir
}

// Regression guard: the embedded index hands out documents by rowid, ordered by the
// start millisecond of their session; sessions sharing one must still come in the
// order of their ids, and a limit must cut that order, not the rowid order.
#[test]
fn sessions_started_in_one_millisecond_keep_the_order_of_their_ids() {
    let home_dir = tempfile::tempdir().unwrap();
    let home = Home::at(home_dir.path());
    let ws = tempfile::tempdir().unwrap();
    let mut e = Engine::start(&home, ws.path(), config()).unwrap();
    e.user_message("marker one").unwrap();
    e.user_message("marker two").unwrap();
    let src = e.dir().to_path_buf();
    e.end("done").unwrap();
    // a, b and c share the millisecond 2026-12-01T00:00:00.000; d is the next one; e
    // does not begin with a time and comes last.
    let ids = [
        "20261201T000000.000900-cccccc",
        "20261201T000000.000100-aaaaaa",
        "20261201T000000.001000-dddddd",
        "not-a-time-eeeeee",
        "20261201T000000.000200-bbbbbb",
    ];
    let dirs: Vec<PathBuf> = ids.iter().map(|id| copy_as(&src, id)).collect();
    let mut index = Index::open(&home_dir.path().join("search.db")).unwrap();
    // Indexed in this scrambled order, the template last (it is the newest).
    for d in dirs.iter().chain([&src]) {
        assert_eq!(index.update_session(d).unwrap(), 2, "{}", d.display());
    }
    let want: Vec<(String, u64)> = [
        (short_of(&src).as_str(), 1),
        (short_of(&src).as_str(), 2),
        ("dddddd", 1),
        ("dddddd", 2),
        ("cccccc", 1),
        ("cccccc", 2),
        ("bbbbbb", 1),
        ("bbbbbb", 2),
        ("aaaaaa", 1),
        ("aaaaaa", 2),
        ("eeeeee", 1),
        ("eeeeee", 2),
    ]
    .iter()
    .map(|(s, q)| (s.to_string(), *q))
    .collect();
    for limit in 1..=want.len() as u32 + 1 {
        for q in ["marker", "mark*", "\"marker t\"*"] {
            let f = Filter {
                limit,
                ..Filter::default()
            };
            let got: Vec<(String, u64)> = search(&index, q, &f)
                .iter()
                .map(|h| (h.short.clone(), h.seq))
                .collect();
            let n = (limit as usize).min(want.len());
            let expected: Vec<_> = if q.contains('"') {
                // Only "marker two" (seq 2) of each session.
                want.iter()
                    .filter(|w| w.1 == 2)
                    .take(limit as usize)
                    .cloned()
                    .collect()
            } else {
                want[..n].to_vec()
            };
            assert_eq!(got, expected, "query {q} limit {limit}");
        }
    }
}

/// An archive indexed before documents carried `session_key` gets the column, filled
/// from each session's id, when a newer cairn first opens it; nothing is lost.
#[test]
fn an_archive_index_without_session_keys_gets_them_filled_from_the_ids() {
    let pg = cairn_tests::pg::Cluster::start();
    let url = pg.create_db("old_index");
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client
        .batch_execute(
            "CREATE TABLE search_sessions (session_id TEXT PRIMARY KEY, project TEXT NOT NULL,
                 workspace TEXT NOT NULL, next_seq BIGINT NOT NULL);
             CREATE TABLE search_docs (session_id TEXT NOT NULL, project TEXT NOT NULL,
                 workspace TEXT NOT NULL, seq BIGINT NOT NULL, call TEXT, tool TEXT,
                 kind TEXT NOT NULL, ts TEXT NOT NULL, ts_us BIGINT NOT NULL,
                 body TEXT NOT NULL, terms TSVECTOR NOT NULL, PRIMARY KEY (session_id, seq));
             INSERT INTO search_docs VALUES
                 ('20261201T000000.000900-cccccc', 'p', '/w', 1, NULL, NULL, 'user', 't', 0,
                  'hello', array_to_tsvector('{hello}')),
                 ('20261201T000000.000900-cccccc', 'p', '/w', 2, NULL, NULL, 'user', 't', 0,
                  'again', array_to_tsvector('{again}')),
                 ('not-a-time-eeeeee', 'p', '/w', 1, NULL, NULL, 'user', 't', 0,
                  'hello', array_to_tsvector('{hello}'));",
        )
        .unwrap();
    cairn_search::pg::ensure_schema(&mut client).unwrap();
    // Twice: the second finds the column and changes nothing.
    cairn_search::pg::ensure_schema(&mut client).unwrap();
    let rows = client
        .query(
            "SELECT session_id, seq, session_key FROM search_docs ORDER BY session_id, seq",
            &[],
        )
        .unwrap();
    let got: Vec<(String, i64, i64)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let timed = cairn_search::session_key("20261201T000000.000900-cccccc");
    assert_ne!(timed, 0, "a time-shaped id has a key");
    assert_eq!(
        got,
        vec![
            ("20261201T000000.000900-cccccc".to_string(), 1, timed),
            ("20261201T000000.000900-cccccc".to_string(), 2, timed),
            ("not-a-time-eeeeee".to_string(), 1, 0),
        ]
    );
    let nullable: String = client
        .query_one(
            "SELECT is_nullable FROM information_schema.columns
             WHERE table_name = 'search_docs' AND column_name = 'session_key'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(nullable, "NO");
}
