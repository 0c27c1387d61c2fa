//! One loop for a run, for `vectorize`: per-element code with a loop whose trip count is
//! known only at run time (a sum over a segment's rows, over K codebooks) would otherwise
//! run V such loops one after another in a thread. When the loop's header holds one value
//! over the run ([`super::uniform`]: its counter starts, steps and stops alike in every
//! element), the loop runs once and each step does the V elements' bodies (unroll and
//! jam): the reads of a step sit side by side, where [`super::gather`] makes them one wide
//! load and the compiler makes a load every element repeats (the codebook's code) one.
//!
//! The per-element statements are cut into parts at each such loop: a declaration that
//! holds one value over the run is made once; other statements run per element in an
//! unrolled loop over the run; locals an element carries from one part to a later one
//! become register arrays (`ns_e_acc[ns_k]`). Each element still runs its own statements
//! in its own order, and the V elements were V threads of the original, any interleaving
//! of which it allowed.

use super::uniform::RunUniform;
use crate::syntax::{self, descendants, named_children, text};
use std::ops::Range;
use tree_sitter::Node;

pub(super) enum Part {
    /// A declaration of a value one for the run, made once.
    Once(Range<usize>),
    /// Statements each element runs.
    Each(Vec<Range<usize>>),
    /// A loop run once for the run: its header (`for (...)`), its body's statements, each
    /// step running them for every element.
    Loop { whole: Range<usize>, header: Range<usize>, body: Vec<Range<usize>>, counter: String },
}

pub(super) struct Jam {
    pub parts: Vec<Part>,
    /// Locals an element carries between parts.
    pub lifted: Vec<Lifted>,
}

pub(super) struct Lifted {
    pub name: String,
    pub ty: String,
    /// Its declaration made an assignment and its uses made array elements.
    pub edits: Vec<(Range<usize>, String)>,
    /// Where it is read outside its own part.
    pub elsewhere: Vec<Range<usize>>,
}

impl Jam {
    /// The statements of the loops run once, with their counters (where a read runs in
    /// every element of every step).
    pub fn loop_bodies(&self) -> Vec<(Vec<Range<usize>>, String)> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Loop { body, counter, .. } => Some((body.clone(), counter.clone())),
                _ => None,
            })
            .collect()
    }

    /// Whether `r` lies in a loop run once.
    pub fn covers(&self, r: &Range<usize>) -> bool {
        self.parts.iter().any(|p| match p {
            Part::Loop { whole, .. } => whole.start <= r.start && r.end <= whole.end,
            _ => false,
        })
    }

    pub fn array(name: &str) -> String {
        format!("ns_e_{name}[ns_k]")
    }

    /// Every edit the lifted locals make.
    pub fn edits(&self) -> Vec<(Range<usize>, String)> {
        self.lifted.iter().flat_map(|l| l.edits.iter().cloned()).collect()
    }

    /// Keeps a local in its part when every read of it elsewhere sits in one of `gone`
    /// (reads another rewrite replaces whole, with the local's value spelled otherwise).
    pub fn keep_local_where_only_read_in(&mut self, gone: &[Range<usize>]) {
        self.lifted.retain(|l| l.elsewhere.iter().any(|r| !gone.iter().any(|g| g.start <= r.start && r.end <= g.end)));
    }
}

