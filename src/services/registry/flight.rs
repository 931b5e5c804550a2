//! Single flight for the pull-through cache (pure core, no sockets): the
//! first request for a missing blob leads its fetch, every other request
//! for it at the same time follows the same fetch, reading what is already
//! in the file and then the tail as it arrives.
//!
//! Invariants: one fetch per key at a time (a leader that vanished
//! without ending its flight — a panic — is replaced by the next joiner);
//! a waiter never reads past what was written, and never the last byte
//! of what it asked for (the blob, or its byte range) before the whole
//! blob matched its digest ([`Progress::visible_until`]), so a client is
//! never handed a complete blob or range whose bytes are wrong: a failed
//! fetch ends every waiter's stream with an error (the connection closes)
//! and nothing stays in storage.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use tokio::sync::watch;

use crate::runtime::sync::LockExt as _;

/// Why a fetch failed, as the client is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    /// The upstream answered that it has no such thing.
    Unknown(String),
    /// The upstream could not be reached, refused us, or sent bad bytes.
    Unavailable(String),
}

impl Failure {
    pub(super) fn message(&self) -> &str {
        match self {
            Failure::Unknown(m) | Failure::Unavailable(m) => m,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Phase {
    /// Asking the upstream; no size known yet.
    Starting,
    /// Bytes arriving (`total` known).
    Running,
    /// All bytes there and matched the digest.
    Done,
    Failed(Failure),
}

/// Where a fetch is: what a waiter reads from.
#[derive(Debug, Clone)]
pub(super) struct Progress {
    pub phase: Phase,
    pub written: u64,
    pub total: u64,
    /// The file being written (open for reading; it stays readable after
    /// it is renamed into place).
    pub file: Option<Arc<std::fs::File>>,
}

impl Progress {
    fn starting() -> Progress {
        Progress {
            phase: Phase::Starting,
            written: 0,
            total: 0,
            file: None,
        }
    }

    /// How many bytes from the start a waiter that wants the bytes before
    /// `end` (the blob's size, or the end of its byte range) may send
    /// now: what was written, short of `end`'s last byte until the whole
    /// blob matched its digest.
    pub(super) fn visible_until(&self, end: u64) -> u64 {
        let end = end.min(self.total);
        match self.phase {
            Phase::Done => end,
            Phase::Running => self.written.min(end.saturating_sub(1)),
            Phase::Starting | Phase::Failed(_) => 0,
        }
    }
}

/// What [`Flights::join`] made of the caller.
pub(super) enum Joined {
    /// Fetch it, publishing progress through the sender, then
    /// [`Flights::end`].
    Leader(watch::Sender<Progress>, watch::Receiver<Progress>),
    /// Someone else fetches it: follow.
    Follower(watch::Receiver<Progress>),
}

/// The fetches in progress, by key.
pub(super) struct Flights<K> {
    map: std::sync::Mutex<HashMap<K, watch::Receiver<Progress>>>,
}

impl<K> Default for Flights<K> {
    fn default() -> Self {
        Flights {
            map: std::sync::Mutex::default(),
        }
    }
}

impl<K: Eq + Hash + Clone> Flights<K> {
    /// Lead the fetch of `key`, or follow the one in progress.
    pub(super) fn join(&self, key: &K) -> Joined {
        let mut map = self.map.locked();
        if let Some(rx) = map.get(key)
            && rx.has_changed().is_ok()
        {
            return Joined::Follower(rx.clone());
        }
        let (tx, rx) = watch::channel(Progress::starting());
        map.insert(key.clone(), rx.clone());
        Joined::Leader(tx, rx)
    }

    /// The fetch of `key` is over (its last progress published first).
    pub(super) fn end(&self, key: &K) {
        self.map.locked().remove(key);
    }

    /// Fetches in progress.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.map.locked().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A waiter for the whole blob.
    const WHOLE: u64 = u64::MAX;

    #[test]
    fn one_leader_many_followers() {
        let f: Flights<u32> = Flights::default();
        let mut leaders = Vec::new();
        let mut followers = Vec::new();
        for _ in 0..8 {
            match f.join(&7) {
                Joined::Leader(tx, _) => leaders.push(tx),
                Joined::Follower(rx) => followers.push(rx),
            }
        }
        assert_eq!((leaders.len(), followers.len()), (1, 7));
        assert!(matches!(f.join(&8), Joined::Leader(..)), "another key");
        let tx = leaders.pop().expect("leader");
        tx.send_modify(|p| {
            p.phase = Phase::Running;
            p.total = 10;
            p.written = 4;
        });
        for rx in &followers {
            assert_eq!(rx.borrow().visible_until(WHOLE), 4);
        }
        tx.send_modify(|p| p.written = 10);
        assert_eq!(
            followers[0].borrow().visible_until(WHOLE),
            9,
            "last byte held back"
        );
        let range_end = 5;
        assert_eq!(
            followers[0].borrow().visible_until(range_end),
            4,
            "a range's last byte held back until the whole blob matched"
        );
        tx.send_modify(|p| p.phase = Phase::Done);
        assert_eq!(followers[0].borrow().visible_until(WHOLE), 10);
        assert_eq!(followers[0].borrow().visible_until(range_end), 5);
        f.end(&7);
        assert!(matches!(f.join(&7), Joined::Leader(..)), "a new fetch");
    }

    #[test]
    fn failure_reaches_every_waiter_and_a_dead_leader_is_replaced() {
        let f: Flights<&str> = Flights::default();
        let Joined::Leader(tx, _) = f.join(&"a") else {
            panic!("leader")
        };
        let Joined::Follower(rx) = f.join(&"a") else {
            panic!("follower")
        };
        tx.send_modify(|p| p.phase = Phase::Failed(Failure::Unavailable("cut".into())));
        assert_eq!(rx.borrow().visible_until(WHOLE), 0);
        assert_eq!(
            rx.borrow().phase,
            Phase::Failed(Failure::Unavailable("cut".into()))
        );
        // The leader vanished without `end` (a panic): the next joiner leads.
        drop(tx);
        assert!(matches!(f.join(&"a"), Joined::Leader(..)));
        assert_eq!(f.len(), 1);
    }
}
