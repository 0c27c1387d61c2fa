//! Divisions by a value that holds over a loop, as multiplications by its reciprocal
//! computed once: `x / s` (or `x /= s`, `__fdividef(x, s)`) inside a loop, where `s` is a
//! `const float` local or a float parameter passed by value that the function only reads,
//! becomes `x * ns_rcp_s`, with `const float ns_rcp_s = 1.0f / s;` right after `s`'s
//! declaration (at the top of the body for a parameter). A float literal divisor becomes
//! the folded constant `(1.0f / L)`. An IEEE division is a reciprocal, a Newton step and a
//! range check (FCHK and its slow path) per element; the product is one FMUL.
//!
//! Not exact: `x * RN(1/s)` is rounded twice (2^-24 each), and a divisor past 2^126 has a
//! subnormal reciprocal (2^-22). [`ERROR`] is offered only where every output admits it
//! ([`crate::precision`]): an int8 output checked to one unit does, as does fp32 at rtol
//! 1e-6. Divisors below 2^-126 (subnormal) leave that range: the reciprocal overflows,
//! and the check decides (a literal out of range is left). A quotient must reach a float
//! sink through arithmetic (a float variable or element, a known float function, a
//! rounding to nearest, which flips only at a near-tie as the tolerance judges); one that
//! is cast, compared, stored in an integer or passed to any other function is left: an
//! exact quotient (`41.f / 41.f`) one ulp low truncates a whole unit lower. A float
//! temporary truncated later is not followed (the check decides there), nor are quotients
//! of constants or divisions where C++ needs a constant expression rewritten.
//!
//! Everything is an allow-list, so that what the recipe cannot read it leaves:
//! - the divisor is a `const float` local (C++ forbids changing it) or a `float` parameter
//!   every other mention of which is a read: an operand of arithmetic, of a comparison or
//!   of `-`/`!`, a cast to a non-reference type, an argument of a value builtin the file
//!   does not define, the right side of an assignment, the initializer of a plain scalar,
//!   a condition. A reference, an address, a constructor or lambda capture, a macro
//!   argument, a declaration that shadows it: none of these is a read, so the parameter
//!   is left; so is any parameter of a file that defines a function taking a non-const
//!   reference (a converting constructor or `operator bool` could bind it anywhere);
//! - the dividend is built from float or integer scalars (declared with those types, in
//!   the function or at file scope), their arrays, literals that are not double (hex
//!   floats included), casts to those types and calls of known float functions: a typedef,
//!   a template type or parameter, a macro, a field or an unknown call could be double (a
//!   double quotient keeps its division) or a class with only `operator/`;
//! - the file is declined where a macro pastes tokens (`##`: a name no text shows), an
//!   operator of the file takes a non-const reference (a binary operand could be
//!   changed), or a reference type is named through an alias.
//!
//! Sites inside a lambda or a local class are left alone (their captures are theirs).

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

/// Scalar types whose values a float quotient converts exactly as the product does.
const PLAIN_SCALARS: &[&str] = &[
    "float",
    "int",
    "unsigned",
    "unsigned int",
    "signed",
    "short",
    "unsigned short",
    "long",
    "unsigned long",
    "long long",
    "unsigned long long",
    "char",
    "signed char",
    "unsigned char",
    "size_t",
    "int8_t",
    "uint8_t",
    "int16_t",
    "uint16_t",
    "int32_t",
    "uint32_t",
    "int64_t",
    "uint64_t",
];

