//! Real bash as the oracle of cairn's consent analysis (issue 40).
//!
//! Lines from [`crate::bashgen`] run in real `bash -c` and in `sh -c` (what the `shell`
//! tool runs), each in a fresh copy of a small workspace (`ws/`: a few files, a git
//! repository with a change, a symlink `ws/link -> ../out`), with the marker program
//! `cairnmark` first on `PATH`. A line *fails* when a shell ran the marker or wrote into
//! `out/` while cairn would not have asked, with every granted program (`shell:echo`, …)
//! on the allow list: the `shell` tool's need decided by `decide::permission` gives
//! `AllowList` (or `Auto`), or the agents' hook (`hook::need` + `hook::verdict`) says
//! `Allow`. The allow list is the one a real [`Engine`] session folds after "always"
//! answers; a sample of lines of each class also runs through that engine end to end,
//! with an approver that denies and records every question.
//!
//! Everything lives in one temporary folder: per worker a run folder (`ws/`, `out/`,
//! `home/`, `tmp/`, `bin/cairnmark`, `mark.log`), reset before each run.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Read;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_engine::command::Guard;
use cairn_engine::decide::{self, Permission};
use cairn_engine::event::Answer;
use cairn_engine::hook::{self, DefaultCredentials, Unlisted, Verdict};
use cairn_engine::permission::CredentialFiles;
use cairn_engine::permission::{Approver, Request};
use cairn_engine::{Catalog, Engine, EngineConfig, Home, Registry, State};
use cairn_store::Durability;
use serde_json::json;

use crate::bashgen::{self, Class, MARKER, Places, Template};

/// The shells a line runs in: bash (Claude Code's and Codex's `Bash` tool) and `sh`
/// (the `shell` tool's `sh -c`; dash on Debian, bash elsewhere).
pub const SHELLS: &[&str] = &["bash", "sh"];

/// How one corpus is run.
#[derive(Debug, Clone)]
pub struct Config {
    pub seed: u64,
    pub lines: u64,
    pub threads: usize,
    /// Each shell run's time limit; the process group is killed past it.
    pub line_timeout_ms: u64,
    /// Lines of each class run end to end through a real engine (0: none).
    pub engine_lines_per_class: u64,
    /// Print a line to stderr each time this many lines are done (0: never).
    pub progress_lines: u64,
}

/// What a shell run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effect {
    /// The marker ran (its log has a line).
    pub marker: bool,
    /// Something appeared in `out/`.
    pub out: bool,
    pub timed_out: bool,
}

impl Effect {
    pub fn any(&self) -> bool {
        self.marker || self.out
    }
}

/// Whether cairn would run the line without asking.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LetThrough {
    /// The `shell` tool: its need, decided against the allow list, is `AllowList` or
    /// `Auto`.
    pub tool: bool,
    /// The hook: the verdict on the `Bash` call is `Allow`.
    pub hook: bool,
}

impl LetThrough {
    pub fn any(&self) -> bool {
        self.tool || self.hook
    }

    fn names(&self) -> String {
        let mut v = Vec::new();
        if self.tool {
            v.push("tool");
        }
        if self.hook {
            v.push("hook");
        }
        v.join("+")
    }
}

/// One line's outcome.
#[derive(Debug, Clone)]
pub struct LineResult {
    pub index: u64,
    pub template: Template,
    /// The line as the first worker ran it.
    pub line: String,
    pub let_through: LetThrough,
    /// One effect per shell of [`SHELLS`].
    pub effects: Vec<Effect>,
}

impl LineResult {
    /// Bash or sh ran the marker or wrote into `out/`, and cairn would not have asked.
    pub fn failed(&self) -> bool {
        self.let_through.any() && self.effects.iter().any(Effect::any)
    }

