//! read_url (thndrs) and web_fetch (thoth): fetch a public http or https URL as
//! readable text; asks per host. One tool, named and described in each catalogue's
//! own words ([`Names`]).

use std::borrow::Cow;
use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;

use crate::error::Result;
use crate::permission::Need;
use crate::tool::Asking;
use crate::tool::{Ctx, Effects, Fetches, ToolOutput, TypedTool};

/// How a catalogue names and describes the fetch.
pub trait Names: 'static {
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    /// What the schema says of the `url` field.
    const URL: &'static str;
}

/// thndrs' words.
pub struct ReadUrlNames;

impl Names for ReadUrlNames {
    const NAME: &'static str = "read_url";
    const DESCRIPTION: &'static str = "Fetch a public http or https URL and extract readable text. Private-network targets, unsupported schemes, binary content, oversized responses, and redirect chains beyond the configured limit are rejected.";
    const URL: &'static str = "Public URL to fetch (http or https).";
}

/// thoth's words.
pub struct WebFetchNames;

impl Names for WebFetchNames {
    const NAME: &'static str = "web_fetch";
    const DESCRIPTION: &'static str = "Fetch a URL as readable text. Asks per host; private-network targets, binary content and oversized pages are refused.";
    const URL: &'static str = "The URL to fetch (http or https, public hosts only).";
}

/// thndrs' `read_url`.
pub type ReadUrl = Fetch<ReadUrlNames>;
/// thoth's `web_fetch`.
pub type WebFetch = Fetch<WebFetchNames>;

/// The fetch, as `N` names it.
pub struct Fetch<N>(PhantomData<fn() -> N>);

impl<N> Fetch<N> {
    pub const fn new() -> Fetch<N> {
        Fetch(PhantomData)
    }
}

impl<N> Default for Fetch<N> {
    fn default() -> Fetch<N> {
        Fetch::new()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input<N> {
    pub url: String,
    #[serde(skip)]
    names: PhantomData<fn() -> N>,
}

/// The schema a derive gives a struct of one documented `url` string, in `N`'s words.
impl<N: Names> JsonSchema for Input<N> {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Input")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "properties": {
                "url": {
                    "description": N::URL,
                    "type": "string"
                }
            },
            "additionalProperties": false,
            "required": ["url"]
        })
    }
}

impl<N: Names> TypedTool for Fetch<N> {
    type Input = Input<N>;
    const NAME: &'static str = N::NAME;
    const DESCRIPTION: &'static str = N::DESCRIPTION;
    const MUTATING: bool = false;
    const EFFECTS: Effects = Effects {
        external: true,
        fetches: Fetches::Page,
        ..Effects::NONE
    };

    fn permission(&self, input: &Input<N>, _raw: &serde_json::Value, _at: &Asking<'_>) -> Need {
        crate::web::fetch_need(Self::NAME, &input.url)
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input<N>) -> Result<ToolOutput> {
        crate::web::fetch_for_call(ctx, &input.url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::Tool;

    // thndrs' input as a derive writes its schema.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Derived {
        /// Public URL to fetch (http or https).
        url: String,
    }

    // Guards against the hand-written schema of the shared fetch drifting from the one
    // a derive gives (what each catalogue offered before the twins were one tool).
    #[test]
    fn the_fetch_schema_is_the_one_a_derive_gives_in_each_catalogues_words() {
        let mut derived = serde_json::to_value(schemars::schema_for!(Derived)).unwrap();
        let map = derived.as_object_mut().unwrap();
        map.remove("$schema");
        map.remove("title");
        assert_eq!(ReadUrl::new().schema().to_string(), derived.to_string());
        derived["properties"]["url"]["description"] = WebFetchNames::URL.into();
        assert_eq!(WebFetch::new().schema().to_string(), derived.to_string());
        assert_ne!(ReadUrlNames::URL, WebFetchNames::URL);
        let e = WebFetch::new()
            .validate(&serde_json::json!({"url": "https://a.example", "x": 1}))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid input for web_fetch: field `x`: unknown field `x`, expected `url`"
        );
    }
}
