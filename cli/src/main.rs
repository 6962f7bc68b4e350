//! `cairn`: the command line of the cairn engine. Thin glue: every piece of logic lives
//! in the library crates; this crate parses flags and formats output.

/// mimalloc, not glibc's malloc: a recorded call makes a few hundred small allocations
/// and frees; mimalloc's take about a third of glibc's instructions, and 4 µs off a
/// trivial call's 37 (issue 18, bench/HISTORY.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod archivecmd;
mod auditcmd;
mod batchcmd;
mod chatcmd;
mod clidoc;
mod cmd;
mod exportcmd;
mod firstrun;
mod hookcmd;
mod livecmd;
mod locate;
mod logcmd;
mod mcpcmd;
mod out;
mod provecmd;
mod queuecmd;
mod replaycmd;
mod reruncmd;
mod resumecmd;
mod screen;
mod searchcmd;
mod sessioncmd;
mod stream;
mod witnesscmd;

use std::process::ExitCode;

use clap::Parser;
use cmd::Command;

/// What `cairn -h` ends with.
macro_rules! exit_codes {
    () => {
        "Exit codes: 0 success (or clean, identical), 1 problems found (verify, replay, diff), 2 could not run; a session stopped by SIGINT, SIGTERM or SIGHUP is ended cleanly, then exits 130, 143 or 129. Errors go to stderr prefixed `cairn:`; a closed pipe exits 0. Colours only on a terminal, and never when NO_COLOR is set and not empty."
    };
}

/// cairn: an event-sourced engine for coding agents.
///
/// Exit codes: 0 success (or clean), 1 problems found, 2 could not run; a session
/// stopped by SIGINT, SIGTERM or SIGHUP exits 130, 143 or 129 once it is ended.
#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    long_about = None,
    after_help = exit_codes!(),
    after_long_help = concat!(
        "A SESSION is an id, any part of one that no other id holds (the short id `cairn sessions` shows), a session folder, `last` (the newest session you started or resumed in this project: run, chat, resume, fork; never a replay; from outside any project, the newest anywhere) or `last-replay`; an ambiguous part is an error listing the candidates. The log verbs also take a log file. Sessions live in $CAIRN_HOME (default ~/.cairn), never in the workspace.\n\n",
        exit_codes!()
    )
)]
struct Cli {
    /// Without a command, on a terminal: `chat`.
    #[command(subcommand)]
    command: Option<Command>,
    /// The team archive (postgres://USER@HOST:PORT/DB) for `cairn archive`,
    /// `archive:<id>` sessions and `search --in-archive` (default: CAIRN_ARCHIVE_URL,
    /// then `url` in the configuration's [archive] table).
    #[arg(long, global = true, value_name = "URL")]
    archive: Option<String>,
}

/// The command line parsed, and whether `search --in-archive` was given (a switch the
/// derived `Cli` has no field for: see `cmd::search`); a usage error is printed
/// with the `cairn:` prefix of every error and exits 2, help and version print as usual
/// and exit 0.
fn parse() -> Result<(Cli, bool), ExitCode> {
    use clap::FromArgMatches;
    let parsed = cli_command().try_get_matches().and_then(|mut m| {
        let in_archive = m
            .subcommand_matches("search")
            .is_some_and(|s| s.get_flag(cmd::search::IN_ARCHIVE));
        Cli::from_arg_matches_mut(&mut m)
            .map(|cli| (cli, in_archive))
            .map_err(|e| e.format(&mut cli_command()))
    });
    match parsed {
        Ok(parsed) => Ok(parsed),
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return Err(ExitCode::from(
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        2
                    } else {
                        0
                    },
                ));
            }
            out::note(&usage_error(&e.to_string()));
            Err(ExitCode::from(2))
        }
    }
}

/// The command line as clap parses it, its help listing the commands in groups.
fn cli_command() -> clap::Command {
    use clap::CommandFactory;
    clidoc::with_groups(Cli::command())
}

