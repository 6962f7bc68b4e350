//! ATIF: a session as one trajectory of Harbor's Agent Trajectory Interchange Format
//! ([`trajectory_of`], `cairn export atif`), the format evaluation and training
//! pipelines exchange agent runs in. `docs/EXPORT.md` has the mapping field by field.
//!
//! The mapping is a fold ([`Mapper::push`], record by record, in seq order): a user
//! message is a `user` step; a model turn is an `agent` step with the calls it asked
//! for as `tool_calls` and, as they finish, their outputs as the step's `observation`;
//! calls no model turn asked for (a hook's, a proxy's) are `agent` steps of their own.
//! A fork's inherited conversation comes first, as steps marked `is_copied_context`.
//! Cairn's ids and hashes go under `extra.cairn` at each level. Every value comes from
//! the records, so the same log always gives the same trajectory.

use std::collections::HashMap;
use std::path::Path;

use cairn_core::Record;
use cairn_core::event::{Event, SessionStarted, ToolFinished};
use cairn_store::BlobStore;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::session::SessionLog;

/// The ATIF version written: the newest the `harbor` package's models know
/// (`harbor.models.trajectories.Trajectory.schema_version`, harbor 0.26.0).
pub const ATIF_SCHEMA_VERSION: &str = "ATIF-v1.8";

/// The kinds of `source_item` an ATIF import keeps a trajectory's steps as, when cairn
/// has no event for them; the export writes them back as they were.
pub const ITEM_SYSTEM: &str = "atif:system";
/// A step copied from another trajectory for context (`is_copied_context`).
pub const ITEM_COPIED: &str = "atif:copied";
/// The reasoning of the agent step that follows (`reasoning_content`).
pub const ITEM_REASONING: &str = "atif:reasoning";
/// An observation result that names no call of its step.
pub const ITEM_OBSERVATION: &str = "atif:observation";

/// A trajectory (`Trajectory`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    pub schema_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub agent: Agent,
    pub steps: Vec<Step>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_metrics: Option<FinalMetrics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

/// The agent that ran (`Agent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    pub name: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

/// One step (`Step`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub step_id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// `user`, `agent` or `system`.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    pub message: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<Observation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_copied_context: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_call_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

/// A call the agent made (`ToolCall`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub tool_call_id: String,
    pub function_name: String,
    /// Always an object (ATIF's `arguments` is a dict).
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

/// What the environment answered (`Observation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub results: Vec<ObservationResult>,
}

/// One call's result (`ObservationResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservationResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

/// A step's tokens and cost (`Metrics`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

/// The whole trajectory's totals (`FinalMetrics`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalMetrics {
    pub total_prompt_tokens: u64,
    pub total_completion_tokens: u64,
    pub total_cached_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_cost_usd: Option<f64>,
    pub total_steps: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

/// A model turn's tokens, as `model_turn.usage` counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Every input token, those read from the cache included.
    pub input: u64,
    pub output: u64,
    /// The part of `input` read from the provider's cache.
    pub cached: u64,
}

/// What a model turn cost in dollars, by model name and tokens; `None` when the price
/// of the model is not known (the cli gives the `[prices]` of the configuration).
pub type Pricer<'a> = &'a dyn Fn(&str, &Tokens) -> Option<f64>;

/// The trajectory of the session in folder `dir` (its id is the folder's name), every
/// record checked (own hash, chain, seq) as it is read; `cost` prices each model turn.
/// A record of a type this version does not know is skipped.
pub fn trajectory_of(dir: &Path, cost: Pricer<'_>) -> Result<Trajectory> {
    let log = SessionLog::open(dir)?;
    let mut mapper = Mapper::new(&log.session, log.blobs.as_ref(), cost);
    log.each(|rec| mapper.push(rec))?;
    mapper.finish().ok_or(Error::Empty {
        path: dir.to_path_buf(),
    })
}

/// The file a session's trajectory is written to in folder `out`:
/// `<session>.atif.json`.
pub fn file_name(session: &str) -> String {
    format!("{session}.atif.json")
}

/// The trajectory as its file holds it: JSON, two spaces of indent (as Harbor writes
/// its own), a newline at the end.
pub fn to_json(t: &Trajectory) -> String {
    let mut s = serde_json::to_string_pretty(t).unwrap_or_default();
    s.push('\n');
    s
}

