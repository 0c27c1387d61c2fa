//! `nightshift diagnose`: Nsight Compute, explained. On a GPU machine it profiles a task's
//! candidate through the worker; anywhere, it diagnoses a saved raw CSV.

use super::sass::read_sass;
use super::{fail, print_json, EXIT_ENV, EXIT_PASSED, EXIT_REJECTED, EXIT_USAGE};
use crate::task::Task;
use crate::wall::judge::profile::{self, MetricSet, ProfileFailure, Timings};
use crate::wall::{EvalError, EvalOptions};
use heuristics::{Hints, Report};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub struct Args {
    pub task: Option<PathBuf>,
    pub candidate: Option<PathBuf>,
    pub ncu: Option<PathBuf>,
    pub sass: Option<PathBuf>,
    pub ptxas: Option<PathBuf>,
    pub kernel: Option<String>,
    pub min_bytes: Option<f64>,
    pub out: Option<PathBuf>,
    pub json: bool,
    pub verbose: bool,
    /// ncu's full set instead of the metrics the diagnoses read.
    pub full: bool,
    /// Print how long each step took.
    pub timings: bool,
    pub opts: EvalOptions,
}

fn hints_for(task: Option<&Task>, min_bytes: Option<f64>) -> Hints {
    let mut hints = task.map(Task::diagnosis_hints).unwrap_or_default();
    hints.min_bytes = min_bytes.or(hints.min_bytes);
    hints
}

fn read(path: &Path, what: &str) -> Result<String, ExitCode> {
    std::fs::read_to_string(path).map_err(|e| fail(EXIT_USAGE, &format!("{what} {}: {e}", path.display())))
}

/// The `--json` output with `--timings`: the report's fields, then `timings`.
#[derive(serde::Serialize)]
struct TimedReport<'a> {
    #[serde(flatten)]
    report: &'a Report,
    timings: &'a Timings,
}

/// The report on stdout; with `--timings`, the steps' durations too (in the JSON, or on
/// stderr beside the human report).
fn output(report: &Report, a: &Args, timings: &Timings) {
    match (a.json, a.timings) {
        (true, true) => print_json(&TimedReport { report, timings }),
        (true, false) => print_json(report),
        (false, show) => {
            print!("{}", heuristics::render::human(report, a.verbose));
            if show {
                eprint!("{}", timings.human());
            }
        }
    }
}

/// Diagnoses `profile` and prints the report; an empty result (no launch, or none
/// matching `--kernel`) is a usage error that lists what was profiled.
fn diagnose_and_print(
    a: &Args,
    profile: &heuristics::ncu::Profile,
    sass: &[sass::FunctionReport],
    ptxas: Option<&sass::ptxas::PtxasReport>,
    hints: &Hints,
    timings: &mut Timings,
) -> ExitCode {
    let report =
        timings.time("diagnose", || heuristics::diagnose_profile(profile, sass, ptxas, hints, a.kernel.as_deref()));
    if report.kernels.is_empty() {
        let all: Vec<&str> = profile.launches.iter().map(|l| l.kernel.as_str()).collect();
        return fail(
            EXIT_USAGE,
            &match &a.kernel {
                Some(k) => format!("no kernel matches `{k}` (profiled: {})", all.join(", ")),
                None => "the profile holds no kernel launches".into(),
            },
        );
    }
    output(&report, a, timings);
    ExitCode::from(EXIT_PASSED)
}

