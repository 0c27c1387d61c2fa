//! The untrusted side of the wall: the process that loads a kernel library. One library
//! per process (the reference's, the baseline's or the candidate's), sandboxed before
//! anything else happens, so that every thread the driver or the library starts inherits
//! the sandbox.
//!
//! A *served* worker (`serve`) does what the judge asks over the socket pair at fd 3: map
//! the judge's buffers, load the library, run calls. A *standalone* worker (`standalone`)
//! runs one call under a hosting tool (ncu, compute-sanitizer) on inputs it makes itself.
//! Neither decides anything: the judge reads outputs from its own buffers and times with
//! its own clock, and a standalone run's evidence is the tool's own files. So a worker
//! holds nothing worth stealing: no key, no verdict, no reference outputs.

mod library;
pub mod serve;
pub mod standalone;

use crate::wall::gpu::Gpu;

/// The GPU, or why not: (message, whether the machine lacks it rather than ours failed).
fn open_gpu(device: usize) -> Result<Gpu, (String, bool)> {
    if !crate::wall::gpu::driver_present() {
        return Err((
            "no CUDA driver: libcuda.so could not be loaded (is this a GPU machine with the NVIDIA driver installed?)"
                .into(),
            true,
        ));
    }
    Gpu::open(device).map_err(|e| (format!("cannot use GPU {device}: {e}"), true))
}

/// A panic ends the process plainly (no unwinding into the library's frames).
fn install_panic_exit() {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("worker panicked: {info}");
        // SAFETY: terminates the process.
        unsafe { libc::_exit(70) }
    }));
}
