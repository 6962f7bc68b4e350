//! Deep verify takes every recorded decision again with `cairn_core::decide`, the same
//! functions the live engine decided with. Property: a random session run live through
//! the engine verifies clean; and each recorded decision flipped in its log (a refusal
//! turned into ok or dropped, a call turned blocked, a write turned refused, a
//! permission answer or its source changed, a denied call turned ok, an output blob
//! dropped), with the log re-chained so that only the deep checks can see it, is
//! reported by verify at the seq of the flipped record, with the session's snapshots
//! present and deleted.
//!
//! Sessions mix reads (whole and partial), edits, overwrites (with fresh and stale
//! `expected_before_hash` guards in thndrs), exact repeats, shell commands that change
//! files behind the agent's back, bad and oversized inputs and user messages, in both
//! catalogs, with answers given per call (once, always, deny) or by a policy (allow
//! once, deny all). Limits are tiny so that caps, blocks and refusals happen often.
//!
//! `CAIRN_PROPTEST_CASES` sets the number of random sessions (16 by default).

use std::path::{Path, PathBuf};

use cairn_engine::event::Answer;
use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Engine, Home};
use cairn_replay::{Problem, VerifyOptions, verify, verify_with};
use cairn_store::Hash;
use cairn_tests::replay::{Rec, quick_config, read_records, rechain};
use proptest::prelude::*;
use serde_json::{Value, json};

const FILES: [&str; 3] = ["a.txt", "b.txt", "c.txt"];
const INPUT_BYTES_MAX: usize = 2048;

/// A guard for thndrs writes: none, the file's current hash, or another one.
#[derive(Debug, Clone, Copy)]
enum Guard {
    None,
    Fresh,
    Stale,
}

/// One step of a session, in catalog-neutral terms.
#[derive(Debug, Clone)]
enum Step {
    /// Lines `from..from + lines` of a file (all from `from` when `lines` is none).
    Read {
        file: usize,
        from: u32,
        lines: Option<u32>,
    },
    /// Grows line `line` of a file by a word.
    Edit {
        file: usize,
        line: u32,
        guard: Guard,
    },
    /// Replaces a file with new lines.
    Overwrite { file: usize, seed: u8, guard: Guard },
    /// The previous call again, exactly.
    Again,
    /// A command: reads a file, appends to one behind the agent's back, or lists.
    Shell { which: u8 },
    /// An input the tool's schema rejects.
    BadInput,
    /// An input over `input_bytes_max`.
    BigInput,
    /// A user message (repeat counters start afresh).
    Message,
}

/// A step and the answer given to its permission question (`None`: the policy's).
#[derive(Debug, Clone)]
struct Call {
    step: Step,
    answer: Option<Answer>,
}

#[derive(Debug, Clone)]
struct Plan {
    catalog: Catalog,
    /// The policy that answers when a call brings no answer: deny everything, or allow
    /// everything in the workspace once.
    deny_all: bool,
    calls: Vec<Call>,
}

fn guard() -> impl Strategy<Value = Guard> {
    prop_oneof![Just(Guard::None), Just(Guard::Fresh), Just(Guard::Stale)]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..3usize, 1..8u32, proptest::option::of(1..6u32))
            .prop_map(|(file, from, lines)| Step::Read { file, from, lines }),
        3 => (0..3usize, 1..7u32, guard()).prop_map(|(file, line, guard)| Step::Edit { file, line, guard }),
        2 => (0..3usize, any::<u8>(), guard())
            .prop_map(|(file, seed, guard)| Step::Overwrite { file, seed, guard }),
        3 => Just(Step::Again),
        1 => (0..3u8).prop_map(|which| Step::Shell { which }),
        1 => Just(Step::BadInput),
        1 => Just(Step::BigInput),
        1 => Just(Step::Message),
    ]
}

fn answer() -> impl Strategy<Value = Option<Answer>> {
    prop_oneof![
        3 => Just(None),
        2 => Just(Some(Answer::Once)),
        1 => Just(Some(Answer::Always)),
        1 => Just(Some(Answer::Deny)),
    ]
}

