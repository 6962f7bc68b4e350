//! The OS sandbox of shell commands: a Landlock ruleset that every command (`run_shell`,
//! `shell`, background processes, `problems`' check command) runs under.
//!
//! Commands may read and execute anywhere and write only in the workspace, the session's
//! temporary folder (given as `TMPDIR`, removed when the session ends), a few device files
//! (`/dev/null`, `/dev/zero`, `/dev/full`, `/dev/tty`, `/dev/random`, `/dev/urandom`)
//! and folders (`/dev/pts`, `/dev/shm`), and the configured extra roots (a build tool's
//! cache, say). Signals and abstract Unix sockets are scoped (Landlock ABI 6): a command
//! signals, and connects to abstract sockets of, only its own Landlock domain — itself
//! and what it starts —, never the engine or a process outside. In
//! [`SandboxMode::Strict`] the network is cut: TCP `bind` and `connect` are refused by
//! Landlock network rules (ABI 4 and later), and two seccomp filters (seccompiler)
//! refuse `socket` for every family but `AF_UNIX` with `EACCES`, so UDP and raw sockets
//! fail too (Unix sockets, local IPC, stay), and io_uring with `EPERM` (what the
//! kernel's own `io_uring_disabled` answers): its operations make sockets and send on
//! them without the system calls a filter sees. A filter knows the native system call
//! ABI only: a call of another one (a 32-bit program, `int 0x80`, where `socketcall`
//! would open a socket) kills the process, and on x86-64 the x32 numbers of the refused
//! calls are refused too. io_uring stays in `workspace-write`: Landlock checks what its
//! operations open, bind and connect as it checks the system calls, so it bypasses
//! nothing there.
//!
//! The cairn home is never written by a command. When it lies outside every place
//! commands may write, the filesystem rules keep it. When it lies inside one (a home of
//! `~/.cairn` with a workspace of `~`) — in any mode, `off` included, since Landlock
//! cannot carve a read-only hole in a writable folder — each command runs in a private
//! mount namespace where the home is a read-only bind mount ([`HomeMount`]), made in
//! the child after `fork` and before `exec`: `unshare(CLONE_NEWNS)` where the engine may
//! (root), else a new user namespace too, the user and group mapped to themselves. In a
//! sandboxed mode the child also drops `CAP_SYS_ADMIN` and `CAP_DAC_READ_SEARCH` from
//! its bounding set, so that a command run as root cannot reach the home's writable
//! mount through a clone of the workspace's mount (`open_tree`) or a file handle
//! (`open_by_handle_at`); Landlock refuses mounts, unmounts and `/proc/<pid>/root` of
//! a process outside. In mode `off` a command has the engine's rights and could undo
//! it: there the read-only home stops mistakes, not an attacker. Where neither
//! namespace can be made, the session refuses to start.
//!
//! The ruleset is built once per session, in the engine ([`Sandbox::new`]): the paths
//! are opened and the rules added there. What it gives the kernel is then probed once,
//! on a throwaway thread (Landlock, seccomp and `no_new_privs` bind a thread, not the
//! process), the home's mount in a throwaway child, and recorded as [`Sandboxed`]: the
//! mode, the kernel's ABI, whether the ruleset was enforced fully, partly or not at all,
//! and each feature ([`SandboxFeatures`]). Each command gets a duplicate of the
//! ruleset's descriptor, and its child only makes system calls on what the parent
//! built, after `fork` and before `exec` ([`crate::process::Process::spawn_in`]).
//!
//! Best effort: on a kernel without Landlock (or without ABI 6's scopes, or seccomp)
//! the commands run without what it lacks, and the record says so (`missing`); nothing
//! pretends.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use crate::event::{Enforcement, Feature, HomeGuard, SandboxFeatures, SandboxMode, Sandboxed};

/// The Landlock ABI whose filesystem rights the ruleset handles: every right up to it
/// is refused outside the writable places. A kernel with an older ABI enforces part.
const FS_ABI: ABI = ABI::V7;

/// The first Landlock ABI with every filesystem right of [`FS_ABI`] (ABI 5 added the
/// last one, `ioctl` on devices).
const FS_ALL_RIGHTS_ABI: u32 = 5;

/// The first Landlock ABI with TCP rules.
const TCP_ABI: u32 = 4;

/// The first Landlock ABI with scopes (signals, abstract Unix sockets).
const SCOPE_ABI: u32 = 6;

/// Device files a command may write (when they exist).
const DEVICE_FILES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
];

/// Device folders a command may write in (when they exist).
const DEVICE_DIRS: &[&str] = &["/dev/pts", "/dev/shm"];

