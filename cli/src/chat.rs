//! The interactive agent session on a terminal (`cairn`, `cairn chat`, and `cairn run
//! TASK` on a terminal): the model's text as it streams, each tool call as it runs with
//! its command lines, diffs and the tail of its output, the provider's retries as they
//! happen, the permission overlay (y once, a always, n deny), and an input line for the
//! next message once the model has answered. Ctrl-C cancels the running call (a second
//! ends the session); Esc gives up the model turn being awaited.
//!
//! [`ChatApp`] is a pure state machine: the runner (`src/chatcmd.rs`) feeds it
//! [`ChatMsg`]s from the engine's thread and keys from the terminal, and carries out the
//! [`ChatCmd`]s it leaves in [`ChatApp::out`]; [`ChatApp::render`] draws it and
//! [`ChatApp::summary`] is what stays in the scrollback once the screen is left.

use cairn_engine::event::Answer;
use cairn_engine::permission::Request;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use crate::browse::status_style;
use crate::summary::{elapsed, first_line, run_time};

/// Lines of the end of a command's output shown under its call.
pub const OUTPUT_TAIL_LINES_MAX: usize = 5;
/// Lines of the start of a command's output shown under its call (how it ended, the
/// first stream's header), the cut between them and the tail named.
pub const OUTPUT_HEAD_LINES_MAX: usize = 2;
/// Characters of one line of a command's output shown.
pub const OUTPUT_LINE_CHARS_MAX: usize = 200;
/// Bytes of a running command's output kept to show its tail.
pub const LIVE_OUTPUT_BYTES_MAX: usize = 16 * 1024;
/// Characters the input line holds.
pub const INPUT_CHARS_MAX: usize = 16_000;

/// What the engine's thread reports.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatMsg {
    /// The session runs: its id and the model.
    Started { session: String, model: String },
    /// A user message was recorded and the model is being asked.
    User(String),
    /// A piece of the model's text, as streamed.
    Text(String),
    /// The provider failed an attempt and tries again (`retry 1 of 4 in 0.5 s: …`).
    Retry(String),
    /// The turn as recorded (redacted): it replaces the streamed text.
    Turn { text: String, calls: usize },
    /// A call started (its input in one line).
    CallStarted {
        call: String,
        tool: String,
        summary: String,
    },
    /// A command line the running call runs.
    Command(String),
    /// The diff of a file the running call wrote.
    Diff(String),
    /// What the running command printed since the last piece (redacted).
    Output(String),
    /// A call ended.
    CallFinished {
        call: String,
        tool: String,
        status: String,
        /// The call's time as recorded, the wait below included.
        elapsed_us: u64,
        /// The part of it spent waiting for a person's permission answers (shown apart).
        waited_us: u64,
        output: String,
    },
    /// A permission request waiting for an answer.
    Ask(Request),
    /// The model is done with the message (answered, interrupted, at the turn limit):
    /// the session waits for the next one.
    Idle(String),
    /// The session ended (`reason`); `failed` when the provider failed.
    Ended { reason: String, failed: bool },
    /// A note for the transcript (the sandbox is not enforced…).
    Note(String),
    /// The provider failed the message after its retries: the session waits for the
    /// next message, which asks again.
    Failed(String),
    /// `/model NAME` switched the model that answers the next messages.
    Model(String),
}

/// Characters of a provider's error shown in the transcript (its first line).
pub const PROVIDER_ERROR_CHARS_MAX: usize = 160;

/// What the view asks the runner to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatCmd {
    Answer(Answer),
    /// The next user message.
    Send(String),
    /// Cancel the running call.
    CancelCall,
    /// Give up the model turn being awaited.
    Interrupt,
    /// End the session.
    Quit,
}

#[derive(Debug, Clone, PartialEq)]
enum Entry {
    User(String),
    Model(String),
    Call {
        call: String,
        tool: String,
        status: String,
        elapsed_us: u64,
        waited_us: u64,
        summary: String,
        commands: Vec<String>,
        diffs: Vec<String>,
        /// The output's first line, or the tail of a command's output.
        output: Vec<String>,
    },
    Note(String),
    Error(String),
}

