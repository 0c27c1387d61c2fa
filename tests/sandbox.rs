//! The worker's sandbox and report seal, tested without a GPU: a probe process that
//! applies the real sandbox and tries to break out, and simulated optimize runs whose
//! candidates attack from their constructors (which run in a real, isolated, sandboxed
//! worker even when the GPU work is simulated).

mod common;

use nightshift::wall::sandbox::probe::{self, Extra, HostedSpec, ProbePolicy, ProbeReport};
use serde_json::Value;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Listeners the probe must not reach, set up before it starts and checked after it ends:
/// TCP and UDP on the loopback, Unix sockets (stream at a path, seqpacket at PATH.seq) in
/// /tmp, in a folder standing for $HOME and, where this user may, in /run, and the same
/// two kinds on an abstract name.
struct Listeners {
    tcp: std::net::TcpListener,
    udp: std::net::UdpSocket,
    unix: Vec<(PathBuf, std::os::unix::net::UnixListener, OwnedFd)>,
    abstract_name: String,
    abstract_listeners: (std::os::unix::net::UnixListener, OwnedFd),
    _home: tempfile::TempDir,
    home: PathBuf,
}

/// A nonblocking seqpacket listener at a path or an abstract name.
fn seqpacket_listener(path: Option<&Path>, abstract_name: Option<&str>) -> OwnedFd {
    // SAFETY: plain syscalls on a descriptor owned here and a zeroed, then filled address.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0);
        assert!(fd >= 0);
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let (bytes, offset) = match (path, abstract_name) {
            (Some(p), _) => (p.as_os_str().as_bytes().to_vec(), 0),
            (None, Some(n)) => (n.as_bytes().to_vec(), 1),
            _ => unreachable!(),
        };
        for (i, b) in bytes.iter().enumerate() {
            addr.sun_path[offset + i] = *b as libc::c_char;
        }
        let base = std::mem::size_of::<libc::sa_family_t>();
        let len = if offset == 1 { base + 1 + bytes.len() } else { base + bytes.len() + 1 };
        assert_eq!(libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len as libc::socklen_t), 0);
        assert_eq!(libc::listen(fd, 4), 0);
        OwnedFd::from_raw_fd(fd)
    }
}

fn nothing_pending(fd: &OwnedFd) -> bool {
    // SAFETY: accept on a nonblocking listener we own.
    let got = unsafe { libc::accept(fd.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut()) };
    got < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
}

impl Listeners {
    /// `home_in`: where the folder standing for $HOME is made (outside /tmp for the hosted
    /// tests, so that hiding it is the home's doing and not /tmp's).
    fn new(home_in: &Path) -> Listeners {
        use std::os::linux::net::SocketAddrExt;
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        // Where this user may write: the checkout's target folder, else the system's
        // temporary folders.
        let home_dir = [home_in, Path::new("/var/tmp"), &std::env::temp_dir()]
            .into_iter()
            .find_map(|d| tempfile::tempdir_in(d).ok())
            .expect("a folder to stand for $HOME");
        let home = home_dir.path().canonicalize().unwrap();
        let tag = format!("{}-{}", std::process::id(), rand_tag());
        let mut places = vec![PathBuf::from(format!("/tmp/nightshift-probe-{tag}.sock")), home.join("x.sock")];
        let run = PathBuf::from(format!("/run/nightshift-probe-{tag}.sock"));
        if std::os::unix::net::UnixListener::bind(&run).is_ok() {
            let _ = std::fs::remove_file(&run);
            places.push(run);
        }
        let unix = places
            .into_iter()
            .map(|p| {
                let stream = std::os::unix::net::UnixListener::bind(&p).unwrap();
                stream.set_nonblocking(true).unwrap();
                let seq = seqpacket_listener(Some(&PathBuf::from(format!("{}.seq", p.display()))), None);
                (p, stream, seq)
            })
            .collect();
        let abstract_name = format!("nightshift-probe-{tag}");
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        let stream = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        stream.set_nonblocking(true).unwrap();
        let seq = seqpacket_listener(None, Some(&format!("{abstract_name}.seq")));
        Listeners { tcp, udp, unix, abstract_name, abstract_listeners: (stream, seq), _home: home_dir, home }
    }

