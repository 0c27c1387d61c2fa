//! Block sizes and grid caps fixed in the launcher become knobs the tuner moves with
//! `-D`, without a `[tune]` table. The block may be a literal (`k<<<(n + 255) / 256, 256>>>`
//! becomes `k<<<(n + (NS_BLOCK_K - 1)) / NS_BLOCK_K, NS_BLOCK_K>>>`), a constant initialized
//! by one (`const int threads = 256;` becomes `= NS_BLOCK_K`, so every use of `threads`
//! follows), a macro without an `#ifndef` guard (guarded here: an unguarded `#define`
//! overrides `-D`, so the tuner could not move it), or a `dim3` of those, with a knob per
//! component that is not 1. For a one-dimensional block the same literal in the kernel (a
//! shared array, an index stride) follows the knob, as the grid's arithmetic does along
//! each axis; a 2-D or 3-D block gets knobs only where the kernel writes none of its sizes
//! itself, since a 16 in a tile kernel launched 16 x 16 could be the block's x size, its y
//! size or the tile's, and a knob that guessed wrong would move the block off the tile. A
//! cap on the grid (`if (blocks > 1024) blocks = 1024;`) becomes `NS_GRID_CAP_K`. Nothing
//! else changes, so nothing is versioned.

use crate::facts::Facts;
use crate::knobs::{block_axis_values, BLOCK_SIZES, KNOB_MARK};
use crate::launch::{self, Dims, Size, AXES};
use crate::pattern::int_literal;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Launch, Source};
use crate::syntax::{self, descendants, text};
use crate::version::Change;
use std::collections::BTreeMap;
use std::ops::Range;
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[];

/// Fewer threads than a warp: a block that small is part of the kernel's design (one
/// thread that walks everything, a handful that split a tile), not a size to tune.
const MIN_THREADS: i64 = 32;

fn macro_name(prefix: &str, k: &Kernel) -> String {
    let base = k.fast_of.as_deref().unwrap_or(&k.name);
    format!("{prefix}_{}", base.to_ascii_uppercase())
}

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let mut made = Vec::new();
    super::per_kernel(src, params, |k| plan(src, facts, k, &mut made))
}

/// A constant or macro a knob was made of, so that a later kernel it also sizes leaves it
/// to that knob instead of editing it twice.
struct Made {
    site: Range<usize>,
    knob: String,
    kernel: String,
}

/// Where one axis of a block is fixed, as a knob replaces it.
#[derive(Debug, Clone, PartialEq)]
enum Site {
    /// A literal in the launch or a `dim3`'s declaration, or initializing `constant`.
    Literal {
        at: Range<usize>,
        value: i64,
        constant: Option<Named>,
    },
    Macro(launch::Macro),
}

/// A constant whose initializer a knob replaces.
#[derive(Debug, Clone, PartialEq)]
struct Named {
    name: String,
    declaration: Range<usize>,
}

impl Site {
    fn value(&self) -> i64 {
        match self {
            Site::Literal { value, .. } => *value,
            Site::Macro(m) => m.value,
        }
    }

    /// What the sites of two launches must share for one knob to size both.
    fn key(&self) -> (i64, Option<Range<usize>>, Option<String>) {
        match self {
            Site::Literal { value, constant, .. } => (*value, constant.as_ref().map(|c| c.declaration.clone()), None),
            Site::Macro(m) => (m.value, None, Some(m.name.clone())),
        }
    }
}

/// The site that fixes a block component written `written`, or why it has none, as a
/// clause after "its block".
fn site(size: &Size, written: &str) -> Result<Site, String> {
    match size {
        Size::Literal { value, at } => Ok(Site::Literal { at: at.clone(), value: *value, constant: None }),
        Size::Macro(m) => Ok(Site::Macro(m.clone())),
        Size::Constant(c) => match site(&c.initializer, written)? {
            Site::Literal { at, value, constant: None } => Ok(Site::Literal {
                at,
                value,
                constant: Some(Named { name: c.name.clone(), declaration: c.declaration.clone() }),
            }),
            other => Ok(other),
        },
        Size::Arithmetic(a) => {
            let what = if a.text == written { format!("`{written}`") } else { format!("`{written}` = `{}`", a.text) };
            Err(format!(
                "size {what} is arithmetic: only a literal, a constant initialized by one, or a macro becomes a knob"
            ))
        }
        Size::RunTime(r) => Err(format!("size is not a compile-time constant: {}", r.why())),
    }
}

