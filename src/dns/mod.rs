//! Authoritative DNS for the cluster zones, forwarding everything else.
//!
//! Role: answer `<name>.<baseDomain>` (SOA, NS, api, api-int, `*.apps`,
//! nodes, etcd-N, `_etcd-server-ssl._tcp` SRV, extra records) and its reverse
//! zones with the AA flag, from the zones computed in `plan.rs`; forward
//! other names to `network.upstreamDNS` for clients in `network.cidr` or on
//! loopback; REFUSED otherwise.
//!
//! RFCs: 1034/1035 (AA, NXDOMAIN with the SOA for negative caching, TCP
//! framing, 512-byte UDP limit with TC), 2308 (negative TTL = SOA minimum),
//! 4592 (wildcards: a covered name with another type is NODATA, not
//! NXDOMAIN), 6891 (EDNS buffer size), 7766 (TCP).
//!
//! Pieces: [`records`] converts plan records to hickory records (pure),
//! [`handler`] is the socket-free request path (hickory `Catalog` with a
//! wildcard fix, the recursion ACL and the response encoder), and this file
//! is the thin socket layer: one UDP loop and one TCP accept loop per listen
//! address.
//!
//! Invariants: sockets are bound in [`Service::stage`], before anything
//! changes; no packet or connection can end a loop, and a loop that ends on
//! its own fails the service; forwarded queries run in their own (bounded)
//! tasks so a slow upstream never stalls authoritative answers. A reload
//! swaps the whole catalog at once ([`ArcSwap`]): each query is answered by
//! the catalog current when it arrived, in-flight forwards keep theirs and
//! never delay the swap, and listen addresses that did not change keep
//! their sockets (no query is refused during a reload).

pub mod handler;
pub mod records;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use anyhow::Context as _;
use arc_swap::ArcSwap;
use async_trait::async_trait;
use hickory_server::net::xfer::Protocol;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::metrics::{Kind, family};
use crate::net;
use crate::plan::Plan;
use crate::service::{Commit, Listeners, Service, Tasks};
use crate::status::{DnsStatus, PacketCacheStatus, ServiceStatus};
use handler::{Core, Route, Stats};

/// Idle time after which a TCP connection is closed (RFC 7766 suggests seconds).
pub const TCP_IDLE: Duration = Duration::from_secs(10);
/// Concurrent TCP connections per listener; more wait in the accept queue.
pub const MAX_TCP_CONNECTIONS: usize = 256;
/// Concurrent forwarded UDP queries; beyond that new ones are dropped
/// (the client retries).
pub const MAX_FORWARDS_IN_FLIGHT: usize = 1024;