    fn ran_in(&self) -> String {
        SHELLS
            .iter()
            .zip(&self.effects)
            .filter(|(_, e)| e.any())
            .map(|(s, e)| {
                let what = match (e.marker, e.out) {
                    (true, true) => "marker+out",
                    (true, false) => "marker",
                    _ => "out",
                };
                format!("{s}:{what}")
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// One line of the failure list: class, verdict path, shells, the line escaped.
    pub fn describe(&self) -> String {
        format!(
            "class={} let-through={} ran={} index={} line={:?}",
            self.template.class.name(),
            self.let_through.names(),
            self.ran_in(),
            self.index,
            self.template.readable()
        )
    }
}

/// One line run through the engine.
#[derive(Debug, Clone)]
pub struct EngineResult {
    pub template: Template,
    pub asked: bool,
    pub effect: Effect,
}

impl EngineResult {
    /// The marker ran or `out/` was written: nobody was asked, or it happened although
    /// the question was denied.
    pub fn failed(&self) -> bool {
        self.effect.any()
    }

    /// One line of the failure list.
    pub fn describe(&self) -> String {
        let what = match (self.effect.marker, self.effect.out) {
            (true, true) => "marker+out",
            (true, false) => "marker",
            _ => "out",
        };
        format!(
            "class={} let-through=engine({}) ran=sh:{what} line={:?}",
            self.template.class.name(),
            if self.asked {
                "asked, denied, ran"
            } else {
                "not asked"
            },
            self.template.readable()
        )
    }
}

/// A whole run.
#[derive(Debug)]
pub struct Report {
    pub config: Config,
    pub results: Vec<LineResult>,
    pub engine: Vec<EngineResult>,
    /// The corpus's wall time (the engine sample not included).
    pub elapsed: Duration,
    pub engine_elapsed: Duration,
    /// What `sh` is here (the target of `/bin/sh`).
    pub sh_is: String,
    /// The engine session's sandbox as it recorded it (mode, Landlock ABI,
    /// enforcement): an enforcing sandbox stops the engine's writes into `out/`.
    pub sandbox: String,
}

/// Per-class counts.
#[derive(Debug, Default, Clone)]
pub struct ClassStats {
    pub lines: u64,
    pub covered: u64,
    pub effects: u64,
    pub failures: u64,
    pub engine_lines: u64,
    pub engine_failures: u64,
}

impl Report {
    pub fn failures(&self) -> Vec<&LineResult> {
        self.results.iter().filter(|r| r.failed()).collect()
    }

    pub fn engine_failures(&self) -> Vec<&EngineResult> {
        self.engine.iter().filter(|r| r.failed()).collect()
    }

    pub fn by_class(&self) -> BTreeMap<Class, ClassStats> {
        let mut m: BTreeMap<Class, ClassStats> = BTreeMap::new();
        for r in &self.results {
            let s = m.entry(r.template.class).or_default();
            s.lines += 1;
            s.covered += u64::from(r.let_through.tool);
            s.effects += u64::from(r.effects.iter().any(Effect::any));
            s.failures += u64::from(r.failed());
        }
        for r in &self.engine {
            let s = m.entry(r.template.class).or_default();
            s.engine_lines += 1;
            s.engine_failures += u64::from(r.failed());
        }
        m
    }

    /// The one-line summary.
    pub fn summary(&self) -> String {
        let n = self.results.len() as u64;
        let covered = self.results.iter().filter(|r| r.let_through.tool).count() as u64;
        let hook_allowed = self.results.iter().filter(|r| r.let_through.hook).count() as u64;
        let harmless: Vec<&LineResult> = self
            .results
            .iter()
            .filter(|r| r.template.class == Class::Harmless)
            .collect();
        let harmless_covered = harmless.iter().filter(|r| r.let_through.tool).count() as u64;
        let count = |i: usize, f: fn(&Effect) -> bool| {
            self.results
                .iter()
                .filter(|r| r.effects.get(i).is_some_and(f))
                .count()
        };
        let marker_runs = self
            .results
            .iter()
            .filter(|r| r.effects.iter().any(|e| e.marker))
            .count();
        let out_writes = self
            .results
            .iter()
            .filter(|r| r.effects.iter().any(|e| e.out))
            .count();
        let timeouts = self
            .results
            .iter()
            .filter(|r| r.effects.iter().any(|e| e.timed_out))
            .count();
        let failures = self.failures();
        let tool_fail = failures.iter().filter(|r| r.let_through.tool).count();
        let hook_fail = failures.iter().filter(|r| r.let_through.hook).count();
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        format!(
            "consent oracle: seed {} lines {n} classes {} covered {} ({}, harmless {}, hook allows {}) \
             marker runs {marker_runs} (bash {}, sh {}) out writes {out_writes} (bash {}, sh {}) \
             timeouts {timeouts} failures {} (tool {tool_fail}, hook {hook_fail}) {:.0} lines/s \
             ({:.1} s, {} threads, sh is {}); engine sample {} lines, {} ran the marker or wrote into out/ \
             ({:.1} s, sandbox {})",
            self.config.seed,
            Class::ALL.len(),
            covered,
            percent(covered, n),
            percent(harmless_covered, harmless.len() as u64),
            percent(hook_allowed, n),
            count(0, |e| e.marker),
            count(1, |e| e.marker),
            count(0, |e| e.out),
            count(1, |e| e.out),
            failures.len(),
            n as f64 / secs,
            self.elapsed.as_secs_f64(),
            self.config.threads,
            self.sh_is,
            self.engine.len(),
            self.engine_failures().len(),
            self.engine_elapsed.as_secs_f64(),
            self.sandbox,
        )
    }

    /// A table of the classes: lines, covered, lines with an effect, failures, and the
    /// engine sample's lines and failures.
    pub fn class_table(&self) -> String {
        let mut s = String::from(
            "class                 lines covered effects failures engine engine_failures\n",
        );
        for (class, c) in self.by_class() {
            let _ = writeln!(
                s,
                "{:<21} {:>5} {:>7} {:>7} {:>8} {:>6} {:>15}",
                class.name(),
                c.lines,
                c.covered,
                c.effects,
                c.failures,
                c.engine_lines,
                c.engine_failures
            );
        }
        s
    }

    /// Every failure, one per line (the corpus's, then the engine sample's).
    pub fn failure_list(&self) -> String {
        let mut s = String::new();
        for r in self.failures() {
            s.push_str(&r.describe());
            s.push('\n');
        }
        for r in self.engine_failures() {
            s.push_str(&r.describe());
            s.push('\n');
        }
        s
    }

    /// Lines the oracle learnt little from or that show the analysis is stricter than
    /// it needs to be: runs past their time limit, harmless lines the allow list does
    /// not cover.
    pub fn notes(&self) -> String {
        let mut s = String::new();
        for r in &self.results {
            for (sh, e) in SHELLS.iter().zip(&r.effects) {
                if e.timed_out {
                    let _ = writeln!(
                        s,
                        "timeout in {sh}: index={} line={:?}",
                        r.index,
                        r.template.readable()
                    );
                }
            }
            if r.template.class == Class::Harmless && !r.let_through.tool {
                let _ = writeln!(
                    s,
                    "harmless but asks: index={} line={:?}",
                    r.index,
                    r.template.readable()
                );
            }
        }
        s
    }
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".into();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

// ---------------------------------------------------------------------------------
// The workspace and the runs.

/// The temporary folder of a run: the workspace template and the run folders.
pub struct Lab {
    tmp: tempfile::TempDir,
    template: PathBuf,
}

fn run_ok(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn mkdir(path: &Path) {
    std::fs::create_dir_all(path).unwrap_or_else(|e| panic!("make {}: {e}", path.display()));
}

impl Default for Lab {
    fn default() -> Self {
        Self::new()
    }
}

impl Lab {
    /// A temporary folder with the workspace template: `a.txt`, `b.txt`, `c.txt`,
    /// `src/main.rs`, `big.txt` (500 lines: enough for `sort -S 1K` to spill to
    /// compressed temporary files), `a.tar`, a git repository with two commits, an
    /// uncommitted change to `a.txt` (so `git diff` has a diff) and no hooks, and the
    /// symlink `link -> ../out`.
    pub fn new() -> Lab {
        let tmp = executable_tempdir();
        let template = tmp.path().join("template");
        mkdir(&template.join("src"));
        write(&template.join("a.txt"), "hello\nworld\n");
        write(&template.join("b.txt"), "b\nx\na\n");
        write(&template.join("c.txt"), "c\n");
        write(
            &template.join("src/main.rs"),
            "fn main() {\n    println!(\"hi\");\n}\n",
        );
        let big: String = (0..500)
            .map(|i| format!("{}\n", (i * 7919) % 1000))
            .collect();
        write(&template.join("big.txt"), &big);
        let git = |args: &[&str]| {
            let mut c = Command::new("git");
            c.args(args)
                .current_dir(&template)
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("HOME", tmp.path())
                .env("GIT_CONFIG_NOSYSTEM", "1");
            run_ok(&mut c);
        };
        run_ok(
            Command::new("tar")
                .args(["-cf", "a.tar", "a.txt"])
                .current_dir(&template),
        );
        git(&["init", "-q", "--template=", "-b", "main"]);
        mkdir(&template.join(".git/hooks"));
        git(&["config", "user.name", "oracle"]);
        git(&["config", "user.email", "oracle@example.invalid"]);
        git(&["add", "a.txt", "b.txt", "src/main.rs"]);
        git(&["commit", "-q", "-m", "one"]);
        write(&template.join("c.txt"), "c\nc\n");
        git(&["add", "c.txt"]);
        git(&["commit", "-q", "-m", "two"]);
        // One pack instead of a file per object: each run copies the workspace afresh.
        git(&["gc", "-q"]);
        write(&template.join("a.txt"), "hello\nworld\nchanged\n");
        symlink("../out", template.join("link"))
            .unwrap_or_else(|e| panic!("make the symlink link: {e}"));
        Lab { tmp, template }
    }

    /// The run folder `name`, with its marker.
    pub fn slot(&self, name: &str) -> Slot {
        Slot::new(&self.tmp.path().join(name))
    }

    pub fn path(&self) -> &Path {
        self.tmp.path()
    }
}

/// A temporary folder on a RAM disk (`/dev/shm`) where one is and files in it may be
/// run, else in the system's temporary folder: every line copies a workspace afresh
/// twice, and on a busy disk a copy took 120 ms against 5 ms in memory.
fn executable_tempdir() -> tempfile::TempDir {
    let in_shm = tempfile::Builder::new()
        .prefix("cairn-oracle-")
        .tempdir_in("/dev/shm")
        .ok()
        .filter(|d| {
            let probe = d.path().join("probe");
            std::fs::write(&probe, "#!/bin/sh\nexit 0\n").is_ok()
                && std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o755)).is_ok()
                && Command::new(&probe).status().is_ok_and(|s| s.success())
        });
    match in_shm {
        Some(d) => d,
        None => tempfile::Builder::new()
            .prefix("cairn-oracle-")
            .tempdir()
            .unwrap_or_else(|e| panic!("make a temporary directory: {e}")),
    }
}

/// Copies `from`'s entries into the folder `to` (made), symlinks as symlinks, modes
/// kept.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_symlink() {
            symlink(std::fs::read_link(entry.path())?, &target)?;
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Removes everything in the folder `dir`, not the folder itself.
fn empty_folder(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// One run folder: `ws/`, `out/`, `home/`, `tmp/`, `bin/cairnmark` (which appends a
/// line to `mark/mark.log`).
pub struct Slot {
    pub dir: PathBuf,
    pub ws: PathBuf,
    pub out: PathBuf,
    pub home: PathBuf,
    pub tmp: PathBuf,
    pub bin: PathBuf,
    pub mark_dir: PathBuf,
    pub marker: PathBuf,
}

impl Slot {
    fn new(dir: &Path) -> Slot {
        let s = Slot {
            dir: dir.to_path_buf(),
            ws: dir.join("ws"),
            out: dir.join("out"),
            home: dir.join("home"),
            tmp: dir.join("tmp"),
            bin: dir.join("bin"),
            mark_dir: dir.join("mark"),
            marker: dir.join("bin").join(MARKER),
        };
        for d in [&s.ws, &s.out, &s.home, &s.tmp, &s.bin, &s.mark_dir] {
            mkdir(d);
        }
        write(
            &s.marker,
            &format!(
                "#!/bin/sh\nprintf '%s\\n' \"ran $0 $*\" >> '{}'\n",
                s.mark_dir.join("mark.log").display()
            ),
        );
        std::fs::set_permissions(&s.marker, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("chmod {}: {e}", s.marker.display()));
        s
    }

    /// The marker's and `out/`'s paths for [`Template::render`]; `on_path` says whether
    /// the marker is found by its name.
    pub fn places(&self, on_path: bool) -> (String, String, String) {
        let path = self.marker.to_string_lossy().into_owned();
        let name = if on_path {
            MARKER.to_string()
        } else {
            path.clone()
        };
        (name, path, self.out.to_string_lossy().into_owned())
    }

    /// A fresh workspace, empty `out/`, `home/`, `tmp/` and no marker log.
    pub fn reset(&self, template: &Path) {
        let fresh = || -> std::io::Result<()> {
            for d in [&self.ws, &self.out, &self.home, &self.tmp, &self.mark_dir] {
                empty_folder(d)?;
            }
            copy_tree(template, &self.ws)
        };
        fresh().unwrap_or_else(|e| panic!("reset {}: {e}", self.dir.display()));
    }

    /// What the last run did to the marker log and `out/`.
    pub fn effect(&self) -> Effect {
        let marker = std::fs::metadata(self.mark_dir.join("mark.log")).is_ok_and(|m| m.len() > 0);
        let out = std::fs::read_dir(&self.out).is_ok_and(|mut d| d.next().is_some());
        Effect {
            marker,
            out,
            timed_out: false,
        }
    }

    /// Runs `shell -c line` in a fresh workspace: cwd `ws/`, `PATH` the marker's folder
    /// then `/usr/bin:/bin`, `HOME` and `TMPDIR` in the run folder, stdin `/dev/null`,
    /// in a process group of its own, killed at `timeout` or once the shell is done
    /// (background children included: the group is killed before the next reset).
    pub fn run(&self, template: &Path, shell: &str, line: &str, timeout: Duration) -> Effect {
        self.reset(template);
        let (reader, writer) =
            std::io::pipe().unwrap_or_else(|e| panic!("make a pipe for {shell}: {e}"));
        let writer2 = writer
            .try_clone()
            .unwrap_or_else(|e| panic!("clone a pipe for {shell}: {e}"));
        let mut cmd = Command::new(shell);
        cmd.arg("-c")
            .arg(line)
            .current_dir(&self.ws)
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", self.bin.to_string_lossy()),
            )
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(writer2)
            .process_group(0);
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {shell}: {e}"));
        drop(cmd);
        let pgid = rustix::process::Pid::from_child(&child);
        let deadline = Instant::now() + timeout;
        let timed_out = !drain_until_closed(reader, deadline);
        // The shell and every child that kept the pipe are done (or time is up); wait
        // for the shell itself, then kill whatever is left of its group.
        let mut timed_out_wait = false;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline && !timed_out => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Ok(None) => {
                    timed_out_wait = true;
                    kill_group(pgid);
                    child
                        .wait()
                        .unwrap_or_else(|e| panic!("wait for {shell}: {e}"));
                    break;
                }
                Err(e) => panic!("wait for {shell}: {e}"),
            }
        }
        kill_group(pgid);
        let mut effect = self.effect();
        effect.timed_out = timed_out || timed_out_wait;
        effect
    }
}

/// Kills what is left of the process group `pgid` (nothing, usually).
fn kill_group(pgid: rustix::process::Pid) {
    match rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => panic!("kill the process group {pgid:?}: {e}"),
    }
}

