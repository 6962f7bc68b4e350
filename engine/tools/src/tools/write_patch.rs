//! write_patch (thndrs): one create, or one replace, or several exact edits of one
//! file, validated as a whole before anything is written: all or nothing.

use schemars::JsonSchema;
use serde::Deserialize;

use cairn_core::decide;

use crate::error::Result;
use crate::event::WriteOp;
use crate::tool::{Ctx, ToolOutput, TypedTool};
use crate::tools::write::{self, Found};

/// What a patch does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Create,
    Replace,
    Edit,
}

/// One patch of the batch.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    /// create, replace, or edit.
    pub op: Op,
    /// Path relative to the workspace root.
    pub path: String,
    /// Full content, required for create and replace.
    pub content: Option<String>,
    /// Exact string, required for edit.
    pub old_string: Option<String>,
    /// Replacement string, required for edit.
    pub new_string: Option<String>,
    /// Optional stale-content guard for edit and replace: the BLAKE3 hash of the
    /// current content, as the read tools report it.
    pub expected_before_hash: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Non-empty array of patch objects.
    pub patches: Vec<Patch>,
}

pub struct WritePatch;

impl TypedTool for WritePatch {
    type Input = Input;
    const NAME: &'static str = "write_patch";
    const DESCRIPTION: &'static str = "Unified write entry point for create, replace, and exact edit operations. A call may contain one create or replace patch, or one or more edit patches for the same file. Every edit matches the original file content; the full batch is validated before writing.";
    const MUTATING: bool = true;

    /// Every file the batch touches, as a diff of its whole content before and after
    /// all of its patches; none when a patch would not apply.
    fn preview(&self, input: &Input, read: &mut crate::tool::Preview<'_>) -> Option<String> {
        // (path, content before the batch, content after the patches so far)
        let mut files: Vec<(String, Option<String>, Option<String>)> = Vec::new();
        for p in &input.patches {
            let i = match files.iter().position(|f| f.0 == p.path) {
                Some(i) => i,
                None => {
                    let before = read(&p.path)?;
                    files.push((p.path.clone(), before.clone(), before));
                    files.len() - 1
                }
            };
            let after = match p.op {
                Op::Create | Op::Replace => p.content.clone()?,
                Op::Edit => {
                    let (old, new) = (p.old_string.as_deref()?, p.new_string.as_deref()?);
                    let cur = files[i].2.as_deref()?;
                    if old.is_empty() || cur.matches(old).count() != 1 {
                        return None;
                    }
                    cur.replacen(old, new, 1)
                }
            };
            files[i].2 = Some(after);
        }
        let mut out = format!(
            "{} {} file{}:",
            Self::NAME,
            files.len(),
            if files.len() == 1 { "" } else { "s" }
        );
        for (path, before, after) in &files {
            out.push('\n');
            out.push_str(&crate::diff::unified(
                path,
                before.as_deref(),
                after.as_deref().unwrap_or(""),
                crate::limits::PREVIEW_DIFF_LINES_MAX,
            ));
        }
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        Ok(match plan(ctx, &input.patches) {
            Err(out) => out,
            Ok(p) => return apply(ctx, p),
        })
    }
}

struct Plan {
    ws: crate::paths::WsPath,
    op: WriteOp,
    before: Option<write::Current>,
    after: Vec<u8>,
    summary: String,
}

fn plan(ctx: &mut Ctx<'_>, patches: &[Patch]) -> Result<Plan, ToolOutput> {
    let err = |m: String| Err(ToolOutput::error(m));
    let Some(first) = patches.first() else {
        return err("patches is empty: give at least one patch".into());
    };
    let whole = patches.iter().filter(|p| p.op != Op::Edit).count();
    if whole > 0 && patches.len() > 1 {
        return err("a call holds one create or replace patch, or one or more edit patches of one file; split this batch".into());
    }
    let ws = ctx.resolve(&first.path)?;
    // One file however it is spelt (`a.txt`, `./a.txt`, an absolute path).
    for (i, p) in patches.iter().enumerate().skip(1) {
        if p.path != first.path && ctx.resolve(&p.path)?.rel != ws.rel {
            return err(format!(
                "patch {} is for {} but patch 1 is for {}: edits in one call must target one file",
                i + 1,
                p.path,
                first.path
            ));
        }
    }
    let cur = write::current(ctx, &ws)?;
    match first.op {
        Op::Create => plan_create(first, ws, cur),
        Op::Replace => plan_replace(ctx, first, ws, cur),
        Op::Edit => plan_edit(ctx, patches, ws, cur),
    }
}

/// A new file: it must not exist.
fn plan_create(
    first: &Patch,
    ws: crate::paths::WsPath,
    cur: Option<write::Current>,
) -> Result<Plan, ToolOutput> {
    let err = |m: String| Err(ToolOutput::error(m));
    let Some(content) = &first.content else {
        return err("patch 1 (create) needs content".into());
    };
    if first.expected_before_hash.is_some() {
        return err("expected_before_hash applies to edit and replace, not create".into());
    }
    if cur.is_some() {
        return err(format!(
            "{} already exists; create never overwrites",
            ws.rel
        ));
    }
    let summary = format!("created {} ({} bytes)", ws.rel, content.len());
    Ok(Plan {
        ws,
        op: WriteOp::Create,
        before: None,
        after: content.clone().into_bytes(),
        summary,
    })
}

