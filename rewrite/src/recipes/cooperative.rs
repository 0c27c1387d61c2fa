//! Cooperative inner loops: a thread-per-output kernel whose loops run over contiguous
//! memory (`for (j = 0; j < cols; ++j) acc += A[row * cols + j] * x[j]`) becomes L lanes
//! (a warp, or 4, 8, 16) per output. Each loop is strided across the lanes, so a warp's
//! loads are consecutive instead of `cols` elements apart; accumulations (sums, max,
//! min) are combined with `__shfl_xor_sync`, which leaves the result in every lane, so
//! code after the loop runs unchanged; loops that write per element are strided too, and
//! statements that write memory outside loops run on lane 0 alone. The launch gets L
//! times the blocks; the launcher checks that the block size is a multiple of L and the
//! larger grid fits.

use crate::combine::{is_min_max, Combine};
use crate::facts::Facts;
use crate::pattern::{self, block_statements, condition};
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{self, descendants, indent_at, named_children, strip_parens, text};
use crate::version::Change;
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "lanes",
    values: &["32", "16", "8", "4"],
    doc: "threads per output (32: a warp; fewer for short rows)",
}];

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let lanes: u32 =
        params.get(PARAMS, "lanes").parse().map_err(|_| NotApplicable::new("lanes must be 4, 8, 16 or 32"))?;
    super::per_kernel(src, params, |k| plan(src, facts, k, lanes))
}

/// Whether a statement or expression writes memory (an assignment through a subscript, a
/// pointer or `->`, or an atomic).
pub fn writes_memory(t: &str, n: Node) -> bool {
    descendants(n).into_iter().any(|d| {
        let target = match d.kind() {
            "assignment_expression" => d.child_by_field_name("left"),
            "update_expression" => d.child_by_field_name("argument"),
            "call_expression" => {
                let f = d.child_by_field_name("function").map(|f| text(t, f)).unwrap_or("");
                if f.contains("atomic") || f.starts_with("__st") || f.contains("memcpy") || f.contains("memset") {
                    return true;
                }
                None
            }
            _ => None,
        };
        target.is_some_and(|x| {
            let x = strip_parens(x);
            matches!(x.kind(), "subscript_expression" | "pointer_expression" | "field_expression")
        })
    })
}

fn decline(k: &Kernel, why: impl AsRef<str>) -> NotApplicable {
    NotApplicable::new(format!("`{}` {}", k.name, why.as_ref()))
}

/// `for (T j = START; j < END; ++j)`: the loop variable, START and the update.
fn unit_loop<'t>(t: &str, f: Node<'t>) -> Option<(String, Node<'t>, Node<'t>)> {
    let init = f.child_by_field_name("initializer")?;
    let (j, start) = syntax::single_declarator(t, init)?;
    let start = start?;
    let cond = f.child_by_field_name("condition")?;
    let (op, l, _) = syntax::binary(t, cond)?;
    // `!=` would let a lane step past the end without ever meeting it.
    if !matches!(op, "<" | "<=") || !syntax::is_ident(t, l, &j) {
        return None;
    }
    let upd = f.child_by_field_name("update")?;
    let unit = match upd.kind() {
        "update_expression" => {
            text(t, upd).contains("++")
                && upd.child_by_field_name("argument").is_some_and(|a| syntax::is_ident(t, a, &j))
        }
        "assignment_expression" => {
            upd.child_by_field_name("operator").is_some_and(|o| text(t, o) == "+=")
                && upd.child_by_field_name("left").is_some_and(|a| syntax::is_ident(t, a, &j))
                && upd.child_by_field_name("right").is_some_and(|r| text(t, r).trim() == "1")
        }
        _ => false,
    };
    unit.then_some((j, start, upd))
}