/// What the session is doing.
#[derive(Debug, Clone, PartialEq)]
enum Busy {
    /// Waiting for the person's next message.
    Idle,
    /// Waiting for the model since `since_ms`.
    Model { since_ms: u64 },
    /// A call runs.
    Call {
        call: String,
        tool: String,
        summary: String,
        since_ms: u64,
        commands: Vec<String>,
        diffs: Vec<String>,
        /// The end of what its command printed so far.
        live: String,
    },
    /// The session is over.
    Ended,
}

/// The chat's state.
pub struct ChatApp {
    session: String,
    model: String,
    entries: Vec<Entry>,
    /// The model's text streamed so far in this turn.
    streaming: String,
    busy: Busy,
    now_ms: u64,
    ask: Option<Request>,
    input: String,
    note: Option<String>,
    /// Lines scrolled up from the bottom.
    scroll: usize,
    cancelling: bool,
    interrupting: bool,
    quitting: bool,
    ended: Option<(String, bool)>,
    /// Commands for the runner.
    pub out: Vec<ChatCmd>,
}

impl Default for ChatApp {
    fn default() -> ChatApp {
        ChatApp::new()
    }
}

impl ChatApp {
    pub fn new() -> ChatApp {
        ChatApp {
            session: String::new(),
            model: String::new(),
            entries: Vec::new(),
            streaming: String::new(),
            busy: Busy::Idle,
            now_ms: 0,
            ask: None,
            input: String::new(),
            note: None,
            scroll: 0,
            cancelling: false,
            interrupting: false,
            quitting: false,
            ended: None,
            out: Vec::new(),
        }
    }

    /// The clock, in milliseconds since the view started.
    pub fn tick(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
    }

    /// True while a permission request waits.
    pub fn asking(&self) -> bool {
        self.ask.is_some()
    }

    /// True from the Ctrl-C that cancels the running call until that call ends.
    pub fn cancelling(&self) -> bool {
        self.cancelling
    }

    /// True once the session ended.
    pub fn ended(&self) -> bool {
        self.ended.is_some()
    }

    fn flush_stream(&mut self) {
        let text = std::mem::take(&mut self.streaming);
        if !text.trim().is_empty() {
            self.entries.push(Entry::Model(text));
        }
    }

    /// A call ended: its entry in the transcript, with what was shown while it ran.
    fn finish_call(
        &mut self,
        call: String,
        tool: String,
        status: String,
        (elapsed_us, waited_us): (u64, u64),
        output: String,
    ) {
        let (summary, commands, diffs) = match std::mem::replace(
            &mut self.busy,
            Busy::Model {
                since_ms: self.now_ms,
            },
        ) {
            Busy::Call {
                summary,
                commands,
                diffs,
                ..
            } => (summary, commands, diffs),
            _ => (String::new(), Vec::new(), Vec::new()),
        };
        if std::mem::take(&mut self.cancelling) && !self.quitting {
            self.note = None;
        }
        let output = if commands.is_empty() {
            vec![first_line(&output, OUTPUT_LINE_CHARS_MAX)]
        } else {
            head_and_tail(&output, OUTPUT_HEAD_LINES_MAX, OUTPUT_TAIL_LINES_MAX)
        };
        self.entries.push(Entry::Call {
            call,
            tool,
            status,
            elapsed_us,
            waited_us,
            summary,
            commands,
            diffs,
            output,
        });
    }

    /// The provider failed past its retries: the error once, short, and the session
    /// stays for the next message.
    fn provider_failed(&mut self, e: &str) {
        self.flush_stream();
        self.busy = Busy::Idle;
        self.interrupting = false;
        self.cancelling = false;
        self.note = None;
        self.entries.push(Entry::Error(format!(
            "provider failed: {}",
            short(e, PROVIDER_ERROR_CHARS_MAX)
        )));
        self.entries.push(Entry::Note(
            "send a message to try again, or /model NAME to switch the model".into(),
        ));
    }

    /// A running command's output, its last `LIVE_OUTPUT_BYTES_MAX` bytes kept.
    fn live_output(&mut self, piece: &str) {
        if let Busy::Call { live, .. } = &mut self.busy {
            live.push_str(piece);
            if live.len() > LIVE_OUTPUT_BYTES_MAX {
                let mut cut = live.len() - LIVE_OUTPUT_BYTES_MAX;
                while !live.is_char_boundary(cut) {
                    cut += 1;
                }
                live.drain(..cut);
            }
        }
    }

