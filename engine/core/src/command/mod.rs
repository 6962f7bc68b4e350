//! What a command line will run, and so which permission keys an "always" needs.
//!
//! A `shell` line is parsed with tree-sitter's bash grammar (the one Codex uses for its
//! safe-command check) into simple commands joined by `;`, `&&`, `||`, `|`, `&` and
//! newlines. Each simple command is keyed `shell:<program>`; programs that run other
//! programs (`env`, `xargs`, `find -exec`, `sudo`, …) are keyed by what they run as well,
//! and an interpreter given inline code gets its own key (`shell:python3 -c`). Anything
//! the keys cannot describe — substitutions, `eval`, nested shells, functions, writes
//! outside the workspace, … — is a [`Reason`]: such a line asks every time and is never
//! [`covered`] by an "always". Guarded commands ([`guard`]) are matched on the parsed
//! argv, so respelling one does not slip past.
//!
//! Pure: the analysis reads no file, environment or clock. The workspace root is given;
//! paths are resolved lexically (symlinks are the sandbox's concern, not the key's).
//!
//! ```
//! use std::collections::BTreeSet;
//! use cairn_core::command::{analyse, covered, Reason};
//! let a = analyse("cargo fmt && cargo test 2>&1 | tail -n 20", "/work/p");
//! assert_eq!(a.keys, ["shell:cargo", "shell:tail"]);
//! let allowed: BTreeSet<String> = ["shell:cargo", "shell:tail"].map(String::from).into();
//! assert!(covered(&a, &allowed));
//! let b = analyse("echo $(touch pwned)", "/work/p");
//! assert_eq!(b.reasons, [Reason::CommandSubstitution]);
//! assert!(!covered(&b, &allowed));
//! ```

pub mod guard;
mod parse;
mod paths;
mod programs;
mod scan;
pub mod table;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

pub use guard::{Guard, GuardRule, default_guards, guarded, upgrade_guards};
pub use parse::runs_git;

/// What a command line runs, as far as its text tells.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Analysis {
    /// The line as shown to the user (for `run_shell`, the argv quoted for `sh`).
    pub line: String,
    /// The workspace root it runs in, normalised.
    pub root: String,
    /// Every command that will run, in the order of the line: simple commands, and
    /// what wrappers, `find -exec`, nested shells and substitutions run.
    pub commands: Vec<Command>,
    /// The permission keys of the commands, each once, in order of appearance.
    pub keys: Vec<String>,
    /// Why no "always" can cover the line; empty when the keys describe it.
    pub reasons: Vec<Reason>,
    /// Every file the line writes inside the workspace (redirections and the file
    /// arguments of programs that write, as [`table`] names them), absolute and
    /// normalised, each once. Lexical: a caller that can look at the workspace checks
    /// that no symbolic link leads one of them out (see [`Reason::WritesOutside`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<String>,
}

/// One command that will run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// Its permission key: `shell:git`, `shell:./scripts/x.sh`, `shell:python3 -c`.
    pub key: String,
    /// Its words after quote removal; `argv[0]` is the program as written.
    pub argv: Vec<Word>,
    /// The directory it runs in, when the line tells (the workspace root unless a `cd`
    /// went elsewhere).
    pub cwd: Option<String>,
}

/// One word of a command after quote removal.
///
/// Home in any spelling (`~`, `$HOME`, `${HOME}`, quoted or not) at the start of a word
/// reads `~`, so `"$HOME"/` and `~/` are both `~/`. A word holding an expansion the line
/// does not give (`$X`, `$(…)`, `{a,b}`, `$'\x72'`) is not `known`; its text is then the
/// source text, and a guarded rule treats it as matching anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Word {
    pub text: String,
    pub known: bool,
    /// It holds an unquoted glob character (`*`, `?`, `[`): bash may replace it with
    /// the names of files, so as a program's name or a file written it is not known.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub glob: bool,
}

impl Word {
    /// A literal word (an argv element, which no shell expands).
    pub fn literal(text: &str) -> Word {
        Word {
            text: text.to_string(),
            known: true,
            glob: false,
        }
    }
}

