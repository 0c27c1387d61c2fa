//! The ncu parser and the tools survive arbitrary and truncated input.

use proptest::prelude::*;

fn sample() -> String {
    std::fs::read_to_string(format!("{}/../tests/fixtures/h200/ncu_full_raw_all.csv", env!("CARGO_MANIFEST_DIR")))
        .unwrap()
}

fn run(text: &str) {
    if let Ok(profile) = heuristics::ncu::parse(text) {
        let report = heuristics::diagnose_profile(&profile, &[], None, &Default::default(), None);
        for k in &report.kernels {
            for d in &k.diagnoses {
                assert!(d.score.is_finite());
            }
        }
    }
    let _ = heuristics::ncu::parse_rules(text);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_text(s in "\\PC{0,400}") {
        run(&s);
        run(&format!("\"ID\",\"Kernel Name\"\n{s}"));
    }

    #[test]
    fn truncated_and_spliced_real_profiles(cut in 0usize..360_000, cut2 in 0usize..360_000, junk in "[0-9,\" n/a]{0,40}") {
        let text = sample();
        let a = cut.min(text.len());
        let b = cut2.min(text.len());
        let (lo, hi) = (a.min(b), a.max(b));
        let lo = (0..=lo).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        let hi = (hi..=text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
        run(&text[..lo]);
        run(&format!("{}{junk}{}", &text[..lo], &text[hi..]));
    }
}
