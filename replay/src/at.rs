//! `--at`: a point of a session, given as a seq, a call id (`c6`: the end of that call,
//! its `tool_finished`) or nothing (the session's last record).

use std::path::Path;

use cairn_core::event::Event;
use cairn_store::LogReader;

use crate::error::{ReplayError, Result};
use crate::session::{blob_store_of, check_session_dir};

/// A point of a session, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// The session's last record.
    End,
    /// After record `seq`.
    Seq(u64),
    /// After the call's `tool_finished`.
    Call(String),
}

impl std::str::FromStr for At {
    type Err = String;

    /// `12` (a seq), `c6` (a call), or `end`.
    fn from_str(s: &str) -> std::result::Result<At, String> {
        let s = s.trim();
        if s == "end" {
            return Ok(At::End);
        }
        if let Ok(seq) = s.parse::<u64>() {
            return Ok(At::Seq(seq));
        }
        match s.strip_prefix('c') {
            Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                Ok(At::Call(s.to_string()))
            }
            _ => Err(format!(
                "'{s}' is not a point of a session: give a seq (12), a call id (c6: the end of that call) or end"
            )),
        }
    }
}

/// The seq `at` names in the session at `session_dir`: the last record's for
/// [`At::End`], the call's `tool_finished` for [`At::Call`]. A seq past the last record
/// and a call that is not there, or never finished, are errors saying what to give.
pub fn resolve_at(session_dir: &Path, at: &At) -> Result<u64> {
    check_session_dir(session_dir)?;
    let reader = LogReader::open(session_dir)?;
    let head = reader.tail()?.head.ok_or_else(|| ReplayError::Session {
        path: session_dir.to_path_buf(),
        what: "the log is empty".into(),
    })?;
    let call = match at {
        At::End => return Ok(head.seq),
        At::Seq(seq) if *seq > head.seq => {
            return Err(ReplayError::PastHead {
                at: *seq,
                head: head.seq,
            });
        }
        At::Seq(seq) => return Ok(*seq),
        At::Call(call) => call,
    };
    let blobs = blob_store_of(session_dir)?;
    let mut started = None;
    let mut calls = 0u64;
    for r in reader.records()? {
        let r = r?;
        // A record that does not parse cannot be the call's: verify reports it.
        let Ok(rec) = cairn_tools::fold::parse_in(&r, &blobs) else {
            continue;
        };
        match &rec.event {
            Event::ToolStarted { call: c, .. } => {
                calls += 1;
                if c == call {
                    started = Some(rec.seq);
                }
            }
            Event::ToolFinished(f) if &f.call == call => return Ok(rec.seq),
            _ => {}
        }
    }
    let what = match started {
        Some(seq) => format!(
            "call {call} started at seq {seq} and never finished: give a seq instead (cairn log shows them)"
        ),
        None => format!(
            "no call {call} in this session (it has {calls} call{}: cairn show lists them)",
            if calls == 1 { "" } else { "s" }
        ),
    };
    Err(ReplayError::Session {
        path: session_dir.to_path_buf(),
        what,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_a_seq_a_call_or_end() {
        let check = |s: &str, expected: std::result::Result<At, &str>| {
            assert_eq!(s.parse::<At>(), expected.map_err(str::to_string), "{s}");
        };
        check("12", Ok(At::Seq(12)));
        check("0", Ok(At::Seq(0)));
        check("c6", Ok(At::Call("c6".into())));
        check("end", Ok(At::End));
        let bad = |s: &str| {
            format!(
                "'{s}' is not a point of a session: give a seq (12), a call id (c6: the end of that call) or end"
            )
        };
        for s in ["c", "cx", "-1", "6c", ""] {
            assert_eq!(s.parse::<At>(), Err(bad(s)), "{s}");
        }
    }
}
