//! The row cache over `vectorize`'s passes. After `vectorize`, each pass over a row is an
//! `if (/* nightshift: aligned */ ...)` whose run loop loads V consecutive elements a step
//! into a register array (`alignas(16) T ns_x[V]; ns_load(ns_x, x + ns_base);`). Two
//! passes whose run loops step alike (the same first element, stride, V and bound) and load
//! a buffer at the same address keep that buffer's runs in `ns_row_x[R][V]`: the first
//! pass's run loop becomes R fully unrolled steps that load into the array, and the later
//! passes' steps read from it instead of memory. The row travels as the 16-byte runs it
//! was loaded in, so a row of 4096 bf16 across a warp is 64 registers a lane, where the
//! element-wise cache would need 128.
//!
//! The loading pass's aligned path sets a flag (`ns_row_x_filled`); a later pass's
//! aligned path loads its runs itself where the flag is down (the loading pass took its
//! narrow path), so the array is filled wherever it is read. Tails (the elements past the
//! last whole run) and the unaligned paths read memory as before. The launcher takes the
//! fast copy only when a row fits (`n <= R * V * stride`).

use super::{alike, at_launcher, bound_sizes, fresh, read_only_input, squeeze, value_of};
use crate::facts::Facts;
use crate::source::{Kernel, Source};
use crate::syntax::{self, descendants, indent_at, named_children, reindent, strip, text};
use crate::version::Change;
use tree_sitter::Node;

/// The most bytes of rows a thread keeps across one group of passes (64 registers).
const MOST_BYTES: i64 = 256;

/// Runs per thread where the task gives no row length or stride to choose by.
const UNKNOWN_RUNS: i64 = 2;

/// The marker `vectorize` writes on each pass's aligned path.
const ALIGNED: &str = "/* nightshift: aligned */";

/// A register array of a run loop: `alignas(16) T ns_x[N];`, and its load if it has one.
struct Staged<'t> {
    array: String,
    elem: String,
    len: i64,
    decl: Node<'t>,
    load: Option<Load<'t>>,
}

struct Load<'t> {
    stmt: Node<'t>,
    /// `x + ns_base`, `A + ((size_t)row * cols) + ns_base`.
    address: String,
    address_node: Node<'t>,
    /// Under `if (...)` (a read the original made only where a condition held).
    conditional: bool,
}

/// One of `vectorize`'s passes.
struct WidePass<'t> {
    /// The `if (/* nightshift: aligned */ ...)` statement and its wide path.
    stmt: Node<'t>,
    wide: Node<'t>,
    first: Node<'t>,
    stride: Node<'t>,
    ty: String,
    v: i64,
    bound: Node<'t>,
    run: Node<'t>,
    /// An unroll pragma of the run loop, which the full unroll replaces.
    pragma: Option<Node<'t>>,
    staged: Vec<Staged<'t>>,
}

impl WidePass<'_> {
    fn key(&self, t: &str) -> (String, String, String, i64, String) {
        (
            squeeze(text(t, self.first)),
            squeeze(text(t, self.stride)),
            squeeze(text(t, self.bound)),
            self.v,
            self.ty.clone(),
        )
    }

    fn over(&self, t: &str) -> String {
        format!("the runs of {} over `{}`", self.v, text(t, strip(self.bound)))
    }
}

/// The passes `vectorize` wrote in `body`, each parsed, or why one is not taken.
fn passes<'t>(t: &str, body: Node<'t>) -> Vec<Result<WidePass<'t>, String>> {
    descendants(body)
        .into_iter()
        .filter(|d| d.kind() == "if_statement")
        .filter(|d| d.child_by_field_name("condition").is_some_and(|c| text(t, c).contains(ALIGNED)))
        .map(|d| {
            wide_pass(t, d).ok_or_else(|| format!("`{}` is not a pass as `vectorize` writes it", first_line(t, d)))
        })
        .map(|r| r.and_then(|p| p))
        .collect()
}

fn first_line(t: &str, n: Node) -> String {
    text(t, n).lines().next().unwrap_or("").trim_end_matches('{').trim().to_string()
}

