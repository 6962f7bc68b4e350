#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Snapshots of the audit of the demo sessions, as text and Markdown, and the HTML
//! report checked in headless Chromium.

mod common;

use cairn_cli::paint::Paint;
use cairn_cli::report;

fn audits() -> (common::Demo, Vec<(String, cairn_replay::audit::Audit)>) {
    let demo = common::demo();
    let audits = demo
        .sessions
        .iter()
        .map(|(name, dir)| {
            let verified = cairn_replay::verify(dir).unwrap();
            let session = cairn_replay::Session::load(dir).unwrap();
            (
                name.clone(),
                cairn_replay::audit::audit(&session, &verified),
            )
        })
        .collect();
    (demo, audits)
}

#[test]
fn audit_text_and_markdown_of_the_demo_sessions() {
    let (demo, audits) = audits();
    let paths = [demo.base.path(), demo.home.path()];
    for (name, a) in &audits {
        assert!(a.integrity.clean, "{:?}", a.integrity.list);
        assert_eq!(a.header.end_state.as_str(), "finished");
        let text = report::text(a, Paint::plain());
        insta::assert_snapshot!(
            format!("audit_text_{name}"),
            common::normalise(&text, &paths)
        );
        insta::assert_snapshot!(
            format!("audit_markdown_{name}"),
            common::normalise(&report::markdown(a), &paths)
        );
    }
}

#[test]
fn audit_gathers_refusals_permissions_network_and_commands() {
    let (_demo, audits) = audits();
    let (_, thoth) = audits.iter().find(|(n, _)| n == "thoth").unwrap();
    let rules: Vec<String> = thoth
        .refusals
        .iter()
        .map(|r| format!("{}:{:?}", r.tool, r.rule))
        .collect();
    assert!(
        rules.contains(&"edit_file:Some(ReadBeforeEdit)".to_string()),
        "{rules:?}"
    );
    assert!(
        rules.contains(&"write_file:Some(ReadBeforeOverwrite)".to_string()),
        "{rules:?}"
    );
    assert!(
        thoth
            .refusals
            .iter()
            .any(|r| r.status == cairn_engine::event::Status::Blocked)
    );
    assert!(
        thoth
            .refusals
            .iter()
            .any(|r| r.status == cairn_engine::event::Status::Denied)
    );
    assert!(
        thoth
            .commands
            .iter()
            .any(|c| c.command.contains("wc -l notes.txt"))
    );
    assert!(
        thoth.network.hosts.contains_key("169.254.169.254"),
        "{:?}",
        thoth.network
    );
    assert_eq!(thoth.network.searches.len(), 1);
    assert!(thoth.writes.iter().all(|w| w.diff.starts_with("--- a/")));
    // Every intent is followed by its end: one entry per change.
    assert!(
        thoth
            .writes
            .iter()
            .all(|w| w.status != cairn_engine::event::WriteStatus::Intent)
    );
}