/// Reads `reader` until every writer closed it (true) or `deadline` passed (false).
fn drain_until_closed(mut reader: std::io::PipeReader, deadline: Instant) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut buf = [0u8; 8192];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let ts = Timespec {
            tv_sec: left.as_secs() as _,
            tv_nsec: left.subsec_nanos() as _,
        };
        let mut fds = [PollFd::new(&reader, PollFlags::IN)];
        match poll(&mut fds, Some(&ts)) {
            Ok(0) => return false,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => panic!("poll a shell's output: {e}"),
        }
        match reader.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("read a shell's output: {e}"),
        }
    }
}

// ---------------------------------------------------------------------------------
// cairn's side.

/// cairn's two ways of deciding a `Bash`/`shell` call, with a session's allow list.
pub struct Judge {
    state: State,
    registry: Registry,
    guards: Vec<Guard>,
    credentials: CredentialFiles,
    hook_credentials: DefaultCredentials,
}

impl Judge {
    pub fn new(state: State) -> Judge {
        let config = EngineConfig::new(Catalog::Thoth);
        let credentials = CredentialFiles::new(&config.credential_files)
            .unwrap_or_else(|e| panic!("the default credential patterns: {e}"));
        Judge {
            state,
            registry: Registry::new(Catalog::Thoth),
            guards: config.guards(),
            credentials,
            hook_credentials: DefaultCredentials::default(),
        }
    }

