//! What the web tools share: the guard against private-network targets, a fetch that
//! follows redirects itself (checking every hop), refuses binary and oversized answers
//! and returns readable text, and the parsers of the search backends' answers.
//!
//! The guard resolves the name and refuses when ANY address is loopback, private,
//! link-local, carrier-grade NAT, unique-local, multicast, unspecified or reserved, or an
//! IPv4-mapped/compatible/translated form of one. Numeric spellings (`2130706433`,
//! `0177.0.0.1`, `0x7f000001`, `127.1`) are parsed by the URL parser (WHATWG rules) into
//! the address they mean before the check. The connection then goes to the addresses
//! checked (pinned), so a second DNS answer cannot swap in another.

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

pub use cairn_tools::web::{
    Fetch, SearchBackend, SearchError, SearchResult, UNTRUSTED_BEGIN, UNTRUSTED_END, WebConfig,
    normalise,
};
use reqwest::Url;

const USER_AGENT: &str = concat!("cairn/", env!("CARGO_PKG_VERSION"));

/// Why an address is refused, or `None` when it is public.
pub fn refused_ip(ip: IpAddr, allow_loopback: bool) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refused_v4(v4, allow_loopback),
        IpAddr::V6(v6) => refused_v6(v6, allow_loopback),
    }
}

fn refused_v4(ip: Ipv4Addr, allow_loopback: bool) -> Option<&'static str> {
    let [a, b, _, _] = ip.octets();
    if ip.is_loopback() {
        return (!allow_loopback).then_some("loopback");
    }
    if a == 0 {
        return Some("unspecified (0.0.0.0/8)");
    }
    if ip.is_private() {
        return Some("private");
    }
    if ip.is_link_local() {
        return Some("link-local");
    }
    if a == 100 && (b & 0xc0) == 64 {
        return Some("carrier-grade NAT (100.64.0.0/10)");
    }
    if ip.is_multicast() {
        return Some("multicast");
    }
    if ip.is_broadcast() || a >= 240 {
        return Some("reserved");
    }
    if a == 192 && b == 0 && ip.octets()[2] == 0 {
        return Some("reserved (192.0.0.0/24)");
    }
    if a == 198 && (b & 0xfe) == 18 {
        return Some("reserved (198.18.0.0/15)");
    }
    None
}

fn refused_v6(ip: Ipv6Addr, allow_loopback: bool) -> Option<&'static str> {
    let seg = ip.segments();
    if ip.is_loopback() {
        return (!allow_loopback).then_some("loopback");
    }
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d) and NAT64
    // (64:ff9b::a.b.c.d) carry an IPv4 address: judge that one.
    let embedded =
        |s: &[u16]| Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if seg[..5] == [0, 0, 0, 0, 0] && (seg[5] == 0xffff || seg[5] == 0) {
        return refused_v4(embedded(&seg), allow_loopback).or(None);
    }
    if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0, 0, 0, 0] {
        return refused_v4(embedded(&seg), allow_loopback);
    }
    if seg[0] == 0x2002 {
        // 6to4: the IPv4 address is in segments 1 and 2.
        let v4 = Ipv4Addr::new(
            (seg[1] >> 8) as u8,
            seg[1] as u8,
            (seg[2] >> 8) as u8,
            seg[2] as u8,
        );
        return refused_v4(v4, allow_loopback);
    }
    if (seg[0] & 0xfe00) == 0xfc00 {
        return Some("unique-local (fc00::/7)");
    }
    if (seg[0] & 0xffc0) == 0xfe80 || (seg[0] & 0xffc0) == 0xfec0 {
        return Some("link-local");
    }
    if (seg[0] & 0xff00) == 0xff00 {
        return Some("multicast");
    }
    None
}

/// Why a URL may not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("invalid URL '{0}': {1}")]
    BadUrl(String, String),
    #[error("only http and https URLs can be fetched, not {0}:")]
    Scheme(String),
    #[error("refused: {host} is a private-network target ({addr} is {why})")]
    Private {
        host: String,
        addr: IpAddr,
        why: &'static str,
    },
    #[error("cannot resolve {0}: {1}")]
    Dns(String, String),
}

