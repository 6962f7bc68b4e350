//! The HTML report's timeline: an SVG of the calls and processes against time, one bar
//! each up to [`TIMELINE_BARS_MAX`] calls, columns of calls counted by status past it.
//! SVG elements are written with their end tags (`<rect …></rect>`): in an HTML page
//! an SVG element is not void, and a `<rect …>` left open would hold what follows.

use std::collections::BTreeMap;

use cairn_replay::audit::Audit;
use maud::{Markup, html as h};

use super::sections::kind;
use super::{TIMELINE_BARS_MAX, TIMELINE_BUCKETS};
use crate::summary::{count, elapsed};

const LABEL_W: f64 = 190.0;
const PLOT_W: f64 = 780.0;
/// The grey of the time spent waiting for a permission answer.
const WAIT: &str = "#b0b7bf";

/// The colour of a status on the timeline.
pub(super) fn colour(status: &str) -> &'static str {
    match status {
        "ok" => "#2e9e4f",
        "error" | "failed" => "#d64541",
        "denied" => "#8e44ad",
        "blocked" => "#e67e22",
        "timeout" => "#c0392b",
        "cancelled" => "#7f8c8d",
        "running" | "unfinished" | "interrupted" => "#f1c40f",
        _ => "#3498db",
    }
}

/// A length in the SVG's units, as the attributes write it.
fn n(x: f64) -> String {
    format!("{x:.1}")
}

/// The span of the timeline's axis: the calls and processes (the session's start
/// includes the scan of the workspace, which would squeeze every bar to the right).
fn axis(a: &Audit) -> (u64, f64) {
    let spans = || {
        let calls = a.calls.iter().map(|c| (c.start_ms, c.end_ms));
        calls.chain(a.commands.iter().map(|c| (c.start_ms, c.end_ms)))
    };
    let t0 = spans().map(|(start, _)| start).min().unwrap_or(0);
    let t1 = spans()
        .map(|(_, end)| end)
        .max()
        .unwrap_or(a.header.duration_ms);
    (t0, t1.saturating_sub(t0).max(1) as f64)
}

/// The SVG element, `height` tall, with five ticks of the time axis.
fn svg(t0: u64, span: f64, height: f64, inner: Markup) -> Markup {
    let ticks = (0..=4).map(|i| {
        let ms = t0 + (span * f64::from(i) / 4.0) as u64;
        let tx = n(LABEL_W + PLOT_W * f64::from(i) / 4.0);
        let anchor = if i == 4 { "end" } else { "middle" };
        (tx, anchor, elapsed(ms.saturating_sub(t0) * 1000))
    });
    h! {
        svg xmlns="http://www.w3.org/2000/svg"
            viewBox={ "0 0 " (LABEL_W + PLOT_W + 10.0) " " (height) }
            role="img" aria-label="timeline" {
            @for (tx, anchor, at) in ticks {
                line x1=(tx) y1="18" x2=(tx) y2=(n(height - 5.0)) stroke="#eee" {}
                text x=(tx) y="13" font-size="10" text-anchor=(anchor) fill="#666" { "+" (at) }
            }
            (inner)
        }
    }
}

/// The timeline: one bar per call and per process up to [`TIMELINE_BARS_MAX`] calls
/// (a call's wait for a permission answer drawn grey, apart from its run), each linking
/// to the call in the conversation; past it, [`buckets`].
pub(super) fn timeline(a: &Audit) -> Markup {
    if a.calls.len() > TIMELINE_BARS_MAX {
        return buckets(a);
    }
    let (t0, span) = axis(a);
    let row_h = 18.0;
    let height = 30.0 + row_h * (a.calls.len() + a.commands.len()) as f64 + 10.0;
    let x = |ms: u64| LABEL_W + PLOT_W * (ms.saturating_sub(t0) as f64 / span);
    let ys = (0..).map(|i| 24.0 + row_h * f64::from(i));
    let calls = a.calls.iter().zip(ys.clone()).map(|(c, y)| {
        let label: String = format!("{} {}", c.call, c.tool).chars().take(28).collect();
        let title = format!(
            "{} {} {} (ran {}{}): {}",
            c.call,
            c.tool,
            c.status,
            c.elapsed_us.map_or("-".into(), elapsed),
            c.wait_ms.map_or(String::new(), |w| format!(
                ", waited {} for permission",
                elapsed(w * 1000)
            )),
            c.summary
        );
        let x0 = x(c.start_ms);
        let w = (x(c.end_ms) - x0).max(2.0);
        let wait = (x(c.start_ms + c.wait_ms.unwrap_or(0)) - x0).min(w);
        let bar = Bar {
            call: &c.call,
            class: "bar call",
            status: &c.status,
            title,
            label,
            x0,
            y,
            w,
            wait,
        };
        bar.markup(row_h)
    });
    let processes = a.commands.iter().zip(ys.skip(a.calls.len())).map(|(c, y)| {
        let label: String = format!("{} {}", c.id.as_deref().unwrap_or("$"), c.command)
            .chars()
            .take(28)
            .collect();
        let x0 = x(c.start_ms);
        let bar = Bar {
            call: &c.call,
            class: "bar process",
            status: &c.status,
            title: format!("{} {} {}: {}", c.call, kind(c), c.status, c.command),
            label,
            x0,
            y,
            w: (x(c.end_ms) - x0).max(2.0),
            wait: 0.0,
        };
        bar.markup(row_h)
    });
    svg(
        t0,
        span,
        height,
        h! { @for b in calls { (b) } @for b in processes { (b) } },
    )
}

