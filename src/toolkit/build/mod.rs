//! Building one candidate: shim + candidate -> shared library with nvcc, then the facts
//! the verifier and the diagnoses need (ptxas resources, SASS with line info, imports).
//!
//! Builds are cached by a content hash of everything that can change the binary (sources,
//! task headers, flags, arch, nvcc version), and a cache entry is published by an atomic
//! rename, so parallel builds of the same candidate never see half an entry. Failed builds
//! are cached too: a generator that repeats itself costs no second compile. A build that
//! ran out of time or memory is not: the next try may have more CPU, or a machine under
//! less pressure.
//!
//! Every tool a build starts (nvcc and everything it runs, cuobjdump and nvdisasm on the
//! library) is started through the caller's [`Confine`]: the build writes only its scratch
//! folder (the future cache entry) and runs as long as the caller allows. The entry is
//! published afterwards, by this (unconfined) process. What the tools may read, write and
//! run is the caller's to decide (the wall's confined build, `wall::build`); toolkit only
//! asks for it.

pub mod imports;
pub mod shim;

use crate::task::Task;
use crate::toolkit::process;
use crate::toolkit::toolchain::{EnvError, Toolchain};
use imports::{ForbiddenImport, LinkFacts};
use sass::ptxas::{parse_ptxas, PtxasReport};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Bumped whenever the layout of a cache entry or the shim changes, or what a build may do
/// (v2: builds are confined; entries built unconfined are not reused).
const CACHE_FORMAT: &str = "nightshift-build-v2";
const LIBRARY_NAME: &str = "kernel.so";
const RECORD_NAME: &str = "build.json";
pub const SASS_NAME: &str = "sass.txt";
pub const SASS_LINES_NAME: &str = "sass_lines.txt";
pub const LOG_NAME: &str = "build.log";

/// How a build starts its tools, and for how long they may run: the caller's (the wall's
/// confined build). The build's tools run only through it.
pub trait Confine: Sync {
    /// A command that runs `program` confined to `scratch`: the build's folder, its working
    /// directory and the only folder it may write. The build adds the program's arguments
    /// and runs it in its own process group with a scrubbed environment.
    fn command(&self, program: &Path, scratch: &Path) -> Command;
    /// How long nvcc may run (and each cuobjdump or nvdisasm run after it); past it the
    /// process group is killed and the build fails as [`BuildFailure::Timeout`], uncached.
    fn timeout(&self) -> Duration;
    /// The memory limit in words ("16 GiB of address space per process"), for the log of a
    /// build that ran out of it.
    fn memory_limit(&self) -> String;
    /// What a tool's stderr says about the confinement itself (a layer the kernel lacks),
    /// as notes of the build.
    fn notes(&self, _stderr: &str) -> Vec<String> {
        Vec::new()
    }
}

#[derive(Debug, Clone)]
pub struct BuildSpec<'a> {
    pub task: &'a Task,
    pub source: &'a Path,
    /// Baseline and reference may link `baseline_libs`; candidates may not.
    pub trusted: bool,
    /// `sm_90a`, `sm_90`, ...
    pub arch: String,
    pub extra_flags: Vec<String>,
    /// `-DNAME=VALUE` macros (the tuner's knobs).
    pub defines: BTreeMap<String, String>,
}

/// Why a candidate did not become a loadable library.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum BuildFailure {
    Compile {
        log: String,
    },
    MissingEntry {
        entry: String,
        detail: String,
    },
    ForbiddenImport {
        imports: Vec<ForbiddenImport>,
    },
    /// nvcc ran past its time limit and was killed with everything it started. Never
    /// cached: the next try may have more CPU.
    Timeout {
        seconds: f64,
        log: String,
    },
}

