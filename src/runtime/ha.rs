//! This member's side of an HA pair (`ha:`, docs/ha.md): whether it holds
//! the VIPs, and what `/status` shows of the pair (the peer reachable, the
//! last sync). keepalived decides who holds the VIPs; this module only
//! observes it: the member holds them when `network.applianceIP` is a
//! local address ([`is_local`], polled every [`POLL`] by [`watch`]).
//!
//! What depends on it: DHCP answers only on the holder (no duplicate
//! offers), BMC `startOnServe` runs only on the holder (only it drives
//! installs); DNS, the LB and HTTP run on both (their listeners are bound
//! with `IP_FREEBIND`, [`super::bind`]) so the member that takes over is
//! warm.
//!
//! The member id (`member_id`): this member's own address, `ha.ownIP` or
//! the source address of the route to `ha.peer`; the peer requires it to
//! be its `ha.peer` (`runtime::haauth`), and the install state's Lamport
//! revisions carry it to break ties.
//!
//! Invariant: one `serve` per process, so the state is process-wide
//! (atomics and one lock, never held across an `.await`). Without `ha:`
//! the member always holds the VIPs ([`holds_vips`] is true), so a single
//! appliance behaves exactly as before.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::runtime::clock::unix_now;
use crate::runtime::sync::LockExt as _;

/// How often [`watch`] looks at the VIP.
pub const POLL: Duration = Duration::from_millis(200);

static HOLDS: AtomicBool = AtomicBool::new(true);
static STATE: Mutex<Option<HaStatus>> = Mutex::new(None);

/// The `ha` section of `/status` (absent without `ha:`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HaStatus {
    /// The other member's own address.
    pub peer: String,
    /// This member's own address: its member id in the exchange.
    #[serde(default)]
    pub member: String,
    /// This member holds the VIPs (`network.applianceIP` is local).
    #[serde(rename = "holdsVIPs")]
    pub holds_vips: bool,
    /// Unix time `holdsVIPs` last changed (or `serve` started).
    pub since: u64,
    /// The last exchange this member sent worked (authenticated answer,
    /// taken whole).
    pub peer_reachable: bool,
    /// Unix time of the last successful exchange this member sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync: Option<u64>,
    /// Why the last exchange this member sent failed, while it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_error: Option<String>,
    /// Node entries of the install state taken from the peer so far.
    pub learned: u64,
    /// Our document to the peer and its answer (this member's exchanges).
    #[serde(default)]
    pub sent: SyncDirection,
    /// The peer's documents to this member (its exchanges).
    #[serde(default)]
    pub received: SyncDirection,
    /// Entries of the peer's documents left out (a node not in the plan,
    /// a revision or time too far ahead, an unknown event kind), and the
    /// latest reason.
    #[serde(default)]
    pub skipped: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_skipped: Option<String>,
    /// The size of this member's last document and the largest the peer
    /// accepts (`docBytes > docLimit`: the sync does NOT work).
    #[serde(default)]
    pub doc_bytes: u64,
    #[serde(default)]
    pub doc_limit: u64,
}

/// One direction of the HA exchange, as `/status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncDirection {
    /// Exchanges that worked, and that failed.
    pub ok: u64,
    pub failed: u64,
    /// Unix time of the last one that worked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_ok: Option<u64>,
    /// Bytes of the last document that worked.
    pub bytes: u64,
    /// The last failure and its Unix time; cleared by the next success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_at: Option<u64>,
}

impl SyncDirection {
    /// An exchange of `bytes` worked at `now`.
    pub fn worked(&mut self, bytes: usize, now: u64) {
        self.ok += 1;
        self.last_ok = Some(now);
        self.bytes = bytes as u64;
        self.error = None;
        self.error_at = None;
    }

    /// An exchange failed at `now` because of `why`.
    pub fn failed(&mut self, why: String, now: u64) {
        self.failed += 1;
        self.error = Some(why);
        self.error_at = Some(now);
    }
}

/// This member's own address (its member id in the exchange and in the
/// install state's revisions), as a number; 0 until known.
static MEMBER: AtomicU32 = AtomicU32::new(0);
/// The peer's address, to find this member's own one by route.
static PEER: AtomicU32 = AtomicU32::new(0);

