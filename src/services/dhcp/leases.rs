//! The lease table: pure (no I/O, the clock is injected as `now`, Unix
//! seconds), so every rule is unit-tested.
//!
//! Rules:
//! - A reserved MAC (a node) always gets its reserved IP; a reserved IP is
//!   never given to anyone else, whatever the lease file says.
//! - Other clients get pool addresses (only when a pool is configured),
//!   identified by their client identifier (option 61) if they send one,
//!   else by their hardware address. A client keeps its previous address
//!   while it is free; otherwise the requested address (option 50) if free;
//!   otherwise a never-used address, then the one that expired longest ago.
//! - An offer holds its address for [`OFFER_HOLD`] seconds.
//! - A DECLINE takes the address out of service for [`DECLINE_HOLD`]
//!   seconds (RFC 2131 §3.1 step 5: someone else answers ARP for it).
//! - RELEASE frees the address at once (the record stays, so the client
//!   gets the same address again if it is still free).
//! - A lease is active while `expires > now`; expired leases free their
//!   address but stay as a preference for their last client.
//! - [`LeaseTable::to_file`] / [`LeaseTable::from_file`] are the persisted
//!   form (bound and released leases, declined addresses); offers are not
//!   persisted.
//! - A client identifier longer than [`MAX_CLIENT_ID`] bytes is kept as its
//!   digest ([`canonical_id`]): the table, the lease file and the HA
//!   document never grow with a client's choice of identifier.
//! - An HA peer's lease ([`LeaseTable::check_peer`]) is taken only for a
//!   pool address, expiring at most the lease time (plus [`PEER_SKEW`])
//!   from now, with a bounded client id and hostname.
//!
//! Parts: this file holds the table and its rules; `file.rs` the persisted
//! form, `peer.rs` the leases shared with the HA peer.

mod file;
mod peer;

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::model::net::{Ipv4Net, MacAddr};
use crate::runtime::statefile::{hex, unhex};
use crate::runtime::status::LeaseState;
pub use file::{FILE_VERSION, LeaseFile};

/// Seconds an offered address stays held for the client.
pub const OFFER_HOLD: u64 = 30;
/// Seconds a declined address stays out of service.
pub const DECLINE_HOLD: u64 = 600;

/// Longest client identifier kept as it is (bytes); a longer one is kept
/// as its digest ([`canonical_id`]).
pub const MAX_CLIENT_ID: usize = 64;
/// Longest hostname a peer's lease may carry (one DNS label).
pub const MAX_HOSTNAME: usize = 63;
/// How far beyond `now + leaseTime` a peer's lease may expire (seconds:
/// the members' clocks differ a little).
pub const PEER_SKEW: u64 = 300;

/// The identity kept for client identifier `id`: itself up to
/// [`MAX_CLIENT_ID`] bytes, else a zero byte and its SHA-256 (33 bytes),
/// the same for every message of that client.
pub fn canonical_id(id: &[u8]) -> Vec<u8> {
    if id.len() <= MAX_CLIENT_ID {
        return id.to_vec();
    }
    let d = ring::digest::digest(&ring::digest::SHA256, id);
    let mut v = Vec::with_capacity(33);
    v.push(0);
    v.extend_from_slice(d.as_ref());
    v
}

/// What the table needs from the configuration.
#[derive(Debug, Clone)]
pub struct Scope {
    pub cidr: Ipv4Net,
    /// Inclusive range for clients without a reservation.
    pub pool: Option<(Ipv4Addr, Ipv4Addr)>,
    pub reserved: HashMap<MacAddr, Ipv4Addr>,
    pub lease_time: u32,
    /// Relayed subnets (`dhcp.segments`) and their pools.
    pub segments: Vec<(Ipv4Net, Option<(Ipv4Addr, Ipv4Addr)>)>,
}

impl Scope {
    pub fn new(
        cidr: Ipv4Net,
        pool: Option<(Ipv4Addr, Ipv4Addr)>,
        reservations: impl IntoIterator<Item = (MacAddr, Ipv4Addr)>,
        lease_time: u32,
    ) -> Scope {
        Scope {
            cidr,
            pool,
            reserved: reservations.into_iter().collect(),
            lease_time: lease_time.max(1),
            segments: Vec::new(),
        }
    }

    /// The scope with relayed subnets and their pools.
    pub fn with_segments(
        mut self,
        segments: impl IntoIterator<Item = (Ipv4Net, Option<(Ipv4Addr, Ipv4Addr)>)>,
    ) -> Scope {
        self.segments = segments.into_iter().collect();
        self
    }

