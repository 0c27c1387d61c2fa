//! What a confined build may touch: made here, in the orchestrator, from the toolchain and
//! the task, and handed to the trampoline (`nightshift confine --policy JSON`) as data, so
//! that a policy can be read, tested and logged apart from the code that applies it.

use crate::task::Task;
use crate::toolkit::build::find_library;
use crate::toolkit::toolchain::Toolchain;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The time a build gets unless the task (`[build] timeout_s`) or the command line
/// (`--build-timeout`) says otherwise. The heaviest built-in build (gemm_bf16's cuBLAS
/// baseline, cub-heavy kernels) takes well under 30 s on one core.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Address space per process. On cub's radix sorts, scans and reductions (one key and
/// value type), cicc peaked at 675 MiB of address space, cudafe++ at 592 MiB and cc1plus
/// at 360 MiB; five type pairs in one file, 684 MiB resident at most (ARCHITECTURE.md).
/// The limit leaves over twenty times that for heavier templates (CUTLASS), and stops a
/// runaway instantiation before it takes the machine's memory.
pub const MEMORY_BYTES: u64 = 16 << 30;

/// The largest file a build may write (objects, the library, temporaries).
pub const FILE_BYTES: u64 = 2 << 30;

/// A build's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time of nvcc (and of each cuobjdump or nvdisasm run after it).
    pub timeout: Duration,
    /// RLIMIT_AS of every process of the build.
    pub memory_bytes: u64,
    /// RLIMIT_FSIZE of every process of the build.
    pub file_bytes: u64,
}

impl Limits {
    pub fn with_timeout(timeout: Duration) -> Limits {
        Limits { timeout, memory_bytes: MEMORY_BYTES, file_bytes: FILE_BYTES }
    }

    /// RLIMIT_CPU, per process: a backstop only (the wall-clock deadline kills first).
    pub fn cpu_seconds(&self) -> u64 {
        self.timeout.as_secs().saturating_mul(4).saturating_add(30)
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::with_timeout(DEFAULT_TIMEOUT)
    }
}

/// Programs the build runs and the folders they live in, read and executed: the host
/// compiler driver, shell, assembler and linker, and gcc's own programs (cc1plus,
/// collect2, lto-wrapper: /usr/lib/gcc on Debian 12, /usr/libexec/gcc on Ubuntu 24.04).
const SYSTEM_RUN: &[&str] = &["/usr/bin", "/bin", "/usr/lib/gcc", "/usr/libexec/gcc"];

/// The dynamic loaders: the kernel opens a program's interpreter for execution too.
const LOADERS: &[&str] = &[
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    "/lib/ld-linux-aarch64.so.1",
    "/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
];

/// Read only: system headers, the loader's cache, ld's plugin folder, and the few kernel
/// files the C library reads for sizing itself (what the traces of real builds opened).
const SYSTEM_READ: &[&str] = &[
    "/usr/include",
    "/usr/local/include",
    "/etc/ld.so.cache",
    "/usr/lib/bfd-plugins",
    "/proc/sys/vm/overcommit_memory",
    "/sys/devices/system/cpu/online",
    "/sys/devices/system/cpu/possible",
];

/// The system's library folders: read, less NVIDIA's libraries (see `fs::is_vendor_library`).
const SYSTEM_LIBRARIES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/lib64",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/aarch64-linux-gnu",
];

/// What one build may touch. Paths are canonical: Landlock holds a rule on the inode a
/// path resolves to, and a path that does not exist is left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// The build's folder: its working directory, HOME and TMPDIR, and the only place it
    /// may create, write or remove anything.
    pub scratch: PathBuf,
    /// Folders and files it may read: the task's folder and declared include folders, the
    /// toolkit's headers, the system's headers, and library files named one by one (the
    /// CUDA runtime; for a trusted build, the libraries the task lets it link).
    pub read: Vec<PathBuf>,
    /// Folders and files whose programs it may run (and read): the toolkit's bin and nvvm,
    /// where cuobjdump and nvdisasm were found, the host compiler's folders, the loader.
    pub run: Vec<PathBuf>,
    /// Library folders it may read file by file, NVIDIA's libraries left out.
    pub libraries: Vec<PathBuf>,
    /// PATH inside: the toolkit's bin, then the system's.
    pub path: Vec<PathBuf>,
    /// RLIMIT_AS, RLIMIT_FSIZE and RLIMIT_CPU of every process.
    pub memory_bytes: u64,
    pub file_bytes: u64,
    pub cpu_seconds: u64,
}

