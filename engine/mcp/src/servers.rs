//! The live backend: the project's configured servers, each started on first use and
//! started again after its connection failed; all stopped with the session.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::client::Client;
use super::config::McpConfig;
use super::{ListedTool, McpBackend, McpError};

/// The servers of one session.
pub struct Servers {
    config: McpConfig,
    cwd: PathBuf,
    running: BTreeMap<String, Client>,
    changed: Vec<String>,
}

impl Servers {
    /// Servers from `config`, started in `cwd` (the workspace) when first used.
    pub fn new(config: McpConfig, cwd: &Path) -> Servers {
        Servers {
            config,
            cwd: cwd.to_path_buf(),
            running: BTreeMap::new(),
            changed: Vec::new(),
        }
    }

    /// The running client of `server`, started if needed.
    fn client(&mut self, server: &str, timeout: Duration) -> Result<&mut Client, McpError> {
        if self.running.get(server).is_some_and(Client::is_dead) {
            self.running.remove(server);
        }
        if !self.running.contains_key(server) {
            let Some(cfg) = self.config.servers.get(server) else {
                return Err(McpError::Unknown {
                    server: server.to_string(),
                });
            };
            let client = Client::start(server, cfg, &self.cwd, timeout)?;
            self.running.insert(server.to_string(), client);
        }
        self.running
            .get_mut(server)
            .ok_or_else(|| McpError::Unknown {
                server: server.to_string(),
            })
    }

    fn note_changes(&mut self) {
        for (name, c) in self.running.iter_mut() {
            if c.take_list_changed() && !self.changed.contains(name) {
                self.changed.push(name.clone());
            }
        }
    }
}

impl McpBackend for Servers {
    fn servers(&self) -> Vec<String> {
        self.config.servers.keys().cloned().collect()
    }

    fn list_tools(&mut self, server: &str, timeout: Duration) -> Result<Vec<ListedTool>, McpError> {
        let tools = self.client(server, timeout)?.list_tools(timeout);
        self.note_changes();
        // This listing is the fresh one.
        self.changed.retain(|s| s != server);
        tools
    }

    fn call_tool(
        &mut self,
        server: &str,
        tool: &str,
        arguments: &Value,
        timeout: Duration,
        cancel: &crate::CancelHandle,
    ) -> Result<Value, McpError> {
        let result = self
            .client(server, timeout)?
            .call_tool(tool, arguments, timeout, cancel);
        self.note_changes();
        result
    }

    fn take_changed(&mut self) -> Vec<String> {
        self.note_changes();
        std::mem::take(&mut self.changed)
    }

    fn shutdown(&mut self) {
        for (_, mut c) in std::mem::take(&mut self.running) {
            c.stop();
        }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.shutdown();
    }
}
