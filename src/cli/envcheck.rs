//! `nightshift check-env`: everything the verifier and the profilers need, found or not.

use super::{print_json, EXIT_ENV, EXIT_PASSED};
use crate::toolkit::toolchain::{self, Toolchain};
use serde::Serialize;
use std::process::ExitCode;

#[derive(Debug, Serialize)]
struct Item {
    name: &'static str,
    found: bool,
    /// Needed for `eval` (a missing essential makes check-env exit 3).
    essential: bool,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
}

fn item(name: &'static str, essential: bool, found: Result<String, String>) -> Item {
    match found {
        Ok(detail) => Item { name, found: true, essential, detail, hint: None },
        Err(hint) => Item { name, found: false, essential, detail: "not found".into(), hint: Some(hint) },
    }
}

fn tool(name: &'static str, essential: bool, path: Option<std::path::PathBuf>, hint: &str) -> Item {
    item(
        name,
        essential,
        path.map(|p| match toolchain::tool_version(&p) {
            Some(v) => format!("{} ({v})", p.display()),
            None => p.display().to_string(),
        })
        .ok_or_else(|| hint.to_string()),
    )
}

pub fn run(json: bool) -> ExitCode {
    let mut items = Vec::new();
    let gpu = crate::wall::require_gpu(0);
    items.push(item(
        "gpu",
        true,
        gpu.as_ref()
            .map(|(name, (ma, mi), _)| {
                format!(
                    "{name}, compute capability {ma}.{mi}, builds for {}",
                    crate::toolkit::build::arch_for_capability(*ma, *mi)
                )
            })
            .map_err(|e| format!("{e}")),
    ));
    let nvml = nvml_wrapper::Nvml::init();
    let driver_version = nvml.as_ref().ok().and_then(|n| n.sys_driver_version().ok());
    items.push(item(
        "driver",
        true,
        gpu.as_ref()
            .map(|(_, _, v)| {
                format!(
                    "{}CUDA {}.{}",
                    driver_version.as_ref().map(|d| format!("{d}, ")).unwrap_or_default(),
                    v / 1000,
                    (v % 1000) / 10
                )
            })
            .map_err(|_| "install the NVIDIA driver (580 or newer for CUDA 13.0)".to_string()),
    ));
    if gpu.is_ok() {
        let bandwidth = crate::wall::bandwidth::achievable(0).map(|a| a.describe()).map_err(|e| e.to_string());
        items.push(item("dram bandwidth", false, bandwidth));
    }
    let tc = Toolchain::find();
    items.push(item(
        "nvcc",
        true,
        tc.as_ref().map(|t| format!("{} ({})", t.nvcc.display(), t.nvcc_version)).map_err(|e| e.hint.clone()),
    ));
    items.push(item(
        "cuda runtime",
        true,
        tc.as_ref().map(|t| t.cudart.display().to_string()).map_err(|e| e.hint.clone()),
    ));
    let (cuobjdump, nvdisasm) = match &tc {
        Ok(t) => (t.cuobjdump.clone(), t.nvdisasm.clone()),
        Err(_) => (toolchain::find_profiler("cuobjdump"), toolchain::find_profiler("nvdisasm")),
    };
    items.push(tool(
        "cuobjdump",
        false,
        cuobjdump,
        "install the CUDA toolkit or the wheel nvidia-cuda-cuobjdump==13.2.86 (SASS facts)",
    ));
    items.push(tool(
        "nvdisasm",
        false,
        nvdisasm,
        "install the CUDA toolkit or the wheel nvidia-cuda-nvdisasm==13.2.86 (SASS source lines)",
    ));
    items.push(tool(
        "ncu",
        false,
        toolchain::find_profiler("ncu"),
        "install Nsight Compute (ships with the CUDA toolkit) for profiles and diagnoses",
    ));
    items.push(tool(
        "compute-sanitizer",
        false,
        toolchain::find_profiler("compute-sanitizer"),
        "install the CUDA toolkit's compute-sanitizer for --sanitize",
    ));
    let energy = match &nvml {
        Ok(n) => n
            .device_by_index(0)
            .and_then(|d| d.total_energy_consumption())
            .map(|mj| format!("total energy counter reads {mj} mJ (updates about every 100 ms; device-wide)"))
            .map_err(|e| format!("NVML answers but has no energy counter for GPU 0: {e}")),
        Err(e) => Err(format!("NVML (libnvidia-ml.so.1) unavailable: {e}; --energy needs it")),
    };
    items.push(item("nvml energy", false, energy));
    sandbox_items(&mut items);

    let missing_essential = items.iter().any(|i| i.essential && !i.found);
    if json {
        print_json(&serde_json::json!({ "ok": !missing_essential, "items": items }));
    } else {
        for i in &items {
            let mark = if i.found {
                "ok"
            } else if i.essential {
                "MISSING"
            } else {
                "missing"
            };
            println!("{:<18} {:<8} {}", i.name, mark, i.detail);
            if let Some(h) = &i.hint {
                println!("{:<18} {:<8} -> {}", "", "", h);
            }
        }
        if missing_essential {
            println!("\nnightshift eval cannot run here: see MISSING above.");
        }
    }
    ExitCode::from(if missing_essential { EXIT_ENV } else { EXIT_PASSED })
}

