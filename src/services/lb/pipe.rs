//! Kernel pipes for zero-copy forwarding (`splice(2)`), and a bounded pool
//! of them.
//!
//! Role: [`proxy`](super::proxy) moves bulk bytes socket → pipe → socket
//! with `splice(2)`, so the payload never enters user space: the kernel
//! passes page references from one socket to the other instead of copying
//! every byte into a buffer and back out.
//! A [`Pipe`] is one nonblocking, close-on-exec pipe pair sized to
//! [`PIPE_SIZE`] (`F_SETPIPE_SZ`; the kernel's size is kept when that
//! fails) that counts the bytes it holds. A [`Pool`] hands out at most
//! `max` pipes at once and keeps returned empty ones for the next
//! connection (a pipe costs `pipe2` + `fcntl` + two `close`s to make and
//! drop, which a connection-per-request workload would otherwise pay).
//!
//! Invariants:
//! - `held` is exact: it is raised by what a splice into the pipe moved and
//!   lowered by what a splice or read out of it moved, so a pipe is back in
//!   the pool only when it is empty; a lease dropped with bytes in its pipe
//!   (cancelled or failed connection) closes the pipe and frees its slot.
//! - At most `max` pipes exist per pool, pooled ones included: the LB's
//!   pool is sized by `limits::cap::LB_SPLICE_PIPES`, whose descriptors
//!   `limits::reserve` keeps out of the client caps. No pipe (pool
//!   exhausted, `pipe2` failed) is never an error: the caller copies.
//! - `splice(2)` has no `MSG_NOSIGNAL`: writing into a socket the peer
//!   reset raises SIGPIPE, which the Rust runtime ignores before `main`
//!   (the error comes back as `EPIPE`).
//!
//! Written here rather than taken from a crate: `tokio-splice` (0.2.1,
//! unchanged since 2024) and `tokio-splice2` (0.3.2) offer only a whole
//! `copy_bidirectional` with a fresh pipe per direction and connection
//! (pipe reuse is still on tokio-splice2's to-do list), no hook for the
//! LB's idle timer, no fallback to copying when splice is refused, and
//! their own shutdown semantics. The system calls come from `rustix`
//! (already a dependency; the crate forbids `unsafe`), so this module is
//! only bookkeeping.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;

use rustix::pipe::{PipeFlags, SpliceFlags, fcntl_getpipe_size, fcntl_setpipe_size, pipe_with};

use crate::runtime::sync::LockExt as _;

/// Capacity asked for each pipe: the most bytes one splice moves. Larger
/// than the default 64 KiB so that one call drains a socket's receive
/// queue on fast links; pages are only pinned while bytes are in flight.
pub const PIPE_SIZE: usize = 256 * 1024;

const FLAGS: SpliceFlags = SpliceFlags::MOVE.union(SpliceFlags::NONBLOCK);

/// One pipe pair and the number of bytes in it.
#[derive(Debug)]
pub struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
    cap: usize,
    held: usize,
}

impl Pipe {
    pub fn new() -> io::Result<Pipe> {
        let (r, w) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let cap = match fcntl_setpipe_size(&w, PIPE_SIZE) {
            Ok(n) => n,
            Err(_) => fcntl_getpipe_size(&w)?,
        };
        Ok(Pipe { r, w, cap, held: 0 })
    }

    /// Bytes in the pipe.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Splice what `from` has (up to the pipe's capacity) into the pipe.
    /// `Ok(0)`: end of file. `WouldBlock` when `from` has nothing.
    pub fn fill_from(&mut self, from: impl AsFd) -> io::Result<usize> {
        let room = self.cap - self.held;
        let n = rustix::pipe::splice(from, None, &self.w, None, room, FLAGS)?;
        self.held += n;
        Ok(n)
    }

    /// Splice bytes held in the pipe into `to`. `WouldBlock` when `to` is
    /// full.
    pub fn drain_to(&mut self, to: impl AsFd) -> io::Result<usize> {
        let n = rustix::pipe::splice(&self.r, None, to, None, self.held, FLAGS)?;
        self.held -= n;
        Ok(n)
    }

    /// Read held bytes into `buf` (to hand them to a copy loop when the
    /// destination refuses splice).
    pub fn read_into(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min(self.held);
        let n = rustix::io::read(&self.r, &mut buf[..want])?;
        self.held -= n;
        Ok(n)
    }
}

/// Is `e` splice refusing this kind of descriptor (or missing), rather than
/// a failure of the connection?
pub fn unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS))
}

/// At most `max` pipes, empty ones kept for reuse.
#[derive(Debug)]
pub struct Pool {
    max: usize,
    inner: Mutex<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    idle: Vec<Pipe>,
    /// Pipes leased out plus idle ones.
    live: usize,
}

