//! The hosted arrangement: `nightshift hosted --report FILE [--keep DIR]... -- TOOL ARGS...`,
//! the trampoline every run under a hosting tool goes through (ncu for profiles,
//! compute-sanitizer for `--sanitize`).
//!
//! Such a tool starts the worker as its child and injects code into it that listens for
//! the tool's front end on an abstract Unix socket, so the worker's hosted policy leaves
//! a little more open than a worker's own (see `syscalls`). The trampoline makes what
//! stays open reach nothing of the host's, by running the tool, and everything it
//! starts, in namespaces of its own:
//! - *mount*: propagation made private first (nothing mounted here shows outside), then
//!   fresh tmpfs on /tmp, /dev/shm, /var/tmp, the user's home and /run (`hosted_mounts`).
//!   What the tool and the worker write there vanishes with the run; the host's /tmp
//!   (other runs' files, other users' sockets), the home's keys and sockets, the runtime
//!   sockets (docker.sock, D-Bus) are out of sight. What the run needs under them is bound
//!   back in at its own path: the folders the orchestrator hands over and reads back and
//!   the kernel libraries (`--keep`), the executable, the tool, the libraries' folders,
//!   the toolkit, /run/nvidia-persistenced.
//! - *network*: only a loopback of its own, brought up; nothing leaves (the host's
//!   127.0.0.1 is another interface), and the abstract Unix socket names are the
//!   namespace's own (the tool's front end reaches its injected code through one).
//! - *PID*: the tool runs below a small init of ours; nothing inside can see or signal a
//!   process outside, and when the trampoline dies (the orchestrator kills its process
//!   group at the deadline) the init dies with it, and the kernel ends everything else
//!   inside, including processes that left the group. The tool's exit status comes back
//!   as the trampoline's own.
//! - *user*: what lets an unprivileged user make the others. Run as root, the trampoline
//!   makes none: Nsight Compute reads GPU counters only for processes with CAP_SYS_ADMIN
//!   in the initial user namespace when the driver restricts profiling to admins
//!   (NVreg_RestrictProfilingToAdminUsers, the default), and a user namespace would take
//!   that away. Root needs no user namespace for the other three.
//!
//! The arrangement is written to `--report` before the tool starts: which layers hold and
//! why not. Where mount, network or PID namespace cannot be made (a kernel that forbids
//! unprivileged user namespaces), the tool is not started unless `--allow-unconfined`
//! says so; the orchestrator turns that into an error naming the cause and the waiver.
//!
//! This file is the trampoline's entry and its report; the namespaces are entered in
//! `hosted_namespaces` (with the loopback), the mounts made in `hosted_mounts`, and the
//! PID namespace's init runs in `hosted_init`.

use super::hosted_init::{run_below_init, Below};
use super::hosted_mounts::{folders_to_hide, private_mounts, what_to_keep};
use super::hosted_namespaces::{enter_namespaces, loopback_only};
use super::{Layer, SandboxError};
use serde::{Deserialize, Serialize};
use std::ffi::{CString, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const USER: &str = "user namespace";
pub const MOUNT: &str = "mount namespace";
pub const NETWORK: &str = "network namespace";
pub const PID: &str = "pid namespace";

/// The layers that confine; the user namespace is only the means to make them.
pub const CONFINING: [&str; 3] = [MOUNT, NETWORK, PID];

/// What hosting tools and their injected code write: replaced by private tmpfs mounts.
pub const PRIVATE_FOLDERS: [&str; 3] = ["/tmp", "/dev/shm", "/var/tmp"];

/// Exit code of a trampoline that did not start the tool (its report says why).
pub const REFUSED_EXIT: u8 = 125;

/// What the trampoline made, as written to its report before the tool starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arrangement {
    /// User, mount, network and PID namespace, in that order.
    pub layers: Vec<Layer>,
    /// Mount, network and PID namespaces all hold.
    pub confined: bool,
    /// Run as root without a user namespace, on purpose: the tool keeps its capabilities.
    pub kept_root_capabilities: bool,
    /// Whether the tool was started: confined, or allowed to run unconfined.
    pub started: bool,
}

