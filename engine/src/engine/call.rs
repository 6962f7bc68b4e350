//! One tool call, in four phases: admit (the rules that need no answer, then
//! `tool_started`), authorise (the permission, asked and recorded), act (the tool or
//! the MCP server), finish (the answer redacted, capped, recorded in `tool_finished`).
//! Each phase hands the next what it found, so nothing is looked up twice: the path
//! the permission step resolved is the one the tool opens, unless a question was asked
//! (a question may wait long: the tool then resolves the path as it is when it runs).

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Instant;

use super::{CallOutcome, Engine, changes_the_world, validate_mcp};
use crate::event::{Answer, Event, Observed, ToolFinished};
use crate::mcp::McpRef;
use crate::permission::Need;
use crate::redact::Counts;
use cairn_core::decide::{self, Decision, Permission, Question};
use cairn_core::scrub;
use cairn_tools::{Ctx, McpTool, Result, Tool, ToolOutput};

/// A call whose `tool_started` is recorded, and what the admission rules said of it.
struct Admitted {
    call: String,
    started: Instant,
    /// What was redacted of the call so far (its input); the answer's count with it.
    redactions: Counts,
    admission: Admission,
}

/// What the admission rules said of a call.
enum Admission {
    /// A built-in tool of the catalogue may go on to its permission.
    Tool,
    /// An MCP server's tool may go on to its permission.
    Mcp(McpTool),
    /// The call ends here with this answer (an unknown tool, a refused input).
    Answered(ToolOutput),
}

/// A call allowed to act, with what its permission step found, or its answer.
enum Authorised {
    /// A built-in tool.
    Tool {
        /// Folders outside the workspace whose files the call may touch.
        outside_ok: Vec<PathBuf>,
        /// The call's `path`, as the permission step resolved it; `None` after a
        /// question, so that the tool resolves it as it is when it runs.
        resolved: Option<cairn_tools::Resolved>,
    },
    /// An MCP server's tool.
    Mcp(McpTool),
    /// The call does not act: refused, unknown or denied.
    Answered(ToolOutput),
}

/// A call that acted (or was answered without acting), not yet finished.
struct Acted {
    call: String,
    started: Instant,
    redactions: Counts,
    output: ToolOutput,
    /// An MCP call's whole `tools/call` result.
    mcp_raw: Option<serde_json::Value>,
}

impl Engine {
    /// Runs one tool call with a given permission answer (a script's `approve`), used
    /// instead of asking the approver when the call needs one.
    pub fn call_with(
        &mut self,
        tool: &str,
        input: serde_json::Value,
        answer: Option<Answer>,
    ) -> Result<CallOutcome> {
        let admitted = self.admit(tool, &input)?;
        let authorised = self.authorise(tool, &input, &admitted, answer)?;
        let acted = self.act(tool, &input, admitted, authorised)?;
        self.finish_call(tool, acted)
    }

