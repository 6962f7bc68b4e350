//! `cairn import`: other agents' sessions into cairn. The work is `cairn_import`'s;
//! this finds the default locations, draws the progress bar and prints the summary.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use cairn_engine::Home;

use cairn_cli::summary::count;

use super::flags::{OutputArgs, with_arg};
use crate::out;

#[derive(Debug, clap::Args)]
#[command(mut_args(with_arg("json", |a| a.help("Print the summary as JSON"))))]
pub(crate) struct Args {
    /// Files or folders to import (folders are searched for `*.jsonl`, `*.jsonl.zst`,
    /// and ATIF trajectories: `*.atif.json`, `trajectory.json`); the format of each
    /// file is detected (a `.json` file is read as an ATIF trajectory).
    paths: Vec<PathBuf>,
    /// Also import Codex CLI's sessions: `$CODEX_HOME/sessions`, else
    /// `~/.codex/sessions`.
    #[arg(long)]
    codex: bool,
    /// Also import Claude Code's transcripts: `~/.claude/projects`.
    #[arg(long)]
    claude: bool,
    /// Also import Gemini CLI's saved chats: the `chats` folder of each project in
    /// `$GEMINI_CLI_HOME/.gemini/tmp`, else `~/.gemini/tmp`.
    #[arg(long)]
    gemini: bool,
    /// Also import OpenCode's sessions: its database `$XDG_DATA_HOME/opencode/opencode.db`,
    /// else `~/.local/share/opencode/opencode.db` (an `opencode.db` can also be given as
    /// a path). Each session is first written out, redacted, as a JSON-lines file
    /// under cairn's home (`imports/opencode/`), which is what the session says it
    /// came from.
    #[arg(long)]
    opencode: bool,
    /// Only files modified at or after DATE (`2026-11-01`, or an RFC 3339 time).
    #[arg(long, value_name = "DATE")]
    since: Option<String>,
    /// Keep each source file's bytes as a blob, so deep verify can check it. They hold
    /// the source's secrets unredacted.
    #[arg(long)]
    keep_original: bool,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> Result<ExitCode> {
        import(self)
    }
}

/// `--since`: a date (midnight UTC) or a full time.
fn since(text: &str) -> Result<jiff::Timestamp> {
    if let Ok(t) = text.parse::<jiff::Timestamp>() {
        return Ok(t);
    }
    let d: jiff::civil::Date = text.parse().with_context(|| {
        format!("--since {text:?} is neither a date (2026-11-01) nor an RFC 3339 time (2026-11-01T12:00:00Z)")
    })?;
    Ok(d.to_zoned(jiff::tz::TimeZone::UTC)?.timestamp())
}

fn home_dir() -> Result<PathBuf> {
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h)),
        None => bail!(
            "HOME is not set: give the folder to import instead of --codex, --claude, --gemini or --opencode"
        ),
    }
}

/// The folders `--codex`, `--claude` and `--gemini` name.
fn default_locations(args: &Args) -> Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    if args.codex {
        paths.push(
            match std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()) {
                Some(h) => PathBuf::from(h).join("sessions"),
                None => home_dir()?.join(".codex").join("sessions"),
            },
        );
    }
    if args.claude {
        paths.push(home_dir()?.join(".claude").join("projects"));
    }
    if args.gemini {
        let base = match std::env::var_os("GEMINI_CLI_HOME").filter(|h| !h.is_empty()) {
            Some(h) => PathBuf::from(h),
            None => home_dir()?,
        };
        let tmp = base.join(".gemini").join("tmp");
        // Only the chats: the project folders also hold logs and tool outputs.
        let mut chats: Vec<PathBuf> = std::fs::read_dir(&tmp)
            .with_context(|| format!("{}: Gemini CLI's projects", tmp.display()))?
            .flatten()
            .map(|e| e.path().join("chats"))
            .filter(|c| c.is_dir())
            .collect();
        chats.sort();
        paths.extend(chats);
    }
    if args.opencode {
        let data = match std::env::var_os("XDG_DATA_HOME").filter(|h| !h.is_empty()) {
            Some(d) => PathBuf::from(d),
            None => home_dir()?.join(".local").join("share"),
        };
        paths.push(data.join("opencode").join("opencode.db"));
    }
    Ok(paths)
}

