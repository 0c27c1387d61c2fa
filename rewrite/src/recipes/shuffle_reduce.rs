//! Shuffle reductions: the shared-memory tree
//! `for (s = blockDim.x / 2; s > 0; s >>= 1) { if (tid < s) a[tid] += a[tid + s]; __syncthreads(); }`
//! (sums, fmaxf/max, fminf/min; `BLOCK / 2`, `s /= 2`) becomes five warp shuffles, one
//! shared exchange of the per-warp results and a last shuffle in warp 0: two or three
//! barriers instead of log2(block), no bank traffic for the last five levels. The result
//! lands in `a[0]` as before, so code after the loop is unchanged; the recipe declines
//! when that code reads any other element. The launcher checks that the block is a
//! power of two, a multiple of 32, and the size the loop assumes.

use crate::combine::{is_min_max, Combine};
use crate::facts::Facts;
use crate::pattern::{block_statements, condition};
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{
    self, binary, builtin, descendants, indent_at, named_children, reindent, strip, strip_parens, text,
};
use crate::version::Change;
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[];

struct Tree<'t> {
    stmt: Node<'t>,
    array: String,
    elem: String,
    tid: String,
    combine: Combine,
    /// The block size the loop assumes (`blockDim.x`, `BLOCK`, `256`).
    size: String,
}

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    super::per_kernel(src, params, |k| plan(src, facts, k))
}

/// The starting stride's block size: `E / 2` or `E >> 1` is E; a literal is twice it.
fn half_of(t: &str, e: Node) -> Option<String> {
    let e = strip_parens(e);
    if let Some((op, l, r)) = binary(t, e) {
        let r = text(t, strip(r)).trim();
        if (op == "/" && r == "2") || (op == ">>" && r == "1") {
            return Some(text(t, strip_parens(l)).to_string());
        }
        return None;
    }
    if e.kind() == "number_literal" {
        let v: i64 = crate::pattern::int_literal(text(t, e))?;
        return Some((2 * v).to_string());
    }
    None
}

fn halves(t: &str, upd: Node, s: &str) -> bool {
    let u = text(t, upd).replace(' ', "");
    u == format!("{s}>>=1") || u == format!("{s}/=2") || u == format!("{s}={s}>>1") || u == format!("{s}={s}/2")
}

/// The `tid` of the loop: `threadIdx.x` itself or a local initialized to it.
fn is_thread_index(t: &str, body: Node, n: Node) -> bool {
    let n = strip(n);
    if builtin(t, n) == Some(("threadIdx", 'x')) {
        return true;
    }
    if n.kind() != "identifier" {
        return false;
    }
    let name = text(t, n);
    descendants(body).into_iter().any(|d| {
        syntax::single_declarator(t, d).is_some_and(|(v, init)| {
            v == name && init.is_some_and(|i| builtin(t, strip(i)) == Some(("threadIdx", 'x')))
        })
    })
}

