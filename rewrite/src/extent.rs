//! How many elements each pointer argument of a launcher spans, read from the kernels'
//! own indexing: the largest subscript each launched kernel can reach, as a polynomial
//! over the launcher's integer parameters, plus one.
//!
//! An index is bounded by what the code says about each name in it: the checks that
//! guard the access (`if (row >= rows) return;`, `if (i < n)`, a loop's `c < cols`), the
//! declaration of a local (`int c = i % cols;`), the launch configuration for
//! `blockIdx`/`threadIdx` when the grid is a plain expression, and the launch arguments
//! for the kernel's parameters. `x[row * cols + c]` with `row < rows` and `c < cols` gives
//! `rows * cols`. Local pointers (`const float* p = x + row * cols;`) carry their offset;
//! a pointer handed to a device function of the file counts what that function touches
//! when it is a fixed number of elements (`load(x + i)` reading `p[0]`).
//!
//! Anything the analysis cannot follow (a cast to another element type, a pointer passed
//! to an unknown function or moved, an index it cannot bound) makes that argument
//! [`Extent::Unknown`] with the reason; it never guesses. Pure: text in, data out.

use crate::pattern::{condition, int_literal, subscript_index};
use crate::poly::Poly;
use crate::source::Source;
use crate::syntax::{self, builtin, children, descendants, named_children, strip, strip_parens, text};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use tree_sitter::Node;

/// What the kernels say about one pointer argument of the launcher.
#[derive(Debug, Clone, PartialEq)]
pub enum Extent {
    /// The element count the kernels reach, over the launcher's integer parameters.
    Derived {
        len: Poly,
        /// The access that reaches furthest, as written, and its line (1-based).
        access: String,
        line: usize,
    },
    /// Why the indexing does not tell.
    Unknown { why: String },
}

/// One pointer parameter of the launcher and its extent.
#[derive(Debug, Clone, PartialEq)]
pub struct PointerExtent {
    pub name: String,
    pub extent: Extent,
}

/// Recursion past which an expression is not bounded (a real index is far shallower).
const MAX_DEPTH: u32 = 48;
/// Device-function calls followed from a kernel.
const MAX_CALL_DEPTH: u32 = 3;

/// The extents of every pointer parameter of `entry` in `src`, in parameter order.
/// `headers` are other parsed files whose device functions and macros the kernels use.
/// Empty when `entry` is not a function of `src`.
pub fn pointer_extents(src: &Source, headers: &[Source], entry: &str) -> Vec<PointerExtent> {
    let files: Vec<&Source> = std::iter::once(src).chain(headers).collect();
    if files.iter().any(|f| f.max_depth() > crate::source::MAX_DEPTH) {
        return Vec::new();
    }
    let consts = constants(&files);
    let Some(host) = src.host_functions().into_iter().find(|h| h.name == entry) else { return Vec::new() };
    let Some(body) = src.node(&host.body, "compound_statement") else { return Vec::new() };
    let Some(func) = body.parent() else { return Vec::new() };
    let t = src.text();
    let params = parameters(t, func);
    let sizes: Vec<String> = params.iter().filter(|p| !p.pointer).map(|p| p.name.clone()).collect();
    let launcher = Launcher { t, body, sizes: &sizes, consts: &consts, depth: Cell::new(0) };
    let launches: Vec<crate::source::Launch> =
        src.launches().into_iter().filter(|l| l.host == entry && !l.fallback).collect();
    let kernels = src.kernels();
    let mut out = Vec::new();
    for p in params.iter().filter(|p| p.pointer) {
        let extent = match launcher_pointer(&launcher, src, &files, &kernels, &launches, &p.name) {
            Ok((hi, node_text, line)) => match hi.add(&Poly::constant(1)) {
                Some(len) => Extent::Derived { len, access: node_text, line },
                None => Extent::Unknown { why: "the largest index overflows".into() },
            },
            Err(why) => Extent::Unknown { why },
        };
        out.push(PointerExtent { name: p.name.clone(), extent });
    }
    out
}

struct ParamDecl {
    name: String,
    pointer: bool,
}

/// The parameters of a function definition: names and whether each is a pointer.
fn parameters(t: &str, func: Node) -> Vec<ParamDecl> {
    let mut d = func.child_by_field_name("declarator");
    while let Some(x) = d {
        if x.kind() == "function_declarator" {
            break;
        }
        d = x.child_by_field_name("declarator");
    }
    let Some(list) = d.and_then(|d| d.child_by_field_name("parameters")) else { return Vec::new() };
    let mut out = Vec::new();
    for p in named_children(list).into_iter().filter(|p| p.kind() == "parameter_declaration") {
        let mut pointer = false;
        let mut d = p.child_by_field_name("declarator");
        while let Some(x) = d {
            match x.kind() {
                "identifier" => break,
                "pointer_declarator" | "array_declarator" => pointer = true,
                _ => {}
            }
            d = x.child_by_field_name("declarator");
        }
        if let Some(id) = d {
            out.push(ParamDecl { name: text(t, id).to_string(), pointer });
        }
    }
    out
}

/// Integer macros (`#define BLOCK 256`) and file-scope integer constants of every file;
/// a name defined twice with different values is left out.
fn constants(files: &[&Source]) -> BTreeMap<String, i64> {
    let mut seen: BTreeMap<String, Option<i64>> = BTreeMap::new();
    for f in files {
        let t = f.text();
        for n in descendants(f.root()) {
            let found = match n.kind() {
                "preproc_def" => {
                    let name = n.child_by_field_name("name").map(|x| text(t, x).to_string());
                    let value = n
                        .child_by_field_name("value")
                        .and_then(|v| int_literal(text(t, v).trim().trim_start_matches('(').trim_end_matches(')')));
                    name.zip(value)
                }
                "declaration"
                    if n.parent().is_some_and(|p| matches!(p.kind(), "translation_unit" | "declaration_list")) =>
                {
                    let constant = children(n).iter().any(|c| {
                        matches!(text(t, *c), "const" | "constexpr")
                            && matches!(c.kind(), "type_qualifier" | "storage_class_specifier")
                    }) || text(t, n).starts_with("constexpr");
                    match syntax::single_declarator(t, n) {
                        Some((name, Some(v))) if constant => int_literal(text(t, strip(v))).map(|x| (name, x)),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some((name, value)) = found {
                let e = seen.entry(name).or_insert(Some(value));
                if *e != Some(value) {
                    *e = None;
                }
            }
        }
    }
    seen.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect()
}

/// A macro of the files whose body names `name`.
fn macro_mentioning(files: &[&Source], name: &str) -> Option<String> {
    files.iter().find_map(|f| {
        let t = f.text();
        descendants(f.root()).into_iter().find_map(|n| {
            if !matches!(n.kind(), "preproc_def" | "preproc_function_def") {
                return None;
            }
            let body = n.child_by_field_name("value").map(|v| text(t, v)).unwrap_or("");
            let macro_name = n.child_by_field_name("name").map(|x| text(t, x)).unwrap_or("");
            syntax::mentions_word(body, name).then(|| macro_name.to_string())
        })
    })
}

fn line_of(t: &str, at: usize) -> usize {
    t.as_bytes()[..at.min(t.len())].iter().filter(|b| **b == b'\n').count() + 1
}

/// The node's parent, past parentheses.
fn up(n: Node) -> Option<Node> {
    let mut p = n.parent()?;
    while p.kind() == "parenthesized_expression" {
        p = p.parent()?;
    }
    Some(p)
}

fn is_child(parent: Node, field: &str, n: Node) -> bool {
    parent.child_by_field_name(field).is_some_and(|c| strip_parens(c).id() == n.id() || c.id() == n.id())
}

fn contains(outer: Node, inner: Node) -> bool {
    outer.start_byte() <= inner.start_byte() && inner.end_byte() <= outer.end_byte()
}

/// The declaration a use of `name` at `at` refers to, looking outwards from `at` through
/// the enclosing blocks up to `root`: the declaring statement (a declaration, or the
/// `for` whose initializer declares it) and the initializer value, if any.
fn declaration_of<'t>(t: &str, root: Node<'t>, at: Node<'t>, name: &str) -> Option<(Node<'t>, Option<Node<'t>>)> {
    let mut child = at;
    let mut n = at.parent();
    while let Some(p) = n {
        match p.kind() {
            "compound_statement" => {
                let mut found = None;
                for s in named_children(p) {
                    if s.end_byte() > child.start_byte() {
                        break;
                    }
                    if s.kind() == "declaration" {
                        if let Some(v) = declared_in(t, s, name) {
                            found = Some((s, v));
                        }
                    }
                }
                if found.is_some() {
                    return found;
                }
            }
            "for_statement" => {
                if let Some(init) = p.child_by_field_name("initializer").filter(|i| i.kind() == "declaration") {
                    if init.id() != child.id() {
                        if let Some(v) = declared_in(t, init, name) {
                            return Some((p, v));
                        }
                    }
                }
            }
            _ => {}
        }
        if p.id() == root.id() {
            break;
        }
        child = p;
        n = p.parent();
    }
    None
}

/// Whether declaration `d` declares `name`: Some(initializer) if so.
fn declared_in<'t>(t: &str, d: Node<'t>, name: &str) -> Option<Option<Node<'t>>> {
    let mut c = d.walk();
    for decl in d.children_by_field_name("declarator", &mut c) {
        let (mut target, mut value) = if decl.kind() == "init_declarator" {
            (decl.child_by_field_name("declarator"), decl.child_by_field_name("value"))
        } else {
            (Some(decl), None)
        };
        while let Some(x) = target {
            if x.kind() == "identifier" {
                break;
            }
            // `dim3 grid(H, B);` parses as a function declarator: its "parameters" are the
            // constructor's arguments.
            if x.kind() == "function_declarator" {
                value = x.child_by_field_name("parameters");
            }
            target = x.child_by_field_name("declarator");
        }
        if target.is_some_and(|x| text(t, x) == name) {
            return Some(value);
        }
    }
    None
}

