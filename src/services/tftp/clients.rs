//! Per-client transfer accounting for the TFTP listener.
//!
//! Role: one client address may hold at most `pxe.maxTransfersPerClient`
//! transfers at once, so a host that keeps sending read requests (and never
//! acknowledges, holding each slot until its retries run out) cannot take
//! every one of `maxTransfers` from the other PXE clients (audit D4).
//!
//! Invariants: a count exists in the map only while it is > 0 (the last
//! [`ClientSlot`] dropped removes it, so the map holds only clients with a
//! transfer running: at most `maxTransfers` entries); IPv4-mapped IPv6
//! addresses count as their IPv4 address. The HTTP listener has the same
//! accounting for connections; this one is its own so that the services
//! share no code (tests/module_graph.rs).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::runtime::sync::LockExt as _;

/// Running transfers per client address.
#[derive(Default)]
pub(super) struct Clients {
    counts: Mutex<HashMap<IpAddr, usize>>,
}

/// One transfer's place in its client's count; released on drop.
pub(super) struct ClientSlot {
    clients: Arc<Clients>,
    ip: IpAddr,
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl Clients {
    /// A slot for one more transfer to `ip`, or `None` when it already
    /// holds `limit`.
    pub(super) fn try_acquire(self: &Arc<Self>, ip: IpAddr, limit: usize) -> Option<ClientSlot> {
        let ip = canonical(ip);
        let mut m = self.counts.locked();
        let n = m.get(&ip).copied().unwrap_or(0);
        if n >= limit {
            return None;
        }
        m.insert(ip, n + 1);
        Some(ClientSlot {
            clients: self.clone(),
            ip,
        })
    }

    /// Transfers `ip` holds now.
    #[cfg(test)]
    pub(super) fn count(&self, ip: IpAddr) -> usize {
        self.counts
            .locked()
            .get(&canonical(ip))
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut m = self.clients.counts.locked();
        if let Some(n) = m.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_per_address_and_releases() {
        let c = Arc::new(Clients::default());
        let a: IpAddr = "10.0.0.7".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        let b: IpAddr = "10.0.0.8".parse().unwrap();
        let s1 = c.try_acquire(a, 2).unwrap();
        let s2 = c.try_acquire(mapped, 2).unwrap();
        assert!(c.try_acquire(a, 2).is_none(), "third from the same host");
        assert!(c.try_acquire(b, 0).is_none());
        let s3 = c.try_acquire(b, 2).unwrap();
        assert_eq!(c.count(a), 2);
        drop(s1);
        assert_eq!(c.count(a), 1);
        let s4 = c.try_acquire(a, 2).unwrap();
        drop((s2, s3, s4));
        assert_eq!(c.count(a), 0);
        assert!(c.counts.locked().is_empty());
    }
}
