//! The headers a kernel file pulls in with `#include "..."`, found the way nvcc finds
//! them (next to the including file, then in each -I folder), followed recursively. Angle
//! includes are the toolkit's and the system's, and stay where they are.

use regex::Regex;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

static QUOTED_INCLUDE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?m)^[ \t]*#[ \t]*include[ \t]*"([^"]+)""#).unwrap());

/// A header to copy into the task.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub source: PathBuf,
    /// Where it goes, relative to the task directory.
    pub dest: PathBuf,
    /// Whether it was found through an -I folder (then it lands under `include/`).
    pub via_include_dir: bool,
}

/// An include that could not be copied into the task.
#[derive(Debug, Clone, PartialEq)]
pub struct Unresolved {
    pub from: PathBuf,
    pub line: usize,
    /// As written between the quotes.
    pub name: String,
    pub why: Missing,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Missing {
    /// Neither next to the including file nor in an -I folder. `nearby`: a folder near
    /// the kernel that holds a file of that relative name, when one was found.
    NotFound { nearby: Option<PathBuf> },
    /// Found, but by a path that leaves the folder (`../x.h`, `/abs/x.h`): a task can
    /// only hold includes below its own folder, so the source must name it differently.
    Outside { found: PathBuf },
}

/// The folder -I headers are copied to inside the task.
pub const INCLUDE_DIR: &str = "include";

fn quoted_includes(text: &str) -> Vec<(usize, String)> {
    let clean = super::signature::strip_comments(text);
    QUOTED_INCLUDE
        .captures_iter(&clean)
        .map(|c| (clean[..c.get(0).unwrap().start()].matches('\n').count() + 1, c[1].to_string()))
        .collect()
}

/// Follows the quoted includes of `kernel`: the headers found, and those not found.
pub fn collect(kernel: &Path, include_dirs: &[PathBuf]) -> (Vec<Header>, Vec<Unresolved>) {
    let mut headers: Vec<Header> = Vec::new();
    let mut missing = Vec::new();
    // (file to scan, the folder inside the task it is copied to)
    let mut queue: Vec<(PathBuf, PathBuf)> = vec![(kernel.to_path_buf(), PathBuf::new())];
    let mut seen: Vec<PathBuf> = Vec::new();
    while let Some((file, dest_dir)) = queue.pop() {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let here = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        for (line, name) in quoted_includes(&text) {
            let rel = Path::new(&name);
            if rel.is_absolute() || rel.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
                // `../x.h` or `/abs/x.h`: copy it flat under include/ and say so via the -I path.
                let found = if rel.is_absolute() { Some(rel.to_path_buf()) } else { Some(here.join(rel)) };
                let why = match found.filter(|p| p.is_file()) {
                    Some(p) => Missing::Outside { found: p },
                    None => Missing::NotFound { nearby: None },
                };
                missing.push(Unresolved { from: file.clone(), line, name, why });
                continue;
            }
            // nvcc's order: next to the including file, then each -I folder.
            let beside = here.join(rel);
            let located = if beside.is_file() {
                Some((beside, dest_dir.join(rel), false))
            } else {
                include_dirs
                    .iter()
                    .map(|d| d.join(rel))
                    .find(|p| p.is_file())
                    .map(|p| (p, Path::new(INCLUDE_DIR).join(rel), true))
            };
            let Some((source, dest, via)) = located else {
                let nearby = folder_near(kernel, rel);
                missing.push(Unresolved { from: file.clone(), line, name, why: Missing::NotFound { nearby } });
                continue;
            };
            let canonical = source.canonicalize().unwrap_or(source.clone());
            if seen.contains(&canonical) {
                continue;
            }
            seen.push(canonical);
            // A header found beside its includer keeps its place relative to it; one found
            // in an -I folder goes under include/ (passed as -I).
            let next_dir = dest.parent().map(Path::to_path_buf).unwrap_or_default();
            queue.push((source.clone(), next_dir));
            headers.push(Header { source, dest, via_include_dir: via });
        }
    }
    headers.sort_by(|a, b| a.dest.cmp(&b.dest));
    (headers, missing)
}

