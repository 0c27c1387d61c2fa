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
//! A later pass reads the array only on its own aligned path, and only where that path's
//! conditions include every condition of the loading pass's, so the array is filled
//! wherever it is read. Tails (the elements past the last whole run) and the unaligned
//! paths read memory as before. The launcher takes the fast copy only when a row fits
//! (`n <= R * V * stride`).

use super::{at_launcher, bound_sizes, read_only_input, value_of};
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
    /// Under `if (...)` (a read the original made only where a condition held).
    conditional: bool,
}

/// One of `vectorize`'s passes.
struct WidePass<'t> {
    /// The `if (/* nightshift: aligned */ ...)` statement.
    stmt: Node<'t>,
    /// The terms of its condition, as written.
    conditions: Vec<String>,
    first: Node<'t>,
    stride: Node<'t>,
    ty: String,
    v: i64,
    bound: Node<'t>,
    run: Node<'t>,
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

fn squeeze(s: &str) -> String {
    s.split_whitespace().collect()
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
    let cond = text(t, stmt.child_by_field_name("condition")?).replace(ALIGNED, "");
    let cond = cond.trim().strip_prefix('(')?.strip_suffix(')')?;
    let conditions: Vec<String> = cond.split("&&").map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
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
    if name != "ns_base" || op != "<=" || squeeze(text(t, left)) != format!("ns_base+{v}") {
        return None;
    }
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
            let args = line[at + "ns_load(".len()..].trim_end().strip_suffix(");")?;
            let (array, address) = args.split_once(',')?;
            let slot = staged.iter_mut().find(|x| x.array == array.trim())?;
            slot.load = Some(Load { stmt: s, address: address.trim().to_string(), conditional: at > 0 });
        }
    }
    Some(Ok(WidePass { stmt, conditions, first, stride, ty, v, bound, run, staged }))
}

