//! `cairn run --script` on a terminal: the engine runs on its own thread, the live view
//! (`cairn_cli::view::ViewApp`) on this one; permission requests cross over as
//! messages and their answers come back.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use anyhow::Result;
use cairn_cli::view::{Cmd, Msg, ViewApp};
use cairn_engine::event::{Answer, Event, Phase, WriteStatus};
use cairn_engine::permission::{Approver, Request};
use cairn_engine::script::Step;
use cairn_engine::{CancelHandle, Catalog, Engine, EngineConfig, Home};
use crossterm::event::{self, KeyEventKind};

use crate::out;

/// Asks the view and waits for its answer.
struct ViewApprover {
    to_view: Sender<Msg>,
    answers: Receiver<Answer>,
}

impl Approver for ViewApprover {
    fn answer(&mut self, r: &Request) -> (Answer, bool) {
        if self.to_view.send(Msg::Ask(r.clone())).is_err() {
            return (Answer::Deny, false);
        }
        match self.answers.recv() {
            Ok(a) => (a, true),
            Err(_) => (Answer::Deny, false),
        }
    }
}

/// The diffs and command lines of the records after `from`.
fn effects(engine: &Engine, from: u64) -> (Vec<String>, Vec<String>, u64) {
    let mut diffs = Vec::new();
    let mut commands = Vec::new();
    let mut last = from;
    let Ok(reader) = cairn_store::LogReader::open(engine.dir()) else {
        return (diffs, commands, last);
    };
    let blobs = cairn_store::BlobStore::open(&engine.project().blobs_dir()).ok();
    let text = |b: &Option<cairn_store::BlobRef>| -> String {
        b.as_ref()
            .and_then(|b| blobs.as_ref()?.get(&b.hash).ok())
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    };
    let Ok(records) = reader.records_from(from + 1) else {
        return (diffs, commands, last);
    };
    for r in records.flatten() {
        last = r.seq;
        match cairn_engine::fold::parse(&r).map(|x| x.event) {
            Ok(Event::FileWrite(w)) if w.status == WriteStatus::Ok => diffs.push(
                cairn_engine::diff::unified(&w.path, &text(&w.before), &text(&w.after), 200),
            ),
            Ok(Event::ShellExec(x)) if x.phase == Phase::Started => {
                commands.push(cairn_engine::shell::shown_argv(&x.argv))
            }
            _ => {}
        }
    }
    (diffs, commands, last)
}

