//! glob (thoth): find files by pattern, e.g. `**/*.rs`.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::tool::{Ctx, ToolOutput, TypedTool};
use crate::tools::search::{self, PathGlob, WalkOptions};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Glob pattern, e.g. `**/*.rs` or `src/**/mod.rs`. Without a `/` it matches file
    /// names at any depth; with one, paths relative to `path`. Hidden files are included
    /// only when the pattern names them, e.g. `.github/**/*.yml`.
    pub pattern: String,
    /// Folder to search, relative to the workspace root (default: the workspace root).
    pub path: Option<String>,
}

pub struct Glob;

impl TypedTool for Glob {
    type Input = Input;
    const NAME: &'static str = "glob";
    const DESCRIPTION: &'static str = "Find files by pattern, e.g. **/*.rs. Returns workspace-relative paths sorted by path, capped; ignored files (.gitignore, .ignore), hidden files and build folders (node_modules, target, dist, build, venv, __pycache__, vendor) are left out unless the pattern or path names them.";
    const MUTATING: bool = false;

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let glob = match PathGlob::new(&input.pattern) {
            Ok(g) => g,
            Err(e) => return Ok(ToolOutput::error(e.to_string())),
        };
        let base = match search::folder(
            ctx,
            input.path.as_deref(),
            "give its folder as path, or read it with read_file",
        ) {
            Ok(f) => f,
            Err(out) => return Ok(out),
        };
        let walked = search::walk(
            ctx,
            &base,
            WalkOptions {
                hidden: search::names_hidden(&input.pattern),
                skip_build_folders: !search::names_build_folder(&input.pattern),
                ..WalkOptions::default()
            },
        );
        let found: Vec<String> = walked
            .files()
            .filter(|f| glob.matches(&f.rel, &base.rel))
            .map(|f| f.rel.clone())
            .collect();
        let mut out = if found.is_empty() {
            vec![format!(
                "no files match `{}` in {}",
                input.pattern,
                base.display()
            )]
        } else {
            search::capped_list(
                &found,
                ctx.limits.list_entries_max,
                ("file", "files"),
                "narrow the pattern or the path",
            )
        };
        out.extend(walked.notes(base.display()));
        Ok(ToolOutput::ok(out.join("\n")))
    }
}
