//! Files and folders of the home are private: the logs and blobs hold what the agent
//! saw of the workspace, and must be protected like the workspace. Folders are made
//! with mode 0700 and files with 0600 (the umask may only narrow them).

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// Mode of the folders cairn makes.
pub const DIR_MODE: u32 = 0o700;
/// Mode of the files cairn makes.
pub const FILE_MODE: u32 = 0o600;

/// Makes `path` and its missing parents, each with [`DIR_MODE`]; folders that exist
/// keep their mode.
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(path)
}

/// Makes folder `path` with [`DIR_MODE`]; fails if it exists.
pub fn create_dir(path: &Path) -> io::Result<()> {
    DirBuilder::new().mode(DIR_MODE).create(path)
}

/// Options for a new file with [`FILE_MODE`].
pub fn options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.mode(FILE_MODE);
    o
}

/// Creates a new file with [`FILE_MODE`]; fails if it exists.
pub fn create_new(path: &Path) -> io::Result<File> {
    options().write(true).create_new(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn folders_and_files_are_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/c");
        create_dir_all(&dir).unwrap();
        for d in ["a", "a/b", "a/b/c"] {
            let mode = std::fs::metadata(tmp.path().join(d))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, DIR_MODE, "{d}");
        }
        let f = dir.join("f");
        create_new(&f).unwrap();
        let mode = std::fs::metadata(&f).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, FILE_MODE);
        assert!(create_new(&f).is_err());
    }
}
