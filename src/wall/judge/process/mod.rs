//! The judge process (`nightshift judge REQUEST.json`): our code alone, never a kernel
//! library. It owns every buffer a kernel reads or writes, makes every input set on the
//! GPU from seeds only it knows, has the reference compute its outputs in a process of its
//! own, checks and times the baseline and the candidate in processes of their own, and
//! prints the report the verdict is made of.
//!
//! One judgment, in order (`evaluate`):
//! 1. every worker of the judgment started at once (the reference's, the baseline's when
//!    it is another library, and two candidate processes), each sandboxing itself and
//!    making its GPU context while the judge makes its own and loads its kernels: a
//!    context being made is GPU work, and none may overlap a timed phase;
//! 2. the check-size buffers, the reference on every check case, the baseline checked
//!    against it (`eval`);
//! 3. the first candidate process told to load the library (from that command on,
//!    whatever goes wrong is the candidate's) and checked, then ended: a candidate that
//!    fails costs no timing;
//! 4. the baseline's first timing phase, while no process has loaded candidate code;
//! 5. the second candidate process, which never saw a check input, loaded and timed (and
//!    its energy read), then ended (its GPU context goes with it);
//! 6. the baseline's second timing phase, so that the baseline's time brackets the
//!    candidate's;
//! 7. the timing report from the judge's clock, refined by the workers' events where the
//!    two agree (`timing`).
//!
//! A task that serves several shapes has each timed in every one of steps 4 to 6 (buffers
//! of their own), so each shape gets its own bracketed interval; the report keeps them all.
//!
//! Every timed call runs on an input set made for it (`rounds`): no process has seen it
//! before, so no cache can pay, and every timed output is verified, inside the window.

mod checks;
mod energy;
mod floor;
mod pools;
mod rounds;
mod timing;
mod workers;

use crate::task::Task;
use crate::wall::gpu::kernels::{CmpResult, CmpSpec, GenSpec};
use crate::wall::gpu::launch::Kernels;
use crate::wall::gpu::{DeviceBuffer, Gpu, GpuError};
use crate::wall::protocol::{
    Failure, FailureClass, JudgeMessage, JudgeReport, JudgeRequest, Mode, Outcome, Phase, Role, ShapeTiming,
};
use pools::{Layout, Place, Pool};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use workers::{Spawn, Worker};

/// Why a judgment stops early: an outcome (a worker's fault, a task error, a GPU failure),
/// or a failure of the library being checked (the candidate's rejection, the baseline's
/// task error: the caller knows which).
#[derive(Debug)]
pub(crate) enum Halt {
    Outcome(Outcome),
    Failure(Failure),
}

impl From<Outcome> for Halt {
    fn from(o: Outcome) -> Halt {
        Halt::Outcome(o)
    }
}

impl From<Failure> for Halt {
    fn from(f: Failure) -> Halt {
        Halt::Failure(f)
    }
}

/// The judge's phases, announced on stdout and timed by its own clock.
struct Announcer {
    current: Option<(Phase, Instant)>,
    seconds: BTreeMap<String, f64>,
}

impl Announcer {
    fn phase(&mut self, phase: Phase, detail: impl Into<String>) {
        self.close();
        self.current = Some((phase, Instant::now()));
        emit(&JudgeMessage::Phase { phase, detail: detail.into() });
    }

    fn close(&mut self) {
        if let Some((p, t)) = self.current.take() {
            *self.seconds.entry(p.name().to_string()).or_default() += t.elapsed().as_secs_f64();
        }
    }
}

fn emit(msg: &JudgeMessage) {
    let mut line =
        serde_json::to_string(msg).unwrap_or_else(|e| format!("{{\"event\":\"unprintable\",\"error\":\"{e}\"}}"));
    line.push('\n');
    let mut out = std::io::stdout().lock();
    if out.write_all(line.as_bytes()).and_then(|_| out.flush()).is_err() {
        // The orchestrator is gone: nobody is left to tell.
        // SAFETY: terminates the process.
        unsafe { libc::_exit(3) }
    }
}