/// An error setting up the sandbox.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot create the session's temporary folder in {}: {source}", path.display())]
    Tmp {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot build the sandbox's ruleset: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    #[error("cannot duplicate the sandbox's ruleset: {0}")]
    Dup(std::io::Error),
    #[error(
        "the cairn home {} lies in {}, where commands may write, and this system cannot make it read-only for them ({why}); move the home out of it: set CAIRN_HOME to a folder outside {} (and move the home's contents there)",
        home.display(),
        place.display(),
        place.display()
    )]
    HomeWritable {
        home: PathBuf,
        place: PathBuf,
        why: String,
    },
    #[error(
        "{what} {} lies inside the cairn home {}, which commands may never write: choose a folder outside it",
        path.display(),
        home.display()
    )]
    WritableInHome {
        what: &'static str,
        path: PathBuf,
        home: PathBuf,
    },
    #[error("the cairn home {} cannot be mounted read-only: {why}", home.display())]
    HomePath { home: PathBuf, why: String },
}

/// A session's sandbox: its temporary folder, its ruleset and what the kernel enforces
/// of it.
#[derive(Debug)]
pub struct Sandbox {
    mode: SandboxMode,
    /// Removed when the sandbox is dropped (the session's end).
    tmp: Option<tempfile::TempDir>,
    /// The writable folders, absolute: the workspace, `tmp`, the extra roots.
    writable: Vec<PathBuf>,
    /// `None` when off or when the kernel enforces nothing.
    ruleset: Option<RulesetCreated>,
    /// Strict mode: a seccomp filter refusing `socket` for every family but
    /// `AF_UNIX` (UDP, raw and any other network socket, which Landlock's TCP rules
    /// leave open).
    sockets: Option<Arc<seccompiler::BpfProgram>>,
    /// Strict mode: a seccomp filter refusing io_uring.
    io_uring: Option<Arc<seccompiler::BpfProgram>>,
    /// The home's read-only mount, when the home lies where commands may write.
    home: Option<Arc<HomeMount>>,
    recorded: Sandboxed,
}

/// What confines one command's child (see [`crate::process::Process::spawn_in`]), in
/// the order the child applies it: the home's mount, the ruleset, the filters.
#[derive(Debug, Default)]
pub struct Confinement {
    pub home: Option<Arc<HomeMount>>,
    pub ruleset: Option<RulesetCreated>,
    pub sockets: Option<Arc<seccompiler::BpfProgram>>,
    pub io_uring: Option<Arc<seccompiler::BpfProgram>>,
}

/// `__X32_SYSCALL_BIT`: on x86-64, an x32 system call is the native number with this
/// bit set, and seccomp sees it with the native architecture.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// A seccomp program applying `errno` to the system calls of `rules` (each with its
/// rules; none: every call) and allowing every other call of the native ABI. A call
/// of another ABI kills the process (seccompiler checks the architecture first); on
/// x86-64 the x32 number of each call gets the same rules.
fn filter(
    rules: Vec<(i64, Vec<seccompiler::SeccompRule>)>,
    errno: i32,
) -> Result<seccompiler::BpfProgram, String> {
    use seccompiler::{SeccompAction, SeccompFilter};
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("{e:?}"))?;
    #[cfg(target_arch = "x86_64")]
    let rules: Vec<(i64, Vec<seccompiler::SeccompRule>)> = rules
        .into_iter()
        .flat_map(|(nr, r)| [(nr | X32_SYSCALL_BIT, r.clone()), (nr, r)])
        .collect();
    let filter = SeccompFilter::new(
        rules.into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

/// The socket filter of strict mode: `socket(domain, …)` with a domain other than
/// `AF_UNIX` fails with `EACCES`.
fn socket_filter() -> Result<seccompiler::BpfProgram, String> {
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )
    .map_err(|e| e.to_string())?;
    let rule = SeccompRule::new(vec![not_unix]).map_err(|e| e.to_string())?;
    filter(vec![(libc::SYS_socket, vec![rule])], libc::EACCES)
}

/// The io_uring filter of strict mode: its three system calls fail with `EPERM`.
fn io_uring_filter() -> Result<seccompiler::BpfProgram, String> {
    filter(
        vec![
            (libc::SYS_io_uring_setup, Vec::new()),
            (libc::SYS_io_uring_enter, Vec::new()),
            (libc::SYS_io_uring_register, Vec::new()),
        ],
        libc::EPERM,
    )
}

/// A filter of strict mode, built and tried on a throwaway thread: `None` when it
/// cannot be built (an architecture seccompiler does not know) or the kernel refuses
/// it (no seccomp), and the session records the feature as missing.
fn strict_filter(
    build: fn() -> Result<seccompiler::BpfProgram, String>,
) -> Option<Arc<seccompiler::BpfProgram>> {
    let program = Arc::new(build().ok()?);
    let copy = Arc::clone(&program);
    let applied = std::thread::spawn(move || seccompiler::apply_filter(&copy).is_ok())
        .join()
        .unwrap_or(false);
    applied.then_some(program)
}

