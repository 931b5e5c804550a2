//! DHCPv6 server with MAC reservations (RFC 8415; client link-layer
//! address RFC 6939) and router advertisements (RFC 4861), for clusters
//! with `network.ipv6`.
//!
//! - [`ident`]: the node's MAC from evidence: the frame's Ethernet source
//!   on the link, the relay's option 79 or the DUID behind a configured
//!   relay, an EUI-64 link-local address (pure).
//! - `frames`: the Ethernet source of each datagram (a packet socket).
//! - [`relay`]: Relay-Forward/Relay-Reply envelopes (pure).
//! - [`bindings`]: the binding table (pure, injected clock, persisted form).
//! - [`reply`]: message → Advertise/Reply/silence (pure, RFC 8415 §18.3).
//! - [`store`]: the binding file (atomic, durable; corrupt kept aside).
//! - `writer`: group commit of pool bindings before their replies.
//! - [`ra`]: router advertisements on a raw ICMPv6 socket.
//! - this file: the socket layer. One UDP socket on `dhcp.listen6`
//!   (`[::]:547`, IPv6 only, no SO_REUSEADDR), bound to
//!   `network.interface` with SO_BINDTODEVICE and joined to
//!   `ff02::1:2` on it. Replies go back to the datagram's source (the
//!   client's link-local address and port, or the relay). A Relay-Forward
//!   is answered only when its source is a configured relay (`dhcp.relays`,
//!   IPv6 entries); others are dropped and counted (`unknown_relay`).
//!
//! Invariants (as the DHCPv4 service): a bad datagram is counted and
//! dropped, never ends the loop; what a client can cause per datagram
//! (malformed, refused clients) is logged at warn at most once per reason
//! every 10 s (the serve's `dhcp6` limiter), new bindings at info in bursts of 4 lines then one
//! per 10 s, per node and for all other clients together (`notes`); the
//! socket loop or the writer ending on its own fails the service. Durability: replies for reserved addresses leave at
//! once (the reservation decides them; the binding is written within a
//! second); pool bindings, and releases/declines of them, are on disk
//! before their reply; a failed write drops the held replies (the client
//! retries) and keeps the records unwritten.
//!
//! Reload: the reply configuration is swapped between batches and the
//! table rebuilt under the new reservations; the socket is kept unless
//! `dhcp.listen6` or `network.interface` changed; router advertisements
//! restart when their settings change. A changed `dhcp.bindingFile6` takes
//! a restart.

pub mod bindings;
mod frames;
pub mod ident;
mod notes;
pub mod ra;
pub mod relay;
pub mod reply;
pub mod status;
pub mod store;
mod writer;

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use arc_swap::{ArcSwap, ArcSwapOption};
use async_trait::async_trait;
use dhcproto::v6::MessageType;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::plan::Plan;
use crate::runtime::bind::deep_receive_queue;
use crate::runtime::datagram::{Datagrams, Gate};
use crate::runtime::groupcommit::Ticks;
use crate::runtime::lograte::{self, LogRate};
use crate::runtime::service::{Commit, Listeners, Service, Tasks};
use crate::runtime::sync::LockExt as _;
use bindings::{Scope, Table};
use ident::Seen;
use notes::BindingLog;
use reply::{Config, Durability, Request};
use status::Counters;
use writer::Writer;

const BATCH: usize = 256;
const LAZY_FLUSH: Duration = Duration::from_secs(1);
/// Expired bindings are dropped this often.
const GC_EVERY: Duration = Duration::from_secs(30);
/// All_DHCP_Relay_Agents_and_Servers (RFC 8415 §7.1).
pub const ALL_SERVERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 1, 2);

pub use crate::runtime::clock::unix_now as now;

/// Everything the service takes from the plan.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub interface: Option<String>,
    pub binding_file: PathBuf,
    pub scope: Scope,
    pub reply: Config,
    /// Router advertisements: the prefix, when `routerAdvertisements`.
    pub ra: Option<(Ipv6Addr, u8)>,
}

