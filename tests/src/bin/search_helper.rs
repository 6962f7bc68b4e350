//! A child process for the search index's crash test: it is killed with SIGKILL
//! between a call and the background indexer's commit.
//!
//! ```text
//! search_helper HOME WS   start a session in WS (home HOME) whose indexer commits only
//!                         after an hour, read WS/f.txt through read_file, print
//!                         "called <session folder>", then sleep until killed
//! ```

use std::io::Write;
use std::path::Path;

use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_search::{Indexer, IndexerLimits};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, home, ws] = args.as_slice() else {
        return Err("usage: search_helper HOME WS".into());
    };
    let home = Home::at(Path::new(home));
    let mut e = Engine::start(&home, Path::new(ws), EngineConfig::new(Catalog::Thoth))?;
    e.set_approver(Box::new(Policy::AllowAll));
    let dir = e.dir().to_path_buf();
    e.set_sink(Box::new(Indexer::start(
        &home.root.join(cairn_search::sqlite::INDEX_FILE),
        &dir,
        IndexerLimits {
            batch_docs_max: 1_000_000,
            batch_ms: 3_600_000,
            ..IndexerLimits::default()
        },
    )));
    e.call("read_file", serde_json::json!({ "path": "f.txt" }))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "called {}", dir.display())?;
    out.flush()?;
    std::thread::sleep(std::time::Duration::from_secs(3600));
    Ok(())
}