/// Edits by range, each range once (two launches may share a grid variable).
#[derive(Default)]
struct Edits {
    replace: BTreeMap<(usize, usize), String>,
    insert: Vec<(usize, String)>,
}

impl Edits {
    fn replace(&mut self, r: Range<usize>, with: String) {
        self.replace.entry((r.start, r.end)).or_insert(with);
    }
}

/// The knobs being made for one kernel, the text that defines them and where it must go.
struct Knobs<'a> {
    src: &'a Source,
    k: &'a Kernel,
    edits: Edits,
    definitions: String,
    /// The first byte the definitions must precede: the kernel, or a use above it.
    first_use: usize,
    what: Vec<String>,
    made: Vec<Made>,
}

impl Knobs<'_> {
    fn define(&mut self, name: &str, values: &[String], value: i64) {
        self.definitions.push_str(&format!(
            "{KNOB_MARK}{name} = {}\n#ifndef {name}\n#define {name} {value}\n#endif\n",
            values.join(" ")
        ));
    }

    /// Notes a use of a knob at `at`, outside the kernel, that its definition must precede.
    fn used_at(&mut self, at: usize) {
        self.first_use = self.first_use.min(top_level_start(self.src, at));
    }

    /// `value` and `value - 1` under `n` become `name` and `(name - 1)`.
    fn replace_literals(&mut self, n: Node, value: i64, name: &str) {
        let t = self.src.text();
        for (v, with) in [(value, name.to_string()), (value - 1, format!("({name} - 1)"))] {
            for lit in literals(t, n, v) {
                self.used_at(lit.start_byte());
                self.edits.replace(lit.byte_range(), with.clone());
            }
        }
    }
}

fn plan<'k>(
    src: &Source,
    _facts: &Facts,
    k: &'k Kernel,
    made: &mut Vec<Made>,
) -> Result<(Change<'k>, String), NotApplicable> {
    if k.param(super::coarsen::GRID).is_some() {
        return Err(NotApplicable::new(format!(
            "`{}` runs coarse blocks (`coarsen`): its launch computes the original grid once, for the blocks it \
             stands for, and a block-size knob would leave that grid sized for the old block",
            k.name
        )));
    }
    let launches = src.launches_of(&k.name);
    let mut knobs = Knobs {
        src,
        k,
        edits: Edits::default(),
        definitions: String::new(),
        first_use: k.range.start,
        what: Vec::new(),
        made: Vec::new(),
    };
    let block_why = block_knobs(&mut knobs, &launches, made).err();
    grid_caps(&mut knobs, &launches);
    if knobs.what.is_empty() {
        return Err(NotApplicable::new(format!(
            "`{}` has no grid cap in its launcher, and its block {}",
            k.name,
            block_why.unwrap_or_else(|| "gives no knob".to_string())
        )));
    }
    let mut change = Change::new(k);
    for ((start, end), with) in std::mem::take(&mut knobs.edits.replace) {
        change.edits.replace(start..end, with);
    }
    for (at, with) in std::mem::take(&mut knobs.edits.insert) {
        change.edits.insert(at, with);
    }
    if knobs.first_use < k.range.start {
        change.edits.insert(knobs.first_use, format!("{}\n\n", knobs.definitions.trim_end()));
    } else {
        change.before = knobs.definitions;
    }
    made.append(&mut knobs.made);
    Ok((change, format!("`{}`: {}", k.name, knobs.what.join(", "))))
}

