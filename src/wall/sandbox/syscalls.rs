//! seccomp: what no candidate needs to do to other processes.

use super::{Layer, Policy, SandboxError};
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

/// Syscalls refused with EPERM: always (empty rule list) or when a rule matches.
fn denied(policy: &Policy) -> Rules {
    let me = std::process::id() as u64;
    let not_me = || vec![when(vec![arg(0, Len::Dword, Op::Ne, me)])];
    let mut r: Rules = BTreeMap::new();
    // Signals go to this process only (raise() and abort() use tgkill on ourselves).
    r.insert(libc::SYS_kill, not_me());
    r.insert(libc::SYS_tgkill, not_me());
    r.insert(libc::SYS_rt_sigqueueinfo, not_me());
    r.insert(libc::SYS_rt_tgsigqueueinfo, not_me());
    for always in [
        libc::SYS_tkill,
        libc::SYS_pidfd_open,
        libc::SYS_pidfd_send_signal,
        libc::SYS_pidfd_getfd,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        // Leaving the process group would escape the deadline's killpg.
        libc::SYS_setsid,
        libc::SYS_setpgid,
        libc::SYS_unshare,
        libc::SYS_setns,
        // No changes to the mount table: under a tool run as root, unmounting the hosted
        // arrangement's private /tmp would bare the host's (Landlock refuses it too).
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
        #[cfg(target_arch = "x86_64")]
        libc::SYS_fork,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_vfork,
    ] {
        r.insert(always, Vec::new());
    }
    // Threads yes, processes no: clone without CLONE_THREAD is a fork.
    r.insert(libc::SYS_clone, vec![when(vec![arg(0, Len::Qword, Op::MaskedEq(libc::CLONE_THREAD as u64), 0)])]);
    if !policy.hosted {
        r.insert(libc::SYS_execve, Vec::new());
        r.insert(libc::SYS_execveat, Vec::new());
        r.insert(libc::SYS_socket, vec![when(vec![arg(0, Len::Dword, Op::Ne, libc::AF_UNIX as u64)])]);
        r.insert(libc::SYS_socketpair, vec![when(vec![arg(0, Len::Dword, Op::Ne, libc::AF_UNIX as u64)])]);
    }
    r
}

fn compile(rules: Rules, action: SeccompAction) -> Result<BpfProgram, seccompiler::BackendError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, arch)?;
    filter.try_into()
}

pub(super) fn apply(policy: &Policy) -> Layer {
    let result = (|| -> Result<(), SandboxError> {
        let deny = compile(denied(policy), SeccompAction::Errno(libc::EPERM as u32))?;
        // clone3 passes its flags in memory a filter cannot read: ENOSYS makes the C
        // library fall back to clone, whose flags the first filter checks.
        let clone3 =
            compile(BTreeMap::from([(libc::SYS_clone3, Vec::new())]), SeccompAction::Errno(libc::ENOSYS as u32))?;
        for prog in [&clone3, &deny] {
            seccompiler::apply_filter_all_threads(prog)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Layer::on(
            "seccomp",
            if policy.hosted {
                "no signals, tracing or memory access to other processes, no fork, no new session, no mounts (hosted: exec and sockets open)"
            } else {
                "no signals, tracing or memory access to other processes, no fork or exec, no new session, no mounts, Unix sockets only"
            },
        ),
        Err(e) => Layer::off("seccomp", format!("could not be applied: {e}")),
    }
}
