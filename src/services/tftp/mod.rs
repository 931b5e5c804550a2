//! Read-only TFTP server for network boot (RFC 1350, options RFC 2347,
//! blksize RFC 2348, timeout/tsize RFC 2349, windowsize RFC 7440), enabled by
//! the top-level `pxe:` section ([`crate::model::cluster::TftpCfg`]).
//!
//! - [`packet`]: datagram parse/encode (pure, fuzzed in its tests).
//! - [`transfer`]: option negotiation and the windowed send state machine
//!   (pure: rollover past block 65535, duplicate/old ACKs, rollback on timeout).
//! - [`path`]: file name rules and the open under the root (no traversal, no
//!   symlink escapes, regular files only).
//! - [`stats`]: counters, `/status`, `/metrics`, the `check` line.
//! - this file: the sockets. One UDP listener on `pxe.tftpListen` receives
//!   requests; each accepted RRQ runs in its own task with its own UDP socket
//!   on the listener's IP and an ephemeral port (the RFC 1350 TID), holding
//!   one permit of a `maxTransfers` semaphore and one of its client
//!   address's `maxTransfersPerClient` slots ([`clients`]; over either cap:
//!   ERROR 0 "server busy" from the listener, the per-client cap checked
//!   first so that a refused host takes no global permit).
//!
//! Why our own code and not a crate: `async-tftp` 0.4 runs on smol/async-io
//! (a second reactor thread next to tokio) and serves through its own
//! handler/`AsyncRead` types; `tftpd` 1.0 is thread-per-transfer std code
//! that opens paths itself. We need the tokio service shape
//! (stage/commit/run, cancellation), our path and symlink rules, counters, and a
//! small protocol subset (RRQ in octet mode, four options, ERROR 1/2/4/5), so
//! a pure codec + state machine of a few hundred lines is the smaller risk
//! (`/work/shared/research/bare-metal-boot.md` §2.3).
//!
//! Invariants:
//! - Read only: WRQ → ERROR 4; only `octet` mode (`netascii`/`mail` → ERROR
//!   4, since converting line ends would change sizes, offsets and `tsize`).
//! - A malformed or unexpected datagram on the listener → ERROR 4 to its
//!   sender (never for an ERROR packet, so two servers cannot ping-pong);
//!   a datagram from a foreign TID during a transfer → ERROR 5 to it and the
//!   transfer continues. Nothing a client sends ends the listener; a listener
//!   that ends on its own fails the service. Malformed and unexpected
//!   datagrams and write requests are logged at warn at most once per
//!   reason every 10 s (`runtime::lograte`: the client, the count of the rest).
//! - Memory per transfer is constant: the file is read with `pread` on the
//!   blocking pool, [`READ_AHEAD`] bytes or one window at a time (at most
//!   [`transfer::WINDOW_BYTES`]), never whole.
//! - Retransmission: a window (or the OACK) is re-sent after `timeout` (or
//!   the client's `timeout` option) without progress, at most `retries`
//!   times in a row; then the transfer is abandoned.
//! - Shutdown (and a reload that removes the listener): the listener stops
//!   accepting — a read request then gets ERROR 0 "server shutting down" —
//!   and running transfers get [`DRAIN`] to finish; those still running
//!   then send the same ERROR and end; `run` returns once all have ended.
//!   If the listener keeps failing to receive, `run` returns an error.

mod clients;
pub mod packet;

pub mod stats;
pub mod transfer;

use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use arc_swap::ArcSwap;
use async_trait::async_trait;
use tokio::net::UdpSocket;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::boot::bootfiles;
use crate::plan::Plan;
use crate::runtime::datagram::{Datagrams, Decision, Gate};
use crate::runtime::lograte::{self, LogRate};
use crate::runtime::service::{Commit, Listeners, Service, Tasks};
use crate::runtime::sync::LockExt as _;
use clients::{ClientSlot, Clients};
use packet::{ErrorCode, Packet, Request, Shown};
use stats::{Outcome, Stats};
use transfer::{Step, Transfer};

/// Bytes read from the file per `pread` when the window is smaller.
pub const READ_AHEAD: usize = 64 * 1024;
/// How long running transfers get after shutdown is requested.
const DRAIN: Duration = crate::runtime::drain::TFTP_TRANSFERS;

