//! Timing and energy at the bench size. Baseline and candidate are interleaved sample by
//! sample in this one process (alternating which goes first), each sample on its own
//! rotated input set, with outputs poisoned and L2 flushed outside the timed region.
//! Every timed output is verified afterwards, and the event times are cross-checked
//! against a host clock that waits for the whole device.

use super::cases::{self, CaseData, DeviceCase, HostCase};
use super::{gpu_stop, Entry, Stop, Worker};
use crate::protocol::*;
use crate::task::{FlopsKind, Task};
use crate::verify;
use std::time::Instant;

const SIDES: [&str; 2] = ["baseline", "candidate"];

/// Input sets at the bench size, one device copy per side, with their reference outputs.
pub(crate) struct BenchSets {
    /// sets[side][k]
    sets: [Vec<DeviceCase>; 2],
    hosts: Vec<HostCase>,
    refs: Vec<Vec<Option<Vec<u8>>>>,
}

impl BenchSets {
    pub fn prepare(w: &mut Worker, reference: &Entry) -> Result<BenchSets, Stop> {
        let task = w.task.clone();
        let footprint = task.total_bytes(&task.bench).max(1) as f64;
        let l2 = w.gpu.info.l2_bytes.max(1) as f64;
        let mut k = ((2.0 * l2 / footprint).ceil() as usize).clamp(2, 8);
        let free = w.gpu.free_memory().map_err(gpu_stop)? as f64;
        let flush = 3.0 * l2;
        while k > 1 && 2.0 * k as f64 * footprint + flush > 0.85 * free {
            k -= 1;
        }
        if 2.0 * footprint + flush > 0.85 * free {
            return Err(Outcome::TaskError {
                message: format!(
                    "the bench size {} needs {:.1} GB on the GPU; {:.1} GB are free",
                    task.bench,
                    (2.0 * footprint + flush) / 1e9,
                    free / 1e9
                ),
            });
        }
        let mut sets: [Vec<DeviceCase>; 2] = [Vec::new(), Vec::new()];
        let mut refs = Vec::new();
        let mut hosts = Vec::new();
        for set in 0..k {
            let data = CaseData::generate(w, HostCase::new(task.bench.clone(), 1_000_000 + set as u64))?;
            refs.push(cases::run_reference(w, reference, &data.host)?);
            for side in sets.iter_mut() {
                side.push(DeviceCase::upload(w, &data.host).map_err(gpu_stop)?);
            }
            // Keep sizes and seeds only: the inputs now live on the device.
            let mut host = data.host;
            host.inputs.clear();
            hosts.push(host);
        }
        Ok(BenchSets { sets, hosts, refs })
    }

    fn len(&self) -> usize {
        self.hosts.len()
    }
}

/// The least time any correct kernel needs at the bench size, from the task's roofline.
pub fn floor_ms(task: &Task, info: &DeviceInfo) -> Option<f64> {
    let work = task.work(&task.bench)?;
    let bytes_s = work.bytes / (info.peak_dram_gbs * 1e9);
    let per_sm_clock = match work.flops_kind {
        FlopsKind::Fp32 => 256.0,
        FlopsKind::Fp64 => 128.0,
        FlopsKind::Int32 => 128.0,
        FlopsKind::Fp16Tensor | FlopsKind::Bf16Tensor => 4096.0,
    };
    let peak_flops = info.sm_count as f64 * info.max_sm_clock_mhz * 1e6 * per_sm_clock;
    let flops_s = if peak_flops > 0.0 { work.flops / peak_flops } else { 0.0 };
    let floor = bytes_s.max(flops_s) * 1e3;
    (floor > 0.0 && floor.is_finite()).then_some(floor)
}

fn clock_snapshot(nvml: &Option<crate::nvml::NvmlDevice>) -> (Option<u32>, Option<u32>, Vec<String>, Option<u32>) {
    match nvml {
        Some(n) => {
            (n.sm_clock_mhz(), n.memory_clock_mhz(), n.throttle_reasons().unwrap_or_default(), n.temperature_c())
        }
        None => (None, None, Vec::new(), None),
    }
}

