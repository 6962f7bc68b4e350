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
    /// The first user message, on one line and cut to [`TASK_CHARS_MAX`] characters.
    pub task: String,
    /// The session this one was forked or replayed from.
    pub parent: Option<String>,
}

/// Characters of a session's task a listing shows.
pub const TASK_CHARS_MAX: usize = 60;

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
        task: String::new(),
        parent: None,
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
                row.parent = st.parent.map(|p| p.session);
            }
            Ok(Event::UserMessage { text, .. }) if row.task.is_empty() => {
                row.task = cairn_replay::audit::one_line(&text)
                    .chars()
                    .take(TASK_CHARS_MAX)
                    .collect();
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

/// A session on one line (`cairn sessions`): `id` (its short id), start time (to the
/// second, UTC), state, calls, catalog, workspace, the task in quotes, and the parent
/// of a fork.
pub fn session_line(s: &SessionRow, id: &str) -> String {
    let started: String = s
        .started
        .chars()
        .take(19)
        .collect::<String>()
        .replace('T', " ");
    let mut line = format!(
        "{id:<6}  {started:<19}  {:<11} {:>10}  {:<7} {}",
        s.state,
        count(s.calls, "call"),
        s.catalog,
        s.workspace
    );
    if !s.task.is_empty() {
        line.push_str(&format!("  \"{}\"", s.task));
    }
    if let Some(p) = &s.parent {
        line.push_str(&format!("  (from {p})"));
    }
    line
}

/// The first line of `text` for people, cut to `chars_max` characters: a tab (a
/// read's line numbers end with one) is two spaces, other control characters are
/// dropped, so a terminal's columns stay where they are.
pub fn first_line(text: &str, chars_max: usize) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .flat_map(|c| match c {
            '\t' => vec![' ', ' '],
            c if c.is_control() => vec![],
            c => vec![c],
        })
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

pub use cairn_replay::audit::Price;

/// The prices of a configuration's `[prices."MODEL"]` tables.
pub fn prices_of(
    set: &std::collections::BTreeMap<String, cairn_engine::settings::Price>,
) -> std::collections::BTreeMap<String, Price> {
    set.iter()
        .map(|(model, p)| {
            (
                model.clone(),
                Price {
                    input_per_mtok: p.input_per_mtok,
                    output_per_mtok: p.output_per_mtok,
                    cached_per_mtok: p.cached_per_mtok.unwrap_or(p.input_per_mtok),
                },
            )
        })
        .collect()
}

/// What the cost of an audit says: `$0.0123 (m-1 $0.0100, m-2 $0.0023; no price for
/// m-3)`.
pub fn cost_line(c: &cairn_replay::audit::Cost) -> String {
    let mut parts: Vec<String> = c
        .models
        .iter()
        .map(|(m, d)| format!("{m} ${d:.4}"))
        .collect();
    if !c.unpriced.is_empty() {
        parts.push(format!("no price for {}", c.unpriced.join(", ")));
    }
    if parts.is_empty() {
        return format!("${:.4}", c.total);
    }
    format!("${:.4} ({})", c.total, parts.join("; "))
}

/// Bytes a prices file may hold.
pub const PRICES_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// Reads a prices file (see [`parse_prices`]), at most [`PRICES_FILE_BYTES_MAX`] bytes.
pub fn read_prices(path: &Path) -> Result<std::collections::BTreeMap<String, Price>, String> {
    use std::io::Read;
    let what = |e: String| format!("prices file {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(|e| what(e.to_string()))?;
    let mut text = String::new();
    file.take(PRICES_FILE_BYTES_MAX + 1)
        .read_to_string(&mut text)
        .map_err(|e| what(e.to_string()))?;
    if text.len() as u64 > PRICES_FILE_BYTES_MAX {
        return Err(what(format!(
            "longer than prices_file_bytes_max ({PRICES_FILE_BYTES_MAX} bytes): give only the models you use"
        )));
    }
    parse_prices(&text).map_err(what)
}

/// Parses prices: a JSON object from model name to `{"input_per_mtok": N,
/// "output_per_mtok": N, "cached_per_mtok": N}` (dollars per million tokens, at least
/// 0; `cached_per_mtok` may be left out).
pub fn parse_prices(text: &str) -> Result<std::collections::BTreeMap<String, Price>, String> {
    const EXAMPLE: &str =
        r#"{"MODEL": {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "cached_per_mtok": 0.3}}"#;
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON ({e}); expected {EXAMPLE}"))?;
    let map = v
        .as_object()
        .ok_or_else(|| format!("expected an object of models, as {EXAMPLE}"))?;
    let mut out = std::collections::BTreeMap::new();
    for (model, p) in map {
        let field = |k: &str, required: bool| -> Result<Option<f64>, String> {
            match p.get(k) {
                None if required => Err(format!(
                    "model \"{model}\": {k} is missing (dollars per million tokens)"
                )),
                None => Ok(None),
                Some(x) => match x.as_f64() {
                    Some(n) if n >= 0.0 && n.is_finite() => Ok(Some(n)),
                    _ => Err(format!(
                        "model \"{model}\": {k} is {x}, not a number of dollars at least 0"
                    )),
                },
            }
        };
        if !p.is_object() {
            return Err(format!(
                "model \"{model}\": expected an object, as {EXAMPLE}"
            ));
        }
        if let Some(k) = p.as_object().and_then(|o| {
            o.keys().find(|k| {
                !["input_per_mtok", "output_per_mtok", "cached_per_mtok"].contains(&k.as_str())
            })
        }) {
            return Err(format!(
                "model \"{model}\": unknown field {k} (input_per_mtok, output_per_mtok, cached_per_mtok)"
            ));
        }
        let input = field("input_per_mtok", true)?.unwrap_or(0.0);
        out.insert(
            model.clone(),
            Price {
                input_per_mtok: input,
                output_per_mtok: field("output_per_mtok", true)?.unwrap_or(0.0),
                cached_per_mtok: field("cached_per_mtok", false)?.unwrap_or(input),
            },
        );
    }
    Ok(out)
}

/// `n` and a noun, singular or plural: `1 call`, `2 calls`, `0 bytes`. Nouns whose
/// plural is not `-s` are given as `one|many` (`1 process`, `2 processes` from
/// `process|processes`).
pub fn count(n: u64, noun: &str) -> String {
    let (one, many) = match noun.split_once('|') {
        Some((one, many)) => (one.to_string(), many.to_string()),
        None => (noun.to_string(), format!("{noun}s")),
    };
    format!("{n} {}", if n == 1 { one } else { many })
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

    /// A regression test: a read's first line reached the terminal with its raw tab.
    #[test]
    fn a_first_line_has_no_tab_nor_control_character() {
        assert_eq!(
            first_line("     1\t/// The greeting\u{7}\r\n     2\t", 80),
            "     1  /// The greeting"
        );
        assert_eq!(first_line("a\tb", 2), "a ");
    }

    #[test]
    fn progress_shows_the_first_line_of_the_output_cut_to_60_characters() {
        let o = CallOutcome {
            call: "c12".into(),
            tool: "read_file".into(),
            status: Status::Ok,
            output: format!("{}\nsecond", "x".repeat(70)),
            refusal: None,
            elapsed_us: 5,
            mcp_result: None,
        };
        assert_eq!(
            progress(&o),
            format!("c12   read_file              ok       {}", "x".repeat(60))
        );
    }

    #[test]
    fn prices_parse_and_bad_ones_say_what_is_wrong() {
        let p = parse_prices(r#"{"m-1": {"input_per_mtok": 2, "output_per_mtok": 10}}"#).unwrap();
        let t = cairn_replay::audit::TokenUse {
            input: 1_000_000,
            output: 500_000,
            cached: 250_000,
            ..Default::default()
        };
        assert_eq!(p["m-1"].cost(&t), 2.0 + 5.0);
        let with_cache = parse_prices(
            r#"{"m-1": {"input_per_mtok": 2, "output_per_mtok": 10, "cached_per_mtok": 0.5}}"#,
        )
        .unwrap();
        assert_eq!(with_cache["m-1"].cost(&t), 1.5 + 0.125 + 5.0);
        let errors: Vec<String> = [
            "[1]",
            r#"{"m": {"output_per_mtok": 1}}"#,
            r#"{"m": {"input_per_mtok": -1, "output_per_mtok": 1}}"#,
            r#"{"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cache": 1}}"#,
        ]
        .iter()
        .map(|t| parse_prices(t).unwrap_err())
        .collect();
        assert!(
            errors[0].starts_with("expected an object of models"),
            "{errors:?}"
        );
        assert_eq!(
            errors[1..],
            [
                "model \"m\": input_per_mtok is missing (dollars per million tokens)",
                "model \"m\": input_per_mtok is -1, not a number of dollars at least 0",
                "model \"m\": unknown field cache (input_per_mtok, output_per_mtok, cached_per_mtok)",
            ]
        );
    }

    #[test]
    fn a_prices_file_is_read_up_to_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prices.json");
        let body = r#"{"m": {"input_per_mtok": 1, "output_per_mtok": 1}}"#;
        let pad = PRICES_FILE_BYTES_MAX as usize - body.len();
        std::fs::write(&file, format!("{}{body}", " ".repeat(pad))).unwrap();
        assert_eq!(read_prices(&file).unwrap().len(), 1);
        std::fs::write(&file, format!("{}{body}", " ".repeat(pad + 1))).unwrap();
        assert!(read_prices(&file).unwrap_err().ends_with(
            "longer than prices_file_bytes_max (1048576 bytes): give only the models you use"
        ));
    }

    #[test]
    fn a_session_line_has_start_state_calls_task_and_parent() {
        let row = SessionRow {
            id: "20261130T120000.000000-abcdef".into(),
            dir: PathBuf::from("/h/s"),
            workspace: "/w".into(),
            catalog: "thoth".into(),
            started: "2026-11-30T12:00:00.123456Z".into(),
            state: "running".into(),
            records: 9,
            calls: 1,
            not_ok: 0,
            task: "fix the build".into(),
            parent: Some("20261129T100000.000000-fedcba".into()),
        };
        assert_eq!(
            session_line(&row, &row.id),
            "20261130T120000.000000-abcdef  2026-11-30 12:00:00  running         1 call  thoth   /w  \"fix the build\"  (from 20261129T100000.000000-fedcba)"
        );
        let plain = SessionRow {
            task: String::new(),
            parent: None,
            calls: 2,
            ..row
        };
        assert!(session_line(&plain, &plain.id).ends_with("running        2 calls  thoth   /w"));
    }

    #[test]
    fn count_is_singular_for_one_only() {
        let shown: Vec<String> = [0, 1, 2]
            .into_iter()
            .flat_map(|n| [count(n, "call"), count(n, "process|processes")])
            .collect();
        assert_eq!(
            shown,
            [
                "0 calls",
                "0 processes",
                "1 call",
                "1 process",
                "2 calls",
                "2 processes"
            ]
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
