//! The two catalog profiles and the registry. Each profile exposes one seed agent's
//! tools under their exact names and input fields; both are backed by the same
//! implementations in `tools/`.

use serde::{Deserialize, Serialize};

use crate::limits::Limits;
use crate::tool::{Effects, Tool};
use crate::tools;

/// A catalog profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Catalog {
    Thndrs,
    Thoth,
}

impl Catalog {
    pub const ALL: [Catalog; 2] = [Catalog::Thndrs, Catalog::Thoth];

    pub fn name(&self) -> &'static str {
        match self {
            Catalog::Thndrs => "thndrs",
            Catalog::Thoth => "thoth",
        }
    }

    /// The limits this catalog's agent uses by default.
    pub fn limits(&self) -> Limits {
        match self {
            Catalog::Thndrs => Limits::thndrs(),
            Catalog::Thoth => Limits::thoth(),
        }
    }
}

impl std::str::FromStr for Catalog {
    type Err = cairn_store::ParseNameError;
    fn from_str(s: &str) -> Result<Catalog, cairn_store::ParseNameError> {
        match s {
            "thndrs" => Ok(Catalog::Thndrs),
            "thoth" => Ok(Catalog::Thoth),
            _ => Err(cairn_store::ParseNameError {
                what: "catalog",
                name: s.to_string(),
                expected: &["thndrs", "thoth"],
            }),
        }
    }
}

/// What the tool called `name` does, in whichever catalog offers it (a name means one
/// implementation in both), for readers of a log that know no registry: names of MCP
/// tools (`mcp__…`) answer from outside; `None` for a name no catalog has.
pub fn effects_of(name: &str) -> Option<Effects> {
    if name.starts_with(crate::mcp_names::MCP_PREFIX) {
        return Some(Effects::MCP);
    }
    Catalog::ALL
        .iter()
        .find_map(|c| Registry::new(*c).get(name).map(|t| t.effects()))
}

/// An MCP tool name a registry refuses: it would shadow a built-in or another tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "mcp tool name '{name}' of server '{server}' is refused: it must start with {} and name no other tool",
    crate::mcp_names::MCP_PREFIX
)]
pub struct McpToolNameError {
    pub name: String,
    pub server: String,
}

/// The tools of one catalog, in the order they are offered: the built-ins, then the
/// tools of MCP servers (added at run time, always named `mcp__{server}__{tool}`).
pub struct Registry {
    catalog: Catalog,
    tools: Vec<Box<dyn Tool>>,
    mcp: Vec<McpTool>,
}

/// A tool of an MCP server, as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// The namespaced name (`mcp__{server}__{tool}`, sanitised).
    pub name: String,
    pub server: String,
    /// The tool's name on its server.
    pub tool: String,
    pub description: String,
    /// The input schema, as the server gave it.
    pub schema: serde_json::Value,
    /// The server says it only reads (`readOnlyHint`).
    pub read_only: bool,
}

impl Registry {
    pub fn new(catalog: Catalog) -> Registry {
        let tools: Vec<Box<dyn Tool>> = match catalog {
            Catalog::Thndrs => vec![
                Box::new(tools::find_files::FindFiles),
                Box::new(tools::list_searchable_files::ListSearchableFiles),
                Box::new(tools::search_text::SearchText),
                Box::new(tools::read_file_range::ReadFileRange),
                Box::new(tools::create_file::CreateFile),
                Box::new(tools::replace_range::ReplaceRange),
                Box::new(tools::write_patch::WritePatch),
                Box::new(tools::command::RunShell::new()),
                Box::new(tools::web_search::WebSearch),
                Box::new(tools::fetch::ReadUrl::new()),
            ],
            Catalog::Thoth => vec![
                Box::new(tools::read_file::ReadFile),
                Box::new(tools::list_dir::ListDir),
                Box::new(tools::glob::Glob),
                Box::new(tools::grep::Grep),
                Box::new(tools::write_file::WriteFile),
                Box::new(tools::edit_file::EditFile),
                Box::new(tools::command::Shell::new()),
                Box::new(tools::problems::Problems),
                Box::new(tools::web_search::WebSearch),
                Box::new(tools::fetch::WebFetch::new()),
                Box::new(tools::remember::Remember),
            ],
        };
        Registry {
            catalog,
            tools,
            mcp: Vec::new(),
        }
    }

