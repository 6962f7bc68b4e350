//! find_files (stub: being written).

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::tool::{Ctx, ToolOutput, TypedTool};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// placeholder
    pub pattern: Option<String>,
}

pub struct FindFiles;

impl TypedTool for FindFiles {
    type Input = Input;
    const NAME: &'static str = "find_files";
    const DESCRIPTION: &'static str = "stub";
    const MUTATING: bool = false;
    fn run(&self, _ctx: &mut Ctx<'_>, _input: Input) -> Result<ToolOutput> {
        Ok(ToolOutput::error("not yet"))
    }
}
