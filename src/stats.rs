//! When a speedup is a win. The baseline is timed before and after the candidate in rounds,
//! and each candidate round pairs with the matching baseline rounds into one ratio; their
//! spread is how far the speedup itself moves. A claim of "faster" (the best kernel, the exit code, a report's headline) needs
//! the 95% t-interval of the log speedup to clear 1 plus a margin, where the margin also
//! covers what the run measured timing the baseline against itself: two identical
//! libraries read 1.006x [1.004, 1.008] on an H100, a bias no number of rounds averages
//! away. The search's reward stays the point estimate; only claims need the interval.
//! Pure arithmetic: no I/O.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The confidence of every interval nightshift prints.
pub const CONFIDENCE: f64 = 0.95;

/// The smallest gain called a win when the run asks for nothing else (`--min-gain 1%`).
pub const DEFAULT_MIN_GAIN: f64 = 0.01;

/// A speedup and its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Speedup {
    pub point: f64,
    pub low: f64,
    pub high: f64,
}

impl Speedup {
    /// The interval of `point` (baseline median over candidate median) from the per-round
    /// medians of the two sides, paired by round. The half-width is the t-interval of the
    /// mean log ratio; it is centred on the point estimate so that the number people see
    /// always lies inside its own interval. None with fewer than two paired rounds.
    pub fn from_rounds(point: f64, baseline_rounds: &[f64], candidate_rounds: &[f64]) -> Option<Speedup> {
        let logs: Vec<f64> = baseline_rounds
            .iter()
            .zip(candidate_rounds)
            .filter(|(b, c)| b.is_finite() && c.is_finite() && **b > 0.0 && **c > 0.0)
            .map(|(b, c)| (b / c).ln())
            .collect();
        let n = logs.len();
        if n < 2 || !point.is_finite() || point <= 0.0 {
            return None;
        }
        let mean = logs.iter().sum::<f64>() / n as f64;
        let var = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t_quantile_975(n - 1) * (var / n as f64).sqrt();
        Some(Speedup { point, low: point * (-half).exp(), high: point * half.exp() })
    }

    /// An interval of one point (no rounds were recorded): never a win by itself.
    pub fn unmeasured(point: f64) -> Speedup {
        Speedup { point, low: f64::NAN, high: f64::NAN }
    }

    pub fn has_interval(&self) -> bool {
        self.low.is_finite() && self.high.is_finite()
    }

    /// Whether a kernel measured at `other` (a speedup over the same baseline) runs at this
    /// one's speed as far as the timing can tell: `other` lies inside this interval, or
    /// within `min_gain` (`--min-gain`, a fraction) of this point. The difference is then
    /// no gain that clears the noise, for the reason [`Bar`] asks a win to clear both the
    /// rounds' spread and a margin that more rounds do not buy. Without an interval only
    /// the margin counts; with `min_gain` 0 and no interval nothing is the same speed.
    pub fn same_speed(&self, other: f64, min_gain: f64) -> bool {
        if !(other.is_finite() && other > 0.0 && self.point.is_finite() && self.point > 0.0) {
            return false;
        }
        let inside = self.has_interval() && self.low <= other && other <= self.high;
        inside || (other / self.point).ln().abs() < min_gain.max(0.0).ln_1p()
    }
}

/// The weighted geometric mean of speedups at several served shapes, `weights` summing
/// to 1: the objective over shapes. Its interval adds the shapes' log half-widths in
/// quadrature, weighted (each shape's rounds are independent of the others'); a shape
/// without an interval leaves the mean without one.
pub fn weighted_geomean(parts: &[(f64, Speedup)]) -> Speedup {
    let total: f64 = parts.iter().map(|(w, _)| w.max(0.0)).sum();
    if parts.is_empty()
        || total.is_nan()
        || total <= 0.0
        || parts.iter().any(|(_, s)| !(s.point.is_finite() && s.point > 0.0))
    {
        return Speedup::unmeasured(f64::NAN);
    }
    let log: f64 = parts.iter().map(|(w, s)| w.max(0.0) / total * s.point.ln()).sum();
    let point = log.exp();
    if !parts.iter().all(|(_, s)| s.has_interval()) {
        return Speedup::unmeasured(point);
    }
    let half = parts
        .iter()
        .map(|(w, s)| {
            let h = (s.high / s.point).ln().max((s.point / s.low).ln());
            (w.max(0.0) / total * h).powi(2)
        })
        .sum::<f64>()
        .sqrt();
    Speedup { point, low: point * (-half).exp(), high: point * half.exp() }
}

