//! Every recipe on the annotated test kernels in `tests/kernels/` (written for these
//! tests, not from the task suite): it applies where the file says so and changes the
//! source, and it declines with a reason where its pattern is absent; where the header
//! quotes the description or the reason, word for word.

mod common;

use common::kernels;
use rewrite::corpus::{self, Expect};
use rewrite::{recipes, Application, Params, RecipeId};
use std::collections::BTreeMap;

#[test]
fn every_recipe_meets_the_expectations_of_the_test_kernels() {
    let mut failures = Vec::new();
    let mut counts: BTreeMap<RecipeId, (usize, usize)> = BTreeMap::new();
    for (name, text) in kernels() {
        let a = corpus::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (id, expect) in &a.expects {
            let app = Application { recipe: *id, params: Params::default() };
            let got = rewrite::apply(&app, &text, &a.facts);
            if let Some(want) = a.says.get(id) {
                let said = match &got {
                    Ok(r) => &r.description,
                    Err(why) => &why.0,
                };
                if said != want {
                    failures.push(format!("{name}: {id} should say\n    {want}\n  but says\n    {said}"));
                }
            }
            match (expect, &got) {
                (Expect::Applies, Ok(r)) => {
                    assert!(!r.description.is_empty(), "{name}: {id} gave no description");
                    counts.entry(*id).or_default().0 += 1;
                }
                (Expect::Declines, Err(why)) => {
                    assert!(why.0.len() > 10, "{name}: {id} declined without a reason: {why:?}");
                    counts.entry(*id).or_default().1 += 1;
                }
                (Expect::Applies, Err(why)) => failures.push(format!("{name}: {id} should apply but declined: {why}")),
                (Expect::Declines, Ok(r)) => {
                    failures.push(format!("{name}: {id} should decline but applied: {}", r.description))
                }
            }
        }
    }
    for r in recipes::ALL {
        let (applies, declines) = counts.get(&r.id).copied().unwrap_or_default();
        println!("{:<15} applies on {applies:>2} test kernels, declines on {declines:>2}", r.id.as_str());
        if applies < 3 || declines < 1 {
            failures.push(format!(
                "{}: needs >= 3 kernels it applies to and >= 1 it declines (has {applies}, {declines})",
                r.id
            ));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn rewrites_reparse_without_errors_and_keep_untouched_text() {
    for (name, text) in kernels() {
        let a = corpus::parse(&text).unwrap();
        for r in recipes::ALL {
            let Ok(out) = rewrite::apply(&Application { recipe: r.id, params: Params::default() }, &text, &a.facts)
            else {
                continue;
            };
            let s = rewrite::Source::parse(&out.source);
            assert!(!s.root().has_error(), "{name}: {} produced text the parser rejects:\n{}", r.id, out.source);
            // The header comment survives every rewrite.
            assert!(out.source.starts_with(text.lines().next().unwrap()), "{name}: {}", r.id);
        }
    }
}
