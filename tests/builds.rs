//! Real builds with nvcc (the PyPI wheels in CI): every task's baseline and reference and
//! every test candidate, with their ptxas reports, SASS and import checks; and the build's
//! confinement, against hostile candidates (files outside their folders through
//! `#include` and `.incbin`, writes outside the scratch folder, builds that run too long or
//! take too much memory) and a probe that tries every escape from inside a build.

mod common;

use nightshift::task::Task;
use nightshift::toolkit::build::{build, BuildError, BuildFailure, BuildSpec, Built, Confine};
use nightshift::wall::build::probe::{self, ProbeReport};
use nightshift::wall::build::{Confinement, Limits, Policy};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

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

// ---------------------------------------------------------------------------------------
// The confined build.

/// A vector_add candidate with `extra` at file scope (a directive, an include, an asm).
fn vector_add_with(extra: &str) -> String {
    format!(
        r#"#include <cuda_runtime.h>
{extra}
__global__ void add(const float* a, const float* b, float* c, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {{
  add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}}
"#
    )
}

/// A secret in a fake home folder outside every folder a build may read.
struct FakeHome {
    dir: tempfile::TempDir,
    secret: String,
}

impl FakeHome {
    fn new() -> FakeHome {
        let dir = tempfile::tempdir().unwrap();
        let secret = format!("NIGHTSHIFT-SECRET-{:016x}", rand_token());
        std::fs::create_dir_all(dir.path().join(".aws")).unwrap();
        // Valid C when included: the secret would land in the library's data.
        std::fs::write(dir.path().join(".aws/credentials"), format!("const char* leaked = \"{}\";\n", secret)).unwrap();
        FakeHome { dir, secret }
    }
    fn credentials(&self) -> PathBuf {
        self.dir.path().join(".aws/credentials")
    }
}

fn rand_token() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    t ^ (std::process::id() as u64).rotate_left(32)
}

/// Builds `source` as a vector_add candidate in a folder of its own (outside the task).
fn build_candidate(source: &str, limits: Limits) -> (Result<Built, BuildError>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("candidate.cu");
    std::fs::write(&path, source).unwrap();
    (build_limited(&task("vector_add"), &path, false, limits), dir)
}

/// The compile log of a rejected build, with its saved build.log, after checking that
/// neither holds `secret`.
fn compile_log_without(got: Result<Built, BuildError>, secret: &str) -> String {
    match got {
        Err(BuildError::Rejected { failure: BuildFailure::Compile { log }, dir, .. }) => {
            let saved = std::fs::read_to_string(dir.join("build.log")).unwrap_or_default();
            assert!(!log.contains(secret) && !saved.contains(secret), "the secret leaked into the log:\n{log}");
            log
        }
        Ok(b) => {
            let lib = std::fs::read(&b.library).unwrap();
            let leaked = lib.windows(secret.len()).any(|w| w == secret.as_bytes());
            panic!("the build succeeded (secret in the library: {leaked})")
        }
        Err(other) => panic!("expected a compile error, got {other:?}"),
    }
}

#[test]
fn a_candidate_cannot_include_a_file_outside_its_folders() {
    let home = FakeHome::new();
    let log = compile_log_without(
        build_candidate(&vector_add_with(&format!("#include \"{}\"", home.credentials().display())), Limits::default())
            .0,
        &home.secret,
    );
    assert!(log.contains("Permission denied"), "refused by the confinement, not by chance:\n{log}");

    // System credentials and the build's own process files, with whatever they hold.
    for path in ["/etc/shadow", "/etc/hostname", "/proc/self/environ", "/root/.bashrc"] {
        let (got, _dir) = build_candidate(&vector_add_with(&format!("#include \"{path}\"")), Limits::default());
        let readable_here = std::fs::read_to_string(path).unwrap_or_default();
        let marker = readable_here.lines().find(|l| l.len() >= 8).unwrap_or("no such text").to_string();
        let log = compile_log_without(got, &marker);
        assert!(
            log.contains("Permission denied") || log.contains("No such file"),
            "{path}: refused, not compiled:\n{log}"
        );
    }
}

