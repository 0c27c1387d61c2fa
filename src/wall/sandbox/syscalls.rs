//! seccomp: an allow-list, default deny. A worker may make the system calls that its own
//! code, the Rust runtime, the C library, the dynamic loader and the CUDA driver were seen
//! to make in real runs (strace of every task under eval, --energy, --sanitize and
//! diagnose on an H100, driver 580, CUDA 13.0: `scripts/trace-syscalls.py`), plus the
//! judge protocol's calls on the descriptors it already holds, and nothing else; under a
//! hosting tool (`Profile::Hosted`) also what the tool's injected code was seen to do.
//!
//! Three answers, in filters stacked so that the kernel takes the most specific one (among
//! filters that answer with an errno, the one installed last wins):
//! - *ENOSYS* for any call not on the list, as a kernel without it would answer: code that
//!   probes for a newer call (clone3, which glibc then replaces with clone, whose flags a
//!   filter can read) falls back the way it was written to, and nothing misreads the
//!   refusal as a permission problem to work around.
//! - *EPERM* for what is forbidden on purpose (the calls that reach other processes, the
//!   host, the kernel's configuration or the keyring; the argument values of an allowed
//!   call that would do so: a signal to another process, a socket of another kind, a fork).
//! - a *made-up answer* where the driver or a tool asks and the honest refusal would break
//!   it: `connect` answers ENOENT, what the driver sees when no MPS server listens (it
//!   probes /tmp/nvidia-mps/control at init and carries on); under a tool, `chmod` answers
//!   0 without doing anything (Nsight Compute widens its lock files in the scratch folder;
//!   Landlock does not govern file modes, and a root worker owns most of the host's files).
//!
//! The arguments a filter cannot read (paths, addresses) are Landlock's (`fs`) and the
//! namespaces' (`hosted`) to judge. A 32-bit or x32 system call kills the process (the
//! filters check the architecture).
//!
//! `NIGHTSHIFT_SECCOMP_REPORT=DIR` (for experiments on a GPU machine) makes every refusal
//! a SIGSYS instead, whose handler writes the call to `DIR/seccomp-PID.log` and then
//! answers exactly as the filter would have: the sandbox is the same, only louder.

use super::{Layer, Policy, SandboxError};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// A system call: its number on this architecture and its name (`SYS_` and all).
pub(super) type Sys = (i64, &'static str);

macro_rules! sys {
    ($n:ident) => {
        (libc::$n, stringify!($n))
    };
}

/// Which list applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Profile {
    /// A worker of its own: judging, timing, energy.
    Worker,
    /// A worker under ncu or compute-sanitizer, inside the hosted arrangement.
    Hosted,
}

impl Profile {
    pub(super) fn of(policy: &Policy) -> Profile {
        if policy.hosted {
            Profile::Hosted
        } else {
            Profile::Worker
        }
    }
}

/// This process's memory: glibc's malloc and thread stacks, ld.so mapping libraries, the
/// Rust allocator, the driver's pinned and unified memory (mmap of /dev/nvidia*, NUMA
/// queries in the traces). None of them reaches another process's memory.
const MEMORY: &[Sys] = &[
    sys!(SYS_brk),
    sys!(SYS_mmap),
    sys!(SYS_munmap),
    sys!(SYS_mprotect),
    sys!(SYS_mremap),
    sys!(SYS_madvise),
    sys!(SYS_msync),
    // Page-locked host memory may be locked by the driver; bounded by RLIMIT_MEMLOCK,
    // which a process without CAP_IPC_LOCK cannot raise.
    sys!(SYS_mlock),
    sys!(SYS_munlock),
    sys!(SYS_mlock2),
    sys!(SYS_get_mempolicy),
    sys!(SYS_set_mempolicy),
    sys!(SYS_mbind),
];

/// Threads of this process (glibc's pthreads, the driver's and the Rust runtime's
/// threads); `clone` itself is allowed for threads only, below.
const THREADS: &[Sys] = &[
    sys!(SYS_futex),
    sys!(SYS_set_robust_list),
    sys!(SYS_rseq),
    sys!(SYS_set_tid_address),
    sys!(SYS_exit),
    sys!(SYS_exit_group),
    sys!(SYS_gettid),
    sys!(SYS_sched_yield),
    // Read-only scheduling facts (the driver sizes its pools from the affinity mask).
    sys!(SYS_sched_getaffinity),
    sys!(SYS_sched_get_priority_max),
    sys!(SYS_sched_get_priority_min),
    sys!(SYS_sched_getparam),
    sys!(SYS_sched_getscheduler),
    // glibc: this thread's TLS and CET state only.
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_arch_prctl),
];