/// Why a line can never be allowed "always": it asks every time, and the prompt says why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", content = "what", rename_all = "snake_case")]
pub enum Reason {
    /// The parser could not parse the whole line.
    Unparsed,
    /// `$(…)` or backticks: a command whose output becomes part of the line.
    CommandSubstitution,
    /// `<(…)` or `>(…)`.
    ProcessSubstitution,
    /// The program's name comes from an expansion (`$CMD`, `$(…)`, `$'\x72m'`).
    DynamicProgram(String),
    /// `eval`, `trap`: text run as commands.
    Eval(String),
    /// `source` or `.`: a file's commands run in this shell.
    Source(String),
    /// `exec` replaces the shell.
    Exec,
    /// A shell given a command string (`sh -c`, `bash -c`, `env -S`, `su -c`, `npx -c`).
    NestedShell(String),
    /// A shell reading commands from its input (`curl … | sh`, `sh <<EOF`, `bash -s`).
    ShellReadsInput(String),
    /// A function definition: its name may shadow a program.
    Function(String),
    /// An assignment to a variable that changes what programs run (`PATH`,
    /// `LD_PRELOAD`, …), or to a command variable (`PAGER`) whose value is not known.
    Assignment(String),
    /// A redirection that writes outside the workspace (or to a place only known when
    /// the line runs).
    WritesOutside(String),
    /// `sudo`, `doas`, `su`, `pkexec`, `run0`: always asks.
    Privilege(String),
    /// A git option or subcommand that runs a command of its own (`-c core.pager=…`,
    /// `--upload-pack`, `rebase --exec`, `submodule foreach`).
    GitRunsCommand(String),
    /// A relative path is used after a `cd` to a directory only known when the line
    /// runs.
    UnknownDirectory,
    /// Wrappers and nested lines go deeper than `COMMAND_NESTING_DEPTH_MAX`.
    TooDeep,
    /// A construct the analysis does not read (tree-sitter's name for it, or the
    /// construct's text): anything not positively understood asks.
    NotUnderstood(String),
    /// An expansion worked out in a way that can run commands or is not plain text:
    /// `${!x}`, `${x@P}`, a subscript or substring with a variable, an operator word
    /// holding quotes, `$`, backquotes or brackets.
    Expansion(String),
    /// Arithmetic on a variable (`$((x))`, `((i++))`, `[[ $x -eq 1 ]]`, `let`, `declare
    /// -i`, `a[i]=…`): bash evaluates a variable's value as arithmetic in turn, and an
    /// array subscript in it runs command substitutions.
    Arithmetic(String),
    /// A builtin given a variable name that is only known when it runs, or that holds a
    /// subscript (`read`, `printf -v`, `unset`, `declare`, `test -v`, `mapfile`,
    /// `declare -n`): bash evaluates the subscript.
    VariableName(String),
    /// Something that makes bash's reading of the line differ from the parse: a carriage
    /// return, a NUL, a line continuation inside a word or a here-document, a here-document
    /// delimiter with quotes or backslashes.
    Ambiguous(String),
    /// A builtin that changes how later commands are found or run (`alias`, `shopt`,
    /// `enable`, `hash -p`, `set -o` of an option the analysis does not know, …).
    Builtin(String),
    /// An option or argument that makes a program run, load or write something else
    /// (`sed 1e`, `tar --to-command`, `sort --compress-program`, `cargo --config`; see
    /// [`table::PROGRAMS`]).
    RunsProgram(String),
    /// An option the analysis does not know, of a program whose options can run or
    /// write something else ([`table::PROGRAMS`]).
    UnknownOption(String),
    /// A file the line writes inside the workspace lies, when the question is asked,
    /// beyond a symbolic link that leads out of it (the path relative to the
    /// workspace). Found by looking at the workspace, not by the analysis: the log
    /// records it, and verify takes it from there for a path the line writes.
    WritesThroughLink(String),
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Unparsed => write!(f, "the line could not be parsed"),
            Reason::CommandSubstitution => {
                write!(f, "it runs a command substitution ($(…) or backticks)")
            }
            Reason::ProcessSubstitution => write!(f, "it runs a process substitution (<(…), >(…))"),
            Reason::DynamicProgram(p) => {
                write!(f, "the program `{p}` is only known when the line runs")
            }
            Reason::Eval(b) => write!(f, "`{b}` runs text as commands"),
            Reason::Source(b) => write!(f, "`{b}` runs the commands of a file in this shell"),
            Reason::Exec => write!(f, "`exec` replaces the shell"),
            Reason::NestedShell(s) => write!(f, "it runs a nested shell (`{s}`)"),
            Reason::ShellReadsInput(s) => write!(f, "`{s}` reads commands from its input"),
            Reason::Function(n) => write!(f, "it defines a function `{n}`"),
            Reason::Assignment(v) => write!(f, "it sets {v}, which changes what programs run"),
            Reason::WritesOutside(t) => write!(f, "it writes to {t}, outside the workspace"),
            Reason::Privilege(p) => write!(f, "`{p}` runs a command as another user"),
            Reason::GitRunsCommand(o) => write!(f, "git runs a command given by `{o}`"),
            Reason::UnknownDirectory => write!(
                f,
                "it uses a relative path after a `cd` to a directory only known when the line runs"
            ),
            Reason::TooDeep => write!(
                f,
                "its commands nest more than {} deep",
                crate::limits::COMMAND_NESTING_DEPTH_MAX
            ),
            Reason::NotUnderstood(what) => {
                write!(f, "the analysis does not understand `{what}`")
            }
            Reason::Expansion(t) => write!(
                f,
                "the expansion `{t}` is only worked out when the line runs, and may run commands"
            ),
            Reason::Arithmetic(t) => write!(
                f,
                "`{t}` evaluates a variable as arithmetic, which can run commands"
            ),
            Reason::VariableName(t) => write!(
                f,
                "`{t}` names a variable only known when it runs, or with a subscript bash evaluates"
            ),
            Reason::Ambiguous(what) => write!(
                f,
                "it holds {what}, which bash may read differently from the analysis"
            ),
            Reason::Builtin(b) => write!(f, "`{b}` changes how later commands are found or run"),
            Reason::RunsProgram(o) => {
                write!(
                    f,
                    "`{o}` makes the program run, load or write something else"
                )
            }
            Reason::WritesThroughLink(p) => write!(
                f,
                "it writes to {p} through a symbolic link that leads outside the workspace"
            ),
            Reason::UnknownOption(o) => write!(
                f,
                "`{o}` is an option the analysis does not know, of a program whose options can run or write others"
            ),
        }
    }
}

