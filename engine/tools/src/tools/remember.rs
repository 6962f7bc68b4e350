//! remember (thoth): save a durable fact to project memory; asks first. Nothing from web
//! pages goes into memory: a fact overlapping a text fetched or searched in this
//! session is refused, with the reason.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::tool::Asking;
use cairn_core::decide;

use crate::event::Event;
use crate::memory::{self, ProjectMemory};
use crate::permission::Need;
use crate::tool::{Ctx, Effects, ToolOutput, TypedTool};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The fact to keep for later sessions of this project, in your own words.
    pub fact: String,
}

pub struct Remember;

impl TypedTool for Remember {
    type Input = Input;
    const NAME: &'static str = "remember";
    const DESCRIPTION: &'static str = "Save a durable fact to project memory (asks first). Nothing from web pages goes into memory: text that repeats what a fetch or search returned is refused.";
    const MUTATING: bool = false;
    const EFFECTS: Effects = Effects {
        remembers: true,
        ..Effects::NONE
    };

    fn permission(&self, input: &Input, _raw: &serde_json::Value, _at: &Asking<'_>) -> Need {
        Need::ask(
            Self::NAME,
            format!("remember for this project: {}", input.fact),
        )
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        // Memory outlives the session and goes into every later system prompt: it
        // keeps the fact as the user was shown it, secrets redacted.
        let redacted = ctx
            .redactor
            .redact(input.fact.trim(), &mut Default::default())
            .into_owned();
        let fact = redacted.as_str();
        if fact.is_empty() {
            return Ok(ToolOutput::error("fact is empty"));
        }
        if fact.chars().count() > memory::FACT_CHARS_MAX {
            return Ok(ToolOutput::error(format!(
                "fact of {} characters is over {} characters: keep one short fact per call",
                fact.chars().count(),
                memory::FACT_CHARS_MAX
            )));
        }
        let texts = ctx.state().web_texts.iter().filter_map(|h| {
            let hash = cairn_store::Hash(*h);
            let bytes = ctx.read_blob(&hash)?;
            Some((hash, String::from_utf8_lossy(&bytes).into_owned()))
        });
        if let Err(refused) = decide::web_to_memory(fact, texts).into_result() {
            return Ok(refused.into());
        }
        ProjectMemory::new(ctx.project_dir).remember(fact, ctx.session, &ctx.call)?;
        ctx.record(Event::MemoryWritten {
            text: fact.to_string(),
        })?;
        Ok(ToolOutput::ok(format!(
            "remembered for this project: {fact}"
        )))
    }
}
