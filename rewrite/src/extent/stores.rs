//! What the kernels store into each pointer argument, for its tolerance: values copied
//! from memory unchanged (a gather, a transpose, a padded shift: any correct kernel
//! stores the same bits, so the check can be exact), sums accumulated over a loop, a
//! shared array or atomics (a row reduction, a dot product: their rounding depends on
//! the order of the additions, which every parallel rewrite changes), or anything else.
//!
//! The kernels are those the launcher starts, directly or through a host function of
//! the files; a pointer reaches them by the argument's position, and local pointers
//! computed from it (`float* row = out + r * cols;`) are followed. A store is
//! `p[i] = v`, `*p = v` (casts included) or an atomic. A value is copied when it is an
//! element read as it is, a literal, a local that only ever holds such values, or a choice
//! between them; it is summed when a local or an array it comes from is added into
//! inside a loop (`acc += x[k]`, `s[t] += s[t + o]`), or when it is stored by an atomic
//! add. Whatever the walk does not see (a pointer handed to a helper) makes the pointer
//! [`Stored::Computed`]: an exact check is never drafted on a guess.

use super::*;

/// What the kernels store through one pointer argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    /// No store seen: an input, or a pointer the walk lost.
    Nothing,
    /// Every store writes a value read from memory unchanged, or a literal.
    Copied { store: Use },
    /// A store writes a sum whose additions a rewrite may reorder: accumulated in a
    /// loop, over a shared array, or by atomics. `bound`: the launcher's expression for
    /// the bound of the loop that accumulates, when it is one of the launcher's names.
    Summed {
        store: Use,
        bound: Option<String>,
        /// The sum itself is stored (through additions and conversions), not only a
        /// value computed from it (a softmax's `e / sum`, whose error is relative).
        stored: bool,
    },
    /// Anything else.
    Computed,
}

/// One pointer argument of the launcher and what is stored through it.
#[derive(Debug, Clone, PartialEq)]
pub struct PointerStores {
    pub name: String,
    pub stored: Stored,
}

/// How deep the walk follows locals and host functions.
const MAX_VALUE_DEPTH: usize = 8;

/// What is stored through each pointer parameter of `entry` in `src`, in parameter
/// order. Empty when `entry` is not a function of `src`.
pub fn pointer_stores(src: &Source, headers: &[Source], entry: &str) -> Vec<PointerStores> {
    let files: Vec<&Source> = std::iter::once(src).chain(headers).collect();
    let Some((_, body, func)) = launcher_of(src, &files, entry) else { return Vec::new() };
    parameters(src.text(), func)
        .into_iter()
        .filter(|p| p.pointer)
        .map(|p| {
            let mut seen = Seen::default();
            in_host(&files, src, body, &p.name, &BTreeMap::new(), 0, &mut seen);
            PointerStores { name: p.name, stored: seen.verdict() }
        })
        .collect()
}

/// What the walk saw of one pointer's stores.
#[derive(Default)]
struct Seen {
    copied: Option<Use>,
    summed: Option<(Use, Option<String>, bool)>,
    computed: bool,
}

impl Seen {
    fn verdict(self) -> Stored {
        match self {
            Seen { computed: true, .. } => Stored::Computed,
            Seen { summed: Some((store, bound, stored)), .. } => Stored::Summed { store, bound, stored },
            Seen { copied: Some(store), .. } => Stored::Copied { store },
            _ => Stored::Nothing,
        }
    }
}

fn use_of(t: &str, n: Node) -> Use {
    Use { access: text(t, n).to_string(), line: line_of(t, n.start_byte()) }
}

