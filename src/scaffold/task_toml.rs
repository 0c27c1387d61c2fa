//! Writing a first task.toml from a launcher signature: every pointer an input, an output
//! or both (from how the kernels use it), every integer what its uses make it (a size
//! variable, a flag the check sizes take at 0 and 1, a filter's width held at one value, a
//! value such as a step count), lengths from the kernels' own indexing (else from the
//! names, marked as guesses), proposed sizes, and a comment wherever a value is a guess.
//! What cannot be guessed is written as `TODO` (which validation rejects); both are listed
//! for the user, with their lines.

use super::signature::{Entry, Param, ParamKind};
use super::sizes::{self, Buffers, IntegerKind};
use rewrite::extent::{
    Extent, PointerExtent, PointerStores, PointerUse, ScalarRole, ScalarUse, Stored, TableRange, Use,
};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// What kind of work a [`Todo`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TodoKind {
    /// A field written as "TODO": validation fails until it is filled in.
    FillIn,
    /// A value init guessed (a length from a parameter's name): it loads, but nothing in
    /// the code confirmed it.
    ConfirmGuess,
    /// A quoted include init could not copy into the task.
    MissingInclude,
}

/// Something left for the user, at a line of a file.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Todo {
    pub kind: TodoKind,
    pub file: PathBuf,
    pub line: usize,
    /// The task.toml field, as `arg `x`.len`; empty for an include.
    pub field: String,
    pub what: String,
}

/// Where a pointer's length came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LengthSource {
    /// The kernels' indexing: the largest index they reach, plus one.
    Indexing,
    /// The parameter names: a guess.
    Name,
    /// Neither: left as "TODO".
    Unknown,
}

/// One pointer argument's length, as written, with where it came from.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Length {
    pub arg: String,
    pub len: Option<String>,
    pub from: LengthSource,
    /// The access it was read from, or why the guess and what the indexing did not tell.
    pub evidence: String,
    /// Bytes per element.
    pub elem_bytes: usize,
}

pub struct Draft {
    pub text: String,
    pub todos: Vec<Todo>,
    pub lengths: Vec<Length>,
}

/// The words of a name: `exp_avg_sq` is `exp`, `avg`, `sq`.
fn name_words(name: &str) -> Vec<&str> {
    name.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect()
}

/// A float scalar's value from its name (lower case): what such a hyper-parameter
/// usually is, so that the draft runs the kernel where production does (a beta of 1
/// makes Adam's bias correction divide by zero).
fn float_value(name: &str) -> (&'static str, &'static str) {
    let words = name_words(name);
    let word = |w: &str| words.contains(&w);
    let joined = name.replace('_', "");
    if words.iter().any(|w| w.starts_with("eps")) || name.ends_with("eps") {
        ("1e-5", "an epsilon")
    } else if joined.contains("beta2") || word("b2") {
        ("0.999", "Adam's second-moment decay")
    } else if name.contains("beta") || word("b1") || name.contains("momentum") {
        ("0.9", "a decay below 1")
    } else if word("lr") || name.contains("learning_rate") {
        ("1e-3", "a learning rate")
    } else if name.contains("weight_decay") || word("wd") {
        ("0.01", "a weight decay")
    } else if name.contains("dropout") || name.contains("prob") {
        ("0.1", "a probability")
    } else {
        ("1.0", "no name it knows")
    }
}

/// Whether an array's name (lower case) says its values are never negative: a sum of
/// squares, a second moment, a variance.
fn non_negative(name: &str) -> bool {
    let words = name_words(name);
    words.iter().any(|w| matches!(*w, "sq" | "sqr" | "sumsq" | "var" | "variance"))
        || name.contains("exp_avg_sq")
        || name.contains("second_moment")
}

/// Names only a filter's or a window's width takes: an extent the kernel supports at a
/// few values, not a problem size.
fn filter_width_name(name: &str) -> bool {
    let words = name_words(name);
    let word = |w: &str| words.contains(&w);
    word("ksize")
        || word("taps")
        || word("radius")
        || word("window")
        || name.contains("kernel_size")
        || name.contains("filter")
}

/// Names a filter's width shares with other sizes (an image's `width`): a filter's only
/// where a weight-like array's length counts on it.
fn ambiguous_width_name(name: &str) -> bool {
    let words = name_words(name);
    words.iter().any(|w| matches!(*w, "width" | "kw" | "kh"))
}

/// Names of a filter's weights.
fn weight_name(name: &str) -> bool {
    name_words(name).iter().any(|w| {
        matches!(*w, "w" | "weight" | "weights" | "filter" | "filters" | "kernel" | "taps" | "coef" | "coeffs")
    })
}

/// The value a range of index-table values is held at: rows enough that ids spread.
const TABLE_RANGE: i64 = 1024;

