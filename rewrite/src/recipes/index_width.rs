//! Index width: 64-bit index arithmetic (`size_t` and `int64_t` indices, `(size_t)`
//! casts in index products, 64-bit size parameters) done in 32 bits. A 64-bit multiply or
//! divide costs several 32-bit instructions (a 64-bit `%` by a run-time value is a
//! software routine); the fast path runs when every buffer the kernel receives holds at
//! most 2^30 elements and the launch at most 2^30 threads, so no index or index-plus-stride
//! can overflow; a narrowed value times a literal (`(size_t)(flat) * 8`, a vectorized
//! run's base) has the thread count, its grid extent or its parameter checked against
//! 2^30 over that literal. Values loaded from memory (a 64-bit token id, an accumulator)
//! keep their width.

use crate::facts::Facts;
use crate::guards;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{self, descendants, text};
use crate::version::Change;
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "type",
    values: &["int", "unsigned"],
    doc: "the 32-bit type the indices take (int lets the compiler assume no wrap-around; unsigned divides faster)",
}];

/// 2^30: an index below it plus a stride below it still fits in a signed 32-bit int.
pub const LIMIT: i64 = 1 << 30;

/// Whether evaluating `n` reads memory (a subscript, a dereference, `->`, a call that
/// is not a pure integer helper).
pub fn reads_memory(t: &str, n: Node) -> bool {
    descendants(n).into_iter().any(|d| match d.kind() {
        "subscript_expression" => true,
        "pointer_expression" => d.child(0).is_some_and(|op| text(t, op) == "*"),
        "field_expression" => d.child_by_field_name("operator").is_some_and(|o| text(t, o) == "->"),
        "call_expression" => {
            let f = d.child_by_field_name("function").map(|f| text(t, f)).unwrap_or("");
            !matches!(f, "min" | "max" | "umin" | "umax" | "llmin" | "llmax" | "static_cast" | "__umulhi" | "__mulhi")
                && !f.starts_with("static_cast")
        }
        _ => false,
    })
}

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let ty = params.get(PARAMS, "type").to_string();
    super::per_kernel(src, params, |k| plan(src, facts, k, &ty))
}

