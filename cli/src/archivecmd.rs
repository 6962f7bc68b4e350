//! `cairn archive push|pull|list|verify|local`, and `archive:<id>` sessions for the
//! review verbs. The logic is in `cairn-archive`; this file finds the URL and the
//! sessions, prints and picks exit codes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow};
use cairn_archive::{Archive, LocalSession, Progress, PushOptions};
use cairn_engine::Home;
use cairn_engine::settings::Files;

use crate::out;
use crate::sessioncmd::Format;

/// The prefix that names an archived session in place of a local one.
pub const PREFIX: &str = "archive:";

/// The folder under the home where `archive:<id>` sessions are pulled to (a home of
/// its own: `projects/<key>/sessions/<id>`, `projects/<key>/blobs`).
pub const CACHE_DIR: &str = "archive-cache";

/// The global `--archive URL`, set once by `main`.
static FLAG_URL: OnceLock<String> = OnceLock::new();

pub fn set_flag_url(url: String) {
    let _ = FLAG_URL.set(url);
}

/// The archive's URL: `--archive` (or `--to`), then `CAIRN_ARCHIVE_URL`, then
/// `archive.url` of the project's configuration (the current directory's), then of the
/// user's.
pub fn url(given: Option<&str>) -> Result<String> {
    if let Some(u) = given.or(FLAG_URL.get().map(String::as_str)) {
        return Ok(u.to_string());
    }
    if let Some(u) = std::env::var("CAIRN_ARCHIVE_URL")
        .ok()
        .filter(|u| !u.is_empty())
    {
        return Ok(u);
    }
    let home = Home::from_env()?;
    let project = std::env::current_dir()
        .ok()
        .map(|cwd| home.project(&cwd.canonicalize().unwrap_or(cwd)));
    let files = Files::load(&home, project.as_ref())?;
    [files.project, files.user]
        .into_iter()
        .flatten()
        .find_map(|(_, s)| s.archive.and_then(|a| a.url))
        .ok_or_else(|| {
            anyhow!(
                "no archive given: add --archive postgres://USER@HOST:PORT/DB, set CAIRN_ARCHIVE_URL, or set url in the [archive] table of {}",
                home.root.join("config.toml").display()
            )
        })
}

pub fn connect(given: Option<&str>) -> Result<Archive> {
    let url = url(given)?;
    Archive::connect(&url).with_context(|| format!("archive {}", redact_url(&url)))
}

/// The URL without a password, for messages.
fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// An arbitrary, fixed key of the advisory lock held while the search tables are
/// created: `create table if not exists` is not safe against a second pusher doing the
/// same at the same time (both see no table; one fails on the catalog's unique key).
const SEARCH_SCHEMA_LOCK_KEY: i64 = 0x6361_6972_6e73_6368; // "cairnsch"

/// Creates the archive's search tables when missing, one pusher at a time.
fn search_schema(archive: &mut Archive) -> Result<()> {
    let mut tx = archive.client().transaction()?;
    tx.execute(
        "select pg_advisory_xact_lock($1)",
        &[&SEARCH_SCHEMA_LOCK_KEY],
    )?;
    cairn_search::pg::ensure_schema(&mut tx)?;
    tx.commit()?;
    Ok(())
}

/// A local session to push, with the home's verifier key.
fn local(dir: &Path, home: &Home) -> Result<LocalSession> {
    let mut s = LocalSession::at(dir)?;
    s.vkey = home.log_signer()?.map(|k| k.vkey());
    Ok(s)
}

pub struct PushArgs<'a> {
    pub session: Option<&'a str>,
    pub all: bool,
    pub to: Option<&'a str>,
    pub batch_records_max: usize,
    pub verbose: bool,
    pub json: bool,
}

