//! The sample sessions committed under `tests/data/sample-home` (one per catalog,
//! recorded by `cairn demo` and kept as they were written): they deep-verify clean and
//! replay identically with this version of cairn. They double as test vectors of the
//! whole format: log, blobs and manifest. A change that breaks them breaks old logs.

use std::path::{Path, PathBuf};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// The sample home copied into a temporary folder (a replay records a new session in
/// its home, and the repository's copy must stay as committed), and its sessions.
fn samples() -> (tempfile::TempDir, Vec<PathBuf>) {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("data/sample-home"),
        tmp.path(),
    );
    let home = cairn_engine::Home::at(tmp.path());
    let sessions: Vec<PathBuf> = home
        .projects()
        .into_iter()
        .flat_map(|p| p.sessions().into_iter().map(move |s| p.session_dir(&s)))
        .collect();
    assert_eq!(sessions.len(), 2, "one sample session per catalog");
    (tmp, sessions)
}

#[test]
fn committed_sample_sessions_verify_clean() {
    let (_tmp, sessions) = samples();
    for dir in sessions {
        let (report, problems) = cairn_replay::verify(&dir).unwrap();
        assert!(problems.is_empty(), "{}: {problems:?}", dir.display());
        assert!(report.records > 40, "{report:?}");
    }
}

/// Answers this version words differently, on purpose, from the version that recorded
/// the samples: (tool, the recorded answer, the answer now), each whole. Replay compares
/// outputs verbatim, so it must report each of these as a divergence of the output, and
/// nothing else. The samples stay as they were written: they are old logs.
const REWORDED: &[(&str, &str, &str)] = &[(
    // The answer named an "engine configuration" no user could find; it names the key
    // of config.toml now.
    "problems",
    "no check command is configured: set check_command in the engine configuration (cairn run --check \"cargo check --message-format=json\"), e.g. [\"cargo\", \"check\", \"--message-format=json\"] or [\"npx\", \"tsc\", \"--noEmit\"]\n",
    "no check command is configured: the person running cairn sets one with `check = \"cargo check --message-format=json\"` (or \"npx tsc --noEmit\") in config.toml, the user's or the project's (`cairn config` shows where they are)\n",
)];

#[test]
fn committed_sample_sessions_replay_identically_but_for_reworded_answers() {
    let (_tmp, sessions) = samples();
    let mut reworded = Vec::new();
    for dir in sessions {
        let report = cairn_replay::replay(&dir, cairn_replay::ReplayOptions::default()).unwrap();
        for d in &report.divergences {
            let known = d.diff.field == cairn_replay::Field::Output
                && REWORDED.iter().any(|(tool, expected, actual)| {
                    d.tool == *tool && d.diff.expected == *expected && d.diff.actual == *actual
                });
            assert!(known, "{}: {d:?}", dir.display());
            reworded.push(d.tool.clone());
        }
        assert!(report.rerun > 5, "{report:?}");
    }
    // The thoth sample calls problems once without a check command.
    assert_eq!(reworded, ["problems"]);
}
