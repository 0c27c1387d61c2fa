//! Shapes of kernels that several recipes match: the flat thread index
//! (`blockIdx.x * blockDim.x + threadIdx.x`, casts and a block-size macro allowed), its
//! grid stride, and the one-element-per-thread body behind a bounds check or inside a
//! grid-stride loop.

use crate::recipe::NotApplicable;
use crate::source::{Kernel, Source};
use crate::syntax::{self, binary, builtin, descendants, flatten, named_children, strip, strip_parens, text};
use std::ops::Range;
use tree_sitter::Node;

/// Whether `e` is the flat 1-D thread index: `blockIdx.x * B + threadIdx.x` in any
/// order, where B is `blockDim.x`, a macro or a literal; casts and parentheses allowed.
pub fn is_flat_index(src: &str, e: Node) -> bool {
    let terms = flatten(src, strip(e), "+");
    if terms.len() != 2 {
        return false;
    }
    let (t, p) =
        if builtin(src, terms[0]) == Some(("threadIdx", 'x')) { (terms[0], terms[1]) } else { (terms[1], terms[0]) };
    if builtin(src, t) != Some(("threadIdx", 'x')) {
        return false;
    }
    times_block_size(src, p, "blockIdx")
}

/// `B.x * size` in either order, where size is as in [`is_block_size`].
fn times_block_size(src: &str, e: Node, b: &str) -> bool {
    let factors = flatten(src, strip(e), "*");
    if factors.len() != 2 {
        return false;
    }
    let is_b = |n: Node| builtin(src, n).is_some_and(|(o, f)| o == b && f == 'x');
    let (bx, other) = if is_b(factors[0]) { (factors[0], factors[1]) } else { (factors[1], factors[0]) };
    is_b(bx) && is_block_size(src, other)
}

/// `blockDim.x`, an identifier (a macro or constant) or an integer literal.
fn is_block_size(src: &str, e: Node) -> bool {
    let e = strip(e);
    builtin(src, e) == Some(("blockDim", 'x')) || e.kind() == "identifier" || e.kind() == "number_literal"
}

/// Whether `e` is the grid stride: `gridDim.x * B` (B as in [`is_flat_index`]).
pub fn is_grid_stride(src: &str, e: Node) -> bool {
    times_block_size(src, e, "gridDim")
}

/// How the body is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Form {
    /// `T i = flat; ... if (i >= n) return; body` or `... if (i < n) { body }`.
    Guard,
    /// `for (T i = flat; i < n; i += stride) body`.
    GridStride,
}

/// A one-element-per-thread kernel.
#[derive(Debug, Clone)]
pub struct Elementwise {
    pub form: Form,
    /// The index variable and its declared type (`size_t`, `const int`).
    pub index: String,
    pub index_type: String,
    /// The flat index expression.
    pub flat: Range<usize>,
    /// The bound the index is checked against (`n`, `rows * cols`).
    pub bound: String,
    /// From the index's declaration (or the loop) to the end of the body.
    pub span: Range<usize>,
    /// Statements between the index and the check: (range, mentions the index).
    pub between: Vec<(Range<usize>, bool)>,
    /// The per-element statements.
    pub body: Vec<Range<usize>>,
    /// The grid stride expression (GridStride only).
    pub stride: Option<String>,
}

fn decline(k: &Kernel, why: &str) -> NotApplicable {
    NotApplicable::new(format!("`{}` {why}", k.name))
}

/// The index declaration `T i = flat;` among a block's statements.
fn index_decl<'t>(src: &str, stmts: &[Node<'t>]) -> Option<(usize, String, Node<'t>)> {
    for (i, s) in stmts.iter().enumerate() {
        if s.kind() != "declaration" {
            continue;
        }
        if let Some((name, Some(init))) = syntax::single_declarator(src, *s) {
            if is_flat_index(src, init) {
                return Some((i, name, init));
            }
        }
    }
    None
}

/// `i < n`, `n > i` (or, negated for early returns, `i >= n`, `n <= i`): the bound.
fn bound_of<'t>(src: &str, cond: Node<'t>, index: &str, negated: bool) -> Option<Node<'t>> {
    let (op, l, r) = binary(src, strip_parens(cond))?;
    let (lt, ge) = (["<", ">"], [">=", "<="]);
    let ops = if negated { ge } else { lt };
    if op == ops[0] && syntax::is_ident(src, l, index) {
        return Some(r);
    }
    if op == ops[1] && syntax::is_ident(src, r, index) {
        return Some(l);
    }
    None
}

/// The condition inside an if statement's parentheses.
pub fn condition(n: Node) -> Option<Node> {
    let c = n.child_by_field_name("condition")?;
    if c.kind() == "condition_clause" {
        c.child_by_field_name("value").or_else(|| named_children(c).into_iter().find(|x| x.kind() != "comment"))
    } else {
        Some(c)
    }
}

/// The statements of a body that may be a block or a single statement.
pub fn block_statements(n: Node) -> Vec<Node> {
    if n.kind() == "compound_statement" {
        named_children(n)
    } else {
        vec![n]
    }
}

