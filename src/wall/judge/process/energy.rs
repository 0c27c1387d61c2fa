//! Power while a library runs back to back, from NVML's device-wide total-energy counter,
//! read by the judge (the worker never touches NVML for a verdict). The counter moves
//! about every 100 ms, so one reading needs a loop of a second or more: the worker calls
//! the entry over the last round's input sets, `repeat` times over, while a thread of the
//! judge polls the counter; the power is the energy between two counter updates inside
//! the loop over the time between them. Energy per call is that power times the call's
//! time as the judge's timing found it (`timing`), and the loop itself must last as long
//! as that many calls take: a loop that ends early did less work than it was asked.
//!
//! The loop repeats input sets (a second of calls on sets of their own does not fit in
//! memory for fast kernels): its outputs are verified at the end (not where a task updates
//! buffers in place: those change with every pass), but a library that recognised the
//! loop could skip work and idle to fill the time. The threat model says so; time verdicts
//! have no such gap.

use super::pools::Pool;
use super::workers::Worker;
use super::{Halt, Judge};
use crate::wall::protocol::{Failure, FailureClass, Outcome};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One energy loop, as measured.
#[derive(Debug, Clone)]
pub(crate) struct Loop {
    /// Mean power between the first and last counter update inside the loop, in watts.
    pub watts: f64,
    /// Seconds between those updates, and how many there were.
    pub span_s: f64,
    pub updates: u32,
    /// The judge's window over the whole loop (command to answer), in milliseconds.
    pub window_ms: f64,
    pub calls: u64,
}

/// Counter updates this long after the loop starts are the first used: the clocks settle.
const SETTLE: Duration = Duration::from_millis(150);

pub(crate) fn measure(
    j: &Judge,
    w: &mut Worker,
    side: &Pool,
    reference: &Pool,
    slots: usize,
    per_call_ms: f64,
) -> Result<Loop, Halt> {
    let per_call_ms = if per_call_ms.is_finite() && per_call_ms > 0.0 { per_call_ms } else { 1.0 };
    let want_ms = j.req.timing.energy_seconds.max(0.5) * 1e3 + SETTLE.as_secs_f64() * 1e3;
    let repeat = ((want_ms / (per_call_ms * slots as f64)).ceil() as u64).clamp(1, 10_000_000) as u32;
    let nvml = crate::wall::nvml::NvmlDevice::open(&j.gpu.info.uuid)
        .map_err(|e| Halt::Outcome(Outcome::EnvError { message: format!("--energy needs NVML: {e}") }))?;
    if nvml.energy_mj().is_none() {
        return Err(Halt::Outcome(Outcome::EnvError {
            message: "--energy: this GPU or driver does not report total energy through NVML".into(),
        }));
    }
    drop(nvml);
    let stop = Arc::new(AtomicBool::new(false));
    let uuid = j.gpu.info.uuid.clone();
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut samples: Vec<(Instant, u64)> = Vec::new();
            let Ok(nvml) = crate::wall::nvml::NvmlDevice::open(&uuid) else { return samples };
            let Some(device) = nvml.device() else { return samples };
            while !stop.load(Ordering::Relaxed) {
                if let Ok(mj) = device.total_energy_consumption() {
                    if samples.last().is_none_or(|(_, last)| *last != mj) {
                        samples.push((Instant::now(), mj));
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            samples
        })
    };
    let calls: Vec<_> = (0..slots).map(|k| side.call(k)).collect();
    let started = Instant::now();
    let ran = w.run(calls, repeat, j.within(slots * repeat as usize, Duration::from_secs_f64(per_call_ms / 1e3)));
    let answered = Instant::now();
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap_or_default();
    if let Err(f) = ran {
        return Err(match w.blame(&f, "in the energy loop") {
            Outcome::Rejected { failure } => Halt::Failure(failure),
            other => Halt::Outcome(other),
        });
    }
    // The loop's outputs: the last pass over each set must be right. An in-out buffer
    // has been updated once a pass, so only outputs are compared where a task has them.
    let in_place = j.task.args.iter().any(|a| matches!(a.role, crate::task::ArgRole::InOut { .. }));
    let results = if in_place { Vec::new() } else { j.compare(side, reference, &(0..slots).collect::<Vec<_>>())? };
    let window_ms = started.elapsed().as_secs_f64() * 1e3;
    if let Some((k, arg, r)) = results.iter().find(|(_, _, r)| r.mismatches > 0) {
        return Err(Halt::Failure(Failure::new(
            FailureClass::WrongAnswer,
            format!(
                "{} output `{}` was wrong after the energy loop ({} elements, set {k}): the loop's calls must compute what the timed ones did",
                w.role.name(),
                j.task.args[*arg].name,
                r.mismatches
            ),
        )));
    }
    let inside: Vec<&(Instant, u64)> =
        samples.iter().filter(|(t, _)| *t >= started + SETTLE && *t <= answered).collect();
    let (watts, span_s, updates) = match (inside.first(), inside.last()) {
        (Some((t0, e0)), Some((t1, e1))) if t1 > t0 => {
            let span = t1.duration_since(*t0).as_secs_f64();
            ((*e1 - *e0) as f64 / 1e3 / span, span, (inside.len() - 1) as u32)
        }
        _ => (f64::NAN, 0.0, 0),
    };
    Ok(Loop { watts, span_s, updates, window_ms, calls: slots as u64 * repeat as u64 })
}
