//! Confinement: every path a tool touches resolves inside the workspace. `..` that
//! climbs out, and symlinks that lead out, are refused; nothing resolves under the
//! cairn home, so the agent can never edit its own log.
//!
//! Two layers. [`resolve`] checks the path as a string (normalised, symlinks resolved
//! as they are now): it gives the clear refusal and the path the permission rules
//! decide on. A path with no symlink on it, most of them, is told so by one `openat2`
//! with `RESOLVE_NO_SYMLINKS` (it is then its own real path, and a tool need not ask
//! the root for it); any other is resolved by `realpath`, a component at a time. Then
//! every open goes through [`Root`], an open descriptor of the workspace root, and
//! never through the string: a folder swapped for a symlink to outside between the
//! check and the open cannot lead the open out.
//!
//! [`Root`] resolves a workspace-relative path with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` (Linux 5.6): a path without symlinks
//! opens in one call, and the path opened is the path named. A path with a symlink in
//! it, an absolute symlink, a kernel without `openat2` (`ENOSYS`) or a rename race the
//! kernel reports (`EAGAIN`) take the walk instead: one `openat(O_NOFOLLOW)` per
//! component from the root's descriptor, each folder held open, a symlink read with
//! `readlinkat` and followed by the walk itself while it stays beneath the root (a
//! relative target's `..` steps back to a folder already held, never re-opens `..`),
//! at most [`SYMLINK_FOLLOWS_MAX`] of them; one that leaves is refused. Either way the
//! walk knows the real path, so the cairn home is refused however it is reached.
//!
//! The home is also told by descriptor, not only by its path: `openat2` crosses no
//! mount point (`RESOLVE_NO_XDEV`; one that would, say the home bound into the
//! workspace, takes the walk), the walk compares each folder it holds with the home's
//! device and inode, and a write's folder is climbed (`..` after `..`, to the file
//! system's root) and refused when one of them is the home — also after a folder above
//! the home was renamed, which its path would not see.
//!
//! A file outside the workspace in a folder granted for good (its files, not its
//! subfolders) is opened the same way beneath a descriptor of that folder.
//!
//! Writes ([`Root::parent`]) resolve the parent folder beneath the root, create the
//! temporary file in it with `O_CREAT | O_EXCL | O_NOFOLLOW` and `renameat` it over the
//! name inside the same descriptor (`RENAME_NOREPLACE` for a create). A symlink named
//! last is written through to its target when that stays inside (the link stays a
//! link, as an editor leaves it). The path a write records is [`Parent::real`]: the
//! real folder reached and the real name, inside symlinks resolved, which is where the
//! bytes went at the time the folder was reached. The answer shown to the model keeps
//! the path it named.
//!
//! What stays by path: the search tools' walk (the `ignore` crate walks by path; its
//! root is opened beneath first, symlinks are not followed unless asked and then
//! checked, and every file's content is read through [`Root`], so a folder swapped
//! mid-walk can show outside names but never outside bytes), and the commands, which
//! the OS sandbox confines.

use std::fs::{File, Metadata};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

use crate::open::{Kind, OpenError};

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
    resolve_plain(root, home, input).map(|(ws, _)| ws)
}

/// A path input resolved once for a call: the engine's check of where a call's path
/// leads and the tool's [`crate::Ctx::resolve`] share it, not each resolving it (a
/// walk of the path by the kernel each).
#[derive(Debug, Clone)]
pub struct Resolved {
    input: String,
    result: Result<(WsPath, bool), PathError>,
}

impl Resolved {
    /// `input` resolved now (see [`resolve`]) in the workspace `fs` is open on.
    pub fn of(fs: &Root, home: &Path, input: &str) -> Resolved {
        Resolved {
            input: input.to_string(),
            result: resolve_plain_in(fs, home, input),
        }
    }

    /// The resolution, when it is of `input`.
    fn of_input(&self, input: &str) -> Option<&Result<(WsPath, bool), PathError>> {
        (self.input == input).then_some(&self.result)
    }

    /// What [`resolve_plain_in`] gives for `input` in the workspace `fs` is open on:
    /// the resolution kept, `this`, when it is of `input`, else one made now. The
    /// engine's check and the tool's [`crate::Ctx::resolve`] both ask here.
    pub fn plain_in(
        this: Option<&Resolved>,
        fs: &Root,
        home: &Path,
        input: &str,
    ) -> Result<(WsPath, bool), PathError> {
        match this.and_then(|r| r.of_input(input)) {
            Some(r) => r.clone(),
            None => resolve_plain_in(fs, home, input),
        }
    }
}

/// [`resolve`], and whether the path named has no symlink on it (each of its
/// components exists and none is a link): then `abs` is the path named itself, and
/// it is its own real path.
pub(crate) fn resolve_plain(
    root: &Path,
    home: &Path,
    input: &str,
) -> Result<(WsPath, bool), PathError> {
    resolve_with(root, home, input, Plain::ByPath)
}

/// [`resolve_plain`] of a path in the workspace `fs` is open on: whether it is plain is
/// told beneath the root's descriptor, the kernel walking only the path's own
/// components, not the root's again.
pub(crate) fn resolve_plain_in(
    fs: &Root,
    home: &Path,
    input: &str,
) -> Result<(WsPath, bool), PathError> {
    resolve_with(&fs.path, home, input, Plain::Beneath(fs))
}

/// How [`resolve_with`] tells a path with no symlink on it.
#[derive(Clone, Copy)]
enum Plain<'a> {
    /// It does not: every path is resolved as one that may hold a symlink (what tests
    /// compare the one-call check with).
    #[cfg(test)]
    Never,
    /// One `openat2` of the whole path.
    ByPath,
    /// One `openat2` of the path relative to the root, beneath its descriptor.
    Beneath(&'a Root),
}

