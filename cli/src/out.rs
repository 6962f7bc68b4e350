//! Writing to standard output: a closed pipe (`cairn log | head`) ends quietly; and
//! notes to standard error that never fail.

use std::io::Write;

/// Writes one line to standard output.
pub fn line(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.write_all(b"\n")
}

pub use cairn_cli::hint::note;

/// True when `e` comes from writing to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The error and its causes, leaving out a cause whose text the message already holds,
/// then what to do about it with this command line (`cairn_cli::hint`), if anything.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
    }
    cairn_cli::hint::with_hint(text, e.as_ref())
}
