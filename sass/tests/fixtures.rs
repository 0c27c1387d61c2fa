//! The parser and analyses on SASS captured on H100/H200 machines.

use sass::{analyze, analyze_all, parse, Class, FunctionReport};

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn report<'a>(reports: &'a [FunctionReport], name: &str) -> &'a FunctionReport {
    reports.iter().find(|r| sass::short_name(&r.name) == name).unwrap_or_else(|| panic!("no function {name}"))
}

fn bits(h: &std::collections::BTreeMap<String, u64>) -> Vec<u32> {
    let mut v: Vec<u32> = h.keys().map(|k| k.parse().unwrap()).collect();
    v.sort();
    v
}

#[test]
fn h200_probe_kernels_from_cuobjdump() {
    let listing = parse(&fixture("h200/sass_cubin.txt"));
    assert_eq!(listing.functions.len(), 13);
    let reports = analyze_all(&listing);
    insta::assert_snapshot!("h200_cubin_table", sass::analysis::table(&reports));

    let vec4 = report(&reports, "copy_vec4");
    assert_eq!(bits(&vec4.mix.global_load_bits), vec![128]);
    assert_eq!(bits(&vec4.mix.global_store_bits), vec![128]);
    assert!(vec4.finding("vector-global-access").is_some());

    let scalar = report(&reports, "copy_scalar");
    assert_eq!(bits(&scalar.mix.global_load_bits), vec![32]);
    assert_eq!(bits(&scalar.mix.global_store_bits), vec![32]);
    assert!(scalar.finding("scalar-global-loads").is_some());

    let spill = report(&reports, "spill_local");
    assert!(spill.count(Class::LocalLoad) > 0 && spill.count(Class::LocalStore) > 0);
    assert!(spill.finding("local-memory").is_some());

    let fp64 = report(&reports, "fp64_accident");
    assert!(fp64.count(Class::Fp64) > 0);
    assert!(fp64.fp64.iter().any(|s| s.opcode == "F2F.F64.F32"), "{:?}", fp64.fp64);
    assert!(fp64.fp64.iter().any(|s| s.opcode == "F2F.F32.F64"));

    let wmma = report(&reports, "wmma_gemm");
    assert!(wmma.count(Class::Tensor) > 0);
    assert!(wmma.finding("tensor-instructions").unwrap().message.contains("HMMA"));

    let hist = report(&reports, "histogram_atomic");
    assert!(hist.count(Class::Atomic) > 0);

    let transpose = report(&reports, "transpose_conflict");
    assert!(transpose.count(Class::Barrier) > 0 && transpose.count(Class::SharedLoad) > 0);

    for r in &reports {
        assert!(!r.has_line_info, "cuobjdump prints no lines");
        assert_ne!(r.count(Class::Control), 0, "{} exits somewhere", r.name);
    }
    // Loops: matmul_naive's k loop, softmax_naive's three row walks.
    assert!(!report(&reports, "matmul_naive").loops.is_empty());
    assert!(report(&reports, "softmax_naive").loops.len() >= 3);
    assert!(report(&reports, "copy_vec4").loops.is_empty());
}

#[test]
fn nvdisasm_of_the_same_cubin_agrees_with_cuobjdump() {
    let a = analyze_all(&parse(&fixture("h200/sass_cubin.txt")));
    let b = analyze_all(&parse(&fixture("h200/nvdisasm.txt")));
    assert_eq!(a.len(), b.len());
    for ra in &a {
        let rb = report(&b, &sass::short_name(&ra.name));
        assert_eq!(ra.instructions, rb.instructions, "{}", ra.name);
        assert_eq!(ra.mix, rb.mix, "{}", ra.name);
        assert_eq!(ra.loops.len(), rb.loops.len(), "{}: labels resolve to the same loops", ra.name);
    }
}