/// What the integer `name` is, from what the kernels do with it (`uses`; None when the
/// walk did not reach the launcher) and the pointers' extents (a filter's weights are
/// sized by its width).
fn integer_kind(name: &str, uses: Option<&ScalarUse>, extents: &[PointerExtent]) -> IntegerKind {
    let lower = lower(name);
    let sizes_weights = || {
        extents.iter().any(|e| {
            weight_name(&e.name.to_ascii_lowercase())
                && matches!(&e.extent, Extent::Derived { len, .. } if len.variables().contains(name))
        })
    };
    // The range of an index table's values that the launcher takes and uses for nothing
    // else (`max_pos`): held at one value, so the table's ids can be drawn below it.
    if extents.iter().any(|e| e.values_below == Some(TableRange::Param(name.to_string()))) {
        return IntegerKind::Fixed(TABLE_RANGE);
    }
    match uses.map(|u| (u.role(), u)) {
        Some((ScalarRole::Flag, u)) => {
            // Compared with constants past 0 and 1 (`head_dim == 64`, `mode == 2`): those
            // values; only tested for truth: 0 and 1.
            let values: Vec<i64> = u.compared_with.iter().copied().collect();
            if values.iter().all(|v| (0..=1).contains(v)) {
                IntegerKind::Flag(vec![0, 1])
            } else {
                IntegerKind::Flag(values)
            }
        }
        Some((ScalarRole::SerialExtent, _))
            if filter_width_name(&lower) || (ambiguous_width_name(&lower) && sizes_weights()) =>
        {
            IntegerKind::Fixed(if name_words(&lower).contains(&"radius") { 1 } else { 4 })
        }
        Some((ScalarRole::Value, _)) => {
            let words = name_words(&lower);
            if words.iter().any(|w| matches!(*w, "step" | "steps" | "t" | "iter" | "iteration" | "epoch")) {
                IntegerKind::Value(10, "a step count (> 0)")
            } else if words.contains(&"seed") {
                IntegerKind::Value(1234, "a seed")
            } else {
                IntegerKind::Value(1, "no name it knows")
            }
        }
        Some((_, u)) if u.block.is_some() => IntegerKind::Block,
        _ => IntegerKind::Dimension,
    }
}

/// Whether an array's name (lower case) says it holds reciprocal standard deviations
/// (`rstd`, `inv_std`, `inv_rms`): positive, around 1.
fn reciprocal_scale(name: &str) -> bool {
    let words = name_words(name);
    words.iter().any(|w| matches!(*w, "rstd" | "invstd" | "rsigma" | "rrms"))
        || name.contains("inv_std")
        || name.contains("inv_rms")
}

/// Whether an array's name (lower case) says it holds probabilities.
fn probability(name: &str) -> bool {
    name_words(name).iter().any(|w| matches!(*w, "prob" | "probs" | "probabilities" | "probability"))
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

/// Names that hold one value per element of the last dimension (a row's worth).
/// (Single letters such as `b` are left out: in `a, b, c` they are operands, not vectors.)
const PER_COLUMN: &[&str] = &["bias", "gamma", "beta", "weight", "scale", "shift", "inv_freq", "freqs"];
/// Names of the element count of a flat array.
const COUNT: &[&str] = &["n", "numel", "size", "count", "len", "length", "num", "total", "n_elements", "num_elements"];

/// The length of each pointer, when the names make it obvious, with why.
fn infer_len(p: &Param, sizes: &[String]) -> Option<(String, &'static str)> {
    let name = lower(&p.name);
    match sizes {
        [only] => return Some((only.clone(), "the only size parameter")),
        [] => return None,
        _ => {}
    }
    let lowered: Vec<String> = sizes.iter().map(|s| lower(s)).collect();
    let has = |n: &str| lowered.iter().position(|s| s == n).map(|i| sizes[i].clone());
    // A GEMM: M, N, K with A (M x K), B (K x N) and C/D/out (M x N).
    if let (Some(m), Some(n), Some(k)) = (has("m"), has("n"), has("k")) {
        return match name.as_str() {
            "a" => Some((format!("{m} * {k}"), "GEMM naming: A is M x K")),
            "b" => Some((format!("{k} * {n}"), "GEMM naming: B is K x N")),
            "c" | "d" | "out" | "y" => Some((format!("{m} * {n}"), "GEMM naming: C is M x N")),
            "bias" => Some((n, "GEMM naming: one bias per output column")),
            _ => None,
        };
    }
    // A flat count among other sizes.
    if let Some(n) = COUNT.iter().find_map(|c| has(c)) {
        if sizes.len() == 2 && PER_COLUMN.contains(&name.as_str()) {
            let other = sizes.iter().find(|s| **s != n).cloned()?;
            return Some((other, "a per-column vector named like a bias or weight"));
        }
        return Some((n, "named like an element count"));
    }
    // Two dimensions: matrices are their product, per-column vectors the last one.
    if sizes.len() == 2 {
        let (rows, cols) = (&sizes[0], &sizes[1]);
        if PER_COLUMN.contains(&name.as_str()) {
            return Some((
                cols.clone(),
                "a per-column vector named like a bias or weight; the last size is the row length",
            ));
        }
        return Some((format!("{rows} * {cols}"), "a matrix over both sizes"));
    }
    None
}

/// A tolerance as task.toml writes it: `0.0`, or one significant digit and an exponent.
fn tol(x: f64) -> String {
    if x == 0.0 {
        "0.0".to_string()
    } else {
        format!("{x:e}")
    }
}

/// A float sum of `n` terms, any order of its additions admitted on top of the type's
/// `rtol` and `atol`: 4u sqrt(n) relative and 4u n absolute (inputs at unit scale, fp32
/// accumulation), rounded up to one significant digit. A serial sum's rounding error has
/// a spread of about 0.4u n at unit scale; a check compares hundreds of thousands of sums,
/// and at 4096 terms an H200 saw 2u n between a serial and a warp-tree order (u n
/// rejected it).
fn summed_tolerance(rtol: f64, atol: f64, n: i64) -> (f64, f64) {
    let u = (2.0f64).powi(-24);
    let up = |x: f64| {
        let exponent = x.log10().floor() as i32;
        let digit = (x / 10f64.powi(exponent)).ceil();
        format!("{digit}e{exponent}").parse().unwrap_or(x)
    };
    (up(rtol.max(4.0 * u * (n as f64).sqrt())), up(atol.max(4.0 * u * n as f64)))
}

fn tolerance_for(elem: &str) -> (f64, f64, &'static str) {
    match elem {
        "__nv_bfloat16" | "nv_bfloat16" => (2e-2, 2e-2, "bf16 keeps 8 mantissa bits: about 4e-3 relative per rounding"),
        "half" | "__half" => (2e-3, 2e-3, "fp16 keeps 11 mantissa bits: about 5e-4 relative per rounding"),
        "__nv_fp8_e4m3" => (
            0.125,
            2e-3,
            "fp8 e4m3 keeps 3 mantissa bits: a step is 12.5% of a value at the bottom of a binade (6.7% at the top), the smallest 2^-9",
        ),
        "__nv_fp8_e5m2" => (
            0.25,
            2e-5,
            "fp8 e5m2 keeps 2 mantissa bits: a step is 25% of a value at the bottom of a binade (14% at the top), the smallest 2^-16",
        ),
        "double" => (1e-12, 1e-12, "fp64"),
        "float" => (1e-5, 1e-6, "fp32 with a different summation order"),
        _ => (0.0, 0.0, "integers must match exactly"),
    }
}

fn elem_bytes(elem: &str) -> usize {
    crate::task::types::ParamType::parse(&format!("{elem}*"))
        .ok()
        .and_then(|t| match t {
            crate::task::types::ParamType::Pointer { elem, .. } => Some(elem.size()),
            _ => None,
        })
        .unwrap_or(4)
}

/// An access as quoted in a comment: one line, at most 60 characters.
fn shortened(access: &str) -> String {
    rewrite::syntax::one_line(access, 60)
}

fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// What reading the kernels the launcher starts said about its parameters.
#[derive(Clone, Copy)]
pub struct KernelReading<'a> {
    /// Each pointer's length, from the indexing.
    pub extents: &'a [PointerExtent],
    /// Whether each pointer is read, written, or both, and in which order.
    pub uses: &'a [PointerUse],
    /// What each integer does: sizes the work, selects behaviour, or is a value.
    pub scalars: &'a [ScalarUse],
    /// What is stored through each pointer: copies, sums, or other values.
    pub stores: &'a [PointerStores],
}

