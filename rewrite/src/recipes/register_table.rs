//! Register tables: a small buffer a kernel only reads, at positions fixed once its loops
//! are unrolled (a stencil's or a filter's weights, a polynomial's coefficients), is
//! loaded into a register array once per thread at the kernel's start, and those reads
//! take their values from the array.
//!
//! It pays where a thread reads the same element more than once: a read in a loop whose
//! counter its index does not use (the rows of a `row-strip` strip, a grid-stride loop)
//! loads every element again on each trip, and the compiler cannot share the loads
//! between trips that sit behind conditions (a stencil's border checks). A kernel whose
//! thread reads each element once is declined: the table would load the same. The
//! values are the ones the original reads, so the results are bit-identical.
//!
//! The table holds elements 0..K, K one past the largest index any read takes, found by
//! evaluating each index over the ranges of the compile-time loops it uses; those loops
//! get `#pragma unroll`, so the array is only indexed by constants (a run-time index
//! would put it in local memory). Loading elements the original may not read needs the
//! buffer to hold K elements: a task whose length for it is a constant of at least K
//! needs no check; any other length is checked by the launcher.

use super::row_strip::{const_loop, const_value, readonly_buffers, MAX_TRIP};
use super::window::launcher_length;
use super::Planned;
use crate::facts::{Facts, Role};
use crate::launch;
use crate::pattern::{int_literal, subscript_index};
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{self, descendants, indent_at, strip_parens, text, Unroll};
use crate::version::Change;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[];

/// Elements a table holds at most, and 32-bit registers it takes at most.
const MAX_ELEMS: i64 = 32;
const MAX_REGISTERS: i64 = 32;
/// Index evaluations per read (the product of its loops' trip counts).
const MAX_POINTS: i64 = 4096;

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    super::per_kernel(src, params, |k| plan(src, facts, k))
}

/// A read the table can serve.
struct Read {
    range: Range<usize>,
    index: Range<usize>,
    lo: i64,
    hi: i64,
    /// It sits in a loop whose counter its index does not use: it runs again with the
    /// same index.
    repeats: bool,
    /// Loops its index uses that need `#pragma unroll` (their starts).
    pragmas: Vec<usize>,
}

