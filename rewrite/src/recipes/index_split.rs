//! Coordinates of a run, once per run, for `vectorize`: per-element code that splits its
//! flat index into coordinates (`t = idx % seqlen`, `d = (idx / seqlen) % dim`) pays a
//! division per element, 64-bit ones a subroutine of dozens of instructions, and that
//! cost stays when a thread takes V elements. A run of V elements starts at a multiple
//! of V, so with `q = base / m` and `r = base % m` computed once per run:
//! - when m is a multiple of V the run never crosses a multiple of m: element k has
//!   `(base + k) / m == q` and `(base + k) % m == r + k`, and whatever the code computes
//!   from the quotient (`% dim`) is one value for the run, which the compiler computes once;
//! - when m is at least V the run crosses at most one: `(base + k) / m == q + (r + k >= m)`
//!   and `(base + k) % m == r + k - (r + k >= m ? m : 0)`, a compare and a select.
//!
//! The first form is taken when the task's bench size makes m a multiple of V, the
//! second otherwise; the launcher checks the form's condition (m positive either way: the
//! division per run now runs even where the original divided under a condition).
//!
//! The divisor must hold one value across the kernel and read at least one parameter:
//! parameters the kernel never changes (no macro of the file that names them is used in
//! it) and integer literals, joined by `+`, `-` and `*`, cast to integer types, directly or
//! through locals declared once at the kernel's top, before its per-element code, and
//! never changed (`row = (int64_t)heads * head_dim`). A divisor of constants alone is
//! left to the compiler (it divides by a constant with a multiply and a shift), and so
//! are the file's named constants, whose value at the kernel (`#if`, `#undef`, scopes,
//! templates) this reading could get wrong where the launcher's check would not see it.

use crate::facts::{ArgKind, Facts};
use crate::source::{Kernel, Source};
use crate::syntax::{self, descendants, strip_parens, text};
use std::collections::BTreeMap;
use std::ops::Range;
use tree_sitter::Node;

/// One `i / m` or `i % m` in the per-element code.
pub(super) struct Site {
    pub range: Range<usize>,
    /// Which per-run value replaces it (an index into [`Splits::divisors`]).
    pub divisor: usize,
    pub remainder: bool,
}

/// One divisor as the kernel spells it (whitespace folded).
pub(super) struct Split {
    pub divisor: String,
    /// The divisor under its parentheses and integer casts (`cols` of `(size_t)cols`).
    pub core: String,
    /// A multiple of V: no element of a run wraps.
    pub aligned: bool,
    /// One `int` parameter (under casts): every remainder fits any integer type of 32
    /// bits or more.
    pub fits_int: bool,
    /// The launcher's check of the form's condition (none for a divisor of constants).
    pub guard: Option<String>,
}

/// The divisors of a kernel's run and where the per-element code divides by them.
#[derive(Default)]
pub(super) struct Splits {
    pub divisors: Vec<Split>,
    pub sites: Vec<Site>,
}

impl Splits {
    /// The per-run quotient and remainder, declared before the unrolled elements of a run
    /// of `v`, and the range the remainder takes, told to the compiler
    /// ([`crate::helpers::RUN_COLUMN`]).
    ///
    /// The run starts at a non-negative index and the launcher checks the divisor's form,
    /// so the remainder lies in `[0, m)`, and for a multiple of V at a multiple of V no
    /// later than `m - V`. The compiler cannot see that through the division (nor through
    /// `fast-divmod`'s multiply-high later): per-element checks of the coordinate, such as
    /// a causal window's `t - 3 + k >= 0`, then stay as predicates, each converting the
    /// same loaded element again under its own (541 instructions from load to store in
    /// causal_conv1d's fast kernel, 332 with the facts).
    pub fn prelude(&self, v: usize) -> String {
        let mut out = String::new();
        for (n, Split { divisor: m, aligned, .. }) in self.divisors.iter().enumerate() {
            out.push_str(&format!(
                "const auto ns_q{n} = ns_base / ({m});\nconst auto ns_r{n} = ns_base % ({m});\nns_assume_column<{v}, {aligned}>(ns_r{n}, ({m}));\n"
            ));
        }
        out
    }

