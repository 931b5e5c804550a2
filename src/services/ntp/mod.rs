//! NTP server (RFC 5905 server mode) serving the host clock to the
//! cluster's nodes, enabled by the top-level `ntp:` section
//! ([`crate::model::cluster::NtpCfg`]; docs/ntp.md).
//!
//! - [`packet`]: the 48-byte header codec (why our own: its module doc).
//! - [`core`]: request → reply decision (pure, fuzzed in its tests).
//! - [`clients`]: per-client token buckets and the KoD budget (pure).
//! - [`stats`]: counters, per-client clock offsets, `/status`, `/metrics`.
//! - this file: the socket loop and the host clock reading.
//!
//! Invariants:
//! - One UDP socket on `ntp.listen`; one task reads it. Nothing a client
//!   sends ends the loop: malformed datagrams and refused modes are dropped
//!   and counted, logged at warn at most once per reason every 10 s
//!   (`runtime::lograte`). Replies are never longer than requests.
//! - The host clock state comes from `adjtimex` (crate `hostclock`), read
//!   at most once per [`CLOCK_REREAD`]. For tests only, the test hook
//!   `CRC_APPLIANCE_TEST_HOST_CLOCK` (`runtime::faults::HOST_CLOCK_ENV`:
//!   `synchronised` | `unsynchronised`; only in a test build, cargo
//!   feature `test-hooks`, handed over in the run-time context) replaces
//!   that reading, so the decision path (leap indicator, stratum,
//!   `localStratum`) can be exercised on any host; it is logged at warn
//!   when set.
//! - A reload swaps `localStratum`, `clientRate` and `allowFrom` between
//!   datagrams and moves the listener when `ntp.listen` changes.
//! - With `ntp.allowFrom`, a source outside it gets nothing (counted as
//!   `refused_acl`, warned about at most once per 10 s) before the rate
//!   limiter sees it.
//! - Offset rows (and their metric series) are kept only for the nodes'
//!   addresses and for clients inside the cluster's networks
//!   (`network.cidr`, `network.ipv6.cidr`, `dhcp.segments[].cidr`): a
//!   spoofed source elsewhere leaves no row, and node rows are never
//!   evicted ([`stats`]).

pub mod clients;
pub mod core;
pub mod packet;
pub mod stats;
pub mod status;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use arc_swap::ArcSwap;
use async_trait::async_trait;
use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::model::cluster::IpNet;
use crate::plan::Plan;
use crate::runtime::datagram::{Datagrams, Gate};
use crate::runtime::lograte::{self, LogRate};
use crate::runtime::service::{Commit, Listeners, Service, Tasks};
use crate::runtime::sync::LockExt as _;
use clients::Limiter;
use core::{Decision, Drop, HostClock};
use packet::Timestamp;
use stats::Stats;

/// How often the host clock state is read again.
pub const CLOCK_REREAD: Duration = Duration::from_secs(1);

/// What the loop reads per datagram, swapped by a reload.
struct Ctx {
    local_stratum: Option<u8>,
    client_rate: u32,
    /// Node names by address (IPv4 and IPv6), for the offsets on `/status`.
    nodes: HashMap<IpAddr, String>,
    /// The cluster's networks: clients inside get an offset row.
    networks: Vec<IpNet>,
    /// `ntp.allowFrom` (`None`: every client).
    allow_from: Option<Vec<IpNet>>,
}

impl Ctx {
    /// May `ip` be answered?
    fn allowed(&self, ip: IpAddr) -> bool {
        self.allow_from
            .as_ref()
            .is_none_or(|nets| nets.iter().any(|n| n.contains(ip)))
    }

    /// Is `ip` worth an offset row: a node, or inside a cluster network?
    fn tracked(&self, ip: IpAddr) -> bool {
        self.nodes.contains_key(&ip) || self.networks.iter().any(|n| n.contains(ip))
    }
}

/// The NTP service.
pub struct Ntp {
    ctx: ArcSwap<Ctx>,
    stats: Arc<Stats>,
    limiter: std::sync::Mutex<Limiter>,
    listeners: Listeners<SocketAddr>,
    tasks: Tasks,
    /// How the listener binds (the run-time context).
    bind: crate::runtime::bind::BindOptions,
    /// Warnings a client can cause (and adjtimex failures): one line per
    /// reason every [`lograte::CLIENT_EVENTS`], with the count of the rest
    /// (the serve's `ntp` limiter).
    log: Arc<LogRate>,
    /// Test builds: the host clock state forced synchronised or not
    /// (`runtime::faults::HOST_CLOCK_ENV`), instead of adjtimex's.
    forced_clock: Option<bool>,
}

