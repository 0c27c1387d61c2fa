//! Sliding windows for `vectorize`: a buffer each element reads at a few constant
//! offsets from its own index (a causal convolution's taps `x[i - 3 + k]`, a 1-D
//! stencil's `x[i - 1]`, `x[i]`, `x[i + 1]`), directly or through a local pointer
//! (`xrow = x + (i - t)` read at `xrow[t - 3 + k]`), is loaded once per thread and step:
//! the V elements of the run with one wide access, the few past either end one at a time,
//! into a register array that every tap then reads at a position fixed once the loops
//! are unrolled. The taps keep their own conditions, so a value past a row's start is
//! loaded but read only where the original read it.
//!
//! Offsets are found by algebra on the index expressions: locals declared once are
//! followed, casts are taken as the same value (the original's addresses rely on that),
//! loops over compile-time ranges contribute their ranges, and any other subexpression is
//! an opaque term that must cancel (`(idx - t) + (t - 3 + k)` is `idx + k - 3` whatever
//! `t` is). The launcher takes this path only when the buffer holds at least as many
//! elements as the index runs over (so the run and the halo after it are in bounds),
//! checked from the task's length, and the buffer is aligned to its wide access.

use super::row_strip::{const_loop, ConstLoop};
use crate::facts::{Facts, Role};
use crate::pattern::int_literal;
use crate::source::{Kernel, Source};
use crate::syntax::{self, descendants, strip_parens, text};
use std::collections::BTreeMap;
use std::ops::Range;
use tree_sitter::Node;

/// Taps reaching further than this past either end of a run are not windowed.
const MOST_HALO: i64 = 16;
/// How deep locals are followed.
const MAX_DEPTH: usize = 24;

/// One buffer read through a register window.
pub(super) struct Window {
    pub name: String,
    /// The element type.
    pub base: String,
    pub size: usize,
    /// Elements before and after the run the window holds.
    pub before: i64,
    pub after: i64,
    /// Each tap, with its offset from the element as C (`k - 3`).
    pub sites: Vec<(Range<usize>, String)>,
    /// Loops a tap sits in that need `#pragma unroll` in the vector copy (their starts).
    pub pragmas: Vec<usize>,
    /// Run-time conditions for the launcher.
    pub guards: Vec<String>,
}

impl Window {
    /// The register array, filled for the run starting at `ns_base` of `v` elements
    /// under `bound`.
    pub fn load(&self, v: usize, bound: &str) -> String {
        let (n, b, a, base) = (&self.name, self.before, self.after, &self.base);
        let mut c = format!(
            "{base} ns_win_{n}[{total}];\n{{\n  alignas(16) {base} ns_run[{v}];\n  ns_load(ns_run, {n} + ns_base);\n  #pragma unroll\n  for (int ns_j = 0; ns_j < {v}; ++ns_j) ns_win_{n}[{b} + ns_j] = ns_run[ns_j];\n}}\n",
            total = b + v as i64 + a
        );
        if b > 0 {
            c.push_str(&format!(
                "#pragma unroll\nfor (int ns_j = 0; ns_j < {b}; ++ns_j) {{\n  const long long ns_at = (long long)ns_base - {b} + ns_j;\n  if (ns_at >= 0) ns_win_{n}[ns_j] = {n}[ns_at];\n}}\n"
            ));
        }
        if a > 0 {
            c.push_str(&format!(
                "#pragma unroll\nfor (int ns_j = 0; ns_j < {a}; ++ns_j) {{\n  const long long ns_at = (long long)ns_base + {v} + ns_j;\n  if (ns_at < (long long)({bound})) ns_win_{n}[{b} + {v} + ns_j] = {n}[ns_at];\n}}\n"
            ));
        }
        c
    }

    /// What a tap reads in the vector copy.
    pub fn read(&self, offset: &str) -> String {
        format!("ns_win_{}[ns_k + ({offset}) + {}]", self.name, self.before)
    }

    pub fn align(&self, v: usize) -> usize {
        (v * self.size).min(16)
    }
}