/// The session's temporary folder, created in the system's, and its canonical path
/// (so that a path a command reports can be compared with it); never in the home.
fn session_tmp(session: &str, home: &Path) -> Result<(tempfile::TempDir, PathBuf), SandboxError> {
    let parent = std::env::temp_dir();
    let tmp = tempfile::Builder::new()
        .prefix(&format!("cairn-{session}-"))
        .tempdir_in(&parent)
        .map_err(|source| SandboxError::Tmp {
            path: parent.clone(),
            source,
        })?;
    let tmp_path = tmp
        .path()
        .canonicalize()
        .unwrap_or(tmp.path().to_path_buf());
    if tmp_path.starts_with(home) {
        return Err(SandboxError::WritableInHome {
            what: "the session's temporary folder",
            path: tmp_path,
            home: home.to_path_buf(),
        });
    }
    Ok((tmp, tmp_path))
}

impl Sandbox {
    /// Sets up the sandbox of a session in `workspace` (canonical) whose cairn home is
    /// `home` (canonical): creates its temporary folder (in the system's temporary
    /// folder, named after `session`), builds the ruleset and filters for `mode`,
    /// probes what the kernel enforces of them, and, when the home lies where commands
    /// may write, how to mount it read-only for them (an error when no way works).
    pub fn new(
        mode: SandboxMode,
        workspace: &Path,
        extra_roots: &[PathBuf],
        session: &str,
        home: &Path,
    ) -> Result<Sandbox, SandboxError> {
        let roots: Vec<PathBuf> = extra_roots
            .iter()
            .map(|r| r.canonicalize().unwrap_or(r.clone()))
            .collect();
        for root in &roots {
            if root.starts_with(home) {
                return Err(SandboxError::WritableInHome {
                    what: "the write root",
                    path: root.clone(),
                    home: home.to_path_buf(),
                });
            }
        }
        if mode == SandboxMode::Off {
            return Sandbox::off(workspace, roots, home);
        }
        let (tmp, tmp_path) = session_tmp(session, home)?;
        let mut writable = vec![workspace.to_path_buf(), tmp_path.clone()];
        writable.extend(roots);
        let ruleset = build(mode, &writable)?;
        let (enforced, abi) = probe(&ruleset);
        let landlock = enforced != Enforcement::None;
        let mut places = writable.clone();
        // Canonical like the home (`/dev/shm` is a link to `/run/shm` on some systems).
        places.extend(
            DEVICE_DIRS
                .iter()
                .map(|d| Path::new(d).canonicalize().unwrap_or(PathBuf::from(d))),
        );
        let (home, guard) = guard_home(home, &places, landlock, true)?;
        let by_abi = |first: u32| {
            if landlock && abi >= first {
                Feature::Enforced
            } else {
                Feature::Missing
            }
        };
        let strict = mode == SandboxMode::Strict;
        let sockets = strict.then(|| strict_filter(socket_filter)).flatten();
        let io_uring = strict.then(|| strict_filter(io_uring_filter)).flatten();
        let in_strict = |f: &Option<_>| match (strict, f.is_some()) {
            (false, _) => Feature::Off,
            (true, true) => Feature::Enforced,
            (true, false) => Feature::Missing,
        };
        let features = SandboxFeatures {
            filesystem: match by_abi(FS_ALL_RIGHTS_ABI) {
                Feature::Missing if landlock => Feature::Partial,
                f => f,
            },
            tcp: if strict {
                by_abi(TCP_ABI)
            } else {
                Feature::Off
            },
            sockets: in_strict(&sockets),
            io_uring: in_strict(&io_uring),
            signals: by_abi(SCOPE_ABI),
            abstract_unix: by_abi(SCOPE_ABI),
            home: guard,
        };
        let recorded = Sandboxed {
            mode,
            abi,
            enforced,
            tmp: Some(tmp_path.to_string_lossy().into_owned()),
            writable: writable
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            features: Some(features),
        };
        Ok(Sandbox {
            mode,
            tmp: Some(tmp),
            writable,
            ruleset: landlock.then_some(ruleset),
            sockets,
            io_uring,
            home,
            recorded,
        })
    }

    /// No sandbox: commands may write anywhere; the home is made read-only where a
    /// command is most likely to write it by mistake.
    fn off(workspace: &Path, roots: Vec<PathBuf>, home: &Path) -> Result<Sandbox, SandboxError> {
        let mode = SandboxMode::Off;
        // Commands may write anywhere; the home is made read-only where a command
        // is most likely to write it by mistake: in the workspace or a root.
        let mut places = vec![workspace.to_path_buf()];
        places.extend(roots);
        let (home, guard) = guard_home(home, &places, false, false)?;
        Ok(Sandbox {
            mode,
            tmp: None,
            writable: Vec::new(),
            ruleset: None,
            sockets: None,
            io_uring: None,
            home,
            recorded: Sandboxed {
                mode,
                abi: kernel_abi(),
                enforced: Enforcement::None,
                tmp: None,
                writable: Vec::new(),
                features: Some(SandboxFeatures {
                    filesystem: Feature::Off,
                    tcp: Feature::Off,
                    sockets: Feature::Off,
                    io_uring: Feature::Off,
                    signals: Feature::Off,
                    abstract_unix: Feature::Off,
                    home: guard,
                }),
            },
        })
    }

    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// What `session_started` records.
    pub fn recorded(&self) -> &Sandboxed {
        &self.recorded
    }

