//! The live view of `cairn run --script` on a terminal: the script step, each call with
//! its status and elapsed time, the diff of every change and shell command lines in
//! full, and the permission prompt (y / a / n) as an overlay showing exactly what is
//! being allowed. `:bg` lists background processes (c cancels one), `/allow` shows the
//! allow list (r resets it). Ctrl-C while a call runs cancels it (a shell command is
//! killed with its process group, an MCP request is given up; other tools just
//! finish); a second Ctrl-C, or `q`, ends the session after the running call.
//!
//! [`ViewApp`] is a pure state machine: the runner feeds it [`Msg`]s from the engine's
//! thread and keys from the terminal; what it wants done comes out as [`Cmd`]s.

use cairn_engine::event::Answer;
use cairn_engine::permission::Request;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use crate::browse::status_style;
use crate::summary::{elapsed, run_time};

/// What the engine's thread reports.
#[derive(Debug, Clone)]
pub enum Msg {
    /// A script step begins (1-based line of the script, what it is).
    Step { line: usize, text: String },
    /// A call starts.
    Started { tool: String, summary: String },
    /// A call ended: its status, time, first output line, and the diffs and command
    /// lines its records hold.
    Finished {
        call: String,
        tool: String,
        status: String,
        /// The call's time as recorded, the wait below included.
        elapsed_us: u64,
        /// The part of it spent waiting for a person's permission answers (shown apart).
        waited_us: u64,
        output: String,
        diffs: Vec<String>,
        commands: Vec<String>,
    },
    /// A permission request waiting for an answer.
    Ask(Request),
    /// The background processes: (id, status, command line).
    Processes(Vec<(String, String, String)>),
    /// The allow list's keys.
    Allow(Vec<String>),
    /// The script ran to its end (the session stays open until `q`).
    ScriptDone,
    /// A note for the status line.
    Note(String),
}

/// What the view asks the engine's thread to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cmd {
    Answer(Answer),
    ListProcesses,
    Cancel(String),
    /// Cancel the running call (the engine's cancel handle, triggered at once by the
    /// runner rather than queued for the engine's thread, which is busy with the call).
    CancelCall,
    ListAllow,
    ResetAllow,
    /// End the session (after the running call), reaping its processes.
    Quit,
}

#[derive(Debug, Clone)]
enum Entry {
    Step(String),
    Call {
        call: String,
        tool: String,
        status: String,
        elapsed_us: u64,
        waited_us: u64,
        output: String,
        diffs: Vec<String>,
        commands: Vec<String>,
    },
}

#[derive(Debug, Clone)]
enum Overlay {
    None,
    Processes(Vec<(String, String, String)>, usize),
    Allow(Vec<String>),
}

/// The live view's state.
pub struct ViewApp {
    session: String,
    entries: Vec<Entry>,
    running: Option<(String, String, u64)>,
    now_ms: u64,
    ask: Option<Request>,
    overlay: Overlay,
    prompt: Option<String>,
    note: Option<String>,
    /// Lines scrolled up from the bottom.
    scroll: usize,
    done: bool,
    quitting: bool,
    /// The running call was asked to stop (Ctrl-C once).
    cancelling: bool,
    /// Commands for the engine's thread, taken by the runner.
    pub out: Vec<Cmd>,
}

impl ViewApp {
    pub fn new(session: &str) -> ViewApp {
        ViewApp {
            session: session.to_string(),
            entries: Vec::new(),
            running: None,
            now_ms: 0,
            ask: None,
            overlay: Overlay::None,
            prompt: None,
            note: None,
            scroll: 0,
            done: false,
            quitting: false,
            cancelling: false,
            out: Vec::new(),
        }
    }

    /// The clock, in milliseconds since the view started (for running calls' time).
    pub fn tick(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
    }

    /// True from the Ctrl-C that cancels the running call until that call finishes.
    pub fn cancelling(&self) -> bool {
        self.cancelling
    }

