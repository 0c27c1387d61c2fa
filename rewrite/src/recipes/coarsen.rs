//! Coarse blocks: each block of a smaller grid does the work of `NS_COARSEN` blocks of the
//! original grid, one after the other (the knob `NS_COARSEN`). The kernel's body runs
//! unchanged once per block it stands in for, with that block's index (`blockIdx.x`
//! becomes the index it stands in for, `gridDim.x` the original grid's size, `return`
//! moves on to the next block), so any kernel whose blocks are independent keeps its
//! meaning: the set of blocks is the original grid's, and one thread running two of them
//! in turn is one of the orders the original allowed. The launcher computes the grid once,
//! for the launch and for the blocks it stands for. Short blocks pay their scheduling,
//! set-up and tail once per `NS_COARSEN` blocks of work: on an H200 a vectorized
//! elementwise kernel of 8 elements a thread measured 12% faster at 2 or 4.
//!
//! Declines where blocks are not independent or the body could see the change: shared
//! memory, barriers, warp collectives, fences, `volatile`, inline assembly, lambdas, local
//! classes, kernel launches, waits on other blocks as they are written (an atomic whose
//! result is used, a cache-bypassing load); a file that reads the block index or the
//! grid's size anywhere but in a kernel's body (a helper, a class, an operator, a macro),
//! since code the kernel runs without naming it could read it; a call the file does not
//! define and no built-in list vouches for; a kernel named other than by its `<<<...>>>`
//! launches (its new parameter would go unpassed), or whose parameter list ends in a
//! default argument or a pack.

use crate::edit::Edits;
use crate::facts::Facts;
use crate::helpers;
use crate::knobs::RecipeKnob;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{descendants, has_barrier, has_warp_primitive, indent_at, mentions_word, reindent, text};
use crate::version::Change;
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "blocks",
    values: &["2", "4", "8"],
    doc: "blocks of the original grid each block does in turn (the knob NS_COARSEN starts here)",
}];

pub const KNOB: &str = "NS_COARSEN";
const COARSEN: RecipeKnob = RecipeKnob { name: KNOB, param: "blocks", values: "2 4 8", counts: "blocks" };