    /// The session's temporary folder (`TMPDIR` of commands); none when off.
    pub fn tmp(&self) -> Option<&Path> {
        self.tmp.as_ref().map(|t| t.path())
    }

    /// The folders commands may write in.
    pub fn writable(&self) -> &[PathBuf] {
        &self.writable
    }

    /// What confines one command's child: a duplicate of the session's ruleset (one
    /// `dup`, the rules are shared), the filters and the home's mount, each shared.
    pub fn for_command(&self) -> Result<Confinement, SandboxError> {
        Ok(Confinement {
            home: self.home.clone(),
            ruleset: self
                .ruleset
                .as_ref()
                .map(|r| r.try_clone().map_err(SandboxError::Dup))
                .transpose()?,
            sockets: self.sockets.clone(),
            io_uring: self.io_uring.clone(),
        })
    }
}

/// How the home is kept from commands that may write in `places` (and, when
/// `landlock`, nowhere else): outside them, or mounted read-only (the way that works
/// here, found by trying; an error when none does). `drop_caps`: the commands' children
/// also drop the capabilities that reach a mount's writable copy (sandboxed modes).
fn guard_home(
    home: &Path,
    places: &[PathBuf],
    landlock: bool,
    drop_caps: bool,
) -> Result<(Option<Arc<HomeMount>>, HomeGuard), SandboxError> {
    let Some(place) = places.iter().find(|p| home.starts_with(p)) else {
        let guard = if landlock {
            HomeGuard::Outside
        } else {
            HomeGuard::Unguarded
        };
        return Ok((None, guard));
    };
    let mut mount = HomeMount::new(home, drop_caps && landlock)?;
    let guard = mount.choose().map_err(|why| SandboxError::HomeWritable {
        home: home.to_path_buf(),
        place: place.clone(),
        why,
    })?;
    Ok((Some(Arc::new(mount)), guard))
}

/// The file system, remount flags kept and capabilities dropped of a home mount.
type HomeWayKey = (u64, libc::c_ulong, bool);

thread_local! {
    /// The ways this thread found, by [`HomeMount::choose`]'s probe, to mount a home
    /// read-only: for each [`HomeWayKey`], whether a user namespace is needed. Few
    /// entries (one per file system a home is on).
    static HOME_WAYS: std::cell::RefCell<Vec<(HomeWayKey, bool)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The cairn home made read-only for one command: built in the engine, applied in the
/// child between `fork` and `exec` ([`HomeMount::enter`]), where only system calls on
/// what the parent prepared are sound (no allocation).
#[derive(Debug)]
pub struct HomeMount {
    /// The home, canonical.
    path: CString,
    /// The flags of the mount holding the home that a read-only remount keeps (`nosuid`,
    /// `nodev`, `noexec`, the access-time ones): in a user namespace the kernel refuses
    /// a remount that would clear them.
    keep: libc::c_ulong,
    /// A new user namespace too (the engine may not make a mount namespace alone).
    user_ns: bool,
    /// The device of the file system holding the home: the way found to mount it
    /// read-only is remembered by it ([`HomeMount::choose`]).
    dev: u64,
    /// [`HomeMount::choose`] made its probe for this one (the tests' witness).
    probed: bool,
    /// Drop `CAP_SYS_ADMIN` and `CAP_DAC_READ_SEARCH` from the bounding set.
    drop_caps: bool,
}

/// The step of [`HomeMount::enter`] that failed (with its errno).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum HomeStep {
    Unshare = 1,
    MapIds,
    Private,
    Bind,
    ReadOnly,
    DropCaps,
    /// Every step said yes but the home is still writable.
    StillWritable,
}

impl HomeStep {
    const ALL: [HomeStep; 7] = [
        HomeStep::Unshare,
        HomeStep::MapIds,
        HomeStep::Private,
        HomeStep::Bind,
        HomeStep::ReadOnly,
        HomeStep::DropCaps,
        HomeStep::StillWritable,
    ];

    fn what(self) -> &'static str {
        match self {
            HomeStep::Unshare => "unshare",
            HomeStep::MapIds => "mapping the user and group",
            HomeStep::Private => "making the mounts private",
            HomeStep::Bind => "the bind mount",
            HomeStep::ReadOnly => "the read-only remount",
            HomeStep::DropCaps => "dropping capabilities",
            HomeStep::StillWritable => "the home stayed writable",
        }
    }
}