    /// Replaces the MCP tools of `server`. Refuses (changing nothing) a name that does
    /// not start with `mcp__`, or that is a built-in's or another server's: built-ins
    /// can never be shadowed.
    pub fn set_mcp_tools(
        &mut self,
        server: &str,
        tools: Vec<McpTool>,
    ) -> Result<(), McpToolNameError> {
        let others: Vec<&McpTool> = self.mcp.iter().filter(|t| t.server != server).collect();
        let mut seen = std::collections::BTreeSet::new();
        for t in &tools {
            if !t.name.starts_with(crate::mcp_names::MCP_PREFIX)
                || self.get(&t.name).is_some()
                || others.iter().any(|o| o.name == t.name)
                || !seen.insert(t.name.as_str())
            {
                return Err(McpToolNameError {
                    name: t.name.clone(),
                    server: server.to_string(),
                });
            }
        }
        self.mcp.retain(|t| t.server != server);
        self.mcp.extend(tools);
        Ok(())
    }

    /// An MCP tool by its namespaced name.
    pub fn mcp_tool(&self, name: &str) -> Option<&McpTool> {
        self.mcp.iter().find(|t| t.name == name)
    }

    /// The MCP tools offered, after the built-ins.
    pub fn mcp_tools(&self) -> &[McpTool] {
        &self.mcp
    }

    /// Every tool name offered: built-ins, then MCP tools.
    pub fn all_names(&self) -> Vec<String> {
        self.tools
            .iter()
            .map(|t| t.name().to_string())
            .chain(self.mcp.iter().map(|t| t.name.clone()))
            .collect()
    }

    pub fn catalog(&self) -> Catalog {
        self.catalog
    }

    /// What the tool called `name` does besides answering: a built-in's own
    /// [`Effects`], or, for an MCP tool, an answer from outside. `None` for a name this
    /// registry lacks.
    pub fn effects(&self, name: &str) -> Option<Effects> {
        if let Some(t) = self.get(name) {
            return Some(t.effects());
        }
        self.mcp_tool(name).map(|_| Effects::MCP)
    }

    pub fn get(&self, name: &str) -> Option<&dyn Tool> {
        self.tools
            .iter()
            .find(|t| t.name() == name)
            .map(|t| t.as_ref())
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    pub fn tools(&self) -> impl Iterator<Item = &dyn Tool> {
        self.tools.iter().map(|t| t.as_ref())
    }

    /// The catalog as provider tool schemas: name, description, input schema.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.tools()
                .map(|t| {
                    serde_json::json!({
                        "name": t.name(),
                        "description": t.description(),
                        "mutating": t.is_mutating(),
                        "input_schema": t.schema(),
                    })
                })
                .chain(self.mcp.iter().map(|t| {
                    serde_json::json!({
                        "name": t.name,
                        "description": t.description,
                        "mutating": !t.read_only,
                        "input_schema": t.schema,
                        "mcp": {"server": t.server, "tool": t.tool},
                    })
                }))
                .collect(),
        )
    }
}

