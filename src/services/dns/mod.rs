//! Authoritative DNS for the cluster zones, forwarding everything else.
//!
//! Role: answer `<name>.<baseDomain>` (SOA, NS, api, api-int, `*.apps`,
//! nodes, etcd-N, `_etcd-server-ssl._tcp` SRV, extra records) and its reverse
//! zones with the AA flag, from the zones computed in `plan.rs` (A and
//! AAAA, `in-addr.arpa` and, dual-stack, the `ip6.arpa` zone of
//! `network.ipv6.cidr`); forward other names to `network.upstreamDNS` (IPv4
//! or IPv6) for clients in `network.cidr`, `network.ipv6.cidr` or on
//! loopback; REFUSED otherwise.
//!
//! RFCs: 1034/1035 (AA, NXDOMAIN with the SOA for negative caching, TCP
//! framing, 512-byte UDP limit with TC), 2308 (negative TTL = SOA minimum),
//! 6891 and DNS Flag Day 2020 (EDNS, UDP answers at most 1232 bytes),
//! 4592 (wildcards: a covered name with another type is NODATA, not
//! NXDOMAIN), 7766 (TCP).
//!
//! Pieces: [`records`] converts plan records to hickory records (pure),
//! [`handler`] is the socket-free request path (hickory `Catalog` with a
//! wildcard fix, the recursion ACL), [`complete`] fills in what hickory's
//! answers lack, [`encode`] the UDP size rules and raw error answers,
//! [`forward`] the upstream client, [`udp`] the UDP hot path (worker
//! threads on the bound socket), [`transfer`] the AXFR/IXFR answers to
//! `dns.transfer` clients and the growing serials, [`notify`] the NOTIFYs
//! to `dns.notify` when a serial moves, and this file is the thin socket layer:
//! one UDP socket served by [`udp::serve`] and one TCP accept loop per
//! listen address. TCP connections
//! answer pipelined queries concurrently (RFC 7766 6.2.1.1) and close fast
//! when the listener is under pressure.
//!
//! Invariants: sockets are bound in [`Service::stage`], before anything
//! changes; no packet or connection can end a loop, and a loop that ends on
//! its own (or a UDP worker thread that exits) fails the service;
//! forwarded queries run in their own (bounded) tasks so a slow upstream
//! never stalls authoritative answers. A reload
//! swaps the whole catalog at once ([`ArcSwap`]): each query is answered by
//! the catalog current when it arrived, in-flight forwards keep theirs and
//! never delay the swap, and listen addresses that did not change keep
//! their sockets (no query is refused during a reload). With
//! `dns.transfer`, served serials only grow ([`transfer::Serials`], kept
//! across reloads; without it they are the plan's content hash); a commit
//! whose serials moved sends its NOTIFYs in the background, ended by
//! shutdown.

pub mod complete;
pub mod encode;
pub mod forward;
pub mod handler;
pub mod notify;
mod packetcache;
pub mod records;
pub mod status;
pub mod transfer;
pub mod udp;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use anyhow::Context as _;
use arc_swap::ArcSwap;
use async_trait::async_trait;
use hickory_server::net::xfer::Protocol;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::plan::Plan;
use crate::runtime::bind::{BindOptions, deep_receive_queue};
use crate::runtime::context::Context;
use crate::runtime::limits::cap::Caps;
use crate::runtime::lograte::{self, LogRate};
use crate::runtime::metrics::{Kind, family};
use crate::runtime::service::{Commit, Listeners, Service, Tasks};
use crate::runtime::sync::LockExt as _;
use crate::runtime::{drain, net};
use crate::services::dns::status::{DnsStatus, PacketCacheStatus};
use handler::{Core, Prepared, Route, Stats};

/// Idle time after which a TCP connection is closed (RFC 7766 suggests seconds).
pub const TCP_IDLE: Duration = Duration::from_secs(10);
/// Concurrent TCP connections per listener; more wait in the accept queue.
pub const MAX_TCP_CONNECTIONS: usize = crate::runtime::limits::cap::DNS_MAX_TCP_CONNECTIONS;
/// Queries answered at once on one TCP connection (RFC 7766 6.2.1.1);
/// the next query is read when one of them is done.
pub const TCP_PIPELINE: usize = 16;
/// Open TCP connections from which a listener is under pressure: waiting
/// connections then close after [`TCP_IO_TIMEOUT`] (a quarter of the
/// slots is kept for new clients).
pub const TCP_PRESSURE_AT: usize = MAX_TCP_CONNECTIONS * 3 / 4;
/// How long a connection may wait for (the rest of) a query under
/// pressure (Knot's `tcp-io-timeout`).
pub const TCP_IO_TIMEOUT: Duration = Duration::from_millis(500);
/// Concurrent forwarded UDP queries; beyond that new ones are dropped
/// (the client retries).
pub const MAX_FORWARDS_IN_FLIGHT: usize = 1024;

