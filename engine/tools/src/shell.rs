//! Running programs for the shell tools (`run_shell`, `shell`): one implementation for
//! both catalogs.
//!
//! Every child is a [`Process`] of the one runner (`crate::process`) with standard
//! input closed: its own process group, so that a timeout, a cancel or the end of the
//! session kills it whole, grandchildren included.
//!
//! Output is read on two threads through a fixed buffer and the session's redactor
//! (`cairn_core::redact::StreamRedactor`: a secret is replaced before a byte of it is
//! written anywhere) into temporary files in the project folder (at most
//! `shell_capture_bytes_max` redacted bytes a stream; the rest is counted and
//! dropped), then stored as blobs by streaming; only a capped preview (bytes, lines,
//! characters a line: each a named limit) is kept in memory for the model. A background
//! process's two pipes are relayed the same way into its log file in the session folder
//! (`process::relay`), which is stored as a blob when it ends.
//!
//! [`exec_foreground`] is the one place a foreground command is run and recorded
//! (`shell_exec` started, then finished, then the scan below): the shell tools and
//! `problems` both go through it.
//!
//! After a foreground command, and when a background process ends, the workspace is
//! scanned against the session's manifest and every file the command created,
//! changed or deleted is recorded as a `file_write` with operation `external`.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_store::{BlobRef, Hash};

use crate::error::{Result, io_at};
use crate::event::{
    Event, ExecStatus, FileWrite, OutputCut, ProcKind, ShellEnd, ShellExec, ShellPhase, Status,
    WriteOp, WriteStatus,
};
use crate::manifest::{self, ManifestEntry};
use crate::paths::WsPath;
use crate::process::{PIPE_BUF_BYTES, Process, Relay, Relayed, Waited, capture, relay};
use crate::recorder::Recorder;
use crate::sandbox::Sandbox;
use crate::tool::{Ctx, InputError, TimeoutField, ToolOutput};
use cairn_core::redact::{Counts, StreamRedactor};

pub use crate::process::{Preview, alive, start_time, stop_adopted};

/// How long to wait for the output pipes to close once the process group is gone. Only
/// a process that left the group (`setsid`) and kept the pipes can hold them longer.
const PIPE_DRAIN_MS: u64 = 2_000;

/// What a shell tool asks for.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// Workspace-relative working folder.
    pub cwd: Option<String>,
    pub timeout_ms: Option<u64>,
    /// The input field the timeout was given in (for what the call is told of it).
    pub timeout_field: TimeoutField,
    pub background: bool,
}

/// How the engine holds a background process.
pub enum Handle {
    /// Spawned by this engine: its child, reaped by it.
    Child(Process),
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
            Handle::Child(c) => c.exited(),
            Handle::Adopted { pid, start_time } => !alive(*pid, *start_time),
        }
    }

    /// Stops the whole group and reaps (or, adopted, waits until it is gone).
    fn stop(&mut self, grace_ms: u64) -> (Option<i32>, Option<i32>) {
        match self {
            Handle::Child(c) => c.stop_code(grace_ms),
            Handle::Adopted { pid, start_time } => {
                stop_adopted(*pid, *start_time, grace_ms);
                (None, None)
            }
        }
    }
}

/// A background child the engine still has to reap.
pub struct Bg {
    handle: Handle,
    /// The thread writing its output into its log (none for a process adopted at
    /// resume: its pipes' reader died with the engine that started it).
    relay: Option<Relay>,
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
    /// The OS sandbox every command runs under (its temporary folder goes with it).
    pub sandbox: crate::sandbox::Sandbox,
    /// Where a foreground command's output goes as it is read, redacted (see
    /// [`OutputSink`]).
    pub output: Option<OutputSink>,
}

/// Takes a foreground command's output as it is read, redacted, in the pieces it was
/// read in; called on the threads that read stdout and stderr.
pub type OutputSink = std::sync::Arc<dyn Fn(&[u8]) + Send + Sync>;

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
                        hash: Some(after.hash),
                        withheld: w.withheld,
                        git: None,
                        not_kept: None,
                        special: None,
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
                relay: None,
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
            if let Some(r) = &bg.relay {
                r.stop();
            }
        }
    }
}

