//! The text a foreground command's call gave the model, rebuilt from its records: the
//! first line from its finished `shell_exec` (exit code or signal, elapsed time, the
//! timeout), each stream's preview from its blob (the stream as redacted while it
//! streamed, which the engine's preview was made from) with the engine's own
//! [`Preview`](cairn_tools::shell::Preview) and the session's caps, and the files the
//! command changed from the call's `external` writes; then redacted with the engine's
//! patterns, as the engine redacts every output.
//!
//! What the log cannot give back is a hole: the secrets of the recording process's
//! environment (their markers in the recorded text stand for any text), and the one
//! line written for a stream whose output was never collected. The rest is
//! deterministic, so any other difference is a forged output or a forged blob.
//!
//! The layout is `cairn_tools::shell::foreground_text`, the function the shell tools
//! answer with: written once.

use std::io::Read;

use cairn_core::Limits;
use cairn_core::event::{ShellEnd, ShellExec};
use cairn_core::redact::Redactor;
use cairn_store::{BlobRef, BlobStore};
use cairn_tools::TimeoutField;
use cairn_tools::shell::{Ended, Preview, SandboxShown, Shown, foreground_text};

use super::holes::Piece;

/// Bytes read from a blob at a time.
const READ_BUF_BYTES: usize = 64 * 1024;

/// A stream of a finished command as the log has it.
pub(super) enum Stream {
    /// Collected: its preview, made from its blob.
    Shown(String),
    /// Not collected (no blob): the engine wrote one line of why instead.
    Lost,
    /// Cut at the capture limit: the blob keeps the head, the preview saw it all.
    Cut,
}

/// The preview the engine showed of a stream stored as `blob`; `None` when the blob
/// cannot be read (reported by the blob check).
pub(super) fn preview(blobs: &BlobStore, blob: &BlobRef, limits: &Limits) -> Option<String> {
    let mut file = blobs.open_blob(&blob.hash).ok()?;
    let mut p = Preview::new(
        limits.shell_output_bytes_max,
        limits.shell_output_lines_max,
        limits.shell_line_chars_max,
    )
    .with_tail(limits.shell_output_tail_lines_max);
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
/// path); `timeout` is the tool's timeout field and what the call asked for in it (in
/// milliseconds) when that was over the maximum; `writable` the folders the session's
/// sandbox let commands write in.
pub(super) fn expected(
    exec: &ShellExec,
    end: &ShellEnd,
    streams: [Stream; 2],
    changes: &[(&str, String)],
    timeout: (TimeoutField, Option<u64>),
    writable: &[String],
    limits: &Limits,
) -> Vec<Piece> {
    let (timeout_field, timeout_note) = timeout;
    let mut text = String::new();
    if let Some(t) = timeout_note {
        text.push_str(&timeout_field.over_max_note(t, limits.shell_timeout_ms_max));
    }
    // A stream that was not collected shows one line of why, which the log does not
    // keep: a marker stands for it and becomes a hole.
    const LOST: &str = "\u{0}lost stream\u{0}";
    // A stream cut at the capture limit: its preview, any lines, becomes a hole too.
    const CUT: &str = "\u{0}cut stream\u{0}";
    let sizes = [end.stdout_bytes, end.stderr_bytes];
    let blobs = [end.stdout, end.stderr];
    let cuts = [end.stdout_cut, end.stderr_cut];
    let shown: Vec<Shown<'_>> = streams
        .iter()
        .zip(sizes)
        .zip(blobs)
        .zip(cuts)
        .map(|(((stream, bytes), blob), cut)| match stream {
            Stream::Shown(preview) => Shown {
                bytes: bytes.unwrap_or(0),
                kept: blob.map(|b| b.len),
                cut,
                preview,
                complete: true,
            },
            Stream::Lost => Shown {
                bytes: bytes.unwrap_or(0),
                kept: None,
                cut: None,
                preview: LOST,
                complete: false,
            },
            Stream::Cut => Shown {
                bytes: bytes.unwrap_or(0),
                kept: blob.map(|b| b.len),
                cut,
                preview: CUT,
                complete: true,
            },
        })
        .collect();
    let changed: Vec<(&str, &str)> = changes.iter().map(|(w, p)| (*w, p.as_str())).collect();
    text.push_str(&foreground_text(
        Ended {
            status: end.status,
            code: end.exit_code,
            signal: end.signal,
            elapsed_us: end.elapsed_us.unwrap_or(0),
            timeout_ms: exec.timeout_ms.unwrap_or(0),
            timeout_field,
        },
        limits.shell_timeout_ms_max,
        [shown[0], shown[1]],
        exec.sandbox.as_ref().map(|sandboxed| SandboxShown {
            sandboxed,
            writable,
        }),
        &changed,
    ));
    let mut pieces = Vec::new();
    let whole = std::mem::take(&mut text);
    let mut rest = whole.as_str();
    while let Some((at, marker)) = [LOST, CUT]
        .iter()
        .filter_map(|m| rest.find(m).map(|at| (at, *m)))
        .min()
    {
        text.push_str(&rest[..at]);
        pieces.push(Piece::Text(std::mem::take(&mut text)));
        pieces.push(Piece::Hole {
            line: marker == LOST,
        });
        rest = &rest[at + marker.len()..];
    }
    text.push_str(rest);
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
