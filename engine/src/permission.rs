//! Permissions: which calls ask first, who answers, and the per-project allow list.
//!
//! A call either runs at once (`Need::Auto`) or needs an answer for a key: the program
//! for a shell command (`shell:git`), the host for a fetch (`web_fetch:example.org`),
//! the tool for a write (`edit_file`), or `tool@folder` for a path outside the
//! workspace. "Always" is scoped to that key. Guarded command lines (destructive git
//! operations, `rm -rf` of the workspace or home) always ask, even when allowed.
//!
//! The allow list outlives sessions: a hash-chained project log (the store's format)
//! records grants and resets; `allow.json` is its projection, rewritten atomically and
//! rebuilt from the log when missing or edited by hand. A grant is honoured only when
//! the session it names recorded the "always" answer behind it ([`AllowList::audit`]).

use crate::event::Answer;
pub use allow::{AllowList, Audit, Grant, RefusedGrant, Unproven};
pub use cairn_core::permission::*;

mod allow;

/// A question to whoever answers permission requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub call: String,
    pub tool: String,
    pub key: String,
    pub detail: String,
    pub guarded: bool,
}

/// Answers permission requests (a terminal prompt, a policy, a script).
pub trait Approver: Send {
    /// The answer, and whether a person gave it (`true`) or a policy did.
    fn answer(&mut self, request: &Request) -> (Answer, bool);
}

/// A fixed policy: `--approve always` or `--approve never`, or the library default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Every request allowed once (nothing is added to the allow list).
    AllowAll,
    /// Every request denied.
    DenyAll,
    /// Everything inside the workspace allowed once; nothing outside it (`tool@dir`
    /// keys denied, so the call runs confined). The engine's default.
    Workspace,
}

impl Approver for Policy {
    fn answer(&mut self, r: &Request) -> (Answer, bool) {
        match self {
            Policy::AllowAll => (Answer::Once, false),
            Policy::DenyAll => (Answer::Deny, false),
            Policy::Workspace if r.key.starts_with(&format!("{}@", r.tool)) => {
                (Answer::Deny, false)
            }
            Policy::Workspace => (Answer::Once, false),
        }
    }
}
