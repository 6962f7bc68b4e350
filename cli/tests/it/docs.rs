//! The documents a newcomer reads, checked against the code: README.md stays short and
//! its tour runs, docs/CLI.md is what `cairn help-markdown` prints, `cairn --help`
//! lists the commands in the groups of a user's journey, and links between the
//! documents land on a file and a heading that exist.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// README.md's size limit (issue 42): what it is, how to run it, a tour, links.
const README_BYTES_MAX: usize = 8 * 1024;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn cairn(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env("CAIRN_HOME", home)
        .env_remove("NO_COLOR")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The section of a Markdown text under the heading `## {title}`, to the next `## `.
fn section<'a>(md: &'a str, title: &str) -> &'a str {
    let start = md
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("no section {title:?}"));
    let rest = &md[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 4);
    &rest[..end]
}

/// The bodies of the ```sh blocks of a Markdown text.
fn sh_blocks(md: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in md.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// Text with every run of whitespace made one space.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn readme_is_at_most_8_kib() {
    let size = read("README.md").len();
    assert!(
        size <= README_BYTES_MAX,
        "README.md is {size} bytes, more than {README_BYTES_MAX}: move the detail to docs/"
    );
}

/// The quick start's test command is the one CI runs: .ci/run says it runs "the
/// README's test command", and a newcomer runs what the README says.
#[test]
fn readme_test_command_is_the_one_ci_runs() {
    let readme = read("README.md");
    let quick = sh_blocks(section(&readme, "Quick start")).concat();
    let commands: Vec<&str> = quick
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(commands.len(), 2, "two quick-start commands: {commands:?}");
    let test = commands
        .iter()
        .find(|c| c.starts_with("cargo test"))
        .expect("a cargo test command in the quick start");
    let ci = read(".ci/run");
    assert!(
        ci.lines().any(|l| l.trim() == *test),
        ".ci/run does not run the README's `{test}`"
    );
}

/// Issue 40: the README says what an "always" covers, in these words.
#[test]
fn readme_keeps_the_consent_rule_of_issue_40() {
    let readme = words(&read("README.md"));
    for sentence in [
        "A command line is parsed (tree-sitter's bash grammar) and asks for `shell:<program>` of every program it runs, wrapped ones too (`env`, `xargs`, `find -exec`, …), showing the whole line every time it asks.",
        "An \"always\" covers a later line only when the analysis fully understands it — every construct of a kind it reads, every word known from the text, no option of a program that runs or writes something else, no write outside the workspace (symbolic links included) — and anything it does not understand asks every time and says why, checked against real bash by a differential test;",
    ] {
        assert!(readme.contains(sentence), "README.md lost: {sentence}");
    }
}

