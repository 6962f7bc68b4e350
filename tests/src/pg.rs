//! A throw-away PostgreSQL cluster for tests: `initdb` into a temporary directory,
//! `pg_ctl start` on a free loopback port with trust authentication, `pg_ctl stop` when
//! dropped. The server refuses to run as root, so as root both commands run as `nobody`
//! (through `runuser`), in a directory handed to that user.
//!
//! The server's programs are found, and run, as `cairn archive local` does
//! ([`cairn_archive::local::bin_dir`], [`cairn_archive::local::command`]).

// A test helper: a failure to set the cluster up is the test's failure, said by `expect`.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use cairn_archive::local::bin_dir;
use cairn_archive::local::command;

/// A running cluster; stopped (immediately, it holds nothing worth keeping) and deleted
/// when dropped.
pub struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
}

impl Cluster {
    /// Starts a cluster, or panics saying what to install. A port taken between choosing
    /// it and the server binding it is retried with another.
    pub fn start() -> Cluster {
        let bin = bin_dir().unwrap_or_else(|| {
            panic!(
                "PostgreSQL's server programs were not found: install them \
                 (`apt-get install postgresql`) or set CAIRN_PG_BIN to the directory \
                 holding initdb and pg_ctl"
            )
        });
        let dir = tempfile::Builder::new()
            .prefix("cairn-pg-")
            .tempdir()
            .expect("temporary directory for the cluster");
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534))
                .expect("hand the cluster directory to nobody");
        }
        let data = dir.path().join("data");
        run(
            &bin,
            "initdb",
            &[
                "-D",
                path_str(&data),
                "-U",
                "cairn",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
        );
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let opts = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off \
                 -c synchronous_commit=off -c full_page_writes=off",
                dir.path().display()
            );
            let log = dir.path().join("server.log");
            let out = command(&bin, "pg_ctl")
                .args(["-D", path_str(&data), "-l", path_str(&log), "-o", &opts])
                .args(["-w", "-t", "30", "start"])
                .output()
                .expect("run pg_ctl");
            if out.status.success() {
                return Cluster { dir, bin, port };
            }
            last = format!(
                "{}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("pg_ctl start failed five times; last output:\n{last}");
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection URL for database `db` as the superuser `cairn` (no password).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://cairn@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates database `name` and returns its URL.
    pub fn create_db(&self, name: &str) -> String {
        let port = self.port.to_string();
        let out = command(&self.bin, "createdb")
            .args(["-h", "127.0.0.1", "-p", &port, "-U", "cairn", name])
            .output()
            .expect("run createdb");
        assert!(
            out.status.success(),
            "createdb {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url(name)
    }

    /// The server's own log, for a failing test to print.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = command(&self.bin, "pg_ctl")
            .args(["-D", path_str(&data), "-m", "immediate", "-w", "stop"])
            .output();
    }
}

fn run(bin: &Path, program: &str, args: &[&str]) {
    let out = command(bin, program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

/// A port free on 127.0.0.1 at the time of asking.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}
