//! Diagnoses, their ranking, and the per-kernel and per-profile reports (the stable
//! `diagnose --json` contract).

use crate::facts::{Hints, Kernel, Missing};
use crate::roofline::{classify, Bound, Roofline};
use crate::tool_id::ToolId;
use crate::tools::{self, Gate};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Low,
    Medium,
    High,
}

impl Severity {
    /// From the estimated share of kernel time a fix would save.
    pub fn from_saving(saving: f64) -> Severity {
        if saving >= 0.30 {
            Severity::High
        } else if saving >= 0.10 {
            Severity::Medium
        } else if saving >= 0.03 {
            Severity::Low
        } else {
            Severity::Info
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

/// One expert finding: what is wrong, the evidence, how much it costs, what to change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub tool: ToolId,
    pub severity: Severity,
    /// Estimated share of the kernel's time the prescription saves (0..1); ranks diagnoses.
    pub score: f64,
    pub evidence: BTreeMap<String, Value>,
    pub analysis: String,
    pub prescription: String,
    pub location: Option<String>,
}

impl Diagnosis {
    pub fn new(tool: ToolId, saving: f64) -> Diagnosis {
        let score = (saving.clamp(0.0, 0.99) * 1000.0).round() / 1000.0;
        Diagnosis {
            tool,
            severity: Severity::from_saving(score),
            score,
            evidence: BTreeMap::new(),
            analysis: String::new(),
            prescription: String::new(),
            location: None,
        }
    }

    /// Records a number (rounded for stable output) or any JSON value.
    pub fn ev(mut self, key: &str, value: impl Into<Value>) -> Diagnosis {
        let mut v: Value = value.into();
        if let Some(x) = v.as_f64() {
            if !v.is_i64() && !v.is_u64() {
                v = serde_json::json!((x * 1000.0).round() / 1000.0);
            }
        }
        self.evidence.insert(key.to_string(), v);
        self
    }

    pub fn analysis(mut self, s: impl Into<String>) -> Diagnosis {
        self.analysis = s.into();
        self
    }

    pub fn prescription(mut self, s: impl Into<String>) -> Diagnosis {
        self.prescription = s.into();
        self
    }

    pub fn at(mut self, lines: &[String]) -> Diagnosis {
        self.location = lines.first().cloned();
        if lines.len() > 1 {
            self = self.ev("lines", lines.iter().take(6).cloned().collect::<Vec<_>>());
        }
        self
    }

    /// Holds the estimate to what is left of DRAM time above the kernel's throughput: at
    /// the roofline, moving the same bytes better gains at most that.
    pub fn within_headroom(mut self, headroom: f64) -> Diagnosis {
        let score = (self.score.min(headroom.max(0.0)) * 1000.0).round() / 1000.0;
        if score < self.score {
            self.score = score;
            self.severity = self.severity.min(Severity::from_saving(score));
        }
        self.ev("dram_headroom", headroom)
    }

    pub fn cap(mut self, max: Severity) -> Diagnosis {
        self.severity = self.severity.min(max);
        self
    }
}

/// What a tool concluded.
pub enum Verdict {
    Fired(Diagnosis),
    Quiet(String),
}

pub type ToolResult = Result<Verdict, Missing>;

/// What came of one tool's run, serialized as `fired`, `quiet`, `missing-evidence` or
/// `skipped`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolOutcome {
    /// It found its problem: a diagnosis.
    Fired,
    /// It ran and found nothing.
    Quiet,
    /// A counter it needs is not in the profile.
    MissingEvidence,
    /// Its gate kept it from running on this kernel's class.
    Skipped,
}

impl ToolOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::Fired => "fired",
            ToolOutcome::Quiet => "quiet",
            ToolOutcome::MissingEvidence => "missing-evidence",
            ToolOutcome::Skipped => "skipped",
        }
    }
}

impl std::fmt::Display for ToolOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, not `write_str`: renderings align it in a column.
        f.pad(self.as_str())
    }
}

impl PartialEq<&str> for ToolOutcome {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Whether each tool ran, and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRun {
    pub tool: ToolId,
    pub outcome: ToolOutcome,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelDiagnosis {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch: Option<String>,
    pub roofline: Roofline,
    /// Most important first.
    pub diagnoses: Vec<Diagnosis>,
    pub tools: Vec<ToolRun>,
}

impl KernelDiagnosis {
    pub fn top(&self, n: usize) -> Vec<ToolId> {
        self.diagnoses.iter().take(n).map(|d| d.tool).collect()
    }

