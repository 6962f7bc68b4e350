//! Ending a session on SIGINT, SIGTERM or SIGHUP, in every mode.
//!
//! [`install`] makes the three signals set one process-wide flag instead of killing the
//! process (`signal-hook`: the handler only stores a number). Everything that waits
//! looks at the flag: every [`crate::CancelHandle`] counts it as a cancel, so the
//! running foreground command is stopped by the process runner's wait loop (its whole
//! group, with the kill grace) and recorded `cancelled`, as is an MCP call; the drivers
//! (script, agent loop, MCP server) see it through [`crate::CancelHandle::stopped`]
//! before each step and end the session with the reason [`Signal::reason`]; a read of
//! standard input goes through [`Interruptible`], which ends at the signal. The command
//! line then exits with [`Signal::exit_code`] (128 + the signal's number), as a shell
//! reports a process killed by it.
//!
//! The flag is never cleared: a session stopped by a signal does not start a new call.

use std::io::Read;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// How often a wait for input looks at the flag.
pub const STOP_CHECK_MS: u64 = 50;

/// A signal that ends a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal(i32);

impl Signal {
    /// The terminal's Ctrl-C, and what Claude Code sends an MCP server.
    pub const INT: Signal = Signal(signal_hook::consts::SIGINT);
    /// What `kill`, service managers and Codex (to an MCP server's group) send.
    pub const TERM: Signal = Signal(signal_hook::consts::SIGTERM);
    /// The terminal went away.
    pub const HUP: Signal = Signal(signal_hook::consts::SIGHUP);
    /// The signals [`install`] handles.
    pub const ALL: [Signal; 3] = [Signal::INT, Signal::TERM, Signal::HUP];

    /// One of [`Signal::ALL`] by number.
    pub fn from_number(n: i32) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.0 == n)
    }

    pub fn number(self) -> i32 {
        self.0
    }

    /// `SIGINT`, `SIGTERM` or `SIGHUP`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::INT => "SIGINT",
            Signal::TERM => "SIGTERM",
            Signal::HUP => "SIGHUP",
            _ => unreachable!("only the signals of Signal::ALL are made"),
        }
    }

    /// The `session_ended` reason of a session it stopped: `signal: SIGTERM`.
    pub fn reason(self) -> String {
        format!("signal: {}", self.name())
    }

    /// The exit code of a command it stopped: 128 + its number (130, 143, 129).
    pub fn exit_code(self) -> u8 {
        u8::try_from(128 + self.0).unwrap_or(u8::MAX)
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// The number of the last signal received, 0 before any.
fn flag() -> &'static Arc<AtomicUsize> {
    static FLAG: OnceLock<Arc<AtomicUsize>> = OnceLock::new();
    FLAG.get_or_init(Arc::default)
}

/// Makes SIGINT, SIGTERM and SIGHUP stop the session instead of killing the process.
/// For a command that runs a session, at its start; calling it again adds nothing.
/// A library that does not call it keeps the default dispositions.
pub fn install() -> std::io::Result<()> {
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if *installed {
        return Ok(());
    }
    for s in Signal::ALL {
        let n = usize::try_from(s.0).unwrap_or(usize::MAX);
        signal_hook::flag::register_usize(s.0, Arc::clone(flag()), n)?;
    }
    *installed = true;
    Ok(())
}

/// The signal received since [`install`], if any.
pub fn received() -> Option<Signal> {
    let n = flag().load(Ordering::SeqCst);
    i32::try_from(n).ok().and_then(Signal::from_number)
}

/// A reader of a pipe, socket or terminal (standard input) whose reads end, as at the
/// end of the input, once a signal was [`received`]: it waits for input with `poll(2)`,
/// looking at the flag every [`STOP_CHECK_MS`], and reads only what is ready.
#[derive(Debug)]
pub struct Interruptible<R> {
    inner: R,
}

impl<R: Read + AsFd> Interruptible<R> {
    pub fn new(inner: R) -> Interruptible<R> {
        Interruptible { inner }
    }
}

impl<R: Read + AsFd> Read for Interruptible<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let tick = Timespec {
            tv_sec: 0,
            tv_nsec: i64::try_from(STOP_CHECK_MS * 1_000_000).unwrap_or(50_000_000),
        };
        loop {
            if received().is_some() {
                return Ok(0);
            }
            let mut fds = [PollFd::new(&self.inner, PollFlags::IN)];
            match poll(&mut fds, Some(&tick)) {
                // Readable, closed or failed: the read says which.
                Ok(n) if n > 0 => return self.inner.read(buf),
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_reasons_and_exit_codes() {
        let got: Vec<(String, String, u8)> = Signal::ALL
            .iter()
            .map(|s| (s.to_string(), s.reason(), s.exit_code()))
            .collect();
        assert_eq!(
            got,
            [
                ("SIGINT".into(), "signal: SIGINT".into(), 130),
                ("SIGTERM".into(), "signal: SIGTERM".into(), 143),
                ("SIGHUP".into(), "signal: SIGHUP".into(), 129),
            ]
        );
        assert_eq!(Signal::from_number(9), None);
    }
}
