//! Tensor tiles: the multiply-accumulate loop of a shared-memory tiled fp32 GEMM,
//! `acc[i][j] += As[ra][kk] * Bs[rb][kk]` over a k tile staged by the block, runs on the
//! tensor cores (`mma.sync` m16n8k8 on TF32 operands; by default 3xTF32, each operand split
//! into a TF32 high part and its TF32 remainder, three MMAs per product: fp32-level accuracy).
//!
//! The block's warps tile the whole M x N product of the two staged arrays (M and N their
//! extents along the dimension the k counter does not index), so the rewrite needs nothing
//! of how the original maps threads to outputs: each k tile is accumulated in fresh
//! fragments and added to a running sum with FADD (the tensor core's own accumulation does
//! not round to nearest, and over a long K its error drifts one way). After the k loop the
//! sums pass through shared memory, 16 rows at a time, into the accumulators the original
//! declared, each element taking the product-tile position its operands' indices name, so
//! the code after the loop is unchanged. M and N are rounded up to the MMA's 16 and 8 (rows
//! past an extent read its last: their products are never taken). Where the block or the k
//! tile does not fit (a thread count not a multiple of 32, a k tile not of 8), a warp would
//! hold over 16 MMA tiles, or the target is older than sm_80, `if constexpr` keeps the
//! original loop: knobs that move the tile stay correct at every value. With `pad=banks`
//! the tiles' rows get the shortest length at least their own that spreads a fragment's
//! loads over all 32 banks, unless code sees the row length (a pointer into a tile, a row,
//! its size); the original loop, where it runs, reads the padded rows too.

use super::row_strip::{const_loop, const_value};
use super::Planned;
use crate::facts::Facts;
use crate::launch;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{self, binary, descendants, indent_at, named_children, reindent, strip_parens, text};
use crate::version::{Change, Helper};
use heuristics::precision::MathPath;
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "precision",
        values: &["3xtf32", "tf32"],
        doc: "3xtf32: fp32-level accuracy at a third of the TF32 rate; tf32: 10-bit mantissas, where every output's tolerance admits it",
    },
    ParamSpec {
        name: "pad",
        values: &["banks", "keep"],
        doc: "banks: the tiles' rows padded so a fragment's 32 loads fall on 32 banks; keep: the rows as declared",
    },
];

/// The MMA instructions and the operand split; a host test supplies its own under the
/// same mark.
pub static TENSOR_ISA: Helper = Helper {
    mark: "NIGHTSHIFT_TENSOR_ISA",
    text: r#"
// nightshift: TF32 tensor-core primitives (sm_80 and later; earlier targets never call
// them, see NS_TT_ARCH_OK).
#include <cstdint>
// Round to the nearest TF32 value, ties away from zero (cvt.rna's rounding), in integer
// arithmetic with the 13 low bits cleared: sm_90 has no native cvt.rna.tf32.f32 and emulates
// it with a test for infinity per value, which made the split the ALU pipe's main load.
// Infinities stay infinite; a NaN stays NaN where its payload reaches the kept bits.
__device__ __forceinline__ uint32_t ns_tt_round(float x) {
  return (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
}
template <bool Lo>
__device__ __forceinline__ void ns_tt_split(float x, uint32_t& hi, uint32_t& lo) {
  hi = ns_tt_round(x);
  lo = Lo ? ns_tt_round(x - __uint_as_float(hi)) : 0u;
}
__device__ __forceinline__ void ns_tt_mma(float* c, const uint32_t* a, const uint32_t* b) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}"#,
};

