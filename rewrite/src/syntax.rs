//! Small helpers over tree-sitter nodes: walking, text, and the shapes of C expressions
//! that recipes compare (identifiers, casts and parentheses stripped, commutative sums and
//! products flattened).

use std::collections::{BTreeSet, HashMap};
use tree_sitter::Node;

/// The text of a node.
pub fn text<'s>(src: &'s str, n: Node) -> &'s str {
    src.get(n.byte_range()).unwrap_or("")
}

/// The node and all its descendants, in source order.
pub fn descendants(n: Node) -> Vec<Node> {
    let mut out = Vec::new();
    let mut stack = vec![n];
    while let Some(x) = stack.pop() {
        out.push(x);
        let mut c = x.walk();
        let kids: Vec<Node> = x.children(&mut c).collect();
        stack.extend(kids.into_iter().rev());
    }
    out
}

pub fn named_children(n: Node) -> Vec<Node> {
    let mut c = n.walk();
    n.named_children(&mut c).collect()
}

pub fn children(n: Node) -> Vec<Node> {
    let mut c = n.walk();
    n.children(&mut c).collect()
}

/// Whether the node or anything under it failed to parse.
pub fn has_error(n: Node) -> bool {
    n.has_error()
}

/// Parentheses and casts removed: `((size_t)blockIdx.x)` is `blockIdx.x`.
pub fn strip(n: Node) -> Node {
    let mut n = n;
    loop {
        match n.kind() {
            "parenthesized_expression" => match named_children(n).into_iter().find(|c| c.kind() != "comment") {
                Some(inner) => n = inner,
                None => return n,
            },
            "cast_expression" => match n.child_by_field_name("value") {
                Some(v) => n = v,
                None => return n,
            },
            _ => return n,
        }
    }
}

/// Parentheses removed, casts kept.
pub fn strip_parens(n: Node) -> Node {
    let mut n = n;
    while n.kind() == "parenthesized_expression" {
        match named_children(n).into_iter().find(|c| c.kind() != "comment") {
            Some(inner) => n = inner,
            None => break,
        }
    }
    n
}

/// `name` if the node is that identifier (after stripping).
pub fn is_ident(src: &str, n: Node, name: &str) -> bool {
    let s = strip(n);
    s.kind() == "identifier" && text(src, s) == name
}

/// `blockIdx.x`-style builtins: the object and the field.
pub fn builtin(src: &str, n: Node) -> Option<(&'static str, char)> {
    let n = strip(n);
    if n.kind() != "field_expression" {
        return None;
    }
    let obj = n.child_by_field_name("argument")?;
    let field = n.child_by_field_name("field")?;
    let o = match text(src, obj) {
        "blockIdx" => "blockIdx",
        "blockDim" => "blockDim",
        "threadIdx" => "threadIdx",
        "gridDim" => "gridDim",
        _ => return None,
    };
    let f = text(src, field).chars().next()?;
    matches!(f, 'x' | 'y' | 'z').then_some((o, f))
}

/// The operands of a chain of one binary operator: `a * b * c` is [a, b, c].
pub fn flatten<'t>(src: &str, n: Node<'t>, op: &str) -> Vec<Node<'t>> {
    let n = strip_parens(n);
    if n.kind() == "binary_expression" {
        if let (Some(l), Some(o), Some(r)) =
            (n.child_by_field_name("left"), n.child_by_field_name("operator"), n.child_by_field_name("right"))
        {
            if text(src, o) == op {
                let mut v = flatten(src, l, op);
                v.extend(flatten(src, r, op));
                return v;
            }
        }
    }
    vec![n]
}

