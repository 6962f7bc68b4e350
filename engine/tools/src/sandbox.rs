//! The OS sandbox of shell commands: a Landlock ruleset that every command (`run_shell`,
//! `shell`, background processes, `problems`' check command) runs under.
//!
//! Commands may read and execute anywhere and write only in the workspace, the session's
//! temporary folder (given as `TMPDIR`, removed when the session ends), a few device files
//! (`/dev/null`, `/dev/zero`, `/dev/full`, `/dev/tty`, `/dev/random`, `/dev/urandom`)
//! and folders (`/dev/pts`, `/dev/shm`), and the configured extra roots (a build tool's
//! cache, say). In [`SandboxMode::Strict`] the network is cut: TCP `bind` and `connect`
//! are refused by Landlock network rules (ABI 4 and later), and a seccomp filter
//! (seccompiler) refuses `socket` for every family but `AF_UNIX` with `EACCES`, so UDP
//! and raw sockets fail too; Unix sockets (local IPC) stay.
//!
//! The ruleset is built once per session, in the engine ([`Sandbox::new`]): the paths
//! are opened and the rules added there. What it gives the kernel is then probed once,
//! on a throwaway thread (Landlock and `no_new_privs` bind a thread, not the process),
//! and recorded as [`Sandboxed`]: the mode, the kernel's ABI, and whether the ruleset
//! was enforced fully, partly or not at all. Each command gets a duplicate of the
//! ruleset's descriptor, and its child only calls `landlock_restrict_self` on it, after
//! `fork` and before `exec` ([`crate::process::Process::spawn_in`]).
//!
//! Best effort: on a kernel without Landlock the commands run unconfined, and the
//! record says so (enforcement `none`); nothing pretends.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, path_beneath_rules,
};

use crate::event::{Enforcement, SandboxMode, Sandboxed};

/// The Landlock ABI whose filesystem rights the ruleset handles: every right up to it
/// is refused outside the writable places. A kernel with an older ABI enforces part.
const FS_ABI: ABI = ABI::V7;

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
    sockets: Option<std::sync::Arc<seccompiler::BpfProgram>>,
    recorded: Sandboxed,
}

/// What confines one command's child (see [`crate::process::Process::spawn_in`]).
#[derive(Debug, Default)]
pub struct Confinement {
    pub ruleset: Option<RulesetCreated>,
    pub sockets: Option<std::sync::Arc<seccompiler::BpfProgram>>,
}

/// The seccomp filter of strict mode: `socket(domain, …)` with a domain other than
/// `AF_UNIX` fails with `EACCES`; every other system call is allowed.
fn socket_filter() -> Result<seccompiler::BpfProgram, String> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("{e:?}"))?;
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )
    .map_err(|e| e.to_string())?;
    let rule = SeccompRule::new(vec![not_unix]).map_err(|e| e.to_string())?;
    let filter = SeccompFilter::new(
        [(libc::SYS_socket, vec![rule])].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

impl Sandbox {
    /// No sandbox at all (mode `off`): commands run with the engine's rights.
    pub fn off() -> Sandbox {
        Sandbox {
            mode: SandboxMode::Off,
            tmp: None,
            writable: Vec::new(),
            ruleset: None,
            sockets: None,
            recorded: Sandboxed {
                mode: SandboxMode::Off,
                abi: kernel_abi(),
                enforced: Enforcement::None,
                tmp: None,
                writable: Vec::new(),
            },
        }
    }

    /// Sets up the sandbox of a session in `workspace`: creates its temporary folder
    /// (in the system's temporary folder, named after `session`), builds the ruleset
    /// for `mode` and probes what the kernel enforces of it.
    pub fn new(
        mode: SandboxMode,
        workspace: &Path,
        extra_roots: &[PathBuf],
        session: &str,
    ) -> Result<Sandbox, SandboxError> {
        if mode == SandboxMode::Off {
            return Ok(Sandbox::off());
        }
        let parent = std::env::temp_dir();
        let tmp = tempfile::Builder::new()
            .prefix(&format!("cairn-{session}-"))
            .tempdir_in(&parent)
            .map_err(|source| SandboxError::Tmp {
                path: parent.clone(),
                source,
            })?;
        // Canonical, so that a path a command reports can be compared with it.
        let tmp_path = tmp
            .path()
            .canonicalize()
            .unwrap_or(tmp.path().to_path_buf());
        let mut writable = vec![workspace.to_path_buf(), tmp_path.clone()];
        writable.extend(
            extra_roots
                .iter()
                .map(|r| r.canonicalize().unwrap_or(r.clone())),
        );
        let ruleset = build(mode, &writable)?;
        let (enforced, abi) = probe(&ruleset);
        let recorded = Sandboxed {
            mode,
            abi,
            enforced,
            tmp: Some(tmp_path.to_string_lossy().into_owned()),
            writable: writable
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
        };
        // Without the filter strict mode would still cut TCP; a filter that cannot be
        // built (an architecture seccompiler does not know) is said on stderr once.
        let sockets = match mode {
            SandboxMode::Strict => match socket_filter() {
                Ok(p) => Some(std::sync::Arc::new(p)),
                Err(e) => {
                    eprintln!(
                        "cairn: strict sandbox: no seccomp socket filter ({e}); only TCP is cut"
                    );
                    None
                }
            },
            _ => None,
        };
        Ok(Sandbox {
            mode,
            tmp: Some(tmp),
            writable,
            ruleset: (enforced != Enforcement::None).then_some(ruleset),
            sockets,
            recorded,
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

    /// A ruleset for one command's child, `None` when nothing is enforced: a duplicate
    /// of the session's (one `dup`, the rules are shared).
    pub fn for_command(&self) -> Result<Confinement, SandboxError> {
        Ok(Confinement {
            ruleset: self
                .ruleset
                .as_ref()
                .map(|r| r.try_clone().map_err(SandboxError::Dup))
                .transpose()?,
            sockets: self.sockets.clone(),
        })
    }
}

/// The ruleset of `mode` with `writable` folders, created (its descriptor open, every
/// rule added). Best effort: rights the kernel lacks are dropped, and the probe says so.
fn build(mode: SandboxMode, writable: &[PathBuf]) -> Result<RulesetCreated, SandboxError> {
    let all = AccessFs::from_all(FS_ABI);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?;
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
        };
        let writable = ["/ws".to_string(), "/tmp/cairn-x".to_string()];
        assert_eq!(
            refusal_note(&s, &writable, line).as_deref(),
            expected,
            "{line}"
        );
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
