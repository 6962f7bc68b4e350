//! Real bash as the oracle of the consent analysis (issue 40, item 3): generated lines
//! made of granted programs (`cairn_tests::bashgen`) run in real `bash -c` and `sh -c`
//! in a fresh workspace each; a line that ran the marker program `cairnmark` (not
//! granted) or wrote into `out/` beside the workspace, while the `shell` tool or the
//! hook would have run it without asking, is a failure. A sample of each class also
//! runs through a real engine whose approver denies and records every question.
//!
//! `CAIRN_ORACLE_LINES=N` (default 1230: 30 of each class) and `CAIRN_ORACLE_SEED=S`
//! (default 40) choose the corpus; `CAIRN_ORACLE_ENGINE_LINES=N` the engine's lines per
//! class (default 30); `CAIRN_ORACLE_FAILURES=PATH` writes every failure there, one per
//! line.

use std::time::Duration;

use cairn_tests::bashgen::{self, Class, Places, Template};
use cairn_tests::oracle::{self, Config, Lab};

/// The share of harmless lines the allow list must cover: a harness that only ever
/// saw "ask" would prove nothing.
const HARMLESS_COVERED_PERCENT_MIN: u64 = 50;

fn template(text: &str) -> Template {
    Template {
        class: Class::Control,
        text: text.to_string(),
    }
}

#[test]
fn the_harness_sees_the_marker_run_and_writes_into_out_in_both_shells() {
    let lab = Lab::new();
    let slot = lab.slot("check");
    let (name, path, out) = slot.places(true);
    let places = Places {
        mark_name: &name,
        mark_path: &path,
        out_dir: &out,
    };
    let m = bashgen::MARK_NAME;
    let a = bashgen::MARK_PATH;
    let o = bashgen::OUT_DIR;
    let timeout = Duration::from_secs(5);
    let template_dir = lab.path().join("template");
    // (line, marker ran, out written) in every shell.
    for (text, marker, written) in [
        (format!("{m}"), true, false),
        (format!("echo x; {a} y"), true, false),
        (format!("{m} > /dev/null &"), true, false),
        (format!("echo x > {o}/f"), false, true),
        ("echo x > link/f".to_string(), false, true),
        ("echo x > ../out/f".to_string(), false, true),
        (format!("echo '{m}' > s.txt; cat s.txt"), false, false),
        (
            "git status --short && git diff --stat".to_string(),
            false,
            false,
        ),
    ] {
        let line = template(&text).render(&places);
        for sh in oracle::SHELLS {
            let e = slot.run(&template_dir, sh, &line, timeout);
            assert_eq!(
                (e.marker, e.out, e.timed_out),
                (marker, written, false),
                "{sh}: {line:?}"
            );
        }
    }
    // A line past its time limit is killed with its group, and says so.
    let started = std::time::Instant::now();
    let e = slot.run(
        &template_dir,
        "bash",
        "cat /dev/zero > /dev/null",
        Duration::from_millis(300),
    );
    assert!(e.timed_out && !e.marker);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn the_judge_lets_through_what_the_engine_granted_and_nothing_else() {
    let lab = Lab::new();
    let engine = oracle::EngineRun::start(&lab);
    let granted = oracle::Judge::new(engine.state().clone());
    let nothing = oracle::Judge::new(cairn_engine::State::default());
    let ws = lab.path().join("template");
    let both = oracle::LetThrough {
        tool: true,
        hook: true,
    };
    for (line, with_grants) in [
        ("echo hi && cat a.txt | sort", both),
        ("git status --short; [ -f a.txt ] && wc -l a.txt", both),
        ("echo $(cairnmark)", oracle::LetThrough::default()),
        ("cairnmark", oracle::LetThrough::default()),
        ("rm -f a.txt", oracle::LetThrough::default()),
    ] {
        assert_eq!(granted.let_through(line, &ws), with_grants, "{line}");
        assert_eq!(
            nothing.let_through(line, &ws),
            oracle::LetThrough::default(),
            "{line}"
        );
    }
    engine.end();
}

/// Guards against a line made of granted programs that makes bash run another program
/// (or write outside the workspace) without a question.
#[test]
fn no_line_of_granted_programs_runs_a_hidden_program_or_writes_outside_unasked() {
    let classes = Class::ALL.len() as u64;
    let config = Config {
        seed: cairn_tests::env_u64("CAIRN_ORACLE_SEED", 40),
        lines: cairn_tests::env_u64("CAIRN_ORACLE_LINES", 30 * classes),
        threads: 2,
        line_timeout_ms: 5000,
        engine_lines_per_class: cairn_tests::env_u64("CAIRN_ORACLE_ENGINE_LINES", 30),
        progress_lines: 10_000,
    };
    let report = oracle::run(&config);
    eprintln!("{}", report.class_table());
    eprint!("{}", report.notes());
    eprintln!("{}", report.summary());
    let failures = report.failure_list();
    if let Ok(path) = std::env::var("CAIRN_ORACLE_FAILURES") {
        std::fs::write(&path, &failures).unwrap();
        eprintln!("failures written to {path}");
    }
    if config.lines >= classes {
        assert_eq!(oracle::classes_seen(&report).len(), Class::ALL.len());
    }
    let stats = report.by_class();
    if let Some(h) = stats.get(&Class::Harmless).filter(|h| h.lines > 0) {
        assert!(
            h.covered * 100 >= h.lines * HARMLESS_COVERED_PERCENT_MIN,
            "only {} of {} harmless lines are covered by the allow list",
            h.covered,
            h.lines
        );
    }
    // The oracle saw something run: control lines run the marker plainly (and ask).
    assert!(stats.get(&Class::Control).is_none_or(|c| c.effects > 0));
    assert!(
        report.failures().is_empty() && report.engine_failures().is_empty(),
        "{} lines ran the marker or wrote into out/ without a question \
         (CAIRN_ORACLE_SEED={} CAIRN_ORACLE_LINES={}):\n{failures}{}",
        report.failures().len() + report.engine_failures().len(),
        config.seed,
        config.lines,
        report.summary()
    );
}
