//! Run-time conditions shared by recipes: every buffer a kernel receives is shorter than a
//! limit (so 32-bit indices cannot overflow), the launch's thread count is below one.
//! They are written in the launcher's own names, from the task's length expressions.

use crate::facts::Facts;
use crate::launch::{self, Dims};
use crate::recipe::NotApplicable;
use crate::source::{Kernel, Source};

/// The bytes the buffer behind `k`'s pointer parameter `name` spans, in the launcher's
/// names (its task length times its element size), for an overlap check (`ns_disjoint`).
pub fn buffer_bytes(src: &Source, facts: &Facts, k: &Kernel, name: &str) -> Result<String, NotApplicable> {
    let p = k.param(name).ok_or_else(|| NotApplicable::new(format!("`{name}` is not a parameter of `{}`", k.name)))?;
    let arg = crate::launcher_arg(src, facts, k, name).ok_or_else(|| {
        NotApplicable::new(format!(
            "`{name}` is not passed straight from a launcher argument, so overlap cannot be checked"
        ))
    })?;
    let len = crate::entry_params(src, facts).and_then(|n| facts.len_in(arg, &n)).ok_or_else(|| {
        NotApplicable::new(format!("the task gives no length for `{name}`, so overlap cannot be checked at run time"))
    })?;
    Ok(format!("({len}) * (long long)sizeof({})", p.base))
}

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

/// The launch's thread count at most `limit` at every launch, in the launch's own names:
/// `(long long)grid * block`, times `grid.y`, `block.y`... for every further axis the
/// kernel reads that some launch does not fix at 1, since a flat index over those axes
/// grows with all of them. Declines where a launch's grid or block has a type the file
/// does not show (a guard that multiplies a `dim3` does not build).
pub fn threads_below(src: &Source, k: &Kernel, limit: i64) -> Result<Vec<String>, NotApplicable> {
    let launches = src.launches_of(&k.name);
    if launches.is_empty() {
        return Ok(Vec::new());
    }
    let read = launch::axes_read(src, k);
    let mut grids = Vec::new();
    let mut blocks = Vec::new();
    for l in &launches {
        let (Some(g), Some(b)) = (launch::grid(src, l), launch::block(src, l)) else {
            return Err(NotApplicable::new(format!("a launch of `{}` names no block size", k.name)));
        };
        for (part, d) in [("grid", &g), ("block", &b)] {
            if let Dims::Unknown { expr, why } = d {
                return Err(NotApplicable::new(format!(
                    "the {part} of a launch of `{}` is `{expr}`, {why}, so a thread-count check cannot tell a number from a dim3",
                    k.name
                )));
            }
        }
        grids.push(g);
        blocks.push(b);
    }
    let mut factors = Vec::new();
    for axis in 1..3 {
        let c = launch::AXES[axis];
        if read.grid[axis] && grids.iter().any(|g| !g.is_one(axis)) {
            factors.push(format!("{{@grid.{c}}}"));
        }
        if read.block[axis] && blocks.iter().any(|b| !b.is_one(axis)) {
            factors.push(format!("{{@block.{c}}}"));
        }
    }
    // A 1-D launch reads as `grid * block`; with more axes, each is named.
    let x = if factors.is_empty() { ["{@grid}", "{@block}"] } else { ["{@grid.x}", "{@block.x}"] };
    factors.splice(0..0, x.iter().map(|f| f.to_string()));
    Ok(vec![format!("(long long){} <= {limit}LL", factors.join(" * "))])
}
