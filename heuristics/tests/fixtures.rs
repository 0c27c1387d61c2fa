//! Diagnoses of the probe kernels profiled on an H200 (and an H100 kernel), pinned.

use heuristics::{diagnose_profile, ncu, Hints, Report, Severity, ToolId};

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// A saved capture diagnosed: the raw ncu page, the SASS and the ptxas report, as text.
fn diagnose_capture(ncu_csv: &str, sass_text: &str, ptxas_log: &str, hints: &Hints) -> Report {
    let profile = ncu::parse(ncu_csv).unwrap();
    let sass = sass::analyze_all(&sass::parse(sass_text));
    let ptxas = sass::ptxas::parse_ptxas(ptxas_log);
    diagnose_profile(&profile, &sass, Some(&ptxas), hints, None)
}

fn h200(sass_file: &str) -> Report {
    diagnose_capture(
        &read("h200/ncu_full_raw_all.csv"),
        &read(sass_file),
        &read("h200/ptxas_verbose.txt"),
        &Hints::default(),
    )
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
const EXPECTED: &[(&str, ToolId)] = &[
    ("copy_scalar", ToolId::ScalarGlobalAccess),
    ("copy_vec4", ToolId::AtRoofline),
    ("copy_strided", ToolId::UncoalescedGlobal),
    ("matmul_naive", ToolId::NoTensorCores),
    ("spill_local", ToolId::LocalMemory),
    ("transpose_conflict", ToolId::SharedBankConflicts),
    ("fp64_accident", ToolId::Fp64InFp32),
    ("divergent", ToolId::WarpDivergence),
    ("histogram_atomic", ToolId::AtomicContention),
    ("softmax_naive", ToolId::UncoalescedGlobal),
    ("tiny_grid", ToolId::UnderFilledGrid),
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
    let highs =
        |n: &str| get(n).diagnoses.iter().filter(|d| d.severity == Severity::High).map(|d| d.tool).collect::<Vec<_>>();
    assert_eq!(highs("copy_vec4"), Vec::<ToolId>::new());
    assert_eq!(highs("transpose_padded"), Vec::<ToolId>::new());
    assert!(get("transpose_padded").get(ToolId::SharedBankConflicts).is_none());
    let wmma = get("wmma_gemm");
    assert!(wmma.get(ToolId::NoTensorCores).is_none(), "wmma_gemm uses HMMA");
    // Its one high finding is the 8-sectors-per-request fragment loads that Nsight Compute
    // also reports (UncoalescedGlobalAccess, 49% estimated speedup).
    assert_eq!(highs("wmma_gemm"), vec![ToolId::UncoalescedGlobal]);
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
    let diag = |k: &str, t: ToolId| report.kernels.iter().find(|x| x.name == k).unwrap().get(t).unwrap().clone();
    assert_eq!(diag("fp64_accident", ToolId::Fp64InFp32).location.as_deref(), Some("probe_kernels.cu:49"));
    let local = diag("spill_local", ToolId::LocalMemory).location.unwrap();
    assert!(local == "probe_kernels.cu:28" || local == "probe_kernels.cu:29", "{local}");
    assert_eq!(diag("copy_scalar", ToolId::ScalarGlobalAccess).location.as_deref(), Some("probe_kernels.cu:13"));
    assert_eq!(diag("copy_strided", ToolId::UncoalescedGlobal).location.as_deref(), Some("probe_kernels.cu:19"));
    assert_eq!(diag("histogram_atomic", ToolId::AtomicContention).location.as_deref(), Some("probe_kernels.cu:59"));
    assert!(diag("fp64_accident", ToolId::Fp64InFp32).prescription.contains("probe_kernels.cu:49"));
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
    assert!(k.get(ToolId::Fp64InFp32).is_some(), "k_misc has DMUL and F2F.F64: {:?}", k.top(5));
    assert!(k.get(ToolId::AtomicContention).is_some());

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
        assert!(k.get(ToolId::Roofline).is_some());
    }
    insta::assert_snapshot!("sparse_profiles", ranking(&report) + "\n" + &ranking(&triton));
}

