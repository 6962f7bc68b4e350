//! Cancelling the running call from another thread (the live view's Ctrl-C).
//!
//! [`crate::Engine::cancel_handle`] gives a [`CancelHandle`]; triggering it asks the
//! call that is running to stop. `Engine::call` clears it when each call starts, so a
//! trigger between calls is dropped rather than cancelling the next one. Only a
//! foreground command (`run_shell`, `shell`, the check command of `problems`) can be
//! cancelled mid-way: its whole process group is killed as on a timeout and the call
//! finishes with status `cancelled`. An MCP call to a live server is given up the same way: the request is
//! cancelled (`notifications/cancelled`), the server keeps running, and the call
//! finishes with status `cancelled`. Every other tool is short and simply finishes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A token another thread triggers to cancel the engine's running call.
#[derive(Debug, Clone, Default)]
pub struct CancelHandle(Arc<AtomicBool>);

impl CancelHandle {
    /// Asks the running call to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// True once [`CancelHandle::cancel`] was called during this call.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    pub fn clear(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
}
