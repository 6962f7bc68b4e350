//! Running programs for the shell tools (`run_shell`, `shell`): one implementation for
//! both catalogs.
//!
//! Every child runs in its own process group with standard input closed, so that a
//! timeout, a cancel or the end of the session can kill it whole, grandchildren
//! included. A child is only ever reaped after its group was killed: while the leader
//! is an unreaped zombie its pid cannot be reused, so `killpg` never reaches a stranger.
//!
//! Output is read on two threads through a fixed buffer into temporary files in the
//! project folder, then stored as blobs by streaming; only a capped preview (bytes,
//! lines, characters a line: each a named limit) is kept in memory for the model. A
//! background process writes to a log file in the session folder instead.
//!
//! After a foreground command, and when a background process ends, the workspace is
//! scanned against the session's manifest and every file the command created,
//! changed or deleted is recorded as a `file_write` with operation `external`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use cairn_store::BlobRef;

use crate::error::{Result, io_at};
use crate::event::{
    Event, ExecStatus, FileWrite, Phase, ProcKind, ShellExec, Status, WriteOp, WriteStatus,
};
use crate::limits::Limits;
use crate::manifest::{self, ManifestEntry};
use crate::paths::WsPath;
use crate::recorder::Recorder;
use crate::tool::{Ctx, ToolOutput};

/// Bytes read from a pipe at a time: the only buffer a stream's output passes through.
const PIPE_BUF_BYTES: usize = 64 * 1024;

/// How long to wait for the output pipes to close once the process group is gone. Only
/// a process that left the group (`setsid`) and kept the pipes can hold them longer.
const PIPE_DRAIN_MS: u64 = 2_000;

/// How often a foreground command's wait looks at the cancel token.
const CANCEL_CHECK_MS: u64 = 50;

/// What a shell tool asks for.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// Workspace-relative working folder.
    pub cwd: Option<String>,
    pub timeout_ms: Option<u64>,
    pub background: bool,
}

/// How the engine holds a background process.
pub enum Handle {
    /// Spawned by this engine: its child, reaped by it.
    Child(Child),
    /// Found still running at resume (same pid and start time): not this process's
    /// child, so it is watched through `/proc` and its exit status cannot be known.
    Adopted { pid: u32, start_time: u64 },
}

impl Handle {
    fn os_pid(&self) -> u32 {
        match self {
            Handle::Child(c) => c.id(),
            Handle::Adopted { pid, .. } => *pid,
        }
    }

    fn exited(&self) -> bool {
        match self {
            Handle::Child(c) => exited_unreaped(pid_of(c)),
            Handle::Adopted { pid, start_time } => !alive(*pid, *start_time),
        }
    }

    /// Stops the whole group and reaps (or, adopted, waits until it is gone).
    fn stop(&mut self, grace_ms: u64) -> (Option<i32>, Option<i32>) {
        match self {
            Handle::Child(c) => {
                let pid = pid_of(c);
                match stop_group(c, pid, grace_ms) {
                    Ok(s) => (s.code(), s.signal()),
                    Err(_) => (None, None),
                }
            }
            Handle::Adopted { pid, start_time } => {
                stop_adopted(*pid, *start_time, grace_ms);
                (None, None)
            }
        }
    }
}

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

/// A background child the engine still has to reap.
pub struct Bg {
    handle: Handle,
    call: String,
    argv: Vec<String>,
    cwd: String,
    log: PathBuf,
    started: Instant,
}

/// What the engine keeps beside the log for the shell: the running background
/// children and the workspace manifest as the log knows it.
pub struct Runtime {
    pub session_dir: PathBuf,
    pub tmp_dir: PathBuf,
    pub manifest_cache: manifest::ScanCache,
    /// The cairn home's path inside the workspace, when it is there (left out of scans).
    pub home_inner: Option<String>,
    pub manifest: BTreeMap<String, ManifestEntry>,
    pub bg: BTreeMap<String, Bg>,
    /// Set by another thread to cancel the running foreground command.
    pub cancel: crate::cancel::CancelHandle,
}