/// A sum of integer multiples of the element index, loop variables and opaque terms.
#[derive(Debug, Clone, Default, PartialEq)]
struct Lin {
    c: i64,
    terms: BTreeMap<Term, i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Term {
    Index,
    Loop(String),
    Opaque(String),
}

impl Lin {
    fn constant(c: i64) -> Lin {
        Lin { c, terms: BTreeMap::new() }
    }

    fn term(t: Term) -> Lin {
        Lin { c: 0, terms: BTreeMap::from([(t, 1)]) }
    }

    fn plus(mut self, o: &Lin, sign: i64) -> Option<Lin> {
        self.c = self.c.checked_add(o.c.checked_mul(sign)?)?;
        for (t, k) in &o.terms {
            let e = self.terms.entry(t.clone()).or_insert(0);
            *e = e.checked_add(k.checked_mul(sign)?)?;
            if *e == 0 {
                self.terms.remove(t);
            }
        }
        Some(self)
    }

    fn times(mut self, k: i64) -> Option<Lin> {
        self.c = self.c.checked_mul(k)?;
        for v in self.terms.values_mut() {
            *v = v.checked_mul(k)?;
        }
        self.terms.retain(|_, v| *v != 0);
        Some(self)
    }

    fn as_constant(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.c)
    }
}

/// What the algebra knows about the kernel's names.
struct Names<'a> {
    src: &'a Source,
    t: &'a str,
    k: &'a Kernel,
    index: String,
    /// Bytes of the index's type.
    index_size: usize,
    /// Locals declared once and never changed, with their initializers and types.
    locals: BTreeMap<String, (Node<'a>, String)>,
    loops: BTreeMap<String, ConstLoop>,
    /// Names the kernel changes somewhere.
    changed: Vec<String>,
    /// How many times the kernel declares each name (parameters count once).
    counts: BTreeMap<String, usize>,
}

