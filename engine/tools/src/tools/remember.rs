//! remember (thoth): save a durable fact to project memory; asks first. Nothing from web
//! pages goes into memory: a fact overlapping a text fetched or searched in this
//! session is refused, with the reason.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::event::{Event, Rule};
use crate::memory::{self, ProjectMemory};
use crate::permission::Need;
use crate::tool::{Ctx, ToolOutput, TypedTool};

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

    fn permission(&self, input: &Input, _raw: &serde_json::Value) -> Need {
        Need::Ask {
            key: Self::NAME.to_string(),
            detail: format!("remember for this project: {}", input.fact),
            guarded: false,
        }
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let fact = input.fact.trim();
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
        for hash in ctx.state().web_texts.clone() {
            let Some(bytes) = ctx.read_blob(&cairn_store::Hash(hash)) else {
                continue;
            };
            let (shared, total) = memory::overlap(fact, &String::from_utf8_lossy(&bytes));
            if memory::too_close((shared, total)) {
                return Ok(ToolOutput::refused(
                    Rule::WebToMemory,
                    None,
                    Some(cairn_store::Hash(hash)),
                    format!(
                        "refused: this fact repeats text fetched from the web in this session ({shared} of its {total} {}-word phrases appear in a fetched page); nothing from web pages goes into memory. Keep facts you established from the workspace or the user, in your own words",
                        memory::SHINGLE_WORDS
                    ),
                ));
            }
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