    /// Whether the `shell` tool and the hook would run `line` (in workspace `root`)
    /// without asking.
    pub fn let_through(&self, line: &str, root: &Path) -> LetThrough {
        let input = json!({ "command": line });
        let Some(shell) = self.registry.get("shell") else {
            panic!("the thoth catalogue has no shell tool");
        };
        let need = shell.permission(
            &input,
            &cairn_tools::Asking {
                root,
                credential_files: &self.credentials,
                links: cairn_tools::links::Links::Disk,
            },
        );
        let tool = matches!(
            decide::permission(&self.state, need, &self.guards),
            Permission::AllowList(_) | Permission::Auto
        );
        let real_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        let home = real_root.with_file_name("home");
        let at = hook::At {
            root: &real_root,
            cwd: &real_root,
            home: &home,
            exec_path: Some(std::ffi::OsStr::new("/usr/bin:/bin")),
        };
        let hook = match hook::need("Bash", &input, &at, &self.hook_credentials) {
            Ok(Some(need)) => matches!(
                hook::verdict(&self.state, need, &self.guards, Unlisted::Ask).1,
                Verdict::Allow { .. }
            ),
            Ok(None) | Err(_) => false,
        };
        LetThrough { tool, hook }
    }
}

/// Answers every question with the current answer, keeping each request.
struct Answering {
    answer: Arc<Mutex<Answer>>,
    asked: Arc<Mutex<Vec<Request>>>,
}

