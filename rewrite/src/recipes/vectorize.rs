//! Coarsen and vectorize: each thread of a one-element-per-thread kernel handles V
//! consecutive elements, moving every buffer it touches at exactly the element index
//! with 8- or 16-byte accesses (float4, 8 bf16 through uint4, 16 int8 through int4...)
//! into and out of register arrays; the per-element code runs unchanged V times over
//! those arrays. Threads whose run would cross the bound take the scalar path, and the
//! launcher takes the fast path only when every such buffer is aligned to its access.
//!
//! A read-only buffer each element reads at a few constant offsets from its index (the
//! taps of a 1-D convolution or stencil) goes through a register window instead
//! ([`super::window`]): the run loaded wide once, a few elements past either end one at a
//! time. Coordinates the per-element code splits from its index (`idx % seqlen`) are
//! divided once per run ([`super::index_split`]), and a `const` input read at such a
//! column (`bias[c]`) is loaded wide from the run's first column. A loop whose header is
//! one value for the whole run runs once per run, each step over the V elements
//! ([`super::jam`]), and a row read at the column plus a run-uniform multiple of its
//! divisor (an embedding row, a segment's row) is one wide load per run ([`super::gather`]).
//!
//! Strided loops inside kernels that share data (a block's threads over a row, a
//! grid-stride loop, a group's lanes over a row as `cooperative` leaves them) take runs of
//! V consecutive elements per thread and step instead, behind an alignment check where
//! the loop starts, with a strided tail and the original loop as the fallback.

use super::index_split::{self, Splits};
use super::{gather, jam, speculate, uniform, window};
use crate::facts::{Facts, Role};
use crate::helpers;
use crate::pattern::{self, Access, Elementwise, Form, Spread};
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{indent_at, reindent};
use crate::version::Change;
use std::ops::Range;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "width",
    values: &["16", "8"],
    doc: "bytes per access of the widest element type (16: float4, 8 x bf16; 8: float2, 4 x bf16)",
}];

/// A buffer moved through registers: `scale` consecutive elements per index (a pair
/// for interleaved data), from `name + offset` on.
struct Staged {
    name: String,
    /// The element type.
    base: String,
    size: usize,
    scale: usize,
    /// The index terms that do not involve the index (a row offset).
    offset: Option<String>,
    /// Where the run starts in this buffer when not at the run's own start: a column read
    /// at `idx % m`, from `ns_r` on (see [`index_split`]).
    start: Option<String>,
    load: bool,
    store: bool,
    /// The condition the original reads under, one value for a whole run: the wide load
    /// runs under it.
    guard: Option<String>,
    /// Each use, with its element within the record.
    sites: Vec<(Range<usize>, i64)>,
}

impl Staged {
    /// The staged address of element `ns_base` (a record start).
    fn address(&self) -> String {
        if let Some(start) = &self.start {
            return format!("{} + {start}", self.name);
        }
        let scaled = if self.scale == 1 { "ns_base".to_string() } else { format!("{} * ns_base", self.scale) };
        match &self.offset {
            Some(o) => format!("{} + ({o}) + {scaled}", self.name),
            None => format!("{} + {scaled}", self.name),
        }
    }

    /// Bytes moved per thread and step.
    fn bytes(&self, v: usize) -> usize {
        v * self.scale * self.size
    }

    /// Alignment the wide accesses need.
    fn align(&self, v: usize) -> usize {
        self.bytes(v).min(16)
    }
}

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let width: usize = params.get(PARAMS, "width").parse().map_err(|_| NotApplicable::new("width must be 8 or 16"))?;
    super::per_kernel(src, params, |k| plan(src, facts, k, width))
}

fn plan<'k>(src: &Source, facts: &Facts, k: &'k Kernel, width: usize) -> Result<(Change<'k>, String), NotApplicable> {
    match pattern::elementwise(src, k) {
        Ok(e) if e.form == Form::Guard => plan_kernel(src, facts, k, width, &e),
        other => {
            let loops = pattern::strided_loops(src, k);
            if loops.is_empty() {
                return Err(match other {
                    Err(e) => {
                        NotApplicable::new(format!("{e}, and has no block-, grid- or lane-strided loop to vectorize"))
                    }
                    Ok(_) => NotApplicable::new(format!("`{}` has no strided loop this recipe can vectorize", k.name)),
                });
            }
            plan_loops(src, facts, k, width, &loops)
        }
    }
}

/// Where the staged code runs.
#[derive(Clone, Copy)]
struct Scope {
    /// Inside a strided loop (offsets are checked where the loop starts).
    in_loop: bool,
    /// The body may skip the rest of an element (`continue`): every store may be partial.
    skips: bool,
}

/// Chooses the buffers to move through registers, among `candidates` (name, element
/// type, const), used at `index` within `scope` under `root`.
#[allow(clippy::too_many_arguments)]
fn choose(
    src: &Source,
    facts: &Facts,
    k: &Kernel,
    root: tree_sitter::Node,
    scope: &[Range<usize>],
    index: &str,
    candidates: &[(String, String, bool)],
    scope_kind: Scope,
    skipped: &mut Vec<String>,
) -> Vec<Staged> {
    let t = src.text();
    let allow_offset = scope_kind.in_loop;
    let mut staged = Vec::new();
    for (name, base, is_const) in candidates {
        let Some(size) = crate::syntax::type_size(base) else {
            let uses = pattern::indexed_uses(t, root, scope, name, index, *is_const);
            if !uses.sites.is_empty() {
                skipped.push(format!("`{name}` (element type `{base}` of unknown size)"));
            }
            continue;
        };
        let uses = pattern::indexed_uses(t, root, scope, name, index, *is_const);
        if uses.sites.is_empty() {
            continue;
        }
        if uses.other {
            skipped.push(format!("`{name}` (also used at other indices)"));
            continue;
        }
        let Some((scale, offset, _)) = uses.record() else {
            skipped.push(format!("`{name}` (indices that are not whole records of one stride)"));
            continue;
        };
        if offset.is_some() && !allow_offset {
            skipped.push(format!("`{name}` (an offset the launcher cannot check for alignment)"));
            continue;
        }
        let role = role_of(src, facts, k, name);
        let (mut load, mut store) = (false, false);
        for (_, a, _) in &uses.sites {
            match a {
                Access::Read => load = true,
                Access::Write => store = true,
                Access::Both => match (*is_const, role) {
                    (true, _) | (false, Some(Role::Input)) => load = true,
                    (false, Some(Role::Output)) => store = true,
                    _ => {
                        load = true;
                        store = true;
                    }
                },
            }
        }
        if let Some(why) = reads_past_its_element(src, root, &uses) {
            skipped.push(format!("`{name}` ({why})"));
            continue;
        }
        if store && (uses.conditional || scope_kind.skips) {
            // Elements the original leaves alone keep their value.
            load = true;
        }
        let mut guard = None;
        if load && !store && uses.conditional {
            // A read the original makes only sometimes may lie past a shorter buffer (or
            // behind a null pointer): the wide load runs under the same condition, which
            // must hold one value over the whole run.
            match run_guard(src, k, root, scope, index, &uses, scope_kind.in_loop) {
                Ok(g) => guard = g,
                Err(why) => {
                    skipped.push(format!("`{name}` (read only under a condition{why})"));
                    continue;
                }
            }
        }
        let base = base.replace("const", "").trim().to_string();
        staged.push(Staged {
            name: name.clone(),
            base,
            size,
            scale: scale as usize,
            offset,
            start: None,
            load,
            store,
            guard,
            sites: uses.sites.into_iter().map(|(r, _, a)| (r, a.offset)).collect(),
        });
    }
    staged
}

/// Trip counts up to this many, at every size the task gives, make a loop short: V of them
/// in a thread are still little work (a sum over a handful of codebooks).
const SHORT_LOOP: i64 = 16;

/// The conditions of the loops in the per-element code (`scope` under `body`) whose trip count
/// is known only at run time (its condition reads a kernel parameter or a variable the
/// kernel computes; a macro, a `constexpr` or a `const` literal is a compile-time length)
/// and is not short at the task's sizes.
fn long_runtime_loop(
    src: &Source,
    facts: &Facts,
    k: &Kernel,
    body: tree_sitter::Node,
    scope: &[Range<usize>],
) -> Vec<(String, Range<usize>)> {
    use crate::syntax::{descendants, text};
    let t = src.text();
    let in_scope = |n: tree_sitter::Node| scope.iter().any(|r| r.start <= n.start_byte() && n.end_byte() <= r.end);
    let constant = |name: &str| {
        descendants(body).into_iter().filter(|d| d.kind() == "declaration").all(|d| {
            let declares = crate::syntax::declared_names(t, d).iter().any(|n| n == name);
            if !declares {
                return true;
            }
            let decl = text(t, d);
            let literal = crate::syntax::single_declarator(t, d)
                .and_then(|(_, v)| v)
                .is_some_and(|v| pattern::int_literal(text(t, v)).is_some());
            decl.contains("constexpr") || (decl.trim_start().starts_with("const ") && literal)
        })
    };
    let mut out = Vec::new();
    for d in descendants(body) {
        if !crate::syntax::is_loop(d) || !in_scope(d) {
            continue;
        }
        if super::largest_trip_count(src, facts, k, d).is_some_and(|n| n <= SHORT_LOOP) {
            continue;
        }
        let Some(cond) = d.child_by_field_name("condition") else { continue };
        // The loop's own counters step; what they are compared with sets the length.
        let mut counters = crate::syntax::declared_names(t, d);
        counters.extend(crate::syntax::assigned(t, d).into_iter().map(|(n, _)| n));
        let runtime = descendants(cond).into_iter().any(|n| {
            n.kind() == "identifier" && {
                let name = text(t, n);
                !counters.iter().any(|c| c == name) && (k.params.iter().any(|p| p.name == name) || !constant(name))
            }
        });
        if runtime {
            out.push((text(t, cond).trim_matches(|c| c == '(' || c == ')').trim().to_string(), d.byte_range()));
        }
    }
    out
}