    /// What replaces `site` in element `ns_k`.
    pub fn replacement(&self, site: &Site) -> String {
        let n = site.divisor;
        let Split { divisor: m, aligned, .. } = &self.divisors[n];
        if *aligned {
            return if site.remainder { format!("(ns_r{n} + ns_k)") } else { format!("ns_q{n}") };
        }
        if site.remainder {
            format!("(ns_r{n} + ns_k >= ({m}) ? ns_r{n} + ns_k - ({m}) : ns_r{n} + ns_k)")
        } else {
            format!("(ns_q{n} + (ns_r{n} + ns_k >= ({m})))")
        }
    }

    pub fn guards(&self) -> impl Iterator<Item = &String> {
        self.divisors.iter().filter_map(|s| s.guard.as_ref())
    }

    /// Locals that hold an element's column: `T c = (casts)(idx % m)` for a divisor split
    /// without wrapping whose remainder every cast and `T` keep whole (any integer type of
    /// 32 bits or more for one `int` parameter, 64-bit types otherwise), declared once and
    /// never changed; each with the run's first column (`ns_r0`).
    pub fn column_locals(&self, src: &Source, k: &Kernel, body: Node) -> Vec<(String, String)> {
        let t = src.text();
        let declared = syntax::declared_names(t, body);
        let changed = changed_names(src, body);
        // A name the file declares outside any function (`__device__ int c;`) is read by
        // code of the kernel that the local does not cover.
        let file_scope: Vec<String> = descendants(src.root())
            .into_iter()
            .filter(|d| d.kind() == "declaration" && syntax::enclosing_function(*d).is_none())
            .flat_map(|d| syntax::declared_names(t, d))
            .collect();
        let mut out = Vec::new();
        for site in self.sites.iter().filter(|s| s.remainder) {
            let split = &self.divisors[site.divisor];
            if !split.aligned {
                continue;
            }
            // Where the divisor is one `int` parameter the remainder fits any integer type of
            // 32 bits or more; else only 64-bit types keep it whole.
            let wide_enough = |ty: &str| if split.fits_int { is_integer(ty) } else { syntax::is_64bit_int(ty) };
            let Some(mut n) = src.root().descendant_for_byte_range(site.range.start, site.range.end) else { continue };
            let mut keeps = true;
            while let Some(up) =
                n.parent().filter(|u| matches!(u.kind(), "parenthesized_expression" | "cast_expression"))
            {
                if up.kind() == "cast_expression" {
                    let ty =
                        up.child_by_field_name("type").map(|x| syntax::unqualified(text(t, x))).unwrap_or_default();
                    keeps &= wide_enough(&ty);
                }
                n = up;
            }
            let Some(init) = n.parent().filter(|i| i.kind() == "init_declarator") else { continue };
            let Some(decl) = init.parent() else { continue };
            let Some((name, _)) = syntax::single_declarator(t, decl) else { continue };
            let ty = syntax::declaration_type(t, decl).map(|x| syntax::unqualified(&x)).unwrap_or_default();
            let once = declared.iter().filter(|d| **d == name).count() == 1 && !file_scope.contains(&name);
            if keeps && wide_enough(&ty) && once && !changed.contains(&name) && k.param(&name).is_none() {
                out.push((name, format!("ns_r{}", site.divisor)));
            }
        }
        out
    }

    pub fn note(&self, index: &str, v: usize) -> Option<String> {
        if self.divisors.is_empty() {
            return None;
        }
        let ms: Vec<String> = self
            .divisors
            .iter()
            .map(|s| {
                let form = if s.aligned { format!("a multiple of {v}") } else { format!("at least {v}") };
                format!("`{}` ({form})", s.divisor)
            })
            .collect();
        Some(format!("`{index}` divided once per run of {v} by {} ({} site(s))", ms.join(", "), self.sites.len()))
    }
}

