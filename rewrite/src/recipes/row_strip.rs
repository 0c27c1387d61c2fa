//! Row strips: a 2-D kernel whose thread computes the output at one row
//! (`y = blockIdx.y * blockDim.y + threadIdx.y`, or `y = blockIdx.y`) computes S
//! consecutive rows instead, `(blockIdx.y * blockDim.y + threadIdx.y) * S + r` for r in
//! 0..S, and the launch has S times fewer rows of blocks. Threads still run along x, so a
//! warp's accesses stay as coalesced as they were.
//!
//! The per-row code runs unchanged once per row (its `return`s become `continue`), and
//! only the rows the original grid launched are computed: the kernel gets the original
//! grid's y extent (`ns_grid_y`), so neither the bounds check's form nor a grid that
//! over- or under-covers the image changes which outputs are written.
//!
//! The expert part is the reuse. Where the per-row code reads a buffer it never writes
//! at rows `y + c` for several constant offsets c (a stencil, a sliding window along y:
//! `in[(y + dy) * W + x]` in an unrolled loop over dy, clamped `min(max(y + dy, 0), H - 1)`,
//! or zero borders behind `yy >= 0 && yy < H`), row y + 1 needs all but one of the rows
//! row y read. A strip whose every row passes the kernel's checks keeps those values in
//! a register window: the first row loads its whole window, each later row loads one new
//! row, and the per-row code reads the window. The arithmetic per output is the same,
//! only loads are shared, so the results are bit-identical. Each window value is one the
//! original computes for some row of the strip (a tap's own conditions go with it), so no
//! load reaches where the original did not; strips at the edges take the plain loop.
//! In a whole strip the kernel's checks are known to pass, and in a strip where every
//! window element's condition holds (checked once, for a stencil: no tap falls outside
//! the image) so is each test those conditions are made of: the per-row code gets them
//! as `true`/`false`, so a zero-border tap's FFMA is no longer predicated on two
//! compares, and the window loads without them. A
//! window small enough for registers is loaded whole before the first row, so the strip's
//! loads are in flight together rather than one row's per step.
//!
//! With `cols=4` a thread also computes 4 consecutive columns (its column
//! `x = blockIdx.x * blockDim.x + threadIdx.x`, declared before the row, becomes
//! `ns_col0 + ns_c` per column, and the grid's x extent is divided by 4). A window then
//! holds each row's run of columns and the taps past either end (`x + dx` is
//! `ns_col0 + ns_i`, as a row sum is `ns_row0 + ns_j`), only the elements some output of
//! the strip reads. A run of a 4-byte type is one 16-byte load where, for that row, each
//! of its four is read under its own condition, the four lie side by side and the first
//! is aligned (checked at run time; otherwise one load each), and an output the per-row
//! code writes by its last statement and never reads is stored 16 bytes at a time by the
//! run's last column on the same checks: so an odd width or base costs speed, never a
//! value.

use crate::edit::Edits;
use crate::facts::{Facts, Role};
use crate::launch::{self, Dims};
use crate::pattern::{self, int_literal};
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{self, builtin, descendants, indent_at, named_children, reindent, strip, strip_parens, text};
use crate::version::Change;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "rows",
        values: &["8", "16", "4"],
        doc: "consecutive rows each thread computes (the grid's y extent is divided by it)",
    },
    ParamSpec {
        name: "cols",
        // 1 first: on an H200 (stencil2d_3x3, `index-width -> row-strip:rows=8 ->
        // register-table -> read-only`) 4 columns took 0.1691 ms where 1 took 0.0863 ms,
        // and as the search's first move 0.2698 ms against 0.1367 ms: its strip of 32
        // outputs was issue-bound, each tap's zero-border test predicating its FFMA.
        values: &["1", "4"],
        doc: "consecutive columns each thread computes (the grid's x extent is divided by it); windows read each row's columns 16 bytes at a time",
    },
];

/// The kernel parameter that carries the original grid's y extent.
pub const GRID_Y: &str = "ns_grid_y";
/// The kernel parameter that carries the original grid's x extent, with columns.
pub const GRID_X: &str = "ns_grid_x";
/// The column a window element holds, in the code that fills the window, in the column's
/// own type (`ns_col0` is 64-bit): an `int` column's `x + dx` is an `int` sum, as the
/// original's is.
fn window_col(ty: &str) -> String {
    format!("(({ty})ns_col0 + ns_i)")
}

/// The row a window element holds, in the code that fills the window.
const WINDOW_ROW: &str = "(ns_row0 + ns_j)";

/// The window row clamped to `0..bound-1`.
fn clamped_row(bound: &str) -> String {
    format!("min(max({WINDOW_ROW}, 0), {bound} - 1)")
}

/// Loops a window may sit in are unrolled; past this trip count they are not windowed.
pub(super) const MAX_TRIP: i64 = 32;
/// Windows of at most this many 32-bit registers are loaded whole before the strip's
/// first row; larger ones a row per step, so a wide window does not spill. A 3x3 fp32
/// stencil over 16 rows takes 54 (a `double` or `float2` value takes 2, a `float4` 4).
const MAX_UP_FRONT: i64 = 64;
/// How deep expressions and the locals they name are followed.
const MAX_DEPTH: usize = 48;

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let rows: i64 = params.get(PARAMS, "rows").parse().map_err(|_| NotApplicable::new("rows must be 4, 8 or 16"))?;
    let cols: i64 = match params.get(PARAMS, "cols") {
        "1" => 1,
        "4" => 4,
        _ => return Err(NotApplicable::new("cols must be 1 or 4")),
    };
    super::per_kernel(src, params, |k| plan(src, facts, k, rows, cols))
}

fn decline(k: &Kernel, why: impl std::fmt::Display) -> NotApplicable {
    NotApplicable::new(format!("`{}` {why}", k.name))
}

/// The row index's declaration.
struct RowDecl<'a> {
    /// The declaration statement and its position among the body's statements.
    decl: Node<'a>,
    at: usize,
    name: String,
    /// The declaration's type as written (`const int`) and without qualifiers (`int`).
    decl_type: String,
    value_type: String,
    /// The initializer: `blockIdx.y * blockDim.y + threadIdx.y` or `blockIdx.y`.
    init: Node<'a>,
    /// The row step (`blockDim.y`, a literal or a constant) of the first form.
    step: Option<Node<'a>>,
    /// Declarators of the same declaration before the row's, and after it.
    before: Vec<Node<'a>>,
    after: Vec<Node<'a>>,
}

/// `blockIdx.A * B + threadIdx.A` in any order along `axis` (B: `blockDim.A`, a name, a
/// literal; casts and parentheses allowed), or `blockIdx.A`: the step B, or none for the
/// second form.
fn index_form<'a>(t: &str, e: Node<'a>, axis: char) -> Option<Option<Node<'a>>> {
    let e = strip(e);
    if builtin(t, e) == Some(("blockIdx", axis)) {
        return Some(None);
    }
    let terms = syntax::flatten(t, e, "+");
    if terms.len() != 2 {
        return None;
    }
    let is_t = |n: Node| builtin(t, n) == Some(("threadIdx", axis));
    let product = if is_t(terms[0]) {
        terms[1]
    } else if is_t(terms[1]) {
        terms[0]
    } else {
        return None;
    };
    let factors = syntax::flatten(t, strip(product), "*");
    if factors.len() != 2 {
        return None;
    }
    let is_b = |n: Node| builtin(t, n) == Some(("blockIdx", axis));
    let step = if is_b(factors[0]) {
        factors[1]
    } else if is_b(factors[1]) {
        factors[0]
    } else {
        return None;
    };
    let s = strip(step);
    let ok = builtin(t, s) == Some(("blockDim", axis)) || matches!(s.kind(), "identifier" | "number_literal");
    ok.then_some(Some(s))
}

fn row_decl<'a>(t: &str, k: &Kernel, stmts: &[Node<'a>]) -> Result<RowDecl<'a>, NotApplicable> {
    for (at, s) in stmts.iter().enumerate() {
        if s.kind() != "declaration" {
            continue;
        }
        let mut c = s.walk();
        let declarators: Vec<Node> = s.children_by_field_name("declarator", &mut c).collect();
        for (i, d) in declarators.iter().enumerate() {
            if d.kind() != "init_declarator" {
                continue;
            }
            let (Some(name), Some(init)) = (d.child_by_field_name("declarator"), d.child_by_field_name("value")) else {
                continue;
            };
            if name.kind() != "identifier" {
                continue;
            }
            let Some(step) = index_form(t, init, 'y') else { continue };
            let decl_type = syntax::declaration_type(t, *s).unwrap_or_else(|| "int".into());
            let value_type = syntax::unqualified(&decl_type);
            if value_type.is_empty() {
                return Err(decline(k, format!("declares its row index `{}` without a type", text(t, name))));
            }
            return Ok(RowDecl {
                decl: *s,
                at,
                name: text(t, name).to_string(),
                decl_type,
                value_type,
                init,
                step,
                before: declarators[..i].to_vec(),
                after: declarators[i + 1..].to_vec(),
            });
        }
    }
    Err(decline(
        k,
        "reads `blockIdx.y` but declares no row index `y = blockIdx.y * blockDim.y + threadIdx.y` (or `= blockIdx.y`) among its top-level statements",
    ))
}

fn plan<'k>(
    src: &Source,
    facts: &Facts,
    k: &'k Kernel,
    rows: i64,
    cols: i64,
) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    if k.has_error {
        return Err(decline(k, "contains syntax this parser does not know"));
    }
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| decline(k, "has no body"))?;
    if k.param(GRID_Y).is_some() {
        return Err(decline(k, "computes a strip of rows per thread already"));
    }
    let reads_y = descendants(body).into_iter().any(|d| builtin(t, d) == Some(("blockIdx", 'y')));
    if !reads_y {
        return Err(decline(k, "does not read `blockIdx.y`: a 1-D grid has no rows of blocks to strip"));
    }
    if t[k.body.clone()].contains("__shared__") || syntax::has_barrier(t, body) || syntax::has_warp_primitive(t, body) {
        return Err(decline(
            k,
            "shares data between threads (shared memory, barriers or warp primitives), which a strip of rows per thread would regroup",
        ));
    }
    let stmts = syntax::statements(body);
    let row = row_decl(t, k, &stmts)?;
    let y = row.name.clone();
    coordinates_only_in(src, k, body, (row.init, "row index"), 'y', "a strip would change")?;
    let rest: Vec<Node> = stmts[row.at + 1..].to_vec();
    if rest.iter().all(|s| s.kind() == "comment") && row.after.is_empty() {
        return Err(decline(k, format!("does nothing after computing its row index `{y}`")));
    }
    let launches = src.launches_of(&k.name);
    check_launches(src, k, &row, &launches)?;
    let col = if cols > 1 { Some(columns(src, k, body, &stmts, &row)?) } else { None };
    let ctx = Ctx::new(src, facts, k, &row, col.as_ref(), &stmts, &rest)?;

    let s = rows;
    let flat = text(t, row.init);
    let vt = &row.value_type;
    let row0_type = if vt == "auto" { format!("decltype({flat})") } else { vt.clone() };
    // Clamps of the row are merged only for an `int` row (never below 0 here, and
    // `min`/`max` of two `int`s whatever the clamp's form).
    let clamps = vt == "int";
    let launched = if row.step.is_some() { format!("{GRID_Y} * blockDim.y") } else { GRID_Y.to_string() };
    let mut head = String::new();
    for d in &row.before {
        head.push_str(&format!("{} {};\n", row.decl_type, text(t, *d)));
    }
    head.push_str(&format!(
        "// nightshift: a strip of {s} consecutive rows per thread down each column (the grid has 1/{s} of the rows of blocks); `{GRID_Y}` bounds the rows to those the original grid launched.\nconst {row0_type} ns_row0 = ({row0_type})({flat}) * {s};\nconst {row0_type} ns_rows = ({row0_type})({launched});\n"
    ));
    if let Some(c) = &col {
        // In 64 bits: a thread past the launched columns, near the top of a 32-bit
        // column's range, would wrap to a negative column that passes `col < ns_cols`.
        head.push_str(&format!(
            "// nightshift: and a run of {cols} consecutive columns per thread (the grid has 1/{cols} of the columns of blocks); `{GRID_X}` bounds the columns to those the original grid launched.\nconst long long ns_col0 = (long long)({}) * {cols};\nconst long long ns_cols = (long long){GRID_X} * blockDim.x;\n",
            text(t, c.init)
        ));
    }
    let decl_row = {
        let mut d = format!("{} {y} = ns_row0 + ns_r;", row.decl_type);
        if !row.after.is_empty() {
            let after: Vec<&str> = row.after.iter().map(|d| text(t, *d)).collect();
            d.push_str(&format!("\n{} {};", row.decl_type, after.join(", ")));
        }
        d
    };
    // With columns, the per-row code runs once per column of the run, its column
    // declared where the original declared it.
    let per_column = |code: &str, unroll: &str, bounded: bool, prologue: &str| -> String {
        match &col {
            None => code.to_string(),
            Some(c) => {
                let bound =
                    if bounded { "\n  if (ns_col0 + ns_c >= ns_cols) break;".to_string() } else { String::new() };
                format!(
                    "{prologue}{unroll}\nfor (int ns_c = 0; ns_c < {cols}; ++ns_c) {{\n  {} {} = ns_col0 + ns_c;{bound}\n  {}\n}}",
                    c.decl_type,
                    c.name,
                    reindent(code.trim_end(), "  ")
                )
            }
        }
    };
    let rest_range = match (rest.first(), rest.last()) {
        (Some(a), Some(b)) => a.start_byte()..b.end_byte(),
        _ => row.decl.end_byte()..row.decl.end_byte(),
    };
    let plain_rest = ctx.rest_text(&rest_range, &[], &[])?;

    let windows = match ctx.windows(s, cols, clamps) {
        Ok(ws) if col.is_some() && ws.iter().all(|w| w.cols.is_empty()) => {
            return Err(decline(
                k,
                "reads no buffer at several columns of a row through its register windows: columns per thread would only regroup its threads",
            ))
        }
        Err(why) if col.is_some() => return Err(decline(k, format!("has no rows to share across the strip ({why}), so no columns to load side by side"))),
        w => w,
    };
    let mut stores_wide = false;
    let (code, note) = match windows {
        Ok(ws) => {
            let guard = ctx.guard_text();
            let mut c = head.clone();
            match &col {
                None => c.push_str(&format!("bool ns_whole = ns_row0 + {s} <= ns_rows;\n")),
                Some(_) => {
                    c.push_str(&format!("bool ns_whole = ns_row0 + {s} <= ns_rows && ns_col0 + {cols} <= ns_cols;\n"))
                }
            }
            let mentions_col = col.as_ref().is_some_and(|c| syntax::mentions_word(&guard, &c.name));
            if guard != "true" && !syntax::mentions_word(&guard, &y) && !mentions_col {
                c.push_str(&format!("ns_whole = ns_whole && ({guard});\n"));
            } else if guard != "true" {
                let check = per_column(&format!("ns_whole = ns_whole && ({guard});"), "#pragma unroll", false, "");
                c.push_str(&format!(
                    "#pragma unroll\nfor (int ns_r = 0; ns_r < {s}; ++ns_r) {{\n  {} {y} = ns_row0 + ns_r;\n  {}\n}}\n",
                    row.decl_type,
                    reindent(&check, "  ")
                ));
            }
            let mut decls = String::new();
            let mut fills = String::new();
            let mut edits: Vec<(Range<usize>, String)> = Vec::new();
            let up_front = window_registers(&ws, s) <= MAX_UP_FRONT;
            let fill = |n: usize, w: &Window| if up_front { w.fill_all(n, s) } else { w.fill(n) };
            for (n, w) in ws.iter().enumerate() {
                decls.push_str(&w.declaration(n, s));
                fills.push_str(&fill(n, w));
                for (r, index) in &w.sites {
                    edits.push((r.clone(), format!("ns_w{n}{index}")));
                }
            }
            let pragmas = ctx.pragmas_needed(&ws);
            // An output the run's columns store side by side goes out 16 bytes at a time,
            // unless a window read sits inside its address.
            let store = col
                .as_ref()
                .and(ctx.run_store())
                .filter(|st| !edits.iter().any(|(r, _)| r.start < st.head.end && st.head.start < r.end));
            let mut prologue = String::new();
            if let Some(st) = &store {
                stores_wide = true;
                let ind = indent_at(t, st.head.start);
                edits.push((st.head.clone(), reindent(&st.head(), &ind)));
                edits.push((st.end..st.end, reindent(&st.commit(cols), &ind)));
                prologue = st.declarations(cols);
            }
            // In a whole strip the checks pass at every row and column: the per-row code's
            // own tests of them are known, so the compiler drops them.
            let guard_sites: Vec<KnownTest> = ctx
                .guard
                .iter()
                .filter(|(c, _)| !calls_a_function(t, *c))
                .map(|(c, negated)| (c.byte_range(), *negated))
                .collect();
            let whole_edits = with_known(&edits, &guard_sites);
            let fast_rest =
                per_column(&ctx.rest_text(&rest_range, &whole_edits, &pragmas)?, "#pragma unroll", false, &prologue);
            // A strip inside the image: where every window element's read condition holds
            // (the zero borders' `r >= 0 && r < H` of a stencil), those tests are known too,
            // and the window loads without them.
            let checks: Vec<String> = ws.iter().enumerate().filter_map(|(n, w)| w.inside_check(n, s)).collect();
            let inside = if checks.is_empty() {
                None
            } else {
                let tap_sites: Vec<KnownTest> =
                    ws.iter().flat_map(|w| w.cond_sites.iter().cloned()).chain(guard_sites.iter().cloned()).collect();
                let inside_edits = with_known(&edits, &tap_sites);
                let rest = per_column(
                    &ctx.rest_text(&rest_range, &inside_edits, &pragmas)?,
                    "#pragma unroll",
                    false,
                    &prologue,
                );
                let mut fills = String::new();
                for (n, w) in ws.iter().enumerate() {
                    fills.push_str(&fill(n, &Window { cond: String::new(), ..w.clone() }));
                }
                Some((checks.concat(), fills, rest))
            };
            let how = if up_front {
                "all of them before the first row, so their loads are in flight together"
            } else {
                "one new row per step"
            };
            let strip_code = |fills: &str, rest: &str| -> String {
                let (before, in_step) = if up_front { (fills.trim_end(), "") } else { ("", fills.trim_end()) };
                format!(
                    "{}\n{}#pragma unroll\nfor (int ns_r = 0; ns_r < {s}; ++ns_r) {{\n  {}{}\n  {}\n}}",
                    decls.trim_end(),
                    lines_then(before, ""),
                    lines_then(&reindent(in_step, "  "), "  "),
                    reindent(&decl_row, "  "),
                    reindent(rest.trim_end(), "  "),
                )
            };
            let whole = format!(
                "// nightshift: every row of the strip passes the checks: rows read at several offsets are loaded once into registers, {how}.\n{}",
                strip_code(&fills, &fast_rest)
            );
            let slow = format!(
                "#pragma unroll 1\nfor (int ns_r = 0; ns_r < {s}; ++ns_r) {{\n  {}\n  if ({y} >= ns_rows) break;\n  {}\n}}",
                reindent(&decl_row, "  "),
                reindent(per_column(&plain_rest, "#pragma unroll 1", true, "").trim_end(), "  "),
            );
            match &inside {
                None => c.push_str(&format!(
                    "if (ns_whole) {{\n  {}\n}} else {{\n  {}\n}}",
                    reindent(&whole, "  "),
                    reindent(&slow, "  ")
                )),
                Some((checks, fills, rest)) => c.push_str(&format!(
                    "// nightshift: whether the original reads every element of the strip's windows (no tap of the strip falls outside the image).\nbool ns_inside = ns_whole;\n{checks}if (ns_inside) {{\n  // nightshift: a strip inside: every read of the windows happens, so its conditions are known and the windows load without them.\n  {}\n}} else if (ns_whole) {{\n  {}\n}} else {{\n  {}\n}}",
                    reindent(&strip_code(fills, rest), "  "),
                    reindent(&whole, "  "),
                    reindent(&slow, "  ")
                )),
            }
            let list = summary(&ws, &y);
            let wide = ws.iter().filter(|w| w.vector_type().is_some() && !w.cols.is_empty()).count();
            let mut cols_note = match (&col, wide) {
                (None, _) => String::new(),
                (Some(_), 0) => format!("; {cols} columns per thread, loaded one at a time"),
                (Some(_), _) => format!(
                    "; {cols} columns per thread, each window row's run of columns one 16-byte load where aligned"
                ),
            };
            if let Some(st) = &store {
                cols_note.push_str(&format!(", `{}` stored 16 bytes at a time", st.buffer));
            }
            (
                c,
                format!(
                    "; rows read at several offsets shared in registers across the strip: {}{cols_note}",
                    list.join(", ")
                ),
            )
        }
        Err(why) => {
            let mut c = head.clone();
            c.push_str(&format!(
                "#pragma unroll\nfor (int ns_r = 0; ns_r < {s}; ++ns_r) {{\n  {}\n  if ({y} >= ns_rows) break;\n  {}\n}}",
                reindent(&decl_row, "  "),
                reindent(plain_rest.trim_end(), "  ")
            ));
            (c, format!("; no row reuse: {why}"))
        }
    };
    let mut change = Change::new(k);
    if stores_wide {
        change.helpers.push(&crate::helpers::STORE16);
    }
    let span = row.decl.start_byte()..rest_range.end.max(row.decl.end_byte());
    change.edits.replace(span.clone(), reindent(&code, &indent_at(t, span.start)));
    if let Some(c) = &col {
        // The column is declared per column inside the strip now.
        let r = c.decl.byte_range();
        let line_start = t[..r.start].rfind('\n').map_or(r.start, |i| i + 1);
        let whole_line = t[line_start..r.start].trim().is_empty() && t[r.end..].starts_with('\n');
        change.edits.replace(if whole_line { line_start..r.end + 1 } else { r }, "");
    }
    let mut added = format!("unsigned int {GRID_Y}");
    if col.is_some() {
        added.push_str(&format!(", unsigned int {GRID_X}"));
    }
    if k.params.is_empty() {
        // `()` or `(void)`
        change.edits.replace(k.params_range.clone(), format!("({added})"));
    } else {
        change.edits.insert(k.params_range.end - 1, format!(", {added}"));
    }
    change.extra_args.push("{@grid.y}".to_string());
    change.grid_y = Some(Box::new(move |g: &str| format!("(({g}) + {s} - 1) / {s}")));
    let mut what = format!("{s} rows per thread (grid y extent / {s})");
    if col.is_some() {
        change.extra_args.push("{@grid}".to_string());
        change.grid = Some(Box::new(move |g: &str| format!("(({g}) + {cols} - 1) / {cols}")));
        what = format!("{s} rows x {cols} columns per thread (grid y extent / {s}, x extent / {cols})");
    }
    Ok((change, format!("`{}`: {what}{note}", k.name)))
}

