//! Precision-aware intrinsics, call site by call site: `expf` to `__expf`, `logf` to
//! `__logf`, `sinf`/`cosf` to `__sinf`/`__cosf`, `powf` to `__powf`, `1.0f / sqrtf(x)`
//! to `rsqrtf(x)`, float division to `__fdividef`, `tanhf` to the hardware
//! `tanh.approx`, `erff` to a 7.1.26 polynomial with the hardware exponential. Each is
//! offered only where every output's tolerance holds four times its error
//! ([`crate::precision`]), which is finer than `--use_fast_math` (that flushes
//! denormals and approximates every site at once). In place: no assumption to check.

use crate::facts::Facts;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params, Rewrite};
use crate::source::Source;
use crate::syntax::{self, binary, descendants, strip, strip_parens, text};
use crate::version::{self, Change};
use crate::{helpers, target_kernels};
use std::collections::{BTreeMap, HashMap};
use tree_sitter::Node;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "fn",
    values: &["all", "exp", "log", "sincos", "pow", "div", "rsqrt", "tanh", "erf"],
    doc: "which functions to replace (all: every one the tolerance admits)",
}];

/// A family of replacements and its worst relative error on the inputs kernels feed it.
struct Family {
    name: &'static str,
    error: f64,
}

const FAMILIES: &[Family] = &[
    // __expf: 2 + 1.17|x| ulp; 2e-6 covers |x| up to ~25.
    Family { name: "exp", error: 2e-6 },
    Family { name: "log", error: 4e-6 },
    // __sinf/__cosf hold 2^-21.4 absolute only within [-pi, pi] and lose accuracy beyond,
    // where arguments of unknown range may lie: offered to loose tolerances only.
    Family { name: "sincos", error: 2e-4 },
    Family { name: "pow", error: 8e-6 },
    // __fdividef: 2 ulp for divisors in [2^-126, 2^126], but 0 or NaN beyond: counted
    // as a coarser error so that only a loose tolerance takes it.
    Family { name: "div", error: 2.5e-6 },
    Family { name: "rsqrt", error: 2.4e-7 },
    Family { name: "tanh", error: 5e-4 },
    Family { name: "erf", error: 3e-7 },
];

fn family_of(call: &str) -> Option<(&'static str, &'static str)> {
    Some(match call {
        "expf" => ("exp", "__expf"),
        "exp10f" => ("exp", "__exp10f"),
        "logf" => ("log", "__logf"),
        "log2f" => ("log", "__log2f"),
        "log10f" => ("log", "__log10f"),
        "sinf" => ("sincos", "__sinf"),
        "cosf" => ("sincos", "__cosf"),
        "tanf" => ("sincos", "__tanf"),
        "powf" => ("pow", "__powf"),
        "tanhf" => ("tanh", "ns_tanh_approx"),
        "erff" => ("erf", "ns_erf_fast"),
        _ => return None,
    })
}

fn is_float_literal(s: &str) -> bool {
    let s = s.trim();
    (s.contains('.') || s.ends_with('f') || s.ends_with('F') || s.contains('e'))
        && !s.starts_with("0x")
        && s.chars().next().is_some_and(|c| c.is_ascii_digit() || c == '.')
        && !s.ends_with("ll")
        && (s.ends_with('f') || s.ends_with('F'))
}

/// Whether an expression is single-precision float: a float literal (`2.f`), a float
/// variable, a call of a float function, a float cast, or arithmetic on those with no
/// double operand.
pub(super) fn is_float(t: &str, n: Node, types: &HashMap<String, String>) -> bool {
    let n = strip_parens(n);
    match n.kind() {
        "number_literal" => is_float_literal(text(t, n)),
        "identifier" => types.get(text(t, n)).is_some_and(|ty| ty == "float"),
        "call_expression" => n.child_by_field_name("function").is_some_and(|f| {
            let f = text(t, f);
            family_of(f).is_some()
                || matches!(
                    f,
                    "sqrtf"
                        | "fabsf"
                        | "fmaxf"
                        | "fminf"
                        | "rsqrtf"
                        | "fmaf"
                        | "__bfloat162float"
                        | "__half2float"
                        | "__expf"
                        | "__logf"
                        | "__fdividef"
                        | "__powf"
                        | "__sinf"
                        | "__cosf"
                )
        }),
        "cast_expression" => n.child_by_field_name("type").is_some_and(|ty| text(t, ty).trim() == "float"),
        "binary_expression" => binary(t, n).is_some_and(|(op, l, r)| {
            matches!(op, "+" | "-" | "*" | "/")
                && (is_float(t, l, types) || is_float(t, r, types))
                && !is_double(t, l, types)
                && !is_double(t, r, types)
        }),
        _ => false,
    }
}

