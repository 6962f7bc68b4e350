//! Writing to standard output: a closed pipe (`cairn log | head`) ends quietly; and
//! notes to standard error that never fail.

use std::io::Write;

/// Writes one line to standard output.
pub fn line(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.write_all(b"\n")
}

/// Writes one line to standard error, redacted (`cairn_cli::hint::redacted`: what
/// goes to the terminal holds no secret, as the log holds none), where a failed write
/// is dropped: after SIGHUP the terminal is gone, and `eprintln!` would panic before
/// the session ends.
pub fn note(text: &str) {
    let text = cairn_cli::hint::redacted(text.to_string());
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_all(text.as_bytes())
        .and_then(|()| stderr.write_all(b"\n"));
}

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
