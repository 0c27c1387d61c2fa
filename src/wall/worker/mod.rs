//! The worker: the only process that runs candidate code. It loads the trusted reference
//! first and computes every reference output before any untrusted library is mapped
//! into the process, then checks and times the candidate against the baseline.
//!
//! It talks to the orchestrator through a private copy of its original stdout; its fd 1
//! is pointed at stderr before any candidate loads, so a candidate's `printf` cannot
//! corrupt the protocol. It announces each phase before entering it: if it dies, the
//! orchestrator knows where.

mod anomalies;
mod bench_sets;
mod buffers;
mod cases;
mod energy;
mod floor;
mod inputs;
mod timing;

use crate::task::types::ParamType;
use crate::task::{ArgRole, Task};
use crate::wall::gpu::{Gpu, GpuError};
use crate::wall::protocol::{
    Failure, FailureClass, Mode, Outcome, Phase, WorkerMessage, WorkerReport, WorkerRequest, CHANNEL_LOST_EXIT,
};
use buffers::DeviceCase;
use inputs::{CaseData, HostCase};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::io::Write;
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

type CallFn = unsafe extern "C" fn(*const *mut c_void, *mut c_void) -> c_int;
type ErrorNameFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// A loaded kernel library (reference, baseline or candidate).
pub(crate) struct Entry {
    /// Never unloaded: a candidate may leave threads or callbacks behind that would run
    /// unmapped code (and crash the worker before it reports) after a dlclose.
    _lib: std::mem::ManuallyDrop<libloading::Library>,
    call: CallFn,
    error_name: ErrorNameFn,
    pub role: &'static str,
    /// Calls made so far in this process: failures name the call that produced them.
    pub calls: std::cell::Cell<u64>,
}

/// Why a library gives no entry to call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoadError {
    #[error("cannot load the {role} library {}: {source}", path.display())]
    Open { role: &'static str, path: std::path::PathBuf, source: libloading::Error },
    #[error("the {role} library has no shim entry: {source}")]
    NoEntry { role: &'static str, source: libloading::Error },
    #[error("the {role} library has no shim error function: {source}")]
    NoErrorName { role: &'static str, source: libloading::Error },
}

impl Entry {
    fn load(path: &Path, role: &'static str) -> Result<Entry, LoadError> {
        use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
        // SAFETY: loading runs the library's constructors: this is exactly the untrusted
        // code this process exists to contain.
        let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|source| LoadError::Open {
            role,
            path: path.to_path_buf(),
            source,
        })?;
        let lib: libloading::Library = lib.into();
        // SAFETY: symbol types match the generated shim (shim.rs).
        let call = unsafe { lib.get::<CallFn>(crate::toolkit::build::shim::CALL_SYMBOL.as_bytes()) }
            .map(|s| *s)
            .map_err(|source| LoadError::NoEntry { role, source })?;
        // SAFETY: as above.
        let error_name = unsafe { lib.get::<ErrorNameFn>(crate::toolkit::build::shim::ERROR_NAME_SYMBOL.as_bytes()) }
            .map(|s| *s)
            .map_err(|source| LoadError::NoErrorName { role, source })?;
        Ok(Entry { _lib: std::mem::ManuallyDrop::new(lib), call, error_name, role, calls: std::cell::Cell::new(0) })
    }
}

/// Why a call did not complete.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The runtime's last error after the entry returned (launch configuration and such).
    Launch { name: String },
    /// An error surfaced while waiting for the device.
    Device(GpuError),
}

impl CallError {
    fn failure(&self, role: &str, at: &str) -> Failure {
        match self {
            CallError::Launch { name } if name.contains("IllegalAddress") => Failure::new(
                FailureClass::IllegalAddress,
                format!("{role}: {name} at {at}: a kernel read or wrote outside any allocation"),
            ),
            CallError::Launch { name } => {
                Failure::new(FailureClass::LaunchError, format!("{role}: launch failed with {name} at {at}"))
            }
            CallError::Device(e) if e.is_illegal_address() => Failure::new(
                FailureClass::IllegalAddress,
                format!("{role}: {} at {at}: a kernel read or wrote outside any allocation", e.name),
            ),
            CallError::Device(e) => Failure::new(FailureClass::LaunchError, format!("{role}: {e} at {at}")),
        }
    }
}

pub(crate) struct Worker {
    pub gpu: Gpu,
    pub task: Task,
    pub threads: usize,
    /// Seeds of check and bench inputs start here (fresh per run: nothing can precompute them).
    pub seed_base: u64,
    proto: Channel,
    pub notes: Vec<String>,
}