/// The identifier a declaration statement introduces for `name` (to skip it as a use).
fn is_declarator(n: Node) -> bool {
    let Some(p) = n.parent() else { return false };
    match p.kind() {
        "init_declarator" | "pointer_declarator" | "array_declarator" => is_child(p, "declarator", n),
        "declaration" | "parameter_declaration" => is_child(p, "declarator", n),
        _ => false,
    }
}

/// Assignments to `name` under `root` (`=`, `+=`, `++`): the identifiers they write.
fn writes<'t>(t: &str, root: Node<'t>, name: &str) -> Vec<Node<'t>> {
    descendants(root)
        .into_iter()
        .filter_map(|n| match n.kind() {
            "assignment_expression" => n.child_by_field_name("left"),
            "update_expression" => n.child_by_field_name("argument"),
            _ => None,
        })
        .map(strip)
        .filter(|target| target.kind() == "identifier" && text(t, *target) == name)
        .collect()
}

/// How a name may change after its declaration.
enum Stability<'t> {
    /// Never assigned.
    Fixed,
    /// Assigned only by the update of this `for` (which declares it).
    LoopOf(Node<'t>),
    /// Assigned elsewhere.
    Varies,
}

// ---------------------------------------------------------------------------------------
// Bounds.

/// An upper bound, and whether some thread reaches it (`tight`). A bound that only
/// holds (`i - i % L` bounded by `i`'s largest value minus 0) gives no length: the
/// analysis claims an extent only where the largest index is attained.
#[derive(Debug, Clone, PartialEq)]
struct Upper {
    p: Poly,
    tight: bool,
}

impl Upper {
    fn tight(p: Poly) -> Upper {
        Upper { p, tight: true }
    }
    fn map(&self, f: impl FnOnce(&Poly) -> Option<Poly>) -> Option<Upper> {
        f(&self.p).map(|p| Upper { p, tight: self.tight })
    }
}

#[derive(Debug, Clone, Default)]
struct Bounds {
    lo: Option<Poly>,
    hi: Option<Upper>,
}

impl Bounds {
    fn exact(p: Poly) -> Bounds {
        Bounds { lo: Some(p.clone()), hi: Some(Upper::tight(p)) }
    }
    fn constant(c: i64) -> Bounds {
        Bounds::exact(Poly::constant(c))
    }
    fn exact_value(&self) -> Option<&Poly> {
        match (&self.lo, &self.hi) {
            (Some(a), Some(b)) if *a == b.p => Some(a),
            _ => None,
        }
    }
    fn never_negative(&self) -> bool {
        self.lo.as_ref().is_some_and(Poly::never_negative)
    }
}

/// The least of several upper bounds (each valid, so any is sound). It is reached only
/// if it is itself reached and at most every other bound: with two bounds that do not
/// compare, the real maximum is their minimum, which a polynomial cannot say.
fn tightest_upper(cands: Vec<Upper>) -> Option<Upper> {
    let mut best: Option<Upper> = None;
    let mut all_compare = true;
    for c in cands {
        best = Some(match best {
            Some(b) if b.p.at_least(&c.p) => c,
            Some(b) => {
                all_compare &= c.p.at_least(&b.p);
                b
            }
            None => c,
        });
    }
    best.map(|b| Upper { tight: b.tight && all_compare, p: b.p })
}

fn tightest_lower(cands: Vec<Poly>) -> Option<Poly> {
    let mut best: Option<Poly> = None;
    for c in cands {
        best = Some(match best {
            Some(b) if c.at_least(&b) => c,
            Some(b) => b,
            None => c,
        });
    }
    best
}

/// The larger of two upper bounds (of `max(a, b)` or `c ? a : b`), when they compare.
fn larger(a: &Upper, b: &Upper) -> Option<Upper> {
    if a.p.at_least(&b.p) {
        Some(a.clone())
    } else if b.p.at_least(&a.p) {
        Some(b.clone())
    } else {
        None
    }
}

/// The smaller of two lower bounds, when they compare.
fn smaller(a: &Poly, b: &Poly) -> Option<Poly> {
    if a.at_least(b) {
        Some(b.clone())
    } else if b.at_least(a) {
        Some(a.clone())
    } else {
        None
    }
}

/// A comparison the code guarantees where a use sits: `lhs < rhs`, `lhs <= rhs`.
struct Fact<'t> {
    lhs: Node<'t>,
    rhs: Node<'t>,
    strict: bool,
    /// The condition it comes from (to check that the names in it did not change since).
    from: Node<'t>,
}

/// Expression text without spaces, parentheses and casts at the outside: the key facts
/// and uses are matched by.
fn key(t: &str, n: Node) -> String {
    text(t, strip(n)).chars().filter(|c| !c.is_whitespace()).collect()
}

/// The facts a condition gives when it holds (`positive`) or fails.
fn facts_of<'t>(t: &str, cond: Node<'t>, positive: bool, out: &mut Vec<Fact<'t>>) {
    let c = strip_parens(cond);
    if c.kind() == "unary_expression" && c.child(0).is_some_and(|o| text(t, o) == "!") {
        if let Some(inner) = c.child_by_field_name("argument") {
            facts_of(t, inner, !positive, out);
        }
        return;
    }
    let Some((op, l, r)) = syntax::binary(t, c) else { return };
    match (op, positive) {
        ("&&", true) | ("||", false) => {
            facts_of(t, l, positive, out);
            facts_of(t, r, positive, out);
        }
        ("&&", false) | ("||", true) => {}
        _ => {
            // Normalize to `a < b` / `a <= b`, then flip for a failed condition.
            let op = if positive {
                op
            } else {
                match op {
                    "<" => ">=",
                    "<=" => ">",
                    ">" => "<=",
                    ">=" => "<",
                    "!=" => "==",
                    _ => return,
                }
            };
            let mut push = |lhs: Node<'t>, rhs: Node<'t>, strict: bool| out.push(Fact { lhs, rhs, strict, from: cond });
            match op {
                "<" => push(l, r, true),
                "<=" => push(l, r, false),
                ">" => push(r, l, true),
                ">=" => push(r, l, false),
                "==" => {
                    push(l, r, false);
                    push(r, l, false);
                }
                _ => {}
            }
        }
    }
}

/// Whether a statement only leaves (`return;`, `continue;`, `break;`, or a block of one).
fn only_leaves(s: Node) -> bool {
    let stmts: Vec<Node> = if s.kind() == "compound_statement" {
        named_children(s).into_iter().filter(|c| c.kind() != "comment").collect()
    } else {
        vec![s]
    };
    stmts.len() == 1 && matches!(stmts[0].kind(), "return_statement" | "continue_statement" | "break_statement")
}

