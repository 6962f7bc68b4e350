//! The file tools of the engine, driven through `Engine::call` in temporary workspaces:
//! the read-before-write rules, the exact content left on disk, every limit at and past
//! its boundary, bad input (answered as the call's result, with nothing on disk changed)
//! and the records each call leaves in the session log.
//!
//! Outputs are compared whole. Every test ends with `check_log`, which checks the
//! structure of the whole log (each call a `tool_started` … `tool_finished` pair, each
//! write an `intent` then `ok`/`failed` naming blobs that exist) and that folding the log
//! gives the live state.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use cairn_engine::event::{
    Event, FileRead, FileWrite, Refusal, Rule, Status, ToolFinished, WriteOp, WriteStatus,
};
use cairn_engine::{Catalog, Engine, EngineConfig, Home, Limits};
use cairn_store::{BlobRef, BlobStore, Durability, Hash, LogReader};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Workspaces

/// A temporary folder holding a workspace (`ws`), a cairn home (`home`) and a folder
/// outside the workspace (`outside`) that symlinks and `..` try to reach.
struct Ws {
    _tmp: tempfile::TempDir,
    home: Home,
    root: PathBuf,
    outside: PathBuf,
}

/// A temporary folder on a RAM disk when there is one: the tools sync every install.
fn tempdir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(t) = tempfile::tempdir_in(shm)
    {
        return t;
    }
    tempfile::tempdir().unwrap()
}

/// A workspace holding `files` (path, content).
fn ws(files: &[(&str, &str)]) -> Ws {
    let tmp = tempdir();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "outside\n").unwrap();
    let w = Ws {
        home: Home::at(&base.join("home")),
        _tmp: tmp,
        root,
        outside,
    };
    for (path, content) in files {
        w.put(path, content);
    }
    w
}

impl Ws {
    fn engine(&self, catalog: Catalog) -> Engine {
        self.engine_with(catalog, |_| {})
    }

