//! The run directory's format: what `nightshift optimize` writes and every report reads.
//!
//! `config` is run.json (the resolved configuration, no secrets, and the machine and tools
//! the run was made with); `events` is events.jsonl (the append-only event log, node
//! summaries, candidates); `log` is the one fold of that log ([`log::RunLog`]: each node's
//! state, the tree's history, the run's sessions), which resume, the reports and replay
//! all read; `store` is the directory itself (atomic writes, the lock, node folders,
//! simulated marking); `best` is best.json and `summary` summary.json, each one typed
//! struct. Writers (`optimize`) and readers (`report`, `generate`) meet here,
//! so readers need not import the loop.

pub mod best;
pub mod config;
pub mod events;
pub mod failure;
pub mod log;
pub mod store;
pub mod summary;
