//! The one process runner: every program cairn starts — a shell tool's command, the
//! check command of `problems`, an MCP server — runs as a [`Process`].
//!
//! A process is spawned as the leader of a new process group, so that stopping it stops
//! everything it started, grandchildren included (`npx` and its server, `sh -c` and
//! what it put in the background). [`Process::stop`] sends SIGTERM to the group, waits
//! up to a grace period for the leader, sends SIGKILL to the group and reaps the
//! leader. The leader is only ever reaped after its group was killed: while it is an
//! unreaped zombie its pid (the group id) cannot be reused, so `killpg` never reaches
//! a stranger. For the same reason nothing here calls `try_wait`: exits are observed
//! with `waitid(WNOWAIT)`, which leaves the zombie in place.
//!
//! [`Process::wait`] waits for the leader with a deadline and a [`CancelHandle`].
//! [`capture`] copies an output pipe into a file through one fixed buffer and a
//! [`StreamRedactor`], keeps at most a named number of redacted bytes, counts (and
//! drops) the rest so that the process never blocks on a full pipe, and builds the
//! model's [`Preview`] on the way. [`relay`] copies a background process's two pipes
//! into its log the same way, passing whole lines on while the stream is quiet.
//!
//! Processes found running at resume are not children of this engine; [`alive`],
//! [`start_time`] and [`stop_adopted`] handle them through `/proc`.
//!
//! A process that leaves its group (`setsid`, a double fork) escapes a group kill. A
//! command that runs sessions makes itself their subreaper ([`become_subreaper`]), so
//! such a process comes back to it as a child when its parent dies, and
//! [`reap_orphans`] kills and reaps those at a session's end.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use cairn_core::redact::{Counts, StreamRedactor};

use crate::cancel::CancelHandle;

/// Bytes read from a pipe at a time: the only buffer a stream's output passes through.
pub const PIPE_BUF_BYTES: usize = 64 * 1024;

/// How often a wait looks at the cancel token, and a relay at its stop flag.
const CANCEL_CHECK_MS: u64 = 50;

/// How long a relay holds whole lines of a stream that went quiet before writing them
/// to the log (what is not a whole line yet waits for its end, or for the window).
pub const LOG_FLUSH_MS: u64 = 100;

/// A child process leading its own process group.
#[derive(Debug)]
pub struct Process {
    child: Child,
    pid: libc::pid_t,
    /// Set once the leader was reaped (`None` inside when reaping failed); from then
    /// on the group is never signalled again.
    reaped: Option<Option<ExitStatus>>,
}

/// How a [`Process::wait`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// The leader exited (it is left unreaped until [`Process::stop`]).
    Exited,
    /// The deadline passed first.
    TimedOut,
    /// The cancel token was triggered first.
    Cancelled,
}

impl Process {
    /// Spawns `cmd` as the leader of a new process group, confined as `confinement`
    /// says (see `crate::sandbox`): after `fork`, before `exec`, the child enters the
    /// mount namespace where the cairn home is read-only, restricts itself with the
    /// ruleset (which sets `no_new_privs`), then installs the seccomp filters.
    ///
    /// Between `fork` and `exec` only async-signal-safe work is sound (another thread of
    /// the parent may have held the allocator's lock). Everything was built in the
    /// parent — the home's path and flags, the ruleset (its descriptor duplicated for
    /// this command), the filters' programs —; the child only makes system calls on it
    /// (`unshare`, writes to `/proc/self`, `mount`, `prctl`, `landlock_restrict_self`,
    /// `seccomp`) and closes the ruleset's descriptor. The crate's `restrict_self`
    /// allocates nothing on that path: its status is a plain value, and an error an
    /// `io::Error` built from errno. A failure is answered with its errno or `EPERM`
    /// (no allocation), and `exec` does not happen: a command never runs less confined
    /// than its session's record says.
    pub fn spawn_in(
        cmd: &mut Command,
        confinement: crate::sandbox::Confinement,
    ) -> std::io::Result<Process> {
        let crate::sandbox::Confinement {
            home,
            ruleset,
            sockets,
            io_uring,
        } = confinement;
        if home.is_some() || ruleset.is_some() || sockets.is_some() || io_uring.is_some() {
            let mut ruleset = ruleset;
            // The home's mount first (Landlock then refuses any mount), the filters
            // last: `apply_filter` makes two system calls on a program built in the
            // parent.
            let confine = move || -> std::io::Result<()> {
                if let Some(h) = &home {
                    h.enter().map_err(|(_, errno)| {
                        std::io::Error::from_raw_os_error(if errno == 0 {
                            libc::EPERM
                        } else {
                            errno
                        })
                    })?;
                }
                if let Some(Err(_)) = ruleset.take().map(landlock::RulesetCreated::restrict_self) {
                    return Err(std::io::Error::from_raw_os_error(libc::EPERM));
                }
                for p in [&sockets, &io_uring].into_iter().flatten() {
                    if seccompiler::apply_filter(p).is_err() {
                        return Err(std::io::Error::from_raw_os_error(libc::EPERM));
                    }
                }
                Ok(())
            };
            // SAFETY: `confine` runs in the child between fork and exec and only makes
            // the system calls described above, allocating nothing.
            unsafe {
                cmd.pre_exec(confine);
            }
        }
        Process::spawn(cmd)
    }

    /// Spawns `cmd` as the leader of a new process group (the caller sets its
    /// arguments, folder, environment and standard streams).
    pub fn spawn(cmd: &mut Command) -> std::io::Result<Process> {
        let child = cmd.process_group(0).spawn()?;
        // A pid always fits: the kernel's pid_max is at most 2^22.
        let pid = libc::pid_t::try_from(child.id()).unwrap_or(libc::pid_t::MAX);
        assert!(pid > 1, "spawned a process with pid {pid}");
        Ok(Process {
            child,
            pid,
            reaped: None,
        })
    }

    /// The leader's pid, which is also the group's id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The leader's start time (see [`start_time`]), to record beside its pid.
    pub fn start_time(&self) -> Option<u64> {
        start_time(self.child.id())
    }

    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// True once the leader has exited (or was reaped by [`Process::stop`]).
    pub fn exited(&self) -> bool {
        self.reaped.is_some() || self.peek().is_some()
    }

