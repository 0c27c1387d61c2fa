//! Parse throughput: `cargo bench -p sass`. Prints MB/s for parsing alone and for parsing
//! plus analysis, over the captured SASS fixtures.

use std::time::Instant;

fn main() {
    let root = format!("{}/../tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let files =
        ["h200/sass_cubin.txt", "h200/nvdisasm.txt", "h100/sass_async_bulk_wmma_spill.txt", "h100/sass_misc.txt"];
    let texts: Vec<String> = files.iter().map(|f| std::fs::read_to_string(format!("{root}/{f}")).unwrap()).collect();
    let bytes: usize = texts.iter().map(|t| t.len()).sum();
    let rounds = 40;
    let mut functions = 0;
    let t = Instant::now();
    for _ in 0..rounds {
        for text in &texts {
            functions += std::hint::black_box(sass::parse(text)).functions.len();
        }
    }
    let parse_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for _ in 0..rounds {
        for text in &texts {
            let listing = sass::parse(text);
            std::hint::black_box(sass::analyze_all(&listing));
        }
    }
    let full_s = t.elapsed().as_secs_f64();
    let mb = (bytes * rounds) as f64 / 1e6;
    println!(
        "sass parse: {:.1} MB in {:.3} s = {:.1} MB/s ({} functions)",
        mb,
        parse_s,
        mb / parse_s,
        functions / rounds
    );
    println!("sass parse + analyze: {:.1} MB/s", mb / full_s);
}