/// Matches the one-element-per-thread shape, or says why the kernel is not of it.
pub fn elementwise(src: &Source, k: &Kernel) -> Result<Elementwise, NotApplicable> {
    let t = src.text();
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| decline(k, "has no body"))?;
    if k.has_error {
        return Err(decline(k, "contains syntax this parser does not know"));
    }
    if t[k.body.clone()].contains("__shared__") || syntax::has_barrier(t, body) || syntax::has_warp_primitive(t, body) {
        return Err(decline(k, "shares data between threads (shared memory, barriers or warp primitives)"));
    }
    let stmts = syntax::statements(body);
    // The grid-stride loop form.
    for s in &stmts {
        if s.kind() != "for_statement" {
            continue;
        }
        let Some(init) = s.child_by_field_name("initializer") else { continue };
        let Some((name, Some(flat))) = syntax::single_declarator(t, init) else { continue };
        if !is_flat_index(t, flat) {
            continue;
        }
        let cond =
            s.child_by_field_name("condition").ok_or_else(|| decline(k, "has a grid-stride loop with no condition"))?;
        let bound = bound_of(t, cond, &name, false)
            .ok_or_else(|| decline(k, &format!("has a loop condition other than `{name} < bound`")))?;
        let update = s.child_by_field_name("update").ok_or_else(|| decline(k, "has a loop without an update"))?;
        let stride = match update.kind() {
            "assignment_expression"
                if update.child_by_field_name("operator").is_some_and(|o| text(t, o) == "+=")
                    && update.child_by_field_name("left").is_some_and(|l| syntax::is_ident(t, l, &name)) =>
            {
                update.child_by_field_name("right")
            }
            _ => None,
        }
        .filter(|r| is_grid_stride(t, *r))
        .ok_or_else(|| decline(k, &format!("steps `{name}` by something other than the grid stride")))?;
        let lbody = s.child_by_field_name("body").ok_or_else(|| decline(k, "has a loop without a body"))?;
        let inner = block_statements(lbody);
        check_body(t, k, &name, bound, &inner)?;
        return Ok(Elementwise {
            form: Form::GridStride,
            index: name,
            index_type: syntax::declaration_type(t, init).unwrap_or_else(|| "int".into()),
            flat: flat.byte_range(),
            bound: text(t, bound).to_string(),
            span: s.byte_range(),
            between: Vec::new(),
            body: inner.iter().map(|n| n.byte_range()).collect(),
            stride: Some(text(t, stride).to_string()),
        });
    }
    let (at, name, flat) = index_decl(t, &stmts)
        .ok_or_else(|| decline(k, "does not compute a flat index `blockIdx.x * blockDim.x + threadIdx.x`"))?;
    let decl = stmts[at];
    let index_type = syntax::declaration_type(t, decl).unwrap_or_else(|| "int".into());
    // The check: the first if statement on the index after it.
    let mut between = Vec::new();
    for (j, s) in stmts.iter().enumerate().skip(at + 1) {
        if s.kind() == "if_statement" && s.child_by_field_name("alternative").is_none() {
            let cond = condition(*s).ok_or_else(|| decline(k, "has an if without a condition"))?;
            let cons = s.child_by_field_name("consequence").ok_or_else(|| decline(k, "has an empty if"))?;
            let cons_stmts = block_statements(cons);
            let is_return = cons_stmts.len() == 1
                && cons_stmts[0].kind() == "return_statement"
                && named_children(cons_stmts[0]).is_empty();
            // `if (i >= n) return; body...` or `if (i < n) { body }` as the last statement.
            let guarded = if is_return {
                bound_of(t, cond, &name, true).map(|b| {
                    let rest: Vec<Node> = stmts[j + 1..].to_vec();
                    let end = rest.last().map_or(s.end_byte(), |n| n.end_byte());
                    (b, rest, end)
                })
            } else if let Some(b) = bound_of(t, cond, &name, false) {
                if stmts[j + 1..].iter().any(|n| n.kind() != "comment") {
                    return Err(decline(k, "does more work after its bounds check"));
                }
                Some((b, cons_stmts, s.end_byte()))
            } else {
                None
            };
            if let Some((bound, body, end)) = guarded {
                check_body(t, k, &name, bound, &body)?;
                per_element_between(t, decl, &name, &mut between, &body);
                return Ok(Elementwise {
                    form: Form::Guard,
                    index: name,
                    index_type,
                    flat: flat.byte_range(),
                    bound: text(t, bound).to_string(),
                    span: decl.start_byte()..end,
                    between,
                    body: body.iter().map(|n| n.byte_range()).collect(),
                    stride: None,
                });
            }
            return Err(decline(k, &format!("checks `{name}` in a form other than `{name} < bound`")));
        }
        if s.kind() == "comment" {
            continue;
        }
        if !matches!(s.kind(), "declaration" | "expression_statement") || !syntax::escapes(*s).is_empty() {
            return Err(decline(k, "has control flow between its index and its bounds check"));
        }
        between.push((s.byte_range(), syntax::mentions(t, *s, &name)));
    }
    Err(decline(k, &format!("never checks `{name}` against a bound")))
}

/// Which statements between the index and its check are per element: those that name
/// the index, name a local such a statement declares (`start = offsets[s]` after
/// `s = idx / dim`), or declare a name the per-element code changes (`acc = 0.f` the body
/// accumulates into). The rest hold one value for the thread and may run once for all the
/// elements a recipe gives it.
fn per_element_between(t: &str, at: Node, index: &str, between: &mut [(Range<usize>, bool)], body: &[Node]) {
    let mut root = at;
    while let Some(p) = root.parent() {
        root = p;
    }
    let mut changed: Vec<String> = Vec::new();
    for n in body {
        changed.extend(syntax::assigned(t, *n).into_iter().map(|(x, _)| x));
        changed.extend(syntax::passed_bare(t, *n));
    }
    let nodes: Vec<Option<Node>> =
        between.iter().map(|(r, _)| root.descendant_for_byte_range(r.start, r.end)).collect();
    for n in nodes.iter().flatten() {
        changed.extend(syntax::assigned(t, *n).into_iter().map(|(x, _)| x));
    }
    let mut tainted = vec![index.to_string()];
    for ((_, uses), n) in between.iter_mut().zip(&nodes) {
        let Some(n) = n else {
            *uses = true;
            continue;
        };
        let declares = syntax::declared_names(t, *n);
        *uses =
            *uses || tainted.iter().any(|x| syntax::mentions(t, *n, x)) || declares.iter().any(|d| changed.contains(d));
        if *uses {
            tainted.extend(declares);
        }
    }
}