impl Runtime {
    /// Follows a write made by a file tool, so that the next scan does not see it as
    /// an external change.
    pub fn note_write(&mut self, w: &FileWrite) {
        if w.status != WriteStatus::Ok {
            return;
        }
        match &w.after {
            Some(after) => {
                let mode = w
                    .mode
                    .or_else(|| self.manifest.get(&w.path).map(|m| m.mode))
                    .unwrap_or(0o644);
                self.manifest.insert(
                    w.path.clone(),
                    ManifestEntry {
                        path: w.path.clone(),
                        size: after.len,
                        mode,
                        hash: after.hash,
                    },
                );
            }
            None => {
                self.manifest.remove(&w.path);
            }
        }
    }
}

impl Runtime {
    /// Tracks again a background process found running at resume.
    pub fn adopt(&mut self, p: &crate::state::Process, start_time: u64, session_dir: &Path) {
        let Some(pid) = p.pid else { return };
        let log = if p.log.is_empty() {
            session_dir.join("bg").join(format!("{}.log", p.id))
        } else {
            PathBuf::from(&p.log)
        };
        self.bg.insert(
            p.id.clone(),
            Bg {
                handle: Handle::Adopted { pid, start_time },
                call: p.call.clone(),
                argv: p.argv.clone(),
                cwd: p.cwd.clone(),
                log,
                started: Instant::now(),
            },
        );
    }
}

impl Drop for Runtime {
    /// An engine dropped without `end` (a panic, an error) still leaves no process behind.
    fn drop(&mut self) {
        for bg in self.bg.values_mut() {
            bg.handle.stop(0);
        }
    }
}

/// The checks a shell tool's input passes beyond its schema (part of the tool's
/// validation, so the engine refuses a bad input before asking anything, and verify
/// takes the same decision).
pub fn check(argv: &[String], timeout_ms: Option<u64>, background: bool) -> Result<(), String> {
    if argv.first().is_none_or(|p| p.is_empty()) {
        return Err("nothing to run: give the program first, then its arguments".into());
    }
    // A background process has no time limit: its timeout is not looked at.
    if !background && timeout_ms == Some(0) {
        return Err("timeout_ms must be at least 1".into());
    }
    Ok(())
}

/// Runs a shell tool's call (its input passed [`check`]).
pub fn run(ctx: &mut Ctx<'_>, spec: Spec) -> Result<ToolOutput> {
    debug_assert!(check(&spec.argv, spec.timeout_ms, spec.background).is_ok());
    let cwd = match &spec.cwd {
        None => WsPath {
            abs: ctx.root.to_path_buf(),
            rel: String::new(),
        },
        Some(c) => match ctx.resolve(c) {
            Err(out) => return Ok(out),
            Ok(ws) if !ws.abs.is_dir() => {
                return Ok(ToolOutput::error(format!(
                    "cwd {} is not a folder of the workspace",
                    ws.rel
                )));
            }
            Ok(ws) => ws,
        },
    };
    if spec.background {
        return background(ctx, &spec.argv, &cwd);
    }
    let limits = ctx.limits;
    let mut note = String::new();
    let timeout_ms = match spec.timeout_ms {
        Some(t) if t > limits.shell_timeout_ms_max => {
            note = format!(
                "note: timeout_ms {t} is over the maximum; {} was used\n",
                limits.shell_timeout_ms_max
            );
            limits.shell_timeout_ms_max
        }
        Some(t) => t,
        None => limits.shell_timeout_ms,
    };
    let mut out = foreground(ctx, &spec.argv, &cwd, timeout_ms)?;
    out.text.insert_str(0, &note);
    Ok(out)
}

