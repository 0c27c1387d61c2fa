//! Real builds with nvcc (the PyPI wheels in CI): every task's baseline and reference and
//! every test candidate, with their ptxas reports, SASS and import checks, built confined
//! as every build is.

mod common;

use nightshift::task::Task;
use nightshift::toolkit::build::{build, BuildError, BuildFailure, BuildSpec, Built};
use nightshift::wall::build::{Confinement, Limits};
use std::collections::BTreeMap;
use std::path::Path;

fn confinement(task: &Task, trusted: bool, limits: Limits) -> Confinement {
    Confinement::new(&common::nightshift_bin(), &common::require_toolchain(), task, trusted, limits)
}

fn build_spec(spec: &BuildSpec, limits: Limits) -> Result<Built, BuildError> {
    let tc = common::require_toolchain();
    build(&tc, &common::test_cache(), spec, &confinement(spec.task, spec.trusted, limits))
}

fn build_file(task: &Task, source: &Path, trusted: bool) -> Result<Built, BuildError> {
    build_limited(task, source, trusted, Limits::default())
}

fn build_limited(task: &Task, source: &Path, trusted: bool, limits: Limits) -> Result<Built, BuildError> {
    let spec =
        BuildSpec { task, source, trusted, arch: "sm_90a".into(), extra_flags: vec![], defines: BTreeMap::new() };
    build_spec(&spec, limits)
}

fn task(name: &str) -> Task {
    Task::load(&common::root().join("tasks").join(name)).unwrap_or_else(|e| panic!("{e}"))
}

fn sass_text(b: &Built) -> String {
    std::fs::read_to_string(b.sass.as_ref().expect("cuobjdump SASS kept")).unwrap()
}

#[test]
fn every_task_baseline_and_reference_builds_with_resources_and_sass() {
    let root = common::root().join("tasks");
    let dirs = nightshift::task::discover(&root).unwrap();
    assert!(dirs.len() >= 10, "tasks found: {dirs:?}");
    for dir in dirs {
        let t = Task::load(&dir).unwrap_or_else(|e| panic!("{e}"));
        for source in [&t.baseline, &t.reference] {
            let b = build_file(&t, source, true).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
            assert!(b.library.is_file());
            if source == &t.baseline && !t.build.baseline_libs.is_empty() {
                // A library baseline (cuBLAS): no kernels of its own, the library linked.
                for lib in &t.build.baseline_libs {
                    assert!(
                        b.link.needed.iter().any(|n| n.starts_with(&format!("lib{lib}.so"))),
                        "{}: {:?}",
                        source.display(),
                        b.link.needed
                    );
                }
                continue;
            }
            assert!(!b.ptxas.kernels.is_empty(), "{}: ptxas -v reported no kernel", source.display());
            for k in &b.ptxas.kernels {
                assert!(k.registers > 0, "{}: {k:?}", source.display());
                assert_eq!(k.arch, "sm_90a");
            }
            let sass = sass_text(&b);
            assert!(sass.contains("Function :"), "{}", source.display());
            assert!(sass.contains("EXIT"), "{}", source.display());
            assert!(b.link.needed.iter().any(|n| n.starts_with("libcudart.so")), "{:?}", b.link.needed);
            assert!(b.link.exports.contains(&t.entry), "the entry is exported: {:?}", b.link.exports);
        }
    }
}

#[test]
fn line_info_reaches_the_candidate_file() {
    let t = task("softmax");
    let b = build_file(&t, &common::root().join("tests/candidates/softmax/fast.cu"), false).unwrap();
    let lines = std::fs::read_to_string(b.sass_lines.as_ref().expect("nvdisasm output kept")).unwrap();
    assert!(lines.contains("fast.cu\", line "), "nvdisasm -gi attributes SASS to fast.cu");
}

#[test]
fn fast_softmax_uses_128_bit_accesses_and_no_local_memory() {
    let t = task("softmax");
    let b = build_file(&t, &common::root().join("tests/candidates/softmax/fast.cu"), false).unwrap();
    let sass = sass_text(&b);
    assert!(sass.contains("LDG.E.128"), "float4 loads");
    assert!(sass.contains("STG.E.128"), "float4 stores");
    for k in &b.ptxas.kernels {
        assert_eq!(k.spill_store_bytes, 0, "{k:?}");
        assert_eq!(k.stack_frame_bytes, 0, "{k:?}");
    }
    assert!(sass.contains("SHFL.BFLY"), "warp-shuffle reductions");
}

