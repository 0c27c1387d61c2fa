//! Hostile candidates against the wall, on a real GPU. Each file in tests/hostile/ is one
//! attack; its header (the `//` lines it starts with) says what it must get:
//!
//! ```text
//! // expect: forged-report            the class (or `passed`), `a|b` for either
//! // expect.diagnose: passed          another class in one mode
//! // task: vector_add                 tasks/NAME, or tests/hostile/tasks/NAME
//! // flags: --no-time                 extra flags for eval (optional)
//! // modes: eval sanitize diagnose optimize   (default: eval and the `hosted:` ones)
//! // hosted: sanitize diagnose        the older way to name hosted modes
//! // max-speedup: 1.04                passed only at or below this speedup (a reliable one)
//! // requires: cublas                 skipped where the toolkit has no cuBLAS
//! // checks: build-cache              also check the build cache is unchanged
//! // threat: escape to the host       the threat model's class
//! // mechanism: ...                   what should stop it
//! // why: what it does
//! ```
//!
//! Modes: `eval` (`nightshift eval TASK CASE`), `sanitize` (`eval --sanitize`: the judge,
//! then compute-sanitizer on a standalone worker), `diagnose` (ncu on a standalone worker)
//! and `optimize` (a one-node run whose only reply is the case, replayed; the node's
//! verdict is the row's).
//!
//! A case may name resources with `#define NIGHTSHIFT_...` lines that the test rewrites
//! before the run, and the test then checks them: a TCP listener (`LISTENER_PORT`), a UDP
//! socket (`UDP_PORT`), a Unix socket by path outside /tmp, /run and $HOME
//! (`UNIX_SOCKET`), an abstract one (`ABSTRACT_SOCKET`), a file outside every scratch
//! folder that must stay as it is (`VICTIM_FILE`), a header in $HOME holding a canary
//! (`SECRET_FILE`), a key in the session keyring the runs inherit (`KEY_NAME`), and the
//! toolkit's cuBLAS (`CUBLAS_FILE`). Nothing may reach them, and no canary (the API key in
//! the orchestrator's environment, the secret, the key), no `REDTEAM-BREACH` line (what a
//! case prints when its attack got through) and no forged name (`nightshift_forged`) may
//! reach what nightshift prints. After every run the GPU must hold no process and still
//! work (a context, a fill, a read-back, in this process), and the caller must have ended
//! with its own exit code. At the end no file named `nightshift-hostile-escape.txt` may
//! exist where a candidate could have written it, and the baseline must still pass.
//!
//! Run on the GPU machine, with the staged binaries (`../shared/scripts/device-pack.sh
//! --tests`):
//!
//! ```text
//! NIGHTSHIFT_BIN=$PWD/.device/bin/nightshift PATH=$PWD/.device/bin:/usr/local/cuda/bin:$PATH \
//!   .device/tests/hostile-* --ignored --nocapture --test-threads 1
//! ```
//!
//! Subsets: `NIGHTSHIFT_HOSTILE_CASES=rt_*,noop` (names or `*` patterns, comma-separated;
//! `!rt_*` leaves out what it matches),
//! `NIGHTSHIFT_HOSTILE_MODES=eval,diagnose`, `NIGHTSHIFT_HOSTILE_SHARD=1/2` (every second
//! case, for runs split across device calls). `NIGHTSHIFT_HOSTILE_REPORT=FILE` also writes
//! the table there. It prints one row per case and mode as it goes, the table and a summary
//! line at the end, and fails on any mismatch.

mod common;

use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const CANARY: &str = "sk-hostile-canary-0a1b2c3d";
const SECRET_CANARY: &str = "nightshift-home-secret-4e5f";
const KEY_CANARY: &str = "nightshift-keyring-secret-7a8b";
const ESCAPE_NAME: &str = "nightshift-hostile-escape.txt";
/// What the names in a case's forged output start with: a verdict or a diagnosis that
/// repeats one was read from the candidate, not from the judge or the tool.
const FORGED_MARK: &str = "nightshift_forged";
/// What a case prints when its attack got through.
const BREACH_MARK: &str = "REDTEAM-BREACH";
const VICTIM_TEXT: &str = "the user's file, which no candidate may change\n";

/// How a case is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Mode {
    Eval,
    Sanitize,
    Diagnose,
    Optimize,
}

impl Mode {
    fn parse(word: &str) -> Option<Mode> {
        match word {
            "eval" => Some(Mode::Eval),
            "sanitize" => Some(Mode::Sanitize),
            "diagnose" => Some(Mode::Diagnose),
            "optimize" => Some(Mode::Optimize),
            _ => None,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Mode::Eval => "eval",
            Mode::Sanitize => "sanitize",
            Mode::Diagnose => "diagnose",
            Mode::Optimize => "optimize",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mode::Eval => "eval",
            Mode::Sanitize => "eval --sanitize",
            Mode::Diagnose => "diagnose",
            Mode::Optimize => "optimize",
        }
    }
}

/// The threat model's classes (docs/threat-model.md), as cases name them.
const THREATS: &[&str] = &[
    "forged verdict",
    "escaped timing",
    "slowed baseline",
    "memoization and replay",
    "forbidden library",
    "escape to the host",
    "secrets through the build",
    "denial and blame",
    "sanitizer evasion",
    "wrong but equal",
];

