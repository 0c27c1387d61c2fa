//! Versioning: a fast path never narrows correctness. A recipe that needs an assumption
//! (32-bit indices, aligned pointers, a bounded extent) rewrites a copy of the kernel,
//! `NAME_fast`, and every launch becomes
//!
//! ```text
//! if (/* nightshift: fast path */ (assumption) && ...) {
//!   NAME_fast<<<...>>>(...);
//! } else {
//!   NAME<<<...>>>(...);          // the kernel as it was
//! }
//! ```
//!
//! Later recipes rewrite the fast copy in place and add their assumptions to the same
//! condition, so a file holds at most the original and one fast copy per kernel. A
//! recipe that needs no assumption edits the kernel (the fast copy where there is one)
//! in place.

use crate::edit::Edits;
use crate::recipe::NotApplicable;
use crate::source::{Kernel, Launch, Source, FAST_MARK, GUARD_MARK};
use crate::syntax::{indent_at, reindent};

/// A definition the rewritten code needs once per file (device or host helpers).
#[derive(Debug)]
pub struct Helper {
    /// The macro that marks it present.
    pub mark: &'static str,
    pub text: &'static str,
}

/// A function of the launch's old grid (or block) expression.
pub type ConfigMap = Box<dyn Fn(&str) -> String>;

/// One kernel's share of a rewrite.
pub struct Change<'k> {
    pub kernel: &'k Kernel,
    /// Edits inside the kernel's definition, at offsets of the source.
    pub edits: Edits,
    /// Conditions for the fast path over the kernel's parameters written `{name}`; the
    /// launcher evaluates them with the launch's arguments. Empty: no assumption.
    pub guards: Vec<String>,
    pub grid: Option<ConfigMap>,
    /// A new y extent of the grid from the old one (the grid must be a `dim3`).
    pub grid_y: Option<ConfigMap>,
    pub block: Option<ConfigMap>,
    /// Arguments appended to every launch: host expressions over the kernel's
    /// parameters written `{name}`.
    pub extra_args: Vec<String>,
    pub helpers: Vec<&'static Helper>,
    /// Text put at file scope just before the kernel (macros the kernel and its launch
    /// share).
    pub before: String,
}

impl<'k> Change<'k> {
    pub fn new(kernel: &'k Kernel) -> Change<'k> {
        Change {
            kernel,
            edits: Edits::new(),
            guards: Vec::new(),
            grid: None,
            grid_y: None,
            block: None,
            extra_args: Vec::new(),
            helpers: Vec::new(),
            before: String::new(),
        }
    }
}

/// `{name}` replaced by the launch's argument for kernel parameter `name`; `{@grid}` and
/// `{@block}` by this launch's grid and block (their x extents), `{@grid.y}`,
/// `{@block.z}`... by one axis's extent (`block.y` for a `dim3` variable, `1` for a number).
pub fn bind(src: &Source, template: &str, kernel: &Kernel, launch: &Launch) -> Result<String, NotApplicable> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}').map(|c| c + open) else {
            out.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let name = &rest[open + 1..close];
        if let Some(which) = name.strip_prefix('@') {
            let v = launch_extent(src, launch, which)?;
            out.push('(');
            out.push_str(&v);
            out.push(')');
            rest = &rest[close + 1..];
            continue;
        }
        let arg = kernel.param_index(name).and_then(|i| launch.arg(i)).ok_or_else(|| {
            NotApplicable::new(format!("the launch of `{}` passes no argument for `{name}`", kernel.name))
        })?;
        out.push('(');
        out.push_str(arg);
        out.push(')');
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `grid`, `block`, `grid.y`...: the launch's extent a `{@...}` placeholder names.
fn launch_extent(src: &Source, launch: &Launch, which: &str) -> Result<String, NotApplicable> {
    let (part, axis) = match which.split_once('.') {
        Some((p, a)) => (p, crate::launch::AXES.iter().position(|x| a == x.to_string())),
        None => (which, None),
    };
    let (dims, i) = match part {
        "grid" => (crate::launch::grid(src, launch), 0),
        "block" => (crate::launch::block(src, launch), 1),
        _ => return Err(NotApplicable::new(format!("no launch extent is called `{which}`"))),
    };
    let written = launch.config.get(i);
    let (Some(dims), Some(written)) = (dims, written) else {
        return Err(NotApplicable::new(format!("the launch of `{}` names no {part} size", launch.kernel)));
    };
    match axis {
        None => Ok(dims.x_extent(written)),
        Some(a) => dims.extent(a).ok_or_else(|| {
            NotApplicable::new(format!(
                "the {part} of a launch of `{}` is `{written}`, whose type is unknown",
                launch.kernel
            ))
        }),
    }
}

