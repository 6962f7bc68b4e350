//! A session's log as both exports read it: from its folder, every record checked
//! (own hash, chain, seq) as it is read, spilled fields and kept items from the
//! project's blobs.

use std::path::{Path, PathBuf};

use cairn_core::Record;
use cairn_store::{BlobStore, LogReader};

use crate::error::{Error, Result};

/// A session folder opened for reading.
pub(crate) struct SessionLog {
    /// The session's id: the folder's name.
    pub session: String,
    /// The project's blobs (`<project>/blobs`), when there are any.
    pub blobs: Option<BlobStore>,
    dir: PathBuf,
    reader: LogReader,
}

impl SessionLog {
    pub fn open(dir: &Path) -> Result<SessionLog> {
        Ok(SessionLog {
            session: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            blobs: cairn_tools::fold::project_blobs(dir),
            dir: dir.to_path_buf(),
            reader: LogReader::open(dir).map_err(|source| store(dir, source))?,
        })
    }

    /// The log's records from the first, checked as they are read: a reader that
    /// follows the log as it grows reads on from [`cairn_store::Records::offset`] only
    /// up to a length the writer has reached.
    pub fn records(&self) -> Result<cairn_store::Records> {
        self.reader.records().map_err(|e| store(&self.dir, e))
    }

    /// `r` as an event this version knows, its spilled fields read from the blobs.
    pub fn parse(&self, r: &cairn_store::Record) -> Option<Record> {
        cairn_tools::fold::parse_maybe_in(r, self.blobs.as_ref()).ok()
    }

    /// Gives `each` every record this version can parse, in order (a record of a type
    /// it does not know is skipped); returns how many records the log holds.
    pub fn each(&self, mut each: impl FnMut(&Record)) -> Result<u64> {
        let mut records = 0;
        for r in self.records()? {
            let r = r.map_err(|e| store(&self.dir, e))?;
            records += 1;
            if let Some(rec) = self.parse(&r) {
                each(&rec);
            }
        }
        Ok(records)
    }
}

pub(crate) fn store(dir: &Path, source: cairn_store::Error) -> Error {
    Error::Store {
        path: dir.to_path_buf(),
        source,
    }
}
