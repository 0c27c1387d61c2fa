//! Which arithmetic paths can meet a task's tolerance, and how fast each can go.
//!
//! A prescription must offer only what can pass the task's check, and a physical floor
//! must assume the fastest path that can: a floor at the FP32 FMA peak would reject a
//! correct 3xTF32 GEMM as a timing anomaly. The judgement is by unit roundoff: a path
//! whose inputs are rounded to `u` leaves products with relative errors near `u`, and
//! the check's `rtol` must hold several of them (four here) for a sum of many products.

use serde::{Deserialize, Serialize};

/// What the task says about accuracy and the least work (from task.toml).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Accuracy {
    pub rtol: f64,
    pub atol: f64,
    /// Element types of the outputs (`float`, `__nv_bfloat16`, ...).
    pub output_types: Vec<String>,
    /// `fp32`, `fp64`, `fp16-tensor`, `bf16-tensor`, `int32`.
    pub flops_kind: String,
}

/// An arithmetic path for the task's flops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MathPath {
    /// FFMA on the FP32 pipe: 128 FMA per SM per clock.
    Fp32Fma,
    /// Tensor cores on TF32 inputs (10-bit mantissa): fp32 data, ~1e-3 relative.
    Tf32,
    /// Each fp32 operand split into a TF32 high and low part, three MMAs per product:
    /// fp32-level accuracy at a third of the TF32 rate.
    ThreeTf32,
    /// Tensor cores on 16-bit inputs with fp32 accumulation.
    Half,
    Fp64Fma,
    Int32,
}

impl MathPath {
    pub fn name(self) -> &'static str {
        match self {
            MathPath::Fp32Fma => "FP32 FFMA",
            MathPath::Tf32 => "TF32 tensor cores",
            MathPath::ThreeTf32 => "3xTF32 tensor cores",
            MathPath::Half => "16-bit tensor cores",
            MathPath::Fp64Fma => "FP64 DFMA",
            MathPath::Int32 => "INT32",
        }
    }

    /// Dense FLOP per SM per clock on Hopper (sm_90): FP32 FMA 128 lanes x 2, FP16/BF16
    /// tensor 4096, TF32 half of that, 3xTF32 a third of TF32.
    pub fn flops_per_sm_clock(self, cc_major: u32) -> f64 {
        let tensor16 = match cc_major {
            9 => 4096.0,
            8 => 1024.0,
            m if m >= 10 => 8192.0,
            _ => 512.0,
        };
        match self {
            MathPath::Fp32Fma => 256.0,
            MathPath::Tf32 => tensor16 / 2.0,
            MathPath::ThreeTf32 => tensor16 / 6.0,
            MathPath::Half => tensor16,
            MathPath::Fp64Fma => 128.0,
            MathPath::Int32 => 128.0,
        }
    }

    /// Unit roundoff of the path's inputs.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            MathPath::Fp32Fma => 2f64.powi(-24),
            MathPath::Tf32 => 2f64.powi(-11),
            // The dropped low-times-low term is ~2^-22 of the product.
            MathPath::ThreeTf32 => 2f64.powi(-21),
            MathPath::Half => 2f64.powi(-9),
            MathPath::Fp64Fma => 2f64.powi(-53),
            MathPath::Int32 => 0.0,
        }
    }
}

/// How many unit roundoffs the task's rtol must hold for a path to pass.
pub const ROUNDOFF_MARGIN: f64 = 4.0;

/// The least rtol a path needs.
pub fn rtol_needed(path: MathPath) -> f64 {
    ROUNDOFF_MARGIN * path.unit_roundoff()
}

/// Whether a path can meet the task's tolerance.
pub fn admits(acc: &Accuracy, path: MathPath) -> bool {
    acc.rtol >= rtol_needed(path)
}

