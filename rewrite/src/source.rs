//! A parsed CUDA file and what recipes need to know of it: the kernels (`__global__`
//! functions) with their parameters, the host functions, and every kernel launch
//! (`k<<<grid, block, smem, stream>>>(args)`) with its configuration and arguments, and
//! whether it is the fast path or the fallback of a versioned launch.

use crate::syntax::{self, children, descendants, named_children, text};
use std::ops::Range;
use tree_sitter::{Node, Parser, Tree};

/// The comment that marks a kernel as the fast-path copy of another.
pub const FAST_MARK: &str = "// nightshift: fast path of ";
/// The comment inside the condition of a versioned launch.
pub const GUARD_MARK: &str = "/* nightshift: fast path */";

/// Syntax nesting past which recipes decline (real kernels stay far below it).
pub const MAX_DEPTH: usize = 400;

/// CUDA source text and its syntax tree.
pub struct Source {
    text: String,
    tree: Option<Tree>,
}

impl Clone for Source {
    fn clone(&self) -> Source {
        Source::parse(&self.text)
    }
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source").field("bytes", &self.text.len()).finish()
    }
}

/// A kernel parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    /// The whole declaration as written.
    pub decl: String,
    pub range: Range<usize>,
    /// The range of the name within the declaration (where `__restrict__` goes before).
    pub name_range: Range<usize>,
    /// One level of pointer.
    pub pointer: bool,
    /// The pointee (or value) is const.
    pub is_const: bool,
    pub restrict: bool,
    /// The element (or value) type without qualifiers: `__nv_bfloat16`, `int`.
    pub base: String,
}

impl Param {
    /// Bytes per element of a pointer parameter, when the type is a known scalar.
    pub fn elem_size(&self) -> Option<usize> {
        syntax::type_size(&self.base)
    }
}

/// A `__global__` function.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub name: String,
    /// The whole definition, a `template <...>` prefix included.
    pub range: Range<usize>,
    pub name_range: Range<usize>,
    pub params: Vec<Param>,
    /// The range of the parameter list, parentheses included.
    pub params_range: Range<usize>,
    /// The body, braces included.
    pub body: Range<usize>,
    /// For a fast-path copy: the kernel it stands in for.
    pub fast_of: Option<String>,
    pub is_template: bool,
    /// The definition contains a parse error.
    pub has_error: bool,
}

impl Kernel {
    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }

    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }
}

/// A non-kernel function with a body (launchers, helpers).
#[derive(Debug, Clone, PartialEq)]
pub struct HostFn {
    pub name: String,
    pub range: Range<usize>,
    pub body: Range<usize>,
    /// Parameter names in order (the stream included).
    pub params: Vec<String>,
    /// Each parameter's type as written, qualifiers included (`const dim3`, `int`), in
    /// the order of `params`.
    pub param_types: Vec<String>,
    /// The return type as written (`static dim3`, `int`); a pointer or reference return
    /// ends in `*` or `&`.
    pub returns: String,
    pub is_device: bool,
    pub extern_c: bool,
}

/// A versioned launch: `if (GUARD_MARK cond) { fast } else { fallback }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    pub if_range: Range<usize>,
    /// The condition inside the parentheses.
    pub cond: Range<usize>,
}

/// One `kernel<<<...>>>(...)` statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub kernel: String,
    /// The expression statement.
    pub stmt: Range<usize>,
    /// The range of the kernel's name inside the call.
    pub name_range: Range<usize>,
    /// grid, block, shared memory, stream (as many as written).
    pub config: Vec<String>,
    pub config_ranges: Vec<Range<usize>>,
    pub args: Vec<String>,
    pub arg_ranges: Vec<Range<usize>>,
    /// The argument list, parentheses included.
    pub args_range: Range<usize>,
    /// The host function the launch is in.
    pub host: String,
    /// In the else branch of a versioned launch.
    pub fallback: bool,
    /// In the then branch of a versioned launch: its guard.
    pub guard: Option<Guard>,
}

impl Launch {
    /// The launch argument bound to kernel parameter `i`.
    pub fn arg(&self, i: usize) -> Option<&str> {
        self.args.get(i).map(String::as_str)
    }
}

