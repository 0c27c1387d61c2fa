//! The judge's own GPU kernels, loaded as PTX by the driver at run time (no toolkit in the
//! build): `nightshift_generate` fills a buffer with a fresh input set from seeds the judge
//! keeps, `nightshift_check_generated` finds the first element of a buffer that no longer
//! holds its set, and `nightshift_compare` compares an output with its reference output
//! with exactly [`verify::compare`](crate::wall::judge::verify::compare)'s semantics.
//!
//! The sources sit beside this file (`generate.cu`, `compare.cu` and the headers they
//! share, whose `__host__ __device__` functions hold every element's logic); the PTX is
//! compiled from them for compute_75 by `scripts/ptx.sh` and committed, and
//! `tests/judge_kernels.rs` checks that the two agree and runs the same headers built for
//! the CPU against the host's generator and comparison.
//!
//! Launches are 1-D: any grid, any block size ([`BLOCK`] is what the judge uses); each
//! thread takes elements `i, i + grid threads, ...` of a `u64` index space. Buffers are the
//! judge's allocations, aligned to their element size. Before a launch the judge sets
//! `*first_bad` to [`NONE`] (check) and the result to [`CmpResult::INITIAL`] (compare).
//! The structs here mirror `specs.cuh` field for field (`#[repr(C)]`, layouts asserted on
//! both sides) and are passed by value as kernel parameters (`GenSpec`, `CmpSpec`) or by
//! device pointer (`CmpResult`).

use crate::task::init::Init;
use crate::task::types::ElemType;
use crate::task::Tolerance;
use crate::wall::protocol::{Comparison, Mismatch};

/// `nightshift_generate` and `nightshift_check_generated`.
pub const GENERATE_PTX: &str = include_str!("generate.ptx");
/// `nightshift_compare`.
pub const COMPARE_PTX: &str = include_str!("compare.ptx");

/// `(unsigned char* out, GenSpec spec)`: writes `spec.count` elements.
pub const GENERATE_KERNEL: &str = "nightshift_generate";
/// `(const unsigned char* buf, GenSpec spec, unsigned long long* first_bad)`: lowers
/// `*first_bad` (atomicMin) to the first element whose bits differ from the set's.
pub const CHECK_GENERATED_KERNEL: &str = "nightshift_check_generated";
/// `(const unsigned char* got, const unsigned char* expected, CmpSpec spec, CmpResult* result)`:
/// adds the comparison into `*result`.
pub const COMPARE_KERNEL: &str = "nightshift_compare";

/// The block size the judge launches with (any works).
pub const BLOCK: u32 = 256;

/// "No such element": the starting value of `first_bad` and of the result's index fields.
pub const NONE: u64 = u64::MAX;

/// `GenSpec::dist` codes (`specs.cuh`).
pub mod dist {
    pub const NORMAL: u32 = 0;
    pub const UNIFORM: u32 = 1;
    pub const RANDINT: u32 = 2;
    pub const CONST: u32 = 3;
    pub const ARANGE: u32 = 4;
    pub const RANDPERM: u32 = 5;
}

/// The kernels' code for an element type (`specs.cuh`), in `ElemType`'s order.
pub fn elem_code(elem: ElemType) -> u32 {
    match elem {
        ElemType::F32 => 0,
        ElemType::F64 => 1,
        ElemType::F16 => 2,
        ElemType::Bf16 => 3,
        ElemType::I8 => 4,
        ElemType::U8 => 5,
        ElemType::I16 => 6,
        ElemType::U16 => 7,
        ElemType::I32 => 8,
        ElemType::U32 => 9,
        ElemType::I64 => 10,
        ElemType::U64 => 11,
        ElemType::F8E4M3 => 12,
        ElemType::F8E5M2 => 13,
    }
}

/// How one buffer is generated: `count` elements of `elem`, drawn from `dist` for the set
/// (`seed`, `stream`). `a` and `b` are the float parameters (normal: mean, std; uniform:
/// lo, hi; const: value), `lo` and `hi` randint's half-open range; unused ones are zero.
///
/// The kernel's bits are statistically independent across seeds and streams, not secret:
/// the mixing (random.cuh) is invertible, so a kernel that reads a set could in principle
/// work back to its seed. Each set's `seed` must therefore come from a cryptographic
/// generator keyed by the judge's secret (as `task::init` keys its chunks with ChaCha8),
/// never from a counter, so that one set tells nothing about the next.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenSpec {
    pub count: u64,
    pub seed: u64,
    pub stream: u64,
    pub dist: u32,
    pub elem: u32,
    pub a: f64,
    pub b: f64,
    pub lo: i64,
    pub hi: i64,
}