#[test]
fn the_roofline_report_says_which_tools_ran_and_why() {
    let report = h200("h200/nvdisasm.txt");
    let vec4 = report.kernels.iter().find(|k| k.name == "copy_vec4").unwrap();
    let skipped: Vec<ToolId> = vec4.tools.iter().filter(|t| t.outcome == "skipped").map(|t| t.tool).collect();
    assert!(skipped.contains(&ToolId::WarpDivergence), "{skipped:?}");
    assert!(vec4.tools.iter().find(|t| t.tool == ToolId::WarpDivergence).unwrap().why.contains("at-roofline kernel"));
    // Memory-side tools run at the roofline, held to the headroom left: 16-byte accesses
    // give the scalar-access tool nothing to say.
    let scalar = vec4.tools.iter().find(|t| t.tool == ToolId::ScalarGlobalAccess).unwrap();
    assert_eq!(scalar.outcome, "quiet", "{scalar:?}");
    assert!(scalar.why.contains("128 bits wide"), "{}", scalar.why);
    // Waste tools run at the roofline too: busy DRAM is not proof of useful bytes.
    assert_eq!(vec4.tools.iter().find(|t| t.tool == ToolId::UncoalescedGlobal).unwrap().outcome, "quiet");
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

// ---------------------------------------------------------------------------------------
// The second probe set (issue 12), captured on an H100: one kernel per class the first
// tools misjudged. tests/fixtures/h100/probes2/README.md says what each plants.

fn probes2(sass_file: &str, hints: &Hints) -> Report {
    diagnose_capture(
        &read("h100/probes2/ncu_full_raw.csv"),
        &read(&format!("h100/probes2/{sass_file}")),
        &read("h100/probes2/ptxas_verbose.txt"),
        hints,
    )
}

const EXPECTED_2: &[(&str, ToolId)] = &[
    ("field_of_record", ToolId::UncoalescedGlobal),
    ("copy_bytes", ToolId::NarrowGlobalAccess),
    ("smem_stencil_rounds", ToolId::SharedMemoryBound),
    ("accurate_math", ToolId::AccurateMath),
    ("shared_hist_hot", ToolId::AtomicContention),
    ("pointer_chase", ToolId::DependentLoads),
    ("gemm_tiled_1x1", ToolId::RegisterTiling),
];

fn fp32_task(rtol: f64) -> Hints {
    Hints {
        accuracy: Some(heuristics::precision::Accuracy {
            rtol,
            atol: 1e-3,
            output_types: vec!["f32".into()],
            flops_kind: "fp32".into(),
        }),
        ..Hints::default()
    }
}

#[test]
fn every_second_set_problem_is_ranked_first_and_the_clean_kernel_has_no_high_finding() {
    for sass_file in ["nvdisasm.txt", "sass_cubin.txt"] {
        for hints in [Hints::default(), fp32_task(1e-4)] {
            let report = probes2(sass_file, &hints);
            assert_eq!(report.kernels.len(), 8);
            for (kernel, tool) in EXPECTED_2 {
                let k = report.kernels.iter().find(|k| k.name == *kernel).unwrap();
                assert_eq!(k.top(1), vec![*tool], "{kernel} with {sass_file}: {:?}", k.top(3));
            }
            let clean = report.kernels.iter().find(|k| k.name == "clean_copy_vec4").unwrap();
            assert!(clean.diagnoses.iter().all(|d| d.severity < Severity::High), "{:?}", clean.top(3));
        }
    }
}

#[test]
fn busy_dram_moving_unused_bytes_is_not_the_roofline() {
    let report = probes2("nvdisasm.txt", &Hints::default());
    let k = report.kernels.iter().find(|k| k.name == "field_of_record").unwrap();
    assert!(k.roofline.dram_pct.unwrap() > 90.0);
    assert_ne!(k.roofline.class, heuristics::roofline::Bound::AtRoofline);
    // Loads use 4 of 32 bytes per sector (32 sectors a request), stores all 32 (4 a request).
    assert_eq!(k.roofline.sector_efficiency, Some(0.222));
    assert!(k.roofline.reason.contains("of the bytes in each moved sector are requested"), "{}", k.roofline.reason);
    let d = k.get(ToolId::UncoalescedGlobal).unwrap();
    assert!(d.prescription.contains("structure of arrays"), "{}", d.prescription);
    // The same busy DRAM with every byte used is the roofline.
    let clean = report.kernels.iter().find(|k| k.name == "clean_copy_vec4").unwrap();
    assert_eq!(clean.roofline.sector_efficiency, Some(1.0));
}

#[test]
fn prescriptions_offer_only_what_the_task_tolerance_admits() {
    let gemm = |hints: &Hints| {
        let r = probes2("nvdisasm.txt", hints);
        r.kernels.iter().find(|k| k.name == "gemm_tiled_1x1").unwrap().get(ToolId::NoTensorCores).unwrap().clone()
    };
    let tight = gemm(&fp32_task(1e-4));
    assert!(tight.prescription.contains("3xTF32"), "{}", tight.prescription);
    assert!(
        tight.prescription.contains("Plain TF32") && tight.prescription.contains("fails"),
        "{}",
        tight.prescription
    );
    assert_eq!(tight.evidence["admissible_path"], "3xTF32 tensor cores");
    let loose = gemm(&fp32_task(5e-3));
    assert!(loose.prescription.contains("Use TF32 tensor cores"), "{}", loose.prescription);
    // Exact to the last bits: no tensor-core path passes, so none is offered.
    let exact = probes2("nvdisasm.txt", &fp32_task(1e-7));
    assert!(exact.kernels.iter().find(|k| k.name == "gemm_tiled_1x1").unwrap().get(ToolId::NoTensorCores).is_none());

    let math = |hints: &Hints| {
        let r = probes2("nvdisasm.txt", hints);
        r.kernels.iter().find(|k| k.name == "accurate_math").unwrap().get(ToolId::AccurateMath).unwrap().clone()
    };
    let allowed = math(&fp32_task(1e-4));
    assert!(allowed.prescription.contains("__expf") && allowed.evidence["fast_math_allowed"] == "yes");
    let refused = math(&fp32_task(1e-6));
    assert!(refused.prescription.starts_with("Keep the accurate functions"), "{}", refused.prescription);
    assert_eq!(refused.severity, Severity::Medium);
    let unknown = math(&Hints::default());
    assert!(unknown.prescription.contains("tolerance is unknown"), "{}", unknown.prescription);
}

#[test]
fn the_task_floor_counts_flops_on_the_fastest_admissible_path() {
    let mut hints = fp32_task(1e-4);
    hints.min_flops = Some(2.0 * 2048f64.powi(3));
    let report = probes2("nvdisasm.txt", &hints);
    let k = report.kernels.iter().find(|k| k.name == "gemm_tiled_1x1").unwrap();
    let floor = k.roofline.floor_us.unwrap();
    // 2*2048^3 flops on 132 SMs x 1.98 GHz x 2048/3 (3xTF32), not x 256 (FFMA).
    let expect = 2.0 * 2048f64.powi(3) / (132.0 * 1.98e9 * 2048.0 / 3.0) * 1e6;
    assert!((floor - expect).abs() / expect < 0.01, "{floor} vs {expect}");
}

#[test]
fn second_set_rankings_are_pinned() {
    insta::assert_snapshot!("h100_probes2_ranking", ranking(&probes2("nvdisasm.txt", &fp32_task(1e-4))));
}

/// The bf16 epilogue of examples/bias_gelu_residual on an H100: issue-bound on per-element
/// index math (a 64-bit `%` per 2-byte element). Its 16-byte rewrite measured 1.986x
/// (a 0.50 saving); the estimate must be within 2x of that and rank first.
#[test]
fn an_issue_bound_epilogue_is_sized_by_its_instruction_count() {
    let report = diagnose_capture(
        &read("h100/example_bgr/ncu_raw.csv"),
        &read("h100/example_bgr/sass_lines.txt"),
        &read("h100/example_bgr/ptxas.txt"),
        &Hints::default(),
    );
    let k = &report.kernels[0];
    assert_eq!(k.top(1), vec![ToolId::IntegerOverhead], "{:?}", k.top(3));
    let d = k.get(ToolId::IntegerOverhead).unwrap();
    assert!((0.25..=1.0).contains(&d.score), "estimate {} against a measured 0.50", d.score);
    assert!(d.prescription.contains("several elements per thread"), "{}", d.prescription);
}

#[test]
fn a_measured_roof_decides_the_roofline() {
    let hints = |gbs: Option<f64>| Hints { achievable_dram_gbs: gbs, ..Hints::default() };
    // The busiest DRAM among kernels that use the bytes they move.
    let plain = probes2("nvdisasm.txt", &hints(None))
        .kernels
        .into_iter()
        .filter(|k| k.roofline.sector_efficiency.is_none_or(|e| e >= 0.8) && k.roofline.dram_gbs.is_some())
        .max_by(|a, b| a.roofline.dram_gbs.unwrap().total_cmp(&b.roofline.dram_gbs.unwrap()))
        .expect("a kernel with DRAM traffic");
    let clean = |r: &Report| r.kernels.iter().find(|k| k.name == plain.name).unwrap().clone();
    assert_eq!(plain.roofline.dram_pct_of_achievable, None);
    let gbs = plain.roofline.dram_gbs.unwrap();
    // 95% of what the GPU was measured to reach: at the roofline, and it says so.
    let near = clean(&probes2("nvdisasm.txt", &hints(Some(gbs / 0.95))));
    assert_eq!(near.roofline.class, heuristics::roofline::Bound::AtRoofline);
    assert!(near.get(ToolId::AtRoofline).unwrap().analysis.contains("measured"), "{:?}", near.get(ToolId::AtRoofline));
    // 70% of a higher measured roof: not there, and at-roofline no longer speaks.
    let far = clean(&probes2("nvdisasm.txt", &hints(Some(gbs / 0.70))));
    assert_ne!(far.roofline.class, heuristics::roofline::Bound::AtRoofline);
    assert!(far.get(ToolId::AtRoofline).is_none());
}

/// 4-byte accesses at 87% of an H200's DRAM peak (fixtures/h200/weighted_pair): at the
/// roofline, yet the scalar-access tool runs and is held to the headroom left. Its float4
/// fix measured 1.0389x there (a 3.7% saving): the estimate is within 2x of it, and stays
/// below medium severity.
#[test]
fn above_the_cut_memory_tools_are_held_to_the_headroom() {
    let report = diagnose_capture(
        &read("h200/weighted_pair/ncu_raw.csv"),
        &read("h200/weighted_pair/sass.txt"),
        &read("h200/weighted_pair/ptxas.txt"),
        &Hints::default(),
    );
    let k = &report.kernels[0];
    assert_eq!(k.roofline.class, heuristics::roofline::Bound::AtRoofline, "{}", k.roofline.reason);
    let headroom = k.roofline.dram_headroom.unwrap();
    assert!((0.03..0.08).contains(&headroom), "{headroom}");
    assert_eq!(k.top(1), vec![ToolId::ScalarGlobalAccess], "{:?}", k.top(3));
    let d = k.get(ToolId::ScalarGlobalAccess).unwrap();
    assert!(d.score <= headroom, "{} above the headroom {headroom}", d.score);
    assert_eq!(d.evidence["dram_headroom"], headroom, "held to the headroom by stage 2's gate");
    assert!(k.get(ToolId::AtRoofline).unwrap().prescription.contains("left below what this GPU reaches"));
    let measured = 1.0 - 1.0 / 1.0389;
    assert!((0.5..=2.0).contains(&(d.score / measured)), "estimate {} against a measured {measured:.3}", d.score);
    assert!(d.severity < Severity::Medium, "{:?}", d.severity);
}

fn corpus_capture(entry: &str) -> Report {
    let dir = format!("{}/corpus/{entry}/capture", env!("CARGO_MANIFEST_DIR"));
    let text = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).unwrap();
    diagnose_capture(&text("ncu_raw.csv"), &text("sass.txt"), &text("ptxas.txt"), &Hints::default())
}

