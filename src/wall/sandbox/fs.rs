//! Landlock: what a worker may read and write, named file by file where a forbidden
//! library could hide, folder by folder where none can; no TCP; no signals to, and no
//! abstract-socket connections into, processes outside the sandbox.
//!
//! - *Libraries*, per file (`libraries`): its kernel libraries and their closure, the
//!   executable's, the driver's, glibc's modules, the vendor libraries the policy allows,
//!   under a tool the tool's injection folders. Folders like /usr/lib/x86_64-linux-gnu,
//!   /usr/local/cuda/lib64 or the wheel's nvidia/cu13/lib are never granted whole.
//! - *System folders* where no library lives, whole and read-only: /etc (less its
//!   secrets), /usr/share, /usr/lib/locale, gconv.
//! - */proc* as far as the traces show the driver and the tools read it: cpuinfo,
//!   meminfo, devices, the driver's folder, two /proc/sys/vm settings; of its own entry
//!   status, stat, cmdline, cgroup, cpuset, mounts and mountinfo, and maps, which the
//!   driver reads at cuInit to place its unified address range (every mode's trace shows
//!   it, after the sandbox). Not environ, mem, auxv, smaps, pagemap, fd or any other
//!   process. Its task folder is writable, not readable: the driver names its threads
//!   through /proc/self/task/TID/comm.
//! - */sys* folders the driver and ncu read (devices, bus, class, the nvidia modules,
//!   kernel/mm, cgroups); not debugfs, tracing, security, firmware.
//! - *Devices*: /dev/nvidia*, /dev/nvidia-caps/*, /dev/null, zero, full, urandom.
//! - *Writes*: the scratch folder, and the task folder above. Nothing else, hosted or not:
//!   the tools' traces write only there (their TMPDIR is the scratch folder).
//!
//! Rules on /proc entries hold the inode they were made on; the descriptors they were
//! made from are kept open for the process's life so those inodes (and dentries) stay the
//! ones path lookups find.

use super::libraries::{self, Search};
use super::{Layer, Policy};
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath, RestrictSelfAttr,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use std::collections::BTreeSet;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The newest ABI this code asks for, best effort: ABI 8 adds all-threads enforcement
/// (threads a hosting tool started before the sandbox), ABI 9 pathname Unix socket
/// connections. Tested on ABI 7 (Linux 6.18), where those two are silently absent (and
/// said so in the layer's report).
const ABI_WANTED: ABI = ABI::V9;

/// Read-only system folders that hold no library a worker could load.
const SYSTEM_READ: &[&str] = &["/usr/share", "/usr/lib/locale"];

/// Entries of /etc never granted: credentials and keys.
const ETC_SECRETS: &[&str] = &[
    "shadow",
    "gshadow",
    "shadow-",
    "gshadow-",
    "ssh",
    "ssl",
    "pki",
    "sudoers",
    "sudoers.d",
    "security",
    "krb5.keytab",
    "credstore",
    "credstore.encrypted",
    "docker",
    "containerd",
    "wireguard",
    "NetworkManager",
    "netplan",
    "cni",
];

/// /proc files outside the process's own entry that the driver and the tools read.
const PROC_FILES: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/devices",
    "/proc/sys/vm/mmap_min_addr",
    "/proc/sys/vm/overcommit_memory",
];

/// Files of its own /proc entry it may read (see the module's comment for maps).
const OWN_PROC_FILES: &[&str] =
    &["status", "stat", "statm", "cmdline", "cgroup", "cpuset", "mounts", "mountinfo", "maps"];

/// /sys folders the driver and ncu read (topology, NUMA, PCI, hugepages, cgroup limits).
const SYS_READ: &[&str] = &["/sys/devices", "/sys/bus", "/sys/class", "/sys/kernel/mm", "/sys/fs/cgroup"];

