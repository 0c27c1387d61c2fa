//! Invariants the orchestrator relies on, checked on randomly driven trees.

use proptest::prelude::*;
use search::rng::SplitMix64;
use search::{Config, Expansion, Intent, Outcome, Selection, Tree};

/// Drives `steps` evaluations in batches of `parallel`, with outcomes drawn from `r`.
/// Calls `check` after every selection and every recorded outcome.
fn drive(
    tree: &mut Tree<u32>,
    steps: usize,
    parallel: usize,
    r: &mut SplitMix64,
    mut check: impl FnMut(&Tree<u32>, Option<&Selection>),
) -> Vec<(usize, Expansion)> {
    let mut selections = Vec::new();
    let mut done = 0;
    while done < steps {
        let mut batch = Vec::new();
        for _ in 0..parallel {
            let Some(sel) = tree.select() else { break };
            check(tree, Some(&sel));
            selections.push((sel.parent, sel.kind));
            let technique = format!("t{}", r.below(6));
            let id = tree.add_pending(
                &sel,
                tree.node(sel.parent).payload + 1,
                Intent { technique, tool: Some("x".into()), ..Default::default() },
            );
            check(tree, None);
            batch.push(id);
        }
        if batch.is_empty() {
            break;
        }
        for id in batch {
            let outcome = if r.unit() < 0.3 {
                Outcome::failed("wrong-answer")
            } else {
                // Huge and tiny speedups alike: the wall must hold at the extremes.
                Outcome::correct(2f64.powf(3.0 * r.normal()))
            };
            tree.record(id, outcome);
            check(tree, None);
            done += 1;
        }
    }
    selections
}

fn config(pruning: bool) -> Config {
    Config { pruning, dead_end_failures: 2, stale_children: 3, ..Config::default() }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    #[test]
    fn no_incorrect_node_ever_outranks_a_correct_one(seed in any::<u64>(), parallel in 1usize..5) {
        let mut tree = Tree::new(0u32, config(true), seed);
        let mut r = SplitMix64::new(seed ^ 1);
        drive(&mut tree, 80, parallel, &mut r, |t, _| {
            assert!(t.best().is_correct());
            let ranking = t.ranking();
            let first_failed = ranking.iter().position(|id| t.node(*id).is_failed()).unwrap_or(ranking.len());
            assert!(ranking[first_failed..].iter().all(|id| t.node(*id).is_failed()), "every correct node ranks above every failed one");
            let worst_correct = ranking[..first_failed].iter().filter_map(|id| t.node(*id).reward).fold(f64::INFINITY, f64::min);
            let best_failed = ranking[first_failed..].iter().filter_map(|id| t.node(*id).reward).fold(f64::NEG_INFINITY, f64::max);
            assert!(worst_correct > best_failed);
        });
    }

    #[test]
    fn children_never_exceed_the_widening_bound(seed in any::<u64>(), parallel in 1usize..5) {
        let mut tree = Tree::new(0u32, config(false), seed);
        let mut r = SplitMix64::new(seed ^ 2);
        drive(&mut tree, 80, parallel, &mut r, |t, sel| {
            if let Some(s) = sel {
                assert!(t.widening_count(s.parent) < t.widening_limit(s.parent), "selected only with room to grow");
            }
            for n in t.nodes() {
                if n.is_failed() {
                    assert!(n.children.len() as u32 <= t.config.max_repairs, "bounded repairs");
                }
            }
        });
        // The bound itself: about k * visits^alpha.
        for n in tree.nodes().iter().filter(|n| n.is_correct()) {
            let k = tree.config.widen_k * tree.config.promising_boost;
            assert!(tree.widening_count(n.id) as f64 <= (k * (n.visits as f64).powf(tree.config.widen_alpha)).floor().max(1.0) + 1e-9);
        }
    }

    #[test]
    fn pruned_nodes_are_never_selected(seed in any::<u64>(), parallel in 1usize..5) {
        let mut tree = Tree::new(0u32, config(true), seed);
        let mut r = SplitMix64::new(seed ^ 3);
        drive(&mut tree, 120, parallel, &mut r, |t, sel| {
            if let Some(s) = sel {
                for id in t.lineage(s.parent) {
                    assert!(!t.node(id).closed, "selected through closed node {id}");
                }
            }
        });
    }

    #[test]
    fn the_same_seed_gives_the_same_selections(seed in any::<u64>()) {
        let run = |s: u64| {
            let mut tree = Tree::new(0u32, config(true), s);
            let mut r = SplitMix64::new(s ^ 4);
            drive(&mut tree, 60, 3, &mut r, |_, _| {})
        };
        prop_assert_eq!(run(seed), run(seed));
    }

    #[test]
    fn save_restore_continue_equals_never_stopping(seed in any::<u64>(), first in 1usize..40) {
        let mut tree = Tree::new(0u32, config(true), seed);
        let mut r = SplitMix64::new(seed ^ 5);
        drive(&mut tree, first, 2, &mut r, |_, _| {});
        let saved = serde_json::to_string(&tree).unwrap();
        let mut r_saved = r.clone();

        drive(&mut tree, 40, 2, &mut r, |_, _| {});
        let mut restored: Tree<u32> = serde_json::from_str(&saved).unwrap();
        drive(&mut restored, 40, 2, &mut r_saved, |_, _| {});
        prop_assert_eq!(serde_json::to_string(&tree).unwrap(), serde_json::to_string(&restored).unwrap());
    }
}

