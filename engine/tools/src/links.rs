//! The files a command line writes, checked against the workspace as it is: a path
//! inside the workspace by its text may lie beyond a symbolic link that leads out of
//! it (`ws/out -> /etc`, `echo x > out/passwd`). The analysis
//! (`cairn_core::command`) is pure and judges paths by their text after normalising;
//! this is the look at the disk it cannot take. What it finds is a
//! [`Reason::WritesThroughLink`], recorded with the question, so verify takes the
//! finding from the log ([`Links::Recorded`]) rather than from a workspace that has
//! moved on.

use std::path::{Path, PathBuf};

use cairn_core::command::{Analysis, Reason};

/// How the written files of a command are checked.
#[derive(Debug, Clone, Copy)]
pub enum Links<'a> {
    /// Look at the workspace now (a live call).
    Disk,
    /// Take the findings a question recorded (verify): the recorded reasons.
    Recorded(&'a [String]),
}

/// Adds a [`Reason::WritesThroughLink`] to `analysis` for every file it writes that
/// lies beyond a link leading out of `root`.
pub fn confirm_writes(analysis: &mut Analysis, root: &Path, links: Links<'_>) {
    if analysis.writes.is_empty() {
        return;
    }
    let real_root = match links {
        Links::Disk => Some(std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf())),
        Links::Recorded(_) => None,
    };
    let writes = analysis.writes.clone();
    for path in writes {
        let rel = path
            .strip_prefix(&analysis.root)
            .unwrap_or(&path)
            .trim_start_matches('/')
            .to_string();
        let rel = if rel.is_empty() { ".".to_string() } else { rel };
        let reason = Reason::WritesThroughLink(rel);
        let found = match (links, &real_root) {
            (Links::Recorded(recorded), _) => recorded.contains(&reason.to_string()),
            (Links::Disk, Some(real_root)) => leads_out(Path::new(&path), real_root),
            (Links::Disk, None) => false,
        };
        if found && !analysis.reasons.contains(&reason) {
            analysis.reasons.push(reason);
        }
    }
}

/// True when writing `path` (absolute) may land outside `real_root` (canonical): its
/// deepest existing ancestor (or itself) resolves outside, a dangling link on the way
/// points outside, or — for a pattern (`dir/*.rs`) — a link in its folder leads out.
pub fn leads_out(path: &Path, real_root: &Path) -> bool {
    leads_out_within(path, real_root, crate::SYMLINK_FOLLOWS_MAX)
}

/// [`leads_out`], following at most `follows` dangling links (a loop leads out).
fn leads_out_within(path: &Path, real_root: &Path, follows: u32) -> bool {
    if follows == 0 {
        return true;
    }
    let pattern = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.contains(['*', '?', '[']));
    if pattern {
        let Some(dir) = path.parent() else {
            return true;
        };
        if leads_out_within(dir, real_root, follows) {
            return true;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        return entries.flatten().any(|e| {
            e.file_type().is_ok_and(|t| t.is_symlink())
                && leads_out_within(&e.path(), real_root, follows)
        });
    }
    let mut existing: PathBuf = path.to_path_buf();
    while std::fs::symlink_metadata(&existing).is_err() {
        match existing.parent() {
            Some(parent) => existing = parent.to_path_buf(),
            None => return false,
        }
    }
    match std::fs::canonicalize(&existing) {
        Ok(real) => !real.starts_with(real_root),
        // A dangling link: writing through it creates its target.
        Err(_) => match std::fs::read_link(&existing) {
            Ok(target) => {
                let base = existing
                    .parent()
                    .and_then(|p| std::fs::canonicalize(p).ok())
                    .unwrap_or_default();
                let joined = base.join(target);
                let normal = normalise(&joined);
                !normal.starts_with(real_root) || leads_out_within(&normal, real_root, follows - 1)
            }
            Err(_) => true,
        },
    }
}

/// `path` with `.` and `..` taken out lexically.
pub(crate) fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_beyond_a_link_out_of_the_workspace_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let out = tmp.path().join("out");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::os::unix::fs::symlink(&out, ws.join("link")).unwrap();
        std::os::unix::fs::symlink(out.join("new"), ws.join("dangling")).unwrap();
        std::os::unix::fs::symlink("src", ws.join("inner")).unwrap();
        let real = std::fs::canonicalize(&ws).unwrap();
        assert!(leads_out(&ws.join("link/x"), &real));
        assert!(leads_out(&ws.join("link/deeper/x"), &real));
        assert!(leads_out(&ws.join("link"), &real));
        assert!(leads_out(&ws.join("dangling"), &real));
        assert!(leads_out(&ws.join("*.txt"), &real));
        assert!(!leads_out(&ws.join("src/*.rs"), &real));
        assert!(!leads_out(&ws.join("inner/x"), &real));
        assert!(!leads_out(&ws.join("src/new/deeper"), &real));

        let line = "echo x > link/passwd; echo y > src/ok";
        let mut a = cairn_core::command::analyse(line, &ws.to_string_lossy());
        confirm_writes(&mut a, &ws, Links::Disk);
        assert_eq!(a.reasons, [Reason::WritesThroughLink("link/passwd".into())]);
        // Verify takes it from the record, and only for a path the line writes.
        let recorded = vec![
            Reason::WritesThroughLink("link/passwd".into()).to_string(),
            Reason::WritesThroughLink("elsewhere".into()).to_string(),
        ];
        let mut b = cairn_core::command::analyse(line, "/gone/ws");
        confirm_writes(&mut b, Path::new("/gone/ws"), Links::Recorded(&recorded));
        assert_eq!(b.reasons, [Reason::WritesThroughLink("link/passwd".into())]);
    }
}
