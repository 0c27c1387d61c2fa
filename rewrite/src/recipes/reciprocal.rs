//! Divisions by a value that holds over a loop, as multiplications by its reciprocal
//! computed once: `x / s` (or `x /= s`, `__fdividef(x, s)`) inside a loop, where `s` is a
//! float parameter or a float local declared once and never changed, becomes
//! `x * ns_rcp_s`, with `const float ns_rcp_s = 1.0f / s;` right after `s`'s declaration
//! (at the top of the body for a parameter). A float literal divisor becomes the folded
//! constant `(1.0f / L)`. An IEEE division is a reciprocal, a Newton step and a range
//! check (FCHK and its slow path) per element; the product is one FMUL.
//!
//! Not exact: `x * RN(1/s)` is rounded twice (2^-24 each), and a divisor past 2^126 has a
//! subnormal reciprocal (2^-22). [`ERROR`] is offered only where every output admits it
//! ([`crate::precision`]): an int8 output checked to one unit does, as does fp32 at rtol
//! 1e-6. Divisors below 2^-126 (subnormal) leave that range: the reciprocal overflows,
//! and the check decides. In place, no assumption to check.
//!
//! "Never changed" is read from the whole function: no assignment, `++`/`--`, `&s`,
//! reference bound to it, bare argument to a call that is not a value builtin, macro whose
//! text names it, or inline assembly that names it. A name declared twice in the function
//! (shadowing) is not taken, so every site means the one declaration. Sites inside a
//! lambda or a local class are left alone (their captures are theirs).

use super::speculate::value_builtin;
use crate::facts::Facts;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params, Rewrite};
use crate::source::Source;
use crate::syntax::{self, binary, descendants, named_children, strip_parens, text};
use crate::target_kernels;
use crate::version::{self, Change};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[];

/// The relative error of `x * RN(1/s)` against `x / s`: two roundings of 2^-24, or a
/// subnormal reciprocal (2^-22) for divisors past 2^126.
pub const ERROR: f64 = 2.4e-7;

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let kernels = target_kernels(src, params)?;
    let t = src.text();
    let root = src.root();
    if syntax::has_reference_alias(t, root) {
        return Err(NotApplicable::new(
            "the file names a reference type through an alias: a declaration of it may change a divisor unseen",
        ));
    }
    let Some(first) = kernels.first() else { return Err(NotApplicable::new("no kernel")) };
    let mut ranges: Vec<std::ops::Range<usize>> = kernels.iter().map(|k| k.body.clone()).collect();
    ranges.extend(src.host_functions().into_iter().filter(|f| f.is_device).map(|f| f.body));
    let mut change = Change::new(first);
    let mut taken_names: BTreeSet<String> = BTreeSet::new();
    let mut done: Vec<String> = Vec::new();
    let mut why: BTreeSet<String> = BTreeSet::new();
    for r in &ranges {
        let Some(body) = src.node(r, "compound_statement") else { continue };
        let Some(f) = body.parent().filter(|f| f.kind() == "function_definition") else { continue };
        let name = function_name(t, f);
        match plan(t, root, f, body, &mut taken_names) {
            Ok(p) if p.sites.is_empty() => {
                if let Some(w) = p.skipped {
                    why.insert(format!("`{name}`: {w}"));
                }
            }
            Ok(p) => {
                let total: usize = p.sites.values().sum();
                done.push(format!(
                    "`{name}`: {total} division(s) by {}",
                    p.sites.iter().map(|(d, n)| format!("`{d}` ({n})")).collect::<Vec<_>>().join(", ")
                ));
                change.edits.extend(p.edits);
            }
            Err(w) => {
                why.insert(format!("`{name}`: {w}"));
            }
        }
    }
    if done.is_empty() {
        let why = if why.is_empty() {
            "no float division inside a loop by a value that holds over it (a float parameter or local declared once and never changed, or a float literal)".to_string()
        } else {
            why.into_iter().collect::<Vec<_>>().join("; ")
        };
        return Err(NotApplicable::new(why));
    }
    if let Some(r) = facts.refusal(ERROR) {
        return Err(NotApplicable::new(format!(
            "output `{}` does not admit a quotient through a reciprocal (off by up to {ERROR:.1e} relative): {}",
            r.output, r.why
        )));
    }
    let source = version::apply(src, vec![change])?;
    Ok(Rewrite {
        source,
        description: format!(
            "divisions in loops as multiplications by a reciprocal computed once: {}",
            done.join("; ")
        ),
        guards: Vec::new(),
    })
}

