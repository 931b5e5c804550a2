//! The lease table's persisted form: [`LeaseFile`] (bound and released
//! leases, declined addresses; offers are not persisted) and the table
//! rebuilt from it under a possibly changed configuration.
//!
//! Invariant: a record that contradicts today's reservations or network
//! (an address now reserved for another MAC, a node whose reservation
//! moved, an address outside the network or the pool) is never taken
//! over; each one dropped is a note for the log.

use serde::{Deserialize, Serialize};

use super::{Declined, Lease, LeaseTable, Scope, State};

/// Version of the lease file format.
pub const FILE_VERSION: u32 = 1;

/// The persisted form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseFile {
    pub version: u32,
    pub leases: Vec<Lease>,
    #[serde(default)]
    pub declined: Vec<Declined>,
}

impl LeaseTable {
    /// The persisted form: bound and released leases and declined addresses.
    pub fn to_file(&self) -> LeaseFile {
        LeaseFile {
            version: FILE_VERSION,
            leases: self
                .leases()
                .into_iter()
                .filter(|l| l.state != State::Offered)
                .cloned()
                .collect(),
            declined: self.declined(),
        }
    }

    /// Rebuild a table from a lease file under (possibly changed) `scope`.
    /// Returns the table and a note for every record that was not taken
    /// over (outside the network, an address now reserved for another
    /// MAC, a node whose reservation moved, ...).
    pub fn from_file(scope: Scope, file: &LeaseFile) -> (LeaseTable, Vec<String>) {
        let mut t = LeaseTable::new(scope);
        let mut notes = Vec::new();
        for d in &file.declined {
            if t.scope.contains(d.ip) {
                t.declined.insert(d.ip, d.until);
            }
        }
        for l in &file.leases {
            let why = if !t.scope.contains(l.ip) {
                Some("outside the network")
            } else if let Some(r) = t.scope.reserved.get(&l.mac) {
                (*r != l.ip).then_some("its MAC is now reserved for another address")
            } else if t.reserved_ips.contains_key(&l.ip) {
                Some("the address is now reserved for another MAC")
            } else if !t.scope.in_pool(l.ip) {
                Some("outside the pool")
            } else {
                None
            };
            if let Some(why) = why {
                notes.push(format!("lease {} for {} dropped: {why}", l.ip, l.mac));
                continue;
            }
            let mut l = l.clone();
            l.reserved = t.scope.reserved.contains_key(&l.mac);
            if l.state == State::Offered {
                continue;
            }
            let k = t.key_of(&l);
            if let Some(old) = t.by_key.insert(k, l.ip)
                && old != l.ip
            {
                notes.push(format!("lease {old} for {} superseded by {}", l.mac, l.ip));
                t.by_ip.remove(&old);
            }
            t.by_ip.insert(l.ip, l);
        }
        (t, notes)
    }
}