/// Bind UDP and TCP on `addr`. With port 0 both get the same port (retried
/// a few times when the kernel's UDP pick is taken for TCP).
async fn bind_pair(
    addr: SocketAddr,
    bind: BindOptions,
) -> anyhow::Result<(UdpSocket, TcpListener)> {
    if addr.port() != 0 {
        let udp = bind.udp(addr).with_context(|| format!("bind UDP {addr}"))?;
        deep_receive_queue(&udp);
        let tcp = bind.tcp(addr).with_context(|| format!("bind TCP {addr}"))?;
        return Ok((udp, tcp));
    }
    let mut last = None;
    for _ in 0..20 {
        let udp = bind.udp(addr).with_context(|| format!("bind UDP {addr}"))?;
        let same = udp.local_addr()?;
        match bind.tcp(same) {
            Ok(tcp) => {
                deep_receive_queue(&udp);
                return Ok((udp, tcp));
            }
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => Err(e).with_context(|| format!("bind TCP {addr} on the UDP port")),
        None => anyhow::bail!("bind {addr}: no port found"),
    }
}

/// The DNS service: the current catalog (swapped whole by a reload) and
/// one UDP loop plus one TCP accept loop per configured listen address.
pub struct Dns {
    core: Arc<ArcSwap<Core>>,
    /// The serials served so far (they only grow, [`transfer::Serials`]).
    serials: std::sync::Mutex<transfer::Serials>,
    stats: Arc<Stats>,
    info: ArcSwap<Info>,
    listeners: Listeners<SocketAddr>,
    tasks: Tasks,
    /// The DNS-over-TCP cap and how sockets bind (the run-time context).
    caps: Caps,
    bind: BindOptions,
    /// The serve's `dns` limiter, put in every core it builds.
    log: Arc<LogRate>,
    /// TCP accept errors (EMFILE …): at most one line a second (the
    /// serve's `dns tcp` limiter).
    accept_log: Arc<LogRate>,
}

/// What `/status` shows of the plan being served.
#[derive(Default)]
struct Info {
    listen: Vec<String>,
    zones: Vec<String>,
    upstream: Vec<String>,
    records: usize,
}

impl Info {
    fn of(plan: &Plan, listen: Vec<String>) -> Info {
        Info {
            listen,
            zones: plan.zones.iter().map(|z| z.origin.clone()).collect(),
            upstream: plan
                .cluster
                .network
                .upstream_dns
                .iter()
                .map(|a| a.to_string())
                .collect(),
            records: plan.zones.iter().map(|z| z.records.len()).sum(),
        }
    }
}

impl Dns {
    /// The service for `plan`, serving nothing until its first commit.
    pub fn new(plan: &Plan, ctx: &Context) -> anyhow::Result<Arc<Dns>> {
        let mut core = handler::build(plan).context("building the DNS zones")?;
        core.log = ctx.log_rate("dns", lograte::CLIENT_EVENTS);
        Ok(Arc::new(Dns {
            stats: core.stats.clone(),
            log: core.log.clone(),
            accept_log: ctx.log_rate("dns tcp", Duration::from_secs(1)),
            core: Arc::new(ArcSwap::from_pointee(core)),
            serials: Default::default(),
            info: ArcSwap::from_pointee(Info::default()),
            listeners: Listeners::default(),
            tasks: ctx.tasks("dns"),
            caps: ctx.caps,
            bind: ctx.bind,
        }))
    }

    /// Send the NOTIFYs of a commit in the background (ended by shutdown).
    fn send_notifies(&self, jobs: Vec<NotifyJob>, bind: BindOptions) {
        if jobs.is_empty() {
            return;
        }
        let token = self.tasks.token();
        tokio::spawn(async move {
            let all = futures_join(jobs, bind);
            tokio::select! {
                _ = token.cancelled() => {}
                _ = all => {}
            }
        });
    }

    fn start_listener(&self, addr: SocketAddr, udp: UdpSocket, tcp: TcpListener) {
        let (ul, tl) = (udp.local_addr().ok(), tcp.local_addr().ok());
        let core = self.core.clone();
        let token = self
            .listeners
            .start(&self.tasks, addr, format!("dns udp {addr}"), |t| {
                udp::serve(udp, core, t)
            });
        self.tasks.spawn(
            format!("dns tcp {addr}"),
            token.clone(),
            tcp_loop(
                tcp,
                self.core.clone(),
                self.caps.dns_tcp(),
                self.accept_log.clone(),
                token,
            ),
        );
        if let (Some(u), Some(t)) = (ul, tl) {
            info!("listening for dns udp on {u}");
            info!("listening for dns tcp on {t}");
        }
    }
}

impl Dns {
    /// `/status` → `dns`: this service's section.
    pub fn status(&self) -> status::DnsStatus {
        let s = &self.stats;
        let info = self.info.load();
        DnsStatus {
            listen: info.listen.clone(),
            zones: info.zones.clone(),
            records: info.records,
            upstream: info.upstream.clone(),
            responses: s.rcode_counts().into_iter().collect(),
            forwarded: s.forwarded.load(Relaxed),
            refused_recursion: s.refused_recursion.load(Relaxed),
            dropped: s.malformed.load(Relaxed),
            packet_cache: PacketCacheStatus {
                hits: s.cache_hits.load(Relaxed),
                entries: self.core.load().cache_entries(),
            },
        }
    }
}

#[async_trait]
impl Service for Dns {
    fn name(&self) -> &'static str {
        "dns"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        // Growing serials for secondaries; without them the content hash
        // stays (what `render zone` prints).
        let mut zones = plan.zones.clone();
        let (serials, moved) = if plan.cluster.dns.transfer.is_empty() {
            Default::default()
        } else {
            self.serials.locked().assign(&mut zones, unix_now())
        };
        let mut core = handler::build_zones(&plan, &zones).context("building the DNS zones")?;
        core.stats = self.stats.clone();
        core.log = self.log.clone();
        let notify = notify_jobs(&plan, &core, &moved);
        let wanted = plan.cluster.dns.listen.clone();
        let mut new = Vec::new();
        for addr in self.listeners.missing(&wanted) {
            let (u, t) = bind_pair(addr, self.bind).await?;
            new.push((addr, u, t));
        }
        Ok(Box::new(move || {
            let listen = wanted.iter().map(|a| a.to_string()).collect::<Vec<_>>();
            self.core.store(Arc::new(core));
            *self.serials.locked() = serials;
            self.send_notifies(notify, self.bind);
            self.listeners.close_except("dns", &wanted);
            for (addr, u, t) in new {
                self.start_listener(addr, u, t);
            }
            self.info.store(Arc::new(Info::of(&plan, listen)));
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.tasks
            .supervise(&shutdown, drain::service(drain::DNS_QUERIES))
            .await
    }

    fn metrics(&self, out: &mut String) {
        let s = &self.stats;
        let mut f = family(
            out,
            "crc_appliance_dns_responses_total",
            Kind::Counter,
            "DNS responses sent, by RCODE.",
        );
        for (rc, n) in s.rcode_counts() {
            f.sample(&[("rcode", &rc)], n);
        }
        for (name, help, v) in [
            (
                "crc_appliance_dns_forwarded_total",
                "DNS queries forwarded to upstreamDNS.",
                &s.forwarded,
            ),
            (
                "crc_appliance_dns_refused_recursion_total",
                "Out-of-zone DNS queries refused (no upstream or client outside the network).",
                &s.refused_recursion,
            ),
            (
                "crc_appliance_dns_packet_cache_hits_total",
                "DNS answers served from the packet cache.",
                &s.cache_hits,
            ),
            (
                "crc_appliance_dns_dropped_total",
                "Malformed DNS messages dropped without an answer.",
                &s.malformed,
            ),
        ] {
            family(out, name, Kind::Counter, help).sample(&[], v.load(Relaxed));
        }
    }
}

/// One NOTIFY to send: zone, its SOA, secondary, source address.
type NotifyJob = (
    hickory_proto::rr::Name,
    hickory_proto::rr::Record,
    SocketAddr,
    SocketAddr,
);

/// The NOTIFYs for the zones whose serial `moved`: each to every
/// `dns.notify` secondary.
fn notify_jobs(plan: &Plan, core: &Core, moved: &[String]) -> Vec<NotifyJob> {
    let d = &plan.cluster.dns;
    let mut jobs = Vec::new();
    for z in core.transfer_zones.iter() {
        let origin = z.origin.to_string();
        let Some(soa) = transfer::soa_of(z) else {
            continue;
        };
        if !moved.contains(&origin) {
            continue;
        }
        for to in &d.notify {
            let from = notify::source_for(*to, &d.listen);
            jobs.push((z.origin.clone(), soa.clone(), *to, from));
        }
    }
    jobs
}

/// Run every NOTIFY at once.
async fn futures_join(jobs: Vec<NotifyJob>, bind: BindOptions) {
    let mut set = JoinSet::new();
    for (zone, soa, to, from) in jobs {
        set.spawn(notify::send(zone, soa, to, from, bind));
    }
    while set.join_next().await.is_some() {}
}

/// Seconds since the epoch, as a serial (RFC 1982 wraps it in 2106).
fn unix_now() -> u32 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(1);
    secs as u32
}

/// Accept DNS-over-TCP connections on `l`, at most `cap` at a time,
/// accept errors rate limited by `accept_log`.
async fn tcp_loop(
    l: TcpListener,
    cores: Arc<ArcSwap<Core>>,
    cap: usize,
    accept_log: Arc<LogRate>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let limits = net::Limits {
        max_conns: Some(cap),
        backoff: Duration::from_millis(50),
        drain: Some(drain::DNS_QUERIES),
    };
    let load = Arc::new(TcpLoad::new(cap));
    let on_error = |e: &std::io::Error| {
        if let Some(tail) = accept_log.check("accept error", None) {
            warn!("dns tcp accept: {e}{tail}");
        }
    };
    net::serve(&l, limits, &shutdown, on_error, |stream, peer| {
        let (core, shutdown) = (cores.clone(), shutdown.clone());
        let guard = TcpLoad::enter(&load);
        async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                r = tcp_conn(stream, peer, core, &guard) => {
                    if let Err(e) = r {
                        debug!(%peer, "dns tcp connection: {e}");
                    }
                }
            }
        }
    })
    .await;
    Ok(())
}

