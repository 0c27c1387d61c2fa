//! The sizes init proposes: a bench size whose least traffic takes about twice
//! [`budget::MIN_BENCH_SECONDS`] at [`budget::ASSUMED_BANDWIDTH`] and whose buffers stay
//! under [`budget::MAX_BENCH_BYTES`]; check sizes at awkward values (one element, primes,
//! one past a tile edge, multiples of 8) whose buffers stay under
//! [`budget::MAX_CHECK_ELEMENTS`]; flags at 0 and 1 across the check sizes; fixed widths
//! held at their value; a decode-like served shape where a size variable's name counts
//! tokens, rows or a batch ([`served`]). Pure: names and expressions in, values out.

use crate::task::budget;
use crate::task::expr::Expr;
use std::collections::BTreeMap;

/// What an integer parameter becomes in the task.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum IntegerKind {
    /// A size variable that takes sizes.
    Dimension,
    /// A size variable that takes sizes and sizes a launch's block: at most 1024.
    Block,
    /// A size variable that selects behaviour: the check sizes take each of its values
    /// in turn (0 and 1, or the constants the code compares it with), the bench the
    /// largest.
    Flag(Vec<i64>),
    /// A size variable held at one value at every size: a filter's width.
    Fixed(i64),
    /// No size variable: a value of its own (a step count).
    Value(i64, &'static str),
}

/// One proposed binding of the size variables, in their order.
pub(super) type Binding = Vec<(String, i64)>;

/// The element counts and bytes of the task's buffers, and its least traffic, as
/// expressions over the size variables; None where a length is unknown.
pub(super) struct Buffers<'a> {
    /// Each pointer's length and its element's bytes.
    pub lengths: &'a [(String, usize)],
    /// The least traffic's terms, summed.
    pub traffic: &'a [String],
}

impl Buffers<'_> {
    fn eval(e: &str, b: &Binding) -> Option<u128> {
        let vars: BTreeMap<String, i64> = b.iter().cloned().collect();
        Expr::parse(e).ok()?.eval(&vars).ok().and_then(|v| u128::try_from(v).ok())
    }

    fn held(&self, b: &Binding) -> Option<u128> {
        self.lengths.iter().map(|(l, bytes)| Self::eval(l, b).map(|n| n * *bytes as u128)).sum()
    }

    fn moved(&self, b: &Binding) -> Option<u128> {
        self.traffic.iter().map(|t| Self::eval(t, b)).sum()
    }

    fn largest(&self, b: &Binding) -> Option<u128> {
        self.lengths.iter().map(|(l, _)| Self::eval(l, b)).collect::<Option<Vec<_>>>()?.into_iter().max()
    }
}

/// A dimension's bench value from its name, before scaling to the traffic.
fn named_bench(name: &str, dims: usize) -> (i64, bool) {
    match name.to_ascii_lowercase().as_str() {
        "batch" | "bs" => (8, true),
        "heads" | "num_heads" | "nh" => (32, true),
        "head_dim" | "dim" | "d" | "headdim" => (128, true),
        "topk" | "top_k" | "k_top" => (8, true),
        _ => (
            match dims {
                1 => 1 << 24,
                2 => 1 << 12,
                3 => 1 << 10,
                _ => 1 << 7,
            },
            false,
        ),
    }
}

/// Awkward sizes per position: a single element, primes, one past a tile edge, and
/// multiples of 8 that are not powers of two (so a vectorized path runs at a check size).
fn check_values(count: usize) -> Vec<Vec<i64>> {
    let primes = [17, 67, 131, 13, 7, 5];
    let straddle = [257, 129, 65, 33, 17, 9];
    let multiples = [24, 200, 40, 72, 56, 88];
    vec![
        vec![1; count],
        (0..count).map(|i| primes[i % primes.len()]).collect(),
        (0..count).map(|i| straddle[i % straddle.len()]).collect(),
        (0..count).map(|i| multiples[i % multiples.len()]).collect(),
    ]
}

