//! Reading compiled CUDA code the way an expert does, as pure functions on text.
//!
//! [`parse::parse`] turns `cuobjdump -sass` or `nvdisasm -c -gi` output into functions of
//! instructions (offset, predicate, opcode, modifiers, operands, branch target, source
//! line); [`classify`] names what each instruction does; [`analysis`] derives the facts
//! diagnoses are built on (instruction mix, access widths, local memory, fp64, loops and
//! their barriers) with the source lines involved; [`dataflow`] follows registers through
//! straight-line code (loads that feed addresses, inlined accurate math paths). [`ptxas`] reads the assembler's
//! resource report. Nothing here does I/O or runs a tool: the caller supplies the text.

pub mod analysis;
pub mod classify;
pub mod dataflow;
pub mod parse;
pub mod ptxas;

pub use analysis::{analyze, analyze_all, Finding, FunctionReport};
pub use classify::Class;
pub use parse::{parse, Function, Instruction, Listing, SourceLoc};

/// Demangles an Itanium C++ name (`_Z6k_bulkPKfPf` -> `k_bulk(float const*, float*)`);
/// other names come back unchanged.
pub fn demangle(name: &str) -> String {
    if !name.starts_with("_Z") {
        return name.to_string();
    }
    match cpp_demangle::Symbol::new(name) {
        Ok(sym) => sym.to_string(),
        Err(_) => name.to_string(),
    }
}

/// The demangled name without its parameter list, for tables.
pub fn short_name(name: &str) -> String {
    let full = demangle(name);
    match full.find('(') {
        Some(i) if name.starts_with("_Z") => full[..i].to_string(),
        _ => full,
    }
}
