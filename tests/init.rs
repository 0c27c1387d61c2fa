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
    _tmp: tempfile::TempDir,
}

impl Init {
    fn toml(&self) -> String {
        std::fs::read_to_string(self.dir.join("task.toml")).unwrap_or_default()
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
        _tmp: tmp,
    }
}

fn kernel(launcher: &str) -> String {
    format!("#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n__global__ void k() {{}}\n{launcher}\n")
}

#[test]
fn a_plain_elementwise_launcher_gives_a_valid_task() {
    let r = init(
        &[(
            "scale.cu",
            &kernel(
                "extern \"C\" void scale(const float* x, float* y, int n, cudaStream_t s) {\n  k<<<1, 1, 0, s>>>();\n}",
            ),
        )],
        &[],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let t = r.toml();
    assert!(t.contains("entry = \"scale\""), "{t}");
    assert!(t.contains("type = \"const float*\"\nlen = \"n\""), "{t}");
    assert!(
        t.contains("name = \"y\"\ntype = \"float*\"\nlen = \"n\"   # guessed: the only size parameter\noutput = true"),
        "{t}"
    );
    assert!(t.contains("# reference = \"reference.cu\""), "the reference comment is there: {t}");
    assert!(t.contains("check = [{ n = 1 }, { n = 17 }, { n = 257 }, { n = 24 }]"), "{t}");
    assert!(r.stdout.contains("valid."), "{}", r.stdout);
    assert!(r.dir.join("scale.cu").is_file());
}

#[test]
fn restrict_and_size_t() {
    let r = init(
        &[("saxpy.cu", &kernel("extern \"C\" void saxpy(const float* __restrict__ x, float *__restrict__ y, float a, size_t n, cudaStream_t stream) {}"))],
        &[],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let t = r.toml();
    assert!(t.contains("type = \"size_t\""), "{t}");
    assert!(t.contains("name = \"a\"\ntype = \"float\"\nvalue = 1.0"), "{t}");
    assert!(t.contains("bench = { n = 16777216 }"), "{t}");
}

#[test]
fn half_and_bf16_pointers_get_16_bit_tolerances() {
    let r = init(
        &[(
            "cast.cu",
            &kernel("extern \"C\" void cast(const __half* in, __nv_bfloat16* out, int64_t n, cudaStream_t s) {}"),
        )],
        &[],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let t = r.toml();
    assert!(t.contains("type = \"const __half*\""), "{t}");
    assert!(t.contains("type = \"__nv_bfloat16*\""), "{t}");
    assert!(t.contains("rtol = 2e-2   # bf16"), "{t}");
    assert!(t.contains("type = \"int64_t\""), "{t}");
}

#[test]
fn a_gemm_gets_its_shapes_from_the_names() {
    let r = init(
        &[("gemm.cu", &kernel("extern \"C\" void gemm(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {}"))],
        &[],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
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
    let src = kernel("extern \"C\" void launch_a(const float* x, float* y, int n, cudaStream_t s) {}\nextern \"C\" void launch_b(const float* x, float* y, int n, cudaStream_t s) {}");
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
    let src = kernel("extern \"C\" {\nvoid gather_heads(const float* q, const int* idx, float* o, int B, int S, int H, cudaStream_t s) {\n  if (B) { }\n}\n}");
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
    assert!(err.contains("never overwrites"), "{err}");
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
    assert_eq!(v["entry"], "fused_bias_gelu_residual");
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
