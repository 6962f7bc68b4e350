//! ATIF trajectories (Harbor's Agent Trajectory Interchange Format, `*.atif.json`,
//! `trajectory.json`, or any `.json` file given by name) as sessions: one trajectory,
//! one session, its agent (name, version) and its steps' times kept.
//!
//! A trajectory is one JSON document, read whole (at most `line_bytes_max` bytes, as
//! a line of the other formats). It is imported once: importing the same bytes again
//! does nothing; a file whose bytes changed since is a warning, left as it was
//! imported (a trajectory is rewritten whole, so there is no part to continue from).
//!
//! Steps map back as `cairn export atif` writes them (docs/EXPORT.md): a `user` step is
//! a `user_message`; an `agent` step a `model_turn` (tokens from its metrics), then
//! each of its calls (`tool_started`) and its result (`tool_finished`, the status from
//! `extra.cairn.status`, else `ok`); `system` steps, copied-context steps, reasoning and
//! results of no call are kept as they are (`source_item`, kinds `atif:…`) and written
//! back by the export. A trajectory cairn wrote says which of its steps had no model
//! turn and which calls never ran (`extra.cairn`); any other trajectory's agent steps
//! are model turns and all their calls ran.

use std::path::{Path, PathBuf};

use cairn_core::event::{ImportProgress, Imported, ImportedFile, McpRef, Status};
use cairn_core::redact::{Counts, Redactor};
use cairn_engine::Home;
use cairn_store::Hash;
use serde_json::{Value, json};

use crate::error::{ImportError, Result};
use crate::index::{Entry, Index};
use crate::step::{ModelCall, Step};
use crate::writer::Writer;
use crate::{Options, SessionSummary, Summary};

/// What the summary names the format of these files by.
pub const AGENT: &str = "atif";

/// The kinds of `source_item` that keep what cairn has no event for (the export's).
const ITEM_SYSTEM: &str = "atif:system";
const ITEM_COPIED: &str = "atif:copied";
const ITEM_REASONING: &str = "atif:reasoning";
const ITEM_OBSERVATION: &str = "atif:observation";