/// The operator and operands of a binary expression.
pub fn binary<'t>(src: &str, n: Node<'t>) -> Option<(&'static str, Node<'t>, Node<'t>)> {
    let n = strip_parens(n);
    if n.kind() != "binary_expression" {
        return None;
    }
    let op = text(src, n.child_by_field_name("operator")?);
    let op: &'static str = match op {
        "+" => "+",
        "-" => "-",
        "*" => "*",
        "/" => "/",
        "%" => "%",
        "<" => "<",
        "<=" => "<=",
        ">" => ">",
        ">=" => ">=",
        "==" => "==",
        "!=" => "!=",
        "&&" => "&&",
        "||" => "||",
        "<<" => "<<",
        ">>" => ">>",
        "&" => "&",
        "|" => "|",
        "^" => "^",
        _ => return None,
    };
    Some((op, n.child_by_field_name("left")?, n.child_by_field_name("right")?))
}

/// Every identifier under `n` (the node itself included).
pub fn identifiers<'s>(src: &'s str, n: Node) -> Vec<&'s str> {
    descendants(n).into_iter().filter(|d| d.kind() == "identifier").map(|d| text(src, d)).collect()
}

/// Whether `name` occurs as an identifier under `n`.
pub fn mentions(src: &str, n: Node, name: &str) -> bool {
    descendants(n).into_iter().any(|d| d.kind() == "identifier" && text(src, d) == name)
}

/// The statements of a compound statement (comments and pragmas included, braces not).
pub fn statements(block: Node) -> Vec<Node> {
    named_children(block)
}

/// Whether `word` occurs in `text` as a whole C identifier.
pub fn mentions_word(text: &str, word: &str) -> bool {
    let is_id = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(p) = text[from..].find(word) {
        let at = from + p;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        if !before.is_some_and(is_id) && !after.is_some_and(is_id) {
            return true;
        }
        from = at + word.len();
    }
    false
}

/// The indentation of the line `at` is on.
pub fn indent_at(src: &str, at: usize) -> String {
    let line_start = src[..at.min(src.len())].rfind('\n').map_or(0, |p| p + 1);
    src[line_start..].chars().take_while(|c| *c == ' ' || *c == '\t').collect()
}

/// Re-indents a block of text so that its lines start at `indent` (the first line is
/// left alone: it continues wherever the edit starts).
pub fn reindent(block: &str, indent: &str) -> String {
    let mut out = String::new();
    for (i, line) in block.lines().enumerate() {
        if i > 0 {
            out.push('\n');
            if !line.is_empty() {
                out.push_str(indent);
            }
        }
        out.push_str(line);
    }
    out
}

/// The function definition `n` sits in, if any (`None`: file scope, a namespace, a class
/// body outside its members' bodies).
pub fn enclosing_function(n: Node) -> Option<Node> {
    let mut up = n.parent();
    while let Some(u) = up {
        if u.kind() == "function_definition" {
            return Some(u);
        }
        up = u.parent();
    }
    None
}

/// Whether `n` sits in an operand C++ never evaluates (`decltype(...)`, `sizeof`,
/// `alignof`): an expression there computes nothing, it only names a type.
pub fn unevaluated(n: Node) -> bool {
    let mut x = n;
    while let Some(p) = x.parent() {
        if matches!(p.kind(), "decltype" | "sizeof_expression" | "alignof_expression") {
            return true;
        }
        x = p;
    }
    false
}

/// Whether the file under `root` names a reference type through an alias (`typedef int&
/// iref;`, `using ref = float&;`): a declaration of that type binds a reference no
/// declarator shows.
pub fn has_reference_alias(src: &str, root: Node) -> bool {
    descendants(root).into_iter().any(|d| {
        matches!(d.kind(), "type_definition" | "alias_declaration")
            && descendants(d).iter().any(|x| x.kind() == "reference_declarator" || text(src, *x) == "&")
    })
}

/// What a `#pragma unroll` (or `nounroll`) right before a loop asks for.
pub enum Unroll {
    /// `#pragma unroll`: every trip.
    Full,
    /// `#pragma unroll N` (`nounroll` is 1).
    Times(i64),
    /// A count that is no literal (`#pragma unroll (FACTOR)`).
    Unknown,
}