    fn extra(&self) -> Extra {
        Extra {
            port: Some(self.tcp.local_addr().unwrap().port()),
            udp_port: Some(self.udp.local_addr().unwrap().port()),
            unix: self.unix.iter().map(|(p, _, _)| p.clone()).collect(),
            abstract_names: vec![self.abstract_name.clone()],
            ..Extra::default()
        }
    }

    /// Nothing reached any listener.
    fn assert_untouched(&self) {
        assert!(
            matches!(self.tcp.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "a TCP connection reached this process's listener"
        );
        assert!(self.udp.recv_from(&mut [0u8; 64]).is_err(), "a UDP datagram reached this process's socket");
        for (p, stream, seq) in &self.unix {
            assert!(
                matches!(stream.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
                "a connection reached {}",
                p.display()
            );
            assert!(nothing_pending(seq), "a seqpacket connection reached {}.seq", p.display());
        }
        let (stream, seq) = &self.abstract_listeners;
        assert!(matches!(stream.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock));
        assert!(nothing_pending(seq), "a connection reached @{}.seq", self.abstract_name);
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        for (p, _, _) in &self.unix {
            let _ = std::fs::remove_file(p);
            let _ = std::fs::remove_file(format!("{}.seq", p.display()));
        }
    }
}

fn rand_tag() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos() as u64).unwrap_or(0)
}

/// Plants a key in a fresh session keyring of this thread (the probe started from it
/// inherits the keyring): its serial, or None where keyrings are unavailable.
fn planted_key() -> Option<i64> {
    // SAFETY: keyctl and add_key with NUL-terminated strings and a payload we own.
    unsafe {
        if libc::syscall(libc::SYS_keyctl, 1 as libc::c_long, c"nightshift-test".as_ptr()) < 0 {
            return None;
        }
        let payload = b"a secret of the user's";
        let serial = libc::syscall(
            libc::SYS_add_key,
            c"user".as_ptr(),
            c"nightshift-probe-secret".as_ptr(),
            payload.as_ptr(),
            payload.len(),
            -3 as libc::c_long,
        );
        (serial > 0).then_some(serial)
    }
}

/// The CUDA runtime and cuBLAS of the wheel toolchain in `.cuda/` (one folder, as in
/// /usr/local/cuda/lib64), when it is installed.
fn wheel_libraries() -> Option<(PathBuf, PathBuf)> {
    let lib = std::fs::read_dir(common::root().join(".cuda/lib")).ok()?.flatten().find_map(|e| {
        let dir = e.path().join("site-packages/nvidia/cu13/lib");
        dir.is_dir().then_some(dir)
    })?;
    let (cudart, cublas) = (lib.join("libcudart.so.13"), lib.join("libcublas.so.13"));
    (cudart.is_file() && cublas.is_file()).then_some((cudart, cublas))
}

static PEEK: [u8; 8] = *b"peekaboo";

fn breaches(report: &ProbeReport) -> Vec<String> {
    report.breaches().iter().map(|a| format!("{} ({})", a.action, a.detail)).collect()
}