impl Arrangement {
    /// What does not hold, one clause per layer, for errors and notes.
    pub fn shortfall(&self) -> String {
        // Layers that fail for one reason (all four, where no namespace can be made) are
        // named together, the reason once.
        let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
        for l in self.layers.iter().filter(|l| !self.holds(l)) {
            match groups.iter_mut().find(|(_, why)| *why == l.detail) {
                Some((names, _)) => names.push(&l.name),
                None => groups.push((vec![&l.name], &l.detail)),
            }
        }
        groups.iter().map(|(names, why)| format!("{}: {why}", names.join(", "))).collect::<Vec<_>>().join("; ")
    }

    /// Whether a layer holds, or is left out on purpose (the user namespace, as root).
    pub fn holds(&self, layer: &Layer) -> bool {
        layer.active || (layer.name == USER && self.kept_root_capabilities)
    }
}

/// The trampoline's command line.
#[derive(Debug, Clone)]
pub struct Args {
    /// Where the arrangement is written (outside any folder the tool's child may write).
    pub report: PathBuf,
    /// Folders that must stay reachable at their own paths.
    pub keep: Vec<PathBuf>,
    /// Start the tool even where the namespaces cannot be made.
    pub allow_unconfined: bool,
    /// The tool and its arguments.
    pub command: Vec<OsString>,
}

/// `exe hosted --report REPORT --keep K... [--allow-unconfined] --`; the caller appends
/// the tool's command line.
pub fn command_line(exe: &Path, report: &Path, keep: &[PathBuf], allow_unconfined: bool) -> Vec<OsString> {
    let mut line: Vec<OsString> = vec![exe.into(), "hosted".into(), "--report".into(), report.into()];
    for k in keep {
        line.extend(["--keep".into(), k.into()]);
    }
    if allow_unconfined {
        line.push("--allow-unconfined".into());
    }
    line.push("--".into());
    line
}

/// The arrangement a trampoline wrote.
pub fn read_report(path: &Path) -> Result<Arrangement, SandboxError> {
    let text = std::fs::read(path).map_err(|source| SandboxError::File { path: path.to_path_buf(), source })?;
    serde_json::from_slice(&text).map_err(|source| SandboxError::Report { path: path.to_path_buf(), source })
}

/// Entry point of `nightshift hosted`. Must run single-threaded: a process with threads
/// cannot enter a new user namespace.
pub fn main(args: &Args) -> ExitCode {
    let program = match Program::new(&args.command) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("nightshift hosted: {e}");
            return ExitCode::from(2);
        }
    };
    // Opened before anything is mounted: its folder may lie under /tmp.
    let report = match std::fs::File::create(&args.report) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("nightshift hosted: cannot write {}: {e}", args.report.display());
            return ExitCode::from(REFUSED_EXIT);
        }
    };
    let cwd = std::env::current_dir().ok();
    // Decided while the host's folders are still in sight.
    let hidden = folders_to_hide();
    let keep = what_to_keep(&args.keep, args.command.first().map(Path::new), &hidden);
    // A folder to keep that is one of the shared temporary folders would undo them;
    // others that are (or hold) a hidden folder, a task folder that is $HOME, are simply
    // not bound (`what_to_keep`).
    let refused_keep = args.keep.iter().find(|k| {
        let k = k.canonicalize().unwrap_or_else(|_| k.to_path_buf());
        PRIVATE_FOLDERS.iter().any(|p| Path::new(p).canonicalize().is_ok_and(|p| p.starts_with(&k)))
    });
    let entered = enter_namespaces();
    let kept_root_capabilities = entered.kept_root_capabilities;
    let mut layers = vec![entered.user];
    let finish = |layers: Vec<Layer>| Arrangement {
        confined: CONFINING.iter().all(|name| layers.iter().any(|l| l.name == *name && l.active)),
        started: false,
        kept_root_capabilities,
        layers,
    };
    if let Err(why) = entered.unshared {
        layers.extend([MOUNT, NETWORK, PID].map(|name| Layer::off(name, why.clone())));
        let mut arrangement = finish(layers);
        arrangement.started = args.allow_unconfined;
        write_report(&report, &arrangement);
        if !arrangement.started {
            return ExitCode::from(REFUSED_EXIT);
        }
        program.exec();
    }
    let mounts = match refused_keep {
        Some(k) => hosted_mounts_refused(k),
        None => private_mounts(&hidden, &keep, cwd.as_deref()),
    };
    layers.push(mounts.layer);
    layers.push(loopback_only());
    let below = Below { program, report, layers, mounts_private: mounts.private, allow: args.allow_unconfined };
    run_below_init(below, finish)
}

