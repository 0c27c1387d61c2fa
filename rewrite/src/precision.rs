//! Which arithmetic errors the task's check admits, output by output: a recipe that
//! trades exactness for speed (an intrinsic, a reciprocal) is offered only where every
//! output's tolerance holds [`MARGIN`] times the relative error it brings.
//!
//! A float output admits a relative error `e` when its `rtol` holds `MARGIN * e`; a
//! 16-bit float output counts at its own rounding (2^-8) where that is coarser, unless it
//! is checked exactly (rtol and atol 0), where any error may flip a rounding. An integer
//! output is a value rounded to an integer: an error smaller than one unit moves it to a
//! neighbour at most, so it admits `e` when its `atol` is at least 1 and `MARGIN * e`
//! times the largest magnitude its type holds stays below one unit (int8: e <= 2^-9).
//! An integer output checked exactly admits nothing. This is a prediction for the search,
//! not a proof: every child still passes the check before it counts.

use crate::facts::{ArgKind, Facts, Role, Tolerance};

/// The margin over an approximation's error that a tolerance must hold: the diagnoses'
/// own, so that a prescription and the recipe that carries it out agree.
pub const MARGIN: f64 = heuristics::precision::ROUNDOFF_MARGIN;

/// An output whose tolerance does not admit an error, and why in a phrase.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub output: String,
    pub why: String,
}

impl Facts {
    /// The first output whose tolerance does not admit a relative error `error` in the
    /// values it is computed from; None when every output admits it.
    pub fn refusal(&self, error: f64) -> Option<Refusal> {
        let wide = Tolerance { rtol: self.rtol, atol: self.atol };
        let mut outputs = 0;
        for a in &self.args {
            let ArgKind::Buffer { role: Role::Output | Role::InOut, elem_size, is_float, tolerance, .. } = &a.kind
            else {
                continue;
            };
            outputs += 1;
            let t = tolerance.unwrap_or(wide);
            if let Some(why) = refuses(t, *elem_size, *is_float, error) {
                return Some(Refusal { output: a.name.clone(), why });
            }
        }
        // Facts without outputs (made by hand) are judged by the task-wide tolerance.
        if outputs == 0 {
            return refuses(wide, 4, true, error).map(|why| Refusal { output: "the task".into(), why });
        }
        None
    }

    pub fn admits(&self, error: f64) -> bool {
        self.refusal(error).is_none()
    }
}

fn refuses(t: Tolerance, elem_size: usize, is_float: bool, error: f64) -> Option<String> {
    let need = MARGIN * error;
    if is_float {
        // A 16-bit output counts at its own rounding, unless it is checked exactly: then
        // the smallest error can flip a rounding the check rejects.
        if t.rtol == 0.0 && t.atol == 0.0 {
            return Some("an output checked exactly".to_string());
        }
        let rtol = if elem_size == 2 { t.rtol.max(2f64.powi(-8)) } else { t.rtol };
        return (rtol < need).then(|| format!("rtol {:.0e} where {:.1e} is needed", t.rtol, need));
    }
    let largest = 2f64.powi((8 * elem_size.clamp(1, 8)) as i32 - 1);
    if t.atol < 1.0 {
        return Some(format!("an integer output checked to atol {} (below one unit)", t.atol));
    }
    (need * largest > 1.0).then(|| {
        format!("an integer output of {} bytes, where an error of {error:.1e} can move the largest values by more than one unit", elem_size)
    })
}

#[cfg(test)]
mod tests {
    use crate::facts::{FactsBuilder, Role};

    fn quant(scale_rtol: f64, q_atol: f64) -> crate::Facts {
        FactsBuilder::new("quant")
            .buffer("x", "__nv_bfloat16", Role::Input, "{n}", 64, 64)
            .buffer("q", "int8_t", Role::Output, "{n}", 64, 64)
            .own_tolerance(0.0, q_atol)
            .buffer("scale", "float", Role::Output, "1", 1, 1)
            .own_tolerance(scale_rtol, 0.0)
            .int("n", 64, 64)
            .tolerance(0.0, 0.0)
            .build()
    }

    #[test]
    fn an_int8_output_within_one_unit_admits_small_relative_errors() {
        let f = quant(1e-6, 1.0);
        assert!(f.admits(2.4e-7), "{:?}", f.refusal(2.4e-7));
        // The float output refuses what it cannot hold, and is named.
        let r = f.refusal(2.5e-6).unwrap();
        assert_eq!(r.output, "scale");
        assert!(r.why.contains("rtol 1e-6"), "{}", r.why);
        // int8 holds up to 2^-9: MARGIN times that moves 127 by one unit.
        let f = quant(1.0, 1.0);
        assert!(f.admits(2f64.powi(-9)));
        assert_eq!(f.refusal(2f64.powi(-8)).unwrap().output, "q");
    }

    #[test]
    fn an_integer_output_checked_exactly_admits_nothing() {
        let f = quant(1.0, 0.5);
        let r = f.refusal(1e-12).unwrap();
        assert_eq!(r.output, "q");
        assert!(r.why.contains("below one unit"), "{}", r.why);
    }

    #[test]
    fn sixteen_bit_float_outputs_count_at_their_rounding() {
        let f = FactsBuilder::new("k")
            .buffer("y", "__nv_bfloat16", Role::Output, "{n}", 8, 8)
            .int("n", 8, 8)
            .tolerance(1e-7, 0.0)
            .build();
        assert!(f.admits(2f64.powi(-8) / 4.0));
        assert!(!f.admits(2f64.powi(-8)));
        let exact = FactsBuilder::new("k")
            .buffer("y", "__nv_bfloat16", Role::Output, "{n}", 8, 8)
            .int("n", 8, 8)
            .tolerance(0.0, 0.0)
            .build();
        assert_eq!(exact.refusal(1e-12).unwrap().why, "an output checked exactly");
    }
}
