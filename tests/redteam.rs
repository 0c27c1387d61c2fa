//! The red team's attacks that show without a GPU, each against the real wall: a real
//! `nightshift judge` process in its simulated mode starts a real, sandboxed
//! `nightshift worker --serve` and tells it to load the attacking library (its
//! constructor is the attack; loading is the moment from which every fault is the
//! library's), then reports the outcome the request names unless the worker died or
//! broke the protocol first. The build attacks run `nightshift eval` with nvcc from the
//! wheels: the build happens for real, the GPU is missing afterwards.
//!
//! Every attack that should simply be refused ends its library's process with
//! `REDTEAM-BREACH: what` on stderr when it gets through, so the verdict turns into a
//! `process-exit` carrying the mark, and each test also checks from outside what the attack
//! would have touched (a listener, a datagram, a file, a key).
//!
//! Each test's first line names the layer that holds it (the seccomp allow-list, dropped
//! capabilities, the fresh keyring, Landlock, the confined build). The libraries are built
//! with the host C compiler (`cc`): a constructor needs no CUDA, and each build takes a
//! fraction of a second.

mod common;

use nightshift::task::Task;
use nightshift::wall::protocol::{JudgeMessage, JudgeReport, Outcome, TimingPlan};
use serde_json::{json, Value};
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// What an attack prints when it gets through.
const BREACH: &str = "REDTEAM-BREACH";
/// The orchestrator's API key in these tests: it must never reach a verdict.
const CANARY: &str = "sk-redteam-canary-5e6f7a8b";
/// What a forged judge line carries: a verdict that repeats it was read from the worker.
const FORGED: &str = "nightshift_forged";

/// The C every attacking library starts with: the shim's two symbols (so the worker finds
/// an entry), a breach that ends the process with the mark, and the constructor that runs
/// `body` when the worker loads the library.
fn library_source(body: &str) -> String {
    format!(
        r#"#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>
static void breach(const char* what) {{ dprintf(2, "{BREACH}: %s\n", what); _exit(42); }}
int nightshift_call_v1(void* const* args, void* stream) {{ (void)args; (void)stream; return 0; }}
const char* nightshift_error_name_v1(int code) {{ (void)code; return "cudaSuccess"; }}
__attribute__((constructor)) static void attack(void) {{
{body}
}}
"#
    )
}

/// A folder of this test's own under the project's target folder: outside /tmp, so that
/// what lies there is reachable by path exactly as a user's files are.
fn own_dir(name: &str) -> tempfile::TempDir {
    let parent = common::root().join("target").join("redteam");
    std::fs::create_dir_all(&parent).unwrap();
    tempfile::Builder::new().prefix(&format!("{name}-")).tempdir_in(&parent).unwrap()
}

/// Builds the attacking library `name` from `body`, with `defines` (`-DNAME=VALUE`).
fn build_library(dir: &Path, name: &str, body: &str, defines: &[(&str, String)]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, library_source(body)).unwrap();
    let lib = dir.join(format!("lib{name}.so"));
    let mut cc = Command::new("cc");
    cc.args(["-shared", "-fPIC", "-O1", "-pthread", "-o"]).arg(&lib).arg(&src);
    for (k, v) in defines {
        cc.arg(format!("-D{k}={v}"));
    }
    let out = cc.output().expect("these tests build their libraries with the host C compiler `cc`");
    assert!(out.status.success(), "{name} does not build:\n{}", String::from_utf8_lossy(&out.stderr));
    lib
}

/// One simulated judgment of a library, as the judge reported it.
struct Judged {
    /// `passed`, the failure's class, or the outcome's kind (`task-error`, ...).
    class: String,
    report: JudgeReport,
    /// Everything the judge and its worker said, and the report: no mark, key or forged
    /// line may be in it.
    text: String,
}

fn class_of(report: &JudgeReport) -> String {
    match &report.outcome {
        Outcome::Passed => "passed".into(),
        Outcome::Rejected { failure } => failure.class.name().into(),
        Outcome::TaskError { message } => format!("task-error ({message})"),
        Outcome::EnvError { message } => format!("env-error ({message})"),
        Outcome::InternalError { message } => format!("internal-error ({message})"),
    }
}

/// The report the simulated judge gives when the worker loads the library and answers in
/// turn: a pass, with a note that says whose it is.
const OURS: &str = "the red team's simulated outcome";

/// Runs `nightshift judge` in its simulated mode on `lib` (the vector_add task), the way
/// the simulated evaluator does, with an API key in its environment.
fn judge(lib: &Path) -> Judged {
    judge_with(lib, None)
}

