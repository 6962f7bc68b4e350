//! read_file (thoth): a file with line numbers, `offset`/`limit` for big files.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::tool::Asking;
use crate::tool::{Ctx, Effects, ToolOutput, TypedTool};
use crate::tools::text;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Path relative to the workspace root.
    pub path: String,
    /// First line to read, 1-based (default 1).
    pub offset: Option<u32>,
    /// Number of lines to read (default and maximum 600).
    pub limit: Option<u32>,
}

pub struct ReadFile;

impl TypedTool for ReadFile {
    type Input = Input;
    const NAME: &'static str = "read_file";
    const DESCRIPTION: &'static str = "Read a file with line numbers; use offset/limit for big files. Refuses files over 2 MB: use grep instead.";
    const MUTATING: bool = false;
    const EFFECTS: Effects = Effects {
        reads_file: true,
        ..Effects::NONE
    };

    fn permission(
        &self,
        input: &Input,
        _raw: &serde_json::Value,
        at: &Asking<'_>,
    ) -> crate::permission::Need {
        crate::permission::read_need(Self::NAME, &input.path, at.credential_files)
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let file = match text::load(
            ctx,
            &input.path,
            "use grep to find the lines you need, then read with offset/limit",
        ) {
            Ok(f) => f,
            Err(out) => return Ok(out),
        };
        let first = input.offset.unwrap_or(1).max(1);
        if input.limit == Some(0) {
            return Ok(ToolOutput::error("limit must be at least 1"));
        }
        let limit = input
            .limit
            .unwrap_or(ctx.limits.read_lines_max)
            .min(ctx.limits.read_lines_max);
        if file.total_lines > 0 && first > file.total_lines {
            return Ok(ToolOutput::error(format!(
                "offset {first} is past the end of {} ({} lines)",
                file.ws.rel, file.total_lines
            )));
        }
        let last = first.saturating_add(limit - 1);
        let (answer, shown) = text::answer(
            &file,
            first,
            last,
            ctx.limits.line_chars_max,
            ctx.limits,
            |next| format!("read on with offset={next}"),
            None,
        );
        ctx.record_read(
            &file.ws.rel,
            shown.into_iter().collect(),
            file.total_lines,
            file.hash,
        )?;
        Ok(ToolOutput::ok(answer))
    }
}