fn is_double(t: &str, n: Node, types: &HashMap<String, String>) -> bool {
    let n = strip_parens(n);
    match n.kind() {
        "number_literal" => {
            let s = text(t, n);
            s.contains('.') && !s.ends_with('f') && !s.ends_with('F')
        }
        "identifier" => types.get(text(t, n)).is_some_and(|ty| ty == "double"),
        _ => false,
    }
}

/// Runs passes until nothing changes: a division whose operands hold a rewritten call is
/// rewritten in the pass after the call.
pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let mut first = one_pass(src, facts, params)?;
    let mut total = first.1.clone();
    for _ in 0..3 {
        let next = Source::parse(&first.0.source);
        match one_pass(&next, facts, params) {
            Ok((r, counts)) => {
                for (k, v) in counts {
                    *total.entry(k).or_default() += v;
                }
                first.0.source = r.source;
            }
            Err(_) => break,
        }
    }
    let desc: Vec<String> = total.iter().map(|(f, n)| format!("{n} {f}")).collect();
    first.0.description =
        format!("fast intrinsics at {} call site(s) (every output's tolerance admits them)", desc.join(", "));
    Ok(first.0)
}

type Counts = BTreeMap<&'static str, usize>;

/// Whether a node overlaps a site already rewritten in this pass (it waits for the next).
fn overlaps(taken: &[std::ops::Range<usize>], n: Node) -> bool {
    taken.iter().any(|x| x.start < n.end_byte() && n.start_byte() < x.end)
}

fn one_pass(src: &Source, facts: &Facts, params: &Params) -> Result<(Rewrite, Counts), NotApplicable> {
    let want = params.get(PARAMS, "fn").to_string();
    let kernels = target_kernels(src, params)?;
    let t = src.text();
    // Kernels, and the device functions of this file (shared by every kernel).
    let devices: Vec<_> = src.host_functions().into_iter().filter(|f| f.is_device).collect();
    let Some(first) = kernels.first() else { return Err(NotApplicable::new("no kernel")) };
    let mut pass = Pass {
        t,
        want: &want,
        facts,
        change: Change::new(first),
        counts: BTreeMap::new(),
        refused: BTreeMap::new(),
        taken: Vec::new(),
    };
    let mut ranges: Vec<std::ops::Range<usize>> = kernels.iter().map(|k| k.body.clone()).collect();
    ranges.extend(devices.iter().map(|d| d.body.clone()));
    for r in &ranges {
        let Some(body) = src.node(r, "compound_statement") else { continue };
        let floats = float_names(t, body);
        // Calls first, so a division around a rewritten call waits for the next pass.
        let mut nodes = descendants(body);
        nodes.sort_by_key(|n| n.kind() != "call_expression");
        for d in nodes {
            if d.kind() == "call_expression" {
                pass.call(d);
            } else {
                pass.division(d, &floats);
            }
        }
    }
    let Pass { change, counts, refused, .. } = pass;
    if counts.is_empty() {
        return Err(nothing_rewritten(&refused, facts, &want));
    }
    // Device function edits lie outside the kernel: applied as the kernel's change (in
    // place, no versioning), which takes edits anywhere in the file.
    let source = version::apply(src, vec![change])?;
    Ok((Rewrite { source, description: String::new(), guards: Vec::new() }, counts))
}