/// The judge's own GPU state and what it has learned so far.
pub(crate) struct Judge {
    pub req: JudgeRequest,
    pub task: Task,
    pub gpu: Gpu,
    pub kernels: Kernels,
    pub notes: Vec<String>,
    deadline: Instant,
    /// Device memory for the check kernels' results, and its size.
    results: DeviceBuffer,
    next_pool: u32,
    /// Whether a candidate's worker that loaded its library is alive: a GPU failure in the
    /// judge's own context then is most likely its doing.
    pub candidate_alive: bool,
    /// Every worker's pid: NVML's list of other processes on the GPU leaves them out.
    pub worker_pids: Vec<u32>,
    /// The SM clock when timing began.
    pub sm_mhz_at_start: Option<u32>,
    announce: Announcer,
}

/// Bytes of device memory for check results: enough for a round of the most slots.
const RESULTS_BYTES: usize = 4 << 20;

impl Judge {
    fn open(req: JudgeRequest, announce: Announcer) -> Result<Judge, Outcome> {
        if !crate::wall::gpu::driver_present() {
            return Err(Outcome::EnvError {
                message: "no CUDA driver: libcuda.so could not be loaded (is this a GPU machine with the NVIDIA driver installed?)".into(),
            });
        }
        let mut gpu = Gpu::open(req.device)
            .map_err(|e| Outcome::EnvError { message: format!("cannot use GPU {}: {e}", req.device) })?;
        gpu.info.achievable_dram_gbs = req.achievable_dram_gbs.filter(|g| g.is_finite() && *g > 0.0);
        let internal = |e: GpuError| Outcome::InternalError { message: format!("the judge's GPU setup: {e}") };
        let kernels = Kernels::load(&gpu).map_err(internal)?;
        let results = gpu.alloc(RESULTS_BYTES).map_err(internal)?;
        if req.task.flush_l2 {
            gpu.enable_l2_flush().map_err(internal)?;
        }
        let deadline = Instant::now() + Duration::from_secs_f64(req.deadline_s.max(1.0));
        Ok(Judge {
            task: req.task.clone(),
            req,
            gpu,
            kernels,
            notes: Vec::new(),
            deadline,
            results,
            next_pool: 0,
            candidate_alive: false,
            worker_pids: Vec::new(),
            sm_mhz_at_start: None,
            announce,
        })
    }

    pub fn phase(&mut self, phase: Phase, detail: impl Into<String>) {
        self.announce.phase(phase, detail);
    }

    /// Adds `since`'s elapsed time to a step of the judgment (`time.reference`, ...): the
    /// report says where a judgment's seconds went, beside its phases.
    pub fn spent(&mut self, step: &str, since: Instant) {
        *self.announce.seconds.entry(step.to_string()).or_default() += since.elapsed().as_secs_f64();
    }

    /// The seed of input set `n` of a kind: a keyed hash of the request's secret seed base.
    /// The generator's mixing can be inverted (a kernel that reads a set could work out the
    /// seed it came from), so seeds are never a counter: knowing one tells nothing of the next.
    pub fn seed(&self, kind: SeedKind, n: u64) -> u64 {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(self.req.seed_base.to_le_bytes());
        h.update([kind as u8]);
        h.update(n.to_le_bytes());
        u64::from_le_bytes(h.finalize()[..8].try_into().expect("8 bytes of a 32-byte digest"))
    }