fn function_name(t: &str, f: Node) -> String {
    descendants(f)
        .into_iter()
        .find(|d| d.kind() == "function_declarator")
        .and_then(|d| d.child_by_field_name("declarator"))
        .map_or("?".into(), |n| text(t, n).to_string())
}

/// One function's edits, with the sites rewritten per divisor as written.
struct Plan {
    edits: crate::edit::Edits,
    sites: BTreeMap<String, usize>,
    /// Why a division in a loop was left, when none was taken.
    skipped: Option<String>,
}

/// Where a name's value is fixed.
enum Origin<'t> {
    /// A parameter passed by value.
    Parameter,
    /// A local declared with an initializer as a statement of a block.
    Local(Node<'t>),
    /// Any other declaration: an array, pointer or reference, `static`, `__shared__`,
    /// `volatile`, no initializer, a condition's or a range-for's.
    Other,
}

fn plan<'t>(
    t: &str,
    root: Node<'t>,
    f: Node<'t>,
    body: Node<'t>,
    taken_names: &mut BTreeSet<String>,
) -> Result<Plan, String> {
    let floats = super::intrinsics::float_names(t, body);
    let types = declared_types(t, root, f);
    let origins = declarations(t, f);
    let changed = changed_names(t, root, f, body);
    let mut edits = crate::edit::Edits::new();
    let mut sites: BTreeMap<String, usize> = BTreeMap::new();
    let mut skipped = None;
    // One reciprocal per divisor name, declared once.
    let mut reciprocal_of: HashMap<String, String> = HashMap::new();
    let mut chosen: Vec<std::ops::Range<usize>> = Vec::new();
    for d in descendants(body) {
        let Some(site) = division(t, d, &floats, &types) else { continue };
        if !in_loop_of(d, f)
            || syntax::unevaluated(d)
            || chosen.iter().any(|c| c.start <= d.start_byte() && d.end_byte() <= c.end)
        {
            continue;
        }
        let divisor = strip_parens(site.divisor);
        let dtext = text(t, divisor).to_string();
        let replacement = if divisor.kind() == "number_literal" {
            format!("(1.0f / {dtext})")
        } else if divisor.kind() == "identifier" {
            let why_not = match origins.get(&dtext) {
                _ if floats.get(&dtext).is_none_or(|ty| ty != "float") => Some("is not declared float here"),
                None => Some("is not a parameter or local of the function"),
                Some(v) if v.len() != 1 => Some("is declared more than once in the function"),
                _ if changed.contains(&dtext) => Some("changes in the function"),
                Some(v) => match &v[0] {
                    Origin::Other => Some("is not a parameter passed by value or a local with an initializer"),
                    Origin::Parameter => None,
                    Origin::Local(decl) => {
                        let block = decl.parent();
                        let scoped = block
                            .is_some_and(|b| b.start_byte() <= d.start_byte() && d.end_byte() <= b.end_byte())
                            && decl.end_byte() <= d.start_byte();
                        let loop_after = scoped && loop_between(d, block.unwrap(), decl.end_byte());
                        if !scoped {
                            Some("is not in scope at the division")
                        } else if !loop_after {
                            Some("is declared inside the loop around the division")
                        } else {
                            None
                        }
                    }
                },
            };
            if let Some(w) = why_not {
                skipped.get_or_insert_with(|| format!("the divisor `{dtext}` {w}"));
                continue;
            }
            let name = match reciprocal_of.get(&dtext) {
                Some(n) => n.clone(),
                None => {
                    let n = fresh_name(t, &format!("ns_rcp_{dtext}"), taken_names);
                    let decl = format!("const float {n} = 1.0f / {dtext};");
                    match &origins[&dtext][0] {
                        Origin::Parameter => {
                            let at = body.start_byte() + 1;
                            let indent = named_children(body)
                                .first()
                                .map(|s| syntax::indent_at(t, s.start_byte()))
                                .unwrap_or_else(|| "  ".into());
                            edits.insert(at, format!("\n{indent}{decl}"));
                        }
                        Origin::Local(dn) => {
                            let indent = syntax::indent_at(t, dn.start_byte());
                            edits.insert(dn.end_byte(), format!("\n{indent}{decl}"));
                        }
                        Origin::Other => unreachable!("only parameters and locals reach here"),
                    }
                    reciprocal_of.insert(dtext.clone(), n.clone());
                    n
                }
            };
            name
        } else {
            skipped.get_or_insert_with(|| {
                format!("the divisor `{}` is an expression, not a name or a literal", syntax::one_line(&dtext, 40))
            });
            continue;
        };
        let dividend = text(t, site.dividend);
        let atomic = matches!(
            site.dividend.kind(),
            "identifier"
                | "call_expression"
                | "subscript_expression"
                | "number_literal"
                | "parenthesized_expression"
                | "field_expression"
        );
        let new = match (site.compound, atomic) {
            (true, _) => format!("{dividend} *= {replacement}"),
            (false, true) => format!("{dividend} * {replacement}"),
            (false, false) => format!("({dividend}) * {replacement}"),
        };
        edits.replace(d.byte_range(), new);
        chosen.push(d.byte_range());
        *sites.entry(dtext).or_default() += 1;
    }
    Ok(Plan { edits, sites, skipped })
}

