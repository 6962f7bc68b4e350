//! `cairn browse`: a read-only browser of recorded sessions, in three screens —
//! the sessions of a project (newest first: start time, state, calls, task, parent),
//! a session's conversation (one row per user message, model text and call, in order)
//! and a row's detail (a message whole; a call's input, output, diffs, side-effect
//! records, raw records). `/` searches what the rows show and their details: outputs
//! and messages too.
//!
//! [`App`] is a pure state machine: [`App::on_key`] changes it, [`App::render`] draws
//! it; loading a session goes through the [`Loader`] it is given, so tests drive it
//! with ratatui's `TestBackend` and the binary with a real terminal.

use std::path::Path;

use cairn_engine::Home;
use cairn_engine::event::Event;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState};

use crate::summary::elapsed;

/// Columns the session list needs to show whole ids with every other column
/// (29 + 16 + 11 + 5 + 5, the spaces between, and 10 of the task); narrower, the ids
/// are shown short.
pub const SESSIONS_WIDE_COLUMNS: u16 = 101;

pub use cairn_replay::{SessionRow, summarise};

/// One row of a session's conversation: a call, or a message (user or model) whose
/// `call` and `status` are empty and whose `tool` says who spoke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRow {
    pub seq: u64,
    /// The call id; empty for a message.
    pub call: String,
    pub tool: String,
    pub status: String,
    /// The call's own run time: its recorded time less `waited_us`.
    pub elapsed_us: Option<u64>,
    /// The time it waited for a person's permission answers (shown apart).
    pub waited_us: u64,
    pub summary: String,
    /// The detail screen's text: input, output, diffs, side effects, raw records.
    pub detail: Vec<String>,
}

/// A loaded session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub row: SessionRow,
    pub calls: Vec<CallRow>,
}

/// Loads a session for the timeline.
pub type Loader = Box<dyn FnMut(&SessionRow) -> Result<SessionView, String>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Screen {
    Sessions,
    Timeline,
    Detail,
}

/// The browser's state.
pub struct App {
    sessions: Vec<SessionRow>,
    session_sel: usize,
    view: Option<SessionView>,
    call_sel: usize,
    scroll: usize,
    screen: Screen,
    /// The search being typed after `/`.
    typing: Option<String>,
    /// The filter of the list on screen (sessions or calls), or the detail's search.
    filter: String,
    /// True when started on one session: `q` on its timeline quits.
    single: bool,
    message: Option<String>,
    loader: Loader,
    /// Set when the user leaves.
    pub quit: bool,
}

fn contains(hay: &str, needle: &str) -> bool {
    needle.is_empty() || hay.to_lowercase().contains(&needle.to_lowercase())
}

impl App {
    /// A browser on a list of sessions.
    pub fn new(sessions: Vec<SessionRow>, loader: Loader) -> App {
        App {
            sessions,
            session_sel: 0,
            view: None,
            call_sel: 0,
            scroll: 0,
            screen: Screen::Sessions,
            typing: None,
            filter: String::new(),
            single: false,
            message: None,
            loader,
            quit: false,
        }
    }

    /// A browser opened on one session's timeline.
    pub fn on_session(view: SessionView, loader: Loader) -> App {
        let mut app = App::new(vec![view.row.clone()], loader);
        app.view = Some(view);
        app.screen = Screen::Timeline;
        app.single = true;
        app
    }

    fn visible_sessions(&self) -> Vec<usize> {
        (0..self.sessions.len())
            .filter(|&i| {
                let s = &self.sessions[i];
                self.screen != Screen::Sessions
                    || contains(
                        &format!("{} {} {} {}", s.id, s.state, s.workspace, s.task),
                        &self.filter,
                    )
            })
            .collect()
    }

    fn visible_calls(&self) -> Vec<usize> {
        let Some(v) = &self.view else {
            return Vec::new();
        };
        (0..v.calls.len())
            .filter(|&i| {
                let c = &v.calls[i];
                self.screen != Screen::Timeline
                    || contains(
                        &format!("{} {} {} {}", c.call, c.tool, c.status, c.summary),
                        &self.filter,
                    )
                    || c.detail.iter().any(|l| contains(l, &self.filter))
            })
            .collect()
    }

