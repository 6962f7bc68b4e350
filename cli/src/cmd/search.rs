//! `cairn search`: words across every session, in the home's index or the archive's.

use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use cairn_engine::Home;
use cairn_engine::settings::Files;
use cairn_search::{Filter, Hit, Query};

use super::flags::{OutputArgs, with_arg};
use crate::{archivecmd, out, searchcmd};

/// The id of `search --in-archive`.
pub(crate) const IN_ARCHIVE: &str = "in_archive";

// One flag names the archive for every command: the global `--archive URL`. What
// search's own arguments call `archive` becomes a switch, `--in-archive` (another id, so
// that the global flag reaches search as it reaches every command), which `run` turns
// into the URL that flag, the environment or the configuration gives.
#[derive(Debug, clap::Args)]
#[command(mut_args(with_arg("json", |a| a.help("One JSON document: {\"query\": …, \"hits\": [{session, short, project, workspace, seq, call, tool, kind, time, snippet}, …], \"more\": hits past --limit (counted up to 1000 past it), \"more_counted_all\": whether that count is the whole}"))))]
#[command(mut_arg("archive", |a| a
    .id(IN_ARCHIVE)
    .long("in-archive")
    .num_args(0)
    .action(clap::ArgAction::SetTrue)
    .value_parser(clap::value_parser!(bool))
    .default_missing_value("true")
    .default_value("false")
    .help("Search the team archive's index instead of the home's: the archive --archive URL names, else CAIRN_ARCHIVE_URL, else url in the [archive] table of the configuration")))]
pub(crate) struct Args {
    /// The query: words (all must occur), "quoted phrases", prefix* (quote the whole
    /// query for your shell when it has quotes or stars).
    #[arg(required = true)]
    query: Vec<String>,
    /// Only this project: its workspace folder or its key under projects/.
    #[arg(long)]
    project: Option<String>,
    /// Only inputs and outputs of this tool's calls.
    #[arg(long)]
    tool: Option<String>,
    /// Only what was recorded at or after this date (2026-11-29) or time
    /// (2026-11-29T12:00:00Z).
    #[arg(long)]
    since: Option<String>,
    /// At most this many hits.
    #[arg(long, default_value_t = 20)]
    limit: u32,
    /// Search a PostgreSQL archive's index instead: its URL, or, with no value, the
    /// `url` of the `[archive]` table of the configuration.
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    archive: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    /// Searches; `in_archive` is whether `--in-archive` was given (`main`'s `parse`
    /// reads it from the matches: the derived struct has no field for it).
    pub fn run(mut self, in_archive: bool) -> anyhow::Result<ExitCode> {
        // The global --archive reaches `args.archive`, but only names the archive:
        // --in-archive searches it, found as every command finds it.
        self.archive = match in_archive {
            true => Some(archivecmd::url(None)?),
            false => None,
        };
        self.search()
    }

    fn search(self) -> Result<ExitCode> {
        let text = self.query.join(" ");
        let query = Query::parse(&text)?;
        let project = self.project.map(|p| {
            // A folder given by path names its workspace as sessions record it.
            match std::fs::canonicalize(&p) {
                Ok(c) if c.is_dir() => c.to_string_lossy().into_owned(),
                _ => p,
            }
        });
        let filter = Filter {
            project,
            tool: self.tool,
            since_us: self.since.as_deref().map(cairn_search::since).transpose()?,
            limit: self.limit,
        };
        filter.check().map_err(|e| anyhow!("{e} (--limit)"))?;
        // Asked for more than shown, to say how many more there are (up to a bound:
        // counting every hit of a common word would read the whole index).
        let shown = filter.limit as usize;
        let filter = Filter {
            limit: filter
                .limit
                .saturating_add(MORE_HITS_COUNTED_MAX)
                .min(cairn_search::SEARCH_LIMIT_MAX),
            ..filter
        };
        let home = Home::from_env()?;
        let hits = match &self.archive {
            Some(given) => {
                let url = archive_url(given, &home)?;
                let mut client = cairn_archive::open_client(&url)
                    .with_context(|| format!("cannot reach the archive at {url}"))?;
                cairn_search::pg::ensure_schema(&mut client)?;
                cairn_search::pg::search(&mut client, &query, &filter)?
            }
            None => searchcmd::update(&home)?.search(&query, &filter)?,
        };
        let more = More {
            count: hits.len().saturating_sub(shown),
            all: hits.len() < filter.limit as usize,
            shown,
        };
        let hits = &hits[..hits.len().min(shown)];
        print(&text, hits, &more, self.output.json)?;
        Ok(if hits.is_empty() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
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

/// Hits a search counts past its `--limit`, to say how many more there are.
pub(crate) const MORE_HITS_COUNTED_MAX: u32 = 1000;

/// The hits past the limit: how many were counted, whether that is all of them, and
/// how many were shown.
struct More {
    count: usize,
    all: bool,
    shown: usize,
}

impl More {
    /// What a person is told when hits were left out: how many, and how to see them.
    fn note(&self) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let s = if self.count == 1 { "" } else { "s" };
        Some(if self.all {
            format!(
                "cairn: {} more hit{s} not shown: --limit {} shows them all",
                self.count,
                self.shown + self.count
            )
        } else {
            format!(
                "cairn: more than {} more hits not shown: narrow the search (--project, --tool, --since, more words) or raise --limit (at most {})",
                self.count,
                cairn_search::SEARCH_LIMIT_MAX
            )
        })
    }
}

/// The hits, one per line (`short:seq call tool kind  snippet`, the matches in bold on
/// a terminal and unmarked otherwise), then on standard error how many more there are;
/// or one JSON document (the snippets marked `**so**`).
fn print(query: &str, hits: &[Hit], more: &More, json: bool) -> Result<()> {
    if json {
        out::line(
            &serde_json::json!({
                "query": query,
                "hits": hits,
                "more": more.count,
                "more_counted_all": more.all,
            })
            .to_string(),
        )?;
        return Ok(());
    }
    let (open, close) = match cairn_cli::paint::Paint::stdout().0 {
        true => ("\x1b[1m", "\x1b[0m"),
        false => ("", ""),
    };
    for h in hits {
        out::line(&format!(
            "{}:{}  {}  {}  {}  {}",
            h.short,
            h.seq,
            h.call.as_deref().unwrap_or("-"),
            h.tool.as_deref().unwrap_or("-"),
            h.kind.as_str(),
            h.snippet_with(open, close)
        ))?;
    }
    if let Some(note) = more.note() {
        out::note(&note);
    }
    Ok(())
}