impl Names<'_> {
    /// Whether converting to `ty` keeps every value an index computation can hold: as
    /// wide as the index, or a signed type of 32 bits or more (where the original's
    /// arithmetic would be undefined before it wrapped). A narrower or unsigned type may
    /// wrap on purpose (`(uint8_t)(i + 1)` over a ring).
    fn keeps_value(&self, ty: &str) -> bool {
        let ty = syntax::unqualified(ty);
        let Some(size) = syntax::type_size(&ty) else { return false };
        let unsigned = ty.contains("unsigned") || ty.starts_with("uint") || ty == "size_t";
        size >= self.index_size || (size >= 4 && !unsigned)
    }

    /// Whether `name` has one value for the whole element: the index, a loop variable,
    /// a followed local, a parameter the kernel never changes, or a constant of the file.
    fn stable(&self, name: &str) -> bool {
        let declared = self.counts.get(name).copied().unwrap_or(0);
        name == self.index
            || self.loops.contains_key(name)
            || self.locals.contains_key(name)
            || (self.k.param(name).is_some() && declared == 1 && !self.changed.iter().any(|c| c == name))
            || (declared == 0 && crate::launch::file_scope_size(self.src, name, self.k.range.start).value().is_some())
    }

    /// An opaque term: the expression's text, when everything it reads is stable and it
    /// has no effects (no calls, no memory, no assignments), so two occurrences in one
    /// element have one value.
    fn opaque(&self, n: Node) -> Option<Lin> {
        let t = self.t;
        let pure = descendants(n).into_iter().filter(|d| d.is_named()).all(|d| match d.kind() {
            // `blockIdx` in `blockIdx.x` is the builtin's, not a name.
            "identifier" => self.stable(text(t, d)) || d.parent().is_some_and(|p| syntax::builtin(t, p).is_some()),
            "field_expression" => syntax::builtin(t, d).is_some(),
            "field_identifier"
            | "number_literal"
            | "parenthesized_expression"
            | "binary_expression"
            | "unary_expression"
            | "cast_expression"
            | "type_descriptor"
            | "primitive_type"
            | "sized_type_specifier"
            | "type_identifier"
            | "conditional_expression" => true,
            _ => false,
        });
        pure.then(|| Lin::term(Term::Opaque(text(t, n).split_whitespace().collect::<Vec<_>>().join(" "))))
    }

    fn lin(&self, n: Node, depth: usize) -> Option<Lin> {
        if depth > MAX_DEPTH {
            return None;
        }
        let t = self.t;
        let n = strip_parens(n);
        match n.kind() {
            "number_literal" => int_literal(text(t, n)).map(Lin::constant),
            "identifier" => {
                let name = text(t, n);
                if name == self.index {
                    return Some(Lin::term(Term::Index));
                }
                if self.loops.contains_key(name) {
                    return Some(Lin::term(Term::Loop(name.to_string())));
                }
                if let Some((init, ty)) = self.locals.get(name) {
                    return if self.keeps_value(ty) {
                        self.lin(*init, depth + 1)
                    } else {
                        Some(Lin::term(Term::Opaque(format!("local {name}"))))
                    };
                }
                if self.k.param(name).is_none() && !self.counts.contains_key(name) {
                    if let Some(v) = crate::launch::file_scope_size(self.src, name, self.k.range.start).value() {
                        return Some(Lin::constant(v));
                    }
                }
                self.stable(name).then(|| Lin::term(Term::Opaque(name.to_string())))
            }
            "cast_expression" => {
                let ty = n.child_by_field_name("type").map(|x| text(t, x)).unwrap_or("");
                if self.keeps_value(ty) {
                    self.lin(n.child_by_field_name("value")?, depth + 1)
                } else {
                    self.opaque(n)
                }
            }
            "unary_expression" => {
                let op = n.child(0).map(|o| text(t, o))?;
                match op {
                    "-" => self.lin(n.child_by_field_name("argument")?, depth + 1)?.times(-1),
                    "+" => self.lin(n.child_by_field_name("argument")?, depth + 1),
                    _ => self.opaque(n),
                }
            }
            "binary_expression" => {
                let (op, l, r) = syntax::binary(t, n)?;
                match op {
                    "+" | "-" => {
                        let (a, b) = (self.lin(l, depth + 1)?, self.lin(r, depth + 1)?);
                        a.plus(&b, if op == "+" { 1 } else { -1 })
                    }
                    "*" => {
                        let (a, b) = (self.lin(l, depth + 1)?, self.lin(r, depth + 1)?);
                        match (a.as_constant(), b.as_constant()) {
                            (Some(x), _) => b.times(x),
                            (_, Some(y)) => a.times(y),
                            _ => self.opaque(n),
                        }
                    }
                    _ => self.opaque(n),
                }
            }
            _ => self.opaque(n),
        }
    }
}