/// The column index of column runs: a declaration of its own before the row's,
/// `x = blockIdx.x * blockDim.x + threadIdx.x` (in any order), that nothing between the two
/// reads.
struct ColDecl<'a> {
    decl: Node<'a>,
    name: String,
    decl_type: String,
    /// The type without qualifiers (`int`, `size_t`).
    value_type: String,
    init: Node<'a>,
}

fn col_decl<'a>(t: &str, k: &Kernel, stmts: &[Node<'a>], row: &RowDecl<'a>) -> Result<ColDecl<'a>, NotApplicable> {
    let none = || {
        decline(
            k,
            "declares no column index `x = blockIdx.x * blockDim.x + threadIdx.x` of its own before its row index: no columns to run",
        )
    };
    let (at, decl, name, init) = stmts[..row.at]
        .iter()
        .enumerate()
        .filter(|(_, s)| s.kind() == "declaration")
        .find_map(|(at, s)| match syntax::single_declarator(t, *s) {
            Some((name, Some(init)))
                if index_form(t, init, 'x').flatten().is_some_and(|b| builtin(t, b) == Some(("blockDim", 'x'))) =>
            {
                Some((at, *s, name, init))
            }
            _ => None,
        })
        .ok_or_else(none)?;
    for s in &stmts[at + 1..row.at] {
        if syntax::mentions(t, *s, &name) {
            return Err(decline(
                k,
                format!("reads its column `{name}` before its row index (`{}`)", syntax::one_line(text(t, *s), 60)),
            ));
        }
    }
    let decl_type = syntax::declaration_type(t, decl).unwrap_or_else(|| "int".into());
    let value_type = syntax::unqualified(&decl_type);
    // A 32-bit unsigned column's `x - 1` wraps at 32 bits before a 64-bit row offset is
    // added; the window adds the terms in another order, so the two would part at x = 0.
    if matches!(value_type.as_str(), "unsigned" | "unsigned int") {
        return Err(decline(
            k,
            format!(
                "declares its column `{name}` as `{decl_type}`: a run's column offsets would wrap at 32 bits where the original's index may not"
            ),
        ));
    }
    if !matches!(value_type.as_str(), "int" | "long" | "long long" | "size_t") {
        return Err(decline(
            k,
            format!("declares its column `{name}` as `{decl_type}`, not an integer this recipe steps"),
        ));
    }
    Ok(ColDecl { decl, name, decl_type, value_type, init })
}

/// The column index for column runs, where the kernel's x coordinates appear only in it.
fn columns<'a>(
    src: &Source,
    k: &Kernel,
    body: Node<'a>,
    stmts: &[Node<'a>],
    row: &RowDecl<'a>,
) -> Result<ColDecl<'a>, NotApplicable> {
    let t = src.text();
    if k.param(GRID_X).is_some() {
        return Err(decline(k, "computes a run of columns per thread already"));
    }
    let col = col_decl(t, k, stmts, row)?;
    if let Some(d) = row.before.iter().chain(&row.after).find(|d| syntax::mentions(t, **d, &col.name)) {
        return Err(decline(
            k,
            format!(
                "declares `{}` beside its row from its column `{}`, which a run of columns declares per column",
                syntax::one_line(text(t, *d), 60),
                col.name
            ),
        ));
    }
    coordinates_only_in(src, k, body, (col.init, "column index"), 'x', "columns per thread would change")?;
    Ok(col)
}

/// The kernel reads its `axis` coordinates (`blockIdx`, `threadIdx`, `gridDim`) only in
/// `index`'s initializer: not elsewhere in its body, through a macro, or in a function it
/// calls, where a thread that computes several of them would change what they read.
fn coordinates_only_in(
    src: &Source,
    k: &Kernel,
    body: Node,
    (init, index): (Node, &str),
    axis: char,
    effect: &str,
) -> Result<(), NotApplicable> {
    let t = src.text();
    let init = init.byte_range();
    let coordinate = |d: Node| match builtin(t, d) {
        Some((o @ ("blockIdx" | "threadIdx" | "gridDim"), a)) if a == axis => Some(o),
        _ => None,
    };
    for d in descendants(body) {
        if let Some(o) = coordinate(d) {
            if !(init.start <= d.start_byte() && d.end_byte() <= init.end) {
                let user = d.parent().map_or(d, |p| if p.kind() == "field_expression" { d } else { p });
                return Err(decline(
                    k,
                    format!(
                        "reads `{o}.{axis}` outside its {index} (in `{}`), which {effect}",
                        syntax::one_line(text(t, user), 60)
                    ),
                ));
            }
        }
    }
    if let Some(m) = builtin_macro(src, k, axis) {
        return Err(decline(k, format!("names `{m}`, a macro that reads the {axis} coordinates")));
    }
    for f in called_device_functions(src, k) {
        if let Some(o) =
            src.node(&f.body, "compound_statement").and_then(|b| descendants(b).into_iter().find_map(coordinate))
        {
            return Err(decline(k, format!("calls `{}`, which reads `{o}.{axis}`", f.name)));
        }
    }
    Ok(())
}

