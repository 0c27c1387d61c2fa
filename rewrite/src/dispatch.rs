//! Served shapes: several complete variants of a task's kernel in one translation unit,
//! and an `extern "C"` launcher with the entry's name that picks one per call by
//! comparing an integer launcher parameter with thresholds.
//!
//! Each variant keeps its text verbatim inside a namespace of its own, so its kernels and
//! helpers may share names with the others'; a macro renames its entry to
//! `nightshift_v{k}_{entry}`, because `extern "C"` names one symbol whatever namespace it
//! is declared in. Headers cannot be opened inside a namespace, so every `#include` that
//! no conditional guards is hoisted to the top (the copy left in place is then a no-op of
//! the header's guard), and after each variant every macro it defined is undefined, so
//! the next one's `#ifndef KNOB` defaults see only their own values. The preprocessor
//! parts are read by a line scanner (comments blanked, continuations joined), not parsed:
//! where the text is unusual the combination is declined rather than guessed.
//! [`choose_rule`] finds the parameter whose values separate the shapes each variant
//! wins. Pure: no I/O, no processes.

use crate::syntax::blank_comments;
use std::collections::BTreeSet;
use std::fmt;

/// One launcher parameter, as the task declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    /// The C type as the task writes it: `const __nv_bfloat16*`, `int`, `float`.
    pub spelling: String,
}

/// One complete kernel file and the `-D` macros (knob values) it was built with.
#[derive(Debug, Clone, Copy)]
pub struct Variant<'a> {
    pub source: &'a str,
    pub defines: &'a [(String, String)],
}

/// Which variant serves a call: variant `k` serves values `v` of parameter `param` with
/// `thresholds[k-1] < v <= thresholds[k]` (the first from below, the last up to any size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub param: usize,
    /// Strictly ascending; one fewer than the variants.
    pub thresholds: Vec<i64>,
}

impl Rule {
    /// The variant that serves `value`.
    pub fn variant_for(&self, value: i64) -> usize {
        self.thresholds.partition_point(|&t| t < value)
    }
}

/// Why no combined file was made, in a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declined(pub String);