impl Approver for Answering {
    fn answer(&mut self, r: &Request) -> (Answer, bool) {
        let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        asked.push(r.clone());
        (*self.answer.lock().unwrap_or_else(|e| e.into_inner()), true)
    }
}

/// A line that runs only `program` (and other granted programs): answered "always",
/// it grants `shell:<program>`.
fn grant_line(program: &str) -> String {
    match program {
        "echo" => "echo ok".into(),
        "cat" => "cat a.txt".into(),
        "printf" => "printf x".into(),
        "git" => "git status --short".into(),
        "sed" => "sed -n 1p a.txt".into(),
        "tar" => "tar -tf a.tar".into(),
        "sort" => "sort a.txt".into(),
        "cp" => "cp a.txt g.txt".into(),
        "mv" => "mv c.txt c2.txt".into(),
        "tee" => "tee t.txt < a.txt".into(),
        "ln" => "ln -s a.txt l.txt".into(),
        "find" => "find . -maxdepth 0".into(),
        "xargs" => "echo a.txt | xargs cat".into(),
        "awk" => "awk 'NR==1' a.txt".into(),
        "grep" => "grep -c h a.txt".into(),
        "ls" => "ls".into(),
        "head" => "head -n 1 a.txt".into(),
        "tail" => "tail -n 1 a.txt".into(),
        "wc" => "wc -l a.txt".into(),
        "env" => "env".into(),
        "true" => "true".into(),
        "test" => "test -f a.txt".into(),
        "[" => "[ -f a.txt ]".into(),
        "dd" => "dd if=a.txt of=d.txt status=none".into(),
        "touch" => "touch t2.txt".into(),
        "mkdir" => "mkdir d2".into(),
        other => format!("{other} --version"),
    }
}

