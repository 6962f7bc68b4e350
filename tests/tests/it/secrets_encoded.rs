//! Every kind of secret, written with every escape a reader decodes (all of it, or only
//! its separators), in every field of a record that holds a URL or text: what is
//! written holds the secret in none of its forms. Two ways in, both the real ones:
//!
//! - the recorder's scrub pass alone, every field of every event given as it is (the
//!   pass that makes "no secret in the log" hold for fields the engine does not
//!   redact itself);
//! - the engine: a user message, a model turn, a call's input (`read_file` of the
//!   secret as a path, whose error quotes it), a fetch's permission prompt (its URL
//!   normalised: spaces become `%20`), and a real `bash` printing the secret (the
//!   stream redactor, the output blob, the preview) and holding it on its command line.
//!
//! Each log is then read line by line, and each of its strings and blobs in every form
//! `cairn_engine::redact::decoded_forms` gives (the readings mixed, four deep, and the
//! `Basic` credentials decoded): the secret's own part must be in none. Secrets are made
//! at run time from a seed; `PROPTEST_CASES` sets the number of seeds (default 2: each
//! seed records every kind × every encoding × every field).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use cairn_core::event::{
    Answer, Event, ProcKind, ShellExec, ShellPhase, Status, ToolFinished, WebFetched,
};
use cairn_core::redact::Redactor;
use cairn_core::scrub::{SECRET_KEY_BYTES, SecretKey};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::{BlobStore, Durability, LogWriter, Options, SnapshotStore};
use cairn_tests::Rng;
use proptest::prelude::*;
use serde_json::json;

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const HEX: &[u8] = b"0123456789abcdef";

/// The secret environment value the redactors of these tests know.
const ENV_NAME: &str = "DEPLOY_TOKEN";

fn chars(rng: &mut Rng, set: &[u8], n: usize) -> String {
    (0..n)
        .map(|_| set[rng.range(0, set.len() as u64 - 1) as usize] as char)
        .collect()
}

/// A secret as text, and its part that must be found in no form of what is written
/// (the secret less its name or scheme; at least 16 characters, so that no filler
/// holds it by chance).
struct Secret {
    kind: &'static str,
    text: String,
    needle: String,
}

/// One secret of every kind the redactor knows, made from `rng`; `env` is the value
/// of the environment secret.
#[expect(
    clippy::too_many_lines,
    reason = "a data table: one secret of each kind the redactor knows"
)]
fn secrets(rng: &mut Rng, env: &str) -> Vec<Secret> {
    let mut out = Vec::new();
    let mut whole = |kind, text: String| {
        out.push(Secret {
            kind,
            needle: text.clone(),
            text,
        })
    };
    whole(
        "anthropic_key",
        format!("sk-{}-api03-{}", "ant", chars(rng, ALNUM, 40)),
    );
    whole(
        "openai_key",
        format!("sk-{}-{}", "proj", chars(rng, ALNUM, 40)),
    );
    whole(
        "aws_access_key",
        format!("{}{}", "AK", "IA") + &chars(rng, b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16),
    );
    whole(
        "github_token",
        format!("gh{}_{}", "p", chars(rng, ALNUM, 36)),
    );
    whole(
        "github_token",
        format!("github_{}_{}", "pat", chars(rng, ALNUM, 40)),
    );
    whole(
        "gitlab_token",
        format!("gl{}-{}", "pat", chars(rng, ALNUM, 24)),
    );
    whole(
        "slack_token",
        format!("xo{}-{}", "xb", chars(rng, ALNUM, 30)),
    );
    whole(
        "stripe_key",
        format!("sk_{}_{}", "live", chars(rng, ALNUM, 24)),
    );
    whole(
        "google_api_key",
        format!("AI{}{}", "za", chars(rng, ALNUM, 35)),
    );
    whole("npm_token", format!("np{}_{}", "m", chars(rng, ALNUM, 36)));
    whole(
        "pypi_token",
        format!("py{}-{}", "pi", chars(rng, ALNUM, 60)),
    );
    whole(
        "huggingface_token",
        format!("h{}_{}", "f", chars(rng, ALNUM, 34)),
    );
    whole(
        "sendgrid_key",
        format!(
            "S{}.{}.{}",
            "G",
            chars(rng, ALNUM, 22),
            chars(rng, ALNUM, 43)
        ),
    );
    whole("twilio_key", format!("S{}{}", "K", chars(rng, HEX, 32)));
    whole(
        "jwt",
        format!(
            "ey{}{}.ey{}{}.{}",
            "J",
            chars(rng, ALNUM, 20),
            "J",
            chars(rng, ALNUM, 20),
            chars(rng, ALNUM, 30)
        ),
    );
    whole("env_secret", env.to_string());
    let mut part = |kind, text: String, needle: String| {
        assert!(text.contains(&needle) || kind == "basic_auth");
        out.push(Secret { kind, text, needle })
    };
    let key = chars(rng, ALNUM, 40);
    part(
        "azure_storage_key",
        format!(
            "DefaultEndpointsProtocol=https;AccountName=a;Account{}={key}==",
            "Key"
        ),
        key.clone(),
    );
    let token = chars(rng, ALNUM, 32);
    part(
        "bearer_token",
        format!("Authorization: {} {token}", "Bearer"),
        token.clone(),
    );
    let pw = chars(rng, ALNUM, 20);
    part(
        "basic_auth",
        format!(
            "Authorization: {} {}",
            "Basic",
            base64::engine::general_purpose::STANDARD.encode(format!("deploy:{pw}"))
        ),
        pw.clone(),
    );
    let pw = chars(rng, ALNUM, 20);
    part(
        "url_password",
        format!("https://deploy:{pw}@git.example.com/r.git"),
        pw.clone(),
    );
    let value = chars(rng, ALNUM, 20);
    part(
        "assignment",
        format!("DB_PASS{}={value}", "WORD"),
        value.clone(),
    );
    let body = chars(rng, B64, 48);
    let line = body[..40].to_string();
    part(
        "private_key",
        format!(
            "-----BEGIN RSA PRIVATE {}-----\n{}\n{}\n-----END RSA PRIVATE KEY-----",
            "KEY",
            &body[..40],
            &body[40..]
        ),
        line,
    );
    out
}

