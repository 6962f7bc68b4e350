//! Scripts drive a session without a model: JSON Lines, one step a line,
//! `{"tool": "...", "input": {...}}` or `{"user": "..."}`.

use std::ops::ControlFlow;

use serde::Deserialize;

use crate::engine::{CallOutcome, Engine};
use crate::event::Answer;
use crate::redact::{Counts, Redactor};
use cairn_core::scrub::{self, SecretKey};
use cairn_tools::{EngineError, Result};

/// One step of a script.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Tool {
        tool: String,
        input: serde_json::Value,
        /// The answer to this step's permission question, if it asks one.
        approve: Option<Answer>,
    },
    User(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    tool: Option<String>,
    input: Option<serde_json::Value>,
    approve: Option<String>,
    user: Option<String>,
}

/// Parses a whole script first, so that a bad line stops it before anything runs.
/// Blank lines and lines starting with `#` are skipped.
pub fn parse(text: &str) -> Result<Vec<(usize, Step)>> {
    let mut steps = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |what: String| EngineError::Script { line: n, what };
        let raw: RawStep = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        let step = match raw {
            RawStep {
                tool: Some(tool),
                input,
                approve,
                user: None,
            } => {
                let input = input.unwrap_or_else(|| serde_json::json!({}));
                if !input.is_object() {
                    return Err(bad("input must be a JSON object".into()));
                }
                let approve = match approve.as_deref() {
                    None => None,
                    Some("once") => Some(Answer::Once),
                    Some("always") => Some(Answer::Always),
                    Some("deny") => Some(Answer::Deny),
                    Some(a) => {
                        return Err(bad(format!(
                            "approve must be once, always or deny, not '{a}'"
                        )));
                    }
                };
                Step::Tool {
                    tool,
                    input,
                    approve,
                }
            }
            RawStep {
                user: Some(text),
                tool: None,
                input: None,
                approve: None,
            } => Step::User(text),
            _ => {
                return Err(bad(
                    "a step is {\"tool\": ..., \"input\": {...}} or {\"user\": \"...\"}".into(),
                ));
            }
        };
        steps.push((n, step));
    }
    Ok(steps)
}

/// What a caller of [`run_with`] sees of a script as it runs, and where it may stop it.
/// Permission questions are the engine's approver's ([`Engine::set_approver`]); the
/// records each step appends reach an observer ([`Engine::set_observer`]).
pub trait Hooks {
    /// Before a step (its script line, the step): `Break` stops the script there, the
    /// step not run. The engine is the caller's between steps (background processes,
    /// the allow list).
    fn before(&mut self, _engine: &mut Engine, _line: usize, _step: &Step) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    /// After a call step, with its outcome.
    fn after(&mut self, _outcome: &CallOutcome) {}
}

/// [`Hooks`] that only see each call's outcome.
struct Each<F>(F);

impl<F: FnMut(&CallOutcome)> Hooks for Each<F> {
    fn after(&mut self, outcome: &CallOutcome) {
        (self.0)(outcome)
    }
}

/// Runs the steps through the engine; `each` sees every call's outcome as it ends.
pub fn run(
    engine: &mut Engine,
    steps: &[(usize, Step)],
    each: impl FnMut(&CallOutcome),
) -> Result<Vec<CallOutcome>> {
    run_with(engine, steps, &mut Each(each))
}

/// Runs the steps through the engine with `hooks` around each one; returns the
/// outcomes of the calls that ran (fewer than the script's when a hook stopped it, or
/// the session was stopped by a signal: [`Engine::stopped`], the running call
/// cancelled and no step started after it).
pub fn run_with(
    engine: &mut Engine,
    steps: &[(usize, Step)],
    hooks: &mut dyn Hooks,
) -> Result<Vec<CallOutcome>> {
    let mut outcomes = Vec::new();
    for (line, step) in steps {
        if engine.stopped().is_some() || hooks.before(engine, *line, step).is_break() {
            break;
        }
        match step {
            Step::User(text) => engine.user_message(text)?,
            Step::Tool {
                tool,
                input,
                approve,
            } => {
                let out = engine.call_with(tool, input.clone(), *approve)?;
                hooks.after(&out);
                outcomes.push(out);
            }
        }
    }
    Ok(outcomes)
}

/// Where a script goes on in a session, read from its log before a resume records
/// anything (see [`resume_point`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ResumePoint {
    /// How many steps had finished: the index of the step to go on with.
    pub done: usize,
    /// The step at `done`, when its last call was interrupted (it never ended, or an
    /// earlier resume ended it `interrupted`) and no resume decided about it since.
    pub interrupted: Option<InterruptedCall>,
}

