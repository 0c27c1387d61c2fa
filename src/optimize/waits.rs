//! Why a GPU lane sits idle. Before an expansion reaches a lane it passes through stages
//! on the CPU side (its parent's profile, the generator, the build); while a lane has no
//! job, the stage holding work back is what it waits for. The lanes sample that on a short
//! tick rather than at every transition, so the jobs' own path pays nothing for it and
//! the books stay simple: each idle tick goes to exactly one reason.

pub use crate::run::summary::{IdleWaits, Wait};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The stages an expansion is in, counted across the run.
#[derive(Debug, Default)]
pub struct Stages {
    counts: [AtomicUsize; 3],
}

/// The pipeline stages that can hold a lane's next job back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Build,
    Generate,
    Profile,
}

impl Stage {
    fn index(self) -> usize {
        match self {
            Stage::Build => 0,
            Stage::Generate => 1,
            Stage::Profile => 2,
        }
    }
}

/// Leaves its stage when dropped, so an early return or an error cannot leave the count up.
pub struct InStage<'a> {
    stages: &'a Stages,
    stage: Stage,
}

impl Drop for InStage<'_> {
    fn drop(&mut self) {
        self.stages.counts[self.stage.index()].fetch_sub(1, Ordering::SeqCst);
    }
}

impl Stages {
    pub fn enter(&self, stage: Stage) -> InStage<'_> {
        self.counts[stage.index()].fetch_add(1, Ordering::SeqCst);
        InStage { stages: self, stage }
    }

    fn count(&self, stage: Stage) -> usize {
        self.counts[stage.index()].load(Ordering::SeqCst)
    }

    /// What an idle lane waits for now, given how many jobs the other lanes hold.
    pub fn reason(&self, queued_elsewhere: usize) -> Wait {
        if self.count(Stage::Build) > 0 {
            Wait::Build
        } else if self.count(Stage::Generate) > 0 {
            Wait::Generator
        } else if self.count(Stage::Profile) > 0 {
            Wait::Profile
        } else if queued_elsewhere > 0 {
            Wait::OtherLanes
        } else {
            Wait::Search
        }
    }
}

/// "builds 40 s, the generator 2 s": the reasons that took at least a second, longest first.
pub fn describe_waits(waits: &IdleWaits) -> Option<String> {
    let mut by_time: Vec<(&Wait, &f64)> = waits.iter().filter(|(_, s)| **s >= 1.0).collect();
    by_time.sort_by(|a, b| b.1.total_cmp(a.1));
    (!by_time.is_empty())
        .then(|| by_time.iter().map(|(w, s)| format!("{} {:.0} s", w.describe(), s)).collect::<Vec<_>>().join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_nearest_the_lane_is_the_reason_and_guards_leave_their_stage() {
        let stages = Stages::default();
        assert_eq!(stages.reason(0), Wait::Search);
        assert_eq!(stages.reason(2), Wait::OtherLanes);
        let profile = stages.enter(Stage::Profile);
        assert_eq!(stages.reason(2), Wait::Profile);
        {
            let _generating = stages.enter(Stage::Generate);
            assert_eq!(stages.reason(0), Wait::Generator);
            let _building = stages.enter(Stage::Build);
            assert_eq!(stages.reason(0), Wait::Build);
        }
        assert_eq!(stages.reason(0), Wait::Profile);
        drop(profile);
        assert_eq!(stages.reason(0), Wait::Search);
    }

    #[test]
    fn waits_are_described_longest_first_and_short_ones_left_out() {
        let waits: IdleWaits = [(Wait::Generator, 2.0), (Wait::Build, 40.4), (Wait::Search, 0.3)].into();
        assert_eq!(describe_waits(&waits).unwrap(), "a build 40 s, the generator 2 s");
        assert_eq!(describe_waits(&IdleWaits::new()), None);
    }
}
