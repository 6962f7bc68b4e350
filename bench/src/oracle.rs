//! `cairn-bench oracle`: the consent oracle (`cairn_tests::oracle`) on a corpus of any
//! size, once: every generated line in real bash and sh against what the `shell` tool
//! and the hook would have asked, and a sample of each class through a real engine.
//! Prints the class table, the summary and the notes; writes every failure to
//! `--failures`. Exits 0 whatever it finds: it measures, the test judges.

use std::path::PathBuf;

use anyhow::{Context, Result};
use cairn_tests::bashgen::Class;
use cairn_tests::oracle::{self, Config};

#[derive(Debug, clap::Args)]
pub struct OracleArgs {
    /// Lines of the corpus (they take the classes in turn).
    #[arg(long, default_value_t = 100_000)]
    pub lines: u64,
    /// The corpus's seed (the test's default is 40).
    #[arg(long, default_value_t = 40)]
    pub seed: u64,
    /// Workers running lines.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Each shell run's time limit, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub line_timeout_ms: u64,
    /// Lines of each class run end to end through a real engine.
    #[arg(long, default_value_t = 30)]
    pub engine_lines_per_class: u64,
    /// Where to write every failing line (class, verdict path, shells, line).
    #[arg(long)]
    pub failures: Option<PathBuf>,
}

pub fn run(args: &OracleArgs) -> Result<()> {
    let config = Config {
        seed: args.seed,
        lines: args.lines,
        threads: args.threads,
        line_timeout_ms: args.line_timeout_ms,
        engine_lines_per_class: args.engine_lines_per_class,
        progress_lines: 5000,
    };
    eprintln!(
        "oracle: {} lines of {} classes, seed {}, {} threads",
        config.lines,
        Class::ALL.len(),
        config.seed,
        config.threads
    );
    let report = oracle::run(&config);
    print!("{}", report.class_table());
    print!("{}", report.notes());
    println!("{}", report.summary());
    if let Some(path) = &args.failures {
        std::fs::write(path, report.failure_list())
            .with_context(|| format!("write {}", path.display()))?;
        println!(
            "{} failures written to {}",
            report.failures().len() + report.engine_failures().len(),
            path.display()
        );
    }
    Ok(())
}
