//! `cairn export FORMAT`: sessions in the formats other tools read (`otel`: traces
//! over OTLP; `atif`: Harbor's trajectory files), and the live OpenTelemetry export the commands that write sessions
//! give their home ([`with_live_export`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
pub use cairn_cli::live_export::{config_in_force, with_live_export};
use cairn_engine::Home;
use cairn_export::otel::Sender;

use crate::out;

/// `cairn export`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub format: Format,
}

/// What a session is exported as.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Format {
    /// Send sessions to an OpenTelemetry collector as traces (OTLP over HTTP/protobuf,
    /// or gRPC with --protocol grpc; GenAI semantic conventions: one `invoke_agent` span per session, `chat` per
    /// model turn, `execute_tool` per call; docs/EXPORT.md). The collector is
    /// --endpoint, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT,
    /// else `endpoint` of [otel] in config.toml. Ids derive from the session id and
    /// seq: exporting again (or after a live export) gives the same ids. Messages and
    /// tool content only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
    /// (or `capture_content` of [otel]), as the log holds them: redacted. With --all, a
    /// session that never started (an empty log) is named on stderr and skipped. Exit 0
    /// when every other session was sent, 1 when some were not, 2 could not run.
    Otel(OtelArgs),
    /// Write sessions as ATIF trajectories (Harbor's Agent Trajectory Interchange
    /// Format, ATIF-v1.8): one `<session>.atif.json` per session in --out (the current
    /// folder by default). Steps: user messages, model turns with the calls they asked
    /// for and their outputs, tokens and cost per turn (cost where the [prices] of
    /// config.toml know the model); cairn's ids and hashes under `extra.cairn`
    /// (docs/EXPORT.md). `cairn import` reads the files back. With --all, a session
    /// that never started (an empty log) is named on stderr and skipped. Exit 0 when
    /// every other session was written, 1 when some were not, 2 could not run.
    Atif(AtifArgs),
}

/// `cairn export atif`.
#[derive(Debug, Clone, clap::Args)]
pub struct AtifArgs {
    /// A session: id, unique prefix, folder, or `last`.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub session: Option<String>,
    /// Every session of the home, each project's.
    #[arg(long)]
    pub all: bool,
    /// The folder the files are written to (made when missing).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
}

/// `cairn export otel`.
#[derive(Debug, Clone, clap::Args)]
pub struct OtelArgs {
    /// A session: id, unique prefix, folder, or `last`.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub session: Option<String>,
    /// Every session of the home, each project's.
    #[arg(long)]
    pub all: bool,
    /// The collector's OTLP/HTTP base URL (`http://localhost:4318`); traces are posted
    /// to URL/v1/traces. With `--protocol grpc`, its gRPC endpoint
    /// (`http://localhost:4317`; port 4317 when the URL names none).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The OTLP protocol, over OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
    /// OTEL_EXPORTER_OTLP_PROTOCOL and `protocol` of [otel]: `http/protobuf` (the
    /// default) or `grpc` (plaintext; no TLS for gRPC).
    #[arg(long, value_name = "PROTOCOL", value_parser = ["http/protobuf", "grpc"])]
    pub protocol: Option<String>,
}

impl Args {
    pub fn run(self) -> Result<ExitCode> {
        match self.format {
            Format::Otel(a) => a.run(),
            Format::Atif(a) => a.run(),
        }
    }
}

/// A session folder `--all` found: one to export, or one it cannot.
enum Found {
    Session(PathBuf),
    /// A session that never started (an empty log): nothing to export, and nothing
    /// wrong with the home.
    Empty(PathBuf),
    /// A session folder with no log that can be read: a failure, as an export's is.
    Unreadable(PathBuf, String),
}

/// The session `spec` names, or every session folder of the home (each project's,
/// oldest first), those that cannot be exported among them.
fn sessions(home: &Home, spec: Option<&str>) -> Result<Vec<Found>> {
    Ok(match spec {
        Some(spec) => vec![Found::Session(crate::locate::session_dir(spec)?)],
        None => home
            .projects()
            .iter()
            .flat_map(|p| session_folders(&p.sessions_dir()))
            .collect(),
    })
}

