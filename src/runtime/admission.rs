//! Connection admission for the HTTP and admin listeners: who may hold a
//! connection slot, and whose idle connection makes room when they are all
//! taken.
//!
//! Role: one client address (loopback included) may hold at most its
//! per-client limit (HTTP: `http.maxConnectionsPerClient`, lowered by a
//! short open-files limit: `limits::cap::Caps::http_per_client`; admin:
//! `limits::cap::ADMIN_PER_CLIENT`), so a slowloris from
//! one host cannot take every slot. Many hosts together can: 4 addresses ×
//! 64 idle h2 connections, or 20 × 64 trickled heads, filled the listener
//! and no other client was served. So when every slot is taken, a new
//! connection from a client holding `c` connections takes the slot of an
//! **unused** connection — idle (no request in flight for at least
//! [`MIN_IDLE`]), still waiting for its first request head (nothing of a
//! response can be on its way out), or stalled (its response's writes
//! waiting on a client that does not read for at least [`MIN_STALL`]) — of
//! the client holding the most, if that client holds more than `c + 1`:
//! max-min fairness — the heaviest holder gives way to a lighter one, a
//! fifth client is served while the others hold all they may, and two
//! clients of equal weight never take turns evicting each other. A
//! connection that cannot be admitted is closed at once (no one waits in
//! the backlog behind idle slots). A request in flight is evicted only
//! when its response is stalled: 300 never-read downloads from 10
//! addresses held every slot otherwise (audit M5).
//!
//! Reserve a share of the slots for clients under their limit instead? It
//! fails with many sources: the attackers are under their limit too, and
//! fill the reserve. Eviction of idle connections holds for any number of
//! sources as long as they idle or do not read, which is what holding a
//! slot without being served is.
//!
//! Invariants: a client is in the map only while it holds a connection;
//! `total` is the number of connections in the map; an evicted connection
//! leaves the map at once (its slot is the newcomer's), so its own drop
//! later changes nothing; IPv4-mapped IPv6 addresses count as their IPv4
//! address.

use crate::runtime::httpconn::Activity;
use crate::runtime::sync::LockExt as _;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A connection must have had no request in flight this long to be
/// evicted: a response whose body was just handed to hyper may still be
/// on its way out.
pub const MIN_IDLE: Duration = Duration::from_secs(1);

/// A response's writes must have waited this long on a client that does
/// not read (send buffer full, no byte sent) for its connection to be
/// evicted: a client that reads, however slowly, frees room sooner.
pub const MIN_STALL: Duration = Duration::from_secs(2);

/// How long `a` has held its slot unused, when long enough to give way:
/// idle for [`MIN_IDLE`], waiting for its first request head (at once), or
/// its writes stalled for [`MIN_STALL`].
fn unused_for(a: &Activity) -> Option<Duration> {
    let idle = a.idle_for();
    idle.filter(|d| *d >= MIN_IDLE || a.before_first_request())
        .or_else(|| a.stalled_for().filter(|d| *d >= MIN_STALL))
}

/// One admitted connection.
struct Held {
    id: u64,
    activity: Arc<Activity>,
}

#[derive(Default)]
struct Inner {
    by_ip: HashMap<IpAddr, Vec<Held>>,
    total: usize,
    next_id: u64,
}

/// Live connections per client address.
#[derive(Default)]
pub struct Clients {
    inner: Mutex<Inner>,
}

/// The limits admission applies.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections one client may hold.
    pub per_client: usize,
    /// Connections served at once.
    pub total: usize,
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The client holds its per-client limit.
    PerClient,
    /// Every slot is taken and no heavier client has an idle connection.
    Full,
}