/// Writes `t` into folder `out` (made when missing) as [`file_name`], whole or not at
/// all (a temporary file renamed); returns its path.
pub fn write_to(t: &Trajectory, out: &Path) -> Result<std::path::PathBuf> {
    let session = t.session_id.clone().unwrap_or_else(|| "session".into());
    let path = out.join(file_name(&session));
    let write = |source| Error::Write {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(out).map_err(write)?;
    let tmp = out.join(format!(".{}.tmp", file_name(&session)));
    std::fs::write(&tmp, to_json(t)).map_err(write)?;
    std::fs::rename(&tmp, &path).map_err(write)?;
    Ok(path)
}

/// `{"cairn": fields}`.
fn cairn(fields: Value) -> Option<Value> {
    Some(json!({ "cairn": fields }))
}

/// A call's arguments as ATIF takes them (an object): a non-object input is kept in
/// the call's `extra.cairn.input` and the arguments are empty.
fn arguments(input: &Value) -> (Value, Option<Value>) {
    match input {
        Value::Object(_) => (input.clone(), None),
        other => (json!({}), Some(other.clone())),
    }
}

/// A record's time as ATIF writes it (RFC 3339): the source's own time of an imported
/// event (`at`), else when the record was written.
fn time(r: &Record) -> Option<String> {
    Some(r.time().to_string()).filter(|t| !t.is_empty())
}

/// The session's facts for the root.
#[derive(Default)]
struct Root {
    agent: Option<(String, String)>,
    model: Option<String>,
    started: Option<Value>,
    head: Option<(u64, String)>,
    records: u64,
    ended: Option<(String, bool)>,
    resumed: Vec<u64>,
}

/// Records to a trajectory, one record at a time (see the module's documentation).
pub struct Mapper<'a> {
    session: String,
    blobs: Option<&'a BlobStore>,
    cost: Pricer<'a>,
    root: Root,
    steps: Vec<Step>,
    /// The last model turn's step, and its calls not yet started (in order).
    turn: Option<(usize, Vec<usize>)>,
    /// Started calls: cairn call id → (step, index in its `tool_calls`).
    calls: HashMap<String, (usize, usize)>,
    /// Reasoning kept by an ATIF import for the agent step that follows.
    reasoning: Option<String>,
}