/// The per-element statements must not leave early, re-assign the index or the bound.
fn check_body(t: &str, k: &Kernel, index: &str, bound: Node, stmts: &[Node]) -> Result<(), NotApplicable> {
    for s in stmts {
        if !syntax::escapes(*s).is_empty() {
            return Err(decline(k, "leaves its per-element body early (return, break or goto)"));
        }
        for (name, _) in syntax::assigned(t, *s) {
            if name == index {
                return Err(decline(k, &format!("changes `{index}` inside its body")));
            }
            if syntax::mentions(t, bound, &name) {
                return Err(decline(k, &format!("changes `{name}`, which its bound reads, inside its body")));
            }
        }
    }
    Ok(())
}

/// Who splits a strided loop's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// A block's threads: `for (i = threadIdx.x; i < n; i += blockDim.x)`.
    Block,
    /// The grid's threads: the grid-stride loop.
    Grid,
    /// The K lanes of a group: `for (i = base + lane; i < n; i += K)` where `lane` is
    /// `threadIdx.x % K` (or `& (K - 1)`, or a local that holds it).
    Lanes,
}

/// A loop whose threads split a range by a stride: `for (T i = threadIdx.x; i < n; i +=
/// blockDim.x)` (a block's threads over a row), the grid-stride loop, or a group's lanes
/// over a row.
#[derive(Debug, Clone)]
pub struct StridedLoop {
    pub stmt: Range<usize>,
    pub spread: Spread,
    pub index: String,
    pub index_type: String,
    /// The thread's own first position (`threadIdx.x`, the flat index, the lane).
    pub start: String,
    /// The terms of the start besides the thread's position (`row_begin` in `row_begin +
    /// lane`); None when there are none or they add up to a literal 0.
    pub base: Option<String>,
    pub stride: String,
    pub bound: String,
    /// The statements of the loop body.
    pub body: Vec<Range<usize>>,
}

/// Every strided loop of a kernel whose body a thread can run for several indices in a
/// row: no barrier, no warp primitive, no `break`/`return` out of it, the index and the
/// bound left alone.
pub fn strided_loops(src: &Source, k: &Kernel) -> Vec<StridedLoop> {
    let t = src.text();
    let Some(body) = src.node(&k.body, "compound_statement") else { return Vec::new() };
    let mut out = Vec::new();
    for f in descendants(body) {
        if f.kind() != "for_statement" || f.has_error() || inside_generated_branch(t, f) {
            continue;
        }
        let Some(init) = f.child_by_field_name("initializer") else { continue };
        let Some((name, Some(start))) = syntax::single_declarator(t, init) else { continue };
        let (spread, first, base, lanes) = if builtin(t, strip(start)) == Some(("threadIdx", 'x')) {
            (Spread::Block, text(t, start).to_string(), None, None)
        } else if is_flat_index(t, start) {
            (Spread::Grid, text(t, start).to_string(), None, None)
        } else if let Some((lane, base, lanes)) = lane_start(t, body, start) {
            (Spread::Lanes, lane, base, Some(lanes))
        } else {
            continue;
        };
        let Some(cond) = f.child_by_field_name("condition") else { continue };
        let Some(bound) = bound_of(t, cond, &name, false) else { continue };
        let Some(update) = f.child_by_field_name("update") else { continue };
        let stride = (update.kind() == "assignment_expression"
            && update.child_by_field_name("operator").is_some_and(|o| text(t, o) == "+=")
            && update.child_by_field_name("left").is_some_and(|l| syntax::is_ident(t, l, &name)))
        .then(|| update.child_by_field_name("right"))
        .flatten();
        let Some(stride) = stride else { continue };
        let ok_stride = match spread {
            Spread::Grid => is_grid_stride(t, stride),
            Spread::Block => is_block_size(t, stride),
            Spread::Lanes => lanes.is_some_and(|k| lane_count_of(t, stride).as_ref() == Some(&k)),
        };
        if !ok_stride {
            continue;
        }
        let Some(lbody) = f.child_by_field_name("body") else { continue };
        if syntax::has_barrier(t, lbody) || syntax::has_warp_primitive(t, lbody) {
            continue;
        }
        let leaves = syntax::escapes(lbody).into_iter().any(|e| e.kind() != "continue_statement");
        let touches = syntax::assigned(t, lbody).into_iter().any(|(n, _)| {
            n == name || syntax::mentions(t, bound, &n) || base.as_deref().is_some_and(|b| syntax::mentions_word(b, &n))
        });
        if leaves || touches {
            continue;
        }
        out.push(StridedLoop {
            stmt: f.byte_range(),
            spread,
            index: name,
            index_type: syntax::declaration_type(t, init).unwrap_or_else(|| "int".into()),
            start: first,
            base,
            stride: text(t, stride).to_string(),
            bound: text(t, bound).to_string(),
            body: block_statements(lbody).iter().map(|n| n.byte_range()).collect(),
        });
    }
    // Outermost matches only.
    let all = out.clone();
    out.retain(|l| !all.iter().any(|o| o.stmt != l.stmt && o.stmt.start <= l.stmt.start && l.stmt.end <= o.stmt.end));
    out
}

