//! Profiling a candidate with Nsight Compute: a standalone worker calls the entry once at
//! the bench size between cuProfilerStart and cuProfilerStop under ncu, so every kernel the
//! entry launches is profiled and nothing else is. ncu collects what the diagnoses read
//! (`heuristics::required_metrics`, as one `--metrics` list and no section), or `--set full` when a person asks for the whole report. The same ncu
//! run prints the raw page as CSV (`--print-units base`), which `heuristics` parses, and
//! saves the report for Nsight Compute: no second ncu has to read the report back. Each
//! step is timed ([`Timings`]), so the cost of a profile can be seen.
//!
//! The CSV is ncu's alone, though the process it profiles runs candidate code:
//! - ncu prints it to `--log-file`, which takes the tool's own output ("Send all tool
//!   output to the specified file", Nsight Compute CLI, File options). The profiled
//!   process keeps the stdout and stderr it inherits, which the orchestrator reads as the
//!   worker's progress and a log tail (the worker points its fd 1 at stderr before loading
//!   anything). On the console the two would share one stream, the application's lines
//!   before ncu's table (tests/fixtures/h200/ncu_full_raw_all.csv), so a candidate could
//!   print a table of its own ahead of the real one.
//! - The log and the report are written to a folder of the orchestrator's (an evaluation
//!   folder of `runtime_dir`, the one kept in the hosted arrangement), which no worker can
//!   write (Landlock grants it its scratch folder and, hosted, the private /tmp, /dev/shm
//!   and /var/tmp), and only then saved to the output folder, once the worker is gone
//!   (it cannot fork, and the hosted PID namespace ends with the tool). The output folder
//!   may be one a worker could write (an `--out` under /tmp with
//!   `--allow-unconfined-profiling`), so what is saved there replaces any file or link in
//!   its place rather than writing through it.
//! - ncu does hand its log's descriptor down to the process it starts: on an H100 a
//!   candidate that wrote a table into every descriptor it held put three into the log.
//!   So the worker closes every descriptor onto the tool's folders before it loads any
//!   library (`StandaloneRequest::host_outputs`). Behind that, the log is still read as if it
//!   could be written: only what follows ncu's last "Disconnected from process" line
//!   when ncu prints one (with `--log-file` it may not), one table, every row as wide as
//!   its header; anything else is refused as a forged report.

use super::classify::{classify, Classified};
use super::hosted::{run_standalone, StandaloneRun};
use crate::task::Task;
use crate::toolkit::build::Built;
use crate::toolkit::process;
use crate::toolkit::toolchain::{find_profiler, EnvError, Toolchain};
use crate::wall::protocol::{Standalone, StandalonePhase};
use crate::wall::{self, EvalError, EvalOptions};
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
    pub sandbox: Vec<crate::wall::sandbox::Layer>,
    /// The build (when this call built), ncu's start, the worker's setup, the profiled
    /// call's setup, the profiled call, ncu's finish, and saving the CSV, ncu's messages and
    /// the report.
    pub timings: Timings,
}

/// Why profiling produced no counters.
pub enum ProfileFailure {
    /// The candidate failed while being profiled (it would fail eval too).
    Rejected(crate::wall::protocol::Failure),
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
    wall::check_hosting(&opts.worker_exe, opts.allow_unconfined_profiling)?;
    find_ncu()?;
    let tc = Toolchain::find()?;
    let arch = wall::resolve_arch(opts)?;
    let source = candidate.unwrap_or(&task.baseline);
    let trusted = source == task.baseline.as_path();
    let build_started = Instant::now();
    let built = match wall::build_one(&tc, opts, task, source, trusted, &arch) {
        Ok(b) => b,
        Err(crate::toolkit::build::BuildError::Rejected { failure, dir, .. }) => {
            let mut f =
                crate::wall::protocol::Failure::new(crate::wall::protocol::FailureClass::BuildError, failure.summary());
            f.message.push_str(&format!(" (build folder {})", dir.display()));
            return Err(ProfileFailure::Rejected(f));
        }
        Err(crate::toolkit::build::BuildError::Env(e)) => return Err(e.into()),
        Err(crate::toolkit::build::BuildError::Io(m)) => return Err(EvalError::Internal(m).into()),
    };
    let build_s = build_started.elapsed().as_secs_f64();
    let dir = out.map(Path::to_path_buf).unwrap_or_else(|| built.dir.join("profile"));
    let mut profiled = profile_built(task, built, trusted, opts, set, &dir)?;
    profiled.timings.0.insert(0, ("build", build_s));
    Ok(profiled)
}