/// The jammed form of the per-element statements `stmts` under `body`, when one of their
/// loops has a header that holds one value over the run and a run-time trip count; none
/// of its statements may hold a range in `avoid` (a register window's taps, which index
/// the window by the loop's unrolled counter).
pub(super) fn find(
    t: &str,
    body: Node,
    stmts: &[Range<usize>],
    uniform: &mut RunUniform,
    avoid: &[Range<usize>],
) -> Option<Jam> {
    let nodes: Vec<Node> = stmts
        .iter()
        .map(|r| body.descendant_for_byte_range(r.start, r.end).filter(|n| n.byte_range() == *r))
        .collect::<Option<_>>()?;
    // A macro that names a local of the element code (or a loop's counter) reads or
    // changes it out of sight: where it lives after the cut, and what steps a counter.
    let mut root = body;
    while let Some(p) = root.parent() {
        root = p;
    }
    let locals: Vec<String> = nodes.iter().flat_map(|n| syntax::declared_names(t, *n)).collect();
    let hidden = nodes
        .iter()
        .flat_map(|n| syntax::macros_used_in(t, root, *n))
        .any(|(_, value)| crate::pattern::names_in(&value).iter().any(|name| locals.contains(name)));
    if hidden {
        return None;
    }
    uniform.add_declarations(body, stmts);
    let mut parts: Vec<Part> = Vec::new();
    for n in &nodes {
        if let Some(part) = run_once_loop(t, *n, uniform, avoid) {
            parts.push(part);
            continue;
        }
        let once = n.kind() == "declaration" && uniform.uniform_declaration(*n).is_some();
        match parts.last_mut() {
            _ if once => parts.push(Part::Once(n.byte_range())),
            Some(Part::Each(rs)) => rs.push(n.byte_range()),
            _ => parts.push(Part::Each(vec![n.byte_range()])),
        }
    }
    if !parts.iter().any(|p| matches!(p, Part::Loop { .. })) {
        return None;
    }
    // Locals declared at the top of a part each element runs and read in another part.
    let mut lifted: Vec<Lifted> = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let Part::Each(rs) = part else { continue };
        for r in rs {
            let n = body.descendant_for_byte_range(r.start, r.end)?;
            if n.kind() != "declaration" {
                continue;
            }
            let names = syntax::declared_names(t, n);
            let elsewhere = |name: &str| -> Vec<Range<usize>> {
                parts
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .flat_map(|(_, p)| mentions(t, body, p, name))
                    .collect()
            };
            if names.iter().all(|x| elsewhere(x).is_empty()) {
                continue;
            }
            let (name, init) = syntax::single_declarator(t, n)?;
            let words = text(t, n);
            let ty = syntax::unqualified(&syntax::declaration_type(t, n)?);
            if !uniform.declared_once(&name)
                || ty.contains("auto")
                || ["__shared__", "static", "volatile", "extern", "&"].iter().any(|w| words.contains(w))
            {
                return None;
            }
            let edit = match init {
                Some(v) => (n.start_byte()..v.start_byte(), format!("{} = ", Jam::array(&name))),
                None => (n.byte_range(), String::new()),
            };
            let elsewhere = elsewhere(&name);
            lifted.push(Lifted { name, ty, edits: vec![edit], elsewhere });
        }
    }
    // Every use of a lifted local, in whatever part.
    for part in &parts {
        let ranges: Vec<Range<usize>> = match part {
            Part::Once(_) => continue,
            Part::Each(rs) => rs.clone(),
            Part::Loop { body, .. } => body.clone(),
        };
        for r in ranges {
            let Some(n) = body.descendant_for_byte_range(r.start, r.end) else { continue };
            for d in descendants(n) {
                let name = text(t, d);
                let declarator = d.parent().is_some_and(|p| {
                    p.kind() == "init_declarator"
                        && p.child_by_field_name("declarator").is_some_and(|x| x.id() == d.id())
                        || p.kind() == "declaration"
                });
                if d.kind() != "identifier" || declarator {
                    continue;
                }
                if let Some(l) = lifted.iter_mut().find(|l| l.name == name) {
                    l.edits.push((d.byte_range(), Jam::array(name)));
                }
            }
        }
    }
    Some(Jam { parts, lifted })
}

/// Where `part` reads `name`.
fn mentions(t: &str, body: Node, part: &Part, name: &str) -> Vec<Range<usize>> {
    let ranges: Vec<Range<usize>> = match part {
        Part::Once(r) => vec![r.clone()],
        Part::Each(rs) => rs.clone(),
        Part::Loop { header, body, .. } => std::iter::once(header.clone()).chain(body.iter().cloned()).collect(),
    };
    ranges
        .iter()
        .filter_map(|r| body.descendant_for_byte_range(r.start, r.end))
        .flat_map(descendants)
        .filter(|d| d.kind() == "identifier" && text(t, *d) == name)
        .map(|d| d.byte_range())
        .collect()
}