/// What every transfer task needs.
struct Ctx {
    root: PathBuf,
    allowed: Vec<PathBuf>,
    timeout: Duration,
    retries: u32,
    /// `maxTransfersPerClient`.
    max_per_client: usize,
    stats: Arc<Stats>,
}

/// The TFTP service: one listener on `pxe.tftpListen`; the root and the
/// transfer settings are swapped by a reload and read per request.
pub struct Tftp {
    ctx: Arc<ArcSwap<Ctx>>,
    stats: Arc<Stats>,
    /// `maxTransfers` and its semaphore (a new one when the number changes;
    /// running transfers keep their permit).
    permits: std::sync::Mutex<(usize, Arc<Semaphore>)>,
    /// Running transfers per client address (`maxTransfersPerClient`).
    clients: Arc<Clients>,
    listeners: Listeners<SocketAddr>,
    tasks: Tasks,
}

/// The transfer settings of `plan`, with the root checked.
/// Returns the context, the listen addresses (`pxe.tftpListen` and its
/// IPv6 twin) and `maxTransfers`.
fn ctx_of(plan: &Plan, stats: &Arc<Stats>) -> anyhow::Result<(Ctx, Vec<SocketAddr>, usize)> {
    let c = plan
        .cluster
        .tftp
        .as_ref()
        .context("the pxe section is not configured")?;
    let root = c.root.canonicalize().with_context(|| {
        format!(
            "pxe.tftpRoot {} (install the distro's ipxe package or set pxe.tftpRoot)",
            c.root.display()
        )
    })?;
    anyhow::ensure!(
        root.is_dir(),
        "pxe.tftpRoot {} is not a directory",
        root.display()
    );
    let allowed = c
        .allow_symlinks_to
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    Ok((
        Ctx {
            root,
            allowed,
            timeout: c.timeout,
            retries: c.retries,
            max_per_client: c.max_transfers_per_client,
            stats: stats.clone(),
        },
        plan.cluster
            .listen_addrs(crate::model::catalogue::ServiceKind::Tftp),
        c.max_transfers,
    ))
}

impl Tftp {
    /// The service for `plan` (the root must exist), serving nothing until
    /// its first commit.
    pub fn new(plan: &Plan) -> anyhow::Result<Arc<Tftp>> {
        let stats = Arc::new(Stats::new());
        let (ctx, _, max) = ctx_of(plan, &stats)?;
        Ok(Arc::new(Tftp {
            ctx: Arc::new(ArcSwap::from_pointee(ctx)),
            stats,
            permits: std::sync::Mutex::new((max, Arc::new(Semaphore::new(max)))),
            clients: Arc::default(),
            listeners: Listeners::default(),
            tasks: Tasks::new("tftp"),
        }))
    }

    fn permits(&self) -> Arc<Semaphore> {
        self.permits.locked().1.clone()
    }
}