/// The unroll pragma right before loop `f` (comments between skipped), with its line as
/// written, spaces collapsed.
pub fn unroll_pragma(t: &str, f: Node) -> Option<(Unroll, String)> {
    let mut prev = f.prev_named_sibling();
    while let Some(p) = prev.filter(|p| p.kind() == "comment") {
        prev = p.prev_named_sibling();
    }
    let p = prev.filter(|p| p.kind() == "preproc_call" && text(t, *p).contains("unroll"))?;
    let line = text(t, p).split_whitespace().collect::<Vec<_>>().join(" ");
    if line.contains("nounroll") {
        return Some((Unroll::Times(1), line));
    }
    let count = line.split_once("unroll").map_or("", |(_, a)| a).trim().trim_matches(|c| c == '(' || c == ')').trim();
    let unroll = match count.parse::<i64>() {
        _ if count.is_empty() => Unroll::Full,
        Ok(n) => Unroll::Times(n),
        Err(_) => Unroll::Unknown,
    };
    Some((unroll, line))
}

/// Whether the node is a statement that repeats its body: `for`, range-for, `while`, `do`.
pub fn is_iteration(n: Node) -> bool {
    matches!(n.kind(), "for_statement" | "while_statement" | "do_statement" | "for_range_loop")
}

/// Whether the node is a loop or a switch (where `break` and `continue` bind).
pub fn is_loop(n: Node) -> bool {
    is_iteration(n) || n.kind() == "switch_statement"
}

/// The `return`, `break`, `continue` and `goto` statements under `n` that are not bound
/// by a loop inside `n` (a `return` always escapes).
pub fn escapes(n: Node) -> Vec<Node> {
    fn walk<'t>(n: Node<'t>, in_loop: bool, out: &mut Vec<Node<'t>>) {
        match n.kind() {
            "return_statement" | "goto_statement" => out.push(n),
            "break_statement" | "continue_statement" if !in_loop => out.push(n),
            _ => {}
        }
        let inner = in_loop || is_loop(n);
        for c in named_children(n) {
            walk(c, inner, out);
        }
    }
    let mut out = Vec::new();
    for c in named_children(n) {
        walk(c, is_loop(n), &mut out);
    }
    if matches!(n.kind(), "return_statement" | "goto_statement" | "break_statement" | "continue_statement") {
        out.push(n);
    }
    out
}

/// The macros of a file whose replacement text holds a `return`, `break`, `continue` or
/// `goto`, each with the first such keyword. Recipes read the source as written, so code
/// that invokes one has control flow they cannot see.
pub fn jump_macros(src: &str, root: Node) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for (name, value) in macro_definitions(src, root) {
        let words: Vec<&str> = value.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).collect();
        if let Some(kw) = ["return", "break", "continue", "goto"].into_iter().find(|kw| words.contains(kw)) {
            out.push((name.to_string(), kw));
        }
    }
    out
}

/// Every `#define` under `root` that has a replacement text: its name and that text.
pub fn macro_definitions<'s>(src: &'s str, root: Node) -> Vec<(&'s str, &'s str)> {
    descendants(root)
        .into_iter()
        .filter(|d| matches!(d.kind(), "preproc_def" | "preproc_function_def"))
        .filter_map(|d| Some((text(src, d.child_by_field_name("name")?), text(src, d.child_by_field_name("value")?))))
        .collect()
}