fn plan<'k>(src: &Source, facts: &Facts, k: &'k Kernel) -> Planned<'k> {
    let t = src.text();
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| NotApplicable::new("no body"))?;
    if k.is_template {
        return Err(NotApplicable::new(format!(
            "`{}` is a template: its parameters may change the indices per instance",
            k.name
        )));
    }
    let (mut buffers, _) = readonly_buffers(src, facts, k);
    // A `const` pointer the launcher could also pass as an output: only the task's inputs,
    // which the wall gives buffers of their own, hold still while the kernel runs.
    buffers.retain(|name, _| super::vectorize::role_of(src, facts, k, name) == Some(Role::Input));
    if buffers.is_empty() {
        return Err(NotApplicable::new(format!("`{}` has no pointer parameter it only reads as `p[i]`", k.name)));
    }
    let mut change = Change::new(k);
    let mut why = Vec::new();
    let mut notes = Vec::new();
    let mut prologue = String::new();
    let mut pragmas = BTreeSet::new();
    let ind = named_statements(body).first().map_or_else(|| "  ".to_string(), |s| indent_at(t, s.start_byte()));
    for (name, base) in &buffers {
        let Some(size) = k.param(name).and_then(|p| p.elem_size()) else {
            why.push(format!("`{name}` (elements of unknown size)"));
            continue;
        };
        let table = format!("ns_tab_{name}");
        if descendants(body).iter().any(|d| d.kind() == "identifier" && text(t, *d) == table) {
            why.push(format!("`{name}` (already in registers)"));
            continue;
        }
        let mut reads = Vec::new();
        let mut untabled = Vec::new();
        for s in descendants(body).into_iter().filter(|d| is_read_of(t, *d, name)) {
            match table_read(src, k, body, s) {
                Ok(r) => reads.push(r),
                Err(e) => untabled.push(e),
            }
        }
        if reads.is_empty() {
            let none = "no read `p[i]` of its own: read through a local pointer, which a table does not follow";
            why.push(format!("`{name}` ({})", untabled.first().map_or(none, String::as_str)));
            continue;
        }
        let shared_sites = reads.len() > 1;
        if !reads.iter().any(|r| r.repeats) && !shared_sites {
            why.push(format!("`{name}` (each thread reads each of its elements once: a table would load the same)"));
            continue;
        }
        let (lo, hi) = reads.iter().fold((i64::MAX, i64::MIN), |(l, h), r| (l.min(r.lo), h.max(r.hi)));
        let elems = hi + 1;
        let registers = elems * (size.div_ceil(4) as i64);
        if lo < 0 {
            why.push(format!("`{name}` (read at a negative index, {lo})"));
            continue;
        }
        if elems > MAX_ELEMS || registers > MAX_REGISTERS {
            why.push(format!(
                "`{name}` (read up to element {hi}: a table of {elems} takes {registers} registers, more than {MAX_REGISTERS})"
            ));
            continue;
        }
        let Some(len) = launcher_length(src, facts, k, name) else {
            why.push(format!("`{name}` (the task gives no length for it in the launcher's names)"));
            continue;
        };
        match int_literal(&len) {
            Some(n) if n >= elems => {}
            Some(n) => {
                why.push(format!(
                    "`{name}` (the task's length, {n}, is shorter than the {elems} elements it is read at)"
                ));
                continue;
            }
            None => change.guards.push(format!("(long long)({len}) >= {elems}LL")),
        }
        prologue.push_str(&format!(
            "{ind}// nightshift: `{name}` is read only at elements 0..{elems} (once its loops are unrolled): loaded once per thread into registers.\n\
             {ind}{base} ns_tab_{name}[{elems}];\n\
             {ind}#pragma unroll\n\
             {ind}for (int ns_j = 0; ns_j < {elems}; ++ns_j) ns_tab_{name}[ns_j] = {name}[ns_j];\n"
        ));
        for r in &reads {
            change.edits.replace(r.range.clone(), format!("ns_tab_{name}[{}]", &t[r.index.clone()]));
            pragmas.extend(r.pragmas.iter().copied());
        }
        let left = if untabled.is_empty() {
            String::new()
        } else {
            format!(" ({} other read(s) left as they were)", untabled.len())
        };
        notes.push(format!("`{name}` elements 0..{elems} in registers for {} read(s){left}", reads.len()));
    }
    if notes.is_empty() {
        return Err(NotApplicable::new(format!("`{}` has no table to keep in registers: {}", k.name, why.join(", "))));
    }
    for at in pragmas {
        change.edits.insert(at, format!("#pragma unroll\n{}", indent_at(t, at)));
    }
    change.edits.insert(body.start_byte() + 1, format!("\n{}", prologue.trim_end_matches('\n')));
    Ok((change, format!("`{}`: {}", k.name, notes.join("; "))))
}

/// `n` is `name[i]` read as a value (not under `&`, not written).
fn is_read_of(t: &str, n: Node, name: &str) -> bool {
    let written_or_addressed = |p: Node| match p.kind() {
        "pointer_expression" | "update_expression" => true,
        "assignment_expression" => p
            .child_by_field_name("left")
            .is_some_and(|l| l.start_byte() <= n.start_byte() && n.end_byte() <= l.end_byte()),
        _ => false,
    };
    // `&(w[i])` takes the address as surely as `&w[i]`.
    let mut outer = n;
    while let Some(p) = outer.parent().filter(|p| p.kind() == "parenthesized_expression") {
        outer = p;
    }
    n.kind() == "subscript_expression"
        && n.child_by_field_name("argument").is_some_and(|a| syntax::is_ident(t, a, name))
        && outer.parent().is_some_and(|p| !written_or_addressed(p))
}

fn named_statements(body: Node) -> Vec<Node> {
    syntax::named_children(body).into_iter().filter(|c| c.kind() != "comment").collect()
}

