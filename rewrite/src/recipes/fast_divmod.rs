//! Divide and modulo by run-time extents: `i / cols`, `(i / HW) % C` in index decoding
//! become a multiply-high and a shift by magic numbers the launcher computes once per
//! launch (Granlund and Montgomery). A 32-bit `/` by a run-time value is about 20
//! instructions and a 64-bit one a call; the magic form is 3. Exact for dividends below
//! 2^31 and divisors from 1 to 2^31 - 1: the launcher checks both (every buffer below
//! 2^31 elements, the divisor in range) and falls back to the original otherwise.

use crate::edit::Edits;
use crate::facts::Facts;
use crate::guards;
use crate::helpers;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{self, binary, descendants, identifiers, named_children, strip, text};
use crate::version::{self, Change};
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[];

/// Sites per kernel past which the recipe declines (rendering nests sites in sites).
const MAX_SITES: usize = 64;

/// Dividends stay below 2^31 when every buffer does.
const LIMIT: i64 = i32::MAX as i64;

/// The largest product of literal factors a dividend may carry (`i * 8`, a run of a
/// vectorized index); the launcher then checks the thread count against 2^31 / that.
const MOST_SCALE: i64 = 64;

fn is_int_type(ty: &str) -> bool {
    let words: Vec<&str> =
        ty.split_whitespace().filter(|w| !matches!(*w, "const" | "volatile" | "static" | "register")).collect();
    let ty = words.join(" ");
    syntax::is_64bit_int(&ty)
        || matches!(
            ty.as_str(),
            "int"
                | "unsigned"
                | "unsigned int"
                | "int32_t"
                | "uint32_t"
                | "short"
                | "unsigned short"
                | "int16_t"
                | "uint16_t"
                | "signed"
                | "signed int"
        )
}

struct Site {
    range: Range<usize>,
    /// The dividend multiplies names (bounded by buffer lengths, not the thread count).
    products: bool,
    /// The product of the literal factors the dividend carries, through its index locals.
    scale: i64,
    op: &'static str,
    dividend: Range<usize>,
    divisor: String,
}

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    super::per_kernel(src, params, |k| plan(src, facts, k))
}

fn plan<'k>(src: &Source, facts: &Facts, k: &'k Kernel) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    if k.has_error {
        return Err(NotApplicable::new(format!("`{}` contains syntax this parser does not know", k.name)));
    }
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| NotApplicable::new("no body"))?;
    let names = Names::of(t, k, body);
    let sites = division_sites(t, k, body, &names);
    if sites.is_empty() {
        return Err(NotApplicable::new(format!(
            "`{}` divides no integer index by a run-time kernel parameter",
            k.name
        )));
    }
    if sites.len() > MAX_SITES {
        return Err(NotApplicable::new(format!(
            "`{}` has {} divisions by run-time values, more than the {MAX_SITES} this recipe rewrites",
            k.name,
            sites.len()
        )));
    }
    rewrite(src, facts, k, &sites)
}

/// What the kernel's names are, as far as dividing by them goes.
struct Names {
    /// Declared types of locals.
    locals: HashMap<String, String>,
    /// Names assigned anywhere in the body.
    assigned: Vec<String>,
    /// Locals that hold the same value in every thread, with how the host computes them.
    invariant: HashMap<String, String>,
    /// Integer locals built only from thread coordinates, sizes and other index locals.
    index_locals: HashSet<String>,
    /// Index locals whose value multiplies names (bounded by buffer lengths, not by the
    /// thread count).
    index_products: HashSet<String>,
    /// Locals assigned once, from thread coordinates and literals only, with a bound on
    /// their value in thread counts (`base = thread * 8`: 8 times the thread count, as
    /// `blockIdx.x * blockDim.x` and `threadIdx.x` are each below it: 16).
    thread_bound: HashMap<String, i64>,
    /// Those of them that carry a literal factor, directly or through another.
    scaled: HashSet<String>,
    /// Integer parameters the kernel never assigns.
    int_params: HashSet<String>,
}