/// About half of an awkward value, as awkward where it can stay so: a multiple of 16 stays
/// a multiple of 8, anything else becomes odd. Always smaller, for a value above 1.
fn halved(v: i64) -> i64 {
    if v >= 16 && v % 8 == 0 {
        v / 16 * 8
    } else {
        ((v / 2) | 1).min(v - 1).max(1)
    }
}

/// The proposal, and what the user should know about the bench size.
pub(super) struct Proposal {
    pub bench: Binding,
    pub checks: Vec<Binding>,
    /// The bench size's traffic and time, or why it was not sized from the traffic.
    pub bench_note: String,
}

/// Sizes for the size variables `vars` (in order; values left out) of a task whose
/// buffers are `buffers` (None when a length is unknown).
pub(super) fn propose(vars: &[(String, IntegerKind)], buffers: Option<&Buffers>) -> Proposal {
    let dims: Vec<&str> = vars
        .iter()
        .filter(|(_, k)| matches!(k, IntegerKind::Dimension | IntegerKind::Block))
        .map(|(n, _)| n.as_str())
        .collect();
    let blocks: Vec<&str> = vars.iter().filter(|(_, k)| *k == IntegerKind::Block).map(|(n, _)| n.as_str()).collect();
    let flags: Vec<&str> =
        vars.iter().filter(|(_, k)| matches!(k, IntegerKind::Flag(_))).map(|(n, _)| n.as_str()).collect();
    let binding = |dim_value: &dyn Fn(usize, &str) -> i64, flag_value: &dyn Fn(usize, &[i64]) -> i64| -> Binding {
        vars.iter()
            .map(|(n, k)| {
                let v = match k {
                    IntegerKind::Flag(values) => flag_value(flags.iter().position(|f| f == n).unwrap_or(0), values),
                    IntegerKind::Fixed(v) | IntegerKind::Value(v, _) => *v,
                    IntegerKind::Dimension => dim_value(dims.iter().position(|d| d == n).unwrap_or(0), n),
                    IntegerKind::Block => dim_value(dims.iter().position(|d| d == n).unwrap_or(0), n).min(MAX_BLOCK),
                };
                (n.clone(), v)
            })
            .collect()
    };
    let largest = |values: &[i64]| values.iter().copied().max().unwrap_or(1);
    let mut bench = binding(&|_, n| named_bench(n, dims.len()).0, &|_, values| largest(values));
    // Each flag's values in turn; a second flag changes every other size, so two flags
    // of 0 and 1 meet in all four pairs.
    let checks: Vec<Binding> = check_values(dims.len())
        .into_iter()
        .enumerate()
        .map(|(i, values)| {
            binding(&|d, _| values[d], &|f, vals| match vals.len() {
                0 => 1,
                n => vals[(i >> (f % 2)) % n],
            })
        })
        .map(|c| match buffers {
            Some(b) => fit_check(c, &dims, b),
            None => c,
        })
        .collect();
    let bench_note = match buffers {
        Some(b) if !dims.is_empty() => fit_bench(&mut bench, &dims, &blocks, b),
        _ => "the lengths are not all known, so the bench size is not sized from the traffic".to_string(),
    };
    Proposal { bench, checks, bench_note }
}

/// What a size variable's name says it counts, for the shapes a kernel serves: decode
/// runs a layer on a few tokens (or one sequence) at a time, prefill on thousands. Ordered
/// from the most token-like: the first kind a task's variables name is the one varied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Counts {
    /// `tokens`, `num_tokens`, `n_tokens`, `ntokens`.
    Tokens,
    /// A sequence's length: `seq`, `seq_len`, `seqlen`.
    Sequence,
    /// Rows of an activation: `rows`, `num_rows`, `n_rows`, and a GEMM's `M`.
    Rows,
    /// Sequences or requests: `batch`, `batch_size`, `bs`, `num_seqs`.
    Batch,
}

impl Counts {
    /// What it counts, in words.
    pub fn words(self) -> &'static str {
        match self {
            Counts::Tokens => "a token count",
            Counts::Sequence => "a sequence length",
            Counts::Rows => "a row count",
            Counts::Batch => "a batch size",
        }
    }

    /// Its size at decode: a few tokens (rows) at a time, or a batch of one.
    pub fn decode(self) -> i64 {
        match self {
            Counts::Batch => 1,
            _ => 8,
        }
    }
}

