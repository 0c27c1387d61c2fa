//! Human renderings: a compact block per kernel for people, and short guidance for the
//! generator (a bounded number of lines: the paper's finding is that digested advice
//! helps an LLM where raw counters hurt).

use crate::diagnosis::{KernelDiagnosis, Report, Severity};
use crate::facts::{metric as m, Derived, Needs};
use std::fmt::Write;

fn evidence_line(d: &crate::diagnosis::Diagnosis) -> String {
    d.evidence
        .iter()
        .filter(|(k, _)| *k != "lines")
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One block per kernel: the roofline line, then the diagnoses above `info`, most
/// important first, each with its evidence and location.
pub fn human(report: &Report, verbose: bool) -> String {
    let mut out = String::new();
    for k in &report.kernels {
        kernel_block(&mut out, k, verbose);
    }
    out
}

fn kernel_block(out: &mut String, k: &KernelDiagnosis, verbose: bool) {
    let r = &k.roofline;
    let mut facts = Vec::new();
    if let Some(d) = r.duration_us {
        facts.push(format!("{d:.1} us"));
    }
    if let Some(d) = r.dram_pct {
        facts.push(format!("DRAM {d:.0}%"));
    }
    if let Some(m) = r.memory_pct {
        facts.push(format!("memory {m:.0}%"));
    }
    if let Some(c) = r.compute_pct {
        facts.push(format!("SM {c:.0}%"));
    }
    let _ = writeln!(
        out,
        "{}  [{}{}] {}",
        k.name,
        r.class.name(),
        if r.limiter.is_empty() { String::new() } else { format!(": {}", r.limiter) },
        facts.join(", ")
    );
    let shown: Vec<_> = k.diagnoses.iter().filter(|d| verbose || d.severity > Severity::Info).collect();
    if shown.is_empty() {
        let _ = writeln!(
            out,
            "  no problem worth fixing: {}",
            k.diagnoses.first().map(|d| d.analysis.as_str()).unwrap_or("")
        );
    }
    for d in shown {
        let _ = writeln!(
            out,
            "  {:<6} {:<24} saves ~{:>3.0}%  {}",
            d.severity.name().to_uppercase(),
            d.tool,
            100.0 * d.score,
            d.location.as_deref().unwrap_or("")
        );
        let _ = writeln!(out, "         {}", d.analysis);
        let _ = writeln!(out, "      -> {}", d.prescription);
        let _ = writeln!(out, "         evidence: {}", evidence_line(d));
    }
    if verbose {
        for t in &k.tools {
            let _ = writeln!(out, "  tool {:<24} {:<16} {}", t.tool, t.outcome, t.why);
        }
    }
    out.push('\n');
}

/// At most `max_lines` lines of advice for the generator: the top problems with their
/// prescription, location and the one number that sizes them.
pub fn guidance(k: &KernelDiagnosis, max_lines: usize) -> String {
    let mut lines = vec![format!("{}: {} ({})", k.name, k.roofline.class.name(), k.roofline.reason)];
    for d in k.diagnoses.iter().filter(|d| d.severity > Severity::Info) {
        if lines.len() >= max_lines {
            break;
        }
        let at = d.location.as_ref().map(|l| format!(" at {l}")).unwrap_or_default();
        lines.push(format!(
            "- [{}] {}{at} (~{:.0}% of time): {}",
            d.severity.name(),
            d.tool,
            100.0 * d.score,
            d.prescription
        ));
    }
    if lines.len() == 1 {
        lines.push("- no significant problem found: the kernel is near its limits as written".into());
    }
    lines.join("\n")
}

/// The counters [`raw_counters`] shows, in its order: the speed-of-light, memory,
/// occupancy and pipe columns the diagnoses read, then the stall reasons.
pub const RAW_COUNTERS: Needs = Needs {
    metrics: &[
        m::DURATION,
        m::DRAM_PCT,
        m::MEM_SOL,
        m::SM_SOL,
        m::L1_PCT,
        m::L2_PCT,
        m::DRAM_READ,
        m::DRAM_WRITE,
        m::ISSUE_ACTIVE,
        m::ELIGIBLE,
        m::LD_SECTORS,
        m::LD_REQUESTS,
        m::ST_SECTORS,
        m::ST_REQUESTS,
        m::SHARED_LD_CONFLICTS,
        m::SHARED_ST_CONFLICTS,
        m::ACHIEVED_OCC,
        m::REGS,
        m::BLOCK,
        m::GRID,
        m::WAVES,
        m::THREADS_PER_INST,
        m::FMA_PIPE_PCT,
        m::FP64_PIPE_PCT,
        m::XU_PCT,
        m::LSU_PCT,
        m::TENSOR_PCT,
        m::LOCAL_LD_INST,
        m::LOCAL_ST_INST,
    ],
    derived: &[Derived::Stalls],
};

/// The raw counters a generator gets under `--guidance raw` ([`RAW_COUNTERS`]), as
/// `name = value unit` lines, with no interpretation. The control arm of "digested
/// advice versus raw metrics".
pub fn raw_counters(launch: &crate::ncu::Launch) -> String {
    let mut out = format!("{} (grid {}, block {})\n", launch.kernel, launch.grid, launch.block);
    for name in RAW_COUNTERS.all() {
        if let Some(raw) = launch.raw(name).filter(|r| !r.trim().is_empty()) {
            let unit = launch.unit(name).unwrap_or("");
            let _ = writeln!(out, "{name} = {raw} {unit}");
        }
    }
    out
}
