//! Served-shape dispatch (`rewrite::dispatch`) with the real nvcc: two different variants
//! of add_rmsnorm combined into one candidate build through the shim and export their
//! launchers side by side; and a host-only task whose combined launcher, compiled into a
//! program, answers from the variant the rule names at every check size (no GPU: nothing
//! is launched).

mod common;

use nightshift::task::expr::Expr;
use nightshift::task::{ArgRole, ScalarValue, Size, Task};
use nightshift::toolkit::build::{build, BuildError, BuildFailure, BuildSpec, Built};
use nightshift::wall::build::{Confinement, Limits};
use rewrite::dispatch::{choose_rule, dispatch, Param, Rule, Variant};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn build_candidate(task: &Task, source: &Path) -> Result<Built, BuildError> {
    let tc = common::require_toolchain();
    let confinement = Confinement::new(&common::nightshift_bin(), &tc, task, false, Limits::default());
    let spec = BuildSpec {
        task,
        source,
        trusted: false,
        arch: "sm_90a".into(),
        extra_flags: vec![],
        defines: BTreeMap::new(),
    };
    build(&tc, &common::test_cache(), &spec, &confinement)
}

fn params_of(task: &Task) -> Vec<Param> {
    task.args.iter().map(|a| Param { name: a.name.clone(), spelling: a.spelling.clone() }).collect()
}

/// The baseline with `prelude` after its includes, its sum of squares through a helper
/// `accumulate` and its block size the macro THREADS.
fn add_rmsnorm_variant(baseline: &str, prelude: &str) -> String {
    let edits = [
        ("#include <cuda_bf16.h>\n", format!("#include <cuda_bf16.h>\n{prelude}")),
        ("sum_sq += v * v;", "sum_sq = accumulate(sum_sq, v);".to_string()),
        ("const int threads = 512;", "const int threads = THREADS;".to_string()),
    ];
    let mut text = baseline.to_string();
    for (from, to) in edits {
        assert_eq!(text.matches(from).count(), 1, "the baseline still holds `{from}` once");
        text = text.replace(from, &to);
    }
    text
}

/// File-scope macros in both, one a knob set by the rule's defines; a static helper of the
/// same name with different bodies; the same kernel name. Variant 1 fails to compile if
/// a macro of variant 0's reaches it.
const PRELUDE_0: &str = r#"#define THREADS 512
#ifndef ACC_FMA
#define ACC_FMA 0
#endif
static_assert(ACC_FMA == 1, "variant 0 is built with its knob");
static __device__ float accumulate(float acc, float v) { return fmaf(v, v, acc); }
"#;
const PRELUDE_1: &str = r#"#ifndef THREADS
#define THREADS 256
#endif
#ifndef ACC_FMA
#define ACC_FMA 0
#endif
static_assert(THREADS == 256, "variant 0's THREADS leaked into variant 1");
static_assert(ACC_FMA == 0, "variant 0's knob leaked into variant 1");
static __device__ float accumulate(float acc, float v) { return acc + v * v; }
"#;

fn compile_log(got: Result<Built, BuildError>) -> String {
    match got {
        Err(BuildError::Rejected { failure: BuildFailure::Compile { log }, .. }) => log,
        other => panic!("expected a compile error, got {other:?}"),
    }
}