/// One connection's place in the count; released on drop.
pub struct ClientSlot {
    clients: Arc<Clients>,
    ip: IpAddr,
    id: u64,
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl Inner {
    fn count(&self, ip: &IpAddr) -> usize {
        self.by_ip.get(ip).map_or(0, Vec::len)
    }

    /// Take an unused connection's slot from the heaviest client holding
    /// more than `c + 1` (other than `ip`); the one unused longest is closed.
    /// `Some(victim's address)` when one was found.
    fn evict_for(&mut self, ip: &IpAddr, c: usize) -> Option<IpAddr> {
        let mut heavy: Vec<(usize, IpAddr)> = self
            .by_ip
            .iter()
            .filter(|(k, v)| *k != ip && v.len() > c + 1)
            .map(|(k, v)| (v.len(), *k))
            .collect();
        heavy.sort_unstable_by(|a, b| b.cmp(a));
        for (_, victim) in heavy {
            let conns = self.by_ip.get_mut(&victim)?;
            let idlest = conns
                .iter()
                .enumerate()
                .filter_map(|(i, h)| Some((unused_for(&h.activity)?, i)))
                .max();
            if let Some((_, i)) = idlest {
                let held = conns.swap_remove(i);
                if conns.is_empty() {
                    self.by_ip.remove(&victim);
                }
                self.total -= 1;
                held.activity.kick();
                return Some(victim);
            }
        }
        None
    }
}

impl Clients {
    /// Admit one more connection from `ip` (its requests counted in
    /// `activity`) under `limits`, evicting an idle connection of a
    /// heavier client when every slot is taken (see the module doc).
    /// `Ok` carries the evicted connection's address, if any.
    pub fn admit(
        self: &Arc<Self>,
        ip: IpAddr,
        activity: &Arc<Activity>,
        limits: Limits,
    ) -> Result<(ClientSlot, Option<IpAddr>), Refused> {
        let ip = canonical(ip);
        let mut g = self.inner.locked();
        let inner = &mut *g;
        let held = Held {
            id: inner.next_id + 1,
            activity: activity.clone(),
        };
        let evicted = if inner.total < limits.total {
            // The usual case, one map lookup: a slot is free.
            let conns = inner.by_ip.entry(ip).or_default();
            if conns.len() >= limits.per_client {
                if conns.is_empty() {
                    inner.by_ip.remove(&ip);
                }
                return Err(Refused::PerClient);
            }
            conns.push(held);
            None
        } else {
            let c = inner.count(&ip);
            if c >= limits.per_client {
                return Err(Refused::PerClient);
            }
            let victim = inner.evict_for(&ip, c).ok_or(Refused::Full)?;
            inner.by_ip.entry(ip).or_default().push(held);
            Some(victim)
        };
        inner.next_id += 1;
        let id = inner.next_id;
        inner.total += 1;
        Ok((
            ClientSlot {
                clients: self.clone(),
                ip,
                id,
            },
            evicted,
        ))
    }

    /// Connections `ip` holds now.
    #[cfg(test)]
    pub fn count(&self, ip: IpAddr) -> usize {
        self.inner.locked().count(&canonical(ip))
    }

