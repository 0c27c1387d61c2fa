//! Prefetch: a k loop that stages tiles in shared memory (`tile[..] = global;` statements,
//! or loops of them, then a barrier, the work on the tiles, a last barrier) loads the next
//! trip's values into registers right after its first barrier, so their latency hides behind
//! this trip's work; the next trip stores those registers to the tiles where it loaded
//! them before. One shared buffer and the original's two barriers: nothing else moves.
//!
//! Each staged value is read one trip early, so the rewrite holds only where nothing the
//! loop does can change it. What the loop may write is allowed, not recognised: locals of
//! arithmetic types (no pointer, reference, class or deduced type) and `__shared__` arrays
//! of them, through builtin operators, arithmetic calls, macros whose text is arithmetic,
//! and nightshift's tensor-tile helpers (which write only what they are handed); no inline
//! assembly. The staging reads parameters, constants of the file, pointers the kernel
//! derives from a pointer parameter by an offset (global memory, which the loop cannot
//! write), its own declarations, and plain locals the loop does not write: no shared array,
//! no other pointer. A staging loop `for (e = START; e < END; e += STEP)` becomes a fully
//! unrolled loop over `(END + STEP - 1) / STEP` register slots, its trip count where END
//! and STEP are integer constants of the file and START lies in [0, what an `int` holds]
//! on every thread (bounded from thread indices, block sizes and constants). The first
//! trip's values are loaded before the loop where the loop's start passes its condition,
//! each later trip's where the next counter passes it: no load the original does not make.
//!
//! `width=4` loads four consecutive elements with one 16-byte read where it can. A trip of
//! a staging loop may move to another thread where nothing it reads but its counter differs
//! between threads and each trip stores its own element (both shown from the source); then,
//! where the loop starts at each thread's linear index and steps by the block's thread count
//! (a vote of the whole block before the k loop, no thread having left before it), thread
//! `i` takes the elements `4 (i + g STEP) .. + 3` instead, in a second copy of the k loop.
//! A store's value `COND ? P[IDX] : ALT` (or `P[IDX]`) is read as one 16-byte load where
//! IDX is shown to step by 1 with the counter and the trip's test, run once per thread,
//! shows COND to hold on the whole tile and the first elements 16-byte aligned; any other
//! trip loads element by element as written. The same thread stores the same elements, so
//! what lands in the tiles is what the original stores; each element's `e / D` and `e % D`
//! are its group's, divided once a group. `width=auto`, the default, is 4 where all this
//! is shown and 1 elsewhere.

use super::tensor_tile::{is_barrier, is_pragma, pragma_start};
use super::Planned;
use crate::edit::Edits;
use crate::facts::Facts;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{self, binary, descendants, indent_at, named_children, reindent, strip_parens, text};
use crate::version::Change;
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "width",
    values: &["auto", "1", "4"],
    doc: "auto: 4 where it holds, else 1 (the note says why not 4); 1: each thread loads the elements it stores, one at a time; 4: four consecutive elements a thread with one 16-byte load where the values allow, the staging loops' trips redistributed over the block (declines where that does not hold)",
}];

/// How a staging loop's elements are loaded: `width=1`, `width=4`, or the wider where it
/// holds. `auto` is the default: on the linear layer's `tensor-tile -> prefetch` (H200,
/// T=1024 N=4096 K=4096) the four-element loads took 0.8756 to 0.7904 ms at 64 x 128 and
/// reached 0.6900 ms at 128 x 128, torch.compile's 0.6828; the one-element kernel came
/// first in a search and its tiles were tuned while the other stayed unexpanded.
#[derive(Clone, Copy, PartialEq)]
enum Width {
    One,
    Four,
    Auto,
}

/// The most register slots one staging loop may take.
const MAX_SLOTS: i64 = 64;

/// Calls the staging and the work may make: barriers, arithmetic that writes nothing, and
/// the helpers nightshift's own recipes emit (`ns_`), which write only what they are handed.
const PURE_CALLS: &[&str] = &[
    "__syncthreads",
    "min",
    "max",
    "fminf",
    "fmaxf",
    "fabsf",
    "fmaf",
    "__fmaf_rn",
    "__fmul_rn",
    "__fadd_rn",
    "sqrtf",
    "rsqrtf",
    "expf",
    "__expf",
    "__ldg",
    "__float_as_uint",
    "__uint_as_float",
    "__float_as_int",
    "__int_as_float",
];

pub fn apply(src: &Source, _facts: &Facts, params: &Params) -> Applied {
    let width = match params.get(PARAMS, "width") {
        "1" => Width::One,
        "4" => Width::Four,
        "auto" => Width::Auto,
        other => return Err(NotApplicable::new(format!("`width={other}`: expected auto, 1 or 4"))),
    };
    super::per_kernel(src, params, |k| plan(src, k, width))
}

fn plan<'k>(src: &Source, k: &'k Kernel, width: Width) -> Planned<'k> {
    let t = src.text();
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| NotApplicable::new("no body"))?;
    // The names the rewrite declares must not capture the kernel's own.
    let ids = syntax::identifiers(t, body);
    if ids.contains(&"ns_pf0") {
        return Err(NotApplicable::new(format!("`{}` prefetches its tiles already", k.name)));
    }
    if let Some(taken) = ids.iter().find(|i| i.starts_with("ns_pf") || **i == "ns_i") {
        return Err(NotApplicable::new(format!(
            "`{}` has a name of its own, `{taken}`, that the rewrite would shadow",
            k.name
        )));
    }
    if k.is_template {
        return Err(NotApplicable::new(format!(
            "`{}` is a template: its parameters may shadow the constants the bounds are read from",
            k.name
        )));
    }
    let names = Names::of(src, k, body);
    let mut why = Vec::new();
    for f in named_children(body).into_iter().filter(|n| n.kind() == "for_statement") {
        match staged_loop(src, k, &names, body, f) {
            Ok(s) if width == Width::One => return Ok(emit(t, k, f, &s, None)),
            Ok(s) => {
                let not_wide = |e: String| {
                    format!("`width=4` does not hold for the loop at line {}: {e}", f.start_position().row + 1)
                };
                let w = match widened(src, &names, body, f, &s) {
                    Ok(w) => w,
                    Err(e) if width == Width::Auto => {
                        let (change, note) = emit(t, k, f, &s, None);
                        return Ok((change, format!("{note}, one element a load ({})", not_wide(e))));
                    }
                    Err(e) => return Err(NotApplicable::new(format!("`{}`: {}", k.name, not_wide(e)))),
                };
                let (mut change, note) = emit(t, k, f, &s, Some(&w));
                change.helpers.push(&crate::helpers::VECTOR_IO);
                change.helpers.push(&crate::helpers::PREFETCH_WIDE);
                change.helpers.push(&crate::helpers::PREFETCH_WHOLE);
                return Ok((change, note));
            }
            Err(e) => why.push(format!("the loop at line {}: {e}", f.start_position().row + 1)),
        }
    }
    Err(NotApplicable::new(if why.is_empty() {
        format!("`{}` has no loop at its top level", k.name)
    } else {
        format!("`{}`: {}", k.name, why.join("; "))
    }))
}

/// The k loop: its counter, the counter's type, its start, its condition and the next
/// counter as an expression of the current one.
struct Counter<'t> {
    var: String,
    ty: String,
    start: Node<'t>,
    cond: Node<'t>,
    /// The step's amount (`BK` of `k0 += BK`), where it is not 1.
    step: Option<Node<'t>>,
    next: String,
}

/// One store of a staging statement: `lhs = value;`, the tile its `lhs` writes and the
/// tile's element type.
struct Store<'t> {
    lhs: Node<'t>,
    value: Node<'t>,
    ty: String,
}

/// A staging statement: one store, or a loop `for (e = start; e < end; e += step)` of
/// declarations and stores.
enum Staging<'t> {
    Single(Store<'t>),
    Loop {
        var: String,
        ty: String,
        start: Node<'t>,
        end: Node<'t>,
        step: Node<'t>,
        decls: Vec<Node<'t>>,
        stores: Vec<Store<'t>>,
    },
}

/// What the rewrite needs of a staged loop.
struct Staged<'t> {
    counter: Counter<'t>,
    staging: Vec<Staging<'t>>,
    /// From the first staging statement's `#pragma` to the last one's end.
    staging_range: std::ops::Range<usize>,
    /// The first barrier, after which the next trip's loads go.
    barrier: Node<'t>,
    /// A staging loop's `e / D` and `e % D` as the slot's own quotient and remainder.
    divisions: Vec<Division<'t>>,
}

/// `e / D` or `e % D` in a staging loop and the text a copy of the loop puts there (found by
/// [`counter_divisions`]; the slots' own below, also the trip's corner and a group's). For
/// the slots, D an integer literal or a macro of one: where D
/// divides STEP (checked where the code is compiled, since a `-D` may move either), the
/// slot's quotient is `START / D + ns_i * (STEP / D)` and its remainder `START % D`, which
/// hold over the trips (nvcc divided each slot's `e` anew, and tested its bounds anew).
/// Exact as START is at least 0; typed as the original through `decltype`.
struct Division<'t> {
    range: std::ops::Range<usize>,
    text: String,
    /// What the replacement reads besides the loop's names: START for a slot, else D.
    start: Node<'t>,
}

fn staged_loop<'t>(
    src: &'t Source,
    k: &Kernel,
    names: &Names,
    kbody: Node<'t>,
    f: Node<'t>,
) -> Result<Staged<'t>, String> {
    let t = src.text();
    let counter = counter(t, f)?;
    let lbody =
        f.child_by_field_name("body").filter(|b| b.kind() == "compound_statement").ok_or("its body is not braced")?;
    let stmts: Vec<Node> = named_children(lbody).into_iter().filter(|n| n.kind() != "comment").collect();
    let first = stmts.iter().position(|s| is_barrier(t, *s)).ok_or("no `__syncthreads();` of its own")?;
    if !stmts.last().is_some_and(|s| is_barrier(t, *s)) || stmts.len() - 1 == first {
        return Err("its body does not end in a second `__syncthreads();`: the next trip's stores could overtake this trip's reads".into());
    }
    let staged: Vec<Node> = stmts[..first].iter().copied().filter(|s| !is_pragma(t, *s)).collect();
    if staged.is_empty() {
        return Err("nothing before its first barrier stages a tile".into());
    }
    // A lambda's `return` ends the lambda, not the trip.
    let in_lambda = |e: &Node| {
        let mut up = e.parent();
        while let Some(p) = up.filter(|p| p.id() != lbody.id()) {
            if p.kind() == "lambda_expression" {
                return true;
            }
            up = p.parent();
        }
        false
    };
    if let Some(e) = syntax::escapes(lbody).iter().find(|e| !in_lambda(e)) {
        return Err(format!("`{}` may end a trip early", text(t, *e).trim_end_matches(';').trim()));
    }
    // Names bound other than by a declaration (a range-for's variable, a lambda's
    // reference or pointer parameter) may alias anything.
    for d in descendants(lbody) {
        let aliasing = d.kind() == "for_range_loop"
            || (d.kind() == "parameter_declaration"
                && descendants(d).iter().any(|x| matches!(x.kind(), "reference_declarator" | "pointer_declarator")));
        if aliasing {
            return Err(format!("`{}` binds a name that may alias anything", syntax::one_line(text(t, d), 60)));
        }
    }
    let loop_text = syntax::blank_comments(&t[f.start_byte()..f.end_byte()]);
    if ["asm", "__asm__", "__asm"].iter().any(|w| syntax::mentions_word(&loop_text, w)) {
        return Err("it holds inline assembly, which may write anything".into());
    }
    // The recipe reads the source as written: a macro the loop names must be arithmetic.
    if let Some((name, effect)) = macro_effects(t, src.root(), f).into_iter().next() {
        return Err(format!("it names the macro `{name}`, whose text holds {effect}"));
    }
    // Everything the loop writes: only plain locals and tiles, through builtin operators and
    // helpers that write only what they are handed.
    let mut written = Vec::new();
    for d in descendants(lbody) {
        let target = match d.kind() {
            "assignment_expression" => d.child_by_field_name("left"),
            "update_expression" => d.child_by_field_name("argument"),
            "pointer_expression" if d.child_by_field_name("operator").is_some_and(|o| text(t, o) == "&") => {
                d.child_by_field_name("argument")
            }
            "call_expression" => {
                let callee = d.child_by_field_name("function").map(|c| text(t, c)).unwrap_or_default();
                match names.call(callee) {
                    Call::Arithmetic => {}
                    Call::Helper => written.extend(syntax::passed_bare(t, d)),
                    Call::Other => {
                        return Err(format!("it calls `{callee}`, which could write what the next trip loads"))
                    }
                }
                None
            }
            "declaration" => {
                let ty = syntax::declaration_type(t, d).unwrap_or_default();
                if !is_arithmetic(&ty) {
                    return Err(format!(
                        "it declares `{}`, of a type whose construction could write anything",
                        syntax::one_line(text(t, d), 60)
                    ));
                }
                None
            }
            _ => None,
        };
        let Some(target) = target else { continue };
        let root = write_root(t, target).ok_or_else(|| format!("`{}` writes through a pointer", text(t, d)))?;
        if !matches!(names.kind(&root), Some(Kind::Scalar | Kind::Tile(_))) {
            return Err(format!(
                "`{}` writes `{root}`, which is not a local or a `__shared__` array of the kernel",
                syntax::one_line(text(t, d), 60)
            ));
        }
        written.push(root);
    }
    written.extend(syntax::declared_names(t, lbody));
    if written.contains(&counter.var) {
        return Err(format!("its body changes the counter `{}`", counter.var));
    }
    let mut staging = Vec::new();
    for s in &staged {
        staging.push(staging_statement(t, *s, names)?);
    }
    // The staging's reads hold over the loop: each name a parameter, a constant of the
    // file, the counter, a name the statement itself declares, or a plain local the loop
    // does not write; no tile, no pointer of the kernel's own.
    let mut reads: Vec<(Node, Vec<(String, usize)>)> = vec![(counter.cond, Vec::new())];
    reads.extend(counter.step.map(|s| (s, Vec::new())));
    // A name a staging statement declares is its own from its declarator on (before it,
    // the name is an outer one).
    let declared_at = |n: Node| -> Vec<(String, usize)> {
        descendants(n)
            .into_iter()
            .filter(|d| {
                d.kind() == "init_declarator"
                    || (d.kind() == "identifier" && d.parent().is_some_and(|p| p.kind() == "declaration"))
            })
            .filter_map(|d| {
                let name = if d.kind() == "init_declarator" { d.child_by_field_name("declarator")? } else { d };
                (name.kind() == "identifier").then(|| (text(t, name).to_string(), name.end_byte()))
            })
            .collect()
    };
    for (s, node) in staging.iter().zip(&staged) {
        let own = declared_at(*node);
        match s {
            Staging::Single(st) => reads.push((st.value, own)),
            Staging::Loop { start, end, step, decls, stores, .. } => {
                // The loop's header reads names from outside it.
                reads.extend([*start, *end, *step].map(|n| (n, Vec::new())));
                reads.extend(decls.iter().map(|d| (*d, own.clone())));
                reads.extend(stores.iter().map(|s| (s.value, own.clone())));
            }
        }
    }
    for (r, own) in &reads {
        // Its own names from their declarators on (a declarator itself is no read).
        let mine =
            |d: &Node| own.iter().any(|(n, at)| n == text(t, *d) && (*at <= d.start_byte() || *at == d.end_byte()));
        let mut read: Vec<String> = descendants(*r)
            .into_iter()
            .filter(|d| d.kind() == "identifier" && !mine(d))
            .map(|d| text(t, d).to_string())
            .collect();
        read.extend(macro_names(t, src.root(), *r));
        for name in &read {
            if *name == counter.var {
                continue;
            }
            match names.kind(name) {
                Some(Kind::Tile(_)) => {
                    return Err(format!("its staging reads the shared array `{name}`, which the loop changes"))
                }
                Some(Kind::Scalar) if written.contains(name) => {
                    return Err(format!("its staging reads `{name}`, which the loop changes"))
                }
                Some(Kind::Scalar) => {}
                Some(Kind::Other) => {
                    return Err(format!("its staging reads `{name}`, which could point anywhere or be changed unseen"))
                }
                Some(Kind::Param { volatile: true }) => {
                    return Err(format!(
                        "its staging reads the `volatile` parameter `{name}`: reading it early changes what it sees"
                    ))
                }
                Some(Kind::Param { .. } | Kind::Global) if names.reassigned.contains(name) => {
                    return Err(format!("its staging reads `{name}`, which the kernel reassigns"))
                }
                Some(Kind::Param { .. } | Kind::Global) | None => {}
            }
        }
        if let Some(c) = impure(t, *r, names) {
            return Err(format!("its staging or condition has `{c}`, which must not run twice"));
        }
    }
    if let Some(c) = impure(t, counter.start, names) {
        return Err(format!("its start has `{c}`, which must not run twice"));
    }
    let mut divisions = Vec::new();
    for s in &staging {
        if let Staging::Loop { var, ty, start, end, step, decls, stores } = s {
            let constant = |n: Node| {
                let local = syntax::identifiers(t, n).into_iter().find(|v| names.kind(v).is_some());
                if local.is_some() {
                    None
                } else {
                    super::row_strip::const_value(src, k, n)
                }
            };
            let (Some(end_v), Some(step_v)) = (constant(*end), constant(*step)) else {
                return Err(format!(
                    "a staging loop's bound `{}` or step `{}` is not an integer constant of the file",
                    text(t, *end),
                    text(t, *step)
                ));
            };
            if end_v < 1 || step_v < 1 {
                return Err(format!("a staging loop's bound {end_v} or step {step_v} is below 1"));
            }
            let slots = end_v.checked_add(step_v - 1).map_or(i64::MAX, |n| n / step_v);
            if slots > MAX_SLOTS {
                return Err(format!(
                    "a staging loop of {slots} trips a thread would hold as many registers (at most {MAX_SLOTS})"
                ));
            }
            // START + ns_i * STEP must stay inside `int` for every slot.
            let fits = upper_bound(t, kbody, names, src, k, *start, 3)
                .and_then(|b| b.checked_add(slots.checked_mul(step_v)?))
                .is_some_and(|b| b <= i64::from(i32::MAX));
            if !fits {
                return Err(format!(
                    "a staging loop starts at `{}`, not shown to be between 0 and what an `int` holds: its trips per thread have no bound",
                    text(t, *start)
                ));
            }
            // START is at least 0 and STEP a multiple of D: e / D and e % D split into a
            // part per thread and one per slot, each of the type the original had.
            for (d, op, r) in counter_divisions(src, loop_code(decls, stores), var) {
                if !constant(r).is_some_and(|v| v >= 1 && step_v % v == 0) {
                    continue;
                }
                let (from, step, by) = (text(t, *start), text(t, *step), text(t, r));
                let per_slot = match op {
                    "/" => format!("({ty})({from}) / ({by}) + ns_i * (({step}) / ({by}))"),
                    _ => format!("({ty})({from}) % ({by})"),
                };
                let text =
                    format!("((decltype({var} {op} ({by})))(({step}) % ({by}) == 0 ? {per_slot} : {var} {op} ({by})))");
                divisions.push(Division { range: d.byte_range(), text, start: *start });
            }
        }
    }
    let from = pragma_start(t, staged[0]);
    let to = staged.last().map_or(from, |s| s.end_byte());
    Ok(Staged { counter, staging, staging_range: from..to, barrier: stmts[first], divisions })
}