#[test]
fn a_candidate_cannot_incbin_a_file_outside_its_folders_but_may_inside_them() {
    let home = FakeHome::new();
    let incbin = |path: &Path| {
        vector_add_with(&format!(
            "asm(\".section .rodata\\n.global stolen\\nstolen:\\n.incbin \\\"{}\\\"\\n.byte 0\\n.text\");\nextern \"C\" const char stolen[];",
            path.display()
        ))
    };
    let log = compile_log_without(build_candidate(&incbin(&home.credentials()), Limits::default()).0, &home.secret);
    assert!(log.to_lowercase().contains("permission denied") || log.contains("file not found"), "{log}");

    // The same asm on a file the build may read (a copy of the task folder's): embedded.
    let tmp = tempfile::tempdir().unwrap();
    let task_dir = tmp.path().join("vector_add");
    common::copy_dir(&common::root().join("tasks/vector_add"), &task_dir);
    std::fs::write(task_dir.join("data.bin"), &home.secret).unwrap();
    let t = Task::load(&task_dir).unwrap();
    let src = tmp.path().join("candidate.cu");
    std::fs::write(&src, incbin(&task_dir.join("data.bin"))).unwrap();
    let b = build_file(&t, &src, false).unwrap_or_else(|e| panic!("{e}"));
    let lib = std::fs::read(&b.library).unwrap();
    assert!(lib.windows(home.secret.len()).any(|w| w == home.secret.as_bytes()), "the control embeds its file");
}

#[test]
fn a_candidate_cannot_embed_a_vendor_library_that_a_trusted_build_links() {
    // gemm_bf16's baseline may link cuBLAS; a candidate may not even read it.
    let tc = common::require_toolchain();
    let cublas = nightshift::toolkit::build::find_library(&tc, "cublas").expect("the cuBLAS wheel (see .ci/run)");
    let t = task("gemm_bf16");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("candidate.cu");
    let baseline = std::fs::read_to_string(&t.baseline).unwrap();
    std::fs::write(
        &src,
        format!(
            "{baseline}\nasm(\".section .rodata\\n.incbin \\\"{}\\\", 0, 4096\\n.text\");\n",
            cublas.canonicalize().unwrap().display()
        ),
    )
    .unwrap();
    match build_file(&t, &src, false) {
        Err(BuildError::Rejected { failure: BuildFailure::Compile { log }, .. }) => {
            assert!(log.contains("libcublas"), "as names the file it could not read: {log}")
        }
        other => panic!("a candidate embedding cuBLAS must not build, got {other:?}"),
    }
    // The task's trusted baseline still links it.
    let b = build_file(&t, &t.baseline, true).unwrap_or_else(|e| panic!("{e}"));
    assert!(b.link.needed.iter().any(|n| n.starts_with("libcublas.so")), "{:?}", b.link.needed);
    // The policies say the same: the library by file for the trusted build only, and no
    // library folder of the toolkit for either.
    let cublas = cublas.canonicalize().unwrap();
    let trusted = Policy::new(&tc, &t, true, &Limits::default());
    let candidate = Policy::new(&tc, &t, false, &Limits::default());
    assert!(trusted.read.contains(&cublas), "{:?}", trusted.read);
    assert!(!candidate.read.contains(&cublas), "{:?}", candidate.read);
    let lib_dir = tc.lib_dir().canonicalize().unwrap();
    let runtime = [tc.cudart.canonicalize().unwrap(), lib_dir.join("libcudadevrt.a")];
    for p in candidate.read.iter().chain(&candidate.run).chain(&candidate.libraries) {
        assert!(runtime.contains(p) || !p.starts_with(&lib_dir), "{}", p.display());
    }
}

#[test]
fn headers_in_the_task_folder_and_its_include_folders_still_work() {
    let tmp = tempfile::tempdir().unwrap();
    let task_dir = tmp.path().join("vector_add");
    common::copy_dir(&common::root().join("tasks/vector_add"), &task_dir);
    std::fs::create_dir_all(task_dir.join("inc/detail")).unwrap();
    std::fs::write(task_dir.join("scale.cuh"), "#pragma once\n#define SCALE 1.0f\n").unwrap();
    std::fs::write(
        task_dir.join("inc/detail/op.cuh"),
        "#pragma once\n__device__ inline float op(float a, float b) { return a + b; }\n",
    )
    .unwrap();
    let toml = std::fs::read_to_string(task_dir.join("task.toml")).unwrap();
    std::fs::write(task_dir.join("task.toml"), format!("{toml}\n[build]\ninclude = [\"inc\"]\n")).unwrap();
    let t = Task::load(&task_dir).unwrap_or_else(|e| panic!("{e}"));
    let src = tmp.path().join("candidate.cu");
    std::fs::write(
        &src,
        r#"#include <cuda_runtime.h>
#include "scale.cuh"
#include "detail/op.cuh"
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = SCALE * op(a[i], b[i]);
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
"#,
    )
    .unwrap();
    let b = build_file(&t, &src, false).unwrap_or_else(|e| panic!("headers of the task's folders: {e}"));
    assert!(b.library.is_file());
    assert!(b.sass.is_some(), "cuobjdump ran confined too: {:?}", b.notes);
}

