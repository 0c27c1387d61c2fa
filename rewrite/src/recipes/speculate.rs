//! Conditional reads made once per run, for `vectorize`: per-element code that reads a
//! `const` buffer at an address that holds one value over the run ([`super::uniform`]),
//! under a condition of its own (a causal convolution's weight `w[d * 4 + k]` under its
//! tap's `if (t - 3 + k >= 0)`), is read ahead of that condition into a local, and the
//! condition then uses the local. Each of the V element copies now makes the same load
//! unconditionally, so the compiler makes it once per run; under the conditions it stayed
//! V loads, each under a predicate of its own.
//!
//! Why it is safe: the read moves only past code of its own statement that writes no
//! memory, and it may now happen where the original did not read, so its address must lie
//! in the buffer whatever the conditions say. That is proved from the index, not from the
//! conditions: every term is bounded ([`Bound`]: parameters, literals, the file's integer
//! constants, counters of loops with such bounds, `x % m` of a non-negative `x`, sums,
//! products by constants, quotients), and the launcher checks the bound against the
//! task's length of the buffer, along with the signs, divisors and integer widths the
//! bound relies on. The load goes through `__ldg` (a plain one is sunk back under each
//! condition), so the launcher also checks that no buffer the kernel writes overlaps it.
//! A read under a condition that names its buffer (`p != nullptr ? p[d] : 0`) is left as
//! it is. `ns_disjoint` covers only the buffers behind the kernel's parameters, so nothing
//! moves in a kernel that may store elsewhere: through a local pointer, a cast, an array
//! of pointers, or a call not known to write nothing (the calls taken are math,
//! conversions, loads, shuffles and barriers by name; a macro, a template, a qualified
//! name, a function of the file or a store intrinsic may write).

use super::uniform::RunUniform;
use crate::facts::Facts;
use crate::source::{Kernel, Source};
use crate::syntax::{self, descendants, named_children, strip_parens, text};
use std::ops::Range;
use tree_sitter::Node;

/// How deep locals are followed.
const MAX_DEPTH: usize = 12;
/// The largest constant factor taken, so that the launcher's bounds stay far from
/// `long long`'s end.
const MOST_FACTOR: i64 = 1 << 20;
/// The most bits a bound may need in the launcher's `long long` arithmetic.
const MOST_BITS: u32 = 62;

/// The element types `__ldg` has an overload for (CUDA 13's `sm_32_intrinsics.h` and the
/// half and bfloat16 headers).
const LDG_TYPES: &[&str] = &[
    "char",
    "signed char",
    "unsigned char",
    "short",
    "unsigned short",
    "int",
    "unsigned",
    "unsigned int",
    "long",
    "unsigned long",
    "long long",
    "unsigned long long",
    "int8_t",
    "uint8_t",
    "int16_t",
    "uint16_t",
    "int32_t",
    "uint32_t",
    "int64_t",
    "uint64_t",
    "float",
    "double",
    "__half",
    "half",
    "__half2",
    "half2",
    "__nv_bfloat16",
    "nv_bfloat16",
    "__nv_bfloat162",
    "nv_bfloat162",
    "char2",
    "char4",
    "uchar2",
    "uchar4",
    "short2",
    "short4",
    "ushort2",
    "ushort4",
    "int2",
    "int4",
    "uint2",
    "uint4",
    "float2",
    "float4",
    "double2",
    "longlong2",
    "ulonglong2",
];

/// One read made ahead of its condition.
pub(super) struct Speculated {
    pub name: String,
    /// The read `p[I]`.
    pub site: Range<usize>,
    /// Where its load goes: before the statement that holds the read.
    pub at: usize,
    /// The local that holds the value.
    pub local: String,
    /// The element type.
    pub base: String,
}

impl Speculated {
    /// The declaration inserted at `at`, the read's text (edits inside it made) given.
    /// Through the read-only path: the compiler makes an `ld.global.nc` of one address
    /// once for all the element copies, where a plain load is sunk back under each
    /// element's condition. The launcher checks no buffer the kernel writes overlaps it.
    pub fn declaration(&self, read: &str, indent: &str) -> String {
        format!("const {} {} = __ldg(&{read});\n{indent}", self.base, self.local)
    }
}