/// The macros of the file (under `root`) that code under `n` names, each with its
/// replacement text: a macro may assign any name its text mentions.
pub fn macros_used_in(src: &str, root: Node, n: Node) -> Vec<(String, String)> {
    let used: BTreeSet<&str> =
        descendants(n).into_iter().filter(|d| d.kind() == "identifier").map(|d| text(src, d)).collect();
    macro_definitions(src, root)
        .into_iter()
        .filter(|(name, _)| used.contains(name))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

/// Whether a block-wide barrier (`__syncthreads` and its variants, a cooperative-groups
/// `sync()`, `bar.sync` in inline assembly) occurs under `n`.
pub fn has_barrier(src: &str, n: Node) -> bool {
    descendants(n).into_iter().any(|d| match d.kind() {
        "call_expression" => d.child_by_field_name("function").is_some_and(|f| {
            let t = text(src, f);
            t.starts_with("__syncthreads")
                || t == "__barrier_sync"
                || t.ends_with(".sync")
                || t.ends_with("::sync")
                || t.ends_with("->sync")
        }),
        "gnu_asm_expression" | "asm_statement" => {
            let t = text(src, d);
            t.contains("bar.sync") || t.contains("barrier")
        }
        _ => false,
    })
}

/// Whether warp-level primitives (shuffles, votes, warp sync) occur under `n`.
pub fn has_warp_primitive(src: &str, n: Node) -> bool {
    descendants(n).into_iter().any(|d| {
        d.kind() == "call_expression"
            && d.child_by_field_name("function").is_some_and(|f| {
                let t = text(src, f);
                t.starts_with("__shfl")
                    || t.starts_with("__ballot")
                    || t.starts_with("__any")
                    || t.starts_with("__all")
                    || t == "__syncwarp"
                    || t.starts_with("__reduce")
                    || t.starts_with("__match")
            })
    })
}

/// The variable a declaration declares and its initializer (single declarator only).
pub fn single_declarator<'t>(src: &str, decl: Node<'t>) -> Option<(String, Option<Node<'t>>)> {
    if decl.kind() != "declaration" {
        return None;
    }
    let ds: Vec<Node> = {
        let mut c = decl.walk();
        decl.children_by_field_name("declarator", &mut c).collect()
    };
    if ds.len() != 1 {
        return None;
    }
    let d = ds[0];
    match d.kind() {
        "init_declarator" => {
            let name = d.child_by_field_name("declarator")?;
            if name.kind() != "identifier" {
                return None;
            }
            Some((text(src, name).to_string(), d.child_by_field_name("value")))
        }
        "identifier" => Some((text(src, d).to_string(), None)),
        _ => None,
    }
}

/// The type text of a declaration (qualifiers included, declarator excluded).
pub fn declaration_type(src: &str, decl: Node) -> Option<String> {
    let ty = decl.child_by_field_name("type")?;
    let mut parts = Vec::new();
    for c in children(decl) {
        if c.kind() == "type_qualifier" || c.kind() == "storage_class_specifier" {
            parts.push(text(src, c).to_string());
        }
        if c.id() == ty.id() {
            parts.push(text(src, c).to_string());
            break;
        }
    }
    Some(parts.join(" "))
}

/// The declarations (by name) made anywhere under `n`.
pub fn declared_names(src: &str, n: Node) -> Vec<String> {
    let mut out = Vec::new();
    for d in descendants(n) {
        if d.kind() == "declaration" {
            let mut c = d.walk();
            for decl in d.children_by_field_name("declarator", &mut c) {
                let mut x = decl;
                loop {
                    match x.kind() {
                        "identifier" => {
                            out.push(text(src, x).to_string());
                            break;
                        }
                        _ => match x.child_by_field_name("declarator") {
                            Some(inner) => x = inner,
                            None => break,
                        },
                    }
                }
            }
        }
    }
    out
}

/// The names assigned (`=`, `+=`, `++`...) anywhere under `n`, with the assigning node.
pub fn assigned<'t>(src: &str, n: Node<'t>) -> Vec<(String, Node<'t>)> {
    let mut out = Vec::new();
    // The file's reference parameters, read once and only where a call needs them.
    let mut by_ref: Option<HashMap<String, BTreeSet<usize>>> = None;
    for d in descendants(n) {
        let targets = match d.kind() {
            "assignment_expression" => d.child_by_field_name("left").into_iter().collect(),
            "update_expression" => d.child_by_field_name("argument").into_iter().collect(),
            // `&name` hands out the variable's address: whatever receives it may change it.
            "pointer_expression" if d.child_by_field_name("operator").is_some_and(|o| text(src, o) == "&") => {
                d.child_by_field_name("argument").into_iter().collect()
            }
            // A variable bound to a reference parameter of a function of the file.
            "call_expression" => {
                let by_ref = by_ref.get_or_insert_with(|| reference_params(src, d));
                by_reference(src, d, by_ref)
            }
            _ => Vec::new(),
        };
        for t in targets {
            let t = strip_parens(t);
            if t.kind() == "identifier" {
                out.push((text(src, t).to_string(), d));
            }
        }
    }
    out
}