    /// True while a permission request waits.
    pub fn asking(&self) -> bool {
        self.ask.is_some()
    }

    pub fn on_msg(&mut self, m: Msg) {
        match m {
            Msg::Step { line, text } => self
                .entries
                .push(Entry::Step(format!("step {line}: {text}"))),
            Msg::Started { tool, summary } => self.running = Some((tool, summary, self.now_ms)),
            Msg::Finished {
                call,
                tool,
                status,
                elapsed_us,
                waited_us,
                output,
                diffs,
                commands,
            } => {
                self.running = None;
                if std::mem::take(&mut self.cancelling) && !self.quitting {
                    // The call ended (cancelled, or done before the cancel reached it).
                    self.note = None;
                }
                self.entries.push(Entry::Call {
                    call,
                    tool,
                    status,
                    elapsed_us,
                    waited_us,
                    output,
                    diffs,
                    commands,
                });
            }
            Msg::Ask(r) => self.ask = Some(r),
            Msg::Processes(p) => self.overlay = Overlay::Processes(p, 0),
            Msg::Allow(k) => self.overlay = Overlay::Allow(k),
            Msg::ScriptDone => self.done = true,
            Msg::Note(n) => self.note = Some(n),
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        let ctrl_c =
            key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
        if let Some(r) = &self.ask {
            let answer = match key.code {
                KeyCode::Char('y') => Some(Answer::Once),
                KeyCode::Char('a') if r.always_offered() => Some(Answer::Always),
                KeyCode::Char('n') | KeyCode::Esc => Some(Answer::Deny),
                _ if ctrl_c => Some(Answer::Deny),
                _ => None,
            };
            if let Some(a) = answer {
                self.note = Some(format!(
                    "{} {}: {}",
                    r.call,
                    r.key,
                    format!("{a:?}").to_lowercase()
                ));
                self.ask = None;
                self.out.push(Cmd::Answer(a));
                if ctrl_c {
                    self.quit();
                }
            }
            return;
        }
        if ctrl_c {
            // The first Ctrl-C during a call cancels it; the next one ends the session.
            if self.running.is_some() && !self.cancelling && !self.quitting {
                self.cancelling = true;
                self.note = Some(
                    "cancelling the running call… (Ctrl-C again or q ends the session)".into(),
                );
                self.out.push(Cmd::CancelCall);
            } else {
                self.quit();
            }
            return;
        }
        if let Some(p) = &mut self.prompt {
            match key.code {
                KeyCode::Char(c) => p.push(c),
                KeyCode::Backspace => {
                    p.pop();
                }
                KeyCode::Esc => self.prompt = None,
                KeyCode::Enter => {
                    let p = self.prompt.take().unwrap_or_default();
                    match p.trim() {
                        ":bg" => self.out.push(Cmd::ListProcesses),
                        "/allow" => self.out.push(Cmd::ListAllow),
                        ":q" | ":quit" => self.quit(),
                        other => {
                            self.note = Some(format!("unknown command {other} (:bg, /allow, :q)"))
                        }
                    }
                }
                _ => {}
            }
            return;
        }
        match &mut self.overlay {
            Overlay::Processes(list, sel) => {
                match key.code {
                    KeyCode::Up => *sel = sel.saturating_sub(1),
                    KeyCode::Down => *sel = (*sel + 1).min(list.len().saturating_sub(1)),
                    KeyCode::Char('c') => {
                        if let Some((id, _, _)) = list.get(*sel) {
                            self.out.push(Cmd::Cancel(id.clone()));
                        }
                    }
                    KeyCode::Esc | KeyCode::Char('q') => self.overlay = Overlay::None,
                    _ => {}
                }
                return;
            }
            Overlay::Allow(_) => {
                match key.code {
                    KeyCode::Char('r') => self.out.push(Cmd::ResetAllow),
                    KeyCode::Esc | KeyCode::Char('q') => self.overlay = Overlay::None,
                    _ => {}
                }
                return;
            }
            Overlay::None => {}
        }
        match key.code {
            KeyCode::Char(':') | KeyCode::Char('/') => {
                let KeyCode::Char(c) = key.code else { return };
                self.prompt = Some(c.to_string());
            }
            KeyCode::Char('q') => self.quit(),
            KeyCode::Up => self.scroll += 1,
            KeyCode::Down => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::PageUp => self.scroll += 10,
            KeyCode::PageDown => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::End => self.scroll = 0,
            _ => {}
        }
    }

    fn quit(&mut self) {
        if !self.quitting {
            self.quitting = true;
            self.note = Some(if self.running.is_some() {
                "ending the session after the running call…".into()
            } else {
                "ending the session…".into()
            });
            self.out.push(Cmd::Quit);
        }
    }

    fn lines(&self) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        for e in &self.entries {
            match e {
                Entry::Step(t) => out.push(Line::from(Span::styled(
                    t.clone(),
                    Style::default()
                        .add_modifier(Modifier::BOLD)
                        .fg(Color::Yellow),
                ))),
                Entry::Call {
                    call,
                    tool,
                    status,
                    elapsed_us,
                    waited_us,
                    output,
                    diffs,
                    commands,
                } => {
                    out.push(Line::from(vec![
                        Span::raw(format!("{call:<5} {tool:<16} ")),
                        Span::styled(format!("{status:<11}"), status_style(status)),
                        Span::raw(format!(
                            "{:>9}  {output}",
                            run_time(*elapsed_us, *waited_us)
                        )),
                    ]));
                    for c in commands {
                        out.push(Line::from(format!("      $ {c}")));
                    }
                    for d in diffs {
                        for l in d.lines() {
                            let style = if l.starts_with("@@") {
                                Style::default().fg(Color::Cyan)
                            } else {
                                match crate::paint::diff_sign(l) {
                                    Some('+') if !l.starts_with("+++") => {
                                        Style::default().fg(Color::Green)
                                    }
                                    Some('-') if !l.starts_with("---") => {
                                        Style::default().fg(Color::Red)
                                    }
                                    _ => Style::default(),
                                }
                            };
                            out.push(Line::from(Span::styled(format!("      {l}"), style)));
                        }
                    }
                }
            }
        }
        if let Some((tool, summary, since)) = &self.running {
            out.push(Line::from(vec![
                Span::raw(format!("…     {tool:<16} ")),
                if self.cancelling {
                    Span::styled(format!("{:<11}", "cancelling"), status_style("cancelled"))
                } else {
                    Span::styled(format!("{:<11}", "running"), status_style("running"))
                },
                Span::raw(format!(
                    "{:>9}  {summary}",
                    elapsed(self.now_ms.saturating_sub(*since) * 1000)
                )),
            ]));
        }
        out
    }