fn plan<'k>(src: &Source, facts: &Facts, k: &'k Kernel, ty: &str) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    let def = src
        .node(&k.range, if k.is_template { "template_declaration" } else { "function_definition" })
        .ok_or_else(|| NotApplicable::new("the kernel could not be found again"))?;
    if k.has_error {
        return Err(NotApplicable::new(format!("`{}` contains syntax this parser does not know", k.name)));
    }
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| NotApplicable::new("no body"))?;
    let mut change = Change::new(k);
    let mut narrowed = Vec::new();
    // 64-bit integer parameters (sizes): the launcher's value converts at the call.
    for p in k.params.iter().filter(|p| !p.pointer && syntax::is_64bit_int(&p.base)) {
        let decl = src.node(&p.range, "parameter_declaration");
        if let Some(ty_node) = decl.and_then(|d| d.child_by_field_name("type")) {
            change.edits.replace(ty_node.byte_range(), ty.to_string());
            change.guards.push(format!("({{{}}}) <= {LIMIT}LL", p.name));
            narrowed.push(p.name.clone());
        }
    }
    // Index values: integer sizes, thread coordinates, and locals every assignment of
    // which computes (never loads) from such values. With `unsigned`, a difference could
    // go below zero where the original compared it with zero, so none is narrowed.
    let assigned = syntax::assigned(t, body);
    let unsigned = ty == "unsigned";
    let int_param = |n: &str| int_param(k, n);
    // With `unsigned`, names that take part in a difference anywhere keep their type.
    let in_difference: std::collections::HashSet<&str> = if unsigned {
        descendants(body)
            .into_iter()
            .filter(|x| syntax::binary(t, *x).is_some_and(|(o, _, _)| o == "-") || x.kind() == "unary_expression")
            .flat_map(|x| syntax::identifiers(t, x))
            .collect()
    } else {
        Default::default()
    };
    let is_index_expr = |e: Node, index: &std::collections::HashSet<String>| {
        !reads_memory(t, e)
            && !syntax::identifiers(t, e).iter().any(|n| in_difference.contains(n))
            && (!unsigned
                || !descendants(e)
                    .iter()
                    .any(|x| syntax::binary(t, *x).is_some_and(|(o, _, _)| o == "-") || text(t, *x).starts_with('-')))
            && syntax::identifiers(t, e).iter().all(|n| {
                index.contains(*n)
                    || int_param(n)
                    || matches!(*n, "threadIdx" | "blockIdx" | "blockDim" | "gridDim")
                    || n.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            })
    };
    let mut index: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut wide: Vec<(Node, Vec<String>)> = Vec::new();
    for d in descendants(body) {
        if d.kind() != "declaration" {
            continue;
        }
        let Some(tn) = d.child_by_field_name("type") else { continue };
        let mut c = d.walk();
        let declarators: Vec<Node> = d.children_by_field_name("declarator", &mut c).collect();
        let scalar = declarators.iter().all(|x| {
            let inner = if x.kind() == "init_declarator" { x.child_by_field_name("declarator") } else { Some(*x) };
            inner.is_some_and(|i| i.kind() == "identifier")
        });
        if scalar && (syntax::is_64bit_int(text(t, tn)) || ["int", "unsigned", "unsigned int"].contains(&text(t, tn))) {
            wide.push((d, syntax::declared_names(t, d)));
        }
    }
    loop {
        let before = index.len();
        for (d, names) in &wide {
            if names.iter().all(|n| index.contains(n)) || names.iter().any(|n| in_difference.contains(n.as_str())) {
                continue;
            }
            let mut c = d.walk();
            let inits: Vec<Node> =
                d.children_by_field_name("declarator", &mut c).filter_map(|x| x.child_by_field_name("value")).collect();
            let ok = inits.iter().all(|e| is_index_expr(*e, &index))
                && assigned
                    .iter()
                    .filter(|(n, _)| names.contains(n))
                    .all(|(_, a)| a.child_by_field_name("right").is_none_or(|r| is_index_expr(r, &index)));
            if ok {
                index.extend(names.iter().cloned());
            }
        }
        if index.len() == before {
            break;
        }
    }
    for (d, names) in &wide {
        let Some(tn) = d.child_by_field_name("type") else { continue };
        if syntax::is_64bit_int(text(t, tn)) && names.iter().all(|n| index.contains(n)) {
            change.edits.replace(tn.byte_range(), ty.to_string());
            narrowed.extend(names.iter().cloned());
        }
    }
    // Casts to 64-bit types of index values (never of pointers or loaded values).
    let mut casts = 0;
    let mut narrowed_casts = Vec::new();
    for d in descendants(def) {
        let (ty_node, operand) = match d.kind() {
            "cast_expression" => (d.child_by_field_name("type"), d.child_by_field_name("value")),
            _ => (None, None),
        };
        let (Some(tn), Some(v)) = (ty_node, operand) else { continue };
        if !syntax::is_64bit_int(text(t, tn)) || !is_index_expr(v, &index) || d.start_byte() < k.body.start {
            continue;
        }
        change.edits.replace(tn.byte_range(), ty.to_string());
        narrowed_casts.push(d.byte_range());
        casts += 1;
    }
    if narrowed.is_empty() && casts == 0 {
        return Err(NotApplicable::new(format!("`{}` does its index arithmetic in 32 bits already", k.name)));
    }
    let multiples = literal_multiples(t, body, k, &narrowed, &narrowed_casts);
    for (param, c) in &multiples.params {
        change.guards.push(format!("({{{param}}}) <= {}LL", LIMIT / c));
    }
    for (axis, c) in multiples.grid.iter().enumerate().filter(|(_, c)| **c > 1) {
        let grid = if axis == 0 { "{@grid}".to_string() } else { format!("{{@grid.{}}}", crate::launch::AXES[axis]) };
        if !src.launches_of(&k.name).is_empty() {
            change.guards.push(format!("(long long){grid} <= {}LL", LIMIT / c));
        }
    }
    change.guards.extend(guards::buffers_below(src, facts, k, LIMIT)?);
    change.guards.extend(guards::threads_below(src, k, LIMIT / multiples.threads)?);
    let mut what = Vec::new();
    if !narrowed.is_empty() {
        what.push(format!("`{}`", narrowed.join("`, `")));
    }
    if casts > 0 {
        what.push(format!("{casts} cast{}", if casts == 1 { "" } else { "s" }));
    }
    Ok((change, format!("`{}`: {} in 32-bit `{ty}`", k.name, what.join(" and "))))
}