/// The interrupted call of a script step.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InterruptedCall {
    /// The step, from 1.
    pub step: usize,
    /// The step's line in the script.
    pub line: usize,
    pub call: String,
    pub tool: String,
    /// The input as `tool_started` recorded it (redacted).
    pub input: serde_json::Value,
}

impl InterruptedCall {
    /// The call as a person reads it: `tool: text` when the input is one string
    /// (a command line, a path), else `tool: {input as JSON}`.
    pub fn shown(&self) -> String {
        let text = match self.input.as_object() {
            Some(m) if m.len() == 1 => match m.values().next() {
                Some(serde_json::Value::String(s)) => format!("`{s}`"),
                _ => self.input.to_string(),
            },
            _ => self.input.to_string(),
        };
        format!("{}: {text}", self.tool)
    }
}

/// What a script's steps are compared with a log's records by, where the log holds
/// them redacted: the project's key of keyed hashes, and the redactor.
pub struct Secrets<'a> {
    /// The key the log's `text_hash` and `input_hash` were made with (none: a step
    /// matches a redacted record as an older log's does, below).
    pub key: Option<&'a SecretKey>,
    /// Redacts what a mismatch shows of a step, and the step compared with a message
    /// an older log holds redacted without its keyed hash.
    pub redactor: &'a Redactor,
}

/// Where a script goes on in the session at `dir`: the log's user messages and calls
/// are matched, in order, against the steps (tool and input). Where the log holds one
/// redacted, its keyed hash (`text_hash`, `input_hash`) under `secrets.key` is compared
/// with the step's: the same secret matches, another does not. A record redacted
/// without a hash (an older log, or no key) matches as it did then: a message whose
/// step redacts to it, an input of any value. A call that ended `interrupted` (or never
/// ended) had not finished, so the script goes on with that step, reported in
/// [`ResumePoint::interrupted`]: a resume runs it again as a new call, unless a
/// `session_resumed` decided not to (its `interrupted_steps`), which makes the step
/// done. Fails, naming the step and what differs (its secrets redacted), when the log's
/// steps are not the script's. Reads only: a resume checks this before it records
/// anything.
pub fn resume_point(
    dir: &std::path::Path,
    steps: &[(usize, Step)],
    secrets: &Secrets<'_>,
) -> Result<ResumePoint> {
    use crate::event::{Event, Status};
    let reader = cairn_store::LogReader::open(dir)?;
    let blobs = crate::fold::project_blobs(dir);
    let mut done = 0usize;
    // The call of step `done` that started and has not finished.
    let mut open: Option<InterruptedCall> = None;
    // The call of step `done` that ended interrupted, and was not run again since.
    let mut interrupted: Option<InterruptedCall> = None;
    // The step as the log would hold it: no secret of the script is shown.
    let mismatch = |i: usize, log_has: String| {
        let redacted = |s: String| secrets.redactor.redact_string(s, &mut Counts::new());
        let what = match steps.get(i) {
            // Equal once redacted: the secrets differ (their keyed hashes do).
            Some((_, step)) if redacted(shown_step(step)) == log_has => format!(
                "is {log_has} as the log has it, but with another secret in it than the log's"
            ),
            Some((_, step)) => format!(
                "is {}, but the log has {log_has}",
                redacted(shown_step(step))
            ),
            None => format!("is missing, but the log has {log_has}"),
        };
        EngineError::ScriptMismatch {
            step: i + 1,
            line: steps.get(i).map(|s| s.0),
            what,
        }
    };
    for r in reader.records()? {
        let r = r?;
        let Ok(rec) = crate::fold::parse_maybe_in(&r, blobs.as_ref()) else {
            continue;
        };
        match rec.event {
            Event::UserMessage {
                at: _,
                text,
                text_hash,
            } => match steps.get(done) {
                Some((_, Step::User(t)))
                    if text_matches(&text, text_hash.as_deref(), t, secrets) =>
                {
                    done += 1;
                    interrupted = None;
                }
                _ => return Err(mismatch(done, format!("user message {text:?}"))),
            },
            Event::ToolStarted {
                call,
                tool,
                input,
                input_hash,
                ..
            } => match steps.get(done) {
                Some((
                    line,
                    Step::Tool {
                        tool: t, input: i, ..
                    },
                )) if *t == tool && input_matches(&input, input_hash.as_deref(), i, secrets) => {
                    interrupted = None;
                    open = Some(InterruptedCall {
                        step: done + 1,
                        line: *line,
                        call,
                        tool,
                        input,
                    });
                }
                _ => return Err(mismatch(done, format!("{tool} {input}"))),
            },
            Event::ToolFinished(f) if open.as_ref().is_some_and(|o| o.call == f.call) => {
                if f.status == Status::Interrupted {
                    interrupted = open.take();
                } else {
                    open = None;
                    done += 1;
                }
            }
            Event::SessionResumed {
                interrupted_steps, ..
            } => {
                let skipped = interrupted.as_ref().is_some_and(|i| {
                    interrupted_steps
                        .iter()
                        .any(|s| s.call == i.call && !s.rerun)
                });
                if skipped {
                    interrupted = None;
                    done += 1;
                }
            }
            _ => {}
        }
    }
    Ok(ResumePoint {
        done,
        interrupted: open.or(interrupted),
    })
}

