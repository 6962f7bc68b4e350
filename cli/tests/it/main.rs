//! The command line's integration tests, linked as one binary (as ripgrep does): the
//! `cairn` binary run as a process (signals to it included), the terminal views on
//! ratatui's test backend and in tmux, and the audit reports. Snapshots live in `snapshots/`, named after the module
//! path (`it__audit__…`). The tests share one process, so none changes the environment
//! or the current directory: each `cairn` child is given its own `CAIRN_HOME` and
//! workspace, and each tmux test its own server socket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod archive;
mod audit;
mod browse;
mod chat;
mod cli;
mod corrupt_tail;
mod docs;
mod durability;
mod fleet;
mod forged_history;
mod hook;
mod import;
mod import_sources;
mod mcp_serve;
mod proofs;
mod real_agents;
mod real_hooks;
mod report;
mod scripting;
mod search_cli;
mod secrets;
mod session_verbs;
mod signals;
mod start_crash;
mod tui;
