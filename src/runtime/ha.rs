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
//! Invariant: one `serve` per process, so the state is process-wide
//! (atomics and one lock, never held across an `.await`). Without `ha:`
//! the member always holds the VIPs ([`holds_vips`] is true), so a single
//! appliance behaves exactly as before.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// This member holds the VIPs (`network.applianceIP` is local).
    #[serde(rename = "holdsVIPs")]
    pub holds_vips: bool,
    /// Unix time `holdsVIPs` last changed (or `serve` started).
    pub since: u64,
    /// The last exchange with the peer's admin API worked.
    pub peer_reachable: bool,
    /// Unix time of the last successful exchange with the peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync: Option<u64>,
    /// Why the last exchange failed, while the peer is unreachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_error: Option<String>,
    /// Node entries of the install state taken from the peer so far.
    pub learned: u64,
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
pub fn start(peer: Ipv4Addr, vip: Ipv4Addr) {
    let holds = is_local(vip);
    HOLDS.store(holds, Ordering::Relaxed);
    *STATE.locked() = Some(HaStatus {
        peer: peer.to_string(),
        holds_vips: holds,
        since: unix_now(),
        ..HaStatus::default()
    });
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