    /// How the leader ended, without reaping it; `None` while it runs.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        match self.reaped {
            Some(s) => s,
            None => self.peek(),
        }
    }

    fn peek(&self) -> Option<ExitStatus> {
        // SAFETY: an all-zero siginfo_t is a valid value; waitid writes into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child with WNOWAIT leaves it unreaped; `info` is ours.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                self.pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: waitid filled `info` (si_pid stays 0 while the child runs).
        if rc != 0 || unsafe { info.si_pid() } == 0 {
            return None;
        }
        // SAFETY: for a CLD_* code si_status is the exit code or the signal.
        let status = unsafe { info.si_status() };
        // The wait(2) encoding ExitStatus is built from.
        let raw = match info.si_code {
            libc::CLD_EXITED => (status & 0xff) << 8,
            libc::CLD_DUMPED => (status & 0x7f) | 0x80,
            _ => status & 0x7f,
        };
        Some(ExitStatus::from_raw(raw))
    }

    /// Waits until the leader exits (left unreaped) or `deadline` passes; true if it
    /// exited.
    pub fn wait_exit(&self, deadline: Instant) -> bool {
        if self.reaped.is_some() {
            return true;
        }
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, self.pid, 0) };
        if fd < 0 {
            return self.poll_wait(deadline);
        }
        let fd = fd as libc::c_int;
        let exited = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = libc::c_int::try_from(left.as_millis().min(60_000)).unwrap_or(60_000);
            // A sub-millisecond remainder still waits a millisecond rather than spinning.
            let ms = if ms == 0 && !left.is_zero() { 1 } else { ms };
            // SAFETY: one valid pollfd for the duration of the call.
            let rc = unsafe { libc::poll(&mut p, 1, ms) };
            if rc > 0 {
                break true;
            }
            if rc < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break self.poll_wait(deadline);
            }
            if Instant::now() >= deadline {
                break self.peek().is_some();
            }
        };
        // SAFETY: closing the descriptor pidfd_open gave us.
        unsafe {
            libc::close(fd);
        }
        exited
    }

    /// The fallback without pidfd: check, sleep a little longer each time.
    fn poll_wait(&self, deadline: Instant) -> bool {
        let mut nap = Duration::from_micros(50);
        loop {
            if self.peek().is_some() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::sleep(nap.min(deadline - now));
            nap = (nap * 2).min(Duration::from_millis(10));
        }
    }

    /// Waits for the leader to exit until `deadline`, giving up early when `cancel` is
    /// triggered (looked at every [`CANCEL_CHECK_MS`]). Nothing is killed here: the
    /// caller stops the process, with or without a grace period.
    pub fn wait(&self, deadline: Instant, cancel: &CancelHandle) -> Waited {
        loop {
            if cancel.is_cancelled() {
                return Waited::Cancelled;
            }
            let now = Instant::now();
            if now >= deadline {
                // One last look: an exit right at the deadline is an exit.
                return if self.exited() {
                    Waited::Exited
                } else {
                    Waited::TimedOut
                };
            }
            if self.wait_exit(deadline.min(now + Duration::from_millis(CANCEL_CHECK_MS))) {
                return Waited::Exited;
            }
        }
    }

    /// Stops the whole process group and reaps the leader: SIGTERM to the group, up to
    /// `grace_ms` for the leader to exit, then SIGKILL to the group (at once when
    /// `grace_ms` is 0 or the leader had already exited: what it left running in its
    /// group goes with it). Calling it again gives the same status and signals nobody.
    pub fn stop(&mut self, grace_ms: u64) -> std::io::Result<ExitStatus> {
        if let Some(s) = self.reaped {
            return s.ok_or_else(|| std::io::Error::other("the process could not be reaped"));
        }
        if grace_ms > 0 && !self.exited() {
            killpg(self.pid, libc::SIGTERM);
            self.wait_exit(Instant::now() + Duration::from_millis(grace_ms));
        }
        killpg(self.pid, libc::SIGKILL);
        let status = self.child.wait();
        self.reaped = Some(status.as_ref().ok().copied());
        reap_group(self.child.id());
        status
    }

    /// [`Process::stop`] as (exit code, signal); both `None` when it could not be
    /// reaped.
    pub fn stop_code(&mut self, grace_ms: u64) -> (Option<i32>, Option<i32>) {
        match self.stop(grace_ms) {
            Ok(s) => (s.code(), s.signal()),
            Err(_) => (None, None),
        }
    }
}

impl Drop for Process {
    /// A process dropped without `stop` (an error path, a panic) leaves nothing behind.
    fn drop(&mut self) {
        if self.reaped.is_none() {
            let _ = self.stop(0);
        }
    }
}

fn killpg(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: killpg only sends a signal. Callers pass the pid of a child they have not
    // reaped (or, adopted, checked by start time), so the group cannot be a stranger's.
    unsafe {
        libc::killpg(pgid, signal);
    }
}

// ---------------------------------------------------------------------------------------
// Processes found running at resume.

/// The start time of process `pid` (field 22 of `/proc/<pid>/stat`, clock ticks since
/// boot) and whether it is a zombie; `None` when there is no such process.
fn proc_stat(pid: u32) -> Option<(u64, bool)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its end.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((start, *state == "Z" || *state == "X"))
}

/// The start time of a live process, to record beside its pid.
pub fn start_time(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|(t, _)| t)
}

/// True when `pid` runs and started at `start_time`: the same process, not a zombie
/// and not another process that reused the pid.
pub fn alive(pid: u32, start_time: u64) -> bool {
    matches!(proc_stat(pid), Some((t, false)) if t == start_time)
}

/// Stops an adopted process group: SIGTERM, `grace_ms`, SIGKILL, then waits (a few
/// seconds at most) until the leader is gone. Signals go only while the leader is
/// still the same process, so a reused pid is never signalled.
pub fn stop_adopted(pid: u32, start_time: u64, grace_ms: u64) {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return;
    };
    let gone_by = |deadline: Instant| {
        let mut nap = Duration::from_micros(200);
        loop {
            if !alive(pid, start_time) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(20));
        }
    };
    if grace_ms > 0 && alive(pid, start_time) {
        killpg(pgid, libc::SIGTERM);
        if gone_by(Instant::now() + Duration::from_millis(grace_ms)) {
            // The leader is gone; what it left in its group goes too.
            killpg(pgid, libc::SIGKILL);
            return;
        }
    }
    if proc_stat(pid).is_some_and(|(t, _)| t == start_time) {
        killpg(pgid, libc::SIGKILL);
        gone_by(Instant::now() + Duration::from_secs(5));
    }
}

// ---------------------------------------------------------------------------------------
// Orphans: processes that left their command's process group.

/// Makes this process the child subreaper of its descendants
/// (`PR_SET_CHILD_SUBREAPER`): a process that left its command's group (`setsid`, a
/// double fork) and lost its parent is reparented to this process instead of init, so
/// that [`reap_orphans`] finds it at the session's end. For a command that runs a
/// session, at its start.
pub fn become_subreaper() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    Ok(())
}

/// A child of this process as `/proc` shows it.
#[derive(Debug, Clone, Copy)]
struct Kid {
    pid: u32,
    pgid: u32,
}

