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
//! Invariants: every socket is bound in [`bind`]; no packet or connection
//! can end [`Bound::run`]; forwarded queries run in their own (bounded)
//! tasks so a slow upstream never stalls authoritative answers.
//!
//! Entry points used by the supervisor: [`bind`] acquires every socket (so a
//! port conflict fails before any service starts), then [`Bound::run`] serves
//! until `shutdown` is cancelled.

pub mod handler;
pub mod records;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use anyhow::Context as _;
use hickory_server::net::xfer::Protocol;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::hub::{Hub, StatusSource};
use crate::metrics::{Kind, family};
use crate::net;
use crate::plan::Plan;
use handler::{Core, Route, Stats};

/// Idle time after which a TCP connection is closed (RFC 7766 suggests seconds).
pub const TCP_IDLE: Duration = Duration::from_secs(10);
/// Concurrent TCP connections per listener; more wait in the accept queue.
pub const MAX_TCP_CONNECTIONS: usize = 256;
/// Concurrent forwarded UDP queries; beyond that new ones are dropped
/// (the client retries).
pub const MAX_FORWARDS_IN_FLIGHT: usize = 1024;

/// Sockets acquired by [`bind`].
pub struct Bound {
    core: Arc<Core>,
    udp: Vec<UdpSocket>,
    tcp: Vec<TcpListener>,
    plan: Arc<Plan>,
}

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

/// Bind this service's sockets and log `listening for dns... on <addr>`.
pub async fn bind(plan: &Arc<Plan>) -> anyhow::Result<Bound> {
    let core = Arc::new(handler::build(plan).context("building the DNS zones")?);
    let mut udp = Vec::new();
    let mut tcp = Vec::new();
    for addr in &plan.cluster.dns.listen {
        let (u, t) = bind_pair(*addr).await?;
        info!("listening for dns udp on {}", u.local_addr()?);
        info!("listening for dns tcp on {}", t.local_addr()?);
        udp.push(u);
        tcp.push(t);
    }
    Ok(Bound {
        core,
        udp,
        tcp,
        plan: plan.clone(),
    })
}

/// `/status` and `/metrics` for the `dns` key.
struct DnsStatus {
    core: Arc<Core>,
    stats: Arc<Stats>,
    listen: Vec<String>,
    zones: Vec<String>,
    upstream: Vec<String>,
    records: usize,
}

impl StatusSource for DnsStatus {
    fn name(&self) -> &'static str {
        "dns"
    }
    fn status(&self) -> serde_json::Value {
        let s = &self.stats;
        let by_rcode: serde_json::Map<String, serde_json::Value> = s
            .rcode_counts()
            .into_iter()
            .map(|(k, v)| (k, v.into()))
            .collect();
        json!({
            "listen": self.listen,
            "zones": self.zones,
            "records": self.records,
            "upstream": self.upstream,
            "responses": by_rcode,
            "forwarded": s.forwarded.load(Relaxed),
            "refusedRecursion": s.refused_recursion.load(Relaxed),
            "dropped": s.malformed.load(Relaxed),
            "packetCache": {
                "hits": s.cache_hits.load(Relaxed),
                "entries": self.core.cache_entries(),
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

impl Bound {
    /// Serve until `shutdown` is cancelled, then finish in-flight work and return.
    pub async fn run(self, hub: Arc<Hub>, shutdown: CancellationToken) -> anyhow::Result<()> {
        let c = &self.plan.cluster;
        hub.register(Arc::new(DnsStatus {
            core: self.core.clone(),
            stats: self.core.stats.clone(),
            listen: self
                .udp
                .iter()
                .filter_map(|u| u.local_addr().ok())
                .map(|a| a.to_string())
                .collect(),
            zones: self.plan.zones.iter().map(|z| z.origin.clone()).collect(),
            upstream: c
                .network
                .upstream_dns
                .iter()
                .map(|a| a.to_string())
                .collect(),
            records: self.plan.zones.iter().map(|z| z.records.len()).sum(),
        }));
        let mut tasks = JoinSet::new();
        for sock in self.udp {
            tasks.spawn(udp_loop(
                Arc::new(sock),
                self.core.clone(),
                shutdown.clone(),
            ));
        }
        for l in self.tcp {
            tasks.spawn(tcp_loop(l, self.core.clone(), shutdown.clone()));
        }
        shutdown.cancelled().await;
        let drain = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_secs(3), drain)
            .await
            .is_err()
        {
            tasks.abort_all();
        }
        Ok(())
    }
}

async fn udp_loop(sock: Arc<UdpSocket>, core: Arc<Core>, shutdown: CancellationToken) {
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

async fn tcp_loop(l: TcpListener, core: Arc<Core>, shutdown: CancellationToken) {
    let limits = net::Limits {
        max_conns: Some(MAX_TCP_CONNECTIONS),
        backoff: Duration::from_millis(50),
        drain: Some(Duration::from_secs(2)),
    };
    let on_error = |e: &std::io::Error| warn!("dns tcp accept: {e}");
    net::serve(&l, limits, &shutdown, on_error, |stream, peer| {
        let (core, shutdown) = (core.clone(), shutdown.clone());
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
}

/// RFC 1035 4.2.2 framing: 2-byte length, then the message; several
/// queries per connection, answered in order; closed after [`TCP_IDLE`].
async fn tcp_conn(mut s: TcpStream, peer: SocketAddr, core: &Core) -> std::io::Result<()> {
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
