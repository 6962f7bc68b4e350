//! The network: the hosts a session asked for, its fetches and its searches.

use std::collections::BTreeMap;

use cairn_core::Record;
use cairn_core::event::{Event, WebFetched};
use serde::Serialize;

use super::Fold;

/// What the session reached on the network.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Network {
    /// Hosts asked for, with how many fetches each.
    pub hosts: BTreeMap<String, u64>,
    pub fetches: Vec<FetchEntry>,
    pub searches: Vec<SearchEntry>,
}

/// One fetch.
#[derive(Debug, Clone, Serialize)]
pub struct FetchEntry {
    pub seq: u64,
    pub call: String,
    /// The host as asked for: as written in `url`.
    pub host: String,
    /// The host as resolved, when it differs: the URL parser's reading of it
    /// (`0x7f000001` is `127.0.0.1`), or the host the answer came from after redirects.
    pub resolved_host: Option<String>,
    pub url: String,
    pub final_url: Option<String>,
    pub status: Option<u16>,
    pub bytes: u64,
    pub error: Option<String>,
}

/// One search.
#[derive(Debug, Clone, Serialize)]
pub struct SearchEntry {
    pub seq: u64,
    pub call: String,
    pub query: String,
    pub status: String,
}

/// The network, from each `web_fetched`, and the searches: the calls of a tool whose
/// effects name a search query field, with the status their `tool_finished` gives.
#[derive(Debug, Default)]
pub(super) struct NetworkFold(Network);

impl NetworkFold {
    pub(super) fn finish(self) -> Network {
        self.0
    }
}

impl Fold for NetworkFold {
    fn apply(&mut self, r: &Record) {
        let net = &mut self.0;
        match &r.event {
            Event::WebFetched(w) => {
                // Hosts as asked for: a redirect's target is shown with its fetch.
                *net.hosts.entry(host_of(&w.url)).or_default() += 1;
                net.fetches.push(fetch_entry(r.seq, w));
            }
            Event::ToolStarted {
                call, tool, input, ..
            } => {
                if let Some(field) = cairn_tools::effects_of(tool).and_then(|e| e.search_query)
                    && let Some(q) = input.get(field).and_then(|q| q.as_str())
                {
                    net.searches.push(SearchEntry {
                        seq: r.seq,
                        call: call.clone(),
                        query: q.to_string(),
                        status: "unfinished".into(),
                    });
                }
            }
            Event::ToolFinished(f) => {
                for s in net.searches.iter_mut().filter(|s| s.call == f.call) {
                    s.status = f.status.as_str().to_string();
                }
            }
            _ => {}
        }
    }
}

fn fetch_entry(seq: u64, w: &WebFetched) -> FetchEntry {
    let host = host_of(&w.url);
    let parsed = |u: &str| {
        url::Url::parse(u)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
    };
    let resolved_host = w
        .final_url
        .as_deref()
        .and_then(parsed)
        .or_else(|| parsed(&w.url))
        .filter(|h| *h != host && Some(h.as_str()) != without_port(&host));
    FetchEntry {
        seq,
        call: w.call.clone(),
        host,
        resolved_host,
        url: w.url.clone(),
        final_url: w.final_url.clone(),
        status: w.status,
        bytes: w.bytes,
        error: w.error.clone(),
    }
}

/// The host of a URL (what is between `://` and the next `/`, `?` or `#`, without a
/// user part); the whole text when it has no scheme.
pub fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, h)| h)
        .to_string()
}

/// `host` without its `:port`, if it has one.
fn without_port(host: &str) -> Option<&str> {
    host.rsplit_once(':')
        .filter(|(h, p)| {
            !h.ends_with(':') && !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())
        })
        .map(|(h, _)| h)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::testing::{finished, rec, run, started};
    use super::*;

    fn fetched(seq: u64, call: &str, url: &str, more: Value) -> Record {
        let mut event = json!({"type": "web_fetched", "call": call, "url": url});
        if let (Some(e), Value::Object(more)) = (event.as_object_mut(), more) {
            e.extend(more);
        }
        rec(seq, seq, event)
    }

    #[test]
    fn host_of_takes_the_authority_without_user() {
        assert_eq!(
            host_of("https://u:p@example.org:8080/a?b"),
            "example.org:8080"
        );
        assert_eq!(host_of("http://0x7f000001/admin"), "0x7f000001");
        assert_eq!(host_of("example.org"), "example.org");
    }

    #[test]
    fn fetches_count_hosts_as_asked_for_and_show_the_host_resolved() {
        let records = [
            fetched(
                1,
                "f1",
                "http://0x7f000001/admin",
                json!({"status": 200, "bytes": 12}),
            ),
            fetched(
                2,
                "f2",
                "https://example.org:8443/a",
                json!({"status": 200}),
            ),
            fetched(
                3,
                "f3",
                "https://example.org:8443/b",
                json!({"final_url": "https://cdn.example.net/b", "status": 200}),
            ),
            fetched(
                4,
                "f4",
                "https://down.example/",
                json!({"error": "refused"}),
            ),
        ];
        let net = run(NetworkFold::default(), &records).finish();
        assert_eq!(
            net.hosts.into_iter().collect::<Vec<_>>(),
            [
                ("0x7f000001".to_string(), 1),
                ("down.example".to_string(), 1),
                ("example.org:8443".to_string(), 2),
            ]
        );
        let rows: Vec<_> = net
            .fetches
            .iter()
            .map(|f| {
                (
                    f.seq,
                    f.host.as_str(),
                    f.resolved_host.as_deref(),
                    f.status,
                    f.error.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (1, "0x7f000001", Some("127.0.0.1"), Some(200), None),
                // The port alone differs: the same host.
                (2, "example.org:8443", None, Some(200), None),
                (
                    3,
                    "example.org:8443",
                    Some("cdn.example.net"),
                    Some(200),
                    None
                ),
                (4, "down.example", None, None, Some("refused")),
            ]
        );
        assert_eq!(net.fetches[0].bytes, 12);
        assert!(net.searches.is_empty());
    }

    #[test]
    fn a_search_is_a_call_of_a_tool_with_a_query_and_takes_its_status() {
        let records = [
            started(1, 1, "s1", "web_search", json!({"query": "rust folds"})),
            started(2, 2, "s2", "web_search", json!({"query": "never ended"})),
            // Not a search tool, or no query: no search.
            started(3, 3, "r", "read_file", json!({"query": "a.txt"})),
            started(4, 4, "s3", "web_search", json!({})),
            finished(5, 5, "s1", "timeout", "no answer"),
            finished(6, 6, "r", "error", ""),
        ];
        let net = run(NetworkFold::default(), &records).finish();
        let rows: Vec<_> = net
            .searches
            .iter()
            .map(|s| (s.seq, s.call.as_str(), s.query.as_str(), s.status.as_str()))
            .collect();
        assert_eq!(
            rows,
            [
                (1, "s1", "rust folds", "timeout"),
                (2, "s2", "never ended", "unfinished"),
            ]
        );
        assert!(net.hosts.is_empty() && net.fetches.is_empty());
    }
}