impl Names {
    fn of(t: &str, k: &Kernel, body: Node) -> Names {
        let mut locals: HashMap<String, String> = HashMap::new();
        for d in descendants(body) {
            if d.kind() == "declaration" {
                if let Some(ty) = syntax::declaration_type(t, d) {
                    for n in syntax::declared_names(t, d) {
                        locals.insert(n, ty.clone());
                    }
                }
            }
        }
        resolve_auto(t, k, body, &mut locals);
        let assigned: Vec<String> = syntax::assigned(t, body).into_iter().map(|(n, _)| n).collect();
        let mut names = Names {
            locals,
            assigned,
            invariant: HashMap::new(),
            index_locals: HashSet::new(),
            index_products: HashSet::new(),
            thread_bound: HashMap::new(),
            scaled: HashSet::new(),
            int_params: HashSet::new(),
        };
        names.int_params = k.params.iter().filter(|p| names.int_param(k, &p.name)).map(|p| p.name.clone()).collect();
        names.find_invariant(t, k, body);
        names.find_thread_bounds(t, body);
        names.find_index_locals(t, k, body);
        names
    }

    /// A divisor parameter must hold its launch value throughout.
    fn int_param(&self, k: &Kernel, name: &str) -> bool {
        k.param(name).is_some_and(|p| !p.pointer && is_int_type(&p.base)) && !self.assigned.iter().any(|a| a == name)
    }

    /// A name in capitals that no local declares: a macro (a compile-time constant).
    fn macro_like(&self, n: &str) -> bool {
        !self.locals.contains_key(n) && n.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    }

    /// How an index expression is bounded: Some(1) where it multiplies by no literal and
    /// uses no scaled local (the checks against 2^31 bound it as they did), Some(C) where
    /// it is at most C times the thread count, None where it is not a dividend's shape or
    /// scales what the thread count does not bound (`cols * 8`, a grid-stride index).
    fn scale_of(&self, t: &str, n: Node) -> Option<i64> {
        let literal = literal_scale(t, n)?;
        let scaled_local = identifiers(t, n).iter().any(|i| self.scaled.contains(*i));
        if literal == 1 && !scaled_local {
            return Some(1);
        }
        self.thread_multiple(t, n)
    }

