//! A served worker: the judge's commands on the socket pair at fd 3, one at a time.
//! Buffers come as descriptors of the judge's allocations and are mapped here; calls run
//! back to back on this process's stream between events, and the answer is the events.
//! Nothing here decides anything: the judge reads the outputs and keeps the clock.

use super::library::Library;
use crate::wall::gpu::vmm::Mapped;
use crate::wall::gpu::Gpu;
use crate::wall::protocol::wire;
use crate::wall::protocol::{Arg, Call, Command, Reply, ServeRequest, SOCKET_LOST_EXIT};
use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// The descriptor the judge hands its workers.
const SOCKET_FD: i32 = 3;

fn say(sock: BorrowedFd<'_>, reply: &Reply) {
    if wire::send(sock, reply, &[]).is_err() {
        // The socket is gone: closed under us, or the judge died (then nobody sees this).
        // SAFETY: terminates the process.
        unsafe { libc::_exit(SOCKET_LOST_EXIT) }
    }
}

/// Entry of `nightshift worker --serve`. Never returns.
pub fn main() -> ! {
    // SAFETY: fd 3 is the socket the judge placed there before exec; nothing else owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(SOCKET_FD) };
    // SAFETY: plain fcntl on our own descriptor: nothing this process might exec inherits it.
    unsafe { libc::fcntl(SOCKET_FD, libc::F_SETFD, libc::FD_CLOEXEC) };
    let sock = sock.as_fd();
    let request: ServeRequest = match wire::recv(sock, Some(Instant::now() + Duration::from_secs(60))) {
        Ok((r, _)) => r,
        Err(e) => {
            eprintln!("worker: no request from the judge: {e}");
            // SAFETY: terminates the process.
            unsafe { libc::_exit(70) }
        }
    };
    super::install_panic_exit();
    // Before any thread and before the GPU: every thread the driver or the library starts
    // inherits the sandbox.
    let started = Instant::now();
    let layers = request.policy.as_ref().map(crate::wall::sandbox::apply).unwrap_or_default();
    let sandbox_s = started.elapsed().as_secs_f64();
    let gpu = if request.simulate {
        None
    } else {
        match super::open_gpu(request.device) {
            Ok(g) => Some(g),
            Err((message, environment)) => {
                say(sock, &Reply::Broken { message, environment });
                // SAFETY: terminates the process.
                unsafe { libc::_exit(0) }
            }
        }
    };
    // Once the driver has read its environment and before anything untrusted loads, the
    // environment goes, from memory too (said with the other layers).
    let mut layers = layers;
    if request.policy.is_some() {
        layers.push(crate::wall::sandbox::scrub_environment());
    }
    say(sock, &Reply::Ready { device: gpu.as_ref().map(|g| g.info.clone()), sandbox: layers, sandbox_s });
    let mut server = Server { gpu, library: None, pools: BTreeMap::new(), events: Vec::new(), path: request.library };
    loop {
        let (cmd, mut fds) = match wire::recv::<Command>(sock, None) {
            Ok(m) => m,
            // The socket closed or carried garbage: the judge is gone, or the library
            // closed or wrote over its descriptor.
            // SAFETY: terminates the process.
            Err(_) => unsafe { libc::_exit(SOCKET_LOST_EXIT) },
        };
        let reply = match cmd {
            Command::Quit => {
                // Skip the library's destructors and atexit handlers.
                // SAFETY: terminates the process.
                unsafe { libc::_exit(0) }
            }
            Command::Import { pool, bytes } => server.import(pool, bytes, fds.pop()),
            Command::Release { pool } => {
                server.pools.remove(&pool);
                Reply::Released { pool }
            }
            Command::Load => server.load(),
            Command::Run { calls, repeat } => server.run(&calls, repeat),
        };
        say(sock, &reply);
    }
}

struct Server {
    gpu: Option<Gpu>,
    library: Option<Library>,
    pools: BTreeMap<u32, Mapped>,
    events: Vec<(cudarc::driver::CudaEvent, cudarc::driver::CudaEvent)>,
    path: std::path::PathBuf,
}

impl Server {
    fn import(&mut self, pool: u32, bytes: u64, fd: Option<OwnedFd>) -> Reply {
        let (Some(gpu), Some(fd)) = (&self.gpu, fd) else {
            return Reply::Broken {
                message: format!("pool {pool}: no GPU or no descriptor to map"),
                environment: false,
            };
        };
        match gpu.import(fd, bytes as usize) {
            Ok(m) => {
                self.pools.insert(pool, m);
                Reply::Imported { pool }
            }
            Err(e) => Reply::Broken { message: format!("cannot map the judge's pool {pool}: {e}"), environment: false },
        }
    }

    fn load(&mut self) -> Reply {
        match Library::load(&self.path) {
            Ok(l) => {
                self.library = Some(l);
                Reply::Loaded
            }
            Err(e) => Reply::Failed { call: None, error: e.to_string() },
        }
    }

    fn args(&self, call: &Call) -> Result<Vec<[u8; 8]>, String> {
        call.args
            .iter()
            .map(|a| match a {
                Arg::Value { bytes } => Ok(*bytes),
                Arg::Buffer { pool, offset } => match self.pools.get(pool) {
                    Some(m) if *offset < m.bytes as u64 => Ok((m.ptr + offset).to_le_bytes()),
                    _ => Err(format!("no pool {pool} holding offset {offset}")),
                },
            })
            .collect()
    }

    fn run(&mut self, calls: &[Call], repeat: u32) -> Reply {
        let Some(library) = &self.library else {
            return Reply::Broken { message: "asked to run before the library was loaded".into(), environment: false };
        };
        let Some(gpu) = &self.gpu else {
            // Simulated: nothing to run.
            return Reply::Ran { event_ms: vec![0.0; calls.len()] };
        };
        let mut arrays = Vec::with_capacity(calls.len());
        for c in calls {
            match self.args(c) {
                Ok(a) => arrays.push(a),
                Err(m) => return Reply::Broken { message: m, environment: false },
            }
        }
        while self.events.len() < calls.len() {
            match (gpu.event(), gpu.event()) {
                (Ok(a), Ok(b)) => self.events.push((a, b)),
                (Err(e), _) | (_, Err(e)) => return Reply::Failed { call: None, error: e.to_string() },
            }
        }
        let stream = gpu.raw_stream() as *mut std::ffi::c_void;
        for rep in 0..repeat.max(1) {
            for (i, args) in arrays.iter_mut().enumerate() {
                let first = rep == 0;
                if first {
                    if let Err(e) = self.events[i].0.record(&gpu.stream) {
                        return Reply::Failed { call: Some(i), error: format!("{e:?}") };
                    }
                }
                if let Err(name) = library.call(args, stream) {
                    return Reply::Failed { call: Some(i), error: name };
                }
                if first {
                    if let Err(e) = self.events[i].1.record(&gpu.stream) {
                        return Reply::Failed { call: Some(i), error: format!("{e:?}") };
                    }
                }
            }
        }
        if let Err(e) = gpu.sync_all() {
            return Reply::Failed { call: None, error: e.name };
        }
        let mut event_ms = Vec::with_capacity(calls.len());
        for (a, b) in &self.events[..calls.len()] {
            match a.elapsed_ms(b) {
                Ok(ms) => event_ms.push(ms as f64),
                Err(e) => return Reply::Failed { call: None, error: format!("{e:?}") },
            }
        }
        Reply::Ran { event_ms }
    }
}
