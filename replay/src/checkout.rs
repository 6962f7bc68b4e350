//! Checking out a session: the workspace as it was after any record, written into a
//! folder. Every blob needed is checked first (the error lists the missing ones), the
//! files are written into a temporary folder beside the destination and renamed into
//! place at the end, so a failure leaves nothing half-written.

use std::path::Path;

use cairn_store::Hash;
use serde::Serialize;

use crate::error::{ReplayError, Result, io_at};
use crate::session::Session;

/// What a checkout wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckoutReport {
    pub session: String,
    pub at_seq: u64,
    pub files: u64,
    pub bytes: u64,
}

/// Writes the workspace of the session at `session_dir` as it was after record
/// `at_seq` into `dest`, which must be empty or absent.
pub fn checkout(session_dir: &Path, at_seq: u64, dest: &Path) -> Result<CheckoutReport> {
    let session = Session::load(session_dir)?;
    let files = session.workspace_at(Some(at_seq))?;
    let existed = dest.exists();
    if existed
        && std::fs::read_dir(dest)
            .map_err(io_at(dest))?
            .next()
            .is_some()
    {
        return Err(ReplayError::NotEmpty(dest.to_path_buf()));
    }
    let missing: Vec<(String, Hash)> = files
        .iter()
        .filter(|(_, f)| {
            session
                .blobs
                .verify(&f.hash)
                .map_or(true, |c| c != cairn_store::BlobCheck::Ok)
        })
        .map(|(p, f)| (p.clone(), f.hash))
        .collect();
    if !missing.is_empty() {
        return Err(ReplayError::MissingBlobs { missing });
    }
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io_at(&parent))?;
    let tmp = tempfile::Builder::new()
        .prefix(".cairn-checkout-")
        .tempdir_in(&parent)
        .map_err(io_at(&parent))?;
    let mut bytes = 0u64;
    for (path, f) in &files {
        let content = session.blob(&f.hash, path)?;
        bytes += content.len() as u64;
        write_file(&tmp.path().join(path), &content, f.mode)?;
    }
    if existed {
        std::fs::remove_dir(dest).map_err(io_at(dest))?;
    }
    let kept = tmp.keep();
    std::fs::rename(&kept, dest).map_err(|e| {
        let _ = std::fs::remove_dir_all(&kept);
        io_at(dest)(e)
    })?;
    Ok(CheckoutReport {
        session: session.id,
        at_seq,
        files: files.len() as u64,
        bytes,
    })
}

/// Writes one file of a checkout (folders made as needed, the mode set when known).
pub(crate) fn write_file(path: &Path, bytes: &[u8], mode: Option<u32>) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_at(parent))?;
    }
    std::fs::write(path, bytes).map_err(io_at(path))?;
    if let Some(mode) = mode {
        std::fs::set_permissions(
            path,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(mode),
        )
        .map_err(io_at(path))?;
    }
    Ok(())
}