/// What Landlock is asked to allow.
#[derive(Debug, Default)]
pub(super) struct Plan {
    /// Files it may read (libraries, single /proc files).
    pub(super) read_files: BTreeSet<PathBuf>,
    /// Folders it may read whole.
    pub(super) read_dirs: BTreeSet<PathBuf>,
    /// GPU device nodes: read, write, ioctl.
    pub(super) gpu_devices: BTreeSet<PathBuf>,
    /// /dev/null and its kind: read, write, truncate.
    pub(super) plain_devices: BTreeSet<PathBuf>,
    /// Write-only folders (its task folder in /proc).
    pub(super) write_only: BTreeSet<PathBuf>,
    pub(super) scratch: PathBuf,
    /// How many library files, for the report.
    pub(super) libraries: usize,
}

/// Every /etc entry but the secret ones.
fn etc_entries() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/etc") {
        for e in dir.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if !ETC_SECRETS.contains(&name.as_ref()) && !name.ends_with(".key") {
                out.push(e.path());
            }
        }
    }
    out
}

/// The GPU's device nodes, and the plain ones every program may open.
fn device_nodes() -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut gpu = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/dev") {
        for e in dir.flatten() {
            if e.file_name().to_string_lossy().starts_with("nvidia") {
                gpu.push(e.path());
            }
        }
    }
    let plain = ["/dev/null", "/dev/zero", "/dev/full", "/dev/urandom"]
        .map(PathBuf::from)
        .into_iter()
        .filter(|p| p.exists())
        .collect();
    (gpu, plain)
}

/// This process's folder in /proc, by the name /proc itself gives it: in a PID namespace
/// whose /proc could not be mounted afresh, the host's number, not `getpid()`'s.
fn own_proc_entry() -> PathBuf {
    match std::fs::read_link("/proc/self") {
        Ok(name) => Path::new("/proc").join(name),
        Err(_) => PathBuf::from(format!("/proc/{}", std::process::id())),
    }
}

/// The executable, canonical.
fn executable() -> Option<PathBuf> {
    std::env::current_exe().ok().and_then(|p| p.canonicalize().ok())
}

/// The folders of a hosting tool's injected libraries: LD_PRELOAD, CUDA_INJECTION64_PATH
/// (loaded by the driver at cuInit, after the sandbox), and objects already loaded from
/// outside the system's and the driver's folders.
fn tool_objects(search: &Search, driver: &[PathBuf], exe: Option<&Path>) -> Vec<PathBuf> {
    let mut objects: Vec<PathBuf> = Vec::new();
    for var in ["LD_PRELOAD", "CUDA_INJECTION64_PATH"] {
        if let Some(v) = std::env::var_os(var) {
            objects.extend(v.to_string_lossy().split([':', ' ']).filter(|s| s.starts_with('/')).map(PathBuf::from));
        }
    }
    let system: BTreeSet<PathBuf> = search
        .defaults
        .iter()
        .chain(driver.iter().filter_map(|d| d.parent().map(Path::to_path_buf)).collect::<Vec<_>>().iter())
        .filter_map(|d| d.canonicalize().ok())
        .collect();
    for o in libraries::loaded_objects() {
        let Some(dir) = o.canonicalize().ok().and_then(|c| c.parent().map(Path::to_path_buf)) else { continue };
        if !system.contains(&dir) && exe.and_then(Path::parent) != Some(dir.as_path()) {
            objects.push(o);
        }
    }
    objects
}

