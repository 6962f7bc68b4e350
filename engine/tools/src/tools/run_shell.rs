//! run_shell (thndrs): a program and its arguments, no shell involved.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::shell::{self, Spec};
use crate::tool::Asking;
use crate::tool::{Ctx, Effects, InputError, TimeoutField, ToolOutput, TypedTool};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
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

pub struct RunShell;

impl TypedTool for RunShell {
    type Input = Input;
    const NAME: &'static str = "run_shell";
    const DESCRIPTION: &'static str = "Run a local program in the workspace and capture stdout, stderr, status, and timing. Output is capped per stream (64 KiB, 200 lines, 512 characters a line); the whole output is kept. Files the command changes must be read again before editing.";
    const MUTATING: bool = true;
    const EFFECTS: Effects = Effects {
        runs_commands: true,
        command_output: true,
        timeout: Some(TimeoutField::MS),
        background: Some("background"),
        cwd: Some("cwd"),
        ..Effects::NONE
    };

    fn permission(
        &self,
        input: &Input,
        _raw: &serde_json::Value,
        at: &Asking<'_>,
    ) -> crate::permission::Need {
        let mut analysis = cairn_core::command::analyse_argv(
            &input.argv,
            &at.root.to_string_lossy(),
            input.cwd.as_deref(),
        );
        crate::links::confirm_writes(&mut analysis, at.root, at.links);
        let mut context = String::new();
        if let Some(cwd) = &input.cwd {
            context.push_str(&format!("\n(in {cwd})"));
        }
        if input.background {
            context.push_str("\n(in the background)");
        }
        crate::permission::shell_need(analysis, &context)
    }

    fn check(&self, input: &Input) -> std::result::Result<(), InputError> {
        shell::check(
            &input.argv,
            input.timeout_ms,
            TimeoutField::MS,
            input.background,
        )
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        shell::run(
            ctx,
            Spec {
                argv: input.argv,
                cwd: input.cwd,
                timeout_ms: input.timeout_ms,
                timeout_field: TimeoutField::MS,
                background: input.background,
            },
        )
    }
}
