//! The on-disk format of the events whose Rust types were reshaped: lines written
//! before (`testdata/recorded.jsonl`: every shape of `shell_exec`, a `session_resumed`,
//! a fork's `session_started` with an inherited conversation) parse, and serialise
//! back to exactly the bytes that were written.

use super::*;
use crate::state::{ConversationEntry, ModelCall, Record, State};

/// Real lines of three sessions recorded by cairn before `shell_exec` was split into
/// phases and the conversation was typed. Each line still checks against its own hash.
const RECORDED: &str = include_str!("../../testdata/recorded.jsonl");

/// Each recorded line's event text and its parse.
fn recorded() -> Vec<(&'static str, Record)> {
    RECORDED
        .lines()
        .map(|line| {
            let f = cairn_store::check_line(line.as_bytes())
                .unwrap_or_else(|e| panic!("{}: {line}", e.what));
            let text = std::str::from_utf8(f.event).unwrap();
            let event: Event = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
            let record = Record {
                seq: f.seq,
                ts: f.ts.to_string(),
                hash: f.hash,
                event,
            };
            (text, record)
        })
        .collect()
}

#[test]
fn recorded_events_serialise_to_the_bytes_written() {
    let all = recorded();
    assert_eq!(all.len(), 28);
    for (text, r) in all {
        assert_eq!(serde_json::to_string(&r.event).unwrap(), text);
    }
}

/// One line per `shell_exec`: call, kind, phase, then for an end its status and the
/// end fields it has.
fn shape(x: &ShellExec) -> String {
    let mut s = format!("{} {:?} {}", x.call, x.kind, x.phase_name());
    if let ShellPhase::Finished(e) = &x.phase {
        s.push_str(&format!(" {}", e.status));
        for (name, set) in [
            ("exit", e.exit_code.is_some()),
            ("signal", e.signal.is_some()),
            ("elapsed", e.elapsed_us.is_some()),
            (
                "bytes",
                e.stdout_bytes.is_some() && e.stderr_bytes.is_some(),
            ),
            ("streams", e.stdout.is_some() && e.stderr.is_some()),
            ("log_blob", e.log_blob.is_some()),
            ("error", e.error.is_some()),
        ] {
            if set {
                s.push(' ');
                s.push_str(name);
            }
        }
    }
    for (name, set) in [
        ("id", x.id.is_some()),
        ("pid", x.pid.is_some()),
        ("start_time", x.start_time.is_some()),
        ("timeout", x.timeout_ms.is_some()),
        ("log", x.log.is_some()),
    ] {
        if set {
            s.push_str(" +");
            s.push_str(name);
        }
    }
    s
}

#[test]
fn recorded_shell_exec_shapes_parse_into_their_phase() {
    let shapes: Vec<String> = recorded()
        .iter()
        .filter_map(|(_, r)| match &r.event {
            Event::ShellExec(x) => Some(shape(x)),
            _ => None,
        })
        .collect();
    let fg = "+pid +start_time +timeout";
    let bg = "+id +pid +start_time +log";
    let fg_end = "elapsed bytes streams +pid +start_time +timeout";
    assert_eq!(
        shapes,
        [
            // thndrs: could not start, foreground then background; each kind run.
            "c1 Foreground finished failed elapsed error +timeout".to_string(),
            format!("c2 Foreground started {fg}"),
            format!("c2 Foreground finished ok exit {fg_end}"),
            "c3 Background finished failed elapsed error".to_string(),
            format!("c4 Background started {bg}"),
            "c4 Background finished ok exit elapsed log_blob +id +pid +log".to_string(),
            // thoth, foreground: ok, exit 3, killed by a signal, timeout, cancelled.
            format!("c1 Foreground started {fg}"),
            format!("c1 Foreground finished ok exit {fg_end}"),
            format!("c2 Foreground started {fg}"),
            format!("c2 Foreground finished failed exit {fg_end}"),
            format!("c3 Foreground started {fg}"),
            format!("c3 Foreground finished failed signal {fg_end}"),
            format!("c4 Foreground started {fg}"),
            format!("c4 Foreground finished timeout signal {fg_end}"),
            format!("c5 Foreground started {fg}"),
            format!("c5 Foreground finished cancelled signal {fg_end}"),
            // background: ok, failed, cancelled, lost at resume.
            format!("c6 Background started {bg}"),
            "c6 Background finished ok exit elapsed log_blob +id +pid +log".to_string(),
            format!("c7 Background started {bg}"),
            "c7 Background finished failed exit elapsed log_blob +id +pid +log".to_string(),
            format!("c8 Background started {bg}"),
            "c8 Background finished cancelled signal elapsed log_blob +id +pid +log".to_string(),
            format!("c9 Background started {bg}"),
            "c9 Background finished lost error +id +pid +start_time +log".to_string(),
            format!("c11 Foreground started {fg}"),
            format!("c11 Foreground finished failed exit {fg_end}"),
        ]
    );
}

#[test]
fn a_shell_exec_whose_phase_and_fields_disagree_does_not_parse() {
    let check = |event: &str, expected: &str| {
        let e = serde_json::from_str::<Event>(event).unwrap_err();
        assert_eq!(e.to_string(), expected, "{event}");
    };
    let head = r#"{"type":"shell_exec","call":"c1","argv":["true"],"cwd":"","kind":"foreground""#;
    check(
        &format!(r#"{head},"phase":"started","status":"running","exit_code":0}}"#),
        "a started shell_exec has `exit_code`, which only a finished one has",
    );
    check(
        &format!(r#"{head},"phase":"started","status":"ok"}}"#),
        "a started shell_exec has a status other than running",
    );
    check(
        &format!(r#"{head},"phase":"finished","status":"running"}}"#),
        "a finished shell_exec has status running",
    );
    check(
        &format!(r#"{head},"phase":"finished"}}"#),
        "missing field `status`",
    );
}

#[test]
fn an_inherited_conversation_folds_to_entries_that_serialise_as_inherited() {
    let all = recorded();
    let (_, fork) = all
        .iter()
        .find(|(_, r)| matches!(&r.event, Event::SessionStarted(s) if s.inherited.is_some()))
        .unwrap();
    let Event::SessionStarted(s) = &fork.event else {
        unreachable!()
    };
    let inherited = &s.inherited.as_ref().unwrap().conversation;
    let mut state = State::default();
    state.apply(fork);
    let call = |id: &str, name: &str, input: &str| ModelCall {
        id: id.into(),
        name: name.into(),
        input: input.into(),
    };
    assert_eq!(
        state.conversation,
        [
            ConversationEntry::User {
                text: "do it".into()
            },
            ConversationEntry::Assistant {
                text: "sure".into(),
                tool_calls: vec![
                    call("t1", "read_file", r#"{"path":"a.txt","z":1,"a":[1.5,{"k":null}]}"#),
                    call("t2", "shell", r#"{"command":"exit 1"}"#),
                ],
            },
            ConversationEntry::Tool {
                call_id: "t1".into(),
                name: "read_file".into(),
                output: "     1\tchanged\n(lines 1-1 of 1, end of file)\nhash: cbeb7950aa328c4cf8da7a717ddd45858f5b9e40d3ec6b8d3ad329b887d789bd".into(),
                status: Status::Ok,
            },
            ConversationEntry::Tool {
                call_id: "t2".into(),
                name: "shell".into(),
                output: "exit code 1 in 5 ms\n".into(),
                status: Status::Error,
            },
        ]
    );
    let again: Vec<String> = state.conversation.iter().map(|e| e.to_json()).collect();
    assert_eq!(&again, inherited);
}