/// The warp tiling and the per-k-tile and staging steps, plain C++ over the primitives.
pub static TENSOR_TILE: Helper = Helper {
    mark: "NIGHTSHIFT_TENSOR_TILE",
    text: r#"
// nightshift: a block's M x N product tile on m16n8k8 MMAs. The warps form a wm x wn grid,
// each holding rm x rn MMA tiles: the grid that keeps the most warps busy, then the one
// with the fewest fragment loads per MMA. `fits` is false where the shape does not divide
// (the caller keeps its own loop then) or a warp's tiles would take over 64 registers.
// Before sm_80 there is no TF32 MMA: the caller's own loop runs.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define NS_TT_ARCH_OK false
#else
#define NS_TT_ARCH_OK true
#endif
template <int M, int N, int Threads>
struct ns_tt_shape {
  static constexpr int warps = Threads / 32, tm = M / 16, tn = N / 8;
  static constexpr int pick() {
    int best = 0, busy = 0, cost = 0;
    for (int a = 1; a <= tm; ++a) {
      if (tm % a != 0) continue;
      for (int b = 1; b <= tn; ++b) {
        if (tn % b != 0 || a * b > warps) continue;
        const int r = tm / a, s = tn / b, c = (4 * r + 2 * s) * 1024 / (r * s);
        if (a * b > busy || (a * b == busy && c < cost)) best = a * 4096 + b, busy = a * b, cost = c;
      }
    }
    return best;
  }
  static constexpr bool divides = Threads > 0 && Threads % 32 == 0 && M > 0 && M % 16 == 0 && N > 0 && N % 8 == 0;
  static constexpr int wm = divides ? pick() / 4096 : 1, wn = divides ? pick() % 4096 : 1;
  static constexpr int rm = divides ? tm / wm : 1, rn = divides ? tn / wn : 1;
  static constexpr bool fits = NS_TT_ARCH_OK && divides && rm * rn <= 16;
  static constexpr int m = M, n = N;
};

// Row r of an operand with E rows, in a product tile rounded up to R (E <= R): the rows
// past E repeat its last (their products fall outside the tile the original reads).
template <int E, int R>
__device__ __forceinline__ int ns_tt_clamp(int r) {
  if constexpr (E == R) {
    return r;
  } else {
    return r < E ? r : E - 1;
  }
}

__device__ __forceinline__ int ns_tt_thread() {
  return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}

// sum += A(m, k) B(n, k) over one k tile of KT (a multiple of 8): a(m, k) and b(n, k) read
// the staged operands. Fresh fragments per k tile, added with FADD.
template <class S, int KT, bool Lo, class FA, class FB>
__device__ __forceinline__ void ns_tt_step(float (&sum)[S::rm][S::rn][4], FA a, FB b) {
  const int warp = ns_tt_thread() / 32, lane = ns_tt_thread() % 32, g = lane >> 2, t = lane & 3;
  if (warp >= S::wm * S::wn) return;
  const int m0 = (warp / S::wn) * S::rm * 16, n0 = (warp % S::wn) * S::rn * 8;
  float part[S::rm][S::rn][4] = {};
#pragma unroll
  for (int k = 0; k < KT; k += 8) {
    uint32_t ahi[S::rm][4], alo[S::rm][4], bhi[S::rn][2], blo[S::rn][2];
#pragma unroll
    for (int i = 0; i < S::rm; ++i) {
      const int r = m0 + i * 16 + g;
      ns_tt_split<Lo>(a(r, k + t), ahi[i][0], alo[i][0]);
      ns_tt_split<Lo>(a(r + 8, k + t), ahi[i][1], alo[i][1]);
      ns_tt_split<Lo>(a(r, k + t + 4), ahi[i][2], alo[i][2]);
      ns_tt_split<Lo>(a(r + 8, k + t + 4), ahi[i][3], alo[i][3]);
    }
#pragma unroll
    for (int j = 0; j < S::rn; ++j) {
      const int c = n0 + j * 8 + g;
      ns_tt_split<Lo>(b(c, k + t), bhi[j][0], blo[j][0]);
      ns_tt_split<Lo>(b(c, k + t + 4), bhi[j][1], blo[j][1]);
    }
#pragma unroll
    for (int i = 0; i < S::rm; ++i) {
#pragma unroll
      for (int j = 0; j < S::rn; ++j) {
        if constexpr (Lo) {
          ns_tt_mma(part[i][j], alo[i], bhi[j]);
          ns_tt_mma(part[i][j], ahi[i], blo[j]);
        }
        ns_tt_mma(part[i][j], ahi[i], bhi[j]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < S::rm; ++i) {
#pragma unroll
    for (int j = 0; j < S::rn; ++j) {
#pragma unroll
      for (int c = 0; c < 4; ++c) sum[i][j][c] += part[i][j][c];
    }
  }
}

// Rows band * 16 .. band * 16 + 15 of the product tile into stage[row % 16][n] (16 x N).
template <class S, int N>
__device__ __forceinline__ void ns_tt_put_band(const float (&sum)[S::rm][S::rn][4], float* stage, int band) {
  const int warp = ns_tt_thread() / 32, lane = ns_tt_thread() % 32, g = lane >> 2, t = lane & 3;
  if (warp >= S::wm * S::wn) return;
  const int m0 = (warp / S::wn) * S::rm * 16, n0 = (warp % S::wn) * S::rn * 8;
#pragma unroll
  for (int i = 0; i < S::rm; ++i) {
    if (m0 / 16 + i != band) continue;
#pragma unroll
    for (int j = 0; j < S::rn; ++j) {
      const int c = n0 + j * 8 + 2 * t;
      stage[g * N + c] = sum[i][j][0];
      stage[g * N + c + 1] = sum[i][j][1];
      stage[(g + 8) * N + c] = sum[i][j][2];
      stage[(g + 8) * N + c + 1] = sum[i][j][3];
    }
  }
}"#,
};

/// One operand of the product: `S[e][kk]` or `S[kk][e]`, S a `__shared__ float` array.
struct Operand {
    array: String,
    /// The subscript the k counter fills (0 or 1).
    k_slot: usize,
    /// The other subscript: the operand's row of the product tile.
    coord: String,
    /// The declared extent of the dimension `coord` indexes (as written, so padding the
    /// rows for the banks does not widen the tile).
    extent: String,
}

impl Operand {
    /// The array's extent along the product tile.
    fn extent(&self) -> String {
        format!("(int)({})", self.extent)
    }

    fn access(&self, row: &str, k: &str) -> String {
        match self.k_slot {
            1 => format!("{}[{row}][{k}]", self.array),
            _ => format!("{}[{k}][{row}]", self.array),
        }
    }
}

/// The matched product nest.
struct Product<'t> {
    /// The k loop: the `for` whose counter both operands' k subscripts are.
    k_loop: Node<'t>,
    /// The nest's outermost `for`, a statement of the staging loop's body.
    nest: Node<'t>,
    /// Where the nest's innermost statement ends (a `#pragma` between a `for` and its
    /// body leaves the body a sibling of the `for` in the syntax tree).
    end: usize,
    /// The nest's loops other than the k loop, outermost first.
    others: Vec<Node<'t>>,
    /// The accumulator as written (`acc[i][j]`, `acc`).
    acc: Node<'t>,
    acc_name: String,
    a: Operand,
    b: Operand,
    /// The k tile as an expression (the k loop's bound).
    k_tile: String,
}

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let lo = match params.get(PARAMS, "precision") {
        "3xtf32" => true,
        "tf32" => false,
        other => return Err(NotApplicable::new(format!("`precision={other}`: expected 3xtf32 or tf32"))),
    };
    let path = if lo { MathPath::ThreeTf32 } else { MathPath::Tf32 };
    if let Some(r) = facts.refusal(path.unit_roundoff()) {
        return Err(NotApplicable::new(format!(
            "products on {} carry about {:.0e} relative error, which {} does not admit: {}",
            path.name(),
            path.unit_roundoff(),
            r.output,
            r.why
        )));
    }
    let pad = match params.get(PARAMS, "pad") {
        "banks" => true,
        "keep" => false,
        other => return Err(NotApplicable::new(format!("`pad={other}`: expected banks or keep"))),
    };
    super::per_kernel(src, params, |k| plan(src, k, lo, pad))
}

fn plan<'k>(src: &Source, k: &'k Kernel, lo: bool, pad: bool) -> Planned<'k> {
    let t = src.text();
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| NotApplicable::new("no body"))?;
    if descendants(body).iter().any(|d| {
        d.kind() == "call_expression"
            && d.child_by_field_name("function").is_some_and(|f| text(t, f).starts_with("ns_tt_step"))
    }) {
        return Err(NotApplicable::new(format!("`{}` runs its product on tensor cores already", k.name)));
    }
    if k.is_template {
        return Err(NotApplicable::new(format!("`{}` is a template: its tile may differ per instance", k.name)));
    }
    let mut why = Vec::new();
    let mut found = None;
    for stage in named_children(body).into_iter().filter(|n| n.kind() == "for_statement") {
        match staging_loop(src, k, body, stage) {
            Ok(p) => {
                found = Some((stage, p));
                break;
            }
            Err(e) => why.push(e),
        }
    }
    let Some((stage, p)) = found else {
        return Err(NotApplicable::new(if why.is_empty() {
            format!("`{}` has no loop at its top level that stages operands and multiplies them", k.name)
        } else {
            format!("`{}`: {}", k.name, why.join("; "))
        }));
    };
    let threads = block_threads(src, k)?;
    let mut change = Change::new(k);
    change.helpers.push(&TENSOR_ISA);
    change.helpers.push(&TENSOR_TILE);
    let mut padded = Vec::new();
    if pad {
        for o in [&p.a, &p.b] {
            if padded.iter().any(|(a, _)| *a == o.array) {
                continue;
            }
            if let Some((range, row)) = padding(t, body, o) {
                change.edits.replace(range, row.clone());
                padded.push((o.array.clone(), row));
            }
        }
    }
    let site = "ns_tt0";
    let ind = indent_at(t, stage.start_byte());
    let (ea, eb) = (p.a.extent(), p.b.extent());
    let (m, n) = (format!("{site}::m"), format!("{site}::n"));
    let fits = format!("{site}::fits && ({kt}) % 8 == 0", kt = p.k_tile);
    // Before the staging loop: the shape and the running sums.
    let before = format!(
        "// nightshift: tensor-tile: `{a}` x `{b}` over `{kv}` on tensor cores ({path}), warps over the whole tile\n\
         // (the operands' extents along it rounded up to the MMA's 16 x 8).\n\
         constexpr int {site}_ea = {ea}, {site}_eb = {eb};\n\
         using {site} = ns_tt_shape<({site}_ea + 15) / 16 * 16, ({site}_eb + 7) / 8 * 8, {threads}>;\n\
         float {site}_sum[{site}::rm][{site}::rn][4] = {{}};",
        a = p.a.array,
        b = p.b.array,
        kv = loop_var(t, p.k_loop),
        path = if lo { "3xTF32" } else { "TF32" },
    );
    // Before any `#pragma` of the staging loop, which must stay on the loop.
    let stage_start = pragma_start(t, stage);
    change.edits.insert(stage_start, format!("{}\n{ind}", reindent(&before, &ind)));
    // The nest: the MMAs where the shape fits, the original loop where it does not.
    let nest_ind = indent_at(t, p.nest.start_byte());
    let nest_start = pragma_start(t, p.nest);
    let nest_text = &t[nest_start..p.end];
    let ra = p.a.access(&format!("ns_tt_clamp<{site}_ea, {m}>(m)"), "k");
    let rb = p.b.access(&format!("ns_tt_clamp<{site}_eb, {n}>(n)"), "k");
    let orig = reindent(nest_text, "  ");
    let mma = format!(
        "if constexpr ({fits}) {{\n  ns_tt_step<{site}, ({kt}), {lo}>({site}_sum, [&](int m, int k) {{ return {ra}; }}, [&](int n, int k) {{ return {rb}; }});\n}} else {{\n  {orig}\n}}",
        kt = p.k_tile,
    );
    // From the start of the nest's first line, so the new code takes the loop's indentation
    // even where its `#pragma` sits at column 0.
    let line_start = t[..nest_start].rfind('\n').map_or(0, |i| i + 1);
    let from = if t[line_start..nest_start].trim().is_empty() { line_start } else { nest_start };
    let lead = if from == line_start { nest_ind.clone() } else { String::new() };
    change.edits.replace(from..p.end, format!("{lead}{}", reindent(&mma, &nest_ind)));
    // After the staging loop: the sums into the original's accumulators.
    // Braced: tree-sitter reads a `#pragma` between a `for` and its body as the end of it.
    let mut loops = String::new();
    for l in &p.others {
        loops.push_str(&format!("#pragma unroll\n{} {{\n", header(t, *l)));
    }
    let add = format!(
        "{{\n  const int ns_m = {ca}, ns_n = {cb};\n  if (ns_m / 16 == ns_band) {acc} += ns_stage[(ns_m % 16) * ({n}) + ns_n];\n}}{close}",
        close = "\n}".repeat(p.others.len()),
        ca = p.a.coord,
        cb = p.b.coord,
        acc = text(t, p.acc),
    );
    // An operand array holds the stage only where no code after the loop reads it.
    let after_loop = &t[stage.end_byte()..k.body.end];
    let free = |a: &str| !syntax::mentions_word(after_loop, a);
    let (free_a, free_b) = (free(&p.a.array), free(&p.b.array));
    let after = format!(
        "\nif constexpr ({fits}) {{\n  // The sums into `{acc}`, 16 rows of the tile at a time through shared memory: the operands' own\n  // arrays where they hold 16 x N, else a stage of its own.\n  constexpr bool ns_in_a = {free_a} && sizeof({aa}) >= sizeof(float) * 16 * ({n});\n  constexpr bool ns_in_b = {free_b} && sizeof({ba}) >= sizeof(float) * 16 * ({n});\n  __shared__ float ns_own[ns_in_a || ns_in_b ? 1 : 16 * ({n})];\n  float* ns_stage = ns_in_a ? &{aa}[0][0] : ns_in_b ? &{ba}[0][0] : ns_own;\n  __syncthreads();\n  for (int ns_band = 0; ns_band < ({m}) / 16; ++ns_band) {{\n    ns_tt_put_band<{site}, ({n})>({site}_sum, ns_stage, ns_band);\n    __syncthreads();\n{nest}\n    __syncthreads();\n  }}\n}}",
        acc = p.acc_name,
        aa = p.a.array,
        ba = p.b.array,
        nest = reindent(&format!("{loops}{add}"), "    "),
    );
    change.edits.insert(stage.end_byte(), reindent(&after, &ind));
    let mut note = format!(
        "`{}`: `{}` x `{}` over `{}` on tensor cores ({}), the sums added to `{}` after the loop",
        k.name,
        p.a.array,
        p.b.array,
        loop_var(t, p.k_loop),
        if lo { "3xTF32" } else { "TF32" },
        p.acc_name
    );
    for (a, row) in &padded {
        note.push_str(&format!("; `{a}`'s rows padded to {row}"));
    }
    Ok((change, note))
}