/// The combine form of one assignment to `acc`, if it is one.
fn combine_of(t: &str, a: Node, acc: &str) -> Option<Combine> {
    if a.kind() == "update_expression" {
        return text(t, a).contains("++").then_some(Combine::Sum);
    }
    let op = text(t, a.child_by_field_name("operator")?);
    let right = strip_parens(a.child_by_field_name("right")?);
    match op {
        "+=" | "-=" => Some(Combine::Sum),
        "*=" => Some(Combine::Product),
        "=" => {
            if let Some((bop, l, r)) = syntax::binary(t, right) {
                let (l_is, r_is) = (syntax::is_ident(t, l, acc), syntax::is_ident(t, r, acc));
                return match bop {
                    "+" if l_is != r_is => Some(Combine::Sum),
                    "-" if l_is => Some(Combine::Sum),
                    "*" if l_is != r_is => Some(Combine::Product),
                    _ => None,
                };
            }
            if right.kind() == "call_expression" {
                let f = text(t, right.child_by_field_name("function")?);
                let args: Vec<Node> = named_children(right.child_by_field_name("arguments")?);
                let is_minmax = is_min_max(f);
                if is_minmax && args.len() == 2 && args.iter().filter(|x| syntax::is_ident(t, **x, acc)).count() == 1 {
                    return Some(Combine::Call(f.to_string()));
                }
            }
            None
        }
        _ => None,
    }
}

/// Locals of the kernel that are not pointers (arrays, structs, scalars): everything
/// declared in its body, less pointer declarations.
fn local_non_pointers(t: &str, near: Node) -> Vec<String> {
    let mut root = near;
    while let Some(p) = root.parent() {
        root = p;
        if p.kind() == "function_definition" {
            break;
        }
    }
    let pointers: Vec<String> = descendants(root)
        .into_iter()
        .filter(|d| d.kind() == "pointer_declarator")
        .filter_map(|d| {
            d.child_by_field_name("declarator").filter(|x| x.kind() == "identifier").map(|x| text(t, x).to_string())
        })
        .collect();
    syntax::declared_names(t, root).into_iter().filter(|n| !pointers.contains(n)).collect()
}

enum LoopKind {
    /// Accumulators with their combine.
    Reduce(Vec<(String, Combine)>),
    /// Writes per element, carries nothing.
    Map,
}

fn classify_loop(t: &str, k: &Kernel, f: Node, j: &str) -> Result<LoopKind, NotApplicable> {
    let body = f.child_by_field_name("body").ok_or_else(|| decline(k, "has a loop without a body"))?;
    if descendants(body)
        .iter()
        .any(|d| d.kind() == "break_statement" || d.kind() == "return_statement" || d.kind() == "goto_statement")
    {
        return Err(decline(k, "leaves an inner loop early (break or return)"));
    }
    let inside = syntax::declared_names(t, body);
    let mut accs: Vec<(String, Combine)> = Vec::new();
    for (name, a) in syntax::assigned(t, body) {
        if name == j || inside.contains(&name) {
            continue;
        }
        let c = combine_of(t, a, &name).ok_or_else(|| {
            decline(k, format!("updates `{name}` in its loop in a form that is not a sum, product, max or min"))
        })?;
        match accs.iter().find(|(n, _)| *n == name) {
            Some((_, prev)) if *prev != c => {
                return Err(decline(k, format!("combines `{name}` in two different ways")))
            }
            Some(_) => {}
            None => accs.push((name, c)),
        }
    }
    // An accumulator may be read only by its own updates (a partial value differs per lane).
    let updates: Vec<(String, Node)> = syntax::assigned(t, body);
    for (acc, _) in &accs {
        for d in descendants(body) {
            if d.kind() == "identifier" && text(t, d) == acc {
                let own = updates
                    .iter()
                    .any(|(n, a)| n == acc && a.start_byte() <= d.start_byte() && d.end_byte() <= a.end_byte());
                if !own {
                    return Err(decline(k, format!("reads the partial value of `{acc}` inside its loop")));
                }
            }
        }
    }
    // Stores through anything but a pointer (a local array, a struct field) keep per-lane
    // partial state that nothing would combine.
    let locals = local_non_pointers(t, f);
    for d in descendants(body) {
        let target = match d.kind() {
            "assignment_expression" => d.child_by_field_name("left"),
            "update_expression" => d.child_by_field_name("argument"),
            _ => None,
        };
        let Some(target) = target.map(strip_parens) else { continue };
        if matches!(target.kind(), "subscript_expression" | "field_expression") {
            let base = descendants(target).into_iter().find(|x| x.kind() == "identifier").map(|x| text(t, x));
            if base.is_some_and(|b| locals.iter().any(|l| l == b)) {
                return Err(decline(k, format!("stores into the local `{}` inside its loop", base.unwrap_or(""))));
            }
        }
    }
    let writes = writes_memory(t, body);
    match (accs.is_empty(), writes) {
        (false, false) => Ok(LoopKind::Reduce(accs)),
        (true, _) => Ok(LoopKind::Map),
        (false, true) => Err(decline(k, "both accumulates and writes memory in one loop")),
    }
}

