//! The result of a run, for people (a few lines on stdout) and scripts (`--json`, and
//! `summary.json` in the run directory).

use super::finish::Final;
use super::lanes::LaneStats;
use super::orchestrator::Search;
use crate::run::best::Best;
use crate::run::events::Usage;
use crate::run::summary::PhaseTimes;
use std::fmt::Write;
use std::path::PathBuf;

pub use crate::run::summary::{GpuLane, Summary};

/// Evaluations until the running best reaches 95% of the final best gain.
pub fn evaluations_to_95pct(timeline: &[(f64, usize, Option<f64>)]) -> Option<usize> {
    let best = timeline.iter().filter_map(|t| t.2).fold(1.0f64, f64::max);
    if best <= 1.0 {
        return None;
    }
    let target = 0.95 * best.log2();
    let mut running = 1.0f64;
    for (i, t) in timeline.iter().enumerate() {
        if let Some(s) = t.2 {
            running = running.max(s);
        }
        if running.log2() >= target {
            return Some(i + 1);
        }
    }
    None
}

impl Summary {
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        run_dir: PathBuf,
        task: &str,
        simulated: bool,
        generator: String,
        search: &Search,
        session_s: f64,
        total_s: f64,
        phases: PhaseTimes,
        lanes: Vec<LaneStats>,
        usage: Option<Usage>,
        final_check: Final,
    ) -> Summary {
        let best = final_check.best;
        let best_file = (best.node != 0 && best.verified).then(|| run_dir.join(crate::run::best::BEST_CU));
        let judged = search.summaries.len().saturating_sub(1);
        Summary {
            task: task.to_string(),
            simulated,
            generator,
            stop_reason: search.stop_reason.clone().unwrap_or_default(),
            best,
            best_file,
            outcomes: search.outcomes.clone(),
            judged,
            within_parent_interval: search.within_parent_count(),
            search_s: total_s,
            phases,
            gpus: lanes
                .iter()
                .map(|l| GpuLane {
                    device: l.device,
                    busy_s: l.busy_s,
                    busy_fraction: (l.search_busy_s / session_s.max(1e-9)).min(1.0),
                    jobs: l.jobs,
                    idle_waiting: l.idle.clone(),
                })
                .collect(),
            judged_per_minute: judged as f64 / (total_s / 60.0).max(1e-9),
            evaluations_to_95pct: evaluations_to_95pct(&search.timeline),
            usage,
            final_check: final_check.tried,
            run_dir,
        }
    }

    pub fn human(&self) -> String {
        let mut o = String::new();
        let b = &self.best;
        if self.simulated {
            let _ = writeln!(o, "SIMULATED RUN: these numbers come from the test-only simulated evaluator, not a GPU");
        }
        if b.node == 0 || !b.verified {
            let _ = writeln!(o, "{}: no faster kernel found: {}", self.task, b.note);
            for t in &self.final_check {
                let _ = writeln!(o, "  node {}: {}", t.node, t.note);
            }
        } else {
            let _ = writeln!(
                o,
                "{}: best {} over the baseline (node {}, {}{}), re-verified",
                self.task,
                b.measured(),
                b.node,
                b.technique,
                if b.config != "defaults" { format!(", {}", b.config) } else { String::new() },
            );
            let _ = writeln!(
                o,
                "  {} against {}{}",
                b.ms.map(|m| format!("{m:.4} ms")).unwrap_or_default(),
                b.baseline_ms.map(|m| format!("{m:.4} ms")).unwrap_or_default(),
                floors(b)
            );
        }
        if let Some(bar) = &b.bar {
            let _ = writeln!(o, "  {}", bar.describe());
        }
        let outcomes: Vec<String> = self.outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect();
        if outcomes.is_empty() {
            let _ = writeln!(o, "  {} nodes judged", self.judged);
        } else {
            let _ = writeln!(o, "  {} nodes judged: {}", self.judged, outcomes.join(", "));
        }
        if self.within_parent_interval > 0 {
            let _ = writeln!(
                o,
                "  {} of them landed within their parent's interval (no gain that clears the noise)",
                self.within_parent_interval
            );
        }
        let gpus: Vec<String> = self
            .gpus
            .iter()
            .map(|g| {
                let waits = super::waits::describe_waits(&g.idle_waiting)
                    .map(|w| format!("; idle waiting for {w}"))
                    .unwrap_or_default();
                format!("gpu{} busy {:.0}% ({} jobs{waits})", g.device, 100.0 * g.busy_fraction, g.jobs)
            })
            .collect();
        let _ = writeln!(
            o,
            "  {:.1} min of search, {:.1} judged per minute; {}",
            self.search_s / 60.0,
            self.judged_per_minute,
            gpus.join(", ")
        );
        let p = &self.phases;
        if p.profiles + p.profiles_shared > 0 {
            let _ = writeln!(
                o,
                "  {} profiles, {:.1} s each; {} nodes used an ancestor's (the same speed within --min-gain)",
                p.profiles,
                p.profile_s / p.profiles.max(1) as f64,
                p.profiles_shared
            );
        }
        if let Some(u) = &self.usage {
            let _ = writeln!(
                o,
                "  LLM: {} requests, {} prompt + {} completion tokens, ${:.2}",
                u.requests, u.prompt_tokens, u.completion_tokens, u.cost
            );
        }
        let _ = writeln!(o, "  stopped: {}", self.stop_reason);
        if let Some(f) = &self.best_file {
            let _ = writeln!(o, "  best kernel: {}", f.display());
        }
        let _ = writeln!(o, "  run directory: {}", self.run_dir.display());
        if self.run_dir.join("report.html").is_file() {
            let _ = writeln!(o, "  report: {}", self.run_dir.join("report.html").display());
        }
        o
    }
}