/// The conditional reads of `const` buffers (not in `taken`) in `per_elem` that can be
/// made once per run, and the launcher's checks they need. `busy`: places other edits
/// insert at (a loop's `#pragma unroll`), where no load may go.
#[allow(clippy::too_many_arguments)]
pub(super) fn find(
    src: &Source,
    facts: &Facts,
    k: &Kernel,
    body: Node,
    per_elem: &[Range<usize>],
    uniform: &RunUniform,
    taken: &[String],
    busy: &[usize],
) -> (Vec<Speculated>, Vec<String>) {
    let t = src.text();
    let declared = syntax::declared_names(t, body);
    let macros: Vec<(String, i64)> = top_level_constants(src, k.range.start)
        .into_iter()
        .filter(|(m, _)| !declared.contains(m) && k.param(m).is_none())
        .collect();
    let function_macros = function_macros(src);
    let locals: Vec<Node> = descendants(body).into_iter().filter(|d| d.kind() == "declaration").collect();
    let mut out: Vec<Speculated> = Vec::new();
    let mut guards: Vec<String> = Vec::new();
    // `ns_disjoint` covers the buffers the kernel's parameters point to; a store through
    // any other pointer could reach the buffer behind the read-only path's back.
    if !stores_only_through_parameters(t, k, body, &function_macros) {
        return (out, guards);
    }
    for n in descendants(body) {
        if n.kind() != "subscript_expression"
            || !per_elem.iter().any(|r| r.start <= n.start_byte() && n.end_byte() <= r.end)
        {
            continue;
        }
        let Some(p) = n.child_by_field_name("argument").filter(|p| p.kind() == "identifier") else { continue };
        let name = text(t, p);
        let Some(param) = k.param(name).filter(|q| q.pointer && q.is_const && !q.decl.contains("volatile")) else {
            continue;
        };
        if !LDG_TYPES.contains(&syntax::unqualified(&param.base).as_str()) {
            continue;
        }
        if taken.iter().any(|x| x == name) || !super::gather::is_value_read(n) {
            continue;
        }
        let Some(index) = crate::pattern::subscript_index(n) else { continue };
        let constants: Vec<&str> = macros.iter().map(|(m, _)| m.as_str()).collect();
        let counters = counters_around(t, uniform, n, body, &constants);
        let mut also: Vec<&str> = counters.iter().map(|c| c.var.as_str()).collect();
        also.extend(&constants);
        if !uniform.expr(p, &[]) || !uniform.expr(index, &also) {
            continue;
        }
        let fits = |p: &Place| {
            p.conditional
                && !p.conditions.iter().any(|c| syntax::mentions(t, *c, name))
                && !busy.contains(&p.at)
                && !writes_memory(t, p.stmt, &function_macros)
                && in_scope(t, &locals, index, p.at, &counters)
        };
        let Some(place) = places_of(t, n, per_elem).into_iter().find(fits) else { continue };
        let mut b = Bound { t, k, locals: &locals, uniform, macros: &macros, counters: &counters, guards: Vec::new() };
        let Some(v) = b.value(index, 0) else { continue };
        let Some(hi) = v.hi else { continue };
        let Some(len) = super::window::launcher_length(src, facts, k, name) else { continue };
        let Some(disjoint) = super::gather::disjoint_guards(src, facts, k, &[name.to_string()]) else { continue };
        let mut mine = b.guards;
        // `x >= 1` says `x >= 0` too.
        let implied: Vec<String> =
            mine.iter().filter_map(|g| g.strip_suffix(" >= 1")).map(|x| format!("{x} >= 0")).collect();
        mine.retain(|g| !implied.contains(g));
        mine.push(format!("({{{name}}}) != nullptr"));
        mine.push(format!("{hi} < (long long)({len})"));
        mine.extend(disjoint);
        for g in mine {
            if !guards.contains(&g) {
                guards.push(g);
            }
        }
        // A name new to the file (a kernel rewritten before may hold one already).
        let local = (out.len()..)
            .map(|i| format!("ns_spec_{name}_{i}"))
            .find(|l| !syntax::mentions_word(t, l))
            .unwrap_or_default();
        out.push(Speculated {
            name: name.to_string(),
            site: n.byte_range(),
            at: place.at,
            local,
            base: syntax::unqualified(&param.base),
        });
    }
    if out.is_empty() {
        guards.clear();
    }
    (out, guards)
}

/// A place a read's load may go: before a statement of a block inside the per-element
/// code that holds the read, with the conditions between that statement and the read.
struct Place<'t> {
    stmt: Node<'t>,
    at: usize,
    /// The read may not happen where the statement runs.
    conditional: bool,
    conditions: Vec<Node<'t>>,
}

