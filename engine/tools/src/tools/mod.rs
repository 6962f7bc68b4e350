//! The tools, one type per file; a tool both catalogues have under their own names is
//! one type named by each (`fetch`, `command`). Shared mechanics live in `text`
//! (loading files to read), `write` (rules and atomic installs) and `search` (walking
//! and matching).

pub mod command;
pub mod create_file;
pub mod edit_file;
pub mod fetch;
pub mod find_files;
pub mod glob;
pub mod grep;
pub mod list_dir;
pub mod list_searchable_files;
pub mod problems;
pub mod read_file;
pub mod read_file_range;
pub mod remember;
pub mod replace_range;
pub mod search;
pub mod search_text;
pub mod text;
pub mod web_search;
pub mod write;
pub mod write_file;
pub mod write_patch;
