//! Rows read wide at a run's columns, for `vectorize`: per-element code that reads a
//! `const` buffer at `U + c`, where `c = idx % m` is the element's column (split once per
//! run with no wrap, see [`super::index_split`]) and every other term of the address is a
//! multiple of `m` that holds one value over the run ([`super::uniform`]): the row of an
//! embedding table (`tables[(k * V + code) * D + d]`), a segment's row
//! (`values[(int64_t)r * dim + c]`), a cache block's token (`cache[src_row * row + e]`).
//! The run's V elements read the V consecutive values `U + c0 .. U + c0 + V`, a block
//! aligned to V (m is a multiple of V, and so is c0): each element picks its own value
//! out of one wide load of that block, the same load in every element, which the
//! compiler makes once.
//!
//! Why it is safe: every element of a run makes the read (it is unconditional in the
//! element, or in a loop [`super::jam`] runs once for the run), at the same `U`, so each
//! value of the block is one the original read; the launcher checks the buffer's
//! alignment, the form's condition (m a multiple of V), and that no buffer the kernel
//! writes overlaps one the offsets load (a write through another pointer could make the
//! offsets differ between elements).

use super::index_split::Splits;
use super::uniform::RunUniform;
use crate::facts::Facts;
use crate::source::{Kernel, Source};
use crate::syntax::{self, descendants, strip_parens, text};
use std::ops::Range;
use tree_sitter::Node;

/// The text of a range with the other rewrites' edits inside it and the given
/// substitutions made (none where they overlap).
pub(super) type InnerText<'a> = dyn Fn(Range<usize>, &[(Range<usize>, String)]) -> Option<String> + 'a;

/// One read picked out of a wide load of the run's block.
pub(super) struct Gather {
    pub name: String,
    pub size: usize,
    /// The read `p[U + c]`.
    pub site: Range<usize>,
    /// The block's address with every edit inside it made: `p + (U + c0)`.
    pub block: String,
}

impl Gather {
    pub fn replacement(&self, v: usize) -> String {
        format!("ns_pick<{v}>({}, ns_k)", self.block)
    }

    pub fn align(&self, v: usize) -> usize {
        (v * self.size).min(16)
    }
}

/// Where a read may sit: the per-element statements (`top`), or the body of a loop run
/// once per run (`loops`: its statements and its counter).
pub(super) struct Places<'a> {
    pub top: &'a [Range<usize>],
    pub loops: &'a [(Vec<Range<usize>>, String)],
}

/// The reads of `const` buffers (not in `taken`) at a column plus a run-uniform multiple
/// of its divisor, in `places`; `inner` gives the text of a range with the edits other
/// rewrites make inside it (split sites), none where they overlap.
#[allow(clippy::too_many_arguments)]
pub(super) fn find(
    src: &Source,
    k: &Kernel,
    body: Node,
    splits: &Splits,
    uniform: &RunUniform,
    places: &Places,
    taken: &[String],
    inner: &InnerText<'_>,
) -> Vec<Gather> {
    let t = src.text();
    let columns = splits.column_locals(src, k, body);

    if columns.is_empty() {
        return Vec::new();
    }
    let macros: Vec<&str> = syntax::macro_definitions(t, src.root()).into_iter().map(|(m, _)| m).collect();
    let mut out = Vec::new();
    for n in descendants(body) {
        if n.kind() != "subscript_expression" {
            continue;
        }
        let Some(p) = n.child_by_field_name("argument").filter(|p| p.kind() == "identifier") else { continue };
        let name = text(t, p);
        let Some(param) = k.param(name).filter(|q| q.pointer && q.is_const) else { continue };
        if taken.iter().any(|x| x == name) || !uniform.expr(p, &[]) {
            continue;
        }
        let Some(size) = syntax::type_size(&param.base) else { continue };
        let Some(counter) = place(t, &macros, n, places) else { continue };
        if !is_value_read(n) {
            continue;
        }
        let Some(index) = crate::pattern::subscript_index(n).map(|i| through_local(t, body, uniform, i)) else {
            continue;
        };
        let also: Vec<&str> = counter.iter().map(|c| c.as_str()).collect();

        let Some((column, start, cty)) = column_term(t, body, splits, &columns, uniform, index, &also) else {
            continue;
        };
        // The block: the address with the column at the run's first one.
        let subs: Vec<(Range<usize>, String)> = descendants(index)
            .into_iter()
            .filter(|d| d.kind() == "identifier" && text(t, *d) == column)
            .map(|d| (d.byte_range(), format!("(({cty})({start}))")))
            .collect();
        let Some(block) = inner(index.byte_range(), &subs) else { continue };
        out.push(Gather { name: name.to_string(), size, site: n.byte_range(), block: format!("{name} + ({block})") });
    }
    out
}