/// The checks a shell tool's input passes beyond its schema (part of the tool's
/// validation, so the engine refuses a bad input before asking anything, and verify
/// takes the same decision).
pub fn check(
    argv: &[String],
    timeout_ms: Option<u64>,
    timeout_field: TimeoutField,
    background: bool,
) -> Result<(), InputError> {
    if argv.first().is_none_or(|p| p.is_empty()) {
        return Err(InputError::Rule(
            "nothing to run: give the program first, then its arguments".into(),
        ));
    }
    // A background process has no time limit: its timeout is not looked at.
    if !background && timeout_ms == Some(0) {
        return Err(InputError::Rule(format!(
            "{} must be at least 1",
            timeout_field.name
        )));
    }
    Ok(())
}

/// Runs a shell tool's call (its input passed [`check`]).
pub fn run(ctx: &mut Ctx<'_>, spec: Spec) -> Result<ToolOutput> {
    debug_assert!(
        check(
            &spec.argv,
            spec.timeout_ms,
            spec.timeout_field,
            spec.background
        )
        .is_ok()
    );
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
            note = spec
                .timeout_field
                .over_max_note(t, limits.shell_timeout_ms_max);
            limits.shell_timeout_ms_max
        }
        Some(t) => t,
        None => limits.shell_timeout_ms,
    };
    let mut out = foreground(ctx, &spec.argv, &cwd, timeout_ms, spec.timeout_field)?;
    out.text.insert_str(0, &note);
    Ok(out)
}

fn exec_record(call: &str, argv: &[String], cwd: &str, kind: ProcKind) -> ShellExec {
    ShellExec {
        call: call.to_string(),
        id: None,
        argv: argv.to_vec(),
        argv_hash: None,
        cwd: cwd.to_string(),
        pid: None,
        start_time: None,
        kind,
        timeout_ms: None,
        log: None,
        sandbox: None,
        phase: ShellPhase::Started,
    }
}

fn command(argv: &[String], cwd: &Path, sandbox: &Sandbox) -> Command {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).current_dir(cwd).stdin(Stdio::null());
    if let Some(tmp) = sandbox.tmp() {
        cmd.env("TMPDIR", tmp);
    }
    cmd
}

/// Spawns a command under the session's sandbox.
fn spawn(cmd: &mut Command, sandbox: &Sandbox) -> std::io::Result<Process> {
    let confinement = sandbox.for_command().map_err(std::io::Error::other)?;
    Process::spawn_in(cmd, confinement)
}

/// Records a program that could not start (phase finished, status failed).
fn record_not_started(
    ctx: &mut Ctx<'_>,
    mut rec: ShellExec,
    e: &std::io::Error,
    started: Instant,
) -> Result<()> {
    rec.phase = ShellPhase::Finished(ShellEnd {
        elapsed_us: Some(micros(started.elapsed())),
        error: Some(e.to_string()),
        ..ShellEnd::new(ExecStatus::Failed)
    });
    ctx.record(Event::ShellExec(rec))
}

/// The shell tools' answer for a program that could not start.
fn not_started(program: &str, e: &std::io::Error) -> ToolOutput {
    ToolOutput::error(if e.kind() == std::io::ErrorKind::NotFound {
        format!(
            "command not found: {program} (run_shell takes a program and its arguments, no shell; the program must be on PATH or given by path)"
        )
    } else {
        format!("could not start {program}: {e}")
    })
}

/// A foreground command that ran, as recorded.
pub(crate) struct Ran {
    pub status: ExecStatus,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub elapsed: Duration,
    /// stdout, then stderr.
    pub streams: [Stream; 2],
    /// What the scan after it found.
    pub changes: Vec<Change>,
}