/// As [`judge`], the judge started with `handed` open at descriptor 50 and inheritable:
/// what a user's shell, a CI wrapper or a service manager leaves open for nightshift.
fn judge_with(lib: &Path, handed: Option<std::os::fd::RawFd>) -> Judged {
    let task = Task::load(&common::root().join("tasks/vector_add")).unwrap();
    let folder = own_dir("judgment");
    let mut outcome = JudgeReport::of(Outcome::Passed);
    outcome.notes.push(OURS.into());
    let request = json!({
        "task": task,
        "reference": lib,
        "baseline": lib,
        "candidate": lib,
        "mode": {"mode": "simulate", "delay_ms": 100, "outcome": outcome},
        "device": 0,
        "timing": TimingPlan::default(),
        "seed_base": 7,
        "deadline_s": 60.0,
        "folder": folder.path(),
        "worker_exe": common::nightshift_bin(),
    });
    let path = folder.path().join("judge.json");
    std::fs::write(&path, serde_json::to_vec(&request).unwrap()).unwrap();
    let mut cmd = Command::new(common::nightshift_bin());
    cmd.arg("judge").arg(&path).current_dir(folder.path()).env("OPENAI_API_KEY", CANARY);
    if let Some(fd) = handed {
        use std::os::unix::process::CommandExt;
        // SAFETY: dup2 between fork and exec is async-signal-safe; the copy is inheritable.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd, 50) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let got = nightshift::toolkit::process::run_captured(&mut cmd, Duration::from_secs(90)).unwrap();
    assert!(!got.timed_out, "the judge ran past 90 s: {}", got.stderr);
    let reports: Vec<JudgeReport> = got
        .stdout
        .lines()
        .filter_map(|l| match serde_json::from_str::<JudgeMessage>(l) {
            Ok(JudgeMessage::Done { report }) => Some(*report),
            _ => None,
        })
        .collect();
    assert_eq!(
        reports.len(),
        1,
        "the judge's stdout holds one report and nothing forged:\n{}\n{}",
        got.stdout,
        got.stderr
    );
    let report = reports.into_iter().next().unwrap();
    let text = format!("{}\n{}\n{}", got.stdout, got.stderr, serde_json::to_string(&report).unwrap());
    Judged { class: class_of(&report), report, text }
}

/// Builds `body` and judges it.
fn attack(name: &str, body: &str, defines: &[(&str, String)]) -> Judged {
    let dir = own_dir(name);
    let lib = build_library(dir.path(), name, body, defines);
    judge(&lib)
}

/// The attack was refused: the worker loaded the library and answered in turn, the
/// simulated outcome stands, and no mark, key or forged line reached the report.
fn assert_refused(j: &Judged, what: &str) {
    assert!(!j.text.contains(BREACH), "{what}: the attack got through: {}", breach_lines(&j.report));
    assert_eq!(
        j.class, "passed",
        "{what}: the library's process did not survive its refused attack: {:?}",
        j.report.outcome
    );
    assert!(j.report.notes.iter().any(|n| n == OURS), "{what}: the report is not the judge's: {:?}", j.report.notes);
    assert!(!j.text.contains(CANARY), "{what}: the orchestrator's key reached the judgment");
    assert!(!j.text.contains(FORGED), "{what}: a forged line reached the judgment");
}

/// What the library's process said when its attack got through.
fn breach_lines(report: &JudgeReport) -> String {
    let tail = report.stderr_tail.as_deref().unwrap_or("");
    tail.lines().filter(|l| l.contains(BREACH)).collect::<Vec<_>>().join("; ")
}

fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

// ---------------------------------------------------------------------------------------
// Escapes to the host: sockets, io_uring, the keyring, devices, other processes.

/// Held by the seccomp allow-list (no socket creation): Landlock alone does not govern
/// connecting to a Unix socket by path.
#[test]
fn a_unix_socket_named_by_path_is_out_of_reach() {
    let dir = own_dir("unix-path");
    let sock = dir.path().join("listener.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let body = r#"
  const char* paths[] = {RT_SOCKET, "/run/docker.sock", "/var/run/docker.sock", "/run/containerd/containerd.sock",
                         "/run/dbus/system_bus_socket", "/run/systemd/private", "/var/snap/lxd/common/lxd/unix.socket"};
  for (unsigned i = 0; i < sizeof paths / sizeof *paths; ++i) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) continue;
    struct sockaddr_un sa = {0}; sa.sun_family = AF_UNIX; strncpy(sa.sun_path, paths[i], sizeof sa.sun_path - 1);
    if (connect(fd, (struct sockaddr*)&sa, sizeof sa) == 0) { write(fd, "x", 1); char m[200]; snprintf(m, sizeof m, "connected to %s", paths[i]); breach(m); }
    close(fd);
  }"#;
    let j = attack("unix_path", body, &[("RT_SOCKET", quoted(&sock.display().to_string()))]);
    let arrived = std::iter::from_fn(|| listener.accept().ok()).count();
    assert_eq!(arrived, 0, "a worker connected to a Unix socket outside its scratch folder");
    assert_refused(&j, "a Unix socket by path");
}