#[test]
fn a_build_cannot_write_outside_its_scratch_folder() {
    let outside = tempfile::tempdir().unwrap();
    let t = task("vector_add");
    let src_dir = tempfile::tempdir().unwrap();
    let src = src_dir.path().join("candidate.cu");
    std::fs::write(&src, vector_add_with("")).unwrap();
    // nvcc's intermediate files, a linker map, a dependency file: each aimed outside.
    let tricks: [Vec<String>; 3] = [
        vec!["--keep".into(), format!("--keep-dir={}", outside.path().display())],
        vec!["-Xlinker".into(), format!("-Map={}/map.txt", outside.path().display())],
        vec!["-Xcompiler".into(), format!("-MD,-MF,{}/deps.d", outside.path().display())],
    ];
    let tc = common::require_toolchain();
    for flags in tricks {
        let spec = BuildSpec {
            task: &t,
            source: &src,
            trusted: false,
            arch: "sm_90a".into(),
            extra_flags: flags.clone(),
            defines: BTreeMap::new(),
        };
        // Unconfined, the trick works (a fresh cache: no entry to reuse).
        let control = tempfile::tempdir().unwrap();
        let _ = build(&tc, control.path(), &spec, &Unconfined(Duration::from_secs(300)));
        let written: Vec<_> = std::fs::read_dir(outside.path()).unwrap().flatten().map(|e| e.path()).collect();
        assert!(!written.is_empty(), "{flags:?}: the trick writes nothing even unconfined");
        for p in written {
            std::fs::remove_file(p).unwrap();
        }
        let got = build_spec(&spec, Limits::default());
        assert!(
            matches!(got, Err(BuildError::Rejected { failure: BuildFailure::Compile { .. }, .. })),
            "{flags:?}: {got:?}"
        );
        let written: Vec<_> = std::fs::read_dir(outside.path()).unwrap().flatten().map(|e| e.path()).collect();
        assert!(written.is_empty(), "{flags:?} wrote {written:?}");
    }
}

/// A candidate whose constant evaluation takes cudafe++ over ten seconds.
fn slow_candidate() -> String {
    vector_add_with(
        r#"constexpr unsigned long long spin(unsigned long long n, unsigned long long s) {
  unsigned long long x = s;
  for (unsigned long long i = 0; i < n; ++i) x = x * 6364136223846793005ULL + i;
  return x;
}
template <int I> struct W { static constexpr unsigned long long v = spin(1ULL << 18, I); };
template <int N, int... I> struct Seq : Seq<N - 1, N, I...> {};
template <int... I> struct Seq<0, I...> { static constexpr unsigned long long v = (W<I>::v ^ ...); };
static_assert(Seq<8>::v != 1, "spins");"#,
    )
}

#[test]
fn a_build_past_its_time_limit_is_a_build_timeout_and_is_not_cached() {
    let limits = Limits::with_timeout(Duration::from_secs(1));
    let (dir, src) = {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("slow.cu");
        std::fs::write(&src, slow_candidate()).unwrap();
        (dir, src)
    };
    let t = task("vector_add");
    for attempt in 0..2 {
        let started = Instant::now();
        let got = build_limited(&t, &src, false, limits);
        let took = started.elapsed();
        match got {
            Err(BuildError::Rejected { failure: failure @ BuildFailure::Timeout { .. }, dir, .. }) => {
                assert!(failure.summary().contains("build timeout"), "{}", failure.summary());
                assert!(dir.join("build.log").is_file(), "the log is kept in {}", dir.display());
                let key = dir.file_name().unwrap().to_str().unwrap().trim_end_matches(".timeout").to_string();
                let entry = dir.parent().unwrap().join(&key);
                assert!(
                    !entry.exists(),
                    "attempt {attempt}: a timed-out build has no cache entry ({})",
                    entry.display()
                );
            }
            other => panic!("attempt {attempt}: expected a build timeout, got {other:?}"),
        }
        // Killed at the limit, with everything nvcc started (the pipes closed at once).
        assert!(took < Duration::from_secs(8), "attempt {attempt} took {took:?}");
        assert!(took >= Duration::from_secs(1), "attempt {attempt}: ran again, not from a cache ({took:?})");
    }
    drop(dir);
}

