//! Profiling a candidate with Nsight Compute: the worker calls the entry once at the
//! bench size between cuProfilerStart and cuProfilerStop under ncu, so every kernel the
//! entry launches is profiled and nothing else is. ncu collects what the diagnoses read
//! (`heuristics::required_metrics`, as `--metrics` and the few sections that alone supply
//! some of them), or `--set full` when a person asks for the whole report. The report is
//! exported, then re-read as the raw CSV page (`--print-units base`), which `heuristics`
//! parses. Each step is timed ([`Timings`]), so the cost of a profile can be seen.

use crate::build::Built;
use crate::eval::{self, classify, run_worker, Classified, EvalError, EvalOptions};
use crate::process;
use crate::protocol::{Mode, Outcome, WorkerRequest};
use crate::task::Task;
use crate::toolchain::{find_profiler, EnvError, Toolchain};
use serde::ser::SerializeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What ncu collects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetricSet {
    /// The metrics the diagnoses read, and nothing else: the search profiles every parent
    /// it expands, so collection time is search time.
    #[default]
    Required,
    /// `--set full`: every section, for a person reading the report in Nsight Compute
    /// (`diagnose --full`).
    Full,
}

/// The named steps of a profile and how long each took, in the order they ran.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timings(Vec<(&'static str, f64)>);

impl Timings {
    pub fn add(&mut self, step: &'static str, seconds: f64) {
        self.0.push((step, seconds));
    }

    /// Runs `f` and records how long it took as `step`.
    pub fn time<T>(&mut self, step: &'static str, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = f();
        self.add(step, started.elapsed().as_secs_f64());
        out
    }

    pub fn steps(&self) -> &[(&'static str, f64)] {
        &self.0
    }

    pub fn total(&self) -> f64 {
        self.0.iter().map(|(_, s)| s).sum()
    }

    /// One line per step, then the total, for stderr.
    pub fn human(&self) -> String {
        let width = self.0.iter().map(|(step, _)| step.len()).max().unwrap_or(0).max("total".len());
        let mut out = String::from("timings:\n");
        for (step, seconds) in self.0.iter().chain([&("total", self.total())]) {
            out.push_str(&format!("  {step:<width$}  {seconds:>8.3} s\n"));
        }
        out
    }
}

/// A JSON object of seconds by step, in the order the steps ran.
impl serde::Serialize for Timings {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len() + 1))?;
        for (step, seconds) in &self.0 {
            map.serialize_entry(step, &round_to_microseconds(*seconds))?;
        }
        map.serialize_entry("total", &round_to_microseconds(self.total()))?;
        map.end()
    }
}

fn round_to_microseconds(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e6
}

pub struct Profiled {
    pub built: Built,
    pub csv_path: PathBuf,
    pub report_path: PathBuf,
    pub csv: String,
    /// The hosted arrangement's namespaces around ncu, then the worker's own layers.
    pub sandbox: Vec<crate::sandbox::Layer>,
    /// The build (when this call built), ncu's start, the worker's setup, the profiled
    /// call, ncu's finish and the export to CSV.
    pub timings: Timings,
}

/// Why profiling produced no counters.
pub enum ProfileFailure {
    /// The candidate failed while being profiled (it would fail eval too).
    Rejected(crate::protocol::Failure),
    Error(EvalError),
}

impl From<EvalError> for ProfileFailure {
    fn from(e: EvalError) -> Self {
        ProfileFailure::Error(e)
    }
}

impl From<EnvError> for ProfileFailure {
    fn from(e: EnvError) -> Self {
        ProfileFailure::Error(EvalError::Env(e))
    }
}

fn find_ncu() -> Result<PathBuf, EnvError> {
    find_profiler("ncu").ok_or_else(|| EnvError {
        what: "ncu (Nsight Compute)".into(),
        hint: "install Nsight Compute (it ships with the CUDA toolkit), or diagnose a saved profile offline with --ncu RAW.csv".into(),
    })
}