/// A kernel parameter holding an integer (a size, not a pointer or a float).
fn int_param(k: &Kernel, name: &str) -> bool {
    k.param(name).is_some_and(|p| !p.pointer && !p.base.contains("float") && !p.base.contains("double"))
}

/// Literal multiples of values the narrowing makes 32-bit, which the checks against 2^30
/// do not bound: `(size_t)(flat) * 8` (`vectorize`'s run base) is up to 8 times the
/// thread count, and wraps in 32 bits for more than 2^28 threads, though every buffer is
/// below 2^30 elements. Each arithmetic expression that computes with a narrowed value
/// is bounded by a sum of terms ([`terms`]), and each term's base is checked against
/// 2^30 over its largest multiple: the thread count, a grid extent, a parameter.
struct Multiples {
    threads: i64,
    grid: [i64; 3],
    params: Vec<(String, i64)>,
}

/// What a term of a bound multiplies.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Base<'s> {
    Threads,
    Grid(usize),
    Param(&'s str),
}

fn literal_multiples(
    t: &str,
    body: Node,
    k: &Kernel,
    narrowed: &[String],
    narrowed_casts: &[std::ops::Range<usize>],
) -> Multiples {
    let mut out = Multiples { threads: 1, grid: [1; 3], params: Vec::new() };
    // A narrowed local's value, where one declaration alone gives it.
    let assigned: Vec<String> = syntax::assigned(t, body).into_iter().map(|(n, _)| n.to_string()).collect();
    let declared: std::collections::HashMap<String, Node> = descendants(body)
        .into_iter()
        .filter_map(|d| match syntax::single_declarator(t, d) {
            Some((name, Some(init))) if narrowed.contains(&name) => Some((name, init)),
            _ => None,
        })
        .collect();
    let inits: std::collections::HashMap<String, Node> =
        declared.iter().filter(|(n, _)| !assigned.contains(n)).map(|(n, i)| (n.clone(), *i)).collect();
    let touches_narrowed = |n: Node| {
        descendants(n).iter().any(|d| {
            (d.kind() == "identifier" && narrowed.iter().any(|x| x == text(t, *d)))
                || narrowed_casts.iter().any(|r| *r == d.byte_range())
        })
    };
    let mut roots: Vec<Vec<(Base, i64)>> = Vec::new();
    // What a narrowed local or cast holds: an unsigned 32-bit value past 2^31 turns
    // negative in `int`, whatever computes it.
    roots.extend(inits.values().map(|init| terms(t, *init, k, &inits, narrowed, 0)));
    for d in descendants(body) {
        if d.kind() == "cast_expression" && narrowed_casts.contains(&d.byte_range()) {
            if let Some(v) = d.child_by_field_name("value") {
                roots.push(terms(t, v, k, &inits, narrowed, 0));
            }
        }
    }
    for d in descendants(body) {
        match d.kind() {
            "binary_expression" if outermost(d) && touches_narrowed(d) => {
                roots.extend(values(t, d).into_iter().map(|v| terms(t, v, k, &inits, narrowed, 0)));
            }
            // `at *= 8`, `at <<= 3`: the narrowed value times the literal.
            "assignment_expression" => {
                let (Some(l), Some(op), Some(r)) =
                    (d.child_by_field_name("left"), d.child_by_field_name("operator"), d.child_by_field_name("right"))
                else {
                    continue;
                };
                if !touches_narrowed(l) {
                    continue;
                }
                let factor = match (text(t, op), literal(t, r)) {
                    ("*=", Some(c)) => c,
                    ("<<=", Some(s)) if s <= 30 => 1 << s,
                    _ => continue,
                };
                // The value it scales: the declaration's where one gives it, else (a
                // local assigned elsewhere too) one thread count.
                let before = match declared.get(text(t, syntax::strip(l))) {
                    Some(init) => terms(t, *init, k, &inits, narrowed, 0),
                    None => terms(t, l, k, &inits, narrowed, 0),
                };
                let before = if before.is_empty() { vec![(Base::Threads, 1)] } else { before };
                roots.push(scaled(before, factor));
            }
            _ => {}
        }
    }
    // Each term is checked against 2^30 on its own: two such terms fit in 2^31, more
    // than two share it.
    let roots = roots.into_iter().map(|r| {
        let share = (r.len() as i64 + 1) / 2;
        scaled(r, share.max(1))
    });
    for (base, scale) in roots.flatten().filter(|(_, s)| *s > 1) {
        match base {
            Base::Threads => out.threads = out.threads.max(scale),
            Base::Grid(axis) => out.grid[axis] = out.grid[axis].max(scale),
            Base::Param(p) => match out.params.iter_mut().find(|(n, _)| n == p) {
                Some((_, c)) => *c = (*c).max(scale),
                None => out.params.push((p.to_string(), scale)),
            },
        }
    }
    out
}

