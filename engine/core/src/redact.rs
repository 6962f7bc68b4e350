//! Deterministic redaction of secrets in what tools are given and give back, before it
//! reaches the model, the log or a blob. Each secret is replaced by a marker naming its
//! kind (`[REDACTED:github_token]`); the number of redactions per kind is recorded with
//! the call. The same input always redacts the same way.
//!
//! File contents kept as blobs for the workspace (manifest, before/after of writes) are
//! not redacted: they are the workspace itself, and checkout and replay must be exact.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// Counts of redactions by kind.
pub type Counts = BTreeMap<String, u32>;

struct Pattern {
    kind: &'static str,
    re: Regex,
    /// The capture group holding the secret (0: the whole match).
    group: usize,
}

fn pattern(kind: &'static str, re: &str, group: usize) -> Option<Pattern> {
    Regex::new(re).ok().map(|re| Pattern { kind, re, group })
}

static PATTERNS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    [
        pattern(
            "private_key",
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
            0,
        ),
        pattern("anthropic_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}", 0),
        pattern("openai_key", r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}", 0),
        pattern("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", 0),
        pattern("github_token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b", 0),
        pattern("github_token", r"\bgithub_pat_[A-Za-z0-9_]{22,}", 0),
        pattern("slack_token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", 0),
        pattern(
            "gitlab_token",
            r"\b(?:glpat|glptt|gldt|glrt|glcbt|gloas|glsoat|glffct|glimt|glagent)-[A-Za-z0-9_\-]{20,}",
            0,
        ),
        pattern("gitlab_token", r"\bGR1348941[A-Za-z0-9_\-]{20,}", 0),
        pattern(
            "stripe_key",
            r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b",
            0,
        ),
        pattern("stripe_key", r"\bwhsec_[A-Za-z0-9]{24,}\b", 0),
        pattern("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}", 0),
        pattern("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", 0),
        pattern("pypi_token", r"\bpypi-[A-Za-z0-9_\-]{50,}", 0),
        pattern("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}\b", 0),
        pattern(
            "sendgrid_key",
            r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}\b",
            0,
        ),
        pattern("twilio_key", r"\bSK[0-9a-fA-F]{32}\b", 0),
        pattern(
            "azure_storage_key",
            r"(?i)\b(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{20,}={0,2})",
            1,
        ),
        // The password of `scheme://user:password@host`.
        pattern(
            "url_password",
            r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]+:([^/\s@]+)@",
            1,
        ),
        pattern(
            "jwt",
            r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
            0,
        ),
        pattern("bearer_token", r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{16,}=*)", 1),
        // A name holding a secret word as a whole `_`/`-` segment (`DB_PASSWORD`,
        // `aws_secret_access_key`, `access_token`, `client_secret`), then `=` or `:`.
        // `max_tokens` or `token_count` are not such names.
        pattern(
            "assignment",
            r#"(?i)\b(?:[a-z0-9]+[_-])*(?:password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?key|private[_-]?key|auth[_-]?token|access[_-]?token|refresh[_-]?token|id[_-]?token|client[_-]?secret|token)(?:[_-](?:access[_-]?key|key|token|secret|value|string|b64|base64))?\b["']?\s*[:=]\s*["']?([^\s"',;&]{4,})"#,
            1,
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
});

/// All the patterns at once, in the same order as [`PATTERNS`].
static PATTERN_SET: LazyLock<Option<regex::RegexSet>> =
    LazyLock::new(|| regex::RegexSet::new(PATTERNS.iter().map(|p| p.re.as_str())).ok());

/// Redacts secrets; built once per session.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Values of environment variables whose names look secret, longest first.
    env_values: Vec<(String, String)>,
}

/// True for names like `GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `DB_PASSWORD`.
pub fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.ends_with("_TOKEN")
        || n.ends_with("_KEY")
        || n.ends_with("_SECRET")
        || n.contains("PASSWORD")
        || n.contains("SECRET_")
}

impl Redactor {
    /// A redactor that knows the given variables (only secret-looking names with values
    /// of 8 characters or more are kept).
    pub fn with_env(vars: impl IntoIterator<Item = (String, String)>) -> Redactor {
        let mut env_values: Vec<(String, String)> = vars
            .into_iter()
            .filter(|(k, v)| secret_name(k) && v.chars().count() >= 8)
            .collect();
        env_values.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        Redactor { env_values }
    }

