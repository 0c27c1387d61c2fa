//! Which library files a worker may read, file by file: a library it may not read, it
//! cannot load by any route (dlopen, its own ELF loader over bytes it reads, a copy into
//! the scratch folder), so the list is the whole of what it can load.
//!
//! The list: its kernel libraries and what they need (DT_NEEDED, resolved as ld.so does:
//! DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH with $ORIGIN, /etc/ld.so.cache, the default
//! folders, glibc-hwcaps subfolders), the executable and what it needs, glibc's own
//! modules (NSS, gconv), the CUDA driver's libraries (libcuda.so*, libnvidia-*.so* and
//! their siblings, in every folder that holds a libcuda), the vendor libraries the policy
//! names (the task's baseline_libs, for the reference and baseline only), and, under a
//! hosting tool, the tool's injection folders. The CUDA runtime a candidate links
//! (libcudart.so.13) sits beside libcublas.so.13 in /usr/local/cuda/lib64 or the wheel's
//! nvidia/cu13/lib: only the one file is granted, never the folder.
//!
//! ELF headers are read with pread (a few KiB per library, never the whole file: cuBLAS
//! Lt weighs half a gigabyte).

use std::collections::BTreeSet;
use std::ffi::CStr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Library names that mark a folder as a vendor folder: one that may not be granted
/// whole (cuBLAS, cuDNN, cuFFT, cuSPARSE, cuSOLVER, cuRAND, NCCL, NVRTC, nvJitLink, NPP,
/// nvJPEG, cuTENSOR, cuFile, TensorRT, NVSHMEM...).
pub(super) const VENDOR_PREFIXES: &[&str] = &[
    "libcublas",
    "libcudnn",
    "libcufft",
    "libcusparse",
    "libcusolver",
    "libcurand",
    "libnccl",
    "libnvrtc",
    "libnvJitLink",
    "libnvjitlink",
    "libnvjpeg",
    "libnpp",
    "libcutensor",
    "libcufile",
    "libnvblas",
    "libnvinfer",
    "libnvshmem",
    "libcudla",
    "libnvvm",
];

/// Names of the CUDA driver's own libraries (installed with the kernel module, in its
/// folder): the driver API, NVML, the PTX JIT, NVVM for LTO, the debugger API the
/// sanitizer uses, OptiX and the video engines the driver ships alongside.
fn is_driver_library(name: &str) -> bool {
    let so = |stem: &str| name.starts_with(stem) && name[stem.len()..].starts_with(".so");
    so("libcuda")
        || so("libcudadebugger")
        || so("libnvoptix")
        || so("libnvcuvid")
        || (name.starts_with("libnvidia-") && name.contains(".so"))
}

/// Whether `name` is a vendor library (see VENDOR_PREFIXES).
pub(super) fn is_vendor_library(name: &str) -> bool {
    VENDOR_PREFIXES.iter().any(|p| name.starts_with(p)) && name.contains(".so")
}

#[cfg(target_arch = "x86_64")]
const TRIPLET: &str = "x86_64-linux-gnu";
#[cfg(target_arch = "aarch64")]
const TRIPLET: &str = "aarch64-linux-gnu";
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const TRIPLET: &str = "unknown-linux-gnu";

#[cfg(target_arch = "x86_64")]
const HWCAPS: &[&str] = &["x86-64-v4", "x86-64-v3", "x86-64-v2"];
#[cfg(not(target_arch = "x86_64"))]
const HWCAPS: &[&str] = &[];