/// The places for a read, the outermost first (the fewer loads the compiler keeps).
fn places_of<'t>(t: &str, n: Node<'t>, per_elem: &[Range<usize>]) -> Vec<Place<'t>> {
    let mut out = Vec::new();
    let mut conditions = Vec::new();
    let mut conditional = false;
    let mut x = n;
    while let Some(up) = x.parent() {
        match up.kind() {
            "if_statement" | "conditional_expression" => {
                let Some(cond) = up.child_by_field_name("condition") else { break };
                if cond.id() != x.id() {
                    conditional = true;
                    conditions.push(cond);
                }
            }
            "binary_expression" => {
                let op = up.child_by_field_name("operator").map(|o| o.kind());
                let right = up.child_by_field_name("right").is_some_and(|r| r.id() == x.id());
                if let (Some("&&" | "||"), true, Some(left)) = (op, right, up.child_by_field_name("left")) {
                    conditional = true;
                    conditions.push(left);
                }
            }
            "lambda_expression" | "switch_statement" | "case_statement" => break,
            "compound_statement" => {
                if !per_elem.iter().any(|r| r.start <= x.start_byte() && x.end_byte() <= r.end) {
                    break;
                }
                // Before the statement and before the pragmas that bind it to a loop.
                let mut at = x.start_byte();
                let mut before = x.prev_sibling();
                while let Some(b) = before.filter(|b| b.kind() == "preproc_call" && text(t, *b).contains("pragma")) {
                    at = b.start_byte();
                    before = b.prev_sibling();
                }
                out.push(Place { stmt: x, at, conditional, conditions: conditions.clone() });
            }
            // A loop's header runs whether or not its body does.
            k if syntax::is_loop(up)
                && k != "switch_statement"
                && up.child_by_field_name("body").is_some_and(|b| b.id() == x.id()) =>
            {
                conditional = true;
                conditions.extend(up.child_by_field_name("condition"));
            }
            _ => {}
        }
        x = up;
    }
    out.reverse();
    out
}

/// Whether `stmt` may write memory: a store through a subscript, a pointer or a field, or
/// any call not known to write nothing ([`pure_call`]): an atomic, a store intrinsic, a
/// function of the file, a macro, a library call.
fn writes_memory(t: &str, stmt: Node, function_macros: &[&str]) -> bool {
    descendants(stmt).into_iter().any(|d| match d.kind() {
        "assignment_expression" => d.child_by_field_name("left").is_none_or(|l| strip_parens(l).kind() != "identifier"),
        "update_expression" => d.child_by_field_name("argument").is_none_or(|a| strip_parens(a).kind() != "identifier"),
        "call_expression" => !pure_call(t, d, function_macros),
        "gnu_asm_expression" | "new_expression" | "delete_expression" => true,
        _ => false,
    })
}

/// Functions known to write no memory: math, conversions, loads, warp votes and
/// shuffles, barriers, and the rewrite's own division and pick helpers.
const PURE_FUNCTIONS: &str =
    "min max abs fabs fabsf fmax fmaxf fmin fminf exp expf exp2f exp10f expm1f log logf log2f \
    log10f log1pf sqrt sqrtf rsqrt rsqrtf cbrtf pow powf sin sinf cos cosf tan tanf tanh \
    tanhf erf erff erfcf floor floorf ceil ceilf rint rintf lrintf llrintf round roundf \
    lroundf trunc truncf fma fmaf fmodf remainderf copysignf isnan isinf isfinite signbit \
    __expf __logf __sinf __cosf __tanf __powf __exp10f __log2f __log10f __saturatef \
    __syncthreads __syncwarp __threadfence __threadfence_block __ballot_sync __any_sync \
    __all_sync __activemask __popc __popcll __clz __clzll __ffs __ffsll __brev __byte_perm \
    __umulhi __mulhi __umul64hi __mul64hi __mul24 __umul24 __dp4a __dp2a_lo __dp2a_hi ns_div \
    ns_mod ns_pick ns_erf_fast ns_tanh_approx";