    /// The model is done (or was stopped): back to the input line, `why` noted.
    fn idle(&mut self, why: String) {
        self.flush_stream();
        self.busy = Busy::Idle;
        if self.interrupting || self.cancelling {
            // Done: the status bar no longer says it is being done.
            self.note = None;
        }
        self.interrupting = false;
        self.cancelling = false;
        if !why.is_empty() {
            self.entries.push(Entry::Note(why));
        }
    }

    pub fn on_msg(&mut self, m: ChatMsg) {
        match m {
            ChatMsg::Started { session, model } => {
                self.session = session;
                self.model = model;
            }
            ChatMsg::User(text) => {
                self.entries.push(Entry::User(text));
                self.busy = Busy::Model {
                    since_ms: self.now_ms,
                };
                self.interrupting = false;
            }
            ChatMsg::Text(t) => {
                // A turn given up may still stream into its thread: only the awaited
                // turn's text is shown.
                if matches!(self.busy, Busy::Model { .. }) {
                    self.streaming.push_str(&t);
                }
            }
            // A retry is news while it lasts: the status line, not the transcript.
            ChatMsg::Retry(r) => {
                self.note = Some(format!("provider: {}", short(&r, PROVIDER_ERROR_CHARS_MAX)))
            }
            ChatMsg::Failed(e) => self.provider_failed(&e),
            ChatMsg::Model(name) => {
                self.entries.push(Entry::Note(format!(
                    "the model is now {name} (was {})",
                    self.model
                )));
                self.model = name;
            }
            ChatMsg::Turn { text, calls } => {
                self.streaming = text;
                self.flush_stream();
                self.busy = if calls > 0 {
                    Busy::Model {
                        since_ms: self.now_ms,
                    }
                } else {
                    Busy::Idle
                };
            }
            ChatMsg::CallStarted {
                call,
                tool,
                summary,
            } => {
                self.busy = Busy::Call {
                    call,
                    tool,
                    summary,
                    since_ms: self.now_ms,
                    commands: Vec::new(),
                    diffs: Vec::new(),
                    live: String::new(),
                }
            }
            ChatMsg::Output(piece) => self.live_output(&piece),
            ChatMsg::Command(c) => {
                if let Busy::Call { commands, .. } = &mut self.busy {
                    commands.push(c);
                }
            }
            ChatMsg::Diff(d) => {
                if let Busy::Call { diffs, .. } = &mut self.busy {
                    diffs.push(d);
                }
            }
            ChatMsg::CallFinished {
                call,
                tool,
                status,
                elapsed_us,
                waited_us,
                output,
            } => self.finish_call(call, tool, status, (elapsed_us, waited_us), output),
            ChatMsg::Ask(r) => self.ask = Some(r),
            ChatMsg::Note(n) => self.entries.push(Entry::Note(n)),
            ChatMsg::Idle(why) => self.idle(why),
            ChatMsg::Ended { reason, failed } => {
                self.flush_stream();
                self.busy = Busy::Ended;
                self.ask = None;
                if failed {
                    self.entries.push(Entry::Error(reason.clone()));
                }
                self.ended = Some((reason, failed));
            }
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let ctrl_c = ctrl && key.code == KeyCode::Char('c');
        if let Some(r) = &self.ask {
            let answer = match key.code {
                _ if ctrl_c => Some(Answer::Deny),
                KeyCode::Char('y') | KeyCode::Char('Y') => Some(Answer::Once),
                KeyCode::Char('a') | KeyCode::Char('A') if r.always_offered() => {
                    Some(Answer::Always)
                }
                KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => Some(Answer::Deny),
                _ => None,
            };
            if let Some(a) = answer {
                self.note = Some(format!(
                    "{} {}: {}",
                    r.call,
                    r.key,
                    match a {
                        Answer::Once => "allowed once",
                        Answer::Always => "allowed always",
                        Answer::Deny => "denied",
                    }
                ));
                self.ask = None;
                self.out.push(ChatCmd::Answer(a));
                if ctrl_c {
                    self.quit();
                }
            }
            return;
        }
        if ctrl_c {
            match &self.busy {
                Busy::Call { .. } if !self.cancelling && !self.quitting => {
                    self.cancelling = true;
                    self.note =
                        Some("cancelling the running call… (Ctrl-C again ends the session)".into());
                    self.out.push(ChatCmd::CancelCall);
                }
                Busy::Model { .. } if !self.interrupting && !self.quitting => self.interrupt(),
                _ => self.quit(),
            }
            return;
        }
        if ctrl && key.code == KeyCode::Char('d') && self.input.is_empty() {
            self.quit();
            return;
        }
        match key.code {
            KeyCode::Esc => {
                if matches!(self.busy, Busy::Model { .. } | Busy::Call { .. }) {
                    self.interrupt();
                }
            }
            KeyCode::Enter => {
                let text = self.input.trim().to_string();
                if text.is_empty() {
                    return;
                }
                match self.busy {
                    Busy::Idle => {
                        self.input.clear();
                        self.scroll = 0;
                        self.note = None;
                        self.out.push(ChatCmd::Send(text));
                    }
                    Busy::Ended => {}
                    _ => {
                        self.note = Some(
                            "the model is working: wait for its answer, or Esc to interrupt".into(),
                        )
                    }
                }
            }
            KeyCode::Backspace => {
                self.input.pop();
            }
            KeyCode::Char(c) if !ctrl && self.input.chars().count() < INPUT_CHARS_MAX => {
                self.input.push(c)
            }
            KeyCode::Up => self.scroll += 1,
            KeyCode::Down => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::PageUp => self.scroll += 10,
            KeyCode::PageDown => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::End => self.scroll = 0,
            _ => {}
        }
    }

    fn interrupt(&mut self) {
        if !self.interrupting {
            self.interrupting = true;
            self.note = Some(match self.busy {
                Busy::Call { .. } => "the model is interrupted after this call…".into(),
                _ => "interrupting the model…".into(),
            });
            self.out.push(ChatCmd::Interrupt);
        }
    }

    fn quit(&mut self) {
        if !self.quitting {
            self.quitting = true;
            self.note = Some("ending the session…".into());
            self.out.push(ChatCmd::Quit);
        }
    }

    /// What is running, below the transcript: the wait for the model, or the running
    /// call with its commands, diffs and the tail of its output.
    fn push_busy(&self, out: &mut Vec<Line<'static>>, width: usize, dim: Style) {
        match &self.busy {
            Busy::Model { since_ms } if self.streaming.is_empty() => {
                out.push(Line::from(Span::styled(
                    format!(
                        "… waiting for the model {}",
                        elapsed(self.now_ms.saturating_sub(*since_ms) * 1000)
                    ),
                    dim,
                )))
            }
            Busy::Call {
                call,
                tool,
                summary,
                since_ms,
                commands,
                diffs,
                live,
            } => {
                let (word, style) = if self.cancelling {
                    ("cancelling", status_style("cancelled"))
                } else {
                    ("running", status_style("running"))
                };
                out.push(cut(
                    Line::from(vec![
                        Span::raw(format!("{call:<5} {tool:<16} ")),
                        Span::styled(format!("{word:<10}"), style),
                        Span::raw(format!(
                            "{:>9}  {summary}",
                            elapsed(self.now_ms.saturating_sub(*since_ms) * 1000)
                        )),
                    ]),
                    width,
                ));
                for c in commands {
                    push_wrapped(out, &format!("      $ {c}"), width, Style::default());
                }
                for d in diffs {
                    push_diff(out, d, width);
                }
                for l in tail(live, OUTPUT_TAIL_LINES_MAX) {
                    push_wrapped(out, &format!("      │ {l}"), width, dim);
                }
            }
            _ => {}
        }
    }

    /// The transcript as lines of `width` columns at most.
    fn lines(&self, width: usize) -> Vec<Line<'static>> {
        let mut out: Vec<Line<'static>> = Vec::new();
        let dim = Style::default().fg(Color::DarkGray);
        for e in &self.entries {
            match e {
                Entry::User(t) => {
                    out.push(Line::from(""));
                    push_wrapped(&mut out, &format!("> {t}"), width, bold().fg(Color::Cyan));
                }
                Entry::Model(t) => {
                    for l in t.trim_end().lines() {
                        push_wrapped(&mut out, l, width, Style::default());
                    }
                }
                Entry::Call {
                    call,
                    tool,
                    status,
                    elapsed_us,
                    waited_us,
                    summary,
                    commands,
                    diffs,
                    output,
                } => {
                    out.push(cut(
                        Line::from(vec![
                            Span::raw(format!("{call:<5} {tool:<16} ")),
                            Span::styled(format!("{status:<10}"), status_style(status)),
                            Span::raw(format!(
                                "{:>9}  {summary}",
                                run_time(*elapsed_us, *waited_us)
                            )),
                        ]),
                        width,
                    ));
                    for c in commands {
                        push_wrapped(&mut out, &format!("      $ {c}"), width, Style::default());
                    }
                    for d in diffs {
                        push_diff(&mut out, d, width);
                    }
                    for l in output.iter().filter(|l| !l.is_empty()) {
                        push_wrapped(&mut out, &format!("      │ {l}"), width, dim);
                    }
                }
                Entry::Note(t) => push_wrapped(&mut out, &format!("· {t}"), width, dim),
                Entry::Error(t) => push_wrapped(
                    &mut out,
                    &format!("! {t}"),
                    width,
                    Style::default().fg(Color::Red),
                ),
            }
        }
        for l in self.streaming.lines() {
            push_wrapped(&mut out, l, width, Style::default());
        }
        self.push_busy(&mut out, width, dim);
        out
    }

