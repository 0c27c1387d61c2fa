//! The pure half of the correctness wall: comparing outputs with reference outputs,
//! finding elements a kernel never wrote, and checking guard zones around buffers. The
//! judge moves bytes; everything that decides right or wrong on the host lives here, where
//! it is unit-tested without a GPU (the device compare in `gpu::kernels` has the same
//! semantics, and a test holds it to them).

use crate::task::types::ElemType;
use crate::task::Tolerance;
use crate::wall::protocol::{Comparison, Mismatch};
use serde::{Deserialize, Serialize};

/// Bytes before and after every device buffer, filled with [`GUARD_BYTE`]. 256 keeps the
/// buffer itself as aligned as the allocation (16-byte vector loads stay legal).
pub const GUARD_BYTES: usize = 256;
pub const GUARD_BYTE: u8 = 0xCB;

/// Poison written into outputs before the first and the second run of a check. An element
/// holding poison A after run 1 *and* poison B after run 2 was never written: no real
/// computation produces both patterns by chance. All are NaNs for f32, f64, f16 and bf16.
pub fn poison(elem: ElemType, second: bool) -> u64 {
    match (elem.size(), second) {
        (1, false) => 0xA5,
        (1, true) => 0x5A,
        (2, false) => 0xFFA5,
        (2, true) => 0xFFDA,
        (4, false) => 0xFFA5_A5A5,
        (4, true) => 0xFFDA_5A5A,
        (_, false) => 0xFFF5_A5A5_A5A5_A5A5,
        (_, true) => 0xFFFA_5A5A_5A5A_5A5A,
    }
}

