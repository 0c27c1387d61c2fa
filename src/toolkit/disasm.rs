//! Running cuobjdump and nvdisasm on compiled code: SASS text for any binary (cubin,
//! shared library, object, executable), plus nvdisasm's line-annotated SASS when the
//! code carries line info. The text goes to the pure `sass` crate.

use crate::toolkit::process;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Default)]
pub struct Disassembly {
    /// `cuobjdump -sass` output.
    pub sass: String,
    /// `nvdisasm -c -gi` output of every embedded cubin (source lines when built with
    /// `-lineinfo`), when nvdisasm is available.
    pub lines: Option<String>,
    pub notes: Vec<String>,
}

/// Whether `bytes` is a CUDA ELF (a cubin): e_machine EM_CUDA (190).
pub fn is_cubin(bytes: &[u8]) -> bool {
    bytes.len() > 20 && bytes.starts_with(b"\x7fELF") && u16::from_le_bytes([bytes[18], bytes[19]]) == 190
}

fn run(tool: &Path, args: &[&str], file: &Path, cwd: Option<&Path>) -> Result<String, String> {
    let mut cmd = Command::new(tool);
    cmd.args(args).arg(file);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let out = process::run_captured(&mut cmd, TIMEOUT).map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    if !out.success() {
        return Err(format!(
            "{} {} failed ({}): {}",
            tool.display(),
            args.join(" "),
            out.describe_end(TIMEOUT),
            out.stderr.trim()
        ));
    }
    Ok(out.stdout)
}

pub fn disassemble(cuobjdump: &Path, nvdisasm: Option<&Path>, file: &Path) -> Result<Disassembly, String> {
    let file = file.canonicalize().map_err(|e| format!("{}: {e}", file.display()))?;
    let bytes = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut d = Disassembly { sass: run(cuobjdump, &["-sass"], &file, None)?, ..Default::default() };
    let Some(nvdisasm) = nvdisasm else {
        d.notes.push("nvdisasm not found: no source lines".into());
        return Ok(d);
    };
    if is_cubin(&bytes) {
        match run(nvdisasm, &["-c", "-gi"], &file, None) {
            Ok(t) => d.lines = Some(t),
            Err(e) => d.notes.push(e),
        }
        return Ok(d);
    }
    let dir = tempfile::tempdir().map_err(|e| format!("cannot create a temporary folder: {e}"))?;
    if let Err(e) = run(cuobjdump, &["-xelf", "all"], &file, Some(dir.path())) {
        d.notes.push(format!("cannot extract cubins: {e}"));
        return Ok(d);
    }
    let mut cubins: Vec<_> = std::fs::read_dir(dir.path())
        .map(|r| r.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "cubin")).collect())
        .unwrap_or_default();
    cubins.sort();
    let mut text = String::new();
    for c in &cubins {
        match run(nvdisasm, &["-c", "-gi"], c, None) {
            Ok(t) => text.push_str(&t),
            Err(e) => d.notes.push(e),
        }
    }
    if !text.is_empty() {
        d.lines = Some(text);
    }
    Ok(d)
}
