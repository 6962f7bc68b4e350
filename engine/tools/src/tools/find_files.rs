//! find_files (thndrs): locate files by name or glob under the workspace root.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::tool::{Ctx, ToolOutput, TypedTool};
use crate::tools::search::{self, Extensions, PathGlob, PatternError, WalkOptions};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// File name or glob pattern. A plain name matches files whose name contains it,
    /// ignoring case (`readme` finds `README.md`); a glob such as `*.rs` matches file
    /// names at any depth, and one with a `/` such as `src/**/*.rs` matches paths from
    /// the workspace root.
    pub pattern: String,
    /// Optional additional glob filter the path must also match, e.g. `src/**`.
    pub glob: Option<String>,
    /// Optional extension filter, e.g. ["rs", "toml"]; a file must have one of them.
    pub extensions: Option<Vec<String>>,
    /// Optional traversal depth: 1 finds only files directly in the workspace root.
    pub max_depth: Option<u32>,
    /// Include hidden files and folders (names starting with `.`); default false.
    /// A pattern or glob that names a hidden entry, such as `.github/**`, includes them.
    #[serde(default)]
    pub include_hidden: bool,
    /// Follow symlinks (never out of the workspace); default false.
    #[serde(default)]
    pub follow_symlinks: bool,
}

pub struct FindFiles;

/// How `pattern` selects files.
enum NameMatch {
    Glob(PathGlob),
    /// Lowercased text the file name (or, with a `/`, the path) must contain.
    Contains(String),
}

impl NameMatch {
    fn new(pattern: &str) -> Result<NameMatch, PatternError> {
        if pattern.trim().is_empty() {
            return Err(PatternError::EmptyName);
        }
        if pattern.contains(['*', '?', '[', '{']) {
            PathGlob::new(pattern).map(NameMatch::Glob)
        } else {
            Ok(NameMatch::Contains(
                pattern.trim().trim_start_matches("./").to_lowercase(),
            ))
        }
    }

    fn matches(&self, rel: &str) -> bool {
        match self {
            NameMatch::Glob(g) => g.matches(rel, ""),
            NameMatch::Contains(s) if s.contains('/') => rel.to_lowercase().contains(s.as_str()),
            NameMatch::Contains(s) => {
                let name = rel.rsplit('/').next().unwrap_or(rel);
                // Most names are ASCII: compared without lowercasing a copy.
                if name.is_ascii() && s.is_ascii() {
                    contains_ascii_nocase(name.as_bytes(), s.as_bytes())
                } else {
                    name.to_lowercase().contains(s.as_str())
                }
            }
        }
    }
}

/// True when `hay` contains `needle` (lowercase) ignoring ASCII case.
fn contains_ascii_nocase(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || hay.windows(needle.len()).any(|w| {
            w.iter()
                .zip(needle)
                .all(|(a, b)| a.to_ascii_lowercase() == *b)
        })
}

impl TypedTool for FindFiles {
    type Input = Input;
    const NAME: &'static str = "find_files";
    const DESCRIPTION: &'static str = "Locate files by name or glob under the workspace root. Hidden files and symlinks are off by default; ignored files (.gitignore, .ignore) are left out. Results are sorted by path and capped. Prefer find_files when the target name is known and search_text when the target content is known.";
    const MUTATING: bool = false;

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let name = match NameMatch::new(&input.pattern) {
            Ok(m) => m,
            Err(e) => return Ok(ToolOutput::error(e.to_string())),
        };
        let glob = match input.glob.as_deref().map(PathGlob::new).transpose() {
            Ok(g) => g,
            Err(e) => return Ok(ToolOutput::error(e.to_string())),
        };
        let extensions = match Extensions::new(input.extensions.as_deref()) {
            Ok(e) => e,
            Err(e) => return Ok(ToolOutput::error(e.to_string())),
        };
        if input.max_depth == Some(0) {
            return Ok(ToolOutput::error(
                "max_depth must be at least 1 (1 = files directly in the workspace root)",
            ));
        }
        let root = match search::folder(ctx, None, "") {
            Ok(f) => f,
            Err(out) => return Ok(out),
        };
        let hidden = input.include_hidden
            || search::names_hidden(&input.pattern)
            || input.glob.as_deref().is_some_and(search::names_hidden);
        let walked = search::walk(
            ctx,
            &root,
            WalkOptions {
                hidden,
                follow_symlinks: input.follow_symlinks,
                depth_max: input.max_depth.map(|d| d as usize),
                skip_build_folders: false,
            },
        );
        // The answer is written as the paths are matched (in path order): the first
        // list_entries_max of them, then a note on how many more there were.
        let shown_max = ctx.limits.list_entries_max;
        let mut out = String::new();
        let mut found = 0usize;
        for f in walked
            .files()
            .filter(|f| name.matches(&f.rel))
            .filter(|f| glob.as_ref().is_none_or(|g| g.matches(&f.rel, "")))
            .filter(|f| extensions.as_ref().is_none_or(|e| e.matches(&f.rel)))
        {
            if found < shown_max {
                if found > 0 {
                    out.push('\n');
                }
                out.push_str(&f.rel);
            }
            found += 1;
        }
        let mut tail = Vec::new();
        if found == 0 {
            let mut line = format!("no files found matching `{}`", input.pattern);
            if !hidden {
                line.push_str(
                    " (hidden files were not searched: set include_hidden to include them)",
                );
            }
            tail.push(line);
        } else if found > shown_max {
            tail.push(search::more_not_shown(
                found - shown_max,
                ("file", "files"),
                "narrow the pattern or add a glob",
            ));
        }
        tail.extend(walked.notes(root.display()));
        for line in tail {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&line);
        }
        Ok(ToolOutput::ok(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_names_match_as_lowercasing_matches() {
        for (name, needle) in [
            ("README.md", "readme"),
            ("readme", "readme"),
            ("x_Test.rs", "test"),
            ("tes", "test"),
            ("", "a"),
            ("abc", ""),
        ] {
            assert_eq!(
                contains_ascii_nocase(name.as_bytes(), needle.as_bytes()),
                name.to_lowercase().contains(needle),
                "{name} {needle}"
            );
        }
    }
}