/// The children of this process (what `/proc/<pid>/stat` says has this process as
/// its parent), in pid order.
fn children() -> Vec<Kid> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut kids: Vec<Kid> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let rest = &text[text.rfind(')')? + 1..];
            let mut fields = rest.split_whitespace().skip(1);
            let ppid: u32 = fields.next()?.parse().ok()?;
            let pgid: u32 = fields.next()?.parse().ok()?;
            (ppid == me).then_some(Kid { pid, pgid })
        })
        .collect();
    kids.sort_by_key(|k| k.pid);
    kids
}

/// A process's command line; `[name]` when it has none (it already exited).
fn argv_of(pid: u32) -> Vec<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if !bytes.is_empty() {
        // Each argument ends with a NUL (a process that rewrote its title may have left
        // the last one out); an empty argument is an argument too.
        let body = bytes.strip_suffix(&[0]).unwrap_or(&bytes);
        return body
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
    }
    let name = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| Some(t[t.find('(')? + 1..t.rfind(')')?].to_string()))
        .unwrap_or_default();
    vec![format!("[{name}]")]
}

/// Signals a child: its whole group when it leads one (a `setsid` made it so), else
/// itself. The child is unreaped, so neither its pid nor its group id can have been
/// reused by a stranger.
fn signal_kid(kid: Kid, signal: rustix::process::Signal) {
    let Some(pid) = i32::try_from(kid.pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    // It may be gone already (a zombie takes no signal): nothing to do then.
    let _ = if kid.pgid == kid.pid {
        rustix::process::kill_process_group(pid, signal)
    } else {
        rustix::process::kill_process(pid, signal)
    };
}

/// Reaps what is left of a process group just killed with SIGKILL: members whose parent
/// died before them come back to this process (the subreaper) as zombies. Reaped here,
/// they are not taken for orphans at the session's end: they did not leave the group,
/// and died with it. Waits until the group is empty, two seconds at most; without the
/// subreaper they go to init, and there is nothing to do.
fn reap_group(pgid: u32) {
    if !matches!(rustix::process::child_subreaper(), Ok(Some(_))) {
        return;
    }
    let Some(group) = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let until = Instant::now() + Duration::from_secs(2);
    let mut nap = Duration::from_micros(100);
    loop {
        for kid in children().into_iter().filter(|k| k.pgid == pgid) {
            // A member still dying is reaped on a later turn.
            reap_kid(kid, Instant::now());
        }
        // Signal 0 only asks whether any process (a zombie too) is still in the group.
        let empty = matches!(
            rustix::process::test_kill_process_group(group),
            Err(rustix::io::Errno::SRCH)
        );
        if empty || Instant::now() >= until {
            return;
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(20));
    }
}

/// True once the child has exited (it is a zombie waiting to be reaped, or gone).
fn kid_exited(kid: Kid) -> bool {
    !matches!(proc_stat(kid.pid), Some((_, false)))
}

/// Reaps a child killed with SIGKILL, waiting until `deadline` at most (a process in
/// an uninterruptible sleep takes its time); its status, `None` if it was not reaped.
fn reap_kid(kid: Kid, deadline: Instant) -> Option<rustix::process::WaitStatus> {
    use rustix::process::{Pid, WaitOptions, waitpid};
    let pid = Pid::from_raw(i32::try_from(kid.pid).ok()?)?;
    let mut nap = Duration::from_micros(100);
    loop {
        match waitpid(Some(pid), WaitOptions::NOHANG) {
            Ok(Some((_, status))) => return Some(status),
            Ok(None) if Instant::now() < deadline => {}
            Ok(None) => return None,
            Err(rustix::io::Errno::INTR) => {}
            // ECHILD: someone else reaped it.
            Err(_) => return None,
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(20));
    }
}

/// Finds, kills and reaps the orphans of a session at its end: every child of this
/// process, which by then has stopped and reaped every process it started itself (the
/// commands, background processes and MCP servers), so any child left is a process
/// that escaped its command's group and was reparented here ([`become_subreaper`]).
/// SIGTERM first (to its whole group when it leads one), up to `grace_ms` for them to
/// exit, then SIGKILL; the members of their groups are reaped with them, and children
/// they had elsewhere come back here in turn and go the same way, within a few seconds
/// in all.
///
/// Does nothing unless this process is a subreaper: without that, orphans went to
/// init, and every child is one that some other part of this process started (a test
/// binary runs many sessions at once) and must not be touched.
pub fn reap_orphans(grace_ms: u64) -> Vec<crate::event::Orphan> {
    if !matches!(rustix::process::child_subreaper(), Ok(Some(_))) {
        return Vec::new();
    }
    let until = Instant::now() + Duration::from_millis(grace_ms) + Duration::from_secs(5);
    let mut found: Vec<crate::event::Orphan> = Vec::new();
    let mut polite = grace_ms > 0;
    loop {
        let kids = children();
        if kids.is_empty() || Instant::now() >= until {
            break;
        }
        for k in &kids {
            if !found.iter().any(|o| o.pid == k.pid) {
                found.push(crate::event::Orphan {
                    pid: k.pid,
                    argv: argv_of(k.pid),
                    exit_code: None,
                    signal: None,
                });
            }
        }
        if polite {
            polite = false;
            for k in &kids {
                signal_kid(*k, rustix::process::Signal::TERM);
            }
            let grace_until = Instant::now() + Duration::from_millis(grace_ms);
            let mut nap = Duration::from_micros(200);
            while !kids.iter().all(|k| kid_exited(*k)) && Instant::now() < grace_until {
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(20));
            }
        }
        for k in &kids {
            signal_kid(*k, rustix::process::Signal::KILL);
        }
        for k in &kids {
            let status = reap_kid(*k, until);
            if let (Some(status), Some(o)) = (status, found.iter_mut().find(|o| o.pid == k.pid)) {
                o.exit_code = status.exit_status();
                o.signal = status.terminating_signal();
            }
            if k.pgid == k.pid {
                // The members of its group died with it: not orphans of their own.
                reap_group(k.pid);
            }
        }
    }
    found
}

// ---------------------------------------------------------------------------------------
// Output capture.

/// One output stream as captured.
#[derive(Debug)]
pub struct Captured {
    /// The stream, or past the capture limit its head and its tail (see `cut`).
    pub file: tempfile::NamedTempFile,
    /// Bytes the stream carried.
    pub bytes: u64,
    /// Bytes kept in `file`: `bytes`, or the capture limit when the stream was longer.
    pub kept: u64,
    /// Past the capture limit: `file` is the first `at` bytes, then the last
    /// `kept - at`; the `dropped_bytes` between them are gone.
    pub cut: Option<cairn_core::event::OutputCut>,
    /// What the model is shown of the whole stream.
    pub preview: String,
    /// The secrets redacted from the stream, by kind.
    pub redactions: Counts,
}

