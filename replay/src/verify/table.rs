//! What a call records: every call holds exactly the records its tool's effects and
//! its status imply, its permission's included (the one table of
//! `cairn_tools::implied`: a command that ran has its `shell_exec` started and
//! finished, a write that happened its intent and install, a denied call nothing).

use super::*;

/// Holds a finished call's records to the table.
#[derive(Default)]
pub(super) struct TableFold;

impl Fold for TableFold {
    fn apply(&mut self, v: &mut Verifier, rec: &Record) {
        if let Event::ToolFinished(f) = &rec.event
            && let Some(done) = v.finished.take()
        {
            if let Some(effects) = &done.effects {
                v.implied(f, &done.pending, effects, done.replayed);
            }
            v.finished = Some(done);
        }
    }
}

impl Verifier {
    /// The call's records are those its tool's effects and how it ended imply (the
    /// table of `cairn_tools::implied`): one missing is reported at the call's end, one
    /// too many where it is (unless it was reported there already, as one after a
    /// denial).
    pub(super) fn implied(
        &mut self,
        f: &ToolFinished,
        p: &Pending,
        effects: &cairn_tools::Effects,
        replayed: bool,
    ) {
        let call = self.table_call(f, p, effects, replayed);
        let expect = implied::implied(effects, &call);
        let status = f.status.as_str();
        let end = self.at;
        if !expect.possible() {
            let statuses: Vec<&str> = implied::statuses(effects)
                .iter()
                .map(Status::as_str)
                .collect();
            self.problem(
                ProblemKind::Decision,
                format!(
                    "call {} ({}) ended {status}, which no call of {} ends with: it ends {} (or denied, blocked, interrupted)",
                    f.call,
                    p.tool,
                    p.tool,
                    statuses.join(", ")
                ),
            );
            return;
        }
        let counts = implied::counts(p.records.iter().map(|(k, _, _)| *k));
        for m in expect.misfits(&counts) {
            match m {
                Misfit::Missing { kind, have, min } => {
                    let how = if have == 0 && min == 1 {
                        "a".to_string()
                    } else {
                        format!("{have} (of at least {min})")
                    };
                    self.problem(
                        ProblemKind::Decision,
                        format!(
                            "call {} ({}) ended {status} without {how} {}: {}",
                            f.call,
                            p.tool,
                            kind.name(),
                            expect.why(kind)
                        ),
                    );
                }
                Misfit::Extra { kind, have, max } => {
                    // The records past the most allowed; reported at the first of them
                    // no problem was reported at yet.
                    let Some(at) = p
                        .records
                        .iter()
                        .filter(|(k, _, _)| *k == kind)
                        .skip(max as usize)
                        .find(|(_, _, reported)| !reported)
                        .map(|(_, at, _)| *at)
                    else {
                        continue;
                    };
                    let what = match max {
                        0 => format!("holds a {}", kind.name()),
                        _ => format!("holds {have} {}, more than {max}", kind.name()),
                    };
                    self.at = at;
                    self.problem(
                        ProblemKind::Decision,
                        format!(
                            "call {} ({}) {what}, but it ended {status} (at seq {}): {}",
                            f.call,
                            p.tool,
                            end.0,
                            expect.why(kind)
                        ),
                    );
                    self.at = end;
                }
            }
        }
    }

    /// How the call ended, as the table reads it.
    fn table_call(
        &self,
        f: &ToolFinished,
        p: &Pending,
        effects: &cairn_tools::Effects,
        replayed: bool,
    ) -> implied::Call {
        let background = effects
            .background
            .and_then(|field| p.input.get(field))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        // Whether its command may have failed before it ran: a working folder its input
        // names, no check command, the most background processes running.
        let running = || {
            let n = self.state.processes.values().filter(|p| p.is_running());
            n.count() >= self.limits.shell_background_max
        };
        let early = effects
            .cwd
            .is_some_and(|field| p.input.get(field).is_some_and(|v| !v.is_null()))
            || (effects.runs_commands
                && !effects.command_output
                && self.check_command != Some(true))
            || (background && running());
        implied::Call {
            status: f.status,
            refusal: f.refusal.as_ref().map(|r| r.rule),
            asks: self.asks(f, p),
            stopped: p.denied.is_some(),
            background,
            early,
            replayed,
        }
    }