impl Settings {
    /// `None` without `network.ipv6` (a v4-only cluster runs no DHCPv6).
    pub fn from_plan(plan: &Plan) -> Option<Settings> {
        let c = &plan.cluster;
        let v6 = c.network.ipv6.as_ref()?;
        let reserved = c
            .nodes
            .iter()
            .filter_map(|n| Some((n.mac, n.ipv6?)))
            .collect();
        let hostnames = c.nodes.iter().map(|n| (n.mac, n.name.clone())).collect();
        // Option 56 only where the time service answers over IPv6.
        let ntp = c
            .ntp
            .as_ref()
            .filter(|n| n.enabled)
            .and_then(|n| match n.listen.ip() {
                IpAddr::V6(a) if a.is_unspecified() => Some(v6.appliance_ip),
                IpAddr::V6(a) => Some(a),
                IpAddr::V4(_) => None,
            });
        Some(Settings {
            listen: c.dhcp.listen6,
            interface: c.network.interface.clone(),
            binding_file: c.dhcp.binding_file6.clone(),
            scope: Scope {
                prefix: v6.cidr.network(),
                prefix_len: v6.cidr.prefix(),
                pool: v6.pool,
                reserved,
                lease_time: u32::try_from(c.dhcp.lease_time.as_secs()).unwrap_or(u32::MAX),
            },
            reply: Config {
                server_duid: server_duid(&c.name),
                dns: vec![v6.appliance_ip],
                search: vec![c.domain.clone()],
                ntp: ntp.into_iter().collect(),
                hostnames,
                relays: c.dhcp.relays6.clone(),
            },
            ra: v6
                .router_advertisements
                .then(|| (v6.cidr.network(), v6.cidr.prefix())),
        })
    }
}

/// The server's DUID: a DUID-UUID (type 4, RFC 6355) derived from the
/// cluster name, so it is the same across restarts and hosts.
pub fn server_duid(cluster: &str) -> Vec<u8> {
    let fnv = |seed: u64| {
        cluster.bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let mut d = vec![0, 4];
    d.extend_from_slice(&fnv(0xcbf2_9ce4_8422_2325).to_be_bytes());
    d.extend_from_slice(&fnv(0x6c62_272e_07bb_0142).to_be_bytes());
    d
}

/// Shared between the socket loop, the writer and the status.
struct Shared {
    table: Mutex<Table>,
    counters: Counters,
    socket: ArcSwapOption<UdpSocket>,
    bound: Mutex<Option<(SocketAddr, Option<String>)>>,
    binding_file: PathBuf,
    ra: ArcSwapOption<ra::RaCounters>,
    /// The rate limit of the new-binding info lines.
    binding_log: Mutex<BindingLog>,
    /// Per-client warnings: one line per reason every
    /// [`lograte::CLIENT_EVENTS`] (the serve's `dhcp6` limiter).
    log: Arc<LogRate>,
    /// The router advertisements' send errors (`dhcp6 ra`), likewise.
    ra_log: Arc<LogRate>,
}

impl Shared {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.locked()
    }
}

/// The DHCPv6 service.
pub struct Dhcp6 {
    shared: Arc<Shared>,
    cfg: ArcSwap<Config>,
    writer: Arc<Writer>,
    listeners: Listeners<(SocketAddr, Option<String>)>,
    advertisers: Listeners<ra::RaCfg>,
    tasks: Tasks,
}

impl Dhcp6 {
    /// `/status` → `dhcp6`: this service's section.
    pub fn status(&self) -> status::Dhcp6Status {
        status::status(&self.shared)
    }
}