/// `for (T c = start; cond; step) { ... }` with a header that holds one value over the run
/// (reading `c`), a trip count known only at run time, a body that leaves only at its end
/// and never changes `c`.
fn run_once_loop(t: &str, n: Node, uniform: &mut RunUniform, avoid: &[Range<usize>]) -> Option<Part> {
    if n.kind() != "for_statement" {
        return None;
    }
    let init = n.child_by_field_name("initializer")?;
    let cond = n.child_by_field_name("condition")?;
    let step = n.child_by_field_name("update")?;
    let loop_body = n.child_by_field_name("body").filter(|b| b.kind() == "compound_statement")?;
    let (counter, start) = syntax::single_declarator(t, init)?;
    if !uniform.declared_once(&counter) || !uniform.expr(start?, &[]) {
        return None;
    }
    let c = [counter.as_str()];
    let steps = match step.kind() {
        "update_expression" => step.child_by_field_name("argument").is_some_and(|a| text(t, a) == counter),
        "assignment_expression" => {
            step.child_by_field_name("left").is_some_and(|l| text(t, l) == counter)
                && step.child_by_field_name("right").is_some_and(|r| uniform.expr(r, &c))
        }
        _ => false,
    };
    // Not a compile-time count: the compiler unrolls those whole, and the elements' copies
    // of the body already sit side by side.
    let runtime = descendants(cond).iter().any(|d| d.kind() == "identifier" && text(t, *d) != counter);
    let changes_counter = syntax::assigned(t, loop_body).iter().any(|(x, _)| *x == counter)
        || syntax::passed_bare(t, loop_body).contains(&counter);
    let overlaps = avoid.iter().any(|a| a.start < n.end_byte() && n.start_byte() < a.end);
    if !steps
        || !runtime
        || !uniform.expr(cond, &c)
        || changes_counter
        || overlaps
        || !syntax::escapes(loop_body).is_empty()
        || syntax::has_barrier(t, loop_body)
        || syntax::has_warp_primitive(t, loop_body)
    {
        return None;
    }
    uniform.add_counter(&counter);
    let stmts: Vec<Range<usize>> = named_children(loop_body).into_iter().map(|s| s.byte_range()).collect();
    uniform.add_declarations(loop_body, &stmts);
    Some(Part::Loop { whole: n.byte_range(), header: n.start_byte()..loop_body.start_byte(), body: stmts, counter })
}

#[cfg(test)]
mod tests {
    use crate::facts::{Facts, FactsBuilder, Role};
    use crate::{Application, Params, RecipeId};

