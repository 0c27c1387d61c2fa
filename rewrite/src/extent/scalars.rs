//! What each integer parameter of a launcher does in the kernels it starts, so that a
//! task gives it the right kind of value: a dimension takes sizes, a flag takes 0 and 1,
//! a filter's width is held at the width production uses, and a step count is a value.
//!
//! Every use of the parameter is followed as [`super::access`] follows pointers: into
//! each kernel by the argument's position, into helpers and wrapper launchers, through
//! locals computed from it (`int total = rows * cols;`). Each use climbs through the
//! arithmetic around it to what consumes the result:
//! - the launch configuration, a runtime call's size, a comparison with an index the
//!   grid's threads spread over (`i < n`, `i` from `threadIdx`), or a loop's stride: it
//!   sizes the parallel work ([`ScalarUse::parallel`]);
//! - a comparison with a counter that starts at a constant (`for (k = 0; k < width;
//!   ++k)`): a serial extent ([`ScalarUse::serial`]);
//! - a subscript or a pointer's offset ([`ScalarUse::index`]);
//! - the parameter itself tested for truth or compared with a constant (`if (silu)`,
//!   `causal ? a : b`, `mode == 2`): a flag ([`ScalarUse::flag`]);
//! - anything else (a math function's argument, a stored value, float arithmetic): a
//!   value ([`ScalarUse::value`]).
//!
//! A use the walk cannot follow is reported, never guessed.

use super::*;

/// What the kernels do with one integer parameter of the launcher: the first use of each
/// kind, as written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScalarUse {
    pub name: String,
    /// Sizes the launch or bounds an index the grid's threads spread over.
    pub parallel: Option<Use>,
    /// Bounds a counter that starts at a constant, and nothing the threads spread over.
    pub serial: Option<Use>,
    /// In a subscript or a pointer's offset.
    pub index: Option<Use>,
    /// Tested for truth or compared with a constant, as it is.
    pub flag: Option<Use>,
    /// In arithmetic whose result is a value, not an index or a bound.
    pub value: Option<Use>,
    /// A use the walk could not follow.
    pub unknown: Option<String>,
    /// The integer constants a flag is compared with (`head_dim == 64`: 64); empty
    /// where it is only tested for truth.
    pub compared_with: BTreeSet<i64>,
    /// Sizes a launch's block (`<<<grid, cols>>>`): at most 1024 threads.
    pub block: Option<Use>,
}

/// What an integer parameter is, from its uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarRole {
    /// Sizes the work the threads spread over, or indexes memory: a dimension.
    Dimension,
    /// Bounds only serial loops, and may index memory (a filter's width, a reduction's
    /// length walked by one thread).
    SerialExtent,
    /// Only selects what the kernel does.
    Flag,
    /// Enters arithmetic on values and sizes nothing (a step count, a seed).
    Value,
    /// Some use was not followed and none of the above says more.
    Unknown,
    /// Never used.
    Unused,
}

impl ScalarUse {
    /// The role its uses give it. Sizing the work wins; a value used in arithmetic is no
    /// flag even where it is also tested (`if (step == 1)` beside `powf(beta, step)`).
    pub fn role(&self) -> ScalarRole {
        if self.parallel.is_some() {
            ScalarRole::Dimension
        } else if self.serial.is_some() {
            ScalarRole::SerialExtent
        } else if self.index.is_some() {
            ScalarRole::Dimension
        } else if self.unknown.is_some() {
            ScalarRole::Unknown
        } else if self.value.is_some() {
            ScalarRole::Value
        } else if self.flag.is_some() {
            ScalarRole::Flag
        } else {
            ScalarRole::Unused
        }
    }

    /// The use that decided [`ScalarUse::role`].
    pub fn evidence(&self) -> Option<&Use> {
        match self.role() {
            ScalarRole::Dimension => self.parallel.as_ref().or(self.index.as_ref()),
            ScalarRole::SerialExtent => self.serial.as_ref(),
            ScalarRole::Flag => self.flag.as_ref(),
            ScalarRole::Value => self.value.as_ref(),
            ScalarRole::Unknown | ScalarRole::Unused => None,
        }
    }
}

/// What kind of use a climb ended at.
#[derive(Clone, Copy)]
enum Kind {
    Parallel,
    Serial,
    Index,
    Flag,
    Value,
}

