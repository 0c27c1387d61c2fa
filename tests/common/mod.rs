//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The project root: where tasks/ and tests/ live. Tests run from it on the GPU machine,
/// where the build machine's paths do not exist.
pub fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if manifest.join("tasks").is_dir() {
        manifest
    } else {
        std::env::current_dir().expect("a current directory")
    }
}

/// The nightshift binary: `$NIGHTSHIFT_BIN`, the one cargo built, or the one on PATH.
/// Every task folder of the project (`tasks/` then `examples/`, each sorted): the folders
/// there that hold a task.toml.
pub fn project_task_dirs() -> Vec<PathBuf> {
    let mut all = Vec::new();
    for group in ["tasks", "examples"] {
        let mut dirs: Vec<PathBuf> =
            std::fs::read_dir(root().join(group)).unwrap().map(|e| e.unwrap().path()).collect();
        dirs.sort();
        all.extend(dirs.into_iter().filter(|d| d.join("task.toml").is_file()));
    }
    all
}

pub fn nightshift_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("NIGHTSHIFT_BIN") {
        return PathBuf::from(p);
    }
    let built = PathBuf::from(env!("CARGO_BIN_EXE_nightshift"));
    if built.is_file() {
        return built;
    }
    which::which("nightshift").expect("the nightshift binary (set NIGHTSHIFT_BIN)")
}

/// Makes the wheel toolchain in `.cuda/` (installed by .ci/run) visible, unless a CUDA
/// home is already configured. Fails loudly when there is none: CI must build for real.
pub fn require_toolchain() -> nightshift::toolkit::toolchain::Toolchain {
    if std::env::var_os("NIGHTSHIFT_CUDA_HOME").is_none() {
        if let Some(home) = nightshift::toolkit::toolchain::wheel_homes(&root().join(".cuda")).into_iter().next() {
            // SAFETY: set before any thread of this test reads the environment for tools.
            unsafe { std::env::set_var("NIGHTSHIFT_CUDA_HOME", home) };
        }
    }
    nightshift::toolkit::toolchain::Toolchain::find()
        .unwrap_or_else(|e| panic!("these tests build real kernels and need nvcc: {e}\n(run .ci/run once to install the CUDA wheels into .cuda/)"))
}

/// A build cache shared by the tests of one checkout (content-addressed, so safe).
pub fn test_cache() -> PathBuf {
    let dir = root().join("target").join("nightshift-test-cache");
    std::fs::create_dir_all(&dir).expect("a cache folder");
    dir
}

/// The nightshift binary, run from the project root with the wheel toolchain and the
/// shared test build cache, for tests that build real kernels.
pub fn building_command() -> Command {
    require_toolchain();
    let mut c = Command::new(nightshift_bin());
    c.current_dir(root()).env("NIGHTSHIFT_CACHE_DIR", test_cache());
    c
}

pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(nightshift_bin()).args(args).current_dir(root()).output().expect("nightshift runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn path(rel: &str) -> String {
    root().join(rel).display().to_string()
}

pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// A kernel for the softmax task whose simulated outcome is `marker` (see
/// `optimize::evaluator`: `speedup=X, cv=C`, `fail=CLASS`, `final=env-error`).
pub fn sim_kernel(marker: &str, extra: &str) -> String {
    format!(
        "#include <cuda_runtime.h>\n// NIGHTSHIFT_SIM({marker})\n{extra}\n__global__ void k(const float* x, float* y, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }}\nextern \"C\" void softmax(const float* x, float* y, int rows, int cols, cudaStream_t stream) {{\n  k<<<(rows * cols + 255) / 256, 256, 0, stream>>>(x, y, rows * cols);\n}}\n"
    )
}

/// A copy of a folder tree (a sample run directory, a task).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        let dest = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

/// A run's events so far: the lines of `events.jsonl` that parse (a run still going may
/// be writing its last line), none when it has no log yet.
pub fn events(run: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `source` rewritten by each recipe application of `path` in turn (`index-width`,
/// `row-strip:rows=8,cols=4`); panics naming the one that declines.
pub fn apply_path(source: &str, path: &[impl AsRef<str>], facts: &rewrite::Facts) -> String {
    path.iter().fold(source.to_string(), |s, a| {
        let a = a.as_ref();
        rewrite::apply(&a.parse().unwrap(), &s, facts).unwrap_or_else(|e| panic!("{a}: {e}")).source
    })
}