/// Open connections of one TCP listener and whether they are under
/// pressure (at least [`TCP_PRESSURE_AT`] open): then a connection that
/// waits for a query closes after [`TCP_IO_TIMEOUT`] instead of
/// [`TCP_IDLE`], so idle and half-sent connections free their slots fast
/// and a quarter of the slots stays for new clients (Knot does the same
/// with its 0.5 s io-timeout).
struct TcpLoad {
    open: std::sync::atomic::AtomicUsize,
    pressure: watch::Sender<bool>,
    /// Open connections from which on the listener is under pressure.
    pressure_at: usize,
}

impl TcpLoad {
    /// The load of a listener whose cap is `cap`.
    fn new(cap: usize) -> Self {
        TcpLoad {
            open: Default::default(),
            pressure: watch::Sender::new(false),
            pressure_at: tcp_pressure_at(cap),
        }
    }
}

/// Counts one open connection of a [`TcpLoad`] until dropped.
struct TcpSlot(Arc<TcpLoad>);

impl TcpLoad {
    fn enter(load: &Arc<TcpLoad>) -> TcpSlot {
        let n = load.open.fetch_add(1, Relaxed) + 1;
        load.pressure.send_if_modified(|p| {
            let was = *p;
            *p = n >= load.pressure_at;
            was != *p
        });
        TcpSlot(load.clone())
    }
}

