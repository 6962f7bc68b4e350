//! The first run: `cairn` or `cairn chat` on a terminal with no model configured asks
//! which provider (those it finds: `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, a local
//! Ollama or llama.cpp server on its usual port, or any OpenAI-compatible URL typed
//! in), which model (listed from the provider's API where it lists them), shows the
//! lines it would add to the user's `config.toml` and writes them once the person says
//! yes. Plain lines on standard input and output: nothing here needs the full screen.

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use cairn_engine::Home;
use cairn_engine::provider::Kind;
use cairn_engine::settings::{self, Settings};

/// The local servers looked for: their name and OpenAI-compatible base URL.
const LOCAL_SERVERS: &[(&str, &str)] = &[
    ("Ollama", "http://127.0.0.1:11434/v1"),
    ("llama.cpp", "http://127.0.0.1:8080/v1"),
];

/// How long a local server has to answer its model list, in milliseconds.
const LOCAL_PROBE_TIMEOUT_MS: u64 = 500;
/// How long a hosted provider has to answer its model list, in milliseconds.
const MODELS_TIMEOUT_MS: u64 = 10_000;
/// Models listed to choose from (the rest are counted; any name can be typed).
const MODELS_SHOWN_MAX: usize = 30;

/// A provider the person can pick.
struct Choice {
    label: String,
    kind: Kind,
    /// The base URL when not the provider's own.
    base_url: Option<String>,
    /// The models its API listed (empty when it lists none).
    models: Vec<String>,
}

/// True when the settings in force name no model and the provider has no default one
/// (Anthropic has): the chat would fail with "no model given".
pub fn needed(s: &Settings) -> bool {
    s.model.is_none() && s.provider.unwrap_or(Kind::Openai) == Kind::Openai
}

/// Asks, shows and writes; false when the person wrote nothing.
pub fn guide(home: &Home) -> Result<bool> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut output = std::io::stdout();
    let file = home.root.join(settings::CONFIG_FILE);
    writeln!(output, "Looking for a model provider…")?;
    let choices = found(&|k: &str| std::env::var(k).ok());
    run(&mut input, &mut output, &file, choices)
}

fn run(
    input: &mut impl BufRead,
    out: &mut impl Write,
    file: &Path,
    mut choices: Vec<Choice>,
) -> Result<bool> {
    writeln!(
        out,
        "No model is configured yet: a few questions, then cairn writes your answers to\n{} (nothing is written until you say yes; Ctrl-C leaves).\n",
        file.display()
    )?;
    writeln!(out, "Which provider?")?;
    for (i, c) in choices.iter().enumerate() {
        writeln!(out, "  {}) {}", i + 1, c.label)?;
    }
    let other = choices.len() + 1;
    writeln!(
        out,
        "  {other}) another OpenAI-compatible server (you type its URL)"
    )?;
    if choices.is_empty() {
        writeln!(
            out,
            "  (none found: no OPENAI_API_KEY or ANTHROPIC_API_KEY, no Ollama on 11434 nor llama.cpp on 8080)"
        )?;
    }
    let picked = loop {
        let a = ask(input, out, "provider", "1")?;
        match a.parse::<usize>() {
            Ok(n) if (1..other).contains(&n) => break choices.swap_remove(n - 1),
            Ok(n) if n == other => {
                let url = ask(input, out, "its base URL (http://host:port/v1)", "")?;
                if url.is_empty() {
                    continue;
                }
                let url = url.trim_end_matches('/').to_string();
                let models = list_models(&url, None, MODELS_TIMEOUT_MS).unwrap_or_default();
                break Choice {
                    label: url.clone(),
                    kind: Kind::Openai,
                    base_url: Some(url),
                    models,
                };
            }
            _ => writeln!(out, "  a number from 1 to {other}")?,
        }
    };
    let model = pick_model(input, out, &picked)?;
    let mut lines = vec![
        format!("provider = {}", quoted(kind_name(picked.kind))),
        format!("model = {}", quoted(&model)),
    ];
    if let Some(url) = &picked.base_url {
        lines.push(format!("base_url = {}", quoted(url)));
    }
    writeln!(out, "\nThese lines go at the top of {}:\n", file.display())?;
    for l in &lines {
        writeln!(out, "  {l}")?;
    }
    writeln!(out)?;
    let yes = ask(input, out, "write them? [Y/n]", "y")?;
    if !matches!(yes.to_lowercase().as_str(), "y" | "yes") {
        writeln!(out, "nothing written: pass --model, or run cairn again")?;
        return Ok(false);
    }
    write_top(file, &lines)?;
    writeln!(
        out,
        "written: cairn config shows every setting; /model NAME switches the model in the chat\n"
    )?;
    Ok(true)
}

/// The model: a number from the listed ones, or any name.
fn pick_model(input: &mut impl BufRead, out: &mut impl Write, c: &Choice) -> Result<String> {
    if c.models.is_empty() {
        writeln!(
            out,
            "\n{} lists no models here: type the model's name.",
            c.label
        )?;
        loop {
            let a = ask(input, out, "model", "")?;
            if !a.is_empty() {
                return Ok(a);
            }
        }
    }
    writeln!(out, "\nWhich model? ({} lists these)", c.label)?;
    for (i, m) in c.models.iter().take(MODELS_SHOWN_MAX).enumerate() {
        writeln!(out, "  {}) {m}", i + 1)?;
    }
    if c.models.len() > MODELS_SHOWN_MAX {
        writeln!(
            out,
            "  … and {} more: type a name to use one of them",
            c.models.len() - MODELS_SHOWN_MAX
        )?;
    }
    loop {
        let a = ask(input, out, "model (a number or a name)", "1")?;
        match a.parse::<usize>() {
            Ok(n) if (1..=c.models.len().min(MODELS_SHOWN_MAX)).contains(&n) => {
                return Ok(c.models[n - 1].clone());
            }
            Ok(_) => writeln!(out, "  a number from the list, or a name")?,
            Err(_) => return Ok(a),
        }
    }
}

