//! DHCPv4 server with MAC reservations (RFC 2131/2132, relay RFC 3046,
//! client identifier RFC 6842).
//!
//! - [`leases`]: the lease table (pure, injected clock, persisted form).
//! - [`reply`]: request → reply/NAK/silence (pure, RFC 2131 §4.3).
//! - `process`: one datagram in server mode: decode, decide, count and
//!   log the decision, encode the reply with where it goes.
//! - `relay`: which subnet a request is for (local network or a relayed
//!   segment), and relay addresses that are refused (only configured
//!   relays are answered).
//! - `fqdn`: the Client FQDN option (81) in its ASCII and wire forms.
//! - [`proxy`]: `dhcp.mode: proxy` (proxyDHCP beside the site's server:
//!   boot answers to the inventory's PXE clients, never an address; pure),
//!   and `proxysock`, its socket side: the DHCP port's datagrams go there
//!   instead of [`reply`] (no lease table, nothing on disk), and a second
//!   socket on the PXE boot server port (4011) exists only in proxy mode.
//! - [`store`]: the lease file (atomic write: temp file, fsync, rename,
//!   fsync dir; a corrupt file is kept aside, never silently dropped).
//! - this file: the socket layer. One UDP socket on `dhcp.listen`
//!   (0.0.0.0:67) with SO_BROADCAST (no SO_REUSEADDR), bound to `network.interface` with
//!   SO_BINDTODEVICE when set. Replies go to 255.255.255.255:68 on that
//!   interface, to ciaddr:68, or to giaddr:67 for relays (client port =
//!   listen port + 1, relay port = listen port when not 67, for tests).
//!
//! Invariants: a bad datagram is counted and dropped, never ends the socket
//! loop; what a client can cause once per datagram (malformed, refused
//! relays, an exhausted pool, DECLINEs) is logged at warn at most once per
//! reason every 10 s, with the client and the count of the rest
//! ([`Dhcp::log`], the serve's `dhcp` limiter);
//! the socket loop or the lease writer ending on its own fails the service
//! (an appliance that cannot make ACKs durable must not look alive).
//! Durability (group commit): the datagrams waiting on the
//! socket are processed as one batch; replies that need nothing on disk
//! (OFFER, NAK, INFORM, any ACK of a node's reserved address: the
//! reservation decides that address, so a full disk never delays a node)
//! are sent at once; the others (a new pool binding, a pool lease renewal)
//! are handed to the lease writer task and sent only
//! after a write that covers them succeeded — an ACKed lease is on disk
//! first. RELEASE/DECLINE are written the same way. The receive loop never
//! waits for the disk. If a write fails, the held replies are dropped (the
//! client retries), the records stay marked unwritten and the error is
//! logged. Changes no reply waits for are written within a second.
//!
//! The install timeline hears of a node's lease from here: each ACK that
//! binds or renews one (after its batch, outside the table's lock), and
//! the table's bound leases at each commit (the lease file's at start).
//!
//! Reload: the reply configuration is swapped between batches and the lease
//! table is rebuilt under the new reservations (leases that no longer fit
//! are dropped and logged); the socket is kept unless `dhcp.listen` or
//! `network.interface` changed; the lease writer keeps running. A changed
//! `dhcp.leaseFile` takes a restart.

pub mod boot;
mod decode;
mod fqdn;
mod frame;
pub mod leases;
mod link;
mod process;
pub mod proxy;
mod proxysock;
mod relay;
pub mod reply;
pub mod status;
pub mod store;
mod writer;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use arc_swap::{ArcSwap, ArcSwapOption};
use async_trait::async_trait;
use dhcproto::v4::MessageType;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::plan::Plan;
use crate::runtime::bind::deep_receive_queue;
use crate::runtime::context::Context;
use crate::runtime::datagram::{Datagrams, Gate};
use crate::runtime::groupcommit::Ticks;
use crate::runtime::ha::HaView;
use crate::runtime::lograte::{self, LogRate};
use crate::runtime::service::{Commit, Listeners, Service, Tasks};
use crate::runtime::sync::LockExt as _;
use crate::timeline::{Event, Events};
use leases::{LeaseTable, Scope};
use link::{LinkDest, open_link, send_link};
use process::{Bound, Processed, decode_counted, process, warn_client};
use proxysock::serve_boot_server;
use reply::{Config, Durability};
use status::Counters;
use writer::Writer;

