//! Writing a first task.toml from a launcher signature: every pointer an input or an
//! output, every integer a size variable, lengths from the kernels' own indexing (else
//! from the names, marked as guesses), proposed sizes, and a comment wherever a value is a
//! guess. What cannot be guessed is written as `TODO` (which validation rejects); both are
//! listed for the user.

use super::signature::{Entry, Param, ParamKind};
use rewrite::extent::{Extent, PointerExtent, PointerUse, Use};
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

fn bench_value(name: &str, count: usize) -> i64 {
    let n = lower(name);
    match n.as_str() {
        "batch" | "bs" => 8,
        "heads" | "num_heads" | "nh" => 32,
        "head_dim" | "dim" | "d" | "headdim" => 128,
        "topk" | "top_k" | "k_top" => 8,
        _ => match count {
            1 => 1 << 24,
            2 => 1 << 12,
            3 => 1 << 10,
            _ => 1 << 7,
        },
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

fn tolerance_for(elem: &str) -> (f64, f64, &'static str) {
    match elem {
        "__nv_bfloat16" | "nv_bfloat16" => (2e-2, 2e-2, "bf16 keeps 8 mantissa bits: about 4e-3 relative per rounding"),
        "half" | "__half" => (2e-3, 2e-3, "fp16 keeps 11 mantissa bits: about 5e-4 relative per rounding"),
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

/// Renders the task.toml (to be written at `toml_path`) for `entry` of `baseline` (a file
/// name in the task directory), with what the extent analysis found for each pointer.
pub fn draft(
    task_name: &str,
    entry: &Entry,
    baseline: &str,
    include_dir: bool,
    extents: &[PointerExtent],
    uses: &[PointerUse],
    toml_path: &Path,
) -> Draft {
    let sizes: Vec<String> =
        entry.params.iter().filter(|p| p.kind == ParamKind::Integer).map(|p| p.name.clone()).collect();
    let mut w = Drafting {
        t: String::new(),
        todos: Vec::new(),
        lengths: Vec::new(),
        output_elems: Vec::new(),
        bytes_terms: Vec::new(),
        toml_path,
        baseline,
        sizes,
    };
    w.task_table(task_name, entry);
    for p in &entry.params {
        w.arg(p, extents, uses);
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
    /// The size variables: the launcher's integer parameters.
    sizes: Vec<String>,
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

    fn arg(&mut self, p: &Param, extents: &[PointerExtent], uses: &[PointerUse]) {
        let _ = writeln!(self.t, "\n[[arg]]");
        let _ = writeln!(self.t, "name = {}", toml_str(&p.name));
        let _ = writeln!(self.t, "type = {}", toml_str(&p.spelling));
        match &p.kind {
            ParamKind::Pointer { elem, constant } => {
                let extent = extents.iter().find(|e| e.name == p.name).map(|e| &e.extent);
                self.pointer_len(p, elem, extent);
                let used = uses.iter().find(|u| u.name == p.name);
                if *constant {
                    self.input_init(p, elem);
                    let _ = writeln!(self.t, "# input: declared const, so the kernel must leave it unchanged");
                } else if let Some(u) = used.filter(|u| !u.written_first && (u.read.is_some() || u.unknown.is_some())) {
                    self.in_place(p, elem, u);
                } else {
                    self.output(elem, used);
                }
            }
            ParamKind::Integer => {
                let _ = writeln!(self.t, "# a size variable: takes its value from [sizes]");
            }
            ParamKind::Float => {
                let (v, why) = float_value(&lower(&p.name));
                let _ = writeln!(self.t, "value = {v}   # guessed ({why}): set the value production uses");
            }
            ParamKind::Stream => {}
        }
    }

    /// A pointer's `len`: from the kernels' indexing, else guessed from the names, else
    /// left as TODO.
    fn pointer_len(&mut self, p: &Param, elem: &str, extent: Option<&Extent>) {
        let baseline = self.baseline;
        let indexing_said = match extent {
            Some(Extent::Unknown { why }) => format!("in {baseline}, {why}"),
            Some(Extent::Derived { .. }) => String::new(),
            None => "the launcher was not found by the CUDA parser".to_string(),
        };
        match (extent, infer_len(p, &self.sizes)) {
            (Some(Extent::Derived { len, access, line: at }), _) => {
                let len = len.render(&self.sizes);
                let evidence = format!("`{}` ({baseline}:{at})", shortened(access));
                let _ = writeln!(self.t, "len = {}   # from the kernel's indexing: {evidence}", toml_str(&len));
                self.bytes_terms.push(format!("{} * ({len})", elem_bytes(elem)));
                self.lengths.push(Length {
                    arg: p.name.clone(),
                    len: Some(len),
                    from: LengthSource::Indexing,
                    evidence,
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
                });
            }
        }
    }

    /// A const pointer is an input: how to fill it (indices need their bound).
    fn input_init(&mut self, p: &Param, elem: &str) {
        let is_index =
            ["idx", "index", "indices", "ids", "expert", "offsets", "perm"].iter().any(|k| lower(&p.name).contains(k));
        let is_int = !matches!(elem, "float" | "double" | "half" | "__half" | "__nv_bfloat16" | "nv_bfloat16");
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
        } else if is_int {
            let _ = writeln!(self.t, "init = \"randint(0, 100)\"   # guessed range");
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
        let (rtol, atol, why) = tolerance_for(elem);
        let _ = writeln!(self.t, "output = true   # checked after the call");
        let _ = writeln!(self.t, "rtol = {rtol:e}   # {why}");
        let _ = writeln!(self.t, "atol = {atol:e}");
        self.output_elems.push(elem.to_string());
        // Read once and written once: the least traffic counts it twice.
        if u.written.is_some() {
            if let Some(len) = self.lengths.last().filter(|l| l.arg == p.name).and_then(|l| l.len.clone()) {
                self.bytes_terms.push(format!("{} * ({len})", elem_bytes(elem)));
            }
        }
    }

    /// A pointer that is not const is taken as an output, with its type's tolerance.
    fn output(&mut self, elem: &str, used: Option<&PointerUse>) {
        let (rtol, atol, why) = tolerance_for(elem);
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
        let _ = writeln!(self.t, "rtol = {rtol:e}   # {why}");
        let _ = writeln!(self.t, "atol = {atol:e}");
        self.output_elems.push(elem.to_string());
    }

    fn sizes_table(&mut self) {
        let t = &mut self.t;
        let sizes = &self.sizes;
        let _ = writeln!(t, "\n[sizes]");
        let _ = writeln!(t, "# Proposed: make the bench size your production shape (it should run >= 50 us); the");
        let _ = writeln!(t, "# check sizes hit one element, primes, one past a tile edge, and multiples of 8.");
        if sizes.is_empty() {
            let _ = writeln!(t, "bench = {{}}");
            let _ = writeln!(t, "check = [{{}}]");
        } else {
            let bench: Vec<String> = sizes.iter().map(|s| format!("{s} = {}", bench_value(s, sizes.len()))).collect();
            let _ = writeln!(t, "bench = {{ {} }}", bench.join(", "));
            let checks: Vec<String> = check_values(sizes.len())
                .into_iter()
                .map(|vals| {
                    let kv: Vec<String> = sizes.iter().zip(vals).map(|(s, v)| format!("{s} = {v}")).collect();
                    format!("{{ {} }}", kv.join(", "))
                })
                .collect();
            let _ = writeln!(t, "check = [{}]", checks.join(", "));
        }
    }

    fn check_table(&mut self) {
        let (rtol, atol, _) = self.output_elems.first().map(|e| tolerance_for(e)).unwrap_or((1e-5, 1e-6, ""));
        let _ = writeln!(self.t, "\n[check]");
        let _ = writeln!(self.t, "rtol = {rtol:e}   # default for outputs without their own; see each output");
        let _ = writeln!(self.t, "atol = {atol:e}");
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
