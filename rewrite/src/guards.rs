//! Run-time conditions shared by recipes: every buffer a kernel receives is shorter than a
//! limit (so 32-bit indices cannot overflow), the launch's thread count is below one.
//! They are written in the launcher's own names, from the task's length expressions.

use crate::facts::Facts;
use crate::recipe::NotApplicable;
use crate::source::{Kernel, Source};

/// Conditions that every buffer `k` receives holds at most `limit` elements, and that the
/// task's largest sizes satisfy them (else the fast path would never run).
pub fn buffers_below(src: &Source, facts: &Facts, k: &Kernel, limit: i64) -> Result<Vec<String>, NotApplicable> {
    let names = crate::entry_params(src, facts).ok_or_else(|| {
        NotApplicable::new(format!(
            "the launcher `{}` is not in this file, so buffer lengths cannot be checked",
            facts.entry
        ))
    })?;
    let mut out = Vec::new();
    for p in k.params.iter().filter(|p| p.pointer) {
        let arg = crate::launcher_arg(src, facts, k, &p.name).ok_or_else(|| {
            NotApplicable::new(format!(
                "`{}` of `{}` is not passed straight from a launcher argument, so its length is unknown",
                p.name, k.name
            ))
        })?;
        let len = facts.args.get(arg).and_then(|a| a.len()).ok_or_else(|| {
            NotApplicable::new(format!("the task gives no length for the buffer behind `{}`", p.name))
        })?;
        if len.max > limit {
            return Err(NotApplicable::new(format!(
                "the buffer behind `{}` reaches {} elements at the task's sizes, past the {limit} the fast path allows",
                p.name, len.max
            )));
        }
        let c = facts.len_in(arg, &names).ok_or_else(|| {
            NotApplicable::new(format!(
                "the length of the buffer behind `{}` is not an expression of the launcher's arguments",
                p.name
            ))
        })?;
        let g = format!("({c}) <= {limit}LL");
        if !out.contains(&g) {
            out.push(g);
        }
    }
    Ok(out)
}

/// `grid * block <= limit` at every launch (written with the launch's own grid and block).
pub fn threads_below(src: &Source, k: &Kernel, limit: i64) -> Vec<String> {
    let launches = src.launches_of(&k.name);
    if launches.is_empty() || launches.iter().any(|l| l.config.len() < 2 || l.config[1].contains("dim3")) {
        return Vec::new();
    }
    vec![format!("(long long){{@grid}} * {{@block}} <= {limit}LL")]
}