fn wide_pass<'t>(t: &str, stmt: Node<'t>) -> Option<Result<WidePass<'t>, String>> {
    let block = stmt.child_by_field_name("consequence").filter(|b| b.kind() == "compound_statement")?;
    let mut first = None;
    let mut stride = None;
    let mut run = None;
    for s in named_children(block) {
        match s.kind() {
            "declaration" => match syntax::single_declarator(t, s)? {
                (n, Some(v)) if n == "ns_first" => first = Some(v),
                (n, Some(v)) if n == "ns_stride" => stride = Some(v),
                (n, _) if n == "ns_begin" => {
                    return Some(Err(
                        "its runs start at an offset the kernel computes (`ns_begin`), which the launcher cannot check a row's length from".into(),
                    ))
                }
                _ => {}
            },
            "for_statement" if run.is_none() => run = Some(s),
            _ => {}
        }
    }
    let (first, stride, run) = (first?, stride?, run?);
    let init = run.child_by_field_name("initializer")?;
    let (name, value) = syntax::single_declarator(t, init)?;
    let v: i64 = squeeze(text(t, value?)).strip_prefix("ns_first*")?.parse().ok()?;
    let ty = init.child_by_field_name("type").map(|n| text(t, n).to_string())?;
    let (op, left, bound) = syntax::binary(t, run.child_by_field_name("condition")?)?;
    let update = squeeze(text(t, run.child_by_field_name("update")?));
    if name != "ns_base"
        || op != "<="
        || squeeze(text(t, left)) != format!("ns_base+{v}")
        || update != format!("ns_base+=ns_stride*{v}")
    {
        return None;
    }
    let pragma = run
        .prev_named_sibling()
        .filter(|x| x.kind() == "preproc_call" && text(t, *x).trim_start().starts_with("#pragma unroll"));
    let body = run.child_by_field_name("body").filter(|b| b.kind() == "compound_statement")?;
    let mut staged: Vec<Staged> = Vec::new();
    for s in named_children(body) {
        let line = text(t, s);
        if let Some(decl) = line.strip_prefix("alignas(16) ") {
            let decl = decl.trim_end_matches(';');
            let (elem, array) = decl.rsplit_once(' ')?;
            let (array, len) = array.strip_suffix(']')?.split_once('[')?;
            staged.push(Staged {
                array: array.to_string(),
                elem: elem.trim().to_string(),
                len: len.parse().ok()?,
                decl: s,
                load: None,
            });
        } else if let Some(at) = line.find("ns_load(") {
            let call = descendants(s).into_iter().find(|d| {
                d.kind() == "call_expression"
                    && d.child_by_field_name("function").is_some_and(|f| text(t, f) == "ns_load")
            })?;
            let args = named_children(call.child_by_field_name("arguments")?);
            let [array, address] = args.as_slice() else { return None };
            let slot = staged.iter_mut().find(|x| x.array == text(t, *array))?;
            slot.load = Some(Load {
                stmt: s,
                address: text(t, *address).to_string(),
                address_node: *address,
                conditional: at > 0,
            });
        }
    }
    Some(Ok(WidePass { stmt, wide: block, first, stride, ty, v, bound, run, pragma, staged }))
}

/// A buffer kept across the passes of a group: its array in the loading pass and the
/// later passes that read it.
struct Kept {
    /// The pointer (`xr`) and the array each pass stages it in (`ns_xr`).
    name: String,
    array: String,
    elem: String,
    len: i64,
    cache: String,
    /// Set on the loading pass's wide path: a later pass reads the cache only then, and
    /// loads its runs itself otherwise.
    filled: String,
    load: usize,
    readers: Vec<usize>,
}

/// The change, or None where the kernel has none of `vectorize`'s passes (the element-wise
/// cache then says why it does not apply); the error is a clause after the kernel's name.
pub(super) fn plan<'k>(
    src: &Source,
    facts: &Facts,
    k: &'k Kernel,
    body: Node,
    elems: Option<i64>,
) -> Option<Result<(Change<'k>, String), String>> {
    let t = src.text();
    let parsed = passes(t, body);
    if parsed.is_empty() {
        return None;
    }
    Some(plan_passes(src, facts, k, body, parsed, elems))
}

fn plan_passes<'k>(
    src: &Source,
    facts: &Facts,
    k: &'k Kernel,
    body: Node,
    parsed: Vec<Result<WidePass, String>>,
    elems: Option<i64>,
) -> Result<(Change<'k>, String), String> {
    let t = src.text();
    if descendants(body).iter().any(|d| d.kind() == "goto_statement") {
        return Err("jumps with `goto`, so a pass could run without the one that loads the row".into());
    }
    if descendants(body).iter().any(|d| {
        d.kind().starts_with("preproc_") && (text(t, *d).contains("#define") || text(t, *d).starts_with("#undef"))
    }) {
        return Err("defines or undefines macros inside the kernel, so two passes' names may not mean the same".into());
    }
    let mut why: Vec<String> = Vec::new();
    let mut all = Vec::new();
    for p in parsed {
        match p {
            Ok(p) => all.push(p),
            Err(e) => why.push(e),
        }
    }
    let groups = alike(&all.iter().map(|p| p.key(t)).collect::<Vec<_>>());
    if groups.is_empty() {
        why.push(format!(
            "makes one vectorized pass over each row (runs over {}): no row is read twice",
            all.iter().map(|p| format!("`{}`", text(t, strip(p.bound)))).collect::<Vec<_>>().join(", ")
        ));
    }
    let mut change = Change::new(k);
    let mut notes = Vec::new();
    let mut taken = syntax::declared_names(t, body);
    for g in &groups {
        let group: Vec<&WidePass> = g.iter().map(|i| &all[*i]).collect();
        match plan_group(src, facts, k, body, &group, elems, &mut taken) {
            Ok((guard, edits, note)) => {
                change.guards.push(guard);
                for (range, with) in edits {
                    change.edits.replace(range, with);
                }
                notes.push(note);
            }
            Err(e) => why.push(e),
        }
    }
    if notes.is_empty() {
        why.dedup();
        return Err(why.join("; "));
    }
    Ok((change, format!("`{}`: {}", k.name, notes.join("; "))))
}