/// Which names are float in the function around `body` (declared float, or float
/// parameters), by their declared type.
pub(super) fn float_names(t: &str, body: Node) -> HashMap<String, String> {
    let mut floats: HashMap<String, String> = HashMap::new();
    let Some(f) = body.parent() else { return floats };
    for d in descendants(f) {
        if !matches!(d.kind(), "declaration" | "parameter_declaration") {
            continue;
        }
        let ty = d.child_by_field_name("type").map(|x| text(t, x)).unwrap_or("");
        let names = if d.kind() == "declaration" {
            syntax::declared_names(t, d)
        } else {
            d.child_by_field_name("declarator")
                .filter(|x| x.kind() == "identifier")
                .map(|x| vec![text(t, x).to_string()])
                .unwrap_or_default()
        };
        // A name declared with two types in one function (in separate scopes) is of
        // unknown type here: never taken for a float.
        for n in names {
            match floats.get(&n) {
                Some(prev) if prev != ty => {
                    floats.insert(n, "?".into());
                }
                Some(_) => {}
                None => {
                    floats.insert(n, ty.to_string());
                }
            }
        }
    }
    floats
}

/// One pass over the kernels and device functions: the edits so far, per family.
struct Pass<'a, 'k> {
    t: &'a str,
    want: &'a str,
    facts: &'a Facts,
    change: Change<'k>,
    counts: Counts,
    /// Sites whose family the tolerance does not admit.
    refused: Counts,
    /// Sites already rewritten in this pass.
    taken: Vec<std::ops::Range<usize>>,
}

impl Pass<'_, '_> {
    fn admitted(&self, fam: &str) -> bool {
        FAMILIES.iter().any(|f| f.name == fam && self.facts.admits(f.error))
    }

    /// A call of an accurate function becomes its fast form.
    fn call(&mut self, d: Node) {
        let t = self.t;
        let Some(f) = d.child_by_field_name("function") else { return };
        let Some((fam, fast)) = family_of(text(t, f)) else { return };
        if self.want != "all" && self.want != fam {
            return;
        }
        if !self.admitted(fam) {
            *self.refused.entry(fam).or_default() += 1;
            return;
        }
        self.change.edits.replace(f.byte_range(), fast);
        self.taken.push(f.byte_range());
        *self.counts.entry(fam).or_default() += 1;
        if fast.starts_with("ns_") {
            self.change.helpers.push(&helpers::FAST_MATH);
        }
    }

    /// `1 / sqrtf(x)` becomes `rsqrtf(x)`; a float division `__fdividef`.
    fn division(&mut self, d: Node, floats: &HashMap<String, String>) {
        let t = self.t;
        let Some((op, l, r)) = binary(t, d) else { return };
        if op != "/" {
            return;
        }
        let rs = strip_parens(r);
        let is_rsqrt = matches!(text(t, strip(l)).trim(), "1.0f" | "1.f" | "1.0F")
            && rs.kind() == "call_expression"
            && rs.child_by_field_name("function").is_some_and(|f| text(t, f) == "sqrtf");
        if is_rsqrt {
            if self.want != "all" && self.want != "rsqrt" {
                return;
            }
            if !self.admitted("rsqrt") {
                *self.refused.entry("rsqrt").or_default() += 1;
                return;
            }
            let arg = rs.child_by_field_name("arguments").map(|a| text(t, a)).unwrap_or("()");
            if overlaps(&self.taken, d) {
                return;
            }
            self.change.edits.replace(d.byte_range(), format!("rsqrtf{arg}"));
            self.taken.push(d.byte_range());
            *self.counts.entry("rsqrt").or_default() += 1;
            return;
        }
        if self.want != "all" && self.want != "div" {
            return;
        }
        // Both sides float, neither a compile-time constant.
        if !(is_float(t, l, floats) && is_float(t, r, floats)) || strip(r).kind() == "number_literal" {
            return;
        }
        // Nested divisions are rewritten at the outermost site only.
        if descendants(d).iter().skip(1).any(|x| binary(t, *x).is_some_and(|(o, _, _)| o == "/")) {
            return;
        }
        if !self.admitted("div") {
            *self.refused.entry("div").or_default() += 1;
            return;
        }
        // A division holding another edit waits for the next pass.
        if overlaps(&self.taken, d) {
            return;
        }
        self.change.edits.replace(d.byte_range(), format!("__fdividef({}, {})", text(t, l), text(t, r)));
        self.taken.push(d.byte_range());
        *self.counts.entry("div").or_default() += 1;
    }
}