/// The read `s` as the table would serve it, or why not.
fn table_read(src: &Source, k: &Kernel, body: Node, s: Node) -> Result<Read, String> {
    let t = src.text();
    let idx = subscript_index(s).ok_or("an index of several parts")?;
    let used: BTreeSet<String> =
        descendants(idx).into_iter().filter(|d| d.kind() == "identifier").map(|d| text(t, d).to_string()).collect();
    let mut ranges: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let mut pragmas = Vec::new();
    let mut repeats = false;
    let mut up = s.parent();
    while let Some(a) = up {
        if a.id() == body.id() {
            break;
        }
        if syntax::is_loop(a) && a.kind() != "switch_statement" {
            let c = (a.kind() == "for_statement").then(|| const_loop(src, k, a)).flatten();
            match c {
                Some(c) if used.contains(&c.var) && !ranges.contains_key(&c.var) => {
                    if c.ty.contains("unsigned") || c.ty.contains("size_t") || c.ty.starts_with('u') {
                        return Err(format!("the loop over `{}` counts in an unsigned type", c.var));
                    }
                    // A declaration of the name inside the loop could hide its counter.
                    if a.child_by_field_name("body").is_some_and(|b| declarations(t, b, &c.var) > 0) {
                        return Err(format!("`{}` is declared again inside its loop", c.var));
                    }
                    if let Some(m) = hidden_change(src, a) {
                        return Err(format!("the loop over `{}` holds {m}, which may change its counter", c.var));
                    }
                    for name in loop_header_names(t, a) {
                        if let Some(why) = movable_constant(src, k, &name) {
                            return Err(format!("the loop over `{}` is bounded by {why}", c.var));
                        }
                    }
                    if c.hi - c.lo + 1 > MAX_TRIP {
                        return Err(format!("the loop over `{}` runs {} times", c.var, c.hi - c.lo + 1));
                    }
                    match syntax::unroll_pragma(t, a) {
                        Some((Unroll::Full, _)) => {}
                        Some((Unroll::Times(n), _)) if n > c.hi - c.lo => {}
                        Some((_, p)) => {
                            return Err(format!("the read sits in the loop over `{}`, which `{p}` keeps rolled", c.var))
                        }
                        None if !c.braced => {
                            return Err(format!("the loop over `{}` is another statement's body", c.var));
                        }
                        None => pragmas.push(c.start),
                    }
                    ranges.insert(c.var.clone(), (c.lo, c.hi));
                }
                _ => repeats = true,
            }
        }
        up = a.parent();
    }
    for name in used.iter().filter(|n| !ranges.contains_key(*n)) {
        if declarations(t, body, name) > 0 {
            let shown = text(t, idx).split_whitespace().collect::<Vec<_>>().join(" ");
            return Err(format!("the index `{shown}` names `{name}`, a variable of the kernel"));
        }
        if let Some(why) = movable_constant(src, k, name) {
            return Err(format!("the index names {why}"));
        }
    }
    let points = ranges.values().try_fold(1i64, |p, (lo, hi)| p.checked_mul(hi - lo + 1)).unwrap_or(i64::MAX);
    if points > MAX_POINTS {
        return Err(format!("an index over {points} loop trips"));
    }
    let vars: Vec<(&String, &(i64, i64))> = ranges.iter().collect();
    let mut env: BTreeMap<String, i64> = ranges.iter().map(|(v, (lo, _))| (v.clone(), *lo)).collect();
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    loop {
        let v = eval(src, k, idx, &env).ok_or_else(|| unfixed(src, k, idx, &env))?;
        lo = lo.min(v);
        hi = hi.max(v);
        // The next point of the loops' ranges, the last variable fastest.
        let mut i = vars.len();
        loop {
            if i == 0 {
                return Ok(Read { range: s.byte_range(), index: idx.byte_range(), lo, hi, repeats, pragmas });
            }
            i -= 1;
            let (name, (start, end)) = vars[i];
            let cur = env.get_mut(name.as_str()).expect("every variable has a value");
            if *cur < *end {
                *cur += 1;
                break;
            }
            *cur = *start;
        }
    }
}

/// How many declarations of `name` the kernel's body holds (loop counters included).
fn declarations(t: &str, body: Node, name: &str) -> usize {
    let ranged = descendants(body)
        .into_iter()
        .filter(|d| d.kind() == "for_range_loop")
        .filter(|d| d.child_by_field_name("declarator").is_some_and(|x| syntax::is_ident(t, x, name)))
        .count();
    descendants(body)
        .into_iter()
        .filter(|d| d.kind() == "declaration")
        .map(|d| syntax::declared_names(t, d).iter().filter(|n| *n == name).count())
        .sum::<usize>()
        + ranged
}

