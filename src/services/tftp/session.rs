//! One read transfer, served from its own UDP socket on the listener's IP
//! and an ephemeral port (the RFC 1350 TID): the mode and path checks, the
//! open under the root, then the windowed send of [`super::transfer`]
//! with `pread` read-ahead ([`super::READ_AHEAD`]), retransmission on
//! timeout, ERROR 5 to foreign TIDs, and how it ended recorded in
//! [`super::stats`].
//!
//! Invariants: memory per transfer is constant (a read-ahead cache of at
//! most one window); the transfer's permit and client slot are held until
//! it ends, however it ends; a stop (shutdown after the drain) sends
//! ERROR 0 "server shutting down" and ends the transfer.

use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::net::UdpSocket;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::packet::{self, ErrorCode, Packet, Request, Shown};
use super::stats::{Outcome, Stats};
use super::transfer::{self, Step, Transfer};
use super::{Ctx, Held, READ_AHEAD};
use crate::boot::bootfiles;

/// Keeps `active` right however a transfer ends.
struct ActiveGuard<'a>(&'a Stats);

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One read transfer, from its own socket (TID).
pub(super) async fn serve(
    ctx: Arc<Ctx>,
    bind_to: SocketAddr,
    req: Request,
    client: SocketAddr,
    stop: CancellationToken,
    _held: Held,
) {
    let stats = &ctx.stats;
    stats.active.fetch_add(1, Ordering::Relaxed);
    let _guard = ActiveGuard(stats);
    let file = Shown(&req.filename).to_string();
    let sock = match ctx.bind.udp(bind_to) {
        Ok(s) => s,
        Err(e) => {
            if let Some(tail) = ctx.log.check("no transfer socket", Some(client)) {
                warn!(%client, "tftp: cannot bind a transfer socket on {bind_to}: {e}{tail}");
            }
            stats.finish(client, &file, Outcome::Failed, "no transfer socket", 0);
            return;
        }
    };
    let Some(opened) = open_file(&ctx, &sock, &req, client, &file).await else {
        return;
    };
    let neg = transfer::negotiate(&req.options, opened.size);
    let timeout = neg.timeout.unwrap_or(ctx.timeout);
    let mut t = Transfer::new(opened.size, &neg, ctx.retries);
    stats.started.fetch_add(1, Ordering::Relaxed);
    debug!(%client, "tftp: sending {} ({} bytes, blksize {}, window {})",
        opened.path.display(), opened.size, neg.blksize, neg.windowsize);

    let file_handle = Arc::new(opened.file);
    let mut cache = Cache::default();
    let mut out = Vec::with_capacity(4 + usize::from(neg.blksize));
    let mut rbuf = vec![0u8; 2048];
    let mut deadline = Instant::now() + timeout;
    let mut step = t.start();
    let (outcome, detail) = loop {
        match step {
            Step::SendOack => {
                if let Err(e) = sock.send_to(&packet::oack(&neg.oack), client).await {
                    break (Outcome::Failed, format!("send: {e}"));
                }
                deadline = Instant::now() + timeout;
            }
            Step::Send(range) => {
                let sent =
                    send_window(&sock, client, &t, &mut cache, &file_handle, &mut out, range);
                if let Err(stop) = sent.await {
                    break stop;
                }
                deadline = Instant::now() + timeout;
            }
            Step::Wait => {}
            Step::Done => break (Outcome::Completed, String::new()),
            Step::GiveUp => {
                let _ = sock
                    .send_to(&packet::error(ErrorCode::Undefined, "timed out"), client)
                    .await;
                break (Outcome::Failed, "timed out".into());
            }
        }
        step = tokio::select! {
            _ = stop.cancelled() => {
                let _ = sock
                    .send_to(&packet::error(ErrorCode::Undefined, "server shutting down"), client)
                    .await;
                break (Outcome::Failed, "server shutting down".into());
            }
            _ = tokio::time::sleep_until(deadline) => {
                let before = t.retransmits();
                let s = t.on_timeout();
                stats.retransmits.fetch_add(t.retransmits() - before, Ordering::Relaxed);
                s
            }
            r = sock.recv_from(&mut rbuf) => match r {
                Err(e) => {
                    debug!(%client, "tftp transfer recv: {e}");
                    Step::Wait
                }
                Ok((n, from)) if from != client => {
                    // Never answer an ERROR (two servers must not ping-pong).
                    if !matches!(packet::parse(&rbuf[..n]), Ok(Packet::Error { .. })) {
                        let e = packet::error(ErrorCode::UnknownTid, "unknown transfer ID");
                        let _ = sock.send_to(&e, from).await;
                    }
                    Step::Wait
                }
                Ok((n, _)) => match packet::parse(&rbuf[..n]) {
                    Ok(Packet::Ack(w)) => t.on_ack(w),
                    Ok(Packet::Error { code, message }) => {
                        break (Outcome::Aborted, format!("client error {code}: {message}"));
                    }
                    _ => {
                        let e = packet::error(ErrorCode::IllegalOperation, "expected an ACK");
                        let _ = sock.send_to(&e, client).await;
                        break (Outcome::Failed, "illegal packet from client".into());
                    }
                },
            },
        };
    };
    finish_transfer(stats, client, &file, (outcome, detail), opened.size);
}

