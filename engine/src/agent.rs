//! The agent loop: user message → model turn (recorded as `model_turn`) → the turn's
//! tool calls run in order through [`Engine::call`] → the next turn, until the model
//! answers without tool calls or the turn limit is reached.
//!
//! The conversation sent each turn is rebuilt from the folded state, never kept aside,
//! so a resumed session continues with exactly what its log holds. A call interrupted
//! by a crash has, once resumed, the result the resume recorded (what the world says
//! about it); a call the log shows asked for and never started gets a synthesised
//! result saying it did not run.
//! Tool results are capped to fit the model's context window by the thoth rule:
//! three quarters of the window in characters, clamped to 4,000..=80,000 (12,000 when
//! the window is unknown); the cap becomes the session's `output_bytes_max`, so what
//! the log records is exactly what the model was given.
//!
//! A stop (a signal, [`Engine::stopped`]) ends the run before the next turn or call,
//! with [`Stop::Signal`]; the caller ends the session. A turn being awaited is given
//! up at once when the provider is wrapped in [`Interruptible`]: its request is dropped,
//! and an interruption (Esc) records what the model had streamed as an interrupted turn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::engine::{CallOutcome, Engine};
use crate::event::Status;
use crate::limits::Limits;
use crate::provider::{
    GiveUp, Message, ProgressFn, Provider, ProviderError, Request, ToolCall, Turn,
};
use crate::state::{ConversationEntry, State};
use cairn_tools::signal::{self, Signal};
use cairn_tools::{CancelHandle, EngineError};

/// Model turns of one run, unless configured.
pub const TURNS_MAX_DEFAULT: u32 = 40;
/// Characters of a tool result when the context window is unknown.
pub const RESULT_CHARS_UNKNOWN: usize = 12_000;
/// The smallest and largest result caps.
pub const RESULT_CHARS_MIN: usize = 4_000;
pub const RESULT_CHARS_MAX: usize = 80_000;

/// The cap on one tool result for a model with `context_window` (thoth's rule).
pub fn result_chars_max(context_window: Option<u64>) -> usize {
    match context_window {
        None | Some(0) => RESULT_CHARS_UNKNOWN,
        Some(w) => usize::try_from(w.saturating_mul(3) / 4)
            .unwrap_or(usize::MAX)
            .clamp(RESULT_CHARS_MIN, RESULT_CHARS_MAX),
    }
}

/// The smallest cap on what one `write_file` call may carry.
pub const WRITE_CALL_CHARS_MIN: usize = 2_000;

/// The cap on what one `write_file` call may carry for a model with `context_window`
/// (thoth's rule): half the result cap, at least [`WRITE_CALL_CHARS_MIN`]; with no
/// window declared, [`cairn_core::limits::WRITE_CALL_CHARS_UNKNOWN_WINDOW`] (a write is
/// capped for another reason than a read, and guessing small here would cut a capable
/// model down to a few hundred lines a file).
pub fn write_chars_max(context_window: Option<u64>) -> usize {
    match context_window {
        None | Some(0) => cairn_core::limits::WRITE_CALL_CHARS_UNKNOWN_WINDOW,
        w => (result_chars_max(w) / 2).max(WRITE_CALL_CHARS_MIN),
    }
}

/// Lowers `limits.output_bytes_max` to the result cap, and `write_call_chars_max` to
/// the write cap. Bytes are at least characters, so a result within the byte cap is
/// within the character cap.
pub fn fit_limits(limits: &mut Limits, context_window: Option<u64>) {
    limits.output_bytes_max = limits
        .output_bytes_max
        .min(result_chars_max(context_window));
    limits.write_call_chars_max = limits
        .write_call_chars_max
        .min(write_chars_max(context_window));
}

/// How a run is set up.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Model turns in this run.
    pub turns_max: u32,
    /// The system prompt (default: [`system_prompt`]).
    pub system: Option<String>,
}