/// Runs `argv` in `cwd` in the foreground for at most `timeout_ms` (or until the
/// session's cancel token is triggered), then stops its whole process group. Records
/// `shell_exec` started (with pid and start time, before waiting) and finished (status,
/// exit code or signal, both streams as blobs), then scans the workspace for what it
/// changed. The inner `Err` is a program that could not start (recorded as failed).
pub(crate) fn exec_foreground(
    ctx: &mut Ctx<'_>,
    argv: &[String],
    cwd: &WsPath,
    timeout_ms: u64,
) -> Result<std::result::Result<Ran, std::io::Error>> {
    assert!(!argv.is_empty(), "a foreground command without a program");
    let limits = ctx.limits.clone();
    let mut rec = exec_record(&ctx.call, argv, &cwd.rel, ProcKind::Foreground);
    rec.timeout_ms = Some(timeout_ms);
    rec.sandbox = Some(ctx.rt.sandbox.recorded().brief());
    std::fs::create_dir_all(&ctx.rt.tmp_dir).map_err(io_at(&ctx.rt.tmp_dir))?;
    let tmp_out =
        tempfile::NamedTempFile::new_in(&ctx.rt.tmp_dir).map_err(io_at(&ctx.rt.tmp_dir))?;
    let tmp_err =
        tempfile::NamedTempFile::new_in(&ctx.rt.tmp_dir).map_err(io_at(&ctx.rt.tmp_dir))?;
    let started = Instant::now();
    let mut cmd = command(argv, &cwd.abs, &ctx.rt.sandbox);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = match spawn(&mut cmd, &ctx.rt.sandbox) {
        Ok(c) => c,
        Err(e) => {
            record_not_started(ctx, rec, &e, started)?;
            return Ok(Err(e));
        }
    };
    rec.pid = Some(child.id());
    rec.start_time = child.start_time();
    let preview = || {
        Preview::new(
            limits.shell_output_bytes_max,
            limits.shell_output_lines_max,
            limits.shell_line_chars_max,
        )
        .with_tail(limits.shell_output_tail_lines_max)
    };
    let bytes_max = limits.shell_capture_bytes_max;
    let redactor = || StreamRedactor::new(ctx.redactor);
    let live = || ctx.rt.output.clone();
    let readers = [
        child
            .take_stdout()
            .map(|p| capture(p, tmp_out, bytes_max, preview(), redactor(), live())),
        child
            .take_stderr()
            .map(|p| capture(p, tmp_err, bytes_max, preview(), redactor(), live())),
    ];
    if let Err(e) = ctx.record(Event::ShellExec(rec.clone())) {
        // The log failed: nothing may run unrecorded.
        child.stop_code(0);
        return Err(e);
    }
    let deadline = started + Duration::from_millis(timeout_ms);
    let waited = child.wait(deadline, &ctx.rt.cancel);
    let (code, signal) = match waited {
        Waited::TimedOut | Waited::Cancelled => child.stop_code(limits.shell_kill_grace_ms),
        // The leader is done: what it left running in its group goes with it.
        Waited::Exited => child.stop_code(0),
    };
    let elapsed = started.elapsed();
    let drain = Instant::now() + Duration::from_millis(PIPE_DRAIN_MS);
    let mut streams = Vec::new();
    for r in readers {
        streams.push(collected(ctx, r.and_then(|c| c.finish(drain)))?);
    }
    let Ok(streams) = <[Stream; 2]>::try_from(streams) else {
        unreachable!("two readers give two streams")
    };
    let exec_status = match waited {
        Waited::Cancelled => ExecStatus::Cancelled,
        Waited::TimedOut => ExecStatus::Timeout,
        Waited::Exited if code == Some(0) => ExecStatus::Ok,
        Waited::Exited => ExecStatus::Failed,
    };
    rec.phase = ShellPhase::Finished(ShellEnd {
        exit_code: code,
        signal,
        elapsed_us: Some(micros(elapsed)),
        stdout_bytes: Some(streams[0].bytes),
        stderr_bytes: Some(streams[1].bytes),
        stdout: streams[0].blob,
        stderr: streams[1].blob,
        stdout_cut: streams[0].cut,
        stderr_cut: streams[1].cut,
        ..ShellEnd::new(exec_status)
    });
    ctx.record(Event::ShellExec(rec))?;
    let changes = record_external(ctx.rec, ctx.rt, ctx.root, Some(&ctx.call))?;
    Ok(Ok(Ran {
        status: exec_status,
        code,
        signal,
        elapsed,
        streams,
        changes,
    }))
}