impl HomeMount {
    /// The read-only mount of `home` (canonical, existing), by a mount namespace alone
    /// until [`HomeMount::choose`] says otherwise.
    pub fn new(home: &Path, drop_caps: bool) -> Result<HomeMount, SandboxError> {
        let path =
            CString::new(home.as_os_str().as_bytes()).map_err(|_| SandboxError::HomePath {
                home: home.to_path_buf(),
                why: "its path holds a NUL byte".into(),
            })?;
        // SAFETY: an all-zero statvfs is a valid value; statvfs writes into it.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and a statvfs of ours.
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
            return Err(SandboxError::HomePath {
                home: home.to_path_buf(),
                why: std::io::Error::last_os_error().to_string(),
            });
        }
        let dev = std::fs::metadata(home)
            .map_err(|e| SandboxError::HomePath {
                home: home.to_path_buf(),
                why: e.to_string(),
            })?
            .dev();
        let f = st.f_flag;
        let mut keep = 0;
        for (st_flag, ms_flag) in [
            (libc::ST_NOSUID, libc::MS_NOSUID),
            (libc::ST_NODEV, libc::MS_NODEV),
            (libc::ST_NOEXEC, libc::MS_NOEXEC),
            (libc::ST_NOATIME, libc::MS_NOATIME),
            (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
            (libc::ST_RELATIME, libc::MS_RELATIME),
        ] {
            if f & st_flag != 0 {
                keep |= ms_flag;
            }
        }
        if keep & (libc::MS_NOATIME | libc::MS_RELATIME) == 0 {
            keep |= libc::MS_STRICTATIME;
        }
        Ok(HomeMount {
            path,
            keep,
            user_ns: false,
            drop_caps,
            dev,
            probed: false,
        })
    }

    /// The same mount made in a new user namespace too.
    pub fn in_user_namespace(mut self) -> HomeMount {
        self.user_ns = true;
        self
    }

    /// Finds how the mount can be made here — a mount namespace alone, else one in a
    /// new user namespace — by making it in a throwaway child; says why neither works.
    ///
    /// The way found is remembered by the thread, by the home's file system, the
    /// flags its remount keeps and the capabilities dropped: it is the system's answer,
    /// not the path's, and each probe forks the whole process (an engine a replayed
    /// session or a worker's job starts, its home in the temporary folder, would fork
    /// once each, copying the page tables of a process other threads are using). By the
    /// thread, because what a child may unshare is its thread's (seccomp filters and
    /// capabilities are per thread, and the child inherits them). A way remembered that
    /// did not work for some path would fail the command's child, which makes the mount
    /// before it runs anything: it fails closed either way.
    fn choose(&mut self) -> Result<HomeGuard, String> {
        let key = (self.dev, self.keep, self.drop_caps);
        let known =
            HOME_WAYS.with_borrow(|ways| ways.iter().find(|(k, _)| *k == key).map(|(_, u)| *u));
        if let Some(user_ns) = known {
            self.user_ns = user_ns;
            return Ok(HomeMount::guard_of(user_ns));
        }
        let chosen = self.probe();
        if chosen.is_ok() {
            HOME_WAYS.with_borrow_mut(|ways| ways.push((key, self.user_ns)));
        }
        chosen
    }

    fn guard_of(user_ns: bool) -> HomeGuard {
        if user_ns {
            HomeGuard::UserNamespace
        } else {
            HomeGuard::MountNamespace
        }
    }

    /// [`HomeMount::choose`]'s probe: a mount namespace alone, else a user namespace too.
    fn probe(&mut self) -> Result<HomeGuard, String> {
        self.probed = true;
        let alone = match self.try_in_child() {
            Ok(()) => return Ok(HomeGuard::MountNamespace),
            Err(e) => e,
        };
        self.user_ns = true;
        match self.try_in_child() {
            Ok(()) => Ok(HomeGuard::UserNamespace),
            Err(with_user) => Err(format!(
                "a mount namespace: {alone}; with a user namespace: {with_user}"
            )),
        }
    }