#[test]
fn the_sandbox_refuses_every_escape_and_allows_the_scratch_folder() {
    let listeners = Listeners::new(&common::root().join("target"));
    let key = planted_key();
    if key.is_none() {
        eprintln!("no keyrings here: the planted-key part is skipped");
    }
    let wheel = wheel_libraries();
    if wheel.is_none() {
        eprintln!("no wheel toolchain in .cuda/: the library part is skipped");
    }
    let extra = Extra {
        key,
        peek: Some(PEEK.as_ptr() as u64),
        library: wheel.as_ref().map(|w| w.0.clone()),
        forbidden_library: wheel.as_ref().map(|w| w.1.clone()),
        secret_var: Some("NV_NIGHTSHIFT_PROBE_SECRET".into()),
        ..listeners.extra()
    };
    // An NV_ variable, like the ones compute-sanitizer sets: the orchestrator passes those on.
    let secret = format!("sk-probe-{}", rand_tag());
    let env = [("NV_NIGHTSHIFT_PROBE_SECRET".to_string(), secret)];
    let report = probe::spawn_with(&common::nightshift_bin(), extra, &env).expect("the probe reports");
    let escapes = breaches(&report);
    assert!(escapes.is_empty(), "escapes: {escapes:?}\nlayers: {:?}", report.layers);
    listeners.assert_untouched();
    let tried: Vec<&str> = report.attempts.iter().map(|a| a.action.as_str()).collect();
    let mut must = vec![
        "write /",
        "write a file in /tmp",
        "/proc/self/environ",
        "/proc/self/mem",
        "signal the parent",
        "tgkill",
        "fork",
        "exec",
        "IPv4 socket",
        "socket pair",
        "connect to 127.0.0.1",
        "UDP datagram",
        "Unix socket /tmp/",
        "x.sock",
        "abstract Unix socket",
        "io_uring",
        "mknod",
        "keyring",
        "prlimit64",
        "ptrace",
        "process_vm_readv",
        "after the scrub",
        "environment block",
    ];
    if key.is_some() {
        must.push("planted key");
    }
    if wheel.is_some() {
        must.extend(["load the granted library", "libcublas.so.13", "read the bytes", "copy"]);
    }
    for m in must {
        assert!(tried.iter().any(|a| a.contains(m)), "the probe did not try `{m}`: {tried:?}");
    }
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } == 0 {
        let mknod = attempt(&report, "mknod");
        assert!(mknod.detail.contains("not permitted"), "root's mknod is refused by the filter: {mknod:?}");
    }
    assert!(report.attempts.iter().filter(|a| a.should_be_allowed).all(|a| a.allowed), "scratch writes work");
    // This machine's kernel has Landlock, seccomp and keyrings; CI runs on the same kind.
    for layer in &report.layers {
        assert!(layer.active, "layer {} is off: {}", layer.name, layer.detail);
    }
    for name in ["rlimits", "keyring", "capabilities", "landlock", "seccomp", "environment"] {
        assert!(report.layers.iter().any(|l| l.name == name), "no {name} layer: {:?}", report.layers);
    }
}

#[test]
fn a_baseline_may_load_the_vendor_library_its_task_names_and_a_candidate_may_not() {
    let Some((cudart, cublas)) = wheel_libraries() else {
        eprintln!("no wheel toolchain in .cuda/: skipped");
        return;
    };
    let exe = common::nightshift_bin();
    let run = |vendor: Vec<String>| {
        let extra = Extra {
            library: Some(cudart.clone()),
            forbidden_library: Some(cublas.clone()),
            vendor,
            ..Extra::default()
        };
        probe::spawn_with(&exe, extra, &[]).expect("the probe reports")
    };
    let candidate = run(Vec::new());
    let load = attempt(&candidate, "load /");
    assert!(!load.allowed && load.detail.contains("Permission denied"), "{load:?}");
    assert!(attempt(&candidate, "load the granted library").allowed, "the runtime beside it loads");
    let baseline = run(vec!["cublas".into()]);
    assert!(breaches(&baseline).is_empty(), "{:?}", breaches(&baseline));
    let load = attempt(&baseline, "load /");
    assert!(load.allowed, "a policy naming cublas loads it: {load:?}");
}

fn nightshift() -> Command {
    common::building_command()
}

/// A stand-in for ncu: a shell that runs the probe as its child and waits for it, the way
/// ncu runs the worker.
fn stand_in_tool() -> Vec<OsString> {
    ["/bin/sh", "-c", "\"$0\" \"$@\"; exit $?"].map(OsString::from).to_vec()
}

fn attempt<'a>(report: &'a ProbeReport, part: &str) -> &'a probe::Attempt {
    let tried: Vec<&str> = report.attempts.iter().map(|a| a.action.as_str()).collect();
    report.attempts.iter().find(|a| a.action.contains(part)).unwrap_or_else(|| panic!("no `{part}` in {tried:?}"))
}

/// The probe under the hosted arrangement, below a stand-in tool, with every target: the
/// listeners, a planted key, the wheel's libraries, an environment secret.
fn hosted_probe(policy: ProbePolicy, listeners: &Listeners) -> probe::HostedProbe {
    let wheel = wheel_libraries();
    let spec = HostedSpec {
        policy,
        extra: Extra {
            key: planted_key(),
            library: wheel.as_ref().map(|w| w.0.clone()),
            forbidden_library: wheel.as_ref().map(|w| w.1.clone()),
            secret_var: Some("NV_NIGHTSHIFT_PROBE_SECRET".into()),
            ..listeners.extra()
        },
        host: stand_in_tool(),
        launcher: Vec::new(),
        allow_unconfined: false,
        home: Some(listeners.home.clone()),
        env: vec![("NV_NIGHTSHIFT_PROBE_SECRET".into(), format!("sk-probe-{}", rand_tag()))],
    };
    probe::spawn_hosted(&common::nightshift_bin(), &spec).expect("the hosted probe reports")
}

