//! Row cache: a kernel that passes over the same row two or three times (a sum of
//! squares, then the normalized values; a max, a sum of exponentials, then the
//! probabilities; an absolute max, then the quantized values) reads the row once. The
//! first pass that reads a buffer at its loop index keeps what it loads in a register
//! array, `T ns_row_x[K]`, and the later passes read the array instead of memory. Every
//! such pass becomes a fully unrolled loop over the K elements a thread owns (`j = start +
//! r * stride` while the original condition holds), so the array stays in registers.
//!
//! Loops strided across a block (`for (j = threadIdx.x; j < n; j += blockDim.x)`) or across
//! a group's lanes (`for (j = lane; j < n; j += 32)`, as `cooperative` writes them)
//! qualify. Each element stays with the thread that owned it and each pass visits a
//! thread's elements in the order it did, so reductions add in the order they did and
//! every value is the one the original loaded. The launcher takes the fast copy only when
//! a row fits (`n <= K * stride`), and the kernel as it was otherwise. The buffer must be
//! an input the task says the kernel only reads (so no write elsewhere can change it
//! between passes), never written through in the kernel, and read unconditionally by the
//! pass that loads it.

use crate::facts::{ArgKind, Facts, Role};
use crate::launch;
use crate::pattern::{self, Access, Spread, StridedLoop};
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{self, binary, builtin, descendants, flatten, indent_at, named_children, reindent, strip, text};
use crate::version::Change;
use std::ops::Range;
use tree_sitter::Node;

mod wide;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "elems",
    values: &["auto", "4", "8", "16", "32"],
    doc: "row elements a thread keeps in registers per cached buffer (auto: the fewest, a power of two, that hold the task's longest row, else its bench row)",
}];

/// The most elements a thread keeps of one buffer.
const MOST: i64 = 32;

/// Elements per thread where the task gives no row length or stride to choose by.
const UNKNOWN: i64 = 8;

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let elems = match params.get(PARAMS, "elems") {
        "auto" => None,
        v => Some(v.parse::<i64>().map_err(|_| NotApplicable::new("elems must be auto, 4, 8, 16 or 32"))?),
    };
    super::per_kernel(src, params, |k| plan(src, facts, k, elems))
}

fn decline(k: &Kernel, why: impl AsRef<str>) -> NotApplicable {
    NotApplicable::new(format!("`{}` {}", k.name, why.as_ref()))
}

/// One strided loop with the nodes of its header.
struct Pass<'t> {
    l: StridedLoop,
    node: Node<'t>,
    /// The start as written (`threadIdx.x`, `(0) + ns_lane`).
    start: Node<'t>,
    cond: Node<'t>,
    bound: Node<'t>,
    stride: Node<'t>,
}

impl Pass<'_> {
    /// What makes two loops run over the same elements in the same order per thread.
    fn key(&self, t: &str) -> (bool, String, String, String) {
        let squeeze = |n: Node| squeeze(text(t, n));
        (self.l.spread == Spread::Block, squeeze(self.start), squeeze(self.stride), squeeze(self.bound))
    }

    fn over(&self) -> String {
        format!("the loop over `{}`", self.l.bound)
    }
}

fn pass<'t>(src: &'t Source, l: StridedLoop) -> Option<Pass<'t>> {
    let t = src.text();
    let node = src.node(&l.stmt, "for_statement")?;
    let init = node.child_by_field_name("initializer")?;
    let (_, start) = syntax::single_declarator(t, init)?;
    let cond = node.child_by_field_name("condition")?;
    let (op, left, right) = binary(t, cond)?;
    // `j < n` only: the check that a row fits counts `n` elements.
    let bound = match op {
        "<" if syntax::is_ident(t, left, &l.index) => right,
        ">" if syntax::is_ident(t, right, &l.index) => left,
        _ => return None,
    };
    let stride = node.child_by_field_name("update")?.child_by_field_name("right")?;
    Some(Pass { start: start?, cond, bound, stride, node, l })
}

/// A buffer's reads in one pass: the sites (`x[base + j]`), the base they share, and
/// whether any sits under a condition.
struct Reads {
    sites: Vec<Range<usize>>,
    base: Option<String>,
    conditional: bool,
}

/// How pass `p` reads pointer `name`: None when it does not use it at all; an error that
/// says how it uses it otherwise than as a value at the loop index.
fn reads(t: &str, p: &Pass, name: &str, is_const: bool) -> Result<Option<Reads>, String> {
    let uses = pattern::indexed_uses(t, p.node, &p.l.body, name, &p.l.index, is_const);
    if uses.sites.is_empty() && !uses.other {
        return Ok(None);
    }
    let over = p.over();
    let j = &p.l.index;
    if uses.other {
        let in_site = |n: Node| uses.sites.iter().any(|(r, _, _)| r.start <= n.start_byte() && n.end_byte() <= r.end);
        let first =
            descendants(p.node).into_iter().find(|d| d.kind() == "identifier" && text(t, *d) == name && !in_site(*d));
        let mut e = first.unwrap_or(p.node);
        while let Some(up) = e.parent() {
            if !matches!(
                up.kind(),
                "subscript_expression"
                    | "pointer_expression"
                    | "parenthesized_expression"
                    | "cast_expression"
                    | "argument_list"
                    | "call_expression"
            ) {
                break;
            }
            e = up;
        }
        return Err(format!("{over} uses `{name}` in `{}`, not as `{name}[...]` at the loop index `{j}`", text(t, e)));
    }
    let mut out = Reads { sites: Vec::new(), base: None, conditional: uses.conditional };
    for (i, (r, access, a)) in uses.sites.iter().enumerate() {
        let site = &t[r.clone()];
        if *access != Access::Read {
            return Err(format!("{over} writes `{site}`"));
        }
        let node = p.node.descendant_for_byte_range(r.start, r.end).filter(|n| n.byte_range() == *r);
        let value = node.is_some_and(|n| {
            n.kind() == "subscript_expression"
                && !n.parent().is_some_and(|up| up.kind() == "pointer_expression" && text(t, up).starts_with('&'))
        });
        if !value {
            return Err(format!("{over} takes the address `{site}` of `{name}`, not only its values"));
        }
        if a.scale != 1 || a.offset != 0 {
            return Err(format!("{over} reads `{site}`, not `{name}` at the loop index `{j}`"));
        }
        if i > 0 && out.base != a.base {
            return Err(format!(
                "{over} reads `{name}` at two different indices (`{}` and `{site}`)",
                &t[uses.sites[0].0.clone()]
            ));
        }
        out.base = a.base.clone();
        out.sites.push(r.clone());
    }
    Ok(Some(out))
}