impl fmt::Display for Declined {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Declined {}

fn declined<T>(why: impl Into<String>) -> Result<T, Declined> {
    Err(Declined(why.into()))
}

/// The rule that sends every served shape to the variant wanted there.
///
/// `values` holds, per integer parameter, its index among the launcher's parameters and
/// its value at each served shape; `chosen[s]` is the variant wanted at shape `s`. A
/// parameter qualifies when, sorted by its value, each wanted variant forms one
/// contiguous run and no value is wanted by two variants. Returns the rule, whose variant
/// `k` is the `k`-th run along the axis, and per run the caller's variant index; `None`
/// when fewer than two variants are wanted or no parameter separates them.
pub fn choose_rule(values: &[(usize, Vec<i64>)], chosen: &[usize]) -> Option<(Rule, Vec<usize>)> {
    let wanted: BTreeSet<usize> = chosen.iter().copied().collect();
    if wanted.len() < 2 {
        return None;
    }
    values
        .iter()
        .filter(|(_, vals)| vals.len() == chosen.len())
        .filter_map(|(param, vals)| runs_along(vals, chosen).map(|r| (*param, r)))
        // Every separating axis needs one threshold per boundary between wanted variants,
        // so the count ties today; it stays first should runs ever be allowed to repeat.
        .min_by_key(|(param, runs)| (runs.len(), *param))
        .map(|(param, runs)| {
            let thresholds = runs.windows(2).map(|w| split(w[0].last, w[1].first)).collect();
            (Rule { param, thresholds }, runs.iter().map(|r| r.variant).collect())
        })
}

struct Run {
    variant: usize,
    first: i64,
    last: i64,
}

/// The runs of wanted variants along one parameter, or `None` when a value is wanted by
/// two variants or a variant comes back after another one.
fn runs_along(vals: &[i64], chosen: &[usize]) -> Option<Vec<Run>> {
    let mut pairs: Vec<(i64, usize)> = vals.iter().copied().zip(chosen.iter().copied()).collect();
    pairs.sort_unstable();
    let mut runs: Vec<Run> = Vec::new();
    let mut prev: Option<(i64, usize)> = None;
    for &(v, k) in &pairs {
        if let Some((pv, pk)) = prev {
            if pv == v && pk != k {
                return None;
            }
        }
        match runs.last_mut() {
            Some(r) if r.variant == k => r.last = v,
            _ => {
                if runs.iter().any(|r| r.variant == k) {
                    return None;
                }
                runs.push(Run { variant: k, first: v, last: v });
            }
        }
        prev = Some((v, k));
    }
    Some(runs)
}

/// The threshold between the largest value of one run (`a`) and the smallest of the next
/// (`b`): the geometric midpoint, so a size between two served ones goes to the nearer in
/// ratio (sizes scale by factors, not by steps); below 1 a ratio means nothing, so there
/// the arithmetic midpoint. Always in `a..b`, so `a` stays below and `b` above.
fn split(a: i64, b: i64) -> i64 {
    debug_assert!(a < b);
    let t = if a >= 1 { isqrt(a as u128 * b as u128) as i64 } else { (a as i128 + b as i128).div_euclid(2) as i64 };
    t.clamp(a, b - 1)
}

fn isqrt(n: u128) -> u128 {
    // The root of a product of two i64 fits in 64 bits; bisect on the answer.
    let (mut lo, mut hi) = (0u128, 1u128 << 64);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if mid * mid <= n {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// One translation unit holding every variant and the dispatching `extern "C" void
/// entry(...)`.
///
/// `params` are the task's arguments in order; like every entry the dispatcher also takes
/// the `cudaStream_t` last, and passes it on. `rule` must hold one threshold fewer than
/// `variants`, on an integer parameter.
pub fn dispatch(entry: &str, params: &[Param], variants: &[Variant], rule: &Rule) -> Result<String, Declined> {
    check_rule(entry, params, variants, rule)?;
    let scans: Vec<Scan> = variants.iter().map(|v| Scan::of(v.source)).collect();
    for (k, (v, scan)) in variants.iter().zip(&scans).enumerate() {
        check_variant(entry, k, v, scan)?;
    }

    let axis = &params[rule.param].name;
    let mut out = String::new();
    out.push_str(&format!(
        "// Generated by nightshift: {} variants of `{entry}` in one translation unit, chosen at\n\
         // each call by `{axis}` (parameter {}):\n",
        variants.len(),
        rule.param
    ));
    for k in 0..variants.len() {
        out.push_str(&format!("//   variant {k}: {}\n", range_text(axis, &rule.thresholds, k)));
    }
    out.push_str(&format!(
        "// Each variant sits in namespace nightshift_vK with its launcher renamed\n\
         // nightshift_vK_{entry}; includes outside conditionals are hoisted here.\n\n"
    ));

    // The dispatcher's signature names cudaStream_t whether or not a variant includes it.
    let mut hoisted = vec!["<cuda_runtime.h>".to_string()];
    for scan in &scans {
        for inc in &scan.includes {
            if !hoisted.contains(inc) {
                hoisted.push(inc.clone());
            }
        }
    }
    for inc in &hoisted {
        out.push_str(&format!("#include {inc}\n"));
    }

    for (k, (v, scan)) in variants.iter().zip(&scans).enumerate() {
        let renamed = variant_entry(k, entry);
        out.push_str(&format!("\n// ---- variant {k}: {} ----\n", range_text(axis, &rule.thresholds, k)));
        for (name, value) in v.defines {
            out.push_str(&format!("#define {name} {value}\n"));
        }
        out.push_str(&format!("#define {entry} {renamed}\nnamespace nightshift_v{k} {{\n"));
        out.push_str(v.source);
        if !v.source.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("}}  // namespace nightshift_v{k}\n#undef {entry}\n"));
        let mut undone = BTreeSet::new();
        for name in v.defines.iter().map(|(n, _)| n).chain(&scan.defines) {
            if name != entry && undone.insert(name.as_str()) {
                out.push_str(&format!("#undef {name}\n"));
            }
        }
    }

    let decl: Vec<String> = params
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{} a{i}", p.spelling.trim()))
        .chain(["cudaStream_t stream".to_string()])
        .collect();
    let args: Vec<String> = (0..params.len()).map(|i| format!("a{i}")).chain(["stream".to_string()]).collect();
    let args = args.join(", ");
    out.push_str(&format!("\n// ---- the dispatcher ----\nextern \"C\" void {entry}({}) {{\n", decl.join(", ")));
    for (k, t) in rule.thresholds.iter().enumerate() {
        out.push_str(&format!(
            "  if (a{} <= {}) {{\n    nightshift_v{k}::{}({args});\n    return;\n  }}\n",
            rule.param,
            c_literal(*t),
            variant_entry(k, entry)
        ));
    }
    let last = rule.thresholds.len();
    out.push_str(&format!("  nightshift_v{last}::{}({args});\n}}\n", variant_entry(last, entry)));
    Ok(out)
}

fn variant_entry(k: usize, entry: &str) -> String {
    format!("nightshift_v{k}_{entry}")
}

fn range_text(axis: &str, thresholds: &[i64], k: usize) -> String {
    match (k.checked_sub(1).map(|i| thresholds[i]), thresholds.get(k)) {
        (None, None) => "every call".to_string(),
        (None, Some(hi)) => format!("{axis} <= {hi}"),
        (Some(lo), None) => format!("{axis} > {lo}"),
        (Some(lo), Some(hi)) => format!("{lo} < {axis} <= {hi}"),
    }
}

/// A `long long` literal; the most negative one has no literal of its own in C.
fn c_literal(t: i64) -> String {
    if t == i64::MIN {
        "(-9223372036854775807LL - 1)".to_string()
    } else {
        format!("{t}LL")
    }
}

fn check_rule(entry: &str, params: &[Param], variants: &[Variant], rule: &Rule) -> Result<(), Declined> {
    if !is_identifier(entry) {
        return declined(format!("the entry `{entry}` is not a C identifier"));
    }
    if variants.len() != rule.thresholds.len() + 1 {
        return declined(format!(
            "{} variants need {} thresholds, the rule has {}",
            variants.len(),
            variants.len().saturating_sub(1),
            rule.thresholds.len()
        ));
    }
    let Some(p) = params.get(rule.param) else {
        return declined(format!(
            "the rule dispatches on parameter {}, but the entry takes {} parameters",
            rule.param,
            params.len()
        ));
    };
    let Some(unsigned) = integer_type(&p.spelling) else {
        return declined(format!(
            "parameter {} (`{}`) is `{}`, not an integer type the dispatcher can compare with thresholds",
            rule.param, p.name, p.spelling
        ));
    };
    if let Some(w) = rule.thresholds.windows(2).find(|w| w[0] >= w[1]) {
        return declined(format!("the thresholds must ascend strictly, but {} is followed by {}", w[0], w[1]));
    }
    if unsigned {
        if let Some(t) = rule.thresholds.iter().find(|&&t| t < 0) {
            return declined(format!(
                "threshold {t} is negative but `{}` is unsigned: C would compare it as a huge value",
                p.name
            ));
        }
    }
    Ok(())
}

fn check_variant(entry: &str, k: usize, v: &Variant, scan: &Scan) -> Result<(), Declined> {
    if !scan.identifiers.contains(entry) {
        return declined(format!("variant {k} never names the entry `{entry}`: it has no launcher to dispatch to"));
    }
    for (name, value) in v.defines {
        if !is_identifier(name) {
            return declined(format!("variant {k}'s define `{name}` is not a macro name"));
        }
        if value.contains(['\n', '\r']) {
            return declined(format!("variant {k}'s define `{name}` has a value that spans lines"));
        }
    }
    if scan.extern_c_in_directive {
        return declined(format!(
            "variant {k} spells `extern \"C\"` inside a preprocessor directive, where this check cannot see which names it gives C linkage"
        ));
    }
    for name in &scan.extern_c {
        match name {
            Some(n) if n == entry => {}
            Some(n) => {
                return declined(format!(
                    "variant {k} declares `{n}` `extern \"C\"` besides the entry: two variants would define the same C symbol"
                ))
            }
            None => {
                return declined(format!(
                    "variant {k} has an `extern \"C\"` declaration whose name this check cannot read"
                ))
            }
        }
    }
    Ok(())
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// `Some(unsigned)` when `spelling` is an integer type (qualifiers allowed).
fn integer_type(spelling: &str) -> Option<bool> {
    let words: Vec<&str> = spelling
        .split_whitespace()
        .map(|w| w.strip_prefix("std::").unwrap_or(w))
        .filter(|w| !matches!(*w, "const" | "volatile" | "__restrict__"))
        .collect();
    match words.as_slice() {
        [one] => match *one {
            "size_t" | "uint8_t" | "uint16_t" | "uint32_t" | "uint64_t" | "uintptr_t" | "unsigned" => Some(true),
            "int" | "long" | "short" | "signed" | "ssize_t" | "ptrdiff_t" | "int8_t" | "int16_t" | "int32_t"
            | "int64_t" | "intptr_t" => Some(false),
            _ => None,
        },
        many => {
            let unsigned = many[0] == "unsigned";
            let rest = if unsigned || many[0] == "signed" { &many[1..] } else { many };
            let ok = matches!(
                rest,
                ["int"]
                    | ["short"]
                    | ["short", "int"]
                    | ["long"]
                    | ["long", "int"]
                    | ["long", "long"]
                    | ["long", "long", "int"]
            );
            ok.then_some(unsigned)
        }
    }
}

/// What the line scanner reads from one variant.
#[derive(Debug, Default)]
struct Scan {
    /// `<header>` or `"header"` of the includes outside every conditional, in order.
    includes: Vec<String>,
    /// Every macro the text `#define`s, conditional or not.
    defines: Vec<String>,
    /// Identifiers outside comments.
    identifiers: BTreeSet<String>,
    /// The name each `extern "C"` declaration gives C linkage (`None`: unreadable).
    extern_c: Vec<Option<String>>,
    extern_c_in_directive: bool,
}

impl Scan {
    fn of(text: &str) -> Scan {
        let code = blank_comments(text);
        let mut scan = Scan::default();
        // The code with directive lines blanked, for the declaration scan.
        let mut body = code.clone().into_bytes();
        let mut depth = 0usize;
        for (range, line) in logical_lines(&code) {
            let Some(directive) = line.trim_start().strip_prefix('#') else { continue };
            for b in &mut body[range] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
            let directive = directive.trim_start();
            let keyword: String = directive.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let rest = directive[keyword.len()..].trim_start();
            if directive.contains("extern") && tokens(directive).windows(2).any(|w| is_extern_c(w[0], w[1])) {
                scan.extern_c_in_directive = true;
            }
            match keyword.as_str() {
                "if" | "ifdef" | "ifndef" => depth += 1,
                "endif" => depth = depth.saturating_sub(1),
                "include" if depth == 0 => {
                    if let Some(target) = include_target(rest) {
                        if !scan.includes.contains(&target) {
                            scan.includes.push(target);
                        }
                    }
                }
                "define" => {
                    let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    if is_identifier(&name) && !scan.defines.contains(&name) {
                        scan.defines.push(name);
                    }
                }
                _ => {}
            }
        }
        let toks = tokens(&code);
        scan.identifiers = toks.iter().filter(|t| is_identifier(t)).map(|t| t.to_string()).collect();
        let body = String::from_utf8(body).expect("only ASCII bytes were blanked");
        scan.extern_c = extern_c_names(&tokens(&body));
        scan
    }
}

/// `<header>` or `"header"` at the start of an include's operand; a macro operand is
/// left where it is.
fn include_target(rest: &str) -> Option<String> {
    let close = match rest.chars().next()? {
        '<' => '>',
        '"' => '"',
        _ => return None,
    };
    let end = rest[1..].find(close)?;
    Some(rest[..end + 2].to_string())
}

/// Logical lines (backslash continuations joined) with the byte range they span.
fn logical_lines(code: &str) -> Vec<(std::ops::Range<usize>, String)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut joined = String::new();
    let mut at = 0;
    for physical in code.split_inclusive('\n') {
        let end = at + physical.len();
        let content = physical.trim_end_matches(['\n', '\r']);
        // gcc joins a backslash followed by trailing blanks too (with a warning).
        match content.trim_end().strip_suffix('\\') {
            Some(head) => joined.push_str(head),
            None => {
                joined.push_str(content);
                out.push((start..end, std::mem::take(&mut joined)));
                start = end;
            }
        }
        at = end;
    }
    if !joined.is_empty() {
        out.push((start..at, joined));
    }
    out
}

/// Identifiers, numbers, string and character literals, and single punctuation
/// characters of comment-free code.
fn tokens(code: &str) -> Vec<&str> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'_' || c.is_ascii_alphanumeric() {
            while i < b.len() && (b[i] == b'_' || b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
        } else if c == b'"' || c == b'\'' {
            i += 1;
            while i < b.len() && b[i] != c && b[i] != b'\n' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
        } else {
            i += code[i..].chars().next().map_or(1, char::len_utf8);
        }
        out.push(&code[start..i]);
    }
    out
}

fn is_extern_c(a: &str, b: &str) -> bool {
    a == "extern" && b == "\"C\""
}

/// The names `extern "C"` gives C linkage, one per declaration (`extern "C" T f(...)`)
/// and per declaration of an `extern "C" { ... }` block.
fn extern_c_names(toks: &[&str]) -> Vec<Option<String>> {
    let mut names = Vec::new();
    let mut i = 0;
    while i + 1 < toks.len() {
        if !is_extern_c(toks[i], toks[i + 1]) {
            i += 1;
            continue;
        }
        i += 2;
        if toks.get(i) == Some(&"{") {
            i += 1;
            while i < toks.len() && toks[i] != "}" {
                if toks[i] == ";" {
                    i += 1;
                    continue;
                }
                let (name, end) = declaration(toks, i);
                names.push(name);
                i = end;
            }
            i += 1;
        } else {
            let (name, end) = declaration(toks, i);
            names.push(name);
            i = end;
        }
    }
    names
}

/// Attribute-like words whose parenthesized operand comes before a declaration's name.
const ATTRIBUTES: [&str; 7] =
    ["__attribute__", "__declspec", "__launch_bounds__", "__cluster_dims__", "__maxnreg__", "alignas", "__align__"];

/// The name one declaration starting at `start` declares (the last identifier before its
/// parameter list, initializer or end) and where the declaration ends.
fn declaration(toks: &[&str], start: usize) -> (Option<String>, usize) {
    let mut i = start;
    let mut last: Option<&str> = None;
    let mut name: Option<String> = None;
    while i < toks.len() {
        let t = toks[i];
        if name.is_none() {
            if ATTRIBUTES.contains(&t) && toks.get(i + 1) == Some(&"(") {
                i = skip_group(toks, i + 1);
                continue;
            }
            if t == "[" && toks.get(i + 1) == Some(&"[") {
                i = skip_group(toks, i);
                continue;
            }
            if matches!(t, "(" | ";" | "=" | "[" | "{" | ",") {
                name = Some(last.map(str::to_string).unwrap_or_default());
            } else if is_identifier(t) {
                last = Some(t);
            }
        }
        match t {
            ";" => return (name.filter(|n| !n.is_empty()), i + 1),
            "}" => return (name.filter(|n| !n.is_empty()), i),
            "(" | "[" => i = skip_group(toks, i),
            "{" => {
                i = skip_group(toks, i);
                // A function body ends the declaration; a braced initializer runs on to `;`.
                if toks.get(i) != Some(&";") {
                    return (name.filter(|n| !n.is_empty()), i);
                }
            }
            _ => i += 1,
        }
    }
    (name.filter(|n| !n.is_empty()), i)
}

/// The index just past the bracket group that opens at `open`.
fn skip_group(toks: &[&str], open: usize) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i < toks.len() {
        match toks[i] {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params() -> Vec<Param> {
        [("x", "const float*"), ("y", "float*"), ("rows", "int"), ("cols", "const int64_t"), ("eps", "float")]
            .iter()
            .map(|(n, s)| Param { name: n.to_string(), spelling: s.to_string() })
            .collect()
    }

    const V0: &str = r#"// variant zero
#include <cuda_runtime.h>
#include "common.cuh"
#ifndef BLOCK
#define BLOCK 256
#endif
#ifdef USE_CG
#include <cooperative_groups.h>
#endif
#define HALF(x) \
  ((x) / 2)
static __device__ float helper(float v) { return v; }
__global__ void k(const float* x, float* y, int n) { }
extern "C" void scale(const float* x, float* y, int rows, int64_t cols, float eps, cudaStream_t s) {
  k<<<rows, BLOCK, 0, s>>>(x, y, rows);
}
"#;

    const V1: &str = r#"#include <cuda_runtime.h>
/* #include <never.h> */
#include <cuda_bf16.h>  // bf16
#define TILE 64
static __device__ float helper(float v) { return 2 * v; }
__global__ void k(const float* x, float* y, int n) { }
extern "C" {
void scale(const float* x, float* y, int rows, int64_t cols, float eps, cudaStream_t s) {
  k<<<rows, TILE, 0, s>>>(x, y, rows);
}
}
"#;

    #[test]
    fn decode_and_prefill_split_at_the_geometric_midpoint() {
        // Tokens 8 want variant 1, 4096 want variant 0: variant 1 serves the small side.
        let (rule, map) = choose_rule(&[(2, vec![8, 4096])], &[1, 0]).unwrap();
        assert_eq!(rule, Rule { param: 2, thresholds: vec![181] });
        assert_eq!(map, vec![1, 0]);
        assert_eq!(rule.variant_for(8), 0);
        assert_eq!(rule.variant_for(181), 0);
        assert_eq!(rule.variant_for(182), 1);
    }

    #[test]
    fn three_shapes_in_contiguous_runs() {
        let (rule, map) = choose_rule(&[(0, vec![4096, 1, 64, 16])], &[2, 0, 1, 0]).unwrap();
        assert_eq!(rule.thresholds, vec![32, 512]); // sqrt(16*64), sqrt(64*4096)
        assert_eq!(map, vec![0, 1, 2]);
    }

    #[test]
    fn thresholds_stay_between_neighbours() {
        assert_eq!(split(1, 2), 1);
        assert_eq!(split(5, 6), 5);
        assert_eq!(split(0, 8), 4);
        assert_eq!(split(-10, -2), -6);
        assert_eq!(split(i64::MAX - 1, i64::MAX), i64::MAX - 1);
        assert_eq!(split(1, i64::MAX), 3_037_000_499);
    }

    #[test]
    fn interleaved_variants_need_another_parameter() {
        // Along tokens the wanted variants go A, B, A; along hidden size they separate.
        let tokens = (1, vec![8, 64, 4096]);
        assert_eq!(choose_rule(std::slice::from_ref(&tokens), &[0, 1, 0]), None);
        let hidden = (3, vec![1024, 8192, 2048]);
        let (rule, map) = choose_rule(&[tokens, hidden], &[0, 1, 0]).unwrap();
        assert_eq!(rule, Rule { param: 3, thresholds: vec![4096] });
        assert_eq!(map, vec![0, 1]);
    }

    #[test]
    fn a_value_wanted_by_two_variants_separates_nothing() {
        assert_eq!(choose_rule(&[(0, vec![8, 8, 64])], &[0, 1, 1]), None);
        // Equal values wanting the same variant are fine.
        let (rule, _) = choose_rule(&[(0, vec![8, 8, 64])], &[0, 0, 1]).unwrap();
        assert_eq!(rule.thresholds, vec![22]);
    }

    #[test]
    fn ties_go_to_the_lowest_parameter() {
        let (rule, _) = choose_rule(&[(4, vec![1, 2]), (2, vec![10, 20])], &[0, 1]).unwrap();
        assert_eq!(rule.param, 2);
    }

    #[test]
    fn one_variant_or_no_shapes_need_no_rule() {
        assert_eq!(choose_rule(&[(0, vec![8, 4096])], &[3, 3]), None);
        assert_eq!(choose_rule(&[(0, vec![])], &[]), None);
        // A parameter without a value per shape is not an axis.
        assert_eq!(choose_rule(&[(0, vec![8])], &[0, 1]), None);
    }

    fn combined() -> String {
        let d0 = vec![("BLOCK".to_string(), "128".to_string())];
        let variants = [Variant { source: V0, defines: &d0 }, Variant { source: V1, defines: &[] }];
        dispatch("scale", &params(), &variants, &Rule { param: 2, thresholds: vec![181] }).unwrap()
    }

    #[test]
    fn includes_outside_conditionals_are_hoisted_once() {
        let out = combined();
        let first_ns = out.find("namespace nightshift_v0 {").unwrap();
        let head = &out[..first_ns];
        for inc in ["#include <cuda_runtime.h>\n", "#include \"common.cuh\"\n", "#include <cuda_bf16.h>\n"] {
            assert_eq!(head.matches(inc).count(), 1, "{inc} hoisted once:\n{head}");
        }
        // Guarded, commented out: left where they are.
        assert!(!head.contains("cooperative_groups.h"), "{head}");
        assert!(!head.contains("never.h"), "{head}");
        assert!(out[first_ns..].contains("#ifdef USE_CG\n#include <cooperative_groups.h>\n#endif"));
        // The includes also stay in the variants' text.
        assert!(out[first_ns..].contains("#include \"common.cuh\""));
    }

    #[test]
    fn each_variant_is_wrapped_renamed_and_undone() {
        let out = combined();
        let v0 = out.find("namespace nightshift_v0 {").unwrap();
        let v1 = out.find("namespace nightshift_v1 {").unwrap();
        let disp = out.find("// ---- the dispatcher ----").unwrap();
        assert!(v0 < v1 && v1 < disp);
        let before_v0 = &out[..v0];
        assert!(before_v0.ends_with("#define BLOCK 128\n#define scale nightshift_v0_scale\n"), "{before_v0}");
        assert!(out[v0..v1].contains(V0), "verbatim text");
        let after_v0 = &out[out[v0..].find("}  // namespace nightshift_v0\n").unwrap() + v0..v1];
        for m in ["#undef scale\n", "#undef BLOCK\n", "#undef HALF\n"] {
            assert_eq!(after_v0.matches(m).count(), 1, "{m} in\n{after_v0}");
        }
        let after_v1 = &out[out[v1..].find("}  // namespace nightshift_v1\n").unwrap() + v1..disp];
        assert!(after_v1.contains("#undef scale\n#undef TILE\n"), "{after_v1}");
        assert!(!after_v1.contains("#undef BLOCK"), "{after_v1}");
    }

    #[test]
    fn the_dispatcher_compares_the_rule_parameter() {
        let out = combined();
        let disp = &out[out.find("// ---- the dispatcher ----").unwrap()..];
        assert!(disp.contains(
            "extern \"C\" void scale(const float* a0, float* a1, int a2, const int64_t a3, float a4, cudaStream_t stream) {"
        ), "{disp}");
        assert!(disp.contains("  if (a2 <= 181LL) {\n    nightshift_v0::nightshift_v0_scale(a0, a1, a2, a3, a4, stream);\n    return;\n  }\n  nightshift_v1::nightshift_v1_scale(a0, a1, a2, a3, a4, stream);\n}\n"), "{disp}");
        assert!(out.starts_with("// Generated by nightshift"), "{out}");
        assert!(out.contains("//   variant 0: rows <= 181\n//   variant 1: rows > 181\n"), "{out}");
    }

    #[test]
    fn three_variants_get_a_middle_range() {
        let vs = [Variant { source: V0, defines: &[] }; 3];
        let out = dispatch("scale", &params(), &vs, &Rule { param: 3, thresholds: vec![-5, 100] }).unwrap();
        assert!(out.contains("//   variant 1: -5 < cols <= 100\n"), "{out}");
        assert!(out.contains("if (a3 <= -5LL)") && out.contains("if (a3 <= 100LL)"), "{out}");
        assert!(out.contains("nightshift_v2::nightshift_v2_scale("), "{out}");
    }

    fn declines(vs: &[Variant], rule: Rule, params: &[Param], needle: &str) {
        match dispatch("scale", params, vs, &rule) {
            Err(Declined(why)) => assert!(why.contains(needle), "`{why}` should say `{needle}`"),
            Ok(out) => panic!("expected a decline saying `{needle}`, got\n{out}"),
        }
    }

    #[test]
    fn declines_what_it_cannot_combine() {
        let ok = Variant { source: V0, defines: &[] };
        let rule = || Rule { param: 2, thresholds: vec![181] };
        let no_entry = Variant { source: "// scale\nextern \"C\" void other_name();\n", defines: &[] };
        declines(&[ok, no_entry], rule(), &params(), "variant 1 never names the entry `scale`");
        declines(&[ok, ok], Rule { param: 9, thresholds: vec![1] }, &params(), "parameter 9, but the entry takes 5");
        declines(&[ok, ok], Rule { param: 4, thresholds: vec![1] }, &params(), "`eps`) is `float`, not an integer");
        declines(&[ok, ok], Rule { param: 0, thresholds: vec![1] }, &params(), "is `const float*`, not an integer");
        declines(&[ok, ok, ok], Rule { param: 2, thresholds: vec![9, 9] }, &params(), "ascend strictly, but 9");
        declines(&[ok, ok, ok], rule(), &params(), "3 variants need 2 thresholds, the rule has 1");
        let mut unsigned = params();
        unsigned[2].spelling = "size_t".into();
        declines(&[ok, ok], Rule { param: 2, thresholds: vec![-1] }, &unsigned, "is unsigned");
        let d = vec![("BAD NAME".to_string(), "1".to_string())];
        declines(&[ok, Variant { source: V0, defines: &d }], rule(), &params(), "`BAD NAME` is not a macro name");
    }

    #[test]
    fn declines_other_c_symbols() {
        let ok = Variant { source: V0, defines: &[] };
        let rule = Rule { param: 2, thresholds: vec![181] };
        let cases = [
            (format!("{V0}extern \"C\" __global__ void kern(float* x) {{ }}\n"), "`kern`"),
            (format!("{V0}extern \"C\" __attribute__((visibility(\"default\"))) int helper2(int);\n"), "`helper2`"),
            (format!("{V0}extern \"C\" {{\nint counter = 0;\nvoid bump() {{ counter++; }}\n}}\n"), "`counter`"),
            (format!("{V0}extern \"C\" {{\nvoid scale2(int n);\n}}\n"), "`scale2`"),
            (format!("{V0}#define EXPORT extern \"C\"\nEXPORT void f();\n"), "inside a preprocessor directive"),
        ];
        for (text, needle) in &cases {
            declines(&[ok, Variant { source: text, defines: &[] }], rule.clone(), &params(), needle);
        }
        // The entry alone, declared twice, in a block, behind attributes, in comments: fine.
        let fine = format!(
            "{V1}extern \"C\" void scale(const float*, float*, int, int64_t, float, cudaStream_t);\n\
             extern \"C\" __attribute__((visibility(\"default\"))) void scale(const float*, float*, int, int64_t, float, cudaStream_t);\n\
             // extern \"C\" void not_code();\n/* extern \"C\" int nor_this; */\nconst char* s = \"extern \\\"C\\\" void in_a_string\";\n"
        );
        let vs = [ok, Variant { source: &fine, defines: &[] }];
        dispatch("scale", &params(), &vs, &rule).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn the_scanner_follows_conditionals_continuations_and_comments() {
        let s = Scan::of(
            "#if A \\\n  && B\n#include <inside.h>\n#elif C\n#include <also_inside.h>\n#else\n#endif\n\
             /* #include <commented.h>\n#define NOT_A_MACRO 1 */\n  #  include \"spaced.h\" // trailing\n\
             #define LONG(x) \\\n  (x)\n#ifdef X\n#define INNER 2\n#endif\nint d = 1'000;\n#include <after_digits.h>\n",
        );
        assert_eq!(s.includes, vec!["\"spaced.h\"".to_string(), "<after_digits.h>".to_string()]);
        assert_eq!(s.defines, vec!["LONG".to_string(), "INNER".to_string()]);
    }

    proptest! {
        #[test]
        fn the_rule_sends_every_served_value_to_its_variant(
            raw in proptest::collection::btree_set(-1000i64..1_000_000, 2..40),
            cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 1..5),
            perm_seed in any::<u64>(),
        ) {
            let values: Vec<i64> = raw.into_iter().collect();
            // Contiguous runs: cut the sorted values at distinct points.
            let mut at: Vec<usize> = cuts.iter().map(|c| 1 + c.index(values.len() - 1)).collect();
            at.sort_unstable();
            at.dedup();
            let runs = at.len() + 1;
            // Runs get caller variant numbers in a shuffled order.
            let mut ids: Vec<usize> = (0..runs).collect();
            let mut s = perm_seed;
            for i in (1..runs).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ids.swap(i, (s >> 33) as usize % (i + 1));
            }
            let chosen: Vec<usize> =
                (0..values.len()).map(|i| ids[at.iter().filter(|&&a| a <= i).count()]).collect();
            // Present the shapes in reverse, so the order of shapes is not the order of values.
            let rev_vals: Vec<i64> = values.iter().rev().copied().collect();
            let rev_chosen: Vec<usize> = chosen.iter().rev().copied().collect();
            let (rule, map) = choose_rule(&[(7, rev_vals)], &rev_chosen).expect("contiguous runs separate");
            prop_assert_eq!(rule.param, 7);
            prop_assert_eq!(rule.thresholds.len(), runs - 1);
            prop_assert_eq!(&map, &ids);
            for (v, want) in values.iter().zip(&chosen) {
                prop_assert_eq!(map[rule.variant_for(*v)], *want, "value {}", v);
            }
        }
    }
}
