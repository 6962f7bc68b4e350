//! web_search (thndrs, thoth): search with the configured backend (duckduckgo, searxng
//! or none); results capped and normalised (title, url, snippet), followed by
//! best-effort extraction of the readable text of the first public result pages, each
//! failure reported with its result. Every page fetched is recorded.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::tool::{Ctx, Effects, Fetches, ToolOutput, TypedTool};
use crate::web::{self, Fetch, SearchBackend};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Search query.
    pub query: String,
    /// Optional result cap (at most the configured search_results_max).
    pub max_results: Option<u32>,
}

pub struct WebSearch;

impl TypedTool for WebSearch {
    type Input = Input;
    const NAME: &'static str = "web_search";
    const DESCRIPTION: &'static str = "Search the web for current information when the workspace does not contain the answer. Results are capped and normalised (title, url, snippet) and followed by best-effort readable text of the first public result pages; private result URLs are reported as per-result extraction failures.";
    const MUTATING: bool = false;
    const EFFECTS: Effects = Effects {
        external: true,
        search_query: Some("query"),
        fetches: Fetches::Search,
        ..Effects::NONE
    };

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let cfg = ctx.web_config.clone();
        if input.query.trim().is_empty() {
            return Ok(ToolOutput::error("query is empty"));
        }
        if let Some(why) = query_leak(&input.query) {
            return Ok(ToolOutput::error(format!(
                "refused to search: {why}. A search query is the one thing this tool sends off this machine, so it carries a few words and nothing else: search for the error text, the API name or the symptom instead of the material itself"
            )));
        }
        let max = input
            .max_results
            .unwrap_or(cfg.search_results_max)
            .clamp(1, cfg.search_results_max.max(1)) as usize;
        let url = match search_url(&cfg, &input.query) {
            Ok(u) => u,
            Err(out) => return Ok(out),
        };
        let (status, body) = match ctx.web.backend_get(&url, &cfg) {
            Ok(x) => x,
            Err(e) => {
                web::record(
                    ctx,
                    &Fetch {
                        url: url.to_string(),
                        error: Some(e.to_string()),
                        ..Fetch::default()
                    },
                )?;
                return Ok(ToolOutput::error(e.to_string()));
            }
        };
        let text = String::from_utf8_lossy(&body).into_owned();
        let parsed = ctx.web.parse_results(cfg.search_backend, &text);
        let results = match parsed {
            Ok(r) => web::normalise(r, max, cfg.snippet_chars_max),
            Err(e) => {
                web::record(
                    ctx,
                    &Fetch {
                        url: url.to_string(),
                        final_url: Some(url.to_string()),
                        status: Some(status),
                        body,
                        error: Some(e.to_string()),
                        ..Fetch::default()
                    },
                )?;
                return Ok(ToolOutput::error(e.to_string()));
            }
        };
        let listing: String = results
            .iter()
            .map(|r| format!("{}\n{}\n{}\n", r.title, r.url, r.snippet))
            .collect();
        web::record(
            ctx,
            &Fetch {
                url: url.to_string(),
                final_url: Some(url.to_string()),
                status: Some(status),
                text: listing,
                body,
                ..Fetch::default()
            },
        )?;
        if results.is_empty() {
            return Ok(if (200..300).contains(&status) {
                ToolOutput::ok(format!("no results for '{}'", input.query))
            } else {
                ToolOutput::error(format!(
                    "the search backend answered {status} with no results (rate-limited? try again later or configure searxng)"
                ))
            });
        }
        let mut out = format!("{} results for '{}':\n", results.len(), input.query);
        for (i, r) in results.iter().enumerate() {
            out.push_str(&format!("\n{}. {}\n   {}\n", i + 1, r.title, r.url));
            if !r.snippet.is_empty() {
                out.push_str(&format!("   {}\n", r.snippet));
            }
            if i < cfg.extract_results_max as usize {
                out.push_str(&extract(ctx, &cfg, &r.url)?);
            }
        }
        Ok(ToolOutput::ok(out))
    }
}

