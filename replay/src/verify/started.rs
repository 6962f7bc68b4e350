//! The session's own terms, from its `session_started` (and a resume's sandbox): where
//! it came from, its configuration (limits, guarded commands, credential files,
//! catalog), its workspace and manifest. Every other fold checks by them.

use super::*;

/// Reads the session's terms into the shared context; checks its manifest.
#[derive(Default)]
pub(super) struct StartedFold;

impl Fold for StartedFold {
    fn apply(&mut self, v: &mut Verifier, rec: &Record) {
        match &rec.event {
            Event::SessionResumed {
                sandbox: Some(sb), ..
            } => v.writable = sb.writable.clone(),
            Event::SessionStarted(s) => {
                v.report.session = Some(s.id.clone());
                if let Some(sb) = &s.sandbox {
                    v.writable = sb.writable.clone();
                }
                v.replay = s.parent.is_some() && s.inherited.is_none();
                config(v, s);
                v.blob(&s.manifest, "the manifest");
                v.workspace = Some(PathBuf::from(&s.workspace));
                v.manifest_entries(&s.manifest);
            }
            _ => {}
        }
    }
}

/// Where the session came from, read before any fold checks its first record: an
/// imported session, or one recorded from another agent's hooks, is checked as such
/// (`verify/imported.rs`).
pub(super) fn origin(v: &mut Verifier, rec: &Record) {
    let Event::SessionStarted(s) = &rec.event else {
        return;
    };
    // A session recorded from another agent's hooks ran its calls under that agent
    // too: checked like an imported one.
    v.imported = s.imported.is_some() || s.agent.as_ref().is_some_and(|a| a.via == "hook");
    v.hooked = s.agent.as_ref().is_some_and(|a| a.via == "hook");
    v.report.imported = s.imported.as_ref().map(|i| i.agent.clone()).or_else(|| {
        s.agent
            .as_ref()
            .filter(|a| a.via == "hook")
            .map(|a| a.name.clone())
    });
}

/// The session's configuration: what its decisions are taken again with.
fn config(v: &mut Verifier, s: &cairn_core::event::SessionStarted) {
    match serde_json::from_value::<EngineConfig>(s.config.clone()) {
        Ok(c) => {
            v.check_command = Some(c.check_command.as_ref().is_some_and(|a| !a.is_empty()));
            v.guarded = c.guards();
            v.limits = c.limits;
            match CredentialFiles::new(&c.credential_files) {
                Ok(files) => v.credential_files = files,
                Err(e) => v.problem(
                    ProblemKind::BadEvent,
                    format!(
                        "session_started.config: {e}; decisions are checked with the default credential files"
                    ),
                ),
            }
            v.registry = Registry::new(c.catalog);
        }
        Err(e) => v.problem(
            ProblemKind::BadEvent,
            format!(
                "session_started.config does not parse ({e}); decisions are checked with the defaults of catalog {}",
                s.catalog
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{found, rec, run, verifier};
    use super::*;

    fn session_started(config: serde_json::Value, agent: Option<serde_json::Value>) -> Record {
        let mut event = json!({"type": "session_started", "id": "s1", "format_version": 1,
            "engine_version": "0", "workspace": "/w", "catalog": "thoth", "tools": [],
            "manifest": {"hash": Hash::of(b"m").to_hex(), "len": 1}, "manifest_files": 0,
            "config": config});
        if let (Some(e), Some(agent)) = (event.as_object_mut(), agent) {
            e.insert("agent".into(), agent);
        }
        rec(0, event)
    }

    #[test]
    fn a_config_that_does_not_read_is_reported_before_the_missing_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        run(
            &mut v,
            &mut StartedFold,
            &[session_started(json!("not a config"), None)],
        );
        assert_eq!(v.report.session.as_deref(), Some("s1"));
        assert_eq!(v.workspace, Some(PathBuf::from("/w")));
        let found = found(v);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].1, ProblemKind::BadEvent);
        assert!(
            found[0]
                .2
                .starts_with("session_started.config does not parse ("),
            "{found:?}"
        );
        assert_eq!(found[1].1, ProblemKind::Blob);
        assert!(found[1].2.starts_with("the manifest: blob "), "{found:?}");
    }

    #[test]
    fn a_session_recorded_from_hooks_is_checked_as_imported() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifier(dir.path());
        let agent = json!({"name": "claude", "via": "hook"});
        origin(&mut v, &session_started(json!({}), Some(agent)));
        assert!(v.imported && v.hooked);
        assert_eq!(v.report.imported.as_deref(), Some("claude"));
        origin(&mut v, &session_started(json!({}), None));
        assert!(!v.imported && !v.hooked);
    }
}