/// What the name of a size variable says it counts (case-insensitive), or None. `m`
/// counts rows only in GEMM naming (`gemm`: M, N and K are all size variables), where it
/// is the rows of A and C, a linear layer's tokens; alone it is as often a matrix's
/// output rows (a GEMV's `M x K`), which decode does not shrink.
pub(super) fn counts(name: &str, gemm: bool) -> Option<Counts> {
    match name.to_ascii_lowercase().as_str() {
        "tokens" | "num_tokens" | "n_tokens" | "ntokens" | "num_toks" | "ntoks" | "total_tokens" => {
            Some(Counts::Tokens)
        }
        "seq" | "seq_len" | "seqlen" | "seq_length" | "sequence_length" => Some(Counts::Sequence),
        "rows" | "num_rows" | "n_rows" | "nrows" => Some(Counts::Rows),
        "m" if gemm => Some(Counts::Rows),
        "batch" | "batch_size" | "batchsize" | "bs" | "bsz" | "num_seqs" | "n_seqs" | "nseqs" => Some(Counts::Batch),
        _ => None,
    }
}

/// A decode-like served shape: one variable at its decode size, every other at the bench
/// size (the prefill-like shape).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ServedGuess {
    pub var: String,
    pub counts: Counts,
    pub decode: i64,
    pub bench: i64,
}

/// The decode-like shape for the size variables `candidates` (those that may count tokens:
/// the draft leaves out flags, fixed widths and variables the kernels walk serially) at
/// the bench size `bench`: the most token-like name whose bench value is above its decode
/// size (the earliest of equals). `sizes`, every size variable, says whether names are a
/// GEMM's. None when no name counts tokens, rows or a batch.
pub(super) fn served(candidates: &[String], sizes: &[String], bench: &Binding) -> Option<ServedGuess> {
    let has = |n: &str| sizes.iter().any(|s| s.eq_ignore_ascii_case(n));
    let gemm = has("m") && has("n") && has("k");
    candidates
        .iter()
        .filter_map(|v| {
            let c = counts(v, gemm)?;
            let at_bench = bench.iter().find(|(n, _)| n == v)?.1;
            (at_bench > c.decode()).then(|| ServedGuess {
                var: v.clone(),
                counts: c,
                decode: c.decode(),
                bench: at_bench,
            })
        })
        .min_by_key(|g| g.counts)
}

/// The most threads a block holds.
const MAX_BLOCK: i64 = 1024;

fn value_of(b: &Binding, name: &str) -> i64 {
    b.iter().find(|(n, _)| n == name).map(|(_, v)| *v).unwrap_or(0)
}

fn set(b: &mut Binding, name: &str, v: i64) {
    if let Some(x) = b.iter_mut().find(|(n, _)| n == name) {
        x.1 = v;
    }
}

/// Halves the largest dimension of a check size until its largest buffer holds at most
/// [`budget::MAX_CHECK_ELEMENTS`].
fn fit_check(mut c: Binding, dims: &[&str], b: &Buffers) -> Binding {
    for _ in 0..256 {
        // A length that does not evaluate has overflowed: too large.
        if b.largest(&c).is_some_and(|n| n <= budget::MAX_CHECK_ELEMENTS) {
            break;
        }
        let Some(d) = dims.iter().filter(|d| value_of(&c, d) > 1).max_by_key(|d| value_of(&c, d)) else { break };
        let v = halved(value_of(&c, d));
        set(&mut c, d, v);
    }
    c
}