/// The one condition every read in `uses` runs under, when it holds still over the code
/// in `scope` (the per-element code or a loop's body): it reads nothing that code declares
/// or assigns, nor the index, nor memory. None when the reads run whenever the code does
/// (a read in the condition of a `?:` is not conditional). Else why not, to append to the
/// reason.
fn run_guard(
    src: &Source,
    k: &Kernel,
    root: tree_sitter::Node,
    scope: &[Range<usize>],
    index: &str,
    uses: &pattern::IndexedUses,
    root_is_loop: bool,
) -> Result<Option<String>, String> {
    let t = src.text();
    let mut common: Option<Vec<String>> = None;
    for (site, _, _) in &uses.sites {
        let Some(g) = pattern::guards(t, root, site, scope) else {
            return Err(" this recipe cannot follow (inside a loop or a switch, or an `if` that declares)".into());
        };
        match &common {
            Some(c) if *c != g => return Err(" that differs between its reads".into()),
            _ => common = Some(g),
        }
    }
    let conds = common.unwrap_or_default();
    if conds.is_empty() {
        return Ok(None);
    }
    let mut changing = vec![index.to_string()];
    if root_is_loop {
        // The loop's header steps too.
        changing.extend(crate::syntax::assigned(t, root).into_iter().map(|(n, _)| n));
    }
    for r in scope {
        if let Some(n) = root.descendant_for_byte_range(r.start, r.end) {
            changing.extend(crate::syntax::declared_names(t, n));
            changing.extend(crate::syntax::assigned(t, n).into_iter().map(|(n, _)| n));
            changing.extend(crate::syntax::passed_bare(t, n));
        }
    }
    // Names outside the thread's own values (a `__shared__` or `volatile` variable other
    // threads write, a global, a reference, a macro that expands to code) may change
    // between the load and an element: everything else a condition names must be added
    // to what changes.
    let Some(body) = src.node(&k.body, "compound_statement") else { return Err(String::new()) };
    for c in &conds {
        for name in pattern::names_in(c) {
            // One run of a whole kernel's elements spans V of the original threads, whose
            // builtins differ; a loop's run stays in its thread.
            let builtin = matches!(name.as_str(), "blockIdx" | "threadIdx" | "blockDim" | "gridDim");
            if (builtin && !root_is_loop) || !own_value(src, k, body, &name) {
                changing.push(name);
            }
        }
    }
    match conds.iter().find(|c| !pattern::holds_still(c, &changing)) {
        Some(c) => Err(format!(" `{c}` that changes from element to element or reads memory")),
        // Outermost first, as the original evaluates them (`d != 0 && n / d > 2`).
        None => Ok(Some(conds.iter().rev().cloned().collect::<Vec<_>>().join(" && "))),
    }
}

/// Whether `name`, read in a condition, is one of the thread's own values: a kernel
/// parameter, a local the kernel declares once (not `__shared__`, `volatile`, `static` or a
/// reference), a builtin (`blockIdx` of `blockIdx.x`), or an integer constant of the file.
fn own_value(src: &Source, k: &Kernel, body: tree_sitter::Node, name: &str) -> bool {
    use crate::syntax::{descendants, text};
    let t = src.text();
    if k.param(name).is_some() || matches!(name, "NULL" | "blockIdx" | "threadIdx" | "blockDim" | "gridDim") {
        return true;
    }
    if crate::launch::file_scope_size(src, name, k.range.start).value().is_some() {
        return true;
    }
    // A reference, a lambda or an address taken anywhere may change it from elsewhere.
    let aliased = descendants(body).into_iter().any(|d| {
        matches!(d.kind(), "reference_declarator" | "lambda_expression" | "gnu_asm_expression")
            || (d.kind() == "pointer_expression"
                && d.child(0).is_some_and(|o| text(t, o) == "&")
                && d.child_by_field_name("argument").is_some_and(|a| text(t, a) == name))
    });
    if aliased {
        return false;
    }
    let decls: Vec<tree_sitter::Node> = descendants(body)
        .into_iter()
        .filter(|d| d.kind() == "declaration" && crate::syntax::declared_names(t, *d).iter().any(|n| n == name))
        .collect();
    match decls.as_slice() {
        [d] => {
            let words = text(t, *d);
            !["__shared__", "volatile", "static", "&"].iter().any(|w| words.contains(w))
        }
        _ => false,
    }
}

/// V: the widest buffer's record moves `width` bytes a thread, so every access of a warp
/// covers one contiguous span (a 32-byte run per lane would fetch every sector twice, once
/// per half); narrower buffers move less. Where even that would leave one element, the
/// narrowest buffer sets V instead.
fn elements_per_thread(k: &Kernel, staged: &[Staged], width: usize) -> Result<usize, NotApplicable> {
    let smallest = staged.iter().map(|s| s.size * s.scale).min().unwrap_or(4);
    let widest = staged.iter().map(|s| s.size * s.scale).max().unwrap_or(4);
    let v = if width / widest >= 2 { width / widest } else { width / smallest };
    if v < 2 && staged.iter().all(|s| s.scale == 1) {
        return Err(NotApplicable::new(format!(
            "`{}` moves {smallest}-byte elements: a {width}-byte access holds only one",
            k.name
        )));
    }
    Ok(v.max(1))
}