/// The splits of `index` (declared once in `k`, never changed) by stable divisors in
/// `scope`, skipping sites inside `avoid` (ranges other edits rewrite), for runs of `v`.
pub(super) fn find(
    src: &Source,
    facts: &Facts,
    k: &Kernel,
    scope: &[Range<usize>],
    index: &str,
    v: usize,
    avoid: &[Range<usize>],
) -> Splits {
    let mut out = Splits::default();
    let t = src.text();
    let Some(body) = src.node(&k.body, "compound_statement") else { return out };
    // Names can change out of sight through a reference (also one a type alias hides), a
    // lambda's capture or asm.
    if !v.is_power_of_two()
        || v < 2
        || syntax::has_reference_alias(t, src.root())
        || descendants(body).iter().any(|d| {
            matches!(d.kind(), "reference_declarator" | "lambda_expression" | "gnu_asm_expression" | "for_range_loop")
        })
    {
        return out;
    }
    let declared = syntax::declared_names(t, body);
    let changed = changed_names(src, body);
    if declared.iter().filter(|n| *n == index).count() != 1 || changed.iter().any(|c| c == index) {
        return out;
    }
    let first_element_stmt = scope.iter().map(|r| r.start).min();
    let names = Names { src, facts, k, t, first_element_stmt, declared: &declared, changed: &changed };
    let in_scope = |n: Node| scope.iter().any(|r| r.start <= n.start_byte() && n.end_byte() <= r.end);
    let clashes = |r: &Range<usize>| avoid.iter().any(|a| a.start < r.end && r.start < a.end);
    for d in descendants(body) {
        if d.kind() != "binary_expression" || !in_scope(d) || clashes(&d.byte_range()) {
            continue;
        }
        let Some((op, l, r)) = syntax::binary(t, d) else { continue };
        if !matches!(op, "/" | "%") || !syntax::is_ident(t, strip_parens(l), index) || syntax::unevaluated(d) {
            continue;
        }
        let Some(divisor) = names.divisor(r, 0) else { continue };
        let Ok(v) = i64::try_from(v) else { continue };
        // The form the bench size (where known) takes: below V, the launcher would take
        // the original kernel there.
        let aligned = divisor.value.is_some_and(|x| x > 0 && x % v == 0);
        if !aligned && divisor.value.is_some_and(|x| x < v) {
            continue;
        }
        if !divisor.runtime || descendants(r).iter().any(|d| d.kind() == "comment") {
            continue;
        }
        let g = &divisor.guard;
        let guard = Some(if aligned {
            format!("(long long)({g}) > 0 && (long long)({g}) % {v} == 0")
        } else {
            format!("(long long)({g}) >= {v}")
        });
        let m = text(t, r).split_whitespace().collect::<Vec<_>>().join(" ");
        let divisor = match out.divisors.iter().position(|x| x.divisor == m) {
            Some(p) => p,
            None => {
                let fits_int = single_int_param(t, k, r);
                let core = super::gather::folded(text(t, super::gather::strip_integer_casts(t, r)));
                out.divisors.push(Split { divisor: m, core, aligned, fits_int, guard });
                out.divisors.len() - 1
            }
        };
        out.sites.push(Site { range: d.byte_range(), divisor, remainder: op == "%" });
    }
    out
}

/// The names code under `body` may change: assigned (or their address taken), handed bare
/// to a call (a macro, a template or a function of another file may take a reference),
/// or mentioned by a macro of the file the code uses (it may assign any name it names).
pub(super) fn changed_names(src: &Source, body: Node) -> Vec<String> {
    let t = src.text();
    let mut changed: Vec<String> = syntax::assigned(t, body).into_iter().map(|(n, _)| n).collect();
    changed.extend(syntax::passed_bare(t, body));
    changed.extend(syntax::macros_used_in(t, src.root(), body).iter().flat_map(|m| crate::pattern::names_in(&m.1)));
    changed
}

/// How deep a divisor's expression is followed.
const MAX_DEPTH: usize = 8;

/// A divisor that holds one value over the kernel.
struct Divisor {
    /// The launcher's text for it: parameters in braces, literals as the kernel writes them.
    guard: String,
    /// Its value at the bench size, where the task says.
    value: Option<i64>,
    /// It reads a parameter.
    runtime: bool,
}

struct Names<'a> {
    src: &'a Source,
    /// Where the first per-element statement starts.
    first_element_stmt: Option<usize>,
    facts: &'a Facts,
    k: &'a Kernel,
    t: &'a str,
    declared: &'a [String],
    changed: &'a [String],
}

