//! The search index in the home: fed a session's records as they are appended, brought
//! up to date after a command that writes sessions and before `cairn search`
//! (`cmd::search`) reads it.

use anyhow::Result;
use cairn_engine::Home;
use cairn_engine::settings::Settings;

use crate::out;

/// The embedded index's file in the home.
pub const INDEX_FILE: &str = cairn_search::sqlite::INDEX_FILE;

/// Brings the embedded index up to date (the sessions the home's written set marks,
/// or all of them the first time); sessions it could not read are noted.
pub(crate) fn update(home: &Home) -> Result<cairn_search::sqlite::Index> {
    let path = home.root.join(INDEX_FILE);
    let mut index = cairn_search::sqlite::Index::open(&path)?;
    let done = index.catch_up(&home.root)?;
    for (dir, why) in done.problems {
        out::note(&format!(
            "cairn: note: {} is not searchable: {why}",
            dir.display()
        ));
    }
    Ok(index)
}

/// The home from the environment, where a session started or resumed whose
/// configuration says `search_index` hands its records to the search index's background
/// indexer as they are appended (the engine knows no indexer: it is given one), and
/// every session sends its spans live when an OpenTelemetry collector is configured.
pub fn indexing_home() -> Result<Home> {
    let home = Home::from_env()?;
    let start =
        cairn_search::Indexer::start_in_home(&home.root, cairn_search::IndexerLimits::default());
    crate::exportcmd::with_live_export(home.with_sink(start))
}

/// Whether `search_index` is on in the settings in force in the current folder (the
/// user's file, its project's, `CAIRN_SEARCH_INDEX`).
fn index_on(home: &Home) -> Result<bool> {
    let cwd = std::env::current_dir()?;
    let project = crate::sessioncmd::project_for(home, &cwd);
    let s = crate::sessioncmd::effective(home, project.as_ref(), &Settings::default())?;
    Ok(s.search_index != Some(false))
}

/// Indexes what sessions were written, after a command that writes them, unless
/// `search_index` is off; a failure is a note, never the command's failure (the next
/// search catches up).
pub fn index_quietly() {
    let r = Home::from_env().map_err(anyhow::Error::from).and_then(|h| {
        if index_on(&h)? {
            update(&h)?;
        }
        Ok(())
    });
    if let Err(e) = r {
        out::note(&format!(
            "cairn: note: the search index was not updated ({}); `cairn search` catches up",
            out::error_text(&e)
        ));
    }
}
