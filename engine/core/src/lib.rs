//! The pure core of cairn's engine: the events of a session, the fold that derives
//! everything the engine knows from them, the limits, and the rules as functions of
//! folded state and the call: [`decide`] (every decision the call path takes and deep
//! verify takes again), [`permission`] needs, what a [`command`] line runs and which
//! keys cover it, redaction, the line diff a write shows, and [`spill`]: the fields of
//! a record too long moved into blobs and put back.
//!
//! Invariant: this crate does no I/O, reads no clock and spawns no process (enforced by
//! `clippy.toml`'s `disallowed-methods` for this crate). Times and ids come from the
//! records, so the live engine and replay reach the same state from the same log.
//!
//! ```
//! use cairn_core::{Event, State};
//! use cairn_core::state::Record;
//! let mut state = State::default();
//! let event = Event::UserMessage {
//!     text: "hello".into(),
//!     text_hash: None,
//!     at: None,
//! };
//! let hash = cairn_store::Hash([0; 32]);
//! state.apply(&Record { seq: 0, ts: "2026-01-01T00:00:00Z".into(), hash, event });
//! assert_eq!(state.last_seq, Some(0));
//! assert_eq!(
//!     state.conversation,
//!     [cairn_core::state::ConversationEntry::User { text: "hello".into() }]
//! );
//! ```

pub mod absent;
pub mod command;
pub mod decide;
pub mod diff;
pub mod event;
pub mod fold;
pub mod limits;
pub mod permission;
pub mod redact;
pub mod schema;
pub mod scrub;
pub mod spill;
pub mod state;

pub use event::Event;
pub use fold::{Folded, Unknown};
pub use limits::Limits;
pub use state::{ConversationEntry, ModelCall, Process, ProcessStatus, Record, State};
