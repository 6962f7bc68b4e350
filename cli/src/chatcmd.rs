//! `cairn`, `cairn chat` and `cairn run TASK` on a terminal: the agent loop runs on its
//! own thread (one `agent::run` per user message, the session kept open between them),
//! the chat view (`cairn_cli::chat::ChatApp`) on this one. What the model streams and
//! each retry of the provider reach the view through the provider's progress callback;
//! what each call does, through the engine's observer; permission requests cross over
//! as messages and their answers come back. On exit the screen is left and the
//! transcript's summary printed, so it stays in the scrollback.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use cairn_cli::chat::{ChatApp, ChatCmd, ChatMsg};
use cairn_cli::summary::PersonWaits;
use cairn_engine::agent::{self, AgentError, InterruptHandle, Stop};
use cairn_engine::event::{Answer, Event, ShellPhase, WriteStatus};
use cairn_engine::provider::{Progress, Provider};
use cairn_engine::signal::Signal;
use cairn_engine::{CancelHandle, Engine, EngineConfig, Home, Record};
use cairn_store::BlobStore;

use crate::out;
use crate::screen::ViewApprover;
use crate::sessioncmd::{Model, TaskArgs};

/// What the view sends the engine's thread.
enum Input {
    Message(String),
    Quit,
}

/// What the view shows of a record as it is appended.
fn shown(r: &Record, blobs: &BlobStore) -> Option<ChatMsg> {
    match &r.event {
        Event::ToolStarted {
            call, tool, input, ..
        } => Some(ChatMsg::CallStarted {
            call: call.clone(),
            tool: tool.clone(),
            summary: cairn_replay::audit::input_summary(input),
        }),
        Event::ShellExec(x) if x.phase == ShellPhase::Started => {
            Some(ChatMsg::Command(cairn_engine::shell::shown_argv(&x.argv)))
        }
        Event::FileWrite(w) if w.status == WriteStatus::Ok => {
            Some(ChatMsg::Diff(crate::screen::write_shown(w, blobs)))
        }
        _ => None,
    }
}

/// How the engine's thread ended the session.
struct Ended {
    id: String,
    reason: String,
    failed: bool,
}

/// What the engine's thread needs.
struct Worker {
    home: Home,
    workspace: PathBuf,
    config: EngineConfig,
    approve: crate::sessioncmd::Approve,
    model: Model,
    task: Option<String>,
    turns_max: u32,
    to_view: Sender<ChatMsg>,
    answers: Receiver<Answer>,
    inputs: Receiver<Input>,
    quit: Arc<AtomicBool>,
    started: Sender<Result<(String, CancelHandle, InterruptHandle), String>>,
}

/// Who answers the session's permission requests, and what of the session the view
/// is shown: its records as they are written, its commands' output as it comes.
fn wire(
    engine: &mut Engine,
    approve: crate::sessioncmd::Approve,
    to_view: &Sender<ChatMsg>,
    answers: Receiver<Answer>,
    blobs: BlobStore,
    waits: Arc<Mutex<PersonWaits>>,
) {
    match approve {
        crate::sessioncmd::Approve::Ask => engine.set_approver(Box::new(ViewApprover {
            to_view: to_view.clone(),
            answers,
            ask: ChatMsg::Ask,
        })),
        other => engine.set_approver(crate::sessioncmd::approver(other, false)),
    }
    let observed = to_view.clone();
    engine.set_observer(Box::new(move |r: &Record| {
        waits.lock().unwrap_or_else(|e| e.into_inner()).apply(r);
        if let Some(m) = shown(r, &blobs) {
            // Fails only once the view is gone: nobody is left to show it to.
            let _ = observed.send(m);
        }
    }));
    let printed = to_view.clone();
    engine.set_output_observer(Arc::new(move |piece: &[u8]| {
        let _ = printed.send(ChatMsg::Output(String::from_utf8_lossy(piece).into_owned()));
    }));
}

/// Says in the view that the allow list holds grants the session does not honour.
fn note_refused_grants(engine: &Engine, to_view: &Sender<ChatMsg>) {
    let n = engine.refused_grants().len();
    if n > 0 {
        let _ = to_view.send(ChatMsg::Note(format!(
            "{n} grant{} of the allow list not honoured: no session recorded the answer behind it (cairn allow list says why)",
            if n == 1 { "" } else { "s" }
        )));
    }
}