fn loop_var(t: &str, f: Node) -> String {
    syntax::unit_step_loop(t, f).map(|h| h.var).unwrap_or_default()
}

/// `#pragma unroll` lines written just before a loop, kept with it.
pub(crate) fn pragma_start(t: &str, f: Node) -> usize {
    let mut start = f.start_byte();
    let mut prev = f.prev_sibling();
    while let Some(p) = prev {
        if is_pragma(t, p) {
            start = p.start_byte();
            prev = p.prev_sibling();
        } else {
            break;
        }
    }
    start
}

/// A statement that is a block barrier, `__syncthreads();`, however it is spaced.
pub(crate) fn is_barrier(t: &str, n: Node) -> bool {
    n.kind() == "expression_statement"
        && n.named_child(0).is_some_and(|c| {
            c.kind() == "call_expression"
                && c.child_by_field_name("function").is_some_and(|f| text(t, f) == "__syncthreads")
                && c.child_by_field_name("arguments").is_some_and(|a| a.named_child_count() == 0)
        })
}

pub(crate) fn is_pragma(t: &str, n: Node) -> bool {
    n.kind() == "preproc_call" && text(t, n).trim_start().starts_with("#pragma")
}

/// A loop's body. tree-sitter parses `for (...)` followed by a `#pragma` line and the
/// real body as a `for` with an empty body, the pragma and the body beside it.
fn loop_body(f: Node) -> Option<Node> {
    let b = f.child_by_field_name("body")?;
    if b.end_byte() > b.start_byte() {
        return Some(b);
    }
    let mut next = f.next_named_sibling();
    while let Some(n) = next {
        if n.kind() == "preproc_call" || n.kind() == "comment" {
            next = n.next_named_sibling();
        } else {
            return Some(n);
        }
    }
    None
}

