//! The judge and its workers, and the orchestrator and a hosted worker.
//!
//! A *served* worker loads one library and does what the judge asks over the socket pair
//! the judge made (`wire`): map the judge's buffers from the descriptors it sends, load the
//! library, call the entry on given buffers and values, answer with its own event times.
//! Everything a served worker answers is data the judge checks, never a verdict: outputs
//! are read from the judge's own buffers, times from the judge's own clock.
//!
//! A *standalone* worker runs one call under a hosting tool (ncu for a profile,
//! compute-sanitizer for a memory check) on inputs it makes itself, and says how far it
//! got in JSON lines on its stdout. What it says before `Loading` is ours; what follows is
//! the library's (its code can write those lines too), read only to tell where it died.

use super::report::DeviceInfo;
use crate::task::Task;
use crate::wall::sandbox::{Layer, Policy};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Exit code of a served worker whose socket to the judge broke under it: its library
/// closed or replaced the descriptor.
pub const SOCKET_LOST_EXIT: i32 = 86;

/// Which library a worker loads: whose fault its failures are after it loaded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Reference,
    Baseline,
    Candidate,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Reference => "reference",
            Role::Baseline => "baseline",
            Role::Candidate => "candidate",
        }
    }
}

/// What a served worker is: the judge's first message to it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServeRequest {
    pub role: Role,
    pub library: PathBuf,
    pub device: usize,
    /// The sandbox it puts up before anything else; None only when the user turned the
    /// sandbox off to diagnose it.
    pub policy: Option<Policy>,
    /// No GPU: load the library when asked and answer, nothing more (the simulated
    /// evaluator of tests without a GPU).
    #[serde(default)]
    pub simulate: bool,
}

/// One argument of one call: a place in one of the judge's buffers the worker mapped, or
/// the 8 bytes of a scalar (little-endian, low bytes used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arg {
    Buffer { pool: u32, offset: u64 },
    Value { bytes: [u8; 8] },
}

/// One call of the entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    pub args: Vec<Arg>,
}

/// The judge's commands, in the order it sends them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum Command {
    /// Map the buffer whose descriptor rides with this message, `bytes` long, as `pool`.
    Import {
        pool: u32,
        bytes: u64,
    },
    /// Load the library: its constructors run, and from here on whatever this process
    /// does is the library's.
    Load,
    /// Call the entry once per call, back to back on the worker's stream, each between
    /// two events, `repeat` times over (energy readings repeat; timing never does); wait
    /// for the whole context; answer with each call's event time.
    Run {
        calls: Vec<Call>,
        repeat: u32,
    },
    /// Unmap a pool the judge no longer lends (it frees the memory once every process let go).
    Release {
        pool: u32,
    },
    Quit,
}

/// A served worker's answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "kebab-case")]
pub enum Reply {
    /// Sandboxed and on the GPU (no device when simulated); nothing loaded yet.
    Ready {
        device: Option<DeviceInfo>,
        sandbox: Vec<Layer>,
        sandbox_s: f64,
    },
    Imported {
        pool: u32,
    },
    Released {
        pool: u32,
    },
    Loaded,
    /// Milliseconds of each call by the worker's events (of the first pass when repeated).
    Ran {
        event_ms: Vec<f64>,
    },
    /// The entry returned an error, or the wait after the calls did: the CUDA error's
    /// name, and the call when known.
    Failed {
        call: Option<usize>,
        error: String,
    },
    /// The worker itself failed before it loaded anything: ours (the request, the sandbox)
    /// or the machine's (`environment`: no driver, no such GPU).
    Broken {
        message: String,
        #[serde(default)]
        environment: bool,
    },
}

/// What a standalone worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standalone {
    /// Two warm-up calls at the bench size, then one between cuProfilerStart and Stop.
    Profile,
    /// One call at the smallest check size on exact-size allocations, outputs never
    /// written before it (so initcheck sees a read of one).
    Sanitize,
}

/// A standalone worker's request (a JSON file the orchestrator writes outside its reach).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StandaloneRequest {
    pub mode: Standalone,
    pub task: Task,
    pub library: PathBuf,
    /// The task's own reference or baseline (which may load the libraries the task lets
    /// its baseline link), or a candidate (which may not).
    #[serde(default)]
    pub trusted: bool,
    pub device: usize,
    pub seed: u64,
    pub policy: Option<Policy>,
    /// The folders the hosting tool writes (its log, its report): the tool hands its open
    /// files down, so the worker closes every descriptor onto them before it loads
    /// anything.
    #[serde(default)]
    pub host_outputs: Vec<PathBuf>,
}

/// Where a standalone worker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StandalonePhase {
    /// The GPU context.
    Init,
    /// Inputs made on the GPU.
    Setup,
    /// The library is about to load: from here on, anything that happens is its doing.
    Loading,
    /// Warm-up calls ncu does not profile.
    WarmUp,
    /// The profiled or sanitized call.
    Call,
}

impl StandalonePhase {
    pub fn name(self) -> &'static str {
        match self {
            StandalonePhase::Init => "init",
            StandalonePhase::Setup => "setup",
            StandalonePhase::Loading => "loading",
            StandalonePhase::WarmUp => "warm-up",
            StandalonePhase::Call => "call",
        }
    }
}

/// One line of a standalone worker's stdout.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum StandaloneMessage {
    Sandbox {
        layers: Vec<Layer>,
        seconds: f64,
    },
    Device {
        device: DeviceInfo,
    },
    Phase {
        phase: StandalonePhase,
        detail: String,
    },
    /// The end: None when the call returned cleanly, else what went wrong, and whether
    /// it was ours (before the library loaded) or the library's.
    Done {
        error: Option<String>,
        ours: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_replies_round_trip() {
        let c = Command::Run {
            calls: vec![Call {
                args: vec![Arg::Buffer { pool: 1, offset: 256 }, Arg::Value { bytes: [7, 0, 0, 0, 0, 0, 0, 0] }],
            }],
            repeat: 1,
        };
        let back: Command = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert!(
            matches!(back, Command::Run { calls, repeat: 1 } if calls[0].args[0] == Arg::Buffer { pool: 1, offset: 256 })
        );
        let r = Reply::Ran { event_ms: vec![0.5, 0.25] };
        let back: Reply = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert!(matches!(back, Reply::Ran { event_ms } if event_ms == vec![0.5, 0.25]));
    }
}
