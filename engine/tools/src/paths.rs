//! Confinement: every path a tool touches resolves inside the workspace. `..` that
//! climbs out, and symlinks that lead out, are refused; nothing resolves under the
//! cairn home, so the agent can never edit its own log.

use std::path::{Component, Path, PathBuf};

/// A path inside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsPath {
    /// Absolute path (symlinks in it resolved where they exist).
    pub abs: PathBuf,
    /// Workspace-relative, `/`-separated (as the agent named it, normalised).
    pub rel: String,
}

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    Invalid(String),
    Outside(String),
}

impl PathError {
    pub fn message(&self) -> String {
        match self {
            PathError::Invalid(m) | PathError::Outside(m) => m.clone(),
        }
    }
}

/// Resolves `input` against `root` (canonical). `home` is the cairn home (canonical or
/// not yet existing), which is always refused.
pub fn resolve(root: &Path, home: &Path, input: &str) -> Result<WsPath, PathError> {
    if input.is_empty() {
        return Err(PathError::Invalid(
            "the path is empty: give a path relative to the workspace root".into(),
        ));
    }
    if input.contains('\0') {
        return Err(PathError::Invalid("the path contains a NUL byte".into()));
    }
    let given = Path::new(input);
    let rel_part = if given.is_absolute() {
        match given.strip_prefix(root) {
            Ok(r) => r.to_path_buf(),
            Err(_) => {
                return Err(PathError::Outside(format!(
                    "{input} is outside the workspace {}; give a path relative to the workspace root",
                    root.display()
                )));
            }
        }
    } else {
        given.to_path_buf()
    };
    let mut parts: Vec<String> = Vec::new();
    for c in rel_part.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(PathError::Outside(format!(
                        "{input} climbs out of the workspace with '..'; paths must stay inside {}",
                        root.display()
                    )));
                }
            }
            Component::RootDir | Component::Prefix(_) => {}
        }
    }
    let rel = parts.join("/");
    let lexical = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(&rel)
    };
    // Resolve symlinks of the longest existing ancestor; what does not exist yet cannot
    // be a link.
    let mut existing = lexical.clone();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let canonical = loop {
        match existing.canonicalize() {
            Ok(c) => break c,
            Err(_) => match (
                existing.file_name().map(|n| n.to_os_string()),
                existing.parent(),
            ) {
                (Some(name), Some(parent)) => {
                    rest.push(name);
                    existing = parent.to_path_buf();
                }
                _ => return Err(PathError::Invalid(format!("{input} cannot be resolved"))),
            },
        }
    };
    let mut abs = canonical;
    for name in rest.iter().rev() {
        abs.push(name);
    }
    if !abs.starts_with(root) {
        return Err(PathError::Outside(format!(
            "{input} leads outside the workspace (through a symlink) to {}",
            abs.display()
        )));
    }
    if abs.starts_with(home) {
        return Err(PathError::Outside(format!(
            "{input} is inside the cairn home {}, which tools never touch",
            home.display()
        )));
    }
    Ok(WsPath { abs, rel })
}

/// Where `input` points, absolute and normalised (symlinks resolved as far as they
/// exist): what an out-of-workspace permission is asked for.
pub fn target(root: &Path, input: &str) -> Option<PathBuf> {
    if input.is_empty() || input.contains('\0') {
        return None;
    }
    let joined = root.join(input);
    let mut parts: Vec<std::ffi::OsString> = Vec::new();
    for c in joined.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_os_string()),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    let mut lexical = PathBuf::from("/");
    for p in &parts {
        lexical.push(p);
    }
    let mut existing = lexical.clone();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = existing.canonicalize() {
            let mut out = c;
            for name in rest.iter().rev() {
                out.push(name);
            }
            return Some(out);
        }
        rest.push(existing.file_name()?.to_os_string());
        existing = existing.parent()?.to_path_buf();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_escapes_and_bad_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join(".cairn-home");
        std::fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("sub/out")).unwrap();
        assert_eq!(resolve(&root, &home, "sub/../a.txt").unwrap().rel, "a.txt");
        assert!(matches!(
            resolve(&root, &home, "../x"),
            Err(PathError::Outside(_))
        ));
        assert!(matches!(
            resolve(&root, &home, "sub/out/passwd"),
            Err(PathError::Outside(_))
        ));
        assert!(matches!(
            resolve(&root, &home, "/etc/passwd"),
            Err(PathError::Outside(_))
        ));
        assert!(matches!(
            resolve(&root, &home, ""),
            Err(PathError::Invalid(_))
        ));
        assert!(matches!(
            resolve(&root, &home, "a\0b"),
            Err(PathError::Invalid(_))
        ));
        assert!(matches!(
            resolve(&root, &home, ".cairn-home/x"),
            Err(PathError::Outside(_))
        ));
        let inside = root.join("sub/new.txt");
        assert_eq!(
            resolve(&root, &home, inside.to_str().unwrap()).unwrap().rel,
            "sub/new.txt"
        );
    }
}