impl BuildFailure {
    pub fn summary(&self) -> String {
        match self {
            BuildFailure::Compile { log } => {
                let first = log.lines().find(|l| l.contains("error")).unwrap_or("nvcc failed");
                format!("build error: {}", first.trim())
            }
            BuildFailure::MissingEntry { detail, .. } => detail.clone(),
            BuildFailure::ForbiddenImport { imports } => {
                let list: Vec<String> = imports.iter().map(|i| i.reason.clone()).collect();
                format!("forbidden import: {}", list.join("; "))
            }
            BuildFailure::Timeout { seconds, .. } => format!(
                "build timeout: nvcc was still compiling after {seconds:.0} s and was killed ([build] timeout_s in task.toml, or --build-timeout, sets the limit)"
            ),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct BuildRecord {
    key: String,
    source_name: String,
    command: Vec<String>,
    nvcc_seconds: f64,
    failure: Option<BuildFailure>,
    ptxas: PtxasReport,
    link: LinkFacts,
    has_sass: bool,
    has_sass_lines: bool,
    notes: Vec<String>,
}

/// A built candidate (or a cached one).
#[derive(Debug, Clone, Serialize)]
pub struct Built {
    pub key: String,
    pub dir: PathBuf,
    pub library: PathBuf,
    /// The file name the candidate had, as line info reports it.
    pub source_name: String,
    pub cached: bool,
    /// Wall time of this call (near zero when cached).
    pub seconds: f64,
    /// What nvcc took when the entry was first built.
    pub nvcc_seconds: f64,
    pub ptxas: PtxasReport,
    pub link: LinkFacts,
    pub sass: Option<PathBuf>,
    pub sass_lines: Option<PathBuf>,
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{}", failure.summary())]
    Rejected { failure: BuildFailure, dir: PathBuf, seconds: f64 },
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error("{0}")]
    Io(String),
}

/// The directory builds and other reusable artifacts are cached in.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("NIGHTSHIFT_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("nightshift");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(home).join(".cache/nightshift");
    }
    PathBuf::from(".nightshift-cache")
}

/// An `--arch` that names no architecture nvcc could build for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}`: expected an architecture like sm_90a or sm_90")]
pub struct ArchError(pub String);

/// `sm_90a` -> `-gencode=arch=compute_90a,code=sm_90a`.
pub fn gencode(arch: &str) -> Result<String, ArchError> {
    let digits = arch.strip_prefix("sm_").ok_or_else(|| ArchError(arch.into()))?;
    let valid = digits.len() >= 2
        && digits.chars().take_while(|c| c.is_ascii_digit()).count() >= 2
        && digits.chars().skip_while(|c| c.is_ascii_digit()).all(|c| c.is_ascii_lowercase())
        && digits.chars().skip_while(|c| c.is_ascii_digit()).count() <= 1;
    if !valid {
        return Err(ArchError(arch.into()));
    }
    Ok(format!("-gencode=arch=compute_{digits},code={arch}"))
}

/// The best build target for a device of compute capability `major.minor`: the
/// architecture-specific variant where one exists (wgmma and setmaxnreg need sm_90a).
pub fn arch_for_capability(major: i32, minor: i32) -> String {
    if major >= 9 {
        format!("sm_{major}{minor}a")
    } else {
        format!("sm_{major}{minor}")
    }
}

fn task_headers(task: &Task) -> Vec<(String, Vec<u8>)> {
    task.header_files().into_iter().filter_map(|(name, path)| std::fs::read(path).ok().map(|b| (name, b))).collect()
}

/// Finds `lib<name>.so` (or its highest `.so.N`) in the toolchain's library folder.
pub fn find_library(tc: &Toolchain, name: &str) -> Option<PathBuf> {
    let dir = tc.lib_dir();
    let plain = dir.join(format!("lib{name}.so"));
    if plain.exists() {
        return Some(plain);
    }
    crate::toolkit::toolchain::versioned_library(dir, name)
}