/// Signals within this process (handlers, masks, the Rust runtime's stack-overflow guard
/// on sigaltstack); sending one is allowed to this process only, below.
const SIGNALS: &[Sys] = &[
    sys!(SYS_rt_sigaction),
    sys!(SYS_rt_sigprocmask),
    sys!(SYS_rt_sigreturn),
    sys!(SYS_rt_sigpending),
    sys!(SYS_rt_sigtimedwait),
    sys!(SYS_rt_sigsuspend),
    sys!(SYS_sigaltstack),
    sys!(SYS_restart_syscall),
];

/// Clocks and sleeps (the judge's protocol waits, the driver's polling, Rust's sleep).
const TIME: &[Sys] = &[
    sys!(SYS_clock_gettime),
    sys!(SYS_clock_getres),
    sys!(SYS_clock_nanosleep),
    sys!(SYS_nanosleep),
    sys!(SYS_gettimeofday),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_time),
];

/// Files: which ones is Landlock's to say (read: the libraries, system folders, the
/// driver's /proc and /sys entries; write: the scratch folder). The legacy x86_64 calls
/// are in the traces: the driver makes them directly (stat, access, readlink, mkdir,
/// symlink and unlink of /dev/char/* and ~/.nv).
const FILES: &[Sys] = &[
    sys!(SYS_openat),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_open),
    sys!(SYS_close),
    sys!(SYS_close_range),
    sys!(SYS_read),
    sys!(SYS_write),
    sys!(SYS_readv),
    sys!(SYS_writev),
    sys!(SYS_pread64),
    sys!(SYS_pwrite64),
    sys!(SYS_preadv),
    sys!(SYS_pwritev),
    sys!(SYS_preadv2),
    sys!(SYS_pwritev2),
    sys!(SYS_lseek),
    sys!(SYS_fstat),
    sys!(SYS_newfstatat),
    sys!(SYS_statx),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_stat),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_lstat),
    sys!(SYS_statfs),
    sys!(SYS_fstatfs),
    sys!(SYS_faccessat),
    sys!(SYS_faccessat2),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_access),
    sys!(SYS_readlinkat),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_readlink),
    sys!(SYS_getdents64),
    sys!(SYS_getcwd),
    sys!(SYS_chdir),
    sys!(SYS_fchdir),
    sys!(SYS_umask),
    sys!(SYS_mkdirat),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_mkdir),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_rmdir),
    sys!(SYS_unlinkat),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_unlink),
    sys!(SYS_symlinkat),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_symlink),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_renameat),
    sys!(SYS_renameat2),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_rename),
    sys!(SYS_linkat),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_link),
    sys!(SYS_ftruncate),
    sys!(SYS_fsync),
    sys!(SYS_fdatasync),
    sys!(SYS_flock),
    sys!(SYS_dup),
    sys!(SYS_dup3),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_dup2),
    sys!(SYS_pipe2),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_pipe),
    // Device control of the GPU (every driver call is an ioctl on /dev/nvidia*); which
    // devices it may open is Landlock's to say. The few requests that reach another
    // process are refused below.
    sys!(SYS_ioctl),
];

/// Waiting on descriptors it holds (the driver's eventfds and pipes, the judge's socket).
const EVENTS: &[Sys] = &[
    sys!(SYS_eventfd2),
    sys!(SYS_epoll_create1),
    sys!(SYS_epoll_ctl),
    sys!(SYS_epoll_pwait),
    sys!(SYS_epoll_pwait2),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_epoll_wait),
    sys!(SYS_ppoll),
    sys!(SYS_pselect6),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_poll),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_select),
    sys!(SYS_timerfd_create),
    sys!(SYS_timerfd_settime),
    sys!(SYS_timerfd_gettime),
];

/// Sockets it already holds: the judge's socket pair (commands and buffer descriptors,
/// SCM_RIGHTS), and the driver's own listener: `socket(AF_UNIX, SOCK_SEQPACKET)` bound
/// to the abstract name `cuda-uvmfd-NETNS-PID`, SO_PASSCRED, listen. No connect (see the
/// module's comment), no socketpair, no socket of another kind: messages go only where a
/// descriptor the worker was handed already leads.
const SOCKETS: &[Sys] = &[
    sys!(SYS_sendto),
    sys!(SYS_recvfrom),
    sys!(SYS_sendmsg),
    sys!(SYS_recvmsg),
    sys!(SYS_shutdown),
    sys!(SYS_getsockname),
    sys!(SYS_getpeername),
    sys!(SYS_getsockopt),
    sys!(SYS_setsockopt),
    sys!(SYS_bind),
    sys!(SYS_listen),
];