/// How many ways [`encode`] writes a secret.
const ENCODINGS: usize = 13;

/// `s` written with the escapes of encoding `e`: all of its characters, or only its
/// separators (what is no letter or digit); encoding 0 leaves it as it is.
fn encode(s: &str, e: usize) -> String {
    let sep = |c: char| !c.is_ascii_alphanumeric();
    let each = |f: &dyn Fn(char) -> Option<String>| -> String {
        s.chars()
            .map(|c| f(c).unwrap_or_else(|| c.to_string()))
            .collect()
    };
    let percent =
        |c: char| -> String { c.to_string().bytes().map(|b| format!("%{b:02X}")).collect() };
    let json = |c: char| -> String {
        let mut units = [0u16; 2];
        c.encode_utf16(&mut units)
            .iter()
            .map(|u| format!("\\u{u:04x}"))
            .collect()
    };
    let named = |c: char| match c {
        ' ' => Some("nbsp"),
        ':' => Some("colon"),
        '=' => Some("equals"),
        '/' => Some("sol"),
        '-' => Some("hyphen"),
        '_' => Some("lowbar"),
        '.' => Some("period"),
        ';' => Some("semi"),
        '@' => Some("commat"),
        '+' => Some("plus"),
        '\n' => Some("NewLine"),
        _ => None,
    };
    match e {
        0 => s.to_string(),
        1 => each(&|c| Some(percent(c))),
        2 => each(&|c| sep(c).then(|| percent(c))),
        // A query's value: `+` for a space.
        3 => format!(
            "?q={}",
            each(&|c| match c {
                ' ' => Some("+".to_string()),
                c if sep(c) => Some(percent(c)),
                _ => None,
            })
        ),
        4 => each(&|c| Some(json(c))),
        5 => each(&|c| sep(c).then(|| json(c))),
        // Shell words: a backslash before each separator, a line end as `$'\n'`.
        6 => each(&|c| match c {
            '\n' => Some("$'\\n'".to_string()),
            c if c.is_ascii_punctuation() || c == ' ' => Some(format!("\\{c}")),
            _ => None,
        }),
        7 => format!(
            "$'{}'",
            each(&|c| Some(
                c.to_string()
                    .bytes()
                    .map(|b| format!("\\x{b:02x}"))
                    .collect()
            ))
        ),
        8 => each(&|c| Some(format!("&#{};", u32::from(c)))),
        9 => each(&|c| {
            sep(c).then(|| match named(c) {
                Some(n) => format!("&{n};"),
                None => format!("&#x{:x};", u32::from(c)),
            })
        }),
        // Twice over: a percent-encoded percent-encoding of the separators.
        10 => encode(&encode(s, 2), 2),
        // An HTML-escaped JSON escape of the separators.
        11 => encode(s, 5).replace('\\', "&bsol;"),
        _ => format!(
            "Authorization: Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("user:{s}"))
        ),
    }
}