/// A lane-strided loop's start `base + lane`: the lane term's text, the other terms (None
/// when they are absent or a literal 0) and the lane count K.
fn lane_start(t: &str, body: Node, start: Node) -> Option<(String, Option<String>, LaneCount)> {
    let terms = flatten(t, strip(start), "+");
    let mut lane = None;
    let mut base = Vec::new();
    for term in terms {
        match lane_count(t, body, term, true) {
            Some(k) if lane.is_none() => lane = Some((text(t, term).to_string(), k)),
            // Two lane terms would start each lane twice as far along.
            Some(_) => return None,
            None if int_literal(text(t, strip(term))) == Some(0) => {}
            None => base.push(text(t, term).to_string()),
        }
    }
    let (lane, k) = lane?;
    Some((lane, (!base.is_empty()).then(|| base.join(" + ")), k))
}

/// How many lanes share a range: a literal's value or a constant's name, so that `32u`
/// and `32` agree and `LANES` matches only `LANES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaneCount {
    Literal(i64),
    Named(String),
}

impl std::fmt::Display for LaneCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaneCount::Literal(k) => write!(f, "{k}"),
            LaneCount::Named(n) => f.write_str(n),
        }
    }
}

/// A literal or a constant's name as a lane count (a loop's step).
fn lane_count_of(t: &str, e: Node) -> Option<LaneCount> {
    let e = strip(e);
    match e.kind() {
        "number_literal" => int_literal(text(t, e)).filter(|k| *k >= 2).map(LaneCount::Literal),
        "identifier" => Some(LaneCount::Named(text(t, e).to_string())),
        _ => None,
    }
}

/// The lane count K when `e` is a thread's lane among groups of K: `threadIdx.x % K`,
/// `threadIdx.x & (K - 1)` (K a literal power of two, or a constant's name), or (when
/// `follow`) a local of the
/// kernel declared once as one of those and never assigned.
pub fn lane_count(t: &str, body: Node, e: Node, follow: bool) -> Option<LaneCount> {
    let e = strip(e);
    let is_tid = |n: Node| builtin(t, n) == Some(("threadIdx", 'x'));
    if let Some((op, l, r)) = binary(t, e) {
        return match op {
            "%" if is_tid(l) => lane_count_of(t, r),
            "&" => {
                let mask = if is_tid(l) {
                    r
                } else if is_tid(r) {
                    l
                } else {
                    return None;
                };
                let mask = strip(mask);
                if let Some(("-", k, one)) = binary(t, mask) {
                    // `K - 1` with K a constant's name (a macro: a power of two is the writer's word).
                    let k = strip(k);
                    return (k.kind() == "identifier" && int_literal(text(t, strip(one))) == Some(1))
                        .then(|| LaneCount::Named(text(t, k).to_string()));
                }
                let m = (mask.kind() == "number_literal").then(|| int_literal(text(t, mask))).flatten()?;
                let k = m.checked_add(1)?;
                (m >= 1 && (k & m) == 0).then_some(LaneCount::Literal(k))
            }
            _ => None,
        };
    }
    if !follow || e.kind() != "identifier" {
        return None;
    }
    let name = text(t, e);
    if syntax::declared_names(t, body).iter().filter(|n| *n == name).count() != 1
        || syntax::assigned(t, body).iter().any(|(n, _)| n == name)
    {
        return None;
    }
    descendants(body).into_iter().find_map(|d| match syntax::single_declarator(t, d) {
        Some((n, Some(init))) if n == name => lane_count(t, body, init, false),
        _ => None,
    })
}

/// Whether a node sits in a branch a recipe generated (its condition says `nightshift:`):
/// the fallback of a vectorized loop is not vectorized again.
fn inside_generated_branch(t: &str, n: Node) -> bool {
    let mut x = n;
    while let Some(p) = x.parent() {
        if p.kind() == "if_statement"
            && p.child_by_field_name("condition").is_some_and(|c| text(t, c).contains("nightshift:"))
        {
            return true;
        }
        x = p;
    }
    false
}

/// Pointers a kernel can stage: its pointer parameters and its local pointer variables
/// (`const float* row = x + r * cols;`): (name, element type, is const).
pub fn pointers(src: &Source, k: &Kernel) -> Vec<(String, String, bool)> {
    let t = src.text();
    let mut out: Vec<(String, String, bool)> =
        k.params.iter().filter(|p| p.pointer).map(|p| (p.name.clone(), p.base.clone(), p.is_const)).collect();
    let Some(body) = src.node(&k.body, "compound_statement") else { return out };
    for d in descendants(body) {
        if d.kind() != "declaration" || text(t, d).contains("__shared__") {
            continue;
        }
        let Some(ty) = d.child_by_field_name("type") else { continue };
        let is_const = syntax::children(d).iter().any(|c| c.kind() == "type_qualifier" && text(t, *c) == "const");
        let mut c = d.walk();
        for decl in d.children_by_field_name("declarator", &mut c) {
            let inner =
                if decl.kind() == "init_declarator" { decl.child_by_field_name("declarator") } else { Some(decl) };
            let Some(pd) = inner.filter(|x| x.kind() == "pointer_declarator") else { continue };
            let Some(id) = pd.child_by_field_name("declarator").filter(|x| x.kind() == "identifier") else { continue };
            out.push((text(t, id).to_string(), text(t, ty).to_string(), is_const));
        }
    }
    out
}