impl GenSpec {
    /// The spec for a task argument's `init`. `stream` tells a set's arguments apart (the
    /// argument's index, as the host generator uses it). The pair (`init`, `elem`) is
    /// expected to pass [`Init::check_fits`], as a resolved task's do; others still
    /// generate, through the host's saturating conversions.
    pub fn new(init: &Init, elem: ElemType, count: u64, seed: u64, stream: u64) -> GenSpec {
        let mut spec = GenSpec { count, seed, stream, dist: 0, elem: elem_code(elem), a: 0.0, b: 0.0, lo: 0, hi: 0 };
        match *init {
            Init::Normal { mean, std } => (spec.dist, spec.a, spec.b) = (dist::NORMAL, mean, std),
            Init::Uniform { lo, hi } => (spec.dist, spec.a, spec.b) = (dist::UNIFORM, lo, hi),
            Init::RandInt { lo, hi } => (spec.dist, spec.lo, spec.hi) = (dist::RANDINT, lo, hi),
            Init::Const { value } => (spec.dist, spec.a) = (dist::CONST, value),
            Init::Arange => spec.dist = dist::ARANGE,
            Init::RandPerm => spec.dist = dist::RANDPERM,
        }
        spec
    }
}

/// How one output is compared with its reference: `count` elements of `elem` within the
/// task's tolerance. `pad` keeps the C layout explicit; it is zero.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CmpSpec {
    pub count: u64,
    pub elem: u32,
    pub pad: u32,
    pub rtol: f64,
    pub atol: f64,
}

impl CmpSpec {
    pub fn new(elem: ElemType, count: u64, tol: Tolerance) -> CmpSpec {
        CmpSpec { count, elem: elem_code(elem), pad: 0, rtol: tol.rtol, atol: tol.atol }
    }
}

/// What `nightshift_compare` found, as it lies in device memory. The `_bits` fields are
/// f64 bit patterns of non-negative values (raised with atomicMax on the bits).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmpResult {
    pub mismatches: u64,
    pub first_mismatch: u64,
    pub max_abs_err_bits: u64,
    pub max_rel_err_bits: u64,
    pub expected_nonfinite: u64,
    pub first_expected_nonfinite: u64,
}

impl CmpResult {
    /// What the judge writes into the result before a launch: zero, "none" for indices.
    pub const INITIAL: CmpResult = CmpResult {
        mismatches: 0,
        first_mismatch: NONE,
        max_abs_err_bits: 0,
        max_rel_err_bits: 0,
        expected_nonfinite: 0,
        first_expected_nonfinite: NONE,
    };

    /// The findings of a comparison of `count` elements, in the host's terms.
    pub fn comparison(&self, count: u64) -> DeviceComparison {
        let index = |i: u64| (i != NONE).then_some(i as usize);
        DeviceComparison {
            elements: count as usize,
            mismatches: self.mismatches as usize,
            first_mismatch: index(self.first_mismatch),
            max_abs_err: f64::from_bits(self.max_abs_err_bits),
            max_rel_err: f64::from_bits(self.max_rel_err_bits),
            expected_nonfinite: self.expected_nonfinite as usize,
            first_expected_nonfinite: index(self.first_expected_nonfinite),
        }
    }
}

/// A comparison made on the GPU: [`Comparison`] less the first mismatch's values, which the
/// device does not keep (the index is found by atomicMin across threads). The host reads
/// the two elements at `first_mismatch` from the failing set and completes it with
/// [`DeviceComparison::complete`]. Also counts the reference's NaN and infinite elements.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceComparison {
    pub elements: usize,
    pub mismatches: usize,
    /// The index only: see [`DeviceComparison::complete`] for its values.
    pub first_mismatch: Option<usize>,
    pub max_abs_err: f64,
    pub max_rel_err: f64,
    pub expected_nonfinite: usize,
    pub first_expected_nonfinite: Option<usize>,
}

impl DeviceComparison {
    pub fn ok(&self) -> bool {
        self.mismatches == 0
    }

