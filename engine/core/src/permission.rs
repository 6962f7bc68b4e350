//! Permission needs: which calls ask first and under which key. Pure functions of the
//! call; who answers and the allow list live in the engine.
//!
//! A call either runs at once (`Need::Auto`) or needs an answer for a key: the program
//! for a shell command (`shell:git`), the host for a fetch (`web_fetch:example.org`),
//! the tool for a write (`edit_file`), or `tool@folder` for a path outside the
//! workspace. Guarded command lines (destructive git operations, `rm -rf` of the
//! workspace or home) always ask, even when allowed.

use crate::command::Analysis;

/// What a call needs before it may act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    Auto,
    Ask {
        /// The question's name: `edit_file`, `web_fetch:example.org`, `read_file@/etc`,
        /// and for a command the keys of its programs (see [`command_key`]).
        key: String,
        /// What is being allowed, in full: the command line, the host, the diff.
        detail: String,
        /// True when the tool says so: asks even when the key is allowed.
        guarded: bool,
        /// For a command: what it runs, which gives the keys an "always" grants and
        /// needs, why none can cover it, and the guarded commands it matches.
        command: Option<Box<Analysis>>,
    },
}

impl Need {
    /// A question for `key` showing `detail`, covered by an "always" for `key`.
    pub fn ask(key: impl Into<String>, detail: impl Into<String>) -> Need {
        Need::Ask {
            key: key.into(),
            detail: detail.into(),
            guarded: false,
            command: None,
        }
    }
}

/// The question's name for a command running `keys`: the keys joined by spaces
/// (`shell:cargo shell:tail`), or `shell` when the line runs no program.
pub fn command_key(keys: &[String]) -> String {
    if keys.is_empty() {
        "shell".to_string()
    } else {
        keys.join(" ")
    }
}

/// What a command needs: a question for every program it runs, showing the whole line
/// and `context` (where, in the background).
pub fn shell_need(analysis: Analysis, context: &str) -> Need {
    Need::Ask {
        key: command_key(&analysis.keys),
        detail: format!("{}{context}", analysis.line),
        guarded: false,
        command: Some(Box::new(analysis)),
    }
}

/// Why a write into git's hooks or configuration (`.git/hooks/pre-commit`,
/// `.git/config`, `.gitattributes`) asks every time: they name programs a later `git`
/// runs, so no grant of the writing tool covers it.
macro_rules! git_write_why {
    () => {
        "it writes git's hooks or configuration, which name programs a later git runs"
    };
}
pub const GIT_WRITE_WHY: &str = git_write_why!();

/// The last line of such a question (the question is guarded).
pub const GIT_WRITE_NOTE: &str = concat!("(asked every time: ", git_write_why!(), ")");

/// [`outside_need`] for the path `target` outside the workspace: the question is for
/// the folder that holds it (the engine's permission step and `verify` alike).
pub fn outside_need_of(
    tool: &str,
    target: &std::path::Path,
    inner: Need,
    input: &serde_json::Value,
) -> Need {
    let dir = target.parent().unwrap_or(target).to_string_lossy();
    outside_need(tool, &dir, inner, input)
}

/// What a call of `tool` needs when a path it names lies outside the workspace, in
/// folder `dir`: a question for `<tool>@<dir>` showing what the call would do there
/// (`inner`, the call's own need, or its input). A credential file outside asks every
/// time: no grant of the folder covers it, as no grant of a tool covers one inside.
pub fn outside_need(tool: &str, dir: &str, inner: Need, input: &serde_json::Value) -> Need {
    let (what, credentials) = match &inner {
        Need::Ask { key, detail, .. } => (detail.clone(), key.starts_with("read_credentials:")),
        Need::Auto => (
            serde_json::to_string_pretty(input).unwrap_or_default(),
            false,
        ),
    };
    Need::Ask {
        key: format!("{tool}@{dir}"),
        detail: format!("{tool} outside the workspace, in {dir}:\n{what}"),
        guarded: credentials,
        command: None,
    }
}

