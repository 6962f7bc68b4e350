//! One-line summaries that several verbs print: a session (`cairn sessions` and the
//! browser's list), a call as it ends (the progress line of `run`, `resume`, `fork`
//! and `demo`, the live view's row) and an elapsed time. One of each, so the verbs
//! agree.

use cairn_engine::CallOutcome;
pub use cairn_replay::SessionRow;

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
    use std::path::PathBuf;

    use super::*;
    use cairn_engine::event::Status;

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
            replay: false,
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
