//! A session driven by a model, killed during a slow call, resumed with its
//! conversation intact: the model is sent the earlier turns and, for the interrupted
//! call, the result the resume recorded (what is known of it), then answers; the
//! session verifies clean.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_engine::agent::{self, AgentConfig, Stop};
use cairn_engine::event::{Event, ProcKind, ShellPhase, Status};
use cairn_engine::permission::Policy;
use cairn_engine::{Engine, Finding, Home, InterruptedOutcome, ResumeOptions};
use cairn_tests::http::{Server, openai_stream};
use serde_json::{Value, json};

const RESUME_HELPER: &str = env!("CARGO_BIN_EXE_resume_helper");
const TASK: &str = "write notes.txt, then wait for the build";

fn events(dir: &Path) -> Vec<Event> {
    let Ok(reader) = cairn_store::LogReader::open(dir) else {
        return Vec::new();
    };
    let Ok(records) = reader.records() else {
        return Vec::new();
    };
    records
        .map_while(Result::ok)
        .filter_map(|r| cairn_engine::fold::parse(&r).ok().map(|r| r.event))
        .collect()
}

/// What the third request must hold; `Err` names what is missing.
fn check_resumed_request(body: &Value) -> Result<(), String> {
    let msgs = body["messages"]
        .as_array()
        .ok_or("no messages in the request")?;
    let roles: Vec<&str> = msgs.iter().filter_map(|m| m["role"].as_str()).collect();
    if roles != ["system", "user", "assistant", "tool", "assistant", "tool"] {
        return Err(format!("roles {roles:?}"));
    }
    if msgs[1]["content"] != TASK {
        return Err(format!("task {}", msgs[1]));
    }
    let first_call = &msgs[2]["tool_calls"][0];
    if first_call["id"] != "call_1" || first_call["function"]["name"] != "write_file" {
        return Err(format!("turn 1 {}", msgs[2]));
    }
    if msgs[3]["tool_call_id"] != "call_1" {
        return Err(format!("result 1 {}", msgs[3]));
    }
    let second_call = &msgs[4]["tool_calls"][0];
    if second_call["id"] != "call_2" || second_call["function"]["name"] != "shell" {
        return Err(format!("turn 2 {}", msgs[4]));
    }
    let result = msgs[5]["content"].as_str().unwrap_or("");
    if msgs[5]["tool_call_id"] != "call_2"
        || !result.starts_with("interrupted: the session stopped during this call and was resumed")
        || !result.contains("outcome ")
        || !result.contains("sleep 30")
    {
        return Err(format!("result 2 {}", msgs[5]));
    }
    Ok(())
}

/// Turn 1 writes a file, turn 2 runs `sleep 30` (killed there), turn 3 (after the
/// resume) answers "resumed ok" when the conversation is as it must be.
fn server() -> Server {
    Server::start(|req, n| match n {
        0 => openai_stream(
            "Writing notes.",
            &[(
                "call_1",
                "write_file",
                json!({"path": "notes.txt", "content": "first\n"}),
            )],
            None,
        ),
        1 => openai_stream(
            "",
            &[("call_2", "shell", json!({"command": "sleep 30"}))],
            None,
        ),
        _ => match check_resumed_request(&req.json()) {
            Ok(()) => openai_stream("resumed ok", &[], None),
            Err(e) => openai_stream(&format!("bad conversation: {e}"), &[], None),
        },
    })
}

/// Runs the helper's agent loop until `sleep 30` runs, then SIGKILLs it; returns the
/// session folder.
fn crash_during_sleep(home: &Home, root: &Path, url: &str) -> PathBuf {
    let mut child = Command::new(RESUME_HELPER)
        .arg("agent")
        .arg(&home.root)
        .arg(root)
        .arg(url)
        .arg(TASK)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    let session = line.strip_prefix("session ").unwrap().to_string();
    let dir = home.project(root).session_dir(&session);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let running = events(&dir).iter().any(|e| {
            matches!(e, Event::ShellExec(x)
                if x.kind == ProcKind::Foreground && x.phase == ShellPhase::Started)
        });
        if running {
            break;
        }
        assert!(Instant::now() < deadline, "sleep 30 never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    cairn_tests::sigkill(&mut child).unwrap();
    dir
}

#[test]
fn a_model_session_killed_during_a_call_resumes_with_its_conversation_and_the_calls_outcome() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    let home = Home::at(&base.join("home"));
    let server = server();

    let dir = crash_during_sleep(&home, &root, &server.url);
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "first\n"
    );
    assert_eq!(server.seen().len(), 2);

    let (mut engine, report) = Engine::resume(&home, &dir, ResumeOptions::default()).unwrap();
    let interrupted: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| matches!(f, Finding::CallInterrupted { .. }))
        .collect();
    assert_eq!(interrupted.len(), 1, "{:#?}", report.findings);
    let Finding::CallInterrupted { tool, outcome, .. } = interrupted[0] else {
        unreachable!()
    };
    assert_eq!(tool, "shell");
    // The helper's `sleep 30` outlives it: the resume finds it and stops it.
    assert!(
        matches!(
            outcome,
            InterruptedOutcome::Stopped | InterruptedOutcome::Unknown
        ),
        "{outcome}: {report:#?}"
    );

    engine.set_approver(Box::new(Policy::AllowAll));
    let mut provider = cairn_tests::http::openai_provider(&server);
    let run = agent::run(
        &mut engine,
        provider.as_mut(),
        None,
        &AgentConfig::default(),
        |_| {},
    )
    .unwrap();
    let third = server.seen()[2].json();
    check_resumed_request(&third).unwrap_or_else(|e| panic!("{e}\n{third:#}"));
    let msgs = third["messages"].as_array().unwrap();
    let told = msgs[5]["content"].as_str().unwrap();
    assert!(told.contains(&format!("outcome {outcome}")), "{told}");
    assert_eq!((run.turns, run.calls, run.stop), (1, 0, Stop::Answered));
    assert_eq!(run.answer, "resumed ok");
    engine.end("answered").unwrap();

    // The log: the interrupted call's result as the model saw it, the final answer.
    let evs = events(&dir);
    let finished: Vec<(Status, String)> = evs
        .iter()
        .filter_map(|e| match e {
            Event::ToolFinished(f) => Some((f.status, f.output.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), 2, "{finished:#?}");
    assert_eq!(finished[0].0, Status::Ok);
    assert_eq!(
        finished[1],
        (Status::Interrupted, told.to_string()),
        "the model was told what the log records"
    );
    let last_turn = evs
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::ModelTurn {
                text, tool_calls, ..
            } => Some((text.clone(), tool_calls.len())),
            _ => None,
        })
        .unwrap();
    assert_eq!(last_turn, ("resumed ok".to_string(), 0));
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}
