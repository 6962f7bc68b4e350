//! The permissions: every question a call asked is the one the engine asks for it on
//! the fold (its keys, reasons, guards), every answer from the allow list one the allow
//! list gives, and the grants an answer records the ones it grants. What a denial
//! stops and a grant lets run is noted in the call for its end.

use super::*;

/// Checks `permission_requested` and `permission_decided` records.
#[derive(Default)]
pub(super) struct PermissionsFold;

impl Fold for PermissionsFold {
    fn apply(&mut self, v: &mut Verifier, rec: &Record) {
        match &rec.event {
            Event::PermissionRequested {
                call,
                key,
                detail,
                guarded,
                keys,
                reasons,
                guards,
                ..
            } => v.permission_requested(
                call,
                key,
                detail,
                Asked {
                    guarded: *guarded,
                    keys,
                    reasons,
                    guards,
                },
            ),
            Event::PermissionDecided {
                call,
                key,
                answer,
                source,
                grants,
            } => v.permission_decided(call, key, *answer, *source, grants.as_deref()),
            _ => {}
        }
    }
}

impl Verifier {
    /// The need the engine takes for call `p` when it asks for `key`: the tool's own,
    /// when it is that key; otherwise (a folder outside the workspace, or a key of an
    /// older version) a plain question for `key`.
    pub(super) fn need_of(
        &self,
        p: &Pending,
        key: &str,
        detail: &str,
        recorded: &[String],
    ) -> Need {
        let root = self.state.workspace.as_deref().unwrap_or("/");
        match self.registry.get(&p.tool).map(|t| {
            t.permission(
                &p.input,
                &cairn_tools::Asking {
                    root: Path::new(root),
                    credential_files: &self.credential_files,
                    // What the workspace held when the question was asked is a fact
                    // the log recorded.
                    links: cairn_tools::links::Links::Recorded(recorded),
                },
            )
        }) {
            Some(need) if matches!(&need, Need::Ask { key: k, .. } if k == key) => need,
            Some(need) => match key.strip_prefix(&format!("{}@", p.tool)) {
                Some(dir) => cairn_core::permission::outside_need(&p.tool, dir, need, &p.input),
                // A key of another call (copied?): this one needs none of its own.
                None if need == Need::Auto => Need::Auto,
                None => Need::ask(key, detail),
            },
            None => Need::ask(key, detail),
        }
    }

    pub(super) fn permission_requested(
        &mut self,
        call: &str,
        key: &str,
        detail: &str,
        asked: Asked<'_>,
    ) {
        let Some(p) = self.pending.get(call) else {
            self.problem(
                ProblemKind::Structure,
                format!("permission_requested for {key} outside its call {call}"),
            );
            return;
        };
        let need = self.need_of(p, key, detail, asked.reasons);
        // Logs written before command lines were parsed keyed a line by its first word
        // and recorded no keys: their question is taken as recorded.
        let legacy = asked.keys.is_empty() && key.starts_with("shell:");
        let need = if legacy { Need::ask(key, detail) } else { need };
        let mut problems = Vec::new();
        let question = match decide::permission(&self.state, need, &self.guarded) {
            Permission::Auto => {
                problems.push(format!("asked for {key}, but the call needs no permission"));
                None
            }
            Permission::AllowList(q) => {
                problems.push(format!(
                    "asked for {key}, but the allow list covers it: the engine answers from the allow list"
                ));
                Some(q)
            }
            Permission::Ask(q) => Some(q),
        };
        if let Some(q) = &question
            && !legacy
        {
            let recorded_keys: Vec<String> = if asked.keys.is_empty() {
                vec![key.to_string()]
            } else {
                asked.keys.to_vec()
            };
            if q.key != key {
                problems.push(format!("the question is {}, not {key}", q.key));
            }
            if q.keys != recorded_keys {
                problems.push(format!(
                    "it records the keys [{}], but the call's keys are [{}]",
                    recorded_keys.join(", "),
                    q.keys.join(", ")
                ));
            }
            if q.reasons != asked.reasons {
                problems.push(format!(
                    "it records why no always covers it as [{}], but the call gives [{}]",
                    asked.reasons.join("; "),
                    q.reasons.join("; ")
                ));
            }
            if q.guards != asked.guards {
                problems.push(format!(
                    "it records the guarded commands [{}], but the line matches [{}]",
                    asked.guards.join(", "),
                    q.guards.join(", ")
                ));
            }
            if q.guarded != asked.guarded {
                problems.push(format!(
                    "the request is {}marked guarded, but the call is {}guarded",
                    if asked.guarded { "" } else { "not " },
                    if q.guarded { "" } else { "not " }
                ));
            }
        }
        self.report.decisions_checked += 1;
        for what in problems {
            self.problem(
                ProblemKind::Decision,
                format!("call {call} ({key}): {what}"),
            );
        }
        let at = self.at;
        if let Some(p) = self.pending.get_mut(call) {
            p.asked.push(key.to_string());
            p.question = question;
            p.records.push((Kind::Asked, at, false));
        }
    }