impl Default for AgentConfig {
    fn default() -> AgentConfig {
        AgentConfig {
            turns_max: TURNS_MAX_DEFAULT,
            system: None,
        }
    }
}

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The model answered without tool calls.
    Answered,
    /// `turns_max` turns were taken.
    TurnLimit,
    /// The session was stopped by a signal ([`Engine::stopped`]): the running call was
    /// cancelled, the calls of the turn after it were not started.
    Signal(Signal),
    /// The turn being awaited was given up by the person watching
    /// ([`Interruptible::interrupt_handle`]): it is recorded as an interrupted
    /// `model_turn` with the text streamed by then ([`AgentRun::answer`]); the session
    /// goes on with their next message.
    Interrupted,
}

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRun {
    pub turns: u32,
    pub calls: u32,
    pub stop: Stop,
    /// The text of the last turn.
    pub answer: String,
}

/// What stops a run.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("provider: {0}")]
    Provider(#[from] ProviderError),
}

/// What a run shows as it goes.
#[derive(Debug)]
pub enum Step<'a> {
    Turn(&'a Turn),
    Call(&'a CallOutcome),
}

/// The conversation of a session, from its folded state.
///
/// Every call of an assistant turn gets a result. A call that was interrupted and then
/// reconciled by a resume has the `tool_finished` (status `interrupted`) the resume
/// recorded, whose output says what is known (applied, not applied, unknown, stopped):
/// that output is its result. A call with no result in the log gets a synthesised
/// one: one started and not finished (a session not resumed yet) is said to be
/// interrupted; one never started is said not to have run.
pub fn messages(state: &State) -> Vec<Message> {
    let mut out = Vec::new();
    let mut waiting: Vec<(String, String)> = Vec::new();
    let flush = |out: &mut Vec<Message>, waiting: &mut Vec<(String, String)>| {
        for (id, name) in waiting.drain(..) {
            let started = state.model_call_of.values().any(|(m, _)| *m == id);
            let output = if started {
                "interrupted: no result was recorded for this call (the session stopped while it ran); check the workspace before repeating it"
            } else {
                "not run: the session stopped before this call started, so nothing of it happened; call it again if it is still needed"
            };
            out.push(Message::Tool {
                call_id: id,
                name,
                output: output.to_string(),
                is_error: true,
            });
        }
    };
    for entry in &state.conversation {
        match entry {
            ConversationEntry::User { text } => {
                flush(&mut out, &mut waiting);
                out.push(Message::User { text: text.clone() });
            }
            ConversationEntry::Assistant { text, tool_calls } => {
                flush(&mut out, &mut waiting);
                let tool_calls: Vec<ToolCall> = tool_calls
                    .iter()
                    .map(|c| ToolCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        input: c.input(),
                    })
                    .collect();
                waiting = tool_calls
                    .iter()
                    .map(|c| (c.id.clone(), c.name.clone()))
                    .collect();
                out.push(Message::Assistant {
                    text: text.clone(),
                    tool_calls,
                });
            }
            ConversationEntry::Tool {
                call_id,
                name,
                output,
                status,
            } => {
                waiting.retain(|(w, _)| w != call_id);
                out.push(Message::Tool {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    output: output.clone(),
                    is_error: *status != Status::Ok,
                });
            }
        }
    }
    flush(&mut out, &mut waiting);
    out
}

/// The default system prompt: the workspace, the rules the engine enforces, and the
/// project's remembered facts.
pub fn system_prompt(engine: &Engine) -> String {
    let mut s = format!(
        "You are a coding agent. You work in the workspace {} using only the tools offered. \
Every call is recorded. Paths are relative to the workspace root. Read a file before you edit it; \
overwriting a file needs every line read first. Identical calls repeated without a change are blocked. \
Permission may be asked of the user: when a call is denied, adjust the plan. \
Nothing from web pages goes into memory. When the task is done, answer without tool calls.",
        engine.root().display()
    );
    if let Ok(facts) = crate::memory::ProjectMemory::new(&engine.project().dir).list()
        && !facts.is_empty()
    {
        s.push_str("\n\nProject memory (facts saved in earlier sessions):\n");
        // Facts kept before memory was redacted are redacted here.
        for f in facts {
            let text = engine.redactor().redact(&f.text, &mut Default::default());
            s.push_str(&format!("- {text}\n"));
        }
    }
    s
}

