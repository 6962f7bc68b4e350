//! list_searchable_files (thndrs): the files a content search would look at.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::tool::{Ctx, ToolOutput, TypedTool};
use crate::tools::search::{self, PathGlob, WalkOptions};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Optional glob filter: `*.rs` matches file names at any depth, `src/**/*.rs`
    /// matches paths from the workspace root.
    pub glob: Option<String>,
    /// Include hidden files and folders (names starting with `.`); default false.
    /// A glob that names a hidden entry, such as `.github/**`, includes them.
    #[serde(default)]
    pub include_hidden: bool,
}

pub struct ListSearchableFiles;

impl TypedTool for ListSearchableFiles {
    type Input = Input;
    const NAME: &'static str = "list_searchable_files";
    const DESCRIPTION: &'static str = "Enumerate files that are reasonable candidates for content search: text files, not ignored (.gitignore, .ignore), within the size limit, sorted by path and capped. Prefer find_files when the target name is known and search_text when the target content is known.";
    const MUTATING: bool = false;

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let glob = match input.glob.as_deref().map(PathGlob::new).transpose() {
            Ok(g) => g,
            Err(e) => return Ok(ToolOutput::error(e.to_string())),
        };
        let root = match search::folder(ctx, None, "") {
            Ok(f) => f,
            Err(out) => return Ok(out),
        };
        let hidden =
            input.include_hidden || input.glob.as_deref().is_some_and(search::names_hidden);
        let walked = search::walk(
            ctx,
            &root,
            WalkOptions {
                hidden,
                ..WalkOptions::default()
            },
        );
        let candidates: Vec<_> = walked
            .files()
            .filter(|f| glob.as_ref().is_none_or(|g| g.matches(&f.rel, "")))
            .collect();
        // What search_text leaves out is not a candidate.
        let (candidates, credentials) =
            search::without_credentials(candidates, ctx.credential_files);
        let (keep, mut skipped) =
            search::searchable(ctx.fs, &candidates, ctx.limits.read_file_bytes_max);
        skipped.credentials = credentials;
        let paths: Vec<String> = keep.iter().map(|f| f.rel.clone()).collect();
        let mut out = if paths.is_empty() {
            vec!["no searchable files found".to_string()]
        } else {
            search::capped_list(
                &paths,
                ctx.limits.list_entries_max,
                ("file", "files"),
                "add a glob to narrow the list",
            )
        };
        out.extend(walked.notes(root.display()));
        out.extend(skipped.note(ctx.limits.read_file_bytes_max));
        Ok(ToolOutput::ok(out.join("\n")))
    }
}