fn staged_note(staged: &[Staged], v: usize) -> String {
    staged
        .iter()
        .map(|s| {
            let dir = match (s.load, s.store) {
                (true, true) => "in/out",
                (true, false) => "in",
                _ => "out",
            };
            let mut rec = if s.scale > 1 { format!(" ({} per index)", s.scale) } else { String::new() };
            if s.start.is_some() {
                rec.push_str(" (its run of columns)");
            }
            format!("{} {}B {dir}{rec}", s.name, s.align(v))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The whole kernel is one element per thread: a fast copy with V per thread, chosen by
/// the launcher when every staged buffer is aligned.
fn plan_kernel<'k>(
    src: &Source,
    facts: &Facts,
    k: &'k Kernel,
    width: usize,
    e: &Elementwise,
) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| NotApplicable::new("no kernel body"))?;
    if pattern::uses_2d_grid(t, body) {
        return Err(NotApplicable::new(format!(
            "`{}` reads the y or z grid coordinates; this recipe coarsens only 1-D grids (row-strip coarsens 2-D grids along y)",
            k.name
        )));
    }
    let mut scope: Vec<Range<usize>> = e.body.clone();
    scope.extend(e.between.iter().filter(|(_, uses)| *uses).map(|(r, _)| r.clone()));
    let long_loop = long_runtime_loop(src, facts, k, body, &scope);
    // One thread now computes V of the original threads' elements: per-element code that
    // reads the builtins would see one thread's values for all V.
    let reads_builtin = scope
        .iter()
        .filter_map(|r| src.root().descendant_for_byte_range(r.start, r.end))
        .any(|n| crate::syntax::descendants(n).into_iter().any(|d| crate::syntax::builtin(t, d).is_some()));
    if reads_builtin {
        return Err(NotApplicable::new(format!(
            "`{}` reads `threadIdx`, `blockIdx`, `blockDim` or `gridDim` in its per-element code; with V elements per thread each would see one thread's values",
            k.name
        )));
    }
    let mut skipped = Vec::new();
    let candidates: Vec<(String, String, bool)> =
        k.params.iter().filter(|p| p.pointer).map(|p| (p.name.clone(), p.base.clone(), p.is_const)).collect();
    let staged = choose(
        src,
        facts,
        k,
        body,
        &scope,
        &e.index,
        &candidates,
        Scope { in_loop: false, skips: false },
        &mut skipped,
    );
    if staged.is_empty() {
        let extra = if skipped.is_empty() { String::new() } else { format!(" (skipped: {})", skipped.join(", ")) };
        return Err(NotApplicable::new(format!(
            "`{}` reads or writes no buffer at exactly its index `{}`{extra}",
            k.name, e.index
        )));
    }
    let v = elements_per_thread(k, &staged, width)?;
    let taken: Vec<String> = staged.iter().map(|s| s.name.clone()).collect();
    let (windows, unwindowed) = super::window::find(src, facts, k, &scope, e, &taken);
    // A buffer read through a window is no longer left scalar (the launcher's length check
    // makes its run safe to load whatever conditions its reads sit under); one already
    // said to be left scalar is said so once.
    let about = |line: &str, name: &str| line.starts_with(&format!("`{name}` "));
    skipped.retain(|line| !windows.iter().any(|w| about(line, &w.name)));
    for line in unwindowed {
        if !skipped.iter().any(|s| s.split(' ').next() == line.split(' ').next()) {
            skipped.push(line);
        }
    }
    let mut change = Change::new(k);
    change.helpers.push(&helpers::VECTOR_IO);
    change.helpers.push(&helpers::HOST_CHECKS);
    // A run's base, `(ty)(flat) * V` in the index's own type, reaches the original
    // launch's thread count plus V - 1 blocks (the divided grid rounds up): past the
    // type's range where the original index stayed in it, when the thread count is
    // within that of the top (an `int` index over 2^31 - 100 elements).
    if let Some(max) = index_type_max(&e.index_type) {
        change.guards.extend(crate::guards::threads_below(src, k, max - v as i64 * MAX_BLOCK)?);
    }
    for s in &staged {
        change.guards.push(format!("ns_aligned({{{}}}, {})", s.name, s.align(v)));
    }
    for w in &windows {
        change.guards.push(format!("ns_aligned({{{}}}, {})", w.name, w.align(v)));
        change.guards.extend(w.guards.iter().cloned());
    }
    let mut avoid: Vec<Range<usize>> = staged.iter().flat_map(|s| s.sites.iter().map(|(r, _)| r.clone())).collect();
    avoid.extend(windows.iter().flat_map(|w| w.sites.iter().map(|(r, _)| r.clone())));
    let splits = index_split::find(src, facts, k, &scope, &e.index, v, &avoid);
    change.guards.extend(splits.guards().cloned());
    if !splits.divisors.is_empty() {
        change.helpers.push(&helpers::RUN_COLUMN);
    }
    let mut staged = staged;
    for col in columns(src, k, body, &scope, &splits, &staged, &windows) {
        change.guards.push(format!("ns_aligned({{{}}}, {})", col.name, col.align(v)));
        staged.push(col);
    }
    let mut per_elem: Vec<Range<usize>> = e.between.iter().filter(|(_, u)| *u).map(|(r, _)| r.clone()).collect();
    per_elem.extend(e.body.iter().cloned());
    let mut edits = VectorEdits { staged: &staged, windows: &windows, splits: Some(&splits), ..Default::default() };
    let RunReads { mut jam, gathers, speculated } =
        run_reads(src, facts, k, body, &per_elem, &edits, &mut change.guards);
    // A long loop is worth a run only where it runs once for it and reads rows wide.
    let wide = |at: &Range<usize>| {
        jam.as_ref().is_some_and(|j| {
            j.covers(at)
                && gathers.iter().any(|g| j.covers(&g.site) && at.start <= g.site.start && g.site.end <= at.end)
        })
    };
    if let Some((bound, _)) = long_loop.iter().find(|(_, at)| !wide(at)) {
        return Err(NotApplicable::new(format!(
            "`{}`: each element runs a loop while `{bound}`, a trip count known only at run time; coarsening would run V such loops one after another in a thread (V times fewer threads, each V times longer) while what the loop reads still moves one element at a time",
            k.name
        )));
    }
    for g in &gathers {
        change.guards.push(format!("ns_aligned({{{}}}, {})", g.name, g.align(v)));
        edits.gathers.push((g.site.clone(), g.replacement(v)));
    }
    if !gathers.is_empty() {
        change.helpers.push(&helpers::RUN_PICK);
    }
    if let Some(j) = &mut jam {
        let gathered: Vec<Range<usize>> = gathers.iter().map(|g| g.site.clone()).collect();
        j.keep_local_where_only_read_in(&gathered);
        edits.replaced = j.edits();
    }
    for s in &speculated {
        let read = edits
            .text(t, &s.site)
            .ok_or_else(|| NotApplicable::new(format!("`{}`: the rewrites of its per-element code overlap", k.name)))?;
        let read = read.split_whitespace().collect::<Vec<_>>().join(" ");
        edits.replaced.push((s.at..s.at, s.declaration(&read, &indent_at(t, s.at))));
        edits.replaced.push((s.site.clone(), s.local.clone()));
    }
    let new = vector_body(t, e, &per_elem, &edits, jam.as_ref(), v)
        .ok_or_else(|| NotApplicable::new(format!("`{}`: the rewrites of its per-element code overlap", k.name)))?;
    change.edits.replace(e.span.clone(), reindent(&new, &indent_at(t, e.span.start)));
    change.grid = Some(Box::new(move |g: &str| format!("(({g}) + {v} - 1) / {v}")));
    let mut note = format!("`{}`: {v} elements per thread, {} through registers", k.name, staged_note(&staged, v));
    for w in &windows {
        note.push_str(&format!(
            "; `{}` read through a register window: the run ({}B) plus {} before and {} after ({} read site(s))",
            w.name,
            v * w.size,
            w.before,
            w.after,
            w.sites.len()
        ));
    }
    if let Some(n) = splits.note(&e.index, v) {
        note.push_str(&format!("; {n}"));
    }
    if let Some(j) = &jam {
        let loops: Vec<&str> = j
            .parts
            .iter()
            .filter_map(|p| match p {
                jam::Part::Loop { counter, .. } => Some(counter.as_str()),
                _ => None,
            })
            .collect();
        note.push_str(&format!(
            "; the loop over `{}` runs once for the run, each step over its {v} elements",
            loops.join("`, `")
        ));
    }
    for s in &speculated {
        note.push_str(&format!(
            "; `{}` read once per run at `{}`, ahead of its condition (the launcher checks the index stays in the buffer)",
            s.name,
            t[s.site.clone()].split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    for g in &gathers {
        note.push_str(&format!(
            "; `{}` read {}B wide at the run's columns (`{}`)",
            g.name,
            g.align(v),
            t[g.site.clone()].split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    if !skipped.is_empty() {
        note.push_str(&format!("; left scalar: {}", skipped.join(", ")));
    }
    Ok((change, note))
}

/// The most threads a block holds (CUDA's limit on every GPU since Fermi).
const MAX_BLOCK: i64 = 1024;

/// The largest value of a 32-bit or narrower integer index type, None for a 64-bit one
/// (a thread count cannot reach its range). A type this does not know counts as `int`.
fn index_type_max(ty: &str) -> Option<i64> {
    let ty = ty.replace("const ", "");
    let ty = ty.split_whitespace().collect::<Vec<_>>().join(" ");
    if crate::syntax::is_64bit_int(&ty) {
        return None;
    }
    Some(match ty.as_str() {
        "unsigned" | "unsigned int" | "uint32_t" => i64::from(u32::MAX),
        "short" | "short int" | "signed short" | "int16_t" => i64::from(i16::MAX),
        "unsigned short" | "unsigned short int" | "uint16_t" => i64::from(u16::MAX),
        _ => i64::from(i32::MAX),
    })
}

/// Strided loops inside a kernel (a block's threads over a row, a grid-stride loop, a
/// group's lanes over a row): each loop runs V consecutive elements per step when its
/// staged buffers are aligned, checked in the kernel where the loop starts (the check is
/// uniform across the threads that share the range, and the original loop stays as the
/// fallback). Shuffles after a lane loop stay outside the check, so every lane reaches
/// them whichever path it took.
fn plan_loops<'k>(
    src: &Source,
    facts: &Facts,
    k: &'k Kernel,
    width: usize,
    loops: &[pattern::StridedLoop],
) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    let candidates = pattern::pointers(src, k);
    let mut change = Change::new(k);
    let mut notes = Vec::new();
    let mut why = Vec::new();
    let mut left = Vec::new();
    for l in loops {
        let Some(node) = src.node(&l.stmt, "for_statement") else { continue };
        let mut skipped = Vec::new();
        let skips = l
            .body
            .iter()
            .filter_map(|r| src.root().descendant_for_byte_range(r.start, r.end))
            .any(|n| crate::syntax::descendants(n).iter().any(|d| d.kind() == "continue_statement"));
        let mut staged =
            choose(src, facts, k, node, &l.body, &l.index, &candidates, Scope { in_loop: true, skips }, &mut skipped);
        // An offset must hold still while the loop runs.
        let mut changing = crate::syntax::declared_names(t, node);
        changing.extend(crate::syntax::assigned(t, node).into_iter().map(|(n, _)| n));
        staged.retain(|s| {
            let moves = s.offset.as_ref().is_some_and(|o| changing.iter().any(|c| crate::syntax::mentions_word(o, c)));
            if moves {
                skipped.push(format!("`{}` (its offset changes inside the loop)", s.name));
            }
            !moves
        });
        if staged.is_empty() {
            let reason = format!(
                "the loop over `{}` moves no buffer at exactly `{}`{}",
                l.bound,
                l.index,
                left_scalar(&skipped)
            );
            // A loop with nothing to move (a shared-memory bin loop) goes unmentioned
            // where others are vectorized.
            if !skipped.is_empty() {
                left.push(reason.clone());
            }
            why.push(reason);
            continue;
        }
        if l.spread == Spread::Lanes {
            if let Err(e) = lane_loop_fits(src, k, node, l, &staged) {
                let reason = format!("{e}{}", left_scalar(&skipped));
                left.push(reason.clone());
                why.push(reason);
                continue;
            }
        }
        let v = match elements_per_thread(k, &staged, width) {
            Ok(v) => v,
            Err(e) => {
                why.push(e.0);
                continue;
            }
        };
        let Some(code) = loop_code(t, l, &staged, v) else {
            why.push(format!("loop over `{}`: its rewrites overlap", l.bound));
            continue;
        };
        change.edits.replace(l.stmt.clone(), reindent(&code, &indent_at(t, l.stmt.start)));
        if index_type_max(&l.index_type).is_some() {
            change.helpers.push(&helpers::RUN_BASES);
        }
        let what = if l.spread == Spread::Lanes { "lane-strided loop" } else { "loop" };
        notes.push(format!("{what} over `{}`: {v} per step ({})", l.bound, staged_note(&staged, v)));
    }
    if notes.is_empty() {
        return Err(NotApplicable::new(format!("`{}`: {}", k.name, why.join("; "))));
    }
    change.helpers.push(&helpers::VECTOR_IO);
    let mut note = format!("`{}`: {}", k.name, notes.join("; "));
    if !left.is_empty() {
        note.push_str(&format!("; left as written: {}", left.join("; ")));
    }
    Ok((change, note))
}

/// ` (left scalar: ...)` for the buffers a loop could not move, or nothing.
fn left_scalar(skipped: &[String]) -> String {
    if skipped.is_empty() {
        String::new()
    } else {
        format!(" (left scalar: {})", skipped.join(", "))
    }
}

/// Whether a lane-strided loop may be regrouped: a lane then takes runs of V consecutive
/// elements instead of every K-th one, so which elements each lane holds changes. That is
/// safe when each element's work reaches memory only through the moved buffers at the
/// index, and the lanes' partial results are combined across the lanes afterwards (a
/// shuffle), so that no lane's own share is ever read as such.
fn lane_loop_fits(
    src: &Source,
    k: &Kernel,
    node: tree_sitter::Node,
    l: &pattern::StridedLoop,
    staged: &[Staged],
) -> Result<(), String> {
    use crate::syntax::{descendants, has_warp_primitive, strip_parens, text};
    let t = src.text();
    let lp = format!("the lane-strided loop over `{}`", l.bound);
    let sites: Vec<&Range<usize>> = staged.iter().flat_map(|s| s.sites.iter().map(|(r, _)| r)).collect();
    let in_site = |n: tree_sitter::Node| sites.iter().any(|r| r.start <= n.start_byte() && n.end_byte() <= r.end);
    let statements: Vec<tree_sitter::Node> =
        l.body.iter().filter_map(|r| node.descendant_for_byte_range(r.start, r.end)).collect();
    let body_nodes: Vec<tree_sitter::Node> = statements.iter().flat_map(|s| descendants(*s)).collect();
    for n in &body_nodes {
        if n.kind() == "identifier" && text(t, *n) == l.index && !in_site(*n) {
            let user = n.parent().unwrap_or(*n);
            return Err(format!(
                "{lp} uses its index `{}` in `{}`, not only to address the buffers it moves; regrouping a lane's elements keeps only such loops exact",
                l.index,
                text(t, user)
            ));
        }
        let target = match n.kind() {
            "assignment_expression" => n.child_by_field_name("left"),
            "update_expression" => n.child_by_field_name("argument"),
            "call_expression" => {
                let f = n.child_by_field_name("function").map(|f| text(t, f)).unwrap_or("");
                if f.contains("atomic") {
                    return Err(format!("{lp} writes memory through `{f}`"));
                }
                None
            }
            _ => None,
        };
        let Some(target) = target.map(strip_parens) else { continue };
        let through = match target.kind() {
            "pointer_expression" => target.child_by_field_name("argument").map(strip_parens),
            "subscript_expression" | "field_expression" => Some(target),
            _ => None,
        };
        if let Some(w) = through {
            if !sites.iter().any(|r| **r == w.byte_range()) {
                return Err(format!(
                    "{lp} writes `{}`, which is not a buffer it moves at exactly `{}`",
                    text(t, target),
                    l.index
                ));
            }
        }
    }
    // The lanes' partials: what the body accumulates into names declared outside it.
    let inside: Vec<String> = statements.iter().flat_map(|b| crate::syntax::declared_names(t, *b)).collect();
    let kernel_body = src.node(&k.body, "compound_statement").ok_or_else(|| format!("`{}` has no body", k.name))?;
    // A shuffle, or a function of this file that shuffles (`warp_sum(s)`).
    let functions = src.host_functions();
    let shuffles = |f: &str| {
        f.starts_with("__shfl")
            || functions.iter().any(|h| {
                h.name == f && src.node(&h.body, "compound_statement").is_some_and(|b| has_warp_primitive(t, b))
            })
    };
    let shuffled_after = |acc: &str| {
        descendants(kernel_body).into_iter().any(|d| {
            d.start_byte() >= l.stmt.end
                && d.kind() == "call_expression"
                && d.child_by_field_name("function").is_some_and(|f| shuffles(text(t, f)))
                && d.child_by_field_name("arguments").is_some_and(|a| crate::syntax::mentions(t, a, acc))
        })
    };
    let updates: Vec<(String, tree_sitter::Node)> =
        statements.iter().flat_map(|b| crate::syntax::assigned(t, *b)).collect();
    for (acc, _) in &updates {
        if *acc == l.index || inside.contains(acc) {
            continue;
        }
        // A running value read per element would see another lane's elements before it.
        let read_between = body_nodes.iter().any(|d| {
            d.kind() == "identifier"
                && text(t, *d) == acc
                && !updates
                    .iter()
                    .any(|(n, a)| n == acc && a.start_byte() <= d.start_byte() && d.end_byte() <= a.end_byte())
        });
        if read_between {
            return Err(format!("{lp} reads the running value of `{acc}` inside it, which regrouping would change"));
        }
        if !shuffled_after(acc) {
            return Err(format!(
                "{lp} accumulates `{acc}` per lane and no shuffle after it combines the lanes' `{acc}`: regrouping changes which elements each lane's `{acc}` holds"
            ));
        }
    }
    Ok(())
}

fn loop_code(t: &str, l: &pattern::StridedLoop, staged: &[Staged], v: usize) -> Option<String> {
    let ty = l.index_type.replace("const ", "").trim().to_string();
    let i = &l.index;
    let bound = &l.bound;
    let edits = VectorEdits { staged, ..Default::default() };
    let vec_code = element_code(t, &l.body, Some(&edits))?;
    let scalar_code = element_code(t, &l.body, None)?;
    let mut aligned: Vec<String> = staged
        .iter()
        .map(|s| {
            let mut start = match &s.offset {
                Some(o) => format!("{} + ({o})", s.name),
                None => s.name.clone(),
            };
            if let Some(b) = &l.base {
                start.push_str(&format!(" + ({b})"));
            }
            format!("((unsigned long long)({start}) % {}) == 0", s.align(v))
        })
        .collect();
    // In a 32-bit or narrower index the runs' bases stay in the type: the first is
    // `begin + start * V`, and the one that ends the loop at most `bound + stride * V`
    // (`helpers::RUN_BASES`, a call so that `index-width` cannot narrow the check's own
    // arithmetic). It reads the stride, never the thread's own start, so that every
    // thread of a range takes the same path: a range split between the paths would skip
    // some elements and do others twice.
    if let Some(max) = index_type_max(&ty) {
        let begin = l.base.as_deref().unwrap_or("0");
        aligned.insert(0, format!("ns_runs_fit<{v}>(({begin}), ({}), ({bound}), {max}LL)", l.stride));
    }
    // Runs of V start where the loop starts; the tail starts after the last whole run
    // (a range that starts past its bound has neither).
    let (begin, first_run, tail) = match &l.base {
        None => (String::new(), format!("ns_first * {v}"), format!("({ty})(({bound}) / {v} * {v})")),
        Some(b) => (
            format!("const {ty} ns_begin = ({ty})({b});\n  "),
            format!("ns_begin + ns_first * {v}"),
            format!("(({bound}) > ns_begin ? ns_begin + (({bound}) - ns_begin) / {v} * {v} : ns_begin)"),
        ),
    };
    Some(format!(
        "if (/* nightshift: aligned */ {}) {{\n  // nightshift: {v} consecutive elements per thread and step, moved with wide accesses.\n  {begin}const {ty} ns_first = ({ty})({start});\n  const {ty} ns_stride = ({ty})({stride});\n  for ({ty} ns_base = {first_run}; ns_base + {v} <= ({bound}); ns_base += ns_stride * {v}) {{\n    {}\n  }}\n  for ({ty} {i} = {tail} + ns_first; {i} < ({bound}); {i} += ns_stride) {{\n    {}\n  }}\n}} else {{\n  {}\n}}",
        aligned.join(" && "),
        reindent(vector_step(staged, &[], None, v, &ty, i, bound, &Body::Each(vec_code)).trim_end(), "    "),
        reindent(scalar_code.trim_end(), "    "),
        reindent(&t[l.stmt.clone()], "  "),
        start = l.start,
        stride = l.stride,
    ))
}

/// Why a buffer's element address may lead past the element, where the run's register
/// array would be read past its end: the address `p + i` (or `&p[i]`) kept, indexed at
/// anything but 0, or handed to a call whose callee reads more than `p[0]` / `*p`, is
/// overloaded or is a template. A callee the file does not define (a header's element
/// accessor, `load_f32(x + i)`) is taken at its word; the wall checks what it computes.
fn reads_past_its_element(src: &Source, root: tree_sitter::Node, uses: &pattern::IndexedUses) -> Option<String> {
    use crate::syntax::text;
    let t = src.text();
    let functions = src.host_functions();
    for (range, _, _) in &uses.sites {
        let Some(site) = root.descendant_for_byte_range(range.start, range.end) else { continue };
        let subscript = t[range.clone()].trim_end().ends_with(']');
        let mut n = site;
        if subscript {
            // `p[i]` is the element; `&p[i]` is its address.
            while let Some(p) = n.parent().filter(|p| p.kind() == "parenthesized_expression") {
                n = p;
            }
            match n.parent() {
                Some(p) if p.kind() == "pointer_expression" && p.child(0).is_some_and(|o| text(t, o) == "&") => n = p,
                _ => continue,
            }
        }
        // Where the address goes.
        while let Some(p) = n.parent() {
            match p.kind() {
                "parenthesized_expression" | "cast_expression" => n = p,
                "pointer_expression" if p.child(0).is_some_and(|o| text(t, o) == "*") => break,
                "subscript_expression" if pattern::subscript_index(p).is_some_and(|i| text(t, i).trim() == "0") => {
                    break
                }
                "argument_list" => {
                    let pos = crate::syntax::named_children(p).iter().position(|a| a.byte_range() == n.byte_range())?;
                    let call = p.parent()?;
                    let f = call.child_by_field_name("function").map(|f| text(t, f).to_string())?;
                    let passed = format!("passed to `{f}`, which may read past the element it is given");
                    let defined: Vec<_> = functions.iter().filter(|h| h.name == f).collect();
                    let plain = f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                    match defined.as_slice() {
                        [] if plain => break,
                        [callee] => {
                            let Some(param) = callee.params.get(pos) else { return Some(passed) };
                            let Some(body) = src.node(&callee.body, "compound_statement") else {
                                return Some(passed);
                            };
                            let only_element = crate::syntax::descendants(body).into_iter().all(|d| {
                                if d.kind() != "identifier" || text(t, d) != param {
                                    return true;
                                }
                                match d.parent() {
                                    Some(p) if p.kind() == "subscript_expression" => {
                                        pattern::subscript_index(p).is_some_and(|i| text(t, i).trim() == "0")
                                    }
                                    Some(p) if p.kind() == "pointer_expression" => {
                                        p.child(0).is_some_and(|o| text(t, o) == "*")
                                    }
                                    _ => false,
                                }
                            });
                            if only_element {
                                break;
                            }
                            return Some(passed);
                        }
                        _ => return Some(passed),
                    }
                }
                _ => return Some(format!("its element's address `{}` is kept or moved", text(t, n).trim())),
            }
        }
    }
    None
}

/// The task's role for the launcher argument bound to a kernel parameter.
pub fn role_of(src: &Source, facts: &Facts, k: &Kernel, param: &str) -> Option<Role> {
    let arg = crate::launcher_arg(src, facts, k, param)?;
    facts.args.get(arg)?.role()
}

/// What the vector copy of the per-element code rewrites.
#[derive(Default)]
struct VectorEdits<'a> {
    staged: &'a [Staged],
    windows: &'a [window::Window],
    splits: Option<&'a Splits>,
    /// Other replacements: a jam's register arrays, a column spelled as the run's first.
    replaced: Vec<(Range<usize>, String)>,
    /// Reads picked out of wide loads: each replaces its whole read, edits inside it
    /// included.
    gathers: Vec<(Range<usize>, String)>,
}

impl VectorEdits<'_> {
    /// `range` of `t` with every edit inside it made (none when edits overlap).
    fn text(&self, t: &str, range: &Range<usize>) -> Option<String> {
        let r = range;
        let mut edits = crate::edit::Edits::new();
        let inside = |site: &Range<usize>| site.start >= r.start && site.end <= r.end;
        let shadowed = |site: &Range<usize>| {
            self.gathers.iter().any(|(g, _)| g.start <= site.start && site.end <= g.end && g != site)
        };
        let mut put = |site: &Range<usize>, new: String| {
            if inside(site) && !shadowed(site) {
                edits.replace(site.start - r.start..site.end - r.start, new);
            }
        };
        for w in self.windows {
            for (site, offset) in &w.sites {
                put(site, w.read(offset));
            }
        }
        // The taps' loops unroll, so each reads its window at a fixed place.
        let mut starts: Vec<usize> = self.windows.iter().flat_map(|w| w.pragmas.iter().copied()).collect();
        starts.sort_unstable();
        starts.dedup();
        for at in starts {
            if at >= r.start && at < r.end {
                put(&(at..at), "#pragma unroll\n".to_string());
            }
        }
        if let Some(splits) = self.splits {
            for site in &splits.sites {
                put(&site.range, splits.replacement(site));
            }
        }
        for s in self.staged {
            for (site, off) in &s.sites {
                let is_sub =
                    t[site.clone()].trim_end().ends_with(']') && t[site.clone()].trim_start().starts_with(&s.name);
                let at = match (s.scale, off) {
                    (1, _) => "ns_k".to_string(),
                    (sc, 0) => format!("{sc} * ns_k"),
                    (sc, o) => format!("{sc} * ns_k + {o}"),
                };
                put(site, if is_sub { format!("ns_{}[{at}]", s.name) } else { format!("(ns_{} + {at})", s.name) });
            }
        }
        for (site, new) in self.replaced.iter().chain(&self.gathers) {
            put(site, new.clone());
        }
        edits.apply(&t[r.clone()]).ok()
    }
}

/// The per-element statements: as written (`edits` none), or with staged accesses
/// redirected to the register arrays and the other vector edits made.
fn element_code(t: &str, ranges: &[Range<usize>], edits: Option<&VectorEdits>) -> Option<String> {
    let mut out = String::new();
    for r in ranges {
        match edits {
            Some(e) => out.push_str(&e.text(t, r)?),
            None => out.push_str(&t[r.clone()]),
        }
        out.push('\n');
    }
    Some(out)
}

/// Register arrays, their loads before the per-element loop and stores after it.
fn staging(staged: &[Staged], v: usize) -> (String, String) {
    let mut loads = String::new();
    let mut stores = String::new();
    for s in staged {
        let n = v * s.scale;
        loads.push_str(&format!("alignas(16) {} ns_{}[{n}];\n", s.base, s.name));
        match (&s.guard, s.load) {
            (Some(g), true) => loads.push_str(&format!("if ({g}) ns_load(ns_{}, {});\n", s.name, s.address())),
            (None, true) => loads.push_str(&format!("ns_load(ns_{}, {});\n", s.name, s.address())),
            _ => {}
        }
        if s.store {
            stores.push_str(&format!("ns_store({}, ns_{});\n", s.address(), s.name));
        }
    }
    (loads, stores)
}

/// Input buffers read only at a column `c = idx % m` (a bias per column), m split once
/// per run with no wrap: the run's V columns are `ns_r..ns_r + V`, loaded wide from there.
/// Every read must be unconditional, so each of those columns is one the run's elements
/// read anyway.
fn columns(
    src: &Source,
    k: &Kernel,
    body: tree_sitter::Node,
    scope: &[Range<usize>],
    splits: &Splits,
    staged: &[Staged],
    windows: &[window::Window],
) -> Vec<Staged> {
    let t = src.text();
    let mut out: Vec<Staged> = Vec::new();
    for (local, start) in splits.column_locals(src, k, body) {
        for p in k.params.iter().filter(|p| p.pointer && p.is_const) {
            let taken =
                |n: &str| staged.iter().chain(out.iter()).any(|s| s.name == n) || windows.iter().any(|w| w.name == n);
            if taken(&p.name) {
                continue;
            }
            let Some(size) = crate::syntax::type_size(&p.base) else { continue };
            let uses = pattern::indexed_uses(t, body, scope, &p.name, &local, true);
            let whole = uses.record().is_some_and(|(scale, offset, _)| scale == 1 && offset.is_none());
            let reads = uses.sites.iter().all(|(_, a, _)| *a == Access::Read);
            if uses.sites.is_empty() || uses.other || uses.conditional || !whole || !reads {
                continue;
            }
            if reads_past_its_element(src, body, &uses).is_some() {
                continue;
            }
            out.push(Staged {
                name: p.name.clone(),
                base: p.base.replace("const", "").trim().to_string(),
                size,
                scale: 1,
                offset: None,
                start: Some(start.clone()),
                load: true,
                store: false,
                guard: None,
                sites: uses.sites.into_iter().map(|(r, _, a)| (r, a.offset)).collect(),
            });
        }
    }
    out
}

/// What the per-element code reads once per run.
struct RunReads {
    jam: Option<jam::Jam>,
    gathers: Vec<gather::Gather>,
    speculated: Vec<speculate::Speculated>,
}

/// Loops run once per run ([`jam`]), rows read wide at the run's columns ([`gather`]) and
/// conditional reads at run-uniform addresses made ahead of their conditions
/// ([`speculate`]), with the launcher's checks they need pushed to `guards`. No loop and
/// no row when a buffer they rely on may overlap one the kernel writes and the task gives
/// no length to check it.
fn run_reads(
    src: &Source,
    facts: &Facts,
    k: &Kernel,
    body: tree_sitter::Node,
    per_elem: &[Range<usize>],
    edits: &VectorEdits,
    guards: &mut Vec<String>,
) -> RunReads {
    let t = src.text();
    let none = || RunReads { jam: None, gathers: Vec::new(), speculated: Vec::new() };
    let Some(splits) = edits.splits else { return none() };
    let Some(mut uniform) = uniform::RunUniform::new(src, k, body, splits) else { return none() };
    let windowed: Vec<Range<usize>> =
        edits.windows.iter().flat_map(|w| w.sites.iter().map(|(r, _)| r.clone())).collect();
    // The kernel's own declarations outside the per-element code (`row = heads * dim`).
    let outside: Vec<Range<usize>> = crate::syntax::named_children(body)
        .into_iter()
        .map(|n| n.byte_range())
        .filter(|r| !per_elem.iter().any(|p| p.start <= r.start && r.end <= p.end))
        .collect();
    uniform.add_declarations(body, &outside);
    let jam = jam::find(t, body, per_elem, &mut uniform, &windowed);
    if jam.is_none() {
        uniform.add_declarations(body, per_elem);
    }
    let loops = jam.as_ref().map(|j| j.loop_bodies()).unwrap_or_default();
    let mut taken: Vec<String> = edits.staged.iter().map(|s| s.name.clone()).collect();
    taken.extend(edits.windows.iter().map(|w| w.name.clone()));
    let inner = |r: Range<usize>, subs: &[(Range<usize>, String)]| {
        VectorEdits { splits: Some(splits), replaced: subs.to_vec(), ..Default::default() }.text(t, &r)
    };
    let places = gather::Places { top: per_elem, loops: &loops };
    let gathers = gather::find(src, k, body, splits, &uniform, &places, &taken, &inner);
    let jammed = jam.is_some();
    let mut reads = none();
    if jammed || !gathers.is_empty() {
        if let Some(g) = gather::disjoint_guards(src, facts, k, &uniform.loaded()) {
            guards.extend(g);
            reads.jam = jam;
            reads.gathers = gathers;
        }
    }
    // A jam cuts the per-element code into parts; a load ahead of its condition stays
    // within one element's copy.
    if !jammed {
        taken.extend(reads.gathers.iter().map(|g| g.name.clone()));
        let busy: Vec<usize> = edits.windows.iter().flat_map(|w| w.pragmas.iter().copied()).collect();
        let (speculated, checks) = speculate::find(src, facts, k, body, per_elem, &uniform, &taken, &busy);
        guards.extend(checks);
        reads.speculated = speculated;
    }
    reads
}

/// The per-element code of a vector step: run for each element in turn, or cut into
/// parts around loops run once for the run ([`jam`]).
enum Body {
    Each(String),
    Jammed { lifted: String, parts: Vec<JamPart> },
}

enum JamPart {
    Once(String),
    Each(String),
    Loop { header: String, body: String },
}

fn vector_body(
    t: &str,
    e: &Elementwise,
    per_elem: &[Range<usize>],
    edits: &VectorEdits,
    jam: Option<&jam::Jam>,
    v: usize,
) -> Option<String> {
    let ty = e.index_type.replace("const ", "").trim().to_string();
    let i = &e.index;
    let bound = &e.bound;
    let flat = &t[e.flat.clone()];
    let body = match jam {
        None => Body::Each(element_code(t, per_elem, Some(edits))?),
        Some(j) => {
            let mut parts = Vec::new();
            for p in &j.parts {
                parts.push(match p {
                    jam::Part::Once(r) => JamPart::Once(element_code(t, std::slice::from_ref(r), Some(edits))?),
                    jam::Part::Each(rs) => JamPart::Each(element_code(t, rs, Some(edits))?),
                    jam::Part::Loop { header, body, .. } => JamPart::Loop {
                        header: element_code(t, std::slice::from_ref(header), Some(edits))?,
                        body: element_code(t, body, Some(edits))?,
                    },
                });
            }
            let lifted = j.lifted.iter().map(|l| format!("{} ns_e_{}[{v}];\n", l.ty, l.name)).collect();
            Body::Jammed { lifted, parts }
        }
    };
    let scalar_code = element_code(t, per_elem, None)?;
    let mut out = String::new();
    for (r, uses) in &e.between {
        if !uses {
            out.push_str(&t[r.clone()]);
            out.push('\n');
        }
    }
    out.push_str(&format!(
        "// nightshift: {v} consecutive elements per thread, moved with wide accesses.\nconst {ty} ns_base = ({ty})({flat}) * {v};\nif (ns_base + {v} <= ({bound})) {{\n  {}\n}} else {{\n  for (int ns_k = 0; ns_k < {v}; ++ns_k) {{\n    {ty} {i} = ns_base + ns_k;\n    if (!({i} < ({bound}))) break;\n    {}\n  }}\n}}",
        reindent(vector_step(edits.staged, edits.windows, edits.splits, v, &ty, i, bound, &body).trim_end(), "  "),
        reindent(scalar_code.trim_end(), "    ")
    ));
    Some(out)
}

/// One vector step: the register arrays loaded, the per-element code unrolled over them
/// (declaring the index only where the code still reads it), the arrays stored.
#[allow(clippy::too_many_arguments)]
fn vector_step(
    staged: &[Staged],
    windows: &[window::Window],
    splits: Option<&Splits>,
    v: usize,
    ty: &str,
    i: &str,
    bound: &str,
    body: &Body,
) -> String {
    let (staged_loads, stores) = staging(staged, v);
    let mut loads = splits.map(|s| s.prelude(v)).unwrap_or_default();
    loads.push_str(&staged_loads);
    for w in windows {
        loads.push_str(&w.load(v, bound));
    }
    let each = |code: &str| {
        let decl = if crate::syntax::mentions_word(code, i) {
            format!("{ty} {i} = ns_base + ns_k;\n  ")
        } else {
            String::new()
        };
        format!(
            "#pragma unroll\nfor (int ns_k = 0; ns_k < {v}; ++ns_k) {{\n  {decl}{}\n}}\n",
            reindent(code.trim_end(), "  ")
        )
    };
    let code = match body {
        Body::Each(code) => each(code),
        Body::Jammed { lifted, parts } => {
            let mut out = format!(
                "// nightshift: each loop below runs once for the run (its trip count is one value for all {v} elements), each step over the {v} elements.\n{lifted}"
            );
            for p in parts {
                match p {
                    JamPart::Once(code) => out.push_str(&format!("{}\n", code.trim_end())),
                    JamPart::Each(code) => out.push_str(&each(code)),
                    JamPart::Loop { header, body } => out.push_str(&format!(
                        "{} {{\n  {}\n}}\n",
                        header.trim_end(),
                        reindent(each(body).trim_end(), "  ")
                    )),
                }
            }
            out
        }
    };
    format!("{loads}{code}{stores}")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    const ADD: &str = r#"#include <cuda_runtime.h>
#define BLOCK 256
__global__ void add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t stream) {
  if (n <= 0) return;
  add<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, stream>>>(a, b, c, n);
}
"#;

    fn facts() -> Facts {
        FactsBuilder::new("vector_add")
            .buffer("a", "float", Role::Input, "{n}", 1 << 24, 1 << 24)
            .buffer("b", "float", Role::Input, "{n}", 1 << 24, 1 << 24)
            .buffer("c", "float", Role::Output, "{n}", 1 << 24, 1 << 24)
            .int("n", 1 << 24, 1 << 24)
            .build()
    }

    #[test]
    fn a_narrow_index_has_the_launch_checked_below_its_type_top_less_v_blocks() {
        let guards = |ty: &str| {
            let src = ADD.replace("  int i = blockIdx.x", &format!("  {ty} i = blockIdx.x"));
            apply(&Source::parse(&src), &facts(), &Params::default()).unwrap().guards
        };
        // 4 floats a run: the base reaches the launch's threads plus 3 blocks of up to
        // 1024 threads, in the index's own type.
        assert_eq!(guards("int")[0], "(long long)grid * block <= 2147479551LL");
        assert_eq!(guards("unsigned")[0], "(long long)grid * block <= 4294963199LL");
        assert_eq!(guards("short")[0], "(long long)grid * block <= 28671LL");
        assert!(!guards("size_t").iter().any(|g| g.contains("grid * block")), "{:?}", guards("size_t"));
        let r = apply(&Source::parse(ADD), &facts(), &Params::default()).unwrap();
        assert!(
            r.source.contains(
                "if (/* nightshift: fast path */ ((long long)((n + BLOCK - 1) / BLOCK) * (BLOCK) <= 2147479551LL)"
            ),
            "{}",
            r.source
        );
    }

    #[test]
    fn a_helper_that_reads_neighbours_keeps_its_buffer_scalar() {
        let src = ADD.replace(
            "__global__ void add(",
            "__device__ float diff(const float* p) { return p[1] - p[0]; }\n__device__ float first(const float* p) { return *p; }\n__global__ void add(",
        );
        let src = src.replace("c[i] = a[i] + b[i];", "c[i] = diff(a + i) + first(b + i);");
        let r = apply(&Source::parse(&src), &facts(), &Params::default()).unwrap();
        assert!(r.description.contains("`a` (passed to `diff`"), "{}", r.description);
        assert!(r.source.contains("diff(a + i) + first((ns_b + ns_k))"), "{}", r.source);
    }

    #[test]
    fn a_loop_that_skips_elements_loads_before_it_stores() {
        let src = r#"
__global__ void clip(const float* x, float* y, int cols) {
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    if (row[c] < 0.f) continue;
    out[c] = row[c];
  }
}
extern "C" void launch(const float* x, float* y, int rows, int cols, cudaStream_t s) {
  clip<<<rows, 256, 0, s>>>(x, y, cols);
}
"#;
        let f = FactsBuilder::new("launch").build();
        let r = apply(&Source::parse(src), &f, &Params::default()).unwrap();
        assert!(r.source.contains("ns_load(ns_out, out + ns_base);"), "{}", r.source);
        // An `int` loop keeps its runs' bases in range with one check a range's threads
        // share (the stride, not a thread's start); the check's definition comes along.
        assert!(r.source.contains("ns_runs_fit<4>((0), (blockDim.x), (cols), 2147483647LL)"), "{}", r.source);
        assert!(r.source.contains("__device__ __forceinline__ bool ns_runs_fit("), "{}", r.source);
        // A 64-bit index cannot leave its range: no check.
        let wide = apply(
            &Source::parse(&src.replace("int c = threadIdx.x", "size_t c = threadIdx.x")),
            &f,
            &Params::default(),
        )
        .unwrap();
        assert!(!wide.source.contains("ns_runs_fit"), "{}", wide.source);
    }

    /// `cooperative` (a thread per row becomes a warp per row), then this recipe on its
    /// output, as a search path takes them.
    fn after_cooperative(src: &str) -> Result<crate::Rewrite, NotApplicable> {
        use crate::{Application, RecipeId};
        let f = FactsBuilder::new("launch").build();
        let coop = Application { recipe: RecipeId::Cooperative, params: Params::default() };
        let lanes = crate::apply(&coop, src, &f).expect("cooperative applies");
        let vec = Application { recipe: RecipeId::Vectorize, params: Params::default() };
        crate::apply(&vec, &lanes.source, &f)
    }

    /// A thread per row, two passes over it (also row-cache's test after `cooperative`).
    pub(crate) const ROW_LOGSUMEXP: &str = r#"#include <cuda_runtime.h>
#include <float.h>
__global__ void row_lse(const float* logits, float* lse, int rows, int cols) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* p = logits + (size_t)row * cols;
  float m = -FLT_MAX;
  for (int c = 0; c < cols; ++c) m = fmaxf(m, p[c]);
  float sum = 0.0f;
  for (int c = 0; c < cols; ++c) sum += expf(p[c] - m);
  lse[row] = m + logf(sum);
}
extern "C" void launch(const float* logits, float* lse, int rows, int cols, cudaStream_t stream) {
  row_lse<<<(rows + 255) / 256, 256, 0, stream>>>(logits, lse, rows, cols);
}
"#;

    const ROW_GEMV: &str = r#"#include <cuda_runtime.h>