fn plan() -> impl Strategy<Value = Plan> {
    let calls = proptest::collection::vec(
        (step(), answer()).prop_map(|(step, answer)| Call { step, answer }),
        1..=20,
    );
    (any::<bool>(), any::<bool>(), calls).prop_map(|(thoth, deny_all, calls)| Plan {
        catalog: if thoth {
            Catalog::Thoth
        } else {
            Catalog::Thndrs
        },
        deny_all,
        calls,
    })
}

/// The starting content of file `i`: short for a.txt and b.txt, long for c.txt (so
/// that its reads show part of it, to fit the output caps, and a command printing it
/// is cut by them).
fn initial(i: usize) -> String {
    let name = &FILES[i][..1];
    let n = if i == 2 { 40 } else { 6 };
    (1..=n).map(|l| format!("{name}{l} line\n")).collect()
}

/// The tool call for `step` in `catalog`, looking at the workspace for a fresh hash.
fn tool_call(catalog: Catalog, root: &Path, step: &Step) -> Option<(&'static str, Value)> {
    let thoth = catalog == Catalog::Thoth;
    let hash_of = |file: usize| match std::fs::read(root.join(FILES[file])) {
        Ok(bytes) => Hash::of(&bytes).to_hex(),
        Err(_) => "0".repeat(64),
    };
    let expected = |file: usize, guard: Guard| match guard {
        Guard::None => None,
        Guard::Fresh => Some(hash_of(file)),
        Guard::Stale => Some("ab".repeat(32)),
    };
    Some(match *step {
        Step::Read { file, from, lines } if thoth => {
            let mut input = json!({"path": FILES[file], "offset": from});
            if let Some(l) = lines {
                input["limit"] = json!(l);
            }
            ("read_file", input)
        }
        Step::Read { file, from, lines } => {
            let mut input = json!({"path": FILES[file], "start_line": from});
            input["end_line"] = json!(from + lines.unwrap_or(40) - 1);
            ("read_file_range", input)
        }
        Step::Edit { file, line, guard } => {
            let old = format!("{}{line} ", &FILES[file][..1]);
            let new = format!("{old}more ");
            match (thoth, expected(file, guard)) {
                (true, _) => (
                    "edit_file",
                    json!({"path": FILES[file], "old_string": old, "new_string": new}),
                ),
                (false, None) => (
                    "replace_range",
                    json!({"path": FILES[file], "old_string": old, "new_string": new}),
                ),
                (false, Some(h)) => (
                    "write_patch",
                    json!({"patches": [{"op": "edit", "path": FILES[file], "old_string": old,
                        "new_string": new, "expected_before_hash": h}]}),
                ),
            }
        }
        Step::Overwrite { file, seed, guard } => {
            let name = &FILES[file][..1];
            let content: String = (1..=4 + u32::from(seed % 5))
                .map(|l| format!("{name}{l} v{seed}\n"))
                .collect();
            if thoth {
                (
                    "write_file",
                    json!({"path": FILES[file], "content": content}),
                )
            } else {
                let mut patch = json!({"op": "replace", "path": FILES[file], "content": content});
                if let Some(h) = expected(file, guard) {
                    patch["expected_before_hash"] = json!(h);
                }
                ("write_patch", json!({ "patches": [patch] }))
            }
        }
        Step::Shell { which } => {
            let argv: Vec<&str> = match which {
                0 => vec!["cat", "c.txt"],
                1 => vec!["sh", "-c", "echo b9 tail >> b.txt"],
                _ => vec!["ls"],
            };
            if thoth {
                (
                    "shell",
                    json!({"command": argv.join(" ").replace("sh -c ", "")}),
                )
            } else {
                ("run_shell", json!({ "argv": argv }))
            }
        }
        Step::BadInput if thoth => ("read_file", json!({"paht": "a.txt"})),
        Step::BadInput => ("read_file_range", json!({"path": "a.txt"})),
        Step::BigInput => {
            let content = "x".repeat(INPUT_BYTES_MAX + 100);
            let tool = if thoth { "write_file" } else { "create_file" };
            (tool, json!({"path": "big.txt", "content": content}))
        }
        Step::Again | Step::Message => return None,
    })
}

