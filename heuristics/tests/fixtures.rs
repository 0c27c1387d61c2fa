//! Diagnoses of the probe kernels profiled on an H200 (and an H100 kernel), pinned.

use heuristics::{diagnose_profile, ncu, Hints, Report, Severity};

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn h200(sass_file: &str) -> Report {
    let profile = ncu::parse(&read("h200/ncu_full_raw_all.csv")).unwrap();
    let sass = sass::analyze_all(&sass::parse(&read(sass_file)));
    let ptxas = sass::ptxas::parse_ptxas(&read("h200/ptxas_verbose.txt"));
    diagnose_profile(&profile, &sass, Some(&ptxas), &Hints::default(), None)
}

fn ranking(report: &Report) -> String {
    report
        .kernels
        .iter()
        .map(|k| {
            let tools: Vec<String> = k.diagnoses.iter().map(|d| format!("{}({})", d.tool, d.severity.name())).collect();
            format!("{:<20} {:<14} {}", k.name, k.roofline.class.name(), tools.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The planted problem of each probe kernel (fixtures/README.md).
const EXPECTED: &[(&str, &str)] = &[
    ("copy_scalar", "scalar-global-access"),
    ("copy_vec4", "at-roofline"),
    ("copy_strided", "uncoalesced-global"),
    ("matmul_naive", "no-tensor-cores"),
    ("spill_local", "local-memory"),
    ("transpose_conflict", "shared-bank-conflicts"),
    ("fp64_accident", "fp64-in-fp32"),
    ("divergent", "warp-divergence"),
    ("histogram_atomic", "atomic-contention"),
    ("softmax_naive", "uncoalesced-global"),
    ("tiny_grid", "under-filled-grid"),
];

#[test]
fn every_planted_problem_is_in_the_top_two() {
    for sass_file in ["h200/sass_cubin.txt", "h200/nvdisasm.txt", "generated/probe_nvdisasm_lines.txt"] {
        let report = h200(sass_file);
        assert_eq!(report.kernels.len(), 13);
        for (kernel, tool) in EXPECTED {
            let k = report.kernels.iter().find(|k| k.name == *kernel).unwrap();
            assert!(
                k.top(2).contains(tool),
                "{kernel} with {sass_file}: expected {tool} in the top two, got {:?}",
                k.top(3)
            );
        }
    }
}

#[test]
fn no_high_severity_false_alarms() {
    let report = h200("h200/nvdisasm.txt");
    let get = |n: &str| report.kernels.iter().find(|k| k.name == n).unwrap();
    let highs = |n: &str| {
        get(n).diagnoses.iter().filter(|d| d.severity == Severity::High).map(|d| d.tool.clone()).collect::<Vec<_>>()
    };
    assert_eq!(highs("copy_vec4"), Vec::<String>::new());
    assert_eq!(highs("transpose_padded"), Vec::<String>::new());
    assert!(get("transpose_padded").get("shared-bank-conflicts").is_none());
    let wmma = get("wmma_gemm");
    assert!(wmma.get("no-tensor-cores").is_none(), "wmma_gemm uses HMMA");
    // Its one high finding is the 8-sectors-per-request fragment loads that Nsight Compute
    // also reports (UncoalescedGlobalAccess, 49% estimated speedup).
    assert_eq!(highs("wmma_gemm"), vec!["uncoalesced-global".to_string()]);
}

#[test]
fn every_diagnosis_carries_its_evidence_numbers() {
    let report = h200("h200/nvdisasm.txt");
    for k in &report.kernels {
        for d in &k.diagnoses {
            assert!(d.evidence.values().any(|v| v.is_number()), "{} {} has no numeric evidence", k.name, d.tool);
            assert!(!d.analysis.is_empty() && !d.prescription.is_empty(), "{} {}", k.name, d.tool);
            assert!((0.0..1.0).contains(&d.score));
        }
        // Ranked: most important first.
        assert!(k.diagnoses.windows(2).all(|w| w[0].score >= w[1].score), "{}", k.name);
    }
}

#[test]
fn source_lines_come_from_nvdisasm_line_info() {
    let report = h200("generated/probe_nvdisasm_lines.txt");
    let diag = |k: &str, t: &str| report.kernels.iter().find(|x| x.name == k).unwrap().get(t).unwrap().clone();
    assert_eq!(diag("fp64_accident", "fp64-in-fp32").location.as_deref(), Some("probe_kernels.cu:49"));
    let local = diag("spill_local", "local-memory").location.unwrap();
    assert!(local == "probe_kernels.cu:28" || local == "probe_kernels.cu:29", "{local}");
    assert_eq!(diag("copy_scalar", "scalar-global-access").location.as_deref(), Some("probe_kernels.cu:13"));
    assert_eq!(diag("copy_strided", "uncoalesced-global").location.as_deref(), Some("probe_kernels.cu:19"));
    assert_eq!(diag("histogram_atomic", "atomic-contention").location.as_deref(), Some("probe_kernels.cu:59"));
    assert!(diag("fp64_accident", "fp64-in-fp32").prescription.contains("probe_kernels.cu:49"));
}

#[test]
fn rankings_are_pinned() {
    insta::assert_snapshot!("h200_ranking", ranking(&h200("h200/nvdisasm.txt")));
}

#[test]
fn h100_k_misc_and_sparse_profiles_do_not_break() {
    let profile = ncu::parse(&read("h100/ncu_full_raw_k_misc.csv")).unwrap();
    let sass = sass::analyze_all(&sass::parse(&read("h100/sass_async_bulk_wmma_spill.txt")));
    let report = diagnose_profile(&profile, &sass, None, &Hints::default(), None);
    assert_eq!(report.kernels.len(), 1);
    let k = &report.kernels[0];
    assert!(k.get("fp64-in-fp32").is_some(), "k_misc has DMUL and F2F.F64: {:?}", k.top(5));
    assert!(k.get("atomic-contention").is_some());

    // A Triton GEMM profiled with a small metric set: most counters missing.
    let triton = diagnose_profile(
        &ncu::parse(&read("h100/ncu_raw_triton_gemm.csv")).unwrap(),
        &[],
        None,
        &Hints::default(),
        None,
    );
    assert_eq!(triton.kernels.len(), 2);
    for k in &triton.kernels {
        assert!(k.tools.iter().any(|t| t.outcome == "missing-evidence"), "missing counters are reported");
        assert!(k.get("roofline").is_some());
    }
    insta::assert_snapshot!("sparse_profiles", ranking(&report) + "\n" + &ranking(&triton));
}

#[test]
fn the_roofline_report_says_which_tools_ran_and_why() {
    let report = h200("h200/nvdisasm.txt");
    let vec4 = report.kernels.iter().find(|k| k.name == "copy_vec4").unwrap();
    let skipped: Vec<&str> = vec4.tools.iter().filter(|t| t.outcome == "skipped").map(|t| t.tool.as_str()).collect();
    assert!(skipped.contains(&"uncoalesced-global") && skipped.contains(&"warp-divergence"), "{skipped:?}");
    assert!(vec4.tools.iter().find(|t| t.tool == "uncoalesced-global").unwrap().why.contains("at-roofline kernel"));
    assert_eq!(vec4.tools.len(), heuristics::tools::ALL.len());
    assert!(heuristics::tools::ALL.len() >= 21);
}

#[test]
fn guidance_is_bounded_and_leads_with_the_top_problem() {
    let report = h200("generated/probe_nvdisasm_lines.txt");
    let k = report.kernels.iter().find(|k| k.name == "spill_local").unwrap();
    let g = heuristics::render::guidance(k, 4);
    assert!(g.lines().count() <= 4, "{g}");
    assert!(g.lines().nth(1).unwrap().contains("local-memory") && g.contains("probe_kernels.cu:2"), "{g}");
}
