//! One function body: the bounds of every expression in it, from its checks, its
//! declarations and its launch.

use super::*;

/// A function body and what is known about the names it reads.
pub(super) struct Body<'s, 't> {
    pub(super) t: &'s str,
    pub(super) root: Node<'t>,
    /// Parameters by value: their exact values, when the call site gives them.
    pub(super) params: BTreeMap<String, Option<Poly>>,
    /// Grid and block extents (x, y, z), when the launch spells them.
    pub(super) grid: [Option<Poly>; 3],
    pub(super) block: [Option<Poly>; 3],
    pub(super) consts: &'s BTreeMap<String, i64>,
    pub(super) depth: Cell<u32>,
    /// Bounds computed so far: a budget, so that no input makes the analysis slow.
    pub(super) steps: Cell<u32>,
    /// The assignments to each name, found once.
    pub(super) assigned: RefCell<BTreeMap<String, Vec<Node<'t>>>>,
    /// Index tables: pointer parameters whose elements index other arrays, with the
    /// largest value an element holds and the launcher's name for the table.
    pub(super) tables: BTreeMap<String, (Poly, String)>,
    /// The tables whose values some bound used.
    pub(super) tables_used: RefCell<BTreeSet<String>>,
}

/// Bounds one body may compute before giving up on the rest.
pub(super) const MAX_STEPS: u32 = 20_000;

impl<'t> Body<'_, 't> {
    /// The writes to the variable `name` declared by `decl` (None: a parameter).
    pub(super) fn writes_to(&self, name: &str, decl: Option<Node<'t>>) -> Vec<Node<'t>> {
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

    pub(super) fn stability(&self, name: &str, decl: Node<'t>) -> Stability<'t> {
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
    pub(super) fn fact_holds(&self, lhs: Node<'t>, from: Node<'t>, at: Node<'t>) -> bool {
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

    pub(super) fn bounds(&self, n: Node<'t>) -> Bounds {
        if self.depth.get() >= MAX_DEPTH || self.steps.get() >= MAX_STEPS {
            return Bounds::default();
        }
        self.steps.set(self.steps.get() + 1);
        self.depth.set(self.depth.get() + 1);
        let b = self.bounds_inner(n);
        self.depth.set(self.depth.get() - 1);
        b
    }

    pub(super) fn bounds_inner(&self, n: Node<'t>) -> Bounds {
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
    pub(super) fn sub_sum_bounds(&self, n: Node<'t>) -> Vec<Upper> {
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
    pub(super) fn offset(&self, n: Node<'t>) -> Offset {
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
    pub(super) fn structural(&self, n: Node<'t>) -> Bounds {
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
            // An element of an index table: a value from 0 up to the table's largest, which
            // a permutation of its length reaches.
            "subscript_expression" => {
                let table = n
                    .child_by_field_name("argument")
                    .map(strip)
                    .filter(|a| a.kind() == "identifier" && declaration_of(t, self.root, *a, text(t, *a)).is_none())
                    .and_then(|a| self.tables.get(text(t, a)));
                match table {
                    Some((hi, launcher_name)) => {
                        self.tables_used.borrow_mut().insert(launcher_name.clone());
                        Bounds { lo: Some(Poly::constant(0)), hi: Some(Upper::tight(hi.clone())) }
                    }
                    None => Bounds::default(),
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

    pub(super) fn name_bounds(&self, id: Node<'t>) -> Bounds {
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
pub(super) fn increments(t: &str, f: Node, name: &str) -> bool {
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

pub(super) fn arithmetic(op: &str, a: &Bounds, b: &Bounds) -> Bounds {
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
