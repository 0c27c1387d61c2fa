//! `best.json`: the run's result as every reader sees it. The final check (in `optimize`)
//! writes it; the summary, the reports, `show` and `--resume` read it back through
//! [`read_best`], files from before speedup intervals included.

use crate::run::events::{Candidate, NodeSummary};
use crate::stats::{Bar, Speedup};
use crate::wall::protocol::TimingReport;
use search::NodeId;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const BEST_JSON: &str = "best.json";
pub const BEST_CU: &str = "best.cu";

/// The run's result: the confirmed kernel and its numbers from the final check, or the
/// baseline (node 0) when nothing was confirmed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Best {
    pub node: NodeId,
    /// Confirmed by the final check (passed, and faster beyond the bar).
    pub verified: bool,
    /// 1 for the baseline.
    pub speedup: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_high: Option<f64>,
    pub ms: Option<f64>,
    pub baseline_ms: Option<f64>,
    pub cv: Option<f64>,
    pub baseline_cv: Option<f64>,
    pub pct_of_floor: Option<f64>,
    pub baseline_pct_of_floor: Option<f64>,
    /// The same floor at the DRAM bandwidth this GPU was measured to reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pct_of_achievable: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_pct_of_achievable: Option<f64>,
    #[serde(default)]
    pub technique: String,
    #[serde(default)]
    pub config: String,
    /// What the final check found (passed seeds and sanitizers, or why nothing was confirmed).
    #[serde(default)]
    pub note: String,
    /// The bar the interval had to clear.
    #[serde(default)]
    pub bar: Option<Bar>,
    /// Per served shape, from the final check, when the task serves shapes: `speedup`
    /// is then their weighted geometric mean, and `ms` the heaviest shape's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub served: Vec<crate::wall::ShapeResult>,
}

impl Best {
    /// The speedup with its interval, as every output prints it.
    pub fn measured(&self) -> Speedup {
        match (self.speedup_low, self.speedup_high) {
            (Some(low), Some(high)) => Speedup { point: self.speedup, low, high },
            _ => Speedup::unmeasured(self.speedup),
        }
    }

    pub fn none(bar: Bar, baseline: &NodeSummary, note: String) -> Best {
        Best {
            node: 0,
            verified: false,
            speedup: 1.0,
            speedup_low: None,
            speedup_high: None,
            ms: baseline.candidate_ms,
            baseline_ms: baseline.candidate_ms,
            cv: baseline.cv,
            baseline_cv: baseline.cv,
            pct_of_floor: baseline.pct_of_floor,
            baseline_pct_of_floor: baseline.pct_of_floor,
            pct_of_achievable: None,
            baseline_pct_of_achievable: None,
            technique: "baseline".into(),
            config: "defaults".into(),
            note,
            bar: Some(bar),
            served: baseline.served.clone(),
        }
    }

    /// The final check's result: over the served shapes when there are several, else at
    /// the one timed size.
    pub(crate) fn confirmed(
        node: NodeId,
        t: &TimingReport,
        served: &[crate::wall::ShapeResult],
        technique: String,
        config: String,
        note: String,
        bar: Bar,
    ) -> Best {
        let s = if served.is_empty() { t.interval() } else { Some(crate::wall::ShapeResult::objective(served)) };
        Best {
            node,
            verified: true,
            speedup: s.map_or(t.speedup, |s| s.point),
            speedup_low: s.map(|s| s.low),
            speedup_high: s.map(|s| s.high),
            ms: Some(t.candidate.median_ms),
            baseline_ms: Some(t.baseline.median_ms),
            cv: Some(t.candidate.cv),
            baseline_cv: Some(t.baseline.cv),
            pct_of_floor: t.pct_of_floor,
            baseline_pct_of_floor: t.baseline_pct_of_floor,
            pct_of_achievable: t.pct_of_achievable,
            baseline_pct_of_achievable: t.baseline_pct_of_achievable,
            technique,
            config,
            note,
            bar: Some(bar),
            served: served.to_vec(),
        }
    }
}

/// One kernel the final check looked at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tried {
    pub node: NodeId,
    pub confirmed: bool,
    pub note: String,
}

/// `best.json` as JSON (None when there is none).
pub(crate) fn read_best_json(dir: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join(BEST_JSON)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Reads the result an earlier session wrote (None when there is none).
pub fn read_best(dir: &Path) -> Option<Best> {
    best_of_json(&read_best_json(dir)?)
}

/// The result in a `best.json` already read. Files written before intervals existed are
/// read through their final verdict's timing.
pub fn best_of_json(v: &serde_json::Value) -> Option<Best> {
    if let Ok(b) = serde_json::from_value::<Best>(v.clone()) {
        return Some(b);
    }
    let node = v["node"].as_u64()? as NodeId;
    let verified = v["verified"].as_bool().unwrap_or(false);
    let timing = serde_json::from_value::<TimingReport>(v["final_verdict"]["timing"].clone()).ok();
    let technique = v["technique"].as_str().unwrap_or_default().to_string();
    let config =
        serde_json::from_value::<Candidate>(v["candidate"].clone()).map(|c| c.config_label()).unwrap_or_default();
    let note = v["final_check"].as_str().or(v["note"].as_str()).unwrap_or_default().to_string();
    match timing {
        Some(t) if verified && node != 0 => {
            Some(Best::confirmed(node, &t, &[], technique, config, note, Bar::default()))
        }
        _ => Some(Best::none(Bar::default(), &NodeSummary::default(), note)),
    }
}
