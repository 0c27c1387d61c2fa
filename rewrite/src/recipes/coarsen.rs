//! Coarse blocks: each block of a smaller grid does the work of `NS_COARSEN` blocks of the
//! original grid, one after the other (the knob `NS_COARSEN`). The kernel's body runs
//! unchanged once per block it stands in for, with that block's index (`blockIdx.x`
//! becomes the index it stands in for, `gridDim.x` the original grid's size, `return`
//! moves on to the next block), so any kernel whose blocks are independent keeps its
//! meaning: the set of blocks is the original grid's, and one thread running two of them
//! in turn is one of the orders the original allowed. Short blocks pay their scheduling,
//! set-up and tail once per `NS_COARSEN` blocks of work: on an H200 a vectorized
//! elementwise kernel of 8 elements a thread measured 12% faster at 2 or 4.
//!
//! Declines where blocks are not independent or the body could see the change: shared
//! memory, barriers, warp collectives, fences, `volatile`, inline assembly, lambdas,
//! kernel launches, a device function or macro that reads the block index or the grid's
//! size, a call the file does not define and no built-in list vouches for, and a kernel
//! used other than by `<<<...>>>` launches (its new parameter would go unpassed).

use crate::edit::Edits;
use crate::facts::Facts;
use crate::helpers;
use crate::knobs::KNOB_MARK;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params, Rewrite};
use crate::source::{Kernel, Source};
use crate::syntax::{descendants, has_barrier, has_warp_primitive, indent_at, mentions_word, reindent, text};
use crate::target_kernels;
use crate::version::{self, Change};
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "blocks",
    values: &["2", "4", "8"],
    doc: "blocks of the original grid each block does in turn (the knob NS_COARSEN starts here)",
}];

pub const KNOB: &str = "NS_COARSEN";

/// The names the rewrite adds to the kernel; a kernel that has one is coarse already or
/// would clash.
const BLOCK: &str = "ns_bx";
const GRID: &str = "ns_grid_x";
const STEP: &str = "ns_cb";
const NEXT: &str = "ns_coarse_next";

/// Words that make blocks depend on each other or on the threads beside them, in the
/// kernel or anything it calls.
const SHARED_STATE: &[&str] = &[
    "__shared__",
    "volatile",
    "__threadfence",
    "__threadfence_block",
    "__threadfence_system",
    "cooperative_groups",
    "this_grid",
    "this_thread_block",
    "grid_group",
    "thread_block",
    "__nanosleep",
    "clock",
    "clock64",
    "__globaltimer",
];

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let blocks = params.get(PARAMS, "blocks").to_string();
    let kernels = target_kernels(src, params)?;
    let mut changes = Vec::new();
    let mut notes = Vec::new();
    let mut why = Vec::new();
    let mut knob_declared = src.defines(KNOB);
    for k in &kernels {
        match plan(src, facts, k) {
            Ok((mut c, n)) => {
                if !knob_declared {
                    c.before = format!(
                        "{KNOB_MARK}{KNOB} = 2 4 8\n#ifndef {KNOB}\n#define {KNOB} {blocks}\n#endif\nstatic_assert({KNOB} >= 1, \"{KNOB} counts blocks: at least 1\");"
                    );
                    knob_declared = true;
                }
                changes.push(c);
                notes.push(n);
            }
            Err(e) => why.push(e.0),
        }
    }
    if changes.is_empty() {
        return Err(NotApplicable::new(why.join("; ")));
    }
    Ok(Rewrite { source: version::apply(src, changes)?, description: notes.join("; "), guards: Vec::new() })
}

