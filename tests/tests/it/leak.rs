//! The leak test: secrets of every kind the redactor knows, made at run time (the
//! repository holds none), sent through every channel a session has — each tool of
//! both catalogs, shell in the foreground and the background, a page served over
//! loopback, search results, a check command's output, an MCP server's result, a fact remembered and a later model session, a
//! user message, model turns — and then every byte under the home and every request
//! the provider test server received is searched for them. Not one may be there, and
//! the benign look-alikes must all be there, untouched. A failure names the channel
//! and the kind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn_engine::agent::{self, AgentConfig, Stop};
use cairn_engine::event::Status;
use cairn_engine::mcp::{McpConfig, ServerConfig};
use cairn_engine::permission::Policy;
use cairn_engine::web::WebConfig;
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_tests::http::{Server, openai_stream, response};
use serde_json::json;

const FAKE_MCP: &str = env!("CARGO_BIN_EXE_mcp_fake");

/// A small random source; its seed is printed so that a failure can be repeated.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn from(&mut self, alphabet: &str, n: usize) -> String {
        let chars: Vec<char> = alphabet.chars().collect();
        (0..n)
            .map(|_| chars[(self.next() % chars.len() as u64) as usize])
            .collect()
    }
    fn alnum(&mut self, n: usize) -> String {
        self.from(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
            n,
        )
    }
}

/// One secret: how it is written in a text, and the part that must never be kept.
struct Secret {
    kind: &'static str,
    text: String,
    needle: String,
}

/// A secret of every kind, fresh for one channel. Prefixes are split so that no
/// secret-shaped literal is in this file.
#[expect(
    clippy::too_many_lines,
    reason = "a data table: one secret of each kind the redactor knows"
)]
fn secrets(r: &mut Rng) -> Vec<Secret> {
    let upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let hex = "0123456789abcdef";
    let b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let whole = |kind, text: String| Secret {
        kind,
        needle: text.clone(),
        text,
    };
    let part = |kind, text: String, needle: String| Secret { kind, text, needle };
    let p = |a: &str, b: &str| format!("{a}{b}");
    let v = r.alnum(40);
    let aws_secret = part(
        "aws_secret_access_key",
        format!("aws_secret_access_key = {v}"),
        v,
    );
    let v = r.alnum(28);
    let client = part("client_secret", format!("client_secret: {v}"), v);
    let v = r.alnum(30);
    let access = part("access_token", format!("access_token={v}"), v);
    let v = r.alnum(30);
    let refresh = part(
        "refresh_token",
        format!("{{\"refresh_token\": \"{v}\"}}"),
        v,
    );
    let v = r.from(b64, 86) + "==";
    let azure = part(
        "azure",
        format!(
            "DefaultEndpointsProtocol=https;AccountName=acme;{}={v};EndpointSuffix=core.windows.net",
            p("Account", "Key")
        ),
        v,
    );
    let v = r.alnum(18);
    let url = part(
        "url_password",
        format!("https://deploy:{v}@git.example.org/x.git"),
        v,
    );
    let v = r.alnum(32);
    let bearer = part(
        "bearer",
        format!("Authorization: {} {v}", p("Bea", "rer")),
        v,
    );
    let line = r.from(b64, 64);
    let pem = part(
        "private_key",
        format!(
            "-----BEGIN {} KEY-----\n{}\n{line}\n{}\n-----END {} KEY-----",
            p("OPENSSH PRIV", "ATE"),
            r.from(b64, 64),
            r.from(b64, 40),
            p("OPENSSH PRIV", "ATE"),
        ),
        line,
    );
    vec![
        whole("github", format!("{}{}", p("gh", "p_"), r.alnum(36))),
        whole("gitlab", format!("{}{}", p("gl", "pat-"), r.alnum(20))),
        whole(
            "stripe_live",
            format!("{}{}", p("sk_", "live_"), r.alnum(24)),
        ),
        whole(
            "stripe_restricted",
            format!("{}{}", p("rk_", "live_"), r.alnum(24)),
        ),
        whole("google", format!("{}{}", p("AI", "za"), r.alnum(35))),
        whole(
            "aws_access_key",
            format!("{}{}", p("AK", "IA"), r.from(upper, 16)),
        ),
        whole("openai", format!("{}{}", p("sk-", "proj-"), r.alnum(40))),
        whole(
            "anthropic",
            format!("{}{}", p("sk-", "ant-api03-"), r.alnum(40)),
        ),
        whole(
            "slack",
            format!(
                "{}{}-{}",
                p("xo", "xb-"),
                r.from("0123456789", 12),
                r.alnum(24)
            ),
        ),
        whole("npm", format!("{}{}", p("np", "m_"), r.alnum(36))),
        whole("pypi", format!("{}{}", p("py", "pi-"), r.alnum(60))),
        whole("huggingface", format!("{}{}", p("h", "f_"), r.alnum(34))),
        whole(
            "sendgrid",
            format!("{}{}.{}", p("S", "G."), r.alnum(22), r.alnum(43)),
        ),
        whole("twilio", format!("{}{}", p("S", "K"), r.from(hex, 32))),
        whole(
            "jwt",
            format!(
                "{}{}.{}{}.{}",
                p("ey", "J"),
                r.alnum(20),
                p("ey", "J"),
                r.alnum(30),
                r.alnum(30)
            ),
        ),
        aws_secret,
        client,
        access,
        refresh,
        azure,
        url,
        bearer,
        pem,
    ]
}

