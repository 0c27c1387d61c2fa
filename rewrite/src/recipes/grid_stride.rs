//! Grid-stride loops: a one-element-per-thread kernel behind a bounds check loops over
//! its elements with the grid's stride, and the launch is capped at a few blocks per SM
//! (the knob `NS_BLOCKS_PER_SM`). Fewer, longer-lived blocks pay block scheduling and
//! index set-up once per thread instead of once per element, and a grid of a whole
//! number of waves has no tail. Correct for any grid, so nothing is versioned.

use crate::facts::Facts;
use crate::helpers;
use crate::knobs::KNOB_MARK;
use crate::pattern::{self, Form};
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{indent_at, reindent};
use crate::version::Change;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "per_sm",
    values: &["8", "4", "16", "32"],
    doc: "blocks per SM the grid is capped at (the knob NS_BLOCKS_PER_SM starts here)",
}];

pub const KNOB: &str = "NS_BLOCKS_PER_SM";

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let per_sm = params.get(PARAMS, "per_sm").to_string();
    let mut knob_declared = src.defines(KNOB);
    super::per_kernel(src, params, |k| {
        let (mut c, n) = plan(src, facts, k)?;
        if !knob_declared {
            c.before = format!("{KNOB_MARK}{KNOB} = 4 8 16 32\n#ifndef {KNOB}\n#define {KNOB} {per_sm}\n#endif");
            knob_declared = true;
        }
        Ok((c, n))
    })
}

fn plan<'k>(src: &Source, _facts: &Facts, k: &'k Kernel) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    let e = pattern::elementwise(src, k)?;
    if e.form == Form::GridStride {
        return Err(NotApplicable::new(format!("`{}` is a grid-stride loop already", k.name)));
    }
    if src.node(&k.body, "compound_statement").is_some_and(|b| pattern::uses_2d_grid(t, b)) {
        return Err(NotApplicable::new(format!("`{}` reads the y or z grid coordinates", k.name)));
    }
    let ty = e.index_type.replace("const ", "").trim().to_string();
    let mut code = String::new();
    for (r, uses) in &e.between {
        if !uses {
            code.push_str(&t[r.clone()]);
            code.push('\n');
        }
    }
    let mut body = String::new();
    for (r, uses) in &e.between {
        if *uses {
            body.push_str(&t[r.clone()]);
            body.push('\n');
        }
    }
    for r in &e.body {
        body.push_str(&t[r.clone()]);
        body.push('\n');
    }
    code.push_str(&format!(
        "// nightshift: a grid-stride loop over the elements (the grid is capped at NS_BLOCKS_PER_SM blocks per SM).\nfor ({ty} {i} = {flat}; {i} < ({bound}); {i} += ({ty})gridDim.x * blockDim.x) {{\n  {}\n}}",
        reindent(body.trim_end(), "  "),
        i = e.index,
        flat = &t[e.flat.clone()],
        bound = e.bound,
    ));
    let mut change = Change::new(k);
    change.edits.replace(e.span.clone(), reindent(&code, &indent_at(t, e.span.start)));
    change.grid = Some(Box::new(|g: &str| format!("ns_grid_cap({g}, {KNOB})")));
    change.helpers.push(&helpers::GRID_CAP);
    Ok((change, format!("`{}`: a grid-stride loop on a grid of at most {KNOB} blocks per SM", k.name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    #[test]
    fn a_guarded_kernel_becomes_a_capped_grid_stride_loop() {
        let src = r#"
__global__ void relu(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = v > 0.f ? v : 0.f;
  }
}
extern "C" void launch(const float* x, float* y, long n, cudaStream_t s) {
  relu<<<(n + 511) / 512, 512, 0, s>>>(x, y, n);
}
"#;
        let r = apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &Params::default()).unwrap();
        let s = &r.source;
        assert!(s.contains("for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < (n); i += (long)gridDim.x * blockDim.x) {"), "{s}");
        assert!(s.contains("relu<<<ns_grid_cap((n + 511) / 512, NS_BLOCKS_PER_SM), 512, 0, s>>>(x, y, n);"), "{s}");
        assert!(s.contains("#define NS_BLOCKS_PER_SM 8"), "{s}");
        let knobs = crate::knobs(&Source::parse(s));
        assert!(knobs.iter().any(|k| k.name == KNOB && k.values.len() == 4));
        // Already a loop: nothing to do.
        let again = apply(&Source::parse(s), &FactsBuilder::new("launch").build(), &Params::default()).unwrap_err();
        assert!(again.0.contains("grid-stride loop already"), "{again}");
    }
}
