//! The launcher: each pointer argument's extent from the kernels it launches.

use super::*;

/// The launcher's body: exact values of its expressions over its integer parameters.
pub(super) struct Launcher<'s, 't> {
    pub(super) t: &'s str,
    pub(super) body: Node<'t>,
    pub(super) sizes: &'s [String],
    pub(super) consts: &'s BTreeMap<String, i64>,
    pub(super) depth: Cell<u32>,
}

impl<'t> Launcher<'_, 't> {
    /// The exact value of an expression of the launcher, when it is a polynomial.
    pub(super) fn value(&self, n: Node<'t>) -> Option<Poly> {
        if self.depth.get() >= MAX_DEPTH {
            return None;
        }
        self.depth.set(self.depth.get() + 1);
        let v = self.value_inner(n);
        self.depth.set(self.depth.get() - 1);
        v
    }

    pub(super) fn value_inner(&self, n: Node<'t>) -> Option<Poly> {
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
    pub(super) fn name_value(&self, name: &str, at: Node<'t>) -> Option<Poly> {
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
    pub(super) fn dims(&self, n: Node<'t>) -> [Option<Poly>; 3] {
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
    pub(super) fn other_use(&self, name: &str, launches: &[crate::source::Launch]) -> Option<usize> {
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
pub(super) fn launcher_pointer(
    launcher: &Launcher,
    src: &Source,
    files: &[&Source],
    kernels: &[crate::source::Kernel],
    launches: &[crate::source::Launch],
    name: &str,
    tables: &mut IndexTables,
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
            let base = argument_offset(launcher, l, i, strip_parens(arg), name)?;
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
            // Index tables handed to the kernel as they are, under its parameter's name.
            let mut kernel_tables = BTreeMap::new();
            for (j, kp) in kernel.params.iter().enumerate().filter(|(_, kp)| kp.pointer) {
                if let Some((table, hi)) = l.args.get(j).and_then(|a| tables.known.get_key_value(a.trim())) {
                    if rows_only(t, root, &kp.name) {
                        kernel_tables.insert(kp.name.clone(), (hi.clone(), table.clone()));
                    }
                }
            }
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
                tables: kernel_tables,
                tables_used: RefCell::new(BTreeSet::new()),
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
            tables.used.extend(body.tables_used.take());
            reaches.extend(found);
        }
    }
    if !passed {
        return Err(format!("`{name}` is passed to no kernel launched from the launcher"));
    }
    farthest(launcher, reaches, name)
}

/// Index tables: the launcher's integer inputs whose values index other arrays, each
/// with the largest value it holds; and the ones some extent counted on.
pub(super) struct IndexTables<'a> {
    pub(super) known: &'a BTreeMap<String, Poly>,
    pub(super) used: BTreeSet<String>,
}

/// Whether every value the kernel body `root` reads from the table `table` picks a row:
/// it only multiplies a row's size (`ids[r] * d`, `blk * block_size`), directly or
/// through a local. A value added to a multiple of another size (`k * V + code[i]`) is an
/// index within a range the code does not state, so it is no row of the table's length.
fn rows_only(t: &str, root: Node, table: &str) -> bool {
    // The read times a row size, in a sum with no other product of sizes: a row of the
    // table (`ids[r] * d + c`), not an offset inside a block of rows (`k * V * d +
    // codes[i] * d + c`, where the codes lie within V).
    let scaled = |n: Node| {
        let mut e = n;
        while let Some(p) = up(e).filter(|p| p.kind() == "cast_expression") {
            e = p;
        }
        let Some(product) = up(e).filter(|p| matches!(syntax::binary(t, *p), Some(("*", _, _)))) else { return false };
        let mut sum = product;
        while let Some(p) = up(sum).filter(|p| matches!(syntax::binary(t, *p), Some(("+" | "-", _, _)))) {
            sum = p;
        }
        syntax::flatten(t, sum, "+")
            .into_iter()
            .filter(|x| !contains(*x, product) && !contains(product, *x))
            .all(|x| !matches!(syntax::binary(t, strip(x)), Some(("*", _, _))))
    };
    let mut reads = 0;
    for n in descendants(root) {
        let is_read = n.kind() == "subscript_expression"
            && n.child_by_field_name("argument").map(strip).is_some_and(|a| {
                a.kind() == "identifier" && text(t, a) == table && declaration_of(t, root, a, table).is_none()
            });
        if !is_read {
            continue;
        }
        reads += 1;
        let mut e = n;
        while let Some(p) = up(e).filter(|p| p.kind() == "cast_expression") {
            e = p;
        }
        match up(e) {
            Some(init) if init.kind() == "init_declarator" => {
                let Some((local, owner)) = declared_alias(t, init) else { return false };
                let uses: Vec<Node> = descendants(root)
                    .into_iter()
                    .filter(|x| x.kind() == "identifier" && text(t, *x) == local && !is_declarator(*x))
                    .filter(|x| declaration_of(t, root, *x, &local).map(|(d, _)| d.id()) == owner.map(|d| d.id()))
                    .collect();
                if uses.is_empty() || !uses.into_iter().all(scaled) {
                    return false;
                }
            }
            _ if scaled(n) => {}
            _ => return false,
        }
    }
    reads > 0
}

/// Where argument `i` of launch `l` points in `name`: `name` itself, or `name + offset`
/// with the offset an exact launcher value.
fn argument_offset(
    launcher: &Launcher,
    l: &crate::source::Launch,
    i: usize,
    arg: Node,
    name: &str,
) -> Result<Poly, String> {
    let t = launcher.t;
    if syntax::is_ident(t, arg, name) && arg.kind() == "identifier" {
        return Ok(Poly::constant(0));
    }
    match syntax::binary(t, arg) {
        Some(("+", a, b)) if strip_parens(a).kind() == "identifier" && text(t, strip_parens(a)) == name => {
            launcher.value(b).ok_or_else(|| {
                format!(
                    "`{}` (line {}): the offset is not a polynomial of the sizes",
                    l.args[i],
                    line_of(t, arg.start_byte())
                )
            })
        }
        _ => Err(format!(
            "`{}` passes `{name}` to `{}` in a form the analysis does not follow (line {})",
            l.args[i],
            l.kernel,
            line_of(t, arg.start_byte())
        )),
    }
}

/// The farthest of the reaches through one pointer, which must be tight: some thread
/// touches its last element.
fn farthest(launcher: &Launcher, reaches: Vec<Reach>, name: &str) -> Result<(Poly, String, usize), String> {
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