/// What the reduced set leaves out of ncu's defaults, none of which the diagnoses read
/// (`--full` keeps them, for a person reading the report in Nsight Compute):
/// - rules: they run in ncu's Python after every result, and their findings are not on
///   the raw page;
/// - warp state sampling past one sparse pass: the tools read the stall counters, not the
///   sampler's stall samples (`smsp__pcsamp_*`, taken in passes of their own); the cap
///   holds should a metric ever bring the sampler in.
const REDUCED_SET_TRIMS: [&str; 6] =
    ["--apply-rules", "no", "--warp-sampling-interval", "31", "--warp-sampling-max-passes", "1"];

/// ncu's part of the command line of a profiled worker run (the worker's own follows):
/// collect `set` from the first cuProfilerStart on, at the clocks the GPU runs at, in
/// every process; print the raw page as CSV to `log` and save the report as
/// `report_base`.ncu-rep.
pub fn ncu_argv(ncu: &Path, report_base: &Path, log: &Path, set: MetricSet) -> Vec<String> {
    let mut argv = vec![ncu.display().to_string()];
    let mut push = |args: &[&str]| argv.extend(args.iter().map(|a| a.to_string()));
    // A config.ncu-cfg of the user's would add sections (and passes) to every profile.
    push(&["--config-file", "off"]);
    match set {
        MetricSet::Full => push(&["--set", "full"]),
        MetricSet::Required => {
            push(&["--metrics", &heuristics::required_metrics().join(",")]);
            push(&REDUCED_SET_TRIMS);
        }
    }
    push(&["--profile-from-start", "off", "--clock-control", "none", "--target-processes", "all"]);
    // `--page` is what makes ncu print a page beside an `--export`.
    push(&["--csv", "--page", "raw", "--print-units", "base", "--log-file", &log.display().to_string()]);
    push(&["--export", &report_base.display().to_string(), "--force-overwrite"]);
    argv
}

/// Profiles an already-built library with ncu, collecting `set`; the report and the raw
/// CSV go to `dir`. ncu refuses a whole `--metrics` list when one name is unknown to the
/// GPU (a stall reason only Hopper has, on an older card), where `--set full` collects
/// what the GPU has: a reduced profile that yields no report is taken again in full.
pub fn profile_built(
    task: &Task,
    built: Built,
    trusted: bool,
    opts: &EvalOptions,
    set: MetricSet,
    dir: &Path,
) -> Result<Profiled, ProfileFailure> {
    let attempt = match profile_once(task, built.clone(), trusted, opts, set, dir) {
        Err(Attempt::NoReport(missing)) if set == MetricSet::Required => {
            tracing::warn!("the reduced ncu profile gave no report; taking the full set: {missing}");
            profile_once(task, built, trusted, opts, MetricSet::Full, dir).map(|mut full| {
                full.timings.add("retried-with-full-set", 0.0);
                full
            })
        }
        other => other,
    };
    match attempt {
        Err(Attempt::NoReport(missing)) if !trusted => Err(blame_missing_report(task, opts, missing)),
        other => other.map_err(Attempt::into_failure),
    }
}

