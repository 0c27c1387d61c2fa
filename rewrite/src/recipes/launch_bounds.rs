//! Launch bounds: `__launch_bounds__(BLOCK, NS_MIN_BLOCKS)` on a kernel whose block size is
//! a compile-time constant, so ptxas budgets registers for NS_MIN_BLOCKS resident blocks per
//! SM instead of guessing (a per-kernel register cap, finer than `-maxrregcount`, which the
//! bound overrides). The block may be a literal, a macro, a constant or a `dim3` of them
//! ([`crate::launch`]); the bound names what the kernel can see of it (a macro or
//! file-scope constant by name, so a knob that moves the block moves the bound too; a
//! launcher's constant by its initializer), and a `dim3` bound is the product of its
//! components. The blocks per SM are a file-wide knob, `NS_MIN_BLOCKS`, not a literal: a
//! rewrite that needs more registers (a prefetch into registers, tensor-core fragments)
//! can then loosen a bound its parent found, where a literal would hold it to a budget that
//! spills (on an H200 a linear layer's prefetch held to two blocks of 256 threads spilled
//! 1232 bytes and ran 2.2x slower than at one).

use crate::facts::Facts;
use crate::knobs::RecipeKnob;
use crate::launch::{self, Dims, Size};
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::version::Change;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "min_blocks",
    values: &["2", "1", "4"],
    doc: "resident blocks per SM ptxas must leave room for (the knob NS_MIN_BLOCKS starts here)",
}];

pub const KNOB: &str = "NS_MIN_BLOCKS";
const MIN_BLOCKS: RecipeKnob =
    RecipeKnob { name: KNOB, param: "min_blocks", values: "1 2 4", counts: "resident blocks per SM" };

pub fn apply(src: &Source, _facts: &Facts, params: &Params) -> Applied {
    let min_blocks = params.get(PARAMS, "min_blocks").to_string();
    let t = src.text();
    let mut knob_declared = src.defines(KNOB);
    super::per_kernel(src, params, |k| {
        if t[k.range.start..k.body.start].contains("__launch_bounds__") {
            return Err(NotApplicable::new(format!("`{}` has launch bounds already", k.name)));
        }
        MIN_BLOCKS.usable_at(src, k, "bound every kernel of the file", &min_blocks)?;
        let mut bounds: Vec<(String, Option<i64>)> = Vec::new();
        for l in src.launches_of(&k.name) {
            let Some(block) = launch::block(src, &l) else {
                return Err(NotApplicable::new(format!("`{}` has a launch with no block size", k.name)));
            };
            let b = (thread_count(src, k, &block)?, block.threads());
            if !bounds.contains(&b) {
                bounds.push(b);
            }
        }
        let b = largest(bounds)
            .ok_or_else(|| NotApplicable::new(format!("`{}` has no launch with a block size", k.name)))?;
        let mut change = Change::new(k);
        change.edits.insert(k.name_range.start, format!("__launch_bounds__({b}, {KNOB}) "));
        if !knob_declared {
            change.before = MIN_BLOCKS.declaration(&min_blocks);
            knob_declared = true;
        }
        Ok((change, format!("`{}`: __launch_bounds__({b}, {KNOB} = {min_blocks})", k.name)))
    })
}

/// One bound that holds every launch's block: the largest where all are numbers, else
/// the larger of each pair as the compiler works it out, so that a knob moving one of
/// them keeps the bound true.
fn largest(bounds: Vec<(String, Option<i64>)>) -> Option<String> {
    let literal = |e: &str| e.chars().all(|c| c.is_ascii_digit());
    if bounds.iter().all(|(e, _)| literal(e)) {
        return bounds.into_iter().max_by_key(|(_, v)| *v).map(|(e, _)| e);
    }
    bounds.into_iter().map(|(e, _)| e).reduce(|a, b| format!("(({a}) > ({b}) ? ({a}) : ({b}))"))
}