type GroupPlan = (String, Vec<(std::ops::Range<usize>, String)>, String);

fn plan_group(
    src: &Source,
    facts: &Facts,
    k: &Kernel,
    body: Node,
    group: &[&WidePass],
    elems: Option<i64>,
    taken: &mut Vec<String>,
) -> Result<GroupPlan, String> {
    let t = src.text();
    let first = group[0];
    let over = first.over(t);
    let mut why: Vec<String> = Vec::new();
    let mut kept: Vec<Kept> = Vec::new();
    // Each address staged in two or more passes, keyed by the first pass that stages it.
    let mut seen: Vec<String> = Vec::new();
    for (i, p) in group.iter().enumerate() {
        for s in &p.staged {
            let Some(l) = &s.load else { continue };
            let address = squeeze(&l.address);
            if seen.contains(&address) || !syntax::mentions_word(&l.address, "ns_base") {
                continue;
            }
            seen.push(address.clone());
            let same = |q: &WidePass| {
                q.staged.iter().any(|x| {
                    x.load.as_ref().is_some_and(|y| squeeze(&y.address) == address)
                        && x.array == s.array
                        && x.elem == s.elem
                        && x.len == s.len
                })
            };
            let readers: Vec<usize> = (i + 1..group.len()).filter(|j| same(group[*j])).collect();
            if readers.is_empty() {
                continue;
            }
            let name = l.address.split(['+', ' ']).next().unwrap_or("").trim().to_string();
            match keepable(src, facts, k, body, group, i, &readers, s, l, &name) {
                Ok(()) => {
                    let cache = fresh(t, taken, &format!("ns_row_{name}"));
                    let filled = fresh(t, taken, &format!("{cache}_filled"));
                    kept.push(Kept {
                        name,
                        array: s.array.clone(),
                        elem: s.elem.clone(),
                        len: s.len,
                        cache,
                        filled,
                        load: i,
                        readers,
                    });
                }
                Err(e) => why.push(e),
            }
        }
    }
    if kept.is_empty() {
        if why.is_empty() {
            why.push(format!("loads no buffer at the same address in two of its passes ({over})"));
        }
        why.dedup();
        return Err(why.join("; "));
    }
    let bound = at_launcher(src, k, body, strip(first.bound)).map_err(|e| {
        format!(
            "{over} end at `{}`, and the launcher cannot check a row's length against it: {e}",
            text(t, strip(first.bound))
        )
    })?;
    let stride = at_launcher(src, k, body, strip(first.stride))
        .map_err(|e| format!("{over} step by `{}`, which the launcher cannot see: {e}", text(t, first.stride)))?;
    if !never_negative(t, body, first.first) {
        return Err(format!(
            "{over} start at `{}`, which this recipe cannot show is never negative",
            text(t, first.first)
        ));
    }
    let mut bytes_per_run = 0;
    for c in &kept {
        let b = syntax::type_size(&c.elem)
            .map(|b| b as i64)
            .ok_or_else(|| format!("keeps `{}` of type `{}`, whose size this recipe does not know", c.name, c.elem))?;
        bytes_per_run += b * c.len;
    }
    let runs = runs_per_thread(src, facts, k, first, elems, bytes_per_run)?;
    let v = first.v;
    let step = fresh(t, taken, "ns_r");
    let guard = format!("{bound} <= {} * {stride}", runs * v);
    let mut edits = Vec::new();
    for (i, p) in group.iter().enumerate() {
        let loaded: Vec<&Kept> = kept.iter().filter(|c| c.load == i).collect();
        if loaded.is_empty() {
            continue;
        }
        // The arrays sit before the loading pass, in the block that holds every reader,
        // one insertion for all the buffers it loads.
        let at = p.stmt.start_byte();
        let indent = indent_at(t, at);
        let decls: String = loaded
            .iter()
            .map(|c| {
                format!(
                    "// nightshift: `{}` kept in registers as {runs} runs of {} per thread: read once, not once per pass.\n{indent}alignas(16) {} {}[{runs}][{}];\n{indent}bool {} = false;\n{indent}",
                    c.name, c.len, c.elem, c.cache, c.len, c.filled
                )
            })
            .collect();
        edits.push((at..at, decls));
        // Its wide path says so first thing.
        let set: Vec<String> = loaded.iter().map(|c| format!("{} = true;", c.filled)).collect();
        let open = p.wide.start_byte() + 1;
        let inner = named_children(p.wide)
            .first()
            .map_or_else(|| indent_at(t, p.wide.start_byte()) + "  ", |n| indent_at(t, n.start_byte()));
        edits.push((open..open, format!("\n{inner}{}", set.join(" "))));
    }
    let involved: Vec<usize> =
        (0..group.len()).filter(|i| kept.iter().any(|c| c.load == *i || c.readers.contains(i))).collect();
    for i in &involved {
        let p = group[*i];
        let from = p.pragma.map_or(p.run.start_byte(), |x| x.start_byte());
        edits.push((from..p.run.end_byte(), run_code(t, p, *i, &kept, runs, &step)));
    }
    let names: Vec<String> = kept.iter().map(|c| format!("`{}`", c.name)).collect();
    let note = format!(
        "{} kept in registers across {} passes over `{}` ({runs} runs of {v} per thread, {} bytes), read once",
        names.join(", "),
        involved.len(),
        text(t, strip(first.bound)),
        runs * bytes_per_run
    );
    Ok((guard, edits, note))
}