fn exec_record(call: &str, argv: &[String], cwd: &str, kind: ProcKind) -> ShellExec {
    ShellExec {
        call: call.to_string(),
        id: None,
        argv: argv.to_vec(),
        cwd: cwd.to_string(),
        pid: None,
        start_time: None,
        kind,
        phase: Phase::Started,
        status: ExecStatus::Running,
        timeout_ms: None,
        exit_code: None,
        signal: None,
        elapsed_us: None,
        stdout_bytes: None,
        stderr_bytes: None,
        stdout: None,
        stderr: None,
        log: None,
        log_blob: None,
        error: None,
    }
}

fn command(argv: &[String], cwd: &Path) -> Command {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .process_group(0);
    cmd
}

/// The answer and the record for a program that could not start.
fn not_started(
    ctx: &mut Ctx<'_>,
    mut rec: ShellExec,
    e: &std::io::Error,
    started: Instant,
) -> Result<ToolOutput> {
    let text = if e.kind() == std::io::ErrorKind::NotFound {
        format!(
            "command not found: {} (run_shell takes a program and its arguments, no shell; the program must be on PATH or given by path)",
            rec.argv[0]
        )
    } else {
        format!("could not start {}: {e}", rec.argv[0])
    };
    rec.phase = Phase::Finished;
    rec.status = ExecStatus::Failed;
    rec.elapsed_us = Some(micros(started.elapsed()));
    rec.error = Some(e.to_string());
    ctx.record(Event::ShellExec(rec))?;
    Ok(ToolOutput::error(text))
}