/// Runs `plan` live in a new workspace and home under `tmp`; returns the session folder.
fn run_live(tmp: &Path, plan: &Plan) -> PathBuf {
    let root = tmp.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    for (i, f) in FILES.iter().enumerate() {
        std::fs::write(root.join(f), initial(i)).unwrap();
    }
    let mut config = quick_config(plan.catalog);
    config.limits.input_bytes_max = INPUT_BYTES_MAX;
    config.limits.output_lines_max = 16;
    config.limits.output_bytes_max = 1200;
    config.limits.repeat_calls_max = 2;
    config.snapshot_every = 9;
    config.checkpoint_every = 13;
    let mut engine = Engine::start(&Home::at(&tmp.join("home")), &root, config).unwrap();
    if plan.deny_all {
        engine.set_approver(Box::new(Policy::DenyAll));
    }
    let mut last: Option<(&'static str, Value, Option<Answer>)> = None;
    for call in &plan.calls {
        let (tool, input, answer) = match &call.step {
            Step::Message => {
                engine.user_message("go on").unwrap();
                continue;
            }
            Step::Again => match &last {
                Some(l) => l.clone(),
                None => continue,
            },
            step => match tool_call(plan.catalog, &root, step) {
                Some((tool, input)) => (tool, input, call.answer),
                None => continue,
            },
        };
        engine.call_with(tool, input.clone(), answer).unwrap();
        last = Some((tool, input, answer));
    }
    let dir = engine.dir().to_path_buf();
    engine.end("done").unwrap();
    dir
}

/// One flipped decision: what was done, the log after it, and the seq verify must
/// report a problem at.
struct Flip {
    what: String,
    recs: Vec<Rec>,
    seq: usize,
}

fn without(event: &Value, keys: &[&str]) -> Value {
    let mut e = event.clone();
    let map = e.as_object_mut().unwrap();
    for k in keys {
        map.shift_remove(*k);
    }
    e
}

/// Every decision of the log flipped, one at a time.
#[expect(
    clippy::too_many_lines,
    reason = "a flat match over every kind of decision a record makes, one flip each"
)]
fn flips(recs: &[Rec]) -> Vec<Flip> {
    let mut out = Vec::new();
    let mut flip = |what: String, i: usize, event: Value| {
        let mut r = recs.to_vec();
        r[i].event = event;
        out.push(Flip {
            what,
            recs: r,
            seq: i,
        });
    };
    for (i, rec) in recs.iter().enumerate() {
        let e = &rec.event;
        let call = e["call"].as_str().unwrap_or("");
        match e["type"].as_str().unwrap_or("") {
            "tool_finished" => {
                let rule = e["refusal"]["rule"].as_str();
                let status = e["status"].as_str().unwrap_or("");
                if let Some(rule) = rule {
                    let mut ok = without(e, &["refusal"]);
                    ok["status"] = json!("ok");
                    flip(format!("{call}: {rule} refusal turned ok"), i, ok);
                    // The observed hash of a write rule lives in its refusal alone:
                    // dropped with it, nothing is left to decide on (see below).
                    if matches!(rule, "repeat" | "input") {
                        flip(
                            format!("{call}: {rule} refusal dropped, status {status} kept"),
                            i,
                            without(e, &["refusal"]),
                        );
                    }
                }
                if rule.is_none() && status == "ok" {
                    let mut blocked = e.clone();
                    blocked["status"] = json!("blocked");
                    blocked["refusal"] = json!({"rule": "repeat", "path": null});
                    flip(format!("{call}: ok call turned blocked"), i, blocked);
                }
                if status == "denied" {
                    let mut ok = e.clone();
                    ok["status"] = json!("ok");
                    flip(format!("{call}: denied call turned ok"), i, ok);
                }
                if e.get("output_blob").is_some() {
                    flip(
                        format!("{call}: output blob of a cut output dropped"),
                        i,
                        without(e, &["output_blob"]),
                    );
                }
            }
            "permission_decided" => {
                let answer = e["answer"].as_str().unwrap_or("");
                let source = e["source"].as_str().unwrap_or("");
                let flipped = if answer == "deny" { "once" } else { "deny" };
                let mut other = e.clone();
                other["answer"] = json!(flipped);
                flip(
                    format!("{call}: permission {answer} turned {flipped}"),
                    i,
                    other,
                );
                let mut other = e.clone();
                let flipped = if source == "allow_list" {
                    "user"
                } else {
                    other["answer"] = json!("always");
                    "allow_list"
                };
                other["source"] = json!(flipped);
                flip(
                    format!("{call}: permission by {source} turned {flipped}"),
                    i,
                    other,
                );
            }
            _ => {}
        }
    }
    // A write that went through, turned into its rule's refusal: its records removed.
    for rec in recs {
        let e = &rec.event;
        let (op, rule) = match e["op"].as_str() {
            Some("edit") => ("edit", "read_before_edit"),
            Some("replace") => ("replace", "read_before_overwrite"),
            _ => continue,
        };
        if e["type"] != "file_write" || e["status"] != "ok" || e["before"].is_null() {
            continue;
        }
        let call = e["call"].as_str().unwrap_or("").to_string();
        let mut r: Vec<Rec> = recs.to_vec();
        r.retain(|x| !(x.event["type"] == "file_write" && x.event["call"] == call.as_str()));
        let Some(fin) = r
            .iter()
            .position(|x| x.event["type"] == "tool_finished" && x.event["call"] == call.as_str())
        else {
            continue;
        };
        let ev = &mut r[fin].event;
        ev["status"] = json!("error");
        ev["output"] = json!("refused");
        ev["refusal"] = json!({"rule": rule, "path": e["path"], "observed": e["before"]["hash"]});
        out.push(Flip {
            what: format!("{call}: {op} write turned refused by {rule}"),
            recs: r,
            seq: fin,
        });
    }
    out
}

