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
            NameMatch::Contains(s) => rel
                .rsplit('/')
                .next()
                .unwrap_or(rel)
                .to_lowercase()
                .contains(s.as_str()),
        }
    }
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
        let found: Vec<String> = walked
            .files()
            .filter(|f| name.matches(&f.rel))
            .filter(|f| glob.as_ref().is_none_or(|g| g.matches(&f.rel, "")))
            .filter(|f| extensions.as_ref().is_none_or(|e| e.matches(&f.rel)))
            .map(|f| f.rel.clone())
            .collect();
        let mut out = if found.is_empty() {
            let mut line = format!("no files found matching `{}`", input.pattern);
            if !hidden {
                line.push_str(
                    " (hidden files were not searched: set include_hidden to include them)",
                );
            }
            vec![line]
        } else {
            search::capped_list(
                &found,
                ctx.limits.list_entries_max,
                ("file", "files"),
                "narrow the pattern or add a glob",
            )
        };
        out.extend(walked.notes(root.display()));
        Ok(ToolOutput::ok(out.join("\n")))
    }
}