impl Pool {
    pub const fn new(max: usize) -> Pool {
        Pool {
            max,
            inner: Mutex::new(Slots {
                idle: Vec::new(),
                live: 0,
            }),
        }
    }

    /// An empty pipe: a pooled one, else a new one while fewer than `max`
    /// exist. `None` when the pool is exhausted or the pipe cannot be made.
    pub fn take(&self) -> Option<Lease<'_>> {
        let mut s = self.inner.locked();
        let pipe = match s.idle.pop() {
            Some(pipe) => pipe,
            None if s.live < self.max => {
                let pipe = Pipe::new().ok()?;
                s.live += 1;
                pipe
            }
            None => return None,
        };
        Some(Lease {
            pool: self,
            pipe: Some(pipe),
        })
    }

    /// Pipes that exist (leased and idle).
    pub fn live(&self) -> usize {
        self.inner.locked().live
    }

    /// Pipes waiting for reuse.
    pub fn idle(&self) -> usize {
        self.inner.locked().idle.len()
    }
}

/// A pipe taken from a [`Pool`]; dropping it returns the pipe when empty,
/// else closes it and frees its slot. (The pipe is `None` only inside
/// `drop`.)
#[derive(Debug)]
pub struct Lease<'a> {
    pool: &'a Pool,
    pipe: Option<Pipe>,
}

impl Lease<'_> {
    /// The pipe.
    pub fn get(&mut self) -> io::Result<&mut Pipe> {
        self.pipe
            .as_mut()
            .ok_or_else(|| io::Error::other("pipe lease already returned"))
    }

    /// Bytes in the pipe.
    pub fn held(&self) -> usize {
        self.pipe.as_ref().map_or(0, Pipe::held)
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let Some(pipe) = self.pipe.take() else { return };
        let mut s = self.pool.inner.locked();
        if pipe.held == 0 {
            s.idle.push(pipe);
        } else {
            s.live -= 1;
            drop(s);
            drop(pipe); // closed outside the lock
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};
    use std::os::unix::net::UnixStream;

    #[test]
    fn pipes_are_pooled_up_to_max_and_reused() {
        let pool = Pool::new(2);
        let a = pool.take().unwrap();
        let b = pool.take().unwrap();
        assert!(pool.take().is_none(), "more than max pipes");
        assert_eq!((pool.live(), pool.idle()), (2, 0));
        drop(a);
        assert_eq!((pool.live(), pool.idle()), (2, 1));
        let c = pool.take().unwrap();
        assert_eq!((pool.live(), pool.idle()), (2, 0));
        drop((b, c));
        assert_eq!((pool.live(), pool.idle()), (2, 2));
        assert!(Pool::new(0).take().is_none());
    }

    #[test]
    fn bytes_move_through_and_a_pipe_holding_bytes_is_not_pooled() {
        let pool = Pool::new(1);
        let (mut src, src_end) = UnixStream::pair().unwrap();
        let (dst_end, mut dst) = UnixStream::pair().unwrap();
        src_end.set_nonblocking(true).unwrap();
        dst_end.set_nonblocking(true).unwrap();
        src.write_all(b"hello, pipe").unwrap();
        let mut lease = pool.take().unwrap();
        assert!(lease.get().unwrap().cap >= 4096);
        assert_eq!(lease.get().unwrap().fill_from(&src_end).unwrap(), 11);
        assert_eq!(lease.held(), 11);
        // Nothing more to read: WouldBlock, not end of file.
        let e = lease.get().unwrap().fill_from(&src_end).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(lease.get().unwrap().drain_to(&dst_end).unwrap(), 11);
        let mut got = [0u8; 11];
        dst.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello, pipe");
        // Read-out path (splice refused by the destination).
        src.write_all(b"rest").unwrap();
        lease.get().unwrap().fill_from(&src_end).unwrap();
        let mut buf = [0u8; 2];
        assert_eq!(lease.get().unwrap().read_into(&mut buf).unwrap(), 2);
        assert_eq!((&buf, lease.held()), (b"re", 2));
        // Dropped holding bytes: closed, its slot freed.
        drop(lease);
        assert_eq!((pool.live(), pool.idle()), (0, 0));
        // End of file reads as 0.
        drop(src);
        let mut lease = pool.take().unwrap();
        assert_eq!(lease.get().unwrap().fill_from(&src_end).unwrap(), 0);
        assert_eq!(lease.held(), 0);
    }

    #[test]
    fn refusal_is_told_from_failure() {
        assert!(unsupported(&io::Error::from_raw_os_error(libc::EINVAL)));
        assert!(unsupported(&io::Error::from_raw_os_error(libc::ENOSYS)));
        assert!(!unsupported(&io::Error::from_raw_os_error(
            libc::ECONNRESET
        )));
        assert!(!unsupported(&io::ErrorKind::WouldBlock.into()));
    }
}