/// Prefixes of intrinsics that only compute a value: conversions, reinterpretations,
/// half and bfloat16 arithmetic, rounded float arithmetic, loads, shuffles, vector makers.
const PURE_PREFIXES: &str = "__float2 __floats2 __half2 __halves2 __bfloat162 __int2 __uint2 __ll2 __ull2 __double2 \
    __short2 __ushort2 __float_as_ __int_as_ __uint_as_ __double_as_ __longlong_as_ \
    __short_as_ __ushort_as_ __bfloat16_as_ __half_as_ __nv_cvt_ __h __f __ldg __ldca __ldcg \
    __ldcs __ldlu __ldcv __shfl make_";

/// A call known to write no memory: a plain name on the lists above that the file does
/// not define as a macro. Anything else (a qualified or template name, a member, a macro,
/// a function of the file, a library call) may write.
fn pure_call(t: &str, call: Node, function_macros: &[&str]) -> bool {
    let Some(f) = call.child_by_field_name("function").filter(|f| f.kind() == "identifier") else { return false };
    let name = text(t, f);
    !function_macros.contains(&name) && value_builtin(name)
}

/// A CUDA built-in (or a helper of the rewrite's) on the lists above: it computes a value
/// from its arguments and touches no memory but what it loads.
pub(super) fn value_builtin(name: &str) -> bool {
    PURE_FUNCTIONS.split_whitespace().any(|p| p == name)
        || PURE_PREFIXES.split_whitespace().any(|p| name.starts_with(p))
}

/// Whether every store the kernel makes goes to a local or through a pointer parameter
/// (`p[i] = v`, `*(p + i) = v`, `atomicAdd(&p[i], v)`, a local or `__shared__` array):
/// no store through a pointer loaded from memory or made elsewhere, no asm, no call of a
/// function the file defines.
fn stores_only_through_parameters(t: &str, k: &Kernel, body: Node, function_macros: &[&str]) -> bool {
    // Arrays of values (`float s[32]`), not of pointers (`float* ps[2]`): a store through
    // an element of the latter goes wherever that pointer points.
    let arrays: Vec<String> = descendants(body)
        .into_iter()
        .filter(|d| d.kind() == "declaration")
        .filter(|d| d.child_by_field_name("type").is_some_and(|ty| syntax::type_size(text(t, ty)).is_some()))
        .flat_map(|d| {
            descendants(d)
                .into_iter()
                .filter(|x| x.kind() == "array_declarator")
                .filter(|x| {
                    let mut up = x.parent();
                    while let Some(u) = up.filter(|u| u.id() != d.id()) {
                        if u.kind() == "pointer_declarator" || u.kind() == "reference_declarator" {
                            return false;
                        }
                        up = u.parent();
                    }
                    true
                })
                .filter_map(|x| x.child_by_field_name("declarator").filter(|n| n.kind() == "identifier"))
                .map(|n| text(t, n).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    let declared = syntax::declared_names(t, body);
    let assigned: Vec<String> = syntax::assigned(t, body).into_iter().map(|(n, _)| n).collect();
    let once = |name: &str| declared.iter().filter(|d| *d == name).count() == 1;
    // The place a store writes: a local scalar or value parameter as a whole, or memory
    // behind a pointer parameter the kernel never repoints, or a local array.
    let target_ok = |target: Node| -> bool {
        let whole = strip_parens(target);
        if whole.kind() == "identifier" {
            let name = text(t, whole);
            return match k.param(name) {
                Some(p) => !p.pointer,
                None => once(name) && !arrays.iter().any(|a| a == name),
            };
        }
        let mut x = whole;
        loop {
            match x.kind() {
                "identifier" => {
                    let name = text(t, x);
                    let stable = !declared.iter().any(|d| d == name) && !assigned.iter().any(|a| a == name);
                    let param = k.param(name).is_some_and(|p| p.pointer && !p.is_const && !p.base.contains('*'));
                    return (param && stable) || (arrays.iter().any(|a| a == name) && once(name));
                }
                "subscript_expression" => match x.child_by_field_name("argument") {
                    Some(a) => x = strip_parens(a),
                    None => return false,
                },
                "pointer_expression" => match x.child_by_field_name("argument") {
                    Some(a) => {
                        let a = strip_parens(a);
                        // `*(p + i)`: the pointer is the sum's first term.
                        x = match syntax::binary(t, a) {
                            Some(("+" | "-", l, _)) => strip_parens(l),
                            _ => a,
                        };
                    }
                    None => return false,
                },
                _ => return false,
            }
        }
    };
    descendants(body).into_iter().all(|d| match d.kind() {
        "assignment_expression" => d.child_by_field_name("left").is_some_and(target_ok),
        "update_expression" => d.child_by_field_name("argument").is_some_and(target_ok),
        "call_expression" => {
            if pure_call(t, d, function_macros) {
                return true;
            }
            let Some(f) = d.child_by_field_name("function").filter(|f| f.kind() == "identifier") else { return false };
            let name = text(t, f);
            if !name.starts_with("atomic") || function_macros.contains(&name) {
                return false;
            }
            // An atomic writes where its first argument points: `&p[i]`, or `p + i`.
            let first = d.child_by_field_name("arguments").and_then(|a| named_children(a).into_iter().next());
            first.is_some_and(|a| {
                let a = strip_parens(a);
                if a.kind() == "pointer_expression" && text(t, a).starts_with('&') {
                    // `&p[i]`: the element a store to `p[i]` would write.
                    return a
                        .child_by_field_name("argument")
                        .is_some_and(|x| strip_parens(x).kind() == "subscript_expression" && target_ok(x));
                }
                // `p + i` or `p`: the memory `p[i]` names.
                let base = match syntax::binary(t, a) {
                    Some(("+", l, _)) => strip_parens(l),
                    _ => a,
                };
                base.kind() == "identifier" && k.param(text(t, base)).is_some_and(|p| p.pointer) && {
                    let name = text(t, base);
                    !declared.iter().any(|d| d == name)
                        && !assigned.iter().any(|x| x == name)
                        && k.param(name).is_some_and(|p| !p.is_const && !p.base.contains('*'))
                }
            })
        }
        "gnu_asm_expression" | "new_expression" | "delete_expression" => false,
        _ => true,
    })
}

/// A counter of a loop that encloses the read inside its statement, stepped by one from
/// a start to a bound that hold one value over the run, and changed only by its header.
struct Counter<'t> {
    var: String,
    start: Node<'t>,
    bound: Node<'t>,
    inclusive: bool,
    ty: Option<String>,
    /// The loop, which the load must sit inside.
    range: Range<usize>,
}

fn counters_around<'t>(
    t: &str,
    uniform: &RunUniform,
    n: Node<'t>,
    body: Node<'t>,
    constants: &[&str],
) -> Vec<Counter<'t>> {
    let mut out = Vec::new();
    let mut x = n;
    while let Some(up) = x.parent() {
        if up.id() == body.id() {
            break;
        }
        x = up;
        if up.kind() != "for_statement" {
            continue;
        }
        let Some(l) = syntax::unit_step_loop(t, up) else { continue };
        let body_changes = up
            .child_by_field_name("body")
            .is_none_or(|b| syntax::assigned(t, b).iter().any(|(name, _)| *name == l.var));
        let header_uniform = uniform.expr(l.start, constants) && uniform.expr(l.bound, constants);
        let ty = up.child_by_field_name("initializer").and_then(|i| syntax::declaration_type(t, i));
        if !body_changes && header_uniform && uniform.declared_once(&l.var) {
            out.push(Counter {
                var: l.var,
                start: l.start,
                bound: l.bound,
                inclusive: l.inclusive,
                ty,
                range: up.byte_range(),
            });
        }
    }
    out
}

