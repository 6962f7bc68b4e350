//! web_fetch (thoth): fetch a URL as readable text; asks per host.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::permission::Need;
use crate::tool::Asking;
use crate::tool::{Ctx, Effects, Fetches, ToolOutput, TypedTool};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The URL to fetch (http or https, public hosts only).
    pub url: String,
}

pub struct WebFetch;

impl TypedTool for WebFetch {
    type Input = Input;
    const NAME: &'static str = "web_fetch";
    const DESCRIPTION: &'static str = "Fetch a URL as readable text. Asks per host; private-network targets, binary content and oversized pages are refused.";
    const MUTATING: bool = false;
    const EFFECTS: Effects = Effects {
        external: true,
        fetches: Fetches::Page,
        ..Effects::NONE
    };

    fn permission(&self, input: &Input, _raw: &serde_json::Value, _at: &Asking<'_>) -> Need {
        crate::web::fetch_need(Self::NAME, &input.url)
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        crate::web::fetch_for_call(ctx, &input.url)
    }
}
