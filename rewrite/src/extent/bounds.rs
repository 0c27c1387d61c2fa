//! Bounds on an index: the upper and lower limits a name can take, and the facts (checks
//! that guard an access) they are read from.

use super::*;

/// How a name may change after its declaration.
pub(super) enum Stability<'t> {
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
pub(super) struct Upper {
    pub(super) p: Poly,
    pub(super) tight: bool,
}

impl Upper {
    pub(super) fn tight(p: Poly) -> Upper {
        Upper { p, tight: true }
    }
    pub(super) fn map(&self, f: impl FnOnce(&Poly) -> Option<Poly>) -> Option<Upper> {
        f(&self.p).map(|p| Upper { p, tight: self.tight })
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct Bounds {
    pub(super) lo: Option<Poly>,
    pub(super) hi: Option<Upper>,
}

impl Bounds {
    pub(super) fn exact(p: Poly) -> Bounds {
        Bounds { lo: Some(p.clone()), hi: Some(Upper::tight(p)) }
    }
    pub(super) fn constant(c: i64) -> Bounds {
        Bounds::exact(Poly::constant(c))
    }
    pub(super) fn exact_value(&self) -> Option<&Poly> {
        match (&self.lo, &self.hi) {
            (Some(a), Some(b)) if *a == b.p => Some(a),
            _ => None,
        }
    }
    pub(super) fn never_negative(&self) -> bool {
        self.lo.as_ref().is_some_and(Poly::never_negative)
    }
}

/// The least of several upper bounds (each valid, so any is sound). It is reached only
/// if it is itself reached and at most every other bound: with two bounds that do not
/// compare, the real maximum is their minimum, which a polynomial cannot say.
pub(super) fn tightest_upper(cands: Vec<Upper>) -> Option<Upper> {
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

pub(super) fn tightest_lower(cands: Vec<Poly>) -> Option<Poly> {
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
pub(super) fn larger(a: &Upper, b: &Upper) -> Option<Upper> {
    if a.p.at_least(&b.p) {
        Some(a.clone())
    } else if b.p.at_least(&a.p) {
        Some(b.clone())
    } else {
        None
    }
}

/// The smaller of two lower bounds, when they compare.
pub(super) fn smaller(a: &Poly, b: &Poly) -> Option<Poly> {
    if a.at_least(b) {
        Some(b.clone())
    } else if b.at_least(a) {
        Some(a.clone())
    } else {
        None
    }
}

/// A comparison the code guarantees where a use sits: `lhs < rhs`, `lhs <= rhs`.
pub(super) struct Fact<'t> {
    pub(super) lhs: Node<'t>,
    pub(super) rhs: Node<'t>,
    pub(super) strict: bool,
    /// The condition it comes from (to check that the names in it did not change since).
    pub(super) from: Node<'t>,
}

/// Expression text without spaces, parentheses and casts at the outside: the key facts
/// and uses are matched by.
pub(super) fn key(t: &str, n: Node) -> String {
    text(t, strip(n)).chars().filter(|c| !c.is_whitespace()).collect()
}

/// The facts a condition gives when it holds (`positive`) or fails.
pub(super) fn facts_of<'t>(t: &str, cond: Node<'t>, positive: bool, out: &mut Vec<Fact<'t>>) {
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
pub(super) fn only_leaves(s: Node) -> bool {
    let stmts: Vec<Node> = if s.kind() == "compound_statement" {
        named_children(s).into_iter().filter(|c| c.kind() != "comment").collect()
    } else {
        vec![s]
    };
    stmts.len() == 1 && matches!(stmts[0].kind(), "return_statement" | "continue_statement" | "break_statement")
}

/// Everything the control flow guarantees where `at` sits, inside `root`.
pub(super) fn facts_at<'t>(t: &str, root: Node<'t>, at: Node<'t>) -> Vec<Fact<'t>> {
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