    /// What is left of the judgment's time, at least a second (the orchestrator's own
    /// deadline ends everything anyway).
    pub fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(1))
    }

    /// How long one command of `calls` calls of about `per_call` may take.
    pub fn within(&self, calls: usize, per_call: Duration) -> Duration {
        (per_call * 20 * calls as u32 + Duration::from_secs(30)).min(self.left())
    }

    /// A GPU error in the judge's own context: the candidate's doing when its process was
    /// alive with its library loaded (contexts are isolated, but a fault can take the
    /// device down), else ours.
    pub fn gpu_stop(&self, e: GpuError) -> Halt {
        if self.candidate_alive {
            Halt::Failure(Failure::new(
                FailureClass::LaunchError,
                format!("the GPU failed in the judge's own context while the candidate's process was alive: {e}"),
            ))
        } else {
            Halt::Outcome(Outcome::InternalError { message: format!("GPU error in the judge: {e}") })
        }
    }

    pub fn sync(&self) -> Result<(), Halt> {
        self.gpu.sync_stream().map_err(|e| self.gpu_stop(e))
    }

    pub fn new_pool(&mut self, layout: Layout) -> Result<Pool, Halt> {
        self.next_pool += 1;
        match Pool::new(&self.gpu, self.next_pool, layout) {
            Ok(p) => Ok(p),
            Err(e) if e.code == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                Err(Halt::Outcome(Outcome::TaskError {
                    message: format!(
                        "the GPU has no room for the judge's buffers ({e}): the bench size needs two copies of every buffer (the reference's and the kernel's)"
                    ),
                }))
            }
            Err(e) => Err(self.gpu_stop(e)),
        }
    }

    /// Writes case `k`'s inputs from `seed` and poisons its outputs (pattern A or B), on
    /// the judge's stream.
    pub fn prepare(&self, pool: &Pool, k: usize, seed: u64, second: bool) -> Result<(), Halt> {
        self.generate_inputs(pool, k, seed)?;
        self.poison(pool, k, second)
    }

    /// Case `k`'s inputs and in-out buffers, generated from `seed` (on the stream).
    pub fn generate_inputs(&self, pool: &Pool, k: usize, seed: u64) -> Result<(), Halt> {
        for (arg, place) in pool.layout.cases[k].places.iter().enumerate() {
            let Some(spec) = place.as_ref().and_then(|p| pools::input_spec(p, seed, arg)) else { continue };
            let place = place.as_ref().expect("a spec comes from a place");
            self.kernels.generate(&self.gpu, pool.ptr(place), &spec).map_err(|e| self.gpu_stop(e))?;
        }
        Ok(())
    }

    /// Case `k`'s outputs poisoned with pattern A or B (on the stream).
    pub fn poison(&self, pool: &Pool, k: usize, second: bool) -> Result<(), Halt> {
        for place in pool.layout.cases[k].places.iter().flatten().filter(|p| p.init.is_none()) {
            self.gpu
                .fill_async(
                    pool.ptr(place),
                    place.elem.size(),
                    super::verify::poison(place.elem, second),
                    place.count as usize,
                )
                .map_err(|e| self.gpu_stop(e))?;
        }
        Ok(())
    }

    /// The first input of `cases` in `side` that differs from its copy in `reference`:
    /// (case, argument, first element), compared word by word on the device.
    pub fn same_inputs(
        &self,
        side: &Pool,
        reference: &Pool,
        cases: &[usize],
    ) -> Result<Option<(usize, usize, u64)>, Halt> {
        let mut which = Vec::new();
        for &k in cases {
            for (arg, place) in side.layout.cases[k].places.iter().enumerate() {
                if let Some(p) = place {
                    if checks::is_input(&self.task, arg) {
                        which.push((k, arg, *p));
                    }
                }
            }
        }
        let init: Vec<CmpResult> = vec![CmpResult::INITIAL; which.len()];
        let record = std::mem::size_of::<CmpResult>() as u64;
        let got = self.probe(&init, |results| {
            for (i, (k, arg, p)) in which.iter().enumerate() {
                // Exact words no wider than f64 holds exactly: 4, 2 or 1 bytes.
                let bytes = p.bytes();
                let word = [4u64, 2, 1].into_iter().find(|w| bytes % w == 0).unwrap_or(1);
                let elem = match word {
                    4 => crate::task::types::ElemType::U32,
                    2 => crate::task::types::ElemType::U16,
                    _ => crate::task::types::ElemType::U8,
                };
                let exact = crate::task::Tolerance { rtol: 0.0, atol: 0.0 };
                let spec = CmpSpec::new(elem, bytes / word, exact);
                let r = reference.layout.cases[*k].places[*arg].expect("the same layout");
                self.kernels.compare(&self.gpu, side.ptr(p), reference.ptr(&r), &spec, results + i as u64 * record)?;
            }
            Ok(())
        })?;
        Ok(which.iter().zip(got).find(|(_, r)| r.mismatches > 0).map(|((k, arg, p), r)| {
            let bytes = p.bytes();
            let word = [4u64, 2, 1].into_iter().find(|w| bytes % w == 0).unwrap_or(1);
            (*k, *arg, r.first_mismatch * word / p.elem.size() as u64)
        }))
    }

    /// Runs the check kernels `launch` queues into the results buffer and reads back
    /// `count` records of type `T` (initialised from `init` first).
    fn probe<T: Copy>(&self, init: &[T], launch: impl FnOnce(u64) -> Result<(), GpuError>) -> Result<Vec<T>, Halt> {
        let bytes = std::mem::size_of_val(init);
        assert!(bytes <= RESULTS_BYTES, "a round's check results fit the results buffer");
        // SAFETY: `init` is plain old data (u64 or repr(C) structs of u64 and f64).
        let raw = unsafe { std::slice::from_raw_parts(init.as_ptr() as *const u8, bytes) };
        self.gpu.upload_async(self.results.ptr, raw).map_err(|e| self.gpu_stop(e))?;
        launch(self.results.ptr).map_err(|e| self.gpu_stop(e))?;
        self.sync()?;
        let back = self.gpu.download(self.results.ptr, bytes).map_err(|e| self.gpu_stop(e))?;
        let mut out = init.to_vec();
        // SAFETY: `back` holds exactly `bytes` bytes of what was uploaded as `T`s.
        unsafe { std::ptr::copy_nonoverlapping(back.as_ptr(), out.as_mut_ptr() as *mut u8, bytes) };
        Ok(out)
    }

    /// Compares every output of `cases` in `side` with the same case in `reference`.
    /// Returns one result per (case, output argument), in order.
    pub fn compare(
        &self,
        side: &Pool,
        reference: &Pool,
        cases: &[usize],
    ) -> Result<Vec<(usize, usize, CmpResult)>, Halt> {
        let mut which = Vec::new();
        for &k in cases {
            for (arg, place) in side.layout.cases[k].places.iter().enumerate() {
                if let Some(p) = place {
                    if checks::is_output(&self.task, arg) {
                        which.push((k, arg, *p));
                    }
                }
            }
        }
        let init: Vec<CmpResult> = vec![CmpResult::INITIAL; which.len()];
        let record = std::mem::size_of::<CmpResult>() as u64;
        let got = self.probe(&init, |results| {
            for (i, (k, arg, p)) in which.iter().enumerate() {
                let tol = checks::tolerance_of(&self.task, *arg);
                let spec = CmpSpec::new(p.elem, p.count, tol);
                let r = reference.layout.cases[*k].places[*arg].expect("the same layout");
                self.kernels.compare(&self.gpu, side.ptr(p), reference.ptr(&r), &spec, results + i as u64 * record)?;
            }
            Ok(())
        })?;
        Ok(which.iter().zip(got).map(|((k, arg, _), r)| (*k, *arg, r)).collect())
    }

    /// Guard zones and inputs of `cases` (with the seeds they were made from): the first
    /// damage found, as (case, argument, what).
    pub fn intact(
        &self,
        pool: &Pool,
        cases: &[(usize, u64)],
        inputs: bool,
    ) -> Result<Option<(usize, usize, Damage)>, Halt> {
        #[derive(Clone, Copy)]
        enum Zone {
            Before,
            After,
            Input,
        }
        let mut which: Vec<(usize, usize, Zone, u64, GenSpec)> = Vec::new();
        for &(k, seed) in cases {
            for (arg, place) in pool.layout.cases[k].places.iter().enumerate() {
                let Some(p) = place else { continue };
                let guard = pools::guard_spec();
                which.push((k, arg, Zone::Before, pool.ptr(p) - super::verify::GUARD_BYTES as u64, guard));
                which.push((k, arg, Zone::After, pool.ptr(p) + p.bytes(), guard));
                if inputs && checks::is_input(&self.task, arg) {
                    if let Some(spec) = pools::input_spec(p, seed, arg) {
                        which.push((k, arg, Zone::Input, pool.ptr(p), spec));
                    }
                }
            }
        }
        let init = vec![u64::MAX; which.len()];
        let got = self.probe(&init, |results| {
            for (i, (_, _, _, ptr, spec)) in which.iter().enumerate() {
                self.kernels.check_generated(&self.gpu, *ptr, spec, results + 8 * i as u64)?;
            }
            Ok(())
        })?;
        Ok(which.iter().zip(got).find(|(_, first)| *first != u64::MAX).map(|((k, arg, zone, _, _), first)| {
            let damage = match zone {
                Zone::Before => Damage::Before(first),
                Zone::After => Damage::After(first),
                Zone::Input => Damage::Input(first),
            };
            (*k, *arg, damage)
        }))
    }

    /// The bytes of one buffer (a case's output or input), read back.
    pub fn read(&self, pool: &Pool, place: &Place) -> Result<Vec<u8>, Halt> {
        self.sync()?;
        self.gpu.download(pool.ptr(place), place.bytes() as usize).map_err(|e| self.gpu_stop(e))
    }

    /// Every output of case `k`, by argument (None for the rest).
    pub fn outputs(&self, pool: &Pool, k: usize) -> Result<Vec<Option<Vec<u8>>>, Halt> {
        let case = &pool.layout.cases[k];
        let mut out = Vec::with_capacity(case.places.len());
        for (arg, place) in case.places.iter().enumerate() {
            out.push(match place {
                Some(p) if checks::is_output(&self.task, arg) => Some(self.read(pool, p)?),
                _ => None,
            });
        }
        Ok(out)
    }
}

