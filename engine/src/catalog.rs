//! The two catalog profiles and the registry. Each profile exposes one seed agent's
//! tools under their exact names and input fields; both are backed by the same
//! implementations in `tools/`.

use serde::{Deserialize, Serialize};

use crate::limits::Limits;
use crate::tool::Tool;
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
    type Err = String;
    fn from_str(s: &str) -> Result<Catalog, String> {
        match s {
            "thndrs" => Ok(Catalog::Thndrs),
            "thoth" => Ok(Catalog::Thoth),
            _ => Err(format!("unknown catalog '{s}': expected thndrs or thoth")),
        }
    }
}

/// The tools of one catalog, in the order they are offered.
pub struct Registry {
    catalog: Catalog,
    tools: Vec<Box<dyn Tool>>,
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
                Box::new(tools::web_search::WebSearch),
                Box::new(tools::read_url::ReadUrl),
            ],
            Catalog::Thoth => vec![
                Box::new(tools::read_file::ReadFile),
                Box::new(tools::list_dir::ListDir),
                Box::new(tools::glob::Glob),
                Box::new(tools::grep::Grep),
                Box::new(tools::write_file::WriteFile),
                Box::new(tools::edit_file::EditFile),
                Box::new(tools::problems::Problems),
                Box::new(tools::web_search::WebSearch),
                Box::new(tools::web_fetch::WebFetch),
                Box::new(tools::remember::Remember),
            ],
        };
        Registry { catalog, tools }
    }

    pub fn catalog(&self) -> Catalog {
        self.catalog
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
    out
}

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
                let s = t.schema();
                assert_eq!(s["type"], "object", "{}: {s}", t.name());
                assert!(s["properties"].is_object(), "{}: {s}", t.name());
            }
        }
    }
}