/// Every session folder in `sessions_dir` but those being made (unborn), by name.
fn session_folders(sessions_dir: &Path) -> Vec<Found> {
    let entries = match std::fs::read_dir(sessions_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            return vec![Found::Unreadable(
                sessions_dir.to_path_buf(),
                format!("cannot list its sessions: {e}"),
            )];
        }
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| !cairn_store::is_unborn(&e.file_name()))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let log = cairn_store::log_path(&dir);
            match std::fs::metadata(&log) {
                Ok(m) if m.is_file() && m.len() > 0 => Found::Session(dir),
                Ok(m) if m.is_file() => Found::Empty(dir),
                Ok(_) => Found::Unreadable(dir, format!("{} is not a file", log.display())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Found::Unreadable(
                    dir,
                    format!(
                        "no log ({} is missing): the folder is not a session's, or its log was removed",
                        cairn_store::LOG_FILE
                    ),
                ),
                Err(e) => Found::Unreadable(dir, format!("cannot read {}: {e}", log.display())),
            }
        })
        .collect()
}

impl AtifArgs {
    fn run(self) -> Result<ExitCode> {
        let home = Home::from_env()?;
        let dirs = sessions(&home, self.session.as_deref())?;
        Ok(each_session(&dirs, self.all, "written", |dir| {
            let prices = crate::sessioncmd::prices_for(dir, None)?;
            let cost = |model: &str, t: &cairn_export::atif::Tokens| {
                let (_, p) = prices.as_ref()?;
                let price = p.get(model)?;
                Some(price.cost(&cairn_replay::audit::TokenUse {
                    input: t.input,
                    output: t.output,
                    cached: t.cached,
                    ..Default::default()
                }))
            };
            let t = cairn_export::atif::trajectory_of(dir, &cost)?;
            let steps = t.steps.len();
            let path = cairn_export::atif::write_to(&t, &self.out)?;
            Ok(format!("{}: {steps} steps", path.display()))
        }))
    }
}

impl OtelArgs {
    fn run(self) -> Result<ExitCode> {
        let home = Home::from_env()?;
        let Some(config) =
            config_in_force(&home, self.endpoint.as_deref(), self.protocol.as_deref())?
        else {
            anyhow::bail!(
                "no OpenTelemetry collector is configured: give --endpoint URL, set OTEL_EXPORTER_OTLP_ENDPOINT, or `endpoint` in the [otel] table of config.toml"
            );
        };
        let dirs = sessions(&home, self.session.as_deref())?;
        let sender = Sender::new(&config)?;
        Ok(each_session(&dirs, self.all, "sent", |dir| {
            let s = cairn_export::otel::spans_of(dir, config.capture_content)?;
            let (session, spans, records) = (s.session, s.spans.len(), s.records);
            sender.send(s.spans)?;
            Ok(format!(
                "{session}: {spans} spans ({records} records) sent to {}",
                sender.url()
            ))
        }))
    }
}

/// Exports each session folder found with `export`: the line it gives printed, or its
/// error noted and the next one taken. A session that never started is named on stderr
/// as skipped; one that cannot be read is noted as a failure. With `--all` (`all`), a
/// summary on stderr counts them. Exit status 1 when any failed; a skipped session is
/// not a failure.
fn each_session(
    found: &[Found],
    all: bool,
    done: &str,
    mut export: impl FnMut(&Path) -> Result<String>,
) -> ExitCode {
    let (mut exported, mut skipped, mut failed) = (0u64, 0u64, 0u64);
    for f in found {
        match f {
            Found::Session(dir) => match export(dir) {
                Ok(line) => {
                    exported += 1;
                    println!("{line}");
                }
                Err(e) => {
                    failed += 1;
                    out::note(&format!("cairn: {}: {e}", dir.display()));
                }
            },
            Found::Empty(dir) => {
                skipped += 1;
                out::note(&format!(
                    "cairn: {}: skipped: its log is empty (the session never started; nothing to export)",
                    dir.display()
                ));
            }
            Found::Unreadable(dir, why) => {
                failed += 1;
                out::note(&format!("cairn: {}: {why}", dir.display()));
            }
        }
    }
    if all {
        out::note(&export_summary(exported, done, skipped, failed));
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `3 sessions: 1 written, 1 skipped (never started), 1 failed`.
fn export_summary(exported: u64, done: &str, skipped: u64, failed: u64) -> String {
    let mut parts = vec![format!("{exported} {done}")];
    if skipped > 0 {
        parts.push(format!("{skipped} skipped (never started)"));
    }
    if failed > 0 {
        parts.push(format!("{failed} failed"));
    }
    format!(
        "{}: {}",
        cairn_cli::summary::count(exported + skipped + failed, "session"),
        parts.join(", ")
    )
}
