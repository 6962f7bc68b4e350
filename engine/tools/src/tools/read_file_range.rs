//! read_file_range (thndrs): a 1-indexed line range of a file.

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
    /// First line to read (1-indexed).
    pub start_line: u32,
    /// Optional final line (inclusive); about 20 lines are read without it.
    pub end_line: Option<u32>,
}

pub struct ReadFileRange;

impl TypedTool for ReadFileRange {
    type Input = Input;
    const NAME: &'static str = "read_file_range";
    const DESCRIPTION: &'static str =
        "Read a 1-indexed line range from a file. Prefer targeted ranges over reading large files.";
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
        if input.start_line == 0 {
            return Ok(ToolOutput::error(
                "start_line is 1-indexed: the first line is 1",
            ));
        }
        if let Some(end) = input.end_line
            && end < input.start_line
        {
            return Ok(ToolOutput::error(format!(
                "end_line {end} is before start_line {}",
                input.start_line
            )));
        }
        let file = match text::load(
            ctx,
            &input.path,
            "use search_text to find the lines you need",
        ) {
            Ok(f) => f,
            Err(out) => return Ok(out),
        };
        if file.total_lines > 0 && input.start_line > file.total_lines {
            return Ok(ToolOutput::error(format!(
                "start_line {} is past the end of {} ({} lines)",
                input.start_line, file.ws.rel, file.total_lines
            )));
        }
        let max = ctx.limits.read_lines_max;
        let wanted_end = input.end_line.unwrap_or(
            input
                .start_line
                .saturating_add(ctx.limits.read_range_default_lines - 1),
        );
        let last = wanted_end.min(input.start_line.saturating_add(max - 1));
        let cut = (wanted_end.min(file.total_lines) > last)
            .then(|| format!("\n(range cut to read_lines_max = {max} lines)"));
        let (answer, shown) = text::answer(
            &file,
            input.start_line,
            last,
            ctx.limits.line_chars_max,
            ctx.limits,
            |next| format!("read on with start_line={next}"),
            cut,
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