/// `cairn archive push`: one session, or every session of the home. Exit 0 when every
/// session was pushed, 2 when one could not be (the others are pushed still).
pub fn push(a: &PushArgs<'_>) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let dirs: Vec<PathBuf> = match (a.session, a.all) {
        (Some(spec), false) => vec![crate::locate::session_dir(spec)?],
        (None, true) => home
            .projects()
            .iter()
            .flat_map(|p| p.sessions().into_iter().map(|s| p.session_dir(&s)))
            .collect(),
        _ => return Err(anyhow!("give a session or --all")),
    };
    if dirs.is_empty() {
        out::note(&format!(
            "cairn: no sessions in {}: nothing to push",
            home.root.display()
        ));
        return Ok(ExitCode::SUCCESS);
    }
    let mut archive = connect(a.to)?;
    search_schema(&mut archive)?;
    let options = PushOptions {
        batch_records_max: a.batch_records_max,
        ..PushOptions::default()
    };
    let mut failed = 0;
    for dir in dirs {
        let verbose = a.verbose;
        let result = local(&dir, &home).and_then(|s| {
            archive
                .push(&s, &options, &mut |p| {
                    if verbose {
                        match p {
                            Progress::Blobs {
                                session,
                                done,
                                total,
                            } => out::note(&format!("cairn: {session}: blobs {done}/{total}")),
                            Progress::Records {
                                session,
                                next,
                                total,
                            } => out::note(&format!("cairn: {session}: records {next}/{total}")),
                        }
                    }
                })
                .map_err(anyhow::Error::from)
                .and_then(|r| {
                    // What was pushed is searchable in the archive (`search --archive`).
                    let docs = cairn_search::SessionDocs::read(&dir)?;
                    cairn_search::pg::index_session(archive.client(), &docs)?;
                    Ok(r)
                })
        });
        match result {
            Ok(r) if a.json => out::line(&serde_json::to_string(&r)?)?,
            Ok(r) => out::line(&format!(
                "{}: {} records pushed ({} were archived, {} local), {}, {} checkpoints, {} signatures",
                r.session,
                r.records_pushed,
                r.records_before,
                r.records_local,
                blobs_said(r.blobs_pushed, r.blob_bytes_pushed, r.blobs_referenced),
                r.checkpoints_pushed,
                r.signatures_pushed
            ))?,
            Err(e) => {
                failed += 1;
                out::note(&format!("cairn: {}", out::error_text(&e)));
            }
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// `cairn archive pull SESSION [--to HOME]`.
pub fn pull(spec: &str, home: Option<&Path>, json: bool) -> Result<ExitCode> {
    let home = match home {
        Some(h) => Home::at(h),
        None => Home::from_env()?,
    };
    let mut archive = connect(None)?;
    let (id, _) = archive.resolve(spec.strip_prefix(PREFIX).unwrap_or(spec))?;
    let p = archive.pull(&id, &home.root)?;
    if json {
        out::line(&serde_json::to_string(&p)?)?;
    } else {
        out::line(&format!(
            "{}: pulled into {}: {} records ({} new), {} blobs ({} new), {} checkpoints",
            p.session,
            p.dir.display(),
            p.records,
            p.records_new,
            p.blobs,
            p.blobs_new,
            p.checkpoints
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `cairn archive list [--project P] [--json|--jsonl]`.
pub fn list(project: Option<&str>, format: Format) -> Result<ExitCode> {
    let mut archive = connect(None)?;
    let listed = archive.list(project)?;
    if format == Format::Json {
        out::line(&serde_json::to_string(&listed)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    for s in listed {
        if format == Format::Jsonl {
            out::line(&serde_json::to_string(&s)?)?;
        } else {
            out::line(&format!(
                "{}  {}  {} records  {} … {}  {} blobs  {} checkpoints",
                s.id,
                s.project,
                s.records,
                s.first_ts.as_deref().unwrap_or("-"),
                s.last_ts.as_deref().unwrap_or("-"),
                s.blobs,
                s.checkpoints
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cairn archive verify [SESSION|--all] [--key VKEY]… [--witness URL]…`: the stored
/// bytes, and the records against every checkpoint held elsewhere (the archive's
/// newest-checkpoint record, this home's checkpoint files of the session, each witness's
/// latest cosigned one). Exit 0 clean, 1 problems found, 2 could not run.
pub fn verify(
    spec: Option<&str>,
    all: bool,
    keys: &[String],
    witnesses: &[String],
    json: bool,
) -> Result<ExitCode> {
    let keys = keys
        .iter()
        .map(|k| {
            let text = if Path::new(k).is_file() {
                std::fs::read_to_string(k).with_context(|| k.clone())?
            } else {
                k.clone()
            };
            cairn_engine::tlog::Verifier::parse(text.trim()).with_context(|| format!("key {k}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut archive = connect(None)?;
    let ids = match (spec, all) {
        (Some(spec), false) => vec![
            archive
                .resolve(spec.strip_prefix(PREFIX).unwrap_or(spec))?
                .0,
        ],
        (None, true) => archive.session_ids()?,
        _ => return Err(anyhow!("give a session or --all")),
    };
    // The home's own copy of a session, when it has one: its checkpoint files were
    // written where the archive cannot reach them.
    let home = Home::from_env().ok();
    let in_home = |project: &str, id: &str| {
        let home = home.as_ref()?;
        let dir = cairn_engine::project::Project {
            dir: home.root.join("projects").join(project),
        }
        .session_dir(id);
        dir.is_dir().then_some(dir)
    };
    let role = |kind: &str| cairn_replay::role_of(kind);
    let r = archive.verify_with(
        &ids,
        &cairn_archive::VerifyOptions {
            keys: &keys,
            witnesses,
            home: &in_home,
            role: &role,
        },
    )?;
    if json {
        out::line(&serde_json::to_string(&r)?)?;
    } else {
        for p in &r.problems {
            out::line(&p.to_string())?;
        }
        out::line(&format!(
            "archive: {} sessions, {} records ({} bytes), {} blobs ({} bytes), {} checkpoints ({} signatures checked{}), {} held elsewhere compared ({} witness answers): {}",
            r.sessions,
            r.records,
            r.record_bytes,
            r.blobs,
            r.blob_bytes,
            r.checkpoints,
            r.signatures_checked,
            if r.signatures_unchecked > 0 {
                format!(", {} unchecked: no key", r.signatures_unchecked)
            } else {
                String::new()
            },
            r.held_checked,
            r.witnesses_asked,
            if r.is_clean() {
                "clean".to_string()
            } else {
                format!("{} problems", r.problems.len())
            }
        ))?;
    }
    Ok(if r.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `cairn archive local DIR`: start a local archive (or `--stop` it).
pub fn local_cluster(dir: &Path, port: Option<u16>, stop: bool, json: bool) -> Result<ExitCode> {
    if stop {
        cairn_archive::local::stop(dir)?;
        out::note(&format!("cairn: stopped the archive in {}", dir.display()));
        return Ok(ExitCode::SUCCESS);
    }
    let l = cairn_archive::local::start(dir, port)?;
    if json {
        out::line(&serde_json::to_string(&l)?)?;
    } else {
        out::note(&format!(
            "cairn: the archive in {} {} (stop it: cairn archive local {} --stop)",
            l.dir.display(),
            if l.started { "started" } else { "was running" },
            l.dir.display()
        ));
        out::line(&l.url)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The local folder of `archive:<spec>`: the session pulled (or brought up to date)
/// into the home's archive cache.
pub fn cached(spec: &str) -> Result<PathBuf> {
    let home = Home::from_env()?;
    let mut archive = connect(None)?;
    let (id, _) = archive.resolve(spec)?;
    let pulled = archive.pull(&id, &home.root.join(CACHE_DIR))?;
    Ok(pulled.dir)
}

/// The archive's sessions (those of the projects whose key holds `project`, with ids
/// on or after `since`), each pulled or brought up to date into the home's archive
/// cache; their folders, oldest first.
pub fn pull_all(project: Option<&str>, since: Option<&str>) -> Result<Vec<PathBuf>> {
    let home = Home::from_env()?;
    let mut archive = connect(None)?;
    let mut listed = archive.list(project)?;
    listed.retain(|l| since.is_none_or(|p| l.id.as_str() >= p));
    listed.sort_by(|a, b| a.id.cmp(&b.id));
    listed
        .iter()
        .map(|l| {
            Ok(archive
                .pull(&l.id, &home.root.join(CACHE_DIR))
                .with_context(|| format!("pull {}", l.id))?
                .dir)
        })
        .collect()
}

/// The blobs of a push, as a person reads them: how many went, and how many of those
/// the session refers to were in the archive already (not "0 pushed of 11").
fn blobs_said(pushed: u64, bytes: u64, referenced: u64) -> String {
    let there = referenced.saturating_sub(pushed);
    let n = |k: u64| format!("{k} blob{}", if k == 1 { "" } else { "s" });
    match (pushed, there) {
        (0, 0) => "no blobs".to_string(),
        (0, t) => format!("{} already there", n(t)),
        (p, 0) => format!("{} pushed ({bytes} bytes)", n(p)),
        (p, t) => format!("{} pushed ({bytes} bytes), {} already there", n(p), n(t)),
    }
}

#[cfg(test)]
mod tests {
    // Regression: a push of blobs the archive held said "0 blobs pushed … of 11".
    #[test]
    fn blobs_already_in_the_archive_are_said_to_be_there() {
        assert_eq!(super::blobs_said(0, 0, 11), "11 blobs already there");
        assert_eq!(super::blobs_said(1, 9, 1), "1 blob pushed (9 bytes)");
        assert_eq!(
            super::blobs_said(2, 30, 3),
            "2 blobs pushed (30 bytes), 1 blob already there"
        );
        assert_eq!(super::blobs_said(0, 0, 0), "no blobs");
    }
}
