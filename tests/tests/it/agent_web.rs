//! The web tools: private-network targets refused in every spelling, at every redirect
//! and behind DNS names; public-looking pages served through the test-only loopback
//! setting; binary and oversized answers refused; everything fetched recorded; search
//! backends parsed from saved answers; memory refusing what the web said; problems.

use std::path::{Path, PathBuf};

use cairn_engine::event::{Event, Rule, Status};
use cairn_engine::memory::ProjectMemory;
use cairn_engine::permission::Policy;
use cairn_engine::web::{self, SearchResult, WebConfig};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_tests::http::{Server, response, until_close};
use serde_json::json;

fn data(name: &str) -> String {
    std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("data/web")
            .join(name),
    )
    .unwrap()
}

fn loopback() -> WebConfig {
    WebConfig {
        allow_loopback_for_tests: true,
        fetch_timeout_ms: 5_000,
        ..WebConfig::default()
    }
}

#[test]
fn private_targets_are_refused_in_every_spelling() {
    let table: &[(&str, &str)] = &[
        ("http://127.0.0.1/", "127.0.0.1 is loopback"),
        ("http://2130706433/", "127.0.0.1 is loopback"),
        ("http://0177.0.0.1/", "127.0.0.1 is loopback"),
        ("http://0x7f000001/", "127.0.0.1 is loopback"),
        ("http://0x7f.0.0.1/", "127.0.0.1 is loopback"),
        ("http://127.1/", "127.0.0.1 is loopback"),
        ("http://127.0.1/", "127.0.0.1 is loopback"),
        ("http://[::1]:8080/", "::1 is loopback"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1 is loopback"),
        ("http://[::ffff:7f00:1]/", "::ffff:127.0.0.1 is loopback"),
        ("http://[::127.0.0.1]/", "::7f00:1 is loopback"),
        ("http://10.0.0.1/", "10.0.0.1 is private"),
        ("http://167772161/", "10.0.0.1 is private"),
        ("http://012.0.0.1/", "10.0.0.1 is private"),
        ("http://172.16.5.4/", "172.16.5.4 is private"),
        ("http://192.168.1.1/", "192.168.1.1 is private"),
        (
            "http://[::ffff:192.168.1.1]/",
            "::ffff:192.168.1.1 is private",
        ),
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254 is link-local",
        ),
        ("http://0xa9fea9fe/", "169.254.169.254 is link-local"),
        (
            "http://100.64.0.1/",
            "100.64.0.1 is carrier-grade NAT (100.64.0.0/10)",
        ),
        (
            "http://100.127.255.254/",
            "100.127.255.254 is carrier-grade NAT (100.64.0.0/10)",
        ),
        ("http://[fc00::1]/", "fc00::1 is unique-local (fc00::/7)"),
        (
            "http://[fd12:3456::1]/",
            "fd12:3456::1 is unique-local (fc00::/7)",
        ),
        ("http://[fe80::1]/", "fe80::1 is link-local"),
        ("http://224.0.0.1/", "224.0.0.1 is multicast"),
        ("http://[ff02::1]/", "ff02::1 is multicast"),
        ("http://0.0.0.0/", "0.0.0.0 is unspecified (0.0.0.0/8)"),
        ("http://0/", "0.0.0.0 is unspecified (0.0.0.0/8)"),
        ("http://[::]/", ":: is unspecified"),
        ("http://[64:ff9b::a00:1]/", "64:ff9b::a00:1 is private"),
        ("http://255.255.255.255/", "255.255.255.255 is reserved"),
        ("http://localhost:1/", "127.0.0.1 is loopback"),
    ];
    for (url, why) in table {
        let f = web::fetch(url, &WebConfig::default());
        let err = f.error.unwrap_or_default();
        assert!(
            err.starts_with("refused: ") && err.ends_with(&format!("({why})")),
            "{url}: {err}"
        );
        assert_eq!(f.status, None, "{url}: nothing was sent");
    }
    // The loopback test setting opens loopback only.
    for url in [
        "http://10.0.0.1/",
        "http://[fd00::1]/",
        "http://169.254.169.254/",
    ] {
        assert!(
            web::fetch(url, &loopback())
                .error
                .unwrap()
                .starts_with("refused: "),
            "{url}"
        );
    }
    for (url, err) in [
        (
            "file:///etc/passwd",
            "only http and https URLs can be fetched, not file:",
        ),
        (
            "ftp://example.org/x",
            "only http and https URLs can be fetched, not ftp:",
        ),
        (
            "not a url",
            "invalid URL 'not a url': relative URL without a base",
        ),
    ] {
        assert_eq!(
            web::fetch(url, &WebConfig::default()).error.as_deref(),
            Some(err)
        );
    }
    assert_eq!(
        web::refused_ip("93.184.215.14".parse().unwrap(), false),
        None
    );
    assert_eq!(
        web::refused_ip("2606:4700::1".parse().unwrap(), false),
        None
    );
}

