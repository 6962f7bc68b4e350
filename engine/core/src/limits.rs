//! Every limit of the engine, named with its unit. The two catalogs start from the
//! defaults of the agents they come from (`../shared/seeds/NOTES.md`).

use serde::{Deserialize, Serialize};

/// Wrappers and nested lines one inside another that a command-line analysis follows
/// (`sudo env nice sh -c '…'` is four deep); past it the line asks every time.
pub const COMMAND_NESTING_DEPTH_MAX: u32 = 8;

/// The limits in force for a session (recorded in `session_started`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Files larger than this are refused by the read tools.
    pub read_file_bytes_max: u64,
    /// Lines returned by one read.
    pub read_lines_max: u32,
    /// Lines returned by `read_file_range` without an `end_line`.
    pub read_range_default_lines: u32,
    /// Characters of one line in read and search output.
    pub line_chars_max: usize,
    /// Bytes of one tool output given to the model.
    pub output_bytes_max: usize,
    /// Lines of one tool output given to the model.
    pub output_lines_max: usize,
    /// Of `output_lines_max`, the lines kept from the end of a longer output (and their
    /// share of `output_bytes_max`): the model sees its head and its tail, the cut
    /// between them named. A session recorded before the field showed the head only
    /// (0).
    #[serde(default)]
    pub output_tail_lines_max: usize,
    /// Entries of a listing (find, glob, list_dir).
    pub list_entries_max: usize,
    /// Matches of a content search.
    pub search_matches_max: usize,
    /// Characters of one search match line.
    pub match_chars_max: usize,
    /// Context lines around a match.
    pub context_lines_max: usize,
    /// Lines of a diff shown in a tool result.
    pub diff_lines_max: usize,
    /// Bytes of a tool input (kept well under the log's record limit).
    pub input_bytes_max: usize,
    /// Identical calls allowed before the next is blocked.
    pub repeat_calls_max: u32,
    /// Bytes of a file written by a write tool.
    pub write_bytes_max: usize,
    /// Characters of content one `write_file` call may carry (thoth's rule): a file
    /// longer than this is written in sections with `append`. A model's generation that
    /// runs past its window is cut mid-file and lost, so with a declared context window
    /// this is half the result cap (at least 2,000); with none, 40,000.
    #[serde(default = "write_call_chars_unlimited")]
    pub write_call_chars_max: usize,
    /// Time a foreground shell command gets when the call names none, in milliseconds.
    pub shell_timeout_ms: u64,
    /// The most time a call may ask for, in milliseconds (more is cut to this).
    pub shell_timeout_ms_max: u64,
    /// Time between SIGTERM and SIGKILL when a process group is stopped, in milliseconds.
    pub shell_kill_grace_ms: u64,
    /// Bytes of each output stream (stdout, stderr) shown to the model.
    pub shell_output_bytes_max: usize,
    /// Lines of each output stream shown to the model.
    pub shell_output_lines_max: usize,
    /// Of `shell_output_lines_max`, the lines kept from the end of a longer stream:
    /// the model sees its head and its tail (failures and summaries come last), the cut
    /// between them named. A session recorded before the field showed the head only
    /// (0).
    #[serde(default)]
    pub shell_output_tail_lines_max: usize,
    /// Characters of one output line shown to the model.
    pub shell_line_chars_max: usize,
    /// Background processes running at once in a session.
    pub shell_background_max: usize,
    /// Bytes of each output stream (stdout, stderr) of a foreground command kept in its
    /// blob (default [`OUTPUT_STREAM_BYTES_MAX`]); past it the stream is still read to
    /// its end and counted, its first half and last half of this kept, the bytes
    /// between dropped (the cut recorded in its `shell_exec`). A session recorded
    /// before the field had 1 GiB, head only.
    #[serde(default = "shell_capture_bytes_max")]
    pub shell_capture_bytes_max: u64,
    /// Workspace files larger than this are recorded in the manifest by hash and size
    /// only, their content not kept (see `cairn_tools::manifest`).
    #[serde(default = "capture_file_bytes_max")]
    pub capture_file_bytes_max: u64,
    /// How long an MCP server has to answer one `tools/call` (or `tools/list`).
    #[serde(default = "mcp_call_timeout_ms")]
    pub mcp_call_timeout_ms: u64,
    /// How long an MCP server has to start and answer `initialize`.
    #[serde(default = "mcp_start_timeout_ms")]
    pub mcp_start_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::thndrs()
    }
}