/// A chain of `for`s, each the only statement of the one around it (pragmas and comments
/// aside): the loops, outermost first; the statement inside the last, or why there is no
/// one; and where the chain ends (past a body the parser set beside its `for`).
struct Chain<'t> {
    loops: Vec<Node<'t>>,
    innermost: Result<Node<'t>, &'static str>,
    end: usize,
}

fn chain<'t>(t: &str, f: Node<'t>) -> Chain<'t> {
    let mut loops = Vec::new();
    let mut end = f.end_byte();
    let mut cur = f;
    while cur.kind() == "for_statement" {
        loops.push(cur);
        end = end.max(cur.end_byte());
        let Some(b) = loop_body(cur) else { return Chain { loops, innermost: Err("a loop without a body"), end } };
        end = end.max(b.end_byte());
        let inner: Vec<Node> = crate::pattern::block_statements(b)
            .into_iter()
            .filter(|n| n.kind() != "comment" && !is_pragma(t, *n))
            .collect();
        match inner.as_slice() {
            [one] => cur = *one,
            _ => {
                let several = "the multiply loop's body holds more than one statement";
                return Chain { loops, innermost: Err(several), end };
            }
        }
    }
    Chain { loops, innermost: Ok(cur), end: end.max(cur.end_byte()) }
}

/// `for (...)`, through its closing parenthesis.
fn header<'s>(t: &'s str, f: Node) -> &'s str {
    let close = syntax::children(f).into_iter().filter(|c| c.kind() == ")").map(|c| c.end_byte()).next();
    &t[f.start_byte()..close.unwrap_or(f.end_byte())]
}

/// The launches' block as one thread count the kernel can see at compile time.
fn block_threads(src: &Source, k: &Kernel) -> Result<String, NotApplicable> {
    let mut counts = Vec::new();
    for l in src.launches_of(&k.name) {
        let block = launch::block(src, &l)
            .ok_or_else(|| NotApplicable::new(format!("`{}` has a launch with no block size", k.name)))?;
        let c = super::launch_bounds::thread_count(src, k, &block)?;
        if !counts.contains(&c) {
            counts.push(c);
        }
    }
    match counts.len() {
        0 => Err(NotApplicable::new(format!("`{}` has no launch with a block size", k.name))),
        1 => Ok(counts.remove(0)),
        _ => Err(NotApplicable::new(format!(
            "`{}` is launched with blocks of different sizes ({}): the warps' tiling needs one",
            k.name,
            counts.join(", ")
        ))),
    }
}

/// A top-level loop of the kernel that stages operands (a barrier in its body) and holds
/// the product nest as one of its statements.
fn staging_loop<'t>(src: &Source, k: &Kernel, body: Node<'t>, stage: Node<'t>) -> Result<Product<'t>, String> {
    let t = src.text();
    let lbody = stage.child_by_field_name("body").ok_or("a loop without a body")?;
    let stmts = crate::pattern::block_statements(lbody);
    if !stmts.iter().any(|s| is_barrier(t, *s)) {
        return Err(format!("the loop at byte {} has no `__syncthreads();` of its own", stage.start_byte()));
    }
    // Every thread runs every trip to its end: the MMAs are warp-wide and the staging
    // after the loop has barriers.
    if let Some(e) = syntax::escapes(lbody).first() {
        return Err(format!(
            "the loop at byte {} has `{}`: its threads may skip a trip, and a warp-wide MMA needs every lane",
            stage.start_byte(),
            text(t, *e).trim_end_matches(';').trim()
        ));
    }
    // Every thread must reach the loop: nothing before it leaves the kernel.
    if descendants(body).iter().any(|d| d.kind() == "return_statement" && d.start_byte() < stage.start_byte()) {
        return Err("a `return` comes before the staging loop".into());
    }
    // The first nest's reason: a loop that is the body of the one before it (after a
    // `#pragma`) is no nest of its own.
    let (mut first, mut shape) = (None, None);
    let mut inside = 0;
    for s in stmts.iter().filter(|s| s.kind() == "for_statement") {
        if s.start_byte() < inside {
            continue;
        }
        inside = chain(t, *s).end;
        // A multiply nest's reason outranks a loop that is no such nest (a loader).
        match multiply_nest(t, *s) {
            Err(e) => {
                shape.get_or_insert(e);
            }
            Ok(m) => match product(src, k, body, stage, m).and_then(|p| fenced(t, &stmts, &p).map(|_| p)) {
                Ok(p) => return Ok(p),
                Err(e) => {
                    first.get_or_insert(e);
                }
            },
        }
    }
    Err(first.or(shape).unwrap_or_else(|| {
        format!("the loop at byte {} multiplies no two shared arrays into an accumulator", stage.start_byte())
    }))
}

/// The MMAs read every row of both tiles, where the original's threads may read only rows
/// they or their warp wrote: a block-wide barrier must stand between the loop body's
/// writes of the tiles and the nest, and between the nest and the next trip's writes.
fn fenced(t: &str, stmts: &[Node], p: &Product) -> Result<(), String> {
    let barrier = |n: &Node| is_barrier(t, *n);
    let writes = |n: &Node| {
        let w = written_arrays(t, *n);
        w.contains(&p.a.array) || w.contains(&p.b.array)
    };
    let at = stmts.iter().position(|n| n.id() == p.nest.id()).ok_or("the nest is not a statement of the loop")?;
    let (before, after) = (&stmts[..at], &stmts[at + 1..]);
    let last_write = before.iter().rposition(writes);
    let last_barrier = before.iter().rposition(barrier);
    if last_write.is_some_and(|w| last_barrier.is_none_or(|b| b < w)) {
        return Err(format!(
            "no `__syncthreads();` between the writes of `{}` or `{}` and the multiply loop",
            p.a.array, p.b.array
        ));
    }
    // After the nest, the next writes are later in this trip or early in the next one: a
    // barrier must come first, going round the loop.
    let round: Vec<&Node> = after.iter().chain(before.iter()).collect();
    let first_write = round.iter().position(|n| writes(n));
    let first_barrier = round.iter().position(|n| barrier(n));
    if first_write.is_some_and(|w| first_barrier.is_none_or(|b| b > w)) {
        return Err(format!(
            "no `__syncthreads();` between the multiply loop and the next writes of `{}` or `{}`",
            p.a.array, p.b.array
        ));
    }
    Ok(())
}

/// A nest of `for`s around one `ACC += X * Y;`: its loops, outermost first, and the
/// accumulator and the two factors; the reason where `nest` is not of that shape.
struct MultiplyNest<'t> {
    loops: Vec<Node<'t>>,
    end: usize,
    acc: Node<'t>,
    x: Node<'t>,
    y: Node<'t>,
}