impl Drop for TcpSlot {
    fn drop(&mut self) {
        let n = self.0.open.fetch_sub(1, Relaxed).saturating_sub(1);
        self.0.pressure.send_if_modified(|p| {
            let was = *p;
            *p = n >= self.0.pressure_at;
            was != *p
        });
    }
}

/// [`TCP_PRESSURE_AT`] in proportion to the cap in force, `cap` (a low
/// open-files limit scales the cap, `limits::cap`).
fn tcp_pressure_at(cap: usize) -> usize {
    (cap * TCP_PRESSURE_AT / MAX_TCP_CONNECTIONS).max(1)
}

/// Read one RFC 1035 4.2.2 frame (2-byte length, then the message); `None`
/// at a clean end of stream.
async fn read_frame(rd: &mut OwnedReadHalf) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 2];
    match rd.read_exact(&mut len).await {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        r => r?,
    };
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    rd.read_exact(&mut msg).await?;
    Ok(Some(msg))
}

/// [`read_frame`] within [`TCP_IDLE`], or [`TCP_IO_TIMEOUT`] while the
/// listener is under pressure (re-checked when the pressure changes);
/// `None` on timeout or end of stream.
async fn next_frame(
    rd: &mut OwnedReadHalf,
    pressure: &mut watch::Receiver<bool>,
) -> std::io::Result<Option<Vec<u8>>> {
    let start = tokio::time::Instant::now();
    let frame = read_frame(rd);
    tokio::pin!(frame);
    let mut watching = true;
    loop {
        let limit = if *pressure.borrow_and_update() {
            TCP_IO_TIMEOUT
        } else {
            TCP_IDLE
        };
        tokio::select! {
            r = &mut frame => return r,
            _ = tokio::time::sleep_until(start + limit) => return Ok(None),
            c = pressure.changed(), if watching => watching = c.is_ok(),
        }
    }
}

