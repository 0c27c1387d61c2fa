//! What a timing says against the candidate beyond its outputs: work that escapes the
//! timed stream (the host-clock cross-check that catches it), results cached by input
//! content (cold sets against warm ones), and a median below the physical floor.

use super::bench_sets::BenchSets;
use super::{Entry, Worker};
use crate::wall::protocol::{median, ColdCheck, Failure, FailureClass, HostCheck, TimingReport};
use std::time::Instant;

/// Work that escapes the timed stream: the root cause of anything else that looks wrong
/// in a timing (outputs poisoned while a kernel on another stream still runs, absurd
/// times), so it overrides every other failure.
pub(super) fn escaped_stream(report: &TimingReport) -> Option<Failure> {
    (!report.host_check.ok).then(|| {
        Failure::new(
            FailureClass::TimingAnomaly,
            format!(
                "work escapes the timed stream: the host clock, waiting for the whole device, measured {:.4} ms per call but the stream's events {:.4} ms; launch on the stream the entry receives",
                report.host_check.host_ms_per_call, report.host_check.event_ms_per_call
            ),
        )
    })
}

/// Results cached by input content: much faster on sets seen before than on fresh ones.
pub(super) fn memoized(cold: &ColdCheck) -> Option<Failure> {
    cold.memoized().then(|| {
        Failure::new(
            FailureClass::Memoization,
            format!(
                "{:.4} ms on input sets it had seen, {:.4} ms on sets it had not, timed the same way ({:.2}x; the baseline {:.2}x): results are cached by input content, so the timing measured the cache",
                median(&cold.candidate_warm_ms),
                median(&cold.candidate_ms),
                cold.candidate_ratio,
                cold.baseline_ratio
            ),
        )
    })
}

/// The theoretical floor uses peak clocks and bus width: nothing correct beats it.
pub(super) fn below_floor(report: &TimingReport, floor: Option<f64>) -> Option<Failure> {
    let f = floor?;
    (report.candidate.median_ms < 0.98 * f).then(|| {
        Failure::new(
            FailureClass::TimingAnomaly,
            format!(
                "{:.4} ms is below the physical floor of {:.4} ms at this size: the measurement cannot be trusted",
                report.candidate.median_ms, f
            ),
        )
    })
}

pub(super) fn host_cross_check(
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
    a.record(&w.gpu.stream).map_err(|e| gpu_err(crate::wall::gpu::GpuError::from_driver(e, "event")))?;
    for j in 0..calls {
        let k = j % bench.len();
        let dev = &mut bench.warm.dev[1][k];
        dev.restore(w).map_err(gpu_err)?;
        w.invoke_async(candidate, &mut dev.values)?;
    }
    b.record(&w.gpu.stream).map_err(|e| gpu_err(crate::wall::gpu::GpuError::from_driver(e, "event")))?;
    w.gpu.sync_all().map_err(gpu_err)?;
    let host_ms = t0.elapsed().as_secs_f64() * 1e3 / calls as f64;
    let event_ms = a.elapsed_ms(&b).map_err(|e| gpu_err(crate::wall::gpu::GpuError::from_driver(e, "event")))? as f64
        / calls as f64;
    Ok(HostCheck {
        calls,
        host_ms_per_call: host_ms,
        event_ms_per_call: event_ms,
        ok: host_ms <= 1.5 * event_ms + 0.02,
    })
}