/// For every function the file (the tree `at` belongs to) defines, the positions of the
/// parameters it takes by non-const reference (`float& acc`); overloads of one name count
/// together.
fn reference_params(src: &str, at: Node) -> HashMap<String, BTreeSet<usize>> {
    let mut root = at;
    while let Some(p) = root.parent() {
        root = p;
    }
    let mut out: HashMap<String, BTreeSet<usize>> = HashMap::new();
    for def in descendants(root) {
        if def.kind() != "function_definition" {
            continue;
        }
        let Some(decl) = descendants(def).into_iter().find(|d| d.kind() == "function_declarator") else { continue };
        let (Some(name), Some(params)) =
            (decl.child_by_field_name("declarator"), decl.child_by_field_name("parameters"))
        else {
            continue;
        };
        let params = named_children(params).into_iter().filter(|p| p.kind() != "comment");
        for (i, p) in params.enumerate() {
            let is_ref = p.child_by_field_name("declarator").is_some_and(|d| d.kind() == "reference_declarator");
            let is_const = descendants(p).iter().any(|q| q.kind() == "type_qualifier" && text(src, *q) == "const");
            if is_ref && !is_const {
                out.entry(text(src, name).to_string()).or_default().insert(i);
            }
        }
    }
    out
}

/// The arguments of a call bound to reference parameters of its callee.
fn by_reference<'t>(src: &str, call: Node<'t>, by_ref: &HashMap<String, BTreeSet<usize>>) -> Vec<Node<'t>> {
    let (Some(f), Some(args)) = (call.child_by_field_name("function"), call.child_by_field_name("arguments")) else {
        return Vec::new();
    };
    let Some(at) = by_ref.get(text(src, f)) else { return Vec::new() };
    let args = named_children(args).into_iter().filter(|a| a.kind() != "comment");
    args.enumerate().filter(|(i, _)| at.contains(i)).map(|(_, a)| a).collect()
}

/// The names handed bare to a call under `n` (`f(x)`, `ADV(o)`): a macro, a template or
/// a function of another file may change them through a reference.
pub fn passed_bare(src: &str, n: Node) -> Vec<String> {
    let mut out = Vec::new();
    for call in descendants(n).into_iter().filter(|d| d.kind() == "call_expression") {
        if let Some(args) = call.child_by_field_name("arguments") {
            for a in named_children(args) {
                let a = strip_parens(a);
                if a.kind() == "identifier" {
                    out.push(text(src, a).to_string());
                }
            }
        }
    }
    out
}