/// The catalogs as Markdown: `docs/TOOLS.md` is this text.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Tools\n\nGenerated from the registry by `cairn tools --markdown`; a test fails when this file is stale.\n",
    );
    for c in Catalog::ALL {
        let r = Registry::new(c);
        out.push_str(&format!("\n## Catalog `{}`\n", c.name()));
        for t in r.tools() {
            out.push_str(&format!(
                "\n### `{}`{}\n\n{}\n\n| field | type | required | description |\n|---|---|---|---|\n",
                t.name(),
                if t.is_mutating() { " (writes)" } else { "" },
                t.description()
            ));
            let schema = t.schema();
            let required: Vec<&str> = schema["required"]
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                .unwrap_or_default();
            if let Some(props) = schema["properties"].as_object() {
                for (name, p) in props {
                    let ty = p["type"].clone();
                    let ty = match ty {
                        serde_json::Value::String(s) => s,
                        serde_json::Value::Array(a) => a
                            .iter()
                            .filter_map(|v| v.as_str())
                            .filter(|s| *s != "null")
                            .collect::<Vec<_>>()
                            .join(" | "),
                        _ => "object".to_string(),
                    };
                    let desc = p["description"].as_str().unwrap_or("").replace('\n', " ");
                    let req = if required.contains(&name.as_str()) {
                        "yes"
                    } else {
                        "no"
                    };
                    out.push_str(&format!("| `{name}` | {ty} | {req} | {desc} |\n"));
                }
            }
        }
    }
    out.push_str(include_str!("permissions.md"));
    out.push_str(PROGRAMS_DOC);
    for p in cairn_core::command::table::PROGRAMS {
        let names: Vec<String> = p.names.iter().map(|n| format!("`{n}`")).collect();
        let cell = |s: &str| {
            if s.is_empty() {
                "—".to_string()
            } else {
                s.to_string()
            }
        };
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            names.join(", "),
            cell(p.runs),
            cell(p.writes)
        ));
    }
    out.push_str(CREDENTIAL_FILES_DOC);
    for (pattern, what) in cairn_core::permission::DEFAULT_CREDENTIAL_FILES {
        out.push_str(&format!("| `{pattern}` | {what} |\n"));
    }
    out.push_str(include_str!("sandbox.md"));
    out.push_str(include_str!("differences.md"));
    out
}

const PROGRAMS_DOC: &str = "
### Programs that run programs

A grant for one of these programs covers only an invocation whose options cannot make it run, load or write something else: each option is read by this table (`cairn_core::command::table::PROGRAMS`), an option it does not know asks, and so does a word the line does not give where an option could be. Wrappers (`env`, `xargs`, `find -exec`, `timeout`, `nice`, …) are keyed by what they run as well, and interpreters given inline code (`python3 -c`, `node -e`, …) have keys of their own.

| program | runs or loads another program (asks) | writes (judged as a redirection) |
|---|---|---|
";

const CREDENTIAL_FILES_DOC: &str = "
### Credential files

Reading a file that matches one of these patterns asks first, even inside the workspace, under a key of its own: `read_credentials:<path>`. An \"always\" covers that one file, and no grant of a tool (`read_file`, `grep`) covers it. `grep` asks the same when its `path` names one; a search of a folder (`grep`, `search_text`, `list_searchable_files`) leaves them out and says how many.

A pattern is a glob matched against the path relative to the workspace, ignoring case, at any depth: `*.pem` matches `a/b/c.pem`, `.kube/config` matches `deploy/.kube/config`. One that starts with `/` matches from the workspace root only; `*` does not cross a `/`. The list is the session configuration's `credential_files` (`EngineConfig::credential_files`), recorded in `session_started`: verify checks a session against its own list. The default:

| pattern | what it holds |
|---|---|
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_schema_is_an_object_schema() {
        for c in Catalog::ALL {
            let r = Registry::new(c);
            let mut names = r.names();
            names.sort();
            let before = names.len();
            names.dedup();
            assert_eq!(before, names.len(), "duplicate tool names in {}", c.name());
            for t in r.tools() {
                assert!(
                    !t.name().starts_with(crate::mcp_names::MCP_PREFIX),
                    "{}",
                    t.name()
                );
                let s = t.schema();
                assert_eq!(s["type"], "object", "{}: {s}", t.name());
                assert!(s["properties"].is_object(), "{}: {s}", t.name());
            }
        }
    }
}

#[cfg(test)]
mod mcp_tests {
    use super::*;

    #[test]
    fn catalog_names_parse_or_say_which_exist() {
        assert_eq!("thoth".parse::<Catalog>(), Ok(Catalog::Thoth));
        assert_eq!(
            "x".parse::<Catalog>().map_err(|e| e.to_string()),
            Err("unknown catalog 'x': expected thndrs or thoth".to_string())
        );
    }