pub fn run(a: Args) -> ExitCode {
    if a.full && a.ncu.is_some() {
        return fail(
            EXIT_USAGE,
            "--full chooses what ncu collects when it profiles; a saved --ncu CSV holds the metrics it was captured with",
        );
    }
    if a.full && a.task.is_none() {
        return fail(EXIT_USAGE, "--full profiles a task on this GPU with ncu's full set: give a TASK_DIR");
    }
    let mut timings = Timings::default();
    let task = match &a.task {
        Some(dir) => match Task::load(dir) {
            Ok(t) => Some(t),
            Err(e) => return fail(EXIT_USAGE, &e.to_string()),
        },
        None => None,
    };
    let hints = hints_for(task.as_ref(), a.min_bytes);

    if let Some(csv_path) = &a.ncu {
        let csv = match timings.time("csv-read", || read(csv_path, "ncu CSV")) {
            Ok(t) => t,
            Err(c) => return c,
        };
        let profile = match timings.time("csv-parse", || heuristics::ncu::parse(&csv)) {
            Ok(p) => p,
            Err(e) => return fail(EXIT_USAGE, &format!("{}: {e}", csv_path.display())),
        };
        let sass = match &a.sass {
            Some(p) => match timings.time("sass", || read_sass(p).map(|t| sass::analyze_all(&sass::parse(&t)))) {
                Ok(functions) => functions,
                Err(c) => return c,
            },
            None => Vec::new(),
        };
        let ptxas = match &a.ptxas {
            Some(p) => match timings.time("ptxas", || read(p, "ptxas report").map(|t| sass::ptxas::parse_ptxas(&t))) {
                Ok(report) => Some(report),
                Err(c) => return c,
            },
            None => None,
        };
        return diagnose_and_print(&a, &profile, &sass, ptxas.as_ref(), &hints, &mut timings);
    }

    let Some(task) = task else {
        return fail(EXIT_USAGE, "give a TASK_DIR to profile on this GPU, or --ncu RAW.csv (with --sass and --ptxas) to diagnose a saved profile");
    };
    let set = if a.full { MetricSet::Full } else { MetricSet::Required };
    let profiled = match profile::profile(&task, a.candidate.as_deref(), &a.opts, set, a.out.as_deref()) {
        Ok(p) => p,
        Err(ProfileFailure::Rejected(f)) => {
            if a.json {
                print_json(&serde_json::json!({"kernels": [], "failure": f}));
            }
            return fail(
                EXIT_REJECTED,
                &format!("the candidate failed while being profiled: {}: {}", f.class, f.message),
            );
        }
        Err(ProfileFailure::Error(EvalError::Env(e))) => return fail(EXIT_ENV, &e.to_string()),
        Err(ProfileFailure::Error(EvalError::Task(m))) => return fail(EXIT_USAGE, &m),
        Err(ProfileFailure::Error(EvalError::Internal(m))) => return fail(EXIT_ENV, &format!("internal error: {m}")),
    };
    timings = profiled.timings.clone();
    let profile = match timings.time("csv-parse", || heuristics::ncu::parse(&profiled.csv)) {
        Ok(p) => p,
        Err(e) => return fail(EXIT_ENV, &format!("{}: {e}", profiled.csv_path.display())),
    };
    let sass_path = profiled.built.sass_lines.clone().or(profiled.built.sass.clone());
    let sass = timings.time("sass", || {
        sass_path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|t| sass::analyze_all(&sass::parse(&t)))
            .unwrap_or_default()
    });
    // The roof this GPU reaches, measured after the profile (never beside candidate code:
    // this process loads none) and cached per device; without it the datasheet rule holds.
    let mut hints = hints;
    let mut notes = Vec::new();
    hints.achievable_dram_gbs = crate::wall::bandwidth::achievable_or_note(a.opts.device, &mut notes);
    for n in &notes {
        eprintln!("note: {n}");
    }
    let code = diagnose_and_print(&a, &profile, &sass, Some(&profiled.built.ptxas), &hints, &mut timings);
    if code != ExitCode::from(EXIT_PASSED) {
        return code;
    }
    eprintln!("ncu ran in: {}", crate::wall::sandbox::summary(&profiled.sandbox));
    eprintln!(
        "profile saved: {}\n  (Nsight Compute report {}; offline: nightshift diagnose {} --ncu {}{} --ptxas {})",
        profiled.csv_path.display(),
        profiled.report_path.display(),
        task.dir.display(),
        profiled.csv_path.display(),
        sass_path.map(|p| format!(" --sass {}", p.display())).unwrap_or_default(),
        profiled.built.dir.join(crate::toolkit::build::LOG_NAME).display()
    );
    ExitCode::from(EXIT_PASSED)
}