/// [`resolve_plain`], telling a plain path as `plain` says.
fn resolve_with(
    root: &Path,
    home: &Path,
    input: &str,
    plain: Plain<'_>,
) -> Result<(WsPath, bool), PathError> {
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
    // A path with no symlink on it is its own canonical form: one `openat2` that
    // refuses any link tells, where `realpath` reads each component.
    let plain = match plain {
        #[cfg(test)]
        Plain::Never => false,
        Plain::ByPath => lexical_is_real(&lexical),
        Plain::Beneath(fs) => fs.is_plain(&rel),
    };
    let abs = if plain {
        lexical
    } else {
        realpath_of(&lexical, input)?
    };
    // A plain path is the root joined with plain components: under it by construction.
    if !plain && !abs.starts_with(root) {
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
    Ok((WsPath { abs, rel }, plain))
}

/// Whether every component of `path` (absolute, with no `.`, `..` or empty component)
/// exists and none is a symlink: `realpath(path)` is `path` itself.
fn lexical_is_real(path: &Path) -> bool {
    opens_with_no_link(rustix::fs::CWD, path, ResolveFlags::empty())
}

/// Whether `path`, relative to `dir` (resolved also as `how` says), opens with no
/// symlink on the way: one `openat2` that refuses any link. Without `O_NOFOLLOW`, a
/// link named last is refused too (`ELOOP`). False where `openat2` is missing.
fn opens_with_no_link(dir: impl AsFd, path: impl AsRef<Path>, how: ResolveFlags) -> bool {
    if OPENAT2_MISSING.load(Ordering::Relaxed) {
        return false;
    }
    let how = how | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    match rustix::fs::openat2(dir, path.as_ref(), flags, Mode::empty(), how) {
        Ok(_) => true,
        Err(Errno::NOSYS) => {
            OPENAT2_MISSING.store(true, Ordering::Relaxed);
            false
        }
        Err(_) => false,
    }
}

/// The real path of `lexical` (absolute, normalised): the symlinks of its longest
/// existing ancestor resolved, what does not exist yet (which cannot be a link) kept.
fn realpath_of(lexical: &Path, input: &str) -> Result<PathBuf, PathError> {
    let mut existing = lexical.to_path_buf();
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
    Ok(abs)
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

/// Where the kernel takes `path` (absolute) when a program outside cairn opens it, as
/// another agent's own tool does (cairn's hooks judge those calls before they run):
/// resolved by descriptor from `/` as [`Root`]'s walk resolves, one
/// `openat(O_PATH | O_NOFOLLOW)` per component with each folder held open and a
/// symlink read with `readlinkat` and followed wherever it leads. `..` is taken
/// physically, to the folder above the one reached (`link/..` is the folder above the
/// link's target, not the folder holding the link), never by dropping a name of the
/// string. Components that do not exist yet (or cannot be looked into) are appended as
/// named, a `..` among them dropping the one before it, as making the folders and
/// climbing back up would: a path is placed by its deepest existing ancestor. A
/// dangling symlink is followed to where it points, where a create through it lands.
///
/// Errors when it is not absolute, when `/` cannot be opened, or past
/// [`SYMLINK_FOLLOWS_MAX`] symlinks (the kernel then refuses the open too).
pub fn landing(path: &Path) -> std::io::Result<PathBuf> {
    use std::ffi::OsString;
    if !path.is_absolute() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not an absolute path", path.display()),
        ));
    }
    let top = rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    // `None` restarts at `/` (an absolute symlink target); the next component is last.
    let mut todo: Vec<Option<OsString>> = Vec::new();
    let push = |todo: &mut Vec<Option<OsString>>, path: &Path| {
        let parts: Vec<Option<OsString>> = path
            .components()
            .filter_map(|c| match c {
                Component::RootDir => Some(None),
                Component::ParentDir => Some(Some(OsString::from(".."))),
                Component::Normal(n) => Some(Some(n.to_os_string())),
                Component::CurDir | Component::Prefix(_) => None,
            })
            .collect();
        todo.extend(parts.into_iter().rev());
    };
    push(&mut todo, path);
    // The real folders reached below `/`, then the names that do not exist yet.
    let mut held: Vec<(OwnedFd, OsString)> = Vec::new();
    let mut missing: Vec<OsString> = Vec::new();
    let mut follows = 0u32;
    while let Some(next) = todo.pop() {
        let Some(name) = next else {
            held.clear();
            missing.clear();
            continue;
        };
        if name == ".." {
            // `/..` is `/`, as for the kernel.
            if missing.pop().is_none() {
                held.pop();
            }
            continue;
        }
        if !missing.is_empty() {
            missing.push(name);
            continue;
        }
        let at = held.last().map_or(top.as_fd(), |(fd, _)| fd.as_fd());
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(at, name.as_os_str(), flags, Mode::empty()) {
            Ok(fd) if is_symlink(&fd) => {
                follows += 1;
                if follows > SYMLINK_FOLLOWS_MAX {
                    return Err(std::io::Error::other(format!(
                        "{}: more than {SYMLINK_FOLLOWS_MAX} symlinks on the way (SYMLINK_FOLLOWS_MAX): a symlink loop?",
                        path.display()
                    )));
                }
                let target = rustix::fs::readlinkat(at, name.as_os_str(), Vec::new())?;
                let target = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(
                    target.as_bytes(),
                );
                push(&mut todo, Path::new(target));
            }
            Ok(fd) => held.push((fd, name)),
            // Not there, below a file, or not searchable: named as given from here on.
            Err(_) => missing.push(name),
        }
    }
    let mut out = PathBuf::from("/");
    out.extend(held.iter().map(|(_, n)| n));
    out.extend(missing);
    Ok(out)
}

/// Symlinks one resolution by the walk follows before it gives up (a loop, or a chain
/// too long to be meant), as the kernel's own limit.
pub const SYMLINK_FOLLOWS_MAX: u32 = 40;

/// Temporary names tried in a folder before a write gives up (each taken one is a
/// leftover or a concurrent write).
const TMP_NAMES_TRIED_MAX: u32 = 16;

/// Set once `openat2` answered `ENOSYS`: every later resolution walks.
static OPENAT2_MISSING: AtomicBool = AtomicBool::new(false);

/// Numbers the temporary files of this process.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The open workspace root: every open, listing and write of a tool resolves beneath
/// it (see the module doc).
#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
    /// Canonical path of the folder the descriptor was opened on: absolute symlink
    /// targets under it stay inside.
    path: PathBuf,
    /// The cairn home, never opened.
    home: PathBuf,
    /// The home relative to this root, when it lies inside.
    home_rel: Option<String>,
    /// The home's device and inode (none while it does not exist): a folder with them
    /// is the home however it was reached — a symlink, a bind mount, a folder above it
    /// renamed since.
    home_id: Option<FileId>,
    /// Always walk, never `openat2` (tests of the walk).
    walk_only: bool,
}

/// A file's device and inode.
type FileId = (u64, u64);

/// The device and inode of what `fd` is open on.
fn file_id(fd: impl AsFd) -> Option<FileId> {
    rustix::fs::fstat(fd).ok().map(|st| id_of(&st))
}

/// The device and inode of `st`.
// `st_dev` and `st_ino` are `u64` on 64-bit Linux, narrower elsewhere.
#[allow(clippy::unnecessary_cast)]
fn id_of(st: &rustix::fs::Stat) -> FileId {
    (st.st_dev as u64, st.st_ino as u64)
}