    /// `need` widened to a `tool@folder` question when a path the call names lies outside
    /// the workspace by its text (`..`, an absolute path), as the engine's permission
    /// step widens it; a path that leaves through a link the log cannot show, and one
    /// in the cairn home (never reachable) is not widened.
    fn outside_by_text(
        &self,
        root: &str,
        tool: &str,
        need: Need,
        input: &serde_json::Value,
    ) -> Need {
        let root = Path::new(root);
        let home = self.blobs.root().ancestors().nth(3);
        for raw in cairn_tools::written_paths(input) {
            if let Some(target) = cairn_tools::target(root, raw)
                && !target.starts_with(root)
                && !home.is_some_and(|h| target.starts_with(h))
            {
                return cairn_core::permission::outside_need_of(tool, &target, need, input);
            }
        }
        need
    }

    /// What the permission step of call `p` gave: what its records say, or when it
    /// records none, what the engine's permission step gives for it on the fold (whose
    /// allow list only a recorded answer changes). Nothing when the table does not
    /// depend on it (a call refused before it was asked, or interrupted).
    pub(super) fn asks(&self, f: &ToolFinished, p: &Pending) -> Asks {
        match &p.answer {
            Some(a) if a.source == AnswerSource::AllowList => return Asks::AllowList,
            Some(_) => return Asks::Question,
            None if !p.asked.is_empty() => return Asks::Question,
            None => {}
        }
        let admission = f
            .refusal
            .as_ref()
            .is_some_and(|r| matches!(r.rule, Rule::Input | Rule::Repeat));
        if admission || f.status == Status::Interrupted {
            return Asks::Nothing;
        }
        let need = match (&p.mcp, self.registry.get(&p.tool)) {
            (Some(m), _) => Need::ask(
                cairn_tools::mcp_names::permission_key(&m.server, &m.tool),
                String::new(),
            ),
            (None, Some(t)) => {
                let root = self.state.workspace.as_deref().unwrap_or("/");
                let need = t.permission(
                    &p.input,
                    &cairn_tools::Asking {
                        root: Path::new(root),
                        credential_files: &self.credential_files,
                        // No question was recorded, so no write through a link was found.
                        links: cairn_tools::links::Links::Recorded(&[]),
                    },
                );
                self.outside_by_text(root, &p.tool, need, &p.input)
            }
            (None, None) => return Asks::Nothing,
        };
        match decide::permission(&self.state, need, &self.guarded) {
            Permission::Auto => Asks::Nothing,
            Permission::AllowList(_) => Asks::AllowList,
            Permission::Ask(_) => Asks::Question,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{finished, found, verifier};
    use super::*;

    #[test]
    fn a_read_that_ended_ok_without_its_file_read_is_missing_a_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        let input = json!({"path": "a"});
        let effects = v.registry.effects("read_file");
        assert!(effects.is_some());
        let mut p = Pending::new(1, "read_file", &input, None, None, 0);
        v.finished = Some(Finished {
            pending: Pending::new(1, "read_file", &input, None, None, 0),
            effects,
            replayed: false,
        });
        TableFold.apply(&mut v, &finished(3, "c1", "ok", "text"));
        // With its read, it holds what it should.
        p.records.push((Kind::Read, (2, 3, 200), false));
        v.finished = Some(Finished {
            pending: p,
            effects,
            replayed: false,
        });
        TableFold.apply(&mut v, &finished(3, "c2", "ok", "text"));
        let found = found(v);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].1, ProblemKind::Decision);
        assert!(
            found[0]
                .2
                .starts_with("call c1 (read_file) ended ok without a "),
            "{found:?}"
        );
    }
}
