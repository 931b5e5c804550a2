//! The DHCPv6 binding table: pure (the clock is injected as `now`, Unix
//! seconds).
//!
//! Rules:
//! - A binding is keyed by (DUID, IAID) as RFC 8415 §4.2 says, and records
//!   the MAC it was matched by (when one was found).
//! - A reserved MAC (a node) gets its reserved address whatever DUID and
//!   IAID it sends: a new DUID for the same MAC (live ISO → installed
//!   RHCOS, DUID-LLT → DUID-LL) takes the reserved address over and the
//!   old binding goes. A reserved address is never given to anyone else.
//! - A DUID that yields no MAC is matched to the MAC of an earlier binding
//!   of the same DUID ([`Table::mac_of_duid`]).
//! - Other clients get pool addresses only when a pool is configured: a
//!   client keeps its previous address while it is free, else the hinted
//!   one if free, else the first never-used address, else the one that
//!   expired longest ago (at most [`SCAN_LIMIT`] addresses are looked at).
//! - DECLINE takes an address out of service for [`DECLINE_HOLD`] s, if
//!   the client holds it; a reserved address only when the Decline comes
//!   with evidence of the node's MAC (the DUID alone is public); at most
//!   [`DECLINE_BURST`] declines are applied per [`DECLINE_WINDOW`] s.
//!   RELEASE frees an address at once (the record stays as a preference).
//! - The DUID → MAC map holds only DUIDs that have a binding ([`Table::gc`]
//!   drops the others).
//! - [`Table::to_file`] / [`Table::from_file`] are the persisted form;
//!   rebuilding under new reservations drops what no longer fits.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::Ipv6Addr;

use serde::{Deserialize, Serialize};

use crate::model::cluster::MacAddr;
use crate::runtime::statefile::{hex, unhex};

/// Seconds a declined address stays out of service.
pub const DECLINE_HOLD: u64 = 600;
/// Declines applied per [`DECLINE_WINDOW`] at most (a real address
/// conflict is rare; each decline takes an address out for 600 s).
pub const DECLINE_BURST: usize = 4;
pub const DECLINE_WINDOW: u64 = 60;
/// Most pool addresses examined for a new client (a v6 pool can be huge).
pub const SCAN_LIMIT: u128 = 65_536;
/// Expired pool bindings are forgotten this long after they expired.
pub const FORGET_AFTER: u64 = 7 * 86_400;
/// Version of the binding file format.
pub const FILE_VERSION: u32 = 1;

/// What the table needs from the configuration.
#[derive(Debug, Clone)]
pub struct Scope {
    pub prefix: Ipv6Addr,
    pub prefix_len: u8,
    /// Inclusive range for clients without a reservation.
    pub pool: Option<(Ipv6Addr, Ipv6Addr)>,
    pub reserved: HashMap<MacAddr, Ipv6Addr>,
    /// Valid lifetime of a binding, seconds (≥ 1).
    pub lease_time: u32,
}

impl Scope {
    /// Inside the configured prefix (on-link for Confirm).
    pub fn on_link(&self, ip: Ipv6Addr) -> bool {
        let bits = u32::from(self.prefix_len.min(128));
        let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
        u128::from(ip) & mask == u128::from(self.prefix) & mask
    }

    pub fn in_pool(&self, ip: Ipv6Addr) -> bool {
        self.pool
            .is_some_and(|(s, e)| (u128::from(s)..=u128::from(e)).contains(&u128::from(ip)))
    }
}

/// Who is asking, for one IA_NA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub duid: Vec<u8>,
    pub iaid: u32,
    /// The node's MAC, when one was found ([`super::ident`]).
    pub mac: Option<MacAddr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Bound,
    Released,
}

/// One binding as persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    pub addr: Ipv6Addr,
    /// The client's DUID, hex.
    pub duid: String,
    pub iaid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    pub state: State,
    /// Unix seconds.
    pub expires: u64,
    #[serde(default)]
    pub reserved: bool,
}