/// The file's functions the kernel calls, directly or through one another (`lane<0>()`
/// and `ns::lane()` call `lane`; `__host__ __device__` ones count).
fn called_device_functions(src: &Source, k: &Kernel) -> Vec<crate::source::HostFn> {
    let t = src.text();
    let device: Vec<crate::source::HostFn> = src.host_functions();
    let bare = |f: &str| -> String {
        let f = f.split('<').next().unwrap_or(f);
        f.rsplit("::").next().unwrap_or(f).trim().to_string()
    };
    let calls = |body: &Range<usize>| -> BTreeSet<String> {
        src.node(body, "compound_statement")
            .map(|b| {
                descendants(b)
                    .into_iter()
                    .filter(|d| d.kind() == "call_expression")
                    .filter_map(|d| d.child_by_field_name("function"))
                    .map(|f| bare(text(t, f)))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut todo: Vec<String> = calls(&k.body).into_iter().collect();
    while let Some(name) = todo.pop() {
        if let Some(f) = device.iter().find(|f| f.name == name) {
            if seen.insert(name) {
                todo.extend(calls(&f.body));
            }
        }
    }
    device.into_iter().filter(|f| seen.contains(&f.name)).collect()
}

/// A macro of the file that reads `blockIdx`, `threadIdx` or `gridDim` along `axis`
/// (itself or through another macro) and that the kernel or a function it calls names:
/// the builtin is read where the tree shows only the macro's name.
fn builtin_macro(src: &Source, k: &Kernel, axis: char) -> Option<String> {
    let t = src.text();
    let joined = t.replace("\\\n", " ");
    let macros: Vec<(String, String)> = joined
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix('#'))
        .filter_map(|l| l.trim_start().strip_prefix("define"))
        .filter_map(|d| {
            let d = d.trim_start();
            let name: String = d.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            (!name.is_empty()).then(|| (name.clone(), d[name.len()..].to_string()))
        })
        .collect();
    let reads_axis = |d: &str| {
        ["blockIdx", "threadIdx", "gridDim"].iter().any(|b| {
            d.match_indices(b).any(|(i, _)| {
                d[i + b.len()..].trim_start().strip_prefix('.').is_some_and(|r| r.trim_start().starts_with(axis))
            })
        })
    };
    let mut reading: BTreeSet<String> =
        macros.iter().filter(|(_, body)| reads_axis(body)).map(|(n, _)| n.clone()).collect();
    loop {
        let more: Vec<String> = macros
            .iter()
            .filter(|(n, body)| !reading.contains(n) && reading.iter().any(|r| syntax::mentions_word(body, r)))
            .map(|(n, _)| n.clone())
            .collect();
        if more.is_empty() {
            break;
        }
        reading.extend(more);
    }
    let mut bodies = vec![&t[k.body.clone()]];
    let called = called_device_functions(src, k);
    bodies.extend(called.iter().map(|f| &t[f.body.clone()]));
    reading.into_iter().find(|m| bodies.iter().any(|b| syntax::mentions_word(b, m)))
}

fn check_launches(
    src: &Source,
    k: &Kernel,
    row: &RowDecl,
    launches: &[crate::source::Launch],
) -> Result<(), NotApplicable> {
    let t = src.text();
    for l in launches {
        let written = l.config.first().cloned().unwrap_or_default();
        match launch::grid(src, l) {
            None => return Err(decline(k, "has a launch without a grid")),
            Some(Dims::Scalar(_)) => {
                return Err(decline(
                    k,
                    format!("reads `blockIdx.y`, but a launch's grid `{written}` is a number: one row of blocks, nothing to strip"),
                ))
            }
            Some(Dims::Unknown { expr, why }) => {
                return Err(decline(
                    k,
                    format!("is launched on the grid `{expr}`: {why}, so its y extent cannot be divided"),
                ))
            }
            Some(g @ Dims::Dim3(_)) => {
                if g.is_one(1) {
                    return Err(decline(
                        k,
                        format!("is launched on the grid `{written}`, whose y extent is 1: one row of blocks, nothing to strip"),
                    ));
                }
            }
        }
        // Rows stepped by a number must step by the block's y extent, or the rows the
        // original grid launched are not the first `grid.y * block.y`.
        if let Some(step) = row.step {
            if builtin(t, step) == Some(("blockDim", 'y')) {
                continue;
            }
            let value = match step.kind() {
                "number_literal" => int_literal(text(t, step)),
                _ => launch::file_scope_size(src, text(t, step), k.range.start).value(),
            };
            let block_y = launch::block(src, l).and_then(|b| match b.component(1) {
                Some(c) => c.size.value(),
                None if !matches!(b, Dims::Unknown { .. }) => Some(1),
                None => None,
            });
            if value.is_none() || value != block_y {
                return Err(decline(
                    k,
                    format!(
                        "steps its rows by `{}`, which this file does not show equal to the y extent of the block `{}`",
                        text(t, step),
                        l.config.get(1).map(String::as_str).unwrap_or("")
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A constant-bound loop of the per-row code: `for (T v = LO; v <= HI; ++v)` (or `<`,
/// `v++`, `v += 1`) with bounds the file fixes, a body that leaves `v` alone and does not
/// break out.
#[derive(Debug, Clone)]
pub(super) struct ConstLoop {
    pub(super) var: String,
    pub(super) ty: String,
    pub(super) lo: i64,
    pub(super) hi: i64,
    /// Where it starts and ends, whether `#pragma unroll` must be put before it (it has
    /// none), and whether it needs braces around it for that (it is another statement's
    /// body).
    pub(super) start: usize,
    end: usize,
    pub(super) needs_pragma: bool,
    pub(super) braced: bool,
    /// Why a window cannot sit in it, where it cannot.
    pub(super) unfit: Option<String>,
}

/// A row offset `sign * var + k`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Offset {
    var: Option<(bool, String)>,
    k: i64,
}

/// What rendering an expression for a window found.
#[derive(Default)]
struct Found {
    offsets: Vec<Offset>,
    /// Column offsets, with column runs.
    cols: Vec<Offset>,
    /// Loop variables named outside row sums.
    vars: BTreeSet<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// The row stays the row (the checks, evaluated per row).
    Guard,
    /// Row sums become the window row `ns_row0 + ns_j`; with `clamp`, clamps of the row
    /// and the bare row become one clamp (rows stay within 0..B-1).
    Tap { clamp: bool },
}

struct Local<'a> {
    init: Node<'a>,
    ty: String,
}

struct Ctx<'a> {
    src: &'a Source,
    t: &'a str,
    k: &'a Kernel,
    y: String,
    /// The column and its type, with column runs: per column like the row is per row.
    x: Option<String>,
    x_type: String,
    /// The row's type without qualifiers.
    row_type: String,
    rest: Vec<Node<'a>>,
    /// Locals of the per-row code the windows may inline: declared once, with an
    /// initializer, never assigned.
    locals: BTreeMap<String, Local<'a>>,
    /// Names the per-row code declares (locals and loop variables).
    declared: BTreeSet<String>,
    /// Names declared before the row index (parameters and locals): they hold still.
    outside: BTreeSet<String>,
    loops: BTreeMap<String, ConstLoop>,
    /// Buffers the kernel only reads, with their element types.
    readonly: BTreeMap<String, String>,
    /// Local pointers that alias one of those (`const float* img = x + plane;`): alias to
    /// buffer.
    aliases: BTreeMap<String, String>,
    /// The checks every row must pass (the early returns' conditions negated, the
    /// wrapping ifs' conditions), the statements that make them, and the row's bound.
    guard: Vec<(Node<'a>, bool)>,
    guard_stmts: BTreeSet<usize>,
    bound: Option<String>,
    /// Some row of the per-row code is clamped with `min`/`max`.
    clamped: bool,
}

impl<'a> Ctx<'a> {
    fn new(
        src: &'a Source,
        facts: &Facts,
        k: &'a Kernel,
        row: &RowDecl<'a>,
        col: Option<&ColDecl<'a>>,
        stmts: &[Node<'a>],
        rest: &[Node<'a>],
    ) -> Result<Ctx<'a>, NotApplicable> {
        let t = src.text();
        let y = row.name.clone();
        let mut outside: BTreeSet<String> = k.params.iter().map(|p| p.name.clone()).collect();
        for s in &stmts[..row.at] {
            outside.extend(syntax::declared_names(t, *s));
        }
        let x = col.map(|c| c.name.clone());
        if let Some(x) = &x {
            outside.remove(x);
        }
        for d in &row.before {
            outside.extend(declarator_name(t, *d));
        }
        let mut declared: BTreeSet<String> = BTreeSet::new();
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let mut decls: Vec<(String, Node<'a>, String)> = Vec::new();
        let mut add = |name: String, d: Node<'a>, ty: String, decls: &mut Vec<(String, Node<'a>, String)>| {
            *counts.entry(name.clone()).or_default() += 1;
            decls.push((name, d, ty));
        };
        for d in &row.after {
            if let Some(n) = declarator_name(t, *d) {
                add(n, *d, declarator_type(t, row.decl, *d), &mut decls);
            }
        }
        for s in rest {
            for d in descendants(*s) {
                if d.kind() != "declaration" {
                    continue;
                }
                let mut c = d.walk();
                let ds: Vec<Node> = d.children_by_field_name("declarator", &mut c).collect();
                for x in ds {
                    if let Some(n) = declarator_name(t, x) {
                        add(n, x, declarator_type(t, d, x), &mut decls);
                    }
                }
            }
        }
        for (n, _, _) in &decls {
            declared.insert(n.clone());
        }
        if let Some(c) = std::iter::once(&y).chain(&x).find(|c| declared.contains(*c)) {
            return Err(decline(k, format!("declares another `{c}` in its per-row code")));
        }
        // The per-row code changing its row or column: declined with what it changes.
        let changes_coordinate = |name: &str, d: Node| {
            let what = if name == y {
                "row index"
            } else if x.as_deref() == Some(name) {
                "column"
            } else {
                return None;
            };
            Some(decline(k, format!("changes its {what} `{name}` (`{}`)", syntax::one_line(text(t, d), 60))))
        };
        // Each row starts from the same state: the per-row code changes no variable
        // declared before it.
        let mut assigned: BTreeSet<String> = BTreeSet::new();
        let pointers: BTreeSet<String> = pattern::pointers(src, k).into_iter().map(|(n, _, _)| n).collect();
        // The per-row code's own loop counters: their addresses are not a local's.
        let loop_vars: BTreeSet<String> = rest
            .iter()
            .flat_map(|s| descendants(*s))
            .filter(|f| f.kind() == "for_statement")
            .filter_map(|f| f.child_by_field_name("initializer"))
            .flat_map(|i| descendants(i))
            .filter(|d| d.kind() == "init_declarator")
            .filter_map(|d| declarator_name(t, d))
            .collect();
        for s in rest {
            // A variable whose address the per-row code hands out, or that it binds to a
            // reference parameter, may change wherever that goes.
            for (name, d) in syntax::assigned(t, *s) {
                if !matches!(d.kind(), "pointer_expression" | "call_expression") {
                    continue;
                }
                if let Some(why) = changes_coordinate(&name, d) {
                    return Err(why);
                }
                if outside.contains(&name) {
                    return Err(decline(
                        k,
                        format!(
                            "changes `{name}` in its per-row code (`{}` hands it out) but declares it before its row index: a strip's next row would start from the last row's `{name}`",
                            syntax::one_line(text(t, d), 60)
                        ),
                    ));
                }
                // Only a local of the per-row code's own may have its address taken there
                // (it is then never inlined into a test): a loop counter or a file-scope
                // variable could change under a test made known.
                if d.kind() == "pointer_expression" && (!declared.contains(&name) || loop_vars.contains(&name)) {
                    return Err(decline(
                        k,
                        format!(
                            "takes the address of `{name}` in its per-row code, through which it could change unseen"
                        ),
                    ));
                }
            }
            for d in descendants(*s) {
                let target = match d.kind() {
                    "assignment_expression" => d.child_by_field_name("left"),
                    "update_expression" => d.child_by_field_name("argument"),
                    _ => None,
                };
                let Some(target) = target else { continue };
                let mut base = strip_parens(target);
                let mut through = false;
                loop {
                    match base.kind() {
                        "subscript_expression" | "field_expression" => {
                            through = true;
                            match base.child_by_field_name("argument") {
                                Some(a) => base = strip_parens(a),
                                None => break,
                            }
                        }
                        "pointer_expression" => {
                            through = true;
                            match base.child_by_field_name("argument") {
                                Some(a) => base = strip_parens(a),
                                None => break,
                            }
                        }
                        _ => break,
                    }
                }
                if base.kind() != "identifier" {
                    continue;
                }
                let name = text(t, base).to_string();
                if let Some(why) = changes_coordinate(&name, d) {
                    return Err(why);
                }
                if through && pointers.contains(&name) {
                    continue;
                }
                // (Where the per-row code also declares the name, which one it changes is
                // not told apart: declined all the same.)
                if outside.contains(&name) {
                    return Err(decline(
                        k,
                        format!(
                            "changes `{name}` in its per-row code but declares it before its row index: a strip's next row would start from the last row's `{name}`"
                        ),
                    ));
                }
                assigned.insert(name);
            }
        }
        for s in rest {
            for d in descendants(*s) {
                match d.kind() {
                    "return_statement" if inside_loop(d, rest) => {
                        return Err(decline(
                            k,
                            "returns from inside a loop of its per-row code, where a strip could not end one row alone",
                        ));
                    }
                    "goto_statement" | "labeled_statement" => {
                        return Err(decline(k, "jumps with `goto` in its per-row code"));
                    }
                    "lambda_expression" => {
                        return Err(decline(k, "defines a lambda in its per-row code"));
                    }
                    // A name changed through another name: a test rendered from a local's
                    // initializer, a bound or a loop variable that holds still, would not
                    // be what runs (and a strip's known tests would be wrong).
                    "reference_declarator" if !const_declaration(t, d) => {
                        return Err(decline(
                            k,
                            format!(
                                "binds a reference in its per-row code (`{}`), through which what it reads could change unseen",
                                syntax::one_line(text(t, d), 40)
                            ),
                        ));
                    }
                    _ => {}
                }
            }
        }
        let mut locals = BTreeMap::new();
        for (n, d, ty) in &decls {
            if counts.get(n) != Some(&1) || assigned.contains(n) || outside.contains(n) {
                continue;
            }
            let Some(v) = d.child_by_field_name("value") else { continue };
            if d.kind() != "init_declarator" || matches!(v.kind(), "argument_list" | "initializer_list") {
                continue;
            }
            let addressed = rest.iter().any(|s| {
                descendants(*s).into_iter().any(|x| {
                    x.kind() == "pointer_expression"
                        && x.child(0).is_some_and(|o| text(t, o) == "&")
                        && x.child_by_field_name("argument").is_some_and(|a| syntax::is_ident(t, a, n))
                })
            });
            if !addressed {
                locals.insert(n.clone(), Local { init: v, ty: ty.clone() });
            }
        }
        let mut loops = BTreeMap::new();
        for s in rest {
            for f in descendants(*s) {
                if f.kind() != "for_statement" {
                    continue;
                }
                if let Some(l) = const_loop(src, k, f) {
                    if counts.get(&l.var) == Some(&1) && !outside.contains(&l.var) {
                        loops.insert(l.var.clone(), l);
                    }
                }
            }
        }
        let (readonly, aliases) = readonly_buffers(src, facts, k);
        let mut ctx = Ctx {
            src,
            t,
            k,
            y,
            x,
            x_type: col.map(|c| c.value_type.clone()).unwrap_or_default(),
            row_type: row.value_type.clone(),
            rest: rest.to_vec(),
            locals,
            declared,
            outside,
            loops,
            readonly,
            aliases,
            guard: Vec::new(),
            guard_stmts: BTreeSet::new(),
            bound: None,
            clamped: false,
        };
        ctx.find_guard();
        ctx.clamped = ctx.finds_clamp();
        Ok(ctx)
    }

    /// The per-row code as text: `return`s become `continue`, with the given edits (window
    /// reads) and `#pragma unroll` before the given loops.
    fn rest_text(
        &self,
        range: &Range<usize>,
        edits: &[(Range<usize>, String)],
        pragmas: &[&ConstLoop],
    ) -> Result<String, NotApplicable> {
        let t = self.t;
        let mut e = Edits::new();
        for s in &self.rest {
            for d in descendants(*s) {
                if d.kind() == "return_statement" && !inside_loop(d, &self.rest) {
                    e.replace(d.start_byte() - range.start..d.end_byte() - range.start, "continue;");
                }
            }
        }
        for (r, new) in edits {
            e.replace(r.start - range.start..r.end - range.start, new.clone());
        }
        for l in pragmas {
            let ind = indent_at(t, l.start);
            if l.braced {
                e.insert(l.start - range.start, format!("#pragma unroll\n{ind}"));
            } else {
                e.insert(l.start - range.start, format!("{{\n{ind}#pragma unroll\n{ind}"));
                e.insert(l.end - range.start, format!("\n{ind}}}"));
            }
        }
        let out = e
            .apply(&t[range.clone()])
            .map_err(|_| decline(self.k, "has per-row code this recipe could not rewrite"))?;
        Ok(dedent(&out, &indent_at(t, range.start)))
    }

    /// The checks: leading `if (C) return;` statements and a wrapping `if (C) { ... }` at
    /// the end (ifs directly inside it too), where C reads no memory.
    fn find_guard(&mut self) {
        let t = self.t;
        let stmts: Vec<Node<'a>> = self.rest.iter().copied().filter(|s| s.kind() != "comment").collect();
        for s in &stmts {
            if s.kind() != "if_statement" || s.child_by_field_name("alternative").is_some() {
                continue;
            }
            let Some(cons) = s.child_by_field_name("consequence") else { continue };
            let inner: Vec<Node> =
                pattern::block_statements(cons).into_iter().filter(|c| c.kind() != "comment").collect();
            let returns = inner.len() == 1
                && inner[0].kind() == "return_statement"
                && named_children(inner[0]).iter().all(|c| c.kind() == "comment");
            if !returns {
                continue;
            }
            let Some(c) = pattern::condition(*s) else { continue };
            if self.render(c, Mode::Guard, &mut Found::default(), 0).is_ok() {
                self.guard.push((c, true));
                self.guard_stmts.insert(s.id());
            }
        }
        let mut last = stmts.last().copied();
        while let Some(s) = last {
            if s.kind() != "if_statement" || s.child_by_field_name("alternative").is_some() {
                break;
            }
            let (Some(c), Some(cons)) = (pattern::condition(s), s.child_by_field_name("consequence")) else { break };
            if self.guard_stmts.contains(&s.id()) {
                break;
            }
            if self.render(c, Mode::Guard, &mut Found::default(), 0).is_err() {
                break;
            }
            self.guard.push((c, false));
            self.guard_stmts.insert(s.id());
            let inner: Vec<Node> =
                pattern::block_statements(cons).into_iter().filter(|c| c.kind() != "comment").collect();
            last = if inner.len() == 1 { Some(inner[0]) } else { None };
        }
        // The row's bound: `y < B` in a wrapping check, `y >= B` in a returning one.
        for (c, negated) in &self.guard {
            let op = if *negated { "||" } else { "&&" };
            for term in syntax::flatten(t, *c, op) {
                let Some((o, l, r)) = syntax::binary(t, term) else { continue };
                let b = match (negated, o) {
                    (false, "<") | (true, ">=") if syntax::is_ident(t, l, &self.y) => Some(r),
                    (false, ">") | (true, "<=") if syntax::is_ident(t, r, &self.y) => Some(l),
                    _ => None,
                };
                let Some(b) = b.map(strip_parens) else { continue };
                if b.kind() == "identifier" {
                    let name = text(t, b);
                    let int_param = self.k.param(name).is_some_and(|p| !p.pointer && p.base == "int");
                    if int_param || self.constant(b).is_some() {
                        self.bound = Some(name.to_string());
                    }
                } else if self.constant(b).is_some() {
                    self.bound = Some(text(t, b).to_string());
                }
            }
        }
    }

    /// The checks as one condition over the row.
    fn guard_text(&self) -> String {
        let parts: Vec<String> = self
            .guard
            .iter()
            .filter_map(|(c, negated)| {
                let s = self.render(*c, Mode::Guard, &mut Found::default(), 0).ok()?;
                Some(if *negated { format!("!({s})") } else { format!("({s})") })
            })
            .collect();
        if parts.is_empty() {
            "true".into()
        } else {
            parts.join(" && ")
        }
    }

    /// Whether some row of the per-row code (or of a local it reads) is an argument of `min`/`max`.
    fn finds_clamp(&self) -> bool {
        let t = self.t;
        self.rest.iter().any(|s| {
            descendants(*s).into_iter().any(|d| {
                d.kind() == "call_expression"
                    && d.child_by_field_name("function").is_some_and(|f| matches!(text(t, f), "min" | "max"))
                    && d.child_by_field_name("arguments").is_some_and(|a| {
                        named_children(a).into_iter().any(|x| self.is_row_sum(x) || self.names_row_local(x))
                    })
            })
        })
    }

    fn names_row_local(&self, n: Node) -> bool {
        let n = strip_parens(n);
        n.kind() == "identifier"
            && self
                .locals
                .get(text(self.t, n))
                .is_some_and(|l| self.is_row_sum(l.init) || syntax::mentions(self.t, l.init, &self.y))
    }

    /// `y`, or a sum with `y` as one of its terms.
    fn is_row_sum(&self, n: Node) -> bool {
        self.is_sum_of(n, &self.y)
    }

    /// `name`, or a sum with `name` as one of its terms.
    fn is_sum_of(&self, n: Node, name: &str) -> bool {
        let mut terms = Vec::new();
        signed_terms(self.t, n, true, &mut terms);
        terms.iter().any(|(_, e)| syntax::is_ident(self.t, *e, name) && strip_parens(*e).kind() == "identifier")
    }

    /// A value this file fixes at compile time (a literal, a macro, a file-scope constant,
    /// arithmetic on them), unless a local or parameter of the kernel takes its name.
    fn constant(&self, n: Node) -> Option<i64> {
        let t = self.t;
        let n = strip_parens(n);
        match n.kind() {
            "number_literal" => int_literal(text(t, n)),
            "identifier" => {
                let name = text(t, n);
                if self.declared.contains(name) || self.outside.contains(name) {
                    return None;
                }
                launch::file_scope_size(self.src, name, self.k.range.start).value()
            }
            "unary_expression" => {
                let op = n.child(0).map(|o| text(t, o))?;
                let v = self.constant(n.child_by_field_name("argument")?)?;
                match op {
                    "-" => v.checked_neg(),
                    "+" => Some(v),
                    _ => None,
                }
            }
            "binary_expression" => {
                let (op, l, r) = syntax::binary(t, n)?;
                let (a, b) = (self.constant(l)?, self.constant(r)?);
                match op {
                    "+" => a.checked_add(b),
                    "-" => a.checked_sub(b),
                    "*" => a.checked_mul(b),
                    "/" => a.checked_div(b),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// An expression of the per-row code as text the window code can evaluate: locals of
    /// the per-row code inlined (cast to their type), and in `Tap` mode every row sum
    /// `y + c` as `ns_row0 + ns_j`, its offset noted. Fails on anything that reads memory,
    /// has an effect, or names a value that could change.
    fn render(&self, n: Node, mode: Mode, found: &mut Found, depth: usize) -> Result<String, String> {
        let t = self.t;
        if depth > MAX_DEPTH {
            return Err("nests too deeply to follow".into());
        }
        match n.kind() {
            "identifier" => {
                let name = text(t, n);
                if self.x.as_deref() == Some(name) {
                    return match mode {
                        Mode::Guard => Ok(name.to_string()),
                        Mode::Tap { .. } => self.col_sum(n, mode, found, depth),
                    };
                }
                if name == self.y {
                    return match (mode, &self.bound) {
                        (Mode::Guard, _) => Ok(name.to_string()),
                        // The bare row is its own clamp: every row that passes the checks
                        // lies in 0..B-1.
                        (Mode::Tap { clamp: true }, Some(b)) => {
                            found.offsets.push(Offset { var: None, k: 0 });
                            Ok(clamped_row(b))
                        }
                        (Mode::Tap { .. }, _) => self.row_sum(n, mode, found, depth),
                    };
                }
                if let Some(l) = self.locals.get(name) {
                    let init = self.render(l.init, mode, found, depth + 1)?;
                    // A local of the row's type holding the window row (or its clamp) is
                    // that row: no cast, so reads through it and reads of the row itself
                    // are one window.
                    let ty = syntax::unqualified(&l.ty);
                    if ty == "auto" || ty.contains("auto ") {
                        return Err(format!("reads `{name}`, declared `auto`, whose type the recipe cannot spell"));
                    }
                    if ty == self.row_type
                        && (init == WINDOW_ROW || self.bound.as_ref().is_some_and(|b| init == clamped_row(b)))
                    {
                        return Ok(init);
                    }
                    return Ok(format!("(({ty})({init}))"));
                }
                if self.loops.contains_key(name) {
                    found.vars.insert(name.to_string());
                    return Ok(name.to_string());
                }
                if self.declared.contains(name) {
                    return Err(format!("reads `{name}`, which the per-row code changes or declares more than once"));
                }
                if self.outside.contains(name) || self.constant(n).is_some() {
                    return Ok(name.to_string());
                }
                Err(format!("reads `{name}`, which this recipe cannot show holds still"))
            }
            "field_expression" => {
                if builtin(t, n).is_some() {
                    return Ok(text(t, n).to_string());
                }
                let arg = n.child_by_field_name("argument").map(strip_parens);
                let op = n.child_by_field_name("operator").map(|o| text(t, o)).unwrap_or(".");
                match arg {
                    Some(a) if op == "." && a.kind() == "identifier" && self.outside.contains(text(t, a)) => {
                        Ok(text(t, n).to_string())
                    }
                    _ => Err(format!("reads `{}`", syntax::one_line(text(t, n), 60))),
                }
            }
            "subscript_expression" => Err(format!("reads memory (`{}`)", syntax::one_line(text(t, n), 60))),
            "pointer_expression" => {
                Err(format!("reads memory or takes an address (`{}`)", syntax::one_line(text(t, n), 60)))
            }
            "assignment_expression"
            | "update_expression"
            | "comma_expression"
            | "lambda_expression"
            | "new_expression"
            | "delete_expression"
            | "string_literal"
            | "compound_literal_expression"
            | "gnu_asm_expression" => Err(format!(
                "has an effect or a form this recipe does not read (`{}`)",
                syntax::one_line(text(t, n), 60)
            )),
            "call_expression" => {
                let f = n.child_by_field_name("function").map(|f| text(t, f)).unwrap_or("");
                if !self.pure_function(f) {
                    return Err(format!("calls `{f}`, which this recipe cannot show is pure"));
                }
                if let Mode::Tap { clamp: true } = mode {
                    if let Some(s) = self.canonical_clamp(n, found, depth)? {
                        return Ok(s);
                    }
                }
                let args = n.child_by_field_name("arguments").ok_or("has a call without arguments")?;
                Ok(format!("{f}{}", self.render_children(args, mode, found, depth)?))
            }
            "binary_expression" if matches!(mode, Mode::Tap { .. }) => {
                let op = n.child_by_field_name("operator").map(|o| text(t, o)).unwrap_or("");
                if matches!(op, "+" | "-") && self.is_row_sum(n) {
                    return self.row_sum(n, mode, found, depth);
                }
                if matches!(op, "+" | "-") && self.is_col_sum(n) {
                    return self.col_sum(n, mode, found, depth);
                }
                self.render_children(n, mode, found, depth)
            }
            _ => self.render_children(n, mode, found, depth),
        }
    }

    fn render_children(&self, n: Node, mode: Mode, found: &mut Found, depth: usize) -> Result<String, String> {
        let t = self.t;
        let kids = syntax::children(n);
        if kids.is_empty() {
            return Ok(text(t, n).to_string());
        }
        let mut out = String::new();
        let mut pos = n.start_byte();
        for c in kids {
            out.push_str(t.get(pos..c.start_byte()).unwrap_or(""));
            if c.kind() == "comment" {
                out.push(' ');
            } else if c.is_named() {
                out.push_str(&self.render(c, mode, found, depth + 1)?);
            } else {
                out.push_str(text(t, c));
            }
            pos = c.end_byte();
        }
        out.push_str(t.get(pos..n.end_byte()).unwrap_or(""));
        Ok(out)
    }

    fn pure_function(&self, f: &str) -> bool {
        if INTEGER_BUILTINS.contains(&f) {
            return true;
        }
        // A device function of this file that takes no pointer or reference.
        if f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !defines_function_macro(self.src, f) {
            return self.src.host_functions().into_iter().any(|h| {
                h.name == f && h.is_device && h.param_types.iter().all(|ty| !ty.contains('*') && !ty.contains('&'))
            });
        }
        false
    }

    /// The terms of a row sum: the row once with `+`, constants, at most one loop variable
    /// (the offset), and other terms kept as they are.
    fn row_sum(&self, n: Node, mode: Mode, found: &mut Found, depth: usize) -> Result<String, String> {
        let (offset, others) = self.row_offset(n, mode, found, depth)?;
        found.offsets.push(offset);
        Ok(format!("{WINDOW_ROW}{others}"))
    }

    fn row_offset(&self, n: Node, mode: Mode, found: &mut Found, depth: usize) -> Result<(Offset, String), String> {
        self.coordinate_sum(n, (&self.y, "row"), false, mode, found, depth)
    }

    /// The terms of a sum with the coordinate `name` once, with `+`: the constants and at
    /// most one loop variable as its offset, the other terms rendered as they are. With
    /// `int_offsets`, an offset of another type than `int` (an unsigned loop variable, a
    /// `1u`) fails: the window adds the offsets as `int`, which would change the type and
    /// the wrap of the original's sum.
    fn coordinate_sum(
        &self,
        n: Node,
        (name, what): (&str, &str),
        int_offsets: bool,
        mode: Mode,
        found: &mut Found,
        depth: usize,
    ) -> Result<(Offset, String), String> {
        let t = self.t;
        let mut terms = Vec::new();
        signed_terms(t, n, true, &mut terms);
        let mut seen = 0;
        let mut offset = Offset { var: None, k: 0 };
        let mut others = String::new();
        for (plus, term) in terms {
            let term = strip_parens(term);
            if term.kind() == "identifier" && text(t, term) == name {
                if !plus {
                    return Err(format!("subtracts the {what} `{name}`"));
                }
                seen += 1;
                continue;
            }
            let suffixed =
                term.kind() == "number_literal" && text(t, term).chars().any(|c| matches!(c, 'u' | 'U' | 'l' | 'L'));
            if int_offsets && suffixed {
                return Err(format!("adds `{}`, not an `int`, to the {what} `{name}`", text(t, term)));
            }
            if let Some(v) = self.constant(term) {
                offset.k = if plus { offset.k.checked_add(v) } else { offset.k.checked_sub(v) }
                    .ok_or_else(|| "overflows".to_string())?;
                continue;
            }
            if let Some(l) = self.loops.get(text(t, term)).filter(|_| term.kind() == "identifier") {
                if int_offsets && syntax::unqualified(&l.ty) != "int" {
                    return Err(format!("adds `{}`, a `{}`, to the {what} `{name}`", l.var, l.ty));
                }
                if offset.var.is_none() {
                    offset.var = Some((!plus, l.var.clone()));
                    continue;
                }
            }
            let r = self.render(term, mode, found, depth + 1)?;
            others.push_str(&format!(" {} ({r})", if plus { "+" } else { "-" }));
        }
        if seen != 1 {
            return Err(format!("adds the {what} `{name}` to itself"));
        }
        Ok((offset, others))
    }

    /// `x`, or a sum with the column `x` as one of its terms.
    fn is_col_sum(&self, n: Node) -> bool {
        self.x.as_ref().is_some_and(|x| self.is_sum_of(n, x))
    }

    /// A column sum as the window column `ns_col0 + ns_i`: the column once with `+`,
    /// constants, at most one loop variable, and other terms kept as they are.
    fn col_sum(&self, n: Node, mode: Mode, found: &mut Found, depth: usize) -> Result<String, String> {
        let x = self.x.as_deref().unwrap_or_default();
        let (offset, others) = self.coordinate_sum(n, (x, "column"), true, mode, found, depth)?;
        found.cols.push(offset);
        Ok(format!("{}{others}", window_col(&self.x_type)))
    }

    /// `min(max(ROW, 0), B - 1)` for a clamp of a row sum (either order, or one side) that
    /// equals it for every row that passes the checks; the bare row too (`0 <= y < B`).
    fn canonical_clamp(&self, n: Node, found: &mut Found, depth: usize) -> Result<Option<String>, String> {
        let Some(bound) = &self.bound else { return Ok(None) };
        let Some((inner, lo, hi)) = self.clamp_of(n, bound, 0) else { return Ok(None) };
        let mut f = Found::default();
        let (offset, others) = match self.row_offset(inner, Mode::Tap { clamp: false }, &mut f, depth + 1) {
            Ok(x) => x,
            Err(_) => return Ok(None),
        };
        if !others.is_empty() || !f.vars.is_empty() {
            return Ok(None);
        }
        let (min, max) = self.offset_range(&offset);
        let fits = match (lo, hi) {
            (true, true) => true,
            (true, false) => max <= 0,
            (false, true) => min >= 0,
            (false, false) => false,
        };
        if !fits {
            return Ok(None);
        }
        found.offsets.push(offset);
        Ok(Some(clamped_row(bound)))
    }

    /// `max(E, 0)`, `min(E, B - 1)` (either argument order), nested: the row sum E inside
    /// and which sides are clamped.
    fn clamp_of(&self, n: Node<'a>, bound: &str, depth: usize) -> Option<(Node<'a>, bool, bool)> {
        let t = self.t;
        if depth > 4 {
            return None;
        }
        let n = strip_parens(n);
        if n.kind() == "identifier" {
            let l = self.locals.get(text(t, n))?;
            // A local of the per-row code holding the clamp, as an `int` like the row.
            if syntax::unqualified(&l.ty) != "int" {
                return None;
            }
            return self.clamp_of(l.init, bound, depth + 1);
        }
        if n.kind() != "call_expression" {
            return None;
        }
        let f = text(t, n.child_by_field_name("function")?);
        let args: Vec<Node> =
            named_children(n.child_by_field_name("arguments")?).into_iter().filter(|a| a.kind() != "comment").collect();
        if args.len() != 2 {
            return None;
        }
        let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace() && *c != '(' && *c != ')').collect::<String>();
        let is_bound = |a: Node| match f {
            "max" => self.constant(a) == Some(0),
            "min" => squash(text(t, a)) == squash(&format!("{bound}-1")),
            _ => false,
        };
        let inner = if is_bound(args[1]) {
            args[0]
        } else if is_bound(args[0]) {
            args[1]
        } else {
            return None;
        };
        let (e, lo, hi) = if self.is_row_sum(inner) && !self.is_clamp_call(inner) {
            (strip_parens(inner), false, false)
        } else {
            self.clamp_of(inner, bound, depth + 1)?
        };
        Some((e, lo || f == "max", hi || f == "min"))
    }

    fn is_clamp_call(&self, n: Node) -> bool {
        strip_parens(n).kind() == "call_expression"
    }

    fn offset_range(&self, o: &Offset) -> (i64, i64) {
        match &o.var {
            None => (o.k, o.k),
            Some((neg, v)) => {
                let l = &self.loops[v];
                if *neg {
                    (o.k - l.hi, o.k - l.lo)
                } else {
                    (o.k + l.lo, o.k + l.hi)
                }
            }
        }
    }

    /// The register windows: every read of a buffer the kernel only reads, at a row
    /// offset, grouped by what it reads; those read at two or more offsets.
    fn windows(&self, s: i64, v: i64, clamp: bool) -> Result<Vec<Window>, String> {
        let t = self.t;
        let clamp = clamp && self.clamped && self.bound.is_some();
        let mut groups: BTreeMap<WindowKey, Window> = BTreeMap::new();
        let mut first_why: Option<String> = None;
        let mut seen_rows = false;
        for st in &self.rest {
            for d in descendants(*st) {
                if d.kind() != "subscript_expression" {
                    continue;
                }
                let Some(arg) = d.child_by_field_name("argument").map(strip_parens) else { continue };
                if arg.kind() != "identifier" {
                    continue;
                }
                let p = text(t, arg);
                // Through an alias, the window reads its buffer at the alias's offset, which
                // must be the same for every row of the strip.
                let (elem, base) = if let Some(elem) = self.readonly.get(p) {
                    (elem, p.to_string())
                } else if let Some(elem) = self.aliases.get(p).and_then(|b| self.readonly.get(b)) {
                    let base = match self.locals.get(p) {
                        Some(l) => {
                            let mut at = Found::default();
                            match self.render(l.init, Mode::Tap { clamp }, &mut at, 0) {
                                Ok(b) if at.offsets.is_empty() && at.cols.is_empty() && at.vars.is_empty() => {
                                    format!("({b})")
                                }
                                Ok(_) => {
                                    let with =
                                        if at.offsets.is_empty() && at.vars.is_empty() { "column" } else { "row" };
                                    first_why
                                        .get_or_insert(format!("`{p}` points at a place that moves with the {with}"));
                                    continue;
                                }
                                Err(e) => {
                                    first_why.get_or_insert(format!("`{p}` {e}"));
                                    continue;
                                }
                            }
                        }
                        None if self.outside.contains(p) => p.to_string(),
                        None => continue,
                    };
                    (elem, base)
                } else {
                    continue;
                };
                let Some(index) = pattern::subscript_index(d) else { continue };
                let mut found = Found::default();
                let mode = Mode::Tap { clamp };
                let idx = match self.render(index, mode, &mut found, 0) {
                    Ok(i) => i,
                    Err(e) => {
                        if self.reaches_row(index) {
                            first_why.get_or_insert(format!("`{}` {e}", syntax::one_line(text(t, d), 60)));
                        }
                        continue;
                    }
                };
                if found.offsets.is_empty() {
                    continue;
                }
                seen_rows = true;
                // `__ldg(&p[i])` (as `read-only` writes it) is one read.
                let ldg = ldg_call(t, d);
                let site = ldg.unwrap_or(d);
                let (tap, tap_conds) = match self.tap(site, &mut found) {
                    Ok(c) => c,
                    Err(e) => {
                        first_why.get_or_insert(format!("`{}` {e}", syntax::one_line(text(t, d), 60)));
                        continue;
                    }
                };
                let offset = found.offsets[0].clone();
                if found.offsets.iter().any(|o| *o != offset) {
                    first_why.get_or_insert(format!(
                        "`{}` reads rows at two offsets at once",
                        syntax::one_line(text(t, d), 60)
                    ));
                    continue;
                }
                if let Some((_, v)) = &offset.var {
                    if found.vars.contains(v) {
                        first_why.get_or_insert(format!(
                            "`{}` uses `{v}` for more than its row",
                            syntax::one_line(text(t, d), 60)
                        ));
                        continue;
                    }
                }
                let col = found.cols.first().cloned();
                if found.cols.iter().any(|o| Some(o) != col.as_ref()) {
                    first_why.get_or_insert(format!(
                        "`{}` reads columns at two offsets at once",
                        syntax::one_line(text(t, d), 60)
                    ));
                    continue;
                }
                if let Some((_, cv)) = col.as_ref().and_then(|c| c.var.as_ref()) {
                    let row_var = offset.var.as_ref().map(|(_, rv)| rv);
                    if found.vars.contains(cv) || row_var == Some(cv) {
                        first_why.get_or_insert(format!(
                            "`{}` uses `{cv}` for more than its column",
                            syntax::one_line(text(t, d), 60)
                        ));
                        continue;
                    }
                }
                let keys: Vec<(String, i64, i64)> = found
                    .vars
                    .iter()
                    .map(|v| {
                        let l = &self.loops[v];
                        (v.clone(), l.lo, l.hi)
                    })
                    .collect();
                let key_types: Vec<String> = found.vars.iter().map(|v| self.loops[v].ty.clone()).collect();
                let value = if ldg.is_some() { format!("__ldg(&{base}[{idx}])") } else { format!("{base}[{idx}]") };
                let key = (base.clone(), value.clone(), tap.clone(), keys.clone());
                let (lo, hi) = self.offset_range(&offset);
                let w = groups.entry(key).or_insert_with(|| Window {
                    buffer: p.to_string(),
                    elem: elem.clone(),
                    value,
                    addr: format!("&{base}[{idx}]"),
                    ldg: ldg.is_some(),
                    cond: tap.clone(),
                    cond_sites: Vec::new(),
                    keys,
                    key_types,
                    offsets: BTreeSet::new(),
                    cols: BTreeSet::new(),
                    pairs: BTreeSet::new(),
                    strip: s,
                    run: v,
                    uses: Vec::new(),
                    sites: Vec::new(),
                    loops: Vec::new(),
                });
                w.offsets.extend(lo..=hi);
                if let Some(c) = &col {
                    let (cl, ch) = self.offset_range(c);
                    w.cols.extend(cl..=ch);
                    w.pairs.extend((lo..=hi).flat_map(|a| (cl..=ch).map(move |b| (a, b))));
                }
                w.cond_sites.extend(tap_conds);
                w.uses.push((site.byte_range(), offset, col));
                w.loops.extend(self.enclosing_loops(site));
            }
        }
        let mut out = Vec::new();
        for (_, mut w) in groups {
            if w.offsets.len() < 2 {
                continue;
            }
            let offs: Vec<i64> = w.offsets.iter().copied().collect();
            if offs.windows(2).any(|p| p[1] - p[0] > s) {
                first_why.get_or_insert(format!("`{}` reads rows too far apart for a strip of {s}", w.buffer));
                continue;
            }
            if w.col_span().is_some_and(|(l, h)| h - l + 1 > 64) {
                first_why.get_or_insert(format!("`{}` reads columns too far apart for a run of {v}", w.buffer));
                continue;
            }
            let lo = offs[0];
            let col_lo = w.col_lo();
            for (r, o, c) in &w.uses {
                let keys: String = w.keys.iter().map(|(v, l, _)| format!("[{v} - ({l})]")).collect();
                let mut slot = format!("ns_r + {}", o.k - lo);
                if let Some((neg, v)) = &o.var {
                    slot = format!("ns_r {} {v} + {}", if *neg { "-" } else { "+" }, o.k - lo);
                }
                let column = match c {
                    None => String::new(),
                    Some(Offset { var: None, k }) => format!("[ns_c + {}]", k - col_lo),
                    Some(Offset { var: Some((neg, v)), k }) => {
                        format!("[ns_c {} {v} + {}]", if *neg { "-" } else { "+" }, k - col_lo)
                    }
                };
                w.sites.push((r.clone(), format!("{keys}{column}[{slot}]")));
            }
            out.push(w);
        }
        if out.is_empty() {
            return Err(first_why.unwrap_or_else(|| {
                if seen_rows {
                    "no buffer it only reads is read at several row offsets".into()
                } else {
                    "it reads no buffer at a row offset".into()
                }
            }));
        }
        Ok(out)
    }

    /// Whether an expression reaches the row (directly or through a local).
    fn reaches_row(&self, n: Node) -> bool {
        let t = self.t;
        descendants(n).into_iter().any(|d| {
            d.kind() == "identifier"
                && (text(t, d) == self.y || self.locals.get(text(t, d)).is_some_and(|l| self.reaches_row(l.init)))
        })
    }

    /// The condition under which the original reads `site` (the checks every row passes
    /// left out), rendered for the window, and the conditions it is made of in the per-row
    /// code (where each is, and whether the read needs it false); fails where the read
    /// depends on more than its row, its loops' variables and values that hold still.
    fn tap(&self, site: Node, found: &mut Found) -> Result<(String, Vec<KnownTest>), String> {
        let t = self.t;
        let mut conds: Vec<(Node, bool)> = Vec::new();
        let mut child = site;
        let top: BTreeSet<usize> = self.rest.iter().map(|s| s.id()).collect();
        while let Some(p) = child.parent() {
            let is_body = p.byte_range() == self.k.body;
            match p.kind() {
                "if_statement" => {
                    let is_cond = p.child_by_field_name("condition").is_some_and(|c| c.id() == child.id());
                    if !is_cond && !self.guard_stmts.contains(&p.id()) {
                        let c = pattern::condition(p).ok_or("sits under an if without a condition")?;
                        let in_cons = p.child_by_field_name("consequence").is_some_and(|c| c.id() == child.id());
                        conds.push((c, !in_cons));
                    }
                }
                "conditional_expression" => {
                    let c = p.child_by_field_name("condition").ok_or("sits in a ?: without a condition")?;
                    if c.id() != child.id() {
                        let in_cons = p.child_by_field_name("consequence").is_some_and(|x| x.id() == child.id());
                        conds.push((c, !in_cons));
                    }
                }
                "binary_expression" => {
                    let op = p.child_by_field_name("operator").map(|o| text(t, o)).unwrap_or("");
                    let left = p.child_by_field_name("left");
                    if matches!(op, "&&" | "||") && left.is_some_and(|l| l.id() != child.id()) {
                        conds.push((left.ok_or("")?, op == "||"));
                    }
                }
                "for_statement" => {
                    let in_body = p.child_by_field_name("body").is_some_and(|b| b.id() == child.id());
                    let l = self.loops.values().find(|l| l.start == p.start_byte());
                    match l {
                        Some(l) if in_body => {
                            if let Some(why) = &l.unfit {
                                return Err(why.clone());
                            }
                        }
                        _ => return Err("sits in a loop whose trip count this recipe cannot fix".into()),
                    }
                }
                "while_statement" | "do_statement" | "switch_statement" | "case_statement" | "for_range_loop" => {
                    return Err("sits in a loop whose trip count this recipe cannot fix".into())
                }
                "compound_statement" => {
                    for sib in named_children(p) {
                        if sib.start_byte() >= child.start_byte() {
                            break;
                        }
                        if is_body && !top.contains(&sib.id()) {
                            continue;
                        }
                        if syntax::escapes(sib).is_empty()
                            || (top.contains(&sib.id()) && self.guard_stmts.contains(&sib.id()))
                        {
                            continue;
                        }
                        match skip_if(sib) {
                            Some(c) => conds.push((c, true)),
                            None => {
                                return Err(format!(
                                    "follows `{}`, which may leave early",
                                    syntax::one_line(text(t, sib), 60)
                                ))
                            }
                        }
                    }
                }
                _ => {}
            }
            if is_body {
                break;
            }
            child = p;
        }
        let mut parts = Vec::new();
        for (c, negated) in conds.iter().rev() {
            let s = self.render(*c, Mode::Tap { clamp: false }, found, 0)?;
            parts.push(if *negated { format!("!({s})") } else { format!("({s})") });
        }
        let known =
            conds.iter().filter(|(c, _)| !calls_a_function(t, *c)).map(|(c, negated)| (c.byte_range(), *negated));
        Ok((parts.join(" && "), known.collect()))
    }

    fn enclosing_loops(&self, site: Node) -> Vec<String> {
        let mut out = Vec::new();
        let mut p = site.parent();
        while let Some(x) = p {
            if x.kind() == "for_statement" {
                if let Some(l) = self.loops.values().find(|l| l.start == x.start_byte()) {
                    out.push(l.var.clone());
                }
            }
            p = x.parent();
        }
        out
    }

    /// The output a run of columns stores 16 bytes at a time: a statement `P[I] = E;` of
    /// the per-row code's own (not under a loop or a branch, but for the wrapping checks
    /// every column of a whole strip passes), into a buffer of a 4-byte type that the
    /// per-row code writes there only and never reads, with nothing before it that may
    /// leave early but those checks. Every column of a whole strip then reaches it, and
    /// the run's last column can store all four.
    fn run_store(&self) -> Option<RunStore> {
        let t = self.t;
        let (stmt, assign) = self.store_in(&self.rest).ok()??;
        let left = assign.child_by_field_name("left").map(strip_parens)?;
        let value = assign.child_by_field_name("right")?;
        if left.kind() != "subscript_expression" {
            return None;
        }
        let arg = left.child_by_field_name("argument").map(strip_parens)?;
        let name = text(t, arg);
        let index = pattern::subscript_index(left)?;
        let p = self.k.param(name).filter(|p| p.pointer && !p.is_const)?;
        let elem = syntax::unqualified(&p.base);
        if !matches!(elem.as_str(), "float" | "int" | "unsigned" | "unsigned int") {
            return None;
        }
        // Written there only, read nowhere.
        let mentions = self
            .rest
            .iter()
            .flat_map(|s| descendants(*s))
            .filter(|d| d.kind() == "identifier" && text(t, *d) == name)
            .count();
        if mentions != 1 || !syntax::escapes(value).is_empty() {
            return None;
        }
        Some(RunStore {
            head: stmt.start_byte()..value.start_byte(),
            end: stmt.end_byte(),
            // The body of an unbraced `if`: the statements that replace it need braces.
            alone: stmt.parent().is_some_and(|p| p.kind() != "compound_statement"),
            elem,
            index: text(t, index).to_string(),
            buffer: name.to_string(),
        })
    }

    /// The first `P[I] = E;` among `stmts` and inside the wrapping checks among them, with
    /// its assignment, where it is the last statement (a later read through a pointer
    /// that aliases `P` would see the store the run defers); `Err` where a statement
    /// before it may leave early.
    fn store_in<'n>(&self, stmts: &[Node<'n>]) -> Result<Option<(Node<'n>, Node<'n>)>, ()> {
        let t = self.t;
        let stmts: Vec<Node<'n>> = stmts.iter().copied().filter(|s| s.kind() != "comment").collect();
        for (i, st) in stmts.iter().enumerate() {
            if self.guard_stmts.contains(&st.id()) {
                let cons = st.child_by_field_name("consequence");
                let inner: Vec<Node> = cons.map(pattern::block_statements).unwrap_or_default();
                let returns = inner.iter().filter(|c| c.kind() != "comment").all(|c| c.kind() == "return_statement");
                if returns {
                    continue;
                }
                // A wrapping check: its body runs for every column of a whole strip.
                return self.store_in(&inner);
            }
            let assign = (st.kind() == "expression_statement")
                .then(|| named_children(*st).into_iter().find(|c| c.kind() != "comment"))
                .flatten()
                .filter(|e| e.kind() == "assignment_expression")
                .filter(|e| e.child_by_field_name("operator").is_some_and(|o| text(t, o) == "="))
                .filter(|e| {
                    e.child_by_field_name("left").is_some_and(|l| strip_parens(l).kind() == "subscript_expression")
                });
            if let Some(e) = assign {
                return Ok((i + 1 == stmts.len()).then_some((*st, e)));
            }
            if !syntax::escapes(*st).is_empty() {
                return Err(());
            }
        }
        Ok(None)
    }

    /// Where `#pragma unroll` goes: the loops windows sit in that have none.
    fn pragmas_needed(&self, ws: &[Window]) -> Vec<&ConstLoop> {
        let names: BTreeSet<&String> = ws.iter().flat_map(|w| w.loops.iter()).collect();
        self.loops.values().filter(|l| l.needs_pragma && names.contains(&l.var)).collect()
    }
}

/// An output the run's columns store together (see [`Ctx::run_store`]).
struct RunStore {
    /// From the statement's start to its value's: `P[I] = `.
    head: Range<usize>,
    /// The statement's end.
    end: usize,
    /// Whether it is a statement's body on its own (no braces around it).
    alone: bool,
    buffer: String,
    elem: String,
    index: String,
}

impl RunStore {
    /// The registers the run's columns leave their values and addresses in.
    fn declarations(&self, v: i64) -> String {
        format!("{elem}* ns_sp[{v}];\n{elem} ns_sv[{v}];\n", elem = self.elem)
    }

    /// What `P[I] = ` becomes: each column leaves its address and then its value.
    fn head(&self) -> String {
        let open = if self.alone { "{ " } else { "" };
        format!("{open}ns_sp[ns_c] = &{}[{}];\nns_sv[ns_c] = ", self.buffer, self.index)
    }

    /// What follows the statement: the last column stores the four in one 16-byte store
    /// where they lie side by side, aligned, else one at a time (the wide store is
    /// [`helpers::STORE16`]'s).
    fn commit(&self, v: i64) -> String {
        let last = v - 1;
        let side_by_side: String = (1..v).map(|i| format!("ns_sp[{i}] == ns_sp[0] + {i} && ")).collect();
        let values: Vec<String> = (0..v).map(|i| format!("ns_sv[{i}]")).collect();
        let close = if self.alone { "\n}" } else { "" };
        format!(
            "\nif (ns_c == {last}) {{\n  // nightshift: the run's {v} columns stored together.\n  if ({side_by_side}(reinterpret_cast<size_t>(ns_sp[0]) & 15) == 0) {{\n    ns_store16(ns_sp[0], {vals});\n  }} else {{\n    #pragma unroll\n    for (int ns_k = 0; ns_k < {v}; ++ns_k) *ns_sp[ns_k] = ns_sv[ns_k];\n  }}\n}}{close}",
            vals = values.join(", "),
        )
    }
}

/// The integer functions of CUDA's headers a read's index or condition may call.
const INTEGER_BUILTINS: &[&str] =
    &["min", "max", "umin", "umax", "llmin", "llmax", "ullmin", "ullmax", "abs", "labs", "llabs"];

/// A test of the per-row code, where it is, whose value a path knows: `true` where it
/// needs the test false.
type KnownTest = (Range<usize>, bool);

/// What makes two reads one window: the buffer, the value and condition rendered for
/// the window, and the loop variables besides the row with their ranges.
type WindowKey = (String, String, String, Vec<(String, i64, i64)>);

/// A register window: what one read computes for each row (`ns_row0 + ns_j`) and each
/// value of the loop variables it names besides its row.
#[derive(Clone)]
struct Window {
    buffer: String,
    elem: String,
    /// `in[(ns_row0 + ns_j) * W + (x + dx)]`
    value: String,
    /// The address it reads, `&in[...]`, and whether through `__ldg`.
    addr: String,
    ldg: bool,
    /// The condition the original reads it under (empty: always).
    cond: String,
    /// The conditions `cond` is made of where the per-row code tests them, and whether a
    /// read needs each false: where `cond` holds at every element of the window, each of
    /// them has that value wherever the per-row code tests it (every test of one is
    /// followed by a read of some element).
    cond_sites: Vec<KnownTest>,
    keys: Vec<(String, i64, i64)>,
    key_types: Vec<String>,
    /// Row offsets read.
    offsets: BTreeSet<i64>,
    /// Column offsets read, with column runs (none: the same for every column).
    cols: BTreeSet<i64>,
    /// The (row, column) offsets read together: a window of rows by columns holds only
    /// the elements some output of the strip reads (a plus-shaped stencil's corners are
    /// not).
    pairs: BTreeSet<(i64, i64)>,
    /// Rows per thread.
    strip: i64,
    /// Columns per thread.
    run: i64,
    uses: Vec<(Range<usize>, Offset, Option<Offset>)>,
    /// Each read and the window element it becomes.
    sites: Vec<(Range<usize>, String)>,
    /// The loops the reads sit in.
    loops: Vec<String>,
}

impl Window {
    fn lo(&self) -> i64 {
        self.offsets.first().copied().unwrap_or(0)
    }

    fn hi(&self) -> i64 {
        self.offsets.last().copied().unwrap_or(0)
    }

    fn col_lo(&self) -> i64 {
        self.cols.first().copied().unwrap_or(0)
    }

    /// The window's columns: `ns_i` from the first to the last, or none where it holds one
    /// value for every column.
    fn col_span(&self) -> Option<(i64, i64)> {
        let (lo, hi) = (self.cols.first()?, self.cols.last()?);
        Some((*lo, self.run - 1 + hi))
    }

    fn declaration(&self, n: usize, s: i64) -> String {
        let mut dims: String = self.keys.iter().map(|(_, l, h)| format!("[{}]", h - l + 1)).collect();
        let mut at = String::new();
        if let Some((cl, ch)) = self.col_span() {
            dims.push_str(&format!("[{}]", ch - cl + 1));
            at = format!(", columns ns_col0 + ({cl}) .. ns_col0 + {ch}");
        }
        format!(
            "{} ns_w{n}{dims}[{}];  // `{}` at rows ns_row0 + ({}) .. ns_row0 + {}{at}\n",
            self.elem,
            s + self.hi() - self.lo(),
            self.buffer,
            self.lo(),
            s - 1 + self.hi()
        )
    }

    /// The loads of one step: the whole window at the first row (`ns_j` from LO to HI),
    /// then the row that comes into view (`ns_r + HI`).
    fn fill(&self, n: usize) -> String {
        let (lo, hi) = (self.lo(), self.hi());
        let store = self.store(n);
        // A loop of a fixed trip count, so it unrolls before the strip's loop does and
        // every window index is a constant (the window stays in registers).
        let last = hi - lo;
        format!(
            "#pragma unroll\nfor (int ns_q = 0; ns_q <= {last}; ++ns_q) {{\n  if (ns_r > 0 && ns_q < {last}) continue;\n  const int ns_j = ns_r + ({lo}) + ns_q;\n  {}\n}}\n",
            reindent(&store, "  ")
        )
    }

    /// The loads of the whole window at once, before the strip's first row (`ns_j` from LO
    /// to S - 1 + HI): the strip's rows are then all in flight together, where one new row
    /// per step leaves each step waiting on its own load.
    fn fill_all(&self, n: usize, s: i64) -> String {
        let (lo, hi) = (self.lo(), self.hi());
        format!(
            "#pragma unroll\nfor (int ns_j = {lo}; ns_j <= {}; ++ns_j) {{\n  {}\n}}\n",
            s - 1 + hi,
            reindent(&self.store(n), "  ")
        )
    }

    /// The 16-byte type a run of 4 columns of this window loads as, where it has one.
    fn vector_type(&self) -> Option<&'static str> {
        let (cl, ch) = self.col_span()?;
        // The run's own columns must be window columns (a tap reads the column itself or
        // taps on both sides of it).
        if self.run != 4 || !self.keys.is_empty() || cl > 0 || ch < self.run - 1 {
            return None;
        }
        match syntax::unqualified(&self.elem).as_str() {
            "float" => Some("float4"),
            "int" => Some("int4"),
            "unsigned" | "unsigned int" => Some("uint4"),
            _ => None,
        }
    }

    /// For each window row, the columns some output of the strip reads (bit `q - cl`), or
    /// none where that is every column of every row.
    fn needed(&self) -> Option<Vec<u64>> {
        let (cl, ch) = self.col_span()?;
        let (lo, hi) = (self.lo(), self.strip - 1 + self.hi());
        let mut masks = vec![0u64; (hi - lo + 1) as usize];
        for (a, b) in &self.pairs {
            for r in 0..self.strip {
                for c in 0..self.run {
                    masks[(r + a - lo) as usize] |= 1u64 << (c + b - cl);
                }
            }
        }
        let full = if ch - cl + 1 >= 64 { u64::MAX } else { (1u64 << (ch - cl + 1)) - 1 };
        masks.iter().any(|m| *m != full).then_some(masks)
    }

    /// One window row's loads, `ns_j` its row, inside the loops over its other keys and
    /// its columns. With a run of 4 columns of a 4-byte type, the run's own columns are
    /// one 16-byte load where, for this row, every one of them is read by the original
    /// (its condition holds), they lie side by side and the first is 16-byte aligned; the
    /// columns past either end, and every column of a row that fails any of that, are
    /// loaded one at a time.
    fn store(&self, n: usize) -> String {
        let lo = self.lo();
        let keys: String = self.keys.iter().map(|(v, l, _)| format!("[{v} - ({l})]")).collect();
        let (cols, column) = match self.col_span() {
            Some((cl, ch)) => (Some((cl, ch)), format!("[ns_i - ({cl})]")),
            None => (None, String::new()),
        };
        let slot = |col: &str| format!("ns_w{n}{keys}{col}[ns_j - ({lo})]");
        let needed = self.needed();
        let mut conds: Vec<String> = self.need_bit(n).into_iter().collect();
        if !self.cond.is_empty() {
            conds.push(if conds.is_empty() { self.cond.clone() } else { format!("({})", self.cond) });
        }
        let mut store = format!("{} = {};", slot(&column), self.value);
        if !conds.is_empty() {
            store = format!("if ({}) {store}", conds.join(" && "));
        }
        if let Some((cl, ch)) = cols {
            let vector = self.vector_type();
            let skip = if vector.is_some() {
                format!("if (ns_vec{n} && ns_i >= 0 && ns_i < 4) continue;\n")
            } else {
                String::new()
            };
            store = format!(
                "#pragma unroll\nfor (int ns_i = {cl}; ns_i <= {ch}; ++ns_i) {{\n  {}\n}}",
                reindent(&format!("{skip}{store}"), "  ")
            );
            if let Some(vt) = vector {
                let cond = if self.cond.is_empty() { "true".to_string() } else { self.cond.clone() };
                let load = if self.ldg {
                    format!("__ldg(reinterpret_cast<const {vt}*>(ns_p{n}))")
                } else {
                    format!("*reinterpret_cast<const {vt}*>(ns_p{n})")
                };
                let lanes: String = ["x", "y", "z", "w"]
                    .iter()
                    .enumerate()
                    .map(|(i, f)| format!("  {} = ns_v{n}.{f};\n", slot(&format!("[{}]", i as i64 - cl))))
                    .collect();
                let all_needed = match &needed {
                    Some(_) => format!("((ns_need{n}[ns_j - ({lo})] >> (0 - ({cl}))) & 0xFull) == 0xFull"),
                    None => "true".to_string(),
                };
                store = format!(
                    "const {elem}* ns_p{n} = nullptr;\nbool ns_vec{n} = {all_needed};\n#pragma unroll\nfor (int ns_i = 0; ns_i < 4; ++ns_i) {{\n  if (ns_i == 0) ns_p{n} = {addr};\n  ns_vec{n} = ns_vec{n} && ({cond}) && {addr} == ns_p{n} + ns_i;\n}}\nns_vec{n} = ns_vec{n} && (reinterpret_cast<size_t>(ns_p{n}) & 15) == 0;\nif (ns_vec{n}) {{\n  const {vt} ns_v{n} = {load};\n{lanes}}}\n{store}",
                    elem = syntax::unqualified(&self.elem),
                    addr = self.addr,
                );
            }
        }
        if let Some(masks) = &needed {
            store = format!("{}{store}", need_declaration(n, masks));
        }
        self.in_key_loops(store)
    }

    /// Whether some output of the strip reads window element (`ns_j`, `ns_i`): its bit in
    /// `ns_need{n}`, where the window has columns and not every one is read.
    fn need_bit(&self, n: usize) -> Option<String> {
        let (cl, _) = self.col_span()?;
        self.needed()?;
        Some(format!("((ns_need{n}[ns_j - ({})] >> (ns_i - ({cl}))) & 1ull)", self.lo()))
    }

    /// `code` inside the loops over the window's other keys (their whole ranges).
    fn in_key_loops(&self, mut code: String) -> String {
        for ((v, l, h), ty) in self.keys.iter().zip(&self.key_types).rev() {
            code =
                format!("#pragma unroll\nfor ({ty} {v} = {l}; {v} <= {h}; ++{v}) {{\n  {}\n}}", reindent(&code, "  "));
        }
        code
    }

    /// `ns_inside` kept only where the original reads every element of the window: for
    /// each row and column some output of the strip reads, the reads' condition holds.
    /// None where the reads have no condition.
    fn inside_check(&self, n: usize, s: i64) -> Option<String> {
        if self.cond.is_empty() {
            return None;
        }
        let (lo, hi) = (self.lo(), s - 1 + self.hi());
        let needed = self.needed();
        let mut check = format!("ns_inside = ns_inside && ({});", self.cond);
        if let Some(bit) = self.need_bit(n) {
            check = format!("if ({bit}) {check}");
        }
        if let Some((cl, ch)) = self.col_span() {
            check = format!(
                "#pragma unroll\nfor (int ns_i = {cl}; ns_i <= {ch}; ++ns_i) {{\n  {}\n}}",
                reindent(&check, "  ")
            );
        }
        if let Some(masks) = &needed {
            check = format!("{}{check}", need_declaration(n, masks));
        }
        Some(format!(
            "#pragma unroll\nfor (int ns_j = {lo}; ns_j <= {hi}; ++ns_j) {{\n  {}\n}}\n",
            reindent(&self.in_key_loops(check), "  ")
        ))
    }

    /// How many windows of rows it is (one per value of its other loop variables and
    /// column).
    fn count(&self) -> i64 {
        let cols = self.col_span().map_or(1, |(l, h)| h - l + 1);
        self.keys.iter().map(|(_, l, h)| h - l + 1).product::<i64>() * cols
    }
}

/// The edits, and each condition whose value is known put as that value (`false` where
/// the code needs it false), but where it would touch an edit already there or another
/// such condition: leaving a test in is always right, only slower.
fn with_known(edits: &[(Range<usize>, String)], known: &[KnownTest]) -> Vec<(Range<usize>, String)> {
    let overlaps = |a: &Range<usize>, b: &Range<usize>| a.start < b.end && b.start < a.end;
    let mut sites: Vec<&KnownTest> = known.iter().collect();
    // Outermost first, so a condition inside another one is covered by it.
    sites.sort_by_key(|(r, _)| (r.start, std::cmp::Reverse(r.end)));
    let mut out = edits.to_vec();
    for (r, needs_false) in sites {
        if out.iter().any(|(e, _)| overlaps(e, r) || (e.is_empty() && r.start < e.start && e.start < r.end)) {
            continue;
        }
        out.push((r.clone(), if *needs_false { "false" } else { "true" }.to_string()));
    }
    out
}

/// The columns of each window row some output of the strip reads, as `ns_need{n}`.
fn need_declaration(n: usize, masks: &[u64]) -> String {
    let list: Vec<String> = masks.iter().map(|m| format!("{m:#x}ull")).collect();
    format!(
        "// nightshift: the columns of each row some output of the strip reads.\nconstexpr unsigned long long ns_need{n}[{}] = {{{}}};\n",
        masks.len(),
        list.join(", ")
    )
}

/// Whether a test calls a function other than CUDA's integer builtins (one of the file's,
/// or an intrinsic): such a test is never made known, since the function may count or
/// print and the known value would not call it.
fn calls_a_function(t: &str, test: Node) -> bool {
    descendants(test).into_iter().any(|x| {
        x.kind() == "call_expression"
            && !x.child_by_field_name("function").is_some_and(|f| INTEGER_BUILTINS.contains(&text(t, f)))
    })
}

/// Whether the declaration a declarator sits in is `const` (`const int& r = y;`).
fn const_declaration(t: &str, d: Node) -> bool {
    let mut p = d.parent();
    while let Some(x) = p {
        if matches!(x.kind(), "declaration" | "parameter_declaration" | "condition_clause") {
            return named_children(x).iter().any(|c| c.kind() == "type_qualifier" && text(t, *c) == "const");
        }
        p = x.parent();
    }
    false
}

/// `code` and a new line indented by `ind`, or nothing when `code` is empty.
fn lines_then(code: &str, ind: &str) -> String {
    if code.is_empty() {
        String::new()
    } else {
        format!("{code}\n{ind}")
    }
}

/// How many 32-bit registers the windows take together over a strip of `s` rows. A type
/// of unknown size counts as 16 bytes a value, so it loads a row per step unless tiny.
fn window_registers(ws: &[Window], s: i64) -> i64 {
    ws.iter()
        .map(|w| {
            let words = syntax::type_size(&w.elem).map_or(4, |b| b.div_ceil(4)) as i64;
            w.count() * (s + w.hi() - w.lo()) * words
        })
        .sum()
}

/// `in` at rows y-1..y+1 (3 windows), one entry per buffer and rows.
fn summary(ws: &[Window], y: &str) -> Vec<String> {
    let at = |o: i64| match o {
        0 => y.to_string(),
        o if o > 0 => format!("{y}+{o}"),
        o => format!("{y}{o}"),
    };
    let mut groups: Vec<((String, i64, i64), i64)> = Vec::new();
    for w in ws {
        let key = (w.buffer.clone(), w.lo(), w.hi());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += w.count(),
            None => groups.push((key, w.count())),
        }
    }
    groups
        .into_iter()
        .map(|((b, lo, hi), n)| {
            let mult = if n > 1 { format!(" ({n} windows)") } else { String::new() };
            format!("`{b}` at rows {}..{}{mult}", at(lo), at(hi))
        })
        .collect()
}

/// The lines after the first without the indentation `ind` they were written at.
fn dedent(block: &str, ind: &str) -> String {
    let mut out = String::new();
    for (i, line) in block.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(if i > 0 { line.strip_prefix(ind).unwrap_or(line) } else { line });
    }
    out
}

/// The call `__ldg(&p[i])` around the read `p[i]`, if it is one.
fn ldg_call<'a>(t: &str, read: Node<'a>) -> Option<Node<'a>> {
    let amp = read.parent().filter(|p| p.kind() == "pointer_expression")?;
    if amp.child(0).map(|o| text(t, o)) != Some("&") {
        return None;
    }
    let args = amp.parent().filter(|p| p.kind() == "argument_list")?;
    if named_children(args).iter().filter(|a| a.kind() != "comment").count() != 1 {
        return None;
    }
    let call = args.parent().filter(|c| c.kind() == "call_expression")?;
    (call.child_by_field_name("function").map(|f| text(t, f)) == Some("__ldg")).then_some(call)
}

/// `if (C) continue;` or `if (C) return;` (no else): C.
fn skip_if(s: Node) -> Option<Node> {
    if s.kind() != "if_statement" || s.child_by_field_name("alternative").is_some() {
        return None;
    }
    let cons = s.child_by_field_name("consequence")?;
    let inner: Vec<Node> = pattern::block_statements(cons).into_iter().filter(|c| c.kind() != "comment").collect();
    (inner.len() == 1 && matches!(inner[0].kind(), "continue_statement" | "return_statement"))
        .then(|| pattern::condition(s))
        .flatten()
}

/// Whether a `return` sits in a loop or switch below the per-row code's statements.
fn inside_loop(d: Node, rest: &[Node]) -> bool {
    let mut p = d.parent();
    while let Some(x) = p {
        if rest.iter().any(|r| r.id() == x.id()) {
            return syntax::is_loop(x);
        }
        if syntax::is_loop(x) {
            return true;
        }
        p = x.parent();
    }
    false
}

fn signed_terms<'a>(t: &str, n: Node<'a>, plus: bool, out: &mut Vec<(bool, Node<'a>)>) {
    let n = strip_parens(n);
    if let Some((op @ ("+" | "-"), l, r)) = syntax::binary(t, n) {
        signed_terms(t, l, plus, out);
        signed_terms(t, r, if op == "-" { !plus } else { plus }, out);
        return;
    }
    out.push((plus, n));
}

fn declarator_name(t: &str, d: Node) -> Option<String> {
    let mut x = d;
    loop {
        match x.kind() {
            "identifier" => return Some(text(t, x).to_string()),
            "init_declarator" | "pointer_declarator" | "array_declarator" | "reference_declarator" => {
                x = x.child_by_field_name("declarator").or_else(|| named_children(x).into_iter().next())?;
            }
            _ => return None,
        }
    }
}

/// The type a declarator gives its name: the declaration's type (qualifiers dropped),
/// with `*` for a pointer declarator.
fn declarator_type(t: &str, decl: Node, d: Node) -> String {
    let base = syntax::declaration_type(t, decl).unwrap_or_default();
    let base: Vec<&str> =
        base.split_whitespace().filter(|w| !matches!(*w, "static" | "register" | "volatile")).collect();
    let mut ty = base.join(" ");
    let mut x = d;
    if x.kind() == "init_declarator" {
        if let Some(inner) = x.child_by_field_name("declarator") {
            x = inner;
        }
    }
    while x.kind() == "pointer_declarator" {
        ty.push('*');
        let quals: Vec<String> = named_children(x)
            .into_iter()
            .filter(|c| c.kind() == "type_qualifier")
            .map(|c| text(t, c).to_string())
            .collect();
        for q in quals {
            ty.push(' ');
            ty.push_str(&q);
        }
        match x.child_by_field_name("declarator") {
            Some(inner) => x = inner,
            None => break,
        }
    }
    if ty.is_empty() {
        "int".into()
    } else {
        ty
    }
}

/// A `for` over a compile-time range by steps of one (`for (int k = -R; k <= R; ++k)`).
pub(super) fn const_loop(src: &Source, k: &Kernel, f: Node) -> Option<ConstLoop> {
    let t = src.text();
    let header = syntax::unit_step_loop(t, f)?;
    let var = header.var;
    let ty = syntax::declaration_type(t, f.child_by_field_name("initializer")?)?.replace("const ", "");
    let value = |n: Node| -> Option<i64> { const_value(src, k, n) };
    let lo = value(header.start)?;
    let hi = if header.inclusive { value(header.bound)? } else { value(header.bound)?.checked_sub(1)? };
    let body = f.child_by_field_name("body")?;
    if syntax::assigned(t, body).iter().any(|(n, _)| *n == var) {
        return None;
    }
    if syntax::escapes(body).iter().any(|e| e.kind() != "continue_statement") {
        return None;
    }
    let trip = hi.checked_sub(lo)?.checked_add(1)?;
    let mut unfit = None;
    let mut needs_pragma = false;
    match syntax::unroll_pragma(t, f) {
        Some((syntax::Unroll::Times(c), _)) if c < trip => {
            unfit = Some(format!("sits in the loop over `{var}`, unrolled only {c} times"));
        }
        Some(_) => {}
        None => needs_pragma = true,
    }
    if !(1..=MAX_TRIP).contains(&trip) {
        unfit =
            Some(format!("sits in the loop over `{var}`, which runs {trip} times (at most {MAX_TRIP} are unrolled)"));
    }
    let braced = f.parent().is_some_and(|p| p.kind() == "compound_statement");
    Some(ConstLoop { var, ty, lo, hi, start: f.start_byte(), end: f.end_byte(), needs_pragma, braced, unfit })
}

pub(super) fn const_value(src: &Source, k: &Kernel, n: Node) -> Option<i64> {
    let t = src.text();
    let n = strip_parens(n);
    match n.kind() {
        "number_literal" => int_literal(text(t, n)),
        "identifier" => {
            let name = text(t, n);
            if k.param(name).is_some() {
                return None;
            }
            launch::file_scope_size(src, name, k.range.start).value()
        }
        "unary_expression" => {
            let op = n.child(0).map(|o| text(t, o))?;
            let v = const_value(src, k, n.child_by_field_name("argument")?)?;
            match op {
                "-" => v.checked_neg(),
                "+" => Some(v),
                _ => None,
            }
        }
        "binary_expression" => {
            let (op, l, r) = syntax::binary(t, n)?;
            let (a, b) = (const_value(src, k, l)?, const_value(src, k, r)?);
            match op {
                "+" => a.checked_add(b),
                "-" => a.checked_sub(b),
                "*" => a.checked_mul(b),
                "/" => a.checked_div(b),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether every use of `name` under `body` is a read `name[i]` (or `__ldg(&name[i])`),
/// apart from the uses `also` allows.
fn only_subscript_reads(t: &str, body: Node, name: &str, also: impl Fn(Node) -> bool) -> bool {
    descendants(body).into_iter().filter(|d| d.kind() == "identifier" && text(t, *d) == name).all(|d| {
        if also(d) {
            return true;
        }
        let Some(s) = d.parent() else { return false };
        if s.kind() != "subscript_expression" || s.child_by_field_name("argument").map(|a| a.id()) != Some(d.id()) {
            return false;
        }
        match s.parent() {
            Some(x) if x.kind() == "assignment_expression" => {
                x.child_by_field_name("left").map(|l| l.id()) != Some(s.id())
            }
            Some(x) if x.kind() == "update_expression" => false,
            Some(_) if ldg_call(t, s).is_some() => true,
            Some(x) if x.kind() == "pointer_expression" => false,
            _ => true,
        }
    })
}

/// The buffers a kernel only reads: pointer parameters that are `const` or the task's
/// inputs, used only as `p[i]` (name to element type), and local aliases of them,
/// `const T* q = p;` or `const T* q = p + offset;`, themselves used only as `q[i]`
/// (alias to parameter). A parameter used to make an alias is still only read.
pub(super) fn readonly_buffers(
    src: &Source,
    facts: &Facts,
    k: &Kernel,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let t = src.text();
    let mut out = BTreeMap::new();
    let mut aliases = BTreeMap::new();
    let Some(body) = src.node(&k.body, "compound_statement") else { return (out, aliases) };
    // `const T* q = p (+ offset)`: the declarator node of q and p's identifier in it.
    let mut candidates: Vec<(String, String, usize)> = Vec::new();
    for d in descendants(body) {
        if let Some(a) = pattern::const_alias(t, d) {
            candidates.push((a.name, text(t, a.base).to_string(), d.id()));
        }
    }
    // Aliases declared once and only read through: only those excuse their buffer's use.
    let declarator = |d: Node| {
        d.parent().is_some_and(|x| x.kind() == "pointer_declarator")
            || d.parent().is_some_and(|x| x.kind() == "init_declarator")
    };
    let counted: Vec<String> = descendants(body)
        .into_iter()
        .filter(|d| d.kind() == "declaration")
        .flat_map(|d| syntax::declared_names(t, d))
        .collect();
    let candidates: Vec<(String, String, usize)> = candidates
        .into_iter()
        .filter(|(q, _, _)| {
            counted.iter().filter(|n| *n == q).count() == 1
                && k.param(q).is_none()
                && only_subscript_reads(t, body, q, declarator)
        })
        .collect();
    for p in k.params.iter().filter(|p| p.pointer) {
        let input = p.is_const || super::vectorize::role_of(src, facts, k, &p.name) == Some(Role::Input);
        if !input {
            continue;
        }
        // The use that makes an alias: the initializer itself, or the left of its `+`.
        let makes_alias = |d: Node| {
            let mut x = d;
            while let Some(up) = x.parent() {
                if up.kind() == "init_declarator" {
                    return candidates.iter().any(|(_, base, id)| *id == up.id() && *base == p.name);
                }
                if !matches!(up.kind(), "parenthesized_expression" | "binary_expression") {
                    return false;
                }
                x = up;
            }
            false
        };
        if only_subscript_reads(t, body, &p.name, makes_alias) {
            out.insert(p.name.clone(), syntax::unqualified(&p.base));
        }
    }
    for (q, p, _) in &candidates {
        if out.contains_key(p) {
            aliases.insert(q.clone(), p.clone());
        }
    }
    (out, aliases)
}

/// Whether the file defines `name` as a function-like macro (whose arguments are text,
/// not values).
pub(super) fn defines_function_macro(src: &Source, name: &str) -> bool {
    let t = src.text();
    descendants(src.root()).into_iter().any(|n| {
        n.kind() == "preproc_function_def" && n.child_by_field_name("name").is_some_and(|x| text(t, x) == name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    fn strip_with(src: &str, rows: &str) -> Applied {
        let params = Params::default().with("rows", rows).with("cols", "1");
        apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &params)
    }

    const BOX: &str = r#"#include <cuda_runtime.h>
#define R 2
__global__ void boxv(const float* __restrict__ in, float* __restrict__ out, int W, int H) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= W || y >= H) return;
  float s = 0.f;
  for (int k = -R; k <= R; ++k) {
    int yy = min(max(y + k, 0), H - 1);
    s += in[yy * W + x];
  }
  out[y * W + x] = s;
}
extern "C" void launch(const float* in, float* out, int W, int H, cudaStream_t st) {
  dim3 block(32, 8);
  dim3 grid((W + 31) / 32, (H + 7) / 8);
  boxv<<<grid, block, 0, st>>>(in, out, W, H);
}
"#;

    /// A 5x5 box: five windows (one per column offset) of S + 4 rows each.
    const BOX5: &str = r#"#include <cuda_runtime.h>
__global__ void box5(const float* __restrict__ in, float* __restrict__ out, int W, int H) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= W || y >= H) return;
  float s = 0.f;
  for (int dy = -2; dy <= 2; ++dy) {
    for (int dx = -2; dx <= 2; ++dx) {
      int yy = min(max(y + dy, 0), H - 1);
      int xx = min(max(x + dx, 0), W - 1);
      s += in[yy * W + xx];
    }
  }
  out[y * W + x] = s;
}
extern "C" void launch(const float* in, float* out, int W, int H, cudaStream_t st) {
  dim3 block(32, 8);
  dim3 grid((W + 31) / 32, (H + 7) / 8);
  box5<<<grid, block, 0, st>>>(in, out, W, H);
}
"#;

    #[test]
    fn a_window_too_wide_for_registers_at_once_loads_a_row_per_step() {
        // 5 windows x 12 rows = 60 values: all before the first row.
        let r = strip_with(BOX5, "8").unwrap();
        assert!(r.source.contains("float ns_w0[5][12];"), "{}", r.source);
        assert!(r.source.contains("for (int ns_j = -2; ns_j <= 9; ++ns_j) {"), "{}", r.source);
        assert!(!r.source.contains("ns_q"), "{}", r.source);
        // 5 x 20 = 100 values would spill: the window starts whole at the first row, then
        // takes one new row per step, as many registers live as the stencil is tall.
        let r = strip_with(BOX5, "16").unwrap();
        let s = &r.source;
        assert!(s.contains("float ns_w0[5][20];"), "{s}");
        assert!(s.contains("for (int ns_q = 0; ns_q <= 4; ++ns_q) {"), "{s}");
        assert!(s.contains("if (ns_r > 0 && ns_q < 4) continue;"), "{s}");
        assert!(s.contains("const int ns_j = ns_r + (-2) + ns_q;"), "{s}");
        assert!(s.contains("one new row per step"), "{s}");
        // Registers, not values: the same 60 values in `double` take 120.
        let r = strip_with(&BOX5.replace("float", "double"), "8").unwrap();
        assert!(r.source.contains("double ns_w0[5][12];"), "{}", r.source);
        assert!(r.source.contains("if (ns_r > 0 && ns_q < 4) continue;"), "{}", r.source);
    }

    /// From a review: control flow a macro hides, a variable changed through its address or
    /// a reference, and a `constexpr` local inlined into the window's checks.
    #[test]
    fn hidden_jumps_and_handed_out_variables_decline_and_qualifiers_drop_word_by_word() {
        let facts = FactsBuilder::new("launch").build();
        let app = crate::Application { recipe: crate::RecipeId::RowStrip, params: Params::default() };
        let hidden = BOX
            .replace("#define R 2", "#define R 2\n#define SKIP_IF(c) if (c) return")
            .replace("float s = 0.f;", "SKIP_IF(y == 0);\n  float s = 0.f;");
        assert_eq!(
            crate::apply(&app, &hidden, &facts).unwrap_err().0,
            "`boxv` invokes `SKIP_IF`, a macro that hides a `return`: recipes read the source as written and cannot see where it leaves"
        );
        let by_address = BOX
            .replace(
                "__global__ void boxv",
                "__device__ void acc_add(float* a, float v) { *a += v; }\n__global__ void boxv",
            )
            .replace("int y = blockIdx.y", "float acc = 0.f;\n  int y = blockIdx.y")
            .replace("out[y * W + x] = s;", "acc_add(&acc, s);\n  out[y * W + x] = acc;");
        let by_reference = by_address
            .replace("float* a, float v) { *a += v; }", "float& a, float v) { a += v; }")
            .replace("acc_add(&acc, s)", "acc_add(acc, s)");
        for src in [&by_address, &by_reference] {
            let why = strip_with(src, "8").unwrap_err().0;
            assert!(why.contains("changes `acc` in its per-row code"), "{why}");
        }
        let by_const_reference = by_reference.replace("float& a, float v) { a += v; }", "const float& a, float v) { }");
        assert!(strip_with(&by_const_reference, "8").is_ok());
        let constexpr = r#"#include <cuda_runtime.h>
__global__ void vdiff(const float* in, float* out, int W, int H) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  constexpr int Q = 1;
  if (x >= W || y < Q || y >= H - Q) return;
  out[y * W + x] = in[(y + 1) * W + x] - in[(y - 1) * W + x];
}
extern "C" void launch(const float* in, float* out, int W, int H, cudaStream_t st) {
  dim3 block(32, 8);
  vdiff<<<dim3((W + 31) / 32, (H + 7) / 8), block, 0, st>>>(in, out, W, H);
}
"#;
        let r = strip_with(constexpr, "8").unwrap();
        assert!(r.description.contains("shared in registers"), "{}", r.description);
        let window = &r.source[r.source.find("if (ns_whole)").unwrap()..];
        assert!(!window.contains("(expr int)"), "{window}");
        assert_eq!(syntax::unqualified("constexpr int"), "int");
        assert_eq!(syntax::unqualified("const unsigned  char"), "unsigned char");
    }

    fn columns_with(src: &str, rows: &str) -> Applied {
        let params = Params::default().with("rows", rows).with("cols", "4");
        apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &params)
    }

    /// The stencil example's form: zero borders behind each tap's own checks.
    const ZERO3: &str = r#"#include <cuda_runtime.h>
__global__ void st3(const float* x, const float* w, float* y, int H, int W) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (col >= W || row >= H) return;
  float acc = 0.0f;
  for (int dy = -1; dy <= 1; ++dy) {
    const int r = row + dy;
    if (r < 0 || r >= H) continue;
    for (int dx = -1; dx <= 1; ++dx) {
      const int c = col + dx;
      if (c < 0 || c >= W) continue;
      acc += w[(dy + 1) * 3 + (dx + 1)] * x[(size_t)r * W + c];
    }
  }
  y[(size_t)row * W + col] = acc;
}
extern "C" void launch(const float* x, const float* w, float* y, int H, int W, cudaStream_t s) {
  const dim3 block(16, 16);
  const dim3 grid((W + block.x - 1) / block.x, (H + block.y - 1) / block.y);
  st3<<<grid, block, 0, s>>>(x, w, y, H, W);
}
"#;

    #[test]
    fn columns_per_thread_read_each_window_row_16_bytes_at_a_time_where_every_column_is_read() {
        let r = columns_with(ZERO3, "8").unwrap();
        let s = &r.source;
        assert!(
            r.description.contains("8 rows x 4 columns per thread (grid y extent / 8, x extent / 4)"),
            "{}",
            r.description
        );
        assert!(r.description.contains("one 16-byte load where aligned"), "{}", r.description);
        // The launch divides both extents and passes the original ones.
        assert!(
            s.contains("st3<<<dim3(((grid.x) + 4 - 1) / 4, ((grid.y) + 8 - 1) / 8, grid.z), block, 0, s>>>(x, w, y, H, W, (grid.y), ((grid).x));"),
            "{s}"
        );
        assert!(s.contains("int H, int W, unsigned int ns_grid_y, unsigned int ns_grid_x)"), "{s}");
        assert!(s.contains("const long long ns_col0 = (long long)(blockIdx.x * blockDim.x + threadIdx.x) * 4;"), "{s}");
        assert!(s.contains("const long long ns_cols = (long long)ns_grid_x * blockDim.x;"), "{s}");
        // The column is declared per column, once: the original declaration is gone.
        assert_eq!(
            s.matches("const int col = ").count(),
            4,
            "the check, the strip inside, the whole strip, the edges: {s}"
        );
        assert!(s.contains("bool ns_whole = ns_row0 + 8 <= ns_rows && ns_col0 + 4 <= ns_cols;"), "{s}");
        // Taps at columns -1..+1 of a run of 4: six columns of ten rows, 60 registers,
        // loaded before the first row.
        assert!(s.contains("float ns_w0[6][10];"), "{s}");
        assert!(s.contains("acc += w[(dy + 1) * 3 + (dx + 1)] * ns_w0[ns_c + dx + 1][ns_r + dy + 1];"), "{s}");
        // The run's own four columns: one float4 where each is read by the original, they
        // lie side by side and the first is aligned; the rest one at a time.
        assert!(s.contains("const float4 ns_v0 = *reinterpret_cast<const float4*>(ns_p0);"), "{s}");
        assert!(s.contains("ns_w0[4][ns_j - (-1)] = ns_v0.w;"), "{s}");
        assert!(s.contains("ns_vec0 = ns_vec0 && (reinterpret_cast<size_t>(ns_p0) & 15) == 0;"), "{s}");
        assert!(s.contains("== ns_p0 + ns_i;"), "{s}");
        assert!(s.contains("if (ns_vec0 && ns_i >= 0 && ns_i < 4) continue;"), "{s}");
        assert!(s.contains("for (int ns_i = -1; ns_i <= 4; ++ns_i) {"), "{s}");
        // Each value, wide or not, is read under the tap's own conditions.
        assert!(s.contains("(!((ns_row0 + ns_j) < 0 || (ns_row0 + ns_j) >= H) && !(((int)(((int)ns_col0 + ns_i))) < 0 || ((int)(((int)ns_col0 + ns_i))) >= W))"), "{s}");
        // The edges run the original per column, up to the columns the grid launched.
        assert!(s.contains("#pragma unroll 1\n      for (int ns_c = 0; ns_c < 4; ++ns_c) {\n        const int col = ns_col0 + ns_c;\n        if (ns_col0 + ns_c >= ns_cols) break;"), "{s}");
        // The output goes out 16 bytes at a time from the run's last column where the four
        // addresses lie side by side and the first is aligned.
        assert!(r.description.ends_with("`y` stored 16 bytes at a time"), "{}", r.description);
        assert!(
            s.contains(
                "ns_sp[ns_c] = &y[(size_t)row * W + col];\n        ns_sv[ns_c] = acc;\n        if (ns_c == 3) {"
            ),
            "{s}"
        );
        assert!(s.contains("if (ns_sp[1] == ns_sp[0] + 1 && ns_sp[2] == ns_sp[0] + 2 && ns_sp[3] == ns_sp[0] + 3 && (reinterpret_cast<size_t>(ns_sp[0]) & 15) == 0) {"), "{s}");
        assert!(s.contains("ns_store16(ns_sp[0], ns_sv[0], ns_sv[1], ns_sv[2], ns_sv[3]);"), "{s}");
        assert!(s.contains("for (int ns_k = 0; ns_k < 4; ++ns_k) *ns_sp[ns_k] = ns_sv[ns_k];"), "{s}");
        assert!(s.contains("#define NIGHTSHIFT_STORE16"), "{s}");
        // An output the per-row code also reads (`+=`) is stored where it was.
        let r =
            columns_with(&ZERO3.replace("y[(size_t)row * W + col] = acc;", "y[(size_t)row * W + col] += acc;"), "8")
                .unwrap();
        assert!(
            !r.source.contains("ns_store16(") && r.source.contains("y[(size_t)row * W + col] += acc;"),
            "{}",
            r.source
        );
        // One column per thread is the plain strip, as before.
        let plain = strip_with(ZERO3, "8").unwrap();
        assert!(!plain.source.contains("ns_col0") && plain.source.contains("float ns_w0[3][10];"), "{}", plain.source);
    }

    #[test]
    fn clamped_columns_load_wide_only_where_they_lie_side_by_side_and_other_shapes_too() {
        // A 5x5 box with clamped borders: columns -2..+5 over 12 rows is 96 registers, a
        // row per step; the clamp is in the address, so the side-by-side check is what
        // keeps a clamped edge off the wide load.
        let r = columns_with(BOX5, "8").unwrap();
        let s = &r.source;
        assert!(s.contains("float ns_w0[8][12];"), "{s}");
        assert!(s.contains("one new row per step"), "{s}");
        assert!(s.contains("min(max(((int)ns_col0 + ns_i), 0), W - 1)"), "{s}");
        assert!(s.contains("== ns_p0 + ns_i;"), "{s}");
        // A vertical window reads the run's own columns only.
        let r = columns_with(BOX, "8").unwrap();
        assert!(r.source.contains("float ns_w0[4][12];"), "{}", r.source);
        assert!(r.source.contains("for (int ns_i = 0; ns_i <= 3; ++ns_i) {"), "{}", r.source);
        // `double` has no 16-byte run of 4: the columns load one at a time.
        let r = columns_with(&ZERO3.replace("float", "double"), "4").unwrap();
        assert!(!r.source.contains("ns_vec0") && r.source.contains("double ns_w0[6][6];"), "{}", r.source);
        assert!(!r.source.contains("ns_store16("), "{}", r.source);
        assert!(r.description.contains("4 columns per thread, loaded one at a time"), "{}", r.description);
    }

    #[test]
    fn a_window_of_columns_loads_only_what_the_strip_reads_in_the_columns_own_type() {
        // Up one row at the column, down one row a column to the right: rows -1 and +1
        // of one window, but not every column of each.
        let skew = ZERO3
            .replace("  float acc = 0.0f;\n  for (int dy = -1; dy <= 1; ++dy) {\n    const int r = row + dy;\n    if (r < 0 || r >= H) continue;\n    for (int dx = -1; dx <= 1; ++dx) {\n      const int c = col + dx;\n      if (c < 0 || c >= W) continue;\n      acc += w[(dy + 1) * 3 + (dx + 1)] * x[(size_t)r * W + c];\n    }\n  }\n",
                "  if (col >= W - 1 || row < 1 || row >= H - 1) return;\n  const float acc = x[(row - 1) * W + col] - x[(row + 1) * W + col + 1];\n");
        let r = columns_with(&skew, "8").unwrap();
        let s = &r.source;
        assert!(s.contains("float ns_w0[5][10];"), "{s}");
        // Row -1 is read at the run's 4 columns, rows 1..6 at those and one to the right,
        // rows 7 and 8 only one to the right.
        assert!(
            s.contains("constexpr unsigned long long ns_need0[10] = {0xfull, 0xfull, 0x1full, 0x1full, 0x1full, 0x1full, 0x1full, 0x1full, 0x1eull, 0x1eull};"),
            "{s}"
        );
        assert!(s.contains("bool ns_vec0 = ((ns_need0[ns_j - (-1)] >> (0 - (0))) & 0xFull) == 0xFull;"), "{s}");
        assert!(
            s.contains("if (((ns_need0[ns_j - (-1)] >> (ns_i - (0))) & 1ull)) ns_w0[ns_i - (0)][ns_j - (-1)] = "),
            "{s}"
        );
        // Taps on one side only: the run's own columns are not window columns, so no wide
        // load (its lanes would fall outside the window).
        let right = skew.replace("x[(row - 1) * W + col] - ", "x[(row - 1) * W + col + 1] - ");
        let r = columns_with(&right, "8").unwrap();
        assert!(!r.source.contains("ns_vec0") && r.source.contains("float ns_w0[4][10];"), "{}", r.source);
        // A 64-bit column's window column is 64-bit.
        let wide = ZERO3.replace("const int col =", "const long long col =");
        let r = columns_with(&wide, "8").unwrap();
        assert!(r.source.contains("((long long)ns_col0 + ns_i)"), "{}", r.source);
        // An `unsigned` column, an unsigned tap loop or an unsigned offset would wrap
        // differently in the window's order of terms: declined, or no window.
        let unsigned = ZERO3.replace("const int col =", "const unsigned col =");
        let why = columns_with(&unsigned, "8").unwrap_err().0;
        assert!(
            why.contains("declares its column `col` as `const unsigned`: a run's column offsets would wrap"),
            "{why}"
        );
        let loop_ = ZERO3.replace(
            "for (int dx = -1; dx <= 1; ++dx) {\n      const int c = col + dx;",
            "for (unsigned dx = 0; dx <= 2; ++dx) {\n      const int c = col + dx - 1;",
        );
        let why = columns_with(&loop_, "8").unwrap_err().0;
        assert!(why.contains("adds `dx`, a `unsigned`, to the column `col`"), "{why}");
        let literal = ZERO3.replace("const int c = col + dx;", "const int c = col + dx + 0u;");
        let why = columns_with(&literal, "8").unwrap_err().0;
        assert!(why.contains("adds `0u`, not an `int`, to the column `col`"), "{why}");
    }

    #[test]
    fn columns_decline_with_the_reason_where_the_kernel_gives_no_run_of_columns() {
        let why = |src: &str| columns_with(src, "8").unwrap_err().0;
        // The x coordinates read outside the column.
        let lane = ZERO3.replace("float acc = 0.0f;", "float acc = threadIdx.x == 0 ? 0.0f : 0.0f;");
        assert!(why(&lane).contains("reads `threadIdx.x` outside its column index"), "{}", why(&lane));
        // No column of its own before the row.
        let late = ZERO3
            .replace("  const int col = blockIdx.x * blockDim.x + threadIdx.x;\n", "")
            .replace("  if (col >= W", "  const int col = blockIdx.x * blockDim.x + threadIdx.x;\n  if (col >= W");
        assert!(why(&late).contains("declares no column index"), "{}", why(&late));
        // Rows shared, but each read at one column the run does not move: nothing to load
        // side by side.
        let fixed = BOX.replace("s += in[yy * W + x];", "s += in[yy * W];");
        assert!(why(&fixed).contains("reads no buffer at several columns"), "{}", why(&fixed));
        // The column changed in the per-row code.
        let moved = ZERO3.replace("float acc = 0.0f;", "float acc = 0.0f;\n  int* p = (int*)&col;");
        assert!(why(&moved).contains("changes its column `col`"), "{}", why(&moved));
        // Read through a device function that another one calls, or a macro.
        let nested = ZERO3
            .replace("__global__ void st3", "__device__ int lane() { return threadIdx.x & 31; }\n__device__ int twice() { return 2 * lane(); }\n__global__ void st3")
            .replace("float acc = 0.0f;", "float acc = (float)twice();");
        assert!(why(&nested).contains("calls `lane`, which reads `threadIdx.x`"), "{}", why(&nested));
        let macro_ = ZERO3
            .replace("__global__ void st3", "#define LANE (threadIdx. x & 31)\n__global__ void st3")
            .replace("float acc = 0.0f;", "float acc = (float)LANE;");
        assert!(why(&macro_).contains("names `LANE`, a macro that reads the x coordinates"), "{}", why(&macro_));
        // Through another macro, over two lines, in a function the kernel calls.
        let deep = ZERO3
            .replace("__global__ void st3", "# define TX \\\n  threadIdx.x\n#define LANE (TX & 31)\n__device__ float lane() { return (float)LANE; }\n__global__ void st3")
            .replace("float acc = 0.0f;", "float acc = lane();");
        assert!(why(&deep).contains("names `LANE`, a macro that reads the x coordinates"), "{}", why(&deep));
        let templated = ZERO3
            .replace(
                "__global__ void st3",
                "template <int K> __device__ float lane() { return (float)(threadIdx.x + K); }\n__global__ void st3",
            )
            .replace("float acc = 0.0f;", "float acc = lane<0>();");
        assert!(why(&templated).contains("calls `lane`, which reads `threadIdx.x`"), "{}", why(&templated));
        // A declarator beside the row made from the column.
        let beside = ZERO3.replace(
            "const int row = blockIdx.y * blockDim.y + threadIdx.y;",
            "const int row = blockIdx.y * blockDim.y + threadIdx.y, at = row * W + col;",
        );
        assert!(
            why(&beside).contains("declares `at = row * W + col` beside its row from its column `col`"),
            "{}",
            why(&beside)
        );
        // A pointer the per-row code moves with the column shares no rows.
        let alias = BOX
            .replace("  float s = 0.f;", "  const float* p = in + x;\n  float s = 0.f;")
            .replace("s += in[yy * W + x];", "s += p[yy * W];");
        assert!(why(&alias).contains("`p` points at a place that moves with the column"), "{}", why(&alias));
        // Something that may leave early before the store keeps the store where it was.
        let early = ZERO3.replace(
            "  y[(size_t)row * W + col] = acc;",
            "  if (acc == 0.0f) return;\n  y[(size_t)row * W + col] = acc;",
        );
        let r = columns_with(&early, "8").unwrap();
        assert!(!r.source.contains("ns_store16(") && r.source.contains("float4"), "{}", r.source);
        // An unbraced `if (check) out[i] = v;`: the statements in its place are braced.
        let unbraced = ZERO3
            .replace("  if (col >= W || row >= H) return;\n", "")
            .replace("  y[(size_t)row * W + col] = acc;", "  if (col < W && row < H) y[(size_t)row * W + col] = acc;");
        let r = columns_with(&unbraced, "8").unwrap();
        assert!(r.source.contains("if (true) { ns_sp[ns_c] = &y[(size_t)row * W + col];"), "{}", r.source);
        // So does a statement after it (a read through a pointer that aliases the output
        // would see the deferred store's old value).
        let after =
            ZERO3.replace("  y[(size_t)row * W + col] = acc;", "  y[(size_t)row * W + col] = acc;\n  acc = 0.0f;");
        let r = columns_with(&after, "8").unwrap();
        assert!(!r.source.contains("ns_store16(") && r.source.contains("float4"), "{}", r.source);
    }

    #[test]
    fn a_vertical_window_keeps_its_rows_in_registers() {
        let r = strip_with(BOX, "8").unwrap();
        let s = &r.source;
        assert_eq!(
            r.description,
            "`boxv`: 8 rows per thread (grid y extent / 8); rows read at several offsets shared in registers across the strip: `in` at rows y-2..y+2"
        );
        assert!(
            s.contains(
                "boxv<<<dim3(grid.x, ((grid.y) + 8 - 1) / 8, grid.z), block, 0, st>>>(in, out, W, H, (grid.y));"
            ),
            "{s}"
        );
        assert!(s.contains("float* __restrict__ out, int W, int H, unsigned int ns_grid_y)"), "{s}");
        assert!(s.contains("const int ns_row0 = (int)(blockIdx.y * blockDim.y + threadIdx.y) * 8;"), "{s}");
        assert!(s.contains("const int ns_rows = (int)(ns_grid_y * blockDim.y);"), "{s}");
        assert!(s.contains("float ns_w0[12];"), "{s}");
        // Twelve values: the whole window is loaded before the first row, its loads in
        // flight together, and the rows' code only reads it.
        let fill = "#pragma unroll\n    for (int ns_j = -2; ns_j <= 9; ++ns_j) {\n      ns_w0[ns_j - (-2)] = in[min(max((ns_row0 + ns_j), 0), H - 1) * W + x];\n    }\n    #pragma unroll\n    for (int ns_r = 0; ns_r < 8; ++ns_r) {";
        assert!(s.contains(fill), "{s}");
        assert!(!s.contains("ns_q"), "{s}");
        assert!(s.contains("s += ns_w0[ns_r + k + 2];"), "{s}");
        assert!(s.contains("ns_whole = ns_whole && (!(x >= W || y >= H));"), "{s}");
        // The loop the window sits in is unrolled, so the window's indices are constants.
        assert!(s.contains("#pragma unroll\n      for (int k = -R; k <= R; ++k) {"), "{s}");
        // The edges run the rows one by one, as the original did.
        assert!(s.contains("if (y >= ns_rows) break;"), "{s}");
        assert!(s.contains("if (x >= W || y >= H) continue;"), "{s}");
        let again = strip_with(s, "8").unwrap_err();
        assert_eq!(again.0, "`boxv` computes a strip of rows per thread already");
    }

    #[test]
    fn zero_border_taps_carry_their_own_checks_into_the_window() {
        let src = BOX.replace(
            "    int yy = min(max(y + k, 0), H - 1);\n    s += in[yy * W + x];",
            "    const int yy = y + k;\n    if (yy < 0 || yy >= H) continue;\n    s += in[yy * W + x];",
        );
        let r = strip_with(&src, "4").unwrap();
        let s = &r.source;
        assert!(r.description.ends_with("`in` at rows y-2..y+2"), "{}", r.description);
        assert!(
            s.contains("if (!((ns_row0 + ns_j) < 0 || (ns_row0 + ns_j) >= H)) ns_w0[ns_j - (-2)] = in[(ns_row0 + ns_j) * W + x];"),
            "{s}"
        );
        assert!(s.contains("s += ns_w0[ns_r + k + 2];"), "{s}");
        // A strip inside the image, every tap's row in 0..H-1 (checked once for the whole
        // window), loads its window and runs its taps without the test.
        let (inside, rest) = s.split_once("} else if (ns_whole) {").expect("a path for strips inside");
        let (whole, edges) = rest.split_once("} else {").expect("a path for the edges");
        assert!(
            inside.contains("bool ns_inside = ns_whole;\n  #pragma unroll\n  for (int ns_j = -2; ns_j <= 5; ++ns_j) {\n    ns_inside = ns_inside && (!((ns_row0 + ns_j) < 0 || (ns_row0 + ns_j) >= H));"),
            "{s}"
        );
        assert!(inside.contains("  ns_w0[ns_j - (-2)] = in[(ns_row0 + ns_j) * W + x];"), "{s}");
        assert!(inside.contains("if (false) continue;") && !inside.contains("if (yy < 0 || yy >= H) continue;"), "{s}");
        // A whole strip at the top or bottom edge keeps the taps' tests; the row's own
        // check is known there.
        assert!(whole.contains("if (yy < 0 || yy >= H) continue;") && whole.contains("if (false) continue;"), "{s}");
        assert!(!whole.contains("if (x >= W || y >= H)"), "{s}");
        assert!(
            edges.contains("if (yy < 0 || yy >= H) continue;") && edges.contains("if (x >= W || y >= H) continue;"),
            "{s}"
        );
    }

    #[test]
    fn names_changed_through_other_names_decline_and_tests_that_call_the_files_functions_stay() {
        let zero = BOX.replace(
            "    int yy = min(max(y + k, 0), H - 1);\n    s += in[yy * W + x];",
            "    int yy = y + k;\n    if (yy < 0 || yy >= H) continue;\n    s += in[(y + k) * W + x];",
        );
        let why = |src: &str| strip_with(src, "4").unwrap_err().0;
        // `r` changes `yy`, whose test the window renders from its initializer.
        let by_ref = zero.replace("    if (yy < 0", "    int& r = yy;\n    if (r < 0) r = H;\n    if (yy < 0");
        assert!(why(&by_ref).contains("binds a reference in its per-row code (`& r`)"), "{}", why(&by_ref));
        let by_address = zero.replace("    if (yy < 0", "    int* p = &k;\n    if (yy < 0");
        assert!(why(&by_address).contains("takes the address of `k`"), "{}", why(&by_address));
        let param = zero.replace("    if (yy < 0", "    int* p = &H;\n    if (yy < 0");
        assert!(why(&param).contains("(`&H` hands it out)"), "{}", why(&param));
        // A `const` reference and the address of a local of the row's own stay.
        let fine = zero
            .replace("    if (yy < 0", "    const int& r = yy;\n    float t = 0.f;\n    float* q = &t;\n    if (r < 0");
        assert!(strip_with(&fine, "4").is_ok(), "{}", why(&fine));
        // A test calling a device function of the file keeps its call on every path.
        let counted = format!(
            "__device__ unsigned long long g_taps;\n__device__ bool out_of(int r, int H) {{ atomicAdd(&g_taps, 1ull); return r < 0 || r >= H; }}\n{}",
            zero.replace("if (yy < 0 || yy >= H) continue;", "if (out_of(yy, H)) continue;")
        );
        let r = strip_with(&counted, "4").unwrap();
        let inside = &r.source[r.source.find("if (ns_inside) {").expect("a path for strips inside")..];
        assert!(inside.contains("if (out_of(yy, H)) continue;"), "{}", r.source);
        // So does the kernel's own check in a whole strip.
        let checked = counted.replace("if (x >= W || y >= H) return;", "if (x >= W || out_of(y, H)) return;");
        let r = strip_with(&checked, "4").unwrap();
        let (_, rest) = r.source.split_once("} else if (ns_whole) {").expect("a path for whole strips");
        let (whole, _) = rest.split_once("} else {").expect("a path for the edges");
        assert!(whole.contains("if (x >= W || out_of(y, H)) continue;"), "{}", r.source);
    }

    #[test]
    fn a_known_test_is_written_as_its_value_only_where_no_other_edit_touches_it() {
        let edits = vec![(10..20, "ns_w0[1]".to_string()), (30..30, "#pragma unroll\n".to_string())];
        let known = vec![(0..5, true), (2..4, false), (12..15, true), (25..35, false), (40..44, false)];
        let out = with_known(&edits, &known);
        assert_eq!(
            out,
            vec![
                (10..20, "ns_w0[1]".to_string()),
                (30..30, "#pragma unroll\n".to_string()),
                (0..5, "false".to_string()),
                (40..44, "true".to_string()),
            ],
            "a test a read needs false is `false`; the outer of two nested tests; none inside a read or around an insertion"
        );
    }

    #[test]
    fn rows_next_to_x_declarations_and_no_check_at_all() {
        let src = r#"
__global__ void vgrad(const float* in, float* out, int W) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y, i = y * W + x;
  out[i] = in[i + W] - in[i];
}
extern "C" void launch(const float* in, float* out, int W, int H, cudaStream_t st) {
  vgrad<<<dim3(W / 32, (H - 1) / 4), dim3(32, 4), 0, st>>>(in, out, W);
}
"#;
        let r = strip_with(src, "4").unwrap();
        let s = &r.source;
        assert!(s.contains("const int x = blockIdx.x * blockDim.x + threadIdx.x;"), "{s}");
        assert!(s.contains("const int y = ns_row0 + ns_r;\n    const int i = y * W + x;"), "{s}");
        assert!(s.contains("vgrad<<<dim3(W / 32, (((H - 1) / 4) + 4 - 1) / 4, 1), dim3(32, 4), 0, st>>>(in, out, W, ((H - 1) / 4));"), "{s}");
        // `i + W` is the next row only through the pitch `W`, which is not divided out: both
        // reads are at the row itself, so each row loads its own.
        assert_eq!(
            r.description,
            "`vgrad`: 4 rows per thread (grid y extent / 4); no row reuse: no buffer it only reads is read at several row offsets"
        );
    }

    #[test]
    fn what_a_strip_would_change_is_declined_with_its_reason() {
        let why = |from: &str, to: &str| strip_with(&BOX.replace(from, to), "8").unwrap_err().0;
        assert_eq!(
            why("dim3 grid((W + 31) / 32, (H + 7) / 8);\n  boxv<<<grid,", "boxv<<<(W + 31) / 32,"),
            "`boxv` reads `blockIdx.y`, but a launch's grid `(W + 31) / 32` is a number: one row of blocks, nothing to strip"
        );
        assert_eq!(
            why("out[y * W + x] = s;", "out[y * W + x] = s + threadIdx.y;"),
            "`boxv` reads `threadIdx.y` outside its row index (in `s + threadIdx.y`), which a strip would change"
        );
        assert_eq!(
            why("  int y = blockIdx.y * blockDim.y + threadIdx.y;\n", "  float t = 0.f;\n  int y = blockIdx.y * blockDim.y + threadIdx.y;\n  t += 1.f;\n"),
            "`boxv` changes `t` in its per-row code but declares it before its row index: a strip's next row would start from the last row's `t`"
        );
        assert_eq!(
            why("int y = blockIdx.y * blockDim.y + threadIdx.y;", "int y = blockIdx.y * 16 + threadIdx.y;"),
            "`boxv` steps its rows by `16`, which this file does not show equal to the y extent of the block `block`"
        );
        assert_eq!(
            why("    s += in[yy * W + x];", "    if (yy == 0) return;\n    s += in[yy * W + x];"),
            "`boxv` returns from inside a loop of its per-row code, where a strip could not end one row alone"
        );
        assert_eq!(
            why("int y = blockIdx.y * blockDim.y + threadIdx.y;", "int y = blockIdx.y * blockDim.y + threadIdx.y + 1;"),
            "`boxv` reads `blockIdx.y` but declares no row index `y = blockIdx.y * blockDim.y + threadIdx.y` (or `= blockIdx.y`) among its top-level statements"
        );
    }

    #[test]
    fn helpers_that_read_the_rows_builtins_and_grids_of_unknown_type_are_declined() {
        let src = BOX
            .replace("__global__ void boxv(", "__device__ int row_of() { return blockIdx.y; }\n__global__ void boxv(")
            .replace("out[y * W + x] = s;", "out[y * W + x] = s + row_of();");
        assert_eq!(strip_with(&src, "8").unwrap_err().0, "`boxv` calls `row_of`, which reads `blockIdx.y`");
        let src = BOX.replace("dim3 grid((W + 31) / 32, (H + 7) / 8);\n  boxv<<<grid,", "boxv<<<grid_for(W, H),");
        assert_eq!(
            strip_with(&src, "8").unwrap_err().0,
            "`boxv` is launched on the grid `grid_for(W, H)`: a call to `grid_for`, which this file does not define, so its y extent cannot be divided"
        );
    }

    #[test]
    fn reads_the_window_cannot_prove_stay_plain_loads() {
        // A mask read decides whether the tap is read: the read stays where it was.
        let src = BOX
            .replace("__restrict__ in,", "__restrict__ in, const float* __restrict__ mask,")
            .replace("    s += in[yy * W + x];", "    if (mask[yy * W + x] > 0.f) s += in[yy * W + x];")
            .replace("(in, out, W, H)", "(in, in, out, W, H)");
        let r = strip_with(&src, "8").unwrap();
        assert_eq!(
            r.description,
            "`boxv`: 8 rows per thread (grid y extent / 8); rows read at several offsets shared in registers across the strip: `mask` at rows y-2..y+2"
        );
        assert!(r.source.contains("if (ns_w0[ns_r + k + 2] > 0.f) s += in[yy * W + x];"), "{}", r.source);
    }

    /// A batch of images, `blockIdx.z` picking one: the kernel reads through a local
    /// pointer to its image, as the stencil example does.
    #[test]
    fn reads_through_a_const_alias_of_an_input_share_rows_at_the_alias_offset() {
        let src = BOX
            .replace("  float s = 0.f;", "  const size_t plane = (size_t)blockIdx.z * H * W;\n  const float* img = in + plane;\n  float s = 0.f;")
            .replace("s += in[yy * W + x];", "s += img[yy * W + x];")
            .replace("out[y * W + x] = s;", "out[plane + y * W + x] = s;");
        let r = strip_with(&src, "8").unwrap();
        assert_eq!(
            r.description,
            "`boxv`: 8 rows per thread (grid y extent / 8); rows read at several offsets shared in registers across the strip: `img` at rows y-2..y+2"
        );
        // The window reads the buffer at the alias's offset, spelled from what holds still.
        assert!(
            r.source.contains(
                "= (in + ((size_t)((size_t)blockIdx.z * H * W)))[min(max((ns_row0 + ns_j), 0), H - 1) * W + x];"
            ),
            "{}",
            r.source
        );
        // An alias that moves with the row is no window.
        let moving = src.replace("const float* img = in + plane;", "const float* img = in + (plane + y * 0);");
        let r = strip_with(&moving, "8").unwrap();
        assert!(
            r.description.ends_with("no row reuse: `img` points at a place that moves with the row"),
            "{}",
            r.description
        );
        // Nor is one the kernel writes through, or one of a buffer it writes.
        for other in [
            "float* img = (float*)in + plane;",
            "const float* img = out + plane;",
            // Written through a cast: `in` is no buffer the kernel only reads.
            "const float* img = in + plane;\n  ((float*)img)[0] = 0.f;",
        ] {
            let r = strip_with(&src.replace("const float* img = in + plane;", other), "8").unwrap();
            assert!(r.description.contains("no row reuse"), "{other}: {}", r.description);
        }
    }
}
