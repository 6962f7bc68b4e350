//! `cairn-hook <agent> [--approve ask|always|never]`: the hook an agent runs before
//! and after each of its tool calls, as `cairn hook <agent>` runs it, in a binary of
//! its own. An agent waits for two of these processes per tool call, and most of a
//! hook process's time is the process itself: this one links only what a hook needs
//! (no command tree, terminal UI, archive or search), so it has half the relocations
//! and pages to set up and tear down. It keeps glibc's allocator: mimalloc's arena
//! and bitmaps, set up at each start, cost a short process more than its faster
//! allocations save (bench/HISTORY.md).

use std::process::ExitCode;

const USAGE: &str = "usage: cairn-hook claude|codex|gemini|opencode [--approve ask|always|never]";

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some((agent, approve)) = cairn_cli::hook::agent_args(&args) {
        cairn_cli::hook::exit_at_once(cairn_cli::hook::run(agent, approve));
    }
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match words.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["--help" | "-h"] => {
            println!(
                "{USAGE}\n\nThe hook `cairn hook install` writes into an agent's settings: one event as JSON on stdin, cairn's answer on stdout, as `cairn hook <agent>` (see `cairn hook --help`)."
            );
            ExitCode::SUCCESS
        }
        ["--version" | "-V"] => {
            println!("cairn-hook {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "cairn-hook: {USAGE} (got `{}`); it is the hook `cairn hook install` writes into an agent's settings, and runs as `cairn hook <agent>` does (`cairn hook --help`)",
                words.join(" ")
            );
            ExitCode::from(2)
        }
    }
}
