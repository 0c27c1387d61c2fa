//! What a person watching sees: on a terminal, a live status line (elapsed and budget,
//! nodes judged / failed / in flight, best speedup, what each GPU lane is doing) with one
//! line per finished node above it; elsewhere (a log file, CI), just the node lines.

use super::lanes::Lanes;
use super::orchestrator::Search;
use crate::run::events::NodeSummary;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use search::NodeId;
use std::io::IsTerminal;
use std::time::Duration;

pub struct Progress {
    bar: Option<ProgressBar>,
    budget: Option<Duration>,
    quiet: bool,
}

fn clock(s: f64) -> String {
    let s = s.max(0.0) as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

impl Progress {
    /// `quiet`: nothing at all (for `--json`, where stdout is the summary and stderr stays clean).
    pub fn new(budget: Option<Duration>, quiet: bool) -> Progress {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
            b.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("a valid template"));
            b.enable_steady_tick(Duration::from_millis(250));
            b
        });
        Progress { bar, budget, quiet }
    }

    pub fn message(&self, text: &str) {
        match &self.bar {
            Some(b) => b.println(text),
            None if !self.quiet => eprintln!("{text}"),
            None => {}
        }
    }

    pub fn update(&self, search: &Search, lanes: &Lanes, inflight: usize, elapsed_s: f64, stopping: Option<&str>) {
        let Some(bar) = &self.bar else { return };
        let judged = search.summaries.len().saturating_sub(1);
        let failed = search.summaries.values().filter(|s| !s.passed).count();
        let (best, speedup) = search.best();
        let lanes_text: Vec<String> = lanes
            .stats()
            .iter()
            .map(|l| match (&l.current, l.waiting) {
                (Some(job), _) => format!("gpu{}: {job}", l.device),
                (None, Some(w)) => format!("gpu{}: idle, waiting for {}", l.device, w.describe()),
                (None, None) => format!("gpu{}: idle", l.device),
            })
            .collect();
        bar.set_message(format!(
            "{}{} | {judged} judged, {failed} failed, {inflight} in flight | best {speedup:.3}x (node {best}) | {}{}",
            clock(elapsed_s),
            self.budget.map(|b| format!(" / {}", clock(b.as_secs_f64()))).unwrap_or_default(),
            lanes_text.join(", "),
            stopping.map(|s| format!(" | stopping: {s}")).unwrap_or_default()
        ));
    }

    pub fn node(&self, id: NodeId, technique: &str, s: &NodeSummary, duplicate_of: Option<NodeId>) {
        let what = if s.passed {
            format!(
                "passed  {}  {}{}",
                s.measured_speedup().map(|x| x.to_string()).unwrap_or_else(|| "-".into()),
                s.candidate_ms.map(|m| format!("{m:.4} ms")).unwrap_or_default(),
                s.pct_of_floor.map(|p| format!("  {p:.1}% of floor")).unwrap_or_default()
            )
        } else {
            format!(
                "{}: {}",
                s.failure_class.as_ref().map_or("failed", |c| c.name()),
                s.failure_message.as_deref().unwrap_or("").chars().take(140).collect::<String>()
            )
        };
        let dup = duplicate_of.map(|d| format!(" (same kernel as node {d})")).unwrap_or_default();
        self.message(&format!("node {id:>4} {technique:<28} {what}{dup}"));
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