    /// An upper bound C with `n <= C * threads`, for expressions of thread coordinates,
    /// literals and [`Names::thread_bound`] locals by sums, literal multiples, divisions
    /// and remainders (which do not grow what they divide).
    fn thread_multiple(&self, t: &str, n: Node) -> Option<i64> {
        let n = strip_int_casts(t, n)?;
        let axis = |x: Node| syntax::builtin(t, strip(x)).map(|(b, _)| b);
        match n.kind() {
            "number_literal" => crate::pattern::int_literal(text(t, n)).filter(|v| *v >= 0).map(|v| v.max(1)),
            "identifier" => self.thread_bound.get(text(t, n)).copied(),
            "field_expression" => axis(n).map(|_| 1),
            "binary_expression" => {
                let (op, l, r) = binary(t, n)?;
                match op {
                    "+" => self.thread_multiple(t, l)?.checked_add(self.thread_multiple(t, r)?),
                    // By a positive literal, or by the parameters a site's check keeps at 1 or more.
                    "/" | "%" => {
                        let r = strip(r);
                        let positive = match r.kind() {
                            "number_literal" => crate::pattern::int_literal(text(t, r)).is_some_and(|v| v >= 1),
                            _ => {
                                divisor_shape(t, r)
                                    && identifiers(t, r)
                                        .iter()
                                        .all(|n| self.int_params.contains(*n) || self.invariant.contains_key(*n))
                            }
                        };
                        if positive {
                            self.thread_multiple(t, l)
                        } else {
                            None
                        }
                    }
                    "*" => {
                        let literal = |x: Node| {
                            let x = strip(x);
                            (x.kind() == "number_literal").then(|| crate::pattern::int_literal(text(t, x))).flatten()
                        };
                        match (literal(l), literal(r), axis(l), axis(r)) {
                            (Some(f), None, _, _) if f >= 1 => f.checked_mul(self.thread_multiple(t, r)?),
                            (None, Some(f), _, _) if f >= 1 => f.checked_mul(self.thread_multiple(t, l)?),
                            // A block's index or the grid's extent times a block extent: at
                            // most the thread count.
                            (None, None, Some(a), Some(b))
                                if (matches!(a, "blockIdx" | "gridDim") && b == "blockDim")
                                    || (a == "blockDim" && matches!(b, "blockIdx" | "gridDim")) =>
                            {
                                Some(1)
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// [`Names::thread_bound`]: integer locals never assigned after their declaration,
    /// every declaration of the name with a thread bound (the largest counts), and loop
    /// counters `for (int k = 0; k < 8; ++k)` at their literal bound (to a fixed point).
    fn find_thread_bounds(&mut self, t: &str, body: Node) {
        let declarations: Vec<(String, Node)> = descendants(body)
            .into_iter()
            .filter_map(|d| match syntax::single_declarator(t, d) {
                Some((name, Some(init))) => Some((name, init)),
                _ => None,
            })
            .collect();
        let counters = loop_counters(t, body);
        for (name, bound) in &counters {
            self.thread_bound.insert(name.clone(), *bound);
        }
        loop {
            let before = self.thread_bound.len();
            for (name, _) in &declarations {
                if self.thread_bound.contains_key(name)
                    || self.assigned.contains(name)
                    || !self.locals.get(name).is_some_and(|ty| is_int_type(ty))
                {
                    continue;
                }
                let inits: Vec<Node> = declarations.iter().filter(|(n, _)| n == name).map(|(_, i)| *i).collect();
                let bounds: Option<Vec<i64>> = inits.iter().map(|i| self.thread_multiple(t, *i)).collect();
                let Some(bound) = bounds.and_then(|b| b.into_iter().max()) else { continue };
                let scaled = inits.iter().any(|i| {
                    literal_scale(t, *i).is_some_and(|s| s > 1)
                        || identifiers(t, *i).iter().any(|n| self.scaled.contains(*n))
                });
                if scaled {
                    self.scaled.insert(name.clone());
                }
                self.thread_bound.insert(name.clone(), bound);
            }
            if self.thread_bound.len() == before {
                break;
            }
        }
    }

    /// Locals that hold the same value in every thread: integer declarations at the top
    /// of the body, never assigned again, computed from parameters and such locals.
    fn find_invariant(&mut self, t: &str, k: &Kernel, body: Node) {
        for s in syntax::statements(body) {
            let Some((name, Some(init))) = syntax::single_declarator(t, s) else { continue };
            let ty = syntax::declaration_type(t, s).unwrap_or_default();
            if !is_int_type(&ty) || self.assigned.contains(&name) || !divisor_shape(t, init) {
                continue;
            }
            let ids = identifiers(t, init);
            if ids.iter().all(|n| self.int_param(k, n) || self.invariant.contains_key(*n)) {
                let template = host_template(t, k, init, &self.invariant);
                self.invariant.insert(name, template);
            }
        }
    }

    /// Index locals: integers every assignment of which is a dividend-shaped expression
    /// of thread coordinates, sizes and other index locals (to a fixed point).
    fn find_index_locals(&mut self, t: &str, k: &Kernel, body: Node) {
        let updates = syntax::assigned(t, body);
        loop {
            let before = self.index_locals.len();
            for d in descendants(body) {
                let Some((name, Some(init))) = syntax::single_declarator(t, d) else { continue };
                if self.index_locals.contains(&name) || !self.locals.get(&name).is_some_and(|ty| is_int_type(ty)) {
                    continue;
                }
                let from_index = |e: Node| {
                    self.scale_of(t, e).is_some_and(|s| s <= MOST_SCALE)
                        && identifiers(t, e).iter().all(|n| {
                            self.index_locals.contains(*n)
                                || self.thread_bound.contains_key(*n)
                                || self.int_param(k, n)
                                || matches!(*n, "threadIdx" | "blockIdx" | "blockDim" | "gridDim")
                                || self.macro_like(n)
                        })
                };
                // Later assignments, e.g. `i += stride`, must keep the shape too.
                let later_ok = updates.iter().filter(|(n, _)| *n == name).all(|(_, a)| {
                    a.kind() == "assignment_expression"
                        && a.child_by_field_name("operator").is_some_and(|o| matches!(text(t, o), "=" | "+="))
                        && a.child_by_field_name("right").is_some_and(&from_index)
                });
                // A local that carries a literal factor is bounded only where it is
                // assigned once: `a += thread * 8` in a loop grows past any multiple.
                let scaled = |e: Node| {
                    literal_scale(t, e).is_some_and(|s| s > 1)
                        || identifiers(t, e).iter().any(|n| self.scaled.contains(*n))
                };
                let rights =
                    updates.iter().filter(|(n, _)| *n == name).filter_map(|(_, a)| a.child_by_field_name("right"));
                let unbounded = (scaled(init) || rights.clone().any(scaled)) && !self.scaled.contains(&name);
                if from_index(init) && later_ok && !unbounded {
                    if multiplies_names(t, init)
                        || identifiers(t, init).iter().any(|n| self.index_products.contains(*n))
                    {
                        self.index_products.insert(name.clone());
                    }
                    self.index_locals.insert(name);
                }
            }
            if self.index_locals.len() == before {
                break;
            }
        }
    }
}

/// `auto` locals get the integer type their initializer has, where it is built from
/// integer locals and parameters only (`const auto q = base / (cols);` is an `int` when
/// `base` and `cols` are), so a division of them is a site like any other.
fn resolve_auto(t: &str, k: &Kernel, body: Node, locals: &mut HashMap<String, String>) {
    for d in descendants(body) {
        if d.kind() != "declaration" {
            continue;
        }
        let Some(ty) = syntax::declaration_type(t, d) else { continue };
        if ty.split_whitespace().filter(|w| *w != "const").collect::<Vec<_>>() != ["auto"] {
            continue;
        }
        let Some((name, Some(init))) = syntax::single_declarator(t, d) else { continue };
        let mut wide = false;
        let integral = descendants(init).into_iter().all(|x| match x.kind() {
            "identifier" => {
                let n = text(t, x);
                let of = locals.get(n).cloned().or_else(|| k.param(n).filter(|p| !p.pointer).map(|p| p.base.clone()));
                match of {
                    Some(ty) if is_int_type(&ty) => {
                        wide |= syntax::is_64bit_int(&ty);
                        true
                    }
                    _ => false,
                }
            }
            "cast_expression" => x.child_by_field_name("type").is_some_and(|ty| {
                wide |= syntax::is_64bit_int(text(t, ty));
                is_int_type(text(t, ty))
            }),
            "number_literal" => crate::pattern::int_literal(text(t, x)).is_some(),
            "call_expression" | "subscript_expression" | "field_expression" | "pointer_expression" => false,
            _ => true,
        });
        if integral {
            locals.insert(name, if wide { "long long".into() } else { "int".into() });
        }
    }
}

/// Every `/` and `%` of an index by a run-time divisor the host knows.
fn division_sites(t: &str, k: &Kernel, body: Node, names: &Names) -> Vec<Site> {
    let mut sites = Vec::new();
    for d in descendants(body) {
        // Each division once: its parentheses are not a site of their own.
        if d.kind() != "binary_expression" {
            continue;
        }
        let Some((op, l, r)) = binary(t, d) else { continue };
        // A division in `decltype` (as this recipe's own output writes) divides nothing.
        if (op != "/" && op != "%") || crate::syntax::unevaluated(d) {
            continue;
        }
        // The divisor: integer parameters only (a kernel-wide constant the host knows).
        let rs = strip(r);
        if rs.kind() == "number_literal" {
            continue;
        }
        let ids = identifiers(t, rs);
        if ids.is_empty()
            || !ids.iter().all(|n| names.int_param(k, n) || names.invariant.contains_key(*n))
            || !divisor_shape(t, rs)
        {
            continue;
        }
        // The dividend: a non-negative index below 2^31, built from thread coordinates,
        // sizes and index locals by sums, divisions and remainders only (no product that
        // could pass 2^31, no difference that could go negative, nothing loaded).
        let ok = identifiers(t, l).iter().all(|n| {
            names.index_locals.contains(*n)
                || names.thread_bound.contains_key(*n)
                || k.param(n).is_some_and(|p| !p.pointer && is_int_type(&p.base))
                || matches!(*n, "threadIdx" | "blockIdx" | "blockDim" | "gridDim")
                || names.macro_like(n)
        });
        let scale = names.scale_of(t, l).filter(|s| *s <= MOST_SCALE);
        let Some(scale) = scale.filter(|_| ok) else { continue };
        let products = multiplies_names(t, l) || identifiers(t, l).iter().any(|n| names.index_products.contains(*n));
        sites.push(Site {
            range: d.byte_range(),
            products,
            scale,
            op,
            dividend: l.byte_range(),
            divisor: host_template(t, k, rs, &names.invariant),
        });
    }
    sites
}

/// The sites rewritten with one magic-number argument per distinct divisor, and the
/// launcher's checks that keep the magic numbers exact.
fn rewrite<'k>(
    src: &Source,
    facts: &Facts,
    k: &'k Kernel,
    sites: &[Site],
) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    let mut divisors: Vec<String> = Vec::new();
    for s in sites {
        if !divisors.contains(&s.divisor) {
            divisors.push(s.divisor.clone());
        }
    }
    let var = |d: &str| format!("ns_dv{}", divisors.iter().position(|x| x == d).unwrap_or(0));
    let mut change = Change::new(k);
    change.helpers.push(&helpers::FAST_DIVMOD);
    // Outermost sites, each rendered with the sites inside it.
    let outer: Vec<&Site> = sites
        .iter()
        .filter(|s| {
            !sites.iter().any(|o| o.range != s.range && o.range.start <= s.range.start && s.range.end <= o.range.end)
        })
        .collect();
    for s in outer {
        change.edits.replace(s.range.clone(), render(t, s, sites, &var));
    }
    let extra: String = divisors.iter().map(|d| format!(", ns_divisor {}", var(d))).collect();
    change.edits.insert(k.params_range.end - 1, extra);
    for d in &divisors {
        change.extra_args.push(format!("ns_make_divisor({d})"));
        change.guards.push(format!("({d}) >= 1 && ({d}) <= 2147483647LL"));
    }
    // Dividends stay below 2^31 when every buffer does; without lengths, a kernel of one
    // element per thread divides indices below its thread count.
    match guards::buffers_below(src, facts, k, LIMIT) {
        Ok(g) => change.guards.extend(g),
        Err(why) => {
            let one_per_thread =
                crate::pattern::elementwise(src, k).is_ok_and(|e| e.form == crate::pattern::Form::Guard);
            if !one_per_thread || sites.iter().any(|s| s.products) {
                return Err(why);
            }
        }
    }
    // Without a thread-count check, the buffer checks alone bound the dividends; a
    // dividend that scales the thread index (`thread * 8`) needs the threads checked
    // against 2^31 / its scale.
    let have_buffer_guards = change.guards.len() > divisors.len();
    let scale = sites.iter().map(|s| s.scale).max().unwrap_or(1);
    let threads = match guards::threads_below(src, k, LIMIT / scale) {
        Ok(t) => t,
        Err(_) if have_buffer_guards && scale == 1 => Vec::new(),
        Err(why) => return Err(why),
    };
    if threads.is_empty() && !have_buffer_guards {
        return Err(NotApplicable::new(format!(
            "the launches of `{}` give no size to check the dividends against",
            k.name
        )));
    }
    change.guards.extend(threads);
    let shown: Vec<String> = divisors.iter().map(|d| format!("`{}`", version::shown(d))).collect();
    Ok((change, format!("`{}`: {} divide/modulo by {} with magic numbers", k.name, sites.len(), shown.join(", "))))
}

/// Sums, divisions, remainders and products of names, integer literals, casts to
/// integer types and the thread builtins: expressions that stay non-negative and, under
/// the launcher's checks, below 2^31. The value is the product of the positive literal
/// factors (`(thread) * 8`: 8), which the thread count is checked against; None for any
/// other shape (a difference, a load, a call, a negative or zero factor).
fn literal_scale(t: &str, n: Node) -> Option<i64> {
    let mut scale: i64 = 1;
    for d in descendants(n) {
        let ok = match d.kind() {
            "identifier"
            | "field_identifier"
            | "field_expression"
            | "parenthesized_expression"
            | "type_descriptor"
            | "primitive_type"
            | "sized_type_specifier"
            | "type_identifier" => true,
            // Casts to 32 or 64 bits: a narrower one could wrap a large index negative.
            "cast_expression" => d.child_by_field_name("type").is_some_and(|ty| wide_int_type(text(t, ty))),
            "number_literal" => crate::pattern::int_literal(text(t, d)).is_some(),
            "binary_expression" => match binary(t, d) {
                Some(("+" | "/" | "%", _, _)) => true,
                Some(("*", l, r)) => {
                    let literal = [l, r]
                        .into_iter()
                        .map(strip)
                        .find(|x| x.kind() == "number_literal")
                        .map(|x| crate::pattern::int_literal(text(t, x)));
                    match literal {
                        None => true,
                        Some(Some(f)) if f >= 1 => {
                            scale = scale.checked_mul(f)?;
                            true
                        }
                        Some(_) => false,
                    }
                }
                _ => false,
            },
            _ => !d.is_named(),
        };
        if !ok {
            return None;
        }
    }
    Some(scale)
}

/// Names used only as counters of loops `for (int k = 0; k < N; ++k)` (N a literal; `<=`,
/// `k++` and `k += 1` too) and never assigned in their bodies, with the largest N: a
/// counter never exceeds its bound.
fn loop_counters(t: &str, body: Node) -> HashMap<String, i64> {
    let mut out: HashMap<String, i64> = HashMap::new();
    let mut refused: HashSet<String> = HashSet::new();
    for f in descendants(body).into_iter().filter(|d| d.kind() == "for_statement") {
        let literal = |n: Node| {
            let n = strip(n);
            (n.kind() == "number_literal").then(|| crate::pattern::int_literal(text(t, n))).flatten()
        };
        let Some(header) = syntax::unit_step_loop(t, f) else {
            // Any other loop that declares a counter refuses its name.
            let init = f.child_by_field_name("initializer");
            refused.extend(init.map(|i| syntax::declared_names(t, i)).unwrap_or_default());
            continue;
        };
        let name = header.var;
        let inside = f.child_by_field_name("body").map(|b| syntax::assigned(t, b)).unwrap_or_default();
        let left_alone = !inside.iter().any(|(n, _)| *n == name);
        match (literal(header.start), literal(header.bound), left_alone) {
            (Some(s0), Some(b), true) if s0 >= 0 && b >= 0 => {
                let e = out.entry(name).or_insert(0);
                *e = (*e).max(b.max(1));
            }
            _ => {
                refused.insert(name);
            }
        }
    }
    // A name also declared or assigned elsewhere is no counter alone.
    for d in descendants(body).into_iter().filter(|d| d.kind() == "declaration") {
        let in_header = d.parent().is_some_and(|p| {
            p.kind() == "for_statement" && p.child_by_field_name("initializer").is_some_and(|i| i.id() == d.id())
        });
        if !in_header {
            refused.extend(syntax::declared_names(t, d));
        }
    }
    out.retain(|n, _| !refused.contains(n));
    let assigned_outside: HashSet<String> = syntax::assigned(t, body)
        .into_iter()
        .filter(|(_, a)| a.parent().is_none_or(|p| p.kind() != "for_statement"))
        .map(|(n, _)| n)
        .collect();
    out.retain(|n, _| !assigned_outside.contains(n));
    out
}

/// An integer type of 32 bits or more.
fn wide_int_type(ty: &str) -> bool {
    is_int_type(ty) && !ty.contains("short") && !ty.contains("int16")
}

/// `n` without parentheses and casts to integer types of 32 bits or more; None behind
/// any other cast.
fn strip_int_casts<'t>(t: &str, n: Node<'t>) -> Option<Node<'t>> {
    let mut n = n;
    loop {
        match n.kind() {
            "parenthesized_expression" => n = named_children(n).into_iter().find(|c| c.kind() != "comment")?,
            "cast_expression" if n.child_by_field_name("type").is_some_and(|ty| wide_int_type(text(t, ty))) => {
                n = n.child_by_field_name("value")?
            }
            "cast_expression" => return None,
            _ => return Some(n),
        }
    }
}

/// Whether an expression multiplies anything but thread builtins (`blockIdx.x *
/// blockDim.x` stays below the thread count; `row * cols` only below a buffer's length).
fn multiplies_names(t: &str, n: Node) -> bool {
    descendants(n).into_iter().any(|d| {
        binary(t, d).is_some_and(|(o, l, r)| o == "*" && [l, r].iter().any(|x| crate::syntax::builtin(t, *x).is_none()))
    })
}

/// Sums and products of parameters (and casts of them).
fn divisor_shape(t: &str, n: Node) -> bool {
    descendants(n).into_iter().all(|d| match d.kind() {
        "identifier"
        | "parenthesized_expression"
        | "cast_expression"
        | "type_descriptor"
        | "primitive_type"
        | "sized_type_specifier"
        | "type_identifier"
        | "number_literal" => true,
        "binary_expression" => binary(t, d).is_some_and(|(o, _, _)| matches!(o, "*" | "+")),
        _ => !d.is_named(),
    })
}

/// The divisor as the launcher computes it: every parameter written `{name}` (bound to
/// the launch's argument), every invariant local replaced by its own expression.
fn host_template(t: &str, k: &Kernel, n: Node, invariant: &HashMap<String, String>) -> String {
    let mut e = Edits::new();
    let base = n.start_byte();
    for d in descendants(n) {
        if d.kind() != "identifier" {
            continue;
        }
        let name = text(t, d);
        let with = if k.param(name).is_some() {
            format!("{{{name}}}")
        } else if let Some(x) = invariant.get(name) {
            format!("({x})")
        } else {
            continue;
        };
        e.replace(d.start_byte() - base..d.end_byte() - base, with);
    }
    e.apply(text(t, n)).unwrap_or_else(|_| text(t, n).to_string())
}

fn render(t: &str, s: &Site, all: &[Site], var: &dyn Fn(&str) -> String) -> String {
    // The dividend, with the sites directly inside it rendered too.
    let mut e = Edits::new();
    let inner: Vec<&Site> = all
        .iter()
        .filter(|o| o.range != s.range && s.dividend.start <= o.range.start && o.range.end <= s.dividend.end)
        .collect();
    for o in &inner {
        let nested =
            inner.iter().any(|p| p.range != o.range && p.range.start <= o.range.start && o.range.end <= p.range.end);
        if !nested {
            e.replace(o.range.start - s.dividend.start..o.range.end - s.dividend.start, render(t, o, all, var));
        }
    }
    let dividend = e.apply(&t[s.dividend.clone()]).unwrap_or_else(|_| t[s.dividend.clone()].to_string());
    let f = if s.op == "/" { "ns_div" } else { "ns_mod" };
    // The result keeps the type the original expression had (`decltype` does not evaluate).
    format!("(decltype({}))({f}((unsigned)({dividend}), {}))", &t[s.range.clone()], var(&s.divisor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{FactsBuilder, Role};

    const NCHW: &str = r#"
__global__ void bias_act(const float* x, const float* bias, float* y, int C, int HW, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int c = (i / HW) % C;
  float v = x[i] + bias[c];
  y[i] = v > 0.f ? v : 0.f / 2.f;
}
extern "C" void launch(const float* x, const float* bias, float* y, int N, int C, int HW, cudaStream_t s) {
  int n = N * C * HW;
  bias_act<<<(n + 255) / 256, 256, 0, s>>>(x, bias, y, C, HW, n);
}
"#;

    #[test]
    fn nested_decoding_uses_two_divisors() {
        let f = FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "(long long)({N}) * ({C}) * ({HW})", 1 << 24, 1 << 24)
            .buffer("bias", "float", Role::Input, "{C}", 64, 64)
            .buffer("y", "float", Role::Output, "(long long)({N}) * ({C}) * ({HW})", 1 << 24, 1 << 24)
            .int("N", 8, 8)
            .int("C", 64, 64)
            .int("HW", 4096, 4096)
            .build();
        let r = apply(&Source::parse(NCHW), &f, &Params::default()).unwrap();
        let s = &r.source;
        assert!(
            s.contains("int c = (decltype((i / HW) % C))(ns_mod((unsigned)(((decltype(i / HW))(ns_div((unsigned)(i), ns_dv1)))), ns_dv0));"),
            "{s}"
        );
        assert!(s.contains("int C, int HW, int n, ns_divisor ns_dv0, ns_divisor ns_dv1)"), "{s}");
        assert!(s.contains("(x, bias, y, C, HW, n, ns_make_divisor((C)), ns_make_divisor((HW)));"), "{s}");
        assert!(s.contains("((HW)) >= 1 && ((HW)) <= 2147483647LL"), "{s}");
        // Float division is left alone.
        assert!(s.contains("0.f / 2.f"));
        // Applied again, the divisions left are those in `decltype`, which divide nothing:
        // it declines rather than add a second set of divisor parameters.
        let again = apply(&Source::parse(s), &f, &Params::default());
        let why = again.err().map(|e| e.0).unwrap_or_default();
        assert!(why.contains("divides no integer index by a run-time kernel parameter"), "{why}");
    }

    #[test]
    fn loaded_negative_or_large_dividends_and_changing_divisors_are_not_sites() {
        let f = FactsBuilder::new("launch").build();
        for (from, to) in [
            ("int c = (i / HW) % C;", "int t = (int)x[i]; int c = t % C;"),
            ("int c = (i / HW) % C;", "int prev = i - 1; int c = prev % C;"),
            ("int c = (i / HW) % C;", "long long big = (long long)i * 1000003; int c = (int)(big % C);"),
            ("int c = (i / HW) % C;", "int CC = C; while (CC > 8) CC /= 2; int c = i % C + 0 * CC; C = 3;"),
        ] {
            let src = NCHW.replace(from, to);
            let e = apply(&Source::parse(&src), &f, &Params::default());
            assert!(e.is_err(), "{to}: {:?}", e.map(|r| r.source));
        }
    }

    /// `vectorize`'s runs: the thread index times the run's length, and the quotient in
    /// an `auto` local.
    const RUNS: &str = r#"
__global__ void runs(const float* x, float* y, int cols, int dim, int n) {
  const int base = (int)(blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (base + 8 <= n) {
    const auto q = base / (cols);
    const auto r = base % (cols);
    const int d = (int)((q) % dim);
    y[base] = x[d] + r;
  }
}
extern "C" void launch(const float* x, float* y, int cols, int dim, int n, cudaStream_t s) {
  runs<<<(n / 8 + 255) / 256, 256, 0, s>>>(x, y, cols, dim, n);
}
"#;

    #[test]
    fn a_run_index_scaled_by_a_literal_divides_by_magic_under_a_thread_check_of_that_scale() {
        let f = FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "{dim}", 64, 64)
            .buffer("y", "float", Role::Output, "{n}", 1 << 24, 1 << 24)
            .int("cols", 2048, 2048)
            .int("dim", 64, 64)
            .int("n", 1 << 24, 1 << 24)
            .build();
        let r = apply(&Source::parse(RUNS), &f, &Params::default()).unwrap();
        assert_eq!(r.description, "`runs`: 3 divide/modulo by `cols`, `dim` with magic numbers");
        let s = &r.source;
        assert!(s.contains("const auto q = (decltype(base / (cols)))(ns_div((unsigned)(base), ns_dv0));"), "{s}");
        assert!(s.contains("ns_mod((unsigned)((q)), ns_dv1)"), "{s}");
        // base <= 8 * (blockIdx.x * blockDim.x + threadIdx.x) <= 16 threads < 2^31.
        assert!(r.guards.iter().any(|g| g.ends_with("<= 134217727LL")), "{:?}", r.guards);
        // Scaled indices the thread count does not bound, or bounds past 64 times.
        let base = "const int base = (int)(blockIdx.x * blockDim.x + threadIdx.x) * 8;";
        for other in [
            "const long long base = (long long)(blockIdx.x * blockDim.x + threadIdx.x) * 64 + threadIdx.x;",
            "const int base = (int)(blockIdx.x * blockDim.x + threadIdx.x) * (2 * 64);",
            "const int base = (int)(short)(blockIdx.x * blockDim.x + threadIdx.x) * 8;",
            "const long long m = n;\n  const long long base = m * 8;",
            "int base = (int)threadIdx.x * 8;\n  for (int j = 0; j < 4; ++j) base += (int)threadIdx.x * 8;",
        ] {
            let e = apply(&Source::parse(&RUNS.replace(base, other)), &f, &Params::default());
            let why = e.err().map(|e| e.0).unwrap_or_default();
            assert!(why.contains("divides no integer index"), "{other}: {why}");
        }
        // A counter of a loop with a literal bound adds that bound; one bounded by a
        // parameter adds nothing the checks know.
        let per = |bound: &str| {
            RUNS.replace(
                "const int d = (int)((q) % dim);",
                &format!(
                    "int d = 0;\n    for (int k = 0; k < {bound}; ++k) {{ const int at = base + k; d += at % dim; }}"
                ),
            )
        };
        let counted = apply(&Source::parse(&per("8")), &f, &Params::default()).unwrap();
        assert!(
            counted
                .source
                .contains("const int at = base + k; d += (decltype(at % dim))(ns_mod((unsigned)(at), ns_dv1));"),
            "{}",
            counted.source
        );
        assert!(counted.guards.iter().any(|g| g.ends_with("<= 89478485LL")), "{:?}", counted.guards);
        let open = apply(&Source::parse(&per("n")), &f, &Params::default()).unwrap();
        assert!(open.source.contains("d += at % dim;"), "{}", open.source);
        // A sum of two scaled halves is bounded by their sum.
        let twice = RUNS.replace(base, "const int half = (int)threadIdx.x * 8;\n  const int base = half + half;");
        let r3 = apply(&Source::parse(&twice), &f, &Params::default()).unwrap();
        assert!(r3.guards.iter().any(|g| g.ends_with("<= 134217727LL")), "{:?}", r3.guards);
        // A literal scales thread coordinates only: nothing checks `cols * 8` below 2^31.
        let sized = RUNS.replace("const auto q = base / (cols);", "const auto q = (cols * 8 + base) / (cols);");
        let r2 = apply(&Source::parse(&sized), &f, &Params::default()).unwrap();
        assert!(r2.source.contains("const auto q = (cols * 8 + base) / (cols);"), "{}", r2.source);
        // A factor past 64 keeps the division as it is.
        let big = RUNS.replace(") * 8;", ") * 1000;");
        let e = apply(&Source::parse(&big), &f, &Params::default()).unwrap_err();
        assert!(e.0.contains("divides no integer index"), "{e}");
        // An `auto` of a 64-bit value is a 64-bit index; one of a float is none.
        let float = RUNS.replace("const auto q = base / (cols);", "const auto q = base / (cols) * 0.5f;");
        assert!(!apply(&Source::parse(&float), &f, &Params::default())
            .unwrap()
            .source
            .contains("ns_mod((unsigned)((q))"));
    }

    #[test]
    fn literal_divisors_are_not_sites() {
        let src = NCHW.replace("(i / HW) % C", "(i / 64) % 3");
        let f = FactsBuilder::new("launch").build();
        let e = apply(&Source::parse(&src), &f, &Params::default()).unwrap_err();
        assert!(e.0.contains("divides no integer index"), "{e}");
    }
}
