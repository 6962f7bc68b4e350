//! write_file (thoth): create a file, or overwrite one whose every line was read.

use schemars::JsonSchema;
use serde::Deserialize;

use cairn_core::decide;

use crate::error::Result;
use crate::event::WriteOp;
use crate::tool::{Ctx, ToolOutput, TypedTool};
use crate::tools::{create_file, write};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Path relative to the workspace root.
    pub path: String,
    /// The whole new content.
    pub content: String,
}

pub struct WriteFile;

impl TypedTool for WriteFile {
    type Input = Input;
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str =
        "Create a new file. Overwriting an existing file requires having read every line of it.";
    const MUTATING: bool = true;

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let ws = match ctx.resolve(&input.path) {
            Ok(ws) => ws,
            Err(out) => return Ok(out),
        };
        match write::current(ctx, &ws) {
            Err(out) => Ok(out),
            Ok(None) => create_file::create(ctx, &input.path, &input.content),
            Ok(Some(cur)) => {
                let rules =
                    decide::write(ctx.state(), WriteOp::Replace, &ws.rel, Some(&cur.hash), &[]);
                if let Err(refused) = rules.into_result() {
                    return Ok(refused.into());
                }
                if cur.bytes == input.content.as_bytes() {
                    return Ok(ToolOutput::error(format!(
                        "no changes made: {} already has this content",
                        ws.rel
                    )));
                }
                let summary = format!("wrote {} ({} bytes)", ws.rel, input.content.len());
                write::install(
                    ctx,
                    &ws,
                    WriteOp::Replace,
                    Some(&cur),
                    input.content.as_bytes(),
                    &summary,
                )
            }
        }
    }
}