/// Whether `path` is taken as a trajectory: a `.json` file (a rollout or transcript is
/// `.jsonl`).
pub fn is_atif_path(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

/// Whether a file found walking a folder is a trajectory: `*.atif.json` (what
/// `cairn export atif` writes) or `trajectory.json` (what Harbor writes).
pub fn is_atif_name(name: &str) -> bool {
    name.ends_with(".atif.json") || name == "trajectory.json"
}

/// The text of a message or an observation's content: a string as it is, the text
/// parts of a multimodal one joined by newlines (images and audio are left out).
fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The `extra.cairn` object of `v`, when there is one.
fn cairn_of(v: &Value) -> Option<&serde_json::Map<String, Value>> {
    v.get("extra")?.get("cairn")?.as_object()
}

/// A step's usage in the shape of its provider's own object, which
/// [`crate::writer::usage_of`] reads back to the same counts.
fn usage_of(provider: &str, metrics: &Value) -> Option<Value> {
    let metrics = metrics.as_object()?;
    let n = |k: &str| metrics.get(k).and_then(Value::as_u64).unwrap_or(0);
    let prompt = n("prompt_tokens");
    let cached = n("cached_tokens");
    let written = metrics
        .get("extra")
        .and_then(|e| e.get("cache_write_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let output = n("completion_tokens");
    Some(match provider {
        "anthropic" => json!({
            "input_tokens": prompt.saturating_sub(cached).saturating_sub(written),
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": written,
            "output_tokens": output,
        }),
        _ => json!({
            "input_tokens": prompt,
            "cached_input_tokens": cached,
            "cache_write_input_tokens": written,
            "output_tokens": output,
        }),
    })
}

/// The steps (and the time the source gives for them) of one ATIF step.
fn steps_of(
    step: &Value,
    default_model: &str,
    from_cairn: bool,
    out: &mut Vec<(Option<String>, Option<String>, Step)>,
) {
    let time = step
        .get("timestamp")
        .and_then(Value::as_str)
        .map(str::to_string);
    let item = |kind: &str, v: &Value| Step::Item {
        kind: kind.to_string(),
        unknown: false,
        raw: v.to_string().into_bytes(),
    };
    let source = step.get("source").and_then(Value::as_str).unwrap_or("");
    if step.get("is_copied_context").and_then(Value::as_bool) == Some(true) {
        out.push((time, None, item(ITEM_COPIED, step)));
        return;
    }
    match source {
        "user" => out.push((
            time,
            None,
            Step::User {
                text: text_of(step.get("message")),
            },
        )),
        "agent" => agent_steps(step, time, default_model, from_cairn, out),
        _ => out.push((time, None, item(ITEM_SYSTEM, step))),
    }
}

/// A call's input: the one cairn kept (not an object), else its arguments.
fn input_of(c: &Value) -> Value {
    cairn_of(c)
        .and_then(|x| x.get("input"))
        .cloned()
        .unwrap_or_else(|| c.get("arguments").cloned().unwrap_or(json!({})))
}

fn id_of(c: &Value) -> String {
    c.get("tool_call_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn agent_steps(
    step: &Value,
    time: Option<String>,
    default_model: &str,
    from_cairn: bool,
    out: &mut Vec<(Option<String>, Option<String>, Step)>,
) {
    let ours = cairn_of(step);
    let provider = ours
        .and_then(|c| c.get("provider"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(r) = step.get("reasoning_content").and_then(Value::as_str) {
        out.push((
            time.clone(),
            None,
            Step::Item {
                kind: ITEM_REASONING.into(),
                unknown: false,
                raw: Value::String(r.to_string()).to_string().into_bytes(),
            },
        ));
    }
    let calls: Vec<&Value> = step
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    // No model turn: one cairn marked so, or a deterministic dispatch (ATIF's
    // `llm_call_count: 0`).
    let model_turn = ours
        .and_then(|c| c.get("model_turn"))
        .and_then(Value::as_bool)
        != Some(false)
        && step.get("llm_call_count").and_then(Value::as_u64) != Some(0);
    if model_turn {
        let usage = step
            .get("metrics")
            .and_then(|m| usage_of(provider.as_deref().unwrap_or(""), m));
        out.push((
            time.clone(),
            provider.clone(),
            Step::Model {
                model: step
                    .get("model_name")
                    .and_then(Value::as_str)
                    .unwrap_or(default_model)
                    .to_string(),
                text: text_of(step.get("message")),
                calls: calls
                    .iter()
                    .map(|c| ModelCall {
                        id: cairn_of(c)
                            .and_then(|x| x.get("model_call_id"))
                            .and_then(Value::as_str)
                            .map_or_else(|| id_of(c), str::to_string),
                        name: c
                            .get("function_name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        input: input_of(c),
                    })
                    .collect(),
                usage,
            },
        ));
    }
    call_steps(step, &calls, &time, from_cairn, out);
}

/// The calls of an agent step that ran, each with its result; the results of no call.
fn call_steps(
    step: &Value,
    calls: &[&Value],
    time: &Option<String>,
    from_cairn: bool,
    out: &mut Vec<(Option<String>, Option<String>, Step)>,
) {
    let results: Vec<&Value> = step
        .get("observation")
        .and_then(|o| o.get("results"))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let mut used = vec![false; results.len()];
    for c in calls {
        // A trajectory of cairn's names the calls that ran; another's ran them all.
        if from_cairn && cairn_of(c).and_then(|x| x.get("call")).is_none() {
            continue;
        }
        let id = id_of(c);
        let mcp = cairn_of(c)
            .and_then(|x| x.get("mcp"))
            .and_then(|m| serde_json::from_value::<McpRef>(m.clone()).ok());
        out.push((
            time.clone(),
            None,
            Step::Call {
                id: id.clone(),
                tool: c
                    .get("function_name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                input: input_of(c),
                mcp,
            },
        ));
        for (k, r) in results.iter().enumerate() {
            if used[k] || r.get("source_call_id").and_then(Value::as_str) != Some(id.as_str()) {
                continue;
            }
            used[k] = true;
            let status = cairn_of(r)
                .and_then(|x| x.get("status"))
                .and_then(|s| serde_json::from_value::<Status>(s.clone()).ok())
                .unwrap_or(Status::Ok);
            out.push((
                time.clone(),
                None,
                Step::End {
                    id: id.clone(),
                    status,
                    output: text_of(r.get("content")),
                },
            ));
        }
    }
    for (k, r) in results.iter().enumerate() {
        if !used[k] {
            out.push((
                time.clone(),
                None,
                Step::Item {
                    kind: ITEM_OBSERVATION.into(),
                    unknown: false,
                    raw: r.to_string().into_bytes(),
                },
            ));
        }
    }
}

/// The bytes of the trajectory at `path`, at most `line_bytes_max` of them.
fn read(path: &Path, options: &Options) -> Result<Vec<u8>> {
    let bytes_max = options.line_bytes_max as u64;
    let size = std::fs::metadata(path)
        .map_err(ImportError::io(path))?
        .len();
    if size > bytes_max {
        return Err(ImportError::TooLong {
            path: path.to_path_buf(),
            bytes: size,
            max: bytes_max,
        });
    }
    std::fs::read(path).map_err(ImportError::io(path))
}

/// The trajectory in `bytes`: a JSON object with an ATIF `schema_version` and `steps`.
fn parse(path: &Path, bytes: &[u8]) -> Result<Value> {
    let not_atif = || ImportError::NotAtif {
        path: path.to_path_buf(),
    };
    let v: Value = serde_json::from_slice(bytes).map_err(|_| not_atif())?;
    let is_atif = v
        .get("schema_version")
        .and_then(Value::as_str)
        .is_some_and(|s| s.starts_with("ATIF-"));
    if !is_atif || !v.get("steps").is_some_and(Value::is_array) {
        return Err(not_atif());
    }
    Ok(v)
}

/// The project of trajectory `v`: the workspace cairn exported it from, else the
/// folder the file is in.
fn workspace_of(v: &Value, path: &Path) -> String {
    cairn_of(v)
        .and_then(|c| c.get("workspace"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| path.parent().map(|p| p.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "/".into())
}

/// The text of field `k` of `v`.
fn text(v: Option<&Value>, k: &str) -> Option<String> {
    v.and_then(|a| a.get(k))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Where the session of trajectory `v`, read from `file`, comes from.
fn imported_of(v: &Value, path: &Path, file: ImportedFile) -> Imported {
    let agent = v.get("agent");
    let stem = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let steps = v.get("steps").and_then(Value::as_array);
    Imported {
        agent: text(agent, "name").unwrap_or_else(|| AGENT.into()),
        agent_version: text(agent, "version"),
        source_id: text(Some(v), "session_id")
            .or_else(|| text(Some(v), "trajectory_id"))
            .unwrap_or(stem),
        branch: "main".into(),
        file,
        started_at: steps.and_then(|s| s.iter().find_map(|s| text(Some(s), "timestamp"))),
    }
}

/// Imports the trajectory at `path` (canonical): a new session, or nothing when these
/// bytes were imported before.
pub(crate) fn import(
    home: &Home,
    path: &Path,
    options: &Options,
    index: &mut Index,
    summary: &mut Summary,
) -> Result<()> {
    let bytes = read(path, options)?;
    let hash = Hash::of(&bytes);
    let len = bytes.len() as u64;
    if let Some(entry) = index.get(path) {
        if entry.progress.read_to == len && entry.progress.read_hash == hash {
            summary.unchanged += 1;
        } else {
            summary.warn(format!(
                "{}: changed since it was imported into session {}: a trajectory is imported once, whole: left as it was imported (move it to import it as a new session)",
                path.display(),
                entry.id
            ));
        }
        return Ok(());
    }
    let v = parse(path, &bytes)?;
    let steps = v
        .get("steps")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if v.get("subagent_trajectories")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        summary.warn(format!(
            "{}: its embedded subagent trajectories are not imported (export each to a file of its own to import it)",
            path.display()
        ));
    }
    let redactor = Redactor::with_env(std::env::vars());
    let mut secrets = Counts::new();
    redactor.redact_bytes(&bytes, &mut secrets);
    let from_cairn = cairn_of(&v).is_some();
    let root = crate::root_of(&workspace_of(&v, path));
    let mut file = ImportedFile {
        path: path.to_string_lossy().into_owned(),
        hash,
        bytes: len,
        original: None,
    };
    if options.keep_original {
        file.original = Some(crate::keep(home, &root, path, &file)?);
    }
    let imported = imported_of(&v, path, file);
    let source_id = imported.source_id.clone();
    let default_model = text(v.get("agent"), "model_name").unwrap_or_default();
    let mut planned = Vec::new();
    for s in steps {
        steps_of(s, &default_model, from_cairn, &mut planned);
    }
    let mut writer = Writer::create(home, &root, imported, None)?;
    for (time, provider, step) in planned {
        if let Some(p) = provider {
            writer.set_provider(&p);
        }
        // The step's own time, as the Codex and Claude Code importers pass theirs.
        writer.step(Step::At(time))?;
        writer.step(step)?;
    }
    let progress = ImportProgress {
        read_to: len,
        read_hash: hash,
        lines: steps.len() as u64,
        warnings: 0,
        unknown: 0,
        secrets: secrets
            .iter()
            .map(|(k, n)| (k.clone(), u64::from(*n)))
            .collect(),
    };
    let done = writer.finish(progress.clone())?;
    index.add(
        path,
        Entry {
            id: done.id.clone(),
            dir: done.dir.clone(),
            progress: progress.clone(),
        },
        Some(&source_id),
        done.head,
    )?;
    crate::tally(summary, &progress, done.interrupted, len);
    summary.sessions += 1;
    summary.calls += done.written.calls;
    summary.imported.push(SessionSummary {
        id: done.id,
        dir: done.dir,
        source: PathBuf::from(path),
        agent: AGENT,
        branch: "main".into(),
        continued: false,
        calls: done.written.calls,
        records: done.written.records,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_reads_back_to_the_counts_of_the_metrics() {
        let m = json!({"prompt_tokens": 1200, "completion_tokens": 34, "cached_tokens": 1000,
            "extra": {"cache_write_tokens": 100}});
        for provider in ["anthropic", "openai", "unknown"] {
            let u = crate::writer::usage_of(provider, usage_of(provider, &m).unwrap());
            assert_eq!(u["input_tokens"], 1200, "{provider}");
            assert_eq!(u["output_tokens"], 34, "{provider}");
            assert_eq!(u["cached_tokens"], 1000, "{provider}");
            assert_eq!(u["cache_write_tokens"], 100, "{provider}");
        }
    }

    #[test]
    fn a_multimodal_message_keeps_its_text_parts() {
        let m = json!([{"type": "text", "text": "a"}, {"type": "image", "source": {}},
            {"type": "text", "text": "b"}]);
        assert_eq!(text_of(Some(&m)), "a\nb");
        assert_eq!(text_of(None), "");
    }
}