/// A store's value as `width=4` reads it: `COND ? P[IDX] : ALT`, or `P[IDX]` alone.
struct WideLoad<'t> {
    cond: Option<Node<'t>>,
    /// `P[IDX]`, IDX shown to step by 1 with the counter inside a group of four.
    element: Node<'t>,
    alt: Option<Node<'t>>,
    /// The `D` of each `e / D` and `e % D` IDX and COND read: a group of four stays inside
    /// one quotient where 4 divides D, which the block's vote tests.
    divisors: Vec<String>,
    /// Products of outer names that must be multiples of 4 for every group's first element
    /// to be (the terms of IDX besides the one that steps).
    aligned: Vec<String>,
}

/// Per staging statement, the wide reads of its stores' values (`None`: a single store,
/// left as it is).
struct Wide<'t> {
    loops: Vec<Option<WideLoop<'t>>>,
}

struct WideLoop<'t> {
    reads: Vec<WideLoad<'t>>,
    /// Statements that `&&` into `ns_pf_full` whether the loop's every group of four reads
    /// four elements wide, where the trip's counter is in scope: at the tile's last
    /// element (its declarations at their largest quotients and remainders) every
    /// condition holds, 4 divides END and each divisor, and the first elements are
    /// 16-byte aligned.
    test: String,
    /// Each `e / D` and `e % D` of the loop as one element of a group reads it: its group's
    /// quotient, and its group's remainder plus its place in the group, where D is positive
    /// and a multiple of 4 (a group starts at a multiple of 4, so its four elements share
    /// a quotient). nvcc divided each element anew.
    by_group: Vec<Division<'t>>,
}

/// `width=4`'s plan for a staged loop, or why it does not hold. The vote before the k loop
/// needs every thread of the block there: nothing before the loop may leave the kernel.
fn widened<'t>(src: &'t Source, names: &Names, kbody: Node, f: Node, s: &Staged<'t>) -> Result<Wide<'t>, String> {
    let t = src.text();
    if let Some(e) = syntax::escapes(kbody).into_iter().find(|e| e.start_byte() < f.start_byte()) {
        return Err(format!(
            "`{}` before the loop may leave some threads out of the block's vote",
            syntax::one_line(text(t, e), 40)
        ));
    }
    let before = &t[kbody.start_byte()..f.start_byte()];
    if let Some((name, what)) =
        syntax::jump_macros(t, src.root()).into_iter().find(|(m, _)| syntax::mentions_word(before, m))
    {
        return Err(format!("the macro `{name}` before the loop holds `{what}`"));
    }
    // The rewrite writes the loop twice, one copy for each answer of the vote.
    let body = syntax::blank_comments(&t[f.start_byte()..f.end_byte()]);
    if let Some(w) = ["__shared__", "static"].iter().find(|w| syntax::mentions_word(&body, w)) {
        return Err(format!("the loop declares a `{w}` variable, which a second copy of the loop would double"));
    }
    if descendants(f).iter().any(|d| d.kind() == "labeled_statement") {
        return Err("the loop holds a label, which a second copy of the loop would repeat".into());
    }
    // The names the wide copies declare must be free in the kernel.
    let ids = syntax::identifiers(t, kbody);
    let taken = ids.iter().find(|i| {
        matches!(**i, "ns_e" | "ns_g" | "ns_q")
            || i.strip_prefix("ns_v").is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
    });
    if let Some(taken) = taken {
        return Err(format!("the kernel has a name of its own, `{taken}`, that the wide copy would shadow"));
    }
    let uniform = thread_uniform(src, names, kbody, &s.counter);
    // Each tile is staged by one store: two stores to one tile could meet on an element
    // that one thread wrote in order and two threads now race on.
    let mut targets = Vec::new();
    for st in &s.staging {
        let stores: Vec<&Store> = match st {
            Staging::Single(one) => vec![one],
            Staging::Loop { stores, .. } => stores.iter().collect(),
        };
        for one in stores {
            let root = write_root(t, one.lhs).unwrap_or_default();
            if targets.contains(&root) {
                return Err(format!("`{root}` is staged by more than one store, which could meet on an element"));
            }
            targets.push(root);
        }
    }
    let mut loops = Vec::new();
    for st in &s.staging {
        let Staging::Loop { var, ty, decls, stores, .. } = st else {
            loops.push(None);
            continue;
        };
        let mut own: Vec<String> = decls.iter().flat_map(|d| syntax::declared_names(t, *d)).collect();
        own.push(var.clone());
        // A name of its own read before its declarator is an outer one, which the reading
        // below would take for its own.
        for d in decls.iter().flat_map(|d| descendants(*d)).filter(|d| d.kind() == "init_declarator") {
            let Some(name) = d.child_by_field_name("declarator") else { continue };
            let early = decls
                .iter()
                .flat_map(|x| descendants(*x))
                .any(|x| x.kind() == "identifier" && text(t, x) == text(t, name) && x.start_byte() < name.start_byte());
            if early {
                return Err(format!("its staging reads `{}` before declaring its own", text(t, name)));
            }
        }
        // A trip moves to another thread: what it stores and where must not depend on
        // which thread runs it (START aside, which the vote reads).
        for n in loop_code(decls, stores).flat_map(|n| syntax::identifiers(t, n)) {
            let fine = own.iter().any(|o| o == n)
                || uniform.iter().any(|u| u == n)
                || targets.iter().any(|r| r == n)
                || matches!(names.kind(n), Some(Kind::Global));
            if !fine {
                return Err(format!(
                    "its staging reads `{n}`, which is not shown to be the same on every thread: a trip cannot move to another"
                ));
            }
        }
        // Each trip stores its own element: two trips that wrote one element would race
        // once different threads make them.
        for one in stores {
            if !one_to_one(src, names, (var, ty), decls, &own, one.lhs) {
                return Err(format!(
                    "the store to `{}` is not shown to write a different element each trip (an index `A + {var}`, or `[A + {var} / D]` and `[B + {var} % D]`)",
                    syntax::one_line(text(t, one.lhs), 60)
                ));
            }
        }
        let reads = stores
            .iter()
            .map(|one| wide_load(src, names, &own, (var, ty), decls, one.value))
            .collect::<Result<Vec<_>, _>>()?;
        let test = corner_test(src, st, &reads);
        let by_group = counter_divisions(src, loop_code(decls, stores), var)
            .into_iter()
            .map(|(d, op, r)| {
                let by = text(t, r);
                let group = match op {
                    "/" => format!("ns_e / ({by})"),
                    _ => format!("ns_e % ({by}) + ns_q"),
                };
                let text = format!(
                    "((decltype({var} {op} ({by})))(({by}) > 0 && ({by}) % 4 == 0 ? {group} : {var} {op} ({by})))"
                );
                Division { range: d.byte_range(), text, start: r }
            })
            .collect();
        loops.push(Some(WideLoop { reads, test, by_group }));
    }
    if loops.iter().all(Option::is_none) {
        return Err("no staging loop: a single store has no neighbours to load with".into());
    }
    Ok(Wide { loops })
}

/// [`WideLoop::test`]: the loop's declarations and conditions with the counter at END - 1,
/// each `e / D` at `(END - 1) / D` and each `e % D` at the largest remainder the tile
/// reaches, where [`bounded_above`] showed each condition to be at its largest.
fn corner_test(src: &Source, st: &Staging, reads: &[WideLoad]) -> String {
    let t = src.text();
    let Staging::Loop { var, ty, end, decls, .. } = st else { return String::new() };
    let end = text(t, *end);
    let conds: Vec<Node> = reads.iter().filter_map(|r| r.cond).collect();
    let mut corners = Vec::new();
    let roots = decls.iter().copied().chain(conds.iter().copied());
    for (d, op, r) in counter_divisions(src, roots, var) {
        let by = text(t, r);
        let text = match op {
            "/" => format!("((({end}) - 1) / ({by}))"),
            _ => format!("((({end}) - 1) < ({by}) - 1 ? (({end}) - 1) : ({by}) - 1)"),
        };
        // `start` names what the replacement reads besides the declarations: the divisor.
        corners.push(Division { range: d.byte_range(), text, start: r });
    }
    let mut asks = vec![format!("ns_pf_whole4({end})")];
    for r in reads {
        // A positive divisor: the largest quotient is at the largest counter.
        asks.extend(r.divisors.iter().map(|d| format!("({d}) > 0 && ({d}) % 4 == 0")));
        asks.extend(r.cond.map(|c| format!("({})", slot_text(t, c, &corners))));
        asks.extend(r.aligned.iter().map(|a| format!("({a}) % 4 == 0")));
        let p = r.element.child_by_field_name("argument").map_or("", |a| text(t, a));
        asks.push(format!("sizeof(({p})[0]) == 4 && reinterpret_cast<uintptr_t>({p}) % 16 == 0"));
    }
    let mut seen = Vec::new();
    asks.retain(|a| {
        if seen.contains(a) {
            false
        } else {
            seen.push(a.clone());
            true
        }
    });
    let decls = needed_decls(t, decls, &conds, &corners).replace("\n    ", "\n  ").replacen("    ", "  ", 1);
    let asked = asks.join(" &&\n      ");
    // The counter itself, where the declarations or conditions still read it.
    let counter = if syntax::mentions_word(&decls, var) || syntax::mentions_word(&asked, var) {
        format!("  const {ty} {var} = ({end}) - 1;\n")
    } else {
        String::new()
    };
    format!("{{\n{counter}{decls}  ns_pf_full = ns_pf_full && {asked};\n}}\n")
}

