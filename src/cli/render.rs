//! Human-readable renderings of tasks and verdicts: compact, numbers first.

use crate::task::{ArgRole, Task, TaskError};
use crate::wall::protocol::{DeviceInfo, EnergyReport, SideTiming, TimingReport};
use crate::wall::{BuildSummary, Verdict};
use std::fmt::Write;
use std::path::PathBuf;

pub fn task_list(tasks: &[(PathBuf, Result<Task, TaskError>)]) -> String {
    let mut out = String::new();
    let width = tasks.iter().map(|(d, _)| d.file_name().map(|n| n.len()).unwrap_or(0)).max().unwrap_or(4).max(4);
    for (dir, t) in tasks {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        match t {
            Ok(t) => {
                let _ = writeln!(out, "{name:<width$}  {}  [bench {}]", t.summary, t.bench);
            }
            Err(e) => {
                let _ = writeln!(out, "{name:<width$}  INVALID: {e}");
            }
        }
    }
    out
}

fn bytes(n: f64) -> String {
    if n >= 1e9 {
        format!("{:.2} GB", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.1} MB", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.1} kB", n / 1e3)
    } else {
        format!("{n:.0} B")
    }
}

pub fn task_detail(task: &Task) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}: {}", task.name, task.summary);
    let _ = writeln!(
        out,
        "  entry      extern \"C\" void {}({}, cudaStream_t)",
        task.entry,
        task.args.iter().map(|a| format!("{} {}", a.spelling, a.name)).collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(out, "  baseline   {}", task.baseline.display());
    let _ = writeln!(
        out,
        "  reference  {}",
        if task.has_reference() {
            task.reference.display().to_string()
        } else {
            "the baseline (no reference.cu)".into()
        }
    );
    for a in &task.args {
        let role = match &a.role {
            ArgRole::Input { len, init } => format!("input, {len} elements, {init}"),
            ArgRole::Output { len, tolerance } => {
                format!("output, {len} elements, rtol {} atol {}", tolerance.rtol, tolerance.atol)
            }
            ArgRole::InOut { len, init, .. } => format!("in-out, {len} elements, {init}"),
            ArgRole::Scalar { value: crate::task::ScalarValue::Int(e) } if *e == a.name => {
                "size, from [sizes]".to_string()
            }
            ArgRole::Scalar { value } => format!("value {value}"),
        };
        let _ = writeln!(out, "  arg        {:<10} {:<24} {role}", a.name, a.spelling);
    }
    let _ = writeln!(out, "  bench      {} ({} of buffers)", task.bench, bytes(task.total_bytes(&task.bench) as f64));
    if task.serves_shapes() {
        for shape in task.served() {
            let _ = writeln!(
                out,
                "  serve      {:<10} {:>5.1}% of the {}  {} ({} of buffers)",
                shape.name,
                100.0 * shape.weight,
                task.serve_weights,
                shape.size,
                bytes(task.total_bytes(&shape.size) as f64)
            );
        }
    }
    for c in &task.checks {
        let _ = writeln!(out, "  check      {c}");
    }
    let _ = writeln!(
        out,
        "  seeds      {} per check size; rtol {} atol {}; {}",
        task.seeds,
        task.tolerance.rtol,
        task.tolerance.atol,
        if task.deterministic { "bitwise-deterministic" } else { "repeat within tolerance" }
    );
    if let Some(w) = task.work(&task.bench) {
        let _ = writeln!(
            out,
            "  roofline   {} and {:.3e} flops ({}) at the bench size",
            bytes(w.bytes),
            w.flops,
            w.flops_kind
        );
    }
    for (k, v) in &task.tune {
        let _ = writeln!(out, "  tune       {k} in [{}]", v.join(", "));
    }
    out
}

fn side(t: &SideTiming) -> String {
    format!("{:.4} ms (CV {:.1}%, {} samples)", t.median_ms, 100.0 * t.cv, t.samples)
}