/// Held by Landlock (abstract sockets scoped on this kernel) and the allow-list.
#[test]
fn an_abstract_unix_socket_is_out_of_reach() {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("nightshift-redteam-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let body = r#"
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd >= 0) {
    struct sockaddr_un sa = {0}; sa.sun_family = AF_UNIX; strncpy(sa.sun_path + 1, RT_NAME, sizeof sa.sun_path - 2);
    socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(RT_NAME);
    if (connect(fd, (struct sockaddr*)&sa, len) == 0) breach("connected to the test's abstract socket");
    close(fd);
  }"#;
    let j = attack("unix_abstract", body, &[("RT_NAME", quoted(&name))]);
    assert_eq!(std::iter::from_fn(|| listener.accept().ok()).count(), 0, "an abstract socket was reached");
    assert_refused(&j, "an abstract Unix socket");
}

/// Held by seccomp (no IP sockets).
#[test]
fn udp_and_tcp_reach_nothing() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let body = r#"
  struct sockaddr_in u = {0}; u.sin_family = AF_INET; u.sin_port = htons(RT_UDP); u.sin_addr.s_addr = htonl(0x7f000001);
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s >= 0 && sendto(s, "x", 1, 0, (struct sockaddr*)&u, sizeof u) == 1) breach("sent a UDP datagram to the host");
  struct sockaddr_in t = u; t.sin_port = htons(RT_TCP);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (c >= 0 && connect(c, (struct sockaddr*)&t, sizeof t) == 0) breach("connected over TCP to the host");
  struct sockaddr_in6 t6 = {0}; t6.sin6_family = AF_INET6; t6.sin6_port = htons(RT_TCP);
  inet_pton(AF_INET6, "::ffff:127.0.0.1", &t6.sin6_addr);
  int c6 = socket(AF_INET6, SOCK_STREAM, 0);
  if (c6 >= 0 && connect(c6, (struct sockaddr*)&t6, sizeof t6) == 0) breach("connected over TCP/IPv6 to the host");"#;
    let ports = [
        ("RT_UDP", udp.local_addr().unwrap().port().to_string()),
        ("RT_TCP", tcp.local_addr().unwrap().port().to_string()),
    ];
    let j = attack("udp_tcp", body, &ports);
    let mut buf = [0u8; 16];
    assert!(udp.recv_from(&mut buf).is_err(), "a datagram reached the host");
    assert!(tcp.accept().is_err(), "a TCP connection reached the host");
    assert_refused(&j, "UDP and TCP");
}

/// The io_uring part shared by the CI test and the GPU case: an io_uring of 8 entries
/// made by hand, its socket operation (which seccomp's filter on `socket` never sees),
/// then a plain `sendto` on the socket it made.
const IO_URING: &str = r#"
  struct io_uring_params p; memset(&p, 0, sizeof p);
  int ring = (int)syscall(__NR_io_uring_setup, 8, &p);
  if (ring < 0) return;
  size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
  if (p.features & IORING_FEAT_SINGLE_MMAP) { if (cq_len > sq_len) sq_len = cq_len; cq_len = sq_len; }
  char* sq = mmap(0, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
  char* cq = (p.features & IORING_FEAT_SINGLE_MMAP) ? sq : mmap(0, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_CQ_RING);
  struct io_uring_sqe* sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
  if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) breach("io_uring_setup worked (its rings did not map)");
  unsigned tail = *(unsigned*)(sq + p.sq_off.tail), idx = tail & *(unsigned*)(sq + p.sq_off.ring_mask);
  memset(&sqes[idx], 0, sizeof sqes[idx]);
  sqes[idx].opcode = 45;  // IORING_OP_SOCKET (5.19)
  sqes[idx].fd = AF_INET; sqes[idx].off = SOCK_DGRAM; sqes[idx].len = 0;
  ((unsigned*)(sq + p.sq_off.array))[idx] = idx;
  __atomic_store_n((unsigned*)(sq + p.sq_off.tail), tail + 1, __ATOMIC_RELEASE);
  syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
  unsigned head = __atomic_load_n((unsigned*)(cq + p.cq_off.head), __ATOMIC_ACQUIRE);
  struct io_uring_cqe* cqe = (struct io_uring_cqe*)(cq + p.cq_off.cqes) + (head & *(unsigned*)(cq + p.cq_off.ring_mask));
  int s = cqe->res;
  if (s >= 0) {
    struct sockaddr_in u = {0}; u.sin_family = AF_INET; u.sin_port = htons(RT_UDP); u.sin_addr.s_addr = htonl(0x7f000001);
    sendto(s, "x", 1, 0, (struct sockaddr*)&u, sizeof u);
    breach("io_uring made an IPv4 socket that seccomp's socket filter never saw");
  }
  breach("io_uring_setup worked");"#;