#[test]
fn every_test_candidate_builds_or_fails_as_planted() {
    let t = task("softmax");
    let dir = common::root().join("tests/candidates/softmax");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let got = build_file(&t, &path, false);
        seen += 1;
        match name.as_str() {
            "wrong_signature" => match got {
                Err(BuildError::Rejected { failure: BuildFailure::Compile { log }, .. }) => {
                    assert!(log.contains("\"C\" linkage"), "the shim's declaration catches the signature: {log}")
                }
                other => panic!("{name}: expected a compile error, got {other:?}"),
            },
            "no_entry" => assert!(
                matches!(&got, Err(BuildError::Rejected { failure: BuildFailure::MissingEntry { .. }, .. })),
                "{name}: {got:?}"
            ),
            "dlopen" => match got {
                Err(BuildError::Rejected { failure: BuildFailure::ForbiddenImport { imports }, .. }) => {
                    assert_eq!(imports[0].symbol, "dlopen")
                }
                other => panic!("{name}: expected a forbidden import, got {other:?}"),
            },
            _ => {
                let b = got.unwrap_or_else(|e| panic!("{name} should build: {e}"));
                assert!(!b.ptxas.kernels.is_empty(), "{name}");
                if name == "infinite_loop" {
                    // The endless loop survives optimization only because it sleeps.
                    assert!(sass_text(&b).contains("NANOSLEEP"), "{name}: the loop was optimized away");
                }
            }
        }
    }
    assert!(seen >= 14, "all planted candidates were built: {seen}");

    let va = task("vector_add");
    let b = build_file(&va, &common::root().join("tests/candidates/vector_add/vec4.cu"), false).unwrap();
    assert!(sass_text(&b).contains("LDG.E.128"));
}

#[test]
fn builds_are_cached_by_content() {
    let t = task("vector_add");
    let first = build_file(&t, &t.baseline, true).unwrap();
    let again = build_file(&t, &t.baseline, true).unwrap();
    assert!(again.cached);
    assert_eq!(first.key, again.key);
    assert_eq!(first.library, again.library);
    // A macro changes the binary, so it changes the key.
    let tc = common::require_toolchain();
    let mut defines = BTreeMap::new();
    defines.insert("BLOCK".to_string(), "512".to_string());
    let spec =
        BuildSpec { task: &t, source: &t.baseline, trusted: true, arch: "sm_90a".into(), extra_flags: vec![], defines };
    let tuned = build(&tc, &common::test_cache(), &spec, &confinement(&t, true, Limits::default())).unwrap();
    assert_ne!(tuned.key, first.key);
}

#[test]
fn cublas_is_refused_for_candidates() {
    // A candidate calling cuBLAS without the task allowing it: refused at the import check.
    let dir = tempfile::tempdir().unwrap();
    let t = task("vector_add");
    let src = dir.path().join("cublas_call.cu");
    std::fs::write(
        &src,
        r#"#include <cuda_runtime.h>
extern "C" int cublasCreate_v2(void**);
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  void* h; cublasCreate_v2(&h);
}
"#,
    )
    .unwrap();
    match build_file(&t, &src, false) {
        Err(BuildError::Rejected { failure: BuildFailure::ForbiddenImport { imports }, .. }) => {
            assert!(imports.iter().any(|i| i.symbol == "cublasCreate_v2"), "{imports:?}")
        }
        other => panic!("expected a forbidden import, got {other:?}"),
    }
}

#[test]
fn the_cublas_baseline_is_refused_as_a_candidate() {
    // gemm_bf16's baseline may link cuBLAS; the same source as a candidate may not.
    let t = task("gemm_bf16");
    match build_file(&t, &t.baseline, false) {
        Err(BuildError::Rejected { failure: BuildFailure::ForbiddenImport { imports }, .. }) => {
            assert!(imports.iter().any(|i| i.symbol.starts_with("cublas")), "{imports:?}")
        }
        other => panic!("expected a forbidden import, got {other:?}"),
    }
}