/// The names whose value is shown to be the same on every thread of a block: parameters,
/// the block's and grid's indices and sizes, macros whose text reads only such names, and
/// locals declared from those alone (through builtin operators and `min`/`max`) and never
/// assigned after (the k loop's counter among them where its start and step are such).
/// Anything else (a `threadIdx`, a call, an `asm` output, a macro of either) may differ.
fn thread_uniform(src: &Source, names: &Names, kbody: Node, counter: &Counter) -> Vec<String> {
    let t = src.text();
    let macros = syntax::macro_definitions(t, src.root());
    let mut uniform: Vec<String> = ["blockIdx", "blockDim", "gridDim", "min", "max"].map(String::from).to_vec();
    uniform.extend(names.params.iter().map(|p| p.name.clone()));
    let words = |v: &str| -> Vec<String> {
        v.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
            .map(String::from)
            .collect()
    };
    // A field name (`.x`) is no name of its own.
    let reads = |n: Node| -> Vec<String> { syntax::identifiers(t, n).into_iter().map(String::from).collect() };
    let inits: Vec<(String, Vec<String>)> = descendants(kbody)
        .into_iter()
        .filter(|d| d.kind() == "init_declarator")
        .filter_map(|d| {
            Some((text(t, d.child_by_field_name("declarator")?).to_string(), reads(d.child_by_field_name("value")?)))
        })
        .filter(|(n, _)| !names.reassigned.contains(n) && names.declarations(n) == 1)
        .collect();
    let asm = syntax::mentions_word(&syntax::blank_comments(text(t, kbody)), "asm");
    loop {
        let mut grew = false;
        for (m, v) in &macros {
            if !uniform.iter().any(|u| u == m) && words(&syntax::blank_comments(v)).iter().all(|w| uniform.contains(w))
            {
                uniform.push(m.to_string());
                grew = true;
            }
        }
        for (n, r) in &inits {
            if !asm && !uniform.contains(n) && r.iter().all(|w| uniform.contains(w)) {
                uniform.push(n.clone());
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    let header = [Some(counter.start), counter.step].into_iter().flatten().flat_map(reads);
    if !asm && header.into_iter().collect::<Vec<_>>().iter().all(|w| uniform.contains(w)) {
        uniform.push(counter.var.clone());
    }
    uniform
}

/// Whether a store's target is a different element for each counter of the staging loop:
/// one index `A + e`, or one `A + e / D` and another `B + e % D`, with A and B free of the
/// counter.
fn one_to_one(src: &Source, names: &Names, counter: (&str, &str), decls: &[Node], own: &[String], lhs: Node) -> bool {
    let (var, var_ty) = counter;
    let mut divisors = Vec::new();
    let mut poly = IndexPoly { src, names, var, var_ty, decls, own, divisors: &mut divisors, signed: false };
    let mut steps = Vec::new();
    let mut n = strip_parens(lhs);
    while n.kind() == "subscript_expression" {
        let Some(index) = crate::pattern::subscript_index(n) else { return false };
        let Some(p) = poly.of(index, 8) else { return false };
        let Some((_, delta)) = split_varying(&p, |v| is_atom(v, var)) else { return false };
        if delta != crate::poly::Poly::constant(0) {
            let one = delta.variables().into_iter().find(|v| delta == crate::poly::Poly::var(v));
            let Some(one) = one else { return false };
            steps.push(one);
        }
        let Some(inner) = n.child_by_field_name("argument") else { return false };
        n = strip_parens(inner);
    }
    steps.iter().any(|v| v == var)
        || steps.iter().any(|q| {
            q.strip_prefix(var).and_then(|r| r.strip_prefix('/')).is_some_and(|d| steps.contains(&format!("{var}%{d}")))
        })
}

fn wide_load<'t>(
    src: &Source,
    names: &Names,
    own: &[String],
    counter: (&str, &str),
    decls: &[Node<'t>],
    value: Node<'t>,
) -> Result<WideLoad<'t>, String> {
    let (var, var_ty) = counter;
    let t = src.text();
    let v = strip_parens(value);
    let (cond, element, alt) = if v.kind() == "conditional_expression" {
        let part = |f: &str| v.child_by_field_name(f).ok_or_else(|| format!("`{}` is incomplete", text(t, v)));
        (Some(part("condition")?), strip_parens(part("consequence")?), Some(part("alternative")?))
    } else {
        (None, v, None)
    };
    let not = || {
        format!(
            "the value `{}` is not `P[i]` or `COND ? P[i] : VALUE`, P a pointer parameter",
            syntax::one_line(text(t, value), 60)
        )
    };
    if element.kind() != "subscript_expression" {
        return Err(not());
    }
    let p = element.child_by_field_name("argument").map(strip_parens).ok_or_else(not)?;
    let pname = text(t, p);
    let pointer = p.kind() == "identifier"
        && !own.iter().any(|o| o == pname)
        && ((names.is_pointer_param(pname) && matches!(names.kind(pname), Some(Kind::Param { volatile: false })))
            || matches!(names.kind(pname), Some(Kind::Global)));
    if !pointer {
        return Err(not());
    }
    // The wide path converts the loaded elements as `true ? v : (ALT)`, outside the
    // staging loop's declarations.
    if let Some(a) = alt {
        if let Some(n) = syntax::identifiers(t, a).into_iter().find(|i| own.iter().any(|o| o == i)) {
            return Err(format!(
                "the value's alternative `{}` reads `{n}`, which the staging loop declares",
                text(t, a)
            ));
        }
    }
    let index = crate::pattern::subscript_index(element).ok_or_else(not)?;
    let mut divisors = Vec::new();
    let mut poly = IndexPoly { src, names, var, var_ty, decls, own, divisors: &mut divisors, signed: false };
    let Some(rest) = poly.of(index, 8).and_then(|p| steps_by_one(&p, var)) else {
        return Err(format!(
            "the index `{}` is not shown to step by 1 with `{var}` (a sum of a term in `{var}` or `{var} % D` and terms without them, D an integer constant)",
            syntax::one_line(text(t, index), 60)
        ));
    };
    if let Some(c) = cond {
        poly.signed = true;
        bounded_above(t, &mut poly, c)?;
    }
    let atom = |v: &String| is_atom(v, var);
    let mut aligned = Vec::new();
    for (vars, coef) in rest.terms() {
        if coef % 4 == 0 {
            continue;
        }
        let outer: Vec<String> = vars.iter().filter(|v| !atom(v)).map(|v| format!("(long long)({v})")).collect();
        aligned.push(std::iter::once(format!("{coef}LL")).chain(outer).collect::<Vec<_>>().join(" * "));
    }
    Ok(WideLoad { cond, element, alt, divisors, aligned })
}

/// A name of [`IndexPoly`]'s that varies with the counter `var`: `var`, `var / D`, `var % D`.
fn is_atom(v: &str, var: &str) -> bool {
    v == var || v.strip_prefix(var).is_some_and(|r| r.starts_with(['/', '%']))
}

/// Whether the condition holds for every counter of the staging loop once it holds where
/// the counter and each of its quotients and remainders are at their largest: a `&&` of
/// comparisons `A < B` (or `<=`, or `B > A`, `B >= A`), A growing with them (each term
/// that varies is one of them times a positive constant), B a polynomial that does not.
fn bounded_above<'t>(t: &str, poly: &mut IndexPoly<'_, 't>, c: Node<'t>) -> Result<(), String> {
    let c = strip_parens(c);
    let Some((op, l, r)) = (c.kind() == "binary_expression").then(|| binary(t, c)).flatten() else {
        return Err(format!("the condition `{}` is no comparison", syntax::one_line(text(t, c), 60)));
    };
    if op == "&&" {
        bounded_above(t, poly, l)?;
        return bounded_above(t, poly, r);
    }
    let (a, b) = match op {
        "<" | "<=" => (l, r),
        ">" | ">=" => (r, l),
        _ => return Err(format!("the condition `{}` is not `&&` of `<` or `<=`", syntax::one_line(text(t, c), 60))),
    };
    let var = poly.var.to_string();
    let (pa, pb) = (poly.of(a, 8), poly.of(b, 8));
    let growing = pa.as_ref().is_some_and(|p| {
        p.terms().all(|(vars, coef)| !vars.iter().any(|v| is_atom(v, &var)) || (vars.len() == 1 && coef > 0))
    });
    let fixed = pb.as_ref().is_some_and(|p| !p.variables().iter().any(|v| is_atom(v, &var)));
    if !(growing && fixed) {
        return Err(format!(
            "the condition `{}` is not shown to hold on the whole tile where it holds at its last element",
            syntax::one_line(text(t, c), 60)
        ));
    }
    Ok(())
}

/// An index as a polynomial over the names it reads: the staging loop's declarations
/// substituted, `e / D` and `e % D` (D an integer constant) names of their own, casts to
/// 64-bit integers dropped (they widen a 32-bit index without changing it). Anything else
/// (a call, a load, `e` inside another operation, a narrowing cast) is no polynomial.
struct IndexPoly<'a, 't> {
    src: &'a Source,
    names: &'a Names<'a>,
    var: &'a str,
    /// The counter's type, unqualified.
    var_ty: &'a str,
    decls: &'a [Node<'t>],
    own: &'a [String],
    divisors: &'a mut Vec<String>,
    /// Reading a condition: every value a signed integer of 32 bits or more, so the
    /// comparison is signed and nothing wraps (an unsigned cast, literal or name, or a
    /// narrow declaration, could make a condition that holds at the tile's largest
    /// element fail on a smaller one).
    signed: bool,
}

impl<'t> IndexPoly<'_, 't> {
    fn of(&mut self, n: Node<'t>, depth: u32) -> Option<crate::poly::Poly> {
        use crate::poly::Poly;
        let t = self.src.text();
        let n = strip_parens(n);
        if depth == 0 {
            return None;
        }
        match n.kind() {
            "number_literal" => {
                let lit = text(t, n);
                if self.signed && !signed_literal(lit) {
                    return None;
                }
                crate::pattern::int_literal(lit).map(Poly::constant)
            }
            "identifier" => {
                let name = text(t, n);
                if name == self.var {
                    return (!self.signed || SIGNED_INTEGERS.contains(&self.var_ty)).then(|| Poly::var(name));
                }
                if self.own.iter().any(|o| o == name) {
                    let (value, ty) = self.declared(name)?;
                    let types = if self.signed { SIGNED_INTEGERS } else { WIDE_INTEGERS };
                    types.contains(&syntax::unqualified(&ty).as_str()).then_some(())?;
                    return self.of(value, depth - 1);
                }
                // A macro stands for one value only where its text is one token or
                // parenthesized (`r * LDA` of `#define LDA K + PAD` is `r * K + PAD`), and
                // it must not read the loop's own names behind its name.
                let macros = syntax::macro_definitions(t, self.src.root());
                let texts: Vec<String> = macros
                    .iter()
                    .filter(|(m, _)| *m == name)
                    .map(|(_, v)| syntax::blank_comments(v).trim().to_string())
                    .collect();
                // An empty text stands as a name too: a `-D` may give it its value.
                let whole = |v: &str| v.is_empty() || is_name(v) || wrapped_whole(v);
                let hides = |v: &str| {
                    syntax::mentions_word(v, self.var) || self.own.iter().any(|o| syntax::mentions_word(v, o))
                };
                if !texts.is_empty() {
                    let fine = texts.iter().all(|v| whole(v) && !hides(v) && (!self.signed || self.signed_macro(v, 4)));
                    return fine.then(|| Poly::var(name));
                }
                (!self.signed || self.names.signed_integer(name)).then(|| Poly::var(name))
            }
            "cast_expression" => {
                let ty = n.child_by_field_name("type").map(|x| syntax::unqualified(text(t, x)))?;
                let types = if self.signed { SIGNED_WIDE_TYPES } else { WIDE_INDEX_TYPES };
                types.contains(&ty.as_str()).then_some(())?;
                self.of(n.child_by_field_name("value")?, depth - 1)
            }
            "binary_expression" => {
                let (op, l, r) = binary(t, n)?;
                if matches!(op, "/" | "%") {
                    counter_division(self.src, n, self.var)?;
                    // The trip's test also asks that D be positive and a multiple of 4.
                    let d = text(t, r).to_string();
                    if !self.divisors.contains(&d) {
                        self.divisors.push(d.clone());
                    }
                    return Some(Poly::var(&format!("{}{op}{d}", self.var)));
                }
                let (a, b) = (self.of(l, depth - 1)?, self.of(r, depth - 1)?);
                match op {
                    "+" => a.add(&b),
                    "-" => a.sub(&b),
                    "*" => a.mul(&b),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Whether a macro's text is a signed `int` in a comparison: a decimal literal without
    /// suffix up to `INT_MAX`, or one name that is (a signed integer, or such a macro).
    fn signed_macro(&self, v: &str, depth: u32) -> bool {
        let v = unwrapped(v);
        if signed_literal(v) {
            return true;
        }
        let t = self.src.text();
        if !is_name(v) || depth == 0 {
            return false;
        }
        let texts: Vec<String> = syntax::macro_definitions(t, self.src.root())
            .iter()
            .filter(|(m, _)| *m == v)
            .map(|(_, x)| syntax::blank_comments(x))
            .collect();
        if texts.is_empty() {
            self.names.signed_integer(v)
        } else {
            texts.iter().all(|x| self.signed_macro(x, depth - 1))
        }
    }

    /// The value and type a declaration of the staging loop gives `name` (the last one
    /// before the stores, as they see it); none without an initializer.
    fn declared(&self, name: &str) -> Option<(Node<'t>, String)> {
        let t = self.src.text();
        let mut found = None;
        for d in self.decls {
            let mut c = d.walk();
            for p in d.children_by_field_name("declarator", &mut c) {
                let id = p.child_by_field_name("declarator").filter(|_| p.kind() == "init_declarator").unwrap_or(p);
                if text(t, id) == name {
                    let value = (p.kind() == "init_declarator").then(|| p.child_by_field_name("value")).flatten();
                    found = value.map(|v| (v, syntax::declaration_type(t, *d).unwrap_or_default()));
                }
            }
        }
        found
    }
}

/// A literal that is a signed `int`: decimal, no suffix, at most `INT_MAX` (a hexadecimal
/// or octal literal past it is unsigned).
fn signed_literal(v: &str) -> bool {
    v.chars().all(|c| c.is_ascii_digit()) && (v == "0" || !v.starts_with('0')) && v.parse::<i32>().is_ok()
}

/// Whether `v` is one parenthesized expression: its first `(` closes at its end.
fn wrapped_whole(v: &str) -> bool {
    if !v.starts_with('(') {
        return false;
    }
    let mut depth = 0usize;
    for (i, c) in v.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1 == v.len();
                }
            }
            _ => {}
        }
    }
    false
}

/// Casts an index may pass through: to 64-bit integers, which hold any 32-bit value
/// (`long` is 32 bits on some hosts, so it is not among them).
const WIDE_INDEX_TYPES: &[&str] =
    &["size_t", "long long", "long long int", "int64_t", "uint64_t", "ptrdiff_t", "unsigned long long"];

/// The casts a condition may pass through: to signed 64-bit integers.
const SIGNED_WIDE_TYPES: &[&str] = &["long long", "long long int", "int64_t", "ptrdiff_t"];