/// A condition as a person reads it: the launch's grid and block by name, parameters bare.
pub fn shown(guard: &str) -> String {
    guard.replace("{@", "").replace(['{', '}'], "")
}

fn fast_name(src: &Source, base: &str) -> String {
    let mut name = format!("{base}_fast");
    let mut n = 2;
    while src.defines(&name) {
        name = format!("{base}_fast{n}");
        n += 1;
    }
    name
}

/// Where file-scope text goes above `k`: above its fast-path mark where it is a fast copy,
/// since the mark must stay on the line right before the definition it names.
fn above_mark(text: &str, k: &Kernel) -> usize {
    if k.fast_of.is_none() {
        return k.range.start;
    }
    let before = text[..k.range.start].trim_end();
    before.rfind('\n').map_or(0, |i| i + 1)
}

/// The source with every change made; fails only if edits collide.
pub fn apply(src: &Source, changes: Vec<Change>) -> Result<String, NotApplicable> {
    let text = src.text();
    let mut edits = Edits::new();
    let mut helpers: Vec<&'static Helper> = Vec::new();
    for change in changes {
        for h in &change.helpers {
            if !helpers.iter().any(|x| x.mark == h.mark) {
                helpers.push(h);
            }
        }
        let k = change.kernel;
        let launches = src.launches_of(&k.name);
        if launches.is_empty() {
            return Err(NotApplicable::new(format!("`{}` is not launched from host code in this file", k.name)));
        }
        let versioned = !change.guards.is_empty();
        let already_fast = k.fast_of.is_some() || launches.iter().all(|l| l.guard.is_some());
        if versioned && !already_fast {
            // A fast copy beside the original, and a guarded launch.
            let name = fast_name(src, &k.name);
            let mut inner = change.edits.within(&k.range);
            inner.replace(k.name_range.start - k.range.start..k.name_range.end - k.range.start, name.clone());
            let copy = inner.apply(&text[k.range.clone()]).map_err(|o| overlap(k, o))?;
            let note = format!(
                "\n\n{FAST_MARK}{} (the launcher falls back to it unless: {})\n",
                k.name,
                change.guards.iter().map(|g| shown(g)).collect::<Vec<_>>().join(" && ")
            );
            let mut block = String::new();
            if !change.before.is_empty() {
                block.push_str("\n\n");
                block.push_str(change.before.trim_end());
            }
            block.push_str(&note);
            block.push_str(&copy);
            edits.insert(k.range.end, block);
            for l in &launches {
                let stmt = &text[l.stmt.clone()];
                let ind = indent_at(text, l.stmt.start);
                let cond = change
                    .guards
                    .iter()
                    .map(|g| bind(src, g, k, l).map(|b| format!("({b})")))
                    .collect::<Result<Vec<_>, _>>()?
                    .join(" && ");
                let fast = launch_text(src, text, l, &name, &change, k)?;
                let body = format!("if ({GUARD_MARK} {cond}) {{\n  {fast}\n}} else {{\n  {}\n}}", reindent(stmt, "  "));
                edits.replace(l.stmt.clone(), reindent(&body, &ind));
            }
        } else {
            edits.extend(change.edits.within(&(0..text.len())));
            if !change.before.is_empty() {
                edits.insert(above_mark(text, k), format!("{}\n\n", change.before.trim_end()));
            }
            for l in &launches {
                if versioned {
                    let g = l.guard.as_ref().ok_or_else(|| {
                        NotApplicable::new(format!("a launch of `{}` is not behind its fast-path check", k.name))
                    })?;
                    let add = change
                        .guards
                        .iter()
                        .map(|c| bind(src, c, k, l).map(|b| format!(" && ({b})")))
                        .collect::<Result<String, _>>()?;
                    edits.insert(g.cond.end, add);
                }
                if change.grid.is_some() || change.grid_y.is_some() {
                    edits.replace(l.config_ranges[0].clone(), map_grid(src, l, &change)?);
                }
                if let Some(f) = &change.block {
                    let r =
                        l.config_ranges.get(1).ok_or_else(|| NotApplicable::new("the launch names no block size"))?;
                    edits.replace(r.clone(), f(&l.config[1]));
                }
                if !change.extra_args.is_empty() {
                    let extra = change.extra_args.iter().map(|a| bind(src, a, k, l)).collect::<Result<Vec<_>, _>>()?;
                    let sep = if l.args.is_empty() { "" } else { ", " };
                    edits.insert(l.args_range.end - 1, format!("{sep}{}", extra.join(", ")));
                }
            }
        }
    }
    let missing: Vec<&Helper> =
        helpers.into_iter().filter(|h| !text.contains(&format!("#define {}", h.mark))).collect();
    if !missing.is_empty() {
        let mut block = String::new();
        for h in missing {
            block.push_str(&format!("#ifndef {m}\n#define {m}\n{}\n#endif  // {m}\n\n", h.text.trim(), m = h.mark));
        }
        edits.insert(src.prelude_offset(), block);
    }
    edits
        .apply(text)
        .map_err(|o| NotApplicable::new(format!("two rewrites of this file overlap at bytes {:?}", o.second)))
}

