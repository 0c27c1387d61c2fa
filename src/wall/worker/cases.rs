//! Check cases: seeded inputs on the host, guarded buffers on the device, and the checks
//! of one library against the reference outputs.

use super::{is_output, pointer_args, tolerance_of, CallError, Entry, Stop, Worker};
use crate::task::types::{ElemType, ParamType, ScalarType};
use crate::task::{ArgRole, ScalarValue, Size, Task};
use crate::wall::gpu::{DeviceBuffer, GpuResult, GuardedBuffer};
use crate::wall::protocol::{CaseRef, CheckSummary, Failure, FailureClass, Outcome};
use crate::wall::verify::{self, Comparison};

/// Why a case's inputs cannot be made from the task (the task's fault, not a candidate's).
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    #[error(transparent)]
    Len(#[from] crate::task::LenError),
    /// A scalar's value expression does not evaluate at the size.
    #[error(transparent)]
    Scalar(#[from] crate::task::expr::ExprError),
    #[error("a float value for an integer parameter")]
    FloatForInteger,
    #[error("argument {arg} has a role that does not fit its type")]
    RoleMismatch { arg: String },
}

/// Inputs of one (size, seed), generated on the host.
pub(crate) struct HostCase {
    pub size: Size,
    pub seed: u64,
    /// Initial contents of Input and InOut buffers, by argument index.
    pub inputs: Vec<Option<Vec<u8>>>,
    /// Byte length of every pointer argument (0 for scalars).
    pub lens: Vec<usize>,
    /// Argument values for scalars (pointer slots are filled per device case).
    pub scalars: Vec<[u8; 8]>,
}

impl HostCase {
    pub fn new(size: Size, seed: u64) -> HostCase {
        HostCase { size, seed, inputs: Vec::new(), lens: Vec::new(), scalars: Vec::new() }
    }

    pub fn label(&self) -> String {
        format!("size {} seed {}", self.size, self.seed)
    }

    pub fn case_ref(&self, arg: Option<&str>) -> CaseRef {
        CaseRef { size: self.size.to_string(), seed: self.seed, arg: arg.map(str::to_string), call: None }
    }

    /// Generates the inputs. `spare`: input buffers of an earlier case of this task, by
    /// argument index, overwritten where their length fits (bench sets are generated one
    /// after another, each uploaded before the next).
    fn fill(&mut self, task: &Task, threads: usize, mut spare: Vec<Option<Vec<u8>>>) -> Result<(), InputError> {
        let n = task.args.len();
        spare.resize(n, None);
        self.inputs = vec![None; n];
        self.lens = vec![0; n];
        self.scalars = vec![[0u8; 8]; n];
        for (i, arg) in task.args.iter().enumerate() {
            match (&arg.role, arg.ty) {
                (ArgRole::Scalar { value }, ParamType::Scalar { scalar }) => {
                    self.scalars[i] = scalar_bytes(value, scalar, &self.size)?;
                }
                (ArgRole::Input { len, init } | ArgRole::InOut { len, init, .. }, ParamType::Pointer { elem, .. }) => {
                    let count = Task::buffer_len(len, &self.size)?;
                    self.lens[i] = count * elem.size();
                    self.inputs[i] = Some(match spare[i].take() {
                        Some(mut buf) if buf.len() == self.lens[i] => {
                            crate::task::init::generate_into(*init, elem, &mut buf, self.seed, i as u64, threads);
                            buf
                        }
                        _ => crate::task::init::generate(*init, elem, count, self.seed, i as u64, threads),
                    });
                }
                (ArgRole::Output { len, .. }, ParamType::Pointer { elem, .. }) => {
                    self.lens[i] = Task::buffer_len(len, &self.size)? * elem.size();
                }
                _ => return Err(InputError::RoleMismatch { arg: arg.name.clone() }),
            }
        }
        Ok(())
    }
}

fn scalar_bytes(value: &ScalarValue, scalar: ScalarType, size: &Size) -> Result<[u8; 8], InputError> {
    let mut b = [0u8; 8];
    match value {
        ScalarValue::Int(src) => {
            let v = crate::task::expr::Expr::parse(src)?.eval(&size.vars)?;
            match scalar {
                ScalarType::I32 | ScalarType::U32 => b[..4].copy_from_slice(&(v as i32).to_le_bytes()),
                ScalarType::I64 | ScalarType::U64 => b.copy_from_slice(&v.to_le_bytes()),
                ScalarType::F32 => b[..4].copy_from_slice(&(v as f32).to_le_bytes()),
                ScalarType::F64 => b.copy_from_slice(&(v as f64).to_le_bytes()),
            }
        }
        ScalarValue::Float(x) => match scalar {
            ScalarType::F32 => b[..4].copy_from_slice(&(*x as f32).to_le_bytes()),
            ScalarType::F64 => b.copy_from_slice(&x.to_le_bytes()),
            _ => return Err(InputError::FloatForInteger),
        },
    }
    Ok(b)
}

/// Host inputs plus the reference outputs for them.
pub(crate) struct CaseData {
    pub host: HostCase,
    /// Reference outputs by argument index (Some for Output and InOut arguments).
    pub reference: Option<Vec<Option<Vec<u8>>>>,
}

impl CaseData {
    pub fn generate(w: &Worker, host: HostCase) -> Result<CaseData, Stop> {
        CaseData::generate_reusing(w, host, Vec::new())
    }

    /// [`CaseData::generate`] into the input buffers of an earlier case where they fit.
    pub fn generate_reusing(w: &Worker, mut host: HostCase, spare: Vec<Option<Vec<u8>>>) -> Result<CaseData, Stop> {
        host.fill(&w.task, w.threads, spare)
            .map_err(|m| Outcome::TaskError { message: format!("{}: {m}", host.label()) })?;
        Ok(CaseData { host, reference: None })
    }
}

/// One case's buffers on the device, with the argument slots the shim reads.
pub(crate) struct DeviceCase {
    pub buffers: Vec<Option<GuardedBuffer>>,
    /// Initial values of InOut buffers, restored before every call.
    pristine: Vec<Option<DeviceBuffer>>,
    pub values: Vec<[u8; 8]>,
    elems: Vec<Option<ElemType>>,
    roles: Vec<ArgRole>,
}

impl DeviceCase {
    pub fn upload(w: &Worker, host: &HostCase) -> GpuResult<DeviceCase> {
        DeviceCase::upload_with(w, host, true)
    }

    pub fn upload_with(w: &Worker, host: &HostCase, guarded: bool) -> GpuResult<DeviceCase> {
        let task = &w.task;
        let n = task.args.len();
        let mut dc = DeviceCase {
            buffers: (0..n).map(|_| None).collect(),
            pristine: (0..n).map(|_| None).collect(),
            values: host.scalars.clone(),
            elems: vec![None; n],
            roles: task.args.iter().map(|a| a.role.clone()).collect(),
        };
        for (i, arg, elem) in pointer_args(task) {
            let buf = GuardedBuffer::new(&w.gpu, host.lens[i], guarded)?;
            if let Some(data) = &host.inputs[i] {
                w.gpu.upload(buf.ptr(), data)?;
                if matches!(arg.role, ArgRole::InOut { .. }) {
                    let copy = w.gpu.alloc(data.len())?;
                    w.gpu.upload(copy.ptr, data)?;
                    dc.pristine[i] = Some(copy);
                }
            }
            dc.values[i] = buf.ptr().to_le_bytes();
            dc.buffers[i] = Some(buf);
            dc.elems[i] = Some(elem);
        }
        // The canary memsets and pageable uploads above go to the legacy default stream
        // and may still be running when they return; our stream does not wait for that
        // stream, so wait for the whole device before anything runs on these buffers.
        w.gpu.sync_all()?;
        Ok(dc)
    }

    /// A second device copy of the same inputs, copied on the device (no host transfer):
    /// inputs from this case's buffers, in-out buffers from their pristine copies.
    pub fn duplicate(&self, w: &Worker) -> GpuResult<DeviceCase> {
        let n = self.buffers.len();
        let mut dc = DeviceCase {
            buffers: (0..n).map(|_| None).collect(),
            pristine: (0..n).map(|_| None).collect(),
            values: self.values.clone(),
            elems: self.elems.clone(),
            roles: self.roles.clone(),
        };
        let d2d = |dst: u64, src: u64, bytes: usize| {
            // SAFETY: both allocations hold `bytes`; the legacy stream, waited on below.
            unsafe { cudarc::driver::result::memcpy_dtod_sync(dst, src, bytes) }
                .map_err(|e| crate::wall::gpu::GpuError::from_driver(e, "copying inputs on the device"))
        };
        for i in 0..n {
            let Some(buf) = &self.buffers[i] else { continue };
            let copy = GuardedBuffer::new(&w.gpu, buf.len_bytes, buf.guarded())?;
            match (&self.roles[i], &self.pristine[i]) {
                (ArgRole::InOut { .. }, Some(p)) => {
                    d2d(copy.ptr(), p.ptr, buf.len_bytes)?;
                    let keep = w.gpu.alloc(buf.len_bytes)?;
                    d2d(keep.ptr, p.ptr, buf.len_bytes)?;
                    dc.pristine[i] = Some(keep);
                }
                (ArgRole::Input { .. }, _) => d2d(copy.ptr(), buf.ptr(), buf.len_bytes)?,
                _ => {}
            }
            dc.values[i] = copy.ptr().to_le_bytes();
            dc.buffers[i] = Some(copy);
        }
        w.gpu.sync_all()?;
        Ok(dc)
    }

    /// Restores InOut buffers and poisons outputs, on the stream.
    pub fn prepare(&mut self, w: &Worker, second: bool) -> GpuResult<()> {
        self.restore(w)?;
        for i in 0..self.buffers.len() {
            let (Some(buf), Some(elem), ArgRole::Output { .. }) = (&self.buffers[i], self.elems[i], &self.roles[i])
            else {
                continue;
            };
            w.gpu.fill_async(buf.ptr(), elem.size(), verify::poison(elem, second), buf.len_bytes / elem.size())?;
        }
        Ok(())
    }

    /// Restores InOut buffers to their initial values, on the stream (outputs untouched:
    /// energy loops measure the call alone).
    pub fn restore(&mut self, w: &Worker) -> GpuResult<()> {
        for i in 0..self.buffers.len() {
            let (Some(buf), Some(p)) = (&self.buffers[i], &self.pristine[i]) else {
                continue;
            };
            // SAFETY: both allocations hold len_bytes; same stream as the call.
            unsafe { cudarc::driver::result::memcpy_dtod_async(buf.ptr(), p.ptr, buf.len_bytes, w.gpu.raw_stream()) }
                .map_err(|e| crate::wall::gpu::GpuError::from_driver(e, "restoring an in-out buffer"))?;
        }
        Ok(())
    }

    pub fn download_outputs(&self, w: &Worker) -> GpuResult<Vec<Option<Vec<u8>>>> {
        let mut out = Vec::with_capacity(self.buffers.len());
        for (i, b) in self.buffers.iter().enumerate() {
            out.push(match b {
                Some(buf) if is_output(&self.roles[i]) => Some(w.gpu.download(buf.ptr(), buf.len_bytes)?),
                _ => None,
            });
        }
        Ok(out)
    }

    /// Every guard zone intact, else which argument was overrun and where.
    fn check_guards(&self, w: &Worker, host: &HostCase, role: &str) -> Result<(), Failure> {
        for (i, b) in self.buffers.iter().enumerate() {
            let Some(buf) = b else { continue };
            let (before, after) = buf.read_guards(&w.gpu).map_err(|e| device_failure(role, e, host))?;
            let name = &w.task.args[i].name;
            let elem = self.elems[i].map(|e| e.size()).unwrap_or(1);
            if let Some(off) = verify::guard_damage(&after) {
                let mut f = Failure::new(
                    FailureClass::OutOfBoundsWrite,
                    format!(
                        "{role} wrote past the end of `{name}` ({} elements): element {} (byte {} after the end) at {}",
                        buf.len_bytes / elem,
                        buf.len_bytes / elem + off / elem,
                        off,
                        host.label()
                    ),
                );
                f.at = Some(host.case_ref(Some(name)));
                return Err(f);
            }
            if let Some(off) = verify::guard_damage(&before) {
                let back = verify::GUARD_BYTES - off;
                let mut f = Failure::new(
                    FailureClass::OutOfBoundsWrite,
                    format!(
                        "{role} wrote before the start of `{name}`: {back} bytes before element 0 at {}",
                        host.label()
                    ),
                );
                f.at = Some(host.case_ref(Some(name)));
                return Err(f);
            }
        }
        Ok(())
    }

    fn check_inputs_unchanged(&self, w: &Worker, host: &HostCase, role: &str) -> Result<(), Failure> {
        for (i, b) in self.buffers.iter().enumerate() {
            let (Some(buf), ArgRole::Input { .. }) = (b, &self.roles[i]) else {
                continue;
            };
            let Some(original) = &host.inputs[i] else {
                continue;
            };
            let now = w.gpu.download(buf.ptr(), buf.len_bytes).map_err(|e| device_failure(role, e, host))?;
            if let Some(pos) = now.iter().zip(original.iter()).position(|(a, b)| a != b) {
                let elem = self.elems[i].unwrap_or(ElemType::U8);
                let idx = pos / elem.size();
                let name = &w.task.args[i].name;
                let mut f = Failure::new(
                    FailureClass::InputMutation,
                    format!(
                        "{role} modified input `{name}`: element {idx} was {} and is now {} after the call at {}",
                        elem.read_f64(original, idx),
                        elem.read_f64(&now, idx),
                        host.label()
                    ),
                );
                f.at = Some(host.case_ref(Some(name)));
                return Err(f);
            }
        }
        Ok(())
    }

    /// One checked call: prepare, call, wait, then guards and inputs. Returns the outputs.
    fn run(
        &mut self,
        w: &Worker,
        entry: &Entry,
        host: &HostCase,
        second: bool,
    ) -> Result<Vec<Option<Vec<u8>>>, Failure> {
        self.run_checking(w, entry, host, second, true)
    }

    fn run_checking(
        &mut self,
        w: &Worker,
        entry: &Entry,
        host: &HostCase,
        second: bool,
        inputs: bool,
    ) -> Result<Vec<Option<Vec<u8>>>, Failure> {
        self.prepare(w, second).map_err(|e| device_failure(entry.role, e, host))?;
        // The poison must land before the call even if the candidate ignores our stream.
        w.gpu.sync_stream().map_err(|e| device_failure(entry.role, e, host))?;
        w.invoke(entry, &mut self.values).map_err(|e| {
            let mut f = e.failure(entry.role, &host.label());
            f.at = Some(host.case_ref(None));
            f
        })?;
        self.check_guards(w, host, entry.role)?;
        if inputs {
            self.check_inputs_unchanged(w, host, entry.role)?;
        }
        self.download_outputs(w).map_err(|e| device_failure(entry.role, e, host))
    }
}

fn device_failure(role: &str, e: crate::wall::gpu::GpuError, host: &HostCase) -> Failure {
    let mut f = CallError::Device(e).failure(role, &host.label());
    f.at = Some(host.case_ref(None));
    f
}

/// Runs the trusted reference on one case; it must complete and write every output.
pub(crate) fn run_reference(w: &Worker, reference: &Entry, host: &HostCase) -> Result<Vec<Option<Vec<u8>>>, Stop> {
    let mut dev = DeviceCase::upload(w, host).map_err(super::gpu_stop)?;
    run_reference_on(w, reference, host, &mut dev, true)
}

/// The reference on a case already on the device (kept by the caller for timing).
/// `inputs`: also verify that the reference left its inputs alone; the bench sets skip
/// that transfer, the check sizes having verified it already.
pub(crate) fn run_reference_on(
    w: &Worker,
    reference: &Entry,
    host: &HostCase,
    dev: &mut DeviceCase,
    inputs: bool,
) -> Result<Vec<Option<Vec<u8>>>, Stop> {
    let task_err =
        |f: Failure| Outcome::TaskError { message: format!("the reference fails at {}: {}", host.label(), f.message) };
    let out1 = dev.run_checking(w, reference, host, false, inputs).map_err(task_err)?;
    let mut suspicious = false;
    for (i, o) in out1.iter().enumerate() {
        if let (Some(bytes), Some(elem), ArgRole::Output { .. }) = (o, dev.elems[i], &dev.roles[i]) {
            suspicious |= verify::count_poison(elem, bytes, false) > 0;
        }
    }
    if suspicious {
        // Poison A can be a legitimate value for small integer outputs: a second run
        // with poison B tells unwritten from coincidence.
        let out2 = dev.run_checking(w, reference, host, true, inputs).map_err(task_err)?;
        for (i, (a, b)) in out1.iter().zip(&out2).enumerate() {
            if let (Some(a), Some(b), Some(elem)) = (a, b, dev.elems[i]) {
                if let Some(u) = verify::find_unwritten(elem, a, b) {
                    return Err(Outcome::TaskError {
                        message: format!(
                            "the reference leaves {} elements of `{}` unwritten (first: {}) at {}",
                            u.count,
                            w.task.args[i].name,
                            u.first_index,
                            host.label()
                        ),
                    });
                }
            }
        }
    }
    Ok(out1)
}

/// Checks `entry` on every case against the cached reference outputs; a failure names
/// the call that produced it.
pub(crate) fn check_library(w: &Worker, entry: &Entry, cases: &[CaseData]) -> Result<CheckSummary, Failure> {
    let mut summary = check_cases(w, entry, cases).map_err(|f| f.at_call(entry.calls.get()))?;
    let repeats = repeat_check(w, entry, cases)?;
    summary.calls += repeats;
    summary.repeat_calls = repeats;
    Ok(summary)
}

/// Calls on one case after the check, each verified: a kernel wrong on one call in
/// fifty, or one that changes after so many calls, shows here.
pub const REPEAT_CALLS: usize = 48;

/// GPU memory that may go missing over the repeat calls before it counts as a leak.
const LEAK_ALLOWANCE: usize = 32 << 20;

/// [`REPEAT_CALLS`] calls on the largest case up to 4 MiB (a flaky call is no likelier
/// on a big case, and each call is verified), with device memory measured around them.
fn repeat_check(w: &Worker, entry: &Entry, cases: &[CaseData]) -> Result<usize, Failure> {
    let Some(case) = cases
        .iter()
        .filter(|c| w.task.total_bytes(&c.host.size) <= 4 << 20)
        .max_by_key(|c| w.task.total_bytes(&c.host.size))
        .or(cases.first())
    else {
        return Ok(0);
    };
    let host = &case.host;
    let reference = case.reference.as_ref().expect("reference computed before checks");
    // This process's own GPU memory where NVML sees it: free memory is device-wide, and
    // another process allocating meanwhile must not look like our leak.
    let nvml = crate::wall::nvml::NvmlDevice::open(&w.gpu.info.uuid).ok();
    let held = |w: &Worker| -> Result<(u64, bool), Failure> {
        if let Some(b) = nvml.as_ref().and_then(|n| n.own_memory_bytes()) {
            return Ok((b, true));
        }
        let free = w.gpu.free_memory().map_err(|e| device_failure(entry.role, e, host))? as u64;
        Ok((u64::MAX - free, nvml.as_ref().is_none_or(|n| n.other_processes().is_empty())))
    };
    let before = held(w)?;
    let mut wrong: Vec<(u64, Failure)> = Vec::new();
    {
        let mut dev = DeviceCase::upload(w, host).map_err(|e| device_failure(entry.role, e, host))?;
        for k in 0..REPEAT_CALLS {
            let second = k % 2 == 1;
            let outs = dev.run(w, entry, host, second)?;
            if let Some(f) = output_mismatch(w, entry.role, &outs, reference, host, second) {
                wrong.push((entry.calls.get(), f));
            }
        }
    }
    if let Some((first_call, first)) = wrong.first().cloned() {
        let last_call = entry.calls.get();
        let every_call_since = wrong.len() as u64 == last_call - first_call + 1;
        let (class, what) = if every_call_since {
            (FailureClass::CallDependent, format!("right on the same inputs until call {}, wrong on every call from {first_call} on: its results change with the call count", first_call - 1))
        } else {
            (
                FailureClass::Nondeterminism,
                format!(
                    "wrong on {} of {REPEAT_CALLS} repeated calls with the same inputs (first: call {first_call})",
                    wrong.len()
                ),
            )
        };
        let mut f = Failure::new(class, format!("{} at {}; {}", what, host.label(), first.message));
        f.at = first.at;
        f.comparison = first.comparison;
        return Err(f.at_call(first_call));
    }
    let after = held(w)?;
    let lost = after.0.saturating_sub(before.0) as usize;
    // Free memory alone is only evidence when nothing else was on the GPU.
    let trustworthy = before.1 && after.1;
    if trustworthy && lost > LEAK_ALLOWANCE {
        let mut f = Failure::new(
            FailureClass::ResourceLeak,
            format!(
                "{} MiB of GPU memory went missing over {REPEAT_CALLS} calls at {} ({:.1} MiB a call): an allocation per call that is never freed will exhaust the GPU",
                lost >> 20,
                host.label(),
                lost as f64 / REPEAT_CALLS as f64 / (1 << 20) as f64
            ),
        );
        f.at = Some(host.case_ref(None));
        return Err(f);
    }
    Ok(REPEAT_CALLS)
}

/// The first output of one call that disagrees with the reference: `unwritten-output` if
/// it still holds the poison written before the call (`second`: which poison), else
/// `wrong-answer`, with the case and the comparison.
pub(crate) fn output_mismatch(
    w: &Worker,
    role: &str,
    outs: &[Option<Vec<u8>>],
    refs: &[Option<Vec<u8>>],
    host: &HostCase,
    second: bool,
) -> Option<Failure> {
    for (i, arg) in w.task.args.iter().enumerate() {
        let (Some(got), Some(expected)) = (&outs[i], &refs[i]) else {
            continue;
        };
        let ParamType::Pointer { elem, .. } = arg.ty else {
            continue;
        };
        let tol = tolerance_of(&w.task, &arg.role);
        let cmp = verify::compare(elem, got, expected, tol, w.threads);
        if cmp.ok() {
            continue;
        }
        let unwritten = verify::count_poison(elem, got, second);
        let mut f = if unwritten > 0 && matches!(arg.role, ArgRole::Output { .. }) {
            Failure::new(
                FailureClass::UnwrittenOutput,
                format!(
                    "{role} left {unwritten} of {} elements of `{}` unwritten at {}",
                    got.len() / elem.size(),
                    arg.name,
                    host.label()
                ),
            )
        } else {
            Failure::new(FailureClass::WrongAnswer, wrong_answer_message(role, &arg.name, &cmp, host, tol))
        };
        f.at = Some(host.case_ref(Some(&arg.name)));
        f.comparison = Some(Box::new(cmp));
        return Some(f);
    }
    None
}

fn check_cases(w: &Worker, entry: &Entry, cases: &[CaseData]) -> Result<CheckSummary, Failure> {
    let task = &w.task;
    let mut summary = CheckSummary::default();
    for (ci, case) in cases.iter().enumerate() {
        let host = &case.host;
        let reference = case.reference.as_ref().expect("reference computed before checks");
        let mut dev = DeviceCase::upload(w, host).map_err(|e| device_failure(entry.role, e, host))?;
        let out1 = dev.run(w, entry, host, false)?;
        let out2 = dev.run(w, entry, host, true)?;
        summary.cases += 1;
        summary.calls += 2;
        for (i, arg) in task.args.iter().enumerate() {
            let (Some(got), Some(_), Some(elem)) = (&out1[i], &out2[i], dev.elems[i]) else {
                continue;
            };
            if !matches!(arg.role, ArgRole::Output { .. }) {
                continue;
            }
            if let Some(u) = verify::find_unwritten(elem, got, out2[i].as_ref().unwrap()) {
                let total = got.len() / elem.size();
                let mut f = Failure::new(
                    FailureClass::UnwrittenOutput,
                    format!(
                        "{} left {} of {total} elements of `{}` unwritten (first: element {}) at {}",
                        entry.role,
                        u.count,
                        arg.name,
                        u.first_index,
                        host.label()
                    ),
                );
                f.at = Some(host.case_ref(Some(&arg.name)));
                return Err(f);
            }
        }
        for (i, arg) in task.args.iter().enumerate() {
            let (Some(got), Some(again), Some(expected), Some(elem)) =
                (&out1[i], &out2[i], &reference[i], dev.elems[i])
            else {
                continue;
            };
            let tol = tolerance_of(task, &arg.role);
            let cmp = verify::compare(elem, got, expected, tol, w.threads);
            summary.elements_compared += cmp.elements;
            summary.max_abs_err = summary.max_abs_err.max(cmp.max_abs_err);
            summary.max_rel_err = summary.max_rel_err.max(cmp.max_rel_err);
            if !cmp.ok() {
                let stale = cases[..ci].iter().any(|earlier| {
                    earlier.host.size == host.size
                        && earlier
                            .reference
                            .as_ref()
                            .and_then(|r| r[i].as_ref())
                            .is_some_and(|old| verify::compare(elem, got, old, tol, w.threads).ok())
                });
                let mut f = if stale {
                    Failure::new(
                        FailureClass::StaleOutput,
                        format!(
                            "{} returned the result of earlier inputs for `{}` at {}: results are cached across calls",
                            entry.role,
                            arg.name,
                            host.label()
                        ),
                    )
                } else {
                    Failure::new(
                        FailureClass::WrongAnswer,
                        wrong_answer_message(entry.role, &arg.name, &cmp, host, tol),
                    )
                };
                f.at = Some(host.case_ref(Some(&arg.name)));
                f.comparison = Some(Box::new(cmp));
                return Err(f);
            }
            let repeat_ok = if task.deterministic {
                got == again
            } else {
                verify::compare(elem, again, expected, tol, w.threads).ok()
            };
            if !repeat_ok {
                let skipped = verify::count_poison(elem, again, true);
                let mut f = if skipped > 0 {
                    Failure::new(
                        FailureClass::StaleOutput,
                        format!("a second call with the same inputs left {skipped} elements of `{}` unwritten at {}: {} skips work on repeated calls", arg.name, host.label(), entry.role),
                    )
                } else {
                    let first = (0..got.len() / elem.size())
                        .find(|&k| {
                            got[k * elem.size()..(k + 1) * elem.size()] != again[k * elem.size()..(k + 1) * elem.size()]
                        })
                        .unwrap_or(0);
                    Failure::new(
                        FailureClass::Nondeterminism,
                        format!(
                            "two calls with the same inputs disagree on `{}` at {}: element {first} is {} then {}{}",
                            arg.name,
                            host.label(),
                            elem.read_f64(got, first),
                            elem.read_f64(again, first),
                            if task.deterministic {
                                " (the task requires bitwise-identical results: set check.deterministic = false if atomics make the order vary)"
                            } else {
                                ""
                            }
                        ),
                    )
                };
                f.at = Some(host.case_ref(Some(&arg.name)));
                return Err(f);
            }
        }
    }
    Ok(summary)
}

pub(crate) fn wrong_answer_message(
    role: &str,
    arg: &str,
    cmp: &Comparison,
    host: &HostCase,
    tol: crate::task::Tolerance,
) -> String {
    let first = cmp
        .first_mismatch
        .as_ref()
        .map(|m| format!("first at element {}: got {} expected {}", m.index, m.got, m.expected))
        .unwrap_or_default();
    format!(
        "{role} output `{arg}` differs from the reference at {}: {} of {} elements outside atol {} + rtol {} x |ref|; {first}; max abs err {:.3e}, max rel err {:.3e}",
        host.label(),
        cmp.mismatches,
        cmp.elements,
        tol.atol,
        tol.rtol,
        cmp.max_abs_err,
        cmp.max_rel_err
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Instant;

    /// `cargo test --release --lib fill_seconds -- --ignored --nocapture`: the host side of
    /// a judgment's reference phase for softmax (33.5M floats of normal(0, 2) a bench set):
    /// generating a bench set fresh and into the buffers of the set before, the check
    /// sizes, and the scan of a reference output for unwritten elements; on one thread and
    /// on as many as eval gives a worker on this machine. Best of three.
    #[test]
    #[ignore = "bench: prints figures"]
    fn fill_seconds() {
        let task = Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/softmax")).unwrap();
        let worker_threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(4).min(16);
        // Wall seconds, and CPU seconds over all threads: on a shared machine the second
        // is the steadier of the two.
        let cpu = || {
            let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: writes the timespec it is given.
            unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
            t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
        };
        let best = |mut f: Box<dyn FnMut(u64)>| {
            let (mut wall, mut used) = (f64::INFINITY, f64::INFINITY);
            for rep in 0..3 {
                let (t, c) = (Instant::now(), cpu());
                f(rep);
                wall = wall.min(t.elapsed().as_secs_f64());
                used = used.min(cpu() - c);
            }
            format!("{wall:.4} s ({used:.4} s CPU)")
        };
        for threads in [1, worker_threads] {
            let task = &task;
            let fresh = best(Box::new(move |rep| {
                let mut host = HostCase::new(task.bench.clone(), 42 + rep);
                host.fill(task, threads, Vec::new()).unwrap();
                std::hint::black_box(&host.inputs);
            }));
            let mut spare = Vec::new();
            let reused = best(Box::new(move |rep| {
                let mut host = HostCase::new(task.bench.clone(), 42 + rep);
                host.fill(task, threads, std::mem::take(&mut spare)).unwrap();
                spare = std::mem::take(&mut host.inputs);
            }));
            let checks = best(Box::new(move |rep| {
                for size in &task.checks {
                    for seed in 0..task.seeds as u64 {
                        let mut host = HostCase::new(size.clone(), 1000 * rep + seed);
                        host.fill(task, threads, Vec::new()).unwrap();
                        std::hint::black_box(&host.inputs);
                    }
                }
            }));
            println!(
                "{threads:2} thread(s): bench {} {fresh} fresh, {reused} into the last set's buffers; {} check cases {checks}",
                task.bench,
                task.checks.len() * task.seeds as usize
            );
        }
        let mut host = HostCase::new(task.bench.clone(), 7);
        host.fill(&task, worker_threads, Vec::new()).unwrap();
        let output = host.inputs[0].take().unwrap();
        // The worker knows the element type only at run time; so must the scan here.
        let scan = best(Box::new(|_| {
            std::hint::black_box(verify::count_poison(std::hint::black_box(ElemType::F32), &output, false));
        }));
        println!("unwritten-element scan of one bench-size reference output: {scan}");
        let fault = best(Box::new(|_| {
            let mut v = crate::hostmem::zeroed(output.len());
            v.iter_mut().step_by(4096).for_each(|b| *b = 1);
            std::hint::black_box(&v);
        }));
        println!("a fresh bench-size output buffer (a download's), faulted in: {fault}");
        let (output, tol) = (&output, task.tolerance);
        for threads in [1, worker_threads] {
            let compare = best(Box::new(move |_| {
                std::hint::black_box(verify::compare(ElemType::F32, output, output, tol, threads));
            }));
            println!("{threads:2} thread(s): comparing one bench-size output with its reference: {compare}");
        }
    }
}