#[test]
fn eval_reports_a_build_timeout_and_a_refused_include_as_verdicts() {
    // The trusted builds first, with the default limit (eval reuses them from the cache).
    let out = common::building_command()
        .args(["validate", "tasks/vector_add", "--build", "--arch", "sm_90a"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = tempfile::tempdir().unwrap();
    let slow = dir.path().join("slow.cu");
    std::fs::write(&slow, slow_candidate()).unwrap();
    let verdict = |candidate: &Path, extra: &[&str]| {
        let mut c = common::building_command();
        c.args(["eval", "tasks/vector_add"]).arg(candidate).args(["--arch", "sm_90a", "--json"]).args(extra);
        let out = c.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(1), "rejected: {text}\n{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        (v, text)
    };
    let (v, _) = verdict(&slow, &["--build-timeout", "1"]);
    assert_eq!(v["failure"]["class"], "build-timeout", "{v:#}");

    let home = FakeHome::new();
    let leaky = dir.path().join("leaky.cu");
    std::fs::write(&leaky, vector_add_with(&format!("#include \"{}\"", home.credentials().display()))).unwrap();
    let (v, text) = verdict(&leaky, &[]);
    assert_eq!(v["failure"]["class"], "build-error", "{v:#}");
    assert!(!text.contains(&home.secret), "the secret is in the verdict: {text}");
}

#[test]
fn a_build_out_of_memory_is_a_build_error_that_says_so() {
    let limits = Limits { memory_bytes: 320 << 20, ..Limits::default() };
    let (got, _dir) = build_candidate(&vector_add_with("#include <cub/cub.cuh>"), limits);
    match got {
        Err(BuildError::Rejected { failure: BuildFailure::Compile { log }, dir, .. }) => {
            assert!(log.contains("the build ran out of memory: its limit is 320 MiB of address space"), "{log}");
            assert!(log.contains("out of memory"), "the compiler's own words are kept: {log}");
            let kept = dir.file_name().unwrap().to_string_lossy().into_owned();
            assert!(kept.ends_with(".memory"), "not cached: {kept}");
            let entry = dir.parent().unwrap().join(kept.trim_end_matches(".memory"));
            assert!(!entry.exists(), "an out-of-memory build has no cache entry");
        }
        other => panic!("expected a build error, got {other:?}"),
    }
}

/// The probe's report under the confinement of a vector_add candidate's build.
fn probe(secrets: &[&Path], outside: &Path) -> ProbeReport {
    let tc = common::require_toolchain();
    let policy = Policy::new(&tc, &task("vector_add"), false, &Limits::default());
    let targets = probe::Targets {
        secrets: secrets.iter().map(|s| s.to_path_buf()).collect(),
        readable: Vec::new(),
        outside: Some(outside.to_path_buf()),
    };
    probe_with(policy, &targets)
}

fn probe_with(policy: Policy, targets: &probe::Targets) -> ProbeReport {
    let scratch = tempfile::tempdir().unwrap();
    probe::spawn(&common::nightshift_bin(), &policy.in_scratch(scratch.path()), targets)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn nvidia_s_libraries_in_a_system_library_folder_stay_unreadable() {
    // A library folder as a GPU machine has it: the driver's and cuBLAS beside the system's.
    let libs = tempfile::tempdir().unwrap();
    for name in ["libc.so.6", "libz.so.1", "libcuda.so.1", "libnvidia-ml.so.1", "libcublas.so.13", "libcublasLt.so.13"]
    {
        std::fs::write(libs.path().join(name), name).unwrap();
    }
    std::fs::create_dir(libs.path().join("gconv")).unwrap();
    std::fs::write(libs.path().join("gconv/gconv-modules.cache"), "cache").unwrap();
    let tc = common::require_toolchain();
    let mut policy = Policy::new(&tc, &task("vector_add"), false, &Limits::default());
    policy.libraries.push(libs.path().canonicalize().unwrap());
    let at = |name: &str| libs.path().join(name);
    let targets = probe::Targets {
        secrets: ["libcuda.so.1", "libnvidia-ml.so.1", "libcublas.so.13", "libcublasLt.so.13"].map(at).to_vec(),
        readable: ["libc.so.6", "libz.so.1", "gconv/gconv-modules.cache"].map(at).to_vec(),
        outside: None,
    };
    let report = probe_with(policy, &targets);
    let breaches: Vec<_> = report.breaches().iter().map(|a| format!("{} ({})", a.action, a.detail)).collect();
    assert!(breaches.is_empty(), "{breaches:?}");
    eprintln!("policy applied in {:.2} ms with the library folder granted file by file", report.apply_ms);
}

#[test]
fn the_build_confinement_refuses_every_escape() {
    let home = FakeHome::new();
    let outside = tempfile::tempdir().unwrap();
    let report = probe(&[&home.credentials(), Path::new("/etc/shadow")], outside.path());
    let breaches: Vec<_> = report.breaches().iter().map(|a| format!("{} ({})", a.action, a.detail)).collect();
    assert!(breaches.is_empty(), "escapes: {breaches:?}\nlayers: {:?}", report.layers);
    let tried: Vec<&str> = report.attempts.iter().map(|a| a.action.as_str()).collect();
    for must in [
        "credentials",
        "write /",
        "IPv4 socket",
        "Unix socket",
        "keyring",
        "io_uring",
        "mknod",
        "ptrace",
        "limits",
        "user namespace",
        "session",
        "capability",
        "environment",
        "run a program written",
    ] {
        assert!(tried.iter().any(|a| a.contains(must)), "the probe did not try `{must}`: {tried:?}");
    }
    assert!(report.attempts.iter().filter(|a| a.should_be_allowed).all(|a| a.allowed), "{:?}", report.attempts);
    // This machine's kernel has Landlock and seccomp; CI runs on the same kind.
    for layer in &report.layers {
        assert!(layer.active, "layer {} is off: {}", layer.name, layer.detail);
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// No confinement at all, to measure what the confinement costs.
struct Unconfined(Duration);

impl Confine for Unconfined {
    fn command(&self, program: &Path, _scratch: &Path) -> Command {
        Command::new(program)
    }
    fn timeout(&self) -> Duration {
        self.0
    }
    fn memory_limit(&self) -> String {
        "none".into()
    }
}

#[test]
fn the_confinement_costs_a_few_milliseconds_per_tool() {
    let tc = common::require_toolchain();
    let t = task("vector_add");
    let scratch = tempfile::tempdir().unwrap();
    let confined = confinement(&t, false, Limits::default());
    // The fastest of many runs: the machine's other work only ever adds time.
    let time = |cmd: &dyn Fn() -> Command| {
        (0..20)
            .map(|_| {
                let started = Instant::now();
                let status = cmd().current_dir(scratch.path()).status().unwrap();
                assert!(status.success());
                started.elapsed().as_secs_f64() * 1000.0
            })
            .fold(f64::INFINITY, f64::min)
    };
    let plain = time(&|| {
        let mut c = Command::new("/bin/true");
        c.env_clear();
        c
    });
    let wrapped = time(&|| confined.command(Path::new("/bin/true"), scratch.path()));
    let outside = tempfile::tempdir().unwrap();
    let apply: Vec<f64> = (0..5).map(|_| probe(&[], outside.path()).apply_ms).collect();
    eprintln!(
        "confinement: /bin/true {plain:.2} ms plain, {wrapped:.2} ms through `nightshift confine` (+{:.2} ms per tool, fastest of 20 each; applying the policy: {:.2} ms, median of 5)",
        wrapped - plain,
        median(apply)
    );

    // A whole build, uncached (a fresh cache), confined and not: one nvcc and three
    // cuobjdump/nvdisasm runs each.
    let src = common::root().join("tests/candidates/vector_add/vec4.cu");
    let spec = BuildSpec {
        task: &t,
        source: &src,
        trusted: false,
        arch: "sm_90a".into(),
        extra_flags: vec![],
        defines: BTreeMap::new(),
    };
    let mut secs = [f64::INFINITY; 2];
    for _ in 0..3 {
        for (i, c) in [&Unconfined(Duration::from_secs(120)) as &dyn Confine, &confined].into_iter().enumerate() {
            let cache = tempfile::tempdir().unwrap();
            let started = Instant::now();
            let b = build(&tc, cache.path(), &spec, c).unwrap();
            assert!(!b.cached && b.sass.is_some() && b.sass_lines.is_some());
            secs[i] = secs[i].min(started.elapsed().as_secs_f64());
        }
    }
    eprintln!("a vector_add build (fastest of 3): {:.2} s unconfined, {:.2} s confined", secs[0], secs[1]);
    assert!(wrapped - plain < 100.0, "the trampoline costs {:.1} ms", wrapped - plain);
}
