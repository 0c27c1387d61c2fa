//! Every recipe (and the extent analysis), with every parameter value, on arbitrary text and on real kernels cut and
//! spliced at random places: a rewrite or a reason, never a panic, and what comes out of
//! a mutated kernel is text a recipe can take again.

use proptest::prelude::*;
use rewrite::corpus;
use rewrite::{recipes, Application, Facts};
use std::path::PathBuf;

fn real_kernels() -> Vec<(String, Facts)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in [root.join("tests/kernels"), root.join("../tasks"), root.join("../examples")] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let files: Vec<PathBuf> = if p.is_dir() {
                std::fs::read_dir(&p).into_iter().flatten().flatten().map(|x| x.path()).collect()
            } else {
                vec![p]
            };
            for f in files {
                if f.extension().is_some_and(|x| x == "cu") {
                    let text = std::fs::read_to_string(&f).unwrap();
                    let facts = corpus::parse(&text).map(|a| a.facts).unwrap_or_else(|_| Facts::unknown("launch"));
                    out.push((text, facts));
                }
            }
        }
    }
    assert!(out.len() > 50, "found {} kernels", out.len());
    out
}

fn every_recipe(text: &str, facts: &Facts) {
    // The extent analysis reads the same files: an extent or a reason, never a panic.
    let _ = rewrite::extent::pointer_extents(&rewrite::Source::parse(text), &[], &facts.entry);
    let _ = rewrite::extent::pointer_uses(&rewrite::Source::parse(text), &[], &facts.entry);
    let _ = rewrite::extent::scalar_uses(&rewrite::Source::parse(text), &[], &facts.entry);
    let _ = rewrite::extent::pointer_stores(&rewrite::Source::parse(text), &[], &facts.entry);
    for r in recipes::ALL {
        for params in r.variants() {
            let app = Application { recipe: r.id, params };
            if let Ok(out) = rewrite::apply(&app, text, facts) {
                assert!(!out.description.is_empty());
                // The output parses and can be rewritten again without a panic.
                for again in recipes::ALL {
                    let _ = rewrite::apply(
                        &Application { recipe: again.id, params: Default::default() },
                        &out.source,
                        facts,
                    );
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        every_recipe(&text, &Facts::unknown("launch"));
    }

    #[test]
    fn cuda_shaped_noise_never_panics(parts in proptest::collection::vec(prop_oneof![
        Just("__global__ void k(float* x, int n) {"), Just("}"), Just("{"), Just("for (int i = threadIdx.x; i < n; i += blockDim.x)"),
        Just("x[i] = "), Just("1.f;"), Just("int i = blockIdx.x * blockDim.x + threadIdx.x;"), Just("if (i >= n) return;"),
        Just("k<<<(n + 255) / 256, 256, 0, s>>>(x, n);"), Just("extern \"C\" void launch(float* x, int n, cudaStream_t s)"),
        Just("__shared__ float t[256];"), Just("__syncthreads();"), Just("#define BLOCK 256\n"), Just("expf("), Just(")"),
        Just("/ n"), Just("% n"), Just("size_t"), Just(";"), Just("\n"),
    ], 0..40)) {
        every_recipe(&parts.concat(), &Facts::unknown("launch"));
    }

    #[test]
    fn real_kernels_cut_and_spliced_never_panic(which in 0usize..1000, cut in 0usize..100_000, len in 0usize..200, insert in "\\PC{0,20}") {
        let kernels = real_kernels();
        let (text, facts) = &kernels[which % kernels.len()];
        let mut at = cut % (text.len() + 1);
        while !text.is_char_boundary(at) { at -= 1; }
        let mut end = (at + len).min(text.len());
        while !text.is_char_boundary(end) { end -= 1; }
        let mutated = format!("{}{}{}", &text[..at], insert, &text[end..]);
        every_recipe(&mutated, facts);
    }
}

#[test]
fn deep_nesting_is_declined_not_overflowed() {
    let sum = (0..20_000).map(|i| format!("x[{i}]")).collect::<Vec<_>>().join(" + ");
    let text = format!(
        "__global__ void k(float* x, float* y, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = {sum} / x[i]; }}\nextern \"C\" void launch(float* x, float* y, int n, cudaStream_t s) {{ k<<<(n + 255) / 256, 256, 0, s>>>(x, y, n); }}\n"
    );
    let facts = rewrite::FactsBuilder::new("launch").tolerance(1e-2, 1e-2).build();
    for r in recipes::ALL {
        let why = rewrite::apply(&Application { recipe: r.id, params: Default::default() }, &text, &facts).unwrap_err();
        assert!(why.0.contains("levels deep"), "{}: {why}", r.id);
    }
    assert!(rewrite::extent::pointer_extents(&rewrite::Source::parse(&text), &[], "launch").is_empty());
    assert!(rewrite::extent::pointer_uses(&rewrite::Source::parse(&text), &[], "launch").is_empty());
    assert!(rewrite::extent::scalar_uses(&rewrite::Source::parse(&text), &[], "launch").is_empty());
    assert!(rewrite::extent::pointer_stores(&rewrite::Source::parse(&text), &[], "launch").is_empty());
}

#[test]
fn every_real_kernel_with_every_recipe() {
    // Two threads, as CI has two cores: this is the slowest test of the crate, and it runs
    // alone once the others in this file have finished.
    let kernels = real_kernels();
    std::thread::scope(|s| {
        for first in 0..2 {
            let kernels = &kernels;
            s.spawn(move || {
                for (text, facts) in kernels.iter().skip(first).step_by(2) {
                    every_recipe(text, facts);
                }
            });
        }
    });
}
