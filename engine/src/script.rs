//! Scripts drive a session without a model: JSON Lines, one step a line,
//! `{"tool": "...", "input": {...}}` or `{"user": "..."}`.

use std::ops::ControlFlow;

use serde::Deserialize;

use crate::engine::{CallOutcome, Engine};
use crate::event::Answer;
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

/// Where a script resumes: the index of its first step that had not finished in the
/// session at `dir`. The log's user messages and calls are matched against the steps
/// in order; a call that ended `interrupted` (or never ended) had not finished, so the
/// script goes on with that step (run again after a resume, its new call follows). Fails when the log's steps are not the script's.
pub fn resume_point(dir: &std::path::Path, steps: &[(usize, Step)]) -> Result<usize> {
    use crate::event::{Event, Status};
    let reader = cairn_store::LogReader::open(dir)?;
    let mut done = 0usize;
    let mut open: Option<String> = None;
    let mismatch = |i: usize, what: String| EngineError::ScriptMismatch {
        step: i + 1,
        line: steps.get(i).map(|s| s.0),
        what,
    };
    for r in reader.records()? {
        let r = r?;
        let Ok(rec) = crate::fold::parse(&r) else {
            continue;
        };
        match rec.event {
            Event::UserMessage { text } => match steps.get(done) {
                Some((_, Step::User(t))) if *t == text => done += 1,
                _ => {
                    return Err(mismatch(
                        done,
                        format!("but the log has user message {text:?}"),
                    ));
                }
            },
            Event::ToolStarted { call, tool, .. } => match steps.get(done) {
                Some((_, Step::Tool { tool: t, .. })) if *t == tool => open = Some(call),
                _ => return Err(mismatch(done, format!("but the log has a {tool} call"))),
            },
            Event::ToolFinished(f) if open.as_deref() == Some(f.call.as_str()) => {
                // An interrupted step is run again: a later resume's run of it follows.
                open = None;
                if f.status != Status::Interrupted {
                    done += 1;
                }
            }
            _ => {}
        }
    }
    Ok(done)
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