/// The uses of pointer `name` in the host function `body` of `file`: handed to kernels
/// and to host functions (a wrapper launcher). `names`: the launcher's expression for
/// each integer parameter of this function, by name.
fn in_host(
    files: &[&Source],
    file: &Source,
    body: Node,
    name: &str,
    names: &BTreeMap<String, String>,
    depth: usize,
    seen: &mut Seen,
) {
    let t = file.text();
    if depth > 2 {
        seen.computed = true;
        return;
    }
    let launches = file.launches();
    for id in descendants(body) {
        if id.kind() != "identifier" || text(t, id) != name || is_declarator(id) {
            continue;
        }
        if let Some((l, i)) = launches.iter().find_map(|l| {
            l.arg_ranges.iter().position(|r| r.start <= id.start_byte() && id.end_byte() <= r.end).map(|i| (l, i))
        }) {
            let Some((f, k)) =
                files.iter().find_map(|f| f.kernels().into_iter().find(|k| k.name == l.kernel).map(|k| (*f, k)))
            else {
                seen.computed = true;
                continue;
            };
            let Some(root) = f.node(&k.body, "compound_statement") else { continue };
            let params = root.parent().map(|func| parameters(f.text(), func)).unwrap_or_default();
            // The kernel's integer parameters in the launcher's words, for a loop's bound.
            let mut bound_names = BTreeMap::new();
            for (j, p) in params.iter().enumerate() {
                if let Some(arg) = l.args.get(j) {
                    let arg = without_cast(arg.trim());
                    bound_names.insert(p.name.clone(), names.get(arg).cloned().unwrap_or_else(|| arg.to_string()));
                }
            }
            match params.get(i) {
                Some(p) if p.pointer => in_kernel(f, root, &p.name, &bound_names, seen),
                _ => seen.computed = true,
            }
            continue;
        }
        // A host function of the files: a wrapper launcher, followed by position.
        let Some(args) = up(id).filter(|a| a.kind() == "argument_list") else { continue };
        let Some(call) = args.parent().filter(|c| c.kind() == "call_expression") else { continue };
        let function = call.child_by_field_name("function").map(|f| text(t, f).to_string()).unwrap_or_default();
        // A function whose body the files do not hold may write through it.
        let Some((f, h)) = functions_named(files, &function).into_iter().next() else {
            seen.computed = true;
            continue;
        };
        let Some(inner) = f.node(&h.body, "compound_statement") else { continue };
        let Some(position) = argument_position(args, id) else { continue };
        let Some(param) = h.params.get(position) else { continue };
        let mut inner_names = BTreeMap::new();
        let actual = named_children(args);
        for (j, p) in h.params.iter().enumerate() {
            if let Some(a) = actual.get(j) {
                let a = text(t, *a).trim().to_string();
                inner_names.insert(p.clone(), names.get(&a).cloned().unwrap_or(a));
            }
        }
        in_host(files, f, inner, param, &inner_names, depth + 1, seen);
    }
}

