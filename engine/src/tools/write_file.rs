//! write_file (stub: being written).

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::tool::{Ctx, ToolOutput, TypedTool};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// placeholder
    pub path: String,
}

pub struct WriteFile;

impl TypedTool for WriteFile {
    type Input = Input;
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "stub";
    const MUTATING: bool = true;
    fn run(&self, _ctx: &mut Ctx<'_>, _input: Input) -> Result<ToolOutput> {
        Ok(ToolOutput::error("not yet"))
    }
}
