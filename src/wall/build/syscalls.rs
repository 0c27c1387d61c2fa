//! seccomp for a build: a compiler needs files, memory, processes and pipes, and nothing
//! that reaches beyond them. Refused (EPERM): sockets of every family, io_uring, the
//! keyring, device nodes, tracing and memory access to other processes, limits of other
//! processes, mounts, namespaces, leaving the process group (the deadline kills the
//! group), BPF, perf events, and opening files by handle (which skips path checks).
//! Everything else is allowed: nvcc, gcc and binutils use a wide, version-dependent set of
//! calls, and an allow-list derived from one trace would break on the next release.

use super::policy::Policy;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

fn when(conds: Vec<Cond>) -> SeccompRule {
    SeccompRule::new(conds).expect("conditions are well formed")
}

fn arg(index: u8, len: Len, op: Op, value: u64) -> Cond {
    Cond::new(index, len, op, value).expect("argument index is below 6")
}

/// Calls refused whatever their arguments.
const ALWAYS: &[libc::c_long] = &[
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_mknod,
    libc::SYS_mknodat,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_process_madvise,
    libc::SYS_pidfd_getfd,
    libc::SYS_kcmp,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_setsid,
    libc::SYS_setpgid,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_fanotify_init,
];

/// clone flags that make a namespace: refused like unshare.
const NEW_NAMESPACES: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
];

fn denied() -> Rules {
    let mut r: Rules = ALWAYS.iter().map(|&call| (call, Vec::new())).collect();
    // Limits of this process only (pid 0): glibc's getrlimit and setrlimit pass 0.
    r.insert(libc::SYS_prlimit64, vec![when(vec![arg(0, Len::Dword, Op::Ne, 0)])]);
    r.insert(
        libc::SYS_clone,
        NEW_NAMESPACES
            .iter()
            .map(|&flag| when(vec![arg(0, Len::Qword, Op::MaskedEq(flag as u64), flag as u64)]))
            .collect(),
    );
    r
}

fn compile(rules: Rules, action: SeccompAction) -> Result<BpfProgram, seccompiler::BackendError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    SeccompFilter::new(rules, SeccompAction::Allow, action, arch)?.try_into()
}

/// Installs the filters on this (single-threaded) process; its children inherit them.
pub(super) fn apply(_policy: &Policy) -> Result<String, String> {
    let result = (|| -> Result<(), Box<dyn std::error::Error>> {
        let deny = compile(denied(), SeccompAction::Errno(libc::EPERM as u32))?;
        // clone3 passes its flags in memory a filter cannot read: ENOSYS makes the C
        // library fall back to clone, whose flags the filter checks.
        let clone3 =
            compile(BTreeMap::from([(libc::SYS_clone3, Vec::new())]), SeccompAction::Errno(libc::ENOSYS as u32))?;
        for prog in [&clone3, &deny] {
            seccompiler::apply_filter(prog)?;
        }
        Ok(())
    })();
    result.map_err(|e| format!("could not be applied: {e}"))?;
    Ok("no sockets, io_uring, keyring, device nodes, tracing, mounts, namespaces, new sessions or process groups, BPF or perf events".into())
}