/// The sealed report channel, shared with the panic hook.
#[derive(Clone)]
pub(crate) struct Channel(std::sync::Arc<std::sync::Mutex<(std::fs::File, crate::wall::channel::Sealer)>>);

impl Channel {
    pub fn send(&self, msg: &WorkerMessage) {
        let body = serde_json::to_string(msg).expect("protocol messages serialize");
        let mut guard = match self.0.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let (file, sealer) = &mut *guard;
        let line = sealer.seal(&body);
        if file.write_all(line.as_bytes()).and_then(|_| file.flush()).is_err() {
            // Nothing can be said any more: end in a way the orchestrator recognizes.
            // SAFETY: terminates the process.
            unsafe { libc::_exit(CHANNEL_LOST_EXIT) }
        }
    }
}

/// Internal early exit: the report to send.
pub(crate) type Stop = Outcome;

impl Worker {
    /// Announces a phase; the orchestrator times phases from these announcements.
    pub fn phase(&mut self, phase: Phase, detail: impl Into<String>) {
        self.send(&WorkerMessage::Phase { phase, detail: detail.into() });
    }

    fn send(&mut self, msg: &WorkerMessage) {
        self.proto.send(msg);
    }

    /// Calls `entry` with `args` and waits for the whole device.
    pub fn invoke(&self, entry: &Entry, args: &mut [[u8; 8]]) -> Result<(), CallError> {
        self.invoke_async(entry, args)?;
        self.gpu.sync_all().map_err(CallError::Device)
    }

    /// Calls `entry` without waiting (timing loops).
    pub fn invoke_async(&self, entry: &Entry, args: &mut [[u8; 8]]) -> Result<(), CallError> {
        let ptrs: Vec<*mut c_void> = args.iter_mut().map(|a| a.as_mut_ptr() as *mut c_void).collect();
        entry.calls.set(entry.calls.get() + 1);
        // SAFETY: the shim unpacks exactly task.args.len() values of the declared types,
        // each pointed to by ptrs[i]; the stream belongs to the context the runtime uses.
        let code = unsafe { (entry.call)(ptrs.as_ptr(), self.gpu.raw_stream() as *mut c_void) };
        if code != 0 {
            // SAFETY: cudaGetErrorName returns a static string for any code.
            let name = unsafe {
                let p = (entry.error_name)(code);
                if p.is_null() {
                    format!("cuda error {code}")
                } else {
                    CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            };
            return Err(CallError::Launch { name });
        }
        Ok(())
    }
}

/// Entry point of `nightshift worker REQUEST.json`. Never returns.
///
/// Order matters: the evaluation key comes off stdin first (then stdin is /dev/null), the
/// report channel moves off fd 1 (then fd 1 is stderr), the sandbox goes up before the
/// first thread or GPU call, and only then is anything loaded.
pub fn main(request_path: &Path) -> ! {
    let key = read_key();
    // SAFETY: fd juggling at process start, before any other thread exists.
    let proto = unsafe {
        let fd = libc::dup(1);
        if fd < 0 || libc::dup2(2, 1) < 0 {
            eprintln!("worker: cannot set up the protocol channel");
            libc::_exit(70);
        }
        std::fs::File::from_raw_fd(fd)
    };
    let proto = Channel(std::sync::Arc::new(std::sync::Mutex::new((proto, crate::wall::channel::Sealer::new(key)))));
    install_panic_report(&proto);
    let request: WorkerRequest = match std::fs::read(request_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => finish_without_gpu(
            &proto,
            Outcome::InternalError {
                message: format!("cannot read the worker request {}: {e}", request_path.display()),
            },
        ),
    };
    // Before the sandbox and before any library: the descriptors are the tool's, and the
    // reference, baseline and candidate all load after this.
    close_handed_down(&request.host_outputs);
    let mut sandbox = None;
    if request.sandbox {
        let scratch =
            std::env::current_dir().unwrap_or_else(|_| request_path.parent().unwrap_or(Path::new(".")).into());
        let libraries = [request.reference.clone(), request.baseline.clone(), request.candidate.clone()];
        let mut policy = crate::wall::sandbox::Policy::strict(scratch, &libraries, request.cpu_seconds());
        policy.hosted = matches!(request.mode, Mode::Profile | Mode::Sanitize);
        policy.skip = request.sandbox_skip.clone();
        let started = Instant::now();
        let layers = crate::wall::sandbox::apply(&policy);
        let seconds = started.elapsed().as_secs_f64();
        proto.send(&WorkerMessage::Sandbox { layers: layers.clone(), seconds });
        sandbox = Some((layers, seconds));
    }
    // Once the driver has read its environment and before anything untrusted is loaded:
    // the environment goes (announced with the other layers).
    let scrub = |proto: &Channel, sandbox: Option<(Vec<crate::wall::sandbox::Layer>, f64)>| {
        if let Some((mut layers, seconds)) = sandbox {
            layers.push(crate::wall::sandbox::scrub_environment());
            proto.send(&WorkerMessage::Sandbox { layers, seconds });
        }
    };
    if let Mode::Simulate { delay_ms, outcome } = &request.mode {
        scrub(&proto, sandbox);
        simulate(&proto, &request, *delay_ms, outcome.as_ref().clone());
    }
    let mut w = Worker {
        gpu: match open_gpu(&request, &proto) {
            Ok(g) => g,
            Err(outcome) => finish_without_gpu(&proto, outcome),
        },
        task: request.task.clone(),
        threads: request.threads.max(1),
        seed_base: request.seed_base,
        proto,
        notes: Vec::new(),
    };
    scrub(&w.proto, sandbox);
    w.gpu.info.achievable_dram_gbs = request.achievable_dram_gbs.filter(|g| g.is_finite() && *g > 0.0);
    let device = w.gpu.info.clone();
    w.send(&WorkerMessage::Device { device });
    let mut report = WorkerReport::of(Outcome::Passed);
    let result = match &request.mode {
        Mode::Evaluate { time, energy, check_baseline } => {
            evaluate(&mut w, &request, *time, *energy, *check_baseline, &mut report)
        }
        Mode::Profile => profile(&mut w, &request),
        Mode::Sanitize => sanitize(&mut w, &request),
        Mode::Simulate { .. } => unreachable!("handled before the GPU is opened"),
    };
    if let Err(outcome) = result {
        report.outcome = outcome;
    }
    report.notes = std::mem::take(&mut w.notes);
    w.send(&WorkerMessage::Done { report: Box::new(report) });
    // Skip candidate destructors and atexit handlers: the verdict is already out.
    // SAFETY: terminates the process.
    unsafe { libc::_exit(0) }
}

/// Closes every descriptor this process inherited onto a file inside `folders` (a hosting
/// tool's log, handed down by the tool); returns how many it closed. The report channel
/// is a pipe, never a file in them.
fn close_handed_down(folders: &[PathBuf]) -> usize {
    if folders.is_empty() {
        return 0;
    }
    let folders: Vec<PathBuf> = folders.iter().map(|f| f.canonicalize().unwrap_or_else(|_| f.clone())).collect();
    // Listed first, closed after: the listing holds a descriptor of its own.
    let fds: Vec<i32> = match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect(),
        Err(_) => return 0,
    };
    let mut closed = 0;
    for fd in fds.into_iter().filter(|&fd| fd > 2) {
        let Ok(target) = std::fs::read_link(format!("/proc/self/fd/{fd}")) else { continue };
        if folders.iter().any(|f| target.starts_with(f)) {
            // SAFETY: a descriptor this process holds and no Rust object owns (inherited).
            unsafe { libc::close(fd) };
            closed += 1;
        }
    }
    closed
}

