//! The worker's sandbox: what Linux offers an unprivileged process to fence itself in,
//! applied by the worker to itself at start, before its first thread, before the GPU is
//! opened and long before any untrusted library is mapped, so that every thread the
//! driver or a candidate starts inherits it.
//!
//! Three independent layers, each applied as far as the kernel allows and reported
//! layer by layer (`check-env`, every verdict): Landlock (`fs`: write only the scratch
//! folder, read only system folders, the libraries and this process's own `/proc`
//! entry; no TCP; no signals or abstract sockets outside the sandbox), a seccomp filter
//! (`syscalls`: no signals, tracing or memory access to other processes, no fork, no
//! exec, no new process group or session, no sockets but Unix ones) and rlimits
//! (`limits`: no core dumps, bounded file size, CPU time as a backstop to the deadline).
//! A missing layer is said, never fatal: the others still hold.
//!
//! Under a hosting tool (ncu, compute-sanitizer) the tool's injected code shares the
//! process and talks to its front end over TCP and files in /tmp, so the hosted policy
//! leaves TCP, /tmp, /dev/shm and /var/tmp open and keeps the rest. What it leaves open
//! reaches nothing of the host's: every hosted run goes through `nightshift hosted`
//! (`hosted`), which runs the tool in private user, mount (fresh /tmp, /dev/shm and
//! /var/tmp), network (loopback only) and PID namespaces, and refuses to start it where
//! the kernel forbids them unless the user waives it (`--allow-unconfined-profiling`).
//! Those layers are reported like the worker's.

mod fs;
pub mod hosted;
mod hosted_init;
mod hosted_mounts;
mod hosted_namespaces;
mod limits;
pub mod probe;
mod syscalls;

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Why a sandbox layer, a step of the hosted arrangement or a probe could not be had.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A system call failed: which (and on what), and the errno.
    #[error("{call}: {source}")]
    Sys { call: String, source: std::io::Error },
    /// A file could not be read or written (`/proc/self/uid_map`, the arrangement's report).
    #[error("{}: {source}", path.display())]
    File { path: PathBuf, source: std::io::Error },
    /// The arrangement's report does not parse.
    #[error("{}: {source}", path.display())]
    Report { path: PathBuf, source: serde_json::Error },
    #[error("no tool to run: give one after --")]
    NoTool,
    #[error("{0}: an argument with a NUL byte")]
    NulArgument(String),
    #[error("{0}: a NUL byte")]
    Nul(String),
    #[error("a path with a NUL byte")]
    NulPath,
    /// An operation on a folder failed; the error alone says it.
    #[error(transparent)]
    Io(std::io::Error),
    /// The seccomp filter does not compile.
    #[error(transparent)]
    SeccompCompile(#[from] seccompiler::BackendError),
    /// The kernel refused the seccomp filter.
    #[error(transparent)]
    SeccompApply(#[from] seccompiler::Error),
    #[error(transparent)]
    RuntimeDir(#[from] crate::wall::runtime_dir::RuntimeDirError),
    /// A probe (or the trampoline around it) could not be started.
    #[error("cannot run {}: {source}", program.display())]
    Run { program: PathBuf, source: std::io::Error },
    /// The probe ended without a report: how it ended, and its stderr.
    #[error("the sandbox probe ended with {end} and no report ({source}): {stderr}")]
    NoProbeReport { end: String, stderr: String, source: serde_json::Error },
    /// The trampoline around a probe wrote no arrangement.
    #[error("the hosted trampoline wrote no arrangement ({source}); it ended with {end}: {stderr}")]
    NoArrangement { end: String, stderr: String, source: Box<SandboxError> },
}

impl SandboxError {
    /// The system call `call` just failed (errno read now).
    fn last(call: impl Into<String>) -> SandboxError {
        SandboxError::Sys { call: call.into(), source: std::io::Error::last_os_error() }
    }
}

/// What the worker may touch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Policy {
    /// The only folder it may write (its working directory, removed after the run).
    pub scratch: PathBuf,
    /// Folders and files it may read besides the system's own (libraries, toolkits).
    pub read: Vec<PathBuf>,
    /// Running under ncu or compute-sanitizer: TCP, /tmp, /dev/shm and /var/tmp stay open
    /// (inside the hosted arrangement's namespaces, private ones).
    pub hosted: bool,
    /// RLIMIT_CPU: CPU seconds over all threads, a backstop to the orchestrator's deadline.
    pub cpu_seconds: u64,
    /// RLIMIT_FSIZE in bytes.
    pub max_file_bytes: u64,
    /// Layers not to apply ("landlock", "seccomp", "rlimits").
    #[serde(default)]
    pub skip: Vec<String>,
}

impl Policy {
    /// The strict policy for a worker in `scratch`, reading `libraries` and the
    /// toolkit folders this process's environment names.
    pub fn strict(scratch: PathBuf, libraries: &[PathBuf], cpu_seconds: u64) -> Policy {
        let mut read: Vec<PathBuf> = libraries.iter().filter_map(|l| l.parent().map(PathBuf::from)).collect();
        if let Ok(exe) = std::env::current_exe() {
            read.extend(exe.parent().map(PathBuf::from));
        }
        for var in ["LD_LIBRARY_PATH", "NIGHTSHIFT_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"] {
            if let Some(v) = std::env::var_os(var) {
                read.extend(std::env::split_paths(&v).filter(|p| p.is_absolute()));
            }
        }
        read.sort();
        read.dedup();
        Policy { scratch, read, hosted: false, cpu_seconds, max_file_bytes: 256 << 20, skip: Vec::new() }
    }
}

/// One layer and how far it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    pub name: String,
    pub active: bool,
    /// What holds, or why it does not.
    pub detail: String,
}

impl Layer {
    fn on(name: &str, detail: impl Into<String>) -> Layer {
        Layer { name: name.into(), active: true, detail: detail.into() }
    }
    fn off(name: &str, detail: impl Into<String>) -> Layer {
        Layer { name: name.into(), active: false, detail: detail.into() }
    }
}

/// Fences in the calling process. Call before any other thread exists: Landlock binds
/// the calling thread and what it starts later.
pub fn apply(policy: &Policy) -> Vec<Layer> {
    let skipped = |name: &str| policy.skip.iter().any(|s| s == name);
    type Apply = fn(&Policy) -> Layer;
    let layers: [(&str, Apply); 3] =
        [("rlimits", limits::apply), ("landlock", fs::apply), ("seccomp", syscalls::apply)];
    layers
        .into_iter()
        .map(|(name, apply)| if skipped(name) { Layer::off(name, "left out on request") } else { apply(policy) })
        .collect()
}

/// "name on, name OFF", for one-line summaries.
pub fn summary(layers: &[Layer]) -> String {
    layers.iter().map(|l| format!("{} {}", l.name, if l.active { "on" } else { "OFF" })).collect::<Vec<_>>().join(", ")
}

/// One line per layer, for check-env and verdicts.
pub fn describe(layers: &[Layer]) -> String {
    layers
        .iter()
        .map(|l| format!("{} {}: {}", if l.active { "on " } else { "OFF" }, l.name, l.detail))
        .collect::<Vec<_>>()
        .join("\n")
}