/// A whole file's content, in its own line endings; it may not exist yet.
fn plan_replace(
    ctx: &mut Ctx<'_>,
    first: &Patch,
    ws: crate::paths::WsPath,
    cur: Option<write::Current>,
) -> Result<Plan, ToolOutput> {
    let err = |m: String| Err(ToolOutput::error(m));
    let now = cur.as_ref().map(|c| c.hash);
    let Some(content) = &first.content else {
        return err("patch 1 (replace) needs content".into());
    };
    let expected: Vec<&str> = first.expected_before_hash.as_deref().into_iter().collect();
    decide::write(
        ctx.state(),
        WriteOp::Replace,
        &ws.rel,
        now.as_ref(),
        &expected,
    )
    .into_result()?;
    // In the file's own line endings, as the edits keep them.
    let after = write::whole(cur.as_ref().map(|c| c.bytes.as_slice()), content, false);
    if let Some(c) = &cur
        && c.bytes == after
    {
        return err(format!(
            "no changes made: {} already has this content",
            ws.rel
        ));
    }
    let op = if cur.is_some() {
        WriteOp::Replace
    } else {
        WriteOp::Create
    };
    let summary = format!("replaced {} ({} bytes)", ws.rel, after.len());
    Ok(Plan {
        ws,
        op,
        before: cur,
        after,
        summary,
    })
}

/// Edits of an existing file, each matching a separate part of it, applied at once.
fn plan_edit(
    ctx: &mut Ctx<'_>,
    patches: &[Patch],
    ws: crate::paths::WsPath,
    cur: Option<write::Current>,
) -> Result<Plan, ToolOutput> {
    let err = |m: String| Err(ToolOutput::error(m));
    let Some(c) = cur else {
        return Err(ctx.not_found("file", &ws.rel, "use create for a new file; "));
    };
    let expected: Vec<&str> = patches
        .iter()
        .filter_map(|p| p.expected_before_hash.as_deref())
        .collect();
    decide::write(
        ctx.state(),
        WriteOp::Edit,
        &ws.rel,
        Some(&c.hash),
        &expected,
    )
    .into_result()?;
    let Ok(content) = std::str::from_utf8(&c.bytes) else {
        return err(format!(
            "{} is not valid UTF-8; string edits would corrupt it",
            ws.rel
        ));
    };
    let mut edits = Vec::new();
    for (i, p) in patches.iter().enumerate() {
        let n = i + 1;
        let (Some(old), Some(new)) = (&p.old_string, &p.new_string) else {
            return err(format!("patch {n} (edit) needs old_string and new_string"));
        };
        if old.is_empty() {
            return err(format!(
                "patch {n}: old_string is empty; give the exact text to replace"
            ));
        }
        let old = write::follow_line_endings(content, old);
        let new = write::follow_line_endings(content, new);
        let range = match write::find(content, &old) {
            Found::Exact(hits) if hits.len() == 1 => hits[0].clone(),
            Found::Exact(hits) => {
                return err(format!(
                    "patch {n}: {}",
                    write::ambiguous(&ws.rel, content, &hits, write::Offers::Unique)
                ));
            }
            Found::Loose(r) => r,
            Found::None(hint) => {
                let hint = hint.map_or(String::new(), |(l, t)| {
                    format!("; did you mean line {l}: `{t}`?")
                });
                return err(format!(
                    "patch {n}: old_string was not found in {}{hint}",
                    ws.rel
                ));
            }
        };
        edits.push((range, new, n));
    }
    edits.sort_by_key(|(r, _, _)| r.start);
    for w in edits.windows(2) {
        if w[1].0.start < w[0].0.end {
            let (a, b) = (w[0].2.min(w[1].2), w[0].2.max(w[1].2));
            return err(format!(
                "patches {a} and {b} overlap: every edit must match a separate part of the original"
            ));
        }
    }
    let mut after = String::with_capacity(content.len());
    let mut last = 0;
    for (r, new, _) in &edits {
        after.push_str(&content[last..r.start]);
        after.push_str(new);
        last = r.end;
    }
    after.push_str(&content[last..]);
    if after == content {
        return err("no changes made: the edits leave the file as it is".into());
    }
    let summary = format!("edited {} ({} edits)", ws.rel, edits.len());
    Ok(Plan {
        ws,
        op: WriteOp::Edit,
        before: Some(c),
        after: after.into_bytes(),
        summary,
    })
}

fn apply(ctx: &mut Ctx<'_>, p: Plan) -> Result<ToolOutput> {
    write::install(ctx, &p.ws, p.op, p.before.as_ref(), &p.after, &p.summary)
}