/// Where each byte of a stream goes in its capture file when at most `bytes_max` are
/// kept: byte `s` of the stream below `head` at `s`; from `head` on, at
/// `head + (s - head) % tail`, so that the file's second half always holds the last
/// `tail` bytes, turned; [`HeadTail::finish`] puts them in order.
struct HeadTail {
    head: u64,
    tail: u64,
}

impl HeadTail {
    fn new(bytes_max: u64) -> HeadTail {
        let head = bytes_max - bytes_max / 2;
        HeadTail {
            head,
            tail: bytes_max - head,
        }
    }

    /// Writes `bytes`, the stream's bytes from offset `from`.
    fn write(&self, file: &std::fs::File, from: u64, mut bytes: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut s = from;
        // Only the last `tail` bytes of what comes after the head can stay.
        if s >= self.head && bytes.len() as u64 > self.tail {
            let skip = bytes.len() - self.tail as usize;
            bytes = &bytes[skip..];
            s += skip as u64;
        }
        while !bytes.is_empty() {
            let (at, room) = if s < self.head {
                (s, self.head - s)
            } else if self.tail == 0 {
                return Ok(());
            } else {
                let turned = (s - self.head) % self.tail;
                (self.head + turned, self.tail - turned)
            };
            let n = usize::try_from(room).map_or(bytes.len(), |r| r.min(bytes.len()));
            file.write_all_at(&bytes[..n], at)?;
            bytes = &bytes[n..];
            s += n as u64;
        }
        Ok(())
    }

    /// The capture file of a stream of `total` bytes in stream order, and the cut when
    /// bytes were dropped: a new file of the head, then the tail from its oldest byte.
    fn finish(
        &self,
        file: tempfile::NamedTempFile,
        total: u64,
    ) -> std::io::Result<(
        tempfile::NamedTempFile,
        Option<cairn_core::event::OutputCut>,
    )> {
        use std::io::{Seek, SeekFrom};
        let bytes_max = self.head + self.tail;
        if total <= bytes_max {
            return Ok((file, None));
        }
        let dir = file.path().parent().unwrap_or(std::path::Path::new("."));
        let mut out = tempfile::NamedTempFile::new_in(dir)?;
        let oldest = self.head + (total - self.tail - self.head) % self.tail.max(1);
        let mut src = file.reopen()?;
        for (from, to) in [(0, self.head), (oldest, bytes_max), (self.head, oldest)] {
            src.seek(SeekFrom::Start(from))?;
            let n = std::io::copy(&mut (&mut src).take(to - from), &mut out)?;
            assert_eq!(n, to - from, "the capture file holds every byte kept");
        }
        out.flush()?;
        Ok((
            out,
            Some(cairn_core::event::OutputCut {
                at: self.head,
                dropped_bytes: total - bytes_max,
            }),
        ))
    }
}

/// A stream being captured on its own thread.
#[derive(Debug)]
pub struct Capture {
    rx: Receiver<std::io::Result<Captured>>,
}

impl Capture {
    /// The captured stream once its pipe closed; `None` when it is still open at
    /// `deadline` (a process that left the group kept it).
    pub fn finish(self, deadline: Instant) -> Option<std::io::Result<Captured>> {
        self.rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .ok()
    }
}

/// Copies `pipe` into `file` through one fixed buffer and `redactor` on a new thread,
/// keeping `bytes_max` bytes of the redacted stream at most: all of it up to the limit;
/// past it its first half and its last half (the head written once, the tail turning
/// in the file's second half as a ring, put in order at the end: memory stays one
/// buffer whatever the stream's length), the bytes between counted and dropped. Every
/// redacted byte goes to `preview` (and to `live`, when given, as it is read).
pub fn capture(
    mut pipe: impl Read + Send + 'static,
    mut file: tempfile::NamedTempFile,
    bytes_max: u64,
    mut preview: Preview,
    mut redactor: StreamRedactor,
    live: Option<crate::shell::OutputSink>,
) -> Capture {
    let (tx, rx) = std::sync::mpsc::channel();
    // What is shown live goes through a redactor of its own that passes on each whole
    // line at once (as a background log's relay does); what is kept is not changed by
    // a view watching.
    let mut live = live.map(|sink| (sink, redactor.clone()));
    std::thread::spawn(move || {
        let result = (|| {
            let mut buf = vec![0u8; PIPE_BUF_BYTES];
            let mut total = 0u64;
            let ring = HeadTail::new(bytes_max);
            let mut keep = |bytes: &[u8], file: &mut tempfile::NamedTempFile| {
                preview.feed(bytes);
                ring.write(file.as_file(), total, bytes)?;
                total += bytes.len() as u64;
                Ok::<(), std::io::Error>(())
            };
            loop {
                let n = match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                if let Some((sink, shown)) = &mut live {
                    let mut out = shown.feed(&buf[..n]);
                    out.extend(shown.flush_lines());
                    if !out.is_empty() {
                        sink(&out);
                    }
                }
                keep(&redactor.feed(&buf[..n]), &mut file)?;
            }
            if let Some((sink, shown)) = live {
                let (rest, _) = shown.finish();
                if !rest.is_empty() {
                    sink(&rest);
                }
            }
            let (rest, redactions) = redactor.finish();
            keep(&rest, &mut file)?;
            file.flush()?;
            let kept = total.min(bytes_max);
            let (file, cut) = ring.finish(file, total)?;
            debug_assert_eq!(file.as_file().metadata().map(|m| m.len()).ok(), Some(kept));
            Ok(Captured {
                file,
                bytes: total,
                kept,
                cut,
                preview: preview.finish(),
                redactions,
            })
        })();
        // The receiver gave up waiting (a pipe held open too long): nobody to tell.
        let _ = tx.send(result);
    });
    Capture { rx }
}

/// A background process's output being relayed into its log on its own thread.
#[derive(Debug)]
pub struct Relay {
    rx: Receiver<std::io::Result<Counts>>,
    stop: Arc<AtomicBool>,
}

/// How a relay ended.
#[derive(Debug)]
pub enum Relayed {
    /// Both pipes closed and everything was written: the secrets redacted, by kind.
    Done(Counts),
    /// The pipes were still open at the deadline (a process that left the group kept
    /// them): what was held was written, what comes later is not.
    Stopped,
    /// The log could not be read from the pipes or written.
    Failed(std::io::Error),
}

impl Relay {
    /// Waits until both pipes closed and the log has everything, up to `deadline`;
    /// then tells the thread to write what it holds and stop, and waits for that a
    /// little longer (it looks at the flag every [`CANCEL_CHECK_MS`]).
    pub fn finish(self, deadline: Instant) -> Relayed {
        let wait = |until: Instant| {
            self.rx
                .recv_timeout(until.saturating_duration_since(Instant::now()))
        };
        let got = match wait(deadline) {
            Ok(r) => Ok(r),
            Err(_) => {
                self.stop.store(true, Ordering::Relaxed);
                wait(Instant::now() + Duration::from_millis(10 * CANCEL_CHECK_MS)).map_err(|_| ())
            }
        };
        match got {
            Ok(Ok(counts)) if !self.stop.load(Ordering::Relaxed) => Relayed::Done(counts),
            Ok(Err(e)) => Relayed::Failed(e),
            _ => Relayed::Stopped,
        }
    }

