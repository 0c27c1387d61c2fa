//! Finding the CUDA tools at run time. The build of nightshift never needs them; a
//! missing tool is an [`EnvError`] that says what is missing and how to install it.
//!
//! A CUDA "home" is searched in this order: `$NIGHTSHIFT_CUDA_HOME`, `$CUDA_HOME`,
//! `$CUDA_PATH`, the parent of the `nvcc` on `PATH`, `/usr/local/cuda`, and the PyPI
//! wheel layout under `./.cuda` (see README.md). Profilers are looked up in the home,
//! then on `PATH`, then in the usual Nsight Compute install locations.

use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const WHEEL_INSTALL_HINT: &str = "install the CUDA 13.0 toolkit (nvcc), or the compiler wheels: \
python3 -m venv .cuda && .cuda/bin/pip install nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 \
nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85 \
nvidia-cuda-cuobjdump==13.2.86 nvidia-cuda-nvdisasm==13.2.86; or set NIGHTSHIFT_CUDA_HOME";

/// Something the environment lacks; maps to exit code 3.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what} not found: {hint}")]
pub struct EnvError {
    pub what: String,
    pub hint: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Toolchain {
    pub home: PathBuf,
    pub nvcc: PathBuf,
    /// `release 13.0, V13.0.88`
    pub nvcc_version: String,
    /// The CUDA runtime shared library every candidate links (one runtime per worker).
    pub cudart: PathBuf,
    pub cuobjdump: Option<PathBuf>,
    pub nvdisasm: Option<PathBuf>,
}

impl Toolchain {
    pub fn find() -> Result<Toolchain, EnvError> {
        let mut tried = Vec::new();
        for home in candidate_homes() {
            let nvcc = home.join("bin/nvcc");
            tried.push(home.display().to_string());
            if !nvcc.is_file() {
                continue;
            }
            let Some(cudart) = find_cudart(&home) else {
                continue;
            };
            let nvcc_version = nvcc_version(&nvcc).ok_or_else(|| EnvError {
                what: format!("a working nvcc ({} --version failed)", nvcc.display()),
                hint: WHEEL_INSTALL_HINT.into(),
            })?;
            return Ok(Toolchain {
                cuobjdump: find_tool(&home, "cuobjdump"),
                nvdisasm: find_tool(&home, "nvdisasm"),
                home,
                nvcc,
                nvcc_version,
                cudart,
            });
        }
        tried.dedup();
        Err(EnvError {
            what: format!(
                "nvcc with the CUDA runtime (looked in: {})",
                if tried.is_empty() { "nowhere".into() } else { tried.join(", ") }
            ),
            hint: WHEEL_INSTALL_HINT.into(),
        })
    }

    pub fn lib_dir(&self) -> &Path {
        self.cudart.parent().unwrap_or(&self.home)
    }

    pub fn require_cuobjdump(&self) -> Result<&Path, EnvError> {
        self.cuobjdump.as_deref().ok_or_else(|| EnvError {
            what: "cuobjdump".into(),
            hint: "install the CUDA toolkit or the wheel nvidia-cuda-cuobjdump==13.2.86".into(),
        })
    }
}

fn candidate_homes() -> Vec<PathBuf> {
    let mut homes = Vec::new();
    for var in ["NIGHTSHIFT_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            homes.push(PathBuf::from(v));
        }
    }
    if let Ok(nvcc) = which::which("nvcc") {
        let nvcc = nvcc.canonicalize().unwrap_or(nvcc);
        if let Some(home) = nvcc.parent().and_then(Path::parent) {
            homes.push(home.to_path_buf());
        }
    }
    homes.push(PathBuf::from("/usr/local/cuda"));
    homes.extend(wheel_homes(Path::new(".cuda")));
    homes
}

/// `<venv>/lib/python3.*/site-packages/nvidia/cu13`, the layout the PyPI wheels install.
pub fn wheel_homes(venv: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(venv.join("lib")) else {
        return Vec::new();
    };
    let mut homes: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages/nvidia/cu13"))
        .filter(|p| p.join("bin/nvcc").is_file())
        .map(|p| p.canonicalize().unwrap_or(p))
        .collect();
    homes.sort();
    homes
}

/// The highest `lib<name>.so.N` (one version component, the SONAME form) in `dir`.
pub fn versioned_library(dir: &Path, name: &str) -> Option<PathBuf> {
    let prefix = format!("lib{name}.so.");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n[prefix.len()..].split('.').count() == 1)
        })
        .collect();
    found.sort();
    found.pop()
}

fn find_cudart(home: &Path) -> Option<PathBuf> {
    for dir in ["lib64", "lib", "targets/x86_64-linux/lib"] {
        let dir = home.join(dir);
        if let Some(p) = versioned_library(&dir, "cudart") {
            return Some(p);
        }
        if dir.join("libcudart.so").exists() {
            return Some(dir.join("libcudart.so"));
        }
    }
    None
}

fn nvcc_version(nvcc: &Path) -> Option<String> {
    let out = Command::new(nvcc).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.contains("release"))
        .map(|l| l.split_once("tools, ").map(|(_, v)| v).unwrap_or(l).trim().to_string())
}

/// A CUDA tool in `home/bin`, else on PATH, else in the usual Nsight install folders.
pub fn find_tool(home: &Path, name: &str) -> Option<PathBuf> {
    let in_home = home.join("bin").join(name);
    if in_home.is_file() {
        return Some(in_home);
    }
    if let Ok(p) = which::which(name) {
        return Some(p);
    }
    for root in ["/usr/local/cuda/bin", "/opt/nvidia/nsight-compute"] {
        let p = Path::new(root).join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    if let Ok(entries) = std::fs::read_dir("/opt/nvidia/nsight-compute") {
        let mut found: Vec<PathBuf> =
            entries.filter_map(|e| e.ok()).map(|e| e.path().join(name)).filter(|p| p.is_file()).collect();
        found.sort();
        return found.pop();
    }
    None
}

/// A profiling tool (ncu, compute-sanitizer) wherever it can be found.
pub fn find_profiler(name: &str) -> Option<PathBuf> {
    for home in candidate_homes() {
        if let Some(p) = find_tool(&home, name) {
            return Some(p);
        }
    }
    None
}

/// First line of `tool --version` output that carries a version number.
pub fn tool_version(tool: &Path) -> Option<String> {
    let out = Command::new(tool).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    text.lines()
        .rev()
        .find(|l| l.contains("Version") || l.contains("release") || l.chars().any(|c| c.is_ascii_digit()))
        .map(|l| l.trim().to_string())
}
