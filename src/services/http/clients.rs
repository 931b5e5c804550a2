//! Per-client connection accounting for the HTTP listener.
//!
//! Role: one client address (loopback included) may hold at most
//! `http.maxConnectionsPerClient` connections at once, so a slowloris from
//! one host cannot take the listener's slots from every other client.
//!
//! Invariants: a count exists in the map only while it is > 0 (the last
//! [`ClientSlot`] dropped removes it, so the map holds only live clients);
//! IPv4-mapped IPv6 addresses count as their IPv4 address.

use crate::runtime::sync::LockExt as _;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Live connections per client address.
#[derive(Default)]
pub struct Clients {
    counts: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place in its client's count; released on drop.
pub struct ClientSlot {
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
    /// A slot for one more connection from `ip`, or `None` when it already
    /// holds `limit`.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr, limit: usize) -> Option<ClientSlot> {
        let ip = canonical(ip);
        let mut m = self.counts.locked();
        let n = m.entry(ip).or_insert(0);
        if *n >= limit {
            if *n == 0 {
                m.remove(&ip);
            }
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            clients: self.clone(),
            ip,
        })
    }

    /// Connections `ip` holds now.
    #[cfg(test)]
    pub fn count(&self, ip: IpAddr) -> usize {
        let m = self.counts.locked();
        m.get(&canonical(ip)).copied().unwrap_or(0)
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
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let s1 = c.try_acquire(a, 2).unwrap();
        let s2 = c.try_acquire(mapped, 2).unwrap();
        assert!(c.try_acquire(a, 2).is_none(), "third from the same host");
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
