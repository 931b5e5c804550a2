//! The leases shared with the HA peer: which of the peer's leases this
//! table may take ([`LeaseTable::check_peer`], pure) and taking them
//! ([`LeaseTable::merge_peer`]).
//!
//! Invariants: only bound, active pool leases are shared (reservations are
//! answered alike by both members); a peer's lease expires at most the
//! lease time plus [`PEER_SKEW`] from now; of two records for one address
//! or one client the later expiry wins.

use std::net::Ipv4Addr;

use super::{Lease, LeaseTable, MAX_CLIENT_ID, MAX_HOSTNAME, PEER_SKEW, State};
use crate::runtime::statefile::unhex;

impl LeaseTable {
    /// The HA peer's leases this table may take: bound, active pool
    /// leases expiring at most `leaseTime` + [`PEER_SKEW`] from `now`,
    /// with a client id of at most [`MAX_CLIENT_ID`] bytes (a longer one
    /// is sent as its digest); a hostname longer than [`MAX_HOSTNAME`] is
    /// dropped. The others are noted in `skipped`. Changes nothing.
    pub fn check_peer(
        &self,
        peer: Vec<Lease>,
        now: u64,
        skipped: &mut crate::runtime::control::Skipped,
    ) -> Vec<Lease> {
        let latest = now.saturating_add(u64::from(self.scope.lease_time) + PEER_SKEW);
        let mut out = Vec::with_capacity(peer.len());
        for mut l in peer {
            if l.reserved || l.state != State::Bound || !l.active(now) {
                continue;
            }
            let why = if !self.scope.in_pool(l.ip) || self.reserved_ips.contains_key(&l.ip) {
                Some("is not a pool address".to_string())
            } else if l.expires > latest {
                Some(format!(
                    "expires {} s from now, beyond the lease time",
                    l.expires - now
                ))
            } else if l
                .client_id
                .as_deref()
                .is_some_and(|c| c.len() > 2 * MAX_CLIENT_ID || unhex(c).is_none())
            {
                Some("has a client id longer than 64 bytes or not hex".to_string())
            } else {
                None
            };
            if let Some(why) = why {
                skipped.note(|| format!("leases: the lease of {} {why}", l.ip));
                continue;
            }
            if l.hostname.as_ref().is_some_and(|h| h.len() > MAX_HOSTNAME) {
                l.hostname = None;
            }
            out.push(l);
        }
        out
    }

    /// Take the HA peer's active bound pool leases that expire later than
    /// what this table has for their address and their client (a renewal
    /// through the peer wins; our own newer record wins). Reservations are
    /// not shared: both members answer them alike. Returns the addresses
    /// taken; they are marked for the lease file.
    pub fn merge_peer(&mut self, peer: &[Lease], now: u64) -> Vec<Ipv4Addr> {
        let mut taken = Vec::new();
        for l in peer {
            if l.reserved
                || l.state != State::Bound
                || !l.active(now)
                || l.expires > now.saturating_add(u64::from(self.scope.lease_time) + PEER_SKEW)
                || !self.scope.in_pool(l.ip)
                || self.reserved_ips.contains_key(&l.ip)
                || self
                    .by_ip
                    .get(&l.ip)
                    .is_some_and(|o| o.expires >= l.expires)
            {
                continue;
            }
            let key = self.key_of(l);
            if let Some(old) = self.by_key.get(&key).copied()
                && old != l.ip
            {
                if self.by_ip.get(&old).is_some_and(|o| o.expires >= l.expires) {
                    continue;
                }
                self.by_ip.remove(&old);
            }
            // Another client's older record at this address goes.
            if let Some(o) = self.by_ip.get(&l.ip) {
                let k = self.key_of(o);
                if self.by_key.get(&k) == Some(&l.ip) {
                    self.by_key.remove(&k);
                }
            }
            self.by_ip.insert(l.ip, l.clone());
            self.by_key.insert(key, l.ip);
            self.unsynced.insert(l.ip);
            taken.push(l.ip);
        }
        taken
    }
}
