//! Resume and fork: picking a session up where it stopped, or from any point.
//!
//! Resume lives in the engine ([`cairn_engine::Engine::resume`]), which owns the
//! runtime it rebuilds; this module re-exports it beside `fork`, which checks out the
//! parent's workspace at a seq and starts a session there that names its parent and
//! starts knowing what the parent knew at that point.

use std::path::Path;

use cairn_engine::event::Parent;
use cairn_engine::{Engine, EngineConfig, Home, State, inherit};
use cairn_store::{Hash, LogReader};
use serde::Serialize;

use crate::checkout::{CheckoutReport, checkout};
use crate::error::{ReplayError, Result};
use crate::session::check_session_dir;

pub use cairn_engine::{Finding, ResumeOptions, ResumeReport};

/// Resumes the session at `session_dir` (see [`Engine::resume`]).
pub fn resume(
    home: &Home,
    session_dir: &Path,
    options: ResumeOptions,
) -> Result<(Engine, ResumeReport)> {
    Ok(Engine::resume(home, session_dir, options)?)
}

/// What a fork made.
#[derive(Debug, Clone, Serialize)]
pub struct ForkReport {
    /// The new session.
    pub session: String,
    pub parent: String,
    pub at_seq: u64,
    /// The hash of the parent's record at `at_seq`.
    pub hash: Hash,
    pub checkout: CheckoutReport,
}

/// Forks the session at `parent_dir` after record `at_seq`: checks its workspace out
/// into `dest` (new or empty) and starts a session there whose `session_started` names
/// the parent (session, seq, record hash) and carries the parent's knowledge at that
/// seq (read coverage, memory, conversation). `config` defaults to the parent's.
pub fn fork(
    home: &Home,
    parent_dir: &Path,
    at_seq: u64,
    dest: &Path,
    config: Option<EngineConfig>,
) -> Result<(Engine, ForkReport)> {
    check_session_dir(parent_dir)?;
    let reader = LogReader::open(parent_dir)?;
    let blobs = crate::session::blob_store_of(parent_dir)?;
    let head = reader.tail()?.head.ok_or_else(|| ReplayError::Session {
        path: parent_dir.to_path_buf(),
        what: "the log is empty".into(),
    })?;
    if at_seq > head.seq {
        return Err(ReplayError::PastHead {
            at: at_seq,
            head: head.seq,
        });
    }
    // The parent's fold at the fork point, streamed.
    let mut state = State::default();
    let mut hash = Hash::ZERO;
    let mut started = None;
    for r in reader.records()? {
        let r = r?;
        if r.seq > at_seq {
            break;
        }
        hash = r.hash;
        match cairn_engine::fold::parse_in(&r, &blobs) {
            Ok(rec) => {
                if let cairn_engine::Event::SessionStarted(s) = &rec.event {
                    started = Some(s.clone());
                }
                state.apply(&rec);
            }
            Err(_) => state.apply_unknown(r.seq, &r.hash),
        }
    }
    let started = started.ok_or_else(|| ReplayError::Session {
        path: parent_dir.to_path_buf(),
        what: "the log does not start with session_started".into(),
    })?;
    let config = match config {
        Some(c) => c,
        None => {
            serde_json::from_value(started.config.clone()).map_err(|e| ReplayError::Session {
                path: parent_dir.to_path_buf(),
                what: format!("session_started.config does not parse: {e}"),
            })?
        }
    };
    let report = checkout(parent_dir, at_seq, dest)?;
    let parent = Parent {
        session: started.id.clone(),
        seq: at_seq,
        hash,
    };
    let engine = Engine::start_forked(home, dest, config, parent, inherit(&state))?;
    let report = ForkReport {
        session: engine.id().to_string(),
        parent: started.id,
        at_seq,
        hash,
        checkout: report,
    };
    Ok((engine, report))
}
