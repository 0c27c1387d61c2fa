//! Task directories: `task.toml` plus the baseline (and optional reference) kernel.
//!
//! Loading is two steps: serde reads the TOML with spans kept, then `resolve` (one step
//! per table) checks every field against the others (expressions against size variables, types
//! against distributions, files against the directory). Every error carries the file, the
//! line and the dotted field it is about, and says what was expected.

pub mod budget;
pub mod expr;
pub mod facts;
mod file;
pub mod init;
mod resolve;
pub mod serve;
pub mod types;
pub mod values;
mod wording;

use expr::{Expr, ExprError};
use file::{
    ArgSection, BuildSection, CheckSection, RooflineSection, SizeTable, SizesSection, TaskFile, TaskSection,
    TimingSection,
};
use init::Init;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;
use types::{ElemType, ParamType};

pub const TASK_FILE: &str = "task.toml";

/// A problem with a task, located as precisely as the input allows.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub field: String,
    pub message: String,
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for TaskError {}

/// Why a buffer's length expression gives no element count at a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LenError {
    /// It does not parse, or names a variable the size lacks.
    #[error(transparent)]
    Expr(#[from] ExprError),
    #[error("length {0} is negative")]
    Negative(i64),
}

// ---------------------------------------------------------------------------------------
// The resolved task.

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    pub dir: PathBuf,
    pub name: String,
    pub summary: String,
    pub entry: String,
    pub baseline: PathBuf,
    /// The trusted reference; the baseline itself when the task names none.
    pub reference: PathBuf,
    pub args: Vec<Arg>,
    pub bench: Size,
    pub checks: Vec<Size>,
    /// `[sizes] serve`: the shapes the kernel serves, weights summing to 1; empty when the
    /// task times its bench size alone ([`Task::served`] reads both alike).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serve: Vec<serve::ServedShape>,
    #[serde(default)]
    pub serve_weights: serve::WeightBasis,
    pub tolerance: Tolerance,
    pub seeds: u32,
    pub deterministic: bool,
    /// `[check] nonfinite = true`: the reference's outputs may hold NaN or infinities, which
    /// a kernel must then match; otherwise a reference that produces them is a task error
    /// (NaN compared with NaN would pass a kernel that never wrote an output).
    #[serde(default)]
    pub allow_nonfinite: bool,
    pub roofline: Option<Roofline>,
    pub tune: BTreeMap<String, Vec<String>>,
    pub flush_l2: bool,
    pub timeout_s: Option<f64>,
    pub build: BuildConfig,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Arg {
    pub name: String,
    /// The C spelling, verbatim, for the shim.
    pub spelling: String,
    pub ty: ParamType,
    pub role: ArgRole,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "role")]
pub enum ArgRole {
    /// Read by the kernel; must be unchanged after the call.
    Input {
        len: String,
        init: Init,
    },
    /// Written by the kernel; poisoned before each call, every element must be written.
    Output {
        len: String,
        tolerance: Tolerance,
    },
    /// Initialized, then updated in place by the kernel.
    InOut {
        len: String,
        init: Init,
        tolerance: Tolerance,
    },
    Scalar {
        value: ScalarValue,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "value")]
pub enum ScalarValue {
    /// An integer expression over the size variables.
    Int(String),
    Float(f64),
}

impl fmt::Display for ScalarValue {
    /// As task.toml writes it: the expression, or the number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScalarValue::Int(e) => f.write_str(e),
            ScalarValue::Float(x) => write!(f, "{x}"),
        }
    }
}

/// One binding of the size variables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Size {
    pub vars: BTreeMap<String, i64>,
    /// The variables in the order the task wrote them, for display.
    #[serde(default)]
    pub order: Vec<String>,
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&String> =
            if self.order.len() == self.vars.len() { self.order.iter().collect() } else { self.vars.keys().collect() };
        let parts: Vec<String> = names.iter().map(|k| format!("{k}={}", self.vars[*k])).collect();
        f.write_str(&parts.join(" "))
    }
}

/// Which peak arithmetic rate bounds `flops`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlopsKind {
    Fp32,
    Fp64,
    Fp16Tensor,
    Bf16Tensor,
    Int32,
}

impl fmt::Display for FlopsKind {
    /// As task.toml writes it (`flops_kind = "fp16-tensor"`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FlopsKind::Fp32 => "fp32",
            FlopsKind::Fp64 => "fp64",
            FlopsKind::Fp16Tensor => "fp16-tensor",
            FlopsKind::Bf16Tensor => "bf16-tensor",
            FlopsKind::Int32 => "int32",
        })
    }
}

