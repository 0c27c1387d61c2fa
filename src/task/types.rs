//! C parameter types a task's entry point may take, parsed from their spelling in
//! task.toml. The spelling is kept verbatim for the generated shim (so `int64_t` and
//! `long long`, distinct C++ types, are never confused); the parsed form drives data
//! generation, comparison and argument packing in the worker.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Element type of a device buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElemType {
    F32,
    F64,
    F16,
    Bf16,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    /// OCP fp8 e4m3 (`__nv_fp8_e4m3`): 3 mantissa bits, no infinities, 448 at most.
    F8E4M3,
    /// OCP fp8 e5m2 (`__nv_fp8_e5m2`): 2 mantissa bits, infinities, 57344 at most.
    F8E5M2,
}

impl ElemType {
    pub fn size(self) -> usize {
        match self {
            ElemType::I8 | ElemType::U8 | ElemType::F8E4M3 | ElemType::F8E5M2 => 1,
            ElemType::F16 | ElemType::Bf16 | ElemType::I16 | ElemType::U16 => 2,
            ElemType::F32 | ElemType::I32 | ElemType::U32 => 4,
            ElemType::F64 | ElemType::I64 | ElemType::U64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            ElemType::F32 | ElemType::F64 | ElemType::F16 | ElemType::Bf16 | ElemType::F8E4M3 | ElemType::F8E5M2
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::F16 => "f16",
            ElemType::Bf16 => "bf16",
            ElemType::I8 => "i8",
            ElemType::U8 => "u8",
            ElemType::I16 => "i16",
            ElemType::U16 => "u16",
            ElemType::I32 => "i32",
            ElemType::U32 => "u32",
            ElemType::I64 => "i64",
            ElemType::U64 => "u64",
            ElemType::F8E4M3 => "f8e4m3",
            ElemType::F8E5M2 => "f8e5m2",
        }
    }

    /// Reads element `i` of a little-endian byte buffer as f64 (exact for every
    /// integer type up to 2^53 and for every float type).
    pub fn read_f64(self, bytes: &[u8], i: usize) -> f64 {
        let s = self.size();
        let b = &bytes[i * s..(i + 1) * s];
        match self {
            ElemType::F32 => f32::from_le_bytes(b.try_into().unwrap()) as f64,
            ElemType::F64 => f64::from_le_bytes(b.try_into().unwrap()),
            ElemType::F16 => half::f16::from_le_bytes(b.try_into().unwrap()).to_f64(),
            ElemType::Bf16 => half::bf16::from_le_bytes(b.try_into().unwrap()).to_f64(),
            ElemType::I8 => b[0] as i8 as f64,
            ElemType::U8 => b[0] as f64,
            ElemType::I16 => i16::from_le_bytes(b.try_into().unwrap()) as f64,
            ElemType::U16 => u16::from_le_bytes(b.try_into().unwrap()) as f64,
            ElemType::I32 => i32::from_le_bytes(b.try_into().unwrap()) as f64,
            ElemType::U32 => u32::from_le_bytes(b.try_into().unwrap()) as f64,
            ElemType::I64 => i64::from_le_bytes(b.try_into().unwrap()) as f64,
            ElemType::U64 => u64::from_le_bytes(b.try_into().unwrap()) as f64,
            ElemType::F8E4M3 => float8::F8E4M3::from_bits(b[0]).to_f64(),
            ElemType::F8E5M2 => float8::F8E5M2::from_bits(b[0]).to_f64(),
        }
    }