/// What an input set is for: its seeds are drawn apart.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SeedKind {
    Check = 1,
    Bench = 2,
}

/// What a check kernel found wrong with a buffer: where the first changed byte of a
/// guard zone is (from the zone's start), or the first input element that changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Damage {
    Before(u64),
    After(u64),
    Input(u64),
}

/// Entry point of `nightshift judge REQUEST.json`. Never returns.
pub fn main(request_path: &Path) -> ! {
    let mut announce = Announcer { current: None, seconds: BTreeMap::new() };
    let req: JudgeRequest = match std::fs::read(request_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(r) => {
            // The seed base is the judge's secret: gone from the disk before any worker
            // exists, whatever its sandbox manages.
            let _ = std::fs::remove_file(request_path);
            r
        }
        Err(e) => finish(
            JudgeReport::of(Outcome::InternalError {
                message: format!("cannot read the judge's request {}: {e}", request_path.display()),
            }),
            &mut announce,
        ),
    };
    let report = match req.mode.clone() {
        Mode::Simulate { delay_ms, outcome } => simulate(&req, delay_ms, *outcome, &mut announce),
        Mode::Evaluate { time, energy, check_baseline } => {
            announce.phase(Phase::Init, "the judge's GPU context and buffers");
            // The task's workers start first: their sandboxes and contexts come up while
            // the judge makes its own.
            let team = spawn_team(&req);
            match Judge::open(req, announce) {
                Ok(j) => evaluate(j, team, time, energy, check_baseline),
                Err(outcome) => {
                    let mut announce = Announcer { current: None, seconds: BTreeMap::new() };
                    finish(JudgeReport::of(outcome), &mut announce)
                }
            }
        }
    };
    let mut announce = Announcer { current: None, seconds: BTreeMap::new() };
    finish(report, &mut announce)
}

