//! The configuration files: `$CAIRN_HOME/config.toml` (the user's) and
//! `<project>/config.toml` in the project's folder under the home — never a file of the
//! workspace, which the agent can write.
//!
//! Every setting is one layer of a [`Settings`] value: the command line's flags, the
//! environment, the project's file, the user's file, the defaults, in that order of
//! precedence. [`resolve`] merges them key by key and remembers where each value came
//! from (`cairn config` shows it). Limits merge one by one: a file may set one limit and
//! keep the others. An unknown key is an error naming the key and the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::project::{Home, Project};
use cairn_core::command::Guard;
use cairn_core::event::SandboxMode;
use cairn_net::provider::Kind;
use cairn_net::web::SearchBackend;
use cairn_tools::{Catalog, EngineConfig, EngineError, Result};

/// The name of a configuration file, in the home and in a project folder.
pub const CONFIG_FILE: &str = "config.toml";

/// The largest configuration file read, in bytes.
pub const CONFIG_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// One layer of settings: a configuration file, the flags or the environment. Every
/// field is optional; what a layer leaves out, the next one down gives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The model API: `openai` (any OpenAI-compatible server) or `anthropic`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<Kind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The name of the environment variable holding the API key (never a key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The tool catalog: `thoth` or `thndrs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog: Option<Catalog>,
    /// The `web_search` backend: `duckduckgo`, `searxng` or `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchBackend>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub searxng_url: Option<String>,
    /// The command `problems` runs, split on white space.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// The sandbox of commands: `workspace-write`, `strict` or `off`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMode>,
    /// Folders commands may also write in (absolute).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_write_roots: Option<Vec<PathBuf>>,
    /// Model turns before a run stops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turns_max: Option<u32>,
    /// The model's context window in tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Commands that always ask (rules on parsed argv; replaces the default list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guarded_commands: Option<Vec<Guard>>,
    /// Files that ask before they are read (glob patterns; replaces the default list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential_files: Option<Vec<String>>,
    /// How the workspace is captured at a session's start: `git` (files git holds
    /// unchanged are recorded by their blob id) or `full` (every file copied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<cairn_tools::manifest::Capture>,
    /// Limits by name (`read_file_bytes_max = 1000000`), each over the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, u64>>,
    /// The team archive (`[archive]` with `url = "postgres://…"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveSettings>,
    /// Prices per model (`[prices."MODEL"]`), for the cost `cairn show` and `cairn
    /// audit` give; each model's table over the lower layers'.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prices: Option<BTreeMap<String, Price>>,
    /// Whether the commands that write sessions add them to the search index
    /// (`$CAIRN_HOME/search.db`): as their records are appended, by a background
    /// indexer, and after the command; `cairn search` catches up either way.
    /// `CAIRN_SEARCH_INDEX=on|off` overrides the files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_index: Option<bool>,
    /// The live OpenTelemetry export (`[otel]`), under OpenTelemetry's own environment
    /// variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, …; see `docs/EXPORT.md`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub otel: Option<OtelSettings>,
}

/// The `[otel]` table: where a session's spans go as it runs, and `cairn export otel`'s
/// default collector. Each key is under its OpenTelemetry environment variable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtelSettings {
    /// The collector's base URL (`http://localhost:4318`; with `grpc`,
    /// `http://localhost:4317`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The OTLP protocol: `http/protobuf` (the default) or `grpc`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Headers sent with every request (`{ authorization = "Bearer …" }`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// Whether messages, tool inputs and outputs are exported (redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_content: Option<bool>,
    /// How long one export request may take, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// A model's prices (`[prices."MODEL"]`), in dollars per million tokens, at least 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Input tokens read from the provider's prompt cache (the input price when left
    /// out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_per_mtok: Option<f64>,
}

impl Price {
    /// The first field that is not a number of dollars at least 0, and its value.
    pub fn bad_field(&self) -> Option<(&'static str, f64)> {
        let ok = |n: f64| n.is_finite() && n >= 0.0;
        [
            ("input_per_mtok", Some(self.input_per_mtok)),
            ("output_per_mtok", Some(self.output_per_mtok)),
            ("cached_per_mtok", self.cached_per_mtok),
        ]
        .into_iter()
        .find_map(|(k, v)| v.filter(|n| !ok(*n)).map(|n| (k, n)))
    }
}

/// The environment variable over `search_index`: `on`/`off` (`1`/`0`, `true`/`false`).
pub const SEARCH_INDEX_ENV: &str = "CAIRN_SEARCH_INDEX";