    fn detail(&self) -> &[String] {
        self.view
            .as_ref()
            .and_then(|v| v.calls.get(self.call_sel))
            .map_or(&[], |c| c.detail.as_slice())
    }

    /// Moves the detail's scroll to the next line at or after `from` holding the search.
    fn find_in_detail(&mut self, from: usize) {
        let needle = self.filter.clone();
        let lines = self.detail();
        let hit = (from..lines.len())
            .chain(0..from.min(lines.len()))
            .find(|&i| contains(&lines[i], &needle));
        match hit {
            Some(i) => {
                self.scroll = i;
                self.message = None;
            }
            None => self.message = Some(format!("not found: {needle}")),
        }
    }

    /// Handles one key.
    pub fn on_key(&mut self, key: KeyEvent) {
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            self.quit = true;
            return;
        }
        if let Some(t) = &mut self.typing {
            match key.code {
                KeyCode::Char(c) => t.push(c),
                KeyCode::Backspace => {
                    t.pop();
                }
                KeyCode::Enter => {
                    self.filter = self.typing.take().unwrap_or_default();
                    self.session_sel = 0;
                    match self.screen {
                        Screen::Sessions => {
                            self.session_sel = self.visible_sessions().first().copied().unwrap_or(0)
                        }
                        Screen::Timeline => {
                            self.call_sel = self.visible_calls().first().copied().unwrap_or(0)
                        }
                        Screen::Detail => self.find_in_detail(0),
                    }
                }
                KeyCode::Esc => self.typing = None,
                _ => {}
            }
            return;
        }
        self.message = None;
        match key.code {
            KeyCode::Char('/') => self.typing = Some(String::new()),
            KeyCode::Char('q') | KeyCode::Esc => self.back(),
            KeyCode::Enter | KeyCode::Right | KeyCode::Char('l') => self.open(),
            KeyCode::Left | KeyCode::Char('h') => self.back(),
            KeyCode::Down | KeyCode::Char('j') => self.step(1),
            KeyCode::Up | KeyCode::Char('k') => self.step(-1),
            KeyCode::PageDown | KeyCode::Char(' ') => self.step(10),
            KeyCode::PageUp => self.step(-10),
            KeyCode::Home | KeyCode::Char('g') => self.step(-1_000_000),
            KeyCode::End | KeyCode::Char('G') => self.step(1_000_000),
            KeyCode::Char('n') if self.screen == Screen::Detail && !self.filter.is_empty() => {
                self.find_in_detail(self.scroll + 1)
            }
            _ => {}
        }
    }

    fn step(&mut self, by: i64) {
        let move_in = |list: &[usize], cur: usize| -> usize {
            if list.is_empty() {
                return cur;
            }
            let pos = list.iter().position(|&i| i == cur).unwrap_or(0) as i64;
            let to = (pos + by).clamp(0, list.len() as i64 - 1);
            list[to as usize]
        };
        match self.screen {
            Screen::Sessions => {
                self.session_sel = move_in(&self.visible_sessions(), self.session_sel)
            }
            Screen::Timeline => self.call_sel = move_in(&self.visible_calls(), self.call_sel),
            Screen::Detail => {
                let max = self.detail().len().saturating_sub(1) as i64;
                self.scroll = (self.scroll as i64 + by).clamp(0, max) as usize;
            }
        }
    }

    fn open(&mut self) {
        match self.screen {
            Screen::Sessions => {
                let Some(row) = self.sessions.get(self.session_sel).cloned() else {
                    return;
                };
                match (self.loader)(&row) {
                    Ok(v) => {
                        self.view = Some(v);
                        self.call_sel = 0;
                        self.screen = Screen::Timeline;
                        self.filter.clear();
                    }
                    Err(e) => self.message = Some(format!("cannot open {}: {e}", row.id)),
                }
            }
            Screen::Timeline => {
                if self.view.as_ref().is_some_and(|v| !v.calls.is_empty()) {
                    self.screen = Screen::Detail;
                    self.scroll = 0;
                    self.filter.clear();
                }
            }
            Screen::Detail => {}
        }
    }

    fn back(&mut self) {
        if !self.filter.is_empty() {
            self.filter.clear();
            return;
        }
        match self.screen {
            Screen::Sessions => self.quit = true,
            Screen::Timeline if self.single => self.quit = true,
            Screen::Timeline => self.screen = Screen::Sessions,
            Screen::Detail => self.screen = Screen::Timeline,
        }
    }

    /// Draws the current screen over the whole frame.
    pub fn render(&mut self, f: &mut Frame) {
        let [title, body, foot] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(1),
        ])
        .areas(f.area());
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let heading = match self.screen {
            Screen::Sessions => format!(
                "cairn browse — {}",
                crate::summary::count(self.sessions.len() as u64, "session")
            ),
            Screen::Timeline => self.view.as_ref().map_or(String::new(), |v| {
                format!(
                    "session {} — {} — {}",
                    v.row.id,
                    v.row.state,
                    crate::summary::count(
                        v.calls.iter().filter(|c| !c.call.is_empty()).count() as u64,
                        "call"
                    )
                )
            }),
            Screen::Detail => self
                .view
                .as_ref()
                .and_then(|v| v.calls.get(self.call_sel))
                .map_or(String::new(), |c| {
                    if c.call.is_empty() {
                        format!("{} message — seq {}", c.tool, c.seq)
                    } else {
                        format!("call {} {} — {}", c.call, c.tool, c.status)
                    }
                }),
        };
        f.render_widget(
            Paragraph::new(Line::from(Span::styled(heading, bold))),
            title,
        );
        match self.screen {
            Screen::Sessions => self.render_sessions(f, body),
            Screen::Timeline => self.render_timeline(f, body),
            Screen::Detail => self.render_detail(f, body),
        }
        let keys = match (&self.typing, &self.message) {
            (Some(t), _) => format!("/{t}▏  enter: search · esc: cancel"),
            (None, Some(m)) => m.clone(),
            (None, None) => {
                let filter = if self.filter.is_empty() {
                    String::new()
                } else {
                    format!("[/{}] ", self.filter)
                };
                let keys = match self.screen {
                    Screen::Sessions => "↑↓ move · enter open · / search · q quit",
                    Screen::Timeline if self.single => "↑↓ move · enter detail · / search · q quit",
                    Screen::Timeline => "↑↓ move · enter detail · / search · q back",
                    Screen::Detail => "↑↓ pgup pgdn scroll · / search · n next · q back",
                };
                format!("{filter}{keys}")
            }
        };
        f.render_widget(
            Paragraph::new(keys).style(Style::default().add_modifier(Modifier::REVERSED)),
            foot,
        );
    }

    fn render_sessions(&self, f: &mut Frame, area: Rect) {
        let visible = self.visible_sessions();
        // Narrower than the whole row: the id as people type it (its random suffix),
        // not the whole id cut short of that suffix.
        let narrow = area.width < SESSIONS_WIDE_COLUMNS;
        let id_of = |id: &str| match narrow {
            true => id.rsplit('-').next().unwrap_or(id).to_string(),
            false => id.to_string(),
        };
        let rows: Vec<Row> = visible
            .iter()
            .map(|&i| {
                let s = &self.sessions[i];
                let started: String = s
                    .started
                    .chars()
                    .take(16)
                    .collect::<String>()
                    .replace('T', " ");
                let mut task = match &s.parent {
                    Some(p) => format!("↳ {}: ", p.rsplit('-').next().unwrap_or(p)),
                    None => String::new(),
                };
                task.push_str(if s.task.is_empty() { "-" } else { &s.task });
                Row::new(vec![
                    Cell::from(id_of(&s.id)),
                    Cell::from(started),
                    Cell::from(s.state.clone()).style(status_style(&s.state)),
                    Cell::from(format!("{:>5}", s.calls)),
                    Cell::from(format!("{:>5}", s.not_ok)),
                    Cell::from(task),
                ])
            })
            .collect();
        let table = Table::new(
            rows,
            [
                Constraint::Length(if narrow { 8 } else { 29 }),
                Constraint::Length(16),
                Constraint::Length(11),
                Constraint::Length(5),
                Constraint::Length(5),
                Constraint::Min(10),
            ],
        )
        .header(Row::new(["SESSION", "STARTED", "STATE", "CALLS", "!OK", "TASK"]).style(bold()))
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED))
        .block(Block::default().borders(Borders::TOP));
        let mut state = TableState::default();
        state.select(visible.iter().position(|&i| i == self.session_sel));
        f.render_stateful_widget(table, area, &mut state);
        if visible.is_empty() {
            f.render_widget(Paragraph::new("  no sessions"), inner(area, 2));
        }
    }

    fn render_timeline(&self, f: &mut Frame, area: Rect) {
        let Some(v) = &self.view else {
            return;
        };
        let visible = self.visible_calls();
        let rows: Vec<Row> = visible
            .iter()
            .map(|&i| {
                let c = &v.calls[i];
                if c.call.is_empty() {
                    // A message: who spoke, and its first line.
                    let style = Style::default().fg(if c.tool == "user" {
                        Color::Cyan
                    } else {
                        Color::Magenta
                    });
                    return Row::new(vec![
                        Cell::from(format!("{:>5}", c.seq)),
                        Cell::from(""),
                        Cell::from(c.tool.clone()).style(style.add_modifier(Modifier::BOLD)),
                        Cell::from(""),
                        Cell::from(""),
                        Cell::from(c.summary.clone()).style(style),
                    ]);
                }
                Row::new(vec![
                    Cell::from(format!("{:>5}", c.seq)),
                    Cell::from(c.call.clone()),
                    Cell::from(c.tool.clone()),
                    Cell::from(c.status.clone()).style(status_style(&c.status)),
                    Cell::from(format!("{:>9}", c.elapsed_us.map_or("-".into(), elapsed))),
                    Cell::from(if c.waited_us > 0 {
                        format!(
                            "(waited {} for permission) {}",
                            elapsed(c.waited_us),
                            c.summary
                        )
                    } else {
                        c.summary.clone()
                    }),
                ])
            })
            .collect();
        let table = Table::new(
            rows,
            [
                Constraint::Length(5),
                Constraint::Length(5),
                Constraint::Length(16),
                Constraint::Length(11),
                Constraint::Length(9),
                Constraint::Min(10),
            ],
        )
        .header(
            Row::new([
                "  SEQ",
                "CALL",
                "TOOL",
                "STATUS",
                "  ELAPSED",
                "INPUT / MESSAGE",
            ])
            .style(bold()),
        )
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED))
        .block(Block::default().borders(Borders::TOP));
        let mut state = TableState::default();
        state.select(visible.iter().position(|&i| i == self.call_sel));
        f.render_stateful_widget(table, area, &mut state);
        if visible.is_empty() {
            f.render_widget(Paragraph::new("  no calls"), inner(area, 2));
        }
    }

    fn render_detail(&self, f: &mut Frame, area: Rect) {
        let lines: Vec<Line> = self
            .detail()
            .iter()
            .skip(self.scroll)
            .map(|l| detail_line(l, &self.filter))
            .collect();
        f.render_widget(
            Paragraph::new(lines).block(Block::default().borders(Borders::TOP)),
            area,
        );
    }
}

