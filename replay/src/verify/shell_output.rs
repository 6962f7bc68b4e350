//! The text a foreground command's call gave the model, rebuilt from its records: the
//! first line from its finished `shell_exec` (exit code or signal, elapsed time, the
//! timeout), each stream's preview from its blob with the engine's own
//! [`Preview`](cairn_tools::shell::Preview) and the session's caps, and the files the
//! command changed from the call's `external` writes; then redacted with the engine's
//! patterns, as the engine redacts every output.
//!
//! What the log cannot give back is a hole: the secrets of the recording process's
//! environment (their markers in the recorded text stand for any text), and the one
//! line written for a stream whose output was never collected. The rest is
//! deterministic, so any other difference is a forged output or a forged blob.
//!
//! The layout repeats what `engine/src/shell.rs` writes at the end of `foreground`;
//! it belongs in one pure function both use.

use std::io::Read;

use cairn_core::Limits;
use cairn_core::event::{ExecStatus, ShellEnd, ShellExec};
use cairn_core::redact::Redactor;
use cairn_store::{BlobRef, BlobStore};
use cairn_tools::shell::Preview;

use super::holes::Piece;

/// Bytes read from a blob at a time.
const READ_BUF_BYTES: usize = 64 * 1024;

/// A stream of a finished command as the log has it.
pub(super) enum Stream {
    /// Collected: its preview, made from its blob.
    Shown(String),
    /// Not collected (no blob): the engine wrote one line of why instead.
    Lost,
}

/// The preview the engine showed of a stream stored as `blob`; `None` when the blob
/// cannot be read (reported by the blob check).
pub(super) fn preview(blobs: &BlobStore, blob: &BlobRef, limits: &Limits) -> Option<String> {
    let mut file = blobs.open_blob(&blob.hash).ok()?;
    let mut p = Preview::new(
        limits.shell_output_bytes_max,
        limits.shell_output_lines_max,
        limits.shell_line_chars_max,
    );
    let mut buf = vec![0u8; READ_BUF_BYTES];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => p.feed(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(p.finish())
}

/// The whole output (before the output caps) of the call whose foreground command
/// `exec` finished (`end`) with `streams` (stdout, stderr) and changed `changes` (what,
/// path); `timeout_note` is the timeout the call asked for when it was over the maximum.
pub(super) fn expected(
    exec: &ShellExec,
    end: &ShellEnd,
    streams: [Stream; 2],
    changes: &[(&str, String)],
    timeout_note: Option<u64>,
    limits: &Limits,
) -> Vec<Piece> {
    let mut text = String::new();
    if let Some(t) = timeout_note {
        text.push_str(&format!(
            "note: timeout_ms {t} is over the maximum; {} was used\n",
            limits.shell_timeout_ms_max
        ));
    }
    let elapsed_ms = end.elapsed_us.unwrap_or(0) / 1000;
    text.push_str(&match end.status {
        ExecStatus::Timeout => format!(
            "timeout: killed after {} ms (the whole process group); give a larger timeout_ms (at most {}) or run it with background=true\n",
            exec.timeout_ms.unwrap_or(0),
            limits.shell_timeout_ms_max
        ),
        ExecStatus::Cancelled => format!(
            "cancelled by the user after {elapsed_ms} ms (the whole process group was killed)\n"
        ),
        _ => match (end.exit_code, end.signal) {
            (Some(c), _) => format!("exit code {c} in {elapsed_ms} ms\n"),
            (None, Some(s)) => format!("killed by signal {s} in {elapsed_ms} ms\n"),
            _ => format!("ended in {elapsed_ms} ms\n"),
        },
    });
    let mut pieces = Vec::new();
    let sizes = [end.stdout_bytes, end.stderr_bytes];
    for ((name, stream), bytes) in ["stdout", "stderr"].iter().zip(streams).zip(sizes) {
        let bytes = bytes.unwrap_or(0);
        match stream {
            Stream::Shown(_) if bytes == 0 => {}
            Stream::Shown(preview) => {
                text.push_str(&format!("--- {name} ({bytes} bytes) ---\n"));
                text.push_str(&preview);
                if !preview.ends_with('\n') {
                    text.push('\n');
                }
            }
            Stream::Lost => {
                text.push_str(&format!("--- {name} ({bytes} bytes) ---\n"));
                pieces.push(Piece::Text(std::mem::take(&mut text)));
                pieces.push(Piece::Hole { line: true });
                text.push('\n');
            }
        }
    }
    if !changes.is_empty() {
        text.push_str("files changed by the command (read them again before editing):\n");
        for (what, path) in changes {
            text.push_str(&format!("  {what} {path}\n"));
        }
    }
    pieces.push(Piece::Text(text));
    // Redacted piece by piece: a secret split by a hole cannot be matched anyway.
    let redactor = Redactor::default();
    pieces
        .into_iter()
        .map(|p| match p {
            Piece::Text(t) => {
                Piece::Text(redactor.redact(&t, &mut Default::default()).into_owned())
            }
            hole => hole,
        })
        .collect()
}
