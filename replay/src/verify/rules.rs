//! The rules the engine decided each call's end by, taken again at its
//! `tool_finished`: its refusal and its status, its admission (input size, schema,
//! repeat block), a write rule's refusal, its permission answer, the content hash its
//! output reports, and its output's caps and injection flag.

use super::*;

/// Takes a finished call's rules again.
#[derive(Default)]
pub(super) struct RulesFold;

impl Fold for RulesFold {
    fn apply(&mut self, v: &mut Verifier, rec: &Record) {
        if let Event::ToolFinished(f) = &rec.event
            && let Some(done) = v.finished.take()
        {
            v.rules(f, &done.pending);
            v.finished = Some(done);
        }
    }
}

impl Verifier {
    /// The rules the engine decided the call's end by, taken again: its refusal, its
    /// admission, its permission answer, what its output shows.
    pub(super) fn rules(&mut self, f: &ToolFinished, p: &Pending) {
        // The status follows the refusal, whatever the tool (an MCP server's too). What
        // it wrote, ran and fetched for its status: `Verifier::implied`.
        let status = f.status.as_str();
        match &f.refusal {
            Some(r) if f.status != decide::refusal_status(r.rule) => self.decision(
                f,
                p,
                format!(
                    "status {status} with refusal {}: a refused call ends {}",
                    rule_name(r.rule),
                    decide::refusal_status(r.rule).as_str()
                ),
            ),
            None if f.status == Status::Blocked => self.decision(
                f,
                p,
                "status blocked without a refusal: only a repeat refusal blocks".into(),
            ),
            _ => {}
        }
        if self.registry.get(&p.tool).is_none() {
            // A tool of another catalog or a newer cairn: its rules are not known here.
            if f.status != Status::Error {
                self.report.decisions_unchecked += 1;
            }
            return;
        }
        self.report.decisions_checked += 1;
        self.admission(f, p);
        // A write rule's refusal is taken again from the fold and its observed hash.
        if let Some(r) = &f.refusal
            && let Some(op) = match r.rule {
                Rule::ReadBeforeEdit => Some(WriteOp::Edit),
                Rule::ReadBeforeOverwrite => Some(WriteOp::Replace),
                // Its guards come first: no read rule of an op decides it.
                Rule::StaleWrite => Some(WriteOp::Create),
                _ => None,
            }
        {
            self.write_refusal(f, p, r, op);
        }
        self.permission_answer(f, p);
        self.output_rules(f, p);
    }

    /// Admission (input size, schema, repeat block) taken again on the fold before
    /// the call's start.
    fn admission(&mut self, f: &ToolFinished, p: &Pending) {
        let status = f.status.as_str();
        let limits = self.limits.clone();
        let admitted = p.admitted.clone().unwrap_or(Decision::Allow);
        let admission = |r: &Refusal| matches!(r.rule, Rule::Input | Rule::Repeat);
        match (&admitted, &f.refusal) {
            (Decision::Refuse(d), Some(r)) if d.refusal() == *r => {
                if !shows(f, &limits, &d.message) {
                    self.decision(
                        f,
                        p,
                        format!(
                            "refused by {}, but the output is not the rule's message: {}",
                            rule_name(r.rule),
                            d.message
                        ),
                    );
                }
            }
            // A crash (or a kill) between the start and the refusal.
            (Decision::Refuse(_), None) if f.status == Status::Interrupted => {}
            (Decision::Refuse(d), _) => self.decision(
                f,
                p,
                match d.rule {
                    Rule::Repeat => format!(
                        "recorded {status}, but the fold says this exact call was already made {} times (repeat_calls_max {}) and its answer could not have changed: it should have been blocked ({})",
                        p.repeats, limits.repeat_calls_max, d.message
                    ),
                    rule => format!(
                        "recorded {status}, but {} refuses it: {}",
                        rule_name(rule),
                        d.message
                    ),
                },
            ),
            (Decision::Allow, Some(r)) if admission(r) => self.decision(
                f,
                p,
                match r.rule {
                    Rule::Repeat if p.repeats < limits.repeat_calls_max => format!(
                        "blocked as a repeat, but the fold counts {} earlier identical calls (repeat_calls_max {})",
                        p.repeats, limits.repeat_calls_max
                    ),
                    Rule::Repeat => format!(
                        "blocked as a repeat, but its answer could have changed since the last identical call ({}): a file it depends on differs from what the log last showed, or a background process was running",
                        p.repeats
                    ),
                    _ => "refused as bad input, but the input is within input_bytes_max and matches the tool's schema".into(),
                },
            ),
            (Decision::Allow, _) => {}
        }
    }

    /// The permission answer decides whether the call ran: a denied call ends
    /// denied, with the denial's message; one let run does not.
    fn permission_answer(&mut self, f: &ToolFinished, p: &Pending) {
        let status = f.status.as_str();
        let limits = self.limits.clone();
        // The permission answer decides whether the call ran.
        if let Some(Answered {
            key,
            answer,
            source,
            at,
        }) = &p.answer
        {
            let denied = match decide::answered(&p.tool, key, *answer, *source) {
                Outcome::Denied(message) => Some(message),
                Outcome::Run { .. } | Outcome::Confined => None,
            };
            let answered = format!(
                "permission for {key} was answered {} ({}) at seq {}",
                answer_name(*answer),
                source_name(*source),
                at.0
            );
            let what = match (denied, f.status == Status::Denied) {
                _ if f.status == Status::Interrupted => None,
                (Some(message), true) => (!shows(f, &limits, &message)).then(|| {
                    format!("denied, but the output is not the denial's message: {message}")
                }),
                (None, false) => None,
                (Some(_), false) => Some(format!(
                    "status {status}, but {answered}: the call does not run"
                )),
                (None, true) => Some(format!("status denied, but {answered}: the call runs")),
            };
            if let Some(what) = what {
                // Either record may be the forged one: both are reported.
                let here = self.at;
                self.decision(f, p, what.clone());
                self.at = *at;
                self.problem(
                    ProblemKind::Decision,
                    format!("call {}: {what} (it finished at seq {})", f.call, here.0),
                );
                self.at = here;
            }
        }
    }