/// One bar of the timeline, linked to its call.
struct Bar<'a> {
    call: &'a str,
    class: &'static str,
    status: &'a str,
    title: String,
    label: String,
    x0: f64,
    y: f64,
    w: f64,
    /// The width of the wait for a permission answer (drawn when at least 1).
    wait: f64,
}

impl Bar<'_> {
    fn markup(&self, row_h: f64) -> Markup {
        let (x0, y) = (n(self.x0), n(self.y));
        h! {
            a href={ "#call-" (self.call) } {
                g class=(self.class) data-status=(self.status) {
                    title { (self.title) }
                    text x="4" y=(n(self.y + row_h - 6.0)) font-size="11" fill="#333" { (self.label) }
                    rect x=(x0) y=(y) width=(n(self.w)) height=(n(row_h - 4.0)) rx="2"
                        fill=(colour(self.status)) {}
                    @if self.wait >= 1.0 {
                        rect class="wait" x=(x0) y=(y) width=(n(self.wait))
                            height=(n(row_h - 4.0)) fill=(WAIT) {}
                    }
                }
            }
        }
    }
}

/// Per column of time: the calls started in it by status, the first of them, and the
/// time they waited for permission answers.
type Column<'a> = (BTreeMap<&'a str, u64>, Option<&'a str>, u64);

/// The timeline of a long session: the time axis cut into [`TIMELINE_BUCKETS`]
/// columns, each a stack of the calls started in it by status, with a grey row below
/// for the time spent waiting for permission answers; a column links to its first call.
fn buckets(a: &Audit) -> Markup {
    let (t0, span) = axis(a);
    let nb = TIMELINE_BUCKETS;
    let bucket =
        |ms: u64| (((ms.saturating_sub(t0)) as f64 / span * nb as f64) as usize).min(nb - 1);
    let mut cols: Vec<Column<'_>> = vec![(BTreeMap::new(), None, 0); nb];
    for c in &a.calls {
        let col = &mut cols[bucket(c.start_ms)];
        *col.0.entry(c.status.as_str()).or_default() += 1;
        col.1.get_or_insert(c.call.as_str());
        col.2 += c.wait_ms.unwrap_or(0);
    }
    let most = cols
        .iter()
        .map(|c| c.0.values().sum::<u64>())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let most_wait = cols.iter().map(|c| c.2).max().unwrap_or(0);
    let (plot_h, wait_h) = (140.0, 30.0);
    let height = 24.0 + plot_h + 8.0 + wait_h + 20.0;
    let col_w = PLOT_W / nb as f64;
    let bar_w = n((col_w - 1.0).max(1.0));
    let columns = cols
        .iter()
        .enumerate()
        .filter_map(|(i, (statuses, first, wait))| {
            let first = (*first)?;
            let total: u64 = statuses.values().sum();
            let x0 = n(LABEL_W + col_w * i as f64);
            let parts: Vec<String> = statuses.iter().map(|(s, k)| format!("{k} {s}")).collect();
            let stack = statuses.iter().scan(24.0 + plot_h, |y, (s, k)| {
                let h = plot_h * *k as f64 / most;
                *y -= h;
                Some((n(*y), n(h), colour(s)))
            });
            let wait_bar = (*wait > 0 && most_wait > 0).then(|| {
                let h = wait_h * *wait as f64 / most_wait as f64;
                (n(24.0 + plot_h + 8.0 + wait_h - h), n(h))
            });
            Some(h! {
                a href={ "#call-" (first) } { g class="bucket" {
                    title {
                        (count(total, "call")) " from " (first) ": " (parts.join(", "))
                        "; waited " (elapsed(wait * 1000)) " for permission"
                    }
                    @for (y, h, fill) in stack {
                        rect x=(x0) y=(y) width=(bar_w) height=(h) fill=(fill) {}
                    }
                    @if let Some((y, h)) = wait_bar {
                        rect class="wait" x=(x0) y=(y) width=(bar_w) height=(h) fill=(WAIT) {}
                    }
                } }
            })
        });
    let label = |y: f64| n(y);
    let inner = h! {
        text x="4" y=(label(24.0 + plot_h / 2.0)) font-size="11" fill="#333" {
            (count(a.calls.len() as u64, "call")) " started,"
        }
        text x="4" y=(label(24.0 + plot_h / 2.0 + 14.0)) font-size="11" fill="#333" {
            "by time (column max " (most) ")"
        }
        text x="4" y=(label(24.0 + plot_h + 8.0 + wait_h / 2.0)) font-size="11" fill="#333" {
            "waiting for permission"
        }
        @for c in columns { (c) }
    };
    svg(t0, span, height, inner)
}