    pub fn get(&self, tool: ToolId) -> Option<&Diagnosis> {
        self.diagnoses.iter().find(|d| d.tool == tool)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub kernels: Vec<KernelDiagnosis>,
}

fn gate_allows(gate: Gate, roofline: &Roofline) -> Result<(), String> {
    let class = roofline.class;
    let ok = match gate {
        Gate::Always => true,
        // At the roofline too: what is left there is the headroom to the ceiling, and
        // the estimates are held to it (`diagnose_kernel`).
        Gate::Memory => {
            matches!(class, Bound::MemoryBound | Bound::LatencyBound | Bound::Unknown | Bound::AtRoofline)
        }
        Gate::Compute => matches!(class, Bound::ComputeBound | Bound::LatencyBound | Bound::Unknown),
        Gate::Latency => matches!(class, Bound::LatencyBound | Bound::MemoryBound | Bound::Unknown),
        // By the unit that limits, not memory-versus-compute: shared memory is served by
        // the LSU pipe, which ncu counts as compute.
        Gate::Shared => {
            matches!(class, Bound::LatencyBound | Bound::MemoryBound | Bound::Unknown) || roofline.shared_side_limits()
        }
    };
    if ok {
        Ok(())
    } else if gate == Gate::Shared {
        Err(format!(
            "{} kernel limited by {}{}: shared-memory tools apply when L1 or the LSU pipe limits",
            class.name(),
            roofline.limiter,
            roofline.busiest_pipe.as_ref().map(|(p, v)| format!(" (busiest pipe {p} at {v:.0}%)")).unwrap_or_default()
        ))
    } else {
        Err(format!("{} kernel: {} tools do not apply", class.name(), gate.name()))
    }
}

/// Stage 1 then every applicable stage-2 tool, ranked by estimated saving.
pub fn diagnose_kernel(k: &Kernel) -> KernelDiagnosis {
    let roofline = classify(k);
    let mut diagnoses = Vec::new();
    let mut runs = Vec::new();
    for tool in tools::ALL {
        if let Err(why) = gate_allows(tool.gate, &roofline) {
            runs.push(ToolRun { tool: tool.id, outcome: ToolOutcome::Skipped, why });
            continue;
        }
        match (tool.run)(k, &roofline) {
            Ok(Verdict::Fired(mut d)) => {
                if tool.gate == Gate::Memory && roofline.class == Bound::AtRoofline {
                    d = d.within_headroom(roofline.dram_headroom.unwrap_or(0.0));
                }
                runs.push(ToolRun {
                    tool: tool.id,
                    outcome: ToolOutcome::Fired,
                    why: format!("{} (saves ~{:.0}%)", d.severity.name(), 100.0 * d.score),
                });
                diagnoses.push(d);
            }
            Ok(Verdict::Quiet(why)) => runs.push(ToolRun { tool: tool.id, outcome: ToolOutcome::Quiet, why }),
            Err(Missing(m)) => runs.push(ToolRun {
                tool: tool.id,
                outcome: ToolOutcome::MissingEvidence,
                why: format!("needs {}", m.join(", ")),
            }),
        }
    }
    let order = |id: ToolId| tools::ALL.iter().position(|t| t.id == id).unwrap_or(usize::MAX);
    diagnoses.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then(b.severity.cmp(&a.severity)).then(order(a.tool).cmp(&order(b.tool)))
    });
    KernelDiagnosis { name: k.name.clone(), launch: k.launch.map(|l| l.id.clone()), roofline, diagnoses, tools: runs }
}

/// `k_misc(const float *, int)` and `void k_misc<4>(float const*)` -> `k_misc<4>`-style keys
/// that ncu's names and SASS names share.
pub fn name_key(name: &str) -> String {
    let base = name.split('(').next().unwrap_or(name).trim();
    let base = base.strip_prefix("void ").unwrap_or(base);
    base.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Diagnoses every launch in `profile`, pairing each with its SASS function and ptxas
/// resources by name. `only` keeps kernels whose name contains it.
pub fn diagnose_profile(
    profile: &crate::ncu::Profile,
    sass: &[sass::FunctionReport],
    ptxas: Option<&sass::ptxas::PtxasReport>,
    hints: &Hints,
    only: Option<&str>,
) -> Report {
    let mut launches_of: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    for launch in &profile.launches {
        *launches_of.entry(launch.kernel.as_str()).or_default() += 1;
    }
    let kernels = profile
        .launches
        .iter()
        .filter(|launch| only.is_none_or(|o| launch.kernel.contains(o)))
        .map(|launch| {
            let mut k = kernel_of_launch(launch, sass, ptxas, hints);
            k.launches_in_call = launches_of[launch.kernel.as_str()];
            diagnose_kernel(&k)
        })
        .collect();
    Report { kernels }
}

/// One launch's evidence: its row, with the SASS function and ptxas resources of the
/// same name.
pub fn kernel_of_launch<'a>(
    launch: &'a crate::ncu::Launch,
    sass: &'a [sass::FunctionReport],
    ptxas: Option<&'a sass::ptxas::PtxasReport>,
    hints: &Hints,
) -> Kernel<'a> {
    let key = name_key(&launch.kernel);
    let function = sass.iter().find(|f| name_key(&f.demangled) == key || name_key(&f.name) == key);
    let resources = ptxas.and_then(|p| {
        p.kernels.iter().find(|k| function.is_some_and(|f| f.name == k.name) || name_key(&k.name) == key)
    });
    Kernel::new(&launch.kernel, Some(launch), function, resources, hints.clone())
}