    /// Adds one value to redact as `[REDACTED:env:<name>]` (8 characters or more).
    pub fn add_value(&mut self, name: &str, value: &str) {
        if value.chars().count() >= 8 && !self.env_values.iter().any(|(_, v)| v == value) {
            self.env_values.push((name.to_string(), value.to_string()));
            self.env_values
                .sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        }
    }

    /// Redacts `text`, adding to `counts`.
    pub fn redact<'a>(&self, text: &'a str, counts: &mut Counts) -> Cow<'a, str> {
        let mut out: Cow<'a, str> = Cow::Borrowed(text);
        for (name, value) in &self.env_values {
            if out.contains(value.as_str()) {
                let n = out.matches(value.as_str()).count() as u32;
                *counts.entry("env_secret".into()).or_default() += n;
                out = Cow::Owned(out.replace(value.as_str(), &format!("[REDACTED:env:{name}]")));
            }
        }
        // One pass over the text says which kinds may be there (most outputs hold no
        // secret at all); only those patterns run again to replace.
        // (Without the set, every pattern runs: never fewer redactions.)
        let hits = PATTERN_SET.as_ref().map(|set| set.matches(&out));
        for (i, p) in PATTERNS.iter().enumerate() {
            if hits.as_ref().is_some_and(|h| !h.matched(i)) {
                continue;
            }
            let mut n = 0u32;
            let replaced =
                p.re.replace_all(&out, |c: &Captures<'_>| {
                    let whole = c.get(0).map_or("", |m| m.as_str());
                    let Some(secret) = c.get(p.group) else {
                        return whole.to_string();
                    };
                    if secret.as_str().starts_with("[REDACTED") {
                        return whole.to_string();
                    }
                    n += 1;
                    let start = secret.start() - c.get(0).map_or(0, |m| m.start());
                    format!(
                        "{}[REDACTED:{}]{}",
                        &whole[..start],
                        p.kind,
                        &whole[start + secret.len()..]
                    )
                })
                .into_owned();
            if n > 0 {
                *counts.entry(p.kind.to_string()).or_default() += n;
                out = Cow::Owned(replaced);
            }
        }
        out
    }

    /// Redacts every string inside a JSON value.
    pub fn redact_json(&self, v: &serde_json::Value, counts: &mut Counts) -> serde_json::Value {
        match v {
            serde_json::Value::String(s) => {
                serde_json::Value::String(self.redact(s, counts).into_owned())
            }
            serde_json::Value::Array(a) => {
                serde_json::Value::Array(a.iter().map(|x| self.redact_json(x, counts)).collect())
            }
            serde_json::Value::Object(m) => serde_json::Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), self.redact_json(x, counts)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: &str, kinds: &[(&str, u32)]) {
        let r = Redactor::with_env([(
            "MY_API_TOKEN".to_string(),
            "tok-very-secret-value".to_string(),
        )]);
        let mut counts = Counts::new();
        assert_eq!(r.redact(input, &mut counts), expected);
        let want: Counts = kinds.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        assert_eq!(counts, want, "{input}");
    }

    #[test]
    fn secrets_of_each_kind_are_redacted() {
        check(
            "key sk-abcdefghijklmnopqrstuvwxyz012345",
            "key [REDACTED:openai_key]",
            &[("openai_key", 1)],
        );
        check(
            "sk-ant-api03-abcdefghijklmnopqrstuv",
            "[REDACTED:anthropic_key]",
            &[("anthropic_key", 1)],
        );
        check(
            "AKIAIOSFODNN7EXAMPLE",
            "[REDACTED:aws_access_key]",
            &[("aws_access_key", 1)],
        );
        check(
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789 and github_pat_11ABCDEFG0123456789_abcdefghij",
            "[REDACTED:github_token] and [REDACTED:github_token]",
            &[("github_token", 2)],
        );
        check(
            "xoxb-1234567890-abcdefghij",
            "[REDACTED:slack_token]",
            &[("slack_token", 1)],
        );
        check(
            "Authorization: Bearer abcdefghijklmnop1234",
            "Authorization: Bearer [REDACTED:bearer_token]",
            &[("bearer_token", 1)],
        );
        check(
            "t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "t=[REDACTED:jwt]",
            &[("jwt", 1)],
        );
        check(
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nrest",
            "[REDACTED:private_key]\nrest",
            &[("private_key", 1)],
        );
        check(
            "password=hunter22 api_key: abcd1234",
            "password=[REDACTED:assignment] api_key: [REDACTED:assignment]",
            &[("assignment", 2)],
        );
        check(
            "glpat-abcdefghij0123456789 glptt-0123456789abcdefghijklmn GR1348941abcdefghij0123456789",
            "[REDACTED:gitlab_token] [REDACTED:gitlab_token] [REDACTED:gitlab_token]",
            &[("gitlab_token", 3)],
        );
        check(
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc rk_live_abcdefghijklmnop1234 sk_test_abcdefghijklmnop12 whsec_abcdefghijklmnopqrstuvwxyz12",
            "[REDACTED:stripe_key] [REDACTED:stripe_key] [REDACTED:stripe_key] [REDACTED:stripe_key]",
            &[("stripe_key", 4)],
        );
        check(
            "key=AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
            "key=[REDACTED:google_api_key]",
            &[("google_api_key", 1)],
        );
        check(
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\naccess_token=abcd1234efgh\nclient_secret: s3cr3tvalue\nDB_PASSWORD=hunter22\nrefresh-token: 0123456789",
            "aws_secret_access_key = [REDACTED:assignment]\naccess_token=[REDACTED:assignment]\nclient_secret: [REDACTED:assignment]\nDB_PASSWORD=[REDACTED:assignment]\nrefresh-token: [REDACTED:assignment]",
            &[("assignment", 5)],
        );
        check(
            "npm_abcdefghijklmnopqrstuvwxyz0123456789 pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0 hf_abcdefghijklmnopqrstuvwxyzABCDEF",
            "[REDACTED:npm_token] [REDACTED:pypi_token] [REDACTED:huggingface_token]",
            &[
                ("huggingface_token", 1),
                ("npm_token", 1),
                ("pypi_token", 1),
            ],
        );
        check(
            "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ SK0123456789abcdef0123456789abcdef",
            "[REDACTED:sendgrid_key] [REDACTED:twilio_key]",
            &[("sendgrid_key", 1), ("twilio_key", 1)],
        );
        check(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo=;EndpointSuffix=core.windows.net",
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=[REDACTED:azure_storage_key];EndpointSuffix=core.windows.net",
            &[("azure_storage_key", 1)],
        );
        check(
            "git clone https://deploy:s3cr3t-pass@git.example.com/r.git",
            "git clone https://deploy:[REDACTED:url_password]@git.example.com/r.git",
            &[("url_password", 1)],
        );
        check(
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\n-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQdG\n-----END PGP PRIVATE KEY BLOCK-----\n-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIF\n-----END ENCRYPTED PRIVATE KEY-----",
            "[REDACTED:private_key]\n[REDACTED:private_key]\n[REDACTED:private_key]",
            &[("private_key", 3)],
        );
        check(
            "{\"client_secret\": \"abcd1234wxyz\", \"refresh_token\":\"r-0123456789\"}\nprivate_key: zzzz9999",
            "{\"client_secret\": \"[REDACTED:assignment]\", \"refresh_token\":\"[REDACTED:assignment]\"}\nprivate_key: [REDACTED:assignment]",
            &[("assignment", 3)],
        );
        check(
            "echo tok-very-secret-value",
            "echo [REDACTED:env:MY_API_TOKEN]",
            &[("env_secret", 1)],
        );
    }

    #[test]
    fn look_alikes_are_left_alone() {
        for text in [
            "3f786850e387550fdab836ed7e6dc881de23001b0a5f5b8d6a5e8e2f0d5b0d21",
            "123e4567-e89b-12d3-a456-426614174000",
            "skip the sk- prefix; ask-me later",
            "the password is in the vault",
            "token: ab",
            "AKIA is a prefix",
            "max_tokens: 4096",
            "token_count = 12345",
            "tokenizer=bpe-large",
            "let secretary = names;",
            "sk_live_ is a prefix",
            "sha256:3f786850e387550fdab836ed7e6dc881de23001b0a5f5b8d6a5e8e2f0d5b0d21",
            "commit 3f786850e387550fdab836ed7e6dc881de23001b",
            "the task-runner will skip it",
            "https://example.com/path?q=1",
            "ssh://git@github.com/owner/repo.git",
            "npm_config_cache=/tmp/npm",
            "hf_hub_download(repo_id)",
        ] {
            check(text, text, &[]);
        }
    }

    #[test]
    fn redaction_is_deterministic_and_idempotent() {
        let r = Redactor::default();
        let text = "password=hunter22 sk-abcdefghijklmnopqrstuvwxyz012345";
        let once = r.redact(text, &mut Counts::new()).into_owned();
        assert_eq!(r.redact(text, &mut Counts::new()), once);
        assert_eq!(r.redact(&once, &mut Counts::new()), once);
    }
}
