//! Where an agent keeps its settings, and reading and writing them: the files `cairn
//! hook install` changes with the text [`crate::hook_install`] makes.

use std::path::{Path, PathBuf};

/// An agent whose settings cairn's hooks are written into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Claude,
    Codex,
    Gemini,
    OpenCode,
}

impl Agent {
    /// Its name on cairn's command line (`cairn hook claude`).
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::OpenCode => "opencode",
        }
    }
}

/// Whose settings: the project's (in the workspace) or the user's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Project,
    User,
}

/// Why an agent's settings could not be found, read or written.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("HOME is not set: give --project, or set HOME")]
    NoHome,
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SettingsError + '_ {
    move |source| SettingsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The settings file of `agent` for `scope`: Claude Code's `.claude/settings.json`
/// (the user's in `$CLAUDE_CONFIG_DIR`, else `$HOME/.claude`), Codex's
/// `.codex/config.toml` (the user's in `$CODEX_HOME`, else `$HOME/.codex`), Gemini
/// CLI's `.gemini/settings.json` (the user's in `$GEMINI_CLI_HOME/.gemini`, else
/// `$HOME/.gemini`), OpenCode's plugin file `.opencode/plugin/cairn.js` (the user's in
/// `$XDG_CONFIG_HOME/opencode/plugin`, else `$HOME/.config/opencode/plugin`): OpenCode
/// has no hook settings, its plugins see every call.
pub fn settings_path(
    agent: Agent,
    scope: Scope,
    workspace: &Path,
) -> Result<PathBuf, SettingsError> {
    let home = || -> Result<PathBuf, SettingsError> {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or(SettingsError::NoHome)
    };
    Ok(match (agent, scope) {
        (Agent::Claude, Scope::Project) => workspace.join(".claude/settings.json"),
        (Agent::Codex, Scope::Project) => workspace.join(".codex/config.toml"),
        (Agent::Gemini, Scope::Project) => workspace.join(".gemini/settings.json"),
        (Agent::Gemini, Scope::User) => match std::env::var_os("GEMINI_CLI_HOME") {
            Some(d) if !d.is_empty() => PathBuf::from(d).join(".gemini/settings.json"),
            _ => home()?.join(".gemini/settings.json"),
        },
        (Agent::OpenCode, Scope::Project) => workspace.join(".opencode/plugin/cairn.js"),
        (Agent::OpenCode, Scope::User) => match std::env::var_os("XDG_CONFIG_HOME") {
            Some(d) if !d.is_empty() => PathBuf::from(d).join("opencode/plugin/cairn.js"),
            _ => home()?.join(".config/opencode/plugin/cairn.js"),
        },
        (Agent::Claude, Scope::User) => match std::env::var_os("CLAUDE_CONFIG_DIR") {
            Some(d) if !d.is_empty() => PathBuf::from(d).join("settings.json"),
            _ => home()?.join(".claude/settings.json"),
        },
        (Agent::Codex, Scope::User) => match std::env::var_os("CODEX_HOME") {
            Some(d) if !d.is_empty() => PathBuf::from(d).join("config.toml"),
            _ => home()?.join(".codex/config.toml"),
        },
    })
}

/// The text of a settings file; empty when there is none.
pub fn read_settings(path: &Path) -> Result<String, SettingsError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(io(path)(e)),
    }
}

/// Writes a settings file whole or not at all (a temporary file beside it, given the
/// old file's permissions, then renamed), making its folder when missing.
pub fn write_settings(path: &Path, text: &str) -> Result<(), SettingsError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let tmp = path.with_extension("cairn-tmp");
    std::fs::write(&tmp, text).map_err(io(&tmp))?;
    if let Ok(meta) = std::fs::metadata(path) {
        std::fs::set_permissions(&tmp, meta.permissions()).map_err(io(&tmp))?;
    }
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// Removes a settings file that holds nothing (what `uninstall` leaves of a file
/// `install` made), then its folder if that is left empty.
pub fn remove_settings(path: &Path) -> Result<(), SettingsError> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(path)(e)),
    }
    if let Some(dir) = path.parent()
        && std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
    {
        // Another file may appear meanwhile: then the folder stays, as it should.
        let _ = std::fs::remove_dir(dir);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_written_whole_with_the_old_files_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = settings_path(Agent::Claude, Scope::Project, dir.path()).unwrap();
        assert_eq!(path, dir.path().join(".claude/settings.json"));
        assert_eq!(read_settings(&path).unwrap(), "");
        write_settings(&path, "{}\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_settings(&path, "{\"hooks\": {}}\n").unwrap();
        assert_eq!(read_settings(&path).unwrap(), "{\"hooks\": {}}\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!path.with_extension("cairn-tmp").exists());
    }
}
