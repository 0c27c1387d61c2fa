//! The trusted side of the wall: everything that decides a verdict, in processes that never
//! map kernel code. The orchestrator's half builds, starts one judge process per judgment
//! (`spawn`), words its report as a verdict (`eval`, `verdict`, `options`), and runs the
//! tools that host a standalone worker (`hosted`: compute-sanitizer in `eval`, ncu in
//! `profile`), telling by where the worker said it was whose failure a run is
//! (`classify`, `sanitizer`). The judge process itself (`process`) owns the buffers, the
//! seeds, the reference's outputs, the clock and the comparison (`verify`).
//!
//! Nothing here imports `wall::worker`; what crosses to it is `wall::protocol`.

mod classify;
mod eval;
mod hosted;
mod options;
pub mod process;
pub mod profile;
pub mod sanitizer;
mod spawn;
mod verdict;
pub mod verify;

pub use classify::{classify, Classified};
pub use eval::{evaluate, judge, sanitize, SANITIZER_TOOLS};
pub use hosted::{check_hosting, run_standalone, unconfined_refusal, HostTool, StandaloneRun};
pub use options::{fresh_seed_base, require_gpu, resolve_arch, EvalOptions, DEFAULT_TIMEOUT, NO_GPU_HINT};
pub(crate) use verdict::tail;
pub use verdict::{BuildSummary, EvalError, Phases, ShapeResult, Status, Verdict};
