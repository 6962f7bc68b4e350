//! A SESSION argument to its folder: a local session, or an archived one pulled into
//! the home's cache.

use std::path::PathBuf;

use anyhow::Result;
use cairn_engine::Home;

/// A session folder from an id, prefix, path or `last`; `archive:<id>` (or a unique
/// part of one) is pulled from the archive into the home's cache first.
pub fn session_dir(spec: &str) -> Result<PathBuf> {
    if let Some(archived) = spec.strip_prefix(crate::archivecmd::PREFIX) {
        return crate::archivecmd::cached(archived);
    }
    let home = Home::from_env()?;
    let cwd = std::env::current_dir().ok();
    Ok(cairn_engine::find_session(&home, spec, cwd.as_deref())?.dir)
}