/// Whether the buffer staged as `s` by pass `load` of `group` can be kept for `readers`.
#[allow(clippy::too_many_arguments)]
fn keepable(
    src: &Source,
    facts: &Facts,
    k: &Kernel,
    body: Node,
    group: &[&WidePass],
    load: usize,
    readers: &[usize],
    s: &Staged,
    l: &Load,
    name: &str,
) -> Result<(), String> {
    let t = src.text();
    let lp = group[load];
    let over = lp.over(t);
    read_only_input(src, facts, k, body, name)?;
    if l.conditional {
        return Err(format!(
            "{over}, the first that load `{name}`, load it only under a condition, so loading every run there could read what the original never does"
        ));
    }
    let run_body = lp.run.child_by_field_name("body").unwrap_or(lp.run);
    if descendants(run_body).iter().any(|d| matches!(d.kind(), "break_statement" | "continue_statement")) {
        return Err(format!("{over}, the first that load `{name}`, can leave a step or their loop early"));
    }
    // The address is names and arithmetic: nothing read from memory that could change.
    let fixed = descendants(l.address_node).into_iter().all(|d| match d.kind() {
        "subscript_expression" | "call_expression" | "pointer_expression" => false,
        "field_expression" => syntax::builtin(t, d).is_some(),
        _ => true,
    });
    if !fixed {
        return Err(format!(
            "{over} load `{name}` at `{}`, an address that reads memory or calls, which may differ between passes",
            l.address
        ));
    }
    let block = lp.stmt.parent().filter(|b| b.kind() == "compound_statement").ok_or_else(|| {
        format!("{over}, the first that load `{name}`, are not a statement of a block that could hold their registers")
    })?;
    if readers.iter().any(|r| group[*r].stmt.end_byte() > block.end_byte()) {
        return Err(format!("a later pass that reads `{name}` lies outside the block of the first"));
    }
    if s.decl.end_byte() > l.stmt.start_byte() {
        return Err(format!("{over} load `{name}` before declaring its array"));
    }
    // The array is the cache itself in every pass: none may write it, and it may be used
    // only by its declaration, its one load and reads of its elements.
    for i in std::iter::once(&load).chain(readers) {
        let p = group[*i];
        if let Some(a) = writes_to(t, p.run, &s.array) {
            return Err(format!("a pass writes the array it stages `{name}` in (`{}`)", text(t, a)));
        }
        let Some(own) = p.staged.iter().find(|x| x.array == s.array) else { continue };
        let inside = |d: Node, n: Node| n.start_byte() <= d.start_byte() && d.end_byte() <= n.end_byte();
        let other = descendants(p.run).into_iter().find(|d| {
            d.kind() == "identifier"
                && text(t, *d) == s.array
                && !inside(*d, own.decl)
                && !own.load.as_ref().is_some_and(|x| inside(*d, x.stmt))
                && !d.parent().is_some_and(|up| {
                    up.kind() == "subscript_expression"
                        && up.child_by_field_name("argument").is_some_and(|a| a.id() == d.id())
                        && up.parent().is_none_or(|pp| pp.kind() != "pointer_expression")
                })
        });
        if let Some(d) = other {
            let stmt = d.parent().map_or(d, |x| x.parent().unwrap_or(x));
            return Err(format!(
                "a pass uses the array it stages `{name}` in otherwise than reading its elements (`{}`)",
                text(t, stmt).trim()
            ));
        }
    }
    // What the runs' places are made of holds still from the first pass on, through the
    // rest of its block (a later pass in a loop of that block runs again after it).
    let span = lp.stmt.start_byte()..block.end_byte();
    let mut words: Vec<String> = Vec::new();
    for n in [lp.first, lp.stride, lp.bound] {
        words.extend(syntax::identifiers(t, n).into_iter().map(str::to_string));
    }
    let address_words = l
        .address
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && *w != "ns_base");
    words.extend(address_words.map(str::to_string));
    words.retain(|w| w != "size_t");
    let changed = syntax::assigned(t, body)
        .into_iter()
        .filter(|(_, a)| a.start_byte() < span.end && a.end_byte() > span.start)
        .find(|(n, _)| words.contains(n));
    if let Some((n, a)) = changed {
        return Err(format!(
            "changes `{n}` between its passes over `{}` (`{}`), so they may not load the same runs of `{name}`",
            text(t, strip(lp.bound)),
            text(t, a)
        ));
    }
    // One declaration of each: a local, a parameter, or a constant of the file, never
    // hidden by another in a pass.
    let declared = syntax::declared_names(t, body);
    let declarations = |w: &String| {
        declared.iter().filter(|d| *d == w).count()
            + usize::from(k.param(w).is_some())
            + usize::from(crate::launch::file_scope_size(src, w, k.range.start).value().is_some())
    };
    if let Some(n) = words.iter().find(|w| declarations(w) > 1) {
        return Err(format!("declares `{n}` more than once, so its passes may not load the same runs of `{name}`"));
    }
    Ok(())
}