/// Why the constant `name` may not be what a build sees: it is, or is made of (a `const`
/// initialised from it), a macro defined more than once or behind a conditional (which a
/// `-D` knob may set).
fn movable_constant(src: &Source, k: &Kernel, name: &str) -> Option<String> {
    let size = launch::file_scope_size(src, name, k.range.start);
    let conditional = |m: &launch::Macro| {
        let mut up = src.node_at(&m.definition).and_then(|d| d.parent());
        while let Some(a) = up {
            if a.kind().starts_with("preproc_if") || a.kind().starts_with("preproc_else") || a.kind() == "preproc_elif"
            {
                return true;
            }
            up = a.parent();
        }
        false
    };
    let m = size.macro_defs().into_iter().find(|m| m.definitions > 1 || conditional(m))?;
    let made_of = if m.name == name { String::new() } else { format!(" (made of `{}`)", m.name) };
    Some(format!("`{name}`{made_of}, a macro a build may define otherwise (`-D`, or another `#define`)"))
}

/// Names in a `for` loop's initializer and condition.
fn loop_header_names(t: &str, f: Node) -> Vec<String> {
    ["initializer", "condition"]
        .iter()
        .filter_map(|field| f.child_by_field_name(field))
        .flat_map(descendants)
        .filter(|d| d.kind() == "identifier")
        .map(|d| text(t, d).to_string())
        .collect()
}

/// A call of a function-like macro or an `asm` statement in the loop: either may assign
/// its counter where the syntax does not show it.
fn hidden_change(src: &Source, f: Node) -> Option<String> {
    let t = src.text();
    let body = f.child_by_field_name("body")?;
    descendants(body).into_iter().find_map(|d| match d.kind() {
        "gnu_asm_expression" | "asm_statement" => Some("an `asm` statement".to_string()),
        "call_expression" => {
            let callee = d.child_by_field_name("function")?;
            let name = text(t, callee);
            super::row_strip::defines_function_macro(src, name).then(|| format!("a call of the macro `{name}`"))
        }
        _ => None,
    })
}

/// Why `idx` has no value for the table: the first name in it that is neither a
/// compile-time loop's counter nor a constant, or else what it does besides arithmetic.
fn unfixed(src: &Source, k: &Kernel, idx: Node, env: &BTreeMap<String, i64>) -> String {
    let t = src.text();
    let shown = text(t, idx).split_whitespace().collect::<Vec<_>>().join(" ");
    let named = descendants(idx)
        .into_iter()
        .find(|d| d.kind() == "identifier" && !env.contains_key(text(t, *d)) && const_value(src, k, *d).is_none());
    let counter_of_loop = |name: &str| {
        let mut up = idx.parent();
        while let Some(a) = up {
            if a.kind() == "for_statement"
                && a.child_by_field_name("initializer")
                    .and_then(|i| syntax::single_declarator(t, i))
                    .is_some_and(|(v, _)| v == name)
            {
                return true;
            }
            up = a.parent();
        }
        false
    };
    match named {
        Some(n) if counter_of_loop(text(t, n)) => format!(
            "the index `{shown}` names `{}`, the counter of a loop whose range is not literals or constants of the file",
            text(t, n)
        ),
        Some(n) => format!(
            "the index `{shown}` names `{}`, neither the counter of a compile-time loop around the read nor a constant of the file",
            text(t, n)
        ),
        None => format!("the index `{shown}` is not integer arithmetic on constants and loop counters"),
    }
}

