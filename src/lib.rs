//! nightshift: unattended optimization of production CUDA kernels.
//!
//! The orchestrator (`cli`, `optimize`, `generate`) never maps kernel code: each judgment
//! is a judge process of ours (`wall::judge`) that owns every buffer, seed and clock, and
//! sandboxed worker processes (`wall::worker`, `wall::sandbox`) that each load one kernel
//! library and call it on the buffers they are lent; the verdict is the judge's, made from
//! what it observed itself. Building (`toolkit`, confined by `wall::build`) and the pure
//! analysis crates (`sass`, `heuristics`, `search`) need no GPU; only the judge, the
//! workers, the profilers and NVML do.
pub mod cli;
pub mod generate;
pub mod hostmem;
pub mod optimize;
pub mod report;
pub mod run;
pub mod scaffold;
pub mod stats;
pub mod task;
pub mod toolkit;
pub mod wall;