#[async_trait]
impl Service for Dhcp6 {
    fn name(&self) -> &'static str {
        "dhcp6"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let s = Settings::from_plan(&plan)
            .context("network.ipv6 was removed: stopping DHCPv6 takes a restart")?;
        if s.binding_file != self.shared.binding_file {
            anyhow::bail!(
                "dhcp.bindingFile6 changed ({} → {}): that takes a restart",
                self.shared.binding_file.display(),
                s.binding_file.display()
            );
        }
        let key = (s.listen, s.interface.clone());
        let new = if self
            .listeners
            .missing(std::slice::from_ref(&key))
            .is_empty()
        {
            None
        } else {
            let socket = bind_socket(key.0, key.1.as_deref())?;
            Some((socket, frames::Link::open(key.1.as_deref(), key.0.port())))
        };
        let ra_cfg = match (s.ra, s.interface.as_deref()) {
            (Some((prefix, prefix_len)), Some(ifname)) => {
                let (index, mac) = ra::interface_info(ifname)?;
                Some((
                    ra::RaCfg {
                        interface: ifname.to_string(),
                        prefix,
                        prefix_len,
                        mac,
                    },
                    index,
                ))
            }
            (Some(_), None) => anyhow::bail!(
                "network.ipv6.routerAdvertisements needs network.interface (the link to advertise on)"
            ),
            _ => None,
        };
        let wanted: Vec<ra::RaCfg> = ra_cfg.iter().map(|(c, _)| c.clone()).collect();
        let ra_new = match &ra_cfg {
            Some((c, index)) if !self.advertisers.missing(&wanted).is_empty() => {
                Some((c.clone(), *index, Arc::new(ra::open(&c.interface, *index)?)))
            }
            _ => None,
        };
        Ok(Box::new(move || {
            self.cfg.store(Arc::new(s.reply.clone()));
            {
                let mut table = self.shared.table();
                let (rebuilt, notes) = Table::from_file(s.scope.clone(), &table.to_file());
                *table = rebuilt;
                for n in notes {
                    info!("dhcp6 reload: {n}");
                }
            }
            self.writer.mark_dirty();
            self.listeners
                .close_except("dhcp6", std::slice::from_ref(&key));
            if let Some((socket, link)) = new {
                let socket = Arc::new(socket);
                self.shared.socket.store(Some(socket.clone()));
                *self.shared.bound.locked() = Some(key.clone());
                let name = format!("dhcp6 socket {}", key.0);
                let me = self.clone();
                self.listeners.start(&self.tasks, key, name, |t| {
                    serve_socket(me, socket, link, t)
                });
            }
            for gone in self.advertisers.retain(&wanted) {
                info!("dhcp6: stopped router advertisements on {}", gone.interface);
            }
            if wanted.is_empty() {
                self.shared.ra.store(None);
            }
            if let Some((c, index, sock)) = ra_new {
                let counters = Arc::new(ra::RaCounters::default());
                self.shared.ra.store(Some(counters.clone()));
                let name = format!("dhcp6 router advertisements on {}", c.interface);
                let (cfg, log) = (c.clone(), self.shared.ra_log.clone());
                self.advertisers.start(&self.tasks, c, name, |t| {
                    ra::run(sock, cfg, index, counters, log, t)
                });
            }
        }))
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.tasks
            .supervise(&shutdown, crate::runtime::drain::DHCP_WRITER)
            .await
    }

    fn metrics(&self, out: &mut String) {
        status::metrics(&self.shared, out)
    }
}

/// The DHCPv6 socket on `addr` (IPv6 only; bound to `interface` and joined
/// to `ff02::1:2` there when set).
fn bind_socket(addr: SocketAddr, interface: Option<&str>) -> anyhow::Result<UdpSocket> {
    let sock = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP))
        .context("creating the DHCPv6 socket")?;
    sock.set_only_v6(true).context("IPV6_V6ONLY")?;
    let index = match interface {
        Some(ifname) => {
            sock.bind_device(Some(ifname.as_bytes())).with_context(|| {
                format!("binding the DHCPv6 socket to interface {ifname} (SO_BINDTODEVICE needs CAP_NET_RAW and an existing interface)")
            })?;
            ra::interface_info(ifname)?.0
        }
        None => 0,
    };
    deep_receive_queue(&sock);
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())
        .with_context(|| format!("bind UDP {addr}"))?;
    if addr.ip().is_unspecified() {
        match sock.join_multicast_v6(&ALL_SERVERS, index) {
            Ok(()) => {}
            Err(e) if interface.is_some() => {
                return Err(e).context(format!("joining {ALL_SERVERS}"));
            }
            Err(e) => warn!("dhcp6: joining {ALL_SERVERS} on the default interface: {e}"),
        }
    }
    if interface.is_none() {
        warn!(
            "network.interface is not set: DHCPv6 joins {ALL_SERVERS} on the default interface only"
        );
    }
    let socket = UdpSocket::from_std(sock.into()).context("registering the DHCPv6 socket")?;
    info!(
        "listening for dhcp6 on {}{}",
        socket.local_addr()?,
        interface
            .map(|i| format!(" (interface {i}, {ALL_SERVERS})"))
            .unwrap_or_default()
    );
    Ok(socket)
}