/// The value of the integer expression `n` with the loop counters in `env`; None where it
/// names anything else that is not a compile-time constant.
fn eval(src: &Source, k: &Kernel, n: Node, env: &BTreeMap<String, i64>) -> Option<i64> {
    let t = src.text();
    let n = strip_parens(n);
    match n.kind() {
        // C's unsigned arithmetic wraps where this does not: such an index is declined.
        "number_literal" if text(t, n).contains(['u', 'U']) && !text(t, n).starts_with("0x") => None,
        "number_literal" => int_literal(text(t, n)),
        "identifier" => env.get(text(t, n)).copied().or_else(|| const_value(src, k, n)),
        "cast_expression" => {
            let ty = n.child_by_field_name("type").map(|x| text(t, x))?;
            if !matches!(ty.trim(), "int" | "long" | "long long" | "ptrdiff_t") {
                return None;
            }
            eval(src, k, n.child_by_field_name("value")?, env)
        }
        "unary_expression" => {
            let op = n.child(0).map(|o| text(t, o))?;
            let v = eval(src, k, n.child_by_field_name("argument")?, env)?;
            match op {
                "-" => v.checked_neg(),
                "+" => Some(v),
                _ => None,
            }
        }
        "binary_expression" => {
            let (op, l, r) = syntax::binary(t, n)?;
            let (a, b) = (eval(src, k, l, env)?, eval(src, k, r, env)?);
            match op {
                "+" => a.checked_add(b),
                "-" => a.checked_sub(b),
                "*" => a.checked_mul(b),
                "/" if b != 0 => a.checked_div(b),
                "%" if b != 0 => a.checked_rem(b),
                "<<" if (0..32).contains(&b) => a.checked_shl(b as u32),
                ">>" if (0..32).contains(&b) => a.checked_shr(b as u32),
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{FactsBuilder, Role};

    const POLY: &str = r#"
__global__ void poly(const double* x, const double* c, double* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = (c[2] * x[i] + c[1]) * x[i] + c[0];
}
extern "C" void launch(const double* x, const double* c, double* y, int n, int terms, cudaStream_t st) {
  poly<<<132, 256, 0, st>>>(x, c, y, n);
}
"#;

    fn poly_facts(len: &str) -> Facts {
        FactsBuilder::new("launch")
            .buffer("x", "double", Role::Input, "{3}", 1 << 20, 1 << 20)
            .buffer("c", "double", Role::Input, len, 3, 3)
            .buffer("y", "double", Role::Output, "{3}", 1 << 20, 1 << 20)
            .int("n", 1 << 20, 1 << 20)
            .int("terms", 3, 3)
            .build()
    }

    #[test]
    fn a_length_the_task_does_not_fix_is_checked_by_the_launcher() {
        let r = apply(&Source::parse(POLY), &poly_facts("{4}"), &Params::default()).unwrap();
        assert!(r.source.contains("ns_tab_c[3];"), "{}", r.source);
        assert!(r.source.contains("ns_tab_c[2] * x[i]"), "{}", r.source);
        assert!(r.source.contains("(long long)(terms) >= 3LL"), "{}", r.source);
        assert!(r.source.contains("poly_fast"), "the original stays for short buffers: {}", r.source);
    }

    #[test]
    fn a_constant_length_needs_no_check_and_a_short_one_declines() {
        let r = apply(&Source::parse(POLY), &poly_facts("3"), &Params::default()).unwrap();
        assert!(r.guards.is_empty() && !r.source.contains("poly_fast"), "{}", r.source);
        let e = apply(&Source::parse(POLY), &poly_facts("2"), &Params::default()).unwrap_err();
        assert!(e.0.contains("shorter than the 3 elements"), "{e}");
    }

    #[test]
    fn reads_that_move_with_the_thread_or_a_rolled_loop_are_not_tables() {
        let by_thread = POLY.replace("c[2] * x[i]", "c[i % 3] * x[i]").replace(" + c[1]", "").replace(" + c[0]", "");
        let e = apply(&Source::parse(&by_thread), &poly_facts("3"), &Params::default()).unwrap_err();
        assert!(e.0.contains("names `i`, a variable of the kernel"), "{e}");
        let rolled = r#"
__global__ void fir(const float* x, const float* h, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = 0.f;
  #pragma unroll 1
  for (int k = 0; k < 4; ++k) a += h[k] * x[i + k];
  #pragma unroll 1
  for (int k = 0; k < 4; ++k) a += h[k] * x[i + k + 4];
  y[i] = a;
}
extern "C" void launch(const float* x, const float* h, float* y, int n, cudaStream_t st) {
  fir<<<(n + 255) / 256, 256, 0, st>>>(x, h, y, n);
}
"#;
        let f = FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "{3} + 8", 1 << 20, 1 << 20)
            .buffer("h", "float", Role::Input, "4", 4, 4)
            .buffer("y", "float", Role::Output, "{3}", 1 << 20, 1 << 20)
            .int("n", 1 << 20, 1 << 20)
            .build();
        let e = apply(&Source::parse(rolled), &f, &Params::default()).unwrap_err();
        assert!(e.0.contains("which `#pragma unroll 1` keeps rolled"), "{e}");
        // Unrolled, the two loops read the same four taps: shared through the table.
        let r = apply(&Source::parse(&rolled.replace("#pragma unroll 1\n", "")), &f, &Params::default()).unwrap();
        assert_eq!(r.source.matches("#pragma unroll\n").count(), 3, "two loops and the fill: {}", r.source);
        assert!(r.description.contains("for 2 read(s)"), "{}", r.description);
        let again = apply(&Source::parse(&r.source), &f, &Params::default()).unwrap_err();
        assert!(again.0.contains("`h` (already in registers)"), "{again}");
    }

    /// Reads a table must not serve (the review's cases): each declines, none is tabled.
    #[test]
    fn names_that_hide_a_counter_addresses_and_movable_bounds_are_not_tables() {
        let kernel = |body: &str, pre: &str| {
            format!(
                "{pre}\n__global__ void k(const float* x, const float* w, float* y, int n) {{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n  float acc = 0.f;\n  for (int s = 0; s < 4; ++s) {{\n{body}\n  }}\n  y[i] = acc;\n}}\nextern \"C\" void launch(const float* x, const float* w, float* y, int n, cudaStream_t st) {{\n  k<<<(n + 255) / 256, 256, 0, st>>>(x, w, y, n);\n}}\n"
            )
        };
        let f = FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "{3}", 1 << 20, 1 << 20)
            .buffer("w", "float", Role::Input, "16", 16, 16)
            .buffer("y", "float", Role::Output, "{3}", 1 << 20, 1 << 20)
            .int("n", 1 << 20, 1 << 20)
            .build();
        let cases = [
            // A local that hides the loop's counter.
            (kernel("    for (int t = 0; t < 3; ++t) { if (x[i] > 0.f) { const int t = (i + s) % 9; acc += w[t]; } acc += w[t]; }", ""), "declared again inside its loop"),
            // A file-scope constant hidden by a local.
            (kernel("    int T = (i + s) % 9; acc += w[T];", "const int T = 2;"), "names `T`, a variable of the kernel"),
            // An address taken through parentheses.
            (kernel("    const float* mid = &(w[3]); acc += mid[0] + mid[2] + w[s];", ""), "`w`"),
            // A bound a build may redefine.
            (kernel("    for (int r = 0; r < R; ++r) acc += w[r];", "#ifndef R\n#define R 2\n#endif"), "a macro a build may define otherwise"),
            // A bound through a constant made of such a macro.
            (kernel("    for (int r = 0; r < T; ++r) acc += w[r];", "#ifndef R\n#define R 2\n#endif\nconst int T = R + 1;"), "`T` (made of `R`), a macro a build may define otherwise"),
            // A pragma that keeps the loop rolled, behind a comment, or `nounroll`.
            (kernel("    #pragma unroll 1\n    // one trip at a time\n    for (int r = 0; r < 3; ++r) acc += w[r];", ""), "which `#pragma unroll 1` keeps rolled"),
            (kernel("    #pragma nounroll\n    for (int r = 0; r < 3; ++r) acc += w[r];", ""), "which `#pragma nounroll` keeps rolled"),
            // A counter a macro may change.
            (kernel("    for (int r = 0; r < 3; ++r) { acc += w[r]; SKIP(r); }", "#define SKIP(v) ((v) += 3)"), "a call of the macro `SKIP`"),
            // Unsigned arithmetic, which wraps.
            (kernel("    for (int r = 0; r < 3; ++r) acc += w[((r - 1u) / 2u) % 9u];", ""), "`w`"),
        ];
        for (src, says) in cases {
            let got = apply(&Source::parse(&src), &f, &Params::default());
            match got {
                Ok(r) => panic!("tabled: {}\n{}", r.description, r.source),
                Err(e) => assert!(e.0.contains(says), "{says}: {e}\n{src}"),
            }
        }
    }
}