/// The stores through pointer `name` (and local pointers computed from it) in the kernel
/// body `root`.
fn in_kernel(file: &Source, root: Node, name: &str, names: &BTreeMap<String, String>, seen: &mut Seen) {
    let t = file.text();
    let mut pointers = vec![name.to_string()];
    // Local pointers computed from it, to a fixed point.
    for _ in 0..4 {
        for n in descendants(root) {
            if n.kind() != "init_declarator" {
                continue;
            }
            let Some(v) = n.child_by_field_name("value") else { continue };
            let pointer = descendants(n.child_by_field_name("declarator").unwrap_or(n))
                .iter()
                .any(|d| d.kind() == "pointer_declarator");
            if pointer && pointers.iter().any(|p| syntax::mentions(t, v, p)) {
                if let Some((alias, _)) = declared_alias(t, n) {
                    if !pointers.contains(&alias) {
                        pointers.push(alias);
                    }
                }
            }
        }
    }
    for id in descendants(root) {
        if id.kind() != "identifier" || !pointers.iter().any(|p| p == text(t, id)) || is_declarator(id) {
            continue;
        }
        // Up through the pointer arithmetic and casts to what uses the address.
        let mut e = id;
        while let Some(p) = up(e) {
            let pass = match p.kind() {
                "binary_expression" => matches!(syntax::binary(t, p), Some(("+" | "-", _, _))),
                "cast_expression" => true,
                "pointer_expression" => p.child(0).is_some_and(|o| text(t, o) == "&"),
                "subscript_expression" => {
                    is_child(p, "argument", e)
                        && up(p).is_some_and(|q| {
                            q.kind() == "pointer_expression" && q.child(0).is_some_and(|o| text(t, o) == "&")
                        })
                }
                "argument_list" => args_of_cast(t, p),
                "call_expression" => call_is_cast(t, p),
                _ => false,
            };
            if !pass {
                break;
            }
            e = p;
        }
        let Some(p) = up(e) else { continue };
        match p.kind() {
            // `p[i] = v`, `*p = v`: a store of v; `p[i] += v`: a sum.
            "subscript_expression" | "pointer_expression"
                if (p.kind() == "subscript_expression" && is_child(p, "argument", e))
                    || (p.kind() == "pointer_expression" && p.child(0).is_some_and(|o| text(t, o) == "*")) =>
            {
                let target = field_parent(p);
                let Some(a) =
                    up(target).filter(|a| a.kind() == "assignment_expression" && is_child(*a, "left", target))
                else {
                    continue; // a read
                };
                let op = a.child_by_field_name("operator").map(|o| text(t, o)).unwrap_or("=");
                let Some(v) = a.child_by_field_name("right") else { continue };
                if op == "+=" || op == "-=" {
                    match serial_loop(t, root, a, None) {
                        Some(over) => {
                            seen.summed.get_or_insert((use_of(t, a), loop_bound(t, over, names), true));
                        }
                        None => seen.computed = true,
                    }
                } else if op != "=" {
                    seen.computed = true;
                } else {
                    classify(t, root, v, a, names, seen);
                }
            }
            "argument_list" => {
                let call = p.parent().filter(|c| c.kind() == "call_expression");
                let function = call
                    .and_then(|c| c.child_by_field_name("function"))
                    .map(|f| text(t, f).to_string())
                    .unwrap_or_default();
                match call {
                    Some(c) if function.starts_with("atomicAdd") || function.starts_with("atomicSub") => {
                        seen.summed.get_or_insert((use_of(t, c), None, true));
                    }
                    // The load intrinsics read; the store intrinsics (`__stcs(p, v)`) store.
                    Some(_) if function.starts_with("__ld") => {}
                    Some(c) if function.starts_with("__st") => match named_children(p).get(1) {
                        Some(v) => classify(t, root, *v, c, names, seen),
                        None => seen.computed = true,
                    },
                    _ => seen.computed = true,
                }
            }
            _ => {}
        }
    }
}

/// `(size_t)K` is `K`.
fn without_cast(arg: &str) -> &str {
    match arg.strip_prefix('(').and_then(|r| r.split_once(')')) {
        Some((ty, rest))
            if !rest.trim().is_empty() && ty.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ' ') =>
        {
            rest.trim()
        }
        _ => arg,
    }
}

/// `p[i].x`: the element's field is still the element.
fn field_parent(n: Node) -> Node {
    let mut n = n;
    while let Some(p) = up(n).filter(|p| p.kind() == "field_expression" && is_child(*p, "argument", n)) {
        n = p;
    }
    n
}

fn call_is_cast(t: &str, call: Node) -> bool {
    call.child_by_field_name("function").is_some_and(|f| cast_target(text(t, f)).is_some())
}

fn args_of_cast(t: &str, args: Node) -> bool {
    args.parent().is_some_and(|c| c.kind() == "call_expression" && call_is_cast(t, c))
}

/// The value `v` stored at `store`: copied, summed or computed.
fn classify(t: &str, root: Node, v: Node, store: Node, names: &BTreeMap<String, String>, seen: &mut Seen) {
    match value_of(t, root, v, 0) {
        Value::Exact => {
            seen.copied.get_or_insert(use_of(t, store));
        }
        Value::Sum { over, stored } => {
            seen.summed.get_or_insert((use_of(t, store), loop_bound(t, over, names), stored));
        }
        Value::Other => seen.computed = true,
    }
}

