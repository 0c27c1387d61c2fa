//! The DRAM bandwidth this GPU reaches, measured once per device with a stream triad
//! and cached by the device's UUID: no kernel reaches the datasheet peak (memory clock
//! times bus width), so "at the roofline" and "% of floor" read this figure beside it.
//!
//! The probe is trusted code (PTX below, JIT-compiled by the driver: no nvcc needed) and
//! runs in a process that never loads candidate code (check-env, eval, diagnose before
//! their workers), under the GPU's lock like every other measurement.

use crate::wall::gpu::{Gpu, GpuError};
use serde::{Deserialize, Serialize};
use std::ffi::c_void;
use std::path::{Path, PathBuf};

/// `a[i] = b[i] + s * c[i]` over float4, grid-strided; 16-byte loads and stores. Written
/// for sm_70 so the driver JITs it for any newer GPU; PTX 8.0 is accepted by CUDA 12.0 on.
const TRIAD_PTX: &str = r#".version 8.0
.target sm_70
.address_size 64
.visible .entry nightshift_triad(
	.param .u64 p_a,
	.param .u64 p_b,
	.param .u64 p_c,
	.param .u64 p_n,
	.param .f32 p_s
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<5>;
	.reg .f32 	%f<14>;
	.reg .b64 	%rd<12>;
	ld.param.u64 	%rd1, [p_a];
	ld.param.u64 	%rd2, [p_b];
	ld.param.u64 	%rd3, [p_c];
	ld.param.u64 	%rd4, [p_n];
	ld.param.f32 	%f1, [p_s];
	cvta.to.global.u64 	%rd1, %rd1;
	cvta.to.global.u64 	%rd2, %rd2;
	cvta.to.global.u64 	%rd3, %rd3;
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mul.wide.u32 	%rd5, %r1, %r2;
	cvt.u64.u32 	%rd6, %r3;
	add.s64 	%rd5, %rd5, %rd6;
	mov.u32 	%r4, %nctaid.x;
	mul.wide.u32 	%rd7, %r4, %r2;
	setp.ge.u64 	%p1, %rd5, %rd4;
	@%p1 bra 	$L__done;
$L__loop:
	shl.b64 	%rd8, %rd5, 4;
	add.s64 	%rd9, %rd2, %rd8;
	ld.global.v4.f32 	{%f2, %f3, %f4, %f5}, [%rd9];
	add.s64 	%rd10, %rd3, %rd8;
	ld.global.v4.f32 	{%f6, %f7, %f8, %f9}, [%rd10];
	fma.rn.f32 	%f10, %f1, %f6, %f2;
	fma.rn.f32 	%f11, %f1, %f7, %f3;
	fma.rn.f32 	%f12, %f1, %f8, %f4;
	fma.rn.f32 	%f13, %f1, %f9, %f5;
	add.s64 	%rd11, %rd1, %rd8;
	st.global.v4.f32 	[%rd11], {%f10, %f11, %f12, %f13};
	add.s64 	%rd5, %rd5, %rd7;
	setp.lt.u64 	%p2, %rd5, %rd4;
	@%p2 bra 	$L__loop;
$L__done:
	ret;
}
"#;

const WARMUPS: usize = 3;
const REPETITIONS: usize = 20;
/// Bytes per array at most: three of them are many times any L2 so far (50-128 MiB).
const ARRAY_BYTES: usize = 256 << 20;

/// What identifies a measurement: a new driver or another board re-measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub uuid: String,
    pub name: String,
    pub driver_version: i32,
    pub datasheet_gbs: f64,
}

/// The cache file, `<cache_root>/bandwidth/<uuid>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    pub uuid: String,
    pub name: String,
    pub driver: i32,
    pub measured_gbs: f64,
    pub datasheet_gbs: f64,
    /// Seconds since the Unix epoch.
    pub measured_at: u64,
}

/// The cached figure, if `text` holds a plausible measurement of this very device under
/// this driver; anything else (another GPU, a driver update, a torn or edited file, a
/// figure past the datasheet) means measure again.
pub fn usable(text: &str, id: &Identity) -> Option<f64> {
    let e: CacheEntry = serde_json::from_str(text).ok()?;
    let plausible = e.measured_gbs.is_finite()
        && e.measured_gbs > 0.0
        && (id.datasheet_gbs <= 0.0 || e.measured_gbs <= 1.05 * id.datasheet_gbs);
    (e.uuid == id.uuid && e.name == id.name && e.driver == id.driver_version && plausible).then_some(e.measured_gbs)
}

