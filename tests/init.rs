//! `nightshift init` on launcher signatures as they come from production code: each case
//! runs the real binary on a file in a temporary folder and reads what it wrote.

mod common;

use std::path::PathBuf;
use std::process::Command;

struct Init {
    code: i32,
    stdout: String,
    stderr: String,
    dir: PathBuf,
    from: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Init {
    fn toml(&self) -> String {
        std::fs::read_to_string(self.dir.join("task.toml")).unwrap_or_default()
    }

    /// The same run again with --json, in the same folders.
    fn json(&self, extra: &[&str]) -> (i32, serde_json::Value) {
        let out = Command::new(common::nightshift_bin())
            .arg("init")
            .arg(&self.dir)
            .arg("--from")
            .arg(&self.from)
            .args(extra)
            .arg("--json")
            .output()
            .unwrap();
        (out.status.code().unwrap_or(-1), serde_json::from_slice(&out.stdout).unwrap_or_default())
    }
}

/// Writes `files` (name, text) into a fresh folder and runs init on the first one.
fn init(files: &[(&str, &str)], extra: &[&str]) -> Init {
    let tmp = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let p = tmp.path().join("src").join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let dir = tmp.path().join("task");
    let from = tmp.path().join("src").join(files[0].0);
    let out = Command::new(common::nightshift_bin())
        .arg("init")
        .arg(&dir)
        .arg("--from")
        .arg(&from)
        .args(extra)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    Init {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
        dir,
        from,
        _tmp: tmp,
    }
}

/// A launcher around a kernel that does nothing: its lengths can only be guessed.
fn kernel(launcher: &str) -> String {
    format!("#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n__global__ void k() {{}}\n{launcher}\n")
}

/// An elementwise kernel `y[i] = x[i] * 2` over `n` of type `T` and size type `N`, with
/// its launcher `name`.
fn elementwise(name: &str, t_in: &str, t_out: &str, n: &str) -> String {
    format!(
        "#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n\
         __global__ void {name}_kernel(const {t_in}* __restrict__ x, {t_out}* __restrict__ y, {n} n) {{\n\
           {n} i = ({n})blockIdx.x * blockDim.x + threadIdx.x;\n\
           if (i < n) y[i] = ({t_out})((float)x[i] * 2.0f);\n\
         }}\n\
         extern \"C\" void {name}(const {t_in}* __restrict__ x, {t_out}* __restrict__ y, {n} n, cudaStream_t stream) {{\n\
           {name}_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);\n\
         }}\n"
    )
}

#[test]
fn a_plain_elementwise_launcher_gives_a_valid_task() {
    let r = init(&[("scale.cu", &elementwise("scale", "float", "float", "int"))], &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let t = r.toml();
    assert!(t.contains("entry = \"scale\""), "{t}");
    assert!(
        t.contains("type = \"const float*\"\nlen = \"n\"   # from the kernel's indexing: `x[i]` (scale.cu:"),
        "{t}"
    );
    assert!(
        t.contains("name = \"y\"\ntype = \"float*\"\nlen = \"n\"   # from the kernel's indexing: `y[i]` (scale.cu:6)\noutput = true"),
        "{t}"
    );
    assert!(t.contains("# reference = \"reference.cu\""), "the reference comment is there: {t}");
    assert!(t.contains("check = [{ n = 1 }, { n = 17 }, { n = 257 }, { n = 24 }]"), "{t}");
    assert!(r.stdout.contains("valid."), "{}", r.stdout);
    assert!(r.dir.join("scale.cu").is_file());
}

#[test]
fn restrict_and_size_t() {
    let src = "__global__ void saxpy_k(const float* x, float* y, float a, size_t n) {\n  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;\n  if (i < n) y[i] = a * x[i];\n}\nextern \"C\" void saxpy(const float* __restrict__ x, float *__restrict__ y, float a, size_t n, cudaStream_t stream) {\n  saxpy_k<<<(n + 255) / 256, 256, 0, stream>>>(x, y, a, n);\n}\n";
    let r = init(&[("saxpy.cu", src)], &[]);
    // `a` is a guess, listed with its line: exit 1.
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("task.toml:31: arg `a`.value: 1.0 is a GUESS (no name it knows)"), "{}", r.stdout);
    let t = r.toml();
    assert!(t.contains("type = \"size_t\""), "{t}");
    assert!(t.contains("name = \"a\"\ntype = \"float\"\nvalue = 1.0   # GUESSED"), "{t}");
    // 2^24 fp32 in and out moves 134 MB (45 us at 3 TB/s): doubled twice, to 537 MB.
    assert!(t.contains("bench = { n = 67108864 }"), "{t}");
}

#[test]
fn half_and_bf16_pointers_get_16_bit_tolerances() {
    let r = init(&[("cast.cu", &elementwise("cast", "__half", "__nv_bfloat16", "int64_t"))], &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let t = r.toml();
    assert!(t.contains("type = \"const __half*\""), "{t}");
    assert!(t.contains("type = \"__nv_bfloat16*\""), "{t}");
    assert!(t.contains("rtol = 2e-2   # bf16"), "{t}");
    assert!(t.contains("type = \"int64_t\""), "{t}");
}

#[test]
fn a_gemm_whose_kernel_says_nothing_gets_its_shapes_from_the_names_as_guesses() {
    let r = init(
        &[("gemm.cu", &kernel("extern \"C\" void gemm(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {}"))],
        &[],
    );
    // Written, and it validates, but a length from a name is a guess: exit 1.
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    for (arg, len) in [("A", "M * K"), ("B", "K * N"), ("C", "M * N")] {
        let shown = r.stdout.lines().find(|l| l.trim_start().starts_with(&format!("{arg} "))).unwrap_or_default();
        assert!(shown.contains(len) && shown.contains("GUESSED from the names"), "{arg}: {}", r.stdout);
        assert!(
            r.stdout.contains(&format!("arg `{arg}`.len: `{len}` is a GUESS from the names (GEMM naming")),
            "listed as left to check: {}",
            r.stdout
        );
    }
    assert!(r.stdout.contains("passed to no kernel"), "why the indexing did not tell: {}", r.stdout);
    assert!(!r.stdout.contains("\nvalid."), "{}", r.stdout);
    let (code, v) = r.json(&[]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["valid"], false);
    assert_eq!(v["loads"], true, "the guesses load; they are just not confirmed");
    let guesses: Vec<&serde_json::Value> =
        v["todos"].as_array().unwrap().iter().filter(|t| t["kind"] == "confirm-guess").collect();
    assert_eq!(guesses.len(), 3, "{v}");
    assert!(v["lengths"].as_array().unwrap().iter().all(|l| l["from"] == "name"), "{v}");
    let t = r.toml();
    for (arg, len) in [("A", "M * K"), ("B", "K * N"), ("C", "M * N")] {
        assert!(
            t.contains(&format!(
                "name = \"{arg}\"\ntype = \"{}float*\"\nlen = \"{len}\"",
                if arg == "C" { "" } else { "const " }
            )),
            "{arg}: {t}"
        );
    }
}

#[test]
fn a_cpp_entry_is_refused_with_the_wrapping_recipe() {
    let src = kernel("namespace ops {\ntemplate <typename T>\nvoid launch_gelu(const T* x, T* y, int n, cudaStream_t stream) {}\n}\n");
    let r = init(&[("gelu.cu", &src)], &[]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("no extern \"C\" launcher"), "{}", r.stderr);
    assert!(r.stderr.contains("ops::launch_gelu") || r.stderr.contains("launch_gelu ("), "{}", r.stderr);
    assert!(r.stderr.contains("extern \"C\" void fused_gelu_bf16("), "the worked example: {}", r.stderr);
    assert!(!r.dir.exists(), "nothing is written when init refuses");
}

#[test]
fn two_extern_c_functions_need_an_entry() {
    let src = elementwise("launch_a", "float", "float", "int") + &elementwise("launch_b", "float", "float", "int");
    let r = init(&[("two.cu", &src)], &[]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("2 extern \"C\" functions") && r.stderr.contains("launch_a") && r.stderr.contains("launch_b"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("--entry NAME"), "{}", r.stderr);
    assert!(!r.dir.exists());
    let r = init(&[("two.cu", &src)], &["--entry", "launch_b"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.toml().contains("entry = \"launch_b\""));
    let r = init(&[("two.cu", &src)], &["--entry", "launch_c"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--entry launch_c: no extern \"C\" function of that name"), "{}", r.stderr);
}

#[test]
fn unknown_lengths_and_index_ranges_are_todos_with_their_lines() {
    let src = kernel("extern \"C\" {\nvoid gather_heads(const float* q, const int* idx, float* o, int B, int S, int H, cudaStream_t s) {\n}\n}");
    let r = init(&[("gather.cu", &src)], &[]);
    assert_eq!(r.code, 1, "written, with TODOs left: {}{}", r.stdout, r.stderr);
    let t = r.toml();
    let todo_lines: Vec<usize> =
        t.lines().enumerate().filter(|(_, l)| l.contains("\"TODO\"")).map(|(i, _)| i + 1).collect();
    assert_eq!(todo_lines.len(), 4, "q, idx and o lengths, idx range: {t}");
    for line in todo_lines {
        assert!(r.stdout.contains(&format!("task.toml:{line}:")), "line {line} is listed: {}", r.stdout);
    }
    assert!(r.stdout.contains("arg `idx`.init"), "{}", r.stdout);
    assert!(r.stdout.contains("validate says:"), "{}", r.stdout);
}

#[test]
fn launchers_that_cannot_be_called_are_refused_with_the_reason() {
    let cases = [
        ("extern \"C\" void nostream(const float* x, float* y, int n) {}", "takes no cudaStream_t"),
        ("extern \"C\" int ret(const float* x, float* y, int n, cudaStream_t s) { return 0; }", "must return void"),
        ("extern \"C\" void refs(const float& x, float* y, int n, cudaStream_t s) {}", "C++ reference"),
        ("extern \"C\" void mid(cudaStream_t s, const float* x, float* y, int n) {}", "must be the last parameter"),
        ("extern \"C\" void vec(const float4* x, float4* y, int n, cudaStream_t s) {}", "element type `float4`"),
    ];
    for (launcher, why) in cases {
        let r = init(&[("k.cu", &kernel(launcher))], &[]);
        assert_eq!(r.code, 2, "{launcher}: {}", r.stderr);
        assert!(r.stderr.contains(why), "{launcher}: {}", r.stderr);
        assert!(r.stderr.contains("k.cu:"), "the file and line are named: {}", r.stderr);
        assert!(!r.dir.exists());
    }
}

#[test]
fn bad_input_is_a_message_never_a_panic() {
    let r = init(&[("empty.cu", "")], &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no extern \"C\" host function"), "{}", r.stderr);
    let r = init(
        &[("k.cu", &kernel("extern \"C\" void f(const float* x, float* y, int n, cudaStream_t s) {}"))],
        &["-I", "/nonexistent/include"],
    );
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("-I /nonexistent/include: no such folder"), "{}", r.stderr);
    // An existing, non-empty task folder is never overwritten.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("k.cu"),
        kernel("extern \"C\" void f(const float* x, float* y, int n, cudaStream_t s) {}"),
    )
    .unwrap();
    std::fs::create_dir(tmp.path().join("t")).unwrap();
    std::fs::write(tmp.path().join("t/task.toml"), "mine").unwrap();
    let (code, _, err) = common::run(&[
        "init",
        tmp.path().join("t").to_str().unwrap(),
        "--from",
        tmp.path().join("k.cu").to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("was not written by `nightshift init`") && err.contains("--force"), "{err}");
    assert_eq!(std::fs::read_to_string(tmp.path().join("t/task.toml")).unwrap(), "mine");
}

fn example() -> (PathBuf, PathBuf) {
    let root = common::root().join("examples/bias_gelu_residual");
    (root.join("src/fused_epilogue.cu"), root.join("include"))
}

#[test]
fn the_example_goes_from_init_to_a_valid_building_task_and_a_header_change_rebuilds() {
    let (from, include) = example();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bias_gelu_residual");
    let out = common::building_command()
        .args([
            "init",
            dir.to_str().unwrap(),
            "--from",
            from.to_str().unwrap(),
            "-I",
            include.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["valid"], true);
    assert_eq!(v["todos"], serde_json::json!([]));
    assert_eq!(v["entry"], "fused_bias_gelu_residual");
    // Every length from the indexing, through the header's load and store helpers.
    let lens: Vec<(String, String, String)> = v["lengths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (l["arg"].as_str().unwrap().into(), l["len"].as_str().unwrap().into(), l["from"].as_str().unwrap().into())
        })
        .collect();
    let want = [("x", "rows * cols"), ("bias", "cols"), ("residual", "rows * cols"), ("out", "rows * cols")];
    assert_eq!(lens, want.map(|(a, l)| (a.to_string(), l.to_string(), "indexing".to_string())));
    assert!(dir.join("bf16_io.cuh").is_file() && dir.join("include/epilogue/activations.cuh").is_file());
    let t = std::fs::read_to_string(dir.join("task.toml")).unwrap();
    assert!(t.contains("include = [\"include\"]"), "{t}");
    assert!(t.contains("name = \"bias\"\ntype = \"const __nv_bfloat16*\"\nlen = \"cols\""), "{t}");

    let build = || {
        // From the task's parent with a relative path: nvcc runs elsewhere, -I must not break.
        let out = common::building_command()
            .current_dir(tmp.path())
            .args(["validate", "bias_gelu_residual", "--build", "--arch", "sm_90a"])
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(out.status.code(), Some(0), "{s}{}", String::from_utf8_lossy(&out.stderr));
        s
    };
    // A unique comment makes this test's first build a real compile, whatever the cache holds.
    let header = dir.join("include/epilogue/activations.cuh");
    let stamp = format!("// {}\n", tmp.path().display());
    std::fs::write(&header, std::fs::read_to_string(&header).unwrap() + &stamp).unwrap();
    assert!(build().contains("built baseline: compiled"));
    assert!(build().contains("built baseline: cached"));
    std::fs::write(&header, std::fs::read_to_string(&header).unwrap() + "// changed\n").unwrap();
    assert!(build().contains("built baseline: compiled"), "a header change rebuilds");
}

#[test]
fn include_folders_must_stay_inside_the_task() {
    let (from, include) = example();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let (code, _, err) = common::run(&[
        "init",
        dir.to_str().unwrap(),
        "--from",
        from.to_str().unwrap(),
        "-I",
        include.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
    let line = toml.lines().position(|l| l.starts_with("include = ")).unwrap() + 1;
    std::fs::write(dir.join("task.toml"), toml.replace("include = [\"include\"]", "include = [\"../outside\"]"))
        .unwrap();
    let (code, _, err) = common::run(&["validate", dir.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("build.include") && err.contains("inside the task directory"), "{err}");
    assert!(err.contains(&format!("task.toml:{line}")), "the line is named: {err}");
}

/// Runs the binary with `args` from `cwd`.
fn nightshift(cwd: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(common::nightshift_bin()).args(args).current_dir(cwd).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn an_unresolved_include_exits_1_and_the_suggested_rerun_finishes_the_task() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("repo/src")).unwrap();
    std::fs::create_dir_all(root.join("repo/third_party/inc/ops")).unwrap();
    std::fs::write(
        root.join("repo/src/act.cu"),
        elementwise("act", "float", "float", "int")
            .replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n#include \"ops/act.cuh\"\n"),
    )
    .unwrap();
    std::fs::write(root.join("repo/third_party/inc/ops/act.cuh"), "#pragma once\n").unwrap();
    let args = ["init", "task", "--from", "repo/src/act.cu", "--json"];
    let (code, out, err) = nightshift(root, &args);
    assert_eq!(code, 1, "an include init could not copy is not a finished task: {out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["valid"], false, "{v}");
    let todo =
        v["todos"].as_array().unwrap().iter().find(|t| t["kind"] == "missing-include").cloned().unwrap_or_default();
    assert!(todo["what"].as_str().unwrap_or("").contains("\"ops/act.cuh\" not found"), "{v}");
    assert_eq!(todo["line"], 2, "{v}");
    // The human summary says the same, with the command that fixes it.
    let (code, text, _) = nightshift(root, &args[..4]);
    assert_eq!(code, 1);
    assert!(text.contains("act.cu:2: \"ops/act.cuh\" not found"), "{text}");
    let inc = root.join("repo/third_party/inc").canonicalize().unwrap();
    let rerun = format!("nightshift init task --from repo/src/act.cu -I {}", inc.display());
    assert!(text.contains(&rerun), "the exact command: {text}");
    assert_eq!(v["rerun"], rerun.as_str());
    // That command, run as printed, continues in the folder init wrote and finishes.
    let words: Vec<&str> = rerun.split(' ').skip(1).collect();
    let (code, out, err) = nightshift(root, &words);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("rewrote task "), "{out}");
    assert!(root.join("task/include/ops/act.cuh").is_file());
    assert!(std::fs::read_to_string(root.join("task/task.toml")).unwrap().contains("include = [\"include\"]"));
    let (code, _, err) = nightshift(root, &["validate", "task"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn init_replaces_only_its_own_files_and_force_overrides() {
    let r = init(&[("scale.cu", &elementwise("scale", "float", "float", "int"))], &[]);
    assert_eq!(r.code, 0, "{}{}", r.stderr, r.stdout);
    assert!(r.dir.join(".nightshift-init.json").is_file());
    // Again, untouched: it continues.
    let (code, v) = r.json(&[]);
    assert_eq!((code, v["rewrote"].clone()), (0, serde_json::json!(true)), "{v}");
    // A file the user added is left alone.
    std::fs::write(r.dir.join("reference.cu"), "// mine\n").unwrap();
    let (code, _) = r.json(&[]);
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(r.dir.join("reference.cu")).unwrap(), "// mine\n");
    // An edited task.toml is not replaced without --force.
    let edited = r.toml().replace("seeds = 2", "seeds = 5");
    std::fs::write(r.dir.join("task.toml"), &edited).unwrap();
    let (code, v) = r.json(&[]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("task.toml edited since")
            && v["error"].as_str().unwrap().contains("--force"),
        "{v}"
    );
    assert_eq!(r.toml(), edited);
    let (code, v) = r.json(&["--force"]);
    assert_eq!(code, 0, "{v}");
    assert!(r.toml().contains("seeds = 2"));
    // A folder init never wrote is refused; --force writes into it and keeps the rest.
    let other = r.dir.with_file_name("theirs");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.md"), "keep\n").unwrap();
    let (code, _, err) = nightshift(r.dir.parent().unwrap(), &["init", "theirs", "--from", r.from.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("theirs already exists and was not written by `nightshift init`"), "{err}");
    assert!(!other.join("task.toml").exists());
    let (code, _, err) =
        nightshift(r.dir.parent().unwrap(), &["init", "theirs", "--from", r.from.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(other.join("task.toml").is_file() && other.join("notes.md").is_file());
}

#[test]
fn lengths_come_from_the_kernels_indexing_where_the_names_would_mislead() {
    // `w` is one weight per column, `height` and `width` are no names init knows: the names
    // would make `w` a matrix; the indexing says `width`. A 3-D grid over (B, H) with a
    // loop over D has three sizes, for which the names give nothing at all.
    let src = r#"#include <cuda_runtime.h>
__global__ void scale_cols(const float* src, const float* w, float* dst, int height, int width) {
  int r = blockIdx.x;
  if (r >= height) return;
  const float* row = src + (size_t)r * width;
  for (int c = threadIdx.x; c < width; c += blockDim.x) dst[(size_t)r * width + c] = row[c] * w[c];
}
__global__ void heads(const float* q, float* o, int B, int H, int D) {
  int b = blockIdx.y, h = blockIdx.x;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    size_t at = ((size_t)b * H + h) * D + d;
    o[at] = q[at];
  }
}
extern "C" void run_rows(const float* src, const float* w, float* dst, int height, int width, cudaStream_t s) {
  scale_cols<<<height, 128, 0, s>>>(src, w, dst, height, width);
}
extern "C" void run_heads(const float* q, float* o, int B, int H, int D, cudaStream_t s) {
  heads<<<dim3(H, B), 64, 0, s>>>(q, o, B, H, D);
}
"#;
    let r = init(&[("two.cu", src)], &["--entry", "run_rows"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let t = r.toml();
    assert!(
        t.contains(
            "name = \"w\"\ntype = \"const float*\"\nlen = \"width\"   # from the kernel's indexing: `w[c]` (two.cu:6)"
        ),
        "{t}"
    );
    assert!(t.contains("name = \"src\"\ntype = \"const float*\"\nlen = \"height * width\"   # from the kernel's indexing: `row[c]`"), "{t}");
    assert!(t.contains("name = \"dst\"\ntype = \"float*\"\nlen = \"height * width\""), "{t}");
    assert!(!t.contains("GUESSED"), "{t}");
    let r = init(&[("two.cu", src)], &["--entry", "run_heads"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let t = r.toml();
    assert!(t.contains("len = \"B * H * D\"   # from the kernel's indexing: `q[at]`"), "{t}");
    assert!(t.contains("[roofline]\n# The least DRAM traffic: every input read once, every output written once.\nbytes = \"4 * (B * H * D) + 4 * (B * H * D)\""), "{t}");
}

#[test]
fn every_length_init_reads_from_the_examples_indexing_is_the_one_their_task_declares() {
    use nightshift::task::{expr::Expr, ArgRole, Task};
    let mut derived = 0;
    let mut tasks = 0;
    for d in common::project_task_dirs() {
        let task = Task::load(&d).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let out = Command::new(common::nightshift_bin())
            .args(["init", tmp.path().join("t").to_str().unwrap(), "--from", task.baseline.to_str().unwrap()])
            .args(["--entry", &task.entry, "--json"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}: {}", d.display(), String::from_utf8_lossy(&out.stderr)));
        tasks += 1;
        for l in v["lengths"].as_array().unwrap().iter().filter(|l| l["from"] == "indexing") {
            let arg = task.args.iter().find(|a| a.name == l["arg"].as_str().unwrap()).unwrap();
            let declared = match &arg.role {
                ArgRole::Input { len, .. } | ArgRole::Output { len, .. } | ArgRole::InOut { len, .. } => len,
                ArgRole::Scalar { .. } => panic!("{}: {} is a scalar", d.display(), arg.name),
            };
            let (want, got) = (Expr::parse(declared).unwrap(), Expr::parse(l["len"].as_str().unwrap()).unwrap());
            for size in std::iter::once(&task.bench).chain(&task.checks) {
                assert_eq!(
                    got.eval(&size.vars).unwrap(),
                    want.eval(&size.vars).unwrap(),
                    "{}: `{}` read as {} from {}, declared {declared}, at {size}",
                    d.display(),
                    arg.name,
                    l["len"],
                    l["evidence"]
                );
            }
            derived += 1;
        }
    }
    assert!(tasks >= 15, "{tasks} tasks");
    // 37 of the 53 buffers when this was written (the rest: cuBLAS or a memset in the
    // launcher, indices read from memory, a head_dim / 2 the polynomials cannot hold, a
    // tiled transpose that reassigns its indices).
    assert!(derived >= 37, "only {derived} lengths from the indexing");
}

/// An Adam step with its state updated in place, its hyper-parameters and a step count.
const ADAM: &str = r#"#include <cuda_runtime.h>
__global__ void adam_k(float* p, const float* g, float* m, float* v, float* out_norm, float lr, float beta1,
                       float beta2, float eps, float weight_decay, int step, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float bc1 = 1.f - powf(beta1, (float)step);
  float mi = beta1 * m[i] + (1.f - beta1) * g[i];
  float vi = beta2 * v[i] + (1.f - beta2) * g[i] * g[i];
  m[i] = mi;
  v[i] = vi;
  p[i] -= lr * (mi / bc1 / (sqrtf(vi) + eps) + weight_decay * p[i]);
  out_norm[i] = mi * mi;
}
extern "C" void adam(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, float* out_norm, float lr,
                     float beta1, float beta2, float eps, float weight_decay, int step, int n, cudaStream_t stream) {
  adam_k<<<(n + 255) / 256, 256, 0, stream>>>(param, grad, exp_avg, exp_avg_sq, out_norm, lr, beta1, beta2, eps,
                                               weight_decay, step, n);
}
"#;

/// Issue 35: an optimizer step reads its state and writes it back. Taken for outputs alone,
/// the state was poisoned before the call, and the draft checked nothing the kernel
/// computed from it; a beta of 1 made the bias correction divide by zero.
#[test]
fn state_updated_in_place_is_an_input_and_an_output_and_hyper_parameters_are_plausible() {
    let src = ADAM;
    let r = init(&[("adam.cu", src)], &[]);
    // Every hyper-parameter and the step are guesses, each listed with its line: exit 1.
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    for field in ["lr", "beta1", "beta2", "eps", "weight_decay", "step"] {
        assert!(r.stdout.contains(&format!("arg `{field}`.value: ")), "{field}: {}", r.stdout);
    }
    let t = r.toml();
    let arg = |name: &str| -> String {
        let at = t.find(&format!("name = \"{name}\"")).unwrap_or_else(|| panic!("no arg {name}: {t}"));
        let rest = &t[at..];
        rest[..rest[1..].find("[[arg]]").map_or(rest.len(), |e| e + 1)].to_string()
    };
    // Read, then written: initialised (never poisoned) and checked after the call.
    for (name, read_at) in [("param", "`p[i] -= "), ("exp_avg", "`m[i]`"), ("exp_avg_sq", "`v[i]`")] {
        let a = arg(name);
        assert!(a.contains("# in place: read at adam.cu:"), "{a}");
        assert!(a.contains(read_at), "{a}");
        assert!(a.contains("init = "), "{a}");
        assert!(a.contains("output = true   # checked after the call"), "{a}");
    }
    // A second moment is drawn non-negative (its square root is taken).
    assert!(arg("exp_avg_sq").contains("init = \"uniform(0, 1)\""), "{}", arg("exp_avg_sq"));
    // Written only: an output, poisoned before the call so a skipped element shows.
    let out = arg("out_norm");
    assert!(out.contains("output = true   # written (line 12), never read: poisoned before the call"), "{out}");
    assert!(!out.contains("init = "), "{out}");
    let grad = arg("grad");
    assert!(grad.contains("init = ") && !grad.contains("output = true"), "{grad}");
    // Hyper-parameters where production runs them, each a guess that says why.
    for (name, value) in
        [("lr", "1e-3"), ("beta1", "0.9"), ("beta2", "0.999"), ("eps", "1e-5"), ("weight_decay", "0.01")]
    {
        assert!(arg(name).contains(&format!("value = {value}   # GUESSED (")), "{}", arg(name));
    }
    // The step enters only arithmetic: a value above 0, not a size variable the check
    // sizes would set to 1 and 17.
    assert!(
        arg("step").contains("value = 10   # GUESSED (a step count (> 0)); used only in arithmetic"),
        "{}",
        arg("step")
    );
    let sizes = t.lines().find(|l| l.starts_with("bench = ")).unwrap();
    assert_eq!(sizes, "bench = { n = 16777216 }", "32 bytes an element: 537 MB");
    // The least traffic moves the state twice: 4 bytes x (param, exp_avg, exp_avg_sq read
    // and written, grad read, out_norm written) = 32 n.
    let bytes = t.lines().find(|l| l.starts_with("bytes = ")).unwrap_or_else(|| panic!("no roofline: {t}"));
    assert_eq!(bytes.matches("4 * (n)").count(), 8, "{bytes}");
}

/// On every task and example, init drafts as state (an input and an output) every
/// buffer the task declares so: read-then-written state is never poisoned. Buffers
/// written before they are read stay outputs (add_rmsnorm's stored residual, the sums the
/// launcher zeroes before its atomics). Where the walk cannot show a write comes first,
/// it errs towards state, and these are the only two such buffers: segment_sum's offsets
/// (the scan's writes sit under conditions), gemm_bf16's C (handed to cuBLAS) and
/// linear_splitk_f32's y (zeroed only when K is split, then added to by atomics).
#[test]
fn every_in_place_buffer_init_drafts_is_the_one_the_tasks_declare() {
    use nightshift::task::{ArgRole, Task};
    let mut in_place = 0;
    let mut extra: Vec<String> = Vec::new();
    for d in common::project_task_dirs() {
        let task = Task::load(&d).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t");
        let out = Command::new(common::nightshift_bin())
            .args(["init", dir.to_str().unwrap(), "--from", task.baseline.to_str().unwrap()])
            .args(["--entry", &task.entry])
            .output()
            .unwrap();
        let text = std::fs::read_to_string(dir.join("task.toml"))
            .unwrap_or_else(|_| panic!("{}: {}", d.display(), String::from_utf8_lossy(&out.stderr)));
        let draft: toml::Value = toml::from_str(&text).unwrap();
        for a in draft["arg"].as_array().unwrap() {
            let name = a["name"].as_str().unwrap();
            let drafted = a.get("init").is_some() && a.get("output").is_some();
            let arg = task.args.iter().find(|x| x.name == name).unwrap();
            let declared = matches!(arg.role, ArgRole::InOut { .. });
            assert!(drafted || !declared, "{}: state `{name}` drafted as an output\n{text}", d.display());
            if drafted && !declared {
                extra.push(format!("{}:{name}", task.name));
            }
            in_place += drafted as usize;
        }
    }
    // adamw_step's param, exp_avg and exp_avg_sq, and the three above.
    assert_eq!(extra, ["gemm_bf16:C", "linear_splitk_f32:y", "segment_sum:offsets"]);
    assert_eq!(in_place, 6);
}

/// A causal depthwise convolution as production writes it: the filter's width bounds
/// serial loops only and is held at one value, the 0/1 activation flag takes both values
/// across the check sizes, the bench is sized from the traffic and every check buffer is
/// a few million elements at most.
#[test]
fn a_filter_width_is_held_a_flag_takes_0_and_1_and_the_bench_fills_the_gpu() {
    let src = r#"#include <cuda_runtime.h>
__global__ void conv(const float* x, const float* w, const float* bias, float* out, int dim, int seqlen,
                     int width, int silu_activation) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int c = blockIdx.y, b = blockIdx.z;
  if (t >= seqlen) return;
  float acc = bias[c];
  for (int k = 0; k < width; ++k) {
    int tt = t - (width - 1) + k;
    if (tt >= 0) acc += w[c * width + k] * x[(b * dim + c) * seqlen + tt];
  }
  if (silu_activation) acc = acc / (1.f + __expf(-acc));
  out[(b * dim + c) * seqlen + t] = acc;
}
extern "C" void causal_conv1d(const float* x, const float* w, const float* bias, float* out, int batch, int dim,
                              int seqlen, int width, int silu_activation, cudaStream_t s) {
  dim3 grid((seqlen + 127) / 128, dim, batch);
  conv<<<grid, 128, 0, s>>>(x, w, bias, out, dim, seqlen, width, silu_activation);
}
"#;
    let r = init(&[("conv.cu", src)], &[]);
    // The width is a guess to confirm: exit 1, listed with its line.
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("task.toml:60: arg `width`: held at 4 at every size, a GUESS"), "{}", r.stdout);
    insta::assert_snapshot!(r.toml());
    let task = nightshift::task::Task::load(&r.dir).unwrap();
    assert_eq!(task.bench.vars["width"], 4);
    let flags: Vec<i64> = task.checks.iter().map(|c| c.vars["silu_activation"]).collect();
    assert_eq!(flags, [0, 1, 0, 1]);
    assert!(task.checks.iter().all(|c| c.vars["width"] == 4));
    assert!(task.warnings().is_empty(), "{:?}", task.warnings());
}

/// Rows copied in reverse order, and a serial fp32 sum of each row.
const REVERSE_AND_SUM: &str = r#"#include <cuda_runtime.h>
__global__ void reverse_rows(const float* table, float* out, int rows, int cols) {
  int r = blockIdx.x;
  if (r >= rows) return;
  const float* src = table + (long)(rows - 1 - r) * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[(long)r * cols + c] = src[c];
}
__global__ void row_sum(const float* x, float* sums, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.f;
  for (int k = 0; k < cols; ++k) acc += x[(long)r * cols + k];
  sums[r] = acc;
}
extern "C" void run(const float* table, float* out, float* sums, int rows, int cols, cudaStream_t s) {
  reverse_rows<<<rows, 128, 0, s>>>(table, out, rows, cols);
  row_sum<<<(rows + 127) / 128, 128, 0, s>>>(table, sums, rows, cols);
}
"#;

/// A row permutation copies: compared exactly. A row sum accumulates: its tolerance admits any
/// order of the additions at the longest row the sizes give, checked here by a host
/// simulation of the serial sum the baseline does against a tree-ordered one.
#[test]
fn a_copy_is_compared_exactly_and_a_long_sum_admits_a_tree_ordered_rewrite() {
    let src = REVERSE_AND_SUM;
    let r = init(&[("k.cu", src)], &[]);
    let t = r.toml();
    let arg = |name: &str| -> String {
        let at = t.find(&format!("name = \"{name}\"")).unwrap_or_else(|| panic!("no arg {name}: {t}"));
        let rest = &t[at..];
        rest[..rest[1..].find("[[arg]]").map_or(rest.len(), |e| e + 1)].to_string()
    };
    assert!(arg("out").contains("rtol = 0.0   # a copy: every element is stored as it was read, `out[(long)r * cols + c] = src[c]` (k.cu:6)"), "{}", arg("out"));
    assert!(arg("out").contains("atol = 0.0"), "{}", arg("out"));
    let sums = arg("sums");
    assert!(sums.contains("# a sum of up to "), "{sums}");
    let task = nightshift::task::Task::load(&r.dir).unwrap();
    let tol = task
        .args
        .iter()
        .find_map(|a| match &a.role {
            nightshift::task::ArgRole::Output { tolerance, .. } if a.name == "sums" => Some(*tolerance),
            _ => None,
        })
        .unwrap();
    let cols = std::iter::once(&task.bench).chain(&task.checks).map(|s| s.vars["cols"]).max().unwrap() as usize;
    // Rows of normal(0, 1) values (the drafted init), summed serially in fp32 as the
    // baseline does and pairwise as a tree-ordered rewrite does.
    let mut state = 0x9e3779b97f4a7c15u64;
    let mut uniform = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    fn pairwise(x: &[f32]) -> f32 {
        if x.len() <= 2 {
            return x.iter().sum();
        }
        let (a, b) = x.split_at(x.len() / 2);
        pairwise(a) + pairwise(b)
    }
    // Rows the fp32 default (rtol 1e-5, atol 1e-6) would reject: the widening is needed.
    let mut rejected_by_default = 0;
    for _ in 0..2000 {
        let row: Vec<f32> = (0..cols)
            .map(|_| {
                let (u1, u2) = (uniform().max(1e-300), uniform());
                ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
            })
            .collect();
        let serial: f32 = row.iter().fold(0.0, |a, x| a + x);
        let tree = pairwise(&row);
        let (expected, got) = (serial as f64, tree as f64);
        rejected_by_default += ((got - expected).abs() > 1e-6 + 1e-5 * expected.abs()) as usize;
        assert!(
            (got - expected).abs() <= tol.atol + tol.rtol * expected.abs(),
            "cols {cols}: serial {serial} tree {tree} outside rtol {} atol {}",
            tol.rtol,
            tol.atol
        );
    }
    assert_eq!(cols, 4096, "the longest row is the bench's");
    assert!(rejected_by_default > 0, "the default tolerance would have passed every row");
    eprintln!("{rejected_by_default} of 2000 rows outside the fp32 default");
}

/// On a GPU, what the drafts are for: the in-place draft of an optimizer step rejects a
/// kernel that skips the update of its first moment (as a write-only draft, poisoned and
/// compared with itself, could not tell), and the draft of a serial row sum passes a
/// rewrite that adds each row in a warp's tree order.
#[test]
#[ignore = "needs a GPU"]
fn on_a_gpu_drafts_reject_a_skipped_update_and_pass_a_reordered_sum() {
    let eval = |dir: &std::path::Path, candidate: &std::path::Path| {
        let out = Command::new(common::nightshift_bin())
            .args(["eval", dir.to_str().unwrap(), candidate.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("no verdict ({e}): {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
        });
        (out.status.code().unwrap_or(-1), v)
    };
    let adam = init(&[("adam.cu", ADAM)], &[]);
    let skipped = adam.dir.join("skips_update.cu");
    assert!(ADAM.contains("  m[i] = mi;\n"));
    std::fs::write(&skipped, ADAM.replace("  m[i] = mi;\n", "")).unwrap();
    let (code, v) = eval(&adam.dir, &skipped);
    assert_eq!(code, 1, "a kernel that skips the update is rejected: {v}");
    assert!(v["failure"]["detail"].to_string().contains("exp_avg") || v.to_string().contains("exp_avg"), "{v}");
    let same = adam.dir.join("same.cu");
    std::fs::write(&same, ADAM).unwrap();
    let (code, v) = eval(&adam.dir, &same);
    assert_eq!(code, 0, "the baseline's own source passes: {v}");

    let sums = init(&[("k.cu", REVERSE_AND_SUM)], &[]);
    let tree = REVERSE_AND_SUM
        .replace(
            "  int r = blockIdx.x * blockDim.x + threadIdx.x;\n  if (r >= rows) return;\n  float acc = 0.f;\n  for (int k = 0; k < cols; ++k) acc += x[(long)r * cols + k];\n  sums[r] = acc;",
            "  int r = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;\n  if (r >= rows) return;\n  float acc = 0.f;\n  for (int k = lane; k < cols; k += 32) acc += x[(long)r * cols + k];\n  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);\n  if (lane == 0) sums[r] = acc;",
        )
        .replace("row_sum<<<(rows + 127) / 128, 128, 0, s>>>", "row_sum<<<(rows + 7) / 8, 256, 0, s>>>");
    assert!(tree.contains("__shfl_down_sync") && tree.contains("<<<(rows + 7) / 8, 256"), "{tree}");
    let candidate = sums.dir.join("tree.cu");
    std::fs::write(&candidate, tree).unwrap();
    let (code, v) = eval(&sums.dir, &candidate);
    assert_eq!(code, 0, "a tree-ordered sum passes the drafted tolerance: {v}");

    // fp8 through the judge: generated, compared, and a kernel that writes zeros caught.
    let quant = init(&[("quant.cu", QUANT_FP8)], &[]);
    let same = quant.dir.join("same.cu");
    std::fs::write(&same, QUANT_FP8).unwrap();
    let (code, v) = eval(&quant.dir, &same);
    assert_eq!(code, 0, "the fp8 baseline's own source passes: {v}");
    let zeros = quant.dir.join("zeros.cu");
    assert!(QUANT_FP8.contains("= __nv_fp8_e4m3(__bfloat162float("));
    std::fs::write(
        &zeros,
        QUANT_FP8.replace("= __nv_fp8_e4m3(__bfloat162float(", "= __nv_fp8_e4m3(0.f * __bfloat162float("),
    )
    .unwrap();
    let (code, v) = eval(&quant.dir, &zeros);
    assert_eq!(code, 1, "an fp8 output of zeros is rejected: {v}");
}

/// An embedding lookup: the ids pick rows of the table, so they are drawn as a
/// permutation of their length and the table's length counts on them.
#[test]
fn an_index_table_is_a_permutation_and_what_it_indexes_has_its_length() {
    let src = r#"#include <cuda_runtime.h>
__global__ void embed(const float* table, const int* ids, float* out, int n, int d) {
  int r = blockIdx.x;
  if (r >= n) return;
  const int id = ids[r];
  for (int c = threadIdx.x; c < d; c += blockDim.x) out[(long)r * d + c] = table[(long)id * d + c];
}
extern "C" void embedding(const float* table, const int* ids, float* out, int n, int d, cudaStream_t s) {
  embed<<<n, 128, 0, s>>>(table, ids, out, n, d);
}
"#;
    let r = init(&[("embed.cu", src)], &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let t = r.toml();
    assert!(t.contains("len = \"n * d\"   # from the kernel's indexing: `table[(long)id * d + c]` (embed.cu:6), with the values of `ids` below its length"), "{t}");
    assert!(t.contains("name = \"ids\"\ntype = \"const int*\"\nlen = \"n\"   # from the kernel's indexing: `ids[r]` (embed.cu:5)\ninit = \"randperm\"   # an index table"), "{t}");
    // A gathered row is a copy: compared exactly.
    assert!(t.contains("rtol = 0.0   # a copy"), "{t}");
    let task = nightshift::task::Task::load(&r.dir).unwrap();
    assert!(task.warnings().is_empty(), "{:?}", task.warnings());
}

/// A row-wise fp8 e4m3 quantization: each row's absmax, then scale and convert.
const QUANT_FP8: &str = r#"#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
__global__ void quant_rows(const __nv_bfloat16* x, __nv_fp8_e4m3* out, float* scales, int cols) {
  const int row = blockIdx.x;
  float amax = 0.f;
  for (int c = 0; c < cols; ++c) amax = fmaxf(amax, fabsf(__bfloat162float(x[(size_t)row * cols + c])));
  const float scale = fmaxf(amax, 1e-12f) / 448.f;
  scales[row] = scale;
  for (int c = 0; c < cols; ++c) out[(size_t)row * cols + c] = __nv_fp8_e4m3(__bfloat162float(x[(size_t)row * cols + c]) / scale);
}
extern "C" void quant_fp8(const __nv_bfloat16* x, __nv_fp8_e4m3* out, float* scales, int rows, int cols, cudaStream_t s) {
  quant_rows<<<rows, 1, 0, s>>>(x, out, scales, cols);
}
"#;

/// A row-wise fp8 quantization as production writes it: the `__nv_fp8_e4m3` output is
/// accepted in the launcher, with one fp8 step of tolerance, and the task builds.
#[test]
fn an_fp8_launcher_is_accepted_with_an_fp8_tolerance_and_builds() {
    let src = QUANT_FP8;
    let r = init(&[("quant.cu", src)], &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let t = r.toml();
    assert!(t.contains("type = \"__nv_fp8_e4m3*\"\nlen = \"rows * cols\""), "{t}");
    assert!(t.contains("rtol = 1.25e-1   # fp8 e4m3 keeps 3 mantissa bits"), "{t}");
    // The roofline counts a byte per fp8 element.
    assert!(t.contains("1 * (rows * cols)"), "{t}");
    common::require_toolchain();
    let out = Command::new(common::nightshift_bin())
        .args(["validate", r.dir.to_str().unwrap(), "--build", "--arch", "sm_90a"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// Arrays whose names imply a range are drawn there: a reciprocal standard deviation
/// positive, a probability inside (0, 1), an integer mask 0 or 1.
#[test]
fn arrays_named_for_a_range_are_drawn_in_it() {
    let src = r#"#include <cuda_runtime.h>
__global__ void k(const float* dy, const float* rstd, const float* keep_prob, const int* mask, float* dx, int rows, int cols) {
  int r = blockIdx.x;
  if (r >= rows) return;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    size_t i = (size_t)r * cols + c;
    dx[i] = dy[i] * rstd[r] * (mask[i] ? 1.f / keep_prob[r] : 0.f);
  }
}
extern "C" void run(const float* dy, const float* rstd, const float* keep_prob, const int* mask, float* dx, int rows,
                    int cols, cudaStream_t s) {
  k<<<rows, 256, 0, s>>>(dy, rstd, keep_prob, mask, dx, rows, cols);
}
"#;
    let r = init(&[("k.cu", src)], &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let inits: Vec<String> =
        r.toml().lines().filter(|l| l.starts_with("init = ")).map(|l| l[7..].to_string()).collect();
    assert!(inits[1].starts_with("\"uniform(0.5, 2)\""), "{inits:?}");
    assert!(inits[2].starts_with("\"uniform(0.05, 0.95)\""), "{inits:?}");
    assert!(inits[3].starts_with("\"randint(0, 2)\""), "{inits:?}");
}

/// The fp8 quantization behind a `uint8_t*` C wrapper, as code that predates fp8 in
/// signatures writes it: the lengths come through the wrapper, and the output's
/// declaration is flagged (compared as bytes it would reject one fp8 step of rounding).
#[test]
fn a_wrapper_launcher_is_followed_and_an_fp8_output_declared_as_bytes_is_flagged() {
    let src = QUANT_FP8.replace("extern \"C\" void quant_fp8(", "static void quant_fp8(")
        + "extern \"C\" void quant_u8(const __nv_bfloat16* x, uint8_t* out, float* scales, int rows, int cols, cudaStream_t s) {\n  quant_fp8(x, reinterpret_cast<__nv_fp8_e4m3*>(out), scales, rows, cols, s);\n}\n";
    let r = init(&[("quant.cu", &src)], &[]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("arg `out`.type: declared `uint8_t*` but handed on as `__nv_fp8_e4m3*`"), "{}", r.stdout);
    let t = r.toml();
    assert!(
        t.contains(
            "len = \"rows * cols\"   # from the kernel's indexing: `out[(size_t)row * cols + c]` in `quant_fp8`"
        ),
        "{t}"
    );
    assert!(t.contains("len = \"rows\"   # from the kernel's indexing: `scales[row]` in `quant_fp8`"), "{t}");
}

/// A row scale over `num_tokens` rows of `hidden`, one block a token.
const TOKENS_BY_HIDDEN: &str = r#"#include <cuda_runtime.h>
__global__ void scale_k(const float* x, float* y, int num_tokens, int hidden) {
  int t = blockIdx.x;
  if (t >= num_tokens) return;
  for (int h = threadIdx.x; h < hidden; h += blockDim.x) y[(long)t * hidden + h] = x[(long)t * hidden + h] * 2.f;
}
extern "C" void scale_tokens(const float* x, float* y, int num_tokens, int hidden, cudaStream_t s) {
  scale_k<<<num_tokens, 256, 0, s>>>(x, y, num_tokens, hidden);
}
"#;

/// A mean over a sequence: the threads spread over the batch and the features, each walks
/// `seq_len` serially.
const SEQUENCE_MEAN: &str = r#"#include <cuda_runtime.h>
__global__ void mean_k(const float* x, float* out, int batch, int seq_len, int dim) {
  int b = blockIdx.x, d = blockIdx.y * blockDim.x + threadIdx.x;
  if (b >= batch || d >= dim) return;
  float acc = 0.f;
  for (int s = 0; s < seq_len; ++s) acc += x[((long)b * seq_len + s) * dim + d];
  out[(long)b * dim + d] = acc / seq_len;
}
extern "C" void seq_mean(const float* x, float* out, int batch, int seq_len, int dim, cudaStream_t st) {
  dim3 grid(batch, (dim + 127) / 128);
  mean_k<<<grid, 128, 0, st>>>(x, out, batch, seq_len, dim);
}
"#;

/// A size variable named for tokens gets a decode-like served shape at 8 tokens and a
/// prefill-like one at the bench size, weighted 0.8 and 0.2 of the calls, as a guess that
/// says so; the draft loads and validates.
#[test]
fn a_token_count_gets_a_decode_and_a_prefill_shape() {
    use nightshift::task::{serve::WeightBasis, Task};
    let r = init(&[("scale.cu", TOKENS_BY_HIDDEN)], &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let t = r.toml();
    assert!(t.contains("# Served shapes, GUESSED from the name `num_tokens` (a token count)"), "{t}");
    assert!(t.contains("weights are a GUESS of each shape's share of the kernel's calls: replace them with\n# your serving stack's real mix"), "{t}");
    assert!(
        t.contains("serve = [{ name = \"decode\", num_tokens = 8, weight = 0.8 }, { name = \"prefill\", weight = 0.2 }]\nserve_weights = \"calls\"\n"),
        "{t}"
    );
    let task = Task::load(&r.dir).unwrap();
    assert!(task.bench.vars["num_tokens"] > 8, "{}", task.bench);
    let served = task.served();
    assert_eq!(served.len(), 2, "{served:?}");
    let (decode, prefill) = (&served[0], &served[1]);
    assert_eq!(decode.name, "decode");
    assert_eq!(decode.size.vars["num_tokens"], 8);
    assert_eq!(decode.size.vars["hidden"], task.bench.vars["hidden"]);
    assert!((decode.weight - 0.8).abs() < 1e-12, "{}", decode.weight);
    assert_eq!(prefill.name, "prefill");
    assert_eq!(prefill.size, task.bench);
    assert!((prefill.weight - 0.2).abs() < 1e-12, "{}", prefill.weight);
    assert_eq!(task.serve_weights, WeightBasis::Calls);
    assert!(task.warnings().is_empty(), "{:?}", task.warnings());
    let (code, out, err) = nightshift(&r.dir, &["validate", "."]);
    assert_eq!(code, 0, "{out}{err}");
}

/// No size variable named for tokens, rows or a batch: no served shapes, the bench alone.
#[test]
fn a_plain_count_serves_the_bench_alone() {
    let r = init(&[("scale.cu", &elementwise("scale", "float", "float", "int"))], &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let t = r.toml();
    assert!(!t.contains("serve"), "{t}");
    let task = nightshift::task::Task::load(&r.dir).unwrap();
    assert!(!task.serves_shapes());
    assert_eq!(task.served().len(), 1);
    assert_eq!(task.served()[0].size, task.bench);
}

/// A batch is served at 1 at decode. A sequence length the threads only walk serially is
/// no token count the work spreads over, so the batch is varied, not the more token-like
/// name.
#[test]
fn a_batch_is_decoded_at_one_and_a_serially_walked_length_is_left_alone() {
    let r = init(&[("mean.cu", SEQUENCE_MEAN)], &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let t = r.toml();
    assert!(
        t.contains("serve = [{ name = \"decode\", batch = 1, weight = 0.8 }, { name = \"prefill\", weight = 0.2 }]"),
        "{t}"
    );
    let task = nightshift::task::Task::load(&r.dir).unwrap();
    let served = task.served();
    assert_eq!(served.len(), 2, "{served:?}");
    assert_eq!(served[0].size.vars["batch"], 1);
    assert_eq!(served[0].size.vars["seq_len"], task.bench.vars["seq_len"]);
    assert!(task.bench.vars["batch"] > 1, "{}", task.bench);
    assert_eq!(served[1].size, task.bench);
}