/// Most datagrams handled per batch (one lease-file write per batch).
const BATCH: usize = 256;
/// Changes that need not be on disk before the reply are written this soon.
const LAZY_FLUSH: Duration = Duration::from_secs(1);
/// Expired leases are dropped this often.
const GC_EVERY: Duration = Duration::from_secs(30);

pub use crate::runtime::clock::unix_now as now;

/// Shared between the socket loop, the lease writer and the status.
struct Shared {
    table: Mutex<LeaseTable>,
    counters: Counters,
    /// The socket being served (replaced when a reload moves the listener);
    /// the writer sends held replies through it.
    socket: ArcSwapOption<UdpSocket>,
    /// `(listen, interface)` as configured, for `/status`.
    bound: Mutex<Option<(SocketAddr, Option<String>)>>,
    /// The packet socket on `network.interface` for unicast to clients
    /// without an address (None: no interface set, or no CAP_NET_RAW; those
    /// replies are broadcast).
    link: ArcSwapOption<linksock::LinkSender>,
    lease_file: PathBuf,
}

impl Shared {
    fn table(&self) -> std::sync::MutexGuard<'_, LeaseTable> {
        self.table.locked()
    }
}

/// The DHCP service: the socket loop, the lease writer, and the reply
/// configuration (swapped by a reload, with the lease table rebuilt under
/// the new reservations).
pub struct Dhcp {
    shared: Arc<Shared>,
    cfg: ArcSwap<Config>,
    writer: Arc<Writer>,
    listeners: Listeners<(SocketAddr, Option<String>)>,
    tasks: Tasks,
    /// This member's HA view: only the VIP holder answers.
    ha: HaView,
    /// The install timeline: a node's lease, when bound or renewed.
    events: Events,
    /// Warnings a client can cause (malformed datagrams, refused relays,
    /// an exhausted pool, address conflicts …): at most one line per
    /// reason every [`lograte::CLIENT_EVENTS`], naming the client, with the
    /// count of the rest (the serve's `dhcp` limiter; the reply
    /// configuration carries it too).
    log: Arc<LogRate>,
}

/// A limiter for unit tests (nobody flushes it).
#[cfg(test)]
fn test_log() -> Arc<LogRate> {
    Arc::new(LogRate::new("dhcp", lograte::CLIENT_EVENTS))
}

/// The leases shared with the HA peer: bound, active pool leases
/// (reservations are answered alike by both members).
fn shared_leases<'a>(all: &[&'a leases::Lease], now: u64) -> Vec<&'a leases::Lease> {
    all.iter()
        .copied()
        .filter(|l| !l.reserved && l.state == leases::State::Bound && l.active(now))
        .collect()
}

/// The pool leases, shared with the HA peer (`serve::hasync`).
impl crate::runtime::control::SyncControl for Dhcp {
    fn part(&self) -> &'static str {
        "leases"
    }

    fn sync_version(&self) -> u64 {
        use std::hash::{Hash as _, Hasher as _};
        let table = self.shared.table();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for l in shared_leases(&table.leases(), now()) {
            (l.ip, l.expires, l.mac).hash(&mut h);
        }
        h.finish()
    }

    fn sync_state(&self) -> (u64, serde_json::Value) {
        let version = self.sync_version();
        let table = self.shared.table();
        // Bounded per lease: the client id is at most 64 bytes (longer
        // ones are kept as digests, `leases::canonical_id`), a long
        // hostname is left out.
        let shared: Vec<leases::Lease> = shared_leases(&table.leases(), now())
            .into_iter()
            .map(|l| {
                let mut l = l.clone();
                if let Some(id) = l
                    .client_id
                    .as_deref()
                    .and_then(crate::runtime::statefile::unhex)
                {
                    l.client_id = Some(crate::runtime::statefile::hex(&leases::canonical_id(&id)));
                }
                if l.hostname
                    .as_ref()
                    .is_some_and(|h| h.len() > leases::MAX_HOSTNAME)
                {
                    l.hostname = None;
                }
                l
            })
            .collect();
        (version, serde_json::to_value(&shared).unwrap_or_default())
    }

    fn prepare<'a>(
        &'a self,
        peer: serde_json::Value,
        skipped: &mut crate::runtime::control::Skipped,
    ) -> Result<crate::runtime::control::Staged<'a>, crate::runtime::control::PartError> {
        let peer: Vec<leases::Lease> = serde_json::from_value(peer)
            .map_err(crate::runtime::control::PartError::undecodable("leases"))?;
        let peer = self.shared.table().check_peer(peer, now(), skipped);
        Ok(Box::new(move || {
            let taken = self.shared.table().merge_peer(&peer, now());
            if !taken.is_empty() {
                self.writer.mark_dirty();
                self.writer.wake_if_dirty();
            }
            taken.len()
        }))
    }
}

