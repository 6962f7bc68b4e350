//! Resuming a script whose step was interrupted while it ran a command: its effect is
//! unknown, so it runs again only when someone says so (asked, or asked for up front),
//! and what was decided is recorded in `session_resumed`. A resume that cannot go on
//! (a script that is not the session's, a model with nothing to go on with) records
//! nothing.
//!
//! The interrupted session is crafted as a crash leaves it: the script's first step
//! ran, then the log holds the `touch marker` step's `tool_started` and its command's
//! `shell_exec` start, and nothing after. The command did not run (there is no
//! `marker`), which is what a resume cannot know.

use std::path::{Path, PathBuf};

use cairn_engine::event::{
    Event, InterruptedStep, ProcKind, RerunSource, ShellExec, ShellPhase, Status,
};
use cairn_engine::script::{self, InterruptedCall, Step};
use cairn_engine::{
    Catalog, Engine, EngineConfig, EngineError, GoOn, Home, Rerun, ResumeOptions, ResumeReport,
};
use cairn_store::Options;
use serde_json::json;

const SCRIPT: &str = r#"{"tool":"read_file","input":{"path":"a.txt"}}
{"tool":"shell","input":{"command":"touch marker"}}
{"tool":"read_file","input":{"path":"b.txt"}}
"#;

struct Case {
    _tmp: tempfile::TempDir,
    home: Home,
    root: PathBuf,
    dir: PathBuf,
    steps: Vec<(usize, Step)>,
}

/// A session interrupted while step 2 (`touch marker`) ran.
fn interrupted() -> Case {
    let tmp = cairn_tests::ram_tempdir();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "one\n").unwrap();
    std::fs::write(root.join("b.txt"), "bee\n").unwrap();
    let home = Home::at(&base.join("home"));
    let steps = script::parse(SCRIPT).unwrap();
    let mut e = Engine::start(&home, &root, EngineConfig::new(Catalog::Thoth)).unwrap();
    script::run(&mut e, &steps[..1], |_| {}).unwrap();
    let dir = e.dir().to_path_buf();
    drop(e);
    let (mut log, _) = cairn_tests::open_writer(&dir, Options::default()).unwrap();
    log.append(&Event::ToolStarted {
        at: None,
        call: "c2".into(),
        tool: "shell".into(),
        input: json!({"command": "touch marker"}),
        input_hash: None,
        mcp: None,
        observed: None,
    })
    .unwrap();
    log.append(&Event::ShellExec(ShellExec {
        call: "c2".into(),
        id: None,
        argv: vec!["sh".into(), "-c".into(), "touch marker".into()],
        argv_hash: None,
        cwd: String::new(),
        // A pid with a start time no process has: gone at resume.
        pid: Some(1),
        start_time: Some(u64::MAX),
        kind: ProcKind::Foreground,
        timeout_ms: Some(1000),
        log: None,
        sandbox: None,
        phase: ShellPhase::Started,
    }))
    .unwrap();
    log.sync().unwrap();
    drop(log);
    cairn_tests::wait_unlocked(&dir);
    Case {
        _tmp: tmp,
        home,
        root,
        dir,
        steps,
    }
}

fn resume(c: &Case, then: GoOn) -> Result<(Engine, ResumeReport), EngineError> {
    cairn_tests::wait_unlocked(&c.dir);
    Engine::resume(
        &c.home,
        &c.dir,
        ResumeOptions {
            config: None,
            then,
            ..Default::default()
        },
    )
}

fn with_script(c: &Case, rerun: Rerun) -> GoOn {
    GoOn::Script {
        steps: c.steps.clone(),
        rerun,
    }
}

/// Resumes with the script, runs what is left of it and ends; returns the report.
fn resume_and_finish(c: &Case, rerun: Rerun) -> ResumeReport {
    let (mut e, report) = resume(c, with_script(c, rerun)).unwrap();
    let from = report.script.as_ref().unwrap().from;
    script::run(&mut e, &c.steps[from..], |_| {}).unwrap();
    e.end("script finished").unwrap();
    report
}