/// Makes the block's knobs, or says why there are none as a clause after "its block".
fn block_knobs(knobs: &mut Knobs, launches: &[Launch], made: &[Made]) -> Result<(), String> {
    let (src, k) = (knobs.src, knobs.k);
    let mut per_launch: Vec<(&Launch, Vec<(usize, Site)>)> = Vec::new();
    for l in launches {
        let block = launch::block(src, l).ok_or_else(|| "size is missing from a launch".to_string())?;
        if let Dims::Unknown { expr, why } = &block {
            return Err(format!("size `{expr}` is {why}"));
        }
        let mut sites = Vec::new();
        for (axis, c) in block.varying() {
            sites.push((axis, site(&c.size, &c.text)?));
        }
        per_launch.push((l, sites));
    }
    let Some((_, first)) = per_launch.first() else { return Err("size is given by no launch".into()) };
    let key = |sites: &[(usize, Site)]| sites.iter().map(|(a, s)| (*a, s.key())).collect::<Vec<_>>();
    if per_launch.iter().any(|(_, s)| key(s) != key(first)) {
        let mut written: Vec<String> = Vec::new();
        for l in launches {
            let w = format!("`{}`", l.config.get(1).map(|b| b.trim()).unwrap_or(""));
            if !written.contains(&w) {
                written.push(w);
            }
        }
        return Err(format!("size differs between its launches ({})", written.join(", ")));
    }
    let first = first.clone();
    let threads = first.iter().try_fold(1i64, |acc, (_, s)| acc.checked_mul(s.value())).unwrap_or(i64::MAX);
    if threads < MIN_THREADS {
        return Err(format!(
            "size is {threads}, fewer than a warp's {MIN_THREADS} threads: a block that small is part of the kernel's design, not a size to tune"
        ));
    }
    let multi = first.len() > 1;
    if multi {
        multi_axis_safe(src, k, &first)?;
    }
    let mut skipped: Vec<String> = Vec::new();
    for (axis, s) in &first {
        let others = threads / s.value().max(1);
        let values: Vec<String> = if multi {
            block_axis_values(*axis, others, s.value())
        } else {
            let mut v: Vec<String> = BLOCK_SIZES.iter().map(|s| s.to_string()).collect();
            if !v.contains(&s.value().to_string()) {
                v.push(s.value().to_string());
            }
            v
        };
        let axis_word = if multi { format!("{} ", AXES[*axis]) } else { String::new() };
        match s {
            Site::Macro(m) => match guard_macro(knobs, m, &values, made) {
                Ok(()) => {
                    knobs.what.push(format!("block {axis_word}size macro `{}` made a knob (`#ifndef` guard)", m.name))
                }
                Err(why) => skipped.push(why),
            },
            Site::Literal { value, constant, .. } => {
                if let Some(c) = constant {
                    if let Some(m) = made.iter().find(|m| m.site == c.declaration) {
                        skipped.push(format!(
                            "size `{}` is the knob `{}` made for `{}` already",
                            c.name, m.knob, m.kernel
                        ));
                        continue;
                    }
                }
                // A constant that sizes other kernels' blocks too is one knob named after it.
                let sharing = constant.as_ref().map(|c| kernels_sized_by(src, &c.declaration)).unwrap_or_default();
                let prefix = if multi {
                    format!("NS_BLOCK_{}", AXES[*axis].to_ascii_uppercase())
                } else {
                    "NS_BLOCK".to_string()
                };
                let name = match constant {
                    Some(c) if sharing.len() > 1 => format!("{prefix}_{}", c.name.to_ascii_uppercase()),
                    _ => macro_name(&prefix, k),
                };
                if src.defines(&name) {
                    skipped.push(format!("knob `{name}` is defined already"));
                    continue;
                }
                knobs.define(&name, &values, *value);
                // Every launch's literal for this axis (one constant's, or each launch's own).
                for (l, sites) in &per_launch {
                    if let Some((_, Site::Literal { at, .. })) = sites.iter().find(|(a, _)| a == axis) {
                        knobs.used_at(at.start);
                        knobs.edits.replace(at.clone(), name.clone());
                    }
                    grid_follows(knobs, l, *axis, *value, &name);
                }
                if !multi {
                    // The kernel's own uses of a one-dimensional block size.
                    if let Some(def) = src.node_at(&k.range) {
                        for lit in literals(src.text(), def, *value) {
                            knobs.edits.replace(lit.byte_range(), name.clone());
                        }
                    }
                }
                match c_name(constant) {
                    Some(c) => {
                        let also = if sharing.len() > 1 {
                            format!(" (sizing `{}`)", sharing.join("`, `"))
                        } else {
                            String::new()
                        };
                        knobs.what.push(format!("block {axis_word}size `{c}` = {value} as `{name}`{also}"));
                        if let Some(n) = constant {
                            knobs.made.push(Made { site: n.declaration.clone(), knob: name, kernel: k.name.clone() });
                        }
                    }
                    None => knobs.what.push(format!("block {axis_word}size {value} as `{name}`")),
                }
            }
        }
    }
    if knobs.what.is_empty() {
        return Err(skipped.into_iter().next().unwrap_or_else(|| "gives no knob".to_string()));
    }
    Ok(())
}