/// The kernel parameter a pointer comes from: itself, or the one a local pointer that no
/// statement assigns again is declared from (`const float* row = x + (size_t)blockIdx.x
/// * cols;`, `= &x[off]`).
fn origin(t: &str, body: Node, k: &Kernel, name: &str, depth: usize) -> Option<String> {
    if let Some(p) = k.param(name) {
        return p.pointer.then(|| name.to_string());
    }
    if depth > 8
        || syntax::declared_names(t, body).iter().filter(|n| *n == name).count() != 1
        || syntax::assigned(t, body).iter().any(|(n, _)| n == name)
    {
        return None;
    }
    let value = descendants(body).into_iter().find_map(|d| {
        if d.kind() != "init_declarator" {
            return None;
        }
        let mut x = d.child_by_field_name("declarator")?;
        while x.kind() == "pointer_declarator" {
            x = x.child_by_field_name("declarator")?;
        }
        (x.kind() == "identifier" && text(t, x) == name).then(|| d.child_by_field_name("value")).flatten()
    })?;
    let value = strip(value);
    let from = |n: Node| {
        let n = strip(n);
        (n.kind() == "identifier").then(|| origin(t, body, k, text(t, n), depth + 1)).flatten()
    };
    if value.kind() == "pointer_expression" && text(t, value).starts_with('&') {
        let inner = strip(value.child_by_field_name("argument")?);
        return (inner.kind() == "subscript_expression")
            .then(|| from(inner.child_by_field_name("argument")?))
            .flatten();
    }
    let found: Vec<String> = flatten(t, value, "+").into_iter().filter_map(from).collect();
    (found.len() == 1).then(|| found[0].clone())
}

/// A statement of the kernel that writes through a pointer coming from parameter `root`
/// (an assignment through it, an atomic or a store on it).
fn written_through(t: &str, body: Node, k: &Kernel, root: &str) -> Option<String> {
    let from_root = |n: Node| {
        descendants(n)
            .into_iter()
            .any(|d| d.kind() == "identifier" && origin(t, body, k, text(t, d), 0).is_some_and(|o| o == root))
    };
    descendants(body).into_iter().find_map(|d| {
        let hit = match d.kind() {
            "assignment_expression" | "update_expression" => {
                let target = d.child_by_field_name("left").or_else(|| d.child_by_field_name("argument"));
                target.map(syntax::strip_parens).is_some_and(|x| {
                    matches!(x.kind(), "subscript_expression" | "pointer_expression" | "field_expression")
                        && from_root(x)
                })
            }
            "call_expression" => {
                let f = d.child_by_field_name("function").map(|f| text(t, f)).unwrap_or("");
                (f.contains("atomic") || f.starts_with("__st") || f.contains("memcpy") || f.contains("memset"))
                    && d.child_by_field_name("arguments")
                        .and_then(|a| named_children(a).into_iter().next())
                        .is_some_and(from_root)
            }
            _ => false,
        };
        hit.then(|| text(t, d).to_string())
    })
}

/// The value of a size as the file fixes it: a literal, a macro or constant above the
/// kernel, or `blockDim.x` where every launch's block is fixed.
fn value_of(src: &Source, k: &Kernel, n: Node) -> Option<i64> {
    let t = src.text();
    let n = strip(n);
    match n.kind() {
        "number_literal" => pattern::int_literal(text(t, n)),
        "identifier" => launch::file_scope_size(src, text(t, n), k.range.start).value(),
        _ if builtin(t, n) == Some(("blockDim", 'x')) => {
            let values: Vec<Option<i64>> = src
                .launches_of(&k.name)
                .iter()
                .map(|l| launch::block(src, l).and_then(|b| b.component(0).and_then(|c| c.size.value())))
                .collect();
            let first = *values.first()?;
            values.iter().all(|v| *v == first).then_some(first).flatten()
        }
        _ => None,
    }
}

/// The bench and largest values of a loop bound, where it is a literal or a parameter
/// the launcher passes straight from one of the task's sizes.
fn bound_sizes(src: &Source, facts: &Facts, k: &Kernel, n: Node) -> Option<(Option<i64>, Option<i64>)> {
    let t = src.text();
    let n = strip(n);
    if n.kind() == "number_literal" {
        let v = pattern::int_literal(text(t, n));
        return Some((v, v));
    }
    if n.kind() != "identifier" {
        return None;
    }
    let arg = crate::launcher_arg(src, facts, k, text(t, n))?;
    match &facts.args.get(arg)?.kind {
        ArgKind::Scalar { bench, max, .. } => Some((*bench, *max)),
        _ => None,
    }
}