/// Whether this machine can make the hosted arrangement; if not, checks that the
/// refusal says why and runs nothing, and says so.
fn confined_here(got: &probe::HostedProbe) -> bool {
    if got.arrangement.confined {
        return true;
    }
    let why = got.arrangement.shortfall();
    eprintln!("this machine cannot make the hosted arrangement ({why}): checking the refusal instead");
    assert!(!got.arrangement.started, "an unconfined tool was started without the waiver");
    assert!(got.report.is_none(), "the probe ran although the trampoline refused");
    assert!(!why.is_empty(), "a refusal without a reason");
    false
}

#[test]
fn under_a_hosting_tool_the_shared_tmp_the_home_the_network_and_outside_processes_are_out_of_reach() {
    let listeners = Listeners::new(&common::root().join("target"));
    let got = hosted_probe(ProbePolicy::Hosted, &listeners);
    if !confined_here(&got) {
        return;
    }
    let report = got.report.expect("the probe ran");
    let escapes = breaches(&report);
    assert!(escapes.is_empty(), "escapes: {escapes:?}\narrangement: {:?}", got.arrangement);
    listeners.assert_untouched();
    // Judged by the shared /tmp itself: the spawner looked for the file there afterwards.
    let escape = attempt(&report, "write /tmp/nightshift-probe-escape");
    assert!(!escape.allowed, "the probe's file reached the shared /tmp: {escape:?}");
    for refused in [
        "signal the process that started it",
        "signal the parent",
        "fork",
        "mount a tmpfs",
        "IPv4 socket",
        "loopback",
        "io_uring",
        "keyring",
        "x.sock",
        "abstract Unix socket",
        "UDP datagram",
        "prlimit64",
        "ptrace",
        "process_vm_readv",
        "mknod",
        "/proc/self/environ",
        "after the scrub",
        "environment block",
    ] {
        assert!(!attempt(&report, refused).allowed, "{refused}");
    }
    if wheel_libraries().is_some() {
        assert!(!attempt(&report, "load /").allowed, "a hosted candidate loads no cuBLAS either");
        assert!(attempt(&report, "load the granted library").allowed);
    }
    for works in ["scratch folder", "/proc/self/status"] {
        let a = attempt(&report, works);
        assert!(a.allowed, "{works}: {}", a.detail);
    }
    for layer in &report.layers {
        assert!(layer.active, "worker layer {} is off: {}", layer.name, layer.detail);
    }
    for layer in &got.arrangement.layers {
        assert!(got.arrangement.holds(layer), "{} does not hold: {}", layer.name, layer.detail);
    }
    let mount = got.arrangement.layers.iter().find(|l| l.name == "mount namespace").unwrap();
    for hidden in ["/tmp", "/run"] {
        if Path::new(hidden).is_dir() {
            assert!(mount.detail.contains(hidden), "{hidden} is not made private: {}", mount.detail);
        }
    }
    // A home of its own, unless it lies in a folder made private anyway (a checkout in /tmp).
    let home = listeners.home.to_str().unwrap();
    let inside_another = ["/tmp", "/var/tmp", "/dev/shm", "/run"].iter().any(|f| listeners.home.starts_with(f));
    assert!(inside_another || mount.detail.contains(home), "{home} is not made private: {}", mount.detail);
}

#[test]
fn the_namespaces_alone_hide_the_host_without_the_worker_sandbox() {
    let listeners = Listeners::new(&common::root().join("target"));
    let got = hosted_probe(ProbePolicy::None, &listeners);
    if !confined_here(&got) {
        return;
    }
    let report = got.report.expect("the probe ran");
    assert!(report.layers.is_empty(), "no worker sandbox under this policy: {:?}", report.layers);
    let escapes = breaches(&report);
    assert!(escapes.is_empty(), "escapes: {escapes:?}");
    listeners.assert_untouched();
    // Not refused: absent. The PID namespace has no such process to signal, the mount
    // namespace no such socket file, the network namespace no such listener.
    let signal = attempt(&report, "signal the process that started it");
    assert!(signal.detail.contains("No such process"), "{signal:?}");
    let connect = attempt(&report, "connect to 127.0.0.1");
    assert!(connect.detail.contains("refused"), "only the namespace's own loopback answers: {connect:?}");
    for (path, _, _) in &listeners.unix {
        let a = attempt(&report, &format!("Unix socket {}", path.display()));
        assert!(a.detail.contains("No such file"), "{} is in sight: {a:?}", path.display());
    }
    let a = attempt(&report, "abstract Unix socket");
    assert!(a.detail.contains("refused"), "the host's abstract names are another namespace's: {a:?}");
    assert!(!attempt(&report, "write /tmp/nightshift-probe-escape").allowed);
    assert!(attempt(&report, "own /tmp").allowed && attempt(&report, "loopback").allowed);
}