/// The types a condition's names may have: signed integers of 32 bits or more.
const SIGNED_INTEGERS: &[&str] =
    &["int", "signed", "signed int", "long long", "long long int", "int32_t", "int64_t", "ptrdiff_t"];

/// The A of an index `A + x`, x the counter or one `counter % D` and A free of both: four
/// consecutive counters inside one quotient then read four consecutive elements.
fn steps_by_one(p: &crate::poly::Poly, var: &str) -> Option<crate::poly::Poly> {
    use crate::poly::Poly;
    let stepping = |v: &str| is_atom(v, var) && !v[var.len()..].starts_with('/');
    let (rest, delta) = split_varying(p, stepping)?;
    p.variables().iter().any(|v| stepping(v) && delta == Poly::var(v)).then_some(rest)
}

/// `p` as the part free of the names `varying` picks (those set to 0) and the rest, the
/// part that moves with them.
fn split_varying(
    p: &crate::poly::Poly,
    varying: impl Fn(&str) -> bool,
) -> Option<(crate::poly::Poly, crate::poly::Poly)> {
    use crate::poly::Poly;
    let zero: std::collections::BTreeMap<String, Poly> = p
        .variables()
        .into_iter()
        .map(|v| {
            let value = if varying(&v) { Poly::constant(0) } else { Poly::var(&v) };
            (v, value)
        })
        .collect();
    let rest = p.substitute(&zero)?;
    let delta = p.sub(&rest)?;
    Some((rest, delta))
}

fn counter<'t>(t: &str, f: Node<'t>) -> Result<Counter<'t>, String> {
    let init = f.child_by_field_name("initializer").ok_or("no counter declared in its header")?;
    let (var, start) = syntax::single_declarator(t, init).ok_or("no single counter declared in its header")?;
    let start = start.ok_or("its counter has no start")?;
    let ty = syntax::unqualified(&syntax::declaration_type(t, init).ok_or("its counter has no type")?);
    if ty.contains(['*', '&']) || ty == "auto" {
        return Err(format!("its counter's type `{ty}` is not an integer's"));
    }
    let cond = f.child_by_field_name("condition").ok_or("no condition")?;
    let update = f.child_by_field_name("update").ok_or("no update")?;
    let mut step = None;
    let next = match update.kind() {
        "update_expression" if update.child_by_field_name("argument").is_some_and(|a| syntax::is_ident(t, a, &var)) => {
            if text(t, update).contains("++") {
                format!("{var} + 1")
            } else {
                format!("{var} - 1")
            }
        }
        "assignment_expression" if update.child_by_field_name("left").is_some_and(|a| syntax::is_ident(t, a, &var)) => {
            let op = update.child_by_field_name("operator").map(|o| text(t, o)).unwrap_or_default();
            let right = update.child_by_field_name("right").ok_or("an update without a value")?;
            if syntax::mentions(t, right, &var) {
                return Err("its step depends on the counter".into());
            }
            step = Some(right);
            match op {
                "+=" => format!("{var} + ({})", text(t, right)),
                "-=" => format!("{var} - ({})", text(t, right)),
                _ => return Err(format!("its update `{}` is not a step", text(t, update))),
            }
        }
        _ => return Err(format!("its update `{}` is not a step of its counter", text(t, update))),
    };
    Ok(Counter { var, ty, start, cond, step, next })
}

fn staging_statement<'t>(t: &str, s: Node<'t>, names: &Names) -> Result<Staging<'t>, String> {
    if s.kind() == "expression_statement" {
        return store(t, s, names).map(Staging::Single);
    }
    if s.kind() != "for_statement" {
        return Err(format!("`{}` before its first barrier is no store to a tile", syntax::one_line(text(t, s), 60)));
    }
    let init = s.child_by_field_name("initializer").ok_or("a staging loop without a counter")?;
    let (var, start) = syntax::single_declarator(t, init).ok_or("a staging loop without a single counter")?;
    let start = start.ok_or("a staging loop's counter without a start")?;
    let ty = syntax::unqualified(&syntax::declaration_type(t, init).unwrap_or_default());
    if !WIDE_INTEGERS.contains(&ty.as_str()) {
        return Err(format!("a staging loop's counter is a `{ty}`, not an integer of 32 bits or more"));
    }
    let (op, l, end) =
        s.child_by_field_name("condition").and_then(|c| binary(t, c)).ok_or("a staging loop without a bound")?;
    if op != "<" || !syntax::is_ident(t, l, &var) {
        return Err(format!("a staging loop's condition is not `{var} < END`"));
    }
    let step = s
        .child_by_field_name("update")
        .filter(|u| u.kind() == "assignment_expression")
        .filter(|u| u.child_by_field_name("left").is_some_and(|a| syntax::is_ident(t, a, &var)))
        .filter(|u| u.child_by_field_name("operator").is_some_and(|o| text(t, o) == "+="))
        .and_then(|u| u.child_by_field_name("right"))
        .ok_or_else(|| format!("a staging loop's update is not `{var} += STEP`"))?;
    let body =
        s.child_by_field_name("body").filter(|b| b.kind() == "compound_statement" && b.end_byte() > b.start_byte());
    let Some(body) = body else {
        return Err("a staging loop's body is not braced".into());
    };
    let (mut decls, mut stores) = (Vec::new(), Vec::new());
    for c in named_children(body).into_iter().filter(|c| c.kind() != "comment") {
        if c.kind() == "declaration" {
            // The rewrite puts the declarations first: a store before one could name an
            // outer variable the declaration would then shadow.
            if !stores.is_empty() {
                return Err("a staging loop declares after it stores".into());
            }
            decls.push(c);
        } else {
            stores.push(store(t, c, names)?);
        }
    }
    if stores.is_empty() {
        return Err("a staging loop stores nothing".into());
    }
    if syntax::assigned(t, body).iter().any(|(n, _)| *n == var) {
        return Err(format!("a staging loop's body changes its counter `{var}`"));
    }
    Ok(Staging::Loop { var, ty, start, end, step, decls, stores })
}

/// `tile[..] = value;`, tile a `__shared__` array.
fn store<'t>(t: &str, s: Node<'t>, names: &Names) -> Result<Store<'t>, String> {
    let e = s.named_child(0).filter(|e| s.kind() == "expression_statement" && e.kind() == "assignment_expression");
    let not = || format!("`{}` before its first barrier is no store to a tile", syntax::one_line(text(t, s), 60));
    let e = e.ok_or_else(not)?;
    if e.child_by_field_name("operator").is_none_or(|o| text(t, o) != "=") {
        return Err(not());
    }
    let (lhs, value) =
        (e.child_by_field_name("left").ok_or_else(not)?, e.child_by_field_name("right").ok_or_else(not)?);
    if strip_parens(lhs).kind() != "subscript_expression" {
        return Err(not());
    }
    let root = write_root(t, lhs).ok_or_else(not)?;
    let Some(Kind::Tile(ty)) = names.kind(&root) else { return Err(not()) };
    Ok(Store { lhs, value, ty })
}

/// The variable an assignment's target writes (`acc` of `acc[i][j]`, `v` of `v.x`); `None`
/// where it writes through a pointer (`*p`, `p->x`).
fn write_root(t: &str, n: Node) -> Option<String> {
    let mut n = strip_parens(n);
    loop {
        match n.kind() {
            "subscript_expression" => n = strip_parens(n.child_by_field_name("argument")?),
            "field_expression" if n.child_by_field_name("operator").is_some_and(|o| text(t, o) == ".") => {
                n = strip_parens(n.child_by_field_name("argument")?)
            }
            "identifier" => return Some(text(t, n).to_string()),
            _ => return None,
        }
    }
}

/// The macros code under `n` names, directly or through the text of other macros, each
/// with its replacement text: what the code runs that its own text does not show.
fn macros_reached<'s>(t: &'s str, root: Node, n: Node) -> Vec<(&'s str, String)> {
    let all = syntax::macro_definitions(t, root);
    let mut todo: Vec<String> = syntax::macros_used_in(t, root, n).into_iter().map(|(m, _)| m).collect();
    let mut out: Vec<(&str, String)> = Vec::new();
    while let Some(m) = todo.pop() {
        let Some((name, _)) = all.iter().find(|(name, _)| *name == m) else { continue };
        if out.iter().any(|(seen, _)| seen == name) {
            continue;
        }
        let value = all.iter().filter(|(n, _)| *n == m).map(|(_, v)| *v).collect::<Vec<_>>().join("\n");
        // By the words of the text, which need not parse as code.
        todo.extend(all.iter().filter(|(n, _)| syntax::mentions_word(&value, n)).map(|(n, _)| n.to_string()));
        out.push((name, value));
    }
    out
}

/// The macros code under `n` reaches whose text could write, jump or call something that
/// might: each with what it holds.
fn macro_effects(t: &str, root: Node, n: Node) -> Vec<(String, &'static str)> {
    let all = syntax::macro_definitions(t, root);
    macros_reached(t, root, n)
        .into_iter()
        .filter_map(|(name, value)| {
            macro_effect(&value, |callee| all.iter().any(|(m, _)| *m == callee)).map(|e| (name.to_string(), e))
        })
        .collect()
}

/// What in a macro's text could write memory, jump or call something that might.
fn macro_effect(value: &str, is_macro: impl Fn(&str) -> bool) -> Option<&'static str> {
    let v = syntax::blank_comments(value);
    let chars: Vec<char> = v.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        let prev = |k: usize| if i >= k { chars.get(i - k).copied() } else { None };
        if *c == '=' && chars.get(i + 1) != Some(&'=') {
            let comparison = match prev(1) {
                Some('=' | '!') => true,
                // `<=` and `>=` compare; `<<=` and `>>=` assign.
                Some(p @ ('<' | '>')) => prev(2) != Some(p),
                _ => false,
            };
            if !comparison {
                return Some("an assignment");
            }
        }
    }
    if v.contains("++") || v.contains("--") {
        return Some("an increment");
    }
    let is_id = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let words: Vec<&str> = v.split(|c: char| !is_id(c)).filter(|w| !w.is_empty()).collect();
    if let Some(kw) = ["return", "break", "continue", "goto", "asm"].into_iter().find(|kw| words.contains(kw)) {
        return Some(match kw {
            "asm" => "inline assembly",
            _ => "a jump",
        });
    }
    if v.contains("##") {
        return Some("token pasting");
    }
    // Each `(` that calls: after a name, which must be arithmetic or another macro (whose
    // own text is checked in turn), or after `)`, `]` or `>` (a callee expression).
    let cs = &chars;
    for (i, c) in cs.iter().enumerate() {
        if *c != '(' {
            continue;
        }
        let mut j = i;
        while j > 0 && cs[j - 1].is_whitespace() {
            j -= 1;
        }
        let end = j;
        while j > 0 && is_id(cs[j - 1]) {
            j -= 1;
        }
        let callee: String = cs[j..end].iter().collect();
        if callee.is_empty() {
            if end > 0 && matches!(cs[end - 1], ')' | ']' | '>') {
                return Some("a call");
            }
            continue;
        }
        let keyword = matches!(callee.as_str(), "if" | "for" | "while" | "switch" | "sizeof" | "return");
        let number = callee.starts_with(|c: char| c.is_ascii_digit());
        if !keyword && !number && !PURE_CALLS.contains(&callee.as_str()) && !is_macro(&callee) {
            return Some("a call");
        }
    }
    None
}

/// Integer types whose values the slots' bound (`int`'s range) fits in.
const WIDE_INTEGERS: &[&str] = &[
    "int",
    "unsigned",
    "unsigned int",
    "long",
    "unsigned long",
    "long long",
    "unsigned long long",
    "size_t",
    "int32_t",
    "uint32_t",
    "int64_t",
    "uint64_t",
];

/// Element types a write or a construction of cannot reach other memory.
const ARITHMETIC: &[&str] = &[
    "float",
    "double",
    "int",
    "unsigned",
    "unsigned int",
    "signed",
    "long",
    "unsigned long",
    "long long",
    "unsigned long long",
    "short",
    "unsigned short",
    "char",
    "signed char",
    "unsigned char",
    "bool",
    "size_t",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "half",
    "__half",
    "__nv_bfloat16",
    "float2",
    "float4",
    "double2",
    "int2",
    "int4",
    "uint2",
    "uint4",
];

/// A declaration's type (qualifiers aside) is one of [`ARITHMETIC`].
fn is_arithmetic(ty: &str) -> bool {
    let bare: Vec<&str> =
        ty.split_whitespace().filter(|w| !matches!(*w, "const" | "__shared__" | "static" | "register")).collect();
    ARITHMETIC.contains(&bare.join(" ").as_str())
}

/// What a name of the kernel is, as far as the recipe may rely on it.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// Declared once in the body, of an arithmetic type, no pointer or reference.
    Scalar,
    /// A `__shared__` array declared once, arithmetic elements (the type given).
    Tile(String),
    /// A kernel parameter.
    Param { volatile: bool },
    /// A pointer declared once at the kernel's top level as a pointer parameter (or another
    /// such pointer) plus an offset: it points into global memory, which the loop cannot
    /// write.
    Global,
    /// Any other name the kernel declares: a pointer, a reference, a deduced or class
    /// type, a name declared twice.
    Other,
}

/// How a call may touch memory.
enum Call {
    /// Writes nothing: arithmetic, or a macro whose text was checked.
    Arithmetic,
    /// One of nightshift's own helpers, which write only what they are handed.
    Helper,
    Other,
}

/// The kernel's names: its parameters and what its body declares.
struct Names<'k> {
    params: &'k [crate::source::Param],
    /// Each declaration of the body (for-loop counters among them): its name, type and
    /// declarator.
    decls: Vec<(String, String, &'static str)>,
    /// Function-like macros (an object-like one may name any function).
    macros: Vec<String>,
    /// The functions the file defines.
    functions: Vec<String>,
    /// The names the kernel assigns anywhere: a parameter or derived pointer is global
    /// memory only as long as nothing points it elsewhere.
    reassigned: Vec<String>,
    /// The pointers of [`Kind::Global`].
    globals: Vec<String>,
    /// The tensor-tile helpers are nightshift's where the file holds them under their mark.
    helpers: bool,
}

