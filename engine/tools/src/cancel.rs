//! Cancelling the running call from another thread (the live view's Ctrl-C), and
//! stopping the session (a signal).
//!
//! [`crate::Engine::cancel_handle`] gives a [`CancelHandle`]; triggering it asks the
//! call that is running to stop. `Engine::call` clears it when each call starts, so a
//! trigger between calls is dropped rather than cancelling the next one. Only a
//! foreground command (`run_shell`, `shell`, the check command of `problems`) can be
//! cancelled mid-way: its whole process group is killed as on a timeout and the call
//! finishes with status `cancelled`. An MCP call to a live server is given up the same way: the request is
//! cancelled (`notifications/cancelled`), the server keeps running, and the call
//! finishes with status `cancelled`. Every other tool is short and simply finishes.
//!
//! A stop ([`CancelHandle::stop`], or a signal once [`crate::signal::install`] ran) is
//! a cancel that is never cleared: it cancels the running call and every later one,
//! and the drivers end the session when they see it ([`CancelHandle::stopped`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::signal::{self, Signal};

/// A token another thread triggers to cancel the engine's running call.
#[derive(Debug, Clone, Default)]
pub struct CancelHandle {
    call: Arc<AtomicBool>,
    /// The number of the signal a stop was asked with; 0 when none was.
    stop: Arc<AtomicI32>,
}

impl CancelHandle {
    /// Asks the running call to stop.
    pub fn cancel(&self) {
        self.call.store(true, Ordering::SeqCst);
    }

    /// True once [`CancelHandle::cancel`] was called during this call, or the session
    /// was stopped.
    pub fn is_cancelled(&self) -> bool {
        self.call.load(Ordering::SeqCst) || self.stopped().is_some()
    }

    /// Forgets a [`CancelHandle::cancel`] (not a stop).
    pub fn clear(&self) {
        self.call.store(false, Ordering::SeqCst);
    }

    /// Stops the session as `signal` would: the running call is cancelled, and so is
    /// every later one, until the driver ends the session.
    pub fn stop(&self, signal: Signal) {
        self.stop.store(signal.number(), Ordering::SeqCst);
    }

    /// The signal the session was stopped by: given to [`CancelHandle::stop`], or
    /// received by the process ([`signal::received`]).
    pub fn stopped(&self) -> Option<Signal> {
        Signal::from_number(self.stop.load(Ordering::SeqCst)).or_else(signal::received)
    }
}
