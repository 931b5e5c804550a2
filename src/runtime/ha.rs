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
//! The state is a value, [`HaView`] (cheap clones of one `Arc`), made
//! once by `serve` ([`HaView::start`], or [`HaView::single`] without
//! `ha:`) and handed to the services in their run-time context
//! (`runtime::context::Context`): two appliances in one process (an
//! in-process test) each see their own. Invariants: atomics and one lock,
//! never held across an `.await`; without `ha:` the member always holds
//! the VIPs ([`HaView::holds_vips`] is true), so a single appliance
//! behaves exactly as before.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::runtime::clock::unix_now;
use crate::runtime::sync::LockExt as _;

/// How often [`watch`] looks at the VIP.
pub const POLL: Duration = Duration::from_millis(200);

/// This member's side of the pair, shared by the services of one `serve`.
#[derive(Clone, Default)]
pub struct HaView(Arc<HaState>);

struct HaState {
    /// This member holds the VIPs (always, without `ha:`).
    holds: AtomicBool,
    /// This member's own address (its member id in the exchange and in
    /// the install state's revisions), as a number; 0 until known.
    member: AtomicU32,
    /// The peer's address, to find this member's own one by route; 0
    /// without `ha:`.
    peer: u32,
    /// The `ha` section of `/status` (`None` without `ha:`).
    status: Mutex<Option<HaStatus>>,
}

impl Default for HaState {
    fn default() -> Self {
        HaState {
            holds: AtomicBool::new(true),
            member: AtomicU32::new(0),
            peer: 0,
            status: Mutex::new(None),
        }
    }
}

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

impl HaView {
    /// A single appliance (no `ha:`): it always holds the VIPs.
    pub fn single() -> HaView {
        HaView::default()
    }

    /// The view of a member whose peer is `peer` and whose VIP is `vip`:
    /// its first observation is made now, before any service answers.
    pub fn start(peer: Ipv4Addr, vip: Ipv4Addr, own_ip: Option<Ipv4Addr>) -> HaView {
        let holds = is_local(vip);
        let view = HaView(Arc::new(HaState {
            holds: AtomicBool::new(holds),
            member: AtomicU32::new(own_ip.map_or(0, u32::from)),
            peer: u32::from(peer),
            status: Mutex::new(Some(HaStatus {
                peer: peer.to_string(),
                holds_vips: holds,
                since: unix_now(),
                ..HaStatus::default()
            })),
        }));
        // Known now (ownIP, or the route to the peer), else at first use.
        let id = view.member_id();
        if id != 0 {
            view.update(|s| s.member = Ipv4Addr::from(id).to_string());
        }
        info!(
            "ha: {} the VIPs ({vip}) at start",
            if holds {
                "this member holds"
            } else {
                "the peer holds"
            }
        );
        view
    }

    /// This member's id: `ha.ownIP`, else the source address of a route to
    /// `ha.peer` (the address the peer sees); 0 without HA.
    pub fn member_id(&self) -> u32 {
        let id = self.0.member.load(Ordering::Relaxed);
        if id != 0 || self.0.peer == 0 {
            return id;
        }
        let id = route_source(Ipv4Addr::from(self.0.peer)).map_or(0, u32::from);
        self.0.member.store(id, Ordering::Relaxed);
        if id != 0 {
            self.update(|s| s.member = Ipv4Addr::from(id).to_string());
        }
        id
    }

    /// True unless this is an HA member that does not hold the VIPs now.
    pub fn holds_vips(&self) -> bool {
        self.0.holds.load(Ordering::Relaxed)
    }

    /// `/status`'s `ha` section, when `serve` runs as an HA member.
    pub fn status(&self) -> Option<HaStatus> {
        self.0.status.locked().clone()
    }

    /// Update the `/status` section (no-op without `ha:`).
    pub fn update(&self, f: impl FnOnce(&mut HaStatus)) {
        if let Some(s) = self.0.status.locked().as_mut() {
            f(s);
        }
    }

    /// Record whether the VIP is held; true when that changed.
    fn observe(&self, holds: bool) -> bool {
        let was = self.0.holds.swap(holds, Ordering::Relaxed);
        if was != holds {
            self.update(|s| {
                s.holds_vips = holds;
                s.since = unix_now();
            });
        }
        was != holds
    }

    /// Follow whether `vip` is local until `stop`, logging each change.
    pub async fn watch(self, vip: Ipv4Addr, stop: CancellationToken) -> anyhow::Result<()> {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                _ = tokio::time::sleep(POLL) => {}
            }
            let holds = is_local(vip);
            if self.observe(holds) {
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
    pub async fn until_holder(&self, stop: &CancellationToken) -> bool {
        while !self.holds_vips() {
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep(POLL) => {}
            }
        }
        true
    }
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

/// Whether `ip` is an address of this host (of this network namespace):
/// a bind to it succeeds without `IP_FREEBIND` exactly then.
pub fn is_local(ip: Ipv4Addr) -> bool {
    UdpSocket::bind(SocketAddrV4::new(ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_local_and_test_net_is_not() {
        assert!(is_local(Ipv4Addr::LOCALHOST));
        assert!(!is_local(Ipv4Addr::new(192, 0, 2, 1)));
    }

    #[test]
    fn two_views_in_one_process_do_not_share_state() {
        let single = HaView::single();
        // 192.0.2.1 (TEST-NET-1) is not local: the peer holds the VIP.
        let member = HaView::start(
            Ipv4Addr::new(127, 0, 0, 2),
            Ipv4Addr::new(192, 0, 2, 1),
            Some(Ipv4Addr::new(127, 0, 0, 3)),
        );
        assert!(single.holds_vips() && !member.holds_vips());
        assert_eq!((single.member_id(), single.status()), (0, None));
        assert_eq!(member.member_id(), u32::from(Ipv4Addr::new(127, 0, 0, 3)));
        assert!(member.observe(true) && member.holds_vips());
        assert!(member.status().is_some_and(|s| s.holds_vips));
        // A clone is the same view.
        let again = member.clone();
        assert!(again.observe(false) && !member.holds_vips());
        assert!(single.holds_vips());
    }
}