    pub(super) fn permission_decided(
        &mut self,
        call: &str,
        key: &str,
        answer: Answer,
        source: AnswerSource,
        grants: Option<&[String]>,
    ) {
        let at = self.at;
        let Some(p) = self.pending.get(call) else {
            self.problem(
                ProblemKind::Structure,
                format!("permission_decided for {key} outside its call {call}"),
            );
            return;
        };
        let asked = p.asked.iter().any(|k| k == key);
        let mut problems = Vec::new();
        if source == AnswerSource::AllowList {
            let need = self.need_of(p, key, "", &[]);
            self.report.decisions_checked += 1;
            if asked {
                problems.push(format!(
                    "{key} answered from the allow list after a question was asked"
                ));
            } else if answer != Answer::Always {
                problems.push(format!(
                    "{key} answered {} from the allow list, which only answers always",
                    answer_name(answer)
                ));
            } else {
                match decide::permission(&self.state, need, &self.guarded) {
                    Permission::AllowList(_) => {}
                    Permission::Ask(q) if q.guarded => problems.push(format!(
                        "{key} answered from the allow list, but the command line is guarded: it must be asked"
                    )),
                    Permission::Ask(q) if !q.reasons.is_empty() => problems.push(format!(
                        "{key} answered from the allow list, but no always can cover it: {}",
                        q.reasons.join("; ")
                    )),
                    Permission::Auto => problems.push(format!(
                        "{key} answered from the allow list, but the call needs no permission"
                    )),
                    _ => problems.push(format!(
                        "{key} answered from the allow list, but the fold's allow list does not hold every key of it"
                    )),
                }
            }
            if grants.is_some_and(|g| !g.is_empty()) {
                problems.push(format!(
                    "{key} answered from the allow list records grants: only an answer that was asked grants"
                ));
            }
        } else if !asked {
            problems.push(format!(
                "{key} answered {} by {} without a permission_requested",
                answer_name(answer),
                source_name(source)
            ));
        } else if let (Some(recorded), Some(q)) = (grants, &p.question) {
            let expected = q.grants(answer);
            if recorded != expected.as_slice() {
                problems.push(format!(
                    "{key} answered {} records grants [{}], but that answer grants [{}]",
                    answer_name(answer),
                    recorded.join(", "),
                    expected.join(", ")
                ));
            }
        }
        for what in problems {
            self.problem(ProblemKind::Decision, format!("call {call}: {what}"));
        }
        let Some(p) = self.pending.get_mut(call) else {
            return;
        };
        p.records.push((Kind::of_decided(source), at, false));
        p.answer = Some(Answered {
            key: key.to_string(),
            answer,
            source,
            at,
        });
        // A denial that stops the call (not a policy's confined run) forbids any side
        // effect after it; a grant is remembered for the status check.
        match decide::answered(&p.tool, key, answer, source) {
            Outcome::Denied(_) => p.denied = Some((at.0, key.to_string())),
            Outcome::Confined => {}
            Outcome::Run { .. } => p.granted = Some((at.0, key.to_string(), answer)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{found, pending, rec, run, verifier};
    use super::*;

    #[test]
    fn a_permission_record_is_inside_its_call_and_an_answer_follows_a_question() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        pending(&mut v, 1, "c1", "read", json!({"path": "a"}));
        let records = [
            rec(
                2,
                json!({"type": "permission_requested", "call": "c9", "key": "read",
                    "detail": "a"}),
            ),
            rec(
                3,
                json!({"type": "permission_decided", "call": "c1", "key": "k", "answer": "once",
                    "source": "user"}),
            ),
        ];
        run(&mut v, &mut PermissionsFold, &records);
        // The answer is noted in the call for its end.
        assert!(v.pending["c1"].answer.is_some());
        assert_eq!(
            found(v),
            [
                (
                    Some(2),
                    ProblemKind::Structure,
                    "permission_requested for read outside its call c9".to_string()
                ),
                (
                    Some(3),
                    ProblemKind::Decision,
                    "call c1: k answered once by user without a permission_requested".to_string()
                ),
            ]
        );
    }
}