/// A float division: `a / b`, `a /= b` or `__fdividef(a, b)`, where `b` is a float name
/// or literal and `a` is float or holds nothing that can be double (a double quotient
/// keeps its division).
struct Division<'t> {
    dividend: Node<'t>,
    divisor: Node<'t>,
    compound: bool,
}

fn division<'t>(
    t: &str,
    d: Node<'t>,
    floats: &HashMap<String, String>,
    types: &HashMap<String, String>,
) -> Option<Division<'t>> {
    let (dividend, divisor, compound) = match d.kind() {
        "binary_expression" => {
            let (op, l, r) = binary(t, d)?;
            (op == "/").then_some((l, r, false))?
        }
        "assignment_expression" => {
            let op = d.child_by_field_name("operator")?;
            (text(t, op) == "/=").then_some(())?;
            (d.child_by_field_name("left")?, d.child_by_field_name("right")?, true)
        }
        "call_expression" => {
            let f = d.child_by_field_name("function")?;
            (text(t, f) == "__fdividef").then_some(())?;
            let args: Vec<Node> = named_children(d.child_by_field_name("arguments")?)
                .into_iter()
                .filter(|a| a.kind() != "comment")
                .collect();
            if args.len() != 2 {
                return None;
            }
            (args[0], args[1], false)
        }
        _ => return None,
    };
    let is_float = |n| super::intrinsics::is_float(t, n, floats);
    (is_float(divisor) && (is_float(dividend) || never_double(t, dividend, types))).then_some(Division {
        dividend,
        divisor,
        compound,
    })
}

/// Whether nothing in an expression can be double: every name it reads has a declared
/// type that is neither double nor deduced (`auto`), and no literal or cast is double.
fn never_double(t: &str, e: Node, types: &HashMap<String, String>) -> bool {
    descendants(e).into_iter().all(|n| match n.kind() {
        "identifier" => {
            // A callee's name is no value read.
            let callee = n.parent().is_some_and(|p| {
                p.kind() == "call_expression" && p.child_by_field_name("function").is_some_and(|f| f.id() == n.id())
            });
            callee
                || types.get(text(t, n)).is_some_and(|ty| {
                    !ty.contains("double") && !ty.contains("auto") && !ty.contains("decltype") && ty != "?"
                })
        }
        "number_literal" => {
            let s = text(t, n);
            let hex = s.starts_with("0x") || s.starts_with("0X");
            hex || !(s.contains('.') || s.contains('e') || s.contains('E')) || s.ends_with('f') || s.ends_with('F')
        }
        "primitive_type" | "type_identifier" => !text(t, n).contains("double"),
        _ => true,
    })
}

