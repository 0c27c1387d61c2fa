//! What an evaluation is asked to do (`EvalOptions`), the build target, and the GPU it needs.

use super::verdict::EvalError;
use crate::task::Task;
use crate::toolkit::build;
use crate::toolkit::toolchain::EnvError;
use crate::wall::gpu;
use crate::wall::protocol::{JudgeRequest, Mode, Standalone, StandaloneRequest, TimingPlan};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct EvalOptions {
    pub arch: Option<String>,
    pub extra_flags: Vec<String>,
    pub defines: BTreeMap<String, String>,
    pub device: usize,
    pub timeout: Option<Duration>,
    /// `--build-timeout`: how long one build may run (else the task's `[build] timeout_s`,
    /// else `wall::build::DEFAULT_TIMEOUT`).
    pub build_timeout: Option<Duration>,
    pub time: bool,
    pub energy: bool,
    pub sanitize: bool,
    pub timing: TimingPlan,
    pub cache: PathBuf,
    /// The executable that provides `judge` and `worker` (this binary, unless a test says
    /// otherwise).
    pub worker_exe: PathBuf,
    pub threads: usize,
    /// Where input seeds start: random per `eval`, per run for `optimize`, so that no
    /// candidate can know its inputs (or their outputs) in advance.
    pub seed_base: u64,
    /// `--allow-unconfined-profiling`: run ncu and compute-sanitizer even where the hosted
    /// arrangement's namespaces cannot be made (the worker's own hosted sandbox only).
    pub allow_unconfined_profiling: bool,
    /// The measured DRAM bandwidth, when the caller already has it; timed judgments
    /// otherwise read it from the cache (measuring once per device when missing).
    pub achievable_dram_gbs: Option<f64>,
}

impl EvalOptions {
    pub fn new(worker_exe: PathBuf) -> EvalOptions {
        EvalOptions {
            arch: None,
            extra_flags: Vec::new(),
            defines: BTreeMap::new(),
            device: 0,
            timeout: None,
            build_timeout: None,
            time: true,
            energy: false,
            sanitize: false,
            timing: TimingPlan::default(),
            cache: build::cache_root(),
            worker_exe,
            threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(4).min(16),
            seed_base: fresh_seed_base(),
            allow_unconfined_profiling: false,
            achievable_dram_gbs: None,
        }
    }

    /// What the judge is asked under these options: judge `cand` against the trusted
    /// builds in `mode`, with `deadline`, its workers' scratch folders in `folder`.
    #[allow(clippy::too_many_arguments)]
    pub fn judge_request(
        &self,
        task: &Task,
        trusted: &crate::wall::build::TrustedBuilds,
        cand: &crate::toolkit::build::Built,
        mode: Mode,
        achievable_dram_gbs: Option<f64>,
        deadline: Duration,
        folder: &std::path::Path,
    ) -> JudgeRequest {
        let setting = std::env::var("NIGHTSHIFT_SANDBOX").unwrap_or_default();
        JudgeRequest {
            task: task.clone(),
            reference: trusted.reference.library.clone(),
            baseline: trusted.baseline.library.clone(),
            candidate: cand.library.clone(),
            mode,
            device: self.device,
            timing: self.timing.clone(),
            seed_base: self.seed_base,
            deadline_s: deadline.as_secs_f64(),
            folder: folder.to_path_buf(),
            worker_exe: self.worker_exe.clone(),
            sandbox: setting != "off",
            sandbox_skip: sandbox_skip(&setting),
            achievable_dram_gbs,
        }
    }

    /// A standalone worker's request (a profile or a sanitizer run of `library`). The
    /// hosting tool's output folders are added where the tool is known (`hosted`).
    pub fn standalone_request(
        &self,
        task: &Task,
        library: &std::path::Path,
        trusted: bool,
        mode: Standalone,
    ) -> StandaloneRequest {
        StandaloneRequest {
            mode,
            task: task.clone(),
            library: library.to_path_buf(),
            trusted,
            device: self.device,
            // Never the run's seed base: the worker reads its request, and the library it
            // loads could read it back out of the worker's memory.
            seed: fresh_seed_base(),
            policy: None,
            host_outputs: Vec::new(),
        }
    }
}

/// Layers left out by `NIGHTSHIFT_SANDBOX=no-landlock,no-seccomp`.
pub fn sandbox_skip(setting: &str) -> Vec<String> {
    setting.split(',').filter_map(|s| s.trim().strip_prefix("no-")).map(str::to_string).collect()
}

/// A seed base nobody can predict; below 2^62 so that offsets never wrap.
pub fn fresh_seed_base() -> u64 {
    rand::random::<u64>() >> 2
}

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The build target: `--arch`, else the device's own.
pub fn resolve_arch(opts: &EvalOptions) -> Result<String, EvalError> {
    if let Some(a) = &opts.arch {
        build::gencode(a).map_err(|e| EvalError::Task(e.to_string()))?;
        return Ok(a.clone());
    }
    let (_, cc, _) = require_gpu(opts.device)?;
    Ok(build::arch_for_capability(cc.0, cc.1))
}

/// What to do on a machine without a GPU: the commands that need one cannot run, but the
/// task can still be checked and built (no `--arch` hint here: `eval --arch` would build
/// and then stop at the same missing GPU).
pub const NO_GPU_HINT: &str = "eval, optimize, diagnose and profiling run kernels on an NVIDIA GPU: run them on a machine with one and its driver. Without a GPU, `nightshift validate TASK --build --arch sm_90a` checks the task and builds its kernels";

/// The device's name, capability and driver version, or a clear environment error.
pub fn require_gpu(device: usize) -> Result<(String, (i32, i32), i32), EnvError> {
    if !gpu::driver_present() {
        return Err(EnvError { what: "a CUDA driver (libcuda.so)".into(), hint: NO_GPU_HINT.into() });
    }
    gpu::query_device(device)
        .map_err(|e| EnvError { what: format!("GPU {device}"), hint: format!("the driver answered {e}") })
}
