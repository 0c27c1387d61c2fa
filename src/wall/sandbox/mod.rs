//! The worker's sandbox: what Linux offers an unprivileged process to fence itself in,
//! applied by the worker to itself at start, before its first thread, before the GPU is
//! opened and long before any untrusted library is mapped, so that every thread the
//! driver or a candidate starts inherits it. Every layer is an allow-list.
//!
//! Five layers, each applied as far as the kernel allows and reported layer by layer
//! (`check-env`, every verdict), in this order:
//! - `rlimits` (`limits`): no core dumps, bounded file size, CPU time as a backstop.
//! - `keyring` and `capabilities` (`privileges`): a fresh, empty session keyring; no
//!   capability in any set; no_new_privs. Root or not.
//! - `landlock` (`fs`, `libraries`): reads named file by file where a library could hide
//!   (the worker's one kernel library and what it needs, the driver's libraries, the
//!   vendor libraries its role may use), system folders without libraries, the /proc and
//!   /sys entries the driver reads; writes only to the scratch folder; no TCP; no signals
//!   or abstract-socket connections out of the sandbox.
//! - `seccomp` (`syscalls`): an allow-list of system calls from traces of real runs;
//!   ENOSYS for the unknown, EPERM for what reaches other processes or the host.
//!
//! A missing layer is said, never fatal: the others still hold. After the GPU is open and
//! before a kernel library is loaded, the worker calls `scrub_environment()`
//! (`environment`): the environment is emptied and its strings overwritten in memory.
//!
//! Under a hosting tool (ncu, compute-sanitizer) the tool's injected code shares the
//! process; the hosted profile adds what the traces show it doing (a Unix listener on an
//! abstract name that the front end connects to, a netlink route socket, chmod of its
//! lock files answered without effect) and nothing else. Every hosted run goes through
//! `nightshift hosted` (`hosted`), which runs the tool in private mount (fresh /tmp,
//! /dev/shm, /var/tmp, $HOME and /run), network (loopback only), PID and, unless root,
//! user namespaces, and refuses to start it where the kernel forbids them unless the user
//! waives it (`--allow-unconfined-profiling`). Those layers are reported like the
//! worker's.

mod environment;
mod fs;
pub mod hosted;
mod hosted_init;
mod hosted_mounts;
mod hosted_namespaces;
mod libraries;
mod limits;
mod privileges;
pub mod probe;
pub mod seccomp_report;
mod syscalls;

pub use environment::scrub_environment;
// The capability calls the confined build makes too (`build::privileges`).
pub(crate) use privileges::{capabilities_held, capset_none};

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
    /// The kernel libraries it may load (in the judge's design, exactly one), each with
    /// the libraries it needs, resolved as ld.so resolves them.
    #[serde(default)]
    pub libraries: Vec<PathBuf>,
    /// Vendor libraries it may load besides, by name as given to -l (`cublas`): the task's
    /// `baseline_libs` for the reference and baseline processes; a candidate gets none.
    #[serde(default)]
    pub vendor_libraries: Vec<String>,
    /// Further files and folders it may read (none by default).
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Running under ncu or compute-sanitizer (inside the hosted arrangement): the hosted
    /// seccomp profile, and the tool's injection folders readable.
    pub hosted: bool,
    /// RLIMIT_CPU: CPU seconds over all threads, a backstop to the orchestrator's deadline.
    pub cpu_seconds: u64,
    /// RLIMIT_FSIZE in bytes.
    pub max_file_bytes: u64,
    /// Layers not to apply ("rlimits", "keyring", "capabilities", "landlock", "seccomp").
    #[serde(default)]
    pub skip: Vec<String>,
}

impl Policy {
    /// The policy for a worker in `scratch` that loads `libraries` (and no vendor library
    /// beyond what they link: set `vendor_libraries` for a reference or baseline).
    pub fn strict(scratch: PathBuf, libraries: &[PathBuf], cpu_seconds: u64) -> Policy {
        Policy {
            scratch,
            libraries: libraries.to_vec(),
            vendor_libraries: Vec::new(),
            read: Vec::new(),
            hosted: false,
            cpu_seconds,
            max_file_bytes: 256 << 20,
            skip: Vec::new(),
        }
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

/// Fences in the calling process. Call before any other thread exists (Landlock binds
/// the calling thread and what it starts later) and before the GPU is opened; then
/// `scrub_environment()` after the GPU is open and before a kernel library is loaded.
pub fn apply(policy: &Policy) -> Vec<Layer> {
    let skipped = |name: &str| policy.skip.iter().any(|s| s == name);
    // While /proc/self/stat is readable: where the environment's strings lie; and an
    // experiment's seccomp log, while its folder is.
    environment::remember_block();
    if let Some(Err(e)) = seccomp_report::prepare() {
        eprintln!("sandbox: no seccomp report: {e}");
    }
    type Apply = fn(&Policy) -> Layer;
    let layers: [(&str, Apply); 5] = [
        ("rlimits", limits::apply),
        ("keyring", |_| privileges::fresh_keyring()),
        ("capabilities", |_| privileges::drop_capabilities()),
        ("landlock", fs::apply),
        ("seccomp", syscalls::apply),
    ];
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
