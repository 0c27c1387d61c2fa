//! nightshift: unattended optimization of production CUDA kernels.
//!
//! The orchestrator (`cli`, `optimize`, `wall`, `generate`) never maps kernel code: each
//! evaluation is a fresh `worker` process that sandboxes itself (`sandbox`), computes the
//! trusted reference's outputs, then checks and times the candidate against the baseline,
//! answering on a sealed channel (`channel`) that the orchestrator checks against the
//! request (`report_check`) before it believes a pass. Building (`toolkit`)
//! and the pure analysis crates (`sass`, `heuristics`, `search`) need no GPU; only the
//! worker, the profilers and NVML do.
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