/// An expression of the kernel as the launcher writes it for [`crate::version::bind`]:
/// parameters as `{name}`, `blockDim.x` as `{@block}`, literals, and macros and constants
/// of the file above the kernel; the error says, as a clause, what the launcher cannot see.
fn at_launcher(src: &Source, k: &Kernel, body: Node, n: Node) -> Result<String, String> {
    let t = src.text();
    let assigned = syntax::assigned(t, body);
    let mut edits = crate::edit::Edits::new();
    let base = n.start_byte();
    let mut taken: Vec<Range<usize>> = Vec::new();
    for d in descendants(n) {
        if taken.iter().any(|r| r.start <= d.start_byte() && d.end_byte() <= r.end) {
            continue;
        }
        if let Some(b) = builtin(t, d) {
            if b != ("blockDim", 'x') {
                return Err(format!("`{}` differs between threads or blocks", text(t, d)));
            }
            let s = strip(d);
            edits.replace(s.start_byte() - base..s.end_byte() - base, "{@block}");
            taken.push(s.byte_range());
            continue;
        }
        match d.kind() {
            "identifier" => {
                let name = text(t, d);
                if let Some((_, a)) = assigned.iter().find(|(a, _)| a == name) {
                    return Err(format!("the kernel changes `{name}` (`{}`)", text(t, *a)));
                }
                if k.param(name).is_some_and(|p| !p.pointer) {
                    edits.replace(d.start_byte() - base..d.end_byte() - base, format!("{{{name}}}"));
                } else if launch::file_scope_size(src, name, k.range.start).value().is_none() {
                    return Err(format!("`{name}` is no parameter of the kernel or constant of the file"));
                }
            }
            "call_expression" | "subscript_expression" | "field_expression" | "pointer_expression" => {
                return Err(format!("`{}` is computed in the kernel", text(t, d)))
            }
            _ => {}
        }
    }
    let out = edits.apply(text(t, n)).map_err(|_| text(t, n).to_string())?;
    let simple = out.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '{' | '}' | '@'));
    Ok(if simple { out } else { format!("({out})") })
}

/// A buffer kept in registers across the passes of one group.
struct Cached {
    name: String,
    /// The register array.
    array: String,
    elem: String,
    /// The pass (index into the group) that loads it, and every later pass that reads it.
    load: usize,
    readers: Vec<usize>,
    /// Each pass's reads (None where it does not read it).
    reads: Vec<Option<Reads>>,
}

fn plan<'k>(
    src: &Source,
    facts: &Facts,
    k: &'k Kernel,
    elems: Option<i64>,
) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    if k.has_error {
        return Err(decline(k, "contains syntax this parser does not know"));
    }
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| decline(k, "has no body"))?;
    if let Some(wide) = wide::plan(src, facts, k, body, elems) {
        return wide.map_err(|e| NotApplicable::new(format!("`{}`: {e}", k.name)));
    }
    let loops: Vec<StridedLoop> = pattern::strided_loops(src, k);
    let any_grid = loops.iter().any(|l| l.spread == Spread::Grid);
    let passes: Vec<Pass> =
        loops.into_iter().filter(|l| l.spread != Spread::Grid).filter_map(|l| pass(src, l)).collect();
    if passes.is_empty() {
        return Err(decline(k, no_passes(t, body, any_grid)));
    }
    if descendants(body).iter().any(|d| d.kind() == "goto_statement") {
        return Err(decline(k, "jumps with `goto`, so a pass could run without the one that loads the row"));
    }
    // Passes over the same elements per thread, in source order.
    let groups = alike(&passes.iter().map(|p| p.key(t)).collect::<Vec<_>>());
    if groups.is_empty() {
        let bounds: Vec<String> = passes.iter().map(|p| format!("`{}`", p.l.bound)).collect();
        return Err(decline(
            k,
            format!("makes one pass over each row (strided loops over {}): no row is read twice", bounds.join(", ")),
        ));
    }
    let candidates = pattern::pointers(src, k);
    let mut change = Change::new(k);
    let mut notes = Vec::new();
    let mut why: Vec<String> = Vec::new();
    let mut names_taken: Vec<String> = syntax::declared_names(t, body);
    for g in &groups {
        let group: Vec<&Pass> = g.iter().map(|i| &passes[*i]).collect();
        let first = group[0];
        let mut cached: Vec<Cached> = Vec::new();
        for (name, elem, is_const) in &candidates {
            match cache_plan(src, facts, k, body, &group, name, *is_const) {
                Ok(None) => {}
                Ok(Some((load, readers, reads))) => {
                    let array = fresh(t, &mut names_taken, &format!("ns_row_{name}"));
                    let elem = syntax::unqualified(elem);
                    cached.push(Cached { name: name.clone(), array, elem, load, readers, reads });
                }
                Err(e) => why.push(e),
            }
        }
        if cached.is_empty() {
            continue;
        }
        // The launcher's check that a row fits, and how many elements a thread keeps.
        let bound = at_launcher(src, k, body, first.bound).map_err(|e| {
            format!(
                "{} ends at `{}`, and the launcher cannot check a row's length against it: {e}",
                first.over(),
                text(t, first.bound)
            )
        });
        let stride = at_launcher(src, k, body, first.stride).map_err(|e| {
            format!("{} steps by `{}`, which the launcher cannot see: {e}", first.over(), text(t, first.stride))
        });
        let (bound, stride) = match (bound, stride) {
            (Ok(b), Ok(s)) => (b, s),
            (Err(e), _) | (_, Err(e)) => {
                why.push(e);
                continue;
            }
        };
        if let Some(b) = &first.l.base {
            why.push(format!(
                "{} starts each row at `{b}`, a value of the kernel's the launcher cannot check a row's length from",
                first.over()
            ));
            continue;
        }
        let per = match per_thread(src, facts, k, first, elems) {
            Ok(n) => n,
            Err(e) => {
                why.push(e);
                continue;
            }
        };
        change.guards.push(format!("{bound} <= {per} * {stride}"));
        let involved: Vec<usize> =
            (0..group.len()).filter(|i| cached.iter().any(|c| c.load == *i || c.readers.contains(i))).collect();
        for i in &involved {
            let p = group[*i];
            let code = pass_code(t, p, *i, &cached, per);
            // An unroll pragma of the loop gives way to the full unroll.
            let pragma = p
                .node
                .prev_named_sibling()
                .filter(|x| x.kind() == "preproc_call" && text(t, *x).trim_start().starts_with("#pragma unroll"));
            let at = pragma.map_or(p.l.stmt.start, |x| x.start_byte())..p.l.stmt.end;
            change.edits.replace(at, reindent(&code, &indent_at(t, p.l.stmt.start)));
        }
        let names: Vec<String> = cached.iter().map(|c| format!("`{}`", c.name)).collect();
        notes.push(format!(
            "{} kept in registers across {} passes over `{}` ({per} per thread), read once",
            names.join(", "),
            involved.len(),
            first.l.bound
        ));
    }
    if notes.is_empty() {
        why.dedup();
        if why.is_empty() {
            let bounds: Vec<String> = groups.iter().map(|g| format!("`{}`", passes[g[0]].l.bound)).collect();
            return Err(decline(
                k,
                format!("reads no buffer at the loop index in two of its passes over {}", bounds.join(", ")),
            ));
        }
        return Err(NotApplicable::new(format!("`{}`: {}", k.name, why.join("; "))));
    }
    Ok((change, format!("`{}`: {}", k.name, notes.join("; "))))
}

