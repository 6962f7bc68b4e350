//! Containment: the cairn home is never reachable by the tools, however it is spelled —
//! also when `CAIRN_HOME` does not exist yet and its path runs through a symlink or
//! `..` inside the workspace.

use cairn_engine::event::{Answer, Status};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use serde_json::json;

#[test]
fn a_home_spelled_through_a_symlink_inside_the_workspace_is_refused_to_tools() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("inner")).unwrap();
    std::os::unix::fs::symlink(ws.join("inner"), ws.join("lnk")).unwrap();
    // Not there yet, through the symlink and a `..`.
    let spelled = ws.join("lnk/../lnk/h");
    let home = Home::at(&spelled);
    let ws_canon = ws.canonicalize().unwrap();
    assert_eq!(home.root, ws_canon.join("inner/h"));
    let mut e = Engine::start(&home, &ws, EngineConfig::new(Catalog::Thoth)).unwrap();
    let log = e.dir().join("events.jsonl");
    assert!(log.is_file());
    let in_ws = log
        .strip_prefix(&ws_canon)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let via_link = in_ws.replacen("inner/", "lnk/", 1);
    for path in [
        in_ws.clone(),
        via_link.clone(),
        format!("lnk/../{in_ws}"),
        log.to_string_lossy().into_owned(),
    ] {
        let out = e
            .call_with("read_file", json!({ "path": path }), Some(Answer::Once))
            .unwrap();
        assert_ne!(out.status, Status::Ok, "read {path}: {}", out.output);
        assert!(!out.output.contains("session_started"), "{path}");
    }
    for path in ["inner/h", "lnk/h", "inner/h/projects"] {
        let out = e
            .call_with("list_dir", json!({ "path": path }), Some(Answer::Once))
            .unwrap();
        assert_ne!(out.status, Status::Ok, "list {path}: {}", out.output);
    }
    let out = e
        .call_with(
            "write_file",
            json!({"path": "lnk/h/planted.txt", "content": "x"}),
            Some(Answer::Once),
        )
        .unwrap();
    assert_ne!(out.status, Status::Ok, "{}", out.output);
    assert!(!ws.join("inner/h/planted.txt").exists());
    e.end("test").unwrap();
}

#[test]
fn edits_through_a_symlink_inside_the_workspace_follow_each_other_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("target.txt"), "one\ntwo\n").unwrap();
    std::os::unix::fs::symlink("target.txt", ws.join("link.txt")).unwrap();
    let mut e = Engine::start(
        &Home::at(&tmp.path().join("home")),
        &ws,
        EngineConfig::new(Catalog::Thoth),
    )
    .unwrap();
    let ok = |e: &mut Engine, tool: &str, input: serde_json::Value| {
        let out = e
            .call_with(tool, input.clone(), Some(Answer::Once))
            .unwrap();
        assert_eq!(out.status, Status::Ok, "{tool} {input}: {}", out.output);
    };
    ok(&mut e, "read_file", json!({"path": "link.txt"}));
    ok(
        &mut e,
        "edit_file",
        json!({"path": "link.txt", "old_string": "one", "new_string": "uno"}),
    );
    ok(
        &mut e,
        "edit_file",
        json!({"path": "link.txt", "old_string": "two", "new_string": "dos"}),
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("target.txt")).unwrap(),
        "uno\ndos\n"
    );
    assert!(
        std::fs::symlink_metadata(ws.join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let dir = e.dir().to_path_buf();
    e.end("test").unwrap();
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert_eq!(problems, vec![]);
}