impl<'a> Mapper<'a> {
    /// The mapper of session `session`; `blobs`: the project's, to read whole outputs
    /// and kept items from; `cost` prices model turns.
    pub fn new(session: &str, blobs: Option<&'a BlobStore>, cost: Pricer<'a>) -> Mapper<'a> {
        Mapper {
            session: session.to_string(),
            blobs,
            cost,
            root: Root::default(),
            steps: Vec::new(),
            turn: None,
            calls: HashMap::new(),
            reasoning: None,
        }
    }

    fn ids(r: &Record) -> Value {
        json!({"seq": r.seq, "hash": r.hash.to_string()})
    }

    fn add(&mut self, mut step: Step) -> usize {
        step.step_id = self.steps.len() as u64 + 1;
        self.steps.push(step);
        self.steps.len() - 1
    }

    fn blank(source: &str, timestamp: Option<String>, message: Value) -> Step {
        Step {
            step_id: 0,
            timestamp,
            source: source.into(),
            model_name: None,
            message,
            reasoning_content: None,
            tool_calls: None,
            observation: None,
            metrics: None,
            is_copied_context: None,
            llm_call_count: None,
            extra: None,
        }
    }

    /// Folds one record.
    pub fn push(&mut self, r: &Record) {
        self.root.records += 1;
        self.root.head = Some((r.seq, r.hash.to_string()));
        match &r.event {
            Event::SessionStarted(s) => self.session_started(s),
            Event::UserMessage { text, .. } => {
                let mut step = Self::blank("user", time(r), Value::String(text.clone()));
                step.extra = cairn(Self::ids(r));
                self.add(step);
            }
            Event::ModelTurn {
                provider,
                model,
                text,
                tool_calls,
                usage,
                interrupted,
                ..
            } => self.model_turn(
                r,
                provider,
                model,
                text,
                tool_calls,
                usage.as_ref(),
                *interrupted,
            ),
            Event::ToolStarted {
                call,
                tool,
                input,
                mcp,
                ..
            } => self.tool_started(r, call, tool, input, mcp.as_ref()),
            Event::ToolFinished(f) => self.tool_finished(r, f),
            Event::SourceItem { kind, item, .. } => self.source_item(kind, item),
            Event::SessionResumed { .. } => self.root.resumed.push(r.seq),
            Event::SessionEnded { reason, failed, .. } => {
                self.root.ended = Some((reason.clone(), *failed));
            }
            _ => {}
        }
    }

    fn session_started(&mut self, s: &SessionStarted) {
        let mut started = json!({
            "workspace": s.workspace,
            "catalog": s.catalog,
        });
        self.root.agent = Some(("cairn".into(), s.engine_version.clone()));
        if let Some(a) = &s.agent {
            self.root.agent = Some((a.name.clone(), a.version.clone().unwrap_or_default()));
            started["agent"] = json!({"via": a.via, "source_id": a.source_id});
        }
        if let Some(i) = &s.imported {
            self.root.agent = Some((i.agent.clone(), i.agent_version.clone().unwrap_or_default()));
            started["imported"] = json!({
                "agent": i.agent,
                "source_id": i.source_id,
                "branch": i.branch,
                "file_hash": i.file.hash.to_string(),
            });
        }
        if let Some(b) = &s.sandbox {
            started["sandbox"] = serde_json::to_value(b.mode).unwrap_or(Value::Null);
        }
        if let Some(p) = &s.parent {
            started["parent"] =
                json!({"session": p.session, "seq": p.seq, "hash": p.hash.to_string()});
        }
        self.root.started = Some(started);
        // A fork's conversation up to its fork point, as the parent had it.
        if let Some(inh) = &s.inherited {
            for text in &inh.conversation {
                if let Some(e) = cairn_core::state::ConversationEntry::from_json(text) {
                    self.copied(e);
                }
            }
        }
    }

    /// An entry of a fork's inherited conversation, as a copied step.
    fn copied(&mut self, e: cairn_core::state::ConversationEntry) {
        use cairn_core::state::ConversationEntry as C;
        match e {
            C::User { text } => {
                let mut step = Self::blank("user", None, Value::String(text));
                step.is_copied_context = Some(true);
                self.add(step);
            }
            C::Assistant { text, tool_calls } => {
                let mut step = Self::blank("agent", None, Value::String(text));
                step.is_copied_context = Some(true);
                step.tool_calls = Some(
                    tool_calls
                        .iter()
                        .map(|c| {
                            let input = serde_json::from_str(&c.input).unwrap_or(Value::Null);
                            let (arguments, raw) = arguments(&input);
                            ToolCall {
                                tool_call_id: c.id.clone(),
                                function_name: c.name.clone(),
                                arguments,
                                extra: raw.and_then(|i| cairn(json!({ "input": i }))),
                            }
                        })
                        .collect(),
                );
                self.add(step);
            }
            C::Tool {
                call_id,
                output,
                status,
                ..
            } => {
                // The result goes on the copied step that asked for it.
                let at = self.steps.iter().rposition(|s| {
                    s.is_copied_context == Some(true)
                        && s.tool_calls
                            .as_ref()
                            .is_some_and(|t| t.iter().any(|c| c.tool_call_id == call_id))
                });
                if let Some(i) = at {
                    let result = ObservationResult {
                        source_call_id: Some(call_id),
                        content: Some(Value::String(output)),
                        extra: cairn(json!({"status": status.as_str()})),
                    };
                    self.steps[i]
                        .observation
                        .get_or_insert_with(|| Observation {
                            results: Vec::new(),
                        })
                        .results
                        .push(result);
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn model_turn(
        &mut self,
        r: &Record,
        provider: &str,
        model: &str,
        text: &str,
        tool_calls: &[Value],
        usage: Option<&Value>,
        interrupted: bool,
    ) {
        if self.root.model.is_none() {
            self.root.model = Some(model.to_string());
        }
        let mut step = Self::blank("agent", time(r), Value::String(text.to_string()));
        step.model_name = Some(model.to_string());
        step.llm_call_count = Some(1);
        step.reasoning_content = self.reasoning.take();
        let calls: Vec<ToolCall> = tool_calls
            .iter()
            .map(|c| {
                let input = c.get("input").cloned().unwrap_or(Value::Null);
                let (arguments, raw) = arguments(&input);
                let id = c.get("id").and_then(Value::as_str).unwrap_or("");
                let mut extra = json!({ "model_call_id": id });
                if let Some(raw) = raw {
                    extra["input"] = raw;
                }
                ToolCall {
                    tool_call_id: id.to_string(),
                    function_name: c
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    arguments,
                    extra: cairn(extra),
                }
            })
            .collect();
        let waiting = (0..calls.len()).collect();
        if !calls.is_empty() {
            step.tool_calls = Some(calls);
        }
        if let Some(u) = usage.filter(|u| u.is_object()) {
            let n = |k: &str| u.get(k).and_then(Value::as_u64);
            let tokens = Tokens {
                input: n("input_tokens").unwrap_or(0),
                output: n("output_tokens").unwrap_or(0),
                cached: n("cached_tokens").unwrap_or(0),
            };
            step.metrics = Some(Metrics {
                prompt_tokens: n("input_tokens"),
                completion_tokens: n("output_tokens"),
                cached_tokens: n("cached_tokens"),
                cost_usd: (self.cost)(model, &tokens),
                extra: n("cache_write_tokens").map(|w| json!({ "cache_write_tokens": w })),
            });
        }
        let mut ids = Self::ids(r);
        ids["provider"] = Value::String(provider.to_string());
        if interrupted {
            ids["interrupted"] = Value::Bool(true);
        }
        step.extra = cairn(ids);
        let i = self.add(step);
        self.turn = Some((i, waiting));
    }

    fn tool_started(
        &mut self,
        r: &Record,
        call: &str,
        tool: &str,
        input: &Value,
        mcp: Option<&cairn_core::event::McpRef>,
    ) {
        let (arguments, raw) = arguments(input);
        let mut extra = json!({ "call": call, "seq": r.seq });
        if let Some(raw) = raw {
            extra["input"] = raw;
        }
        if let Some(m) = mcp {
            extra["mcp"] = json!({"server": m.server, "tool": m.tool});
        }
        // The next call its model turn asked for, when one is waiting: the call as it
        // ran takes its place (cairn's id, the input as validated).
        let asked = match &mut self.turn {
            Some((step, waiting)) if !waiting.is_empty() => Some((*step, waiting.remove(0))),
            _ => None,
        };
        let (step, k) = match asked {
            Some((step, k)) => {
                let Some(calls) = self.steps[step].tool_calls.as_mut() else {
                    return;
                };
                let c = &mut calls[k];
                if let Some(model_id) = c
                    .extra
                    .as_ref()
                    .and_then(|e| e["cairn"].get("model_call_id"))
                    .cloned()
                {
                    extra["model_call_id"] = model_id;
                }
                *c = ToolCall {
                    tool_call_id: call.to_string(),
                    function_name: tool.to_string(),
                    arguments,
                    extra: cairn(extra),
                };
                (step, k)
            }
            None => {
                // A call no model turn of this log asked for (a hook's, a proxy's): a
                // step of its own, with no model inference recorded.
                let mut step = Self::blank("agent", time(r), Value::String(String::new()));
                step.tool_calls = Some(vec![ToolCall {
                    tool_call_id: call.to_string(),
                    function_name: tool.to_string(),
                    arguments,
                    extra: cairn(extra),
                }]);
                let mut ids = Self::ids(r);
                ids["model_turn"] = Value::Bool(false);
                step.extra = cairn(ids);
                let i = self.add(step);
                self.turn = None;
                (i, 0)
            }
        };
        self.calls.insert(call.to_string(), (step, k));
    }

    /// The text of a blob; `None` when there is no store or the blob is missing.
    fn blob_text(&self, b: &cairn_store::BlobRef) -> Option<String> {
        let bytes = self.blobs?.get(&b.hash).ok()?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn tool_finished(&mut self, r: &Record, f: &ToolFinished) {
        let Some((step, _)) = self.calls.remove(&f.call) else {
            return;
        };
        // What the model was given: a session of cairn's own keeps it inline (the
        // blob holds what the cap cut); an import keeps the source's whole output in
        // the blob past its inline bytes.
        let imported = self
            .root
            .started
            .as_ref()
            .is_some_and(|s| s.get("imported").is_some());
        let content = match (&f.output_blob, imported) {
            (Some(b), true) => self.blob_text(b).unwrap_or_else(|| f.output.clone()),
            _ => f.output.clone(),
        };
        let mut extra =
            json!({"status": f.status.as_str(), "seq": r.seq, "hash": r.hash.to_string()});
        if f.elapsed_us > 0 {
            extra["elapsed_us"] = f.elapsed_us.into();
        }
        if let Some(refusal) = &f.refusal {
            extra["refusal"] = serde_json::to_value(refusal).unwrap_or(Value::Null);
        }
        self.steps[step]
            .observation
            .get_or_insert_with(|| Observation {
                results: Vec::new(),
            })
            .results
            .push(ObservationResult {
                source_call_id: Some(f.call.clone()),
                content: Some(Value::String(content)),
                extra: cairn(extra),
            });
    }

    /// A step an ATIF import kept as it was: written back as it was, numbered anew.
    fn source_item(&mut self, kind: &str, item: &cairn_store::BlobRef) {
        if !kind.starts_with("atif:") {
            return;
        }
        let Some(v) = self
            .blob_text(item)
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        else {
            return;
        };
        match kind {
            ITEM_REASONING => self.reasoning = v.as_str().map(str::to_string),
            ITEM_OBSERVATION => {
                if let (Some(i), Ok(result)) = (
                    self.steps.len().checked_sub(1),
                    serde_json::from_value::<ObservationResult>(v),
                ) {
                    self.steps[i]
                        .observation
                        .get_or_insert_with(|| Observation {
                            results: Vec::new(),
                        })
                        .results
                        .push(result);
                }
            }
            ITEM_SYSTEM | ITEM_COPIED => {
                if let Ok(step) = serde_json::from_value::<Step>(v) {
                    self.add(step);
                }
            }
            _ => {}
        }
    }

    /// The trajectory of what was folded; `None` when no record was.
    pub fn finish(self) -> Option<Trajectory> {
        let (head_seq, head_hash) = self.root.head.clone()?;
        let (name, version) = self
            .root
            .agent
            .clone()
            .unwrap_or_else(|| ("cairn".into(), String::new()));
        let mut totals = (0u64, 0u64, 0u64);
        let mut cost: Option<f64> = None;
        let mut unpriced = false;
        for s in &self.steps {
            if let Some(m) = &s.metrics {
                totals.0 += m.prompt_tokens.unwrap_or(0);
                totals.1 += m.completion_tokens.unwrap_or(0);
                totals.2 += m.cached_tokens.unwrap_or(0);
                match m.cost_usd {
                    Some(c) => *cost.get_or_insert(0.0) += c,
                    None => unpriced = true,
                }
            }
        }
        let mut root = self.root.started.clone().unwrap_or_else(|| json!({}));
        root["session"] = Value::String(self.session.clone());
        root["head"] = json!({"seq": head_seq, "hash": head_hash});
        root["records"] = self.root.records.into();
        root["verify"] = Value::String("chain".into());
        if let Some((reason, failed)) = &self.root.ended {
            root["end_reason"] = Value::String(reason.clone());
            if *failed {
                root["failed"] = Value::Bool(true);
            }
        }
        if !self.root.resumed.is_empty() {
            root["resumed_at_seq"] = json!(self.root.resumed);
        }
        let total_steps = self.steps.len() as u64;
        let mut notes = None;
        let final_extra = unpriced.then(|| {
            notes = Some(
                "final_metrics.total_cost_usd counts only the steps whose model has a price"
                    .to_string(),
            );
            json!({"cairn": {"unpriced_steps": true}})
        });
        let mut steps = self.steps;
        if steps.is_empty() {
            // ATIF needs one step at least: a session with nothing said or run (its
            // start alone) says so.
            let mut s = Self::blank(
                "system",
                None,
                Value::String("the session recorded no step".into()),
            );
            s.step_id = 1;
            s.extra = cairn(json!({"empty": true}));
            steps.push(s);
        }
        Some(Trajectory {
            schema_version: ATIF_SCHEMA_VERSION.into(),
            session_id: Some(self.session),
            agent: Agent {
                name,
                version,
                model_name: self.root.model,
                extra: None,
            },
            steps,
            notes,
            final_metrics: Some(FinalMetrics {
                total_prompt_tokens: totals.0,
                total_completion_tokens: totals.1,
                total_cached_tokens: totals.2,
                total_cost_usd: cost,
                total_steps,
                extra: final_extra,
            }),
            extra: cairn(root),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_object_input_is_kept_beside_empty_arguments() {
        assert_eq!(arguments(&json!({"a": 1})), (json!({"a": 1}), None));
        assert_eq!(arguments(&json!("ls")), (json!({}), Some(json!("ls"))));
        assert_eq!(arguments(&Value::Null), (json!({}), Some(Value::Null)));
    }
}