/// This member's id: `ha.ownIP`, else the source address of a route to
/// `ha.peer` (the address the peer sees); 0 without HA.
pub fn member_id() -> u32 {
    let id = MEMBER.load(Ordering::Relaxed);
    if id != 0 {
        return id;
    }
    let peer = PEER.load(Ordering::Relaxed);
    if peer == 0 {
        return 0;
    }
    let id = route_source(Ipv4Addr::from(peer)).map_or(0, u32::from);
    MEMBER.store(id, Ordering::Relaxed);
    if id != 0 {
        update(|s| s.member = Ipv4Addr::from(id).to_string());
    }
    id
}

/// The source address the kernel picks towards `peer` (a UDP `connect`
/// sends nothing).
fn route_source(peer: Ipv4Addr) -> Option<Ipv4Addr> {
    let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    s.connect(SocketAddrV4::new(peer, 9)).ok()?;
    match s.local_addr().ok()? {
        std::net::SocketAddr::V4(a) if !a.ip().is_unspecified() => Some(*a.ip()),
        _ => None,
    }
}

/// True unless this is an HA member that does not hold the VIPs now.
pub fn holds_vips() -> bool {
    HOLDS.load(Ordering::Relaxed)
}

/// `/status`'s `ha` section, when `serve` runs as an HA member.
pub fn status() -> Option<HaStatus> {
    STATE.locked().clone()
}

/// Update the `/status` section (no-op without `ha:`).
pub fn update(f: impl FnOnce(&mut HaStatus)) {
    if let Some(s) = STATE.locked().as_mut() {
        f(s);
    }
}

/// Whether `ip` is an address of this host (of this network namespace):
/// a bind to it succeeds without `IP_FREEBIND` exactly then.
pub fn is_local(ip: Ipv4Addr) -> bool {
    UdpSocket::bind(SocketAddrV4::new(ip, 0)).is_ok()
}

/// Record whether the VIP is held; true when that changed.
fn observe(holds: bool) -> bool {
    let was = HOLDS.swap(holds, Ordering::Relaxed);
    if was != holds {
        update(|s| {
            s.holds_vips = holds;
            s.since = unix_now();
        });
    }
    was != holds
}

/// Start the HA state for a member whose peer is `peer` and whose VIP is
/// `vip`: its first observation is made now, before any service answers.
pub fn start(peer: Ipv4Addr, vip: Ipv4Addr, own_ip: Option<Ipv4Addr>) {
    let holds = is_local(vip);
    HOLDS.store(holds, Ordering::Relaxed);
    PEER.store(u32::from(peer), Ordering::Relaxed);
    MEMBER.store(own_ip.map_or(0, u32::from), Ordering::Relaxed);
    *STATE.locked() = Some(HaStatus {
        peer: peer.to_string(),
        holds_vips: holds,
        since: unix_now(),
        ..HaStatus::default()
    });
    // Known now (ownIP, or the route to the peer), else at first use.
    let id = member_id();
    if id != 0 {
        update(|s| s.member = Ipv4Addr::from(id).to_string());
    }
    info!(
        "ha: {} the VIPs ({vip}) at start",
        if holds {
            "this member holds"
        } else {
            "the peer holds"
        }
    );
}

/// Follow whether `vip` is local until `stop`, logging each change.
pub async fn watch(vip: Ipv4Addr, stop: CancellationToken) -> anyhow::Result<()> {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep(POLL) => {}
        }
        let holds = is_local(vip);
        if observe(holds) {
            if holds {
                info!(
                    "ha: this member now holds the VIPs ({vip}): it answers DHCP and drives installs"
                );
            } else {
                info!("ha: the VIPs ({vip}) left this member: DHCP stays silent here");
            }
        }
    }
}

/// Wait until this member holds the VIPs (at once without `ha:`); false
/// when `stop` came first.
pub async fn until_holder(stop: &CancellationToken) -> bool {
    while !holds_vips() {
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(POLL) => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_local_and_test_net_is_not() {
        assert!(is_local(Ipv4Addr::LOCALHOST));
        assert!(!is_local(Ipv4Addr::new(192, 0, 2, 1)));
    }
}