/// The candidate's failure when the baseline profiles and it does not. The message quotes
/// ncu alone: the profiled process's stderr is the candidate's, and a rejection must not
/// carry lines it wrote to look like ours.
fn broken_profiler(missing: &NoReport) -> crate::wall::protocol::Failure {
    crate::wall::protocol::Failure::new(
        crate::wall::protocol::FailureClass::ForgedReport,
        format!(
            "ncu wrote no report for the candidate, and writes one for the task's baseline on this GPU: the candidate's process broke the profiler's channel (ncu's log: {})",
            missing.ncu_log
        ),
    )
}

/// Whose fault a candidate's missing report is. ncu talks to the process it profiles
/// through descriptors that process holds, and candidate code can write into them (on an
/// H100 a candidate that wrote lines into every pipe it held left ncu without a report),
/// yet a machine whose ncu cannot profile at all looks the same from here. So the control
/// experiment decides: the task's baseline profiled the same way. Its report says the
/// environment works and the candidate broke the profiler; without one the environment is
/// at fault, as before.
fn blame_missing_report(task: &Task, opts: &EvalOptions, missing: NoReport) -> ProfileFailure {
    let control = (|| -> Result<(), ProfileFailure> {
        let tc = Toolchain::find()?;
        let arch = wall::resolve_arch(opts)?;
        let baseline = wall::build_one(&tc, opts, task, &task.baseline, true, &arch)
            .map_err(|e| EvalError::Internal(format!("the baseline's build: {e}")))?;
        let scratch = crate::wall::runtime_dir::evaluation_dir().map_err(|e| EvalError::Internal(e.to_string()))?;
        profile_once(task, baseline, true, opts, MetricSet::Full, scratch.path()).map_err(Attempt::into_failure)?;
        Ok(())
    })();
    match control {
        Ok(()) => ProfileFailure::Rejected(broken_profiler(&missing)),
        Err(_) => EvalError::Internal(missing.to_string()).into(),
    }
}

/// What is known of an ncu run that wrote no report: ncu's own log, and the stderr of the
/// process it profiled (the library's words, once it loaded: never part of a verdict).
struct NoReport {
    ncu_log: String,
    stderr: String,
}

impl std::fmt::Display for NoReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ncu wrote no report (its log: {}; stderr: {})", self.ncu_log, self.stderr)
    }
}

/// Why one ncu run gave no profile: it wrote no report at all, or anything else.
enum Attempt {
    NoReport(NoReport),
    Failed(ProfileFailure),
}