fn plan<'k>(src: &Source, _facts: &Facts, k: &'k Kernel) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    let decline = |why: String| Err(NotApplicable::new(format!("`{}` {why}", k.name)));
    let Some(body) = src.node(&k.body, "compound_statement") else {
        return decline("has no body the recipe can read".into());
    };
    if k.has_error {
        return decline("does not parse cleanly".into());
    }
    let kernel_text = &t[k.range.clone()];
    if let Some(name) = [BLOCK, GRID, STEP, NEXT].into_iter().find(|n| mentions_word(kernel_text, n)) {
        return decline(format!("names `{name}` already (coarse blocks already, or a name the rewrite would add)"));
    }
    // The block index and grid size: only their x components change meaning, and only
    // where the kernel reads them itself.
    let mut edits = Edits::new();
    let mut reads_block = false;
    for d in descendants(body) {
        if d.kind() != "identifier" || !matches!(text(t, d), "blockIdx" | "gridDim") {
            continue;
        }
        let field =
            d.parent().filter(|p| p.kind() == "field_expression" && p.child_by_field_name("argument") == Some(d));
        let Some((obj, axis)) = field.and_then(|f| crate::syntax::builtin(t, f)) else {
            return decline(format!("uses `{}` other than by its .x, .y or .z", text(t, d)));
        };
        if axis == 'x' {
            let f = field.unwrap_or(d);
            reads_block |= obj == "blockIdx";
            edits.replace(
                f.start_byte() - k.body.start..f.end_byte() - k.body.start,
                if obj == "blockIdx" { BLOCK } else { GRID },
            );
        }
    }
    if !reads_block {
        return decline("does not read blockIdx.x: its blocks along x do the same work".into());
    }
    // Blocks must not share state or wait on each other, in the kernel or in what it calls.
    let region = reachable(src, body).map_err(|why| NotApplicable::new(format!("`{}` {why}", k.name)))?;
    for (what, n) in &region {
        if has_barrier(t, *n) {
            return decline(format!(
                "{what}synchronizes its block: coarse blocks would need a barrier between the blocks they run"
            ));
        }
        if has_warp_primitive(t, *n) {
            return decline(format!(
                "{what}uses warp collectives: a thread that left one block early would meet them in the next"
            ));
        }
        let words = &t[n.byte_range()];
        if let Some(w) = SHARED_STATE.iter().find(|w| mentions_word(words, w)) {
            return decline(format!("{what}uses `{w}`: its blocks may share state or wait on each other"));
        }
        for x in descendants(*n) {
            match x.kind() {
                "gnu_asm_expression" | "asm_statement" => {
                    return decline(format!("{what}has inline assembly, which may read the block index"))
                }
                "lambda_expression" => {
                    return decline(format!("{what}defines a lambda (a `return` there is not the kernel's)"))
                }
                _ => {}
            }
        }
        if !what.is_empty() && (mentions_word(words, "blockIdx") || mentions_word(words, "gridDim")) {
            return decline(format!("{what}reads the block index or the grid's size itself"));
        }
        if words.contains("<<<") {
            return decline(format!("{what}launches kernels"));
        }
    }
    for name in file_scope_shared(src) {
        if region.iter().any(|(_, n)| crate::syntax::mentions(t, *n, &name)) {
            return decline(format!("uses `{name}`, a `__shared__` variable of the file"));
        }
    }
    for (name, value) in crate::syntax::macro_definitions(t, src.root()) {
        let reads =
            ["blockIdx", "gridDim", "__syncthreads", "__shared__"].into_iter().find(|w| mentions_word(value, w));
        if let Some(w) = reads {
            if region.iter().any(|(_, n)| crate::syntax::mentions(t, *n, name)) {
                return decline(format!("uses the macro `{name}`, whose text names `{w}`"));
            }
        }
    }
    // The kernel's name elsewhere than its launches (a cudaLaunchKernel argument array, a
    // function pointer) would call it without the new parameter.
    let launches = src.launches_of(&k.name);
    for d in descendants(src.root()) {
        let at = d.start_byte();
        if d.kind() == "identifier"
            && text(t, d) == k.name
            && !k.range.contains(&at)
            && !launches.iter().any(|l| l.name_range.start == at)
        {
            return decline(
                "is named outside its `<<<...>>>` launches: a call that way would not pass the grid's size".into(),
            );
        }
    }
    for l in &launches {
        let grid = l.config.first().map(String::as_str).unwrap_or("");
        if grid.contains("++") || grid.contains("--") || assigns(grid) {
            return decline(format!(
                "is launched with the grid `{grid}`, which changes a variable: the rewrite evaluates it twice"
            ));
        }
    }
    // `return` leaves one block and moves on to the next.
    for r in crate::syntax::escapes(body) {
        if r.kind() == "return_statement" {
            edits.replace(r.start_byte() - k.body.start..r.end_byte() - k.body.start, format!("goto {NEXT};"));
        }
    }
    let rewritten = edits
        .apply(&t[k.body.clone()])
        .map_err(|_| NotApplicable::new(format!("`{}`: two edits of its body overlap", k.name)))?;
    let rewritten_inner = &rewritten[1..rewritten.len() - 1];
    let ind = indent_at(t, k.range.start);
    let step = format!("{ind}  ");
    let code = format!(
        "{{\n{step}// nightshift: this block does the work of {KNOB} blocks of the original grid, one after the other.\n\
         {step}#pragma unroll\n\
         {step}for (unsigned {STEP} = 0; {STEP} < {KNOB}; ++{STEP}) {{\n\
         {step}  const unsigned {BLOCK} = blockIdx.x * {KNOB} + {STEP};\n\
         {step}  if ({BLOCK} >= {GRID}) break;\n\
         {step}  {{{}\n{step}  }}\n\
         {step}  {NEXT}:;\n\
         {step}}}\n{ind}}}",
        reindent(rewritten_inner.trim_end(), &format!("{step}  ")),
    );
    let mut change = Change::new(k);
    change.edits.replace(k.body.clone(), code);
    let param = if k.params.is_empty() { format!("unsigned {GRID}") } else { format!(", unsigned {GRID}") };
    if k.params.is_empty() {
        change.edits.replace(k.params_range.start + 1..k.params_range.end - 1, param);
    } else {
        change.edits.insert(k.params_range.end - 1, param);
    }
    change.extra_args.push("(unsigned){@grid}".into());
    change.grid = Some(Box::new(|g: &str| format!("ns_coarse_grid({g}, {KNOB})")));
    change.helpers.push(&helpers::COARSE_GRID);
    Ok((change, format!("`{}`: each block does {KNOB} blocks' work along x in turn", k.name)))
}