    /// What the output shows: the content hash its records name, the caps and the
    /// injection flag.
    fn output_rules(&mut self, f: &ToolFinished, p: &Pending) {
        // The content hash an output reports is the one its records name.
        if f.status == Status::Ok
            && let Some(h) = p.last_hash
            && let Some(said) = f
                .output
                .lines()
                .rev()
                .find_map(|l| l.strip_prefix("hash: "))
            && said.trim() != h.to_hex()
        {
            self.decision(
                f,
                p,
                format!(
                    "the output reports content hash {} but the call's records name {}",
                    said.trim(),
                    h.to_hex()
                ),
            );
        }
        // Caps: the output given to the model is the capped whole output, flagged (with
        // the injection note) exactly when what it shows reads like an instruction.
        let (lines_max, bytes_max) = (self.limits.output_lines_max, self.limits.output_bytes_max);
        let shown = match &f.output_blob {
            Some(b) => match self.blobs.get(&b.hash) {
                Ok(whole) => {
                    let shown = decide::shown(&String::from_utf8_lossy(&whole), &self.limits);
                    if !shown.cut || shown.text != f.output {
                        self.decision(f, p, "the output is not the whole output (in its blob) capped by output_bytes_max and output_lines_max".into(),
                        );
                    }
                    Some(shown)
                }
                Err(_) => None,
            },
            None => {
                let shown = decide::shown(decide::unflagged(&f.output, &f.injection), &self.limits);
                if shown.cut {
                    self.decision(
                        f,
                        p,
                        format!(
                            "the output is over the caps ({bytes_max} bytes, {lines_max} lines) and has no output blob"
                        ),
                    );
                }
                Some(shown)
            }
        };
        match shown {
            Some(shown) if shown.injection != f.injection => self.decision(
                f,
                p,
                format!(
                    "the output's injection flag is {:?} but what it shows gives {:?}",
                    f.injection, shown.injection
                ),
            ),
            Some(shown) if !shown.cut && shown.text != f.output => self.decision(
                f,
                p,
                "the output does not end with the injection note its flag calls for".into(),
            ),
            _ => {}
        }
    }

    /// Takes a write rule's refusal again: the fold and the refusal's observed hash
    /// (with the input's `expected_before_hash` guards) must give the same refusal.
    pub(super) fn write_refusal(
        &mut self,
        f: &ToolFinished,
        p: &Pending,
        r: &Refusal,
        op: WriteOp,
    ) {
        let rule = rule_name(r.rule);
        if r.rule != Rule::StaleWrite && r.observed.is_none() {
            self.decision(
                f,
                p,
                "a read-before-write refusal without the observed hash".into(),
            );
            return;
        }
        let path = r.path.as_deref().unwrap_or_default();
        let expected = decide::expected_before_hashes(&p.input);
        let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
        let observed = r.observed.map_or("none".into(), |h| h.short(16));
        match decide::write(&self.state, op, path, r.observed.as_ref(), &expected) {
            Decision::Allow => {
                let why = match r.rule {
                    Rule::ReadBeforeEdit => format!("{path} was read at that content"),
                    Rule::ReadBeforeOverwrite => {
                        format!("every line of {path} was read at that content")
                    }
                    _ => "every expected_before_hash matches that content".into(),
                };
                self.decision(
                    f,
                    p,
                    format!(
                        "refused by {rule} at content {observed}, but the rules allow it: the fold says {why}"
                    ),
                );
            }
            Decision::Refuse(d) if d.refusal() != *r => self.decision(
                f,
                p,
                format!(
                    "refused by {rule} of {path} at content {observed}, but the rules give {} of {} at {}: {}",
                    rule_name(d.rule),
                    d.path.as_deref().unwrap_or("?"),
                    d.observed.map_or("none".into(), |h| h.short(16)),
                    d.message
                ),
            ),
            Decision::Refuse(d) if !shows(f, &self.limits, &d.message) => self.decision(
                f,
                p,
                format!(
                    "refused by {rule}, but the output is not the rule's message: {}",
                    d.message
                ),
            ),
            Decision::Refuse(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{finished, found, verifier};
    use super::*;

    #[test]
    fn a_call_blocked_without_a_refusal_breaks_the_rules() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        let input = json!({"path": "a"});
        for (call, status) in [("c1", "blocked"), ("c2", "ok")] {
            v.finished = Some(Finished {
                pending: Pending::new(1, "read_file", &input, None, None, 0),
                effects: None,
                replayed: false,
            });
            RulesFold.apply(&mut v, &finished(2, call, status, "text"));
            assert!(v.finished.is_some(), "handed on to the folds after");
        }
        assert_eq!(v.report.decisions_checked, 2);
        assert_eq!(
            found(v),
            [(
                Some(0),
                ProblemKind::Decision,
                "call c1 (read_file): status blocked without a refusal: only a repeat refusal blocks"
                    .to_string()
            )]
        );
    }
}
