//! `TCP_DEFER_ACCEPT` on a listening socket: the kernel hands a connection
//! to `accept` once its first data has arrived (or once the deferral has
//! run out), not at the end of the handshake.
//!
//! Why: for protocols where the client speaks first (HTTP, TLS), the
//! server then reads the request right after `accept`, without waiting
//! for it through epoll (nginx's `listen … deferred`, HAProxy's
//! `defer-accept`). A connection that sends nothing stays in the kernel
//! for the deferral (about `secs`, rounded to SYN-ACK retransmissions) and
//! is then accepted like any other, so the server's own timeouts still
//! apply to it.
//!
//! Why a crate of its own: the main crate forbids `unsafe`; neither
//! socket2 nor rustix has this option, and `setsockopt` has no safe
//! generic wrapper. This is one `setsockopt` and one `getsockopt` call.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Defer `accept` on the listening socket `fd` until data arrives, for at
/// most about `secs` seconds (0 turns it off). Linux only; elsewhere an
/// `Unsupported` error.
pub fn set(fd: BorrowedFd<'_>, secs: u32) -> io::Result<()> {
    sys::set(fd, secs)
}

/// The deferral of `fd` as the kernel keeps it (rounded up to whole
/// SYN-ACK retransmissions; 0 when off).
pub fn get(fd: BorrowedFd<'_>) -> io::Result<u32> {
    sys::get(fd)
}

#[cfg(target_os = "linux")]
mod sys {
    use super::*;

    const LEN: libc::socklen_t = std::mem::size_of::<libc::c_int>() as libc::socklen_t;

    pub fn set(fd: BorrowedFd<'_>, secs: u32) -> io::Result<()> {
        let val = libc::c_int::try_from(secs).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fd` is a valid open descriptor for the borrow; the option
        // value points at a live c_int of the length passed.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_DEFER_ACCEPT,
                (&val as *const libc::c_int).cast(),
                LEN,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    pub fn get(fd: BorrowedFd<'_>) -> io::Result<u32> {
        let mut val: libc::c_int = 0;
        let mut len = LEN;
        // SAFETY: `fd` is valid for the borrow; the kernel writes at most
        // `len` bytes into the live c_int and stores the length in `len`.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_DEFER_ACCEPT,
                (&mut val as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if r == 0 {
            Ok(u32::try_from(val).unwrap_or(0))
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use super::*;

    pub fn set(_fd: BorrowedFd<'_>, _secs: u32) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }

    pub fn get(_fd: BorrowedFd<'_>) -> io::Result<u32> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd as _;
    use std::time::Duration;

    #[test]
    fn a_listener_keeps_the_deferral_it_was_given() -> std::io::Result<()> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        assert_eq!(super::get(l.as_fd())?, 0);
        super::set(l.as_fd(), 1)?;
        assert!(super::get(l.as_fd())? >= 1);
        super::set(l.as_fd(), 0)?;
        assert_eq!(super::get(l.as_fd())?, 0);
        Ok(())
    }

    /// A connection that has sent nothing is not accepted while one that
    /// connected after it and sent its request is.
    #[test]
    fn only_connections_with_data_are_accepted_at_once() -> std::io::Result<()> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        super::set(l.as_fd(), 5)?;
        let addr = l.local_addr()?;
        let _silent = TcpStream::connect(addr)?;
        let mut talker = TcpStream::connect(addr)?;
        talker.write_all(b"hello")?;
        let (mut got, _) = l.accept()?;
        got.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut buf = [0u8; 5];
        got.read_exact(&mut buf)?;
        assert_eq!(&buf, b"hello", "the first accepted is the one that spoke");
        l.set_nonblocking(true)?;
        let next = l.accept();
        assert!(
            matches!(&next, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "the silent connection was accepted at once: {next:?}"
        );
        Ok(())
    }
}