/// The person's next message; none when they quit, the view is gone or a signal
/// stops the session. Background processes are polled while waiting.
fn next_input(
    engine: &mut Engine,
    inputs: &Receiver<Input>,
    to_view: &Sender<ChatMsg>,
) -> Option<String> {
    loop {
        match inputs.recv_timeout(Duration::from_millis(cairn_engine::signal::STOP_CHECK_MS)) {
            Ok(Input::Message(t)) => return Some(t),
            Ok(Input::Quit) | Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) if engine.stopped().is_some() => return None,
            Err(RecvTimeoutError::Timeout) => {
                if let Err(e) = engine.poll_background() {
                    let _ = to_view.send(ChatMsg::Note(e.to_string()));
                }
            }
        }
    }
}

/// Shows a model turn or a finished call in the view (with the call's wait for a
/// person apart from its run time).
fn show_step(to_view: &Sender<ChatMsg>, waits: &Mutex<PersonWaits>, step: agent::Step<'_>) {
    match step {
        agent::Step::Turn(t) => {
            let _ = to_view.send(ChatMsg::Turn {
                text: t.text.clone(),
                calls: t.tool_calls.len(),
            });
        }
        agent::Step::Call(o) => {
            let _ = to_view.send(ChatMsg::CallFinished {
                call: o.call.clone(),
                tool: o.tool.clone(),
                status: o.status.as_str().to_string(),
                elapsed_us: o.elapsed_us,
                waited_us: waits.lock().unwrap_or_else(|e| e.into_inner()).of(&o.call),
                output: o.output.clone(),
            });
        }
    }
}

/// Shows in the view why the model stopped, and that the person's turn has come.
fn show_stop(to_view: &Sender<ChatMsg>, stop: Stop, answer: String, turns_max: u32) {
    match stop {
        Stop::Answered => {
            let _ = to_view.send(ChatMsg::Idle(String::new()));
        }
        Stop::TurnLimit => {
            let _ = to_view.send(ChatMsg::Idle(format!(
                "stopped at the turn limit ({turns_max} turns): send a message to go on"
            )));
        }
        Stop::Interrupted => {
            // What the model had said is kept, as recorded.
            let _ = to_view.send(ChatMsg::Turn {
                text: answer,
                calls: 0,
            });
            let _ = to_view.send(ChatMsg::Idle(
                "interrupted: the model's turn was stopped; what it said so far is kept".into(),
            ));
        }
        Stop::Signal(_) => {}
    }
}

/// The model's text as it streams and its retries (the key scrubbed), to the view.
fn progress_to_view(
    to_view: &Sender<ChatMsg>,
    scrub: cairn_engine::provider::Secret,
) -> Arc<dyn Fn(&Progress) + Send + Sync> {
    let progress_to = to_view.clone();
    Arc::new(move |p: &Progress| {
        let _ = progress_to.send(match p {
            Progress::Text(t) => ChatMsg::Text(t.clone()),
            Progress::Retry { .. } => ChatMsg::Retry(scrub.scrub(&p.to_string())),
        });
    })
}

