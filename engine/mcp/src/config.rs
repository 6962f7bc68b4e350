//! The MCP servers of a project: `mcp.json` in the project folder (never in the
//! workspace, which the agent's tools can write), rewritten atomically.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use cairn_tools::mcp_names::ServerNameError;
use cairn_tools::{EngineError, Result, io_at};

/// The file name in the project folder.
pub const FILE: &str = "mcp.json";

/// The longest server name (keeps `mcp__{server}__{tool}` within 64 characters).
pub const SERVER_NAME_CHARS_MAX: usize = 32;

/// How to start one server over stdio.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerConfig {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables for the server.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

/// Every configured server, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpConfig {
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
}

/// The path of a project's `mcp.json`.
pub fn path(project_dir: &Path) -> PathBuf {
    project_dir.join(FILE)
}

/// Checks a server name: `[A-Za-z0-9_-]`, 1 to [`SERVER_NAME_CHARS_MAX`] characters.
pub fn check_name(name: &str) -> Result<(), ServerNameError> {
    if name.is_empty() || name.len() > SERVER_NAME_CHARS_MAX {
        return Err(ServerNameError::Length {
            name: name.to_string(),
            max: SERVER_NAME_CHARS_MAX,
        });
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(ServerNameError::Char {
            name: name.to_string(),
            c,
        });
    }
    Ok(())
}

impl McpConfig {
    /// The project's configuration; empty when there is no `mcp.json`.
    pub fn load(project_dir: &Path) -> Result<McpConfig> {
        let p = path(project_dir);
        match std::fs::read(&p) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|source| EngineError::McpConfig { path: p, source }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(McpConfig::default()),
            Err(e) => Err(io_at(&p)(e)),
        }
    }

    /// Writes `mcp.json`: temporary file, fsync, rename, fsync of the folder.
    pub fn save(&self, project_dir: &Path) -> Result<()> {
        use std::io::Write;
        std::fs::create_dir_all(project_dir).map_err(io_at(project_dir))?;
        let p = path(project_dir);
        let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        bytes.push(b'\n');
        let mut tmp = tempfile::NamedTempFile::new_in(project_dir).map_err(io_at(project_dir))?;
        tmp.write_all(&bytes).map_err(io_at(&p))?;
        tmp.as_file().sync_all().map_err(io_at(&p))?;
        tmp.persist(&p).map_err(|e| io_at(&p)(e.error))?;
        std::fs::File::open(project_dir)
            .and_then(|d| d.sync_all())
            .map_err(io_at(project_dir))?;
        Ok(())
    }

    /// Adds (or replaces) a server and saves.
    pub fn add(project_dir: &Path, name: &str, server: ServerConfig) -> Result<McpConfig> {
        check_name(name)?;
        if server.command.is_empty() {
            return Err(EngineError::McpNoCommand {
                server: name.to_string(),
            });
        }
        let mut config = McpConfig::load(project_dir)?;
        config.servers.insert(name.to_string(), server);
        config.save(project_dir)?;
        Ok(config)
    }

    /// Removes a server and saves; an error names the servers there are.
    pub fn remove(project_dir: &Path, name: &str) -> Result<McpConfig> {
        let mut config = McpConfig::load(project_dir)?;
        if config.servers.remove(name).is_none() {
            return Err(EngineError::NotFound(format!(
                "no mcp server '{name}' in this project (configured: {})",
                if config.servers.is_empty() {
                    "none".to_string()
                } else {
                    config
                        .servers
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )));
        }
        config.save(project_dir)?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_list_remove_round_trip() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(McpConfig::load(dir.path()).ok(), Some(McpConfig::default()));
        let s = ServerConfig {
            command: "node".into(),
            args: vec!["x.js".into()],
            env: BTreeMap::new(),
        };
        let c = McpConfig::add(dir.path(), "fs", s.clone()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(McpConfig::load(dir.path()).ok(), Some(c));
        assert!(matches!(
            McpConfig::add(dir.path(), "bad name", s.clone()),
            Err(EngineError::McpServerName(ServerNameError::Char {
                c: ' ',
                ..
            }))
        ));
        assert!(matches!(
            McpConfig::add(dir.path(), &"x".repeat(33), s.clone()),
            Err(EngineError::McpServerName(ServerNameError::Length {
                max: 32,
                ..
            }))
        ));
        assert!(matches!(
            McpConfig::add(
                dir.path(),
                "empty",
                ServerConfig {
                    command: String::new(),
                    ..s.clone()
                }
            ),
            Err(EngineError::McpNoCommand { server }) if server == "empty"
        ));
        assert!(McpConfig::add(dir.path(), &"x".repeat(32), s).is_ok());
        assert!(McpConfig::remove(dir.path(), "nope").is_err());
        let c = McpConfig::remove(dir.path(), "fs").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.servers.len(), 1);
    }

    #[test]
    fn a_config_that_does_not_parse_names_its_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(path(dir.path()), "{").unwrap_or_else(|e| panic!("{e}"));
        match McpConfig::load(dir.path()) {
            Err(EngineError::McpConfig { path: p, .. }) => assert_eq!(p, path(dir.path())),
            other => panic!("{other:?}"),
        }
    }
}