enum Value<'t> {
    /// Read from memory unchanged, or a literal.
    Exact,
    /// A sum accumulated over the serial loop `over`: stored itself (through additions
    /// and conversions), or only a value computed from it (a softmax's `e / sum`).
    Sum {
        over: Node<'t>,
        stored: bool,
    },
    Other,
}

/// One-argument conversions: the value they return is the argument's, rounded.
const CONVERSIONS: &[&str] = &[
    "__float2bfloat16",
    "__float2half",
    "__bfloat162float",
    "__half2float",
    "__double2float",
    "__float2double",
    "static_cast<",
    "float",
    "double",
];

/// What the expression `v` is made of.
fn value_of<'t>(t: &str, root: Node<'t>, v: Node<'t>, depth: usize) -> Value<'t> {
    if depth > MAX_VALUE_DEPTH {
        return Value::Other;
    }
    let v = strip_parens(v);
    match v.kind() {
        "number_literal" | "true" | "false" | "char_literal" => Value::Exact,
        "subscript_expression" => match v.child_by_field_name("argument").map(strip) {
            // A local or shared array (not a local pointer into memory): what is ever
            // stored in it.
            Some(a)
                if a.kind() == "identifier"
                    && (declaration_of(t, root, a, text(t, a))
                        .is_some_and(|(d, _)| !declares_pointer(t, d, text(t, a)))
                        || is_shared_array(t, root, text(t, a))) =>
            {
                stored_in(t, root, a, depth)
            }
            _ => Value::Exact,
        },
        "pointer_expression" if v.child(0).is_some_and(|o| text(t, o) == "*") => Value::Exact,
        "field_expression" => match v.child_by_field_name("argument") {
            Some(a) => value_of(t, root, a, depth + 1),
            None => Value::Other,
        },
        "cast_expression" => match v.child_by_field_name("value") {
            Some(a) => value_of(t, root, a, depth + 1),
            None => Value::Other,
        },
        "conditional_expression" => {
            let parts = [v.child_by_field_name("consequence"), v.child_by_field_name("alternative")];
            let mut out = Value::Exact;
            for p in parts {
                match p.map(|p| value_of(t, root, p, depth + 1)) {
                    Some(Value::Exact) => {}
                    Some(sum @ Value::Sum { .. }) => out = sum,
                    _ => return Value::Other,
                }
            }
            out
        }
        // An addition is no copy; it carries a sum it adds to.
        "binary_expression" if matches!(syntax::binary(t, v), Some(("+" | "-", _, _))) => {
            let Some((_, l, r)) = syntax::binary(t, v) else { return Value::Other };
            match (value_of(t, root, l, depth + 1), value_of(t, root, r, depth + 1)) {
                (sum @ Value::Sum { .. }, _) | (_, sum @ Value::Sum { .. }) => sum,
                _ => Value::Other,
            }
        }
        "call_expression" => {
            let function = v.child_by_field_name("function").map(|f| text(t, f)).unwrap_or("");
            let args: Vec<Node> = v.child_by_field_name("arguments").map(named_children).unwrap_or_default();
            let all_exact = || args.iter().all(|a| matches!(value_of(t, root, *a, depth + 1), Value::Exact));
            if function.starts_with("__ld") && args.len() == 1 {
                Value::Exact
            } else if function.starts_with("make_") && all_exact() {
                // `make_float4(x[i], 0.f, ...)`: a vector of exact values.
                Value::Exact
            } else if args.len() == 1 && CONVERSIONS.iter().any(|c| function.starts_with(c)) {
                match value_of(t, root, args[0], depth + 1) {
                    // A rounded copy is no copy: two kernels may round differently.
                    Value::Exact => Value::Other,
                    other => other,
                }
            } else {
                sum_in(t, root, v, depth)
            }
        }
        "identifier" => match declaration_of(t, root, v, text(t, v)) {
            Some(_) => stored_in(t, root, v, depth),
            None => Value::Other,
        },
        _ => sum_in(t, root, v, depth),
    }
}