/// Held by the seccomp allow-list (no io_uring): io_uring's socket operation would make
/// the IPv4 socket seccomp refuses to `socket`.
#[test]
fn io_uring_is_refused_and_its_socket_reaches_nothing() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let j = attack("io_uring", IO_URING, &[("RT_UDP", udp.local_addr().unwrap().port().to_string())]);
    let mut buf = [0u8; 16];
    let datagram = udp.recv_from(&mut buf).is_ok();
    assert!(!datagram, "a datagram sent from an io_uring socket reached the host");
    assert_refused(&j, "io_uring");
}

/// Puts a key the worker must not read into a fresh session keyring of this thread (its
/// children inherit it); None where this machine refuses keyctl altogether.
fn plant_session_key(description: &str, payload: &str) -> Option<i64> {
    let desc = std::ffi::CString::new(description).unwrap();
    // SAFETY: plain keyctl/add_key calls with NUL-terminated strings that outlive them.
    unsafe {
        if libc::syscall(libc::SYS_keyctl, 1 /* KEYCTL_JOIN_SESSION_KEYRING */, std::ptr::null::<libc::c_char>()) < 0 {
            return None;
        }
        let id = libc::syscall(
            libc::SYS_add_key,
            c"user".as_ptr(),
            desc.as_ptr(),
            payload.as_ptr(),
            payload.len(),
            -3i32, /* KEY_SPEC_SESSION_KEYRING */
        );
        (id > 0).then_some(id)
    }
}

/// Held by a fresh empty session keyring and keyctl refused: otherwise the worker inherits
/// the keyring of whoever started the run, and reads its keys.
#[test]
fn the_session_keyring_is_out_of_reach() {
    let description = format!("nightshift-redteam-{}", std::process::id());
    let Some(_) = plant_session_key(&description, CANARY) else {
        eprintln!("this machine refuses keyctl to this process: nothing to reach");
        return;
    };
    let body = r#"
  long rings[] = {KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING, KEY_SPEC_PROCESS_KEYRING};
  for (unsigned i = 0; i < sizeof rings / sizeof *rings; ++i) {
    long id = syscall(__NR_keyctl, KEYCTL_SEARCH, rings[i], "user", RT_KEY, 0);
    if (id > 0) {
      char payload[256] = {0};
      long n = syscall(__NR_keyctl, KEYCTL_READ, id, payload, sizeof payload - 1);
      char m[400]; snprintf(m, sizeof m, "read the key %s: %ld bytes: %s", RT_KEY, n, payload); breach(m);
    }
  }"#;
    let j = attack("keyring", body, &[("RT_KEY", quoted(&description))]);
    assert_refused(&j, "the session keyring");
}

/// Held by dropped capabilities and seccomp refusing mknod. Skipped unless root: a device
/// node needs CAP_MKNOD.
#[test]
fn a_device_node_cannot_be_made_even_as_root() {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: mknod is refused by the kernel itself");
        return;
    }
    let body = r#"
  if (mknod("rt-null", S_IFCHR | 0600, makedev(1, 3)) == 0) breach("made a character device node in its scratch folder");
  struct stat st;
  if (stat("/", &st) == 0 && mknod("rt-disk", S_IFBLK | 0600, st.st_dev) == 0) breach("made a block device node of the root disk");"#;
    assert_refused(&attack("mknod", body, &[]), "mknod");
}

/// Held by dropping every capability: a root worker would otherwise keep CAP_SYS_PTRACE,
/// CAP_SYS_RAWIO, CAP_DAC_OVERRIDE, CAP_MKNOD...
#[test]
fn a_worker_holds_no_capabilities() {
    let body = r#"
  struct { unsigned version; int pid; } hdr = {0x20080522, 0};
  struct { unsigned effective, permitted, inheritable; } data[2] = {{0}};
  if (syscall(SYS_capget, &hdr, data) == 0 && (data[0].effective | data[1].effective | data[0].permitted | data[1].permitted)) {
    char m[128]; snprintf(m, sizeof m, "holds capabilities %08x%08x", data[1].effective, data[0].effective); breach(m);
  }"#;
    assert_refused(&attack("capabilities", body, &[]), "capabilities");
}