/// Hard-links (or copies) `file` into `dir`.
fn place(file: &Path, dir: &Path) -> PathBuf {
    let to = dir.join(file.file_name().unwrap());
    if std::fs::hard_link(file, &to).is_err() {
        std::fs::copy(file, &to).unwrap();
    }
    to
}

#[test]
fn hosted_runs_work_when_the_binary_and_the_libraries_live_under_tmp_or_the_home() {
    let listeners = Listeners::new(&common::root().join("target"));
    let wheel = wheel_libraries();
    let tmp = tempfile::tempdir_in("/tmp").unwrap();
    for (place_name, dir) in [("/tmp", tmp.path().to_path_buf()), ("$HOME", listeners.home.join("apps"))] {
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        let exe = place(&common::nightshift_bin(), &dir.join("bin"));
        let library = wheel.as_ref().map(|w| place(&w.0, &dir.join("lib")));
        let spec = HostedSpec {
            policy: ProbePolicy::Hosted,
            extra: Extra { library: library.clone(), ..Extra::default() },
            host: stand_in_tool(),
            launcher: Vec::new(),
            allow_unconfined: false,
            home: Some(listeners.home.clone()),
            env: Vec::new(),
        };
        let got = probe::spawn_hosted(&exe, &spec)
            .unwrap_or_else(|e| panic!("the trampoline under {place_name} reports: {e}"));
        if !confined_here(&got) {
            return;
        }
        let report = got.report.unwrap_or_else(|| panic!("the probe under {place_name} ran: {}", got.stderr));
        assert!(breaches(&report).is_empty(), "{place_name}: {:?}", breaches(&report));
        if library.is_some() {
            assert!(attempt(&report, "load the granted library").allowed, "{place_name}");
        }
        let mount = got.arrangement.layers.iter().find(|l| l.name == "mount namespace").unwrap();
        assert!(mount.detail.contains("bound back in"), "{place_name}: {}", mount.detail);
    }
}

/// Whether any process runs with `arg` on its command line.
fn running_with(arg: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c.split(|b| *b == 0).any(|part| part == arg.as_bytes()))
    })
}

#[test]
fn the_trampoline_ends_as_its_tool_did_and_takes_everything_inside_with_it() {
    let exe = common::nightshift_bin();
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("hosting.json");
    let hosted = |script: &str| {
        let mut cmd = Command::new(&exe);
        cmd.args(["hosted", "--report"]).arg(&report).args(["--", "/bin/sh", "-c", script]);
        cmd
    };
    let out = hosted("exit 7").output().unwrap();
    let arrangement = nightshift::wall::sandbox::hosted::read_report(&report).unwrap();
    if !arrangement.confined {
        eprintln!("no hosted arrangement here ({}): its exit is the refusal's", arrangement.shortfall());
        assert_eq!(out.status.code(), Some(nightshift::wall::sandbox::hosted::REFUSED_EXIT as i32));
        return;
    }
    assert_eq!(out.status.code(), Some(7), "{}", String::from_utf8_lossy(&out.stderr));
    let out = hosted("kill -SEGV $$").output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "a tool's death by signal comes back as one");
    // A sleeper that left the process group (and the session) still ends when the
    // orchestrator kills the trampoline's group at the deadline.
    let marker = format!("{}", 900_000 + std::process::id() % 90_000);
    let mut cmd = hosted(&format!("setsid sleep {marker} & sleep {marker}"));
    let got = nightshift::toolkit::process::run_captured(&mut cmd, std::time::Duration::from_millis(1500)).unwrap();
    assert!(got.timed_out);
    let gone = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        !running_with(&marker)
    });
    assert!(gone, "a process of the hosted run outlived the kill of its group");
}