/// Why nothing was rewritten: an output's tolerance refused every family found, or none
/// was there.
fn nothing_rewritten(refused: &Counts, facts: &Facts, want: &str) -> NotApplicable {
    if !refused.is_empty() {
        let needs: Vec<String> = refused
            .keys()
            .filter_map(|fam| {
                let e = FAMILIES.iter().find(|f| f.name == *fam)?.error;
                let r = facts.refusal(e)?;
                Some(format!("{fam} (output `{}`: {})", r.output, r.why))
            })
            .collect();
        return NotApplicable::new(format!("the task's tolerance admits no fast form of {}", needs.join(", ")));
    }
    NotApplicable::new(format!(
        "no accurate math call (expf, logf, sinf, cosf, powf, tanhf, erff, 1/sqrtf) or float division{} in the kernels or their device functions",
        if want == "all" { String::new() } else { format!(" of kind `{want}`") }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{FactsBuilder, Role};

    const SRC: &str = r#"
__device__ float gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678f)); }
__global__ void act(const float* x, float* y, float scale, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = gelu(v) + expf(v) / scale + 1.0f / sqrtf(v * v + 1.f) + v / 2.0f;
  }
}
extern "C" void launch(const float* x, float* y, float scale, int n, cudaStream_t s) {
  act<<<(n + 255) / 256, 256, 0, s>>>(x, y, scale, n);
}
"#;

    fn facts(rtol: f64) -> Facts {
        FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "{n}", 1 << 20, 1 << 20)
            .buffer("y", "float", Role::Output, "{n}", 1 << 20, 1 << 20)
            .float("scale")
            .int("n", 1 << 20, 1 << 20)
            .tolerance(rtol, 1e-6)
            .build()
    }

    #[test]
    fn a_loose_tolerance_takes_every_fast_form() {
        let r = apply(&Source::parse(SRC), &facts(1e-3), &Params::default()).unwrap();
        let s = &r.source;
        assert!(s.contains("ns_erf_fast(x * 0.70710678f)"), "{s}");
        assert!(s.contains("__fdividef(__expf(v), scale)"), "{s}");
        assert!(s.contains("rsqrtf(v * v + 1.f)"), "{s}");
        assert!(s.contains("v / 2.0f"), "division by a constant stays: {s}");
        assert!(s.contains("#define NIGHTSHIFT_FAST_MATH"));
    }

    #[test]
    fn a_name_of_two_types_is_no_float() {
        let src = SRC.replace(
            "float v = x[i];",
            "float v = x[i];\n    { int a = i, b = 3; v += (float)(a / b); }\n    { float a = v, b = scale; v += a / b; }",
        );
        let r = apply(&Source::parse(&src), &facts(1e-3), &Params::default().with("fn", "div")).unwrap();
        assert!(r.source.contains("(float)(a / b)"), "{}", r.source);
    }

    #[test]
    fn a_tight_tolerance_admits_only_the_exact_ones() {
        let r = apply(&Source::parse(SRC), &facts(1e-6), &Params::default()).unwrap();
        assert!(r.source.contains("erff("), "{}", r.source);
        assert!(r.source.contains("expf(v)"));
        assert!(r.source.contains("rsqrtf("));
        let e = apply(&Source::parse(SRC), &facts(1e-7), &Params::default()).unwrap_err();
        assert!(e.0.contains("admits no fast form"), "{e}");
        let e = apply(&Source::parse(SRC), &facts(1e-3), &Params::default().with("fn", "tanh")).unwrap_err();
        assert!(e.0.contains("no accurate math call"), "{e}");
    }
}
