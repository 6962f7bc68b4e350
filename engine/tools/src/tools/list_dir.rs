//! list_dir (thoth): the entries of one folder, sorted, folders with a trailing `/`,
//! files with their size. Hidden entries are shown (`.git` never is); entries the
//! ignore rules leave out of glob and grep are marked `ignored`.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::Deserialize;

use rustix::fs::{AtFlags, FileType};

use crate::error::Result;
use crate::open::OpenError;
use crate::tool::{Ctx, Effects, ToolOutput, TypedTool};
use crate::tools::search::{self, WalkOptions};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Folder to list, relative to the workspace root (default: the workspace root).
    pub path: Option<String>,
}

pub struct ListDir;

impl TypedTool for ListDir {
    type Input = Input;
    const NAME: &'static str = "list_dir";
    const DESCRIPTION: &'static str = "List a directory: one entry a line, sorted by name, folders with a trailing /, files with their size in bytes, symlinks with their target. Entries ignored by .gitignore/.ignore are marked. Capped.";
    const MUTATING: bool = false;
    const EFFECTS: Effects = Effects {
        lists_ignored: true,
        ..Effects::NONE
    };

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let base = match search::folder(ctx, input.path.as_deref(), "read it with read_file") {
            Ok(f) => f,
            Err(out) => return Ok(out),
        };
        // Listed through a descriptor opened beneath the root: a folder swapped for a
        // symlink to outside since it was checked is not listed.
        let dir = match ctx.fs.open_dir(&base.ws) {
            Ok(fd) => fd,
            Err(OpenError::Outside(why)) => {
                return Ok(Ctx::refuse_outside(
                    input.path.as_deref().unwrap_or("."),
                    why,
                ));
            }
            Err(e) => {
                let e = match e {
                    OpenError::Io(e) => e.to_string(),
                    OpenError::NotRegular(kind) => kind.describe().to_string(),
                    OpenError::Outside(why) => why,
                };
                return Ok(ToolOutput::error(format!(
                    "cannot list {}: {e}",
                    base.display()
                )));
            }
        };
        let reader = match rustix::fs::Dir::read_from(&dir) {
            Ok(r) => r,
            Err(e) => {
                return Ok(ToolOutput::error(format!(
                    "cannot list {}: {}",
                    base.display(),
                    std::io::Error::from(e)
                )));
            }
        };
        let walked = search::walk(
            ctx,
            &base,
            WalkOptions {
                hidden: true,
                follow_symlinks: false,
                depth_max: Some(1),
                skip_build_folders: false,
            },
        );
        let admitted: BTreeSet<&str> = walked.entries.iter().map(|e| e.rel.as_str()).collect();
        let mut lines: Vec<(String, String)> = Vec::new();
        for entry in reader {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "." || name == ".." {
                continue;
            }
            let abs = base.ws.abs.join(&name);
            if name == ".git" || abs.starts_with(ctx.home) {
                continue;
            }
            let rel = if base.rel.is_empty() {
                name.clone()
            } else {
                format!("{}/{name}", base.rel)
            };
            let ignored = !admitted.contains(rel.as_str());
            let Some(line) = described(&dir, entry.file_name(), rel, ignored) else {
                continue;
            };
            lines.push((name, line));
        }
        lines.sort();
        let lines: Vec<String> = lines.into_iter().map(|(_, l)| l).collect();
        let mut out = if lines.is_empty() {
            vec![format!("{} is empty", base.display())]
        } else {
            search::capped_list(
                &lines,
                ctx.limits.list_entries_max,
                ("entry", "entries"),
                "list a subfolder, or use glob to find what you need",
            )
        };
        if walked.base_ignored {
            out.push(format!(
                "({} is ignored by the workspace's ignore rules: glob and grep skip it unless their path names it)",
                base.display()
            ));
        }
        Ok(ToolOutput::ok(out.join("\n")))
    }
}

/// An entry's line: its path (a folder's with `/`, a symlink's with its target) and
/// what is known of it (size, kind, ignored); `None` when it is gone.
fn described<Fd: rustix::fd::AsFd>(
    dir: Fd,
    name: &std::ffi::CStr,
    rel: String,
    ignored: bool,
) -> Option<String> {
    let Ok(meta) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return None;
    };
    let t = FileType::from_raw_mode(meta.st_mode);
    let mut facts: Vec<String> = Vec::new();
    let shown = if t == FileType::Directory {
        format!("{rel}/")
    } else if t == FileType::Symlink {
        let target = rustix::fs::readlinkat(&dir, name, Vec::new())
            .map_or_else(|_| "?".to_string(), |p| p.to_string_lossy().into_owned());
        facts.push("symlink".into());
        format!("{rel} -> {target}")
    } else if t == FileType::RegularFile {
        facts.push(format!("{} bytes", meta.st_size));
        rel
    } else {
        facts.push("special file".into());
        rel
    };
    if ignored {
        facts.push("ignored".into());
    }
    Some(if facts.is_empty() {
        shown
    } else {
        format!("{shown} ({})", facts.join(", "))
    })
}
