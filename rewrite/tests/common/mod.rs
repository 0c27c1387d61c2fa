//! Helpers shared by the rewrite crate's integration tests (and, by path, the workspace's
//! build tests of the same kernels).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The annotated test kernels in `tests/kernels/`, as (file name, source), by name.
pub fn kernels() -> Vec<(String, String)> {
    kernels_in(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kernels"))
}

/// The `.cu` files of `dir`, as (file name, source), by name.
pub fn kernels_in(dir: &Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().to_string(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    v.sort();
    v
}
