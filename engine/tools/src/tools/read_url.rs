//! read_url (thndrs): fetch a public http or https URL and extract readable text.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::permission::Need;
use crate::tool::Asking;
use crate::tool::{Ctx, Effects, Fetches, ToolOutput, TypedTool};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Public URL to fetch (http or https).
    pub url: String,
}

pub struct ReadUrl;

impl TypedTool for ReadUrl {
    type Input = Input;
    const NAME: &'static str = "read_url";
    const DESCRIPTION: &'static str = "Fetch a public http or https URL and extract readable text. Private-network targets, unsupported schemes, binary content, oversized responses, and redirect chains beyond the configured limit are rejected.";
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
