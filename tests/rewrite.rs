//! The rewrite recipes against nvcc (the PyPI wheels in CI): every variant a recipe makes
//! of the annotated test kernels (`rewrite/tests/kernels/`) compiles, alone and composed
//! along a path, and `nightshift rewrite` works on the real binary.

mod common;
#[path = "../rewrite/tests/common/mod.rs"]
mod rewrite_common;

use rewrite::corpus::{self, Expect};
use rewrite::{recipes, Application, Params, RecipeId};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

fn test_kernels() -> Vec<(String, String)> {
    rewrite_common::kernels_in(&common::root().join("rewrite/tests/kernels"))
}

/// Compiles device and host code of one file (to a cubin: the host code is still parsed
/// and checked, and it is five times faster than a full object build).
fn compiles(nvcc: &Path, dir: &Path, name: &str, source: &str) -> Result<(), String> {
    let cu = dir.join(name);
    std::fs::write(&cu, source).unwrap();
    let out = Command::new(nvcc)
        .args(["-arch=sm_90a", "-cubin", "-o"])
        .arg(cu.with_extension("cubin"))
        .arg(&cu)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

/// Runs `jobs` on two threads (CI has two cores).
fn parallel(jobs: Vec<(String, String)>, nvcc: &Path, dir: &Path) -> Vec<String> {
    let queue = Mutex::new(jobs);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let Some((name, source)) = queue.lock().unwrap().pop() else { break };
                if let Err(e) = compiles(nvcc, dir, &name, &source) {
                    let tail: String = e.lines().filter(|l| l.contains("error")).take(5).collect::<Vec<_>>().join("\n");
                    failures.lock().unwrap().push(format!("{name}:\n{tail}"));
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

#[test]
fn every_variant_of_every_recipe_compiles() {
    let tc = common::require_toolchain();
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    let mut per_recipe = std::collections::BTreeMap::<String, usize>::new();
    for (name, text) in test_kernels() {
        let a = corpus::parse(&text).unwrap();
        let stem = name.trim_end_matches(".cu");
        for r in recipes::ALL {
            // The defaults on every kernel; every other parameter value on the first three
            // kernels that take the recipe.
            let taken = per_recipe.get(r.id.as_str()).copied().unwrap_or(0);
            let variants = if taken < 3 { r.variants() } else { vec![Params::default()] };
            for params in variants {
                let app = Application { recipe: r.id, params: params.clone() };
                let Ok(out) = rewrite::apply(&app, &text, &a.facts) else { continue };
                *per_recipe.entry(r.id.to_string()).or_default() += 1;
                // Parameter values that only change a macro default give the same file.
                if jobs.iter().any(|(_, s): &(String, String)| *s == out.source) {
                    continue;
                }
                let label: String =
                    params.label().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
                jobs.push((format!("{stem}--{}-{label}.cu", r.id), out.source));
            }
        }
    }
    for r in recipes::ALL {
        let n = per_recipe.get(r.id.as_str()).copied().unwrap_or(0);
        println!("{:<15} {n} variants", r.id.as_str());
        assert!(n >= 3, "{}: only {n} variants to build", r.id);
    }
    let total = jobs.len();
    println!("{total} distinct variants");
    let failures = parallel(jobs, &tc.nvcc, dir.path());
    assert!(failures.is_empty(), "{} of {total} variants do not compile:\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn recipes_compose_along_a_path_and_still_compile() {
    let tc = common::require_toolchain();
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for (name, text) in test_kernels() {
        let a = corpus::parse(&text).unwrap();
        // Apply every recipe that applies, one after the other, each on the last result.
        let mut source = text.clone();
        let mut path = Vec::new();
        for r in recipes::ALL {
            let app = Application { recipe: r.id, params: Params::default() };
            if let Ok(out) = rewrite::apply(&app, &source, &a.facts) {
                source = out.source;
                path.push(r.id.to_string());
            }
        }
        if path.len() >= 2 {
            let s = rewrite::Source::parse(&source);
            assert!(s.kernels().len() <= 2 * rewrite::Source::parse(&text).kernels().len(), "{name}: {path:?}");
            jobs.push((format!("{}--chain.cu", name.trim_end_matches(".cu")), source));
        }
        // And the expected ones must still leave something to decline with a reason.
        for (id, e) in &a.expects {
            if *e == Expect::Declines {
                let why = rewrite::apply(&Application { recipe: *id, params: Params::default() }, &text, &a.facts);
                assert!(why.is_err(), "{name}: {id}");
            }
        }
    }
    assert!(jobs.len() >= 20, "only {} kernels took two or more recipes", jobs.len());
    let total = jobs.len();
    let failures = parallel(jobs, &tc.nvcc, dir.path());
    assert!(
        failures.is_empty(),
        "{} of {total} composed kernels do not compile:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Issue 34's compositions: a thread per row made cooperative, then `then` on its lane
/// loops, on every test kernel where both apply (at least three); each result compiles.
fn cooperative_then(then: RecipeId, tag: &str, says: &str) {
    let tc = common::require_toolchain();
    let dir = tempfile::tempdir().unwrap();
    let app = |recipe| Application { recipe, params: Params::default() };
    let mut jobs = Vec::new();
    for (name, text) in test_kernels() {
        let a = corpus::parse(&text).unwrap();
        let Ok(coop) = rewrite::apply(&app(RecipeId::Cooperative), &text, &a.facts) else { continue };
        let Ok(both) = rewrite::apply(&app(then), &coop.source, &a.facts) else { continue };
        assert!(both.description.contains(says), "{name}: {}", both.description);
        jobs.push((format!("{}--{tag}.cu", name.trim_end_matches(".cu")), both.source));
    }
    assert!(jobs.len() >= 3, "cooperative then {then} composed on only {} kernels", jobs.len());
    let total = jobs.len();
    let failures = parallel(jobs, &tc.nvcc, dir.path());
    assert!(failures.is_empty(), "{} of {total} do not compile:\n{}", failures.len(), failures.join("\n\n"));
}

/// Lane-strided loops vectorized: 16 bytes a lane.
#[test]
fn cooperative_then_vectorize_composes_on_row_kernels_and_compiles() {
    cooperative_then(RecipeId::Vectorize, "coop-vec", "lane-strided");
}

/// A row that two or three lane-strided passes read, kept in registers by the first.
#[test]
fn cooperative_then_row_cache_composes_on_multi_pass_row_kernels_and_compiles() {
    cooperative_then(RecipeId::RowCache, "coop-rowcache", "kept in registers across");
}

/// The stencil example's path to its expert structure: rows in strips down each column,
/// then the nine weights out of the strip's loop into registers (they were loaded again
/// for every row). The result compiles, and the weights are read from `global` once.
#[test]
fn row_strip_then_register_table_on_the_stencil_example_compiles() {
    let tc = common::require_toolchain();
    let dir = tempfile::tempdir().unwrap();
    let task = nightshift::task::Task::load(&common::root().join("examples/stencil2d_3x3")).unwrap();
    let facts = nightshift::task::facts::rewrite_facts(&task);
    let baseline = std::fs::read_to_string(&task.baseline).unwrap();
    let declined =
        rewrite::apply(&Application { recipe: RecipeId::RegisterTable, params: Params::default() }, &baseline, &facts)
            .unwrap_err();
    assert!(declined.0.contains("each thread reads each of its elements once"), "{declined}");
    // One column a thread here; 4 below.
    let source = common::apply_path(&baseline, &["index-width", "row-strip:rows=8,cols=1", "register-table"], &facts);
    assert!(!source.contains("ns_col0"), "{source}");
    let fast = &source[source.find("stencil2d_3x3_kernel_fast(").unwrap()..];
    assert!(fast.contains("ns_tab_w[(dy + 1) * 3 + (dx + 1)]"), "{fast}");
    assert_eq!(fast.matches("= w[").count(), 1, "the weights are loaded once, by the fill: {fast}");
    // The hand rewrite's shape: 4 columns a thread, each row of the window one float4.
    let columns = common::apply_path(
        &baseline,
        &["index-width", "row-strip:rows=8,cols=4", "register-table", "read-only"],
        &facts,
    );
    assert!(columns.contains("reinterpret_cast<const float4*>(ns_p0)"), "{columns}");
    assert!(columns.contains("ns_store16(ns_sp[0], "), "{columns}");
    let failures = parallel(
        vec![("stencil--strip-table.cu".into(), source), ("stencil--strip-columns.cu".into(), columns)],
        &tc.nvcc,
        dir.path(),
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// CUDA's thread model, for a kernel that neither synchronizes nor shares memory between
/// threads (a row strip's output): each thread of each block runs to its end in turn on
/// the host, with `blockIdx`/`threadIdx` set; 16-byte types and stores are plain C++.
const CPU_SHIM: &str = r#"#pragma once
#include <cstddef>
#include <cstring>
struct uint3 { unsigned x, y, z; };
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
static uint3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
typedef void* cudaStream_t;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
struct alignas(16) float4 { float x, y, z, w; };
template <typename T> T __ldg(const T* p) { return *p; }
#define NIGHTSHIFT_STORE16
template <typename T> void ns_store16(T* dst, T a, T b, T c, T d) {
  static_assert(sizeof(T) == 4, "four 32-bit values");
  dst[0] = a; dst[1] = b; dst[2] = c; dst[3] = d;
}
template <typename F> void ns_cpu_launch(dim3 g, dim3 b, F f) {
  gridDim = g; blockDim = b;
  for (unsigned z = 0; z < g.z; ++z) for (unsigned y = 0; y < g.y; ++y) for (unsigned x = 0; x < g.x; ++x)
    for (unsigned tz = 0; tz < b.z; ++tz) for (unsigned ty = 0; ty < b.y; ++ty) for (unsigned tx = 0; tx < b.x; ++tx) {
      blockIdx = {x, y, z}; threadIdx = {tx, ty, tz};
      f();
    }
}
"#;

/// The stencil example's row strips (and a plus-shaped variant's) compute the original's
/// outputs bit for bit, inside the image, at its edges and at odd sizes, and read nothing
/// outside it: the rewritten file's fast kernel and its
/// fallback (the original kernel) run on the host through [`CPU_SHIM`] on the same
/// inputs, each launched as the rewritten launcher launches it. No GPU: the paths the
/// strip chooses at run time (inside, whole, edge) are plain code.
#[test]
fn row_strips_compute_the_originals_outputs_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let cxx = which::which("g++").expect("g++ (nvcc's host compiler)");
    let task = nightshift::task::Task::load(&common::root().join("examples/stencil2d_3x3")).unwrap();
    let facts = nightshift::task::facts::rewrite_facts(&task);
    let baseline = std::fs::read_to_string(&task.baseline).unwrap();
    // A plus-shaped variant of the same launcher: its taps' tests are `?:` conditions and
    // its check wraps the body, so both become known values inside.
    let taps =
        [("row - 1", "col", 1), ("row", "col - 1", 3), ("row", "col", 4), ("row", "col + 1", 5), ("row + 1", "col", 7)];
    let body: String = taps
        .iter()
        .map(|(r, c, k)| {
            format!("    acc += ({r} >= 0 && {r} < H && {c} >= 0 && {c} < W) ? w[{k}] * img[(size_t)({r}) * W + ({c})] : 0.0f;\n")
        })
        .collect();
    let plus_kernel = format!(
        "__global__ void stencil2d_3x3_kernel(const float* x, const float* w, float* y, int H, int W) {{\n  const int col = blockIdx.x * blockDim.x + threadIdx.x;\n  const int row = blockIdx.y * blockDim.y + threadIdx.y;\n  if (col < W && row < H) {{\n    const size_t plane = (size_t)blockIdx.z * H * W;\n    const float* img = x + plane;\n    float acc = 0.0f;\n{body}    y[plane + (size_t)row * W + col] = acc;\n  }}\n}}\n\n"
    );
    let (start, end) = (baseline.find("__global__").unwrap(), baseline.find("extern \"C\"").unwrap());
    let plus = format!("{}{plus_kernel}{}", &baseline[..start], &baseline[end..]);
    std::fs::write(dir.path().join("cuda_runtime.h"), CPU_SHIM).unwrap();
    let strips = [(8, 1), (8, 4), (16, 4), (4, 1)];
    for (shape, original, rows, cols) in strips
        .iter()
        .map(|(r, c)| ("3x3", &baseline, *r, *c))
        .chain(strips.iter().map(|(r, c)| ("plus", &plus, *r, *c)))
    {
        let path = ["index-width", &format!("row-strip:rows={rows},cols={cols}"), "register-table", "read-only"];
        let source = common::apply_path(original, &path, &facts);
        assert!(source.contains("if (ns_inside) {"), "{shape}: {source}");
        if shape == "plus" {
            assert!(source.contains("acc += true ? ns_tab_w[1] * ns_w0["), "{source}");
        }
        let kernels = &source[..source.find("extern \"C\"").expect("a launcher")];
        let extra = if cols == 1 { "grid.y" } else { "grid.y, grid.x" };
        let driver = format!(
            r#"#include "cuda_runtime.h"
#include <cstdio>
#include <vector>
{kernels}
int main() {{
  const int sizes[][3] = {{{{2, 19, 37}}, {{1, 16, 64}}, {{1, 33, 128}}, {{3, 8, 8}}, {{1, 1, 1}}, {{2, 40, 36}}, {{1, 17, 5}}, {{1, 64, 20}}}};
  unsigned long long seed = 88172645463325252ull;
  auto next = [&]() {{ seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; return (float)((seed >> 40) % 2001) / 1000.0f - 1.0f; }};
  int bad = 0;
  for (const auto& s : sizes) {{
    const int N = s[0], H = s[1], W = s[2];
    std::vector<float> x((size_t)N * H * W), w(9), want(x.size(), -7.0f), got(x.size(), -7.0f);
    for (auto& v : x) v = next();
    for (auto& v : w) v = next();
    const dim3 block(16, 16);
    const dim3 grid((W + block.x - 1) / block.x, (H + block.y - 1) / block.y, N);
    ns_cpu_launch(grid, block, [&] {{ stencil2d_3x3_kernel(x.data(), w.data(), want.data(), H, W); }});
    const dim3 fast(({cols} == 1 ? grid.x : (grid.x + {cols} - 1) / {cols}), (grid.y + {rows} - 1) / {rows}, grid.z);
    ns_cpu_launch(fast, block, [&] {{ stencil2d_3x3_kernel_fast(x.data(), w.data(), got.data(), H, W, {extra}); }});
    for (size_t i = 0; i < x.size(); ++i)
      if (std::memcmp(&want[i], &got[i], 4) != 0) {{
        if (bad < 5) std::printf("N=%d H=%d W=%d at %zu: %.9g, want %.9g\n", N, H, W, i, got[i], want[i]);
        ++bad;
      }}
  }}
  std::printf("%d differences\n", bad);
  return bad != 0;
}}
"#
        );
        // AddressSanitizer: a window load past the image fails the run even where its value
        // goes unused.
        let name = format!("{shape}-strip-{rows}x{cols}");
        run_on_host(&cxx, dir.path(), &name, &driver, &["-std=c++17", "-fno-strict-aliasing"]);
    }
}

/// Builds `driver` with g++ and AddressSanitizer (`dir` holds its `cuda_runtime.h`), runs
/// it, and asserts it exits 0 and prints "0 differences".
fn run_on_host(cxx: &Path, dir: &Path, name: &str, driver: &str, flags: &[&str]) {
    let cpp = dir.join(format!("{name}.cpp"));
    std::fs::write(&cpp, driver).unwrap();
    let exe = dir.join(name);
    let built = Command::new(cxx)
        .args(flags)
        .args([
            "-O1",
            "-fsanitize=address",
            "-fno-omit-frame-pointer",
            "-ffp-contract=off",
            "-Wno-unknown-pragmas",
            "-I",
        ])
        .arg(dir)
        .arg(&cpp)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(built.status.success(), "{name}: {}", String::from_utf8_lossy(&built.stderr));
    let ran = Command::new(&exe).output().unwrap();
    let out = String::from_utf8_lossy(&ran.stdout);
    let err = String::from_utf8_lossy(&ran.stderr);
    assert!(ran.status.success() && out.contains("0 differences"), "{name}: {out}{err}");
}

/// A recipe that declines on coarse blocks, offered under `coarsen` by the tuner: on the
/// causal convolution's path to its best kernel, the faster division goes on before the
/// coarse blocks and they are redone on top. The child compiles and divides by magic numbers.
#[test]
fn a_division_under_coarse_blocks_on_the_causal_example_compiles() {
    use nightshift::generate::reorder;
    let tc = common::require_toolchain();
    let dir = tempfile::tempdir().unwrap();
    let task = nightshift::task::Task::load(&common::root().join("examples/causal_conv1d")).unwrap();
    let facts = nightshift::task::facts::rewrite_facts(&task);
    let baseline = std::fs::read_to_string(&task.baseline).unwrap();
    let path: Vec<String> = ["vectorize:width=16", "intrinsics:fn=div", "index-width:type=int", "coarsen:blocks=2"]
        .map(String::from)
        .to_vec();
    let parent = common::apply_path(&baseline, &path, &facts);
    let divmod = Application { recipe: RecipeId::FastDivmod, params: Params::default() };
    assert!(rewrite::apply(&divmod, &parent, &facts).is_err(), "fast-divmod applies to coarse blocks itself");
    let rebuilt = reorder::rebuild(&facts, &baseline, &path, &parent).expect("the path rebuilds the parent");
    let under = reorder::under_reshaping(&facts, &rebuilt, &parent, &Default::default());
    let (_, child) = under.iter().find(|(a, _)| *a == divmod).expect("fast-divmod is offered under coarsen");
    assert!(child.contains("ns_make_divisor(") && child.contains("NS_COARSEN"), "{child}");
    let failures = parallel(vec![("causal--divmod-under-coarsen.cu".into(), child.clone())], &tc.nvcc, dir.path());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Passes over a row that `vectorize` made wide (block-strided, and lane-strided after
/// `cooperative`) keep the row as its 16-byte runs in registers across the passes: on
/// every task, example and test kernel where the chain applies, the result compiles and
/// its fast kernel has no stack frame and spills nothing (an array in local memory would
/// read the row from memory again, only slower).
#[test]
fn vectorized_passes_keep_their_row_in_registers_and_compile() {
    let tc = common::require_toolchain();
    let dir = tempfile::tempdir().unwrap();
    let app = |recipe| Application { recipe, params: Params::default() };
    let mut inputs: Vec<(String, String, rewrite::Facts)> = Vec::new();
    for folder in ["tasks", "examples"] {
        for entry in std::fs::read_dir(common::root().join(folder)).unwrap() {
            let path = entry.unwrap().path();
            let Ok(task) = nightshift::task::Task::load(&path) else { continue };
            let facts = nightshift::task::facts::rewrite_facts(&task);
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            inputs.push((name, std::fs::read_to_string(&task.baseline).unwrap(), facts));
        }
    }
    for (name, text) in test_kernels() {
        let a = corpus::parse(&text).unwrap();
        inputs.push((name.trim_end_matches(".cu").to_string(), text, a.facts));
    }
    let mut jobs = Vec::new();
    for (name, text, facts) in &inputs {
        for chain in [&[RecipeId::Vectorize][..], &[RecipeId::Cooperative, RecipeId::Vectorize]] {
            let mut source = text.clone();
            let composed = chain.iter().all(|id| match rewrite::apply(&app(*id), &source, facts) {
                Ok(out) => {
                    source = out.source;
                    true
                }
                Err(_) => false,
            });
            let Some(cached) =
                composed.then(|| rewrite::apply(&app(RecipeId::RowCache), &source, facts).ok()).flatten()
            else {
                continue;
            };
            assert!(cached.description.contains(" runs of "), "{name}: {}", cached.description);
            // The fast kernel (the last one written) loads fewer runs than the passes did.
            let fast = &cached.source[cached.source.rfind("_fast(").unwrap()..];
            let once = fast.matches("ns_load(").count() < source.matches("ns_load(").count();
            assert!(once, "{name}: a later pass still loads the row: {fast}");
            jobs.push((format!("{name}--{}-rowcache.cu", chain.len()), cached.source));
        }
    }
    let names: Vec<&str> = jobs.iter().map(|(n, _)| n.as_str()).collect();
    for expected in ["layernorm--1-rowcache.cu", "softmax--1-rowcache.cu", "rowwise_quant_int8--2-rowcache.cu"] {
        assert!(names.contains(&expected), "{expected} not among {names:?}");
    }
    for (name, source) in &jobs {
        let cu = dir.path().join(name);
        std::fs::write(&cu, source).unwrap();
        let out = Command::new(&tc.nvcc)
            .args(["-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-o"])
            .arg(cu.with_extension("cubin"))
            .arg(&cu)
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {log}");
        let report = sass::ptxas::parse_ptxas(&log);
        let fast: Vec<_> = report.kernels.iter().filter(|k| k.name.contains("_fast")).collect();
        assert!(!fast.is_empty(), "{name}: no fast kernel in {log}");
        for k in fast {
            let local = k.stack_frame_bytes + k.spill_store_bytes + k.spill_load_bytes;
            assert_eq!(local, 0, "{name}: `{}` keeps {local} bytes in local memory", k.name);
        }
    }
}

fn rewrite_cmd(args: &[&str]) -> (i32, String, String) {
    let out = common::building_command().arg("rewrite").args(args).output().expect("nightshift runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn the_rewrite_command_lists_writes_and_builds_variants() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    let (code, stdout, stderr) = rewrite_cmd(&["tasks/softmax", "--out", o, "--build", "--arch", "sm_90a", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let rows = v["recipes"].as_array().unwrap();
    assert_eq!(rows.len(), recipes::ALL.len());
    for r in rows {
        assert!(r["id"].is_string() && r["applies"].is_boolean(), "{r}");
        if r["applies"] == true {
            assert!(r["description"].is_string());
            let file = PathBuf::from(r["file"].as_str().unwrap());
            assert!(file.starts_with(out.path()) && file.is_file(), "{r}");
            assert_eq!(r["built"], true, "{r}");
        } else {
            assert!(r["reason"].as_str().unwrap().len() > 10, "{r}");
            assert!(r["file"].is_null() && r["built"].is_null(), "{r}");
        }
    }
    let applies: Vec<&str> = rows.iter().filter(|r| r["applies"] == true).map(|r| r["id"].as_str().unwrap()).collect();
    for id in ["vectorize", "shuffle-reduce", "row-cache"] {
        assert!(applies.contains(&id), "softmax should take {id}: {applies:?}");
    }
    let coop = rows.iter().find(|r| r["id"] == "cooperative").unwrap();
    assert!(coop["reason"].as_str().unwrap().contains("softmax_rows"), "{coop}");

    // Human output: the diff of what applies, the reason for what does not.
    let (code, stdout, _) = rewrite_cmd(&["tasks/vector_add", "--recipe", "vectorize:width=8"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("applies  vectorize:width=8"), "{stdout}");
    assert!(stdout.contains("+++ vectorize-width8.cu"), "{stdout}");
    assert!(stdout.contains("fast path when: (long long)grid * block <= 2147481599LL && ns_aligned(a, 8)"), "{stdout}");
}

#[test]
fn the_rewrite_command_refuses_bad_input_clearly() {
    let (code, _, stderr) = rewrite_cmd(&["tasks/vector_add", "--recipe", "vectorise"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unknown recipe `vectorise`") && stderr.contains("vectorize"), "{stderr}");
    let (code, _, stderr) = rewrite_cmd(&["tasks/vector_add", "--recipe", "vectorize:width=3"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("width=3 is not offered") && stderr.contains("16, 8"), "{stderr}");
    // An explicit recipe that does not apply: exit 1 with its reason.
    let (code, stdout, _) = rewrite_cmd(&["tasks/vector_add", "--recipe", "shuffle-reduce"]);
    assert_eq!(code, 1);
    assert!(stdout.contains("declines shuffle-reduce"), "{stdout}");
    let (code, _, stderr) = rewrite_cmd(&["tasks/no_such_task"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("task.toml"), "{stderr}");
}

/// CUDA's thread model with barriers and warps, for a kernel whose threads share memory:
/// every thread of a block is a host thread (`__shared__` arrays are the function's
/// statics, `__syncthreads` a barrier over the block), blocks run one after another. The
/// TF32 primitives of `tensor-tile` are emulated from PTX's definition of `cvt.rna.tf32`
/// and of `mma.m16n8k8`'s fragments (the layouts the GPU test's 3xTF32 GEMM uses): the
/// lanes of a warp meet at a barrier, each computes its four outputs from all 32 lanes'
/// fragments.
const THREADED_SHIM: &str = r#"#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
using std::min;
using std::max;
struct uint3 { unsigned x, y, z; };
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
inline thread_local uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
typedef struct CUstream_st* cudaStream_t;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
struct NsWarp {
  std::barrier<> meet{32};
  uint32_t a[32][4], b[32][2];
  float c[32][4];
};
inline std::barrier<>* ns_block;
inline std::vector<std::unique_ptr<NsWarp>> ns_warps;
inline std::mutex ns_atomic;
inline std::atomic<long> ns_mmas{0};
inline void __syncthreads() { ns_block->arrive_and_wait(); }
// A block-wide AND: every thread's vote lands before the first barrier and is read before
// the second; the two counters alternate, so a vote's reset never meets the next one's.
inline std::atomic<int> ns_votes_against[2];
inline thread_local unsigned ns_vote_round = 0;
inline int __syncthreads_and(int p) {
  const unsigned r = ns_vote_round++ & 1;
  if (!p) ns_votes_against[r].fetch_add(1);
  ns_block->arrive_and_wait();
  const int all = ns_votes_against[r].load() == 0;
  ns_block->arrive_and_wait();
  ns_votes_against[r].store(0);
  return all;
}
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
// prefetch's four-element loads, counted: a rewrite whose wide path never ran would
// otherwise pass on its narrow copy.
#define NIGHTSHIFT_PREFETCH_WIDE
inline std::atomic<long> ns_wide_loads{0};
template <typename T> struct alignas(16) ns_pf_quad { T v[4]; };
template <typename T> inline ns_pf_quad<T> ns_pf_load4(const T* p) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) std::abort();
  ++ns_wide_loads;
  ns_pf_quad<T> q;
  std::memcpy(q.v, p, sizeof(q.v));
  return q;
}
inline float atomicAdd(float* p, float v) { std::lock_guard<std::mutex> l(ns_atomic); float o = *p; *p = o + v; return o; }
inline float __uint_as_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t ns_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
#define NIGHTSHIFT_TENSOR_ISA
// cvt.rna.tf32.f32: round the 13 low mantissa bits to nearest, ties away from zero.
inline uint32_t ns_rna(float x) { return (ns_bits(x) + 0x1000u) & 0xffffe000u; }
template <bool Lo> inline void ns_tt_split(float x, uint32_t& hi, uint32_t& lo) {
  hi = ns_rna(x);
  lo = Lo ? ns_rna(x - __uint_as_float(hi)) : 0u;
}
inline void ns_tt_mma(float* c, const uint32_t* a, const uint32_t* b) {
  const unsigned lin = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  NsWarp& w = *ns_warps[lin / 32];
  const unsigned lane = lin % 32;
  ++ns_mmas;
  std::memcpy(w.a[lane], a, 16); std::memcpy(w.b[lane], b, 8); std::memcpy(w.c[lane], c, 16);
  w.meet.arrive_and_wait();
  float A[16][8], B[8][8], C[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, t = l & 3;
    A[g][t] = __uint_as_float(w.a[l][0]); A[g + 8][t] = __uint_as_float(w.a[l][1]);
    A[g][t + 4] = __uint_as_float(w.a[l][2]); A[g + 8][t + 4] = __uint_as_float(w.a[l][3]);
    B[t][g] = __uint_as_float(w.b[l][0]); B[t + 4][g] = __uint_as_float(w.b[l][1]);
    C[g][2 * t] = w.c[l][0]; C[g][2 * t + 1] = w.c[l][1]; C[g + 8][2 * t] = w.c[l][2]; C[g + 8][2 * t + 1] = w.c[l][3];
  }
  const int g = lane >> 2, t = lane & 3;
  const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int e = 0; e < 4; ++e) {
    float s = C[rows[e]][cols[e]];
    for (int k = 0; k < 8; ++k) s += A[rows[e]][k] * B[k][cols[e]];
    c[e] = s;
  }
  w.meet.arrive_and_wait();
}
template <typename F> void ns_cpu_launch(dim3 g, dim3 b, F f) {
  gridDim = g; blockDim = b;
  const unsigned n = b.x * b.y * b.z;
  for (unsigned z = 0; z < g.z; ++z) for (unsigned y = 0; y < g.y; ++y) for (unsigned x = 0; x < g.x; ++x) {
    std::barrier<> block(n);
    ns_block = &block;
    ns_warps.clear();
    for (unsigned i = 0; i < (n + 31) / 32; ++i) ns_warps.push_back(std::make_unique<NsWarp>());
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < n; ++i)
      threads.emplace_back([=] {
        blockIdx = {x, y, z};
        threadIdx = {i % b.x, (i / b.x) % b.y, i / (b.x * b.y)};
        f();
      });
    for (auto& t : threads) t.join();
  }
}
"#;

/// `tensor-tile` and `prefetch` (alone, and chained both ways) on four GEMMs of different
/// shapes compute what the original computes:
/// the split-K linear layer (k-contiguous operands, a register tile of outputs a thread,
/// the k loop outermost in its nest) at three tile sizes, the one-output-a-thread GEMM (B
/// indexed `Bs[k][n]` with a padded row, a scalar accumulator) at both of its tiles, the
/// corpus's attention scores (the k loop innermost, a 4 x 4 tile a thread, a 64 x 64 tile
/// on 256 threads) and batched GEMM (32 x 8 blocks, four rows a thread), on odd sizes;
/// each with the tiles' rows padded for the banks and as declared, and with the next k
/// tile's loads prefetched into registers. The rewritten kernel and the original run on the host through [`THREADED_SHIM`]; the
/// outputs agree to the 3xTF32 rounding, and the tensor-core path ran (MMAs counted), except
/// at a tile no MMA shape fits (or with no tensor tiles), where the original loop must run.
#[test]
fn tensor_tiles_and_prefetched_loads_compute_the_originals_products_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let cxx = which::which("g++").expect("g++ (nvcc's host compiler)");
    std::fs::write(dir.path().join("cuda_runtime.h"), THREADED_SHIM).unwrap();
    // (task, kernel, -D sets, the driver's body: sizes, inputs, both launches, compare)
    let cases = [
        (
            "examples/linear_splitk_f32",
            "linear_splitk_kernel",
            vec!["", "-DBN=128 -DBT=64 -DSPLIT_K=1", "-DBN=64 -DBT=32 -DSPLIT_K=2"],
            r#"  const int sizes[][3] = {{3, 33, 65}, {17, 129, 100}, {65, 64, 40}, {1, 1, 1}, {64, 128, 128}};
  for (const auto& s : sizes) {
    const int T = s[0], N = s[1], K = s[2];
    std::vector<float> x((size_t)T * K), W((size_t)N * K), b(N), want((size_t)T * N, 0.f), got(want);
    for (auto& v : x) v = next();
    for (auto& v : W) v = next();
    for (auto& v : b) v = next();
    int chunk = (K + SPLIT_K - 1) / SPLIT_K;
    chunk = (chunk + BK - 1) / BK * BK;
    const int splits = (K + chunk - 1) / chunk;
    const dim3 grid((N + BN - 1) / BN, (T + BT - 1) / BT, splits), block(16, 16);
    ns_cpu_launch(grid, block, [&] { ORIGINAL(x.data(), W.data(), b.data(), want.data(), T, N, K, chunk); });
    ns_cpu_launch(grid, block, [&] { KERNEL(x.data(), W.data(), b.data(), got.data(), T, N, K, chunk); });
    compare(want, got, T, N, K);
  }"#,
        ),
        (
            "tasks/gemm_f32",
            "gemm_tiled",
            // TILE=12: 144 threads and a k tile of 12 fit no MMA shape; the original loop runs
            // (on the padded rows), and no MMA may.
            vec!["", "-DTILE=32", "-DTILE=12 -DNS_EXPECT_MMAS=0"],
            r#"  const int sizes[][3] = {{17, 33, 65}, {1, 257, 31}, {40, 24, 48}};
  for (const auto& s : sizes) {
    const int M = s[0], N = s[1], K = s[2];
    std::vector<float> A((size_t)M * K), B((size_t)K * N), want((size_t)M * N, 0.f), got(want);
    for (auto& v : A) v = next();
    for (auto& v : B) v = next();
    const dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE), block(TILE, TILE);
    ns_cpu_launch(grid, block, [&] { ORIGINAL(A.data(), B.data(), want.data(), M, N, K); });
    ns_cpu_launch(grid, block, [&] { KERNEL(A.data(), B.data(), got.data(), M, N, K); });
    compare(want, got, M, N, K);
  }"#,
        ),
        (
            "rewrite/tests/kernels/attention_scores_tile_f32.cu",
            "scores_tile",
            vec![""],
            r#"  const int sizes[][3] = {{2, 37, 40}, {1, 64, 32}, {1, 5, 8}};
  for (const auto& sz : sizes) {
    const int heads = sz[0], L = sz[1], D = sz[2];
    std::vector<float> q((size_t)heads * L * D), k(q.size()), want((size_t)heads * L * L, 0.f), got(want);
    for (auto& v : q) v = next();
    for (auto& v : k) v = next();
    const dim3 grid((L + 63) / 64, (L + 63) / 64, heads), block(16, 16);
    ns_cpu_launch(grid, block, [&] { ORIGINAL(q.data(), k.data(), want.data(), 0.125f, L, D); });
    ns_cpu_launch(grid, block, [&] { KERNEL(q.data(), k.data(), got.data(), 0.125f, L, D); });
    compare(want, got, heads, L, D);
  }"#,
        ),
        (
            "rewrite/tests/kernels/bmm_rows_per_thread_f32.cu",
            "bmm_tile",
            vec![""],
            r#"  const int sizes[][4] = {{2, 33, 40, 70}, {1, 32, 32, 32}, {3, 1, 5, 9}};
  for (const auto& sz : sizes) {
    const int batch = sz[0], M = sz[1], N = sz[2], K = sz[3];
    std::vector<float> A((size_t)batch * M * K), B((size_t)batch * K * N), want((size_t)batch * M * N, 0.f), got(want);
    for (auto& v : A) v = next();
    for (auto& v : B) v = next();
    const dim3 grid((N + TS - 1) / TS, (M + TS - 1) / TS, batch), block(TS, ROWS);
    ns_cpu_launch(grid, block, [&] { ORIGINAL(A.data(), B.data(), want.data(), M, N, K); });
    ns_cpu_launch(grid, block, [&] { KERNEL(A.data(), B.data(), got.data(), M, N, K); });
    compare(want, got, M, N, K);
  }"#,
        ),
    ];
    for (source_path, kernel, defines, body) in cases {
        // A task's baseline with its facts, or an annotated kernel of the corpus with its own.
        let path = common::root().join(source_path);
        let (baseline, facts) = if path.is_dir() {
            let task = nightshift::task::Task::load(&path).unwrap();
            (std::fs::read_to_string(&task.baseline).unwrap(), nightshift::task::facts::rewrite_facts(&task))
        } else {
            let text = std::fs::read_to_string(&path).unwrap();
            let facts = corpus::parse(&text).unwrap().facts;
            (text, facts)
        };
        let original = &baseline[baseline.find("__global__").unwrap()..baseline.find("extern \"C\"").unwrap()];
        let original = original.replace(kernel, "ns_original_kernel");
        // The tiles' rows padded for the banks (the default) and as declared; the loads
        // prefetched alone, and before and after the tensor tiles.
        let mut chains: Vec<(&str, &[&str])> = vec![
            ("banks", &["tensor-tile"]),
            ("keep", &["tensor-tile:pad=keep"]),
            ("pf", &["prefetch:width=1"]),
            ("tt-pf", &["tensor-tile", "prefetch:width=1"]),
            ("pf-tt", &["prefetch:width=1", "tensor-tile"]),
        ];
        // Four elements a load where the staging is a loop (the GEMM of one element a
        // thread stages with single stores, and `width=4` declines there). It goes last:
        // its two copies of the k loop are no top-level loop `tensor-tile` could take.
        let wide = rewrite::apply(&"prefetch:width=4".parse().unwrap(), &baseline, &facts);
        if source_path == "examples/linear_splitk_f32" {
            assert!(wide.is_ok(), "{:?}", wide.err());
        }
        if wide.is_ok() {
            chains.extend([("pf4", &["prefetch:width=4"][..]), ("tt-pf4", &["tensor-tile", "prefetch:width=4"][..])]);
        }
        // The default width is 4 where it holds, else 1: the same kernels as those chains.
        for (default, narrow, four) in [
            (&["prefetch"][..], &["prefetch:width=1"][..], &["prefetch:width=4"][..]),
            (&["tensor-tile", "prefetch"], &["tensor-tile", "prefetch:width=1"], &["tensor-tile", "prefetch:width=4"]),
        ] {
            let same_as = if wide.is_ok() { four } else { narrow };
            let got = common::apply_path(&baseline, default, &facts);
            assert!(
                got == common::apply_path(&baseline, same_as, &facts),
                "{source_path}: {default:?} is not {same_as:?}"
            );
        }
        for (label, chain) in chains {
            let source = common::apply_path(&baseline, chain, &facts);
            let widened = chain.iter().any(|a| a.ends_with("width=4"));
            assert_eq!(source.contains("ns_pf_map"), widened, "{source}");
            let tensor = chain.iter().any(|a| a.starts_with("tensor-tile"));
            assert_eq!(source.contains("ns_tt_step<ns_tt0"), tensor, "{source}");
            assert_eq!(source.contains("ns_pf0"), chain.iter().any(|a| a.starts_with("prefetch")), "{source}");
            assert_eq!(
                source.contains("/ 8 * 8 + 4]") || source.contains("/ 16 * 16 + 8]"),
                tensor && label != "keep",
                "{source}"
            );
            let rewritten = &source[..source.find("extern \"C\"").expect("a launcher")];
            let driver = format!(
                r#"#include "cuda_runtime.h"
#include <cmath>
#include <cstdio>
{rewritten}
{original}
#define KERNEL {kernel}
#define ORIGINAL ns_original_kernel
#ifndef NS_EXPECT_MMAS
#define NS_EXPECT_MMAS 1
#endif
#ifndef NS_EXPECT_WIDE
#define NS_EXPECT_WIDE 0
#endif
static int bad = 0;
static void compare(const std::vector<float>& want, const std::vector<float>& got, int a, int b, int k) {{
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(want[i] - got[i]) <= 1e-5f * std::sqrt((float)k) + 1e-5f * std::fabs(want[i]))) {{
      if (bad < 5) std::printf("%d x %d x %d at %zu: %.9g, want %.9g\n", a, b, k, i, got[i], want[i]);
      ++bad;
    }}
}}
int main() {{
  unsigned long long seed = 88172645463325252ull;
  auto next = [&]() {{ seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; return (float)((seed >> 40) % 2001) / 1000.0f - 1.0f; }};
{body}
  std::printf("%d differences, %ld MMAs, %ld wide loads\n", bad, ns_mmas.load(), ns_wide_loads.load());
  return bad != 0 || (ns_mmas.load() > 0) != (NS_EXPECT_MMAS != 0) || (NS_EXPECT_WIDE && ns_wide_loads.load() == 0);
}}
"#
            );
            for d in &defines {
                let name = format!("{kernel}-{label}{}", d.replace(['-', '=', ' '], "_"));
                let mut flags = vec!["-std=c++20", "-pthread"];
                flags.extend(d.split_whitespace());
                if !tensor {
                    flags.push("-DNS_EXPECT_MMAS=0");
                }
                // The linear layer's last size fills its tiles: the four-element loads run.
                if widened && source_path == "examples/linear_splitk_f32" {
                    flags.push("-DNS_EXPECT_WIDE=1");
                }
                run_on_host(&cxx, dir.path(), &name, &driver, &flags);
            }
        }
    }
}

/// `tensor-tile`'s fast path is what nvcc builds for Hopper and its fallback what it builds
/// before sm_80: the linear layer's rewrite, compiled by the wheel nvcc, holds 3 HMMAs per
/// MMA tile per 8 of k (the k tile of 32 unrolled: 4 steps) on sm_90a, 12 at the default
/// 16 x 32 tile (one MMA tile on each of 4 warps) and 96 at 64 x 128 (8 a warp), and none on
/// sm_75, where the original loop runs.
#[test]
fn tensor_tiles_build_to_hmma_on_hopper_and_to_the_original_loop_before_sm80() {
    let tc = common::require_toolchain();
    let Some(cuobjdump) = tc.cuobjdump.clone() else { panic!("cuobjdump (the CUDA wheels) is needed") };
    let dir = tempfile::tempdir().unwrap();
    let task = nightshift::task::Task::load(&common::root().join("examples/linear_splitk_f32")).unwrap();
    let facts = nightshift::task::facts::rewrite_facts(&task);
    let baseline = std::fs::read_to_string(&task.baseline).unwrap();
    let cu = dir.path().join("tensor-tile.cu");
    std::fs::write(&cu, common::apply_path(&baseline, &["tensor-tile"], &facts)).unwrap();
    for (arch, defines, hmma) in
        [("sm_90a", vec![], 12), ("sm_90a", vec!["-DBN=128", "-DBT=64"], 96), ("sm_75", vec!["-DBN=128", "-DBT=64"], 0)]
    {
        let cubin = dir.path().join(format!("{arch}-{}.cubin", defines.len()));
        let built = Command::new(&tc.nvcc)
            .arg(format!("-arch={arch}"))
            .arg("-cubin")
            .args(&defines)
            .arg("-o")
            .arg(&cubin)
            .arg(&cu)
            .output()
            .unwrap();
        assert!(built.status.success(), "{arch} {defines:?}: {}", String::from_utf8_lossy(&built.stderr));
        let sass = Command::new(&cuobjdump).arg("-sass").arg(&cubin).output().unwrap();
        let count = String::from_utf8_lossy(&sass.stdout).lines().filter(|l| l.contains("HMMA")).count();
        assert_eq!(count, hmma, "{arch} {defines:?}");
    }
}
