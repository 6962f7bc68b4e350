//! edit_file (thoth): exact string replacement in a file the agent has read.

use schemars::JsonSchema;
use serde::Deserialize;

use cairn_core::decide;

use crate::error::Result;
use crate::event::WriteOp;
use crate::tool::Asking;
use crate::tool::{Ctx, ToolOutput, TypedTool};
use crate::tools::write;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Path relative to the workspace root.
    pub path: String,
    /// Exact text to replace.
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

pub struct EditFile;

impl TypedTool for EditFile {
    type Input = Input;
    const NAME: &'static str = "edit_file";
    const DESCRIPTION: &'static str = "Exact string replacement in a file. Rejected unless the file was read first (at its current content).";
    const MUTATING: bool = true;

    fn permission(
        &self,
        input: &Input,
        _raw: &serde_json::Value,
        _at: &Asking<'_>,
    ) -> crate::permission::Need {
        edit_need(
            Self::NAME,
            &input.path,
            &input.old_string,
            &input.new_string,
        )
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        edit(
            ctx,
            &input.path,
            &input.old_string,
            &input.new_string,
            input.replace_all,
            None,
            write::Offers::ReplaceAll,
        )
    }
}

/// What an edit asks: the tool's key, showing the change as a diff.
pub fn edit_need(tool: &str, path: &str, old: &str, new: &str) -> crate::permission::Need {
    crate::permission::Need::ask(
        tool,
        format!(
            "{tool} {path}:\n{}",
            crate::diff::unified(path, Some(old), new, 120)
        ),
    )
}

/// The edit both catalogs share. `expected` is the `expected_before_hash` guard of a
/// call that carries one; `offers` what the calling tool offers besides (for the hints
/// of its refusals).
pub fn edit(
    ctx: &mut Ctx<'_>,
    path: &str,
    old: &str,
    new: &str,
    all: bool,
    expected: Option<&str>,
    offers: write::Offers,
) -> Result<ToolOutput> {
    let ws = match ctx.resolve(path) {
        Ok(ws) => ws,
        Err(out) => return Ok(out),
    };
    let cur = match write::current(ctx, &ws) {
        Err(out) => return Ok(out),
        Ok(None) => return Ok(ctx.not_found("file", &ws.rel, "")),
        Ok(Some(c)) => c,
    };
    let expected: Vec<&str> = expected.into_iter().collect();
    if let Err(refused) = decide::write(
        ctx.state(),
        WriteOp::Edit,
        &ws.rel,
        Some(&cur.hash),
        &expected,
    )
    .into_result()
    {
        return Ok(refused.into());
    }
    let Ok(content) = std::str::from_utf8(&cur.bytes) else {
        return Ok(ToolOutput::error(format!(
            "{} is not valid UTF-8; string edits would corrupt it",
            ws.rel
        )));
    };
    let updated = match write::edit_string(&ws.rel, content, old, new, all, offers) {
        Ok(u) => u,
        Err(out) => return Ok(out),
    };
    let summary = format!("edited {}", ws.rel);
    write::install(
        ctx,
        &ws,
        WriteOp::Edit,
        Some(&cur),
        updated.as_bytes(),
        &summary,
    )
}