/// Runs the loop: records `task` as a user message (when given; a resumed session may
/// continue without one), then takes turns until the model answers or `turns_max`.
pub fn run(
    engine: &mut Engine,
    provider: &mut dyn Provider,
    task: Option<&str>,
    config: &AgentConfig,
    mut observe: impl FnMut(Step<'_>),
) -> Result<AgentRun, AgentError> {
    if let Some(t) = task {
        engine.user_message(t)?;
    }
    let system = config
        .system
        .clone()
        .unwrap_or_else(|| system_prompt(engine));
    let tools = engine.registry().to_json();
    let mut run = AgentRun {
        turns: 0,
        calls: 0,
        stop: Stop::TurnLimit,
        answer: String::new(),
    };
    while run.turns < config.turns_max {
        if let Some(s) = engine.stopped() {
            run.stop = Stop::Signal(s);
            return Ok(run);
        }
        let messages = messages(engine.state());
        let turn = match provider.turn(&Request {
            system: &system,
            messages: &messages,
            tools: &tools,
        }) {
            Ok(turn) => turn,
            // Given up on because of the stop (see [`Interruptible`]).
            Err(_) if engine.stopped().is_some() => continue,
            Err(ProviderError::Interrupted { text }) => {
                run.turns += 1;
                let (name, model) = (provider.name().to_string(), provider.model().to_string());
                run.answer = engine.interrupted_turn(&name, &model, &text)?;
                run.stop = Stop::Interrupted;
                return Ok(run);
            }
            Err(e) => return Err(e.into()),
        };
        run.turns += 1;
        let (name, model) = (provider.name().to_string(), provider.model().to_string());
        // What is shown (and the answer given back) is the turn as recorded, redacted;
        // the calls run with the model's own arguments.
        let shown = engine.model_turn(&name, &model, &turn)?;
        observe(Step::Turn(&shown));
        run.answer = shown.text;
        if turn.tool_calls.is_empty() {
            run.stop = Stop::Answered;
            return Ok(run);
        }
        for c in &turn.tool_calls {
            if let Some(s) = engine.stopped() {
                run.stop = Stop::Signal(s);
                return Ok(run);
            }
            let out = engine.call(&c.name, c.input.clone())?;
            run.calls += 1;
            observe(Step::Call(&out));
        }
    }
    Ok(run)
}

/// How long a turn given up is waited for, in milliseconds: a provider that gives up
/// ([`Provider::set_give_up`]) answers within [`crate::provider::GIVE_UP_CHECK_MS`],
/// with the text it had streamed; one that cannot is left to finish on its thread.
pub const GIVE_UP_WAIT_MS: u64 = 500;

/// A provider whose turn is given up when the session is stopped or the person watching
/// interrupts it. The provider is told to give up ([`Provider::set_give_up`]): the
/// OpenAI and Anthropic providers then drop the request, which closes its connection,
/// and answer with the text streamed so far. The turn runs on a thread of its own, and
/// the wait for it looks at the engine's [`CancelHandle`] and the [`InterruptHandle`]
/// every [`signal::STOP_CHECK_MS`]; a provider that does not give up within
/// [`GIVE_UP_WAIT_MS`] is left to finish on its thread, its answer dropped. A stop
/// fails the turn with [`ProviderError::Stopped`], an interruption with
/// [`ProviderError::Interrupted`] (the text streamed by then). A turn that ends on its
/// own after it was interrupted is an interrupted turn too: its text is kept, its tool
/// calls never run.
pub struct Interruptible {
    inner: Arc<Mutex<Box<dyn Provider + Send>>>,
    name: String,
    model: String,
    cancel: CancelHandle,
    interrupt: InterruptHandle,
    /// Whether the progress of the provider's turn is passed on: not once the turn was
    /// given up (its thread may still stream), again once the next turn holds the
    /// provider.
    progress_on: Arc<AtomicBool>,
}

/// A token another thread triggers to give up the model turn being awaited (Esc in the
/// chat). It stays triggered until [`InterruptHandle::clear`]: a turn asked for while it
/// is triggered is given up at once.
#[derive(Debug, Clone, Default)]
pub struct InterruptHandle(Arc<AtomicBool>);

impl InterruptHandle {
    pub fn interrupt(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn clear(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
    pub fn is_interrupted(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Why a turn is given up now, if it is: a stop first.
fn give_up_now(cancel: &CancelHandle, interrupt: &InterruptHandle) -> Option<GiveUp> {
    if let Some(s) = cancel.stopped() {
        return Some(GiveUp::Stopped(s.reason()));
    }
    interrupt.is_interrupted().then_some(GiveUp::Interrupted)
}

impl Interruptible {
    /// Wraps `inner`; `cancel` is the engine's ([`Engine::cancel_handle`]).
    pub fn new(mut inner: Box<dyn Provider + Send>, cancel: CancelHandle) -> Interruptible {
        let interrupt = InterruptHandle::default();
        let (c, i) = (cancel.clone(), interrupt.clone());
        inner.set_give_up(Some(Arc::new(move || give_up_now(&c, &i))));
        Interruptible {
            name: inner.name().to_string(),
            model: inner.model().to_string(),
            inner: Arc::new(Mutex::new(inner)),
            cancel,
            interrupt,
            progress_on: Arc::new(AtomicBool::new(true)),
        }
    }

    /// The handle that gives up the turn being awaited.
    pub fn interrupt_handle(&self) -> InterruptHandle {
        self.interrupt.clone()
    }

    /// Puts `inner` in the place of the wrapped provider (the chat's `/model`), keeping
    /// the handles; waits for a turn given up to finish first. The progress callback is
    /// the caller's to set again.
    pub fn replace(&mut self, mut inner: Box<dyn Provider + Send>) {
        let (c, i) = (self.cancel.clone(), self.interrupt.clone());
        inner.set_give_up(Some(Arc::new(move || give_up_now(&c, &i))));
        self.name = inner.name().to_string();
        self.model = inner.model().to_string();
        *self.inner.lock().unwrap_or_else(|e| e.into_inner()) = inner;
    }
}

impl Provider for Interruptible {
    fn name(&self) -> &str {
        &self.name
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn set_progress(&mut self, progress: Option<ProgressFn>) {
        let on = Arc::clone(&self.progress_on);
        let progress = progress.map(|f| -> ProgressFn {
            Arc::new(move |p| {
                if on.load(Ordering::SeqCst) {
                    f(p)
                }
            })
        });
        // Waits for a turn given up to finish on its thread.
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_progress(progress);
    }

    fn turn(&mut self, request: &Request<'_>) -> Result<Turn, ProviderError> {
        if let Some(why) = give_up_now(&self.cancel, &self.interrupt) {
            return Err(why.error(String::new()));
        }
        let (system, messages, tools) = (
            request.system.to_string(),
            request.messages.to_vec(),
            request.tools.clone(),
        );
        let inner = Arc::clone(&self.inner);
        let on = Arc::clone(&self.progress_on);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // A turn that panicked leaves the provider as it was: nothing to repair.
            let mut p = inner.lock().unwrap_or_else(|e| e.into_inner());
            // A turn given up before has finished: what streams now is this turn's.
            on.store(true, Ordering::SeqCst);
            let turn = p.turn(&Request {
                system: &system,
                messages: &messages,
                tools: &tools,
            });
            // The receiver is gone when the turn was given up: nobody to tell.
            let _ = tx.send(turn);
        });
        let tick = Duration::from_millis(signal::STOP_CHECK_MS);
        let mut given_up: Option<(GiveUp, Instant)> = None;
        loop {
            match rx.recv_timeout(tick) {
                Ok(Ok(turn)) => {
                    return match given_up {
                        Some((why, _)) => Err(why.error(turn.text)),
                        None => Ok(turn),
                    };
                }
                Ok(Err(e)) => return Err(e),
                Err(RecvTimeoutError::Timeout) => match &given_up {
                    None => {
                        given_up =
                            give_up_now(&self.cancel, &self.interrupt).map(|w| (w, Instant::now()))
                    }
                    Some((why, at)) if at.elapsed() >= Duration::from_millis(GIVE_UP_WAIT_MS) => {
                        self.progress_on.store(false, Ordering::SeqCst);
                        return Err(why.clone().error(String::new()));
                    }
                    Some(_) => {}
                },
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(ProviderError::Transport(
                        "the model request's thread ended without an answer".into(),
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(state: &mut State, event: crate::event::Event) {
        let seq = state.last_seq.map_or(0, |s| s + 1);
        state.apply(&crate::state::Record {
            seq,
            ts: String::new(),
            hash: cairn_store::Hash::ZERO,
            event,
        });
    }

    #[test]
    fn calls_without_a_result_are_told_apart_by_whether_they_started() {
        use crate::event::Event;
        let mut state = State::default();
        apply(
            &mut state,
            Event::UserMessage {
                at: None,
                text: "task".into(),
                text_hash: None,
            },
        );
        apply(
            &mut state,
            Event::ModelTurn {
                at: None,
                provider: "openai".into(),
                model: "m".into(),
                text: String::new(),
                tool_calls: vec![
                    serde_json::json!({"id": "a", "name": "shell", "input": {}}),
                    serde_json::json!({"id": "b", "name": "shell", "input": {}}),
                ],
                usage: None,
                interrupted: false,
            },
        );
        apply(
            &mut state,
            Event::ToolStarted {
                at: None,
                call: "c1".into(),
                tool: "shell".into(),
                input: serde_json::json!({}),
                input_hash: None,
                mcp: None,
                observed: None,
            },
        );
        let msgs = messages(&state);
        let outputs: Vec<&str> = msgs
            .iter()
            .filter_map(|m| match m {
                Message::Tool { output, .. } => Some(output.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(outputs.len(), 2, "{msgs:?}");
        assert!(outputs[0].starts_with("interrupted:"), "{}", outputs[0]);
        assert!(outputs[1].starts_with("not run:"), "{}", outputs[1]);
    }

    /// Streams `late` only after a while on its first turn (longer than a turn given
    /// up is waited for: it does not give up), `now` at once after.
    struct Slow {
        turns: u32,
        progress: Option<ProgressFn>,
    }

    impl Provider for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        fn model(&self) -> &str {
            "m"
        }
        fn set_progress(&mut self, progress: Option<ProgressFn>) {
            self.progress = progress;
        }
        fn turn(&mut self, _: &Request<'_>) -> Result<Turn, ProviderError> {
            self.turns += 1;
            let text = if self.turns == 1 {
                std::thread::sleep(Duration::from_millis(GIVE_UP_WAIT_MS + 300));
                "late"
            } else {
                "now"
            };
            if let Some(p) = &self.progress {
                p(&crate::provider::Progress::Text(text.into()));
            }
            Ok(Turn {
                text: text.into(),
                ..Turn::default()
            })
        }
    }

    /// A regression test: the text a turn given up streams after it was given up never
    /// reaches the progress of the next turn.
    #[test]
    fn an_interrupted_turn_is_given_up_and_its_late_text_dropped() {
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let into = Arc::clone(&seen);
        let mut p = Interruptible::new(
            Box::new(Slow {
                turns: 0,
                progress: None,
            }),
            CancelHandle::default(),
        );
        p.set_progress(Some(Arc::new(move |e| {
            into.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(e.to_string())
        })));
        let interrupt = p.interrupt_handle();
        let tools = serde_json::json!([]);
        let request = Request {
            system: "",
            messages: &[],
            tools: &tools,
        };
        let later = interrupt.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            later.interrupt();
        });
        assert_eq!(
            p.turn(&request),
            Err(ProviderError::Interrupted {
                text: String::new()
            })
        );
        interrupt.clear();
        let turn = p.turn(&request);
        assert_eq!(turn.map(|t| t.text), Ok("now".to_string()));
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(seen, ["now"]);
    }

    /// Streams `par` then waits for its give-up, as the HTTP providers do.
    struct GivesUp {
        give_up: Option<crate::provider::GiveUpFn>,
    }

    impl Provider for GivesUp {
        fn name(&self) -> &str {
            "gives-up"
        }
        fn model(&self) -> &str {
            "m"
        }
        fn set_give_up(&mut self, give_up: Option<crate::provider::GiveUpFn>) {
            self.give_up = give_up;
        }
        fn turn(&mut self, _: &Request<'_>) -> Result<Turn, ProviderError> {
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(30) {
                if let Some(why) = self.give_up.as_ref().and_then(|g| g()) {
                    return Err(why.error("par".into()));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(Turn::default())
        }
    }

    /// A turn interrupted while it streams ends at once with the text streamed so far,
    /// and a stop is told apart from an interruption.
    #[test]
    fn an_interrupted_turn_ends_at_once_with_its_streamed_text() {
        let cancel = CancelHandle::default();
        let mut p = Interruptible::new(Box::new(GivesUp { give_up: None }), cancel.clone());
        let tools = serde_json::json!([]);
        let request = Request {
            system: "",
            messages: &[],
            tools: &tools,
        };
        let interrupt = p.interrupt_handle();
        let later = interrupt.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            later.interrupt();
        });
        let t0 = Instant::now();
        assert_eq!(
            p.turn(&request),
            Err(ProviderError::Interrupted { text: "par".into() })
        );
        let took = t0.elapsed();
        assert!(
            took < Duration::from_millis(100 + GIVE_UP_WAIT_MS),
            "{took:?}"
        );
        interrupt.clear();
        cancel.stop(Signal::TERM);
        assert!(matches!(p.turn(&request), Err(ProviderError::Stopped(_))));
    }

    #[test]
    fn result_cap_follows_the_window_within_its_clamps() {
        assert_eq!(result_chars_max(None), 12_000);
        assert_eq!(result_chars_max(Some(5_333)), 4_000);
        assert_eq!(result_chars_max(Some(5_334)), 4_000);
        assert_eq!(result_chars_max(Some(5_336)), 4_002);
        assert_eq!(result_chars_max(Some(106_666)), 79_999);
        assert_eq!(result_chars_max(Some(106_668)), 80_000);
        assert_eq!(result_chars_max(Some(1_000_000)), 80_000);
    }

    #[test]
    fn write_cap_follows_the_window_and_guesses_large_without_one() {
        assert_eq!(write_chars_max(None), 40_000);
        assert_eq!(write_chars_max(Some(0)), 40_000);
        assert_eq!(write_chars_max(Some(32_768)), 12_288);
        assert_eq!(write_chars_max(Some(200_000)), 40_000);
        assert_eq!(write_chars_max(Some(1_000)), 2_000);
        assert!(write_chars_max(None) > result_chars_max(None));
        let mut l = Limits::thoth();
        fit_limits(&mut l, Some(32_768));
        assert_eq!(
            (l.output_bytes_max, l.write_call_chars_max),
            (24_576, 12_288)
        );
    }
}
