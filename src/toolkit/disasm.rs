//! Running cuobjdump and nvdisasm on compiled code: SASS text for any binary (cubin,
//! shared library, object, executable), plus nvdisasm's line-annotated SASS when the
//! code carries line info. The text goes to the pure `sass` crate.
//!
//! A build disassembles a candidate's library, an ELF its author shaped: there the tools
//! are started through the build's confinement ([`Tools`]), with their temporary files in
//! the build's scratch folder. `nightshift sass` on the user's own file runs them as they are.

use crate::toolkit::process;
use std::path::{Path, PathBuf};
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

/// Why a binary could not be disassembled.
#[derive(Debug, thiserror::Error)]
pub enum DisasmError {
    /// The file to disassemble cannot be found or read.
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot run {}: {source}", tool.display())]
    Spawn { tool: PathBuf, source: std::io::Error },
    /// The tool ran and failed: how it ended, and its stderr.
    #[error("{} {args} failed ({end}): {stderr}", tool.display())]
    Failed { tool: PathBuf, args: String, end: String, stderr: String },
    #[error("cannot create a temporary folder: {0}")]
    TempDir(#[source] std::io::Error),
}

/// How the tools are started: `start(tool)` gives the command to which the arguments are
/// added; temporary files go into `scratch` (else the system's temporary folder).
pub struct Tools<'a> {
    pub start: &'a dyn Fn(&Path) -> Command,
    pub scratch: Option<&'a Path>,
    pub timeout: Duration,
}

fn run(tools: &Tools, tool: &Path, args: &[&str], file: &Path, cwd: Option<&Path>) -> Result<String, DisasmError> {
    let mut cmd = (tools.start)(tool);
    cmd.args(args).arg(file);
    if let Some(d) = cwd.or(tools.scratch) {
        cmd.current_dir(d);
    }
    let out = process::run_captured(&mut cmd, tools.timeout)
        .map_err(|source| DisasmError::Spawn { tool: tool.to_path_buf(), source })?;
    if !out.success() {
        return Err(DisasmError::Failed {
            tool: tool.to_path_buf(),
            args: args.join(" "),
            end: out.describe_end(tools.timeout),
            stderr: out.stderr.trim().to_string(),
        });
    }
    Ok(out.stdout)
}

/// Disassembles the user's own `file` with the tools run as they are.
pub fn disassemble(cuobjdump: &Path, nvdisasm: Option<&Path>, file: &Path) -> Result<Disassembly, DisasmError> {
    let tools = Tools { start: &|tool: &Path| Command::new(tool), scratch: None, timeout: TIMEOUT };
    disassemble_with(cuobjdump, nvdisasm, file, &tools)
}

/// Disassembles `file` with the tools started through `tools`.
pub fn disassemble_with(
    cuobjdump: &Path,
    nvdisasm: Option<&Path>,
    file: &Path,
    tools: &Tools,
) -> Result<Disassembly, DisasmError> {
    let file = file.canonicalize().map_err(|source| DisasmError::Read { path: file.to_path_buf(), source })?;
    let bytes = std::fs::read(&file).map_err(|source| DisasmError::Read { path: file.clone(), source })?;
    let mut d = Disassembly { sass: run(tools, cuobjdump, &["-sass"], &file, None)?, ..Default::default() };
    let Some(nvdisasm) = nvdisasm else {
        d.notes.push("nvdisasm not found: no source lines".into());
        return Ok(d);
    };
    if is_cubin(&bytes) {
        match run(tools, nvdisasm, &["-c", "-gi"], &file, None) {
            Ok(t) => d.lines = Some(t),
            Err(e) => d.notes.push(e.to_string()),
        }
        return Ok(d);
    }
    let dir = match tools.scratch {
        Some(s) => tempfile::Builder::new().prefix(".cubins-").tempdir_in(s),
        None => tempfile::tempdir(),
    }
    .map_err(DisasmError::TempDir)?;
    if let Err(e) = run(tools, cuobjdump, &["-xelf", "all"], &file, Some(dir.path())) {
        d.notes.push(format!("cannot extract cubins: {e}"));
        return Ok(d);
    }
    let mut cubins: Vec<_> = std::fs::read_dir(dir.path())
        .map(|r| r.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "cubin")).collect())
        .unwrap_or_default();
    cubins.sort();
    let mut text = String::new();
    for c in &cubins {
        match run(tools, nvdisasm, &["-c", "-gi"], c, None) {
            Ok(t) => text.push_str(&t),
            Err(e) => d.notes.push(e.to_string()),
        }
    }
    if !text.is_empty() {
        d.lines = Some(text);
    }
    Ok(d)
}