fn overlap(k: &Kernel, o: crate::edit::Overlap) -> NotApplicable {
    NotApplicable::new(format!("two rewrites of `{}` overlap at bytes {:?} and {:?} of it", k.name, o.first, o.second))
}

/// A new grid from the old one: a number maps directly; a dim3 maps its x extent and
/// keeps y and z, or maps its y extent too (component by component as the launch names
/// them: `grid.y`, a `dim3(...)`'s own argument). A grid whose type the file does not
/// show is declined, since code written for the wrong one does not build.
fn map_grid(src: &Source, l: &Launch, change: &Change) -> Result<String, NotApplicable> {
    let g = &l.config[0];
    let dims = crate::launch::grid(src, l);
    match (&dims, &change.grid_y) {
        (Some(d @ crate::launch::Dims::Dim3(_)), Some(fy)) => {
            let axis = |a: usize| d.extent(a).unwrap_or_else(|| format!("({g}).{}", crate::launch::AXES[a]));
            let x = match &change.grid {
                Some(f) => f(&axis(0)),
                None => axis(0),
            };
            Ok(format!("dim3({x}, {}, {})", fy(&axis(1)), axis(2)))
        }
        (Some(crate::launch::Dims::Unknown { expr, why }), _) => Err(NotApplicable::new(format!(
            "the grid of a launch of `{}` is `{expr}`, {why}, so it cannot be rescaled as a number or a dim3",
            l.kernel
        ))),
        (_, Some(_)) => Err(NotApplicable::new(format!(
            "the grid of a launch of `{}` is the number `{g}`, which has no y extent to rescale",
            l.kernel
        ))),
        (Some(crate::launch::Dims::Dim3(_)), None) => {
            let f = change.grid.as_ref().ok_or_else(|| NotApplicable::new("no grid change"))?;
            Ok(format!("dim3({}, ({g}).y, ({g}).z)", f(&format!("({g}).x"))))
        }
        _ => {
            let f = change.grid.as_ref().ok_or_else(|| NotApplicable::new("no grid change"))?;
            Ok(f(g))
        }
    }
}