/// Scales the bench size: the largest dimension halved while the buffers exceed
/// [`budget::MAX_BENCH_BYTES`] (or overflow) or the traffic takes over eight times
/// [`budget::MIN_BENCH_SECONDS`], then the first dimension that neither the names fix nor
/// a block size caps (else the first that is no block size) doubled until the least
/// traffic takes twice [`budget::MIN_BENCH_SECONDS`]. Says what it gives.
fn fit_bench(bench: &mut Binding, dims: &[&str], blocks: &[&str], b: &Buffers) -> String {
    for _ in 0..256 {
        if b.held(bench).is_some_and(|h| h <= budget::MAX_BENCH_BYTES) {
            break;
        }
        let Some(d) = dims.iter().filter(|d| value_of(bench, d) > 1).max_by_key(|d| value_of(bench, d)) else {
            break;
        };
        let v = value_of(bench, d) / 2;
        set(bench, d, v);
    }
    let target = 2.0 * budget::MIN_BENCH_SECONDS * budget::ASSUMED_BANDWIDTH;
    // Far longer than needed slows every timing of the search: halve the largest
    // dimension while the traffic stays over four times the target.
    for _ in 0..64 {
        let Some(d) = dims.iter().filter(|d| value_of(bench, d) > 1).max_by_key(|d| value_of(bench, d)) else { break };
        let mut next = bench.clone();
        set(&mut next, d, value_of(bench, d) / 2);
        if b.moved(&next).is_none_or(|m| (m as f64) < 2.0 * target)
            || b.moved(bench).is_none_or(|m| (m as f64) <= 4.0 * target)
        {
            break;
        }
        *bench = next;
    }
    let free: Vec<&str> = dims.iter().filter(|d| !blocks.contains(d)).copied().collect();
    let scaled = free.iter().find(|d| !named_bench(d, dims.len()).1).or(free.first()).copied();
    if let Some(d) = scaled {
        for _ in 0..40 {
            let Some(moved) = b.moved(bench) else { break };
            if moved as f64 >= target || value_of(bench, d) >= 1 << 30 {
                break;
            }
            let mut next = bench.clone();
            set(&mut next, d, value_of(bench, d) * 2);
            if b.held(&next).is_none_or(|h| h > budget::MAX_BENCH_BYTES) {
                break;
            }
            *bench = next;
        }
    }
    match (b.moved(bench), b.held(bench)) {
        (Some(moved), Some(held)) => format!(
            "least traffic {:.0} MB, about {:.0} us at {:.1} TB/s (an H100's; `nightshift check-env` measures your GPU's); buffers {:.0} MB",
            moved as f64 / 1e6,
            moved as f64 / budget::ASSUMED_BANDWIDTH * 1e6,
            budget::ASSUMED_BANDWIDTH / 1e12,
            held as f64 / 1e6
        ),
        _ => "the lengths do not evaluate at the bench size".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(names: &[&str]) -> Vec<(String, IntegerKind)> {
        names.iter().map(|n| (n.to_string(), IntegerKind::Dimension)).collect()
    }

    #[test]
    fn a_bench_is_scaled_to_its_traffic_and_checks_to_a_few_million_elements() {
        let lengths = [("rows * cols".to_string(), 4), ("rows * cols".to_string(), 4)];
        let traffic = ["4 * (rows * cols)".to_string(), "4 * (rows * cols)".to_string()];
        let p = propose(&kinds(&["rows", "cols"]), Some(&Buffers { lengths: &lengths, traffic: &traffic }));
        // 4096 x 4096 fp32 in and out is 134 MB, under the 300 MB that take 100 us: rows
        // doubles twice, to 537 MB (179 us).
        assert_eq!(p.bench, [("rows".to_string(), 16384), ("cols".to_string(), 4096)]);
        assert!(p.bench_note.starts_with("least traffic 537 MB, about 179 us"), "{}", p.bench_note);
        for c in &p.checks {
            assert!(value_of(c, "rows") * value_of(c, "cols") <= 4 << 20, "{c:?}");
        }
    }

    #[test]
    fn a_bench_that_would_not_fit_is_halved_and_a_five_dimension_check_is_cut() {
        let five = ["batch", "seqlen", "max_blocks", "block_size", "heads"];
        let lengths = [("batch * seqlen * max_blocks * block_size * heads * 128".to_string(), 2)];
        let traffic = ["2 * (batch * seqlen * max_blocks * block_size * heads * 128)".to_string()];
        let p = propose(&kinds(&five), Some(&Buffers { lengths: &lengths, traffic: &traffic }));
        let b = Buffers { lengths: &lengths, traffic: &traffic };
        assert!(b.held(&p.bench).unwrap() <= budget::MAX_BENCH_BYTES, "{:?}", p.bench);
        for c in &p.checks {
            assert!(b.largest(c).unwrap() <= budget::MAX_CHECK_ELEMENTS, "{c:?}");
            // Still awkward: odd values stay odd, multiples of 8 stay multiples.
            assert!(c.iter().all(|(_, v)| *v == 1 || v % 2 == 1 || v % 8 == 0), "{c:?}");
        }
    }

    #[test]
    fn flags_take_both_values_in_pairs_and_fixed_widths_hold() {
        let vars = vec![
            ("n".to_string(), IntegerKind::Dimension),
            ("width".to_string(), IntegerKind::Fixed(4)),
            ("silu".to_string(), IntegerKind::Flag(vec![0, 1])),
            ("causal".to_string(), IntegerKind::Flag(vec![0, 1])),
        ];
        let p = propose(&vars, None);
        assert_eq!(value_of(&p.bench, "silu"), 1);
        let pairs: Vec<(i64, i64)> = p.checks.iter().map(|c| (value_of(c, "silu"), value_of(c, "causal"))).collect();
        assert_eq!(pairs, [(0, 0), (1, 0), (0, 1), (1, 1)]);
        assert!(p.checks.iter().all(|c| value_of(c, "width") == 4));
        assert!(p.bench_note.contains("not all known"));
    }

    /// From a review: a block size stays at most 1024 and is never the scaled size; a
    /// size compared with 64 and 128 takes those; a length that overflows at the named
    /// values is halved until it fits; halving always makes a value smaller.
    #[test]
    fn block_sizes_compared_values_and_overflow() {
        let vars = vec![
            ("rows".to_string(), IntegerKind::Dimension),
            ("cols".to_string(), IntegerKind::Block),
            ("head_dim".to_string(), IntegerKind::Flag(vec![64, 128])),
        ];
        let lengths = [("rows * cols * head_dim".to_string(), 4)];
        let traffic = ["4 * (rows * cols * head_dim)".to_string()];
        let p = propose(&vars, Some(&Buffers { lengths: &lengths, traffic: &traffic }));
        assert!(value_of(&p.bench, "cols") <= 1024, "{:?}", p.bench);
        assert_eq!(value_of(&p.bench, "head_dim"), 128);
        let dims: Vec<i64> = p.checks.iter().map(|c| value_of(c, "head_dim")).collect();
        assert_eq!(dims, [64, 128, 64, 128]);

        let cube = [("n * n * n * n * n * n".to_string(), 4)];
        let traffic = ["8 * (n * n * n * n * n * n)".to_string()];
        let b = Buffers { lengths: &cube, traffic: &traffic };
        let p = propose(&kinds(&["n"]), Some(&b));
        assert!(b.held(&p.bench).is_some_and(|h| h <= budget::MAX_BENCH_BYTES), "{:?}", p.bench);
        for v in 2..300 {
            assert!(halved(v) < v && halved(v) >= 1, "{v}");
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn at(v: &[(&str, i64)]) -> Binding {
        v.iter().map(|(n, x)| (n.to_string(), *x)).collect()
    }

    #[test]
    fn names_that_count_tokens_rows_or_a_batch() {
        for n in ["tokens", "num_tokens", "n_tokens", "ntokens", "NUM_TOKENS"] {
            assert_eq!(counts(n, false), Some(Counts::Tokens), "{n}");
        }
        for n in ["seq", "seq_len", "seqlen", "SeqLen"] {
            assert_eq!(counts(n, false), Some(Counts::Sequence), "{n}");
        }
        for n in ["rows", "num_rows", "n_rows", "nrows"] {
            assert_eq!(counts(n, false), Some(Counts::Rows), "{n}");
        }
        for n in ["batch", "batch_size", "bs", "BS", "num_seqs"] {
            assert_eq!(counts(n, false), Some(Counts::Batch), "{n}");
        }
        // M only in GEMM naming; a GEMV's M is its output rows.
        assert_eq!(counts("M", true), Some(Counts::Rows));
        assert_eq!(counts("m", false), None);
        for n in ["n", "hidden", "cols", "dim", "heads", "head_dim", "k", "t", "step", "numel", "tokens_per_expert"] {
            assert_eq!(counts(n, true), None, "{n}");
        }
    }

    #[test]
    fn the_most_token_like_name_is_varied_and_only_above_its_decode_size() {
        let vars = names(&["batch", "seqlen", "dim"]);
        let g = served(&vars, &vars, &at(&[("batch", 8), ("seqlen", 4096), ("dim", 128)])).unwrap();
        assert_eq!((g.var.as_str(), g.counts, g.decode, g.bench), ("seqlen", Counts::Sequence, 8, 4096));
        // A sequence already at its decode size: the batch is varied instead, down to 1.
        let g = served(&vars, &vars, &at(&[("batch", 8), ("seqlen", 8), ("dim", 128)])).unwrap();
        assert_eq!((g.var.as_str(), g.decode, g.bench), ("batch", 1, 8));
        assert_eq!(served(&vars, &vars, &at(&[("batch", 1), ("seqlen", 8), ("dim", 128)])), None);
        // Only the candidates are varied (the draft leaves out serial extents and flags).
        let g = served(&names(&["batch"]), &vars, &at(&[("batch", 8), ("seqlen", 4096), ("dim", 128)])).unwrap();
        assert_eq!(g.var, "batch");
        // GEMM naming makes M the rows; a GEMV's M x K does not.
        let gemm = names(&["M", "N", "K"]);
        let g = served(&gemm, &gemm, &at(&[("M", 65536), ("N", 1024), ("K", 1024)])).unwrap();
        assert_eq!((g.var.as_str(), g.decode), ("M", 8));
        let gemv = names(&["M", "K"]);
        assert_eq!(served(&gemv, &gemv, &at(&[("M", 32768), ("K", 4096)])), None);
        assert_eq!(served(&names(&["n"]), &names(&["n"]), &at(&[("n", 1 << 24)])), None);
    }

    use proptest::prelude::*;

    proptest! {
        /// Whatever the lengths, the bench holds at most the cap and every check buffer
        /// at most a few million elements, unless every size is already 1; nothing
        /// panics, overflowing lengths included.
        #[test]
        fn proposals_stay_inside_the_limits(
            ndims in 1usize..6,
            picks in proptest::collection::vec((proptest::collection::vec(any::<bool>(), 6), 1i64..(1 << 20)), 1..4),
        ) {
            let names = ["a", "b", "c", "d", "e", "f"];
            let vars: Vec<(String, IntegerKind)> =
                names[..ndims].iter().map(|n| (n.to_string(), IntegerKind::Dimension)).collect();
            let lengths: Vec<(String, usize)> = picks
                .iter()
                .map(|(uses, k)| {
                    let mut terms: Vec<String> =
                        names[..ndims].iter().zip(uses).filter(|(_, u)| **u).map(|(n, _)| n.to_string()).collect();
                    terms.push(k.to_string());
                    (terms.join(" * "), 4)
                })
                .collect();
            let traffic: Vec<String> = lengths.iter().map(|(l, b)| format!("{b} * ({l})")).collect();
            let buffers = Buffers { lengths: &lengths, traffic: &traffic };
            let p = propose(&vars, Some(&buffers));
            let all_ones = |b: &Binding| b.iter().all(|(_, v)| *v == 1);
            prop_assert!(all_ones(&p.bench) || buffers.held(&p.bench).is_some_and(|h| h <= budget::MAX_BENCH_BYTES), "{:?}", p.bench);
            for c in &p.checks {
                prop_assert!(all_ones(c) || buffers.largest(c).is_some_and(|n| n <= budget::MAX_CHECK_ELEMENTS), "{:?}", c);
            }
        }
    }
}