/// Facts about itself and the machine (the driver reads uname, sysinfo, its euid; std
/// its limits; HashMap keys come from getrandom).
const INFO: &[Sys] = &[
    sys!(SYS_getpid),
    sys!(SYS_getppid),
    sys!(SYS_getuid),
    sys!(SYS_geteuid),
    sys!(SYS_getgid),
    sys!(SYS_getegid),
    sys!(SYS_getresuid),
    sys!(SYS_getresgid),
    sys!(SYS_getgroups),
    sys!(SYS_getpgid),
    sys!(SYS_getsid),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_getpgrp),
    sys!(SYS_uname),
    sys!(SYS_sysinfo),
    sys!(SYS_getcpu),
    sys!(SYS_getrusage),
    sys!(SYS_times),
    sys!(SYS_getrandom),
    sys!(SYS_capget),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_getrlimit),
];

/// Under a tool only: its injected code listens on the abstract socket
/// `nv_target_process_PID` (a stream socket, SO_REUSEADDR) and accepts the front end's
/// connection; Nsight Compute also reads the namespace's interfaces over a netlink route
/// socket (socket kinds below). Both live in the hosted arrangement's private network
/// namespace.
const HOSTED: &[Sys] = &[sys!(SYS_accept), sys!(SYS_accept4)];

/// Forbidden in every profile (EPERM), whatever the arguments: what reaches other
/// processes, the host, the kernel's configuration or the keyring.
const FORBIDDEN: &[Sys] = &[
    // io_uring runs socket, connect and file operations out of this filter's sight (a
    // red-team UDP datagram went out through IORING_OP_SOCKET).
    sys!(SYS_io_uring_setup),
    sys!(SYS_io_uring_enter),
    sys!(SYS_io_uring_register),
    // The keyring: the worker joins a fresh session keyring before this filter, and then
    // may not touch any.
    sys!(SYS_keyctl),
    sys!(SYS_add_key),
    sys!(SYS_request_key),
    // Device nodes (a root worker made the disk's block device in scratch and read it).
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_mknod),
    sys!(SYS_mknodat),
    // Other processes: tracing, memory, descriptors, signals by thread id alone.
    sys!(SYS_ptrace),
    sys!(SYS_process_vm_readv),
    sys!(SYS_process_vm_writev),
    sys!(SYS_pidfd_open),
    sys!(SYS_pidfd_getfd),
    sys!(SYS_pidfd_send_signal),
    sys!(SYS_tkill),
    sys!(SYS_kcmp),
    sys!(SYS_get_robust_list),
    sys!(SYS_process_madvise),
    sys!(SYS_migrate_pages),
    sys!(SYS_move_pages),
    sys!(SYS_sched_setscheduler),
    sys!(SYS_sched_setparam),
    sys!(SYS_sched_setattr),
    sys!(SYS_setpriority),
    sys!(SYS_ioprio_set),
    // Leaving the process group would escape the deadline's killpg; namespaces, mounts
    // and roots would escape the hosted arrangement (a root worker could unmount its
    // private /tmp).
    sys!(SYS_setpgid),
    sys!(SYS_setsid),
    sys!(SYS_unshare),
    sys!(SYS_setns),
    sys!(SYS_mount),
    sys!(SYS_umount2),
    sys!(SYS_pivot_root),
    sys!(SYS_chroot),
    sys!(SYS_move_mount),
    sys!(SYS_open_tree),
    sys!(SYS_fsopen),
    sys!(SYS_fsconfig),
    sys!(SYS_fsmount),
    sys!(SYS_fspick),
    sys!(SYS_mount_setattr),
    // New programs and processes: exec (no tool needs it inside the worker: none in the
    // traces), fork (clone without CLONE_THREAD is refused below).
    sys!(SYS_execve),
    sys!(SYS_execveat),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_fork),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_vfork),
    // The kernel itself.
    sys!(SYS_bpf),
    // Not in the ncu traces either: its counters come through the driver's ioctls.
    sys!(SYS_perf_event_open),
    sys!(SYS_userfaultfd),
    sys!(SYS_kexec_load),
    sys!(SYS_kexec_file_load),
    sys!(SYS_init_module),
    sys!(SYS_finit_module),
    sys!(SYS_delete_module),
    sys!(SYS_acct),
    sys!(SYS_swapon),
    sys!(SYS_swapoff),
    sys!(SYS_reboot),
    sys!(SYS_personality),
    sys!(SYS_syslog),
    sys!(SYS_quotactl),
    sys!(SYS_settimeofday),
    sys!(SYS_clock_settime),
    sys!(SYS_clock_adjtime),
    sys!(SYS_adjtimex),
    // File handles bypass paths, and so Landlock.
    sys!(SYS_name_to_handle_at),
    sys!(SYS_open_by_handle_at),
    // Credentials (dropped before this filter; nothing may be asked back).
    sys!(SYS_setuid),
    sys!(SYS_setgid),
    sys!(SYS_setreuid),
    sys!(SYS_setregid),
    sys!(SYS_setresuid),
    sys!(SYS_setresgid),
    sys!(SYS_setfsuid),
    sys!(SYS_setfsgid),
    sys!(SYS_setgroups),
    sys!(SYS_capset),
    // Metadata Landlock does not govern: a root worker without capabilities still owns
    // the host's root-owned files (chmod 0666 /etc/shadow would work).
    sys!(SYS_fchmod),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_chown),
    sys!(SYS_fchown),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_lchown),
    sys!(SYS_fchownat),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_utime),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_utimes),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_futimesat),
    sys!(SYS_utimensat),
    sys!(SYS_setxattr),
    sys!(SYS_lsetxattr),
    sys!(SYS_fsetxattr),
    sys!(SYS_removexattr),
    sys!(SYS_lremovexattr),
    sys!(SYS_fremovexattr),
    // The host's System V and POSIX IPC (not private, even hosted).
    sys!(SYS_shmget),
    sys!(SYS_shmat),
    sys!(SYS_shmctl),
    sys!(SYS_shmdt),
    sys!(SYS_semget),
    sys!(SYS_semop),
    sys!(SYS_semctl),
    sys!(SYS_semtimedop),
    sys!(SYS_msgget),
    sys!(SYS_msgsnd),
    sys!(SYS_msgrcv),
    sys!(SYS_msgctl),
    sys!(SYS_mq_open),
    sys!(SYS_mq_unlink),
    sys!(SYS_mq_timedsend),
    sys!(SYS_mq_timedreceive),
    sys!(SYS_mq_notify),
    sys!(SYS_mq_getsetattr),
    // A socket pair is a fresh channel nobody handed down (the judge made the only one).
    sys!(SYS_socketpair),
];

