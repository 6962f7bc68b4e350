//! `cairn mcp serve` for the tests: the same library call the command line makes
//! (`cairn_engine::mcp::serve_session`), without the cli crate, which has no library.
//! Usage: cairn_mcp_serve WORKSPACE CATALOG always|never (home from CAIRN_HOME).

use std::process::ExitCode;

use cairn_engine::Home;
use cairn_engine::permission::Policy;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workspace, catalog, approve] = args.as_slice() else {
        eprintln!("usage: cairn_mcp_serve WORKSPACE CATALOG always|never");
        return ExitCode::from(2);
    };
    let run = || -> Result<(), String> {
        let home = Home::from_env().map_err(|e| e.to_string())?;
        let catalog = catalog
            .parse::<cairn_engine::Catalog>()
            .map_err(|e| e.to_string())?;
        let policy = if approve == "always" {
            Policy::AllowAll
        } else {
            Policy::DenyAll
        };
        cairn_engine::mcp::serve_session(
            &home,
            std::path::Path::new(workspace),
            cairn_engine::EngineConfig::new(catalog),
            policy,
            std::io::stdin().lock(),
            std::io::stdout().lock(),
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn_mcp_serve: {e}");
            ExitCode::from(2)
        }
    }
}