impl Dhcp6 {
    /// Load the binding file and start the writer; no socket yet.
    pub async fn new(
        plan: &Arc<Plan>,
        ctx: &crate::runtime::context::Context,
    ) -> anyhow::Result<Arc<Dhcp6>> {
        let s = Settings::from_plan(plan).context("DHCPv6 needs network.ipv6")?;
        let path = s.binding_file.clone();
        let (p2, scope) = (path.clone(), s.scope.clone());
        let table = tokio::task::spawn_blocking(move || store::load(&p2, scope))
            .await
            .context("loading DHCPv6 bindings")??;
        let d = Arc::new(Dhcp6 {
            cfg: ArcSwap::from_pointee(s.reply),
            shared: Arc::new(Shared {
                table: Mutex::new(table),
                counters: Counters::default(),
                socket: ArcSwapOption::empty(),
                bound: Mutex::new(None),
                binding_file: path,
                ra: ArcSwapOption::empty(),
                binding_log: Mutex::new(BindingLog::default()),
                log: ctx.log_rate("dhcp6", lograte::CLIENT_EVENTS),
                ra_log: ctx.log_rate("dhcp6 ra", lograte::CLIENT_EVENTS),
            }),
            writer: Arc::new(Writer::new(writer::real_save())),
            listeners: Listeners::default(),
            advertisers: Listeners::default(),
            tasks: ctx.tasks("dhcp6"),
        });
        let token = d.tasks.shutdown_token();
        d.tasks.spawn(
            "dhcp6 binding writer",
            token.clone(),
            d.writer.clone().run(d.shared.clone(), token),
        );
        Ok(d)
    }
}

/// One reply (held for the writer, or sent at once).
struct Pending {
    bytes: Vec<u8>,
    to: SocketAddr,
    kind: MessageType,
}

/// One datagram as received.
struct Datagram<'a> {
    data: &'a [u8],
    src: SocketAddr,
    /// The Ethernet source of its frame, when the packet socket saw it.
    frame: Option<crate::model::cluster::MacAddr>,
}

async fn serve_socket(
    d: Arc<Dhcp6>,
    socket: Arc<UdpSocket>,
    mut link: Option<frames::Link>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let (shared, writer) = (&d.shared, &d.writer);
    let mut buf = vec![0u8; 65_536];
    let mut ticks = Ticks::new(GC_EVERY, LAZY_FLUSH);
    // Each member of an HA pair answers from its own bindings.
    let datagrams = Datagrams::new("dhcp6", shared.log.clone(), Gate::Always);
    loop {
        let gc = || {
            let cfg = d.cfg.load();
            shared
                .binding_log
                .locked()
                .flush(std::time::Instant::now(), |m| cfg.hostnames.contains_key(m));
            shared.table().gc(now())
        };
        if !ticks.readable(writer, &socket, &shutdown, gc).await {
            break;
        }
        let cfg = d.cfg.load_full();
        let (mut held, mut ready) = (Vec::new(), Vec::new());
        let mut durable = false;
        {
            let now = now();
            let mut table = shared.table();
            let on_panic = || {
                shared.counters.malformed.fetch_add(1, Ordering::Relaxed);
            };
            datagrams.batch(&socket, &mut buf, BATCH, on_panic, |data, src| {
                let frame = link.as_mut().and_then(|l| l.source_of(src, data));
                let dgram = Datagram { data, src, frame };
                let done = process(&cfg, shared, &mut table, &dgram, now);
                match done.1 {
                    Durability::BeforeReply => {
                        durable = true;
                        held.extend(done.0);
                    }
                    Durability::Lazy => {
                        writer.mark_dirty();
                        ready.extend(done.0);
                    }
                    Durability::None => ready.extend(done.0),
                }
            });
            if durable {
                writer.hold(held);
            }
        }
        send_all(&socket, shared, ready).await;
        if durable {
            writer.wake();
        }
    }
    Ok(())
}

async fn send_all(socket: &UdpSocket, shared: &Shared, replies: Vec<Pending>) {
    for p in replies {
        match socket.send_to(&p.bytes, p.to).await {
            Ok(_) => shared.counters.tx(p.kind),
            Err(e) => {
                shared.counters.send_errors.fetch_add(1, Ordering::Relaxed);
                debug!("dhcp6 send to {}: {e}", p.to);
            }
        }
    }
}