/// H200 captures of the corpus's compute-bound plants (issue 36): a busy pipe with half
/// its lanes idle reads as half useful, and a tail that pulls SM throughput under 50%
/// still reads as compute-bound, since the pipe is busy while its SMs run.
#[test]
fn useful_compute_weighs_the_busy_pipe_by_its_working_lanes() {
    use heuristics::roofline::Bound;
    let orbit = corpus_capture("047_complex_orbit");
    let r = &orbit.kernels[0].roofline;
    assert_eq!(r.class, Bound::ComputeBound);
    let (pipe, busy) = r.busiest_pipe.clone().unwrap();
    let lanes = r.working_lanes.unwrap();
    assert!((0.45..0.55).contains(&lanes), "{lanes}");
    assert!((r.useful_pipe_pct.unwrap() - busy * lanes).abs() < 0.2, "{r:?}");
    assert!(r.reason.contains("useful") && r.reason.contains(&pipe), "{}", r.reason);
    assert_eq!(orbit.kernels[0].top(1), vec![ToolId::WarpDivergence]);

    let rows = corpus_capture("046_row_damping");
    let r = &rows.kernels[0].roofline;
    assert!(r.compute_pct.unwrap() < 50.0 && r.class == Bound::ComputeBound, "{r:?}");
    assert!(r.reason.contains("while its SMs are active"), "{}", r.reason);
    let tail = rows.kernels[0].get(ToolId::UnderFilledGrid).unwrap();
    // 150 one-per-SM blocks on 132 SMs: the 18 of the second wave take a whole wave.
    assert_eq!(tail.evidence["blocks_in_last_wave"], 18.0);
    assert!((tail.score - (1.0 - 150.0 / 264.0)).abs() < 0.01, "{}", tail.score);
}

/// A kernel written twice, its 16-byte copy the one that ran (`h200/wide_copy/`): the
/// SASS's static mix of widths puts a request's ideal at 5 sectors, but every byte
/// fetched was used, so nothing was uncoalesced.
#[test]
fn sixteen_byte_loads_that_use_every_byte_they_fetch_are_not_uncoalesced() {
    let report = diagnose_capture(
        &read("h200/wide_copy/ncu_raw.csv"),
        &read("h200/wide_copy/sass.txt"),
        &read("h200/wide_copy/ptxas.txt"),
        &Hints::default(),
    );
    let k = &report.kernels[0];
    assert!(
        !k.diagnoses.iter().any(|d| d.tool == ToolId::UncoalescedGlobal),
        "{:?}",
        k.diagnoses.iter().find(|d| d.tool == ToolId::UncoalescedGlobal).map(|d| &d.analysis)
    );
    let quiet = k.tools.iter().find(|t| t.tool == ToolId::UncoalescedGlobal).expect("the tool ran");
    assert!(quiet.why.contains("15.4 sectors per load request"), "{}", quiet.why);
}
