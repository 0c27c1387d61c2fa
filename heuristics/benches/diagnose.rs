//! Offline diagnosis of the whole H200 fixture (13 kernels): `cargo bench -p heuristics`.

use std::time::Instant;

fn main() {
    let root = format!("{}/../tests/fixtures/h200", env!("CARGO_MANIFEST_DIR"));
    let csv = std::fs::read_to_string(format!("{root}/ncu_full_raw_all.csv")).unwrap();
    let sass_text = std::fs::read_to_string(format!("{root}/nvdisasm.txt")).unwrap();
    let ptxas_text = std::fs::read_to_string(format!("{root}/ptxas_verbose.txt")).unwrap();
    let rounds = 20;
    let t = Instant::now();
    let mut kernels = 0;
    for _ in 0..rounds {
        let profile = heuristics::ncu::parse(&csv).unwrap();
        let reports = sass::analyze_all(&sass::parse(&sass_text));
        let ptxas = sass::ptxas::parse_ptxas(&ptxas_text);
        let report = heuristics::diagnose_profile(&profile, &reports, Some(&ptxas), &Default::default(), None);
        kernels += std::hint::black_box(report).kernels.len();
    }
    let per = t.elapsed().as_secs_f64() / rounds as f64;
    println!(
        "diagnose fixture: {} kernels, {:.1} ms per full run (parse ncu + SASS + ptxas, diagnose)",
        kernels / rounds,
        per * 1e3
    );
}
