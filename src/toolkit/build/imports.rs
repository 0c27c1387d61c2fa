//! What a built shared library asks of the dynamic linker: the libraries it needs
//! (`DT_NEEDED`) and the symbols it imports. Candidates link the CUDA runtime as a
//! shared library, so their import list is short and every entry is the candidate's own
//! doing: a cuBLAS call, a `dlopen`, a `fork` stands out and is refused unless the task
//! allows it.
//!
//! This is an early, friendly rejection with a clear message, not a wall: a library can
//! reach a function without importing it (a symbol looked up at run time, a syscall made
//! directly). What a candidate can load is enforced where it runs, by the worker's
//! sandbox; what it can read while it is built, by the confined build (`wall::build`).

use object::read::elf::{Dyn, ElfFile64};
use object::{Object, ObjectSymbol};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkFacts {
    pub needed: Vec<String>,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
}

/// Why a built library's link facts cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("not a 64-bit ELF shared library: {0}")]
    NotElf(#[source] object::Error),
    /// The dynamic section or its string table does not read.
    #[error(transparent)]
    Dynamic(object::Error),
    #[error("bad DT_NEEDED string")]
    BadNeeded,
}

pub fn read_link_facts(bytes: &[u8]) -> Result<LinkFacts, LinkError> {
    let elf = ElfFile64::<object::Endianness>::parse(bytes).map_err(LinkError::NotElf)?;
    let endian = elf.endian();
    let sections = elf.elf_section_table();
    let mut needed = Vec::new();
    if let Some((entries, link)) = sections.dynamic(endian, bytes).map_err(LinkError::Dynamic)? {
        let strings = sections.strings(endian, bytes, link).map_err(LinkError::Dynamic)?;
        for d in entries {
            if d.tag32(endian) == Some(object::elf::DT_NEEDED) {
                let offset = d.d_val(endian) as u32;
                let name = strings.get(offset).map_err(|_| LinkError::BadNeeded)?;
                needed.push(String::from_utf8_lossy(name).into_owned());
            }
        }
    }
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    for sym in elf.dynamic_symbols() {
        let Ok(name) = sym.name() else { continue };
        if name.is_empty() {
            continue;
        }
        if sym.is_undefined() {
            imports.push(name.to_string());
        } else if sym.is_definition() {
            exports.push(name.to_string());
        }
    }
    imports.sort();
    exports.sort();
    Ok(LinkFacts { needed, imports, exports })
}

/// Libraries any kernel may need: the C/C++ runtime and the CUDA runtime.
const ALWAYS_ALLOWED_LIBS: &[&str] =
    &["libcudart", "libstdc++", "libgcc_s", "libc", "libm", "libdl", "libpthread", "librt", "ld-linux-x86-64"];

/// Symbol families that identify a library a task may or may not allow.
const LIBRARY_FAMILIES: &[(&str, &str)] = &[
    ("cublasLt", "cublasLt"),
    ("cublas", "cublas"),
    ("cudnn", "cudnn"),
    ("cufft", "cufft"),
    ("curand", "curand"),
    ("cusparse", "cusparse"),
    ("cusolver", "cusolver"),
    ("cutensor", "cutensor"),
    ("nccl", "nccl"),
    ("nvrtc", "nvrtc"),
    ("nvJitLink", "nvJitLink"),
];

