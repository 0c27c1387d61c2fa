//! PLACEHOLDER until the kernels branch lands: the interface the judge codes against.
use crate::task::init::Init;
use crate::task::types::ElemType;

pub const GENERATE_PTX: &str = "";
pub const COMPARE_PTX: &str = "";
pub const GENERATE: &str = "nightshift_generate";
pub const CHECK_GENERATED: &str = "nightshift_check_generated";
pub const COMPARE: &str = "nightshift_compare";

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
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
    pub fn new(_init: &Init, _elem: ElemType, count: u64, seed: u64, stream: u64) -> GenSpec {
        GenSpec { count, seed, stream, ..Default::default() }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CmpSpec {
    pub count: u64,
    pub elem: u32,
    pub pad: u32,
    pub rtol: f64,
    pub atol: f64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CmpResult {
    pub mismatches: u64,
    pub first_mismatch: u64,
    pub max_abs_err_bits: u64,
    pub max_rel_err_bits: u64,
    pub expected_nonfinite: u64,
    pub first_expected_nonfinite: u64,
}

impl CmpSpec {
    pub fn new(elem: ElemType, count: u64, tol: crate::task::Tolerance) -> CmpSpec {
        let _ = elem;
        CmpSpec { count, elem: 0, pad: 0, rtol: tol.rtol, atol: tol.atol }
    }
}

impl CmpResult {
    pub fn fresh() -> CmpResult {
        CmpResult { first_mismatch: u64::MAX, first_expected_nonfinite: u64::MAX, ..Default::default() }
    }
}