impl Attempt {
    fn into_failure(self) -> ProfileFailure {
        match self {
            Attempt::NoReport(missing) => EvalError::Internal(missing.to_string()).into(),
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
    trusted: bool,
    opts: &EvalOptions,
    set: MetricSet,
    dir: &Path,
) -> Result<Profiled, Attempt> {
    let ncu = find_ncu()?;
    std::fs::create_dir_all(dir).map_err(|e| EvalError::Internal(format!("cannot create {}: {e}", dir.display())))?;
    let dir = dir.canonicalize().unwrap_or(dir.to_path_buf());
    // Where ncu writes, out of every worker's reach (see the module's notes); the output
    // folder is not handed to the hosted arrangement at all.
    let private = crate::wall::runtime_dir::evaluation_dir().map_err(|e| EvalError::Internal(e.to_string()))?;
    let report_base = private.path().join("profile");
    let log = private.path().join(LOG_NAME);
    let request = opts.standalone_request(task, &built.library, trusted, Standalone::Profile);
    let argv = ncu_argv(&ncu, &report_base, &log, set);
    let host = wall::HostTool {
        argv,
        outputs: vec![private.path().to_path_buf()],
        allow_unconfined: opts.allow_unconfined_profiling,
    };
    // A full-set profile replays each kernel some 40 times.
    let timeout = opts.timeout.or(task.timeout_s.map(Duration::from_secs_f64)).unwrap_or(wall::DEFAULT_TIMEOUT) * 10;
    let run = run_standalone(&opts.worker_exe, request, timeout, &host)?;
    let mut timings = worker_timings(&run);
    // ncu's own messages (an unknown metric, a refused counter) are in its log now.
    let log_tail = || wall::tail(std::fs::read_to_string(&log).unwrap_or_default().trim(), 2000);
    match classify(&run, timeout) {
        Classified::Ran => {}
        Classified::Rejected(f) => return Err(ProfileFailure::Rejected(f).into()),
        Classified::Env(m) => return Err(EnvError { what: "a usable GPU".into(), hint: m }.into()),
        Classified::Internal(m) => {
            return Err(EvalError::Internal(format!("{m}\n{}\nncu: {}", run.stderr, log_tail())).into())
        }
    }
    let report = report_base.with_extension("ncu-rep");
    if !report.is_file() {
        return Err(Attempt::NoReport(NoReport { ncu_log: log_tail(), stderr: run.stderr.trim().to_string() }));
    }
    let reading = Instant::now();
    let logged = std::fs::read_to_string(&log)
        .map_err(|e| EvalError::Internal(format!("cannot read ncu's log {}: {e}", log.display())))?;
    // Only the profiled process, running candidate code, can have written a second table
    // or a broken row: the candidate's forgery, refused as such.
    let table = raw_table(&logged).map_err(|m| {
        ProfileFailure::Rejected(crate::wall::protocol::Failure::new(
            crate::wall::protocol::FailureClass::ForgedReport,
            m,
        ))
    })?;
    let mut save_s = reading.elapsed().as_secs_f64();
    let csv = match table {
        Some(csv) => csv,
        None => {
            // Only where ncu printed no table (it documents printing the page with
            // `--page` beside `--export`): the report read back, as before.
            tracing::warn!("ncu's log holds no raw page; reading the report back with ncu --import");
            timings.time("export", || import_raw(&ncu, &report))?
        }
    };
    let saving = Instant::now();
    let csv_path = dir.join(CSV_NAME);
    write_new(&csv_path, csv.as_bytes())
        .map_err(|e| EvalError::Internal(format!("cannot write {}: {e}", csv_path.display())))?;
    // Kept for a person: passes per kernel, metrics ncu could not collect.
    let messages_path = dir.join(LOG_NAME);
    write_new(&messages_path, ncu_messages(&logged).as_bytes())
        .map_err(|e| EvalError::Internal(format!("cannot write {}: {e}", messages_path.display())))?;
    let report_path = dir.join(REPORT_NAME);
    move_file(&report, &report_path).map_err(|e| {
        EvalError::Internal(format!("cannot move ncu's report {} to {}: {e}", report.display(), report_path.display()))
    })?;
    save_s += saving.elapsed().as_secs_f64();
    timings.add("save", save_s);
    Ok(Profiled { built, csv_path, report_path, csv, sandbox: run.hosted_layers(), timings })
}

/// ncu's log in the private folder of one profile; its messages alone in the output
/// folder.
const LOG_NAME: &str = "ncu.log";
/// The raw page and the report, in the output folder.
const CSV_NAME: &str = "ncu_raw.csv";
const REPORT_NAME: &str = "profile.ncu-rep";

/// Whether a line opens a raw-page table, as `heuristics::ncu::parse` finds its header.
fn is_table_header(line: &str) -> bool {
    line.trim_start().starts_with("\"ID\",")
}

/// The raw page out of ncu's log: from the table's header on, without ncu's own
/// `==PROF==` and `==WARNING==` lines (so the saved CSV starts at its header, as
/// `ncu --import` prints it); None where the log holds no table; an error where it holds
/// more than the one ncu prints (see the module's notes).
///
/// On an H100 the profiled process could write into the log (a candidate that wrote a
/// table into every descriptor it held planted three more), so the table must also be
/// whole: every row has the header's number of fields, which a line glued to ncu's
/// header or a row cut short cannot.
fn raw_table(log: &str) -> Result<Option<String>, String> {
    // ncu prints its table after the profiled process has ended, and says so first: what
    // follows its last "Disconnected" line no candidate code was alive to write.
    let log = match log.rfind("\n==PROF== Disconnected from process") {
        Some(at) => &log[at + 1..],
        None => log,
    };
    let headers = log.lines().filter(|l| is_table_header(l)).count();
    if headers > 1 {
        return Err(format!(
            "ncu's log holds {headers} raw-page tables where ncu prints one: something besides ncu wrote into it, so none of it is read"
        ));
    }
    let mut lines = log.split_inclusive('\n').skip_while(|l| !is_table_header(l)).peekable();
    if lines.peek().is_none() {
        return Ok(None);
    }
    let table: String = lines.filter(|l| !l.starts_with("==")).collect();
    let mut rows = csv::ReaderBuilder::new().has_headers(false).flexible(false).from_reader(table.as_bytes());
    for row in rows.records() {
        let Err(e) = row else { continue };
        return Err(match e.kind() {
            csv::ErrorKind::UnequalLengths { pos, expected_len, len } => format!(
                "line {} of ncu's table has {len} fields where its header has {expected_len}: something besides ncu wrote into the log, so none of it is read",
                pos.as_ref().map_or(0, |p| p.line())
            ),
            _ => format!("ncu's table does not read as CSV ({e}), so none of it is read"),
        });
    }
    Ok(Some(table))
}

/// ncu's own lines in its log (`==PROF==`, `==WARNING==`, `==ERROR==`), the table left
/// out.
fn ncu_messages(log: &str) -> String {
    log.split_inclusive('\n').filter(|l| l.starts_with("==")).collect()
}

/// The raw page of a saved report, printed by a second ncu.
fn import_raw(ncu: &Path, report: &Path) -> Result<String, EvalError> {
    let mut import = Command::new(ncu);
    import.args(["--config-file", "off", "--import"]).arg(report).args([
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
    ]);
    let out = process::run_captured(&mut import, Duration::from_secs(300))
        .map_err(|e| EvalError::Internal(format!("cannot run ncu --import: {e}")))?;
    if !out.success() {
        return Err(EvalError::Internal(format!("ncu --import failed: {}", out.stderr.trim())));
    }
    Ok(out.stdout)
}

/// Moves `from` to `to`, copying across file systems (the runtime folder is often a
/// tmpfs), over whatever was at `to` (see [`create_new`]).
fn move_file(from: &Path, to: &Path) -> std::io::Result<()> {
    if std::fs::rename(from, to).is_ok() {
        return Ok(());
    }
    std::io::copy(&mut std::fs::File::open(from)?, &mut create_new(to)?).map(|_| ())
}

fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::io::Write::write_all(&mut create_new(path)?, bytes)
}

/// A new file at `path`, what was there removed first: a link there is replaced, never
/// written through (the module's notes say who could have left one).
fn create_new(path: &Path) -> std::io::Result<std::fs::File> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new().write(true).create_new(true).open(path)
}

