//! `cairn run --script` on a terminal: the engine runs the script
//! (`cairn_engine::script::run_with`) on its own thread, the live view
//! (`cairn_cli::view::ViewApp`) on this one; permission requests cross over as
//! messages and their answers come back. What each call did reaches the view through
//! the engine's observer, never by reading the log back. Ctrl-C is a key in the view
//! (it cancels the running call); SIGTERM and SIGHUP close the view and end the
//! session.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc::{self, Receiver, Sender};

use anyhow::Result;
use cairn_cli::summary::first_line;
use cairn_cli::view::{Cmd, Msg, ViewApp};
use cairn_engine::event::{Answer, Event, ShellPhase, WriteStatus};
use cairn_engine::script::{self, Hooks, Step};
use cairn_engine::{CallOutcome, CancelHandle, Engine, EngineConfig, Home, Record};
use cairn_store::BlobStore;

use crate::out;
use crate::screen::ViewApprover;

/// Handles the view's requests that are not answers; true on `Quit`.
fn serve(engine: &mut Engine, cmd: Cmd, to_view: &Sender<Msg>) -> bool {
    let list = |engine: &Engine| {
        engine
            .processes()
            .into_iter()
            .map(|p| {
                (
                    p.id.clone(),
                    p.status.to_string(),
                    cairn_engine::shell::shown_argv(&p.argv),
                )
            })
            .collect()
    };
    let _ = match cmd {
        Cmd::Quit => return true,
        // The runner triggers the cancel handle itself; between calls there is nothing to
        // cancel.
        Cmd::Answer(_) | Cmd::CancelCall => Ok(()),
        Cmd::ListProcesses => to_view.send(Msg::Processes(list(engine))),
        Cmd::Cancel(id) => {
            let note = match engine.cancel_process(&id) {
                Ok(s) => format!("{id}: {}", s.as_str()),
                Err(e) => format!("{id}: {e}"),
            };
            let _ = to_view.send(Msg::Note(note));
            to_view.send(Msg::Processes(list(engine)))
        }
        Cmd::ListAllow => to_view.send(Msg::Allow(
            engine
                .allow_list()
                .load()
                .map(|k| k.into_iter().collect())
                .unwrap_or_default(),
        )),
        Cmd::ResetAllow => {
            let _ = engine.allow_list().reset();
            to_view.send(Msg::Allow(
                engine
                    .allow_list()
                    .load()
                    .map(|k| k.into_iter().collect())
                    .unwrap_or_default(),
            ))
        }
    };
    false
}

/// The script's hooks on the engine's thread: between steps they serve the view's
/// requests (and stop at `q`); as a step starts and a call ends they tell the view,
/// with the diffs and command lines of the records the engine's observer handed over
/// since the last call (a background process's end, recorded before a call, shows
/// with it).
struct Live {
    to_view: Sender<Msg>,
    cmds: Receiver<Cmd>,
    records: Receiver<Record>,
    blobs: BlobStore,
    quit: bool,
    /// The calls' waits for a person, apart from their run time.
    waits: cairn_cli::summary::PersonWaits,
}

impl Live {
    /// The diffs of the writes and the command lines of the commands recorded since
    /// the last look.
    fn effects(&mut self) -> (Vec<String>, Vec<String>) {
        let mut diffs = Vec::new();
        let mut commands = Vec::new();
        for r in self.records.try_iter() {
            self.waits.apply(&r);
            match r.event {
                Event::FileWrite(w) if w.status == WriteStatus::Ok => {
                    diffs.push(crate::screen::write_shown(&w, &self.blobs))
                }
                Event::ShellExec(x) if x.phase == ShellPhase::Started => {
                    commands.push(cairn_engine::shell::shown_argv(&x.argv))
                }
                _ => {}
            }
        }
        (diffs, commands)
    }
}

impl Hooks for Live {
    fn before(&mut self, engine: &mut Engine, line: usize, step: &Step) -> ControlFlow<()> {
        while let Ok(c) = self.cmds.try_recv() {
            if serve(engine, c, &self.to_view) {
                self.quit = true;
                return ControlFlow::Break(());
            }
        }
        let msg = match step {
            Step::User(text) => Msg::Step {
                line,
                text: format!("user: {text}"),
            },
            Step::Tool { tool, input, .. } => Msg::Started {
                tool: tool.clone(),
                summary: cairn_replay::audit::input_summary(input),
            },
        };
        let _ = self.to_view.send(msg);
        ControlFlow::Continue(())
    }

