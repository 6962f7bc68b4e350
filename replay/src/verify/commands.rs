//! The commands: every `shell_exec` inside its call (a background process's end after
//! it, ending a process the fold knows running), the blobs of a process's end and the
//! sizes it gives for them, and a foreground command's output being what its stdout
//! and stderr blobs give.

use super::*;

/// Checks `shell_exec` records and the output of the calls that answer with their
/// command's.
#[derive(Default)]
pub(super) struct CommandsFold;

impl Fold for CommandsFold {
    fn apply(&mut self, v: &mut Verifier, rec: &Record) {
        match &rec.event {
            Event::ShellExec(x) => v.shell_exec(x),
            Event::ToolFinished(f) => {
                let Some(done) = v.finished.take() else {
                    return;
                };
                let p = &done.pending;
                if let Some(x) = &p.exec
                    && f.status != Status::Interrupted
                    && p.denied.is_none()
                    && answers_with_command(&p.tool)
                {
                    v.shell_output(f, p, x);
                }
                v.finished = Some(done);
            }
            _ => {}
        }
    }
}

impl Verifier {
    pub(super) fn shell_exec(&mut self, x: &ShellExec) {
        if let Some(end) = x.end() {
            self.shell_end(&x.call, end);
        }
        let kind = Kind::of_exec(x);
        let shown = cairn_tools::shell::shown_argv(&x.argv);
        self.side_effect(&x.call, kind, &format!("shell_exec of `{shown}`"));
        let inside = self.pending.contains_key(&x.call);
        match x.kind {
            ProcKind::Foreground => match self.pending.get_mut(&x.call) {
                None => self.problem(
                    ProblemKind::Structure,
                    format!("foreground shell_exec outside its call {}", x.call),
                ),
                Some(p) if x.end().is_some() => {
                    p.exec = Some(x.clone());
                    p.changes.clear();
                }
                Some(_) => {}
            },
            // A background process's end is recorded when it exits, after its call
            // (at a later call's start, a cancel, the session's end or a resume): it
            // ends a process that call started and the fold knows running.
            ProcKind::Background if kind == Kind::BgEnded && !inside => {
                let id = x.id.as_deref().unwrap_or_default();
                let why = match self.state.processes.get(id) {
                    None => Some(format!("the log started no background process {id:?}")),
                    Some(p) if p.call != x.call => {
                        Some(format!("process {id} was started by call {}", p.call))
                    }
                    Some(p) if !p.is_running() => {
                        Some(format!("process {id} had ended already ({})", p.status))
                    }
                    Some(_) => None,
                };
                if let Some(why) = why {
                    self.problem(
                        ProblemKind::Structure,
                        format!(
                            "background shell_exec of `{shown}` finished for call {}, but {why}",
                            x.call
                        ),
                    );
                }
            }
            ProcKind::Background if !inside && kind != Kind::BgEnded => self.problem(
                ProblemKind::Structure,
                format!(
                    "background shell_exec of `{shown}` ({}) outside its call {}",
                    x.phase_name(),
                    x.call
                ),
            ),
            ProcKind::Background => {}
        }
    }

    /// The blobs of a process's end, and the sizes it gives for them.
    pub(super) fn shell_end(&mut self, call: &str, end: &ShellEnd) {
        for (blob, name) in [
            (&end.stdout, "stdout"),
            (&end.stderr, "stderr"),
            (&end.log_blob, "log"),
        ] {
            if let Some(b) = blob {
                self.blob(b, &format!("call {call} {name}"));
            }
        }
        for (bytes, blob, cut, name) in [
            (end.stdout_bytes, &end.stdout, end.stdout_cut, "stdout"),
            (end.stderr_bytes, &end.stderr, end.stderr_cut, "stderr"),
        ] {
            // A cut says where its blob joins head and tail and how much went between:
            // the blob and the count must agree with it.
            if let (Some(n), Some(b), Some(c)) = (bytes, blob, cut)
                && (c.at > b.len || b.len.checked_add(c.dropped_bytes) != Some(n))
            {
                self.problem(
                    ProblemKind::Output,
                    format!(
                        "call {call}: {name} cut at {} dropping {} bytes, but {name}_bytes is {n} and its blob {} bytes",
                        c.at, c.dropped_bytes, b.len
                    ),
                );
            }
            // Past the capture limit the blob keeps the first bytes only.
            if let (Some(n), Some(b)) = (bytes, blob)
                && b.len != n.min(self.limits.shell_capture_bytes_max)
            {
                self.problem(
                    ProblemKind::Output,
                    format!(
                        "call {call}: {name}_bytes is {n} but its {name} blob is {} bytes",
                        b.len
                    ),
                );
            }
        }
    }

