//! From the TOML as read (spans kept) to a [`Task`]: one step per table, each checking its
//! fields against what the earlier steps settled (sizes first: every expression is checked
//! against the variables they define).

use super::expr::Expr;
use super::init::{self, Init};
use super::types::{ElemType, ParamType, ScalarType};
use super::{
    is_c_identifier, value_in_words, Arg, ArgRole, ArgSection, BuildConfig, BuildSection, CheckSection, FlopsKind,
    Locator, Roofline, RooflineSection, ScalarValue, Size, SizesSection, Task, TaskError, TaskFile, TaskSection,
    TimingSection, Tolerance,
};
use std::collections::BTreeMap;
use std::path::Path;
use toml::Spanned;

pub(super) fn resolve(dir: &Path, raw: TaskFile, at: &Locator) -> Result<Task, TaskError> {
    let (name, entry) = names(&raw.task, at)?;
    let baseline = at.existing_file(dir, &raw.task.baseline, "task.baseline")?;
    let reference = match &raw.task.reference {
        Some(r) => at.existing_file(dir, r, "task.reference")?,
        None => baseline.clone(),
    };
    let (bench, checks) = sizes(&raw.sizes, at)?;
    let (serve, serve_weights) =
        super::serve::resolve(&raw.sizes.get_ref().serve, raw.sizes.get_ref().serve_weights.as_ref(), &bench, at)?;
    let var_names: Vec<String> = bench.vars.keys().cloned().collect();
    let all_sizes: Vec<&Size> =
        checks.iter().chain(std::iter::once(&bench)).chain(serve.iter().map(|s| &s.size)).collect();
    let (tolerance, seeds) = check(&raw.check, at)?;
    let args = args(&raw.arg, tolerance, &var_names, &all_sizes, at)?;
    every_variable_used(&args, &var_names, &raw.sizes, at)?;
    let roofline = match &raw.roofline {
        None => None,
        Some(r) => Some(roofline(r, &var_names, &all_sizes, at)?),
    };
    let tune = tune(&raw.tune, at)?;
    let timeout_s = timeout(&raw.timing, at)?;
    build(dir, &raw.build, at)?;
    let build_timeout_s = match &raw.build.timeout_s {
        Some(t) if !(*t.get_ref() > 0.0 && *t.get_ref() <= 3600.0) => {
            return Err(at.err(t, "build.timeout_s", "expected seconds between 0 and 3600"))
        }
        Some(t) => Some(*t.get_ref()),
        None => None,
    };

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
        serve,
        serve_weights,
        tolerance,
        seeds: seeds as u32,
        deterministic: raw.check.deterministic,
        allow_nonfinite: raw.check.nonfinite,
        roofline,
        tune,
        flush_l2: raw.timing.flush_l2,
        timeout_s,
        build: BuildConfig {
            flags: raw.build.flags.clone(),
            libs: raw.build.libs.iter().map(|l| l.get_ref().clone()).collect(),
            baseline_libs: raw.build.baseline_libs.iter().map(|l| l.get_ref().clone()).collect(),
            include: raw.build.include.iter().map(|l| l.get_ref().clone()).collect(),
            timeout_s: build_timeout_s,
        },
    })
}

/// `[task]`: the name and the entry point.
fn names(task: &TaskSection, at: &Locator) -> Result<(String, String), TaskError> {
    let name = task.name.get_ref().trim().to_string();
    if name.is_empty() {
        return Err(at.err(&task.name, "task.name", "must not be empty"));
    }
    let entry = task.entry.get_ref().clone();
    if !is_c_identifier(&entry) {
        return Err(at.err(
            &task.entry,
            "task.entry",
            format!("`{entry}` is not a C identifier; expected the name of the extern \"C\" launcher"),
        ));
    }
    Ok((name, entry))
}

