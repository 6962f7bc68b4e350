//! Running a program as a child and measuring it: wall time, CPU time and peak resident
//! memory (`ru_maxrss` from `wait4`, which is the child's VmHWM when it exits).

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// What one run of a child cost.
#[derive(Debug, Clone)]
pub struct Run {
    pub wall: Duration,
    /// User + system CPU time.
    pub cpu: Duration,
    /// Peak resident set size in bytes.
    pub max_rss_bytes: u64,
    /// Exit code, or `None` when killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// How many cores the child kept busy on average.
    pub fn cores(&self) -> f64 {
        self.cpu.as_secs_f64() / self.wall.as_secs_f64().max(1e-9)
    }
}

/// Runs `cmd` to its end with its output sent to files in `scratch`, and measures it.
///
/// The command is started by a fresh `cairn-bench __measure` launcher rather than by
/// this process: Linux carries the high-water mark of the address space a process
/// replaces at `exec` into its `ru_maxrss`, and a child spawned from here would start
/// from this process's peak (`vfork`/`posix_spawn` share our address space, `fork`
/// copies its counters). From the small launcher, the floor is the launcher's own few
/// megabytes, which [`floor`] measures.
pub fn run(cmd: Command, scratch: &Path) -> Result<Run> {
    let out_path = scratch.join("child.stdout");
    let err_path = scratch.join("child.stderr");
    let exe = std::env::current_exe().context("finding this binary")?;
    let out = Command::new(exe)
        .arg("__measure")
        .arg(&out_path)
        .arg(&err_path)
        .arg("--")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .stdin(Stdio::null())
        .output()
        .context("starting cairn-bench __measure")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "cairn-bench __measure failed ({}): {}{}",
            out.status,
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let m = Measured::parse(&text)
        .with_context(|| format!("cairn-bench __measure printed {:?}", text.trim()))?;
    Ok(Run {
        wall: m.wall,
        cpu: m.cpu,
        max_rss_bytes: m.max_rss_bytes,
        code: m.code,
        stdout: read_text(&out_path)?,
        stderr: read_text(&err_path)?,
    })
}

/// Peak memory of a child that does nothing (`true`) started the way [`run`] starts one:
/// the floor under every memory figure.
pub fn floor(scratch: &Path) -> Result<u64> {
    Ok(run(Command::new("true"), scratch)?.max_rss_bytes)
}

/// What `__measure` prints: one line `wall_secs cpu_secs max_rss_bytes code`, where
/// code is -1 for a child killed by a signal.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub wall: Duration,
    pub cpu: Duration,
    pub max_rss_bytes: u64,
    pub code: Option<i32>,
}

impl Measured {
    pub fn line(run: &Run) -> String {
        format!(
            "{:.9} {:.9} {} {}",
            run.wall.as_secs_f64(),
            run.cpu.as_secs_f64(),
            run.max_rss_bytes,
            run.code.unwrap_or(-1)
        )
    }

    fn parse(text: &str) -> Option<Measured> {
        let mut f = text.split_whitespace();
        let wall = Duration::from_secs_f64(f.next()?.parse().ok()?);
        let cpu = Duration::from_secs_f64(f.next()?.parse().ok()?);
        let max_rss_bytes = f.next()?.parse().ok()?;
        let code: i32 = f.next()?.parse().ok()?;
        Some(Measured {
            wall,
            cpu,
            max_rss_bytes,
            code: (code >= 0).then_some(code),
        })
    }
}

/// Runs `cmd` as a direct child with its output sent to the two files, and measures it
/// with `wait4` (what `__measure` does).
pub fn run_direct(mut cmd: Command, out_path: &Path, err_path: &Path) -> Result<Run> {
    let out = File::create(out_path).with_context(|| out_path.display().to_string())?;
    let err = File::create(err_path).with_context(|| err_path.display().to_string())?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err));
    let started = Instant::now();
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    let pid = libc::pid_t::try_from(child.id()).context("pid out of range")?;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own child, not yet reaped (`Child::wait` is never called on
        // it, and dropping a `Child` does not reap); both out-pointers are valid.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            bail!("wait4({pid}): {e}");
        }
    }
    let wall = started.elapsed();
    drop(child);
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    let code = if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else {
        None
    };
    Ok(Run {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        // Linux reports ru_maxrss in KiB.
        max_rss_bytes: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
        code,
        stdout: read_text(out_path)?,
        stderr: read_text(err_path)?,
    })
}

fn read_text(path: &Path) -> Result<String> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .with_context(|| path.display().to_string())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Runs a short command and returns its trimmed stdout, or `None` if it cannot run.
pub fn capture(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_exit_code_output_and_memory_of_a_child() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo hi; echo oops >&2; exit 3"]);
        let (out, err) = (dir.path().join("out"), dir.path().join("err"));
        let run = run_direct(cmd, &out, &err).unwrap();
        assert_eq!(
            (run.code, run.stdout.as_str(), run.stderr.as_str()),
            (Some(3), "hi\n", "oops\n")
        );
        assert!(run.max_rss_bytes > 0);
        let line = Measured::line(&run);
        let back = Measured::parse(&line).unwrap();
        assert_eq!(
            (back.code, back.max_rss_bytes),
            (Some(3), run.max_rss_bytes)
        );
    }
}