/// The buffers of `k`, other than `taken`, that its per-element code (`scope`) reads at
/// constant offsets from the element's index (checked against its bound); and for the
/// others that it reads there, why not.
pub(super) fn find(
    src: &Source,
    facts: &Facts,
    k: &Kernel,
    scope: &[Range<usize>],
    e: &crate::pattern::Elementwise,
    taken: &[String],
) -> (Vec<Window>, Vec<String>) {
    let (index, index_type, bound) = (e.index.as_str(), e.index_type.as_str(), e.bound.as_str());
    let t = src.text();
    let (mut out, mut why) = (Vec::new(), Vec::new());
    let Some(body) = src.node(&k.body, "compound_statement") else { return (out, why) };
    let in_scope = |n: Node| scope.iter().any(|r| r.start <= n.start_byte() && n.end_byte() <= r.end);
    // Names are followed only where every declaration and change is in plain sight: no
    // references, range-fors or lambdas, whose names this count would miss.
    if descendants(body).iter().any(|d| {
        matches!(d.kind(), "reference_declarator" | "for_range_loop" | "lambda_expression" | "gnu_asm_expression")
    }) {
        return (out, why);
    }
    // Every declaration must name what it declares (no structured bindings or
    // parenthesized declarators), so that a second declaration is never missed.
    for d in descendants(body).into_iter().filter(|d| d.kind() == "declaration") {
        let mut c = d.walk();
        let named = d.children_by_field_name("declarator", &mut c).all(|x| {
            let x = if x.kind() == "init_declarator" { x.child_by_field_name("declarator") } else { Some(x) };
            x.is_some_and(|x| declared(t, x).is_some())
        });
        if !named {
            return (out, why);
        }
    }
    // Names declared once in the kernel and never changed.
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut inits: BTreeMap<String, (Node, String)> = BTreeMap::new();
    for d in descendants(body) {
        let declared_here = match d.kind() {
            "init_declarator" => d.child_by_field_name("declarator").and_then(|x| declared(t, x)),
            "identifier" | "pointer_declarator" | "array_declarator"
                if d.parent().is_some_and(|p| p.kind() == "declaration" || p.kind() == "parameter_declaration") =>
            {
                declared(t, d)
            }
            _ => None,
        };
        let Some(name) = declared_here else { continue };
        *counts.entry(name.clone()).or_default() += 1;
        if let (Some(v), Some(decl)) = (d.child_by_field_name("value"), d.parent()) {
            let ty = syntax::declaration_type(t, decl).unwrap_or_default();
            let plain = d.child_by_field_name("declarator").is_some_and(|x| x.kind() == "identifier");
            if plain {
                inits.insert(name, (v, ty));
            }
        }
    }
    for p in &k.params {
        *counts.entry(p.name.clone()).or_default() += 1;
    }
    if counts.get(index) != Some(&1) {
        return (out, why);
    }
    // What the kernel changes: assignments, and (since a macro, a template or a function of
    // another file may take its argument by reference) every name passed bare to a call.
    let mut changed: Vec<String> = syntax::assigned(t, body).into_iter().map(|(n, _)| n).collect();
    changed.extend(syntax::passed_bare(t, body));
    // A local that shadows a constant of the file would make one name mean two values.
    let file_constant =
        |n: &str| crate::launch::file_scope_size(src, n, k.range.start).value().is_some() && k.param(n).is_none();
    let locals: BTreeMap<String, (Node, String)> = inits
        .into_iter()
        .filter(|(n, (v, _))| {
            counts.get(n) == Some(&1) && !changed.contains(n) && v.kind() != "initializer_list" && !file_constant(n)
        })
        .collect();
    let mut loops = BTreeMap::new();
    for f in descendants(body) {
        if f.kind() == "for_statement" && in_scope(f) {
            if let Some(l) = const_loop(src, k, f) {
                if counts.get(&l.var) == Some(&1) {
                    loops.insert(l.var.clone(), l);
                }
            }
        }
    }
    let index_size = syntax::type_size(&syntax::unqualified(index_type)).unwrap_or(8);
    let names = Names {
        src,
        t,
        k,
        index: index.to_string(),
        index_size,
        locals,
        loops,
        changed: changed.clone(),
        counts: counts.clone(),
    };

    for p in k.params.iter().filter(|p| p.pointer && !taken.contains(&p.name)) {
        let input = p.is_const || super::vectorize::role_of(src, facts, k, &p.name) == Some(Role::Input);
        let Some(size) = syntax::type_size(&p.base) else { continue };
        if !input {
            continue;
        }
        // Every use: a read `p[e]` in the per-element code, or the start of a `const`
        // alias declared there whose every use is such a read.
        let mut reads: Vec<(Node, Option<Node>)> = Vec::new();
        let mut fits = true;
        let mut aliases: Vec<(String, Option<Node>)> = Vec::new();
        for d in descendants(body).into_iter().filter(|d| d.kind() == "identifier" && text(t, *d) == p.name) {
            if let Some(s) = read_site(d) {
                if in_scope(s) {
                    reads.push((s, None));
                    continue;
                }
            } else if let Some((alias, offset)) = alias_start(t, d) {
                if in_scope(d) {
                    aliases.push((alias, offset));
                    continue;
                }
            }
            fits = false;
        }
        for (alias, offset) in &aliases {
            if counts.get(alias) != Some(&1) || changed.contains(alias) {
                fits = false;
                continue;
            }
            for d in descendants(body).into_iter().filter(|d| d.kind() == "identifier" && text(t, *d) == alias.as_str())
            {
                if d.parent().is_some_and(|x| matches!(x.kind(), "pointer_declarator" | "init_declarator")) {
                    continue;
                }
                match read_site(d) {
                    Some(s) if in_scope(s) => reads.push((s, *offset)),
                    _ => fits = false,
                }
            }
        }
        if !fits || reads.is_empty() {
            continue;
        }
        let name = &p.name;
        let mut sites = Vec::new();
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        let mut pragmas = Vec::new();
        let mut refused = None;
        for (s, offset) in &reads {
            let Some(i) = crate::pattern::subscript_index(*s) else {
                refused = Some(format!("`{name}` (a read it cannot follow)"));
                break;
            };
            let at = match offset {
                Some(o) => names.lin(*o, 0).zip(names.lin(i, 0)).and_then(|(a, b)| a.plus(&b, 1)),
                None => names.lin(i, 0),
            };
            // Only a read that moves with the element (its index counted once) is a tap;
            // a per-row value (`scale[c]`) is no window, and not worth a word.
            let moves = at.as_ref().is_some_and(|a| a.terms.get(&Term::Index) == Some(&1));
            let rel = at.and_then(|a| a.plus(&Lin::term(Term::Index), -1));
            let Some(rel) = rel.filter(|r| moves && r.terms.keys().all(|t| matches!(t, Term::Loop(_)))) else {
                if moves {
                    refused =
                        Some(format!("`{name}` (read at `{}`, not a constant offset from `{index}`)", text(t, *s)));
                } else {
                    refused = Some(String::new());
                }
                break;
            };
            let (mut a, mut b) = (rel.c, rel.c);
            let mut c = rel.c.to_string();
            for (term, coef) in &rel.terms {
                let Term::Loop(v) = term else { continue };
                let l = &names.loops[v];
                if let Some(u) = &l.unfit {
                    refused = Some(format!("`{name}` ({u})"));
                    break;
                }
                if !l.braced && l.needs_pragma {
                    refused =
                        Some(format!("`{name}` (read in the loop over `{v}`, the unbraced body of another statement)"));
                    break;
                }
                let span = coef.checked_mul(l.lo).zip(coef.checked_mul(l.hi));
                let moved = span.and_then(|(x, y)| a.checked_add(x.min(y)).zip(b.checked_add(x.max(y))));
                let Some((na, nb)) = moved else {
                    refused = Some(format!("`{name}` (offsets too large to hold)"));
                    break;
                };
                (a, b) = (na, nb);
                c.push_str(&format!(" + {coef} * {v}"));
                if l.needs_pragma && !pragmas.contains(&l.start) {
                    pragmas.push(l.start);
                }
            }
            if refused.is_some() {
                break;
            }
            lo = lo.min(a);
            hi = hi.max(b);
            sites.push((s.byte_range(), c));
        }
        if let Some(r) = refused {
            if !r.is_empty() {
                why.push(r);
            }
            continue;
        }
        let (before, after) = (lo.checked_neg().unwrap_or(i64::MAX).max(0), hi.max(0));
        if before > MOST_HALO || after > MOST_HALO {
            why.push(format!("`{name}` (taps from {lo} to {hi}, past the {MOST_HALO} a window holds beyond its run)"));
            continue;
        }
        let Some(len) = launcher_length(src, facts, k, name) else {
            why.push(format!("`{name}` (the task gives no length for it in the launcher's names)"));
            continue;
        };
        let Some(bound_guard) = bound_template(k, bound) else {
            why.push(format!(
                "`{name}` (the index's bound `{bound}` names more than the kernel's parameters, so the launcher cannot check the buffer covers it)"
            ));
            continue;
        };
        // The run and the taps before it lie in 0..bound, which the buffer covers. A tap
        // past the run may lie past `bound`: the window loads only up to `bound`, which
        // is right only where the buffer ends there (a buffer longer than the index range
        // can legally be read past it).
        let cover = if after > 0 { "==" } else { "<=" };
        let guards = vec![format!("(long long)({bound_guard}) {cover} (long long)({len})")];
        out.push(Window {
            name: name.clone(),
            base: syntax::unqualified(&p.base),
            size,
            before,
            after,
            sites,
            pragmas,
            guards,
        });
    }
    (out, why)
}

