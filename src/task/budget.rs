//! What a task's sizes should hold: a bench size long enough to time and small enough to
//! fit beside a candidate's copies, check sizes small enough to run on every candidate at
//! several seeds. `init` proposes sizes inside these limits and `validate` warns outside
//! them. Without a GPU the DRAM bandwidth is an H100's achievable figure; `check-env`
//! measures the real one.

use super::{ArgRole, Size, Task};
use crate::task::types::ParamType;

/// Bytes per second a bench size's traffic is timed against when no GPU is at hand: about
/// what an H100 SXM reaches (3.35 TB/s on the datasheet, about 3.0 measured).
pub const ASSUMED_BANDWIDTH: f64 = 3.0e12;
/// A bench call shorter than this is mostly launch and clock noise.
pub const MIN_BENCH_SECONDS: f64 = 50e-6;
/// The most buffer bytes a bench size should hold: a quarter of an 80 GB GPU, so the
/// judge's input sets, the baseline's and a candidate's copies fit beside each other.
pub const MAX_BENCH_BYTES: u128 = 20 << 30;
/// The most elements a buffer of a check size should hold: every candidate runs every
/// check size at several seeds, against the reference.
pub const MAX_CHECK_ELEMENTS: u128 = 4 << 20;

/// The bytes a call at `size` must move: the roofline's least traffic, else every buffer
/// once.
pub fn traffic(task: &Task, size: &Size) -> u128 {
    task.work(size).map(|w| w.bytes as u128).unwrap_or_else(|| task.total_bytes(size))
}

/// The most elements one buffer holds at `size`.
pub fn largest_buffer(task: &Task, size: &Size) -> u128 {
    task.args
        .iter()
        .filter_map(|a| match (&a.role, a.ty) {
            (
                ArgRole::Input { len, .. } | ArgRole::Output { len, .. } | ArgRole::InOut { len, .. },
                ParamType::Pointer { .. },
            ) => Task::buffer_len(len, size).ok().map(|n| n as u128),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

fn megabytes(b: u128) -> String {
    format!("{:.1} MB", b as f64 / 1e6)
}

/// What is outside the limits, in words.
pub fn warnings(task: &Task) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = traffic(task, &task.bench);
    let seconds = bytes as f64 / ASSUMED_BANDWIDTH;
    if seconds < MIN_BENCH_SECONDS {
        out.push(format!(
            "the bench size ({}) moves {}: about {:.1} us at {:.1} TB/s, under {:.0} us, where launch overhead and clock noise dominate a timing; make it your production shape, or larger",
            task.bench,
            megabytes(bytes),
            seconds * 1e6,
            ASSUMED_BANDWIDTH / 1e12,
            MIN_BENCH_SECONDS * 1e6
        ));
    }
    let held = task.total_bytes(&task.bench);
    if held > MAX_BENCH_BYTES {
        out.push(format!(
            "the bench size ({}) holds {} of buffers, over {} GiB (a quarter of an 80 GB GPU): the judge keeps several input sets and a candidate's copies beside them",
            task.bench,
            megabytes(held),
            MAX_BENCH_BYTES >> 30
        ));
    }
    // Served shapes are small by nature (decode): only their memory is a limit. Every
    // shape's input sets are held at once while a judgment times them.
    for shape in task.serve.iter().filter(|s| s.size != task.bench) {
        let held = task.total_bytes(&shape.size);
        if held > MAX_BENCH_BYTES {
            out.push(format!(
                "served shape `{}` ({}) holds {} of buffers, over {} GiB: the judge keeps several input sets of every served shape at once",
                shape.name,
                shape.size,
                megabytes(held),
                MAX_BENCH_BYTES >> 30
            ));
        }
    }
    for (i, c) in task.checks.iter().enumerate() {
        let most = largest_buffer(task, c);
        if most > MAX_CHECK_ELEMENTS {
            out.push(format!(
                "check size {i} ({c}) has a buffer of {most} elements, over {}M: every candidate runs every check size at {} seeds against the reference, so keep them to a few million elements",
                MAX_CHECK_ELEMENTS >> 20,
                task.seeds
            ));
        }
    }
    out
}