    /// An engine whose limits `f` adjusted.
    fn engine_with(&self, catalog: Catalog, f: impl FnOnce(&mut Limits)) -> Engine {
        let mut cfg = EngineConfig::new(catalog);
        cfg.durability = Durability::None;
        f(&mut cfg.limits);
        Engine::start(&self.home, &self.root, cfg).unwrap()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes a file behind the engine's back (as a person or another program would).
    fn put(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    fn get(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).unwrap()
    }

    fn text(&self, rel: &str) -> String {
        String::from_utf8(self.get(rel)).unwrap()
    }

    fn mode(&self, rel: &str) -> u32 {
        std::fs::metadata(self.path(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    fn chmod(&self, rel: &str, mode: u32) {
        std::fs::set_permissions(self.path(rel), std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn link(&self, rel: &str, target: impl AsRef<Path>) {
        std::os::unix::fs::symlink(target, self.path(rel)).unwrap();
    }

    /// Everything in the workspace and the outside folder: what a refused call must not
    /// change.
    fn tree(&self) -> BTreeMap<PathBuf, Node> {
        let mut out = BTreeMap::new();
        walk(&self.root, &mut out);
        walk(&self.outside, &mut out);
        out
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File(Vec<u8>, u32),
    Dir(u32),
    Link(PathBuf),
}

fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Node>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        if meta.file_type().is_symlink() {
            out.insert(p.clone(), Node::Link(std::fs::read_link(&p).unwrap()));
        } else if meta.is_dir() {
            out.insert(p.clone(), Node::Dir(mode));
            walk(&p, out);
        } else {
            out.insert(p.clone(), Node::File(std::fs::read(&p).unwrap(), mode));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Calls and their expected results

/// What a call gave back, without its id.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Got {
    status: Status,
    output: String,
    refusal: Option<Refusal>,
}

fn ok(text: impl Into<String>) -> Got {
    Got {
        status: Status::Ok,
        output: text.into(),
        refusal: None,
    }
}

fn err(text: impl Into<String>) -> Got {
    Got {
        status: Status::Error,
        output: text.into(),
        refusal: None,
    }
}

fn refused(rule: Rule, path: Option<&str>, observed: Option<Hash>, text: impl Into<String>) -> Got {
    Got {
        status: if rule == Rule::Repeat {
            Status::Blocked
        } else {
            Status::Error
        },
        output: text.into(),
        refusal: Some(Refusal {
            rule,
            path: path.map(str::to_string),
            observed,
        }),
    }
}

fn bad_input(text: impl Into<String>) -> Got {
    refused(Rule::Input, None, None, text)
}

/// The repeat block of a call whose answer depends on `path` alone, which holds
/// `content` as it did at the identical calls before.
fn blocked(tool: &str, times: u32, path: &str, content: &str) -> Got {
    refused(
        Rule::Repeat,
        Some(path),
        Some(hash(content)),
        format!(
            "blocked: this exact {tool} call was already made {times} times and returned the same result: {path} has not changed since; use the result you have, or change the input"
        ),
    )
}

/// Runs one call, and checks that the last record of the log is its `tool_finished`
/// carrying exactly what the call returned.
fn run(e: &mut Engine, tool: &str, input: Value) -> Got {
    let out = e.call(tool, input).unwrap();
    assert_eq!(out.tool, tool);
    let last = events(e).pop().unwrap();
    let Event::ToolFinished(f) = last else {
        panic!("the last record is not tool_finished: {last:?}");
    };
    assert_eq!(
        (&f.call, f.status, &f.output, &f.refusal),
        (&out.call, out.status, &out.output, &out.refusal)
    );
    Got {
        status: out.status,
        output: out.output,
        refusal: out.refusal,
    }
}

fn hash(bytes: impl AsRef<[u8]>) -> Hash {
    Hash::of(bytes.as_ref())
}

/// Lines `a..=b` of `text` as the read tools number them.
fn numbered(text: &str, a: u32, b: u32) -> String {
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n')
        .enumerate()
        .map(|(i, l)| (i as u32 + 1, l))
        .filter(|(n, _)| (a..=b).contains(n))
        .map(|(n, l)| format!("{n:>6}\t{}\n", l.trim_end_matches('\r')))
        .collect()
}

/// A whole read of lines `a..=b` of a file of `total` lines, ending the file.
fn read_to_end(text: &str, a: u32, b: u32, total: u32) -> String {
    format!(
        "{}(lines {a}-{b} of {total}, end of file)\nhash: {}",
        numbered(text, a, b),
        hash(text)
    )
}

/// A read of lines `a..=b` of `total`, telling how to read on with `on` (`offset` or
/// `start_line`).
fn read_part(text: &str, a: u32, b: u32, total: u32, on: &str) -> String {
    format!(
        "{}(lines {a}-{b} of {total}; read on with {on}={})\nhash: {}",
        numbered(text, a, b),
        b + 1,
        hash(text)
    )
}

/// The answer of a successful write: summary, new hash, diff.
fn wrote(summary: &str, path: &str, before: &str, after: &str) -> String {
    format!(
        "{summary}\nhash: {}\n{}",
        hash(after),
        cairn_engine::diff::unified(path, Some(before), after, 120)
    )
}

/// The answer for a path that names nothing in workspace `w`.
fn missing(w: &Ws, rel: &str) -> String {
    format!(
        "no such file: {rel} (paths are resolved against the workspace root {}; give one relative to it, such as src/main.rs)",
        w.root.display()
    )
}

/// The answer of a write that created its file: its diff starts `--- /dev/null`.
fn created(summary: &str, path: &str, after: &str) -> String {
    format!(
        "{summary}\nhash: {}\n{}",
        hash(after),
        cairn_engine::diff::unified(path, None, after, 120)
    )
}

// ---------------------------------------------------------------------------------------
// The log

fn events(e: &Engine) -> Vec<Event> {
    let reader = LogReader::open(e.dir()).unwrap();
    reader
        .records()
        .unwrap()
        .map(|r| cairn_engine::fold::parse(&r.unwrap()).unwrap().event)
        .collect()
}

fn reads(e: &Engine) -> Vec<FileRead> {
    events(e)
        .into_iter()
        .filter_map(|ev| match ev {
            Event::FileRead(r) => Some(r),
            _ => None,
        })
        .collect()
}

fn writes(e: &Engine) -> Vec<FileWrite> {
    events(e)
        .into_iter()
        .filter_map(|ev| match ev {
            Event::FileWrite(w) => Some(w),
            _ => None,
        })
        .collect()
}

fn finished(e: &Engine) -> Vec<ToolFinished> {
    events(e)
        .into_iter()
        .filter_map(|ev| match ev {
            Event::ToolFinished(f) => Some(f),
            _ => None,
        })
        .collect()
}

/// The kinds of the records of call `call`, in order.
fn kinds_of(e: &Engine, call: &str) -> Vec<&'static str> {
    events(e)
        .into_iter()
        .filter(|ev| match ev {
            Event::ToolStarted { call: c, .. } => c == call,
            Event::ToolFinished(f) => f.call == call,
            Event::FileRead(r) => r.call == call,
            Event::FileWrite(w) => w.call.as_deref() == Some(call),
            _ => false,
        })
        .map(|ev| ev.kind())
        .collect()
}

fn blobs(e: &Engine) -> BlobStore {
    BlobStore::open(&e.project().blobs_dir()).unwrap()
}

fn blob(e: &Engine, r: &BlobRef) -> Vec<u8> {
    let bytes = blobs(e).get(&r.hash).unwrap();
    assert_eq!((hash(&bytes), bytes.len() as u64), (r.hash, r.len));
    bytes
}

/// The structure of the whole log, and the fold of the log equal to the live state.
fn check_log(e: &Engine) {
    let evs = events(e);
    assert!(matches!(evs.first(), Some(Event::SessionStarted(_))));
    let mut open: Option<String> = None;
    let mut intent: Option<FileWrite> = None;
    let mut started = 0;
    for ev in &evs {
        match ev {
            Event::ToolStarted { call, .. } => {
                assert_eq!(open, None, "{call} started inside another call");
                open = Some(call.clone());
                started += 1;
            }
            Event::FileRead(r) => assert_eq!(open.as_ref(), Some(&r.call), "{r:?}"),
            Event::FileWrite(w) => {
                assert_eq!(open.as_ref(), w.call.as_ref(), "{w:?}");
                if w.status == WriteStatus::Intent {
                    assert_eq!(intent, None, "two intents in a row: {w:?}");
                    intent = Some(w.clone());
                } else {
                    let i = intent.take().expect("a write without its intent");
                    assert_eq!(
                        i,
                        FileWrite {
                            status: WriteStatus::Intent,
                            ..w.clone()
                        }
                    );
                    for b in w.before.iter().chain(w.after.iter()) {
                        blob(e, b);
                    }
                }
            }
            Event::ToolFinished(f) => {
                assert_eq!(open.take().as_ref(), Some(&f.call), "{f:?}");
                assert_eq!(intent, None, "an intent without its outcome");
                if let Some(b) = &f.output_blob {
                    blob(e, b);
                }
            }
            Event::PermissionRequested { call, .. } | Event::PermissionDecided { call, .. } => {
                assert_eq!(open.as_ref(), Some(call), "{ev:?} outside its call");
            }
            _ => assert_eq!(open, None, "{ev:?} inside a call"),
        }
    }
    assert_eq!(open, None);
    assert_eq!(e.state().calls_started, started);
    let folded = cairn_engine::fold::fold_all(e.dir()).unwrap();
    assert_eq!(folded.state, *e.state());
    assert!(folded.unknown.is_empty());
}

// ---------------------------------------------------------------------------------------
// Reading

#[test]
fn read_file_numbers_lines_pages_and_records_what_it_showed() {
    let c = "one\ntwo\nthree\nfour\nfive\n";
    let w = ws(&[
        ("a.txt", c),
        ("empty.txt", ""),
        ("crlf.txt", "x\r\ny\r\n"),
        ("nonl.txt", "a\nb"),
    ]);
    let mut e = w.engine(Catalog::Thoth);
    let h = hash(c);
    let read = |e: &mut Engine, input: Value| run(e, "read_file", input);
    assert_eq!(
        read(&mut e, json!({"path": "a.txt"})),
        ok(read_to_end(c, 1, 5, 5))
    );
    assert_eq!(
        read(&mut e, json!({"path": "a.txt", "offset": 2, "limit": 2})),
        ok(read_part(c, 2, 3, 5, "offset"))
    );
    assert_eq!(
        read(&mut e, json!({"path": "a.txt", "offset": 0, "limit": 1})),
        ok(read_part(c, 1, 1, 5, "offset"))
    );
    assert_eq!(
        read(&mut e, json!({"path": "a.txt", "offset": 5, "limit": 10})),
        ok(read_to_end(c, 5, 5, 5))
    );
    assert_eq!(
        read(&mut e, json!({"path": "a.txt", "offset": 6})),
        err("offset 6 is past the end of a.txt (5 lines)")
    );
    assert_eq!(
        read(&mut e, json!({"path": "a.txt", "limit": 0})),
        err("limit must be at least 1")
    );
    assert_eq!(
        read(&mut e, json!({"path": "empty.txt"})),
        ok(format!("(empty file)\n(0 lines)\nhash: {}", hash("")))
    );
    assert_eq!(
        read(&mut e, json!({"path": "crlf.txt"})),
        ok(format!(
            "     1\tx\n     2\ty\n(lines 1-2 of 2, end of file)\nhash: {}",
            hash("x\r\ny\r\n")
        ))
    );
    assert_eq!(
        read(&mut e, json!({"path": "./nonl.txt"})),
        ok(read_to_end("a\nb", 1, 2, 2))
    );
    let rd = |call: &str, path: &str, ranges: Vec<(u32, u32)>, total, hash| FileRead {
        call: call.into(),
        path: path.into(),
        ranges,
        total_lines: total,
        hash,
    };
    assert_eq!(
        reads(&e),
        vec![
            rd("c1", "a.txt", vec![(1, 5)], 5, h),
            rd("c2", "a.txt", vec![(2, 3)], 5, h),
            rd("c3", "a.txt", vec![(1, 1)], 5, h),
            rd("c4", "a.txt", vec![(5, 5)], 5, h),
            rd("c7", "empty.txt", vec![], 0, hash("")),
            rd("c8", "crlf.txt", vec![(1, 2)], 2, hash("x\r\ny\r\n")),
            rd("c9", "nonl.txt", vec![(1, 2)], 2, hash("a\nb")),
        ]
    );
    assert_eq!(
        kinds_of(&e, "c1"),
        ["tool_started", "file_read", "tool_finished"]
    );
    assert_eq!(kinds_of(&e, "c5"), ["tool_started", "tool_finished"]);
    let k = &e.state().files["a.txt"];
    assert_eq!(
        (k.hash, k.read_hash, k.ranges.clone(), k.total_lines),
        (Some(h.0), Some(h.0), vec![(1, 5)], 5)
    );
    check_log(&e);
}

#[test]
fn read_file_range_reads_inclusive_ranges_and_about_20_lines_by_default() {
    let c: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    let w = ws(&[("a.txt", &c), ("b.txt", "x\ny\n")]);
    let mut e = w.engine(Catalog::Thndrs);
    let read = |e: &mut Engine, input: Value| run(e, "read_file_range", input);
    assert_eq!(
        read(
            &mut e,
            json!({"path": "a.txt", "start_line": 2, "end_line": 3})
        ),
        ok(read_part(&c, 2, 3, 30, "start_line"))
    );
    assert_eq!(
        read(&mut e, json!({"path": "a.txt", "start_line": 5})),
        ok(read_part(&c, 5, 24, 30, "start_line"))
    );
    assert_eq!(
        read(&mut e, json!({"path": "a.txt", "start_line": 25})),
        ok(read_to_end(&c, 25, 30, 30))
    );
    assert_eq!(
        read(
            &mut e,
            json!({"path": "a.txt", "start_line": 30, "end_line": 30})
        ),
        ok(read_to_end(&c, 30, 30, 30))
    );
    assert_eq!(
        read(
            &mut e,
            json!({"path": "b.txt", "start_line": 1, "end_line": 100})
        ),
        ok(read_to_end("x\ny\n", 1, 2, 2))
    );
    assert_eq!(
        read(&mut e, json!({"path": "a.txt", "start_line": 0})),
        err("start_line is 1-indexed: the first line is 1")
    );
    assert_eq!(
        read(
            &mut e,
            json!({"path": "a.txt", "start_line": 3, "end_line": 2})
        ),
        err("end_line 2 is before start_line 3")
    );
    assert_eq!(
        read(&mut e, json!({"path": "a.txt", "start_line": 31})),
        err("start_line 31 is past the end of a.txt (30 lines)")
    );
    assert_eq!(
        reads(&e)
            .iter()
            .map(|r| (r.path.as_str(), r.ranges.clone()))
            .collect::<Vec<_>>(),
        vec![
            ("a.txt", vec![(2, 3)]),
            ("a.txt", vec![(5, 24)]),
            ("a.txt", vec![(25, 30)]),
            ("a.txt", vec![(30, 30)]),
            ("b.txt", vec![(1, 2)]),
        ]
    );
    assert_eq!(e.state().files["a.txt"].ranges, vec![(2, 3), (5, 30)]);
    check_log(&e);
}

#[test]
fn invalid_utf8_is_read_lossily_with_a_note_and_never_string_edited() {
    let bytes = b"caf\xe9\nok\n";
    let w = ws(&[]);
    w.put("bad.txt", bytes);
    let mut e = w.engine(Catalog::Thoth);
    assert_eq!(
        run(&mut e, "read_file", json!({"path": "bad.txt"})),
        ok(format!(
            "     1\tcaf\u{FFFD}\n     2\tok\n(the file is not valid UTF-8: invalid bytes are shown as \u{FFFD})\n(lines 1-2 of 2, end of file)\nhash: {}",
            hash(bytes)
        ))
    );
    assert_eq!(reads(&e)[0].hash, hash(bytes), "the hash is of the bytes");
    let before = w.tree();
    assert_eq!(
        run(
            &mut e,
            "edit_file",
            json!({"path": "bad.txt", "old_string": "ok", "new_string": "ko"})
        ),
        err("bad.txt is not valid UTF-8; string edits would corrupt it")
    );
    assert_eq!(w.tree(), before);
    // Every line was read: an overwrite is allowed.
    assert_eq!(
        run(
            &mut e,
            "write_file",
            json!({"path": "bad.txt", "content": "café\n"})
        ),
        ok(wrote(
            "wrote bad.txt (6 bytes)",
            "bad.txt",
            &String::from_utf8_lossy(bytes),
            "café\n"
        ))
    );
    assert_eq!(w.text("bad.txt"), "café\n");
    check_log(&e);
}

// ---------------------------------------------------------------------------------------
// Read before write

#[test]
fn an_edit_needs_a_read_at_the_current_content_and_a_partial_read_is_enough() {
    let c = "alpha\nbeta\ngamma\n";
    let w = ws(&[("a.txt", c)]);
    for (catalog, read, edit) in [
        (
            Catalog::Thoth,
            json!({"path": "a.txt", "offset": 2, "limit": 1}),
            "edit_file",
        ),
        (
            Catalog::Thndrs,
            json!({"path": "a.txt", "start_line": 2, "end_line": 2}),
            "replace_range",
        ),
    ] {
        w.put("a.txt", c);
        let read_tool = if catalog == Catalog::Thoth {
            "read_file"
        } else {
            "read_file_range"
        };
        let mut e = w.engine(catalog);
        let edit_in =
            |old: &str, new: &str| json!({"path": "a.txt", "old_string": old, "new_string": new});
        // Never read.
        let before = w.tree();
        assert_eq!(
            run(&mut e, edit, edit_in("alpha", "ALPHA")),
            refused(
                Rule::ReadBeforeEdit,
                Some("a.txt"),
                Some(hash(c)),
                "read a.txt before editing it"
            )
        );
        assert_eq!(w.tree(), before);
        // One line read (not the one edited) is enough for an edit.
        assert_eq!(run(&mut e, read_tool, read.clone()).status, Status::Ok);
        let c2 = "ALPHA\nbeta\ngamma\n";
        assert_eq!(
            run(&mut e, edit, edit_in("alpha", "ALPHA")),
            ok(wrote("edited a.txt", "a.txt", c, c2))
        );
        assert_eq!(w.text("a.txt"), c2);
        // Writing a file counts as having read it.
        let c3 = "ALPHA\nbeta\nGAMMA\n";
        assert_eq!(
            run(&mut e, edit, edit_in("gamma", "GAMMA")),
            ok(wrote("edited a.txt", "a.txt", c2, c3))
        );
        // Changed on disk since: read again.
        let c4 = "ALPHA\nbeta\nGAMMA\ndelta\n";
        w.put("a.txt", c4);
        let before = w.tree();
        assert_eq!(
            run(&mut e, edit, edit_in("beta", "BETA")),
            refused(
                Rule::ReadBeforeEdit,
                Some("a.txt"),
                Some(hash(c4)),
                "a.txt changed since you last read it; read it again before editing"
            )
        );
        assert_eq!(w.tree(), before);
        assert_eq!(run(&mut e, read_tool, read.clone()).status, Status::Ok);
        let c5 = "ALPHA\nBETA\nGAMMA\ndelta\n";
        assert_eq!(
            run(&mut e, edit, edit_in("beta", "BETA")),
            ok(wrote("edited a.txt", "a.txt", c4, c5))
        );
        assert_eq!(w.text("a.txt"), c5);
        // Touched without a change of content: the read still holds.
        w.put("a.txt", c5);
        assert_eq!(
            run(&mut e, edit, edit_in("delta", "DELTA")).status,
            Status::Ok
        );
        check_log(&e);
    }
}

#[test]
fn write_patch_edit_follows_the_same_read_rule() {
    let c = "alpha\nbeta\n";
    let w = ws(&[("a.txt", c)]);
    let mut e = w.engine(Catalog::Thndrs);
    let patch = json!({"patches": [{"op": "edit", "path": "a.txt", "old_string": "beta", "new_string": "BETA"}]});
    assert_eq!(
        run(&mut e, "write_patch", patch.clone()),
        refused(
            Rule::ReadBeforeEdit,
            Some("a.txt"),
            Some(hash(c)),
            "read a.txt before editing it"
        )
    );
    run(
        &mut e,
        "read_file_range",
        json!({"path": "a.txt", "start_line": 1, "end_line": 1}),
    );
    w.put("a.txt", "alpha\nbeta\ngamma\n");
    assert_eq!(
        run(&mut e, "write_patch", patch.clone()),
        refused(
            Rule::ReadBeforeEdit,
            Some("a.txt"),
            Some(hash("alpha\nbeta\ngamma\n")),
            "a.txt changed since you last read it; read it again before editing"
        )
    );
    assert_eq!(w.text("a.txt"), "alpha\nbeta\ngamma\n");
    run(
        &mut e,
        "read_file_range",
        json!({"path": "a.txt", "start_line": 3}),
    );
    // The same edit a third time: allowed, since the file changed since the second.
    let patch = json!({"patches": [{"op": "edit", "path": "a.txt", "old_string": "beta", "new_string": "BETA", "expected_before_hash": hash("alpha\nbeta\ngamma\n").to_hex()}]});
    assert_eq!(
        run(&mut e, "write_patch", patch),
        ok(wrote(
            "edited a.txt (1 edits)",
            "a.txt",
            "alpha\nbeta\ngamma\n",
            "alpha\nBETA\ngamma\n"
        ))
    );
    check_log(&e);
}

/// An overwrite of `a.txt` (7 lines) through `tool` is refused until every line was read,
/// and the refusal names exactly the lines not read.
fn check_overwrite_needs_every_line(
    catalog: Catalog,
    read: fn(u32, u32) -> (&'static str, Value),
    overwrite: fn(&str) -> (&'static str, Value),
    summary: &str,
) {
    let c = "1\n2\n3\n4\n5\n6\n7\n";
    let w = ws(&[("a.txt", c)]);
    let mut e = w.engine(catalog);
    let before = w.tree();
    let (tool, input) = overwrite("new\n");
    let refuse = |text: &str| {
        refused(
            Rule::ReadBeforeOverwrite,
            Some("a.txt"),
            Some(hash(c)),
            text,
        )
    };
    assert_eq!(
        run(&mut e, tool, input.clone()),
        refuse("overwriting a.txt needs every line read first; you have not read it")
    );
    for (a, b, missing) in [
        (2, 3, "1, 4-7"),
        (5, 5, "1, 4, 6-7"),
        (1, 1, "4, 6-7"),
        (7, 7, "4, 6"),
        (6, 6, "4"),
    ] {
        let (rt, ri) = read(a, b);
        assert_eq!(run(&mut e, rt, ri).status, Status::Ok);
        assert_eq!(
            run(&mut e, tool, overwrite(&format!("new {a}\n")).1),
            refuse(&format!(
                "overwriting a.txt needs every line read first; not read: lines {missing} of 7"
            ))
        );
        assert_eq!(w.tree(), before);
    }
    let (rt, ri) = read(4, 4);
    run(&mut e, rt, ri);
    assert_eq!(
        run(&mut e, tool, overwrite(c).1),
        err("no changes made: a.txt already has this content")
    );
    assert_eq!(
        run(&mut e, tool, input.clone()),
        ok(wrote(summary, "a.txt", c, "new\n"))
    );
    assert_eq!(w.text("a.txt"), "new\n");
    // Written: counts as read, so it can be overwritten again.
    assert_eq!(run(&mut e, tool, overwrite("newer\n").1).status, Status::Ok);
    // Changed on disk since: every line must be read again.
    w.put("a.txt", "other\n");
    assert_eq!(
        run(&mut e, tool, input),
        refused(
            Rule::ReadBeforeOverwrite,
            Some("a.txt"),
            Some(hash("other\n")),
            "a.txt changed since you last read it; read all of it again before overwriting"
        )
    );
    assert_eq!(w.text("a.txt"), "other\n");
    check_log(&e);
}

#[test]
fn an_overwrite_needs_every_line_read_and_lists_the_lines_missing() {
    check_overwrite_needs_every_line(
        Catalog::Thoth,
        |a, b| {
            (
                "read_file",
                json!({"path": "a.txt", "offset": a, "limit": b - a + 1}),
            )
        },
        |c| ("write_file", json!({"path": "a.txt", "content": c})),
        "wrote a.txt (4 bytes)",
    );
    check_overwrite_needs_every_line(
        Catalog::Thndrs,
        |a, b| {
            (
                "read_file_range",
                json!({"path": "a.txt", "start_line": a, "end_line": b}),
            )
        },
        |c| {
            (
                "write_patch",
                json!({"patches": [{"op": "replace", "path": "a.txt", "content": c}]}),
            )
        },
        "replaced a.txt (4 bytes)",
    );
}

#[test]
fn a_new_file_needs_no_read_and_writing_it_counts_as_reading_it() {
    let w = ws(&[]);
    let mut e = w.engine(Catalog::Thoth);
    assert_eq!(
        run(
            &mut e,
            "write_file",
            json!({"path": "n.txt", "content": "a\nb\n"})
        ),
        ok(created("created n.txt (4 bytes)", "n.txt", "a\nb\n"))
    );
    assert_eq!(w.mode("n.txt"), default_file_mode());
    let k = &e.state().files["n.txt"];
    assert_eq!(
        (k.read_hash, k.ranges.clone(), k.total_lines),
        (Some(hash("a\nb\n").0), vec![(1, 2)], 2)
    );
    assert_eq!(
        run(
            &mut e,
            "edit_file",
            json!({"path": "n.txt", "old_string": "b", "new_string": "c"})
        ),
        ok(wrote("edited n.txt", "n.txt", "a\nb\n", "a\nc\n"))
    );
    assert_eq!(
        run(
            &mut e,
            "write_file",
            json!({"path": "n.txt", "content": "z\n"})
        ),
        ok(wrote("wrote n.txt (2 bytes)", "n.txt", "a\nc\n", "z\n"))
    );
    // An empty file written is fully read too.
    assert_eq!(
        run(
            &mut e,
            "write_file",
            json!({"path": "n.txt", "content": ""})
        )
        .status,
        Status::Ok
    );
    assert_eq!(
        run(
            &mut e,
            "write_file",
            json!({"path": "n.txt", "content": "back\n"})
        )
        .status,
        Status::Ok
    );
    assert_eq!(w.text("n.txt"), "back\n");
    check_log(&e);
}

#[test]
fn a_stale_expected_before_hash_is_refused_showing_both_hashes() {
    let c = "one\ntwo\n";
    let w = ws(&[("a.txt", c)]);
    let mut e = w.engine(Catalog::Thndrs);
    run(
        &mut e,
        "read_file_range",
        json!({"path": "a.txt", "start_line": 1}),
    );
    let stale = hash("something else").to_hex();
    let stale_refusal = |path: &str, now: Option<Hash>| {
        let shown = now.map_or("none (the file does not exist)".to_string(), |h| h.to_hex());
        refused(
            Rule::StaleWrite,
            Some(path),
            now,
            format!(
                "stale write refused: {path} has hash {shown}, expected {stale}; read it again"
            ),
        )
    };
    let before = w.tree();
    assert_eq!(
        run(
            &mut e,
            "write_patch",
            json!({"patches": [{"op": "replace", "path": "a.txt", "content": "x\n", "expected_before_hash": stale}]})
        ),
        stale_refusal("a.txt", Some(hash(c)))
    );
    assert_eq!(
        run(
            &mut e,
            "write_patch",
            json!({"patches": [
                {"op": "edit", "path": "a.txt", "old_string": "one", "new_string": "1", "expected_before_hash": hash(c).to_hex()},
                {"op": "edit", "path": "a.txt", "old_string": "two", "new_string": "2", "expected_before_hash": stale},
            ]})
        ),
        stale_refusal("a.txt", Some(hash(c)))
    );
    assert_eq!(
        run(
            &mut e,
            "write_patch",
            json!({"patches": [{"op": "replace", "path": "new.txt", "content": "x\n", "expected_before_hash": stale}]})
        ),
        stale_refusal("new.txt", None)
    );
    assert_eq!(w.tree(), before);
    assert_eq!(
        run(
            &mut e,
            "write_patch",
            json!({"patches": [{"op": "edit", "path": "a.txt", "old_string": "one", "new_string": "1", "expected_before_hash": hash(c).to_hex()}]})
        ),
        ok(wrote("edited a.txt (1 edits)", "a.txt", c, "1\ntwo\n"))
    );
    assert_eq!(
        run(
            &mut e,
            "write_patch",
            json!({"patches": [{"op": "replace", "path": "a.txt", "content": "r\n", "expected_before_hash": hash("1\ntwo\n").to_hex()}]})
        ),
        ok(wrote(
            "replaced a.txt (2 bytes)",
            "a.txt",
            "1\ntwo\n",
            "r\n"
        ))
    );
    assert_eq!(w.text("a.txt"), "r\n");
    check_log(&e);
}

// ---------------------------------------------------------------------------------------
// Repeated calls

#[test]
fn the_third_identical_call_is_blocked_until_a_write_to_its_file_or_a_user_message() {
    let w = ws(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let mut e = w.engine(Catalog::Thoth);
    let read_a = json!({"path": "a.txt"});
    let a_out = ok(read_to_end("a\n", 1, 1, 1));
    assert_eq!(run(&mut e, "read_file", read_a.clone()), a_out);
    assert_eq!(run(&mut e, "read_file", read_a.clone()), a_out);
    assert_eq!(
        run(&mut e, "read_file", read_a.clone()),
        blocked("read_file", 2, "a.txt", "a\n")
    );
    assert_eq!(
        run(&mut e, "read_file", read_a.clone()),
        blocked("read_file", 3, "a.txt", "a\n")
    );
    // A blocked call did not run: no file_read.
    assert_eq!(kinds_of(&e, "c3"), ["tool_started", "tool_finished"]);
    // Another input is another call; key order does not make another input.
    assert_eq!(
        run(&mut e, "read_file", json!({"path": "a.txt", "limit": 5})).status,
        Status::Ok
    );
    let mut reordered = serde_json::Map::new();
    reordered.insert("limit".into(), json!(5));
    reordered.insert("path".into(), json!("a.txt"));
    assert_eq!(
        run(&mut e, "read_file", Value::Object(reordered.clone())).status,
        Status::Ok
    );
    assert_eq!(
        run(&mut e, "read_file", Value::Object(reordered)),
        blocked("read_file", 2, "a.txt", "a\n")
    );
    // A write to another file changes nothing for a.txt.
    assert_eq!(
        run(
            &mut e,
            "write_file",
            json!({"path": "c.txt", "content": "c\n"})
        )
        .status,
        Status::Ok
    );
    assert_eq!(
        run(&mut e, "read_file", read_a.clone()),
        blocked("read_file", 4, "a.txt", "a\n")
    );
    // A write to a.txt does.
    assert_eq!(
        run(
            &mut e,
            "edit_file",
            json!({"path": "a.txt", "old_string": "a", "new_string": "A"})
        )
        .status,
        Status::Ok
    );
    let a2 = ok(read_to_end("A\n", 1, 1, 1));
    assert_eq!(run(&mut e, "read_file", read_a.clone()), a2);
    assert_eq!(run(&mut e, "read_file", read_a.clone()), a2);
    assert_eq!(
        run(&mut e, "read_file", read_a.clone()),
        blocked("read_file", 2, "a.txt", "A\n")
    );
    // So does a user message.
    e.user_message("look again").unwrap();
    assert_eq!(run(&mut e, "read_file", read_a.clone()), a2);
    // Failing calls are counted too.
    let miss = json!({"path": "b.txt", "old_string": "zzz", "new_string": "y"});
    run(&mut e, "read_file", json!({"path": "b.txt"}));
    let miss_out = err("old_string was not found in b.txt");
    assert_eq!(run(&mut e, "edit_file", miss.clone()), miss_out);
    assert_eq!(run(&mut e, "edit_file", miss.clone()), miss_out);
    assert_eq!(
        run(&mut e, "edit_file", miss),
        blocked("edit_file", 2, "b.txt", "b\n")
    );
    assert_eq!(e.state().calls_by_status["blocked"], 6);
    check_log(&e);
}

#[test]
fn a_write_unblocks_calls_that_named_its_file_by_another_spelling() {
    let w = ws(&[("a.txt", "a\n"), ("sub/x.txt", "x\n")]);
    let mut e = w.engine(Catalog::Thoth);
    for path in ["./a.txt", "sub/../a.txt", "sub//../a.txt"] {
        let input = json!({"path": path});
        run(&mut e, "read_file", input.clone());
        run(&mut e, "read_file", input.clone());
        assert_eq!(
            run(&mut e, "read_file", input.clone()),
            blocked("read_file", 2, "a.txt", "a\n")
        );
    }
    let a = e.root().join("a.txt");
    let abs = json!({"path": a.to_str().unwrap()});
    run(&mut e, "read_file", abs.clone());
    run(&mut e, "read_file", abs.clone());
    assert_eq!(
        run(&mut e, "read_file", abs.clone()),
        blocked("read_file", 2, "a.txt", "a\n")
    );
    run(
        &mut e,
        "edit_file",
        json!({"path": "a.txt", "old_string": "a", "new_string": "b"}),
    );
    for path in ["./a.txt", "sub/../a.txt", "sub//../a.txt"] {
        assert_eq!(
            run(&mut e, "read_file", json!({"path": path})),
            ok(read_to_end("b\n", 1, 1, 1)),
            "{path}"
        );
    }
    assert_eq!(
        run(&mut e, "read_file", abs),
        ok(read_to_end("b\n", 1, 1, 1))
    );
    check_log(&e);
}

// ---------------------------------------------------------------------------------------
// Repeated calls after a change no record announced

/// Waits until `rel` holds `text` (a background process writes it).
fn wait_for(w: &Ws, rel: &str, text: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(w.path(rel)).ok().as_deref() != Some(text) {
        assert!(
            std::time::Instant::now() < deadline,
            "{rel} never held {text:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn a_read_of_a_file_a_background_process_changed_is_not_blocked() {
    let w = ws(&[("a.txt", "a\n")]);
    let mut e = w.engine(Catalog::Thoth);
    e.set_approver(Box::new(cairn_engine::permission::Policy::AllowAll));
    let read_a = json!({"path": "a.txt"});
    let a = ok(read_to_end("a\n", 1, 1, 1));
    assert_eq!(run(&mut e, "read_file", read_a.clone()), a);
    assert_eq!(run(&mut e, "read_file", read_a.clone()), a);
    // The process changes a.txt and runs on: no record shows the change.
    let out = e
        .call(
            "shell",
            json!({"command": "printf 'b\\n' > a.txt; exec sleep 30", "background": true}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    wait_for(&w, "a.txt", "b\n");
    // A third identical read finds other content: it is not blocked, and counts afresh.
    let b = ok(read_to_end("b\n", 1, 1, 1));
    assert_eq!(run(&mut e, "read_file", read_a.clone()), b);
    assert_eq!(run(&mut e, "read_file", read_a.clone()), b);
    // Unchanged since: blocked, saying so, with the content it found.
    assert_eq!(
        run(&mut e, "read_file", read_a.clone()),
        blocked("read_file", 2, "a.txt", "b\n")
    );
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_read_of_a_file_changed_outside_cairn_is_not_blocked() {
    let w = ws(&[("a.txt", "a\n")]);
    let mut e = w.engine(Catalog::Thoth);
    let read_a = json!({"path": "a.txt", "limit": 5});
    run(&mut e, "read_file", read_a.clone());
    run(&mut e, "read_file", read_a.clone());
    // An editor, say: no record at all.
    w.put("a.txt", "c\n");
    let c = ok(read_to_end("c\n", 1, 1, 1));
    assert_eq!(run(&mut e, "read_file", read_a.clone()), c);
    // Deleted outside cairn: the answer differs again. The first read after it is
    // under the limit (nothing looks at the file, nothing records the deletion); the
    // second finds the file gone, and counts afresh from there.
    std::fs::remove_file(w.path("a.txt")).unwrap();
    for _ in 0..3 {
        assert_eq!(
            run(&mut e, "read_file", read_a.clone()),
            err(format!(
                "no such file: a.txt (paths are resolved against the workspace root {}; give one relative to it, such as src/main.rs)",
                w.root.display()
            ))
        );
    }
    assert_eq!(
        run(&mut e, "read_file", read_a.clone()),
        refused(
            Rule::Repeat,
            Some("a.txt"),
            None,
            "blocked: this exact read_file call was already made 2 times and returned the same result: a.txt is still not a file that can be read; use the result you have, or change the input",
        )
    );
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_search_is_not_blocked_while_a_background_process_runs() {
    let w = ws(&[("a.txt", "a\n")]);
    let mut e = w.engine(Catalog::Thoth);
    e.set_approver(Box::new(cairn_engine::permission::Policy::AllowAll));
    let grep = json!({"pattern": "zzz"});
    let tree_blocked = refused(
        Rule::Repeat,
        None,
        None,
        "blocked: this exact grep call was already made 2 times, and since then this session saw no write, no command and no background process that could change its answer (a change made outside the session is not seen); use the result you have, or change the input",
    );
    run(&mut e, "grep", grep.clone());
    run(&mut e, "grep", grep.clone());
    assert_eq!(run(&mut e, "grep", grep.clone()), tree_blocked);
    // A process that may write any file at any time: nothing tree-wide is blocked.
    let out = e
        .call(
            "shell",
            json!({"command": "sleep 0.3; printf 'zzz\\n' > z.txt", "background": true}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert_eq!(run(&mut e, "grep", grep.clone()).status, Status::Ok);
    // Once it ended (its end is recorded when the next call starts), the counters
    // start afresh, and the search finds what it wrote.
    wait_for(&w, "z.txt", "zzz\n");
    while e.state().processes.values().any(|p| p.is_running()) {
        std::thread::sleep(std::time::Duration::from_millis(5));
        run(&mut e, "read_file", json!({"path": "a.txt", "offset": 1}));
    }
    let found = run(&mut e, "grep", grep.clone());
    assert_eq!(found.status, Status::Ok);
    assert!(found.output.contains("z.txt"), "{}", found.output);
    run(&mut e, "grep", grep.clone());
    assert_eq!(run(&mut e, "grep", grep.clone()), tree_blocked);
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}

// ---------------------------------------------------------------------------------------
// Edits: content, line endings, permissions, near misses

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom: each step's check follows the step it checks"
)]
fn edits_keep_the_bom_the_line_endings_and_the_permissions() {
    let w = ws(&[
        ("bom.txt", "\u{feff}first\nsecond\n"),
        ("crlf.txt", "a\r\nb\r\nc\r\n"),
        ("run.sh", "#!/bin/sh\necho hi\n"),
        ("bomloose.txt", "\u{feff}say \u{201C}hi\u{201D}  \nnext\n"),
    ]);
    w.chmod("run.sh", 0o754);
    let mut e = w.engine(Catalog::Thndrs);
    for p in ["bom.txt", "crlf.txt", "run.sh", "bomloose.txt"] {
        run(
            &mut e,
            "read_file_range",
            json!({"path": p, "start_line": 1}),
        );
    }
    let edit = |e: &mut Engine, path: &str, old: &str, new: &str| {
        run(
            e,
            "replace_range",
            json!({"path": path, "old_string": old, "new_string": new}),
        )
    };
    assert_eq!(edit(&mut e, "bom.txt", "first", "1st").status, Status::Ok);
    assert_eq!(w.text("bom.txt"), "\u{feff}1st\nsecond\n");
    assert_eq!(
        edit(&mut e, "crlf.txt", "a\nb", "x\ny\nz"),
        ok(wrote(
            "edited crlf.txt",
            "crlf.txt",
            "a\r\nb\r\nc\r\n",
            "x\r\ny\r\nz\r\nc\r\n"
        ))
    );
    assert_eq!(w.text("crlf.txt"), "x\r\ny\r\nz\r\nc\r\n");
    assert_eq!(edit(&mut e, "run.sh", "hi", "ho").status, Status::Ok);
    assert_eq!(w.text("run.sh"), "#!/bin/sh\necho ho\n");
    assert_eq!(w.mode("run.sh"), 0o754);
    // The near-miss match of the first line of a file with a BOM keeps the BOM.
    assert_eq!(
        edit(&mut e, "bomloose.txt", "say \"hi\"", "say \"yo\"").status,
        Status::Ok
    );
    assert_eq!(w.text("bomloose.txt"), "\u{feff}say \"yo\"\nnext\n");
    // A replace keeps the permissions too.
    assert_eq!(
        run(
            &mut e,
            "write_patch",
            json!({"patches": [{"op": "replace", "path": "run.sh", "content": "#!/bin/sh\n"}]})
        )
        .status,
        Status::Ok
    );
    assert_eq!(w.mode("run.sh"), 0o754);
    let modes: Vec<_> = writes(&e)
        .iter()
        .filter(|w| w.path == "run.sh")
        .map(|w| w.mode)
        .collect();
    assert_eq!(modes, vec![Some(0o754); 4]);
    check_log(&e);

    // thoth: edit_file and write_file.
    let w = ws(&[("crlf.txt", "a\r\nb\r\n"), ("run.sh", "x\n")]);
    w.chmod("run.sh", 0o754);
    let mut e = w.engine(Catalog::Thoth);
    run(&mut e, "read_file", json!({"path": "crlf.txt"}));
    run(&mut e, "read_file", json!({"path": "run.sh"}));
    assert_eq!(
        run(
            &mut e,
            "edit_file",
            json!({"path": "crlf.txt", "old_string": "b\n", "new_string": "b\nc\n"})
        )
        .status,
        Status::Ok
    );
    assert_eq!(w.text("crlf.txt"), "a\r\nb\r\nc\r\n");
    run(
        &mut e,
        "edit_file",
        json!({"path": "run.sh", "old_string": "x", "new_string": "y"}),
    );
    run(
        &mut e,
        "write_file",
        json!({"path": "run.sh", "content": "z\n"}),
    );
    assert_eq!((w.text("run.sh"), w.mode("run.sh")), ("z\n".into(), 0o754));
    check_log(&e);

    // A symlink inside the workspace stays a symlink: its target is edited, and the
    // records and the answer name the file really written.
    let w = ws(&[("real.txt", "r\n")]);
    w.link("alias.txt", "real.txt");
    let mut e = w.engine(Catalog::Thoth);
    run(&mut e, "read_file", json!({"path": "alias.txt"}));
    assert_eq!(
        run(
            &mut e,
            "edit_file",
            json!({"path": "alias.txt", "old_string": "r", "new_string": "s"})
        ),
        ok(wrote("edited real.txt", "real.txt", "r\n", "s\n"))
    );
    assert_eq!(w.text("real.txt"), "s\n");
    assert_eq!(
        std::fs::read_link(w.path("alias.txt")).unwrap(),
        Path::new("real.txt")
    );
    check_log(&e);
}

#[test]
fn near_misses_match_whole_lines_and_misses_say_what_was_meant() {
    let c = "fn main() {\n    let s = \u{201C}hi\u{201D};   \n    let t = 1;  \n    println!(\"{s}\");\n}\n";
    let w = ws(&[("a.rs", c), ("x.txt", "x\nx\nx\nx\nx\nx\nx\n")]);
    for (catalog, read, edit) in [
        (Catalog::Thoth, "read_file", "edit_file"),
        (Catalog::Thndrs, "read_file_range", "replace_range"),
    ] {
        w.put("a.rs", c);
        w.put("x.txt", "x\nx\nx\nx\nx\nx\nx\n");
        let mut e = w.engine(catalog);
        for p in ["a.rs", "x.txt"] {
            let input = if catalog == Catalog::Thoth {
                json!({"path": p})
            } else {
                json!({"path": p, "start_line": 1})
            };
            run(&mut e, read, input);
        }
        let call = |e: &mut Engine, path: &str, old: &str, new: &str| {
            run(
                e,
                edit,
                json!({"path": path, "old_string": old, "new_string": new}),
            )
        };
        let before = w.tree();
        assert_eq!(
            call(&mut e, "a.rs", "fn mian() {", "fn main2() {"),
            err("old_string was not found in a.rs; did you mean line 1: `fn main() {`?")
        );
        assert_eq!(
            call(&mut e, "a.rs", "qqqqqqqqqqqqqq", "z"),
            err("old_string was not found in a.rs")
        );
        let what = if catalog == Catalog::Thoth {
            "add the lines around the one you mean until no other place matches, or set replace_all to change every occurrence"
        } else {
            "include more surrounding text to make it unique"
        };
        assert_eq!(
            call(&mut e, "x.txt", "x", "y"),
            err(format!(
                "old_string occurs 7 times in x.txt (lines 1, 2, 3, 4, 5 and 2 more); {what}"
            ))
        );
        let empty = if catalog == Catalog::Thoth {
            "old_string is empty, so it would match everywhere: to add to the end of a file, call write_file with append true; to change something in the middle, give the exact lines it replaces"
        } else {
            "old_string must not be empty: give the exact text to replace"
        };
        assert_eq!(call(&mut e, "a.rs", "", "z"), err(empty));
        assert_eq!(
            call(&mut e, "a.rs", "main", "main"),
            err("no changes made: old_string and new_string are the same")
        );
        assert_eq!(w.tree(), before);
        // Smart quotes and trailing spaces: the whole line is replaced.
        let c2 = "fn main() {\n    let s = \"yo\";\n    let t = 1;  \n    println!(\"{s}\");\n}\n";
        assert_eq!(
            call(&mut e, "a.rs", "    let s = \"hi\";", "    let s = \"yo\";"),
            ok(wrote("edited a.rs", "a.rs", c, c2))
        );
        assert_eq!(w.text("a.rs"), c2);
        // Trailing spaces in the file inside a multi-line old_string.
        let c3 = "fn main() {\n    let s = \"yo\";\n    let t = 2;\n    println!(\"{t}\");\n}\n";
        assert_eq!(
            call(
                &mut e,
                "a.rs",
                "    let t = 1;\n    println!(\"{s}\");\n",
                "    let t = 2;\n    println!(\"{t}\");\n"
            ),
            ok(wrote("edited a.rs", "a.rs", c2, c3))
        );
        assert_eq!(w.text("a.rs"), c3);
        check_log(&e);
    }
}

#[test]
fn edit_file_replace_all_replaces_every_occurrence() {
    let c = "x = 1\ny = x\nz = x + x\n";
    let w = ws(&[("a.txt", c)]);
    let mut e = w.engine(Catalog::Thoth);
    run(&mut e, "read_file", json!({"path": "a.txt", "limit": 1}));
    let c2 = "w = 1\ny = w\nz = w + w\n";
    assert_eq!(
        run(
            &mut e,
            "edit_file",
            json!({"path": "a.txt", "old_string": "x", "new_string": "w", "replace_all": true})
        ),
        ok(wrote("edited a.txt", "a.txt", c, c2))
    );
    assert_eq!(w.text("a.txt"), c2);
    assert_eq!(
        run(
            &mut e,
            "edit_file",
            json!({"path": "a.txt", "old_string": "1", "new_string": "2", "replace_all": true})
        ),
        ok(wrote(
            "edited a.txt",
            "a.txt",
            c2,
            "w = 2\ny = w\nz = w + w\n"
        ))
    );
    assert_eq!(
        run(
            &mut e,
            "edit_file",
            json!({"path": "a.txt", "old_string": "q", "new_string": "r", "replace_all": true})
        ),
        err("old_string was not found in a.txt")
    );
    check_log(&e);
}

// ---------------------------------------------------------------------------------------
// write_patch batches

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom: each step's check follows the step it checks"
)]
fn write_patch_creates_replaces_and_edits_all_or_nothing() {
    let w = ws(&[
        ("a.txt", "a b c\n"),
        ("b.txt", "abcdef\n"),
        ("x.txt", "x\nx\n"),
    ]);
    let mut e = w.engine(Catalog::Thndrs);
    for p in ["a.txt", "b.txt", "x.txt"] {
        run(
            &mut e,
            "read_file_range",
            json!({"path": p, "start_line": 1}),
        );
    }
    let patch = |e: &mut Engine, patches: Value| run(e, "write_patch", json!({"patches": patches}));
    let edit = |path: &str, old: &str, new: &str| json!({"op": "edit", "path": path, "old_string": old, "new_string": new});
    let before = w.tree();
    let missing_create =
        missing(&w, "nope.txt").replace(" (paths", " (use create for a new file; paths");
    let refusals: [(Value, &str); _] = [
        (json!([]), "patches is empty: give at least one patch"),
        (
            json!([edit("a.txt", "a", "b"), edit("b.txt", "a", "b")]),
            "patch 2 is for b.txt but patch 1 is for a.txt: edits in one call must target one file",
        ),
        (
            json!([{"op": "create", "path": "n.txt", "content": "n"}, edit("n.txt", "n", "m")]),
            "a call holds one create or replace patch, or one or more edit patches of one file; split this batch",
        ),
        (
            json!([{"op": "replace", "path": "a.txt", "content": "1"}, {"op": "replace", "path": "a.txt", "content": "2"}]),
            "a call holds one create or replace patch, or one or more edit patches of one file; split this batch",
        ),
        (
            json!([edit("b.txt", "abc", "x"), edit("b.txt", "cde", "y")]),
            "patches 1 and 2 overlap: every edit must match a separate part of the original",
        ),
        (
            json!([
                edit("b.txt", "f", "F"),
                edit("b.txt", "cde", "y"),
                edit("b.txt", "bc", "z")
            ]),
            "patches 2 and 3 overlap: every edit must match a separate part of the original",
        ),
        (
            json!([edit("a.txt", "a", "a")]),
            "no changes made: the edits leave the file as it is",
        ),
        (
            json!([edit("a.txt", "a", "b"), edit("a.txt", "zz", "y")]),
            "patch 2: old_string was not found in a.txt",
        ),
        (
            json!([edit("a.txt", "", "b")]),
            "patch 1: old_string is empty; give the exact text to replace",
        ),
        (
            json!([{"op": "edit", "path": "a.txt", "old_string": "a"}]),
            "patch 1 (edit) needs old_string and new_string",
        ),
        (
            json!([edit("x.txt", "x", "y")]),
            "patch 1: old_string occurs 2 times in x.txt (lines 1, 2); include more surrounding text to make it unique",
        ),
        (json!([edit("nope.txt", "x", "y")]), &missing_create),
        (
            json!([{"op": "create", "path": "a.txt", "content": "x"}]),
            "a.txt already exists; create never overwrites",
        ),
        (
            json!([{"op": "create", "path": "n.txt"}]),
            "patch 1 (create) needs content",
        ),
        (
            json!([{"op": "create", "path": "n.txt", "content": "x", "expected_before_hash": hash("").to_hex()}]),
            "expected_before_hash applies to edit and replace, not create",
        ),
        (
            json!([{"op": "replace", "path": "a.txt"}]),
            "patch 1 (replace) needs content",
        ),
        (
            json!([{"op": "replace", "path": "a.txt", "content": "a b c\n"}]),
            "no changes made: a.txt already has this content",
        ),
    ];
    for (patches, text) in refusals {
        assert_eq!(patch(&mut e, patches.clone()), err(text), "{patches}");
    }
    assert_eq!(
        patch(&mut e, json!([{"op": "delete", "path": "a.txt"}])),
        bad_input(
            "invalid input for write_patch: field `patches[0].op`: unknown variant `delete`, expected one of `create`, `replace`, `edit`"
        )
    );
    assert_eq!(w.tree(), before);
    assert!(writes(&e).is_empty());

    // Every edit matches the original content, whatever the order of the batch.
    assert_eq!(
        patch(
            &mut e,
            json!([
                edit("a.txt", "c", "d"),
                edit("a.txt", "a", "b"),
                edit("a.txt", "b", "c")
            ])
        ),
        ok(wrote(
            "edited a.txt (3 edits)",
            "a.txt",
            "a b c\n",
            "b c d\n"
        ))
    );
    assert_eq!(w.text("a.txt"), "b c d\n");
    // Touching edits do not overlap.
    assert_eq!(
        patch(
            &mut e,
            json!([edit("b.txt", "abc", "1"), edit("b.txt", "def", "2")])
        )
        .status,
        Status::Ok
    );
    assert_eq!(w.text("b.txt"), "12\n");
    // One file, however it is spelt.
    assert_eq!(
        patch(
            &mut e,
            json!([edit("./b.txt", "1", "one"), edit("b.txt", "2", "two")])
        ),
        ok(wrote("edited b.txt (2 edits)", "b.txt", "12\n", "onetwo\n"))
    );
    assert_eq!(w.text("b.txt"), "onetwo\n");
    // Create, into new folders.
    assert_eq!(
        patch(
            &mut e,
            json!([{"op": "create", "path": "d/e/n.txt", "content": "hi\n"}])
        ),
        ok(created("created d/e/n.txt (3 bytes)", "d/e/n.txt", "hi\n"))
    );
    assert_eq!(w.text("d/e/n.txt"), "hi\n");
    // Replace works on a missing file, without a read.
    assert_eq!(
        patch(
            &mut e,
            json!([{"op": "replace", "path": "m.txt", "content": "m\n"}])
        ),
        ok(created("replaced m.txt (2 bytes)", "m.txt", "m\n"))
    );
    assert_eq!(w.text("m.txt"), "m\n");
    assert_eq!(w.mode("m.txt"), default_file_mode());
    // Replace of a file read whole.
    assert_eq!(
        patch(
            &mut e,
            json!([{"op": "replace", "path": "x.txt", "content": "y\n"}])
        ),
        ok(wrote("replaced x.txt (2 bytes)", "x.txt", "x\nx\n", "y\n"))
    );
    assert_eq!(w.text("x.txt"), "y\n");
    let ops: Vec<_> = writes(&e)
        .iter()
        .filter(|w| w.status == WriteStatus::Ok)
        .map(|w| (w.path.clone(), w.op))
        .collect();
    assert_eq!(
        ops,
        vec![
            ("a.txt".to_string(), WriteOp::Edit),
            ("b.txt".to_string(), WriteOp::Edit),
            ("b.txt".to_string(), WriteOp::Edit),
            ("d/e/n.txt".to_string(), WriteOp::Create),
            ("m.txt".to_string(), WriteOp::Create),
            ("x.txt".to_string(), WriteOp::Replace),
        ]
    );
    check_log(&e);
}

// ---------------------------------------------------------------------------------------
// create_file

/// The mode a new file gets from `open(2)` with 0o666 under this process's umask.
fn default_file_mode() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let umask = status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .map(|m| u32::from_str_radix(m.trim(), 8).unwrap())
        .unwrap_or(0o022);
    0o666 & !umask
}

#[test]
fn create_file_never_clobbers_and_creates_parent_folders() {
    let w = ws(&[("a.txt", "a\n")]);
    let mut e = w.engine(Catalog::Thndrs);
    let create = |e: &mut Engine, path: &str, content: &str| {
        run(e, "create_file", json!({"path": path, "content": content}))
    };
    assert_eq!(
        create(&mut e, "d/e/f.txt", "one\ntwo\n"),
        ok(created(
            "created d/e/f.txt (8 bytes)",
            "d/e/f.txt",
            "one\ntwo\n"
        ))
    );
    assert_eq!(w.text("d/e/f.txt"), "one\ntwo\n");
    assert_eq!(w.mode("d/e/f.txt"), default_file_mode());
    assert_eq!(
        create(&mut e, "empty.txt", ""),
        ok(format!(
            "created empty.txt (0 bytes)\nhash: {}\n--- /dev/null\n+++ b/empty.txt",
            hash("")
        ))
    );
    assert_eq!(w.get("empty.txt"), b"");
    let before = w.tree();
    assert_eq!(
        create(&mut e, "a.txt", "x\n"),
        err(
            "a.txt already exists; create_file never overwrites (edit it, or replace it after reading it)"
        )
    );
    assert_eq!(
        create(&mut e, "d/e/f.txt", "x\n"),
        err(
            "d/e/f.txt already exists; create_file never overwrites (edit it, or replace it after reading it)"
        )
    );
    assert_eq!(w.tree(), before);
    // The created file was written by the agent: it can be edited at once.
    assert_eq!(
        run(
            &mut e,
            "replace_range",
            json!({"path": "d/e/f.txt", "old_string": "two", "new_string": "2"})
        )
        .status,
        Status::Ok
    );
    assert_eq!(w.text("d/e/f.txt"), "one\n2\n");
    check_log(&e);
}

#[test]
fn a_failed_create_leaves_nothing_behind() {
    let w = ws(&[("f.txt", "f\n")]);
    // A dangling symlink: the target does not exist, but the name is taken.
    w.link("ghost.txt", "missing.txt");
    let mut e = w.engine_with(Catalog::Thndrs, |l| l.write_bytes_max = 4);
    let before = w.tree();
    assert_eq!(
        run(
            &mut e,
            "create_file",
            json!({"path": "ghost.txt", "content": "boo\n"})
        ),
        err("could not write ghost.txt: File exists (os error 17)")
    );
    assert_eq!(w.tree(), before, "no temporary file, the link untouched");
    assert_eq!(
        writes(&e).iter().map(|w| w.status).collect::<Vec<_>>(),
        [WriteStatus::Intent, WriteStatus::Failed]
    );
    assert!(!w.path("missing.txt").exists());
    // A file where a folder is needed.
    assert_eq!(
        run(
            &mut e,
            "create_file",
            json!({"path": "f.txt/g.txt", "content": "g\n"})
        ),
        err("cannot read f.txt/g.txt: Not a directory (os error 20)")
    );
    // Refused before any folder is made.
    assert_eq!(
        run(
            &mut e,
            "create_file",
            json!({"path": "p/q/big.txt", "content": "12345"})
        ),
        err("the new content of p/q/big.txt is 5 bytes, over write_bytes_max (4 bytes)")
    );
    assert_eq!(
        run(
            &mut e,
            "write_patch",
            json!({"patches": [{"op": "create", "path": "p/q/big.txt", "content": "12345"}]})
        ),
        err("the new content of p/q/big.txt is 5 bytes, over write_bytes_max (4 bytes)")
    );
    assert_eq!(w.tree(), before);
    assert_eq!(writes(&e).len(), 2);
    check_log(&e);
}

// ---------------------------------------------------------------------------------------
// Limits, each at and past its boundary

/// A read of `content` with `limits` adjusted: what each catalog's read tool answers.
fn check_read(set: impl Fn(&mut Limits), content: &str, thoth: (Value, Got), thndrs: (Value, Got)) {
    for (catalog, tool, (input, want)) in [
        (Catalog::Thoth, "read_file", thoth),
        (Catalog::Thndrs, "read_file_range", thndrs),
    ] {
        let w = ws(&[("f.txt", content)]);
        let mut e = w.engine_with(catalog, &set);
        assert_eq!(run(&mut e, tool, input.clone()), want, "{tool} {input}");
        check_log(&e);
    }
}

#[test]
fn read_file_bytes_max_reads_a_file_of_exactly_the_limit_and_refuses_one_byte_more() {
    let at = "123456789\n";
    check_read(
        |l| l.read_file_bytes_max = 10,
        at,
        (json!({"path": "f.txt"}), ok(read_to_end(at, 1, 1, 1))),
        (
            json!({"path": "f.txt", "start_line": 1}),
            ok(read_to_end(at, 1, 1, 1)),
        ),
    );
    check_read(
        |l| l.read_file_bytes_max = 9,
        at,
        (
            json!({"path": "f.txt"}),
            err(
                "f.txt is 10 bytes, over read_file_bytes_max (9 bytes); use grep to find the lines you need, then read with offset/limit",
            ),
        ),
        (
            json!({"path": "f.txt", "start_line": 1}),
            err(
                "f.txt is 10 bytes, over read_file_bytes_max (9 bytes); use search_text to find the lines you need",
            ),
        ),
    );
}

#[test]
fn read_lines_max_at_and_past() {
    let three = "a\nb\nc\n";
    let four = "a\nb\nc\nd\n";
    let max3 = |l: &mut Limits| l.read_lines_max = 3;
    check_read(
        max3,
        three,
        (json!({"path": "f.txt"}), ok(read_to_end(three, 1, 3, 3))),
        (
            json!({"path": "f.txt", "start_line": 1, "end_line": 3}),
            ok(read_to_end(three, 1, 3, 3)),
        ),
    );
    check_read(
        max3,
        four,
        (
            json!({"path": "f.txt", "limit": 100}),
            ok(read_part(four, 1, 3, 4, "offset")),
        ),
        (
            json!({"path": "f.txt", "start_line": 1, "end_line": 4}),
            ok(format!(
                "{}\n(range cut to read_lines_max = 3 lines)",
                read_part(four, 1, 3, 4, "start_line")
            )),
        ),
    );
    // Asking past the end of a short file cuts nothing: no note.
    check_read(
        max3,
        "a\nb\n",
        (json!({"path": "f.txt"}), ok(read_to_end("a\nb\n", 1, 2, 2))),
        (
            json!({"path": "f.txt", "start_line": 1, "end_line": 100}),
            ok(read_to_end("a\nb\n", 1, 2, 2)),
        ),
    );
}

#[test]
fn read_range_default_lines_at_and_past() {
    let c = "1\n2\n3\n4\n5\n";
    for (start, want) in [
        (2, read_part(c, 2, 3, 5, "start_line")),
        (4, read_to_end(c, 4, 5, 5)),
        (5, read_to_end(c, 5, 5, 5)),
    ] {
        let w = ws(&[("f.txt", c)]);
        let mut e = w.engine_with(Catalog::Thndrs, |l| l.read_range_default_lines = 2);
        assert_eq!(
            run(
                &mut e,
                "read_file_range",
                json!({"path": "f.txt", "start_line": start})
            ),
            ok(want)
        );
        check_log(&e);
    }
}

#[test]
fn line_chars_max_counts_characters_not_bytes() {
    let at = "\u{e9}\u{e9}\u{e9}\u{e9}\nok\n";
    let past = "\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\nok\n";
    let max4 = |l: &mut Limits| l.line_chars_max = 4;
    let both = |input_path: &str, want: String| {
        (
            (json!({"path": input_path}), ok(want.clone())),
            (json!({"path": input_path, "start_line": 1}), ok(want)),
        )
    };
    let (a, b) = both("f.txt", read_to_end(at, 1, 2, 2));
    check_read(max4, at, a, b);
    let (a, b) = both(
        "f.txt",
        format!(
            "     1\t\u{e9}\u{e9}\u{e9}\u{e9}…(2 more characters)\n     2\tok\n(lines 1-2 of 2, end of file)\nhash: {}",
            hash(past)
        ),
    );
    check_read(max4, past, a, b);
}

/// A read whose whole output is `full`, with the output capped by `set`: when `cut` is
/// `None` the output is given whole, else it is what `cut` makes of `full` (the head,
/// the cut named, the tail) and the whole output is kept in a blob.
fn check_output_cap(
    set: impl Fn(&mut Limits),
    content: &str,
    cut: Option<&dyn Fn(&str) -> String>,
) {
    let w = ws(&[("f.txt", content)]);
    let mut e = w.engine_with(Catalog::Thoth, set);
    let full = read_to_end(content, 1, 3, 3);
    let got = run(&mut e, "read_file", json!({"path": "f.txt"}));
    let f = finished(&e).pop().unwrap();
    match cut {
        None => {
            assert_eq!(got, ok(full));
            assert_eq!(f.output_blob, None);
        }
        Some(cut) => {
            assert_eq!(got, ok(cut(&full)));
            let b = f.output_blob.expect("the whole output kept as a blob");
            assert_eq!(String::from_utf8(blob(&e, &b)).unwrap(), full);
        }
    }
    check_log(&e);
}

/// The cut between the head and the tail of a capped output.
fn left_out(lines: usize, bytes: usize, from: usize, to: usize, of: usize) -> String {
    format!(
        "…({lines} lines and {bytes} bytes left out here: lines {from}-{to} of {of}; to read them, ask the tool for less (a narrower query or a range); the whole output is kept in the session's blobs)\n"
    )
}

#[test]
fn output_bytes_max_and_output_lines_max_cut_the_output_and_keep_it_whole_in_a_blob() {
    let c = "aaaa\nbbbb\ncccc\n";
    let full = read_to_end(c, 1, 3, 3);
    let n = full.len();
    check_output_cap(|l| l.output_bytes_max = n, c, None);
    // One byte less: the last line (the hash, 70 bytes) is left out, named; it is
    // longer than the tail's share of the bytes (a quarter), so no tail.
    check_output_cap(
        |l| l.output_bytes_max = n - 1,
        c,
        Some(&|full: &str| {
            let head = full.rfind("hash: ").unwrap();
            format!("{}{}", &full[..head], left_out(1, n - head, 5, 5, 5))
        }),
    );
    // Not one whole line fits: part of the first, the rest named.
    check_output_cap(
        |l| l.output_bytes_max = 5,
        c,
        Some(&|full: &str| format!("{}\n{}", &full[..5], left_out(5, n - 5, 1, 5, 5))),
    );
    // Head only, as a session recorded before output_tail_lines_max read it.
    check_output_cap(
        |l| {
            l.output_bytes_max = n - 1;
            l.output_tail_lines_max = 0;
        },
        c,
        Some(&|full: &str| {
            format!(
                "{}\n…(output cut: {} of {n} bytes and 5 of 5 lines shown; the whole output is kept in the session's blobs)",
                &full[..n - 1],
                n - 1
            )
        }),
    );
    // Lines: the output has 5 (3 lines, the footer, the hash).
    check_output_cap(|l| l.output_lines_max = 5, c, None);
    // One line less: the read shows what fits with its footer, and says so, rather
    // than be cut where the model would not learn how to read on (nor the log record
    // as read a line the model was not shown).
    let w = ws(&[("f.txt", c)]);
    let mut e = w.engine_with(Catalog::Thoth, |l| l.output_lines_max = 4);
    assert_eq!(
        run(&mut e, "read_file", json!({"path": "f.txt"})),
        ok(format!(
            "     1\taaaa\n(lines 1-1 of 3; read on with offset=2)\nhash: {}\n(cut to fit the output caps, output_bytes_max and output_lines_max)",
            hash(c)
        ))
    );
    assert_eq!(finished(&e).pop().unwrap().output_blob, None);
    assert_eq!(reads(&e).pop().unwrap().ranges, vec![(1, 1)]);
    check_log(&e);
}

#[test]
fn diff_lines_max_at_and_past() {
    // The diff of a one-line change in a one-line file has 5 lines.
    for (max, diff) in [
        (
            5,
            "--- a/f.txt\n+++ b/f.txt\n@@ -1,1 +1,1 @@\n    1       -a\n          1 +b",
        ),
        (
            4,
            "--- a/f.txt\n+++ b/f.txt\n@@ -1,1 +1,1 @@\n    1       -a\n…(1 more diff lines)",
        ),
    ] {
        let w = ws(&[("f.txt", "a\n")]);
        let mut e = w.engine_with(Catalog::Thoth, |l| l.diff_lines_max = max);
        run(&mut e, "read_file", json!({"path": "f.txt"}));
        assert_eq!(
            run(
                &mut e,
                "edit_file",
                json!({"path": "f.txt", "old_string": "a", "new_string": "b"})
            ),
            ok(format!("edited f.txt\nhash: {}\n{diff}", hash("b\n")))
        );
        assert_eq!(w.text("f.txt"), "b\n");
        check_log(&e);
    }
}

#[test]
fn write_bytes_max_at_and_past() {
    let w = ws(&[("a.txt", "1234\n")]);
    let mut e = w.engine_with(Catalog::Thndrs, |l| l.write_bytes_max = 5);
    run(
        &mut e,
        "read_file_range",
        json!({"path": "a.txt", "start_line": 1}),
    );
    let over = |path: &str, n: usize| {
        err(format!(
            "the new content of {path} is {n} bytes, over write_bytes_max (5 bytes)"
        ))
    };
    let before = w.tree();
    assert_eq!(
        run(
            &mut e,
            "create_file",
            json!({"path": "n.txt", "content": "12345\n"})
        ),
        over("n.txt", 6)
    );
    assert_eq!(
        run(
            &mut e,
            "replace_range",
            json!({"path": "a.txt", "old_string": "1", "new_string": "01"})
        ),
        over("a.txt", 6)
    );
    assert_eq!(
        run(
            &mut e,
            "write_patch",
            json!({"patches": [{"op": "replace", "path": "a.txt", "content": "123456"}]})
        ),
        over("a.txt", 6)
    );
    assert_eq!(w.tree(), before);
    assert!(writes(&e).is_empty());
    assert_eq!(
        run(
            &mut e,
            "create_file",
            json!({"path": "n.txt", "content": "1234\n"})
        )
        .status,
        Status::Ok
    );
    assert_eq!(
        run(
            &mut e,
            "replace_range",
            json!({"path": "a.txt", "old_string": "1234", "new_string": "abcd"})
        )
        .status,
        Status::Ok
    );
    assert_eq!(
        (w.text("n.txt"), w.text("a.txt")),
        ("1234\n".into(), "abcd\n".into())
    );
    check_log(&e);

    // thoth's write_file.
    let w = ws(&[]);
    let mut e = w.engine_with(Catalog::Thoth, |l| l.write_bytes_max = 5);
    assert_eq!(
        run(
            &mut e,
            "write_file",
            json!({"path": "n.txt", "content": "123456"})
        ),
        over("n.txt", 6)
    );
    assert!(!w.path("n.txt").exists());
    assert_eq!(
        run(
            &mut e,
            "write_file",
            json!({"path": "n.txt", "content": "12345"})
        )
        .status,
        Status::Ok
    );
    check_log(&e);
}

#[test]
fn input_bytes_max_at_and_past() {
    let input = json!({"path": "a.txt"});
    let n = input.to_string().len();
    assert_eq!(n, 16);
    for (max, want) in [
        (n, ok(read_to_end("a\n", 1, 1, 1))),
        (
            n - 1,
            bad_input("input of 16 bytes is over input_bytes_max (15 bytes)"),
        ),
    ] {
        let w = ws(&[("a.txt", "a\n")]);
        let mut e = w.engine_with(Catalog::Thoth, |l| l.input_bytes_max = max);
        assert_eq!(run(&mut e, "read_file", input.clone()), want);
        check_log(&e);
    }
    // A write over the limit changes nothing.
    let w = ws(&[]);
    let mut e = w.engine_with(Catalog::Thndrs, |l| l.input_bytes_max = 40);
    let big = json!({"path": "n.txt", "content": "x".repeat(40)});
    assert_eq!(
        run(&mut e, "create_file", big.clone()),
        bad_input(format!(
            "input of {} bytes is over input_bytes_max (40 bytes)",
            big.to_string().len()
        ))
    );
    assert!(!w.path("n.txt").exists());
    check_log(&e);
}

#[test]
fn repeat_calls_max_at_and_past() {
    for max in [1u32, 2, 3] {
        let w = ws(&[("a.txt", "a\n")]);
        let mut e = w.engine_with(Catalog::Thndrs, |l| l.repeat_calls_max = max);
        let input = json!({"path": "a.txt", "start_line": 1});
        for _ in 0..max {
            assert_eq!(
                run(&mut e, "read_file_range", input.clone()).status,
                Status::Ok
            );
        }
        assert_eq!(
            run(&mut e, "read_file_range", input.clone()),
            blocked("read_file_range", max, "a.txt", "a\n")
        );
        e.user_message("again").unwrap();
        assert_eq!(run(&mut e, "read_file_range", input).status, Status::Ok);
        check_log(&e);
    }
}

// ---------------------------------------------------------------------------------------
// Bad input: a clear answer, nothing on disk changed

/// Each call answers `want`, and neither the workspace nor the folder outside changes.
fn check_bad(w: &Ws, e: &mut Engine, cases: Vec<(&str, Value, Got)>) {
    let before = w.tree();
    let writes_before = writes(e).len();
    for (tool, input, want) in cases {
        assert_eq!(run(e, tool, input.clone()), want, "{tool} {input}");
        assert_eq!(w.tree(), before, "{tool} {input} changed the disk");
    }
    assert_eq!(writes(e).len(), writes_before);
    check_log(e);
}

/// A workspace with a file, a folder, a binary file, and symlinks leading out.
fn bad_ws() -> Ws {
    let w = ws(&[("a.txt", "a\n"), ("sub/s.txt", "s\n")]);
    w.put("bin.dat", b"\x7fELF\0\x01");
    w.link("link", &w.outside);
    w.link("esc.txt", w.outside.join("secret.txt"));
    w
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "a data table: each bad input and its answer, checked by one loop"
)]
fn bad_input_to_thoth_tools_is_answered_and_changes_nothing() {
    let w = bad_ws();
    let mut e = w.engine(Catalog::Thoth);
    run(&mut e, "read_file", json!({"path": "a.txt"}));
    let root = e.root().display().to_string();
    let out = w.outside.display().to_string();
    let conf = |path: &str, text: String| refused(Rule::Confinement, Some(path), None, text);
    let cases = vec![
        (
            "read_file",
            json!({}),
            bad_input(
                "invalid input for read_file: missing field `path`; send the call again with every required field: path",
            ),
        ),
        (
            "read_file",
            json!("a.txt"),
            bad_input(
                "invalid input for read_file: invalid type: string \"a.txt\", expected struct Input",
            ),
        ),
        (
            "read_file",
            json!({"path": 5}),
            bad_input(
                "invalid input for read_file: field `path`: invalid type: integer `5`, expected a string",
            ),
        ),
        (
            "read_file",
            json!({"path": "a.txt", "offset": "2"}),
            bad_input(
                "invalid input for read_file: field `offset`: invalid type: string \"2\", expected u32",
            ),
        ),
        (
            "read_file",
            json!({"path": "a.txt", "limit": -1}),
            bad_input(
                "invalid input for read_file: field `limit`: invalid value: integer `-1`, expected u32",
            ),
        ),
        (
            "read_file",
            json!({"path": "a.txt", "lines": 1}),
            bad_input(
                "invalid input for read_file: field `lines`: unknown field `lines`, expected one of `path`, `offset`, `limit`",
            ),
        ),
        (
            "edit_file",
            json!({"path": "a.txt", "old_string": "a"}),
            bad_input(
                "invalid input for edit_file: missing field `new_string`; send the call again with every required field: path, old_string, new_string",
            ),
        ),
        (
            "edit_file",
            json!({"path": "a.txt", "old_string": "a", "new_string": "b", "replace_all": "yes"}),
            bad_input(
                "invalid input for edit_file: field `replace_all`: invalid type: string \"yes\", expected a boolean",
            ),
        ),
        (
            "write_file",
            json!({"path": "a.txt", "content": null}),
            bad_input(
                "invalid input for write_file: field `content`: invalid type: null, expected a string",
            ),
        ),
        (
            "write_file",
            json!({"path": ["a.txt"], "content": "x"}),
            bad_input(
                "invalid input for write_file: field `path`: invalid type: sequence, expected a string",
            ),
        ),
        (
            "nope",
            json!({"path": "a.txt"}),
            err(format!(
                "unknown tool 'nope'; this catalog has: {}",
                cairn_engine::Registry::new(Catalog::Thoth)
                    .names()
                    .join(", ")
            )),
        ),
        (
            "create_file",
            json!({"path": "n.txt", "content": "x"}),
            err(format!(
                "unknown tool 'create_file'; this catalog has: {}",
                cairn_engine::Registry::new(Catalog::Thoth)
                    .names()
                    .join(", ")
            )),
        ),
        (
            "read_file",
            json!({"path": ""}),
            err("the path is empty: give a path relative to the workspace root"),
        ),
        (
            "write_file",
            json!({"path": "", "content": "x"}),
            err("the path is empty: give a path relative to the workspace root"),
        ),
        (
            "edit_file",
            json!({"path": "", "old_string": "a", "new_string": "b"}),
            err("the path is empty: give a path relative to the workspace root"),
        ),
        (
            "edit_file",
            json!({"path": "a.txt", "old_string": "", "new_string": "b"}),
            err(
                "old_string is empty, so it would match everywhere: to add to the end of a file, call write_file with append true; to change something in the middle, give the exact lines it replaces",
            ),
        ),
        (
            "read_file",
            json!({"path": "a\0.txt"}),
            err("the path contains a NUL byte"),
        ),
        (
            "write_file",
            json!({"path": "n\0.txt", "content": "x"}),
            err("the path contains a NUL byte"),
        ),
        (
            "read_file",
            json!({"path": "../outside/secret.txt"}),
            conf(
                "../outside/secret.txt",
                format!(
                    "../outside/secret.txt climbs out of the workspace with '..'; paths must stay inside {root}"
                ),
            ),
        ),
        (
            "read_file",
            json!({"path": "sub/../../outside/secret.txt"}),
            conf(
                "sub/../../outside/secret.txt",
                format!(
                    "sub/../../outside/secret.txt climbs out of the workspace with '..'; paths must stay inside {root}"
                ),
            ),
        ),
        (
            "write_file",
            json!({"path": "../new.txt", "content": "x"}),
            conf(
                "../new.txt",
                format!(
                    "../new.txt climbs out of the workspace with '..'; paths must stay inside {root}"
                ),
            ),
        ),
        (
            "read_file",
            json!({"path": "link/secret.txt"}),
            conf(
                "link/secret.txt",
                format!(
                    "link/secret.txt leads outside the workspace (through a symlink) to {out}/secret.txt"
                ),
            ),
        ),
        (
            "read_file",
            json!({"path": "esc.txt"}),
            conf(
                "esc.txt",
                format!(
                    "esc.txt leads outside the workspace (through a symlink) to {out}/secret.txt"
                ),
            ),
        ),
        (
            "write_file",
            json!({"path": "link/new.txt", "content": "x"}),
            conf(
                "link/new.txt",
                format!(
                    "link/new.txt leads outside the workspace (through a symlink) to {out}/new.txt"
                ),
            ),
        ),
        (
            "write_file",
            json!({"path": "esc.txt", "content": "x"}),
            conf(
                "esc.txt",
                format!(
                    "esc.txt leads outside the workspace (through a symlink) to {out}/secret.txt"
                ),
            ),
        ),
        (
            "edit_file",
            json!({"path": "esc.txt", "old_string": "outside", "new_string": "in"}),
            conf(
                "esc.txt",
                format!(
                    "esc.txt leads outside the workspace (through a symlink) to {out}/secret.txt"
                ),
            ),
        ),
        (
            "read_file",
            json!({"path": format!("{out}/secret.txt")}),
            conf(
                &format!("{out}/secret.txt"),
                format!(
                    "{out}/secret.txt is outside the workspace {root}; give a path relative to the workspace root"
                ),
            ),
        ),
        (
            "read_file",
            json!({"path": "sub"}),
            err("sub is a directory, not a file; list it instead"),
        ),
        (
            "read_file",
            json!({"path": "."}),
            err(". is a directory, not a file; list it instead"),
        ),
        (
            "write_file",
            json!({"path": "./", "content": "x"}),
            err(". is a directory, not a file"),
        ),
        (
            "write_file",
            json!({"path": "sub", "content": "x"}),
            err("sub is a directory, not a file"),
        ),
        (
            "edit_file",
            json!({"path": "sub", "old_string": "a", "new_string": "b"}),
            err("sub is a directory, not a file"),
        ),
        (
            "read_file",
            json!({"path": "bin.dat"}),
            err("bin.dat is a binary file (6 bytes); the read tools show text only"),
        ),
        (
            "edit_file",
            json!({"path": "bin.dat", "old_string": "ELF", "new_string": "ELG"}),
            refused(
                Rule::ReadBeforeEdit,
                Some("bin.dat"),
                Some(hash(b"\x7fELF\0\x01")),
                "read bin.dat before editing it",
            ),
        ),
        (
            "write_file",
            json!({"path": "bin.dat", "content": "x"}),
            refused(
                Rule::ReadBeforeOverwrite,
                Some("bin.dat"),
                Some(hash(b"\x7fELF\0\x01")),
                "overwriting bin.dat needs every line read first; you have not read it",
            ),
        ),
        (
            "read_file",
            json!({"path": "nope.txt"}),
            err(missing(&w, "nope.txt")),
        ),
        (
            "edit_file",
            json!({"path": "nope.txt", "old_string": "a", "new_string": "b"}),
            err(missing(&w, "nope.txt")),
        ),
    ];
    check_bad(&w, &mut e, cases);
    // Nothing read outside the workspace was recorded.
    assert_eq!(
        reads(&e)
            .iter()
            .map(|r| r.path.as_str())
            .collect::<Vec<_>>(),
        ["a.txt"]
    );
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "a data table: each bad input and its answer, checked by one loop"
)]
fn bad_input_to_thndrs_tools_is_answered_and_changes_nothing() {
    let w = bad_ws();
    let mut e = w.engine(Catalog::Thndrs);
    run(
        &mut e,
        "read_file_range",
        json!({"path": "a.txt", "start_line": 1}),
    );
    let out = w.outside.display().to_string();
    let root = e.root().display().to_string();
    let conf = |path: &str, text: String| refused(Rule::Confinement, Some(path), None, text);
    let cases = vec![
        (
            "read_file_range",
            json!({"path": "a.txt"}),
            bad_input(
                "invalid input for read_file_range: missing field `start_line`; send the call again with every required field: path, start_line",
            ),
        ),
        (
            "read_file_range",
            json!({"path": "a.txt", "start_line": "1"}),
            bad_input(
                "invalid input for read_file_range: field `start_line`: invalid type: string \"1\", expected u32",
            ),
        ),
        (
            "read_file_range",
            json!({"path": "a.txt", "start_line": 1.5}),
            bad_input(
                "invalid input for read_file_range: field `start_line`: invalid type: floating point `1.5`, expected u32",
            ),
        ),
        (
            "create_file",
            json!({"path": "n.txt"}),
            bad_input(
                "invalid input for create_file: missing field `content`; send the call again with every required field: path, content",
            ),
        ),
        (
            "create_file",
            json!({"path": "n.txt", "content": 5}),
            bad_input(
                "invalid input for create_file: field `content`: invalid type: integer `5`, expected a string",
            ),
        ),
        (
            "replace_range",
            json!({"path": "a.txt", "old_string": "a", "new_string": false}),
            bad_input(
                "invalid input for replace_range: field `new_string`: invalid type: boolean `false`, expected a string",
            ),
        ),
        (
            "write_patch",
            json!({"patches": {}}),
            bad_input(
                "invalid input for write_patch: field `patches`: invalid type: map, expected a sequence",
            ),
        ),
        (
            "write_patch",
            json!({}),
            bad_input(
                "invalid input for write_patch: missing field `patches`; send the call again with every required field: patches",
            ),
        ),
        (
            "write_patch",
            json!({"patches": [{"op": "create", "path": 5, "content": "x"}]}),
            bad_input(
                "invalid input for write_patch: field `patches[0].path`: invalid type: integer `5`, expected a string",
            ),
        ),
        (
            "write_patch",
            json!({"patches": [{"path": "n.txt", "content": "x"}]}),
            bad_input(
                "invalid input for write_patch: field `patches[0]`: missing field `op`; send the call again with every required field: op, path",
            ),
        ),
        (
            "read_file",
            json!({"path": "a.txt"}),
            err(format!(
                "unknown tool 'read_file'; this catalog has: {}",
                cairn_engine::Registry::new(Catalog::Thndrs)
                    .names()
                    .join(", ")
            )),
        ),
        (
            "read_file_range",
            json!({"path": "", "start_line": 1}),
            err("the path is empty: give a path relative to the workspace root"),
        ),
        (
            "create_file",
            json!({"path": "", "content": "x"}),
            err("the path is empty: give a path relative to the workspace root"),
        ),
        (
            "write_patch",
            json!({"patches": [{"op": "create", "path": "", "content": "x"}]}),
            err("the path is empty: give a path relative to the workspace root"),
        ),
        (
            "replace_range",
            json!({"path": "a.txt", "old_string": "", "new_string": "b"}),
            err("old_string must not be empty: give the exact text to replace"),
        ),
        (
            "create_file",
            json!({"path": "n\0.txt", "content": "x"}),
            err("the path contains a NUL byte"),
        ),
        (
            "replace_range",
            json!({"path": "a\0.txt", "old_string": "a", "new_string": "b"}),
            err("the path contains a NUL byte"),
        ),
        (
            "create_file",
            json!({"path": "../n.txt", "content": "x"}),
            conf(
                "../n.txt",
                format!(
                    "../n.txt climbs out of the workspace with '..'; paths must stay inside {root}"
                ),
            ),
        ),
        (
            "write_patch",
            json!({"patches": [{"op": "replace", "path": "../outside/secret.txt", "content": "x"}]}),
            conf(
                "../outside/secret.txt",
                format!(
                    "../outside/secret.txt climbs out of the workspace with '..'; paths must stay inside {root}"
                ),
            ),
        ),
        (
            "read_file_range",
            json!({"path": "link/secret.txt", "start_line": 1}),
            conf(
                "link/secret.txt",
                format!(
                    "link/secret.txt leads outside the workspace (through a symlink) to {out}/secret.txt"
                ),
            ),
        ),
        (
            "create_file",
            json!({"path": "link/n.txt", "content": "x"}),
            conf(
                "link/n.txt",
                format!(
                    "link/n.txt leads outside the workspace (through a symlink) to {out}/n.txt"
                ),
            ),
        ),
        (
            "create_file",
            json!({"path": "link/deep/er/n.txt", "content": "x"}),
            conf(
                "link/deep/er/n.txt",
                format!(
                    "link/deep/er/n.txt leads outside the workspace (through a symlink) to {out}/deep/er/n.txt"
                ),
            ),
        ),
        (
            "replace_range",
            json!({"path": "esc.txt", "old_string": "outside", "new_string": "in"}),
            conf(
                "esc.txt",
                format!(
                    "esc.txt leads outside the workspace (through a symlink) to {out}/secret.txt"
                ),
            ),
        ),
        (
            "write_patch",
            json!({"patches": [{"op": "edit", "path": "link/secret.txt", "old_string": "outside", "new_string": "in"}]}),
            conf(
                "link/secret.txt",
                format!(
                    "link/secret.txt leads outside the workspace (through a symlink) to {out}/secret.txt"
                ),
            ),
        ),
        (
            "read_file_range",
            json!({"path": "sub", "start_line": 1}),
            err("sub is a directory, not a file; list it instead"),
        ),
        (
            "create_file",
            json!({"path": "sub", "content": "x"}),
            err("sub is a directory, not a file"),
        ),
        (
            "create_file",
            json!({"path": ".", "content": "x"}),
            err(". is a directory, not a file"),
        ),
        (
            "read_file_range",
            json!({"path": "sub/..", "start_line": 1}),
            err(". is a directory, not a file; list it instead"),
        ),
        (
            "replace_range",
            json!({"path": "sub", "old_string": "a", "new_string": "b"}),
            err("sub is a directory, not a file"),
        ),
        (
            "write_patch",
            json!({"patches": [{"op": "replace", "path": "sub", "content": "x"}]}),
            err("sub is a directory, not a file"),
        ),
        (
            "read_file_range",
            json!({"path": "bin.dat", "start_line": 1}),
            err("bin.dat is a binary file (6 bytes); the read tools show text only"),
        ),
        (
            "write_patch",
            json!({"patches": [{"op": "replace", "path": "bin.dat", "content": "x"}]}),
            refused(
                Rule::ReadBeforeOverwrite,
                Some("bin.dat"),
                Some(hash(b"\x7fELF\0\x01")),
                "overwriting bin.dat needs every line read first; you have not read it",
            ),
        ),
        (
            "read_file_range",
            json!({"path": "nope.txt", "start_line": 1}),
            err(missing(&w, "nope.txt")),
        ),
        (
            "replace_range",
            json!({"path": "nope.txt", "old_string": "a", "new_string": "b"}),
            err(missing(&w, "nope.txt")),
        ),
    ];
    check_bad(&w, &mut e, cases);
    assert!(!w.outside.join("deep").exists());
}

#[test]
fn the_cairn_home_inside_the_workspace_is_out_of_reach() {
    let w = ws(&[("a.txt", "a\n")]);
    let home = Home::at(&w.root.join(".cairn"));
    let mut cfg = EngineConfig::new(Catalog::Thndrs);
    cfg.durability = Durability::None;
    let mut e = Engine::start(&home, &w.root, cfg).unwrap();
    let h = home.root.display().to_string();
    let log = e.dir().strip_prefix(&w.root).unwrap().join("events.jsonl");
    let log = log.to_str().unwrap().to_string();
    let tree = || {
        let mut t = w.tree();
        t.retain(|p, _| !p.starts_with(&home.root));
        t
    };
    let before = tree();
    for (tool, input) in [
        ("read_file_range", json!({"path": log, "start_line": 1})),
        (
            "create_file",
            json!({"path": ".cairn/x.txt", "content": "x"}),
        ),
        (
            "write_patch",
            json!({"patches": [{"op": "replace", "path": log, "content": "{}"}]}),
        ),
    ] {
        let path = input
            .get("path")
            .or(input["patches"][0].get("path"))
            .and_then(Value::as_str)
            .unwrap()
            .to_string();
        assert_eq!(
            run(&mut e, tool, input),
            refused(
                Rule::Confinement,
                Some(&path),
                None,
                format!("{path} is inside the cairn home {h}, which tools never touch")
            )
        );
    }
    assert_eq!(tree(), before);
    assert!(!home.root.join("x.txt").exists());
    check_log(&e);
}

#[test]
fn an_unreadable_file_is_an_error_unless_running_as_root() {
    let w = ws(&[("locked.txt", "secret\n")]);
    w.chmod("locked.txt", 0o000);
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root_user = unsafe { libc::geteuid() } == 0;
    for (catalog, tool, input) in [
        (Catalog::Thoth, "read_file", json!({"path": "locked.txt"})),
        (
            Catalog::Thndrs,
            "read_file_range",
            json!({"path": "locked.txt", "start_line": 1}),
        ),
    ] {
        let mut e = w.engine(catalog);
        let got = run(&mut e, tool, input);
        if root_user {
            // chmod 000 does not stop root from reading.
            assert_eq!(got, ok(read_to_end("secret\n", 1, 1, 1)));
        } else {
            assert_eq!(
                got,
                err("cannot read locked.txt: Permission denied (os error 13)")
            );
            assert!(reads(&e).is_empty());
        }
        check_log(&e);
    }
    assert_eq!(w.mode("locked.txt"), 0);
}

// ---------------------------------------------------------------------------------------
// Records

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom: each step's check follows the step it checks"
)]
fn writes_record_an_intent_then_the_outcome_with_blobs_of_both_contents() {
    let c = "one\ntwo\nthree\n";
    let w = ws(&[("a.txt", c)]);
    w.chmod("a.txt", 0o640);
    let mut e = w.engine(Catalog::Thoth);
    run(
        &mut e,
        "read_file",
        json!({"path": "a.txt", "offset": 2, "limit": 1}),
    );
    run(
        &mut e,
        "edit_file",
        json!({"path": "a.txt", "old_string": "two", "new_string": "2"}),
    );
    run(
        &mut e,
        "write_file",
        json!({"path": "n/b.txt", "content": "b\n"}),
    );
    run(
        &mut e,
        "edit_file",
        json!({"path": "a.txt", "old_string": "zzz", "new_string": "2"}),
    );
    assert_eq!(
        kinds_of(&e, "c1"),
        ["tool_started", "file_read", "tool_finished"]
    );
    let write_kinds = ["tool_started", "file_write", "file_write", "tool_finished"];
    assert_eq!(kinds_of(&e, "c2"), write_kinds);
    assert_eq!(kinds_of(&e, "c3"), write_kinds);
    assert_eq!(kinds_of(&e, "c4"), ["tool_started", "tool_finished"]);
    assert_eq!(
        reads(&e),
        vec![FileRead {
            call: "c1".into(),
            path: "a.txt".into(),
            ranges: vec![(2, 2)],
            total_lines: 3,
            hash: hash(c),
        }]
    );
    let c2 = "one\n2\nthree\n";
    let bref = |s: &str| BlobRef {
        hash: hash(s),
        len: s.len() as u64,
    };
    let edit = |status| FileWrite {
        call: Some("c2".into()),
        op: WriteOp::Edit,
        path: "a.txt".into(),
        before: Some(bref(c)),
        after: Some(bref(c2)),
        lines_after: 3,
        mode: Some(0o640),
        status,
        withheld: false,
        unknown: false,
        diff: None,
    };
    let create = |status| FileWrite {
        call: Some("c3".into()),
        op: WriteOp::Create,
        path: "n/b.txt".into(),
        before: None,
        after: Some(bref("b\n")),
        lines_after: 1,
        mode: None,
        status,
        withheld: false,
        unknown: false,
        diff: None,
    };
    assert_eq!(
        writes(&e),
        vec![
            edit(WriteStatus::Intent),
            edit(WriteStatus::Ok),
            create(WriteStatus::Intent),
            create(WriteStatus::Ok),
        ]
    );
    assert_eq!(blob(&e, &bref(c)), c.as_bytes());
    assert_eq!(blob(&e, &bref(c2)), w.get("a.txt"));
    assert_eq!(blob(&e, &bref("b\n")), w.get("n/b.txt"));
    let Event::ToolStarted {
        call, tool, input, ..
    } = events(&e)
        .into_iter()
        .find(|ev| matches!(ev, Event::ToolStarted { call, .. } if call == "c2"))
        .unwrap()
    else {
        unreachable!()
    };
    assert_eq!(
        (call.as_str(), tool.as_str(), input),
        (
            "c2",
            "edit_file",
            json!({"path": "a.txt", "old_string": "two", "new_string": "2"})
        )
    );
    assert_eq!(
        finished(&e).iter().map(|f| f.status).collect::<Vec<_>>(),
        [Status::Ok, Status::Ok, Status::Ok, Status::Error]
    );
    let k = &e.state().files["a.txt"];
    assert_eq!(
        (k.hash, k.read_hash, k.ranges.clone(), k.total_lines),
        (Some(hash(c2).0), Some(hash(c2).0), vec![(1, 3)], 3)
    );
    check_log(&e);
}