/// An index of the form `scale * i + offset + base`: `i`, `2 * i + 1`, `row_off + i`
/// (`base` does not involve `i`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Affine {
    pub scale: i64,
    pub offset: i64,
    /// The terms that do not involve the index, as written (None: no such terms).
    pub base: Option<String>,
}

/// The affine form of `e` in the index `i`, if it has one.
pub fn affine(t: &str, e: Node, i: &str) -> Option<Affine> {
    let mut scale = 0i64;
    let mut offset = 0i64;
    let mut base: Vec<String> = Vec::new();
    for term in flatten(t, strip_parens(e), "+") {
        let term = strip_parens(term);
        if syntax::is_ident(t, term, i) {
            scale += 1;
            continue;
        }
        if term.kind() == "number_literal" {
            offset += int_literal(text(t, term))?;
            continue;
        }
        if let Some(("*", l, r)) = binary(t, term) {
            let (lit, other) = if strip(l).kind() == "number_literal" { (l, r) } else { (r, l) };
            if strip(lit).kind() == "number_literal" && syntax::is_ident(t, other, i) {
                scale += int_literal(text(t, strip(lit)))?;
                continue;
            }
        }
        if syntax::mentions(t, term, i) {
            return None;
        }
        base.push(text(t, term).to_string());
    }
    (scale >= 1).then(|| Affine { scale, offset, base: (!base.is_empty()).then(|| base.join(" + ")) })
}

/// How a pointer is used at affine indices of the loop or element index.
#[derive(Debug, Clone, Default)]
pub struct IndexedUses {
    /// `p[...]` subscripts and `p + ...` sums at an affine index, read, written or both.
    pub sites: Vec<(Range<usize>, Access, Affine)>,
    /// `p` appears in another form somewhere in the searched code.
    pub other: bool,
    /// Some use sits under a condition (an if, a ?:, a loop, `&&`).
    pub conditional: bool,
}