/// The tour's commands, run as written (in a temporary folder instead of /tmp), do
/// what the tour says: a crash, a resume that finishes the script, a replay that
/// diverges at the interrupted call, a checkout and a fork at c2. Its `sh` blocks run
/// offline and alone; the `bash` ones need a network or a person (installing Phoenix
/// and serving it, the first run's questions) and are not run here.
#[test]
fn readme_tour_runs_as_written() {
    let readme = read("README.md");
    let tour = sh_blocks(section(&readme, "A five-minute tour")).concat();
    assert!(tour.contains("kill -9"), "{tour}");
    // A server left running in the background would hold the script's output open.
    assert!(!tour.contains("serve &"), "{tour}");
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let script = tour.replace("/tmp/", &format!("{}/", tmp.path().display()));
    let bin = Path::new(env!("CARGO_BIN_EXE_cairn")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-c", &script])
        .env("PATH", path)
        .env("CAIRN_HOME", &home)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let all = format!("{stdout}\n--- stderr\n{stderr}");
    assert!(stdout.contains(" interrupted "), "sessions: {all}");
    assert!(stderr.contains("going on from step 5"), "resume: {all}");
    assert!(
        stdout.contains("first divergence: seq 11 c3 shell"),
        "replay: {all}"
    );
    assert!(stdout.contains("changed: c3"), "diff: {all}");
    assert!(stdout.contains("clean: "), "verify: {all}");
    let ws = tmp.path().join("tour");
    assert_eq!(
        std::fs::read_to_string(ws.join("done.txt")).unwrap(),
        "done\n"
    );
    for at_c2 in ["tour-c2", "tour-fork"] {
        let greeting = std::fs::read_to_string(tmp.path().join(at_c2).join("greeting.txt"));
        assert_eq!(greeting.unwrap(), "HELLO\n", "{at_c2}: {all}");
        assert!(!tmp.path().join(at_c2).join("done.txt").exists(), "{at_c2}");
    }
}

#[test]
fn docs_cli_md_is_what_help_markdown_prints() {
    let home = tempfile::tempdir().unwrap();
    let out = cairn(home.path(), &["help-markdown"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let generated = text(&out.stdout);
    let docs = read("docs/CLI.md");
    if generated != docs {
        let line = generated
            .lines()
            .zip(docs.lines())
            .position(|(g, d)| g != d)
            .unwrap_or_else(|| generated.lines().count().min(docs.lines().count()));
        panic!(
            "docs/CLI.md is out of date (first difference at line {}): regenerate it with\n  \
             cargo run -p cairn-cli -- help-markdown > docs/CLI.md\ngenerated: {:?}\ndocs:      {:?}",
            line + 1,
            generated.lines().nth(line),
            docs.lines().nth(line)
        );
    }
}

/// The groups `cairn --help` shows, and the commands each must hold in this order (a
/// group may hold more).
const JOURNEY: &[(&str, &[&str])] = &[
    ("Record", &["run", "chat", "hook", "mcp"]),
    ("Review", &["sessions", "show", "browse", "audit", "search"]),
    (
        "Re-run",
        &["replay", "diff", "checkout", "fork", "resume", "continue"],
    ),
    (
        "Integrity",
        &["verify", "key", "prove", "witness", "checkpoint"],
    ),
    ("Team", &["archive", "import"]),
    ("Other", &["demo", "tools", "completions", "help"]),
];

/// `cairn --help`'s headings, each with the commands listed under it.
fn help_groups(help: &str) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for line in help.lines() {
        if let Some(heading) = line.strip_suffix(':').filter(|h| !h.starts_with(' ')) {
            groups.push((heading.to_string(), Vec::new()));
        } else if let (Some(name), Some((_, commands))) = (
            line.strip_prefix("  ")
                .filter(|l| !l.starts_with(' ') && !l.starts_with('-')),
            groups.last_mut(),
        ) {
            commands.extend(name.split_whitespace().next().map(str::to_string));
        }
    }
    groups
}

#[test]
fn help_lists_the_commands_grouped_by_journey() {
    let home = tempfile::tempdir().unwrap();
    let help = text(&cairn(home.path(), &["--help"]).stdout);
    let groups = help_groups(&help);
    let headings: Vec<&str> = groups.iter().map(|(h, _)| h.as_str()).collect();
    let mut expected: Vec<&str> = JOURNEY.iter().map(|(h, _)| *h).collect();
    expected.push("Options");
    assert_eq!(headings, expected, "{help}");
    for ((heading, listed), (_, journey)) in groups.iter().zip(JOURNEY) {
        let in_order: Vec<&str> = listed
            .iter()
            .map(String::as_str)
            .filter(|c| journey.contains(c))
            .collect();
        assert_eq!(&in_order, journey, "{heading}: {listed:?}");
    }
    let commands: Vec<&String> = groups
        .iter()
        .filter(|(h, _)| h != "Options")
        .flat_map(|(_, c)| c)
        .collect();
    let unique: BTreeSet<&String> = commands.iter().copied().collect();
    assert_eq!(
        unique.len(),
        commands.len(),
        "a command listed twice: {commands:?}"
    );
    // docs/CLI.md has a section per command, in the same order.
    let documented: Vec<String> = read("docs/CLI.md")
        .lines()
        .filter_map(|l| l.strip_prefix("### `cairn "))
        .map(|l| l.trim_end_matches('`').to_string())
        .collect();
    let listed: Vec<String> = commands
        .into_iter()
        .filter(|c| *c != "help")
        .cloned()
        .collect();
    assert_eq!(documented, listed);
    // `cairn help` is the same text.
    assert_eq!(text(&cairn(home.path(), &["help"]).stdout), help);
}

/// The anchor GitHub gives a Markdown heading.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(md: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// Every relative link of the documents a newcomer reads lands on a file that exists
/// and, when it names one, on a heading of that file (bench/RESULTS.md's rounds moved
/// to bench/HISTORY.md; the links into them moved too).
#[test]
fn links_between_the_documents_resolve() {
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut files = vec![
        "README.md".to_string(),
        "CONTRIBUTING.md".to_string(),
        "bench/README.md".to_string(),
        "bench/RESULTS.md".to_string(),
        "bench/HISTORY.md".to_string(),
    ];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            files.push(format!("docs/{name}"));
        }
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let md = read(file);
        let dir = Path::new(file).parent().unwrap_or(Path::new(""));
        for cap in link.captures_iter(&md) {
            let target = &cap[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target, None),
            };
            let resolved = if path.is_empty() {
                PathBuf::from(file)
            } else {
                dir.join(path)
            };
            checked += 1;
            let Ok(body) = std::fs::read_to_string(root().join(&resolved)) else {
                if !root().join(&resolved).exists() {
                    broken.push(format!("{file}: {target}: no such file"));
                }
                continue;
            };
            if let Some(fragment) = fragment
                && resolved.extension().is_some_and(|e| e == "md")
                && !anchors(&body).contains(fragment)
            {
                broken.push(format!("{file}: {target}: no such heading"));
            }
        }
    }
    assert!(checked > 20, "only {checked} links found");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