/// Held by seccomp (prlimit, setpriority and affinity on itself only): otherwise a worker
/// could set the judge's limits (RLIMIT_NOFILE at 3 would starve it of descriptors),
/// renice it, and pin it to one core. Only reads are tried here.
#[test]
fn the_parents_limits_and_scheduling_are_out_of_reach() {
    let body = r#"
  pid_t parent = getppid();
  struct rlimit old;
  if (syscall(SYS_prlimit64, parent, RLIMIT_NOFILE, NULL, &old) == 0) breach("read the judge's limits with prlimit64");
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, parent);
  if (errno == 0 && setpriority(PRIO_PROCESS, parent, nice) == 0) breach("set the judge's priority");
  unsigned long mask[16];
  if (syscall(SYS_sched_getaffinity, parent, sizeof mask, mask) > 0 && syscall(SYS_sched_setaffinity, parent, sizeof mask, mask) == 0) breach("set the judge's CPU affinity");"#;
    assert_refused(&attack("prlimit", body, &[]), "the parent's limits");
}

/// Held by seccomp (it refuses them all).
#[test]
fn the_parent_cannot_be_traced_read_or_signalled() {
    let body = r#"
  pid_t parent = getppid();
  if (syscall(SYS_ptrace, 0x4206 /* PTRACE_SEIZE */, parent, 0, 0) == 0) breach("seized the judge with ptrace");
  char buf[8]; struct iovec local = {buf, sizeof buf}, remote = {(void*)0x400000, sizeof buf};
  errno = 0;
  if (syscall(SYS_process_vm_readv, parent, &local, 1, &remote, 1, 0) >= 0 || errno == EFAULT) breach("process_vm_readv reached the judge");
  int pidfd = (int)syscall(SYS_pidfd_open, parent, 0);
  if (pidfd >= 0) {
    int out = (int)syscall(SYS_pidfd_getfd, pidfd, 1, 0);
    if (out >= 0) { dprintf(out, "{\"event\":\"done\",\"report\":{\"outcome\":{\"outcome\":\"passed\"},\"notes\":[\"nightshift_forged\"]}}\n"); breach("took the judge's stdout with pidfd_getfd"); }
    breach("pidfd_open on the judge");
  }
  char path[64]; snprintf(path, sizeof path, "/proc/%d/mem", (int)parent);
  if (open(path, O_RDONLY) >= 0) breach("opened the judge's /proc/<pid>/mem");
  snprintf(path, sizeof path, "/proc/%d/fd/1", (int)parent);
  int o = open(path, O_WRONLY);
  if (o >= 0) { dprintf(o, "{\"event\":\"done\",\"report\":{\"outcome\":{\"outcome\":\"passed\"},\"notes\":[\"nightshift_forged\"]}}\n"); breach("opened the judge's stdout through /proc"); }
  if (kill(parent, SIGSTOP) == 0) breach("stopped the judge");
  if (syscall(SYS_tgkill, parent, parent, SIGSTOP) == 0) breach("stopped the judge with tgkill");
  if (killpg(getpgrp(), SIGSTOP) == 0) breach("stopped its own process group (the judge's)");
  if (kill(-1, SIGCONT) == 0) breach("signalled every process it may");"#;
    assert_refused(&attack("parent", body, &[]), "the parent");
}

/// Its own environment holds nothing: the worker empties `environ` and overwrites the
/// kernel's copy of the strings in place, so /proc/self/environ reads zeros. Its own
/// mappings stay readable on purpose (the CUDA driver reads /proc/self/maps: hidden, cuInit
/// fails with CUDA_ERROR_OUT_OF_MEMORY on an H100); what they show is worth nothing, since
/// no key or judge state lives in the worker (docs/threat-model.md).
#[test]
fn its_own_environment_is_empty() {
    let body = r#"
  const char* files[] = {"/proc/self/environ", "/proc/thread-self/environ"};
  for (unsigned i = 0; i < sizeof files / sizeof *files; ++i) {
    int fd = open(files[i], O_RDONLY);
    if (fd < 0) continue;
    static char buf[1 << 16];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    for (ssize_t k = 0; k < n; ++k)
      if (buf[k] != 0) { char m[128]; snprintf(m, sizeof m, "read a variable from %s", files[i]); breach(m); break; }
  }
  if (getenv("PATH") || getenv("HOME") || getenv("OPENAI_API_KEY")) breach("getenv found a variable");"#;
    assert_refused(&attack("proc_self", body, &[]), "its environment");
}