fn canonical(p: impl AsRef<Path>) -> Option<PathBuf> {
    p.as_ref().canonicalize().ok()
}

fn push_unique(list: &mut Vec<PathBuf>, p: Option<PathBuf>) {
    if let Some(p) = p {
        if !list.contains(&p) {
            list.push(p);
        }
    }
}

impl Policy {
    /// The host compiler's and the system's part of every build's policy: what a build
    /// without a toolkit or a task may touch (check-env probes it).
    pub fn system(limits: &Limits) -> Policy {
        let mut run = Vec::new();
        for p in SYSTEM_RUN.iter().chain(LOADERS) {
            push_unique(&mut run, canonical(p));
        }
        let mut read = Vec::new();
        for p in SYSTEM_READ {
            push_unique(&mut read, canonical(p));
        }
        let mut libraries = Vec::new();
        for p in SYSTEM_LIBRARIES {
            push_unique(&mut libraries, canonical(p));
        }
        Policy {
            scratch: PathBuf::new(),
            read,
            run,
            libraries,
            path: ["/usr/bin", "/bin"].map(PathBuf::from).to_vec(),
            memory_bytes: limits.memory_bytes,
            file_bytes: limits.file_bytes,
            cpu_seconds: limits.cpu_seconds(),
        }
    }

    /// The policy of a build of a `task` kernel with `tc` (trusted: the reference or the
    /// baseline, which may link the task's `baseline_libs`); the scratch folder is set per
    /// build ([`Policy::in_scratch`]).
    pub fn new(tc: &Toolchain, task: &Task, trusted: bool, limits: &Limits) -> Policy {
        let system = Policy::system(limits);
        let home = canonical(&tc.home).unwrap_or_else(|| tc.home.clone());
        let mut run = Vec::new();
        for p in [home.join("bin"), home.join("nvvm")] {
            push_unique(&mut run, canonical(p));
        }
        for tool in [Some(&tc.nvcc), tc.cuobjdump.as_ref(), tc.nvdisasm.as_ref()].into_iter().flatten() {
            push_unique(&mut run, canonical(tool).and_then(|t| t.parent().map(Path::to_path_buf)));
        }
        for p in system.run {
            push_unique(&mut run, Some(p));
        }

        let mut read = Vec::new();
        push_unique(&mut read, canonical(home.join("include")));
        let task_dir = std::path::absolute(&task.dir).unwrap_or_else(|_| task.dir.clone());
        push_unique(&mut read, canonical(&task_dir));
        for inc in &task.build.include {
            push_unique(&mut read, canonical(task_dir.join(inc)));
        }
        // Library files by name: the runtime every kernel links, the device runtime
        // (`-rdc`), and the libraries this build may link. Never the library folder.
        push_unique(&mut read, canonical(&tc.cudart));
        push_unique(&mut read, canonical(tc.lib_dir().join("libcudadevrt.a")));
        for lib in task.libs_for(trusted) {
            push_unique(&mut read, find_library(tc, &lib).and_then(canonical));
        }
        for p in system.read {
            push_unique(&mut read, Some(p));
        }

        let mut path = Vec::new();
        push_unique(&mut path, canonical(home.join("bin")));
        path.extend(system.path);
        Policy { read, run, path, ..system }
    }

    /// This policy for a build in `scratch`.
    pub fn in_scratch(&self, scratch: &Path) -> Policy {
        Policy { scratch: canonical(scratch).unwrap_or_else(|| scratch.to_path_buf()), ..self.clone() }
    }

    /// The whole environment of the build's tools: nothing of the orchestrator's.
    pub fn env(&self) -> Vec<(String, std::ffi::OsString)> {
        let path = std::env::join_paths(&self.path).unwrap_or_default();
        vec![
            ("PATH".into(), path),
            ("HOME".into(), self.scratch.clone().into()),
            ("TMPDIR".into(), self.scratch.clone().into()),
            ("LANG".into(), "C".into()),
            ("LC_ALL".into(), "C".into()),
            // A POSIX rule, not a file name: nothing reads /etc/localtime.
            ("TZ".into(), "UTC0".into()),
        ]
    }
}
