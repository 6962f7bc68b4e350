//! shell (thoth): a command line run by `sh -c`. Its timeout is `timeout_secs`, in
//! seconds, as thoth's own schema has it.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::shell::{self, Spec};
use crate::tool::Asking;
use crate::tool::{Ctx, Effects, InputError, TimeoutField, ToolOutput, TypedTool};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
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

pub struct Shell;

impl TypedTool for Shell {
    type Input = Input;
    const NAME: &'static str = "shell";
    const DESCRIPTION: &'static str = "Run a command with sh -c in the workspace. Foreground commands time out after 120 s (timeout_secs raises that to 600 s); servers and watch modes need background=true, which returns a pid and a log file path. Output is capped; files the command changes must be read again before editing.";
    const MUTATING: bool = true;
    const EFFECTS: Effects = Effects {
        runs_commands: true,
        command_output: true,
        timeout: Some(TimeoutField::SECS),
        background: Some("background"),
        ..Effects::NONE
    };

    fn permission(
        &self,
        input: &Input,
        _raw: &serde_json::Value,
        at: &Asking<'_>,
    ) -> crate::permission::Need {
        let context = if input.background {
            "\n(in the background)"
        } else {
            ""
        };
        let mut analysis = cairn_core::command::analyse(&input.command, &at.root.to_string_lossy());
        crate::links::confirm_writes(&mut analysis, at.root, at.links);
        crate::permission::shell_need(analysis, context)
    }

    fn check(&self, input: &Input) -> std::result::Result<(), InputError> {
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
            timeout_ms(input),
            TimeoutField::SECS,
            input.background,
        )
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let timeout_ms = timeout_ms(&input);
        shell::run(
            ctx,
            Spec {
                argv: vec!["sh".into(), "-c".into(), input.command],
                cwd: None,
                timeout_ms,
                timeout_field: TimeoutField::SECS,
                background: input.background,
            },
        )
    }
}

/// The timeout asked for, in milliseconds (saturating).
fn timeout_ms(input: &Input) -> Option<u64> {
    input
        .timeout_secs
        .map(|s| s.saturating_mul(TimeoutField::SECS.unit_ms))
        .or(input.timeout_ms)
}
