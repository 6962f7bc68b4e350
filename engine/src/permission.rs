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
    /// Every key an "always" grants (each program of a command line).
    pub keys: Vec<String>,
    /// Why no "always" can cover the call: then only yes or no may be answered.
    pub reasons: Vec<String>,
    /// The guarded commands the line matched.
    pub guards: Vec<String>,
}

impl Request {
    /// True when "always" may be answered: nothing in the call is beyond its keys and
    /// it is not guarded. Otherwise only once or deny.
    pub fn always_offered(&self) -> bool {
        cairn_core::decide::coverable(&self.keys, &self.reasons, self.guarded)
    }

    /// The programs a command line runs (its `shell:` keys without the prefix).
    pub fn programs(&self) -> Vec<&str> {
        self.keys
            .iter()
            .filter_map(|k| k.strip_prefix("shell:"))
            .collect()
    }

    /// What a prompt says above the detail, line by line: who asks for what, the
    /// programs a command runs, what is guarded and why "always" is not offered.
    pub fn headline(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let programs = self.programs();
        if programs.is_empty() {
            lines.push(format!("{} {} asks for {}", self.call, self.tool, self.key));
        } else {
            lines.push(format!(
                "{} {} asks to run {}",
                self.call,
                self.tool,
                programs.join(", ")
            ));
        }
        for g in &self.guards {
            lines.push(format!("guarded ({g}): asks every time, even when allowed"));
        }
        if self.guarded && self.guards.is_empty() {
            lines.push("guarded: asks every time, even when allowed".to_string());
        }
        for r in &self.reasons {
            lines.push(format!("asks every time: {r}"));
        }
        lines
    }

    /// The answers offered, as a prompt shows them.
    pub fn choices(&self) -> String {
        if self.always_offered() {
            format!(
                "[y] once   [a] always ({} from now on)   [n] deny",
                self.keys.join(", ")
            )
        } else {
            "[y] once   [n] deny   (always is not offered for this call)".to_string()
        }
    }
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