impl fmt::Display for Speedup {
    /// `1.150x [1.142, 1.158]`, or `1.150x` without an interval.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}x", self.point)?;
        if self.has_interval() {
            write!(f, " [{:.3}, {:.3}]", self.low, self.high)?;
        }
        Ok(())
    }
}

/// The line a speedup's interval must clear to be called faster.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bar {
    /// The gain asked for (`--min-gain`), as a fraction: 0.01 is 1%.
    pub min_gain: f64,
    /// How far the baseline timed against itself strayed from 1 (upper end of its
    /// interval's distance from 1); 0 when not measured.
    pub self_bias: f64,
}

impl Bar {
    pub fn new(min_gain: f64, baseline_self: Option<&Speedup>) -> Bar {
        let self_bias =
            baseline_self.filter(|s| s.has_interval()).map(|s| (s.high - 1.0).max(1.0 - s.low).max(0.0)).unwrap_or(0.0);
        Bar { min_gain: min_gain.max(0.0), self_bias }
    }

    /// The speedup the lower end of an interval must exceed.
    pub fn threshold(&self) -> f64 {
        1.0 + self.min_gain.max(self.self_bias)
    }

    /// Faster, as far as the rounds can tell: the whole interval is above the threshold.
    pub fn is_win(&self, s: &Speedup) -> bool {
        s.has_interval() && s.low > self.threshold()
    }

    /// Slower than the baseline beyond the margin: the point estimate under the reciprocal
    /// of the threshold, or no number at all. A served shape that does so disqualifies a
    /// kernel, whatever its mean; the point, not the interval, decides, since a noisy
    /// short shape must not hide a loss behind a wide interval.
    pub fn is_regression(&self, s: &Speedup) -> bool {
        !(s.point.is_finite() && s.point >= 1.0 / self.threshold())
    }

    /// One line for the run's log and report.
    pub fn describe(&self) -> String {
        let why = if self.self_bias > self.min_gain {
            format!(
                "the baseline timed against itself strayed {:.2}%, more than --min-gain {:.2}%",
                100.0 * self.self_bias,
                100.0 * self.min_gain
            )
        } else {
            format!("--min-gain {:.2}%", 100.0 * self.min_gain)
        };
        format!(
            "a kernel counts as faster only when the lower end of its {:.0}% speedup interval clears {:.3}x ({why})",
            100.0 * CONFIDENCE,
            self.threshold()
        )
    }
}

impl Default for Bar {
    fn default() -> Self {
        Bar { min_gain: DEFAULT_MIN_GAIN, self_bias: 0.0 }
    }
}

