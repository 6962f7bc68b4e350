//! Permission needs: which calls ask first and under which key. Pure functions of the
//! call; who answers and the allow list live in the engine.
//!
//! A call either runs at once (`Need::Auto`) or needs an answer for a key: the program
//! for a shell command (`shell:git`), the host for a fetch (`web_fetch:example.org`),
//! the tool for a write (`edit_file`), or `tool@folder` for a path outside the
//! workspace. Guarded command lines (destructive git operations, `rm -rf` of the
//! workspace or home) always ask, even when allowed.

use crate::command::Analysis;

/// What a call needs before it may act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    Auto,
    Ask {
        /// The question's name: `edit_file`, `web_fetch:example.org`, `read_file@/etc`,
        /// and for a command the keys of its programs (see [`command_key`]).
        key: String,
        /// What is being allowed, in full: the command line, the host, the diff.
        detail: String,
        /// True when the tool says so: asks even when the key is allowed.
        guarded: bool,
        /// For a command: what it runs, which gives the keys an "always" grants and
        /// needs, why none can cover it, and the guarded commands it matches.
        command: Option<Box<Analysis>>,
    },
}

impl Need {
    /// A question for `key` showing `detail`, covered by an "always" for `key`.
    pub fn ask(key: impl Into<String>, detail: impl Into<String>) -> Need {
        Need::Ask {
            key: key.into(),
            detail: detail.into(),
            guarded: false,
            command: None,
        }
    }
}

/// The question's name for a command running `keys`: the keys joined by spaces
/// (`shell:cargo shell:tail`), or `shell` when the line runs no program.
pub fn command_key(keys: &[String]) -> String {
    if keys.is_empty() {
        "shell".to_string()
    } else {
        keys.join(" ")
    }
}

/// What a command needs: a question for every program it runs, showing the whole line
/// and `context` (where, in the background).
pub fn shell_need(analysis: Analysis, context: &str) -> Need {
    Need::Ask {
        key: command_key(&analysis.keys),
        detail: format!("{}{context}", analysis.line),
        guarded: false,
        command: Some(Box::new(analysis)),
    }
}

/// True for files that usually hold credentials (`.env*`, `*.pem`, `*.key`, `id_rsa`…):
/// reading one asks first, as thoth does.
pub fn credential_like(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with(".env")
        || name.ends_with(".pem")
        || name.ends_with(".key")
        || name.starts_with("id_rsa")
        || name.starts_with("id_ed25519")
        || name.starts_with("id_ecdsa")
}

/// What a read of `path` needs: auto, or a question for a credential-like file.
pub fn read_need(tool: &str, path: &str) -> Need {
    if credential_like(path) {
        Need::ask(
            format!("read_credentials:{}", crate::state::normalise_rel(path)),
            format!("{tool} wants to read {path}, which looks like a credentials file"),
        )
    } else {
        Need::Auto
    }
}

/// The guarded command patterns of sessions recorded before [`crate::command::guard`]
/// rules; [`crate::command::upgrade_guards`] turns them into today's default rules.
pub fn default_guarded() -> Vec<String> {
    [
        r"\bgit\s+push\b.*(\s--force\b|\s-f\b|\s--force-with-lease\b)",
        r"\bgit\s+reset\s+--hard\b",
        r"\bgit\s+clean\s+-[a-zA-Z]*(f[a-zA-Z]*d|d[a-zA-Z]*f)",
        r"\bgit\s+checkout\s+--\s+\.",
        r"\brm\s+-[a-zA-Z]*[rR][a-zA-Z]*\s+(-[a-zA-Z]+\s+)*(/|~|\$HOME|\.|\./|\*)\s*$",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}