/// A real engine session (thoth catalogue, default sandbox) whose allow list holds
/// every granted program, granted by "always" answers to real calls.
pub struct EngineRun {
    engine: Engine,
    /// The run folder, on a disk: the sandbox lets commands write anywhere in
    /// `/dev/shm` (where the lab is), so an `out/` there would prove nothing.
    _disk: tempfile::TempDir,
    slot: Slot,
    template: PathBuf,
    /// The last line ran (or left a trace): the workspace needs a reset.
    dirty: bool,
    answer: Arc<Mutex<Answer>>,
    asked: Arc<Mutex<Vec<Request>>>,
}

impl EngineRun {
    /// Starts the session in a run folder of its own (in the system's temporary
    /// folder, not on `/dev/shm`) and grants every program of [`bashgen::GRANTED`];
    /// panics, naming them, when some could not be granted.
    pub fn start(lab: &Lab) -> EngineRun {
        let disk = tempfile::Builder::new()
            .prefix("cairn-oracle-engine-")
            .tempdir()
            .unwrap_or_else(|e| panic!("make a temporary directory: {e}"));
        let slot = Slot::new(&disk.path().join("engine"));
        slot.reset(&lab.template);
        let mut config = EngineConfig::new(Catalog::Thoth);
        config.durability = Durability::None;
        // The marker writes its log here; the sandbox lets commands write only in the
        // workspace, the session's temporary folder and these roots.
        config.sandbox_write_roots = vec![slot.mark_dir.clone()];
        let mut engine = Engine::start(&Home::at(&lab.path().join("cairn-home")), &slot.ws, config)
            .unwrap_or_else(|e| panic!("start an engine: {e}"));
        let answer = Arc::new(Mutex::new(Answer::Always));
        let asked = Arc::new(Mutex::new(Vec::new()));
        engine.set_approver(Box::new(Answering {
            answer: answer.clone(),
            asked: asked.clone(),
        }));
        for program in bashgen::GRANTED {
            let line = grant_line(program);
            engine
                .call("shell", json!({ "command": line, "timeout_secs": 10 }))
                .unwrap_or_else(|e| panic!("grant {program} with {line:?}: {e}"));
        }
        let missing: Vec<String> = bashgen::GRANTED
            .iter()
            .map(|p| format!("shell:{p}"))
            .filter(|k| !engine.state().allow.contains_key(k))
            .collect();
        assert!(
            missing.is_empty(),
            "the grant lines did not grant {missing:?}; questions asked: {:#?}",
            asked.lock().unwrap_or_else(|e| e.into_inner())
        );
        *answer.lock().unwrap_or_else(|e| e.into_inner()) = Answer::Deny;
        EngineRun {
            engine,
            _disk: disk,
            slot,
            template: lab.template.clone(),
            dirty: true,
            answer,
            asked,
        }
    }