/// One question; the answer trimmed, `default` when empty. End of input is an error
/// (nobody left to answer).
fn ask(
    input: &mut impl BufRead,
    out: &mut impl Write,
    what: &str,
    default: &str,
) -> Result<String> {
    if default.is_empty() {
        write!(out, "{what}: ")?;
    } else {
        write!(out, "{what} [{default}]: ")?;
    }
    out.flush()?;
    let mut line = String::new();
    if input.read_line(&mut line)? == 0 {
        anyhow::bail!("no answer: the first-run questions need a terminal (or pass --model)");
    }
    let a = line.trim();
    Ok(if a.is_empty() { default } else { a }.to_string())
}

/// The providers found in the environment and on this machine.
fn found(env: &impl Fn(&str) -> Option<String>) -> Vec<Choice> {
    let set = |v: &str| env(v).is_some_and(|k| !k.is_empty());
    let mut out = Vec::new();
    if set("OPENAI_API_KEY") {
        out.push(Choice {
            label: "OpenAI (OPENAI_API_KEY is set)".into(),
            kind: Kind::Openai,
            base_url: None,
            models: list_models(
                "https://api.openai.com/v1",
                env("OPENAI_API_KEY"),
                MODELS_TIMEOUT_MS,
            )
            .unwrap_or_default(),
        });
    }
    if set("ANTHROPIC_API_KEY") {
        out.push(Choice {
            label: "Anthropic (ANTHROPIC_API_KEY is set)".into(),
            kind: Kind::Anthropic,
            base_url: None,
            models: list_anthropic(env("ANTHROPIC_API_KEY").unwrap_or_default())
                .unwrap_or_default(),
        });
    }
    for (name, url) in LOCAL_SERVERS {
        if let Some(models) = list_models(url, None, LOCAL_PROBE_TIMEOUT_MS) {
            out.push(Choice {
                label: format!("{name} at {url} (running)"),
                kind: Kind::Openai,
                base_url: Some(url.to_string()),
                models,
            });
        }
    }
    out
}

fn client(timeout_ms: u64) -> Option<reqwest::blocking::Client> {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_millis(timeout_ms))
        .connect_timeout(Duration::from_millis(timeout_ms))
        .build()
        .ok()
}

/// The model ids an OpenAI-compatible server lists at `{base}/models`; `None` when
/// it does not answer with a list.
fn list_models(base: &str, key: Option<String>, timeout_ms: u64) -> Option<Vec<String>> {
    let mut req = client(timeout_ms)?.get(format!("{base}/models"));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    ids(req.send().ok()?)
}

/// The models Anthropic's API lists for `key`.
fn list_anthropic(key: String) -> Option<Vec<String>> {
    let resp = client(MODELS_TIMEOUT_MS)?
        .get("https://api.anthropic.com/v1/models")
        .header("x-api-key", key)
        .header("anthropic-version", "2023-06-01")
        .send()
        .ok()?;
    ids(resp)
}

/// `data[].id` of a successful answer.
fn ids(resp: reqwest::blocking::Response) -> Option<Vec<String>> {
    if !resp.status().is_success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&resp.text().ok()?).ok()?;
    let mut ids: Vec<String> = v["data"]
        .as_array()?
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_string))
        .collect();
    ids.sort();
    Some(ids)
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Openai => "openai",
        Kind::Anthropic => "anthropic",
    }
}

/// A TOML basic string.
fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Puts `lines` at the top of `file` (before any table, where top-level keys must be),
/// keeping what it held.
fn write_top(file: &Path, lines: &[String]) -> Result<()> {
    let before = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut text = String::from("# written by cairn's first run\n");
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    if !before.is_empty() {
        text.push('\n');
        text.push_str(&before);
    }
    let tmp = file.with_extension("toml.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, file).with_context(|| format!("writing {}", file.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines go above the file's tables: appended after `[limits]` they would be
    /// read as limits.
    #[test]
    fn the_lines_go_above_the_tables_of_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "[limits]\nread_lines_max = 7\n").unwrap();
        write_top(&file, &["model = \"m-1\"".to_string()]).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        let (_, s) = settings::read(&file).unwrap().unwrap();
        assert_eq!(s.model.as_deref(), Some("m-1"), "{text}");
        assert_eq!(s.limits.unwrap()["read_lines_max"], 7, "{text}");
    }

    /// A server that lists no models: the name typed is written, and `n` writes nothing.
    #[test]
    fn a_typed_url_and_model_and_no_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        let mut input = std::io::Cursor::new("1\nhttp://127.0.0.1:9/v1\nm-2\nn\n");
        let mut out = Vec::new();
        let wrote = run(&mut input, &mut out, &file, Vec::new()).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(!wrote, "{out}");
        assert!(!file.exists());
        assert!(out.contains("  model = \"m-2\"\n"), "{out}");
        assert!(
            out.contains("  base_url = \"http://127.0.0.1:9/v1\"\n"),
            "{out}"
        );
    }
}