    pub fn render(&mut self, f: &mut Frame) {
        let [title, body, foot] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(1),
        ])
        .areas(f.area());
        let state = if self.quitting {
            "ending"
        } else if self.cancelling {
            "cancelling…"
        } else if self.done {
            "script finished"
        } else {
            "running"
        };
        f.render_widget(
            Paragraph::new(Line::from(Span::styled(
                format!("cairn run — session {} — {state}", self.session),
                Style::default().add_modifier(Modifier::BOLD),
            ))),
            title,
        );
        let lines = self.lines();
        let height = body.height.saturating_sub(1) as usize;
        let max_scroll = lines.len().saturating_sub(height);
        self.scroll = self.scroll.min(max_scroll);
        let start = lines.len().saturating_sub(height + self.scroll);
        let shown: Vec<Line> = lines.into_iter().skip(start).take(height).collect();
        f.render_widget(
            Paragraph::new(shown).block(Block::default().borders(Borders::TOP)),
            body,
        );
        let foot_text = match (&self.prompt, &self.note) {
            (Some(p), _) => format!("{p}▏  enter: run · esc: cancel"),
            (None, Some(n)) => format!("{n} · :bg processes · /allow · q end"),
            (None, None) if self.done => {
                "script finished · ↑↓ scroll · :bg processes · /allow allow list · q end the session"
                    .into()
            }
            (None, None) => {
                "↑↓ scroll · :bg processes · /allow allow list · q / ctrl-c end the session".into()
            }
        };
        f.render_widget(
            Paragraph::new(foot_text).style(Style::default().add_modifier(Modifier::REVERSED)),
            foot,
        );
        match &self.overlay {
            Overlay::None => {}
            Overlay::Processes(list, sel) => {
                let mut lines: Vec<Line> = list
                    .iter()
                    .enumerate()
                    .map(|(i, (id, status, cmd))| {
                        let l = Line::from(format!("{id:<4} {status:<10} $ {cmd}"));
                        if i == *sel {
                            l.style(Style::default().add_modifier(Modifier::REVERSED))
                        } else {
                            l
                        }
                    })
                    .collect();
                if lines.is_empty() {
                    lines.push(Line::from("no background processes"));
                }
                lines.push(Line::from(""));
                lines.push(Line::from("↑↓ select · c cancel · esc close"));
                popup(f, f.area(), " background processes ", lines, Color::Cyan);
            }
            Overlay::Allow(keys) => {
                let mut lines: Vec<Line> = keys.iter().map(|k| Line::from(k.clone())).collect();
                if lines.is_empty() {
                    lines.push(Line::from("the allow list is empty"));
                }
                lines.push(Line::from(""));
                lines.push(Line::from("r reset the allow list · esc close"));
                popup(f, f.area(), " allow list ", lines, Color::Cyan);
            }
        }
        if let Some(r) = &self.ask {
            permission_popup(f, r);
        }
    }
}