__global__ void gemv(const float* A, const float* x, float* y, int rows, int cols) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  float acc = 0.f;
  for (int c = 0; c < cols; ++c) acc += A[(size_t)row * cols + c] * x[c];
  y[row] = acc;
}
extern "C" void launch(const float* A, const float* x, float* y, int rows, int cols, cudaStream_t s) {
  gemv<<<(rows + 255) / 256, 256, 0, s>>>(A, x, y, rows, cols);
}
"#;

    const ROW_SCALE: &str = r#"#include <cuda_runtime.h>
__global__ void row_scale(const float* x, const float* scale, float* y, int rows, int cols) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < rows) {
    const float s = scale[row];
    for (int c = 0; c < cols; ++c) y[(size_t)row * cols + c] = x[(size_t)row * cols + c] * s;
  }
}
extern "C" void launch(const float* x, const float* scale, float* y, int rows, int cols, cudaStream_t st) {
  row_scale<<<(rows + 127) / 128, 128, 0, st>>>(x, scale, y, rows, cols);
}
"#;

    #[test]
    fn lane_loops_of_a_max_then_sum_row_reduction_read_16_bytes_per_lane() {
        let r = after_cooperative(ROW_LOGSUMEXP).unwrap();
        let s = &r.source;
        assert_eq!(
            r.description,
            "`row_lse_fast`: lane-strided loop over `cols`: 4 per step (p 16B in); lane-strided loop over `cols`: 4 per step (p 16B in)"
        );
        // The runs' bases stay in `int`: the first lane's start plus a step past the bound.
        let aligned = "if (/* nightshift: aligned */ ns_runs_fit<4>((0), (32), (cols), 2147483647LL) && ((unsigned long long)(p) % 16) == 0) {";
        assert_eq!(s.matches(aligned).count(), 2, "{s}");
        assert!(s.contains("const int ns_first = (int)(ns_lane);"), "{s}");
        assert!(s.contains("const int ns_stride = (int)(32);"), "{s}");
        assert!(s.contains("for (int ns_base = ns_first * 4; ns_base + 4 <= (cols); ns_base += ns_stride * 4)"), "{s}");
        assert!(s.contains("ns_load(ns_p, p + ns_base);"), "{s}");
        assert!(s.contains("m = fmaxf(m, ns_p[ns_k]);"), "{s}");
        assert!(s.contains("sum += expf(ns_p[ns_k] - m);"), "{s}");
        // The tail takes the last `cols % 4` elements, still lane-strided.
        assert!(s.contains("for (int c = (int)((cols) / 4 * 4) + ns_first; c < (cols); c += ns_stride)"), "{s}");
        // The lanes' partials are still combined after each loop, outside the fast path.
        assert_eq!(s.matches("__shfl_xor_sync(ns_mask, ").count(), 2, "{s}");
    }

    #[test]
    fn lane_loops_of_a_row_dot_check_the_row_start_for_alignment() {
        let r = after_cooperative(ROW_GEMV).unwrap();
        let s = &r.source;
        assert!(
            r.description.contains("lane-strided loop over `cols`: 4 per step (A 16B in, x 16B in)"),
            "{}",
            r.description
        );
        assert!(
            s.contains(
                "((unsigned long long)(A + ((size_t)row * cols)) % 16) == 0 && ((unsigned long long)(x) % 16) == 0"
            ),
            "{s}"
        );
        assert!(s.contains("ns_load(ns_A, A + ((size_t)row * cols) + ns_base);"), "{s}");
        assert!(s.contains("acc += ns_A[ns_k] * ns_x[ns_k];"), "{s}");
    }

    #[test]
    fn an_elementwise_lane_loop_loads_and_stores_16_bytes_per_lane() {
        let r = after_cooperative(ROW_SCALE).unwrap();
        let s = &r.source;
        assert!(r.description.contains("(x 16B in, y 16B out)"), "{}", r.description);
        assert!(s.contains("ns_store(y + ((size_t)row * cols) + ns_base, ns_y);"), "{s}");
        assert!(s.contains("ns_y[ns_k] = ns_x[ns_k] * s;"), "{s}");
    }

    #[test]
    fn a_lane_loop_whose_index_feeds_arithmetic_is_declined() {
        let weighted = ROW_GEMV.replace("* x[c];", "* x[c] * (float)c;");
        let e = after_cooperative(&weighted).unwrap_err();
        assert_eq!(
            e.0,
            "`gemv_fast`: the lane-strided loop over `cols` uses its index `c` in `(float)c`, not only to address the buffers it moves; regrouping a lane's elements keeps only such loops exact"
        );
    }

    /// A hand-written warp-per-row kernel around one lane-strided loop.
    fn warp_per_row(before: &str, lane_loop: &str, after: &str) -> String {
        format!(
            r#"__global__ void per_row(const float* x, float* y, float* part, const int* idx, int rows, int cols) {{
  int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* p = x + (size_t)row * cols;
  float* q = y + (size_t)row * cols;
  {before}
  {lane_loop}
  {after}
}}
extern "C" void launch(const float* x, float* y, float* part, const int* idx, int rows, int cols, cudaStream_t s) {{
  per_row<<<(rows * 32 + 255) / 256, 256, 0, s>>>(x, y, part, idx, rows, cols);
}}
"#
        )
    }

    fn vectorize(src: &str) -> Applied {
        apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &Params::default())
    }

    #[test]
    fn a_lane_loop_from_a_row_start_runs_from_that_start() {
        let src = warp_per_row(
            "const int half = cols / 2;",
            "for (int c = half + lane; c < cols; c += 32) q[c] = 2.f * p[c];",
            "",
        );
        let r = vectorize(&src).unwrap();
        let s = &r.source;
        assert!(s.contains("((unsigned long long)(p + (half)) % 16) == 0"), "{s}");
        assert!(s.contains("const int ns_begin = (int)(half);"), "{s}");
        // The runs' bases start at the row's start: the check counts it.
        assert!(s.contains("ns_runs_fit<4>((half), (32), (cols), 2147483647LL)"), "{s}");
        assert!(s.contains("for (int ns_base = ns_begin + ns_first * 4; ns_base + 4 <= (cols);"), "{s}");
        assert!(
            s.contains(
                "for (int c = ((cols) > ns_begin ? ns_begin + ((cols) - ns_begin) / 4 * 4 : ns_begin) + ns_first;"
            ),
            "{s}"
        );
    }

    #[test]
    fn lane_loops_decline_what_regrouping_would_change() {
        let shuffled = "for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);";
        let why = |lane_loop: &str, after: &str| {
            vectorize(&warp_per_row("float acc = 0.f;", lane_loop, after)).unwrap_err().0
        };
        assert_eq!(
            why("for (int c = lane; c < cols; c += 32) { q[c] = p[c]; y[idx[c]] = p[c]; }", ""),
            "`per_row`: the lane-strided loop over `cols` writes `y[idx[c]]`, which is not a buffer it moves at exactly `c`"
        );
        // Each lane's own share is the result: columns `lane`, `lane + 32`... summed.
        assert_eq!(
            why("for (int c = lane; c < cols; c += 32) acc += p[c];", "part[row * 32 + lane] = acc;"),
            "`per_row`: the lane-strided loop over `cols` accumulates `acc` per lane and no shuffle after it combines the lanes' `acc`: regrouping changes which elements each lane's `acc` holds"
        );
        assert_eq!(
            why("for (int c = lane; c < cols; c += 32) { acc += p[c]; q[c] = acc; }", shuffled),
            "`per_row`: the lane-strided loop over `cols` reads the running value of `acc` inside it, which regrouping would change"
        );
        // Combined after the loop, the same sum vectorizes.
        let r = vectorize(&warp_per_row(
            "float acc = 0.f;",
            "for (int c = lane; c < cols; c += 32) acc += p[c];",
            shuffled,
        ))
        .unwrap();
        assert!(r.description.contains("lane-strided loop over `cols`: 4 per step (p 16B in)"), "{}", r.description);
    }

    /// The example's row-wise quantization: the convert pass reads the row only when it is
    /// not all zeros.
    const QUANT_ROWS: &str = r#"#include <cuda_bf16.h>