/// The declared type of every name visible in `f` by its declarations in `f` and at file
/// scope (`?` where one name has two); pointers and arrays under their element type.
fn declared_types(t: &str, root: Node, f: Node) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = HashMap::new();
    let mut record = |name: String, ty: String| match out.get(&name) {
        Some(prev) if *prev != ty => {
            out.insert(name, "?".into());
        }
        Some(_) => {}
        None => {
            out.insert(name, ty);
        }
    };
    let file_scope = named_children(root).into_iter().filter(|d| d.kind() == "declaration");
    let in_function =
        descendants(f).into_iter().filter(|d| matches!(d.kind(), "declaration" | "parameter_declaration"));
    for d in file_scope.chain(in_function) {
        let ty = d.child_by_field_name("type").map(|x| text(t, x).to_string()).unwrap_or_else(|| "?".into());
        let mut c = d.walk();
        let declarators: Vec<Node> = d.children_by_field_name("declarator", &mut c).collect();
        for decl in declarators {
            // The declared name is the first identifier of the declarator, which comes
            // before any array extent (`(&row)[N]`); an initializer's names come after.
            let decl =
                if decl.kind() == "init_declarator" { decl.child_by_field_name("declarator") } else { Some(decl) };
            if let Some(id) = decl.and_then(|d| descendants(d).into_iter().find(|x| x.kind() == "identifier")) {
                record(text(t, id).to_string(), ty.clone());
            }
        }
    }
    out
}

/// Whether `n` sits in a loop of `f` itself (not of a lambda or local class inside it).
fn in_loop_of(n: Node, f: Node) -> bool {
    let mut in_loop = false;
    let mut up = n.parent();
    while let Some(u) = up {
        if u.id() == f.id() {
            return in_loop;
        }
        if matches!(u.kind(), "lambda_expression" | "function_definition" | "class_specifier" | "struct_specifier") {
            return false;
        }
        if matches!(u.kind(), "for_statement" | "while_statement" | "do_statement" | "for_range_loop") {
            in_loop = true;
        }
        up = u.parent();
    }
    false
}

/// Whether a loop between `n` and `block` starts after `from`: the division repeats
/// while the divisor, fixed at `from`, holds.
fn loop_between(n: Node, block: Node, from: usize) -> bool {
    let mut up = n.parent();
    while let Some(u) = up.filter(|u| u.id() != block.id()) {
        if matches!(u.kind(), "for_statement" | "while_statement" | "do_statement" | "for_range_loop")
            && u.start_byte() >= from
        {
            return true;
        }
        up = u.parent();
    }
    false
}