/// `a[tid] += a[tid + s]` or `a[tid] = f(a[tid], a[tid + s])`.
fn step<'t>(t: &str, body: Node<'t>, e: Node<'t>, s: &str) -> Option<(String, String, Combine)> {
    let e = strip_parens(e);
    if e.kind() != "assignment_expression" {
        return None;
    }
    let left = e.child_by_field_name("left")?;
    let op = text(t, e.child_by_field_name("operator")?);
    let right = strip_parens(e.child_by_field_name("right")?);
    let (arr, idx) = subscript(t, left)?;
    if !is_thread_index(t, body, idx) {
        return None;
    }
    let tid = text(t, strip(idx)).to_string();
    let is_partner = |n: Node| {
        subscript(t, n).is_some_and(|(a, i)| {
            a == arr && {
                let parts = syntax::flatten(t, strip(i), "+");
                parts.len() == 2
                    && parts.iter().any(|p| syntax::is_ident(t, *p, s))
                    && parts.iter().any(|p| text(t, strip(*p)) == tid)
            }
        })
    };
    let is_self = |n: Node| subscript(t, n).is_some_and(|(a, i)| a == arr && text(t, strip(i)) == tid);
    let combine = match op {
        "+=" if is_partner(right) => Combine::Sum,
        "=" => {
            if let Some((bop, l, r)) = binary(t, right) {
                if bop == "+" && ((is_self(l) && is_partner(r)) || (is_self(r) && is_partner(l))) {
                    Combine::Sum
                } else {
                    return None;
                }
            } else if right.kind() == "call_expression" {
                let f = text(t, right.child_by_field_name("function")?).to_string();
                let args = named_children(right.child_by_field_name("arguments")?);
                let minmax = is_min_max(&f);
                if minmax
                    && args.len() == 2
                    && ((is_self(args[0]) && is_partner(args[1])) || (is_self(args[1]) && is_partner(args[0])))
                {
                    Combine::Call(f)
                } else {
                    return None;
                }
            } else {
                return None;
            }
        }
        _ => return None,
    };
    Some((arr, tid, combine))
}

fn subscript<'t>(t: &str, n: Node<'t>) -> Option<(String, Node<'t>)> {
    let n = strip_parens(n);
    if n.kind() != "subscript_expression" {
        return None;
    }
    let a = n.child_by_field_name("argument")?;
    if a.kind() != "identifier" {
        return None;
    }
    Some((text(t, a).to_string(), crate::pattern::subscript_index(n)?))
}

/// The element type of the reduced array: a `__shared__` array declared in the
/// function, or a pointer parameter of a device helper (`float* red`).
fn shared_elem(t: &str, body: Node, name: &str) -> Option<String> {
    for d in descendants(body) {
        if d.kind() == "declaration"
            && text(t, d).contains("__shared__")
            && syntax::declared_names(t, d).iter().any(|n| n == name)
        {
            let ty = d.child_by_field_name("type")?;
            return Some(text(t, ty).to_string());
        }
    }
    let f = body.parent()?;
    let params = f.child_by_field_name("declarator")?.child_by_field_name("parameters")?;
    for p in named_children(params) {
        let Some(d) = p.child_by_field_name("declarator") else { continue };
        if d.kind() == "pointer_declarator" && d.child_by_field_name("declarator").is_some_and(|x| text(t, x) == name) {
            return p.child_by_field_name("type").map(|ty| text(t, ty).to_string());
        }
    }
    None
}

fn match_tree<'t>(t: &str, body: Node<'t>, f: Node<'t>) -> Option<Tree<'t>> {
    let init = f.child_by_field_name("initializer")?;
    let (s, start) = syntax::single_declarator(t, init)?;
    let size = half_of(t, start?)?;
    let cond = f.child_by_field_name("condition")?;
    let (op, l, r) = binary(t, cond)?;
    let positive = (op == ">" && syntax::is_ident(t, l, &s) && text(t, r).trim() == "0")
        || (op == ">=" && syntax::is_ident(t, l, &s) && text(t, r).trim() == "1")
        || (op == "<" && text(t, l).trim() == "0" && syntax::is_ident(t, r, &s));
    if !positive || !halves(t, f.child_by_field_name("update")?, &s) {
        return None;
    }
    let stmts: Vec<Node> =
        block_statements(f.child_by_field_name("body")?).into_iter().filter(|n| n.kind() != "comment").collect();
    if stmts.len() != 2 {
        return None;
    }
    let (iff, sync) = if stmts[0].kind() == "if_statement" { (stmts[0], stmts[1]) } else { (stmts[1], stmts[0]) };
    if iff.kind() != "if_statement"
        || iff.child_by_field_name("alternative").is_some()
        || text(t, sync).replace(' ', "") != "__syncthreads();"
    {
        return None;
    }
    let c = condition(iff)?;
    let (cop, cl, cr) = binary(t, c)?;
    if !(cop == "<" && syntax::is_ident(t, cr, &s) && is_thread_index(t, body, cl)) {
        return None;
    }
    let inner: Vec<Node> = block_statements(iff.child_by_field_name("consequence")?)
        .into_iter()
        .filter(|n| n.kind() != "comment")
        .collect();
    if inner.len() != 1 || inner[0].kind() != "expression_statement" {
        return None;
    }
    let e = named_children(inner[0]).into_iter().next()?;
    let (array, tid, combine) = step(t, body, e, &s)?;
    let elem = shared_elem(t, body, &array)?;
    Some(Tree { stmt: f, array, elem, tid, combine, size })
}