/// Folders looked into when searching for a missing header (a bound on the time spent).
const SEARCH_LIMIT: usize = 4000;

/// A folder near `kernel` (below its folder or up to three folders above it, four levels
/// deep, hidden and build folders skipped) that holds `rel`: what -I would need. The
/// closest ancestor wins; None when there is none within the search limit.
fn folder_near(kernel: &Path, rel: &Path) -> Option<PathBuf> {
    let start = kernel.canonicalize().ok()?.parent()?.to_path_buf();
    let mut visited = 0;
    for root in start.ancestors().take(4) {
        let mut level = vec![root.to_path_buf()];
        for _ in 0..=4 {
            let mut next = Vec::new();
            for dir in level {
                visited += 1;
                if visited > SEARCH_LIMIT {
                    return None;
                }
                if dir.join(rel).is_file() {
                    return Some(dir);
                }
                let Ok(entries) = std::fs::read_dir(&dir) else { continue };
                for e in entries.flatten() {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    let skip = name.starts_with('.') || matches!(name.as_ref(), "target" | "node_modules" | "build");
                    if !skip && e.file_type().is_ok_and(|t| t.is_dir()) {
                        next.push(e.path());
                    }
                }
            }
            next.sort();
            level = next;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_includes_beside_the_file_and_in_include_folders() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        let inc = tmp.path().join("third_party/inc");
        std::fs::create_dir_all(src.join("detail")).unwrap();
        std::fs::create_dir_all(inc.join("ops")).unwrap();
        std::fs::write(
            src.join("k.cu"),
            "#include <cuda_runtime.h>\n#include \"detail/math.cuh\"\n// #include \"commented.h\"\n#include \"ops/act.cuh\"\n#include \"nowhere.h\"\n",
        )
        .unwrap();
        std::fs::write(src.join("detail/math.cuh"), "#include \"tiny.h\"\n").unwrap();
        std::fs::write(src.join("detail/tiny.h"), "").unwrap();
        std::fs::write(inc.join("ops/act.cuh"), "#pragma once\n").unwrap();
        let (headers, missing) = collect(&src.join("k.cu"), std::slice::from_ref(&inc));
        let dests: Vec<String> = headers.iter().map(|h| h.dest.display().to_string()).collect();
        assert_eq!(dests, vec!["detail/math.cuh", "detail/tiny.h", "include/ops/act.cuh"]);
        assert_eq!(missing.len(), 1);
        assert_eq!((missing[0].line, missing[0].name.as_str()), (5, "nowhere.h"));
        assert_eq!(missing[0].why, Missing::NotFound { nearby: None });
    }

    #[test]
    fn a_missing_header_is_looked_for_near_the_kernel() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("repo/src");
        let inc = tmp.path().join("repo/third_party/cutlass/include");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir_all(inc.join("ops")).unwrap();
        std::fs::write(src.join("k.cu"), "#include \"ops/act.cuh\"\n#include \"../up.h\"\n").unwrap();
        std::fs::write(inc.join("ops/act.cuh"), "").unwrap();
        std::fs::write(tmp.path().join("repo/up.h"), "").unwrap();
        let (headers, missing) = collect(&src.join("k.cu"), &[]);
        assert!(headers.is_empty());
        assert_eq!(missing.len(), 2);
        let by_name = |n: &str| missing.iter().find(|m| m.name == n).unwrap().why.clone();
        assert_eq!(by_name("ops/act.cuh"), Missing::NotFound { nearby: Some(inc.canonicalize().unwrap()) });
        assert!(matches!(by_name("../up.h"), Missing::Outside { .. }));
        // With the folder found, the header is copied.
        let (headers, missing) = collect(&src.join("k.cu"), &[inc]);
        assert_eq!(headers.len(), 1);
        assert_eq!(missing.len(), 1);
    }
}