/// The `[archive]` table: where `cairn archive` and `archive:<id>` sessions go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveSettings {
    /// The archive database, `postgres://user@host:port/db`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    Flag,
    Env { var: String },
    Project { file: PathBuf },
    User { file: PathBuf },
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag => write!(f, "flag"),
            Source::Env { var } => write!(f, "env {var}"),
            Source::Project { file } => write!(f, "project {}", file.display()),
            Source::User { file } => write!(f, "user {}", file.display()),
            Source::Default => write!(f, "default"),
        }
    }
}

/// The configuration files that apply to a workspace, read and checked.
#[derive(Debug, Clone, Default)]
pub struct Files {
    pub user: Option<(PathBuf, Settings)>,
    pub project: Option<(PathBuf, Settings)>,
}

impl Files {
    /// The user's file and, for a workspace, its project's; a file that is not there is
    /// no layer.
    pub fn load(home: &Home, project: Option<&Project>) -> Result<Files> {
        let user = read(&home.root.join(CONFIG_FILE))?;
        let project = match project {
            Some(p) => read(&p.dir.join(CONFIG_FILE))?,
            None => None,
        };
        Ok(Files { user, project })
    }
}

/// Reads and checks one file; `None` when there is none.
pub fn read(path: &Path) -> Result<Option<(PathBuf, Settings)>> {
    let bad = |what: String| EngineError::Config {
        path: path.to_path_buf(),
        what,
    };
    let text = match std::fs::File::open(path) {
        Ok(f) => {
            use std::io::Read;
            let mut text = String::new();
            f.take(CONFIG_FILE_BYTES_MAX + 1)
                .read_to_string(&mut text)
                .map_err(|e| bad(e.to_string()))?;
            if text.len() as u64 > CONFIG_FILE_BYTES_MAX {
                return Err(bad(format!(
                    "longer than {CONFIG_FILE_BYTES_MAX} bytes: is it the right file?"
                )));
            }
            text
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(bad(e.to_string())),
    };
    Ok(Some((path.to_path_buf(), parse(&text).map_err(bad)?)))
}

/// Parses the text of a configuration file: unknown keys (limits included) are errors
/// naming the key.
pub fn parse(text: &str) -> std::result::Result<Settings, String> {
    let settings: Settings = toml::from_str(text).map_err(|e| {
        let msg = e.message().to_string();
        match e.span() {
            Some(span) => {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                format!("line {line}: {msg}")
            }
            None => msg,
        }
    })?;
    for (model, price) in settings.prices.iter().flatten() {
        if let Some((field, n)) = price.bad_field() {
            return Err(format!(
                "`prices.\"{model}\".{field}` is {n}: give dollars per million tokens, at least 0"
            ));
        }
    }
    if let Some(limits) = &settings.limits {
        let known = default_limits();
        for key in limits.keys() {
            if !known.contains_key(key) {
                return Err(format!(
                    "unknown key `limits.{key}`, expected one of {}",
                    known.keys().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    Ok(settings)
}

fn default_limits() -> serde_json::Map<String, Value> {
    match serde_json::to_value(Catalog::Thoth.limits()) {
        Ok(Value::Object(m)) => m,
        _ => Default::default(),
    }
}

/// Every setting with its value and where it came from, the highest layer first.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Resolved {
    /// `key` (`limits.<name>` for a limit, `prices.<model>` for a model's prices) →
    /// value and source. Keys no layer sets are absent.
    pub entries: BTreeMap<String, (Value, Source)>,
}

/// The defaults of the settings that have one.
pub fn defaults(catalog: Catalog) -> Settings {
    let config = EngineConfig::new(catalog);
    Settings {
        provider: Some(Kind::Openai),
        catalog: Some(catalog),
        search: Some(config.web.search_backend),
        sandbox: Some(config.sandbox),
        capture: Some(config.capture),
        turns_max: Some(crate::agent::TURNS_MAX_DEFAULT),
        guarded_commands: Some(config.guarded_commands.clone()),
        credential_files: Some(config.credential_files.clone()),
        limits: serde_json::to_value(&config.limits)
            .ok()
            .and_then(|v| serde_json::from_value(v).ok()),
        search_index: Some(true),
        ..Settings::default()
    }
}

/// The environment's layer: `CAIRN_MODEL`, `CAIRN_BASE_URL`, `CAIRN_SEARCH_INDEX`; a
/// value that does not parse is an error naming the variable.
pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Vec<(Settings, Source)>> {
    let mut out = Vec::new();
    let mut one = |var: &str, set: &dyn Fn(&mut Settings, String)| {
        if let Some(v) = env(var).filter(|v| !v.is_empty()) {
            let mut s = Settings::default();
            set(&mut s, v);
            out.push((s, Source::Env { var: var.into() }));
        }
    };
    one("CAIRN_MODEL", &|s, v| s.model = Some(v));
    one("CAIRN_BASE_URL", &|s, v| s.base_url = Some(v));
    if let Some(v) = env(SEARCH_INDEX_ENV).filter(|v| !v.is_empty()) {
        let on = match v.to_ascii_lowercase().as_str() {
            "on" | "1" | "true" => true,
            "off" | "0" | "false" => false,
            _ => {
                return Err(EngineError::Config {
                    path: PathBuf::from(format!("env {SEARCH_INDEX_ENV}")),
                    what: format!("{v:?} is neither on nor off: set it to on or off (or unset it)"),
                });
            }
        };
        out.push((
            Settings {
                search_index: Some(on),
                ..Settings::default()
            },
            Source::Env {
                var: SEARCH_INDEX_ENV.into(),
            },
        ));
    }
    Ok(out)
}

/// The `[otel]` table in force: what [`resolve`] gives as `otel`, found without merging
/// everything else (a hook's process wants only this, and the whole merge was a tenth
/// of its time). The table is taken whole from the highest layer that has one; no
/// environment variable and no default sets it. An environment [`resolve`] refuses is
/// refused here too.
pub fn otel_in_force(
    flags: &Settings,
    files: &Files,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<OtelSettings>> {
    let from_env = from_env(env)?;
    Ok(std::iter::once(flags)
        .chain(from_env.iter().map(|(s, _)| s))
        .chain(files.project.iter().map(|(_, s)| s))
        .chain(files.user.iter().map(|(_, s)| s))
        .find_map(|s| s.otel.clone()))
}

/// Merges `flags` > the environment > the project's file > the user's file > the
/// defaults, key by key, and returns the effective settings with each value's source.
pub fn resolve(
    flags: &Settings,
    files: &Files,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(Settings, Resolved)> {
    let mut layers: Vec<(Settings, Source)> = vec![(flags.clone(), Source::Flag)];
    layers.extend(from_env(env)?);
    if let Some((file, s)) = &files.project {
        layers.push((s.clone(), Source::Project { file: file.clone() }));
    }
    if let Some((file, s)) = &files.user {
        layers.push((s.clone(), Source::User { file: file.clone() }));
    }
    // The defaults follow the catalog chosen above them.
    let catalog = layers
        .iter()
        .find_map(|(s, _)| s.catalog)
        .unwrap_or(Catalog::Thoth);
    layers.push((defaults(catalog), Source::Default));
    let mut resolved = Resolved::default();
    for (layer, source) in &layers {
        let Ok(Value::Object(map)) = serde_json::to_value(layer) else {
            continue;
        };
        for (key, value) in map {
            match (key.as_str(), value) {
                // Tables merged entry by entry.
                (table @ ("limits" | "prices"), Value::Object(entries)) => {
                    for (name, v) in entries {
                        resolved
                            .entries
                            .entry(format!("{table}.{name}"))
                            .or_insert((v, source.clone()));
                    }
                }
                (_, value) => {
                    resolved
                        .entries
                        .entry(key)
                        .or_insert((value, source.clone()));
                }
            }
        }
    }
    let mut top = serde_json::Map::new();
    let mut limits = serde_json::Map::new();
    let mut prices = serde_json::Map::new();
    for (key, (value, _)) in &resolved.entries {
        if let Some(name) = key.strip_prefix("limits.") {
            limits.insert(name.to_string(), value.clone());
        } else if let Some(model) = key.strip_prefix("prices.") {
            prices.insert(model.to_string(), value.clone());
        } else {
            top.insert(key.clone(), value.clone());
        }
    }
    top.insert("limits".into(), Value::Object(limits));
    if !prices.is_empty() {
        top.insert("prices".into(), Value::Object(prices));
    }
    let settings: Settings =
        serde_json::from_value(Value::Object(top)).map_err(|e| EngineError::Config {
            path: PathBuf::from("(merged settings)"),
            what: e.to_string(),
        })?;
    Ok((settings, resolved))
}

impl Settings {
    /// Sets what these settings say in a session's configuration.
    pub fn apply(&self, config: &mut EngineConfig) -> Result<()> {
        if let Some(catalog) = self.catalog
            && catalog != config.catalog
        {
            *config = EngineConfig::new(catalog);
        }
        if let Some(limits) = &self.limits {
            let mut merged = match serde_json::to_value(&config.limits) {
                Ok(Value::Object(m)) => m,
                _ => Default::default(),
            };
            for (k, v) in limits {
                merged.insert(k.clone(), Value::from(*v));
            }
            config.limits =
                serde_json::from_value(Value::Object(merged)).map_err(|e| EngineError::Config {
                    path: PathBuf::from("(limits)"),
                    what: e.to_string(),
                })?;
        }
        crate::agent::fit_limits(&mut config.limits, self.context_window);
        if let Some(g) = &self.guarded_commands {
            config.guarded_commands = g.clone();
        }
        if let Some(c) = &self.credential_files {
            config.credential_files = c.clone();
        }
        if let Some(b) = self.search {
            config.web.search_backend = b;
        }
        if let Some(u) = &self.searxng_url {
            config.web.searxng_url = Some(u.clone());
        }
        if let Some(c) = &self.check {
            config.check_command = Some(c.split_whitespace().map(str::to_string).collect());
        }
        if let Some(m) = self.sandbox {
            config.sandbox = m;
        }
        if let Some(on) = self.search_index {
            config.search_index = on;
        }
        if let Some(c) = self.capture {
            config.capture = c;
        }
        if let Some(roots) = &self.sandbox_write_roots {
            config.sandbox_write_roots = roots
                .iter()
                .map(|r| std::path::absolute(r).unwrap_or(r.clone()))
                .collect();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_up_to_its_limit_and_refused_past_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(CONFIG_FILE);
        assert_eq!(read(&path).map(|r| r.is_none()).ok(), Some(true));
        // A comment pads the file to exactly the limit.
        let body = "model = \"m\"\n#";
        let at = format!(
            "{body}{}",
            "x".repeat(CONFIG_FILE_BYTES_MAX as usize - body.len())
        );
        assert_eq!(at.len() as u64, CONFIG_FILE_BYTES_MAX);
        std::fs::write(&path, &at).unwrap_or_else(|e| panic!("{e}"));
        let read_at = read(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_at.and_then(|(_, s)| s.model).as_deref(), Some("m"));
        std::fs::write(&path, format!("{at}x")).unwrap_or_else(|e| panic!("{e}"));
        let e = read(&path).map(|_| ()).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}: longer than {CONFIG_FILE_BYTES_MAX} bytes: is it the right file?",
                path.display()
            )
        );
    }

    #[test]
    fn search_index_comes_from_the_env_over_the_files_over_the_default() {
        let file = |text: &str| parse(text).unwrap_or_else(|e| panic!("{e}"));
        let check = |files: &Files, env: Option<&str>, want: Result<(bool, &str), &str>| {
            let got = resolve(&Settings::default(), files, |k| {
                (k == SEARCH_INDEX_ENV)
                    .then(|| env.map(str::to_string))
                    .flatten()
            })
            .map(|(s, r)| {
                (
                    s.search_index.unwrap_or_else(|| panic!("no search_index")),
                    r.entries["search_index"].1.to_string(),
                )
            })
            .map_err(|e| e.to_string());
            let want = want
                .map(|(on, source)| (on, source.to_string()))
                .map_err(str::to_string);
            assert_eq!(got, want, "env {env:?}");
        };
        let none = Files::default();
        check(&none, None, Ok((true, "default")));
        let files = Files {
            user: Some(("/u".into(), file("search_index = false\n"))),
            project: None,
        };
        check(&files, None, Ok((false, "user /u")));
        let both = Files {
            user: Some(("/u".into(), file("search_index = false\n"))),
            project: Some(("/p".into(), file("search_index = true\n"))),
        };
        check(&both, None, Ok((true, "project /p")));
        check(&both, Some("off"), Ok((false, "env CAIRN_SEARCH_INDEX")));
        check(&files, Some("1"), Ok((true, "env CAIRN_SEARCH_INDEX")));
        check(&files, Some(""), Ok((false, "user /u")));
        check(
            &files,
            Some("maybe"),
            Err(
                "env CAIRN_SEARCH_INDEX: \"maybe\" is neither on nor off: set it to on or off (or unset it)",
            ),
        );
        assert!(parse("search_index = \"off\"\n").is_err_and(|e| e.contains("line 1")));
    }

    #[test]
    fn the_otel_table_is_read_whole_from_the_highest_file() {
        let otel = |text: &str| parse(text).map(|s| s.otel);
        assert_eq!(
            otel(
                "[otel]\nendpoint = \"http://c:4318\"\nprotocol = \"grpc\"\ncapture_content = true\nheaders = { authorization = \"k\" }\n"
            ),
            Ok(Some(OtelSettings {
                endpoint: Some("http://c:4318".into()),
                protocol: Some("grpc".into()),
                headers: Some([("authorization".to_string(), "k".to_string())].into()),
                capture_content: Some(true),
                ..OtelSettings::default()
            }))
        );
        assert!(otel("[otel]\nendpiont = \"x\"\n").is_err_and(|e| e.contains("endpiont")));
        let file = |text: &str| parse(text).unwrap_or_else(|e| panic!("{e}"));
        let files = Files {
            user: Some(("/u".into(), file("[otel]\nendpoint = \"http://u\"\n"))),
            project: Some(("/p".into(), file("[otel]\nendpoint = \"http://p\"\n"))),
        };
        let (s, _) =
            resolve(&Settings::default(), &files, |_| None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.otel.and_then(|o| o.endpoint).as_deref(), Some("http://p"));
    }

    /// `otel_in_force` is `resolve`'s `otel` for every way the layers can hold the
    /// table (flags, either file, both, none; an empty table; other keys beside it),
    /// and refuses what `resolve` refuses.
    #[test]
    fn the_otel_table_in_force_is_the_one_resolve_gives() {
        let file = |text: &str| parse(text).unwrap_or_else(|e| panic!("{e}"));
        let texts = [
            None,
            Some("model = \"m\"\n"),
            Some("[otel]\n"),
            Some("[otel]\nendpoint = \"http://a\"\n"),
            Some("turns_max = 3\n[otel]\nprotocol = \"grpc\"\ncapture_content = false\n"),
        ];
        let flag_tables = [
            None,
            Some(OtelSettings {
                endpoint: Some("http://flag".into()),
                ..OtelSettings::default()
            }),
        ];
        let envs: [&[(&str, &str)]; 3] = [
            &[],
            &[
                ("CAIRN_MODEL", "x"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://e"),
            ],
            &[(SEARCH_INDEX_ENV, "maybe")],
        ];
        let mut compared = 0;
        for user in texts {
            for project in texts {
                for otel in &flag_tables {
                    for env in envs {
                        let files = Files {
                            user: user.map(|t| ("/u".into(), file(t))),
                            project: project.map(|t| ("/p".into(), file(t))),
                        };
                        let flags = Settings {
                            otel: otel.clone(),
                            ..Settings::default()
                        };
                        let env = |k: &str| {
                            env.iter()
                                .find(|(n, _)| *n == k)
                                .map(|(_, v)| (*v).to_string())
                        };
                        let whole = resolve(&flags, &files, env).map(|(s, _)| s.otel);
                        let found = otel_in_force(&flags, &files, env);
                        match (&whole, &found) {
                            (Ok(a), Ok(b)) => assert_eq!(a, b, "{user:?} {project:?} {otel:?}"),
                            (Err(_), Err(_)) => {}
                            _ => panic!("{user:?} {project:?} {otel:?}: {whole:?} {found:?}"),
                        }
                        compared += 1;
                    }
                }
            }
        }
        assert_eq!(compared, 5 * 5 * 2 * 3);
    }

    #[test]
    fn unknown_keys_are_named() {
        let check = |text: &str, expected: &str| {
            let got = parse(text).map(|_| ()).unwrap_err();
            assert!(got.contains(expected), "{got}");
        };
        check("modle = \"x\"\n", "line 1: unknown field `modle`");
        check(
            "model = \"x\"\n[limits]\nread_bytes = 3\n",
            "unknown key `limits.read_bytes`",
        );
        check("provider = \"nope\"\n", "line 1: unknown variant `nope`");
    }

    #[test]
    fn prices_merge_model_by_model_and_a_bad_one_is_named() {
        let file = |text: &str| parse(text).unwrap_or_else(|e| panic!("{e}"));
        let files = Files {
            user: Some((
                "/u".into(),
                file(
                    "[prices.\"m-1\"]\ninput_per_mtok = 3\noutput_per_mtok = 15.0\n[prices.m-2]\ninput_per_mtok = 1\noutput_per_mtok = 2\ncached_per_mtok = 0.1\n",
                ),
            )),
            project: Some((
                "/p".into(),
                file("[prices.m-1]\ninput_per_mtok = 0\noutput_per_mtok = 0\n"),
            )),
        };
        let (s, r) =
            resolve(&Settings::default(), &files, |_| None).unwrap_or_else(|e| panic!("{e}"));
        let price = |i: f64, o: f64, c: Option<f64>| Price {
            input_per_mtok: i,
            output_per_mtok: o,
            cached_per_mtok: c,
        };
        assert_eq!(
            s.prices,
            Some(BTreeMap::from([
                ("m-1".to_string(), price(0.0, 0.0, None)),
                ("m-2".to_string(), price(1.0, 2.0, Some(0.1))),
            ]))
        );
        assert_eq!(r.entries["prices.m-1"].1.to_string(), "project /p");
        assert_eq!(r.entries["prices.m-2"].1.to_string(), "user /u");
        let (s, r) = resolve(&Settings::default(), &Files::default(), |_| None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((s.prices, r.entries.contains_key("prices")), (None, false));
        let check = |text: &str, expected: &str| {
            assert_eq!(parse(text).map(|_| ()), Err(expected.to_string()), "{text}");
        };
        check(
            "[prices.m-1]\ninput_per_mtok = -1\noutput_per_mtok = 2\n",
            "`prices.\"m-1\".input_per_mtok` is -1: give dollars per million tokens, at least 0",
        );
        check(
            "[prices.m-1]\ninput_per_mtok = 1\noutput_per_mtok = nan\n",
            "`prices.\"m-1\".output_per_mtok` is NaN: give dollars per million tokens, at least 0",
        );
        // At the limit: 0 is a price.
        assert!(
            parse("[prices.m-1]\ninput_per_mtok = 0\noutput_per_mtok = 0\ncached_per_mtok = 0\n")
                .is_ok()
        );
        let e = parse("[prices.m-1]\ninput_per_mtok = 1\n").unwrap_err();
        assert!(e.contains("missing field `output_per_mtok`"), "{e}");
        let e = parse(
            "[prices.m-1]\ninput_per_mtok = 1\noutput_per_mtok = 1\ncached_input_per_mtok = 1\n",
        )
        .unwrap_err();
        assert!(
            e.contains("line 4: unknown field `cached_input_per_mtok`"),
            "{e}"
        );
    }

    #[test]
    fn flags_beat_env_beat_project_beat_user_beat_defaults() {
        let file = |text: &str| parse(text).unwrap_or_else(|e| panic!("{e}"));
        let files = Files {
            user: Some((
                "/u".into(),
                file(
                    "model = \"user\"\nbase_url = \"http://u\"\nsearch = \"none\"\ncheck = \"make\"\n[limits]\nread_lines_max = 7\n",
                ),
            )),
            project: Some((
                "/p".into(),
                file("model = \"project\"\nsearch = \"searxng\"\n[limits]\nread_lines_max = 9\n"),
            )),
        };
        let flags = Settings {
            check: Some("cargo check".into()),
            ..Settings::default()
        };
        let env = |v: &str| (v == "CAIRN_BASE_URL").then(|| "http://env".to_string());
        let (s, r) = resolve(&flags, &files, env).unwrap_or_else(|e| panic!("{e}"));
        let source = |k: &str| r.entries[k].1.to_string();
        assert_eq!(s.check.as_deref(), Some("cargo check"));
        assert_eq!(source("check"), "flag");
        assert_eq!(s.base_url.as_deref(), Some("http://env"));
        assert_eq!(source("base_url"), "env CAIRN_BASE_URL");
        assert_eq!(s.model.as_deref(), Some("project"));
        assert_eq!(source("model"), "project /p");
        assert_eq!(s.search, Some(SearchBackend::Searxng));
        assert_eq!(source("limits.read_lines_max"), "project /p");
        assert_eq!(s.limits.as_ref().map(|l| l["read_lines_max"]), Some(9));
        assert_eq!(source("provider"), "default");
        assert_eq!(source("limits.read_file_bytes_max"), "default");
        let mut config = EngineConfig::new(Catalog::Thoth);
        s.apply(&mut config).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.limits.read_lines_max, 9);
        assert_eq!(
            config.check_command,
            Some(vec!["cargo".to_string(), "check".to_string()])
        );
    }
}