/// The initializer of an index held in a local declared once and never changed, `auto`
/// or 64-bit (`src = row_start * row + e; ... cache[src]`), else the index itself. Whatever the
/// initializer names is declared before the local, so in scope at the read.
fn through_local<'t>(t: &str, body: Node<'t>, uniform: &RunUniform, index: Node<'t>) -> Node<'t> {
    let bare = strip_parens(index);
    if bare.kind() != "identifier" || !uniform.is_local(text(t, bare)) {
        return index;
    }
    let name = text(t, bare);
    // Only a local that keeps its initializer's value whole: `auto` (the initializer's own
    // type) or a 64-bit integer; a narrower one would wrap what the read uses.
    let keeps = |d: Node| {
        syntax::declaration_type(t, d).is_some_and(|ty| {
            let ty = syntax::unqualified(&ty);
            ty == "auto" || syntax::is_64bit_int(&ty)
        })
    };
    descendants(body)
        .into_iter()
        .filter(|d| d.kind() == "declaration" && d.start_byte() < index.start_byte() && keeps(*d))
        .find_map(|d| syntax::single_declarator(t, d).filter(|(n, _)| n == name).and_then(|(_, v)| v))
        .unwrap_or(index)
}

/// The counter of the run-once loop `n` sits in (None: at the top of the element), when
/// `n` runs in every element: not under a branch, a `?:`, `&&`, `||`, another loop or
/// a function-like macro of the file.
fn place(t: &str, macros: &[&str], n: Node, places: &Places) -> Option<Vec<String>> {
    let mut x = n;
    while let Some(up) = x.parent() {
        let r = x.byte_range();
        if places.top.contains(&r) {
            return Some(Vec::new());
        }
        if let Some((_, counter)) = places.loops.iter().find(|(stmts, _)| stmts.contains(&r)) {
            return Some(vec![counter.clone()]);
        }
        match up.kind() {
            "if_statement" | "conditional_expression" | "switch_statement" | "case_statement" | "lambda_expression" => {
                return None
            }
            // A macro's arguments may be evaluated under a condition its text hides.
            "call_expression" if up.child_by_field_name("function").is_some_and(|f| macros.contains(&text(t, f))) => {
                return None
            }
            k if syntax::is_loop(up) && k != "switch_statement" => return None,
            "binary_expression"
                if up.child_by_field_name("operator").is_some_and(|o| matches!(o.kind(), "&&" | "||")) =>
            {
                return None
            }
            _ => {}
        }
        x = up;
    }
    None
}

/// A read of the value: not an address taken, not written, not a field or a further
/// subscript of it (those would read past the element).
pub(super) fn is_value_read(n: Node) -> bool {
    let mut x = n;
    while let Some(up) = x.parent() {
        match up.kind() {
            "parenthesized_expression" => x = up,
            "assignment_expression" => return up.child_by_field_name("right").is_some_and(|r| r.id() == x.id()),
            "subscript_expression" => return up.child_by_field_name("argument").is_none_or(|a| a.id() != x.id()),
            "update_expression" | "field_expression" | "pointer_expression" => return false,
            _ => return true,
        }
    }
    false
}