impl<'k> Names<'k> {
    fn of(src: &Source, k: &'k Kernel, kbody: Node) -> Names<'k> {
        let t = src.text();
        let mut decls = Vec::new();
        for d in descendants(kbody).into_iter().filter(|d| d.kind() == "declaration") {
            let ty = syntax::declaration_type(t, d).unwrap_or_default();
            let mut c = d.walk();
            for decl in d.children_by_field_name("declarator", &mut c) {
                // The innermost name and the outermost shape that is not plain.
                let (mut x, mut shape) = (decl, "plain");
                loop {
                    match x.kind() {
                        "identifier" => {
                            decls.push((text(t, x).to_string(), ty.clone(), shape));
                            break;
                        }
                        "pointer_declarator" | "reference_declarator" | "function_declarator" => {
                            shape = "indirect";
                            match x.child_by_field_name("declarator") {
                                Some(inner) => x = inner,
                                None => break,
                            }
                        }
                        "array_declarator" => {
                            if shape == "plain" {
                                shape = "array";
                            }
                            match x.child_by_field_name("declarator") {
                                Some(inner) => x = inner,
                                None => break,
                            }
                        }
                        _ => match x.child_by_field_name("declarator") {
                            Some(inner) => x = inner,
                            None => break,
                        },
                    }
                }
            }
        }
        let macros = descendants(src.root())
            .into_iter()
            .filter(|d| d.kind() == "preproc_function_def")
            .filter_map(|d| d.child_by_field_name("name").map(|n| text(t, n).to_string()))
            .collect();
        let functions = descendants(src.root())
            .into_iter()
            .filter(|d| d.kind() == "function_declarator")
            .filter_map(|d| d.child_by_field_name("declarator").map(|n| text(t, n).to_string()))
            .collect();
        // The helpers are nightshift's where the file holds them under its guard.
        let helpers = descendants(src.root()).into_iter().any(|d| {
            d.kind() == "preproc_ifdef"
                && d.child_by_field_name("name").is_some_and(|n| text(t, n) == "NIGHTSHIFT_TENSOR_TILE")
        });
        let reassigned = syntax::assigned(t, kbody).into_iter().map(|(n, _)| n).collect();
        let mut names = Names { params: &k.params, decls, macros, functions, reassigned, globals: Vec::new(), helpers };
        for d in named_children(kbody).into_iter().filter(|d| d.kind() == "declaration") {
            let mut c = d.walk();
            for decl in d.children_by_field_name("declarator", &mut c) {
                let (Some(p), Some(value)) =
                    (decl.child_by_field_name("declarator"), decl.child_by_field_name("value"))
                else {
                    continue;
                };
                let name = p.child_by_field_name("declarator").filter(|n| n.kind() == "identifier");
                let (true, Some(name)) = (p.kind() == "pointer_declarator", name) else { continue };
                let name = text(t, name).to_string();
                if syntax::declaration_type(t, d).is_some_and(|ty| syntax::mentions_word(&ty, "volatile")) {
                    continue;
                }
                let root = names.pointer_root(t, value);
                if names.declarations(&name) == 1
                    && root.is_some_and(|r| names.is_pointer_param(&r) || names.globals.contains(&r))
                {
                    names.globals.push(name);
                }
            }
        }
        names
    }

    /// The pointer `P` of `P`, `P + i`, `P - i`, `&P[i]` or a cast of one of those, where
    /// the offsets name no pointer of the kernel's own.
    fn pointer_root(&self, t: &str, n: Node) -> Option<String> {
        let n = strip_parens(n);
        match n.kind() {
            "identifier" => Some(text(t, n).to_string()),
            "cast_expression" => self.pointer_root(t, n.child_by_field_name("value")?),
            "binary_expression" => {
                let (op, l, r) = binary(t, n)?;
                let offset = |i: &str| match self.kind(i) {
                    None | Some(Kind::Scalar) => true,
                    Some(Kind::Param { .. }) => !self.is_pointer_param(i),
                    _ => false,
                };
                (matches!(op, "+" | "-") && syntax::identifiers(t, r).into_iter().all(offset))
                    .then(|| self.pointer_root(t, l))?
            }
            "pointer_expression" if n.child_by_field_name("operator").is_some_and(|o| text(t, o) == "&") => {
                let a = strip_parens(n.child_by_field_name("argument")?);
                (a.kind() == "subscript_expression")
                    .then(|| self.pointer_root(t, a.child_by_field_name("argument")?))?
            }
            _ => None,
        }
    }

    /// Whether every declaration of `name` (a parameter or a local of the kernel) is a
    /// signed integer of 32 bits or more.
    fn signed_integer(&self, name: &str) -> bool {
        let mine = self.decls.iter().filter(|(n, _, _)| n == name);
        let mut types: Vec<Option<String>> =
            mine.map(|(_, ty, shape)| (*shape == "plain").then(|| syntax::unqualified(ty))).collect();
        if let Some(p) = self.params.iter().find(|p| p.name == name) {
            let decl = syntax::blank_comments(&p.decl);
            types.push(decl.trim().strip_suffix(name).map(syntax::unqualified));
        }
        !types.is_empty() && types.iter().all(|ty| ty.as_deref().is_some_and(|ty| SIGNED_INTEGERS.contains(&ty)))
    }

    fn is_pointer_param(&self, name: &str) -> bool {
        self.params.iter().any(|p| p.name == name && p.pointer)
    }

    fn declarations(&self, name: &str) -> usize {
        self.decls.iter().filter(|(n, _, _)| n == name).count()
    }

    /// `None`: not the kernel's (a constant, a global or a function of the file).
    fn kind(&self, name: &str) -> Option<Kind> {
        let mine: Vec<&(String, String, &str)> = self.decls.iter().filter(|(n, _, _)| n == name).collect();
        if let Some(p) = self.params.iter().find(|p| p.name == name) {
            let volatile = syntax::mentions_word(&p.decl, "volatile");
            return Some(if mine.is_empty() { Kind::Param { volatile } } else { Kind::Other });
        }
        if self.globals.iter().any(|g| g == name) {
            return Some(Kind::Global);
        }
        let kinds: Vec<Kind> = mine
            .iter()
            .map(|(_, ty, shape)| {
                let words: Vec<&str> = ty.split_whitespace().collect();
                let odd = words.iter().any(|w| matches!(*w, "extern" | "volatile"));
                match (*shape, words.contains(&"__shared__")) {
                    ("array", true) if is_arithmetic(ty) && !odd => Kind::Tile(
                        words
                            .iter()
                            .filter(|w| !matches!(**w, "__shared__" | "static" | "const"))
                            .copied()
                            .collect::<Vec<_>>()
                            .join(" "),
                    ),
                    ("plain" | "array", false) if is_arithmetic(ty) && !odd => Kind::Scalar,
                    _ => Kind::Other,
                }
            })
            .collect();
        // Several declarations of one name (loop counters) are one kind only where all are
        // plain locals: whichever a use names, writing it reaches nothing else.
        match kinds.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            many if many.iter().all(|k| *k == Kind::Scalar) => Some(Kind::Scalar),
            _ => Some(Kind::Other),
        }
    }

    fn call(&self, callee: &str) -> Call {
        if self.macros.iter().any(|m| m == callee) {
            return Call::Arithmetic;
        }
        // A name the kernel declares (a lambda called `min`) or the file defines is not the
        // function it names.
        if PURE_CALLS.contains(&callee) && self.kind(callee).is_none() && !self.functions.iter().any(|f| f == callee) {
            return Call::Arithmetic;
        }
        let base = callee.split('<').next().unwrap_or_default().trim();
        if self.helpers && matches!(base, "ns_tt_step" | "ns_tt_clamp") {
            return Call::Helper;
        }
        Call::Other
    }
}

/// The names in the text of the macros code under `n` reaches, macros aside: what the code
/// reads that its own text does not show.
fn macro_names(t: &str, root: Node, n: Node) -> Vec<String> {
    let reached = macros_reached(t, root, n);
    reached
        .iter()
        .flat_map(|(_, value)| crate::pattern::names_in(value))
        .filter(|w| !reached.iter().any(|(m, _)| m == w))
        .collect()
}

/// An assignment, an update or a call that may write under `n`: what must not run once
/// more (or earlier) than the original runs it.
fn impure<'s>(t: &'s str, n: Node, names: &Names) -> Option<&'s str> {
    descendants(n).into_iter().find_map(|d| match d.kind() {
        "assignment_expression" | "update_expression" => Some(text(t, d)),
        "call_expression" => {
            let callee = d.child_by_field_name("function").map(|c| text(t, c)).unwrap_or_default();
            (!matches!(names.call(callee), Call::Arithmetic) || callee == "__syncthreads").then(|| text(t, d))
        }
        _ => None,
    })
}

/// The largest value `e` takes on any thread, where it is at least 0 on every one: thread
/// indices and block sizes (at most 1024), non-negative constants of the file, `const`
/// scalars the kernel declares once from such expressions (followed `depth` deep), under
/// `+`, `*`, `>>`, `&`, and `/` or `%` by a constant of at least 1 (a local only where
/// declared before `e`, of an integer type of 32 bits or more). `None`: no such bound.
fn upper_bound(t: &str, kbody: Node, names: &Names, src: &Source, k: &Kernel, e: Node, depth: u32) -> Option<i64> {
    let e = strip_parens(e);
    let bound = |n: Node| upper_bound(t, kbody, names, src, k, n, depth);
    // Locals are followed only where declared before the expression that reads them.
    let before = e.start_byte();
    let value = match e.kind() {
        "number_literal" => crate::pattern::int_literal(text(t, e))?,
        "field_expression" => {
            let whole = text(t, e).replace(char::is_whitespace, "");
            if ["threadIdx.x", "threadIdx.y", "threadIdx.z"].contains(&whole.as_str()) {
                1023
            } else if ["blockDim.x", "blockDim.y", "blockDim.z"].contains(&whole.as_str()) {
                1024
            } else {
                return None;
            }
        }
        "binary_expression" => {
            let (op, l, r) = binary(t, e)?;
            match op {
                "+" => bound(l)?.checked_add(bound(r)?)?,
                "*" => bound(l)?.checked_mul(bound(r)?)?,
                ">>" => bound(l).filter(|_| bound(r).is_some())?,
                "&" => bound(l)?.min(bound(r)?),
                "/" | "%" => {
                    let divisor = super::row_strip::const_value(src, k, r).filter(|d| *d >= 1)?;
                    let left = bound(l)?;
                    if op == "/" {
                        left / divisor
                    } else {
                        left.min(divisor - 1)
                    }
                }
                _ => return None,
            }
        }
        "identifier" => {
            let name = text(t, e);
            match names.kind(name) {
                None => super::row_strip::const_value(src, k, e)?,
                Some(Kind::Scalar) if depth > 0 && names.declarations(name) == 1 => {
                    // Its one declaration, `const` and at the kernel's top level.
                    let init = named_children(kbody)
                        .into_iter()
                        .filter(|d| d.kind() == "declaration")
                        .filter(|d| d.start_byte() < before)
                        .filter(|d| {
                            syntax::declaration_type(t, *d).is_some_and(|ty| {
                                ty.split_whitespace().any(|w| w == "const")
                                    && WIDE_INTEGERS.contains(&syntax::unqualified(&ty).as_str())
                            })
                        })
                        .find_map(|d| {
                            let mut c = d.walk();
                            let found = d.children_by_field_name("declarator", &mut c).find(|x| {
                                x.kind() == "init_declarator"
                                    && x.end_byte() <= before
                                    && x.child_by_field_name("declarator").is_some_and(|n| syntax::is_ident(t, n, name))
                            });
                            found.and_then(|x| x.child_by_field_name("value"))
                        })?;
                    upper_bound(t, kbody, names, src, k, init, depth - 1)?
                }
                _ => return None,
            }
        }
        _ => return None,
    };
    (value >= 0).then_some(value)
}

