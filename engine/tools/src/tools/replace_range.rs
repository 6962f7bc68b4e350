//! replace_range (thndrs): one unique exact occurrence of a string replaced.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::tool::Asking;
use crate::tool::{Ctx, ToolOutput, TypedTool};
use crate::tools::{edit_file, write};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Path relative to the workspace root.
    pub path: String,
    /// Exact string to find; must occur once.
    pub old_string: String,
    /// Replacement string.
    pub new_string: String,
    /// Optional stale-content guard: the BLAKE3 hash of the current content, as the
    /// read tools report it (`hash:`); the edit is refused when the file no longer has
    /// it.
    pub expected_before_hash: Option<String>,
}

pub struct ReplaceRange;

impl TypedTool for ReplaceRange {
    type Input = Input;
    const NAME: &'static str = "replace_range";
    const DESCRIPTION: &'static str = "Replace one unique exact string occurrence in an existing file. Fails if old_string appears zero or multiple times; failed edits leave the file unchanged.";
    const MUTATING: bool = true;

    fn permission(
        &self,
        input: &Input,
        _raw: &serde_json::Value,
        _at: &Asking<'_>,
    ) -> crate::permission::Need {
        edit_file::edit_need(
            Self::NAME,
            &input.path,
            &input.old_string,
            &input.new_string,
        )
    }

    fn preview(&self, input: &Input, read: &mut crate::tool::Preview<'_>) -> Option<String> {
        edit_file::edit_preview(
            Self::NAME,
            &input.path,
            &input.old_string,
            &input.new_string,
            false,
            read,
        )
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        edit_file::edit(
            ctx,
            &input.path,
            &input.old_string,
            &input.new_string,
            false,
            input.expected_before_hash.as_deref(),
            write::Offers::Unique,
        )
    }
}
