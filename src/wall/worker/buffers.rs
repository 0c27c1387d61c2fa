//! One case's buffers on the device: guarded allocations (canaries on each side), in-out
//! buffers restored from a pristine copy before every call, outputs poisoned before it,
//! and the checked call itself (guards intact, inputs unchanged afterwards).

use super::inputs::HostCase;
use super::{is_output, pointer_args, CallError, Entry, Worker};
use crate::task::types::ElemType;
use crate::task::ArgRole;
use crate::wall::gpu::{DeviceBuffer, GpuResult, GuardedBuffer};
use crate::wall::protocol::{Failure, FailureClass};
use crate::wall::verify;

/// One case's buffers on the device, with the argument slots the shim reads.
pub(crate) struct DeviceCase {
    pub buffers: Vec<Option<GuardedBuffer>>,
    /// Initial values of InOut buffers, restored before every call.
    pristine: Vec<Option<DeviceBuffer>>,
    pub values: Vec<[u8; 8]>,
    pub(super) elems: Vec<Option<ElemType>>,
    pub(super) roles: Vec<ArgRole>,
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
    pub(super) fn run(
        &mut self,
        w: &Worker,
        entry: &Entry,
        host: &HostCase,
        second: bool,
    ) -> Result<Vec<Option<Vec<u8>>>, Failure> {
        self.run_checking(w, entry, host, second, true)
    }

    pub(super) fn run_checking(
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

pub(super) fn device_failure(role: &str, e: crate::wall::gpu::GpuError, host: &HostCase) -> Failure {
    let mut f = CallError::Device(e).failure(role, &host.label());
    f.at = Some(host.case_ref(None));
    f
}
