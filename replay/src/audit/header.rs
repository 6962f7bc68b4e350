//! The header: who, where and when, the models that answered, and how the log ends.

use cairn_core::Record;
use cairn_core::event::Event;
use serde::Serialize;

use super::tokens::TokenUse;
use super::{Clock, Fold};
use crate::session::Session;

/// How a session's log ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndState {
    /// Its last session event is `session_ended`.
    Finished,
    /// Its last session event is `session_ended` marked `failed` (the provider failed).
    Failed,
    /// It stops without `session_ended` and no process holds its log (a crash, a kill).
    Interrupted,
    /// It was resumed after an interruption and has not ended since.
    Resumed,
    /// It has not ended and its writer still holds the log: a live session.
    Running,
}

impl EndState {
    pub fn as_str(&self) -> &'static str {
        match self {
            EndState::Finished => "finished",
            EndState::Failed => "failed",
            EndState::Interrupted => "interrupted",
            EndState::Running => "running",
            EndState::Resumed => "resumed",
        }
    }
}

/// Who, where and when.
#[derive(Debug, Clone, Serialize)]
pub struct Header {
    pub session: String,
    pub workspace: String,
    pub catalog: String,
    /// The agent whose own tools were recorded through its hooks, as it ran: `Gemini
    /// CLI 0.61.0` (no catalogue offered those tools).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hooked: Option<String>,
    pub engine_version: String,
    /// The models that answered: from `session_started.config.model` (which holds the
    /// base URL) and every `model_turn`, each provider and model once.
    pub models: Vec<ModelInfo>,
    /// `ts` of the first record.
    pub started: String,
    /// `ts` of the last record.
    pub ended: String,
    /// Milliseconds between the two.
    pub duration_ms: u64,
    pub end_state: EndState,
    /// The reason given in the last `session_ended`.
    pub end_reason: Option<String>,
    /// How often the session was resumed.
    pub resumed: u32,
    /// The parent session (a fork or a replay): id, seq, hash.
    pub parent: Option<Lineage>,
    pub records: u64,
    pub head_seq: u64,
    pub head_hash: String,
}

/// A model the session talked to. The API key is never recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelInfo {
    pub provider: String,
    pub model: String,
    /// The server's address, when the session recorded it (`session_started.config`).
    pub base_url: Option<String>,
}

/// Where a session comes from.
#[derive(Debug, Clone, Serialize)]
pub struct Lineage {
    pub session: String,
    pub seq: u64,
    pub hash: String,
}

/// The model `session_started.config.model` names (provider, model, base URL), when
/// the session was started with one.
pub fn configured_model(config: &serde_json::Value) -> Option<ModelInfo> {
    let m = config.get("model")?;
    let text = |k: &str| m.get(k).and_then(|v| v.as_str()).map(str::to_string);
    Some(ModelInfo {
        provider: text("provider")?,
        model: text("model")?,
        base_url: text("base_url"),
    })
}

/// How the log ends: its state, the last reason given, how often it was resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct End {
    pub(super) state: EndState,
    pub(super) reason: Option<String>,
    pub(super) resumed: u32,
}

/// How the log ends, from its `session_ended` and `session_resumed` records: a log with
/// neither is interrupted, or running while a process holds it.
#[derive(Debug)]
pub(super) struct EndFold(End);

impl Default for EndFold {
    fn default() -> EndFold {
        EndFold(End {
            state: EndState::Interrupted,
            reason: None,
            resumed: 0,
        })
    }
}

impl EndFold {
    /// How the log ends; `writer_holds_log` is asked only of a log that did not end.
    pub(super) fn finish(self, writer_holds_log: impl FnOnce() -> bool) -> End {
        let mut end = self.0;
        let ended = matches!(end.state, EndState::Finished | EndState::Failed);
        if !ended && writer_holds_log() {
            end.state = EndState::Running;
        }
        end
    }
}

impl Fold for EndFold {
    fn apply(&mut self, r: &Record) {
        match &r.event {
            Event::SessionEnded { reason, failed, .. } => {
                self.0.state = if *failed {
                    EndState::Failed
                } else {
                    EndState::Finished
                };
                self.0.reason = Some(reason.clone());
            }
            Event::SessionResumed { .. } => {
                self.0.state = EndState::Resumed;
                self.0.resumed += 1;
            }
            _ => {}
        }
    }
}

