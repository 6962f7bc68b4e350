//! grep (thoth): regex search over file contents, with surrounding lines on request.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::permission::Need;
use crate::tool::{Ctx, ToolOutput, TypedTool};
use crate::tools::search::{self, LineSearch, PathGlob, Target, WalkOptions};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Regular expression (Rust regex syntax), matched line by line.
    pub pattern: String,
    /// File or folder to search, relative to the workspace root (default: the
    /// workspace root).
    pub path: Option<String>,
    /// Only search files matching this glob: `*.rs` matches file names at any depth,
    /// `src/**/*.rs` matches paths relative to `path`. Hidden files are included only
    /// when the glob names them, e.g. `.github/**`.
    pub glob: Option<String>,
    /// Lines of context shown before and after each match (clamped to the session's
    /// context limit).
    pub context: Option<u32>,
    /// Match regardless of letter case; default false.
    #[serde(default)]
    pub case_insensitive: bool,
}

pub struct Grep;

impl TypedTool for Grep {
    type Input = Input;
    const NAME: &'static str = "grep";
    const DESCRIPTION: &'static str = "Regex search over file contents: path:line:text matches (context lines as path-line-text), sorted by path and line. Skips binary, ignored, hidden and oversized files, and build folders (node_modules, target, dist, build, venv, __pycache__, vendor) unless the path or glob names them. No match is not an error. Matches and line length are capped.";
    const MUTATING: bool = false;

    /// Naming a credential file asks first, as reading it does; a folder's search
    /// leaves credential files out instead.
    fn permission(
        &self,
        input: &Input,
        _raw: &serde_json::Value,
        at: &crate::tool::Asking<'_>,
    ) -> Need {
        match &input.path {
            Some(path) => crate::permission::read_need(Self::NAME, path, at.credential_files),
            None => Need::Auto,
        }
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let matcher = match search::regex(&input.pattern, input.case_insensitive) {
            Ok(m) => m,
            Err(e) => return Ok(ToolOutput::error(e.to_string())),
        };
        let glob = match input.glob.as_deref().map(PathGlob::new).transpose() {
            Ok(g) => g,
            Err(e) => return Ok(ToolOutput::error(e.to_string())),
        };
        let target = match search::target(ctx, input.path.as_deref()) {
            Ok(t) => t,
            Err(out) => return Ok(out),
        };
        let (context, mut notes) = search::clamp_context("context", input.context, ctx.limits);
        let query = LineSearch {
            fs: ctx.fs,
            redactor: ctx.redactor,
            matcher: &matcher,
            context,
            matches_max: ctx.limits.search_matches_max,
            chars_max: ctx.limits.match_chars_max,
            bytes_max: ctx.limits.read_file_bytes_max,
        };
        let report = match &target {
            // A file the call names is searched whatever the filters say.
            Target::File(f) => search::search(&query, &[f]),
            Target::Folder(base) => {
                let walked = search::walk(
                    ctx,
                    base,
                    WalkOptions {
                        hidden: input.glob.as_deref().is_some_and(search::names_hidden),
                        skip_build_folders: !input
                            .glob
                            .as_deref()
                            .is_some_and(search::names_build_folder),
                        ..WalkOptions::default()
                    },
                );
                let files: Vec<_> = walked
                    .files()
                    .filter(|f| glob.as_ref().is_none_or(|g| g.matches(&f.rel, &base.rel)))
                    .collect();
                let (files, credentials) = search::without_credentials(files, ctx.credential_files);
                notes.extend(walked.notes(base.display()));
                let mut report = search::search(&query, &files);
                report.skipped.credentials = credentials;
                report
            }
        };
        if let Target::File(f) = &target {
            let s = report.skipped;
            let bytes_max = ctx.limits.read_file_bytes_max;
            if s.binary > 0 {
                return Ok(ToolOutput::error(format!(
                    "{} is a binary file; grep searches text files only",
                    f.rel
                )));
            }
            if s.too_big > 0 {
                return Ok(ToolOutput::error(format!(
                    "{} is over read_file_bytes_max = {bytes_max} bytes; grep skips files that large",
                    f.rel
                )));
            }
            if s.unreadable > 0 {
                return Ok(ToolOutput::error(format!("cannot read {}", f.rel)));
            }
        }
        let text = search::render_search(
            report,
            ctx.limits.read_file_bytes_max,
            &notes,
            "",
            ctx.redactor,
            ctx.redactions,
        );
        Ok(ToolOutput::ok_redacted(text))
    }
}