/// clap's rendering of a usage error (`error: …`), with `cairn:` in place of `error:`.
fn usage_error(rendered: &str) -> String {
    let text = rendered.trim_end();
    format!("cairn: {}", text.strip_prefix("error: ").unwrap_or(text))
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some((agent, approve)) = hookcmd::fast_args(&args) {
        cairn_cli::hook::exit_at_once(hookcmd::run(agent, approve));
    }
    // Hidden, and outside clap (the Command enum stays as it is): docs/CLI.md.
    if args.len() == 1 && args[0] == "help-markdown" {
        use std::io::Write;
        let text = clidoc::markdown(&cli_command());
        return match std::io::stdout().write_all(text.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("cairn: help-markdown: {e}");
                ExitCode::from(2)
            }
        };
    }
    let (cli, in_archive) = match parse() {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    if let Some(url) = cli.archive {
        archivecmd::set_flag_url(url);
    }
    let command = match cli.command {
        Some(c) => c,
        // `cairn` alone: the chat on a terminal, else the help.
        None if chatcmd::on_terminal() => Command::Chat(cmd::chat::Args::defaults()),
        None => {
            let _ = cli_command().print_help();
            return ExitCode::from(2);
        }
    };
    // The commands that run a session end it cleanly on SIGINT, SIGTERM and SIGHUP.
    if command.runs_session() {
        sessioncmd::prepare();
    }
    let writes_sessions = command.writes_sessions();
    let result = command.run(in_archive);
    if writes_sessions {
        searchcmd::index_quietly();
    }
    // Stopped by a signal: the session is ended and synced by now; exit as a shell
    // reports a process the signal killed (128 + its number).
    if let Some(s) = cairn_engine::signal::received() {
        if let Err(e) = &result
            && !out::is_broken_pipe(e)
        {
            out::note(&format!("cairn: {}", out::error_text(e)));
        }
        return ExitCode::from(s.exit_code());
    }
    match result {
        Ok(code) => code,
        Err(e) if out::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            out::note(&format!("cairn: {}", out::error_text(&e)));
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The hook's command lines dispatched before clap: each one the fast path takes
    /// is parsed by clap to the same command, and every other goes to clap.
    #[test]
    fn the_hook_fast_path_takes_exactly_what_clap_parses_to_a_hook() {
        let cases: &[(&[&str], bool)] = &[
            (&["hook", "claude"], true),
            (&["hook", "codex"], true),
            (&["hook", "claude", "--approve", "never"], true),
            (&["hook", "codex", "--approve=always"], true),
            (&["hook", "gemini"], true),
            (&["hook", "gemini", "--approve", "never"], true),
            (&["hook", "opencode"], true),
            (&["hook", "opencode", "--approve", "never"], true),
            (&["hook", "open-code"], false),
            (&["hook", "claude", "--approve", "ask"], true),
            (&["hook", "claude", "--approve", "maybe"], false),
            (&["hook", "claude", "--approve"], false),
            (&["hook", "claude", "--help"], false),
            (&["hook", "claude", "extra"], false),
            (&["hook", "install", "claude"], false),
            (&["--archive", "postgres://a@b/c", "hook", "claude"], false),
            (&["hook"], false),
            (&["--help"], false),
            (&[], false),
        ];
        for (args, fast) in cases {
            let os: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
            let taken = hookcmd::fast_args(&os);
            assert_eq!(taken.is_some(), *fast, "{args:?}");
            let Some((agent, approve)) = taken else {
                continue;
            };
            let cli = Cli::try_parse_from(std::iter::once("cairn").chain(args.iter().copied()))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let parsed = match &cli.command {
                Some(Command::Hook(hook)) => hook.agent_hook(),
                _ => None,
            };
            let parsed = parsed.unwrap_or_else(|| panic!("{args:?}: {:?}", cli.command));
            assert_eq!(parsed, (agent, approve), "{args:?}");
            assert!(cli.archive.is_none());
        }
    }

    /// Which commands write sessions (and so index them as they end) is a property
    /// of the command, and a command that runs a session writes one.
    #[test]
    fn the_commands_that_write_sessions_are_those_that_record_one() {
        let cases: &[(&[&str], bool, bool)] = &[
            (&["run", "--script", "s.jsonl"], true, true),
            (&["chat"], true, true),
            (&["resume", "last"], true, true),
            (&["fork", "last", "--workspace", "d"], true, true),
            (&["mcp", "serve"], true, true),
            (&["mcp", "proxy", "n", "--", "x"], true, true),
            (&["continue"], false, true),
            (&["replay", "last"], false, true),
            (&["import", "--codex"], false, true),
            (&["demo"], false, true),
            (&["sessions"], false, false),
            (&["show", "last"], false, false),
            (&["mcp", "list"], false, false),
            (&["verify", "last"], false, false),
            (&["search", "word"], false, false),
        ];
        for (args, runs, writes) in cases {
            let cli = Cli::try_parse_from(std::iter::once("cairn").chain(args.iter().copied()))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let command = cli.command.unwrap();
            assert_eq!(command.runs_session(), *runs, "{args:?}");
            assert_eq!(command.writes_sessions(), *writes, "{args:?}");
        }
    }
}