/// ld.so's default folders (after the cache).
pub(super) fn default_dirs() -> Vec<PathBuf> {
    [
        format!("/lib/{TRIPLET}"),
        format!("/usr/lib/{TRIPLET}"),
        "/lib64".into(),
        "/usr/lib64".into(),
        "/lib".into(),
        "/usr/lib".into(),
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

/// What a shared object asks of the dynamic loader.
#[derive(Debug, Default, Clone)]
pub(super) struct Dynamic {
    pub(super) needed: Vec<String>,
    pub(super) rpath: Vec<String>,
    pub(super) runpath: Vec<String>,
    pub(super) interp: Option<String>,
}

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

fn read_at(file: &std::fs::File, offset: u64, len: usize) -> Option<Vec<u8>> {
    if len > 16 << 20 {
        return None;
    }
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset).ok()?;
    Some(buf)
}

/// Reads DT_NEEDED, DT_RPATH, DT_RUNPATH and PT_INTERP of a 64-bit little-endian ELF
/// file through its program headers (what ld.so reads), or nothing for anything else.
pub(super) fn read_dynamic(path: &Path) -> Option<Dynamic> {
    let file = std::fs::File::open(path).ok()?;
    let head = read_at(&file, 0, 64)?;
    // ELF, 64-bit, little-endian.
    if &head[0..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let phoff = u64_at(&head, 32)?;
    let phentsize = u16_at(&head, 54)? as usize;
    let phnum = u16_at(&head, 56)? as usize;
    if phentsize < 56 || phnum == 0 || phnum > 256 {
        return None;
    }
    let ph = read_at(&file, phoff, phentsize * phnum)?;
    // (p_type, p_offset, p_vaddr, p_filesz)
    let headers: Vec<(u32, u64, u64, u64)> = (0..phnum)
        .filter_map(|i| {
            let o = i * phentsize;
            Some((u32_at(&ph, o)?, u64_at(&ph, o + 8)?, u64_at(&ph, o + 16)?, u64_at(&ph, o + 32)?))
        })
        .collect();
    const PT_LOAD: u32 = 1;
    const PT_DYNAMIC: u32 = 2;
    const PT_INTERP: u32 = 3;
    let mut out = Dynamic::default();
    if let Some(&(_, off, _, size)) = headers.iter().find(|h| h.0 == PT_INTERP) {
        let bytes = read_at(&file, off, size as usize)?;
        out.interp = CStr::from_bytes_until_nul(&bytes).ok().map(|c| c.to_string_lossy().into_owned());
    }
    let Some(&(_, dyn_off, _, dyn_size)) = headers.iter().find(|h| h.0 == PT_DYNAMIC) else {
        return Some(out);
    };
    let entries = read_at(&file, dyn_off, dyn_size as usize)?;
    let (mut strtab, mut strsz) = (None, None);
    let mut tags: Vec<(u64, u64)> = Vec::new();
    for e in entries.chunks_exact(16) {
        let (tag, val) = (u64_at(e, 0)?, u64_at(e, 8)?);
        match tag {
            0 => break,
            5 => strtab = Some(val),
            10 => strsz = Some(val),
            1 | 15 | 29 => tags.push((tag, val)),
            _ => {}
        }
    }
    let (Some(strtab), Some(strsz)) = (strtab, strsz) else { return Some(out) };
    // The string table's address, mapped to a file offset through its PT_LOAD segment.
    let &(_, seg_off, seg_vaddr, _) =
        headers.iter().find(|h| h.0 == PT_LOAD && strtab >= h.2 && strtab < h.2 + h.3.max(1))?;
    let strings = read_at(&file, strtab - seg_vaddr + seg_off, strsz as usize)?;
    let string = |o: u64| -> Option<String> {
        let bytes = strings.get(o as usize..)?;
        CStr::from_bytes_until_nul(bytes).ok().map(|c| c.to_string_lossy().into_owned())
    };
    for (tag, val) in tags {
        let Some(s) = string(val) else { continue };
        match tag {
            1 => out.needed.push(s),
            15 => out.rpath.extend(s.split(':').filter(|p| !p.is_empty()).map(String::from)),
            _ => out.runpath.extend(s.split(':').filter(|p| !p.is_empty()).map(String::from)),
        }
    }
    Some(out)
}

/// /etc/ld.so.cache's entries for this architecture: (name, path).
pub(super) fn read_ld_cache(path: &Path) -> Vec<(String, PathBuf)> {
    let Ok(bytes) = std::fs::read(path) else { return Vec::new() };
    parse_ld_cache(&bytes)
}

fn parse_ld_cache(bytes: &[u8]) -> Vec<(String, PathBuf)> {
    const OLD: &[u8] = b"ld.so-1.7.0";
    const NEW: &[u8] = b"glibc-ld.so.cache1.1";
    // The old format (an array of 12-byte entries) may come first; the new one follows,
    // 8-byte aligned. String offsets in the new format count from its own header.
    let mut base = 0usize;
    if bytes.starts_with(OLD) {
        let Some(n) = u32_at(bytes, 12) else { return Vec::new() };
        base = (16 + 12 * n as usize).next_multiple_of(8);
    }
    let Some(cache) = bytes.get(base..) else { return Vec::new() };
    if !cache.starts_with(NEW) {
        return Vec::new();
    }
    let Some(n) = u32_at(cache, 20) else { return Vec::new() };
    #[cfg(target_arch = "x86_64")]
    let arch_flag = 0x0300;
    #[cfg(target_arch = "aarch64")]
    let arch_flag = 0x0a00;
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let arch_flag = -1;
    let string = |o: u32| -> Option<String> {
        let b = cache.get(o as usize..)?;
        CStr::from_bytes_until_nul(b).ok().map(|c| c.to_string_lossy().into_owned())
    };
    (0..n as usize)
        .filter_map(|i| {
            let o = 48 + i * 24;
            let flags = u32_at(cache, o)? as i32;
            // FLAG_ELF_LIBC6 for this machine's architecture.
            if flags & 0xff != 3 || flags & 0xff00 != arch_flag {
                return None;
            }
            Some((string(u32_at(cache, o + 4)?)?, PathBuf::from(string(u32_at(cache, o + 8)?)?)))
        })
        .collect()
}

/// How this process's dynamic loader looks for libraries.
#[derive(Debug, Clone, Default)]
pub(super) struct Search {
    pub(super) ld_library_path: Vec<PathBuf>,
    pub(super) cache: Vec<(String, PathBuf)>,
    pub(super) defaults: Vec<PathBuf>,
}

impl Search {
    /// As ld.so saw it when this process started (its LD_LIBRARY_PATH, the system cache).
    pub(super) fn of_this_process() -> Search {
        let ld_library_path = std::env::var_os("LD_LIBRARY_PATH")
            .map(|v| std::env::split_paths(&v).filter(|p| p.is_absolute()).collect())
            .unwrap_or_default();
        Search { ld_library_path, cache: read_ld_cache(Path::new("/etc/ld.so.cache")), defaults: default_dirs() }
    }

    /// Every file ld.so could load for `name` when `requester` (loaded from
    /// `requester_path`) asks for it: the first folder that has it, with that folder's
    /// glibc-hwcaps variants.
    fn find(&self, name: &str, requester: &Dynamic, requester_path: &Path) -> Vec<PathBuf> {
        if name.contains('/') {
            let p = PathBuf::from(name);
            return if p.is_file() { vec![p] } else { Vec::new() };
        }
        let origin = requester_path.parent().unwrap_or(Path::new("/"));
        let expand = |dirs: &[String]| -> Vec<PathBuf> {
            dirs.iter()
                .filter_map(|d| {
                    let d =
                        d.replace("${ORIGIN}", &origin.to_string_lossy()).replace("$ORIGIN", &origin.to_string_lossy());
                    // $LIB and $PLATFORM are rare in libraries; such entries are skipped.
                    (!d.contains('$')).then(|| PathBuf::from(d))
                })
                .filter(|p| p.is_absolute())
                .collect()
        };
        let mut dirs: Vec<PathBuf> = Vec::new();
        if requester.runpath.is_empty() {
            dirs.extend(expand(&requester.rpath));
        }
        dirs.extend(self.ld_library_path.iter().cloned());
        dirs.extend(expand(&requester.runpath));
        for dir in &dirs {
            let found = in_folder(dir, name);
            if !found.is_empty() {
                return found;
            }
        }
        let cached: Vec<PathBuf> =
            self.cache.iter().filter(|(n, p)| n == name && p.is_file()).map(|(_, p)| p.clone()).collect();
        if !cached.is_empty() {
            return cached;
        }
        for dir in &self.defaults {
            let found = in_folder(dir, name);
            if !found.is_empty() {
                return found;
            }
        }
        Vec::new()
    }

    /// Folders where libraries of this process may be found by name.
    pub(super) fn folders(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.ld_library_path.clone();
        dirs.extend(self.cache.iter().filter_map(|(_, p)| p.parent().map(Path::to_path_buf)));
        dirs.extend(self.defaults.iter().cloned());
        let mut seen = BTreeSet::new();
        dirs.retain(|d| seen.insert(d.clone()));
        dirs
    }
}

/// `dir/name` and `dir/glibc-hwcaps/*/name`, those that exist.
fn in_folder(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        HWCAPS.iter().map(|h| dir.join("glibc-hwcaps").join(h).join(name)).filter(|p| p.is_file()).collect();
    let plain = dir.join(name);
    if plain.is_file() {
        out.push(plain);
    }
    out
}

/// The files `roots` are and need, transitively, canonical (symlinks resolved: Landlock
/// judges the file a path leads to).
pub(super) fn closure(roots: &[PathBuf], search: &Search, out: &mut BTreeSet<PathBuf>) {
    let mut todo: Vec<PathBuf> = roots.to_vec();
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    while let Some(path) = todo.pop() {
        let Ok(canonical) = path.canonicalize() else { continue };
        if !seen.insert(path.clone()) {
            continue;
        }
        out.insert(canonical.clone());
        let Some(dynamic) = read_dynamic(&path) else { continue };
        if let Some(interp) = &dynamic.interp {
            todo.push(PathBuf::from(interp));
        }
        for name in &dynamic.needed {
            todo.extend(search.find(name, &dynamic, &path));
            // $ORIGIN is the folder of the path the object was loaded by; where that was a
            // symlink, the real folder's answer is granted as well.
            if canonical != path {
                todo.extend(search.find(name, &dynamic, &canonical));
            }
        }
    }
}

/// The driver's library files: in every folder ld.so may search that holds a libcuda,
/// its siblings that are the driver's (see `is_driver_library`), canonical.
pub(super) fn driver_files(search: &Search) -> Vec<PathBuf> {
    let mut dirs = search.folders();
    // Where container runtimes and WSL put the driver's libraries.
    dirs.extend(["/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib"].map(PathBuf::from));
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for dir in dirs {
        if !seen.insert(dir.clone()) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let names: Vec<String> = entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        if !names.iter().any(|n| n.starts_with("libcuda.so")) {
            continue;
        }
        out.extend(names.iter().filter(|n| is_driver_library(n)).map(|n| dir.join(n)));
    }
    out
}

/// Files named like the vendor library `name` (as given to -l: `cublas` finds
/// libcublas.so*, and libcudnn's engines libcudnn_*.so*) in the folders ld.so would
/// search from the kernel libraries `near`, and beside the libraries they load (the
/// CUDA runtime's folder, where the toolkit keeps cuBLAS).
pub(super) fn vendor_files(name: &str, near: &[PathBuf], search: &Search) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut loaded = BTreeSet::new();
    closure(near, search, &mut loaded);
    dirs.extend(loaded.iter().filter_map(|f| f.parent().map(Path::to_path_buf)));
    for lib in near {
        if let Some(d) = read_dynamic(lib) {
            let origin = lib.parent().unwrap_or(Path::new("/")).to_string_lossy().into_owned();
            dirs.extend(
                d.rpath
                    .iter()
                    .chain(&d.runpath)
                    .map(|p| PathBuf::from(p.replace("${ORIGIN}", &origin).replace("$ORIGIN", &origin))),
            );
        }
    }
    dirs.extend(search.folders());
    let stem = format!("lib{name}");
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for dir in dirs.into_iter().filter(|d| d.is_absolute()) {
        if !seen.insert(dir.clone()) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            let rest = n.strip_prefix(&stem).unwrap_or("-");
            if rest.starts_with(".so") || ((rest.starts_with('_') || rest.starts_with('-')) && rest.contains(".so")) {
                out.push(e.path());
            }
        }
    }
    out
}

