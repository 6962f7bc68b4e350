//! The test vectors of docs/FORMAT.md: the committed sample logs must hash to the values
//! the document lists, and must be exactly what the writer produces for their events.
//! `CAIRN_REGEN_VECTORS=1` rewrites the files (then update the document by hand).

use std::path::PathBuf;

use cairn_store::{Durability, LogWriter, Options, VerifyOptions, check_line, verify_bytes};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join(name)
}

fn vector_events() -> Vec<(String, serde_json::Value)> {
    vec![
        (
            "2026-11-29T12:00:00.000000Z".into(),
            serde_json::json!({"type":"session_started","id":"s1","workspace":"/w"}),
        ),
        (
            "2026-11-29T12:00:00.250000Z".into(),
            serde_json::json!({"type":"tool_started","call":"c1","tool":"read_file","input":{"path":"a.txt"}}),
        ),
        (
            "2026-11-29T12:00:01.500000Z".into(),
            serde_json::json!({"type":"tool_finished","call":"c1","status":"ok","output":"1\thello \"world\"\n"}),
        ),
    ]
}

fn written(events: &[(String, serde_json::Value)]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        durability: Durability::None,
        ..Options::default()
    };
    let mut log = LogWriter::create(dir.path(), opts).unwrap();
    for (ts, e) in events {
        log.append_at(ts, e).unwrap();
    }
    drop(log);
    std::fs::read(dir.path().join("events.jsonl")).unwrap()
}

/// The `| seq | hash |` rows of the table after `marker` in docs/FORMAT.md.
fn documented_hashes(marker: &str) -> Vec<(u64, String)> {
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/FORMAT.md"),
    )
    .unwrap();
    let start = doc
        .find(marker)
        .unwrap_or_else(|| panic!("FORMAT.md lacks {marker}"));
    doc[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let seq = cells.get(1)?.parse().ok()?;
            Some((seq, cells.get(2)?.trim_matches('`').to_string()))
        })
        .collect()
}

#[test]
fn committed_vector_is_what_the_writer_writes_and_matches_the_document() {
    let expected = written(&vector_events());
    if std::env::var_os("CAIRN_REGEN_VECTORS").is_some() {
        std::fs::write(data("vector-three.jsonl"), &expected).unwrap();
        let mut torn = expected.clone();
        torn.extend_from_slice(b"{\"prev\":\"0123");
        std::fs::write(data("vector-torn.jsonl"), torn).unwrap();
    }
    let committed = std::fs::read(data("vector-three.jsonl")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&committed),
        String::from_utf8_lossy(&expected)
    );
    let hashes: Vec<(u64, String)> = committed
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f = check_line(l).unwrap();
            (f.seq, f.hash.to_hex())
        })
        .collect();
    assert_eq!(hashes, documented_hashes("<!-- vector-three -->"));
    assert!(verify_bytes(&committed, &VerifyOptions::default()).is_clean());
}

#[test]
fn torn_vector_repairs_to_the_three_records() {
    let torn = std::fs::read(data("vector-torn.jsonl")).unwrap();
    let report = verify_bytes(&torn, &VerifyOptions::default());
    assert_eq!(report.problems.len(), 1);
    assert_eq!(report.problems[0].seq, Some(3));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("events.jsonl"), &torn).unwrap();
    let (_log, recovery) = cairn_tests::open_writer(dir.path(), Options::default()).unwrap();
    assert_eq!(recovery.head.map(|h| h.seq), Some(2));
    assert_eq!(recovery.quarantined_bytes, 13);
    assert_eq!(
        std::fs::read(dir.path().join("events.jsonl")).unwrap(),
        std::fs::read(data("vector-three.jsonl")).unwrap()
    );
}

#[test]
fn format_md_names_every_event_type() {
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/FORMAT.md"),
    )
    .unwrap();
    let missing: Vec<&str> = cairn_engine::Event::KINDS
        .iter()
        .copied()
        .filter(|k| !doc.contains(&format!("| `{k}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/FORMAT.md lacks event types {missing:?}"
    );
}

#[test]
fn the_tree_of_vector_three_is_the_one_format_md_gives() {
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/FORMAT.md"),
    )
    .unwrap();
    let table = doc
        .split("<!-- vector-three-tree -->")
        .nth(1)
        .expect("FORMAT.md lacks the tree vector");
    let rows: Vec<String> = table
        .lines()
        .skip(3)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('`').nth(1).unwrap().to_string())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(data("vector-three.jsonl"), dir.path().join("events.jsonl")).unwrap();
    let leaves = cairn_engine::tlog::log::leaves(dir.path()).unwrap();
    let mut ours: Vec<String> = leaves
        .iter()
        .map(|l| cairn_store::Hash(*l).to_hex())
        .collect();
    ours.push(cairn_store::Hash(cairn_engine::tlog::tree::root_of(&leaves)).to_hex());
    assert_eq!(rows, ours);
}
