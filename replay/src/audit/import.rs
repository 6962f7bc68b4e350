//! Where an imported session came from, and what each pass of the import found in it.

use std::collections::BTreeMap;

use cairn_core::Record;
use cairn_core::event::{Event, Imported};
use serde::Serialize;

use super::Fold;
use crate::session::Session;

/// An imported session's source, and what the import found in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportInfo {
    /// `codex` or `claude`.
    pub agent: String,
    pub agent_version: Option<String>,
    /// The source file (the last one read, for a continued import).
    pub path: String,
    pub source_id: String,
    /// `main`, `fork`, `sidechain` or `subagent`.
    pub branch: String,
    /// Secrets the source held, by kind, over every pass: redacted in this session.
    pub secrets: BTreeMap<String, u64>,
    /// Source lines of types not mapped (kept as blobs), and warnings.
    pub unknown: u64,
    pub warnings: u64,
    /// Passes over the source (1, then one per continuation).
    pub passes: u32,
}

/// An agent as people call it, with its version: `Codex 0.171.0`, `Claude Code
/// 2.1.3`, `Gemini CLI 0.61.0`, `OpenCode 1.18.33`; another name as it is.
pub fn agent_name(agent: &str, version: Option<&str>) -> String {
    let name = match agent {
        "codex" => "Codex",
        "claude" => "Claude Code",
        "gemini" => "Gemini CLI",
        "opencode" => "OpenCode",
        other => other,
    };
    match version {
        Some(v) => format!("{name} {v}"),
        None => name.to_string(),
    }
}

impl ImportInfo {
    /// `Codex 0.171.0`, `Claude Code 2.1.3`, `Gemini CLI 0.61.0`.
    pub fn agent_name(&self) -> String {
        agent_name(&self.agent, self.agent_version.as_deref())
    }

    /// One line: `imported from Codex 0.171.0 (main): /path; 2 secrets in the source,
    /// redacted here`.
    pub fn line(&self) -> String {
        let secrets: u64 = self.secrets.values().sum();
        format!(
            "imported from {} ({}): {}; {secrets} secret{} in the source, redacted here; {} unknown line{}, {} warning{}",
            self.agent_name(),
            self.branch,
            self.path,
            if secrets == 1 { "" } else { "s" },
            self.unknown,
            if self.unknown == 1 { "" } else { "s" },
            self.warnings,
            if self.warnings == 1 { "" } else { "s" },
        )
    }
}

/// The import facts of a session: its `session_started.imported` and every pass's
/// `session_ended.imported`.
pub fn import_info(session: &Session) -> Option<ImportInfo> {
    let imported = session.started.imported.as_deref()?;
    let mut fold = ImportFold::default();
    for r in &session.records {
        fold.apply(r);
    }
    fold.finish(Some(imported))
}

/// The passes of an import: the file each `session_resumed` continued from, and what
/// each `session_ended` says its pass found.
#[derive(Debug, Default)]
pub(super) struct ImportFold {
    /// The file the last continuation read.
    path: Option<String>,
    secrets: BTreeMap<String, u64>,
    unknown: u64,
    warnings: u64,
    passes: u32,
}

impl ImportFold {
    /// The import facts, when the session was imported (`imported`, from its start).
    pub(super) fn finish(self, imported: Option<&Imported>) -> Option<ImportInfo> {
        let i = imported?;
        Some(ImportInfo {
            agent: i.agent.clone(),
            agent_version: i.agent_version.clone(),
            path: self.path.unwrap_or_else(|| i.file.path.clone()),
            source_id: i.source_id.clone(),
            branch: i.branch.clone(),
            secrets: self.secrets,
            unknown: self.unknown,
            warnings: self.warnings,
            passes: self.passes,
        })
    }
}

impl Fold for ImportFold {
    fn apply(&mut self, r: &Record) {
        match &r.event {
            Event::SessionResumed {
                imported: Some(f), ..
            } => self.path = Some(f.path.clone()),
            Event::SessionEnded {
                imported: Some(p), ..
            } => {
                self.passes += 1;
                self.unknown += p.unknown;
                self.warnings += p.warnings;
                for (k, n) in &p.secrets {
                    *self.secrets.entry(k.clone()).or_default() += n;
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::testing::{rec, run};
    use super::*;

    fn hash() -> String {
        cairn_store::Hash::of(b"source").to_hex()
    }

    fn file(path: &str) -> Value {
        json!({"path": path, "hash": hash(), "bytes": 10})
    }

    fn ended(seq: u64, unknown: u64, warnings: u64, secrets: Value) -> Record {
        rec(
            seq,
            seq,
            json!({"type": "session_ended", "reason": "imported", "imported": {
                "read_to": 10, "read_hash": hash(), "lines": 3, "warnings": warnings,
                "unknown": unknown, "secrets": secrets}}),
        )
    }

    fn imported() -> Imported {
        serde_json::from_value(json!({"agent": "codex", "agent_version": "0.171.0",
            "source_id": "s-1", "branch": "main", "file": file("/src/first.jsonl")}))
        .unwrap()
    }

    #[test]
    fn every_pass_adds_to_the_import_and_a_continuation_names_its_file() {
        let records = [
            ended(1, 2, 0, json!({"github_token": 1})),
            rec(
                2,
                2,
                json!({"type": "session_resumed", "previous_head": hash(),
                "imported": file("/src/second.jsonl")}),
            ),
            ended(3, 1, 1, json!({"github_token": 2, "private_key": 1})),
        ];
        let info = run(ImportFold::default(), &records)
            .finish(Some(&imported()))
            .unwrap();
        assert_eq!(
            info,
            ImportInfo {
                agent: "codex".into(),
                agent_version: Some("0.171.0".into()),
                path: "/src/second.jsonl".into(),
                source_id: "s-1".into(),
                branch: "main".into(),
                secrets: [
                    ("github_token".to_string(), 3),
                    ("private_key".to_string(), 1)
                ]
                .into_iter()
                .collect(),
                unknown: 3,
                warnings: 1,
                passes: 2,
            }
        );
        assert_eq!(
            info.line(),
            "imported from Codex 0.171.0 (main): /src/second.jsonl; 4 secrets in the source, redacted here; 3 unknown lines, 1 warning"
        );
    }

    #[test]
    fn a_session_cairn_ran_has_no_import_and_one_pass_keeps_its_first_file() {
        let records = [ended(1, 0, 0, json!({}))];
        assert_eq!(run(ImportFold::default(), &records).finish(None), None);
        let info = run(ImportFold::default(), &records)
            .finish(Some(&imported()))
            .unwrap();
        assert_eq!((info.path.as_str(), info.passes), ("/src/first.jsonl", 1));
    }
}
