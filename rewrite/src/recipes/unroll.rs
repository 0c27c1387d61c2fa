//! Unrolling: `#pragma unroll N` on the innermost loops of the kernels that have no
//! pragma yet. More independent iterations in flight hide latency (several loads
//! outstanding per thread) and amortize the loop's compare and branch. Partial unrolling
//! is valid for any trip count, so nothing is versioned.

use crate::facts::Facts;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::Source;
use crate::syntax::{self, descendants, indent_at};
use crate::version::Change;

pub const PARAMS: &[ParamSpec] =
    &[ParamSpec { name: "factor", values: &["4", "2", "8"], doc: "iterations per unrolled step" }];

pub fn apply(src: &Source, _facts: &Facts, params: &Params) -> Applied {
    let factor = params.get(PARAMS, "factor").to_string();
    let t = src.text();
    super::per_kernel(src, params, |k| {
        let body = src.node(&k.body, "compound_statement").ok_or_else(|| NotApplicable::new("no body"))?;
        let mut change = Change::new(k);
        let mut n = 0;
        for f in descendants(body) {
            if !matches!(f.kind(), "for_statement" | "while_statement") {
                continue;
            }
            // Innermost loops only.
            if descendants(f).iter().skip(1).any(|d| syntax::is_loop(*d) && d.kind() != "switch_statement") {
                continue;
            }
            // Already under a pragma.
            if syntax::unroll_pragma(t, f).is_some() {
                continue;
            }
            // A loop that is the body of an if or another loop without braces: a pragma
            // there would need braces.
            if f.parent().is_some_and(|p| p.kind() != "compound_statement") {
                continue;
            }
            let ind = indent_at(t, f.start_byte());
            change.edits.insert(f.start_byte(), format!("#pragma unroll {factor}\n{ind}"));
            n += 1;
        }
        if n == 0 {
            return Err(NotApplicable::new(format!("`{}` has no innermost loop without an unroll pragma", k.name)));
        }
        Ok((change, format!("`{}`: #pragma unroll {factor} on {n} innermost loop(s)", k.name)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    const SRC: &str = r#"
__global__ void rowsum(const float* x, float* y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float s = 0.f;
  for (int c = 0; c < cols; ++c) s += x[r * cols + c];
  y[r] = s;
}
extern "C" void launch(const float* x, float* y, int rows, int cols, cudaStream_t st) {
  rowsum<<<(rows + 127) / 128, 128, 0, st>>>(x, y, rows, cols);
}
"#;

    #[test]
    fn innermost_loops_get_a_pragma_once() {
        let f = FactsBuilder::new("launch").build();
        let r = apply(&Source::parse(SRC), &f, &Params::default().with("factor", "8")).unwrap();
        assert!(r.source.contains("#pragma unroll 8\n  for (int c = 0;"), "{}", r.source);
        let e = apply(&Source::parse(&r.source), &f, &Params::default()).unwrap_err();
        assert!(e.0.contains("no innermost loop"), "{e}");
    }

    #[test]
    fn a_pragma_behind_a_comment_is_still_the_loops() {
        let f = FactsBuilder::new("launch").build();
        let src = SRC.replace("  for (int c = 0;", "  #pragma unroll 2\n  // two columns at a time\n  for (int c = 0;");
        let e = apply(&Source::parse(&src), &f, &Params::default()).unwrap_err();
        assert!(e.0.contains("no innermost loop"), "{e}");
    }
}
