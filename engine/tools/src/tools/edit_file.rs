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

    fn preview(&self, input: &Input, read: &mut crate::tool::Preview<'_>) -> Option<String> {
        edit_preview(
            Self::NAME,
            &input.path,
            &input.old_string,
            &input.new_string,
            input.replace_all,
            read,
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

/// What an edit's prompt shows: the change as a diff of the whole file, with its own
/// line numbers; none when the file cannot be read or the edit would not apply (the
/// call is then refused without asking anything of the file).
pub fn edit_preview(
    tool: &str,
    path: &str,
    old: &str,
    new: &str,
    all: bool,
    read: &mut crate::tool::Preview<'_>,
) -> Option<String> {
    let before = read(path)??;
    let found = if old.is_empty() {
        0
    } else {
        before.matches(old).count()
    };
    let after = match found {
        0 => return None,
        1 => before.replacen(old, new, 1),
        _ if all => before.replace(old, new),
        _ => return None,
    };
    Some(format!(
        "{tool} {path}:\n{}",
        crate::diff::unified(
            path,
            Some(&before),
            &after,
            crate::limits::PREVIEW_DIFF_LINES_MAX
        )
    ))
}

/// What a write's prompt shows: the new content as a diff against the file's current
/// content (all of it added for a new file), with the file's own line numbers.
pub fn write_preview(
    tool: &str,
    path: &str,
    content: &str,
    append: bool,
    read: &mut crate::tool::Preview<'_>,
) -> Option<String> {
    let before = read(path)?;
    let after = match (&before, append) {
        (Some(b), true) => format!("{b}{content}"),
        _ => content.to_string(),
    };
    Some(format!(
        "{tool} {path}{}:\n{}",
        match (&before, append) {
            (None, _) => " (a new file)",
            (Some(_), true) => " (appended)",
            (Some(_), false) => " (replaced)",
        },
        crate::diff::unified(
            path,
            before.as_deref(),
            &after,
            crate::limits::PREVIEW_DIFF_LINES_MAX
        )
    ))
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