/// Checks a URL: scheme, then every address its host resolves to. Returns the host and
/// the addresses to connect to.
pub fn check_url(url: &Url, allow_loopback: bool) -> Result<(String, Vec<SocketAddr>), Refused> {
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(Refused::Scheme(url.scheme().to_string()));
    }
    let port = url.port_or_known_default().unwrap_or(80);
    let (host, addrs): (String, Vec<SocketAddr>) = match url.host() {
        None => return Err(Refused::BadUrl(url.to_string(), "no host".into())),
        Some(url::Host::Ipv4(ip)) => (ip.to_string(), vec![SocketAddr::new(ip.into(), port)]),
        Some(url::Host::Ipv6(ip)) => (ip.to_string(), vec![SocketAddr::new(ip.into(), port)]),
        Some(url::Host::Domain(d)) => {
            let name = d.trim_end_matches('.');
            let addrs: Vec<SocketAddr> = (name, port)
                .to_socket_addrs()
                .map_err(|e| Refused::Dns(d.to_string(), e.to_string()))?
                .collect();
            if addrs.is_empty() {
                return Err(Refused::Dns(d.to_string(), "no addresses".into()));
            }
            (d.to_string(), addrs)
        }
    };
    for a in &addrs {
        if let Some(why) = refused_ip(a.ip(), allow_loopback) {
            return Err(Refused::Private {
                host: host.clone(),
                addr: a.ip(),
                why,
            });
        }
    }
    Ok((host, addrs))
}

/// Fetches a public page: checks every hop, follows at most `redirects_max` redirects,
/// refuses binary content and bodies over `fetch_bytes_max`, within `fetch_timeout_ms`.
pub fn fetch(raw: &str, cfg: &WebConfig) -> Fetch {
    let mut out = Fetch {
        url: raw.to_string(),
        ..Fetch::default()
    };
    if let Err(e) = fetch_into(raw, cfg, &mut out) {
        out.error = Some(e.to_string());
    }
    out
}

/// Why a fetch gave no page. Its text is what the model is answered (and what
/// `web_fetched` records).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The guard refused the URL or one of its redirects.
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("timed out after {ms} ms (fetch_timeout_ms)")]
    Timeout { ms: u64 },
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    #[error("cannot fetch {url}: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("redirect {status} without a location")]
    NoLocation { status: u16 },
    #[error("bad redirect location '{location}': {detail}")]
    BadLocation { location: String, detail: String },
    #[error("too many redirects (more than redirects_max = {max})")]
    Redirects { max: u32 },
    #[error("binary content ({content_type}) refused: only text and HTML pages are read")]
    Binary { content_type: String },
    /// Refused before reading: the announced length is over the limit.
    #[error("response of {len} bytes is over fetch_bytes_max ({max} bytes)")]
    TooLong { len: u64, max: u64 },
    /// Cut while reading: the body went over the limit.
    #[error("response is over fetch_bytes_max ({max} bytes): stopped reading")]
    Cut { max: u64 },
    #[error("reading {url}: {detail}")]
    Read { url: String, detail: String },
    #[error("binary content (no content type, NUL bytes) refused")]
    BinaryNul,
}