/// One DNS-over-TCP connection (RFC 7766): queries are read while earlier
/// ones are still being answered (at most [`TCP_PIPELINE`] in flight), and
/// each answer is written as soon as it is ready, so a slow forwarded query
/// does not hold up the authoritative answers behind it (6.2.1.1; answers
/// may leave out of order and carry their query's ID). A malformed message
/// or the idle timeout ends the reading; the answers in flight are still
/// written, then the connection is closed.
async fn tcp_conn(
    s: TcpStream,
    peer: SocketAddr,
    cores: Arc<ArcSwap<Core>>,
    slot: &TcpSlot,
) -> std::io::Result<()> {
    let _ = s.set_nodelay(true);
    let log = cores.load().log.clone();
    let (mut rd, mut wr) = s.into_split();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(TCP_PIPELINE);
    let mut pressure = slot.0.pressure.subscribe();
    let reader = async move {
        let slots = Arc::new(Semaphore::new(TCP_PIPELINE));
        let mut tasks = JoinSet::new();
        loop {
            let Ok(permit) = slots.clone().acquire_owned().await else {
                break;
            };
            let msg = match next_frame(&mut rd, &mut pressure).await {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(e) => {
                    debug!(%peer, "dns tcp read: {e}");
                    break;
                }
            };
            while tasks.try_join_next().is_some() {}
            // The catalog current when the query arrived answers it.
            let core = cores.load_full();
            if let Some(r) = core.cached(&msg, peer.ip(), Protocol::Tcp) {
                if tx.send(r).await.is_err() {
                    break;
                }
                continue;
            }
            match core.prepare(&msg, peer, Protocol::Tcp) {
                // A malformed message: RFC 7766 lets us close the connection.
                Prepared::Drop => break,
                Prepared::Reply(r) => {
                    if tx.send(r).await.is_err() {
                        break;
                    }
                }
                // A zone transfer: every message, in order, on this connection.
                Prepared::Query(req, Route::Transfer(zone)) => {
                    for m in core.transfer(&req, zone) {
                        if tx.send(m).await.is_err() {
                            break;
                        }
                    }
                }
                Prepared::Query(req, route) => {
                    let (core, tx) = (core.clone(), tx.clone());
                    tasks.spawn(async move {
                        let _permit = permit;
                        if let Some(r) = core.answer(&req, route).await {
                            let _ = tx.send(r).await;
                        }
                    });
                }
            }
        }
        drop(tx);
        while tasks.join_next().await.is_some() {}
    };
    let writer = async move {
        while let Some(resp) = rx.recv().await {
            let Ok(rlen) = u16::try_from(resp.len()) else {
                handler::warn_client(&log, "response over 65535 bytes", peer, || {
                    "not sent".into()
                });
                continue;
            };
            let mut frame = Vec::with_capacity(resp.len() + 2);
            frame.extend_from_slice(&rlen.to_be_bytes());
            frame.extend_from_slice(&resp);
            match tokio::time::timeout(TCP_IDLE, wr.write_all(&frame)).await {
                Ok(r) => r?,
                Err(_) => return Ok(()),
            }
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::pin!(reader, writer);
    tokio::select! {
        r = &mut writer => r,
        _ = &mut reader => writer.await,
    }
}