/// Held by Landlock (it grants no other process's /proc entry).
#[test]
fn no_other_processes_environment_is_readable() {
    let body = r#"
  DIR* d = opendir("/proc");
  struct dirent* e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300]; snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) continue;
    static char buf[1 << 16]; ssize_t n = read(fd, buf, sizeof buf - 1); close(fd);
    if (n <= 0) continue;
    if ((pid_t)atoi(e->d_name) == getpid()) continue;
    buf[n] = 0;
    for (ssize_t i = 0; i < n; i += strlen(buf + i) + 1)
      if (strstr(buf + i, "KEY")) { char m[400]; snprintf(m, sizeof m, "pid %s: %s", e->d_name, buf + i); breach(m); }
    char m[320]; snprintf(m, sizeof m, "read %s", path); breach(m);
  }"#;
    assert_refused(&attack("environ", body, &[]), "other processes' environment");
}

/// A worker holds its stdio and the judge's socket and nothing else (close_range from fd 4
/// before exec): a descriptor the orchestrator inherited without close-on-exec (from the
/// user's shell, a CI wrapper, a service manager's sockets) must not reach candidate code.
#[test]
fn a_worker_inherits_nothing_but_its_socket() {
    let body = r#"
  DIR* d = opendir("/proc/self/fd");
  struct dirent* e;
  int listing = d ? dirfd(d) : -1;
  while (d && (e = readdir(d))) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd <= 3 || fd == listing) continue;
    char link[64], target[PATH_MAX] = {0}; snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    readlink(link, target, sizeof target - 1);
    char info[64], flags[256] = {0}; snprintf(info, sizeof info, "/proc/self/fdinfo/%d", fd);
    int fi = open(info, O_RDONLY); if (fi >= 0) { read(fi, flags, sizeof flags - 1); close(fi); }
    for (char* p = flags; *p; ++p) if (*p == '\n' || *p == '\t') *p = ' ';
    char m[PATH_MAX + 400]; snprintf(m, sizeof m, "inherited fd %d -> %s (%s)", fd, target, flags); breach(m);
  }"#;
    let dir = own_dir("fds");
    let lib = build_library(dir.path(), "fds", body, &[]);
    let held = std::fs::File::create(dir.path().join("the-users-open-file.txt")).unwrap();
    use std::os::fd::AsRawFd;
    assert_refused(&judge_with(&lib, Some(held.as_raw_fd())), "inherited descriptors");
}

/// Held by Landlock: a file outside the scratch folder is neither written, moved,
/// linked, truncated nor removed, and nothing new appears beside it, in /tmp or above the
/// scratch folder.
#[test]
fn a_file_outside_the_scratch_folder_keeps_its_contents_and_its_name() {
    let dir = own_dir("victim");
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "original\n").unwrap();
    let body = r#"
  int fd = open(RT_VICTIM, O_WRONLY | O_APPEND);
  if (fd >= 0 && write(fd, "x", 1) == 1) breach("appended to the victim");
  if (truncate(RT_VICTIM, 0) == 0) breach("truncated the victim");
  if (link(RT_VICTIM, "linked") == 0) { int l = open("linked", O_WRONLY | O_APPEND); if (l >= 0 && write(l, "x", 1) == 1) breach("wrote the victim through a hard link in scratch"); breach("hard-linked the victim into scratch"); }
  if (rename(RT_VICTIM, "moved") == 0) breach("moved the victim into scratch");
  if (symlink(RT_VICTIM, "symlinked") == 0) { int s = open("symlinked", O_WRONLY | O_APPEND); if (s >= 0 && write(s, "x", 1) == 1) breach("wrote the victim through a symlink in scratch"); }
  if (unlink(RT_VICTIM) == 0) breach("removed the victim");
  if (open(RT_BESIDE, O_WRONLY | O_CREAT, 0600) >= 0) breach("created a file beside the victim");
  if (mkdir(RT_BESIDE ".d", 0700) == 0) breach("made a folder beside the victim");
  if (open("/tmp/nightshift-redteam-escape.txt", O_WRONLY | O_CREAT, 0600) >= 0) breach("created a file in /tmp");
  if (open("../escape.txt", O_WRONLY | O_CREAT, 0600) >= 0) breach("created a file above its scratch folder");
  int own = open("inside.txt", O_WRONLY | O_CREAT, 0600);
  if (own < 0 || write(own, "ok", 2) != 2) breach("(not an escape) its own scratch folder is not writable: not the sandbox under test");"#;
    let beside = dir.path().join("beside.txt");
    let defines =
        [("RT_VICTIM", quoted(&victim.display().to_string())), ("RT_BESIDE", quoted(&beside.display().to_string()))];
    let j = attack("victim", body, &defines);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original\n", "the victim changed");
    assert!(!beside.exists() && !dir.path().join("beside.txt.d").exists(), "something appeared beside the victim");
    assert!(!Path::new("/tmp/nightshift-redteam-escape.txt").exists(), "a file appeared in /tmp");
    assert_refused(&j, "a file outside scratch");
}