/// An assignment or increment under `n` whose target is `array` or one of its elements.
fn writes_to<'t>(t: &str, n: Node<'t>, array: &str) -> Option<Node<'t>> {
    descendants(n).into_iter().find(|d| {
        let target = match d.kind() {
            "assignment_expression" => d.child_by_field_name("left"),
            "update_expression" => d.child_by_field_name("argument"),
            _ => None,
        };
        let Some(mut x) = target.map(syntax::strip_parens) else { return false };
        while x.kind() == "subscript_expression" {
            match x.child_by_field_name("argument") {
                Some(a) => x = syntax::strip_parens(a),
                None => return false,
            }
        }
        x.kind() == "identifier" && text(t, x) == array
    })
}

/// Runs per thread: the ones asked for (`elems` / V), or the fewest that hold the task's
/// bench row, within [`MOST_BYTES`].
fn runs_per_thread(
    src: &Source,
    facts: &Facts,
    k: &Kernel,
    p: &WidePass,
    elems: Option<i64>,
    bytes_per_run: i64,
) -> Result<i64, String> {
    let t = src.text();
    let over = p.over(t);
    let v = p.v;
    let stride = value_of(src, k, strip(p.stride));
    let (bench, max) = bound_sizes(src, facts, k, p.bound).unwrap_or((None, None));
    let need = |n: i64, s: i64| (n.max(1) + s * v - 1) / (s * v);
    let fits = |r: i64| r * bytes_per_run <= MOST_BYTES;
    let runs = match (elems, stride) {
        (Some(e), _) if e % v != 0 => {
            return Err(format!("{over} move {v} elements a step, which does not divide the {e} elements asked for"))
        }
        (Some(e), Some(s)) => match bench {
            Some(b) if b > e * s => {
                return Err(format!(
                    "{over} hold rows of up to {} elements with {e} per thread, but the task's bench rows have {b}: the fast path would never run at the bench size",
                    e * s
                ))
            }
            _ => e / v,
        },
        (Some(e), None) => e / v,
        // The bench row, not the longest: every unrolled step holds registers whether its
        // run is there or not, and a longer row takes the original kernel, which is right.
        (None, Some(s)) => match (bench.map(|b| need(b, s)), max.map(|m| need(m, s))) {
            (Some(b), _) if fits(b) => b,
            (None, Some(m)) if fits(m) => m,
            (Some(b), _) => {
                return Err(format!(
                    "{over} take {b} steps per thread at the task's bench size (a stride of {s}): {} bytes, past the {MOST_BYTES} a thread keeps",
                    b * bytes_per_run
                ))
            }
            _ => UNKNOWN_RUNS,
        },
        (None, None) => UNKNOWN_RUNS,
    };
    if !fits(runs) {
        return Err(format!(
            "{over} would keep {} bytes per thread, past the {MOST_BYTES} a thread keeps",
            runs * bytes_per_run
        ));
    }
    Ok(runs)
}

