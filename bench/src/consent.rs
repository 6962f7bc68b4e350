//! `cairn-bench consent`: what parsing a command line costs each shell call. Every
//! `shell` call's permission analyses its line with tree-sitter-bash and matches the
//! guarded commands on the parsed argv (`cairn_core::command`); this measures that, per
//! kind of line, and the whole permission decision against an allow list, to set
//! beside a `run_shell true` (`cairn-bench shell`).

use std::time::Instant;

use anyhow::Result;
use cairn_engine::command::{analyse, default_guards, guarded};
use cairn_engine::permission::shell_need;

#[derive(Debug, clap::Args)]
pub struct ConsentArgs {
    /// Analyses of each line per round.
    #[arg(long, default_value_t = 2000)]
    pub runs: usize,
    /// Rounds (the median of the rounds' medians is reported).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
}

/// Lines of each kind an agent sends.
const LINES: &[(&str, &str)] = &[
    ("plain", "cargo test"),
    (
        "compound",
        "cargo fmt && cargo clippy --workspace -- -D warnings 2>&1 | tail -n 20",
    ),
    (
        "pipeline",
        "grep -rn 'fn main' src | sort | uniq -c | sort -rn | head -n 5",
    ),
    (
        "wrapped",
        "find . -name '*.rs' -exec wc -l {} + | xargs -n1 echo",
    ),
    ("substituted", "echo $(git rev-parse HEAD) > out.txt"),
    ("nested", "bash -c 'cd sub && make -j4 && ./run.sh --flag'"),
    ("guarded", "git push --force-with-lease origin +main"),
    (
        "long",
        "for f in a b c d e f g h; do if [ -f \"$f\" ]; then cat \"$f\" | sed -e 's/x/y/g' >> all.txt; fi; done; wc -l all.txt",
    ),
];

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

pub fn run(args: &ConsentArgs) -> Result<()> {
    let guards = default_guards();
    let root = "/work/project";
    println!(
        "runs {} rounds {}: median µs per line (analysis; analysis + guards + question)",
        args.runs, args.rounds
    );
    for (kind, line) in LINES {
        let mut analysis = Vec::new();
        let mut whole = Vec::new();
        for _ in 0..args.rounds {
            let t = Instant::now();
            for _ in 0..args.runs {
                std::hint::black_box(analyse(std::hint::black_box(line), root));
            }
            analysis.push(t.elapsed().as_secs_f64() * 1e6 / args.runs as f64);
            let t = Instant::now();
            for _ in 0..args.runs {
                let a = analyse(std::hint::black_box(line), root);
                std::hint::black_box(guarded(&guards, &a));
                let need = shell_need(a, "");
                std::hint::black_box(cairn_engine::decide::question(need, &guards));
            }
            whole.push(t.elapsed().as_secs_f64() * 1e6 / args.runs as f64);
        }
        println!(
            "{kind:<12} {:>7.1} µs  {:>7.1} µs  ({} bytes)",
            median(&mut analysis),
            median(&mut whole),
            line.len()
        );
    }
    Ok(())
}
