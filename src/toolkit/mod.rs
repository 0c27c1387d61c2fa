//! The CUDA toolkit from nightshift's side: finding and running its tools.
//!
//! `toolchain` finds nvcc, the runtime, cuobjdump, nvdisasm, ncu and compute-sanitizer;
//! `process` runs any of them in its own process group with a scrubbed environment, capped
//! capture and a deadline; `build` turns a kernel into a cached, import-checked library;
//! `disasm` reads SASS back out of a binary. Nothing here needs a GPU or imports the wall
//! (profiles, which run a worker under ncu, live in `wall::judge::profile`).
pub mod build;
pub mod disasm;
pub mod process;
pub mod toolchain;