impl ScalarUse {
    fn record(&mut self, kind: Kind, t: &str, n: Node) {
        let slot = match kind {
            Kind::Parallel => &mut self.parallel,
            Kind::Serial => &mut self.serial,
            Kind::Index => &mut self.index,
            Kind::Flag => &mut self.flag,
            Kind::Value => &mut self.value,
        };
        if slot.is_none() {
            *slot = Some(Use { access: text(t, n).to_string(), line: line_of(t, n.start_byte()) });
        }
    }

    fn not_followed(&mut self, t: &str, n: Node, why: &str) {
        if self.unknown.is_none() {
            self.unknown = Some(format!("{} {why}", quoted(t, n)));
        }
    }
}

/// How every integer parameter of `entry` in `src` is used, in parameter order (pointers
/// and floats left out). `headers` are other parsed files whose functions the code calls.
/// Empty when `entry` is not a function of `src`.
pub fn scalar_uses(src: &Source, headers: &[Source], entry: &str) -> Vec<ScalarUse> {
    let files: Vec<&Source> = std::iter::once(src).chain(headers).collect();
    let Some((_, body, func)) = launcher_of(src, &files, entry) else { return Vec::new() };
    parameters(src.text(), func)
        .into_iter()
        .filter(|p| !p.pointer && is_integer_parameter(src.text(), func, &p.name))
        .map(|p| {
            let walk = ScalarWalk { files: &files, visited: RefCell::new(BTreeSet::new()) };
            let mut out = ScalarUse { name: p.name.clone(), ..ScalarUse::default() };
            walk.uses(src, body, &p.name, None, &Climb { derived: false, bodies: 0, depth: 0, caller: None }, &mut out);
            out
        })
        .collect()
}

/// Whether `name`, a parameter of `func`, has an integer type (not a float, a stream, a
/// struct).
fn is_integer_parameter(t: &str, func: Node, name: &str) -> bool {
    descendants(func)
        .into_iter()
        .filter(|p| p.kind() == "parameter_declaration")
        .find(|p| p.child_by_field_name("declarator").is_some_and(|d| text(t, strip(d)) == name))
        .and_then(|p| p.child_by_field_name("type"))
        .is_some_and(|ty| {
            let ty = text(t, ty);
            let words: Vec<&str> = ty.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').collect();
            words.iter().any(|w| {
                matches!(
                    *w,
                    "int"
                        | "unsigned"
                        | "long"
                        | "short"
                        | "size_t"
                        | "int32_t"
                        | "int64_t"
                        | "uint32_t"
                        | "uint64_t"
                        | "index_t"
                        | "ssize_t"
                        | "ptrdiff_t"
                        | "bool"
                )
            })
        })
}

/// How the walk reached a use.
#[derive(Clone, Copy)]
struct Climb<'s> {
    /// The use is of a value computed from the parameter, not the parameter as given: a
    /// comparison with a constant then says nothing of a flag (`t - (width - 1) + w >= 0`).
    derived: bool,
    /// Function bodies entered.
    bodies: usize,
    /// Locals and calls followed.
    depth: usize,
    /// In a helper: the call that entered it (its file and body), where a `return`
    /// carries the value on.
    caller: Option<(&'s Source, Node<'s>, Node<'s>)>,
}

/// The most function bodies (the launcher, a wrapper, a kernel, helpers) and locals the
/// walk enters.
const MAX_SCALAR_BODIES: usize = MAX_CALL_DEPTH as usize + 2;
const MAX_SCALAR_NESTING: usize = 24;

/// Functions whose result moves with their arguments as arithmetic does: a size through
/// `min(n, 1024)` is still a size.
const TRANSPARENT_CALLS: &[&str] = &["min", "max", "umin", "umax", "std::min", "std::max", "llmin", "llmax"];

/// Prefixes of the CUDA runtime's and libraries' functions: an integer handed to one sizes
/// a copy, a fill or the library's problem.
const SIZED_CALLS: &[&str] = &["cuda", "cublas", "cudnn", "cufft", "cusparse", "cusolver", "curand", "nccl"];

struct ScalarWalk<'a, 's> {
    files: &'a [&'s Source],
    /// The variables walked so far (file, body, declaration, name): each once, so that
    /// locals built from locals (`int a1 = a0 + a0;`) cost no more than their count.
    visited: RefCell<BTreeSet<(usize, usize, usize, String)>>,
}

