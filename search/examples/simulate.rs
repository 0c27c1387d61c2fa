//! Compares search strategies on synthetic landscapes at equal evaluation budgets.
//! `cargo run --release -p search --example simulate [-- LANDSCAPES BUDGET SEED]`
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sweep = args.first().map(String::as_str) == Some("sweep");
    let args: Vec<String> = if sweep { args[1..].to_vec() } else { args };
    let get = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (landscapes, budget, seed) = (get(0, 300) as usize, get(1, 150) as usize, get(2, 20261121));
    let t = Instant::now();
    if sweep {
        let results = search::sim::sweep(200, budget, 7);
        println!("top MCTS settings on 200 tuning landscapes (geomean best speedup):");
        for (c, g) in results.iter().take(12) {
            println!(
                "  {g:.3}x  widen k {} alpha {} exploration {} pruning {} ({} failures, {} stale) boost {}",
                c.widen_k,
                c.widen_alpha,
                c.exploration,
                c.pruning,
                c.dead_end_failures,
                c.stale_children,
                c.promising_boost
            );
        }
        let worst = results.last().unwrap();
        println!("  ... worst {:.3}x  backup {:?} exploration {}", worst.1, worst.0.backup, worst.0.exploration);
        return;
    }
    let rows = search::sim::compare(landscapes, budget, seed);
    print!("{}", search::sim::table(&rows, landscapes, budget));
    println!("\nshare of the best reachable speedup, by evaluation budget ({} landscapes):", landscapes.min(200));
    print!("{}", search::sim::budget_table(landscapes.min(200), &[60, 150, 300], seed));
    eprintln!("({:.1} s)", t.elapsed().as_secs_f64());
}