/// Held by the seccomp allow-list (no chmod, chown, utimes or xattr calls). Landlock
/// governs reads, writes and names, not a file's metadata: without it a worker would change
/// the mode, times and extended attributes of any file its user owns (as root, any file:
/// `chmod u+s` on a shell, `chown` of a key), outside its folder too.
#[test]
fn a_file_outside_the_scratch_folder_keeps_its_mode_owner_times_and_attributes() {
    use std::os::unix::fs::MetadataExt;
    let dir = own_dir("metadata");
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "original\n").unwrap();
    let before = std::fs::metadata(&victim).unwrap();
    let body = r#"
  if (chmod(RT_VICTIM, 04777) == 0) breach("made the victim setuid and world-writable (chmod)");
  if (getuid() == 0 && chown(RT_VICTIM, 65534, 65534) == 0) breach("gave the victim away (chown)");
  struct timespec times[2] = {{0, 0}, {0, 0}};
  if (utimensat(AT_FDCWD, RT_VICTIM, times, 0) == 0) breach("reset the victim's times (utimensat)");
  if (syscall(SYS_setxattr, RT_VICTIM, "user.redteam", "x", 1, 0) == 0) breach("set an extended attribute on the victim");"#;
    let j = attack("metadata", body, &[("RT_VICTIM", quoted(&victim.display().to_string()))]);
    let after = std::fs::metadata(&victim).unwrap();
    assert_refused(&j, "a file's metadata outside scratch");
    assert_eq!(
        (before.mode(), before.uid(), before.gid(), before.mtime()),
        (after.mode(), after.uid(), after.gid(), after.mtime()),
        "the victim's mode, owner or times changed"
    );
}

/// Held by Landlock (reads only): the build cache (every judged library, the
/// baseline's too) cannot be rewritten from a worker, which would change later verdicts.
#[test]
fn the_libraries_it_was_built_beside_cannot_be_rewritten() {
    let dir = own_dir("cache");
    let sibling = dir.path().join("baseline-entry");
    std::fs::create_dir(&sibling).unwrap();
    std::fs::write(sibling.join("kernel.so"), "the baseline's library\n").unwrap();
    let body = r#"
  Dl_info info;
  if (!dladdr((void*)&breach, &info) || !info.dli_fname) return;
  int self = open(info.dli_fname, O_WRONLY | O_APPEND);
  if (self >= 0) breach("opened its own library for writing");
  if (open(RT_SIBLING, O_WRONLY | O_APPEND) >= 0) breach("opened another library in the cache for writing");
  if (rename(RT_SIBLING, RT_SIBLING ".old") == 0) breach("moved another library in the cache");
  if (unlink(info.dli_fname) == 0) breach("removed its own library");"#;
    let sib = sibling.join("kernel.so");
    let lib = build_library(dir.path(), "cache", body, &[("RT_SIBLING", quoted(&sib.display().to_string()))]);
    let j = judge(&lib);
    assert_eq!(std::fs::read_to_string(&sib).unwrap(), "the baseline's library\n");
    assert!(lib.exists());
    assert_refused(&j, "the build cache");
}

/// The scratch folder has a quota: a candidate that fills it is ended and judged for it,
/// before it fills the file system it shares with the run's own files (the private runtime
/// folder, or ~/.cache where there is no XDG_RUNTIME_DIR: the run directory and build
/// cache too). Writes 1 GiB in files under the 256 MiB file-size limit, then removes them.
#[test]
fn the_scratch_folder_has_a_quota() {
    let body = r#"
  static char block[1 << 20];
  long total = 0;
  for (int f = 0; f < 8 && total < (1L << 30); ++f) {
    char name[32]; snprintf(name, sizeof name, "fill-%d", f);
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) break;
    for (int i = 0; i < 128; ++i) { if (write(fd, block, sizeof block) != (ssize_t)sizeof block) { f = 99; break; } total += sizeof block; }
    close(fd);
  }
  for (int f = 0; f < 8; ++f) { char name[32]; snprintf(name, sizeof name, "fill-%d", f); unlink(name); }
  if (total >= (1L << 30)) breach("wrote 1 GiB into its scratch folder");"#;
    // The judge measures the folder and ends a worker past its quota: the verdict is the
    // library's (resource-leak), long before 1 GiB.
    let j = attack("fill", body, &[]);
    assert!(!j.text.contains(BREACH), "the scratch quota: the attack got through: {}", breach_lines(&j.report));
    assert_eq!(j.class, "resource-leak", "{}", j.text);
}

// ---------------------------------------------------------------------------------------
// Forged verdicts: frames on the judge's socket, judge lines on every descriptor.