/// Folders a write's check climbs (`..`) before it gives up: deeper than any real path
/// (`PATH_MAX` is 4096 bytes, two per level at least).
pub const HOME_CLIMB_LEVELS_MAX: u32 = 2048;

impl Root {
    /// Opens the root folder `path` (canonical); `home` is the cairn home.
    pub fn open(path: &Path, home: &Path) -> std::io::Result<Root> {
        let dir = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let home_rel = home.strip_prefix(path).ok().map(|inner| {
            inner
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        });
        let home_id = rustix::fs::stat(home).ok().map(|st| id_of(&st));
        Ok(Root {
            dir,
            path: path.to_path_buf(),
            home: home.to_path_buf(),
            home_rel,
            home_id,
            walk_only: false,
        })
    }

    /// The same root resolving by the walk only, as on a kernel without `openat2`.
    pub fn walking(mut self) -> Root {
        self.walk_only = true;
        self
    }

    /// The folder the descriptor was opened on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the regular file at `ws` for reading, with its metadata from the
    /// descriptor: never a FIFO, a socket or a device, never blocking (as
    /// [`crate::open_regular`]).
    pub fn open_read(&self, ws: &WsPath) -> Result<(File, Metadata), OpenError> {
        self.open_read_at(&ws.abs, &ws.rel)
    }

    /// [`Root::open_read`] of the path whose absolute and workspace-relative forms are
    /// `abs` and `rel` (a [`WsPath`]'s fields): a search opens thousands of walked
    /// files without making a [`WsPath`] of each.
    pub fn open_read_at(&self, abs: &Path, rel: &str) -> Result<(File, Metadata), OpenError> {
        let at = self.beneath_at(abs, rel)?;
        let (root, rel) = (at.root(), at.rel.as_ref());
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        let fd = match root.open_at(rel, flags, true) {
            Ok((fd, real)) => {
                at.real(real)?;
                fd
            }
            // A socket cannot be opened (ENXIO): say what it is rather than how the
            // open failed.
            Err(OpenError::Io(e)) => {
                let kind = root
                    .open_at(rel, OFlags::PATH, true)
                    .ok()
                    .and_then(|(fd, _)| File::from(fd).metadata().ok())
                    .as_ref()
                    .and_then(Kind::of);
                return Err(kind.map_or(OpenError::Io(e), OpenError::NotRegular));
            }
            Err(e) => return Err(e),
        };
        let file = File::from(fd);
        let meta = file.metadata().map_err(OpenError::Io)?;
        match Kind::of(&meta) {
            None => Ok((file, meta)),
            Some(kind) => Err(OpenError::NotRegular(kind)),
        }
    }

    /// Opens the folder at `ws` for listing.
    pub fn open_dir(&self, ws: &WsPath) -> Result<OwnedFd, OpenError> {
        let at = self.beneath(ws)?;
        let (fd, real) = at
            .root()
            .open_at(&at.rel, OFlags::RDONLY | OFlags::DIRECTORY, true)?;
        at.real(real)?;
        Ok(fd)
    }

    /// The metadata of what `ws` names (inside symlinks followed) and its real path
    /// relative to the root (for a file in a granted outside folder: its absolute
    /// path).
    pub fn stat(&self, ws: &WsPath) -> Result<(Metadata, String), OpenError> {
        let at = self.beneath(ws)?;
        let (fd, real) = at.root().open_at(&at.rel, OFlags::PATH, true)?;
        let meta = File::from(fd).metadata().map_err(OpenError::Io)?;
        Ok((meta, at.real(real)?))
    }

    /// The folder a write of `ws` goes into, opened beneath the root, with the name to
    /// write in it; missing folders are made when `make_dirs` (and removed again by
    /// [`Parent::undo`]).
    pub fn parent(&self, ws: &WsPath, make_dirs: bool) -> Result<Parent, OpenError> {
        let at = self.beneath(ws)?;
        let mut parent = at.root().parent_at(&at.rel, make_dirs)?;
        // By descriptor, whatever the path's spelling: the folder written in is not the
        // home and does not lie inside it.
        if let Err(e) = self.refuse_home_dir(&ws.rel, &parent.dir) {
            parent.undo();
            return Err(e);
        }
        match at.real(std::mem::take(&mut parent.real)) {
            Ok(real) => {
                parent.real = real;
                Ok(parent)
            }
            Err(e) => {
                parent.undo();
                Err(e)
            }
        }
    }

    /// The root `ws` lies beneath and its path relative to it: this root, or for a
    /// file in a granted folder outside, that folder opened now.
    fn beneath<'r, 'p>(&'r self, ws: &'p WsPath) -> Result<Beneath<'r, 'p>, OpenError> {
        self.beneath_at(&ws.abs, &ws.rel)
    }

    /// [`Root::beneath`] of a [`WsPath`]'s fields.
    fn beneath_at<'r, 'p>(
        &'r self,
        abs: &Path,
        rel: &'p str,
    ) -> Result<Beneath<'r, 'p>, OpenError> {
        if under_root(abs, &self.path) {
            return Ok(Beneath {
                this: self,
                granted: None,
                rel: std::borrow::Cow::Borrowed(rel),
            });
        }
        let (Some(dir), Some(name)) = (abs.parent(), abs.file_name()) else {
            return Err(OpenError::Outside(format!(
                "{rel} is outside the workspace"
            )));
        };
        let granted = Root {
            walk_only: self.walk_only,
            ..Root::open(dir, &self.home).map_err(OpenError::Io)?
        };
        Ok(Beneath {
            this: self,
            granted: Some(granted),
            rel: std::borrow::Cow::Owned(name.to_string_lossy().into_owned()),
        })
    }

    /// Whether `rel` (normalised: no `.`, `..` or empty component) names something
    /// beneath the root with no symlink on the way: [`lexical_is_real`] of the root
    /// joined with `rel`, the root (canonical) not walked again.
    fn is_plain(&self, rel: &str) -> bool {
        let path = if rel.is_empty() { "." } else { rel };
        opens_with_no_link(&self.dir, path, ResolveFlags::BENEATH)
    }