fn worker(w: Worker) -> Result<Ended, String> {
    let Worker {
        home,
        workspace,
        config,
        approve,
        model,
        task,
        turns_max,
        to_view,
        answers,
        inputs,
        quit,
        started,
    } = w;
    let (mut engine, blobs) = match crate::screen::start(&home, &workspace, config) {
        Ok(opened) => opened,
        Err(text) => {
            let _ = started.send(Err(text.clone()));
            return Err(text);
        }
    };
    let waits = Arc::new(Mutex::new(PersonWaits::default()));
    wire(
        &mut engine,
        approve,
        &to_view,
        answers,
        blobs,
        waits.clone(),
    );
    let Model {
        provider,
        key,
        key_var,
        built,
        ..
    } = model;
    if let Some(k) = key.expose() {
        engine.add_secret(&key_var, k);
    }
    let id = engine.id().to_string();
    let _ = to_view.send(ChatMsg::Started {
        session: id.clone(),
        model: provider.model().to_string(),
    });
    let mut provider = agent::Interruptible::new(provider, engine.cancel_handle());
    provider.set_progress(Some(progress_to_view(&to_view, key.clone())));
    let interrupt = provider.interrupt_handle();
    let _ = started.send(Ok((id.clone(), engine.cancel_handle(), interrupt.clone())));
    note_refused_grants(&engine, &to_view);
    let cfg = agent::AgentConfig {
        turns_max,
        system: None,
    };
    let by_user = "ended by the user".to_string();
    let mut next = task;
    let (reason, failed) = loop {
        let text = match next.take() {
            Some(t) => t,
            None => next_input(&mut engine, &inputs, &to_view).unwrap_or_default(),
        };
        if text.is_empty() {
            break (stop_reason(&engine, &quit, &by_user), false);
        }
        if let Some(name) = model_command(&text) {
            switch_model(&mut engine, &mut provider, name, &built, &key, &to_view)
                .map_err(|e| cairn_cli::hint::text(&e))?;
            continue;
        }
        interrupt.clear();
        let _ = to_view.send(ChatMsg::User(text.clone()));
        let result = agent::run(&mut engine, &mut provider, Some(&text), &cfg, |step| {
            show_step(&to_view, &waits, step)
        });
        match result {
            Ok(run) if matches!(run.stop, Stop::Signal(_)) => {
                break (stop_reason(&engine, &quit, &by_user), false);
            }
            Ok(run) => show_stop(&to_view, run.stop, run.answer, turns_max),
            // The session goes on: the error once, short, and the input line; the
            // next message asks again.
            Err(AgentError::Provider(e)) if engine.stopped().is_none() => {
                let _ = to_view.send(ChatMsg::Failed(key.scrub(&e.to_string())));
            }
            Err(AgentError::Provider(_)) => break (stop_reason(&engine, &quit, &by_user), false),
            Err(e) => {
                let msg = key.scrub(&e.to_string());
                let reason = format!("stopped: {msg}");
                let _ = to_view.send(ChatMsg::Ended {
                    reason: reason.clone(),
                    failed: false,
                });
                engine.end(&reason).map_err(|e| cairn_cli::hint::text(&e))?;
                return Err(format!("{msg} (session {id})"));
            }
        }
    };
    end_session(engine, &to_view, Ended { id, reason, failed })
}

/// Ends the session as `ended` says, then tells the view.
fn end_session(engine: Engine, to_view: &Sender<ChatMsg>, ended: Ended) -> Result<Ended, String> {
    let done = if ended.failed {
        engine.end_failed(&ended.reason)
    } else {
        engine.end(&ended.reason)
    };
    done.map_err(|e| cairn_cli::hint::text(&e))?;
    let _ = to_view.send(ChatMsg::Ended {
        reason: ended.reason.clone(),
        failed: ended.failed,
    });
    Ok(ended)
}

/// The model a `/model NAME` message names (empty for `/model` alone); `None` for any
/// other message (`/modelling` included).
fn model_command(text: &str) -> Option<&str> {
    let rest = text.trim().strip_prefix("/model")?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim())
}

/// `/model NAME`: the next turns ask `name` of the same provider, the switch recorded
/// (`model_switched`; each `model_turn` records the model that gave it too); `/model`
/// alone says which one answers. Fails only when the log cannot be written.
fn switch_model(
    engine: &mut Engine,
    provider: &mut agent::Interruptible,
    name: &str,
    built: &(
        cairn_engine::provider::Kind,
        cairn_engine::provider::Overrides,
    ),
    key: &cairn_engine::provider::Secret,
    to_view: &Sender<ChatMsg>,
) -> cairn_engine::Result<()> {
    if name.is_empty() {
        let _ = to_view.send(ChatMsg::Note(format!(
            "the model is {} ({}): /model NAME switches to another",
            provider.model(),
            provider.name()
        )));
        return Ok(());
    }
    let (kind, overrides) = built;
    let overrides = cairn_engine::provider::Overrides {
        model: Some(name.to_string()),
        ..overrides.clone()
    };
    match Model::build(*kind, &overrides) {
        Ok(m) => {
            let previous = provider.model().to_string();
            engine.model_switched(provider.name(), name, &previous)?;
            provider.replace(m.provider);
            provider.set_progress(Some(progress_to_view(to_view, key.clone())));
            let _ = to_view.send(ChatMsg::Model(name.to_string()));
        }
        Err(e) => {
            let _ = to_view.send(ChatMsg::Note(format!(
                "/model {name}: {}",
                key.scrub(&out::error_text(&e))
            )));
        }
    }
    Ok(())
}