impl<'s> ScalarWalk<'_, 's> {
    /// Every use of `name` declared by `decl` (None: a parameter) in `root`, a function
    /// body of `file`.
    fn uses(
        &self,
        file: &'s Source,
        root: Node<'s>,
        name: &str,
        decl: Option<Node<'s>>,
        c: &Climb<'s>,
        out: &mut ScalarUse,
    ) {
        let t = file.text();
        if c.bodies >= MAX_SCALAR_BODIES || c.depth >= MAX_SCALAR_NESTING {
            return out.not_followed(t, root, "is reached through too many calls and locals");
        }
        let key = (t.as_ptr() as usize, root.id(), decl.map_or(0, |d| d.id()), name.to_string());
        if !self.visited.borrow_mut().insert(key) {
            return;
        }
        if decl.is_none() {
            if let Some(m) = macro_mentioning(self.files, name) {
                return out.not_followed(
                    t,
                    root,
                    &format!("is named by the macro `{m}`, which the walk does not read"),
                );
            }
        }
        let launches = file.launches();
        for id in descendants(root) {
            // `dim3 grid(seqlen, batch);` parses as a function declaration whose parameter
            // types are the names: the local it constructs is computed from them.
            if id.kind() == "type_identifier" && text(t, id) == name {
                if let Some((local, d)) = constructed_local(t, root, id) {
                    self.uses(file, root, &local, Some(d), &Climb { derived: true, depth: c.depth + 1, ..*c }, out);
                }
                continue;
            }
            if id.kind() != "identifier" || text(t, id) != name || is_declarator(id) {
                continue;
            }
            if declaration_of(t, root, id, name).map(|(d, _)| d.id()) != decl.map(|d| d.id()) {
                continue;
            }
            let inner = Climb { depth: c.depth + 1, ..*c };
            if let Some(l) = launches.iter().find(|l| l.config_ranges.iter().any(|r| within(r, id))) {
                let over = node_over(root, &l.config_ranges, id).unwrap_or(id);
                out.record(Kind::Parallel, t, over);
                if l.config_ranges.get(1).is_some_and(|r| within(r, id)) && out.block.is_none() {
                    out.block = Some(Use { access: text(t, over).to_string(), line: line_of(t, over.start_byte()) });
                }
                continue;
            }
            let launched =
                launches.iter().find_map(|l| l.arg_ranges.iter().position(|r| within(r, id)).map(|i| (l, i)));
            match launched {
                Some((l, i)) => {
                    // An argument computed from the parameter is derived in the kernel,
                    // unless it tests the parameter (`flag != 0` handed on as a bool).
                    let derived = c.derived || !passed_as_is(t, id, &l.arg_ranges[i]);
                    let into = Climb { derived, bodies: c.bodies + 1, caller: None, ..inner };
                    self.follow_into(t, id, &l.kernel, Some(i), &into, out, true)
                }
                None => self.climb(file, root, id, &inner, out),
            }
        }
    }

    /// Follows the parameter at `position` of `function` (a kernel when `kernel`).
    #[allow(clippy::too_many_arguments)]
    fn follow_into(
        &self,
        t: &str,
        site: Node,
        function: &str,
        position: Option<usize>,
        c: &Climb<'s>,
        out: &mut ScalarUse,
        kernel: bool,
    ) {
        let bodies: Vec<(&'s Source, Node<'s>)> = if kernel {
            self.files
                .iter()
                .flat_map(|f| {
                    f.kernels()
                        .into_iter()
                        .filter(|k| k.name == function)
                        .filter_map(move |k| f.node(&k.body, "compound_statement").map(|b| (*f, b)))
                })
                .collect()
        } else {
            functions_named(self.files, function)
                .into_iter()
                .filter_map(|(f, h)| f.node(&h.body, "compound_statement").map(|b| (f, b)))
                .collect()
        };
        let Some(&(f, body)) = bodies.first() else {
            return out.not_followed(t, site, &format!("goes to `{function}`, whose body the walk cannot read"));
        };
        let params = body.parent().map(|func| parameters(f.text(), func)).unwrap_or_default();
        match position.and_then(|i| params.get(i)) {
            Some(p) if !p.pointer => self.uses(f, body, &p.name, None, c, out),
            // `rotate(x + offset, ...)`: an offset into the pointer handed on.
            Some(_) if c.derived => out.record(Kind::Index, t, site),
            _ => out.not_followed(t, site, &format!("goes to `{function}` as something the walk does not follow")),
        }
    }

    /// From the use `n` up through the arithmetic around it to what consumes it.
    fn climb(&self, file: &'s Source, root: Node<'s>, n: Node<'s>, c: &Climb<'s>, out: &mut ScalarUse) {
        let t = file.text();
        let mut derived = c.derived;
        let mut e = n;
        loop {
            let Some(p) = up(e) else { return out.record(Kind::Value, t, e) };
            match p.kind() {
                "binary_expression" => match syntax::binary(t, p) {
                    Some(("<" | "<=" | ">" | ">=" | "==" | "!=", l, r)) => {
                        let other = if contains(l, e) { r } else { l };
                        return self.compared(file, root, p, other, derived, out);
                    }
                    Some(("&&" | "||", _, _)) => return self.tested(t, p, e, derived, out),
                    _ => {
                        derived = true;
                        e = p;
                    }
                },
                "unary_expression" => {
                    if p.child(0).is_some_and(|o| text(t, o) == "!") {
                        return self.tested(t, p, e, derived, out);
                    }
                    derived = true;
                    e = p;
                }
                // `(void)n;` marks a parameter unused: no use at all.
                "cast_expression" if p.child_by_field_name("type").is_some_and(|ty| text(t, ty).trim() == "void") => {
                    return
                }
                "cast_expression" => e = p,
                "conditional_expression" => {
                    if is_child(p, "condition", e) {
                        return self.tested(t, p, e, derived, out);
                    }
                    e = p;
                }
                "subscript_expression" => {
                    return out.record(if is_child(p, "argument", e) { Kind::Value } else { Kind::Index }, t, p);
                }
                "subscript_argument_list" => return out.record(Kind::Index, t, p.parent().unwrap_or(p)),
                "condition_clause" | "if_statement" | "while_statement" | "do_statement" | "switch_statement" => {
                    return self.tested(t, p, e, derived, out);
                }
                "for_statement" => {
                    // The step of a loop: how far apart its indices are.
                    let kind = if is_child(p, "update", e) { Kind::Index } else { Kind::Flag };
                    return out.record(kind, t, p);
                }
                // The step of a loop's counter: how far apart its indices are.
                "assignment_expression" if is_child(p, "right", e) && in_loop_update(p) => {
                    return out.record(Kind::Index, t, p);
                }
                "assignment_expression" if is_child(p, "right", e) => {
                    let left = p.child_by_field_name("left").map(strip);
                    let op = p.child_by_field_name("operator").map(|o| text(t, o)).unwrap_or("=");
                    return match left {
                        Some(l) if l.kind() == "identifier" => {
                            let target = text(t, l).to_string();
                            let owner = declaration_of(t, root, l, &target).map(|(d, _)| d);
                            match owner {
                                Some(d) => {
                                    let derived = derived || op != "=";
                                    self.uses(file, root, &target, Some(d), &Climb { derived, ..*c }, out)
                                }
                                None => out.record(Kind::Value, t, p),
                            }
                        }
                        // `params.seqlen = seqlen;`: a struct handed on whole, which the
                        // walk does not follow.
                        Some(l) if l.kind() == "field_expression" => {
                            out.not_followed(t, p, "is stored in a field of a struct, which the walk does not follow")
                        }
                        _ => out.record(Kind::Value, t, p),
                    };
                }
                "init_declarator" if is_child(p, "value", e) => return self.declared(file, root, p, derived, c, out),
                "argument_list" => return self.argument(file, root, p, e, derived, c, out),
                "initializer_list" | "argument_list_initializer" => {
                    return out.not_followed(t, p, "is used in an initializer list the walk does not follow")
                }
                // A helper's result (`return (long)r * ld + c;`) is used at its call
                // sites, which the walk does not go back to.
                "return_statement" => {
                    return match c.caller {
                        Some((f, r, call)) => self.climb(
                            f,
                            r,
                            call,
                            &Climb { derived: true, caller: None, depth: c.depth + 1, ..*c },
                            out,
                        ),
                        None => {
                            out.not_followed(t, p, "is returned from a function the walk did not enter from a call")
                        }
                    }
                }
                _ => return out.record(Kind::Value, t, p),
            }
        }
    }

    /// `e`, the parameter or a value computed from it, tested for truth at `p`.
    fn tested(&self, t: &str, p: Node, _e: Node, derived: bool, out: &mut ScalarUse) {
        out.record(if derived { Kind::Value } else { Kind::Flag }, t, p);
        // `switch (kind) { case 2: ... case 3: ... }`: the values it is compared with.
        let switch = std::iter::successors(Some(p), |n| n.parent()).take(2).find(|n| n.kind() == "switch_statement");
        if let (Some(sw), false) = (switch, derived) {
            for case in descendants(sw).into_iter().filter(|n| n.kind() == "case_statement") {
                if let Some(v) = case.child_by_field_name("value").and_then(|v| int_literal(text(t, v))) {
                    out.compared_with.insert(v);
                }
            }
        }
    }

    /// A comparison `p` of the parameter (or a value from it) with `other`.
    fn compared(
        &self,
        file: &'s Source,
        root: Node<'s>,
        p: Node<'s>,
        other: Node<'s>,
        derived: bool,
        out: &mut ScalarUse,
    ) {
        let t = file.text();
        let other = strip(other);
        if matches!(other.kind(), "number_literal" | "true" | "false" | "char_literal") || is_constant(t, other) {
            // `silu == 1` tests a flag; `t - (width - 1) + w >= 0` tells nothing.
            if !derived {
                out.record(Kind::Flag, t, p);
                if let Some(v) = int_literal(text(t, other)) {
                    out.compared_with.insert(v);
                }
            }
            return;
        }
        let kind = if threads_spread(t, root, other, 0) { Kind::Parallel } else { Kind::Serial };
        out.record(kind, t, p);
    }

    /// The value of a local declared by `init` is computed from the parameter.
    fn declared(
        &self,
        file: &'s Source,
        root: Node<'s>,
        init: Node<'s>,
        derived: bool,
        c: &Climb<'s>,
        out: &mut ScalarUse,
    ) {
        let t = file.text();
        let is_pointer = {
            let mut d = init.child_by_field_name("declarator");
            let mut pointer = false;
            while let Some(x) = d {
                if matches!(x.kind(), "pointer_declarator" | "array_declarator" | "reference_declarator") {
                    pointer = true;
                }
                d = x.child_by_field_name("declarator");
            }
            pointer
        };
        if is_pointer {
            return out.record(Kind::Index, t, init);
        }
        match declared_alias(t, init) {
            Some((local, owner)) => self.uses(file, root, &local, owner, &Climb { derived, ..*c }, out),
            None => out.record(Kind::Value, t, init),
        }
    }

    /// The parameter (or a value from it) `e` handed to a call whose argument list is
    /// `args`.
    #[allow(clippy::too_many_arguments)]
    fn argument(
        &self,
        file: &'s Source,
        root: Node<'s>,
        args: Node<'s>,
        e: Node<'s>,
        derived: bool,
        c: &Climb<'s>,
        out: &mut ScalarUse,
    ) {
        let t = file.text();
        // `dim3 grid((n + 255) / 256, rows)`: a local constructed from the parameter.
        if let Some(init) = args.parent().filter(|x| x.kind() == "init_declarator") {
            return self.declared(file, root, init, true, c, out);
        }
        let Some(call) = args.parent().filter(|x| x.kind() == "call_expression") else {
            return out.not_followed(t, args, "is handed to something the walk does not follow");
        };
        let function = call.child_by_field_name("function").map(|f| text(t, f).to_string()).unwrap_or_default();
        let short = function.rsplit("::").next().unwrap_or(&function).split('<').next().unwrap_or("").trim();
        if TRANSPARENT_CALLS.contains(&function.as_str()) || TRANSPARENT_CALLS.contains(&short) {
            return self.climb(file, root, call, &Climb { derived: true, ..*c }, out);
        }
        // The runtime's copies, fills and allocations, and the libraries' calls, are
        // sized by it.
        if SIZED_CALLS.iter().any(|p| short.starts_with(p))
            || short.starts_with("cu") && short.chars().nth(2).is_some_and(|x| x.is_uppercase())
        {
            return out.record(Kind::Parallel, t, call);
        }
        if functions_named(self.files, &function).is_empty() {
            // A function whose body the files do not hold: its result, where the code
            // uses one (`powf(beta, step)`, a library's `ceil_div(n, 128)`), is computed
            // from the parameter; a call made for what it does cannot be followed.
            if call.parent().is_some_and(|s| s.kind() == "expression_statement") {
                let name = short.to_string();
                return out.not_followed(t, call, &format!("goes to `{name}`, whose body the walk cannot read"));
            }
            return self.climb(file, root, call, &Climb { derived: true, ..*c }, out);
        }
        let position = argument_position(args, e);
        let exact = position.is_some();
        let into = Climb {
            derived: derived || !exact,
            bodies: c.bodies + 1,
            depth: c.depth + 1,
            caller: Some((file, root, call)),
        };
        self.follow_into(t, call, &function, position, &into, out, false)
    }
}

