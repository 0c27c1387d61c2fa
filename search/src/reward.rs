//! Rewards. A correct kernel earns log2 of its speedup over the baseline (or of its
//! energy saving, or a weighted mix), clamped at `correct_floor`; any failure earns
//! `failure_floor`, which sits below every correct reward, so no amount of speed lets a
//! wrong kernel outrank a right one.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "objective")]
pub enum Objective {
    Time,
    Energy,
    /// `time_weight` x time reward + (1 - `time_weight`) x energy reward.
    Mix {
        time_weight: f64,
    },
}

impl std::fmt::Display for Objective {
    /// As the command line takes it: `time`, `energy`, `weighted:0.5`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Objective::Time => f.write_str("time"),
            Objective::Energy => f.write_str("energy"),
            Objective::Mix { time_weight } => write!(f, "weighted:{time_weight}"),
        }
    }
}

/// How a child's time compares with its parent's, as far as the timing can tell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ParentSpeed {
    /// Nothing to compare: the child or its parent failed, or one of them has no timing.
    #[default]
    Unknown,
    /// Inside the parent's interval, or within the run's `--min-gain` of it: no gain that
    /// clears the noise.
    Same,
    /// Outside it, faster or slower: the move changed something.
    Apart,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub correct: bool,
    /// Baseline time over candidate time (same-run ratio).
    pub speedup: f64,
    /// Baseline energy per call over candidate energy per call, when measured.
    pub energy_saving: Option<f64>,
    /// The failure class when not correct.
    pub failure: Option<String>,
    /// Its time against its parent's. The caller decides, since it holds the intervals;
    /// the search memory counts landings in the noise per kernel lineage, and moves across
    /// the run. Always [`ParentSpeed::Unknown`] for an incorrect outcome.
    #[serde(default)]
    pub parent: ParentSpeed,
    /// Correct, but slower than the baseline at one of the shapes the kernel serves,
    /// beyond the run's margin: its reward still guides the search (a child may mend the
    /// loss), but it is never the best kernel, whatever its mean.
    #[serde(default)]
    pub regresses: bool,
}

impl Outcome {
    pub fn correct(speedup: f64) -> Outcome {
        Outcome {
            correct: true,
            speedup,
            energy_saving: None,
            failure: None,
            parent: ParentSpeed::Unknown,
            regresses: false,
        }
    }

    pub fn failed(class: &str) -> Outcome {
        Outcome {
            correct: false,
            speedup: 0.0,
            energy_saving: None,
            failure: Some(class.to_string()),
            parent: ParentSpeed::Unknown,
            regresses: false,
        }
    }

    /// The same outcome, with its time against its parent's (unknown when incorrect).
    pub fn against_parent(self, speed: ParentSpeed) -> Outcome {
        Outcome { parent: if self.correct { speed } else { ParentSpeed::Unknown }, ..self }
    }

    /// The same outcome, marked as landing within its parent's interval or outside it.
    pub fn within_parent(self, within: bool) -> Outcome {
        self.against_parent(if within { ParentSpeed::Same } else { ParentSpeed::Apart })
    }

    /// Correct and at its parent's speed as far as the timing can tell.
    pub fn in_parents_noise(&self) -> bool {
        self.correct && self.parent == ParentSpeed::Same
    }

    /// The same outcome, marked as regressing a served shape or not.
    pub fn regressing(self, regresses: bool) -> Outcome {
        Outcome { regresses: regresses && self.correct, ..self }
    }

    /// Correct and slower at no served shape: a kernel that may be the best.
    pub fn eligible(&self) -> bool {
        self.correct && !self.regresses
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RewardConfig {
    pub objective: Objective,
    /// log2 of the ratio (true) or the ratio minus one (false, for comparison only).
    pub log: bool,
    pub correct_floor: f64,
    pub failure_floor: f64,
}

impl Default for RewardConfig {
    fn default() -> Self {
        // 16x slower is the worst a correct kernel scores; failures score below that.
        RewardConfig { objective: Objective::Time, log: true, correct_floor: -4.0, failure_floor: -5.0 }
    }
}

impl RewardConfig {
    /// The linear-reward variant the simulator compares against.
    pub fn linear() -> RewardConfig {
        RewardConfig { objective: Objective::Time, log: false, correct_floor: -1.0, failure_floor: -1.5 }
    }

    fn scale(&self, ratio: f64) -> f64 {
        let ratio = if ratio.is_finite() && ratio > 0.0 { ratio } else { 1e-9 };
        if self.log {
            ratio.log2()
        } else {
            ratio - 1.0
        }
    }

    pub fn reward(&self, o: &Outcome) -> f64 {
        if !o.correct {
            return self.failure_floor;
        }
        let energy = o.energy_saving.unwrap_or(o.speedup);
        let r = match self.objective {
            Objective::Time => self.scale(o.speedup),
            Objective::Energy => self.scale(energy),
            Objective::Mix { time_weight } => {
                let w = time_weight.clamp(0.0, 1.0);
                w * self.scale(o.speedup) + (1.0 - w) * self.scale(energy)
            }
        };
        r.max(self.correct_floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn log_rewards() {
        let c = RewardConfig::default();
        assert_eq!(c.reward(&Outcome::correct(2.0)), 1.0);
        assert_eq!(c.reward(&Outcome::correct(1.0)), 0.0);
        assert_eq!(c.reward(&Outcome::correct(0.5)), -1.0);
        assert_eq!(c.reward(&Outcome::correct(1e-9)), -4.0, "clamped at the correct floor");
        assert_eq!(c.reward(&Outcome::failed("wrong-answer")), -5.0);
    }

    #[test]
    fn energy_and_mix() {
        let mut c = RewardConfig { objective: Objective::Energy, ..Default::default() };
        let o = Outcome { energy_saving: Some(4.0), ..Outcome::correct(2.0) };
        assert_eq!(c.reward(&o), 2.0);
        c.objective = Objective::Mix { time_weight: 0.5 };
        assert_eq!(c.reward(&o), 1.5);
    }

    proptest! {
        #[test]
        fn a_failure_never_outranks_a_correct_kernel(s in 0.0f64..1e9, e in proptest::option::of(0.0f64..1e9), log in any::<bool>(), w in 0.0f64..1.0) {
            for objective in [Objective::Time, Objective::Energy, Objective::Mix { time_weight: w }] {
                let c = if log { RewardConfig { objective, ..Default::default() } } else { RewardConfig { objective, ..RewardConfig::linear() } };
                let ok = c.reward(&Outcome { energy_saving: e, ..Outcome::correct(s) });
                let bad = c.reward(&Outcome { correct: false, speedup: s * 1e6 + 1.0, energy_saving: e.map(|x| x * 1e6), failure: None, parent: ParentSpeed::Unknown, regresses: false });
                prop_assert!(ok > bad);
            }
        }
    }
}