fn foreground(
    ctx: &mut Ctx<'_>,
    argv: &[String],
    cwd: &WsPath,
    timeout_ms: u64,
) -> Result<ToolOutput> {
    let limits = ctx.limits.clone();
    let mut rec = exec_record(&ctx.call, argv, &cwd.rel, ProcKind::Foreground);
    rec.timeout_ms = Some(timeout_ms);
    std::fs::create_dir_all(&ctx.rt.tmp_dir).map_err(io_at(&ctx.rt.tmp_dir))?;
    let tmp_out =
        tempfile::NamedTempFile::new_in(&ctx.rt.tmp_dir).map_err(io_at(&ctx.rt.tmp_dir))?;
    let tmp_err =
        tempfile::NamedTempFile::new_in(&ctx.rt.tmp_dir).map_err(io_at(&ctx.rt.tmp_dir))?;
    let started = Instant::now();
    let mut cmd = command(argv, &cwd.abs);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return not_started(ctx, rec, &e, started),
    };
    let pid = pid_of(&child);
    rec.pid = Some(child.id());
    rec.start_time = start_time(child.id());
    let readers = [
        child
            .stdout
            .take()
            .map(|p| spawn_reader(p, tmp_out, &limits)),
        child
            .stderr
            .take()
            .map(|p| spawn_reader(p, tmp_err, &limits)),
    ];
    if let Err(e) = ctx.record(Event::ShellExec(rec.clone())) {
        // The log failed: nothing may run unrecorded.
        let _ = stop_group(&mut child, pid, 0);
        return Err(e);
    }
    let deadline = started + Duration::from_millis(timeout_ms);
    let cancel = ctx.rt.cancel.clone();
    // Waits in short slices so that a cancel is seen within one of them.
    let (exited, cancelled) = loop {
        if cancel.is_cancelled() {
            break (false, true);
        }
        let now = Instant::now();
        if now >= deadline {
            break (exited_unreaped(pid), false);
        }
        if wait_exit(
            pid,
            deadline.min(now + Duration::from_millis(CANCEL_CHECK_MS)),
        ) {
            break (true, false);
        }
    };
    let timed_out = !exited && !cancelled;
    let status = if timed_out || cancelled {
        stop_group(&mut child, pid, limits.shell_kill_grace_ms)
    } else {
        // The leader is done: what it left running in its group goes with it.
        stop_group(&mut child, pid, 0)
    };
    let elapsed = started.elapsed();
    let [out_r, err_r] = readers;
    let drain = Instant::now() + Duration::from_millis(PIPE_DRAIN_MS);
    let mut streams = Vec::new();
    for r in [out_r, err_r] {
        let got = r.and_then(|rx| {
            rx.recv_timeout(drain.saturating_duration_since(Instant::now()))
                .ok()
        });
        let stream = match got {
            Some(Ok((file, bytes, preview))) => {
                let blob = ctx.rec.blobs.put_file(file.path())?;
                ctx.rec.note_blobs_written();
                Stream {
                    bytes,
                    blob: Some(blob),
                    preview,
                    complete: true,
                }
            }
            Some(Err(e)) => Stream {
                bytes: 0,
                blob: None,
                preview: format!("(output could not be read: {e})"),
                complete: false,
            },
            None => Stream {
                bytes: 0,
                blob: None,
                preview: "(output not collected: a process outside the command's process group still holds the pipe)".into(),
                complete: false,
            },
        };
        streams.push(stream);
    }
    let (code, signal) = match status {
        Ok(s) => (s.code(), s.signal()),
        Err(_) => (None, None),
    };
    let exec_status = if cancelled {
        ExecStatus::Cancelled
    } else if timed_out {
        ExecStatus::Timeout
    } else if code == Some(0) {
        ExecStatus::Ok
    } else {
        ExecStatus::Failed
    };
    rec.phase = Phase::Finished;
    rec.status = exec_status;
    rec.exit_code = code;
    rec.signal = signal;
    rec.elapsed_us = Some(micros(elapsed));
    rec.stdout_bytes = Some(streams[0].bytes);
    rec.stderr_bytes = Some(streams[1].bytes);
    rec.stdout = streams[0].blob;
    rec.stderr = streams[1].blob;
    ctx.record(Event::ShellExec(rec))?;
    let changes = record_external(ctx.rec, ctx.rt, ctx.root, Some(&ctx.call))?;

    let mut text = match exec_status {
        ExecStatus::Timeout => format!(
            "timeout: killed after {timeout_ms} ms (the whole process group); give a larger timeout_ms (at most {}) or run it with background=true\n",
            limits.shell_timeout_ms_max
        ),
        ExecStatus::Cancelled => format!(
            "cancelled by the user after {} (the whole process group was killed)\n",
            ms(elapsed)
        ),
        _ => match (code, signal) {
            (Some(c), _) => format!("exit code {c} in {}\n", ms(elapsed)),
            (None, Some(s)) => format!("killed by signal {s} in {}\n", ms(elapsed)),
            _ => format!("ended in {}\n", ms(elapsed)),
        },
    };
    for (name, s) in ["stdout", "stderr"].iter().zip(&streams) {
        if s.complete && s.bytes == 0 {
            continue;
        }
        text.push_str(&format!("--- {name} ({} bytes) ---\n", s.bytes));
        text.push_str(&s.preview);
        if !s.preview.ends_with('\n') {
            text.push('\n');
        }
    }
    push_changes(&mut text, &changes);
    let status = match exec_status {
        ExecStatus::Ok => Status::Ok,
        ExecStatus::Timeout => Status::Timeout,
        ExecStatus::Cancelled => Status::Cancelled,
        _ => Status::Error,
    };
    Ok(ToolOutput {
        status,
        text,
        refusal: None,
    })
}

struct Stream {
    bytes: u64,
    blob: Option<BlobRef>,
    preview: String,
    complete: bool,
}

type ReaderResult = std::io::Result<(tempfile::NamedTempFile, u64, String)>;

/// Copies a pipe into `file` through one fixed buffer, building the model's preview on
/// the way; sends the file, the byte count and the preview when the pipe closes.
fn spawn_reader(
    mut pipe: impl Read + Send + 'static,
    mut file: tempfile::NamedTempFile,
    limits: &Limits,
) -> std::sync::mpsc::Receiver<ReaderResult> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut preview = Preview::new(
        limits.shell_output_bytes_max,
        limits.shell_output_lines_max,
        limits.shell_line_chars_max,
    );
    std::thread::spawn(move || {
        let result = (|| {
            let mut buf = vec![0u8; PIPE_BUF_BYTES];
            let mut total = 0u64;
            loop {
                let n = match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                file.write_all(&buf[..n])?;
                preview.feed(&buf[..n]);
                total += n as u64;
            }
            file.flush()?;
            Ok((file, total, preview.finish()))
        })();
        let _ = tx.send(result);
    });
    rx
}