pub fn verdict(v: &Verdict, task: &Task) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}: {}", task.name, v.candidate.display());
    outcome(&mut out, v);
    if let Some(d) = &v.device {
        let _ = writeln!(
            out,
            "  device    {} (sm_{}{}, {} SMs, {:.0} GB/s DRAM peak, driver {}.{})",
            d.name,
            d.compute_capability.0,
            d.compute_capability.1,
            d.sm_count,
            d.peak_dram_gbs,
            d.driver_version / 1000,
            (d.driver_version % 1000) / 10
        );
    }
    if let Some(c) = &v.check {
        let _ = writeln!(
            out,
            "  check     {} cases, {} calls, {} elements; max abs err {:.2e}, max rel err {:.2e}",
            c.cases, c.calls, c.elements_compared, c.max_abs_err, c.max_rel_err
        );
    }
    if let Some(t) = &v.timing {
        timing(&mut out, t, v.device.as_ref());
    }
    if let Some(e) = &v.energy {
        energy(&mut out, e);
    }
    for s in &v.sanitizer {
        let _ = writeln!(
            out,
            "  sanitize  {}: {}",
            s.tool,
            if s.clean() {
                "clean".to_string()
            } else {
                s.findings.first().cloned().unwrap_or_else(|| s.summary.clone())
            }
        );
    }
    if let Some(b) = &v.build {
        build(&mut out, b, &v.arch);
    }
    let p = &v.phases;
    let _ = writeln!(
        out,
        "  phases    build {:.2} s | setup {:.2} s (sandbox {:.3} s) | check {:.2} s | time {:.2} s | energy {:.2} s | sanitize {:.2} s | total {:.2} s",
        p.build, p.setup, p.sandbox, p.check, p.time, p.energy, p.sanitize, p.total
    );
    if !v.sandbox.is_empty() {
        let _ = writeln!(out, "  sandbox   {}", crate::wall::sandbox::summary(&v.sandbox));
    }
    if !v.hosted_sandbox.is_empty() {
        let _ = writeln!(out, "  sanitizer ran in: {}", crate::wall::sandbox::summary(&v.hosted_sandbox));
    }
    for n in &v.notes {
        let _ = writeln!(out, "  note      {n}");
    }
    if let Some(t) = &v.stderr_tail {
        let _ = writeln!(out, "  output of the failing run:");
        for line in t.lines().take(40) {
            let _ = writeln!(out, "    | {line}");
        }
    }
    out
}

/// The headline: passed with the speedup read against the bar, or rejected and where.
fn outcome(out: &mut String, v: &Verdict) {
    match &v.failure {
        None => {
            let headline = match &v.timing {
                Some(t) if !t.reliable => {
                    format!("PASSED  speedup {:.3}x UNRELIABLE (timing too noisy, see notes)", t.speedup)
                }
                Some(t) => {
                    let s = v.speedup.unwrap_or(crate::stats::Speedup::unmeasured(t.speedup));
                    let bar = crate::stats::Bar::default();
                    let lost: Vec<&str> =
                        v.served.iter().filter(|x| bar.is_regression(&x.speedup)).map(|x| x.name.as_str()).collect();
                    let lost_at = format!("slower than the baseline at {}", lost.join(", "));
                    let reading = if !lost.is_empty() {
                        lost_at.as_str()
                    } else if bar.is_win(&s) {
                        "faster"
                    } else if s.has_interval() && s.high < 1.0 / bar.threshold() {
                        "slower"
                    } else {
                        "not faster beyond the timing noise"
                    };
                    format!(
                        "PASSED  speedup {s}: {reading} (95% interval; a win needs its lower end above {:.3}x)",
                        bar.threshold()
                    )
                }
                None => "PASSED  (not timed)".to_string(),
            };
            let _ = writeln!(out, "  {headline}");
            if !v.served.is_empty() {
                let _ = writeln!(
                    out,
                    "  (the weighted geometric mean over the served shapes; the time below is the heaviest shape's)"
                );
            }
            for x in &v.served {
                let _ = writeln!(
                    out,
                    "  shape     {:<10} {:>5.1}% weight, {:>5.1}% of the time  {}: {:.4} -> {:.4} ms, {}{}",
                    x.name,
                    100.0 * x.weight,
                    100.0 * x.time_share,
                    x.size,
                    x.baseline_ms,
                    x.candidate_ms,
                    x.speedup,
                    x.pct_of_floor.map(|p| format!(", {p:.1}% of floor")).unwrap_or_default()
                );
            }
        }
        Some(f) => {
            let _ = writeln!(out, "  REJECTED  {}: {}", f.class, f.message);
            if let Some(at) = &f.at {
                let _ = writeln!(
                    out,
                    "  at        size {} seed {}{}{}",
                    at.size,
                    at.seed,
                    at.arg.as_ref().map(|a| format!(" output `{a}`")).unwrap_or_default(),
                    at.call.map(|c| format!(", call {c} of this library in the worker")).unwrap_or_default()
                );
            }
        }
    }
}

