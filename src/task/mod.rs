//! Task directories: `task.toml` plus the baseline (and optional reference) kernel.
//!
//! Loading is two steps: serde reads the TOML with spans kept, then [`Task::resolve`]
//! checks every field against the others (expressions against size variables, types
//! against distributions, files against the directory). Every error carries the file, the
//! line and the dotted field it is about, and says what was expected.

pub mod expr;
pub mod facts;
pub mod init;
pub mod types;
mod wording;

use expr::Expr;
use init::Init;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;
use types::{ElemType, ParamType, ScalarType};

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

// ---------------------------------------------------------------------------------------
// The file as written.

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    task: TaskSection,
    #[serde(default)]
    arg: Vec<Spanned<ArgSection>>,
    sizes: Spanned<SizesSection>,
    #[serde(default)]
    check: CheckSection,
    roofline: Option<RooflineSection>,
    #[serde(default)]
    tune: BTreeMap<String, Spanned<Vec<toml::Value>>>,
    #[serde(default)]
    timing: TimingSection,
    #[serde(default)]
    build: BuildSection,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskSection {
    name: Spanned<String>,
    #[serde(default)]
    summary: String,
    entry: Spanned<String>,
    baseline: Spanned<String>,
    reference: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ArgSection {
    name: Spanned<String>,
    #[serde(rename = "type")]
    ty: Spanned<String>,
    len: Option<Spanned<String>>,
    init: Option<Spanned<String>>,
    #[serde(default)]
    output: bool,
    value: Option<Spanned<toml::Value>>,
    rtol: Option<f64>,
    atol: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SizesSection {
    bench: Spanned<SizeTable>,
    check: Vec<Spanned<SizeTable>>,
}

/// A table of sizes as written: names in order, each value with its place in the file
/// (so that an error names the line of `rows = "many"`, not of the table).
#[derive(Debug)]
struct SizeTable(Vec<(String, Spanned<toml::Value>)>);

impl<'de> Deserialize<'de> for SizeTable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = SizeTable;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of sizes")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<SizeTable, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Spanned<toml::Value>>()? {
                    entries.push((k, v));
                }
                Ok(SizeTable(entries))
            }
        }
        d.deserialize_map(Entries)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckSection {
    #[serde(default = "default_rtol")]
    rtol: Spanned<f64>,
    #[serde(default = "default_atol")]
    atol: Spanned<f64>,
    #[serde(default = "default_seeds")]
    seeds: Spanned<i64>,
    #[serde(default = "default_true")]
    deterministic: bool,
}

impl Default for CheckSection {
    fn default() -> Self {
        CheckSection { rtol: default_rtol(), atol: default_atol(), seeds: default_seeds(), deterministic: true }
    }
}

