//! create_file (thndrs): a new file with full content; never overwrites.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::event::WriteOp;
use crate::tool::{Ctx, ToolOutput, TypedTool};
use crate::tools::write;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Path relative to the workspace root.
    pub path: String,
    /// Full file content.
    pub content: String,
}

pub struct CreateFile;

impl TypedTool for CreateFile {
    type Input = Input;
    const NAME: &'static str = "create_file";
    const DESCRIPTION: &'static str = "Create a new file with full content. Fails if the file already exists; creates parent directories when needed; a failed create leaves no partial target.";
    const MUTATING: bool = true;

    /// The new file's content; none when the file exists (the call is refused).
    fn preview(&self, input: &Input, read: &mut crate::tool::Preview<'_>) -> Option<String> {
        if read(&input.path)?.is_some() {
            return None;
        }
        crate::tools::edit_file::write_preview(Self::NAME, &input.path, &input.content, false, read)
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        create(ctx, &input.path, &input.content)
    }
}

/// Creates `path` with `content`, refusing to overwrite.
pub fn create(ctx: &mut Ctx<'_>, path: &str, content: &str) -> Result<ToolOutput> {
    let ws = match ctx.resolve(path) {
        Ok(ws) => ws,
        Err(out) => return Ok(out),
    };
    match write::current(ctx, &ws) {
        Err(out) => return Ok(out),
        Ok(Some(_)) => {
            return Ok(ToolOutput::error(format!(
                "{} already exists; create_file never overwrites (edit it, or replace it after reading it)",
                ws.rel
            )));
        }
        Ok(None) => {}
    }
    let summary = format!("created {} ({} bytes)", ws.rel, content.len());
    write::install(
        ctx,
        &ws,
        WriteOp::Create,
        None,
        content.as_bytes(),
        &summary,
    )
}