impl Source {
    /// Parses CUDA text. Never fails: a file with syntax the grammar does not know is
    /// kept with error nodes, and recipes decline to touch code that contains them.
    pub fn parse(text: &str) -> Source {
        let mut parser = Parser::new();
        let tree = match parser.set_language(&tree_sitter_cuda::LANGUAGE.into()) {
            Ok(()) => parser.parse(text, None),
            Err(_) => None,
        };
        Source { text: text.to_string(), tree }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The depth of the deepest node (walked without recursion): recipes recurse over
    /// expressions, so a file nested deeper than [`MAX_DEPTH`] is declined, not walked.
    pub fn max_depth(&self) -> usize {
        let mut deepest = 0;
        let mut stack = vec![(self.root(), 1usize)];
        while let Some((n, d)) = stack.pop() {
            deepest = deepest.max(d);
            let mut c = n.walk();
            for ch in n.children(&mut c) {
                stack.push((ch, d + 1));
            }
        }
        deepest
    }

    /// The names of the functions the file calls by name (kernel launches included), in
    /// order of appearance, each once; comments and strings are not calls.
    pub fn called_functions(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for n in crate::syntax::descendants(self.root()) {
            if n.kind() != "call_expression" {
                continue;
            }
            let Some(callee) = n.child_by_field_name("function") else { continue };
            if callee.kind() == "identifier" {
                let name = crate::syntax::text(&self.text, callee);
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
        out
    }

    /// The root of the syntax tree (an empty translation unit if parsing gave up).
    pub fn root(&self) -> Node<'_> {
        match &self.tree {
            Some(t) => t.root_node(),
            None => {
                // Parsing only gives up on cancellation or a language mismatch; both are
                // bugs here, but the recipes must still decline, not panic.
                static EMPTY: std::sync::OnceLock<Tree> = std::sync::OnceLock::new();
                EMPTY
                    .get_or_init(|| {
                        let mut p = Parser::new();
                        let _ = p.set_language(&tree_sitter_cuda::LANGUAGE.into());
                        p.parse("", None).expect("the empty file parses")
                    })
                    .root_node()
            }
        }
    }

    /// The node covering exactly `range` with the given kind, if there is one.
    pub fn node(&self, range: &Range<usize>, kind: &str) -> Option<Node<'_>> {
        let mut n = self.root().descendant_for_byte_range(range.start, range.end)?;
        loop {
            if n.byte_range() == *range && n.kind() == kind {
                return Some(n);
            }
            if n.start_byte() < range.start || n.end_byte() > range.end {
                return None;
            }
            n = n.parent()?;
        }
    }

    /// The smallest node that spans exactly `range`, whatever its kind.
    pub fn node_at(&self, range: &Range<usize>) -> Option<Node<'_>> {
        let mut n = self.root().descendant_for_byte_range(range.start, range.end)?;
        while n.byte_range() != *range {
            n = n.parent()?;
            if n.start_byte() < range.start || n.end_byte() > range.end {
                return None;
            }
        }
        Some(n)
    }

    /// Every function definition, with the node that spans it (its template prefix).
    fn functions(&self) -> Vec<(Node<'_>, Node<'_>)> {
        let mut out = Vec::new();
        for n in descendants(self.root()) {
            if n.kind() != "function_definition" {
                continue;
            }
            // Only top-level functions, in namespaces, extern "C" blocks or templates.
            let mut outer = n;
            if let Some(p) = n.parent() {
                if p.kind() == "template_declaration" {
                    outer = p;
                }
            }
            let ok = outer
                .parent()
                .is_some_and(|p| matches!(p.kind(), "translation_unit" | "declaration_list" | "linkage_specification"));
            if ok {
                out.push((n, outer));
            }
        }
        out
    }

    fn specifiers(&self, f: Node) -> Vec<String> {
        let mut out = Vec::new();
        for c in children(f) {
            if c.kind() == "function_declarator" || c.kind() == "compound_statement" {
                break;
            }
            let t = text(&self.text, c);
            if t.starts_with("__") || c.kind() == "storage_class_specifier" {
                out.push(t.to_string());
            }
        }
        out
    }

    fn declarator(f: Node) -> Option<Node> {
        let mut d = f.child_by_field_name("declarator")?;
        // `void* f(...)`: the function declarator sits under pointer declarators.
        while d.kind() != "function_declarator" {
            d = d.child_by_field_name("declarator")?;
        }
        Some(d)
    }