fn plan<'k>(src: &Source, facts: &Facts, k: &'k Kernel, lanes: u32) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    if k.has_error {
        return Err(decline(k, "contains syntax this parser does not know"));
    }
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| decline(k, "has no body"))?;
    if t[k.body.clone()].contains("__shared__") || syntax::has_barrier(t, body) || syntax::has_warp_primitive(t, body) {
        return Err(decline(k, "already shares work between threads (shared memory, barriers or warp primitives)"));
    }
    let launches = src.launches_of(&k.name);
    if launches.is_empty() || launches.iter().any(|l| l.config.len() < 2) || pattern::uses_2d_grid(t, body) {
        return Err(decline(
            k,
            "reads the y or z grid coordinates or has no launch with a block size; only 1-D grids are widened",
        ));
    }
    let stmts = syntax::statements(body);
    let (at, flat, rest) = per_output_statements(t, k, &stmts)?;
    let mut change = Change::new(k);
    let flat_text = text(t, flat);
    change.edits.replace(flat.byte_range(), format!("({flat_text}) / {lanes}"));
    let decl = stmts[at];
    let ind = indent_at(t, decl.start_byte());
    let mask = if lanes == 32 {
        "0xffffffffu".to_string()
    } else {
        format!("(((1u << {lanes}) - 1u) << (threadIdx.x & 31u & ~{}u))", lanes - 1)
    };
    change.edits.insert(
        decl.end_byte(),
        format!(
            "\n{ind}// nightshift: {lanes} lanes per output; loops strided across them, results combined with shuffles.\n{ind}const int ns_lane = (int)(threadIdx.x % {lanes}u);\n{ind}const unsigned ns_mask = {mask};"
        ),
    );
    let (loops, reduced) = share_loops(src, facts, k, &rest, lanes, &mut change)?;
    if loops == 0 {
        return Err(decline(k, "has no inner loop to share between lanes"));
    }
    change.guards.push(format!("{{@block}} % {lanes} == 0"));
    change.guards.push(format!("(long long){{@grid}} * {lanes} <= 2147483647LL"));
    change.grid = Some(Box::new(move |g: &str| format!("({g}) * {lanes}")));
    let what =
        if reduced.is_empty() { String::new() } else { format!(", `{}` combined with shuffles", reduced.join("`, `")) };
    Ok((change, format!("`{}`: {lanes} lanes per output, {loops} loop(s) strided across them{what}", k.name)))
}

/// The statement that computes the output index (its place and its expression), and the
/// statements that run for one output once the bounds check passed.
fn per_output_statements<'t>(
    t: &str,
    k: &Kernel,
    stmts: &[Node<'t>],
) -> Result<(usize, Node<'t>, Vec<Node<'t>>), NotApplicable> {
    let (at, out_index, flat) = stmts
        .iter()
        .enumerate()
        .find_map(|(i, s)| {
            let (name, init) = syntax::single_declarator(t, *s)?;
            let init = init?;
            pattern::is_flat_index(t, init).then_some((i, name, init))
        })
        .ok_or_else(|| decline(k, "does not compute its output index from `blockIdx.x * blockDim.x + threadIdx.x`"))?;
    // The bounds check, then the per-output statements.
    let mut rest: Vec<Node> = Vec::new();
    let mut found = false;
    for (j, s) in stmts.iter().enumerate().skip(at + 1) {
        if s.kind() != "if_statement" {
            if writes_memory(t, *s) || !syntax::escapes(*s).is_empty() {
                return Err(decline(k, "works before its bounds check"));
            }
            continue;
        }
        let cond = condition(*s).ok_or_else(|| decline(k, "has an if without a condition"))?;
        let cons = s.child_by_field_name("consequence").ok_or_else(|| decline(k, "has an empty if"))?;
        let cs = block_statements(cons);
        let ret = cs.len() == 1 && cs[0].kind() == "return_statement";
        let (op, l, r) = syntax::binary(t, cond).ok_or_else(|| decline(k, "checks its index in an unusual form"))?;
        let mentions = syntax::is_ident(t, l, &out_index) || syntax::is_ident(t, r, &out_index);
        if !mentions {
            return Err(decline(k, "branches before checking its output index"));
        }
        if ret && matches!(op, ">=" | "<=" | ">" | "<") && s.child_by_field_name("alternative").is_none() {
            rest = stmts[j + 1..].to_vec();
        } else if !ret && s.child_by_field_name("alternative").is_none() {
            if stmts[j + 1..].iter().any(|n| n.kind() != "comment") {
                return Err(decline(k, "does more work after its bounds check"));
            }
            rest = cs;
        } else {
            return Err(decline(k, "checks its output index in an unusual form"));
        }
        found = true;
        break;
    }
    if !found {
        return Err(decline(k, format!("never checks `{out_index}` against a bound")));
    }
    Ok((at, flat, rest))
}