/// Bytes of one element of `ty`, for the types `vectorize` moves.
fn elem_bytes(ty: &str) -> Option<i64> {
    Some(match ty.trim_start_matches("const ").trim() {
        "double" | "long long" | "unsigned long long" | "int64_t" | "uint64_t" | "size_t" => 8,
        "float" | "int" | "unsigned" | "unsigned int" | "int32_t" | "uint32_t" | "__half2" | "half2"
        | "__nv_bfloat162" => 4,
        "__half" | "half" | "__nv_bfloat16" | "nv_bfloat16" | "short" | "unsigned short" | "int16_t" | "uint16_t" => 2,
        "char" | "signed char" | "unsigned char" | "int8_t" | "uint8_t" | "__nv_fp8_e4m3" | "__nv_fp8_e5m2" => 1,
        _ => return None,
    })
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
    let mut why: Vec<String> = Vec::new();
    let mut all = Vec::new();
    for p in parsed {
        match p {
            Ok(p) => all.push(p),
            Err(e) => why.push(e),
        }
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, p) in all.iter().enumerate() {
        match groups.iter_mut().find(|g| all[g[0]].key(t) == p.key(t)) {
            Some(g) => g.push(i),
            None => groups.push(vec![i]),
        }
    }
    groups.retain(|g| g.len() >= 2);
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
                    let mut cache = format!("ns_row_{name}");
                    let mut n = 2;
                    while taken.contains(&cache) {
                        cache = format!("ns_row_{name}{n}");
                        n += 1;
                    }
                    taken.push(cache.clone());
                    kept.push(Kept {
                        name,
                        array: s.array.clone(),
                        elem: s.elem.clone(),
                        len: s.len,
                        cache,
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
    let mut bytes_per_run = 0;
    for c in &kept {
        let b = elem_bytes(&c.elem)
            .ok_or_else(|| format!("keeps `{}` of type `{}`, whose size this recipe does not know", c.name, c.elem))?;
        bytes_per_run += b * c.len;
    }
    let runs = runs_per_thread(src, facts, k, first, elems, bytes_per_run)?;
    let v = first.v;
    let mut step = "ns_r".to_string();
    let mut n = 2;
    while taken.contains(&step) || syntax::mentions_word(text(t, body), &step) {
        step = format!("ns_r{n}");
        n += 1;
    }
    taken.push(step.clone());
    let guard = format!("{bound} <= {} * {stride}", runs * v);
    let mut edits = Vec::new();
    // The arrays sit before the loading pass, in the block that holds every reader.
    for c in &kept {
        let at = group[c.load].stmt.start_byte();
        let indent = indent_at(t, at);
        edits.push((
            at..at,
            format!(
                "// nightshift: `{}` kept in registers as {runs} runs of {} per thread: read once, not once per pass.\n{indent}alignas(16) {} {}[{runs}][{}];\n{indent}",
                c.name, c.len, c.elem, c.cache, c.len
            ),
        ));
    }
    let involved: Vec<usize> =
        (0..group.len()).filter(|i| kept.iter().any(|c| c.load == *i || c.readers.contains(i))).collect();
    for i in &involved {
        let p = group[*i];
        edits.push((p.run.byte_range(), run_code(t, p, *i, &kept, runs, &step)));
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
    if descendants(run_body).iter().any(|d| matches!(d.kind(), "break_statement" | "goto_statement")) {
        return Err(format!("{over}, the first that load `{name}`, can leave their loop early"));
    }
    // A reader's aligned path must imply the loader's, or it could read runs never loaded.
    for r in readers {
        let theirs: Vec<String> = group[*r].conditions.iter().map(|c| squeeze(c)).collect();
        if let Some(c) = lp.conditions.iter().find(|c| !theirs.contains(&squeeze(c))) {
            return Err(format!(
                "a later pass over `{}` takes its wide path without the first's condition `{c}`, so it could read runs of `{name}` the first never loaded",
                text(t, strip(lp.bound))
            ));
        }
    }
    let block = lp.stmt.parent().filter(|b| b.kind() == "compound_statement").ok_or_else(|| {
        format!("{over}, the first that load `{name}`, are not a statement of a block that could hold their registers")
    })?;
    let last = group[*readers.last().unwrap_or(&load)];
    if readers.iter().any(|r| group[*r].stmt.end_byte() > block.end_byte()) {
        return Err(format!("a later pass that reads `{name}` lies outside the block of the first"));
    }
    if s.decl.end_byte() > l.stmt.start_byte() {
        return Err(format!("{over} load `{name}` before declaring its array"));
    }
    // The array is the cache itself in every pass: none may write it.
    for i in std::iter::once(&load).chain(readers) {
        let run = group[*i].run;
        if let Some(a) = writes_to(t, run, &s.array) {
            return Err(format!("a pass writes the array it stages `{name}` in (`{}`)", text(t, a)));
        }
    }
    // What the runs' places are made of holds still between the passes.
    let span = lp.stmt.start_byte()..last.stmt.end_byte();
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
    let declared = syntax::declared_names(t, body);
    let declarations = |w: &String| declared.iter().filter(|d| *d == w).count() + usize::from(k.param(w).is_some());
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
                // The whole line goes: the cache holds what it loaded.
                let line_start = t[..l.stmt.start_byte()].rfind('\n').map_or(l.stmt.start_byte(), |x| x + 1);
                let end = l.stmt.end_byte() + usize::from(t[l.stmt.end_byte()..].starts_with('\n'));
                edits.replace(line_start - base..end - base, "");
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
    reindent(&code, &indent_at(t, p.run.start_byte()))
}

/// The lines of `s` without the indentation they all share (blank lines aside).
fn dedent(s: &str) -> String {
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    let cut = lines.iter().map(|l| l.len() - l.trim_start().len()).min().unwrap_or(0);
    lines.iter().map(|l| &l[cut.min(l.len() - l.trim_start().len())..]).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::super::tests::{facts, LAYERNORM};
    use crate::facts::{FactsBuilder, Role};
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
  if (/* nightshift: aligned */ ((unsigned long long)(row) % 16) == 0) {
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
        assert_eq!(s.matches("ns_load(ns_row, ").count(), 1, "{s}");
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
        let long = FactsBuilder::new("layernorm")
            .buffer("x", "float", Role::Input, "{rows} * {cols}", 1, 1)
            .buffer("gamma", "float", Role::Input, "{cols}", 1, 1)
            .buffer("beta", "float", Role::Input, "{cols}", 1, 1)
            .buffer("y", "float", Role::Output, "{rows} * {cols}", 1, 1)
            .int("rows", 64, 64)
            .int("cols", 1 << 16, 1 << 16)
            .float("eps")
            .build();
        assert_eq!(
            cache(&vectorized(&long), &long, "auto").unwrap_err().0,
            "`layernorm_rows`: the runs of 4 over `cols` take 64 steps per thread at the task's bench size (a stride of 256): 1024 bytes, past the 256 a thread keeps"
        );
    }

    #[test]
    fn declines_where_the_array_could_be_read_before_it_is_filled() {
        let f = facts(Role::Input);
        let v = vectorized(&f);
        let first_pass = "if (/* nightshift: aligned */ ((unsigned long long)(row) % 16) == 0) {";
        // The first pass may stay narrow where the second goes wide.
        let narrower = v.replacen(
            first_pass,
            "if (/* nightshift: aligned */ ((unsigned long long)(row) % 16) == 0 && ((unsigned long long)(out) % 16) == 0) {",
            1,
        );
        assert_eq!(
            cache(&narrower, &f, "auto").unwrap_err().0,
            "`layernorm_rows`: a later pass over `cols` takes its wide path without the first's condition `((unsigned long long)(out) % 16) == 0`, so it could read runs of `row` the first never loaded"
        );
        let conditional =
            v.replacen("ns_load(ns_row, row + ns_base);", "if (mean > 0.f) ns_load(ns_row, row + ns_base);", 1);
        assert!(cache(&conditional, &f, "auto").unwrap_err().0.contains("load it only under a condition"));
        let early = v.replacen(
            "ns_load(ns_row, row + ns_base);",
            "ns_load(ns_row, row + ns_base);\n      if (s > 1e30f) break;",
            1,
        );
        assert!(cache(&early, &f, "auto").unwrap_err().0.contains("can leave their loop early"));
        let written =
            v.replacen("ns_load(ns_row, row + ns_base);", "ns_load(ns_row, row + ns_base);\n      ns_row[0] = 0.f;", 1);
        assert!(cache(&written, &f, "auto").unwrap_err().0.contains("writes the array it stages `row` in"));
        let moved = v.replacen("float v = 0.f;", "float v = 0.f;\n  row += 1;", 1);
        let why = cache(&moved, &f, "auto").unwrap_err().0;
        assert!(why.contains("`row`"), "{why}");
        let inout = facts(Role::InOut);
        assert_eq!(
            cache(&vectorized(&inout), &inout, "auto").unwrap_err().0,
            "`layernorm_rows`: the task does not declare the buffer behind `row` an input the kernel only reads, so a write elsewhere could change it between passes"
        );
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