/// The worker's sandbox layers as this kernel enforces them, from a real probe process;
/// then the hosted arrangement's (ncu and compute-sanitizer), from a probe run through it.
fn sandbox_items(items: &mut Vec<Item>) {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return items.push(item("sandbox probe", false, Err(e.to_string()))),
    };
    match crate::wall::sandbox::probe::spawn(&exe, None) {
        Ok(report) => {
            for layer in &report.layers {
                let name = match layer.name.as_str() {
                    "landlock" => "sandbox landlock",
                    "seccomp" => "sandbox seccomp",
                    "keyring" => "sandbox keyring",
                    "capabilities" => "sandbox capabilities",
                    "environment" => "sandbox environment",
                    _ => "sandbox rlimits",
                };
                let found = if layer.active {
                    Ok(layer.detail.clone())
                } else {
                    Err(format!("{}; the other layers still hold", layer.detail))
                };
                items.push(item(name, false, found));
            }
            items.push(item("sandbox probe", false, probe_verdict(&report)));
        }
        Err(e) => items.push(item("sandbox probe", false, Err(e.to_string()))),
    }
    build_items(&exe, items);
    match crate::wall::sandbox::probe::spawn_hosted(&exe, &crate::wall::sandbox::probe::HostedSpec::worker()) {
        Ok(hosted) => {
            let a = &hosted.arrangement;
            for layer in &a.layers {
                let name = match layer.name.as_str() {
                    crate::wall::sandbox::hosted::USER => "hosted user ns",
                    crate::wall::sandbox::hosted::MOUNT => "hosted mount ns",
                    crate::wall::sandbox::hosted::NETWORK => "hosted network ns",
                    _ => "hosted pid ns",
                };
                let found = if a.holds(layer) { Ok(layer.detail.clone()) } else { Err(layer.detail.clone()) };
                items.push(item(name, false, found));
            }
            let verdict = match &hosted.report {
                Some(report) => probe_verdict(report),
                None => Err(format!(
                    "ncu and compute-sanitizer runs are refused here ({}): allow unprivileged user namespaces, run as root, or pass --allow-unconfined-profiling to diagnose, eval --sanitize and optimize",
                    a.shortfall()
                )),
            };
            items.push(item("hosted probe", false, verdict));
        }
        Err(e) => items.push(item("hosted probe", false, Err(e.to_string()))),
    }
}

/// The confined build's layers as this kernel enforces them, from a real probe under the
/// host compiler's part of a build's policy.
fn build_items(exe: &std::path::Path, items: &mut Vec<Item>) {
    use crate::wall::build::{probe, Limits, Policy};
    let scratch = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => return items.push(item("build probe", false, Err(format!("no scratch folder: {e}")))),
    };
    let policy = Policy::system(&Limits::default()).in_scratch(scratch.path());
    let report = match probe::spawn(exe, &policy, &probe::Targets::default()) {
        Ok(r) => r,
        Err(e) => return items.push(item("build probe", false, Err(e))),
    };
    let off: Vec<String> =
        report.layers.iter().filter(|l| !l.active).map(|l| format!("{} OFF: {}", l.name, l.detail)).collect();
    let on: Vec<&str> = report.layers.iter().filter(|l| l.active).map(|l| l.name.as_str()).collect();
    let layers = if off.is_empty() {
        Ok(format!("nvcc, the host compiler and cuobjdump run under {}", on.join(", ")))
    } else {
        Err(format!("{}; the other layers still hold", off.join("; ")))
    };
    items.push(item("build confinement", false, layers));
    let breaches: Vec<String> = report.breaches().iter().map(|a| a.action.clone()).collect();
    let verdict = if breaches.is_empty() {
        let refused = report.attempts.iter().filter(|a| !a.should_be_allowed).count();
        Ok(format!("{refused} escape attempts refused ({:.1} ms to apply)", report.apply_ms))
    } else {
        Err(format!("a confined build could: {}", breaches.join("; ")))
    };
    items.push(item("build probe", false, verdict));
}

/// What a probe's attempts amount to.
fn probe_verdict(report: &crate::wall::sandbox::probe::ProbeReport) -> Result<String, String> {
    let breaches: Vec<String> = report.breaches().iter().map(|a| a.action.clone()).collect();
    if !breaches.is_empty() {
        return Err(format!("a sandboxed worker could: {}", breaches.join("; ")));
    }
    let refused = report.attempts.iter().filter(|a| !a.should_be_allowed).count();
    let allowed: Vec<&str> =
        report.attempts.iter().filter(|a| a.should_be_allowed).map(|a| a.action.as_str()).collect();
    Ok(format!("{refused} escape attempts refused; allowed as they must be: {}", allowed.join(", ")))
}
