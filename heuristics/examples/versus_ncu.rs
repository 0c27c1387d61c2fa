//! Per probe kernel: Nsight Compute's top rule (details page) next to our top diagnosis.
//! `cargo run -p heuristics --example versus_ncu`
fn main() {
    let root = format!("{}/../tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(format!("{root}/{p}")).unwrap();
    let profile = heuristics::ncu::parse(&read("h200/ncu_full_raw_all.csv")).unwrap();
    let sass = sass::analyze_all(&sass::parse(&read("generated/probe_nvdisasm_lines.txt")));
    let ptxas = sass::ptxas::parse_ptxas(&read("h200/ptxas_verbose.txt"));
    let report = heuristics::diagnose_profile(&profile, &sass, Some(&ptxas), &Default::default(), None);
    let rules = heuristics::ncu::parse_rules(&read("h200/ncu_full_details_all.csv"));
    println!("| kernel | Nsight Compute top rule (est. speedup) | ncu rules fired | nightshift top diagnosis (est. saving, location) |");
    println!("| --- | --- | --- | --- |");
    for k in &report.kernels {
        let mut mine: Vec<&heuristics::ncu::NcuRule> = rules.iter().filter(|r| r.kernel == k.name).collect();
        mine.sort_by(|a, b| b.estimated_speedup.unwrap_or(0.0).total_cmp(&a.estimated_speedup.unwrap_or(0.0)));
        let top = mine
            .first()
            .map(|r| format!("{} ({:.0}%)", r.rule, r.estimated_speedup.unwrap_or(0.0)))
            .unwrap_or_else(|| "-".into());
        let d = &k.diagnoses[0];
        println!(
            "| {} | {} | {} | {} {} ({:.0}%{}) |",
            k.name,
            top,
            mine.len(),
            d.tool,
            d.severity.name(),
            100.0 * d.score,
            d.location.as_ref().map(|l| format!(", {l}")).unwrap_or_default()
        );
    }
}