    /// Every pool: the local network's, then the segments'.
    fn pools(&self) -> impl Iterator<Item = (Ipv4Net, (Ipv4Addr, Ipv4Addr))> + '_ {
        self.pool
            .map(|p| (self.cidr, p))
            .into_iter()
            .chain(self.segments.iter().filter_map(|(c, p)| p.map(|p| (*c, p))))
    }

    pub fn in_pool(&self, ip: Ipv4Addr) -> bool {
        self.pools()
            .any(|(_, (s, e))| (u32::from(s)..=u32::from(e)).contains(&u32::from(ip)))
    }

    /// Inside the local network or a segment.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.cidr.contains(ip) || self.segments.iter().any(|(c, _)| c.contains(ip))
    }
}

/// Who is asking: hardware address and optional client identifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub mac: MacAddr,
    pub client_id: Option<Vec<u8>>,
}

/// Identity of a lease holder.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Mac(MacAddr),
    Id(Vec<u8>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Offered,
    Bound,
    Released,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub ip: Ipv4Addr,
    #[serde(with = "mac_serde")]
    pub mac: MacAddr,
    /// Client identifier (option 61), hex.
    #[serde(default, rename = "clientId", skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    pub state: State,
    /// Unix seconds.
    pub expires: u64,
    #[serde(default)]
    pub reserved: bool,
}