/// File-mode changes: refused in a worker; under a tool answered 0 without effect.
const CHMOD: &[Sys] = &[
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_chmod),
    sys!(SYS_fchmodat),
    #[cfg(target_arch = "x86_64")]
    sys!(SYS_fchmodat2),
    // (libc does not name it on aarch64; the generic table's number.)
    #[cfg(target_arch = "aarch64")]
    (452, "SYS_fchmodat2"),
];

/// prctl options a worker may use: thread names (Rust, pthread_setname_np), names of
/// anonymous mappings (glibc), and read-only queries.
const PRCTL_OPTIONS: &[libc::c_int] = &[
    // Installing the filters one after another sets it again; it only ever restricts.
    libc::PR_SET_NO_NEW_PRIVS,
    libc::PR_SET_NAME,
    libc::PR_GET_NAME,
    libc::PR_SET_VMA,
    libc::PR_GET_DUMPABLE,
    libc::PR_GET_NO_NEW_PRIVS,
    libc::PR_CAPBSET_READ,
    libc::PR_GET_TIMERSLACK,
];

/// fcntl commands that reach another process (SIGIO and lease signals to a chosen owner)
/// or watch folders by signal: refused. (F_SETSIG 10 and F_SETOWN_EX 15 are the same on
/// x86_64 and aarch64; libc does not name them.)
const FCNTL_FORBIDDEN: &[libc::c_int] = &[libc::F_SETOWN, 15, 10, libc::F_SETLEASE, libc::F_NOTIFY];

/// fcntl commands in use: descriptor flags, status flags, duplication, record locks
/// (ncu's lock files), pipe sizes, seals.
const FCNTL_ALLOWED: &[libc::c_int] = &[
    libc::F_DUPFD,
    libc::F_DUPFD_CLOEXEC,
    libc::F_GETFD,
    libc::F_SETFD,
    libc::F_GETFL,
    libc::F_SETFL,
    libc::F_GETLK,
    libc::F_SETLK,
    libc::F_SETLKW,
    libc::F_OFD_GETLK,
    libc::F_OFD_SETLK,
    libc::F_OFD_SETLKW,
    libc::F_GETPIPE_SZ,
    libc::F_SETPIPE_SZ,
    libc::F_ADD_SEALS,
    libc::F_GET_SEALS,
    libc::F_GETOWN,
];

/// ioctl requests that reach beyond this process: typing into a terminal, the console,
/// and setting the owner that SIGIO goes to.
/// (TIOCSTI, TIOCLINUX, FIOSETOWN, SIOCSPGRP: the same numbers on x86_64 and aarch64.)
const IOCTL_FORBIDDEN: &[u64] = &[0x5412, 0x541C, 0x8901, 0x8902];