/// The values a condition compares: the sides of comparisons and logical operators,
/// each a value of its own (not a sum).
fn values<'t>(t: &str, n: Node<'t>) -> Vec<Node<'t>> {
    match syntax::binary(t, n) {
        Some(("<" | "<=" | ">" | ">=" | "==" | "!=" | "&&" | "||", l, r)) => {
            let mut v = values(t, l);
            v.extend(values(t, r));
            v
        }
        _ => vec![n],
    }
}

/// An arithmetic expression not inside another (through parentheses and casts).
fn outermost(n: Node) -> bool {
    let mut at = n.parent();
    while let Some(p) = at {
        match p.kind() {
            "parenthesized_expression" | "cast_expression" => at = p.parent(),
            "binary_expression" => return false,
            _ => return true,
        }
    }
    true
}

fn literal(t: &str, n: Node) -> Option<i64> {
    let n = syntax::strip(n);
    (n.kind() == "number_literal").then(|| crate::pattern::int_literal(text(t, n))).flatten().filter(|v| *v >= 0)
}

fn scaled(terms: Vec<(Base, i64)>, by: i64) -> Vec<(Base, i64)> {
    terms.into_iter().map(|(b, s)| (b, s.saturating_mul(by))).collect()
}

/// An upper bound of `n` as a sum of terms `scale * base`. A block index or the grid's
/// extent counts as its grid extent, an integer parameter as itself, a narrowed local
/// as its declaration's value (one assigned elsewhere too, a loop counter, as one thread
/// count); a product of two values neither of which is a literal as the thread count (a
/// block's start, `blockIdx.x * blockDim.x`). A thread's coordinates in its block, a
/// block's extent (1024 at most), literals, 32-bit locals and macros count for nothing:
/// what the checks against 2^30 leave them is room enough.
///
/// Not a range analysis, and its gaps are these: `rows * cols * 4` (a product of run-time
/// values, times a literal) counts as 4 thread counts where the buffer checks bound only
/// `rows * cols`; a macro or `sizeof` factor counts as a run-time value; a loop counter
/// runs to its bound, not to one thread count; a `*=` repeated or in a loop counts once.
fn terms<'s>(
    t: &'s str,
    n: Node,
    k: &Kernel,
    inits: &std::collections::HashMap<String, Node>,
    narrowed: &[String],
    depth: u32,
) -> Vec<(Base<'s>, i64)> {
    let n = syntax::strip(n);
    let axis = |c: char| crate::launch::AXES.iter().position(|a| *a == c);
    if let Some((b, c)) = syntax::builtin(t, n) {
        return match (b, axis(c)) {
            ("blockIdx" | "gridDim", Some(a)) => vec![(Base::Grid(a), 1)],
            _ => Vec::new(),
        };
    }
    match n.kind() {
        "identifier" => {
            let name = text(t, n);
            if int_param(k, name) {
                vec![(Base::Param(name), 1)]
            } else if let Some(init) = inits.get(name).filter(|_| depth < 8) {
                terms(t, *init, k, inits, narrowed, depth + 1)
            } else if narrowed.iter().any(|x| x == name) {
                // A narrowed local assigned elsewhere too (a loop counter): an index.
                vec![(Base::Threads, 1)]
            } else {
                Vec::new()
            }
        }
        "conditional_expression" => ["consequence", "alternative"]
            .iter()
            .filter_map(|f| n.child_by_field_name(f))
            .flat_map(|x| terms(t, x, k, inits, narrowed, depth))
            .collect(),
        "unary_expression" => {
            n.child_by_field_name("argument").map_or_else(Vec::new, |a| terms(t, a, k, inits, narrowed, depth))
        }
        // `min(a, b)` and other integer helpers: at most the larger argument.
        "call_expression" => {
            let f = n.child_by_field_name("function").map(|f| text(t, f)).unwrap_or("");
            match (f, n.child_by_field_name("arguments")) {
                ("min" | "max" | "umin" | "umax" | "llmin" | "llmax", Some(args)) => syntax::named_children(args)
                    .into_iter()
                    .flat_map(|a| terms(t, a, k, inits, narrowed, depth))
                    .collect(),
                _ => Vec::new(),
            }
        }
        "binary_expression" => {
            let Some((op, l, r)) = syntax::binary(t, n) else { return Vec::new() };
            match op {
                "/" | "%" | ">>" => terms(t, l, k, inits, narrowed, depth),
                "*" => match (literal(t, l), literal(t, r)) {
                    (Some(c), _) => scaled(terms(t, r, k, inits, narrowed, depth), c),
                    (_, Some(c)) => scaled(terms(t, l, k, inits, narrowed, depth), c),
                    _ => vec![(Base::Threads, 1)],
                },
                "<<" => match literal(t, r) {
                    Some(s) if s <= 30 => scaled(terms(t, l, k, inits, narrowed, depth), 1 << s),
                    _ => vec![(Base::Threads, 1)],
                },
                // A sum, a difference (its size is what counts), the sides of a comparison
                // and of bitwise operators: each side's terms.
                _ => {
                    let mut v = terms(t, l, k, inits, narrowed, depth);
                    v.extend(terms(t, r, k, inits, narrowed, depth));
                    v
                }
            }
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{FactsBuilder, Role};

    const SRC: &str = r#"#include <cuda_bf16.h>
__global__ void k(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ out, int rows, int cols) {
  const size_t i = (size_t)blockIdx.x * 256 + threadIdx.x;
  const size_t total = (size_t)rows * cols;
  if (i >= total) return;
  const int c = (int)(i % (size_t)cols);
  out[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(bias[c]));
}
extern "C" void launch(const __nv_bfloat16* x, const __nv_bfloat16* bias, __nv_bfloat16* out, int rows, int cols, cudaStream_t s) {
  const size_t total = (size_t)rows * cols;
  k<<<(unsigned)((total + 255) / 256), 256, 0, s>>>(x, bias, out, rows, cols);
}
"#;

    fn facts(max: i64) -> Facts {
        FactsBuilder::new("launch")
            .buffer("x", "__nv_bfloat16", Role::Input, "(long long)({rows}) * ({cols})", max, max)
            .buffer("bias", "__nv_bfloat16", Role::Input, "(long long)({cols})", 4096, 4096)
            .buffer("out", "__nv_bfloat16", Role::Output, "(long long)({rows}) * ({cols})", max, max)
            .int("rows", 4096, 4096)
            .int("cols", 4096, 4096)
            .build()
    }

    #[test]
    fn size_t_indices_become_int_behind_a_length_check() {
        let r = apply(&Source::parse(SRC), &facts(1 << 24), &Params::default()).unwrap();
        let fast = &r.source[r.source.find("k_fast(").unwrap()..];
        assert!(fast.contains("const int i = (int)blockIdx.x * 256 + threadIdx.x;"), "{fast}");
        assert!(fast.contains("const int c = (int)(i % (int)cols);"), "{fast}");
        assert!(r.guards.iter().any(|g| g.contains("(long long)(rows) * (cols)) <= 1073741824LL")), "{:?}", r.guards);
        // The launcher's own 64-bit arithmetic is left alone.
        assert!(r.source.contains("const size_t total = (size_t)rows * cols;\n  if (/* nightshift"), "{}", r.source);
    }

    #[test]
    fn a_knob_declared_above_the_fast_copy_leaves_its_mark_on_the_definition() {
        let r = apply(&Source::parse(SRC), &facts(1 << 24), &Params::default()).unwrap();
        let bound =
            super::super::launch_bounds::apply(&Source::parse(&r.source), &facts(1 << 24), &Params::default()).unwrap();
        let src = Source::parse(&bound.source);
        let fast = src.kernel("k_fast").expect("the fast copy");
        assert_eq!(fast.fast_of.as_deref(), Some("k"), "{}", bound.source);
        assert!(bound.source.contains("#endif\nstatic_assert(NS_MIN_BLOCKS >= 1"), "{}", bound.source);
    }

    #[test]
    fn values_pointers_and_differences_keep_their_width() {
        let src = SRC.replace(
            "  const int c = (int)(i % (size_t)cols);",
            "  const int c = (int)(i % (size_t)cols);\n  long long sq = (long long)__bfloat162float(x[i]) * 3;\n  size_t addr = (size_t)x;\n  long long left = i - 1;",
        );
        let r = apply(&Source::parse(&src), &facts(1 << 24), &Params::default().with("type", "unsigned")).unwrap();
        let fast = &r.source[r.source.find("k_fast(").unwrap()..];
        assert!(fast.contains("long long sq = (long long)__bfloat162float"), "{fast}");
        assert!(fast.contains("size_t addr = (size_t)x;"), "{fast}");
        assert!(fast.contains("long long left = i - 1;"), "{fast}");
        // `i` takes part in `i - 1`: as unsigned it would wrap, so it stays as it was.
        assert!(fast.contains("const size_t i = "), "{fast}");
        let r = apply(&Source::parse(&src), &facts(1 << 24), &Params::default()).unwrap();
        let fast = &r.source[r.source.find("k_fast(").unwrap()..];
        assert!(fast.contains("const int i = (int)blockIdx.x"), "{fast}");
    }

    /// A 1-D kernel over `n` elements whose statements `index` declare `at`, the element it copies.
    fn indexed_by(index: &str) -> String {
        format!("__global__ void k(const float* x, float* y, long long n) {{\n  {index}\n  if (at < n) y[at] = x[at] * 2.0f;\n}}\nextern \"C\" void launch(const float* x, float* y, long long n, cudaStream_t s) {{\n  k<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(x, y, n);\n}}\n")
    }

    fn indexed_facts() -> Facts {
        FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "(long long)({n})", 1 << 24, 1 << 24)
            .buffer("y", "float", Role::Output, "(long long)({n})", 1 << 24, 1 << 24)
            .int("n", 1 << 24, 1 << 24)
            .build()
    }

    #[test]
    fn a_narrowed_index_times_a_literal_checks_the_threads_against_2_30_over_it() {
        let guards = |index: &str| {
            apply(&Source::parse(&indexed_by(index)), &indexed_facts(), &Params::default()).unwrap().guards
        };
        // `vectorize`'s run base: 8 times the thread count, past 2^31 with 2^28 threads
        // though every buffer is below 2^30 elements.
        let g = guards("const size_t at = (size_t)(blockIdx.x * blockDim.x + threadIdx.x) * 8;");
        assert_eq!(g.last().map(String::as_str), Some("(long long)grid * block <= 134217728LL"), "{g:?}");
        // Through a narrowed local, the chain's factors multiplied.
        let g = guards(
            "const size_t flat = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n  const size_t at = flat * 2 * 4;",
        );
        assert_eq!(g.last().map(String::as_str), Some("(long long)grid * block <= 134217728LL"), "{g:?}");
        // A block index alone times its block size is checked by the grid's extent; the
        // thread count keeps its 2^30.
        let g = guards("const size_t at = (size_t)blockIdx.x * 256 + threadIdx.x;");
        assert!(g.contains(&"(long long)grid <= 4194304LL".to_string()), "{g:?}");
        assert_eq!(g.last().map(String::as_str), Some("(long long)grid * block <= 1073741824LL"), "{g:?}");
        // A narrowed size parameter alone by its own value.
        let g =
            guards("const size_t at = (size_t)(blockIdx.x * blockDim.x + threadIdx.x);\n  if (at >= n * 4) return;");
        assert!(g.contains(&"(n) <= 268435456LL".to_string()), "{g:?}");
        assert_eq!(g.last().map(String::as_str), Some("(long long)grid * block <= 1073741824LL"), "{g:?}");
        // Unsigned 32-bit arithmetic stored in a narrowed local: past 2^31 it would turn
        // negative in `int`.
        let g = guards("const size_t at = blockIdx.x * 256 + threadIdx.x;");
        assert!(g.contains(&"(long long)grid <= 4194304LL".to_string()), "{g:?}");
        // A product the narrowing does not touch (32-bit already, in a 32-bit local) adds
        // nothing.
        let g = guards("const size_t at = (size_t)(blockIdx.x * blockDim.x + threadIdx.x);\n  const int c = blockIdx.x * 512;\n  if (c < 0) return;");
        assert!(!g.iter().any(|x| x.contains("2097152")), "{g:?}");
        // Shifts, compound assignments and a 32-bit parameter under a narrowed cast.
        let g = guards("const size_t at = (size_t)(blockIdx.x * blockDim.x + threadIdx.x) << 3;");
        assert_eq!(g.last().map(String::as_str), Some("(long long)grid * block <= 134217728LL"), "{g:?}");
        let g = guards("size_t at = (size_t)(blockIdx.x * blockDim.x + threadIdx.x);\n  at *= 8;");
        assert_eq!(g.last().map(String::as_str), Some("(long long)grid * block <= 134217728LL"), "{g:?}");
        let src = SRC.replace("  if (i >= total) return;", "  if (i >= total || i >= (size_t)cols * 4) return;");
        let g = apply(&Source::parse(&src), &facts(1 << 24), &Params::default()).unwrap().guards;
        assert!(g.contains(&"(cols) <= 268435456LL".to_string()), "{g:?}");
        // A narrowed local assigned in a loop counts as an index; a ternary as either side.
        let g = guards("for (size_t e = (size_t)(blockIdx.x * blockDim.x + threadIdx.x); e * 4 < n; e += 4096) {}\n  const size_t at = (size_t)(blockIdx.x * blockDim.x + threadIdx.x);");
        assert_eq!(g.last().map(String::as_str), Some("(long long)grid * block <= 268435456LL"), "{g:?}");
        let g = guards("const size_t at = (size_t)(threadIdx.x > 0 ? blockIdx.x * blockDim.x : threadIdx.x) * 4;");
        assert_eq!(g.last().map(String::as_str), Some("(long long)grid * block <= 268435456LL"), "{g:?}");
        // More than two terms share the room two have: each of four gets half.
        let g = guards("const size_t at = (size_t)(blockIdx.x * blockDim.x + threadIdx.x);\n  const size_t far = at * 2 + at * 2 + at * 2 + at * 2;\n  if (far < 0) return;");
        assert_eq!(g.last().map(String::as_str), Some("(long long)grid * block <= 268435456LL"), "{g:?}");
        // Nested literal factors multiply: a block's start times 256, then times 4.
        let g = guards("const size_t at = ((size_t)blockIdx.x * 256 + threadIdx.x) * 4;");
        assert!(g.contains(&"(long long)grid <= 1048576LL".to_string()), "{g:?}");
    }

    #[test]
    fn declines_when_the_task_is_too_large_or_already_32_bit() {
        let e = apply(&Source::parse(SRC), &facts(1 << 31), &Params::default()).unwrap_err();
        assert!(e.0.contains("past the"), "{e}");
        let narrow = SRC.replace("size_t", "int");
        let e = apply(&Source::parse(&narrow), &facts(1 << 24), &Params::default()).unwrap_err();
        assert!(e.0.contains("32 bits already"), "{e}");
    }

    /// A 2-D kernel (rows by `blockIdx.y`/`threadIdx.y`) with a 64-bit flat index, launched from `body`.
    fn two_d(body: &str) -> String {
        format!("__global__ void k(const float* x, float* y, int w, int h) {{\n  int c = blockIdx.x * blockDim.x + threadIdx.x;\n  int r = blockIdx.y * blockDim.y + threadIdx.y;\n  if (c < w && r < h) {{\n    size_t i = (size_t)r * w + c;\n    y[i] = x[i] * 2.0f;\n  }}\n}}\nextern \"C\" void launch(const float* x, float* y, int w, int h, cudaStream_t s) {{\n  {body}\n}}\n")
    }

    fn two_d_facts() -> Facts {
        FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "(long long)({w}) * ({h})", 1 << 24, 1 << 24)
            .buffer("y", "float", Role::Output, "(long long)({w}) * ({h})", 1 << 24, 1 << 24)
            .int("w", 4096, 4096)
            .int("h", 4096, 4096)
            .build()
    }

    /// The condition of the versioned launch.
    fn condition(source: &str) -> &str {
        let at = source.find("if (/* nightshift: fast path */ ").map(|a| a + 32).unwrap_or(0);
        let end = source[at..].find(") {\n").map_or(source.len(), |e| at + e);
        &source[at..end]
    }

    #[test]
    fn the_thread_count_check_multiplies_dim3_components_the_kernel_reads() {
        let r = apply(
            &Source::parse(&two_d("dim3 block(16, 16);\n  dim3 grid((w + 15) / 16, (h + 15) / 16);\n  k<<<grid, block, 0, s>>>(x, y, w, h);")),
            &two_d_facts(),
            &Params::default(),
        )
        .unwrap();
        assert_eq!(r.guards[1], "(long long)grid.x * block.x * grid.y * block.y <= 1073741824LL");
        assert_eq!(
            condition(&r.source),
            "(((long long)(w) * (h)) <= 1073741824LL) && ((long long)(grid.x) * (block.x) * (grid.y) * (block.y) <= 1073741824LL)"
        );
        // Written in the launch, each component is used as written; a block of one row
        // adds no factor for y.
        let r = apply(
            &Source::parse(&two_d(
                "const int t = 256;\n  k<<<dim3((w + t - 1) / t, h), dim3(t, 1), 0, s>>>(x, y, w, h);",
            )),
            &two_d_facts(),
            &Params::default(),
        )
        .unwrap();
        assert_eq!(
            condition(&r.source),
            "(((long long)(w) * (h)) <= 1073741824LL) && ((long long)((w + t - 1) / t) * (t) * (h) <= 1073741824LL)"
        );
    }

    #[test]
    fn a_1d_dim3_block_is_read_by_its_x_component() {
        let src = SRC.replace(
            "  k<<<(unsigned)((total + 255) / 256), 256, 0, s>>>",
            "  dim3 block(256);\n  k<<<(unsigned)((total + 255) / 256), block, 0, s>>>",
        );
        let r = apply(&Source::parse(&src), &facts(1 << 24), &Params::default()).unwrap();
        assert_eq!(r.guards.last().map(String::as_str), Some("(long long)grid * block <= 1073741824LL"));
        assert!(
            r.source.contains("((long long)((unsigned)((total + 255) / 256)) * ((block).x) <= 1073741824LL)"),
            "{}",
            r.source
        );
    }

    #[test]
    fn declines_where_the_launch_shape_has_no_type_in_this_file() {
        let e =
            apply(&Source::parse(&two_d("k<<<g, kBlock, 0, s>>>(x, y, w, h);")), &two_d_facts(), &Params::default())
                .unwrap_err();
        assert_eq!(
            e.0,
            "the grid of a launch of `k` is `g`, declared nowhere in this file, so a thread-count check cannot tell a number from a dim3"
        );
    }
}
