//! Every argument of the entry at one size: a buffer of so many elements of a type, or a
//! scalar's value as the 8 bytes the shim reads (little-endian, low bytes used).

use super::init::Init;
use super::types::{ElemType, ParamType, ScalarType};
use super::{ArgRole, ScalarValue, Size, Task};

/// Why a task's arguments have no values at a size (the task's fault, never a kernel's).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValueError {
    #[error(transparent)]
    Len(#[from] super::LenError),
    /// A scalar's value expression does not evaluate at the size.
    #[error(transparent)]
    Scalar(#[from] super::expr::ExprError),
    #[error("argument {arg}: a float value for an integer parameter")]
    FloatForInteger { arg: String },
    #[error("argument {arg} has a role that does not fit its type")]
    RoleMismatch { arg: String },
}

/// One argument at one size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArgValue {
    /// A buffer of `count` elements; `init` for those the kernel reads (inputs, in-out).
    Buffer {
        elem: ElemType,
        count: usize,
        init: Option<Init>,
    },
    Scalar([u8; 8]),
}

impl ArgValue {
    pub fn bytes(&self) -> usize {
        match self {
            ArgValue::Buffer { elem, count, .. } => elem.size() * count,
            ArgValue::Scalar(_) => 0,
        }
    }
}

/// The entry's arguments at `size`, in call order.
pub fn args_at(task: &Task, size: &Size) -> Result<Vec<ArgValue>, ValueError> {
    task.args
        .iter()
        .map(|arg| match (&arg.role, arg.ty) {
            (ArgRole::Scalar { value }, ParamType::Scalar { scalar }) => {
                Ok(ArgValue::Scalar(scalar_bytes(value, scalar, size, &arg.name)?))
            }
            (ArgRole::Input { len, init } | ArgRole::InOut { len, init, .. }, ParamType::Pointer { elem, .. }) => {
                Ok(ArgValue::Buffer { elem, count: Task::buffer_len(len, size)?, init: Some(*init) })
            }
            (ArgRole::Output { len, .. }, ParamType::Pointer { elem, .. }) => {
                Ok(ArgValue::Buffer { elem, count: Task::buffer_len(len, size)?, init: None })
            }
            _ => Err(ValueError::RoleMismatch { arg: arg.name.clone() }),
        })
        .collect()
}

/// A scalar's value at `size`, as the shim reads it.
pub fn scalar_bytes(value: &ScalarValue, scalar: ScalarType, size: &Size, arg: &str) -> Result<[u8; 8], ValueError> {
    let mut b = [0u8; 8];
    match value {
        ScalarValue::Int(src) => {
            let v = super::expr::Expr::parse(src)?.eval(&size.vars)?;
            match scalar {
                ScalarType::I32 | ScalarType::U32 => b[..4].copy_from_slice(&(v as i32).to_le_bytes()),
                ScalarType::I64 | ScalarType::U64 => b.copy_from_slice(&v.to_le_bytes()),
                ScalarType::F32 => b[..4].copy_from_slice(&(v as f32).to_le_bytes()),
                ScalarType::F64 => b.copy_from_slice(&(v as f64).to_le_bytes()),
            }
        }
        ScalarValue::Float(x) => match scalar {
            ScalarType::F32 => b[..4].copy_from_slice(&(*x as f32).to_le_bytes()),
            ScalarType::F64 => b.copy_from_slice(&x.to_le_bytes()),
            _ => return Err(ValueError::FloatForInteger { arg: arg.to_string() }),
        },
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn softmax_at_its_bench_size() {
        let task = Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/softmax")).unwrap();
        let args = args_at(&task, &task.bench).unwrap();
        let (rows, cols) = (task.bench.vars["rows"], task.bench.vars["cols"]);
        assert!(
            matches!(args[0], ArgValue::Buffer { elem: ElemType::F32, count, init: Some(_) } if count as i64 == rows * cols)
        );
        assert!(matches!(args[1], ArgValue::Buffer { init: None, .. }), "the output has no init");
        assert_eq!(args[2], ArgValue::Scalar((rows as i32 as i64).to_le_bytes()));
        assert_eq!(args[0].bytes(), 4 * (rows * cols) as usize);
    }
}