fn verify_clean(dir: &Path) {
    let (_, problems) = cairn_replay::verify(dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The `interrupted_steps` of every `session_resumed` of the log.
fn recorded_decisions(dir: &Path) -> Vec<Vec<InterruptedStep>> {
    cairn_store::LogReader::open(dir)
        .unwrap()
        .records()
        .unwrap()
        .filter_map(
            |r| match cairn_engine::fold::parse(&r.unwrap()).unwrap().event {
                Event::SessionResumed {
                    interrupted_steps, ..
                } => Some(interrupted_steps),
                _ => None,
            },
        )
        .collect()
}

/// The tools of the calls that ended ok, in order.
fn ok_calls(dir: &Path) -> Vec<String> {
    let mut tools = std::collections::HashMap::new();
    let mut out = Vec::new();
    for r in cairn_store::LogReader::open(dir)
        .unwrap()
        .records()
        .unwrap()
    {
        match cairn_engine::fold::parse(&r.unwrap()).unwrap().event {
            Event::ToolStarted { call, tool, .. } => {
                tools.insert(call, tool);
            }
            Event::ToolFinished(f) if f.status == Status::Ok => out.push(tools[&f.call].clone()),
            _ => {}
        }
    }
    out
}

fn decision(rerun: bool, decided_by: RerunSource) -> InterruptedStep {
    InterruptedStep {
        call: "c2".into(),
        step: 2,
        tool: "shell".into(),
        rerun,
        decided_by,
    }
}

#[test]
fn an_interrupted_command_is_not_run_again_without_anyone_to_ask() {
    let c = interrupted();
    let report = resume_and_finish(&c, Rerun::No);
    let point = report.script.unwrap();
    assert_eq!(
        point.from, 2,
        "step 2 is skipped: the script goes on at step 3"
    );
    assert_eq!(
        point.decision,
        Some(decision(false, RerunSource::Unattended))
    );
    assert!(!c.root.join("marker").exists(), "touch marker ran again");
    assert_eq!(
        recorded_decisions(&c.dir),
        [vec![decision(false, RerunSource::Unattended)]]
    );
    assert_eq!(ok_calls(&c.dir), ["read_file", "read_file"]);
    verify_clean(&c.dir);
    // The step not run again counts as done for a later resume: nothing is left.
    let (e, report) = resume(&c, with_script(&c, Rerun::Yes)).unwrap();
    let point = report.script.unwrap();
    assert_eq!(
        (point.from, point.interrupted, point.decision),
        (3, None, None)
    );
    e.end("nothing left").unwrap();
    assert!(!c.root.join("marker").exists());
    verify_clean(&c.dir);
}

#[test]
fn an_interrupted_command_runs_again_when_asked_for_up_front() {
    let c = interrupted();
    let report = resume_and_finish(&c, Rerun::Yes);
    let point = report.script.unwrap();
    assert_eq!(point.from, 1, "step 2 runs again");
    assert_eq!(point.decision, Some(decision(true, RerunSource::Requested)));
    assert!(c.root.join("marker").exists());
    assert_eq!(
        recorded_decisions(&c.dir),
        [vec![decision(true, RerunSource::Requested)]]
    );
    assert_eq!(ok_calls(&c.dir), ["read_file", "shell", "read_file"]);
    verify_clean(&c.dir);
}

#[test]
fn an_interrupted_command_runs_again_when_the_user_answers_yes() {
    for answer in [true, false] {
        let c = interrupted();
        let asked = std::rc::Rc::new(std::cell::RefCell::new(Vec::<InterruptedCall>::new()));
        let seen = asked.clone();
        let ask = Rerun::Ask(Box::new(move |i: &InterruptedCall| {
            seen.borrow_mut().push(i.clone());
            answer
        }));
        let report = resume_and_finish(&c, ask);
        let [i] = asked.borrow().clone().try_into().unwrap();
        assert_eq!(
            (i.step, i.line, i.call.as_str(), i.shown()),
            (2, 2, "c2", "shell: `touch marker`".to_string())
        );
        assert_eq!(
            report.script.unwrap().decision,
            Some(decision(answer, RerunSource::User))
        );
        assert_eq!(c.root.join("marker").exists(), answer);
        assert_eq!(
            recorded_decisions(&c.dir),
            [vec![decision(answer, RerunSource::User)]]
        );
        verify_clean(&c.dir);
    }
}

#[test]
fn an_interrupted_read_runs_again_without_a_question() {
    let c = interrupted();
    // The crash came during step 3 this time: a read, whose outcome is known.
    let (e, _) = resume_and_finish_with(&c, Rerun::Yes, 1);
    drop(e);
    let (mut log, _) = cairn_tests::open_writer(&c.dir, Options::default()).unwrap();
    log.append(&Event::ToolStarted {
        at: None,
        call: "c4".into(),
        tool: "read_file".into(),
        input: json!({"path": "b.txt"}),
        input_hash: None,
        mcp: None,
        observed: None,
    })
    .unwrap();
    log.sync().unwrap();
    drop(log);
    let ask = Rerun::Ask(Box::new(|i: &InterruptedCall| {
        panic!("asked about {i:?}, which only read")
    }));
    let report = resume_and_finish(&c, ask);
    let point = report.script.unwrap();
    assert_eq!(point.from, 2, "the read runs again");
    assert_eq!(point.interrupted.map(|i| i.call), Some("c4".to_string()));
    assert_eq!(point.decision, None);
    assert_eq!(recorded_decisions(&c.dir)[1], []);
    assert_eq!(ok_calls(&c.dir), ["read_file", "shell", "read_file"]);
    verify_clean(&c.dir);
}

/// Resumes with the script and runs `n` more of its steps, without ending.
fn resume_and_finish_with(c: &Case, rerun: Rerun, n: usize) -> (Engine, ResumeReport) {
    let (mut e, report) = resume(c, with_script(c, rerun)).unwrap();
    let from = report.script.as_ref().unwrap().from;
    script::run(&mut e, &c.steps[from..from + n], |_| {}).unwrap();
    (e, report)
}

fn log_bytes(dir: &Path) -> Vec<u8> {
    std::fs::read(cairn_store::log_path(dir)).unwrap()
}

#[test]
fn a_script_that_is_not_the_sessions_is_refused_and_nothing_is_recorded() {
    let c = interrupted();
    let before = log_bytes(&c.dir);
    let other = |text: &str| GoOn::Script {
        steps: script::parse(text).unwrap(),
        rerun: Rerun::Yes,
    };
    let cases = [
        (
            "{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n# another command\n{\"tool\":\"shell\",\"input\":{\"command\":\"touch other\"}}\n",
            r#"the session does not follow this script: step 2 (line 3) is shell {"command":"touch other"}, but the log has shell {"command":"touch marker"}"#,
        ),
        (
            "{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n{\"tool\":\"run_shell\",\"input\":{\"argv\":[\"touch\",\"marker\"]}}\n",
            r#"the session does not follow this script: step 2 (line 2) is run_shell {"argv":["touch","marker"]}, but the log has shell {"command":"touch marker"}"#,
        ),
        (
            "{\"user\":\"hello\"}\n",
            r#"the session does not follow this script: step 1 (line 1) is user message "hello", but the log has read_file {"path":"a.txt"}"#,
        ),
        (
            "{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n",
            r#"the session does not follow this script: step 2 (past its end) is missing, but the log has shell {"command":"touch marker"}"#,
        ),
    ];
    for (script, want) in cases {
        let err = resume(&c, other(script)).err().unwrap();
        assert!(matches!(err, EngineError::ScriptMismatch { .. }), "{err:?}");
        assert_eq!(err.to_string(), want);
        assert!(log_bytes(&c.dir) == before, "the log changed: {want}");
    }
    // A model with no conversation to go on with (a script session), and no task.
    let err = resume(&c, GoOn::Model { task: false }).err().unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "session {} has no conversation for a model to go on with",
            c.dir.file_name().unwrap().to_string_lossy()
        )
    );
    assert!(log_bytes(&c.dir) == before, "the log changed");
    // Nothing held the session: the right script resumes it.
    let report = resume_and_finish(&c, Rerun::No);
    assert_eq!(report.script.unwrap().from, 2);
    verify_clean(&c.dir);
}
