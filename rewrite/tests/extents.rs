//! The extent analysis on the annotated test kernels in `tests/kernels/` (written for the
//! recipe tests by someone who never saw this analysis): wherever it derives a length from
//! a kernel's indexing, that length is the one the file's header declares, at every size
//! tried; where it cannot, it says why.

mod common;

use common::kernels;
use rewrite::extent::{pointer_extents, Extent};
use rewrite::Source;
use std::collections::BTreeMap;

/// The header's declared lengths (`// arg: NAME in|out|inout TYPE LENGTH [tolerance R A]`) and the
/// integer arguments' names.
fn declared(text: &str) -> (String, BTreeMap<String, String>, Vec<String>) {
    let mut entry = String::new();
    let mut lens = BTreeMap::new();
    let mut ints = Vec::new();
    for line in text.lines() {
        if let Some(e) = line.strip_prefix("// entry:") {
            entry = e.trim().to_string();
        }
        let Some(rest) = line.strip_prefix("// arg:") else { continue };
        let w: Vec<&str> = rest.split_whitespace().collect();
        match w.get(1) {
            Some(&("in" | "out" | "inout")) => {
                // The length runs to the end, or to an output's own `tolerance RTOL ATOL`.
                let end = w.iter().position(|x| *x == "tolerance").unwrap_or(w.len());
                lens.insert(w[0].to_string(), w[3..end].join(" "));
            }
            Some(&("int" | "long")) => ints.push(w[0].to_string()),
            _ => {}
        }
    }
    (entry, lens, ints)
}

#[test]
fn every_derived_length_is_the_declared_one() {
    let mut derived = 0;
    let mut unknown = Vec::new();
    let mut wrong = Vec::new();
    for (name, text) in kernels() {
        let (entry, lens, ints) = declared(&text);
        let src = Source::parse(&text);
        let extents = pointer_extents(&src, &[], &entry);
        assert_eq!(extents.len(), lens.len(), "{name}: one extent per pointer argument");
        for e in extents {
            let declared = &lens[&e.name];
            match e.extent {
                Extent::Derived { len, access, line } => {
                    derived += 1;
                    // Sizes that divide evenly wherever a declared length divides.
                    for base in [8i64, 24, 40] {
                        let vars: BTreeMap<String, i64> = ints
                            .iter()
                            .enumerate()
                            .map(|(i, v)| (v.clone(), base * (i as i64 + 1) + 16 * i as i64))
                            .collect();
                        let want = rewrite::corpus::eval(declared, &vars).unwrap();
                        let got = len.eval(&vars).unwrap();
                        if want != got {
                            wrong.push(format!(
                                "{name}: `{}` derived {} from `{access}` (line {line}), declared {declared}",
                                e.name,
                                len.render(&ints)
                            ));
                            break;
                        }
                    }
                }
                Extent::Unknown { why } => {
                    assert!(why.len() > 10, "{name}: `{}`: a reason: {why}", e.name);
                    unknown.push(format!("{name}: `{}`: {why}", e.name));
                }
            }
        }
    }
    println!("derived {derived}, unknown {}:\n{}", unknown.len(), unknown.join("\n"));
    assert!(wrong.is_empty(), "derived lengths that differ from the declared ones:\n{}", wrong.join("\n"));
    // 100 of the 109 buffers when this was written; the other 9 read indices from memory,
    // reassign their index variables or launch a grid that is no polynomial.
    assert!(derived >= 100, "derived only {derived} lengths:\n{}", unknown.join("\n"));
}
