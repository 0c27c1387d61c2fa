//! The declared metrics are the metrics read: every part of the analysis, run on every
//! launch of every real profile, reads only what it declares, and the verdicts from a
//! profile cut down to the declared columns equal the verdicts from the full set.

use heuristics::facts::{DeviceFacts, Needs};
use heuristics::ncu::{self, Launch};
use heuristics::precision::Accuracy;
use heuristics::{diagnose_profile, Hints, Report};
use std::collections::BTreeSet;

fn read(path: &str) -> String {
    let full = format!("{}/../tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// A real ncu capture with the SASS and ptxas report of the same build, where there are.
struct Capture {
    csv: &'static str,
    sass: Option<&'static str>,
    ptxas: Option<&'static str>,
}

/// Every raw-page capture the fixture tests use: H200 probes, an NVRTC saxpy, the H100
/// k_misc kernel, a Triton GEMM profiled with a small set, the second probe set and the
/// bf16 epilogue example.
const CAPTURES: &[Capture] = &[
    Capture {
        csv: "h200/ncu_full_raw_all.csv",
        sass: Some("h200/nvdisasm.txt"),
        ptxas: Some("h200/ptxas_verbose.txt"),
    },
    Capture { csv: "h200/ncu_rust_saxpy.csv", sass: None, ptxas: None },
    Capture { csv: "h100/ncu_full_raw_k_misc.csv", sass: Some("h100/sass_async_bulk_wmma_spill.txt"), ptxas: None },
    Capture { csv: "h100/ncu_raw_triton_gemm.csv", sass: None, ptxas: None },
    Capture {
        csv: "h100/probes2/ncu_full_raw.csv",
        sass: Some("h100/probes2/nvdisasm.txt"),
        ptxas: Some("h100/probes2/ptxas_verbose.txt"),
    },
    Capture {
        csv: "h100/example_bgr/ncu_raw.csv",
        sass: Some("h100/example_bgr/sass_lines.txt"),
        ptxas: Some("h100/example_bgr/ptxas.txt"),
    },
];

/// No task, and a task that knows its least bytes and flops and its tolerance: the tools
/// take other paths with a task (redundant traffic, floors, admissible math).
fn hint_sets() -> [Hints; 2] {
    let task = Hints {
        min_bytes: Some(1e6),
        min_flops: Some(1e9),
        accuracy: Some(Accuracy {
            rtol: 1e-4,
            atol: 1e-3,
            output_types: vec!["f32".into()],
            flops_kind: "fp32".into(),
        }),
        // The measured roof takes the roofline through its other path.
        achievable_dram_gbs: Some(3000.0),
    };
    [Hints::default(), task]
}

/// One way to diagnose a capture: with or without its SASS (tools take other paths
/// without it), under each hint set.
struct Variant {
    name: String,
    profile: ncu::Profile,
    sass: Vec<sass::FunctionReport>,
    ptxas: Option<sass::ptxas::PtxasReport>,
    hints: Hints,
}

fn variants_of(capture: &Capture, csv: &str) -> Vec<Variant> {
    let profile = ncu::parse(csv).unwrap_or_else(|e| panic!("{}: {e}", capture.csv));
    let sass = capture.sass.map(|p| sass::analyze_all(&sass::parse(&read(p)))).unwrap_or_default();
    let ptxas = capture.ptxas.map(|p| sass::ptxas::parse_ptxas(&read(p)));
    let mut out = Vec::new();
    for with_sass in [true, false] {
        if !with_sass && sass.is_empty() {
            continue;
        }
        for (h, hints) in hint_sets().into_iter().enumerate() {
            out.push(Variant {
                name: format!("{} ({}, hints {h})", capture.csv, if with_sass { "with SASS" } else { "no SASS" }),
                profile: profile.clone(),
                sass: if with_sass { sass.clone() } else { Vec::new() },
                ptxas: if with_sass { ptxas.clone() } else { None },
                hints,
            });
        }
    }
    out
}

/// The columns ncu prints for every launch whatever it collects; the parser reads the
/// ID, the kernel name and the launch configuration from them.
const IDENTIFYING_COLUMNS: &[&str] = &[
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
];

/// `csv` (ncu's raw page) with only the identifying columns and the `keep` metrics: what
/// ncu would have printed had it collected only those. Lines before the header (ncu's
/// and the program's chatter) stay as they were.
fn keep_columns(csv: &str, keep: &[&str]) -> String {
    let header_at = csv.find("\"ID\",").expect("a raw-page header");
    let mut reader =
        ::csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(&csv.as_bytes()[header_at..]);
    let mut writer =
        ::csv::WriterBuilder::new().flexible(true).quote_style(::csv::QuoteStyle::Always).from_writer(Vec::new());
    let mut kept: Option<Vec<usize>> = None;
    for record in reader.records() {
        let record = record.expect("the fixture's CSV reads");
        let columns = kept.get_or_insert_with(|| {
            record
                .iter()
                .enumerate()
                .filter(|(_, name)| IDENTIFYING_COLUMNS.contains(name) || keep.contains(name))
                .map(|(i, _)| i)
                .collect()
        });
        let cells: Vec<&str> = columns.iter().filter_map(|i| record.get(*i)).collect();
        writer.write_record(&cells).expect("writes to memory");
    }
    let body = String::from_utf8(writer.into_inner().expect("writes to memory")).expect("UTF-8 in, UTF-8 out");
    format!("{}{body}", &csv[..header_at])
}

fn report_of(v: &Variant) -> Report {
    diagnose_profile(&v.profile, &v.sass, v.ptxas.as_ref(), &v.hints, None)
}

/// The names in `read` that `needs` does not declare.
fn undeclared(read: &BTreeSet<String>, needs: Needs) -> Vec<String> {
    let declared: BTreeSet<&str> = needs.all().collect();
    read.iter().filter(|name| !declared.contains(name.as_str())).cloned().collect()
}

/// Runs every part of the analysis on `launch` (each tool whatever its gate, so that
/// every path a gate could open is taken) and returns what each part read beyond its
/// declaration, and everything read.
fn reads_beyond_declarations(launch: &Launch, v: &Variant) -> (Vec<String>, BTreeSet<String>) {
    let mut launch = launch.clone();
    let reads = launch.record_reads();
    let mut everything = BTreeSet::new();
    let mut problems = Vec::new();
    let mut check = |part: &str, needs: Needs| {
        let read = reads.take();
        let extra = undeclared(&read, needs);
        if !extra.is_empty() {
            problems.push(format!("{part} reads undeclared {extra:?}"));
        }
        everything.extend(read);
    };
    let kernel = heuristics::diagnosis::kernel_of_launch(&launch, &v.sass, v.ptxas.as_ref(), &v.hints);
    check("the device facts", DeviceFacts::NEEDS);
    let roofline = heuristics::roofline::classify(&kernel);
    check("the roofline", heuristics::roofline::NEEDS);
    for tool in heuristics::tools::ALL {
        let _ = (tool.run)(&kernel, &roofline);
        check(tool.id.as_str(), tool.needs);
    }
    let _ = heuristics::render::raw_counters(&launch);
    check("the raw counters", heuristics::render::RAW_COUNTERS);
    let problems = problems.into_iter().map(|p| format!("{}: {p}", launch.kernel)).collect();
    (problems, everything)
}

#[test]
fn every_part_reads_only_the_metrics_it_declares() {
    let mut problems = Vec::new();
    let mut read_anywhere = BTreeSet::new();
    let mut launches = 0;
    for capture in CAPTURES {
        for v in variants_of(capture, &read(capture.csv)) {
            for launch in &v.profile.launches {
                let (p, all) = reads_beyond_declarations(launch, &v);
                problems.extend(p.into_iter().map(|p| format!("{}: {p}", v.name)));
                read_anywhere.extend(all);
                launches += 1;
            }
        }
    }
    assert!(launches > 50, "{launches} launch runs");
    problems.dedup();
    assert!(problems.is_empty(), "declare what is read (tools::ALL, roofline::NEEDS, ...):\n{}", problems.join("\n"));
    // And nothing declared goes unread: a stale declaration would cost collection time.
    let stale: Vec<&str> = heuristics::required_metrics().into_iter().filter(|m| !read_anywhere.contains(*m)).collect();
    assert!(stale.is_empty(), "declared but never read on any capture: {stale:?}");
}

#[test]
fn an_undeclared_read_is_caught() {
    let capture = &CAPTURES[0];
    let v = variants_of(capture, &read(capture.csv)).remove(0);
    let mut launch = v.profile.launches[0].clone();
    let reads = launch.record_reads();
    let kernel = heuristics::diagnosis::kernel_of_launch(&launch, &v.sass, v.ptxas.as_ref(), &v.hints);
    reads.take();
    // A tool that reads the DRAM throughput but declares only the duration.
    let _ = kernel.opt(heuristics::facts::metric::DURATION);
    let _ = kernel.opt(heuristics::facts::metric::DRAM_PCT);
    let needs = Needs { metrics: &[heuristics::facts::metric::DURATION], derived: &[] };
    assert_eq!(undeclared(&reads.take(), needs), vec![heuristics::facts::metric::DRAM_PCT.to_string()]);
}

#[test]
fn verdicts_from_the_declared_metrics_equal_verdicts_from_the_full_set() {
    let required = heuristics::required_metrics();
    for capture in CAPTURES {
        let full_csv = read(capture.csv);
        let reduced_csv = keep_columns(&full_csv, &required);
        let reduced_columns = ncu::parse(&reduced_csv).unwrap().launches[0].metric_count();
        assert!(reduced_columns <= IDENTIFYING_COLUMNS.len() + required.len(), "{}: {reduced_columns}", capture.csv);
        for (full, reduced) in variants_of(capture, &full_csv).iter().zip(variants_of(capture, &reduced_csv)) {
            let (a, b) = (report_of(full), report_of(&reduced));
            assert_eq!(a.kernels.len(), b.kernels.len(), "{}", full.name);
            for (ka, kb) in a.kernels.iter().zip(&b.kernels) {
                let verdicts = |k: &heuristics::KernelDiagnosis| {
                    k.diagnoses.iter().map(|d| (d.tool, d.severity, d.score)).collect::<Vec<_>>()
                };
                assert_eq!(verdicts(ka), verdicts(kb), "{} {}: same tools, ranks, severities", full.name, ka.name);
                assert_eq!(ka, kb, "{} {}: the same report in every detail", full.name, ka.name);
            }
        }
    }
}

#[test]
fn the_reduction_keeps_what_the_parser_needs_and_drops_the_rest() {
    let full = read("h200/ncu_full_raw_all.csv");
    let reduced = keep_columns(&full, &[heuristics::facts::metric::DURATION]);
    assert!(reduced.starts_with("==WARNING=="), "the chatter before the header stays");
    let (a, b) = (ncu::parse(&full).unwrap(), ncu::parse(&reduced).unwrap());
    assert_eq!(b.launches.len(), a.launches.len());
    for (la, lb) in a.launches.iter().zip(&b.launches) {
        assert_eq!((&la.id, &la.kernel, &la.block, &la.grid), (&lb.id, &lb.kernel, &lb.block, &lb.grid));
        assert_eq!(la.get(heuristics::facts::metric::DURATION), lb.get(heuristics::facts::metric::DURATION));
        assert!(la.has(heuristics::facts::metric::DRAM_PCT) && !lb.has(heuristics::facts::metric::DRAM_PCT));
        assert_eq!(lb.metric_count(), IDENTIFYING_COLUMNS.len() + 1);
    }
}