/// Builds `candidate` (the baseline when None) and profiles one call of it with ncu,
/// collecting `set`. Files go to `out` (default: `profile/` in the build folder).
pub fn profile(
    task: &Task,
    candidate: Option<&Path>,
    opts: &EvalOptions,
    set: MetricSet,
    out: Option<&Path>,
) -> Result<Profiled, ProfileFailure> {
    // A refusal would otherwise come after the build: say so first.
    eval::check_hosting(&opts.worker_exe, opts.allow_unconfined_profiling)?;
    find_ncu()?;
    let tc = Toolchain::find()?;
    let arch = eval::resolve_arch(opts)?;
    let source = candidate.unwrap_or(&task.baseline);
    let trusted = source == task.baseline.as_path();
    let build_started = Instant::now();
    let built = match eval::build_one(&tc, opts, task, source, trusted, &arch) {
        Ok(b) => b,
        Err(crate::build::BuildError::Rejected { failure, dir, .. }) => {
            let mut f = crate::protocol::Failure::new(crate::protocol::FailureClass::BuildError, failure.summary());
            f.message.push_str(&format!(" (build folder {})", dir.display()));
            return Err(ProfileFailure::Rejected(f));
        }
        Err(crate::build::BuildError::Env(e)) => return Err(e.into()),
        Err(crate::build::BuildError::Io(m)) => return Err(EvalError::Internal(m).into()),
    };
    let build_s = build_started.elapsed().as_secs_f64();
    let dir = out.map(Path::to_path_buf).unwrap_or_else(|| built.dir.join("profile"));
    let mut profiled = profile_built(task, built, opts, set, &dir)?;
    profiled.timings.0.insert(0, ("build", build_s));
    Ok(profiled)
}

/// ncu's part of the command line of a profiled worker run (the worker's own follows):
/// collect `set` from the first cuProfilerStart on, at the clocks the GPU runs at, in
/// every process, into `report_base`.ncu-rep.
pub fn ncu_argv(ncu: &Path, report_base: &Path, set: MetricSet) -> Vec<String> {
    let mut argv = vec![ncu.display().to_string()];
    match set {
        MetricSet::Full => argv.extend(["--set".to_string(), "full".to_string()]),
        MetricSet::Required => {
            for section in heuristics::required_sections() {
                argv.extend(["--section".to_string(), section.to_string()]);
            }
            argv.extend(["--metrics".to_string(), heuristics::request::requested_metrics().join(",")]);
        }
    }
    argv.extend(
        [
            "--profile-from-start",
            "off",
            "--clock-control",
            "none",
            "--target-processes",
            "all",
            "--export",
            &report_base.display().to_string(),
            "--force-overwrite",
        ]
        .map(String::from),
    );
    argv
}

/// Profiles an already-built library with ncu, collecting `set`; the report and the raw
/// CSV go to `dir`. ncu refuses a whole `--metrics` list when one name is unknown to the
/// GPU (a stall reason only Hopper has, on an older card), where `--set full` collects
/// what the GPU has: a reduced profile that yields no report is taken again in full.
pub fn profile_built(
    task: &Task,
    built: Built,
    opts: &EvalOptions,
    set: MetricSet,
    dir: &Path,
) -> Result<Profiled, ProfileFailure> {
    match profile_once(task, built.clone(), opts, set, dir) {
        Err(Attempt::NoReport(why)) if set == MetricSet::Required => {
            tracing::warn!("the reduced ncu profile gave no report; taking the full set: {why}");
            let mut full = profile_once(task, built, opts, MetricSet::Full, dir).map_err(Attempt::into_failure)?;
            full.timings.add("retried-with-full-set", 0.0);
            Ok(full)
        }
        other => other.map_err(Attempt::into_failure),
    }
}

/// Why one ncu run gave no profile: it wrote no report at all, or anything else.
enum Attempt {
    NoReport(String),
    Failed(ProfileFailure),
}