/// The permission overlay (shared with the chat): who asks for what, why "always" is
/// not offered, exactly what is being allowed, and the answers.
pub fn permission_popup(f: &mut Frame, r: &Request) {
    let headline = r.headline();
    let mut lines = vec![Line::from(Span::styled(
        headline[0].clone(),
        Style::default().add_modifier(Modifier::BOLD),
    ))];
    for l in &headline[1..] {
        lines.push(Line::from(Span::styled(
            l.clone(),
            Style::default().fg(Color::Red),
        )));
    }
    lines.push(Line::from(""));
    lines.extend(r.detail.lines().map(|l| {
        let style = if l.starts_with("@@") {
            Style::default().fg(Color::Cyan)
        } else {
            match crate::paint::diff_sign(l) {
                Some('+') if !l.starts_with("+++") => Style::default().fg(Color::Green),
                Some('-') if !l.starts_with("---") => Style::default().fg(Color::Red),
                _ => Style::default(),
            }
        };
        Line::from(Span::styled(l.to_string(), style))
    }));
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        r.choices(),
        Style::default().add_modifier(Modifier::BOLD),
    )));
    popup(f, f.area(), " permission ", lines, Color::Yellow);
}

/// A bordered box in the middle of `area`, sized to its text.
fn popup(f: &mut Frame, area: Rect, title: &str, lines: Vec<Line>, colour: Color) {
    let w = area.width.saturating_sub(4).min(
        (lines.iter().map(|l| l.width()).max().unwrap_or(20) + 4)
            .max(title.len() + 4)
            .min(u16::MAX as usize) as u16,
    );
    let h = (lines.len() as u16 + 2).min(area.height.saturating_sub(2));
    let rect = Rect {
        x: area.x + (area.width.saturating_sub(w)) / 2,
        y: area.y + (area.height.saturating_sub(h)) / 2,
        width: w,
        height: h,
    };
    f.render_widget(Clear, rect);
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(title.to_string())
                .border_style(Style::default().fg(colour)),
        ),
        rect,
    );
}