/// `[sizes]`: the bench size and the check sizes, all binding the same variables.
fn sizes(raw: &Spanned<SizesSection>, at: &Locator) -> Result<(Size, Vec<Size>), TaskError> {
    let sizes = raw.get_ref();
    let bench = at.size(&sizes.bench, "sizes.bench")?;
    let var_names: Vec<String> = bench.vars.keys().cloned().collect();
    if sizes.check.is_empty() {
        return Err(at.err(
            raw,
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
    Ok((bench, checks))
}

/// `[check]`: the task-wide tolerance and the seeds per check size.
fn check(check: &CheckSection, at: &Locator) -> Result<(Tolerance, i64), TaskError> {
    let tolerance = Tolerance { rtol: *check.rtol.get_ref(), atol: *check.atol.get_ref() };
    for (v, field) in [(&check.rtol, "check.rtol"), (&check.atol, "check.atol")] {
        if !(*v.get_ref() >= 0.0 && v.get_ref().is_finite()) {
            return Err(at.err(v, field, "must be a finite number >= 0"));
        }
    }
    let seeds = *check.seeds.get_ref();
    if !(1..=64).contains(&seeds) {
        return Err(at.err(&check.seeds, "check.seeds", format!("{seeds}: expected 1 to 64 seeds per check size")));
    }
    Ok((tolerance, seeds))
}

/// `[[arg]]`: the entry's parameters in call order, at least one of them written.
fn args(
    raw: &[Spanned<ArgSection>],
    tolerance: Tolerance,
    var_names: &[String],
    all_sizes: &[&Size],
    at: &Locator,
) -> Result<Vec<Arg>, TaskError> {
    if raw.is_empty() {
        return Err(TaskError {
            file: at.file.to_path_buf(),
            line: None,
            field: "arg".into(),
            message:
                "the task declares no [[arg]]: list the entry's parameters in call order (the stream is implicit, last)"
                    .into(),
        });
    }
    let mut args: Vec<Arg> = Vec::new();
    for (i, spanned) in raw.iter().enumerate() {
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
        let ty =
            ParamType::parse(a.ty.get_ref()).map_err(|m| at.err(&a.ty, &format!("{field}.type"), m.to_string()))?;
        let role = match ty {
            ParamType::Scalar { scalar } => scalar_arg(spanned, scalar, &field, var_names, all_sizes, at)?,
            ParamType::Pointer { elem, is_const } => {
                pointer_arg(spanned, elem, is_const, tolerance, &field, var_names, all_sizes, at)?
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
    Ok(args)
}

/// A by-value parameter: its value, a size variable of its own name by default, fitting
/// its type at every size.
fn scalar_arg(
    spanned: &Spanned<ArgSection>,
    scalar: ScalarType,
    field: &str,
    var_names: &[String],
    all_sizes: &[&Size],
    at: &Locator,
) -> Result<ArgRole, TaskError> {
    let a = spanned.get_ref();
    let arg_name = a.name.get_ref();
    for (present, what) in [(a.len.is_some(), "len"), (a.init.is_some(), "init"), (a.output, "output")] {
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
            if !var_names.contains(arg_name) {
                return Err(at.err(
                    &a.name,
                    &format!("{field}.value"),
                    format!("`{arg_name}` is not a size variable ({}); give it a `value`", var_names.join(", ")),
                ));
            }
            ScalarValue::Int(arg_name.clone())
        }
        Some(v) => match (v.get_ref(), scalar.is_float()) {
            (toml::Value::String(s), _) => {
                let e = at.expr(v, s, &format!("{field}.value"), var_names)?;
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
                    format!("expected a number, or an integer expression as a string, found {}", value_in_words(other)),
                ))
            }
        },
    };
    if let ScalarValue::Int(src) = &value {
        let e = Expr::parse(src).expect("checked above");
        for s in all_sizes {
            let x =
                e.eval(&s.vars).map_err(|m| at.err(spanned, &format!("{field}.value"), format!("at size {s}: {m}")))?;
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
    Ok(ArgRole::Scalar { value })
}

/// A pointer parameter: its length at every size, how inputs are filled, and whether
/// (and how closely) it is checked as an output.
#[allow(clippy::too_many_arguments)]
fn pointer_arg(
    spanned: &Spanned<ArgSection>,
    elem: ElemType,
    is_const: bool,
    tolerance: Tolerance,
    field: &str,
    var_names: &[String],
    all_sizes: &[&Size],
    at: &Locator,
) -> Result<ArgRole, TaskError> {
    let a = spanned.get_ref();
    let arg_name = a.name.get_ref();
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
    let len_expr = at.expr(len_src, len_src.get_ref(), &format!("{field}.len"), var_names)?;
    for s in all_sizes {
        let n = len_expr
            .eval(&s.vars)
            .map_err(|m| at.err(len_src, &format!("{field}.len"), format!("at size {s}: {m}")))?;
        if n < 0 {
            return Err(at.err(len_src, &format!("{field}.len"), format!("at size {s} the length is {n}")));
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
            let init = Init::parse(t.get_ref()).map_err(|m| at.err(t, &format!("{field}.init"), m.to_string()))?;
            init.check_fits(elem).map_err(|m| at.err(t, &format!("{field}.init"), m.to_string()))?;
            Some(init)
        }
        None => None,
    };
    let tol = Tolerance { rtol: a.rtol.unwrap_or(tolerance.rtol), atol: a.atol.unwrap_or(tolerance.atol) };
    match (a.output, init) {
        (true, _) if is_const => Err(at.err(
            spanned,
            &format!("{field}.output"),
            format!("`{}` is const: the kernel cannot write it", a.ty.get_ref()),
        )),
        (true, None) => Ok(ArgRole::Output { len, tolerance: tol }),
        (true, Some(init)) => Ok(ArgRole::InOut { len, init, tolerance: tol }),
        (false, Some(init)) => Ok(ArgRole::Input { len, init }),
        (false, None) => Err(at.err(
            spanned,
            &format!("{field}.init"),
            format!("input `{arg_name}` needs `init`, one of {}; or set output = true", init::INIT_FORMS),
        )),
    }
}

/// Every size variable reaches the kernel, through a length or a by-value argument.
fn every_variable_used(
    args: &[Arg],
    var_names: &[String],
    sizes: &Spanned<SizesSection>,
    at: &Locator,
) -> Result<(), TaskError> {
    let Some(unused) = var_names.iter().find(|v| {
        !args.iter().any(|a| match &a.role {
            ArgRole::Input { len, .. } | ArgRole::Output { len, .. } | ArgRole::InOut { len, .. } => {
                Expr::parse(len).map(|e| e.variables().contains(v)).unwrap_or(false)
            }
            ArgRole::Scalar { value: ScalarValue::Int(src) } => {
                Expr::parse(src).map(|e| e.variables().contains(v)).unwrap_or(false)
            }
            ArgRole::Scalar { .. } => false,
        })
    }) else {
        return Ok(());
    };
    let bench = &sizes.get_ref().bench;
    let key = bench.get_ref().0.iter().find(|(k, _)| k == unused).map(|(_, v)| v);
    let message = format!(
        "size variable `{unused}` is used by no argument: the kernel would never see it (pass it as an integer [[arg]] or use it in a len)"
    );
    Err(match key {
        Some(v) => at.err(v, &format!("sizes.bench.{unused}"), message),
        None => at.err(bench, &format!("sizes.bench.{unused}"), message),
    })
}

/// `[roofline]`: bytes and flops per call, non-negative at every size.
fn roofline(
    r: &RooflineSection,
    var_names: &[String],
    all_sizes: &[&Size],
    at: &Locator,
) -> Result<Roofline, TaskError> {
    let bytes = at.expr(&r.bytes, r.bytes.get_ref(), "roofline.bytes", var_names)?;
    let flops = match &r.flops {
        Some(f) => Some(at.expr(f, f.get_ref(), "roofline.flops", var_names)?),
        None => None,
    };
    for (e, span, field) in std::iter::once((&bytes, r.bytes.span(), "roofline.bytes"))
        .chain(flops.iter().map(|f| (f, r.flops.as_ref().unwrap().span(), "roofline.flops")))
    {
        for s in all_sizes {
            match e.eval(&s.vars) {
                Ok(v) if v >= 0 => {}
                Ok(v) => {
                    return Err(at.err_span(span.start, field, format!("at size {s} evaluates to {v}; expected >= 0")))
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
    Ok(Roofline { bytes: bytes.source().to_string(), flops: flops.map(|f| f.source().to_string()), flops_kind })
}

/// `[tune]`: knobs that become `-D` macros, each with its values as words.
fn tune(
    raw: &BTreeMap<String, Spanned<Vec<toml::Value>>>,
    at: &Locator,
) -> Result<BTreeMap<String, Vec<String>>, TaskError> {
    let mut tune = BTreeMap::new();
    for (knob, values) in raw {
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
    Ok(tune)
}

/// `[timing]`: the per-evaluation timeout.
fn timeout(timing: &TimingSection, at: &Locator) -> Result<Option<f64>, TaskError> {
    match &timing.timeout_s {
        Some(t) if !(*t.get_ref() > 0.0 && *t.get_ref() <= 3600.0) => {
            Err(at.err(t, "timing.timeout_s", "expected seconds between 0 and 3600"))
        }
        Some(t) => Ok(Some(*t.get_ref())),
        None => Ok(None),
    }
}

/// `[build]`: library names as given to `-l`, include folders inside the task directory.
fn build(dir: &Path, build: &BuildSection, at: &Locator) -> Result<(), TaskError> {
    for lib in build.libs.iter().chain(&build.baseline_libs) {
        let l = lib.get_ref();
        if l.is_empty() || !l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '+' || c == '-') {
            return Err(at.err(
                lib,
                "build.libs",
                format!("`{l}`: expected a library name as given to -l, e.g. \"cublas\""),
            ));
        }
    }
    for inc in &build.include {
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
    Ok(())
}