fn finish(mut report: JudgeReport, announce: &mut Announcer) -> ! {
    announce.close();
    for (k, v) in std::mem::take(&mut announce.seconds) {
        report.phases.entry(k).or_insert(v);
    }
    emit(&JudgeMessage::Done { report: Box::new(report) });
    // SAFETY: terminates the process; workers die with it (PR_SET_PDEATHSIG).
    unsafe { libc::_exit(0) }
}

/// A worker of `role` for `library`, sandboxed as its role allows, in a scratch folder of
/// its own; started and waited for.
fn start_worker(req: &JudgeRequest, role: Role, library: &Path, simulate: bool) -> Result<Worker, Outcome> {
    let mut w = spawn_worker(req, role, library, simulate)?;
    ready(&mut w, role)?;
    Ok(w)
}

fn ready(w: &mut Worker, role: Role) -> Result<(), Outcome> {
    w.ready(Duration::from_secs(60)).map_err(|f| match f {
        workers::Fault::Broken(m, true) => Outcome::EnvError { message: m },
        other => Outcome::InternalError { message: format!("the {} worker {other}", role.name()) },
    })
}

/// A worker started, not yet waited for.
fn spawn_worker(req: &JudgeRequest, role: Role, library: &Path, simulate: bool) -> Result<Worker, Outcome> {
    // Each process a scratch folder of its own: nothing one leaves there meets the next.
    static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let scratch = req.folder.join(format!("{}-{n}-scratch", role.name()));
    let policy = req.sandbox.then(|| {
        let mut p = crate::wall::sandbox::Policy::strict(scratch.clone(), &[library.to_path_buf()], req.cpu_seconds());
        // The reference and the baseline may load what the task lets its baseline link
        // (cuBLAS for gemm_bf16); a candidate only what every kernel of the task may.
        p.vendor_libraries = req.task.libs_for(role != Role::Candidate);
        p.skip = req.sandbox_skip.clone();
        p
    });
    let spawn = Spawn {
        exe: &req.worker_exe,
        role,
        library: library.to_path_buf(),
        device: req.device,
        scratch,
        policy,
        simulate,
        ready_within: Duration::from_secs(60),
    };
    Worker::spawn(spawn).map_err(|f| Outcome::InternalError { message: format!("the {} worker {f}", role.name()) })
}

