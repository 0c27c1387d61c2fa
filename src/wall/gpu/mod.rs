//! The GPU as both sides of the wall use it, over cudarc's `result` layer so that nothing
//! is enqueued behind our back between timed calls: the device's primary context (shared
//! with the CUDA runtime inside a worker's library), one non-blocking stream, raw device
//! buffers, events, the L2 flush kernel and device facts (here); buffers the judge owns and
//! hands to workers as file descriptors (`vmm`); and the judge's own kernels, which make
//! input sets and compare outputs on the device (`kernels`, `launch`).

use crate::wall::protocol::DeviceInfo;
use cudarc::driver::{result, sys, CudaContext, CudaStream};
use std::ffi::{c_void, CString};
use std::sync::Arc;

pub mod kernels;
pub mod launch;
pub mod vmm;

pub type GpuResult<T> = Result<T, GpuError>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuError {
    pub code: sys::CUresult,
    pub name: String,
    pub what: String,
}

impl std::fmt::Display for GpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} during {}", self.name, self.what)
    }
}

impl std::error::Error for GpuError {}

impl GpuError {
    pub fn from_driver(e: result::DriverError, what: &str) -> GpuError {
        let name = e.error_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
        GpuError { code: e.0, name, what: what.to_string() }
    }

    pub fn is_illegal_address(&self) -> bool {
        self.code == sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
    }
}

trait Ctx<T> {
    fn ctx(self, what: &str) -> GpuResult<T>;
}

impl<T> Ctx<T> for Result<T, result::DriverError> {
    fn ctx(self, what: &str) -> GpuResult<T> {
        self.map_err(|e| GpuError::from_driver(e, what))
    }
}

/// Whether the CUDA driver library can be loaded at all (no panic if not).
pub fn driver_present() -> bool {
    // SAFETY: only probes dlopen of the driver library names.
    unsafe { sys::is_culib_present() }
}

/// Compute capability and name of device `ordinal` without creating a context.
pub fn query_device(ordinal: usize) -> GpuResult<(String, (i32, i32), i32)> {
    result::init().ctx("cuInit")?;
    let dev = result::device::get(ordinal as i32).ctx("cuDeviceGet")?;
    let name = result::device::get_name(dev).ctx("cuDeviceGetName")?;
    // SAFETY: dev is a valid device handle from cuDeviceGet.
    let attr = |a| unsafe { result::device::get_attribute(dev, a) }.ctx("cuDeviceGetAttribute");
    let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let mut version = 0;
    // SAFETY: writes one int.
    unsafe { sys::cuDriverGetVersion(&mut version) }.result().ctx("cuDriverGetVersion")?;
    Ok((name, (major, minor), version))
}

pub struct Gpu {
    pub ordinal: i32,
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub info: DeviceInfo,
    flush: Option<L2Flush>,
}

struct L2Flush {
    function: sys::CUfunction,
    buffer: DeviceBuffer,
    sink: DeviceBuffer,
    words: u64,
    grid: u32,
}

/// PTX of the L2 flush kernel, produced by `nvcc -ptx -arch=compute_75 -O3` from:
///
/// ```cuda
/// extern "C" __global__ void nightshift_l2_flush(const uint4* __restrict__ buf,
///     unsigned long long n, unsigned* sink) {
///   unsigned acc = 0;
///   for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
///        i < n; i += (unsigned long long)gridDim.x * blockDim.x) {
///     uint4 v = buf[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w;
///   }
///   if (acc == 0x9e3779b9u) *sink = acc;
/// }
/// ```
///
/// Reading (not writing) a buffer larger than L2 leaves L2 full of clean lines, so the
/// timed call never pays for writing back a flush's dirty lines, as a memset flush would.
const L2_FLUSH_PTX: &str = r#".version 9.0
.target sm_75
.address_size 64
.visible .entry nightshift_l2_flush(
	.param .u64 nightshift_l2_flush_param_0,
	.param .u64 nightshift_l2_flush_param_1,
	.param .u64 nightshift_l2_flush_param_2
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<21>;
	.reg .b64 	%rd<17>;
	ld.param.u64 	%rd8, [nightshift_l2_flush_param_0];
	ld.param.u64 	%rd9, [nightshift_l2_flush_param_1];
	ld.param.u64 	%rd10, [nightshift_l2_flush_param_2];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	cvt.u64.u32 	%rd1, %r4;
	mul.wide.u32 	%rd11, %r3, %r4;
	mov.u32 	%r5, %tid.x;
	cvt.u64.u32 	%rd12, %r5;
	add.s64 	%rd16, %rd11, %rd12;
	setp.ge.u64 	%p1, %rd16, %rd9;
	@%p1 bra 	$L__BB0_5;
	mov.u32 	%r7, %nctaid.x;
	cvt.u64.u32 	%rd13, %r7;
	mul.lo.s64 	%rd3, %rd13, %rd1;
	cvta.to.global.u64 	%rd4, %rd10;
	cvta.to.global.u64 	%rd5, %rd8;
	mov.u32 	%r20, 0;
$L__BB0_2:
	shl.b64 	%rd14, %rd16, 4;
	add.s64 	%rd15, %rd5, %rd14;
	ld.global.nc.v4.u32 	{%r8, %r9, %r10, %r11}, [%rd15];
	xor.b32  	%r16, %r9, %r20;
	xor.b32  	%r17, %r16, %r8;
	xor.b32  	%r18, %r17, %r10;
	xor.b32  	%r20, %r18, %r11;
	add.s64 	%rd16, %rd16, %rd3;
	setp.lt.u64 	%p2, %rd16, %rd9;
	@%p2 bra 	$L__BB0_2;
	setp.ne.s32 	%p3, %r20, -1640531527;
	@%p3 bra 	$L__BB0_5;
	mov.u32 	%r19, -1640531527;
	st.global.u32 	[%rd4], %r19;
$L__BB0_5:
	ret;
}
"#;