    /// Opens `rel` (workspace-relative, `/`-separated; "" for the root) with `flags`,
    /// following inside symlinks (the last component's only when `follow_last`);
    /// gives the descriptor and the real relative path.
    fn open_at(
        &self,
        rel: &str,
        flags: OFlags,
        follow_last: bool,
    ) -> Result<(OwnedFd, String), OpenError> {
        let flags = flags | OFlags::CLOEXEC;
        if !self.walk_only && !OPENAT2_MISSING.load(Ordering::Relaxed) {
            // No mount crossed either: a path through a mount point (the home bound
            // into the workspace, say) takes the walk, which compares each folder with
            // the home by device and inode.
            let how = ResolveFlags::BENEATH
                | ResolveFlags::NO_SYMLINKS
                | ResolveFlags::NO_MAGICLINKS
                | ResolveFlags::NO_XDEV;
            let path = if rel.is_empty() { "." } else { rel };
            match rustix::fs::openat2(&self.dir, path, flags, Mode::empty(), how) {
                // O_PATH opens a final symlink itself: the walk follows it.
                Ok(fd) if flags.contains(OFlags::PATH) && is_symlink(&fd) => {}
                Ok(fd) => {
                    // No symlink on the way: the path opened is the path named.
                    self.refuse_home(rel, rel)?;
                    return Ok((fd, rel.to_string()));
                }
                Err(Errno::NOSYS) => OPENAT2_MISSING.store(true, Ordering::Relaxed),
                // A symlink on the way (ELOOP), a `..`, an absolute link or a mount
                // point (EXDEV), a rename meanwhile (EAGAIN): the walk decides.
                Err(Errno::LOOP | Errno::XDEV | Errno::AGAIN) => {}
                Err(e) => return Err(OpenError::Io(e.into())),
            }
        }
        self.walk(rel, flags, follow_last)
    }