/// Text without its whitespace, to compare code as written.
fn squeeze(s: &str) -> String {
    s.split_whitespace().collect()
}

/// A name like `want` that nothing in the file or this rewrite uses yet.
fn fresh(t: &str, taken: &mut Vec<String>, want: &str) -> String {
    let mut name = want.to_string();
    let mut n = 2;
    while taken.contains(&name) || syntax::mentions_word(t, &name) {
        name = format!("{want}{n}");
        n += 1;
    }
    taken.push(name.clone());
    name
}

/// The indices of equal keys, a group for each key two or more share, in order.
fn alike<K: PartialEq>(keys: &[K]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        match groups.iter_mut().find(|g| keys[g[0]] == *key) {
            Some(g) => g.push(i),
            None => groups.push(vec![i]),
        }
    }
    groups.retain(|g| g.len() >= 2);
    groups
}

/// Why a kernel has no pass this recipe takes, in the terms of the loops it has.
fn no_passes(t: &str, body: Node, any_grid: bool) -> String {
    if any_grid {
        return "strides only across the grid, over ranges no fixed number of registers per thread holds".into();
    }
    if text(t, body).contains("/* nightshift: aligned */") {
        return "has its strided loops vectorized already (`vectorize`: runs of elements per step behind an alignment check), which this recipe does not cache".into();
    }
    let loops: Vec<Node> = descendants(body).into_iter().filter(|d| d.kind() == "for_statement").collect();
    let header = |f: Node| {
        let end = f.child_by_field_name("body").map_or(f.end_byte(), |b| b.start_byte());
        t[f.start_byte()..end].trim_end().to_string()
    };
    // `for (j = tid; ...)` where `tid` is a local copy of `threadIdx.x`.
    for f in &loops {
        let start =
            f.child_by_field_name("initializer").and_then(|i| syntax::single_declarator(t, i)).and_then(|d| d.1);
        let Some(start) = start.map(strip).filter(|s| s.kind() == "identifier") else { continue };
        let name = text(t, start);
        let copies = descendants(body).into_iter().any(|d| {
            syntax::single_declarator(t, d)
                .is_some_and(|(n, v)| n == name && v.is_some_and(|v| builtin(t, v) == Some(("threadIdx", 'x'))))
        });
        if copies {
            return format!(
                "starts its loops at `{name}`, a local copy of `threadIdx.x` (`{}`); the block-strided loops this recipe takes, like `vectorize`, start at `threadIdx.x` itself",
                header(*f)
            );
        }
    }
    // The kernel's own loops: not the element loops a recipe wrote (`ns_k`).
    let unit = loops.iter().filter(|f| !header(**f).contains("ns_")).find(|f| {
        f.child_by_field_name("update").is_some_and(|u| {
            let u = text(t, u).replace(' ', "");
            u.contains("++") || u.ends_with("+=1")
        })
    });
    match unit {
        Some(f) => format!(
            "runs its loops in one thread, one element a step (`{}`), none strided across a block or a group's lanes (`cooperative` strides a thread-per-row loop across lanes)",
            header(*f)
        ),
        None => "has no loop strided across a block (`for (j = threadIdx.x; j < n; j += blockDim.x)`) or a group's lanes (`for (j = lane; j < n; j += 32)`)".into(),
    }
}