fn site() -> Server {
    Server::start(|req, _| {
        let path = req.path.as_str();
        match path {
            "/page" => response(
                200,
                &[("content-type", "text/html; charset=utf-8")],
                "<html><head><title>T</title><script>var x = 1;</script></head><body><h1>Build notes</h1><p>The build server restarts every night at two in the morning for maintenance.</p><ul><li>alpha</li><li>beta</li></ul></body></html>",
            ),
            "/plain" => response(200, &[("content-type", "text/plain")], "just text\n"),
            "/hop" => response(302, &[("location", "/page")], ""),
            "/to-metadata" => response(
                302,
                &[("location", "http://169.254.169.254/latest/meta-data/")],
                "",
            ),
            "/to-decimal" => response(301, &[("location", "http://2886729729/")], ""),
            "/loop" => response(302, &[("location", "/loop")], ""),
            "/image" => response(200, &[("content-type", "image/png")], "\u{89}PNG...."),
            "/big" => response(200, &[("content-type", "text/plain")], &"x".repeat(5_000)),
            "/big-unsized" => until_close(200, "text/plain", "y".repeat(5_000).as_bytes()),
            "/nul" => until_close(200, "", b"abc\0def"),
            _ => response(404, &[("content-type", "text/plain")], "no such page"),
        }
    })
}

#[test]
fn fetches_follow_redirects_checking_every_hop_and_refuse_binary_and_oversized_answers() {
    let s = site();
    let f = web::fetch(&format!("{}/hop", s.url), &loopback());
    assert_eq!(f.error, None);
    assert_eq!(f.status, Some(200));
    assert_eq!(f.redirects, vec![format!("{}/page", s.url)]);
    assert_eq!(
        f.final_url.as_deref(),
        Some(format!("{}/page", s.url).as_str())
    );
    assert!(
        f.text.contains("The build server restarts every night"),
        "{}",
        f.text
    );
    assert!(
        f.text.contains("Build notes") && !f.text.contains("<p>") && !f.text.contains("var x"),
        "{}",
        f.text
    );

    let f = web::fetch(&format!("{}/to-metadata", s.url), &loopback());
    assert_eq!(
        f.error.as_deref(),
        Some(
            "refused: 169.254.169.254 is a private-network target (169.254.169.254 is link-local)"
        )
    );
    assert_eq!(
        f.redirects,
        vec!["http://169.254.169.254/latest/meta-data/".to_string()]
    );
    let f = web::fetch(&format!("{}/to-decimal", s.url), &loopback());
    assert_eq!(
        f.error.as_deref(),
        Some("refused: 172.16.0.1 is a private-network target (172.16.0.1 is private)")
    );

    let cfg = WebConfig {
        redirects_max: 3,
        ..loopback()
    };
    let f = web::fetch(&format!("{}/loop", s.url), &cfg);
    assert_eq!(
        f.error.as_deref(),
        Some("too many redirects (more than redirects_max = 3)")
    );
    assert_eq!(f.redirects.len(), 4);
    // At the limit: one redirect with redirects_max = 1 is followed.
    let f = web::fetch(
        &format!("{}/hop", s.url),
        &WebConfig {
            redirects_max: 1,
            ..loopback()
        },
    );
    assert_eq!(f.error, None);

    let f = web::fetch(&format!("{}/image", s.url), &loopback());
    assert_eq!(
        f.error.as_deref(),
        Some("binary content (image/png) refused: only text and HTML pages are read")
    );
    let f = web::fetch(&format!("{}/nul", s.url), &loopback());
    assert_eq!(
        f.error.as_deref(),
        Some("binary content (no content type, NUL bytes) refused")
    );

    let small = WebConfig {
        fetch_bytes_max: 5_000,
        ..loopback()
    };
    assert_eq!(
        web::fetch(&format!("{}/big", s.url), &small).error,
        None,
        "at the limit"
    );
    let smaller = WebConfig {
        fetch_bytes_max: 4_999,
        ..loopback()
    };
    assert_eq!(
        web::fetch(&format!("{}/big", s.url), &smaller)
            .error
            .as_deref(),
        Some("response of 5000 bytes is over fetch_bytes_max (4999 bytes)")
    );
    let f = web::fetch(&format!("{}/big-unsized", s.url), &smaller);
    assert_eq!(
        f.error.as_deref(),
        Some("response is over fetch_bytes_max (4999 bytes): stopped reading")
    );
    assert_eq!(f.body.len(), 4_999);
}