    /// Segment sums: each output element sums its column over its segment's rows.
    const SEGMENTS: &str = r#"#include <cuda_runtime.h>
__global__ void seg_sum(const float* values, const int* offsets, float* out, int segments, int dim) {
  const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long long)segments * dim) return;
  const int s = (int)(idx / dim);
  const int c = (int)(idx % dim);
  const int start = offsets[s];
  const int end = offsets[s + 1];
  float acc = 0.f;
  for (int r = start; r < end; ++r) {
    acc += values[(long long)r * dim + c];
  }
  out[idx] = acc;
}
extern "C" void launch(const float* values, const int* offsets, float* out, int segments, int dim, int rows, cudaStream_t st) {
  const long long n = (long long)segments * dim;
  seg_sum<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(values, offsets, out, segments, dim);
}
"#;

    fn facts(dim: i64) -> Facts {
        FactsBuilder::new("launch")
            .buffer("values", "float", Role::Input, "{5} * {4}", 1 << 20, 1 << 20)
            .buffer("offsets", "int", Role::Input, "{3} + 1", 1025, 1025)
            .buffer("out", "float", Role::Output, "{3} * {4}", 1 << 18, 1 << 18)
            .int("segments", 1024, 1024)
            .int("dim", dim, dim)
            .int("rows", 4096, 4096)
            .build()
    }

    fn vectorize(src: &str, f: &Facts) -> Result<crate::Rewrite, String> {
        let app = Application { recipe: RecipeId::Vectorize, params: Params::default() };
        crate::apply(&app, src, f).map_err(|e| e.0)
    }

    #[test]
    fn a_segment_loop_runs_once_per_run_and_reads_each_row_wide() {
        let r = vectorize(SEGMENTS, &facts(256)).unwrap();
        assert!(r.description.contains("the loop over `r` runs once for the run"), "{}", r.description);
        // The header once, the elements inside each step, the carried locals as arrays.
        assert!(r.source.contains("for (int r = start; r < end; ++r) {\n      #pragma unroll"), "{}", r.source);
        assert!(
            r.source.contains("ns_e_acc[ns_k] += ns_pick<4>(values + ((long long)r * dim + ((int)(ns_r0))), ns_k);"),
            "{}",
            r.source
        );
        assert!(r.source.contains("const int start = offsets[s];\n"), "made once: {}", r.source);
        assert!(r.source.contains("ns_out[ns_k] = ns_e_acc[ns_k];"), "{}", r.source);
        // The offsets the loop's bounds load must not be a buffer the kernel writes.
        assert!(r.guards.iter().any(|g| g.starts_with("ns_disjoint(out,") && g.contains("offsets")), "{:?}", r.guards);
        assert!(r.guards.iter().any(|g| g == "ns_aligned(values, 16)"), "{:?}", r.guards);
        // The scalar tail keeps the original loop.
        assert!(r.source.contains("acc += values[(long long)r * dim + c];"), "{}", r.source);
    }

    #[test]
    fn a_loop_that_cannot_run_once_per_run_keeps_the_long_loop_reason() {
        let why = |src: &str, dim: i64| vectorize(src, &facts(dim)).err().unwrap_or_default();
        // A row stride that is not the column's divisor, a read past the column, a read
        // under a condition, a bound per element, a counter the body changes, a break.
        for (from, to) in [
            ("(long long)r * dim + c", "(long long)r * (dim + 1) + c"),
            ("(long long)r * dim + c", "(long long)r * dim + c + 1"),
            ("acc += values[(long long)r * dim + c];", "if (c > 2) acc += values[(long long)r * dim + c];"),
            ("r < end;", "r < end + c;"),
            ("acc += values[(long long)r * dim + c];", "acc += values[(long long)r * dim + c]; r += (int)acc & 0;"),
            ("acc += values[(long long)r * dim + c];", "acc += values[(long long)r * dim + c]; if (acc > 1.f) break;"),
        ] {
            let src = SEGMENTS.replace(from, to);
            assert_ne!(src, SEGMENTS);
            assert!(why(&src, 256).contains("runs a loop while"), "{to}: {}", why(&src, 256));
        }
        // Columns that may wrap within a run.
        assert!(why(SEGMENTS, 250).contains("runs a loop while"), "{}", why(SEGMENTS, 250));
    }

    #[test]
    fn what_hides_a_change_or_a_condition_keeps_the_loop_per_element() {
        let why = |src: &str| vectorize(src, &facts(256)).err().unwrap_or_default();
        // A macro that steps the counter, one that names the accumulator, a reference
        // through a type alias, and a condition inside a function-like macro.
        let step = format!(
            "#define SKIP ++r\n{}",
            SEGMENTS.replace("acc += values[(long long)r * dim + c];", "acc += values[(long long)r * dim + c]; SKIP;")
        );
        let named = format!("#define ACC acc\n{}", SEGMENTS.replace("acc += values", "ACC += values"));
        let alias = format!(
            "typedef int& iref;\n{}",
            SEGMENTS.replace("float acc = 0.f;", "iref st = start; st += (c & 1);\n  float acc = 0.f;")
        );
        let when = format!(
            "#define WHEN(cond, x) ((cond) ? (x) : 0.f)\n{}",
            SEGMENTS.replace(
                "acc += values[(long long)r * dim + c];",
                "acc += WHEN(c < 3, values[(long long)r * dim + c]);"
            )
        );
        for src in [step, named, alias, when] {
            assert!(why(&src).contains("runs a loop while"), "{src}\n{}", why(&src));
        }
    }

    #[test]
    fn statements_before_the_check_that_the_elements_change_stay_per_element() {
        // An accumulator declared before the bounds check, and a load from a coordinate
        // declared before it: both are each element's own.
        let src = SEGMENTS
            .replace("  if (idx >= (long long)segments * dim) return;\n", "")
            .replace(
                "  const int s = (int)(idx / dim);",
                "  float acc = 0.f;\n  const int s = (int)(idx / dim);\n  const int start = offsets[s];\n  if (idx >= (long long)segments * dim) return;",
            )
            .replace("  const int start = offsets[s];\n  const int end", "  const int end")
            .replace("  float acc = 0.f;\n  for", "  for");
        let r = vectorize(&src, &facts(256)).unwrap();
        let fast = &r.source[r.source.find("seg_sum_fast").unwrap()..];
        let head = &fast[..fast.find("if (ns_base + 4").unwrap()];
        assert!(!head.contains("float acc") && !head.contains("int start"), "hoisted: {head}");
        assert!(r.source.contains("ns_e_acc[ns_k] = 0.f;"), "{}", r.source);
    }

    #[test]
    fn an_index_local_that_wraps_is_not_followed() {
        let src = SEGMENTS.replace(
            "acc += values[(long long)r * dim + c];",
            "const unsigned short at = (long long)r * dim + c;\n    acc += values[at];",
        );
        let why = vectorize(&src, &facts(256)).err().unwrap_or_default();
        assert!(why.contains("runs a loop while"), "{why}");
        let wide = src.replace("const unsigned short at", "const long long at");
        let r = vectorize(&wide, &facts(256)).unwrap();
        assert!(r.source.contains("ns_pick<4>(values + ((long long)r * dim + ((int)(ns_r0))), ns_k)"), "{}", r.source);
    }

    #[test]
    fn a_short_runtime_loop_is_jammed_and_a_gather_needs_no_loop() {
        // A gather through an id, no loop: a position-embedding add.
        let src = r#"#include <cuda_runtime.h>
__global__ void add_pos(const float* x, const long long* pos, const float* wpe, float* out, int tokens, int dim) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)tokens * dim) return;
  const long long t = i / dim;
  const long long d = i % dim;
  out[i] = x[i] + wpe[pos[t] * dim + d];
}
extern "C" void launch(const float* x, const long long* pos, const float* wpe, float* out, int tokens, int dim, cudaStream_t st) {
  add_pos<<<(unsigned)(((long long)tokens * dim + 255) / 256), 256, 0, st>>>(x, pos, wpe, out, tokens, dim);
}
"#;
        let f = FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "{4} * {5}", 1 << 20, 1 << 20)
            .buffer("pos", "long long", Role::Input, "{4}", 1024, 1024)
            .buffer("wpe", "float", Role::Input, "{4} * {5}", 1 << 20, 1 << 20)
            .buffer("out", "float", Role::Output, "{4} * {5}", 1 << 20, 1 << 20)
            .int("tokens", 1024, 1024)
            .int("dim", 1024, 1024)
            .build();
        let r = vectorize(src, &f).unwrap();
        assert!(r.source.contains("ns_pick<4>(wpe + (pos[t] * dim + ((long long)(ns_r0))), ns_k)"), "{}", r.source);
        assert!(!r.description.contains("runs once"), "{}", r.description);
        // A position that is not one value for the run (read at the element) stays scalar.
        let r = vectorize(&src.replace("pos[t] * dim", "pos[i % 7] * dim"), &f).unwrap();
        assert!(!r.source.contains("ns_pick"), "{}", r.source);
    }
}
