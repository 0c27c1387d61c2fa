//! Reading compiled CUDA code: ptxas resource reports and SASS disassembly.
pub mod ptxas;

/// Demangles an Itanium C++ name (`_Z6k_bulkPKfPf` -> `k_bulk(float const*, float*)`);
/// other names come back unchanged.
pub fn demangle(name: &str) -> String {
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