/// After the tree, only `a[0]` may be read until `a[tid]` is written again.
fn only_first_read_after(t: &str, tree: &Tree) -> bool {
    let mut n = tree.stmt.next_named_sibling();
    while let Some(s) = n {
        for d in descendants(s) {
            if d.kind() != "subscript_expression" {
                if d.kind() == "identifier"
                    && text(t, d) == tree.array
                    && d.parent().is_none_or(|p| p.kind() != "subscript_expression")
                {
                    return false;
                }
                continue;
            }
            let Some((a, i)) = subscript(t, d) else { continue };
            if a != tree.array {
                continue;
            }
            let idx = text(t, strip(i)).trim().to_string();
            if idx == "0" {
                continue;
            }
            // A fresh write at the thread's own slot starts a new use of the array.
            let is_write = d.parent().is_some_and(|p| {
                p.kind() == "assignment_expression" && p.child_by_field_name("left").is_some_and(|l| l.id() == d.id())
            });
            if is_write && idx == tree.tid {
                return true;
            }
            return false;
        }
        n = s.next_named_sibling();
    }
    true
}

fn replacement(tree: &Tree) -> String {
    let ty = tree.elem.replace("volatile", "").trim().to_string();
    let a = &tree.array;
    let tid = &tree.tid;
    let c = &tree.combine;
    format!(
        "{{\n  // nightshift: warp shuffles, then one shared exchange between warps (was a shared-memory tree).\n  {ty} ns_v = {a}[{tid}];\n#pragma unroll\n  for (int ns_o = 16; ns_o > 0; ns_o >>= 1) {}\n  __syncthreads();\n  if ((({tid}) & 31) == 0) {a}[({tid}) >> 5] = ns_v;\n  __syncthreads();\n  if (({tid}) < 32) {{\n    const int ns_warps = (int)(blockDim.x >> 5);\n    ns_v = {a}[(int)({tid}) < ns_warps ? ({tid}) : 0];\n#pragma unroll\n    for (int ns_o = 16; ns_o > 0; ns_o >>= 1) {{\n      {ty} ns_u = __shfl_down_sync(0xffffffffu, ns_v, ns_o);\n      if ((int)({tid}) + ns_o < ns_warps) {}\n    }}\n    if (({tid}) == 0) {a}[0] = ns_v;\n  }}\n  __syncthreads();\n}}",
        c.apply("ns_v", "__shfl_xor_sync(0xffffffffu, ns_v, ns_o)"),
        c.apply("ns_v", "ns_u")
    )
}

