//! Landlock for a build: read the policy's folders and files, run programs only from the
//! toolkit's and the host compiler's folders, write only the scratch folder; no TCP, no
//! abstract Unix sockets or signals outside the build.

use super::policy::Policy;
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use std::path::{Path, PathBuf};

/// The newest ABI this code was written and tested against.
const ABI_TESTED: ABI = ABI::V6;

/// Device files: (path, written too).
const DEVICES: &[(&str, bool)] =
    &[("/dev/null", true), ("/dev/zero", false), ("/dev/urandom", false), ("/dev/random", false)];

/// NVIDIA's libraries, by file-name prefix: what a build reads only when named to it (a
/// trusted build's `baseline_libs`), never through a library folder. The CUDA runtime is
/// not among them: every kernel links it, by a rule of its own.
const VENDOR_PREFIXES: &[&str] = &[
    "libcuda.",
    "libcublas",
    "libcufft",
    "libcurand",
    "libcusparse",
    "libcusolver",
    "libcudnn",
    "libcutensor",
    "libcudss",
    "libcufile",
    "libnccl",
    "libnvblas",
    "libnvjpeg",
    "libnpp",
    "libnvrtc",
    "libnvJitLink",
    "libcupti",
    "libnvidia-",
    "libnvperf",
];

/// Whether `name` (a file or folder in a library folder) is one of NVIDIA's libraries or
/// a folder of them.
pub fn is_vendor_library(name: &str) -> bool {
    VENDOR_PREFIXES.iter().any(|p| name.starts_with(p)) || name == "nvidia" || name.starts_with("cuda")
}

fn rule(path: &Path, access: BitFlags<AccessFs>) -> Option<PathBeneath<PathFd>> {
    let fd = PathFd::new(path).ok()?;
    // A rule on a file may only carry file rights.
    let access = if path.is_dir() { access } else { access & AccessFs::from_file(ABI_TESTED) };
    Some(PathBeneath::new(fd, access))
}

/// A library folder as rules: the folder itself when it holds none of NVIDIA's libraries,
/// else each entry but those (the folder can then not be listed, which no linker needs).
fn library_rules(dir: &Path, access: BitFlags<AccessFs>) -> Vec<PathBeneath<PathFd>> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let entries: Vec<(String, PathBuf, bool)> = entries
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path(), e.file_type().is_ok_and(|t| t.is_dir())))
        .collect();
    if !entries.iter().any(|(n, ..)| is_vendor_library(n)) {
        return rule(dir, access).into_iter().collect();
    }
    // A thousand entries or so: their types come from the listing, not a stat each. A
    // symlink gets file rights only, valid whatever it points to.
    entries
        .iter()
        .filter(|(n, ..)| !is_vendor_library(n))
        .filter_map(|(_, p, is_dir)| {
            let access = if *is_dir { access } else { access & AccessFs::from_file(ABI_TESTED) };
            Some(PathBeneath::new(PathFd::new(p).ok()?, access))
        })
        .collect()
}

/// Applies the rules; Ok(what holds) or Err(why not).
pub(super) fn apply(policy: &Policy) -> Result<String, String> {
    let status = restrict(policy).map_err(|e| format!("could not be applied: {e}"))?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi as i32,
        LandlockStatus::NotEnabled => {
            return Err("supported by the kernel but not enabled (boot with lsm=...,landlock)".into())
        }
        LandlockStatus::NotImplemented => return Err("not built into this kernel (needs Linux 5.13+)".into()),
    };
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(format!("ABI {abi}, fully enforced")),
        RulesetStatus::PartiallyEnforced => Ok(format!(
            "ABI {abi}, partially enforced (files hold; TCP rules need ABI 4, signal and socket scopes ABI 6)"
        )),
        RulesetStatus::NotEnforced => Err(format!("ABI {abi}: not enforced")),
    }
}

fn restrict(policy: &Policy) -> Result<RestrictionStatus, landlock::RulesetError> {
    let abi = ABI_TESTED;
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let run = read | AccessFs::Execute;
    // Everything inside the scratch folder but running programs from it and making
    // device nodes.
    let scratch = AccessFs::from_all(abi) & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock);
    let mut created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))?
        .handle_access(AccessNet::from_all(abi))?
        .scope(Scope::from_all(abi))?
        .create()?;
    let mut rules: Vec<PathBeneath<PathFd>> = Vec::new();
    rules.extend(policy.read.iter().filter_map(|p| rule(p, read)));
    rules.extend(policy.run.iter().filter_map(|p| rule(p, run)));
    for dir in &policy.libraries {
        rules.extend(library_rules(dir, read));
    }
    for (dev, write) in DEVICES {
        let access = if *write { AccessFs::from_file(abi) & !AccessFs::Execute } else { AccessFs::ReadFile.into() };
        rules.extend(rule(Path::new(dev), access));
    }
    rules.extend(rule(&policy.scratch, scratch));
    for r in rules {
        created = created.add_rule(r)?;
    }
    created.restrict_self()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_libraries_are_told_from_the_system_s() {
        for vendor in
            ["libcublas.so.13", "libcublasLt.so.13", "libcuda.so.1", "libnvidia-ml.so.1", "libcudnn.so.9", "nvidia"]
        {
            assert!(is_vendor_library(vendor), "{vendor}");
        }
        // The runtime is no vendor library: every kernel links it.
        for system in ["libc.so.6", "libicudata.so.72", "libcurl.so.4", "libstdc++.so.6", "crti.o", "libcudart.so.13"] {
            assert!(!is_vendor_library(system), "{system}");
        }
    }
}