/// The name a declarator declares (`*p`, `p`, `p[4]`).
fn declared(t: &str, d: Node) -> Option<String> {
    let mut x = d;
    loop {
        match x.kind() {
            "identifier" => return Some(text(t, x).to_string()),
            "pointer_declarator" | "array_declarator" | "reference_declarator" => {
                x = x.child_by_field_name("declarator")?
            }
            _ => return None,
        }
    }
}

/// `p[e]` read (not written, not addressed) where `d` is `p`.
fn read_site(d: Node) -> Option<Node> {
    let s = d.parent().filter(|s| s.kind() == "subscript_expression")?;
    if s.child_by_field_name("argument").map(|a| a.id()) != Some(d.id()) {
        return None;
    }
    match s.parent() {
        Some(x)
            if x.kind() == "assignment_expression" && x.child_by_field_name("left").map(|l| l.id()) == Some(s.id()) =>
        {
            None
        }
        Some(x) if x.kind() == "update_expression" || x.kind() == "pointer_expression" => None,
        _ => Some(s),
    }
}

/// Where `d` (a buffer) starts a `const T* q = d;` or `const T* q = d + offset;`
/// declaration: q and the offset.
fn alias_start<'t>(t: &str, d: Node<'t>) -> Option<(String, Option<Node<'t>>)> {
    let mut x = d;
    if let Some(b) = x.parent().filter(|b| b.kind() == "binary_expression") {
        if b.child_by_field_name("left").map(|l| l.id()) == Some(d.id()) {
            x = b;
        }
    }
    while let Some(up) = x.parent().filter(|u| u.kind() == "parenthesized_expression") {
        x = up;
    }
    let init = x.parent().filter(|i| i.kind() == "init_declarator")?;
    if init.child_by_field_name("value").map(|v| v.id()) != Some(x.id()) {
        return None;
    }
    let a = crate::pattern::const_alias(t, init)?;
    (a.base.id() == d.id()).then_some((a.name, a.offset))
}

