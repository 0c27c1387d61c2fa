//! Every way a kernel can fail, by class, and where it failed. The class names are a stable
//! contract: verdicts, reports, the event log and the search's memory store them by name.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Every way a candidate can fail. Names are a stable contract (JSON, reports, search memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    BuildError,
    /// The build ran past its time limit (not cached: another try may have more CPU).
    BuildTimeout,
    MissingEntry,
    ForbiddenImport,
    LaunchError,
    IllegalAddress,
    /// The worker died by a signal while candidate code ran.
    Crash,
    /// Candidate code ended the process (`exit(3)` in a launcher).
    ProcessExit,
    Timeout,
    WrongAnswer,
    UnwrittenOutput,
    OutOfBoundsWrite,
    InputMutation,
    Nondeterminism,
    /// Results reused across calls: outputs match earlier inputs, or a repeated call skips work.
    StaleOutput,
    TimingAnomaly,
    SanitizerError,
    /// A worker broke the protocol with the judge (a message it never asked for, a reply
    /// that does not parse), or a profile's table was forged.
    ForgedReport,
    /// Right on early calls, wrong on later ones: behaviour that depends on the call count.
    CallDependent,
    /// Fast on input sets seen before, slow on new ones: results cached by content. No
    /// longer produced (every timed call has inputs of its own); kept so that runs judged
    /// before read back.
    Memoization,
    /// Correct, but the timing stayed too noisy to use even when repeated.
    NoisyTiming,
    /// GPU memory (or another resource) lost on every call.
    ResourceLeak,
}

impl FailureClass {
    pub fn name(self) -> &'static str {
        match self {
            FailureClass::BuildError => "build-error",
            FailureClass::BuildTimeout => "build-timeout",
            FailureClass::MissingEntry => "missing-entry",
            FailureClass::ForbiddenImport => "forbidden-import",
            FailureClass::LaunchError => "launch-error",
            FailureClass::IllegalAddress => "illegal-address",
            FailureClass::Crash => "crash",
            FailureClass::ProcessExit => "process-exit",
            FailureClass::Timeout => "timeout",
            FailureClass::WrongAnswer => "wrong-answer",
            FailureClass::UnwrittenOutput => "unwritten-output",
            FailureClass::OutOfBoundsWrite => "out-of-bounds-write",
            FailureClass::InputMutation => "input-mutation",
            FailureClass::Nondeterminism => "nondeterminism",
            FailureClass::StaleOutput => "stale-output",
            FailureClass::TimingAnomaly => "timing-anomaly",
            FailureClass::SanitizerError => "sanitizer-error",
            FailureClass::ForgedReport => "forged-report",
            FailureClass::CallDependent => "call-dependent",
            FailureClass::Memoization => "memoization",
            FailureClass::NoisyTiming => "noisy-timing",
            FailureClass::ResourceLeak => "resource-leak",
        }
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub class: FailureClass,
    pub message: String,
    /// Where it happened: argument, size and seed, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<CaseRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Box<Comparison>>,
}

impl Failure {
    pub fn new(class: FailureClass, message: impl Into<String>) -> Failure {
        Failure { class, message: message.into(), at: None, comparison: None }
    }

    /// Names the call of the library that produced it (where the case is known).
    pub fn at_call(mut self, call: u64) -> Failure {
        if let Some(at) = &mut self.at {
            at.call = Some(call);
        }
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseRef {
    pub size: String,
    pub seed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg: Option<String>,
    /// Which call of the library in this worker (1-based) produced it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<u64>,
}

/// How far an output is from its reference.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub elements: usize,
    pub mismatches: usize,
    pub first_mismatch: Option<Mismatch>,
    #[serde(deserialize_with = "super::lenient_f64::deserialize")]
    pub max_abs_err: f64,
    #[serde(deserialize_with = "super::lenient_f64::deserialize")]
    pub max_rel_err: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mismatch {
    pub index: usize,
    #[serde(deserialize_with = "super::lenient_f64::deserialize")]
    pub got: f64,
    #[serde(deserialize_with = "super::lenient_f64::deserialize")]
    pub expected: f64,
}

impl Comparison {
    pub fn ok(&self) -> bool {
        self.mismatches == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_classes_serialize_as_their_names() {
        for class in [
            FailureClass::WrongAnswer,
            FailureClass::ProcessExit,
            FailureClass::OutOfBoundsWrite,
            FailureClass::IllegalAddress,
            FailureClass::BuildTimeout,
        ] {
            let json = serde_json::to_string(&class).unwrap();
            assert_eq!(json, format!("\"{}\"", class.name()));
        }
    }
}
