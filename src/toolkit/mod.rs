//! The CUDA toolkit from nightshift's side: finding and running its tools.
//!
//! `toolchain` finds nvcc, the runtime, cuobjdump, nvdisasm, ncu and compute-sanitizer;
//! `process` runs any of them in its own process group with a scrubbed environment, capped
//! capture and a deadline; `build` turns a kernel into a cached, import-checked library;
//! `disasm` reads SASS back out of a binary; `profile` runs the worker under ncu. Nothing
//! here needs a GPU except `profile`, which goes through the wall's worker client.
pub mod build;
pub mod disasm;
pub mod process;
pub mod profile;
pub mod toolchain;
