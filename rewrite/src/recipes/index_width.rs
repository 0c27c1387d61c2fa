//! Index width: 64-bit index arithmetic (`size_t` and `int64_t` indices, `(size_t)`
//! casts in index products, 64-bit size parameters) done in 32 bits. A 64-bit multiply or
//! divide costs several 32-bit instructions (a 64-bit `%` by a run-time value is a
//! software routine); the fast path runs when every buffer the kernel receives holds at
//! most 2^30 elements, so no index or index-plus-stride can overflow. Values loaded from
//! memory (a 64-bit token id, an accumulator) keep their width.

use crate::facts::Facts;
use crate::guards;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{self, descendants, text};
use crate::version::Change;
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "type",
    values: &["int", "unsigned"],
    doc: "the 32-bit type the indices take (int lets the compiler assume no wrap-around; unsigned divides faster)",
}];

/// 2^30: an index below it plus a stride below it still fits in a signed 32-bit int.
pub const LIMIT: i64 = 1 << 30;

/// Whether evaluating `n` reads memory (a subscript, a dereference, `->`, a call that
/// is not a pure integer helper).
pub fn reads_memory(t: &str, n: Node) -> bool {
    descendants(n).into_iter().any(|d| match d.kind() {
        "subscript_expression" => true,
        "pointer_expression" => d.child(0).is_some_and(|op| text(t, op) == "*"),
        "field_expression" => d.child_by_field_name("operator").is_some_and(|o| text(t, o) == "->"),
        "call_expression" => {
            let f = d.child_by_field_name("function").map(|f| text(t, f)).unwrap_or("");
            !matches!(f, "min" | "max" | "umin" | "umax" | "llmin" | "llmax" | "static_cast" | "__umulhi" | "__mulhi")
                && !f.starts_with("static_cast")
        }
        _ => false,
    })
}

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let ty = params.get(PARAMS, "type").to_string();
    super::per_kernel(src, params, |k| plan(src, facts, k, &ty))
}