    /// The host's [`Comparison`]; `values(index)` gives (got, expected) at the first
    /// mismatch, read by the host, and is called only when there is one.
    pub fn complete(&self, values: impl FnOnce(usize) -> (f64, f64)) -> Comparison {
        Comparison {
            elements: self.elements,
            mismatches: self.mismatches,
            first_mismatch: self.first_mismatch.map(|index| {
                let (got, expected) = values(index);
                Mismatch { index, got, expected }
            }),
            max_abs_err: self.max_abs_err,
            max_rel_err: self.max_rel_err,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_specs_cuh() {
        assert_eq!(size_of::<GenSpec>(), 64);
        assert_eq!(
            [
                offset_of!(GenSpec, count),
                offset_of!(GenSpec, seed),
                offset_of!(GenSpec, stream),
                offset_of!(GenSpec, dist),
                offset_of!(GenSpec, elem),
                offset_of!(GenSpec, a),
                offset_of!(GenSpec, b),
                offset_of!(GenSpec, lo),
                offset_of!(GenSpec, hi)
            ],
            [0, 8, 16, 24, 28, 32, 40, 48, 56]
        );
        assert_eq!(size_of::<CmpSpec>(), 32);
        assert_eq!(
            [
                offset_of!(CmpSpec, count),
                offset_of!(CmpSpec, elem),
                offset_of!(CmpSpec, pad),
                offset_of!(CmpSpec, rtol),
                offset_of!(CmpSpec, atol)
            ],
            [0, 8, 12, 16, 24]
        );
        assert_eq!(size_of::<CmpResult>(), 48);
        assert_eq!(
            [
                offset_of!(CmpResult, mismatches),
                offset_of!(CmpResult, first_mismatch),
                offset_of!(CmpResult, max_abs_err_bits),
                offset_of!(CmpResult, max_rel_err_bits),
                offset_of!(CmpResult, expected_nonfinite),
                offset_of!(CmpResult, first_expected_nonfinite)
            ],
            [0, 8, 16, 24, 32, 40]
        );
    }

    #[test]
    fn every_init_maps_to_its_distribution_and_parameters() {
        let spec = |init: Init| GenSpec::new(&init, ElemType::Bf16, 10, 7, 3);
        let base = GenSpec { count: 10, seed: 7, stream: 3, dist: 0, elem: 3, a: 0.0, b: 0.0, lo: 0, hi: 0 };
        assert_eq!(spec(Init::Normal { mean: 1.5, std: 2.0 }), GenSpec { dist: dist::NORMAL, a: 1.5, b: 2.0, ..base });
        assert_eq!(spec(Init::Uniform { lo: -3.0, hi: 5.0 }), GenSpec { dist: dist::UNIFORM, a: -3.0, b: 5.0, ..base });
        assert_eq!(
            spec(Init::RandInt { lo: i64::MIN, hi: i64::MAX }),
            GenSpec { dist: dist::RANDINT, lo: i64::MIN, hi: i64::MAX, ..base }
        );
        assert_eq!(spec(Init::Const { value: -2.5 }), GenSpec { dist: dist::CONST, a: -2.5, ..base });
        assert_eq!(spec(Init::Arange), GenSpec { dist: dist::ARANGE, ..base });
        assert_eq!(spec(Init::RandPerm), GenSpec { dist: dist::RANDPERM, ..base });
        // Every spelling `init` accepts lands on one of them.
        for text in
            ["normal(0, 1)", "uniform(0, 1)", "randint(0, 9)", "const(2)", "zeros", "ones", "arange", "randperm"]
        {
            assert!(spec(Init::parse(text).unwrap()).dist <= dist::RANDPERM, "{text}");
        }
    }

    #[test]
    fn element_codes_follow_elem_type_order() {
        let all = [
            ElemType::F32,
            ElemType::F64,
            ElemType::F16,
            ElemType::Bf16,
            ElemType::I8,
            ElemType::U8,
            ElemType::I16,
            ElemType::U16,
            ElemType::I32,
            ElemType::U32,
            ElemType::I64,
            ElemType::U64,
            ElemType::F8E4M3,
            ElemType::F8E5M2,
        ];
        for (code, elem) in all.into_iter().enumerate() {
            assert_eq!(elem_code(elem), code as u32, "{elem}");
        }
        let spec = CmpSpec::new(ElemType::I16, 5, Tolerance { rtol: 1e-3, atol: 2.0 });
        assert_eq!(spec, CmpSpec { count: 5, elem: 6, pad: 0, rtol: 1e-3, atol: 2.0 });
    }

    #[test]
    fn a_device_result_completes_to_the_host_comparison() {
        let clean = CmpResult { max_abs_err_bits: 0.5f64.to_bits(), ..CmpResult::INITIAL }.comparison(9);
        assert!(clean.ok());
        assert_eq!((clean.first_mismatch, clean.first_expected_nonfinite), (None, None));
        let full = clean.complete(|_| panic!("no mismatch to read"));
        assert_eq!(full, Comparison { elements: 9, max_abs_err: 0.5, ..Default::default() });

        let bad = CmpResult {
            mismatches: 2,
            first_mismatch: 4,
            max_rel_err_bits: 0.25f64.to_bits(),
            expected_nonfinite: 1,
            first_expected_nonfinite: 6,
            ..CmpResult::INITIAL
        }
        .comparison(9);
        assert!(!bad.ok());
        assert_eq!((bad.first_mismatch, bad.first_expected_nonfinite), (Some(4), Some(6)));
        let full = bad.complete(|i| (i as f64, -1.0));
        assert_eq!(full.first_mismatch, Some(Mismatch { index: 4, got: 4.0, expected: -1.0 }));
        assert_eq!((full.mismatches, full.max_rel_err, full.elements), (2, 0.25, 9));
    }
}