type Plan = Option<(usize, Vec<usize>, Vec<Option<Reads>>)>;

/// Whether buffer `name` can be kept in registers across the passes of `group`: the pass
/// that loads it, the later passes that read it, and each pass's reads; None when fewer
/// than two passes read it; an error that says why it cannot be.
fn cache_plan(
    src: &Source,
    facts: &Facts,
    k: &Kernel,
    body: Node,
    group: &[&Pass],
    name: &str,
    is_const: bool,
) -> Result<Plan, String> {
    let t = src.text();
    let uses: Vec<Result<Option<Reads>, String>> = group.iter().map(|p| reads(t, p, name, is_const)).collect();
    // A buffer one pass alone uses has nothing to keep between passes, however it is used.
    if uses.iter().filter(|u| !matches!(u, Ok(None))).count() < 2 {
        return Ok(None);
    }
    let reads_of = uses.into_iter().collect::<Result<Vec<_>, _>>()?;
    let readers: Vec<usize> = (0..group.len()).filter(|i| reads_of[*i].is_some()).collect();
    let load = readers[0];
    let lp = group[load];
    let over = lp.over();
    let first_reads = reads_of[load].as_ref().and_then(|r| r.base.clone());
    // A later pass that reads it at another index keeps reading memory.
    let base_of = |i: usize| reads_of[i].as_ref().and_then(|r| r.base.clone());
    let later: Vec<usize> = readers[1..].iter().copied().filter(|i| base_of(*i) == first_reads).collect();
    if later.is_empty() {
        let show = |b: Option<String>, j: &str| match b {
            Some(b) => format!("{b} + {j}"),
            None => j.to_string(),
        };
        let other = readers[1];
        return Err(format!(
            "a later pass over `{}` reads `{name}` at `{}`, another index than the first's `{}`",
            lp.l.bound,
            show(base_of(other), &group[other].l.index),
            show(first_reads, &lp.l.index)
        ));
    }
    let mut reads_of = reads_of;
    for (i, r) in reads_of.iter_mut().enumerate() {
        if i != load && !later.contains(&i) {
            *r = None;
        }
    }
    read_only_input(src, facts, k, body, name)?;
    if reads_of[load].as_ref().is_some_and(|r| r.conditional) {
        return Err(format!(
            "{over}, the first pass that reads `{name}`, reads it only under a condition, so loading every element there could read what the original never does"
        ));
    }
    if descendants(lp.node).iter().any(|d| d.kind() == "continue_statement") {
        return Err(format!(
            "{over}, the first pass that reads `{name}`, can skip an element (`continue`) before reading it"
        ));
    }
    // The array is declared beside the loading pass: every later pass must be in scope.
    let block = lp.node.parent().filter(|b| b.kind() == "compound_statement").ok_or_else(|| {
        format!(
            "{over}, the first pass that reads `{name}`, is not a statement of a block that could hold its registers"
        )
    })?;
    let last = group[*later.last().unwrap_or(&load)];
    if later.iter().any(|i| group[*i].node.end_byte() > block.end_byte()) {
        return Err(format!(
            "a later pass over `{}` that reads `{name}` lies outside the block of the first",
            lp.l.bound
        ));
    }
    // What the passes' ranges and the reads' index are made of holds still in between.
    let span = lp.l.stmt.start..last.l.stmt.end;
    let mut words: Vec<String> = vec![name.to_string()];
    for p in [lp, last] {
        for n in [p.start, p.stride, p.bound] {
            words.extend(syntax::identifiers(t, n).into_iter().map(str::to_string));
        }
    }
    let declared = syntax::declared_names(t, body);
    let changed = syntax::assigned(t, body)
        .into_iter()
        .filter(|(_, a)| a.start_byte() < span.end && a.end_byte() > span.start)
        .find(|(n, _)| words.contains(n) || first_reads.as_deref().is_some_and(|b| syntax::mentions_word(b, n)));
    if let Some((n, a)) = changed {
        return Err(format!(
            "changes `{n}` between its passes over `{}` (`{}`), so they may not read the same elements of `{name}`",
            lp.l.bound,
            text(t, a)
        ));
    }
    let mut used = words.clone();
    if let Some(b) = &first_reads {
        let names = declared.iter().chain(k.params.iter().map(|p| &p.name));
        used.extend(names.filter(|d| syntax::mentions_word(b, d)).cloned());
    }
    // A parameter counts as a declaration: a local of its name would hide it in a pass.
    let declarations = |w: &String| declared.iter().filter(|d| *d == w).count() + usize::from(k.param(w).is_some());
    if let Some(n) = used.iter().find(|w| declarations(w) > 1) {
        return Err(format!("declares `{n}` more than once, so its passes may not read `{name}` at the same elements"));
    }
    Ok(Some((load, later, reads_of)))
}