/// What a policy lets the worker touch.
pub(super) fn plan(policy: &Policy) -> Plan {
    let search = Search::of_this_process();
    let mut p = Plan { scratch: policy.scratch.clone(), ..Plan::default() };
    let exe = executable();
    let mut libs: BTreeSet<PathBuf> = BTreeSet::new();
    let mut roots: Vec<PathBuf> = policy.libraries.iter().filter(|l| l.is_file()).cloned().collect();
    roots.extend(exe.clone());
    let driver = libraries::driver_files(&search);
    roots.extend(driver.iter().cloned());
    for name in &policy.vendor_libraries {
        roots.extend(libraries::vendor_files(name, &policy.libraries, &search));
    }
    if policy.hosted {
        for object in tool_objects(&search, &driver, exe.as_deref()) {
            match object.canonicalize().ok().and_then(|c| c.parent().map(Path::to_path_buf)) {
                // A tool's own folder (ncu's target folder, compute-sanitizer's) holds its
                // injection and what it loads later; one that also holds a vendor library
                // is granted file by file instead.
                Some(dir) if !libraries::holds_vendor_library(&dir) => {
                    p.read_dirs.insert(dir);
                }
                _ => roots.push(object),
            }
        }
    }
    libraries::closure(&roots, &search, &mut libs);
    if let Some(libc_dir) = libs
        .iter()
        .find(|f| f.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libc.so")))
        .and_then(|f| f.parent())
    {
        let (nss, gconv) = libraries::glibc_modules(libc_dir);
        libraries::closure(&nss, &search, &mut libs);
        p.read_dirs.extend(gconv);
    }
    p.libraries = libs.len();
    p.read_files.extend(libs);
    p.read_dirs.extend(SYSTEM_READ.iter().map(PathBuf::from).filter(|d| d.is_dir()));
    p.read_dirs.extend(SYS_READ.iter().map(PathBuf::from).filter(|d| d.is_dir()));
    if let Ok(modules) = std::fs::read_dir("/sys/module") {
        p.read_dirs.extend(
            modules.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("nvidia")).map(|e| e.path()),
        );
    }
    if Path::new("/proc/driver/nvidia").is_dir() {
        p.read_dirs.insert(PathBuf::from("/proc/driver/nvidia"));
    }
    for e in etc_entries() {
        if e.is_dir() {
            p.read_dirs.insert(e);
        } else {
            p.read_files.insert(e);
        }
    }
    p.read_files.extend(PROC_FILES.iter().map(PathBuf::from).filter(|f| f.exists()));
    let own = own_proc_entry();
    // An experiment's switch (it only ever closes more): whether the driver works with
    // /proc/self/maps closed.
    let hide_maps = std::env::var_os("NIGHTSHIFT_SANDBOX_HIDE_MAPS").is_some_and(|v| v == "1");
    p.read_files.extend(OWN_PROC_FILES.iter().filter(|f| !(hide_maps && **f == "maps")).map(|f| own.join(f)));
    p.write_only.insert(own.join("task"));
    for extra in &policy.read {
        if extra.is_dir() {
            p.read_dirs.insert(extra.clone());
        } else {
            p.read_files.insert(extra.clone());
        }
    }
    let (gpu, plain) = device_nodes();
    p.gpu_devices.extend(gpu);
    p.plain_devices.extend(plain);
    p
}

/// Descriptors of /proc entries that rules were made on, held for the process's life.
static HELD: Mutex<Vec<OwnedFd>> = Mutex::new(Vec::new());

fn open_path(path: &Path) -> Option<OwnedFd> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: plain syscall on a NUL-terminated path; the descriptor is owned below.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    // SAFETY: a fresh descriptor nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

fn is_dir(fd: &OwnedFd) -> bool {
    // SAFETY: fstat on a descriptor we own, into a zeroed struct.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(std::os::fd::AsRawFd::as_raw_fd(fd), &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR
    }
}

pub(super) fn apply(policy: &Policy) -> Layer {
    let plan = plan(policy);
    match restrict(&plan) {
        Ok(status) => describe(status, policy, &plan),
        Err(e) => Layer::off("landlock", format!("could not be applied: {e}")),
    }
}