fn nvcc_command(tc: &Toolchain, spec: &BuildSpec, gencode: &str) -> Result<Vec<String>, BuildError> {
    // nvcc runs in the build folder: a relative task directory would not resolve there.
    let task_dir = std::path::absolute(&spec.task.dir).unwrap_or_else(|_| spec.task.dir.clone());
    let mut args: Vec<String> = vec![
        "-O3".into(),
        gencode.into(),
        "-lineinfo".into(),
        "-Xptxas".into(),
        "-v".into(),
        "-shared".into(),
        "-Xcompiler".into(),
        "-fPIC".into(),
        "-cudart".into(),
        "none".into(),
        format!("-I{}", task_dir.display()),
    ];
    for inc in &spec.task.build.include {
        args.push(format!("-I{}", task_dir.join(inc).display()));
    }
    args.extend(spec.task.build.flags.iter().cloned());
    args.extend(spec.extra_flags.iter().cloned());
    for (k, v) in &spec.defines {
        args.push(format!("-D{k}={v}"));
    }
    args.extend(["-Xlinker".into(), tc.cudart.display().to_string()]);
    for lib in spec.task.libs_for(spec.trusted) {
        let path = find_library(tc, &lib).ok_or_else(|| {
            BuildError::Env(EnvError {
                what: format!("lib{lib}.so (the task links {lib})"),
                hint: format!("install it next to the CUDA runtime in {}", tc.lib_dir().display()),
            })
        })?;
        args.extend(["-Xlinker".into(), path.display().to_string()]);
    }
    args.extend([
        "-Xlinker".into(),
        format!("-rpath={}", tc.lib_dir().display()),
        "-Xlinker".into(),
        "-Bsymbolic".into(),
        "-o".into(),
        LIBRARY_NAME.into(),
        "shim.cu".into(),
    ]);
    Ok(args)
}

/// Builds `spec` (or returns the cached build) under `cache/build/`, every tool started
/// through `confine`.
pub fn build(tc: &Toolchain, cache: &Path, spec: &BuildSpec, confine: &dyn Confine) -> Result<Built, BuildError> {
    let started = Instant::now();
    let source = std::fs::read(spec.source)
        .map_err(|e| BuildError::Io(format!("cannot read {}: {e}", spec.source.display())))?;
    let source_name = spec
        .source
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.contains('"') && !n.contains('\\'))
        .unwrap_or("kernel.cu")
        .to_string();
    let gencode = gencode(&spec.arch).map_err(|e| BuildError::Io(e.to_string()))?;
    let shim = shim::shim_source(spec.task, &source_name);
    let command = nvcc_command(tc, spec, &gencode)?;

    let mut h = Sha256::new();
    for part in [
        CACHE_FORMAT.as_bytes(),
        tc.nvcc_version.as_bytes(),
        tc.nvcc.as_os_str().as_encoded_bytes(),
        command.join("\x1f").as_bytes(),
        shim.as_bytes(),
        source_name.as_bytes(),
        &source,
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    for (name, bytes) in task_headers(spec.task) {
        h.update(name.as_bytes());
        h.update(&bytes);
    }
    let key: String = h.finalize().iter().take(12).map(|b| format!("{b:02x}")).collect();
    let root = cache.join("build");
    let dir = root.join(&key);

    if let Some(built) = load_cached(&dir, started)? {
        return Ok(built);
    }

    std::fs::create_dir_all(&root)
        .map_err(|e| BuildError::Io(format!("cannot create the build cache {}: {e}", root.display())))?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{key}-"))
        .tempdir_in(&root)
        .map_err(|e| BuildError::Io(format!("cannot create a build folder in {}: {e}", root.display())))?;
    let work = tmp.path();
    let io = |e: std::io::Error| BuildError::Io(format!("writing the build folder: {e}"));
    std::fs::write(work.join(&source_name), &source).map_err(io)?;
    std::fs::write(work.join("shim.cu"), &shim).map_err(io)?;

    let timeout = confine.timeout();
    let mut cmd = confine.command(&tc.nvcc, work);
    cmd.args(&command).current_dir(work);
    let out = process::run_captured(&mut cmd, timeout)
        .map_err(|e| BuildError::Io(format!("cannot run {}: {e}", tc.nvcc.display())))?;
    let mut output = format!("{}{}", out.stdout, out.stderr);
    let out_of_memory = !out.timed_out && !out.success() && ran_out_of_memory(&output);
    if out.timed_out {
        output.push_str(&format!("\nnvcc {}\n", out.describe_end(timeout)));
    } else if out_of_memory {
        output.push_str(&format!(
            "\nnightshift: the build ran out of memory: its limit is {} (a compiler that needs more is a build error)\n",
            confine.memory_limit()
        ));
    }
    let log = format!("$ nvcc {}\n{output}", command.join(" "));
    if out.timed_out || out_of_memory {
        let (failure, why) = if out.timed_out {
            (BuildFailure::Timeout { seconds: timeout.as_secs_f64(), log: output }, "timeout")
        } else {
            (BuildFailure::Compile { log: output }, "memory")
        };
        let dir = keep_uncached(&root, &key, why, tmp, &log);
        return Err(BuildError::Rejected { failure, dir, seconds: started.elapsed().as_secs_f64() });
    }
    std::fs::write(work.join(LOG_NAME), &log).map_err(io)?;

    let mut record = BuildRecord {
        key: key.clone(),
        source_name: source_name.clone(),
        command: command.clone(),
        nvcc_seconds: out.seconds,
        failure: None,
        ptxas: parse_ptxas(&out.stderr),
        link: LinkFacts::default(),
        has_sass: false,
        has_sass_lines: false,
        notes: confine.notes(&out.stderr),
    };
    if !out.success() {
        record.failure = Some(BuildFailure::Compile { log: output });
    } else {
        let lib_bytes = std::fs::read(work.join(LIBRARY_NAME)).map_err(io)?;
        record.link = imports::read_link_facts(&lib_bytes).map_err(|e| BuildError::Io(e.to_string()))?;
        record.failure = check_link(spec, &record.link);
        if record.failure.is_none() {
            dump_sass(tc, work, confine, &mut record);
        }
    }
    let json = serde_json::to_vec_pretty(&record).expect("a build record serializes");
    std::fs::write(work.join(RECORD_NAME), json).map_err(io)?;

    // Publish atomically; if a parallel build won the race, use its entry.
    let kept = tmp.keep();
    if std::fs::rename(&kept, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&kept);
    }
    let mut built = load_cached(&dir, started)?
        .ok_or_else(|| BuildError::Io(format!("the build entry {} vanished", dir.display())))?;
    built.cached = false;
    Ok(built)
}