/// The simulated judgment: the candidate's worker loads the library (its constructors
/// run, sandboxed), nothing touches a GPU, and the simulated evaluator's outcome stands
/// unless the worker died or broke the protocol first.
fn simulate(req: &JudgeRequest, delay_ms: u64, outcome: JudgeReport, announce: &mut Announcer) -> JudgeReport {
    announce.phase(Phase::LoadCandidate, req.candidate.display().to_string());
    let mut w = match start_worker(req, Role::Candidate, &req.candidate, true) {
        Ok(w) => w,
        Err(o) => return JudgeReport::of(o),
    };
    let sandbox = (w.sandbox.clone(), w.sandbox_s);
    let within = Duration::from_secs_f64(req.deadline_s.max(1.0));
    let mut report = match w.load(within) {
        Ok(()) => {
            announce.phase(Phase::Check, "simulated");
            std::thread::sleep(Duration::from_millis(delay_ms));
            match w.run(Vec::new(), 1, within) {
                Ok(_) => outcome,
                Err(f) => {
                    let mut r = JudgeReport::of(w.blame(&f, "after it loaded"));
                    r.stderr_tail = Some(w.output_tail(4000)).filter(|t| !t.trim().is_empty());
                    r
                }
            }
        }
        Err(f) => {
            let mut r = JudgeReport::of(w.blame(&f, "while it loaded the library"));
            r.stderr_tail = Some(w.output_tail(4000)).filter(|t| !t.trim().is_empty());
            r
        }
    };
    w.quit();
    (report.sandbox, report.sandbox_s) = sandbox;
    report
}

/// The workers of a judgment, started together (none loads anything until told): their
/// sandboxes and contexts come up while the judge makes its own, and never while the
/// baseline is timed (a context being made is GPU work).
pub(crate) struct Started {
    reference: Worker,
    baseline: Option<Worker>,
    /// The candidate's check runs in this one,
    checked: Worker,
    /// and its timing in this one, a process that never ran the check.
    timed: Worker,
}

