//! write_file (thoth): create a file, overwrite one whose every line was read, or add
//! to the end of one (`append`, which needs no read). An overwrite keeps the file's
//! line endings and byte order mark ([`write::whole`]); one call carries at most
//! `write_call_chars_max` characters, so a long file is written in sections.

use schemars::JsonSchema;
use serde::Deserialize;

use cairn_core::decide;

use crate::error::Result;
use crate::event::WriteOp;
use crate::tool::{Ctx, ToolOutput, TypedTool};
use crate::tools::{create_file, text, write};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Path relative to the workspace root.
    pub path: String,
    /// The whole new content, or the next section when append is true.
    pub content: String,
    /// Add content to the end of the file instead of replacing it; needs no prior
    /// read. A file too long for one call is written in sections: the first normally,
    /// every next one with append true.
    #[serde(default)]
    pub append: bool,
}

pub struct WriteFile;

impl TypedTool for WriteFile {
    type Input = Input;
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "Create a new file. Overwriting an existing file requires having read every line of it; append adds to the end of a file without reading it. A file too long for one call is written in sections: the first normally, every next one with append true. An overwrite keeps the file's line endings.";
    const MUTATING: bool = true;

    /// An append needs no read: the engine records what the file holds, so the log
    /// knows what it is appended to.
    fn observes(&self, input: &Input) -> bool {
        input.append
    }

    fn preview(&self, input: &Input, read: &mut crate::tool::Preview<'_>) -> Option<String> {
        crate::tools::edit_file::write_preview(
            Self::NAME,
            &input.path,
            &input.content,
            input.append,
            read,
        )
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let chars = input.content.chars().count();
        let cap = ctx.limits.write_call_chars_max;
        if chars > cap {
            return Ok(ToolOutput::error(format!(
                "this call carries {chars} characters, and one write_file call may carry {cap} (write_call_chars_max): a file this long does not survive being written in one go, the generation is cut off before the call ends and all of it is lost. Write it in sections: the first, under {cap} characters and ending where the file is still valid, then each next one to the same path with append true"
            )));
        }
        let ws = match ctx.resolve(&input.path) {
            Ok(ws) => ws,
            Err(out) => return Ok(out),
        };
        let cur = match write::current(ctx, &ws) {
            Err(out) => return Ok(out),
            // Appending to a file that is not there creates it.
            Ok(None) => return create_file::create(ctx, &input.path, &input.content),
            Ok(Some(cur)) => cur,
        };
        let op = if input.append {
            WriteOp::Append
        } else {
            WriteOp::Replace
        };
        // The rule's own message: verify takes the refusal again and compares it.
        if let Err(refused) =
            decide::write(ctx.state(), op, &ws.rel, Some(&cur.hash), &[]).into_result()
        {
            return Ok(refused.into());
        }
        let after = write::whole(Some(&cur.bytes), &input.content, input.append);
        if after == cur.bytes {
            return Ok(ToolOutput::error(format!(
                "no changes made: {} already has this content",
                ws.rel
            )));
        }
        let summary = if input.append {
            let lines = |b: &[u8]| text::lines(&String::from_utf8_lossy(b)).len();
            format!(
                "appended {} lines to {}, now {} lines ({} bytes)",
                text::lines(&input.content).len(),
                ws.rel,
                lines(&after),
                after.len()
            )
        } else {
            format!("wrote {} ({} bytes)", ws.rel, after.len())
        };
        write::install(ctx, &ws, op, Some(&cur), &after, &summary)
    }
}