/// Times baseline and candidate; returns the report and, if the timed outputs or the
/// timing itself are wrong, the candidate's failure.
pub(crate) fn time(
    w: &mut Worker,
    bench: &mut BenchSets,
    baseline: &Entry,
    candidate: &Entry,
    plan: &TimingPlan,
) -> Result<(TimingReport, Option<Failure>), Stop> {
    let task = w.task.clone();
    if task.flush_l2 {
        w.gpu.enable_l2_flush().map_err(gpu_stop)?;
    }
    let nvml = crate::nvml::NvmlDevice::open(&w.gpu.info.uuid).map_err(|e| w.notes.push(e)).ok();
    let (sm_before, _, _, _) = clock_snapshot(&nvml);
    let entries = [baseline, candidate];
    let at = format!("bench size {}", task.bench);
    let call_failure = |side: usize, e: super::CallError| -> Stop {
        let f = e.failure(SIDES[side], &at);
        if side == 0 {
            Outcome::TaskError { message: format!("the baseline fails at the bench size: {}", f.message) }
        } else {
            Outcome::Rejected { failure: f }
        }
    };

    // Warm-up, and a host-clock estimate of one call to size the rounds. Heavy kernels
    // draw enough power to move the clocks; a quarter second of calls lets them settle
    // before the first sample.
    let mut estimate_ms = [f64::INFINITY; 2];
    let warm_start = Instant::now();
    let mut j = 0;
    while j < 4 || warm_start.elapsed().as_secs_f64() < 0.25 {
        for (side, entry) in entries.iter().enumerate() {
            let k = j % bench.len();
            let dev = &mut bench.sets[side][k];
            dev.prepare(w, false).map_err(gpu_stop)?;
            w.gpu.sync_all().map_err(gpu_stop)?;
            let t = Instant::now();
            w.invoke(entry, &mut dev.values).map_err(|e| call_failure(side, e))?;
            estimate_ms[side] = estimate_ms[side].min(t.elapsed().as_secs_f64() * 1e3);
        }
        j += 1;
        if j >= 10_000 {
            break;
        }
    }
    let per_pair_ms = estimate_ms.iter().sum::<f64>() + 0.1;
    let rounds_min = plan.rounds.max(2);
    let by_samples = plan.min_samples.div_ceil(rounds_min);
    let by_time = ((plan.max_seconds * 1e3 / rounds_min as f64) / per_pair_ms).floor() as usize;
    let pairs = by_samples.min(by_time).clamp(2, 200);

    let starts: Vec<_> = (0..2 * pairs).map(|_| w.gpu.event()).collect::<Result<_, _>>().map_err(gpu_stop)?;
    let ends: Vec<_> = (0..2 * pairs).map(|_| w.gpu.event()).collect::<Result<_, _>>().map_err(gpu_stop)?;
    let mut samples: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut rounds: [Vec<Vec<f64>>; 2] = [Vec::new(), Vec::new()];
    let mut next_set = [0usize; 2];
    let started = Instant::now();
    for round in 0..100 {
        let mut order = Vec::with_capacity(2 * pairs);
        for j in 0..pairs {
            if (round + j) % 2 == 0 {
                order.extend([0, 1]);
            } else {
                order.extend([1, 0]);
            }
        }
        for (slot, &side) in order.iter().enumerate() {
            let k = next_set[side] % bench.len();
            next_set[side] += 1;
            let dev = &mut bench.sets[side][k];
            dev.prepare(w, false).map_err(gpu_stop)?;
            w.gpu.flush_l2_async().map_err(gpu_stop)?;
            starts[slot]
                .record(&w.gpu.stream)
                .map_err(|e| gpu_stop(crate::gpu::GpuError::from_driver(e, "recording an event")))?;
            w.invoke_async(entries[side], &mut dev.values).map_err(|e| call_failure(side, e))?;
            ends[slot]
                .record(&w.gpu.stream)
                .map_err(|e| gpu_stop(crate::gpu::GpuError::from_driver(e, "recording an event")))?;
        }
        w.gpu.sync_all().map_err(|e| call_failure(1, super::CallError::Device(e)))?;
        let mut this_round: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for (slot, &side) in order.iter().enumerate() {
            let ms = starts[slot]
                .elapsed_ms(&ends[slot])
                .map_err(|e| gpu_stop(crate::gpu::GpuError::from_driver(e, "reading an event")))?
                as f64;
            this_round[side].push(ms);
        }
        for side in 0..2 {
            samples[side].extend_from_slice(&this_round[side]);
            rounds[side].push(std::mem::take(&mut this_round[side]));
        }
        let elapsed = started.elapsed().as_secs_f64();
        let enough = round + 1 >= rounds_min && samples[1].len() >= plan.min_samples && elapsed >= plan.min_seconds;
        if enough || (elapsed >= plan.max_seconds && round + 1 >= 2) {
            break;
        }
    }
    let (sm_after, mem_mhz, throttle, temperature) = clock_snapshot(&nvml);

    // Verify what the timed calls wrote.
    let mut failure = None;
    let mut baseline_ok = true;
    for side in 0..2 {
        for k in 0..bench.len() {
            let outs = bench.sets[side][k].download_outputs(w).map_err(gpu_stop)?;
            for (i, arg) in task.args.iter().enumerate() {
                let (Some(got), Some(expected)) = (&outs[i], &bench.refs[k][i]) else {
                    continue;
                };
                let elem = match arg.ty {
                    crate::task::types::ParamType::Pointer { elem, .. } => elem,
                    _ => continue,
                };
                let tol = super::tolerance_of(&task, &arg.role);
                let cmp = verify::compare(elem, got, expected, tol, w.threads);
                if cmp.ok() {
                    continue;
                }
                if side == 0 {
                    baseline_ok = false;
                    w.notes.push(format!(
                        "the baseline's timed output `{}` does not match the reference at the bench size",
                        arg.name
                    ));
                } else if failure.is_none() {
                    let mut f = Failure::new(
                        FailureClass::WrongAnswer,
                        format!(
                            "a timed call wrote a wrong `{}`: {}",
                            arg.name,
                            cases::wrong_answer_message("candidate", &arg.name, &cmp, &bench.hosts[k], tol)
                        ),
                    );
                    f.at = Some(CaseRef {
                        size: task.bench.to_string(),
                        seed: bench.hosts[k].seed,
                        arg: Some(arg.name.clone()),
                    });
                    f.comparison = Some(Box::new(cmp));
                    failure = Some(f);
                }
            }
        }
    }

    // Host-clock cross-check: work that escapes the stream is invisible to its events.
    let host_check = host_cross_check(w, bench, candidate, estimate_ms[1]).map_err(|e| call_failure(1, e))?;

    let baseline_t = SideTiming::from_samples(&samples[0], &rounds[0]);
    let candidate_t = SideTiming::from_samples(&samples[1], &rounds[1]);
    let floor = floor_ms(&task, &w.gpu.info);
    let mut report = TimingReport {
        speedup: baseline_t.median_ms / candidate_t.median_ms,
        pct_of_floor: floor.map(|f| 100.0 * f / candidate_t.median_ms),
        baseline_pct_of_floor: floor.map(|f| 100.0 * f / baseline_t.median_ms),
        baseline: baseline_t,
        candidate: candidate_t,
        same_library: std::ptr::eq(baseline, candidate),
        size: task.bench.to_string(),
        flush_l2: task.flush_l2,
        input_sets: bench.len(),
        host_check,
        floor_ms: floor,
        clocks: ClockReport {
            sm_mhz_before: sm_before,
            sm_mhz_after: sm_after,
            memory_mhz: mem_mhz,
            throttle_reasons: throttle,
            temperature_c: temperature,
        },
        baseline_outputs_ok: baseline_ok,
    };
    // Escaping the stream is the root cause of anything else that looks wrong here
    // (outputs poisoned while a kernel on another stream still runs, absurd times).
    if !report.host_check.ok {
        failure = Some(Failure::new(
            FailureClass::TimingAnomaly,
            format!(
                "work escapes the timed stream: the host clock, waiting for the whole device, measured {:.4} ms per call but the stream's events {:.4} ms; launch on the stream the entry receives",
                report.host_check.host_ms_per_call, report.host_check.event_ms_per_call
            ),
        ));
    }
    if let (None, Some(f)) = (&failure, floor) {
        // The theoretical floor uses peak clocks and bus width: nothing correct beats it.
        if report.candidate.median_ms < 0.98 * f {
            failure = Some(Failure::new(
                FailureClass::TimingAnomaly,
                format!(
                    "{:.4} ms is below the physical floor of {:.4} ms at this size: the measurement cannot be trusted",
                    report.candidate.median_ms, f
                ),
            ));
        }
    }
    if !report.speedup.is_finite() {
        report.speedup = 0.0;
    }
    Ok((report, failure))
}