/// `index` as `c + U...`: one term (added) the column local `c` under integer casts,
/// every other term a product with the divisor of `c`'s split as a factor that holds one
/// value over the run. The column, its run's first value and its declared type.
fn column_term(
    t: &str,
    body: Node,
    splits: &Splits,
    columns: &[(String, String)],
    uniform: &RunUniform,
    index: Node,
    also: &[&str],
) -> Option<(String, String, String)> {
    let mut terms = Vec::new();
    sum_terms(t, index, true, &mut terms);
    let mut column = None;
    let mut others = Vec::new();
    for (term, positive) in terms {
        let bare = strip_integer_casts(t, term);
        match columns.iter().find(|(c, _)| bare.kind() == "identifier" && text(t, bare) == c) {
            Some(c) if positive && column.is_none() => column = Some(c.clone()),
            Some(_) => return None,
            None => others.push(term),
        }
    }
    let (c, start) = column?;
    let n: usize = start.strip_prefix("ns_r")?.parse().ok()?;
    let m = &splits.divisors.get(n)?.core;
    for term in others {
        let factors = syntax::flatten(t, strip_integer_casts(t, term), "*");
        let multiple = factors.iter().any(|f| folded(text(t, strip_integer_casts(t, *f))) == *m);
        if !multiple || !uniform.expr(term, also) {
            return None;
        }
    }
    let decl = descendants(body)
        .into_iter()
        .find(|d| d.kind() == "declaration" && syntax::single_declarator(t, *d).is_some_and(|(name, _)| name == c))?;
    let cty = syntax::unqualified(&syntax::declaration_type(t, decl)?);
    Some((c, start, cty))
}

fn sum_terms<'t>(t: &str, n: Node<'t>, positive: bool, out: &mut Vec<(Node<'t>, bool)>) {
    let n = strip_parens(n);
    if let Some((op, l, r)) = syntax::binary(t, n) {
        if op == "+" || op == "-" {
            sum_terms(t, l, positive, out);
            sum_terms(t, r, if op == "+" { positive } else { !positive }, out);
            return;
        }
    }
    out.push((n, positive));
}

/// Under parentheses and casts to integer types of 32 bits or more (each keeps a column
/// below 2^31 whole, and a multiple of a power of two below 2^32 a multiple of it).
pub(super) fn strip_integer_casts<'t>(t: &str, n: Node<'t>) -> Node<'t> {
    let mut x = strip_parens(n);
    while x.kind() == "cast_expression" {
        let ty = x.child_by_field_name("type").map(|y| syntax::unqualified(text(t, y))).unwrap_or_default();
        let wide = syntax::type_size(&ty).is_some_and(|s| s >= 4)
            && (ty.contains("int") || ty.contains("long") || ty.contains("size_t") || ty == "unsigned");
        match x.child_by_field_name("value") {
            Some(v) if wide => x = strip_parens(v),
            _ => break,
        }
    }
    x
}

pub(super) fn folded(s: &str) -> String {
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut s = s.as_str();
    while s.starts_with('(') && s.ends_with(')') && balanced(&s[1..s.len() - 1]) {
        s = &s[1..s.len() - 1];
    }
    s.to_string()
}

fn balanced(s: &str) -> bool {
    let mut depth = 0i32;
    for ch in s.chars() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

/// The launcher's checks that no buffer the kernel writes overlaps one of `reads` (the
/// buffers whose loads were taken as one value for a run: a write through another
/// pointer could make them differ between the run's elements, and a block picked at one
/// element's offset would then hold values no element read); none when a length is not
/// known. A row read wide needs no such check: the run's writes are stored after its
/// reads, as each element wrote after it read.
pub(super) fn disjoint_guards(src: &Source, facts: &Facts, k: &Kernel, reads: &[String]) -> Option<Vec<String>> {
    let bytes = |name: &str| crate::guards::buffer_bytes(src, facts, k, name).ok();
    let mut out = Vec::new();
    for w in k.params.iter().filter(|p| p.pointer && !p.is_const) {
        for r in reads {
            out.push(format!("ns_disjoint({{{}}}, {}, {{{r}}}, {})", w.name, bytes(&w.name)?, bytes(r)?));
        }
    }
    Some(out)
}