    /// The `__global__` functions, in source order.
    pub fn kernels(&self) -> Vec<Kernel> {
        let mut out = Vec::new();
        for (f, outer) in self.functions() {
            if !self.specifiers(f).iter().any(|s| s == "__global__") {
                continue;
            }
            let Some(decl) = Self::declarator(f) else { continue };
            let Some(name) = decl.child_by_field_name("declarator") else { continue };
            let Some(plist) = decl.child_by_field_name("parameters") else { continue };
            let Some(body) = f.child_by_field_name("body") else { continue };
            let params = named_children(plist)
                .into_iter()
                .filter(|p| p.kind() == "parameter_declaration")
                .filter_map(|p| self.param(p))
                .collect();
            let fast_of = self.fast_mark_before(outer.start_byte());
            out.push(Kernel {
                name: text(&self.text, name).to_string(),
                range: outer.byte_range(),
                name_range: name.byte_range(),
                params,
                params_range: plist.byte_range(),
                body: body.byte_range(),
                fast_of,
                is_template: outer.kind() == "template_declaration",
                has_error: outer.has_error(),
            });
        }
        out
    }

    pub fn kernel(&self, name: &str) -> Option<Kernel> {
        self.kernels().into_iter().find(|k| k.name == name)
    }

    /// The fast-path mark in the comment right before a definition.
    fn fast_mark_before(&self, at: usize) -> Option<String> {
        let before = self.text[..at].trim_end();
        let line = before.rsplit('\n').next()?.trim();
        let rest = line.strip_prefix(FAST_MARK.trim_end())?.trim();
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        (!name.is_empty()).then_some(name)
    }

    fn param(&self, p: Node) -> Option<Param> {
        let src = &self.text;
        let ty = p.child_by_field_name("type")?;
        let mut d = p.child_by_field_name("declarator")?;
        let mut pointer = 0;
        let mut restrict = false;
        let mut quals_after = Vec::new();
        loop {
            match d.kind() {
                "pointer_declarator" => {
                    pointer += 1;
                    for c in children(d) {
                        if c.kind() == "type_qualifier" {
                            let t = text(src, c);
                            if t.contains("restrict") {
                                restrict = true;
                            }
                            quals_after.push(t.to_string());
                        }
                    }
                    d = d.child_by_field_name("declarator")?;
                }
                "identifier" => break,
                "reference_declarator" | "array_declarator" => return None,
                _ => return None,
            }
        }
        let mut is_const = false;
        for c in children(p) {
            if c.kind() == "type_qualifier" && text(src, c) == "const" {
                is_const = true;
            }
        }
        // `float const* x`
        let base_text = text(src, ty).to_string();
        let mut base = base_text.clone();
        if let Some(stripped) = base.strip_suffix(" const") {
            base = stripped.to_string();
            is_const = true;
        }
        if pointer > 1 {
            return None;
        }
        Some(Param {
            name: text(src, d).to_string(),
            decl: text(src, p).to_string(),
            range: p.byte_range(),
            name_range: d.byte_range(),
            pointer: pointer == 1,
            is_const,
            restrict,
            base,
        })
    }

    /// Functions with a body that are not kernels.
    pub fn host_functions(&self) -> Vec<HostFn> {
        let mut out = Vec::new();
        for (f, outer) in self.functions() {
            let specs = self.specifiers(f);
            if specs.iter().any(|s| s == "__global__") {
                continue;
            }
            let is_device = specs.iter().any(|s| s == "__device__") && !specs.iter().any(|s| s == "__host__");
            let Some(decl) = Self::declarator(f) else { continue };
            let Some(name) = decl.child_by_field_name("declarator") else { continue };
            let Some(body) = f.child_by_field_name("body") else { continue };
            let declared: Vec<Node> = decl
                .child_by_field_name("parameters")
                .map(|pl| named_children(pl).into_iter().filter(|p| p.kind() == "parameter_declaration").collect())
                .unwrap_or_default();
            let params = declared
                .iter()
                .map(|p| {
                    let mut d = p.child_by_field_name("declarator");
                    while let Some(x) = d {
                        if x.kind() == "identifier" {
                            break;
                        }
                        d = x.child_by_field_name("declarator");
                    }
                    d.map(|x| text(&self.text, x).to_string()).unwrap_or_default()
                })
                .collect();
            let param_types =
                declared.iter().map(|p| syntax::declaration_type(&self.text, *p).unwrap_or_default()).collect();
            let mut returns = syntax::declaration_type(&self.text, f).unwrap_or_default();
            match f.child_by_field_name("declarator").map(|d| d.kind()) {
                Some("pointer_declarator") => returns.push_str(" *"),
                Some("reference_declarator") => returns.push_str(" &"),
                _ => {}
            }
            let extern_c = outer.parent().is_some_and(|p| p.kind() == "linkage_specification")
                || outer.parent().and_then(|p| p.parent()).is_some_and(|p| p.kind() == "linkage_specification");
            out.push(HostFn {
                name: text(&self.text, name).to_string(),
                range: outer.byte_range(),
                body: body.byte_range(),
                params,
                param_types,
                returns,
                is_device,
                extern_c,
            });
        }
        out
    }