/// Record how a transfer of a `size`-byte file ended (its bytes count only
/// when it completed).
fn finish_transfer(
    stats: &Stats,
    client: SocketAddr,
    file: &str,
    (outcome, detail): (Outcome, String),
    size: u64,
) {
    let bytes = if outcome == Outcome::Completed {
        size
    } else {
        0
    };
    debug!(%client, "tftp: {file}: {outcome:?} {detail}");
    stats.finish(client, file, outcome, &detail, bytes);
}

/// Check and open the file a read request names, answering the refusal
/// (mode, path, missing file) on the transfer socket; `None` once refused.
async fn open_file(
    ctx: &Ctx,
    sock: &UdpSocket,
    req: &Request,
    client: SocketAddr,
    file: &str,
) -> Option<bootfiles::Opened> {
    let refuse = |code: ErrorCode, msg: &str| {
        let msg = msg.to_string();
        async move {
            debug!(%client, "tftp: {file} refused: {msg}");
            ctx.stats.finish(client, file, Outcome::Refused, &msg, 0);
            let _ = sock.send_to(&packet::error(code, &msg), client).await;
            None
        }
    };
    if req.mode != "octet" {
        let msg = format!("mode {:?} is not supported, use octet (binary)", req.mode);
        return refuse(ErrorCode::IllegalOperation, &msg).await;
    }
    let rel = match bootfiles::sanitize(&req.filename) {
        Ok(r) => r,
        Err(r) => return refuse(refusal_code(r.code), r.message).await,
    };
    let (root, allowed) = (ctx.root.clone(), ctx.allowed.clone());
    let opened = tokio::task::spawn_blocking(move || bootfiles::open(&root, &allowed, &rel)).await;
    let opened = match opened {
        Ok(Ok(o)) => o,
        Ok(Err(r)) => return refuse(refusal_code(r.code), r.message).await,
        Err(_) => return refuse(ErrorCode::Undefined, "internal error").await,
    };
    Some(opened)
}

/// Send the blocks of one window (read ahead from the file first); why
/// the transfer ends when a read or a send fails.
async fn send_window(
    sock: &UdpSocket,
    client: SocketAddr,
    t: &Transfer,
    cache: &mut Cache,
    file: &Arc<std::fs::File>,
    out: &mut Vec<u8>,
    range: std::ops::RangeInclusive<u64>,
) -> Result<(), (Outcome, String)> {
    let (first_off, _) = t.extent(*range.start());
    let (last_off, last_len) = t.extent(*range.end());
    let end = last_off + last_len as u64;
    if let Err(e) = cache.fill(file, first_off, end).await {
        let _ = sock
            .send_to(&packet::error(ErrorCode::Undefined, "read error"), client)
            .await;
        return Err((Outcome::Failed, format!("read: {e}")));
    }
    for b in range {
        let (off, len) = t.extent(b);
        out.clear();
        out.extend_from_slice(&packet::data_header(Transfer::wire(b)));
        out.extend_from_slice(cache.slice(off, len));
        if let Err(e) = sock.send_to(out, client).await {
            return Err((Outcome::Failed, format!("send: {e}")));
        }
    }
    Ok(())
}

/// Bytes `[start, start + data.len())` of the file, refilled by `pread`.
#[derive(Default)]
struct Cache {
    start: u64,
    data: Vec<u8>,
}

impl Cache {
    /// Make `[from, to)` available, reading on the blocking pool if needed.
    async fn fill(&mut self, file: &Arc<std::fs::File>, from: u64, to: u64) -> std::io::Result<()> {
        let have_end = self.start + self.data.len() as u64;
        if from >= self.start && to <= have_end {
            return Ok(());
        }
        let want = usize::try_from(to - from)
            .unwrap_or(usize::MAX)
            .max(READ_AHEAD);
        let mut buf = std::mem::take(&mut self.data);
        buf.resize(want, 0);
        let f = file.clone();
        let (buf, r) = tokio::task::spawn_blocking(move || {
            let mut got = 0;
            let r = loop {
                match f.read_at(&mut buf[got..], from + got as u64) {
                    Ok(0) => break Ok(()),
                    Ok(n) => {
                        got += n;
                        if got == buf.len() {
                            break Ok(());
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => break Err(e),
                }
            };
            buf.truncate(got);
            (buf, r)
        })
        .await
        .map_err(std::io::Error::other)?;
        r?;
        self.start = from;
        self.data = buf;
        if self.start + (self.data.len() as u64) < to {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "file shrank during the transfer",
            ));
        }
        Ok(())
    }

    /// `len` bytes at file offset `off`; within what [`Cache::fill`] made available.
    fn slice(&self, off: u64, len: usize) -> &[u8] {
        let i = usize::try_from(off.saturating_sub(self.start)).unwrap_or(usize::MAX);
        self.data.get(i..i.saturating_add(len)).unwrap_or(&[])
    }
}

/// The TFTP error code of a boot-file refusal.
fn refusal_code(c: bootfiles::ErrorCode) -> ErrorCode {
    match c {
        bootfiles::ErrorCode::FileNotFound => ErrorCode::FileNotFound,
        bootfiles::ErrorCode::AccessViolation => ErrorCode::AccessViolation,
    }
}
