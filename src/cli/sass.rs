//! `nightshift sass`: a cubin, binary or SASS listing read into the per-function analysis.

use super::{fail, print_json, EXIT_ENV, EXIT_PASSED, EXIT_USAGE};
use std::path::Path;
use std::process::ExitCode;

/// SASS text of `file`: itself when it is text, else disassembled (with line info when
/// nvdisasm can provide it).
pub(crate) fn read_sass(file: &Path) -> Result<String, ExitCode> {
    let bytes = std::fs::read(file).map_err(|e| fail(EXIT_USAGE, &format!("{}: {e}", file.display())))?;
    let binary = bytes.starts_with(b"\x7fELF") || bytes.iter().take(4096).any(|b| *b == 0);
    if !binary {
        return Ok(String::from_utf8_lossy(&bytes).into_owned());
    }
    let (cuobjdump, nvdisasm) = match crate::toolkit::toolchain::Toolchain::find() {
        Ok(tc) => (tc.cuobjdump.clone(), tc.nvdisasm.clone()),
        Err(_) => (
            crate::toolkit::toolchain::find_profiler("cuobjdump"),
            crate::toolkit::toolchain::find_profiler("nvdisasm"),
        ),
    };
    let Some(cuobjdump) = cuobjdump else {
        return Err(fail(EXIT_ENV, &format!("{} is a binary and cuobjdump was not found: install the CUDA toolkit or the wheel nvidia-cuda-cuobjdump==13.2.86, or pass SASS text", file.display())));
    };
    let d = crate::toolkit::disasm::disassemble(&cuobjdump, nvdisasm.as_deref(), file)
        .map_err(|e| fail(EXIT_USAGE, &e.to_string()))?;
    for n in &d.notes {
        eprintln!("note: {n}");
    }
    Ok(d.lines.unwrap_or(d.sass))
}

pub fn run(file: &Path, function: Option<&str>, json: bool) -> ExitCode {
    let text = match read_sass(file) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let listing = sass::parse(&text);
    let functions: Vec<&sass::Function> = listing
        .functions
        .iter()
        .filter(|f| function.is_none_or(|n| f.name == n || f.demangled == n || sass::short_name(&f.name) == n))
        .collect();
    if functions.is_empty() {
        let known: Vec<String> = listing.functions.iter().map(|f| sass::short_name(&f.name)).collect();
        return fail(
            EXIT_USAGE,
            &match function {
                Some(n) => format!("no function `{n}` in {} (functions: {})", file.display(), known.join(", ")),
                None => format!("no SASS functions in {}", file.display()),
            },
        );
    }
    let reports: Vec<sass::FunctionReport> = functions.into_iter().map(sass::analyze).collect();
    if json {
        print_json(&serde_json::json!({ "functions": reports }));
    } else {
        print!("{}", sass::analysis::table(&reports));
    }
    ExitCode::from(EXIT_PASSED)
}
