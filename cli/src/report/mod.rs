//! Renderings of an audit (`cairn_replay::audit::Audit`): text for an 80-column
//! terminal, Markdown, and one self-contained HTML file with a timeline. The JSON form
//! is the audit value itself, serialised.
//!
//! The report is built once, by [`sections`], as a small typed model: a list of
//! [`Section`]s, each a title and [`Block`]s (fields, paragraphs, tables whose rows also
//! say how they read as a line of text, the conversation, diffs, the timeline). The
//! three renderers ([`text`], [`markdown`], [`html`]) only lay that model out; what the
//! report says, and in which order, is decided in `sections.rs` alone.

mod html;
mod markdown;
mod sections;
mod text;
mod timeline;

use cairn_replay::audit::{Audit, CallEntry, WriteEntry};

pub use html::html;
pub use markdown::markdown;
pub use sections::{calls_by_status, models, sections, tokens_line};
pub use text::{conversation_text, text};

/// Characters of a call's input summary on its conversation line.
pub const SUMMARY_CHARS_MAX: usize = 70;

/// Bytes of a call's output the HTML report shows (the rest is in the session's
/// output blob): at 10,000 calls, the page stays a few tens of megabytes.
pub const HTML_OUTPUT_BYTES_MAX: usize = 4096;

/// Calls up to which the HTML timeline draws one bar per call; past it, calls are
/// counted into [`TIMELINE_BUCKETS`] columns of time.
pub const TIMELINE_BARS_MAX: usize = 200;

/// Columns of the aggregated timeline.
pub const TIMELINE_BUCKETS: usize = 120;

/// One part of the report: `Files read (5)` and what it lists.
#[derive(Debug, Clone)]
pub struct Section<'a> {
    /// `Files read`; for the report's first section, what it is about (`session`).
    pub title: &'static str,
    /// The report's first section names its subject (the session's id): the text
    /// writes it as its first field, the other formats in the report's title.
    pub subject: Option<&'a str>,
    /// How many entries the section lists, shown after its title.
    pub count: Option<usize>,
    /// Something is wrong (the log does not verify): shown first, and framed in HTML.
    pub alarm: bool,
    pub blocks: Vec<Block<'a>>,
}

/// What a section is made of.
#[derive(Debug, Clone)]
pub enum Block<'a> {
    /// Named values: the report's header.
    Fields(Vec<Field>),
    /// A paragraph of one line.
    Text(Line),
    Table(Table),
    Conversation(Conversation<'a>),
    /// Files written, each with its diff.
    Diffs(Vec<Diff<'a>>),
    /// The calls and processes drawn against time: HTML only, the other formats leave
    /// it out.
    Timeline(&'a Audit),
}

/// A header field. Text writes one line per value (none when it has no value); the
/// tables join the values with `; `.
#[derive(Debug, Clone)]
pub struct Field {
    pub key: &'static str,
    pub values: Vec<Line>,
}

/// Cells written one after the other, a space between them.
pub type Line = Vec<Cell>;

/// A piece of text and how it is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub text: String,
    pub style: Style,
}

/// How a cell is shown. Text shows every style as plain text, but for
/// [`Style::Hash`]; Markdown and HTML mark them up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    /// A path, a command, a key: in code.
    Code,
    /// A record hash: in code; text puts it on a line of its own (64 characters do
    /// not fit beside a field's name in 80 columns).
    Hash,
    /// A call's id, linked to the call in the HTML conversation.
    Call,
    /// Lines kept as they are (a permission's detail): one cell line in Markdown.
    Pre,
    /// A verdict that is good (the log verifies) or bad: coloured in HTML.
    Good,
    Bad,
}

impl Cell {
    pub fn new(text: impl Into<String>, style: Style) -> Cell {
        Cell {
            text: text.into(),
            style,
        }
    }

    pub fn plain(text: impl Into<String>) -> Cell {
        Cell::new(text, Style::Plain)
    }

    pub fn code(text: impl Into<String>) -> Cell {
        Cell::new(text, Style::Code)
    }
}

/// Rows under a head. Markdown and HTML write a table (HTML says `none` when it has no
/// row); text writes each row's [`Item`].
#[derive(Debug, Clone)]
pub struct Table {
    pub head: Vec<&'static str>,
    pub rows: Vec<Row>,
}

/// A table's row: one cell per column, and how the row reads in a list of text.
#[derive(Debug, Clone)]
pub struct Row {
    pub cells: Vec<Cell>,
    pub item: Item,
}

/// An entry of a list: its line, then its details, each indented below it.
#[derive(Debug, Clone, Default)]
pub struct Item {
    pub line: String,
    pub details: Vec<String>,
}

/// The conversation in order, and the final answer (shown once, apart).
#[derive(Debug, Clone)]
pub struct Conversation<'a> {
    pub steps: Vec<Step<'a>>,
    pub answer: Option<&'a str>,
}

/// A step of the conversation.
#[derive(Debug, Clone)]
pub enum Step<'a> {
    User {
        seq: u64,
        text: &'a str,
    },
    /// Model text (a turn with no text is no step).
    Model {
        seq: u64,
        model: &'a str,
        text: &'a str,
        interrupted: bool,
    },
    Call {
        seq: u64,
        call: &'a CallEntry,
        /// The files the call wrote.
        writes: Vec<&'a WriteEntry>,
        /// What it did (`writes`, `commands`, `network`, `permissions`, `errors`): the
        /// HTML filters.
        tags: Vec<&'static str>,
    },
    /// The person switched the model: `to` answers from here on.
    Switch {
        seq: u64,
        from: &'a str,
        to: &'a str,
    },
}

/// A file written: its title, its line in text, its contents' hashes and its diff.
#[derive(Debug, Clone)]
pub struct Diff<'a> {
    /// `` `src/lib.rs` — edit (ok, seq 19, c6) ``.
    pub title: Line,
    /// `seq 19 edit src/lib.rs ok (c6)`.
    pub line: String,
    pub before: String,
    pub after: String,
    pub diff: &'a str,
}