/// The backend's URL for `query`; the answer to the model when search is off or
/// not configured.
fn search_url(cfg: &web::WebConfig, query: &str) -> std::result::Result<url::Url, ToolOutput> {
    let url = match cfg.search_backend {
        SearchBackend::None => {
            return Err(ToolOutput::error(
                "web search is off (search = \"none\"): the person running cairn turns it on with `search = \"duckduckgo\"` (or \"searxng\" and a `searxng_url`) in config.toml, the user's or the project's (`cairn config` shows where they are)",
            ));
        }
        SearchBackend::Duckduckgo => {
            url::Url::parse_with_params(&cfg.duckduckgo_url, &[("q", query)])
        }
        SearchBackend::Searxng => match &cfg.searxng_url {
            None => {
                return Err(ToolOutput::error(
                    "search is searxng but no searxng_url is configured: set `searxng_url = \"http://localhost:8888\"` (the instance) in config.toml",
                ));
            }
            Some(base) => url::Url::parse_with_params(
                &format!("{}/search", base.trim_end_matches('/')),
                &[("q", query), ("format", "json")],
            ),
        },
    };
    url.map_err(|e| ToolOutput::error(format!("bad search backend URL: {e}")))
}

/// The page of a result fetched and recorded, as a line of its text (or why it
/// could not be).
fn extract(ctx: &mut Ctx<'_>, cfg: &web::WebConfig, url: &str) -> Result<String> {
    let f = ctx.web.fetch(url, cfg);
    web::record(ctx, &f)?;
    Ok(match (&f.error, f.status) {
        (Some(e), _) => format!("   extraction failed: {e}\n"),
        (None, Some(s)) if !(200..300).contains(&s) => {
            format!("   extraction failed: status {s}\n")
        }
        _ => {
            let t: String = f.text.split_whitespace().collect::<Vec<_>>().join(" ");
            let cut: String = t.chars().take(cfg.extract_chars_max).collect();
            let more = if t.chars().count() > cfg.extract_chars_max {
                "…"
            } else {
                ""
            };
            format!("   extract: {cut}{more}\n")
        }
    })
}

/// Characters of a search query: past this it is content pasted in, not a search.
pub const QUERY_CHARS_MAX: usize = 400;

/// Why a query must not be sent (thoth's rule), if it must not: the shapes a real
/// query never has. A line break (pasted content), more than [`QUERY_CHARS_MAX`]
/// characters, a well-known credential prefix, or a secret's name followed by its value.
pub fn query_leak(q: &str) -> Option<&'static str> {
    if q.contains(['\n', '\r']) {
        return Some("the query has line breaks in it, so it is pasted content and not a search");
    }
    if q.chars().count() > QUERY_CHARS_MAX {
        return Some(
            "the query is far longer than a search query, so it is content and not a search",
        );
    }
    let lower = q.to_ascii_lowercase();
    if lower.contains("-----begin") || lower.contains("-----end") {
        return Some("the query contains something shaped like a credential");
    }
    // Token prefixes, at the start of a word long enough to be a token.
    const PREFIXES: [&str; 6] = ["sk-", "ghp_", "github_pat_", "xoxb-", "xoxp-", "akia"];
    let words = lower.split(|c: char| {
        c.is_whitespace() || matches!(c, '"' | '\'' | '=' | ':' | '(' | ')' | ',')
    });
    for w in words {
        if PREFIXES
            .iter()
            .any(|p| w.starts_with(p) && w.len() >= p.len() + 8)
            || (w.starts_with("eyj") && w.matches('.').count() >= 2)
        {
            return Some("the query contains something shaped like a credential");
        }
    }
    const NAMES: [&str; 8] = [
        "api_key",
        "apikey",
        "secret",
        "password",
        "passwd",
        "private_key",
        "access_token",
        "auth_token",
    ];
    for name in NAMES {
        for (at, _) in lower.match_indices(name) {
            let rest = lower[at + name.len()..].trim_start();
            if let Some(value) = rest.strip_prefix(['=', ':'])
                && !value.trim().is_empty()
            {
                return Some("the query looks like it carries a secret and its value");
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_that_carries_more_than_a_search_is_refused() {
        for ok in [
            "rust tokio mpsc send await",
            "E0382 borrow of moved value",
            "axum 0.7 State extractor example",
            "how to store an api key in rust",
            "eyjafjallajokull eruption",
            "sk-learn pipeline",
        ] {
            assert_eq!(query_leak(ok), None, "{ok}");
        }
        for no in [
            "fn main() {\n    println!(\"hi\");\n}",
            "sk-ant-api03-abcdefghijklmnop",
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "-----BEGIN RSA PRIVATE KEY-----",
            "api_key=8f3d9a2b1c4e5f6a7b8c9d0e1f2a3b4c",
            "PASSWORD: hunter2 why does login fail",
            "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc",
        ] {
            assert!(query_leak(no).is_some(), "{no}");
        }
        // The length limit, at and past it.
        assert_eq!(query_leak(&"a".repeat(QUERY_CHARS_MAX)), None);
        assert!(query_leak(&"a".repeat(QUERY_CHARS_MAX + 1)).is_some());
    }
}
