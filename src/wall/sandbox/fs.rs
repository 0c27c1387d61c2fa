//! Landlock: the file system, TCP and scopes.

use super::{Layer, Policy};
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use std::path::{Path, PathBuf};

/// The newest ABI this code was written and tested against.
const ABI_TESTED: ABI = ABI::V6;

/// System folders every CUDA process reads from.
const SYSTEM_READ: &[&str] =
    &["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/opt", "/sys", "/run/nvidia-persistenced"];

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
];

/// Device nodes a CUDA process opens, by name or prefix.
fn device_nodes() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/dev") {
        for e in dir.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("nvidia") || ["null", "zero", "full", "urandom", "random"].contains(&name.as_ref()) {
                out.push(e.path());
            }
        }
    }
    out
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

/// /proc without the other processes: every entry but the numeric ones (our own is
/// granted apart, writable).
fn proc_entries() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let numeric = name.bytes().all(|b| b.is_ascii_digit());
            // `self` and `thread-self` resolve to the pid folder of whoever opens them;
            // what they point to now is us, and the rule holds for that folder.
            if !numeric {
                out.push(e.path());
            }
        }
    }
    out
}

/// This process's folder in /proc, by the name /proc itself gives it: in a PID namespace
/// whose /proc could not be mounted afresh, the host's number, not `getpid()`'s.
fn own_proc_entry() -> PathBuf {
    match std::fs::read_link("/proc/self") {
        Ok(name) => Path::new("/proc").join(name),
        Err(_) => PathBuf::from(format!("/proc/{}", std::process::id())),
    }
}

fn rule(path: &Path, access: BitFlags<AccessFs>) -> Option<PathBeneath<PathFd>> {
    let fd = PathFd::new(path).ok()?;
    // A rule on a file may only carry file rights.
    let access = if path.is_dir() { access } else { access & AccessFs::from_file(ABI_TESTED) };
    Some(PathBeneath::new(fd, access))
}

pub(super) fn apply(policy: &Policy) -> Layer {
    match restrict(policy) {
        Ok(status) => describe(status, policy),
        Err(e) => Layer::off("landlock", format!("could not be applied: {e}")),
    }
}

fn restrict(policy: &Policy) -> Result<RestrictionStatus, landlock::RulesetError> {
    let abi = ABI_TESTED;
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::BestEffort).handle_access(all)?;
    if !policy.hosted {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?.scope(Scope::from_all(abi))?;
    }
    let mut created = ruleset.create()?;
    let mut rules: Vec<PathBeneath<PathFd>> = Vec::new();
    for p in SYSTEM_READ.iter().map(PathBuf::from).chain(policy.read.iter().cloned()) {
        rules.extend(rule(&p, read));
    }
    for p in etc_entries().into_iter().chain(proc_entries()) {
        rules.extend(rule(&p, read));
    }
    for p in device_nodes() {
        rules.extend(rule(&p, all));
    }
    rules.extend(rule(&policy.scratch, all));
    // The driver writes its own /proc entry (thread names, for one): ours alone is writable.
    rules.extend(rule(&own_proc_entry(), all));
    if policy.hosted {
        for p in ["/tmp", "/dev/shm", "/var/tmp"] {
            rules.extend(rule(Path::new(p), all));
        }
    }
    for r in rules {
        created = created.add_rule(r)?;
    }
    created.restrict_self()
}

fn describe(status: RestrictionStatus, policy: &Policy) -> Layer {
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => format!("ABI {}", effective_abi as i32),
        LandlockStatus::NotEnabled => {
            return Layer::off("landlock", "supported by the kernel but not enabled (boot with lsm=...,landlock)")
        }
        LandlockStatus::NotImplemented => {
            return Layer::off("landlock", "not built into this kernel (needs Linux 5.13+)")
        }
    };
    let what = if policy.hosted {
        "writes only to the scratch folder and /tmp, /dev/shm and /var/tmp (hosted by a tool: private ones in the hosted arrangement); reads only system folders and the libraries"
    } else {
        "writes only to the scratch folder and its own /proc entry; reads only system folders, the libraries and toolkits"
    };
    match status.ruleset {
        RulesetStatus::FullyEnforced => Layer::on("landlock", format!("{abi}, fully enforced: {what}; no TCP, no signals out")),
        RulesetStatus::PartiallyEnforced => Layer::on(
            "landlock",
            format!("{abi}, partially enforced (the kernel lacks some rights, e.g. TCP rules need ABI 4, signal scoping ABI 6): {what}"),
        ),
        RulesetStatus::NotEnforced => Layer::off("landlock", format!("{abi}: not enforced")),
    }
}