#[test]
fn h100_async_bulk_wmma_spill() {
    let listing = parse(&fixture("h100/sass_async_bulk_wmma_spill.txt"));
    let reports = analyze_all(&listing);
    insta::assert_snapshot!("h100_async_table", sass::analysis::table(&reports));
    let names: Vec<String> = reports.iter().map(|r| sass::short_name(&r.name)).collect();
    assert_eq!(names, vec!["k_bulk", "k_async", "k_wmma", "k_spill", "k_misc", "k_vec"]);
    assert_eq!(reports[0].demangled, "k_bulk(float const*, float*)");
    let all = |c: Class| reports.iter().map(|r| r.count(c)).sum::<u64>();
    let has_op = |op: &str| listing.functions.iter().flat_map(|f| &f.instructions).any(|i| i.opcode == op);
    for op in ["LDGSTS", "UBLKCP", "HMMA", "DFMA", "F2F", "MUFU", "REDG", "ATOMG", "SYNCS"] {
        assert!(has_op(op), "{op} present");
    }
    assert!(all(Class::AsyncCopy) > 0 && all(Class::Tensor) > 0 && all(Class::Atomic) >= 2);
    assert!(report(&reports, "k_bulk").finding("async-copy").is_some());
    assert!(report(&reports, "k_async").finding("async-copy").is_some());
    let misc = report(&reports, "k_misc");
    assert!(misc.finding("fp64").is_some() && misc.finding("atomics").is_some());
    assert_eq!(bits(&report(&reports, "k_vec").mix.global_load_bits), vec![128]);
}

#[test]
fn misc_listing_with_shell_noise_and_truncated_excerpts() {
    // cuobjdump, -res-usage and three `head`-cut nvdisasm excerpts of one kernel, then a
    // complete NVRTC saxpy: every excerpt is its own (possibly empty) function.
    let listing = parse(&fixture("h100/sass_misc.txt"));
    let names: Vec<&str> = listing.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, vec!["_Z6k_bulkPKfPf"; 4].into_iter().chain(["saxpy"]).collect::<Vec<_>>());
    let saxpy = listing.function("saxpy").unwrap();
    assert_eq!(saxpy.instructions.len(), 17);
    assert_eq!(listing.functions[0].instructions.len(), 3, "the cut cuobjdump excerpt");
}

#[test]
fn single_function_analysis_is_what_analyze_all_gives() {
    let listing = parse(&fixture("h200/sass_cubin.txt"));
    assert_eq!(analyze(&listing.functions[3]), analyze_all(&listing)[3]);
}

#[test]
fn ptxas_report_of_the_probe_kernels() {
    let r = sass::ptxas::parse_ptxas(&fixture("h200/ptxas_verbose.txt"));
    assert_eq!(r.kernels.len(), 13);
    let k = |n: &str| r.kernel(n).unwrap();
    assert_eq!(k("spill_local").stack_frame_bytes, 256);
    assert_eq!(k("spill_local").registers, 32);
    assert_eq!(k("transpose_padded").shared_bytes, 4224);
    assert_eq!(k("transpose_conflict").shared_bytes, 4096);
    assert_eq!(k("wmma_gemm").registers, 40);
    assert!(r.kernels.iter().all(|k| k.arch == "sm_90"));
}

/// ptxas reuses a predicate that held a compare on a loaded value as the carry-out of the
/// next address add: the loads behind it wait on index arithmetic, not on the data.
#[test]
fn a_carry_out_after_a_compare_on_loaded_data_is_no_dependent_load() {
    let listing = parse(&fixture("generated/carry_out_sass.txt"));
    let reports = analyze_all(&listing);
    let summary: Vec<String> = reports
        .iter()
        .map(|r| {
            let deps: Vec<String> =
                r.dependent_loads.iter().map(|s| format!("{:#06x} {}", s.offset, s.opcode)).collect();
            format!(
                "{}: {} instructions, dependent loads [{}]",
                sass::short_name(&r.name),
                r.instructions,
                deps.join(", ")
            )
        })
        .collect();
    insta::assert_snapshot!("carry_out_dependent_loads", summary.join("\n"));
    assert!(reports.iter().all(|r| r.dependent_loads.is_empty()));
}
