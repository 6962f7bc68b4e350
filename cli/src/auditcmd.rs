//! `cairn audit`: loads a session, verifies it deeply, gathers the audit
//! (`cairn_replay::audit`) and renders it.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cairn_cli::paint::Paint;
use cairn_cli::report;

use crate::out;

/// The output format.
pub enum Format<'a> {
    Text,
    Json,
    Markdown,
    Html(&'a Path),
}

/// A spinner on standard error while a long step runs, when it is a terminal.
pub fn spinner(what: &str) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_message(what.to_string());
    pb.enable_steady_tick(std::time::Duration::from_millis(100));
    Some(pb)
}

/// Audits a session, priced by `prices` (see `sessioncmd::prices_for`). A session that does not verify is still audited, from its intact
/// records, with what is wrong at the top of the report; the exit code is then 1.
pub fn audit(spec: &str, prices: Option<&Path>, format: Format) -> Result<ExitCode> {
    let dir = crate::locate::session_dir(spec)?;
    let prices = crate::sessioncmd::prices_for(&dir, prices)?;
    let pb = spinner("verifying the session");
    let verified = cairn_replay::verify(&dir);
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let verified = verified?;
    let clean = verified.0.problems == 0;
    let session = match cairn_replay::Session::load(&dir) {
        Ok(s) => s,
        Err(_) if !clean => cairn_replay::Session::load_intact(&dir)
            .context("the session cannot be audited (cairn verify lists what is wrong)")?,
        Err(e) => {
            return Err(e)
                .context("the session cannot be audited (cairn verify lists what is wrong)");
        }
    };
    let mut a = cairn_replay::audit::audit(&session, &verified);
    crate::sessioncmd::priced(&mut a, prices.as_ref());
    match format {
        Format::Text => {
            let text = report::text(&a, Paint::stdout());
            for l in text.lines() {
                out::line(l)?;
            }
        }
        Format::Markdown => {
            for l in report::markdown(&a).lines() {
                out::line(l)?;
            }
        }
        Format::Json => out::line(&serde_json::to_string(&a)?)?,
        Format::Html(file) if file == Path::new("-") => {
            use std::io::Write;
            std::io::stdout()
                .lock()
                .write_all(report::html(&a).as_bytes())?;
        }
        Format::Html(file) => {
            std::fs::write(file, report::html(&a))
                .with_context(|| format!("cannot write {}", file.display()))?;
            eprintln!("wrote {}", file.display());
        }
    }
    if !clean {
        eprintln!(
            "cairn: session {} does not verify: {} (cairn verify {} lists them)",
            a.header.session,
            cairn_cli::summary::count(a.integrity.problems, "problem"),
            a.header.session
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