    /// Makes the mount in a forked child that then exits; the step that failed and its
    /// error otherwise.
    fn try_in_child(&self) -> Result<(), String> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two descriptors of ours.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(format!("pipe: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: the child makes system calls only (enter, access, write, _exit) on
        // what was prepared before the fork, as a command's child does.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: closing both ends of the pipe made above.
            unsafe {
                libc::close(fds[0]);
                libc::close(fds[1]);
            }
            return Err(format!("fork: {e}"));
        }
        if pid == 0 {
            // 0: read-only; else the step that failed and its errno.
            let report: [u8; 2] = match self.enter() {
                Err((step, errno)) => [step as u8, u8::try_from(errno).unwrap_or(u8::MAX)],
                // SAFETY: a NUL-terminated path.
                Ok(()) if unsafe { libc::access(self.path.as_ptr(), libc::W_OK) } == 0 => {
                    [HomeStep::StillWritable as u8, 0]
                }
                Ok(()) => [0, 0],
            };
            // SAFETY: writing two bytes of ours to the pipe, then leaving at once.
            unsafe {
                libc::write(fds[1], report.as_ptr().cast(), 2);
                libc::_exit(0);
            }
        }
        // SAFETY: closing our copy of the write end.
        unsafe { libc::close(fds[1]) };
        let mut report = [0u8; 2];
        // SAFETY: reading at most two bytes into ours, then closing the read end.
        let n = unsafe {
            let n = libc::read(fds[0], report.as_mut_ptr().cast(), 2);
            libc::close(fds[0]);
            n
        };
        let mut status = 0;
        // SAFETY: reaping the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if n != 2 {
            return Err(format!("the child ended with status {status}"));
        }
        if report[0] == 0 {
            return Ok(());
        }
        let what = HomeStep::ALL
            .into_iter()
            .find(|k| *k as u8 == report[0])
            .map_or("an unknown step", HomeStep::what);
        if report[1] == 0 {
            Err(what.to_string())
        } else {
            Err(format!(
                "{what}: {}",
                std::io::Error::from_raw_os_error(i32::from(report[1]))
            ))
        }
    }

    /// In the child, between `fork` and `exec`: a private mount namespace (in a new
    /// user namespace when so chosen, the user and group mapped to themselves) where
    /// the home is bound read-only over itself; then the capabilities dropped when
    /// asked. Only system calls, no allocation: see [`crate::process::Process::spawn_in`].
    pub fn enter(&self) -> Result<(), (HomeStep, i32)> {
        let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        // SAFETY (every call below): system calls on NUL-terminated strings and buffers
        // that live on this stack or in `self`.
        unsafe {
            if self.user_ns {
                // Read before unsharing: after it, they read as the overflow ids.
                let (uid, gid) = (libc::getuid(), libc::getgid());
                if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                    return Err((HomeStep::Unshare, errno()));
                }
                let mut buf = [0u8; 40];
                write_proc(c"/proc/self/setgroups", b"deny")
                    .and_then(|()| write_proc(c"/proc/self/uid_map", id_map(uid, &mut buf)))
                    .and_then(|()| write_proc(c"/proc/self/gid_map", id_map(gid, &mut buf)))
                    .map_err(|e| (HomeStep::MapIds, e))?;
            } else if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err((HomeStep::Unshare, errno()));
            }
            // Private first: a bind made on a shared mount would reach the engine's
            // namespace too.
            let none: *const libc::c_char = std::ptr::null();
            if libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err((HomeStep::Private, errno()));
            }
            let home = self.path.as_ptr();
            if libc::mount(
                home,
                home,
                none,
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ) != 0
            {
                return Err((HomeStep::Bind, errno()));
            }
            let flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | self.keep;
            if libc::mount(none, home, none, flags, std::ptr::null()) != 0 {
                return Err((HomeStep::ReadOnly, errno()));
            }
            if self.drop_caps {
                for cap in [CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH] {
                    if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                        return Err((HomeStep::DropCaps, errno()));
                    }
                }
            }
        }
        Ok(())
    }
}

/// `CAP_DAC_READ_SEARCH` (`linux/capability.h`): with it, `open_by_handle_at` opens a
/// file by its handle on any mount, the home's writable one included.
const CAP_DAC_READ_SEARCH: libc::c_ulong = 2;

/// `CAP_SYS_ADMIN` (`linux/capability.h`): with it, `open_tree` clones the workspace's
/// mount without the read-only home over it.
const CAP_SYS_ADMIN: libc::c_ulong = 21;

/// Writes `data` to the file at `path` (a `/proc/self` file) in one write; the errno
/// when it fails.
fn write_proc(path: &CStr, data: &[u8]) -> Result<(), i32> {
    let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: open, write and close on a NUL-terminated path and a buffer of ours.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(errno());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let e = errno();
        libc::close(fd);
        if usize::try_from(n).ok() != Some(data.len()) {
            return Err(e);
        }
    }
    Ok(())
}

/// `"ID ID 1\n"` in `buf`: a user or group mapped to itself, written without
/// allocating.
fn id_map(id: u32, buf: &mut [u8; 40]) -> &[u8] {
    let mut digits = [0u8; 10];
    let mut n = 0;
    let mut rest = id;
    loop {
        digits[n] = b'0' + (rest % 10) as u8;
        n += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let mut len = 0;
    for _ in 0..2 {
        for d in digits[..n].iter().rev() {
            buf[len] = *d;
            len += 1;
        }
        buf[len] = b' ';
        len += 1;
    }
    buf[len] = b'1';
    buf[len + 1] = b'\n';
    &buf[..len + 2]
}

/// The ruleset of `mode` with `writable` folders, created (its descriptor open, every
/// rule added). Best effort: rights the kernel lacks are dropped, and the probe says so.
fn build(mode: SandboxMode, writable: &[PathBuf]) -> Result<RulesetCreated, SandboxError> {
    let all = AccessFs::from_all(FS_ABI);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        // Signals and abstract Unix sockets reach only the command's own domain.
        .scope(Scope::Signal | Scope::AbstractUnixSocket)?;
    if mode == SandboxMode::Strict {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    let created = ruleset
        .create()?
        .no_new_privs(true)
        // Read and execute anywhere.
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(FS_ABI)))?
        // Files get only the rights a file can have (the crate trims them).
        .add_rules(path_beneath_rules(DEVICE_FILES, all))?
        .add_rules(path_beneath_rules(DEVICE_DIRS, all))?
        .add_rules(path_beneath_rules(writable, all))?;
    // No network rule: in strict mode every TCP bind and connect is refused.
    Ok(created)
}