/// Handles the view's requests that are not answers; true on `Quit`.
fn serve(engine: &mut Engine, cmd: Cmd, to_view: &Sender<Msg>) -> bool {
    let list = |engine: &Engine| {
        engine
            .processes()
            .into_iter()
            .map(|p| {
                (
                    p.id.clone(),
                    p.status.clone(),
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

#[allow(clippy::too_many_arguments)]
fn worker(
    home: Home,
    workspace: PathBuf,
    catalog: Catalog,
    policy: Option<cairn_engine::permission::Policy>,
    steps: Vec<(usize, Step)>,
    to_view: Sender<Msg>,
    answers: Receiver<Answer>,
    cmds: Receiver<Cmd>,
    started: Sender<Result<(String, CancelHandle), String>>,
) -> Result<(), String> {
    let mut engine = match Engine::start(&home, &workspace, EngineConfig::new(catalog)) {
        Ok(e) => e,
        Err(e) => {
            let _ = started.send(Err(e.to_string()));
            return Err(e.to_string());
        }
    };
    match policy {
        Some(p) => engine.set_approver(Box::new(p)),
        None => engine.set_approver(Box::new(ViewApprover {
            to_view: to_view.clone(),
            answers,
        })),
    }
    let _ = started.send(Ok((engine.id().to_string(), engine.cancel_handle())));
    let mut seq = engine.state().last_seq.unwrap_or(0);
    let mut quit = false;
    'steps: for (line, step) in &steps {
        while let Ok(c) = cmds.try_recv() {
            if serve(&mut engine, c, &to_view) {
                quit = true;
                break 'steps;
            }
        }
        let _ = engine.poll_background();
        match step {
            Step::User(text) => {
                let _ = to_view.send(Msg::Step {
                    line: *line,
                    text: format!("user: {text}"),
                });
                engine.user_message(text).map_err(|e| e.to_string())?;
            }
            Step::Tool {
                tool,
                input,
                approve,
            } => {
                let _ = to_view.send(Msg::Started {
                    tool: tool.clone(),
                    summary: cairn_replay::audit::input_summary(input),
                });
                let answer = approve.as_deref().map(|a| match a {
                    "always" => Answer::Always,
                    "deny" => Answer::Deny,
                    _ => Answer::Once,
                });
                let o = engine
                    .call_with(tool, input.clone(), answer)
                    .map_err(|e| e.to_string())?;
                let (diffs, commands, last) = effects(&engine, seq);
                seq = last;
                let elapsed_us = call_elapsed(&engine, &o.call);
                let _ = to_view.send(Msg::Finished {
                    call: o.call.clone(),
                    tool: o.tool.clone(),
                    status: o.status.as_str().to_string(),
                    elapsed_us,
                    output: o
                        .output
                        .lines()
                        .next()
                        .unwrap_or("")
                        .chars()
                        .take(80)
                        .collect(),
                    diffs,
                    commands,
                });
            }
        }
    }
    if !quit {
        let _ = to_view.send(Msg::ScriptDone);
        // The session stays open for a look at background processes until `q`.
        while let Ok(c) = cmds.recv() {
            let _ = engine.poll_background();
            if serve(&mut engine, c, &to_view) {
                break;
            }
        }
    }
    let reason = if quit {
        "ended by the user"
    } else {
        "script finished"
    };
    engine.end(reason).map_err(|e| e.to_string())?;
    Ok(())
}

/// The elapsed time `tool_finished` recorded for a call.
fn call_elapsed(engine: &Engine, call: &str) -> u64 {
    let Ok(reader) = cairn_store::LogReader::open(engine.dir()) else {
        return 0;
    };
    let Ok(records) = reader.records() else {
        return 0;
    };
    records
        .flatten()
        .filter_map(|r| match cairn_engine::fold::parse(&r).map(|x| x.event) {
            Ok(Event::ToolFinished(f)) if f.call == call => Some(f.elapsed_us),
            _ => None,
        })
        .last()
        .unwrap_or(0)
}

/// Runs the script in the live view; `policy` answers permission requests instead of
/// the view (`--approve always` or `never`).
pub fn run(
    steps: Vec<(usize, Step)>,
    workspace: &Path,
    catalog: Catalog,
    policy: Option<cairn_engine::permission::Policy>,
) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let (to_view, from_engine) = mpsc::channel::<Msg>();
    let (answer_tx, answers) = mpsc::channel::<Answer>();
    let (cmd_tx, cmds) = mpsc::channel::<Cmd>();
    let (started_tx, started) = mpsc::channel();
    let ws = workspace.to_path_buf();
    let handle = std::thread::spawn(move || {
        worker(
            home, ws, catalog, policy, steps, to_view, answers, cmds, started_tx,
        )
    });
    let (id, cancel) = match started.recv() {
        Ok(Ok(started)) => started,
        Ok(Err(e)) => anyhow::bail!("{e}"),
        Err(_) => anyhow::bail!("the session did not start"),
    };
    let mut app = ViewApp::new(&id);
    let t0 = Instant::now();
    let mut terminal = ratatui::init();
    let ui = (|| -> Result<()> {
        loop {
            while let Ok(m) = from_engine.try_recv() {
                app.on_msg(m);
            }
            // Each call clears the handle when it starts, and the view hears of a call
            // just before: a Ctrl-C in between would be lost, so it is triggered again
            // until the call's end is seen.
            if app.cancelling() {
                cancel.cancel();
            }
            app.tick(t0.elapsed().as_millis() as u64);
            terminal.draw(|f| app.render(f))?;
            if handle.is_finished() {
                return Ok(());
            }
            if event::poll(Duration::from_millis(100))?
                && let event::Event::Key(k) = event::read()?
                && k.kind == KeyEventKind::Press
            {
                app.on_key(k);
            }
            for c in app.out.drain(..) {
                match c {
                    Cmd::Answer(a) => {
                        let _ = answer_tx.send(a);
                    }
                    // The engine's thread is inside the call: the handle reaches it there.
                    Cmd::CancelCall => cancel.cancel(),
                    other => {
                        let _ = cmd_tx.send(other);
                    }
                }
            }
        }
    })();
    ratatui::restore();
    drop(cmd_tx);
    drop(answer_tx);
    ui?;
    match handle.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => anyhow::bail!("{e} (session {id})"),
        Err(_) => anyhow::bail!("the session's thread panicked (session {id})"),
    }
    out::line(&id)?;
    Ok(ExitCode::SUCCESS)
}