impl Binding {
    pub fn active(&self, now: u64) -> bool {
        self.state == State::Bound && self.expires > now
    }
    fn key(&self) -> Option<(Vec<u8>, u32)> {
        Some((unhex(&self.duid)?, self.iaid))
    }
    fn mac(&self) -> Option<MacAddr> {
        self.mac.as_deref().and_then(|m| m.parse().ok())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declined {
    pub addr: Ipv6Addr,
    pub until: u64,
}

/// The persisted form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BindingFile {
    pub version: u32,
    pub bindings: Vec<Binding>,
    #[serde(default)]
    pub declined: Vec<Declined>,
}

/// Why a client gets no address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoAddress {
    #[error(
        "its DUID holds no MAC, no relay or EUI-64 link-local address gave one, no earlier binding has this DUID, and no v6 pool is configured"
    )]
    NoMac,
    #[error("its MAC has no IPv6 reservation and no v6 pool is configured")]
    NotReserved,
    #[error("the reserved address was declined recently (address conflict)")]
    ReservedDeclined,
    #[error("the v6 pool is exhausted")]
    PoolExhausted,
}

/// Why a Decline was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DeclineRefused {
    #[error("the client does not hold the address")]
    NotHeld,
    #[error("a reserved address, and the Decline came without evidence of the node's MAC")]
    NotTheNode,
    #[error("more than {DECLINE_BURST} declines in {DECLINE_WINDOW} s")]
    RateLimited,
}

type Key = (Vec<u8>, u32);

#[derive(Debug, Clone)]
pub struct Table {
    scope: Scope,
    reserved_addrs: HashMap<Ipv6Addr, MacAddr>,
    by_addr: HashMap<Ipv6Addr, Binding>,
    by_key: HashMap<Key, Ipv6Addr>,
    /// DUID → MAC, learned from bindings that had one.
    macs: HashMap<Vec<u8>, MacAddr>,
    declined: HashMap<Ipv6Addr, u64>,
    /// When the declines of the last [`DECLINE_WINDOW`] were applied.
    recent_declines: VecDeque<u64>,
    /// Addresses whose record changed and is not known to be on disk.
    unsynced: HashSet<Ipv6Addr>,
}

impl Table {
    pub fn new(scope: Scope) -> Table {
        let reserved_addrs = scope.reserved.iter().map(|(m, a)| (*a, *m)).collect();
        Table {
            scope,
            reserved_addrs,
            by_addr: HashMap::new(),
            by_key: HashMap::new(),
            macs: HashMap::new(),
            declined: HashMap::new(),
            recent_declines: VecDeque::new(),
            unsynced: HashSet::new(),
        }
    }

    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The MAC an earlier binding of `duid` was matched by.
    pub fn mac_of_duid(&self, duid: &[u8]) -> Option<MacAddr> {
        self.macs.get(duid).copied()
    }

    pub fn reserved(&self, mac: Option<MacAddr>) -> Option<Ipv6Addr> {
        self.scope.reserved.get(&mac?).copied()
    }

    pub fn is_declined(&self, a: Ipv6Addr, now: u64) -> bool {
        self.declined.get(&a).is_some_and(|u| *u > now)
    }

    pub fn bindings(&self) -> impl Iterator<Item = &Binding> {
        self.by_addr.values()
    }

    /// The client's current binding (any state).
    pub fn binding_of(&self, c: &Client) -> Option<&Binding> {
        self.by_addr
            .get(self.by_key.get(&(c.duid.clone(), c.iaid))?)
    }

    /// May `c` use `a` now?
    pub fn may_use(&self, c: &Client, a: Ipv6Addr, now: u64) -> bool {
        if let Some(r) = self.reserved(c.mac) {
            return r == a && !self.is_declined(a, now);
        }
        if self.reserved_addrs.contains_key(&a)
            || !self.scope.in_pool(a)
            || self.is_declined(a, now)
        {
            return false;
        }
        match self.by_addr.get(&a) {
            Some(b) if b.active(now) => b.key().is_some_and(|k| k == (c.duid.clone(), c.iaid)),
            _ => true,
        }
    }

