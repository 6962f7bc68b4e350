//! Colours for text a person reads: only on a terminal, and never when `NO_COLOR` is
//! set (https://no-color.org).

use std::io::IsTerminal;

/// Whether to colour, decided once per output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paint(pub bool);

impl Paint {
    /// Colours when standard output is a terminal and `NO_COLOR` is unset or empty.
    pub fn stdout() -> Paint {
        Paint(std::io::stdout().is_terminal() && no_color_unset())
    }

    /// No colours (files, snapshots).
    pub fn plain() -> Paint {
        Paint(false)
    }

    fn wrap(&self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    pub fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }

    pub fn head(&self, s: &str) -> String {
        self.wrap("1;33", s)
    }

    /// A line of `cairn_engine::diff::unified` (`OLD NEW ±text`) or of a plain
    /// unified diff.
    pub fn diff_line(&self, l: &str) -> String {
        if !self.0 {
            return l.to_string();
        }
        let code = if l.starts_with("+++") || l.starts_with("---") {
            "1"
        } else if l.starts_with("@@") {
            "36"
        } else {
            match diff_sign(l) {
                Some('+') => "32",
                Some('-') => "31",
                _ => return l.to_string(),
            }
        };
        self.wrap(code, l)
    }
}

/// The sign of a numbered diff line (`{old:>5} {new:>5} {sign}`), or of a plain one.
pub fn diff_sign(l: &str) -> Option<char> {
    let numbered = l.len() > 12
        && l.is_char_boundary(12)
        && l[..11].chars().all(|c| c.is_ascii_digit() || c == ' ');
    if numbered {
        l[12..].chars().next()
    } else {
        l.chars().next().filter(|c| *c == '+' || *c == '-')
    }
}

/// True when `NO_COLOR` is unset or empty.
pub fn no_color_unset() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