fn capture_file_bytes_max() -> u64 {
    64 << 20
}

/// What a session recorded without `shell_capture_bytes_max` kept of a stream: its
/// first GiB.
fn shell_capture_bytes_max() -> u64 {
    1 << 30
}

/// Bytes of each output stream of a foreground command kept by default (the config
/// key `[limits] shell_capture_bytes_max`): a command printing gigabytes stores
/// 256 MiB, its head and its tail.
pub const OUTPUT_STREAM_BYTES_MAX: u64 = 256 << 20;

/// What a session recorded before `write_call_chars_max` existed had: no such cap.
fn write_call_chars_unlimited() -> usize {
    usize::MAX
}

/// Characters one `write_file` call may carry when no context window is declared
/// (thoth's figure: a window nobody declared is a hosted model's, and those are large).
pub const WRITE_CALL_CHARS_UNKNOWN_WINDOW: usize = 40_000;

/// The largest file a permission prompt reads to show a write as a diff of the whole
/// file (with the file's own line numbers); past it the prompt shows the change alone.
pub const PREVIEW_READ_BYTES_MAX: u64 = 1 << 20;

/// Lines of the diff a permission prompt shows for a write.
pub const PREVIEW_DIFF_LINES_MAX: usize = 120;

fn mcp_call_timeout_ms() -> u64 {
    60_000
}

fn mcp_start_timeout_ms() -> u64 {
    30_000
}

impl Limits {
    /// thndrs: 100 results, 64 KiB output, 512 characters a line.
    pub fn thndrs() -> Limits {
        Limits {
            read_file_bytes_max: 2_000_000,
            read_lines_max: 600,
            read_range_default_lines: 20,
            line_chars_max: 512,
            output_bytes_max: 65_536,
            output_lines_max: 2_000,
            output_tail_lines_max: 500,
            list_entries_max: 100,
            search_matches_max: 100,
            match_chars_max: 512,
            context_lines_max: 10,
            diff_lines_max: 120,
            input_bytes_max: 512 * 1024,
            repeat_calls_max: 2,
            write_bytes_max: 16 << 20,
            write_call_chars_max: WRITE_CALL_CHARS_UNKNOWN_WINDOW,
            shell_timeout_ms: 120_000,
            shell_timeout_ms_max: 600_000,
            shell_kill_grace_ms: 500,
            shell_output_bytes_max: 64 * 1024,
            shell_output_lines_max: 200,
            shell_output_tail_lines_max: 50,
            shell_line_chars_max: 512,
            shell_background_max: 16,
            shell_capture_bytes_max: OUTPUT_STREAM_BYTES_MAX,
            capture_file_bytes_max: capture_file_bytes_max(),
            mcp_call_timeout_ms: mcp_call_timeout_ms(),
            mcp_start_timeout_ms: mcp_start_timeout_ms(),
        }
    }

    /// thoth: 600 lines and 500 characters a read, 500 entries a listing, 100 matches
    /// of 250 characters, 10 context lines.
    pub fn thoth() -> Limits {
        Limits {
            line_chars_max: 500,
            list_entries_max: 500,
            match_chars_max: 250,
            ..Limits::thndrs()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a log recorded before the tail limits must read them as 0 (head
    /// only), so that verify rebuilds the outputs it recorded.
    #[test]
    fn limits_recorded_before_the_tail_limits_read_them_as_zero() {
        let mut old = serde_json::to_value(Limits::default()).unwrap();
        let fields = old.as_object_mut().unwrap();
        assert_eq!(fields["output_tail_lines_max"], 500);
        fields.remove("output_tail_lines_max");
        fields.remove("shell_output_tail_lines_max");
        let read: Limits = serde_json::from_value(old).unwrap();
        assert_eq!(
            (read.output_tail_lines_max, read.shell_output_tail_lines_max),
            (0, 0)
        );
        assert_eq!(
            Limits {
                output_tail_lines_max: 500,
                shell_output_tail_lines_max: 50,
                ..read
            },
            Limits::default()
        );
    }
}