impl Names<'_> {
    fn divisor(&self, n: Node, depth: usize) -> Option<Divisor> {
        if depth > MAX_DEPTH {
            return None;
        }
        let t = self.t;
        let n = strip_parens(n);
        match n.kind() {
            // Its own text, suffix and all, so that the launcher's arithmetic runs in the
            // kernel's types (`cols - 4L` is a `long` in both).
            "number_literal" => crate::pattern::int_literal(text(t, n)).map(|v| Divisor {
                guard: text(t, n).to_string(),
                value: Some(v),
                runtime: false,
            }),
            "identifier" => {
                let name = text(t, n);
                if self.changed.iter().any(|c| c == name) {
                    return None;
                }
                if self.declared.iter().any(|d| d == name) {
                    return self.local_divisor(name, depth);
                }
                let p = self.k.param(name)?;
                if p.pointer || !is_integer(&p.base) {
                    return None;
                }
                let bench = bench_of_param(self.src, self.facts, self.k, name);
                // Checked as the kernel sees it: the launcher's argument converted to the
                // parameter's type.
                let ty = syntax::unqualified(&p.base);
                Some(Divisor { guard: format!("({ty})({{{name}}})"), value: bench, runtime: true })
            }
            // `(size_t)cols`: the guard converts alike, so a negative `cols` made huge reads
            // as negative there and fails it.
            "cast_expression" => {
                let ty = syntax::unqualified(text(t, n.child_by_field_name("type")?));
                if !is_integer(&ty) {
                    return None;
                }
                let inner = self.divisor(n.child_by_field_name("value")?, depth + 1)?;
                Some(Divisor { guard: format!("({ty})({})", inner.guard), ..inner })
            }
            "binary_expression" => {
                let (op, l, r) = syntax::binary(t, n)?;
                let (a, b) = (self.divisor(l, depth + 1)?, self.divisor(r, depth + 1)?);
                let value = match (a.value, b.value) {
                    (Some(x), Some(y)) => Some(match op {
                        "+" => x.checked_add(y)?,
                        "-" => x.checked_sub(y)?,
                        "*" => x.checked_mul(y)?,
                        _ => return None,
                    }),
                    _ if matches!(op, "+" | "-" | "*") => None,
                    _ => return None,
                };
                Some(Divisor {
                    guard: format!("({}) {op} ({})", a.guard, b.guard),
                    value,
                    runtime: a.runtime || b.runtime,
                })
            }
            _ => None,
        }
    }
}

impl Names<'_> {
    /// A local the kernel declares once, before its per-element code, from what a divisor
    /// may read (`const int64_t row = (int64_t)heads * head_dim;`): its initializer's value.
    fn local_divisor(&self, name: &str, depth: usize) -> Option<Divisor> {
        if self.declared.iter().filter(|d| *d == name).count() != 1 {
            return None;
        }
        let body = self.src.node(&self.k.body, "compound_statement")?;
        let decl = descendants(body).into_iter().find(|d| {
            d.kind() == "declaration" && syntax::single_declarator(self.t, *d).is_some_and(|(n, _)| n == name)
        })?;
        let words = text(self.t, decl);
        let plain = !["__shared__", "static", "volatile", "extern", "&"].iter().any(|w| words.contains(w));
        let ty = syntax::declaration_type(self.t, decl).map(|x| syntax::unqualified(&x)).unwrap_or_default();
        // Declared at the kernel's top, before the per-element code starts.
        let top = decl.parent().is_some_and(|p| p.id() == body.id());
        let before = self.first_element_stmt.is_some_and(|at| decl.end_byte() <= at);
        if !plain || !is_integer(&ty) || !top || !before {
            return None;
        }
        let (_, init) = syntax::single_declarator(self.t, decl)?;
        let inner = self.divisor(init?, depth + 1)?;
        // Converted as the kernel stores it.
        Some(Divisor { guard: format!("({ty})({})", inner.guard), ..inner })
    }
}

/// Whether a divisor is one `int` parameter under casts to integer types.
fn single_int_param(t: &str, k: &Kernel, n: Node) -> bool {
    let n = strip_parens(n);
    match n.kind() {
        "cast_expression" => n.child_by_field_name("value").is_some_and(|v| single_int_param(t, k, v)),
        "identifier" => k.param(text(t, n)).is_some_and(|p| !p.pointer && syntax::unqualified(&p.base) == "int"),
        _ => false,
    }
}