/// Whether an expression assigns (`=`, `+=`...), as opposed to comparing.
fn assigns(e: &str) -> bool {
    let b = e.as_bytes();
    (0..b.len()).any(|i| {
        b[i] == b'=' && b.get(i + 1) != Some(&b'=') && !(i > 0 && matches!(b[i - 1], b'=' | b'!' | b'<' | b'>'))
            || (i > 1 && b[i] == b'=' && matches!(&b[i - 2..i], b"<<" | b">>"))
    })
}

/// The names `__shared__` declarations outside any function declare.
fn file_scope_shared(src: &Source) -> Vec<String> {
    let t = src.text();
    descendants(src.root())
        .into_iter()
        .filter(|d| d.kind() == "declaration" && mentions_word(text(t, *d), "__shared__"))
        .filter(|d| {
            let mut p = d.parent();
            while let Some(x) = p {
                if x.kind() == "function_definition" {
                    return false;
                }
                p = x.parent();
            }
            true
        })
        .flat_map(|d| crate::syntax::identifiers(t, d).into_iter().map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// The kernel's body and the bodies of every function of the file it calls, directly or
/// through others, each with how a decline names it. A call of anything else must be a
/// built-in that computes a value, loads, stores or adds atomically.
fn reachable<'t>(src: &'t Source, body: Node<'t>) -> Result<Vec<(String, Node<'t>)>, String> {
    let t = src.text();
    // Every function definition of the file by name, helpers behind `#ifndef` guards and
    // templates included.
    let functions: Vec<(&str, Node)> = descendants(src.root())
        .into_iter()
        .filter(|d| d.kind() == "function_definition")
        .filter_map(|f| {
            let mut d = f.child_by_field_name("declarator")?;
            while d.kind() != "function_declarator" {
                d = d.child_by_field_name("declarator")?;
            }
            Some((text(t, d.child_by_field_name("declarator")?), f.child_by_field_name("body")?))
        })
        .collect();
    let function_macros: Vec<&str> = descendants(src.root())
        .into_iter()
        .filter(|d| d.kind() == "preproc_function_def")
        .filter_map(|d| d.child_by_field_name("name").map(|n| text(t, n)))
        .collect();
    let mut out = vec![(String::new(), body)];
    let mut seen: Vec<String> = Vec::new();
    let mut i = 0;
    while i < out.len() {
        let n = out[i].1;
        i += 1;
        for call in descendants(n).into_iter().filter(|d| d.kind() == "call_expression") {
            let Some(f) = call.child_by_field_name("function") else { continue };
            let name = match f.kind() {
                "identifier" => text(t, f),
                "template_function" => f.child_by_field_name("name").map(|x| text(t, x)).unwrap_or(""),
                _ => return Err(format!("calls `{}`, which the recipe cannot follow", text(t, f))),
            };
            if seen.iter().any(|s| s == name) {
                continue;
            }
            seen.push(name.to_string());
            let defined: Vec<Node> = functions.iter().filter(|(n, _)| *n == name).map(|(_, b)| *b).collect();
            if !defined.is_empty() {
                for b in defined {
                    out.push((format!("calls `{name}`, which "), b));
                }
            } else if function_macros.contains(&name) {
                // Its text is checked with the file's other macros.
            } else if !(super::speculate::value_builtin(name)
                || name.starts_with("atomic")
                || name.starts_with("__st")
                || matches!(name, "static_cast" | "reinterpret_cast" | "const_cast"))
            {
                return Err(format!(
                    "calls `{name}`, which this file does not define and is no built-in the recipe knows: it may read the block index"
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    fn coarsen(src: &str) -> Result<String, String> {
        apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &Params::default())
            .map(|r| r.source)
            .map_err(|e| e.0)
    }

    const RELU: &str = r#"
__global__ void relu(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = x[i] > 0.f ? x[i] : 0.f;
}
extern "C" void launch(const float* x, float* y, int n, cudaStream_t s) {
  relu<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
}
"#;

    #[test]
    fn each_block_does_the_work_of_several_in_turn() {
        let s = coarsen(RELU).unwrap();
        assert!(s.contains("__global__ void relu(const float* x, float* y, int n, unsigned ns_grid_x) {"), "{s}");
        assert!(s.contains("for (unsigned ns_cb = 0; ns_cb < NS_COARSEN; ++ns_cb) {"), "{s}");
        assert!(s.contains("const unsigned ns_bx = blockIdx.x * NS_COARSEN + ns_cb;"), "{s}");
        assert!(s.contains("if (ns_bx >= ns_grid_x) break;"), "{s}");
        assert!(s.contains("int i = ns_bx * blockDim.x + threadIdx.x;"), "{s}");
        assert!(s.contains("if (i >= n) goto ns_coarse_next;"), "{s}");
        assert!(s.contains("ns_coarse_next:;"), "{s}");
        assert!(
            s.contains("relu<<<ns_coarse_grid((n + 255) / 256, NS_COARSEN), 256, 0, s>>>(x, y, n, (unsigned)((n + 255) / 256));"),
            "{s}"
        );
        assert!(s.contains("#define NS_COARSEN 2") && s.contains("inline unsigned ns_coarse_grid("), "{s}");
        let knobs = crate::knobs(&Source::parse(&s));
        assert!(knobs.iter().any(|k| k.name == KNOB && k.values.len() == 3), "{knobs:?}");
        // Once is enough.
        let again = coarsen(&s).unwrap_err();
        assert!(again.contains("names `ns_bx` already"), "{again}");
    }

    #[test]
    fn a_dim3_grid_keeps_y_and_the_grid_size_is_the_original() {
        let src = r#"
__global__ void add2d(float* y, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  int stride = gridDim.x * blockDim.x;
  for (int c = x; c < w; c += stride) y[r * w + c] += 1.f;
}
extern "C" void launch(float* y, int w, int h, cudaStream_t s) {
  dim3 grid((w + 127) / 128, h);
  add2d<<<grid, 128, 0, s>>>(y, w, h);
}
"#;
        let s = coarsen(src).unwrap();
        assert!(s.contains("int x = ns_bx * blockDim.x + threadIdx.x, r = blockIdx.y;"), "{s}");
        assert!(s.contains("int stride = ns_grid_x * blockDim.x;"), "{s}");
        assert!(s.contains("add2d<<<dim3(ns_coarse_grid((grid).x, NS_COARSEN), (grid).y, (grid).z), 128, 0, s>>>(y, w, h, (unsigned)((grid).x));"), "{s}");
    }

    #[test]
    fn blocks_that_share_state_or_could_see_the_change_are_left_alone() {
        let cases: &[(&str, &str)] = &[
            ("__shared__ float t[256]; t[threadIdx.x] = x[i]; y[i] = t[threadIdx.x];", "uses `__shared__`"),
            ("y[i] = x[i]; __syncthreads();", "synchronizes its block"),
            ("y[i] = __shfl_down_sync(0xffffffffu, x[i], 1);", "warp collectives"),
            ("y[i] = x[i]; __threadfence();", "uses `__threadfence`"),
            ("volatile float* v = y; v[i] = x[i];", "uses `volatile`"),
            ("asm volatile(\"\"); y[i] = x[i];", "uses `volatile`"),
            ("y[i] = gid() + x[i];", "reads the block index or the grid's size itself"),
            ("y[i] = GID + x[i];", "the macro `GID`"),
            ("y[i] = helper(x[i]);", "calls `helper`, which this file does not define"),
            ("auto f = [&]() { return 1.f; }; y[i] = x[i];", "lambda"),
            ("auto f = [&]() { return 1.f; }; y[i] = f();", "calls `f`, which this file does not define"),
            ("uint3 b = blockIdx; y[i] = x[b.x];", "uses `blockIdx` other than by its .x"),
        ];
        for (stmt, says) in cases {
            let src = format!(
                "#define GID (blockIdx.x * blockDim.x)\n__device__ int gid() {{ return blockIdx.x; }}\n\
                 __global__ void k(const float* x, float* y, int n) {{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n  {stmt}\n}}\n\
                 extern \"C\" void launch(const float* x, float* y, int n, cudaStream_t s) {{\n  k<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);\n}}\n"
            );
            let why = coarsen(&src).unwrap_err();
            assert!(why.contains(says), "{stmt}: {why}");
        }
        // The kernel's name used otherwise than by a launch.
        let src = RELU.replace("relu<<<", "void* f = (void*)relu; relu<<<");
        assert!(coarsen(&src).unwrap_err().contains("named outside its `<<<...>>>` launches"));
        // A grid that assigns.
        let src = RELU.replace("relu<<<(n + 255) / 256,", "int g; relu<<<(g = (n + 255) / 256),");
        assert!(coarsen(&src).unwrap_err().contains("changes a variable"));
        // Nothing to coarsen: every block does the same work.
        let src = RELU.replace("blockIdx.x * blockDim.x + threadIdx.x", "threadIdx.x");
        assert!(coarsen(&src).unwrap_err().contains("does not read blockIdx.x"));
    }

    #[test]
    fn helpers_of_the_file_and_builtins_are_followed() {
        let src = r#"
__device__ __forceinline__ float silu(float v) { return v / (1.0f + __expf(-v)); }
__global__ void act(const float* x, float* y, float* total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float v = silu(__ldg(&x[i])); y[i] = fmaxf(v, 0.f); atomicAdd(total, v); }
}
extern "C" void launch(const float* x, float* y, float* total, int n, cudaStream_t s) {
  act<<<(n + 255) / 256, 256, 0, s>>>(x, y, total, n);
}
"#;
        let s = coarsen(src).unwrap();
        assert!(s.contains("int i = ns_bx * blockDim.x + threadIdx.x;"), "{s}");
        let bad = src.replace("return v / (1.0f + __expf(-v));", "return v + blockIdx.x;");
        assert!(coarsen(&bad).unwrap_err().contains("calls `silu`, which reads the block index"));
        let deeper = src
            .replace(
                "__device__ __forceinline__ float silu",
                "__device__ float inner() { return gridDim.x; }\n__device__ __forceinline__ float silu",
            )
            .replace("__expf(-v)", "__expf(-v) + inner()");
        assert!(
            coarsen(&deeper).unwrap_err().contains("calls `inner`, which reads"),
            "{}",
            coarsen(&deeper).unwrap_err()
        );
    }
}
