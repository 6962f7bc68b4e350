//! Guarded commands: destructive operations that always ask, whatever is allowed.
//!
//! A rule names a program, the words after its options that must follow it (git's
//! subcommand), how its options are spelled, and what must be present. Each command of
//! an [`Analysis`] (wrapped and nested ones too) is matched on its parsed argv: short
//! options split (`-rf` is `-r -f`), long ones mapped to their short form by `same`,
//! `--` ending options. Rules are data, recorded with the session; in JSON:
//!
//! ```
//! use cairn_core::command::{analyse, guarded, Guard};
//! let rules: Vec<Guard> = serde_json::from_str(r#"[
//!   {"name": "git push --force", "program": "git", "subcommand": ["push"],
//!    "same": [["-f", "--force"]], "when": [["-f", "--force-with-lease", "+*"]]},
//!   "\\bmake\\s+deploy\\b"
//! ]"#).unwrap();
//! let a = analyse("git push origin +main && make deploy", "/work/p");
//! assert_eq!(guarded(&rules, &a), ["git push --force", "\\bmake\\s+deploy\\b"]);
//! ```
//!
//! `when` is a list of groups: every group must match, a group matches when one of its
//! patterns does. A pattern is an option (`-f`, `--hard`, after normalising), an operand
//! class (`<home>`: `~`, `$HOME`, `~/`, `~/*` in any quoting; `<root>`: `/`, `/*`;
//! `<workspace>`: the workspace root or one of its parents, `.`, `..`, `*`, `:/`), or an
//! operand, where a final `*` matches any rest (`+*` is a forced refspec). A word whose
//! value the line does not give (`$DIR`, a path `xargs` or `find -exec` passes) matches
//! every pattern: `rm -rf "$DIR"` asks.
//!
//! A plain string is a regular expression over the line and over each command's words,
//! as sessions recorded before rules existed.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{Analysis, Command, Word, paths};

/// One guarded command: a rule, or a regular expression as older sessions recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Guard {
    Rule(GuardRule),
    /// A regular expression matched against the line and each command's words joined by
    /// spaces (invalid ones match nothing, as before).
    Pattern(String),
}

/// A guarded command matched on parsed argv (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardRule {
    /// What the prompt names: `git push --force`.
    pub name: String,
    /// The program's name (a path's last component): `rm`, `git`.
    pub program: String,
    /// The first operands, in order: git's subcommand (`["push"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subcommand: Vec<String>,
    /// Options whose value is the next word (`-C` in `git -C dir push`), so the value is
    /// not taken for an operand.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub takes_value: Vec<String>,
    /// Spellings of one option; the first is the one `when` names (`["-r", "-R",
    /// "--recursive"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub same: Vec<Vec<String>>,
    /// Groups of patterns: every group must match, one pattern of a group is enough.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<Vec<String>>,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn rule(
    name: &str,
    program: &str,
    subcommand: &[&str],
    same: &[&[&str]],
    when: &[&[&str]],
) -> Guard {
    let takes_value: &[&str] = if program == "git" {
        &[
            "-C",
            "-c",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--config-env",
            "-o",
            "--push-option",
            "--repo",
            "--receive-pack",
            "--exec",
            "-e",
            "--exclude",
            "-b",
            "-B",
            "--orphan",
            "-s",
            "--source",
        ]
    } else {
        &[]
    };
    Guard::Rule(GuardRule {
        name: name.to_string(),
        program: program.to_string(),
        subcommand: strings(subcommand),
        takes_value: strings(takes_value),
        same: same.iter().map(|s| strings(s)).collect(),
        when: when.iter().map(|w| strings(w)).collect(),
    })
}

/// The guarded commands of a new session: `rm -r` of the workspace, home or `/`; a
/// forced or deleting `git push`; `git reset --hard`; `git clean -f -d`; a `git
/// checkout` of the whole tree or a forced one; a `git restore` of the whole tree.
pub fn default_guards() -> Vec<Guard> {
    let whole = &["<workspace>", "<home>", "<root>"];
    vec![
        rule(
            "rm -r of the workspace, home or /",
            "rm",
            &[],
            &[&["-r", "-R", "--recursive"], &["-f", "--force"]],
            &[&["-r"], whole],
        ),
        rule(
            "git push --force",
            "git",
            &["push"],
            &[&["-f", "--force"]],
            &[&["-f", "--force-with-lease", "--mirror", "+*"]],
        ),
        rule(
            "git push --delete",
            "git",
            &["push"],
            &[&["-d", "--delete"]],
            &[&["-d", ":*"]],
        ),
        rule("git reset --hard", "git", &["reset"], &[], &[&["--hard"]]),
        rule(
            "git clean -f -d",
            "git",
            &["clean"],
            &[&["-f", "--force"]],
            &[&["-f"], &["-d"]],
        ),
        rule(
            "git checkout of the whole tree",
            "git",
            &["checkout"],
            &[&["-f", "--force"]],
            &[&["<workspace>", "-f"]],
        ),
        rule(
            "git restore of the whole tree",
            "git",
            &["restore"],
            &[],
            &[&["<workspace>"]],
        ),
    ]
}