/// The launch statement for the fast copy: new name, configuration and arguments.
fn launch_text(
    src: &Source,
    text: &str,
    l: &Launch,
    name: &str,
    change: &Change,
    k: &Kernel,
) -> Result<String, NotApplicable> {
    let mut e = Edits::new();
    let base = l.stmt.start;
    e.replace(l.name_range.start - base..l.name_range.end - base, name);
    if change.grid.is_some() || change.grid_y.is_some() {
        let r = &l.config_ranges[0];
        e.replace(r.start - base..r.end - base, map_grid(src, l, change)?);
    }
    if let Some(f) = &change.block {
        let r = l.config_ranges.get(1).ok_or_else(|| NotApplicable::new("the launch names no block size"))?;
        e.replace(r.start - base..r.end - base, f(&l.config[1]));
    }
    if !change.extra_args.is_empty() {
        let extra = change.extra_args.iter().map(|a| bind(src, a, k, l)).collect::<Result<Vec<_>, _>>()?;
        let sep = if l.args.is_empty() { "" } else { ", " };
        e.insert(l.args_range.end - 1 - base, format!("{sep}{}", extra.join(", ")));
    }
    e.apply(&text[l.stmt.clone()]).map_err(|_| NotApplicable::new("the launch could not be rewritten"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"#include <cuda_runtime.h>

__global__ void scale(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.f * x[i];
}

extern "C" void run(float* y, const float* x, int n, cudaStream_t s) {
  scale<<<(n + 255) / 256, 256, 0, s>>>(y, x, n);
}
"#;

    #[test]
    fn a_guarded_change_copies_the_kernel_and_versions_the_launch() {
        let src = Source::parse(SRC);
        let k = src.kernel("scale").unwrap();
        let mut c = Change::new(&k);
        let two = src.text().find("2.f").unwrap();
        c.edits.replace(two..two + 3, "2.0f");
        c.guards.push("{n} % 4 == 0".into());
        c.grid = Some(Box::new(|g| format!("({g} + 3) / 4")));
        c.extra_args.push("{n} / 4".into());
        let out = apply(&src, vec![c]).unwrap();
        let s = Source::parse(&out);
        let names: Vec<String> = s.kernels().into_iter().map(|k| k.name).collect();
        assert_eq!(names, ["scale", "scale_fast"]);
        assert!(out.contains("y[i] = 2.f * x[i]"), "the original stays as it was:\n{out}");
        assert!(out.contains("y[i] = 2.0f * x[i]"), "{out}");
        assert!(out.contains("if (/* nightshift: fast path */ ((n) % 4 == 0))"), "{out}");
        assert!(out.contains("scale_fast<<<((n + 255) / 256 + 3) / 4, 256, 0, s>>>(y, x, n, (n) / 4);"), "{out}");
        assert!(out.contains("scale<<<(n + 255) / 256, 256, 0, s>>>(y, x, n);"), "{out}");
        let l = s.launches();
        assert!(l[0].guard.is_some() && l[1].fallback);
        assert_eq!(s.primary_kernels()[0].name, "scale_fast");

        // A second guarded change edits the copy and adds to the condition.
        let k2 = s.kernel("scale_fast").unwrap();
        let mut c2 = Change::new(&k2);
        c2.guards.push("{n} < 1000000".into());
        let out2 = apply(&s, vec![c2]).unwrap();
        assert!(out2.contains("((n) % 4 == 0) && ((n) < 1000000))"), "{out2}");
        assert_eq!(Source::parse(&out2).kernels().len(), 2);
    }

    static TEST_HELPER: Helper = Helper { mark: "NS_TEST_HELPER", text: "// helper" };

    #[test]
    fn an_unguarded_change_edits_in_place() {
        let src = Source::parse(SRC);
        let k = src.kernel("scale").unwrap();
        let mut c = Change::new(&k);
        c.block = Some(Box::new(|_| "128".into()));
        c.helpers.push(&TEST_HELPER);
        let out = apply(&src, vec![c]).unwrap();
        assert!(out.contains("scale<<<(n + 255) / 256, 128, 0, s>>>(y, x, n);"), "{out}");
        assert!(out.contains("#ifndef NS_TEST_HELPER"));
        assert_eq!(Source::parse(&out).kernels().len(), 1);
        // Helpers go in once.
        let s2 = Source::parse(&out);
        let k2 = s2.kernel("scale").unwrap();
        let mut c2 = Change::new(&k2);
        c2.helpers.push(&TEST_HELPER);
        let again = apply(&s2, vec![c2]).unwrap();
        assert_eq!(again.matches("#ifndef NS_TEST_HELPER").count(), 1);
    }
}
