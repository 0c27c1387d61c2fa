//! The trust wall: a candidate goes in, a verdict comes out.
//!
//! Everything that stands between a generated kernel and a believed result lives here: the
//! orchestrator's side (`options`, `verdict`, `build`: the confined build, its trampoline
//! and the trusted builds, `judge`: the
//! `eval` command and judging with a worker under a deadline, `client`: spawning the worker
//! and reading its sealed channel, `classify`, `report_check`: whether a sealed report fits
//! its request, `sanitizer`, `gpu_lock`), the wire between the two sides (`protocol`,
//! `channel`), and the worker's side (`worker`, `sandbox`, `verify`). The invariant: only the worker process, sandboxed
//! by itself, ever maps candidate code; nothing outside `worker` loads or runs it, and
//! nothing outside this folder believes a pass that `report_check` has not checked.
//!
//! GPU access lives here too, because the worker is what uses it: `gpu` (cudarc's driver
//! API, guarded buffers, the L2 flush), `nvml` (clocks, throttling, energy), `bandwidth`
//! (the stream triad, run under the GPU lock in a process that loads no candidate code),
//! and `runtime_dir` (the private folder holding the GPU locks and evaluation folders).
pub mod build;
mod classify;
mod client;
mod judge;
mod options;
mod verdict;

pub mod bandwidth;
pub mod channel;
pub mod gpu;
pub mod gpu_lock;
pub mod nvml;
pub mod protocol;
pub mod report_check;
pub mod runtime_dir;
pub mod sandbox;
pub mod sanitizer;
pub mod verify;
pub mod worker;

// What crosses the wall from the orchestrator's side: evaluation options, the verdict, the
// trusted builds, judging, the worker client and the classification of its runs.
pub(crate) use build::build_one;
pub use build::{build_confined, build_trusted, TrustedBuilds};
pub use classify::{classify, Classified};
pub use client::{check_hosting, run_worker, unconfined_refusal, HostTool, WorkerRun};
pub use judge::{evaluate, judge, sanitize, SANITIZER_TOOLS};
pub use options::{fresh_seed_base, require_gpu, resolve_arch, EvalOptions, DEFAULT_TIMEOUT, NO_GPU_HINT};
pub(crate) use verdict::tail;
pub use verdict::{BuildSummary, EvalError, Phases, Status, Verdict};
