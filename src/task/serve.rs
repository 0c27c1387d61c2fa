//! The shapes a kernel serves (`[sizes] serve`): a production kernel runs at decode and at
//! prefill sizes, and a speedup at one of them says nothing of the other. Each served
//! shape is the bench size with some variables changed, and a weight: its share of the
//! kernel's calls or of its GPU time, as `serve_weights` says. A task without `serve`
//! serves its bench size alone, with weight 1, so every caller reads one list.

use super::file::SizeTable;
use super::{value_in_words, Locator, Size, TaskError};
use serde::{Deserialize, Serialize};
use std::fmt;
use toml::Spanned;

/// The most shapes one task may serve: each costs a timing phase per judgment.
pub const MAX_SHAPES: usize = 8;

/// One served shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedShape {
    /// `decode`, or the changed variables (`tokens=8`) when the file names none.
    pub name: String,
    /// The bench size with this shape's variables changed.
    pub size: Size,
    /// Its share as written, normalised so the shapes sum to 1.
    pub weight: f64,
}

/// What a served shape's weight is a share of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightBasis {
    /// The kernel's calls: each shape's weight in the objective becomes its share of the
    /// baseline's GPU time (calls times the baseline's time per call), since time is what
    /// a faster kernel saves.
    #[default]
    Calls,
    /// The kernel's GPU time, used as written.
    Time,
}

impl fmt::Display for WeightBasis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WeightBasis::Calls => "calls",
            WeightBasis::Time => "time",
        })
    }
}

impl WeightBasis {
    /// The weights the objective uses: `weights` as written (summing to 1), turned into
    /// shares of the baseline's time when they are shares of calls.
    pub fn time_shares(self, weights: &[f64], baseline_ms: &[f64]) -> Vec<f64> {
        let raw: Vec<f64> = match self {
            WeightBasis::Time => weights.to_vec(),
            WeightBasis::Calls => weights
                .iter()
                .zip(baseline_ms)
                .map(|(w, ms)| if ms.is_finite() && *ms > 0.0 { w * ms } else { 0.0 })
                .collect(),
        };
        let total: f64 = raw.iter().sum();
        if !(total.is_finite() && total > 0.0) {
            return weights.to_vec();
        }
        raw.iter().map(|w| w / total).collect()
    }
}

/// `[sizes] serve` and `serve_weights`, checked against the bench size's variables.
pub(super) fn resolve(
    serve: &[Spanned<SizeTable>],
    basis: Option<&Spanned<String>>,
    bench: &Size,
    at: &Locator,
) -> Result<(Vec<ServedShape>, WeightBasis), TaskError> {
    let basis = match basis {
        None => WeightBasis::Calls,
        Some(b) => match b.get_ref().as_str() {
            "calls" => WeightBasis::Calls,
            "time" => WeightBasis::Time,
            other => {
                return Err(at.err(
                    b,
                    "sizes.serve_weights",
                    format!("`{other}`: expected \"calls\" (each weight a share of the kernel's calls) or \"time\" (a share of its GPU time)"),
                ))
            }
        },
    };
    if serve.len() > MAX_SHAPES {
        return Err(at.err(
            &serve[MAX_SHAPES],
            &format!("sizes.serve[{MAX_SHAPES}]"),
            format!("{} served shapes; at most {MAX_SHAPES} (each is timed in every judgment)", serve.len()),
        ));
    }
    let mut shapes: Vec<ServedShape> = Vec::new();
    for (i, table) in serve.iter().enumerate() {
        let field = format!("sizes.serve[{i}]");
        let mut size = bench.clone();
        let mut name = None;
        let mut weight = None;
        let mut changed = Vec::new();
        for (key, value) in &table.get_ref().0 {
            let at_key = format!("{field}.{key}");
            match key.as_str() {
                "name" => {
                    let Some(s) = value.get_ref().as_str().map(str::trim).filter(|s| !s.is_empty()) else {
                        return Err(at.err(
                            value,
                            &at_key,
                            format!("expected a non-empty string, found {}", value_in_words(value.get_ref())),
                        ));
                    };
                    name = Some(s.to_string());
                }
                "weight" => {
                    let w = match value.get_ref() {
                        toml::Value::Integer(n) => *n as f64,
                        toml::Value::Float(x) => *x,
                        other => {
                            return Err(at.err(
                                value,
                                &at_key,
                                format!("expected a number > 0, found {}", value_in_words(other)),
                            ))
                        }
                    };
                    if !(w.is_finite() && w > 0.0) {
                        return Err(at.err(value, &at_key, format!("expected a number > 0, found {w}")));
                    }
                    weight = Some(w);
                }
                var => {
                    if !bench.vars.contains_key(var) {
                        let known: Vec<&str> = bench.order.iter().map(String::as_str).collect();
                        return Err(at.err(
                            value,
                            &at_key,
                            format!(
                                "`{var}` is not a size variable ({}); a served shape changes some of them and takes `name` and `weight`",
                                known.join(", ")
                            ),
                        ));
                    }
                    let Some(n) = value.get_ref().as_integer() else {
                        return Err(at.err(
                            value,
                            &at_key,
                            format!("expected an integer, found {}", value_in_words(value.get_ref())),
                        ));
                    };
                    if n < 0 {
                        return Err(at.err(value, &at_key, format!("expected a size >= 0, found {n}")));
                    }
                    size.vars.insert(var.to_string(), n);
                    changed.push(format!("{var}={n}"));
                }
            }
        }
        let Some(weight) = weight else {
            return Err(at.err(
                table,
                &format!("{field}.weight"),
                "missing: each served shape needs a weight, its share of the calls (or of the GPU time, with serve_weights = \"time\")",
            ));
        };
        let name = name.unwrap_or_else(|| if changed.is_empty() { "bench".into() } else { changed.join(" ") });
        if let Some(same) = shapes.iter().find(|s| s.name == name) {
            return Err(at.err(table, &format!("{field}.name"), format!("`{}` names two served shapes", same.name)));
        }
        if let Some(same) = shapes.iter().find(|s| s.size == size) {
            return Err(at.err(
                table,
                &field,
                format!(
                    "the same size as served shape `{}` ({size}): list a shape once, with its whole weight",
                    same.name
                ),
            ));
        }
        shapes.push(ServedShape { name, size, weight });
    }
    let total: f64 = shapes.iter().map(|s| s.weight).sum();
    for s in &mut shapes {
        s.weight /= total;
    }
    Ok((shapes, basis))
}