#[test]
fn two_add_rmsnorm_variants_build_as_one_candidate_through_the_shim() {
    let task = Task::load(&common::root().join("examples/add_rmsnorm")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(task.entry, "fused_add_rmsnorm");
    let baseline = std::fs::read_to_string(&task.baseline).unwrap();
    let v0 = add_rmsnorm_variant(&baseline, PRELUDE_0);
    let v1 = add_rmsnorm_variant(&baseline, PRELUDE_1);
    let knob = vec![("ACC_FMA".to_string(), "1".to_string())];
    let rows = task.args.iter().position(|a| a.name == "rows").unwrap();
    let rule = Rule { param: rows, thresholds: vec![181] };
    let variants = [Variant { source: &v0, defines: &knob }, Variant { source: &v1, defines: &[] }];
    let combined = dispatch(&task.entry, &params_of(&task), &variants, &rule).unwrap_or_else(|e| panic!("{e}"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("combined.cu");
    std::fs::write(&path, &combined).unwrap();
    let b = build_candidate(&task, &path).unwrap_or_else(|e| panic!("the combined file builds: {e}\n{combined}"));
    let exports = &b.link.exports;
    assert_eq!(exports.iter().filter(|s| *s == "fused_add_rmsnorm").count(), 1, "{exports:?}");
    for v in ["nightshift_v0_fused_add_rmsnorm", "nightshift_v1_fused_add_rmsnorm"] {
        assert!(exports.iter().any(|s| s == v), "{v} exported: {exports:?}");
    }
    // One kernel per namespace, same name.
    let kernels: Vec<&str> = b.ptxas.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(kernels.len(), 2, "{kernels:?}");
    for ns in ["nightshift_v0", "nightshift_v1"] {
        assert!(kernels.iter().any(|k| k.contains(ns) && k.contains("fused_add_rmsnorm_kernel")), "{kernels:?}");
    }

    // Controls: the variants clash without their namespaces, and variant 0's macros reach
    // variant 1 without the #undefs (so the build above proves both).
    std::fs::write(&path, format!("{v0}\n{v1}")).unwrap();
    let log = compile_log(build_candidate(&task, &path));
    assert!(log.contains("redefinition") || log.contains("already been defined"), "{log}");
    let leaky = combined.replace("#undef THREADS\n", "").replace("#undef ACC_FMA\n", "");
    assert_ne!(leaky, combined);
    std::fs::write(&path, leaky).unwrap();
    let log = compile_log(build_candidate(&task, &path));
    assert!(log.contains("variant 0's THREADS leaked") && log.contains("variant 0's knob leaked"), "{log}");
}

/// Every variant answers its own number through a host-only launcher; the kernel is
/// defined so the file is CUDA like any other, but never launched.
const PICK: &str = r#"#include <cuda_runtime.h>
#ifndef ANSWER
#define ANSWER -1
#endif
__global__ void mark(int* which) { *which = ANSWER; }
static int answer() { return ANSWER; }
extern "C" void pick(int* which, long long m, int n, cudaStream_t stream) {
  (void)m; (void)n; (void)stream;
  *which = answer();
}
"#;

const PICK_TOML: &str = r#"[task]
name = "pick"
entry = "pick"
baseline = "baseline.cu"

[[arg]]
name = "which"
type = "int*"
len = "1"
output = true

[[arg]]
name = "m"
type = "long long"

[[arg]]
name = "n"
type = "int"

[sizes]
bench = { m = 1, n = 1 }
check = [
  { m = 4096, n = 1 },
  { m = 64, n = 7 },
  { m = 8, n = 64 },
  { m = 300, n = 300 },
  { m = 5, n = 4096 },
  { m = 3, n = 100000 },
]
"#;

#[test]
fn the_combined_launcher_answers_from_the_variant_the_rule_names_at_every_check_size() {
    let tc = common::require_toolchain();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("task.toml"), PICK_TOML).unwrap();
    std::fs::write(dir.path().join("baseline.cu"), PICK).unwrap();
    let task = Task::load(dir.path()).unwrap_or_else(|e| panic!("{e}"));

    // Each integer parameter's value at each check size.
    let value = |arg: usize, size: &Size| match &task.args[arg].role {
        ArgRole::Scalar { value: ScalarValue::Int(e) } => Expr::parse(e).unwrap().eval(&size.vars).unwrap(),
        other => panic!("{other:?}"),
    };
    let axes: Vec<(usize, Vec<i64>)> =
        (1..=2).map(|a| (a, task.checks.iter().map(|s| value(a, s)).collect())).collect();
    // Wanted per check size: along m the variants interleave, along n they run 2, 0, 1.
    let wanted = [2, 2, 0, 0, 1, 1];
    let (rule, map) = choose_rule(&axes, &wanted).expect("n separates the variants");
    assert_eq!(rule, Rule { param: 2, thresholds: vec![21, 1108] });
    assert_eq!(map, vec![2, 0, 1]);

    let defines: Vec<Vec<(String, String)>> = map.iter().map(|k| vec![("ANSWER".to_string(), k.to_string())]).collect();
    let variants: Vec<Variant> = defines.iter().map(|d| Variant { source: PICK, defines: d }).collect();
    let combined = dispatch(&task.entry, &params_of(&task), &variants, &rule).unwrap_or_else(|e| panic!("{e}"));
    let program = format!(
        "{combined}\n#include <cstdio>\n#include <cstdlib>\n\
         int main(int argc, char** argv) {{\n\
           for (int i = 1; i + 1 < argc; i += 2) {{\n\
             int which = -2;\n\
             pick(&which, atoll(argv[i]), atoi(argv[i + 1]), 0);\n\
             printf(\"%s %s %d\\n\", argv[i], argv[i + 1], which);\n\
           }}\n\
           return 0;\n\
         }}\n"
    );
    let src = dir.path().join("program.cu");
    let exe = dir.path().join("program");
    std::fs::write(&src, &program).unwrap();
    let out = Command::new(&tc.nvcc)
        .arg(format!("-L{}", tc.lib_dir().display()))
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .current_dir(dir.path())
        .output()
        .expect("nvcc runs");
    assert!(
        out.status.success(),
        "nvcc: {}{}\n{program}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Every check size, then the edges of each threshold (m never matters).
    let mut calls: Vec<(i64, i64, usize)> =
        task.checks.iter().zip(wanted).map(|(s, w)| (value(1, s), value(2, s), w)).collect();
    calls.extend([(9, -5, 2), (9, 21, 2), (9, 22, 0), (9, 1108, 0), (9, 1109, 1), (1 << 40, i32::MAX as i64, 1)]);
    let mut args = Vec::new();
    for (m, n, _) in &calls {
        args.extend([m.to_string(), n.to_string()]);
    }
    let run = Command::new(&exe).args(&args).output().expect("the program runs");
    assert!(run.status.success(), "{run:?}");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let answers: Vec<&str> = stdout.lines().collect();
    assert_eq!(answers.len(), calls.len(), "{stdout}");
    for ((m, n, want), line) in calls.iter().zip(&answers) {
        assert_eq!(*line, format!("{m} {n} {want}"), "m={m} n={n}: the variant that answered\n{stdout}");
        assert_eq!(map[rule.variant_for(*n)], *want, "the rule agrees with the program at n={n}");
    }
}
