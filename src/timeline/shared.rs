//! The timeline events an HA pair shares (docs/ha.md): each member keeps a
//! bounded log of the events it observed itself that changed its timeline
//! (a node's lease, ignition fetch, install end, bootstrap complete, …),
//! sends it to the peer in the `timeline` part of the exchanged document
//! (`serve::hasync`), and applies the peer's events it has not seen yet
//! at their original time — so after a takeover the survivor's `status`
//! and `wait-for` show what happened through the other member.
//!
//! Invariants:
//! - An event is identified by its time and content ([`Stamped`]); one
//!   already seen — observed here, or taken from the peer — is not applied
//!   again ([`SEEN`] identities are kept, more than a peer's log holds, so
//!   a resent log changes nothing).
//! - The log holds the events observed here and those taken from the peer
//!   (so a member that restarts, its timeline empty, gets its own earlier
//!   events back from the peer). No event goes back and forth: the member
//!   it came from has seen it and does not take it again, so the log's
//!   change counter moves once per new event.
//! - Only what happened to the cluster is shared ([`is_shared`]): the
//!   install mode, the marker's staleness, the bootstrap-in-place age and
//!   LB health (each member's LB checks the backends itself) are local.
//! - Bounded: the log keeps the latest [`LOG`] events; a peer's log longer
//!   than that is cut to its latest [`LOG`].
//! - A peer's event is taken only when it is about a node of the plan (or
//!   no node), at most [`FUTURE_SECS`] ahead, with bounded strings, and of
//!   a kind this version knows ([`check_peer`]); the others are skipped
//!   and counted, never fatal (a newer peer may know more kinds).

use std::collections::{HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::Event;
use crate::runtime::control::{FUTURE_SECS, Skipped};

/// Longest string a peer's event may carry (a file name, a client
/// address, a reason).
pub const MAX_TEXT: usize = 256;

/// How many local events the log keeps.
pub const LOG: usize = 1024;
/// How many event identities are remembered against re-applying.
pub const SEEN: usize = 4 * LOG;

/// An event and the time (Unix seconds) it was applied at.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stamped {
    pub at: u64,
    pub event: Event,
}

/// Whether `ev` is part of the shared log.
pub fn is_shared(ev: &Event) -> bool {
    !matches!(
        ev,
        Event::SingleNode { .. }
            | Event::StaleMarker { .. }
            | Event::BootstrapInPlaceWritten { .. }
            | Event::Healthy { .. }
            | Event::ApiDown { .. }
            | Event::CsrAlert { .. }
    )
}

/// The local log and the identities of the peer's events applied.
#[derive(Debug, Default)]
pub struct Shared {
    log: VecDeque<Stamped>,
    changes: u64,
    seen: HashSet<Stamped>,
    seen_order: VecDeque<Stamped>,
}

impl Shared {
    /// A local event at `at` that changed the timeline.
    pub fn note(&mut self, at: u64, event: Event) {
        let s = Stamped { at, event };
        self.see(&s);
        self.push(s);
    }

    fn push(&mut self, s: Stamped) {
        if self.log.len() >= LOG {
            self.log.pop_front();
        }
        self.log.push_back(s);
        self.changes = self.changes.wrapping_add(1);
    }

    /// Remember `s` as seen; false if it already was.
    fn see(&mut self, s: &Stamped) -> bool {
        if self.seen.contains(s) {
            return false;
        }
        if self.seen_order.len() >= SEEN
            && let Some(old) = self.seen_order.pop_front()
        {
            self.seen.remove(&old);
        }
        self.seen.insert(s.clone());
        self.seen_order.push_back(s.clone());
        true
    }

    /// The log's change counter and the log, oldest first.
    /// The change counter alone (what [`SharedLog::log`] starts with).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    pub fn log(&self) -> (u64, Vec<Stamped>) {
        (self.changes, self.log.iter().cloned().collect())
    }

    /// The peer's events not seen yet (and shared kinds only), oldest
    /// first; they are remembered as seen and relayed in the log.
    pub fn take(&mut self, mut peer: Vec<Stamped>) -> Vec<Stamped> {
        if peer.len() > LOG {
            peer.drain(..peer.len() - LOG);
        }
        let mut new: Vec<Stamped> = Vec::new();
        for s in peer {
            if is_shared(&s.event) && self.see(&s) {
                new.push(s);
            }
        }
        new.sort_by_key(|s| s.at);
        for s in &new {
            self.push(s.clone());
        }
        new
    }
}

/// The peer's events this member may take, decoded one by one: shared
/// kinds this version knows, about a node of `known` (or none), at most
/// [`FUTURE_SECS`] after `now`, with strings of at most [`MAX_TEXT`]; the
/// others are noted in `skipped`.
pub fn check_peer(
    peer: Vec<serde_json::Value>,
    known: &[String],
    now: u64,
    skipped: &mut Skipped,
) -> Vec<Stamped> {
    let latest = now.saturating_add(FUTURE_SECS);
    let mut out = Vec::new();
    for v in peer.into_iter().rev().take(LOG) {
        let s: Stamped = match serde_json::from_value(v) {
            Ok(s) => s,
            Err(e) => {
                skipped.note(|| format!("timeline: an event this version does not know ({e})"));
                continue;
            }
        };
        let why = if s.at > latest || event_time(&s.event).is_some_and(|t| t > latest) {
            Some("is more than a day ahead")
        } else if s
            .event
            .node()
            .is_some_and(|n| !known.iter().any(|k| k == n))
        {
            Some("is about a node not in the cluster file")
        } else if texts(&s.event).iter().any(|t| t.len() > MAX_TEXT) {
            Some("carries an overlong string")
        } else {
            None
        };
        match why {
            Some(why) => skipped.note(|| format!("timeline: a peer event at {} {why}", s.at)),
            None => out.push(s),
        }
    }
    out.reverse();
    out
}