/// What the kernel enforces of `ruleset` and its Landlock ABI, found by restricting a
/// throwaway thread with a duplicate of it.
fn probe(ruleset: &RulesetCreated) -> (Enforcement, u32) {
    let Ok(copy) = ruleset.try_clone() else {
        return (Enforcement::None, kernel_abi());
    };
    let status = std::thread::spawn(move || copy.restrict_self())
        .join()
        .ok()
        .and_then(Result::ok);
    let Some(status) = status else {
        return (Enforcement::None, kernel_abi());
    };
    let enforced = match status.ruleset {
        RulesetStatus::FullyEnforced => Enforcement::Full,
        RulesetStatus::PartiallyEnforced => Enforcement::Partial,
        RulesetStatus::NotEnforced => Enforcement::None,
    };
    let abi = match status.landlock {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => kernel_abi.map_or(effective_abi as u32, |k| u32::try_from(k).unwrap_or(0)),
        _ => 0,
    };
    (enforced, abi)
}

/// The kernel's Landlock ABI version, 0 when it has none.
pub fn kernel_abi() -> u32 {
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag
    // only returns the ABI version (or -1), and touches no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    u32::try_from(v).unwrap_or(0)
}

/// The note added to a failed command's output when its stderr says a write was refused
/// on a path outside the writable places: which path, which mode, where writes go.
/// `stderr` is the preview the model is shown; `writable` what `session_started`
/// recorded. Only absolute paths are looked at (a relative one names a place in the
/// workspace, which the sandbox does not refuse).
pub fn refusal_note(sandbox: &Sandboxed, writable: &[String], stderr: &str) -> Option<String> {
    if sandbox.mode == SandboxMode::Off || sandbox.enforced == Enforcement::None {
        return None;
    }
    let outside = |p: &str| {
        !writable.iter().any(|w| Path::new(p).starts_with(w))
            && !DEVICE_FILES.contains(&p)
            && !DEVICE_DIRS.iter().any(|d| Path::new(p).starts_with(d))
    };
    let path = stderr
        .lines()
        .filter(|l| l.contains("Permission denied") || l.contains("Read-only file system"))
        .flat_map(paths_in)
        .find(|p| outside(p))?;
    let extra: Vec<&str> = writable.iter().skip(2).map(String::as_str).collect();
    let places = if extra.is_empty() {
        "the workspace and $TMPDIR".to_string()
    } else {
        format!("the workspace, $TMPDIR and {}", extra.join(", "))
    };
    Some(format!(
        "note: the sandbox ({}) allows writes only in {places}; {path} is outside\n",
        sandbox.mode
    ))
}

