//! The environment out of a candidate's sight. The orchestrator already hands workers a
//! scrubbed environment, but a hosting tool adds its own (the injection paths that give
//! compute-sanitizer away), and the driver has read what it needs by the time the GPU is
//! open. `scrub_environment()` then empties `environ` and overwrites, in place, the strings
//! the kernel put on the stack at exec (the block /proc/self/stat calls env_start..env_end,
//! noted before the sandbox since /proc/self/stat's neighbours are closed after it), so
//! neither getenv, nor /proc/self/environ (closed by Landlock anyway), nor a scan of the
//! stack finds them.
//!
//! What it cannot hide: copies others made before it ran (ld.so keeps LD_LIBRARY_PATH's
//! folders and LD_PRELOAD's names, a tool's injected library keeps its settings), strings
//! added later with setenv (on the heap; nothing in nightshift sets one), and above all
//! the injected library itself, which is a loaded object like any other
//! (dl_iterate_phdr lists it, whatever /proc says). Sanitizer runs can be told apart; see
//! docs/threat-model.md for what backs them up.

use super::Layer;
use std::sync::OnceLock;

/// [env_start, env_end) of this process, as the kernel gave it at exec.
static BLOCK: OnceLock<Option<(usize, usize)>> = OnceLock::new();

/// The environment after the scrub: an empty array, not null (C code walks `environ`
/// without checking it). Writable memory, though nothing writes to it: glibc's setenv
/// copies an array it did not allocate, and unsetenv finds nothing to move.
static mut EMPTY_ENVIRON: [*mut libc::c_char; 1] = [std::ptr::null_mut()];

/// The most a kernel's environment block may hold (ARG_MAX is a quarter of the stack
/// limit; anything larger is a misread, and nothing is overwritten).
const MAX_BLOCK: usize = 32 << 20;

/// Reads env_start and env_end (fields 50 and 51 of /proc/self/stat, Linux 3.5+).
fn read_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the
    // last ')', at field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let start: usize = fields.get(50 - 3)?.parse().ok()?;
    let end: usize = fields.get(51 - 3)?.parse().ok()?;
    (start > 0 && end > start && end - start <= MAX_BLOCK).then_some((start, end))
}

/// Notes where the environment block lies, while /proc/self/stat is still readable.
pub(super) fn remember_block() {
    let _ = BLOCK.get_or_init(read_block);
}

/// Empties the environment and overwrites its original strings (see the module's
/// comment). Call after the GPU is open and before any untrusted library is loaded.
pub fn scrub_environment() -> Layer {
    let block = *BLOCK.get_or_init(read_block);
    let mut count = 0usize;
    // SAFETY: `environ` is read once and replaced with an empty array, which every reader
    // (getenv, Rust's env, setenv, C code walking it) takes for an empty environment; the
    // old array is left alone, so a driver thread inside getenv at this moment reads valid
    // pointers (to zeros, below).
    unsafe {
        let env = libc::environ;
        if !env.is_null() {
            while !(*env.add(count)).is_null() {
                count += 1;
            }
        }
        libc::environ = std::ptr::addr_of_mut!(EMPTY_ENVIRON) as *mut *mut libc::c_char;
    }
    let Some((start, end)) = block else {
        return Layer::off(
            "environment",
            format!("emptied ({count} variables), but the kernel's copy of its strings could not be located (/proc/self/stat), so it stays in memory"),
        );
    };
    // SAFETY: [start, end) is the environment block the kernel placed on this process's
    // stack at exec: mapped, writable, and read by nothing that breaks on zeros (the
    // `environ` array pointing into it was just dropped). Volatile writes: the compiler
    // may not elide them.
    unsafe {
        let p = start as *mut u8;
        for i in 0..end - start {
            std::ptr::write_volatile(p.add(i), 0);
        }
    }
    Layer::on(
        "environment",
        format!(
            "emptied ({count} variables) and its {} bytes overwritten in place; still visible: the tool's injected library among the loaded objects, copies ld.so and the tool made at start",
            end - start
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_of_this_process_is_found_and_holds_its_environment() {
        let (start, end) = read_block().expect("/proc/self/stat names the environment block");
        assert!(end > start);
        // The first variable the process was started with sits at env_start.
        let first = std::fs::read("/proc/self/environ").unwrap();
        let first = first.split(|b| *b == 0).next().unwrap_or_default().to_vec();
        // SAFETY: the block is this process's own, mapped and readable.
        let got = unsafe { std::slice::from_raw_parts(start as *const u8, first.len()) };
        assert_eq!(got, &first[..]);
    }
}