    pub fn render(&mut self, f: &mut Frame) {
        let [title, body, input, foot] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(3),
            Constraint::Length(1),
        ])
        .areas(f.area());
        let state = match (&self.busy, &self.ended) {
            (_, Some((_, true))) => "failed".to_string(),
            (_, Some(_)) => "ended".to_string(),
            _ if self.quitting => "ending".to_string(),
            (Busy::Idle, _) => "your turn".to_string(),
            (Busy::Model { .. }, _) => "thinking".to_string(),
            (Busy::Call { tool, .. }, _) => format!("running {tool}"),
            (Busy::Ended, _) => "ended".to_string(),
        };
        let mut head = format!("cairn chat — {state}");
        if !self.model.is_empty() {
            head.push_str(&format!(" — {}", self.model));
        }
        if !self.session.is_empty() {
            head.push_str(&format!(" — session {}", self.session));
        }
        f.render_widget(
            Paragraph::new(Line::from(Span::styled(head, bold()))),
            title,
        );
        let lines = self.lines(body.width as usize);
        let height = body.height as usize;
        let max_scroll = lines.len().saturating_sub(height);
        self.scroll = self.scroll.min(max_scroll);
        let start = lines.len().saturating_sub(height + self.scroll);
        let shown: Vec<Line> = lines.into_iter().skip(start).take(height).collect();
        f.render_widget(Paragraph::new(shown), body);
        // The input line shows its end when it is longer than the box.
        let room = input.width.saturating_sub(4) as usize;
        let chars: Vec<char> = self.input.chars().collect();
        let visible: String = chars[chars.len().saturating_sub(room)..].iter().collect();
        let input_style = if matches!(self.busy, Busy::Idle) {
            Style::default()
        } else {
            Style::default().fg(Color::DarkGray)
        };
        f.render_widget(
            Paragraph::new(Line::from(Span::styled(
                format!("> {visible}▏"),
                input_style,
            )))
            .block(Block::default().borders(Borders::TOP | Borders::BOTTOM)),
            input,
        );
        let help = match &self.busy {
            Busy::Idle => "enter send · ↑↓ scroll · ctrl-c end the session",
            Busy::Ended => "the session ended",
            Busy::Model { .. } => "esc interrupt the model · ↑↓ scroll · ctrl-c interrupt",
            Busy::Call { .. } => "ctrl-c cancel the call · esc interrupt the model · ↑↓ scroll",
        };
        let foot_text = match &self.note {
            Some(n) => format!("{n} · {help}"),
            None => help.to_string(),
        };
        f.render_widget(
            Paragraph::new(foot_text).style(Style::default().add_modifier(Modifier::REVERSED)),
            foot,
        );
        if let Some(r) = &self.ask {
            crate::view::permission_popup(f, r);
        }
    }

    /// What is left in the scrollback once the screen is left: the conversation and one
    /// line per call, then how the session ended and its id.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for e in &self.entries {
            match e {
                Entry::User(t) => out.push_str(&format!("\n> {t}\n")),
                Entry::Model(t) => out.push_str(&format!("{}\n", t.trim_end())),
                Entry::Call {
                    call,
                    tool,
                    status,
                    elapsed_us,
                    waited_us,
                    summary,
                    ..
                } => out.push_str(&format!(
                    "{call:<5} {tool:<16} {status:<10} {:>9}  {}\n",
                    run_time(*elapsed_us, *waited_us),
                    first_line(summary, 60)
                )),
                Entry::Note(t) => out.push_str(&format!("· {t}\n")),
                Entry::Error(t) => out.push_str(&format!("! {t}\n")),
            }
        }
        if !self.streaming.trim().is_empty() {
            out.push_str(&format!("{}\n", self.streaming.trim_end()));
        }
        match &self.ended {
            Some((reason, _)) => out.push_str(&format!("\nsession ended: {reason}\n")),
            None => out.push_str("\nsession not ended\n"),
        }
        out
    }
}