impl Dhcp {
    /// `/status` → `dhcp`: this service's section.
    pub fn status(&self) -> status::DhcpStatus {
        status::status(&self.shared)
    }
}

#[async_trait]
impl Service for Dhcp {
    fn name(&self) -> &'static str {
        "dhcp"
    }

    async fn stage(self: Arc<Self>, plan: Arc<Plan>) -> anyhow::Result<Commit> {
        let c = &plan.cluster;
        if c.dhcp.lease_file != self.shared.lease_file {
            anyhow::bail!(
                "dhcp.leaseFile changed ({} → {}): that takes a restart",
                self.shared.lease_file.display(),
                c.dhcp.lease_file.display()
            );
        }
        let key = (c.dhcp.listen, c.network.interface.clone());
        // proxyDHCP also listens on the PXE boot server port.
        let boot_key = c.dhcp.boot_server_listen().map(|a| (a, key.1.clone()));
        let keys: Vec<_> = std::iter::once(key.clone())
            .chain(boot_key.clone())
            .collect();
        let missing = self.listeners.missing(&keys);
        let new = if missing.contains(&key) {
            Some(bind_socket(key.0, key.1.as_deref(), "dhcp")?)
        } else {
            None
        };
        let new_boot = match &boot_key {
            Some(k) if missing.contains(k) => {
                Some((k.clone(), bind_socket(k.0, k.1.as_deref(), "dhcp-pxe")?))
            }
            _ => None,
        };
        let link = new.as_ref().map(|_| key.1.as_deref().and_then(open_link));
        Ok(Box::new(move || {
            let port = match (&new, self.shared.socket.load_full()) {
                (Some(s), _) => s.local_addr().map(|a| a.port()).ok(),
                (None, Some(s)) => s.local_addr().map(|a| a.port()).ok(),
                (None, None) => None,
            }
            .unwrap_or(key.0.port());
            self.cfg
                .store(Arc::new(Config::from_plan(&plan, port, self.log.clone())));
            {
                let mut table = self.shared.table();
                let (rebuilt, notes) = LeaseTable::from_file(scope_of(&plan), &table.to_file());
                *table = rebuilt;
                for n in notes {
                    info!("dhcp reload: {n}");
                }
            }
            // The leases of the lease file (at start) or kept by a reload.
            let kept = bound_leases(&self.shared.table().leases(), now());
            record_leases(&self.events, kept);
            self.writer.mark_dirty();
            self.listeners.close_except("dhcp", &keys);
            if let Some(socket) = new {
                let socket = Arc::new(socket);
                self.shared.socket.store(Some(socket.clone()));
                if let Some(link) = link {
                    self.shared.link.store(link.map(Arc::new));
                }
                *self.shared.bound.locked() = Some(key.clone());
                let name = format!("dhcp socket {}", key.0);
                let me = self.clone();
                self.listeners
                    .start(&self.tasks, key, name, |t| serve_socket(me, socket, t));
            }
            if let Some((k, socket)) = new_boot {
                let name = format!("dhcp proxy boot server socket {}", k.0);
                let me = self.clone();
                self.listeners
                    .start(&self.tasks, k, name, |t| serve_boot_server(me, socket, t));
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

fn scope_of(plan: &Plan) -> Scope {
    let c = &plan.cluster;
    Scope::new(
        c.network.cidr,
        c.dhcp.pool,
        plan.reservations.iter().map(|r| (r.mac, r.ip)),
        u32::try_from(c.dhcp.lease_time.as_secs()).unwrap_or(u32::MAX),
    )
    .with_segments(c.dhcp.segments.iter().map(|s| (s.cidr, s.pool)))
}

/// The DHCP socket on `addr` (bound to `interface` when set), logged as
/// `listening for <what> on <addr>` (`dhcp`, or `dhcp-pxe` for the proxy's
/// PXE boot server port).
fn bind_socket(addr: SocketAddr, interface: Option<&str>, what: &str) -> anyhow::Result<UdpSocket> {
    let sock = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))
        .context("creating the DHCP socket")?;
    // No SO_REUSEADDR: another DHCP server on the same port and device must
    // make bind fail rather than silently share the port.
    sock.set_broadcast(true).context("SO_BROADCAST")?;
    if let Some(ifname) = interface {
        sock.bind_device(Some(ifname.as_bytes())).with_context(|| {
            format!("binding the DHCP socket to interface {ifname} (SO_BINDTODEVICE needs CAP_NET_RAW and an existing interface)")
        })?;
    }
    // Bursts (many VMs booting) queue here while the lease file is written.
    deep_receive_queue(&sock);
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())
        .with_context(|| format!("bind UDP {addr}"))?;
    let socket = UdpSocket::from_std(sock.into()).context("registering the DHCP socket")?;
    let local = socket.local_addr()?;
    match (addr.ip(), interface) {
        (ip, _) if !ip.is_unspecified() && !ip.is_loopback() => warn!(
            "dhcp.listen is {addr}: a socket bound to a unicast address does not receive broadcast DISCOVERs; use 0.0.0.0:{}",
            addr.port()
        ),
        (ip, None) if ip.is_unspecified() => warn!(
            "network.interface is not set: DHCP listens on every interface and broadcast replies leave by the default route"
        ),
        _ => {}
    }
    info!(
        "listening for {what} on {local}{}",
        interface
            .map(|i| format!(" (interface {i})"))
            .unwrap_or_default()
    );
    Ok(socket)
}

impl Dhcp {
    /// Load the lease file (an unusable lease directory fails here, before
    /// anything binds) and start the lease writer; no socket yet.
    pub async fn new(plan: &Arc<Plan>, events: Events, ctx: &Context) -> anyhow::Result<Arc<Dhcp>> {
        let c = &plan.cluster;
        let path = c.dhcp.lease_file.clone();
        let scope = scope_of(plan);
        let p2 = path.clone();
        let table = tokio::task::spawn_blocking(move || store::load(&p2, scope))
            .await
            .context("loading leases")??;
        let log = ctx.log_rate("dhcp", lograte::CLIENT_EVENTS);
        let dhcp = Arc::new(Dhcp {
            cfg: ArcSwap::from_pointee(Config::from_plan(plan, c.dhcp.listen.port(), log.clone())),
            log,
            shared: Arc::new(Shared {
                table: Mutex::new(table),
                counters: Counters::default(),
                socket: ArcSwapOption::empty(),
                bound: Mutex::new(None),
                link: ArcSwapOption::empty(),
                lease_file: path,
            }),
            writer: Arc::new(Writer::new(writer::real_save())),
            listeners: Listeners::default(),
            tasks: ctx.tasks("dhcp"),
            ha: ctx.ha.clone(),
            events,
        });
        let token = dhcp.tasks.shutdown_token();
        dhcp.tasks.spawn(
            "dhcp lease writer",
            token.clone(),
            dhcp.writer.clone().run(dhcp.shared.clone(), token),
        );
        Ok(dhcp)
    }
}

/// One reply waiting for the batch's lease-file write.
struct Pending {
    bytes: Vec<u8>,
    /// Where the UDP socket sends it (the broadcast address for a
    /// [`LinkDest`] reply, used when the packet socket cannot).
    to: SocketAddr,
    link: Option<LinkDest>,
    kind: MessageType,
}

/// Serve one socket until `shutdown` (shutdown, or a reload that moved the
/// listener) is cancelled.
async fn serve_socket(
    dhcp: Arc<Dhcp>,
    socket: Arc<UdpSocket>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let (shared, writer) = (&dhcp.shared, &dhcp.writer);
    // An HA member that does not hold the VIPs stays silent: the holder
    // answers (one OFFER per DISCOVER; runtime::ha).
    let datagrams = Datagrams::new("dhcp", dhcp.log.clone(), Gate::VipHolder(dhcp.ha.clone()));
    let mut buf = vec![0u8; 4096];
    let mut ticks = Ticks::new(GC_EVERY, LAZY_FLUSH);
    loop {
        let gc = || shared.table().gc(now());
        if !ticks.readable(writer, &socket, &shutdown, gc).await {
            break;
        }
        // A reload swaps the reply configuration between batches.
        let cfg = dhcp.cfg.load_full();
        let mut held: Vec<Pending> = Vec::new();
        let mut ready: Vec<Pending> = Vec::new();
        let mut bound: Vec<Bound> = Vec::new();
        let mut durable = false;
        {
            let now = now();
            let mut table = shared.table();
            // A decision that panicked may have changed the table halfway:
            // it is written with the next lazy write.
            let on_panic = || {
                shared.counters.malformed.fetch_add(1, Ordering::Relaxed);
                writer.mark_dirty();
            };
            datagrams.batch(&socket, &mut buf, BATCH, on_panic, |data, src| {
                let done = if cfg.proxy {
                    proxysock::process(&cfg, &shared.counters, data, src, proxy::Port::Dhcp)
                } else {
                    process(&cfg, &shared.counters, &mut table, data, src, now)
                };
                bound.extend(done.bound);
                // RELEASE/DECLINE have no reply but change the table too.
                match done.durability {
                    Durability::BeforeReply => {
                        durable = true;
                        held.extend(done.reply);
                    }
                    Durability::Lazy => {
                        writer.mark_dirty();
                        ready.extend(done.reply);
                    }
                    Durability::None => ready.extend(done.reply),
                }
            });
            if durable {
                // Tagged while the table is locked: the writer's next
                // snapshot (taken under the same lock) includes them.
                writer.hold(held);
            }
        }
        // Replies that need nothing on disk go at once (offers, NAKs,
        // renewals of reservations); the others when the writer has put
        // this batch on disk. Receiving never waits for the disk.
        send_all(&socket, shared, ready).await;
        if durable {
            writer.wake();
        }
        record_leases(&dhcp.events, bound);
    }
    Ok(())
}

/// The table's bound, unexpired leases.
fn bound_leases(all: &[&leases::Lease], now: u64) -> Vec<Bound> {
    all.iter()
        .filter(|l| l.state == leases::State::Bound && l.active(now))
        .map(|l| Bound {
            mac: l.mac,
            expires: l.expires,
        })
        .collect()
}

/// Tell the install timeline of the nodes' leases among `bound` (an ACK's
/// binding or renewal, or at each commit the table's bound leases).
fn record_leases(events: &Events, bound: impl IntoIterator<Item = Bound>) {
    for b in bound {
        if let Some(node) = events.node_by_mac(b.mac) {
            events.record(Event::Lease {
                node,
                expires: b.expires,
            });
        }
    }
}

async fn send_all(socket: &UdpSocket, shared: &Shared, replies: Vec<Pending>) {
    let link = shared.link.load();
    for p in replies {
        if let (Some(dest), Some(link)) = (p.link, link.as_deref()) {
            match send_link(link, dest, &p.bytes) {
                Ok(()) => {
                    shared.counters.tx(p.kind);
                    continue;
                }
                Err(e) => debug!(
                    "dhcp unicast to {} ({}) failed, broadcasting: {e}",
                    dest.to,
                    crate::model::cluster::MacAddr(dest.mac)
                ),
            }
        }
        match socket.send_to(&p.bytes, p.to).await {
            Ok(_) => shared.counters.tx(p.kind),
            Err(e) => {
                shared.counters.send_errors.fetch_add(1, Ordering::Relaxed);
                debug!("dhcp send to {}: {e}", p.to);
            }
        }
    }
}