/// A folder to keep that is one the arrangement hides (or holds one): refused, since
/// keeping it would undo the arrangement.
fn hosted_mounts_refused(keep: &Path) -> super::hosted_mounts::Mounts {
    super::hosted_mounts::Mounts {
        layer: Layer::off(MOUNT, format!("{} cannot be kept: it is (or holds) a folder made private", keep.display())),
        private: false,
    }
}

/// A command line ready for execvp, prepared before any fork.
pub(super) struct Program {
    args: Vec<CString>,
}

impl Program {
    fn new(command: &[OsString]) -> Result<Program, SandboxError> {
        if command.is_empty() {
            return Err(SandboxError::NoTool);
        }
        let args = command
            .iter()
            .map(|a| CString::new(a.as_bytes()).map_err(|_| SandboxError::NulArgument(a.to_string_lossy().into())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Program { args })
    }

    /// Replaces this process with the tool; never returns.
    pub(super) fn exec(&self) -> ! {
        let mut argv: Vec<*const libc::c_char> = self.args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        // SAFETY: argv is NUL-terminated and outlives the call. Rust ignores SIGPIPE; the
        // tool gets the default back, as std's Command would give it.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::execvp(argv[0], argv.as_ptr());
        }
        let e = std::io::Error::last_os_error();
        eprintln!("nightshift hosted: cannot run {}: {e}", self.args[0].to_string_lossy());
        // SAFETY: terminates the process.
        unsafe { libc::_exit(127) }
    }
}

pub(super) fn write_report(mut file: &std::fs::File, arrangement: &Arrangement) {
    let text = serde_json::to_vec(arrangement).expect("arrangements serialize");
    if let Err(e) = file.write_all(&text).and_then(|_| file.flush()) {
        eprintln!("nightshift hosted: cannot write the report: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrangement(layers: &[(&str, bool)], kept_root: bool) -> Arrangement {
        let layers: Vec<Layer> = layers
            .iter()
            .map(|(n, on)| if *on { Layer::on(n, "holds") } else { Layer::off(n, "cannot be made (EPERM)") })
            .collect();
        Arrangement {
            confined: CONFINING.iter().all(|c| layers.iter().any(|l| l.name == *c && l.active)),
            layers,
            kept_root_capabilities: kept_root,
            started: false,
        }
    }

    #[test]
    fn the_shortfall_names_what_does_not_hold_but_not_roots_choice() {
        let a = arrangement(&[(USER, false), (MOUNT, true), (NETWORK, true), (PID, true)], true);
        assert!(a.confined);
        assert_eq!(a.shortfall(), "", "root's missing user namespace is a choice, not a shortfall");
        let a = arrangement(&[(USER, false), (MOUNT, false), (NETWORK, false), (PID, false)], false);
        assert!(!a.confined);
        let s = a.shortfall();
        for name in [USER, MOUNT, NETWORK, PID] {
            assert!(s.contains(name), "{s}");
        }
        assert_eq!(s.matches("EPERM").count(), 1, "one reason, said once: {s}");
        let a = arrangement(&[(USER, true), (MOUNT, true), (NETWORK, true), (PID, false)], false);
        assert!(!a.confined, "every confining layer must hold");
        assert!(a.shortfall().starts_with(PID), "{}", a.shortfall());
    }

    #[test]
    fn command_lines_keep_folders_and_pass_the_waiver() {
        let line = command_line(Path::new("/x/nightshift"), Path::new("/r/h.json"), &[PathBuf::from("/k")], true);
        let line: Vec<String> = line.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            line,
            ["/x/nightshift", "hosted", "--report", "/r/h.json", "--keep", "/k", "--allow-unconfined", "--"]
        );
        let line = command_line(Path::new("/x/nightshift"), Path::new("/r/h.json"), &[], false);
        assert!(!line.iter().any(|a| a == "--allow-unconfined"), "the waiver is never implied");
    }
}