/// Everything the control flow guarantees where `at` sits, inside `root`.
fn facts_at<'t>(t: &str, root: Node<'t>, at: Node<'t>) -> Vec<Fact<'t>> {
    let mut out = Vec::new();
    let mut child = at;
    let mut n = at.parent();
    while let Some(p) = n {
        match p.kind() {
            "if_statement" => {
                if let Some(cond) = condition(p) {
                    if is_child(p, "consequence", child) {
                        facts_of(t, cond, true, &mut out);
                    } else if is_child(p, "alternative", child) {
                        facts_of(t, cond, false, &mut out);
                    }
                }
            }
            "conditional_expression" => {
                if let Some(cond) = p.child_by_field_name("condition") {
                    if is_child(p, "consequence", child) {
                        facts_of(t, cond, true, &mut out);
                    } else if is_child(p, "alternative", child) {
                        facts_of(t, cond, false, &mut out);
                    }
                }
            }
            "for_statement" | "while_statement" if is_child(p, "body", child) => {
                let cond =
                    if p.kind() == "while_statement" { condition(p) } else { p.child_by_field_name("condition") };
                if let Some(cond) = cond {
                    facts_of(t, cond, true, &mut out);
                }
            }
            "binary_expression" => {
                if let (Some((op, l, _)), true) = (syntax::binary(t, p), is_child(p, "right", child)) {
                    match op {
                        "&&" => facts_of(t, l, true, &mut out),
                        "||" => facts_of(t, l, false, &mut out),
                        _ => {}
                    }
                }
            }
            "compound_statement" => {
                for s in named_children(p) {
                    if s.end_byte() > child.start_byte() {
                        break;
                    }
                    if s.kind() == "if_statement" && s.child_by_field_name("alternative").is_none() {
                        if let (Some(cond), Some(cons)) = (condition(s), s.child_by_field_name("consequence")) {
                            if only_leaves(cons) {
                                facts_of(t, cond, false, &mut out);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        if p.id() == root.id() {
            break;
        }
        child = p;
        n = p.parent();
    }
    out
}

/// A function body and what is known about the names it reads.
struct Body<'s, 't> {
    t: &'s str,
    root: Node<'t>,
    /// Parameters by value: their exact values, when the call site gives them.
    params: BTreeMap<String, Option<Poly>>,
    /// Grid and block extents (x, y, z), when the launch spells them.
    grid: [Option<Poly>; 3],
    block: [Option<Poly>; 3],
    consts: &'s BTreeMap<String, i64>,
    depth: Cell<u32>,
    /// Bounds computed so far: a budget, so that no input makes the analysis slow.
    steps: Cell<u32>,
    /// The assignments to each name, found once.
    assigned: RefCell<BTreeMap<String, Vec<Node<'t>>>>,
}

/// Bounds one body may compute before giving up on the rest.
const MAX_STEPS: u32 = 20_000;

impl<'t> Body<'_, 't> {
    /// The writes to the variable `name` declared by `decl` (None: a parameter).
    fn writes_to(&self, name: &str, decl: Option<Node<'t>>) -> Vec<Node<'t>> {
        let all = self
            .assigned
            .borrow_mut()
            .entry(name.to_string())
            .or_insert_with(|| writes(self.t, self.root, name))
            .clone();
        all.into_iter()
            .filter(|w| declaration_of(self.t, self.root, *w, name).map(|(d, _)| d.id()) == decl.map(|d| d.id()))
            .collect()
    }

    fn stability(&self, name: &str, decl: Node<'t>) -> Stability<'t> {
        let w = self.writes_to(name, Some(decl));
        if w.is_empty() {
            return Stability::Fixed;
        }
        if decl.kind() == "for_statement" {
            if let Some(update) = decl.child_by_field_name("update") {
                if w.iter().all(|x| contains(update, *x)) {
                    return Stability::LoopOf(decl);
                }
            }
        }
        Stability::Varies
    }

    /// Whether a fact from condition `from` about the names in `lhs` still holds at
    /// `at`: every local it names is fixed, or a loop variable whose loop holds both.
    fn fact_holds(&self, lhs: Node<'t>, from: Node<'t>, at: Node<'t>) -> bool {
        for id in descendants(lhs).into_iter().filter(|d| d.kind() == "identifier") {
            let name = text(self.t, id);
            let Some((decl, _)) = declaration_of(self.t, self.root, id, name) else {
                // A parameter: fixed unless the body assigns it.
                if !self.writes_to(name, None).is_empty() {
                    return false;
                }
                continue;
            };
            match self.stability(name, decl) {
                Stability::Fixed => {}
                Stability::LoopOf(f) => {
                    let Some(body) = f.child_by_field_name("body") else { return false };
                    let from_loop = f.child_by_field_name("condition").is_some_and(|c| contains(c, from));
                    if !(contains(body, at) && (contains(body, from) || from_loop)) {
                        return false;
                    }
                }
                Stability::Varies => return false,
            }
        }
        true
    }

    fn bounds(&self, n: Node<'t>) -> Bounds {
        if self.depth.get() >= MAX_DEPTH || self.steps.get() >= MAX_STEPS {
            return Bounds::default();
        }
        self.steps.set(self.steps.get() + 1);
        self.depth.set(self.depth.get() + 1);
        let b = self.bounds_inner(n);
        self.depth.set(self.depth.get() - 1);
        b
    }

    fn bounds_inner(&self, n: Node<'t>) -> Bounds {
        let n = strip(n);
        let mut b = self.structural(n);
        // What the checks around this place say about the same expression.
        if n.kind() != "number_literal" {
            let k = key(self.t, n);
            let mut his: Vec<Upper> = Vec::new();
            let mut los: Vec<Poly> = Vec::new();
            // A name in a fact must be the same variable as here (not one it shadows).
            let same = |other: Node<'t>| {
                let other = strip(other);
                n.kind() != "identifier"
                    || declaration_of(self.t, self.root, other, &k).map(|(d, _)| d.id())
                        == declaration_of(self.t, self.root, n, &k).map(|(d, _)| d.id())
            };
            for f in facts_at(self.t, self.root, n) {
                let matches_lhs = key(self.t, f.lhs) == k && same(f.lhs);
                let matches_rhs = key(self.t, f.rhs) == k && same(f.rhs);
                if !matches_lhs && !matches_rhs {
                    continue;
                }
                if matches_lhs && self.fact_holds(f.lhs, f.from, n) && self.fact_holds(f.rhs, f.from, n) {
                    if let Some(h) = self.bounds(f.rhs).hi {
                        his.extend(if f.strict { h.map(|p| p.sub(&Poly::constant(1))) } else { Some(h) });
                    }
                }
                if matches_rhs && self.fact_holds(f.rhs, f.from, n) && self.fact_holds(f.lhs, f.from, n) {
                    if let Some(l) = self.bounds(f.lhs).lo {
                        let l = if f.strict { l.add(&Poly::constant(1)) } else { Some(l) };
                        los.extend(l);
                    }
                }
            }
            his.extend(self.sub_sum_bounds(n));
            his.extend(b.hi.take());
            los.extend(b.lo.take());
            b.hi = tightest_upper(his);
            b.lo = tightest_lower(los);
        }
        b
    }

    /// A sum some of whose terms a check bounds together: `row * K + k0 + tid` under
    /// `k0 + tid < K` is below `row * K + K`. (The parser nests sums to the left, so
    /// `k0 + tid` is no node of its own here.)
    fn sub_sum_bounds(&self, n: Node<'t>) -> Vec<Upper> {
        let t = self.t;
        if syntax::binary(t, n).map(|b| b.0) != Some("+") {
            return Vec::new();
        }
        let terms: Vec<Node<'t>> = syntax::flatten(t, n, "+");
        let keys: Vec<String> = terms.iter().map(|x| key(t, *x)).collect();
        let mut out = Vec::new();
        for f in facts_at(t, self.root, n) {
            let fact_terms: Vec<String> = syntax::flatten(t, strip(f.lhs), "+").iter().map(|x| key(t, *x)).collect();
            if fact_terms.len() < 2 || fact_terms.len() >= keys.len() {
                continue;
            }
            let mut rest: Vec<Option<&String>> = keys.iter().map(Some).collect();
            let all_found = fact_terms.iter().all(|ft| match rest.iter().position(|k| *k == Some(ft)) {
                Some(i) => {
                    rest[i] = None;
                    true
                }
                None => false,
            });
            if !all_found || !self.fact_holds(f.lhs, f.from, n) || !self.fact_holds(f.rhs, f.from, n) {
                continue;
            }
            let Some(h) = self.bounds(f.rhs).hi else { continue };
            let Some(mut sum) = (if f.strict { h.map(|p| p.sub(&Poly::constant(1))) } else { Some(h) }) else {
                continue;
            };
            let mut ok = true;
            for (i, k) in rest.iter().enumerate() {
                if k.is_none() {
                    continue;
                }
                match self
                    .bounds(terms[i])
                    .hi
                    .and_then(|x| sum.p.add(&x.p).map(|p| Upper { p, tight: sum.tight && x.tight }))
                {
                    Some(next) => sum = next,
                    None => ok = false,
                }
            }
            if ok {
                out.push(sum);
            }
        }
        out
    }

    /// The bounds of an index term at its place. A check on several of its names
    /// together that the bounds did not use (`2 * i + j < n` around `i + j`) may keep
    /// every thread below them: then they still hold, but nothing says they are reached.
    fn offset(&self, n: Node<'t>) -> Offset {
        let t = self.t;
        let mut bounds = self.bounds(n);
        let names: Vec<&str> = syntax::identifiers(t, n);
        let node_keys: Vec<String> = descendants(n).into_iter().map(|d| key(t, d)).collect();
        let sums: Vec<Vec<String>> = descendants(n)
            .into_iter()
            .filter(|d| syntax::binary(t, *d).map(|b| b.0) == Some("+"))
            .map(|d| syntax::flatten(t, d, "+").iter().map(|x| key(t, *x)).collect())
            .collect();
        let unused_joint_check = facts_at(t, self.root, n).into_iter().any(|f| {
            let lhs = strip(f.lhs);
            let joint = !matches!(lhs.kind(), "identifier" | "field_expression" | "number_literal");
            let about_these = syntax::identifiers(t, lhs).iter().all(|x| names.contains(x));
            if !joint || !about_these {
                return false;
            }
            let k = key(t, lhs);
            let fact_terms: Vec<String> = syntax::flatten(t, lhs, "+").iter().map(|x| key(t, *x)).collect();
            let matched = node_keys.contains(&k)
                || (fact_terms.len() >= 2
                    && sums.iter().any(|s| {
                        let mut rest: Vec<Option<&String>> = s.iter().map(Some).collect();
                        fact_terms.iter().all(|ft| match rest.iter().position(|x| *x == Some(ft)) {
                            Some(i) => {
                                rest[i] = None;
                                true
                            }
                            None => false,
                        })
                    }));
            !matched
        });
        if unused_joint_check {
            if let Some(h) = bounds.hi.as_mut() {
                h.tight = false;
            }
        }
        Offset { bounds, text: text(t, n).to_string() }
    }

    /// Bounds from the expression's own form.
    fn structural(&self, n: Node<'t>) -> Bounds {
        let t = self.t;
        match n.kind() {
            "number_literal" => int_literal(text(t, n)).map(Bounds::constant).unwrap_or_default(),
            "identifier" => self.name_bounds(n),
            "field_expression" => match builtin(t, n) {
                Some((obj, d)) => {
                    let i = (d as u8 - b'x') as usize;
                    let one = Poly::constant(1);
                    match obj {
                        "threadIdx" => Bounds {
                            lo: Some(Poly::constant(0)),
                            hi: self.block[i].as_ref().and_then(|b| b.sub(&one)).map(Upper::tight),
                        },
                        "blockIdx" => Bounds {
                            lo: Some(Poly::constant(0)),
                            hi: self.grid[i].as_ref().and_then(|g| g.sub(&one)).map(Upper::tight),
                        },
                        "blockDim" => self.block[i].clone().map(Bounds::exact).unwrap_or_default(),
                        _ => self.grid[i].clone().map(Bounds::exact).unwrap_or_default(),
                    }
                }
                None => Bounds::default(),
            },
            "binary_expression" => {
                let Some((op, l, r)) = syntax::binary(t, n) else { return Bounds::default() };
                let (a, b) = (self.bounds(l), self.bounds(r));
                arithmetic(op, &a, &b)
            }
            "call_expression" => {
                let Some(f) = n.child_by_field_name("function") else { return Bounds::default() };
                let args: Vec<Node> = n
                    .child_by_field_name("arguments")
                    .map(|a| named_children(a).into_iter().filter(|c| c.kind() != "comment").collect())
                    .unwrap_or_default();
                let name = text(t, f).trim_start_matches("std::").trim_start_matches("::");
                match (name, args.as_slice()) {
                    (n, [x]) if n.starts_with("static_cast<") => self.bounds(*x),
                    ("min" | "umin" | "llmin" | "ullmin", [a, b]) => {
                        let (a, b) = (self.bounds(*a), self.bounds(*b));
                        Bounds {
                            hi: tightest_upper(a.hi.into_iter().chain(b.hi).collect()),
                            lo: a.lo.as_ref().zip(b.lo.as_ref()).and_then(|(x, y)| smaller(x, y)),
                        }
                    }
                    ("max" | "umax" | "llmax" | "ullmax", [a, b]) => {
                        let (a, b) = (self.bounds(*a), self.bounds(*b));
                        Bounds {
                            hi: a.hi.as_ref().zip(b.hi.as_ref()).and_then(|(x, y)| larger(x, y)),
                            lo: tightest_lower(a.lo.into_iter().chain(b.lo).collect()),
                        }
                    }
                    _ => Bounds::default(),
                }
            }
            "conditional_expression" => {
                let (Some(c), Some(a)) = (n.child_by_field_name("consequence"), n.child_by_field_name("alternative"))
                else {
                    return Bounds::default();
                };
                let (a, b) = (self.bounds(c), self.bounds(a));
                Bounds {
                    hi: a.hi.as_ref().zip(b.hi.as_ref()).and_then(|(x, y)| larger(x, y)),
                    lo: a.lo.as_ref().zip(b.lo.as_ref()).and_then(|(x, y)| smaller(x, y)),
                }
            }
            _ => Bounds::default(),
        }
    }

    fn name_bounds(&self, id: Node<'t>) -> Bounds {
        let name = text(self.t, id);
        match declaration_of(self.t, self.root, id, name) {
            Some((decl, value)) => match (self.stability(name, decl), value) {
                (Stability::Fixed, Some(v))
                    if !matches!(v.kind(), "initializer_list" | "argument_list" | "parameter_list") =>
                {
                    self.bounds(v)
                }
                // A loop variable starts at its initializer and only grows (checked in
                // its update), so it is at least that; its upper end comes from facts.
                (Stability::LoopOf(f), Some(v)) if increments(self.t, f, name) => {
                    Bounds { lo: self.bounds(v).lo, hi: None }
                }
                _ => Bounds::default(),
            },
            None => {
                if let Some(v) = self.params.get(name) {
                    if !self.writes_to(name, None).is_empty() {
                        return Bounds::default();
                    }
                    return v.clone().map(Bounds::exact).unwrap_or_default();
                }
                if name == "warpSize" {
                    return Bounds::constant(32);
                }
                self.consts.get(name).map(|c| Bounds::constant(*c)).unwrap_or_default()
            }
        }
    }
}

/// Whether a `for` only increases `name` (`++i`, `i++`, `i += positive`).
fn increments(t: &str, f: Node, name: &str) -> bool {
    let Some(u) = f.child_by_field_name("update") else { return false };
    let parts: Vec<Node> = if u.kind() == "comma_expression" { named_children(u) } else { vec![u] };
    parts.iter().all(|p| match p.kind() {
        "update_expression" => {
            !p.child_by_field_name("argument").is_some_and(|a| syntax::is_ident(t, a, name))
                || text(t, *p).contains("++")
        }
        "assignment_expression" => {
            let target = p.child_by_field_name("left").is_some_and(|l| syntax::is_ident(t, l, name));
            !target
                || (p.child_by_field_name("operator").is_some_and(|o| text(t, o) == "+=")
                    && p.child_by_field_name("right").is_some_and(|r| {
                        let r = strip(r);
                        r.kind() != "unary_expression" && !text(t, r).starts_with('-')
                    }))
        }
        _ => true,
    })
}

fn arithmetic(op: &str, a: &Bounds, b: &Bounds) -> Bounds {
    let lows = |f: &dyn Fn(&Poly, &Poly) -> Option<Poly>, x: &Option<Poly>, y: &Option<Poly>| match (x, y) {
        (Some(x), Some(y)) => f(x, y),
        _ => None,
    };
    // Both ends at their largest together: reached when both are reached.
    let highs = |f: &dyn Fn(&Poly, &Poly) -> Option<Poly>| match (&a.hi, &b.hi) {
        (Some(x), Some(y)) => f(&x.p, &y.p).map(|p| Upper { p, tight: x.tight && y.tight }),
        _ => None,
    };
    match op {
        "+" => Bounds { lo: lows(&|x, y| x.add(y), &a.lo, &b.lo), hi: highs(&|x, y| x.add(y)) },
        "-" => Bounds {
            lo: match (&a.lo, &b.hi) {
                (Some(x), Some(y)) => x.sub(&y.p),
                _ => None,
            },
            // The largest difference is reached only when what is subtracted is one value.
            hi: match (&a.hi, &b.lo) {
                (Some(x), Some(y)) => x.p.sub(y).map(|p| Upper { p, tight: x.tight && b.exact_value().is_some() }),
                _ => None,
            },
        },
        "*" => {
            // A constant factor >= 0 scales both ends; otherwise both sides must be >= 0.
            let scale = |k: i64, x: &Bounds| Bounds {
                lo: x.lo.as_ref().and_then(|p| p.scale(k)),
                hi: x.hi.as_ref().and_then(|h| h.map(|p| p.scale(k))),
            };
            if let Some(k) = a.exact_value().and_then(Poly::as_constant).filter(|k| *k >= 0) {
                return scale(k, b);
            }
            if let Some(k) = b.exact_value().and_then(Poly::as_constant).filter(|k| *k >= 0) {
                return scale(k, a);
            }
            if a.never_negative() && b.never_negative() {
                Bounds { lo: lows(&|x, y| x.mul(y), &a.lo, &b.lo), hi: highs(&|x, y| x.mul(y)) }
            } else {
                Bounds::default()
            }
        }
        "/" => match b.exact_value() {
            Some(d) if d.never_negative() && d.as_constant() != Some(0) => Bounds {
                hi: a.hi.as_ref().and_then(|h| h.map(|p| p.div_floor(d))),
                lo: if a.never_negative() { a.lo.as_ref().and_then(|l| l.div_floor(d)) } else { None },
            },
            _ => Bounds::default(),
        },
        "%" if a.never_negative() => {
            // `a % m` reaches m - 1 when a runs over at least m values from 0.
            let wrap = b.hi.as_ref().and_then(|m| {
                let top = m.p.sub(&Poly::constant(1))?;
                let reached = m.tight
                    && b.exact_value().is_some()
                    && a.lo.as_ref().is_some_and(|l| l.as_constant() == Some(0))
                    && a.hi.as_ref().is_some_and(|h| h.tight && h.p.at_least(&top));
                Some(Upper { p: top, tight: reached })
            });
            let below = a.hi.clone();
            let hi = match (wrap, below) {
                (Some(w), Some(x)) if w.p.at_least(&x.p) => Some(x),
                (Some(w), Some(x)) if x.p.at_least(&w.p) => Some(w),
                (Some(w), Some(_)) => Some(Upper { tight: false, p: w.p }),
                (w, x) => w.or(x),
            };
            Bounds { lo: Some(Poly::constant(0)), hi }
        }
        "<<" => match b.exact_value().and_then(Poly::as_constant).filter(|k| (0..32).contains(k)) {
            Some(k) => arithmetic("*", a, &Bounds::constant(1 << k)),
            None => Bounds::default(),
        },
        ">>" => match b.exact_value().and_then(Poly::as_constant).filter(|k| (0..32).contains(k)) {
            Some(k) => arithmetic("/", a, &Bounds::constant(1 << k)),
            None => Bounds::default(),
        },
        // A mask bounds but does not say which values occur.
        "&" if a.never_negative() && b.never_negative() => Bounds {
            lo: Some(Poly::constant(0)),
            hi: tightest_upper(a.hi.clone().into_iter().chain(b.hi.clone()).collect())
                .map(|u| Upper { tight: false, p: u.p }),
        },
        _ => Bounds::default(),
    }
}

// ---------------------------------------------------------------------------------------
// Where a pointer is used.

/// The largest index a use reaches (over the launcher's sizes) and the access it is.
struct Reach {
    hi: Poly,
    /// Some thread reaches it (see [`Upper`]).
    tight: bool,
    access: String,
    line: usize,
}

/// Everything a function may use to follow a pointer.
struct Follow<'a, 's> {
    files: &'a [&'s Source],
    consts: &'a BTreeMap<String, i64>,
    calls: u32,
}

/// CUDA intrinsics and atomics that read or write exactly the element at their address.
fn touches_one_element(function: &str) -> bool {
    function.starts_with("atomic") || function.starts_with("__ld") || function.starts_with("__st")
}

/// Every access through pointer `name` declared by `decl` (None: a parameter) in `body`,
/// each with the offsets (expressions at their own place) added on the way to it.
fn accesses<'t>(
    body: &Body<'_, 't>,
    follow: &Follow<'_, '_>,
    name: &str,
    decl: Option<Node<'t>>,
    offsets: &[Offset],
    out: &mut Vec<Reach>,
) -> Result<(), String> {
    let t = body.t;
    let place = |n: Node| format!("line {}", line_of(t, n.start_byte()));
    for id in descendants(body.root) {
        if id.kind() != "identifier" || text(t, id) != name || is_declarator(id) {
            continue;
        }
        // Only the uses that refer to this declaration.
        let resolved = declaration_of(t, body.root, id, name).map(|(d, _)| d.id());
        if resolved != decl.map(|d| d.id()) {
            continue;
        }
        let Some(p) = up(id) else { continue };
        if (p.kind() == "assignment_expression" && is_child(p, "left", id)) || p.kind() == "update_expression" {
            return Err(format!("`{name}` is moved ({}, {})", text(t, p), place(p)));
        }
        match p.kind() {
            "subscript_expression" if is_child(p, "argument", id) => {
                let index = subscript_index(p).ok_or_else(|| format!("`{}` ({})", text(t, p), place(p)))?;
                let mut offs = offsets.to_vec();
                offs.push(body.offset(index));
                // `&x[i]` is a pointer like `x + i`; a value `x[i]` is an access.
                let addr =
                    up(p).filter(|q| q.kind() == "pointer_expression" && q.child(0).is_some_and(|o| text(t, o) == "&"));
                match addr {
                    Some(a) => derived(body, follow, a, &offs, out)?,
                    None => reach(t, p, &offs, out)?,
                }
            }
            "binary_expression" => match syntax::binary(t, p) {
                Some(("+", l, r)) => {
                    let other = if strip_parens(l).id() == id.id() { r } else { l };
                    let mut offs = offsets.to_vec();
                    offs.push(body.offset(other));
                    derived(body, follow, p, &offs, out)?;
                }
                // Null checks read no element.
                Some(("==" | "!=" | "&&" | "||", _, _)) => {}
                _ => return Err(format!("`{name}` is used in `{}` ({})", text(t, p), place(p))),
            },
            "condition_clause" => {}
            "unary_expression" if p.child(0).is_some_and(|o| text(t, o) == "!") => {}
            _ => derived(body, follow, id, offsets, out)?,
        }
    }
    Ok(())
}

/// One term of the index an access reaches: its bounds and how it is written.
#[derive(Clone)]
struct Offset {
    bounds: Bounds,
    text: String,
}

impl Offset {
    fn constant(c: i64) -> Offset {
        Offset { bounds: Bounds::constant(c), text: c.to_string() }
    }
}

/// Records an access at the sum of `offsets`.
fn reach(t: &str, at: Node, offsets: &[Offset], out: &mut Vec<Reach>) -> Result<(), String> {
    let mut hi = Poly::constant(0);
    let mut tight = true;
    for o in offsets {
        let h = o.bounds.hi.as_ref().ok_or_else(|| {
            format!("nothing bounds `{}` in `{}` (line {})", o.text, text(t, at), line_of(t, at.start_byte()))
        })?;
        hi = hi.add(&h.p).ok_or("an index overflows")?;
        tight &= h.tight;
    }
    out.push(Reach { hi, tight, access: text(t, at).to_string(), line: line_of(t, at.start_byte()) });
    Ok(())
}

/// A pointer expression `d` (`x`, `x + i`, `&x[i]`) at the given offsets: what is done
/// with it.
fn derived<'t>(
    body: &Body<'_, 't>,
    follow: &Follow<'_, '_>,
    d: Node<'t>,
    offsets: &[Offset],
    out: &mut Vec<Reach>,
) -> Result<(), String> {
    let t = body.t;
    let place = format!("line {}", line_of(t, d.start_byte()));
    let Some(p) = up(d) else { return Err(format!("`{}` ({place})", text(t, d))) };
    match p.kind() {
        "pointer_expression" if p.child(0).is_some_and(|o| text(t, o) == "*") => reach(t, p, offsets, out),
        "subscript_expression" if is_child(p, "argument", d) => {
            let index = subscript_index(p).ok_or_else(|| format!("`{}` ({place})", text(t, p)))?;
            let mut offs = offsets.to_vec();
            offs.push(body.offset(index));
            reach(t, p, &offs, out)
        }
        "binary_expression" => match syntax::binary(t, p) {
            Some(("+", l, r)) => {
                let other = if strip_parens(l).id() == d.id() { r } else { l };
                let mut offs = offsets.to_vec();
                offs.push(body.offset(other));
                derived(body, follow, p, &offs, out)
            }
            Some(("==" | "!=", _, _)) => Ok(()),
            _ => Err(format!("`{}` ({place}) is pointer arithmetic the analysis does not follow", text(t, p))),
        },
        "init_declarator" if is_child(p, "value", d) => {
            let pointer = p.child_by_field_name("declarator").is_some_and(|x| x.kind() == "pointer_declarator");
            let declaration = p.parent().filter(|x| x.kind() == "declaration");
            let alias = p.child_by_field_name("declarator").and_then(|mut x| {
                while x.kind() != "identifier" {
                    x = x.child_by_field_name("declarator")?;
                }
                Some(text(t, x).to_string())
            });
            match (pointer, declaration, alias) {
                (true, Some(decl), Some(alias)) => {
                    // The alias is declared in a block or a for initializer.
                    let owner = if decl.parent().is_some_and(|x| x.kind() == "for_statement") {
                        decl.parent()
                    } else {
                        Some(decl)
                    };
                    accesses(body, follow, &alias, owner, offsets, out)
                }
                _ => Err(format!("`{}` ({place}) is stored as another type", text(t, p))),
            }
        }
        "argument_list" => {
            let call = p.parent().filter(|c| c.kind() == "call_expression");
            let function = call.and_then(|c| c.child_by_field_name("function")).map(|f| text(t, f).to_string());
            let Some(function) = function else { return Err(format!("`{}` ({place})", text(t, p))) };
            if touches_one_element(&function) {
                return reach(t, d, offsets, out);
            }
            let position = named_children(p)
                .into_iter()
                .filter(|c| c.kind() != "comment")
                .position(|a| a.id() == d.id() || strip_parens(a).id() == d.id());
            let callee_reach = position.and_then(|i| callee_extent(follow, &function, i));
            match callee_reach {
                Some(Ok(c)) => {
                    let mut offs = offsets.to_vec();
                    offs.push(Offset::constant(c));
                    reach(t, call.unwrap_or(d), &offs, out)
                }
                Some(Err(why)) => Err(format!("`{}` ({place}): {why}", text(t, call.unwrap_or(p)))),
                None => Err(format!(
                    "`{}` ({place}) hands the pointer to `{function}`, whose body the analysis cannot read",
                    text(t, call.unwrap_or(p))
                )),
            }
        }
        "cast_expression" => Err(format!("`{}` ({place}) casts the pointer to another type", text(t, p))),
        _ => Err(format!("`{}` ({place}) uses the pointer in a way the analysis does not follow", text(t, p))),
    }
}

/// The largest element a device function reaches through its parameter `index`, when
/// that is a fixed number (None: no such function in the files).
fn callee_extent(follow: &Follow<'_, '_>, function: &str, index: usize) -> Option<Result<i64, String>> {
    if follow.calls >= MAX_CALL_DEPTH {
        return Some(Err(format!("calls nest deeper than {MAX_CALL_DEPTH} functions")));
    }
    let short = function.rsplit("::").next().unwrap_or(function);
    let short = short.split('<').next().unwrap_or(short).trim();
    for f in follow.files {
        for h in f.host_functions().into_iter().filter(|h| h.name == short || h.name.ends_with(&format!("::{short}"))) {
            let Some(root) = f.node(&h.body, "compound_statement") else { continue };
            let Some(func) = root.parent() else { continue };
            let params = parameters(f.text(), func);
            let Some(param) = params.get(index).filter(|p| p.pointer) else { continue };
            let body = Body {
                t: f.text(),
                root,
                params: params.iter().filter(|p| !p.pointer).map(|p| (p.name.clone(), None)).collect(),
                grid: [None, None, None],
                block: [None, None, None],
                consts: follow.consts,
                depth: Cell::new(0),
                steps: Cell::new(0),
                assigned: RefCell::new(BTreeMap::new()),
            };
            let inner = Follow { files: follow.files, consts: follow.consts, calls: follow.calls + 1 };
            let mut reaches = Vec::new();
            if let Err(why) = accesses(&body, &inner, &param.name, None, &[], &mut reaches) {
                return Some(Err(format!("in `{short}`, {why}")));
            }
            let mut best: Option<i64> = None;
            for r in &reaches {
                match r.hi.as_constant() {
                    Some(c) => best = Some(best.map_or(c, |b| b.max(c))),
                    None => {
                        return Some(Err(format!(
                            "`{short}` reaches `{}` (line {}), which depends on its other arguments",
                            r.access, r.line
                        )))
                    }
                }
            }
            return Some(best.ok_or_else(|| format!("`{short}` never reads or writes through it")));
        }
    }
    None
}

// ---------------------------------------------------------------------------------------
// The launcher.

/// The launcher's body: exact values of its expressions over its integer parameters.
struct Launcher<'s, 't> {
    t: &'s str,
    body: Node<'t>,
    sizes: &'s [String],
    consts: &'s BTreeMap<String, i64>,
    depth: Cell<u32>,
}

impl<'t> Launcher<'_, 't> {
    /// The exact value of an expression of the launcher, when it is a polynomial.
    fn value(&self, n: Node<'t>) -> Option<Poly> {
        if self.depth.get() >= MAX_DEPTH {
            return None;
        }
        self.depth.set(self.depth.get() + 1);
        let v = self.value_inner(n);
        self.depth.set(self.depth.get() - 1);
        v
    }

    fn value_inner(&self, n: Node<'t>) -> Option<Poly> {
        let t = self.t;
        let n = strip(n);
        match n.kind() {
            "number_literal" => int_literal(text(t, n)).map(Poly::constant),
            "identifier" => self.name_value(text(t, n), n),
            "binary_expression" => {
                let (op, l, r) = syntax::binary(t, n)?;
                let (a, b) = (self.value(l)?, self.value(r)?);
                match op {
                    "+" => a.add(&b),
                    "-" => a.sub(&b),
                    "*" => a.mul(&b),
                    "/" => {
                        let q = a.div_floor(&b)?;
                        // Exact only: a division with a remainder is no polynomial.
                        (q.mul(&b)? == a).then_some(q)
                    }
                    "<<" => a.scale(1i64.checked_shl(u32::try_from(b.as_constant()?).ok()?)?),
                    _ => None,
                }
            }
            "call_expression" => {
                let f = text(t, n.child_by_field_name("function")?);
                let args: Vec<Node> = named_children(n.child_by_field_name("arguments")?)
                    .into_iter()
                    .filter(|c| c.kind() != "comment")
                    .collect();
                match args.as_slice() {
                    [x] if f.starts_with("static_cast<") => self.value(*x),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The value of `name` as read at `at`.
    fn name_value(&self, name: &str, at: Node<'t>) -> Option<Poly> {
        let t = self.t;
        match declaration_of(t, self.body, at, name) {
            Some((decl, Some(v)))
                if decl.kind() == "declaration"
                    && !matches!(v.kind(), "parameter_list" | "argument_list" | "initializer_list")
                    && writes(t, self.body, name).is_empty() =>
            {
                self.value(v)
            }
            Some(_) => None,
            None if self.sizes.iter().any(|s| s == name) => {
                writes(t, self.body, name).is_empty().then(|| Poly::var(name))
            }
            None => self.consts.get(name).map(|c| Poly::constant(*c)),
        }
    }

    /// The (x, y, z) extents of a launch configuration value: `dim3(a, b)`, `dim3 g(a)`,
    /// `dim3 g = {a, b}` or a plain number.
    fn dims(&self, n: Node<'t>) -> [Option<Poly>; 3] {
        let t = self.t;
        let n = strip(n);
        let from_list = |list: Node<'t>| -> [Option<Poly>; 3] {
            let items: Vec<Node> = named_children(list).into_iter().filter(|c| c.kind() != "comment").collect();
            let mut out = [Some(Poly::constant(1)), Some(Poly::constant(1)), Some(Poly::constant(1))];
            if items.len() > 3 {
                return [None, None, None];
            }
            for (i, item) in items.iter().enumerate() {
                out[i] = match item.kind() {
                    // `dim3 grid(H, B)` read as a declaration: each argument a lone type name.
                    "parameter_declaration" => match named_children(*item).as_slice() {
                        [ty] if ty.kind() == "type_identifier" => self.name_value(text(t, *ty), *ty),
                        _ => None,
                    },
                    _ => self.value(*item),
                };
            }
            out
        };
        match n.kind() {
            "call_expression" if n.child_by_field_name("function").is_some_and(|f| text(t, f) == "dim3") => {
                n.child_by_field_name("arguments").map(from_list).unwrap_or([None, None, None])
            }
            "compound_literal_expression" | "initializer_list" => {
                let list = if n.kind() == "initializer_list" { Some(n) } else { n.child_by_field_name("value") };
                list.map(from_list).unwrap_or([None, None, None])
            }
            "identifier" => {
                let name = text(t, n);
                match declaration_of(t, self.body, n, name) {
                    Some((decl, value)) if decl.kind() == "declaration" && writes(t, self.body, name).is_empty() => {
                        let is_dim3 = decl.child_by_field_name("type").is_some_and(|ty| text(t, ty) == "dim3");
                        match value {
                            Some(v)
                                if is_dim3
                                    && matches!(v.kind(), "argument_list" | "initializer_list" | "parameter_list") =>
                            {
                                from_list(v)
                            }
                            Some(v) if v.kind() == "parameter_list" => [None, None, None],
                            Some(v) if is_dim3 => self.dims(v),
                            // `dim3 g;` is 1 x 1 x 1.
                            None if is_dim3 => {
                                [Some(Poly::constant(1)), Some(Poly::constant(1)), Some(Poly::constant(1))]
                            }
                            Some(v) => [self.value(v), Some(Poly::constant(1)), Some(Poly::constant(1))],
                            None => [None, None, None],
                        }
                    }
                    Some(_) => [None, None, None],
                    None => [self.value(n), Some(Poly::constant(1)), Some(Poly::constant(1))],
                }
            }
            _ => [self.value(n), Some(Poly::constant(1)), Some(Poly::constant(1))],
        }
    }

    /// Whether the launcher uses pointer `name` other than in kernel launches and null
    /// checks (then what it does there is not known).
    fn other_use(&self, name: &str, launches: &[crate::source::Launch]) -> Option<usize> {
        let t = self.t;
        for id in descendants(self.body) {
            if id.kind() != "identifier" || text(t, id) != name {
                continue;
            }
            if launches.iter().any(|l| l.args_range.start <= id.start_byte() && id.end_byte() <= l.args_range.end) {
                continue;
            }
            let Some(p) = up(id) else { continue };
            let harmless = match p.kind() {
                "binary_expression" => {
                    matches!(syntax::binary(t, p), Some(("==" | "!=" | "&&" | "||", _, _)))
                }
                "condition_clause" => true,
                "unary_expression" => p.child(0).is_some_and(|o| text(t, o) == "!"),
                _ => false,
            };
            if !harmless {
                return Some(line_of(t, id.start_byte()));
            }
        }
        None
    }
}

/// The largest index any launched kernel reaches through launcher pointer `name`.
fn launcher_pointer(
    launcher: &Launcher,
    src: &Source,
    files: &[&Source],
    kernels: &[crate::source::Kernel],
    launches: &[crate::source::Launch],
    name: &str,
) -> Result<(Poly, String, usize), String> {
    let t = launcher.t;
    if let Some(line) = launcher.other_use(name, launches) {
        return Err(format!("the launcher uses `{name}` outside a kernel launch (line {line})"));
    }
    let follow = Follow { files, consts: launcher.consts, calls: 0 };
    let mut reaches: Vec<Reach> = Vec::new();
    let mut passed = false;
    for l in launches {
        for (i, range) in l.arg_ranges.iter().enumerate() {
            let Some(arg) = src.root().descendant_for_byte_range(range.start, range.end) else { continue };
            if !syntax::mentions(t, arg, name) {
                continue;
            }
            passed = true;
            let arg = strip_parens(arg);
            // `x` or `x + offset` (the offset an exact launcher value).
            let base = if syntax::is_ident(t, arg, name) && arg.kind() == "identifier" {
                Poly::constant(0)
            } else {
                match syntax::binary(t, arg) {
                    Some(("+", a, b)) if strip_parens(a).kind() == "identifier" && text(t, strip_parens(a)) == name => {
                        launcher.value(b).ok_or_else(|| {
                            format!(
                                "`{}` (line {}): the offset is not a polynomial of the sizes",
                                l.args[i],
                                line_of(t, arg.start_byte())
                            )
                        })?
                    }
                    _ => {
                        return Err(format!(
                            "`{}` passes `{name}` to `{}` in a form the analysis does not follow (line {})",
                            l.args[i],
                            l.kernel,
                            line_of(t, arg.start_byte())
                        ))
                    }
                }
            };
            let kernel = kernels
                .iter()
                .find(|k| k.name == l.kernel)
                .ok_or_else(|| format!("`{name}` goes to `{}`, which is not defined in this file", l.kernel))?;
            if kernel.has_error {
                return Err(format!("`{}` has syntax the parser does not know", kernel.name));
            }
            let param = kernel
                .params
                .get(i)
                .ok_or_else(|| format!("`{}` gets more arguments than it declares", kernel.name))?;
            // A macro body is no code the parser sees: an access there would go uncounted.
            if let Some(m) = macro_mentioning(files, &param.name) {
                return Err(format!("the macro `{m}` names `{}`, and macros are not followed", param.name));
            }
            let root =
                src.node(&kernel.body, "compound_statement").ok_or_else(|| format!("`{}` has no body", kernel.name))?;
            // The kernel's integer parameters take the values the launch passes.
            let mut params = BTreeMap::new();
            for (j, kp) in kernel.params.iter().enumerate().filter(|(_, kp)| !kp.pointer) {
                let v = l
                    .arg_ranges
                    .get(j)
                    .and_then(|r| src.root().descendant_for_byte_range(r.start, r.end))
                    .and_then(|a| launcher.value(a));
                params.insert(kp.name.clone(), v);
            }
            let config = |k: usize| {
                l.config_ranges
                    .get(k)
                    .and_then(|r| src.root().descendant_for_byte_range(r.start, r.end))
                    .map(|n| launcher.dims(n))
                    .unwrap_or([None, None, None])
            };
            let body = Body {
                t,
                root,
                params,
                grid: config(0),
                block: config(1),
                consts: launcher.consts,
                depth: Cell::new(0),
                steps: Cell::new(0),
                assigned: RefCell::new(BTreeMap::new()),
            };
            let mut found = Vec::new();
            accesses(
                &body,
                &follow,
                &param.name,
                None,
                &[Offset { bounds: Bounds::exact(base), text: l.args[i].clone() }],
                &mut found,
            )
            .map_err(|why| format!("in `{}`, {why}", kernel.name))?;
            if found.is_empty() {
                return Err(format!("`{}` never reads or writes `{}`", kernel.name, param.name));
            }
            reaches.extend(found);
        }
    }
    if !passed {
        return Err(format!("`{name}` is passed to no kernel launched from the launcher"));
    }
    let mut best: Option<Reach> = None;
    for r in reaches {
        best = Some(match best {
            None => r,
            Some(b) if b.hi.at_least(&r.hi) => b,
            Some(b) if r.hi.at_least(&b.hi) => r,
            Some(b) => {
                return Err(format!(
                    "`{}` (line {}) and `{}` (line {}) reach extents that do not compare",
                    b.access, b.line, r.access, r.line
                ))
            }
        });
    }
    let best = best.ok_or_else(|| format!("no kernel reads or writes `{name}`"))?;
    if !best.tight {
        let bound = best.hi.add(&Poly::constant(1)).map(|p| p.render(launcher.sizes)).unwrap_or_default();
        return Err(format!(
            "`{}` (line {}) stays below {bound} elements, but no thread need reach that far",
            best.access, best.line
        ));
    }
    Ok((best.hi, best.access, best.line))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The extents of `entry`'s pointers, rendered over the launcher's parameter order.
    fn lens(src: &str, entry: &str) -> Vec<(String, String)> {
        let s = Source::parse(src);
        let order: Vec<String> =
            s.host_functions().into_iter().find(|h| h.name == entry).map(|h| h.params).unwrap_or_default();
        pointer_extents(&s, &[], entry)
            .into_iter()
            .map(|p| {
                let shown = match p.extent {
                    Extent::Derived { len, .. } => len.render(&order),
                    Extent::Unknown { why } => format!("? {why}"),
                };
                (p.name, shown)
            })
            .collect()
    }

    fn derived(src: &str, entry: &str) -> Vec<String> {
        lens(src, entry).into_iter().map(|(n, l)| format!("{n}: {l}")).collect()
    }

    #[test]
    fn a_row_major_matrix_and_a_per_column_vector() {
        let src = r#"
__global__ void k(const float* x, const float* bias, float* y, int rows, int cols) {
  int row = blockIdx.x;
  if (row >= rows) return;
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    y[row * cols + c] = x[row * cols + c] + bias[c];
}
extern "C" void launch(const float* x, const float* bias, float* y, int rows, int cols, cudaStream_t s) {
  k<<<rows, 256, 0, s>>>(x, bias, y, rows, cols);
}
"#;
        assert_eq!(derived(src, "launch"), ["x: rows * cols", "bias: cols", "y: rows * cols"]);
    }

    #[test]
    fn a_flat_index_with_division_and_remainder() {
        let src = r#"
#define BLOCK 256
__global__ void k(const float* x, const float* b, float* y, int n, int cols) {
  size_t i = (size_t)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) {
    int r = i / cols;
    int c = i % cols;
    y[r * cols + c] = x[i] + b[c];
  }
}
extern "C" void f(const float* x, const float* b, float* y, int rows, int cols, cudaStream_t s) {
  const int n = rows * cols;
  k<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, s>>>(x, b, y, n, cols);
}
"#;
        assert_eq!(derived(src, "f"), ["x: rows * cols", "b: cols", "y: rows * cols"]);
    }

    #[test]
    fn a_local_row_pointer_and_a_loop() {
        let src = r#"
__global__ void k(const float* logits, float* lse, int rows, int cols) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* p = logits + (size_t)row * cols;
  float m = -1e30f;
  for (int c = 0; c < cols; ++c) m = fmaxf(m, p[c]);
  lse[row] = m;
}
extern "C" void run(const float* logits, float* lse, int rows, int cols, cudaStream_t stream) {
  k<<<(rows + 255) / 256, 256, 0, stream>>>(logits, lse, rows, cols);
}
"#;
        assert_eq!(derived(src, "run"), ["logits: rows * cols", "lse: rows"]);
    }

    #[test]
    fn a_3d_grid_from_dim3() {
        let src = r#"
__global__ void k(const float* q, float* o, int B, int H, int D) {
  int b = blockIdx.y, h = blockIdx.x;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    size_t at = ((size_t)b * H + h) * D + d;
    o[at] = q[at] * 2.0f;
  }
}
extern "C" void go(const float* q, float* o, int B, int H, int D, cudaStream_t s) {
  dim3 grid(H, B);
  k<<<grid, 128, 0, s>>>(q, o, B, H, D);
}
"#;
        assert_eq!(derived(src, "go"), ["q: B * H * D", "o: B * H * D"]);
    }

    #[test]
    fn a_device_helper_that_reads_one_element() {
        let src = r#"
__device__ float load(const float* p) { return *p; }
__device__ void store(float* p, float v) { p[0] = v; }
__global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  store(y + i, load(x + i) * 2.0f);
}
extern "C" void h(const float* x, float* y, int n, cudaStream_t s) { k<<<(n + 127) / 128, 128, 0, s>>>(x, y, n); }
"#;
        assert_eq!(derived(src, "h"), ["x: n", "y: n"]);
    }

    #[test]
    fn a_single_output_written_by_atomics() {
        let src = r#"
__global__ void sum(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, x[i]);
}
extern "C" void s(const float* x, float* out, int n, cudaStream_t st) { sum<<<(n + 255) / 256, 256, 0, st>>>(x, out, n); }
"#;
        assert_eq!(derived(src, "s"), ["x: n", "out: 1"]);
    }

    #[test]
    fn what_cannot_be_followed_says_why() {
        let src = r#"
__global__ void k(const float* x, float* y, const int* idx, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n / 4) reinterpret_cast<float4*>(y)[i] = reinterpret_cast<const float4*>(x)[i];
  y[idx[0]] = 0;
}
extern "C" void v(const float* x, float* y, const int* idx, const float* unused, int n, cudaStream_t s) {
  cudaMemsetAsync(y, 0, n * sizeof(float), s);
  k<<<n / 1024, 256, 0, s>>>(x, y, idx, n);
}
"#;
        let got = lens(src, "v");
        assert!(got[0].1.starts_with("? in `k`"), "{got:?}");
        assert!(got[1].1.contains("outside a kernel launch"), "{got:?}");
        assert_eq!(got[2].1, "1", "idx[0] only: {got:?}");
        assert!(got[3].1.contains("passed to no kernel"), "{got:?}");
    }

    #[test]
    fn an_unguarded_thread_index_has_no_bound() {
        let src = r#"
__global__ void k(float* y) { y[blockIdx.x * blockDim.x + threadIdx.x] = 0; }
extern "C" void z(float* y, int n, cudaStream_t s) { k<<<(n + 255) / 256, 256, 0, s>>>(y); }
"#;
        let got = lens(src, "z");
        assert!(got[0].1.starts_with("? in `k`, nothing bounds `blockIdx.x * blockDim.x + threadIdx.x`"), "{got:?}");
    }

    #[test]
    fn a_guard_on_a_variable_the_loop_changes_does_not_count() {
        let src = r#"
__global__ void k(float* y, int n) {
  int i = threadIdx.x;
  if (i < n) {
    while (true) { y[i] = 0; i += 7; if (i > 1000) break; }
  }
}
extern "C" void w(float* y, int n, cudaStream_t s) { k<<<1, 256, 0, s>>>(y, n); }
"#;
        let got = lens(src, "w");
        assert!(got[0].1.starts_with('?'), "i changes after the check: {got:?}");
    }

    #[test]
    fn a_check_on_two_terms_of_a_sum_bounds_them_together() {
        // A tile loop: `k0 + threadIdx.x < K` keeps the sum below K, not K - 1 + 15.
        let src = r#"
#define TILE 16
__global__ void g(const float* A, float* C, int M, int K) {
  const int row = blockIdx.y * TILE + threadIdx.y;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE)
    acc += (row < M && k0 + threadIdx.x < K) ? A[(size_t)row * K + k0 + threadIdx.x] : 0.f;
  if (row < M && threadIdx.x == 0) C[row] = acc;
}
extern "C" void gemv(const float* A, float* C, int M, int K, cudaStream_t s) {
  g<<<dim3(1, (M + TILE - 1) / TILE), dim3(TILE, TILE), 0, s>>>(A, C, M, K);
}
"#;
        assert_eq!(derived(src, "gemv"), ["A: M * K", "C: M"]);
    }

    #[test]
    fn a_pointer_a_macro_names_is_not_counted() {
        let src = r#"
#define LOAD(i) x[(i) + 1]
__global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + LOAD(i);
}
extern "C" void m(const float* x, float* y, int n, cudaStream_t s) { k<<<(n + 255) / 256, 256, 0, s>>>(x, y, n); }
"#;
        let got = lens(src, "m");
        assert!(got[0].1.contains("the macro `LOAD` names `x`"), "{got:?}");
        assert_eq!(got[1].1, "n");
    }

    #[test]
    fn a_bound_no_thread_reaches_is_no_length() {
        // `i - i % L` is below i, but the bound `i`'s maximum minus 0 is not reached; a
        // check on `2 * i + j` says nothing about how far `i + j` goes.
        let src = r#"
__global__ void k(const float* x, float* y, int n, int L) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n * L) return;
  int l = i % L;
  y[i] = x[i - l];
}
__global__ void k2(const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (2 * i + j < n) y[i + j] = x[0];
}
extern "C" void a(const float* x, float* y, int n, int L, cudaStream_t s) { k<<<(n * L + 255) / 256, 256, 0, s>>>(x, y, n, L); }
extern "C" void b(const float* x, float* y, int n, cudaStream_t s) { k2<<<1, 1, 0, s>>>(x, y, n); }
"#;
        let got = lens(src, "a");
        assert!(got[0].1.contains("stays below n * L elements, but no thread need reach that far"), "{got:?}");
        assert_eq!(got[1].1, "n * L");
        let got = lens(src, "b");
        assert!(got[1].1.contains("no thread need reach"), "{got:?}");
    }

    #[test]
    fn a_grid_of_exactly_rows_blocks_bounds_block_idx() {
        let src = r#"
__global__ void k(const float* x, float* y, int cols) {
  const float* row = x + blockIdx.x * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[blockIdx.x * cols + c] = row[c];
}
extern "C" void g(const float* x, float* y, int rows, int cols, cudaStream_t s) { k<<<rows, 128, 0, s>>>(x, y, cols); }
"#;
        assert_eq!(derived(src, "g"), ["x: rows * cols", "y: rows * cols"]);
    }
}