/// Where `needle` is found, in any form, in the log of the session at `dir` (each line,
/// and each string of it) and in the blobs under `blobs`.
fn found_in(dir: &Path, blobs: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let log = std::fs::read_to_string(dir.join(cairn_store::LOG_FILE)).unwrap();
    for (n, line) in log.lines().enumerate() {
        let mut strings = vec![line.to_string()];
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        collect_strings(&v, &mut strings);
        for s in strings {
            if cairn_tests::holds_in_any_form(s.as_bytes(), needle) {
                found.push(format!("line {}: {line}", n + 1));
                break;
            }
        }
    }
    for p in cairn_tests::files_holding_in_any_form(blobs, needle) {
        found.push(format!(
            "blob {}: {}",
            p.display(),
            String::from_utf8_lossy(&std::fs::read(&p).unwrap())
        ));
    }
    found
}

fn collect_strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                out.push(k.clone());
                collect_strings(x, out);
            }
        }
        _ => {}
    }
}

/// A recorder of a new session under `dir` with the tests' redactor and a key.
fn recorder(dir: &Path, env: &str) -> cairn_tools::Recorder {
    let session = dir.join("session");
    let options = Options {
        durability: Durability::None,
        ..Options::default()
    };
    let log = LogWriter::create(&session, options).unwrap();
    let blobs = BlobStore::open(&dir.join("blobs")).unwrap().without_sync();
    let mut rec = cairn_tools::Recorder::new(
        log,
        cairn_core::State::default(),
        blobs,
        SnapshotStore::new(&session),
        Durability::None,
        0,
        0,
    );
    rec.set_redaction(
        Redactor::with_env([(ENV_NAME.to_string(), env.to_string())]),
        Some(SecretKey([9; SECRET_KEY_BYTES])),
    );
    rec
}

/// Every event that holds a URL or text, with `text` in each such field.
fn events_holding(text: &str) -> Vec<Event> {
    let url = format!("https://example.invalid/?h={text}");
    let exec = ShellExec {
        call: "c1".into(),
        id: None,
        argv: vec!["bash".into(), "-c".into(), format!("curl -H {text}")],
        argv_hash: None,
        cwd: "/w".into(),
        pid: Some(7),
        start_time: None,
        kind: ProcKind::Foreground,
        timeout_ms: Some(1000),
        log: None,
        sandbox: None,
        phase: ShellPhase::Started,
    };
    vec![
        Event::UserMessage {
            at: None,
            text: format!("use {text} please"),
            text_hash: None,
        },
        Event::ModelTurn {
            at: None,
            provider: "openai".into(),
            model: "m".into(),
            text: format!("I will run {text}"),
            tool_calls: vec![json!({"id": "t1", "name": "shell", "input": {"command": text}})],
            usage: None,
            interrupted: false,
        },
        Event::ToolStarted {
            at: None,
            call: "c1".into(),
            tool: "web_fetch".into(),
            input: json!({"url": url, "headers": {"x": text}}),
            input_hash: None,
            mcp: None,
            observed: None,
        },
        Event::PermissionRequested {
            call: "c1".into(),
            key: "web_fetch:example.invalid".into(),
            detail: format!("web_fetch wants to fetch {url}"),
            tool: "web_fetch".into(),
            guarded: false,
            keys: vec![],
            reasons: vec![],
            guards: vec![],
        },
        Event::ShellExec(exec),
        Event::MemoryWritten {
            text: format!("remember {text}"),
        },
        Event::WebFetched(WebFetched {
            call: "c1".into(),
            url: url.clone(),
            final_url: Some(url.clone()),
            redirects: vec![url.clone()],
            status: Some(200),
            content_type: None,
            bytes: 0,
            hash: None,
            text: None,
            error: Some(format!("refused {url}")),
        }),
        Event::ToolFinished(ToolFinished {
            at: None,
            call: "c1".into(),
            status: Status::Ok,
            output: format!("printed:\n{text}\n"),
            output_blob: None,
            elapsed_us: 1,
            refusal: None,
            redactions: Default::default(),
            mcp_result: None,
            injection: vec![],
        }),
    ]
}