/// A time an event carries besides its own.
fn event_time(ev: &Event) -> Option<u64> {
    match ev {
        Event::Lease { expires, .. } => Some(*expires),
        Event::Ignition { at, .. }
        | Event::RegistryPulling { at, .. }
        | Event::RegistryPulled { at, .. } => Some(*at),
        _ => None,
    }
}

/// The free-form strings of an event.
fn texts(ev: &Event) -> Vec<&str> {
    match ev {
        Event::InstallRejected { reason, .. } => vec![reason],
        Event::Ignition { client, file, .. } => vec![client, file],
        Event::StaleMarker { path } => path.as_deref().into_iter().collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(node: &str) -> Event {
        Event::InstallFinished { node: node.into() }
    }

    #[test]
    fn peer_events_of_unknown_kinds_nodes_or_times_are_skipped_and_counted() {
        let now = 1_000_000;
        let known = vec!["master-0".to_string()];
        let peer = vec![
            serde_json::json!({"at": now, "event": {"kind": "installFinished", "node": "master-0"}}),
            serde_json::json!({"at": now, "event": {"kind": "somethingNew", "node": "master-0"}}),
            serde_json::json!({"at": now, "event": {"kind": "installFinished", "node": "ghost"}}),
            serde_json::json!({"at": u64::MAX, "event": {"kind": "bootstrapComplete"}}),
            serde_json::json!({"at": now, "event": {"kind": "lease", "node": "master-0", "expires": u64::MAX}}),
            serde_json::json!({"at": now - 5, "event": {"kind": "bootstrapComplete"}}),
        ];
        let mut skipped = Skipped::default();
        let got = check_peer(peer, &known, now, &mut skipped);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].event, ev("master-0"));
        assert_eq!(got[1].event, Event::BootstrapComplete);
        assert_eq!(skipped.count, 4);
    }

    #[test]
    fn takes_each_peer_event_once_and_oldest_first() {
        let mut s = Shared::default();
        let peer = vec![
            Stamped {
                at: 20,
                event: ev("b"),
            },
            Stamped {
                at: 10,
                event: ev("a"),
            },
        ];
        let got = s.take(peer.clone());
        assert_eq!(got.iter().map(|x| x.at).collect::<Vec<_>>(), [10, 20]);
        // The same log again (every exchange sends it whole): nothing new.
        assert!(s.take(peer.clone()).is_empty());
        // The same event at another time is another event.
        let got = s.take(vec![Stamped {
            at: 30,
            event: ev("a"),
        }]);
        assert_eq!(got.len(), 1);
        // Taken events are relayed, and the member they came from (it has
        // seen them) takes none of them back.
        let (changes, log) = s.log();
        assert_eq!((changes, log.len()), (3, 3));
        let mut origin = Shared::default();
        origin.note(20, ev("b"));
        origin.note(10, ev("a"));
        origin.note(30, ev("a"));
        assert!(origin.take(log).is_empty());
        assert_eq!(origin.log().0, 3);
        // A restarted member (nothing seen) gets them all back.
        assert_eq!(Shared::default().take(s.log().1).len(), 3);
    }

    #[test]
    fn local_only_kinds_are_neither_logged_by_callers_nor_taken() {
        let mut s = Shared::default();
        let local = Event::SingleNode { node: None };
        assert!(!is_shared(&local));
        assert!(
            s.take(vec![Stamped {
                at: 1,
                event: local
            }])
            .is_empty()
        );
        assert!(is_shared(&Event::BootstrapComplete));
    }

    #[test]
    fn log_and_seen_are_bounded() {
        let mut s = Shared::default();
        for i in 0..(LOG as u64 + 10) {
            s.note(i, ev("a"));
        }
        let (changes, log) = s.log();
        assert_eq!(changes, LOG as u64 + 10);
        assert_eq!(log.len(), LOG);
        assert_eq!(log.first().map(|x| x.at), Some(10));
        for round in 0..6u64 {
            let peer: Vec<Stamped> = (0..LOG as u64)
                .map(|i| Stamped {
                    at: round * 10_000 + i,
                    event: ev("b"),
                })
                .collect();
            assert_eq!(s.take(peer).len(), LOG);
        }
        assert!(s.seen.len() <= SEEN && s.seen_order.len() <= SEEN);
        // A peer log longer than LOG is cut to its latest LOG events.
        let long: Vec<Stamped> = (0..LOG as u64 + 5)
            .map(|i| Stamped {
                at: 1_000_000 + i,
                event: ev("c"),
            })
            .collect();
        let got = s.take(long);
        assert_eq!(got.len(), LOG);
        assert_eq!(got.first().map(|x| x.at), Some(1_000_005));
    }

    #[test]
    fn events_round_trip_as_json() {
        let s = Stamped {
            at: 7,
            event: Event::Ignition {
                node: Some("m0".into()),
                client: "10.0.0.5".into(),
                file: "master.ign".into(),
                at: 7,
            },
        };
        let text = serde_json::to_string(&s).unwrap_or_default();
        assert!(text.contains("\"kind\":\"ignition\""), "{text}");
        let back: Stamped = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, s);
    }
}