fn spawn_team(req: &JudgeRequest) -> Result<Started, Outcome> {
    let reference = spawn_worker(req, Role::Reference, &req.reference, false)?;
    let baseline = if req.reference == req.baseline {
        None
    } else {
        Some(spawn_worker(req, Role::Baseline, &req.baseline, false)?)
    };
    let checked = spawn_worker(req, Role::Candidate, &req.candidate, false)?;
    let timed = spawn_worker(req, Role::Candidate, &req.candidate, false)?;
    Ok(Started { reference, baseline, checked, timed })
}

/// The whole judgment; every way it ends is a report.
fn evaluate(
    mut j: Judge,
    team: Result<Started, Outcome>,
    time: bool,
    energy: bool,
    check_baseline: bool,
) -> JudgeReport {
    let mut report = JudgeReport::of(Outcome::Passed);
    report.device = Some(j.gpu.info.clone());
    let outcome =
        match team.map_err(Halt::Outcome).and_then(|t| run(&mut j, t, &mut report, time, energy, check_baseline)) {
            Ok(()) => Outcome::Passed,
            Err(Halt::Outcome(o)) => o,
            Err(Halt::Failure(f)) => Outcome::Rejected { failure: f },
        };
    report.outcome = outcome;
    report.notes.extend(std::mem::take(&mut j.notes));
    j.announce.close();
    report.phases = std::mem::take(&mut j.announce.seconds);
    report
}

/// The trusted libraries' workers of one judgment: the reference's and the baseline's (the
/// same process when the two are one library). The candidate's are lent to phases alone.
pub(crate) struct Team {
    pub reference: Worker,
    pub baseline: Option<Worker>,
}

impl Team {
    pub fn baseline(&mut self) -> &mut Worker {
        self.baseline.as_mut().unwrap_or(&mut self.reference)
    }
}

