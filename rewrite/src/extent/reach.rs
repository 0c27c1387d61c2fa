//! How far each access through a pointer reaches, following local pointers and the
//! device functions a pointer is handed to.

use super::*;

/// The largest index a use reaches (over the launcher's sizes) and the access it is.
pub(super) struct Reach {
    pub(super) hi: Poly,
    /// Some thread reaches it (see [`Upper`]).
    pub(super) tight: bool,
    pub(super) access: String,
    pub(super) line: usize,
}

/// Everything a function may use to follow a pointer.
pub(super) struct Follow<'a, 's> {
    pub(super) files: &'a [&'s Source],
    pub(super) consts: &'a BTreeMap<String, i64>,
    pub(super) calls: u32,
}

/// CUDA intrinsics and atomics that read or write exactly the element at their address.
pub(super) fn touches_one_element(function: &str) -> bool {
    function.starts_with("atomic") || function.starts_with("__ld") || function.starts_with("__st")
}

/// Every access through pointer `name` declared by `decl` (None: a parameter) in `body`,
/// each with the offsets (expressions at their own place) added on the way to it.
pub(super) fn accesses<'t>(
    body: &Body<'_, 't>,
    follow: &Follow<'_, '_>,
    name: &str,
    decl: Option<Node<'t>>,
    offsets: &[Offset],
    out: &mut Vec<Reach>,
) -> Result<(), String> {
    let t = body.t;
    let place = |n: Node| format!("line {}", line_of(t, n.start_byte()));
    for id in descendants(body.root) {
        if id.kind() != "identifier" || text(t, id) != name || is_declarator(id) {
            continue;
        }
        // Only the uses that refer to this declaration.
        let resolved = declaration_of(t, body.root, id, name).map(|(d, _)| d.id());
        if resolved != decl.map(|d| d.id()) {
            continue;
        }
        let Some(p) = up(id) else { continue };
        if (p.kind() == "assignment_expression" && is_child(p, "left", id)) || p.kind() == "update_expression" {
            return Err(format!("`{name}` is moved ({}, {})", text(t, p), place(p)));
        }
        match p.kind() {
            "subscript_expression" if is_child(p, "argument", id) => {
                let index = subscript_index(p).ok_or_else(|| format!("`{}` ({})", text(t, p), place(p)))?;
                let mut offs = offsets.to_vec();
                offs.push(body.offset(index));
                // `&x[i]` is a pointer like `x + i`; a value `x[i]` is an access.
                let addr =
                    up(p).filter(|q| q.kind() == "pointer_expression" && q.child(0).is_some_and(|o| text(t, o) == "&"));
                match addr {
                    Some(a) => derived(body, follow, a, &offs, out)?,
                    None => reach(t, p, &offs, out)?,
                }
            }
            "binary_expression" => match syntax::binary(t, p) {
                Some(("+", l, r)) => {
                    let other = if strip_parens(l).id() == id.id() { r } else { l };
                    let mut offs = offsets.to_vec();
                    offs.push(body.offset(other));
                    derived(body, follow, p, &offs, out)?;
                }
                // Null checks read no element.
                Some(("==" | "!=" | "&&" | "||", _, _)) => {}
                _ => return Err(format!("`{name}` is used in `{}` ({})", text(t, p), place(p))),
            },
            "condition_clause" => {}
            "unary_expression" if p.child(0).is_some_and(|o| text(t, o) == "!") => {}
            _ => derived(body, follow, id, offsets, out)?,
        }
    }
    Ok(())
}

/// One term of the index an access reaches: its bounds and how it is written.
#[derive(Clone)]
pub(super) struct Offset {
    pub(super) bounds: Bounds,
    pub(super) text: String,
}

impl Offset {
    pub(super) fn constant(c: i64) -> Offset {
        Offset { bounds: Bounds::constant(c), text: c.to_string() }
    }
}

/// Records an access at the sum of `offsets`.
pub(super) fn reach(t: &str, at: Node, offsets: &[Offset], out: &mut Vec<Reach>) -> Result<(), String> {
    let mut hi = Poly::constant(0);
    let mut tight = true;
    for o in offsets {
        let h = o.bounds.hi.as_ref().ok_or_else(|| {
            format!("nothing bounds `{}` in `{}` (line {})", o.text, text(t, at), line_of(t, at.start_byte()))
        })?;
        hi = hi.add(&h.p).ok_or("an index overflows")?;
        tight &= h.tight;
    }
    out.push(Reach { hi, tight, access: text(t, at).to_string(), line: line_of(t, at.start_byte()) });
    Ok(())
}

