//! Framed messages on a Unix socket pair, with file descriptors riding along: a 4-byte
//! little-endian length, then that many bytes of JSON. The judge makes the pair and hands
//! one end to its worker as an inherited descriptor; the worker creates no socket.
//!
//! Everything read from a worker is hostile input: frames are capped, reads have deadlines,
//! and descriptors that arrive unasked are closed.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

/// The longest frame either side accepts.
pub const MAX_FRAME: usize = 16 << 20;
/// The most descriptors one message may carry.
const MAX_FDS: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("the other side closed the socket")]
    Closed,
    #[error("no answer within {0:.1} s")]
    Timeout(f64),
    #[error("a frame of {0} bytes, past the {MAX_FRAME}-byte limit")]
    TooLong(usize),
    #[error("a frame that does not parse: {0}")]
    Malformed(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Sends `msg`, with `fds` attached to its first byte.
pub fn send<T: Serialize>(sock: BorrowedFd<'_>, msg: &T, fds: &[RawFd]) -> Result<(), WireError> {
    let body = serde_json::to_vec(msg).map_err(|e| WireError::Malformed(e.to_string()))?;
    if body.len() > MAX_FRAME {
        return Err(WireError::TooLong(body.len()));
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&body);
    let mut sent = 0;
    let mut attach = fds;
    while sent < frame.len() {
        let n = sendmsg(sock.as_raw_fd(), &frame[sent..], attach)?;
        attach = &[];
        sent += n;
    }
    Ok(())
}

fn sendmsg(sock: RawFd, bytes: &[u8], fds: &[RawFd]) -> std::io::Result<usize> {
    let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
    // SAFETY: zeroed msghdr is a valid empty header; fields are filled below.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    let space = if fds.is_empty() {
        0
    } else {
        // SAFETY: arithmetic macro.
        unsafe { libc::CMSG_SPACE(std::mem::size_of_val(fds) as u32) as usize }
    };
    let mut control = vec![0u8; space];
    if !fds.is_empty() {
        mh.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        mh.msg_controllen = space as _;
        // SAFETY: the control buffer holds one header of CMSG_LEN(fds) bytes.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&mh);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c) as *mut RawFd, fds.len());
        }
    }
    loop {
        // SAFETY: mh points at live buffers for the duration of the call.
        let n = unsafe { libc::sendmsg(sock, &mh, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives one message; `deadline` bounds the whole wait. Descriptors that came with it
/// are returned owned (closed when dropped).
pub fn recv<T: DeserializeOwned>(
    sock: BorrowedFd<'_>,
    deadline: Option<Instant>,
) -> Result<(T, Vec<OwnedFd>), WireError> {
    let mut fds = Vec::new();
    let mut header = [0u8; 4];
    read_exact(sock.as_raw_fd(), &mut header, deadline, &mut fds)?;
    let len = u32::from_le_bytes(header) as usize;
    if len > MAX_FRAME {
        return Err(WireError::TooLong(len));
    }
    let mut body = vec![0u8; len];
    read_exact(sock.as_raw_fd(), &mut body, deadline, &mut fds)?;
    let msg = serde_json::from_slice(&body).map_err(|e| {
        let excerpt: String = String::from_utf8_lossy(&body).chars().take(200).collect();
        WireError::Malformed(format!("{e}: `{excerpt}`"))
    })?;
    Ok((msg, fds))
}

fn read_exact(sock: RawFd, buf: &mut [u8], deadline: Option<Instant>, fds: &mut Vec<OwnedFd>) -> Result<(), WireError> {
    let mut got = 0;
    while got < buf.len() {
        wait_readable(sock, deadline)?;
        let n = recvmsg(sock, &mut buf[got..], fds)?;
        if n == 0 {
            return Err(WireError::Closed);
        }
        got += n;
    }
    Ok(())
}

fn wait_readable(sock: RawFd, deadline: Option<Instant>) -> Result<(), WireError> {
    loop {
        let timeout_ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(WireError::Timeout(0.0));
                }
                left.as_millis().clamp(1, i32::MAX as u128) as i32
            }
        };
        let mut p = libc::pollfd { fd: sock, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if r > 0 {
            return Ok(());
        }
        if r == 0 {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(WireError::Timeout(0.0));
            }
            continue;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e.into());
        }
    }
}

fn recvmsg(sock: RawFd, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> std::io::Result<usize> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: arithmetic macro.
    let space = unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) as usize };
    let mut control = vec![0u8; space];
    // SAFETY: zeroed msghdr is a valid empty header; fields are filled below.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    mh.msg_controllen = space as _;
    let n = loop {
        // SAFETY: mh points at live buffers for the duration of the call.
        let n = unsafe { libc::recvmsg(sock, &mut mh, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    // SAFETY: walks the control messages the kernel wrote into `control`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const RawFd;
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    // Each received descriptor is ours now; owned, it closes when dropped.
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    Ok(n)
}

/// A connected pair, both ends close-on-exec (the judge clears that flag on the one it
/// hands down).
pub fn pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut sv = [0; 2];
    // SAFETY: writes two descriptors into sv.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::time::Duration;

    #[test]
    fn messages_and_descriptors_cross_the_pair() {
        let (a, b) = pair().unwrap();
        let file = tempfile::tempfile().unwrap();
        send(a.as_fd(), &vec![1u32, 2, 3], &[file.as_raw_fd()]).unwrap();
        let (got, fds): (Vec<u32>, _) = recv(b.as_fd(), Some(Instant::now() + Duration::from_secs(5))).unwrap();
        assert_eq!(got, vec![1, 2, 3]);
        assert_eq!(fds.len(), 1);
        let meta = std::fs::File::from(fds.into_iter().next().unwrap()).metadata().unwrap();
        assert_eq!(meta.ino(), std::os::unix::fs::MetadataExt::ino(&file.metadata().unwrap()));
    }

    #[test]
    fn a_silent_peer_times_out_and_a_closed_one_says_so() {
        let (a, b) = pair().unwrap();
        let err = recv::<u32>(b.as_fd(), Some(Instant::now() + Duration::from_millis(50))).unwrap_err();
        assert!(matches!(err, WireError::Timeout(_)), "{err}");
        drop(a);
        assert!(matches!(recv::<u32>(b.as_fd(), None).unwrap_err(), WireError::Closed));
    }

    #[test]
    fn a_frame_past_the_limit_or_not_json_is_refused() {
        let (a, b) = pair().unwrap();
        let raw = |bytes: &[u8]| sendmsg(a.as_raw_fd(), bytes, &[]).unwrap();
        raw(&(u32::MAX).to_le_bytes());
        assert!(matches!(recv::<u32>(b.as_fd(), None).unwrap_err(), WireError::TooLong(_)));
        let (a, b) = pair().unwrap();
        sendmsg(a.as_raw_fd(), &[3, 0, 0, 0, b'x', b'y', b'z'], &[]).unwrap();
        assert!(matches!(recv::<u32>(b.as_fd(), None).unwrap_err(), WireError::Malformed(_)));
    }

    use std::os::unix::fs::MetadataExt;
}