/// What must survive: look-alikes no redactor may touch.
fn look_alikes(r: &mut Rng) -> Vec<String> {
    let hex = "0123456789abcdef";
    vec![
        r.from(hex, 40),
        format!(
            "{}-{}-4{}-a{}-{}",
            r.from(hex, 8),
            r.from(hex, 4),
            r.from(hex, 3),
            r.from(hex, 3),
            r.from(hex, 12)
        ),
        format!("sha256:{}", r.from(hex, 64)),
        format!("max_tokens={}", 1000 + r.next() % 9000),
        format!("task-runner-{}", r.from(hex, 6)),
        format!("skip-{}", r.from(hex, 6)),
    ]
}

/// Every secret of every channel, and what each channel's text is.
#[derive(Default)]
struct Plan {
    /// (channel, kind, needle)
    needles: Vec<(String, &'static str, String)>,
    /// (channel, look-alike)
    look_alikes: Vec<(String, String)>,
}

impl Plan {
    /// A text holding a fresh secret of every kind for `channel`, and look-alikes.
    fn text(&mut self, r: &mut Rng, channel: &str) -> String {
        let mut lines = Vec::new();
        for s in secrets(r) {
            lines.push(s.text);
            self.needles.push((channel.to_string(), s.kind, s.needle));
        }
        for l in look_alikes(r) {
            lines.push(l.clone());
            self.look_alikes.push((channel.to_string(), l));
        }
        lines.join("\n") + "\n"
    }

    /// A secret of one kind for `channel` (where a whole block does not fit, as in a
    /// file name or a URL).
    fn one(&mut self, r: &mut Rng, channel: &str, kind: &str) -> String {
        let s = secrets(r)
            .into_iter()
            .find(|s| s.kind == kind)
            .unwrap_or_else(|| panic!("no kind {kind}"));
        self.needles.push((channel.to_string(), s.kind, s.needle));
        s.text
    }
}

/// Every file under `dir`, read once.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push((e.path(), std::fs::read(e.path()).unwrap_or_default()));
            }
        }
    }
    out
}

/// What a path under the home is, in words: a blob, a session log, a memory…
fn where_kept(home: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(home).unwrap_or(path).to_string_lossy();
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.as_slice() {
        ["projects", _, "blobs", ..] => "a blob".into(),
        ["projects", _, "sessions", _, rest @ ..] => format!("session file {}", rest.join("/")),
        ["projects", _, rest @ ..] => format!("project file {}", rest.join("/")),
        _ => rel.into_owned(),
    }
}

fn holds(hay: &[u8], needle: &str) -> bool {
    memchr::memmem::find(hay, needle.as_bytes()).is_some()
}

/// A command printing `text` (to stderr with `redirect` `>&2`).
fn heredoc(text: &str, redirect: &str) -> String {
    format!("cat {redirect}<<'LEAK_EOF'\n{text}LEAK_EOF\n")
}