/// A captured stream kept as a blob, or what stands for one that could not be read
/// or was not collected.
fn collected(
    ctx: &mut Ctx<'_>,
    got: Option<std::io::Result<crate::process::Captured>>,
) -> Result<Stream> {
    Ok(match got {
        Some(Ok(got)) => {
            let blob = ctx.rec.blobs.put_file(got.file.path())?;
            ctx.rec.note_blobs(&[blob.hash]);
            assert_eq!(blob.len, got.kept, "the blob is the captured file");
            add_counts(ctx.redactions, &got.redactions);
            Stream {
                bytes: got.bytes,
                blob: Some(blob),
                cut: got.cut,
                preview: got.preview,
                complete: true,
            }
        }
        Some(Err(e)) => Stream {
            bytes: 0,
            blob: None,
            cut: None,
            preview: format!("(output could not be read: {e})"),
            complete: false,
        },
        None => Stream {
            bytes: 0,
            blob: None,
            cut: None,
            preview: "(output not collected: a process outside the command's process group still holds the pipe)".into(),
            complete: false,
        },
    })
}

fn foreground(
    ctx: &mut Ctx<'_>,
    argv: &[String],
    cwd: &WsPath,
    timeout_ms: u64,
    timeout_field: TimeoutField,
) -> Result<ToolOutput> {
    let ran = match exec_foreground(ctx, argv, cwd, timeout_ms)? {
        Ok(r) => r,
        Err(e) => return Ok(not_started(&argv[0], &e)),
    };
    let Ran {
        status: exec_status,
        code,
        signal,
        elapsed,
        streams,
        changes,
    } = ran;
    let shown = streams.each_ref().map(|s| Shown {
        bytes: s.bytes,
        kept: s.blob.map(|b| b.len),
        cut: s.cut,
        preview: &s.preview,
        complete: s.complete,
    });
    let changed: Vec<(&str, &str)> = changes
        .iter()
        .map(|c| (c.what.as_str(), c.path.as_str()))
        .collect();
    let text = foreground_text(
        Ended {
            status: exec_status,
            code,
            signal,
            elapsed_us: u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            timeout_ms,
            timeout_field,
        },
        ctx.limits.shell_timeout_ms_max,
        shown,
        Some(SandboxShown {
            sandboxed: ctx.rt.sandbox.recorded(),
            writable: &ctx.rt.sandbox.recorded().writable,
        }),
        &changed,
    );
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
        redacted: false,
    })
}

/// How a foreground command ended, as its finished `shell_exec` records it.
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    pub status: ExecStatus,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub elapsed_us: u64,
    /// The time limit in force.
    pub timeout_ms: u64,
    /// The input field the call could have asked for more in.
    pub timeout_field: TimeoutField,
}

/// One output stream as the model is shown it.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a> {
    /// Bytes the stream carried.
    pub bytes: u64,
    /// Bytes its blob kept (fewer than `bytes` past the capture limit); none when it
    /// was not collected.
    pub kept: Option<u64>,
    /// Past the capture limit, what its blob dropped between head and tail (none in
    /// logs from before, whose blob kept the head only).
    pub cut: Option<OutputCut>,
    /// The preview of what was kept, or one line of why it was not collected.
    pub preview: &'a str,
    /// False when the output could not be collected.
    pub complete: bool,
}

/// The sandbox a command ran under, as recorded: its `shell_exec`'s record and the
/// writable folders `session_started` lists.
#[derive(Debug, Clone, Copy)]
pub struct SandboxShown<'a> {
    pub sandboxed: &'a crate::event::Sandboxed,
    pub writable: &'a [String],
}