/// Flags every thread-creating clone carries (glibc's pthread_create: CLONE_VM|CLONE_FS|
/// CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|...), and flags none
/// may carry (new namespaces).
const CLONE_REQUIRED: u64 =
    (libc::CLONE_THREAD | libc::CLONE_VM | libc::CLONE_SIGHAND | libc::CLONE_FS | libc::CLONE_FILES) as u64;
const CLONE_FORBIDDEN: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u64;

/// The socket type without SOCK_NONBLOCK and SOCK_CLOEXEC.
const SOCK_TYPE_MASK: u64 = 0xf;

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

fn when(conds: Vec<Cond>) -> SeccompRule {
    SeccompRule::new(conds).expect("a rule has at least one condition")
}

fn arg(index: u8, len: Len, op: Op, value: u64) -> Cond {
    Cond::new(index, len, op, value).expect("argument index is below 6")
}

fn eq(index: u8, value: u64) -> Cond {
    arg(index, Len::Dword, Op::Eq, value)
}

fn ne(index: u8, value: u64) -> Cond {
    arg(index, Len::Dword, Op::Ne, value)
}

fn masked(index: u8, mask: u64, value: u64) -> Cond {
    arg(index, Len::Qword, Op::MaskedEq(mask), value)
}

/// The socket kinds a profile may create: (domain, type, protocol or None for any).
fn socket_kinds(profile: Profile) -> Vec<(u64, u64, Option<u64>)> {
    let unix = libc::AF_UNIX as u64;
    let mut kinds = vec![(unix, libc::SOCK_SEQPACKET as u64, None)];
    if profile == Profile::Hosted {
        kinds.push((unix, libc::SOCK_STREAM as u64, None));
        let netlink = libc::AF_NETLINK as u64;
        let route = Some(libc::NETLINK_ROUTE as u64);
        kinds.push((netlink, libc::SOCK_RAW as u64, route));
        kinds.push((netlink, libc::SOCK_DGRAM as u64, route));
    }
    kinds
}

/// Pids (as the process itself sees them) it may address: 0 means itself, and its own pid.
fn own(index: u8, me: u64, zero_too: bool) -> Vec<SeccompRule> {
    let mut rules = vec![when(vec![eq(index, me)])];
    if zero_too {
        rules.push(when(vec![eq(index, 0)]));
    }
    rules
}

/// The allow-list: syscall -> the rules under which it is allowed (none: always).
fn allowed(profile: Profile, me: u64) -> Rules {
    let mut r: Rules = BTreeMap::new();
    let groups: [&[Sys]; 8] = [MEMORY, THREADS, SIGNALS, TIME, FILES, EVENTS, SOCKETS, INFO];
    for (nr, _) in groups.into_iter().flatten() {
        r.insert(*nr, Vec::new());
    }
    if profile == Profile::Hosted {
        for (nr, _) in HOSTED {
            r.insert(*nr, Vec::new());
        }
    }
    // Threads only: a clone that makes a process is a fork.
    r.insert(libc::SYS_clone, vec![when(vec![masked(0, CLONE_REQUIRED | CLONE_FORBIDDEN, CLONE_REQUIRED)])]);
    // Signals to itself: raise() and abort() use tgkill on their own pid, the runtime
    // kill(getpid()).
    for nr in [libc::SYS_kill, libc::SYS_tgkill, libc::SYS_rt_sigqueueinfo, libc::SYS_rt_tgsigqueueinfo] {
        r.insert(nr, own(0, me, false));
    }
    // Its own limits (glibc's getrlimit is prlimit64(0, ...)); a red-team worker killed
    // the orchestrator with RLIMIT_FSIZE 0 on its pid.
    r.insert(libc::SYS_prlimit64, own(0, me, true));
    // Nsight Compute pins its threads (pid 0 in the traces); another process of the same
    // user could otherwise be pinned beside a busy core during its measurement.
    r.insert(libc::SYS_sched_setaffinity, own(0, me, true));
    r.insert(libc::SYS_prctl, PRCTL_OPTIONS.iter().map(|o| when(vec![eq(0, *o as u64)])).collect());
    r.insert(libc::SYS_fcntl, FCNTL_ALLOWED.iter().map(|c| when(vec![eq(1, *c as u64)])).collect());
    r.insert(
        libc::SYS_socket,
        socket_kinds(profile)
            .into_iter()
            .map(|(domain, ty, protocol)| {
                let mut c = vec![eq(0, domain), masked(1, SOCK_TYPE_MASK, ty)];
                c.extend(protocol.map(|p| eq(2, p)));
                when(c)
            })
            .collect(),
    );
    r
}