/// A type with its qualifiers and storage words dropped word by word: `constexpr int` is
/// `int` (not `expr int`), `const float* __restrict__`'s element `const float` is `float`.
pub fn unqualified(ty: &str) -> String {
    ty.split_whitespace()
        .filter(|w| {
            !matches!(*w, "const" | "constexpr" | "volatile" | "static" | "register" | "__restrict__" | "restrict")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// C type names that are 64 bits wide on CUDA's LP64 hosts and devices.
pub fn is_64bit_int(ty: &str) -> bool {
    let t: Vec<&str> = ty.split_whitespace().filter(|w| *w != "const" && *w != "volatile" && *w != "static").collect();
    let t = t.join(" ");
    matches!(
        t.as_str(),
        "size_t"
            | "ssize_t"
            | "ptrdiff_t"
            | "int64_t"
            | "uint64_t"
            | "long"
            | "long int"
            | "unsigned long"
            | "long long"
            | "long long int"
            | "unsigned long long"
            | "unsigned long long int"
            | "std::size_t"
            | "std::int64_t"
            | "std::uint64_t"
            | "index_t"
    )
}

/// Code on one line, whitespace runs made one space, cut to `most` characters (with
/// "..." in the last three) for a message or a comment.
pub fn one_line(code: &str, most: usize) -> String {
    let s = code.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() <= most {
        s
    } else {
        format!("{}...", s.chars().take(most.saturating_sub(3)).collect::<String>())
    }
}

/// The header of a loop that counts up by one: `for (T v = START; v < BOUND; ++v)` (or
/// `<=`, `v++`, `v += 1`), the update naming the counter itself.
pub struct UnitLoop<'t> {
    pub var: String,
    pub start: Node<'t>,
    /// `<` or `<=`.
    pub inclusive: bool,
    pub bound: Node<'t>,
}

pub fn unit_step_loop<'t>(src: &str, f: Node<'t>) -> Option<UnitLoop<'t>> {
    let init = f.child_by_field_name("initializer")?;
    let (var, Some(start)) = single_declarator(src, init)? else { return None };
    let (op, l, bound) = binary(src, f.child_by_field_name("condition")?)?;
    if !is_ident(src, l, &var) || !matches!(op, "<" | "<=") {
        return None;
    }
    let update = f.child_by_field_name("update")?;
    let unit = match update.kind() {
        "update_expression" => {
            text(src, update).contains("++")
                && update.child_by_field_name("argument").is_some_and(|a| is_ident(src, a, &var))
        }
        "assignment_expression" => {
            update.child_by_field_name("left").is_some_and(|a| is_ident(src, a, &var))
                && update.child_by_field_name("operator").is_some_and(|o| text(src, o) == "+=")
                && update.child_by_field_name("right").is_some_and(|r| text(src, r).trim() == "1")
        }
        _ => false,
    };
    unit.then_some(UnitLoop { var, start, inclusive: op == "<=", bound })
}

/// The size in bytes of a C element type, for the types kernels move through memory.
pub fn type_size(ty: &str) -> Option<usize> {
    let t: Vec<&str> =
        ty.split_whitespace().filter(|w| !matches!(*w, "const" | "volatile" | "__restrict__" | "restrict")).collect();
    let t = t.join(" ");
    Some(match t.as_str() {
        "char" | "signed char" | "unsigned char" | "int8_t" | "uint8_t" | "bool" | "__nv_fp8_e4m3"
        | "__nv_fp8_e5m2" => 1,
        "short" | "unsigned short" | "int16_t" | "uint16_t" | "half" | "__half" | "__nv_bfloat16" | "nv_bfloat16"
        | "__nv_half" => 2,
        "float" | "int" | "unsigned" | "unsigned int" | "int32_t" | "uint32_t" | "__half2" | "half2"
        | "__nv_bfloat162" | "nv_bfloat162" | "char4" | "uchar4" => 4,
        "double" | "long" | "unsigned long" | "long long" | "unsigned long long" | "int64_t" | "uint64_t"
        | "size_t" | "float2" | "int2" | "uint2" => 8,
        "float4" | "int4" | "uint4" | "double2" => 16,
        _ => return None,
    })
}