/// Every name the index reads is in scope where the load goes: a counter of a loop around
/// that place, or a local declared before it in a block around it.
fn in_scope(t: &str, locals: &[Node], index: Node, at: usize, counters: &[Counter]) -> bool {
    descendants(index).into_iter().filter(|d| d.kind() == "identifier").all(|id| {
        let name = text(t, id);
        if let Some(c) = counters.iter().find(|c| c.var == name) {
            return c.range.start < at && at < c.range.end;
        }
        match locals.iter().find(|d| syntax::single_declarator(t, **d).is_some_and(|(n, _)| n == name)) {
            Some(d) => {
                let block = d.parent().filter(|b| b.kind() == "compound_statement");
                d.end_byte() <= at && block.is_some_and(|b| b.start_byte() < at && at < b.end_byte())
            }
            // A parameter or a constant of the file.
            None => true,
        }
    })
}

/// Object-like macros defined before `before` whose value is a non-negative integer
/// literal, defined once and never undefined.
fn top_level_constants(src: &Source, before: usize) -> Vec<(String, i64)> {
    let t = src.text();
    let undefined = |name: &str| {
        t.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with('#') && l[1..].trim_start().starts_with("undef") && syntax::mentions_word(l, name)
        })
    };
    let defines: Vec<Node> = descendants(src.root())
        .into_iter()
        .filter(|d| matches!(d.kind(), "preproc_def" | "preproc_function_def"))
        .collect();
    let name_of = |d: &Node| d.child_by_field_name("name").map(|n| text(t, n));
    defines
        .iter()
        .filter(|d| d.kind() == "preproc_def" && d.end_byte() <= before)
        .filter_map(|d| {
            let name = name_of(d)?;
            let value = text(t, d.child_by_field_name("value")?).trim();
            let value = value.trim_start_matches('(').trim_end_matches(')');
            let v = crate::pattern::int_literal(value).filter(|v| *v >= 0)?;
            let once = defines.iter().filter(|e| name_of(e) == Some(name)).count() == 1;
            (once && !undefined(name)).then(|| (name.to_string(), v))
        })
        .collect()
}