/// Fills `bytes` with the poison pattern (for host-side tests and small buffers).
pub fn fill_poison(elem: ElemType, bytes: &mut [u8], second: bool) {
    let p = poison(elem, second).to_le_bytes();
    for chunk in bytes.chunks_exact_mut(elem.size()) {
        chunk.copy_from_slice(&p[..elem.size()]);
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unwritten {
    pub count: usize,
    pub first_index: usize,
}

/// Elements of `bytes` as raw little-endian words of `$n` bytes (`$t`). A loop per size:
/// a bench-size output is tens of millions of elements, and reading each through a copy
/// of run-time length cost 9 ns an element, ten times the loop itself.
macro_rules! words {
    ($bytes:expr, $t:ty, $n:literal) => {
        $bytes.chunks_exact($n).map(|c| <$t>::from_le_bytes(c.try_into().expect("whole elements")))
    };
}

/// Elements that held poison A after run 1 and poison B after run 2.
pub fn find_unwritten(elem: ElemType, run1: &[u8], run2: &[u8]) -> Option<Unwritten> {
    let (a, b) = (poison(elem, false), poison(elem, true));
    let mut found: Option<Unwritten> = None;
    let mut note = |i: usize| match &mut found {
        Some(u) => u.count += 1,
        None => found = Some(Unwritten { count: 1, first_index: i }),
    };
    macro_rules! scan {
        ($t:ty, $n:literal) => {
            for (i, (x, y)) in words!(run1, $t, $n).zip(words!(run2, $t, $n)).enumerate() {
                if x == a as $t && y == b as $t {
                    note(i);
                }
            }
        };
    }
    match elem.size() {
        1 => scan!(u8, 1),
        2 => scan!(u16, 2),
        4 => scan!(u32, 4),
        _ => scan!(u64, 8),
    }
    found
}

/// Elements of `run` that still hold the given poison.
pub fn count_poison(elem: ElemType, run: &[u8], second: bool) -> usize {
    let p = poison(elem, second);
    match elem.size() {
        1 => words!(run, u8, 1).filter(|&x| x == p as u8).count(),
        2 => words!(run, u16, 2).filter(|&x| x == p as u16).count(),
        4 => words!(run, u32, 4).filter(|&x| x == p as u32).count(),
        _ => words!(run, u64, 8).filter(|&x| x == p).count(),
    }
}

trait Merge {
    fn merge(&mut self, other: Comparison);
}

impl Merge for Comparison {
    fn merge(&mut self, other: Comparison) {
        self.elements += other.elements;
        self.mismatches += other.mismatches;
        if self.first_mismatch.is_none() {
            self.first_mismatch = other.first_mismatch;
        }
        self.max_abs_err = self.max_abs_err.max(other.max_abs_err);
        self.max_rel_err = self.max_rel_err.max(other.max_rel_err);
    }
}

/// Whether `got` passes against `expected`: |got - expected| <= atol + rtol * |expected|
/// for floats, NaN where and only where the reference has NaN, infinities equal; integers
/// must be within `atol` (exact by default).
pub fn element_ok(elem: ElemType, got: f64, expected: f64, tol: Tolerance) -> bool {
    if expected.is_nan() || got.is_nan() {
        return expected.is_nan() && got.is_nan();
    }
    if expected.is_infinite() || got.is_infinite() {
        return got == expected;
    }
    let diff = (got - expected).abs();
    if elem.is_float() {
        diff <= tol.atol + tol.rtol * expected.abs()
    } else {
        diff <= tol.atol.floor()
    }
}

fn compare_range(elem: ElemType, got: &[u8], expected: &[u8], tol: Tolerance, offset: usize) -> Comparison {
    let n = got.len() / elem.size();
    let mut c = Comparison { elements: n, ..Default::default() };
    let mut judge = |i: usize, g: f64, e: f64| {
        let finite = g.is_finite() && e.is_finite();
        if finite {
            let abs = (g - e).abs();
            c.max_abs_err = c.max_abs_err.max(abs);
            if e != 0.0 {
                c.max_rel_err = c.max_rel_err.max(abs / e.abs());
            }
        }
        if !element_ok(elem, g, e, tol) {
            c.mismatches += 1;
            if c.first_mismatch.is_none() {
                c.first_mismatch = Some(Mismatch { index: offset + i, got: g, expected: e });
            }
        }
    };
    if elem == ElemType::F32 {
        // The common case, kept free of per-element dispatch.
        for (i, (g, e)) in got.chunks_exact(4).zip(expected.chunks_exact(4)).enumerate() {
            let g = f32::from_le_bytes([g[0], g[1], g[2], g[3]]) as f64;
            let e = f32::from_le_bytes([e[0], e[1], e[2], e[3]]) as f64;
            judge(i, g, e);
        }
    } else {
        for i in 0..n {
            judge(i, elem.read_f64(got, i), elem.read_f64(expected, i));
        }
    }
    c
}

/// Compares two buffers of `elem`, splitting large ones across `threads`.
pub fn compare(elem: ElemType, got: &[u8], expected: &[u8], tol: Tolerance, threads: usize) -> Comparison {
    assert_eq!(got.len(), expected.len(), "compared buffers have equal lengths");
    let n = got.len() / elem.size();
    let threads = threads.clamp(1, 64);
    if threads == 1 || n < (1 << 20) {
        return compare_range(elem, got, expected, tol, 0);
    }
    let per = n.div_ceil(threads);
    let step = per * elem.size();
    let parts: Vec<Comparison> = std::thread::scope(|s| {
        let handles: Vec<_> = got
            .chunks(step)
            .zip(expected.chunks(step))
            .enumerate()
            .map(|(k, (g, e))| s.spawn(move || compare_range(elem, g, e, tol, k * per)))
            .collect();
        handles.into_iter().map(|h| h.join().expect("compare thread")).collect()
    });
    let mut total = Comparison::default();
    for p in parts {
        total.merge(p);
    }
    total
}

/// The first byte offset (relative to the guard's start) whose canary was overwritten.
pub fn guard_damage(guard: &[u8]) -> Option<usize> {
    guard.iter().position(|b| *b != GUARD_BYTE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TOL: Tolerance = Tolerance { rtol: 1e-5, atol: 1e-6 };

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn tolerance_is_atol_plus_rtol_times_reference() {
        assert!(element_ok(ElemType::F32, 1.0 + 1e-5, 1.0, TOL));
        assert!(!element_ok(ElemType::F32, 1.0 + 2e-5, 1.0, TOL));
        assert!(element_ok(ElemType::F32, 5e-7, 0.0, TOL));
        assert!(!element_ok(ElemType::F32, 2e-6, 0.0, TOL));
        assert!(element_ok(ElemType::F32, -1000.0 - 0.009, -1000.0, TOL));
    }

    #[test]
    fn nan_and_inf_must_agree() {
        assert!(element_ok(ElemType::F32, f64::NAN, f64::NAN, TOL));
        assert!(!element_ok(ElemType::F32, f64::NAN, 1.0, TOL));
        assert!(!element_ok(ElemType::F32, 1.0, f64::NAN, TOL));
        assert!(element_ok(ElemType::F32, f64::INFINITY, f64::INFINITY, TOL));
        assert!(!element_ok(ElemType::F32, f64::NEG_INFINITY, f64::INFINITY, TOL));
        assert!(!element_ok(ElemType::F32, f64::INFINITY, 1e30, TOL));
        assert!(!element_ok(ElemType::F32, 3.4e38, f64::INFINITY, TOL));
    }

    #[test]
    fn integers_compare_exactly_unless_atol_allows() {
        assert!(!element_ok(ElemType::I32, 1_000_001.0, 1_000_000.0, TOL), "rtol does not apply to counts");
        assert!(element_ok(ElemType::I32, 7.0, 7.0, TOL));
        assert!(element_ok(ElemType::I32, 8.0, 7.0, Tolerance { rtol: 0.0, atol: 1.0 }));
    }

    #[test]
    fn comparison_reports_first_mismatch_and_error_sizes() {
        let got = f32s(&[1.0, 2.0, 3.5, 4.0, f32::NAN]);
        let exp = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        let c = compare(ElemType::F32, &got, &exp, TOL, 1);
        assert_eq!(c.mismatches, 2);
        assert_eq!(c.first_mismatch, Some(Mismatch { index: 2, got: 3.5, expected: 3.0 }));
        assert_eq!(c.max_abs_err, 0.5);
        assert!((c.max_rel_err - 0.5 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn threaded_comparison_equals_serial_with_global_indices() {
        let n = (1 << 20) * 3 + 5;
        let exp: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut got = exp.clone();
        got[2_500_000] *= 2.0;
        got[3_000_001] = f32::INFINITY;
        let (g, e) = (f32s(&got), f32s(&exp));
        let serial = compare(ElemType::F32, &g, &e, TOL, 1);
        let threaded = compare(ElemType::F32, &g, &e, TOL, 7);
        assert_eq!(serial, threaded);
        assert_eq!(threaded.mismatches, 2);
        assert_eq!(threaded.first_mismatch.unwrap().index, 2_500_000);
    }

    #[test]
    fn bf16_and_f16_outputs_compare_in_their_precision() {
        let tol = Tolerance { rtol: 1e-2, atol: 1e-2 };
        let mk = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| half::bf16::from_f32(*x).to_le_bytes()).collect() };
        let c = compare(ElemType::Bf16, &mk(&[1.0, 2.0]), &mk(&[1.0, 2.5]), tol, 1);
        assert_eq!(c.mismatches, 1);
        assert_eq!(c.first_mismatch.unwrap().index, 1);
    }

    #[test]
    fn poisons_are_nans_for_float_outputs_and_distinct() {
        for elem in [ElemType::F32, ElemType::F64, ElemType::F16, ElemType::Bf16] {
            for second in [false, true] {
                let mut b = vec![0u8; elem.size()];
                fill_poison(elem, &mut b, second);
                assert!(elem.read_f64(&b, 0).is_nan(), "{elem} second={second}");
            }
        }
        for elem in [ElemType::U8, ElemType::Bf16, ElemType::I32, ElemType::I64] {
            assert_ne!(poison(elem, false), poison(elem, true));
        }
    }

    #[test]
    fn unwritten_means_poisoned_in_both_runs() {
        let elem = ElemType::F32;
        let mut run1 = f32s(&[1.0, 2.0, 3.0, 4.0]);
        let mut run2 = run1.clone();
        let a = poison(elem, false).to_le_bytes();
        let b = poison(elem, true).to_le_bytes();
        run1[12..16].copy_from_slice(&a[..4]);
        run2[12..16].copy_from_slice(&b[..4]);
        // Element 1 holds poison A in run 1 only: written (garbage) in run 2, so not "unwritten".
        run1[4..8].copy_from_slice(&a[..4]);
        assert_eq!(find_unwritten(elem, &run1, &run2), Some(Unwritten { count: 1, first_index: 3 }));
        assert_eq!(count_poison(elem, &run2, true), 1);
        assert_eq!(find_unwritten(elem, &run2, &run2), None);
    }

    #[test]
    fn poison_scans_read_whole_elements_of_every_size() {
        for elem in [ElemType::U8, ElemType::Bf16, ElemType::F32, ElemType::F64] {
            let s = elem.size();
            let (a, b) = (poison(elem, false).to_le_bytes(), poison(elem, true).to_le_bytes());
            let n = 40;
            let mut run1: Vec<u8> = (0..n * s).map(|k| (k % 7) as u8).collect();
            let mut run2 = run1.clone();
            for i in [3, 17, 39] {
                run1[i * s..(i + 1) * s].copy_from_slice(&a[..s]);
                run2[i * s..(i + 1) * s].copy_from_slice(&b[..s]);
            }
            // Poison A in run 1 only, and a pattern that straddles two elements: neither counts.
            run1[5 * s..6 * s].copy_from_slice(&a[..s]);
            if s > 1 {
                run2[8 * s + 1..9 * s + 1].copy_from_slice(&b[..s]);
            }
            assert_eq!(find_unwritten(elem, &run1, &run2), Some(Unwritten { count: 3, first_index: 3 }), "{elem}");
            assert_eq!(count_poison(elem, &run1, false), 4, "{elem}");
            assert_eq!(count_poison(elem, &run2, true), 3, "{elem}");
            assert_eq!(count_poison(elem, &run2, false), 0, "{elem}");
        }
    }

    #[test]
    fn guard_damage_finds_the_first_overwritten_byte() {
        let mut g = vec![GUARD_BYTE; GUARD_BYTES];
        assert_eq!(guard_damage(&g), None);
        g[4] = 0;
        assert_eq!(guard_damage(&g), Some(4));
    }

    proptest! {
        #[test]
        fn identical_buffers_always_pass(v in prop::collection::vec(any::<f32>(), 0..200)) {
            let b = f32s(&v);
            let exact = Tolerance { rtol: 0.0, atol: 0.0 };
            prop_assert!(compare(ElemType::F32, &b, &b, exact, 1).ok());
        }

        #[test]
        fn comparison_is_monotone_in_tolerance(g in -1e3f32..1e3, e in -1e3f32..1e3, t in 0.0f64..1.0) {
            let tight = Tolerance { rtol: t, atol: t };
            let loose = Tolerance { rtol: t * 2.0, atol: t * 2.0 };
            if element_ok(ElemType::F32, g as f64, e as f64, tight) {
                prop_assert!(element_ok(ElemType::F32, g as f64, e as f64, loose));
            }
        }
    }
}
