//! cairn's end-to-end, crash and interop tests, linked as one binary (as ripgrep does)
//! so that a change links once, not once per file. The tests share one process, so none
//! may change what is process-wide: no test sets an environment variable, the current
//! directory or a signal handler; each works in temporary folders of its own, and checks
//! of child processes look only at its own children. One thing is shared anyway: a child
//! that any thread starts holds a copy of every open file until it execs, so a test that
//! opens again a log it had open goes through `cairn_tests::open_writer`.
//! Run one area with a filter, e.g. `cargo test -p cairn-tests -- store_`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_loop;
mod agent_providers;
mod agent_resume;
mod agent_web;
mod allow_list;
mod atif;
mod big_records;
mod capture;
mod confinement_race;
mod consent;
mod consent_oracle;
mod containment;
mod decide_property;
mod deps;
mod engine_catalog;
mod engine_files;
mod engine_fold;
mod engine_held;
mod engine_permissions;
mod engine_search;
mod engine_shell;
mod engine_threads;
mod forged_paths;
mod format_vectors;
mod hooks;
mod import;
mod leak;
mod mcp_client;
mod mcp_server;
mod otel;
mod peer_parity;
mod pg_cluster;
mod process_runner;
mod proofs;
mod real_agents;
mod replay_checkout;
mod replay_diff;
mod replay_rerun;
mod replay_samples;
mod replay_verify;
mod replay_whatif;
mod resume_crash;
mod resume_findings;
mod resume_fork;
mod resume_interrupted;
mod sandbox;
mod search;
mod search_live;
mod secrets_encoded;
mod secrets_replay;
mod secrets_shell;
mod signals;
mod special_files;
mod store_bad_input;
mod store_blob;
mod store_commit;
mod store_corruption;
mod store_crash;
mod store_model;
mod store_reader;
mod store_snapshot;
mod verify_gaps;
mod verify_table;
mod withheld;