    /// The address for `c`'s IA_NA (`hint`: an address the client asked for).
    pub fn choose(
        &self,
        c: &Client,
        hint: Option<Ipv6Addr>,
        now: u64,
    ) -> Result<Ipv6Addr, NoAddress> {
        if let Some(r) = self.reserved(c.mac) {
            return if self.is_declined(r, now) {
                Err(NoAddress::ReservedDeclined)
            } else {
                Ok(r)
            };
        }
        let Some((start, end)) = self.scope.pool else {
            return Err(if c.mac.is_some() {
                NoAddress::NotReserved
            } else {
                NoAddress::NoMac
            });
        };
        if let Some(b) = self.binding_of(c)
            && self.may_use(c, b.addr, now)
        {
            return Ok(b.addr);
        }
        if let Some(h) = hint
            && self.may_use(c, h, now)
        {
            return Ok(h);
        }
        let (s, e) = (u128::from(start), u128::from(end));
        let mut oldest: Option<(u64, Ipv6Addr)> = None;
        for n in s..=e.min(s.saturating_add(SCAN_LIMIT - 1)) {
            let a = Ipv6Addr::from(n);
            if self.reserved_addrs.contains_key(&a) || self.is_declined(a, now) {
                continue;
            }
            match self.by_addr.get(&a) {
                None => return Ok(a),
                Some(b) if !b.active(now) => {
                    if oldest.is_none_or(|(x, _)| b.expires < x) {
                        oldest = Some((b.expires, a));
                    }
                }
                Some(_) => {}
            }
        }
        oldest.map(|(_, a)| a).ok_or(NoAddress::PoolExhausted)
    }

    /// Bind `a` to `c` for the lease time; true when this is new (another
    /// address, DUID or IAID than the client's active binding) and so worth
    /// an info line. Marks the record unsynced.
    pub fn bind(&mut self, c: &Client, a: Ipv6Addr, now: u64) -> bool {
        let key: Key = (c.duid.clone(), c.iaid);
        let new = !self
            .by_addr
            .get(&a)
            .is_some_and(|b| b.active(now) && b.key().as_ref() == Some(&key));
        // The client moves: forget its previous address.
        if let Some(old) = self.by_key.get(&key).copied()
            && old != a
        {
            self.by_addr.remove(&old);
            self.unsynced.insert(old);
        }
        // Whoever held `a` before (an old DUID of the same node) goes.
        if let Some(prev) = self.by_addr.get(&a)
            && let Some(pk) = prev.key()
            && pk != key
        {
            self.by_key.remove(&pk);
        }
        let reserved = self.reserved_addrs.contains_key(&a);
        let expires = now + u64::from(self.scope.lease_time.max(1));
        if let Some(m) = c.mac {
            self.macs.insert(c.duid.clone(), m);
        }
        self.by_addr.insert(
            a,
            Binding {
                addr: a,
                duid: hex(&c.duid),
                iaid: c.iaid,
                mac: c.mac.map(|m| m.to_string()),
                state: State::Bound,
                expires,
                reserved,
            },
        );
        self.by_key.insert(key, a);
        self.unsynced.insert(a);
        new
    }

    /// RELEASE of `a` by `c`; true if a binding changed.
    pub fn release(&mut self, c: &Client, a: Ipv6Addr) -> bool {
        let key: Key = (c.duid.clone(), c.iaid);
        match self.by_addr.get_mut(&a) {
            Some(b) if b.key().as_ref() == Some(&key) && b.state == State::Bound => {
                b.state = State::Released;
                self.unsynced.insert(a);
                true
            }
            _ => false,
        }
    }

    /// True when `c` holds a binding of `a` (any state: a Release of a
    /// released address is answered the same way).
    pub fn holds(&self, c: &Client, a: Ipv6Addr) -> bool {
        self.by_addr
            .get(&a)
            .and_then(Binding::key)
            .is_some_and(|k| k == (c.duid.clone(), c.iaid))
    }