/// The block's thread count as an expression the kernel's definition can see (a recipe
/// that tiles warps over the block needs it at compile time too).
pub(crate) fn thread_count(src: &Source, k: &Kernel, block: &Dims) -> Result<String, NotApplicable> {
    let t = src.text();
    let not_constant = |why: String| {
        NotApplicable::new(format!("the block size of `{}` is not a compile-time constant: {why}", k.name))
    };
    let at_kernel = |what: &str, size: &Size| {
        size.at_file_scope(t, k.range.start).map_err(|why| match size.run_time() {
            Some(_) => not_constant(why),
            None => NotApplicable::new(format!(
                "the block size of `{}` is {what}, but `__launch_bounds__` cannot name it: {why}",
                k.name
            )),
        })
    };
    match block {
        Dims::Scalar(c) => at_kernel(&format!("`{}`", c.text), &c.size),
        Dims::Dim3(_) => {
            let mut factors = Vec::new();
            for (axis, c) in block.varying() {
                let what = format!("`{}` ({} of the block)", c.text, launch::AXES[axis]);
                let e = at_kernel(&what, &c.size)?;
                let simple = e.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
                factors.push(if simple || block.varying().len() == 1 { e } else { format!("({e})") });
            }
            Ok(match factors.len() {
                0 => "1".to_string(),
                1 => factors.remove(0),
                _ => format!("({})", factors.join(" * ")),
            })
        }
        Dims::Unknown { expr, why } => Err(not_constant(format!("`{expr}` is {why}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    fn run(src: &str) -> Applied {
        apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &Params::default())
    }

    /// A kernel launched from `body`, after `prelude`.
    fn launched(prelude: &str, body: &str) -> String {
        format!("{prelude}__global__ void k(float* y) {{ y[threadIdx.x] = 0; }}\nextern \"C\" void launch(float* y, int n, int b, cudaStream_t s) {{\n{body}\n}}\n")
    }

    fn bound_of(src: &str) -> String {
        run(src).map(|r| r.description).unwrap_or_else(|e| format!("declined: {e}"))
    }

    #[test]
    fn constant_blocks_get_bounds_and_run_time_blocks_do_not() {
        let src = "#define BLOCK 256\n__global__ void k(float* y) { y[threadIdx.x] = 0; }\nextern \"C\" void launch(float* y, cudaStream_t s) { k<<<1, BLOCK, 0, s>>>(y); }";
        let r = run(src).unwrap();
        assert!(
            r.source.contains("__global__ void __launch_bounds__(BLOCK, NS_MIN_BLOCKS) k(float* y)"),
            "{}",
            r.source
        );
        assert_eq!(run(&r.source).unwrap_err().0, "`k` has launch bounds already");
        assert_eq!(
            run(&launched("", "  k<<<n, b, 0, s>>>(y);")).unwrap_err().0,
            "the block size of `k` is not a compile-time constant: `b` is a parameter of `launch`"
        );
    }

    #[test]
    fn constants_bound_by_name_where_the_kernel_sees_them_else_by_value() {
        // A launcher's constant is out of the kernel's sight: its initializer is the bound.
        let local = launched("", "  const int threads = 256;\n  k<<<(n + threads - 1) / threads, threads, 0, s>>>(y);");
        assert_eq!(bound_of(&local), "`k`: __launch_bounds__(256, NS_MIN_BLOCKS = 2)");
        assert_eq!(
            bound_of(&local.replace("const int", "constexpr int")),
            "`k`: __launch_bounds__(256, NS_MIN_BLOCKS = 2)"
        );
        let r = run(&local).unwrap();
        assert!(r.source.contains("__global__ void __launch_bounds__(256, NS_MIN_BLOCKS) k(float* y)"), "{}", r.source);
        // One at file scope above the kernel is named, so a knob made of it moves the bound.
        assert_eq!(
            bound_of(&launched("constexpr int kBlock = 128;\n", "  k<<<n, kBlock, 0, s>>>(y);")),
            "`k`: __launch_bounds__(kBlock, NS_MIN_BLOCKS = 2)"
        );
        assert_eq!(
            bound_of(&launched(
                "#define WARP 32\n",
                "  static const int warps = 4;\n  k<<<n, warps * WARP, 0, s>>>(y);"
            )),
            "`k`: __launch_bounds__(4 * WARP, NS_MIN_BLOCKS = 2)"
        );
    }

    #[test]
    fn dim3_blocks_are_bound_by_the_product_of_their_components() {
        assert_eq!(
            bound_of(&launched("", "  dim3 block(16, 16);\n  k<<<n, block, 0, s>>>(y);")),
            "`k`: __launch_bounds__((16 * 16), NS_MIN_BLOCKS = 2)"
        );
        assert_eq!(
            bound_of(&launched("#define BX 32\n#define BY 8\n", "  dim3 block(BX, BY);\n  k<<<n, block, 0, s>>>(y);")),
            "`k`: __launch_bounds__((BX * BY), NS_MIN_BLOCKS = 2)"
        );
        assert_eq!(
            bound_of(&launched("", "  k<<<n, dim3(256, 1), 0, s>>>(y);")),
            "`k`: __launch_bounds__(256, NS_MIN_BLOCKS = 2)"
        );
        assert_eq!(
            bound_of(&launched("", "  dim3 block(32, b);\n  k<<<n, block, 0, s>>>(y);")),
            "declined: the block size of `k` is not a compile-time constant: `b` is a parameter of `launch`"
        );
    }

    #[test]
    fn declines_say_what_the_block_is() {
        assert_eq!(
            bound_of(&launched("", "  int threads = n > 4096 ? 256 : 64;\n  k<<<n, threads, 0, s>>>(y);")),
            "declined: the block size of `k` is not a compile-time constant: `threads` is computed when the launcher runs (`int threads = n > 4096 ? 256 : 64;`)"
        );
        assert_eq!(
            bound_of(&launched("", "  k<<<n, kThreads, 0, s>>>(y);")),
            "declined: the block size of `k` is not a compile-time constant: `kThreads` is declared nowhere in this file"
        );
        let late = "__global__ void k(float* y) { y[threadIdx.x] = 0; }\n#define LATE 64\nvoid launch(float* y, cudaStream_t s) { k<<<1, LATE, 0, s>>>(y); }\n";
        assert_eq!(
            bound_of(late),
            "declined: the block size of `k` is `LATE`, but `__launch_bounds__` cannot name it: the macro `LATE` is defined only below it"
        );
    }

    #[test]
    fn the_blocks_per_sm_are_one_knob_declared_above_the_first_kernel_bound() {
        let src = "__global__ void a(float* y) { y[0] = 0; }\n__global__ void b(float* y) { y[1] = 0; }\n\
                   void run(float* y, cudaStream_t s) { a<<<1, 128, 0, s>>>(y); b<<<1, 256, 0, s>>>(y); }\n";
        let params = Params::default().with("min_blocks", "1");
        let r = apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &params).unwrap();
        assert!(
            r.source.starts_with(
                "// nightshift: knob NS_MIN_BLOCKS = 1 2 4\n#ifndef NS_MIN_BLOCKS\n#define NS_MIN_BLOCKS 1\n#endif\n\
                 static_assert(NS_MIN_BLOCKS >= 1, \"NS_MIN_BLOCKS counts resident blocks per SM: at least 1\");\n"
            ),
            "{}",
            r.source
        );
        assert_eq!(r.source.matches("#define NS_MIN_BLOCKS").count(), 1, "{}", r.source);
        assert!(r.source.contains("__global__ void __launch_bounds__(128, NS_MIN_BLOCKS) a("), "{}", r.source);
        assert!(r.source.contains("__global__ void __launch_bounds__(256, NS_MIN_BLOCKS) b("), "{}", r.source);
        // The tuner reads it as a knob of the file, at the parameter's value.
        let knob = crate::knobs::knobs(&Source::parse(&r.source)).into_iter().find(|k| k.name == KNOB).unwrap();
        assert_eq!((knob.values, knob.default.as_deref()), (vec!["1".into(), "2".into(), "4".into()], Some("1")));
        // Once the file has the knob, a kernel bound later takes it as it stands: another
        // value of the parameter would build the same kernel.
        let facts = FactsBuilder::new("launch").build();
        let first = apply(&Source::parse(src), &facts, &Params::default().with("kernel", "a")).unwrap().source;
        let later = |blocks: &str| {
            apply(&Source::parse(&first), &facts, &Params::default().with("kernel", "b").with("min_blocks", blocks))
        };
        assert_eq!(
            later("1").unwrap_err().0,
            "the file's `NS_MIN_BLOCKS` knob stands at 2: `min_blocks=2` uses it as it is"
        );
        let both = later("2").unwrap().source;
        assert!(both.contains("__launch_bounds__(256, NS_MIN_BLOCKS) b("), "{both}");
        assert_eq!(both.matches("#define NS_MIN_BLOCKS").count(), 1, "{both}");
        // A file that defines the name itself keeps its own meaning.
        let own = format!("#define NS_MIN_BLOCKS 3\n{src}");
        assert_eq!(
            run(&own).unwrap_err().0,
            "the file defines `NS_MIN_BLOCKS` itself, not as this recipe's knob; \
                   the file defines `NS_MIN_BLOCKS` itself, not as this recipe's knob"
        );
    }

    #[test]
    fn several_launches_share_the_largest_bound() {
        assert_eq!(
            bound_of(&launched("", "  k<<<n, 128, 0, s>>>(y);\n  k<<<n, 256, 0, s>>>(y);")),
            "`k`: __launch_bounds__(256, NS_MIN_BLOCKS = 2)"
        );
        assert_eq!(
            bound_of(&launched("#define B 64\n", "  k<<<n, 256, 0, s>>>(y);\n  k<<<n, B, 0, s>>>(y);")),
            "`k`: __launch_bounds__(((256) > (B) ? (256) : (B)), NS_MIN_BLOCKS = 2)"
        );
    }
}