/// Bind UDP and TCP on `addr`. With port 0 both get the same port (retried
/// a few times when the kernel's UDP pick is taken for TCP).
async fn bind_pair(addr: SocketAddr) -> anyhow::Result<(UdpSocket, TcpListener)> {
    if addr.port() != 0 {
        let udp = UdpSocket::bind(addr)
            .await
            .with_context(|| format!("bind UDP {addr}"))?;
        let tcp = TcpListener::bind(addr)
            .await
            .with_context(|| format!("bind TCP {addr}"))?;
        return Ok((udp, tcp));
    }
    let mut last = None;
    for _ in 0..20 {
        let udp = UdpSocket::bind(addr)
            .await
            .with_context(|| format!("bind UDP {addr}"))?;
        let same = udp.local_addr()?;
        match TcpListener::bind(same).await {
            Ok(tcp) => return Ok((udp, tcp)),
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
    stats: Arc<Stats>,
    info: ArcSwap<Info>,
    listeners: Listeners<SocketAddr>,
    tasks: Tasks,
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
    pub fn new(plan: &Plan) -> anyhow::Result<Arc<Dns>> {
        let core = handler::build(plan).context("building the DNS zones")?;
        Ok(Arc::new(Dns {
            stats: core.stats.clone(),
            core: Arc::new(ArcSwap::from_pointee(core)),
            info: ArcSwap::from_pointee(Info::default()),
            listeners: Listeners::default(),
            tasks: Tasks::new("dns"),
        }))
    }

    fn start_listener(&self, addr: SocketAddr, udp: UdpSocket, tcp: TcpListener) {
        let token = self.tasks.token();
        let (ul, tl) = (udp.local_addr().ok(), tcp.local_addr().ok());
        self.tasks.spawn(
            format!("dns udp {addr}"),
            token.clone(),
            udp_loop(Arc::new(udp), self.core.clone(), token.clone()),
        );
        self.tasks.spawn(
            format!("dns tcp {addr}"),
            token.clone(),
            tcp_loop(tcp, self.core.clone(), token.clone()),
        );
        if let (Some(u), Some(t)) = (ul, tl) {
            info!("listening for dns udp on {u}");
            info!("listening for dns tcp on {t}");
        }
        self.listeners.insert(addr, token);
    }
}

#[async_trait]
impl Service for Dns {
    fn name(&self) -> &'static str {
        "dns"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let mut core = handler::build(&plan).context("building the DNS zones")?;
        core.stats = self.stats.clone();
        let wanted = plan.cluster.dns.listen.clone();
        let mut new = Vec::new();
        for addr in self.listeners.missing(&wanted) {
            let (u, t) = bind_pair(addr).await?;
            new.push((addr, u, t));
        }
        Ok(Box::new(move || {
            let listen = wanted.iter().map(|a| a.to_string()).collect::<Vec<_>>();
            self.core.store(Arc::new(core));
            for addr in self.listeners.retain(&wanted) {
                info!("dns: closed listener {addr}");
            }
            for (addr, u, t) in new {
                self.start_listener(addr, u, t);
            }
            self.info.store(Arc::new(Info::of(&plan, listen)));
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.tasks
            .supervise(&shutdown, Duration::from_secs(3))
            .await
    }

    fn status(&self) -> ServiceStatus {
        let s = &self.stats;
        let info = self.info.load();
        ServiceStatus::Dns(DnsStatus {
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
        })
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

async fn udp_loop(
    sock: Arc<UdpSocket>,
    cores: Arc<ArcSwap<Core>>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let forwards = Arc::new(Semaphore::new(MAX_FORWARDS_IN_FLIGHT));
    let mut inflight = JoinSet::new();
    let mut buf = vec![0u8; 65_535];
    let mut out = Vec::with_capacity(1232);
    // One cancellation future for the whole loop (not one per packet).
    let cancelled = shutdown.cancelled();
    tokio::pin!(cancelled);
    loop {
        let (n, src) = tokio::select! {
            biased;
            _ = &mut cancelled => break,
            r = sock.recv_from(&mut buf) => match r {
                Ok(x) => x,
                Err(e) => {
                    // ICMP errors from earlier sends (ECONNREFUSED) and the
                    // like: nothing to do for this socket but go on.
                    debug!("dns udp recv: {e}");
                    continue;
                }
            },
        };
        // The catalog current when the query arrived answers it, even if
        // a reload swaps it meanwhile.
        let core = cores.load_full();
        if !answerable(src) {
            core.stats.malformed.fetch_add(1, Relaxed);
            debug!(%src, "DNS query from an address that cannot be answered; dropped");
            continue;
        }
        if core.cached_into(&buf[..n], Protocol::Udp, &mut out) {
            send_udp(&sock, &out, src).await;
            continue;
        }
        let Some(req) = core.decode(&buf[..n], src, Protocol::Udp) else {
            continue;
        };
        match core.route(&req) {
            Route::Forward => {
                while inflight.try_join_next().is_some() {}
                let Ok(permit) = forwards.clone().try_acquire_owned() else {
                    debug!(%src, "too many forwarded queries in flight; dropped");
                    continue;
                };
                let (core, sock) = (core.clone(), sock.clone());
                inflight.spawn(async move {
                    let _permit = permit;
                    if let Some(resp) = core.answer(&req, Route::Forward).await {
                        send_udp(&sock, &resp, src).await;
                    }
                });
            }
            route => {
                if let Some(resp) = core.answer(&req, route).await {
                    send_udp(&sock, &resp, src).await;
                }
            }
        }
    }
    let drain = async { while inflight.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(2), drain)
        .await
        .is_err()
    {
        inflight.abort_all();
    }
    Ok(())
}

/// A UDP source we may answer: not port 0, not unspecified, broadcast or
/// multicast (spoofed sources used for reflection).
fn answerable(src: SocketAddr) -> bool {
    let ip = src.ip();
    src.port() != 0
        && !ip.is_unspecified()
        && !ip.is_multicast()
        && !matches!(ip, std::net::IpAddr::V4(v4) if v4.is_broadcast())
}

async fn send_udp(sock: &UdpSocket, resp: &[u8], to: SocketAddr) {
    if let Err(e) = sock.send_to(resp, to).await {
        debug!(%to, "dns udp send: {e}");
    }
}

async fn tcp_loop(
    l: TcpListener,
    cores: Arc<ArcSwap<Core>>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let limits = net::Limits {
        max_conns: Some(MAX_TCP_CONNECTIONS),
        backoff: Duration::from_millis(50),
        drain: Some(Duration::from_secs(2)),
    };
    let on_error = |e: &std::io::Error| warn!("dns tcp accept: {e}");
    net::serve(&l, limits, &shutdown, on_error, |stream, peer| {
        let (core, shutdown) = (cores.clone(), shutdown.clone());
        async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                r = tcp_conn(stream, peer, &core) => {
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

/// RFC 1035 4.2.2 framing: 2-byte length, then the message; several
/// queries per connection, answered in order; closed after [`TCP_IDLE`].
async fn tcp_conn(
    mut s: TcpStream,
    peer: SocketAddr,
    cores: &ArcSwap<Core>,
) -> std::io::Result<()> {
    let _ = s.set_nodelay(true);
    let mut buf = vec![0u8; 65_535];
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(TCP_IDLE, s.read_exact(&mut len)).await {
            Err(_) => return Ok(()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(r) => r?,
        };
        let n = usize::from(u16::from_be_bytes(len));
        match tokio::time::timeout(TCP_IDLE, s.read_exact(&mut buf[..n])).await {
            Err(_) => return Ok(()),
            Ok(r) => r?,
        };
        let core = cores.load_full();
        let Some(resp) = core.handle(&buf[..n], peer, Protocol::Tcp).await else {
            // A malformed message: RFC 7766 lets us close the connection.
            return Ok(());
        };
        let Ok(rlen) = u16::try_from(resp.len()) else {
            warn!(%peer, "DNS response over 65535 bytes not sent");
            return Ok(());
        };
        let mut frame = Vec::with_capacity(resp.len() + 2);
        frame.extend_from_slice(&rlen.to_be_bytes());
        frame.extend_from_slice(&resp);
        s.write_all(&frame).await?;
    }
}