/// The kernels, in source order, with a launch whose block is sized by the constant
/// declared at `declaration`.
fn kernels_sized_by(src: &Source, declaration: &Range<usize>) -> Vec<String> {
    fn declared_at(size: &Size, declaration: &Range<usize>) -> bool {
        matches!(size, Size::Constant(c) if c.declaration == *declaration || declared_at(&c.initializer, declaration))
    }
    let mut out: Vec<String> = Vec::new();
    for l in src.launches().iter().filter(|l| !l.fallback) {
        let Some(block) = launch::block(src, l) else { continue };
        if block.varying().iter().any(|(_, c)| declared_at(&c.size, declaration)) && !out.contains(&l.kernel) {
            out.push(l.kernel.clone());
        }
    }
    out
}

fn c_name(c: &Option<Named>) -> Option<&str> {
    c.as_ref().map(|c| c.name.as_str())
}

/// A block of two or three axes gets knobs only where the kernel writes none of their
/// literal sizes itself, neither as a literal nor through a macro or constant of the same
/// value: such a number could be any axis's size or a tile's.
fn multi_axis_safe(src: &Source, k: &Kernel, sites: &[(usize, Site)]) -> Result<(), String> {
    let t = src.text();
    let shape = sites.iter().map(|(_, s)| s.value().to_string()).collect::<Vec<_>>().join(" x ");
    let Some(def) = src.node_at(&k.range) else { return Err("could not be found again".into()) };
    let ids: Vec<&str> =
        descendants(def).into_iter().filter(|d| d.kind() == "identifier").map(|d| text(t, d)).collect();
    for (_, s) in sites {
        let Site::Literal { value, constant, .. } = s else { continue };
        if !literals(t, def, *value).is_empty() {
            return Err(format!(
                "is {shape} while `{}` writes {value} itself: which axis's size (or a tile's) that is cannot be told, so no knob per dimension is made",
                k.name
            ));
        }
        let own = c_name(constant);
        for id in &ids {
            if Some(*id) == own {
                continue;
            }
            if launch::file_scope_size(src, id, k.range.start).value() == Some(*value) {
                return Err(format!(
                    "is {shape} while `{}` uses `{id}` = {value} as well: a knob per dimension could move the block off what `{id}` sizes",
                    k.name
                ));
            }
        }
    }
    Ok(())
}

/// An unguarded block macro gets an `#ifndef` guard and a knob mark; a guarded one is a
/// knob already.
fn guard_macro(knobs: &mut Knobs, m: &launch::Macro, values: &[String], made: &[Made]) -> Result<(), String> {
    let t = knobs.src.text();
    if let Some(x) = made.iter().find(|x| x.site == m.definition) {
        return Err(format!("size `{}` is a knob made for `{}` already", m.name, x.kernel));
    }
    if crate::knobs(knobs.src).iter().any(|x| x.name == m.name) {
        return Err(format!("size `{}` is a macro the tuner moves already", m.name));
    }
    if m.definitions > 1 {
        return Err(format!(
            "size `{}` is defined {} times (under `#if` branches), so no one `#ifndef` guard makes it a knob",
            m.name, m.definitions
        ));
    }
    if int_literal(&m.text).is_none() {
        return Err(format!(
            "size `{}` is defined as `{}`, not as a number: the macros it is made of are what a knob would move",
            m.name, m.text
        ));
    }
    knobs
        .edits
        .insert
        .push((m.definition.start, format!("{KNOB_MARK}{} = {}\n#ifndef {}\n", m.name, values.join(" "), m.name)));
    let newline = if t.get(..m.definition.end).is_some_and(|s| s.ends_with('\n')) { "" } else { "\n" };
    knobs.edits.insert.push((m.definition.end, format!("{newline}#endif\n")));
    knobs.made.push(Made { site: m.definition.clone(), knob: m.name.clone(), kernel: knobs.k.name.clone() });
    Ok(())
}