fn run(
    j: &mut Judge,
    Started { mut reference, mut baseline, mut checked, mut timed }: Started,
    report: &mut JudgeReport,
    time: bool,
    energy: bool,
    check_baseline: bool,
) -> Result<(), Halt> {
    ready(&mut reference, Role::Reference)?;
    j.worker_pids.push(reference.pid);
    if let Some(b) = baseline.as_mut() {
        ready(b, Role::Baseline)?;
        j.worker_pids.push(b.pid);
    }
    let within = j.within(1, Duration::from_secs(5));
    reference.load(within).map_err(|f| Halt::Outcome(reference.blame(&f, "while it loaded the reference")))?;
    let mut team = Team { reference, baseline };
    if let Some(b) = team.baseline.as_mut() {
        b.load(within).map_err(|f| Halt::Outcome(b.blame(&f, "while it loaded the baseline")))?;
    }

    j.phase(Phase::Reference, "check sizes");
    let mut checks = checks::CheckSet::prepare(j, &mut team)?;
    let baseline_is_candidate = j.req.baseline == j.req.candidate;
    if check_baseline && !baseline_is_candidate {
        j.phase(Phase::CheckBaseline, "baseline against the reference");
        let b = team.baseline.as_mut().unwrap_or(&mut team.reference);
        match checks.check(j, b) {
            Ok(_) => {}
            Err(Halt::Failure(f)) => {
                return Err(Halt::Outcome(Outcome::TaskError {
                    message: format!(
                        "the baseline fails its own check, so no speedup would mean anything: {}",
                        f.message
                    ),
                }))
            }
            Err(o) => return Err(o),
        }
    }

    // The check, in a candidate process of its own (started with the judge, loaded only
    // now): a candidate that fails it costs no timing at all.
    j.phase(Phase::LoadCandidate, j.req.candidate.display().to_string());
    ready(&mut checked, Role::Candidate)?;
    j.worker_pids.push(checked.pid);
    report.sandbox = checked.sandbox.clone();
    report.sandbox_s = checked.sandbox_s;
    checks.lend(j, &mut checked)?;
    let result = candidate_phase(j, &mut checked, report, |j, w| {
        j.phase(Phase::Check, format!("{} cases", checks.cases()));
        checks.check(j, w)
    });
    let check = result?;
    report.check = Some(check);
    if !time {
        return Ok(());
    }

    // Timing: the baseline before and after a second candidate process, ready since the
    // judge began (our code only until it is told to load: no candidate work exists while
    // the baseline is timed) and ended before the baseline is timed again. Every served
    // shape is timed in each of the three phases, so each has its own bracketed interval.
    ready(&mut timed, Role::Candidate)?;
    j.worker_pids.push(timed.pid);
    let shapes = j.task.served();
    let mut benches = Vec::with_capacity(shapes.len());
    for (i, shape) in shapes.iter().enumerate() {
        benches.push(rounds::Bench::prepare(j, &mut team, &shape.size, i, shapes.len())?);
    }
    let mut first = Vec::with_capacity(benches.len());
    for bench in &mut benches {
        j.phase(Phase::Time, format!("baseline, before the candidate, at {}", bench.size));
        first.push(bench.phase(j, &mut team, rounds::Side::BaselineBefore, energy)?);
    }
    for bench in &benches {
        bench.lend(j, &mut timed)?;
    }
    let middle = candidate_phase(j, &mut timed, report, |j, w| {
        let mut middle = Vec::with_capacity(benches.len());
        for bench in &mut benches {
            j.phase(Phase::Time, format!("candidate at {}", bench.size));
            middle.push(bench.phase(j, &mut team, rounds::Side::Candidate(w), energy)?);
        }
        Ok(middle)
    })?;
    // The GPU must be whole before the baseline is timed again.
    j.sync()?;
    let mut last = Vec::with_capacity(benches.len());
    for bench in &mut benches {
        j.phase(Phase::Time, format!("baseline, after the candidate, at {}", bench.size));
        last.push(bench.phase(j, &mut team, rounds::Side::BaselineAfter, energy)?);
    }
    let mut served = Vec::with_capacity(benches.len());
    for (i, (bench, shape)) in benches.iter().zip(&shapes).enumerate() {
        let (timing, energy_report) = timing::report(j, bench, &first[i], &middle[i], &last[i], baseline_is_candidate)?;
        served.push(ShapeTiming { name: shape.name.clone(), weight: shape.weight, timing, energy: energy_report });
    }
    j.task.bench = j.req.task.bench.clone();
    // The report's single timing (and whether the judgment's timing is a measurement) is
    // that of the shape with the largest share of the baseline's time, for readers of one
    // size; the verdict's speedup is made over every shape, and a short shape's noise
    // widens its own interval instead of voiding the judgment.
    let shares = ShapeTiming::time_shares(&served, j.task.serve_weights);
    let main = shares.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i);
    report.timing = Some(served[main].timing.clone());
    report.energy = served[main].energy.clone();
    if j.task.serves_shapes() {
        report.served = served;
    }
    Ok(())
}

/// Loads the library in candidate worker `w`, runs `work` with it, and ends the process
/// whatever happened (its GPU context goes with it), keeping its output when it failed.
fn candidate_phase<T>(
    j: &mut Judge,
    w: &mut Worker,
    report: &mut JudgeReport,
    work: impl FnOnce(&mut Judge, &mut Worker) -> Result<T, Halt>,
) -> Result<T, Halt> {
    let within = j.within(1, Duration::from_secs(5));
    let loaded = w.load(within);
    j.candidate_alive = true;
    let result = match loaded {
        Err(f) => Err(Halt::Outcome(w.blame(&f, "while it loaded the library"))),
        Ok(()) => work(j, w),
    };
    if result.is_err() {
        report.stderr_tail = Some(w.output_tail(4000)).filter(|t| !t.trim().is_empty());
    }
    let killed = w.kill();
    j.candidate_alive = false;
    j.notes.push(format!("a candidate process was ended and reaped in {:.0} ms", killed.as_secs_f64() * 1e3));
    result
}
