//! One-line summaries that several verbs print: a session (`cairn sessions` and the
//! browser's list), a call as it ends (the progress line of `run`, `resume`, `fork`
//! and `demo`, the live view's row) and an elapsed time. One of each, so the verbs
//! agree.

use std::path::{Path, PathBuf};

use cairn_engine::CallOutcome;
use cairn_engine::event::{Event, Status};
use cairn_engine::fold;

/// What a session's log says about it, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub id: String,
    pub dir: PathBuf,
    pub workspace: String,
    /// The catalogue the session offered (`thoth`, `thndrs`).
    pub catalog: String,
    pub started: String,
    /// `finished`, `failed` (ended because the provider failed), `interrupted`,
    /// `resumed`, or `running` (not ended, and its log's writer lock held by a live
    /// process).
    pub state: String,
    /// Records in the log, including ones this version cannot parse.
    pub records: u64,
    pub calls: u64,
    /// Calls whose status is not `ok`.
    pub not_ok: u64,
}

/// Reads a session's log once, start to end, into its row.
pub fn summarise(dir: &Path) -> cairn_store::Result<SessionRow> {
    let reader = cairn_store::LogReader::open(dir)?;
    let blobs = fold::project_blobs(dir);
    let mut row = SessionRow {
        id: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        dir: dir.to_path_buf(),
        workspace: String::new(),
        catalog: String::new(),
        started: String::new(),
        state: "interrupted".into(),
        records: 0,
        calls: 0,
        not_ok: 0,
    };
    for r in reader.records()? {
        let r = r?;
        row.records += 1;
        // A record this version cannot parse is counted and otherwise left to `verify`.
        match fold::parse_maybe_in(&r, blobs.as_ref()).map(|x| x.event) {
            Ok(Event::SessionStarted(st)) => {
                row.workspace = st.workspace;
                row.catalog = st.catalog;
                row.started = r.ts.clone();
            }
            Ok(Event::ToolStarted { .. }) => row.calls += 1,
            Ok(Event::ToolFinished(f)) if f.status != Status::Ok => row.not_ok += 1,
            Ok(Event::SessionEnded { failed, .. }) => {
                row.state = if failed { "failed" } else { "finished" }.into()
            }
            Ok(Event::SessionResumed { .. }) => row.state = "resumed".into(),
            _ => {}
        }
    }
    if !matches!(row.state.as_str(), "finished" | "failed")
        && cairn_store::writer_pid(dir).is_some()
    {
        row.state = "running".into();
    }
    Ok(row)
}

/// The first line of `text`, cut to `chars_max` characters.
pub fn first_line(text: &str, chars_max: usize) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(chars_max)
        .collect()
}

/// The line printed as a call ends: call, tool, status, the output's first line.
pub fn progress(o: &CallOutcome) -> String {
    format!(
        "{:<5} {:<22} {:<8} {}",
        o.call,
        o.tool,
        o.status.as_str(),
        first_line(&o.output, 60)
    )
}

/// Elapsed time for people: `850µs`, `12.3ms`, `1.25s`.
pub fn elapsed(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.2}s", us as f64 / 1e6)
    } else if us >= 1000 {
        format!("{:.1}ms", us as f64 / 1e3)
    } else {
        format!("{us}µs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_shows_the_first_line_of_the_output_cut_to_60_characters() {
        let o = CallOutcome {
            call: "c12".into(),
            tool: "read_file".into(),
            status: Status::Ok,
            output: format!("{}\nsecond", "x".repeat(70)),
            refusal: None,
            elapsed_us: 5,
        };
        assert_eq!(
            progress(&o),
            format!("c12   read_file              ok       {}", "x".repeat(60))
        );
    }

    #[test]
    fn elapsed_picks_the_unit() {
        let shown: Vec<String> = [999, 1000, 12_345, 1_000_000, 1_250_000]
            .into_iter()
            .map(elapsed)
            .collect();
        assert_eq!(shown, ["999µs", "1.0ms", "12.3ms", "1.00s", "1.25s"]);
    }
}