/// `setpriv`, when this test runs as root and it is installed: the way to run a
/// trampoline as another user, or with no capabilities.
fn setpriv_as_root() -> Option<()> {
    // SAFETY: plain syscall.
    let root = unsafe { libc::geteuid() } == 0;
    let found = Command::new("setpriv").arg("--version").output().is_ok_and(|o| o.status.success());
    (root && found).then_some(())
}

#[test]
fn hosted_runs_are_confined_for_an_unprivileged_user_too() {
    if setpriv_as_root().is_none() {
        eprintln!("not root, or no setpriv: the hosted tests above already ran as an unprivileged user");
        return;
    }
    let exe = common::nightshift_bin();
    let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups", "--"];
    if !Command::new("setpriv").args(nobody).arg(&exe).arg("--version").output().is_ok_and(|o| o.status.success()) {
        eprintln!("user nobody cannot run {}: skipped", exe.display());
        return;
    }
    // Its home under /tmp: the evaluation folders lie under a folder the arrangement makes
    // private, so they are bound back in.
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let out = Command::new("setpriv")
        .args(nobody)
        .arg(&exe)
        .args(["check-env", "--json"])
        .env("HOME", home.path())
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_CACHE_HOME")
        .current_dir(common::root())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    let items = v["items"].as_array().unwrap();
    let get = |name: &str| items.iter().find(|i| i["name"] == name).unwrap_or_else(|| panic!("no {name}: {v}"));
    let user = get("hosted user ns");
    if user["found"] != true {
        eprintln!("user namespaces are refused to unprivileged users here: {user}");
        assert_eq!(get("hosted probe")["found"], false, "refused, and said so");
        return;
    }
    assert!(user["detail"].as_str().unwrap().contains("user 65534"), "{user}");
    for name in ["hosted mount ns", "hosted network ns", "hosted pid ns", "hosted probe", "sandbox probe"] {
        assert_eq!(get(name)["found"], true, "{}", get(name));
    }
    assert!(get("hosted mount ns")["detail"].as_str().unwrap().contains("bound back in"), "{}", get("hosted mount ns"));
}

/// Runs what follows as root in a user namespace whose own user namespaces are capped at
/// zero, without capabilities: a kernel that forbids the hosted arrangement, made real.
fn forbidding_launcher() -> Option<Vec<OsString>> {
    setpriv_as_root()?;
    let script =
        "echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --bounding-set=-all --inh-caps=-all -- \"$@\"";
    let launcher: Vec<OsString> = ["unshare", "-Ur", "sh", "-c", script, "sh"].map(OsString::from).to_vec();
    let works = Command::new(&launcher[0]).args(&launcher[1..]).arg("true").output().is_ok_and(|o| o.status.success());
    works.then_some(launcher)
}