struct Case {
    name: String,
    path: PathBuf,
    /// Accepted classes per mode.
    expect: BTreeMap<Mode, Vec<String>>,
    task: String,
    flags: Vec<String>,
    modes: Vec<Mode>,
    max_speedup: Option<f64>,
    requires: Vec<String>,
    checks: Vec<String>,
    threat: String,
    mechanism: String,
    why: String,
    /// The `NIGHTSHIFT_...` names its `#define` lines ask for.
    wants: Vec<String>,
}

impl Case {
    fn task_dir(&self) -> PathBuf {
        task_dir(&self.task)
    }
}

fn task_dir(task: &str) -> PathBuf {
    let own = common::root().join("tests/hostile/tasks").join(task);
    if own.is_dir() {
        own
    } else {
        common::root().join("tasks").join(task)
    }
}

/// The header: every `// key: value` line before the first line that is not a comment.
fn headers(text: &str) -> Vec<(String, String)> {
    text.lines()
        .take_while(|l| l.starts_with("//"))
        .filter_map(|l| {
            let (k, v) = l.trim_start_matches('/').split_once(':')?;
            let k = k.trim();
            (!k.is_empty() && !k.contains(' ')).then(|| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

fn parse_case(path: &Path) -> Result<Case, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let name = path.file_stem().unwrap().to_string_lossy().into_owned();
    let h = headers(&text);
    let get = |k: &str| h.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let expect = get("expect").ok_or("no `// expect:` line")?;
    let task = get("task").ok_or("no `// task:` line")?;
    let words =
        |v: Option<String>| -> Vec<String> { v.unwrap_or_default().split_whitespace().map(String::from).collect() };
    let mut modes: Vec<Mode> = match get("modes") {
        Some(m) => m
            .split_whitespace()
            .map(|w| Mode::parse(w).ok_or_else(|| format!("unknown mode `{w}`")))
            .collect::<Result<_, _>>()?,
        None => std::iter::once(Ok(Mode::Eval))
            .chain(words(get("hosted")).iter().map(|w| match w.as_str() {
                "sanitize" => Ok(Mode::Sanitize),
                "diagnose" => Ok(Mode::Diagnose),
                other => Err(format!("unknown hosted mode `{other}`")),
            }))
            .collect::<Result<_, _>>()?,
    };
    modes.sort();
    modes.dedup();
    let alternatives = |v: &str| v.split('|').map(|s| s.trim().to_string()).collect::<Vec<_>>();
    let mut per_mode = BTreeMap::new();
    for &m in &modes {
        let v = get(&format!("expect.{}", m.word())).unwrap_or_else(|| expect.clone());
        per_mode.insert(m, alternatives(&v));
    }
    let max_speedup = match get("max-speedup") {
        Some(v) => Some(v.parse::<f64>().map_err(|e| format!("max-speedup `{v}`: {e}"))?),
        None => None,
    };
    let wants = text
        .lines()
        .filter_map(|l| l.strip_prefix("#define NIGHTSHIFT_"))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(String::from)
        .collect();
    Ok(Case {
        expect: per_mode,
        task,
        flags: words(get("flags")),
        modes,
        max_speedup,
        requires: words(get("requires")),
        checks: words(get("checks")),
        threat: get("threat").unwrap_or_default(),
        mechanism: get("mechanism").unwrap_or_default(),
        why: get("why").unwrap_or_default(),
        wants,
        name,
        path: path.to_path_buf(),
    })
}

fn cases() -> Vec<Case> {
    let dir = common::root().join("tests/hostile");
    let mut out: Vec<Case> = std::fs::read_dir(&dir)
        .expect("tests/hostile")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .map(|p| parse_case(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Every class a verdict can carry, and the outcomes without one.
fn known_classes() -> Vec<String> {
    let mut names: Vec<String> = ["passed", "task-error"].map(String::from).to_vec();
    for class in [
        "build-error",
        "build-timeout",
        "missing-entry",
        "forbidden-import",
        "launch-error",
        "illegal-address",
        "crash",
        "process-exit",
        "timeout",
        "wrong-answer",
        "unwritten-output",
        "out-of-bounds-write",
        "input-mutation",
        "nondeterminism",
        "stale-output",
        "timing-anomaly",
        "sanitizer-error",
        "forged-report",
        "call-dependent",
        "noisy-timing",
        "resource-leak",
    ] {
        let parsed: nightshift::wall::protocol::FailureClass =
            serde_json::from_value(Value::String(class.into())).unwrap_or_else(|e| panic!("{class}: {e}"));
        names.push(parsed.name().to_string());
    }
    names
}

#[test]
fn every_case_says_what_it_expects() {
    let all = cases();
    assert!(all.len() >= 24, "the issue asks for at least 24 cases, there are {}", all.len());
    let known = known_classes();
    let mut per_threat: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &all {
        let dir = c.task_dir();
        assert!(dir.is_dir(), "{}: no task {}", c.name, c.task);
        nightshift::task::Task::load(&dir).unwrap_or_else(|e| panic!("{}: task {}: {e}", c.name, c.task));
        assert!(!c.why.is_empty(), "{}: say why", c.name);
        for (mode, classes) in &c.expect {
            for class in classes {
                assert!(
                    known.contains(class),
                    "{} ({}): `{class}` is no class a verdict can carry",
                    c.name,
                    mode.word()
                );
            }
        }
        for want in &c.wants {
            assert!(RESOURCES.contains(&want.as_str()), "{}: no resource NIGHTSHIFT_{want}", c.name);
        }
        for r in &c.requires {
            assert_eq!(r, "cublas", "{}: unknown requirement {r}", c.name);
        }
        if c.name.starts_with("rt_") {
            assert!(
                THREATS.contains(&c.threat.as_str()),
                "{}: threat `{}` is not a class of the threat model",
                c.name,
                c.threat
            );
            assert!(!c.mechanism.is_empty(), "{}: say which mechanism should stop it", c.name);
            *per_threat.entry(THREATS.iter().find(|t| **t == c.threat).unwrap()).or_default() += 1;
        }
    }
    for t in THREATS {
        assert!(per_threat.get(t).copied().unwrap_or(0) >= 2, "fewer than two red-team cases of `{t}`: {per_threat:?}");
    }
}

/// Builds every case for real on a machine without a GPU (where eval stops at the missing
/// driver once the build is done): a case that should be refused at build time is, and
/// every other case builds, so that no GPU time goes to a typo. The `#define NIGHTSHIFT_`
/// resources get stand-ins: a header for SECRET_FILE, this test's own executable for
/// CUBLAS_FILE (a file past 64 KiB).
#[test]
#[ignore = "builds every hostile case with nvcc: minutes of CPU"]
fn every_case_builds_as_it_expects() {
    if nightshift::wall::gpu::driver_present() {
        eprintln!("a GPU machine: every_hostile_case_gets_its_class_and_the_caller_survives builds them all");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.h");
    std::fs::write(&secret, "#define RT_SECRET \"stand-in\"\n").unwrap();
    let stand_ins: BTreeMap<&str, String> = [
        ("SECRET_FILE", quoted(&secret.display().to_string())),
        ("CUBLAS_FILE", quoted(&std::env::current_exe().unwrap().display().to_string())),
    ]
    .into_iter()
    .collect();
    let at_build = ["build-error", "build-timeout", "forbidden-import", "missing-entry"];
    let mut wrong = Vec::new();
    for c in cases().into_iter().filter(|c| selected(&c.name)) {
        let text: String = std::fs::read_to_string(&c.path)
            .unwrap()
            .lines()
            .map(|l| {
                let name = l.strip_prefix("#define NIGHTSHIFT_").and_then(|r| r.split_whitespace().next());
                match name.and_then(|n| stand_ins.get(n).map(|v| (n, v))) {
                    Some((n, v)) => format!("#define NIGHTSHIFT_{n} {v}\n"),
                    None => format!("{l}\n"),
                }
            })
            .collect();
        let source = dir.path().join(c.path.file_name().unwrap());
        std::fs::write(&source, text).unwrap();
        let out = common::building_command()
            .arg("eval")
            .arg(c.task_dir())
            .arg(&source)
            .args(&c.flags)
            .args(["--arch", "sm_90a", "--json"])
            .output()
            .unwrap();
        let v: Option<Value> = serde_json::from_slice(&out.stdout).ok();
        let got = match &v {
            Some(v) if v["error"] == "environment" => "built".to_string(),
            Some(v) => v["failure"]["class"].as_str().unwrap_or("?").to_string(),
            None => format!("no verdict: {}", String::from_utf8_lossy(&out.stderr)),
        };
        let expected = &c.expect[&c.modes[0]];
        let refused_at_build = expected.iter().all(|e| at_build.contains(&e.as_str()));
        let ok = if refused_at_build { expected.contains(&got) } else { got == "built" };
        eprintln!("{}: {got}{}", c.name, if ok { "" } else { "  <-- not as expected" });
        if !ok {
            let message = v.as_ref().map(|v| v["failure"]["message"].to_string()).unwrap_or_default();
            wrong.push(format!(
                "{}: expected {}, got {got}: {message}",
                c.name,
                if refused_at_build { expected.join("|") } else { "a build".into() }
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The `#define NIGHTSHIFT_...` resources the test provides.
const RESOURCES: &[&str] = &[
    "LISTENER_PORT",
    "UDP_PORT",
    "UNIX_SOCKET",
    "ABSTRACT_SOCKET",
    "VICTIM_FILE",
    "SECRET_FILE",
    "KEY_NAME",
    "CUBLAS_FILE",
];

/// Every file named ESCAPE_NAME in the places a candidate would try, to a small depth.
fn escapes(cache: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> =
        vec!["/tmp".into(), "/var/tmp".into(), "/dev/shm".into(), common::root(), cache.into()];
    roots.extend(std::env::var_os("HOME").map(PathBuf::from));
    let mut found = Vec::new();
    let mut stack: Vec<(PathBuf, usize)> = roots.into_iter().map(|r| (r, 0)).collect();
    while let Some((dir, depth)) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_name() == ESCAPE_NAME {
                found.push(p.clone());
            }
            if depth < 3 && e.file_type().is_ok_and(|t| t.is_dir() && !t.is_symlink()) {
                stack.push((p, depth + 1));
            }
        }
    }
    found
}

/// The toolkit's cuBLAS, where one is installed.
fn find_cublas() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for var in ["NIGHTSHIFT_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = std::env::var_os(var) {
            let home = PathBuf::from(home);
            dirs.extend(["lib64", "lib", "targets/x86_64-linux/lib"].map(|d| home.join(d)));
        }
    }
    dirs.extend(
        ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu"]
            .map(PathBuf::from),
    );
    dirs.into_iter().find_map(|d| {
        let mut libs: Vec<PathBuf> = std::fs::read_dir(&d)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libcublas.so"))
                    && std::fs::metadata(p).is_ok_and(|m| m.len() > 65536)
            })
            .collect();
        libs.sort();
        libs.pop()
    })
}

/// Puts a key into a fresh session keyring of this thread (the nightshift processes it
/// starts inherit it); None where keyctl is refused here.
fn plant_session_key(description: &str, payload: &str) -> Option<()> {
    let desc = std::ffi::CString::new(description).ok()?;
    // SAFETY: plain keyctl and add_key calls with NUL-terminated strings that outlive them.
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
        (id > 0).then_some(())
    }
}

/// What the whole run provides to the cases that ask, made once.
struct Shared {
    key_name: Option<String>,
    secret_file: Option<PathBuf>,
    cublas: Option<PathBuf>,
    /// Where the Unix socket listeners go: outside /tmp, /run and $HOME, which hosted runs hide.
    socket_dir: PathBuf,
    cache: PathBuf,
}

impl Shared {
    fn make() -> Shared {
        let key_name = format!("nightshift-redteam-{}", std::process::id());
        let key_name = plant_session_key(&key_name, KEY_CANARY).map(|_| key_name);
        let secret_file = std::env::var_os("HOME").map(PathBuf::from).and_then(|home| {
            let f = home.join(".nightshift-redteam-secret.h");
            std::fs::write(&f, format!("#define RT_SECRET \"{SECRET_CANARY}\"\n")).ok().map(|_| f)
        });
        let socket_dir = [PathBuf::from("/var/lib/nightshift-redteam"), common::root().join("target/redteam-sockets")]
            .into_iter()
            .find(|d| std::fs::create_dir_all(d).is_ok())
            .expect("a folder for the Unix socket listeners");
        let cache = std::env::var_os("NIGHTSHIFT_CACHE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(nightshift::toolkit::build::cache_root);
        Shared { key_name, secret_file, cublas: find_cublas(), socket_dir, cache }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(f) = &self.secret_file {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// The resources one run of a case holds, and what reached them.
struct Bait {
    tcp: Option<TcpListener>,
    udp: Option<UdpSocket>,
    unix: Option<(UnixListener, PathBuf)>,
    abstract_: Option<UnixListener>,
    victim: Option<(tempfile::TempDir, PathBuf, std::fs::Metadata)>,
    /// `#define NIGHTSHIFT_X value` lines, by X.
    defines: BTreeMap<String, String>,
}

fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

impl Bait {
    /// Everything `case` asks for; Err(why) when this machine cannot provide it.
    fn set(case: &Case, shared: &Shared, tag: &str) -> Result<Bait, String> {
        let mut b = Bait { tcp: None, udp: None, unix: None, abstract_: None, victim: None, defines: BTreeMap::new() };
        for want in &case.wants {
            let value = match want.as_str() {
                "LISTENER_PORT" => {
                    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
                    l.set_nonblocking(true).unwrap();
                    let port = l.local_addr().unwrap().port().to_string();
                    b.tcp = Some(l);
                    port
                }
                "UDP_PORT" => {
                    let u = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
                    u.set_nonblocking(true).unwrap();
                    let port = u.local_addr().unwrap().port().to_string();
                    b.udp = Some(u);
                    port
                }
                "UNIX_SOCKET" => {
                    let path = shared.socket_dir.join(format!("{tag}.sock"));
                    let _ = std::fs::remove_file(&path);
                    let l = UnixListener::bind(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                    l.set_nonblocking(true).unwrap();
                    let v = quoted(&path.display().to_string());
                    b.unix = Some((l, path));
                    v
                }
                "ABSTRACT_SOCKET" => {
                    use std::os::linux::net::SocketAddrExt;
                    let name = format!("nightshift-redteam-{tag}");
                    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
                    let l = UnixListener::bind_addr(&addr).map_err(|e| e.to_string())?;
                    l.set_nonblocking(true).unwrap();
                    b.abstract_ = Some(l);
                    quoted(&name)
                }
                "VICTIM_FILE" => {
                    // target/ is absent where only the staged binaries travelled.
                    std::fs::create_dir_all(common::root().join("target")).map_err(|e| e.to_string())?;
                    let dir = tempfile::Builder::new()
                        .prefix("redteam-victim-")
                        .tempdir_in(common::root().join("target"))
                        .map_err(|e| e.to_string())?;
                    let f = dir.path().join("victim.txt");
                    std::fs::write(&f, VICTIM_TEXT).map_err(|e| e.to_string())?;
                    let meta = std::fs::metadata(&f).unwrap();
                    let v = quoted(&f.display().to_string());
                    b.victim = Some((dir, f, meta));
                    v
                }
                "SECRET_FILE" => {
                    quoted(&shared.secret_file.as_ref().ok_or("no $HOME to hold a secret")?.display().to_string())
                }
                "KEY_NAME" => quoted(shared.key_name.as_ref().ok_or("keyctl is refused here")?),
                "CUBLAS_FILE" => match &shared.cublas {
                    Some(p) => quoted(&p.display().to_string()),
                    None if case.requires.iter().any(|r| r == "cublas") => {
                        return Err("no cuBLAS in the toolkit".into())
                    }
                    None => "\"\"".into(),
                },
                other => return Err(format!("unknown resource NIGHTSHIFT_{other}")),
            };
            b.defines.insert(want.clone(), value);
        }
        Ok(b)
    }

    /// The source the run builds: the case, its `#define NIGHTSHIFT_` lines rewritten.
    fn stage(&self, case: &Case, dir: &Path) -> PathBuf {
        if self.defines.is_empty() {
            return case.path.clone();
        }
        let text: String = std::fs::read_to_string(&case.path)
            .unwrap()
            .lines()
            .map(|l| {
                let name = l.strip_prefix("#define NIGHTSHIFT_").and_then(|r| r.split_whitespace().next());
                match name.and_then(|n| self.defines.get(n).map(|v| (n, v))) {
                    Some((n, v)) => format!("#define NIGHTSHIFT_{n} {v}\n"),
                    None => format!("{l}\n"),
                }
            })
            .collect();
        let path = dir.join(case.path.file_name().unwrap());
        std::fs::write(&path, text).unwrap();
        path
    }

    /// What reached the bait: one line each, empty when nothing did.
    fn reached(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(l) = &self.tcp {
            let n = std::iter::from_fn(|| l.accept().ok()).count();
            if n > 0 {
                out.push(format!("{n} TCP connection(s) reached the test's listener"));
            }
        }
        if let Some(u) = &self.udp {
            let mut buf = [0u8; 64];
            let n = std::iter::from_fn(|| u.recv_from(&mut buf).ok()).count();
            if n > 0 {
                out.push(format!("{n} UDP datagram(s) reached the test's socket"));
            }
        }
        if let Some((l, path)) = &self.unix {
            let n = std::iter::from_fn(|| l.accept().ok()).count();
            if n > 0 {
                out.push(format!("{n} connection(s) reached the Unix socket {}", path.display()));
            }
        }
        if let Some(l) = &self.abstract_ {
            let n = std::iter::from_fn(|| l.accept().ok()).count();
            if n > 0 {
                out.push(format!("{n} connection(s) reached the abstract socket"));
            }
        }
        if let Some((_, f, before)) = &self.victim {
            match (std::fs::read_to_string(f), std::fs::metadata(f)) {
                (Ok(text), Ok(after)) => {
                    if text != VICTIM_TEXT {
                        out.push("the victim file's contents changed".into());
                    }
                    if (before.mode(), before.uid(), before.gid(), before.mtime(), before.nlink())
                        != (after.mode(), after.uid(), after.gid(), after.mtime(), after.nlink())
                    {
                        out.push(format!(
                            "the victim file's metadata changed (mode {:o} -> {:o}, owner {}:{} -> {}:{}, links {} -> {})",
                            before.mode(),
                            after.mode(),
                            before.uid(),
                            before.gid(),
                            after.uid(),
                            after.gid(),
                            before.nlink(),
                            after.nlink()
                        ));
                    }
                }
                _ => out.push("the victim file is gone".into()),
            }
        }
        if let Some((_, path)) = &self.unix {
            let _ = std::fs::remove_file(path);
        }
        out
    }
}

/// Every library in the build cache, by path: its length, modification time and first 4 KiB.
fn cache_snapshot(cache: &Path) -> BTreeMap<PathBuf, (u64, i64, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(cache.join("build")).into_iter().flatten().flatten() {
        let lib = e.path().join("kernel.so");
        if let Ok(m) = std::fs::metadata(&lib) {
            let head: Vec<u8> = std::fs::read(&lib).map(|b| b.into_iter().take(4096).collect()).unwrap_or_default();
            out.insert(lib, (m.len(), m.mtime(), head));
        }
    }
    out
}

/// What one run of a case amounted to.
struct Outcome {
    class: String,
    exit: Option<i32>,
    /// stdout and stderr of the caller (and, for optimize, the run's event log and verdicts),
    /// without the kernel's source a node report quotes: where a breach line or a canary
    /// must not appear.
    said: String,
    /// The verdicts alone, without the candidate's own output they quote (`stderr_tail`):
    /// where a forged name must not appear, since a name there was believed.
    believed: String,
    message: String,
    speedup: Option<f64>,
    reliable: bool,
}

/// The class an eval or a diagnose got: `passed`, the failure class, or why there is none.
/// Keys whose values are quoted text, not nightshift's word: the kernel's source and diff
/// (a node report's), and the process's own output (a verdict's tail).
const SOURCE_KEYS: [&str; 3] = ["diff", "source", "source_diff"];
const QUOTED_OUTPUT_KEYS: [&str; 2] = ["stderr_tail", "stdout_tail"];

/// `v` without the values under `keys`, at any depth.
fn without(v: &Value, keys: &[&str]) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter().filter(|(k, _)| !keys.contains(&k.as_str())).map(|(k, x)| (k.clone(), without(x, keys))).collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| without(x, keys)).collect()),
        other => other.clone(),
    }
}

/// A text of JSON documents (one, or one per line) with the values under `keys` left out;
/// what does not parse is kept as it is.
fn json_without(text: &str, keys: &[&str]) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return without(&v, keys).to_string();
    }
    text.lines()
        .map(|l| match serde_json::from_str::<Value>(l) {
            Ok(v) => without(&v, keys).to_string(),
            Err(_) => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn class_of(mode: Mode, verdict: Option<&Value>, exit: Option<i32>, stderr: &str) -> String {
    match (mode, verdict) {
        (Mode::Diagnose, Some(v)) if exit == Some(0) && v["kernels"].as_array().is_some_and(|k| !k.is_empty()) => {
            "passed".into()
        }
        (Mode::Eval | Mode::Sanitize, Some(v)) if v["status"] == "passed" => "passed".into(),
        (_, Some(v)) if v["failure"]["class"].is_string() => v["failure"]["class"].as_str().unwrap().to_string(),
        (_, Some(v)) if v["error"] == "environment" => format!("env-error ({})", v["hint"].as_str().unwrap_or("")),
        (_, None) if exit == Some(2) => "task-error".into(),
        _ => format!(
            "no verdict (exit {exit:?}: {})",
            stderr.lines().last().unwrap_or("").chars().take(200).collect::<String>()
        ),
    }
}

fn run_case(case: &Case, mode: Mode, source: &Path, scratch: &Path) -> Outcome {
    let task = case.task_dir();
    let mut cmd = Command::new(common::nightshift_bin());
    let run_dir = scratch.join(format!("run-{}", case.name));
    match mode {
        Mode::Eval | Mode::Sanitize => {
            cmd.arg("eval").arg(&task).arg(source).args(&case.flags);
            if mode == Mode::Sanitize && !case.flags.iter().any(|f| f == "--sanitize") {
                cmd.arg("--sanitize");
            }
            cmd.args(["--timeout", "90", "--json"]);
        }
        Mode::Diagnose => {
            cmd.arg("diagnose").arg(&task).arg(source).args(["--timeout", "120", "--json"]);
        }
        Mode::Optimize => {
            let replies = scratch.join(format!("replies-{}", case.name));
            std::fs::create_dir_all(&replies).unwrap();
            std::fs::copy(source, replies.join(format!("{}.cu", case.name))).unwrap();
            let _ = std::fs::remove_dir_all(&run_dir);
            cmd.arg("optimize").arg(&task).arg("--generator").arg(format!("replay:{}", replies.display()));
            cmd.args([
                "--max-nodes",
                "1",
                "--parallel",
                "1",
                "--budget",
                "3m",
                "--no-final-sanitize",
                "--timeout",
                "90",
            ]);
            cmd.arg("--out").arg(&run_dir).arg("--json");
        }
    }
    let out = cmd
        .env("OPENAI_API_KEY", CANARY)
        .env("NIGHTSHIFT_TEST_API_KEY", CANARY)
        .current_dir(common::root())
        .output()
        .expect("nightshift runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let exit = out.status.code();
    if mode == Mode::Optimize {
        return optimize_outcome(&run_dir, exit, stdout, stderr);
    }
    let verdict: Option<Value> = serde_json::from_str(&stdout).ok();
    let class = class_of(mode, verdict.as_ref(), exit, &stderr);
    let message =
        verdict.as_ref().and_then(|v| v["failure"]["message"].as_str().map(String::from)).unwrap_or_else(|| {
            if verdict.is_none() {
                stderr.lines().last().unwrap_or("").to_string()
            } else {
                String::new()
            }
        });
    let speedup = verdict.as_ref().and_then(|v| v["timing"]["speedup"].as_f64());
    let reliable = verdict.as_ref().is_none_or(|v| v["timing"]["reliable"] != false);
    let quoted: Vec<&str> = SOURCE_KEYS.iter().chain(&QUOTED_OUTPUT_KEYS).copied().collect();
    let believed = verdict.as_ref().map(|v| without(v, &quoted).to_string()).unwrap_or_default();
    Outcome { class, exit, said: format!("{stdout}\n{stderr}"), believed, message, speedup, reliable }
}

/// The replayed node's verdict, from the run's event log.
fn optimize_outcome(run: &Path, exit: Option<i32>, stdout: String, stderr: String) -> Outcome {
    let log = std::fs::read_to_string(run.join("events.jsonl")).unwrap_or_default();
    let events: Vec<Value> = log.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let proposed: Vec<u64> =
        events.iter().filter(|e| e["event"] == "node-proposed").filter_map(|e| e["id"].as_u64()).collect();
    let finished = events
        .iter()
        .find(|e| e["event"] == "node-finished" && proposed.contains(&e["id"].as_u64().unwrap_or(u64::MAX)));
    // What the run recorded of its judgments: its verdicts and summaries, without the
    // kernel's source its node reports quote (and with it the marks a case prints).
    let quoted: Vec<&str> = SOURCE_KEYS.iter().chain(&QUOTED_OUTPUT_KEYS).copied().collect();
    let mut recorded = vec![log.clone()];
    for e in walk(run) {
        if e.extension().is_some_and(|x| x == "json") {
            recorded.push(std::fs::read_to_string(&e).unwrap_or_default());
        }
    }
    let said = format!(
        "{stdout}\n{stderr}\n{}",
        recorded.iter().map(|t| json_without(t, &SOURCE_KEYS)).collect::<Vec<_>>().join("\n")
    );
    let believed = recorded.iter().map(|t| json_without(t, &quoted)).collect::<Vec<_>>().join("\n");
    let (class, message, speedup, reliable) = match finished {
        Some(e) => {
            let s = &e["summary"];
            let class = if s["passed"] == true {
                "passed".to_string()
            } else {
                s["failure_class"].as_str().unwrap_or("?").to_string()
            };
            (class, s["failure_message"].as_str().unwrap_or("").to_string(), s["speedup"].as_f64(), true)
        }
        None => (
            format!(
                "no verdict (exit {exit:?}: {})",
                stderr.lines().last().unwrap_or("").chars().take(200).collect::<String>()
            ),
            String::new(),
            None,
            true,
        ),
    };
    Outcome { class, exit, said, believed, message, speedup, reliable }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Processes still on the GPU (other than this one), after a grace for their teardown.
fn leftover_gpu_processes() -> Vec<String> {
    let me = std::process::id().to_string();
    let mut left = Vec::new();
    for _ in 0..20 {
        let Ok(out) = Command::new("nvidia-smi")
            .args(["--query-compute-apps=pid,process_name", "--format=csv,noheader"])
            .output()
        else {
            return Vec::new();
        };
        left = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty() && l.split(',').next().map(str::trim) != Some(me.as_str()))
            .collect();
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    left
}

/// A context, a fill and a read-back on GPU 0, in this process: the GPU still works.
fn gpu_works() -> Result<(), String> {
    use nightshift::wall::gpu::Gpu;
    if !nightshift::wall::gpu::driver_present() {
        return Err("no CUDA driver".into());
    }
    let gpu = Gpu::open(0).map_err(|e| format!("no context: {e}"))?;
    let buf = gpu.alloc(1 << 20).map_err(|e| format!("no allocation: {e}"))?;
    gpu.fill_async(buf.ptr, 4, 0x5EED_F00D, (1 << 20) / 4).map_err(|e| format!("no fill: {e}"))?;
    gpu.sync_stream().map_err(|e| format!("no sync: {e}"))?;
    let back = gpu.download(buf.ptr, 1 << 20).map_err(|e| format!("no read-back: {e}"))?;
    if back.chunks_exact(4).any(|w| w != 0x5EED_F00Du32.to_le_bytes()) {
        return Err("the fill read back wrong".into());
    }
    Ok(())
}

/// `NIGHTSHIFT_HOSTILE_CASES`: names or `*` patterns, comma-separated; one that starts
/// with `!` leaves its matches out (`!rt_*`: every case but the red team's).
fn selected(name: &str) -> bool {
    let Ok(v) = std::env::var("NIGHTSHIFT_HOSTILE_CASES") else { return true };
    let patterns: Vec<&str> = v.split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
    let (out, into): (Vec<&str>, Vec<&str>) = patterns.iter().partition(|p| p.starts_with('!'));
    !out.iter().any(|p| glob(&p[1..], name)) && (into.is_empty() || into.iter().any(|p| glob(p, name)))
}

fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.starts_with(head) && (0..=name.len() - head.len()).any(|i| glob(tail, &name[head.len() + i..]))
        }
    }
}

#[test]
fn case_patterns_match_as_documented() {
    assert!(glob("rt_*", "rt_unix_socket_path") && glob("*socket*", "rt_unix_socket_path"));
    assert!(glob("rt_*_path", "rt_unix_socket_path") && !glob("rt_*_path", "rt_unix_socket_abstract"));
    assert!(glob("noop", "noop") && !glob("noop", "noop2") && glob("*", "anything"));
}

fn modes_selected() -> Option<Vec<Mode>> {
    let v = std::env::var("NIGHTSHIFT_HOSTILE_MODES").ok()?;
    Some(v.split(',').filter_map(|w| Mode::parse(w.trim())).collect())
}

/// `NIGHTSHIFT_HOSTILE_SHARD=i/n`: the i-th of n interleaved shares of the cases (1-based).
fn shard() -> (usize, usize) {
    let Ok(v) = std::env::var("NIGHTSHIFT_HOSTILE_SHARD") else { return (0, 1) };
    let (i, n) = v.split_once('/').expect("NIGHTSHIFT_HOSTILE_SHARD=i/n");
    let (i, n): (usize, usize) = (i.trim().parse().unwrap(), n.trim().parse().unwrap());
    assert!(i >= 1 && i <= n, "NIGHTSHIFT_HOSTILE_SHARD={v}: i in 1..=n");
    (i - 1, n)
}

/// The last `max` bytes of `s` (at a character boundary).
fn tail(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.replace('|', "/").chars().take(max).collect()
}

#[test]
#[ignore = "needs a GPU"]
fn every_hostile_case_gets_its_class_and_the_caller_survives() {
    let started = Instant::now();
    let shared = Shared::make();
    for old in escapes(&shared.cache) {
        let _ = std::fs::remove_file(old);
    }
    let staging = tempfile::tempdir().expect("a staging folder");
    let (share, shares) = shard();
    let modes_wanted = modes_selected();
    let chosen: Vec<Case> = cases().into_iter().filter(|c| selected(&c.name)).collect();
    let chosen: Vec<Case> =
        chosen.into_iter().enumerate().filter(|(i, _)| i % shares == share).map(|(_, c)| c).collect();
    eprintln!(
        "hostile: {} cases; cuBLAS: {}; keyring: {}; secret: {}; sockets in {}",
        chosen.len(),
        shared.cublas.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "none".into()),
        if shared.key_name.is_some() { "planted" } else { "refused here" },
        shared.secret_file.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "none".into()),
        shared.socket_dir.display()
    );
    let header = "| case | mode | threat | expected | got | ok | s | detail |\n|---|---|---|---|---|---|---|---|";
    println!("\n{header}");
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let (mut as_expected, mut skipped) = (0usize, 0usize);
    let mut gpu_broken = None;
    for c in &chosen {
        for &mode in &c.modes {
            if modes_wanted.as_ref().is_some_and(|m| !m.contains(&mode)) {
                continue;
            }
            let expected = c.expect[&mode].join("|");
            let tag = format!("{}-{}-{}", std::process::id(), c.name, mode.word());
            let bait = match Bait::set(c, &shared, &tag) {
                Ok(b) => b,
                Err(why) => {
                    skipped += 1;
                    let row = format!(
                        "| {} | {} | {} | {expected} | skipped | - | 0 | {why} |",
                        c.name,
                        mode.label(),
                        c.threat
                    );
                    println!("{row}");
                    rows.push(row);
                    continue;
                }
            };
            let source = bait.stage(c, staging.path());
            let cache_before = c.checks.iter().any(|k| k == "build-cache").then(|| cache_snapshot(&shared.cache));
            let t0 = Instant::now();
            let got = run_case(c, mode, &source, staging.path());
            let seconds = t0.elapsed().as_secs_f64();

            let mut wrong: Vec<String> = bait.reached();
            if !c.expect[&mode].contains(&got.class) {
                wrong.push(format!("expected {expected}, got {}", got.class));
            }
            if !matches!(got.exit, Some(0..=2)) {
                wrong.push(format!("the caller did not survive (exit {:?})", got.exit));
            }
            for (canary, what) in [
                (CANARY, "the orchestrator's API key"),
                (SECRET_CANARY, "the secret in $HOME"),
                (KEY_CANARY, "the key in the session keyring"),
            ] {
                if got.said.contains(canary) {
                    wrong.push(format!("{what} reached what nightshift said"));
                }
            }
            if got.believed.contains(FORGED_MARK) {
                wrong.push("a forged name or note was believed".into());
            }
            if let Some(line) = got.said.lines().find(|l| l.contains(BREACH_MARK)) {
                wrong.push(format!("the attack got through: {}", one_line(line, 300)));
            }
            if let (Some(max), Some(s), true) = (c.max_speedup, got.speedup, got.class == "passed") {
                if s > max && got.reliable {
                    wrong.push(format!("a speedup of {s:.3}x, above the {max}x its own work earns"));
                }
            }
            if let Some(before) = cache_before {
                let after = cache_snapshot(&shared.cache);
                let changed: Vec<_> = before
                    .iter()
                    .filter(|(p, v)| after.get(*p) != Some(v))
                    .map(|(p, _)| p.display().to_string())
                    .collect();
                if !changed.is_empty() {
                    wrong.push(format!("libraries in the build cache changed: {changed:?}"));
                }
            }
            let left = leftover_gpu_processes();
            if !left.is_empty() {
                wrong.push(format!("processes left on the GPU: {left:?}"));
            }
            if let Err(e) = gpu_works() {
                wrong.push(format!("the GPU no longer works: {e}"));
                gpu_broken.get_or_insert(format!("{} ({})", c.name, mode.label()));
            }

            let ok = wrong.is_empty();
            as_expected += ok as usize;
            let mut detail = match got.speedup {
                Some(s) if got.class == "passed" => {
                    format!("speedup {s:.3}x{}", if got.reliable { "" } else { " (unreliable)" })
                }
                _ => one_line(&got.message, 110),
            };
            if !ok {
                detail = format!("**{}** {detail}", one_line(&wrong.join("; "), 400));
                failures.push(format!(
                    "{} ({}): {}\n  why: {}\n  mechanism: {}\n  message: {}\n  output tail: {}",
                    c.name,
                    mode.label(),
                    wrong.join("; "),
                    c.why,
                    c.mechanism,
                    got.message,
                    one_line(tail(&got.said, 1500), 1500)
                ));
            }
            let row = format!(
                "| {} | {} | {} | {expected} | {} | {} | {seconds:.1} | {detail} |",
                c.name,
                mode.label(),
                c.threat,
                one_line(&got.class, 60),
                if ok { "yes" } else { "NO" }
            );
            println!("{row}");
            rows.push(row);
        }
    }

    let escaped = escapes(&shared.cache);
    // The wall still works at the end: the baseline passes against itself.
    let last = Command::new(common::nightshift_bin())
        .args(["eval", "tasks/vector_add", "--no-time", "--json"])
        .current_dir(common::root())
        .output()
        .expect("nightshift runs");
    let baseline_ok = serde_json::from_slice::<Value>(&last.stdout).is_ok_and(|v| v["status"] == "passed");
    let total = rows.len() - skipped;
    let summary = format!(
        "hostile: {total} runs, {as_expected} as expected, {} not, {skipped} skipped; GPU after every run: {}; files outside the scratch folders: {}; baseline at the end: {}; {:.0} s",
        total - as_expected,
        gpu_broken.as_deref().map(|c| format!("broken after {c}")).unwrap_or_else(|| "ok".into()),
        if escaped.is_empty() { "none".to_string() } else { format!("{escaped:?}") },
        if baseline_ok { "passed" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    let table = format!("{header}\n{}\n\n{summary}\n", rows.join("\n"));
    println!("\n{table}");
    if let Some(path) = std::env::var_os("NIGHTSHIFT_HOSTILE_REPORT") {
        std::fs::write(&path, &table).expect("the report file");
    }
    assert!(escaped.is_empty(), "candidates wrote outside their scratch folders: {escaped:?}");
    assert!(baseline_ok, "the baseline no longer passes at the end: {}", String::from_utf8_lossy(&last.stderr));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