/// The bound with every kernel parameter in braces, as guards name them; None if it
/// names anything else.
fn bound_template(k: &Kernel, bound: &str) -> Option<String> {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| -> bool {
        if word.is_empty() {
            return true;
        }
        let ok = if word.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            out.push_str(word);
            true
        } else if k.param(word).is_some() {
            out.push_str(&format!("{{{word}}}"));
            true
        } else if matches!(word.as_str(), "int" | "long" | "unsigned" | "size_t" | "int64_t" | "uint64_t" | "short") {
            out.push_str(word);
            true
        } else {
            false
        };
        word.clear();
        ok
    };
    for c in bound.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            if !flush(&mut word, &mut out) {
                return None;
            }
            out.push(c);
        }
    }
    flush(&mut word, &mut out).then_some(out)
}

/// The task's length of the buffer behind kernel parameter `p`, in the launcher's names.
/// None where the launcher changes the pointer or a name the length reads (`w += 4`
/// before the launch): the task's length would then describe another span.
pub(super) fn launcher_length(src: &Source, facts: &Facts, k: &Kernel, p: &str) -> Option<String> {
    let names = crate::entry_params(src, facts)?;
    let arg = crate::launcher_arg(src, facts, k, p)?;
    let len = facts.len_in(arg, &names)?;
    let entry = src.host_functions().into_iter().find(|h| h.name == facts.entry)?;
    let body = src.root().descendant_for_byte_range(entry.body.start, entry.body.end)?;
    let changed = syntax::assigned(src.text(), body);
    let touched = |name: &str| changed.iter().any(|(c, _)| c == name);
    if touched(&names[arg]) || crate::pattern::names_in(&len).iter().any(|n| touched(n)) {
        return None;
    }
    Some(len)
}