/// What is refused with EPERM: always (no rules) or when a rule matches.
fn forbidden(profile: Profile, me: u64) -> Rules {
    let mut r: Rules = BTreeMap::new();
    for (nr, _) in FORBIDDEN {
        r.insert(*nr, Vec::new());
    }
    if profile == Profile::Worker {
        for (nr, _) in CHMOD {
            r.insert(*nr, Vec::new());
        }
    }
    // Signals, limits and affinity of another process.
    for nr in [libc::SYS_kill, libc::SYS_tgkill, libc::SYS_rt_sigqueueinfo, libc::SYS_rt_tgsigqueueinfo] {
        r.insert(nr, vec![when(vec![ne(0, me)])]);
    }
    for nr in [libc::SYS_prlimit64, libc::SYS_sched_setaffinity] {
        r.insert(nr, vec![when(vec![ne(0, me), ne(0, 0)])]);
    }
    // A clone that lacks a thread's flags or asks for a namespace.
    let mut clone: Vec<SeccompRule> = Vec::new();
    for bit in (0..64).map(|b| 1u64 << b) {
        if CLONE_REQUIRED & bit != 0 {
            clone.push(when(vec![masked(0, bit, 0)]));
        }
        if CLONE_FORBIDDEN & bit != 0 {
            clone.push(when(vec![masked(0, bit, bit)]));
        }
    }
    r.insert(libc::SYS_clone, clone);
    // Any other prctl option (securebits, dumpable, a ptracer, the mm's layout...).
    r.insert(libc::SYS_prctl, vec![when(PRCTL_OPTIONS.iter().map(|o| ne(0, *o as u64)).collect())]);
    r.insert(libc::SYS_fcntl, FCNTL_FORBIDDEN.iter().map(|c| when(vec![eq(1, *c as u64)])).collect());
    r.insert(libc::SYS_ioctl, IOCTL_FORBIDDEN.iter().map(|c| when(vec![eq(1, *c)])).collect());
    r.insert(libc::SYS_socket, socket_forbidden(profile));
    r
}

/// Rules matching every socket the profile may not create.
fn socket_forbidden(profile: Profile) -> Vec<SeccompRule> {
    let kinds = socket_kinds(profile);
    let mut domains: Vec<u64> = kinds.iter().map(|k| k.0).collect();
    domains.dedup();
    let mut rules = vec![when(domains.iter().map(|d| ne(0, *d)).collect())];
    for domain in &domains {
        let of_domain: Vec<&(u64, u64, Option<u64>)> = kinds.iter().filter(|k| k.0 == *domain).collect();
        for ty in 0..=SOCK_TYPE_MASK {
            match of_domain.iter().find(|k| k.1 == ty) {
                None => rules.push(when(vec![eq(0, *domain), masked(1, SOCK_TYPE_MASK, ty)])),
                Some((_, _, Some(protocol))) => {
                    rules.push(when(vec![eq(0, *domain), masked(1, SOCK_TYPE_MASK, ty), ne(2, *protocol)]))
                }
                Some(_) => {}
            }
        }
    }
    rules
}

/// Calls answered with a made-up errno (0: success without effect): (errno, calls).
fn answered(profile: Profile) -> Vec<(u32, Vec<Sys>)> {
    let mut out = vec![(libc::ENOENT as u32, vec![sys!(SYS_connect)])];
    if profile == Profile::Hosted {
        out.push((0, CHMOD.to_vec()));
    }
    out
}

fn compile(rules: Rules, mismatch: SeccompAction, matched: SeccompAction) -> Result<BpfProgram, SandboxError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let filter = SeccompFilter::new(rules, mismatch, matched, arch)?;
    Ok(filter.try_into()?)
}

/// The allow filter's rules: the allow-list, plus every call another filter answers
/// (always, or under that filter's conditions), which it lets through for that filter to
/// answer. Each call is then decided by one filter alone, so the order the filters are
/// installed in does not matter (the kernel lets an errno outrank an allow, and among
/// errnos would prefer the newest filter's).
fn allow_filter_rules(profile: Profile, me: u64) -> Rules {
    let mut rules = allowed(profile, me);
    for (nr, deny) in forbidden(profile, me) {
        match rules.get_mut(&nr) {
            // Forbidden under conditions: allowed under its own, passed on under those.
            Some(allow) if !allow.is_empty() && !deny.is_empty() => allow.extend(deny),
            Some(allow) => allow.clear(),
            None => {
                rules.insert(nr, deny);
            }
        }
    }
    for (_, calls) in answered(profile) {
        for (nr, _) in calls {
            rules.insert(nr, Vec::new());
        }
    }
    rules
}