    /// Every kernel launch in a host function, in source order.
    pub fn launches(&self) -> Vec<Launch> {
        let src = &self.text;
        let hosts = self.host_functions();
        let mut out = Vec::new();
        for n in descendants(self.root()) {
            if n.kind() != "call_expression" {
                continue;
            }
            let Some(cfg) = children(n).into_iter().find(|c| c.kind() == "kernel_call_syntax") else { continue };
            let Some(func) = n.child_by_field_name("function") else { continue };
            let name_node = match func.kind() {
                "identifier" => func,
                "template_function" => match func.child_by_field_name("name") {
                    Some(x) => x,
                    None => continue,
                },
                _ => continue,
            };
            let Some(args) = n.child_by_field_name("arguments") else { continue };
            let Some(stmt) = n.parent().filter(|p| p.kind() == "expression_statement") else { continue };
            let config: Vec<Node> = named_children(cfg).into_iter().filter(|c| c.kind() != "comment").collect();
            let arg_nodes: Vec<Node> = named_children(args).into_iter().filter(|c| c.kind() != "comment").collect();
            let host = hosts
                .iter()
                .find(|h| h.range.start <= n.start_byte() && n.end_byte() <= h.range.end)
                .map(|h| h.name.clone())
                .unwrap_or_default();
            let (fallback, guard) = self.versioning_of(stmt);
            out.push(Launch {
                kernel: text(src, name_node).to_string(),
                stmt: stmt.byte_range(),
                name_range: name_node.byte_range(),
                config: config.iter().map(|c| text(src, *c).to_string()).collect(),
                config_ranges: config.iter().map(|c| c.byte_range()).collect(),
                args: arg_nodes.iter().map(|c| text(src, *c).to_string()).collect(),
                arg_ranges: arg_nodes.iter().map(|c| c.byte_range()).collect(),
                args_range: args.byte_range(),
                host,
                fallback,
                guard,
            });
        }
        out
    }

    /// Whether a launch statement is the fallback or the fast path of a versioned launch.
    fn versioning_of(&self, stmt: Node) -> (bool, Option<Guard>) {
        let mut child = stmt;
        let mut n = stmt.parent();
        while let Some(p) = n {
            if p.kind() == "function_definition" {
                break;
            }
            if p.kind() == "if_statement" {
                if let Some(cond) = p.child_by_field_name("condition") {
                    let ct = text(&self.text, cond);
                    if ct.contains(GUARD_MARK) {
                        let in_else = p
                            .child_by_field_name("alternative")
                            .is_some_and(|a| a.start_byte() <= child.start_byte() && child.end_byte() <= a.end_byte());
                        if in_else {
                            return (true, None);
                        }
                        // The condition's range: inside the parentheses (the mark included).
                        let start = cond.start_byte() + 1;
                        let end = cond.end_byte() - 1;
                        return (false, Some(Guard { if_range: p.byte_range(), cond: start..end }));
                    }
                }
            }
            child = p;
            n = p.parent();
        }
        (false, None)
    }

    /// The kernels a recipe may rewrite: those launched from host code outside a
    /// fallback branch (the fast path where there is one), in source order.
    pub fn primary_kernels(&self) -> Vec<Kernel> {
        let launches = self.launches();
        self.kernels().into_iter().filter(|k| launches.iter().any(|l| l.kernel == k.name && !l.fallback)).collect()
    }

    /// The launches of `kernel` outside fallback branches.
    pub fn launches_of(&self, kernel: &str) -> Vec<Launch> {
        self.launches().into_iter().filter(|l| l.kernel == kernel && !l.fallback).collect()
    }