/// Why the session stops: the person ended it, or a signal did.
fn stop_reason(engine: &Engine, quit: &AtomicBool, by_user: &str) -> String {
    match engine.stopped() {
        _ if quit.load(Ordering::SeqCst) => by_user.to_string(),
        Some(s) => s.reason(),
        None => by_user.to_string(),
    }
}

/// True when the chat can run: standard input and output are a terminal, and `CI` is
/// not set (a CI job's pseudo-terminal has nobody to answer).
pub fn on_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
        && std::io::stdin().is_terminal()
        && std::env::var_os("CI").is_none_or(|v| v.is_empty())
}

/// Runs the chat: `task`, when given, is the first message.
pub fn run(a: &TaskArgs, task: Option<String>) -> Result<ExitCode> {
    let home = crate::searchcmd::indexing_home()?;
    let s = crate::sessioncmd::effective(
        &home,
        crate::sessioncmd::project_for(&home, &a.workspace).as_ref(),
        &a.flags,
    )?;
    let model = Model::from_settings(&s, a.no_stream)?;
    let mut config = crate::sessioncmd::engine_config(&s)?;
    config.model = Some(model.setting.clone());
    let turns_max = s
        .turns_max
        .unwrap_or(cairn_engine::agent::TURNS_MAX_DEFAULT);
    let (to_view, from_engine) = mpsc::channel::<ChatMsg>();
    let (answer_tx, answers) = mpsc::channel::<Answer>();
    let (input_tx, inputs) = mpsc::channel::<Input>();
    let (started_tx, started) = mpsc::channel();
    let quit = Arc::new(AtomicBool::new(false));
    let w = Worker {
        home,
        workspace: a.workspace.clone(),
        config,
        approve: a.approve,
        model,
        task,
        turns_max,
        to_view,
        answers,
        inputs,
        quit: quit.clone(),
        started: started_tx,
    };
    let handle = std::thread::spawn(move || worker(w));
    let (id, cancel, interrupt) = match started.recv() {
        Ok(Ok(started)) => started,
        Ok(Err(e)) => anyhow::bail!("{e}"),
        Err(_) => anyhow::bail!("the session did not start"),
    };
    let mut app = ChatApp::new();
    let ui = crate::screen::run(&mut app, &from_engine, &handle, &cancel, 50, |c| match c {
        ChatCmd::Answer(a) => {
            let _ = answer_tx.send(a);
        }
        ChatCmd::Send(t) => {
            let _ = input_tx.send(Input::Message(t));
        }
        ChatCmd::CancelCall => cancel.cancel(),
        ChatCmd::Interrupt => interrupt.interrupt(),
        ChatCmd::Quit => {
            quit.store(true, Ordering::SeqCst);
            // Stops a running call and the loop; an idle session hears the message.
            cancel.stop(Signal::INT);
            let _ = input_tx.send(Input::Quit);
        }
    });
    drop(input_tx);
    drop(answer_tx);
    let joined = handle.join();
    while let Ok(m) = from_engine.try_recv() {
        app.on_msg(m);
    }
    out::line(app.summary().trim_start_matches('\n').trim_end())?;
    ui?;
    match joined {
        Ok(Ok(Ended {
            failed: true,
            reason,
            id,
        })) => {
            anyhow::bail!("{reason} (session {id})")
        }
        Ok(Ok(_)) => {}
        Ok(Err(e)) => anyhow::bail!("{e} (session {id})"),
        Err(_) => anyhow::bail!("the session's thread panicked (session {id})"),
    }
    out::line(&id)?;
    Ok(ExitCode::SUCCESS)
}
