//! The judge's own kernels (`kernels`: PTX made ahead of time from CUDA sources), loaded
//! into a context and launched on its stream: input sets generated from seeds, a buffer
//! checked against what its seed generates (inputs left alone, guard zones intact), and an
//! output compared with the reference's under the task's tolerance.

use super::kernels::{
    CmpSpec, GenSpec, BLOCK, CHECK_GENERATED_KERNEL, COMPARE_KERNEL, COMPARE_PTX, GENERATE_KERNEL, GENERATE_PTX,
};
use super::{Ctx, Gpu, GpuResult};
use cudarc::driver::{result, sys};
use std::ffi::c_void;

pub struct Kernels {
    generate: sys::CUfunction,
    check_generated: sys::CUfunction,
    compare: sys::CUfunction,
    grid: u32,
}

impl Kernels {
    pub fn load(gpu: &Gpu) -> GpuResult<Kernels> {
        let generating = gpu.load_kernels(GENERATE_PTX, &[GENERATE_KERNEL, CHECK_GENERATED_KERNEL])?;
        Ok(Kernels {
            generate: generating[0],
            check_generated: generating[1],
            compare: gpu.load_kernel(COMPARE_PTX, COMPARE_KERNEL)?,
            grid: (gpu.info.sm_count.max(1) as u32) * 8,
        })
    }

    fn grid_for(&self, count: u64) -> u32 {
        (count.div_ceil(BLOCK as u64).max(1)).min(self.grid as u64) as u32
    }

    fn launch(
        &self,
        gpu: &Gpu,
        f: sys::CUfunction,
        count: u64,
        params: &mut [*mut c_void],
        what: &str,
    ) -> GpuResult<()> {
        if count == 0 {
            return Ok(());
        }
        // SAFETY: `params` point at values of the kernel's parameter types that outlive the
        // call (cuLaunchKernel copies them before it returns).
        unsafe { result::launch_kernel(f, (self.grid_for(count), 1, 1), (BLOCK, 1, 1), 0, gpu.raw_stream(), params) }
            .ctx(what)
    }

    /// Fills `spec.count` elements at `out` (on the stream).
    pub fn generate(&self, gpu: &Gpu, out: sys::CUdeviceptr, spec: &GenSpec) -> GpuResult<()> {
        let mut out = out;
        let mut spec = *spec;
        let mut params = [&mut out as *mut _ as *mut c_void, &mut spec as *mut _ as *mut c_void];
        self.launch(gpu, self.generate, spec.count, &mut params, "generating inputs")
    }

    /// Lowers the u64 at `first_bad` to the first element of `buf` that differs from what
    /// `spec` generates (the caller sets it to u64::MAX first).
    pub fn check_generated(
        &self,
        gpu: &Gpu,
        buf: sys::CUdeviceptr,
        spec: &GenSpec,
        first_bad: sys::CUdeviceptr,
    ) -> GpuResult<()> {
        let (mut buf, mut spec, mut first_bad) = (buf, *spec, first_bad);
        let mut params = [
            &mut buf as *mut _ as *mut c_void,
            &mut spec as *mut _ as *mut c_void,
            &mut first_bad as *mut _ as *mut c_void,
        ];
        self.launch(gpu, self.check_generated, spec.count, &mut params, "checking a buffer against its seed")
    }

    /// Compares `got` with `expected` into the `CmpResult` at `result` (the caller
    /// initialises it to `CmpResult::INITIAL`).
    pub fn compare(
        &self,
        gpu: &Gpu,
        got: sys::CUdeviceptr,
        expected: sys::CUdeviceptr,
        spec: &CmpSpec,
        result: sys::CUdeviceptr,
    ) -> GpuResult<()> {
        let (mut got, mut expected, mut spec, mut result) = (got, expected, *spec, result);
        let mut params = [
            &mut got as *mut _ as *mut c_void,
            &mut expected as *mut _ as *mut c_void,
            &mut spec as *mut _ as *mut c_void,
            &mut result as *mut _ as *mut c_void,
        ];
        self.launch(gpu, self.compare, spec.count, &mut params, "comparing outputs")
    }
}