    fn after(&mut self, o: &CallOutcome) {
        let (diffs, commands) = self.effects();
        let _ = self.to_view.send(Msg::Finished {
            call: o.call.clone(),
            tool: o.tool.clone(),
            status: o.status.as_str().to_string(),
            elapsed_us: o.elapsed_us,
            waited_us: self.waits.of(&o.call),
            output: first_line(&o.output, 80),
            diffs,
            commands,
        });
    }
}

#[allow(clippy::too_many_arguments)]
fn worker(
    home: Home,
    workspace: PathBuf,
    config: EngineConfig,
    policy: Option<cairn_engine::permission::Policy>,
    steps: Vec<(usize, Step)>,
    to_view: Sender<Msg>,
    answers: Receiver<Answer>,
    cmds: Receiver<Cmd>,
    started: Sender<Result<(String, CancelHandle), String>>,
) -> Result<(), String> {
    let (mut engine, blobs) = match crate::screen::start(&home, &workspace, config) {
        Ok(opened) => opened,
        Err(text) => {
            let _ = started.send(Err(text.clone()));
            return Err(text);
        }
    };
    match policy {
        Some(p) => engine.set_approver(Box::new(p)),
        None => engine.set_approver(Box::new(ViewApprover {
            to_view: to_view.clone(),
            answers,
            ask: Msg::Ask,
        })),
    }
    let (record_tx, records) = mpsc::channel();
    engine.set_observer(Box::new(move |r: &Record| {
        if matches!(r.event, Event::FileWrite(_) | Event::ShellExec(_)) {
            // Fails only once the script is over and `Live` gone: nobody is left to
            // show the record to.
            let _ = record_tx.send(r.clone());
        }
    }));
    let _ = started.send(Ok((engine.id().to_string(), engine.cancel_handle())));
    let mut live = Live {
        to_view,
        cmds,
        records,
        blobs,
        quit: false,
        waits: Default::default(),
    };
    script::run_with(&mut engine, &steps, &mut live).map_err(|e| cairn_cli::hint::text(&e))?;
    let Live {
        to_view,
        cmds,
        quit,
        ..
    } = live;
    if !quit {
        let _ = to_view.send(Msg::ScriptDone);
        // The session stays open for a look at background processes until `q`.
        while let Ok(c) = cmds.recv() {
            if let Err(e) = engine.poll_background() {
                let _ = to_view.send(Msg::Note(e.to_string()));
            }
            if serve(&mut engine, c, &to_view) {
                break;
            }
        }
    }
    let reason = match engine.stopped() {
        Some(s) => s.reason(),
        None if quit => "ended by the user".into(),
        None => "script finished".into(),
    };
    engine.end(&reason).map_err(|e| cairn_cli::hint::text(&e))?;
    Ok(())
}

/// Runs the script in the live view; `policy` answers permission requests instead of
/// the view (`--approve always` or `never`).
pub fn run(
    steps: Vec<(usize, Step)>,
    workspace: &Path,
    config: EngineConfig,
    policy: Option<cairn_engine::permission::Policy>,
) -> Result<ExitCode> {
    let home = crate::searchcmd::indexing_home()?;
    let (to_view, from_engine) = mpsc::channel::<Msg>();
    let (answer_tx, answers) = mpsc::channel::<Answer>();
    let (cmd_tx, cmds) = mpsc::channel::<Cmd>();
    let (started_tx, started) = mpsc::channel();
    let ws = workspace.to_path_buf();
    let handle = std::thread::spawn(move || {
        worker(
            home, ws, config, policy, steps, to_view, answers, cmds, started_tx,
        )
    });
    let (id, cancel) = match started.recv() {
        Ok(Ok(started)) => started,
        Ok(Err(e)) => anyhow::bail!("{e}"),
        Err(_) => anyhow::bail!("the session did not start"),
    };
    let mut app = ViewApp::new(&id);
    let ui = crate::screen::run(&mut app, &from_engine, &handle, &cancel, 100, |c| match c {
        Cmd::Answer(a) => {
            let _ = answer_tx.send(a);
        }
        // The engine's thread is inside the call: the handle reaches it there.
        Cmd::CancelCall => cancel.cancel(),
        other => {
            let _ = cmd_tx.send(other);
        }
    });
    drop(cmd_tx);
    drop(answer_tx);
    // The session is ended (by the engine's thread) before anything else, even when
    // the terminal failed: a signal has it stop at once, else the script goes on to
    // its end without a view.
    let joined = handle.join();
    ui?;
    match joined {
        Ok(Ok(())) => {}
        Ok(Err(e)) => anyhow::bail!("{e} (session {id})"),
        Err(_) => anyhow::bail!("the session's thread panicked (session {id})"),
    }
    out::line(&id)?;
    Ok(ExitCode::SUCCESS)
}