/// The names the file defines as function-like macros: a call through one may expand to
/// anything.
fn function_macros(src: &Source) -> Vec<&str> {
    descendants(src.root())
        .into_iter()
        .filter(|d| d.kind() == "preproc_function_def")
        .filter_map(|d| d.child_by_field_name("name").map(|n| text(src.text(), n)))
        .collect()
}

/// An integer type as the bound reads it: signedness and width.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct IntType {
    unsigned: bool,
    wide: bool,
}

impl IntType {
    const INT: IntType = IntType { unsigned: false, wide: false };

    fn parse(ty: &str) -> Option<IntType> {
        let words: Vec<&str> = ty
            .split_whitespace()
            .filter(|w| !matches!(*w, "const" | "volatile" | "static" | "register" | "__restrict__"))
            .collect();
        Some(match words.join(" ").as_str() {
            "int" | "signed" | "signed int" | "int32_t" => IntType { unsigned: false, wide: false },
            "unsigned" | "unsigned int" | "uint32_t" => IntType { unsigned: true, wide: false },
            "long long" | "long long int" | "long" | "int64_t" | "ptrdiff_t" => IntType { unsigned: false, wide: true },
            "unsigned long long" | "unsigned long" | "uint64_t" | "size_t" => IntType { unsigned: true, wide: true },
            _ => return None,
        })
    }

    /// The type of `a op b` (the usual arithmetic conversions, both at least `int`).
    fn common(a: IntType, b: IntType) -> IntType {
        let wide = a.wide || b.wide;
        let unsigned = (a.unsigned && (a.wide || !b.wide)) || (b.unsigned && (b.wide || !a.wide));
        IntType { unsigned, wide }
    }

    fn max(self) -> &'static str {
        match (self.unsigned, self.wide) {
            (false, false) => "2147483647LL",
            (true, false) => "4294967295LL",
            _ => "4611686018427387904LL",
        }
    }
}

/// A value known to be at least 0, with an upper bound where one is known: a `long long`
/// expression in the launcher's terms (kernel parameters in braces).
#[derive(Clone, Debug)]
struct Val {
    ty: IntType,
    hi: Option<String>,
    /// The value itself, not just a bound (a parameter, a literal, a constant).
    exact: bool,
    /// A constant of the source, small enough to multiply by.
    factor: bool,
    /// Bits the bound may need.
    bits: u32,
}

/// Bounds of index expressions, with the launcher checks they rely on.
struct Bound<'a, 't> {
    t: &'a str,
    k: &'a Kernel,
    /// The kernel's declarations.
    locals: &'a [Node<'t>],
    uniform: &'a RunUniform<'a>,
    macros: &'a [(String, i64)],
    counters: &'a [Counter<'t>],
    guards: Vec<String>,
}