/// An integer type of at least 32 bits (a narrower one promotes, and its own arithmetic
/// may wrap on purpose).
fn is_integer(ty: &str) -> bool {
    let ty = syntax::unqualified(ty);
    let int = ty.contains("int") || ty.contains("long") || ty == "size_t" || ty == "unsigned";
    int && syntax::type_size(&ty).is_some_and(|s| s >= 4)
}

/// The value kernel parameter `param` takes at the task's bench size: every launch (all
/// in the entry) passes an expression of the entry's integer sizes, literals, constants
/// of the file and locals of the entry declared once and never written (`HW = H * W`),
/// as [`crate::extent::launcher_value`] reads it.
fn bench_of_param(src: &Source, facts: &Facts, k: &Kernel, param: &str) -> Option<i64> {
    let i = k.param_index(param)?;
    let hosts = src.host_functions();
    let entry = hosts.iter().find(|h| h.name == facts.entry)?;
    let bench: BTreeMap<String, i64> = entry
        .params
        .iter()
        .zip(&facts.args)
        .filter_map(|(name, a)| match &a.kind {
            ArgKind::Scalar { is_float: false, bench: Some(b), .. } => Some((name.clone(), *b)),
            _ => None,
        })
        .collect();
    let mut value = None;
    for l in src.launches_of(&k.name) {
        if l.host != entry.name {
            return None;
        }
        let r = l.arg_ranges.get(i)?;
        let arg = src.root().descendant_for_byte_range(r.start, r.end)?;
        let v = crate::extent::launcher_value(src, &entry.name, arg)?.eval(&bench)?;
        if value.is_some_and(|x| x != v) {
            return None;
        }
        value = Some(v);
    }
    value
}

#[cfg(test)]
mod tests {
    use crate::facts::{Facts, FactsBuilder, Role};
    use crate::{Application, Params, RecipeId};