impl Attempt {
    fn into_failure(self) -> ProfileFailure {
        match self {
            Attempt::NoReport(message) => EvalError::Internal(message).into(),
            Attempt::Failed(f) => f,
        }
    }
}

impl<E: Into<ProfileFailure>> From<E> for Attempt {
    fn from(e: E) -> Attempt {
        Attempt::Failed(e.into())
    }
}

fn profile_once(
    task: &Task,
    built: Built,
    opts: &EvalOptions,
    set: MetricSet,
    dir: &Path,
) -> Result<Profiled, Attempt> {
    let ncu = find_ncu()?;
    std::fs::create_dir_all(dir).map_err(|e| EvalError::Internal(format!("cannot create {}: {e}", dir.display())))?;
    let dir = dir.canonicalize().unwrap_or(dir.to_path_buf());
    let report_base = dir.join("profile");
    let request = WorkerRequest {
        task: task.clone(),
        reference: built.library.clone(),
        baseline: built.library.clone(),
        candidate: built.library.clone(),
        mode: Mode::Profile,
        device: opts.device,
        timing: opts.timing.clone(),
        threads: opts.threads,
        seed_base: opts.seed_base,
        deadline_s: 0.0,
        sandbox: true,
        sandbox_skip: Vec::new(),
        achievable_dram_gbs: opts.achievable_dram_gbs,
    };
    let argv = ncu_argv(&ncu, &report_base, set);
    let host = eval::HostTool { argv, outputs: vec![dir.clone()], allow_unconfined: opts.allow_unconfined_profiling };
    // A full-set profile replays each kernel some 40 times.
    let timeout = opts.timeout.or(task.timeout_s.map(Duration::from_secs_f64)).unwrap_or(eval::DEFAULT_TIMEOUT) * 10;
    let run = run_worker(&opts.worker_exe, &request, timeout, Some(&host))?;
    let mut timings = worker_timings(&run);
    match classify(&run, &request, timeout) {
        Classified::Report(r) => match r.outcome {
            Outcome::Passed => {}
            Outcome::Rejected { failure } => return Err(ProfileFailure::Rejected(failure).into()),
            Outcome::TaskError { message } => return Err(EvalError::Task(message).into()),
            Outcome::EnvError { message } => return Err(EnvError { what: "a usable GPU".into(), hint: message }.into()),
            Outcome::InternalError { message } => return Err(EvalError::Internal(message).into()),
        },
        Classified::Rejected(f) => return Err(ProfileFailure::Rejected(f).into()),
        Classified::TaskError(m) => return Err(EvalError::Task(m).into()),
        Classified::Internal(m) => return Err(EvalError::Internal(format!("{m}\n{}", run.stderr)).into()),
    }
    let report_path = report_base.with_extension("ncu-rep");
    if !report_path.is_file() {
        return Err(Attempt::NoReport(format!(
            "ncu wrote no report to {} (its output: {})",
            report_path.display(),
            run.stderr.trim()
        )));
    }
    let mut import = Command::new(&ncu);
    import.args(["--import"]).arg(&report_path).args(["--csv", "--page", "raw", "--print-units", "base"]);
    let out = timings
        .time("export", || process::run_captured(&mut import, Duration::from_secs(300)))
        .map_err(|e| EvalError::Internal(format!("cannot run ncu --import: {e}")))?;
    if !out.success() {
        return Err(EvalError::Internal(format!("ncu --import failed: {}", out.stderr.trim())).into());
    }
    let csv_path = dir.join("ncu_raw.csv");
    std::fs::write(&csv_path, &out.stdout)
        .map_err(|e| EvalError::Internal(format!("cannot write {}: {e}", csv_path.display())))?;
    Ok(Profiled { built, csv_path, report_path, csv: out.stdout, sandbox: run.hosted_layers(), timings })
}