fn inner(area: Rect, top: u16) -> Rect {
    Rect {
        y: area.y + top.min(area.height),
        height: area.height.saturating_sub(top),
        ..area
    }
}

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// The colour of a status.
pub fn status_style(status: &str) -> Style {
    let c = match status {
        "ok" | "finished" => Color::Green,
        "error" | "failed" | "timeout" => Color::Red,
        "denied" => Color::Magenta,
        "blocked" => Color::Yellow,
        "running" | "unfinished" | "interrupted" | "resumed" => Color::Cyan,
        _ => Color::Gray,
    };
    Style::default().fg(c)
}

fn detail_line(l: &str, search: &str) -> Line<'static> {
    let style = if l.starts_with("── ") {
        bold().fg(Color::Yellow)
    } else if l.starts_with("@@") {
        Style::default().fg(Color::Cyan)
    } else {
        match crate::paint::diff_sign(l) {
            Some('+') if !l.starts_with("+++") => Style::default().fg(Color::Green),
            Some('-') if !l.starts_with("---") => Style::default().fg(Color::Red),
            _ => Style::default(),
        }
    };
    let style = if !search.is_empty() && contains(l, search) {
        style.add_modifier(Modifier::UNDERLINED)
    } else {
        style
    };
    Line::from(Span::styled(l.to_string(), style))
}