fn engine(home: &Path, ws: &Path, web: WebConfig) -> Engine {
    let mut config = EngineConfig::new(Catalog::Thoth);
    config.web = web;
    config.check_command = None;
    let mut e = Engine::start(&Home::at(home), ws, config).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e
}

fn events(dir: &Path) -> Vec<Event> {
    cairn_store::LogReader::open(dir)
        .unwrap()
        .records()
        .unwrap()
        .map(|r| cairn_engine::fold::parse(&r.unwrap()).unwrap().event)
        .collect()
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom: each step's check follows the step it checks"
)]
fn web_fetch_asks_per_host_and_records_what_it_fetched_and_memory_refuses_it() {
    let s = site();
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut e = engine(home.path(), ws.path(), loopback());
    let out = e
        .call("web_fetch", json!({"url": format!("{}/page", s.url)}))
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert!(
        out.output.starts_with(&format!(
            "{}/page (status 200, text/html; charset=utf-8, ",
            s.url
        )),
        "{}",
        out.output
    );
    // The loopback setting is not part of any tool input.
    let out = e
        .call(
            "web_fetch",
            json!({"url": "http://10.1.2.3/", "allow_loopback_for_tests": true}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Error);
    assert!(
        out.output
            .contains("unknown field `allow_loopback_for_tests`"),
        "{}",
        out.output
    );

    let evs = events(e.dir());
    let keys: Vec<String> = evs
        .iter()
        .filter_map(|ev| match ev {
            Event::PermissionRequested { key, .. } => Some(key.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(keys, ["web_fetch:127.0.0.1"]);
    let fetched: Vec<_> = evs
        .iter()
        .filter_map(|ev| match ev {
            Event::WebFetched(w) => Some(w.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(fetched.len(), 1);
    let w = &fetched[0];
    assert_eq!(
        (w.status, w.final_url.clone(), w.error.clone()),
        (Some(200), Some(format!("{}/page", s.url)), None)
    );
    assert!(w.bytes > 100 && w.hash.is_some());
    let text = e.project().blobs_dir();
    let blob = cairn_store::BlobStore::open(&text)
        .unwrap()
        .get(&w.text.unwrap().hash)
        .unwrap();
    assert!(
        String::from_utf8(blob)
            .unwrap()
            .contains("restarts every night")
    );

    // Memory: copied web text is refused (re-cased, cut), an own fact is kept.
    let out = e
        .call(
            "remember",
            json!({"fact": "The BUILD server restarts every night at two in the morning"}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Error);
    assert_eq!(
        out.refusal.as_ref().map(|r| r.rule),
        Some(Rule::WebToMemory)
    );
    assert!(out.output.starts_with("refused: this fact repeats text fetched from the web in this session (7 of its 7 5-word phrases"), "{}", out.output);
    let out = e
        .call(
            "remember",
            json!({"fact": "tests run with cargo test --workspace from the root"}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert_eq!(
        e.state().memory,
        ["tests run with cargo test --workspace from the root"]
    );
    let memory = ProjectMemory::new(&e.project().dir);
    let facts = memory.list().unwrap();
    assert_eq!(
        facts
            .iter()
            .map(|f| (f.n, f.text.as_str()))
            .collect::<Vec<_>>(),
        [(1, "tests run with cargo test --workspace from the root")]
    );
    assert_eq!(memory.forget(1).unwrap().text, facts[0].text);
    assert!(memory.list().unwrap().is_empty());
    assert!(matches!(
        memory.forget(1).unwrap_err(),
        cairn_engine::EngineError::NoFact { n: 1, facts: 0 }
    ));
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    let report =
        cairn_store::verify_path(&cairn_store::log_path(&dir), &Default::default()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[test]
fn read_url_is_the_thndrs_spelling_and_asks_for_read_url_host() {
    let s = site();
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut config = EngineConfig::new(Catalog::Thndrs);
    config.web = loopback();
    let mut e = Engine::start(&Home::at(home.path()), ws.path(), config).unwrap();
    e.set_approver(Box::new(Policy::DenyAll));
    let out = e
        .call("read_url", json!({"url": format!("{}/plain", s.url)}))
        .unwrap();
    assert_eq!(out.status, Status::Denied);
    assert!(
        out.output
            .starts_with("denied: permission for read_url:127.0.0.1 was refused"),
        "{}",
        out.output
    );
    e.set_approver(Box::new(Policy::AllowAll));
    let out = e
        .call("read_url", json!({"url": format!("{}/plain", s.url)}))
        .unwrap();
    assert_eq!(out.status, Status::Ok);
    assert!(
        out.output.ends_with(&format!(
            "\n\n{}\njust text\n{}",
            cairn_engine::web::UNTRUSTED_BEGIN,
            cairn_engine::web::UNTRUSTED_END
        )),
        "{}",
        out.output
    );
    let out = e
        .call("read_url", json!({"url": format!("{}/missing", s.url)}))
        .unwrap();
    assert_eq!(out.status, Status::Error);
    assert!(out.output.contains("(status 404"), "{}", out.output);
}

#[test]
fn search_answers_are_parsed_and_normalised() {
    let r = web::normalise(web::parse_duckduckgo(&data("duckduckgo.html")), 10, 300);
    assert_eq!(
        r,
        vec![
            SearchResult {
                title: "What is Ownership? - The Rust Programming Language".into(),
                url: "https://doc.rust-lang.org/book/ch04-01-what-is-ownership.html".into(),
                snippet:
                    "Ownership is a set of rules that govern how a Rust program manages memory."
                        .into()
            },
            SearchResult {
                title: "Understanding ownership".into(),
                url: "https://example.org/rust-ownership".into(),
                snippet: "A gentle introduction & examples.".into()
            },
        ]
    );
    assert_eq!(
        web::normalise(web::parse_duckduckgo(&data("duckduckgo.html")), 1, 300).len(),
        1
    );
    let r = web::normalise(web::parse_searxng(&data("searxng.json")).unwrap(), 10, 12);
    assert_eq!(
        r,
        vec![
            SearchResult {
                title: "What is Owne…".into(),
                url: "https://doc.rust-lang.org/book/ch04-01-what-is-ownership.html".into(),
                snippet: "Ownership is…".into()
            },
            SearchResult {
                title: "Understandin…".into(),
                url: "https://example.org/rust-ownership".into(),
                snippet: String::new()
            },
        ]
    );
    assert_eq!(web::parse_searxng("{}"), Err(web::SearchError::NoResults));
}

#[test]
fn web_search_lists_results_then_extracts_public_pages_reporting_each_failure() {
    let pages = site();
    let page_url = format!("{}/page", pages.url);
    let results = format!(
        r#"{{"results": [
        {{"url": "{page_url}", "title": "Build notes", "content": "notes"}},
        {{"url": "http://10.0.0.7/admin", "title": "Router", "content": "private"}},
        {{"url": "{}/image", "title": "Picture", "content": "binary"}},
        {{"url": "https://example.org/four", "title": "Four", "content": "not extracted: past extract_results_max"}}
    ]}}"#,
        pages.url
    );
    let searx =
        Server::start(move |_, _| response(200, &[("content-type", "application/json")], &results));
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let cfg = WebConfig {
        search_backend: web::SearchBackend::Searxng,
        searxng_url: Some(searx.url.clone()),
        ..loopback()
    };
    let mut e = engine(home.path(), ws.path(), cfg);
    let out = e
        .call("web_search", json!({"query": "build notes"}))
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    let o = &out.output;
    assert!(
        o.starts_with("4 results for 'build notes':\n\n1. Build notes\n"),
        "{o}"
    );
    assert!(
        o.contains("extract: # Build notes The build server restarts every night"),
        "{o}"
    );
    assert!(
        o.contains(
            "extraction failed: refused: 10.0.0.7 is a private-network target (10.0.0.7 is private)"
        ),
        "{o}"
    );
    assert!(
        o.contains("extraction failed: binary content (image/png) refused"),
        "{o}"
    );
    assert!(
        o.ends_with(
            "4. Four\n   https://example.org/four\n   not extracted: past extract_results_max\n"
        ),
        "{o}"
    );
    assert_eq!(searx.seen()[0].path, "/search?q=build+notes&format=json");
    let fetched = events(e.dir())
        .into_iter()
        .filter(|ev| matches!(ev, Event::WebFetched(_)))
        .count();
    assert_eq!(fetched, 4, "the backend answer and three extractions");
    // What search returned is web text too: memory refuses it.
    let out = e
        .call(
            "remember",
            json!({"fact": "the build server restarts every night at two"}),
        )
        .unwrap();
    assert_eq!(out.refusal.map(|r| r.rule), Some(Rule::WebToMemory));

    let mut off = engine(
        home.path(),
        ws.path(),
        WebConfig {
            search_backend: web::SearchBackend::None,
            ..WebConfig::default()
        },
    );
    let out = off.call("web_search", json!({"query": "x"})).unwrap();
    assert!(
        out.output
            .starts_with("web search is off (search = \"none\"): the person running cairn turns it on with `search = \"duckduckgo\"`"),
        "{}",
        out.output
    );
}

#[test]
fn problems_reads_cargo_json_and_plain_lines_and_says_how_to_configure_it() {
    let cargo = r#"{"reason":"compiler-artifact","package_id":"x"}
{"reason":"compiler-message","package_id":"x","message":{"rendered":"error[E0425]...","level":"error","message":"cannot find value `y` in this scope","code":{"code":"E0425"},"spans":[{"file_name":"src/main.rs","line_start":3,"line_end":3,"column_start":5,"column_end":6,"is_primary":true}],"children":[]}}
{"reason":"compiler-message","package_id":"x","message":{"level":"warning","message":"unused variable: `z`","spans":[{"file_name":"src/lib.rs","line_start":10,"column_start":9,"is_primary":true}],"children":[]}}
{"reason":"build-finished","success":false}"#;
    let d = cairn_engine::tools::problems::parse(cargo);
    assert_eq!(
        d.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
        [
            "src/main.rs:3: error: cannot find value `y` in this scope",
            "src/lib.rs:10: warning: unused variable: `z`",
        ]
    );
    let plain = "src/app.ts:12:7: error: Type 'string' is not assignable\nmain.c:4: warning: implicit declaration\nnoise\n";
    let d = cairn_engine::tools::problems::parse(plain);
    assert_eq!(
        d.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
        [
            "src/app.ts:12: error: Type 'string' is not assignable",
            "main.c:4: warning: implicit declaration",
        ]
    );

    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut e = engine(home.path(), ws.path(), WebConfig::default());
    let out = e.call("problems", json!({})).unwrap();
    assert_eq!(out.status, Status::Error);
    assert!(
        out.output
            .starts_with("no check command is configured: the person running cairn sets one with `check = \"cargo check --message-format=json\"`"),
        "{}",
        out.output
    );

    std::fs::write(ws.path().join("out.jsonl"), cargo).unwrap();
    let mut config = EngineConfig::new(Catalog::Thoth);
    config.check_command = Some(vec!["cat".into(), "out.jsonl".into()]);
    let mut e = Engine::start(&Home::at(home.path()), ws.path(), config).unwrap();
    let out = e.call("problems", json!({})).unwrap();
    assert_eq!(
        out.output,
        "src/main.rs:3: error: cannot find value `y` in this scope\nsrc/lib.rs:10: warning: unused variable: `z`\n1 errors, 1 warnings (from `cat out.jsonl`)"
    );
    let out = e.call("problems", json!({"path": "src/lib.rs"})).unwrap();
    assert!(
        out.output.starts_with("src/lib.rs:10: warning"),
        "{}",
        out.output
    );
}

#[test]
fn a_secret_in_a_fetched_url_or_page_is_kept_nowhere() {
    let token = "glpat-abcdefghij0123456789";
    let s = Server::start(move |_, _| {
        response(
            200,
            &[("content-type", "text/plain")],
            "the deploy key is sk_live_4eC39HqLyjWDarjtT1zdp7dc\n",
        )
    });
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut e = engine(home.path(), ws.path(), loopback());
    // Fetched, and refused (a private target): neither URL is kept raw.
    for url in [
        format!("{}/page?private_token={token}", s.url),
        format!("http://10.1.2.3/?private_token={token}"),
    ] {
        let out = e.call("web_fetch", json!({ "url": url })).unwrap();
        assert!(!out.output.contains(token), "{}", out.output);
        assert!(!out.output.contains("sk_live_4eC3"), "{}", out.output);
    }
    let dir = e.dir().to_path_buf();
    e.end("test").unwrap();
    for secret in [token, "sk_live_4eC39HqLyjWDarjtT1zdp7dc"] {
        assert_eq!(
            cairn_tests::files_holding(home.path(), secret.as_bytes()),
            Vec::<PathBuf>::new(),
            "{secret}"
        );
    }
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert_eq!(problems, vec![]);
}