/// The part of a stream the model sees, built as the bytes go by in bounded memory:
/// at most `lines_max` lines of at most `chars_max` characters and `bytes_max` bytes
/// of output in all (whole lines; the markers saying what was cut come on top).
pub struct Preview {
    bytes_max: usize,
    lines_max: usize,
    chars_max: usize,
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
        }
    }

    fn line_cap(&self) -> usize {
        self.chars_max.saturating_mul(4).saturating_add(4)
    }

    /// Takes the next bytes of the stream.
    pub fn feed(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            if self.full {
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
        if self.full {
            return;
        }
        if self.shown_lines >= self.lines_max {
            self.full = true;
            return;
        }
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
        if self.shown_bytes + content > self.bytes_max {
            self.full = true;
            return;
        }
        self.shown_bytes += content;
        self.shown.push_str(&text);
        self.shown_lines += 1;
    }

    /// The preview, with `…(N more lines)` when lines were left out.
    pub fn finish(mut self) -> String {
        if self.line_bytes > 0 || !self.line.is_empty() {
            self.end_line();
        }
        let more = self.total_lines - self.shown_lines as u64;
        if more > 0 {
            self.shown.push_str(&format!("…({more} more lines)\n"));
        }
        self.shown
    }
}

fn background(ctx: &mut Ctx<'_>, argv: &[String], cwd: &WsPath) -> Result<ToolOutput> {
    let running = ctx
        .state()
        .processes
        .values()
        .filter(|p| p.is_running())
        .count();
    if running >= ctx.limits.shell_background_max {
        return Ok(ToolOutput::error(format!(
            "{running} background processes are running, the most a session may have (shell_background_max); cancel one first"
        )));
    }
    let id = format!("p{}", ctx.state().processes.len() + 1);
    let dir = ctx.rt.session_dir.join("bg");
    std::fs::create_dir_all(&dir).map_err(io_at(&dir))?;
    let log = dir.join(format!("{id}.log"));
    let file = File::options()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(io_at(&log))?;
    let file2 = file.try_clone().map_err(io_at(&log))?;
    let mut rec = exec_record(&ctx.call, argv, &cwd.rel, ProcKind::Background);
    let started = Instant::now();
    let mut cmd = command(argv, &cwd.abs);
    cmd.stdout(file).stderr(file2);
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return not_started(ctx, rec, &e, started),
    };
    let os_pid = child.id();
    rec.id = Some(id.clone());
    rec.pid = Some(os_pid);
    rec.start_time = start_time(os_pid);
    rec.log = Some(log.to_string_lossy().into_owned());
    let mut bg = Bg {
        handle: Handle::Child(child),
        call: ctx.call.clone(),
        argv: argv.to_vec(),
        cwd: cwd.rel.clone(),
        log: log.clone(),
        started,
    };
    if let Err(e) = ctx.record(Event::ShellExec(rec)) {
        bg.handle.stop(0);
        return Err(e);
    }
    ctx.rt.bg.insert(id.clone(), bg);
    Ok(ToolOutput::ok(format!(
        "started {id} (pid {os_pid}) in the background: {}\nlog (stdout and stderr): {}\nits end is recorded when it exits; the session's end stops it",
        shown_argv(argv),
        log.display()
    )))
}

/// Records the end of every background process that exited; returns their ids.
pub fn poll(rec: &mut Recorder, rt: &mut Runtime, root: &Path) -> Result<Vec<String>> {
    let done: Vec<String> = rt
        .bg
        .iter()
        .filter(|(_, bg)| bg.handle.exited())
        .map(|(id, _)| id.clone())
        .collect();
    for id in &done {
        finish_bg(rec, rt, root, id, None, 0)?;
    }
    Ok(done)
}