/// Diagnoses SASS functions alone (no profile): what the machine code shows.
pub fn diagnose_sass(
    sass: &[sass::FunctionReport],
    ptxas: Option<&sass::ptxas::PtxasReport>,
    hints: &Hints,
    only: Option<&str>,
) -> Report {
    let kernels = sass
        .iter()
        .filter(|f| only.is_none_or(|o| f.name.contains(o) || f.demangled.contains(o)))
        .map(|f| {
            let resources = ptxas.and_then(|p| p.kernel(&f.name));
            let k = Kernel::new(&sass::short_name(&f.name), None, Some(f), resources, hints.clone());
            diagnose_kernel(&k)
        })
        .collect();
    Report { kernels }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_outcomes_serialize_as_the_names_they_always_had() {
        for (o, name) in [
            (ToolOutcome::Fired, "fired"),
            (ToolOutcome::Quiet, "quiet"),
            (ToolOutcome::MissingEvidence, "missing-evidence"),
            (ToolOutcome::Skipped, "skipped"),
        ] {
            assert_eq!(serde_json::to_string(&o).unwrap(), format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<ToolOutcome>(&format!("\"{name}\"")).unwrap(), o);
            assert_eq!(format!("{o:<17}|"), format!("{name:<17}|"), "padded like the string was");
        }
    }

    #[test]
    fn names_from_ncu_and_sass_meet() {
        assert_eq!(name_key("k_misc(const float *, float *, double *, __half *, int *, int)"), "k_misc");
        assert_eq!(name_key("k_misc(float const*, float*, double*, __half*, int*, int)"), "k_misc");
        assert_eq!(name_key("void softmax_vec4<4>(const float4 *, float4 *, int)"), "softmax_vec4<4>");
        assert_eq!(name_key("copy_scalar"), "copy_scalar");
    }

    #[test]
    fn an_estimate_above_the_headroom_is_held_to_it() {
        let d = Diagnosis::new(ToolId::ScalarGlobalAccess, 0.35);
        assert_eq!(d.severity, Severity::High);
        let held = d.within_headroom(0.06);
        assert_eq!((held.score, held.severity), (0.06, Severity::Low));
        assert_eq!(held.evidence["dram_headroom"], 0.06);
        // Under the headroom nothing changes; a bogus headroom holds the estimate at 0.
        let low = Diagnosis::new(ToolId::ScalarGlobalAccess, 0.04).within_headroom(0.2);
        assert_eq!((low.score, low.severity), (0.04, Severity::Low));
        for bogus in [-1.0, f64::NAN] {
            let d = Diagnosis::new(ToolId::ScalarGlobalAccess, 0.2).within_headroom(bogus);
            assert_eq!((d.score, d.severity), (0.0, Severity::Info), "{bogus}");
        }
    }

    fn roofline(class: Bound, limiter: &str, pipe: (&str, f64)) -> Roofline {
        Roofline {
            class,
            limiter: limiter.into(),
            dram_pct: None,
            memory_pct: None,
            compute_pct: None,
            l1_pct: None,
            l2_pct: None,
            duration_us: None,
            dram_gbs: None,
            gflops: None,
            arithmetic_intensity: None,
            floor_us: None,
            dram_pct_of_achievable: None,
            sector_efficiency: None,
            useful_dram_fraction: None,
            busiest_pipe: Some((pipe.0.into(), pipe.1)),
            dram_headroom: None,
            working_lanes: None,
            useful_pipe_pct: None,
            reason: String::new(),
        }
    }

    #[test]
    fn shared_memory_tools_follow_the_limiting_pipe_not_the_class() {
        // Compute-bound because the LSU pipe (which serves shared memory) is the busiest.
        let lsu = roofline(Bound::ComputeBound, "lsu pipe", ("lsu", 88.0));
        assert!(gate_allows(Gate::Shared, &lsu).is_ok());
        assert!(gate_allows(Gate::Memory, &lsu).is_err());
        let fma = roofline(Bound::ComputeBound, "fma pipe", ("fma", 90.0));
        let why = gate_allows(Gate::Shared, &fma).unwrap_err();
        assert!(why.contains("busiest pipe fma"), "{why}");
        assert!(gate_allows(Gate::Shared, &roofline(Bound::MemoryBound, "l1", ("lsu", 40.0))).is_ok());
    }

    #[test]
    fn severity_thresholds() {
        assert_eq!(Severity::from_saving(0.5), Severity::High);
        assert_eq!(Severity::from_saving(0.2), Severity::Medium);
        assert_eq!(Severity::from_saving(0.05), Severity::Low);
        assert_eq!(Severity::from_saving(0.0), Severity::Info);
        assert_eq!(Diagnosis::new(ToolId::Roofline, 0.9).cap(Severity::Medium).severity, Severity::Medium);
        assert_eq!(Diagnosis::new(ToolId::Roofline, 2.0).score, 0.99);
    }
}