/// The grid's component along `axis` follows a knob made of the block's `value`: its
/// literals `value` and `value - 1`, and those of the variable it names where that is
/// set in the launcher (not under an `if`: a cap is a knob of its own).
fn grid_follows(knobs: &mut Knobs, l: &Launch, axis: usize, value: i64, name: &str) {
    let src = knobs.src;
    let t = src.text();
    let Some(grid) = launch::grid(src, l) else { return };
    let Some(at) = grid.component(axis).and_then(|c| c.at.clone()) else { return };
    let Some(n) = src.node_at(&at) else { return };
    knobs.replace_literals(n, value, name);
    let var = syntax::strip(n);
    if !matches!(var.kind(), "identifier" | "type_identifier") {
        return;
    }
    let var = text(t, var);
    let Some(host) = src.host_functions().into_iter().find(|h| h.name == l.host) else { return };
    let Some(hb) = src.node(&host.body, "compound_statement") else { return };
    for d in descendants(hb) {
        let value_node = match d.kind() {
            "init_declarator" if d.child_by_field_name("declarator").is_some_and(|x| text(t, x) == var) => {
                d.child_by_field_name("value")
            }
            "assignment_expression" if d.child_by_field_name("left").is_some_and(|x| text(t, x) == var) => {
                let in_if = d.parent().and_then(|p| p.parent()).is_some_and(|p| p.kind() == "if_statement");
                if in_if {
                    None
                } else {
                    d.child_by_field_name("right")
                }
            }
            _ => None,
        };
        if let Some(v) = value_node {
            knobs.replace_literals(v, value, name);
        }
    }
}

/// A cap on the grid: `if (g > CAP) g = CAP;` in the launcher.
fn grid_caps(knobs: &mut Knobs, launches: &[Launch]) {
    let (src, k) = (knobs.src, knobs.k);
    let t = src.text();
    for l in launches {
        let Some(g) = l.config.first().map(|g| g.trim()) else { continue };
        if !g.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let Some(host) = src.host_functions().into_iter().find(|h| h.name == l.host) else { continue };
        let Some(hb) = src.node(&host.body, "compound_statement") else { continue };
        for d in descendants(hb) {
            if d.kind() != "if_statement" {
                continue;
            }
            let Some(cond) = crate::pattern::condition(d) else { continue };
            let Some((op, lhs, rhs)) = syntax::binary(t, cond) else { continue };
            if !(matches!(op, ">" | ">=") && syntax::is_ident(t, lhs, g)) {
                continue;
            }
            let Some(cap) = int_literal(text(t, rhs)).filter(|c| *c >= 64) else { continue };
            let name = macro_name("NS_GRID_CAP", k);
            if src.defines(&name) || knobs.definitions.contains(&name) {
                continue;
            }
            let values: Vec<String> =
                [cap / 4, cap / 2, cap, cap * 2, cap * 4, cap * 8].iter().map(|v| v.to_string()).collect();
            knobs.define(&name, &values, cap);
            for lit in literals(t, d, cap) {
                knobs.used_at(lit.start_byte());
                knobs.edits.replace(lit.byte_range(), name.clone());
            }
            knobs.what.push(format!("grid cap {cap} as `{name}`"));
        }
    }
}

/// Number literals under `n` whose value is `v`.
fn literals<'t>(t: &str, n: Node<'t>, v: i64) -> Vec<Node<'t>> {
    descendants(n).into_iter().filter(|d| d.kind() == "number_literal" && int_literal(text(t, *d)) == Some(v)).collect()
}