impl FlopsKind {
    fn parse(s: &str) -> Option<FlopsKind> {
        Some(match s {
            "fp32" => FlopsKind::Fp32,
            "fp64" => FlopsKind::Fp64,
            "fp16-tensor" => FlopsKind::Fp16Tensor,
            "bf16-tensor" => FlopsKind::Bf16Tensor,
            "int32" => FlopsKind::Int32,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Roofline {
    pub bytes: String,
    pub flops: Option<String>,
    pub flops_kind: FlopsKind,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BuildConfig {
    pub flags: Vec<String>,
    /// Libraries every kernel of the task may link (`cublas` means `-lcublas`).
    pub libs: Vec<String>,
    /// Libraries only the baseline and the reference may link.
    pub baseline_libs: Vec<String>,
    /// Header folders, relative to the task directory (read-only context for generators).
    #[serde(default)]
    pub include: Vec<String>,
    /// Seconds one build may take (`[build] timeout_s`; default: the wall's, 120 s).
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

/// The least work a correct kernel must do at one size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Work {
    pub bytes: f64,
    pub flops: f64,
    pub flops_kind: FlopsKind,
}

impl Task {
    /// Loads `dir/task.toml` and resolves it.
    pub fn load(dir: &Path) -> Result<Task, TaskError> {
        let file = dir.join(TASK_FILE);
        let text = std::fs::read_to_string(&file).map_err(|e| TaskError {
            file: file.clone(),
            line: None,
            field: String::new(),
            message: if e.kind() == std::io::ErrorKind::NotFound {
                format!("no {TASK_FILE} here: a task directory holds {TASK_FILE}, the baseline kernel and optionally a reference")
            } else {
                format!("cannot read: {e}")
            },
        })?;
        Task::from_text(dir, &file, &text)
    }

    /// Parses task text as if read from `file` in `dir` (files it names are looked up in `dir`).
    pub fn from_text(dir: &Path, file: &Path, text: &str) -> Result<Task, TaskError> {
        let at = Locator { file, text };
        let raw: TaskFile = serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(|e| {
            // The document as plain values, to name an [[arg]] by its `name`.
            let doc = text.parse::<toml::Table>().ok();
            let segments: Vec<&serde_path_to_error::Segment> = e.path().iter().collect();
            let (field, message) = wording::reword(e.inner().message(), &segments, doc.as_ref());
            TaskError { file: file.to_path_buf(), line: e.inner().span().map(|s| at.line(s.start)), field, message }
        })?;
        resolve::resolve(dir, raw, &at)
    }

    /// The shapes every judgment times: the served ones, or the bench size alone.
    pub fn served(&self) -> Vec<serve::ServedShape> {
        if self.serve.is_empty() {
            vec![serve::ServedShape { name: "bench".into(), size: self.bench.clone(), weight: 1.0 }]
        } else {
            self.serve.clone()
        }
    }

    /// Each served shape in words, `decode rows=8 cols=4096 (80% of the calls)`, for the
    /// certificate and the generator's prompt.
    pub fn served_in_words(&self) -> Vec<String> {
        self.served()
            .iter()
            .map(|s| format!("{} {} ({:.0}% of the {})", s.name, s.size, 100.0 * s.weight, self.serve_weights))
            .collect()
    }

    /// Whether the task serves several shapes (or one other than its bench size).
    pub fn serves_shapes(&self) -> bool {
        !self.serve.is_empty()
    }

    pub fn has_reference(&self) -> bool {
        self.reference != self.baseline
    }

    /// The element count of a pointer argument at `size`.
    pub fn buffer_len(len: &str, size: &Size) -> Result<usize, LenError> {
        let n = Expr::parse(len)?.eval(&size.vars)?;
        usize::try_from(n).map_err(|_| LenError::Negative(n))
    }

    /// The least bytes and flops at `size`, when the task has a roofline.
    pub fn work(&self, size: &Size) -> Option<Work> {
        let r = self.roofline.as_ref()?;
        let eval = |src: &str| Expr::parse(src).ok()?.eval(&size.vars).ok();
        Some(Work {
            bytes: eval(&r.bytes)? as f64,
            flops: match &r.flops {
                Some(f) => eval(f)? as f64,
                None => 0.0,
            },
            flops_kind: r.flops_kind,
        })
    }

    /// The tightest tolerance over the outputs, their element types and the roofline's
    /// flops kind: what decides which arithmetic paths can pass the check.
    pub fn accuracy(&self) -> heuristics::precision::Accuracy {
        let mut rtol = f64::INFINITY;
        let mut atol = f64::INFINITY;
        let mut types = Vec::new();
        for a in &self.args {
            if let (
                ArgRole::Output { tolerance, .. } | ArgRole::InOut { tolerance, .. },
                ParamType::Pointer { elem, .. },
            ) = (&a.role, a.ty)
            {
                rtol = rtol.min(tolerance.rtol);
                atol = atol.min(tolerance.atol);
                types.push(elem.name().to_string());
            }
        }
        if !rtol.is_finite() {
            (rtol, atol) = (self.tolerance.rtol, self.tolerance.atol);
        }
        let flops_kind = self.roofline.as_ref().map_or(FlopsKind::Fp32, |r| r.flops_kind);
        heuristics::precision::Accuracy { rtol, atol, output_types: types, flops_kind: flops_kind.to_string() }
    }

    /// What the diagnoses may know about the task at its bench size.
    pub fn diagnosis_hints(&self) -> heuristics::Hints {
        let work = self.work(&self.bench);
        heuristics::Hints {
            min_bytes: work.map(|w| w.bytes),
            min_flops: work.map(|w| w.flops).filter(|f| *f > 0.0),
            accuracy: Some(self.accuracy()),
            achievable_dram_gbs: None,
        }
    }

    /// What about the task weakens the judge's guarantees, in words for `validate`.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let reads: Vec<&Init> = self
            .args
            .iter()
            .filter_map(|a| match &a.role {
                ArgRole::Input { init, .. } | ArgRole::InOut { init, .. } => Some(init),
                _ => None,
            })
            .collect();
        let random = |i: &Init| !matches!(i, Init::Const { .. } | Init::Arange);
        if !reads.is_empty() && !reads.iter().any(|i| random(i)) {
            out.push(
                "every input is a constant or `arange`: every call sees the same inputs, so a kernel could remember its one answer and no judge could tell; give at least one input a random `init` (normal, uniform, randint, randperm)"
                    .to_string(),
            );
        }
        out.extend(budget::warnings(self));
        out
    }

    /// The smallest check size by total buffer bytes (sanitizers run there).
    pub fn smallest_check(&self) -> &Size {
        self.checks.iter().min_by_key(|s| self.total_bytes(s)).expect("a task has at least one check size")
    }

    pub fn total_bytes(&self, size: &Size) -> u128 {
        self.args
            .iter()
            .map(|a| match (&a.role, a.ty) {
                (
                    ArgRole::Input { len, .. } | ArgRole::Output { len, .. } | ArgRole::InOut { len, .. },
                    ParamType::Pointer { elem, .. },
                ) => Task::buffer_len(len, size).unwrap_or(0) as u128 * elem.size() as u128,
                _ => 0,
            })
            .sum()
    }

    /// The headers a kernel of this task can include: `.h/.cuh/.hpp/.inc` files in the task
    /// directory (four levels down) and under its include folders, as (path relative to
    /// the task directory, absolute path), sorted. They are hashed into every build and
    /// shown to generators as read-only context.
    pub fn header_files(&self) -> Vec<(String, PathBuf)> {
        fn is_header(p: &Path) -> bool {
            p.extension().and_then(|x| x.to_str()).is_some_and(|x| matches!(x, "h" | "cuh" | "hpp" | "inc"))
        }
        fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<(String, PathBuf)>) {
            let Ok(entries) = std::fs::read_dir(dir) else { return };
            for e in entries.flatten() {
                let p = e.path();
                let Ok(kind) = e.file_type() else { continue };
                if kind.is_dir() && depth > 0 {
                    walk(root, &p, depth - 1, out);
                } else if kind.is_file() && is_header(&p) {
                    let rel = p.strip_prefix(root).unwrap_or(&p).to_string_lossy().into_owned();
                    out.push((rel, p));
                }
            }
        }
        let mut out = Vec::new();
        // Subfolders too: `#include "detail/x.cuh"` resolves through -I of the task folder.
        walk(&self.dir, &self.dir, 4, &mut out);
        for inc in &self.build.include {
            walk(&self.dir, &self.dir.join(inc), 8, &mut out);
        }
        out.sort();
        out.dedup();
        out
    }

    pub fn libs_for(&self, trusted: bool) -> Vec<String> {
        let mut libs = self.build.libs.clone();
        if trusted {
            libs.extend(self.build.baseline_libs.iter().cloned());
        }
        libs
    }
}

/// Pointer element types used by the outputs, for reporting.
pub fn output_elems(task: &Task) -> Vec<ElemType> {
    task.args
        .iter()
        .filter_map(|a| match (&a.role, a.ty) {
            (ArgRole::Output { .. } | ArgRole::InOut { .. }, ParamType::Pointer { elem, .. }) => Some(elem),
            _ => None,
        })
        .collect()
}

/// A TOML value as a reader would describe it: `"three" (a string)`.
fn value_in_words(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("\"{}\" (a string)", s.replace('\\', "\\\\").replace('"', "\\\"")),
        toml::Value::Integer(n) => format!("{n} (an integer)"),
        toml::Value::Float(x) => format!("{x} (a number with a fraction)"),
        toml::Value::Boolean(b) => format!("{b} (true or false)"),
        toml::Value::Datetime(d) => format!("{d} (a date)"),
        toml::Value::Array(_) => "a list".into(),
        toml::Value::Table(_) => "a table".into(),
    }
}

fn is_c_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Turns byte spans into lines, and builds located errors.
struct Locator<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Locator<'_> {
    fn line(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end].iter().filter(|b| **b == b'\n').count() + 1
    }