#[async_trait]
impl Service for Tftp {
    fn name(&self) -> &'static str {
        "tftp"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let (ctx, addrs, max) = ctx_of(&plan, &self.stats)?;
        let mut new = Vec::new();
        for addr in self.listeners.missing(&addrs) {
            let socket =
                crate::runtime::bind::udp(addr).with_context(|| format!("bind UDP {addr}"))?;
            new.push((addr, socket));
        }
        Ok(Box::new(move || {
            let root = ctx.root.clone();
            self.ctx.store(Arc::new(ctx));
            {
                let mut p = self.permits.locked();
                if p.0 != max {
                    *p = (max, Arc::new(Semaphore::new(max)));
                }
            }
            self.listeners.close_except("tftp", &addrs);
            if addrs.len() < 2 {
                self.stats.clear_twin();
            }
            for (addr, socket) in new {
                if let Ok(local) = socket.local_addr() {
                    info!("listening for tftp on {local} (root {})", root.display());
                    let twin = Some(&addr) != addrs.first();
                    self.stats.set_bound(local, root.clone(), twin);
                }
                let me = self.clone();
                self.listeners
                    .start(&self.tasks, addr, format!("tftp listener {addr}"), |t| {
                        listen(me, socket, t)
                    });
            }
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.tasks
            .supervise(&shutdown, crate::runtime::drain::service(DRAIN))
            .await
    }

    fn status(&self) -> crate::runtime::status::ServiceStatus {
        crate::runtime::status::ServiceStatus::Tftp(self.stats.status())
    }

    fn metrics(&self, out: &mut String) {
        self.stats.metrics(out)
    }
}

/// Receive requests on `socket` until `shutdown`; each accepted read
/// request runs in its own task (its own socket, the RFC 1350 TID).
async fn listen(
    svc: Arc<Tftp>,
    socket: UdpSocket,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    {
        let local = socket.local_addr()?;
        let mut tasks = JoinSet::new();
        // Ends the transfers: not at shutdown, only after their drain.
        let stop = CancellationToken::new();
        let mut buf = vec![0u8; 65536];
        let mut datagrams = Datagrams::new("tftp", &LOG, Gate::Always);
        let result = loop {
            let (n, from) = match datagrams.next(&socket, &mut buf, &shutdown).await {
                Ok(Some(x)) => x,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            while tasks.try_join_next().is_some() {}
            // A reload swaps the settings between requests.
            let ctx = svc.ctx.load_full();
            let on_panic = || {
                ctx.stats.malformed.fetch_add(1, Ordering::Relaxed);
            };
            let data = buf.get(..n).unwrap_or(&[]);
            let Some(parsed) = datagrams.guarded(from, n, on_panic, || packet::parse(data)) else {
                continue;
            };
            let reply = match first_packet(&svc, &ctx, parsed, from) {
                Decision::Reply(r) => Some(r),
                Decision::Silent(Admitted(req, held)) => {
                    let ctx = ctx.clone();
                    let stop = stop.clone();
                    let ip = local.ip();
                    tasks.spawn(async move {
                        serve(ctx, SocketAddr::new(ip, 0), req, from, stop, held).await
                    });
                    None
                }
                Decision::Dropped(()) => None,
            };
            if let Some(r) = reply
                && let Err(e) = socket.send_to(&r, from).await
            {
                debug!(%from, "tftp send: {e}");
            }
        };
        if result.is_ok() && !tasks.is_empty() {
            info!(
                "tftp: {} transfer(s) in progress on {local}: up to {DRAIN:?} to finish; new requests are refused",
                tasks.len()
            );
            let cut = drain(&socket, &mut tasks, &svc.stats, DRAIN).await;
            if cut > 0 {
                warn!("tftp: {cut} transfer(s) on {local} cut after {DRAIN:?}");
            }
        }
        stop.cancel();
        // Each stopped transfer says goodbye (ERROR 0) and ends.
        while tasks.join_next().await.is_some() {}
        result
    }
}

/// An admitted read request: served by its own task, nothing to answer
/// on the listener.
struct Admitted(Request, Held);

/// The decision on a listener's first packet: an ERROR to send (busy,
/// write request, not a read request, malformed), an admitted read request
/// to serve, or nothing (an ERROR from the client).
fn first_packet(
    svc: &Tftp,
    ctx: &Arc<Ctx>,
    parsed: Result<Packet<'_>, packet::ParseError>,
    from: SocketAddr,
) -> Decision<Vec<u8>, Admitted, ()> {
    let reply = match parsed {
        Ok(Packet::Rrq(req)) => match admit(&svc.clients, &svc.permits(), ctx, from) {
            Ok(held) => return Decision::Silent(Admitted(req, held)),
            Err(why) => {
                let file = Shown(&req.filename).to_string();
                debug!(%from, "tftp: {file} refused: {why}");
                ctx.stats.finish(from, &file, Outcome::Busy, why, 0);
                packet::error(ErrorCode::Undefined, "server busy, try again later")
            }
        },
        Ok(Packet::Wrq(req)) => {
            let file = Shown(&req.filename).to_string();
            warn_client("write request refused", from, || {
                format!("{file}: read-only server")
            });
            ctx.stats
                .finish(from, &file, Outcome::Refused, "write request", 0);
            packet::error(
                ErrorCode::IllegalOperation,
                "read-only server: write requests are not accepted",
            )
        }
        Ok(Packet::Error { .. }) => {
            ctx.stats.malformed.fetch_add(1, Ordering::Relaxed);
            return Decision::Dropped(());
        }
        Ok(_) => {
            ctx.stats.malformed.fetch_add(1, Ordering::Relaxed);
            warn_client("unexpected packet on the listener", from, || {
                "not a read request; answered ERROR 4".into()
            });
            packet::error(ErrorCode::IllegalOperation, "expected a read request")
        }
        Err(e) => {
            ctx.stats.malformed.fetch_add(1, Ordering::Relaxed);
            warn_client("malformed request", from, || {
                format!("{e}; answered ERROR 4")
            });
            packet::error(
                ErrorCode::IllegalOperation,
                &format!("malformed request: {e}"),
            )
        }
    };
    Decision::Reply(reply)
}

/// What an admitted transfer holds until it ends.
struct Held {
    _permit: OwnedSemaphorePermit,
    _slot: ClientSlot,
}

/// Admit a read request from `from`: one of its client's slots, then one
/// of the global permits; or why not.
fn admit(
    clients: &Arc<Clients>,
    permits: &Arc<Semaphore>,
    ctx: &Ctx,
    from: SocketAddr,
) -> Result<Held, &'static str> {
    let Some(slot) = clients.try_acquire(from.ip(), ctx.max_per_client) else {
        ctx.stats.client_limit.fetch_add(1, Ordering::Relaxed);
        return Err("client limit (maxTransfersPerClient)");
    };
    let permit = permits
        .clone()
        .try_acquire_owned()
        .map_err(|_| "server busy (maxTransfers)")?;
    Ok(Held {
        _permit: permit,
        _slot: slot,
    })
}

/// After shutdown: let `tasks` finish for up to `budget` while every
/// request on `socket` gets ERROR 0 "server shutting down". Returns how
/// many transfers were still running at the end of it.
async fn drain(
    socket: &UdpSocket,
    tasks: &mut JoinSet<()>,
    stats: &Stats,
    budget: Duration,
) -> usize {
    let deadline = Instant::now() + budget;
    let mut buf = vec![0u8; 2048];
    while !tasks.is_empty() {
        tokio::select! {
            _ = tasks.join_next() => {}
            _ = tokio::time::sleep_until(deadline) => return tasks.len(),
            r = socket.recv_from(&mut buf) => match r {
                Ok((n, from)) => refuse_stopping(socket, &buf[..n], from, stats).await,
                Err(e) => {
                    debug!("tftp recv while stopping: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
    0
}

/// A datagram on the listener while stopping: ERROR 0 to anything but an
/// ERROR (never ping-pong with another server).
async fn refuse_stopping(socket: &UdpSocket, datagram: &[u8], from: SocketAddr, stats: &Stats) {
    match packet::parse(datagram) {
        Ok(Packet::Error { .. }) => return,
        Ok(Packet::Rrq(req)) => {
            let file = Shown(&req.filename).to_string();
            stats.finish(from, &file, Outcome::Refused, "server shutting down", 0);
        }
        _ => {}
    }
    let e = packet::error(ErrorCode::Undefined, "server shutting down");
    if let Err(e) = socket.send_to(&e, from).await {
        debug!(%from, "tftp send: {e}");
    }
}

/// Keeps `active` right however a transfer ends.
struct ActiveGuard<'a>(&'a Stats);

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One read transfer, from its own socket (TID).
async fn serve(
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
    let sock = match crate::runtime::bind::udp(bind_to) {
        Ok(s) => s,
        Err(e) => {
            if let Some(tail) = LOG.check("no transfer socket", Some(client)) {
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
    let bytes = if outcome == Outcome::Completed {
        opened.size
    } else {
        0
    };
    debug!(%client, "tftp: {file}: {outcome:?} {detail}");
    stats.finish(client, &file, outcome, &detail, bytes);
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

/// Warnings a client can cause (malformed or unexpected datagrams, write
/// requests): at most one line per reason every
/// [`lograte::CLIENT_EVENTS`], naming the client, with the count of the
/// rest.
static LOG: LogRate = LogRate::new("tftp", lograte::CLIENT_EVENTS);

/// Log `key` for `from` at warn if [`LOG`] allows, else at debug.
fn warn_client(key: &'static str, from: SocketAddr, detail: impl FnOnce() -> String) {
    match LOG.check(key, Some(from)) {
        Some(tail) => warn!("tftp: {key} from {from}: {}{tail}", detail()),
        None => debug!(%from, "tftp: {key}: {}", detail()),
    }
}
