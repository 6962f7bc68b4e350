//! Lexical paths: joined, normalised and compared as text, never looked up.

/// Folders whose programs are known by their name: `/usr/bin/rm` is `rm`.
const SYSTEM_BIN: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/opt/homebrew/bin",
];

/// `path` made absolute against `cwd` and normalised (`.`, `..` and repeated slashes
/// gone; `..` above `/` stays at `/`). None for a relative path with no known `cwd`, or a
/// home path (`~…`).
pub fn absolute(path: &str, cwd: Option<&str>) -> Option<String> {
    if path.starts_with('~') {
        return None;
    }
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{}/{path}", cwd?)
    };
    let mut parts: Vec<&str> = Vec::new();
    for s in joined.split('/') {
        match s {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// The workspace root as given, without a trailing slash (`/` stays `/`).
pub fn root(root: &str) -> String {
    absolute(root, Some("/")).unwrap_or_else(|| root.to_string())
}

/// `path` relative to `root` when it is inside (or is) it.
pub fn inside<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    if path == root {
        return Some("");
    }
    if root == "/" {
        return path.strip_prefix('/');
    }
    path.strip_prefix(root)?.strip_prefix('/')
}

/// True when `path` is `root` or one of its parents (`/` included).
pub fn holds(path: &str, root: &str) -> bool {
    inside(root, path).is_some()
}

/// True when `dir` is a system folder of programs.
pub fn system_bin(dir: &str) -> bool {
    SYSTEM_BIN.contains(&dir)
}

/// The last component of a path (`/usr/bin/rm` → `rm`).
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