#[test]
fn where_namespaces_are_forbidden_hosted_runs_are_refused_unless_waived() {
    let Some(launcher) = forbidding_launcher() else {
        eprintln!("cannot make a kernel that forbids user namespaces here (needs root, unshare and setpriv): skipped");
        return;
    };
    let exe = common::nightshift_bin();
    let spec = HostedSpec {
        policy: ProbePolicy::Hosted,
        extra: Extra::default(),
        host: stand_in_tool(),
        launcher: launcher.clone(),
        allow_unconfined: false,
        home: None,
        env: Vec::new(),
    };
    let refused = probe::spawn_hosted(&exe, &spec).expect("the trampoline reports");
    assert!(!refused.arrangement.started && refused.report.is_none(), "{:?}", refused.arrangement);
    let why = refused.arrangement.shortfall();
    assert!(why.contains("max_user_namespaces"), "the refusal names the kernel setting: {why}");
    // Waived, the tool runs with the worker's own sandbox alone, in the host's namespaces;
    // that sandbox still holds (the shared /tmp among the rest).
    let waived = probe::spawn_hosted(&exe, &HostedSpec { allow_unconfined: true, ..spec }).unwrap();
    assert!(waived.arrangement.started && !waived.arrangement.confined, "{:?}", waived.arrangement);
    let report = waived.report.expect("the waived probe ran");
    assert!(breaches(&report).is_empty(), "{:?}", breaches(&report));
    assert!(!attempt(&report, "write /tmp/nightshift-probe-escape").allowed, "{:?}", report.attempts);

    common::require_toolchain();
    let run_dir = tempfile::tempdir().unwrap();
    let out_dir = run_dir.path().join("run");
    let run = |args: &[OsString]| {
        let out = Command::new(&launcher[0])
            .args(&launcher[1..])
            .arg(&exe)
            .args(args)
            .current_dir(common::root())
            .output()
            .unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.code(), said, String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let commands: [Vec<OsString>; 3] = [
        ["diagnose", "tasks/vector_add"].map(OsString::from).to_vec(),
        ["eval", "tasks/vector_add", "--sanitize", "--arch", "sm_90a"].map(OsString::from).to_vec(),
        ["optimize", "tasks/vector_add", "--arch", "sm_90a", "--max-nodes", "1", "--out"]
            .map(OsString::from)
            .into_iter()
            .chain([out_dir.clone().into_os_string()])
            .collect(),
    ];
    for args in &commands {
        let (code, said, _) = run(args);
        assert_eq!(code, Some(3), "{args:?}: {said}");
        assert!(said.contains("--allow-unconfined-profiling"), "{args:?} names the waiver: {said}");
        assert!(said.contains("max_user_namespaces"), "{args:?} names the cause: {said}");
    }
    assert!(!out_dir.exists(), "a refused optimize leaves no run directory");
    // With the waiver the commands get past the hosted arrangement (to the next thing this
    // machine lacks).
    let (_, said, _) = run(&["diagnose", "tasks/vector_add", "--allow-unconfined-profiling"].map(OsString::from));
    assert!(!said.contains("private namespaces"), "waived, yet refused: {said}");
    // check-env says which layers are off, why, and how to go on.
    let (_, said, stdout) = run(&["check-env", "--json"].map(OsString::from));
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {said}"));
    let item = |name: &str| v["items"].as_array().and_then(|i| i.iter().find(|i| i["name"] == name)).cloned();
    for name in ["hosted user ns", "hosted mount ns", "hosted network ns", "hosted pid ns"] {
        let layer = item(name).unwrap_or_else(|| panic!("no {name}: {said}"));
        assert_eq!(layer["found"], false, "{layer}");
        assert!(layer["hint"].as_str().unwrap_or("").contains("max_user_namespaces"), "{layer}");
    }
    let probe = item("hosted probe").unwrap();
    assert_eq!(probe["found"], false);
    assert!(probe["hint"].as_str().unwrap().contains("--allow-unconfined-profiling"), "{probe}");
}

/// A softmax candidate that passes in simulation with `speedup`, plus `attack` run from
/// its constructor when the worker maps it.
fn attacker(speedup: &str, attack: &str) -> String {
    format!(
        r#"#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/syscall.h>
// NIGHTSHIFT_SIM(speedup={speedup})
__attribute__((constructor)) static void attack() {{
{attack}
}}
__global__ void k(const float* x, float* y, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }}
extern "C" void softmax(const float* x, float* y, int rows, int cols, cudaStream_t stream) {{
  k<<<(rows * cols + 255) / 256, 256, 0, stream>>>(x, y, rows * cols);
}}
"#
    )
}