fn multiply_nest<'t>(t: &str, nest: Node<'t>) -> Result<MultiplyNest<'t>, String> {
    let Chain { loops, innermost, end } = chain(t, nest);
    let stmt = innermost?;
    let e = (stmt.kind() == "expression_statement").then(|| stmt.named_child(0)).flatten().map(strip_parens);
    let Some(e) = e.filter(|e| e.kind() == "assignment_expression") else {
        return Err("the innermost statement is not `acc += x * y;`".into());
    };
    let op = e.child_by_field_name("operator").map(|o| text(t, o)).unwrap_or("");
    let incomplete = "the innermost statement is not a complete `acc += x * y;`";
    let (acc, right) =
        (e.child_by_field_name("left").ok_or(incomplete)?, e.child_by_field_name("right").ok_or(incomplete)?);
    let Some(("*", x, y)) = binary(t, strip_parens(right)) else {
        return Err("the innermost statement is not `acc += x * y;`".into());
    };
    if op != "+=" {
        return Err("the innermost statement is not `acc += x * y;`".into());
    }
    Ok(MultiplyNest { loops, end, acc, x, y })
}

/// The product `nest` computes, or why the recipe cannot take it.
fn product<'t>(
    src: &Source,
    k: &Kernel,
    body: Node<'t>,
    stage: Node<'t>,
    nest: MultiplyNest<'t>,
) -> Result<Product<'t>, String> {
    let t = src.text();
    let MultiplyNest { loops, end, acc, x, y } = nest;
    let nest = loops[0];
    // The k loop: the counter that indexes both operands.
    let counters: Vec<(String, Node)> =
        loops.iter().filter_map(|l| syntax::unit_step_loop(t, *l).map(|h| (h.var, *l))).collect();
    if counters.len() != loops.len() {
        return Err("a loop of the multiply nest does not count up by one".into());
    }
    let (xo, yo) = (operand_parts(t, x), operand_parts(t, y));
    let (Some((xa, xi)), Some((ya, yi))) = (xo, yo) else {
        return Err("the factors are not 2-D arrays indexed `s[i][k]`".into());
    };
    let mut pick = None;
    for (var, l) in &counters {
        let slot = |idx: &[Node; 2]| -> Option<usize> {
            let hits: Vec<usize> = (0..2).filter(|i| syntax::is_ident(t, idx[*i], var)).collect();
            (hits.len() == 1 && !syntax::mentions(t, idx[1 - hits[0]], var)).then(|| hits[0])
        };
        if let (Some(sx), Some(sy)) = (slot(&xi), slot(&yi)) {
            pick = Some((var.clone(), *l, sx, sy));
        }
    }
    let Some((kvar, k_loop, sx, sy)) = pick else {
        return Err("no loop counter is the bare k subscript of both factors".into());
    };
    let shared_float = |name: &str| -> bool {
        tile_declarator(t, body, name).is_some_and(|(d, _)| {
            text(t, d).contains("__shared__") && syntax::declaration_type(t, d).is_some_and(|ty| is_float(&ty))
        })
    };
    for a in [&xa, &ya] {
        if !shared_float(a) {
            return Err(format!("`{a}` is not a 2-D `__shared__ float` array of the kernel"));
        }
    }
    // The k tile: `for (int kk = 0; kk < KT; ++kk)` with KT a compile-time constant.
    let h =
        syntax::unit_step_loop(t, k_loop).ok_or_else(|| format!("the loop over `{kvar}` does not count up by one"))?;
    if const_value(src, k, h.start) != Some(0) {
        return Err(format!("the loop over `{kvar}` does not start at 0"));
    }
    let Some(kt_value) = const_value(src, k, h.bound) else {
        return Err(format!("the loop over `{kvar}` has no compile-time bound"));
    };
    let kt = text(t, h.bound).to_string();
    let (k_tile, depth) = if h.inclusive { (format!("{kt} + 1"), kt_value + 1) } else { (kt, kt_value) };
    if depth < 8 {
        return Err(format!("the k tile over `{kvar}` is {depth} deep, less than one MMA's 8"));
    }
    // The other loops unroll: the accumulator is a register array indexed by constants.
    let others: Vec<Node> = loops.iter().copied().filter(|l| l.id() != k_loop.id()).collect();
    for l in &others {
        let c = const_loop(src, k, *l)
            .ok_or_else(|| format!("the loop over `{}` has no compile-time trip count", loop_var(t, *l)))?;
        if let Some(why) = c.unfit {
            return Err(format!("the accumulator {why}"));
        }
    }
    // The accumulator: a float local declared before the staging loop, touched in it only
    // here; indices and rows that hold still over the staging loop.
    let acc_name = base_name(t, acc).ok_or("the accumulator is not a local or an array of them")?;
    let declared_before = descendants(body).into_iter().any(|d| {
        d.kind() == "declaration"
            && d.end_byte() <= stage.start_byte()
            && !text(t, d).contains("__shared__")
            && syntax::declaration_type(t, d).is_some_and(|ty| is_float(&ty))
            && syntax::declared_names(t, d).contains(&acc_name)
    });
    if !declared_before {
        return Err(format!("`{acc_name}` is not a `float` local declared before the staging loop"));
    }
    if descendants(stage).iter().any(|d| {
        d.kind() == "identifier"
            && text(t, *d) == acc_name
            && !(d.start_byte() >= acc.start_byte() && d.end_byte() <= acc.end_byte())
    }) {
        return Err(format!("`{acc_name}` is used in the staging loop beyond the product"));
    }
    // What the nest sees change over the loop: the loop's counter, the names its body
    // declares at its top level (one a loader's inner block declares is out of sight),
    // and whatever the loop assigns.
    let mut moving: Vec<String> = stage.child_by_field_name("initializer").map_or_else(Vec::new, |i| {
        let mut v = syntax::declared_names(t, i);
        v.extend(syntax::single_declarator(t, i).map(|(n, _)| n));
        v
    });
    let stage_body = stage.child_by_field_name("body").ok_or("a loop without a body")?;
    for d in named_children(stage_body).into_iter().filter(|d| d.kind() == "declaration") {
        moving.extend(syntax::declared_names(t, d));
    }
    moving.extend(syntax::assigned(t, stage).into_iter().map(|(n, _)| n));
    moving.extend(written_arrays(t, stage));
    let inner: Vec<String> = others.iter().map(|l| loop_var(t, *l)).collect();
    moving.retain(|n| !inner.contains(n) && *n != acc_name);
    let (xc, yc) = (xi[1 - sx], yi[1 - sy]);
    let headers: Vec<Node> = others.iter().filter_map(|l| l.child_by_field_name("condition")).collect();
    for n in [acc, xc, yc].into_iter().chain(headers) {
        if let Some(v) = moving.iter().find(|v| syntax::mentions(t, n, v)) {
            return Err(format!("`{}` depends on `{v}`, which the staging loop sets", text(t, n)));
        }
    }
    Ok(Product {
        k_loop,
        nest,
        end,
        others,
        acc,
        acc_name,
        a: Operand { k_slot: sx, coord: text(t, xc).to_string(), extent: extent_of(t, body, &xa, 1 - sx)?, array: xa },
        b: Operand { k_slot: sy, coord: text(t, yc).to_string(), extent: extent_of(t, body, &ya, 1 - sy)?, array: ya },
        k_tile,
    })
}