    fn err_span(&self, offset: usize, field: &str, message: impl Into<String>) -> TaskError {
        TaskError {
            file: self.file.to_path_buf(),
            line: if offset == 0 && self.text.is_empty() { None } else { Some(self.line(offset)) },
            field: field.to_string(),
            message: message.into(),
        }
    }

    fn err<T>(&self, at: &Spanned<T>, field: &str, message: impl Into<String>) -> TaskError {
        let span = at.span();
        // Defaults carry an empty span: they have no line.
        let mut e = self.err_span(span.start, field, message);
        if span.is_empty() {
            e.line = None;
        }
        e
    }

    fn expr<T>(&self, at: &Spanned<T>, src: &str, field: &str, vars: &[String]) -> Result<Expr, TaskError> {
        let e = Expr::parse(src).map_err(|e| self.err(at, field, format!("`{src}`: {e}")))?;
        if let Some(unknown) = e.variables().into_iter().find(|v| !vars.contains(v)) {
            return Err(self.err(
                at,
                field,
                format!("`{src}` uses `{unknown}`, which is not a size variable ({})", vars.join(", ")),
            ));
        }
        Ok(e)
    }

    /// A size table: integer values >= 0, kept in the order written.
    fn size(&self, table: &Spanned<SizeTable>, field: &str) -> Result<Size, TaskError> {
        let mut vars = BTreeMap::new();
        let mut order = Vec::new();
        for (k, v) in &table.get_ref().0 {
            let at = format!("{field}.{k}");
            let Some(n) = v.get_ref().as_integer() else {
                return Err(self.err(v, &at, format!("expected an integer, found {}", value_in_words(v.get_ref()))));
            };
            if n < 0 {
                return Err(self.err(v, &at, format!("expected a size >= 0, found {n}")));
            }
            if !is_c_identifier(k) {
                return Err(self.err(
                    v,
                    &at,
                    format!("`{k}` is not a C identifier; a size is named like the launcher parameter that takes it"),
                ));
            }
            if vars.contains_key(k) {
                return Err(self.err(v, &at, format!("`{k}` is given twice")));
            }
            vars.insert(k.clone(), n);
            order.push(k.clone());
        }
        if vars.is_empty() {
            return Err(self.err(table, field, "binds no variables"));
        }
        Ok(Size { vars, order })
    }

    fn existing_file(&self, dir: &Path, name: &Spanned<String>, field: &str) -> Result<PathBuf, TaskError> {
        let path = dir.join(name.get_ref());
        if !path.is_file() {
            return Err(self.err(name, field, format!("`{}` does not exist in {}", name.get_ref(), dir.display())));
        }
        Ok(path)
    }
}

/// Task directories under `root`, sorted by name: those that hold a task.toml.
pub fn discover(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let path = entry?.path();
        if path.join(TASK_FILE).is_file() {
            dirs.push(path);
        }
    }
    dirs.sort();
    Ok(dirs)
}

#[cfg(test)]
mod tests;
