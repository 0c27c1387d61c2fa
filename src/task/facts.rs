//! What the rewrite recipes may know about a task ([`rewrite::Facts`]): the launcher's
//! arguments in order with their roles and element types, each buffer's length as a C
//! expression over the launcher's parameters (where every size it reads is passed by
//! value) with its bench and largest values, and the tolerance.

use super::expr::Expr;
use super::types::{ElemType, ParamType};
use super::{ArgRole, ScalarValue, Size, Task};

/// The C spelling of an element type, as recipes declare staging arrays with it.
pub fn c_type(e: ElemType) -> &'static str {
    match e {
        ElemType::F32 => "float",
        ElemType::F64 => "double",
        ElemType::F16 => "__half",
        ElemType::Bf16 => "__nv_bfloat16",
        ElemType::I8 => "int8_t",
        ElemType::U8 => "uint8_t",
        ElemType::I16 => "int16_t",
        ElemType::U16 => "uint16_t",
        ElemType::I32 => "int",
        ElemType::U32 => "unsigned",
        ElemType::I64 => "int64_t",
        ElemType::U64 => "uint64_t",
        ElemType::F8E4M3 => "__nv_fp8_e4m3",
        ElemType::F8E5M2 => "__nv_fp8_e5m2",
    }
}

fn sizes(task: &Task) -> impl Iterator<Item = &Size> {
    std::iter::once(&task.bench).chain(task.checks.iter())
}

/// (value at the bench size, largest over all sizes) of an integer expression.
fn range(task: &Task, expr: &str) -> Option<(i64, i64)> {
    let e = Expr::parse(expr).ok()?;
    let bench = e.eval(&task.bench.vars).ok()?;
    let max = sizes(task).filter_map(|s| e.eval(&s.vars).ok()).max()?;
    Some((bench, max))
}

/// The facts of a task for the rewrite recipes.
pub fn rewrite_facts(task: &Task) -> rewrite::Facts {
    // A size variable has a C spelling when an argument passes exactly it by value.
    let position_of = |var: &str| {
        task.args.iter().position(|a| match &a.role {
            ArgRole::Scalar { value: ScalarValue::Int(e) } => e.trim() == var,
            _ => false,
        })
    };
    let var = |v: &str| position_of(v).map(|i| format!("{{{i}}}"));
    let mut args = Vec::new();
    for a in &task.args {
        let kind = match (&a.role, a.ty) {
            (
                ArgRole::Input { len, .. } | ArgRole::Output { len, .. } | ArgRole::InOut { len, .. },
                ParamType::Pointer { elem, .. },
            ) => {
                let (role, tolerance) = match &a.role {
                    ArgRole::Input { .. } => (rewrite::Role::Input, None),
                    ArgRole::Output { tolerance, .. } => (rewrite::Role::Output, Some(tolerance)),
                    ArgRole::InOut { tolerance, .. } => (rewrite::Role::InOut, Some(tolerance)),
                    _ => (rewrite::Role::InOut, None),
                };
                let (bench, max) = range(task, len).unwrap_or((0, i64::MAX));
                let c = Expr::parse(len).ok().and_then(|e| e.to_c(&var));
                rewrite::ArgKind::Buffer {
                    elem_size: elem.size(),
                    elem: c_type(elem).to_string(),
                    is_float: elem.is_float(),
                    role,
                    len: rewrite::Len { c, bench, max },
                    tolerance: tolerance.map(|t| rewrite::Tolerance { rtol: t.rtol, atol: t.atol }),
                }
            }
            (ArgRole::Scalar { value: ScalarValue::Int(e) }, _) => {
                let r = range(task, e);
                rewrite::ArgKind::Scalar { is_float: false, bench: r.map(|x| x.0), max: r.map(|x| x.1) }
            }
            _ => rewrite::ArgKind::Scalar { is_float: true, bench: None, max: None },
        };
        args.push(rewrite::ArgFacts { name: a.name.clone(), kind });
    }
    let acc = task.accuracy();
    let outs = super::output_elems(task);
    rewrite::Facts {
        entry: task.entry.clone(),
        args,
        rtol: acc.rtol,
        atol: acc.atol,
        outputs_16bit: !outs.is_empty() && outs.iter().all(|e| matches!(e, ElemType::F16 | ElemType::Bf16)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_facts() {
        let t = Task::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/softmax")).unwrap();
        let f = rewrite_facts(&t);
        assert_eq!(f.entry, "softmax");
        assert_eq!(f.args.len(), 4);
        let x = f.args[0].len().unwrap();
        assert_eq!(x.c.as_deref(), Some("((long long)({2}) * (long long)({3}))"));
        assert_eq!(x.bench, 8192 * 4096);
        assert_eq!(f.args[1].role(), Some(rewrite::Role::Output));
        assert!(matches!(f.args[3].kind, rewrite::ArgKind::Scalar { max: Some(12345), .. }));
        assert_eq!(f.rtol, 1e-5);
        assert!(!f.outputs_16bit);
    }
}