fn fetch_into(raw: &str, cfg: &WebConfig, out: &mut Fetch) -> Result<(), FetchError> {
    let deadline = Instant::now() + Duration::from_millis(cfg.fetch_timeout_ms);
    let mut url =
        Url::parse(raw.trim()).map_err(|e| Refused::BadUrl(raw.to_string(), e.to_string()))?;
    loop {
        let (host, addrs) = check_url(&url, cfg.allow_loopback_for_tests)?;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(FetchError::Timeout {
                ms: cfg.fetch_timeout_ms,
            });
        }
        let mut builder = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(left)
            .user_agent(USER_AGENT);
        if matches!(url.host(), Some(url::Host::Domain(_))) {
            builder = builder.resolve_to_addrs(&host, &addrs);
        }
        let client = builder
            .build()
            .map_err(|e| FetchError::Client(e.to_string()))?;
        let resp = client
            .get(url.clone())
            .header(
                "accept",
                "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
            )
            .send()
            .map_err(|e| {
                if e.is_timeout() {
                    FetchError::Timeout {
                        ms: cfg.fetch_timeout_ms,
                    }
                } else {
                    FetchError::Unreachable {
                        url: url.to_string(),
                        detail: error_chain(&e),
                    }
                }
            })?;
        out.status = Some(resp.status().as_u16());
        out.final_url = Some(url.to_string());
        if resp.status().is_redirection() {
            let Some(loc) = resp.headers().get("location").and_then(|l| l.to_str().ok()) else {
                return Err(FetchError::NoLocation {
                    status: resp.status().as_u16(),
                });
            };
            let next = url.join(loc).map_err(|e| FetchError::BadLocation {
                location: loc.to_string(),
                detail: e.to_string(),
            })?;
            out.redirects.push(next.to_string());
            if out.redirects.len() as u32 > cfg.redirects_max {
                return Err(FetchError::Redirects {
                    max: cfg.redirects_max,
                });
            }
            url = next;
            continue;
        }
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|c| c.to_str().ok())
            .map(|c| c.trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty());
        out.content_type = ct.clone();
        if let Some(ct) = &ct
            && !textual(ct)
        {
            return Err(FetchError::Binary {
                content_type: ct.clone(),
            });
        }
        if let Some(len) = resp.content_length()
            && len > cfg.fetch_bytes_max
        {
            return Err(FetchError::TooLong {
                len,
                max: cfg.fetch_bytes_max,
            });
        }
        let mut body = Vec::new();
        resp.take(cfg.fetch_bytes_max + 1)
            .read_to_end(&mut body)
            .map_err(|e| FetchError::Read {
                url: url.to_string(),
                detail: e.to_string(),
            })?;
        if body.len() as u64 > cfg.fetch_bytes_max {
            out.body = body;
            out.body.truncate(cfg.fetch_bytes_max as usize);
            return Err(FetchError::Cut {
                max: cfg.fetch_bytes_max,
            });
        }
        if ct.is_none() && body.iter().take(1024).any(|&b| b == 0) {
            out.body = body;
            return Err(FetchError::BinaryNul);
        }
        let html = ct.as_deref().is_some_and(|c| c.contains("html"))
            || (ct.is_none() && looks_like_html(&body));
        out.text = if html {
            html_to_text(&body)
        } else {
            String::from_utf8_lossy(&body).into_owned()
        };
        out.body = body;
        return Ok(());
    }
}

fn textual(ct: &str) -> bool {
    let essence = ct.split(';').next().unwrap_or("").trim();
    essence.starts_with("text/")
        || essence.ends_with("+xml")
        || essence.ends_with("+json")
        || matches!(
            essence,
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/xhtml+xml"
                | ""
        )
}

