//! run_shell (thndrs) and shell (thoth): a command run in the workspace. One tool, each
//! catalogue taking the command in its own input, named and described in its own
//! words ([`Form`]): thndrs a program and its arguments, no shell involved; thoth a
//! command line run by `sh -c`, its timeout `timeout_secs`, in seconds, as thoth's own
//! schema has it.

use std::marker::PhantomData;

use cairn_core::command::Analysis;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::shell::{self, Spec};
use crate::tool::Asking;
use crate::tool::{Ctx, Effects, InputError, TimeoutField, ToolOutput, TypedTool};

/// How a catalogue takes a command: its input, names and rules.
pub trait Form: 'static {
    type Input: DeserializeOwned + JsonSchema;
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    /// The input field the timeout is given in.
    const TIMEOUT: TimeoutField;
    /// The input field naming the folder the command runs in, when there is one.
    const CWD: Option<&'static str>;
    /// What the command runs, as its permission is decided on.
    fn analyse(input: &Self::Input, root: &str) -> Analysis;
    /// The folder the command runs in (default: the root) and whether it runs in the
    /// background: what its question says besides the command.
    fn place(input: &Self::Input) -> (Option<&str>, bool);
    /// What the input must be beyond its schema.
    fn check(input: &Self::Input) -> std::result::Result<(), InputError>;
    /// What is run.
    fn spec(input: Self::Input) -> Spec;
}

/// thndrs' `run_shell`.
pub type RunShell = Command<Argv>;
/// thoth's `shell`.
pub type Shell = Command<Line>;

/// A command tool taking its command as `F` has it.
pub struct Command<F>(PhantomData<fn() -> F>);

impl<F> Command<F> {
    pub const fn new() -> Command<F> {
        Command(PhantomData)
    }
}

impl<F> Default for Command<F> {
    fn default() -> Command<F> {
        Command::new()
    }
}

impl<F: Form> TypedTool for Command<F> {
    type Input = F::Input;
    const NAME: &'static str = F::NAME;
    const DESCRIPTION: &'static str = F::DESCRIPTION;
    const MUTATING: bool = true;
    const EFFECTS: Effects = Effects {
        runs_commands: true,
        command_output: true,
        timeout: Some(F::TIMEOUT),
        background: Some("background"),
        cwd: F::CWD,
        ..Effects::NONE
    };

    fn permission(
        &self,
        input: &F::Input,
        _raw: &serde_json::Value,
        at: &Asking<'_>,
    ) -> crate::permission::Need {
        let mut analysis = F::analyse(input, &at.root.to_string_lossy());
        crate::links::confirm_writes(&mut analysis, at.root, at.links);
        let (cwd, background) = F::place(input);
        let mut context = String::new();
        if let Some(cwd) = cwd {
            context.push_str(&format!("\n(in {cwd})"));
        }
        if background {
            context.push_str("\n(in the background)");
        }
        crate::permission::shell_need(analysis, &context)
    }

    fn check(&self, input: &F::Input) -> std::result::Result<(), InputError> {
        F::check(input)
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: F::Input) -> Result<ToolOutput> {
        shell::run(ctx, F::spec(input))
    }
}

/// thndrs' form: a program and its arguments.
pub struct Argv;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArgvInput {
    /// Non-empty array: the program followed by its arguments (no shell: pipes, globs
    /// and quotes are not interpreted).
    pub argv: Vec<String>,
    /// Working directory relative to the workspace root (default: the root).
    pub cwd: Option<String>,
    /// Timeout in milliseconds (default 120000, at most 600000); the whole process
    /// group is killed when it runs out.
    pub timeout_ms: Option<u64>,
    /// Start a long-lived process and return at once with its process id and the path
    /// of its log file.
    #[serde(default)]
    pub background: bool,
}

impl Form for Argv {
    type Input = ArgvInput;
    const NAME: &'static str = "run_shell";
    const DESCRIPTION: &'static str = "Run a local program in the workspace and capture stdout, stderr, status, and timing. Output is capped per stream (64 KiB, 200 lines, 512 characters a line); the whole output is kept. Files the command changes must be read again before editing.";
    const TIMEOUT: TimeoutField = TimeoutField::MS;
    const CWD: Option<&'static str> = Some("cwd");

    fn analyse(input: &ArgvInput, root: &str) -> Analysis {
        cairn_core::command::analyse_argv(&input.argv, root, input.cwd.as_deref())
    }

    fn place(input: &ArgvInput) -> (Option<&str>, bool) {
        (input.cwd.as_deref(), input.background)
    }

    fn check(input: &ArgvInput) -> std::result::Result<(), InputError> {
        shell::check(
            &input.argv,
            input.timeout_ms,
            Self::TIMEOUT,
            input.background,
        )
    }

    fn spec(input: ArgvInput) -> Spec {
        Spec {
            argv: input.argv,
            cwd: input.cwd,
            timeout_ms: input.timeout_ms,
            timeout_field: Self::TIMEOUT,
            background: input.background,
        }
    }
}

/// thoth's form: a command line run by `sh -c`.
pub struct Line;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LineInput {
    /// The command line, run by `sh -c` in the workspace root.
    pub command: String,
    /// Foreground timeout in seconds: 120 by default, 600 at most (more is cut to
    /// 600); the whole process group is killed when it runs out. Raise it for slow
    /// builds.
    pub timeout_secs: Option<u64>,
    /// cairn's earlier millisecond field, still read so that sessions recorded before
    /// `timeout_secs` verify and replay as they ran; not offered in the schema.
    #[schemars(skip)]
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Start a server or watcher and return at once with its pid and the path of its
    /// log file instead of waiting.
    #[serde(default)]
    pub background: bool,
}

impl Form for Line {
    type Input = LineInput;
    const NAME: &'static str = "shell";
    const DESCRIPTION: &'static str = "Run a command with sh -c in the workspace. Foreground commands time out after 120 s (timeout_secs raises that to 600 s); servers and watch modes need background=true, which returns a pid and a log file path. Output is capped; files the command changes must be read again before editing.";
    const TIMEOUT: TimeoutField = TimeoutField::SECS;
    const CWD: Option<&'static str> = None;

    fn analyse(input: &LineInput, root: &str) -> Analysis {
        cairn_core::command::analyse(&input.command, root)
    }

    fn place(input: &LineInput) -> (Option<&str>, bool) {
        (None, input.background)
    }

    fn check(input: &LineInput) -> std::result::Result<(), InputError> {
        if input.command.trim().is_empty() {
            return Err(InputError::Rule(
                "the command is empty: give a command line to run".into(),
            ));
        }
        if input.timeout_secs.is_some() && input.timeout_ms.is_some() {
            return Err(InputError::Rule(
                "both timeout_secs and timeout_ms are given: give only timeout_secs".into(),
            ));
        }
        shell::check(
            &["sh".into()],
            line_timeout_ms(input),
            Self::TIMEOUT,
            input.background,
        )
    }

    fn spec(input: LineInput) -> Spec {
        Spec {
            timeout_ms: line_timeout_ms(&input),
            argv: vec!["sh".into(), "-c".into(), input.command],
            cwd: None,
            timeout_field: Self::TIMEOUT,
            background: input.background,
        }
    }
}

/// The timeout a command line asked for, in milliseconds (saturating).
fn line_timeout_ms(input: &LineInput) -> Option<u64> {
    input
        .timeout_secs
        .map(|s| s.saturating_mul(TimeoutField::SECS.unit_ms))
        .or(input.timeout_ms)
}