/// The shared objects loaded into this process now (the executable excluded).
pub(super) fn loaded_objects() -> Vec<PathBuf> {
    extern "C" fn each(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: the loader hands a valid dl_phdr_info for the duration of the call, and
        // `data` is the Vec passed below.
        unsafe {
            let out = &mut *(data as *mut Vec<PathBuf>);
            let name = (*info).dlpi_name;
            if !name.is_null() {
                let name = CStr::from_ptr(name).to_string_lossy().into_owned();
                if name.starts_with('/') {
                    out.push(PathBuf::from(name));
                }
            }
        }
        0
    }
    let mut out: Vec<PathBuf> = Vec::new();
    // SAFETY: the callback only reads what the loader hands it and pushes to `out`.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut out as *mut Vec<PathBuf> as *mut libc::c_void) };
    out
}

/// Whether a folder holds a vendor library (and so may not be granted whole).
pub(super) fn holds_vendor_library(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().any(|e| is_vendor_library(&e.file_name().to_string_lossy())))
        .unwrap_or(false)
}

/// glibc's own modules beside its libc: NSS (libnss_*) and gconv (iconv's converters).
pub(super) fn glibc_modules(libc_dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let nss = std::fs::read_dir(libc_dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("libnss_"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    let gconv = [
        libc_dir.join("gconv"),
        PathBuf::from(format!("/usr/lib/{TRIPLET}/gconv")),
        PathBuf::from("/usr/lib64/gconv"),
        PathBuf::from("/usr/lib/gconv"),
    ]
    .into_iter()
    .filter(|p| p.is_dir())
    .collect();
    (nss, gconv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn libc_path() -> PathBuf {
        loaded_objects()
            .into_iter()
            .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libc.so")))
            .expect("libc is loaded")
    }

    #[test]
    fn the_executable_needs_libc_and_its_closure_holds_it() {
        let exe = std::env::current_exe().unwrap();
        let d = read_dynamic(&exe).expect("the test binary is an ELF file");
        assert!(d.needed.iter().any(|n| n.starts_with("libc.so")), "{d:?}");
        let mut files = BTreeSet::new();
        closure(&[exe], &Search::of_this_process(), &mut files);
        let libc = libc_path().canonicalize().unwrap();
        assert!(files.contains(&libc), "{files:?}");
        assert!(files.iter().any(|f| f.to_string_lossy().contains("ld-linux")), "the interpreter too: {files:?}");
    }

    #[test]
    fn the_system_cache_lists_libc() {
        let cache = read_ld_cache(Path::new("/etc/ld.so.cache"));
        if cache.is_empty() {
            eprintln!("no ld.so.cache here");
            return;
        }
        assert!(cache.iter().any(|(n, p)| n == "libc.so.6" && p.is_file()), "{:?}", &cache[..cache.len().min(5)]);
    }

    #[test]
    fn vendor_and_driver_names_are_told_apart() {
        for v in
            ["libcublas.so.13", "libcublasLt.so.13.0.0", "libcudnn_ops.so.9", "libnvrtc.so.13", "libnvJitLink.so.13"]
        {
            assert!(is_vendor_library(v), "{v}");
            assert!(!is_driver_library(v), "{v}");
        }
        for d in [
            "libcuda.so.1",
            "libcuda.so.580.159.04",
            "libnvidia-ml.so.1",
            "libnvidia-ptxjitcompiler.so.1",
            "libnvoptix.so.1",
        ] {
            assert!(is_driver_library(d), "{d}");
            assert!(!is_vendor_library(d), "{d}");
        }
        assert!(!is_driver_library("libcudart.so.13") && !is_vendor_library("libcudart.so.13"));
        assert!(!is_driver_library("libcudadevrt.a"));
    }

    #[test]
    fn vendor_files_match_the_library_and_its_engines_only() {
        let dir = tempfile::tempdir().unwrap();
        for n in [
            "libcublas.so.13",
            "libcublasLt.so.13",
            "libcudnn.so.9",
            "libcudnn_ops.so.9",
            "libcudart.so.13",
            "libcudnnx.so",
        ] {
            std::fs::write(dir.path().join(n), b"").unwrap();
        }
        let search = Search { ld_library_path: vec![dir.path().to_path_buf()], ..Default::default() };
        let names = |v: Vec<PathBuf>| -> BTreeSet<String> {
            v.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect()
        };
        assert_eq!(names(vendor_files("cublas", &[], &search)), BTreeSet::from(["libcublas.so.13".to_string()]));
        assert_eq!(
            names(vendor_files("cudnn", &[], &search)),
            BTreeSet::from(["libcudnn.so.9".to_string(), "libcudnn_ops.so.9".to_string()])
        );
    }
}