/// Each unit-stride loop strided across the lanes (reductions combined with shuffles
/// after it); memory writes by lane 0. Returns the loops shared and the accumulators
/// combined.
fn share_loops(
    src: &Source,
    facts: &Facts,
    k: &Kernel,
    rest: &[Node],
    lanes: u32,
    change: &mut Change,
) -> Result<(usize, Vec<String>), NotApplicable> {
    let t = src.text();
    let mut reduced = Vec::new();
    let mut loops = 0;
    for s in rest {
        if s.kind() == "for_statement" {
            if let Some((j, start, upd)) = unit_loop(t, *s) {
                let kind = classify_loop(t, k, *s, &j)?;
                if let Some(trips) = super::largest_trip_count(src, facts, k, *s) {
                    if trips < 2 * lanes as i64 {
                        return Err(decline(
                            k,
                            format!("runs its loop at most {trips} times at the task's sizes: {lanes} lanes would mostly idle"),
                        ));
                    }
                }
                change.edits.replace(start.byte_range(), format!("({}) + ns_lane", text(t, start)));
                change.edits.replace(upd.byte_range(), format!("{j} += {lanes}"));
                loops += 1;
                if let LoopKind::Reduce(accs) = kind {
                    let ind = indent_at(t, s.start_byte());
                    // The value an accumulator holds before the loop counts once: lane 0
                    // keeps it, the other lanes start from the combine's identity (max and
                    // min need none: taking a value twice changes nothing).
                    let mut before = String::new();
                    for (acc, c) in &accs {
                        if let Some(id) = c.identity() {
                            before.push_str(&format!("if (ns_lane != 0) {acc} = {id};\n{ind}"));
                        }
                    }
                    if !before.is_empty() {
                        change.edits.insert(s.start_byte(), before);
                    }
                    let mut after = String::new();
                    for (acc, c) in accs {
                        after.push_str(&format!(
                            "\n{ind}#pragma unroll\n{ind}for (int ns_o = {half}; ns_o > 0; ns_o >>= 1) {}",
                            c.apply(&acc, &format!("__shfl_xor_sync(ns_mask, {acc}, ns_o, {lanes})")),
                            half = lanes / 2
                        ));
                        reduced.push(acc);
                    }
                    change.edits.insert(s.end_byte(), after);
                }
                continue;
            }
        }
        if s.kind() == "declaration" {
            if writes_memory(t, *s) {
                return Err(decline(k, "writes memory in a declaration"));
            }
            continue;
        }
        if !syntax::escapes(*s).is_empty() {
            return Err(decline(k, "leaves early (return or break) after its bounds check"));
        }
        if writes_memory(t, *s) {
            change.edits.replace(s.byte_range(), format!("if (ns_lane == 0) {{ {} }}", text(t, *s)));
        }
    }
    Ok((loops, reduced))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    const GEMV: &str = r#"
__global__ void gemv(const float* A, const float* x, float* y, int rows, int cols) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  float acc = 0.f;
  for (int j = 0; j < cols; ++j) acc += A[(size_t)row * cols + j] * x[j];
  y[row] = acc;
}
extern "C" void launch(const float* A, const float* x, float* y, int rows, int cols, cudaStream_t s) {
  gemv<<<(rows + 255) / 256, 256, 0, s>>>(A, x, y, rows, cols);
}
"#;

    #[test]
    fn a_thread_per_row_gemv_becomes_a_warp_per_row() {
        let r = apply(&Source::parse(GEMV), &FactsBuilder::new("launch").build(), &Params::default()).unwrap();
        let s = &r.source;
        assert!(s.contains("int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;"), "{s}");
        assert!(s.contains("for (int j = (0) + ns_lane; j < cols; j += 32) acc +="), "{s}");
        assert!(s.contains("acc += __shfl_xor_sync(ns_mask, acc, ns_o, 32);"), "{s}");
        assert!(s.contains("if (ns_lane == 0) { y[row] = acc; }"), "{s}");
        assert!(s.contains("gemv_fast<<<((rows + 255) / 256) * 32, 256, 0, s>>>"), "{s}");
        assert!(r.guards.contains(&"block % 32 == 0".to_string()), "{:?}", r.guards);
        assert!(r.source.contains("if (/* nightshift: fast path */ ((256) % 32 == 0)"), "{}", r.source);
        // The starting value counts once: the other lanes start from zero.
        assert!(r.source.contains("if (ns_lane != 0) acc = 0;"), "{}", r.source);
    }

    #[test]
    fn max_then_sum_then_map() {
        let src = r#"
__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    const float* row = x + (size_t)r * cols;
    float m = -1e30f;
    for (int c = 0; c < cols; c++) m = fmaxf(m, row[c]);
    float s = 0.f;
    for (int c = 0; c < cols; c++) s += expf(row[c] - m);
    for (int c = 0; c < cols; c++) y[(size_t)r * cols + c] = expf(row[c] - m) / s;
  }
}
extern "C" void launch(const float* x, float* y, int rows, int cols, cudaStream_t st) {
  softmax_rows<<<(rows + 127) / 128, 128, 0, st>>>(x, y, rows, cols);
}
"#;
        let r = apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &Params::default().with("lanes", "8"))
            .unwrap();
        let s = &r.source;
        assert!(s.contains("m = fmaxf(m, __shfl_xor_sync(ns_mask, m, ns_o, 8));"), "{s}");
        assert!(s.contains("s += __shfl_xor_sync(ns_mask, s, ns_o, 8);"), "{s}");
        assert_eq!(s.matches("c += 8").count(), 3, "{s}");
    }

    #[test]
    fn declines_what_lanes_cannot_share() {
        let f = FactsBuilder::new("launch").build();
        let decline = |src: String| apply(&Source::parse(&src), &f, &Params::default()).unwrap_err().0;
        let field = GEMV
            .replace("float acc = 0.f;", "float2 acc = make_float2(0.f, 0.f);")
            .replace("acc += A", "acc.x += A")
            .replace("y[row] = acc;", "y[row] = acc.x;");
        assert!(decline(field).contains("stores into the local `acc`"));
        let ne = GEMV.replace("j < cols", "j != cols");
        assert!(decline(ne).contains("no inner loop"));
        let early = GEMV.replace("y[row] = acc;", "if (acc < 0.f) { y[row] = 0.f; return; }\n  y[row] = acc;");
        assert!(decline(early).contains("leaves early"));
    }

    #[test]
    fn declines_elementwise_and_online_updates() {
        let ew = "__global__ void k(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 0; }\nextern \"C\" void launch(float* y, int n, cudaStream_t s) { k<<<(n + 255) / 256, 256, 0, s>>>(y, n); }";
        let e = apply(&Source::parse(ew), &FactsBuilder::new("launch").build(), &Params::default()).unwrap_err();
        assert!(e.0.contains("no inner loop"), "{e}");
        let online = GEMV.replace("acc += A[(size_t)row * cols + j] * x[j];", "acc = acc * 0.5f + A[j];");
        let e = apply(&Source::parse(&online), &FactsBuilder::new("launch").build(), &Params::default()).unwrap_err();
        assert!(e.0.contains("not a sum"), "{e}");
    }
}