fn emit<'k>(t: &str, k: &'k Kernel, f: Node, s: &Staged, wide: Option<&Wide>) -> (Change<'k>, String) {
    let c = &s.counter;
    let mut change = Change::new(k);
    let ind = indent_at(t, f.start_byte());
    // One register array a store, sized for its statement's trips.
    let mut decl = String::new();
    // The loads and stores element by element as the original maps them, and with the
    // staging loops four elements a thread (the same where a statement is not widened).
    let (mut load, mut put, mut load_w, mut put_w) = (String::new(), String::new(), String::new(), String::new());
    // What each thread asks of the block's vote for the wide mapping.
    let mut me = Vec::new();
    let mut slot = 0;
    for (at, st) in s.staging.iter().enumerate() {
        match st {
            Staging::Single(one) => {
                decl.push_str(&format!("{} ns_pf{slot}[1];\n", one.ty));
                let (l, p) = (
                    format!("ns_pf{slot}[0] = {};\n", text(t, one.value)),
                    format!("{} = ns_pf{slot}[0];\n", text(t, one.lhs)),
                );
                load_w.push_str(&l);
                put_w.push_str(&p);
                load.push_str(&l);
                put.push_str(&p);
                slot += 1;
            }
            Staging::Loop { var, ty, start, end, step, decls, stores } => {
                let slot_text = |n: Node| slot_text(t, n, &s.divisions);
                let (start, end, step) = (text(t, *start), text(t, *end), text(t, *step));
                let n = format!("ns_pf{slot}_n");
                let w = wide.and_then(|w| w.loops[at].as_ref());
                decl.push_str(&format!("constexpr int {n} = (({end}) + ({step}) - 1) / ({step});\n"));
                // The wide path's groups of four a thread; the registers hold either path's.
                let size = match w {
                    Some(_) => {
                        let g = format!("ns_pf{slot}_g");
                        decl.push_str(&format!("constexpr int {g} = ((({end}) + 3) / 4 + ({step}) - 1) / ({step});\n"));
                        let ask = format!("({start}) == ns_pf_lin && ({step}) == ns_pf_threads");
                        if !me.contains(&ask) {
                            me.push(ask);
                        }
                        format!("({n} > 4 * {g} ? {n} : 4 * {g})")
                    }
                    None => n.clone(),
                };
                let values: Vec<Node> = stores.iter().map(|s| s.value).collect();
                let lhs: Vec<Node> = stores.iter().map(|s| s.lhs).collect();
                let (ds_load, ds_put) =
                    (needed_decls(t, decls, &values, &s.divisions), needed_decls(t, decls, &lhs, &s.divisions));
                let first = slot;
                let (mut l, mut p) = (String::new(), String::new());
                for one in stores {
                    decl.push_str(&format!("{} ns_pf{slot}[{size}];\n", one.ty));
                    l.push_str(&format!("    ns_pf{slot}[ns_i] = {};\n", slot_text(one.value)));
                    p.push_str(&format!("    {} = ns_pf{slot}[ns_i];\n", slot_text(one.lhs)));
                    slot += 1;
                }
                let head = format!(
                    "#pragma unroll\nfor (int ns_i = 0; ns_i < {n}; ++ns_i) {{\n  const {ty} {var} = ({start}) + ns_i * ({step});\n  if ({var} < ({end})) {{\n"
                );
                let (narrow_load, narrow_put) =
                    (format!("{head}{ds_load}{l}  }}\n}}\n"), format!("{head}{ds_put}{p}  }}\n}}\n"));
                match w {
                    Some(w) => {
                        let g = format!("ns_pf{first}_g");
                        let wt = WideText {
                            t,
                            var,
                            ty,
                            end,
                            step,
                            decls,
                            stores,
                            reads: &w.reads,
                            by_group: &w.by_group,
                            first,
                            groups: &g,
                        };
                        load_w.push_str(&wt.load(&w.test));
                        put_w.push_str(&wt.put());
                    }
                    None => {
                        load_w.push_str(&narrow_load);
                        put_w.push_str(&narrow_put);
                    }
                }
                load.push_str(&narrow_load);
                put.push_str(&narrow_put);
            }
        }
    }
    let (var, ty, cond) = (&c.var, &c.ty, text(t, c.cond));
    let guarded = |at: &str, load: &str| {
        format!("{{\n  const {ty} {var} = {at};\n  if ({cond}) {{\n{}  }}\n}}", indent_lines(load, "    "))
    };
    // The block's vote on the mapping: every thread holds its linear index and the block's
    // thread count as the staging loops' start and step. A vote is a barrier, which every
    // thread reaches: none left before the loop ([`widened`]).
    let voted = if me.is_empty() {
        String::new()
    } else {
        format!(
            "// nightshift: prefetch width 4: where the whole block votes that the staging loops' trips cover the\n\
             // tiles in linear thread order, thread i loads the elements 4 (i + g STEP) .. + 3 instead, four at a\n\
             // time where the trip's tile is inside its bounds and aligned.\n\
             const int ns_pf_lin = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));\n\
             const int ns_pf_threads = (int)(blockDim.x * blockDim.y * blockDim.z);\n\
             const bool ns_pf_map = __syncthreads_and({}) != 0;\n",
            me.join(" && ")
        )
    };
    let comment = format!(
        "// nightshift: prefetch: each trip of the `{var}` loop loads the next trip's tile values into registers\n\
         // after its first barrier, where this trip's work hides their latency.\n"
    );
    let (sind, bind) = (indent_at(t, s.staging_range.start), indent_at(t, s.barrier.start_byte()));
    // After the first barrier: the next trip's loads (its counter shadows this trip's).
    let next = |load: &str| {
        let loads = reindent(&guarded("ns_pf_next", load), "  ");
        reindent(&format!("\n{{\n  const {ty} ns_pf_next = {};\n  {loads}\n}}", c.next), &bind)
    };
    if me.is_empty() {
        // Before the loop: the registers and the first trip's loads.
        let before = format!("{comment}{decl}{}\n", guarded(text(t, c.start), &load));
        change.edits.insert(pragma_start(t, f), reindent(&before, &ind) + "\n" + &ind);
        // The staging: the registers into the tiles.
        change.edits.replace(s.staging_range.clone(), reindent(put.trim_end(), &sind));
        change.edits.insert(s.barrier.end_byte(), next(&load));
    } else {
        // The loop twice, as the vote picks: a loop that held both mappings and branched on
        // the vote each trip compiled to branches a group and waits on its loads (1.44 ms
        // against 0.69 ms for one mapping, the linear layer at 128 x 128 on an H200).
        let from = pragma_start(t, f);
        let version = |load: &str, put: &str| {
            let staged = reindent(put.trim_end(), &sind);
            let body = format!(
                "{}{staged}{}{}{}",
                &t[from..s.staging_range.start],
                &t[s.staging_range.end..s.barrier.end_byte()],
                next(load),
                &t[s.barrier.end_byte()..f.end_byte()]
            );
            format!("{}\n{ind}{body}", reindent(&guarded(text(t, c.start), load), &ind))
        };
        let nest = |v: String| {
            v.lines().map(|l| if l.is_empty() { "\n".to_string() } else { format!("  {l}\n") }).collect::<String>()
        };
        let whole = format!(
            "{}if (ns_pf_map) {{\n{}{ind}}} else {{\n{}{ind}}}",
            reindent(&format!("{comment}{decl}{voted}"), &ind) + "\n" + &ind,
            nest(format!("{ind}{}", version(&load_w, &put_w))),
            nest(format!("{ind}{}", version(&load, &put)))
        );
        change.edits.replace(from..f.end_byte(), whole);
    }
    let note = format!(
        "`{}`: the `{var}` loop loads the next trip's {} staged value{} into registers during this trip's work{}",
        k.name,
        slot,
        if slot == 1 { "" } else { "s" },
        if me.is_empty() {
            ""
        } else {
            ", four consecutive elements a thread with one 16-byte load where the tile allows"
        }
    );
    (change, note)
}

/// A staging loop's wide path: thread `ns_pf_lin` takes the elements
/// `4 (ns_pf_lin + g STEP) + q`, q < 4, all below END (the trip's test).
struct WideText<'a, 't> {
    t: &'a str,
    var: &'a str,
    ty: &'a str,
    end: &'a str,
    step: &'a str,
    decls: &'a [Node<'t>],
    stores: &'a [Store<'t>],
    reads: &'a [WideLoad<'t>],
    by_group: &'a [Division<'t>],
    /// The first store's register array.
    first: usize,
    groups: &'a str,
}

impl WideText<'_, '_> {
    fn head(&self, body: &str) -> String {
        let WideText { ty, end, step, groups, .. } = self;
        // A group that starts below END; its elements past END (END no multiple of 4) are
        // loaded and stored one by one under their own test.
        format!(
            "#pragma unroll\nfor (int ns_g = 0; ns_g < {groups}; ++ns_g) {{\n  const {ty} ns_e = 4 * (ns_pf_lin + ns_g * ({step}));\n  if (ns_e < ({end})) {{\n{body}  }}\n}}\n",
            body = indent_lines(body, "    ")
        )
    }

    /// The thread's groups: where the trip's test (`test`, at the tile's last element)
    /// shows every condition to hold and the first elements aligned, one load of four a
    /// group and store, each value its element converted as the original's `?:` converts
    /// it; else the elements one by one as written.
    fn load(&self, test: &str) -> String {
        let t = self.t;
        let mut fast = format!("const {} {} = ns_e;\n", self.ty, self.var);
        let elements: Vec<Node> = self.reads.iter().map(|r| r.element).collect();
        fast.push_str(&needed_decls(t, self.decls, &elements, &[]).replace("\n    ", "\n").replacen("    ", "", 1));
        for (i, r) in self.reads.iter().enumerate() {
            let value = match r.alt {
                Some(a) => format!("true ? ns_v{i}.v[ns_q] : ({})", text(t, a)),
                None => format!("ns_v{i}.v[ns_q]"),
            };
            fast.push_str(&format!(
                "const auto ns_v{i} = ns_pf_load4(&({}));\n#pragma unroll\nfor (int ns_q = 0; ns_q < 4; ++ns_q) ns_pf{}[4 * ns_g + ns_q] = {value};\n",
                text(t, r.element),
                self.first + i
            ));
        }
        let values: Vec<Node> = self.stores.iter().map(|s| s.value).collect();
        let slow: String = self
            .stores
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!("    ns_pf{}[4 * ns_g + ns_q] = {};\n", self.first + i, slot_text(t, s.value, self.by_group))
            })
            .collect();
        let slow = self.each_element(&values, &slow);
        let group =
            format!("if (ns_pf_full) {{\n{}}} else {{\n{}}}\n", indent_lines(&fast, "  "), indent_lines(&slow, "  "));
        let body = format!("bool ns_pf_full = true;\n{test}{}", self.head(&group));
        format!("{{\n{}}}\n", indent_lines(&body, "  "))
    }

    fn put(&self) -> String {
        let t = self.t;
        let lhs: Vec<Node> = self.stores.iter().map(|s| s.lhs).collect();
        let body: String = self
            .stores
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!("    {} = ns_pf{}[4 * ns_g + ns_q];\n", slot_text(t, s.lhs, self.by_group), self.first + i)
            })
            .collect();
        self.head(&self.each_element(&lhs, &body))
    }

    /// The group's elements one by one, each below END (the elements past it, where END is
    /// no multiple of 4, are neither loaded nor stored; where it is one, the group's test
    /// covers them), with the declarations `uses` need, their divisions the group's.
    fn each_element(&self, uses: &[Node], body: &str) -> String {
        format!(
            "#pragma unroll\nfor (int ns_q = 0; ns_q < 4; ++ns_q) {{\n  const {ty} {var} = ns_e + ns_q;\n  if (ns_pf_whole4({end}) || {var} < ({end})) {{\n{}{body}  }}\n}}\n",
            needed_decls(self.t, self.decls, uses, self.by_group),
            ty = self.ty,
            var = self.var,
            end = self.end
        )
    }
}

/// A staging loop's declarations that the expressions `uses` need, directly or through one
/// another, each line indented for the slot loop: the loads need the values' names and the
/// stores the targets', so neither copy declares what it never reads (nvcc warns of each).
/// A declaration kept whole stays as written; one kept in part becomes a declaration a name.
fn needed_decls(t: &str, decls: &[Node], uses: &[Node], divisions: &[Division]) -> String {
    // Names as the copies read them: a slot's quotient reads the start too.
    let names_in = |n: Node| -> Vec<String> {
        let inside = divisions.iter().filter(|d| n.start_byte() <= d.range.start && d.range.end <= n.end_byte());
        let starts = inside.flat_map(|d| syntax::identifiers(t, d.start));
        syntax::identifiers(t, n).into_iter().chain(starts).map(str::to_string).collect()
    };
    let mut needed: Vec<String> = uses.iter().flat_map(|u| names_in(*u)).collect();
    let mut keep: Vec<Vec<bool>> = Vec::new();
    for d in decls.iter().rev() {
        let mut c = d.walk();
        let parts: Vec<Node> = d.children_by_field_name("declarator", &mut c).collect();
        let mut kept = vec![false; parts.len()];
        for (i, p) in parts.iter().enumerate().rev() {
            let name = p.child_by_field_name("declarator").filter(|_| p.kind() == "init_declarator").unwrap_or(*p);
            // Only `name = value` declarators are left out; anything else stays.
            if p.kind() != "init_declarator" || needed.iter().any(|n| n == text(t, name)) {
                kept[i] = true;
                needed.extend(names_in(*p));
            }
        }
        keep.push(kept);
    }
    keep.reverse();
    let mut out = String::new();
    for (d, kept) in decls.iter().zip(&keep) {
        if kept.iter().all(|k| *k) {
            out.push_str(&format!("    {}\n", slot_text(t, *d, divisions)));
            continue;
        }
        let ty = syntax::declaration_type(t, *d).unwrap_or_default();
        let mut c = d.walk();
        for (p, k) in d.children_by_field_name("declarator", &mut c).zip(kept) {
            if *k {
                out.push_str(&format!("    {ty} {};\n", slot_text(t, p, divisions)));
            }
        }
    }
    out
}

/// A staging loop's code as a slot's copy reads it: `n`'s text with its divisions by a
/// divisor of the step made per slot ([`Staged::divisions`]).
fn slot_text(t: &str, n: Node, divisions: &[Division]) -> String {
    let range = n.byte_range();
    let mut edits = Edits::new();
    for d in divisions.iter().filter(|d| range.start <= d.range.start && d.range.end <= range.end) {
        edits.replace(d.range.start - range.start..d.range.end - range.start, d.text.clone());
    }
    edits.apply(&t[range.clone()]).unwrap_or_else(|_| text(t, n).to_string())
}

/// A staging loop's code: its declarations, and its stores' targets and values.
fn loop_code<'a, 't>(decls: &'a [Node<'t>], stores: &'a [Store<'t>]) -> impl Iterator<Item = Node<'t>> + 'a {
    decls.iter().copied().chain(stores.iter().flat_map(|s| [s.lhs, s.value]))
}

/// The counter's divisions in a staging loop's code: each `var / D` and `var % D`, D an
/// integer that reads as one wherever it is pasted ([`integer`]), outside any lambda (whose
/// own parameter may be named `var`). Each copy of the loop puts its own quotient and
/// remainder there: per slot ([`Staged::divisions`]), at the tile's corner
/// ([`corner_test`]), per group of four ([`WideText`]).
fn counter_divisions<'t>(
    src: &Source,
    roots: impl IntoIterator<Item = Node<'t>>,
    var: &str,
) -> Vec<(Node<'t>, &'static str, Node<'t>)> {
    let mut found = Vec::new();
    for d in roots.into_iter().flat_map(descendants) {
        let in_lambda = std::iter::successors(d.parent(), |p| p.parent()).any(|p| p.kind() == "lambda_expression");
        if let Some((op, r)) = counter_division(src, d, var).filter(|_| !in_lambda) {
            found.push((d, op, r));
        }
    }
    found
}

/// `d` as `var / D` or `var % D`, its operator and D: the counter itself on the left
/// (`(float)e / D` is no integer division of it), D an integer ([`integer`]).
fn counter_division<'t>(src: &Source, d: Node<'t>, var: &str) -> Option<(&'static str, Node<'t>)> {
    let t = src.text();
    let (op @ ("/" | "%"), l, r) = (d.kind() == "binary_expression").then(|| binary(t, d)).flatten()? else {
        return None;
    };
    let l = strip_parens(l);
    (l.kind() == "identifier" && text(t, l) == var && integer(t, src, r)).then_some((op, r))
}

/// A divisor that reads as one integer wherever it is pasted: an integer literal, or a
/// macro whose text is one (in parentheses or not) or another such macro. A macro of an
/// expression (`#define HALF TILE / 2`) binds differently in `e % HALF` than in
/// `(HALF)`, and a `const` of another type could be a float.
fn integer(t: &str, src: &Source, d: Node) -> bool {
    let d = strip_parens(d);
    match d.kind() {
        "number_literal" => crate::pattern::int_literal(text(t, d)).is_some(),
        "identifier" => integer_macro(&syntax::macro_definitions(t, src.root()), text(t, d), 4),
        _ => false,
    }
}

fn integer_macro(macros: &[(&str, &str)], name: &str, depth: u32) -> bool {
    let values: Vec<&str> = macros.iter().filter(|(n, _)| *n == name).map(|(_, v)| *v).collect();
    !values.is_empty()
        && depth > 0
        && values.iter().all(|v| {
            let v = syntax::blank_comments(v);
            let v = unwrapped(&v);
            crate::pattern::int_literal(v).is_some() || (is_name(v) && integer_macro(macros, v, depth - 1))
        })
}

/// A macro's text without the parentheses that wrap it whole, as it reads in place
/// (`((16))` is `16`).
fn unwrapped(v: &str) -> &str {
    let mut v = v.trim();
    while let Some(inner) = v.strip_prefix('(').and_then(|x| x.strip_suffix(')')) {
        v = inner.trim();
    }
    v
}