impl Lease {
    pub fn active(&self, now: u64) -> bool {
        self.state != State::Released && self.expires > now
    }
    /// State for display: `offered`, `bound`, `released` or `expired`.
    pub fn state_name(&self, now: u64) -> &'static str {
        match self.shown_state(now) {
            LeaseState::Released => "released",
            LeaseState::Expired => "expired",
            LeaseState::Offered => "offered",
            LeaseState::Bound => "bound",
        }
    }

    /// State as `/status` shows it (an expired lease is `Expired`).
    pub fn shown_state(&self, now: u64) -> LeaseState {
        match self.state {
            State::Released => LeaseState::Released,
            _ if self.expires <= now => LeaseState::Expired,
            State::Offered => LeaseState::Offered,
            State::Bound => LeaseState::Bound,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declined {
    pub ip: Ipv4Addr,
    /// Unix seconds.
    pub until: u64,
}

mod mac_serde {
    use super::MacAddr;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(m: &MacAddr, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(m)
    }
    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<MacAddr, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Why no address can be offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoAddress {
    #[error("unknown client and no pool configured")]
    NotServed,
    #[error("the reserved address was declined recently (address conflict)")]
    ReservedDeclined,
    #[error("the pool is exhausted")]
    PoolExhausted,
}

#[derive(Debug, Clone)]
pub struct LeaseTable {
    scope: Scope,
    reserved_ips: HashMap<Ipv4Addr, MacAddr>,
    by_ip: HashMap<Ipv4Addr, Lease>,
    by_key: HashMap<Key, Ipv4Addr>,
    declined: HashMap<Ipv4Addr, u64>,
    /// Addresses whose bound record changed and is not known to be on disk.
    unsynced: HashSet<Ipv4Addr>,
}

impl LeaseTable {
    pub fn new(scope: Scope) -> LeaseTable {
        let reserved_ips = scope.reserved.iter().map(|(m, ip)| (*ip, *m)).collect();
        LeaseTable {
            scope,
            reserved_ips,
            by_ip: HashMap::new(),
            by_key: HashMap::new(),
            declined: HashMap::new(),
            unsynced: HashSet::new(),
        }
    }

    /// The record at `ip` changed and must reach the disk.
    pub fn mark_unsynced(&mut self, ip: Ipv4Addr) {
        self.unsynced.insert(ip);
    }

    /// True when the record at `ip` is known to be on disk as it was last
    /// written (loaded from the file, or covered by a successful write).
    pub fn is_synced(&self, ip: Ipv4Addr) -> bool {
        !self.unsynced.contains(&ip)
    }

    /// Taken with the snapshot that is about to be written.
    pub fn take_unsynced(&mut self) -> HashSet<Ipv4Addr> {
        std::mem::take(&mut self.unsynced)
    }

    /// The write of a snapshot failed: its records are not on disk.
    pub fn restore_unsynced(&mut self, ips: HashSet<Ipv4Addr>) {
        self.unsynced.extend(ips);
    }

    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    pub fn reserved_ip(&self, mac: &MacAddr) -> Option<Ipv4Addr> {
        self.scope.reserved.get(mac).copied()
    }

    /// True if this server hands out addresses to `client` at all.
    pub fn serves(&self, client: &Client) -> bool {
        self.scope.reserved.contains_key(&client.mac) || self.scope.pools().next().is_some()
    }

    fn key(&self, c: &Client) -> Key {
        match &c.client_id {
            Some(id) if !self.scope.reserved.contains_key(&c.mac) && !id.is_empty() => {
                Key::Id(canonical_id(id))
            }
            _ => Key::Mac(c.mac),
        }
    }

    fn key_of(&self, l: &Lease) -> Key {
        match l.client_id.as_deref().and_then(unhex) {
            Some(id) if !l.reserved && !id.is_empty() => Key::Id(canonical_id(&id)),
            _ => Key::Mac(l.mac),
        }
    }

    pub fn is_declined(&self, ip: Ipv4Addr, now: u64) -> bool {
        self.declined.get(&ip).is_some_and(|u| *u > now)
    }

    /// The client's current lease record (any state).
    pub fn lease_of(&self, c: &Client) -> Option<&Lease> {
        let ip = self.by_key.get(&self.key(c))?;
        self.by_ip.get(ip)
    }

    pub fn lease_at(&self, ip: Ipv4Addr) -> Option<&Lease> {
        self.by_ip.get(&ip)
    }

    /// May `client` use `ip` now? (A reservation, or a free pool address,
    /// or one it holds.)
    pub fn may_use(&self, c: &Client, ip: Ipv4Addr, now: u64) -> bool {
        if let Some(r) = self.reserved_ip(&c.mac) {
            return r == ip && !self.is_declined(ip, now);
        }
        if self.reserved_ips.contains_key(&ip) || !self.scope.in_pool(ip) {
            return false;
        }
        if self.is_declined(ip, now) {
            return false;
        }
        match self.by_ip.get(&ip) {
            Some(l) if l.active(now) => self.key_of(l) == self.key(c),
            _ => true,
        }
    }

    /// The address to offer `client` (DISCOVER) on the local network.
    pub fn choose(
        &self,
        c: &Client,
        requested: Option<Ipv4Addr>,
        now: u64,
    ) -> Result<Ipv4Addr, NoAddress> {
        self.choose_in(c, requested, self.scope.cidr, now)
    }

    /// The address to offer `client` (DISCOVER) on subnet `net` (the local
    /// network or a segment): its reservation wherever it lies (the caller
    /// checks it is on `net`), else from `net`'s pool.
    pub fn choose_in(
        &self,
        c: &Client,
        requested: Option<Ipv4Addr>,
        net: Ipv4Net,
        now: u64,
    ) -> Result<Ipv4Addr, NoAddress> {
        if let Some(r) = self.reserved_ip(&c.mac) {
            return if self.is_declined(r, now) {
                Err(NoAddress::ReservedDeclined)
            } else {
                Ok(r)
            };
        }
        let Some((start, end)) = self.scope.pools().find(|(c, _)| *c == net).map(|(_, p)| p) else {
            return Err(NoAddress::NotServed);
        };
        if let Some(ip) = self.by_key.get(&self.key(c))
            && net.contains(*ip)
            && self.may_use(c, *ip, now)
        {
            return Ok(*ip);
        }
        if let Some(ip) = requested
            && net.contains(ip)
            && self.may_use(c, ip, now)
        {
            return Ok(ip);
        }
        let mut oldest: Option<(u64, Ipv4Addr)> = None;
        for n in u32::from(start)..=u32::from(end) {
            let ip = Ipv4Addr::from(n);
            if self.reserved_ips.contains_key(&ip)
                || self.is_declined(ip, now)
                || net.is_reserved(ip)
            {
                continue;
            }
            match self.by_ip.get(&ip) {
                None => return Ok(ip),
                Some(l) if !l.active(now) => {
                    if oldest.is_none_or(|(e, _)| l.expires < e) {
                        oldest = Some((l.expires, ip));
                    }
                }
                Some(_) => {}
            }
        }
        oldest.map(|(_, ip)| ip).ok_or(NoAddress::PoolExhausted)
    }

    fn put(
        &mut self,
        c: &Client,
        ip: Ipv4Addr,
        state: State,
        expires: u64,
        hostname: Option<&str>,
    ) {
        let key = self.key(c);
        // The client moves: forget its previous address.
        if let Some(old) = self.by_key.get(&key).copied()
            && old != ip
        {
            self.by_ip.remove(&old);
        }
        // Someone else's stale record at this address goes.
        if let Some(prev) = self.by_ip.get(&ip) {
            let pk = self.key_of(prev);
            if pk != key {
                self.by_key.remove(&pk);
            }
        }
        let hostname = hostname
            .map(str::to_string)
            .or_else(|| self.by_ip.get(&ip).and_then(|l| l.hostname.clone()));
        let lease = Lease {
            ip,
            mac: c.mac,
            client_id: match key {
                Key::Id(ref id) => Some(hex(id)),
                Key::Mac(_) => None,
            },
            hostname,
            state,
            expires,
            reserved: self.scope.reserved.contains_key(&c.mac),
        };
        self.by_ip.insert(ip, lease);
        self.by_key.insert(key, ip);
    }

    /// Hold `ip` for `client` after an OFFER. An active bound lease of the
    /// same client on the same address is left as it is.
    pub fn offer(&mut self, c: &Client, ip: Ipv4Addr, hostname: Option<&str>, now: u64) {
        if let Some(l) = self.by_ip.get(&ip)
            && l.ip == ip
            && l.state == State::Bound
            && l.active(now)
            && self.key_of(l) == self.key(c)
        {
            return;
        }
        self.put(c, ip, State::Offered, now + OFFER_HOLD, hostname);
    }

    /// Bind `ip` to `client` for the lease time (ACK). Returns the lease.
    pub fn bind(&mut self, c: &Client, ip: Ipv4Addr, hostname: Option<&str>, now: u64) -> Lease {
        let expires = now + u64::from(self.scope.lease_time);
        self.put(c, ip, State::Bound, expires, hostname);
        self.by_ip[&ip].clone()
    }

    /// The client chose another server: drop our offer (bound leases stay).
    pub fn cancel_offer(&mut self, c: &Client) {
        let key = self.key(c);
        if let Some(ip) = self.by_key.get(&key).copied()
            && self
                .by_ip
                .get(&ip)
                .is_some_and(|l| l.state == State::Offered)
        {
            self.by_ip.remove(&ip);
            self.by_key.remove(&key);
        }
    }

    /// RELEASE of `ip` by `client`. True if a lease changed.
    pub fn release(&mut self, c: &Client, ip: Ipv4Addr, now: u64) -> bool {
        let key = self.key(c);
        let holder = match self.by_ip.get(&ip) {
            Some(l) if l.state != State::Released => self.key_of(l),
            _ => return false,
        };
        if holder != key {
            return false;
        }
        if let Some(l) = self.by_ip.get_mut(&ip) {
            l.state = State::Released;
            l.expires = l.expires.min(now);
        }
        true
    }

    /// DECLINE of `ip` by `client`: the address is in use by someone else.
    /// True if the table changed.
    pub fn decline(&mut self, c: &Client, ip: Ipv4Addr, now: u64) -> bool {
        let owned = self
            .by_ip
            .get(&ip)
            .is_some_and(|l| self.key_of(l) == self.key(c));
        if !owned {
            return false;
        }
        if let Some(l) = self.by_ip.remove(&ip) {
            let k = self.key_of(&l);
            self.by_key.remove(&k);
        }
        self.declined.insert(ip, now + DECLINE_HOLD);
        true
    }

    /// Drop expired offers and finished declines. True if anything that is
    /// persisted changed.
    pub fn gc(&mut self, now: u64) -> bool {
        let before = self.declined.len();
        self.declined.retain(|_, u| *u > now);
        let stale: Vec<Ipv4Addr> = self
            .by_ip
            .values()
            .filter(|l| l.state == State::Offered && l.expires <= now)
            .map(|l| l.ip)
            .collect();
        for ip in stale {
            if let Some(l) = self.by_ip.remove(&ip) {
                let k = self.key_of(&l);
                if self.by_key.get(&k) == Some(&ip) {
                    self.by_key.remove(&k);
                }
            }
        }
        before != self.declined.len()
    }

    /// All leases, ordered by address.
    pub fn leases(&self) -> Vec<&Lease> {
        let mut v: Vec<_> = self.by_ip.values().collect();
        v.sort_by_key(|l| u32::from(l.ip));
        v
    }

    pub fn declined(&self) -> Vec<Declined> {
        let mut v: Vec<_> = self
            .declined
            .iter()
            .map(|(ip, until)| Declined {
                ip: *ip,
                until: *until,
            })
            .collect();
        v.sort_by_key(|d| u32::from(d.ip));
        v
    }
}

#[cfg(test)]
mod tests;
