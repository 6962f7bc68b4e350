//! The commands: every process a shell tool ran, and the background processes still
//! open at the end of the log.

use std::collections::{BTreeMap, HashMap};

use cairn_core::Record;
use cairn_core::event::{Event, ProcKind, ShellEnd, ShellExec, ShellPhase};
use serde::Serialize;

use super::header::EndState;
use super::{Clock, Fold};

/// One process a shell tool ran.
#[derive(Debug, Clone, Serialize)]
pub struct CommandEntry {
    pub seq: u64,
    pub call: String,
    /// The process-table id of a background process.
    pub id: Option<String>,
    /// The full command line, quoted as a shell would need.
    pub command: String,
    pub cwd: String,
    pub kind: ProcKind,
    /// `ok`, `failed`, `timeout`, `cancelled` or `running` (no end recorded).
    pub status: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub elapsed_us: Option<u64>,
    /// Bytes of standard output and error (or of the log of a background process).
    pub output_bytes: u64,
    pub error: Option<String>,
    pub start_ms: u64,
    pub end_ms: u64,
}

/// A background process with no recorded end.
#[derive(Debug, Clone, Serialize)]
pub struct OpenProcess {
    pub id: String,
    pub pid: Option<u32>,
    pub command: String,
    /// `running` when the session has not ended, `lost` when it ended (or was resumed)
    /// without recording the process's end.
    pub state: String,
}

/// The commands, from each `shell_exec` start and end (matched by call and process
/// id), and the background processes started and not ended.
#[derive(Debug)]
pub(super) struct CommandsFold {
    clock: Clock,
    commands: Vec<CommandEntry>,
    /// The commands started and not ended, by call and process id: their place.
    open: HashMap<(String, Option<String>), usize>,
    /// The background processes started and not ended, by id: pid and command line.
    background: BTreeMap<String, (Option<u32>, String)>,
}

impl CommandsFold {
    pub(super) fn new(clock: Clock) -> CommandsFold {
        CommandsFold {
            clock,
            commands: Vec::new(),
            open: HashMap::new(),
            background: BTreeMap::new(),
        }
    }

    /// The commands, and the background processes still open: `lost` once the log
    /// recorded an end (or a resume) without theirs, `running` otherwise (an
    /// interrupted or running session's processes may still run).
    pub(super) fn finish(self, end: EndState) -> (Vec<CommandEntry>, Vec<OpenProcess>) {
        let lost = matches!(
            end,
            EndState::Finished | EndState::Failed | EndState::Resumed
        );
        let open = self
            .background
            .into_iter()
            .map(|(id, (pid, command))| OpenProcess {
                id,
                pid,
                command,
                state: if lost { "lost" } else { "running" }.into(),
            })
            .collect();
        (self.commands, open)
    }

    /// A new entry for `x`, at `ts`, not yet ended.
    fn entry(&self, r: &Record, x: &ShellExec, status: &str) -> CommandEntry {
        CommandEntry {
            seq: r.seq,
            call: x.call.clone(),
            id: x.id.clone(),
            command: cairn_tools::shell::shown_argv(&x.argv),
            cwd: x.cwd.clone(),
            kind: x.kind,
            status: status.to_string(),
            exit_code: None,
            signal: None,
            elapsed_us: None,
            output_bytes: 0,
            error: None,
            start_ms: self.clock.at(r),
            end_ms: self.clock.end_ms,
        }
    }

    fn started(&mut self, r: &Record, x: &ShellExec) {
        self.open
            .insert((x.call.clone(), x.id.clone()), self.commands.len());
        if let (ProcKind::Background, Some(id)) = (x.kind, &x.id) {
            self.background
                .insert(id.clone(), (x.pid, cairn_tools::shell::shown_argv(&x.argv)));
        }
        let entry = self.entry(r, x, x.status_name());
        self.commands.push(entry);
    }

    fn finished(&mut self, r: &Record, x: &ShellExec, end: &ShellEnd) {
        if let Some(id) = &x.id {
            self.background.remove(id);
        }
        let i = match self.open.remove(&(x.call.clone(), x.id.clone())) {
            Some(i) => i,
            None => {
                // A process that failed to start has no `started` record.
                let entry = self.entry(r, x, "");
                self.commands.push(entry);
                self.commands.len() - 1
            }
        };
        let at = self.clock.at(r);
        let Some(c) = self.commands.get_mut(i) else {
            return;
        };
        c.status = end.status.as_str().to_string();
        c.exit_code = end.exit_code;
        c.signal = end.signal;
        c.elapsed_us = end.elapsed_us;
        c.output_bytes = end.stdout_bytes.unwrap_or(0)
            + end.stderr_bytes.unwrap_or(0)
            + end.log_blob.as_ref().map_or(0, |b| b.len);
        c.error = end.error.clone();
        c.end_ms = at;
    }
}