fn ctx_of(plan: &Plan) -> anyhow::Result<(Ctx, SocketAddr)> {
    let c = plan
        .cluster
        .ntp
        .as_ref()
        .context("the ntp section is not configured")?;
    let cluster = &plan.cluster;
    let nodes = cluster
        .nodes
        .iter()
        .flat_map(|n| {
            std::iter::once(IpAddr::V4(n.ip))
                .chain(n.ipv6.map(IpAddr::V6))
                .map(|ip| (ip, n.name.clone()))
        })
        .collect();
    let networks = std::iter::once(IpNet::V4(cluster.network.cidr))
        .chain(cluster.network.ipv6.as_ref().map(|v| IpNet::V6(v.cidr)))
        .chain(cluster.dhcp.segments.iter().map(|s| IpNet::V4(s.cidr)))
        .collect();
    Ok((
        Ctx {
            local_stratum: c.local_stratum,
            client_rate: c.client_rate,
            nodes,
            networks,
            allow_from: c.allow_from.clone(),
        },
        c.listen,
    ))
}

impl Ntp {
    pub fn new(plan: &Plan, rt: &crate::runtime::context::Context) -> anyhow::Result<Arc<Ntp>> {
        let (ctx, _) = ctx_of(plan)?;
        let rate = ctx.client_rate;
        Ok(Arc::new(Ntp {
            ctx: ArcSwap::from_pointee(ctx),
            stats: Arc::default(),
            limiter: std::sync::Mutex::new(Limiter::new(rate)),
            listeners: Listeners::default(),
            tasks: rt.tasks("ntp"),
            bind: rt.bind,
            log: rt.log_rate("ntp", lograte::CLIENT_EVENTS),
            forced_clock: rt.faults.host_clock(),
        }))
    }
}

impl Ntp {
    /// `/status` → `ntp`: this service's section.
    pub fn status(&self) -> status::NtpStatus {
        self.stats.status()
    }
}