/// Held by the protocol: a reply the judge never asked for puts every later answer out of turn.
#[test]
fn a_frame_written_on_the_judges_socket_is_a_forged_report() {
    let body = r#"
  const char* frames[] = {"{\"reply\":\"loaded\"}", "{\"reply\":\"ran\",\"event_ms\":[0.001]}"};
  for (int i = 0; i < 2; ++i) {
    uint32_t len = (uint32_t)strlen(frames[i]);
    write(3, &len, 4); write(3, frames[i], len);
  }"#;
    let j = attack("frames", body, &[]);
    assert_eq!(j.class, "forged-report", "{}", j.text);
    assert!(!j.text.contains(BREACH));
}

/// Held by the judge's design: the judge's stdout is a pipe no worker holds; lines a worker prints are
/// its own output, and a worker that then leaves is a process exit, never a verdict.
#[test]
fn judge_lines_written_by_a_worker_are_not_a_verdict() {
    let body = r#"
  const char* line = "{\"event\":\"done\",\"report\":{\"outcome\":{\"outcome\":\"passed\"},\"notes\":[\"nightshift_forged\"],\"timing\":{\"speedup\":9.0}}}\n";
  write(1, line, strlen(line));
  write(2, line, strlen(line));
  char path[64]; snprintf(path, sizeof path, "/proc/%d/fd/1", (int)getppid());
  int out = open(path, O_WRONLY);
  if (out >= 0) { write(out, line, strlen(line)); breach("wrote into the judge's stdout"); }"#;
    let j = attack("judge_lines", body, &[]);
    assert_eq!(j.class, "passed", "{}", j.text);
    assert!(j.report.notes.iter().all(|n| n != FORGED), "a forged note reached the report: {:?}", j.report.notes);
    assert!(j.report.notes.iter().any(|n| n == OURS));

    // The same lines, then an exit before the worker can answer the load.
    let j = attack("judge_lines_exit", &format!("{body}\n  _exit(0);"), &[]);
    assert_eq!(j.class, "process-exit", "{}", j.text);
    assert!(j.report.notes.iter().all(|n| n != FORGED));
}

// ---------------------------------------------------------------------------------------
// Secrets through the build: nvcc reads only the toolkit, the task and its own folder.

/// A candidate for vector_add whose build reads `secret` by `how` (`include` or `incbin`),
/// then writes what it read where a verdict would show it.
fn secret_candidate(how: &str, secret: &Path) -> String {
    let read = match how {
        "include" => format!("#include \"{}\"\n", secret.display()),
        _ => format!(
            "#ifndef __CUDA_ARCH__\nasm(\".section .rodata\\n.global rt_secret\\nrt_secret:\\n.incbin \\\"{}\\\"\\n.byte 0\\n.previous\");\n#endif\nextern \"C\" const char rt_secret[];\n#define RT_SECRET rt_secret\n",
            secret.display()
        ),
    };
    format!(
        r#"#include <cuda_runtime.h>
#include <stdio.h>
{read}
__global__ void add(const float* a, const float* b, float* c, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i] + 1.0f;
}}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {{
  fprintf(stderr, "{BREACH}: the build read %s\n", RT_SECRET);
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}}
"#
    )
}

/// `nightshift eval` of a candidate that reads a file outside its folders at build time:
/// the build must fail (a build error, not a GPU error after a build that worked), and
/// the secret must appear nowhere in what eval says.
fn build_reads_secret(how: &str) {
    let home = own_dir("home");
    let secret = home.path().join(".secret.h");
    std::fs::write(&secret, format!("#define RT_SECRET \"{CANARY}\"\n")).unwrap();
    let dir = own_dir("candidate");
    let cand = dir.path().join(format!("{how}_secret.cu"));
    std::fs::write(&cand, secret_candidate(how, &secret)).unwrap();
    let out = common::building_command()
        .args(["eval", "tasks/vector_add"])
        .arg(&cand)
        .args(["--arch", "sm_90a", "--json"])
        .env("HOME", home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let verdict: Option<Value> = serde_json::from_str(&stdout).ok();
    let class = verdict.as_ref().and_then(|v| v["failure"]["class"].as_str().map(str::to_string));
    assert_eq!(
        class.as_deref(),
        Some("build-error"),
        "a build that reads {} must fail (exit {:?}):\n{stdout}\n{stderr}",
        secret.display(),
        out.status.code()
    );
    assert!(
        !stdout.contains(CANARY) && !stderr.contains(CANARY),
        "the secret reached the verdict:\n{stdout}\n{stderr}"
    );
}

/// Held by the confined build (nvcc reads the toolkit, the task and its folder only).
#[test]
fn a_build_cannot_include_a_file_outside_its_folders() {
    build_reads_secret("include");
}

/// Held by the confined build.
#[test]
fn a_build_cannot_incbin_a_file_outside_its_folders() {
    build_reads_secret("incbin");
}
