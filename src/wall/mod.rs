//! The trust wall: a candidate goes in, a verdict comes out.
//!
//! Two rooms and what lies between them. The trusted side (`judge`) decides: the
//! orchestrator's half builds and words verdicts, and the judge process owns every buffer,
//! seed, reference output and clock. The untrusted side (`worker`) is the process that
//! loads one kernel library, sandboxed before it loads anything, and does what the judge
//! asks. `protocol` is the one thing both import; below them lie the GPU layer both use
//! (`gpu`: contexts, the judge's exportable buffers, its generate and compare kernels), the
//! sandbox the worker and the hosted tools run in (`sandbox`), and the judge's
//! infrastructure that loads no kernel code (`bandwidth`, `nvml`, `gpu_lock`,
//! `runtime_dir`), and the confined build (`build`: nvcc, the host compiler and the
//! disassemblers in a confinement of their own, and the trusted builds).
//!
//! The invariants: only a worker maps kernel code; no worker holds anything that makes a
//! verdict trusted; `judge` never imports `worker` and `worker` never imports `judge`.
pub mod build;

pub mod bandwidth;
pub mod gpu;
pub mod gpu_lock;
pub mod judge;
pub mod nvml;
pub mod protocol;
pub mod runtime_dir;
pub mod sandbox;
pub mod worker;

// What crosses the wall from the orchestrator's side: evaluation options, the verdict, the
// trusted builds, judging, and hosted standalone runs.
pub(crate) use build::build_one;
pub use build::{build_confined, build_trusted, TrustedBuilds};
pub(crate) use judge::tail;
pub use judge::{
    check_hosting, classify, evaluate, fresh_seed_base, judge, require_gpu, resolve_arch, run_standalone, sanitize,
    unconfined_refusal, BuildSummary, Classified, EvalError, EvalOptions, HostTool, Phases, ShapeResult, StandaloneRun,
    Status, Verdict, DEFAULT_TIMEOUT, NO_GPU_HINT, SANITIZER_TOOLS,
};
