//! cairn's network: the model [`provider`]s (OpenAI-compatible and Anthropic wire
//! formats, streaming, and a recorded provider for replay) and the [`web`] tools' HTTP
//! client with its private-network guard.
//!
//! Invariant: this crate decides no policy. Which host a call may reach is the
//! permission's (`cairn_core::permission`); which addresses are never reached is the
//! guard's, applied on every hop of every fetch.
//!
//! ```no_run
//! use cairn_net::web::{self, WebConfig};
//! let page = web::fetch("https://example.org/", &WebConfig::default());
//! println!("{:?} {}", page.status, page.text);
//! ```

pub mod provider;
pub mod web;

pub use web::HttpWeb;

// Paths the modules name as `crate::…`.
use cairn_core::{event, redact};
use cairn_tools::Result;