/// Calls that return float whatever their arguments.
const FLOAT_CALLS: &[&str] = &[
    "__bfloat162float",
    "__half2float",
    "__low2float",
    "__high2float",
    "__int2float_rn",
    "__uint2float_rn",
    "fabsf",
    "fmaxf",
    "fminf",
    "sqrtf",
    "rsqrtf",
    "expf",
    "exp2f",
    "logf",
    "log2f",
    "sinf",
    "cosf",
    "tanhf",
    "fmaf",
    "__expf",
    "__logf",
    "__sinf",
    "__cosf",
    "__powf",
    "powf",
    "__fmul_rn",
    "__fadd_rn",
    "__fsub_rn",
    "__fmaf_rn",
    "__saturatef",
    "erff",
];

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let kernels = target_kernels(src, params)?;
    let t = src.text();
    let root = src.root();
    if syntax::has_reference_alias(t, root) {
        return Err(NotApplicable::new(
            "the file names a reference type through an alias: a declaration of it may change a divisor unseen",
        ));
    }
    if let Some((name, _)) = syntax::macro_definitions(t, root).into_iter().find(|(_, v)| v.contains("##")) {
        return Err(NotApplicable::new(format!(
            "macro `{name}` pastes tokens: it may name or declare what no text of the file shows"
        )));
    }
    let file = FileFunctions::of(t, root);
    if let Some(op) = file.operator_taking_reference() {
        return Err(NotApplicable::new(format!(
            "`{op}` takes a non-const reference: an operand of that operator may be changed"
        )));
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
        let p = plan(t, root, &file, f, body, &mut taken_names);
        if p.sites.is_empty() {
            if let Some(w) = p.skipped {
                why.insert(format!("`{name}`: {w}"));
            }
            continue;
        }
        let total: usize = p.sites.values().sum();
        done.push(format!(
            "`{name}`: {total} division(s) by {}",
            p.sites.iter().map(|(d, n)| format!("`{d}` ({n})")).collect::<Vec<_>>().join(", ")
        ));
        change.edits.extend(p.edits);
    }
    if done.is_empty() {
        let why = if why.is_empty() {
            "no float division inside a loop by a value that holds over it (a `const float` local, a float parameter the function only reads, or a float literal)".to_string()
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

/// The functions the file defines, by name, and those that take a non-const reference.
struct FileFunctions {
    defined: BTreeSet<String>,
    take_reference: Vec<String>,
}

impl FileFunctions {
    fn of(t: &str, root: Node) -> FileFunctions {
        let mut defined = BTreeSet::new();
        let mut take_reference = Vec::new();
        for d in descendants(root).into_iter().filter(|d| d.kind() == "function_declarator") {
            let name = d.child_by_field_name("declarator").map(|n| text(t, n)).unwrap_or("");
            defined.insert(name.to_string());
            let Some(params) = d.child_by_field_name("parameters") else { continue };
            let by_reference = named_children(params).into_iter().any(|p| {
                let by_ref = descendants(p).iter().any(|x| x.kind() == "reference_declarator" || text(t, *x) == "&");
                let is_const = descendants(p).iter().any(|x| x.kind() == "type_qualifier" && text(t, *x) == "const");
                by_ref && !is_const
            });
            if by_reference {
                take_reference.push(name.to_string());
            }
        }
        FileFunctions { defined, take_reference }
    }

    /// An operator that takes a non-const reference: any operand of it may be changed.
    fn operator_taking_reference(&self) -> Option<&str> {
        self.take_reference.iter().find(|n| n.contains("operator")).map(String::as_str)
    }
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
    /// A `float` parameter passed by value; the identifier that declares it.
    Parameter(Node<'t>),
    /// A `const float` local declared with an initializer as a statement of a block.
    Local(Node<'t>),
    /// Any other declaration, with why it holds no divisor.
    Other(&'static str),
}

fn plan<'t>(
    t: &str,
    root: Node<'t>,
    file: &FileFunctions,
    f: Node<'t>,
    body: Node<'t>,
    taken_names: &mut BTreeSet<String>,
) -> Plan {
    let floats = super::intrinsics::float_names(t, body);
    let types = declared_types(t, root, f);
    let origins = declarations(t, f);
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
        // A quotient of constants costs nothing at run time, and one a constant expression
        // needs (`static_assert`, `if constexpr`, a template argument) must stay exact.
        let constant_dividend =
            !descendants(site.dividend).iter().any(|n| n.kind() == "identifier" || n.kind() == "call_expression");
        if (constant_dividend && divisor.kind() == "number_literal") || in_constant_context(t, d) {
            continue;
        }
        if let Some(consumer) = truncated_or_compared(t, d, &types) {
            skipped.get_or_insert_with(|| {
                format!(
                    "the quotient by `{dtext}` is {consumer}, where one ulp below an exact quotient moves the result a whole unit"
                )
            });
            continue;
        }
        let replacement = if divisor.kind() == "number_literal" {
            if !normal_literal(&dtext) {
                skipped
                    .get_or_insert_with(|| format!("the divisor `{dtext}` is not a normal float in [2^-126, 2^126]"));
                continue;
            }
            format!("(1.0f / {dtext})")
        } else if divisor.kind() == "identifier" {
            if let Some(w) = why_not_invariant(t, root, file, f, d, &dtext, &origins, &floats) {
                skipped.get_or_insert_with(|| format!("the divisor `{dtext}` {w}"));
                continue;
            }
            match reciprocal_of.get(&dtext) {
                Some(n) => n.clone(),
                None => {
                    let n = fresh_name(t, &format!("ns_rcp_{dtext}"), taken_names);
                    let decl = format!("const float {n} = 1.0f / {dtext};");
                    match &origins[&dtext][0] {
                        Origin::Parameter(_) => {
                            let first = named_children(body)
                                .into_iter()
                                .find(|s| !matches!(s.kind(), "comment" | "preproc_call"));
                            let indent =
                                first.map(|s| syntax::indent_at(t, s.start_byte())).unwrap_or_else(|| "  ".into());
                            edits.insert(body.start_byte() + 1, format!("\n{indent}{decl}"));
                        }
                        Origin::Local(dn) => {
                            let indent = syntax::indent_at(t, dn.start_byte());
                            edits.insert(dn.end_byte(), format!("\n{indent}{decl}"));
                        }
                        Origin::Other(_) => unreachable!("only parameters and locals hold divisors"),
                    }
                    reciprocal_of.insert(dtext.clone(), n.clone());
                    n
                }
            }
        } else {
            skipped.get_or_insert_with(|| {
                format!("the divisor `{}` is an expression, not a name or a literal", syntax::one_line(&dtext, 40))
            });
            continue;
        };
        let dividend = text(t, site.dividend);
        let atomic = matches!(
            site.dividend.kind(),
            "identifier" | "call_expression" | "subscript_expression" | "number_literal" | "parenthesized_expression"
        );
        let product =
            if atomic { format!("{dividend} * {replacement}") } else { format!("({dividend}) * {replacement}") };
        let new = if site.compound {
            format!("{dividend} *= {replacement}")
        } else if d.kind() == "call_expression" {
            // A call binds tighter than `*` wherever it stands (`3.0f / __fdividef(x, s)`).
            format!("({product})")
        } else {
            product
        };
        edits.replace(d.byte_range(), new);
        chosen.push(d.byte_range());
        *sites.entry(dtext).or_default() += 1;
    }
    Plan { edits, sites, skipped }
}

/// Why the name at a division's divisor may not hold over the loops around it; None when
/// it does.
#[allow(clippy::too_many_arguments)]
fn why_not_invariant(
    t: &str,
    root: Node,
    file: &FileFunctions,
    f: Node,
    site: Node,
    name: &str,
    origins: &HashMap<String, Vec<Origin>>,
    floats: &HashMap<String, String>,
) -> Option<&'static str> {
    if floats.get(name).is_none_or(|ty| ty != "float") {
        return Some("is not declared float here");
    }
    let Some(v) = origins.get(name) else { return Some("is not a parameter or local of the function") };
    if v.len() != 1 {
        return Some("is declared more than once in the function");
    }
    // A macro the function uses may name it in a way no read context shows.
    if syntax::macros_used_in(t, root, f).iter().any(|(_, value)| syntax::mentions_word(value, name)) {
        return Some("is named by a macro the function uses");
    }
    match &v[0] {
        Origin::Other(why) => Some(why),
        Origin::Parameter(decl) => {
            // A conversion (a constructor, `operator bool`) or an overload the file
            // defines may bind a float to a reference wherever it is read.
            if !file.take_reference.is_empty() {
                return Some("is a parameter, and a function of the file takes a non-const reference");
            }
            let mentions = descendants(f).into_iter().filter(|n| mentions(t, *n, name) && n.id() != decl.id());
            for n in mentions {
                if !read_context(t, n, file) {
                    return Some("is a parameter the function does more with than read");
                }
            }
            None
        }
        Origin::Local(decl) => {
            let block = decl.parent()?;
            let scoped = block.start_byte() <= site.start_byte()
                && site.end_byte() <= block.end_byte()
                && decl.end_byte() <= site.start_byte();
            // Another declaration of the name between (a structured binding, an
            // enumerator, a using-declaration) would shadow it: every mention after the
            // declaration must be a read.
            let shadowed = descendants(f)
                .into_iter()
                .filter(|n| mentions(t, *n, name) && n.start_byte() >= decl.end_byte())
                .any(|n| !read_context(t, n, file));
            if !scoped {
                Some("is not in scope at the division")
            } else if shadowed {
                Some("is named after its declaration other than to be read")
            } else if !loop_between(site, block, decl.end_byte()) {
                Some("is declared inside the loop around the division")
            } else {
                None
            }
        }
    }
}

/// Whether a node names `name`: as a variable, or where the grammar reads it as a type or
/// namespace (`C c(scale);` parses as a function declaration taking a `scale`).
fn mentions(t: &str, n: Node, name: &str) -> bool {
    matches!(n.kind(), "identifier" | "type_identifier" | "namespace_identifier") && text(t, n) == name
}

/// Whether an identifier is only read where it stands (see the module's allow-list).
fn read_context(t: &str, n: Node, file: &FileFunctions) -> bool {
    let mut x = n;
    let mut up = n.parent();
    while let Some(p) = up {
        if p.kind() == "lambda_capture_specifier" {
            return false;
        }
        let is_x = |field: &str| p.child_by_field_name(field).is_some_and(|c| c.id() == x.id());
        match p.kind() {
            "parenthesized_expression" => {}
            // A branch is whatever the conditional is (`(c ? a : s) = 2` assigns s).
            "conditional_expression" => {
                if is_x("condition") {
                    return true;
                }
            }
            "binary_expression" | "condition_clause" => return true,
            "unary_expression" => {
                return p.child_by_field_name("operator").is_some_and(|o| matches!(text(t, o), "-" | "+" | "!" | "~"))
            }
            "cast_expression" => return p.child_by_field_name("type").is_some_and(|ty| !text(t, ty).contains('&')),
            "assignment_expression" => return is_x("right"),
            "argument_list" => {
                return p.parent().is_some_and(|c| {
                    c.kind() == "call_expression"
                        && c.child_by_field_name("function").is_some_and(|f| {
                            f.kind() == "identifier" && value_builtin(text(t, f)) && !file.defined.contains(text(t, f))
                        })
                })
            }
            "init_declarator" => {
                let plain = p.child_by_field_name("declarator").is_some_and(|d| d.kind() == "identifier");
                let scalar = p
                    .parent()
                    .and_then(|d| d.child_by_field_name("type"))
                    .is_some_and(|ty| ty.kind() == "primitive_type");
                return is_x("value") && plain && scalar;
            }
            _ => return false,
        }
        x = p;
        up = p.parent();
    }
    false
}

/// What a quotient flows into, through arithmetic, that may jump a whole unit where it
/// crosses an integer or a threshold; None when it reaches a float sink: a float
/// variable or element, a known float function, a rounding to nearest (which flips only
/// at a near-tie, as the tolerance judges), or a statement of its own. A cast, a
/// conversion, a comparison, an integer store, a call of anything else, a return: each is
/// reported. A float temporary truncated later is not followed: the check decides there.
fn truncated_or_compared(t: &str, site: Node, types: &HashMap<String, String>) -> Option<&'static str> {
    let integral =
        |ty: &str| PLAIN_SCALARS.contains(&syntax::unqualified(ty).as_str()) && syntax::unqualified(ty) != "float";
    let float_lvalue = |l: Node| {
        let l = strip_parens(l);
        let base = match l.kind() {
            "identifier" => Some(l),
            "subscript_expression" => l.child_by_field_name("argument").filter(|a| a.kind() == "identifier"),
            "pointer_expression" => l.child_by_field_name("argument").filter(|a| a.kind() == "identifier"),
            _ => None,
        };
        base.and_then(|b| types.get(text(t, b))).is_some_and(|ty| syntax::unqualified(ty) == "float")
    };
    let mut x = site;
    while let Some(p) = x.parent() {
        match p.kind() {
            "parenthesized_expression" | "comma_expression" => {}
            "unary_expression"
                if p.child_by_field_name("operator").is_some_and(|o| matches!(text(t, o), "-" | "+")) => {}
            "binary_expression" => match binary(t, p) {
                Some(("+" | "-" | "*" | "/", _, _)) => {}
                _ => return Some("compared or combined other than by arithmetic"),
            },
            "conditional_expression" => {
                if p.child_by_field_name("condition").is_some_and(|c| c.id() == x.id()) {
                    return Some("compared");
                }
            }
            "cast_expression" => {
                return p.child_by_field_name("type").filter(|ty| text(t, *ty).trim() != "float").map(|_| "converted")
            }
            "argument_list" => {
                let f = p.parent().and_then(|c| c.child_by_field_name("function"));
                let name = f.filter(|f| f.kind() == "identifier").map(|f| text(t, f)).unwrap_or("");
                let nearest = matches!(
                    name,
                    "__float2int_rn"
                        | "__float2uint_rn"
                        | "__float2ll_rn"
                        | "rintf"
                        | "lrintf"
                        | "llrintf"
                        | "roundf"
                        | "lroundf"
                        | "nearbyintf"
                );
                return (!(FLOAT_CALLS.contains(&name) || nearest))
                    .then_some("passed to a function that may truncate it");
            }
            "init_declarator" => {
                let ty = p.parent().and_then(|d| d.child_by_field_name("type")).map(|ty| text(t, ty)).unwrap_or("");
                return (syntax::unqualified(ty) != "float").then_some(if integral(ty) {
                    "stored in an integer"
                } else {
                    "stored in a variable not declared float"
                });
            }
            "assignment_expression" => {
                let left = p.child_by_field_name("left");
                let op = p.child_by_field_name("operator").map(|o| text(t, o)).unwrap_or("");
                let float_target = left.is_some_and(float_lvalue) && matches!(op, "=" | "+=" | "-=" | "*=" | "/=");
                return (!float_target).then_some("stored other than in a float");
            }
            "expression_statement" => return None,
            _ => return Some("used where its rounding may matter"),
        }
        x = p;
    }
    None
}

/// Whether a node sits where C++ needs a constant expression.
fn in_constant_context(t: &str, n: Node) -> bool {
    let mut up = n.parent();
    while let Some(p) = up {
        match p.kind() {
            "static_assert_declaration"
            | "template_argument_list"
            | "enumerator"
            | "case_statement"
            | "alignas_qualifier"
            | "array_declarator" => return true,
            "if_statement" if syntax::children(p).iter().any(|c| text(t, *c) == "constexpr") => return true,
            "declaration" if text(t, p).split_whitespace().any(|w| w == "constexpr") => return true,
            "function_definition" => return false,
            _ => {}
        }
        up = p.parent();
    }
    false
}

/// A float literal whose reciprocal is a normal float: in [2^-126, 2^126].
fn normal_literal(lit: &str) -> bool {
    let v: Option<f64> = lit.trim_end_matches(['f', 'F']).parse().ok();
    v.is_some_and(|v| (2f64.powi(-126)..=2f64.powi(126)).contains(&v.abs()))
}

/// A float division: `a / b`, `a /= b` or `__fdividef(a, b)`, where `b` is a float name
/// or literal and `a` a plain value (so the quotient is float).
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
            let left = d.child_by_field_name("left")?;
            // `int a; a /= s` truncates: the left must be float itself.
            super::intrinsics::is_float(t, left, floats).then_some(())?;
            (left, d.child_by_field_name("right")?, true)
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
    (super::intrinsics::is_float(t, divisor, floats) && plain_value(t, dividend, types)).then_some(Division {
        dividend,
        divisor,
        compound,
    })
}