/// Stops a background process (its whole group) and records it as cancelled, unless
/// it had already ended on its own. `None` when no such process is running.
pub fn cancel(
    rec: &mut Recorder,
    rt: &mut Runtime,
    root: &Path,
    id: &str,
    grace_ms: u64,
) -> Result<Option<ExecStatus>> {
    if !rt.bg.contains_key(id) {
        return Ok(None);
    }
    finish_bg(rec, rt, root, id, Some(ExecStatus::Cancelled), grace_ms).map(Some)
}

fn finish_bg(
    rec: &mut Recorder,
    rt: &mut Runtime,
    root: &Path,
    id: &str,
    cancel: Option<ExecStatus>,
    grace_ms: u64,
) -> Result<ExecStatus> {
    let Some(mut bg) = rt.bg.remove(id) else {
        return Ok(ExecStatus::Failed);
    };
    let already = bg.handle.exited();
    let adopted = matches!(bg.handle, Handle::Adopted { .. });
    let (code, signal) = bg.handle.stop(if already { 0 } else { grace_ms });
    let exec_status = match cancel {
        Some(c) if !already => c,
        // Not our child: how it exited is not ours to know.
        _ if adopted => ExecStatus::Lost,
        _ if code == Some(0) => ExecStatus::Ok,
        _ => ExecStatus::Failed,
    };
    let log_blob = match File::open(&bg.log) {
        Ok(f) => {
            let b = rec.blobs.put_reader(f)?;
            rec.note_blobs_written();
            Some(b)
        }
        Err(_) => None,
    };
    let mut x = exec_record(&bg.call, &bg.argv, &bg.cwd, ProcKind::Background);
    x.id = Some(id.to_string());
    x.pid = Some(bg.handle.os_pid());
    x.phase = Phase::Finished;
    x.status = exec_status;
    x.exit_code = code;
    x.signal = signal;
    x.elapsed_us = Some(micros(bg.started.elapsed()));
    x.log = Some(bg.log.to_string_lossy().into_owned());
    x.log_blob = log_blob;
    rec.append(&Event::ShellExec(x))?;
    record_external(rec, rt, root, None)?;
    Ok(exec_status)
}

/// One change found by a scan.
pub struct Change {
    pub what: &'static str,
    pub path: String,
}

/// Scans the workspace against the session's manifest and records every difference
/// as an `external` write.
pub fn record_external(
    rec: &mut Recorder,
    rt: &mut Runtime,
    root: &Path,
    call: Option<&str>,
) -> Result<Vec<Change>> {
    let mut files = manifest::scan_cached(root, &rec.blobs, &mut rt.manifest_cache)?;
    rec.note_blobs_written();
    if let Some(inner) = &rt.home_inner {
        files.retain(|f| !f.path.starts_with(inner.as_str()));
    }
    let now: BTreeMap<String, ManifestEntry> =
        files.into_iter().map(|f| (f.path.clone(), f)).collect();
    let mut changes = Vec::new();
    let mut paths: Vec<&String> = rt.manifest.keys().chain(now.keys()).collect();
    paths.sort();
    paths.dedup();
    for path in paths {
        let before = rt.manifest.get(path);
        let after = now.get(path);
        let what = match (before, after) {
            (None, Some(_)) => "created",
            (Some(b), Some(a)) if a.hash != b.hash => "changed",
            // A file the ignore rules hide (written by a file tool) is not deleted.
            (Some(_), None) if root.join(path).exists() => continue,
            (Some(_), None) => "deleted",
            _ => continue,
        };
        let lines_after = match after {
            Some(a) => count_lines(&rec.blobs.path(&a.hash)),
            None => 0,
        };
        let blob = |m: &ManifestEntry| BlobRef {
            hash: m.hash,
            len: m.size,
        };
        rec.append(&Event::FileWrite(FileWrite {
            call: call.map(str::to_string),
            op: WriteOp::External,
            path: path.clone(),
            before: before.map(blob),
            after: after.map(blob),
            lines_after,
            mode: after.map(|a| a.mode),
            status: WriteStatus::Ok,
        }))?;
        changes.push(Change {
            what,
            path: path.clone(),
        });
    }
    // Hidden files a file tool wrote stay known.
    let mut next = now;
    for (p, m) in &rt.manifest {
        if !next.contains_key(p) && root.join(p).exists() {
            next.insert(p.clone(), m.clone());
        }
    }
    rt.manifest = next;
    Ok(changes)
}

