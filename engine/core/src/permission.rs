//! Permission needs: which calls ask first and under which key. Pure functions of the
//! call; who answers and the allow list live in the engine.
//!
//! A call either runs at once (`Need::Auto`) or needs an answer for a key: the program
//! for a shell command (`shell:git`), the host for a fetch (`web_fetch:example.org`),
//! the tool for a write (`edit_file`), or `tool@folder` for a path outside the
//! workspace. Guarded command lines (destructive git operations, `rm -rf` of the
//! workspace or home) always ask, even when allowed.

/// What a call needs before it may act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    Auto,
    Ask {
        key: String,
        /// What is being allowed, in full: the command line, the host, the diff.
        detail: String,
        /// True when a guarded pattern matched: asks even when the key is allowed.
        guarded: bool,
    },
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
        Need::Ask {
            key: format!("read_credentials:{}", crate::state::normalise_rel(path)),
            detail: format!("{tool} wants to read {path}, which looks like a credentials file"),
            guarded: false,
        }
    } else {
        Need::Auto
    }
}

/// What a command needs: a question keyed on its program (`shell:git`), showing the
/// whole command line.
pub fn shell_need(program: &str, command_line: &str, context: &str) -> Need {
    let name = std::path::Path::new(program)
        .file_name()
        .map_or(program.to_string(), |n| n.to_string_lossy().into_owned());
    Need::Ask {
        key: format!("shell:{name}"),
        detail: format!("{command_line}{context}"),
        guarded: false,
    }
}

/// The program a `sh -c` command line runs first: its first word that is not a
/// variable assignment. Superseded by [`crate::command::analyse`], which keys every
/// program of the line; kept until the engine asks with its keys.
pub fn first_program(command: &str) -> String {
    command
        .split_whitespace()
        .find(|w| !w.contains('=') || w.starts_with('='))
        .unwrap_or("")
        .to_string()
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

/// True when `command` matches one of the guarded patterns (invalid ones are ignored).
/// Superseded by [`crate::command::guarded`], which matches parsed argv.
pub fn is_guarded(patterns: &[String], command: &str) -> bool {
    // A session keeps one list: compiled once per thread, not once per command (deep
    // verify asks for every shell question of a log).
    thread_local! {
        static COMPILED: std::cell::RefCell<(Vec<String>, Vec<regex::Regex>)> =
            const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    COMPILED.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != patterns {
            let compiled = patterns
                .iter()
                .filter_map(|p| regex::Regex::new(p).ok())
                .collect();
            *c = (patterns.to_vec(), compiled);
        }
        c.1.iter().any(|re| re.is_match(command))
    })
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
            Need::Ask {
                key: "read_credentials:.env".into(),
                detail:
                    "read_file wants to read ./config/../.env, which looks like a credentials file"
                        .into(),
                guarded: false,
            }
        );
        assert_eq!(read_need("read_file", "src/main.rs", &files), Need::Auto);
        assert_eq!(
            read_need("read_file", ".env", &CredentialFiles::new(&[]).unwrap()),
            Need::Auto
        );
    }
}