fn looks_like_html(body: &[u8]) -> bool {
    let start = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    start.contains("<html") || start.contains("<!doctype html")
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// Readable text of an HTML page (html2text), with runs of blank lines squeezed.
pub fn html_to_text(html: &[u8]) -> String {
    let text = html2text::config::plain()
        .string_from_read(html, 100)
        .unwrap_or_else(|_| String::from_utf8_lossy(html).into_owned());
    let mut out = String::new();
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_string()
}

/// Results of DuckDuckGo's HTML endpoint (ads skipped; its redirect links unwrapped).
pub fn parse_duckduckgo(html: &str) -> Vec<SearchResult> {
    let doc = scraper::Html::parse_document(html);
    let (Ok(result), Ok(title), Ok(snippet)) = (
        scraper::Selector::parse(".result"),
        scraper::Selector::parse("a.result__a"),
        scraper::Selector::parse(".result__snippet"),
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for r in doc.select(&result) {
        if r.value().classes().any(|c| c == "result--ad") {
            continue;
        }
        let Some(a) = r.select(&title).next() else {
            continue;
        };
        let href = a.value().attr("href").unwrap_or("");
        let url = unwrap_ddg(href);
        out.push(SearchResult {
            title: a.text().collect::<String>(),
            url,
            snippet: r
                .select(&snippet)
                .next()
                .map(|s| s.text().collect::<String>())
                .unwrap_or_default(),
        });
    }
    out
}

/// Why a DuckDuckGo page gave no results, when it is not the engine's own "no results"
/// page (thoth's reading): results are scraped off one page of HTML, and the day it
/// changes shape, or the engine turns the request away, every search would otherwise
/// look like "there is no such thing". `None`: a page that says there are no results.
pub fn ddg_empty(html: &str) -> Option<&'static str> {
    let low = html.to_ascii_lowercase();
    // Being turned away comes first: such a page carries none of the rest.
    if [
        "anomaly",
        "captcha",
        "unusual traffic",
        "are you a robot",
        "/challenge",
    ]
    .iter()
    .any(|m| low.contains(m))
    {
        return Some("the search engine refused the request (rate limit or a captcha)");
    }
    if low.contains("no-results") || low.contains("no results found") {
        return None;
    }
    // A results page is tens of kilobytes: anything this short is a redirect, an error
    // page or an empty body.
    if html.len() < DDG_PAGE_BYTES_MIN {
        return Some("the reply was not a results page at all");
    }
    Some(
        "the results page is no longer in the shape this code reads, so the scraper needs updating",
    )
}

/// Bytes under which a DuckDuckGo reply cannot be a results page.
const DDG_PAGE_BYTES_MIN: usize = 2_000;

/// `//duckduckgo.com/l/?uddg=<target>&rut=…` → the target.
fn unwrap_ddg(href: &str) -> String {
    let Ok(u) = Url::parse("https://duckduckgo.com").and_then(|b| b.join(href)) else {
        return href.to_string();
    };
    if u.path().starts_with("/l/")
        && let Some((_, v)) = u.query_pairs().find(|(k, _)| k == "uddg")
    {
        return v.into_owned();
    }
    u.to_string()
}

/// Results of SearXNG's JSON API.
pub fn parse_searxng(json: &str) -> Result<Vec<SearchResult>, SearchError> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| SearchError::NotJson(e.to_string()))?;
    let results = v["results"].as_array().ok_or(SearchError::NoResults)?;
    Ok(results
        .iter()
        .map(|r| SearchResult {
            title: r["title"].as_str().unwrap_or("").to_string(),
            url: r["url"].as_str().unwrap_or("").to_string(),
            snippet: r["content"].as_str().unwrap_or("").to_string(),
        })
        .collect())
}