fn plan<'k>(src: &Source, facts: &Facts, k: &'k Kernel, ty: &str) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    let def = src
        .node(&k.range, if k.is_template { "template_declaration" } else { "function_definition" })
        .ok_or_else(|| NotApplicable::new("the kernel could not be found again"))?;
    if k.has_error {
        return Err(NotApplicable::new(format!("`{}` contains syntax this parser does not know", k.name)));
    }
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| NotApplicable::new("no body"))?;
    let mut change = Change::new(k);
    let mut narrowed = Vec::new();
    // 64-bit integer parameters (sizes): the launcher's value converts at the call.
    for p in k.params.iter().filter(|p| !p.pointer && syntax::is_64bit_int(&p.base)) {
        let decl = src.node(&p.range, "parameter_declaration");
        if let Some(ty_node) = decl.and_then(|d| d.child_by_field_name("type")) {
            change.edits.replace(ty_node.byte_range(), ty.to_string());
            change.guards.push(format!("({{{}}}) <= {LIMIT}LL", p.name));
            narrowed.push(p.name.clone());
        }
    }
    // Declarations whose every assignment computes (never loads) a value.
    let assigned = syntax::assigned(t, body);
    for d in descendants(body) {
        if d.kind() != "declaration" {
            continue;
        }
        let Some(tn) = d.child_by_field_name("type") else { continue };
        if !syntax::is_64bit_int(text(t, tn)) {
            continue;
        }
        let names = syntax::declared_names(t, d);
        let mut c = d.walk();
        let declarators: Vec<Node> = d.children_by_field_name("declarator", &mut c).collect();
        let loads = declarators.iter().any(|x| reads_memory(t, *x))
            || assigned.iter().any(|(n, a)| names.contains(n) && reads_memory(t, *a));
        let not_scalar = declarators.iter().any(|x| {
            let inner = if x.kind() == "init_declarator" { x.child_by_field_name("declarator") } else { Some(*x) };
            inner.is_none_or(|i| i.kind() != "identifier")
        });
        if loads || names.is_empty() || not_scalar {
            continue;
        }
        change.edits.replace(tn.byte_range(), ty.to_string());
        narrowed.extend(names);
    }
    // Casts to 64-bit types inside index arithmetic.
    let mut casts = 0;
    for d in descendants(def) {
        let (ty_node, operand) = match d.kind() {
            "cast_expression" => (d.child_by_field_name("type"), d.child_by_field_name("value")),
            _ => (None, None),
        };
        let (Some(tn), Some(v)) = (ty_node, operand) else { continue };
        if !syntax::is_64bit_int(text(t, tn)) || reads_memory(t, v) || d.start_byte() < k.body.start {
            continue;
        }
        change.edits.replace(tn.byte_range(), ty.to_string());
        casts += 1;
    }
    if narrowed.is_empty() && casts == 0 {
        return Err(NotApplicable::new(format!("`{}` does its index arithmetic in 32 bits already", k.name)));
    }
    change.guards.extend(guards::buffers_below(src, facts, k, LIMIT)?);
    change.guards.extend(guards::threads_below(src, k, LIMIT));
    let mut what = Vec::new();
    if !narrowed.is_empty() {
        what.push(format!("`{}`", narrowed.join("`, `")));
    }
    if casts > 0 {
        what.push(format!("{casts} cast{}", if casts == 1 { "" } else { "s" }));
    }
    Ok((change, format!("`{}`: {} in 32-bit `{ty}`", k.name, what.join(" and "))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{FactsBuilder, Role};

    const SRC: &str = r#"#include <cuda_bf16.h>
__global__ void k(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ out, int rows, int cols) {
  const size_t i = (size_t)blockIdx.x * 256 + threadIdx.x;
  const size_t total = (size_t)rows * cols;
  if (i >= total) return;
  const int c = (int)(i % (size_t)cols);
  out[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(bias[c]));
}
extern "C" void launch(const __nv_bfloat16* x, const __nv_bfloat16* bias, __nv_bfloat16* out, int rows, int cols, cudaStream_t s) {
  const size_t total = (size_t)rows * cols;
  k<<<(unsigned)((total + 255) / 256), 256, 0, s>>>(x, bias, out, rows, cols);
}
"#;

    fn facts(max: i64) -> Facts {
        FactsBuilder::new("launch")
            .buffer("x", "__nv_bfloat16", Role::Input, "(long long)({rows}) * ({cols})", max, max)
            .buffer("bias", "__nv_bfloat16", Role::Input, "(long long)({cols})", 4096, 4096)
            .buffer("out", "__nv_bfloat16", Role::Output, "(long long)({rows}) * ({cols})", max, max)
            .int("rows", 4096, 4096)
            .int("cols", 4096, 4096)
            .build()
    }

    #[test]
    fn size_t_indices_become_int_behind_a_length_check() {
        let r = apply(&Source::parse(SRC), &facts(1 << 24), &Params::default()).unwrap();
        let fast = &r.source[r.source.find("k_fast(").unwrap()..];
        assert!(fast.contains("const int i = (int)blockIdx.x * 256 + threadIdx.x;"), "{fast}");
        assert!(fast.contains("const int c = (int)(i % (int)cols);"), "{fast}");
        assert!(r.guards.iter().any(|g| g.contains("(long long)(rows) * (cols)) <= 1073741824LL")), "{:?}", r.guards);
        // The launcher's own 64-bit arithmetic is left alone.
        assert!(r.source.contains("const size_t total = (size_t)rows * cols;\n  if (/* nightshift"), "{}", r.source);
    }

    #[test]
    fn declines_when_the_task_is_too_large_or_already_32_bit() {
        let e = apply(&Source::parse(SRC), &facts(1 << 31), &Params::default()).unwrap_err();
        assert!(e.0.contains("past the"), "{e}");
        let narrow = SRC.replace("size_t", "int");
        let e = apply(&Source::parse(&narrow), &facts(1 << 24), &Params::default()).unwrap_err();
        assert!(e.0.contains("32 bits already"), "{e}");
    }
}