/// Every name the function declares, parameters included, with where each declaration
/// fixes its value: parameters by value, and locals with an initializer declared as a
/// statement of a block (not `static`, `__shared__`, `volatile`, an array, a pointer or
/// a reference). Others are recorded too, so that a second declaration is seen.
fn declarations<'t>(t: &str, f: Node<'t>) -> HashMap<String, Vec<Origin<'t>>> {
    let mut out: HashMap<String, Vec<Origin<'t>>> = HashMap::new();
    let unusable =
        |out: &mut HashMap<String, Vec<Origin<'t>>>, n: String| out.entry(n).or_default().push(Origin::Other);
    for d in descendants(f) {
        match d.kind() {
            "parameter_declaration" => {
                let Some(decl) = d.child_by_field_name("declarator") else { continue };
                let plain = decl.kind() == "identifier"
                    && !descendants(d).iter().any(|x| x.kind() == "type_qualifier" && text(t, *x) == "volatile");
                if decl.kind() == "identifier" && plain {
                    out.entry(text(t, decl).to_string()).or_default().push(Origin::Parameter);
                } else {
                    for n in descendants(decl).into_iter().filter(|x| x.kind() == "identifier") {
                        unusable(&mut out, text(t, n).to_string());
                    }
                }
            }
            "declaration" => {
                let ty = syntax::declaration_type(t, d).unwrap_or_default();
                let words: Vec<&str> = ty.split_whitespace().collect();
                let odd = words
                    .iter()
                    .any(|w| matches!(*w, "static" | "extern" | "volatile" | "__shared__" | "thread_local"));
                let in_block = d.parent().is_some_and(|p| p.kind() == "compound_statement");
                match syntax::single_declarator(t, d) {
                    Some((n, Some(_))) if !odd && in_block => out.entry(n).or_default().push(Origin::Local(d)),
                    _ => {
                        for n in syntax::declared_names(t, d) {
                            unusable(&mut out, n);
                        }
                    }
                }
            }
            // Names declared in a condition (`if (float s = ...)`) or a range-for.
            "condition_clause" | "for_range_loop" => {
                for n in
                    descendants(d).into_iter().filter(|x| x.kind() == "init_declarator" || x.kind() == "identifier")
                {
                    if n.kind() == "init_declarator" {
                        if let Some(id) = n.child_by_field_name("declarator").filter(|x| x.kind() == "identifier") {
                            unusable(&mut out, text(t, id).to_string());
                        }
                    }
                }
                if let Some(id) = d.child_by_field_name("declarator").filter(|x| x.kind() == "identifier") {
                    unusable(&mut out, text(t, id).to_string());
                }
            }
            _ => {}
        }
    }
    out
}

/// Names the function may change: assigned, stepped, address taken, bound to a
/// reference, handed bare to a call that is not a value builtin, named by a macro the
/// function uses, or named in inline assembly.
fn changed_names(t: &str, root: Node, f: Node, body: Node) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = syntax::assigned(t, f).into_iter().map(|(n, _)| n).collect();
    for call in descendants(body).into_iter().filter(|d| d.kind() == "call_expression") {
        let callee = call.child_by_field_name("function").map(|c| text(t, c)).unwrap_or("");
        if value_builtin(callee) {
            continue;
        }
        if let Some(args) = call.child_by_field_name("arguments") {
            for a in named_children(args) {
                let a = strip_parens(a);
                if a.kind() == "identifier" {
                    out.insert(text(t, a).to_string());
                }
            }
        }
    }
    for d in descendants(body) {
        // `float& r = s;` and `auto& r = s;`: r changes s.
        if d.kind() == "init_declarator"
            && d.child_by_field_name("declarator").is_some_and(|x| x.kind() == "reference_declarator")
        {
            if let Some(v) = d.child_by_field_name("value") {
                out.extend(syntax::identifiers(t, v).into_iter().map(str::to_string));
            }
        }
        if matches!(d.kind(), "gnu_asm_expression" | "asm_statement") {
            out.extend(syntax::identifiers(t, d).into_iter().map(str::to_string));
        }
    }
    let names: Vec<String> = descendants(body)
        .into_iter()
        .filter(|d| d.kind() == "identifier")
        .map(|d| text(t, d).to_string())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    for (_, value) in syntax::macros_used_in(t, root, body) {
        for n in &names {
            if syntax::mentions_word(&value, n) {
                out.insert(n.clone());
            }
        }
    }
    out
}