#[test]
fn no_secret_of_any_kind_is_kept_or_sent_through_any_channel() {
    let seed = cairn_tests::seed_from_env("CAIRN_LEAK_SEED") | 1;
    let mut r = Rng(seed);
    let mut plan = Plan::default();
    let home_dir = tempfile::tempdir().unwrap();
    let ws_dir = tempfile::tempdir().unwrap();
    let (home, ws) = (Home::at(home_dir.path()), ws_dir.path());

    // The workspace: credential files holding secrets (withheld, never copied), and
    // ordinary files without any.
    std::fs::write(ws.join(".env"), plan.text(&mut r, "workspace .env")).unwrap();
    std::fs::write(
        ws.join("server.pem"),
        plan.text(&mut r, "workspace server.pem"),
    )
    .unwrap();
    std::fs::write(ws.join("README.md"), "# demo\nnothing secret here\n").unwrap();

    // The channels' texts, made before anything runs.
    let page = plan.text(&mut r, "web page");
    let page_url_secret = plan.one(&mut r, "web url", "github");
    let web = Server::start(move |_, _| response(200, &[("content-type", "text/plain")], &page));
    let task = plan.text(&mut r, "user message");
    let turn_text = plan.text(&mut r, "model turn text");
    let fg = plan.text(&mut r, "shell foreground stdout");
    let fg_err = plan.text(&mut r, "shell foreground stderr");
    let split = plan.one(&mut r, "shell output split across writes", "github");
    let (split_a, split_b) = split.split_at(split.len() / 2);
    let bg = plan.text(&mut r, "shell background");
    let written = plan.text(&mut r, "write_file content");
    let edit_new = plan.one(&mut r, "edit_file new_string", "gitlab");
    let fact = plan.one(&mut r, "remember", "stripe_live");
    let grep_pattern = plan.one(&mut r, "grep pattern", "npm");
    let problems_text = plan.text(&mut r, "problems check command");
    let env_secret = r.alnum(28);
    plan.needles.push((
        "a secret of the environment".into(),
        "env",
        env_secret.clone(),
    ));

    // A model session driving the thoth catalog.
    let fg_cmd = format!(
        "{}{}printf '%s' '{split_a}'; sleep 0.2; printf '%s\\n' '{split_b}'\necho 'the key is {env_secret}'\n",
        heredoc(&fg, ""),
        heredoc(&fg_err, ">&2 ")
    );
    let turns = vec![
        openai_stream(
            &turn_text,
            &[("call_1", "read_file", json!({"path": ".env"}))],
            None,
        ),
        openai_stream(
            "",
            &[
                (
                    "call_2",
                    "write_file",
                    json!({"path": ".env.local", "content": written}),
                ),
                (
                    "call_3",
                    "grep",
                    json!({"pattern": grep_pattern, "path": "."}),
                ),
                (
                    "call_4",
                    "grep",
                    json!({"pattern": "TOKEN|KEY|token|key", "path": ".env"}),
                ),
            ],
            None,
        ),
        openai_stream(
            "",
            &[
                (
                    "call_5",
                    "edit_file",
                    json!({"path": ".env", "old_string": "max_tokens", "new_string": edit_new, "replace_all": true}),
                ),
                ("call_6", "shell", json!({"command": fg_cmd})),
                (
                    "call_7",
                    "shell",
                    json!({"command": heredoc(&bg, ""), "background": true}),
                ),
            ],
            None,
        ),
        openai_stream(
            "",
            &[
                (
                    "call_8",
                    "web_fetch",
                    json!({"url": format!("{}/page?token={page_url_secret}", web.url)}),
                ),
                (
                    "call_9",
                    "remember",
                    json!({"fact": format!("deploys use {fact}")}),
                ),
                ("call_10", "list_dir", json!({})),
                ("call_11", "glob", json!({"pattern": "**/*"})),
                ("call_12", "shell", json!({"command": "sleep 0.3"})),
                ("call_13", "problems", json!({})),
            ],
            None,
        ),
        openai_stream("done", &[], None),
        // The later session: its system prompt holds the remembered fact.
        openai_stream("nothing to do", &[], None),
    ];
    let model = Server::canned(turns);
    let mut shown = String::new();
    let thoth_dir = {
        let mut config = EngineConfig::new(Catalog::Thoth);
        config.web = WebConfig {
            allow_loopback_for_tests: true,
            fetch_timeout_ms: 5_000,
            ..WebConfig::default()
        };
        // The check command `problems` runs prints secrets (and has them in its argv).
        config.check_command = Some(vec!["printf".into(), "%s".into(), problems_text.clone()]);
        let mut e = Engine::start(&home, ws, config).unwrap();
        e.set_approver(Box::new(Policy::AllowAll));
        e.add_secret("LEAK_API_TOKEN", &env_secret);
        let mut p = cairn_tests::http::openai_provider(&model);
        // What a terminal would be shown of each step.
        let run = agent::run(
            &mut e,
            p.as_mut(),
            Some(&task),
            &AgentConfig::default(),
            |step| shown.push_str(&format!("{step:?}\n")),
        )
        .unwrap();
        assert_eq!(run.stop, Stop::Answered, "{run:?}");
        // Every channel was taken: each call ran.
        for c in cairn_replay::calls(&cairn_replay::Session::load(e.dir()).unwrap().records) {
            let (_, f) = c
                .finished
                .unwrap_or_else(|| panic!("{} never finished", c.tool));
            assert_eq!(f.status, Status::Ok, "{}: {}", c.tool, f.output);
        }
        let dir = e.dir().to_path_buf();
        e.end("done").unwrap();
        dir
    };
    // A later model session of the project: the remembered fact is in its prompt.
    {
        let mut e = Engine::start(&home, ws, EngineConfig::new(Catalog::Thoth)).unwrap();
        let mut p = cairn_tests::http::openai_provider(&model);
        let run = agent::run(
            &mut e,
            p.as_mut(),
            Some("anything?"),
            &AgentConfig::default(),
            |_| {},
        )
        .unwrap();
        assert_eq!(run.stop, Stop::Answered, "{run:?}");
        e.end("done").unwrap();
    }

    // The thndrs catalog and an MCP server, call by call.
    let project = home.project(&ws.canonicalize().unwrap());
    McpConfig::add(
        &project.dir,
        "fake",
        ServerConfig {
            command: FAKE_MCP.to_string(),
            args: Vec::new(),
            env: BTreeMap::new(),
        },
    )
    .unwrap();
    let created = plan.text(&mut r, "create_file content");
    let replaced = plan.one(&mut r, "replace_range new_string", "google");
    let patched = plan.one(&mut r, "write_patch", "huggingface");
    let argv_text = plan.text(&mut r, "run_shell argv");
    let search = plan.one(&mut r, "search_text pattern", "pypi");
    let mcp_text = plan.text(&mut r, "mcp result");
    let read_url_secret = plan.one(&mut r, "read_url url", "sendgrid");
    // A search backend whose results hold secrets (the query may not: web_search
    // refuses a query carrying a credential).
    let results = serde_json::to_string(&json!({"results": [
        {"url": format!("{}/result", web.url), "title": "notes", "content": plan.text(&mut r, "web_search results")}
    ]}))
    .unwrap();
    let searx =
        Server::start(move |_, _| response(200, &[("content-type", "application/json")], &results));
    let thndrs_dir = {
        let mut config = EngineConfig::new(Catalog::Thndrs);
        config.web = WebConfig {
            allow_loopback_for_tests: true,
            fetch_timeout_ms: 5_000,
            search_backend: cairn_engine::web::SearchBackend::Searxng,
            searxng_url: Some(searx.url.clone()),
            ..WebConfig::default()
        };
        config.check_command = None;
        let mut e = Engine::start(&home, ws, config).unwrap();
        e.set_approver(Box::new(Policy::AllowAll));
        let calls = [
            (
                "create_file",
                json!({"path": ".env.production", "content": created}),
            ),
            (
                "read_file_range",
                json!({"path": ".env.production", "start_line": 1, "end_line": 200}),
            ),
            (
                "replace_range",
                json!({"path": ".env.production", "old_string": "max_tokens", "new_string": replaced}),
            ),
            (
                "write_patch",
                json!({"patches": [{"op": "edit", "path": ".env.production", "old_string": "task-runner", "new_string": patched}]}),
            ),
            ("run_shell", json!({"argv": ["printf", "%s", argv_text]})),
            (
                "search_text",
                json!({"pattern": search, "include_hidden": true}),
            ),
            (
                "search_text",
                json!({"pattern": "KEY|key", "include_hidden": true}),
            ),
            (
                "find_files",
                json!({"pattern": ".env", "include_hidden": true}),
            ),
            ("list_searchable_files", json!({"include_hidden": true})),
            ("web_search", json!({"query": "deploy notes"})),
            (
                "read_url",
                json!({"url": format!("{}/p?key={read_url_secret}", web.url)}),
            ),
            ("mcp__fake__echo", json!({"text": mcp_text})),
        ];
        for (tool, input) in calls {
            let out = e.call(tool, input.clone()).unwrap();
            assert_eq!(out.status, Status::Ok, "{tool}: {}", out.output);
        }
        let dir = e.dir().to_path_buf();
        e.end("done").unwrap();
        dir
    };

    // Search everything that was kept and everything the model was sent.
    // channel -> (kinds, where)
    let mut leaks: BTreeMap<&str, (Vec<&str>, Vec<String>)> = BTreeMap::new();
    let kept = files(home_dir.path());
    let sent: Vec<(PathBuf, Vec<u8>)> = model
        .seen()
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let mut all = format!("{} {}\n", q.method, q.path);
            for (k, v) in &q.headers {
                all.push_str(&format!("{k}: {v}\n"));
            }
            all.push_str(&q.body);
            (
                PathBuf::from(format!("request {} to the model", i + 1)),
                all.into_bytes(),
            )
        })
        .collect();
    let terminal = [(PathBuf::from("what the agent showed"), shown.into_bytes())];
    for (channel, kind, needle) in &plan.needles {
        for (path, bytes) in kept.iter().chain(&sent).chain(&terminal) {
            if holds(bytes, needle) {
                let (kinds, at) = leaks.entry(channel.as_str()).or_default();
                if !kinds.contains(kind) {
                    kinds.push(kind);
                }
                let place = where_kept(home_dir.path(), path);
                if !at.contains(&place) {
                    at.push(place);
                }
            }
        }
    }
    if let Ok(d) = std::env::var("CAIRN_LEAK_KEEP") {
        let _ = std::process::Command::new("cp")
            .arg("-r")
            .arg(home_dir.path())
            .arg(&d)
            .status();
    }
    // A look-alike is kept, or sent, wherever its channel's text went whole: not the
    // withheld file nothing read, nor search results, shown as a cut snippet.
    let mut lost = Vec::new();
    for (channel, l) in &plan.look_alikes {
        if !["workspace server.pem", "web_search results"].contains(&channel.as_str())
            && !kept.iter().chain(&sent).any(|(_, b)| holds(b, l))
        {
            lost.push(format!("{channel}: {l}"));
        }
    }
    assert!(
        leaks.is_empty(),
        "raw secrets found through {} channels (seed {seed}):\n{}",
        leaks.len(),
        leaks
            .iter()
            .map(|(channel, (kinds, at))| format!(
                "  {channel}: {} of {} kinds ({}) in {}",
                kinds.len(),
                secrets(&mut Rng(1)).len(),
                kinds.join(", "),
                at.join(", ")
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(lost.is_empty(), "look-alikes redacted or lost: {lost:?}");
    for dir in [&thoth_dir, &thndrs_dir] {
        let (_, problems) = cairn_replay::verify(dir).unwrap();
        assert_eq!(problems, vec![], "{}", dir.display());
    }
}

/// A secret given as an object's key (in a call's input, to a known tool or not) is
/// redacted as any string is: nothing under the home holds it, and no member of the
/// object is lost when two keys redact alike.
#[test]
fn a_secret_used_as_a_key_is_redacted_and_no_member_is_lost() {
    let home_dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let home = Home::at(home_dir.path());
    let mut e = Engine::start(&home, ws.path(), EngineConfig::new(Catalog::Thndrs)).unwrap();
    // Made at run time: the repository holds no secret.
    let t1 = format!("{}_{}", "ghp", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
    let t2 = format!("{}_{}", "ghp", "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2");
    let mut headers = serde_json::Map::new();
    headers.insert(t1.clone(), json!("first"));
    headers.insert(t2.clone(), json!("second"));
    headers.insert("plain".into(), json!(1));
    e.call(
        "read_file_range",
        json!({"path": "a.txt", "headers": headers}),
    )
    .unwrap();
    let mut nested = serde_json::Map::new();
    nested.insert(t2.clone(), json!({ t1.clone(): true }));
    e.call("no_such_tool", serde_json::Value::Object(nested))
        .unwrap();
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    for (path, bytes) in files(home_dir.path()) {
        for t in [&t1, &t2] {
            assert!(
                !holds(&bytes, t),
                "{} holds a secret given as a key",
                where_kept(home_dir.path(), &path)
            );
        }
    }
    let records = cairn_replay::Session::load(&dir).unwrap().records;
    let inputs: Vec<serde_json::Value> = records
        .iter()
        .filter_map(|r| match &r.event {
            cairn_engine::event::Event::ToolStarted { input, .. } => Some(input.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        inputs[0],
        json!({"path": "a.txt", "headers": {
            "[REDACTED:github_token]": "first",
            "[REDACTED:github_token]#2": "second",
            "plain": 1,
        }})
    );
    assert_eq!(
        inputs[1],
        json!({"[REDACTED:github_token]": {"[REDACTED:github_token]": true}})
    );
}
