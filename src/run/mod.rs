//! The run directory's format: what `nightshift optimize` writes and every report reads.
//!
//! `config` is run.json (the resolved configuration, no secrets, and the machine and tools
//! the run was made with); `events` is events.jsonl (the append-only event log, node
//! summaries, candidates) and the one fold of it (`parse_log`); `store` is the directory
//! itself (atomic writes, the lock, node folders, simulated marking). Writers (`optimize`)
//! and readers (`report`, `generate`) meet here, so readers need not import the loop.
pub mod best;
pub mod config;
pub mod events;
pub mod failure;
pub mod store;