/// The evaluation key, from stdin, which is then closed for good.
fn read_key() -> crate::wall::channel::Key {
    let mut text = String::new();
    let _ = std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text);
    // SAFETY: fd juggling at process start, before any other thread exists.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::close(null);
        }
    }
    match crate::wall::channel::Key::from_hex(&text) {
        Some(k) => k,
        None => {
            eprintln!("worker: no evaluation key on stdin (the worker is started by nightshift, not by hand)");
            // SAFETY: terminates the process.
            unsafe { libc::_exit(70) }
        }
    }
}

fn open_gpu(request: &WorkerRequest, proto: &Channel) -> Result<Gpu, Outcome> {
    proto.send(&WorkerMessage::Phase { phase: Phase::Init, detail: "opening the GPU".into() });
    if !crate::wall::gpu::driver_present() {
        return Err(Outcome::EnvError { message: "no CUDA driver: libcuda.so could not be loaded (is this a GPU machine with the NVIDIA driver installed?)".into() });
    }
    Gpu::open(request.device)
        .map_err(|e| Outcome::EnvError { message: format!("cannot use GPU {}: {e}", request.device) })
}

/// The simulated evaluation: the same process, isolation and protocol as a real one,
/// with the GPU work replaced by the outcome the orchestrator's simulator chose.
fn simulate(proto: &Channel, request: &WorkerRequest, delay_ms: u64, mut report: WorkerReport) -> ! {
    proto.send(&WorkerMessage::Phase { phase: Phase::LoadCandidate, detail: request.candidate.display().to_string() });
    let loaded = Entry::load(&request.candidate, "candidate");
    if let Err(m) = loaded {
        report = WorkerReport::of(rejected(Failure::new(FailureClass::MissingEntry, m.to_string())));
    } else {
        proto.send(&WorkerMessage::Phase { phase: Phase::Check, detail: "simulated".into() });
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
    }
    proto.send(&WorkerMessage::Done { report: Box::new(report) });
    // SAFETY: terminates the process.
    unsafe { libc::_exit(0) }
}

