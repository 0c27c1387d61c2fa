//! Prints the ranked diagnoses for an ncu raw CSV (+ SASS + ptxas): a quick look while
//! tuning tools. `cargo run -p heuristics --example fixture -- RAW.csv [SASS] [PTXAS]`
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let csv = std::fs::read_to_string(&args[0]).unwrap();
    let profile = heuristics::ncu::parse(&csv).unwrap();
    let reports =
        args.get(1).map(|p| sass::analyze_all(&sass::parse(&std::fs::read_to_string(p).unwrap()))).unwrap_or_default();
    let ptxas = args.get(2).map(|p| sass::ptxas::parse_ptxas(&std::fs::read_to_string(p).unwrap()));
    let report = heuristics::diagnose_profile(&profile, &reports, ptxas.as_ref(), &Default::default(), None);
    for k in &report.kernels {
        let top: Vec<String> =
            k.diagnoses.iter().take(4).map(|d| format!("{}:{}:{:.2}", d.tool, d.severity.name(), d.score)).collect();
        println!("{:<20} {:<14} {}", k.name, k.roofline.class.name(), top.join("  "));
    }
}
