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

/// The line printed as a call ends: call, tool, status, the output's first line
/// whole (up to [`PROGRESS_LINE_CHARS_MAX`] characters, the rest counted): a terminal
/// wraps it with [`wrap`], a file or a pipe gets it on one line.
pub fn progress(o: &CallOutcome) -> String {
    let line = o.output.lines().next().unwrap_or("");
    let shown = first_line(line, PROGRESS_LINE_CHARS_MAX);
    let left = line.chars().count().saturating_sub(PROGRESS_LINE_CHARS_MAX);
    let mut text = format!(
        "{:<5} {:<22} {:<8} {shown}",
        o.call,
        o.tool,
        o.status.as_str(),
    );
    if left > 0 {
        text.push_str(&format!("…(+{left} characters)"));
    }
    text
}

/// The most characters of an output's first line a progress line shows.
pub const PROGRESS_LINE_CHARS_MAX: usize = 2000;

/// Columns of a progress line before the output's first line: where its wrapped
/// lines start.
pub const PROGRESS_INDENT_COLUMNS: usize = 38;

/// `text` (one line) wrapped at spaces to `width` columns, the lines after the first
/// indented by `indent` spaces; a word longer than a line is cut where the line ends.
/// Nothing is dropped.
pub fn wrap(text: &str, width: usize, indent: usize) -> String {
    // Too narrow to indent usefully: the wrapped lines start at the left.
    let indent = if width >= indent + 20 { indent } else { 0 };
    let width = width.max(indent + 1);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut cols = 0usize;
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let begin = if lines.is_empty() { 0 } else { indent };
            // The space before the word (the spaces of a padded column are kept).
            let sep = usize::from(cols > begin);
            if cols + sep + word.len() <= width {
                if sep == 1 {
                    line.push(' ');
                }
                line.extend(word.iter());
                cols += sep + word.len();
                break;
            }
            let room = width.saturating_sub(cols + sep);
            if (cols > begin && word.len() <= width - indent) || room == 0 {
                // The word goes whole on the next line.
                lines.push(std::mem::replace(&mut line, " ".repeat(indent)));
                cols = indent;
                continue;
            }
            // Longer than any line: this one is filled, the rest goes on.
            if sep == 1 {
                line.push(' ');
            }
            line.extend(word.drain(..room.min(word.len())));
            lines.push(std::mem::replace(&mut line, " ".repeat(indent)));
            cols = indent;
            if word.is_empty() {
                break;
            }
        }
    }
    lines.push(line);
    lines
        .iter()
        .map(|l| l.trim_end())
        .collect::<Vec<_>>()
        .join("\n")
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

/// How long each call waited for a person's permission answers, from its records as
/// they come: from each `permission_requested` to its `permission_decided` answered
/// by the user. A call's time shown to a person is its `elapsed_us` less this wait,
/// which is shown apart.
#[derive(Debug, Default)]
pub struct PersonWaits {
    /// The questions not yet answered, by call and key: when they were asked (µs).
    asked: std::collections::HashMap<(String, String), i64>,
    /// The wait so far of each running call, in microseconds.
    waited: std::collections::HashMap<String, u64>,
}

impl PersonWaits {
    /// Takes the next record.
    pub fn apply(&mut self, r: &cairn_engine::Record) {
        use cairn_engine::event::{AnswerSource, Event};
        match &r.event {
            // A call id started again is another call.
            Event::ToolStarted { call, .. } => {
                self.waited.remove(call);
            }
            Event::PermissionRequested { call, key, .. } => {
                if let Some(at) = micros(r.time()) {
                    self.asked.insert((call.clone(), key.clone()), at);
                }
            }
            Event::PermissionDecided {
                call, key, source, ..
            } => {
                let asked = self.asked.remove(&(call.clone(), key.clone()));
                if let (Some(asked), Some(now), AnswerSource::User) =
                    (asked, micros(r.time()), source)
                {
                    let wait = u64::try_from(now.saturating_sub(asked)).unwrap_or(0);
                    *self.waited.entry(call.clone()).or_default() += wait;
                }
            }
            _ => {}
        }
    }

    /// The wait of `call` so far, in microseconds (0 when nobody was asked).
    pub fn of(&self, call: &str) -> u64 {
        self.waited.get(call).copied().unwrap_or(0)
    }
}

/// Microseconds since the epoch of a record's RFC 3339 time.
fn micros(ts: &str) -> Option<i64> {
    ts.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_microsecond())
}