/// The text with every comment replaced by spaces (newlines kept, so offsets and lines
/// stay), strings and character literals kept as they are.
pub fn blank_comments(text: &str) -> String {
    #[derive(PartialEq)]
    enum State {
        Code,
        Line,
        Block,
        Quoted(u8),
    }
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut state = State::Code;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        match state {
            State::Code => match (c, next) {
                (b'/', Some(b'/')) => {
                    state = State::Line;
                    out[i] = b' ';
                    out[i + 1] = b' ';
                    i += 1;
                }
                (b'/', Some(b'*')) => {
                    state = State::Block;
                    out[i] = b' ';
                    out[i + 1] = b' ';
                    i += 1;
                }
                (b'"', _) => state = State::Quoted(b'"'),
                // A quote after a digit is C++14's digit separator (1'000), not a literal.
                (b'\'', _) if i == 0 || !b[i - 1].is_ascii_hexdigit() => state = State::Quoted(b'\''),
                _ => {}
            },
            State::Line => {
                if c == b'\n' && (i == 0 || b[i - 1] != b'\\') {
                    state = State::Code;
                } else if c != b'\n' {
                    out[i] = b' ';
                }
            }
            State::Block => {
                if c == b'*' && next == Some(b'/') {
                    out[i] = b' ';
                    out[i + 1] = b' ';
                    i += 1;
                    state = State::Code;
                } else if c != b'\n' {
                    out[i] = b' ';
                }
            }
            State::Quoted(q) => {
                if c == b'\\' {
                    i += 1;
                } else if c == q || c == b'\n' {
                    state = State::Code;
                }
            }
        }
        i += 1;
    }
    // Only whole comments became spaces, and comments start and end on ASCII bytes.
    String::from_utf8(out).expect("blanking comments keeps UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Source;

    #[test]
    fn a_variable_handed_out_by_address_or_reference_counts_as_assigned() {
        let src = Source::parse(
            "__device__ void bump(int& a) { a += 1; }\n__device__ void look(const int& a, int* p) {}\n\
             __global__ void k(int* o) { int off = 0, keep = 0, seen = 0; bump(off); look(keep, &seen); o[0] = off + keep + seen; }",
        );
        let k = src.kernels().into_iter().next().unwrap();
        let body = src.node(&k.body, "compound_statement").unwrap();
        let names: Vec<String> = assigned(src.text(), body).into_iter().map(|(n, _)| n).collect();
        assert!(names.contains(&"off".to_string()) && names.contains(&"seen".to_string()), "{names:?}");
        assert!(!names.contains(&"keep".to_string()), "{names:?}");
    }

    #[test]
    fn macros_that_hide_a_jump_are_named() {
        let src = Source::parse("#define SKIP(c) if (c) return\n#define N 4\n#define NEXT continue\n");
        assert_eq!(
            jump_macros(src.text(), src.root()),
            vec![("SKIP".to_string(), "return"), ("NEXT".to_string(), "continue")]
        );
    }

    #[test]
    fn strip_removes_casts_and_parentheses() {
        let s = Source::parse("int f() { return ((size_t)(blockIdx.x)); }");
        let ret = descendants(s.root()).into_iter().find(|n| n.kind() == "return_statement").unwrap();
        let e = named_children(ret)[0];
        assert_eq!(builtin(s.text(), e), Some(("blockIdx", 'x')));
    }

    #[test]
    fn flatten_collects_a_chain() {
        let s = Source::parse("int f() { return a * (b * c) * d; }");
        let ret = descendants(s.root()).into_iter().find(|n| n.kind() == "return_statement").unwrap();
        let e = named_children(ret)[0];
        let parts: Vec<&str> = flatten(s.text(), e, "*").into_iter().map(|n| text(s.text(), n)).collect();
        assert_eq!(parts, ["a", "b", "c", "d"]);
    }

    #[test]
    fn escapes_ignore_breaks_bound_by_inner_loops() {
        let s = Source::parse("void f() { for (;;) { break; } if (x) return; while (1) { continue; } }");
        let body = descendants(s.root()).into_iter().find(|n| n.kind() == "compound_statement").unwrap();
        let e = escapes(body);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].kind(), "return_statement");
    }

    #[test]
    fn widths_of_index_types() {
        assert!(is_64bit_int("const size_t"));
        assert!(is_64bit_int("long long"));
        assert!(!is_64bit_int("int"));
        assert_eq!(type_size("const __nv_bfloat16"), Some(2));
        assert_eq!(type_size("float"), Some(4));
        assert_eq!(type_size("MyStruct"), None);
    }
}
