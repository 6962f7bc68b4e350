//! search_text (thndrs): regex search over file contents, `path:line:text` matches.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::tool::{Ctx, InputError, ToolOutput, TypedTool};
use crate::tools::search::{self, Extensions, LineSearch, PathGlob, WalkOptions};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Regex pattern (Rust regex syntax), matched line by line; must not be empty.
    pub pattern: String,
    /// Optional glob filter: `*.rs` matches file names at any depth, `src/**/*.rs`
    /// matches paths from the workspace root.
    pub glob: Option<String>,
    /// Optional extension filter, e.g. ["rs", "toml"]; a file must have one of them.
    pub extensions: Option<Vec<String>>,
    /// Optional surrounding line count shown before and after each match (clamped to
    /// the session's context limit).
    pub context_lines: Option<u32>,
    /// Include hidden files and folders (names starting with `.`); default false.
    /// A glob that names a hidden entry, such as `.github/**`, includes them.
    #[serde(default)]
    pub include_hidden: bool,
}

pub struct SearchText;

impl TypedTool for SearchText {
    type Input = Input;
    const NAME: &'static str = "search_text";
    const DESCRIPTION: &'static str = "Search file contents with a regex and return path:line:text matches (context lines as path-line-text), sorted by path and line. Skips binary, ignored and oversized files. No match is not an error. Matches and line length are capped.";
    const MUTATING: bool = false;

    /// An empty pattern matches every line of every file: refused, as thndrs refuses it.
    fn check(&self, input: &Input) -> std::result::Result<(), InputError> {
        if input.pattern.is_empty() {
            return Err(InputError::Rule(
                "pattern is empty: give a regular expression to search for (an empty pattern would match every line of every file)".into(),
            ));
        }
        Ok(())
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let matcher = match search::regex(&input.pattern, false) {
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
        let root = match search::folder(ctx, None, "") {
            Ok(f) => f,
            Err(out) => return Ok(out),
        };
        let (context, mut notes) =
            search::clamp_context("context_lines", input.context_lines, ctx.limits);
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
        let files: Vec<_> = walked
            .files()
            .filter(|f| glob.as_ref().is_none_or(|g| g.matches(&f.rel, "")))
            .filter(|f| extensions.as_ref().is_none_or(|e| e.matches(&f.rel)))
            .collect();
        let (files, credentials) = search::without_credentials(files, ctx.credential_files);
        let mut report = search::search(
            &LineSearch {
                fs: ctx.fs,
                redactor: ctx.redactor,
                matcher: &matcher,
                context,
                matches_max: ctx.limits.search_matches_max,
                chars_max: ctx.limits.match_chars_max,
                bytes_max: ctx.limits.read_file_bytes_max,
            },
            &files,
        );
        report.skipped.credentials = credentials;
        notes.extend(walked.notes(root.display()));
        let hint = if hidden {
            ""
        } else {
            "hidden files were not searched: set include_hidden to include them"
        };
        let text = search::render_search(
            report,
            ctx.limits.read_file_bytes_max,
            &notes,
            hint,
            ctx.redactor,
            ctx.redactions,
        );
        Ok(ToolOutput::ok_redacted(text))
    }
}
