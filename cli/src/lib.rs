//! The parts of the `cairn` command line that tests reach directly: renderings of an
//! audit, the session browser and the live session view (pure state machines drawn
//! with ratatui), colours, and the one-line summaries the verbs share. The binary
//! (`src/main.rs`) parses flags and wires them to the library crates; logic another
//! crate needs lives in those crates, not here.

pub mod browse;
pub mod chat;
pub mod hint;
pub mod hook;
pub mod live_export;
pub mod paint;
pub mod report;
pub mod summary;
pub mod view;