/// Unwrap, decide, encode one datagram. Never panics on input.
fn process(
    cfg: &Config,
    shared: &Shared,
    table: &mut Table,
    dgram: &Datagram<'_>,
    now: u64,
) -> (Option<Pending>, Durability) {
    let (data, src, counters) = (dgram.data, dgram.src, &shared.counters);
    let none = (None, Durability::None);
    let malformed = |e: String| {
        counters.malformed.fetch_add(1, Ordering::Relaxed);
        warn_client(&shared.log, "malformed datagram", src, None, || {
            format!("{e}; dropped (see dhcp6_dropped_total{{reason=\"malformed\"}})")
        });
        none_of()
    };
    let env = match relay::unwrap(data) {
        Ok(u) => u,
        Err(e) => return malformed(e.to_string()),
    };
    let msg = match reply::decode(env.inner) {
        Ok(m) => m,
        Err(e) => return malformed(e.to_string()),
    };
    let kind = msg.msg_type();
    if !env.hops.is_empty() {
        let from_relay = match src.ip() {
            IpAddr::V6(a) => cfg.relays.contains(&a),
            IpAddr::V4(_) => false,
        };
        if !from_relay {
            counters.unknown_relay.fetch_add(1, Ordering::Relaxed);
            warn_client(&shared.log, "relay not configured", src, None, || {
                format!(
                    "Relay-Forward ({kind:?}) dropped: {} is not a configured relay (dhcp.relays)",
                    src.ip()
                )
            });
            return none;
        }
        counters.relayed.fetch_add(1, Ordering::Relaxed);
    }
    counters.rx(kind);
    let seen = match env.innermost() {
        Some(h) => Seen::Relayed {
            option79: h.client_linklayer.as_deref(),
            peer: h.peer,
        },
        None => Seen::Direct {
            frame: dgram.frame,
            source: match src.ip() {
                IpAddr::V6(a) => Some(a),
                IpAddr::V4(_) => None,
            },
        },
    };
    let req = Request { msg: &msg, seen };
    let out = reply::handle(cfg, table, &req, now);
    let (reply, done) = match out {
        reply::Decision::Dropped(note) => {
            counters.ignored.fetch_add(1, Ordering::Relaxed);
            debug!(%src, "dhcp6 {kind:?}: dropped: {note}");
            return none;
        }
        reply::Decision::Silent(done) => (None, done),
        reply::Decision::Reply((r, done)) => (Some(r), done),
    };
    let mac = done.mac.map(|(m, s)| format!("{m} ({})", s.as_str()));
    if let Some(why) = done.refused {
        counters.refused(why);
        // One rate-limit key per reason: each shows at least once.
        let key = match why {
            bindings::NoAddress::NoMac => "client without a MAC refused",
            bindings::NoAddress::NotReserved => "unknown MAC refused",
            bindings::NoAddress::ReservedDeclined => "declined reservation",
            bindings::NoAddress::PoolExhausted => "v6 pool exhausted",
        };
        warn_client(&shared.log, key, src, mac.as_deref(), || {
            format!("{kind:?} from DUID {}: no address: {why}", duid_hex(&msg))
        });
    }
    if let Some(why) = done.decline_refused {
        counters.declines_refused.fetch_add(1, Ordering::Relaxed);
        let log = &shared.log;
        warn_client(log, "decline not applied", src, mac.as_deref(), || {
            format!("Decline from DUID {}: {why}", duid_hex(&msg))
        });
    }
    let Some(r) = reply else {
        debug!(%src, "dhcp6 {kind:?}: no reply: {}", done.note);
        return none;
    };
    if done.new_binding {
        notes::log_new_binding(cfg, &shared.binding_log, &done, &msg, src);
    } else {
        debug!(%src, "dhcp6 {kind:?}: {}", done.note);
    }
    let bytes = relay::wrap(&env.hops, reply::encode(&r));
    (
        Some(Pending {
            bytes,
            to: src,
            kind: r.msg_type(),
        }),
        done.durability,
    )
}

fn none_of() -> (Option<Pending>, Durability) {
    (None, Durability::None)
}

pub(super) fn duid_hex(m: &dhcproto::v6::Message) -> String {
    match m.opts().get(dhcproto::v6::OptionCode::ClientId) {
        Some(dhcproto::v6::DhcpOption::ClientId(d)) => crate::runtime::statefile::hex(d),
        _ => "-".into(),
    }
}

fn warn_client(
    log: &LogRate,
    key: &'static str,
    src: SocketAddr,
    mac: Option<&str>,
    detail: impl FnOnce() -> String,
) {
    let mac = mac.unwrap_or("-");
    match log.check(key, Some(src)) {
        Some(tail) => warn!(%mac, "dhcp6: {key} from {src}: {}{tail}", detail()),
        None => debug!(%src, %mac, "dhcp6: {key}: {}", detail()),
    }
}