/// A pass's run loop as `runs` fully unrolled steps that stage the kept buffers in their
/// rows of the cache: the loading pass loads into them, the later passes only read them.
fn run_code(t: &str, p: &WidePass, at: usize, kept: &[Kept], runs: i64, step: &str) -> String {
    let body = p.run.child_by_field_name("body").unwrap_or(p.run);
    let mut edits = crate::edit::Edits::new();
    let base = body.start_byte();
    for c in kept.iter().filter(|c| c.load == at || c.readers.contains(&at)) {
        let Some(s) = p.staged.iter().find(|s| s.array == c.array) else { continue };
        edits.replace(
            s.decl.start_byte() - base..s.decl.end_byte() - base,
            format!("{} (&{})[{}] = {}[{step}];", c.elem, c.array, c.len, c.cache),
        );
        if c.load != at {
            if let Some(l) = &s.load {
                // Where the loading pass took its narrow path, this one loads its runs itself.
                let from = l.stmt.start_byte() - base;
                edits.insert(from, format!("if (!{}) ", c.filled));
            }
        }
    }
    let whole = text(t, body);
    let edited = edits.apply(whole).unwrap_or_else(|_| whole.to_string());
    let inner = edited.trim().trim_start_matches('{').trim_end_matches('}');
    let inner = dedent(inner);
    let ty = &p.ty;
    let v = p.v;
    let code = format!(
        "#pragma unroll\nfor (int {step} = 0; {step} < {runs}; ++{step}) {{\n  const {ty} ns_base = ns_first * {v} + {step} * (ns_stride * {v});\n  if (ns_base + {v} <= {}) {{\n    {}\n  }}\n}}",
        text(t, p.bound),
        reindent(inner.trim(), "    ")
    );
    reindent(&code, &indent_at(t, p.pragma.unwrap_or(p.run).start_byte()))
}

/// Whether a run loop's first element is never negative: `threadIdx.x`, or a lane
/// `threadIdx.x % K` / `threadIdx.x & M` held in a local declared once and never assigned.
fn never_negative(t: &str, body: Node, first: Node) -> bool {
    let thread = |n: Node| syntax::builtin(t, strip(n)) == Some(("threadIdx", 'x'));
    let n = strip(first);
    if thread(n) {
        return true;
    }
    if n.kind() != "identifier" {
        return false;
    }
    let name = text(t, n);
    if syntax::declared_names(t, body).iter().filter(|d| *d == name).count() != 1
        || syntax::assigned(t, body).iter().any(|(a, _)| a == name)
    {
        return false;
    }
    descendants(body).into_iter().any(|d| {
        syntax::single_declarator(t, d).is_some_and(|(dn, v)| {
            dn == name
                && v.map(strip).and_then(|v| syntax::binary(t, v)).is_some_and(|(op, l, r)| {
                    matches!(op, "%" | "&") && thread(l) && strip(r).kind() == "number_literal"
                })
        })
    })
}