/// Whether an expression is built only from scalars of [`PLAIN_SCALARS`] (names, their
/// arrays and pointers), literals that are not double, casts to those types, calls of
/// [`FLOAT_CALLS`] and arithmetic on those.
fn plain_value(t: &str, e: Node, types: &HashMap<String, String>) -> bool {
    let plain = |ty: &str| PLAIN_SCALARS.contains(&syntax::unqualified(ty).as_str());
    match e.kind() {
        "parenthesized_expression" => named_children(e).first().is_some_and(|x| plain_value(t, *x, types)),
        "number_literal" => {
            let s = text(t, e).to_ascii_lowercase();
            let hex = s.starts_with("0x");
            // A hex float (`0x1.8p1`) is double unless suffixed; a hex integer is plain.
            let floating = if hex { s.contains('.') || s.contains('p') } else { s.contains('.') || s.contains('e') };
            !floating || s.ends_with('f')
        }
        "identifier" => types.get(text(t, e)).is_some_and(|ty| plain(ty)),
        "subscript_expression" => {
            e.child_by_field_name("argument").is_some_and(|a| a.kind() == "identifier" && plain_value(t, a, types))
        }
        "pointer_expression" => {
            e.child_by_field_name("operator").is_some_and(|o| text(t, o) == "*")
                && e.child_by_field_name("argument")
                    .is_some_and(|a| a.kind() == "identifier" && plain_value(t, a, types))
        }
        "call_expression" => e
            .child_by_field_name("function")
            .is_some_and(|f| f.kind() == "identifier" && FLOAT_CALLS.contains(&text(t, f))),
        "cast_expression" => {
            e.child_by_field_name("type").is_some_and(|ty| plain(text(t, ty)))
                && e.child_by_field_name("value").is_some_and(|v| plain_value(t, v, types))
        }
        "binary_expression" => binary(t, e).is_some_and(|(op, l, r)| {
            matches!(op, "+" | "-" | "*" | "/") && plain_value(t, l, types) && plain_value(t, r, types)
        }),
        "unary_expression" => {
            e.child_by_field_name("operator").is_some_and(|o| matches!(text(t, o), "-" | "+"))
                && e.child_by_field_name("argument").is_some_and(|a| plain_value(t, a, types))
        }
        _ => false,
    }
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
    // A macro may stand for anything under a declared name (`#define h 3.0`); template
    // parameters shadow the file's names (`template <double v>`).
    for (name, _) in syntax::macro_definitions(t, root) {
        record(name.to_string(), "?".into());
        record(name.to_string(), "??".into());
    }
    let mut up = f.parent();
    while let Some(p) = up {
        if p.kind() == "template_declaration" {
            if let Some(params) = p.child_by_field_name("parameters") {
                for id in
                    descendants(params).into_iter().filter(|x| matches!(x.kind(), "identifier" | "type_identifier"))
                {
                    record(text(t, id).to_string(), "?".into());
                    record(text(t, id).to_string(), "??".into());
                }
            }
        }
        up = p.parent();
    }
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
        if syntax::is_iteration(u) {
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
        if syntax::is_iteration(u) && u.start_byte() >= from {
            return true;
        }
        up = u.parent();
    }
    false
}