    /// Where helper definitions go: before the first function or template at file
    /// scope, after the includes and macros above it.
    pub fn prelude_offset(&self) -> usize {
        for n in named_children(self.root()) {
            match n.kind() {
                "function_definition"
                | "template_declaration"
                | "linkage_specification"
                | "namespace_definition"
                | "declaration"
                | "struct_specifier"
                | "class_specifier" => {
                    // Keep a comment block directly above with its definition.
                    let mut start = n.start_byte();
                    let mut prev = n.prev_sibling();
                    while let Some(p) = prev {
                        if p.kind() == "comment" && self.text[p.end_byte()..start].matches('\n').count() <= 1 {
                            start = p.start_byte();
                            prev = p.prev_sibling();
                        } else {
                            break;
                        }
                    }
                    return start;
                }
                _ => {}
            }
        }
        self.text.len()
    }

    /// Whether an identifier is defined as a macro or declared at file scope (so a new
    /// helper must not reuse the name).
    pub fn defines(&self, name: &str) -> bool {
        descendants(self.root()).into_iter().any(|n| {
            (n.kind() == "identifier" || n.kind() == "type_identifier" || n.kind() == "field_identifier")
                && text(&self.text, n) == name
        }) || self.text.contains(&format!("#define {name}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VADD: &str = r#"
#include <cuda_runtime.h>
#define BLOCK 256
__global__ void add(const float* __restrict__ a, const float* b, float *c, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t stream) {
  if (n <= 0) return;
  add<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, stream>>>(a, b, c, n);
}
"#;

    #[test]
    fn called_functions_are_calls_and_launches_by_name_not_comments_or_strings() {
        let src = Source::parse(
            "// cublasGemmEx(h) in a comment\nvoid f(int* p) { const char* s = \"cublasCreate(\";\n  if (!h && cublasCreate(&h)) return;\n  cublasGemmEx(h, 1); (*fp)(2); k<<<1, 1>>>(p); cublasCreate(&h); }\n",
        );
        assert_eq!(src.called_functions(), vec!["cublasCreate", "cublasGemmEx", "k"]);
    }

    #[test]
    fn kernels_params_and_launches() {
        let s = Source::parse(VADD);
        let k = s.kernels();
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].name, "add");
        let p = &k[0].params;
        assert_eq!(p.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["a", "b", "c", "n"]);
        assert!(p[0].pointer && p[0].is_const && p[0].restrict && p[0].base == "float");
        assert!(p[2].pointer && !p[2].is_const && !p[2].restrict);
        assert!(!p[3].pointer && p[3].base == "int");
        let l = s.launches();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].kernel, "add");
        assert_eq!(l[0].config, ["(n + BLOCK - 1) / BLOCK", "BLOCK", "0", "stream"]);
        assert_eq!(l[0].args, ["a", "b", "c", "n"]);
        assert_eq!(l[0].host, "vector_add");
        assert!(!l[0].fallback && l[0].guard.is_none());
        let h = s.host_functions();
        assert_eq!(h[0].name, "vector_add");
        assert!(h[0].extern_c);
        assert_eq!(h[0].params, ["a", "b", "c", "n", "stream"]);
        assert_eq!(s.primary_kernels().len(), 1);
    }

    #[test]
    fn versioned_launches_are_recognized() {
        let text = format!(
            r#"
__global__ void k(float* x) {{ x[0] = 1; }}
{FAST_MARK}k
__global__ void k_fast(float* x) {{ x[0] = 1; }}
extern "C" void run(float* x, cudaStream_t s) {{
  if ({GUARD_MARK} x != 0) {{
    k_fast<<<1, 1, 0, s>>>(x);
  }} else {{
    k<<<1, 1, 0, s>>>(x);
  }}
}}
"#
        );
        let s = Source::parse(&text);
        let ks = s.kernels();
        assert_eq!(ks[1].fast_of.as_deref(), Some("k"));
        assert_eq!(ks[0].fast_of, None);
        let l = s.launches();
        assert_eq!(l.len(), 2);
        assert!(l[0].guard.is_some() && !l[0].fallback);
        assert!(l[1].fallback);
        let cond = l[0].guard.as_ref().unwrap().cond.clone();
        assert_eq!(&s.text()[cond], format!("{GUARD_MARK} x != 0"));
        let primary: Vec<String> = s.primary_kernels().into_iter().map(|k| k.name).collect();
        assert_eq!(primary, ["k_fast"]);
    }

    #[test]
    fn prelude_goes_after_includes_and_macros() {
        let s = Source::parse(VADD);
        let at = s.prelude_offset();
        assert!(s.text()[at..].starts_with("__global__"));
    }
}