impl IndexedUses {
    /// The common scale and base of every site, with the offsets seen, when all sites
    /// agree and the offsets are `0..scale` (whole records, nothing past them).
    pub fn record(&self) -> Option<(i64, Option<String>, Vec<i64>)> {
        let first = &self.sites.first()?.2;
        if self.sites.iter().any(|(_, _, a)| a.scale != first.scale || a.base != first.base) {
            return None;
        }
        let mut offs: Vec<i64> = self.sites.iter().map(|(_, _, a)| a.offset).collect();
        offs.sort();
        offs.dedup();
        let whole = offs == (0..first.scale).collect::<Vec<_>>();
        whole.then(|| (first.scale, first.base.clone(), offs))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// Read and written, or passed on where we cannot tell.
    Both,
}

/// How pointer `p` is used at affine indices of `i` within `scope` (and whether it is
/// used otherwise anywhere under `root`).
pub fn indexed_uses(t: &str, root: Node, scope: &[Range<usize>], p: &str, i: &str, is_const: bool) -> IndexedUses {
    let mut out = IndexedUses::default();
    let in_scope = |n: Node| scope.iter().any(|r| r.start <= n.start_byte() && n.end_byte() <= r.end);
    for n in descendants(root) {
        if n.kind() != "identifier" || text(t, n) != p {
            continue;
        }
        let Some(parent) = n.parent() else { continue };
        let site = match parent.kind() {
            "subscript_expression" if parent.child_by_field_name("argument").is_some_and(|a| a.id() == n.id()) => {
                subscript_index(parent)
                    .and_then(|x| affine(t, x, i))
                    .map(|a| (parent, subscript_access(t, parent, is_const), a))
            }
            "binary_expression" if parent.child_by_field_name("operator").is_some_and(|o| text(t, o) == "+") => {
                // `p + index`: the rest of the sum is the index.
                let other = [parent.child_by_field_name("left"), parent.child_by_field_name("right")]
                    .into_iter()
                    .flatten()
                    .find(|x| x.id() != n.id());
                other
                    .and_then(|x| affine(t, x, i))
                    .map(|a| (parent, if is_const { Access::Read } else { Access::Both }, a))
            }
            _ => None,
        };
        match site {
            Some((node, _, _)) if passed_to_intrinsic(t, node) => out.other = true,
            Some((node, access, a)) if in_scope(node) => {
                if is_conditional(node, scope) {
                    out.conditional = true;
                }
                out.sites.push((node.byte_range(), access, a));
            }
            _ => out.other = true,
        }
    }
    out
}

/// Whether the address of a site goes to a CUDA intrinsic or an atomic (`atomicAdd(&p[i],
/// v)`, `__ldg(p + i)`): those need the global address, not a register copy. A value
/// read (`__half2float(p[i])`) is no address.
fn passed_to_intrinsic(t: &str, site: Node) -> bool {
    let mut n = site;
    let mut address = site.kind() == "binary_expression";
    while let Some(p) = n.parent() {
        match p.kind() {
            "pointer_expression" => {
                address |= p.child(0).is_some_and(|op| text(t, op) == "&");
                n = p;
            }
            "parenthesized_expression" | "cast_expression" => n = p,
            "argument_list" => {
                let f = p.parent().and_then(|c| c.child_by_field_name("function")).map(|f| text(t, f)).unwrap_or("");
                return address && (f.starts_with("__") || f.contains("atomic") || f.contains("asm"));
            }
            _ => return false,
        }
    }
    false
}

/// The index expression of `a[i]`.
pub fn subscript_index(n: Node) -> Option<Node> {
    let idx = n.child_by_field_name("indices").or_else(|| n.child_by_field_name("index"))?;
    if idx.kind() == "subscript_argument_list" {
        let kids: Vec<Node> = named_children(idx);
        (kids.len() == 1).then(|| kids[0])
    } else {
        Some(idx)
    }
}

/// Read or written: the left of `=` writes, of `+=` reads and writes; `&a[i]` could be
/// either.
fn subscript_access(t: &str, n: Node, is_const: bool) -> Access {
    let Some(parent) = n.parent() else { return Access::Read };
    match parent.kind() {
        "assignment_expression" if parent.child_by_field_name("left").is_some_and(|l| l.id() == n.id()) => {
            match parent.child_by_field_name("operator").map(|o| text(t, o)) {
                Some("=") => Access::Write,
                _ => Access::Both,
            }
        }
        "update_expression" => Access::Both,
        "pointer_expression" if !is_const => Access::Both,
        _ => Access::Read,
    }
}

/// Whether `n` sits under a branch within the scope statements.
fn is_conditional(n: Node, scope: &[Range<usize>]) -> bool {
    let mut x = n;
    while let Some(p) = x.parent() {
        match p.kind() {
            "if_statement"
            | "conditional_expression"
            | "for_statement"
            | "while_statement"
            | "do_statement"
            | "switch_statement" => return true,
            "binary_expression"
                if p.child_by_field_name("operator").is_some_and(|o| matches!(o.kind(), "&&" | "||")) =>
            {
                return true
            }
            _ => {}
        }
        if scope.iter().any(|r| p.byte_range() == *r) {
            return false;
        }
        x = p;
    }
    false
}

/// The conditions under which the expression at `site` is evaluated, from the innermost
/// branch out to the scope statement that holds it (`if (c) ...` gives `(c)`, its `else`
/// `!(c)`, `a && site` gives `(a)`, `a || site` `!(a)`, `c ? site : _` `(c)`). None where a
/// loop or a switch inside the scope decides how often it runs, or the site is outside
/// every scope range.
pub fn guards(t: &str, root: Node, site: &Range<usize>, scope: &[Range<usize>]) -> Option<Vec<String>> {
    let mut x = root.descendant_for_byte_range(site.start, site.end)?;
    let mut out = Vec::new();
    let is = |a: Option<Node>, b: Node| a.is_some_and(|a| a.id() == b.id());
    loop {
        if scope.iter().any(|r| x.byte_range() == *r) {
            return Some(out);
        }
        let p = x.parent()?;
        match p.kind() {
            "if_statement" => {
                let cond = p.child_by_field_name("condition")?;
                if is(p.child_by_field_name("consequence"), x) {
                    out.push(format!("({})", condition_text(t, cond)?));
                } else if is(p.child_by_field_name("alternative"), x) || x.kind() == "else_clause" {
                    out.push(format!("!({})", condition_text(t, cond)?));
                } else if !is(Some(cond), x) {
                    return None;
                }
            }
            "conditional_expression" => {
                let cond = p.child_by_field_name("condition")?;
                if is(p.child_by_field_name("consequence"), x) {
                    out.push(format!("({})", text(t, cond)));
                } else if is(p.child_by_field_name("alternative"), x) {
                    out.push(format!("!({})", text(t, cond)));
                }
            }
            "binary_expression" if is(p.child_by_field_name("right"), x) => {
                let left = p.child_by_field_name("left")?;
                match p.child_by_field_name("operator").map(|o| o.kind()) {
                    Some("&&") => out.push(format!("({})", text(t, left))),
                    Some("||") => out.push(format!("!({})", text(t, left))),
                    _ => {}
                }
            }
            "for_statement" | "for_range_loop" | "while_statement" | "do_statement" | "switch_statement"
            | "case_statement" => return None,
            _ => {}
        }
        x = p;
    }
}

/// An `if`'s condition as an expression: `(c)` from `if (c)`; None for `if (T v = ...)`
/// and `if (init; c)`.
fn condition_text<'s>(t: &'s str, cond: Node) -> Option<&'s str> {
    if cond.kind() == "condition_clause" {
        let kids = named_children(cond);
        return match kids.as_slice() {
            [e] if !e.kind().contains("declaration") && !e.kind().contains("init_statement") => Some(text(t, *e)),
            _ => None,
        };
    }
    Some(text(t, cond))
}

/// Whether expression text `expr` keeps one value while code that declares or assigns the
/// names in `changing` runs: it reads only names outside `changing` and constants,
/// through arithmetic, comparisons and casts (no memory, no calls, no side effects).
pub fn holds_still(expr: &str, changing: &[String]) -> bool {
    let wrapped = format!("void ns_f() {{ (void)({expr}); }}");
    let src = crate::source::Source::parse(&wrapped);
    let root = src.root();
    if crate::syntax::has_error(root) {
        return false;
    }
    let Some(e) = descendants(root)
        .into_iter()
        .find(|d| d.kind() == "cast_expression")
        .and_then(|c| c.child_by_field_name("value"))
    else {
        return false;
    };
    descendants(e).into_iter().filter(|d| d.is_named()).all(|d| match d.kind() {
        "identifier" => !changing.iter().any(|c| c == text(&wrapped, d)),
        "number_literal"
        | "true"
        | "false"
        | "null"
        | "nullptr"
        | "parenthesized_expression"
        | "binary_expression"
        | "cast_expression"
        | "type_descriptor"
        | "primitive_type"
        | "sized_type_specifier"
        | "type_identifier"
        | "field_identifier"
        | "char_literal" => true,
        "unary_expression" => {
            d.child_by_field_name("operator").is_some_and(|o| matches!(o.kind(), "!" | "-" | "+" | "~"))
        }
        // Only the builtins' fields: a struct's member may be written where its name is not.
        "field_expression" => crate::syntax::builtin(&wrapped, d).is_some(),
        _ => false,
    })
}

