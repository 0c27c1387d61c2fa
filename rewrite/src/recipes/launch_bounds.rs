//! Launch bounds: `__launch_bounds__(BLOCK, MIN_BLOCKS)` on a kernel whose block size is a
//! compile-time constant, so ptxas budgets registers for MIN_BLOCKS resident blocks per SM
//! instead of guessing (a per-kernel register cap, finer than `-maxrregcount`). The bound
//! is the launch's own block expression, so a knob that moves the block moves it too.

use crate::facts::Facts;
use crate::knobs::macro_value;
use crate::pattern::int_literal;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::Source;
use crate::version::Change;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "min_blocks",
    values: &["2", "1", "4"],
    doc: "resident blocks per SM ptxas must leave room for",
}];

pub fn apply(src: &Source, _facts: &Facts, params: &Params) -> Applied {
    let min_blocks = params.get(PARAMS, "min_blocks").to_string();
    let t = src.text();
    super::per_kernel(src, params, |k| {
        if t[k.range.start..k.body.start].contains("__launch_bounds__") {
            return Err(NotApplicable::new(format!("`{}` has launch bounds already", k.name)));
        }
        let blocks: Vec<String> =
            src.launches_of(&k.name).iter().filter_map(|l| l.config.get(1).map(|b| b.trim().to_string())).collect();
        let Some(b) = blocks.first().cloned() else {
            return Err(NotApplicable::new(format!("`{}` has no launch with a block size", k.name)));
        };
        if blocks.iter().any(|x| *x != b) {
            return Err(NotApplicable::new(format!("`{}` is launched with different block sizes", k.name)));
        }
        let constant = int_literal(&b).is_some() || macro_value(src, &b).is_some_and(|v| int_literal(&v).is_some());
        if !constant {
            return Err(NotApplicable::new(format!(
                "the block size of `{}` (`{b}`) is not a compile-time constant",
                k.name
            )));
        }
        let mut change = Change::new(k);
        change.edits.insert(k.name_range.start, format!("__launch_bounds__({b}, {min_blocks}) "));
        Ok((change, format!("`{}`: __launch_bounds__({b}, {min_blocks})", k.name)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    #[test]
    fn constant_blocks_get_bounds_and_run_time_blocks_do_not() {
        let src = "#define BLOCK 256\n__global__ void k(float* y) { y[threadIdx.x] = 0; }\nextern \"C\" void launch(float* y, cudaStream_t s) { k<<<1, BLOCK, 0, s>>>(y); }";
        let f = FactsBuilder::new("launch").build();
        let r = apply(&Source::parse(src), &f, &Params::default()).unwrap();
        assert!(r.source.contains("__global__ void __launch_bounds__(BLOCK, 2) k(float* y)"), "{}", r.source);
        assert!(apply(&Source::parse(&r.source), &f, &Params::default()).unwrap_err().0.contains("already"));
        let rt = "__global__ void k(float* y) { y[threadIdx.x] = 0; }\nextern \"C\" void launch(float* y, int b, cudaStream_t s) { k<<<1, b, 0, s>>>(y); }";
        assert!(apply(&Source::parse(rt), &f, &Params::default()).unwrap_err().0.contains("compile-time"));
    }
}