#[test]
fn attacks_from_candidate_code_cannot_forge_a_verdict_or_stop_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let replies = tmp.path().join("replies");
    std::fs::create_dir(&replies).unwrap();
    let escaped = tmp.path().join("escaped.txt");
    let forged = r#"{"event":"done","report":{"outcome":{"outcome":"passed"}}}"#;
    let attacks = [
        // A forged verdict on every descriptor, then out before the worker can speak.
        (
            "a_forge",
            "9.0",
            format!(
                r#"const char* l = "{}\n"; for (int fd = 3; fd < 256; ++fd) write(fd, l, strlen(l)); _exit(0);"#,
                forged.replace('"', "\\\"")
            ),
        ),
        (
            "b_kill_parent",
            "1.20",
            "kill(getppid(), SIGKILL); killpg(getpgid(getppid()), SIGKILL); kill(0, SIGKILL);".to_string(),
        ),
        ("c_close_all", "9.0", "for (int fd = 0; fd < 1024; ++fd) close(fd);".to_string()),
        (
            "d_escape",
            "1.10",
            format!(
                r#"FILE* f = fopen("{}", "w"); if (f) {{ fputs("out", f); fclose(f); }} if (syscall(SYS_fork) == 0) _exit(0); setsid();"#,
                escaped.display()
            ),
        ),
    ];
    for (name, speedup, code) in &attacks {
        std::fs::write(replies.join(format!("{name}.cu")), attacker(speedup, code)).unwrap();
    }
    let run = tmp.path().join("run");
    let out = nightshift()
        .args(["optimize", "tasks/softmax", "--simulate-gpu", "10", "--parallel", "1", "--max-nodes", "5", "--json"])
        .arg("--generator")
        .arg(format!("replay:{}", replies.display()))
        .arg("--out")
        .arg(&run)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some(), "the orchestrator was killed: {stderr}");
    let summary: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    let classes = node_classes(&run);
    let class_of = |name: &str| classes.iter().find(|(f, _)| f.contains(name)).map(|(_, c)| c.as_str());
    // Lines on every descriptor reach the judge's socket as garbage, and the exit ends it:
    // either way a rejection, never the forged 9x.
    assert!(matches!(class_of("a-forge"), Some("process-exit" | "forged-report")), "{classes:?}");
    assert_eq!(class_of("c-close-all"), Some("forged-report"), "{classes:?}");
    assert_eq!(class_of("b-kill-parent"), Some("passed"), "refused signals leave the candidate running: {classes:?}");
    assert_eq!(class_of("d-escape"), Some("passed"), "{classes:?}");
    assert!(!escaped.exists(), "a candidate wrote outside its scratch folder");
    assert!(
        (summary["best"]["speedup"].as_f64().unwrap() - 1.2).abs() < 1e-9,
        "the best is the honest-looking 1.2x, never a forged 9x: {}",
        summary["best"]
    );
}

/// (technique, outcome class) per judged node; replayed files are named by their stem.
fn node_classes(run: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(run.join("events.jsonl")).unwrap_or_default();
    let mut technique = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for e in text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
        if e["event"] == "node-proposed" {
            technique.insert(e["id"].as_u64(), e["technique"].as_str().unwrap_or("").to_string());
        }
        if e["event"] == "node-finished" {
            let class = e["summary"]["failure_class"]
                .as_str()
                .unwrap_or(if e["summary"]["passed"] == true { "passed" } else { "?" })
                .to_string();
            out.push((technique.get(&e["id"].as_u64()).cloned().unwrap_or_default(), class));
        }
    }
    out
}

#[test]
fn a_hosted_worker_answers_through_the_trampoline_and_its_layers_are_recorded() {
    use nightshift::wall::protocol::{Standalone, StandaloneRequest};
    use nightshift::wall::{run_standalone, EvalError, HostTool};
    let task = nightshift::task::Task::load(&common::root().join("tasks/vector_add")).unwrap();
    // A request for a library that does not exist: the worker puts its sandbox up, then
    // either finds no GPU (this machine) or no library, and says so on its stdout, through
    // the trampoline and the tool.
    let request = StandaloneRequest {
        mode: Standalone::Sanitize,
        task,
        library: std::path::PathBuf::from("/nonexistent/candidate.so"),
        trusted: false,
        device: 0,
        seed: 1,
        policy: None,
        host_outputs: Vec::new(),
    };
    let argv = stand_in_tool().iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let host = HostTool { argv, outputs: Vec::new(), allow_unconfined: false };
    let exe = common::nightshift_bin();
    let run = match run_standalone(&exe, request, std::time::Duration::from_secs(60), &host) {
        Err(EvalError::Env(e)) => {
            eprintln!("this machine cannot make the hosted arrangement: checking the refusal instead: {e}");
            assert!(e.to_string().contains("--allow-unconfined-profiling"), "{e}");
            return;
        }
        other => other.expect("the hosted worker runs"),
    };
    let (error, _) = run.done.as_ref().unwrap_or_else(|| panic!("no last word came through: {}", run.stderr));
    assert!(error.is_some(), "no GPU or no library: the call cannot have run");
    let layers: Vec<String> = run.hosted_layers().iter().map(|l| l.name.clone()).collect();
    for name in ["user namespace", "mount namespace", "network namespace", "pid namespace", "landlock", "seccomp"] {
        assert!(layers.iter().any(|l| l == name), "{name} not recorded: {layers:?}");
    }
    assert!(run.hosting.as_ref().is_some_and(|a| a.confined), "{:?}", run.hosting);
}
