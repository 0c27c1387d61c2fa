//! Recipes under a launch reshaping. `coarsen` makes a block do the work of several: its
//! kernel indexes through a coarse block number (`ns_bx`) rather than `blockIdx.x`, and
//! the recipes that read a kernel's own indexing (`fast-divmod`, `vectorize`,
//! `index-width`, `cooperative`, `grid-stride`) decline on it. A recipe tried before it
//! may have lost where it pays after it: on a causal convolution a faster division lost
//! 4% on the one-block kernel and paid on the coarse one. So the tuner rebuilds a parent
//! from the baseline along its path, and offers each recipe that declines on the parent
//! on the source before the reshaping, with the reshaping redone on top.
//!
//! The child's path lists the recipe after `coarsen`, where it was offered, though it went
//! on before it; a rebuild of the child follows the same rule and gives its source.
//!
//! Pure: recipes are applied to strings; nothing here reads or writes a file. A rebuild
//! that does not give the parent's source byte for byte (a path with an LLM's kernel, a
//! recipe changed since) offers nothing.

use super::tune::Family;
use rewrite::{Application, Facts, RecipeId, Source};
use std::collections::HashSet;

/// Recipes that reshape the launch around a kernel's work, and go on last.
const RESHAPING: &[RecipeId] = &[RecipeId::Coarsen];

/// A parent rebuilt from the baseline: its source before the reshaping recipes (with the
/// recipes that went on after them, under them), and the reshaping recipes to redo on top.
#[derive(Debug, Clone, PartialEq)]
pub struct Rebuilt {
    pub before: String,
    pub reshaping: Vec<Application>,
}

/// `source` rewritten by `app`, where the recipe applies and changes it (as the tuner
/// offers a recipe's child).
fn apply(facts: &Facts, source: &str, app: &Application) -> Option<String> {
    apply_parsed(facts, &Source::parse(source), app)
}

/// [`apply`] on a source parsed once for several recipes.
fn apply_parsed(facts: &Facts, source: &Source, app: &Application) -> Option<String> {
    let rw = rewrite::recipes::get(app.recipe).run(source, facts, &app.params).ok()?;
    (rw.source != source.text()).then_some(rw.source)
}

/// `before` with every application of `reshaping` redone on top, in order.
fn redo(facts: &Facts, before: &str, reshaping: &[Application]) -> Option<String> {
    reshaping.iter().try_fold(before.to_string(), |s, app| apply(facts, &s, app))
}

/// The parent at the end of `path` (its techniques from the baseline, in order) rebuilt
/// from `baseline`, where its path has a reshaping recipe and the rebuild gives
/// `parent_source` exactly. A recipe after the reshaping went on the reshaped source where
/// it applies there (the tuner's direct child; unless it gives the same source under the
/// reshaping, nothing goes under it any more), else under it (a child this module offered).
pub fn rebuild(facts: &Facts, baseline: &str, path: &[String], parent_source: &str) -> Option<Rebuilt> {
    let apps: Vec<Option<Application>> = path
        .iter()
        .map(|t| match t.parse::<Family>() {
            Ok(Family::Recipe(_)) => t.parse::<Application>().ok().map(Some),
            // Knobs, shapes and flags leave the source alone.
            Ok(Family::Knob(_) | Family::Flag(_) | Family::Shape(_)) => Some(None),
            // A kernel written anew (an LLM's, the library-free start): no rebuild.
            Err(_) => None,
        })
        .collect::<Option<_>>()?;
    let apps: Vec<Application> = apps.into_iter().flatten().collect();
    if !apps.iter().any(|a| RESHAPING.contains(&a.recipe)) {
        return None;
    }
    let mut at = Rebuilt { before: baseline.to_string(), reshaping: Vec::new() };
    for app in apps {
        if RESHAPING.contains(&app.recipe) {
            at.reshaping.push(app);
        } else if at.reshaping.is_empty() {
            at.before = apply(facts, &at.before, &app)?;
        } else {
            let reshaped = redo(facts, &at.before, &at.reshaping)?;
            let under = apply(facts, &at.before, &app);
            match apply(facts, &reshaped, &app) {
                // A recipe that commutes with the reshaping (`intrinsics` edits calls the
                // coarse loop copies alike) stays under it, so later ones can go there too.
                Some(direct)
                    if under.as_deref().and_then(|u| redo(facts, u, &at.reshaping)).as_deref() == Some(&direct) =>
                {
                    at.before = under?
                }
                Some(direct) => at = Rebuilt { before: direct, reshaping: Vec::new() },
                None => at.before = under?,
            }
        }
    }
    (!at.reshaping.is_empty() && redo(facts, &at.before, &at.reshaping)? == parent_source).then_some(at)
}