/// `float` under its qualifiers (`__shared__`, `const`...).
fn is_float(ty: &str) -> bool {
    ty.split_whitespace().filter(|w| !matches!(*w, "const" | "__shared__" | "static")).eq(["float"])
}

/// The row length that puts a fragment's 32 loads on 32 banks, and where the declaration
/// writes the row length; None where the array is used other than as `a[i][j]` (a flat
/// pointer into it, `&a[i][j]` or a row `a[i]`, would see the new rows) or is declared in
/// another form.
///
/// A fragment load reads rows g = 0..7 at columns t = 0..3 (k along the row) or rows t at
/// columns g (k down the column): a row of S floats puts element (g, t) on bank
/// (g S + t) mod 32, all distinct when S = 4 (mod 8), and (t S + g) on distinct banks when
/// S = 8 (mod 16). Either keeps a row a multiple of 16 bytes.
fn padding(t: &str, body: Node, o: &Operand) -> Option<(std::ops::Range<usize>, String)> {
    // Every use must be the declaration itself or an element `a[i][j]` read or written
    // (not its address): `a`, a row `a[i]`, `&a[i][j]` or `sizeof(a)` see the row length.
    let element_use = |d: Node| -> bool {
        let declarator = d.parent().is_some_and(|p| {
            p.kind() == "array_declarator" && p.child_by_field_name("declarator").is_some_and(|x| x.id() == d.id())
        });
        if declarator {
            return true;
        }
        let element = d
            .parent()
            .filter(|p| p.kind() == "subscript_expression")
            .and_then(|p| p.parent())
            .filter(|p| p.kind() == "subscript_expression");
        let Some(element) = element else { return false };
        let mut up = element.parent();
        while let Some(p) = up.filter(|p| p.kind() == "parenthesized_expression") {
            up = p.parent();
        }
        !up.is_some_and(|p| p.kind() == "pointer_expression" && text(t, p).trim_start().starts_with('&'))
    };
    let uses_flat =
        descendants(body).into_iter().any(|d| d.kind() == "identifier" && text(t, d) == o.array && !element_use(d));
    if uses_flat {
        return None;
    }
    let (_, row) = tile_declarator(t, body, &o.array)?;
    let size = row.child_by_field_name("size")?;
    let e = text(t, size);
    // The shortest such row at least as long as the declared one.
    let padded = match o.k_slot {
        1 => format!("(({e}) + 3) / 8 * 8 + 4"),
        _ => format!("(({e}) + 7) / 16 * 16 + 8"),
    };
    Some((size.byte_range(), padded))
}

/// The size written for dimension `dim` (0 or 1) of the 2-D `__shared__` array `name`
/// declared at the top of `body`.
fn extent_of(t: &str, body: Node, name: &str, dim: usize) -> Result<String, String> {
    let missing = || format!("`{name}`'s extents are not written as `{name}[R][C]`");
    let (_, outer) = tile_declarator(t, body, name).ok_or_else(missing)?;
    let size = match dim {
        1 => outer.child_by_field_name("size"),
        _ => outer.child_by_field_name("declarator").and_then(|i| i.child_by_field_name("size")),
    };
    size.map(|n| text(t, n).to_string()).ok_or_else(missing)
}

/// The declaration at the top of `body` that declares `name` as a 2-D array, and its
/// declarator `name[R][C]` (the outer one, whose size is C); the code before and after the
/// staging loop names a tile declared there. `float a[2][3], b[4]` has one for `a`, none
/// for `b`.
fn tile_declarator<'t>(t: &str, body: Node<'t>, name: &str) -> Option<(Node<'t>, Node<'t>)> {
    named_children(body).into_iter().filter(|d| d.kind() == "declaration").find_map(|d| {
        let mut c = d.walk();
        let outer = d.children_by_field_name("declarator", &mut c).find(|x| {
            x.kind() == "array_declarator"
                && x.child_by_field_name("declarator")
                    .filter(|i| i.kind() == "array_declarator")
                    .and_then(|i| i.child_by_field_name("declarator"))
                    .is_some_and(|n| n.kind() == "identifier" && text(t, n) == name)
        });
        outer.map(|o| (d, o))
    })
}

/// The arrays an assignment under `n` writes an element of (`rows[ty] = ...`).
fn written_arrays(t: &str, n: Node) -> Vec<String> {
    descendants(n)
        .into_iter()
        .filter(|d| d.kind() == "assignment_expression" || d.kind() == "update_expression")
        .filter_map(|d| d.child_by_field_name("left").or_else(|| d.child_by_field_name("argument")))
        .filter(|l| strip_parens(*l).kind() == "subscript_expression")
        .filter_map(|l| base_name(t, l))
        .collect()
}