/// The sessions of the project of `workspace`, newest first.
pub fn list_sessions(home: &Home, workspace: &Path) -> Vec<SessionRow> {
    let project = home.project(workspace);
    let mut ids = project.sessions();
    ids.sort();
    ids.reverse();
    ids.iter()
        .filter_map(|id| summarise(&project.session_dir(id)).ok())
        .collect()
}

/// The rows of a session's messages (the user's, the model's), in log order.
fn message_rows(session: &cairn_replay::Session) -> Vec<CallRow> {
    let mut messages: Vec<CallRow> = Vec::new();
    for r in &session.records {
        let (who, text) = match &r.event {
            Event::UserMessage { text, .. } => ("user", text),
            Event::ModelTurn {
                text,
                interrupted: false,
                ..
            } if !text.is_empty() => ("model", text),
            Event::ModelTurn { text, .. } if !text.is_empty() => ("model (interrupted)", text),
            _ => continue,
        };
        let mut detail = vec![format!("{who} · seq {} · {}", r.seq, r.time())];
        detail.push("── message".into());
        detail.extend(text.lines().map(|l| l.replace('\t', "    ")));
        messages.push(CallRow {
            seq: r.seq,
            call: String::new(),
            tool: who.into(),
            status: String::new(),
            elapsed_us: None,
            waited_us: 0,
            summary: cairn_replay::audit::one_line(text.lines().next().unwrap_or("")),
            detail,
        });
    }
    messages
}