/// Each OpenCode database among `paths` (a file named `opencode.db`) replaced by the
/// files of its sessions, written out under cairn's home.
fn opencode_sessions(home: &Home, paths: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_file() && p.file_name().is_some_and(|n| n == "opencode.db") {
            let dir = home.root.join("imports").join("opencode");
            out.extend(cairn_import::opencode::materialize(&p, &dir)?);
        } else {
            out.push(p);
        }
    }
    Ok(out)
}

fn import(args: Args) -> Result<ExitCode> {
    let mut paths = args.paths.clone();
    paths.extend(default_locations(&args)?);
    if paths.is_empty() {
        bail!(
            "nothing to import: give files or folders, or --codex, --claude, --gemini or --opencode"
        );
    }
    for p in &paths {
        if !p.exists() {
            bail!("{}: no such file or folder", p.display());
        }
    }
    let options = cairn_import::Options {
        keep_original: args.keep_original,
        since: args.since.as_deref().map(since).transpose()?,
        ..cairn_import::Options::default()
    };
    let home = Home::from_env()?;
    let paths = opencode_sessions(&home, paths)?;
    let files = cairn_import::source_files(&paths);
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let bar = std::io::stderr().is_terminal().then(|| {
        let pb = indicatif::ProgressBar::new(total);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} {msg}",
        ) {
            pb.set_style(style);
        }
        pb
    });
    let summary = cairn_import::import_paths(&home, &paths, &options, &mut |file, bytes| {
        if let Some(pb) = &bar {
            pb.inc(bytes);
            pb.set_message(
                file.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
        }
    });
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    if args.output.json {
        out::line(&serde_json::to_string_pretty(&summary)?)?;
    } else {
        for s in &summary.imported {
            out::line(&format!(
                "{} {} {} ({}{}, {}) {}",
                if s.continued {
                    "continued"
                } else {
                    "imported "
                },
                s.id,
                s.agent,
                s.branch,
                if s.continued { ", continued" } else { "" },
                count(s.calls, "call"),
                s.source.display()
            ))?;
        }
        for w in &summary.warning_list {
            out::note(&format!("cairn: warning: {w}"));
        }
        for (path, e) in &summary.errors {
            out::note(&error_line(path, e));
        }
        let secrets: u64 = summary.secrets.values().sum();
        out::line(&format!(
            "{}: {} ({} continued), {} unchanged, {} skipped, {} failed; {} ({} interrupted), {}, {}, {} kept, {} redacted",
            count(summary.files as u64, "file"),
            count(summary.sessions as u64, "session"),
            summary.continued,
            summary.unchanged,
            summary.skipped,
            summary.errors.len(),
            count(summary.calls as u64, "call"),
            summary.interrupted,
            count(summary.lines as u64, "line"),
            count(summary.warnings as u64, "warning"),
            count(summary.unknown as u64, "unknown line"),
            count(secrets, "secret"),
        ))?;
    }
    Ok(if summary.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// An import's error about `path`, as a person reads it: `cairn: PATH: what`, the path
/// once (most errors already begin with it).
fn error_line(path: &std::path::Path, e: &str) -> String {
    let shown = path.display().to_string();
    match e.strip_prefix(&format!("{shown}: ")) {
        Some(rest) => format!("cairn: {shown}: {rest}"),
        None => format!("cairn: {shown}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    // Regression: import errors said `error: /p: /p: neither …`, the path twice and
    // without `cairn:`.
    #[test]
    fn an_import_error_names_its_path_once_after_cairn() {
        let p = std::path::Path::new("/x/a.jsonl");
        assert_eq!(
            super::error_line(p, "/x/a.jsonl: neither a Codex rollout"),
            "cairn: /x/a.jsonl: neither a Codex rollout"
        );
        assert_eq!(
            super::error_line(p, "store: bad"),
            "cairn: /x/a.jsonl: store: bad"
        );
    }
}
