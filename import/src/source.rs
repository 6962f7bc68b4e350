//! Reading a source file: plain or zstd-compressed JSON Lines, one line at a time, with
//! memory bounded by `line_bytes_max` whatever the file's size. While it reads, it
//! hashes the file's raw bytes (what `imported.file.hash` records) and the content up
//! to the end of each complete line (what a continuation checks).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use cairn_store::Hash;

use crate::error::{ImportError, Result};

/// Which agent wrote a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// A Codex CLI rollout: `{timestamp, type, payload}` lines.
    Codex,
    /// A Claude Code transcript: `user`/`assistant`/… lines with `sessionId`.
    Claude,
    /// A Gemini CLI chat: a session line, then messages written again as they change.
    Gemini,
    /// An OpenCode session, as `opencode::materialize` writes one from its database.
    OpenCode,
}

impl Format {
    pub fn agent(&self) -> &'static str {
        match self {
            Format::Codex => "codex",
            Format::Claude => "claude",
            Format::Gemini => "gemini",
            Format::OpenCode => "opencode",
        }
    }
}

/// One line as the reader found it.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line (its bytes, without the newline, are in the buffer given).
    Complete,
    /// A line longer than `line_bytes_max`: skipped, its length is given.
    TooLong(u64),
    /// Bytes after the last newline: a line cut short (a torn tail).
    Torn(u64),
}

/// A source file opened for reading, line by line.
pub struct Source {
    path: PathBuf,
    reader: Box<dyn BufRead>,
    /// The raw bytes' hasher, shared with the reader below the decompressor.
    raw: std::rc::Rc<std::cell::RefCell<(blake3::Hasher, u64)>>,
    /// Content offset of the next line.
    offset: u64,
    /// Hash of the content up to the end of the last complete line.
    content: blake3::Hasher,
    line_bytes_max: usize,
    /// Index of the next line (complete or not), from 0.
    pub index: u64,
}

/// A reader that feeds what it reads into a shared hasher (the decompressor owns it).
struct Shared<R> {
    inner: R,
    out: std::rc::Rc<std::cell::RefCell<(blake3::Hasher, u64)>>,
}

impl<R: Read> Read for Shared<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut out = self.out.borrow_mut();
        out.0.update(&buf[..n]);
        out.1 += n as u64;
        Ok(n)
    }
}

/// Whether `path` is compressed (by its name).
pub fn is_zst(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}

impl Source {
    /// Opens `path` (decompressing a `.zst` file as it reads).
    pub fn open(path: &Path, line_bytes_max: usize) -> Result<Source> {
        let file = File::open(path).map_err(ImportError::io(path))?;
        let raw = std::rc::Rc::new(std::cell::RefCell::new((blake3::Hasher::new(), 0u64)));
        let shared = Shared {
            inner: file,
            out: raw.clone(),
        };
        let reader: Box<dyn BufRead> = if is_zst(path) {
            let dec = zstd::stream::read::Decoder::new(shared).map_err(ImportError::io(path))?;
            Box::new(BufReader::with_capacity(256 * 1024, dec))
        } else {
            Box::new(BufReader::with_capacity(256 * 1024, shared))
        };
        Ok(Source {
            path: path.to_path_buf(),
            reader,
            raw,
            offset: 0,
            content: blake3::Hasher::new(),
            line_bytes_max,
            index: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The content offset of the next line: after the last complete line read.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// BLAKE3 of the content up to [`Source::offset`].
    pub fn content_hash(&self) -> Hash {
        Hash(*self.content.finalize().as_bytes())
    }

    /// Reads the rest of the raw file (so its hash covers all of it) and returns its
    /// BLAKE3 and length.
    pub fn raw_hash(&mut self) -> Result<(Hash, u64)> {
        loop {
            let buf = self
                .reader
                .fill_buf()
                .map_err(ImportError::io(&self.path))?;
            if buf.is_empty() {
                break;
            }
            let n = buf.len();
            self.reader.consume(n);
        }
        let raw = self.raw.borrow();
        Ok((Hash(*raw.0.finalize().as_bytes()), raw.1))
    }

    /// Reads the next line into `buf` (cleared first). `None` at the end.
    pub fn next_line(&mut self, buf: &mut Vec<u8>) -> Result<Option<Line>> {
        buf.clear();
        let mut len = 0u64;
        let mut too_long = false;
        // The content hash takes a line only once it is complete.
        let mut hashing = self.content.clone();
        loop {
            let chunk = self
                .reader
                .fill_buf()
                .map_err(ImportError::io(&self.path))?;
            if chunk.is_empty() {
                if len == 0 {
                    return Ok(None);
                }
                self.index += 1;
                // No newline at the end: cut short. It is not part of the content hash.
                return Ok(Some(Line::Torn(len)));
            }
            let (take, done) = match memchr(chunk) {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            let piece = &chunk[..take];
            len += take as u64;
            if !too_long {
                let body = if done { &piece[..take - 1] } else { piece };
                if buf.len() + body.len() > self.line_bytes_max {
                    too_long = true;
                    buf.clear();
                } else {
                    buf.extend_from_slice(body);
                }
            }
            hashing.update(piece);
            self.reader.consume(take);
            if done {
                self.content = hashing;
                self.index += 1;
                self.offset += len;
                return Ok(Some(if too_long {
                    Line::TooLong(len)
                } else {
                    Line::Complete
                }));
            }
        }
    }
}

fn memchr(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}