    /// Takes the rules that need no answer (the input's size and schema, repeats,
    /// reads) on the state before this call's own records, as verify takes them, and
    /// records `tool_started`.
    fn admit(&mut self, tool: &str, input: &serde_json::Value) -> Result<Admitted> {
        // A cancel meant for an earlier call (or between calls) does not reach this one.
        self.rt.cancel.clear();
        self.poll_background()?;
        let started = Instant::now();
        let call = format!("c{}", self.rec.state.calls_started + 1);
        let input_bytes = cairn_core::spill::json_len(input);
        let (mcp_tool, mcp_failed) = self.mcp_tool(tool);
        let mut redactions = Counts::new();
        let (recorded_input, input_hash) = self.recorded_input(input, input_bytes, &mut redactions);
        let observed = self.observed(tool, input, &recorded_input);
        let builtin = self.registry.get(tool);
        // Decided on the state before this call's own records, as verify decides it:
        // the fold counts repeats of the input as recorded.
        let admit = |validate: &dyn Fn() -> std::result::Result<(), cairn_tools::InputError>| {
            decide::admit(
                &self.rec.state,
                &self.config.limits,
                tool,
                &recorded_input,
                input_bytes,
                observed.as_ref(),
                validate,
            )
        };
        let admission = match (builtin, &mcp_tool) {
            (Some(t), _) => admission(admit(&|| t.validate(input)), Admission::Tool),
            (None, Some(t)) => {
                admission(admit(&|| validate_mcp(t, input)), Admission::Mcp(t.clone()))
            }
            (None, None) => Admission::Answered(ToolOutput::error(format!(
                "unknown tool '{tool}'; this catalog has: {}{mcp_failed}",
                self.registry.all_names().join(", "),
            ))),
        };
        // A call of a tool that neither runs programs nor reaches outside has its records
        // written together as it ends (one `write`, not one per record); any other
        // call's are written by the sync before it acts.
        if let Some(t) = builtin
            && !changes_the_world(t.effects())
        {
            self.rec.hold();
        }
        self.rec.append(&Event::ToolStarted {
            at: None,
            call: call.clone(),
            tool: tool.to_string(),
            input: recorded_input.into_owned(),
            input_hash,
            mcp: mcp_tool.as_ref().map(|t| McpRef {
                server: t.server.clone(),
                tool: t.tool.clone(),
            }),
            observed,
        })?;
        Ok(Admitted {
            call,
            started,
            redactions,
            admission,
        })
    }

    /// The MCP server's tool a call names, and why servers failed to start (one a
    /// line): a tool not listed yet has its server started on first use, and the
    /// servers that said their tools changed are listed again.
    fn mcp_tool(&mut self, tool: &str) -> (Option<McpTool>, String) {
        let mut failed = Vec::new();
        if tool.starts_with(crate::mcp::MCP_PREFIX) && self.registry.mcp_tool(tool).is_none() {
            failed = self.start_mcp();
        }
        self.relist_changed_mcp();
        let failed = failed.iter().map(|e| format!("\n{e}")).collect();
        (self.registry.mcp_tool(tool).cloned(), failed)
    }