fn finish_without_gpu(proto: &Channel, outcome: Outcome) -> ! {
    proto.send(&WorkerMessage::Done { report: Box::new(WorkerReport::of(outcome)) });
    // SAFETY: terminates the process.
    unsafe { libc::_exit(0) }
}

fn install_panic_report(proto: &Channel) {
    let proto = proto.clone();
    std::panic::set_hook(Box::new(move |info| {
        let report = WorkerReport::of(Outcome::InternalError { message: format!("worker bug: {info}") });
        proto.send(&WorkerMessage::Done { report: Box::new(report) });
        eprintln!("worker panicked: {info}");
        // SAFETY: terminates the process.
        unsafe { libc::_exit(70) }
    }));
}

fn task_error(message: impl std::fmt::Display) -> Stop {
    Outcome::TaskError { message: message.to_string() }
}

fn rejected(f: Failure) -> Stop {
    Outcome::Rejected { failure: f }
}

fn gpu_stop(e: GpuError) -> Stop {
    Outcome::InternalError { message: format!("GPU error outside candidate code: {e}") }
}

/// Check sizes x seeds, in a fixed order, from the run's seed base.
fn check_cases(task: &Task, seed_base: u64) -> Vec<HostCase> {
    let mut out = Vec::new();
    for (si, size) in task.checks.iter().enumerate() {
        for s in 0..task.seeds as u64 {
            out.push(HostCase::new(size.clone(), seed_base.wrapping_add(1000 * si as u64 + s)));
        }
    }
    out
}

fn evaluate(
    w: &mut Worker,
    req: &WorkerRequest,
    time: bool,
    energy: bool,
    check_baseline: bool,
    report: &mut WorkerReport,
) -> Result<(), Stop> {
    let task = w.task.clone();
    w.phase(Phase::LoadReference, req.reference.display().to_string());
    let reference = Entry::load(&req.reference, "reference").map_err(task_error)?;

    // Every reference output is computed before untrusted code is in the process.
    w.phase(Phase::Reference, "check sizes");
    let mut cases: Vec<CaseData> = Vec::new();
    for hc in check_cases(&task, w.seed_base) {
        let data = CaseData::generate(w, hc)?;
        cases.push(data);
    }
    for c in &mut cases {
        c.reference = Some(cases::run_reference(w, &reference, &c.host)?);
    }
    let bench = if time {
        w.phase(Phase::Reference, format!("bench size {}", task.bench));
        Some(bench_sets::BenchSets::prepare(w, &reference)?)
    } else {
        None
    };

    w.phase(Phase::LoadCandidate, req.candidate.display().to_string());
    let candidate = Entry::load(&req.candidate, "candidate")
        .map_err(|m| rejected(Failure::new(FailureClass::MissingEntry, m.to_string())))?;
    let baseline = if req.baseline == req.candidate {
        None
    } else {
        let b = Entry::load(&req.baseline, "baseline").map_err(task_error)?;
        if check_baseline {
            w.phase(Phase::CheckBaseline, "baseline against the reference");
            if let Err(f) = cases::check_library(w, &b, &cases) {
                return Err(task_error(format!(
                    "the baseline fails its own check, so no speedup would mean anything: {}",
                    f.message
                )));
            }
        }
        Some(b)
    };

    w.phase(Phase::Check, format!("{} cases", cases.len()));
    let summary = cases::check_library(w, &candidate, &cases).map_err(rejected)?;
    report.check = Some(summary);
    drop(cases);

    if let Some(mut bench) = bench {
        w.phase(Phase::Time, format!("bench size {}", task.bench));
        let baseline_ref = baseline.as_ref().unwrap_or(&candidate);
        let timing = timing::time(w, &mut bench, &reference, baseline_ref, &candidate, &req.timing)?;
        report.timing = timing.report;
        if let Some(f) = timing.failure {
            return Err(rejected(f));
        }
        if energy {
            w.phase(Phase::Energy, "NVML energy counter");
            report.energy = Some(energy::energy(w, &mut bench, baseline_ref, &candidate, &req.timing)?);
        }
    }
    Ok(())
}