/// Imports no kernel needs: loading code behind the check's back, or leaving the process.
const NEVER_ALLOWED: &[&str] = &[
    "dlopen",
    "dlmopen",
    "dlsym",
    "dlvsym",
    "fork",
    "vfork",
    "clone",
    "execve",
    "execv",
    "execvp",
    "execvpe",
    "execl",
    "execlp",
    "execle",
    "system",
    "popen",
    "posix_spawn",
    "posix_spawnp",
    "ptrace",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForbiddenImport {
    pub symbol: String,
    pub reason: String,
}

fn lib_stem(soname: &str) -> &str {
    soname.split(".so").next().unwrap_or(soname)
}

/// Checks `facts` against the libraries `allowed` (names as for `-l`).
pub fn forbidden_imports(facts: &LinkFacts, allowed: &[String]) -> Vec<ForbiddenImport> {
    let is_allowed_lib =
        |name: &str| ALWAYS_ALLOWED_LIBS.contains(&name) || allowed.iter().any(|a| name == format!("lib{a}"));
    let mut out = Vec::new();
    for lib in &facts.needed {
        let stem = lib_stem(lib);
        if !is_allowed_lib(stem) {
            out.push(ForbiddenImport {
                symbol: lib.clone(),
                reason: format!("links {lib}, which this task does not allow"),
            });
        }
    }
    for raw in &facts.imports {
        let sym = raw.split('@').next().unwrap_or(raw);
        if NEVER_ALLOWED.contains(&sym) {
            out.push(ForbiddenImport {
                symbol: sym.to_string(),
                reason: format!("calls {sym}: kernels may not load code or start processes"),
            });
            continue;
        }
        // Driver-API symbols come from libcuda, which the runtime already wraps.
        if sym.starts_with("cu") && sym.len() > 2 && sym.as_bytes()[2].is_ascii_uppercase() && !sym.starts_with("cuda")
        {
            if !allowed.iter().any(|a| a == "cuda") {
                out.push(ForbiddenImport {
                    symbol: sym.to_string(),
                    reason: format!(
                        "calls the driver API ({sym}); use the CUDA runtime, or allow \"cuda\" in [build] libs"
                    ),
                });
            }
            continue;
        }
        if let Some((_, lib)) = LIBRARY_FAMILIES.iter().find(|(prefix, _)| sym.starts_with(prefix)) {
            if !allowed.iter().any(|a| a == lib) {
                out.push(ForbiddenImport {
                    symbol: sym.to_string(),
                    reason: format!("calls {sym} from lib{lib}, which this task does not allow"),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(needed: &[&str], imports: &[&str]) -> LinkFacts {
        LinkFacts {
            needed: needed.iter().map(|s| s.to_string()).collect(),
            imports: imports.iter().map(|s| s.to_string()).collect(),
            exports: vec![],
        }
    }

    #[test]
    fn plain_runtime_kernels_pass() {
        let f = facts(
            &["libcudart.so.13", "libstdc++.so.6", "libgcc_s.so.1", "libc.so.6"],
            &[
                "__cudaLaunchKernel@libcudart.so.13",
                "cudaGetLastError@libcudart.so.13",
                "memcpy@GLIBC_2.14",
                "__cxa_atexit@GLIBC_2.2.5",
            ],
        );
        assert!(forbidden_imports(&f, &[]).is_empty());
    }

    #[test]
    fn cublas_is_refused_unless_allowed() {
        let f = facts(
            &["libcudart.so.13", "libcublas.so.13"],
            &["cublasGemmEx@libcublas.so.13", "cublasCreate_v2@libcublas.so.13"],
        );
        let found = forbidden_imports(&f, &[]);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].reason.contains("links libcublas.so.13"));
        assert!(found.iter().any(|f| f.symbol == "cublasGemmEx"));
        assert!(forbidden_imports(&f, &["cublas".into()]).is_empty());
    }

    #[test]
    fn cublaslt_is_its_own_library() {
        let f = facts(&["libcublasLt.so.13"], &["cublasLtMatmul"]);
        assert_eq!(forbidden_imports(&f, &["cublas".into()]).len(), 2);
        assert!(forbidden_imports(&f, &["cublasLt".into()]).is_empty());
    }

    #[test]
    fn loading_code_and_spawning_processes_are_never_allowed() {
        let f = facts(&["libc.so.6"], &["dlopen@GLIBC_2.34", "system@GLIBC_2.2.5", "cuModuleLoadData"]);
        let found = forbidden_imports(&f, &["cublas".into()]);
        let symbols: Vec<_> = found.iter().map(|f| f.symbol.as_str()).collect();
        assert_eq!(symbols, vec!["dlopen", "system", "cuModuleLoadData"]);
    }
}