fn host_cross_check(
    w: &mut Worker,
    bench: &mut BenchSets,
    candidate: &Entry,
    estimate_ms: f64,
) -> Result<HostCheck, super::CallError> {
    let calls = ((100.0 / estimate_ms.max(1e-3)) as usize).clamp(5, 200);
    let gpu_err = |e| super::CallError::Device(e);
    w.gpu.sync_all().map_err(gpu_err)?;
    let a = w.gpu.event().map_err(gpu_err)?;
    let b = w.gpu.event().map_err(gpu_err)?;
    let t0 = Instant::now();
    a.record(&w.gpu.stream).map_err(|e| gpu_err(crate::gpu::GpuError::from_driver(e, "event")))?;
    for j in 0..calls {
        let k = j % bench.len();
        let dev = &mut bench.sets[1][k];
        dev.restore(w).map_err(gpu_err)?;
        w.invoke_async(candidate, &mut dev.values)?;
    }
    b.record(&w.gpu.stream).map_err(|e| gpu_err(crate::gpu::GpuError::from_driver(e, "event")))?;
    w.gpu.sync_all().map_err(gpu_err)?;
    let host_ms = t0.elapsed().as_secs_f64() * 1e3 / calls as f64;
    let event_ms =
        a.elapsed_ms(&b).map_err(|e| gpu_err(crate::gpu::GpuError::from_driver(e, "event")))? as f64 / calls as f64;
    Ok(HostCheck {
        calls,
        host_ms_per_call: host_ms,
        event_ms_per_call: event_ms,
        ok: host_ms <= 1.5 * event_ms + 0.02,
    })
}

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
    let nvml = crate::nvml::NvmlDevice::open(&w.gpu.info.uuid)
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
            let dev = &mut bench.sets[self.side][k];
            dev.restore(w).map_err(gpu_stop)?;
            w.invoke_async(entry, &mut dev.values).map_err(fail)?;
            self.calls += 1;
        }
        let ev = w.gpu.event().map_err(gpu_stop)?;
        ev.record(&w.gpu.stream).map_err(|e| gpu_stop(crate::gpu::GpuError::from_driver(e, "recording an event")))?;
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
                failure: super::CallError::Device(crate::gpu::GpuError::from_driver(e, "energy measurement"))
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