fn check_link(spec: &BuildSpec, link: &LinkFacts) -> Option<BuildFailure> {
    let entry = &spec.task.entry;
    let imports_entry = link.imports.iter().any(|s| s.split('@').next() == Some(entry.as_str()));
    if imports_entry || !link.exports.iter().any(|s| s == entry) {
        return Some(BuildFailure::MissingEntry {
            entry: entry.clone(),
            detail: format!(
                "missing entry: the candidate does not define `extern \"C\" void {entry}(...)`; every kernel of this task must export it with the task's signature"
            ),
        });
    }
    let forbidden = imports::forbidden_imports(link, &spec.task.libs_for(spec.trusted));
    if !forbidden.is_empty() {
        return Some(BuildFailure::ForbiddenImport { imports: forbidden });
    }
    None
}

/// Whether a failed build's output says a compiler ran out of memory (cudafe++ and cicc:
/// "out of memory", gcc: "memory exhausted", ptxas: "Memory allocation failure").
fn ran_out_of_memory(output: &str) -> bool {
    const SIGNS: [&str; 5] =
        ["out of memory", "memory exhausted", "cannot allocate memory", "memory allocation failure", "bad_alloc"];
    let output = output.to_ascii_lowercase();
    SIGNS.iter().any(|s| output.contains(s))
}

