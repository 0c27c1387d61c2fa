//! A standalone worker, hosted by ncu or compute-sanitizer: it makes its own inputs on the
//! GPU (the judge's generator, run here: the data only has to be plausible, nothing is
//! verified), loads the library and calls it once (after two warm-ups, for a profile). It
//! tells the orchestrator how far it got in JSON lines on a private copy of its stdout
//! (fd 1 then points at stderr, so the library's printf cannot land there by accident; on
//! purpose it can, which is why nothing after `Loading` is believed).

use super::library::Library;
use crate::task::values::{args_at, ArgValue};
use crate::wall::gpu::kernels::GenSpec;
use crate::wall::gpu::launch::Kernels;
use crate::wall::gpu::{DeviceBuffer, Gpu};
use crate::wall::protocol::{Standalone, StandaloneMessage, StandalonePhase, StandaloneRequest};
use std::io::Write;
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

struct Out(std::fs::File);

impl Out {
    fn send(&mut self, msg: &StandaloneMessage) {
        let mut line = serde_json::to_string(msg).unwrap_or_default();
        line.push('\n');
        if self.0.write_all(line.as_bytes()).and_then(|_| self.0.flush()).is_err() {
            // SAFETY: terminates the process.
            unsafe { libc::_exit(0) }
        }
    }

    fn phase(&mut self, phase: StandalonePhase, detail: impl Into<String>) {
        self.send(&StandaloneMessage::Phase { phase, detail: detail.into() });
    }

    fn done(&mut self, error: Option<String>, ours: bool) -> ! {
        self.send(&StandaloneMessage::Done { error, ours });
        // Skip the library's destructors and atexit handlers.
        // SAFETY: terminates the process.
        unsafe { libc::_exit(0) }
    }
}

/// Entry of `nightshift worker --standalone REQUEST.json`. Never returns.
pub fn main(request_path: &Path) -> ! {
    // SAFETY: descriptor juggling at process start, before any other thread exists.
    let mut out = unsafe {
        let fd = libc::dup(1);
        if fd < 0 || libc::dup2(2, 1) < 0 {
            eprintln!("worker: cannot set up its output");
            libc::_exit(70);
        }
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        Out(std::fs::File::from_raw_fd(fd))
    };
    super::install_panic_exit();
    let request: StandaloneRequest = match std::fs::read(request_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => out.done(Some(format!("cannot read the worker request {}: {e}", request_path.display())), true),
    };
    // Before the sandbox and any library: the descriptors are the tool's.
    close_handed_down(&request.host_outputs);
    let started = Instant::now();
    let mut sandbox =
        request.policy.as_ref().map(|p| (crate::wall::sandbox::apply(p), started.elapsed().as_secs_f64()));
    if let Some((layers, seconds)) = &sandbox {
        out.send(&StandaloneMessage::Sandbox { layers: layers.clone(), seconds: *seconds });
    }
    out.phase(StandalonePhase::Init, "opening the GPU");
    let gpu = match super::open_gpu(request.device) {
        Ok(g) => g,
        Err((m, _)) => out.done(Some(m), true),
    };
    out.send(&StandaloneMessage::Device { device: gpu.info.clone() });
    // ncu's injected code reads its variables while it profiles; a sanitizer's has read
    // them by now, and a library looking for them is looking for a sanitizer: the
    // environment goes, from memory too.
    if request.mode == Standalone::Sanitize {
        if let Some((layers, seconds)) = sandbox.as_mut() {
            layers.push(crate::wall::sandbox::scrub_environment());
            out.send(&StandaloneMessage::Sandbox { layers: layers.clone(), seconds: *seconds });
        }
    }
    let task = &request.task;
    let size = match request.mode {
        Standalone::Profile => task.bench.clone(),
        Standalone::Sanitize => task.smallest_check().clone(),
    };
    out.phase(StandalonePhase::Setup, format!("inputs at {size}"));
    let mut buffers = match Buffers::make(&gpu, task, &size, request.seed) {
        Ok(b) => b,
        Err(m) => out.done(Some(m), true),
    };
    out.phase(StandalonePhase::Loading, request.library.display().to_string());
    let library = match Library::load(&request.library) {
        Ok(l) => l,
        Err(e) => out.done(Some(e.to_string()), false),
    };
    let call = |b: &mut Buffers| -> Result<(), String> {
        library.call(&mut b.values, gpu.raw_stream() as *mut std::ffi::c_void)?;
        gpu.sync_all().map_err(|e| e.to_string())
    };
    if request.mode == Standalone::Profile {
        // Warm-ups keep lazy module loading and first-touch costs out of the profile.
        out.phase(StandalonePhase::WarmUp, format!("two calls at {size}"));
        for _ in 0..2 {
            if let Err(e) = call(&mut buffers) {
                out.done(Some(e), false);
            }
        }
        out.phase(StandalonePhase::Call, format!("the profiled call at {size}"));
        let _ = cudarc::driver::profiler_start();
        let r = call(&mut buffers);
        let _ = cudarc::driver::profiler_stop();
        out.done(r.err(), false)
    }
    out.phase(StandalonePhase::Call, format!("size {size}"));
    let r = call(&mut buffers);
    out.done(r.err(), false)
}

/// Exact-size allocations (compute-sanitizer reports accesses outside an allocation),
/// inputs generated, outputs left as allocated (so initcheck sees a read of one before
/// the kernel wrote it).
struct Buffers {
    _held: Vec<DeviceBuffer>,
    values: Vec<[u8; 8]>,
}

impl Buffers {
    fn make(gpu: &Gpu, task: &crate::task::Task, size: &crate::task::Size, seed: u64) -> Result<Buffers, String> {
        let kernels = Kernels::load(gpu).map_err(|e| e.to_string())?;
        let args = args_at(task, size).map_err(|e| e.to_string())?;
        let mut b = Buffers { _held: Vec::new(), values: Vec::new() };
        for (i, a) in args.iter().enumerate() {
            match *a {
                ArgValue::Scalar(bytes) => b.values.push(bytes),
                ArgValue::Buffer { elem, count, init } => {
                    let buf = gpu.alloc(a.bytes()).map_err(|e| e.to_string())?;
                    if let Some(init) = init {
                        kernels
                            .generate(gpu, buf.ptr, &GenSpec::new(&init, elem, count as u64, seed, i as u64))
                            .map_err(|e| e.to_string())?;
                    }
                    b.values.push(buf.ptr.to_le_bytes());
                    b._held.push(buf);
                }
            }
        }
        gpu.sync_all().map_err(|e| e.to_string())?;
        Ok(b)
    }
}

/// Closes every descriptor this process inherited onto a file inside `folders` (a hosting
/// tool's log, handed down by the tool); returns how many it closed.
pub(crate) fn close_handed_down(folders: &[PathBuf]) -> usize {
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