/// The timing: both sides, the bench, the floors, the judge's clock against the events, clocks.
fn timing(out: &mut String, t: &TimingReport, device: Option<&DeviceInfo>) {
    let _ = writeln!(out, "  time      baseline {}", side(&t.baseline));
    let _ = writeln!(out, "            candidate {}", side(&t.candidate));
    let _ = writeln!(
        out,
        "            bench {}; {} input sets for the candidate, each used once; L2 {}; median moved {:.2}% (baseline) {:.2}% (candidate) across {} rounds",
        t.size,
        t.input_sets,
        if t.flush_l2 { "flushed before each round" } else { "not flushed (task setting)" },
        100.0 * t.baseline.median_spread(),
        100.0 * t.candidate.median_spread(),
        t.candidate.round_medians_ms.len()
    );
    if let (Some(f), Some(p), Some(bp)) = (t.floor_ms, t.pct_of_floor, t.baseline_pct_of_floor) {
        let _ = writeln!(out, "            physical floor {f:.4} ms: candidate at {p:.1}% of it, baseline at {bp:.1}%");
    }
    if let (Some(f), Some(p), Some(bp), Some(gbs)) = (
        t.achievable_floor_ms,
        t.pct_of_achievable,
        t.baseline_pct_of_achievable,
        device.and_then(|d| d.achievable_dram_gbs),
    ) {
        let _ = writeln!(
            out,
            "            at what this GPU reaches ({:.2} TB/s measured) the floor is {f:.4} ms: candidate at {p:.1}%, baseline at {bp:.1}%",
            gbs / 1e3
        );
    }
    let cc = &t.clock_check;
    let _ = writeln!(
        out,
        "            judge's clock: {:.4} ms a call beyond the events (baseline), {:.4} ms (candidate), tolerance {:.4} ms: figures from {}",
        cc.baseline_gap_ms,
        cc.candidate_gap_ms,
        cc.tolerance_ms,
        match cc.figure {
            crate::wall::protocol::Figure::Events => "the workers' events",
            crate::wall::protocol::Figure::Judge => "the judge's windows (the candidate's events left work out)",
        }
    );
    let c = &t.clocks;
    let fmt = |x: Option<u32>| x.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
    let _ = writeln!(
        out,
        "            clocks SM {} -> {} MHz, memory {} MHz, {}{}",
        fmt(c.sm_mhz_before),
        fmt(c.sm_mhz_after),
        fmt(c.memory_mhz),
        if c.throttle_reasons.is_empty() {
            "no throttling".to_string()
        } else {
            format!("throttled: {}", c.throttle_reasons.join(", "))
        },
        c.temperature_c.map(|t| format!(", {t} C")).unwrap_or_default()
    );
    if !t.baseline_outputs_ok {
        let _ = writeln!(out, "            WARNING: the baseline's timed outputs did not match the reference");
    }
}

fn energy(out: &mut String, e: &EnergyReport) {
    for (name, s) in [("baseline", &e.baseline), ("candidate", &e.candidate)] {
        let _ = writeln!(
            out,
            "  energy    {name:<9} {:.4} mJ/call (min {:.4}, max {:.4} over {} runs), {:.0} W mean",
            1e3 * s.joules_per_call,
            1e3 * s.joules_per_call_min,
            1e3 * s.joules_per_call_max,
            s.samples.len(),
            s.watts
        );
    }
    let _ = writeln!(out, "            saving {:.3}x; {}", e.saving, e.note);
}

/// The build: arch, nvcc time or cache, each kernel's registers, shared memory, spills.
fn build(out: &mut String, b: &BuildSummary, arch: &str) {
    let kernels: Vec<String> = b
        .kernels
        .iter()
        .map(|k| {
            let mut s = format!("{} {} regs", sass::short_name(&k.name), k.registers);
            if k.shared_bytes > 0 {
                let _ = write!(s, " {} B smem", k.shared_bytes);
            }
            if k.spill_store_bytes + k.spill_load_bytes > 0 {
                let _ = write!(s, " SPILLS {}+{} B", k.spill_store_bytes, k.spill_load_bytes);
            }
            if k.stack_frame_bytes > 0 {
                let _ = write!(s, " {} B stack", k.stack_frame_bytes);
            }
            s
        })
        .collect();
    let _ = writeln!(
        out,
        "  build     {} {}; {}",
        arch,
        if b.cached { "(cached)".to_string() } else { format!("(nvcc {:.2} s)", b.nvcc_seconds) },
        kernels.join("; ")
    );
    let _ = writeln!(out, "            {}", b.dir.display());
}