fn profile(w: &mut Worker, req: &WorkerRequest) -> Result<(), Stop> {
    let task = w.task.clone();
    w.phase(Phase::LoadCandidate, req.candidate.display().to_string());
    let candidate = Entry::load(&req.candidate, "candidate")
        .map_err(|m| rejected(Failure::new(FailureClass::MissingEntry, m.to_string())))?;
    // Inputs and warm-ups in a phase of their own, so that the profile phase times the
    // profiled call (ncu's replays) and nothing else.
    w.phase(Phase::ProfileSetup, format!("bench size {}: inputs, two warm-up calls", task.bench));
    let host = CaseData::generate(w, HostCase::new(task.bench.clone(), w.seed_base.wrapping_add(1_000_000)))?;
    let mut dev = DeviceCase::upload(w, &host.host).map_err(gpu_stop)?;
    let at = format!("bench size {}", task.bench);
    // Warm-up calls keep lazy module loading and first-touch costs out of the profile.
    for _ in 0..2 {
        dev.prepare(w, false).map_err(gpu_stop)?;
        w.invoke(&candidate, &mut dev.values).map_err(|e| rejected(e.failure("candidate", &at)))?;
    }
    dev.prepare(w, false).map_err(gpu_stop)?;
    w.gpu.sync_all().map_err(gpu_stop)?;
    w.phase(Phase::Profile, at.clone());
    cudarc::driver::profiler_start().map_err(|e| gpu_stop(GpuError::from_driver(e, "cuProfilerStart")))?;
    let r = w.invoke(&candidate, &mut dev.values);
    let _ = cudarc::driver::profiler_stop();
    r.map_err(|e| rejected(e.failure("candidate", &at)))
}

fn sanitize(w: &mut Worker, req: &WorkerRequest) -> Result<(), Stop> {
    let task = w.task.clone();
    w.phase(Phase::LoadCandidate, req.candidate.display().to_string());
    let candidate = Entry::load(&req.candidate, "candidate")
        .map_err(|m| rejected(Failure::new(FailureClass::MissingEntry, m.to_string())))?;
    let size = task.smallest_check().clone();
    w.phase(Phase::Sanitize, format!("size {size}"));
    let host = CaseData::generate(w, HostCase::new(size.clone(), w.seed_base))?;
    let mut dev = DeviceCase::upload_with(w, &host.host, false).map_err(gpu_stop)?;
    // Outputs stay as allocated (never written), so that initcheck sees a read of one
    // before the kernel wrote it.
    dev.restore(w).map_err(gpu_stop)?;
    w.invoke(&candidate, &mut dev.values).map_err(|e| rejected(e.failure("candidate", &format!("size {size}"))))
}

/// Pointer arguments with their element types, in call order.
pub(crate) fn pointer_args(
    task: &Task,
) -> impl Iterator<Item = (usize, &crate::task::Arg, crate::task::types::ElemType)> {
    task.args.iter().enumerate().filter_map(|(i, a)| match a.ty {
        ParamType::Pointer { elem, .. } => Some((i, a, elem)),
        ParamType::Scalar { .. } => None,
    })
}

pub(crate) fn is_output(role: &ArgRole) -> bool {
    matches!(role, ArgRole::Output { .. } | ArgRole::InOut { .. })
}

pub(crate) fn tolerance_of(task: &Task, role: &ArgRole) -> crate::task::Tolerance {
    match role {
        ArgRole::Output { tolerance, .. } | ArgRole::InOut { tolerance, .. } => *tolerance,
        _ => task.tolerance,
    }
}

#[cfg(test)]
mod tests {
    use super::close_handed_down;
    use std::os::fd::AsRawFd;

    /// Whether `fd` is open onto a file in `folder` (by its target, since another test's
    /// thread may be handed the same number once it is closed).
    fn open_in(fd: i32, folder: &std::path::Path) -> bool {
        let folder = folder.canonicalize().unwrap();
        std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|t| t.starts_with(folder))
    }

    #[test]
    fn descriptors_onto_the_tools_folders_are_closed_and_no_others() {
        let tool = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(tool.path().join("ncu.log")).unwrap();
        let mine = std::fs::File::create(other.path().join("kept.txt")).unwrap();
        // Taken from the File: the close under test must be the only one.
        let (log_fd, mine_fd) = (log.as_raw_fd(), mine.as_raw_fd());
        std::mem::forget(log);
        assert!(close_handed_down(&[tool.path().to_path_buf()]) >= 1);
        assert!(!open_in(log_fd, tool.path()), "the tool's log is still open");
        assert!(open_in(mine_fd, other.path()), "a file outside the tool's folders was closed");
        assert_eq!(close_handed_down(&[]), 0);
    }
}