/// `base`, or `base_2`, `base_3`... : the first that neither the file nor this rewrite uses.
fn fresh_name(t: &str, base: &str, taken: &mut BTreeSet<String>) -> String {
    let mut n = base.to_string();
    let mut i = 2;
    while syntax::mentions_word(t, &n) || taken.contains(&n) {
        n = format!("{base}_{i}");
        i += 1;
    }
    taken.insert(n.clone());
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{FactsBuilder, Role};

    fn facts(rtol: f64) -> Facts {
        FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "{n}", 1 << 20, 1 << 20)
            .buffer("y", "float", Role::Output, "{n}", 1 << 20, 1 << 20)
            .float("scale")
            .int("n", 1 << 20, 1 << 20)
            .tolerance(rtol, 1e-6)
            .build()
    }

    fn kernel(body: &str) -> String {
        format!(
            "__global__ void k(const float* x, float* y, float scale, int n) {{\n{body}\n}}\n\
             extern \"C\" void launch(const float* x, float* y, float scale, int n, cudaStream_t s) {{\n  \
             k<<<(n + 255) / 256, 256, 0, s>>>(x, y, scale, n);\n}}\n"
        )
    }

    fn run(body: &str) -> Applied {
        apply(&Source::parse(&kernel(body)), &facts(1e-5), &Params::default())
    }

    const ROWS: &str = "  const int r = blockIdx.x * blockDim.x + threadIdx.x;\n  if (r >= n) return;\n  \
        float sum = 0.f;\n  for (int c = 0; c < 64; ++c) sum += x[r * 64 + c];\n  const float s = sum / 64.0f;\n  \
        y[r] = s;\n  for (int c = 0; c < 64; ++c) y[r * 64 + c] = x[r * 64 + c] / s;";

    #[test]
    fn a_local_fixed_before_the_loop_is_divided_by_once() {
        let r = run(ROWS).unwrap();
        let s = &r.source;
        assert!(s.contains("const float s = sum / 64.0f;\n  const float ns_rcp_s = 1.0f / s;"), "{s}");
        assert!(s.contains("y[r * 64 + c] = x[r * 64 + c] * ns_rcp_s;"), "{s}");
        // Divisions outside loops keep their exact quotient.
        assert!(s.contains("sum / 64.0f;"), "{s}");
        assert!(r.description.contains("`k`: 1 division(s) by `s` (1)"), "{}", r.description);
    }

    #[test]
    fn a_parameter_and_a_literal_and_a_compound_division() {
        let body = "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {\n    \
            float v = x[i] / scale + x[i] / 3.0f;\n    v /= scale;\n    y[i] = v;\n  }";
        let s = run(body).unwrap().source;
        assert!(s.contains("{\n  const float ns_rcp_scale = 1.0f / scale;\n  for (int i"), "{s}");
        assert!(s.contains("float v = x[i] * ns_rcp_scale + x[i] * (1.0f / 3.0f);"), "{s}");
        assert!(s.contains("v *= ns_rcp_scale;"), "{s}");
        assert_eq!(s.matches("ns_rcp_scale = ").count(), 1, "one reciprocal per divisor: {s}");
    }

    #[test]
    fn a_dividend_that_is_an_expression_keeps_its_grouping() {
        let body = "  for (int i = 0; i < n; ++i) y[i] = x[i] + 1.0f / scale - x[i] * 2.0f / scale;";
        let s = run(body).unwrap().source;
        assert!(s.contains("y[i] = x[i] + 1.0f * ns_rcp_scale - (x[i] * 2.0f) * ns_rcp_scale;"), "{s}");
    }

    #[test]
    fn nested_divisions_take_the_outer_one() {
        let body = "  for (int i = 0; i < n; ++i) y[i] = (x[i] / scale) / scale;";
        let s = run(body).unwrap().source;
        assert!(
            s.contains("y[i] = ((x[i] / scale)) * ns_rcp_scale;")
                || s.contains("y[i] = (x[i] / scale) * ns_rcp_scale;"),
            "{s}"
        );
    }

    #[test]
    fn a_divisor_that_changes_is_left() {
        for (body, says) in [
            (
                "  float s = scale;\n  for (int i = 0; i < n; ++i) { y[i] = x[i] / s; s += 1.0f; }",
                "the divisor `s` changes in the function",
            ),
            ("  float s = scale;\n  float* p = &s;\n  for (int i = 0; i < n; ++i) y[i] = x[i] / s;", "changes"),
            ("  float s = scale;\n  float& r = s;\n  for (int i = 0; i < n; ++i) { r = x[i]; y[i] = x[i] / s; }", "changes"),
            ("  float s = scale;\n  bump(s);\n  for (int i = 0; i < n; ++i) y[i] = x[i] / s;", "changes"),
            ("  for (int i = 0; i < n; ++i) { y[i] = x[i] / scale; scale *= 0.5f; }", "changes"),
            ("  float s = scale;\n  asm(\"mov.f32 %0, 1.0;\" : \"=f\"(s));\n  for (int i = 0; i < n; ++i) y[i] = x[i] / s;", "changes"),
            (
                "  float s = scale;\n  { float s = 2.0f; y[0] = s; }\n  for (int i = 0; i < n; ++i) y[i] = x[i] / s;",
                "declared more than once",
            ),
            (
                "  for (int i = 0; i < n; ++i) { const float s = x[0] + 1.0f; y[i] = x[i] / s; }",
                "declared inside the loop around the division",
            ),
            ("  for (int i = 0; i < n; ++i) y[i] = x[i] / (scale + 1.0f);", "is an expression"),
            ("  static float s = 2.0f;\n  for (int i = 0; i < n; ++i) y[i] = x[i] / s;", "not a parameter passed by value"),
        ] {
            let e = run(body).unwrap_err();
            assert!(e.0.contains(says), "{body}\n=> {e}");
        }
    }

    #[test]
    fn a_macro_that_names_the_divisor_may_change_it() {
        let src = format!(
            "#define HALVE(v) (s *= 0.5f, v)\n{}",
            kernel("  float s = scale;\n  for (int i = 0; i < n; ++i) y[i] = HALVE(x[i]) / s;",)
        );
        let e = apply(&Source::parse(&src), &facts(1e-5), &Params::default()).unwrap_err();
        assert!(e.0.contains("changes"), "{e}");
    }

    #[test]
    fn divisions_outside_loops_lambdas_and_doubles_are_left() {
        for body in [
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i] / scale;",
            "  auto f = [&](int i) { return x[i] / scale; };\n  for (int i = 0; i < n; ++i) y[i] = f(i);",
            "  const double d = 3.0;\n  for (int i = 0; i < n; ++i) y[i] = (float)(x[i] / d);",
        ] {
            let e = run(body).unwrap_err();
            assert!(e.0.contains("no float division inside a loop"), "{body}\n=> {e}");
        }
    }

    #[test]
    fn a_taken_name_gets_a_fresh_one() {
        let body = "  const float ns_rcp_scale = 0.f;\n  y[0] = ns_rcp_scale;\n  for (int i = 0; i < n; ++i) y[i] = x[i] / scale;";
        let s = run(body).unwrap().source;
        assert!(s.contains("const float ns_rcp_scale_2 = 1.0f / scale;"), "{s}");
        assert!(s.contains("y[i] = x[i] * ns_rcp_scale_2;"), "{s}");
    }

    #[test]
    fn device_functions_are_rewritten_in_place() {
        let src = "__device__ void norm(float* row, int m, float s) {\n  for (int c = 0; c < m; ++c) row[c] = row[c] / s;\n}\n"
            .to_string()
            + &kernel("  norm(y, n, scale);");
        let s = apply(&Source::parse(&src), &facts(1e-5), &Params::default()).unwrap().source;
        assert!(s.contains("const float ns_rcp_s = 1.0f / s;\n  for (int c"), "{s}");
        assert!(s.contains("row[c] = row[c] * ns_rcp_s;"), "{s}");
    }

    #[test]
    fn the_outputs_tolerance_decides() {
        let src = Source::parse(&kernel(ROWS));
        assert!(apply(&src, &facts(1e-6), &Params::default()).is_ok());
        let e = apply(&src, &facts(1e-7), &Params::default()).unwrap_err();
        assert!(e.0.starts_with("output `y` does not admit a quotient through a reciprocal"), "{e}");
        // An int8 output checked to one unit admits it; checked exactly, it does not.
        let quant = |atol: f64| {
            FactsBuilder::new("launch")
                .buffer("x", "float", Role::Input, "{n}", 64, 64)
                .buffer("y", "int8_t", Role::Output, "{n}", 64, 64)
                .own_tolerance(0.0, atol)
                .float("scale")
                .int("n", 64, 64)
                .tolerance(0.0, 0.0)
                .build()
        };
        assert!(apply(&src, &quant(1.0), &Params::default()).is_ok());
        let e = apply(&src, &quant(0.0), &Params::default()).unwrap_err();
        assert!(e.0.contains("below one unit"), "{e}");
    }
}
