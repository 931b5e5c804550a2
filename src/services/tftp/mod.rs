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
//! - `session`: one read transfer on its own socket (the file check, the
//!   windowed send with read-ahead, retransmission, the end recorded).
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
mod session;

pub mod stats;
pub mod status;
pub mod transfer;

use std::net::SocketAddr;
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

use crate::plan::Plan;
use crate::runtime::bind::BindOptions;
use crate::runtime::context::Context;
use crate::runtime::datagram::{Datagrams, Decision, Gate};
use crate::runtime::lograte::{self, LogRate};
use crate::runtime::service::{Commit, Listeners, Service, Tasks};
use crate::runtime::sync::LockExt as _;
use clients::{ClientSlot, Clients};
use packet::{ErrorCode, Packet, Request, Shown};
use session::serve;
use stats::{Outcome, Stats};

/// Bytes read from the file per `pread` when the window is smaller.
pub const READ_AHEAD: usize = 64 * 1024;
/// How long running transfers get after shutdown is requested.
const DRAIN: Duration = crate::runtime::drain::TFTP_TRANSFERS;

/// What every transfer task needs.
struct Ctx {
    pub(super) root: PathBuf,
    pub(super) allowed: Vec<PathBuf>,
    pub(super) timeout: Duration,
    pub(super) retries: u32,
    /// `maxTransfersPerClient`.
    max_per_client: usize,
    pub(super) stats: Arc<Stats>,
    /// How a transfer's socket binds (the run-time context).
    pub(super) bind: BindOptions,
    /// Warnings a client can cause (malformed or unexpected datagrams,
    /// write requests, no transfer socket): at most one line per reason
    /// every [`lograte::CLIENT_EVENTS`], naming the client, with the count
    /// of the rest (the serve's `tftp` limiter).
    pub(super) log: Arc<LogRate>,
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
    bind: BindOptions,
    /// The serve's `tftp` limiter (each [`Ctx`] carries it).
    log: Arc<LogRate>,
}

/// The transfer settings of `plan`, with the root checked.
/// Returns the context, the listen addresses (`pxe.tftpListen` and its
/// IPv6 twin) and `maxTransfers`.
fn ctx_of(
    plan: &Plan,
    stats: &Arc<Stats>,
    bind: BindOptions,
    log: &Arc<LogRate>,
) -> anyhow::Result<(Ctx, Vec<SocketAddr>, usize)> {
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
            bind,
            log: log.clone(),
        },
        plan.cluster
            .listen_addrs(crate::model::catalogue::ServiceKind::Tftp),
        c.max_transfers,
    ))
}

impl Tftp {
    /// The service for `plan` (the root must exist), serving nothing until
    /// its first commit.
    pub fn new(plan: &Plan, rt: &Context) -> anyhow::Result<Arc<Tftp>> {
        let stats = Arc::new(Stats::new());
        let log = rt.log_rate("tftp", lograte::CLIENT_EVENTS);
        let (ctx, _, max) = ctx_of(plan, &stats, rt.bind, &log)?;
        Ok(Arc::new(Tftp {
            ctx: Arc::new(ArcSwap::from_pointee(ctx)),
            stats,
            permits: std::sync::Mutex::new((max, Arc::new(Semaphore::new(max)))),
            clients: Arc::default(),
            listeners: Listeners::default(),
            tasks: rt.tasks("tftp"),
            bind: rt.bind,
            log,
        }))
    }

    fn permits(&self) -> Arc<Semaphore> {
        self.permits.locked().1.clone()
    }
}

impl Tftp {
    /// `/status` → `tftp`: this service's section.
    pub fn status(&self) -> status::TftpStatus {
        self.stats.status()
    }
}

#[async_trait]
impl Service for Tftp {
    fn name(&self) -> &'static str {
        "tftp"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let (ctx, addrs, max) = ctx_of(&plan, &self.stats, self.bind, &self.log)?;
        let mut new = Vec::new();
        for addr in self.listeners.missing(&addrs) {
            let socket = self
                .bind
                .udp(addr)
                .with_context(|| format!("bind UDP {addr}"))?;
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
        let mut datagrams = Datagrams::new("tftp", svc.log.clone(), Gate::Always);
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
                ctx.stats
                    .finish(from, &file, Outcome::Busy, &why.to_string(), 0);
                packet::error(ErrorCode::Undefined, "server busy, try again later")
            }
        },
        Ok(Packet::Wrq(req)) => {
            let file = Shown(&req.filename).to_string();
            warn_client(&ctx.log, "write request refused", from, || {
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
            warn_client(&ctx.log, "unexpected packet on the listener", from, || {
                "not a read request; answered ERROR 4".into()
            });
            packet::error(ErrorCode::IllegalOperation, "expected a read request")
        }
        Err(e) => {
            ctx.stats.malformed.fetch_add(1, Ordering::Relaxed);
            warn_client(&ctx.log, "malformed request", from, || {
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

/// Why a read request is not admitted: the refused transfer's detail in
/// `/status` and the debug log (the client is told "server busy").
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Busy {
    /// Its client holds `maxTransfersPerClient` transfers.
    #[error("client limit (maxTransfersPerClient)")]
    ClientLimit,
    /// The server runs `maxTransfers` transfers.
    #[error("server busy (maxTransfers)")]
    ServerLimit,
}

/// Admit a read request from `from`: one of its client's slots, then one
/// of the global permits; or why not.
fn admit(
    clients: &Arc<Clients>,
    permits: &Arc<Semaphore>,
    ctx: &Ctx,
    from: SocketAddr,
) -> Result<Held, Busy> {
    let Some(slot) = clients.try_acquire(from.ip(), ctx.max_per_client) else {
        ctx.stats.client_limit.fetch_add(1, Ordering::Relaxed);
        return Err(Busy::ClientLimit);
    };
    let permit = permits
        .clone()
        .try_acquire_owned()
        .map_err(|_| Busy::ServerLimit)?;
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

/// Log `key` for `from` at warn if `log` allows, else at debug.
fn warn_client(
    log: &LogRate,
    key: &'static str,
    from: SocketAddr,
    detail: impl FnOnce() -> String,
) {
    match log.check(key, Some(from)) {
        Some(tail) => warn!("tftp: {key} from {from}: {}{tail}", detail()),
        None => debug!(%from, "tftp: {key}: {}", detail()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The details a refused read request shows in `/status`.
    #[test]
    fn a_refused_request_says_which_limit() {
        assert_eq!(
            Busy::ClientLimit.to_string(),
            "client limit (maxTransfersPerClient)"
        );
        assert_eq!(Busy::ServerLimit.to_string(), "server busy (maxTransfers)");
    }
}