fn default_rtol() -> Spanned<f64> {
    Spanned::new(0..0, 1e-5)
}
fn default_atol() -> Spanned<f64> {
    Spanned::new(0..0, 1e-6)
}
fn default_seeds() -> Spanned<i64> {
    Spanned::new(0..0, 3)
}
fn default_true() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RooflineSection {
    bytes: Spanned<String>,
    flops: Option<Spanned<String>>,
    #[serde(default)]
    flops_kind: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimingSection {
    #[serde(default = "default_true")]
    flush_l2: bool,
    timeout_s: Option<Spanned<f64>>,
}

impl Default for TimingSection {
    fn default() -> Self {
        TimingSection { flush_l2: true, timeout_s: None }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BuildSection {
    #[serde(default)]
    flags: Vec<String>,
    #[serde(default)]
    libs: Vec<Spanned<String>>,
    #[serde(default)]
    baseline_libs: Vec<Spanned<String>>,
    /// Header folders inside the task directory, passed as -I and hashed into the build.
    #[serde(default)]
    include: Vec<Spanned<String>>,
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
    pub tolerance: Tolerance,
    pub seeds: u32,
    pub deterministic: bool,
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
        Task::resolve(dir, raw, &at)
    }

    fn resolve(dir: &Path, raw: TaskFile, at: &Locator) -> Result<Task, TaskError> {
        let name = raw.task.name.get_ref().trim().to_string();
        if name.is_empty() {
            return Err(at.err(&raw.task.name, "task.name", "must not be empty"));
        }
        let entry = raw.task.entry.get_ref().clone();
        if !is_c_identifier(&entry) {
            return Err(at.err(
                &raw.task.entry,
                "task.entry",
                format!("`{entry}` is not a C identifier; expected the name of the extern \"C\" launcher"),
            ));
        }
        let baseline = at.existing_file(dir, &raw.task.baseline, "task.baseline")?;
        let reference = match &raw.task.reference {
            Some(r) => at.existing_file(dir, r, "task.reference")?,
            None => baseline.clone(),
        };

        // Sizes first: every expression is checked against the variables they define.
        let sizes = raw.sizes.get_ref();
        let bench = at.size(&sizes.bench, "sizes.bench")?;
        let var_names: Vec<String> = bench.vars.keys().cloned().collect();
        if sizes.check.is_empty() {
            return Err(at.err(
                &raw.sizes,
                "sizes.check",
                "needs at least one check size, e.g. check = [{ n = 1 }, { n = 1000 }]",
            ));
        }
        let mut checks = Vec::new();
        for (i, c) in sizes.check.iter().enumerate() {
            let field = format!("sizes.check[{i}]");
            let size = at.size(c, &field)?;
            let names: Vec<String> = size.vars.keys().cloned().collect();
            if names != var_names {
                return Err(at.err(
                    c,
                    &field,
                    format!(
                        "defines {{{}}} but sizes.bench defines {{{}}}; every size must bind the same variables",
                        names.join(", "),
                        var_names.join(", ")
                    ),
                ));
            }
            checks.push(size);
        }
        let all_sizes: Vec<&Size> = checks.iter().chain(std::iter::once(&bench)).collect();

        let tolerance = Tolerance { rtol: *raw.check.rtol.get_ref(), atol: *raw.check.atol.get_ref() };
        for (v, field) in [(&raw.check.rtol, "check.rtol"), (&raw.check.atol, "check.atol")] {
            if !(*v.get_ref() >= 0.0 && v.get_ref().is_finite()) {
                return Err(at.err(v, field, "must be a finite number >= 0"));
            }
        }
        let seeds = *raw.check.seeds.get_ref();
        if !(1..=64).contains(&seeds) {
            return Err(at.err(
                &raw.check.seeds,
                "check.seeds",
                format!("{seeds}: expected 1 to 64 seeds per check size"),
            ));
        }

        if raw.arg.is_empty() {
            return Err(TaskError { file: at.file.to_path_buf(), line: None, field: "arg".into(), message: "the task declares no [[arg]]: list the entry's parameters in call order (the stream is implicit, last)".into() });
        }
        let mut args: Vec<Arg> = Vec::new();
        for (i, spanned) in raw.arg.iter().enumerate() {
            let a = spanned.get_ref();
            let field = format!("arg[{i}]");
            let arg_name = a.name.get_ref().clone();
            if !is_c_identifier(&arg_name) {
                return Err(at.err(&a.name, &format!("{field}.name"), format!("`{arg_name}` is not a C identifier")));
            }
            if args.iter().any(|b| b.name == arg_name) {
                return Err(at.err(&a.name, &format!("{field}.name"), format!("`{arg_name}` is declared twice")));
            }
            let field = format!("arg[{i}] ({arg_name})");
            let ty = ParamType::parse(a.ty.get_ref()).map_err(|m| at.err(&a.ty, &format!("{field}.type"), m))?;
            let role = match ty {
                ParamType::Scalar { scalar } => {
                    for (present, what) in [(a.len.is_some(), "len"), (a.init.is_some(), "init"), (a.output, "output")]
                    {
                        if present {
                            return Err(at.err(
                                spanned,
                                &format!("{field}.{what}"),
                                format!("`{what}` applies to pointer arguments; `{arg_name}` is passed by value"),
                            ));
                        }
                    }
                    let value = match &a.value {
                        None => {
                            if !var_names.contains(&arg_name) {
                                return Err(at.err(
                                    &a.name,
                                    &format!("{field}.value"),
                                    format!(
                                        "`{arg_name}` is not a size variable ({}); give it a `value`",
                                        var_names.join(", ")
                                    ),
                                ));
                            }
                            ScalarValue::Int(arg_name.clone())
                        }
                        Some(v) => match (v.get_ref(), scalar.is_float()) {
                            (toml::Value::String(s), _) => {
                                let e = at.expr(v, s, &format!("{field}.value"), &var_names)?;
                                ScalarValue::Int(e.source().to_string())
                            }
                            (toml::Value::Integer(n), _) => ScalarValue::Int(n.to_string()),
                            (toml::Value::Float(x), true) => ScalarValue::Float(*x),
                            (toml::Value::Float(x), false) => {
                                return Err(at.err(
                                    v,
                                    &format!("{field}.value"),
                                    format!(
                                        "expected an integer (`{}` is an integer type), found {x} (a number with a fraction)",
                                        a.ty.get_ref()
                                    ),
                                ));
                            }
                            (other, _) => {
                                return Err(at.err(
                                    v,
                                    &format!("{field}.value"),
                                    format!(
                                        "expected a number, or an integer expression as a string, found {}",
                                        value_in_words(other)
                                    ),
                                ))
                            }
                        },
                    };
                    if let ScalarValue::Int(src) = &value {
                        let e = Expr::parse(src).expect("checked above");
                        for s in &all_sizes {
                            let x = e
                                .eval(&s.vars)
                                .map_err(|m| at.err(spanned, &format!("{field}.value"), format!("at size {s}: {m}")))?;
                            let fits = match scalar {
                                ScalarType::I32 => i32::try_from(x).is_ok(),
                                ScalarType::U32 => u32::try_from(x).is_ok(),
                                ScalarType::U64 => x >= 0,
                                _ => true,
                            };
                            if !fits {
                                return Err(at.err(
                                    spanned,
                                    &format!("{field}.value"),
                                    format!("at size {s} the value {x} does not fit `{}`", a.ty.get_ref()),
                                ));
                            }
                        }
                    }
                    ArgRole::Scalar { value }
                }
                ParamType::Pointer { elem, is_const } => {
                    if a.value.is_some() {
                        return Err(at.err(
                            spanned,
                            &format!("{field}.value"),
                            "`value` applies to by-value parameters; give pointers a `len`",
                        ));
                    }
                    let Some(len_src) = &a.len else {
                        return Err(at.err(
                            spanned,
                            &format!("{field}.len"),
                            "pointer arguments need `len`, the element count, e.g. len = \"rows * cols\"",
                        ));
                    };
                    let len_expr = at.expr(len_src, len_src.get_ref(), &format!("{field}.len"), &var_names)?;
                    for s in &all_sizes {
                        let n = len_expr
                            .eval(&s.vars)
                            .map_err(|m| at.err(len_src, &format!("{field}.len"), format!("at size {s}: {m}")))?;
                        if n < 0 {
                            return Err(at.err(
                                len_src,
                                &format!("{field}.len"),
                                format!("at size {s} the length is {n}"),
                            ));
                        }
                        let bytes = (n as u128) * elem.size() as u128;
                        if bytes > (1u128 << 40) {
                            return Err(at.err(
                                len_src,
                                &format!("{field}.len"),
                                format!("at size {s} the buffer would hold {bytes} bytes"),
                            ));
                        }
                    }
                    let len = len_expr.source().to_string();
                    let init = match &a.init {
                        Some(t) => {
                            let init = Init::parse(t.get_ref()).map_err(|m| at.err(t, &format!("{field}.init"), m))?;
                            init.check_fits(elem).map_err(|m| at.err(t, &format!("{field}.init"), m))?;
                            Some(init)
                        }
                        None => None,
                    };
                    let tol =
                        Tolerance { rtol: a.rtol.unwrap_or(tolerance.rtol), atol: a.atol.unwrap_or(tolerance.atol) };
                    match (a.output, init) {
                        (true, _) if is_const => {
                            return Err(at.err(
                                spanned,
                                &format!("{field}.output"),
                                format!("`{}` is const: the kernel cannot write it", a.ty.get_ref()),
                            ));
                        }
                        (true, None) => ArgRole::Output { len, tolerance: tol },
                        (true, Some(init)) => ArgRole::InOut { len, init, tolerance: tol },
                        (false, Some(init)) => ArgRole::Input { len, init },
                        (false, None) => {
                            return Err(at.err(
                                spanned,
                                &format!("{field}.init"),
                                format!(
                                    "input `{arg_name}` needs `init`, one of {}; or set output = true",
                                    init::INIT_FORMS
                                ),
                            ));
                        }
                    }
                }
            };
            args.push(Arg { name: arg_name, spelling: a.ty.get_ref().trim().to_string(), ty, role });
        }
        if !args.iter().any(|a| matches!(a.role, ArgRole::Output { .. } | ArgRole::InOut { .. })) {
            return Err(TaskError {
                file: at.file.to_path_buf(),
                line: None,
                field: "arg".into(),
                message: "no argument has output = true: nothing would be checked".into(),
            });
        }
        if let Some(unused) = var_names.iter().find(|v| {
            !args.iter().any(|a| match &a.role {
                ArgRole::Input { len, .. } | ArgRole::Output { len, .. } | ArgRole::InOut { len, .. } => {
                    Expr::parse(len).map(|e| e.variables().contains(v)).unwrap_or(false)
                }
                ArgRole::Scalar { value: ScalarValue::Int(src) } => {
                    Expr::parse(src).map(|e| e.variables().contains(v)).unwrap_or(false)
                }
                ArgRole::Scalar { .. } => false,
            })
        }) {
            let key = sizes.bench.get_ref().0.iter().find(|(k, _)| k == unused).map(|(_, v)| v);
            let message = format!(
                "size variable `{unused}` is used by no argument: the kernel would never see it (pass it as an integer [[arg]] or use it in a len)"
            );
            return Err(match key {
                Some(v) => at.err(v, &format!("sizes.bench.{unused}"), message),
                None => at.err(&sizes.bench, &format!("sizes.bench.{unused}"), message),
            });
        }

        let roofline = match &raw.roofline {
            None => None,
            Some(r) => {
                let bytes = at.expr(&r.bytes, r.bytes.get_ref(), "roofline.bytes", &var_names)?;
                let flops = match &r.flops {
                    Some(f) => Some(at.expr(f, f.get_ref(), "roofline.flops", &var_names)?),
                    None => None,
                };
                for (e, span, field) in std::iter::once((&bytes, r.bytes.span(), "roofline.bytes"))
                    .chain(flops.iter().map(|f| (f, r.flops.as_ref().unwrap().span(), "roofline.flops")))
                {
                    for s in &all_sizes {
                        match e.eval(&s.vars) {
                            Ok(v) if v >= 0 => {}
                            Ok(v) => {
                                return Err(at.err_span(
                                    span.start,
                                    field,
                                    format!("at size {s} evaluates to {v}; expected >= 0"),
                                ))
                            }
                            Err(m) => return Err(at.err_span(span.start, field, format!("at size {s}: {m}"))),
                        }
                    }
                }
                let flops_kind = match &r.flops_kind {
                    None => FlopsKind::Fp32,
                    Some(k) => FlopsKind::parse(k.get_ref()).ok_or_else(|| {
                        at.err(
                            k,
                            "roofline.flops_kind",
                            format!("`{}`: expected fp32, fp64, fp16-tensor, bf16-tensor or int32", k.get_ref()),
                        )
                    })?,
                };
                Some(Roofline {
                    bytes: bytes.source().to_string(),
                    flops: flops.map(|f| f.source().to_string()),
                    flops_kind,
                })
            }
        };

        let mut tune = BTreeMap::new();
        for (knob, values) in &raw.tune {
            if !is_c_identifier(knob) {
                return Err(at.err(
                    values,
                    &format!("tune.{knob}"),
                    "knob names become -D macros and must be C identifiers",
                ));
            }
            if values.get_ref().is_empty() {
                return Err(at.err(values, &format!("tune.{knob}"), "needs at least one value"));
            }
            let mut rendered = Vec::new();
            for v in values.get_ref() {
                rendered.push(match v {
                    toml::Value::Integer(n) => n.to_string(),
                    toml::Value::Float(x) => x.to_string(),
                    toml::Value::Boolean(b) => (*b as i32).to_string(),
                    toml::Value::String(s)
                        if s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') && !s.is_empty() =>
                    {
                        s.clone()
                    }
                    other => {
                        return Err(at.err(
                            values,
                            &format!("tune.{knob}"),
                            format!("`{other}`: values must be numbers, booleans or plain words"),
                        ))
                    }
                });
            }
            tune.insert(knob.clone(), rendered);
        }

        let timeout_s = match &raw.timing.timeout_s {
            Some(t) if !(*t.get_ref() > 0.0 && *t.get_ref() <= 3600.0) => {
                return Err(at.err(t, "timing.timeout_s", "expected seconds between 0 and 3600"));
            }
            Some(t) => Some(*t.get_ref()),
            None => None,
        };
        for lib in raw.build.libs.iter().chain(&raw.build.baseline_libs) {
            let l = lib.get_ref();
            if l.is_empty() || !l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '+' || c == '-') {
                return Err(at.err(
                    lib,
                    "build.libs",
                    format!("`{l}`: expected a library name as given to -l, e.g. \"cublas\""),
                ));
            }
        }

        for inc in &raw.build.include {
            let rel = Path::new(inc.get_ref());
            let inside = !inc.get_ref().is_empty()
                && rel.is_relative()
                && rel.components().all(|c| matches!(c, std::path::Component::Normal(_)));
            if !inside {
                return Err(at.err(
                    inc,
                    "build.include",
                    format!("`{}`: expected a folder inside the task directory, e.g. \"include\"", inc.get_ref()),
                ));
            }
            if !dir.join(rel).is_dir() {
                return Err(at.err(
                    inc,
                    "build.include",
                    format!("`{}`: no such folder in {}", inc.get_ref(), dir.display()),
                ));
            }
        }

        Ok(Task {
            dir: dir.to_path_buf(),
            name,
            summary: raw.task.summary.trim().to_string(),
            entry,
            baseline,
            reference,
            args,
            bench,
            checks,
            tolerance,
            seeds: seeds as u32,
            deterministic: raw.check.deterministic,
            roofline,
            tune,
            flush_l2: raw.timing.flush_l2,
            timeout_s,
            build: BuildConfig {
                flags: raw.build.flags.clone(),
                libs: raw.build.libs.iter().map(|l| l.get_ref().clone()).collect(),
                baseline_libs: raw.build.baseline_libs.iter().map(|l| l.get_ref().clone()).collect(),
                include: raw.build.include.iter().map(|l| l.get_ref().clone()).collect(),
            },
        })
    }

    pub fn has_reference(&self) -> bool {
        self.reference != self.baseline
    }

    /// The element count of a pointer argument at `size`.
    pub fn buffer_len(len: &str, size: &Size) -> Result<usize, String> {
        let e = Expr::parse(len).map_err(|e| e.to_string())?;
        let n = e.eval(&size.vars).map_err(|e| e.to_string())?;
        usize::try_from(n).map_err(|_| format!("length {n} is negative"))
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