/// Guards as a session's configuration recorded them, for today's matching: the
/// regular expressions that were the defaults before rules (`permission::default_guarded`)
/// stand for the defaults, so they become today's default rules; any other guard stays.
pub fn upgrade_guards(guards: &[Guard]) -> Vec<Guard> {
    let old = crate::permission::default_guarded();
    let mut out = Vec::new();
    let mut had_old = false;
    for guard in guards {
        match guard {
            Guard::Pattern(p) if old.contains(p) => had_old = true,
            g => out.push(g.clone()),
        }
    }
    if had_old {
        for d in default_guards() {
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    out
}

/// The names of the guards the line matches (a pattern's name is itself), each once.
pub fn guarded(guards: &[Guard], analysis: &Analysis) -> Vec<String> {
    let mut names = Vec::new();
    for guard in guards {
        let (name, hit) = match guard {
            Guard::Rule(rule) => (
                &rule.name,
                analysis
                    .commands
                    .iter()
                    .any(|c| rule.matches(c, &analysis.root)),
            ),
            Guard::Pattern(p) => (p, pattern_matches(p, analysis)),
        };
        if hit && !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

fn pattern_matches(pattern: &str, analysis: &Analysis) -> bool {
    let Ok(re) = regex::Regex::new(pattern) else {
        return false;
    };
    re.is_match(&analysis.line)
        || analysis.commands.iter().any(|c| {
            let words: Vec<&str> = c.argv.iter().map(|w| w.text.as_str()).collect();
            re.is_match(&words.join(" "))
        })
}

/// A command's arguments as a rule sees them.
struct Normalised {
    options: BTreeSet<String>,
    operands: Vec<Word>,
    /// A word whose value the line does not give: it could be any option or operand.
    unknown: bool,
}

impl GuardRule {
    /// True when the command is this guarded command.
    pub fn matches(&self, command: &Command, root: &str) -> bool {
        let Some(first) = command.argv.first() else {
            return false;
        };
        if paths::basename(&first.text) != self.program {
            return false;
        }
        let n = self.normalise(&command.argv[1..]);
        for (i, sub) in self.subcommand.iter().enumerate() {
            match n.operands.get(i) {
                Some(w) if !w.known || w.text == *sub => {}
                _ => return false,
            }
        }
        let operands = &n.operands[self.subcommand.len().min(n.operands.len())..];
        let cwd = command.cwd.as_deref();
        self.when.iter().all(|group| {
            n.unknown
                || group.iter().any(|p| {
                    if p.starts_with('<') {
                        operands.iter().any(|w| class(p, &w.text, cwd, root))
                    } else if p.starts_with('-') {
                        n.options.contains(p)
                    } else {
                        operands.iter().any(|w| operand(p, &w.text))
                    }
                })
        })
    }

    fn canonical(&self, option: &str) -> String {
        self.same
            .iter()
            .find(|spellings| spellings.iter().any(|s| s == option))
            .and_then(|spellings| spellings.first())
            .map_or_else(|| option.to_string(), String::clone)
    }

    fn normalise(&self, args: &[Word]) -> Normalised {
        let mut n = Normalised {
            options: BTreeSet::new(),
            operands: Vec::new(),
            unknown: false,
        };
        let takes_value = |o: &str| self.takes_value.iter().any(|t| t == o);
        let mut ended = false;
        let mut i = 0;
        while i < args.len() {
            let w = &args[i];
            let t = w.text.as_str();
            if !w.known {
                n.unknown = true;
                n.operands.push(w.clone());
            } else if ended || t == "-" || !t.starts_with('-') {
                n.operands.push(w.clone());
            } else if t == "--" {
                ended = true;
            } else if t.starts_with("--") {
                let name = t.split('=').next().unwrap_or(t);
                n.options.insert(self.canonical(name));
                if !t.contains('=') && takes_value(name) {
                    i += 1;
                }
            } else {
                let cluster = &t[1..];
                for (at, c) in cluster.char_indices() {
                    let name = format!("-{c}");
                    n.options.insert(self.canonical(&name));
                    if takes_value(&name) {
                        if at + c.len_utf8() == cluster.len() {
                            i += 1;
                        }
                        break;
                    }
                }
            }
            i += 1;
        }
        n
    }
}

/// An operand pattern: literal, or a prefix when it ends in `*`.
fn operand(pattern: &str, text: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => text.starts_with(prefix),
        None => text == pattern,
    }
}

/// A path without the glob components at its end: `~/*` is `~`, `/*` is `/`, `*` is `.`.
fn without_globs(text: &str) -> String {
    let absolute = text.starts_with('/');
    let mut parts: Vec<&str> = text.split('/').filter(|s| !s.is_empty()).collect();
    while parts.last().is_some_and(|s| matches!(*s, "*" | ".*" | ".")) {
        parts.pop();
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

fn class(class: &str, text: &str, cwd: Option<&str>, root: &str) -> bool {
    match class {
        "<home>" => {
            text.starts_with('~')
                && text
                    .split('/')
                    .skip(1)
                    .all(|s| matches!(s, "" | "." | ".." | "*" | ".*"))
        }
        "<root>" => {
            text.starts_with('/')
                && paths::absolute(&without_globs(text), None).as_deref() == Some("/")
        }
        "<workspace>" => {
            if text.starts_with('~') {
                return false;
            }
            if let Some(rest) = text.strip_prefix(":/") {
                return matches!(rest, "" | "*" | ".");
            }
            let path = without_globs(text);
            match paths::absolute(&path, cwd) {
                Some(p) => paths::holds(&p, root),
                None => path.split('/').all(|s| matches!(s, "." | "..")),
            }
        }
        _ => false,
    }
}