/// Every name the function declares, parameters included, with where each declaration
/// fixes its value. Others are recorded too, so that a second declaration is seen.
fn declarations<'t>(t: &str, f: Node<'t>) -> HashMap<String, Vec<Origin<'t>>> {
    let mut out: HashMap<String, Vec<Origin<'t>>> = HashMap::new();
    let other = |out: &mut HashMap<String, Vec<Origin<'t>>>, n: Node, why: &'static str| {
        out.entry(text(t, n).to_string()).or_default().push(Origin::Other(why));
    };
    for d in descendants(f) {
        match d.kind() {
            "parameter_declaration" => {
                let Some(decl) = d.child_by_field_name("declarator") else { continue };
                let float = d.child_by_field_name("type").is_some_and(|ty| text(t, ty) == "float");
                let volatile = descendants(d).iter().any(|x| x.kind() == "type_qualifier" && text(t, *x) == "volatile");
                if decl.kind() == "identifier" && float && !volatile {
                    out.entry(text(t, decl).to_string()).or_default().push(Origin::Parameter(decl));
                } else {
                    for n in descendants(decl).into_iter().filter(|x| x.kind() == "identifier") {
                        other(&mut out, n, "is not a float parameter passed by value");
                    }
                }
            }
            "declaration" => {
                let ty = syntax::declaration_type(t, d).unwrap_or_default();
                let words: Vec<&str> = ty.split_whitespace().collect();
                let const_float = words.contains(&"const")
                    && d.child_by_field_name("type").is_some_and(|x| text(t, x) == "float")
                    && !words
                        .iter()
                        .any(|w| matches!(*w, "static" | "extern" | "volatile" | "__shared__" | "thread_local"));
                let in_block = d.parent().is_some_and(|p| p.kind() == "compound_statement");
                match syntax::single_declarator(t, d) {
                    Some((n, Some(_))) if const_float && in_block => out.entry(n).or_default().push(Origin::Local(d)),
                    _ => {
                        for n in syntax::declared_names(t, d) {
                            out.entry(n).or_default().push(Origin::Other(
                                "is not a `const float` local with an initializer (one a function may not change)",
                            ));
                        }
                    }
                }
            }
            // Other ways to declare a name: each one makes the name's meaning depend on
            // where it is read.
            "structured_binding_declarator"
            | "enumerator"
            | "using_declaration"
            | "lambda_expression"
            | "for_range_loop"
            | "condition_clause"
            | "optional_parameter_declaration"
            | "variadic_parameter_declaration" => {
                for n in descendants(d).into_iter().filter(|x| x.kind() == "identifier") {
                    if d.kind() == "lambda_expression" || d.kind() == "condition_clause" {
                        // Only their declarations, not every name they read.
                        let declares = n.parent().is_some_and(|p| {
                            matches!(p.kind(), "init_declarator" | "parameter_declaration" | "declaration")
                                && p.child_by_field_name("declarator").is_some_and(|x| x.id() == n.id())
                        });
                        if !declares {
                            continue;
                        }
                    }
                    other(&mut out, n, "is declared in a form that holds no divisor");
                }
            }
            _ => {}
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

    fn declines(prefix: &str, body: &str) -> String {
        let src = format!("{prefix}\n{}", kernel(body));
        match apply(&Source::parse(&src), &facts(1e-5), &Params::default()) {
            Ok(r) => panic!("rewrote\n{prefix}\n{body}\n=> {}", r.source),
            Err(e) => e.0,
        }
    }

    #[test]
    fn a_local_that_is_not_const_is_left() {
        let e = declines("", "  float s = scale;\n  for (int i = 0; i < n; ++i) { y[i] = x[i] / s; s += 1.0f; }");
        assert!(e.contains("the divisor `s` is not a `const float` local"), "{e}");
        let e = declines("", "  static const float s = 2.0f;\n  for (int i = 0; i < n; ++i) y[i] = x[i] / s;");
        assert!(e.contains("not a `const float` local"), "{e}");
    }

    /// The review's attacks on a parameter divisor (each compiled and ran on an H200 with
    /// the first version, which rewrote them and changed the result).
    #[test]
    fn a_parameter_the_function_does_more_with_than_read_is_left() {
        let loop_ = "  for (int i = 0; i < n; ++i) y[i] = x[i] / scale;";
        for (prefix, change) in [
            ("", "decltype((scale)) r = scale; r = 2.0f;"),
            ("", "decltype(auto) r = (scale); r = 2.0f;"),
            ("#include <type_traits>", "std::add_lvalue_reference_t<float> r = scale; r = 2.0f;"),
            ("", "auto f = [&r = scale]() { r = 2.0f; }; f();"),
            ("struct R { float& r; };", "R q{scale}; q.r = 2.0f;"),
            ("struct C { float* p; __device__ C(float& v) : p(&v) {} };", "C c(scale); *c.p = 2.0f;"),
            ("", "(0, scale) = 2.0f;"),
            ("", "float t0 = 1.f; (n ? t0 : scale) = 2.0f;"),
            ("", "float* p = &scale; *p = 2.0f;"),
            ("", "float& r = scale; r = 2.0f;"),
            ("", "(float&)scale = 2.0f;"),
            ("", "scale *= 0.5f;"),
            ("", "++scale;"),
            ("__device__ void bump(float& v) { v += 1.0f; }", "bump(scale);"),
            ("#define BUMP(v) v += 1.0f", "BUMP(scale);"),
            ("", "asm(\"mov.f32 %0, 1.0;\" : \"=f\"(scale));"),
            ("struct P { float a, b; };", "auto [scale, t] = P{2.0f, 0.0f}; (void)t;"),
            ("", "enum { scale = 2 };"),
            ("namespace ns { __device__ float scale = 2.0f; }", "using ns::scale;"),
        ] {
            let e = declines(prefix, &format!("  {change}\n{loop_}"));
            assert!(!e.contains("no float division"), "{change}: {e}");
        }
    }

    #[test]
    fn files_whose_macros_paste_or_whose_operators_take_references_are_declined() {
        let loop_ = "  for (int i = 0; i < n; ++i) y[i] = x[i] / scale;";
        let e = declines("#define ZERO(a, b) a##b = 2.0f", &format!("  ZERO(sc, ale);\n{loop_}"));
        assert!(e.contains("macro `ZERO` pastes tokens"), "{e}");
        let e = declines("#define RCPNAME(v) ns_rcp_##v", &format!("  const float RCPNAME(scale) = 0.f;\n{loop_}"));
        assert!(e.contains("pastes tokens"), "{e}");
        let e = declines(
            "struct Z { __device__ void operator<<(float& v) const { v = 2.0f; } };",
            &format!("  Z z; z << scale;\n{loop_}"),
        );
        assert!(e.contains("`operator<<` takes a non-const reference"), "{e}");
    }

    #[test]
    fn a_quotient_that_may_be_double_or_of_a_class_keeps_its_division() {
        for (prefix, body) in [
            ("typedef double real_t;", "for (int i = 0; i < n; ++i) { real_t v = x[i]; y[i] = (float)(v / scale); }"),
            ("struct D { double v; };", "for (int i = 0; i < n; ++i) { D d{x[i]}; y[i] = (float)(d.v / scale); }"),
            (
                "__device__ double get(const float* p, int i) { return p[i]; }",
                "for (int i = 0; i < n; ++i) y[i] = get(x, i) / scale;",
            ),
            (
                "__device__ float2 operator/(float2 a, float b) { return make_float2(a.x / b, a.y / b); }",
                "for (int i = 0; i < n; ++i) { float2 v = make_float2(x[i], x[i]); v = v / scale; y[i] = v.x; }",
            ),
            ("", "for (int i = 0; i < n; ++i) { int a = i; a /= scale; y[i] = a; }"),
            ("", "for (int i = 0; i < n; ++i) { auto v = x[i]; y[i] = v / scale; }"),
        ] {
            let e = declines(prefix, &format!("  {body}"));
            assert!(e.contains("no float division"), "{body}: {e}");
        }
        let src = "template <typename T> __device__ void norm(T* v, int m, float s) {\n  for (int c = 0; c < m; ++c) v[c] = v[c] / s;\n}\n";
        let e = declines(src, "  norm(y, n, scale);");
        assert!(e.contains("no float division"), "{e}");
    }

    #[test]
    fn a_macro_that_names_the_divisor_may_change_it() {
        let e = declines(
            "#define HALVE() (scale *= 0.5f)",
            "  for (int i = 0; i < n; ++i) { y[i] = x[i] / scale; HALVE(); }",
        );
        assert!(e.contains("is named by a macro the function uses"), "{e}");
    }

    /// The second review's attacks: a call site inside an expression, conversions that
    /// bind a parameter to a reference, overloads of listed names, double literals and
    /// template parameters, constant expressions.
    #[test]
    fn the_second_reviews_inputs_keep_their_meaning() {
        let loop_ = "  for (int i = 0; i < n; ++i) y[i] = x[i] / scale;";
        let s = run("  for (int i = 0; i < n; ++i) y[i] = 3.0f / __fdividef(x[i], scale);").unwrap().source;
        assert!(s.contains("y[i] = 3.0f / (x[i] * ns_rcp_scale);"), "{s}");
        let refs = "struct Ref { float* p; __device__ Ref(float& v) : p(&v) {} };";
        for (prefix, change) in [
            (refs, "*((Ref)scale).p = 2.0f;"),
            (refs, "Ref q(x[0] == 0 ? scale : scale); q = scale; *q.p = 2.0f;"),
            ("__device__ float* make_ptr(float* v) { return v; }", "*make_ptr(&scale) = 2.0f;"),
            ("__device__ float& fmaxf(float& a, int b) { a = (float)b; return a; }", "fmaxf(scale, 2);"),
            (
                "__device__ float* make_p(float* v) { return v; }\n__device__ float make_v(float v) { return v; }",
                "make_v(scale);",
            ),
        ] {
            let e = declines(prefix, &format!("  {change}\n{loop_}"));
            assert!(!e.contains("no float division"), "{change}: {e}");
        }
        for (prefix, body) in [
            ("", "for (int i = 0; i < n; ++i) y[i] = (float)(0x1.8p1 / scale);"),
            ("#define h 3.0", "for (int i = 0; i < n; ++i) y[i] = (float)(h / scale);"),
            ("", "for (int i = 0; i < n; ++i) { static_assert(41.0f / 41.0f + 0.0f == 1.0f, \"\"); y[i] = x[i]; }"),
            ("", "for (int i = 0; i < n; ++i) { if constexpr (41.0f / 41.0f * 1.0f == 1.0f) y[i] = x[i]; }"),
        ] {
            let e = declines(prefix, &format!("  {body}"));
            assert!(e.contains("no float division"), "{body}: {e}");
        }
        let t = "template <double v> __device__ float f(float s) { float a = 0.f; for (int i = 0; i < 4; ++i) a += v / s; return a; }";
        let e = declines(&format!("__device__ float v = 1.0f;\n{t}"), "  y[0] = f<2.0>(scale);");
        assert!(e.contains("no float division"), "{e}");
    }

    #[test]
    fn a_quotient_truncated_or_compared_keeps_its_division() {
        let prefix = "__device__ void put(int v, float* y) { *y = (float)v; }\n__device__ int buf[8];";
        for (body, says) in [
            ("y[i] = (float)(int)(x[i] / scale);", "converted"),
            ("y[i] = floorf(x[i] / scale);", "passed to a function"),
            ("int k = x[i] / scale; y[i] = k;", "stored in an integer"),
            ("y[i] = x[i] / scale > 1.0f ? 1.0f : 0.0f;", "compared"),
            ("y[i] = (float)(int)(x[i] / scale * 4.0f);", "converted"),
            ("y[i] = (x[i] / scale - 1.0f) >= 0.f;", "compared"),
            ("y[i] = static_cast<int>(x[i] / scale);", "passed to a function"),
            ("y[i] = (float)(int)(n > 0 ? x[i] / scale : 0.f);", "converted"),
            ("y[i] = (float)(int)(0, x[i] / scale);", "converted"),
            ("put(x[i] / scale, y + i);", "passed to a function"),
            ("buf[i % 8] = x[i] / scale; y[i] = 0.f;", "stored other than in a float"),
        ] {
            let e = declines(prefix, &format!("  for (int i = 0; i < n; ++i) {{ {body} }}"));
            assert!(e.contains(says), "{body}: {e}");
        }
        // Rounded to nearest, it flips only at a near-tie, which the tolerance judges.
        let s = run("  for (int i = 0; i < n; ++i) y[i] = __float2int_rn(x[i] / scale);").unwrap().source;
        assert!(s.contains("__float2int_rn(x[i] * ns_rcp_scale)"), "{s}");
        let e = declines("", "  for (int i = 0; i < n; ++i) y[i] = x[i] / 1e-40f;");
        assert!(e.contains("not a normal float"), "{e}");
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
