//! The loop of both full-screen views — the chat (`cairn_cli::chat`, run by
//! `chatcmd`) and the script's live view (`cairn_cli::view`, run by `livecmd`): the
//! engine runs on a thread of its own and talks to the view through messages; this
//! thread draws the view, reads keys and carries out what the view asks.

use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cairn_cli::chat::{ChatApp, ChatCmd, ChatMsg};
use cairn_cli::view::{Cmd, Msg, ViewApp};
use cairn_engine::CancelHandle;
use cairn_engine::event::{Answer, FileWrite};
use cairn_engine::permission::{Approver, Request};
use cairn_store::BlobStore;
use crossterm::event::{self, KeyEvent, KeyEventKind};
use ratatui::Frame;

use crate::out;

/// Lines of a diff shown in a view, per write.
const DIFF_LINES_MAX: usize = 200;

/// Asks the view (with the message `ask` makes) and waits for its answer; a view that
/// is gone denies.
pub(crate) struct ViewApprover<M> {
    pub to_view: Sender<M>,
    pub answers: Receiver<Answer>,
    pub ask: fn(Request) -> M,
}

impl<M: Send> Approver for ViewApprover<M> {
    fn answer(&mut self, r: &Request) -> (Answer, bool) {
        if self.to_view.send((self.ask)(r.clone())).is_err() {
            return (Answer::Deny, false);
        }
        match self.answers.recv() {
            Ok(a) => (a, true),
            Err(_) => (Answer::Deny, false),
        }
    }
}

/// What a view shows of a file the running call wrote: its diff (up to
/// [`DIFF_LINES_MAX`] lines), or why there is none.
pub(crate) fn write_shown(w: &FileWrite, blobs: &BlobStore) -> String {
    if w.withheld {
        return format!(
            "{}: withheld (a credential file, its content is not kept)",
            w.path
        );
    }
    let text = |b: &Option<cairn_store::BlobRef>| -> cairn_store::Result<String> {
        match b {
            None => Ok(String::new()),
            Some(b) => Ok(String::from_utf8_lossy(&blobs.get(&b.hash)?).into_owned()),
        }
    };
    match (text(&w.before), text(&w.after)) {
        (Ok(before), Ok(after)) => cairn_engine::diff::unified(
            &w.path,
            w.before.is_some().then_some(before.as_str()),
            &after,
            DIFF_LINES_MAX,
        ),
        (Err(e), _) | (_, Err(e)) => format!("{}: {e}", w.path),
    }
}

/// Starts the session a view shows, and opens its blob store (for the diffs); an
/// error is its text with what to do about it.
pub(crate) fn start(
    home: &cairn_engine::Home,
    workspace: &std::path::Path,
    config: cairn_engine::EngineConfig,
) -> Result<(cairn_engine::Engine, BlobStore), String> {
    cairn_engine::Engine::start(home, workspace, config)
        .and_then(|e| {
            let blobs = BlobStore::open(&e.project().blobs_dir())?;
            Ok((e, blobs))
        })
        .map_err(|e| cairn_cli::hint::text(&e))
}

/// A view: a pure state machine fed messages and keys, drawn on each round, leaving
/// commands for the runner.
pub(crate) trait Screen {
    type Msg;
    type Cmd;
    fn on_msg(&mut self, m: Self::Msg);
    fn on_key(&mut self, k: KeyEvent);
    /// The clock, in milliseconds since the view started.
    fn tick(&mut self, now_ms: u64);
    fn render(&mut self, f: &mut Frame);
    /// True from the Ctrl-C that cancels the running call until that call's end.
    fn cancelling(&self) -> bool;
    /// The commands the view left since the last round.
    fn commands(&mut self) -> Vec<Self::Cmd>;
}

impl Screen for ChatApp {
    type Msg = ChatMsg;
    type Cmd = ChatCmd;
    fn on_msg(&mut self, m: ChatMsg) {
        ChatApp::on_msg(self, m)
    }
    fn on_key(&mut self, k: KeyEvent) {
        ChatApp::on_key(self, k)
    }
    fn tick(&mut self, now_ms: u64) {
        ChatApp::tick(self, now_ms)
    }
    fn render(&mut self, f: &mut Frame) {
        ChatApp::render(self, f)
    }
    fn cancelling(&self) -> bool {
        ChatApp::cancelling(self)
    }
    fn commands(&mut self) -> Vec<ChatCmd> {
        std::mem::take(&mut self.out)
    }
}

impl Screen for ViewApp {
    type Msg = Msg;
    type Cmd = Cmd;
    fn on_msg(&mut self, m: Msg) {
        ViewApp::on_msg(self, m)
    }
    fn on_key(&mut self, k: KeyEvent) {
        ViewApp::on_key(self, k)
    }
    fn tick(&mut self, now_ms: u64) {
        ViewApp::tick(self, now_ms)
    }
    fn render(&mut self, f: &mut Frame) {
        ViewApp::render(self, f)
    }
    fn cancelling(&self) -> bool {
        ViewApp::cancelling(self)
    }
    fn commands(&mut self) -> Vec<Cmd> {
        std::mem::take(&mut self.out)
    }
}

/// Runs `app` full screen until the engine's thread (`engine`) has finished or a
/// SIGTERM or SIGHUP came (the engine's thread sees it too and ends the session; Ctrl-C
/// is a key here). Each round takes the engine's messages, draws, waits up to
/// `key_wait_ms` for a key, and hands the view's commands to `carry`. The terminal is
/// given back before it returns, whatever happened.
pub(crate) fn run<S: Screen, T>(
    app: &mut S,
    from_engine: &Receiver<S::Msg>,
    engine: &JoinHandle<T>,
    cancel: &CancelHandle,
    key_wait_ms: u64,
    mut carry: impl FnMut(S::Cmd),
) -> std::io::Result<()> {
    let t0 = Instant::now();
    let mut terminal = ratatui::init();
    let keys = key_presses();
    let ui = (|| -> std::io::Result<()> {
        loop {
            if cairn_engine::signal::received().is_some() {
                return Ok(());
            }
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
            if engine.is_finished() {
                return Ok(());
            }
            if let Ok(k) = keys.recv_timeout(Duration::from_millis(key_wait_ms)) {
                app.on_key(k);
            }
            for c in app.commands() {
                carry(c);
            }
        }
    })();
    // Not `ratatui::restore`, whose `eprintln!` panics on a terminal that hung up.
    if let Err(e) = ratatui::try_restore() {
        out::note(&format!("cairn: could not restore the terminal: {e}"));
    }
    // Dropping a terminal whose cursor cannot be shown again `eprintln!`s, which panics
    // once the terminal hung up — before the engine's thread has ended the session. So
    // the cursor is shown here, and a terminal that cannot is not dropped.
    match terminal.show_cursor() {
        Ok(()) => drop(terminal),
        Err(_) => std::mem::forget(terminal),
    }
    ui
}

/// Key presses, read on a thread of their own: on a terminal that hung up, crossterm's
/// read returns nothing forever and its poll never returns, so the view's thread must
/// never wait in it, or the session would not be ended after SIGHUP.
fn key_presses() -> mpsc::Receiver<KeyEvent> {
    let (key_tx, keys) = mpsc::channel();
    std::thread::spawn(move || {
        while let Ok(e) = event::read() {
            if let event::Event::Key(k) = e
                && k.kind == KeyEventKind::Press
                && key_tx.send(k).is_err()
            {
                return;
            }
        }
    });
    keys
}