/// The names the rewrite adds to the kernel; a kernel that has one is coarse already or
/// would clash.
const BLOCK: &str = "ns_bx";
pub(super) const GRID: &str = "ns_grid_x";
const STEP: &str = "ns_cb";
const NEXT: &str = "ns_coarse_next";
const LAUNCH_GRID: &str = "ns_coarse_g";
/// Every name the rewrite adds to the file, helpers included.
const ADDED: &[&str] =
    &[BLOCK, GRID, STEP, NEXT, LAUNCH_GRID, "ns_coarse_grid", "ns_coarse_grid3", "NIGHTSHIFT_COARSE_GRID"];

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
    let mut knob_declared = src.defines(KNOB);
    super::per_kernel(src, params, |k| {
        let (mut c, n) = COARSEN
            .usable_at(src, k, "coarsen every kernel of the file", &blocks)
            .and_then(|()| plan(src, facts, k))?;
        if !knob_declared {
            c.before = COARSEN.declaration(&blocks);
            knob_declared = true;
        }
        Ok((c, n))
    })
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
    if let Some(name) = ADDED.iter().find(|n| mentions_word(t, n)) {
        return decline(format!(
            "shares its file with `{name}`, a name the rewrite adds (coarse blocks already, or a clash)"
        ));
    }
    let params = src.node_at(&k.params_range);
    if params.is_some_and(|p| {
        crate::syntax::named_children(p)
            .iter()
            .any(|c| matches!(c.kind(), "optional_parameter_declaration" | "variadic_parameter_declaration"))
    }) || t[k.params_range.clone()].contains("...")
    {
        return decline("has a default argument or a parameter pack, after which no parameter can be added".into());
    }
    if descendants(body).iter().any(|d| {
        matches!(d.kind(), "class_specifier" | "struct_specifier" | "union_specifier")
            && d.child_by_field_name("body").is_some()
    }) {
        return decline("defines a class in its body (a `return` in its members is not the kernel's)".into());
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
        if axis == 'x' && !field.is_some_and(crate::syntax::unevaluated) {
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
        if let Some(w) = waits_on_other_blocks(t, *n) {
            return decline(format!(
                "{what}reads what other blocks may write while it runs ({w}): blocks that wait on each other \
                 would wait forever once one thread runs them in turn"
            ));
        }
        if words.contains("<<<") {
            return decline(format!("{what}launches kernels"));
        }
    }
    if let Some(place) = block_index_outside_kernels(src) {
        return decline(format!(
            "shares its file with {place}, which reads the block index or the grid's size outside a kernel's own \
             body (a helper, constructor, operator or macro the rewrite would not see change)"
        ));
    }
    for name in file_scope_shared(src) {
        if region.iter().any(|(_, n)| crate::syntax::mentions(t, *n, &name)) {
            return decline(format!("uses `{name}`, a `__shared__` variable of the file"));
        }
    }
    // Macros: any that names a barrier, shared memory or a warp collective, or launches
    // this kernel, wherever it is used (through other macros too); any used in the kernel
    // that leaves it.
    for (name, value) in crate::syntax::macro_definitions(t, src.root()) {
        let reads = ["__syncthreads", "__shared__", "__syncwarp", "__shfl_sync", "__shfl_xor_sync", "__ballot_sync"]
            .into_iter()
            .find(|w| mentions_word(value, w));
        if let Some(w) = reads {
            return decline(format!("shares its file with the macro `{name}`, whose text names `{w}`"));
        }
        if mentions_word(value, &k.name) {
            return decline(format!("is named in the macro `{name}`: a launch there would not pass the grid's size"));
        }
    }
    for (name, kw) in crate::syntax::jump_macros(t, src.root()) {
        if crate::syntax::mentions(t, body, &name) {
            return decline(format!("invokes `{name}`, a macro that hides a `{kw}`"));
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

    // `return` leaves one block and moves on to the next; `return f(...);` still calls f.
    for r in crate::syntax::escapes(body) {
        if r.kind() == "return_statement" {
            let jump = match r.named_child(0).filter(|e| e.kind() != "comment") {
                Some(e) => format!("{{ (void)({}); goto {NEXT}; }}", text(t, e)),
                None => format!("goto {NEXT};"),
            };
            edits.replace(r.start_byte() - k.body.start..r.end_byte() - k.body.start, jump);
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
    for l in &launches {
        let (r, code) = coarse_launch(src, l).map_err(|why| NotApplicable::new(format!("`{}` {why}", k.name)))?;
        change.edits.replace(r, code);
    }
    change.helpers.push(&helpers::COARSE_GRID);
    Ok((change, format!("`{}`: each block does {KNOB} blocks' work along x in turn", k.name)))
}

/// One launch as a block that evaluates its grid once, launches a grid `NS_COARSEN` times
/// smaller and passes the original grid's x size.
fn coarse_launch(src: &Source, l: &crate::source::Launch) -> Result<(std::ops::Range<usize>, String), String> {
    let t = src.text();
    let grid_range = l.config_ranges.first().ok_or("is launched without a grid")?;
    if matches!(crate::launch::grid(src, l), None | Some(crate::launch::Dims::Unknown { .. })) {
        return Err(format!(
            "is launched with the grid `{}`, whose type (a number or a dim3) the file does not show",
            &t[grid_range.clone()]
        ));
    }
    // The statement must be the launch alone, so its grid may be computed first.
    let stmt = &t[l.stmt.clone()];
    let tail = t[l.args_range.end..l.stmt.end].trim();
    if l.name_range.start < l.stmt.start || !stmt.trim_start().starts_with(&t[l.name_range.clone()]) || tail != ";" {
        return Err(format!("is launched inside a larger statement: `{}`", stmt.trim()));
    }
    let base = l.stmt.start;
    let mut e = Edits::new();
    e.replace(grid_range.start - base..grid_range.end - base, format!("ns_coarse_grid3({LAUNCH_GRID}, {KNOB})"));
    let sep = if l.args.is_empty() { "" } else { ", " };
    e.insert(l.args_range.end - 1 - base, format!("{sep}{LAUNCH_GRID}.x"));
    let launch = e.apply(stmt).map_err(|_| "has a launch the rewrite cannot edit".to_string())?;
    let ind = indent_at(t, l.stmt.start);
    let code = format!(
        "{{
{ind}  const dim3 {LAUNCH_GRID} = ({});
{ind}  {}
{ind}}}",
        &t[grid_range.clone()],
        reindent(launch.trim(), &format!("{ind}  "))
    );
    Ok((l.stmt.clone(), code))
}

/// A read of memory other blocks may write while this one runs, as a wait on them is
/// written: an atomic whose result is used, or a load that bypasses the caches.
fn waits_on_other_blocks(t: &str, n: Node) -> Option<String> {
    descendants(n).into_iter().find_map(|d| {
        let f = d.child_by_field_name("function").filter(|_| d.kind() == "call_expression")?;
        let name = text(t, f);
        if matches!(name, "__ldcv" | "__ldlu") {
            return Some(format!("`{name}`"));
        }
        let used = d.parent().is_some_and(|p| p.kind() != "expression_statement");
        (name.starts_with("atomic") && used).then(|| format!("`{name}`'s result"))
    })
}

/// Where the file names `blockIdx` or `gridDim` other than in a kernel's body: a device
/// function, a class, an operator, a macro, a global's initializer.
fn block_index_outside_kernels(src: &Source) -> Option<String> {
    let t = src.text();
    for (name, value) in crate::syntax::macro_definitions(t, src.root()) {
        if mentions_word(value, "blockIdx") || mentions_word(value, "gridDim") {
            return Some(format!("the macro `{name}`"));
        }
    }
    let kernels = src.kernels();
    for d in descendants(src.root()) {
        if d.kind() != "identifier" || !matches!(text(t, d), "blockIdx" | "gridDim") {
            continue;
        }
        let at = d.start_byte();
        if !kernels.iter().any(|k| k.body.contains(&at)) {
            let place = crate::syntax::enclosing_function(d)
                .and_then(|f| f.child_by_field_name("declarator"))
                .map(|x| format!("`{}`", text(t, x).split('(').next().unwrap_or("").trim()))
                .unwrap_or_else(|| "a declaration".to_string());
            return Some(place);
        }
    }
    None
}

/// The names `__shared__` declarations outside any function declare.
fn file_scope_shared(src: &Source) -> Vec<String> {
    let t = src.text();
    descendants(src.root())
        .into_iter()
        .filter(|d| {
            d.kind() == "declaration"
                && mentions_word(text(t, *d), "__shared__")
                && crate::syntax::enclosing_function(*d).is_none()
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
    // Code a kernel runs without naming it in a call: constructors, destructors, member
    // initializers and operators of the file's classes, and its overloaded operators.
    let mut out = vec![(String::new(), body)];
    for d in descendants(src.root()) {
        match d.kind() {
            "class_specifier" | "struct_specifier" | "union_specifier" => {
                if let Some(b) = d.child_by_field_name("body") {
                    let name = d.child_by_field_name("name").map(|n| text(t, n)).unwrap_or("an unnamed class");
                    out.push((format!("may run members of `{name}`, which "), b));
                }
            }
            "function_definition" => {
                let declared = text(t, d).split('(').next().unwrap_or("");
                if declared.contains("operator") {
                    if let Some(b) = d.child_by_field_name("body") {
                        out.push(("may call an operator of the file, which ".to_string(), b));
                    }
                }
            }
            _ => {}
        }
    }
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
                || matches!(name, "static_cast" | "reinterpret_cast" | "const_cast" | "__builtin_assume"))
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

    /// A kernel over `n` elements with `stmt` after its bounds check, `prelude` above it.
    fn element_kernel(prelude: &str, stmt: &str) -> String {
        format!(
            "{prelude}\n__global__ void k(const float* x, float* y, int n) {{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n  {stmt}\n}}\n\
             extern \"C\" void launch(const float* x, float* y, int n, cudaStream_t s) {{\n  k<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);\n}}\n"
        )
    }

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
        // The grid is computed once, for the launch and for the blocks it stands for.
        assert!(
            s.contains(
                "  {\n    const dim3 ns_coarse_g = ((n + 255) / 256);\n    relu<<<ns_coarse_grid3(ns_coarse_g, NS_COARSEN), 256, 0, s>>>(x, y, n, ns_coarse_g.x);\n  }"
            ),
            "{s}"
        );
        assert!(s.contains("#define NS_COARSEN 2") && s.contains("inline dim3 ns_coarse_grid3("), "{s}");
        let knobs = crate::knobs(&Source::parse(&s));
        assert!(knobs.iter().any(|k| k.name == KNOB && k.values.len() == 3), "{knobs:?}");
        // Once is enough; and block-knob leaves the coarse launch alone.
        let again = coarsen(&s).unwrap_err();
        assert!(again.contains("a name the rewrite adds"), "{again}");
        let knob = super::super::block_knob::apply(
            &Source::parse(&s),
            &FactsBuilder::new("launch").build(),
            &Params::default(),
        )
        .unwrap_err();
        assert!(knob.0.contains("runs coarse blocks"), "{knob}");
    }

    #[test]
    fn a_dim3_grid_keeps_y_and_the_grid_size_is_the_original() {
        let src = r#"
__global__ void add2d(float* y, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  int stride = gridDim.x * blockDim.x;
  for (decltype(blockIdx.x) c = x; c < w; c += stride) y[r * w + c] += 1.f;
}
extern "C" void launch(float* y, int w, int h, cudaStream_t s) {
  dim3 grid((w + 127) / 128, h);
  add2d<<<grid, 128, 0, s>>>(y, w, h);
}
"#;
        let s = coarsen(src).unwrap();
        assert!(s.contains("int x = ns_bx * blockDim.x + threadIdx.x, r = blockIdx.y;"), "{s}");
        assert!(s.contains("int stride = ns_grid_x * blockDim.x;"), "{s}");
        // A type named through the block index stays the block index's (a mutable unsigned).
        assert!(s.contains("for (decltype(blockIdx.x) c = x;"), "{s}");
        assert!(s.contains("const dim3 ns_coarse_g = (grid);"), "{s}");
        assert!(
            s.contains("add2d<<<ns_coarse_grid3(ns_coarse_g, NS_COARSEN), 128, 0, s>>>(y, w, h, ns_coarse_g.x);"),
            "{s}"
        );
    }

    #[test]
    fn a_return_with_a_call_still_makes_the_call() {
        let src = element_kernel(
            "__device__ void put(float* y, int i, float v) { y[i] = v; }",
            "if (x[i] < 0.f) return put(y, i, 0.f);\n  y[i] = x[i];",
        );
        let s = coarsen(&src).unwrap();
        assert!(s.contains("if (x[i] < 0.f) { (void)(put(y, i, 0.f)); goto ns_coarse_next; }"), "{s}");
    }

    #[test]
    fn blocks_that_share_state_or_could_see_the_change_are_left_alone() {
        let cases: &[(&str, &str, &str)] = &[
            ("", "__shared__ float t[256]; t[threadIdx.x] = x[i]; y[i] = t[threadIdx.x];", "uses `__shared__`"),
            ("", "y[i] = x[i]; __syncthreads();", "synchronizes its block"),
            ("", "y[i] = __shfl_down_sync(0xffffffffu, x[i], 1);", "warp collectives"),
            ("", "y[i] = x[i]; __threadfence();", "uses `__threadfence`"),
            ("", "volatile float* v = y; v[i] = x[i];", "uses `volatile`"),
            ("", "asm volatile(\"\"); y[i] = x[i];", "uses `volatile`"),
            ("__device__ int gid() { return blockIdx.x; }", "y[i] = gid() + x[i];", "shares its file with `gid`"),
            ("#define GID (blockIdx.x * blockDim.x)", "y[i] = GID + x[i];", "the macro `GID`"),
            // A macro that names another that reads the block index.
            ("#define BID_IMPL blockIdx.x\n#define BLOCK_ID BID_IMPL", "y[i] = x[i] + (float)BLOCK_ID;", "the macro `BID_IMPL`"),
            // Code a kernel runs without a call by name.
            ("struct Idx { unsigned b; __device__ Idx() : b(blockIdx.x) {} };", "Idx id; y[i] = x[i] + (float)id.b;", "shares its file with"),
            ("struct Idx { unsigned b = blockIdx.x; };", "Idx id; y[i] = x[i] + (float)id.b;", "shares its file with a declaration"),
            ("struct Off { int v; };\n__device__ int operator+(Off o, int t) { return o.v + (int)blockIdx.x * 256 + t; }", "Off o{0}; y[o + (int)threadIdx.x] = x[i];", "shares its file with"),
            ("struct S { __device__ S() { __syncthreads(); } };", "S s; y[i] = x[i];", "may run members of `S`, which synchronizes"),
            ("", "y[i] = helper(x[i]);", "calls `helper`, which this file does not define"),
            ("", "auto f = [&]() { return 1.f; }; y[i] = x[i];", "lambda"),
            ("", "auto f = [&]() { return 1.f; }; y[i] = f();", "calls `f`, which this file does not define"),
            ("", "uint3 b = blockIdx; y[i] = x[b.x];", "uses `blockIdx` other than by its .x"),
            ("", "struct V { float a; __device__ float get() const { return a; } }; y[i] = V{x[i]}.get();", "defines a class in its body"),
            // Blocks that wait on each other.
            ("__device__ unsigned arrived;", "atomicAdd(&arrived, 1u); while (atomicAdd(&arrived, 0u) < gridDim.x) {} y[i] = x[i];", "`atomicAdd`'s result"),
            ("__device__ int flag[1024];", "while (__ldcv(&flag[blockIdx.x + 1]) == 0) {} y[i] = x[i];", "`__ldcv`"),
            ("#define SKIP_ZERO(v) if ((v) == 0.f) return", "SKIP_ZERO(x[i]); y[i] = 1.f / x[i];", "hides a `return`"),
            ("#define SYNC __syncthreads()", "y[i] = x[i];", "the macro `SYNC`"),
            ("#define ns_cb 7", "y[i] = x[i];", "a name the rewrite adds"),
            ("#define NS_COARSEN 0", "y[i] = x[i];", "defines `NS_COARSEN` itself"),
        ];
        for (prelude, stmt, says) in cases {
            let why = coarsen(&element_kernel(prelude, stmt)).unwrap_err();
            assert!(why.contains(says), "{prelude} / {stmt}: {why}");
        }
        // The kernel's name used otherwise than by a launch, in code or in a macro.
        let src = RELU.replace("relu<<<", "void* f = (void*)relu; relu<<<");
        assert!(coarsen(&src).unwrap_err().contains("named outside its `<<<...>>>` launches"));
        let src = format!("#define LAUNCH_RELU(g) relu<<<(g), 256>>>(x, y, n)\n{RELU}");
        assert!(coarsen(&src).unwrap_err().contains("is named in the macro `LAUNCH_RELU`"));
        // Parameters after which none can be added.
        let src = RELU.replace("int n) {\n  int i", "int n, float a = 1.f) {\n  int i");
        assert!(coarsen(&src).unwrap_err().contains("default argument"), "{}", coarsen(&src).unwrap_err());
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
        let bad = src.replace("return v / (1.0f + __expf(-v));", "return v + __shfl_xor_sync(0xffffffffu, v, 1);");
        let why = coarsen(&bad).unwrap_err();
        assert!(why.contains("calls `silu`, which uses warp collectives"), "{why}");
        let deeper = src
            .replace(
                "__device__ __forceinline__ float silu",
                "__device__ float inner(float v) { __syncthreads(); return v; }\n__device__ __forceinline__ float silu",
            )
            .replace("__expf(-v)", "__expf(-inner(v))");
        let why = coarsen(&deeper).unwrap_err();
        assert!(why.contains("calls `inner`, which synchronizes"), "{why}");
    }

    #[test]
    fn kernels_coarsened_one_at_a_time_decline_above_the_knob() {
        let two = format!("{RELU}\n{}", RELU.replace("relu", "relu2").replace("launch(", "launch2("));
        let src = Source::parse(&two);
        let facts = FactsBuilder::new("launch").build();
        let second = apply(&src, &facts, &Params::default().with("kernel", "relu2")).unwrap();
        let first = apply(&Source::parse(&second.source), &facts, &Params::default().with("kernel", "relu"));
        let why = first.unwrap_err().0;
        assert!(why.contains("sits above the file's `NS_COARSEN` knob"), "{why}");
        // Both in one application share one knob above the first.
        let both = apply(&src, &facts, &Params::default()).unwrap().source;
        assert_eq!(both.matches("#define NS_COARSEN 2").count(), 1);
        assert!(both.find("#define NS_COARSEN").unwrap() < both.find("void relu(").unwrap());
    }
}