impl<'t> Bound<'_, 't> {
    fn guard(&mut self, g: String) {
        if !self.guards.contains(&g) {
            self.guards.push(g);
        }
    }

    /// `hi` fits `ty` (a value computed in `ty` never wrapped on its way there).
    fn fits(&mut self, hi: &str, ty: IntType) {
        // A wide type holds every bound the launcher computes (at most MOST_BITS bits).
        if !ty.wide {
            self.guard(format!("{hi} <= {}", ty.max()));
        }
    }

    fn value(&mut self, n: Node<'t>, depth: usize) -> Option<Val> {
        if depth > MAX_DEPTH {
            return None;
        }
        let t = self.t;
        match n.kind() {
            "parenthesized_expression" => self.value(named_children(n).into_iter().next()?, depth + 1),
            "number_literal" => {
                let s = text(t, n);
                let v = crate::pattern::int_literal(s).filter(|v| *v >= 0)?;
                let lower = s.to_ascii_lowercase();
                let ty = IntType { unsigned: lower.contains('u'), wide: lower.contains('l') || v > i32::MAX as i64 };
                Some(Val {
                    ty,
                    hi: Some(format!("{v}LL")),
                    exact: true,
                    factor: v <= MOST_FACTOR,
                    bits: 64 - (v as u64).leading_zeros(),
                })
            }
            "identifier" => self.name(n, depth),
            "cast_expression" => {
                let ty = IntType::parse(text(t, n.child_by_field_name("type")?))?;
                let v = self.value(n.child_by_field_name("value")?, depth + 1)?;
                self.convert(v, ty)
            }
            "binary_expression" => {
                let (op, l, r) = syntax::binary(t, n)?;
                let a = self.value(l, depth + 1)?;
                let b = self.value(r, depth + 1)?;
                self.binary(op, a, b)
            }
            _ => None,
        }
    }

    fn name(&mut self, n: Node<'t>, depth: usize) -> Option<Val> {
        let t = self.t;
        let name = text(t, n);
        if let Some(c) = self.counters.iter().find(|c| c.var == name) {
            let (start, bound, inclusive) = (c.start, c.bound, c.inclusive);
            let ty = c.ty.as_deref().and_then(IntType::parse)?;
            // The start as the counter holds it: a wide or unsigned start may not fit.
            let s = self.value(start, depth + 1)?;
            self.convert(s, ty)?;
            let b = self.value(bound, depth + 1)?;
            let hi = b.hi?;
            let hi = if inclusive { hi } else { format!("({hi} - 1)") };
            self.fits(&hi, ty);
            return Some(Val { ty, hi: Some(hi), exact: false, factor: false, bits: b.bits });
        }
        if let Some(param) = self.k.param(name) {
            if param.pointer || !self.uniform.expr(n, &[]) {
                return None;
            }
            let ty = IntType::parse(&param.base)?;
            // As the kernel receives it: the launcher's argument may be wider.
            let hi = format!("(long long)(({})({{{name}}}))", param.base);
            self.guard(format!("{hi} >= 0"));
            let bits = if ty.wide { 64 } else { 32 };
            return Some(Val { ty, hi: Some(hi), exact: true, factor: false, bits });
        }
        if let Some((_, v)) = self.macros.iter().find(|(m, _)| m == name) {
            let hi = format!("(long long)({name})");
            // A `-D` may give it another value than the file's.
            self.guard(format!("{hi} >= 0"));
            let factor = *v <= MOST_FACTOR;
            if factor {
                self.guard(format!("{hi} <= {MOST_FACTOR}LL"));
            }
            let bits = if factor { 21 } else { 64 };
            return Some(Val { ty: IntType::INT, hi: Some(hi), exact: true, factor, bits });
        }
        if !self.uniform.is_local(name) {
            return None;
        }
        let decl = *self.locals.iter().find(|d| syntax::single_declarator(t, **d).is_some_and(|(d, _)| d == name))?;
        let ty = IntType::parse(&syntax::declaration_type(t, decl)?)?;
        let init = syntax::single_declarator(t, decl)?.1;
        match init.and_then(|i| self.value(i, depth + 1)) {
            Some(v) => self.convert(v, ty),
            // Whatever it holds, a value of an unsigned type is at least 0.
            None if ty.unsigned => Some(Val { ty, hi: None, exact: false, factor: false, bits: 64 }),
            None => None,
        }
    }

    fn convert(&mut self, v: Val, to: IntType) -> Option<Val> {
        match &v.hi {
            Some(hi) => {
                if to != v.ty {
                    self.fits(&hi.clone(), to);
                }
                Some(Val { ty: to, ..v })
            }
            // Unbounded: only an unsigned type keeps it at least 0.
            None if to.unsigned && (to.wide || !v.ty.wide) => Some(Val { ty: to, ..v }),
            None if to.unsigned => Some(Val { ty: to, hi: None, exact: false, factor: false, bits: 64 }),
            None => None,
        }
    }

    fn binary(&mut self, op: &str, a: Val, b: Val) -> Option<Val> {
        let ty = IntType::common(a.ty, b.ty);
        let (ah, bh) = (a.hi.clone(), b.hi.clone());
        let v = match op {
            "+" | "*" => {
                let bits = if op == "+" { a.bits.max(b.bits) + 1 } else { a.bits + b.bits };
                if op == "*" && !(a.factor || b.factor) {
                    return None;
                }
                let hi = match (ah, bh) {
                    (Some(x), Some(y)) if bits <= MOST_BITS => Some(format!("({x} {op} {y})")),
                    // A sum or product that may wrap is at least 0 only in an unsigned type.
                    _ if ty.unsigned => None,
                    _ => return None,
                };
                if let Some(h) = &hi {
                    self.fits(&h.clone(), ty);
                }
                Val { ty, hi, exact: false, factor: false, bits: if bits <= MOST_BITS { bits } else { 64 } }
            }
            "/" | "%" => {
                // By a divisor that is one value, at least 1.
                let d = bh.filter(|_| b.exact)?;
                self.guard(format!("{d} >= 1"));
                // A negative signed dividend cannot reach here: every value is at least 0,
                // and a signed one carries a bound its type holds.
                if !ty.unsigned && ah.is_none() {
                    return None;
                }
                if op == "%" {
                    Val { ty, hi: Some(format!("({d} - 1)")), exact: false, factor: false, bits: b.bits }
                } else {
                    let hi = ah.map(|x| format!("({x} / {d})"));
                    Val { ty, hi, exact: false, factor: false, bits: a.bits }
                }
            }
            _ => return None,
        };
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stores_ok(kernel_body: &str) -> bool {
        let code = format!(
            "#define PUT(p, i, v) ((p)[i] = (v))\ntemplate <typename T> __device__ void put(T* p, T v) {{ p[0] = v; }}\n__device__ void helper(float* p) {{ p[0] = 1.f; }}\n__global__ void k(const float* w, float* out, float** outs, int n) {{\n{kernel_body}\n}}\n"
        );
        let src = Source::parse(&code);
        let k = src.kernel("k").unwrap();
        let body = src.node(&k.body, "compound_statement").unwrap();
        stores_only_through_parameters(src.text(), &k, body, &function_macros(&src))
    }

    #[test]
    fn stores_count_as_seen_only_through_pointer_parameters_and_local_arrays() {
        let i = "int i = threadIdx.x;";
        // Through a parameter, an atomic on its element, a shared array, a local scalar.
        assert!(stores_ok(&format!("{i} out[i] = w[i];")));
        assert!(stores_ok(&format!("{i} *(out + i) = 1.f;")));
        assert!(stores_ok(&format!("{i} atomicAdd(out + i, 1.f);")));
        assert!(stores_ok(&format!("{i} __shared__ float s[32]; s[i % 32] = 1.f; float a = 0.f; a += s[0]; n = 2;")));
        // Through a const buffer cast to writable, a local pointer, a pointer loaded from
        // memory, a repointed parameter, asm, a function of the file.
        assert!(!stores_ok(&format!("{i} ((float*)w)[i] = 1.f;")));
        assert!(!stores_ok(&format!("{i} float* o = out; o[i] = 1.f;")));
        assert!(!stores_ok(&format!("{i} outs[0][i] = 1.f;")));
        assert!(!stores_ok(&format!("{i} out = out + n; out[i] = 1.f;")));
        assert!(!stores_ok(&format!("{i} asm volatile(\"\" ::: \"memory\");")));
        assert!(!stores_ok(&format!("{i} helper(out);")));
        assert!(!stores_ok(&format!("{i} atomicAdd((float*)w + i, 1.f);")));
        // What a call may write is out of sight: a template, a macro, a qualified atomic, a
        // store intrinsic, a library call; and an array of pointers is no array of values.
        assert!(!stores_ok(&format!("{i} put<float>((float*)w + i, 0.5f);")));
        assert!(!stores_ok(&format!("{i} PUT((float*)w, i, 0.5f);")));
        assert!(!stores_ok(&format!("{i} ::atomicExch((float*)w + i, 0.5f);")));
        assert!(!stores_ok(&format!("{i} __stcg((float*)w + i, 0.5f);")));
        assert!(!stores_ok(&format!("{i} memset((float*)w + i, 0, 4);")));
        assert!(!stores_ok(&format!("{i} float* ws[1] = {{(float*)w + i}}; ws[0][0] = 0.5f;")));
        // Math, conversions and loads write nothing.
        assert!(stores_ok(&format!(
            "{i} out[i] = __expf(fmaxf(w[i], 0.f)) + __half2float(__float2half(__ldg(w + i)));"
        )));
    }
}