/// The local a declaration inside `root` constructs with `id` among the "parameter
/// types" of what parses as a function declarator (`dim3 grid(seqlen, batch);`): its name
/// and its declaration.
fn constructed_local<'t>(t: &str, root: Node<'t>, id: Node<'t>) -> Option<(String, Node<'t>)> {
    let param = id.parent().filter(|p| p.kind() == "parameter_declaration")?;
    let func = param.parent().filter(|l| l.kind() == "parameter_list")?.parent()?;
    let decl = func.parent().filter(|d| d.kind() == "declaration" && contains(root, *d) && d.id() != root.id())?;
    let local = func.child_by_field_name("declarator").filter(|n| n.kind() == "identifier")?;
    (func.kind() == "function_declarator").then(|| (text(t, local).to_string(), decl))
}

/// Whether the launch argument spanning `r` hands on `id` as it is, or a truth test of
/// it (`id != 0`, `!id`, `(bool)id`).
fn passed_as_is(t: &str, id: Node, r: &std::ops::Range<usize>) -> bool {
    let mut n = id;
    while n.byte_range() != *r {
        let Some(p) = n.parent().filter(|p| within(r, *p)) else { return false };
        let test = match p.kind() {
            "parenthesized_expression" | "cast_expression" => true,
            "unary_expression" => p.child(0).is_some_and(|o| text(t, o) == "!"),
            "binary_expression" => match syntax::binary(t, p) {
                Some(("==" | "!=" | ">" | "<" | ">=" | "<=", l, r)) => {
                    let other = if contains(l, n) { r } else { l };
                    matches!(strip(other).kind(), "number_literal" | "true" | "false")
                }
                _ => false,
            },
            _ => false,
        };
        if !test {
            return false;
        }
        n = p;
    }
    true
}