/// What the model is told of a foreground command that ran: how it ended, each stream's
/// preview, right after stderr's a note when the sandbox refused a write outside (see
/// [`crate::sandbox::refusal_note`]), the files it changed (`(what, path)`). The shell
/// tools answer with it and deep verify rebuilds it from the records and blobs: one
/// text, written once.
pub fn foreground_text(
    ended: Ended,
    timeout_ms_max: u64,
    streams: [Shown<'_>; 2],
    sandbox: Option<SandboxShown<'_>>,
    changes: &[(&str, &str)],
) -> String {
    let elapsed = format!("{} ms", ended.elapsed_us / 1000);
    let mut text = match ended.status {
        ExecStatus::Timeout => format!(
            "timeout: killed after {} ms (the whole process group); give a larger {} (at most {}) or run it with background=true\n",
            ended.timeout_ms,
            ended.timeout_field.name,
            ended.timeout_field.show(timeout_ms_max)
        ),
        ExecStatus::Cancelled => {
            format!("cancelled by the user after {elapsed} (the whole process group was killed)\n")
        }
        _ => match (ended.code, ended.signal) {
            (Some(c), _) => format!("exit code {c} in {elapsed}\n"),
            (None, Some(s)) => format!("killed by signal {s} in {elapsed}\n"),
            _ => format!("ended in {elapsed}\n"),
        },
    };
    for (name, s) in ["stdout", "stderr"].iter().zip(streams) {
        if s.complete && s.bytes == 0 {
            continue;
        }
        match (s.kept, s.cut) {
            (Some(kept), Some(cut)) if kept < s.bytes => text.push_str(&format!(
                "--- {name} ({} bytes; {kept} kept: the first {} and the last {}, shell_capture_bytes_max) ---\n",
                s.bytes,
                cut.at,
                kept - cut.at
            )),
            (Some(kept), _) if kept < s.bytes => text.push_str(&format!(
                "--- {name} ({} bytes; the first {kept} kept, shell_capture_bytes_max) ---\n",
                s.bytes
            )),
            _ => text.push_str(&format!("--- {name} ({} bytes) ---\n", s.bytes)),
        }
        text.push_str(s.preview);
        if !s.preview.ends_with('\n') {
            text.push('\n');
        }
    }
    // Right after stderr's preview: where verify cannot rebuild that preview (a stream
    // cut at the capture limit), the hole it leaves takes the note too.
    if ended.status == ExecStatus::Failed
        && let Some(sb) = sandbox
        && let Some(note) =
            crate::sandbox::refusal_note(sb.sandboxed, sb.writable, streams[1].preview)
    {
        text.push_str(&note);
    }
    push_changed(&mut text, changes);
    text
}

/// The list of files a command changed, as the model is told it.
fn push_changed(text: &mut String, changes: &[(&str, &str)]) {
    if changes.is_empty() {
        return;
    }
    text.push_str("files changed by the command (read them again before editing):\n");
    for (what, path) in changes {
        text.push_str(&format!("  {what} {path}\n"));
    }
}

/// One output stream of a foreground command.
pub(crate) struct Stream {
    /// Bytes the stream carried (its blob may hold fewer: the capture limit).
    pub bytes: u64,
    pub blob: Option<BlobRef>,
    /// Bytes dropped between the head and the tail its blob keeps.
    pub cut: Option<OutputCut>,
    pub preview: String,
    /// False when the output could not be collected.
    pub complete: bool,
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
    cairn_store::private::create_dir_all(&dir).map_err(io_at(&dir))?;
    let log = dir.join(format!("{id}.log"));
    let file = cairn_store::private::options()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(io_at(&log))?;
    let mut rec = exec_record(&ctx.call, argv, &cwd.rel, ProcKind::Background);
    rec.sandbox = Some(ctx.rt.sandbox.recorded().brief());
    let started = Instant::now();
    let mut cmd = command(argv, &cwd.abs, &ctx.rt.sandbox);
    // Through cairn, never straight into the log: what it prints is redacted first.
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = match spawn(&mut cmd, &ctx.rt.sandbox) {
        Ok(c) => c,
        Err(e) => {
            record_not_started(ctx, rec, &e, started)?;
            return Ok(not_started(&argv[0], &e));
        }
    };
    let relay = match (child.take_stdout(), child.take_stderr()) {
        (Some(out), Some(err)) => Some(relay(out, err, file, ctx.redactor)),
        _ => unreachable!("a background process spawned without its pipes"),
    };
    let os_pid = child.id();
    rec.id = Some(id.clone());
    rec.pid = Some(os_pid);
    rec.start_time = child.start_time();
    rec.log = Some(log.to_string_lossy().into_owned());
    let mut bg = Bg {
        handle: Handle::Child(child),
        relay,
        call: ctx.call.clone(),
        argv: argv.to_vec(),
        cwd: cwd.rel.clone(),
        log: log.clone(),
        started,
    };
    if let Err(e) = ctx.record(Event::ShellExec(rec)) {
        bg.handle.stop(0);
        if let Some(r) = &bg.relay {
            r.stop();
        }
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
    // The group is gone: the relay drains what it wrote before the log is taken.
    let error = match bg
        .relay
        .take()
        .map(|r| r.finish(Instant::now() + Duration::from_millis(PIPE_DRAIN_MS)))
    {
        Some(Relayed::Done(_)) => None,
        Some(Relayed::Stopped) => Some(
            "a process outside its process group still held its output pipes: the log ends where it was stopped"
                .to_string(),
        ),
        Some(Relayed::Failed(e)) => Some(format!("its log could not be written: {e}")),
        None => Some(
            "adopted at resume: anything it printed after the engine that started it stopped had no reader and is not in its log"
                .to_string(),
        ),
    };
    let log_blob = match File::open(&bg.log) {
        Ok(f) => {
            let b = rec.blobs.put_reader(f)?;
            rec.note_blobs(&[b.hash]);
            Some(b)
        }
        Err(_) => None,
    };
    let mut x = exec_record(&bg.call, &bg.argv, &bg.cwd, ProcKind::Background);
    x.id = Some(id.to_string());
    x.pid = Some(bg.handle.os_pid());
    x.log = Some(bg.log.to_string_lossy().into_owned());
    x.phase = ShellPhase::Finished(ShellEnd {
        exit_code: code,
        signal,
        elapsed_us: Some(micros(bg.started.elapsed())),
        log_blob,
        error,
        ..ShellEnd::new(exec_status)
    });
    rec.append(&Event::ShellExec(x))?;
    record_external(rec, rt, root, None)?;
    Ok(exec_status)
}

/// One change found by a scan.
pub struct Change {
    pub what: ChangeKind,
    pub path: String,
}

/// How a file found by a scan differs from what the session knew.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Created,
    Changed,
    Deleted,
}

impl ChangeKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            ChangeKind::Created => "created",
            ChangeKind::Changed => "changed",
            ChangeKind::Deleted => "deleted",
        }
    }
}