/// A pointer expression `d` (`x`, `x + i`, `&x[i]`) at the given offsets: what is done
/// with it.
pub(super) fn derived<'t>(
    body: &Body<'_, 't>,
    follow: &Follow<'_, '_>,
    d: Node<'t>,
    offsets: &[Offset],
    out: &mut Vec<Reach>,
) -> Result<(), String> {
    let t = body.t;
    let place = format!("line {}", line_of(t, d.start_byte()));
    let Some(p) = up(d) else { return Err(format!("`{}` ({place})", text(t, d))) };
    match p.kind() {
        "pointer_expression" if p.child(0).is_some_and(|o| text(t, o) == "*") => reach(t, p, offsets, out),
        "subscript_expression" if is_child(p, "argument", d) => {
            let index = subscript_index(p).ok_or_else(|| format!("`{}` ({place})", text(t, p)))?;
            let mut offs = offsets.to_vec();
            offs.push(body.offset(index));
            reach(t, p, &offs, out)
        }
        "binary_expression" => match syntax::binary(t, p) {
            Some(("+", l, r)) => {
                let other = if strip_parens(l).id() == d.id() { r } else { l };
                let mut offs = offsets.to_vec();
                offs.push(body.offset(other));
                derived(body, follow, p, &offs, out)
            }
            Some(("==" | "!=", _, _)) => Ok(()),
            _ => Err(format!("`{}` ({place}) is pointer arithmetic the analysis does not follow", text(t, p))),
        },
        "init_declarator" if is_child(p, "value", d) => {
            let pointer = p.child_by_field_name("declarator").is_some_and(|x| x.kind() == "pointer_declarator");
            match declared_alias(t, p).filter(|_| pointer) {
                Some((alias, owner)) => accesses(body, follow, &alias, owner, offsets, out),
                None => Err(format!("`{}` ({place}) is stored as another type", text(t, p))),
            }
        }
        "argument_list" => {
            let call = p.parent().filter(|c| c.kind() == "call_expression");
            let function = call.and_then(|c| c.child_by_field_name("function")).map(|f| text(t, f).to_string());
            let Some(function) = function else { return Err(format!("`{}` ({place})", text(t, p))) };
            if touches_one_element(&function) {
                return reach(t, d, offsets, out);
            }
            let callee_reach = argument_position(p, d).and_then(|i| callee_extent(follow, &function, i));
            match callee_reach {
                Some(Ok(c)) => {
                    let mut offs = offsets.to_vec();
                    offs.push(Offset::constant(c));
                    reach(t, call.unwrap_or(d), &offs, out)
                }
                Some(Err(why)) => Err(format!("`{}` ({place}): {why}", text(t, call.unwrap_or(p)))),
                None => Err(format!(
                    "`{}` ({place}) hands the pointer to `{function}`, whose body the analysis cannot read",
                    text(t, call.unwrap_or(p))
                )),
            }
        }
        "cast_expression" => Err(format!("`{}` ({place}) casts the pointer to another type", text(t, p))),
        _ => Err(format!("`{}` ({place}) uses the pointer in a way the analysis does not follow", text(t, p))),
    }
}

/// The largest element a device function reaches through its parameter `index`, when
/// that is a fixed number (None: no such function in the files).
pub(super) fn callee_extent(follow: &Follow<'_, '_>, function: &str, index: usize) -> Option<Result<i64, String>> {
    if follow.calls >= MAX_CALL_DEPTH {
        return Some(Err(format!("calls nest deeper than {MAX_CALL_DEPTH} functions")));
    }
    let short = function.rsplit("::").next().unwrap_or(function);
    let short = short.split('<').next().unwrap_or(short).trim();
    for (f, h) in functions_named(follow.files, function) {
        let Some(root) = f.node(&h.body, "compound_statement") else { continue };
        let Some(func) = root.parent() else { continue };
        let params = parameters(f.text(), func);
        let Some(param) = params.get(index).filter(|p| p.pointer) else { continue };
        let body = Body {
            t: f.text(),
            root,
            params: params.iter().filter(|p| !p.pointer).map(|p| (p.name.clone(), None)).collect(),
            grid: [None, None, None],
            block: [None, None, None],
            consts: follow.consts,
            depth: Cell::new(0),
            steps: Cell::new(0),
            assigned: RefCell::new(BTreeMap::new()),
            tables: BTreeMap::new(),
            tables_used: RefCell::new(BTreeSet::new()),
        };
        let inner = Follow { files: follow.files, consts: follow.consts, calls: follow.calls + 1 };
        let mut reaches = Vec::new();
        if let Err(why) = accesses(&body, &inner, &param.name, None, &[], &mut reaches) {
            return Some(Err(format!("in `{short}`, {why}")));
        }
        let mut best: Option<i64> = None;
        for r in &reaches {
            match r.hi.as_constant() {
                Some(c) => best = Some(best.map_or(c, |b| b.max(c))),
                None => {
                    return Some(Err(format!(
                        "`{short}` reaches `{}` (line {}), which depends on its other arguments",
                        r.access, r.line
                    )))
                }
            }
        }
        return Some(best.ok_or_else(|| format!("`{short}` never reads or writes through it")));
    }
    None
}

// ---------------------------------------------------------------------------------------
// The launcher.