/// The profiled worker run in steps: waiting for the GPU's lock, ncu's start up to the
/// worker's first phase, the worker's setup (GPU context, loading the library), the
/// profiled call's setup (the bench inputs made and uploaded, two warm-up calls ncu does
/// not profile), the profiled call (ncu's replays included), and ncu's finish after the
/// worker's report (printing the raw page, writing the report, exiting).
fn worker_timings(run: &StandaloneRun) -> Timings {
    let mut timings = Timings::default();
    if run.gpu_wait_s > 0.0 {
        timings.add("gpu-lock-wait", run.gpu_wait_s);
    }
    let start = run.first_phase_s.unwrap_or(0.0);
    let phase = |p: StandalonePhase| run.phase_seconds.get(p.name()).copied().unwrap_or(0.0);
    let (call_setup, call) =
        (phase(StandalonePhase::Setup) + phase(StandalonePhase::WarmUp), phase(StandalonePhase::Call));
    let phases: f64 = run.phase_seconds.values().sum();
    timings.add("ncu-start", start);
    timings.add("worker-setup", phases - call_setup - call);
    timings.add("call-setup", call_setup);
    timings.add("profiled-call", call);
    timings.add("ncu-finish", (run.seconds - start - phases).max(0.0));
    timings
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_profile_the_candidate_broke_quotes_ncu_never_the_candidate() {
        let missing = NoReport {
            ncu_log: "==PROF== Connected to process 7".into(),
            stderr: r#"{"event":"done","error":null,"ours":true} nightshift_forged"#.into(),
        };
        let f = broken_profiler(&missing);
        assert_eq!(f.class, crate::wall::protocol::FailureClass::ForgedReport);
        assert!(f.message.contains("==PROF== Connected to process 7"), "{}", f.message);
        assert!(!f.message.contains("nightshift_forged") && !f.message.contains("\"event\""), "{}", f.message);
        // The environment's error, where the baseline fails too, keeps both for a person.
        assert!(missing.to_string().contains("nightshift_forged"));
    }
    use super::*;

    fn argv(set: MetricSet) -> Vec<String> {
        ncu_argv(Path::new("/opt/ncu/ncu"), Path::new("/eval/x/profile"), Path::new("/eval/x/ncu.log"), set)
    }

    fn value_of<'a>(argv: &'a [String], flag: &str) -> Vec<&'a str> {
        argv.windows(2).filter(|w| w[0] == flag).map(|w| w[1].as_str()).collect()
    }

    #[test]
    fn the_required_set_names_the_declared_metrics_and_sections_not_a_set() {
        let argv = argv(MetricSet::Required);
        assert_eq!(argv[0], "/opt/ncu/ncu");
        assert!(value_of(&argv, "--set").is_empty(), "{argv:?}");
        // A section would bring its own passes (SourceCounters' instrumented ones cost
        // gemm_f32 7 of 10 s).
        assert!(value_of(&argv, "--section").is_empty(), "{argv:?}");
        let metrics = value_of(&argv, "--metrics");
        assert_eq!(metrics.len(), 1, "one comma-separated list");
        let listed: Vec<&str> = metrics[0].split(',').collect();
        assert_eq!(listed, heuristics::required_metrics());
    }

    #[test]
    fn the_required_set_trims_rules_and_warp_sampling_and_the_full_set_keeps_them() {
        let reduced = argv(MetricSet::Required);
        assert_eq!(value_of(&reduced, "--apply-rules"), ["no"]);
        assert_eq!(value_of(&reduced, "--warp-sampling-max-passes"), ["1"]);
        assert_eq!(value_of(&reduced, "--warp-sampling-interval"), ["31"], "the sparsest sampling ncu offers");
        let full = argv(MetricSet::Full);
        for flag in ["--apply-rules", "--warp-sampling-max-passes", "--warp-sampling-interval"] {
            assert!(value_of(&full, flag).is_empty(), "--full keeps ncu's default for {flag}");
        }
        // The trims hold only while no part of the analysis reads what they cut.
        for name in heuristics::required_metrics() {
            assert!(!name.starts_with("smsp__pcsamp"), "{name} is a warp sample: drop the sampling trims");
        }
    }

    #[test]
    fn the_full_set_is_ncus_own_and_nothing_else() {
        let argv = argv(MetricSet::Full);
        assert_eq!(value_of(&argv, "--set"), ["full"]);
        assert!(value_of(&argv, "--metrics").is_empty() && value_of(&argv, "--section").is_empty());
    }

    #[test]
    fn both_sets_print_the_raw_page_to_the_log_and_save_the_report() {
        for set in [MetricSet::Required, MetricSet::Full] {
            let argv = argv(set);
            assert_eq!(value_of(&argv, "--config-file"), ["off"]);
            assert_eq!(value_of(&argv, "--profile-from-start"), ["off"]);
            assert_eq!(value_of(&argv, "--clock-control"), ["none"]);
            assert_eq!(value_of(&argv, "--target-processes"), ["all"]);
            assert!(argv.iter().any(|a| a == "--csv"), "{argv:?}");
            assert_eq!(value_of(&argv, "--page"), ["raw"], "without --page, --export prints nothing");
            assert_eq!(value_of(&argv, "--print-units"), ["base"]);
            assert_eq!(value_of(&argv, "--log-file"), ["/eval/x/ncu.log"]);
            assert_eq!(value_of(&argv, "--export"), ["/eval/x/profile"]);
            assert_eq!(argv.last().map(String::as_str), Some("--force-overwrite"));
        }
    }

    const LOG: &str = "==WARNING== Note: Running with unmodified GPU clocks.\n\
        ==PROF== Connected to process 7 (/usr/bin/nightshift)\n\
        ==PROF== Disconnected from process 7\n\
        \"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\
        \"\",\"\",\"ns\"\n\
        \"0\",\"softmax\",\"1,024\"\n\
        ==PROF== Report: /eval/x/profile.ncu-rep\n";

    #[test]
    fn the_raw_page_is_cut_out_of_ncus_log_from_its_header_on() {
        let table = raw_table(LOG).unwrap().expect("a table");
        assert_eq!(
            table,
            "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"ns\"\n\"0\",\"softmax\",\"1,024\"\n"
        );
        let profile = heuristics::ncu::parse(&table).unwrap();
        assert_eq!(profile.launches.len(), 1);
        assert_eq!(profile.launches[0].kernel, "softmax");
        assert_eq!(raw_table("==PROF== Connected to process 7\n==WARNING== No kernels were profiled.\n"), Ok(None));
        let messages = ncu_messages(LOG);
        assert_eq!(messages.lines().count(), 4, "{messages}");
        assert!(messages.lines().all(|l| l.starts_with("==")) && messages.ends_with("profile.ncu-rep\n"));
        assert_eq!(raw_table(""), Ok(None));
    }

    #[test]
    fn a_capture_cut_to_its_table_reads_as_the_whole_capture() {
        // A run printed to the console: ncu's lines and the application's before the table.
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200/ncu_full_raw_all.csv"),
        )
        .unwrap();
        let table = raw_table(&text).unwrap().expect("a table");
        assert!(table.starts_with("\"ID\","));
        let (whole, cut) = (heuristics::ncu::parse(&text).unwrap(), heuristics::ncu::parse(&table).unwrap());
        assert_eq!(whole.launches.len(), cut.launches.len());
        for (a, b) in whole.launches.iter().zip(&cut.launches) {
            let facts = |l: &heuristics::ncu::Launch| {
                (l.kernel.clone(), l.metric_count(), l.get("gpu__time_duration.sum"), l.get("dram__bytes_read.sum"))
            };
            assert_eq!(facts(a), facts(b));
        }
    }

    #[test]
    fn a_row_glued_to_the_header_or_cut_short_is_refused() {
        let (header, rest) = LOG.split_at(LOG.find("\"ID\",").unwrap());
        // A forged row without its newline, so ncu's header line no longer starts a line.
        let glued = format!("{header}\"0\",\"forged\"{rest}");
        assert!(raw_table(&glued).is_err() || raw_table(&glued) == Ok(None));
        let table = raw_table(LOG).unwrap().unwrap();
        let cut = format!("{LOG}\"9\",\"short\"\n");
        let err = raw_table(&cut).unwrap_err();
        assert!(err.contains("fields where its header has"), "{err}");
        assert!(table.lines().count() >= 2);
        // A comma inside a quoted field is data, not a field of its own.
        let quoted_comma = format!("{LOG}\"9\",\"a, b\",\"7\"\n");
        assert!(raw_table(&quoted_comma).unwrap().unwrap().contains("a, b"));
        // A forged table and disconnect line written while the process ran come before
        // ncu's own disconnect line, and are not read.
        let (before, after) = LOG.split_at(LOG.find("==PROF== Disconnected").unwrap());
        let forged =
            format!("{before}==PROF== Disconnected from process 7\n\"ID\",\"Kernel Name\"\n\"0\",\"forged\"\n{after}");
        assert_eq!(raw_table(&forged), Ok(Some(table)));
    }

    #[test]
    fn a_second_table_is_ignored_before_ncus_disconnect_line_and_refused_elsewhere() {
        let forged = "\"ID\",\"Kernel Name\"\n\"\",\"\"\n\"0\",\"forged\"\n";
        // Written while the process ran, before ncu's disconnect line: not read at all.
        let real = raw_table(LOG).unwrap();
        for planted in [format!("{forged}{LOG}"), format!("  {forged}{LOG}")] {
            assert_eq!(raw_table(&planted), Ok(real.clone()));
        }
        // After it (no disconnect line to go by, or a writer ncu let in): refused.
        let after = format!("{LOG}{forged}");
        let err = raw_table(&after).unwrap_err();
        assert!(err.contains("2 raw-page tables"), "{err}");
        let no_disconnect = LOG.replace("==PROF== Disconnected from process 7\n", "");
        let err = raw_table(&format!("  {forged}{no_disconnect}")).unwrap_err();
        assert!(err.contains("2 raw-page tables"), "{err}");
    }

    #[test]
    fn saved_files_replace_a_link_instead_of_writing_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let (from, victim) = (dir.path().join("report"), dir.path().join("victim"));
        std::fs::write(&from, "report").unwrap();
        std::fs::write(&victim, "keep").unwrap();
        let (csv, copied, moved) = (dir.path().join("csv"), dir.path().join("copied"), dir.path().join("moved"));
        for planted in [&csv, &copied, &moved] {
            std::os::unix::fs::symlink(&victim, planted).unwrap();
        }
        write_new(&csv, b"table").unwrap();
        // What a move across file systems does.
        std::io::copy(&mut std::fs::File::open(&from).unwrap(), &mut create_new(&copied).unwrap()).unwrap();
        move_file(&from, &moved).unwrap();
        assert_eq!(std::fs::read_to_string(&csv).unwrap(), "table");
        assert_eq!(std::fs::read_to_string(&copied).unwrap(), "report");
        assert_eq!(std::fs::read_to_string(&moved).unwrap(), "report");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        for saved in [&csv, &copied, &moved] {
            assert!(!std::fs::symlink_metadata(saved).unwrap().file_type().is_symlink());
        }
    }

    #[test]
    fn worker_steps_add_up_to_the_run() {
        let mut run = StandaloneRun { seconds: 10.0, first_phase_s: Some(1.5), ..Default::default() };
        run.phase_seconds.insert("init".into(), 0.5);
        run.phase_seconds.insert("loading".into(), 0.25);
        run.phase_seconds.insert("setup".into(), 0.3);
        run.phase_seconds.insert("warm-up".into(), 0.2);
        run.phase_seconds.insert("call".into(), 6.5);
        let t = worker_timings(&run);
        assert_eq!(
            t.steps(),
            [
                ("ncu-start", 1.5),
                ("worker-setup", 0.75),
                ("call-setup", 0.5),
                ("profiled-call", 6.5),
                ("ncu-finish", 0.75)
            ]
        );
        assert_eq!(t.total(), 10.0);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(
            json,
            r#"{"ncu-start":1.5,"worker-setup":0.75,"call-setup":0.5,"profiled-call":6.5,"ncu-finish":0.75,"total":10.0}"#,
            "steps in the order they ran"
        );
        assert!(t.human().contains("profiled-call") && t.human().contains("total"), "{}", t.human());
    }
}