    /// A foreground command's output is what its records and blobs give.
    pub(super) fn shell_output(&mut self, f: &ToolFinished, p: &Pending, exec: &ShellExec) {
        let Some(x) = exec.end() else {
            return;
        };
        if x.error.is_some() {
            // It never started: the output is the system's error, not in the log.
            return;
        }
        // A stream's preview, from its blob; `None` when the blob is reported.
        let stream = |v: &Verifier, blob: &Option<BlobRef>, bytes: Option<u64>| match blob {
            None => Some(shell_output::Stream::Lost),
            // Past the capture limit the blob keeps the head only, and the preview was
            // made from every byte: it cannot be rebuilt.
            Some(b) if bytes.is_some_and(|n| b.len < n) => Some(shell_output::Stream::Cut),
            Some(b) if v.blob_intact(b) => {
                shell_output::preview(&v.blobs, b, &v.limits).map(shell_output::Stream::Shown)
            }
            Some(_) => None,
        };
        let (Some(out), Some(err)) = (
            stream(self, &x.stdout, x.stdout_bytes),
            stream(self, &x.stderr, x.stderr_bytes),
        ) else {
            return;
        };
        // The timeout field is the tool's own (`timeout_ms`, `timeout_secs`): asked of it.
        let field = self
            .registry
            .effects(&p.tool)
            .and_then(|e| e.timeout)
            .unwrap_or(cairn_tools::TimeoutField::MS);
        let note = field
            .asked_ms(&p.input)
            .filter(|t| *t > self.limits.shell_timeout_ms_max);
        let expected = shell_output::expected(
            exec,
            x,
            [out, err],
            &p.changes,
            (field, note),
            &self.writable,
            &self.limits,
        );
        let recorded = match &f.output_blob {
            None => decide::unflagged(&f.output, &f.injection).to_string(),
            Some(b) if self.blob_intact(b) => match self.blobs.get(&b.hash) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(_) => return,
            },
            Some(_) => return,
        };
        let env = holes::has_env_marker(&recorded);
        let fits = match (&expected[..], env) {
            ([Piece::Text(e)], false) => *e == recorded,
            ([Piece::Text(e)], true) => holes::fits(&holes::markers_as_holes(&recorded, true), e),
            (_, false) => holes::fits(&expected, &recorded),
            // Holes on both sides: nothing certain to compare.
            (_, true) => return,
        };
        self.report.outputs_checked += 1;
        if !fits {
            let hint = match (&expected[..], env) {
                ([Piece::Text(e)], false) => first_difference(e, &recorded),
                _ => String::new(),
            };
            self.problem(
                ProblemKind::Output,
                format!(
                    "call {} ({}): the output differs from what its command's records give (exit status, time, stdout and stderr blobs, files changed){hint}",
                    f.call, p.tool
                ),
            );
        }
    }
}

/// `: line N is …, the records give …` for the first line where two texts differ.
fn first_difference(expected: &str, recorded: &str) -> String {
    let short = |s: &str| {
        let mut t: String = s.chars().take(80).collect();
        if t.len() < s.len() {
            t.push('…');
        }
        t
    };
    let mut e = expected.split_inclusive('\n');
    let mut r = recorded.split_inclusive('\n');
    for n in 1.. {
        match (e.next(), r.next()) {
            (None, None) => break,
            (a, b) if a == b => {}
            (a, b) => {
                return format!(
                    ": line {n} is {:?}, the records give {:?}",
                    short(b.unwrap_or("(nothing)")),
                    short(a.unwrap_or("(nothing)"))
                );
            }
        }
    }
    String::new()
}

/// True when the tool answers with its command's own output and status (the shell
/// tools), which verify rebuilds from the `shell_exec` records; `problems` runs a
/// command too but answers with what it parsed from it.
fn answers_with_command(tool: &str) -> bool {
    cairn_tools::effects_of(tool).is_some_and(|e| e.command_output)
}

#[cfg(test)]
mod tests {
    use cairn_core::event::ShellPhase;
    use serde_json::json;

    use super::super::testing::{found, pending, run, verifier};
    use super::*;

    fn exec(seq: u64, call: &str, phase: ShellPhase) -> Record {
        Record {
            seq,
            ts: String::new(),
            hash: Hash::of(&[seq as u8]),
            event: Event::ShellExec(ShellExec {
                call: call.into(),
                id: None,
                argv: vec!["ls".into()],
                argv_hash: None,
                cwd: "/w".into(),
                pid: Some(7),
                start_time: None,
                kind: ProcKind::Foreground,
                timeout_ms: None,
                log: None,
                sandbox: None,
                phase,
            }),
        }
    }

    #[test]
    fn a_command_is_inside_its_call_and_its_sizes_agree_with_its_blobs() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        v.check_blobs = false;
        pending(&mut v, 1, "c1", "shell", json!({"command": "ls"}));
        let mut end = ShellEnd::new(ExecStatus::Ok);
        end.exit_code = Some(0);
        end.stdout_bytes = Some(10);
        end.stdout = Some(BlobRef {
            hash: Hash::of(b"x"),
            len: 3,
        });
        let records = [
            exec(2, "c9", ShellPhase::Started),
            exec(3, "c1", ShellPhase::Finished(end)),
        ];
        run(&mut v, &mut CommandsFold, &records);
        assert!(v.pending["c1"].exec.is_some());
        assert_eq!(
            found(v),
            [
                (
                    Some(2),
                    ProblemKind::Structure,
                    "foreground shell_exec outside its call c9".to_string()
                ),
                (
                    Some(3),
                    ProblemKind::Output,
                    "call c1: stdout_bytes is 10 but its stdout blob is 3 bytes".to_string()
                ),
            ]
        );
    }
}