#[test]
fn pruning_closes_dead_ends_and_they_stay_closed() {
    let mut tree = Tree::new(0u32, Config { pruning: true, dead_end_failures: 2, ..Config::default() }, 1);
    // Root's first child is good; its children all fail.
    let sel = tree.select().unwrap();
    let good = tree.add_pending(&sel, 1, Intent::default());
    tree.record(good, Outcome::correct(2.0));
    let mut failures = 0;
    while !tree.node(good).closed && failures < 20 {
        let sel = tree.select().unwrap();
        let id = tree.add_pending(&sel, 2, Intent::default());
        if sel.parent == good && sel.kind == Expansion::Improve {
            tree.record(id, Outcome::failed("build-error"));
            failures += 1;
        } else {
            tree.record(id, Outcome::correct(1.0));
        }
    }
    assert!(tree.node(good).closed, "two failed children in a row close the node");
    assert!(tree.node(good).closed_because.as_deref().unwrap().contains("failed"));
    for _ in 0..50 {
        let Some(sel) = tree.select() else { break };
        assert_ne!(sel.parent, good);
        let id = tree.add_pending(&sel, 3, Intent::default());
        tree.record(id, Outcome::correct(1.1));
    }
    // The best node stays the good one even though it is closed.
    assert_eq!(tree.best().id, good);
}

#[test]
fn failed_nodes_are_offered_for_repair() {
    let mut tree = Tree::new(0u32, Config::default(), 3);
    let sel = tree.select().unwrap();
    let broken = tree.add_pending(&sel, 1, Intent { technique: "vectorize".into(), ..Default::default() });
    tree.record(broken, Outcome::failed("wrong-answer"));
    let mut repair = None;
    for _ in 0..10 {
        let sel = tree.select().unwrap();
        if sel.kind == Expansion::Repair {
            repair = Some(sel.parent);
            break;
        }
        let id = tree.add_pending(&sel, 2, Intent::default());
        // Siblings at half speed: a broken change (valued at parent - 0.5 log2 while it has
        // repairs left) is worth more than a kernel known to be 2x slower.
        tree.record(id, Outcome::correct(0.5));
    }
    assert_eq!(repair, Some(broken));
    assert!(tree.memory.summary(5).contains("vectorize: 1 tries, 0 correct"));
}