/// The filters, in the order they are installed: the allow filter last, since the calls
/// that install a filter (prctl, seccomp) are not on its list.
fn programs(profile: Profile, me: u64) -> Result<Vec<BpfProgram>, SandboxError> {
    let mut out =
        vec![compile(forbidden(profile, me), SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32))?];
    for (errno, calls) in answered(profile) {
        let rules: Rules = calls.iter().map(|(nr, _)| (*nr, Vec::new())).collect();
        out.push(compile(rules, SeccompAction::Allow, SeccompAction::Errno(errno))?);
    }
    let enosys = SeccompAction::Errno(libc::ENOSYS as u32);
    out.push(compile(allow_filter_rules(profile, me), enosys, SeccompAction::Allow)?);
    Ok(out)
}

/// Every `return errno` of a program becomes `trap, errno in si_errno`: the report
/// mode's handler answers with that errno after writing the call down.
fn trapping(mut prog: BpfProgram) -> BpfProgram {
    const BPF_RET_K: u16 = 0x06;
    for insn in prog.iter_mut() {
        if insn.code == BPF_RET_K && insn.k & libc::SECCOMP_RET_ACTION_FULL == libc::SECCOMP_RET_ERRNO {
            insn.k = libc::SECCOMP_RET_TRAP | (insn.k & libc::SECCOMP_RET_DATA);
        }
    }
    prog
}