/// The lines of `s` without the indentation they all share (blank lines aside).
fn dedent(s: &str) -> String {
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    let cut = lines.iter().map(|l| l.len() - l.trim_start().len()).min().unwrap_or(0);
    lines.iter().map(|l| &l[cut.min(l.len() - l.trim_start().len())..]).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::super::tests::{facts, sized, LAYERNORM};
    use crate::facts::Role;
    use crate::recipe::Params;
    use crate::source::Source;
    use crate::{Application, Facts, RecipeId};

    fn vectorized(f: &Facts) -> String {
        let app = Application { recipe: RecipeId::Vectorize, params: Params::default() };
        crate::apply(&app, LAYERNORM, f).unwrap().source
    }

    fn cache(src: &str, f: &Facts, elems: &str) -> crate::Applied {
        super::super::apply(&Source::parse(src), f, &Params::default().with("elems", elems))
    }

    fn fast(s: &str) -> &str {
        &s[s.find("layernorm_rows_fast(").unwrap()..]
    }

    #[test]
    fn block_strided_runs_are_loaded_once_for_three_passes() {
        let f = facts(Role::Input);
        let r = cache(&vectorized(&f), &f, "auto").unwrap();
        assert_eq!(
            r.description,
            "`layernorm_rows`: `row` kept in registers across 3 passes over `cols` (2 runs of 4 per thread, 32 bytes), read once"
        );
        assert_eq!(r.guards, ["cols <= 8 * BLOCK"]);
        let s = fast(&r.source);
        let load = r#"  // nightshift: `row` kept in registers as 2 runs of 4 per thread: read once, not once per pass.
  alignas(16) float ns_row_row[2][4];
  bool ns_row_row_filled = false;
  if (/* nightshift: aligned */ ns_runs_fit<4>((0), (BLOCK), (cols), 2147483647LL) && ((unsigned long long)(row) % 16) == 0) {
    ns_row_row_filled = true;
    // nightshift: 4 consecutive elements per thread and step, moved with wide accesses.
    const int ns_first = (int)(threadIdx.x);
    const int ns_stride = (int)(BLOCK);
    #pragma unroll
    for (int ns_r = 0; ns_r < 2; ++ns_r) {
      const int ns_base = ns_first * 4 + ns_r * (ns_stride * 4);
      if (ns_base + 4 <= (cols)) {
        float (&ns_row)[4] = ns_row_row[ns_r];
        ns_load(ns_row, row + ns_base);
        #pragma unroll
        for (int ns_k = 0; ns_k < 4; ++ns_k) {
          s += ns_row[ns_k];
        }
      }
    }
    for (int c = (int)((cols) / 4 * 4) + ns_first; c < (cols); c += ns_stride) {
      s += row[c];
    }
  } else {"#;
        assert!(s.contains(load), "{s}");
        // Three passes read the array, the first alone loads it; gamma and beta, read by
        // one pass, are loaded there as before.
        assert_eq!(s.matches("float (&ns_row)[4] = ns_row_row[ns_r];").count(), 3, "{s}");
        // The later passes load their runs only where the first took its narrow path.
        assert_eq!(s.matches("ns_load(ns_row, ").count(), 3, "{s}");
        assert_eq!(s.matches("if (!ns_row_row_filled) ns_load(ns_row, row + ns_base);").count(), 2, "{s}");
        assert!(s.contains("ns_load(ns_gamma, gamma + ns_base);") && s.contains("ns_load(ns_beta, beta + ns_base);"));
        // Tails and unaligned rows read memory.
        assert!(s.contains("const float d = row[c] - mean;"), "{s}");
        assert_eq!(Source::parse(&r.source).kernels().len(), 2);
    }

    #[test]
    fn runs_per_thread_follow_elems_and_the_bench_row() {
        let f = facts(Role::Input);
        let v = vectorized(&f);
        assert!(cache(&v, &f, "16").unwrap().description.contains("(4 runs of 4 per thread, 64 bytes)"));
        assert_eq!(
            cache(&v, &f, "4").unwrap_err().0,
            "`layernorm_rows`: the runs of 4 over `cols` hold rows of up to 1024 elements with 4 per thread, but the task's bench rows have 2048: the fast path would never run at the bench size"
        );
        let long = sized(Role::Input, 64, 1 << 16, 1 << 16);
        assert_eq!(
            cache(&vectorized(&long), &long, "auto").unwrap_err().0,
            "`layernorm_rows`: the runs of 4 over `cols` take 64 steps per thread at the task's bench size (a stride of 256): 1024 bytes, past the 256 a thread keeps"
        );
    }

    #[test]
    fn a_later_wide_path_without_the_firsts_loads_its_own_runs() {
        // The first pass may stay narrow (its `out` unaligned) where the second goes wide:
        // the second then loads what it reads, as the flag says the cache is empty.
        let f = facts(Role::Input);
        let narrower = vectorized(&f).replacen(
            "if (/* nightshift: aligned */ ns_runs_fit<4>((0), (BLOCK), (cols), 2147483647LL) && ((unsigned long long)(row) % 16) == 0) {",
            "if (/* nightshift: aligned */ ns_runs_fit<4>((0), (BLOCK), (cols), 2147483647LL) && ((unsigned long long)(row) % 16) == 0 && ((unsigned long long)(out) % 16) == 0) {",
            1,
        );
        let r = cache(&narrower, &f, "auto").unwrap();
        let s = fast(&r.source);
        let first = s.find("((unsigned long long)(out) % 16) == 0) {\n    ns_row_row_filled = true;").unwrap();
        assert!(s[first..].contains("if (!ns_row_row_filled) ns_load(ns_row, row + ns_base);"), "{s}");
    }

    #[test]
    fn declines_where_the_cache_could_hold_other_values_than_memory() {
        let f = facts(Role::Input);
        let v = vectorized(&f);
        let why = |src: &str| cache(src, &f, "auto").unwrap_err().0;
        let load = "ns_load(ns_row, row + ns_base);";
        let conditional = v.replacen(load, "if (mean > 0.f) ns_load(ns_row, row + ns_base);", 1);
        assert!(why(&conditional).contains("load it only under a condition"));
        for leave in ["break", "continue"] {
            let early = v.replacen(load, &format!("if (s > 1e30f) {leave};\n      {load}"), 1);
            assert!(why(&early).contains("can leave a step or their loop early"), "{leave}");
        }
        let written = v.replacen(load, &format!("{load}\n      ns_row[0] = 0.f;"), 1);
        assert!(why(&written).contains("writes the array it stages `row` in (`ns_row[0] = 0.f`)"));
        let alias = v.replacen(load, &format!("{load}\n      float* p = ns_row;\n      p[0] = 0.f;"), 1);
        assert!(why(&alias).contains("uses the array it stages `row` in otherwise than reading its elements"));
        // A second load into the array in a later pass would overwrite the cache.
        let twice = v.replacen(load, &format!("ns_load(ns_row, gamma + ns_base);\n      {load}"), 2);
        assert!(why(&twice).contains("otherwise than reading its elements"), "{}", why(&twice));
        let moved = v.replacen("float v = 0.f;", "float v = 0.f;\n  row += 1;", 1);
        assert!(why(&moved).contains("`row` is neither a parameter nor a local pointer declared once"));
        let shrunk = v.replacen("const float rstd", "cols -= 1;\n  const float rstd", 1);
        assert!(
            why(&shrunk).contains("changes `cols` between its passes over `cols` (`cols -= 1`)"),
            "{}",
            why(&shrunk)
        );
        // A name the runs are placed by, hidden in a later pass by a local of its own.
        let hidden = v.replacen(
            "const int ns_stride = (int)(BLOCK);",
            "const int BLOCK = 128;\n    const int ns_stride = (int)(BLOCK);",
            2,
        );
        assert!(why(&hidden).contains("declares `BLOCK` more than once"), "{}", why(&hidden));
        let redefined = v.replacen("float v = 0.f;", "#undef BLOCK\n#define BLOCK 128\n  float v = 0.f;", 1);
        assert!(why(&redefined).contains("defines or undefines macros inside the kernel"));
        let jump = v.replacen("float v = 0.f;", "if (eps < 0.f) goto skip;\n  float v = 0.f;\nskip:", 1);
        assert!(why(&jump).contains("jumps with `goto`"));
        let loaded = v.replace("row + ns_base", "row + (int)gamma[0] + ns_base");
        assert!(why(&loaded).contains("an address that reads memory or calls"), "{}", why(&loaded));
        // A run loop that steps otherwise than `vectorize` writes is no pass of its own.
        let step = v.replace("ns_base += ns_stride * 4", "ns_base += ns_stride * 8");
        assert!(why(&step).contains("is not a pass as `vectorize` writes it"), "{}", why(&step));
        let negative =
            v.replace("const int ns_first = (int)(threadIdx.x);", "const int ns_first = (int)(threadIdx.x) - 1;");
        assert!(why(&negative).contains("cannot show is never negative"), "{}", why(&negative));
        let inout = facts(Role::InOut);
        assert_eq!(
            cache(&vectorized(&inout), &inout, "auto").unwrap_err().0,
            "`layernorm_rows`: the task does not declare the buffer behind `row` an input the kernel only reads, so a write elsewhere could change it between passes"
        );
    }

    #[test]
    fn names_it_adds_are_new_to_the_file_and_a_run_pragma_gives_way() {
        let f = facts(Role::Input);
        let v = vectorized(&f)
            .replace("float* y, int cols, float eps) {", "float* y, int cols, float eps, int ns_row_row, int ns_r) {")
            .replacen(
                "    for (int ns_base = ns_first * 4;",
                "    #pragma unroll 2\n    for (int ns_base = ns_first * 4;",
                1,
            );
        let r = cache(&v, &f, "auto").unwrap();
        let s = fast(&r.source);
        assert!(
            s.contains("alignas(16) float ns_row_row2[2][4];") && s.contains("bool ns_row_row2_filled = false;"),
            "{s}"
        );
        assert!(s.contains("for (int ns_r2 = 0; ns_r2 < 2; ++ns_r2)"), "{s}");
        assert!(!s.contains("#pragma unroll 2"), "{s}");
    }

    #[test]
    fn two_buffers_loaded_by_the_same_passes_are_kept_together() {
        let src = LAYERNORM
            .replace("s += row[c];", "s += row[c] * gamma[c];")
            .replace("const float d = row[c] - mean;", "const float d = row[c] * gamma[c] - mean;");
        let f = facts(Role::Input);
        let app = Application { recipe: RecipeId::Vectorize, params: Params::default() };
        let v = crate::apply(&app, &src, &f).unwrap().source;
        let r = cache(&v, &f, "auto").unwrap();
        assert!(
            r.description.contains("`row`, `gamma` kept in registers across 3 passes")
                || r.description.contains("`gamma`, `row` kept in registers across 3 passes"),
            "{}",
            r.description
        );
        let s = fast(&r.source);
        for c in ["ns_row_row", "ns_row_gamma"] {
            assert_eq!(s.matches(&format!("alignas(16) float {c}[2][4];")).count(), 1, "{s}");
            assert_eq!(s.matches(&format!("{c}_filled = true;")).count(), 1, "{s}");
        }
    }

    #[test]
    fn a_single_wide_pass_has_nothing_to_keep() {
        let one = LAYERNORM
            .replace("const float d = row[c] - mean;", "const float d = mean;")
            .replace("out[c] = (row[c] - mean)", "out[c] = (mean)");
        let f = facts(Role::Input);
        let app = Application { recipe: RecipeId::Vectorize, params: Params::default() };
        let v = crate::apply(&app, &one, &f).unwrap().source;
        assert_eq!(
            cache(&v, &f, "auto").unwrap_err().0,
            "`layernorm_rows`: loads no buffer at the same address in two of its passes (the runs of 4 over `cols`)"
        );
    }
}