fn plan<'k>(src: &Source, _facts: &Facts, k: &'k Kernel) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    if k.has_error {
        return Err(NotApplicable::new(format!("`{}` contains syntax this parser does not know", k.name)));
    }
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| NotApplicable::new("no body"))?;
    let launches = src.launches_of(&k.name);
    if launches.len() > 1 {
        return Err(NotApplicable::new(format!("`{}` is launched from more than one place", k.name)));
    }
    let mut change = Change::new(k);
    let mut sizes: Vec<String> = Vec::new();
    let mut count = 0;
    // Trees in the kernel itself.
    for tree in trees_in(t, body) {
        check_reads(t, k, &tree)?;
        let ind = indent_at(t, tree.stmt.start_byte());
        change.edits.replace(tree.stmt.byte_range(), reindent(&replacement(&tree), &ind));
        sizes.push(tree.size.clone());
        count += 1;
    }
    // Trees in device functions the kernel calls: those get a copy of their own that
    // only the rewritten kernel calls.
    let mut helpers_done = Vec::new();
    for f in src.host_functions().into_iter().filter(|f| f.is_device) {
        let calls: Vec<Node> = descendants(body)
            .into_iter()
            .filter(|d| {
                d.kind() == "call_expression"
                    && d.child_by_field_name("function")
                        .is_some_and(|x| x.kind() == "identifier" && text(t, x) == f.name)
            })
            .collect();
        if calls.is_empty() || helpers_done.contains(&f.name) {
            continue;
        }
        let Some(fbody) = src.node(&f.body, "compound_statement") else { continue };
        let trees = trees_in(t, fbody);
        if trees.is_empty() {
            continue;
        }
        let mut e = crate::edit::Edits::new();
        for tree in &trees {
            check_reads(t, k, tree)?;
            let ind = indent_at(t, tree.stmt.start_byte());
            e.replace(tree.stmt.byte_range(), reindent(&replacement(tree), &ind));
            sizes.push(tree.size.clone());
            count += 1;
        }
        let copy_name = format!("{}_shfl", f.name);
        if src.defines(&copy_name) {
            continue;
        }
        // The copy's name: the first occurrence of the function's name in its header.
        let header = &t[f.range.start..f.body.start];
        if let Some(at) = header.find(&format!("{}(", f.name)).or_else(|| header.find(&f.name)) {
            e.replace(f.range.start + at..f.range.start + at + f.name.len(), copy_name.clone());
        }
        let copy =
            e.within(&f.range).apply(&t[f.range.clone()]).map_err(|_| NotApplicable::new("overlapping rewrites"))?;
        change.before.push_str(&format!("{copy}\n\n"));
        for c in calls {
            if let Some(x) = c.child_by_field_name("function") {
                change.edits.replace(x.byte_range(), copy_name.clone());
            }
        }
        helpers_done.push(f.name.clone());
    }
    if count == 0 {
        return Err(NotApplicable::new(format!(
            "`{}` has no shared-memory tree reduction (`for (s = blockDim.x / 2; s > 0; s >>= 1) {{ if (tid < s) a[tid] += a[tid + s]; __syncthreads(); }}`), in itself or in a device function it calls",
            k.name
        )));
    }
    for l in &launches {
        let Some(b) = l.config.get(1) else {
            return Err(NotApplicable::new(format!("a launch of `{}` names no block size", k.name)));
        };
        match crate::launch::block(src, l) {
            Some(crate::launch::Dims::Scalar(_)) => {}
            Some(crate::launch::Dims::Unknown { expr, why }) => {
                return Err(NotApplicable::new(format!(
                    "the block of a launch of `{}` is `{expr}`, {why}, so its size cannot be checked as a number",
                    k.name
                )))
            }
            _ => {
                return Err(NotApplicable::new(format!("`{}` is launched with a dim3 block (`{}`)", k.name, b.trim())))
            }
        }
        let mut g = vec![format!("({b}) % 32 == 0"), format!("(({b}) & (({b}) - 1)) == 0")];
        for size in &sizes {
            if size != "blockDim.x" && size.trim() != b.trim() {
                g.push(format!("({b}) == ({size})"));
            }
        }
        for x in g {
            if !change.guards.contains(&x) {
                change.guards.push(x);
            }
        }
    }
    Ok((change, format!("`{}`: {count} shared-memory tree reduction(s) as warp shuffles", k.name)))
}

fn trees_in<'t>(t: &str, body: Node<'t>) -> Vec<Tree<'t>> {
    descendants(body)
        .into_iter()
        .filter(|n| n.kind() == "for_statement")
        .filter_map(|f| match_tree(t, body, f))
        .collect()
}