/// Whether the buffer behind pointer `name` is an input the task says the kernel only
/// reads, and the kernel never writes it: only such a buffer can be read once for all
/// passes, as a write through another pointer could otherwise change it in between.
fn read_only_input(src: &Source, facts: &Facts, k: &Kernel, body: Node, name: &str) -> Result<(), String> {
    let t = src.text();
    let root = origin(t, body, k, name, 0).ok_or_else(|| {
        format!("`{name}` is neither a parameter nor a local pointer declared once from one and never assigned")
    })?;
    let arg = crate::launcher_arg(src, facts, k, &root).ok_or_else(|| {
        format!(
            "`{root}` is not passed straight from an argument of the launcher, so the task cannot say it is only read"
        )
    })?;
    if facts.args.get(arg).and_then(|a| a.role()) != Some(Role::Input) {
        return Err(format!(
            "the task does not declare the buffer behind `{name}` an input the kernel only reads, so a write elsewhere could change it between passes"
        ));
    }
    // Through itself, or through another parameter the launcher hands the same buffer.
    let same: Vec<&str> = k
        .params
        .iter()
        .filter(|p| p.pointer && crate::launcher_arg(src, facts, k, &p.name) == Some(arg))
        .map(|p| p.name.as_str())
        .collect();
    if let Some(w) = same.iter().find_map(|p| written_through(t, body, k, p)) {
        return Err(format!("writes the buffer behind `{name}` (`{w}`)"));
    }
    Ok(())
}

/// How many elements a thread keeps: the one asked for, or the fewest (a power of two)
/// that hold the task's longest row, else its bench row.
fn per_thread(src: &Source, facts: &Facts, k: &Kernel, p: &Pass, elems: Option<i64>) -> Result<i64, String> {
    let stride = value_of(src, k, p.stride);
    let (bench, max) = bound_sizes(src, facts, k, p.bound).unwrap_or((None, None));
    let need = |n: i64, s: i64| (n.max(1) + s - 1) / s;
    match (elems, stride) {
        (Some(e), Some(s)) => match bench {
            Some(b) if b > e * s => Err(format!(
                "{} holds rows of up to {} elements with {e} per thread, but the task's bench rows have {b}: the fast path would never run at the bench size",
                p.over(),
                e * s
            )),
            _ => Ok(e),
        },
        (Some(e), None) => Ok(e),
        (None, Some(s)) => {
            let fit = |n: i64| (need(n, s) as u64).next_power_of_two() as i64;
            match (max.map(fit), bench.map(fit)) {
                (Some(m), _) if m <= MOST => Ok(m),
                (_, Some(b)) if b <= MOST => Ok(b),
                (_, Some(_)) => Err(format!(
                    "{} runs {} times per thread at the task's bench size (a stride of {s}), past the {MOST} elements a thread keeps",
                    p.over(),
                    need(bench.unwrap_or(0), s)
                )),
                _ => Ok(UNKNOWN),
            }
        }
        (None, None) => Ok(UNKNOWN),
    }
}

/// A pass as a fully unrolled loop over the thread's `per` elements, reading the cached
/// buffers from their register arrays (and loading them, in the pass that loads them).
fn pass_code(t: &str, p: &Pass, at: usize, cached: &[Cached], per: i64) -> String {
    let ty = p.l.index_type.replace("const ", "").trim().to_string();
    let j = &p.l.index;
    let mut decls = String::new();
    let mut loaded = Vec::new();
    let mut loads = String::new();
    let mut sites: Vec<(Range<usize>, String)> = Vec::new();
    for c in cached {
        let Some(r) = c.reads.get(at).and_then(|r| r.as_ref()) else { continue };
        let slot = format!("{}[ns_r]", c.array);
        if c.load == at {
            loaded.push(format!("`{}`", c.name));
            decls.push_str(&format!("{} {}[{per}];\n", c.elem, c.array));
            loads.push_str(&format!("{slot} = {};\n", &t[r.sites[0].clone()]));
        }
        for s in &r.sites {
            sites.push((s.clone(), slot.clone()));
        }
    }
    if !loaded.is_empty() {
        decls.insert_str(
            0,
            &format!(
                "// nightshift: {} kept in registers, {per} elements per thread: read once, not once per pass.\n",
                loaded.join(", ")
            ),
        );
    }
    let mut body = String::new();
    for r in &p.l.body {
        let mut edits = crate::edit::Edits::new();
        for (s, with) in &sites {
            if s.start >= r.start && s.end <= r.end {
                edits.replace(s.start - r.start..s.end - r.start, with.clone());
            }
        }
        body.push_str(&edits.apply(&t[r.clone()]).unwrap_or_else(|_| t[r.clone()].to_string()));
        body.push('\n');
    }
    let inner = format!("{loads}{}", body.trim_end());
    format!(
        "{decls}#pragma unroll\nfor (int ns_r = 0; ns_r < {per}; ++ns_r) {{\n  const {ty} {j} = {} + ns_r * {};\n  if ({}) {{\n    {}\n  }}\n}}",
        parenthesized(text(t, p.start)),
        parenthesized(text(t, p.stride)),
        text(t, p.cond),
        reindent(&inner, "    ")
    )
}

/// `e` in parentheses unless it is a name, a number or a member (`threadIdx.x`).
fn parenthesized(e: &str) -> String {
    if e.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.')) {
        e.to_string()
    } else {
        format!("({e})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    pub(super) const LAYERNORM: &str = r#"#include <cuda_runtime.h>
#define BLOCK 256
__device__ float block_sum(float v, float* red);

__global__ void layernorm_rows(const float* x, const float* gamma, const float* beta, float* y, int cols, float eps) {
  __shared__ float red[BLOCK];
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) s += row[c];
  const float mean = block_sum(s, red) / cols;
  float v = 0.f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) {
    const float d = row[c] - mean;
    v += d * d;
  }
  const float rstd = rsqrtf(block_sum(v, red) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += BLOCK) out[c] = (row[c] - mean) * rstd * gamma[c] + beta[c];
}