/// A `const` pointer local that starts at a buffer: `const T* q = p;` or
/// `const T* q = p + offset;` (`d` its init declarator).
pub struct ConstAlias<'t> {
    pub name: String,
    /// The buffer's identifier.
    pub base: Node<'t>,
    pub offset: Option<Node<'t>>,
}

pub fn const_alias<'t>(t: &str, d: Node<'t>) -> Option<ConstAlias<'t>> {
    if d.kind() != "init_declarator" {
        return None;
    }
    let decl = d.parent().filter(|p| p.kind() == "declaration")?;
    let pointer = d.child_by_field_name("declarator").filter(|x| x.kind() == "pointer_declarator")?;
    let inner = pointer.child_by_field_name("declarator").filter(|x| x.kind() == "identifier")?;
    let is_const = named_children(decl).iter().any(|c| c.kind() == "type_qualifier" && text(t, *c) == "const");
    if !is_const {
        return None;
    }
    let v = crate::syntax::strip_parens(d.child_by_field_name("value")?);
    let (base, offset) = match v.kind() {
        "identifier" => (v, None),
        "binary_expression" if v.child_by_field_name("operator").is_some_and(|o| text(t, o) == "+") => {
            (crate::syntax::strip_parens(v.child_by_field_name("left")?), v.child_by_field_name("right"))
        }
        _ => return None,
    };
    (base.kind() == "identifier").then(|| ConstAlias { name: text(t, inner).to_string(), base, offset })
}

/// The names an expression text reads (identifiers, not the fields of `a.b`).
pub fn names_in(expr: &str) -> Vec<String> {
    let wrapped = format!("void ns_f() {{ (void)({expr}); }}");
    let src = crate::source::Source::parse(&wrapped);
    descendants(src.root())
        .into_iter()
        .filter(|d| d.kind() == "identifier")
        .map(|d| text(&wrapped, d).to_string())
        .filter(|n| n != "ns_f")
        .collect()
}

/// Whether a kernel reads the y or z grid coordinates (a 2-D or 3-D launch).
pub fn uses_2d_grid(t: &str, body: Node) -> bool {
    descendants(body).into_iter().any(|d| matches!(builtin(t, d), Some(("blockIdx" | "gridDim", 'y' | 'z'))))
}