/// The first line of `text`, `chars_max` characters at most, with `…` when cut.
fn short(text: &str, chars_max: usize) -> String {
    let line = first_line(text, chars_max);
    if text.trim_end().len() > line.len() {
        format!("{line}…")
    } else {
        line
    }
}

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// The last `n` non-empty lines of `text`, each cut to [`OUTPUT_LINE_CHARS_MAX`].
fn tail(text: &str, n: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.chars().take(OUTPUT_LINE_CHARS_MAX).collect())
        .collect()
}

/// The first `head` and the last `tail` non-empty lines of `text`, each cut to
/// [`OUTPUT_LINE_CHARS_MAX`], with the number of lines between them named (the model's
/// rule for long outputs, on the screen).
fn head_and_tail(text: &str, head: usize, tail: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let cut = |l: &&str| l.chars().take(OUTPUT_LINE_CHARS_MAX).collect::<String>();
    if lines.len() <= head + tail {
        return lines.iter().map(cut).collect();
    }
    let left = lines.len() - head - tail;
    let mut out: Vec<String> = lines[..head].iter().map(cut).collect();
    out.push(format!(
        "… {left} line{} left out here (cairn browse shows the whole answer)",
        if left == 1 { "" } else { "s" }
    ));
    out.extend(lines[lines.len() - tail..].iter().map(cut));
    out
}

