//! The trampoline: `nightshift confine --policy JSON -- PROGRAM ARGS...`, which every tool
//! of a build goes through. It applies the policy to itself and execs the program, which
//! inherits all of it (Landlock domains, seccomp filters, rlimits, the keyring, the lack of
//! capabilities and no_new_privs all survive exec), and so does everything it starts.
//!
//! Confining a process between fork and exec in the multithreaded orchestrator is unsafe
//! (allocation after fork), hence a process of its own: this one is single-threaded, and
//! does its work before anything untrusted runs.
//!
//! A layer the kernel does not offer is said on stderr (in the build's log, and as a note
//! of the build) and is not fatal: the others still hold, as in the worker's sandbox.

use super::policy::Policy;
use super::{fs, privileges, syscalls};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

/// What every line the trampoline writes starts with.
pub const PREFIX: &str = "nightshift confine:";

/// Exit code of a trampoline that did not start the program.
pub const REFUSED_EXIT: u8 = 125;

/// The trampoline's command line.
#[derive(Debug, Clone)]
pub struct Args {
    /// The policy, as JSON.
    pub policy: String,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

/// `exe confine --policy JSON --`; the caller appends the program and its arguments.
pub fn command_line(exe: &std::path::Path, policy: &Policy) -> std::process::Command {
    let mut c = std::process::Command::new(exe);
    c.arg("confine").arg("--policy").arg(serde_json::to_string(policy).expect("a policy serializes")).arg("--");
    c
}

/// One layer: its name and what holds, or why it does not.
pub type Layer = (&'static str, Result<String, String>);

/// Applies `policy` to this process, layer by layer, in the order that lets each one be
/// made: the keyring before seccomp refuses keyctl, Landlock's rules opened before the
/// capabilities go, seccomp last.
pub fn apply(policy: &Policy) -> Vec<Layer> {
    vec![
        ("no_new_privs", privileges::no_new_privs()),
        ("keyring", privileges::fresh_keyring()),
        ("rlimits", privileges::limits(policy)),
        ("landlock", fs::apply(policy)),
        ("capabilities", privileges::drop_capabilities()),
        ("seccomp", syscalls::apply(policy)),
    ]
}

/// Entry point of `nightshift confine`. Must run single-threaded: Landlock binds the
/// calling thread only.
pub fn main(args: &Args) -> ExitCode {
    let policy: Policy = match serde_json::from_str(&args.policy) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{PREFIX} the policy does not parse: {e}");
            return ExitCode::from(REFUSED_EXIT);
        }
    };
    let Some((program, rest)) = args.command.split_first() else {
        eprintln!("{PREFIX} no program to run: give one after --");
        return ExitCode::from(REFUSED_EXIT);
    };
    for (name, layer) in apply(&policy) {
        if let Err(why) = layer {
            eprintln!("{PREFIX} {name} OFF: {why}");
        }
    }
    let err = program_command(&policy, program).args(rest).exec();
    eprintln!("{PREFIX} cannot run {}: {err}", program.to_string_lossy());
    ExitCode::from(REFUSED_EXIT)
}

/// `program` with the policy's environment and nothing else.
pub fn program_command(policy: &Policy, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut c = std::process::Command::new(program);
    c.env_clear().envs(policy.env());
    c
}

/// The trampoline's lines in a tool's stderr, as notes ("landlock OFF: ...").
pub fn notes(stderr: &str) -> Vec<String> {
    stderr.lines().filter_map(|l| l.strip_prefix(PREFIX)).map(|l| format!("build confinement: {}", l.trim())).collect()
}