/// The session folder's snapshots, to put back after each flip.
fn snapshots(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let snaps = dir.join(cairn_store::SNAPSHOT_DIR);
    let Ok(entries) = std::fs::read_dir(&snaps) else {
        return Vec::new();
    };
    entries
        .map(|e| {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

fn restore(dir: &Path, log: &[u8], snaps: &[(PathBuf, Vec<u8>)]) {
    cairn_tests::replay::write_raw(dir, log);
    let _ = std::fs::remove_dir_all(dir.join(cairn_store::SNAPSHOT_DIR));
    for (p, bytes) in snaps {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
}

fn show(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  seq {:?} {:?}: {}", p.seq, p.kind, p.what))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `plan` live and checks the property; returns the kinds of flips made.
fn check(plan: &Plan) -> Result<Vec<String>, String> {
    let tmp = cairn_tests::ram_tempdir();
    let dir = run_live(tmp.path(), plan);
    let log = std::fs::read(cairn_store::log_path(&dir)).unwrap();
    let snaps = snapshots(&dir);
    let (_, problems) = verify(&dir).unwrap();
    if !problems.is_empty() {
        return Err(format!(
            "the live session does not verify:\n{}",
            show(&problems)
        ));
    }
    let recs = read_records(&dir);
    let fast = VerifyOptions {
        blobs: false,
        ..VerifyOptions::default()
    };
    let mut kinds = Vec::new();
    for f in flips(&recs) {
        for keep_snapshots in [true, false] {
            rechain(&dir, &f.recs);
            if !keep_snapshots {
                let _ = std::fs::remove_dir_all(dir.join(cairn_store::SNAPSHOT_DIR));
            }
            let (_, problems) = verify_with(&dir, &fast).unwrap();
            restore(&dir, &log, &snaps);
            if !problems.iter().any(|p| p.seq == Some(f.seq as u64)) {
                return Err(format!(
                    "{} (seq {}, snapshots {}): no problem reported at its seq; found:\n{}",
                    f.what,
                    f.seq,
                    if keep_snapshots { "kept" } else { "deleted" },
                    show(&problems)
                ));
            }
        }
        kinds.push(
            f.what
                .split_once(": ")
                .map_or(f.what.clone(), |(_, k)| k.to_string()),
        );
    }
    // Without the snapshots the session verifies clean all the same.
    let _ = std::fs::remove_dir_all(dir.join(cairn_store::SNAPSHOT_DIR));
    let (_, problems) = verify(&dir).unwrap();
    if !problems.is_empty() {
        return Err(format!("without its snapshots:\n{}", show(&problems)));
    }
    Ok(kinds)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: u32::try_from(cairn_tests::env_u64("CAIRN_PROPTEST_CASES", 16)).unwrap_or(16),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn live_sessions_verify_clean_and_every_flipped_decision_is_reported_at_its_seq(plan in plan()) {
        if let Err(e) = check(&plan) {
            prop_assert!(false, "{e}\nplan: {plan:#?}");
        }
    }
}

/// A fixed session that makes every kind of decision at least once, so that each kind
/// of flip is checked on every run, whatever the random sessions draw.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "a data table: two fixed sessions (one per catalog) that make every kind of decision, checked by one loop"
)]
fn every_kind_of_flip_is_reported_at_its_seq() {
    use Step::*;
    let c = |step, answer| Call { step, answer };
    let thoth = Plan {
        catalog: Catalog::Thoth,
        deny_all: false,
        calls: vec![
            c(
                Edit {
                    file: 0,
                    line: 1,
                    guard: Guard::None,
                },
                None,
            ),
            c(
                Read {
                    file: 0,
                    from: 1,
                    lines: None,
                },
                None,
            ),
            c(
                Edit {
                    file: 0,
                    line: 1,
                    guard: Guard::None,
                },
                Some(Answer::Deny),
            ),
            c(
                Edit {
                    file: 0,
                    line: 3,
                    guard: Guard::None,
                },
                Some(Answer::Always),
            ),
            c(
                Edit {
                    file: 0,
                    line: 2,
                    guard: Guard::None,
                },
                None,
            ),
            c(
                Read {
                    file: 2,
                    from: 1,
                    lines: Some(5),
                },
                None,
            ),
            // Prints all 40 lines of c.txt: an output the caps cut.
            c(Shell { which: 0 }, Some(Answer::Once)),
            c(
                Overwrite {
                    file: 2,
                    seed: 1,
                    guard: Guard::None,
                },
                None,
            ),
            c(
                Read {
                    file: 2,
                    from: 1,
                    lines: None,
                },
                None,
            ),
            c(Again, None),
            c(Again, None),
            // The rest of c.txt, in pages: a read shows what fits the output caps.
            c(
                Read {
                    file: 2,
                    from: 11,
                    lines: Some(10),
                },
                None,
            ),
            c(
                Read {
                    file: 2,
                    from: 21,
                    lines: Some(10),
                },
                None,
            ),
            c(
                Read {
                    file: 2,
                    from: 31,
                    lines: Some(10),
                },
                None,
            ),
            c(
                Overwrite {
                    file: 2,
                    seed: 2,
                    guard: Guard::None,
                },
                Some(Answer::Once),
            ),
            c(Shell { which: 1 }, None),
            c(BadInput, None),
            c(BigInput, None),
        ],
    };
    let thndrs = Plan {
        catalog: Catalog::Thndrs,
        deny_all: true,
        calls: vec![
            c(
                Read {
                    file: 1,
                    from: 1,
                    lines: None,
                },
                None,
            ),
            c(
                Overwrite {
                    file: 1,
                    seed: 3,
                    guard: Guard::Stale,
                },
                Some(Answer::Once),
            ),
            c(
                Overwrite {
                    file: 1,
                    seed: 3,
                    guard: Guard::Fresh,
                },
                None,
            ),
            c(
                Edit {
                    file: 1,
                    line: 1,
                    guard: Guard::Fresh,
                },
                Some(Answer::Once),
            ),
        ],
    };
    let mut kinds: Vec<String> = Vec::new();
    for plan in [thoth, thndrs] {
        kinds.extend(check(&plan).unwrap_or_else(|e| panic!("{e}")));
    }
    kinds.sort();
    kinds.dedup();
    let expected = [
        "read_before_edit refusal turned ok",
        "read_before_overwrite refusal turned ok",
        "stale_write refusal turned ok",
        "repeat refusal turned ok",
        "repeat refusal dropped, status blocked kept",
        "input refusal turned ok",
        "input refusal dropped, status error kept",
        "ok call turned blocked",
        "denied call turned ok",
        "output blob of a cut output dropped",
        "permission deny turned once",
        "permission once turned deny",
        "permission always turned deny",
        "permission by user turned allow_list",
        "permission by policy turned allow_list",
        "permission by allow_list turned user",
        "edit write turned refused by read_before_edit",
        "replace write turned refused by read_before_overwrite",
    ];
    for k in expected {
        assert!(kinds.iter().any(|x| x == k), "no flip {k:?} in {kinds:#?}");
    }
}
