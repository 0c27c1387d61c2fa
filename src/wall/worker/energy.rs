//! Energy per call at the bench size, from NVML's device-wide energy counter: baseline and
//! candidate alternate, each keeping the GPU busy between counter updates.

use super::bench_sets::BenchSets;
use super::timing::{record, SIDES};
use super::{gpu_stop, Entry, Stop, Worker};
use crate::wall::protocol::{EnergyReport, EnergySample, Outcome, SideEnergy, TimingPlan};
use std::time::Instant;

/// Energy per call from NVML's total-energy counter, which updates about every 100 ms:
/// calls run back to back between two counter updates at least `energy_seconds` and ten
/// updates apart, so the delta divides by an exact call count.
pub(crate) fn energy(
    w: &mut Worker,
    bench: &mut BenchSets,
    baseline: &Entry,
    candidate: &Entry,
    plan: &TimingPlan,
) -> Result<EnergyReport, Stop> {
    let nvml = crate::wall::nvml::NvmlDevice::open(&w.gpu.info.uuid)
        .map_err(|e| Outcome::EnvError { message: format!("--energy needs NVML: {e}") })?;
    let device = nvml.device().ok_or_else(|| Outcome::EnvError { message: "NVML lost the device".into() })?;
    let read = || device.total_energy_consumption().ok();
    if read().is_none() {
        return Err(Outcome::EnvError {
            message: "--energy: this GPU or driver does not report total energy through NVML".into(),
        });
    }
    let entries = [baseline, candidate];
    let mut per_side: [Vec<EnergySample>; 2] = [Vec::new(), Vec::new()];
    for rep in 0..plan.energy_repeats.max(1) {
        let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let s = measure_energy(w, bench, entries[side], side, &read, plan.energy_seconds)?;
            per_side[side].push(s);
        }
    }
    let [b, c] = per_side;
    let baseline = SideEnergy::from_samples(b);
    let candidate = SideEnergy::from_samples(c);
    Ok(EnergyReport {
        saving: baseline.joules_per_call / candidate.joules_per_call,
        baseline,
        candidate,
        note: "NVML's energy counter is device-wide: anything else running on this GPU is counted too".into(),
    })
}

/// Keeps the GPU busy with batches of calls: each `step` queues one more batch and waits
/// only for the batch before it, so reading NVML never leaves the GPU idle (idle power
/// would otherwise be charged to the calls).
struct Pipeline {
    side: usize,
    batch: usize,
    queued: std::collections::VecDeque<(cudarc::driver::CudaEvent, u64)>,
    calls: u64,
    /// Calls known to have finished (up to the last batch waited for).
    completed: u64,
}

impl Pipeline {
    fn enqueue(&mut self, w: &mut Worker, bench: &mut BenchSets, entry: &Entry, n: usize) -> Result<(), Stop> {
        let fail =
            |e: super::CallError| Outcome::Rejected { failure: e.failure(SIDES[self.side], "energy measurement") };
        for _ in 0..n {
            let k = (self.calls as usize) % bench.len();
            let dev = &mut bench.warm.dev[self.side][k];
            dev.restore(w).map_err(gpu_stop)?;
            w.invoke_async(entry, &mut dev.values).map_err(fail)?;
            self.calls += 1;
        }
        let ev = w.gpu.event().map_err(gpu_stop)?;
        record(&ev, w)?;
        self.queued.push_back((ev, self.calls));
        Ok(())
    }

    /// Queues a batch, waits for the oldest of three in flight, and returns how many calls
    /// are known complete.
    fn step(&mut self, w: &mut Worker, bench: &mut BenchSets, entry: &Entry) -> Result<u64, Stop> {
        self.enqueue(w, bench, entry, self.batch)?;
        if self.queued.len() > 2 {
            let (ev, calls) = self.queued.pop_front().expect("three batches queued");
            ev.synchronize().map_err(|e| Outcome::Rejected {
                failure: super::CallError::Device(crate::wall::gpu::GpuError::from_driver(e, "energy measurement"))
                    .failure(SIDES[self.side], "energy measurement"),
            })?;
            self.completed = calls;
        }
        Ok(self.completed)
    }
}

fn measure_energy(
    w: &mut Worker,
    bench: &mut BenchSets,
    entry: &Entry,
    side: usize,
    read: &dyn Fn() -> Option<u64>,
    seconds: f64,
) -> Result<EnergySample, Stop> {
    let lost = || Outcome::EnvError { message: "NVML stopped reporting energy".into() };
    // Size batches to about 10 ms so a counter update is located within 1% of a 1 s window.
    let mut p = Pipeline { side, batch: 3, queued: Default::default(), calls: 0, completed: 0 };
    let t = Instant::now();
    p.enqueue(w, bench, entry, 3)?;
    w.gpu.sync_all().map_err(|e| Outcome::Rejected {
        failure: super::CallError::Device(e).failure(SIDES[side], "energy measurement"),
    })?;
    p.queued.clear();
    p.completed = p.calls;
    let per_call = t.elapsed().as_secs_f64() / 3.0;
    p.batch = ((0.01 / per_call.max(1e-7)) as usize).clamp(1, 100_000);
    let warm_until = Instant::now() + std::time::Duration::from_millis(200);
    while Instant::now() < warm_until {
        p.step(w, bench, entry)?;
    }
    let mut last = read().ok_or_else(lost)?;
    let deadline = Instant::now() + std::time::Duration::from_secs_f64(seconds * 4.0 + 5.0);
    let (e0, calls0) = loop {
        let done = p.step(w, bench, entry)?;
        let e = read().ok_or_else(lost)?;
        if e != last {
            break (e, done);
        }
        last = e;
        if Instant::now() > deadline {
            return Err(Outcome::EnvError { message: "the NVML energy counter did not change in 5 s".into() });
        }
    };
    let t0 = Instant::now();
    let (mut last, mut done_at_last, mut updates) = (e0, calls0, 0u32);
    loop {
        let done = p.step(w, bench, entry)?;
        let e = read().ok_or_else(lost)?;
        if e != last {
            last = e;
            done_at_last = done;
            updates += 1;
            if t0.elapsed().as_secs_f64() >= seconds && updates >= 10 {
                break;
            }
        }
        if Instant::now() > deadline {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    w.gpu.sync_all().map_err(|e| Outcome::Rejected {
        failure: super::CallError::Device(e).failure(SIDES[side], "energy measurement"),
    })?;
    let n = done_at_last.saturating_sub(calls0);
    let joules = (last - e0) as f64 / 1e3;
    Ok(EnergySample {
        joules_per_call: joules / n.max(1) as f64,
        watts: joules / secs,
        calls: n,
        seconds: secs,
        counter_updates: updates,
    })
}