extern "C" void layernorm(const float* x, const float* gamma, const float* beta, float* y, int rows, int cols, float eps,
                          cudaStream_t stream) {
  layernorm_rows<<<rows, BLOCK, 0, stream>>>(x, gamma, beta, y, cols, eps);
}
"#;

    pub(super) fn facts(x: Role) -> Facts {
        sized(x, 4096, 2048, 4096)
    }

    /// LAYERNORM's facts with `x` in the role given, `rows` rows and `cols` at the bench
    /// size and at most.
    pub(super) fn sized(x: Role, rows: i64, cols: i64, most_cols: i64) -> Facts {
        FactsBuilder::new("layernorm")
            .buffer("x", "float", x, "{rows} * {cols}", rows * cols, rows * most_cols)
            .buffer("gamma", "float", Role::Input, "{cols}", cols, most_cols)
            .buffer("beta", "float", Role::Input, "{cols}", cols, most_cols)
            .buffer("y", "float", Role::Output, "{rows} * {cols}", rows * cols, rows * most_cols)
            .int("rows", rows, rows)
            .int("cols", cols, most_cols)
            .float("eps")
            .build()
    }

    fn run(src: &str, elems: &str) -> Applied {
        apply(&Source::parse(src), &facts(Role::Input), &Params::default().with("elems", elems))
    }

    #[test]
    fn a_block_per_row_layernorm_reads_its_row_once_across_three_passes() {
        let r = run(LAYERNORM, "auto").unwrap();
        assert_eq!(
            r.description,
            "`layernorm_rows`: `row` kept in registers across 3 passes over `cols` (16 per thread), read once"
        );
        assert_eq!(r.guards, ["cols <= 16 * BLOCK"]);
        let s = &r.source;
        let first = r#"  float s = 0.f;
  // nightshift: `row` kept in registers, 16 elements per thread: read once, not once per pass.
  float ns_row_row[16];
  #pragma unroll
  for (int ns_r = 0; ns_r < 16; ++ns_r) {
    const int c = threadIdx.x + ns_r * BLOCK;
    if (c < cols) {
      ns_row_row[ns_r] = row[c];
      s += ns_row_row[ns_r];
    }
  }
"#;
        assert!(s.contains(first), "{s}");
        let second = r#"    if (c < cols) {
      const float d = ns_row_row[ns_r] - mean;
      v += d * d;
    }"#;
        assert!(s.contains(second), "{s}");
        assert!(s.contains("out[c] = (ns_row_row[ns_r] - mean) * rstd * gamma[c] + beta[c];"), "{s}");
        // One load of the row; the fallback kernel keeps its three.
        assert_eq!(s.matches("ns_row_row[ns_r] = row[c];").count(), 1, "{s}");
        assert_eq!(s.matches("row[c]").count(), 3 + 1, "{s}");
        assert!(s.contains("if (/* nightshift: fast path */ ((cols) <= 16 * BLOCK)) {"), "{s}");
        assert!(s.contains("  layernorm_rows<<<rows, BLOCK, 0, stream>>>(x, gamma, beta, y, cols, eps);"), "{s}");
    }

    #[test]
    fn an_unroll_pragma_gives_way_to_the_full_unroll() {
        let src = LAYERNORM.replace(
            "  for (int c = threadIdx.x; c < cols; c += BLOCK) s += row[c];",
            "  #pragma unroll 4\n  for (int c = threadIdx.x; c < cols; c += BLOCK) s += row[c];",
        );
        let r = run(&src, "auto").unwrap();
        let fast = &r.source[r.source.find("layernorm_rows_fast").unwrap()..];
        assert!(!fast.contains("#pragma unroll 4"), "{fast}");
        assert!(fast.contains("  float s = 0.f;\n  // nightshift: `row` kept in registers"), "{fast}");
    }

    #[test]
    fn elements_per_thread_hold_the_bench_row_or_decline() {
        // 4096 columns at most: 16 a thread of 256 hold them all.
        assert!(run(LAYERNORM, "32").unwrap().description.contains("(32 per thread)"));
        assert_eq!(
            run(LAYERNORM, "4").unwrap_err().0,
            "`layernorm_rows`: the loop over `cols` holds rows of up to 1024 elements with 4 per thread, but the task's bench rows have 2048: the fast path would never run at the bench size"
        );
        // Rows longer than 32 a thread hold at the largest size: the bench size decides.
        let f = sized(Role::Input, 4096, 3000, 12345);
        let r = apply(&Source::parse(LAYERNORM), &f, &Params::default()).unwrap();
        assert_eq!(r.guards, ["cols <= 16 * BLOCK"]);
    }

    #[test]
    fn a_thread_per_row_kernel_made_cooperative_keeps_its_lane_loops_row_in_registers() {
        let src = crate::recipes::vectorize::tests::ROW_LOGSUMEXP;
        let f = FactsBuilder::new("launch")
            .buffer("logits", "float", Role::Input, "{rows} * {cols}", 1 << 20, 1 << 20)
            .buffer("lse", "float", Role::Output, "{rows}", 4096, 4096)
            .int("rows", 4096, 4096)
            .int("cols", 256, 256)
            .build();
        let app = |id| crate::Application { recipe: id, params: Params::default() };
        let coop = crate::apply(&app(crate::RecipeId::Cooperative), src, &f).unwrap();
        let r = crate::apply(&app(crate::RecipeId::RowCache), &coop.source, &f).unwrap();
        assert_eq!(
            r.description,
            "`row_lse_fast`: `p` kept in registers across 2 passes over `cols` (8 per thread), read once"
        );
        let s = &r.source;
        assert!(s.contains("    const int c = ((0) + ns_lane) + ns_r * 32;\n    if (c < cols) {\n      ns_row_p[ns_r] = p[c];\n      m = fmaxf(m, ns_row_p[ns_r]);"), "{s}");
        assert!(s.contains("sum += expf(ns_row_p[ns_r] - m);"), "{s}");
        // The lanes' shuffles stay after each pass, and the fast path's conditions are one.
        assert_eq!(s.matches("__shfl_xor_sync(ns_mask, ").count(), 2, "{s}");
        assert!(s.contains("<= 2147483647LL) && ((cols) <= 8 * 32)) {"), "{s}");
        assert_eq!(Source::parse(s).kernels().len(), 2);
    }

    #[test]
    fn declines_where_a_register_copy_could_differ_from_memory() {
        let why = |src: String| run(&src, "auto").unwrap_err().0;
        let input = |r: Role| apply(&Source::parse(LAYERNORM), &facts(r), &Params::default()).unwrap_err().0;
        assert_eq!(
            input(Role::InOut),
            "`layernorm_rows`: the task does not declare the buffer behind `row` an input the kernel only reads, so a write elsewhere could change it between passes"
        );
        assert_eq!(
            why(LAYERNORM.replace("s += row[c];", "if (row[c] > 0.f) s += row[c];")),
            "`layernorm_rows`: the loop over `cols`, the first pass that reads `row`, reads it only under a condition, so loading every element there could read what the original never does"
        );
        assert_eq!(
            why(LAYERNORM.replace("const float d = row[c] - mean;", "const float d = row[c + 1] - mean;")),
            "`layernorm_rows`: the loop over `cols` reads `row[c + 1]`, not `row` at the loop index `c`"
        );
        // Read at another index, a pass keeps reading memory; with no two passes alike, nothing is kept.
        let at = |pass2: &str, pass3: &str| {
            LAYERNORM
                .replace("s += row[c];", "s += x[(size_t)blockIdx.x * cols + c];")
                .replace("const float d = row[c] - mean;", &format!("const float d = x[{pass2}] - mean;"))
                .replace("out[c] = (row[c] - mean)", &format!("out[c] = (x[{pass3}] - mean)"))
        };
        let r = run(&at("(size_t)blockIdx.x * cols + c", "c"), "auto").unwrap();
        assert!(r.description.contains("`x` kept in registers across 2 passes"), "{}", r.description);
        assert!(r.source.contains("out[c] = (x[c] - mean)"), "{}", r.source);
        assert_eq!(
            why(at("c", "c")),
            "`layernorm_rows`: a later pass over `cols` reads `x` at `c`, another index than the first's `(size_t)blockIdx.x * cols + c`"
        );
        assert_eq!(
            why(LAYERNORM.replace("float v = 0.f;", "float v = 0.f;\n  cols -= 1;")),
            "`layernorm_rows`: changes `cols` between its passes over `cols` (`cols -= 1`), so they may not read the same elements of `row`"
        );
        assert_eq!(
            why(LAYERNORM
                .replace("const float d = row[c] - mean;", "const int cols = 0;\n    const float d = row[c] - mean;")),
            "`layernorm_rows`: declares `cols` more than once, so its passes may not read `row` at the same elements"
        );
        assert_eq!(
            why(LAYERNORM
                .replace("const float d = row[c] - mean;", "const float d = row[c] - mean;\n    ((float*)x)[c] = d;")),
            "`layernorm_rows`: writes the buffer behind `row` (`((float*)x)[c] = d`)"
        );
        assert_eq!(
            why(LAYERNORM.replace("c < cols;", "c < n;").replace("__shared__ float red[BLOCK];", "__shared__ float red[BLOCK];\n  const int n = cols;")),
            "`layernorm_rows`: the loop over `n` ends at `n`, and the launcher cannot check a row's length against it: `n` is no parameter of the kernel or constant of the file"
        );
        assert_eq!(
            why(LAYERNORM.replace("__shared__ float red[BLOCK];", "__shared__ float red[BLOCK];\n  cols = 2 * cols;")),
            "`layernorm_rows`: the loop over `cols` ends at `cols`, and the launcher cannot check a row's length against it: the kernel changes `cols` (`cols = 2 * cols`)"
        );
    }

    #[test]
    fn declines_kernels_without_two_passes_over_a_row() {
        let one = LAYERNORM
            .replace("const float d = row[c] - mean;", "const float d = mean;")
            .replace("out[c] = (row[c] - mean)", "out[c] = (mean)");
        assert_eq!(
            run(&one, "auto").unwrap_err().0,
            "`layernorm_rows` reads no buffer at the loop index in two of its passes over `cols`"
        );
        let tid = LAYERNORM
            .replace("int c = threadIdx.x;", "int c = tid;")
            .replace("__shared__ float red[BLOCK];", "__shared__ float red[BLOCK];\n  const int tid = threadIdx.x;");
        assert_eq!(
            run(&tid, "auto").unwrap_err().0,
            "`layernorm_rows` starts its loops at `tid`, a local copy of `threadIdx.x` (`for (int c = tid; c < cols; c += BLOCK)`); the block-strided loops this recipe takes, like `vectorize`, start at `threadIdx.x` itself"
        );
    }
}