/// A step as the mismatch message shows it.
fn shown_step(step: &Step) -> String {
    match step {
        Step::User(text) => format!("user message {text:?}"),
        Step::Tool { tool, input, .. } => format!("{tool} {input}"),
    }
}

/// Whether the user message a log recorded is the script's: equal, or recorded
/// redacted with the keyed hash of the step's text; without a hash, equal to the step
/// redacted.
fn text_matches(recorded: &str, hash: Option<&str>, given: &str, secrets: &Secrets<'_>) -> bool {
    if recorded == given {
        return true;
    }
    match (hash, secrets.key) {
        (Some(hash), Some(key)) => scrub::text_hash(key, given) == hash,
        _ => secrets.redactor.redact(given, &mut Counts::new()) == recorded,
    }
}

/// Whether the input a log recorded is the script's: equal, or recorded redacted with
/// the keyed hash of the step's input, or in place of an oversized input (what it stood
/// for is not in the log to compare). Recorded redacted without a hash, it matches any.
fn input_matches(
    recorded: &serde_json::Value,
    hash: Option<&str>,
    given: &serde_json::Value,
    secrets: &Secrets<'_>,
) -> bool {
    if recorded == given || cairn_core::decide::oversized_input_bytes(recorded).is_some() {
        return true;
    }
    match (hash, secrets.key) {
        (Some(hash), Some(key)) => scrub::input_hash(key, given) == hash,
        _ => recorded.to_string().contains("[REDACTED:"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, Status};
    use crate::{Catalog, EngineConfig, Home, Record};

    /// Remembers the lines it was shown and stops before `stop_at`.
    struct Seen {
        lines: Vec<usize>,
        outcomes: Vec<CallOutcome>,
        stop_at: usize,
    }

    impl Hooks for Seen {
        fn before(&mut self, _: &mut Engine, line: usize, _: &Step) -> ControlFlow<()> {
            if line == self.stop_at {
                return ControlFlow::Break(());
            }
            self.lines.push(line);
            ControlFlow::Continue(())
        }

        fn after(&mut self, outcome: &CallOutcome) {
            self.outcomes.push(outcome.clone());
        }
    }

    #[test]
    fn a_read_file_call_reaches_the_observer_with_its_records_and_elapsed_time() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("a.txt"), "hello\n").unwrap();
        let mut engine = Engine::start(
            &Home::at(home.path()),
            ws.path(),
            EngineConfig::new(Catalog::Thoth),
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<Record>();
        engine.set_observer(Box::new(move |r| tx.send(r.clone()).unwrap()));
        let steps = parse(
            "{\"user\":\"read it\"}\n{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n{\"user\":\"never\"}",
        )
        .unwrap();
        let mut seen = Seen {
            lines: vec![],
            outcomes: vec![],
            stop_at: 3,
        };
        let outcomes = run_with(&mut engine, &steps, &mut seen).unwrap();
        assert_eq!(
            seen.lines,
            vec![1, 2],
            "the hook stops the script before line 3"
        );
        assert_eq!(outcomes, seen.outcomes);
        let records: Vec<Record> = rx.try_iter().collect();
        let kinds: Vec<&str> = records.iter().map(|r| r.event.kind()).collect();
        assert_eq!(
            kinds,
            ["user_message", "tool_started", "file_read", "tool_finished"]
        );
        let [o] = outcomes.as_slice() else {
            panic!("one call: {outcomes:?}")
        };
        assert_eq!((o.call.as_str(), o.status), ("c1", Status::Ok));
        let Some(Event::ToolFinished(f)) = records.last().map(|r| &r.event) else {
            panic!("the last record is the call's end")
        };
        assert!(o.elapsed_us > 0);
        assert_eq!(o.elapsed_us, f.elapsed_us);
        // What the observer saw is the log, record for record.
        let seqs = records[0].seq..=records[records.len() - 1].seq;
        let dir = engine.dir().to_path_buf();
        engine.end("test").unwrap();
        let logged: Vec<Record> = cairn_store::LogReader::open(&dir)
            .unwrap()
            .records()
            .unwrap()
            .map(|r| crate::fold::parse(&r.unwrap()).unwrap())
            .filter(|r| seqs.contains(&r.seq))
            .collect();
        assert_eq!(logged, records);
    }

    /// Steps whose user message and input held a secret match the log by the keyed
    /// hashes it keeps of them: the same secrets match, another is a mismatch naming
    /// its step and showing neither secret. Without the key, a redacted step matches as
    /// it did in logs from before the hashes.
    #[test]
    fn steps_holding_secrets_match_the_log_by_their_keyed_hashes() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let h = Home::at(home.path());
        let mut engine = Engine::start(&h, ws.path(), EngineConfig::new(Catalog::Thoth)).unwrap();
        let token = |c: char| format!("{}_{}", "ghp", c.to_string().repeat(36));
        let steps = |m: char, i: char| {
            parse(&format!(
                "{{\"user\":\"use {}\"}}\n{{\"tool\":\"read_file\",\"input\":{{\"path\":\"{}.txt\"}}}}\n",
                token(m),
                token(i)
            ))
            .unwrap()
        };
        run(&mut engine, &steps('a', 'a'), |_| {}).unwrap();
        let dir = engine.dir().to_path_buf();
        engine.end("test").unwrap();
        let key = h
            .project(&ws.path().canonicalize().unwrap())
            .secret_key()
            .unwrap();
        let redactor = Redactor::default();
        let keyed = Secrets {
            key: Some(&key),
            redactor: &redactor,
        };
        let point = resume_point(&dir, &steps('a', 'a'), &keyed).unwrap();
        assert_eq!((point.done, point.interrupted), (2, None));
        for (m, i, step) in [('b', 'a', 1), ('a', 'b', 2)] {
            let e = resume_point(&dir, &steps(m, i), &keyed).unwrap_err();
            assert!(
                matches!(e, EngineError::ScriptMismatch { step: s, .. } if s == step),
                "{e:?}"
            );
            let shown = e.to_string();
            assert!(shown.contains("[REDACTED:github_token]"), "{shown}");
            for c in ['a', 'b'] {
                assert!(!shown.contains(&token(c)), "{shown}");
            }
        }
        let unkeyed = Secrets {
            key: None,
            redactor: &redactor,
        };
        let point = resume_point(&dir, &steps('b', 'b'), &unkeyed).unwrap();
        assert_eq!(point.done, 2);
    }

    #[test]
    fn bad_lines_name_their_number() {
        let e = parse("{\"user\":\"hi\"}\n\n{\"tool\":\"x\",\"input\":3}\n").unwrap_err();
        assert!(matches!(e, EngineError::Script { line: 3, .. }), "{e:?}");
        assert_eq!(e.to_string(), "script line 3: input must be a JSON object");
        let e = parse("not json").unwrap_err();
        assert!(e.to_string().starts_with("script line 1: expected"), "{e}");
        assert_eq!(
            parse("# c\n{\"user\":\"a\"}").unwrap(),
            vec![(2, Step::User("a".into()))]
        );
    }

    #[test]
    fn approve_is_parsed_once_and_a_bad_one_names_its_line() {
        let step = |approve| Step::Tool {
            tool: "x".into(),
            input: serde_json::json!({}),
            approve,
        };
        assert_eq!(
            parse("{\"tool\":\"x\"}\n{\"tool\":\"x\",\"approve\":\"once\"}\n{\"tool\":\"x\",\"approve\":\"always\"}\n{\"tool\":\"x\",\"approve\":\"deny\"}").unwrap(),
            vec![
                (1, step(None)),
                (2, step(Some(Answer::Once))),
                (3, step(Some(Answer::Always))),
                (4, step(Some(Answer::Deny))),
            ]
        );
        let e = parse("{\"user\":\"hi\"}\n{\"tool\":\"x\",\"approve\":\"Always\"}").unwrap_err();
        assert_eq!(
            e.to_string(),
            "script line 2: approve must be once, always or deny, not 'Always'"
        );
    }
}