/// The paths the task's flops may take, fastest first, with whether each can pass.
pub fn paths_for(acc: &Accuracy) -> Vec<(MathPath, bool)> {
    let candidates: &[MathPath] = match acc.flops_kind.as_str() {
        "fp64" => &[MathPath::Fp64Fma],
        "int32" => &[MathPath::Int32],
        "fp16-tensor" | "bf16-tensor" => &[MathPath::Half],
        _ => &[MathPath::Half, MathPath::Tf32, MathPath::ThreeTf32, MathPath::Fp32Fma],
    };
    candidates
        .iter()
        .map(|p| {
            // 16-bit tensor paths for fp32 data count only when the tolerance admits
            // rounding the inputs to 16 bits; for 16-bit tasks the data already is.
            let ok = match (p, acc.flops_kind.as_str()) {
                (MathPath::Half, "fp16-tensor" | "bf16-tensor") => true,
                (MathPath::Fp32Fma | MathPath::Fp64Fma | MathPath::Int32, _) => true,
                _ => admits(acc, *p),
            };
            (*p, ok)
        })
        .collect()
}

/// The fastest path that can meet the tolerance, and its FLOP per SM per clock.
pub fn fastest_admissible(acc: &Accuracy, cc_major: u32) -> (MathPath, f64) {
    paths_for(acc)
        .into_iter()
        .filter(|(_, ok)| *ok)
        .map(|(p, _)| (p, p.flops_per_sm_clock(cc_major)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((MathPath::Fp32Fma, 256.0))
}

/// Relative error the fast intrinsics (`__expf`, `__logf`, `__powf`, `--use_fast_math`)
/// reach on moderate arguments: `__expf` is 2 + 1.17|x| ulp, `__logf` 2^-21.4 absolute
/// near 1; over |x| < 10 that stays under ~1.5e-6 relative.
pub const FAST_MATH_REL_ERROR: f64 = 1.5e-6;

/// Whether the task's tolerance allows the fast intrinsics, with the reason in words.
pub fn fast_math_verdict(acc: Option<&Accuracy>) -> (Option<bool>, String) {
    match acc {
        None => (
            None,
            format!("the task's tolerance is unknown here: fast intrinsics err up to ~{FAST_MATH_REL_ERROR:.1e} relative on moderate arguments (__expf: 2 + 1.17|x| ulp), more for large ones"),
        ),
        Some(a) if a.rtol >= ROUNDOFF_MARGIN * FAST_MATH_REL_ERROR => (
            Some(true),
            format!("the task's rtol {:.0e} holds their ~{FAST_MATH_REL_ERROR:.1e} relative error", a.rtol),
        ),
        Some(a) => (
            Some(false),
            format!(
                "the task's rtol {:.0e} is tighter than {:.0e} ({ROUNDOFF_MARGIN}x their ~{FAST_MATH_REL_ERROR:.1e} error): keep the accurate functions and cut their count instead",
                a.rtol,
                ROUNDOFF_MARGIN * FAST_MATH_REL_ERROR
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp32(rtol: f64) -> Accuracy {
        Accuracy { rtol, atol: 1e-3, output_types: vec!["float".into()], flops_kind: "fp32".into() }
    }

    #[test]
    fn gemm_f32_tolerance_rejects_tf32_and_admits_3xtf32() {
        let acc = fp32(1e-4);
        assert!(!admits(&acc, MathPath::Tf32));
        assert!(admits(&acc, MathPath::ThreeTf32));
        let (path, rate) = fastest_admissible(&acc, 9);
        assert_eq!(path, MathPath::ThreeTf32);
        // 3xTF32 on Hopper beats the FP32 FMA peak by 8/3.
        assert!((rate / 256.0 - 8.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn a_loose_tolerance_admits_tf32_and_16_bit_tasks_take_the_tensor_rate() {
        assert_eq!(fastest_admissible(&fp32(5e-3), 9).0, MathPath::Tf32);
        assert_eq!(fastest_admissible(&fp32(5e-2), 9).0, MathPath::Half);
        let bf16 = Accuracy { flops_kind: "bf16-tensor".into(), ..fp32(1e-2) };
        assert_eq!(fastest_admissible(&bf16, 9), (MathPath::Half, 4096.0));
        let exact = fp32(1e-7);
        assert_eq!(fastest_admissible(&exact, 9).0, MathPath::Fp32Fma);
    }

    #[test]
    fn fast_math_depends_on_the_tolerance() {
        assert_eq!(fast_math_verdict(Some(&fp32(1e-4))).0, Some(true));
        assert_eq!(fast_math_verdict(Some(&fp32(1e-6))).0, Some(false));
        assert_eq!(fast_math_verdict(None).0, None);
    }
}
