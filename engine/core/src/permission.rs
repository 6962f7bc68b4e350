//! Permission needs: which calls ask first and under which key. Pure functions of the
//! call; who answers and the allow list live in the engine.
//!
//! A call either runs at once (`Need::Auto`) or needs an answer for a key: the program
//! for a shell command (`shell:git`), the host for a fetch (`web_fetch:example.org`),
//! the tool for a write (`edit_file`), or `tool@folder` for a path outside the
//! workspace. Guarded command lines (destructive git operations, `rm -rf` of the
//! workspace or home) always ask, even when allowed.

/// What a call needs before it may act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    Auto,
    Ask {
        key: String,
        /// What is being allowed, in full: the command line, the host, the diff.
        detail: String,
        /// True when a guarded pattern matched: asks even when the key is allowed.
        guarded: bool,
    },
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
        Need::Ask {
            key: format!("read_credentials:{}", crate::state::normalise_rel(path)),
            detail: format!("{tool} wants to read {path}, which looks like a credentials file"),
            guarded: false,
        }
    } else {
        Need::Auto
    }
}

/// What a command needs: a question keyed on its program (`shell:git`), showing the
/// whole command line.
pub fn shell_need(program: &str, command_line: &str, context: &str) -> Need {
    let name = std::path::Path::new(program)
        .file_name()
        .map_or(program.to_string(), |n| n.to_string_lossy().into_owned());
    Need::Ask {
        key: format!("shell:{name}"),
        detail: format!("{command_line}{context}"),
        guarded: false,
    }
}

/// The program a `sh -c` command line runs first: its first word that is not a
/// variable assignment. Superseded by [`crate::command::analyse`], which keys every
/// program of the line; kept until the engine asks with its keys.
pub fn first_program(command: &str) -> String {
    command
        .split_whitespace()
        .find(|w| !w.contains('=') || w.starts_with('='))
        .unwrap_or("")
        .to_string()
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

/// True when `command` matches one of the guarded patterns (invalid ones are ignored).
/// Superseded by [`crate::command::guarded`], which matches parsed argv.
pub fn is_guarded(patterns: &[String], command: &str) -> bool {
    // A session keeps one list: compiled once per thread, not once per command (deep
    // verify asks for every shell question of a log).
    thread_local! {
        static COMPILED: std::cell::RefCell<(Vec<String>, Vec<regex::Regex>)> =
            const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    COMPILED.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != patterns {
            let compiled = patterns
                .iter()
                .filter_map(|p| regex::Regex::new(p).ok())
                .collect();
            *c = (patterns.to_vec(), compiled);
        }
        c.1.iter().any(|re| re.is_match(command))
    })
}
