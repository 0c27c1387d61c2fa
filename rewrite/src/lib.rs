//! Executable prescriptions: deterministic source-to-source rewrites of CUDA kernels, one
//! per expert fix that the diagnoses prescribe.
//!
//! A [`Source`] is the kernel file parsed with tree-sitter's CUDA grammar; recipes match
//! syntax (a flat thread index behind a bounds check, a shared-memory tree reduction, a
//! thread-per-output loop over contiguous memory...) and edit by byte range, so code they
//! do not touch keeps its text and comments. [`Facts`] carry what the task says (argument
//! types and roles, buffer lengths as C expressions over the launcher's parameters and
//! their largest values, the tolerance). Recipes are data, one table ([`recipes::ALL`]):
//! an id, the diagnosis tools it answers, whether it changes the work or only tunes how
//! it runs ([`RecipeKind`]), its parameters, and `apply`, which returns a
//! [`Rewrite`] or a [`NotApplicable`] that says why in a sentence.
//!
//! Where a rewrite needs an assumption, [`version`] keeps the original kernel as the
//! fallback and has the launcher check the assumption at run time; a loop whose row
//! pointer the launcher cannot name checks its alignment where it starts, with the
//! original loop as its fallback. Either way a fast path never narrows correctness. A match is a heuristic, not a proof: every child still passes the
//! correctness wall before it counts. Pure: no I/O, no processes, no GPU.

pub mod combine;
pub mod corpus;
pub mod dispatch;
pub mod edit;
pub mod extent;
pub mod facts;
pub mod guards;
pub mod helpers;
pub mod knobs;
pub mod launch;
pub mod pattern;
pub mod poly;
pub mod precision;
pub mod recipe;
pub mod recipes;
pub mod source;
pub mod syntax;
pub mod version;

pub use facts::{ArgFacts, ArgKind, Facts, FactsBuilder, Len, Role, Tolerance};
pub use knobs::{knobs, Knob};
pub use recipe::{Application, Applied, NotApplicable, ParamSpec, Params, Recipe, RecipeId, RecipeKind, Rewrite};
pub use source::Source;

use source::Kernel;

/// Applies one recipe application to a source text.
pub fn apply(app: &Application, source: &str, facts: &Facts) -> Applied {
    let src = Source::parse(source);
    let recipe = recipes::get(app.recipe);
    let r = recipe.run(&src, facts, &app.params)?;
    if r.source == source {
        return Err(NotApplicable::new("the rewrite changed nothing"));
    }
    Ok(r)
}

/// The kernels a recipe works on: those the launcher reaches outside fallback branches,
/// or the one `kernel=NAME` names (by its own name or the kernel it is the fast path of).
pub fn target_kernels(src: &Source, params: &Params) -> Result<Vec<Kernel>, NotApplicable> {
    let all = src.primary_kernels();
    if all.is_empty() {
        return Err(NotApplicable::new(if src.kernels().is_empty() {
            "the file defines no __global__ kernel".to_string()
        } else {
            "no kernel of this file is launched (`<<<...>>>`) from a host function in it".to_string()
        }));
    }
    match params.kernel() {
        None => Ok(all),
        Some(name) => {
            let picked: Vec<Kernel> =
                all.iter().filter(|k| k.name == name || k.fast_of.as_deref() == Some(name)).cloned().collect();
            if picked.is_empty() {
                Err(NotApplicable::new(format!(
                    "no launched kernel named `{name}` (launched: {})",
                    all.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", ")
                )))
            } else {
                Ok(picked)
            }
        }
    }
}

/// The launcher argument (position in the task's call order) that kernel parameter
/// `param` receives, when a launch passes it straight through from the entry.
pub fn launcher_arg(src: &Source, facts: &Facts, k: &Kernel, param: &str) -> Option<usize> {
    let idx = k.param_index(param)?;
    let hosts = src.host_functions();
    let entry = hosts.iter().find(|h| h.name == facts.entry)?;
    let mut found = None;
    for l in src.launches_of(&k.name) {
        if l.host != entry.name {
            return None;
        }
        let a = l.arg(idx)?.trim();
        let pos = entry.params.iter().position(|p| p == a)?;
        if found.is_some_and(|f| f != pos) {
            return None;
        }
        found = Some(pos);
    }
    found
}

/// The entry's parameter names, for substituting into length expressions.
pub fn entry_params(src: &Source, facts: &Facts) -> Option<Vec<String>> {
    src.host_functions().into_iter().find(|h| h.name == facts.entry).map(|h| h.params)
}