/// Renders the task.toml (to be written at `toml_path`) for `entry` of `baseline` (a file
/// name in the task directory), with what reading the kernels found (`read`).
pub fn draft(
    task_name: &str,
    entry: &Entry,
    baseline: &str,
    include_dir: bool,
    read: &KernelReading,
    toml_path: &Path,
) -> Draft {
    let KernelReading { extents, uses, scalars, stores } = *read;
    let integers: Vec<(String, IntegerKind)> = entry
        .params
        .iter()
        .filter(|p| p.kind == ParamKind::Integer)
        .map(|p| (p.name.clone(), integer_kind(&p.name, scalars.iter().find(|u| u.name == p.name), extents)))
        .collect();
    let sizes: Vec<String> =
        integers.iter().filter(|(_, k)| !matches!(k, IntegerKind::Value(..))).map(|(n, _)| n.clone()).collect();
    let dimensions: Vec<String> =
        integers.iter().filter(|(_, k)| *k == IntegerKind::Dimension).map(|(n, _)| n.clone()).collect();
    let start = |proposal: Option<sizes::Proposal>| Drafting {
        t: String::new(),
        todos: Vec::new(),
        lengths: Vec::new(),
        output_elems: Vec::new(),
        bytes_terms: Vec::new(),
        toml_path,
        baseline,
        sizes: sizes.clone(),
        dimensions: dimensions.clone(),
        integers: integers.clone(),
        stores,
        extents,
        scalars,
        proposal,
    };
    // The sizes follow from the lengths, and a sum's tolerance from the sizes: a first
    // pass finds the lengths, the second writes with the sizes known.
    let mut first = start(None);
    for p in &entry.params {
        first.arg(p, extents, uses, scalars);
    }
    let mut w = start(Some(first.proposal()));
    w.task_table(task_name, entry);
    for p in &entry.params {
        w.arg(p, extents, uses, scalars);
    }
    w.sizes_table();
    w.check_table();
    w.roofline_table();
    if include_dir {
        w.build_table();
    }
    Draft { text: w.t, todos: w.todos, lengths: w.lengths }
}

