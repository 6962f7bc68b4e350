//! Colours for text a person reads: only on a terminal, and never when `NO_COLOR` is
//! set to something (https://no-color.org: "when present and not an empty string").
//! Every verb that colours goes through [`Paint`].

use std::ffi::OsStr;
use std::io::IsTerminal;

/// Whether to colour, decided once per output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paint(pub bool);

impl Paint {
    /// Colours when standard output is a terminal and `NO_COLOR` is unset or empty.
    pub fn stdout() -> Paint {
        Paint::when(
            std::io::stdout().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        )
    }

    /// Colours on a terminal when `no_color` (the value of `NO_COLOR`, `None` when it is
    /// unset) is unset or empty.
    pub fn when(terminal: bool, no_color: Option<&OsStr>) -> Paint {
        Paint(terminal && no_color.is_none_or(OsStr::is_empty))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn check(terminal: bool, no_color: Option<&str>, colour: bool) {
        assert_eq!(
            Paint::when(terminal, no_color.map(OsStr::new)),
            Paint(colour),
            "terminal {terminal}, NO_COLOR {no_color:?}"
        );
    }

    /// Guards against the rule `cairn replay` and `diff` had: an empty `NO_COLOR`
    /// turned colours off.
    #[test]
    fn no_color_set_and_not_empty_turns_colours_off() {
        check(true, None, true);
        check(true, Some(""), true);
        check(true, Some("1"), false);
        check(true, Some("0"), false);
        check(false, None, false);
        check(false, Some(""), false);
        check(false, Some("1"), false);
    }
}