    /// Tells the thread to write what it holds and stop, without waiting.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies `stdout` and `stderr` into `log` on a new thread, each through its own
/// [`StreamRedactor`] (the two are interleaved chunk by chunk; a secret inside either
/// is caught wherever its chunks fall). Whole lines held for [`LOG_FLUSH_MS`] are
/// written, so that the log follows a quiet process; nothing unredacted is ever
/// written.
pub fn relay<O, E>(
    stdout: O,
    stderr: E,
    mut log: std::fs::File,
    redactor: &cairn_core::redact::Redactor,
) -> Relay
where
    O: Read + AsFd + Send + 'static,
    E: Read + AsFd + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let streams = [StreamRedactor::new(redactor), StreamRedactor::new(redactor)];
    std::thread::spawn(move || {
        let result = relay_loop((stdout, stderr), streams, &mut log, &stopped);
        // The receiver gave up waiting: nobody to tell.
        let _ = tx.send(result);
    });
    Relay { rx, stop }
}

fn relay_loop<O: Read + AsFd, E: Read + AsFd>(
    (mut stdout, mut stderr): (O, E),
    streams: [StreamRedactor; 2],
    log: &mut std::fs::File,
    stop: &AtomicBool,
) -> std::io::Result<Counts> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut streams = streams.map(Some);
    let mut buf = vec![0u8; PIPE_BUF_BYTES];
    // When the whole lines held are written: set while bytes are held back.
    let mut flush_at: Option<Instant> = None;
    let mut counts = Counts::new();
    let mut end = |s: StreamRedactor, log: &mut std::fs::File| {
        let (rest, c) = s.finish();
        for (kind, n) in c {
            *counts.entry(kind).or_default() += n;
        }
        log.write_all(&rest)
    };
    while streams.iter().any(Option::is_some) && !stop.load(Ordering::Relaxed) {
        let tick = flush_at.map_or(Duration::from_millis(CANCEL_CHECK_MS), |t| {
            t.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(CANCEL_CHECK_MS))
        });
        let timeout = Timespec {
            tv_sec: 0,
            tv_nsec: i64::try_from(tick.as_nanos()).unwrap_or(0),
        };
        let mut ready = [false; 2];
        {
            let open = [streams[0].is_some(), streams[1].is_some()];
            let mut fds = Vec::with_capacity(2);
            if open[0] {
                fds.push(PollFd::new(&stdout, PollFlags::IN));
            }
            if open[1] {
                fds.push(PollFd::new(&stderr, PollFlags::IN));
            }
            match poll(&mut fds, Some(&timeout)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            // Readable, closed or failed: the read says which.
            let mut polled = fds.iter().map(|f| !f.revents().is_empty());
            for (i, is_open) in open.into_iter().enumerate() {
                if is_open {
                    ready[i] = polled.next().unwrap_or(false);
                }
            }
        }
        for i in [0, 1] {
            if !ready[i] {
                continue;
            }
            let read = if i == 0 {
                stdout.read(&mut buf)
            } else {
                stderr.read(&mut buf)
            };
            let n = match read {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                if let Some(s) = streams[i].take() {
                    end(s, log)?;
                }
            } else if let Some(s) = streams[i].as_mut() {
                log.write_all(&s.feed(&buf[..n]))?;
                if flush_at.is_none() && s.pending_bytes() > 0 {
                    flush_at = Some(Instant::now() + Duration::from_millis(LOG_FLUSH_MS));
                }
            }
        }
        if flush_at.is_some_and(|t| Instant::now() >= t) {
            flush_at = None;
            for s in streams.iter_mut().flatten() {
                log.write_all(&s.flush_lines())?;
                if s.pending_bytes() > 0 {
                    flush_at = Some(Instant::now() + Duration::from_millis(LOG_FLUSH_MS));
                }
            }
        }
    }
    // Stopped, or both pipes closed: what is held goes out, redacted.
    for s in streams.iter_mut() {
        if let Some(s) = s.take() {
            end(s, log)?;
        }
    }
    log.flush()?;
    Ok(counts)
}

/// The part of a stream the model sees, built as the bytes go by in bounded memory:
/// at most `lines_max` lines of at most `chars_max` characters and `bytes_max` bytes
/// of output in all (whole lines; the markers saying what was cut come on top). With
/// a tail ([`Preview::with_tail`]), the last lines of a longer stream are kept too,
/// and the cut between head and tail says what it left out and how to read it.
pub struct Preview {
    bytes_max: usize,
    lines_max: usize,
    chars_max: usize,
    /// Lines (of `lines_max`) and bytes (of `bytes_max`) kept from the end; 0: none.
    tail_lines_max: usize,
    tail_bytes_max: usize,
    /// The last lines after the head: (shown text, its bytes, the stream's bytes).
    tail: std::collections::VecDeque<(String, usize, u64)>,
    tail_bytes: usize,
    /// The stream's bytes in all, and those of the lines the head shows.
    total_bytes: u64,
    head_bytes: u64,
    shown: String,
    /// Bytes of `shown` that are output, not markers.
    shown_bytes: usize,
    shown_lines: usize,
    total_lines: u64,
    /// The start of the current line (at most `4 * chars_max + 4` bytes).
    line: Vec<u8>,
    line_bytes: u64,
    /// No more lines fit.
    full: bool,
}

impl Preview {
    pub fn new(bytes_max: usize, lines_max: usize, chars_max: usize) -> Preview {
        Preview {
            bytes_max,
            lines_max,
            chars_max,
            shown: String::new(),
            shown_bytes: 0,
            shown_lines: 0,
            total_lines: 0,
            line: Vec::new(),
            line_bytes: 0,
            full: false,
            tail_lines_max: 0,
            tail_bytes_max: 0,
            tail: std::collections::VecDeque::new(),
            tail_bytes: 0,
            total_bytes: 0,
            head_bytes: 0,
        }
    }

    /// Keeps the last `tail_lines_max` lines of `lines_max` (and their share of
    /// `bytes_max`) from the end of a longer stream.
    pub fn with_tail(mut self, tail_lines_max: usize) -> Preview {
        let tail = tail_lines_max.min(self.lines_max / 2);
        self.tail_lines_max = tail;
        self.tail_bytes_max = self
            .bytes_max
            .saturating_mul(tail)
            .checked_div(self.lines_max)
            .unwrap_or(0);
        self
    }

    fn line_cap(&self) -> usize {
        self.chars_max.saturating_mul(4).saturating_add(4)
    }

