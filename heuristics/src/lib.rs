//! Deterministic micro-profiling tools: Nsight Compute counters, SASS facts and the
//! ptxas report in, ranked expert diagnoses out.
//!
//! [`ncu`] parses the raw CSV page. [`facts::Kernel`] gathers one kernel's evidence
//! behind accessors that name the counter they read, so a tool that lacks a counter
//! reports it as missing evidence instead of guessing. [`roofline`] (stage 1) classifies
//! the kernel and gates which [`tools`] (stage 2) run. Each tool sizes its problem as an
//! estimated share of kernel time saved, which ranks the [`diagnosis::Diagnosis`] list;
//! [`render`] turns it into a report for people and short guidance for the generator.
//! [`precision`] decides which arithmetic paths a task's tolerance admits, so that
//! prescriptions offer only what can pass and floors assume the fastest such path.
//!
//! Every part that reads a launch declares the metrics it reads beside itself (each
//! tool's `needs` in [`tools::ALL`], [`roofline::NEEDS`], [`facts::DeviceFacts::NEEDS`],
//! [`render::RAW_COUNTERS`]); [`required_metrics`] is their union, which is all a
//! profile collects (`ncu --metrics`, no sections). [`ncu::Launch::record_reads`] lets the
//! tests hold each part to its declaration on real profiles.
//!
//! Pure functions on text and numbers: no I/O, no GPU.

pub mod diagnosis;
pub mod facts;
pub mod ncu;
pub mod precision;
pub mod render;
pub mod request;
pub mod roofline;
pub mod tool_id;
pub mod tools;

pub use diagnosis::{diagnose_kernel, diagnose_profile, diagnose_sass, Diagnosis, KernelDiagnosis, Report, Severity};
pub use facts::{Hints, Kernel};
pub use request::required_metrics;
pub use tool_id::ToolId;
