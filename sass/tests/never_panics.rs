//! The parser reads whatever text it is given without panicking.

use proptest::prelude::*;

fn fixture_lines() -> Vec<String> {
    let text =
        std::fs::read_to_string(format!("{}/../tests/fixtures/h200/nvdisasm.txt", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let mut lines: Vec<String> = text.lines().take(400).map(str::to_string).collect();
    let cubin = std::fs::read_to_string(format!(
        "{}/../tests/fixtures/h100/sass_async_bulk_wmma_spill.txt",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    lines.extend(cubin.lines().take(400).map(str::to_string));
    lines
}

fn check(text: &str) {
    let listing = sass::parse(text);
    for f in &listing.functions {
        let _ = sass::analyze(f);
        for i in &f.instructions {
            if let Some(k) = i.loc {
                assert!((k as usize) < f.locations.len(), "interned location index in range");
            }
        }
    }
    let _ = sass::ptxas::parse_ptxas(text);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        check(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn sass_shaped_noise(s in "(/\\*[0-9a-f]{0,5}\\*/ *(@!?U?P[0-9T] )?[A-Z]{1,6}(\\.[A-Z0-9]{1,4}){0,3} [^;\\n]{0,20};?\\n|//## File \"[a-z/.]{0,8}\", line [0-9]{0,4}( inlined at \"x\", line 1)?\\n|\\.L_x_[0-9]:\\n|Function : [a-z_]{0,5}\\n|//-{0,22} \\.text\\.[a-z]{0,4} -*\\n|`\\(\\.L_x_[0-9]\\)\\n){0,40}") {
        check(&s);
    }

    #[test]
    fn mutated_real_listings(picks in prop::collection::vec((0usize..800, 0usize..200, 0u8..4), 1..120)) {
        let lines = fixture_lines();
        let mut out = String::new();
        for (line, cut, mode) in picks {
            let l = &lines[line % lines.len()];
            let cut = l.char_indices().map(|(i, _)| i).nth(cut % (l.chars().count().max(1))).unwrap_or(0);
            match mode {
                0 => out.push_str(l),
                1 => out.push_str(&l[..cut]),
                2 => out.push_str(&l[cut..]),
                _ => { out.push_str(&l[..cut]); out.push_str(&l[..cut]); }
            }
            out.push('\n');
        }
        check(&out);
    }
}