    /// The fallback resolution (see the module doc).
    fn walk(
        &self,
        rel: &str,
        flags: OFlags,
        follow_last: bool,
    ) -> Result<(OwnedFd, String), OpenError> {
        // Components still to resolve, the next one last.
        let mut todo: Vec<String> = components(rel).rev().collect();
        // The folders entered below the root: their descriptors and names.
        let mut held: Vec<(OwnedFd, String)> = Vec::new();
        let mut follows = 0u32;
        loop {
            let at: BorrowedFd<'_> = held.last().map_or(self.dir.as_fd(), |(fd, _)| fd.as_fd());
            let Some(name) = todo.pop() else {
                // The path ends on a folder already held (or the root).
                let fd = rustix::fs::openat(at, ".", flags, Mode::empty())
                    .map_err(|e| OpenError::Io(e.into()))?;
                return Ok((fd, real_of(&held, None)));
            };
            if name == ".." {
                if held.pop().is_none() {
                    return Err(OpenError::Outside(format!(
                        "{rel} leads outside {} (a symlink's '..' climbs out)",
                        self.path.display()
                    )));
                }
                continue;
            }
            let last = todo.is_empty();
            let attempt = if last {
                rustix::fs::openat(at, name.as_str(), flags | OFlags::NOFOLLOW, Mode::empty())
            } else {
                rustix::fs::openat(
                    at,
                    name.as_str(),
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
            };
            // O_PATH | O_NOFOLLOW opens a final symlink itself rather than failing.
            let attempt = match attempt {
                Ok(fd) if last && flags.contains(OFlags::PATH) && is_symlink(&fd) => {
                    Err(Errno::LOOP)
                }
                other => other,
            };
            match attempt {
                Ok(fd) if last => {
                    let real = real_of(&held, Some(&name));
                    self.refuse_home(rel, &real)?;
                    self.refuse_home_fd(rel, &fd)?;
                    return Ok((fd, real));
                }
                Ok(fd) => {
                    self.refuse_home_fd(rel, &fd)?;
                    held.push((fd, name));
                    self.refuse_home(rel, &real_of(&held, None))?;
                }
                // O_NOFOLLOW met a symlink (ELOOP; ENOTDIR with O_DIRECTORY).
                Err(e @ (Errno::LOOP | Errno::NOTDIR)) => {
                    if last && !follow_last {
                        return Err(OpenError::Io(e.into()));
                    }
                    let Ok(target) = rustix::fs::readlinkat(at, name.as_str(), Vec::new()) else {
                        // Not a symlink: the open's own error stands.
                        return Err(OpenError::Io(e.into()));
                    };
                    follows += 1;
                    if follows > SYMLINK_FOLLOWS_MAX {
                        return Err(OpenError::Io(std::io::Error::other(format!(
                            "more than {SYMLINK_FOLLOWS_MAX} symlinks on the way (SYMLINK_FOLLOWS_MAX): a symlink loop?"
                        ))));
                    }
                    let target = target.to_string_lossy().into_owned();
                    if target.starts_with('/') {
                        // An absolute target stays inside only under the root's path.
                        match Path::new(&target).strip_prefix(&self.path) {
                            Ok(inner) => {
                                held.clear();
                                todo.extend(components(&inner.to_string_lossy()).rev());
                            }
                            Err(_) => {
                                return Err(OpenError::Outside(format!(
                                    "{rel} leads outside {} through a symlink to {target}",
                                    self.path.display()
                                )));
                            }
                        }
                    } else {
                        todo.extend(components(&target).rev());
                    }
                }
                Err(e) => return Err(OpenError::Io(e.into())),
            }
        }
    }

    /// The refusal of `rel`, which reaches the home.
    fn home_refusal(&self, rel: &str) -> OpenError {
        OpenError::Outside(format!(
            "{rel} is inside the cairn home {}, which tools never touch",
            self.home.display()
        ))
    }

    /// Refuses `fd` (a folder a resolution of `rel` passes through) when it is the
    /// home, by device and inode.
    fn refuse_home_fd(&self, rel: &str, fd: &OwnedFd) -> Result<(), OpenError> {
        match self.home_id {
            Some(home) if file_id(fd) == Some(home) => Err(self.home_refusal(rel)),
            _ => Ok(()),
        }
    }

    /// Refuses the folder `dir` (where a write of `rel` goes) when it is the home or
    /// lies inside it: climbs `..` from it, comparing each folder's device and inode
    /// with the home's, up to the file system's root (where `..` is the folder itself).
    fn refuse_home_dir(&self, rel: &str, dir: &OwnedFd) -> Result<(), OpenError> {
        let Some(home) = self.home_id else {
            return Ok(());
        };
        let io = |e: Errno| OpenError::Io(e.into());
        let mut id = file_id(dir).ok_or_else(|| io(Errno::BADF))?;
        let mut at: Option<OwnedFd> = None;
        for _ in 0..HOME_CLIMB_LEVELS_MAX {
            if id == home {
                return Err(self.home_refusal(rel));
            }
            let up = rustix::fs::openat(
                at.as_ref().unwrap_or(dir),
                "..",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(io)?;
            let up_id = file_id(&up).ok_or_else(|| io(Errno::BADF))?;
            if up_id == id {
                return Ok(());
            }
            (id, at) = (up_id, Some(up));
        }
        Err(OpenError::Io(std::io::Error::other(format!(
            "{rel}: its folder lies more than {HOME_CLIMB_LEVELS_MAX} levels deep (HOME_CLIMB_LEVELS_MAX)"
        ))))
    }

    /// Refuses `real` (a real path relative to the root) when it is the home or in it.
    fn refuse_home(&self, rel: &str, real: &str) -> Result<(), OpenError> {
        match &self.home_rel {
            Some(home)
                if home.is_empty()
                    || real == home
                    || real
                        .strip_prefix(home.as_str())
                        .is_some_and(|r| r.starts_with('/')) =>
            {
                Err(self.home_refusal(rel))
            }
            _ => Ok(()),
        }
    }

    fn parent_at(&self, rel: &str, make_dirs: bool) -> Result<Parent, OpenError> {
        let mut rel = rel.to_string();
        // Each turn follows one symlink named last (a race can swap in another).
        for _ in 0..=SYMLINK_FOLLOWS_MAX {
            let (dir_rel, name) = rel.rsplit_once('/').unwrap_or(("", &rel));
            if name.is_empty() || name == "." || name == ".." {
                return Err(OpenError::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{rel} does not name a file"),
                )));
            }
            let mut made = Vec::new();
            let (dir, dir_real) =
                match self.open_at(dir_rel, OFlags::RDONLY | OFlags::DIRECTORY, true) {
                    Err(OpenError::Io(e))
                        if make_dirs && e.kind() == std::io::ErrorKind::NotFound =>
                    {
                        self.make_dirs(dir_rel, &mut made)?
                    }
                    opened => opened?,
                };
            if made.is_empty() && rustix::fs::readlinkat(&dir, name, Vec::new()).is_ok() {
                // A symlink named last is written through, as an editor does, to its
                // target's real path when that stays inside; a dangling one is the
                // name itself (a create fails on it).
                match self.open_at(&rel, OFlags::PATH, true) {
                    Ok((_, real)) => {
                        rel = real;
                        continue;
                    }
                    Err(OpenError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            let real = if dir_real.is_empty() {
                name.to_string()
            } else {
                format!("{dir_real}/{name}")
            };
            let parent = Parent {
                dir,
                name: name.to_string(),
                real,
                made,
            };
            if let Err(e) = self.refuse_home(&rel, &parent.real) {
                parent.undo();
                return Err(e);
            }
            return Ok(parent);
        }
        Err(OpenError::Io(std::io::Error::other(format!(
            "{rel}: more than {SYMLINK_FOLLOWS_MAX} symlinks named last (SYMLINK_FOLLOWS_MAX)"
        ))))
    }

    /// Makes the missing folders of `dir_rel`, one at a time beneath the longest
    /// prefix that exists, noting each made in `made`.
    fn make_dirs(
        &self,
        dir_rel: &str,
        made: &mut Vec<(OwnedFd, String)>,
    ) -> Result<(OwnedFd, String), OpenError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY;
        let parts: Vec<&str> = dir_rel.split('/').collect();
        let mut have = parts.len();
        let (mut fd, mut real) = loop {
            have -= 1;
            match self.open_at(&parts[..have].join("/"), flags, true) {
                Ok(found) => break found,
                Err(OpenError::Io(e)) if have > 0 && e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        };
        for name in &parts[have..] {
            match rustix::fs::mkdirat(&fd, *name, Mode::from_raw_mode(0o777)) {
                Ok(()) => made.push((
                    rustix::io::dup(&fd).map_err(|e| OpenError::Io(e.into()))?,
                    name.to_string(),
                )),
                // Made meanwhile by someone else: used, not ours to remove.
                Err(Errno::EXIST) => {}
                Err(e) => return Err(OpenError::Io(e.into())),
            }
            fd = rustix::fs::openat(
                &fd,
                *name,
                flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| OpenError::Io(e.into()))?;
            real = if real.is_empty() {
                name.to_string()
            } else {
                format!("{real}/{name}")
            };
        }
        Ok((fd, real))
    }
}

/// Where a path resolves: the workspace root, or a granted folder outside (its files
/// only, not its subfolders).
struct Beneath<'r, 'p> {
    this: &'r Root,
    granted: Option<Root>,
    /// The path relative to [`Beneath::root`].
    rel: std::borrow::Cow<'p, str>,
}

/// `path.starts_with(root)`, decided from the bytes when they say yes (the path is the
/// root's bytes, then `/`, as a walk makes it): comparing component by component
/// costs more than the open it guards.
fn under_root(path: &Path, root: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let (p, r) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    let by_bytes = !r.is_empty()
        && p.strip_prefix(r)
            .is_some_and(|rest| rest.is_empty() || rest[0] == b'/');
    by_bytes || path.starts_with(root)
}

impl Beneath<'_, '_> {
    fn root(&self) -> &Root {
        self.granted.as_ref().unwrap_or(self.this)
    }

    /// The real path to record for `real` (relative to [`Beneath::root`]): as it is
    /// beneath the workspace, absolute beneath a granted folder, where a symlink into a
    /// subfolder is refused.
    fn real(&self, real: String) -> Result<String, OpenError> {
        let Some(granted) = &self.granted else {
            return Ok(real);
        };
        if real.contains('/') || real.is_empty() {
            return Err(OpenError::Outside(format!(
                "{} leads out of {} through a symlink; only the files directly in a folder allowed outside the workspace are reachable",
                granted.path.join(&*self.rel).display(),
                granted.path.display()
            )));
        }
        Ok(granted.path.join(real).to_string_lossy().into_owned())
    }
}

/// True when `fd` (opened with `O_PATH | O_NOFOLLOW`) is a symlink.
fn is_symlink(fd: &OwnedFd) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink
    })
}

/// The components of a `/`-separated path, `.` and empty ones left out.
fn components(path: &str) -> impl DoubleEndedIterator<Item = String> + '_ {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_string)
}

/// The real relative path of the held folders, and `name` in the last.
fn real_of(held: &[(OwnedFd, String)], name: Option<&str>) -> String {
    let mut parts: Vec<&str> = held.iter().map(|(_, n)| n.as_str()).collect();
    parts.extend(name);
    parts.join("/")
}

/// The folder a write goes into (see [`Root::parent`]).
#[derive(Debug)]
pub struct Parent {
    dir: OwnedFd,
    name: String,
    real: String,
    /// Folders made for this write, each with its parent's descriptor.
    made: Vec<(OwnedFd, String)>,
}

impl Parent {
    /// The path written: the real folder reached and the name (workspace-relative;
    /// absolute for a granted folder outside).
    pub fn real(&self) -> &str {
        &self.real
    }