/// GETs a search backend's answer (a configured endpoint: not subject to the
/// private-network guard, since a SearXNG instance is often local).
pub fn backend_get(url: &Url, cfg: &WebConfig) -> Result<(u16, Vec<u8>), SearchError> {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_millis(cfg.fetch_timeout_ms))
        .user_agent(USER_AGENT)
        .build()
        .map_err(|e| SearchError::Client(e.to_string()))?;
    let resp = client
        .get(url.clone())
        .send()
        .map_err(|e| SearchError::Unreachable {
            host: url.host_str().unwrap_or("").to_string(),
            detail: error_chain(&e),
        })?;
    let status = resp.status().as_u16();
    let mut body = Vec::new();
    resp.take(cfg.fetch_bytes_max)
        .read_to_end(&mut body)
        .map_err(|e| SearchError::Read(e.to_string()))?;
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_page_says_whether_it_is_an_answer_or_a_breakage() {
        let big = "x".repeat(50_000);
        let refused = Some("the search engine refused the request (rate limit or a captcha)");
        assert_eq!(ddg_empty("<html>anomaly detected</html>"), refused);
        assert_eq!(ddg_empty("<html>please solve the CAPTCHA</html>"), refused);
        assert_eq!(
            ddg_empty("<html>unusual traffic from your network</html>"),
            refused
        );
        assert_eq!(
            ddg_empty(&format!("<div class=\"no-results\">{big}</div>")),
            None
        );
        assert_eq!(ddg_empty("No results found for that query."), None);
        assert_eq!(
            ddg_empty(&format!("<div class=\"result__body_v2\">{big}</div>")),
            Some(
                "the results page is no longer in the shape this code reads, so the scraper needs updating"
            )
        );
        let not_a_page = Some("the reply was not a results page at all");
        assert_eq!(ddg_empty(""), not_a_page);
        assert_eq!(ddg_empty("<html><body>502</body></html>"), not_a_page);
        // At and past the size a results page has at least.
        assert_eq!(ddg_empty(&"x".repeat(DDG_PAGE_BYTES_MIN - 1)), not_a_page);
        assert_ne!(ddg_empty(&"x".repeat(DDG_PAGE_BYTES_MIN)), not_a_page);
        // Through the backend: results are results, and an unreadable page an error.
        use cairn_tools::web::Web as _;
        let web = HttpWeb;
        assert_eq!(
            web.parse_results(SearchBackend::Duckduckgo, "<html>captcha</html>"),
            Err(SearchError::Unreadable(
                "the search engine refused the request (rate limit or a captcha)"
            ))
        );
        assert_eq!(
            web.parse_results(
                SearchBackend::Duckduckgo,
                "No results found for that query."
            ),
            Ok(vec![])
        );
    }

    #[test]
    fn fetch_errors_read_as_the_model_sees_them() {
        let cases = [
            (
                FetchError::Refused(Refused::Scheme("ftp".into())),
                "only http and https URLs can be fetched, not ftp:",
            ),
            (
                FetchError::Timeout { ms: 10 },
                "timed out after 10 ms (fetch_timeout_ms)",
            ),
            (
                FetchError::Client("tls".into()),
                "cannot build the HTTP client: tls",
            ),
            (
                FetchError::Unreachable {
                    url: "https://a.example/".into(),
                    detail: "refused".into(),
                },
                "cannot fetch https://a.example/: refused",
            ),
            (
                FetchError::NoLocation { status: 302 },
                "redirect 302 without a location",
            ),
            (
                FetchError::BadLocation {
                    location: "::".into(),
                    detail: "bad".into(),
                },
                "bad redirect location '::': bad",
            ),
            (
                FetchError::Redirects { max: 5 },
                "too many redirects (more than redirects_max = 5)",
            ),
            (
                FetchError::Binary {
                    content_type: "image/png".into(),
                },
                "binary content (image/png) refused: only text and HTML pages are read",
            ),
            (
                FetchError::TooLong { len: 9, max: 8 },
                "response of 9 bytes is over fetch_bytes_max (8 bytes)",
            ),
            (
                FetchError::Cut { max: 8 },
                "response is over fetch_bytes_max (8 bytes): stopped reading",
            ),
            (
                FetchError::Read {
                    url: "https://a.example/".into(),
                    detail: "reset".into(),
                },
                "reading https://a.example/: reset",
            ),
            (
                FetchError::BinaryNul,
                "binary content (no content type, NUL bytes) refused",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
        assert_eq!(
            parse_searxng("{"),
            Err(SearchError::NotJson(
                "EOF while parsing an object at line 1 column 1".into()
            ))
        );
        assert_eq!(parse_searxng("{}"), Err(SearchError::NoResults));
    }

    #[test]
    fn ddg_links_are_unwrapped() {
        assert_eq!(
            unwrap_ddg("//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2Fa%3Fb%3D1&rut=x"),
            "https://example.org/a?b=1"
        );
        assert_eq!(unwrap_ddg("https://example.org/"), "https://example.org/");
    }
}

/// The network through reqwest: what the engine gives the web tools.
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpWeb;

impl cairn_tools::web::Web for HttpWeb {
    fn fetch(&self, url: &str, cfg: &WebConfig) -> Fetch {
        fetch(url, cfg)
    }
    fn backend_get(&self, url: &Url, cfg: &WebConfig) -> Result<(u16, Vec<u8>), SearchError> {
        backend_get(url, cfg)
    }
    fn parse_results(
        &self,
        backend: SearchBackend,
        body: &str,
    ) -> Result<Vec<SearchResult>, SearchError> {
        match backend {
            SearchBackend::Searxng => parse_searxng(body),
            _ => {
                let results = parse_duckduckgo(body);
                match results.is_empty().then(|| ddg_empty(body)).flatten() {
                    Some(why) => Err(SearchError::Unreadable(why)),
                    None => Ok(results),
                }
            }
        }
    }
}