/// The absolute paths a line of an error message names: quoted (`'…'`, `"…"`, `‘…’`)
/// or as a word, without the colon that follows it.
fn paths_in(line: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’')] {
        let mut rest = line;
        while let Some(a) = rest.find(open) {
            let after = &rest[a + open.len_utf8()..];
            let Some(b) = after.find(close) else { break };
            if after[..b].starts_with('/') {
                found.push(&after[..b]);
            }
            rest = &after[b + close.len_utf8()..];
        }
    }
    found.extend(
        line.split_whitespace()
            .map(|w| w.trim_end_matches([':', ',', ';']))
            .filter(|w| w.starts_with('/')),
    );
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(line: &str, expected: Option<&str>) {
        let s = Sandboxed {
            mode: SandboxMode::WorkspaceWrite,
            abi: 7,
            enforced: Enforcement::Full,
            tmp: None,
            writable: Vec::new(),
            features: None,
        };
        let writable = ["/ws".to_string(), "/tmp/cairn-x".to_string()];
        assert_eq!(
            refusal_note(&s, &writable, line).as_deref(),
            expected,
            "{line}"
        );
    }

    #[test]
    fn an_id_maps_to_itself_in_one_line() {
        let mut buf = [0u8; 40];
        assert_eq!(id_map(0, &mut buf), b"0 0 1\n");
        assert_eq!(id_map(1000, &mut buf), b"1000 1000 1\n");
        assert_eq!(id_map(u32::MAX, &mut buf), b"4294967295 4294967295 1\n");
    }

    /// `sh -c script` as user `uid` (when this is root; else as this user), with the
    /// home mount `mount` entered first when given: its exit code, stdout and stderr.
    fn run_as(uid: u32, mount: Option<HomeMount>, script: &str) -> (i32, String, String) {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", script]);
        // SAFETY: geteuid only reads this process's effective user.
        if unsafe { libc::geteuid() } == 0 {
            cmd.uid(uid).gid(uid);
        }
        if let Some(m) = mount {
            // SAFETY: `prctl` and `enter` only make system calls on what `m` holds.
            unsafe {
                cmd.pre_exec(move || {
                    // The change of user made the child non-dumpable, its /proc/self
                    // files root's; a user's own process is dumpable.
                    libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
                    m.enter()
                        .map_err(|(_, errno)| std::io::Error::from_raw_os_error(errno))
                });
            }
        }
        let out = match cmd.output() {
            Ok(out) => out,
            Err(e) => return (-1, String::new(), e.to_string()),
        };
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The way a user without the right to make a mount namespace gets a read-only
    /// home: a user namespace, where the command keeps its own user and group.
    #[test]
    fn a_home_mounted_in_a_user_namespace_is_read_only_and_the_user_stays_itself() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().canonicalize().unwrap().join("home");
        std::fs::create_dir(&home).unwrap();
        // Open to anyone, so that only the mount can refuse the write.
        for p in [tmp.path(), home.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let uid = 65534;
        let write = format!("id -u; id -g; echo x > {}/f", home.display());
        // Without the mount the write happens (the test can fail).
        let (code, _, err) = run_as(uid, None, &write);
        assert_eq!(code, 0, "{err}");
        std::fs::remove_file(home.join("f")).unwrap();
        let mount = HomeMount::new(&home, true).unwrap().in_user_namespace();
        let (code, out, err) = run_as(uid, Some(mount), &write);
        if code == -1 {
            eprintln!("no user namespaces here ({err}): the session would refuse to start");
            return;
        }
        // SAFETY: geteuid and getegid only read this process's ids.
        let (me, my_group) = unsafe { (libc::geteuid(), libc::getegid()) };
        let expected = if me == 0 {
            format!("{uid}\n{uid}\n")
        } else {
            format!("{me}\n{my_group}\n")
        };
        assert_eq!(out, expected);
        assert_ne!(code, 0);
        assert!(err.contains("Read-only file system"), "{err}");
        assert!(!home.join("f").exists());
    }

    // Guards against a fork of the whole process for each engine whose home is in a
    // writable place (each session `replay --all` replays, each job of a worker): the
    // way a home's file system can be mounted read-only is found once by a thread, and
    // a second home there gets it without a probe, as the first did.
    #[test]
    fn the_way_to_mount_a_home_is_found_once_per_file_system() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let (a, b) = (root.join("a"), root.join("b"));
        for h in [&a, &b] {
            std::fs::create_dir(h).unwrap();
        }
        let mut first = HomeMount::new(&a, false).unwrap();
        let found = first.choose();
        let Ok(way) = found else {
            eprintln!("no mount namespace here ({found:?}): nothing is remembered");
            return;
        };
        let mut second = HomeMount::new(&b, false).unwrap();
        assert_eq!(second.choose(), Ok(way));
        assert_eq!(second.user_ns, first.user_ns);
        assert!(!second.probed, "the second home was probed again");
        // The way remembered works: a child of the second home cannot write in it,
        // where one without the mount can (the test can fail).
        let write = format!("echo x > {}/f", b.display());
        let (code, _, err) = run_as(0, None, &write);
        assert_eq!(code, 0, "{err}");
        std::fs::remove_file(b.join("f")).unwrap();
        let (code, _, err) = run_as(0, Some(second), &write);
        assert_ne!(code, 0, "{err}");
        assert!(!b.join("f").exists());
    }

    #[test]
    fn a_refused_write_outside_is_named_and_one_inside_is_not() {
        let note = "note: the sandbox (workspace-write) allows writes only in the workspace and $TMPDIR; /etc/x is outside\n";
        check(
            "sh: 1: cannot create /etc/x: Permission denied\n",
            Some(note),
        );
        check(
            "touch: cannot touch '/etc/x': Permission denied\n",
            Some(note),
        );
        check(
            "PermissionError: [Errno 13] Permission denied: '/etc/x'\n",
            Some(note),
        );
        check("bash: /etc/x: Read-only file system\n", Some(note));
        check("touch: cannot touch '/ws/a': Permission denied\n", None);
        check(
            "touch: cannot touch '/tmp/cairn-x/a': Permission denied\n",
            None,
        );
        check("cat: /etc/x: No such file or directory\n", None);
        check("touch: cannot touch 'rel': Permission denied\n", None);
    }
}
