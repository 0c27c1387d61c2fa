//! The one thing both sides of the wall import: what the orchestrator asks the judge and
//! what the judge reports (`judge`, `report`), what the judge and its workers say to each
//! other and how (`worker`, `wire`), and every way a kernel can fail (`failure`).
//!
//! The trusted side (`wall::judge`) and the untrusted side (`wall::worker`) never import
//! each other; a change to what crosses between them is a change here.

mod failure;
mod judge;
mod report;
pub mod wire;
mod worker;

pub use failure::{CaseRef, Comparison, Failure, FailureClass, Mismatch};
pub use judge::{JudgeMessage, JudgeRequest, Mode, Phase};
pub use report::{
    lenient_f64, median, CheckSummary, ClockCheck, ClockReport, DeviceInfo, EnergyReport, EnergySample, Figure,
    JudgeReport, Outcome, ShapeTiming, SideEnergy, SideTiming, TimingPlan, TimingReport, REPEAT_CALLS,
};
pub use worker::{
    Arg, Call, Command, Reply, Role, ServeRequest, Standalone, StandaloneMessage, StandalonePhase, StandaloneRequest,
    SOCKET_LOST_EXIT,
};