/// Each recipe application that changes `rebuilt.before` and survives the reshaping redone
/// on top, as the child it makes, but for those in `offered` (the applications that
/// apply to the parent directly) and the reshaping recipes themselves.
pub fn under_reshaping(
    facts: &Facts,
    rebuilt: &Rebuilt,
    parent_source: &str,
    offered: &HashSet<String>,
) -> Vec<(Application, String)> {
    let mut out = Vec::new();
    let before = Source::parse(&rebuilt.before);
    for r in rewrite::recipes::ALL.iter().filter(|r| !RESHAPING.contains(&r.id)) {
        for params in r.variants() {
            let app = Application { recipe: r.id, params };
            if offered.contains(&app.to_string()) {
                continue;
            }
            let Some(source) = apply_parsed(facts, &before, &app).and_then(|s| redo(facts, &s, &rebuilt.reshaping))
            else {
                continue;
            };
            if source != parent_source {
                out.push((app, source));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Task;

    fn example(name: &str) -> (Facts, String) {
        let t = Task::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name)).unwrap();
        (crate::task::facts::rewrite_facts(&t), std::fs::read_to_string(&t.baseline).unwrap())
    }

    fn chain(facts: &Facts, baseline: &str, path: &[&str]) -> String {
        let path: Vec<String> = path.iter().map(|t| t.to_string()).collect();
        crate::generate::tune::recipes_on_path(&path).iter().fold(baseline.to_string(), |s, t| {
            apply(facts, &s, &t.parse().unwrap()).unwrap_or_else(|| panic!("{t} does not apply"))
        })
    }

    #[test]
    fn a_division_declined_on_coarse_blocks_goes_under_coarsen() {
        let (facts, baseline) = example("causal_conv1d");
        let path: Vec<String> = [
            "vectorize:width=16",
            "intrinsics:fn=div",
            "read-only:mode=restrict",
            "index-width:type=int",
            "flag:use_fast_math=on",
            "coarsen:blocks=2",
        ]
        .map(String::from)
        .to_vec();
        let steps: Vec<&str> = path.iter().map(String::as_str).collect();
        let parent = chain(&facts, &baseline, &steps);
        let divmod: Application = "fast-divmod".parse().unwrap();
        assert!(apply(&facts, &parent, &divmod).is_none(), "fast-divmod applies to the coarse kernel itself");
        let rebuilt = rebuild(&facts, &baseline, &path, &parent).expect("the path rebuilds the parent");
        assert_eq!(rebuilt.reshaping, ["coarsen:blocks=2".parse::<Application>().unwrap()]);
        let under = under_reshaping(&facts, &rebuilt, &parent, &HashSet::new());
        let (_, child) = under.iter().find(|(a, _)| *a == divmod).expect("fast-divmod under coarsen");
        assert!(child.contains("ns_make_divisor(") && child.contains("ns_bx"), "{child}");
        // The child's own path rebuilds it, with the division under the reshaping.
        let mut below = path.clone();
        below.push("fast-divmod".into());
        let again = rebuild(&facts, &baseline, &below, child).expect("the child's path rebuilds it");
        assert_eq!(again.reshaping, rebuilt.reshaping);
        assert!(again.before.contains("ns_make_divisor("));
        // What applies to the parent directly is the tuner's own move, not offered here.
        let offered = HashSet::from(["fast-divmod".to_string()]);
        let rest = under_reshaping(&facts, &rebuilt, &parent, &offered);
        assert!(!rest.iter().any(|(a, _)| *a == divmod) && rest.len() + 1 == under.len());
    }

    #[test]
    fn a_recipe_after_coarsen_stays_under_it_where_it_commutes_and_ends_the_rebuild_where_not() {
        let (facts, baseline) = example("causal_conv1d");
        let rebuilt = |path: &[&str]| {
            let parent = chain(&facts, &baseline, path);
            let path: Vec<String> = path.iter().map(|t| t.to_string()).collect();
            rebuild(&facts, &baseline, &path, &parent).map(|r| (r, parent))
        };
        // `intrinsics` edits calls, which the coarse loop copies alike: either order gives
        // one source, and a division can still go under the coarse blocks.
        let (r, parent) = rebuilt(&["vectorize:width=16", "coarsen:blocks=2", "intrinsics:fn=exp"]).unwrap();
        assert!(r.before.contains("__expf(") && !r.before.contains("ns_bx"), "{}", r.before);
        assert_eq!(r.reshaping, ["coarsen:blocks=2".parse::<Application>().unwrap()]);
        let divmod: Application = "fast-divmod".parse().unwrap();
        assert!(under_reshaping(&facts, &r, &parent, &HashSet::new()).iter().any(|(a, _)| *a == divmod));
        // `read-only` on coarse blocks gives another source than under them: the parent
        // is the reshaped kernel, rewritten, and nothing goes under the reshaping any more.
        assert_eq!(rebuilt(&["coarsen:blocks=2", "read-only:mode=restrict"]), None);
    }

    #[test]
    fn nothing_is_rebuilt_without_a_reshaping_or_from_a_kernel_written_anew() {
        let (facts, baseline) = example("causal_conv1d");
        let plain = vec!["vectorize:width=16".to_string()];
        let vectorized = chain(&facts, &baseline, &["vectorize:width=16"]);
        assert_eq!(rebuild(&facts, &baseline, &plain, &vectorized), None, "no reshaping on the path");
        let coarse = vec!["vectorize:width=16".to_string(), "coarsen:blocks=2".to_string()];
        let parent = chain(&facts, &baseline, &["vectorize:width=16", "coarsen:blocks=2"]);
        assert!(rebuild(&facts, &baseline, &coarse, &parent).is_some());
        let edited = parent.replace("ns_bx", "ns_bx ");
        assert_eq!(rebuild(&facts, &baseline, &coarse, &edited), None, "a source the path does not give");
        let written = vec!["llm:tiled".to_string(), "coarsen:blocks=2".to_string()];
        assert_eq!(rebuild(&facts, &baseline, &written, &parent), None, "a kernel written anew");
    }
}
