//! The session browser driven key by key on ratatui's test backend: screens at 80×24
//! and 120×40 as snapshots, over the demo sessions (ids, times and paths normalised).

use cairn_cli::browse::{self, App, SessionRow, SessionView};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::common;

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn screen(app: &mut App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| app.render(f)).unwrap();
    let buf = t.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..h {
        let mut line = String::new();
        for x in 0..w {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Rows and views with what changes between runs replaced (ids, times, paths,
/// elapsed times), so that screens are the same every run.
fn fixed_row(r: &SessionRow, paths: &[&std::path::Path]) -> SessionRow {
    SessionRow {
        id: common::normalise(&r.id, paths),
        workspace: common::normalise(&r.workspace, paths),
        started: "<ts>".into(),
        ..r.clone()
    }
}

fn fixed_view(v: SessionView, paths: &[&std::path::Path]) -> SessionView {
    SessionView {
        row: fixed_row(&v.row, paths),
        calls: v
            .calls
            .into_iter()
            .map(|mut c| {
                c.elapsed_us = Some(1234);
                c.waited_us = 0;
                c.summary = common::normalise(&c.summary, paths);
                c.detail = c
                    .detail
                    .iter()
                    .map(|l| common::normalise(l, paths))
                    .collect();
                c
            })
            .collect(),
    }
}

#[test]
fn browser_screens_at_80x24_and_120x40() {
    let demo = common::demo();
    let base = demo.base.path().to_path_buf();
    let home = demo.home.path().to_path_buf();
    let mut rows: Vec<SessionRow> = demo
        .sessions
        .iter()
        .map(|(_, d)| browse::summarise(d).unwrap())
        .collect();
    rows.reverse(); // newest first
    let loader_paths = (base.clone(), home.clone());
    let loader = Box::new(move |r: &SessionRow| {
        let real = rows_dir(r);
        let v = browse::load_session(&SessionRow {
            dir: real,
            ..r.clone()
        })?;
        Ok(fixed_view(v, &[&loader_paths.0, &loader_paths.1]))
    });
    let paths = [base.as_path(), home.as_path()];
    let shown: Vec<SessionRow> = rows.iter().map(|r| fixed_row(r, &paths)).collect();
    let mut app = App::new(shown, loader);
    for (w, h) in [(80u16, 24u16), (120, 40)] {
        insta::assert_snapshot!(format!("browse_sessions_{w}x{h}"), screen(&mut app, w, h));
    }
    // The second session (thoth) → its timeline.
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Enter));
    for (w, h) in [(80u16, 24u16), (120, 40)] {
        insta::assert_snapshot!(format!("browse_timeline_{w}x{h}"), screen(&mut app, w, h));
    }
    // The conversation opens on the user's message.
    let first = screen(&mut app, 120, 40);
    assert!(
        first.contains("user") && first.contains("Capitalise the greeting and tidy the notes"),
        "{first}"
    );
    // `/` finds text in outputs, not only in the rows: the problems call's answer.
    for c in "/no check command".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    app.on_key(key(KeyCode::Enter));
    let found = screen(&mut app, 120, 40);
    assert!(
        found.contains("problems") && !found.contains("list_dir"),
        "{found}"
    );
    app.on_key(key(KeyCode::Esc)); // clears the search
    // Search the conversation for edits, open the second: its detail with the diff.
    for c in "/edit_file".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    app.on_key(key(KeyCode::Enter));
    let filtered = screen(&mut app, 80, 24);
    assert!(filtered.contains("[/edit_file]"), "{filtered}");
    assert!(!filtered.contains("list_dir"), "{filtered}");
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Enter));
    for (w, h) in [(80u16, 24u16), (120, 40)] {
        insta::assert_snapshot!(format!("browse_detail_{w}x{h}"), screen(&mut app, w, h));
    }
    let detail = screen(&mut app, 120, 40);
    assert!(
        detail.contains("── diff") && detail.contains("Hello, {name}!"),
        "{detail}"
    );
    // `/` in the detail jumps to the raw records.
    for c in "/── records".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    app.on_key(key(KeyCode::Enter));
    assert!(screen(&mut app, 80, 24).contains("\"type\":\"tool_started\""));
    // q goes back, screen by screen, then quits.
    app.on_key(key(KeyCode::Char('q'))); // clears the search
    app.on_key(key(KeyCode::Char('q')));
    assert!(screen(&mut app, 80, 24).contains("ELAPSED"));
    app.on_key(key(KeyCode::Char('q')));
    assert!(screen(&mut app, 80, 24).contains("TASK"));
    assert!(!app.quit);
    app.on_key(key(KeyCode::Char('q')));
    assert!(app.quit);
}

/// The real folder of a row whose id was normalised: the dir is kept as it was.
fn rows_dir(r: &SessionRow) -> std::path::PathBuf {
    r.dir.clone()
}

// Regression: at 80 columns the list cut each id before its random suffix, the short
// id people type (`cairn show abc123`).
#[test]
fn browse_in_tmux_at_80_columns_shows_the_short_id_people_type() {
    let d = common::demo();
    for (_, dir) in &d.sessions {
        let row = browse::summarise(dir).unwrap();
        let done = d.home.path().join("done");
        let _ = std::fs::remove_file(&done);
        // Run in the session's workspace: browse lists that project's sessions.
        let sh = format!(
            "cd {} && CAIRN_HOME={} {} browse; echo $? > {}; sleep 30",
            row.workspace,
            d.home.path().display(),
            env!("CARGO_BIN_EXE_cairn"),
            done.display()
        );
        let tmux = crate::tui::Tmux::start("cairn-browse-80", &sh);
        tmux.cmd(&["resize-window", "-t", "t", "-x", "80", "-y", "24"]);
        let short = row.id.rsplit('-').next().unwrap().to_string();
        let s = tmux.wait_for(&format!("\n{short} "));
        assert!(s.lines().all(|l| l.chars().count() <= 80), "{s}");
        // Typed, it names the session.
        let shown = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["show", &short])
            .env("CAIRN_HOME", d.home.path())
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&shown.stdout).contains(&row.id));
        tmux.cmd(&["send-keys", "-t", "t", "q"]);
        let t0 = std::time::Instant::now();
        while !done.exists() && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert_eq!(std::fs::read_to_string(&done).unwrap().trim(), "0");
    }
}