/// Whether a text is one name or number token.
fn is_name(v: &str) -> bool {
    !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn indent_lines(block: &str, indent: &str) -> String {
    block.lines().map(|l| if l.is_empty() { "\n".to_string() } else { format!("{indent}{l}\n") }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    /// A tiled GEMM whose k loop stages `stage`, then multiplies and runs `tail` before its
    /// last barrier.
    fn gemm(stage: &str, tail: &str) -> String {
        format!(
            "#define T 16\n__global__ void g(const float* A, const float* B, float* C, int n) {{\n  __shared__ float As[T][T];\n  __shared__ float Bs[T][T];\n  const int tid = threadIdx.y * T + threadIdx.x;\n  float acc = 0.f;\n  for (int k0 = 0; k0 < n; k0 += T) {{\n{stage}\n    __syncthreads();\n    for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];\n{tail}    __syncthreads();\n  }}\n  C[tid] = acc;\n}}\nextern \"C\" void launch(const float* A, const float* B, float* C, int n, cudaStream_t s) {{\n  g<<<1, dim3(T, T), 0, s>>>(A, B, C, n);\n}}\n"
        )
    }

    const STORES: &str =
        "    As[threadIdx.y][threadIdx.x] = A[k0 + tid];\n    Bs[threadIdx.y][threadIdx.x] = B[k0 + tid];";
    const LOOP: &str = "    for (int e = tid; e < T * T; e += 128) {\n      const int r = e / T, c = e % T;\n      As[r][c] = A[(k0 + r) * T + c];\n    }\n    Bs[threadIdx.y][threadIdx.x] = B[k0 + tid];";

    fn run(src: &str) -> Applied {
        let params = Params::default().with("width", "1");
        apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &params)
    }

    fn declines(src: &str) -> String {
        run(src).err().map(|e| e.0).unwrap_or_else(|| panic!("applied to\n{src}"))
    }

    #[test]
    fn stores_are_loaded_a_trip_ahead_and_stored_from_registers() {
        let r = run(&gemm(STORES, "")).unwrap();
        let s = &r.source;
        // The first trip's loads before the loop, under the loop's own start and condition.
        assert!(s.contains("float ns_pf0[1];\n  float ns_pf1[1];\n  {\n    const int k0 = 0;\n    if (k0 < n) {\n      ns_pf0[0] = A[k0 + tid];"), "{s}");
        // The trip stores the registers where it loaded the tiles before...
        assert!(s.contains("  for (int k0 = 0; k0 < n; k0 += T) {\n    As[threadIdx.y][threadIdx.x] = ns_pf0[0];\n    Bs[threadIdx.y][threadIdx.x] = ns_pf1[0];\n    __syncthreads();\n"), "{s}");
        // ...and loads the next trip's after its first barrier, the counter shadowed.
        assert!(s.contains("const int ns_pf_next = k0 + (T);\n      {\n        const int k0 = ns_pf_next;\n        if (k0 < n) {\n          ns_pf0[0] = A[k0 + tid];\n          ns_pf1[0] = B[k0 + tid];"), "{s}");
        assert_eq!(s.matches("A[k0 + tid]").count(), 2, "{s}");
        assert!(declines(s).contains("prefetches its tiles already"));
        assert_eq!(
            r.description,
            "`g`: the `k0` loop loads the next trip's 2 staged values into registers during this trip's work"
        );
    }

    #[test]
    fn a_start_of_looser_operators_is_kept_whole() {
        let shifted = "    for (int r = tid >> 4; r < T; r += 16) {\n      As[r][tid & 15] = A[(k0 + r) * T + (tid & 15)];\n    }\n    Bs[threadIdx.y][threadIdx.x] = B[k0 + tid];";
        let s = run(&gemm(shifted, "")).unwrap().source;
        assert!(s.contains("const int r = (tid >> 4) + ns_i * (16);\n      if (r < (T)) {"), "{s}");
    }

    #[test]
    fn a_staging_loop_gets_one_register_a_trip() {
        let r = run(&gemm(LOOP, "")).unwrap();
        let s = &r.source;
        assert!(
            s.contains("constexpr int ns_pf0_n = ((T * T) + (128) - 1) / (128);\n  float ns_pf0[ns_pf0_n];"),
            "{s}"
        );
        // T divides the step: each slot's row is the thread's plus a constant, its column
        // the thread's; the type stays the one `e / T` had.
        // T divides the step where the code is compiled too (a `-D` may move either).
        let q = "((decltype(e / (T)))((128) % (T) == 0 ? (int)(tid) / (T) + ns_i * ((128) / (T)) : e / (T)))";
        let m = "((decltype(e % (T)))((128) % (T) == 0 ? (int)(tid) % (T) : e % (T)))";
        let rc = format!("const int r = {q}, c = {m};");
        assert!(s.contains(&format!("for (int ns_i = 0; ns_i < ns_pf0_n; ++ns_i) {{\n      const int e = (tid) + ns_i * (128);\n      if (e < (T * T)) {{\n        {rc}\n        As[r][c] = ns_pf0[ns_i];")), "{s}");
        assert!(s.contains("ns_pf0[ns_i] = A[(k0 + r) * T + c];"), "{s}");
        assert!(!s.contains("for (int e = tid"), "{s}");
        // Each copy declares only what it reads: the stores need no source index, the loads
        // no unused name.
        let split = LOOP
            .replace("const int r = e / T, c = e % T;", "const int r = e / T, c = e % T, src = (k0 + r) * T + c;")
            .replace("A[(k0 + r) * T + c]", "A[src]");
        let s = run(&gemm(&split, "")).unwrap().source;
        assert_eq!(s.matches(&rc.replace(";", ", src = (k0 + r) * T + c;")).count(), 2, "{s}");
        assert!(
            s.contains(&format!(
                "        const int r = {q};\n        const int c = {m};\n        As[r][c] = ns_pf0[ns_i];"
            )),
            "{s}"
        );
        // Per slot still: a divisor that does not divide the step, is no constant, is a
        // macro of an expression (`e % HALF` is `(e % T) / 2`) or a constant of a type
        // the file does not show in its literal (it could be a float).
        let odd = LOOP.replace(
            "const int r = e / T, c = e % T;",
            "const int r = e / 48 + e % HALF + e / W, c = e % T + e % n + e / (T);",
        );
        let src = gemm(&odd, "").replace("#define T 16", "#define T 16\n#define HALF T / 2\nconst float W = 4;");
        let s = run(&src).unwrap().source;
        let paren = q.replace("(T)", "((T))");
        assert!(s.contains(&format!("const int r = e / 48 + e % HALF + e / W, c = {m} + e % n + {paren};")), "{s}");
        assert!(!s.contains("% (HALF)") && !s.contains("/ (W)") && !s.contains("/ (48)"), "{s}");
    }

    #[test]
    fn it_declines_where_a_value_could_change_before_its_trip_or_the_trips_are_unbounded() {
        let cases = [
            // The work writes global memory the staging may read.
            (gemm(STORES, "    C[tid] = acc;\n"), "writes `C`, which is not a local"),
            (gemm(STORES, "    *C = acc;\n"), "writes through a pointer"),
            (gemm(STORES, "    atomicAdd(C, acc);\n"), "calls `atomicAdd`"),
            // The staging reads a shared array or a variable the loop changes.
            (gemm("    As[threadIdx.y][threadIdx.x] = Bs[0][tid];", ""), "reads the shared array `Bs`"),
            (gemm("    As[threadIdx.y][threadIdx.x] = A[k0 + (int)acc];", ""), "reads `acc`, which the loop changes"),
            // A loop without a bound on its trips per thread.
            (gemm(&LOOP.replace("e = tid;", "e = tid - 1;"), ""), "not shown to be between 0 and what an `int` holds"),
            (gemm(&LOOP.replace("e = tid;", "e = tid + 4294967295u;"), ""), "not shown to be between 0"),
            (gemm(&LOOP.replace("e = tid;", "e = tid + blockIdx.x;"), ""), "not shown to be between 0"),
            (gemm(&LOOP.replace("e < T * T", "e < n"), ""), "bound `n` or step `128` is not an integer constant"),
            (gemm(&LOOP.replace("e += 128", "e += blockDim.x * blockDim.y"), ""), "is not an integer constant"),
            (gemm(&LOOP.replace("e < T * T", "e < 200.5"), ""), "is not an integer constant"),
            // Writes the recipe cannot follow: through a struct, a typedef'd pointer, a
            // shared pointer, a constructor, inline assembly; reads through a local pointer.
            (
                gemm(STORES, "")
                    .replace("float acc = 0.f;", "float acc = 0.f;\n  struct O { float* p; } o = {C};")
                    .replace("    __syncthreads();\n  }", "    o.p[tid] = acc;\n    __syncthreads();\n  }"),
                "writes `o`, which is not a local",
            ),
            (
                format!("typedef float* fptr;\n{}", gemm(STORES, ""))
                    .replace("float acc = 0.f;", "float acc = 0.f;\n  fptr o = C;")
                    .replace("    __syncthreads();\n  }", "    o[tid] = acc;\n    __syncthreads();\n  }"),
                "writes `o`, which is not a local",
            ),
            (
                gemm(STORES, "")
                    .replace("float acc = 0.f;", "float acc = 0.f;\n  __shared__ float* sp;")
                    .replace("    __syncthreads();\n  }", "    sp[tid] = acc;\n    __syncthreads();\n  }"),
                "writes `sp`",
            ),
            (gemm(STORES, "    Writer w(C, acc);\n"), "of a type whose construction could write"),
            (
                gemm(STORES, "    asm volatile(\"st.global.f32 [%0], %1;\" :: \"l\"(C), \"f\"(acc));\n"),
                "inline assembly",
            ),
            (
                gemm("    As[threadIdx.y][threadIdx.x] = q[tid];", "")
                    .replace("float acc = 0.f;", "float acc = 0.f;\n  const float* q = &Bs[0][0];"),
                "reads `q`, which could point anywhere",
            ),
            // A staging's own names count from their declarators on; names the rewrite declares
            // are free.
            (
                gemm(&LOOP.replace("const int r = e / T", "const int r = e / T + (int)acc, acc = 0"), ""),
                "reads `acc`, which the loop changes",
            ),
            (
                gemm("    As[threadIdx.y][threadIdx.x] = A[k0 + ns_i];", "")
                    .replace("float acc = 0.f;", "float acc = 0.f;\n  const int ns_i = 3;"),
                "a name of its own, `ns_i`",
            ),
            (gemm(STORES, "").replace("const float* A,", "const volatile float* A,"), "the `volatile` parameter `A`"),
            (
                gemm(STORES, "")
                    .replace(
                        "float acc = 0.f;",
                        "float acc = 0.f;\n  auto min = [&](int a, int b) { acc += 1.f; return a; };",
                    )
                    .replace("    __syncthreads();\n  }", "    acc += min(1, 2);\n    __syncthreads();\n  }"),
                "it calls `min`",
            ),
            // Trips that may end early, a staging that is no store.
            (gemm(STORES, "    if (acc > 1.f) break;\n"), "`break` may end a trip early"),
            (gemm("    if (tid < T) As[0][tid] = A[k0 + tid];", ""), "is no store to a tile"),
            (
                gemm(STORES, "").replace("int k0 = 0", "int k0 = (int)atomicAdd(C, 1.f)"),
                "its start has `atomicAdd(C, 1.f)`",
            ),
            (gemm(STORES, "").replace("int k0 = 0", "int k0 = n--"), "reads `n`, which the kernel reassigns"),
            (gemm("    As[threadIdx.y][threadIdx.x] = A[k0++];", ""), "changes the counter `k0`"),
        ];
        for (src, want) in cases {
            let why = declines(&src);
            assert!(why.contains(want), "want `{want}`, got: {why}");
        }
        // After the second review: aliases and bindings the names do not show, macros that
        // name or build a callee, narrow or late-declared bounds, register-hungry loops.
        let more = [
            (
                gemm(STORES, "").replace("float acc = 0.f;", "float acc = 0.f;\n  A += 1;"),
                "reads `A`, which the kernel reassigns",
            ),
            (
                gemm(
                    &LOOP.replace(
                        "const int r = e / T, c = e % T;\n      As[r][c] = A[(k0 + r) * T + c];",
                        "As[e / T][e % T] = A[k0 + e];\n      const int r = e / T;",
                    ),
                    "",
                ),
                "declares after it stores",
            ),
            (
                format!(
                    "__device__ float fmaxf(float* p, float v) {{ *p = v; return v; }}\n{}",
                    gemm(STORES, "    acc = fmaxf(C, acc);\n")
                ),
                "it calls `fmaxf`",
            ),
            (gemm(&LOOP.replace("int e = tid", "short e = tid"), ""), "a `short`, not an integer of 32 bits"),
            (
                gemm(STORES, "    for (float& v : acc4) v = 0.f;\n")
                    .replace("float acc = 0.f;", "float acc = 0.f, acc4[4];"),
                "binds a name that may alias anything",
            ),
            (gemm(&LOOP.replace("e < T * T", "e < 100000"), ""), "would hold as many registers"),
            (
                gemm(STORES, "")
                    .replace("__global__ void g(", "template <int U>\n__global__ void g(")
                    .replace("g<<<", "g<1><<<"),
                "is a template",
            ),
            (format!("#define WR atomicAdd\n{}", gemm(STORES, "    WR(C, acc);\n")), "it calls `WR`"),
            (
                format!("#define WR(p, v) put<float>(p, v)\n{}", gemm(STORES, "    WR(C, acc);\n")),
                "`WR`, whose text holds a call",
            ),
            (
                format!("#define WR(p, v) (put)(p, v)\n{}", gemm(STORES, "    WR(C, acc);\n")),
                "`WR`, whose text holds a call",
            ),
            (format!("#define CAT(a, b) a##b\n{}", gemm(STORES, "    CAT(atomic, Add)(C, acc);\n")), "token pasting"),
        ];
        for (src, want) in more {
            let why = declines(&src);
            assert!(why.contains(want), "want `{want}`, got: {why}");
        }
        // A macro whose text holds a character outside ASCII is read, not sliced inside it.
        let _ = run(&format!("#define TAG(x) (x + sizeof(\"\u{b5}(\"))\n{}", gemm(STORES, "    acc += TAG(1);\n")));
        // Macros the loop names are read as the code they stand for.
        let macros = [
            ("#define OUT C[tid] = acc\n", "    OUT;\n", "`OUT`, whose text holds an assignment"),
            ("#define HALVE(v) (v >>= 1)\n", "    HALVE(acc);\n", "`HALVE`, whose text holds an assignment"),
            ("#define BUMP (acc++)\n#define STEP (BUMP + 1)\n", "    STEP;\n", "`BUMP`, whose text holds an increment"),
            ("#define DONE if (acc > 1.f) break\n", "    DONE;\n", "`DONE`, whose text holds a jump"),
            ("#define ADD(p, v) atomicAdd(p, v)\n", "    ADD(C, acc);\n", "`ADD`, whose text holds a call"),
        ];
        for (def, tail, want) in macros {
            let why = declines(&format!("{def}{}", gemm(STORES, tail)));
            assert!(why.contains(want), "want `{want}`, got: {why}");
        }
        // Comparisons and arithmetic in a macro are fine.
        let fine = format!(
            "#define IDX(r, c) ((r) * T + (c) >= 0 && (c) <= T ? (r) * T + (c) : 0)\n{}",
            gemm(STORES.replace("k0 + tid", "IDX(k0, tid)").as_str(), "")
        );
        assert!(run(&fine).is_ok(), "{}", declines(&fine));
        let one_barrier = gemm(STORES, "").replacen("    __syncthreads();\n  }", "  }", 1);
        assert!(declines(&one_barrier).contains("does not end in a second `__syncthreads();`"));
    }

    fn wide(src: &str) -> Applied {
        let params = Params::default().with("width", "4");
        apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &params)
    }

    fn wide_declines(src: &str) -> String {
        wide(src).err().map(|e| e.0).unwrap_or_else(|| panic!("applied to\n{src}"))
    }

    #[test]
    fn four_elements_a_load_where_the_block_votes_the_tile_into_its_thread_order() {
        let s = wide(&gemm(LOOP, "")).unwrap().source;
        // One vote before the loop, then the loop once a mapping.
        assert!(s.contains("const bool ns_pf_map = __syncthreads_and((tid) == ns_pf_lin && (128) == ns_pf_threads) != 0;\n  if (ns_pf_map) {"), "{s}");
        assert_eq!(s.matches("for (int k0 = 0; k0 < n; k0 += T) {").count(), 2, "{s}");
        // Thread i's groups of four, loaded at once where the trip's test passes.
        assert!(s.contains("const int ns_e = 4 * (ns_pf_lin + ns_g * (128));"), "{s}");
        assert!(s.contains("const auto ns_v0 = ns_pf_load4(&(A[(k0 + r) * T + c]));"), "{s}");
        assert!(s.contains("for (int ns_q = 0; ns_q < 4; ++ns_q) ns_pf0[4 * ns_g + ns_q] = ns_v0.v[ns_q];"), "{s}");
        // The test: whole groups, a quotient the group never crosses, the first element
        // aligned (`k0 * T` and the row's `T` multiples of 4, the pointer of 16 bytes).
        for part in [
            "ns_pf_whole4(T * T)",
            "(T) % 4 == 0",
            "(1LL * (long long)(T) * (long long)(k0)) % 4 == 0",
            "(1LL * (long long)(T)) % 4 == 0",
            "sizeof((A)[0]) == 4 && reinterpret_cast<uintptr_t>(A) % 16 == 0",
        ] {
            assert!(s.contains(part), "{part}\n{s}");
        }
        // The stores of the same elements by the same thread, each element's row and column
        // its group's (a group of four never crosses a row where 4 divides its length).
        assert!(s.contains("const int e = ns_e + ns_q;\n"), "{s}");
        assert!(s.contains("if (ns_pf_whole4(T * T) || e < (T * T)) {"), "{s}");
        let by_group = "const int r = ((decltype(e / (T)))((T) > 0 && (T) % 4 == 0 ? ns_e / (T) : e / (T))), \
                        c = ((decltype(e % (T)))((T) > 0 && (T) % 4 == 0 ? ns_e % (T) + ns_q : e % (T)));";
        // The loads' fallback (before the loop and a trip ahead) and the stores.
        assert_eq!(s.matches(by_group).count(), 3, "{s}");
        // The single store stays as it is in both copies; the other copy is the narrow one.
        assert_eq!(s.matches("Bs[threadIdx.y][threadIdx.x] = ns_pf1[0];").count(), 2, "{s}");
        assert_eq!(s.matches("const int e = (tid) + ns_i * (128);").count(), 3, "{s}");
        // Where END is no multiple of 4, the last group's elements past it are neither loaded
        // nor stored.
        let ragged = wide(&gemm(&LOOP.replace("e < T * T", "e < T * T - 2"), "")).unwrap().source;
        let put = "const int e = ns_e + ns_q;\n            if (ns_pf_whole4(T * T - 2) || e < (T * T - 2)) {\n              const int r = ((decltype(e / (T)))((T) > 0 && (T) % 4 == 0 ? ns_e / (T) : e / (T))), c = ((decltype(e % (T)))((T) > 0 && (T) % 4 == 0 ? ns_e % (T) + ns_q : e % (T)));\n              As[r][c] = ns_pf0[4 * ns_g + ns_q];";
        assert!(ragged.contains(put), "{ragged}");
    }

    #[test]
    fn the_trip_test_reads_each_condition_where_the_tile_is_largest() {
        let guarded = LOOP.replace(
            "As[r][c] = A[(k0 + r) * T + c];",
            "As[r][c] = (k0 + r < n && c < n) ? A[(k0 + r) * T + c] : 0.f;",
        );
        let s = wide(&gemm(&guarded, "")).unwrap().source;
        assert!(
            s.contains("const int r = (((T * T) - 1) / (T)), c = (((T * T) - 1) < (T) - 1 ? ((T * T) - 1) : (T) - 1);"),
            "{s}"
        );
        assert!(s.contains("((k0 + r < n && c < n))"), "{s}");
        // The loaded value converts as the original's `?:` would.
        assert!(s.contains("ns_pf0[4 * ns_g + ns_q] = true ? ns_v0.v[ns_q] : (0.f);"), "{s}");
        // Where the test fails, element by element as written.
        assert!(s.contains("ns_pf0[4 * ns_g + ns_q] = (k0 + r < n && c < n) ? A[(k0 + r) * T + c] : 0.f;"), "{s}");
    }

    #[test]
    fn four_elements_a_load_decline_with_the_reason() {
        let staged = |value: &str| gemm(&LOOP.replace("A[(k0 + r) * T + c]", value), "");
        for (value, why) in [
            ("A[(k0 + c) * T + r]", "is not shown to step by 1"),
            ("A[2 * c]", "is not shown to step by 1"),
            ("A[c * n]", "is not shown to step by 1"),
            ("A[c] * 2.f", "is not `P[i]` or `COND ? P[i] : VALUE`"),
            ("(c != 3) ? A[c] : 0.f", "is not `&&` of `<` or `<=`"),
            ("(c >= 1) ? A[c] : 0.f", "is not shown to hold on the whole tile"),
            ("(r * n < k0) ? A[c] : 0.f", "is not shown to hold on the whole tile"),
            ("(c < n) ? A[c] : A[r]", "reads `r`, which the staging loop declares"),
        ] {
            let e = wide_declines(&staged(value));
            assert!(e.contains("`width=4` does not hold") && e.contains(why), "{value}: {e}");
            // The narrow rewrite still holds.
            assert!(run(&staged(value)).is_ok(), "{value}");
        }
        // A condition of unsigned or narrow values may wrap: the largest element's test
        // says nothing of the others.
        for (decl, cond) in [
            ("const int r = e / T, c = e % T;", "((size_t)(k0 + r) < (size_t)n)"),
            ("const int r = e / T, c = e % T;", "(c < 9u)"),
            ("const int r = e / T, c = e % T; const unsigned char lo = e;", "(lo < n)"),
        ] {
            let staging = LOOP
                .replace("const int r = e / T, c = e % T;", decl)
                .replace("A[(k0 + r) * T + c]", &format!("{cond} ? A[(k0 + r) * T + c] : 0.f"));
            assert!(wide_declines(&gemm(&staging, "")).contains("is not shown to hold on the whole tile"), "{cond}");
        }
        // A trip that reads which thread runs it, or a target two trips share, cannot move.
        let by_thread = gemm(&LOOP.replace("As[r][c]", "As[r][threadIdx.x]"), "");
        assert!(
            wide_declines(&by_thread).contains("reads `threadIdx`, which is not shown to be the same on every thread")
        );
        let via_local = gemm(&LOOP.replace("A[(k0 + r) * T + c]", "A[(k0 + r) * T + c + tid % 2]"), "");
        assert!(wide_declines(&via_local).contains("reads `tid`, which is not shown to be the same on every thread"));
        let shared_target = gemm(&LOOP.replace("As[r][c]", "As[0][c]"), "");
        assert!(wide_declines(&shared_target).contains("is not shown to write a different element each trip"));
        // A macro of an expression is no one value: `r * OFF` is `r * T + 1`.
        let expr_macro = gemm(&LOOP.replace("A[(k0 + r) * T + c]", "A[r * OFF + c]"), "")
            .replace("#define T 16", "#define T 16\n#define OFF T + 1");
        assert!(wide_declines(&expr_macro).contains("is not shown to step by 1"));
        let parenthesized = expr_macro.replace("#define OFF T + 1", "#define OFF (T + 4)");
        assert!(wide(&parenthesized).is_ok(), "{}", wide_declines(&parenthesized));
        let capture = gemm(LOOP, "").replace("  float acc = 0.f;\n", "  float acc = 0.f;\n  const int ns_q = n;\n");
        assert!(wide_declines(&capture).contains("`ns_q`, that the wide copy would shadow"));
        // A second review's cases: a macro of the thread index, an unsigned counter or
        // bound, a large hexadecimal literal (unsigned), two stores to one tile, and a
        // name read before the loop declares its own.
        let via_macro = gemm(&LOOP.replace("A[(k0 + r) * T + c]", "A[(k0 + r) * T + c + TX % 2]"), "")
            .replace("#define T 16", "#define T 16\n#define TX threadIdx.x");
        assert!(wide_declines(&via_macro).contains("reads `TX`, which is not shown to be the same on every thread"));
        let unsigned_counter = gemm(
            &LOOP
                .replace("for (int e = tid;", "for (unsigned e = tid;")
                .replace("A[(k0 + r) * T + c]", "(e < 200) ? A[(k0 + r) * T + c] : 0.f"),
            "",
        );
        assert!(wide_declines(&unsigned_counter).contains("is not shown to hold on the whole tile"));
        let unsigned_bound = gemm(&LOOP.replace("A[(k0 + r) * T + c]", "(c < m) ? A[(k0 + r) * T + c] : 0.f"), "")
            .replace("float* C, int n)", "float* C, int n, unsigned m)");
        assert!(wide_declines(&unsigned_bound).contains("is not shown to hold on the whole tile"));
        let hex = gemm(&LOOP.replace("A[(k0 + r) * T + c]", "(c < 0x80000000) ? A[(k0 + r) * T + c] : 0.f"), "");
        assert!(wide_declines(&hex).contains("is not shown to hold on the whole tile"));
        let twice = gemm(&format!("{LOOP}\n    As[0][0] = A[k0];"), "");
        assert!(wide_declines(&twice).contains("`As` is staged by more than one store"));
        let early_name =
            gemm(&LOOP.replace("const int r = e / T, c = e % T;", "const int r = e / T + c, c = e % T;"), "")
                .replace("  float acc = 0.f;\n", "  float acc = 0.f;\n  const int c = 0;\n");
        assert!(wide_declines(&early_name).contains("reads `c`"));
        let single = gemm(
            "    As[threadIdx.y][threadIdx.x] = A[k0 + tid];\n    Bs[threadIdx.y][threadIdx.x] = B[k0 + tid];",
            "",
        );
        assert!(wide_declines(&single).contains("a single store has no neighbours"));
        let early = gemm(LOOP, "").replace("  float acc = 0.f;\n", "  float acc = 0.f;\n  if (n < 0) return;\n");
        assert!(
            wide_declines(&early).contains("`return;` before the loop may leave some threads out of the block's vote")
        );
        let shared = gemm(LOOP, "").replace(
            "    __syncthreads();\n    for (int k = 0",
            "    __syncthreads();\n    __shared__ float extra[4];\n    for (int k = 0",
        );
        assert!(wide_declines(&shared).contains("declares a `__shared__` variable"));
        let params = Params::default().with("width", "2");
        let e = apply(&Source::parse(&gemm(LOOP, "")), &FactsBuilder::new("launch").build(), &params).unwrap_err();
        assert_eq!(e.0, "`width=2`: expected auto, 1 or 4");
    }

    #[test]
    fn only_the_counter_itself_divided_takes_the_slots_or_the_groups_quotient() {
        // `(float)e / 16` is a float division: it stays as written in every copy.
        let cast = LOOP.replace(
            "      As[r][c] = A[(k0 + r) * T + c];",
            "      const float u = (float)e / 16;\n      As[r][c] = (e < n) ? A[(k0 + r) * T + c] : u;",
        );
        let s = run(&gemm(&cast, "")).unwrap().source;
        assert!(s.contains("const float u = (float)e / 16;"), "{s}");
        assert!(!s.contains("decltype(e / (16))"), "{s}");
        // The counter divided as written still is.
        let plain = cast.replace("(float)e / 16", "e / 16");
        let s = run(&gemm(&plain, "")).unwrap().source;
        assert!(s.contains("decltype(e / (16))"), "{s}");
    }

    #[test]
    fn a_bound_that_is_no_integer_is_never_taken_for_a_multiple_of_4() {
        // `%` on a float bound would not compile; the helper answers false for it.
        let s = wide(&gemm(LOOP, "")).unwrap().source;
        assert!(!s.contains("(T * T) % 4"), "{s}");
        assert!(s.contains("ns_pf_whole4(T * T)"), "{s}");
        assert!(crate::helpers::PREFETCH_WHOLE.text.contains("std::is_integral<T>::value"));
        assert!(s.contains("NIGHTSHIFT_PREFETCH_WHOLE"), "{s}");
    }

    #[test]
    fn the_default_width_is_four_where_it_holds_and_one_with_the_reason_elsewhere() {
        let default =
            |src: &str| apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &Params::default()).unwrap();
        let looped = gemm(LOOP, "");
        let (auto, four) = (default(&looped), wide(&looped).unwrap());
        assert_eq!(auto.source, four.source);
        assert!(auto.source.contains("ns_pf_map"), "{}", auto.source);
        // One element a load where four do not hold (a staging read of `threadIdx`), the
        // reason in the note.
        let moving = gemm(&LOOP.replace("A[(k0 + r) * T + c]", "A[(k0 + r) * T + c + threadIdx.x]"), "");
        let (auto, one) = (default(&moving), run(&moving).unwrap());
        assert_eq!(auto.source, one.source);
        assert!(!auto.source.contains("ns_pf_map"), "{}", auto.source);
        let note = &auto.description;
        assert!(note.contains("one element a load (`width=4` does not hold for the loop at line 7:"), "{note}");
        assert!(note.contains("threadIdx"), "{note}");
    }
}