    /// Replaces the file by `bytes` with permissions `mode`: a temporary file in the
    /// same folder, synced, renamed over the name.
    pub fn replace(&self, bytes: &[u8], mode: u32) -> std::io::Result<()> {
        let tmp = self.temporary(bytes, Some(mode))?;
        let renamed = rustix::fs::renameat(&self.dir, tmp.as_str(), &self.dir, self.name.as_str());
        self.finish(renamed, &tmp)
    }

    /// Creates the file with `bytes`, failing if the name exists (never overwrites,
    /// even a file made meanwhile).
    pub fn create_new(&self, bytes: &[u8]) -> std::io::Result<()> {
        let tmp = self.temporary(bytes, None)?;
        let (t, n) = (tmp.as_str(), self.name.as_str());
        let linked =
            match rustix::fs::renameat_with(&self.dir, t, &self.dir, n, RenameFlags::NOREPLACE) {
                // A filesystem without RENAME_NOREPLACE: a hard link fails on an existing
                // name too.
                Err(Errno::INVAL | Errno::NOSYS) => {
                    rustix::fs::linkat(&self.dir, t, &self.dir, n, AtFlags::empty())
                        .and_then(|()| rustix::fs::unlinkat(&self.dir, t, AtFlags::empty()))
                }
                r => r,
            };
        self.finish(linked, &tmp)
    }

    /// Removes the folders made for this write (after a failed one), newest first.
    pub fn undo(self) {
        for (parent, name) in self.made.iter().rev() {
            // Best effort on the failure path: a folder someone filled meanwhile stays.
            rustix::fs::unlinkat(parent, name.as_str(), AtFlags::REMOVEDIR).ok();
        }
    }