/// The diffs of a call's writes that succeeded, under a `── diff` heading.
fn push_diffs(d: &mut Vec<String>, session: &cairn_replay::Session, c: &cairn_replay::Call) {
    let diffs: Vec<_> = c
        .writes
        .iter()
        .filter(|(_, w)| w.status == cairn_engine::event::WriteStatus::Ok)
        .collect();
    if !diffs.is_empty() {
        d.push("── diff".into());
        for (_, w) in diffs {
            let text = |b: &Option<cairn_store::BlobRef>| {
                b.as_ref()
                    .and_then(|b| session.blob(&b.hash, &w.path).ok())
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default()
            };
            if w.unknown {
                // An imported change known only as the source's diff: no content to
                // compare, the diff as the source recorded it.
                d.push(format!(
                    "{}: content unknown; the change as the source recorded it:",
                    w.path
                ));
                d.extend(text(&w.diff).lines().map(str::to_string));
                continue;
            }
            d.extend(
                cairn_engine::diff::unified(
                    &w.path,
                    w.before.is_some().then(|| text(&w.before)).as_deref(),
                    &text(&w.after),
                    400,
                )
                .lines()
                .map(str::to_string),
            );
        }
    }
}

/// Loads a session's conversation — its messages and calls in log order — and the
/// rows' details (read-only).
pub fn load_session(row: &SessionRow) -> Result<SessionView, String> {
    let session = cairn_replay::Session::load(&row.dir).map_err(|e| crate::hint::text(&e))?;
    // Messages, by the seq they come before calls at.
    let mut messages = message_rows(&session).into_iter().peekable();
    // Each finished call's wait for a person, by the seq of its `tool_finished`.
    let mut waits = crate::summary::PersonWaits::default();
    let mut waited: std::collections::HashMap<u64, u64> = Default::default();
    for r in &session.records {
        waits.apply(r);
        if let Event::ToolFinished(f) = &r.event {
            waited.insert(r.seq, waits.of(&f.call));
        }
    }
    let mut calls = Vec::new();
    for c in session.calls() {
        while let Some(m) = messages.next_if(|m| m.seq < c.seq) {
            calls.push(m);
        }
        let (status, recorded_us, waited_us) = match &c.finished {
            Some((seq, f)) => (
                f.status.as_str().to_string(),
                Some(f.elapsed_us),
                waited.get(seq).copied().unwrap_or(0),
            ),
            None => ("unfinished".to_string(), None, 0),
        };
        let elapsed_us = recorded_us.map(|us| us.saturating_sub(waited_us));
        let mut d = vec![format!(
            "call {} · tool {} · status {} · elapsed {} · seq {}",
            c.call,
            c.tool,
            status,
            recorded_us.map_or("-".into(), |us| crate::summary::run_time(us, waited_us)),
            c.seq
        )];
        d.push("── input".into());
        d.extend(
            serde_json::to_string_pretty(&c.input)
                .unwrap_or_default()
                .lines()
                .map(str::to_string),
        );
        d.push("── output".into());
        if let Some((_, f)) = &c.finished {
            d.extend(f.output.lines().map(|l| l.replace('\t', "    ")));
            if let Some(r) = &f.refusal {
                d.push(format!("refused by rule {:?}", r.rule));
            }
        }
        push_diffs(&mut d, &session, &c);
        d.push("── side effects".into());
        let own: Vec<_> = session
            .records
            .iter()
            .filter(|r| {
                let v = serde_json::to_value(&r.event).unwrap_or_default();
                v.get("call").and_then(|x| x.as_str()) == Some(c.call.as_str())
            })
            .collect();
        for r in &own {
            if !matches!(r.event, Event::ToolStarted { .. } | Event::ToolFinished(_)) {
                d.push(format!("seq {} {}", r.seq, side_effect(&r.event)));
            }
        }
        d.push("── records".into());
        for r in &own {
            d.push(
                serde_json::json!({"seq": r.seq, "ts": r.ts, "event": r.event, "hash": r.hash.to_hex()})
                    .to_string(),
            );
        }
        calls.push(CallRow {
            seq: c.seq,
            call: c.call.clone(),
            tool: c.tool.clone(),
            status,
            elapsed_us,
            waited_us,
            summary: cairn_replay::audit::input_summary(&c.input),
            detail: d,
        });
    }
    calls.extend(messages);
    Ok(SessionView {
        row: row.clone(),
        calls,
    })
}

fn side_effect(e: &Event) -> String {
    match e {
        Event::FileRead(r) => format!(
            "file_read {} ranges {:?} of {}",
            r.path, r.ranges, r.total_lines
        ),
        Event::FileWrite(w) => {
            format!("file_write {:?} {} {:?}", w.op, w.path, w.status).to_lowercase()
        }
        Event::ShellExec(x) => format!(
            "shell_exec {:?} {} {} $ {}",
            x.kind,
            x.phase_name(),
            x.status_name(),
            cairn_engine::shell::shown_argv(&x.argv)
        )
        .to_lowercase(),
        Event::PermissionRequested { key, guarded, .. } => {
            format!(
                "permission_requested {key}{}",
                if *guarded { " (guarded)" } else { "" }
            )
        }
        Event::PermissionDecided {
            key,
            answer,
            source,
            ..
        } => format!("permission_decided {key} {answer:?} by {source:?}").to_lowercase(),
        Event::WebFetched(w) => format!(
            "web_fetched {} {}",
            w.url,
            w.error
                .clone()
                .unwrap_or_else(|| format!("{} bytes", w.bytes))
        ),
        other => other.kind().to_string(),
    }
}