impl Gpu {
    pub fn open(ordinal: usize) -> GpuResult<Gpu> {
        let ctx = CudaContext::new(ordinal).ctx("creating the CUDA context")?;
        let stream = ctx.new_stream().ctx("creating a stream")?;
        let info = device_info(&ctx)?;
        Ok(Gpu { ordinal: ordinal as i32, ctx, stream, info, flush: None })
    }

    pub fn bind(&self) -> GpuResult<()> {
        self.ctx.bind_to_thread().ctx("binding the context")
    }

    pub fn raw_stream(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }

    pub fn alloc(&self, bytes: usize) -> GpuResult<DeviceBuffer> {
        self.bind()?;
        // SAFETY: plain allocation; freed in Drop.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }.ctx("cuMemAlloc")?;
        Ok(DeviceBuffer { ptr, bytes })
    }

    pub fn upload(&self, dst: sys::CUdeviceptr, data: &[u8]) -> GpuResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: dst points at a live allocation of at least data.len() bytes (callers' contract).
        unsafe { result::memcpy_htod_sync(dst, data) }.ctx("copying to the device")
    }

    /// Copies `data` to `dst` in order on the stream. The host bytes are staged before the
    /// call returns (pageable memory), so `data` may go right after.
    pub fn upload_async(&self, dst: sys::CUdeviceptr, data: &[u8]) -> GpuResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: dst covers data.len() bytes of a live allocation (callers' contract).
        unsafe { result::memcpy_htod_async(dst, data, self.raw_stream()) }.ctx("copying to the device")
    }

    pub fn download(&self, src: sys::CUdeviceptr, bytes: usize) -> GpuResult<Vec<u8>> {
        let mut out = crate::hostmem::zeroed(bytes);
        if bytes > 0 {
            // SAFETY: src points at a live allocation of at least `bytes` bytes.
            unsafe { result::memcpy_dtoh_sync(&mut out, src) }.ctx("copying from the device")?;
        }
        Ok(out)
    }

    /// Fills `count` elements of `elem_size` bytes with `pattern`, on the stream.
    pub fn fill_async(&self, dst: sys::CUdeviceptr, elem_size: usize, pattern: u64, count: usize) -> GpuResult<()> {
        if count == 0 {
            return Ok(());
        }
        let s = self.raw_stream();
        // SAFETY: dst covers count * elem_size bytes of a live allocation.
        unsafe {
            match elem_size {
                1 => sys::cuMemsetD8Async(dst, pattern as u8, count, s).result(),
                2 => sys::cuMemsetD16Async(dst, pattern as u16, count, s).result(),
                4 => sys::cuMemsetD32Async(dst, pattern as u32, count, s).result(),
                _ => {
                    // 8-byte patterns: a 2D memset writing the low and high words in turn.
                    sys::cuMemsetD2D32Async(dst, 8, pattern as u32, 1, count, s)
                        .result()
                        .and_then(|_| sys::cuMemsetD2D32Async(dst + 4, 8, (pattern >> 32) as u32, 1, count, s).result())
                }
            }
        }
        .ctx("filling device memory")
    }

    pub fn sync_stream(&self) -> GpuResult<()> {
        self.stream.synchronize().ctx("synchronizing the stream")
    }

    /// Waits for all work in the context, on any stream (catches work that escaped ours).
    pub fn sync_all(&self) -> GpuResult<()> {
        self.bind()?;
        result::ctx::synchronize().ctx("synchronizing the device")
    }