    /// The session's sandbox: mode, Landlock ABI, enforcement.
    pub fn sandbox(&self) -> String {
        let s = self.engine.sandbox();
        format!("{} abi {} {}", s.mode.as_str(), s.abi, s.enforced.as_str())
    }

    /// The session's folded state: its allow list holds every granted program.
    pub fn state(&self) -> &State {
        self.engine.state()
    }

    /// Runs `template` as a `shell` call (the marker by its absolute path: the engine's
    /// commands get the engine's own `PATH`) in a fresh workspace, every question
    /// denied. The workspace is copied afresh only after a line that ran: a denied one
    /// changed nothing (and if it did, its trace makes it a failure and the next line
    /// gets a fresh copy all the same).
    pub fn run(&mut self, template: &Template) -> EngineResult {
        if self.dirty {
            empty_folder(&self.slot.ws)
                .and_then(|()| copy_tree(&self.template, &self.slot.ws))
                .and_then(|()| empty_folder(&self.slot.out))
                .and_then(|()| empty_folder(&self.slot.mark_dir))
                .unwrap_or_else(|e| panic!("reset the engine's workspace: {e}"));
        }
        let (_, path, out) = self.slot.places(false);
        let line = template.render(&Places {
            mark_name: &path,
            mark_path: &path,
            out_dir: &out,
        });
        let before = self.asked.lock().unwrap_or_else(|e| e.into_inner()).len();
        self.engine
            .call("shell", json!({ "command": line, "timeout_secs": 5 }))
            .unwrap_or_else(|e| panic!("engine call {line:?}: {e}"));
        let asked = self.asked.lock().unwrap_or_else(|e| e.into_inner()).len() > before;
        let effect = self.slot.effect();
        self.dirty = !asked || effect.any();
        EngineResult {
            template: template.clone(),
            asked,
            effect,
        }
    }

