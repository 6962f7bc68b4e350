//! The recorded provider: answers with a session's `model_turn` events, in order. Replay
//! uses it to run a session again without the model; tests use it to check that a
//! session's turns are reproduced.

use std::path::Path;

use super::{Provider, ProviderError, Request, ToolCall, Turn, Usage};
use crate::event::Event;

/// Turns read from a recording.
#[derive(Debug, Clone)]
pub struct Recorded {
    provider: String,
    model: String,
    turns: Vec<Turn>,
    next: usize,
}

impl Recorded {
    /// The model turns of a list of events.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Recorded {
        let mut r = Recorded {
            provider: "recorded".into(),
            model: String::new(),
            turns: Vec::new(),
            next: 0,
        };
        for e in events {
            if let Some((provider, model, turn)) = turn_of(e) {
                r.provider = provider;
                r.model = model;
                r.turns.push(turn);
            }
        }
        r
    }

    /// The model turns of the session in `dir`.
    pub fn from_session(dir: &Path) -> crate::Result<Recorded> {
        let mut events = Vec::new();
        let blobs = cairn_tools::fold::project_blobs(dir);
        for r in cairn_store::LogReader::open(dir)?.records()? {
            if let Ok(rec) = cairn_tools::fold::parse_maybe_in(&r?, blobs.as_ref()) {
                events.push(rec.event);
            }
        }
        Ok(Recorded::from_events(events.iter()))
    }

    /// The provider that made the recording.
    pub fn recorded_provider(&self) -> &str {
        &self.provider
    }

    /// How many turns are left.
    pub fn remaining(&self) -> usize {
        self.turns.len() - self.next
    }
}

/// A `model_turn` event as a turn (with its provider and model). An interrupted turn is
/// none: it answered no request to its end.
pub fn turn_of(e: &Event) -> Option<(String, String, Turn)> {
    let Event::ModelTurn {
        at: _,
        provider,
        model,
        text,
        tool_calls,
        usage,
        interrupted: false,
    } = e
    else {
        return None;
    };
    let tool_calls = tool_calls
        .iter()
        .map(|c| ToolCall {
            id: c["id"].as_str().unwrap_or("").to_string(),
            name: c["name"].as_str().unwrap_or("").to_string(),
            input: c["input"].clone(),
        })
        .collect();
    let usage = usage
        .as_ref()
        .and_then(|u| serde_json::from_value::<Usage>(u.clone()).ok());
    Some((
        provider.clone(),
        model.clone(),
        Turn {
            text: text.clone(),
            tool_calls,
            usage,
        },
    ))
}

impl Provider for Recorded {
    fn name(&self) -> &str {
        &self.provider
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn turn(&mut self, _request: &Request<'_>) -> Result<Turn, ProviderError> {
        let t = self
            .turns
            .get(self.next)
            .cloned()
            .ok_or(ProviderError::Exhausted(self.turns.len()))?;
        self.next += 1;
        Ok(t)
    }
}