    pub fn event(&self) -> GpuResult<cudarc::driver::CudaEvent> {
        self.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).ctx("creating an event")
    }

    pub fn free_memory(&self) -> GpuResult<usize> {
        self.bind()?;
        result::mem_get_info().map(|(free, _)| free).ctx("cuMemGetInfo")
    }

    /// The kernel `name` of a trusted PTX image, JIT-compiled by the driver into this
    /// context (no nvcc needed); the module lives as long as the context.
    pub fn load_kernel(&self, ptx: &str, name: &str) -> GpuResult<sys::CUfunction> {
        Ok(self.load_kernels(ptx, &[name])?[0])
    }

    /// Several kernels of one PTX image, compiled once.
    pub fn load_kernels(&self, ptx: &str, names: &[&str]) -> GpuResult<Vec<sys::CUfunction>> {
        self.bind()?;
        // Both are constants of ours (the PTX images in this crate), never user input.
        let image = CString::new(ptx).expect("a PTX image without NUL");
        // SAFETY: a NUL-terminated PTX image.
        let module = unsafe { result::module::load_data(image.as_ptr() as *const c_void) }
            .map_err(|e| GpuError::from_driver(e, &format!("loading the {} kernels", names.join(", "))))?;
        names
            .iter()
            .map(|name| {
                let symbol = CString::new(*name).expect("a kernel name without NUL");
                // SAFETY: the module is live and stays loaded with the context.
                unsafe { result::module::get_function(module, symbol) }
                    .map_err(|e| GpuError::from_driver(e, &format!("finding {name} in its PTX")))
            })
            .collect()
    }

    /// Prepares the L2 flush: a read buffer of three times the L2 size.
    pub fn enable_l2_flush(&mut self) -> GpuResult<()> {
        if self.flush.is_some() {
            return Ok(());
        }
        self.bind()?;
        let bytes = ((self.info.l2_bytes.max(1 << 20) as usize) * 3).next_multiple_of(16);
        let buffer = self.alloc(bytes)?;
        let sink = self.alloc(4)?;
        // SAFETY: both buffers are live and sized as given.
        unsafe { result::memset_d8_sync(buffer.ptr, 0, bytes) }.ctx("clearing the flush buffer")?;
        let function = self.load_kernel(L2_FLUSH_PTX, "nightshift_l2_flush")?;
        let grid = (self.info.sm_count.max(1) as u32) * 8;
        self.flush = Some(L2Flush { function, words: (bytes / 16) as u64, buffer, sink, grid });
        // The clearing memset ran on the legacy stream; ours does not wait for it.
        self.sync_all()
    }

    /// Enqueues an L2 flush on the stream (no-op unless enabled).
    pub fn flush_l2_async(&self) -> GpuResult<()> {
        let Some(f) = &self.flush else { return Ok(()) };
        let mut buf = f.buffer.ptr;
        let mut n = f.words;
        let mut sink = f.sink.ptr;
        let mut params: [*mut c_void; 3] =
            [&mut buf as *mut _ as *mut c_void, &mut n as *mut _ as *mut c_void, &mut sink as *mut _ as *mut c_void];
        // SAFETY: parameters match the kernel's (u64, u64, u64) signature and outlive the call
        // (cuLaunchKernel copies them before returning).
        unsafe { result::launch_kernel(f.function, (f.grid, 1, 1), (256, 1, 1), 0, self.raw_stream(), &mut params) }
            .ctx("launching the L2 flush")
    }
}

fn format_uuid(uuid: sys::CUuuid) -> String {
    let b: Vec<u8> = uuid.bytes.iter().map(|x| *x as u8).collect();
    format!("GPU-{}-{}-{}-{}-{}", hex(&b[0..4]), hex(&b[4..6]), hex(&b[6..8]), hex(&b[8..10]), hex(&b[10..16]))
}

/// The UUID of device `ordinal` (as NVML and nvidia-smi print it), without a context.
/// Call only where [`driver_present`].
pub fn device_uuid(ordinal: usize) -> GpuResult<String> {
    result::init().ctx("cuInit")?;
    let dev = result::device::get(ordinal as i32).ctx("cuDeviceGet")?;
    Ok(format_uuid(result::device::get_uuid(dev).ctx("cuDeviceGetUuid")?))
}

fn device_info(ctx: &Arc<CudaContext>) -> GpuResult<DeviceInfo> {
    use sys::CUdevice_attribute as A;
    let attr = |a| ctx.attribute(a).ctx("cuDeviceGetAttribute");
    let mem_khz = attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)? as f64;
    let bus = attr(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?;
    let uuid = format_uuid(ctx.uuid().ctx("cuDeviceGetUuid")?);
    let mut version = 0;
    // SAFETY: writes one int.
    unsafe { sys::cuDriverGetVersion(&mut version) }.result().ctx("cuDriverGetVersion")?;
    Ok(DeviceInfo {
        name: ctx.name().ctx("cuDeviceGetName")?,
        uuid,
        compute_capability: ctx.compute_capability().ctx("compute capability")?,
        sm_count: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        l2_bytes: attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as i64,
        memory_bytes: ctx.total_mem().ctx("cuDeviceTotalMem")? as u64,
        max_sm_clock_mhz: attr(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as f64 / 1000.0,
        memory_clock_mhz: mem_khz / 1000.0,
        memory_bus_bits: bus,
        peak_dram_gbs: 2.0 * mem_khz * 1e3 * (bus as f64 / 8.0) / 1e9,
        driver_version: version,
        achievable_dram_gbs: None,
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Raw device memory, freed on drop.
pub struct DeviceBuffer {
    pub ptr: sys::CUdeviceptr,
    pub bytes: usize,
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: ptr came from cuMemAlloc and is freed once. Errors (a dead context) are moot.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}