/// `s[e0][e1]`: the array's name and the two subscripts.
fn operand_parts<'t>(t: &str, n: Node<'t>) -> Option<(String, [Node<'t>; 2])> {
    let outer = strip_parens(n);
    if outer.kind() != "subscript_expression" {
        return None;
    }
    let inner = outer.child_by_field_name("argument")?;
    if inner.kind() != "subscript_expression" {
        return None;
    }
    let arr = inner.child_by_field_name("argument")?;
    if arr.kind() != "identifier" {
        return None;
    }
    let i0 = crate::pattern::subscript_index(inner)?;
    let i1 = crate::pattern::subscript_index(outer)?;
    Some((text(t, arr).to_string(), [i0, i1]))
}

/// The variable under a subscript chain (`acc` of `acc[i][j]`).
fn base_name(t: &str, n: Node) -> Option<String> {
    let mut n = strip_parens(n);
    while n.kind() == "subscript_expression" {
        n = n.child_by_field_name("argument")?;
    }
    (n.kind() == "identifier").then(|| text(t, n).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    /// A tiled GEMM kernel with `decl` for its tiles, `product` as its multiply loop and
    /// `block` as its launch's block.
    fn gemm(decl: &str, product: &str, block: &str) -> String {
        format!(
            "#define T 16\n__global__ void g(const float* A, const float* B, float* C, int n) {{\n  {decl}\n  float acc = 0.f;\n  for (int k0 = 0; k0 < n; k0 += T) {{\n    As[threadIdx.y][threadIdx.x] = A[k0 + threadIdx.x];\n    Bs[threadIdx.y][threadIdx.x] = B[k0 + threadIdx.y];\n    __syncthreads();\n    {product}\n    __syncthreads();\n  }}\n  C[threadIdx.y * T + threadIdx.x] = acc;\n}}\nextern \"C\" void launch(const float* A, const float* B, float* C, int n, int b, cudaStream_t s) {{\n  g<<<1, {block}, 0, s>>>(A, B, C, n);\n}}\n"
        )
    }

    const TILES: &str = "__shared__ float As[T][T];\n  __shared__ float Bs[T][T + 1];";
    const PRODUCT: &str = "for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];";

    fn run(src: &str, params: Params, rtol: f64) -> Applied {
        let facts = FactsBuilder::new("launch").tolerance(rtol, rtol).build();
        apply(&Source::parse(src), &facts, &params)
    }

    #[test]
    fn a_tiled_product_goes_to_tensor_cores_once_and_keeps_its_loop_for_shapes_that_do_not_fit() {
        let r = run(&gemm(TILES, PRODUCT, "dim3(T, T)"), Params::default(), 1e-4).unwrap();
        assert!(
            r.source
                .contains("using ns_tt0 = ns_tt_shape<(ns_tt0_ea + 15) / 16 * 16, (ns_tt0_eb + 7) / 8 * 8, (T * T)>;"),
            "{}",
            r.source
        );
        // B is read `Bs[k][n]`: its extent along the tile is its second dimension as declared
        // (padding included, not the padding for the banks).
        assert!(r.source.contains("constexpr int ns_tt0_ea = (int)(T), ns_tt0_eb = (int)(T + 1);"), "{}", r.source);
        // Rows padded for the banks: along k, 4 mod 8 floats; across k, 8 mod 16.
        assert!(r.source.contains("__shared__ float As[T][((T) + 3) / 8 * 8 + 4];"), "{}", r.source);
        assert!(r.source.contains("__shared__ float Bs[T][((T + 1) + 7) / 16 * 16 + 8];"), "{}", r.source);
        let kept = run(&gemm(TILES, PRODUCT, "dim3(T, T)"), Params::default().with("pad", "keep"), 1e-4).unwrap();
        assert!(kept.source.contains("__shared__ float Bs[T][T + 1];"), "{}", kept.source);
        // Code that sees a tile's row length (a pointer into it, a row, its size) keeps
        // that tile's rows; an element's size does not count.
        for flat in [
            "float* flat = &Bs[0][0];",
            "float* flat = &(Bs[0][1]);",
            "float* flat = Bs[1];",
            "const int flat = sizeof(Bs) / sizeof(float);",
        ] {
            let src = gemm(TILES, PRODUCT, "dim3(T, T)")
                .replace("  float acc = 0.f;", &format!("  float acc = 0.f;\n  {flat}"));
            let r2 = run(&src, Params::default(), 1e-4).unwrap();
            assert!(
                r2.source.contains("__shared__ float Bs[T][T + 1];") && r2.source.contains("As[T][((T) + 3)"),
                "{flat}: {}",
                r2.source
            );
        }
        let src =
            gemm(TILES, PRODUCT, "dim3(T, T)").replace("  float acc = 0.f;", "  float acc = 0.f * sizeof(Bs[0][0]);");
        assert!(run(&src, Params::default(), 1e-4).unwrap().source.contains("Bs[T][((T + 1) + 7) / 16 * 16 + 8]"));
        assert!(r.source.contains("ns_tt_step<ns_tt0, (T), true>(ns_tt0_sum, [&](int m, int k) { return As[ns_tt_clamp<ns_tt0_ea, ns_tt0::m>(m)][k]; }, [&](int n, int k) { return Bs[k][ns_tt_clamp<ns_tt0_eb, ns_tt0::n>(n)]; });"), "{}", r.source);
        // The original loop stays behind `if constexpr` for tiles the MMA shape does not divide.
        assert!(r.source.contains(&format!("}} else {{\n      {PRODUCT}\n    }}")), "{}", r.source);
        assert!(
            r.source.contains("if (ns_m / 16 == ns_band) acc += ns_stage[(ns_m % 16) * (ns_tt0::n) + ns_n];"),
            "{}",
            r.source
        );
        assert!(
            r.source.contains("#define NIGHTSHIFT_TENSOR_ISA") && r.source.contains("#define NIGHTSHIFT_TENSOR_TILE")
        );
        assert!(Source::parse(&r.source).kernels().iter().all(|k| !k.has_error), "{}", r.source);
        let again = run(&r.source, Params::default(), 1e-4).unwrap_err().0;
        assert_eq!(again, "`g` runs its product on tensor cores already");
    }

    #[test]
    fn reasons_are_true_where_the_product_is_not_one_it_can_take() {
        let why = |decl: &str, product: &str, block: &str| {
            run(&gemm(decl, product, block), Params::default(), 1e-4).map(|r| r.source).unwrap_err().0
        };
        let doubles = "__shared__ double As[T][T];\n  __shared__ double Bs[T][T + 1];";
        assert_eq!(
            why(doubles, PRODUCT, "dim3(T, T)"),
            "`g`: `As` is not a 2-D `__shared__ float` array of the kernel"
        );
        assert_eq!(
            why(TILES, "for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][k];", "dim3(T, T)"),
            "`g`: no loop counter is the bare k subscript of both factors"
        );
        assert_eq!(
            why(TILES, "for (int k = 0; k < n; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];", "dim3(T, T)"),
            "`g`: the loop over `k` has no compile-time bound"
        );
        assert_eq!(
            why(TILES, "for (int k = 0; k < 4; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];", "dim3(T, T)"),
            "`g`: the k tile over `k` is 4 deep, less than one MMA's 8"
        );
        assert_eq!(
            why(TILES, &format!("{PRODUCT} acc *= 0.5f;"), "dim3(T, T)"),
            "`g`: `acc` is used in the staging loop beyond the product"
        );
        assert_eq!(
            why(
                TILES,
                &format!("for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][k0 % T];"),
                "dim3(T, T)"
            ),
            "`g`: `k0 % T` depends on `k0`, which the staging loop sets"
        );
        assert_eq!(
            why(TILES, PRODUCT, "b"),
            "the block size of `g` is not a compile-time constant: `b` is a parameter of `launch`"
        );
        let no_barrier = gemm(TILES, PRODUCT, "dim3(T, T)").replace("    __syncthreads();\n", "");
        let e = run(&no_barrier, Params::default(), 1e-4).unwrap_err().0;
        assert!(e.starts_with("`g`: the loop at byte ") && e.ends_with("has no `__syncthreads();` of its own"), "{e}");
    }

    #[test]
    fn plain_tf32_waits_for_a_tolerance_that_admits_it() {
        let src = gemm(TILES, PRODUCT, "dim3(T, T)");
        let tf32 = Params::default().with("precision", "tf32");
        let e = run(&src, tf32.clone(), 1e-4).unwrap_err().0;
        assert_eq!(e, "products on TF32 tensor cores carry about 5e-4 relative error, which the task does not admit: rtol 1e-4 where 2.0e-3 is needed");
        let r = run(&src, tf32, 1e-2).unwrap();
        assert!(r.source.contains("ns_tt_step<ns_tt0, (T), false>"), "{}", r.source);
        // 3xTF32 is admitted where fp32 accumulation is.
        assert!(run(&src, Params::default(), 1e-5).is_ok());
    }
}

#[cfg(test)]
mod declines_and_fences {
    use super::*;
    use crate::facts::FactsBuilder;

    fn run(src: &str) -> Applied {
        apply(&Source::parse(src), &FactsBuilder::new("launch").tolerance(1e-4, 1e-4).build(), &Params::default())
    }

    /// A review's cases: a trip some threads skip, and operand tiles read after the loop.
    #[test]
    fn skipped_trips_decline_and_tiles_read_after_the_loop_are_not_the_stage() {
        let kernel = |mid: &str, tail: &str| {
            format!("#define T 16\n__global__ void g(const float* A, float* C, int n) {{\n  __shared__ float As[T][T];\n  __shared__ float Bs[T][T];\n  float acc = 0.f;\n  for (int k0 = 0; k0 < n; k0 += T) {{\n    As[threadIdx.y][threadIdx.x] = A[k0];\n    Bs[threadIdx.y][threadIdx.x] = A[k0 + 1];\n    __syncthreads();\n{mid}    for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];\n    __syncthreads();\n  }}\n{tail}  C[threadIdx.x] = acc;\n}}\nextern \"C\" void launch(const float* A, float* C, int n, cudaStream_t s) {{ g<<<1, dim3(T, T), 0, s>>>(A, C, n); }}\n")
        };
        let e = run(&kernel("    if (threadIdx.x >= n) continue;\n", "")).unwrap_err().0;
        assert!(e.contains("has `continue`: its threads may skip a trip"), "{e}");
        let r = run(&kernel("", "  acc += As[0][0];\n")).unwrap();
        assert!(r.source.contains("constexpr bool ns_in_a = false && sizeof(As)"), "{}", r.source);
        assert!(r.source.contains("constexpr bool ns_in_b = true && sizeof(Bs)"), "{}", r.source);
    }

    /// A kernel whose loop body is `body` (the product `acc += As[ty][k] * Bs[k][tx]` in it
    /// as `PRODUCT`) after the tile declarations `tiles`, the loop preceded by `pragma`.
    fn tiled(tiles: &str, pragma: &str, body: &str) -> String {
        let body =
            body.replace("PRODUCT", "for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];");
        format!("#define T 16\n__global__ void g(const float* A, float* C, const int* perm, int n) {{\n  {tiles}\n  float acc = 0.f;\n{pragma}  for (int k0 = 0; k0 < n; k0 += T) {{\n{body}\n  }}\n  C[threadIdx.x] = acc;\n}}\nextern \"C\" void launch(const float* A, float* C, const int* perm, int n, cudaStream_t s) {{ g<<<1, dim3(T, T), 0, s>>>(A, C, perm, n); }}\n")
    }

    const LOAD: &str = "    As[threadIdx.y][threadIdx.x] = A[k0];\n    Bs[threadIdx.y][threadIdx.x] = A[k0 + 1];\n";
    const TILES: &str = "__shared__ float As[T][T];\n  __shared__ float Bs[T][T];";

    #[test]
    fn the_tiles_must_be_fenced_by_block_barriers_around_the_product() {
        let ok =
            run(&tiled(TILES, "", &format!("{LOAD}    __syncthreads();\n    PRODUCT\n    __syncthreads();"))).is_ok();
        assert!(ok);
        // A barrier at the top of the next trip fences the product as well as one after it.
        let top = format!("    __syncthreads();\n{LOAD}    __syncthreads();\n    PRODUCT");
        assert!(run(&tiled(TILES, "", &top)).is_ok());
        let warp_only = format!("{LOAD}    __syncwarp();\n    PRODUCT\n    __syncthreads();");
        assert_eq!(
            run(&tiled(TILES, "", &warp_only)).unwrap_err().0,
            "`g`: no `__syncthreads();` between the writes of `As` or `Bs` and the multiply loop"
        );
        let no_after = format!("{LOAD}    __syncthreads();\n    PRODUCT");
        assert_eq!(
            run(&tiled(TILES, "", &no_after)).unwrap_err().0,
            "`g`: no `__syncthreads();` between the multiply loop and the next writes of `As` or `Bs`"
        );
    }

    #[test]
    fn declarations_bounds_and_pragmas_read_as_written() {
        let body = format!("{LOAD}    __syncthreads();\n    PRODUCT\n    __syncthreads();");
        // Two tiles in one declaration, a k loop written `<= T - 1`, a pragma on the loop.
        let both =
            tiled("__shared__ float As[T][T], Bs[T][T];", "#pragma unroll 1\n", &body).replace("k < T", "k <= T - 1");
        let r = run(&both).unwrap();
        assert!(r.source.contains("(T - 1 + 1) % 8 == 0"), "{}", r.source);
        let (sums, pragma) =
            (r.source.find("float ns_tt0_sum").unwrap(), r.source.find("#pragma unroll 1\n  for (int k0").unwrap());
        assert!(sums < pragma, "{}", r.source);
        let eight = tiled(TILES, "", &body).replace("k < T", "k <= 7");
        assert!(run(&eight).is_ok(), "a k loop `<= 7` runs 8 times");
        let volatile = tiled("volatile __shared__ float As[T][T];\n  __shared__ float Bs[T][T];", "", &body);
        assert_eq!(run(&volatile).unwrap_err().0, "`g`: `As` is not a 2-D `__shared__ float` array of the kernel");
        // A row index the loop writes an array element of moves with it.
        let perm = tiled(&format!("{TILES}\n  __shared__ int rows[T];"), "", &body)
            .replace("As[threadIdx.y][k]", "As[rows[threadIdx.y]][k]")
            .replacen("    As[", "    rows[threadIdx.y] = perm[k0];\n    As[", 1);
        assert_eq!(
            run(&perm).unwrap_err().0,
            "`g`: `rows[threadIdx.y]` depends on `rows`, which the staging loop sets"
        );
        // A loader's own `row`, declared in its inner block, is not the kernel's `row` the
        // product reads at; a `row` the loop's body declares at its top level is.
        let kernel_row = body.replacen(
            "    As[",
            "    for (int i = 0; i < 1; ++i) {\n      const int row = i;\n      As[row][threadIdx.x] = 0.f;\n    }\n    As[",
            1,
        );
        let src = tiled(TILES, "", &kernel_row)
            .replace("As[threadIdx.y][k]", "As[row][k]")
            .replace("  float acc = 0.f;", "  const int row = threadIdx.y;\n  float acc = 0.f;");
        assert!(run(&src).is_ok(), "{:?}", run(&src).err());
        let shadowed = src.replacen(
            "    for (int i = 0; i < 1; ++i) {",
            "    const int row = 0;\n    for (int i = 0; i < 1; ++i) {",
            1,
        );
        assert_eq!(run(&shadowed).unwrap_err().0, "`g`: `row` depends on `row`, which the staging loop sets");
    }
}