    /// The input as `tool_started` records it, and the keyed hash of what it was when
    /// it is recorded redacted (a script's step is matched with it on resume). An input
    /// too large to run is also too large to record: its size stands in. An input
    /// with no secret (nearly every one) is recorded as it is, not rebuilt.
    fn recorded_input<'i>(
        &self,
        input: &'i serde_json::Value,
        input_bytes: usize,
        redactions: &mut Counts,
    ) -> (Cow<'i, serde_json::Value>, Option<String>) {
        match decide::input_size(input_bytes, &self.config.limits) {
            Decision::Allow if !self.redactor.holds_secret(input) => (Cow::Borrowed(input), None),
            Decision::Allow => (
                Cow::Owned(self.redactor.redact_json(input, redactions)),
                self.rec.secret_key().map(|k| scrub::input_hash(k, input)),
            ),
            Decision::Refuse(_) => (Cow::Owned(decide::oversized_input(input_bytes)), None),
        }
    }

    /// The repeat rule's fact, gathered only when the count is reached: what the one
    /// file the answer depends on holds now (recorded in `tool_started`). A tool that
    /// may write a file it has not read (an append) has it gathered every time, so the
    /// log knows the content its write starts from.
    fn observed(
        &self,
        tool: &str,
        input: &serde_json::Value,
        recorded_input: &serde_json::Value,
    ) -> Option<Observed> {
        let observes = self.registry.get(tool).is_some_and(|t| t.observes(input));
        (self.rec.state.repeat_rule == decide::RepeatRule::Facts
            && (observes
                || decide::repeats(&self.rec.state, tool, recorded_input)
                    >= self.config.limits.repeat_calls_max))
            .then(|| self.observe(tool, recorded_input))
            .flatten()
    }

    /// Takes the permission of an admitted call: asked (and recorded) when no grant
    /// covers it, with a write's question showing the write.
    fn authorise(
        &mut self,
        tool: &str,
        input: &serde_json::Value,
        admitted: &Admitted,
        answer: Option<Answer>,
    ) -> Result<Authorised> {
        let call = admitted.call.as_str();
        let t = match &admitted.admission {
            Admission::Answered(output) => return Ok(Authorised::Answered(output.clone())),
            Admission::Mcp(t) => {
                let permission =
                    decide::permission(&self.rec.state, mcp_need(t, input), &self.guards);
                return Ok(match self.decide(call, &t.name, permission, answer)? {
                    Err(denied) => Authorised::Answered(denied),
                    Ok(_) => Authorised::Mcp(t.clone()),
                });
            }
            Admission::Tool => match self.registry.get(tool) {
                Some(t) => t,
                None => return Ok(Authorised::Answered(unknown(tool))),
            },
        };
        let asking = cairn_tools::Asking {
            root: &self.root,
            credential_files: &self.credential_files,
            links: cairn_tools::links::Links::Disk,
        };
        // The call's path is resolved once, here, where it is checked (a path outside
        // the workspace asks), and the tool takes it.
        let mut resolved = input
            .get("path")
            .and_then(|v| v.as_str())
            .map(|raw| cairn_tools::Resolved::of(&self.fs, &self.home, raw));
        let need = self.need(tool, t.permission(input, &asking), input, resolved.as_ref());
        let mut permission = decide::permission(&self.rec.state, need, &self.guards);
        if let Permission::Ask(q) = &mut permission {
            // A question may wait long: the tool then resolves the path as it is when
            // it runs (the preview, read now, is the last to take this resolution).
            self.show_preview(t, tool, input, resolved.take().as_ref(), q);
        }
        Ok(match self.decide(call, tool, permission, answer)? {
            Err(denied) => Authorised::Answered(denied),
            Ok(once_dir) => {
                let mut outside_ok = self.allowed_dirs(tool);
                outside_ok.extend(once_dir);
                Authorised::Tool {
                    outside_ok,
                    resolved,
                }
            }
        })
    }

    /// A question about a write shows the write as a diff of the whole file, read now
    /// (the detail a prompt shows; no rule depends on it), its path as the permission
    /// step resolved it.
    fn show_preview(
        &self,
        t: &dyn Tool,
        tool: &str,
        input: &serde_json::Value,
        resolved: Option<&cairn_tools::Resolved>,
        q: &mut Question,
    ) {
        if q.key != tool {
            return;
        }
        if let Some(p) = t.preview(input, &mut |path| self.preview_read(path, resolved)) {
            let note = cairn_core::permission::GIT_WRITE_NOTE;
            q.detail = if q.detail.ends_with(note) {
                format!("{p}\n{note}")
            } else {
                p
            };
        }
    }

    /// Runs an authorised call: the tool, or the MCP server.
    fn act(
        &mut self,
        tool: &str,
        input: &serde_json::Value,
        admitted: Admitted,
        authorised: Authorised,
    ) -> Result<Acted> {
        let Admitted {
            call,
            started,
            mut redactions,
            ..
        } = admitted;
        let mut mcp_raw = None;
        let output = match authorised {
            Authorised::Answered(output) => output,
            Authorised::Mcp(t) => self.call_mcp(&t, input, &mut mcp_raw)?,
            Authorised::Tool {
                outside_ok,
                resolved,
            } => match self.registry.get(tool) {
                None => unknown(tool),
                Some(t) => {
                    let mut ctx = Ctx {
                        call: call.clone(),
                        root: &self.root,
                        redactor: &self.redactor,
                        redactions: &mut redactions,
                        fs: &self.fs,
                        home: &self.home,
                        limits: &self.config.limits,
                        web_config: &self.config.web,
                        web: &cairn_net::HttpWeb,
                        check_command: self.config.check_command.as_deref(),
                        check_timeout_ms: self.config.check_timeout_ms,
                        credential_files: &self.credential_files,
                        project_dir: &self.project.dir,
                        session: &self.id,
                        rec: &mut self.rec,
                        outside_ok,
                        rt: &mut self.rt,
                        resolved,
                    };
                    // What the call is about to do outside the log cannot be taken
                    // back: the records announcing it reach the disk first.
                    if changes_the_world(t.effects()) {
                        ctx.rec.sync()?;
                    }
                    t.run(&mut ctx, input)?
                }
            },
        };
        Ok(Acted {
            call,
            started,
            redactions,
            output,
            mcp_raw,
        })
    }

    /// Calls an MCP server's tool the call was allowed.
    fn call_mcp(
        &mut self,
        t: &McpTool,
        input: &serde_json::Value,
        raw: &mut Option<serde_json::Value>,
    ) -> Result<ToolOutput> {
        let timeout = std::time::Duration::from_millis(self.config.limits.mcp_call_timeout_ms);
        // The server may act on the call at once: its records reach the disk first.
        self.rec.sync()?;
        Ok(
            match self
                .mcp
                .call_tool(&t.server, &t.tool, input, timeout, &self.rt.cancel)
            {
                Ok(result) => {
                    let out = crate::mcp::to_output(&result);
                    *raw = Some(result);
                    out
                }
                Err(e) => ToolOutput {
                    status: e.status(),
                    text: e.to_string(),
                    refusal: None,
                    redacted: false,
                },
            },
        )
    }

    /// Records the call's end: what the model sees, what the log keeps and the blob of
    /// the whole output are all redacted (by the tool itself when it says so: a search,
    /// on its threads); capped, and flagged when what the model is shown reads like an
    /// instruction aimed at it (prompt injection).
    fn finish_call(&mut self, tool: &str, acted: Acted) -> Result<CallOutcome> {
        let Acted {
            call,
            started,
            mut redactions,
            mut output,
            mcp_raw,
        } = acted;
        let (full, clean) = self.redacted_answer(tool, &mut output, &mut redactions);
        let decide::Shown {
            text,
            cut,
            injection,
        } = decide::shown(&full, &self.config.limits);
        let output_blob = if cut {
            Some(self.rec.put_blob(full.as_bytes())?)
        } else {
            None
        };
        let mcp_raw = mcp_raw.map(|raw| self.redactor.redact_json(&raw, &mut redactions));
        let mcp_result = match &mcp_raw {
            Some(raw) => Some(self.rec.put_blob(raw.to_string().as_bytes())?),
            None => None,
        };
        let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        // What the model is shown is the answer searched above when nothing was cut
        // from it nor added to it.
        let clean = clean && text == full;
        let finished = ToolFinished {
            at: None,
            call: call.clone(),
            status: output.status,
            output: text,
            output_blob,
            elapsed_us,
            refusal: output.refusal.clone(),
            redactions,
            mcp_result,
            injection,
        };
        let finished = Event::ToolFinished(finished);
        let checked = match &finished {
            Event::ToolFinished(f) if clean => Some(f.output.as_str()),
            _ => None,
        };
        self.rec.append_checked(&finished, checked)?;
        self.rec.commit()?;
        // The answer goes back to the caller: moved out of the record, not copied.
        let Event::ToolFinished(finished) = finished else {
            unreachable!("built as a tool_finished above")
        };
        Ok(CallOutcome {
            call,
            tool: tool.to_string(),
            status: output.status,
            output: finished.output,
            refusal: output.refusal,
            elapsed_us,
            mcp_result: mcp_raw,
        })
    }

    /// The call's whole answer redacted, and whether it was searched here, with the
    /// redactor every record goes through, and held no secret: then the record need
    /// not search it again.
    fn redacted_answer(
        &self,
        tool: &str,
        output: &mut ToolOutput,
        redactions: &mut Counts,
    ) -> (String, bool) {
        let full = std::mem::take(&mut output.text);
        if output.redacted {
            debug_assert!(
                matches!(
                    self.rec.redactor().redact(&full, &mut Counts::new()),
                    Cow::Borrowed(_)
                ),
                "{tool}'s answer, redacted by the tool, still holds a secret"
            );
            return (full, false);
        }
        match self.rec.redactor().redact(&full, redactions) {
            Cow::Borrowed(_) => (full, true),
            Cow::Owned(redacted) => (redacted, false),
        }
    }
}

