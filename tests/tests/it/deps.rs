//! The crate graph: the dependency list of `docs/ARCHITECTURE.md` is the workspace's
//! (its crates' normal dependencies on each other, as `cargo metadata` gives them), and
//! two edges that must not come back, checked on the resolved graph (`cargo tree`): the
//! engine linking the search index, and replay without `run` linking an HTTP client or
//! server. `.ci/run` checks the last two as well.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// An edge: a crate and one it depends on, each named by its folder (`engine/core`).
type Edges = BTreeSet<(String, String)>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Runs cargo in the workspace (offline: everything it reads is there after a build).
fn cargo(args: &[&str]) -> String {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(args)
        .arg("--offline")
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The normal dependency edges between the workspace's crates, from `cargo metadata`
/// (optional ones too: a feature turns them on).
fn metadata_edges() -> Edges {
    let text = cargo(&["metadata", "--format-version", "1", "--no-deps"]);
    let m: serde_json::Value = serde_json::from_str(&text).unwrap();
    let root = root();
    let folders: BTreeMap<&str, String> = m["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let manifest = Path::new(p["manifest_path"].as_str().unwrap());
            let folder = manifest.parent().unwrap().strip_prefix(&root).unwrap();
            (p["name"].as_str().unwrap(), folder.to_string_lossy().into())
        })
        .collect();
    let mut edges = Edges::new();
    for p in m["packages"].as_array().unwrap() {
        for d in p["dependencies"].as_array().unwrap() {
            if d["kind"].is_null()
                && let Some(to) = folders.get(d["name"].as_str().unwrap())
            {
                edges.insert((folders[p["name"].as_str().unwrap()].clone(), to.clone()));
            }
        }
    }
    edges
}

/// The edges of the dependency list in `doc`: the first fenced block holding ` -> `,
/// one `crate -> crate, crate` line per crate, `#` starting a comment. A crate's line
/// must come before the lines of the crates it depends on (the list reads top down);
/// any other line is an error naming it.
fn listed_edges(doc: &str) -> Result<Edges, String> {
    let mut blocks = doc.split("```").skip(1).step_by(2);
    let block = blocks
        .find(|b| b.contains(" -> "))
        .ok_or("no fenced block with `a -> b` lines")?;
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '/' || c == '-')
    };
    let mut edges = Edges::new();
    let mut order: Vec<String> = Vec::new();
    // The first line is the fence's info string (`text`).
    for line in block.lines().skip(1) {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (from, tos) = line
            .split_once(" -> ")
            .ok_or_else(|| format!("not `crate -> crate, crate`: {line:?}"))?;
        let from = from.trim();
        if !name_ok(from) || order.iter().any(|o| o == from) {
            return Err(format!("a crate named badly or twice: {line:?}"));
        }
        for to in tos.split(',').map(str::trim) {
            if !name_ok(to) || !edges.insert((from.to_string(), to.to_string())) {
                return Err(format!("a dependency named badly or twice: {line:?}"));
            }
        }
        order.push(from.to_string());
    }
    for (from, to) in &edges {
        let at = |c: &String| order.iter().position(|o| o == c);
        if at(to).is_some_and(|t| Some(t) < at(from)) {
            return Err(format!("{from} depends on {to}, listed above it"));
        }
    }
    Ok(edges)
}

/// What `listed` lacks of `actual` and holds besides it, as `a -> b` lines; empty when
/// they agree.
fn differences(listed: &Edges, actual: &Edges) -> String {
    let lines = |edges: Vec<&(String, String)>| -> String {
        edges
            .iter()
            .map(|(a, b)| format!("\n  {a} -> {b}"))
            .collect()
    };
    let missing = lines(actual.difference(listed).collect());
    let extra = lines(listed.difference(actual).collect());
    let mut out = String::new();
    if !missing.is_empty() {
        out += &format!("missing from docs/ARCHITECTURE.md:{missing}\n");
    }
    if !extra.is_empty() {
        out += &format!("in docs/ARCHITECTURE.md but not in any Cargo.toml:{extra}\n");
    }
    out
}