/// The files that usually hold credentials, as glob patterns, each with what it holds.
/// Reading one asks first, even inside the workspace (the thoth seed's rule, widened
/// from `.env*`, `*.pem`, `*.key`, `id_rsa` to the files of common tools). The
/// `credential_files` of a session's configuration defaults to these patterns;
/// [`CredentialFiles`] says how they match. `docs/TOOLS.md` shows this table.
pub const DEFAULT_CREDENTIAL_FILES: &[(&str, &str)] = &[
    (
        ".env*",
        "dotenv files: `.env`, `.env.local`, `.envrc`; also `.env.example`, which thoth asks for too",
    ),
    ("*.pem", "PEM certificates and private keys"),
    ("*.key", "private keys"),
    ("id_rsa*", "SSH keys (the `.pub` halves too)"),
    ("id_dsa*", "SSH keys"),
    ("id_ecdsa*", "SSH keys"),
    ("id_ed25519*", "SSH keys"),
    ("*.p12", "PKCS #12 key bundles"),
    ("*.pfx", "PKCS #12 key bundles"),
    ("*.pkcs12", "PKCS #12 key bundles"),
    ("*.jks", "Java keystores"),
    ("*.keystore", "Java and Android keystores"),
    (".npmrc", "npm registry tokens"),
    (".pypirc", "PyPI upload tokens"),
    (".netrc", "logins for curl, git, ftp"),
    ("_netrc", "logins for curl, git, ftp (Windows)"),
    (".pgpass", "PostgreSQL passwords"),
    (".my.cnf", "MySQL client passwords"),
    (".htpasswd", "web server passwords"),
    (".git-credentials", "git's stored credentials"),
    (".vault-token", "HashiCorp Vault token"),
    (".boto", "gsutil and boto keys"),
    (
        "credentials",
        "cloud CLI keys (`.aws/credentials`); a file named so, not `credentials.py`",
    ),
    (
        "credentials.json",
        "Google API OAuth client secrets (the name Google's quickstarts use)",
    ),
    (
        "application_default_credentials.json",
        "gcloud application-default login",
    ),
    (".docker/config.json", "container registry logins"),
    (".kube/config", "Kubernetes cluster credentials"),
    ("kubeconfig", "Kubernetes cluster credentials"),
    ("*.kubeconfig", "Kubernetes cluster credentials"),
    ("secrets.yml", "Rails, Ansible and Helm secrets"),
    ("secrets.yaml", "Rails, Ansible and Helm secrets"),
];

/// The default credential-file patterns ([`DEFAULT_CREDENTIAL_FILES`]): the
/// configuration's default.
pub fn default_credential_files() -> Vec<String> {
    DEFAULT_CREDENTIAL_FILES
        .iter()
        .map(|(p, _)| p.to_string())
        .collect()
}

/// A list of credential-file patterns, compiled.
///
/// A pattern is a glob (`*`, `?`, `[…]`, `{a,b}`, `**`) matched against a path
/// relative to the workspace, ignoring case (`ID_RSA` and `Server.PEM` hold keys too).
/// A pattern matches the end of the path at any depth: `*.pem` matches `a/b/c.pem`,
/// `.kube/config` matches `deploy/.kube/config`. One that starts with `/` matches from
/// the workspace root only. `*` does not cross a `/`.
///
/// ```
/// use cairn_core::permission::CredentialFiles;
/// let files = CredentialFiles::defaults();
/// assert!(files.matches("deploy/.aws/credentials"));
/// assert!(!files.matches("src/credentials.rs"));
/// ```
#[derive(Debug, Clone)]
pub struct CredentialFiles {
    patterns: Vec<String>,
    set: globset::GlobSet,
}

/// A credential-file pattern that is not a glob.
#[derive(Debug, Clone, thiserror::Error)]
#[error("credential file pattern '{pattern}': {source}")]
pub struct CredentialPatternError {
    pub pattern: String,
    #[source]
    pub source: globset::Error,
}

impl CredentialFiles {
    /// Compiles `patterns`; the error names the first that is not a glob.
    pub fn new(patterns: &[String]) -> Result<CredentialFiles, CredentialPatternError> {
        let mut set = globset::GlobSetBuilder::new();
        for p in patterns {
            let glob = match p.strip_prefix('/') {
                Some(anchored) => anchored.to_string(),
                None => format!("**/{p}"),
            };
            let glob = globset::GlobBuilder::new(&glob)
                .case_insensitive(true)
                .literal_separator(true)
                .build()
                .map_err(|source| CredentialPatternError {
                    pattern: p.clone(),
                    source,
                })?;
            set.add(glob);
        }
        let set = set.build().map_err(|source| CredentialPatternError {
            pattern: patterns.join(" "),
            source,
        })?;
        Ok(CredentialFiles {
            patterns: patterns.to_vec(),
            set,
        })
    }

    /// The default list ([`DEFAULT_CREDENTIAL_FILES`]).
    pub fn defaults() -> CredentialFiles {
        match CredentialFiles::new(&default_credential_files()) {
            Ok(files) => files,
            Err(e) => panic!("a default credential file pattern does not compile: {e}"),
        }
    }

    /// The patterns, as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// True when `path` (relative to the workspace; `..` and `.` are resolved, an
    /// absolute path is matched from its root) is a credential file.
    pub fn matches(&self, path: &str) -> bool {
        let rel = crate::state::normalise_rel(path);
        self.set.is_match(rel.trim_start_matches('/'))
    }
}

/// What a read of `path` needs: auto, or a question for a credential file, keyed on the
/// file itself (`read_credentials:<path>`), so that no tool's grant covers it.
pub fn read_need(tool: &str, path: &str, credential_files: &CredentialFiles) -> Need {
    if credential_files.matches(path) {
        Need::ask(
            format!("read_credentials:{}", crate::state::normalise_rel(path)),
            format!("{tool} wants to read {path}, which looks like a credentials file"),
        )
    } else {
        Need::Auto
    }
}