    /// Connections held now.
    #[cfg(test)]
    fn total(&self) -> usize {
        self.inner.locked().total
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut g = self.clients.inner.locked();
        let inner = &mut *g;
        let Some(conns) = inner.by_ip.get_mut(&self.ip) else {
            return;
        };
        // Absent when evicted: its slot was given away then.
        if let Some(i) = conns.iter().position(|h| h.id == self.id) {
            conns.swap_remove(i);
            inner.total -= 1;
        }
        if conns.is_empty() {
            inner.by_ip.remove(&self.ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    const WIDE: Limits = Limits {
        per_client: 2,
        total: 100,
    };

    #[test]
    fn limits_per_address_and_releases() {
        let c = Arc::new(Clients::default());
        let a = Activity::new();
        let (s1, _) = c.admit(ip("127.0.0.2"), &a, WIDE).unwrap();
        let (s2, _) = c.admit(ip("::ffff:127.0.0.2"), &a, WIDE).unwrap();
        assert_eq!(
            c.admit(ip("127.0.0.2"), &a, WIDE).err(),
            Some(Refused::PerClient),
            "third from the same host"
        );
        let (s3, _) = c.admit(ip("127.0.0.3"), &a, WIDE).unwrap();
        assert_eq!(c.count(ip("127.0.0.2")), 2);
        drop(s1);
        assert_eq!(c.count(ip("127.0.0.2")), 1);
        let (s4, _) = c.admit(ip("127.0.0.2"), &a, WIDE).unwrap();
        drop((s2, s3, s4));
        assert_eq!((c.count(ip("127.0.0.2")), c.total()), (0, 0));
        assert!(c.inner.locked().by_ip.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn when_full_the_heaviest_idle_holder_gives_way() {
        let c = Arc::new(Clients::default());
        let lim = Limits {
            per_client: 4,
            total: 6,
        };
        // a holds 4 (idle after a request), b holds 2 (one busy): full.
        let served = || {
            let a = Activity::new();
            drop(a.begin_for_test());
            a
        };
        let idle: Vec<_> = (0..4).map(|_| served()).collect();
        let mut slots: Vec<_> = idle
            .iter()
            .map(|a| c.admit(ip("10.0.0.1"), a, lim).unwrap().0)
            .collect();
        let b_busy = Activity::new();
        let _req = b_busy.begin_for_test();
        slots.push(c.admit(ip("10.0.0.2"), &b_busy, lim).unwrap().0);
        slots.push(c.admit(ip("10.0.0.2"), &served(), lim).unwrap().0);
        let newcomer = Activity::new();
        // A request just ended: not idle long enough to be evicted yet.
        assert_eq!(
            c.admit(ip("10.0.0.3"), &newcomer, lim).err(),
            Some(Refused::Full)
        );
        tokio::time::advance(MIN_IDLE + Duration::from_millis(1)).await;
        // A newcomer (0) takes an idle slot of the heaviest (a: 4).
        let (s, evicted) = c.admit(ip("10.0.0.3"), &newcomer, lim).unwrap();
        assert_eq!(evicted, Some(ip("10.0.0.1")));
        assert_eq!(idle.iter().filter(|a| a.is_kicked()).count(), 1);
        assert_eq!((c.count(ip("10.0.0.1")), c.total()), (3, 6));
        // b (2) cannot evict a (3): 3 > 2 + 1 is false, so equals never
        // take turns.
        assert_eq!(
            c.admit(ip("10.0.0.2"), &Activity::new(), lim).err(),
            Some(Refused::Full)
        );
        // The evicted connection's own drop changes nothing.
        let kicked = idle.iter().position(|a| a.is_kicked()).unwrap();
        drop(slots.remove(kicked));
        assert_eq!(c.total(), 6);
        drop(s);
        assert_eq!(c.total(), 5);
        drop(slots);
        assert_eq!(c.total(), 0);
        assert!(c.inner.locked().by_ip.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_response_gives_way_a_progressing_one_does_not() {
        let c = Arc::new(Clients::default());
        let lim = Limits {
            per_client: 8,
            total: 3,
        };
        let busy: Vec<_> = (0..3).map(|_| Activity::new()).collect();
        let _reqs: Vec<_> = busy.iter().map(|a| a.begin_for_test()).collect();
        let _slots: Vec<_> = busy
            .iter()
            .map(|a| c.admit(ip("10.0.0.1"), a, lim).unwrap().0)
            .collect();
        // Two downloads wait on a client that does not read; one has
        // only just begun to.
        busy[0].write_waits();
        busy[1].write_waits();
        tokio::time::advance(MIN_STALL).await;
        busy[2].write_waits();
        busy[1].write_progressed();
        let (_s, evicted) = c.admit(ip("10.0.0.9"), &Activity::new(), lim).unwrap();
        assert_eq!(evicted, Some(ip("10.0.0.1")));
        let kicked: Vec<bool> = busy.iter().map(|a| a.is_kicked()).collect();
        assert_eq!(kicked, [true, false, false], "only the stalled one");
        assert_eq!(
            c.admit(ip("10.0.0.8"), &Activity::new(), lim).err(),
            Some(Refused::Full),
            "the others progress or stalled too briefly"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_waiting_for_its_first_head_gives_way_at_once() {
        let c = Arc::new(Clients::default());
        let lim = Limits {
            per_client: 8,
            total: 4,
        };
        // A slowloris's partial heads, just connected: full.
        let heads: Vec<_> = (0..4).map(|_| Activity::new()).collect();
        let _slots: Vec<_> = heads
            .iter()
            .map(|a| c.admit(ip("10.0.0.1"), a, lim).unwrap().0)
            .collect();
        let (_s, evicted) = c.admit(ip("127.0.0.1"), &Activity::new(), lim).unwrap();
        assert_eq!(evicted, Some(ip("10.0.0.1")));
        assert_eq!(heads.iter().filter(|a| a.is_kicked()).count(), 1);
    }

    /// Nor a request in flight whose writes are not waiting.
    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_is_never_evicted() {
        let c = Arc::new(Clients::default());
        let lim = Limits {
            per_client: 8,
            total: 3,
        };
        let busy: Vec<_> = (0..3).map(|_| Activity::new()).collect();
        let _reqs: Vec<_> = busy.iter().map(|a| a.begin_for_test()).collect();
        let _slots: Vec<_> = busy
            .iter()
            .map(|a| c.admit(ip("10.0.0.1"), a, lim).unwrap().0)
            .collect();
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(
            c.admit(ip("10.0.0.9"), &Activity::new(), lim).err(),
            Some(Refused::Full)
        );
        assert!(busy.iter().all(|a| !a.is_kicked()));
    }
}