impl Fold for CommandsFold {
    fn apply(&mut self, r: &Record) {
        let Event::ShellExec(x) = &r.event else {
            return;
        };
        match &x.phase {
            ShellPhase::Started => self.started(r, x),
            ShellPhase::Finished(end) => self.finished(r, x, end),
        }
    }
}

#[cfg(test)]
mod tests {
    use cairn_core::event::ExecStatus;
    use cairn_store::{BlobRef, Hash};

    use super::super::testing::{record, run};
    use super::*;

    fn exec(call: &str, id: Option<&str>, argv: &[&str], phase: ShellPhase) -> Event {
        Event::ShellExec(ShellExec {
            call: call.into(),
            id: id.map(str::to_string),
            argv: argv.iter().map(|a| a.to_string()).collect(),
            argv_hash: None,
            cwd: "/w".into(),
            pid: Some(77),
            start_time: None,
            kind: if id.is_some() {
                ProcKind::Background
            } else {
                ProcKind::Foreground
            },
            timeout_ms: None,
            log: None,
            sandbox: None,
            phase,
        })
    }

    fn end(status: ExecStatus, exit_code: Option<i32>) -> ShellPhase {
        let mut end = ShellEnd::new(status);
        end.exit_code = exit_code;
        end.elapsed_us = Some(1234);
        end.stdout_bytes = Some(10);
        end.stderr_bytes = Some(5);
        ShellPhase::Finished(end)
    }

    fn commands(records: &[Record], state: EndState) -> (Vec<CommandEntry>, Vec<OpenProcess>) {
        run(CommandsFold::new(Clock::of(records)), records).finish(state)
    }

    #[test]
    fn a_command_runs_from_its_start_to_its_end() {
        let records = [
            record(
                1,
                0,
                exec("c1", None, &["sh", "-c", "wc -l a"], ShellPhase::Started),
            ),
            record(
                2,
                40,
                exec(
                    "c1",
                    None,
                    &["sh", "-c", "wc -l a"],
                    end(ExecStatus::Failed, Some(1)),
                ),
            ),
            record(
                3,
                100,
                exec("c2", None, &["sleep", "9"], ShellPhase::Started),
            ),
        ];
        let (commands, open) = commands(&records, EndState::Interrupted);
        let rows: Vec<_> = commands
            .iter()
            .map(|c| {
                (
                    c.seq,
                    c.status.as_str(),
                    c.exit_code,
                    c.output_bytes,
                    c.start_ms,
                    c.end_ms,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (1, "failed", Some(1), 15, 0, 40),
                (3, "running", None, 0, 100, 100),
            ]
        );
        assert_eq!(commands[0].command, "sh -c 'wc -l a'");
        assert_eq!(commands[0].elapsed_us, Some(1234));
        assert!(open.is_empty(), "a foreground command is no open process");
    }

    #[test]
    fn a_process_that_failed_to_start_is_listed_at_its_end() {
        let mut failed = ShellEnd::new(ExecStatus::Failed);
        failed.error = Some("no such file".into());
        let records = [record(
            5,
            0,
            exec("c", None, &["nope"], ShellPhase::Finished(failed)),
        )];
        let (commands, _) = commands(&records, EndState::Finished);
        let rows: Vec<_> = commands
            .iter()
            .map(|c| (c.seq, c.status.as_str(), c.error.as_deref(), c.output_bytes))
            .collect();
        assert_eq!(rows, [(5, "failed", Some("no such file"), 0)]);
    }

    #[test]
    fn a_background_process_without_an_end_is_running_or_lost_as_the_log_ends() {
        let mut logged = ShellEnd::new(ExecStatus::Ok);
        logged.log_blob = Some(BlobRef {
            hash: Hash::of(b"log"),
            len: 300,
        });
        let records = [
            record(
                1,
                0,
                exec("c1", Some("bg1"), &["serve"], ShellPhase::Started),
            ),
            record(
                2,
                5,
                exec("c2", Some("bg2"), &["watch", "x"], ShellPhase::Started),
            ),
            record(
                3,
                9,
                exec("c3", Some("bg1"), &["serve"], ShellPhase::Finished(logged)),
            ),
        ];
        let states = [
            (EndState::Interrupted, "running"),
            (EndState::Running, "running"),
            (EndState::Finished, "lost"),
            (EndState::Failed, "lost"),
            (EndState::Resumed, "lost"),
        ];
        for (end_state, expected) in states {
            let (commands, open) = commands(&records, end_state);
            let open: Vec<_> = open
                .iter()
                .map(|p| (p.id.as_str(), p.pid, p.command.as_str(), p.state.as_str()))
                .collect();
            assert_eq!(open, [("bg2", Some(77), "watch x", expected)]);
            // Its end came from another call: an entry of its own, the log's bytes.
            let rows: Vec<_> = commands
                .iter()
                .map(|c| (c.call.as_str(), c.status.as_str(), c.output_bytes))
                .collect();
            assert_eq!(
                rows,
                [
                    ("c1", "running", 0),
                    ("c2", "running", 0),
                    ("c3", "ok", 300)
                ]
            );
        }
    }
}