/// The guarded command patterns of sessions recorded before [`crate::command::guard`]
/// rules; [`crate::command::upgrade_guards`] turns them into today's default rules.
pub fn default_guarded() -> Vec<String> {
    [
        r"\bgit\s+push\b.*(\s--force\b|\s-f\b|\s--force-with-lease\b)",
        r"\bgit\s+reset\s+--hard\b",
        r"\bgit\s+clean\s+-[a-zA-Z]*(f[a-zA-Z]*d|d[a-zA-Z]*f)",
        r"\bgit\s+checkout\s+--\s+\.",
        r"\brm\s+-[a-zA-Z]*[rR][a-zA-Z]*\s+(-[a-zA-Z]+\s+)*(/|~|\$HOME|\.|\./|\*)\s*$",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(files: &CredentialFiles, path: &str, expected: bool) {
        assert_eq!(files.matches(path), expected, "{path}");
    }

    #[test]
    fn credential_files_by_name_at_any_depth_ignoring_case() {
        let files = CredentialFiles::defaults();
        for (path, expected) in [
            // dotenv: every name starting with `.env`, as thoth has it.
            (".env", true),
            ("app/.env.local", true),
            (".env.production", true),
            (".env.example", true),
            (".envrc", true),
            ("env", false),
            ("src/environment.ts", false),
            ("docs/dotenv.md", false),
            // Keys and certificates.
            ("certs/server.pem", true),
            ("tls/server.key", true),
            ("Server.PEM", true),
            ("src/keys.rs", false),
            ("monkey", false),
            (".ssh/id_rsa", true),
            ("id_rsa.pub", true),
            ("home/ID_ED25519", true),
            ("deploy/id_ecdsa", true),
            ("id_dsa", true),
            ("my_id_rsa_notes.txt", false),
            ("android/app/release.keystore", true),
            ("store.jks", true),
            ("client.p12", true),
            ("client.pfx", true),
            // Tools' credential files.
            (".npmrc", true),
            ("frontend/.npmrc", true),
            (".pypirc", true),
            (".netrc", true),
            ("_netrc", true),
            ("netrc.md", false),
            (".pgpass", true),
            (".my.cnf", true),
            ("my.cnf", false),
            ("public/.htpasswd", true),
            (".git-credentials", true),
            (".gitconfig", false),
            (".vault-token", true),
            (".boto", true),
            // Cloud CLIs: the file named `credentials`, not code about credentials.
            (".aws/credentials", true),
            ("credentials", true),
            ("credentials.json", true),
            ("src/credentials.rs", false),
            ("credentials/README.md", false),
            ("aws/config", false),
            ("gcloud/application_default_credentials.json", true),
            (".docker/config.json", true),
            ("ci/.docker/config.json", true),
            ("config.json", false),
            ("docker/config.json", false),
            (".kube/config", true),
            ("kubeconfig", true),
            ("staging.kubeconfig", true),
            ("config", false),
            ("config/secrets.yml", true),
            ("helm/secrets.yaml", true),
            ("secrets.md", false),
            // Paths spelled otherwise.
            ("./.env", true),
            ("a/../.npmrc", true),
            ("/home/me/.ssh/id_rsa", true),
            ("../other/.env", true),
            ("README.md", false),
            ("Cargo.toml", false),
        ] {
            check(&files, path, expected);
        }
    }

    #[test]
    fn credential_patterns_anchor_with_a_slash_and_bad_ones_are_named() {
        let files = CredentialFiles::new(&["/secret.txt".into(), "deploy/*.conf".into()]).unwrap();
        check(&files, "secret.txt", true);
        check(&files, "sub/secret.txt", false);
        check(&files, "deploy/db.conf", true);
        check(&files, "x/deploy/db.conf", true);
        check(&files, "deploy/sub/db.conf", false);
        let e = CredentialFiles::new(&["*.pem".into(), "a[b".into()]).unwrap_err();
        assert_eq!(e.pattern, "a[b");
        assert!(
            e.to_string().starts_with("credential file pattern 'a[b': "),
            "{e}"
        );
    }

    #[test]
    fn a_credential_file_is_asked_for_under_its_own_key() {
        let files = CredentialFiles::defaults();
        assert_eq!(
            read_need("read_file", "./config/../.env", &files),
            Need::ask(
                "read_credentials:.env",
                "read_file wants to read ./config/../.env, which looks like a credentials file"
            )
        );
        assert_eq!(read_need("read_file", "src/main.rs", &files), Need::Auto);
        assert_eq!(
            read_need("read_file", ".env", &CredentialFiles::new(&[]).unwrap()),
            Need::Auto
        );
    }
}