    /// Writes `bytes` to a new temporary file in the folder and syncs it; gives its
    /// name. `mode`: the exact permissions, else those of any new file (0o666 under the
    /// umask).
    fn temporary(&self, bytes: &[u8], mode: Option<u32>) -> std::io::Result<String> {
        for _ in 0..TMP_NAMES_TRIED_MAX {
            let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let name = format!(".cairn-tmp-{}-{n}", std::process::id());
            let flags =
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = match rustix::fs::openat(
                &self.dir,
                name.as_str(),
                flags,
                Mode::from_raw_mode(0o666),
            ) {
                Ok(fd) => fd,
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            };
            let mut file = File::from(fd);
            let written = (|| {
                file.write_all(bytes)?;
                if let Some(mode) = mode {
                    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
                }
                file.sync_all()
            })();
            if let Err(e) = written {
                rustix::fs::unlinkat(&self.dir, name.as_str(), AtFlags::empty()).ok();
                return Err(e);
            }
            return Ok(name);
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{TMP_NAMES_TRIED_MAX} temporary names taken in the folder"),
        ))
    }

    /// Removes the temporary file when the install failed, else syncs the folder.
    fn finish(&self, installed: rustix::io::Result<()>, tmp: &str) -> std::io::Result<()> {
        if let Err(e) = installed {
            // The temporary file is ours; the error that matters is the install's.
            rustix::fs::unlinkat(&self.dir, tmp, AtFlags::empty()).ok();
            return Err(e.into());
        }
        rustix::fs::fsync(&self.dir).map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte comparison says what the component one says, on paths spelled cleanly
    /// or not (a trailing `/`, `.` and doubled separators, a sibling sharing a prefix).
    #[test]
    fn under_root_agrees_with_components() {
        for (path, root) in [
            ("/w/a/b.rs", "/w"),
            ("/w", "/w"),
            ("/wx/a", "/w"),
            ("/w/a", "/w/"),
            ("/w/./a", "/w/."),
            ("/w//a", "/w"),
            ("/w/a", "/w//"),
            ("/a", "/"),
            ("/v/a", "/w"),
            ("w/a", "w"),
            ("/w/..", "/w"),
        ] {
            let (p, r) = (Path::new(path), Path::new(root));
            assert_eq!(under_root(p, r), p.starts_with(r), "{path} under {root}");
        }
    }

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

    use std::io::Read;
    use std::os::unix::fs::symlink;

    /// A workspace with symlinks of every kind, and a folder outside it.
    struct Fixture {
        _dir: tempfile::TempDir,
        root: PathBuf,
        out: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("ws");
        let out = base.join("out");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(out.join("sub")).unwrap();
        std::fs::create_dir_all(root.join(".cairn-home")).unwrap();
        std::fs::write(root.join("a/b/f.txt"), "inside").unwrap();
        std::fs::write(root.join(".cairn-home/log"), "home").unwrap();
        std::fs::write(out.join("secret.txt"), "OUTSIDE").unwrap();
        std::fs::write(out.join("sub/deep.txt"), "DEEP").unwrap();
        symlink("a/b", root.join("in")).unwrap();
        symlink(root.join("a/b"), root.join("abs_in")).unwrap();
        symlink("../a/b", root.join("a/dotdot")).unwrap();
        symlink("b/f.txt", root.join("a/file_link")).unwrap();
        symlink("../out", root.join("up")).unwrap();
        symlink("../out/secret.txt", root.join("leak")).unwrap();
        symlink("../../out", root.join("a/climb")).unwrap();
        symlink(&out, root.join("abs_out")).unwrap();
        symlink("loop2", root.join("loop1")).unwrap();
        symlink("loop1", root.join("loop2")).unwrap();
        symlink(".cairn-home", root.join("to_home")).unwrap();
        symlink("sub/deep.txt", out.join("into_sub")).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, root.join("fifo"), Mode::from(0o600)).unwrap();
        Fixture {
            _dir: dir,
            root,
            out,
        }
    }

    /// A resolution kept for a call answers for its own input only, as resolving it
    /// then did; any other input is resolved as it is now.
    #[test]
    fn a_resolution_answers_for_its_own_input_only() {
        let f = fixture();
        let home = f.root.join(".cairn-home");
        let fs = Root::open(&f.root, &home).unwrap();
        for input in ["a/b/f.txt", "in/f.txt", "leak", "../x", "", "a/new.txt"] {
            let kept = Resolved::of(&fs, &home, input);
            assert_eq!(
                kept.of_input(input),
                Some(&resolve_plain(&f.root, &home, input))
            );
            assert_eq!(
                Resolved::plain_in(Some(&kept), &fs, &home, input),
                resolve_plain(&f.root, &home, input)
            );
            for other in ["a/b/f.txt", "up/secret.txt", "in"] {
                if other != input {
                    assert_eq!(kept.of_input(other), None);
                    assert_eq!(
                        Resolved::plain_in(Some(&kept), &fs, &home, other),
                        resolve_plain(&f.root, &home, other),
                        "{other} with {input}'s resolution kept"
                    );
                }
            }
        }
        // Kept from before a change, it says what it said then: a link put in place of
        // the file since is seen by a new resolution (the engine drops what it kept
        // across a question, which may wait long).
        let kept = Resolved::of(&fs, &home, "a/b/f.txt");
        std::fs::remove_file(f.root.join("a/b/f.txt")).unwrap();
        symlink(f.out.join("secret.txt"), f.root.join("a/b/f.txt")).unwrap();
        assert!(matches!(kept.of_input("a/b/f.txt"), Some(Ok((_, true)))));
        assert!(matches!(
            resolve(&f.root, &home, "a/b/f.txt"),
            Err(PathError::Outside(_))
        ));
    }

    #[test]
    fn the_one_call_check_resolves_every_path_as_realpath_does() {
        let f = fixture();
        let home = f.root.join(".cairn-home");
        symlink("nowhere", f.root.join("dangling")).unwrap();
        let abs = |rel: &str| f.root.join(rel).to_string_lossy().into_owned();
        let mut inputs: Vec<String> = [
            ".",
            "a",
            "a/b",
            "a/b/f.txt",
            "a/b/f.txt/x",
            "a/b/new.txt",
            "new/deeper/x",
            "in",
            "in/f.txt",
            "abs_in/f.txt",
            "a/dotdot/f.txt",
            "a/file_link",
            "up",
            "up/secret.txt",
            "leak",
            "a/climb/secret.txt",
            "abs_out/secret.txt",
            "loop1",
            "loop1/x",
            "to_home",
            "to_home/log",
            ".cairn-home/log",
            "fifo",
            "dangling",
            "dangling/x",
            "in/../a",
            "a/../in/f.txt",
            "./a//b/./f.txt",
            "a/b/",
            "../ws/a",
            "/etc/passwd",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        inputs.extend(["a/b/f.txt", "in/f.txt", "fifo", ""].map(abs));
        for input in &inputs {
            let fast = resolve_with(&f.root, &home, input, Plain::ByPath);
            let slow = resolve_with(&f.root, &home, input, Plain::Never);
            let fs = Root::open(&f.root, &home).unwrap();
            // Told beneath the root's descriptor, the same.
            assert_eq!(
                resolve_with(&f.root, &home, input, Plain::Beneath(&fs)),
                fast,
                "{input}"
            );
            assert_eq!(
                fast.as_ref().map(|(ws, _)| ws),
                slow.as_ref().map(|(ws, _)| ws),
                "{input}"
            );
            if let Ok((ws, plain)) = &fast {
                // Plain exactly when the path named is its own real path: it exists,
                // with no link on it.
                let named = f.root.join(&ws.rel);
                let real = std::fs::canonicalize(&named).ok();
                assert_eq!(*plain, real.as_ref() == Some(&named), "{input}");
                if *plain {
                    assert_eq!(ws.abs, named, "{input}");
                }
                if *plain {
                    // So the root's own resolution of it finds no link either.
                    for root in roots(&f) {
                        assert_eq!(root.stat(ws).unwrap().1, ws.rel, "{input}");
                    }
                }
            }
        }
        // Every input above that resolves at all is looked at: some plain, some not.
        let plains: Vec<bool> = inputs
            .iter()
            .filter_map(|i| resolve_plain(&f.root, &home, i).ok().map(|(_, p)| p))
            .collect();
        assert!(
            plains.contains(&true) && plains.contains(&false),
            "{plains:?}"
        );
    }

    /// Both resolutions: `openat2` first, and the walk alone.
    fn roots(f: &Fixture) -> [Root; 2] {
        let open = || Root::open(&f.root, &f.root.join(".cairn-home")).unwrap();
        [open(), open().walking()]
    }

    fn at(root: &Path, rel: &str) -> WsPath {
        WsPath {
            abs: root.join(rel),
            rel: rel.to_string(),
        }
    }

    /// What a read of `ws` gives: the content, or the kind of failure.
    fn read(root: &Root, ws: &WsPath) -> String {
        match root.open_read(ws) {
            Ok((mut file, _)) => {
                let mut s = String::new();
                file.read_to_string(&mut s).unwrap();
                s
            }
            Err(OpenError::Outside(_)) => "outside".into(),
            Err(OpenError::NotRegular(kind)) => format!("not regular: {}", kind.describe()),
            Err(OpenError::Io(e)) => format!("io: {e}"),
        }
    }

    #[test]
    fn reads_follow_inside_symlinks_and_refuse_outside_ones() {
        let f = fixture();
        let loop_error = format!(
            "io: more than {SYMLINK_FOLLOWS_MAX} symlinks on the way (SYMLINK_FOLLOWS_MAX): a symlink loop?"
        );
        let cases: &[(&str, &str)] = &[
            ("a/b/f.txt", "inside"),
            ("in/f.txt", "inside"),
            ("abs_in/f.txt", "inside"),
            ("a/dotdot/f.txt", "inside"),
            ("a/file_link", "inside"),
            ("up/secret.txt", "outside"),
            ("a/climb/secret.txt", "outside"),
            ("abs_out/secret.txt", "outside"),
            ("loop1", &loop_error),
            ("loop1/x", &loop_error),
            ("to_home/log", "outside"),
            (".cairn-home/log", "outside"),
            ("fifo", "not regular: a FIFO (named pipe)"),
            ("a", "not regular: a directory"),
            ("a/missing", "io: No such file or directory (os error 2)"),
        ];
        for root in roots(&f) {
            let got: Vec<(&str, String)> = cases
                .iter()
                .map(|(rel, _)| (*rel, read(&root, &at(&f.root, rel))))
                .collect();
            let expected: Vec<(&str, String)> =
                cases.iter().map(|(r, e)| (*r, e.to_string())).collect();
            assert_eq!(got, expected, "walk only: {}", root.walk_only);
        }
    }

    #[test]
    fn symlinks_are_followed_up_to_the_limit_and_not_past_it() {
        let f = fixture();
        let max = SYMLINK_FOLLOWS_MAX as usize;
        // Chains of links to a folder: `c{n}_0` → `c{n}_1` → … → `c{n}_{n-1}` → `a/b`.
        for n in [max, max + 1] {
            for i in 0..n {
                let to = if i + 1 == n {
                    "a/b".to_string()
                } else {
                    format!("c{n}_{}", i + 1)
                };
                std::os::unix::fs::symlink(&to, f.root.join(format!("c{n}_{i}"))).unwrap();
            }
        }
        for root in roots(&f) {
            let got = |n: usize| read(&root, &at(&f.root, &format!("c{n}_0/f.txt")));
            assert_eq!(got(max), "inside");
            assert!(
                got(max + 1).contains("SYMLINK_FOLLOWS_MAX"),
                "{} (walk only: {})",
                got(max + 1),
                root.walk_only
            );
        }
    }

    #[test]
    fn the_real_path_is_the_one_reached() {
        let f = fixture();
        for root in roots(&f) {
            let real = |rel: &str| root.stat(&at(&f.root, rel)).map(|(_, r)| r).ok();
            assert_eq!(real("a/b/f.txt").as_deref(), Some("a/b/f.txt"));
            assert_eq!(real("in/f.txt").as_deref(), Some("a/b/f.txt"));
            assert_eq!(real("abs_in").as_deref(), Some("a/b"));
            assert_eq!(real("a/dotdot/f.txt").as_deref(), Some("a/b/f.txt"));
            assert_eq!(real("").as_deref(), Some(""));
            assert!(matches!(
                root.stat(&at(&f.root, "up")),
                Err(OpenError::Outside(_))
            ));
        }
    }

    #[test]
    fn writes_land_where_they_are_recorded_and_never_outside() {
        let f = fixture();
        for (i, root) in roots(&f).into_iter().enumerate() {
            // Through an inside symlink: the recorded path is the real one.
            let name = format!("in/new{i}.txt");
            let parent = root.parent(&at(&f.root, &name), false).unwrap();
            assert_eq!(parent.real(), format!("a/b/new{i}.txt"));
            parent.create_new(b"one").unwrap();
            assert_eq!(
                std::fs::read(f.root.join(format!("a/b/new{i}.txt"))).unwrap(),
                b"one"
            );
            // A create never overwrites; a replace does, with the mode asked.
            let e = parent.create_new(b"two").unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
            parent.replace(b"three", 0o640).unwrap();
            let meta = std::fs::metadata(f.root.join(format!("a/b/new{i}.txt"))).unwrap();
            assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
            // Out through a symlink: refused, nothing made.
            // A symlink named last is written through to its target, recorded as such.
            let parent = root.parent(&at(&f.root, "a/file_link"), false).unwrap();
            assert_eq!(parent.real(), "a/b/f.txt");
            for rel in [
                "up/x.txt",
                "a/climb/x.txt",
                "abs_out/x.txt",
                "to_home/x",
                "leak",
            ] {
                assert!(
                    matches!(
                        root.parent(&at(&f.root, rel), true),
                        Err(OpenError::Outside(_))
                    ),
                    "{rel}"
                );
            }
            // Missing folders are made, and removed again on undo.
            let parent = root
                .parent(&at(&f.root, &format!("n{i}/m/x.txt")), true)
                .unwrap();
            assert_eq!(parent.real(), format!("n{i}/m/x.txt"));
            assert!(f.root.join(format!("n{i}/m")).is_dir());
            parent.undo();
            assert!(!f.root.join(format!("n{i}")).exists());
        }
        let mut names: Vec<String> = std::fs::read_dir(&f.out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["into_sub", "secret.txt", "sub"]);
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(f.root.join("a/b"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".cairn-tmp")
            })
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_granted_folder_outside_gives_its_own_files_only() {
        let f = fixture();
        for root in roots(&f) {
            let outside = |name: &str| WsPath {
                abs: f.out.join(name),
                rel: f.out.join(name).to_string_lossy().into_owned(),
            };
            assert_eq!(read(&root, &outside("secret.txt")), "OUTSIDE");
            assert_eq!(read(&root, &outside("into_sub")), "outside");
            let parent = root.parent(&outside("new.txt"), false).unwrap();
            assert_eq!(parent.real(), f.out.join("new.txt").to_string_lossy());
        }
    }

    /// Where an open by another program lands: symlinks followed wherever they lead,
    /// `..` taken physically (`up/..` is the folder above `up`'s target), what does not
    /// exist placed under its deepest existing ancestor.
    #[test]
    fn a_path_lands_where_the_kernel_takes_it() {
        let f = fixture();
        let base = f.root.parent().unwrap().to_path_buf();
        symlink(f.out.join("nothing.txt"), f.root.join("dangling_out")).unwrap();
        let ws = |rel: &str| f.root.join(rel);
        let cases: Vec<(PathBuf, PathBuf)> = vec![
            (ws("a/b/f.txt"), ws("a/b/f.txt")),
            (ws("in/f.txt"), ws("a/b/f.txt")),
            (ws("a/dotdot/f.txt"), ws("a/b/f.txt")),
            (ws("up/secret.txt"), f.out.join("secret.txt")),
            (ws("leak"), f.out.join("secret.txt")),
            (ws("a/climb/secret.txt"), f.out.join("secret.txt")),
            (ws("abs_out/new/deeper.txt"), f.out.join("new/deeper.txt")),
            // `..` after a link is the folder above its target, not the link's folder.
            (ws("up/../x.txt"), base.join("x.txt")),
            (ws("in/../f.txt"), ws("a/f.txt")),
            // `..` after a folder that does not exist yet: as made, then climbed.
            (ws("new/../a/b/f.txt"), ws("a/b/f.txt")),
            (ws("new/deeper/../../up/x"), f.out.join("x")),
            // A dangling link: where a create through it lands.
            (ws("dangling_out"), f.out.join("nothing.txt")),
            (ws("a/b/f.txt/x"), ws("a/b/f.txt/x")),
            (PathBuf::from("/../.."), PathBuf::from("/")),
        ];
        for (path, want) in cases {
            assert_eq!(landing(&path).unwrap(), want, "{}", path.display());
        }
        assert!(landing(&ws("loop1/x")).is_err());
        assert_eq!(
            landing(Path::new("a/b")).unwrap_err().kind(),
            std::io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn a_landing_follows_symlinks_up_to_the_limit_and_not_past_it() {
        let f = fixture();
        let max = SYMLINK_FOLLOWS_MAX as usize;
        for n in [max, max + 1] {
            for i in 0..n {
                let to = if i + 1 == n {
                    f.out.to_string_lossy().into_owned()
                } else {
                    format!("c{n}_{}", i + 1)
                };
                symlink(&to, f.root.join(format!("c{n}_{i}"))).unwrap();
            }
        }
        assert_eq!(
            landing(&f.root.join(format!("c{max}_0/secret.txt"))).unwrap(),
            f.out.join("secret.txt")
        );
        let past = landing(&f.root.join(format!("c{}_0/secret.txt", max + 1))).unwrap_err();
        assert!(past.to_string().contains("SYMLINK_FOLLOWS_MAX"), "{past}");
    }
}