    /// DECLINE of `a` by `c`: out of service for [`DECLINE_HOLD`] when `c`
    /// holds it, is the node itself for a reserved address (`c.mac` came
    /// from evidence), and the decline budget allows.
    pub fn decline(&mut self, c: &Client, a: Ipv6Addr, now: u64) -> Result<(), DeclineRefused> {
        if !self.holds(c, a) {
            return Err(DeclineRefused::NotHeld);
        }
        if let Some(owner) = self.reserved_addrs.get(&a)
            && c.mac != Some(*owner)
        {
            return Err(DeclineRefused::NotTheNode);
        }
        while self
            .recent_declines
            .front()
            .is_some_and(|t| t.saturating_add(DECLINE_WINDOW) <= now)
        {
            self.recent_declines.pop_front();
        }
        if self.recent_declines.len() >= DECLINE_BURST {
            return Err(DeclineRefused::RateLimited);
        }
        self.recent_declines.push_back(now);
        if let Some(b) = self.by_addr.remove(&a)
            && let Some(k) = b.key()
        {
            self.by_key.remove(&k);
        }
        self.declined.insert(a, now + DECLINE_HOLD);
        self.unsynced.insert(a);
        Ok(())
    }

    /// Forget what has run out; true if anything changed.
    pub fn gc(&mut self, now: u64) -> bool {
        let before = (self.by_addr.len(), self.declined.len());
        self.declined.retain(|_, u| *u > now);
        let gone: Vec<Ipv6Addr> = self
            .by_addr
            .values()
            .filter(|b| !b.reserved && b.expires.saturating_add(FORGET_AFTER) <= now)
            .map(|b| b.addr)
            .collect();
        for a in gone {
            if let Some(k) = self.by_addr.remove(&a).and_then(|b| b.key()) {
                self.by_key.remove(&k);
            }
        }
        let bound: HashSet<&[u8]> = self.by_key.keys().map(|(d, _)| d.as_slice()).collect();
        self.macs.retain(|d, _| bound.contains(d.as_slice()));
        before != (self.by_addr.len(), self.declined.len())
    }

    pub fn is_synced(&self, a: Ipv6Addr) -> bool {
        !self.unsynced.contains(&a)
    }
    pub fn take_unsynced(&mut self) -> HashSet<Ipv6Addr> {
        std::mem::take(&mut self.unsynced)
    }
    pub fn restore_unsynced(&mut self, s: HashSet<Ipv6Addr>) {
        self.unsynced.extend(s);
    }

    pub fn to_file(&self) -> BindingFile {
        let mut bindings: Vec<Binding> = self.by_addr.values().cloned().collect();
        bindings.sort_by_key(|b| b.addr);
        let mut declined: Vec<Declined> = self
            .declined
            .iter()
            .map(|(a, u)| Declined {
                addr: *a,
                until: *u,
            })
            .collect();
        declined.sort_by_key(|d| d.addr);
        BindingFile {
            version: FILE_VERSION,
            bindings,
            declined,
        }
    }

    /// The table from its persisted form under `scope`, with a note per
    /// record dropped.
    pub fn from_file(scope: Scope, f: &BindingFile) -> (Table, Vec<String>) {
        let mut t = Table::new(scope);
        let mut notes = Vec::new();
        for b in &f.bindings {
            let (Some(key), mac) = (b.key(), b.mac()) else {
                notes.push(format!("binding of {} has a bad DUID; dropped", b.addr));
                continue;
            };
            let fits = match t.reserved_addrs.get(&b.addr) {
                Some(m) => mac == Some(*m),
                None => t.reserved(mac).is_none() && t.scope.in_pool(b.addr),
            };
            if !fits {
                notes.push(format!(
                    "binding of {} to {} no longer fits the reservations or the pool; dropped",
                    b.addr,
                    b.mac.as_deref().unwrap_or(&b.duid)
                ));
                continue;
            }
            if let Some(m) = mac {
                t.macs.insert(key.0.clone(), m);
            }
            let mut b = b.clone();
            b.reserved = t.reserved_addrs.contains_key(&b.addr);
            t.by_key.insert(key, b.addr);
            t.by_addr.insert(b.addr, b);
        }
        for d in &f.declined {
            t.declined.insert(d.addr, d.until);
        }
        (t, notes)
    }
}

#[cfg(test)]
mod tests;
