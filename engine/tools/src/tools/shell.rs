//! shell (thoth): a command line run by `sh -c`.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::shell::{self, Spec};
use crate::tool::Asking;
use crate::tool::{Ctx, Effects, InputError, ToolOutput, TypedTool};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The command line, run by `sh -c` in the workspace root.
    pub command: String,
    /// Timeout in milliseconds: 120000 (120 s) by default, 600000 (600 s) at most; the
    /// whole process group is killed when it runs out.
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
    const DESCRIPTION: &'static str = "Run a command with sh -c in the workspace. Foreground commands time out after 120 s (timeout_ms raises that to 600 s); servers and watch modes need background=true, which returns a pid and a log file path. Output is capped; files the command changes must be read again before editing.";
    const MUTATING: bool = true;
    const EFFECTS: Effects = Effects {
        runs_commands: true,
        command_output: true,
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
        let analysis = cairn_core::command::analyse(&input.command, &at.root.to_string_lossy());
        crate::permission::shell_need(analysis, context)
    }

    fn check(&self, input: &Input) -> std::result::Result<(), InputError> {
        if input.command.trim().is_empty() {
            return Err(InputError::Rule(
                "the command is empty: give a command line to run".into(),
            ));
        }
        shell::check(&["sh".into()], input.timeout_ms, input.background)
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        shell::run(
            ctx,
            Spec {
                argv: vec!["sh".into(), "-c".into(), input.command],
                cwd: None,
                timeout_ms: input.timeout_ms,
                background: input.background,
            },
        )
    }
}
