//! nightshift: unattended optimization of production CUDA kernels.
pub mod build;
pub mod cli;
pub mod disasm;
pub mod eval;
pub mod generate;
pub mod gpu;
pub mod nvml;
pub mod optimize;
pub mod process;
pub mod profile;
pub mod protocol;
pub mod sanitizer;
pub mod task;
pub mod toolchain;
pub mod verify;
pub mod worker;
