//! What the syntax says about names: parameters, constants and macros, where a name is
//! declared, what writes it.

use super::*;

pub(super) struct ParamDecl {
    pub(super) name: String,
    pub(super) pointer: bool,
}

/// The parameters of a function definition: names and whether each is a pointer.
pub(super) fn parameters(t: &str, func: Node) -> Vec<ParamDecl> {
    let mut d = func.child_by_field_name("declarator");
    while let Some(x) = d {
        if x.kind() == "function_declarator" {
            break;
        }
        d = x.child_by_field_name("declarator");
    }
    let Some(list) = d.and_then(|d| d.child_by_field_name("parameters")) else { return Vec::new() };
    let mut out = Vec::new();
    for p in named_children(list).into_iter().filter(|p| p.kind() == "parameter_declaration") {
        let mut pointer = false;
        let mut d = p.child_by_field_name("declarator");
        while let Some(x) = d {
            match x.kind() {
                "identifier" => break,
                "pointer_declarator" | "array_declarator" => pointer = true,
                _ => {}
            }
            d = x.child_by_field_name("declarator");
        }
        if let Some(id) = d {
            out.push(ParamDecl { name: text(t, id).to_string(), pointer });
        }
    }
    out
}

/// Integer macros (`#define BLOCK 256`) and file-scope integer constants of every file;
/// a name defined twice with different values is left out.
pub(super) fn constants(files: &[&Source]) -> BTreeMap<String, i64> {
    let mut seen: BTreeMap<String, Option<i64>> = BTreeMap::new();
    for f in files {
        let t = f.text();
        for n in descendants(f.root()) {
            let found = match n.kind() {
                "preproc_def" => {
                    let name = n.child_by_field_name("name").map(|x| text(t, x).to_string());
                    let value = n
                        .child_by_field_name("value")
                        .and_then(|v| int_literal(text(t, v).trim().trim_start_matches('(').trim_end_matches(')')));
                    name.zip(value)
                }
                "declaration"
                    if n.parent().is_some_and(|p| matches!(p.kind(), "translation_unit" | "declaration_list")) =>
                {
                    let constant = children(n).iter().any(|c| {
                        matches!(text(t, *c), "const" | "constexpr")
                            && matches!(c.kind(), "type_qualifier" | "storage_class_specifier")
                    }) || text(t, n).starts_with("constexpr");
                    match syntax::single_declarator(t, n) {
                        Some((name, Some(v))) if constant => int_literal(text(t, strip(v))).map(|x| (name, x)),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some((name, value)) = found {
                let e = seen.entry(name).or_insert(Some(value));
                if *e != Some(value) {
                    *e = None;
                }
            }
        }
    }
    seen.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect()
}

/// A macro of the files whose body names `name`.
pub(super) fn macro_mentioning(files: &[&Source], name: &str) -> Option<String> {
    files.iter().find_map(|f| {
        let t = f.text();
        descendants(f.root()).into_iter().find_map(|n| {
            if !matches!(n.kind(), "preproc_def" | "preproc_function_def") {
                return None;
            }
            let body = n.child_by_field_name("value").map(|v| text(t, v)).unwrap_or("");
            let macro_name = n.child_by_field_name("name").map(|x| text(t, x)).unwrap_or("");
            syntax::mentions_word(body, name).then(|| macro_name.to_string())
        })
    })
}

pub(super) fn line_of(t: &str, at: usize) -> usize {
    t.as_bytes()[..at.min(t.len())].iter().filter(|b| **b == b'\n').count() + 1
}

/// The node's parent, past parentheses.
pub(super) fn up(n: Node) -> Option<Node> {
    let mut p = n.parent()?;
    while p.kind() == "parenthesized_expression" {
        p = p.parent()?;
    }
    Some(p)
}

pub(super) fn is_child(parent: Node, field: &str, n: Node) -> bool {
    parent.child_by_field_name(field).is_some_and(|c| strip_parens(c).id() == n.id() || c.id() == n.id())
}

pub(super) fn contains(outer: Node, inner: Node) -> bool {
    outer.start_byte() <= inner.start_byte() && inner.end_byte() <= outer.end_byte()
}

/// The declaration a use of `name` at `at` refers to, looking outwards from `at` through
/// the enclosing blocks up to `root`: the declaring statement (a declaration, or the
/// `for` whose initializer declares it) and the initializer value, if any.
pub(super) fn declaration_of<'t>(
    t: &str,
    root: Node<'t>,
    at: Node<'t>,
    name: &str,
) -> Option<(Node<'t>, Option<Node<'t>>)> {
    let mut child = at;
    let mut n = at.parent();
    while let Some(p) = n {
        match p.kind() {
            "compound_statement" => {
                let mut found = None;
                for s in named_children(p) {
                    if s.end_byte() > child.start_byte() {
                        break;
                    }
                    if s.kind() == "declaration" {
                        if let Some(v) = declared_in(t, s, name) {
                            found = Some((s, v));
                        }
                    }
                }
                if found.is_some() {
                    return found;
                }
            }
            "for_statement" => {
                if let Some(init) = p.child_by_field_name("initializer").filter(|i| i.kind() == "declaration") {
                    if init.id() != child.id() {
                        if let Some(v) = declared_in(t, init, name) {
                            return Some((p, v));
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
    None
}

/// Whether declaration `d` declares `name`: Some(initializer) if so.
pub(super) fn declared_in<'t>(t: &str, d: Node<'t>, name: &str) -> Option<Option<Node<'t>>> {
    let mut c = d.walk();
    for decl in d.children_by_field_name("declarator", &mut c) {
        let (mut target, mut value) = if decl.kind() == "init_declarator" {
            (decl.child_by_field_name("declarator"), decl.child_by_field_name("value"))
        } else {
            (Some(decl), None)
        };
        while let Some(x) = target {
            if x.kind() == "identifier" {
                break;
            }
            // `dim3 grid(H, B);` parses as a function declarator: its "parameters" are the
            // constructor's arguments.
            if x.kind() == "function_declarator" {
                value = x.child_by_field_name("parameters");
            }
            target = x.child_by_field_name("declarator");
        }
        if target.is_some_and(|x| text(t, x) == name) {
            return Some(value);
        }
    }
    None
}

/// The identifier a declaration statement introduces for `name` (to skip it as a use).
pub(super) fn is_declarator(n: Node) -> bool {
    let Some(p) = n.parent() else { return false };
    match p.kind() {
        "init_declarator" | "pointer_declarator" | "array_declarator" => is_child(p, "declarator", n),
        "declaration" | "parameter_declaration" => is_child(p, "declarator", n),
        _ => false,
    }
}

/// Assignments to `name` under `root` (`=`, `+=`, `++`): the identifiers they write.
pub(super) fn writes<'t>(t: &str, root: Node<'t>, name: &str) -> Vec<Node<'t>> {
    descendants(root)
        .into_iter()
        .filter_map(|n| match n.kind() {
            "assignment_expression" => n.child_by_field_name("left"),
            "update_expression" => n.child_by_field_name("argument"),
            _ => None,
        })
        .map(strip)
        .filter(|target| target.kind() == "identifier" && text(t, *target) == name)
        .collect()
}

/// Where `d` stands among the arguments of the argument list `args` (comments aside).
pub(super) fn argument_position(args: Node, d: Node) -> Option<usize> {
    named_children(args)
        .into_iter()
        .filter(|c| c.kind() != "comment")
        .position(|a| a.id() == d.id() || strip_parens(a).id() == d.id())
}

/// The functions with a body named `function` (as called: `ns::f`, `f<T>`) in `files`,
/// each with the file it is in.
pub(super) fn functions_named<'s>(files: &[&'s Source], function: &str) -> Vec<(&'s Source, crate::source::HostFn)> {
    let short = function.rsplit("::").next().unwrap_or(function);
    let short = short.split('<').next().unwrap_or(short).trim();
    files
        .iter()
        .flat_map(|f| {
            f.host_functions()
                .into_iter()
                .filter(|h| h.name == short || h.name.ends_with(&format!("::{short}")))
                .map(move |h| (*f, h))
        })
        .collect()
}

/// A local pointer declared by the init declarator `init`: its name and the statement
/// that owns it (the declaration, or the `for` whose initializer it is). None when `init`
/// is not in a declaration statement.
pub(super) fn declared_alias<'t>(t: &str, init: Node<'t>) -> Option<(String, Option<Node<'t>>)> {
    let decl = init.parent().filter(|x| x.kind() == "declaration")?;
    let mut x = init.child_by_field_name("declarator")?;
    while x.kind() != "identifier" {
        x = x.child_by_field_name("declarator")?;
    }
    let owner = if decl.parent().is_some_and(|p| p.kind() == "for_statement") { decl.parent() } else { Some(decl) };
    Some((text(t, x).to_string(), owner))
}

/// Whether the expression `n` is an index the grid's threads spread over: it mentions
/// `threadIdx`, `blockIdx`, `blockDim` or `gridDim`, or a local computed from one (a
/// loop counter that starts at one), up to a few locals deep.
pub(super) fn threads_spread(t: &str, root: Node, n: Node, depth: usize) -> bool {
    if depth > 8 {
        return false;
    }
    descendants(n).into_iter().any(|x| {
        if builtin(t, x).is_some() {
            return true;
        }
        if x.kind() != "identifier" {
            return false;
        }
        let name = text(t, x);
        match declaration_of(t, root, x, name) {
            Some((_, Some(init))) => threads_spread(t, root, init, depth + 1),
            // Declared without a value: what is assigned to it.
            Some((d, None)) => {
                let scope = d.parent().unwrap_or(root);
                writes(t, scope, name).into_iter().any(|w| {
                    w.parent()
                        .and_then(|a| a.child_by_field_name("right"))
                        .is_some_and(|r| threads_spread(t, root, r, depth + 1))
                })
            }
            None => false,
        }
    })
}

/// The launcher `entry` of `src` among `files` (`src` and the headers it reads): the
/// function, its body and its definition. None where it is not in `src`, or where a file
/// nests deeper than the walks go.
pub(super) fn launcher_of<'s>(
    src: &'s Source,
    files: &[&Source],
    entry: &str,
) -> Option<(crate::source::HostFn, Node<'s>, Node<'s>)> {
    if files.iter().any(|f| f.max_depth() > crate::source::MAX_DEPTH) {
        return None;
    }
    let host = src.host_functions().into_iter().find(|h| h.name == entry)?;
    let body = src.node(&host.body, "compound_statement")?;
    let func = body.parent()?;
    Some((host, body, func))
}

/// A use as a reason quotes it: "`x[i] = v` (line 12)", one line of at most 60 characters.
pub(super) fn quoted(t: &str, n: Node) -> String {
    format!("`{}` (line {})", syntax::one_line(text(t, n), 60), line_of(t, n.start_byte()))
}

/// The type a C++ cast call converts to (`reinterpret_cast<float4*>(p)`: `float4*`), as
/// written by `function`, the call's function; None for any other call.
pub(super) fn cast_target(function: &str) -> Option<&str> {
    ["reinterpret_cast<", "static_cast<", "const_cast<"]
        .iter()
        .find_map(|c| function.strip_prefix(c))
        .and_then(|r| r.strip_suffix('>'))
}