/// An expression that is no copy: a value computed from a sum when some local it reads
/// is accumulated.
fn sum_in<'t>(t: &str, root: Node<'t>, v: Node<'t>, depth: usize) -> Value<'t> {
    for id in descendants(v).into_iter().filter(|n| n.kind() == "identifier") {
        let name = text(t, id);
        // An index picks a value and adds nothing to it; a loop's counter is an index.
        let indexes = std::iter::successors(id.parent(), |p| p.parent()).take_while(|p| p.id() != v.id()).any(|p| {
            p.kind() == "subscript_argument_list" || p.kind() == "subscript_expression" && !is_child(p, "argument", id)
        });
        let counter = declaration_of(t, root, id, name).is_some_and(|(d, _)| d.kind() == "for_statement");
        if indexes || counter {
            continue;
        }
        if declaration_of(t, root, id, name).is_some() || is_shared_array(t, root, name) {
            if let Value::Sum { over, .. } = stored_in(t, root, id, depth + 1) {
                return Value::Sum { over, stored: false };
            }
        }
    }
    Value::Other
}

/// What the local or shared variable named at `at` (the variable its declaration
/// declares, not one of the same name elsewhere) ever holds: every value stored in it.
fn stored_in<'t>(t: &str, root: Node<'t>, at: Node<'t>, depth: usize) -> Value<'t> {
    if depth > MAX_VALUE_DEPTH {
        return Value::Other;
    }
    let name = text(t, at);
    let decl = declaration_of(t, root, at, name).map(|(d, _)| d);
    let same = |n: Node<'t>| declaration_of(t, root, n, name).map(|(d, _)| d.id()) == decl.map(|d| d.id());
    let mut out = Value::Exact;
    let mut stores = Vec::new();
    for n in descendants(root) {
        match n.kind() {
            "init_declarator"
                if declared_alias(t, n)
                    .is_some_and(|(a, owner)| a == name && owner.map(|o| o.id()) == decl.map(|d| d.id())) =>
            {
                if let Some(v) = n.child_by_field_name("value") {
                    stores.push(("=", n, v));
                }
            }
            "assignment_expression" => {
                let Some(l) = n.child_by_field_name("left") else { continue };
                let mut target = strip(l);
                while matches!(target.kind(), "subscript_expression" | "field_expression") {
                    match target.child_by_field_name("argument") {
                        Some(a) => target = strip(a),
                        None => break,
                    }
                }
                if target.kind() == "identifier" && text(t, target) == name && same(target) {
                    let op = n.child_by_field_name("operator").map(|o| text(t, o)).unwrap_or("=");
                    if let Some(v) = n.child_by_field_name("right") {
                        stores.push((op, n, v));
                    }
                }
            }
            // `w++`, or `&w` handed to a call (`sincosf(v, &s, &c)`): written in ways the
            // walk does not read.
            "update_expression" | "pointer_expression"
                if (n.kind() == "update_expression" || n.child(0).is_some_and(|o| text(t, o) == "&"))
                    && n.child_by_field_name("argument").map(strip).is_some_and(|a| {
                        let mut a = a;
                        while matches!(a.kind(), "subscript_expression" | "field_expression") {
                            match a.child_by_field_name("argument") {
                                Some(x) => a = strip(x),
                                None => break,
                            }
                        }
                        a.kind() == "identifier" && text(t, a) == name && same(a)
                    }) =>
            {
                return Value::Other;
            }
            _ => {}
        }
    }
    for (op, at, v) in stores {
        let added = op == "+=" || op == "-=" || op == "=" && adds_to_itself(t, v, name);
        if added {
            match serial_loop(t, root, at, decl) {
                Some(over) => return Value::Sum { over, stored: true },
                None => {
                    out = Value::Other;
                    continue;
                }
            }
        }
        if op != "=" {
            return Value::Other;
        }
        match value_of(t, root, v, depth + 1) {
            Value::Exact => {}
            sum @ Value::Sum { .. } => return sum,
            Value::Other => out = Value::Other,
        }
    }
    out
}

