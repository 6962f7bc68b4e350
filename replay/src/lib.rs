//! Replay: checking recorded sessions after the fact. `verify` re-checks a session
//! deeply (integrity, fold, every decision taken again, blobs); `replay` re-runs it
//! through the engine in a fresh copy of its starting workspace and reports where the
//! results diverge; `diff` aligns two sessions' calls and shows what differs;
//! `checkout` writes the workspace as it was after any record; `resume` picks a session
//! up after a crash and `fork` starts a new one from any point of another; `audit`
//! gathers what a session did for a report.
//!
//! Invariants: it knows no tool by its name (it asks the tool for its effects); verify
//! takes every decision again by calling `cairn_core::decide`, never a copy of a rule.
//! Without the default `run` feature (re-run, resume, fork) it depends on core and
//! tools only, not on the engine or the HTTP stack.
//!
//! It never writes into a session it reads: a replay is a new session whose parent is
//! the original.
//!
//! ```no_run
//! let (report, problems) = cairn_replay::verify(std::path::Path::new("session-dir"))?;
//! for p in &problems {
//!     println!("seq {:?} line {}: {}", p.seq, p.line, p.what);
//! }
//! println!("{} records, {} problems", report.records, report.problems);
//! # Ok::<(), cairn_replay::ReplayError>(())
//! ```

mod at;
pub mod audit;
pub mod batch;
mod checkout;
mod compare;
mod diff;
mod error;
#[cfg(feature = "run")]
mod fork;
mod listing;
#[cfg(feature = "run")]
mod rerun;
mod session;
mod verify;
#[cfg(feature = "run")]
mod whatif;

pub use at::{At, resolve_at};
pub use checkout::{CheckoutReport, NotRestorable, WithheldFile, checkout};
pub use compare::{Field, FieldDiff, unified};
pub use diff::{CallRef, ChangedCall, DiffReport, FileChange, FileDiff, diff};
pub use error::{ReplayError, Result};
#[cfg(feature = "run")]
pub use fork::{Finding, ForkReport, ResumeOptions, ResumeReport, fork, resume};
pub use listing::{
    FIRST_MESSAGE_CHARS_MAX, SessionRow, TASK_CHARS_MAX, first_message, is_replay, label, summarise,
};
#[cfg(feature = "run")]
pub use rerun::{Divergence, ReplayOptions, ReplayReport, ShellMode, home_of, replay};
pub use session::{Call, FileAt, Session, apply_write, blob_store_of, calls};
pub use verify::{
    Interrupted, Problem, ProblemKind, Report, VerifyOptions, role_of, verify, verify_with,
    verify_with_keys,
};
#[cfg(feature = "run")]
pub use whatif::{WhatIfOptions, WhatIfReport, what_if};
