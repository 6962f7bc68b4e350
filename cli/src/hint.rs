//! What the user can do about an error, in terms of this command line. The library
//! crates' errors carry the facts (paths, ids, the name at fault) and never name a
//! command or a flag; the commands and flags that help are named here, once, and
//! added wherever an error is shown.

use std::error::Error;

use cairn_engine::EngineError;
use cairn_engine::agent::AgentError;
use cairn_engine::provider::ProviderError;
use cairn_replay::ReplayError;

/// The hint for the first error of `e`'s chain (`e`, then its sources) that has one.
pub fn hint(e: &(dyn Error + 'static)) -> Option<String> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(h) = own(e) {
            return Some(h);
        }
        next = e.source();
    }
    None
}

/// `e`'s message, followed by its hint in parentheses when it has one.
pub fn text(e: &(dyn Error + 'static)) -> String {
    with_hint(e.to_string(), e)
}

/// `message` (the text shown for `e`), followed by `e`'s hint in parentheses when it
/// has one, redacted ([`redacted`]): an error may quote what it was given.
pub fn with_hint(message: String, e: &(dyn Error + 'static)) -> String {
    redacted(match hint(e) {
        Some(h) => format!("{message} ({h})"),
        None => message,
    })
}

/// The redactor of what the command line says on standard error and in errors: the
/// patterns, and this process's secret-looking environment values.
static REDACTOR: std::sync::LazyLock<cairn_engine::redact::Redactor> =
    std::sync::LazyLock::new(|| cairn_engine::redact::Redactor::with_env(std::env::vars()));

/// `text` with its secrets redacted as a log's are: the one pass every error message
/// and note goes through before it is shown (a script's step, a source file's field
/// or a server's answer quoted in an error would otherwise reach the terminal raw).
pub fn redacted(text: String) -> String {
    REDACTOR.redact_string(text, &mut cairn_engine::redact::Counts::new())
}

/// Writes one line to standard error, redacted ([`redacted`]: what goes to the
/// terminal holds no secret, as the log holds none), where a failed write is dropped:
/// after SIGHUP the terminal is gone, and `eprintln!` would panic before the session
/// ends.
pub fn note(text: &str) {
    use std::io::Write;
    let text = redacted(text.to_string());
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_all(text.as_bytes())
        .and_then(|()| stderr.write_all(b"\n"));
}

/// The hint of `e` itself, looking through the wrappers that show an inner error as
/// their own (`#[error(transparent)]`, whose inner error is not in the chain).
fn own(e: &(dyn Error + 'static)) -> Option<String> {
    if let Some(e) = e.downcast_ref::<EngineError>() {
        return engine(e);
    }
    if let Some(e) = e.downcast_ref::<ReplayError>() {
        return match e {
            ReplayError::Store(e) => store(e),
            ReplayError::Engine(e) => engine(e),
            ReplayError::MissingBlobs { missing, .. } if !missing.is_empty() => {
                Some(VERIFY_SESSION.into())
            }
            ReplayError::MissingBlobs { .. } => Some(WITHHELD_BACK.into()),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<cairn_store::Error>() {
        return store(e);
    }
    if let Some(e) = e.downcast_ref::<cairn_import::ImportError>() {
        return match e {
            cairn_import::ImportError::Store(e) => store(e),
            cairn_import::ImportError::Engine(e) => engine(e),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<AgentError>() {
        return match e {
            AgentError::Engine(e) => engine(e),
            AgentError::Provider(e) => provider(e),
        };
    }
    if let Some(e) = e.downcast_ref::<ProviderError>() {
        return provider(e);
    }
    None
}

const VERIFY_SESSION: &str = "run `cairn verify` on the session for every problem";

const WITHHELD_BACK: &str = "credential files are withheld from the cairn home: put each back at that path with the content it had (the BLAKE3 shown), then run the command again";

fn engine(e: &EngineError) -> Option<String> {
    Some(match e {
        EngineError::Store(e) => return store(e),
        EngineError::WorkspaceGone { session, .. } => format!(
            "fork the session into a new folder instead: cairn fork {session} --at SEQ --workspace DIR"
        ),
        EngineError::NoConversation { .. } => "give a TASK for the model to start from".into(),
        EngineError::ModelAnswered { .. } => "give a TASK to go on".into(),
        EngineError::ScriptMismatch { .. } => {
            "nothing was recorded: resume with the script the session ran, or without --script to only reconcile, or fork the session to run another script".into()
        }
        EngineError::NoSessions { .. } => "run `cairn demo` or `cairn run --script FILE`".into(),
        EngineError::NoSessionMatch { .. } => {
            "give an id, a unique prefix, a session folder, or `last`; `cairn sessions` lists them"
                .into()
        }
        EngineError::NoFact { .. } => "`cairn memory list` numbers them".into(),
        EngineError::BadManifest { .. } => VERIFY_SESSION.into(),
        EngineError::EmptyLog { dir } => format!(
            "nothing to resume: a cairn killed while it created the session left it; remove {}",
            dir.display()
        ),
        EngineError::McpConfig { .. } => "fix it, or remove it and use `cairn mcp add`".into(),
        EngineError::McpNoCommand { server } => format!(
            "give the command that starts the server: cairn mcp add {server} -- COMMAND ARGS..."
        ),
        _ => return None,
    })
}

fn store(e: &cairn_store::Error) -> Option<String> {
    match e {
        cairn_store::Error::Corruption { path, .. } => Some(format!(
            "the log is left as it is: `cairn verify {}` lists every problem; restore the log from a copy, or move the bad lines aside by hand, to go on",
            path.display()
        )),
        _ => None,
    }
}

fn provider(e: &ProviderError) -> Option<String> {
    Some(match e {
        ProviderError::Auth { key_var, .. } => {
            format!("check the API key in {key_var}, or name another variable with --api-key-env")
        }
        ProviderError::NotFound { .. } => "check --base-url and --model".into(),
        ProviderError::NoModel => {
            "three ways: pass --model and --base-url; set CAIRN_MODEL and CAIRN_BASE_URL; or set model and base_url in config.toml, which `cairn` on a terminal asks for and writes (cairn config shows where)"
                .into()
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn corruption() -> cairn_store::Error {
        cairn_store::Error::Corruption {
            path: PathBuf::from("/s/log.jsonl"),
            seq: None,
            line: 2,
            offset: 10,
            what: "bad hash".into(),
        }
    }

    #[test]
    fn the_texts_users_saw_before_the_hints_moved() {
        let gone = EngineError::WorkspaceGone {
            workspace: PathBuf::from("/w"),
            session: "s1".into(),
        };
        assert_eq!(
            text(&gone),
            "the workspace /w of session s1 is gone (fork the session into a new folder instead: cairn fork s1 --at SEQ --workspace DIR)"
        );
        // Through the wrappers that show an inner error as their own.
        assert_eq!(
            text(&ReplayError::Engine(gone)),
            text(&EngineError::WorkspaceGone {
                workspace: PathBuf::from("/w"),
                session: "s1".into(),
            })
        );
        let want = "/s/log.jsonl: corrupt log at line 2, byte offset 10: bad hash (the log is left as it is: `cairn verify /s/log.jsonl` lists every problem; restore the log from a copy, or move the bad lines aside by hand, to go on)";
        assert_eq!(text(&corruption()), want);
        assert_eq!(text(&EngineError::Store(corruption())), want);
        assert_eq!(text(&ReplayError::Store(corruption())), want);
        assert_eq!(
            text(&ReplayError::Engine(EngineError::Store(corruption()))),
            want
        );
        assert_eq!(
            text(&AgentError::Engine(EngineError::Store(corruption()))),
            want
        );
        // A hook's errors too.
        assert_eq!(text(&cairn_import::ImportError::Store(corruption())), want);
        assert_eq!(
            text(&EngineError::NoSessions {
                home: PathBuf::from("/h")
            }),
            "no sessions in /h yet (run `cairn demo` or `cairn run --script FILE`)"
        );
        assert_eq!(
            text(&EngineError::NoSessionMatch { spec: "zz".into() }),
            "no session matches 'zz' (give an id, a unique prefix, a session folder, or `last`; `cairn sessions` lists them)"
        );
        assert_eq!(
            text(&EngineError::NoFact { n: 1, facts: 0 }),
            "no fact 1: memory holds 0 (`cairn memory list` numbers them)"
        );
        assert_eq!(
            text(&EngineError::McpNoCommand {
                server: "fs".into()
            }),
            "mcp server 'fs': no command given (give the command that starts the server: cairn mcp add fs -- COMMAND ARGS...)"
        );
        let Err(source) = serde_json::from_str::<serde_json::Value>("{") else {
            panic!("parsed");
        };
        let bad = EngineError::McpConfig {
            path: PathBuf::from("/p/mcp.json"),
            source,
        };
        assert!(
            text(&bad).ends_with(": EOF while parsing an object at line 1 column 1 (fix it, or remove it and use `cairn mcp add`)"),
            "{}",
            text(&bad)
        );
        let missing = ReplayError::MissingBlobs {
            missing: vec![("manifest".into(), cairn_store::Hash::of(b"x"))],
            withheld: vec![],
        };
        assert!(
            text(&missing).ends_with(" (run `cairn verify` on the session for every problem)"),
            "{}",
            text(&missing)
        );
        let withheld = ReplayError::MissingBlobs {
            missing: vec![],
            withheld: vec![("/ws/.env".into(), cairn_store::Hash::of(b"x"))],
        };
        assert!(
            text(&withheld).ends_with(" (credential files are withheld from the cairn home: put each back at that path with the content it had (the BLAKE3 shown), then run the command again)"),
            "{}",
            text(&withheld)
        );
    }

    #[test]
    fn provider_errors_get_the_flags() {
        let auth = ProviderError::Auth {
            status: 401,
            message: "bad key".into(),
            key_var: "CAIRN_API_KEY or OPENAI_API_KEY".into(),
        };
        assert_eq!(
            text(&auth),
            "authentication failed (401): bad key (check the API key in CAIRN_API_KEY or OPENAI_API_KEY, or name another variable with --api-key-env)"
        );
        // AgentError::Provider shows "provider: …" and has the provider error as source.
        assert_eq!(
            text(&AgentError::Provider(ProviderError::NotFound {
                url: "http://h/v1".into(),
                message: "no model".into(),
            })),
            "provider: not found (404) at http://h/v1: no model (check --base-url and --model)"
        );
        assert_eq!(
            text(&ProviderError::NoModel),
            "no model given (three ways: pass --model and --base-url; set CAIRN_MODEL and CAIRN_BASE_URL; or set model and base_url in config.toml, which `cairn` on a terminal asks for and writes (cairn config shows where))"
        );
        assert_eq!(hint(&ProviderError::Exhausted(2)), None);
    }

    #[test]
    fn a_hint_is_found_down_the_chain() {
        let e = anyhow::Error::new(EngineError::NoFact { n: 2, facts: 1 }).context("forget");
        assert_eq!(
            hint(e.as_ref()).as_deref(),
            Some("`cairn memory list` numbers them")
        );
        assert_eq!(hint(&EngineError::NoHome), None);
        assert_eq!(text(&EngineError::NoHome), EngineError::NoHome.to_string());
    }
}