/// Where the file-scope item holding byte `at` starts (a definition must go above it).
fn top_level_start(src: &Source, at: usize) -> usize {
    let Some(mut n) = src.root().descendant_for_byte_range(at, at) else { return at };
    while let Some(p) = n.parent() {
        if p.kind() == "translation_unit" {
            return n.start_byte();
        }
        n = p;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactsBuilder;

    #[test]
    fn literal_blocks_and_caps_become_knobs() {
        let src = r#"
__global__ void scale(float* y, int n) {
  __shared__ float tile[256];
  int i = blockIdx.x * 256 + threadIdx.x;
  tile[threadIdx.x] = i;
  if (i < n) y[i] = tile[threadIdx.x];
}
extern "C" void launch(float* y, int n, cudaStream_t s) {
  int blocks = (n + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  scale<<<blocks, 256, 0, s>>>(y, n);
}
"#;
        let r = apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &Params::default()).unwrap();
        let s = &r.source;
        assert!(s.contains("__shared__ float tile[NS_BLOCK_SCALE];"), "{s}");
        assert!(s.contains("int i = blockIdx.x * NS_BLOCK_SCALE + threadIdx.x;"), "{s}");
        assert!(s.contains("int blocks = (n + (NS_BLOCK_SCALE - 1)) / NS_BLOCK_SCALE;"), "{s}");
        assert!(s.contains("if (blocks > NS_GRID_CAP_SCALE) blocks = NS_GRID_CAP_SCALE;"), "{s}");
        assert!(s.contains("scale<<<blocks, NS_BLOCK_SCALE, 0, s>>>(y, n);"), "{s}");
        let k = crate::knobs(&Source::parse(s));
        assert_eq!(k.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["NS_BLOCK_SCALE", "NS_GRID_CAP_SCALE"]);
        assert_eq!(k[1].values, ["1024", "2048", "4096", "8192", "16384", "32768"]);
    }

    fn run(src: &str) -> Applied {
        apply(&Source::parse(src), &FactsBuilder::new("launch").build(), &Params::default())
    }

    /// A 1-D element kernel (no literal of its own) launched from `body`.
    fn elementwise(prelude: &str, body: &str) -> String {
        format!("{prelude}__global__ void k(float* y, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 0; }}\nextern \"C\" void launch(float* y, int n, int b, cudaStream_t s) {{\n{body}\n}}\n")
    }

    /// A 2-D kernel launched with `block` and a grid that covers `w` x `h` in 16 x 16 tiles.
    fn two_d(prelude: &str, kernel_extra: &str) -> String {
        format!("{prelude}__global__ void k(float* y, int w, int h) {{ {kernel_extra}int x = blockIdx.x * blockDim.x + threadIdx.x; int r = blockIdx.y * blockDim.y + threadIdx.y; if (x < w && r < h) y[r * w + x] = 0; }}\nextern \"C\" void launch(float* y, int w, int h, cudaStream_t s) {{\n  dim3 block(16, 16);\n  dim3 grid((w + 15) / 16, (h + 15) / 16);\n  k<<<grid, block, 0, s>>>(y, w, h);\n}}\n")
    }

    #[test]
    fn constants_become_knobs_where_they_are_initialized() {
        // In the launcher: the initializer, the kernel's own 256 and every use of `threads` follow.
        let src = "__global__ void k(float* y, int n) { __shared__ float t[256]; int i = blockIdx.x * blockDim.x + threadIdx.x; t[threadIdx.x] = 1; if (i < n) y[i] = t[threadIdx.x]; }\nextern \"C\" void launch(float* y, int n, cudaStream_t s) {\n  const int threads = 256;\n  k<<<(n + threads - 1) / threads, threads, 0, s>>>(y, n);\n}\n";
        let r = run(src).unwrap();
        assert_eq!(r.description, "`k`: block size `threads` = 256 as `NS_BLOCK_K`");
        assert!(r.source.starts_with("// nightshift: knob NS_BLOCK_K = 64 128 256 512 1024\n#ifndef NS_BLOCK_K\n#define NS_BLOCK_K 256\n#endif\n\n__global__"), "{}", r.source);
        assert!(r.source.contains("__shared__ float t[NS_BLOCK_K];"), "{}", r.source);
        assert!(
            r.source.contains("  const int threads = NS_BLOCK_K;\n  k<<<(n + threads - 1) / threads, threads, 0, s>>>"),
            "{}",
            r.source
        );
        assert_eq!(crate::knobs(&Source::parse(&r.source))[0].name, "NS_BLOCK_K");

        // At file scope above the kernel: the knob is defined above the constant.
        let src =
            elementwise("constexpr int kBlock = 128;\n", "  k<<<(n + kBlock - 1) / kBlock, kBlock, 0, s>>>(y, n);");
        let r = run(&src).unwrap();
        assert_eq!(r.description, "`k`: block size `kBlock` = 128 as `NS_BLOCK_K`");
        assert!(r.source.starts_with("// nightshift: knob NS_BLOCK_K = 64 128 256 512 1024\n#ifndef NS_BLOCK_K\n#define NS_BLOCK_K 128\n#endif\n\nconstexpr int kBlock = NS_BLOCK_K;\n__global__"), "{}", r.source);

        let src = elementwise("", "  static const int threads(512);\n  k<<<(n + 511) / 512, threads, 0, s>>>(y, n);");
        let r = run(&src).unwrap();
        assert!(
            r.source
                .contains("static const int threads(NS_BLOCK_K);\n  k<<<(n + (NS_BLOCK_K - 1)) / NS_BLOCK_K, threads"),
            "{}",
            r.source
        );
    }

    #[test]
    fn a_constant_two_kernels_share_is_one_knob_named_after_it() {
        let src = "const int threads = 256;\n__global__ void a(float* y) { y[threadIdx.x] = 0; }\n__global__ void b(float* y) { y[threadIdx.x] = 1; }\nextern \"C\" void launch(float* y, int n, cudaStream_t s) {\n  a<<<n / threads, threads, 0, s>>>(y);\n  b<<<n / threads, threads, 0, s>>>(y);\n}\n";
        let r = run(src).unwrap();
        assert_eq!(r.description, "`a`: block size `threads` = 256 as `NS_BLOCK_THREADS` (sizing `a`, `b`)");
        assert!(r.source.contains("#endif\n\nconst int threads = NS_BLOCK_THREADS;\n"), "{}", r.source);
        assert_eq!(r.source.matches("#define NS_BLOCK_THREADS 256").count(), 1);
    }

    #[test]
    fn unguarded_block_macros_get_a_guard_and_guarded_ones_are_knobs_already() {
        // `-DBLOCK=64` does not move an unguarded `#define BLOCK 128`: the file's wins.
        let src = elementwise("#define BLOCK 128\n", "  k<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, s>>>(y, n);");
        let r = run(&src).unwrap();
        assert_eq!(r.description, "`k`: block size macro `BLOCK` made a knob (`#ifndef` guard)");
        assert!(
            r.source.starts_with(
                "// nightshift: knob BLOCK = 64 128 256 512 1024\n#ifndef BLOCK\n#define BLOCK 128\n#endif\n__global__"
            ),
            "{}",
            r.source
        );
        assert!(crate::knobs(&Source::parse(&src)).is_empty());
        assert_eq!(crate::knobs(&Source::parse(&r.source))[0].name, "BLOCK");
        assert_eq!(
            run(&r.source).unwrap_err().0,
            "`k` has no grid cap in its launcher, and its block size `BLOCK` is a macro the tuner moves already"
        );
        // Reached through a constant, the macro is still what moves.
        let through = elementwise(
            "#ifndef BLOCK\n#define BLOCK 128\n#endif\n",
            "  const int t = BLOCK;\n  k<<<n / t, t, 0, s>>>(y, n);",
        );
        assert_eq!(
            run(&through).unwrap_err().0,
            "`k` has no grid cap in its launcher, and its block size `BLOCK` is a macro the tuner moves already"
        );
    }

    #[test]
    fn dim3_blocks_get_a_knob_per_axis_that_is_not_one() {
        let src =
            elementwise("", "  dim3 block(256);\n  dim3 grid((n + 255) / 256);\n  k<<<grid, block, 0, s>>>(y, n);");
        let r = run(&src).unwrap();
        assert_eq!(r.description, "`k`: block size 256 as `NS_BLOCK_K`");
        assert!(
            r.source.contains("  dim3 block(NS_BLOCK_K);\n  dim3 grid((n + (NS_BLOCK_K - 1)) / NS_BLOCK_K);"),
            "{}",
            r.source
        );

        let r = run(&two_d("", "")).unwrap();
        assert_eq!(r.description, "`k`: block x size 16 as `NS_BLOCK_X_K`, block y size 16 as `NS_BLOCK_Y_K`");
        assert!(
            r.source.contains("  dim3 block(NS_BLOCK_X_K, NS_BLOCK_Y_K);\n  dim3 grid((w + (NS_BLOCK_X_K - 1)) / NS_BLOCK_X_K, (h + (NS_BLOCK_Y_K - 1)) / NS_BLOCK_Y_K);"),
            "{}",
            r.source
        );
        // Each axis moves with the other where it is, within 64 to 1024 threads.
        let k = crate::knobs(&Source::parse(&r.source));
        assert_eq!(k[0].values, ["8", "16", "32", "64"]);
        assert_eq!(k[1].values, ["4", "8", "16", "32", "64"]);
    }

    #[test]
    fn two_d_blocks_are_declined_where_the_kernel_writes_their_sizes() {
        let e =
            run(&two_d("#define TILE 16\n", "__shared__ float t[TILE][TILE + 1]; t[threadIdx.y][threadIdx.x] = 0; "))
                .unwrap_err();
        assert_eq!(
            e.0,
            "`k` has no grid cap in its launcher, and its block is 16 x 16 while `k` uses `TILE` = 16 as well: a knob per dimension could move the block off what `TILE` sizes"
        );
        let e = run(&two_d("", "__shared__ float t[16][17]; t[threadIdx.y][threadIdx.x] = 0; ")).unwrap_err();
        assert_eq!(
            e.0,
            "`k` has no grid cap in its launcher, and its block is 16 x 16 while `k` writes 16 itself: which axis's size (or a tile's) that is cannot be told, so no knob per dimension is made"
        );
    }

    #[test]
    fn blocks_the_file_does_not_fix_are_declined_with_where_they_come_from() {
        let why = |body: &str| run(&elementwise("", body)).unwrap_err().0;
        let prefix = "`k` has no grid cap in its launcher, and its block ";
        assert_eq!(
            why("  k<<<(n + b - 1) / b, b, 0, s>>>(y, n);"),
            format!("{prefix}size is not a compile-time constant: `b` is a parameter of `launch`")
        );
        assert_eq!(
            why("  int threads = 256;\n  k<<<n / threads, threads, 0, s>>>(y, n);"),
            format!("{prefix}size is not a compile-time constant: `threads` is a variable, not a constant (`int threads = 256;` has no `const`)")
        );
        assert_eq!(
            why("  const int threads = 2 * 128;\n  k<<<n / threads, threads, 0, s>>>(y, n);"),
            format!("{prefix}size `threads` = `2 * 128` is arithmetic: only a literal, a constant initialized by one, or a macro becomes a knob")
        );
        assert_eq!(
            why("  k<<<1, 1, 0, s>>>(y, n);"),
            format!("{prefix}size is 1, fewer than a warp's 32 threads: a block that small is part of the kernel's design, not a size to tune")
        );
        assert_eq!(
            why("  k<<<n / 256, 256, 0, s>>>(y, n);\n  k<<<n / 128, 128, 0, s>>>(y, n);"),
            format!("{prefix}size differs between its launches (`256`, `128`)")
        );
        assert_eq!(
            why("  k<<<n, kThreads, 0, s>>>(y, n);"),
            format!("{prefix}size `kThreads` is declared nowhere in this file")
        );
    }
}