pub(super) fn apply(policy: &Policy) -> Layer {
    let profile = Profile::of(policy);
    // The report mode, when asked for and its log could be opened (before Landlock, in
    // `sandbox::apply`); a report mode that cannot be had leaves the filter as it is.
    let report = match super::seccomp_report::requested() {
        None => None,
        Some(_) if !super::seccomp_report::ready() => Some(Err("its log could not be opened".to_string())),
        Some(_) => Some(super::seccomp_report::install(names()).map_err(|e| e.to_string())),
    };
    let result = (|| -> Result<(), SandboxError> {
        let me = std::process::id() as u64;
        let mut progs = programs(profile, me)?;
        if matches!(report, Some(Ok(()))) {
            progs = progs.into_iter().map(trapping).collect();
        }
        // TSYNC: threads a hosting tool started before the sandbox get the filter too.
        for prog in &progs {
            seccompiler::apply_filter_all_threads(prog)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => {
            let what = match profile {
                Profile::Worker => "allow-list of the calls the worker, the C library and the CUDA driver make (ENOSYS for others); EPERM for io_uring, keyrings, mknod, ptrace and process memory, signals, limits and affinity of other processes, fork, exec, new sessions and namespaces, mounts, file modes and owners, socket pairs and every socket but the driver's Unix seqpacket listener; no connect",
                Profile::Hosted => "allow-list of the calls the worker, the C library, the CUDA driver and the tool's injected code make (ENOSYS for others); EPERM for io_uring, keyrings, mknod, ptrace and process memory, signals, limits and affinity of other processes, fork, exec, new sessions and namespaces, mounts, file owners, socket pairs and every socket but Unix stream and seqpacket and netlink route ones (the tool's listener, in the private network namespace); no connect",
            };
            let louder = match &report {
                None => String::new(),
                Some(Ok(())) => " (report mode: refusals are written down)".into(),
                Some(Err(e)) => format!(" (no report mode: {e})"),
            };
            Layer::on("seccomp", format!("{what}{louder}"))
        }
        Err(e) => Layer::off("seccomp", format!("could not be applied: {e}")),
    }
}

/// Every system call the lists name, for the report mode's messages.
fn names() -> Vec<Sys> {
    let groups: [&[Sys]; 11] = [MEMORY, THREADS, SIGNALS, TIME, FILES, EVENTS, SOCKETS, INFO, HOSTED, FORBIDDEN, CHMOD];
    let mut all: Vec<Sys> = groups.into_iter().flatten().copied().collect();
    all.extend([
        sys!(SYS_clone),
        sys!(SYS_clone3),
        sys!(SYS_kill),
        sys!(SYS_tgkill),
        sys!(SYS_rt_sigqueueinfo),
        sys!(SYS_rt_tgsigqueueinfo),
        sys!(SYS_prlimit64),
        sys!(SYS_sched_setaffinity),
        sys!(SYS_prctl),
        sys!(SYS_fcntl),
        sys!(SYS_socket),
        sys!(SYS_connect),
        sys!(SYS_seccomp),
        sys!(SYS_landlock_create_ruleset),
        sys!(SYS_landlock_add_rule),
        sys!(SYS_landlock_restrict_self),
        sys!(SYS_memfd_create),
        sys!(SYS_wait4),
        sys!(SYS_waitid),
    ]);
    all.sort_unstable();
    all.dedup_by_key(|s| s.0);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the traces of today's worker show after its sandbox went up
    /// (`scripts/trace-syscalls.py`, H100, driver 580, CUDA 13.0), besides the calls the
    /// traces left out (futex, sched_yield, clock_gettime, gettimeofday, clock_nanosleep,
    /// nanosleep). clone3 is answered ENOSYS and connect ENOENT on purpose.
    #[cfg(target_arch = "x86_64")]
    const SEEN_EVAL: &[&str] = &[
        "access",
        "bind",
        "brk",
        "clone",
        "close",
        "dup",
        "eventfd2",
        "exit",
        "exit_group",
        "fcntl",
        "fstat",
        "get_mempolicy",
        "getdents64",
        "geteuid",
        "getpid",
        "gettid",
        "ioctl",
        "listen",
        "lseek",
        "madvise",
        "mkdir",
        "mmap",
        "mprotect",
        "munmap",
        "openat",
        "pipe2",
        "poll",
        "prlimit64",
        "read",
        "readlink",
        "rseq",
        "rt_sigaction",
        "rt_sigprocmask",
        "sched_get_priority_max",
        "sched_get_priority_min",
        "sched_getaffinity",
        "set_robust_list",
        "setsockopt",
        "sigaltstack",
        "socket",
        "stat",
        "symlink",
        "sysinfo",
        "uname",
        "unlink",
        "write",
        "futex",
        "sched_yield",
        "clock_gettime",
        "gettimeofday",
        "clock_nanosleep",
        "nanosleep",
    ];

    /// Under ncu (diagnose) and compute-sanitizer, besides SEEN_EVAL.
    #[cfg(target_arch = "x86_64")]
    const SEEN_HOSTED: &[&str] = &[
        "accept",
        "chmod",
        "epoll_create1",
        "epoll_ctl",
        "epoll_wait",
        "faccessat2",
        "getsockname",
        "newfstatat",
        "readlinkat",
        "recvfrom",
        "recvmsg",
        "sched_setaffinity",
        "sendto",
        "shutdown",
        "statx",
        "timerfd_create",
        "timerfd_settime",
    ];

    #[cfg(target_arch = "x86_64")]
    fn nr(name: &str) -> i64 {
        names().iter().find(|s| &s.1[4..] == name).unwrap_or_else(|| panic!("{name} is in no list")).0
    }

    #[cfg(target_arch = "x86_64")]
    fn is_allowed(profile: Profile, name: &str) -> bool {
        let n = nr(name);
        let answered_ok = answered(profile).iter().any(|(e, calls)| *e == 0 && calls.iter().any(|c| c.0 == n));
        allowed(profile, 1).contains_key(&n) || answered_ok
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_call_the_traces_show_is_allowed_in_its_profile() {
        for name in SEEN_EVAL {
            assert!(is_allowed(Profile::Worker, name), "{name} (worker)");
            assert!(is_allowed(Profile::Hosted, name), "{name} (hosted)");
        }
        for name in SEEN_HOSTED {
            assert!(is_allowed(Profile::Hosted, name), "{name} (hosted)");
        }
        assert!(!is_allowed(Profile::Worker, "accept") && !is_allowed(Profile::Worker, "chmod"));
    }

    #[test]
    fn what_is_forbidden_is_never_allowed_unconditionally() {
        for profile in [Profile::Worker, Profile::Hosted] {
            let allow = allowed(profile, 1);
            for (nr, name) in FORBIDDEN {
                assert!(!allow.contains_key(nr), "{name} is both allowed and forbidden");
            }
            // A call forbidden outright is on no allow-list; one forbidden under conditions
            // (ioctl's TIOCSTI, a kill of another pid) may be allowed otherwise.
            for (nr, rules) in forbidden(profile, 1) {
                assert!(!rules.is_empty() || !allow.contains_key(&nr), "syscall {nr} allowed yet forbidden outright");
            }
            assert!(!allow.contains_key(&libc::SYS_clone3), "clone3 must answer ENOSYS");
            assert!(!allow.contains_key(&libc::SYS_connect), "connect is answered, never made");
        }
    }

    #[test]
    fn the_filters_compile_for_this_machine() {
        for profile in [Profile::Worker, Profile::Hosted] {
            let progs = programs(profile, std::process::id() as u64).unwrap();
            assert!(progs.len() >= 3);
            for p in progs {
                let t = trapping(p);
                assert!(t
                    .iter()
                    .all(|i| i.code != 0x06 || i.k & libc::SECCOMP_RET_ACTION_FULL != libc::SECCOMP_RET_ERRNO));
            }
        }
    }

    #[test]
    fn names_are_unique_per_number() {
        let all = names();
        for pair in all.windows(2) {
            assert!(pair[0].0 < pair[1].0);
        }
    }
}
