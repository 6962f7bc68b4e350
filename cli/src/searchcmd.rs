//! `cairn search`: words across every session, from the embedded index in the home
//! (brought up to date first) or from a PostgreSQL archive's index.

use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use cairn_engine::Home;
use cairn_engine::settings::{Files, Settings};
use cairn_search::{Filter, Hit, Query};

use crate::out;

/// The embedded index's file in the home.
pub const INDEX_FILE: &str = cairn_search::sqlite::INDEX_FILE;

#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    /// The query: words (all must occur), "quoted phrases", prefix* (quote the whole
    /// query for your shell when it has quotes or stars).
    #[arg(required = true)]
    pub query: Vec<String>,
    /// Only this project: its workspace folder or its key under projects/.
    #[arg(long)]
    pub project: Option<String>,
    /// Only inputs and outputs of this tool's calls.
    #[arg(long)]
    pub tool: Option<String>,
    /// Only what was recorded at or after this date (2026-11-29) or time
    /// (2026-11-29T12:00:00Z).
    #[arg(long)]
    pub since: Option<String>,
    /// At most this many hits.
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
    /// Search a PostgreSQL archive's index instead: its URL, or, with no value, the
    /// `url` of the `[archive]` table of the configuration.
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    pub archive: Option<String>,
    /// One JSON document: {"query": …, "hits": [{session, short, project, workspace,
    /// seq, call, tool, kind, time, snippet}, …]}.
    #[arg(long)]
    pub json: bool,
}

/// Brings the embedded index up to date (the sessions the home's written set marks,
/// or all of them the first time); sessions it could not read are noted.
fn update(home: &Home) -> Result<cairn_search::sqlite::Index> {
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

/// The archive URL: given, else `archive.url` of the project's then the user's
/// configuration.
fn archive_url(given: &str, home: &Home) -> Result<String> {
    if !given.is_empty() {
        return Ok(given.to_string());
    }
    let project = std::env::current_dir()
        .ok()
        .map(|cwd| home.project(&cwd.canonicalize().unwrap_or(cwd)));
    let files = Files::load(home, project.as_ref())?;
    [files.project, files.user]
        .into_iter()
        .flatten()
        .find_map(|(_, s)| s.archive.and_then(|a| a.url))
        .ok_or_else(|| {
            anyhow!(
                "no archive given: use --archive postgres://USER@HOST:PORT/DB, or set url in the [archive] table of {}",
                home.root.join("config.toml").display()
            )
        })
}

pub fn search(a: SearchArgs) -> Result<ExitCode> {
    let text = a.query.join(" ");
    let query = Query::parse(&text)?;
    let project = a.project.map(|p| {
        // A folder given by path names its workspace as sessions record it.
        match std::fs::canonicalize(&p) {
            Ok(c) if c.is_dir() => c.to_string_lossy().into_owned(),
            _ => p,
        }
    });
    let filter = Filter {
        project,
        tool: a.tool,
        since_us: a.since.as_deref().map(cairn_search::since).transpose()?,
        limit: a.limit,
    };
    filter.check().map_err(|e| anyhow!("{e} (--limit)"))?;
    let home = Home::from_env()?;
    let hits = match &a.archive {
        Some(given) => {
            let url = archive_url(given, &home)?;
            let mut client = cairn_archive::open_client(&url)
                .with_context(|| format!("cannot reach the archive at {url}"))?;
            cairn_search::pg::ensure_schema(&mut client)?;
            cairn_search::pg::search(&mut client, &query, &filter)?
        }
        None => update(&home)?.search(&query, &filter)?,
    };
    print(&text, &hits, a.json)?;
    Ok(if hits.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The hits, one per line (`short:seq call tool kind  snippet`), or one JSON document.
fn print(query: &str, hits: &[Hit], json: bool) -> Result<()> {
    if json {
        out::line(&serde_json::json!({ "query": query, "hits": hits }).to_string())?;
        return Ok(());
    }
    for h in hits {
        out::line(&format!(
            "{}:{}  {}  {}  {}  {}",
            h.short,
            h.seq,
            h.call.as_deref().unwrap_or("-"),
            h.tool.as_deref().unwrap_or("-"),
            h.kind.as_str(),
            h.snippet
        ))?;
    }
    Ok(())
}
