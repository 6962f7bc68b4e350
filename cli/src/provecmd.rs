//! `cairn prove` and the proof checks of `cairn verify`: `--proof` (a tlog-proof
//! file, offline), `--since` (a session against an older checkpoint), `--policy` (a
//! checkpoint's witnesses against a quorum). The logic is in `cairn-tlog`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use cairn_engine::tlog::{self, Policy, TlogError, Verifier};

use crate::out;

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| path.display().to_string())
}

pub(crate) fn keys(vkeys: &[String]) -> Result<Vec<Verifier>> {
    vkeys
        .iter()
        .map(|k| {
            // A key given as a file holds the vkey on its first line.
            let text = if Path::new(k).is_file() {
                read(Path::new(k))?
            } else {
                k.clone()
            };
            Verifier::parse(text.lines().next().unwrap_or_default())
                .with_context(|| format!("--key {k}"))
        })
        .collect()
}

/// The witness policy in the file at `path`.
pub(crate) fn policy(path: &Path) -> Result<Policy> {
    Policy::parse(&read(path)?).with_context(|| format!("--policy {}", path.display()))
}

/// The log of a session, or the project allow log of a workspace.
fn log_dir(session: &str, allow: bool) -> Result<PathBuf> {
    if allow {
        return Ok(crate::sessioncmd::project_of(Path::new(session))?
            .dir
            .join("allow"));
    }
    crate::locate::session_dir(session)
}

/// Writes the proof of record `seq` (to `out_file`, or stdout).
pub fn prove(session: &str, seq: u64, out_file: Option<&Path>, allow: bool) -> Result<ExitCode> {
    let dir = log_dir(session, allow)?;
    let proof = tlog::log::prove(&dir, seq)?.to_text();
    match out_file {
        Some(path) => {
            std::fs::write(path, &proof).with_context(|| path.display().to_string())?;
            out::note(&format!(
                "cairn: wrote the proof of seq {seq} to {}",
                path.display()
            ));
        }
        None => {
            use std::io::Write as _;
            std::io::stdout().write_all(proof.as_bytes())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What `verify` checks beyond a session's own log.
pub struct Checks<'a> {
    pub since: Option<&'a Path>,
    pub policy: Option<&'a Path>,
    pub keys: &'a [String],
    pub json: bool,
}

fn refused(json: bool, what: &str, e: &dyn std::fmt::Display) -> Result<ExitCode> {
    if json {
        out::line(
            &serde_json::json!({"clean": false, "check": what, "problem": e.to_string()})
                .to_string(),
        )?;
    } else {
        out::line(&format!("{what}: {e}"))?;
    }
    Ok(ExitCode::from(1))
}

/// `verify --proof FILE`: offline, with the keys (or the policy's logs and quorum).
pub fn verify_proof(c: &Checks, proof: &Path) -> Result<ExitCode> {
    let text = read(proof)?;
    let policy = c
        .policy
        .map(read)
        .transpose()?
        .map(|p| Policy::parse(&p))
        .transpose()?;
    let mut keys = keys(c.keys)?;
    if let Some(p) = &policy {
        keys.extend(p.logs.iter().cloned());
    }
    if keys.is_empty() {
        bail!(
            "checking a proof needs the log's key: --key VKEY (`cairn key show` prints it) or --policy FILE"
        );
    }
    let proven = match tlog::log::verify_proof(&text, &keys) {
        Ok(p) => p,
        Err(TlogError::Io { .. } | TlogError::Store(_)) => unreachable!("no file is read"),
        Err(e) => return refused(c.json, "proof", &e),
    };
    if let Some(p) = &policy {
        let parsed = tlog::log::Proof::parse(&text)?;
        if let Err(e) = p.check(&parsed.checkpoint) {
            return refused(c.json, "policy", &e);
        }
    }
    if c.json {
        out::line(
            &serde_json::json!({
                "clean": true,
                "origin": proven.checkpoint.origin,
                "size": proven.checkpoint.size,
                "seq": proven.index,
                "record": proven.line,
            })
            .to_string(),
        )?;
    } else {
        out::line(&format!(
            "proven: record {} of {} (a tree of {} records), signed by {}",
            proven.index,
            proven.checkpoint.origin,
            proven.checkpoint.size,
            proven
                .signers
                .iter()
                .map(|(v, _)| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))?;
        out::line(&proven.line)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `verify SESSION --since FILE` and `verify SESSION --policy FILE`: the session's log
/// extends the older checkpoint (a consistency proof), and its newest checkpoint meets
/// the policy.
pub fn verify_session(c: &Checks, session: &Path) -> Result<ExitCode> {
    let dir = if session.is_dir() && !cairn_store::log_path(session).is_file() {
        session.to_path_buf()
    } else {
        crate::locate::session_dir(&session.to_string_lossy())?
    };
    let keys = keys(c.keys)?;
    let mut lines = Vec::new();
    if let Some(since) = c.since {
        match tlog::log::verify_since(&dir, &read(since)?, &keys) {
            Ok(ok) => lines.push(format!(
                "consistent: the log's {} records extend the checkpoint of {} ({} proof hashes)",
                ok.size,
                ok.old_size,
                ok.proof.len()
            )),
            Err(e @ (TlogError::Io { .. } | TlogError::Store(_))) => return Err(e.into()),
            Err(e) => return refused(c.json, "since", &e),
        }
    }
    if c.since.is_none() && c.policy.is_none() {
        // Keys alone: the newest signed checkpoint is the log's key's, and the log
        // extends it.
        let Some((size, path, note)) = tlog::log::latest_checkpoint(&dir)? else {
            return refused(
                c.json,
                "checkpoint",
                &"the session has no signed checkpoint",
            );
        };
        match tlog::log::verify_since(&dir, &note, &keys) {
            Ok(ok) => lines.push(format!(
                "signed: the checkpoint of {size} records ({}) verifies with the key, and the log's {} records extend it",
                path.display(),
                ok.size
            )),
            Err(e @ (TlogError::Io { .. } | TlogError::Store(_))) => return Err(e.into()),
            Err(e) => return refused(c.json, "checkpoint", &e),
        }
    }
    if let Some(policy) = c.policy {
        let policy = Policy::parse(&read(policy)?)?;
        let Some((size, path, note)) = tlog::log::latest_checkpoint(&dir)? else {
            return refused(c.json, "policy", &"the session has no signed checkpoint");
        };
        match policy.check(&note) {
            Ok(v) => lines.push(format!(
                "policy met: the checkpoint of {size} records ({}) is cosigned by {}",
                path.display(),
                if v.cosigned_by.is_empty() {
                    "no witness (quorum none)".into()
                } else {
                    v.cosigned_by.join(", ")
                }
            )),
            Err(e) => return refused(c.json, "policy", &e),
        }
        // The checkpoint the witnesses saw must also be this log's history.
        if let Err(e) = tlog::log::verify_since(&dir, &note, &policy.logs) {
            return refused(c.json, "policy", &e);
        }
    }
    if c.json {
        out::line(&serde_json::json!({"clean": true, "checks": lines}).to_string())?;
    } else {
        for l in lines {
            out::line(&l)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