fn check_reads(t: &str, k: &Kernel, tree: &Tree) -> Result<(), NotApplicable> {
    if only_first_read_after(t, tree) {
        Ok(())
    } else {
        Err(NotApplicable::new(format!(
            "`{}` reads elements of `{}` other than [0] after its tree reduction",
            k.name, tree.array
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    const REDUCE: &str = r#"
#define BLOCK 256
__global__ void reduce_blocks(const float* __restrict__ x, float* __restrict__ out, int n) {
  __shared__ float partial[BLOCK];
  float s = 0.f;
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) s += x[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}
extern "C" void reduce_sum(const float* x, float* out, int n, cudaStream_t stream) {
  reduce_blocks<<<1024, BLOCK, 0, stream>>>(x, out, n);
}
"#;

    #[test]
    fn a_block_tree_becomes_shuffles() {
        let r = apply(&Source::parse(REDUCE), &FactsBuilder::new("reduce_sum").build(), &Params::default()).unwrap();
        let s = &r.source;
        assert!(s.contains("ns_v += __shfl_xor_sync(0xffffffffu, ns_v, ns_o);"), "{s}");
        assert!(s.contains("partial[(threadIdx.x) >> 5] = ns_v;"), "{s}");
        assert!(
            r.guards.contains(&"(BLOCK) == (BLOCK)".to_string()) || r.guards.iter().any(|g| g.contains("% 32 == 0")),
            "{:?}",
            r.guards
        );
        // The original stays as the fallback.
        assert!(s.contains("partial[threadIdx.x] += partial[threadIdx.x + stride];"));
    }

    #[test]
    fn max_trees_and_a_tid_local() {
        let src = r#"
__global__ void rowmax(const float* x, float* y, int cols) {
  extern __shared__ float red[];
  const unsigned tid = threadIdx.x;
  float m = -1e30f;
  for (int c = tid; c < cols; c += blockDim.x) m = fmaxf(m, x[blockIdx.x * cols + c]);
  red[tid] = m;
  __syncthreads();
  for (unsigned s = blockDim.x >> 1; s > 0; s /= 2) {
    __syncthreads();
    if (tid < s) { red[tid] = fmaxf(red[tid], red[tid + s]); }
  }
  if (tid == 0) y[blockIdx.x] = red[0];
}
extern "C" void launch(const float* x, float* y, int rows, int cols, cudaStream_t st) {
  rowmax<<<rows, 128, 128 * sizeof(float), st>>>(x, y, cols);
}
"#;
        let r = apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &Params::default()).unwrap();
        assert!(r.source.contains("ns_v = fmaxf(ns_v, __shfl_xor_sync(0xffffffffu, ns_v, ns_o));"), "{}", r.source);
        assert!(r.source.contains("ns_v = fmaxf(ns_v, ns_u);"));
        assert_eq!(r.guards, ["(128) % 32 == 0", "((128) & ((128) - 1)) == 0"]);
    }

    #[test]
    fn declines_without_a_tree_or_with_other_reads() {
        let e = apply(
            &Source::parse("__global__ void k(float* y) { y[threadIdx.x] = 0; }\nextern \"C\" void launch(float* y, cudaStream_t s) { k<<<1, 32, 0, s>>>(y); }"),
            &FactsBuilder::new("launch").build(),
            &Params::default(),
        )
        .unwrap_err();
        assert!(e.0.contains("no shared-memory tree"), "{e}");
        let other = REDUCE.replace("atomicAdd(out, partial[0]);", "atomicAdd(out, partial[0] + partial[1]);");
        let e =
            apply(&Source::parse(&other), &FactsBuilder::new("reduce_sum").build(), &Params::default()).unwrap_err();
        assert!(e.0.contains("other than [0]"), "{e}");
    }
}