/// The models that answered: the configured one first, then the models of the turns
/// (`tokens`, in the order first used), each provider and model once.
fn models(configured: Option<ModelInfo>, tokens: &[TokenUse]) -> Vec<ModelInfo> {
    let mut models: Vec<ModelInfo> = configured.into_iter().collect();
    for t in tokens {
        if !models
            .iter()
            .any(|m| m.provider == t.provider && m.model == t.model)
        {
            models.push(ModelInfo {
                provider: t.provider.clone(),
                model: t.model.clone(),
                base_url: None,
            });
        }
    }
    models
}

/// The header of `session`'s audit: its start's facts, its span on `clock`, its end,
/// the models of its turns (`tokens`).
pub(super) fn header(session: &Session, clock: Clock, end: End, tokens: &[TokenUse]) -> Header {
    let s = &session.started;
    let ts = |r: Option<&Record>| r.map(|r| r.time().to_string()).unwrap_or_default();
    Header {
        session: session.id.clone(),
        workspace: s.workspace.clone(),
        catalog: s.catalog.clone(),
        hooked: s
            .agent
            .as_ref()
            .filter(|a| a.via == "hook")
            .map(|a| super::import::agent_name(&a.name, a.version.as_deref())),
        engine_version: s.engine_version.clone(),
        models: models(configured_model(&s.config), tokens),
        started: ts(session.records.first()),
        ended: ts(session.records.last()),
        duration_ms: clock.end_ms,
        end_state: end.state,
        end_reason: end.reason,
        resumed: end.resumed,
        parent: s.parent.as_ref().map(|p| Lineage {
            session: p.session.clone(),
            seq: p.seq,
            hash: p.hash.to_hex(),
        }),
        records: session.records.len() as u64,
        head_seq: session.head.seq,
        head_hash: session.head.hash.to_hex(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{rec, run};
    use super::*;

    fn end_of(events: &[serde_json::Value], writer_holds_log: bool) -> End {
        let records: Vec<Record> = (1..)
            .zip(events)
            .map(|(seq, e)| rec(seq, seq, e.clone()))
            .collect();
        run(EndFold::default(), &records).finish(|| writer_holds_log)
    }

    fn ended(reason: &str, failed: bool) -> serde_json::Value {
        json!({"type": "session_ended", "reason": reason, "failed": failed})
    }

    fn resumed() -> serde_json::Value {
        let hash = cairn_store::Hash::of(b"head").to_hex();
        json!({"type": "session_resumed", "previous_head": hash})
    }

    fn end(state: EndState, reason: Option<&str>, resumed: u32) -> End {
        End {
            state,
            reason: reason.map(str::to_string),
            resumed,
        }
    }

    #[test]
    fn the_last_session_event_says_how_the_log_ends() {
        let message = || json!({"type": "user_message", "text": "hi"});
        assert_eq!(
            end_of(&[message()], false),
            end(EndState::Interrupted, None, 0)
        );
        assert_eq!(end_of(&[message()], true), end(EndState::Running, None, 0));
        assert_eq!(
            end_of(&[message(), ended("done", false)], true),
            end(EndState::Finished, Some("done"), 0)
        );
        assert_eq!(
            end_of(&[ended("provider", true)], false),
            end(EndState::Failed, Some("provider"), 0)
        );
        // Resumed twice since it last ended: the reason is still the last one given.
        assert_eq!(
            end_of(&[ended("done", false), resumed(), resumed()], false),
            end(EndState::Resumed, Some("done"), 2)
        );
        assert_eq!(
            end_of(&[resumed(), ended("again", false)], false),
            end(EndState::Finished, Some("again"), 1)
        );
    }

    #[test]
    fn the_models_are_the_configured_one_then_each_other_once() {
        let config = json!({"model": {"provider": "openai", "model": "m-1",
            "base_url": "http://127.0.0.1:9/v1"}});
        let configured = configured_model(&config);
        let tokens = |pairs: &[(&str, &str)]| -> Vec<TokenUse> {
            pairs
                .iter()
                .map(|(p, m)| TokenUse {
                    provider: p.to_string(),
                    model: m.to_string(),
                    ..TokenUse::default()
                })
                .collect()
        };
        let info = |p: &str, m: &str, url: Option<&str>| ModelInfo {
            provider: p.into(),
            model: m.into(),
            base_url: url.map(str::to_string),
        };
        assert_eq!(
            models(
                configured.clone(),
                &tokens(&[("other", "m-2"), ("openai", "m-1"), ("openai", "m-3")])
            ),
            [
                info("openai", "m-1", Some("http://127.0.0.1:9/v1")),
                info("other", "m-2", None),
                info("openai", "m-3", None),
            ]
        );
        assert_eq!(
            models(None, &tokens(&[("openai", "m-1")])),
            [info("openai", "m-1", None)]
        );
        assert_eq!(configured_model(&json!({"model": {"provider": "p"}})), None);
    }
}