#include <stdint.h>
__global__ void quant(const __nv_bfloat16* x, int8_t* q, float* scale, int rows, int cols) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const __nv_bfloat16* xr = x + (size_t)row * cols;
  int8_t* qr = q + (size_t)row * cols;
  float amax = 0.0f;
  for (int c = 0; c < cols; ++c) amax = fmaxf(amax, fabsf(__bfloat162float(xr[c])));
  const float s = amax / 127.0f;
  scale[row] = s;
  for (int c = 0; c < cols; ++c) {
    int v = 0;
    if (amax > 0.0f) v = __float2int_rn(__bfloat162float(xr[c]) / s);
    qr[c] = (int8_t)max(-127, min(127, v));
  }
}
extern "C" void launch(const __nv_bfloat16* x, int8_t* q, float* scale, int rows, int cols, cudaStream_t st) {
  quant<<<(rows + 255) / 256, 256, 0, st>>>(x, q, scale, rows, cols);
}
"#;

    #[test]
    fn a_read_under_a_condition_that_holds_over_the_loop_is_loaded_wide_under_it() {
        let r = after_cooperative(QUANT_ROWS).unwrap();
        assert!(
            r.description.contains("lane-strided loop over `cols`: 8 per step (xr 16B in, qr 8B out)"),
            "{}",
            r.description
        );
        assert!(r.source.contains("if ((amax > 0.0f)) ns_load(ns_xr, xr + ns_base);"), "{}", r.source);
        // The element code still decides per element, on the register copy.
        assert!(r.source.contains("if (amax > 0.0f) v = __float2int_rn(__bfloat162float(ns_xr[ns_k]) / s);"));
    }

    #[test]
    fn a_read_under_a_condition_that_changes_per_element_stays_scalar() {
        for (cond, says) in [
            ("v == 0", "`(v == 0)` that changes from element to element"),
            ("scale[row] > 0.f", "`(scale[row] > 0.f)` that changes from element to element or reads memory"),
            ("(v = 1)", "`((v = 1))` that changes"),
        ] {
            let src = QUANT_ROWS.replace("if (amax > 0.0f) v =", &format!("if ({cond}) v ="));
            let r = after_cooperative(&src).unwrap();
            assert!(r.description.contains("`xr` (read only under a condition"), "{cond}: {}", r.description);
            assert!(r.description.contains(says), "{cond}: {}", r.description);
            assert!(!r.source.contains(") ns_load(ns_xr"), "{cond}: {}", r.source);
        }
    }

    #[test]
    fn a_thread_that_loops_over_a_run_time_length_per_element_is_not_coarsened() {
        let e =
            apply(&Source::parse(QUANT_ROWS), &FactsBuilder::new("launch").build(), &Params::default()).unwrap_err();
        assert!(
            e.0.contains("each element runs a loop while `c < cols`, a trip count known only at run time"),
            "{}",
            e.0
        );
        // A loop the task's sizes keep short (four codebooks) still coarsens.
        let short = r#"#include <cuda_bf16.h>
__global__ void emb(const int* codes, const __nv_bfloat16* tables, __nv_bfloat16* out, int K, int V, int D, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += __bfloat162float(tables[((size_t)k * V + codes[k]) * D + idx % D]);
  out[idx] = __float2bfloat16(acc);
}
extern "C" void launch(const int* codes, const __nv_bfloat16* tables, __nv_bfloat16* out, int K, int V, int D, int n, cudaStream_t st) {
  emb<<<(n + 255) / 256, 256, 0, st>>>(codes, tables, out, K, V, D, n);
}
"#;
        let facts = |k_max| {
            FactsBuilder::new("launch")
                .buffer("codes", "int", Role::Input, "{K}", 4, 4)
                .buffer("tables", "__nv_bfloat16", Role::Input, "{K} * {V} * {D}", 1 << 20, 1 << 20)
                .buffer("out", "__nv_bfloat16", Role::Output, "{n}", 1 << 20, 1 << 20)
                .int("K", k_max, k_max)
                .int("V", 1024, 1024)
                .int("D", 1024, 1024)
                .int("n", 1 << 20, 1 << 20)
                .build()
        };
        let r = apply(&Source::parse(short), &facts(4), &Params::default()).unwrap();
        assert!(r.description.contains("8 elements per thread, out 16B out"), "{}", r.description);
        let e = apply(&Source::parse(short), &facts(4096), &Params::default()).unwrap_err();
        assert!(e.0.contains("a loop while `k < K`"), "{}", e.0);
    }

    /// A causal convolution over time-innermost rows, its taps read through a pointer to
    /// the row's start (the example `causal_conv1d`, shortened).
    const CAUSAL_TAPS: &str = r#"#include <cuda_fp16.h>