/// A call's time for people: its own run time, and the wait for a person apart
/// (`1.2ms (waited 3.10s for permission)`, as `show` and `audit` say it) when there
/// was one.
pub fn run_time(elapsed_us: u64, waited_us: u64) -> String {
    let own = elapsed(elapsed_us.saturating_sub(waited_us));
    if waited_us == 0 {
        own
    } else {
        format!("{own} (waited {} for permission)", elapsed(waited_us))
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

    fn outcome(output: String) -> CallOutcome {
        CallOutcome {
            call: "c12".into(),
            tool: "read_file".into(),
            status: Status::Ok,
            output,
            refusal: None,
            elapsed_us: 5,
            mcp_result: None,
        }
    }

    /// A regression test (issue 43): the progress line cut the output's first line at
    /// 60 characters, mid-sentence (`… private-network target (127.0.0.1 is`).
    #[test]
    fn progress_shows_the_whole_first_line_of_the_output_up_to_its_limit() {
        let sentence = "refused: 127.0.0.1 is a private-network target (127.0.0.1 is in 127.0.0.0/8): web_fetch reaches public hosts only";
        assert_eq!(
            progress(&outcome(format!("{sentence}\nsecond"))),
            format!("c12   read_file              ok       {sentence}")
        );
        // At the limit, whole; past it, the rest counted.
        let at = "x".repeat(PROGRESS_LINE_CHARS_MAX);
        assert!(progress(&outcome(at.clone())).ends_with(&format!(" {at}")));
        let past = progress(&outcome("y".repeat(PROGRESS_LINE_CHARS_MAX + 3)));
        assert!(
            past.ends_with(&format!(
                "{}…(+3 characters)",
                "y".repeat(PROGRESS_LINE_CHARS_MAX)
            )),
            "{past}"
        );
    }

    /// Wrapping keeps every word whole and in order, each line within the width, the
    /// lines after the first indented; a word longer than a line is cut, not lost.
    #[test]
    fn wrap_breaks_at_spaces_within_the_width_and_loses_nothing() {
        let line = progress(&outcome(
            "refused: 127.0.0.1 is a private-network target (127.0.0.1 is in 127.0.0.0/8): web_fetch reaches public hosts only".into(),
        ));
        for width in [60, 80, 100] {
            let wrapped = wrap(&line, width, PROGRESS_INDENT_COLUMNS);
            let lines: Vec<&str> = wrapped.lines().collect();
            assert!(lines.len() > 1, "{wrapped}");
            assert!(
                lines.iter().all(|l| l.chars().count() <= width),
                "{wrapped}"
            );
            assert!(
                lines[1..]
                    .iter()
                    .all(|l| l.starts_with(&" ".repeat(PROGRESS_INDENT_COLUMNS))
                        && !l[PROGRESS_INDENT_COLUMNS..].starts_with(' ')),
                "{wrapped}"
            );
            let words = |t: &str| t.split_whitespace().map(str::to_string).collect::<Vec<_>>();
            assert_eq!(words(&wrapped), words(&line), "{wrapped}");
            // The padded columns of the first line are kept as they were.
            assert!(lines[0].starts_with("c12   read_file              ok       refused:"));
        }
        // Fits: unchanged.
        assert_eq!(wrap("a  b", 10, 4), "a  b");
        // A word longer than a line is cut where the line ends, and goes on.
        assert_eq!(wrap("ab cdefghij", 5, 0), "ab cd\nefghi\nj");
        // Too narrow for the indent: wrapped lines start at the left.
        assert_eq!(wrap("aaa bbb ccc", 7, 38), "aaa bbb\nccc");
    }

    fn rec(seq: u64, ts: &str, event: serde_json::Value) -> cairn_engine::Record {
        cairn_engine::Record {
            seq,
            ts: ts.into(),
            hash: cairn_store::Hash::of(b""),
            event: serde_json::from_value(event).unwrap(),
        }
    }

    /// Only a person's answers count, from the question to the answer; a call id
    /// started again starts from nothing.
    #[test]
    fn person_waits_count_from_question_to_a_persons_answer() {
        let mut w = PersonWaits::default();
        let ask = |seq, ts: &str, call: &str, key: &str| {
            rec(
                seq,
                ts,
                serde_json::json!({"type": "permission_requested", "call": call, "key": key, "detail": "d"}),
            )
        };
        let answer = |seq, ts: &str, call: &str, key: &str, source: &str| {
            rec(
                seq,
                ts,
                serde_json::json!({"type": "permission_decided", "call": call, "key": key, "answer": "once", "source": source}),
            )
        };
        let start = |seq, call: &str| {
            rec(
                seq,
                "2026-01-01T00:00:00Z",
                serde_json::json!({"type": "tool_started", "call": call, "tool": "shell", "input": {}}),
            )
        };
        for r in [
            start(1, "c1"),
            ask(2, "2026-01-01T00:00:01.000000Z", "c1", "shell:ls"),
            answer(3, "2026-01-01T00:00:03.500000Z", "c1", "shell:ls", "user"),
            ask(4, "2026-01-01T00:00:04Z", "c1", "shell:rm"),
            answer(5, "2026-01-01T00:00:04.250000Z", "c1", "shell:rm", "user"),
            start(6, "c2"),
            ask(7, "2026-01-01T00:00:05Z", "c2", "shell:cat"),
            answer(8, "2026-01-01T00:00:09Z", "c2", "shell:cat", "policy"),
        ] {
            w.apply(&r);
        }
        assert_eq!(w.of("c1"), 2_750_000);
        assert_eq!(w.of("c2"), 0);
        w.apply(&start(9, "c1"));
        assert_eq!(w.of("c1"), 0);
        assert_eq!(
            run_time(3_000_000, 2_750_000),
            "250.0ms (waited 2.75s for permission)"
        );
        assert_eq!(run_time(1500, 0), "1.5ms");
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