/// "; 62.7% of the physical floor (baseline 59.0%), 70.1% of what this GPU reaches
/// (baseline 66.0%)": the datasheet floor, then the measured one where there is one.
fn floors(b: &Best) -> String {
    let share = |p: Option<f64>, q: Option<f64>, of: &str| match (p, q) {
        (Some(p), Some(q)) => format!("{p:.1}% of {of} (baseline {q:.1}%)"),
        (Some(p), None) => format!("{p:.1}% of {of}"),
        _ => String::new(),
    };
    let parts: Vec<String> = [
        share(b.pct_of_floor, b.baseline_pct_of_floor, "the physical floor"),
        share(b.pct_of_achievable, b.baseline_pct_of_achievable, "what this GPU reaches"),
    ]
    .into_iter()
    .filter(|p| !p.is_empty())
    .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::config::{GeneratorSpec, Guidance, RunConfig, Strategy};
    use crate::run::events::{Candidate, NodeSummary};

    fn config(min_gain: f64) -> RunConfig {
        RunConfig {
            task_dir: "tasks/softmax".into(),
            task: "softmax".into(),
            budget_s: None,
            max_nodes: None,
            generator: GeneratorSpec::Tune,
            objective: search::Objective::Time,
            strategy: Strategy::Mcts,
            guidance: Guidance::Tools,
            seed: 1,
            gpus: vec![0],
            arch: "sm_90a".into(),
            parallel: 1,
            timeout_s: None,
            build_timeout_s: None,
            final_seeds: 8,
            final_sanitize: true,
            simulated: None,
            input_seed_base: 1,
            min_gain,
            allow_unconfined_profiling: false,
            ray: None,
        }
    }

    fn passed(speedup: f64, interval: Option<(f64, f64)>) -> NodeSummary {
        NodeSummary {
            passed: true,
            speedup: Some(speedup),
            speedup_low: interval.map(|i| i.0),
            speedup_high: interval.map(|i| i.1),
            ..Default::default()
        }
    }

    #[test]
    fn the_summary_counts_the_nodes_that_landed_within_their_parents_interval() {
        let root = Candidate { source: "nodes/0000/kernel.cu".into(), defines: Default::default(), flags: vec![] };
        let mut search = Search::new(&config(0.01), root.clone(), passed(1.0, Some((0.998, 1.002))));
        let mut child = |parent, technique: &str, summary: NodeSummary| {
            let sel = search::Selection { parent, kind: search::Expansion::Improve };
            let id = search.tree.add_pending(&sel, root.clone(), Default::default());
            search.finish(id, summary, None, crate::generate::intent(technique.into(), None), false, 0.0);
            id
        };
        let coop = child(0, "cooperative:lanes=32", passed(7.98, Some((7.80, 8.16))));
        child(coop, "flag:maxrregcount=64", passed(8.10, Some((8.0, 8.2)))); // inside 7.80..8.16
        child(coop, "flag:maxrregcount=32", passed(7.90, None)); // inside too
        let unrolled = child(coop, "unroll:factor=4", passed(8.50, Some((8.40, 8.60)))); // above it
        child(unrolled, "knob:BLOCK=512", passed(8.55, None)); // within 1% of 8.50
        child(unrolled, "knob:BLOCK=128", passed(8.20, None)); // below 8.40 and 3.5% down
        child(coop, "vectorize:width=4", NodeSummary::failed(crate::run::failure::NodeFailure::Internal, "x"));
        assert_eq!(search.within_parent_count(), 3);
        // The tree's memory saw the same landings: the register cap is stale on the
        // cooperative kernel and below it.
        assert!(search.tree.memory.lineage.stale_families(unrolled).contains("flag:maxrregcount"));

        let bar = crate::stats::Bar::new(0.01, None);
        let best = Best::none(bar, &passed(1.0, None), "no faster kernel".into());
        let summary = Summary::build(
            "runs/x".into(),
            "softmax",
            false,
            "tune".into(),
            &search,
            60.0,
            60.0,
            PhaseTimes::default(),
            Vec::new(),
            None,
            Final { best, tried: Vec::new() },
        );
        assert_eq!(summary.within_parent_interval, 3);
        assert_eq!(serde_json::to_value(&summary).unwrap()["within_parent_interval"], 3);
        let human = summary.human();
        assert!(human.contains("3 of them landed within their parent's interval"), "{human}");
    }

    #[test]
    fn ninety_five_percent_of_the_gain() {
        // Best 2.0x (gain 1.0); 1.95x (gain 0.963) is the first to reach 0.95.
        let t = [(0.0, 1, Some(1.2)), (0.0, 2, None), (0.0, 3, Some(1.95)), (0.0, 4, Some(2.0))];
        assert_eq!(evaluations_to_95pct(&t), Some(3));
        assert_eq!(evaluations_to_95pct(&[(0.0, 1, Some(0.9))]), None);
    }

    #[test]
    fn the_measured_floor_follows_the_datasheet_one_where_it_is_known() {
        let bar = crate::stats::Bar::new(0.01, None);
        let mut b = Best::none(bar, &crate::run::events::NodeSummary::default(), String::new());
        assert_eq!(floors(&b), "");
        (b.pct_of_floor, b.baseline_pct_of_floor) = (Some(62.71), Some(59.0));
        assert_eq!(floors(&b), "; 62.7% of the physical floor (baseline 59.0%)");
        (b.pct_of_achievable, b.baseline_pct_of_achievable) = (Some(70.14), Some(66.0));
        assert_eq!(
            floors(&b),
            "; 62.7% of the physical floor (baseline 59.0%), 70.1% of what this GPU reaches (baseline 66.0%)"
        );
    }
}