/// Where a device's figure is cached.
pub fn cache_path(root: &Path, uuid: &str) -> PathBuf {
    // UUIDs are `GPU-<hex and dashes>`; anything else is kept to a safe file name.
    let safe: String = uuid.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    root.join("bandwidth").join(format!("{safe}.json"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Cached,
    Measured,
}

#[derive(Debug, Clone)]
pub struct Achievable {
    pub gbs: f64,
    pub datasheet_gbs: f64,
    pub source: Source,
    pub path: PathBuf,
}

impl Achievable {
    /// "2.84 TB/s measured (85% of the 3.35 TB/s datasheet peak)".
    pub fn describe(&self) -> String {
        format!(
            "{:.2} TB/s {} ({:.0}% of the {:.2} TB/s datasheet peak; stream triad, {})",
            self.gbs / 1e3,
            if self.source == Source::Cached { "measured earlier" } else { "measured now" },
            100.0 * self.gbs / self.datasheet_gbs,
            self.datasheet_gbs / 1e3,
            self.path.display()
        )
    }
}

/// Why there is no achievable bandwidth for a device.
#[derive(Debug, thiserror::Error)]
pub enum BandwidthError {
    #[error("no CUDA driver (libcuda.so) found")]
    NoDriver,
    /// The driver would not say what the device is.
    #[error(transparent)]
    Identity(#[from] GpuError),
    #[error(transparent)]
    RuntimeDir(#[from] crate::wall::runtime_dir::RuntimeDirError),
    #[error("cannot take the GPU lock {}: {source}", path.display())]
    Lock { path: PathBuf, source: std::io::Error },
    #[error("measuring DRAM bandwidth: {0}")]
    Measure(#[source] GpuError),
}

/// The device's identity, without creating a context.
pub fn identity(ordinal: usize) -> Result<Identity, BandwidthError> {
    use cudarc::driver::{result, sys::CUdevice_attribute as A};
    if !crate::wall::gpu::driver_present() {
        return Err(BandwidthError::NoDriver);
    }
    let (name, _, driver_version) = crate::wall::gpu::query_device(ordinal)?;
    let uuid = crate::wall::gpu::device_uuid(ordinal)?;
    let dev = result::device::get(ordinal as i32).map_err(|e| GpuError::from_driver(e, "cuDeviceGet"))?;
    // SAFETY: dev is a valid device handle from cuDeviceGet.
    let attr = |a| {
        unsafe { result::device::get_attribute(dev, a) }.map_err(|e| GpuError::from_driver(e, "cuDeviceGetAttribute"))
    };
    let khz = attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)? as f64;
    let bits = attr(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)? as f64;
    Ok(Identity { uuid, name, driver_version, datasheet_gbs: 2.0 * khz * 1e3 * (bits / 8.0) / 1e9 })
}

/// The achievable bandwidth of device `ordinal`: from the cache, else measured now (about
/// a second, under the GPU's lock) and cached.
pub fn achievable(ordinal: usize) -> Result<Achievable, BandwidthError> {
    let id = identity(ordinal)?;
    let path = cache_path(&crate::toolkit::build::cache_root(), &id.uuid);
    let cached = |source| {
        let text = std::fs::read_to_string(&path).ok()?;
        usable(&text, &id).map(|gbs| Achievable { gbs, datasheet_gbs: id.datasheet_gbs, source, path: path.clone() })
    };
    if let Some(a) = cached(Source::Cached) {
        return Ok(a);
    }
    let _lock = if std::env::var_os("NIGHTSHIFT_GPU_LOCK").is_some_and(|v| v == "off") {
        None
    } else {
        let lock = crate::wall::gpu_lock::lock_path(ordinal)?;
        Some(
            crate::wall::gpu_lock::acquire(&lock)
                .map_err(|source| BandwidthError::Lock { path: lock.clone(), source })?,
        )
    };
    // Another process may have measured while we waited for the lock.
    if let Some(a) = cached(Source::Cached) {
        return Ok(a);
    }
    let gbs = measure(ordinal).map_err(BandwidthError::Measure)?;
    let entry = CacheEntry {
        uuid: id.uuid.clone(),
        name: id.name.clone(),
        driver: id.driver_version,
        measured_gbs: gbs,
        datasheet_gbs: id.datasheet_gbs,
        measured_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    };
    // A cache that cannot be written costs only a re-measurement next time.
    let _ = write_atomically(&path, &entry);
    Ok(Achievable { gbs, datasheet_gbs: id.datasheet_gbs, source: Source::Measured, path })
}

/// The figure where it can be had, else the reason as a note for the verdict. The outcome
/// is kept for the life of the process: an optimize run judges hundreds of kernels, and a
/// probe that failed once (a driver that refuses the PTX) must not cost each of them a
/// context and a second try.
pub fn achievable_or_note(ordinal: usize, notes: &mut Vec<String>) -> Option<f64> {
    // The error kept as its message: only the note reads it, and each later judgment
    // repeats that note.
    static OUTCOMES: std::sync::Mutex<Vec<(usize, Result<f64, String>)>> = std::sync::Mutex::new(Vec::new());
    let mut outcomes = OUTCOMES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let outcome = match outcomes.iter().find(|(o, _)| *o == ordinal) {
        Some((_, known)) => known.clone(),
        None => {
            let fresh = achievable(ordinal).map(|a| a.gbs).map_err(|e| e.to_string());
            outcomes.push((ordinal, fresh.clone()));
            fresh
        }
    };
    match outcome {
        Ok(gbs) => Some(gbs),
        Err(e) => {
            notes.push(format!("no measured DRAM bandwidth ({e}): % of floor reads the datasheet peak only"));
            None
        }
    }
}

fn write_atomically(path: &Path, entry: &CacheEntry) -> std::io::Result<()> {
    let dir = path.parent().ok_or_else(|| std::io::Error::other("no parent folder"))?;
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    let body = serde_json::to_vec_pretty(entry)?;
    std::io::Write::write_all(&mut tmp, &body)?;
    tmp.persist(path)?;
    Ok(())
}

/// Runs the triad on device `ordinal` in this process: median GB/s (1e9 bytes) over
/// [`REPETITIONS`] timed runs after [`WARMUPS`], counting two arrays read and one written.
pub fn measure(ordinal: usize) -> Result<f64, GpuError> {
    use cudarc::driver::result;
    let gpu = Gpu::open(ordinal)?;
    gpu.bind()?;
    let driver = |what: &'static str| move |e| GpuError::from_driver(e, what);
    // Three arrays in at most 60% of free memory, 16-byte elements.
    let free = gpu.free_memory()?;
    let per_array = (ARRAY_BYTES.min(free * 6 / 10 / 3) / 16) * 16;
    let l2 = gpu.info.l2_bytes.max(1 << 20) as usize;
    if per_array < 2 * l2 {
        return Err(GpuError {
            code: cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY,
            name: "too little free memory".into(),
            what: format!("allocating three arrays of twice the L2 ({} MiB free)", free >> 20),
        });
    }
    let (a, b, c) = (gpu.alloc(per_array)?, gpu.alloc(per_array)?, gpu.alloc(per_array)?);
    for buf in [&a, &b, &c] {
        // SAFETY: each buffer is live and per_array bytes long.
        unsafe { result::memset_d8_sync(buf.ptr, 0, per_array) }.map_err(driver("clearing the triad arrays"))?;
    }
    // The memsets ran on the legacy stream; ours does not wait for it.
    gpu.sync_all()?;
    let function = gpu.load_kernel(TRIAD_PTX, "nightshift_triad")?;
    // Full occupancy at 256 threads is 8 blocks per SM on every GPU since Volta; four
    // waves of it keep every SM streaming without a tail worth measuring.
    let grid = (gpu.info.sm_count.max(1) as u32) * 8 * 4;
    let n = (per_array / 16) as u64;
    let launch = || {
        let (mut pa, mut pb, mut pc, mut pn, mut s) = (a.ptr, b.ptr, c.ptr, n, 3.0f32);
        let mut params: [*mut c_void; 5] = [
            &mut pa as *mut _ as *mut c_void,
            &mut pb as *mut _ as *mut c_void,
            &mut pc as *mut _ as *mut c_void,
            &mut pn as *mut _ as *mut c_void,
            &mut s as *mut _ as *mut c_void,
        ];
        // SAFETY: parameters match the kernel's (u64, u64, u64, u64, f32) signature and
        // outlive the call (cuLaunchKernel copies them before returning).
        unsafe { result::launch_kernel(function, (grid, 1, 1), (256, 1, 1), 0, gpu.raw_stream(), &mut params) }
            .map_err(driver("launching the triad"))
    };
    for _ in 0..WARMUPS {
        launch()?;
    }
    gpu.sync_stream()?;
    let mut ms = Vec::with_capacity(REPETITIONS);
    for _ in 0..REPETITIONS {
        let (start, end) = (gpu.event()?, gpu.event()?);
        start.record(&gpu.stream).map_err(driver("recording an event"))?;
        launch()?;
        end.record(&gpu.stream).map_err(driver("recording an event"))?;
        end.synchronize().map_err(driver("waiting for an event"))?;
        ms.push(start.elapsed_ms(&end).map_err(driver("reading an event"))? as f64);
    }
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    Ok(3.0 * per_array as f64 / (median * 1e-3) / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> Identity {
        Identity {
            uuid: "GPU-8c2a1f3e-0000-1111-2222-333344445555".into(),
            name: "NVIDIA H100 80GB HBM3".into(),
            driver_version: 13000,
            datasheet_gbs: 3352.3,
        }
    }

    fn entry(id: &Identity, gbs: f64) -> CacheEntry {
        CacheEntry {
            uuid: id.uuid.clone(),
            name: id.name.clone(),
            driver: id.driver_version,
            measured_gbs: gbs,
            datasheet_gbs: id.datasheet_gbs,
            measured_at: 1_790_000_000,
        }
    }

    #[test]
    fn the_cache_round_trips_and_is_used_for_the_same_device_and_driver() {
        let id = h100();
        let text = serde_json::to_string(&entry(&id, 2840.0)).unwrap();
        assert_eq!(serde_json::from_str::<CacheEntry>(&text).unwrap(), entry(&id, 2840.0));
        assert_eq!(usable(&text, &id), Some(2840.0));
    }

    #[test]
    fn another_device_a_new_driver_or_a_bad_file_measures_again() {
        let id = h100();
        let text = serde_json::to_string(&entry(&id, 2840.0)).unwrap();
        let other = |f: fn(&mut Identity)| {
            let mut i = h100();
            f(&mut i);
            usable(&text, &i)
        };
        assert_eq!(other(|i| i.uuid = "GPU-ffffffff-0000-1111-2222-333344445555".into()), None);
        assert_eq!(other(|i| i.driver_version = 13010), None);
        assert_eq!(other(|i| i.name = "NVIDIA H200".into()), None);
        assert_eq!(usable("", &id), None);
        assert_eq!(usable(&text[..text.len() / 2], &id), None);
        assert_eq!(usable("{\"uuid\": 3}", &id), None);
        for bogus in [0.0, -5.0, 4000.0] {
            assert_eq!(usable(&serde_json::to_string(&entry(&id, bogus)).unwrap(), &id), None, "{bogus}");
        }
    }

    #[test]
    fn the_cache_file_is_named_by_uuid_and_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = cache_path(dir.path(), "GPU-8c2a/../x");
        assert_eq!(path, dir.path().join("bandwidth/GPU-8c2a____x.json"));
        let id = h100();
        let path = cache_path(dir.path(), &id.uuid);
        write_atomically(&path, &entry(&id, 2840.0)).unwrap();
        assert_eq!(usable(&std::fs::read_to_string(&path).unwrap(), &id), Some(2840.0));
        write_atomically(&path, &entry(&id, 2900.0)).unwrap();
        assert_eq!(usable(&std::fs::read_to_string(&path).unwrap(), &id), Some(2900.0));
    }

    #[test]
    #[ignore = "needs a GPU"]
    fn device_0_reaches_a_plausible_share_of_its_datasheet_peak_and_caches_it() {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: no other thread of this test reads the environment concurrently.
        unsafe { std::env::set_var("NIGHTSHIFT_CACHE_DIR", dir.path()) };
        let first = achievable(0).unwrap();
        assert_eq!(first.source, Source::Measured);
        let share = first.gbs / first.datasheet_gbs;
        assert!((0.3..=1.0).contains(&share), "{} of {} GB/s", first.gbs, first.datasheet_gbs);
        let second = achievable(0).unwrap();
        assert_eq!(second.source, Source::Cached);
        assert_eq!(second.gbs, first.gbs);
    }
}