    /// Ends the session.
    pub fn end(self) {
        debug_assert_eq!(
            *self.answer.lock().unwrap_or_else(|e| e.into_inner()),
            Answer::Deny
        );
        self.engine
            .end("oracle done")
            .unwrap_or_else(|e| panic!("end the engine session: {e}"));
    }
}

/// What `/bin/sh` is on this machine.
fn sh_is() -> String {
    std::fs::canonicalize("/bin/sh")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs the corpus of `config`: the engine session and its grants, every line in bash
/// and sh on `config.threads` workers, then the engine sample.
pub fn run(config: &Config) -> Report {
    let lab = Lab::new();
    let mut engine = EngineRun::start(&lab);
    let state = engine.state().clone();
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<LineResult>> = Mutex::new(Vec::with_capacity(config.lines as usize));
    let timeout = Duration::from_millis(config.line_timeout_ms);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for worker in 0..config.threads.max(1) {
            let (lab, next, results, state) = (&lab, &next, &results, state.clone());
            scope.spawn(move || {
                let judge = Judge::new(state);
                let slot = lab.slot(&format!("w{worker}"));
                let (name, path, out) = slot.places(true);
                let places = Places {
                    mark_name: &name,
                    mark_path: &path,
                    out_dir: &out,
                };
                let mut mine = Vec::new();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= config.lines {
                        break;
                    }
                    if config.progress_lines > 0 && index > 0 && index % config.progress_lines == 0
                    {
                        eprintln!(
                            "oracle: {index} lines in {:.0} s",
                            started.elapsed().as_secs_f64()
                        );
                    }
                    let template = bashgen::line(config.seed, index);
                    let line = template.render(&places);
                    let let_through = judge.let_through(&line, &slot.ws);
                    let effects = SHELLS
                        .iter()
                        .map(|sh| slot.run(&lab.template, sh, &line, timeout))
                        .collect();
                    mine.push(LineResult {
                        index,
                        template,
                        line,
                        let_through,
                        effects,
                    });
                }
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(mine);
            });
        }
    });
    let elapsed = started.elapsed();
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|r| r.index);

    let engine_started = Instant::now();
    let mut engine_results = Vec::new();
    let classes = Class::ALL.len() as u64;
    // The engine's lines come from further along the same corpus, so they are new ones.
    let first = config.lines.div_ceil(classes) * classes;
    for k in 0..config.engine_lines_per_class * classes {
        let template = bashgen::line(config.seed, first + k);
        engine_results.push(engine.run(&template));
    }
    let engine_elapsed = engine_started.elapsed();
    let sandbox = engine.sandbox();
    engine.end();
    Report {
        config: config.clone(),
        results,
        engine: engine_results,
        elapsed,
        engine_elapsed,
        sh_is: sh_is(),
        sandbox,
    }
}

/// The classes whose lines a report saw.
pub fn classes_seen(report: &Report) -> BTreeSet<Class> {
    report.results.iter().map(|r| r.template.class).collect()
}
