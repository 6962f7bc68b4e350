//! The writer lock: one writer per log, held as an OS file lock on `events.lock`, with
//! the holder's pid written inside so that a refused writer can name it. The lock dies
//! with its process, so a crash never leaves a session locked.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Error, IoContext, Result};

/// Held for as long as the writer lives.
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: File,
}

impl WriterLock {
    pub(crate) fn acquire(path: &Path) -> Result<WriterLock> {
        let mut file = crate::private::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .at(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(Error::Locked {
                    path: path.to_path_buf(),
                    pid: text.trim().parse().ok(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(e).at(path),
        }
        file.set_len(0).at(path)?;
        file.seek(SeekFrom::Start(0)).at(path)?;
        write!(file, "{}", std::process::id()).at(path)?;
        Ok(WriterLock { _file: file })
    }
}