/// The loop an addition at `at` accumulates over: the innermost loop around it that the
/// accumulator outlives (declared by `decl` outside it) and does not reset inside (no plain
/// `acc = ...` there); for an element added into (`p[i] +=`, `s[t] +=`), a loop whose
/// counter its header declares and the address does not move with, directly or through
/// locals. None: the addition is done once per index, as `y[i] += a * x[i]` or
/// `float v = x[i]; v += r[i];` inside a grid-stride loop, and is no long sum.
fn serial_loop<'t>(t: &str, root: Node<'t>, at: Node<'t>, decl: Option<Node<'t>>) -> Option<Node<'t>> {
    let left = at.child_by_field_name("left").map(strip);
    let address = left.and_then(|l| match l.kind() {
        "subscript_expression" => subscript_index(l),
        _ => None,
    });
    let scalar = left.filter(|l| l.kind() == "identifier").map(|l| text(t, l).to_string());
    let mut p = at.parent();
    while let Some(x) = p {
        if x.id() == root.id() {
            return None;
        }
        if syntax::is_loop(x) && decl.is_none_or(|d| !contains(x, d)) {
            // Reset inside this loop: it accumulates over no loop around it.
            if let Some(name) = &scalar {
                let reset = descendants(x).into_iter().any(|n| {
                    n.kind() == "assignment_expression"
                        && n.id() != at.id()
                        && n.child_by_field_name("operator").is_some_and(|o| text(t, o) == "=")
                        && n.child_by_field_name("left").map(strip).is_some_and(|l| {
                            l.kind() == "identifier"
                                && text(t, l) == name
                                && declaration_of(t, root, l, name).map(|(d, _)| d.id()) == decl.map(|d| d.id())
                        })
                        && !n.child_by_field_name("right").is_some_and(|r| adds_to_itself(t, r, name))
                });
                if reset {
                    return None;
                }
            }
            match address {
                None => return Some(x),
                Some(a) => {
                    let counter = (x.kind() == "for_statement")
                        .then(|| x.child_by_field_name("initializer"))
                        .flatten()
                        .and_then(|i| syntax::single_declarator(t, i));
                    if let Some((c, _)) = counter {
                        if !depends_on(t, root, a, &c, 0) {
                            return Some(x);
                        }
                    }
                }
            }
        }
        p = x.parent();
    }
    None
}

/// Whether `n` names `var`, directly or through locals computed from it.
fn depends_on(t: &str, root: Node, n: Node, var: &str, depth: usize) -> bool {
    if syntax::mentions(t, n, var) {
        return true;
    }
    depth < MAX_VALUE_DEPTH
        && descendants(n).into_iter().filter(|d| d.kind() == "identifier").any(|id| {
            let name = text(t, id);
            match declaration_of(t, root, id, name) {
                Some((_, Some(v))) => depends_on(t, root, v, var, depth + 1),
                // Declared without a value, or assigned: what is assigned to it.
                Some((d, None)) => writes(t, d.parent().unwrap_or(root), name).into_iter().any(|w| {
                    w.parent()
                        .and_then(|a| a.child_by_field_name("right"))
                        .is_some_and(|r| depends_on(t, root, r, var, depth + 1))
                }),
                None => false,
            }
        })
}

/// Whether the declaration `d` declares `name` as a pointer.
fn declares_pointer(t: &str, d: Node, name: &str) -> bool {
    descendants(d).into_iter().any(|p| {
        p.kind() == "pointer_declarator"
            && p.child_by_field_name("declarator")
                .is_some_and(|x| strip(x).kind() == "identifier" && text(t, strip(x)) == name)
    })
}

/// `acc = acc + x` or `s[t] = s[t] + s[t + o]`.
fn adds_to_itself(t: &str, v: Node, name: &str) -> bool {
    matches!(syntax::binary(t, strip_parens(v)), Some(("+" | "-", l, r)) if syntax::mentions(t, l, name) || syntax::mentions(t, r, name))
}