/// A task.toml being written: the text so far and what it left for the user.
struct Drafting<'a> {
    t: String,
    todos: Vec<Todo>,
    lengths: Vec<Length>,
    output_elems: Vec<String>,
    /// Each pointer's bytes, for the roofline's least traffic.
    bytes_terms: Vec<String>,
    toml_path: &'a Path,
    baseline: &'a str,
    /// The size variables: the launcher's integer parameters less the values.
    sizes: Vec<String>,
    /// The size variables that take sizes (not flags, not fixed widths): what the names
    /// and the proposed sizes are about.
    dimensions: Vec<String>,
    /// Every integer parameter and what it is.
    integers: Vec<(String, IntegerKind)>,
    /// What the kernels store through each pointer.
    stores: &'a [PointerStores],
    /// Each pointer's extent, with the index tables it counts on.
    extents: &'a [PointerExtent],
    /// What the kernels do with each integer.
    scalars: &'a [ScalarUse],
    /// The sizes, once the lengths are known (the second pass).
    proposal: Option<sizes::Proposal>,
}

impl Drafting<'_> {
    /// The line the next write lands on.
    fn line(&self) -> usize {
        self.t.lines().count() + 1
    }

    fn todo(&mut self, kind: TodoKind, field: String, what: String) {
        let line = self.line();
        self.todos.push(Todo { kind, file: self.toml_path.to_path_buf(), line, field, what });
    }

    fn task_table(&mut self, task_name: &str, entry: &Entry) {
        let (t, baseline) = (&mut self.t, self.baseline);
        let _ = writeln!(
            t,
            "# Written by `nightshift init` from {baseline}:{} ({}). Every guess says so;",
            entry.line, entry.name
        );
        let _ = writeln!(t, "# Run `nightshift validate` on this folder after editing.");
        let _ = writeln!(t, "[task]");
        let _ = writeln!(t, "name = {}", toml_str(task_name));
        let _ = writeln!(t, "summary = \"\"   # one line: what the kernel computes");
        let _ = writeln!(t, "entry = {}", toml_str(&entry.name));
        let _ = writeln!(t, "baseline = {}", toml_str(baseline));
        let _ = writeln!(t, "# reference = \"reference.cu\"");
        let _ = writeln!(t, "# With no reference, candidates are checked against the baseline itself: a candidate is");
        let _ = writeln!(t, "# then only as right as the code it replaces. A separate, simple, trusted reference (one");
        let _ = writeln!(t, "# thread per output, fp32 or fp64 accumulation) catches errors the baseline shares.");
    }

    fn arg(&mut self, p: &Param, extents: &[PointerExtent], uses: &[PointerUse], scalars: &[ScalarUse]) {
        let _ = writeln!(self.t, "\n[[arg]]");
        let _ = writeln!(self.t, "name = {}", toml_str(&p.name));
        let _ = writeln!(self.t, "type = {}", toml_str(&p.spelling));
        match &p.kind {
            ParamKind::Pointer { elem, constant } => {
                let extent = extents.iter().find(|e| e.name == p.name);
                self.pointer_len(p, elem, extent.map(|e| &e.extent), extent.map_or(&[][..], |e| &e.through));
                let used = uses.iter().find(|u| u.name == p.name);
                if *constant {
                    self.input_init(p, elem);
                    let _ = writeln!(self.t, "# input: declared const, so the kernel must leave it unchanged");
                } else if let Some(u) = used.filter(|u| !u.written_first && (u.read.is_some() || u.unknown.is_some())) {
                    self.in_place(p, elem, u);
                } else {
                    self.output(p, elem, used);
                }
            }
            ParamKind::Integer => self.integer(p, scalars.iter().find(|u| u.name == p.name)),
            ParamKind::Float => {
                let (v, why) = float_value(&lower(&p.name));
                self.todo(
                    TodoKind::ConfirmGuess,
                    format!("arg `{}`.value", p.name),
                    format!("{v} is a GUESS ({why}): set the value production uses"),
                );
                let _ = writeln!(self.t, "value = {v}   # GUESSED ({why}): set the value production uses");
            }
            ParamKind::Stream => {}
        }
    }

    /// An integer parameter: a size variable, a flag, a fixed width or a value, with the
    /// use that says so.
    fn integer(&mut self, p: &Param, used: Option<&ScalarUse>) {
        let baseline = self.baseline;
        let evidence = used
            .and_then(|u| u.evidence())
            .map(|e| format!("`{}` ({baseline}:{})", shortened(&e.access), e.line))
            .unwrap_or_default();
        let kind = self.integers.iter().find(|(n, _)| *n == p.name).map(|(_, k)| k.clone());
        // The index tables whose values this integer is the range of.
        let ranged_tables: Vec<String> = self
            .extents
            .iter()
            .filter(|e| e.values_below == Some(TableRange::Param(p.name.clone())))
            .map(|e| format!("`{}`", e.name))
            .collect();
        match kind {
            Some(IntegerKind::Flag(values)) if values == [0, 1] => {
                let _ = writeln!(
                    self.t,
                    "# a flag: only tested, {evidence}; the check sizes take it at 0 and at 1, the bench at 1"
                );
            }
            Some(IntegerKind::Flag(values)) => {
                let listed: Vec<String> = values.iter().map(i64::to_string).collect();
                let largest = values.iter().max().copied().unwrap_or(0);
                self.todo(
                    TodoKind::ConfirmGuess,
                    format!("arg `{}`", p.name),
                    format!(
                        "takes only the values the code compares it with ({}), a GUESS: the check sizes take each in turn, the bench {largest}; set the values production uses in [sizes]",
                        listed.join(", ")
                    ),
                );
                let _ = writeln!(
                    self.t,
                    "# compared with constants only, {evidence}: the check sizes take {} in turn, the bench {largest} (GUESSED)",
                    listed.join(", ")
                );
            }
            Some(IntegerKind::Fixed(v)) if !ranged_tables.is_empty() => {
                let tables = ranged_tables;
                self.todo(
                    TodoKind::ConfirmGuess,
                    format!("arg `{}`", p.name),
                    format!(
                        "held at {v} at every size, a GUESS: the range of {}'s values, which the launcher uses for nothing else; set the range production uses in [sizes]",
                        tables.join(" and ")
                    ),
                );
                let _ = writeln!(
                    self.t,
                    "# the range of {}'s values (the launcher uses it for nothing else): held at {v} at every size (GUESSED)",
                    tables.join(" and ")
                );
            }
            Some(IntegerKind::Fixed(v)) => {
                self.todo(
                    TodoKind::ConfirmGuess,
                    format!("arg `{}`", p.name),
                    format!(
                        "held at {v} at every size, a GUESS: a filter's width that bounds serial loops only ({evidence}); set the widths production uses in [sizes]"
                    ),
                );
                let _ = writeln!(
                    self.t,
                    "# a filter's width: bounds serial loops only, {evidence}; held at {v} at every size (GUESSED)"
                );
            }
            Some(IntegerKind::Value(v, why)) => {
                self.todo(
                    TodoKind::ConfirmGuess,
                    format!("arg `{}`.value", p.name),
                    format!("{v} is a GUESS ({why}): set the value production uses"),
                );
                let _ = writeln!(
                    self.t,
                    "value = {v}   # GUESSED ({why}); used only in arithmetic, {evidence}, so no size variable"
                );
            }
            _ => match used.map(|u| (u.role(), u)) {
                Some((ScalarRole::Dimension | ScalarRole::SerialExtent, _)) => {
                    let _ = writeln!(self.t, "# a size variable: takes its value from [sizes]; it sizes {evidence}");
                }
                Some((ScalarRole::Unused, _)) => {
                    let _ = writeln!(
                        self.t,
                        "# a size variable: takes its value from [sizes] (the kernels read do not use it)"
                    );
                }
                Some((_, ScalarUse { unknown: Some(why), .. })) => {
                    let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
                    let _ = writeln!(
                        self.t,
                        "# a size variable: takes its value from [sizes] (its use was not followed: {why})"
                    );
                }
                _ => {
                    let _ = writeln!(self.t, "# a size variable: takes its value from [sizes]");
                }
            },
        }
    }

    /// A pointer's `len`: from the kernels' indexing, else guessed from the names, else
    /// left as TODO.
    fn pointer_len(&mut self, p: &Param, elem: &str, extent: Option<&Extent>, through: &[String]) {
        let baseline = self.baseline;
        let indexing_said = match extent {
            Some(Extent::Unknown { why }) => format!("in {baseline}, {why}"),
            Some(Extent::Derived { .. }) => String::new(),
            None => "the launcher was not found by the CUDA parser".to_string(),
        };
        match (extent, infer_len(p, &self.dimensions)) {
            (Some(Extent::Derived { len, access, line: at }), _) => {
                let len = len.render(&self.sizes);
                let mut evidence = format!("`{}` ({baseline}:{at})", shortened(access));
                for table in through {
                    let below =
                        match self.extents.iter().find(|e| e.name == *table).and_then(|e| e.values_below.clone()) {
                            Some(TableRange::Param(p)) => p,
                            _ => "its length".to_string(),
                        };
                    evidence.push_str(&format!(", with the values of `{table}` below {below}"));
                }
                let _ = writeln!(self.t, "len = {}   # from the kernel's indexing: {evidence}", toml_str(&len));
                self.bytes_terms.push(format!("{} * ({len})", elem_bytes(elem)));
                self.lengths.push(Length {
                    arg: p.name.clone(),
                    len: Some(len),
                    from: LengthSource::Indexing,
                    evidence,
                    elem_bytes: elem_bytes(elem),
                });
            }
            (_, Some((len, why))) => {
                self.todo(
                    TodoKind::ConfirmGuess,
                    format!("arg `{}`.len", p.name),
                    format!(
                        "`{len}` is a GUESS from the names ({why}); the kernel's indexing did not tell ({indexing_said}): check it"
                    ),
                );
                let _ = writeln!(self.t, "len = {}   # GUESSED: {why}; check it", toml_str(&len));
                self.bytes_terms.push(format!("{} * ({len})", elem_bytes(elem)));
                self.lengths.push(Length {
                    arg: p.name.clone(),
                    len: Some(len),
                    from: LengthSource::Name,
                    evidence: format!("{why}; the indexing did not tell: {indexing_said}"),
                    elem_bytes: elem_bytes(elem),
                });
            }
            (_, None) => {
                let over = if self.sizes.is_empty() {
                    "the size variables (add an integer parameter)".to_string()
                } else {
                    self.sizes.join(", ")
                };
                self.todo(
                    TodoKind::FillIn,
                    format!("arg `{}`.len", p.name),
                    format!(
                        "the element count of `{}` as an expression over {over} (the indexing did not tell: {indexing_said})",
                        p.name
                    ),
                );
                let _ = writeln!(
                    self.t,
                    "len = \"TODO\"   # elements of {}: an expression over {}",
                    p.name,
                    self.sizes.join(", ")
                );
                self.lengths.push(Length {
                    arg: p.name.clone(),
                    len: None,
                    from: LengthSource::Unknown,
                    evidence: indexing_said,
                    elem_bytes: elem_bytes(elem),
                });
            }
        }
    }

    /// A const pointer is an input: how to fill it (indices need their bound).
    fn input_init(&mut self, p: &Param, elem: &str) {
        let indexed: Vec<String> =
            self.extents.iter().filter(|e| e.through.contains(&p.name)).map(|e| format!("`{}`", e.name)).collect();
        let below = self.extents.iter().find(|e| e.name == p.name).and_then(|e| e.values_below.clone());
        match below {
            Some(TableRange::OwnLength) if !indexed.is_empty() => {
                let _ = writeln!(
                    self.t,
                    "init = \"randperm\"   # an index table: its values index {}, whose lengths count on them; a permutation of 0 .. len - 1, so every id is valid and none repeats",
                    indexed.join(" and ")
                );
                return;
            }
            Some(TableRange::Param(b)) if !indexed.is_empty() => {
                // Ranges are numbers: the smallest the bound takes over the sizes holds at all.
                let most = self.values_over_sizes(&b).into_iter().min().unwrap_or(1).max(1);
                let _ = writeln!(
                    self.t,
                    "init = \"randint(0, {most})\"   # an index table: its values index {}, whose lengths take them below `{b}` (the launcher's otherwise unused size); {most} is its smallest over the sizes",
                    indexed.join(" and ")
                );
                return;
            }
            _ => {}
        }
        let is_index = ["idx", "index", "indices", "ids", "expert", "offsets", "perm", "table", "code"]
            .iter()
            .any(|k| lower(&p.name).contains(k));
        let is_int = !matches!(
            elem,
            "float"
                | "double"
                | "half"
                | "__half"
                | "__nv_bfloat16"
                | "nv_bfloat16"
                | "__nv_fp8_e4m3"
                | "__nv_fp8_e5m2"
        );
        if is_int && is_index {
            self.todo(
                TodoKind::FillIn,
                format!("arg `{}`.init", p.name),
                format!(
                    "`{}` looks like indices: give the range of valid values (randint(0, BOUND) or randperm)",
                    p.name
                ),
            );
            let _ = writeln!(
                self.t,
                "init = \"TODO\"   # indices: randint(0, BOUND) with BOUND the indexed size, or randperm"
            );
        } else if is_int && name_words(&lower(&p.name)).iter().any(|w| w.starts_with("mask")) {
            let _ = writeln!(self.t, "init = \"randint(0, 2)\"   # guessed: a mask of 0s and 1s by its name");
        } else if is_int {
            let _ = writeln!(self.t, "init = \"randint(0, 100)\"   # guessed range");
        } else if reciprocal_scale(&lower(&p.name)) {
            let _ = writeln!(
                self.t,
                "init = \"uniform(0.5, 2)\"   # guessed: a reciprocal standard deviation by its name, so positive"
            );
        } else if probability(&lower(&p.name)) {
            let _ = writeln!(
                self.t,
                "init = \"uniform(0.05, 0.95)\"   # guessed: a probability by its name, kept off 0 and 1"
            );
        } else if non_negative(&lower(&p.name)) {
            let _ = writeln!(
                self.t,
                "init = \"uniform(0, 1)\"   # guessed: non-negative by its name (a square or variance)"
            );
        } else {
            let _ = writeln!(self.t, "init = \"normal(0, 1)\"   # guessed: set your production value range");
        }
    }

    /// A pointer the kernels read before they write it, or use where the walk could not
    /// follow: initialised before the call (never poisoned: the kernel may read it),
    /// checked after it, and moved twice in the roofline when it is written.
    fn in_place(&mut self, p: &Param, elem: &str, u: &PointerUse) {
        let baseline = self.baseline;
        let at = |w: &Use| format!("{baseline}:{} `{}`", w.line, shortened(&w.access));
        let mut said = Vec::new();
        if let Some(r) = &u.read {
            said.push(format!("read at {}", at(r)));
        }
        if let Some(w) = &u.written {
            said.push(format!("written at {}", at(w)));
        }
        if let Some(why) = &u.unknown {
            said.push(format!(
                "not followed at {}, so taken as read",
                why.split_whitespace().collect::<Vec<_>>().join(" ")
            ));
        }
        let _ = writeln!(self.t, "# in place: {}; an input and an output", said.join("; "));
        self.input_init(p, elem);
        self.stored_as_float(p, elem);
        let (rtol, atol, why) = self.tolerance(p, elem);
        let _ = writeln!(self.t, "output = true   # checked after the call");
        let _ = writeln!(self.t, "rtol = {}   # {why}", tol(rtol));
        let _ = writeln!(self.t, "atol = {}", tol(atol));
        self.output_elems.push(elem.to_string());
        // Read once and written once: the least traffic counts it twice.
        if u.written.is_some() {
            if let Some(len) = self.lengths.last().filter(|l| l.arg == p.name).and_then(|l| l.len.clone()) {
                self.bytes_terms.push(format!("{} * ({len})", elem_bytes(elem)));
            }
        }
    }

    /// A pointer that is not const is taken as an output, with its type's tolerance.
    fn output(&mut self, p: &Param, elem: &str, used: Option<&PointerUse>) {
        self.stored_as_float(p, elem);
        let (rtol, atol, why) = self.tolerance(p, elem);
        let said = match used {
            Some(u) if u.unknown.is_none() && u.written.is_some() => {
                let w = u.written.as_ref().map(|w| w.line).unwrap_or_default();
                match &u.read {
                    None => format!("written (line {w}), never read: poisoned before the call"),
                    Some(r) => {
                        format!("written (line {w}) before it is read (line {}): poisoned before the call", r.line)
                    }
                }
            }
            Some(PointerUse { unknown: Some(why), .. }) => {
                let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
                format!("guessed: not const, so written; the kernels' use was not followed: {why}")
            }
            _ => "guessed: not const, so written (an array read and written needs init = ... instead)".to_string(),
        };
        let _ = writeln!(self.t, "output = true   # {said}");
        let _ = writeln!(self.t, "rtol = {}   # {why}", tol(rtol));
        let _ = writeln!(self.t, "atol = {}", tol(atol));
        self.output_elems.push(elem.to_string());
    }

    /// An integer output a wrapper hands on as floats (`reinterpret_cast<__nv_fp8_e4m3*>`
    /// of a `uint8_t*`): compared as integers it must match bit for bit, where two right
    /// kernels may round one fp8 step apart. Said, with the declaration that fixes it.
    fn stored_as_float(&mut self, p: &Param, elem: &str) {
        let Some(ty) = self.extents.iter().find(|e| e.name == p.name).and_then(|e| e.passed_as.clone()) else {
            return;
        };
        let (own_rtol, ..) = tolerance_for(elem);
        let (rtol, ..) = tolerance_for(&ty);
        if own_rtol != 0.0 || rtol == 0.0 {
            return;
        }
        self.todo(
            TodoKind::ConfirmGuess,
            format!("arg `{}`.type", p.name),
            format!(
                "declared `{}` but handed on as `{ty}*`: compared as integers, bit for bit; declare it `{ty}*` in the launcher to compare {ty} values within their rounding",
                p.spelling
            ),
        );
        let _ =
            writeln!(self.t, "# handed on as `{ty}*` by the launcher: declare it so to compare {ty} values, not bits");
    }

    /// An output's tolerance, from what the kernels store in it: a copy is compared
    /// exactly; a float sum admits any order of its additions at its length; anything
    /// else gets its type's rounding.
    fn tolerance(&self, p: &Param, elem: &str) -> (f64, f64, String) {
        let (rtol, atol, why) = tolerance_for(elem);
        let baseline = self.baseline;
        let at = |u: &Use| format!("`{}` ({baseline}:{})", shortened(&u.access), u.line);
        let is_float = rtol > 0.0;
        match self.stores.iter().find(|s| s.name == p.name).map(|s| &s.stored) {
            Some(Stored::Copied { store }) => (
                0.0,
                0.0,
                format!("a copy: every element is stored as it was read, {}, so compared exactly", at(store)),
            ),
            Some(Stored::Summed { store, bound, stored }) if is_float => {
                let terms = bound.as_deref().and_then(|b| self.values_over_sizes(b).into_iter().max());
                match (terms, bound) {
                    (Some(n), Some(b)) if n > 1 && *stored => {
                        let (r, a) = summed_tolerance(rtol, atol, n);
                        (
                            r,
                            a,
                            format!(
                                "a sum of up to {n} terms ({b} at the largest size), {}: any order of the additions passes (4u sqrt(n) relative, 4u n absolute, u = 2^-24)",
                                at(store)
                            ),
                        )
                    }
                    // Computed from a sum (divided by it, its logarithm): the sum's
                    // rounding carries over relative to the value.
                    (Some(n), Some(b)) if n > 1 => {
                        let (r, _) = summed_tolerance(rtol, atol, n);
                        (
                            r,
                            atol,
                            format!(
                                "computed from a sum of up to {n} terms ({b} at the largest size), {}: any order of the additions passes (4u sqrt(n) relative, u = 2^-24)",
                                at(store)
                            ),
                        )
                    }
                    _ => (rtol, atol, format!("{why}; a sum, {}, of a length the walk did not find", at(store))),
                }
            }
            _ => (rtol, atol, why.to_string()),
        }
    }

    /// The values of the expression `e` at the proposed sizes (bench and checks).
    fn values_over_sizes(&self, e: &str) -> Vec<i64> {
        let (Some(proposal), Ok(expr)) = (self.proposal.as_ref(), crate::task::expr::Expr::parse(e)) else {
            return Vec::new();
        };
        std::iter::once(&proposal.bench)
            .chain(&proposal.checks)
            .filter_map(|b| expr.eval(&b.iter().cloned().collect()).ok())
            .collect()
    }

    /// The size variables (the integers less the values), with what each is.
    fn size_vars(&self) -> Vec<(String, IntegerKind)> {
        self.integers.iter().filter(|(_, k)| !matches!(k, IntegerKind::Value(..))).cloned().collect()
    }

    /// The sizes for the lengths found.
    fn proposal(&self) -> sizes::Proposal {
        let vars = self.size_vars();
        let lengths: Option<Vec<(String, usize)>> =
            self.lengths.iter().map(|l| l.len.clone().map(|len| (len, l.elem_bytes))).collect();
        match &lengths {
            Some(lengths) => sizes::propose(&vars, Some(&Buffers { lengths, traffic: &self.bytes_terms })),
            None => sizes::propose(&vars, None),
        }
    }

    fn sizes_table(&mut self) {
        let vars = self.size_vars();
        let proposal = self.proposal.take().unwrap_or_else(|| self.proposal());
        let t = &mut self.t;
        let _ = writeln!(t, "\n[sizes]");
        let _ = writeln!(t, "# Proposed: make the bench size your production shape (it should run >= 50 us); the");
        let _ = writeln!(t, "# check sizes hit one element, primes, one past a tile edge, and multiples of 8, with");
        let _ = writeln!(t, "# no buffer over a few million elements.");
        if vars.iter().any(|(_, k)| matches!(k, IntegerKind::Flag(_))) {
            let _ =
                writeln!(t, "# Flags take 0 and 1 across the check sizes (every pair of values where there are two).");
        }
        if vars.is_empty() {
            let _ = writeln!(t, "bench = {{}}");
            let _ = writeln!(t, "check = [{{}}]");
            return;
        }
        let row = |b: &sizes::Binding| -> String {
            let kv: Vec<String> = b.iter().map(|(s, v)| format!("{s} = {v}")).collect();
            format!("{{ {} }}", kv.join(", "))
        };
        let _ = writeln!(t, "# bench: {}", proposal.bench_note);
        let _ = writeln!(t, "bench = {}", row(&proposal.bench));
        let checks: Vec<String> = proposal.checks.iter().map(row).collect();
        let _ = writeln!(t, "check = [{}]", checks.join(", "));
        self.served_shapes(&proposal.bench);
    }

    /// Whether the size variable `name` may count the tokens (rows, sequences) a kernel
    /// serves: a dimension (no flag, fixed width or block size) that the kernels do not
    /// only walk serially, for a length one thread walks (a reduction's) is no batch of
    /// work. Where the walk did not follow its uses, the name alone decides.
    fn may_count_tokens(&self, name: &str) -> bool {
        let dimension = self.integers.iter().any(|(n, k)| n == name && *k == IntegerKind::Dimension);
        let serial =
            self.scalars.iter().find(|u| u.name == name).map(ScalarUse::role) == Some(ScalarRole::SerialExtent);
        dimension && !serial
    }

    /// A decode-like and a prefill-like served shape, where a size variable's name says it
    /// counts tokens, rows or a batch ([`sizes::served`]): written as a guess, with the
    /// weights a guess of the share of calls.
    fn served_shapes(&mut self, bench: &sizes::Binding) {
        let candidates: Vec<String> = self.sizes.iter().filter(|n| self.may_count_tokens(n)).cloned().collect();
        let Some(g) = sizes::served(&candidates, &self.sizes, bench) else {
            return;
        };
        let t = &mut self.t;
        let _ = writeln!(
            t,
            "# Served shapes, GUESSED from the name `{}` ({}): `decode` at {} = {},",
            g.var,
            g.counts.words(),
            g.var,
            g.decode
        );
        let _ = writeln!(
            t,
            "# `prefill` at the bench size ({} = {} as drafted). Each is timed; the optimizer",
            g.var, g.bench
        );
        let _ = writeln!(t, "# raises their weighted geometric mean and accepts no kernel slower at either. The");
        let _ = writeln!(t, "# weights are a GUESS of each shape's share of the kernel's calls: replace them with");
        let _ = writeln!(t, "# your serving stack's real mix (serve_weights = \"time\" for shares of its GPU time),");
        let _ = writeln!(t, "# or delete both lines to time the bench size alone.");
        let _ = writeln!(
            t,
            "serve = [{{ name = \"decode\", {} = {}, weight = 0.8 }}, {{ name = \"prefill\", weight = 0.2 }}]",
            g.var, g.decode
        );
        let _ = writeln!(t, "serve_weights = \"calls\"");
    }

    fn check_table(&mut self) {
        let (rtol, atol, _) = self.output_elems.first().map(|e| tolerance_for(e)).unwrap_or((1e-5, 1e-6, ""));
        let _ = writeln!(self.t, "\n[check]");
        let _ = writeln!(self.t, "rtol = {}   # default for outputs without their own; see each output", tol(rtol));
        let _ = writeln!(self.t, "atol = {}", tol(atol));
        let _ = writeln!(self.t, "seeds = 2");
    }

    /// The least DRAM traffic, where every pointer's length is known.
    fn roofline_table(&mut self) {
        if self.bytes_terms.is_empty() || self.lengths.iter().any(|l| l.len.is_none()) {
            return;
        }
        let _ = writeln!(self.t, "\n[roofline]");
        let _ = writeln!(self.t, "# The least DRAM traffic: every input read once, every output written once.");
        let _ = writeln!(self.t, "bytes = {}", toml_str(&self.bytes_terms.join(" + ")));
        let _ = writeln!(self.t, "# flops = \"...\"   # add the arithmetic a correct kernel must do, and flops_kind");
    }

    fn build_table(&mut self) {
        let baseline = self.baseline;
        let _ = writeln!(self.t, "\n[build]");
        let _ = writeln!(self.t, "# Headers from the -I folders, hashed into the build: a change rebuilds. Generators");
        let _ = writeln!(self.t, "# see them as read-only context and rewrite only {baseline}.");
        let _ = writeln!(self.t, "include = [{}]", toml_str(super::includes::INCLUDE_DIR));
    }
}