    /// Writes `v` as element `i`, rounding to nearest for floats (fp8 saturating to its
    /// largest finite value, as CUDA's conversions do by default) and saturating for
    /// integers.
    pub fn write_f64(self, bytes: &mut [u8], i: usize, v: f64) {
        let s = self.size();
        let b = &mut bytes[i * s..(i + 1) * s];
        match self {
            ElemType::F32 => b.copy_from_slice(&(v as f32).to_le_bytes()),
            ElemType::F64 => b.copy_from_slice(&v.to_le_bytes()),
            ElemType::F16 => b.copy_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            ElemType::Bf16 => b.copy_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            ElemType::I8 => b[0] = v as i8 as u8,
            ElemType::U8 => b[0] = v as u8,
            ElemType::I16 => b.copy_from_slice(&(v as i16).to_le_bytes()),
            ElemType::U16 => b.copy_from_slice(&(v as u16).to_le_bytes()),
            ElemType::I32 => b.copy_from_slice(&(v as i32).to_le_bytes()),
            ElemType::U32 => b.copy_from_slice(&(v as u32).to_le_bytes()),
            ElemType::I64 => b.copy_from_slice(&(v as i64).to_le_bytes()),
            ElemType::U64 => b.copy_from_slice(&(v as u64).to_le_bytes()),
            ElemType::F8E4M3 => b[0] = float8::F8E4M3::from_f64(v).to_bits(),
            ElemType::F8E5M2 => b[0] = float8::F8E5M2::from_f64(v).to_bits(),
        }
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Type of a by-value parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScalarType {
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

impl ScalarType {
    pub fn size(self) -> usize {
        match self {
            ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => 4,
            ScalarType::I64 | ScalarType::U64 | ScalarType::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, ScalarType::F32 | ScalarType::F64)
    }
}

/// A parameter type: a pointer to device memory, or a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum ParamType {
    Pointer { elem: ElemType, is_const: bool },
    Scalar { scalar: ScalarType },
}

const ELEM_NAMES: &[(&str, ElemType)] = &[
    ("float", ElemType::F32),
    ("double", ElemType::F64),
    ("half", ElemType::F16),
    ("__half", ElemType::F16),
    ("__nv_bfloat16", ElemType::Bf16),
    ("nv_bfloat16", ElemType::Bf16),
    ("int8_t", ElemType::I8),
    ("signed char", ElemType::I8),
    ("char", ElemType::I8),
    ("uint8_t", ElemType::U8),
    ("unsigned char", ElemType::U8),
    ("int16_t", ElemType::I16),
    ("short", ElemType::I16),
    ("uint16_t", ElemType::U16),
    ("unsigned short", ElemType::U16),
    ("int", ElemType::I32),
    ("int32_t", ElemType::I32),
    ("unsigned", ElemType::U32),
    ("unsigned int", ElemType::U32),
    ("uint32_t", ElemType::U32),
    ("long", ElemType::I64),
    ("long long", ElemType::I64),
    ("int64_t", ElemType::I64),
    ("unsigned long", ElemType::U64),
    ("unsigned long long", ElemType::U64),
    ("uint64_t", ElemType::U64),
    ("size_t", ElemType::U64),
    ("__nv_fp8_e4m3", ElemType::F8E4M3),
    ("__nv_fp8_e5m2", ElemType::F8E5M2),
];

/// The spellings accepted for element types, for error messages.
pub fn known_type_names() -> String {
    ELEM_NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// Why a C parameter type is refused; `spelling` is the type as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TypeError {
    #[error("cannot read type `{spelling}`")]
    Unreadable { spelling: String },
    #[error("`{spelling}`: volatile parameters are not supported")]
    Volatile { spelling: String },
    #[error("unknown type `{base}` in `{spelling}`; expected one of: {}", known_type_names())]
    Unknown { base: String, spelling: String },
    #[error("`{spelling}`: by-value parameters of type {elem} are not supported (use int, int64_t, size_t, float or double)")]
    ByValue { spelling: String, elem: ElemType },
    #[error("`{spelling}` has {levels} levels of pointer; expected a plain pointer to device memory or a value")]
    PointerDepth { spelling: String, levels: usize },
}

impl ParamType {
    /// Parses a C parameter type such as `const float*`, `float *__restrict__`,
    /// `const __nv_bfloat16*`, `int` or `int64_t`.
    pub fn parse(spelling: &str) -> Result<ParamType, TypeError> {
        let mut words: Vec<&str> = Vec::new();
        let mut pointers = 0;
        for raw in spelling.split(|c: char| c.is_whitespace()) {
            let mut w = raw;
            while let Some(rest) = w.strip_suffix('*') {
                pointers += 1;
                w = rest;
            }
            while let Some(rest) = w.strip_prefix('*') {
                pointers += 1;
                w = rest;
            }
            if w.contains('*') {
                return Err(TypeError::Unreadable { spelling: spelling.into() });
            }
            if !w.is_empty() {
                words.push(w);
            }
        }
        let mut is_const = false;
        let mut base: Vec<&str> = Vec::new();
        for w in words {
            match w {
                "const" => is_const = true,
                "__restrict__" | "__restrict" | "restrict" => {}
                "volatile" => return Err(TypeError::Volatile { spelling: spelling.into() }),
                other => base.push(other),
            }
        }
        let base = base.join(" ");
        let Some(elem) = ELEM_NAMES.iter().find(|(n, _)| *n == base).map(|(_, e)| *e) else {
            return Err(TypeError::Unknown { base, spelling: spelling.into() });
        };
        match pointers {
            1 => Ok(ParamType::Pointer { elem, is_const }),
            0 => {
                let scalar = match elem {
                    ElemType::I32 => ScalarType::I32,
                    ElemType::U32 => ScalarType::U32,
                    ElemType::I64 => ScalarType::I64,
                    ElemType::U64 => ScalarType::U64,
                    ElemType::F32 => ScalarType::F32,
                    ElemType::F64 => ScalarType::F64,
                    other => return Err(TypeError::ByValue { spelling: spelling.into(), elem: other }),
                };
                Ok(ParamType::Scalar { scalar })
            }
            levels => Err(TypeError::PointerDepth { spelling: spelling.into(), levels }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_spellings_production_launchers_use() {
        assert_eq!(ParamType::parse("const float*"), Ok(ParamType::Pointer { elem: ElemType::F32, is_const: true }));
        assert_eq!(ParamType::parse("float *"), Ok(ParamType::Pointer { elem: ElemType::F32, is_const: false }));
        assert_eq!(
            ParamType::parse("float* __restrict__"),
            Ok(ParamType::Pointer { elem: ElemType::F32, is_const: false })
        );
        assert_eq!(
            ParamType::parse("const __nv_bfloat16 *"),
            Ok(ParamType::Pointer { elem: ElemType::Bf16, is_const: true })
        );
        assert_eq!(ParamType::parse("float const*"), Ok(ParamType::Pointer { elem: ElemType::F32, is_const: true }));
        assert_eq!(ParamType::parse("unsigned int*"), Ok(ParamType::Pointer { elem: ElemType::U32, is_const: false }));
        assert_eq!(ParamType::parse("int"), Ok(ParamType::Scalar { scalar: ScalarType::I32 }));
        assert_eq!(ParamType::parse("long long"), Ok(ParamType::Scalar { scalar: ScalarType::I64 }));
        assert_eq!(ParamType::parse("size_t"), Ok(ParamType::Scalar { scalar: ScalarType::U64 }));
        assert_eq!(ParamType::parse("float"), Ok(ParamType::Scalar { scalar: ScalarType::F32 }));
        assert_eq!(
            ParamType::parse("__nv_fp8_e4m3* __restrict__"),
            Ok(ParamType::Pointer { elem: ElemType::F8E4M3, is_const: false })
        );
        assert_eq!(
            ParamType::parse("const __nv_fp8_e5m2*"),
            Ok(ParamType::Pointer { elem: ElemType::F8E5M2, is_const: true })
        );
    }

    /// fp8 as CUDA converts by default: round to nearest even, saturating to the largest
    /// finite value (448 for e4m3, 57344 for e5m2), NaN kept.
    #[test]
    fn fp8_rounds_to_nearest_and_saturates_as_cuda_does() {
        let cases = [
            (ElemType::F8E4M3, 1.0, 0x38, 1.0),
            (ElemType::F8E4M3, 0.1, 0x1d, 0.1015625),
            (ElemType::F8E4M3, 500.0, 0x7e, 448.0),
            (ElemType::F8E4M3, -1.5, 0xbc, -1.5),
            (ElemType::F8E5M2, 1e9, 0x7b, 57344.0),
            (ElemType::F8E5M2, 0.1, 0x2e, 0.09375),
        ];
        for (elem, v, bits, back) in cases {
            let mut b = [0u8];
            elem.write_f64(&mut b, 0, v);
            assert_eq!(b[0], bits, "{elem} {v}");
            assert_eq!(elem.read_f64(&b, 0), back, "{elem} {v}");
        }
        let mut b = [0u8];
        ElemType::F8E4M3.write_f64(&mut b, 0, f64::NAN);
        assert!(ElemType::F8E4M3.read_f64(&b, 0).is_nan());
    }

    #[test]
    fn rejects_what_the_worker_cannot_pass() {
        assert!(ParamType::parse("float**").unwrap_err().to_string().contains("2 levels"));
        assert!(ParamType::parse("float4*").unwrap_err().to_string().contains("unknown type `float4`"));
        assert!(ParamType::parse("half").unwrap_err().to_string().contains("not supported"));
        assert!(ParamType::parse("volatile int*").unwrap_err().to_string().contains("volatile"));
    }

    #[test]
    fn element_round_trip_through_bytes() {
        for elem in [
            ElemType::F32,
            ElemType::F64,
            ElemType::F16,
            ElemType::Bf16,
            ElemType::I32,
            ElemType::U8,
            ElemType::I64,
            ElemType::F8E4M3,
            ElemType::F8E5M2,
        ] {
            let mut buf = vec![0u8; elem.size() * 3];
            elem.write_f64(&mut buf, 1, 3.0);
            elem.write_f64(&mut buf, 2, -2.0);
            assert_eq!(elem.read_f64(&buf, 1), 3.0, "{elem}");
            assert_eq!(elem.read_f64(&buf, 0), 0.0, "{elem}");
            if elem != ElemType::U8 {
                assert_eq!(elem.read_f64(&buf, 2), -2.0, "{elem}");
            }
        }
    }
}