/// `text` cut into lines of `width` characters (at least one line).
fn push_wrapped(out: &mut Vec<Line<'static>>, text: &str, width: usize, style: Style) {
    let width = width.max(1);
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        out.push(Line::from(""));
        return;
    }
    for piece in chars.chunks(width) {
        out.push(Line::from(Span::styled(
            piece.iter().collect::<String>(),
            style,
        )));
    }
}

/// A line cut to `width` columns.
fn cut(line: Line<'static>, width: usize) -> Line<'static> {
    let mut left = width;
    let mut spans = Vec::new();
    for s in line.spans {
        if left == 0 {
            break;
        }
        let text: String = s.content.chars().take(left).collect();
        left -= text.chars().count();
        spans.push(Span::styled(text, s.style));
    }
    Line::from(spans)
}

fn push_diff(out: &mut Vec<Line<'static>>, diff: &str, width: usize) {
    for l in diff.lines() {
        let style = if l.starts_with("@@") {
            Style::default().fg(Color::Cyan)
        } else {
            match crate::paint::diff_sign(l) {
                Some('+') if !l.starts_with("+++") => Style::default().fg(Color::Green),
                Some('-') if !l.starts_with("---") => Style::default().fg(Color::Red),
                _ => Style::default(),
            }
        };
        push_wrapped(out, &format!("      {l}"), width, style);
    }
}