/// What the admission rules' decision makes of a call that may go on as `allowed`.
fn admission(decision: Decision, allowed: Admission) -> Admission {
    match decision {
        Decision::Allow => allowed,
        Decision::Refuse(refused) => Admission::Answered(refused.into()),
    }
}

/// The answer to a call of a tool the catalogue lacks.
fn unknown(tool: &str) -> ToolOutput {
    ToolOutput::error(format!("unknown tool '{tool}'"))
}

/// What an MCP call needs: the server's tool, asked with its input.
fn mcp_need(t: &McpTool, input: &serde_json::Value) -> Need {
    Need::ask(
        cairn_tools::mcp_names::permission_key(&t.server, &t.tool),
        format!(
            "tool {} of MCP server {}, with input:\n{}",
            t.tool,
            t.server,
            serde_json::to_string_pretty(input).unwrap_or_default()
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::event::Status;
    use crate::permission::{Approver, Request};
    use crate::{Catalog, EngineConfig, Home};

    use super::*;

    /// Answers once, after making the workspace's `d` a link to `e`, as a person could
    /// while the question waits.
    struct MovesD(PathBuf);

    impl Approver for MovesD {
        fn answer(&mut self, _: &Request) -> (Answer, bool) {
            let d = self.0.join("d");
            std::fs::rename(&d, self.0.join("d.old")).unwrap_or_else(|e| panic!("{e}"));
            std::os::unix::fs::symlink("e", &d).unwrap_or_else(|e| panic!("{e}"));
            (Answer::Once, true)
        }
    }

    fn start(home: &Path, ws: &Path) -> Engine {
        let mut config = EngineConfig::new(Catalog::Thoth);
        config.durability = cairn_store::Durability::None;
        Engine::start(&Home::at(home), ws, config).unwrap_or_else(|e| panic!("{e}"))
    }

    // Guards against the path the permission step resolved being handed to the tool
    // after a question: the question may wait long, and the tool resolves the path as
    // it is when it runs. Here `d/a.txt` was read, and leads to `e/a.txt`, never read,
    // by the time the edit runs: the edit is refused, not made to `e/a.txt` as `d/a.txt`.
    #[test]
    fn a_path_that_changed_while_its_question_waited_is_resolved_again() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = tmp.path().join("ws");
        for dir in ["d", "e"] {
            std::fs::create_dir_all(ws.join(dir)).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(ws.join(dir).join("a.txt"), "x\n").unwrap_or_else(|e| panic!("{e}"));
        }
        let mut e = start(&tmp.path().join("home"), &ws);
        e.set_approver(Box::new(MovesD(e.root().to_path_buf())));
        let mut call = |tool: &str, input: serde_json::Value| {
            e.call(tool, input).unwrap_or_else(|e| panic!("{e}"))
        };
        let read = call("read_file", serde_json::json!({"path": "d/a.txt"}));
        assert_eq!(read.status, Status::Ok, "{}", read.output);
        let edit = serde_json::json!({"path": "d/a.txt", "old_string": "x", "new_string": "y"});
        let out = call("edit_file", edit);
        assert_eq!(out.refusal.map(|r| r.path), Some(Some("e/a.txt".into())));
        for dir in ["d.old", "e"] {
            let text = std::fs::read_to_string(ws.join(dir).join("a.txt")).ok();
            assert_eq!(text.as_deref(), Some("x\n"));
        }
        assert!(e.state().ws_changes.is_empty());
        e.end("done").unwrap_or_else(|e| panic!("{e}"));
    }
}
