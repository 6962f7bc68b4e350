//! `cairn witness serve` (a tlog-witness on HTTP) and `cairn checkpoint push` (a
//! session's newest checkpoint sent to witnesses, their cosignatures kept beside it).
//! The logic is in `cairn_tlog::witness` and `cairn_tlog::log`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use cairn_tlog::{self as tlog, Signer, Verifier};

use crate::out;

/// Serves add-checkpoint on `addr` until killed; prints the address it listens on.
pub fn serve(addr: &str, key: &Path, logs: &[String], state: &Path) -> Result<ExitCode> {
    let text = std::fs::read_to_string(key).with_context(|| key.display().to_string())?;
    let signer = Signer::parse(&text).with_context(|| key.display().to_string())?;
    if logs.is_empty() {
        bail!(
            "a witness cosigns only the logs it knows: give --log VKEY (the log's `cairn key show`)"
        );
    }
    let logs = logs
        .iter()
        .map(|l| Verifier::parse(l).with_context(|| format!("--log {l}")))
        .collect::<Result<Vec<_>>>()?;
    let witness = tlog::witness::load(signer.clone(), logs, state).map_err(|e| anyhow!(e))?;
    let server = tiny_http::Server::http(addr).map_err(|e| anyhow!("listening on {addr}: {e}"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .map_or_else(|| addr.to_string(), |a| a.to_string());
    out::line(&format!(
        "witness {} listening on http://{bound}",
        signer.cosigner_vkey()
    ))?;
    tlog::witness::serve(&server, witness, state);
    Ok(ExitCode::SUCCESS)
}

/// Sends a session's newest checkpoint to the witnesses; exit 1 when one refused.
pub fn push(session: &str, witnesses: &[String], json: bool) -> Result<ExitCode> {
    if witnesses.is_empty() {
        bail!("give at least one --witness URL");
    }
    let dir = crate::locate::session_dir(session)?;
    let (size, pushed) = tlog::log::push_checkpoint(&dir, witnesses)?;
    let mut clean = true;
    let mut rows = Vec::new();
    for p in &pushed {
        match &p.result {
            Ok(lines) => {
                rows.push(serde_json::json!({"witness": p.url, "cosignatures": lines.len()}));
                if !json {
                    out::line(&format!(
                        "{}: {} cosignature(s) of size {size}",
                        p.url,
                        lines.len()
                    ))?;
                }
            }
            Err(e) => {
                clean = false;
                rows.push(serde_json::json!({"witness": p.url, "error": e.to_string()}));
                if !json {
                    out::line(&format!("{}: {e}", p.url))?;
                }
            }
        }
    }
    if json {
        out::line(
            &serde_json::json!({"clean": clean, "size": size, "witnesses": rows}).to_string(),
        )?;
    }
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