/// Analyses a `sh -c` command line run in `workspace_root` (an absolute path).
pub fn analyse(line: &str, workspace_root: &str) -> Analysis {
    let mut walker = parse::Walker::new(workspace_root);
    walker.line(line);
    walker.finish(line.to_string())
}

/// Analyses an argv run without a shell (`run_shell`) in `workspace_root` (in its
/// folder `cwd` when given, relative to the root or absolute): nothing is
/// expanded, `argv[0]` is resolved as the shell would (`/usr/bin/rm` and `rm` are `rm`,
/// a path inside the workspace is its own key), and the wrapper and interpreter rules
/// are those of [`analyse`].
pub fn analyse_argv(argv: &[String], workspace_root: &str, cwd: Option<&str>) -> Analysis {
    let mut walker = parse::Walker::new(workspace_root);
    if let Some(cwd) = cwd {
        walker.cwd = paths::absolute(cwd, walker.cwd.as_deref());
    }
    let words: Vec<Word> = argv.iter().map(|a| Word::literal(a)).collect();
    walker.argv(&words);
    walker.finish(quote_argv(argv))
}

/// True when an "always" for `allowed` covers the line: it runs something, every key is
/// allowed and nothing in it is a [`Reason`]. Guarded commands are apart: see
/// [`guarded`].
pub fn covered(analysis: &Analysis, allowed: &BTreeSet<String>) -> bool {
    analysis.reasons.is_empty()
        && !analysis.keys.is_empty()
        && analysis.keys.iter().all(|k| allowed.contains(k))
}

/// True when the line only reads: it runs something, every program is one of
/// [`table::READ_ONLY`] (by its bare name), nothing in it is a [`Reason`] and it writes
/// no file. What such a line reads is not judged here.
pub fn read_only(analysis: &Analysis) -> bool {
    analysis.reasons.is_empty()
        && analysis.writes.is_empty()
        && !analysis.commands.is_empty()
        && analysis.keys.iter().all(|k| {
            k.strip_prefix("shell:")
                .is_some_and(|p| table::READ_ONLY.contains(&p))
        })
}

/// An argv as one line `sh` would split back into it: words with spaces or shell
/// characters are single-quoted.
pub fn quote_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty()
                || a.contains(|c: char| c.is_whitespace() || "'\"\\$`|&;<>()*?[]{}~#=!".contains(c))
            {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