#[async_trait]
impl Service for Ntp {
    fn name(&self) -> &'static str {
        "ntp"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let (ctx, addr) = ctx_of(&plan)?;
        let mut new = None;
        if !self.listeners.missing(&[addr]).is_empty() {
            new = Some(
                self.bind
                    .udp(addr)
                    .with_context(|| format!("bind UDP {addr}"))?,
            );
        }
        Ok(Box::new(move || {
            self.limiter.locked().set_rate(ctx.client_rate);
            self.ctx.store(Arc::new(ctx));
            self.listeners.close_except("ntp", &[addr]);
            if let Some(socket) = new {
                if let Ok(local) = socket.local_addr() {
                    info!("listening for ntp on {local}");
                    self.stats.set_bound(local);
                }
                let me = self.clone();
                self.listeners
                    .start(&self.tasks, addr, format!("ntp listener {addr}"), |t| {
                        listen(me, socket, t)
                    });
            }
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.tasks
            .supervise(&shutdown, crate::runtime::drain::service(Duration::ZERO))
            .await
    }

    fn metrics(&self, out: &mut String) {
        self.stats.metrics(out)
    }
}

/// The host clock per adjtimex, or as `forced` (a test build's hook,
/// `runtime::faults::HOST_CLOCK_ENV`; always `None` in the shipped binary).
fn read_host_clock(local_stratum: Option<u8>, forced: Option<bool>, log: &LogRate) -> HostClock {
    let (synchronised, max_error) = match forced {
        Some(true) => (true, 0.001),
        Some(false) => (false, 16.0),
        None => match hostclock::read() {
            Ok(r) => (r.synchronised, r.max_error_us as f64 / 1e6),
            Err(e) => {
                if let Some(tail) = log.check("adjtimex failed", None) {
                    warn!(
                        "ntp: cannot read the host clock state (adjtimex): {e}; serving it as unsynchronised{tail}"
                    );
                }
                (false, 16.0)
            }
        },
    };
    HostClock {
        synchronised,
        max_error,
        local_stratum,
    }
}

fn now_ts() -> Timestamp {
    Timestamp::from_unix(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default(),
    )
}

/// Record how the clock is served (status, logs on change).
fn note_serving(stats: &Stats, clock: &HostClock, last: &mut Option<(u8, u8)>) {
    let s = clock.serving();
    if *last != Some((s.leap, s.stratum)) {
        let how = match (clock.local_stratum, clock.synchronised) {
            (Some(_), _) => "localStratum",
            (None, true) => "synchronised",
            (None, false) => "unsynchronised",
        };
        if s.leap == 3 {
            warn!(
                "ntp: the host clock is not synchronised: serving leap indicator 3 (clients will not select it); set ntp.localStratum if this host is the lab's time source"
            );
        } else {
            info!(
                "ntp: serving the host clock ({how}) at stratum {}",
                s.stratum
            );
        }
        stats.set_serving(how, s.leap, s.stratum);
        *last = Some((s.leap, s.stratum));
    }
}

async fn listen(
    svc: Arc<Ntp>,
    socket: UdpSocket,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    if let Some(synchronised) = svc.forced_clock {
        let v = if synchronised {
            "synchronised"
        } else {
            "unsynchronised"
        };
        let env = crate::runtime::faults::HOST_CLOCK_ENV;
        warn!("ntp: {env}={v}: the host clock state is forced (tests only)");
    }
    let mut buf = vec![0u8; 2048];
    let mut datagrams = Datagrams::new("ntp", svc.log.clone(), Gate::Always);
    let mut served: Option<(u8, u8)> = None;
    let first = read_host_clock(svc.ctx.load().local_stratum, svc.forced_clock, &svc.log);
    note_serving(&svc.stats, &first, &mut served);
    let mut clock = ClockCache {
        at: Instant::now(),
        local_stratum: first.local_stratum,
        forced: svc.forced_clock,
        clock: first,
    };
    while let Some((n, from)) = datagrams.next(&socket, &mut buf, &shutdown).await? {
        let recv = now_ts();
        let stats = &svc.stats;
        stats.requests.fetch_add(1, Ordering::Relaxed);
        let ctx = svc.ctx.load();
        let now = Instant::now();
        let host = clock.get(now, ctx.local_stratum, &svc.log);
        note_serving(stats, &host, &mut served);
        let data = buf.get(..n).unwrap_or(&[]);
        let on_panic = || {
            stats.malformed.fetch_add(1, Ordering::Relaxed);
        };
        let out = datagrams.guarded(from, n, on_panic, || {
            let decision = decide(&svc, &ctx, &host, data, from, recv, now);
            account(&svc.log, stats, &ctx, decision, from)
        });
        if let Some(bytes) = out.flatten()
            && let Err(e) = socket.send_to(&bytes, from).await
        {
            stats.send_errors.fetch_add(1, Ordering::Relaxed);
            debug!(%from, "ntp send: {e}");
        }
    }
    Ok(())
}

/// The host clock as last read, read again after [`CLOCK_REREAD`] or when
/// `localStratum` changed.
struct ClockCache {
    at: Instant,
    local_stratum: Option<u8>,
    /// The test hook's forced state (see [`read_host_clock`]).
    forced: Option<bool>,
    clock: HostClock,
}

impl ClockCache {
    fn get(&mut self, now: Instant, local_stratum: Option<u8>, log: &LogRate) -> HostClock {
        if now.duration_since(self.at) >= CLOCK_REREAD || self.local_stratum != local_stratum {
            *self = ClockCache {
                at: now,
                local_stratum,
                forced: self.forced,
                clock: read_host_clock(local_stratum, self.forced, log),
            };
        }
        self.clock
    }
}

/// A source outside `ntp.allowFrom`: refused before the rate limiter sees
/// it.
struct OutsideAllowFrom;

/// Decide one datagram: refused by `ntp.allowFrom`, else [`core::decide`].
fn decide(
    svc: &Ntp,
    ctx: &Ctx,
    clock: &HostClock,
    data: &[u8],
    from: SocketAddr,
    recv: Timestamp,
    now: Instant,
) -> Result<Decision, OutsideAllowFrom> {
    if !ctx.allowed(canonical(from.ip())) {
        return Err(OutsideAllowFrom);
    }
    Ok(core::decide(
        data,
        clock,
        || svc.limiter.locked().check(from.ip(), now),
        recv,
        now_ts(),
    ))
}

/// Count and log a decision; the bytes to send, if any.
fn account(
    log: &LogRate,
    stats: &Stats,
    ctx: &Ctx,
    decision: Result<Decision, OutsideAllowFrom>,
    from: SocketAddr,
) -> Option<[u8; packet::HEADER_LEN]> {
    let ip = canonical(from.ip());
    let decision = match decision {
        Ok(d) => d,
        Err(OutsideAllowFrom) => {
            stats.refused_acl.fetch_add(1, Ordering::Relaxed);
            warn_client(log, "source outside ntp.allowFrom", from);
            return None;
        }
    };
    match decision {
        Decision::Reply { bytes, offset } => {
            stats.replies.fetch_add(1, Ordering::Relaxed);
            if ctx.tracked(ip) {
                stats.offset(ip, ctx.nodes.get(&ip).map(String::as_str), offset);
            }
            Some(bytes)
        }
        Decision::Kod(bytes) => {
            stats.kod_rate.fetch_add(1, Ordering::Relaxed);
            warn_client(log, "rate limited (KoD RATE)", from);
            Some(bytes)
        }
        Decision::Drop(d) => {
            match d {
                Drop::RateLimited => stats.rate_dropped.fetch_add(1, Ordering::Relaxed),
                Drop::RefusedMode(_) => {
                    warn_client(log, "refused mode", from);
                    stats.refused_mode.fetch_add(1, Ordering::Relaxed)
                }
                Drop::Malformed | Drop::BadVersion | Drop::NoTransmit => {
                    warn_client(log, "malformed request", from);
                    stats.malformed.fetch_add(1, Ordering::Relaxed)
                }
            };
            debug!(%from, "ntp: dropped: {d:?}");
            None
        }
    }
}

/// An IPv4-mapped IPv6 address as IPv4 (a dual-stack socket).
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Log `key` for `from` at warn if `log` allows, else at debug.
fn warn_client(log: &LogRate, key: &'static str, from: SocketAddr) {
    match log.check(key, Some(from)) {
        Some(tail) => warn!("ntp: {key} from {from}{tail}"),
        None => debug!(%from, "ntp: {key}"),
    }
}
