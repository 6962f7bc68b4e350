//! The store of cairn: the append-only, hash-chained session log, the content-addressed
//! blob store and snapshot files.
//!
//! The store knows nothing of tools or event kinds: an event is an opaque JSON object.
//! Each record is one line, self-checking (its own BLAKE3 hash) and chained (its `prev`);
//! `docs/FORMAT.md` describes the bytes exactly.
//!
//! [`written`] keeps which of a home's session logs were opened for writing since a
//! reader of all of them (the search index's catch-up) last found them complete.
//!
//! ```
//! use cairn_store::{LogWriter, LogReader, Options, verify_path, VerifyOptions, log_path};
//! let dir = tempfile::tempdir()?;
//! let mut log = LogWriter::create(dir.path(), Options::default())?;
//! log.append(&serde_json::json!({"type": "note", "text": "hello"}))?;
//! log.sync()?;
//! drop(log);
//! let records: Vec<_> = LogReader::open(dir.path())?.records()?.collect::<Result<_, _>>()?;
//! assert_eq!(records.len(), 1);
//! assert!(verify_path(&log_path(dir.path()), &VerifyOptions::default())?.is_clean());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod blob;
mod commit;
mod error;
mod hash;
mod lanes;
mod lock;
mod log;
pub mod private;
mod reader;
mod record;
mod snapshot;
mod verify;
pub mod written;

pub use blob::{BlobCheck, BlobRef, BlobStore, hash_reader};
pub use commit::{SYNC_TRACE_ENV, run_in_background};
pub use error::{Error, ParseNameError, Result};
pub use hash::{
    Hash, ParseHashError, RECENT_CONTENT_BYTES_MAX, RECENT_CONTENTS_MAX, decode_lower_hex,
    encode_lower_hex,
};
pub use lanes::{LANE_MESSAGE_BYTES_MAX, record_hashes};
pub use lock::writer_pid;
pub use log::{
    Appended, COMMIT_WINDOW_MS_DEFAULT, Durability, Head, LOCK_FILE, LOG_FILE, LogWriter, Options,
    QUARANTINE_DIR, Recovery, UNBORN_PREFIX, is_unborn, log_path, now_ts, remove_unborn,
    unborn_name,
};
pub use reader::{INDEX_FILE, LogReader, Record, Records, TailState};
pub use record::{
    BadLine, Fields, HASH_CONTEXT, RECORD_BYTES_MAX, SUFFIX_BYTES, check_line, record_hash,
};
pub use snapshot::{SNAPSHOT_DIR, Snapshot, SnapshotMeta, SnapshotStore, SnapshotWarning};
pub use verify::{Problem, ProblemKind, VerifyOptions, VerifyReport, verify_bytes, verify_path};

/// Makes everything written to the file system that holds `dir` durable (`syncfs`):
/// the end of a bulk write made with durability `none`, such as `replay --all`'s
/// replays, in one call instead of one `fsync` per file.
pub fn sync_file_system(dir: &std::path::Path) -> std::io::Result<()> {
    let f = std::fs::File::open(dir)?;
    rustix::fs::syncfs(&f)?;
    Ok(())
}