/// The 97.5% quantile of Student's t with `df` degrees of freedom (two-sided 95%).
fn t_quantile_975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df - 1],
        31..=40 => 2.021,
        41..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_tight_win_clears_the_bar_and_noise_does_not() {
        // 34 rounds of a real H100 run: node 5 of softmax-tune, 1.167x.
        let b = [0.1112, 0.1115, 0.1113, 0.1116, 0.1111, 0.1114];
        let c = [0.0953, 0.0955, 0.0954, 0.0952, 0.0953, 0.0956];
        let s = Speedup::from_rounds(1.167, &b, &c).unwrap();
        assert!(s.low > 1.16 && s.high < 1.175, "{s}");
        assert!(Bar::default().is_win(&s));
        // 1.004x with 2% round-to-round noise: the interval straddles 1.
        let b = [1.0, 1.0, 1.0, 1.0, 1.0];
        let c = [0.996 * 1.02, 0.996 * 0.98, 0.996 * 1.01, 0.996 * 0.99, 0.996];
        let s = Speedup::from_rounds(1.004, &b, &c).unwrap();
        assert!(s.low < 1.0 && s.high > 1.004, "{s}");
        assert!(!Bar::default().is_win(&s));
    }

    #[test]
    fn the_baseline_against_itself_raises_the_bar() {
        let selfie = Speedup { point: 1.006, low: 1.004, high: 1.013 };
        let bar = Bar::new(0.01, Some(&selfie));
        assert!((bar.threshold() - 1.013).abs() < 1e-12);
        assert!(bar.describe().contains("strayed 1.30%"), "{}", bar.describe());
        assert!(!bar.is_win(&Speedup { point: 1.02, low: 1.012, high: 1.03 }));
        assert!(Bar::new(0.01, None).is_win(&Speedup { point: 1.02, low: 1.012, high: 1.03 }));
    }

    #[test]
    fn the_same_speed_is_inside_the_interval_or_within_the_margin() {
        let wide = Speedup { point: 8.0, low: 7.6, high: 8.4 };
        assert!(wide.same_speed(8.3, 0.01), "inside the interval, past the margin");
        assert!(!wide.same_speed(8.5, 0.01) && !wide.same_speed(7.5, 0.01));
        let tight = Speedup { point: 8.0, low: 7.99, high: 8.01 };
        assert!(tight.same_speed(8.07, 0.01), "within 1% though outside a tight interval");
        assert!(!tight.same_speed(8.09, 0.01));
        let point = Speedup::unmeasured(1.0);
        assert!(point.same_speed(1.009, 0.01) && !point.same_speed(1.011, 0.01));
        assert!(!point.same_speed(1.0, 0.0), "--min-gain 0 without an interval: nothing is the same speed");
        assert!(!point.same_speed(f64::NAN, 0.01) && !Speedup::unmeasured(0.0).same_speed(1.0, 0.01));
    }

    #[test]
    fn the_weighted_geomean_of_shapes_and_its_interval() {
        let decode = Speedup { point: 0.5, low: 0.45, high: 0.55 };
        let prefill = Speedup { point: 2.0, low: 1.98, high: 2.02 };
        let mean = weighted_geomean(&[(0.5, decode), (0.5, prefill)]);
        assert!((mean.point - 1.0).abs() < 1e-12, "{mean}");
        // Quadrature of the weighted log half-widths: decode's dominates.
        let h = ((0.5 * (0.55f64 / 0.5).ln().max((0.5f64 / 0.45).ln())).powi(2)
            + (0.5 * (2.02f64 / 2.0).ln().max((2.0f64 / 1.98).ln())).powi(2))
        .sqrt();
        assert!((mean.high - h.exp()).abs() < 1e-12 && (mean.low - (-h).exp()).abs() < 1e-12, "{mean}");
        let one = weighted_geomean(&[(1.0, prefill)]);
        assert!((one.point - 2.0).abs() < 1e-12 && (one.high / one.point - 2.0 / 1.98).abs() < 1e-9, "the wider side");
        assert!(!weighted_geomean(&[(0.3, Speedup::unmeasured(1.2)), (0.7, prefill)]).has_interval());
        assert!(!weighted_geomean(&[]).point.is_finite());
    }

    #[test]
    fn a_regression_is_a_point_under_the_margin() {
        let bar = Bar::default();
        assert!(bar.is_regression(&Speedup { point: 0.98, low: 0.9, high: 1.06 }), "a wide interval hides nothing");
        assert!(!bar.is_regression(&Speedup { point: 0.995, low: 0.99, high: 1.0 }), "inside the 1% margin");
        assert!(bar.is_regression(&Speedup::unmeasured(f64::NAN)), "a shape without a number proves nothing");
    }

    #[test]
    fn no_interval_is_never_a_win_and_prints_without_brackets() {
        let s = Speedup::unmeasured(3.0);
        assert!(!Bar::default().is_win(&s));
        assert_eq!(s.to_string(), "3.000x");
        assert_eq!(Speedup::from_rounds(2.0, &[1.0], &[0.5]), None);
        assert_eq!(Speedup { point: 1.15, low: 1.142, high: 1.158 }.to_string(), "1.150x [1.142, 1.158]");
    }

    proptest! {
        #[test]
        fn the_point_lies_inside_its_interval_and_more_noise_widens_it(
            point in 0.1f64..10.0,
            noise in prop::collection::vec(-0.05f64..0.05, 3..40),
        ) {
            let b: Vec<f64> = noise.iter().map(|_| 1.0).collect();
            let c: Vec<f64> = noise.iter().map(|e| (1.0 + e) / point).collect();
            let s = Speedup::from_rounds(point, &b, &c).unwrap();
            prop_assert!(s.low <= point && point <= s.high);
            let c2: Vec<f64> = noise.iter().map(|e| (1.0 + 2.0 * e) / point).collect();
            let wider = Speedup::from_rounds(point, &b, &c2).unwrap();
            prop_assert!(wider.high / wider.low >= s.high / s.low * (1.0 - 1e-9));
        }
    }
}