#define TAPS 4
__global__ void conv(const __half* x, const float* w, __half* out, int dim, int seqlen, size_t total) {
  const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const int t = (int)(idx % seqlen);
  const int d = (int)((idx / seqlen) % dim);
  const __half* row = x + (idx - t);
  float acc = 0.0f;
  for (int k = 0; k < TAPS; ++k) {
    const int at = t - (TAPS - 1) + k;
    if (at >= 0) acc += w[d * TAPS + k] * __half2float(row[at]);
  }
  out[idx] = __float2half(acc);
}
extern "C" void launch(const __half* x, const float* w, __half* out, int batch, int dim, int seqlen, cudaStream_t st) {
  const size_t total = (size_t)batch * dim * seqlen;
  conv<<<(unsigned)((total + 255) / 256), 256, 0, st>>>(x, w, out, dim, seqlen, total);
}
"#;

    fn causal_facts() -> Facts {
        FactsBuilder::new("launch")
            .buffer("x", "__half", Role::Input, "{batch} * {dim} * {seqlen}", 1 << 24, 1 << 24)
            .buffer("w", "float", Role::Input, "{dim} * 4", 1 << 12, 1 << 12)
            .buffer("out", "__half", Role::Output, "{batch} * {dim} * {seqlen}", 1 << 24, 1 << 24)
            .int("batch", 8, 8)
            .int("dim", 1024, 1024)
            .int("seqlen", 2048, 2048)
            .build()
    }

    #[test]
    fn taps_at_constant_offsets_read_a_register_window_loaded_once_per_run() {
        let r = apply(&Source::parse(CAUSAL_TAPS), &causal_facts(), &Params::default()).unwrap();
        assert!(
            r.description.contains(
                "`x` read through a register window: the run (16B) plus 3 before and 0 after (1 read site(s))"
            ),
            "{}",
            r.description
        );
        let s = &r.source;
        // The run with one wide load, the three before it one by one, never before x[0].
        assert!(s.contains("ns_load(ns_run, x + ns_base);"), "{s}");
        assert!(s.contains("if (ns_at >= 0) ns_win_x[ns_j] = x[ns_at];"), "{s}");
        // Each tap at a place fixed once both loops unroll, under its own condition.
        assert!(
            s.contains("if (at >= 0) acc += ns_spec_w_0 * __half2float(ns_win_x[ns_k + (-3 + 1 * k) + 3]);"),
            "{s}"
        );
        assert!(s.contains("#pragma unroll\n      for (int k = 0; k < TAPS; ++k)"), "{s}");
        // The launcher checks the buffer covers the index range and is aligned.
        assert!(r.guards.iter().any(|g| g == "ns_aligned(x, 16)"), "{:?}", r.guards);
        assert!(
            r.guards.iter().any(|g| g == "(long long)(total) <= (long long)(batch * dim * seqlen)"),
            "{:?}",
            r.guards
        );
        // The scalar path reads memory as the original did.
        assert!(s.contains("if (at >= 0) acc += w[d * TAPS + k] * __half2float(row[at]);"), "{s}");
    }

    #[test]
    fn a_weight_read_under_its_tap_condition_is_read_once_per_run_ahead_of_it() {
        let r = apply(&Source::parse(CAUSAL_TAPS), &causal_facts(), &Params::default()).unwrap();
        let s = &r.source;
        // Ahead of the tap's condition, in the tap loop (its counter is in the index), through
        // the read-only path; the condition then reads the local.
        assert!(
            s.contains(
                "const int at = t - (TAPS - 1) + k;\n          const float ns_spec_w_0 = __ldg(&w[d * TAPS + k]);\n          if (at >= 0) acc += ns_spec_w_0 *"
            ),
            "{s}"
        );
        assert!(
            r.description.contains("`w` read once per run at `w[d * TAPS + k]`, ahead of its condition"),
            "{}",
            r.description
        );
        // The bound: d < dim (d = q % dim, the divisor at least 1), k < TAPS; the largest
        // index against the task's length, and every width the bound relies on.
        let g = &r.guards;
        let has = |x: &str| assert!(g.iter().any(|y| y == x), "{x} not in {g:?}");
        has("(long long)((int)(dim)) >= 1");
        has("(long long)(TAPS) >= 0");
        has("((((long long)((int)(dim)) - 1) * (long long)(TAPS)) + ((long long)(TAPS) - 1)) <= 2147483647LL");
        has("(w) != nullptr");
        has("((((long long)((int)(dim)) - 1) * (long long)(TAPS)) + ((long long)(TAPS) - 1)) < (long long)(dim * 4)");
        assert!(g.iter().any(|y| y.starts_with("ns_disjoint(out") && y.contains(", w, ")), "{g:?}");
        // The fallback kernel reads as the original.
        assert!(s.contains("if (at >= 0) acc += w[d * TAPS + k] * __half2float(row[at]);"), "{s}");
        // The local's name is new to the file.
        let taken = CAUSAL_TAPS.replace("#define TAPS 4", "#define TAPS 4\n// ns_spec_w_0 is a name of ours");
        let r = apply(&Source::parse(&taken), &causal_facts(), &Params::default()).unwrap();
        assert!(r.source.contains("const float ns_spec_w_1 = __ldg(&w[d * TAPS + k]);"), "{}", r.source);
    }

    #[test]
    fn a_conditional_read_is_made_ahead_only_where_its_index_is_bounded_and_nothing_is_written() {
        let with = |from: &str, to: &str| {
            let src = CAUSAL_TAPS.replace(from, to);
            assert_ne!(src, CAUSAL_TAPS, "{from}");
            apply(&Source::parse(&src), &causal_facts(), &Params::default()).unwrap()
        };
        let kept = |r: &crate::Rewrite, case: &str| {
            assert!(!r.source.contains("ns_spec_w"), "{case}: {}", r.source);
            assert!(!r.description.contains("`w` read once per run"), "{case}: {}", r.description);
        };
        let read = "w[d * TAPS + k]";
        // No bound: a difference, a loaded value (`x[d]` itself is bounded, and read ahead),
        // a product of two run-time values.
        kept(&with(read, "w[d * TAPS + k - 1]"), "a difference");
        kept(&with(read, "w[(int)__half2float(x[d]) * TAPS + k]"), "a loaded value");
        kept(&with(read, "w[d * seqlen + k]"), "two run-time factors");
        // A narrow type may wrap.
        kept(
            &with("const int d = (int)((idx / seqlen) % dim);", "const short d = (short)((idx / seqlen) % dim);"),
            "short",
        );
        // A condition that names the buffer (a null check).
        kept(&with("if (at >= 0)", "if (at >= 0 && w != nullptr)"), "null check");
        // A store, an atomic or a call of the file's own function in the statement.
        kept(
            &with(
                "if (at >= 0) acc += w[d * TAPS + k]",
                "if (at >= 0) acc += atomicAdd(&out2[0], 0.f) + w[d * TAPS + k]",
            ),
            "atomic",
        );
        // An unconditional read stays as it is: the compiler makes it once already.
        kept(
            &with(
                "if (at >= 0) acc += w[d * TAPS + k] * __half2float(row[at]);",
                "acc += w[d * TAPS + k] * (at >= 0 ? __half2float(row[at]) : 0.f);",
            ),
            "unconditional",
        );
        // No task length for the buffer.
        let facts = FactsBuilder::new("launch")
            .buffer("x", "__half", Role::Input, "{batch} * {dim} * {seqlen}", 1 << 24, 1 << 24)
            .buffer("out", "__half", Role::Output, "{batch} * {dim} * {seqlen}", 1 << 24, 1 << 24)
            .int("batch", 8, 8)
            .int("dim", 1024, 1024)
            .int("seqlen", 2048, 2048)
            .build();
        kept(&apply(&Source::parse(CAUSAL_TAPS), &facts, &Params::default()).unwrap(), "no length");
        // A launcher that moves the pointer: the task's length is of another span.
        kept(
            &with(
                "const size_t total = (size_t)batch * dim * seqlen;",
                "const size_t total = (size_t)batch * dim * seqlen;\n  w += TAPS;",
            ),
            "moved pointer",
        );
        // A counter whose start may not fit it (an unsigned wrap turned negative).
        kept(
            &with(
                "for (int k = 0; k < TAPS; ++k)",
                "const unsigned u = (unsigned)(seqlen - dim);\n  for (int k = u; k < TAPS; ++k)",
            ),
            "wrapped start",
        );
        // A macro defined after the kernel under a name the kernel declares: the local counts.
        let shadow = CAUSAL_TAPS
            .replace("float acc = 0.0f;", "const int SH = (int)(idx % 8);\n  float acc = 0.0f;")
            .replace("if (at >= 0) acc += w[d * TAPS + k]", "if (SH < 4 && at >= 0) acc += w[d * TAPS + SH]")
            .replace("extern \"C\"", "#define SH 1\nextern \"C\"");
        kept(&apply(&Source::parse(&shadow), &causal_facts(), &Params::default()).unwrap(), "macro after the kernel");
        // `__ldg` has no overload for every type, and a volatile read stays where it is.
        kept(
            &with(
                "__global__ void conv(const __half* x, const float* w",
                "__global__ void conv(const __half* x, const volatile float* w",
            ),
            "volatile",
        );
        // An inclusive bound is the counter's largest value.
        let r = with("for (int k = 0; k < TAPS; ++k)", "for (int k = 0; k <= 3; ++k)");
        assert!(r.source.contains("__ldg(&w[d * TAPS + k])"), "{}", r.source);
        assert!(
            r.guards
                .iter()
                .any(|g| g == "((((long long)((int)(dim)) - 1) * (long long)(TAPS)) + 3LL) < (long long)(dim * 4)"),
            "{:?}",
            r.guards
        );
    }

    #[test]
    fn taps_that_are_no_constant_offset_stay_scalar() {
        let with = |from: &str, to: &str| {
            let src = CAUSAL_TAPS.replace(from, to);
            apply(&Source::parse(&src), &causal_facts(), &Params::default()).unwrap()
        };
        let no_window = |r: &crate::Rewrite, case: &str| {
            assert!(!r.description.contains("register window"), "{case}: {}", r.description);
            assert!(!r.source.contains("ns_win_x"), "{case}: {}", r.source);
        };
        // A stride that is no offset says why.
        let r = with("row[at]", "row[2 * at]");
        no_window(&r, "2 * at");
        assert!(
            r.description.contains("`x` (read at `row[2 * at]`, not a constant offset from `idx`)"),
            "{}",
            r.description
        );
        // A loop that steps by two is no range of taps.
        no_window(&with("++k)", "k += 2)"), "k += 2");
        // `t` changed after the row pointer took it: the two `t`s differ.
        no_window(&with("const int t = (int)(idx % seqlen);", "int t = (int)(idx % seqlen);\n  t += 0;"), "t changed");
        no_window(
            &with(
                "const __half* row = x + (idx - t);",
                "const __half* row = x + (idx - t);\n  int t2 = t; { int t = 0; t2 += t; }",
            ),
            "t shadowed",
        );
        // A narrow unsigned index may wrap on purpose (a ring).
        no_window(
            &with("const int at = t - (TAPS - 1) + k;", "const unsigned char at = t - (TAPS - 1) + k;"),
            "uint8 at",
        );
        // No task length for the buffer: no window, and the reason.
        let bare =
            apply(&Source::parse(CAUSAL_TAPS), &FactsBuilder::new("launch").build(), &Params::default()).unwrap();
        assert!(bare.description.contains("`x` (the task gives no length for it"), "{}", bare.description);
    }

    #[test]
    fn a_tap_past_the_run_loads_up_to_the_bound_only_where_the_buffer_ends_there() {
        let src = r#"__global__ void diff(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = x[i + 1] - x[i];
}
extern "C" void launch(const float* x, float* y, int n, cudaStream_t st) {
  diff<<<(n + 255) / 256, 256, 0, st>>>(x, y, n);
}
"#;
        let facts = FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "{n} + 1", 1 << 20, 1 << 20)
            .buffer("y", "float", Role::Output, "{n}", 1 << 20, 1 << 20)
            .int("n", 1 << 20, 1 << 20)
            .build();
        let r = apply(&Source::parse(src), &facts, &Params::default()).unwrap();
        assert!(
            r.description.contains("`x` read through a register window: the run (16B) plus 0 before and 1 after"),
            "{}",
            r.description
        );
        // x holds n + 1 elements: the fast path needs x to end at n, so it never runs here
        // rather than leaving x[n] unloaded.
        assert!(r.guards.iter().any(|g| g == "(long long)(n) == (long long)(n + 1)"), "{:?}", r.guards);
        assert!(r.source.contains("if (ns_at < (long long)(n)) ns_win_x[0 + 4 + ns_j] = x[ns_at];"), "{}", r.source);
    }

    /// A one-element-per-thread kernel over `n` whose per-element code is `body`, after
    /// `prelude` at file scope.
    fn neighbour_sum(prelude: &str, body: &str) -> crate::Rewrite {
        let src = format!(
            "{prelude}\n__global__ void nb(const float* x, float* y, int n, int s) {{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n  {body}\n}}\nextern \"C\" void launch(const float* x, float* y, int n, int s, cudaStream_t st) {{\n  nb<<<(n + 255) / 256, 256, 0, st>>>(x, y, n, s);\n}}\n"
        );
        let facts = FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "{n}", 1 << 20, 1 << 20)
            .buffer("y", "float", Role::Output, "{n}", 1 << 20, 1 << 20)
            .int("n", 1 << 20, 1 << 20)
            .int("s", 4, 4)
            .build();
        apply(&Source::parse(&src), &facts, &Params::default()).unwrap()
    }

    #[test]
    fn names_with_two_meanings_or_changed_out_of_sight_are_no_offsets() {
        let windowed = neighbour_sum("#define OFF 1", "y[i] = x[i + OFF] + x[i];");
        assert!(windowed.description.contains("plus 0 before and 1 after"), "{}", windowed.description);
        for (prelude, body) in [
            // A parameter or a file constant shadowed by a local in an inner block.
            ("", "const float* xr = x + (i - s);\n  { const int s = 0; y[i] = xr[s] + x[i]; }"),
            ("#define OFF 1", "float a = x[i + OFF];\n  { const int OFF = 0; y[i] = a + x[i - OFF]; }"),
            // Changed by a macro, or bound in a structured binding.
            ("#define ADV(p) ((p) += 1)", "int o = 0;\n  ADV(o);\n  y[i] = x[i + o] + x[i];"),
            ("struct P { int a, b; };", "auto [o, q] = P{1, 0};\n  y[i] = x[i + o] + x[i];"),
        ] {
            let r = neighbour_sum(prelude, body);
            assert!(!r.source.contains("ns_win_x"), "{body}: {}", r.source);
        }
    }

    #[test]
    fn per_element_code_that_reads_the_builtins_is_not_coarsened() {
        let src =
            ADD.replace("if (i < n) c[i] = a[i] + b[i];", "if (i < n) c[i] = a[i] + (threadIdx.x & 1 ? b[i] : 0.f);");
        let e = apply(&Source::parse(&src), &facts(), &Params::default()).unwrap_err();
        assert!(
            e.0.contains("reads `threadIdx`, `blockIdx`, `blockDim` or `gridDim` in its per-element code"),
            "{}",
            e.0
        );
    }

    #[test]
    fn a_condition_naming_what_other_threads_write_keeps_its_read_scalar() {
        for (decl, cond) in
            [("__shared__ float s_lim;", "amax > s_lim"), ("volatile float v_lim = 0.f;", "amax > v_lim")]
        {
            use crate::{Application, RecipeId};
            let f = FactsBuilder::new("launch").build();
            let coop = Application { recipe: RecipeId::Cooperative, params: Params::default() };
            let lanes = crate::apply(&coop, QUANT_ROWS, &f).expect("cooperative applies");
            let src = lanes
                .source
                .replace("float amax = 0.0f;", &format!("{decl}\n  float amax = 0.0f;"))
                .replace("if (amax > 0.0f) v =", &format!("if ({cond}) v ="));
            let vec = Application { recipe: RecipeId::Vectorize, params: Params::default() };
            let r = crate::apply(&vec, &src, &f).unwrap();
            assert!(!r.source.contains(") ns_load(ns_xr"), "{decl}: {}", r.source);
            assert!(r.description.contains("that changes from element to element"), "{decl}: {}", r.description);
        }
    }

    #[test]
    fn float_add_becomes_float4() {
        let r = apply(&Source::parse(ADD), &facts(), &Params::default()).unwrap();
        let s = &r.source;
        assert!(
            s.contains("add_fast<<<(((n + BLOCK - 1) / BLOCK) + 4 - 1) / 4, BLOCK, 0, stream>>>(a, b, c, n);"),
            "{s}"
        );
        assert!(s.contains("ns_load(ns_a, a + ns_base);"), "{s}");
        assert!(s.contains("ns_store(c + ns_base, ns_c);"), "{s}");
        assert!(s.contains("ns_c[ns_k] = ns_a[ns_k] + ns_b[ns_k];"), "{s}");
        assert!(r.guards.iter().any(|g| g == "ns_aligned(a, 16)"), "{:?}", r.guards);
        assert!(r.description.contains("4 elements per thread"), "{}", r.description);
        // The scalar path keeps the original accesses.
        assert!(s.contains("if (i < n) c[i] = a[i] + b[i];"), "{s}");
    }
}