    /// Takes the next bytes of the stream.
    pub fn feed(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            if self.full && self.tail_lines_max == 0 {
                // Only count what is left.
                let newlines = memchr::memchr_iter(b'\n', chunk).count() as u64;
                self.total_lines += newlines;
                match memchr::memrchr(b'\n', chunk) {
                    Some(i) => self.line_bytes = (chunk.len() - i - 1) as u64,
                    None => self.line_bytes += chunk.len() as u64,
                }
                return;
            }
            let (part, rest, ends) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (&chunk[..i], &chunk[i + 1..], true),
                None => (chunk, &chunk[chunk.len()..], false),
            };
            let room = self.line_cap().saturating_sub(self.line.len());
            self.line.extend_from_slice(&part[..part.len().min(room)]);
            self.line_bytes += part.len() as u64;
            if ends {
                self.end_line();
            }
            chunk = rest;
        }
    }

    fn end_line(&mut self) {
        self.total_lines += 1;
        let line = std::mem::take(&mut self.line);
        let line_bytes = std::mem::replace(&mut self.line_bytes, 0);
        self.total_bytes += line_bytes + 1;
        if self.full && self.tail_lines_max == 0 {
            return;
        }
        if !self.full && self.shown_lines >= self.lines_max - self.tail_lines_max {
            self.full = true;
            if self.tail_lines_max == 0 {
                return;
            }
        }
        let (text, content) = self.shown_line(&line, line_bytes);
        if !self.full {
            if self.shown_bytes + content > self.bytes_max - self.tail_bytes_max {
                self.full = true;
            } else {
                self.shown_bytes += content;
                self.shown.push_str(&text);
                self.shown_lines += 1;
                self.head_bytes += line_bytes + 1;
                return;
            }
        }
        if self.tail_lines_max == 0 {
            return;
        }
        self.tail.push_back((text, content, line_bytes + 1));
        self.tail_bytes += content;
        while self.tail.len() > self.tail_lines_max || self.tail_bytes > self.tail_bytes_max {
            match self.tail.pop_front() {
                Some((_, content, _)) => self.tail_bytes -= content,
                None => break,
            }
        }
    }

    /// A line as shown (cut to `chars_max` characters, the bytes left out counted, its
    /// newline), and the bytes it counts for against the caps.
    fn shown_line(&self, line: &[u8], line_bytes: u64) -> (String, usize) {
        let mut text = String::new();
        let mut chars = 0usize;
        let mut used = 0usize;
        'outer: for chunk in line.utf8_chunks() {
            for c in chunk.valid().chars() {
                if chars == self.chars_max {
                    break 'outer;
                }
                text.push(c);
                chars += 1;
                used += c.len_utf8();
            }
            if !chunk.invalid().is_empty() {
                if chars == self.chars_max {
                    break;
                }
                text.push(char::REPLACEMENT_CHARACTER);
                chars += 1;
                used += chunk.invalid().len();
            }
        }
        let content = text.len() + 1;
        let cut = line_bytes.saturating_sub(used as u64);
        if cut > 0 {
            text.push_str(&format!("…(+{cut} bytes)"));
        }
        text.push('\n');
        (text, content)
    }

    /// The preview: with `…(N more lines)` when lines were left out, or with a tail,
    /// the head, what was left out between (lines, bytes, how to read them), the tail.
    pub fn finish(mut self) -> String {
        if self.line_bytes > 0 || !self.line.is_empty() {
            self.end_line();
        }
        let tail_lines = self.tail.len() as u64;
        let more = self.total_lines - self.shown_lines as u64 - tail_lines;
        if self.tail_lines_max == 0 {
            if more > 0 {
                self.shown.push_str(&format!("…({more} more lines)\n"));
            }
            return self.shown;
        }
        if more > 0 {
            let tail_bytes: u64 = self.tail.iter().map(|(_, _, b)| b).sum();
            let bytes = self.total_bytes - self.head_bytes - tail_bytes;
            let (from, to) = (self.shown_lines as u64 + 1, self.total_lines - tail_lines);
            self.shown.push_str(&format!(
                "…({more} lines and {bytes} bytes left out here: lines {from}-{to} of {}; to read them, run the command again with its output sent to a file and read that file, or through sed -n '{from},{to}p')\n",
                self.total_lines
            ));
        }
        for (text, _, _) in self.tail {
            self.shown.push_str(&text);
        }
        self.shown
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use cairn_core::redact::Redactor;
    use std::process::Stdio;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]).stdin(Stdio::null());
        cmd
    }

    /// The processes of group `pgid` that have not been reaped, with their state.
    fn members(pgid: u32) -> Vec<(u32, String)> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let fields: Vec<&str> = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            if fields.get(2) == Some(&pgid.to_string().as_str()) {
                out.push((pid, fields[0].to_string()));
            }
        }
        out
    }

    /// True once `kill(-pgid, 0)` fails with ESRCH: no process of the group is left,
    /// not even a zombie. Orphans are reaped by init, which may take a second or so.
    fn group_gone(pgid: u32) -> bool {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            // SAFETY: signal 0 only checks that the group exists.
            let rc = unsafe { libc::kill(-(pgid as libc::pid_t), 0) };
            if rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
                return true;
            }
            if Instant::now() > until {
                eprintln!("group {pgid} still has {:?}", members(pgid));
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// No member of the group still runs (zombies waiting for init are dead).
    fn no_live_member(pgid: u32) -> bool {
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            let live: Vec<_> = members(pgid)
                .into_iter()
                .filter(|(_, s)| s != "Z" && s != "X")
                .collect();
            if live.is_empty() {
                return true;
            }
            if Instant::now() > until {
                eprintln!("group {pgid} still runs {live:?}");
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until the group has `n` members, so that a test kills a grandchild that
    /// really was forked.
    fn wait_members(pgid: u32, n: usize) {
        let until = Instant::now() + Duration::from_secs(5);
        while members(pgid).len() < n {
            assert!(Instant::now() < until, "group {pgid}: {:?}", members(pgid));
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_timeout_then_stop_leaves_no_process_of_the_group() {
        let p = Process::spawn(&mut sh("sleep 30 & sleep 30")).unwrap();
        let pgid = p.id();
        wait_members(pgid, 2);
        let mut p = p;
        let waited = p.wait(
            Instant::now() + Duration::from_millis(100),
            &CancelHandle::default(),
        );
        assert_eq!(waited, Waited::TimedOut);
        let t0 = Instant::now();
        let status = p.stop(500).unwrap();
        let took = t0.elapsed();
        eprintln!("stop of a group that obeys SIGTERM: {took:?}");
        // sh dies of SIGTERM within the grace: had the grace run out, SIGKILL would
        // have ended it (no timed assertion: this machine is shared and noisy).
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert!(no_live_member(pgid));
        assert!(group_gone(pgid));
        // Stopping again signals nobody and gives the same status.
        assert_eq!(p.stop(500).unwrap(), status);
    }

    #[test]
    fn a_cancel_ends_the_wait_and_stop_kills_grandchildren_that_ignore_sigterm() {
        let p = Process::spawn(&mut sh("trap '' TERM; sleep 30 & sleep 30")).unwrap();
        let pgid = p.id();
        wait_members(pgid, 2);
        let mut p = p;
        let cancel = CancelHandle::default();
        let trigger = {
            let cancel = cancel.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                cancel.cancel();
            })
        };
        let t0 = Instant::now();
        let waited = p.wait(Instant::now() + Duration::from_secs(60), &cancel);
        let seen = t0.elapsed();
        trigger.join().unwrap();
        assert_eq!(waited, Waited::Cancelled);
        // Ended by the cancel, not by the 60 s deadline.
        assert!(seen < Duration::from_secs(30), "{seen:?}");
        let t0 = Instant::now();
        let status = p.stop(200).unwrap();
        let took = t0.elapsed();
        eprintln!("stop of a group that ignores SIGTERM, grace 200 ms: {took:?}");
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_secs(30),
            "{took:?}"
        );
        assert!(no_live_member(pgid));
        assert!(group_gone(pgid));
    }

    #[test]
    fn a_leader_that_exits_takes_its_group_with_it_and_its_status_is_seen_unreaped() {
        let p = Process::spawn(&mut sh("sleep 30 & exit 3")).unwrap();
        let pgid = p.id();
        let mut p = p;
        assert_eq!(
            p.wait(
                Instant::now() + Duration::from_secs(10),
                &CancelHandle::default()
            ),
            Waited::Exited
        );
        // Seen without reaping: the leader is still a zombie holding the group id.
        assert_eq!(p.exit_status().and_then(|s| s.code()), Some(3));
        assert!(
            members(pgid)
                .iter()
                .any(|(pid, s)| *pid == pgid && s == "Z")
        );
        assert_eq!(p.stop(500).unwrap().code(), Some(3));
        assert!(group_gone(pgid));

        let mut p = Process::spawn(&mut sh("kill -9 $$")).unwrap();
        assert!(p.wait_exit(Instant::now() + Duration::from_secs(10)));
        assert_eq!(p.exit_status().and_then(|s| s.signal()), Some(9));
        assert_eq!(p.stop_code(0), (None, Some(9)));
    }

    #[test]
    fn a_dropped_process_leaves_no_process_of_its_group() {
        let p = Process::spawn(&mut sh("sleep 30 & sleep 30")).unwrap();
        let pgid = p.id();
        wait_members(pgid, 2);
        drop(p);
        assert!(group_gone(pgid));
    }

    fn captured(script: &str, bytes_max: u64) -> (u64, u64, Vec<u8>, String) {
        captured_with(sh(script), bytes_max).0
    }

    /// (bytes, kept, the file, the preview) and the redactions of `cmd`'s stdout.
    #[allow(clippy::type_complexity)]
    fn captured_with(mut cmd: Command, bytes_max: u64) -> ((u64, u64, Vec<u8>, String), Counts) {
        cmd.stdout(Stdio::piped());
        let mut p = Process::spawn(&mut cmd).unwrap();
        let file = tempfile::NamedTempFile::new().unwrap();
        let c = capture(
            p.take_stdout().unwrap(),
            file,
            bytes_max,
            Preview::new(100, 10, 100),
            StreamRedactor::new(&Redactor::default()),
            None,
        );
        assert!(p.wait_exit(Instant::now() + Duration::from_secs(10)));
        assert_eq!(p.stop_code(0), (Some(0), None));
        let got = c
            .finish(Instant::now() + Duration::from_secs(10))
            .unwrap()
            .unwrap();
        let kept = std::fs::read(got.file.path()).unwrap();
        assert_eq!(kept.len() as u64, got.kept);
        ((got.bytes, got.kept, kept, got.preview), got.redactions)
    }

    /// A token made at run time (the source holds no secret-shaped string): the
    /// GitHub token pattern with 36 characters.
    fn token() -> String {
        format!("{}_{}", ["gh", "p"].concat(), "Ab3".repeat(12))
    }

    #[test]
    fn capture_redacts_a_secret_split_across_writes_and_counts_the_redacted_stream() {
        let t = token();
        let (head, tail) = t.split_at(10);
        // Two writes with a pause between them: two reads of the pipe.
        let mut cmd = sh(r#"printf '%s' "$HEAD"; sleep 0.2; printf '%s\nok\n' "$TAIL""#);
        cmd.env("HEAD", head).env("TAIL", tail);
        let redacted = b"[REDACTED:github_token]\nok\n";
        let n = redacted.len() as u64;
        let ((bytes, kept, data, preview), counts) = captured_with(cmd, n);
        assert_eq!((bytes, kept, data.as_slice()), (n, n, &redacted[..]));
        assert_eq!(preview, "[REDACTED:github_token]\nok\n");
        assert_eq!(counts, Counts::from([("github_token".into(), 1)]));
        // One byte under the redacted length: the redacted stream's middle byte
        // dropped (head 13, tail 13), and said so by the counts.
        let mut cmd = sh(r#"printf '%s\nok\n' "$T""#);
        cmd.env("T", &t);
        let ((bytes, kept, data, _), _) = captured_with(cmd, n - 1);
        let cut = [&redacted[..13], &redacted[14..]].concat();
        assert_eq!((bytes, kept, data), (n, n - 1, cut));
    }

    /// Spawns `script` with both streams piped and relays them into a new log.
    fn relayed(script: &str, envs: &[(&str, &str)]) -> (Process, Relay, tempfile::NamedTempFile) {
        let mut cmd = sh(script);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut p = Process::spawn(&mut cmd).unwrap();
        let log = tempfile::NamedTempFile::new().unwrap();
        let file = std::fs::File::options()
            .append(true)
            .open(log.path())
            .unwrap();
        let r = relay(
            p.take_stdout().unwrap(),
            p.take_stderr().unwrap(),
            file,
            &Redactor::default(),
        );
        (p, r, log)
    }

    fn read(log: &tempfile::NamedTempFile) -> String {
        String::from_utf8(std::fs::read(log.path()).unwrap()).unwrap()
    }

    #[test]
    fn relay_writes_both_streams_redacted_and_follows_a_quiet_process() {
        let t = token();
        let (head, tail) = t.split_at(20);
        let (mut p, r, log) = relayed(
            r#"echo started; printf '%s' "$HEAD" >&2; sleep 0.3; printf '%s\n' "$TAIL" >&2; sleep 30"#,
            &[("HEAD", head), ("TAIL", tail)],
        );
        // Whole lines of a quiet stream reach the log while the process runs.
        let until = Instant::now() + Duration::from_secs(10);
        while !read(&log).contains("[REDACTED:github_token]\n") {
            assert!(Instant::now() < until, "the log holds {:?}", read(&log));
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(p.stop_code(0), (None, Some(libc::SIGKILL)));
        let Relayed::Done(counts) = r.finish(Instant::now() + Duration::from_secs(10)) else {
            panic!("the relay did not end with its pipes")
        };
        assert_eq!(counts, Counts::from([("github_token".into(), 1)]));
        assert_eq!(read(&log), "started\n[REDACTED:github_token]\n");
    }

    #[test]
    fn relay_is_stopped_at_the_deadline_when_a_process_outside_the_group_holds_its_pipes() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let (mut p, r, log) = relayed(
            r#"echo before; setsid sleep 30 & echo $! > "$PIDFILE"; wait"#,
            &[("PIDFILE", pidfile.to_str().unwrap())],
        );
        let until = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n')) {
            assert!(Instant::now() < until);
            std::thread::sleep(Duration::from_millis(20));
        }
        let escaped: libc::pid_t = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // `$!` is written before the child has left the group: stopping the group
        // before its `setsid` would take it along (the pipes then close).
        // SAFETY: getpgid only reads the group of the child this test started.
        while unsafe { libc::getpgid(escaped) } != escaped {
            assert!(Instant::now() < until, "the child never left the group");
            std::thread::sleep(Duration::from_millis(5));
        }
        p.stop(0).unwrap();
        let t0 = Instant::now();
        let got = r.finish(Instant::now() + Duration::from_millis(200));
        let took = t0.elapsed();
        // SAFETY: kill only sends a signal to the process this test put outside the group.
        unsafe {
            libc::kill(escaped, libc::SIGKILL);
        }
        assert!(matches!(got, Relayed::Stopped), "{got:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        assert_eq!(read(&log), "before\n");
    }

    #[test]
    fn capture_keeps_exactly_the_limit_as_head_and_tail_and_counts_the_rest() {
        // At the limit, then one past it: the first 4 and the last 4 bytes.
        assert_eq!(
            captured("printf 'abc\\ndefg'", 8),
            (8, 8, b"abc\ndefg".to_vec(), "abc\ndefg\n".into())
        );
        assert_eq!(
            captured("printf 'abc\\ndefgh'", 8),
            (9, 8, b"abc\nefgh".to_vec(), "abc\ndefgh\n".into())
        );
        assert_eq!(captured("true", 8), (0, 0, Vec::new(), String::new()));
        assert_eq!(captured("printf x", 0), (1, 0, Vec::new(), "x\n".into()));
        assert_eq!(
            captured("printf xyz", 1),
            (3, 1, b"x".to_vec(), "xyz\n".into())
        );
        // Far past it the pipe is still drained, so the writer never blocks; the
        // preview counts every line.
        let (bytes, kept, data, preview) = captured(
            "i=0; while [ $i -lt 20000 ]; do echo 0123456789; i=$((i+1)); done",
            1000,
        );
        assert_eq!((bytes, kept), (220_000, 1000));
        // 220,000 = 20,000 lines of 11: the tail (500 bytes) starts 6 bytes into a line.
        let lines = b"0123456789\n".repeat(100);
        assert_eq!(data[..500], lines[..500]);
        assert_eq!(data[500..], lines[lines.len() - 500..]);
        assert!(preview.ends_with("…(19991 more lines)\n"), "{preview}");
    }

    fn preview(input: &[u8], bytes: usize, lines: usize, chars: usize, step: usize) -> String {
        let mut p = Preview::new(bytes, lines, chars);
        for c in input.chunks(step.max(1)) {
            p.feed(c);
        }
        p.finish()
    }

    fn preview_tail(input: &[u8], bytes: usize, lines: usize, tail: usize, step: usize) -> String {
        let mut p = Preview::new(bytes, lines, 100).with_tail(tail);
        for c in input.chunks(step.max(1)) {
            p.feed(c);
        }
        p.finish()
    }

    /// Issue 43: the end of a long stream (failures and summaries) is shown with its
    /// head, the cut between named, at and past the line cap, in any chunking; a line
    /// without its newline at the end is part of the tail.
    #[test]
    fn a_preview_with_a_tail_shows_the_head_the_cut_and_the_tail() {
        let n = |k: usize| -> String { (1..=k).map(|i| format!("l{i}\n")).collect() };
        for step in [1, 2, 5, 1000] {
            assert_eq!(preview_tail(n(6).as_bytes(), 1000, 6, 2, step), n(6));
            assert_eq!(
                preview_tail(n(10).as_bytes(), 1000, 6, 2, step),
                "l1\nl2\nl3\nl4\n…(4 lines and 12 bytes left out here: lines 5-8 of 10; to read them, run the command again with its output sent to a file and read that file, or through sed -n '5,8p')\nl9\nl10\n"
            );
            assert_eq!(
                preview_tail(b"a\nb\nc\nd\ne\nerror: no", 1000, 4, 2, step),
                "a\nb\n…(2 lines and 4 bytes left out here: lines 3-4 of 6; to read them, run the command again with its output sent to a file and read that file, or through sed -n '3,4p')\ne\nerror: no\n"
            );
        }
        // The tail is at most half the lines.
        assert_eq!(
            preview_tail(n(5).as_bytes(), 1000, 2, 9, 1000),
            "l1\n…(3 lines and 9 bytes left out here: lines 2-4 of 5; to read them, run the command again with its output sent to a file and read that file, or through sed -n '2,4p')\nl5\n"
        );
    }

    #[test]
    fn preview_caps_lines_chars_and_bytes_in_any_chunking() {
        for step in [1, 2, 3, 7, 1000] {
            assert_eq!(preview(b"a\nb\n", 100, 10, 10, step), "a\nb\n");
            assert_eq!(preview(b"a\nb", 100, 10, 10, step), "a\nb\n");
            assert_eq!(
                preview(b"a\nb\nc\n", 100, 2, 10, step),
                "a\nb\n…(1 more lines)\n"
            );
            assert_eq!(preview(b"abcdef\n", 100, 2, 3, step), "abc…(+3 bytes)\n");
            assert_eq!(
                preview("éééé\n".as_bytes(), 100, 2, 2, step),
                "éé…(+4 bytes)\n"
            );
            assert_eq!(
                preview(b"a\xff\xfeb\n", 100, 2, 10, step),
                "a\u{fffd}\u{fffd}b\n"
            );
            // At the byte cap, then one past it.
            assert_eq!(preview(b"ab\ncd\n", 6, 10, 10, step), "ab\ncd\n");
            assert_eq!(
                preview(b"ab\ncd\n", 5, 10, 10, step),
                "ab\n…(1 more lines)\n"
            );
        }
    }
}