fn edges(pairs: &[(&str, &str)]) -> Edges {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn the_architecture_dependency_list_is_the_workspaces() {
    let doc = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let listed = listed_edges(&doc).unwrap_or_else(|e| panic!("docs/ARCHITECTURE.md: {e}"));
    let actual = metadata_edges();
    // The list cannot pass by being empty: the workspace has its edges.
    assert!(actual.contains(&("engine".into(), "engine/core".into())));
    let diff = differences(&listed, &actual);
    assert!(diff.is_empty(), "{diff}");
}

#[test]
fn a_dependency_list_parses_its_lines_and_refuses_others() {
    let check = |doc: &str, expected: Result<Edges, &str>| {
        assert_eq!(listed_edges(doc), expected.map_err(str::to_string), "{doc}");
    };
    let ok = "text\n```\nfn x() {}\n```\n\n```text\n# crate -> what it needs\ncli -> engine, engine/core  # why\n\nengine -> engine/core\n```\n";
    check(
        ok,
        Ok(edges(&[
            ("cli", "engine"),
            ("cli", "engine/core"),
            ("engine", "engine/core"),
        ])),
    );
    check("no block", Err("no fenced block with `a -> b` lines"));
    check(
        "```text\na -> b\nb depends on c\n```",
        Err("not `crate -> crate, crate`: \"b depends on c\""),
    );
    check(
        "```text\na -> b, b\n```",
        Err("a dependency named badly or twice: \"a -> b, b\""),
    );
    check(
        "```text\na -> b\na -> c\n```",
        Err("a crate named badly or twice: \"a -> c\""),
    );
    check(
        "```text\nb -> c\na -> b, Engine\n```",
        Err("a dependency named badly or twice: \"a -> b, Engine\""),
    );
    check(
        "```text\nb -> c\na -> b\n```",
        Err("a depends on b, listed above it"),
    );
}

#[test]
fn differences_name_the_missing_and_the_extra_edges() {
    let actual = edges(&[("cli", "engine"), ("engine", "store")]);
    assert_eq!(differences(&actual, &actual), "");
    let listed = edges(&[("cli", "engine"), ("engine", "search")]);
    assert_eq!(
        differences(&listed, &actual),
        "missing from docs/ARCHITECTURE.md:\n  engine -> store\n\
         in docs/ARCHITECTURE.md but not in any Cargo.toml:\n  engine -> search\n"
    );
}

/// The package names of the resolved normal dependencies of `args` (`cargo tree`).
fn tree(args: &[&str]) -> BTreeSet<String> {
    let mut all = vec!["tree", "-e", "normal", "--prefix", "none"];
    all.extend_from_slice(args);
    cargo(&all)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

// Guards against the engine linking the search index (SQLite, PostgreSQL) or the
// OpenTelemetry export again: it is given its sinks by its caller (`Home::with_sink`,
// `Home::with_export`).
#[test]
fn the_engine_links_no_search_index() {
    let deps = tree(&["-p", "cairn-engine"]);
    assert!(deps.contains("cairn-tools"), "{deps:?}");
    for banned in [
        "cairn-search",
        "rusqlite",
        "postgres",
        "cairn-export",
        "opentelemetry",
    ] {
        assert!(!deps.contains(banned), "cairn-engine links {banned}");
    }
}

// Guards against verify and audit linking an HTTP client or server again: without
// `run`, replay takes tlog's `files` feature only (the witness is behind `http`).
#[test]
fn replay_without_run_links_no_http_client_or_server() {
    let deps = tree(&["-p", "cairn-replay", "--no-default-features"]);
    assert!(deps.contains("cairn-tlog"), "{deps:?}");
    for banned in ["reqwest", "tiny_http", "hyper", "ureq", "cairn-engine"] {
        assert!(
            !deps.contains(banned),
            "cairn-replay without run links {banned}"
        );
    }
}