fn push_changes(text: &mut String, changes: &[Change]) {
    if changes.is_empty() {
        return;
    }
    text.push_str("files changed by the command (read them again before editing):\n");
    for c in changes {
        text.push_str(&format!("  {} {}\n", c.what, c.path));
    }
}

/// Lines of a file as `text::lines` counts them, streaming.
fn count_lines(path: &Path) -> u32 {
    let Ok(mut f) = File::open(path) else {
        return 0;
    };
    let mut buf = vec![0u8; PIPE_BUF_BYTES];
    let (mut newlines, mut last) = (0u64, b'\n');
    loop {
        match f.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                newlines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
                last = buf[n - 1];
            }
        }
    }
    let lines = newlines + u64::from(last != b'\n');
    u32::try_from(lines).unwrap_or(u32::MAX)
}

fn pid_of(child: &Child) -> libc::pid_t {
    libc::pid_t::try_from(child.id()).unwrap_or(libc::pid_t::MAX)
}

fn killpg(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: killpg only sends a signal. Callers pass the pid of a child they have not
    // reaped, so the process group id cannot belong to anyone else.
    unsafe {
        libc::killpg(pgid, signal);
    }
}

/// True when the child has exited (it stays a zombie until it is reaped).
fn exited_unreaped(pid: libc::pid_t) -> bool {
    // SAFETY: an all-zero siginfo_t is a valid value; waitid writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on our own child with WNOWAIT leaves it unreaped; `info` is ours.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: waitid filled `info` (si_pid stays 0 when the child is still running).
    rc == 0 && unsafe { info.si_pid() } != 0
}

/// Waits until the child exits (left unreaped) or `deadline` passes; true if it exited.
fn wait_exit(pid: libc::pid_t, deadline: Instant) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd >= 0 {
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
                break poll_wait(pid, deadline);
            }
            if Instant::now() >= deadline {
                break exited_unreaped(pid);
            }
        };
        // SAFETY: closing the descriptor pidfd_open gave us.
        unsafe {
            libc::close(fd);
        }
        return exited;
    }
    poll_wait(pid, deadline)
}

/// The fallback without pidfd: check, sleep a little longer each time.
fn poll_wait(pid: libc::pid_t, deadline: Instant) -> bool {
    let mut nap = Duration::from_micros(50);
    loop {
        if exited_unreaped(pid) {
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

/// Stops the child's whole process group (SIGTERM, `grace_ms`, SIGKILL; SIGKILL at
/// once when `grace_ms` is 0) and reaps the child.
fn stop_group(child: &mut Child, pid: libc::pid_t, grace_ms: u64) -> std::io::Result<ExitStatus> {
    if grace_ms > 0 && !exited_unreaped(pid) {
        killpg(pid, libc::SIGTERM);
        wait_exit(pid, Instant::now() + Duration::from_millis(grace_ms));
    }
    killpg(pid, libc::SIGKILL);
    child.wait()
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// An argv as a person would type it.
pub fn shown_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preview(input: &[u8], bytes: usize, lines: usize, chars: usize, step: usize) -> String {
        let mut p = Preview::new(bytes, lines, chars);
        for c in input.chunks(step.max(1)) {
            p.feed(c);
        }
        p.finish()
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

    #[test]
    fn shown_argv_quotes_what_needs_it() {
        let a: Vec<String> = ["sh", "-c", "echo 'hi' there", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shown_argv(&a), r#"sh -c 'echo '\''hi'\'' there' ''"#);
    }
}
