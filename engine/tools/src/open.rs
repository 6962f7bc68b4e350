//! Opening a file to read its content: a regular file, never a FIFO, a socket or a
//! device.
//!
//! Opening a FIFO for reading waits for a writer, forever if none comes; reading a
//! character device such as `/dev/zero` never ends and fills memory. Every place that
//! reads a workspace file's content (the read and search tools, the write tools' look
//! at the file before a write, the manifest's hashing, resume's reconciliation) opens
//! it with [`open_regular`]: non-blocking (`O_NONBLOCK`, so that opening a FIFO
//! returns at once; `O_NOCTTY`, so that a terminal never becomes this process's), then
//! `fstat` on the descriptor, and anything that is not a regular file is refused
//! before a byte is read. The check is on what was opened, so a file swapped for a
//! FIFO between a directory listing and the open is refused too.

use std::fs::{File, Metadata};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// What a path that is not a regular file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Directory,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    /// Anything else (a symlink seen without following it).
    Other,
}

impl Kind {
    /// The kind of a file that is not regular; `None` for a regular file.
    pub fn of(meta: &Metadata) -> Option<Kind> {
        let t = meta.file_type();
        Some(if t.is_file() {
            return None;
        } else if t.is_dir() {
            Kind::Directory
        } else if t.is_fifo() {
            Kind::Fifo
        } else if t.is_socket() {
            Kind::Socket
        } else if t.is_char_device() {
            Kind::CharDevice
        } else if t.is_block_device() {
            Kind::BlockDevice
        } else {
            Kind::Other
        })
    }

    /// What it is, after "is": `a FIFO (named pipe)`.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Directory => "a directory",
            Kind::Fifo => "a FIFO (named pipe)",
            Kind::Socket => "a socket",
            Kind::CharDevice => "a character device",
            Kind::BlockDevice => "a block device",
            Kind::Other => "not a regular file",
        }
    }

    /// The answer for a read of `shown` (the path as the model named it).
    pub fn refusal(self, shown: &str) -> String {
        format!(
            "{shown} is {}; cairn reads regular files only",
            self.describe()
        )
    }
}

/// Why [`open_regular`] gave no file.
#[derive(Debug)]
pub enum OpenError {
    /// The open or the `fstat` failed (the file does not exist, permission denied…).
    Io(std::io::Error),
    /// It opened, and is not a regular file: nothing was read.
    NotRegular(Kind),
    /// Resolved beneath the workspace root ([`crate::paths::Root`]), it leads outside
    /// or into the cairn home (a symlink, maybe swapped in since the path was checked):
    /// nothing was opened. The text says where.
    Outside(String),
}

/// Opens `path` (symlinks followed) for reading if it is a regular file, with its
/// metadata from the open descriptor; never blocks on a FIFO or a device.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), OpenError> {
    let file = match File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        // A socket cannot be opened (ENXIO): say what it is rather than how it failed.
        Err(e) => {
            return Err(
                match std::fs::metadata(path).ok().as_ref().and_then(Kind::of) {
                    Some(kind) => OpenError::NotRegular(kind),
                    None => OpenError::Io(e),
                },
            );
        }
    };
    let meta = file.metadata().map_err(OpenError::Io)?;
    match Kind::of(&meta) {
        // O_NONBLOCK changes nothing for a regular file's reads: a read waits for the
        // disk as it always does.
        None => Ok((file, meta)),
        Some(kind) => Err(OpenError::NotRegular(kind)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(path: &Path) -> Option<Kind> {
        match open_regular(path) {
            Ok(_) => None,
            Err(OpenError::NotRegular(k)) => Some(k),
            Err(e) => panic!("{}: {e:?}", path.display()),
        }
    }

    #[test]
    fn only_regular_files_open_and_nothing_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "a\n").unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from(0o600)).unwrap();
        let sock = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert_eq!(kind(&file), None);
        assert_eq!(kind(dir.path()), Some(Kind::Directory));
        // Without O_NONBLOCK this open would wait for a writer forever.
        assert_eq!(kind(&fifo), Some(Kind::Fifo));
        assert_eq!(kind(Path::new("/dev/zero")), Some(Kind::CharDevice));
        // A socket cannot be opened at all (ENXIO); it is named all the same.
        assert_eq!(kind(&sock), Some(Kind::Socket));
        assert_eq!(
            Kind::Fifo.refusal("sub/fifo"),
            "sub/fifo is a FIFO (named pipe); cairn reads regular files only"
        );
    }
}