/// The recorder's scrub pass: each kind, each encoding, in every field.
fn through_the_recorder(seed: u64) -> Result<(), TestCaseError> {
    let mut rng = Rng::new(seed);
    let env = format!("env-{}", chars(&mut rng, ALNUM, 24));
    for s in secrets(&mut rng, &env) {
        for e in 0..ENCODINGS {
            let dir = tempfile::tempdir().unwrap();
            let mut rec = recorder(dir.path(), &env);
            let encoded = encode(&s.text, e);
            for event in events_holding(&encoded) {
                rec.append(&event).unwrap();
            }
            rec.commit().unwrap();
            let found = found_in(
                &dir.path().join("session"),
                &dir.path().join("blobs"),
                &s.needle,
            );
            prop_assert!(
                found.is_empty(),
                "{} written with encoding {e} as {encoded:?} is kept:\n{}",
                s.kind,
                found.join("\n")
            );
        }
    }
    Ok(())
}

/// The engine's own paths: each encoding, every kind, through a message, a turn, a
/// call's input and answer, a fetch's permission prompt and a real command's output
/// and command line.
fn through_the_engine(seed: u64) -> Result<(), TestCaseError> {
    let mut rng = Rng::new(seed);
    let env = format!("env-{}", chars(&mut rng, ALNUM, 24));
    let made = secrets(&mut rng, &env);
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mut engine = Engine::start(
        &Home::at(home.path()),
        ws.path(),
        EngineConfig::new(Catalog::Thoth),
    )
    .unwrap();
    engine.add_secret(ENV_NAME, &env);
    for e in 0..ENCODINGS {
        // Every kind printed by one command, one a line.
        let printed: Vec<String> = made.iter().map(|s| encode(&s.text, e)).collect();
        let file: PathBuf = outside.path().join(format!("secrets-{e}.txt"));
        std::fs::write(&file, printed.join("\n") + "\n").unwrap();
        let out = engine
            .call_with(
                "shell",
                json!({"command": format!("cat '{}'", file.display())}),
                Some(Answer::Once),
            )
            .unwrap();
        prop_assert_eq!(out.status, Status::Ok, "{}", out.output);
        // One kind in each other field, a different one for each encoding.
        let s = &made[(e + seed as usize) % made.len()];
        let text = encode(&s.text, e);
        engine.user_message(&format!("use {text} please")).unwrap();
        engine
            .model_turn(
                "openai",
                "m",
                &cairn_engine::provider::Turn {
                    text: format!("I will use {text}"),
                    ..Default::default()
                },
            )
            .unwrap();
        engine
            .call_with("read_file", json!({"path": text}), None)
            .unwrap();
        engine
            .call_with(
                "web_fetch",
                json!({"url": format!("https://example.invalid/?h={text}")}),
                Some(Answer::Deny),
            )
            .unwrap();
        let quoted = text.replace('\'', "'\\''");
        engine
            .call_with(
                "shell",
                json!({"command": format!(": '{quoted}'")}),
                Some(Answer::Once),
            )
            .unwrap();
    }
    let dir = engine.dir().to_path_buf();
    let blobs = engine.project().blobs_dir();
    engine.end("done").unwrap();
    for s in &made {
        let found = found_in(&dir, &blobs, &s.needle);
        prop_assert!(
            found.is_empty(),
            "{} ({:?}) is kept:\n{}",
            s.kind,
            s.needle,
            found.join("\n")
        );
    }
    Ok(())
}

fn config() -> ProptestConfig {
    let cases = cairn_tests::env_u64("PROPTEST_CASES", 2);
    ProptestConfig::with_cases(u32::try_from(cases).unwrap_or(u32::MAX))
}

proptest! {
    #![proptest_config(config())]

    /// Through the recorder's scrub pass, every kind × every encoding × every field.
    #[test]
    fn no_encoded_secret_is_recorded_in_any_form_by_the_scrub_pass(seed in any::<u64>()) {
        through_the_recorder(seed)?;
    }

    /// Through the engine: every kind × every encoding in a command's output and
    /// blobs, and a kind per encoding in each other field.
    #[test]
    fn no_encoded_secret_is_recorded_in_any_form_by_the_engine(seed in any::<u64>()) {
        through_the_engine(seed)?;
    }
}