    fn tool(server: &str, name: &str) -> McpTool {
        McpTool {
            name: name.to_string(),
            server: server.to_string(),
            tool: name.rsplit("__").next().unwrap_or(name).to_string(),
            description: String::new(),
            schema: serde_json::json!({"type": "object"}),
            read_only: false,
        }
    }

    #[test]
    fn mcp_tools_are_appended_and_never_shadow_a_built_in() {
        let mut r = Registry::new(Catalog::Thoth);
        let builtins = r.names().len();
        // A server's own "read_file" becomes mcp__s__read_file: the built-in stays.
        let name = crate::mcp_names::tool_name("s", "read_file", &|n| r.get(n).is_some());
        assert_eq!(name, "mcp__s__read_file");
        r.set_mcp_tools("s", vec![tool("s", &name)])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.all_names().len(), builtins + 1);
        assert_eq!(
            r.all_names().last().map(String::as_str),
            Some("mcp__s__read_file")
        );
        assert!(r.get("read_file").is_some() && r.mcp_tool("read_file").is_none());
        // A name without the prefix, a built-in's, or another server's is refused.
        assert_eq!(
            r.set_mcp_tools("t", vec![tool("t", "read_file")])
                .map_err(|e| e.to_string()),
            Err("mcp tool name 'read_file' of server 't' is refused: it must start with mcp__ and name no other tool".into())
        );
        assert!(
            r.set_mcp_tools("t", vec![tool("t", "mcp__s__read_file")])
                .is_err()
        );
        assert!(
            r.set_mcp_tools("t", vec![tool("t", "mcp__t__a"), tool("t", "mcp__t__a")])
                .is_err()
        );
        assert_eq!(r.mcp_tools().len(), 1);
        // Replacing a server's tools (after list_changed) drops the old ones.
        r.set_mcp_tools("s", vec![tool("s", "mcp__s__b")])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.mcp_tools()
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>(),
            ["mcp__s__b"]
        );
        assert_eq!(r.to_json().as_array().map(Vec::len), Some(builtins + 1));
    }
}

#[cfg(test)]
mod effects_tests {
    use super::*;

    // Replay, verify and audit ask these instead of knowing tools by name: a tool whose
    // effects are wrong would make verify cry wolf (writes) or replay run the network.
    #[test]
    fn every_tool_says_what_it_does() {
        let names = |f: fn(&Effects) -> bool| {
            let mut v: Vec<&str> = Catalog::ALL
                .iter()
                .flat_map(|c| Registry::new(*c).names())
                .filter(|n| effects_of(n).is_some_and(|e| f(&e)))
                .collect();
            v.sort();
            v.dedup();
            v
        };
        assert_eq!(
            names(|e| e.writes),
            [
                "create_file",
                "edit_file",
                "replace_range",
                "write_file",
                "write_patch"
            ]
        );
        assert_eq!(
            names(|e| e.runs_commands),
            ["problems", "run_shell", "shell"]
        );
        assert_eq!(
            names(|e| e.external),
            ["read_url", "web_fetch", "web_search"]
        );
        assert_eq!(names(|e| e.search_query.is_some()), ["web_search"]);
        assert_eq!(
            names(|e| e.fetches == crate::tool::Fetches::Page),
            ["read_url", "web_fetch"]
        );
        assert_eq!(
            names(|e| e.fetches == crate::tool::Fetches::Search),
            ["web_search"]
        );
        assert_eq!(names(|e| e.reads_file), ["read_file", "read_file_range"]);
        assert_eq!(names(|e| e.remembers), ["remember"]);
        assert_eq!(names(|e| e.background.is_some()), ["run_shell", "shell"]);
        assert_eq!(names(|e| e.cwd.is_some()), ["run_shell"]);
        assert_eq!(names(|e| e.mcp), Vec::<&str>::new());
        assert_eq!(names(|e| e.lists_ignored), ["list_dir"]);
        assert_eq!(
            effects_of("mcp__fs__write"),
            Some(Effects {
                external: true,
                mcp: true,
                ..Effects::NONE
            })
        );
        assert_eq!(effects_of("no_such_tool"), None);
    }
}