/// A build that ran out of time or memory is not cached: its scratch folder goes, and its
/// log is kept in `<key>.<why>/` (replacing an earlier one), which no cache lookup reads.
fn keep_uncached(root: &Path, key: &str, why: &str, tmp: tempfile::TempDir, log: &str) -> PathBuf {
    let dir = root.join(format!("{key}.{why}"));
    drop(tmp);
    let _ = std::fs::remove_dir_all(&dir);
    if let Ok(fresh) = tempfile::Builder::new().prefix(&format!(".{key}-{why}-")).tempdir_in(root) {
        let kept = fresh.keep();
        if std::fs::write(kept.join(LOG_NAME), log).is_err() || std::fs::rename(&kept, &dir).is_err() {
            let _ = std::fs::remove_dir_all(&kept);
        }
    }
    dir
}

fn dump_sass(tc: &Toolchain, work: &Path, confine: &dyn Confine, record: &mut BuildRecord) {
    let Some(cuobjdump) = &tc.cuobjdump else {
        record.notes.push("cuobjdump not found: no SASS kept".into());
        return;
    };
    let tools = crate::toolkit::disasm::Tools {
        start: &|tool: &Path| confine.command(tool, work),
        scratch: Some(work),
        timeout: confine.timeout(),
    };
    match crate::toolkit::disasm::disassemble_with(cuobjdump, tc.nvdisasm.as_deref(), &work.join(LIBRARY_NAME), &tools)
    {
        Ok(d) => {
            record.has_sass = std::fs::write(work.join(SASS_NAME), d.sass).is_ok();
            if let Some(lines) = d.lines {
                record.has_sass_lines = std::fs::write(work.join(SASS_LINES_NAME), lines).is_ok();
            }
            record.notes.extend(d.notes);
        }
        Err(e) => record.notes.push(e.to_string()),
    }
}

fn load_cached(dir: &Path, started: Instant) -> Result<Option<Built>, BuildError> {
    let Ok(bytes) = std::fs::read(dir.join(RECORD_NAME)) else {
        return Ok(None);
    };
    let Ok(record) = serde_json::from_slice::<BuildRecord>(&bytes) else {
        // An unreadable entry (older format, disk trouble) is rebuilt, not trusted.
        let _ = std::fs::remove_dir_all(dir);
        return Ok(None);
    };
    if let Some(failure) = record.failure {
        return Err(BuildError::Rejected { failure, dir: dir.to_path_buf(), seconds: started.elapsed().as_secs_f64() });
    }
    Ok(Some(Built {
        key: record.key,
        dir: dir.to_path_buf(),
        library: dir.join(LIBRARY_NAME),
        source_name: record.source_name,
        cached: true,
        seconds: started.elapsed().as_secs_f64(),
        nvcc_seconds: record.nvcc_seconds,
        ptxas: record.ptxas,
        link: record.link,
        sass: record.has_sass.then(|| dir.join(SASS_NAME)),
        sass_lines: record.has_sass_lines.then(|| dir.join(SASS_LINES_NAME)),
        notes: record.notes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gencode_accepts_real_architectures_only() {
        assert_eq!(gencode("sm_90a").unwrap(), "-gencode=arch=compute_90a,code=sm_90a");
        assert_eq!(gencode("sm_90").unwrap(), "-gencode=arch=compute_90,code=sm_90");
        assert_eq!(gencode("sm_100a").unwrap(), "-gencode=arch=compute_100a,code=sm_100a");
        for bad in ["90", "sm_9", "sm_90ab", "sm_9x0", "compute_90", "sm_90A"] {
            assert!(gencode(bad).is_err(), "{bad}");
        }
        assert_eq!(arch_for_capability(9, 0), "sm_90a");
        assert_eq!(arch_for_capability(8, 6), "sm_86");
    }

    #[test]
    fn every_compiler_s_words_for_running_out_of_memory_are_recognised() {
        for said in [
            "x.h(40): catastrophic error: out of memory",
            "cc1plus: out of memory allocating 65536 bytes after a total of 1 bytes",
            "virtual memory exhausted: Cannot allocate memory",
            "ptxas fatal   : Memory allocation failure",
            "terminate called after throwing an instance of 'std::bad_alloc'",
        ] {
            assert!(ran_out_of_memory(said), "{said}");
        }
        assert!(!ran_out_of_memory("shim.cu(3): error: identifier \"x\" is undefined"));
    }
}