/// `__shared__ float s[256];` declared at file scope or in the kernel.
fn is_shared_array(t: &str, root: Node, name: &str) -> bool {
    descendants(root)
        .into_iter()
        .any(|d| d.kind() == "declaration" && text(t, d).contains("__shared__") && declared_in(t, d, name).is_some())
}

/// The bound of the loop `over` when it compares with one of the kernel's parameters
/// (`k < K`, `c < cols`), in the launcher's words.
fn loop_bound(t: &str, over: Node, names: &BTreeMap<String, String>) -> Option<String> {
    let c = over.child_by_field_name("condition")?;
    let (_, _, r) = syntax::binary(t, strip_parens(c)).filter(|(op, _, _)| matches!(*op, "<" | "<="))?;
    names.get(text(t, strip_parens(r))).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name: copied|summed(bound)|computed|-` per pointer.
    fn stored(src: &str, entry: &str) -> Vec<String> {
        pointer_stores(&Source::parse(src), &[], entry)
            .into_iter()
            .map(|p| {
                let s = match p.stored {
                    Stored::Nothing => "-".to_string(),
                    Stored::Copied { .. } => "copied".to_string(),
                    Stored::Summed { bound, .. } => format!("summed({})", bound.unwrap_or_default()),
                    Stored::Computed => "computed".to_string(),
                };
                format!("{}: {s}", p.name)
            })
            .collect()
    }

    #[test]
    fn a_paged_gather_copies_and_a_padded_shift_copies() {
        let src = r#"
__global__ void gather(const __nv_bfloat16* cache, const int* table, __nv_bfloat16* out, int bs, int d, int n) {
  int t = blockIdx.x, c = threadIdx.x;
  if (t >= n) return;
  int blk = table[t / bs];
  const __nv_bfloat16* src = cache + ((long)blk * bs + t % bs) * d;
  __nv_bfloat16* dst = out + (long)t * d;
  for (int j = c; j < d; j += blockDim.x) dst[j] = src[j];
}
__global__ void shift(const float4* x, float4* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 v = i > 0 ? x[i - 1] : make_float4(0.f, 0.f, 0.f, 0.f);
  y[i] = v;
}
extern "C" void run(const __nv_bfloat16* cache, const int* table, __nv_bfloat16* out, const float4* x, float4* y,
                    int bs, int d, int n, cudaStream_t s) {
  gather<<<n, 128, 0, s>>>(cache, table, out, bs, d, n);
  shift<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
}
"#;
        assert_eq!(stored(src, "run"), ["cache: -", "table: -", "out: copied", "x: -", "y: copied"]);
    }

    #[test]
    fn sums_over_loops_shared_arrays_and_atomics_are_summed() {
        let src = r#"
__global__ void gemv(const float* W, const float* x, float* y, int K, int M) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= M) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += W[(long)r * K + k] * x[k];
  y[r] = acc;
}
__global__ void rowsum(const float* x, float* out, int cols) {
  __shared__ float s[256];
  float a = 0.f;
  for (int c = threadIdx.x; c < cols; c += 256) a = a + x[blockIdx.x * cols + c];
  s[threadIdx.x] = a;
  __syncthreads();
  for (int o = 128; o > 0; o >>= 1) {
    if (threadIdx.x < o) s[threadIdx.x] += s[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
__global__ void total(const float* x, float* sum, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(sum, x[i]);
}
__global__ void scale(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
extern "C" void run(const float* W, const float* x, float* y, float* rows, float* sum, float* z, int M, int K,
                    cudaStream_t s) {
  gemv<<<(M + 127) / 128, 128, 0, s>>>(W, x, y, K, M);
  rowsum<<<M, 256, 0, s>>>(W, rows, K);
  total<<<(K + 255) / 256, 256, 0, s>>>(x, sum, K);
  scale<<<(K + 255) / 256, 256, 0, s>>>(x, z, 2.f, K);
}
"#;
        assert_eq!(
            stored(src, "run"),
            ["W: -", "x: -", "y: summed(K)", "rows: summed(K)", "sum: summed()", "z: computed"]
        );
    }

    /// From a review: additions done once per index are no long sums, a local of the same
    /// name elsewhere is another variable, and values written through `&` or `++`, or by
    /// a function the files do not hold, are no copies.
    #[test]
    fn what_only_looks_like_a_sum_or_a_copy_is_computed() {
        let src = r#"
__global__ void adam(float* p, const float* g, float* y, const float* x, float* r, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    p[i] -= 1e-3f * g[i];
    y[i] += 2.f * x[i];
    float v = x[i];
    v += g[i];
    r[i] = v;
  }
}
__global__ void shadow(const float* W, const float* x, float* z, float* y, int K, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  { float acc = 0.f; for (int k = 0; k < K; ++k) acc += W[i * K + k] * x[k]; z[i] = acc; }
  { float acc = x[i] * 3.f; y[i] = acc; }
}
__global__ void outs(const float* x, float* s, float* w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a, b;
  sincosf(x[i], &a, &b);
  s[i] = a;
  float c = x[i];
  c++;
  w[i] = c;
}
__global__ void copy(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
void my_axpy(int n, float a, const float* x, float* y);
extern "C" void run(float* p, const float* g, float* y, const float* x, float* r, float* z, float* s, float* w,
                    float* c, const float* W, float* q, int K, int n, cudaStream_t st) {
  adam<<<264, 256, 0, st>>>(p, g, y, x, r, n);
  shadow<<<(n + 255) / 256, 256, 0, st>>>(W, x, z, q, K, n);
  outs<<<(n + 255) / 256, 256, 0, st>>>(x, s, w, n);
  copy<<<(n + 255) / 256, 256, 0, st>>>(x, c, n);
  my_axpy(n, 2.f, x, c);
}
"#;
        let got = stored(src, "run");
        assert_eq!(
            got,
            [
                "p: computed",
                "g: -",
                "y: computed",
                "x: computed",
                "r: computed",
                "z: summed(K)",
                "s: computed",
                "w: computed",
                "c: computed",
                "W: -",
                "q: computed"
            ]
        );
    }

    /// From a second review: grid-stride loops without a declared counter, `while`
    /// loops, addresses held in locals and accumulators reset inside the loop are no sums.
    #[test]
    fn per_element_updates_in_any_loop_form_are_no_sums() {
        let src = r#"
__global__ void k(const float* x, float* a, float* b, float* c, float* d, int n, int cols) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (; i < n; i += blockDim.x * gridDim.x) a[i] += 2.f * x[i];
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  while (j < n) { b[j] += x[j]; j += blockDim.x * gridDim.x; }
  for (int cc = threadIdx.x; cc < cols; cc += blockDim.x) { long idx = (long)blockIdx.x * cols + cc; c[idx] += x[cc]; }
  float acc;
  for (int q = threadIdx.x; q < n; q += blockDim.x) { acc = 0.f; acc += x[q] * 2.f; d[q] = acc; }
}
extern "C" void run(const float* x, float* a, float* b, float* c, float* d, int n, int cols, cudaStream_t s) {
  k<<<132, 256, 0, s>>>(x, a, b, c, d, n, cols);
}
"#;
        assert_eq!(stored(src, "run"), ["x: -", "a: computed", "b: computed", "c: computed", "d: computed"]);
    }

    #[test]
    fn a_pointer_handed_to_a_helper_is_never_taken_for_a_copy() {
        let src = r#"
__device__ void put(float* p, float v);
__global__ void k(const float* x, float* y, float* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = x[i];
  put(y + i, x[i]);
  z[i] = x[i];
}
static void launch(const float* x, float* y, float* z, int n, cudaStream_t s) { k<<<n, 1, 0, s>>>(x, y, z, n); }
extern "C" void run(const float* x, float* y, float* z, int n, cudaStream_t s) { launch(x, y, z, n, s); }
"#;
        assert_eq!(stored(src, "run"), ["x: -", "y: computed", "z: copied"]);
    }
}