/// Whether a text is an integer literal, with its value.
pub fn int_literal(s: &str) -> Option<i64> {
    let s = s.trim().trim_end_matches(['u', 'U', 'l', 'L']).replace('\'', "");
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return i64::from_str_radix(h, 16).ok();
    }
    if let Some(b) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        return i64::from_str_radix(b, 2).ok();
    }
    // C reads a leading 0 as octal: `012` is 10.
    if s.len() > 1 && s.starts_with('0') {
        return i64::from_str_radix(&s[1..], 8).ok();
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_literals_read_as_c_reads_them() {
        for (lit, v) in [("12", 12), ("012", 10), ("0x1F", 31), ("0b101", 5), ("1'024", 1024), ("256u", 256), ("0", 0)]
        {
            assert_eq!(int_literal(lit), Some(v), "{lit}");
        }
        assert_eq!(int_literal("09"), None, "not an octal number");
    }

    fn first_kernel(src: &str) -> (Source, Kernel) {
        let s = Source::parse(src);
        let k = s.kernels().remove(0);
        (s, k)
    }

    #[test]
    fn guards_name_the_conditions_a_read_runs_under() {
        let src = "void f(const float* a, float* y, int n, bool on, float t) {\n  y[0] = on ? a[1] : 0.f;\n  y[1] = (t > 0.f && a[2] > t) ? 1.f : 0.f;\n  if (a[3] > t) { y[2] = a[4]; } else { y[3] = a[5]; }\n  y[4] = !on || a[6];\n  for (int i = 0; i < n; ++i) y[5] += a[7];\n}\n";
        let s = Source::parse(src);
        let body = descendants(s.root()).into_iter().find(|d| d.kind() == "compound_statement").unwrap();
        let scope: Vec<Range<usize>> = crate::syntax::statements(body).iter().map(|n| n.byte_range()).collect();
        let at = |needle: &str| {
            let start = src.find(needle).unwrap();
            guards(src, s.root(), &(start..start + needle.len()), &scope)
        };
        assert_eq!(at("a[1]"), Some(vec!["(on)".to_string()]));
        assert_eq!(at("a[2]"), Some(vec!["(t > 0.f)".to_string()]));
        assert_eq!(at("a[3]"), Some(vec![]), "an if's own condition always runs");
        assert_eq!(at("a[4]"), Some(vec!["(a[3] > t)".to_string()]));
        assert_eq!(at("a[5]"), Some(vec!["!(a[3] > t)".to_string()]));
        assert_eq!(at("a[6]"), Some(vec!["!(!on)".to_string()]));
        assert_eq!(at("a[7]"), None, "a loop decides how often");
        let changing = ["i".to_string()];
        assert!(holds_still("(t > 0.f && on)", &changing));
        assert!(holds_still("(blockIdx.x < 4u)", &changing));
        for moving in ["(i > 0)", "(a[3] > t)", "(f(t))", "(t = 1)", "(*a > 0)", "(t++ > 0)"] {
            assert!(!holds_still(moving, &changing), "{moving}");
        }
    }

    #[test]
    fn the_guard_form_with_an_early_return() {
        let (s, k) = first_kernel(
            "__global__ void k(const float* x, float* y, int rows, int cols) {\n  const size_t i = (size_t)blockIdx.x * 256 + threadIdx.x;\n  const size_t total = (size_t)rows * cols;\n  int c = i % cols;\n  if (i >= total) return;\n  y[i] = x[i] + c;\n}\n",
        );
        let e = elementwise(&s, &k).unwrap();
        assert_eq!(e.form, Form::Guard);
        assert_eq!(e.index, "i");
        assert_eq!(e.index_type, "const size_t");
        assert_eq!(e.bound, "total");
        assert_eq!(e.between.len(), 2);
        assert!(!e.between[0].1 && e.between[1].1);
        assert_eq!(e.body.len(), 1);
    }

    #[test]
    fn the_guard_form_with_a_block_and_the_loop_form() {
        let (s, k) = first_kernel(
            "__global__ void k(float* y, int n) { int i = threadIdx.x + blockDim.x * blockIdx.x; if (i < n) { y[i] = 1; y[i] *= 2; } }",
        );
        let e = elementwise(&s, &k).unwrap();
        assert_eq!(e.body.len(), 2);
        let (s, k) = first_kernel(
            "__global__ void k(float* y, int n) { for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = 0; }",
        );
        let e = elementwise(&s, &k).unwrap();
        assert_eq!(e.form, Form::GridStride);
        assert_eq!(e.stride.as_deref(), Some("blockDim.x * gridDim.x"));
    }

    #[test]
    fn other_shapes_are_declined_with_a_reason() {
        let (s, k) = first_kernel(
            "__global__ void k(float* y) { __shared__ float t[32]; t[threadIdx.x] = 0; __syncthreads(); }",
        );
        assert!(elementwise(&s, &k).unwrap_err().0.contains("shares data"));
        let (s, k) = first_kernel("__global__ void k(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = 0; }");
        assert!(elementwise(&s, &k).unwrap_err().0.contains("flat index"));
        let (s, k) = first_kernel(
            "__global__ void k(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { if (y[i] < 0) return; y[i] = 0; } }",
        );
        assert!(elementwise(&s, &k).unwrap_err().0.contains("early"));
    }

    /// The lane-strided loops `strided_loops` finds in a kernel whose body is `body`:
    /// (start, base, stride).
    fn lane_loops(body: &str) -> Vec<(String, Option<String>, String)> {
        let (s, k) = first_kernel(&format!("__global__ void k(const float* x, float* y, int n) {{ {body} }}"));
        strided_loops(&s, &k)
            .into_iter()
            .filter(|l| l.spread == Spread::Lanes)
            .map(|l| (l.start, l.base, l.stride))
            .collect()
    }

    #[test]
    fn lane_strided_loops_by_their_lane_and_step() {
        let lane = |s: &str| (s.to_string(), None, "32".to_string());
        assert_eq!(
            lane_loops("for (int c = threadIdx.x % 32; c < n; c += 32) y[c] = x[c];"),
            [lane("threadIdx.x % 32")]
        );
        assert_eq!(
            lane_loops("for (int c = (threadIdx.x & 31u) + 0; c < n; c += 32) y[c] = x[c];"),
            [lane("threadIdx.x & 31u")]
        );
        // A local that holds the lane, under any name, and a row start before it.
        assert_eq!(
            lane_loops(
                "const int l = (int)(threadIdx.x % 16u); int b = n / 2; for (int c = b + l; c < n; c += 16) y[c] = x[c];"
            ),
            [("l".to_string(), Some("b".to_string()), "16".to_string())]
        );
        assert_eq!(
            lane_loops("int lane = threadIdx.x & (WARP - 1); for (int c = lane; c < n; c += WARP) y[c] = x[c];"),
            [("lane".to_string(), None, "WARP".to_string())]
        );
    }

    #[test]
    fn loops_that_only_look_lane_strided_are_not() {
        // The step is not the lane count.
        assert!(lane_loops("for (int c = threadIdx.x % 32; c < n; c += 16) y[c] = x[c];").is_empty());
        // 23 + 1 lanes is no power of two: `& 23` is no lane.
        assert!(lane_loops("for (int c = threadIdx.x & 23; c < n; c += 24) y[c] = x[c];").is_empty());
        // A local that changes is no lane.
        assert!(lane_loops("int l = threadIdx.x % 32; l += 1; for (int c = l; c < n; c += 32) y[c] = x[c];").is_empty());
        // The row start changes inside the loop.
        assert!(lane_loops("int b = 0; for (int c = b + threadIdx.x % 32; c < n; c += 32) { y[c] = x[c]; b = 1; }")
            .is_empty());
        // A mask no `i64` holds the lane count of.
        assert!(lane_loops("for (int c = threadIdx.x & 0x7fffffffffffffff; c < n; c += 32) y[c] = x[c];").is_empty());
    }

    #[test]
    fn indexed_uses_tell_reads_from_writes() {
        let (s, k) = first_kernel(
            "__global__ void k(const float* x, float* y, float* z, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { y[i] = x[i] + z[0]; z[i] += 1; } }",
        );
        let e = elementwise(&s, &k).unwrap();
        let body = s.node(&k.body, "compound_statement").unwrap();
        let x = indexed_uses(s.text(), body, &e.body, "x", "i", true);
        assert_eq!(x.sites.len(), 1);
        assert_eq!(x.sites[0].1, Access::Read);
        let y = indexed_uses(s.text(), body, &e.body, "y", "i", false);
        assert_eq!(y.sites[0].1, Access::Write);
        let z = indexed_uses(s.text(), body, &e.body, "z", "i", false);
        assert!(z.other);
        assert_eq!(z.sites[0].1, Access::Both);
    }
}
