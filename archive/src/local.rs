//! A local archive for trying it: a PostgreSQL cluster in a folder (`initdb`, then
//! `pg_ctl start` on 127.0.0.1 with trust authentication for the user `cairn`), and a
//! database `cairn` in it. Started again, it finds the cluster and its port. The
//! server refuses to run as root, so as root its programs run as `nobody` (through
//! `runuser`) in a folder handed to that user.
//!
//! The server's programs are found through `$CAIRN_PG_BIN` (a directory), then `initdb`
//! on the `PATH`, then the newest `/usr/lib/postgresql/<version>/bin` (Debian's layout).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{ArchiveError, io_at};

/// The user id the server runs as when cairn runs as root (`nobody`).
const NOBODY_UID: u32 = 65534;

/// A running local cluster.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Local {
    pub dir: PathBuf,
    pub port: u16,
    pub url: String,
    /// False when it was running already.
    pub started: bool,
}

fn local_err(what: String) -> ArchiveError {
    ArchiveError::Local(what)
}

fn as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The directory holding `initdb`, `pg_ctl` and `createdb`.
pub fn bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CAIRN_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let initdb = dir.join("initdb");
            if initdb.is_file() {
                let real = std::fs::canonicalize(&initdb).unwrap_or(initdb);
                return real.parent().map(Path::to_path_buf);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// `program` from `bin`, run as `nobody` when this process is root (the server refuses
/// to run as root).
pub fn command(bin: &Path, program: &str) -> Command {
    let exe = bin.join(program);
    if as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "nobody", "--"]).arg(exe);
        c.current_dir("/");
        c
    } else {
        Command::new(exe)
    }
}

fn run(c: &mut Command, what: &str) -> Result<String, ArchiveError> {
    let out = c
        .output()
        .map_err(|e| local_err(format!("cannot run {what}: {e}")))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(local_err(format!(
            "{what} failed ({}): {}",
            out.status,
            text.trim()
        )))
    }
}

fn path_str(p: &Path) -> Result<&str, ArchiveError> {
    p.to_str()
        .ok_or_else(|| local_err(format!("{}: not UTF-8", p.display())))
}

/// Starts (creating it the first time) the cluster in `dir`, on `port` or a free one,
/// and returns its URL.
pub fn start(dir: &Path, port: Option<u16>) -> Result<Local, ArchiveError> {
    let bin = bin_dir().ok_or_else(|| {
        local_err(
            "PostgreSQL's server programs were not found: install them (apt-get install postgresql) or set CAIRN_PG_BIN to the folder holding initdb and pg_ctl".into(),
        )
    })?;
    cairn_store::private::create_dir_all(dir).map_err(io_at(dir))?;
    let dir = dir.canonicalize().map_err(io_at(dir))?;
    if as_root() {
        hand_to_nobody(&dir)?;
    }
    let data = dir.join("data");
    let port_file = dir.join("port");
    if !data.join("PG_VERSION").is_file() {
        run(
            command(&bin, "initdb").args([
                "-D",
                path_str(&data)?,
                "-U",
                "cairn",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-locale",
            ]),
            "initdb",
        )?;
    }
    let port = chosen_port(port, &port_file)?;
    let running = command(&bin, "pg_ctl")
        .args(["-D", path_str(&data)?, "status"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !running {
        start_server(&bin, &dir, &data, port)?;
    }
    let port_text = port.to_string();
    if let Err(e) = run(
        command(&bin, "createdb").args([
            "-h",
            "127.0.0.1",
            "-p",
            &port_text,
            "-U",
            "cairn",
            "cairn",
        ]),
        "createdb",
    ) && !e.to_string().contains("already exists")
    {
        return Err(e);
    }
    Ok(Local {
        url: format!("postgres://cairn@127.0.0.1:{port}/cairn"),
        dir,
        port,
        started: !running,
    })
}

/// Gives the cluster's folder to nobody, whom the server runs as when cairn runs as
/// root (the server refuses root); nobody must reach it through its parents.
fn hand_to_nobody(dir: &Path) -> Result<(), ArchiveError> {
    std::os::unix::fs::chown(dir, Some(NOBODY_UID), Some(NOBODY_UID)).map_err(io_at(dir))?;
    // nobody must reach the folder through its parents.
    let probe = Command::new("runuser")
        .args(["-u", "nobody", "--", "test", "-w"])
        .arg(dir)
        .status()
        .map_err(|e| local_err(format!("cannot run runuser: {e}")))?;
    if !probe.success() {
        return Err(local_err(format!(
            "{}: the server runs as nobody (it refuses root), who cannot reach this folder; choose one under /tmp or /var/tmp",
            dir.display()
        )));
    }
    Ok(())
}

/// The port asked for, else the one the cluster was started on before, else a free one.
fn chosen_port(port: Option<u16>, port_file: &Path) -> Result<u16, ArchiveError> {
    Ok(match (port, std::fs::read_to_string(port_file)) {
        (Some(p), _) => p,
        (None, Ok(text)) => text
            .trim()
            .parse()
            .map_err(|_| local_err(format!("{}: not a port number", port_file.display())))?,
        (None, Err(_)) => std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| local_err(format!("cannot find a free port: {e}")))?
            .port(),
    })
}

/// Starts the server on `port`, its log in `server.log`, and notes the port.
fn start_server(bin: &Path, dir: &Path, data: &Path, port: u16) -> Result<(), ArchiveError> {
    let opts = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1",
        path_str(dir)?
    );
    let log = dir.join("server.log");
    run(
        command(bin, "pg_ctl").args([
            "-D",
            path_str(data)?,
            "-l",
            path_str(&log)?,
            "-o",
            &opts,
            "-w",
            "-t",
            "30",
            "start",
        ]),
        "pg_ctl start",
    )
    .map_err(|e| {
        local_err(format!(
            "{e}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        ))
    })?;
    let port_file = dir.join("port");
    std::fs::write(&port_file, format!("{port}\n")).map_err(io_at(&port_file))?;
    Ok(())
}

/// Stops the cluster in `dir` (fast shutdown: sessions are disconnected, data kept).
pub fn stop(dir: &Path) -> Result<(), ArchiveError> {
    let bin =
        bin_dir().ok_or_else(|| local_err("PostgreSQL's server programs were not found".into()))?;
    let data = dir.join("data");
    run(
        command(&bin, "pg_ctl").args(["-D", path_str(&data)?, "-m", "fast", "-w", "stop"]),
        "pg_ctl stop",
    )?;
    Ok(())
}