/// The profiled worker run in steps: waiting for the GPU's lock, ncu's start up to the
/// worker's first phase, the worker's setup (GPU context, loading the library), the
/// profiled call (ncu's replays included), and ncu's finish after the worker's report
/// (writing the report file, exiting).
fn worker_timings(run: &eval::WorkerRun) -> Timings {
    let mut timings = Timings::default();
    if run.gpu_wait_s > 0.0 {
        timings.add("gpu-lock-wait", run.gpu_wait_s);
    }
    let start = run.first_phase_s.unwrap_or(0.0);
    let profiled_call = run.phase_seconds.get(crate::protocol::Phase::Profile.name()).copied().unwrap_or(0.0);
    let phases: f64 = run.phase_seconds.values().sum();
    timings.add("ncu-start", start);
    timings.add("worker-setup", phases - profiled_call);
    timings.add("profiled-call", profiled_call);
    timings.add("ncu-finish", (run.seconds - start - phases).max(0.0));
    timings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(set: MetricSet) -> Vec<String> {
        ncu_argv(Path::new("/opt/ncu/ncu"), Path::new("/runs/x/profile"), set)
    }

    fn value_of<'a>(argv: &'a [String], flag: &str) -> Vec<&'a str> {
        argv.windows(2).filter(|w| w[0] == flag).map(|w| w[1].as_str()).collect()
    }

    #[test]
    fn the_required_set_names_the_declared_metrics_and_sections_not_a_set() {
        let argv = argv(MetricSet::Required);
        assert_eq!(argv[0], "/opt/ncu/ncu");
        assert!(value_of(&argv, "--set").is_empty(), "{argv:?}");
        assert_eq!(value_of(&argv, "--section"), heuristics::required_sections());
        let metrics = value_of(&argv, "--metrics");
        assert_eq!(metrics.len(), 1, "one comma-separated list");
        let listed: Vec<&str> = metrics[0].split(',').collect();
        assert_eq!(listed, heuristics::request::requested_metrics());
        // What the list leaves out, the sections bring.
        for name in heuristics::required_metrics() {
            assert!(
                listed.contains(&name)
                    || heuristics::request::SECTION_METRICS.iter().any(|s| s.metrics.contains(&name)),
                "{name}"
            );
        }
    }

    #[test]
    fn the_full_set_is_ncus_own_and_nothing_else() {
        let argv = argv(MetricSet::Full);
        assert_eq!(value_of(&argv, "--set"), ["full"]);
        assert!(value_of(&argv, "--metrics").is_empty() && value_of(&argv, "--section").is_empty());
    }

    #[test]
    fn both_sets_profile_from_the_marked_call_at_natural_clocks_into_the_report() {
        for set in [MetricSet::Required, MetricSet::Full] {
            let argv = argv(set);
            assert_eq!(value_of(&argv, "--profile-from-start"), ["off"]);
            assert_eq!(value_of(&argv, "--clock-control"), ["none"]);
            assert_eq!(value_of(&argv, "--target-processes"), ["all"]);
            assert_eq!(value_of(&argv, "--export"), ["/runs/x/profile"]);
            assert_eq!(argv.last().map(String::as_str), Some("--force-overwrite"));
        }
    }

    #[test]
    fn worker_steps_add_up_to_the_run() {
        let mut run = eval::WorkerRun { seconds: 10.0, first_phase_s: Some(1.5), ..Default::default() };
        run.phase_seconds.insert("init".into(), 0.5);
        run.phase_seconds.insert("load-candidate".into(), 0.25);
        run.phase_seconds.insert("profile".into(), 7.0);
        let t = worker_timings(&run);
        assert_eq!(
            t.steps(),
            [("ncu-start", 1.5), ("worker-setup", 0.75), ("profiled-call", 7.0), ("ncu-finish", 0.75)]
        );
        assert_eq!(t.total(), 10.0);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(
            json, r#"{"ncu-start":1.5,"worker-setup":0.75,"profiled-call":7.0,"ncu-finish":0.75,"total":10.0}"#,
            "steps in the order they ran"
        );
        assert!(t.human().contains("profiled-call") && t.human().contains("total"), "{}", t.human());
    }
}