fn restrict(plan: &Plan) -> Result<RestrictionStatus, landlock::RulesetError> {
    let abi = ABI_WANTED;
    let all = AccessFs::from_all(abi);
    let read_tree: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::ReadDir;
    let gpu: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev;
    let plain: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    let write_only: BitFlags<AccessFs> = AccessFs::WriteFile | AccessFs::Truncate;
    let mut created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .handle_access(AccessNet::from_all(abi))?
        .scope(Scope::from_all(abi))?
        .create()?
        .all_threads(true)?;
    let proc_root = Path::new("/proc");
    let mut add = |path: &Path, access: BitFlags<AccessFs>| -> Result<(), landlock::RulesetError> {
        let Some(fd) = open_path(path) else { return Ok(()) };
        // A rule on a file may only carry file rights.
        let access = if is_dir(&fd) { access } else { access & AccessFs::from_file(abi) };
        (&mut created).add_rule(PathBeneath::new(fd.as_fd(), access))?;
        if path.starts_with(proc_root) {
            if let Ok(mut held) = HELD.lock() {
                held.push(fd);
            }
        }
        Ok(())
    };
    for f in &plan.read_files {
        add(f, AccessFs::ReadFile.into())?;
    }
    for d in &plan.read_dirs {
        add(d, read_tree)?;
    }
    for d in &plan.gpu_devices {
        add(d, gpu)?;
    }
    for d in &plan.plain_devices {
        add(d, plain)?;
    }
    for d in &plan.write_only {
        add(d, write_only)?;
    }
    add(&plan.scratch, all)?;
    created.restrict_self()
}

fn describe(status: RestrictionStatus, policy: &Policy, plan: &Plan) -> Layer {
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi as i32,
        LandlockStatus::NotEnabled => {
            return Layer::off("landlock", "supported by the kernel but not enabled (boot with lsm=...,landlock)")
        }
        LandlockStatus::NotImplemented => {
            return Layer::off("landlock", "not built into this kernel (needs Linux 5.13+)")
        }
    };
    let vendor = if policy.vendor_libraries.is_empty() {
        String::new()
    } else {
        format!(" (with the vendor libraries {})", policy.vendor_libraries.join(", "))
    };
    let what = format!(
        "reads {} library files by name{vendor}, system folders without libraries, the driver's /proc and /sys entries (maps included: the driver reads it); writes only the scratch folder and its threads' names; no TCP, no signals or abstract-socket connections out",
        plan.libraries
    );
    let mut missing = Vec::new();
    if !status.all_threads {
        missing.push("threads started before the sandbox (a hosting tool's) stay outside it: all-threads enforcement needs ABI 8");
    }
    if abi < 9 {
        missing
            .push("pathname Unix sockets are seccomp's alone (connect is refused): Landlock rules for them need ABI 9");
    }
    if abi < 6 {
        missing.push("no signal or abstract-socket scoping before ABI 6");
    }
    let notes = if missing.is_empty() { String::new() } else { format!("; {}", missing.join("; ")) };
    match status.ruleset {
        RulesetStatus::FullyEnforced => Layer::on("landlock", format!("ABI {abi}, fully enforced: {what}{notes}")),
        // Partially: the rights this code asks for beyond the kernel's ABI (said above).
        RulesetStatus::PartiallyEnforced => {
            Layer::on("landlock", format!("ABI {abi}, enforced as far as it goes: {what}{notes}"))
        }
        RulesetStatus::NotEnforced => Layer::off("landlock", format!("ABI {abi}: not enforced")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidate_plan_names_files_not_library_folders() {
        let scratch = tempfile::tempdir().unwrap();
        let policy = Policy::strict(scratch.path().to_path_buf(), &[], 10);
        let p = plan(&policy);
        let exe = executable().unwrap();
        assert!(p.read_files.contains(&exe), "the executable itself");
        for dir in &p.read_dirs {
            assert!(!libraries::holds_vendor_library(dir), "{} holds a vendor library", dir.display());
            for lib_dir in libraries::default_dirs() {
                assert_ne!(dir, &lib_dir, "a library folder granted whole");
            }
        }
        assert!(p.read_files.iter().all(|f| !libraries::is_vendor_library(&f.file_name().unwrap().to_string_lossy())));
        let own = own_proc_entry();
        for secret in ["environ", "mem", "auxv", "smaps"] {
            assert!(!p.read_files.contains(&own.join(secret)), "{secret}");
        }
        assert!(!p.read_dirs.iter().any(|d| d.starts_with(&own)), "no folder of its own /proc entry is readable");
    }
}
