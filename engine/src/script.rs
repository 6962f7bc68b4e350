//! Scripts drive a session without a model: JSON Lines, one step a line,
//! `{"tool": "...", "input": {...}}` or `{"user": "..."}`.

use serde::Deserialize;

use crate::engine::{CallOutcome, Engine};
use cairn_tools::{EngineError, Result};

/// One step of a script.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Tool {
        tool: String,
        input: serde_json::Value,
        /// A permission answer for this step (once, always, deny).
        approve: Option<String>,
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
        let bad = |what: String| EngineError::Script(format!("script line {n}: {what}"));
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
                if let Some(a) = &approve
                    && !["once", "always", "deny"].contains(&a.as_str())
                {
                    return Err(bad(format!(
                        "approve must be once, always or deny, not '{a}'"
                    )));
                }
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

/// Runs the steps through the engine; `each` sees every call's outcome as it ends.
pub fn run(
    engine: &mut Engine,
    steps: &[(usize, Step)],
    mut each: impl FnMut(&CallOutcome),
) -> Result<Vec<CallOutcome>> {
    let mut outcomes = Vec::new();
    for (_, step) in steps {
        match step {
            Step::User(text) => engine.user_message(text)?,
            Step::Tool {
                tool,
                input,
                approve,
            } => {
                let answer = approve.as_deref().map(|a| match a {
                    "always" => crate::event::Answer::Always,
                    "deny" => crate::event::Answer::Deny,
                    _ => crate::event::Answer::Once,
                });
                let out = engine.call_with(tool, input.clone(), answer)?;
                each(&out);
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
    let mismatch = |i: usize, what: String| {
        EngineError::Script(format!(
            "the session does not follow this script: step {} (line {}) {what}",
            i + 1,
            steps.get(i).map_or(0, |s| s.0)
        ))
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

    #[test]
    fn bad_lines_name_their_number() {
        let e = parse("{\"user\":\"hi\"}\n\n{\"tool\":\"x\",\"input\":3}\n").unwrap_err();
        assert_eq!(e.to_string(), "script line 3: input must be a JSON object");
        let e = parse("not json").unwrap_err();
        assert!(e.to_string().starts_with("script line 1: expected"), "{e}");
        assert_eq!(
            parse("# c\n{\"user\":\"a\"}").unwrap(),
            vec![(2, Step::User("a".into()))]
        );
    }
}