    /// A thread per element of a batch x channels x time tensor, its coordinates split
    /// from the flat index.
    const COORDS: &str = r#"#include <cuda_runtime.h>
__global__ void scale_rows(const float* x, const float* w, float* y, int dim, int seqlen, int total) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const int t = idx % seqlen;
  const int d = (idx / seqlen) % dim;
  y[idx] = x[idx] * w[d] + (float)t;
}
extern "C" void launch(const float* x, const float* w, float* y, int batch, int dim, int seqlen, cudaStream_t s) {
  const int total = batch * dim * seqlen;
  scale_rows<<<(total + 255) / 256, 256, 0, s>>>(x, w, y, dim, seqlen, total);
}
"#;

    fn facts(seqlen: i64) -> Facts {
        let n = 4 * 64 * seqlen;
        FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "{3} * {4} * {5}", n, n)
            .buffer("w", "float", Role::Input, "{4}", 64, 64)
            .buffer("y", "float", Role::Output, "{3} * {4} * {5}", n, n)
            .int("batch", 4, 4)
            .int("dim", 64, 64)
            .int("seqlen", seqlen, seqlen)
            .build()
    }

    fn vectorize(src: &str, f: &Facts) -> crate::Rewrite {
        let app = Application { recipe: RecipeId::Vectorize, params: Params::default() };
        crate::apply(&app, src, f).expect("vectorize applies")
    }

    #[test]
    fn a_divisor_the_bench_makes_a_multiple_of_the_run_is_divided_once() {
        let r = vectorize(COORDS, &facts(1024));
        assert!(r.source.contains("const auto ns_q0 = ns_base / (seqlen);"), "{}", r.source);
        assert!(r.source.contains("const int t = (ns_r0 + ns_k);"), "{}", r.source);
        assert!(r.source.contains("const int d = (ns_q0) % dim;"), "{}", r.source);
        assert!(r.guards.iter().any(|g| g.contains("(long long)((int)(seqlen)) % 4 == 0")), "{:?}", r.guards);
        assert!(r.description.contains("by `seqlen` (a multiple of 4) (2 site(s))"), "{}", r.description);
        // What the launcher's checks make true of the run's first column, told to the
        // compiler.
        assert!(r.source.contains("ns_assume_column<4, true>(ns_r0, (seqlen));"), "{}", r.source);
        assert!(r.source.contains("#define NIGHTSHIFT_RUN_COLUMN"), "{}", r.source);
        // The scalar tail keeps the divisions.
        assert!(r.source.contains("const int t = idx % seqlen;"), "{}", r.source);
    }

    #[test]
    fn another_divisor_wraps_at_most_once_per_run() {
        let r = vectorize(COORDS, &facts(1001));
        assert!(
            r.source.contains("(ns_r0 + ns_k >= (seqlen) ? ns_r0 + ns_k - (seqlen) : ns_r0 + ns_k)"),
            "{}",
            r.source
        );
        assert!(r.source.contains("((ns_q0 + (ns_r0 + ns_k >= (seqlen)))) % dim"), "{}", r.source);
        assert!(r.guards.iter().any(|g| g == "(long long)((int)(seqlen)) >= 4"), "{:?}", r.guards);
        // A column that may wrap is only known to lie in [0, seqlen).
        assert!(r.source.contains("ns_assume_column<4, false>(ns_r0, (seqlen));"), "{}", r.source);
    }

    #[test]
    fn the_facts_about_a_column_keep_the_kernels_types_through_index_width() {
        // An unsigned divisor: `(long long)(seqlen)` in the kernel's text was narrowed by
        // `index-width` to `(int)(seqlen)`, negative past 2^31, and the fact false.
        let unsigned = COORDS.replace("int dim, int seqlen, int total", "int dim, unsigned seqlen, int total").replace(
            "const int idx = blockIdx.x * blockDim.x + threadIdx.x;",
            "const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;",
        );
        let r = vectorize(&unsigned, &facts(1024));
        let app = Application { recipe: crate::RecipeId::IndexWidth, params: Params::default() };
        let narrowed =
            crate::apply(&app, &r.source, &facts(1024)).expect("index-width narrows the size_t index").source;
        assert!(narrowed.contains("const int ns_base"), "{narrowed}");
        assert!(narrowed.contains("ns_assume_column<4, true>(ns_r0, (seqlen));"), "{narrowed}");
        // The facts are the helper's, in the types it is handed.
        assert!(narrowed.contains("__builtin_assume((long long)r <= (long long)m - V);"), "{narrowed}");
    }

    #[test]
    fn a_literal_in_a_divisor_is_checked_as_the_kernel_writes_it() {
        // `seqlen - 4L` is a `long` in the kernel; read as `4` the launcher's check would
        // run in `int` and pass a divisor the kernel sees as negative.
        let src = COORDS.replace("idx % seqlen", "idx % (seqlen - 4L)");
        let r = vectorize(&src, &facts(1028));
        assert!(r.guards.iter().any(|g| g.contains("((int)(seqlen)) - (4L)")), "{:?}", r.guards);
    }

    #[test]
    fn a_divisor_shorter_than_the_run_or_not_fixed_is_left_alone() {
        let r = vectorize(COORDS, &facts(3));
        assert!(!r.source.contains("ns_q0"), "{}", r.source);
        let changed = COORDS.replace("const int t = idx % seqlen;", "seqlen += 0;\n  const int t = idx % seqlen;");
        let r = vectorize(&changed, &facts(1024));
        assert!(!r.source.contains("ns_q0"), "{}", r.source);
        let local =
            COORDS.replace("const int t = idx % seqlen;", "const int len = seqlen;\n  const int t = idx % len;");
        let r = vectorize(&local, &facts(1024));
        assert!(r.source.contains("const int t = idx % len;\n      const int d = (ns_q0) % dim;"), "{}", r.source);
        assert!(
            r.source.contains("const int d = (ns_q0) % dim;"),
            "the quotient by `seqlen` still splits: {}",
            r.source
        );
    }

    #[test]
    fn constants_comments_and_macros_that_may_change_a_divisor_are_left_alone() {
        // A divisor of constants alone is the compiler's to strength-reduce, and a named
        // constant's value at the kernel is not read here.
        let r = vectorize(&COORDS.replace("idx % seqlen", "idx % 012"), &facts(1024));
        assert!(r.source.contains("const int t = idx % 012;\n      const int d = (ns_q0) % dim;"), "{}", r.source);
        let named = format!("#define ROW 16\n{}", COORDS.replace("idx % seqlen", "idx % (seqlen * ROW)"));
        let r = vectorize(&named, &facts(1024));
        assert!(r.source.contains("      const int t = idx % (seqlen * ROW);"), "{}", r.source);
        let commented = COORDS.replace("idx % seqlen", "idx % (seqlen // the row\n)");
        let r = vectorize(&commented, &facts(1024));
        assert!(!r.source.contains("ns_r0 + ns_k"), "{}", r.source);
        let clamps = format!(
            "#define CLAMP seqlen = seqlen > 64 ? 64 : seqlen\n{}",
            COORDS.replace("const int t = idx % seqlen;", "CLAMP;\n  const int t = idx % seqlen;")
        );
        let r = vectorize(&clamps, &facts(1024));
        assert!(!r.source.contains("ns_q0"), "{}", r.source);
        let bumps = format!("#define SHIFTED idx + 0\n{}", COORDS.replace("idx % seqlen", "(SHIFTED) % seqlen"));
        let r = vectorize(&bumps, &facts(1024));
        assert!(!r.source.contains("ns_q0"), "a macro that names the index: {}", r.source);
    }

    #[test]
    fn a_buffer_read_at_the_column_is_loaded_wide_from_the_runs_first_column() {
        let col = COORDS.replace("x[idx] * w[d]", "x[idx] * w[t]");
        let r = vectorize(&col, &facts(1024));
        assert!(r.source.contains("ns_load(ns_w, w + ns_r0);"), "{}", r.source);
        assert!(r.source.contains("ns_y[ns_k] = ns_x[ns_k] * ns_w[ns_k] + (float)t;"), "{}", r.source);
        assert!(r.description.contains("w 16B in (its run of columns)"), "{}", r.description);
        assert!(r.guards.iter().any(|g| g == "ns_aligned(w, 16)"), "{:?}", r.guards);
        // A read the original makes only sometimes, or columns that may wrap within a
        // run, stay per element.
        for (src, seqlen) in [(COORDS.replace("x[idx] * w[d]", "x[idx] * (t > 0 ? w[t] : 0.f)"), 1024), (col, 1001)] {
            let r = vectorize(&src, &facts(seqlen));
            assert!(!r.source.contains("ns_load(ns_w"), "{}", r.source);
        }
    }

    #[test]
    fn a_column_whose_address_leaves_the_element_or_that_shadows_a_global_stays_per_element() {
        let helper = "__device__ float two(const float* p) { return p[0] + p[1]; }\n";
        for (decl, read) in
            [("", "(w + t)[1]"), (helper, "two(&w[t])"), (helper, "two(w + t)"), ("__device__ int t;\n", "w[t]")]
        {
            let src = format!("{decl}{}", COORDS.replace("x[idx] * w[d]", &format!("x[idx] * {read}")));
            let r = vectorize(&src, &facts(1024));
            assert!(!r.source.contains("ns_load(ns_w"), "{read}: {}", r.source);
        }
        let kept = COORDS.replace("x[idx] * w[d]", "x[idx] * *(w + t)");
        assert!(vectorize(&kept, &facts(1024)).source.contains("ns_load(ns_w, w + ns_r0);"));
    }

    #[test]
    fn a_divisor_the_launcher_computes_is_read_at_the_bench_size() {
        let src = COORDS
            .replace("int dim, int seqlen, int total)", "int dim, int plane, int total)")
            .replace("idx % seqlen", "idx % plane")
            .replace("idx / seqlen", "idx / plane")
            .replace("const int total = batch", "const int hw = seqlen * 2;\n  const int total = batch")
            .replace("(x, w, y, dim, seqlen, total)", "(x, w, y, dim, hw / 2, total)");
        let r = vectorize(&src, &facts(1024));
        assert!(r.source.contains("const int t = (ns_r0 + ns_k);"), "{}", r.source);
        assert!(r.source.contains("(long long)((int)((hw / 2))) % 4 == 0"), "{}", r.source);
    }
}
