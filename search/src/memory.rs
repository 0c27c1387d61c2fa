//! Search memory: what each technique (and each diagnosis tool targeted) did across the
//! tree, summarized in a few lines for the generator's prompt.

use crate::reward::Outcome;
use crate::tree::{Expansion, Intent};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub tries: u32,
    pub correct: u32,
    pub repairs: u32,
    pub repaired: u32,
    /// Sum and count of reward changes against the parent, over correct improvements.
    pub delta_sum: f64,
    pub deltas: u32,
    pub best_delta: Option<f64>,
    /// Failure classes seen.
    pub failures: BTreeMap<String, u32>,
}

impl Stats {
    pub fn correct_rate(&self) -> f64 {
        if self.tries == 0 {
            return 0.0;
        }
        self.correct as f64 / self.tries as f64
    }

    pub fn mean_delta(&self) -> Option<f64> {
        (self.deltas > 0).then(|| self.delta_sum / self.deltas as f64)
    }

    fn add(&mut self, kind: Expansion, o: &Outcome, delta: Option<f64>) {
        self.tries += 1;
        if o.correct {
            self.correct += 1;
        } else if let Some(f) = &o.failure {
            *self.failures.entry(f.clone()).or_default() += 1;
        }
        if kind == Expansion::Repair {
            self.repairs += 1;
            if o.correct {
                self.repaired += 1;
            }
        }
        if let Some(d) = delta {
            self.delta_sum += d;
            self.deltas += 1;
            self.best_delta = Some(self.best_delta.map_or(d, |b: f64| b.max(d)));
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub techniques: BTreeMap<String, Stats>,
    pub tools: BTreeMap<String, Stats>,
}

impl Memory {
    pub fn record(
        &mut self,
        intent: &Intent,
        kind: Expansion,
        o: &Outcome,
        reward: f64,
        parent_reward: Option<f64>,
        _floor: f64,
    ) {
        // A reward change means something only between two correct kernels.
        let delta = match (o.correct, kind, parent_reward) {
            (true, Expansion::Improve, Some(p)) => Some(reward - p),
            _ => None,
        };
        if !intent.technique.is_empty() {
            self.techniques.entry(intent.technique.clone()).or_default().add(kind, o, delta);
        }
        if let Some(tool) = &intent.tool {
            self.tools.entry(tool.clone()).or_default().add(kind, o, delta);
        }
    }

    pub fn technique(&self, name: &str) -> Option<&Stats> {
        self.techniques.get(name)
    }

    /// At most `max_lines` lines: techniques ordered by mean gain, then failures.
    pub fn summary(&self, max_lines: usize) -> String {
        let mut rows: Vec<(&String, &Stats)> = self.techniques.iter().collect();
        rows.sort_by(|a, b| {
            b.1.mean_delta()
                .unwrap_or(f64::NEG_INFINITY)
                .total_cmp(&a.1.mean_delta().unwrap_or(f64::NEG_INFINITY))
                .then(a.0.cmp(b.0))
        });
        let mut out = String::new();
        for (name, s) in rows.into_iter().take(max_lines) {
            let gain = match (s.mean_delta(), s.best_delta) {
                (Some(m), Some(b)) => format!("mean {:+.2} log2 (best {:+.2})", m, b),
                _ => "no correct improvement yet".to_string(),
            };
            let fails = if s.failures.is_empty() {
                String::new()
            } else {
                format!(
                    "; failed: {}",
                    s.failures.iter().map(|(k, v)| format!("{k} x{v}")).collect::<Vec<_>>().join(", ")
                )
            };
            let _ = writeln!(out, "- {name}: {} tries, {} correct, {gain}{fails}", s.tries, s.correct);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_orders_by_gain_and_lists_failures() {
        let mut m = Memory::default();
        let i = |t: &str| Intent { technique: t.into(), tool: Some("uncoalesced-global".into()) };
        m.record(&i("vectorize"), Expansion::Improve, &Outcome::correct(2.0), 1.0, Some(0.0), -5.0);
        m.record(&i("vectorize"), Expansion::Improve, &Outcome::failed("wrong-answer"), -5.0, Some(0.0), -5.0);
        m.record(&i("unroll"), Expansion::Improve, &Outcome::correct(1.1), 0.14, Some(0.0), -5.0);
        let s = m.summary(5);
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with("- vectorize: 2 tries, 1 correct, mean +1.00"), "{s}");
        assert!(lines[0].contains("wrong-answer x1"), "{s}");
        assert!(lines[1].starts_with("- unroll"), "{s}");
        assert_eq!(m.tools["uncoalesced-global"].tries, 3);
        assert_eq!(m.summary(1).lines().count(), 1);
    }
}