/// Whether `n` is in the update clause of a `for` loop.
fn in_loop_update(n: Node) -> bool {
    ancestors(n).any(|a| a.kind() == "for_statement" && a.child_by_field_name("update").is_some_and(|u| contains(u, n)))
}

/// Whether `n` lies inside the byte range `r`.
fn within(r: &std::ops::Range<usize>, n: Node) -> bool {
    r.start <= n.start_byte() && n.end_byte() <= r.end
}

/// The outermost node under `root` that covers one of `ranges` and holds `n`: the launch
/// configuration's expression, for the evidence.
fn node_over<'t>(root: Node<'t>, ranges: &[std::ops::Range<usize>], n: Node<'t>) -> Option<Node<'t>> {
    let r = ranges.iter().find(|r| within(r, n))?;
    ancestors(n)
        .take_while(|a| a.id() != root.id())
        .filter(|a| a.start_byte() >= r.start && a.end_byte() <= r.end)
        .last()
}

fn ancestors(n: Node) -> impl Iterator<Item = Node> {
    std::iter::successors(n.parent(), |p| p.parent())
}

/// A name written in capitals (`BLOCK`, `kTile`): a constant of the code.
fn is_constant(t: &str, n: Node) -> bool {
    let s = text(t, n);
    n.kind() == "identifier"
        && (s.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            || s.starts_with('k') && s.chars().nth(1).is_some_and(|c| c.is_ascii_uppercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name: role` per integer parameter.
    fn roles(src: &str, entry: &str) -> Vec<String> {
        scalar_uses(&Source::parse(src), &[], entry)
            .into_iter()
            .map(|u| format!("{}: {:?}", u.name, u.role()))
            .collect()
    }

    #[test]
    fn a_causal_convolution_has_dimensions_a_filter_width_and_a_flag() {
        let src = r#"
__global__ void conv(const float* x, const float* w, const float* bias, float* out, int dim, int seqlen,
                     int width, int silu_activation) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int c = blockIdx.y, b = blockIdx.z;
  if (t >= seqlen) return;
  float acc = bias ? bias[c] : 0.f;
  for (int k = 0; k < width; ++k) {
    int tt = t - (width - 1) + k;
    if (tt >= 0) acc += w[c * width + k] * x[(b * dim + c) * seqlen + tt];
  }
  if (silu_activation) acc = acc / (1.f + __expf(-acc));
  out[(b * dim + c) * seqlen + t] = acc;
}
extern "C" void causal_conv1d(const float* x, const float* w, const float* bias, float* out, int batch, int dim,
                              int seqlen, int width, int silu_activation, cudaStream_t s) {
  dim3 grid((seqlen + 127) / 128, dim, batch);
  conv<<<grid, 128, 0, s>>>(x, w, bias, out, dim, seqlen, width, silu_activation);
}
"#;
        assert_eq!(
            roles(src, "causal_conv1d"),
            ["batch: Dimension", "dim: Dimension", "seqlen: Dimension", "width: SerialExtent", "silu_activation: Flag"]
        );
        let u = &scalar_uses(&Source::parse(src), &[], "causal_conv1d")[3];
        assert_eq!(u.serial, Some(Use { access: "k < width".into(), line: 8 }));
        assert_eq!(u.index.as_ref().map(|u| u.access.as_str()), Some("x[(b * dim + c) * seqlen + tt]"));
    }

    #[test]
    fn a_step_count_in_arithmetic_is_a_value_even_where_it_is_tested() {
        let src = r#"
__device__ float correction(float beta, int t) { return 1.f - powf(beta, (float)t); }
__global__ void adam(float* p, const float* g, float* m, float b1, int step, int n, bool amsgrad) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    float bc = step == 1 ? 1.f - b1 : correction(b1, step);
    m[i] = b1 * m[i] + (1.f - b1) * g[i];
    p[i] -= (amsgrad ? 2.f : 1.f) * m[i] / bc;
  }
}
extern "C" void adam_step(float* p, const float* g, float* m, float b1, int step, int n, int amsgrad, cudaStream_t s) {
  if (n == 0) return;
  adam<<<264, 256, 0, s>>>(p, g, m, b1, step, n, amsgrad != 0);
}
"#;
        assert_eq!(roles(src, "adam_step"), ["step: Value", "n: Dimension", "amsgrad: Flag"]);
    }

    #[test]
    fn sizes_through_locals_helpers_wrappers_and_the_runtime_are_dimensions() {
        let src = r#"
__global__ void k(float* y, int total, int ld) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total) y[i % ld] = 0.f;
}
static void launch(float* y, int rows, int cols, int ld, cudaStream_t s) {
  int total = rows * cols;
  int blocks = min((total + 255) / 256, 4096);
  k<<<blocks, 256, 0, s>>>(y, total, ld);
}
extern "C" void run(float* y, float* z, int rows, int cols, int ld, int bytes, int unused, cudaStream_t s) {
  launch(y, rows, cols, ld, s);
  cudaMemsetAsync(z, 0, bytes, s);
}
__global__ void by_block(float* y, int cols) { y[blockIdx.y * cols + blockIdx.x] = 1.f; }
extern "C" void grid2(float* y, int cols, int rows, cudaStream_t s) {
  dim3 grid(cols, rows);
  by_block<<<grid, 1, 0, s>>>(y, cols);
}
"#;
        assert_eq!(
            roles(src, "run"),
            ["rows: Dimension", "cols: Dimension", "ld: Dimension", "bytes: Dimension", "unused: Unused"]
        );
        // `dim3 grid(cols, rows)` with bare names parses as a function declaration.
        assert_eq!(roles(src, "grid2"), ["cols: Dimension", "rows: Dimension"]);
    }

    #[test]
    fn a_serial_loop_is_told_from_a_strided_one_and_what_cannot_be_followed_is_said() {
        let src = r#"
#define CHECK(x) if (!(x)) return
__global__ void rows(const float* x, float* y, int n, int k) {
  int r = blockIdx.x;
  if (r >= n) return;
  float s = 0.f;
  for (int c = threadIdx.x; c < k; c += blockDim.x) s += x[r * k + c];
  y[r] = s;
}
__global__ void serial(const float* x, float* y, int n, int k, int mode) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  float s = 0.f;
  for (int c = 0; c < k; ++c) s += x[r * k + c];
  y[r] = mode == 2 ? s * s : s;
}
extern "C" void strided(const float* x, float* y, int n, int k, cudaStream_t st) { rows<<<n, 256, 0, st>>>(x, y, n, k); }
extern "C" void one(const float* x, float* y, int n, int k, int mode, cudaStream_t st) {
  serial<<<(n + 255) / 256, 256, 0, st>>>(x, y, n, k, mode);
}
extern "C" void opaque(float* y, int n, int odd, cudaStream_t st) { external_launch(y, n, odd, st); }
"#;
        assert_eq!(roles(src, "strided"), ["n: Dimension", "k: Dimension"]);
        assert_eq!(roles(src, "one"), ["n: Dimension", "k: SerialExtent", "mode: Flag"]);
        let u = scalar_uses(&Source::parse(src), &[], "opaque");
        assert_eq!(u[0].role(), ScalarRole::Unknown, "{u:?}");
        assert!(u[1].unknown.as_deref().unwrap().contains("`external_launch`, whose body"), "{u:?}");
    }

    /// From a review: a helper's returned index, sizes compared with constants, the block
    /// size, and a chain of locals built from locals (which once took exponential time).
    #[test]
    fn returned_indices_compared_sizes_block_sizes_and_long_chains() {
        let src = r#"
__device__ long at(int r, int c, int ld) { return (long)r * ld + c; }
__global__ void k(float* y, int ld) { y[at(blockIdx.x, threadIdx.x, ld)] = 1.f; }
template <int D> __global__ void attn(float* o, int seqlen) { if (blockIdx.x < seqlen) o[blockIdx.x * D] = 0.f; }
extern "C" void run(float* y, float* o, int rows, int cols, int ld, int head_dim, int seqlen, cudaStream_t s) {
  k<<<rows, cols, 0, s>>>(y, ld);
  if (head_dim == 64) attn<64><<<seqlen, 1, 0, s>>>(o, seqlen);
  else if (head_dim == 128) attn<128><<<seqlen, 1, 0, s>>>(o, seqlen);
}
"#;
        let u = scalar_uses(&Source::parse(src), &[], "run");
        let roles: Vec<String> = u.iter().map(|u| format!("{}: {:?}", u.name, u.role())).collect();
        assert_eq!(
            roles,
            ["rows: Dimension", "cols: Dimension", "ld: Dimension", "head_dim: Flag", "seqlen: Dimension"]
        );
        assert_eq!(u[3].compared_with, BTreeSet::from([64, 128]));
        let switched = "__global__ void k(float* y, int kind) { switch (kind) { case 2: y[0] = 1.f; break; case 3: y[0] = 2.f; break; } }\n\
                        extern \"C\" void run(float* y, int kind, cudaStream_t s) { k<<<1, 1, 0, s>>>(y, kind); }\n";
        let sw = scalar_uses(&Source::parse(switched), &[], "run");
        assert_eq!((sw[0].role(), sw[0].compared_with.clone()), (ScalarRole::Flag, BTreeSet::from([2, 3])));
        assert!(u[1].block.is_some() && u[0].block.is_none(), "{u:?}");

        let mut chain = String::from("__global__ void k(float* y, int m) { y[m] = 0.f; }\nextern \"C\" void run(float* y, int n, cudaStream_t s) {\n  int a0 = n + n;\n");
        for i in 1..20 {
            chain.push_str(&format!("  int a{i} = a{} + a{};\n", i - 1, i - 1));
        }
        chain.push_str("  k<<<1, 1, 0, s>>>(y, a19);\n}\n");
        let started = std::time::Instant::now();
        let u = scalar_uses(&Source::parse(&chain), &[], "run");
        assert!(started.elapsed().as_secs_f64() < 5.0, "{:?}", started.elapsed());
        assert_eq!(u[0].role(), ScalarRole::Dimension, "{u:?}");
    }
}