impl std::fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
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
    // Only a scan that stored blobs has any to sync before the next record: each by
    // its own fsync when they are few.
    rec.note_blobs(&rt.manifest_cache.stored);
    if let Some(inner) = &rt.home_inner {
        files.retain(|f| !f.path.starts_with(inner.as_str()));
    }
    // A special file has no content a write could name: it is in the manifest of the
    // start only. A regular file replaced by one is deleted.
    files.retain(|f| f.special.is_none());
    let now: BTreeMap<String, ManifestEntry> =
        files.into_iter().map(|f| (f.path.clone(), f)).collect();
    let mut changes = Vec::new();
    let mut paths: Vec<&String> = rt.manifest.keys().chain(now.keys()).collect();
    paths.sort();
    paths.dedup();
    // The repository, opened at the first git-backed file recorded without its hash
    // that changed: its BLAKE3 is computed from the object then.
    let objects = std::cell::OnceCell::new();
    let found: std::cell::RefCell<HashMap<String, Option<Hash>>> = Default::default();
    let hash_of = |m: &ManifestEntry| {
        m.hash.or_else(|| {
            let oid = m.git.clone()?;
            let objects = objects.get_or_init(|| crate::git::Objects::open(root));
            *found
                .borrow_mut()
                .entry(oid)
                .or_insert_with(|| m.content_hash(objects))
        })
    };
    for path in paths {
        let before = rt.manifest.get(path);
        let after = now.get(path);
        let what = match (before, after) {
            (None, Some(_)) => ChangeKind::Created,
            (Some(b), Some(a)) => match b.same_content(a) {
                Some(true) => continue,
                Some(false) => ChangeKind::Changed,
                None if hash_of(b).is_some_and(|h| Some(h) == hash_of(a)) => continue,
                None => ChangeKind::Changed,
            },
            // A file the ignore rules hide (written by a file tool) is not deleted.
            (Some(b), None)
                if b.special.is_some()
                    || std::fs::symlink_metadata(root.join(path)).is_ok_and(|m| m.is_file()) =>
            {
                continue;
            }
            (Some(_), None) => ChangeKind::Deleted,
            _ => continue,
        };
        // A file git backs (a cache entry of the session's start, seen anew) gets its
        // blob now: a write's content after is always a blob or withheld.
        let stored;
        let after = match after {
            Some(a) if a.git.is_some() => {
                stored = stored_from_git(rec, root, path, a)?;
                Some(&stored)
            }
            other => other,
        };
        // A withheld file has no blob: its lines are counted in the workspace.
        let lines_after = match after {
            Some(a) if a.withheld || a.not_kept.is_some() => count_lines(&root.join(path)),
            Some(a) => a.hash.map_or(0, |h| count_lines(&rec.blobs.path(&h))),
            None => 0,
        };
        let withheld = before.is_some_and(|b| b.withheld) || after.is_some_and(|a| a.withheld);
        // A git-backed content before has its hash computed from the object; when the
        // repository no longer has it (the same command removed it), its content is
        // gone from the world and the write names no content before.
        let blob = |m: &ManifestEntry| hash_of(m).map(|hash| BlobRef { hash, len: m.size });
        rec.append(&Event::FileWrite(FileWrite {
            call: call.map(str::to_string),
            op: WriteOp::External,
            path: path.clone(),
            before: before.and_then(blob),
            after: after.and_then(blob),
            lines_after,
            mode: after.map(|a| a.mode),
            status: WriteStatus::Ok,
            withheld,
            // A file not kept (too large, sparse) names content no blob holds: a
            // checkout lists it with the missing blobs.
            unknown: false,
            diff: None,
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

/// A file git backs, stored as a blob now: its entry with its hash and no git id.
fn stored_from_git(
    rec: &mut Recorder,
    root: &Path,
    path: &str,
    a: &ManifestEntry,
) -> Result<ManifestEntry> {
    let abs = root.join(path);
    let (file, _) = crate::open::open_regular(&abs).map_err(|e| {
        io_at(&abs)(match e {
            crate::open::OpenError::Io(e) => e,
            other => std::io::Error::other(format!("{other:?}")),
        })
    })?;
    let b = rec.blobs.put_reader(file)?;
    rec.note_blobs(&[b.hash]);
    Ok(ManifestEntry {
        hash: Some(b.hash),
        size: b.len,
        git: None,
        ..a.clone()
    })
}

pub(crate) fn push_changes(text: &mut String, changes: &[Change]) {
    let changes: Vec<(&str, &str)> = changes
        .iter()
        .map(|c| (c.what.as_str(), c.path.as_str()))
        .collect();
    push_changed(text, &changes);
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

/// Adds `more` to `counts`.
fn add_counts(counts: &mut Counts, more: &Counts) {
    for (kind, n) in more {
        *counts.entry(kind.clone()).or_default() += n;
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
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

    #[test]
    fn shown_argv_quotes_what_needs_it() {
        let a: Vec<String> = ["sh", "-c", "echo 'hi' there", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shown_argv(&a), r#"sh -c 'echo '\''hi'\'' there' ''"#);
    }
}
