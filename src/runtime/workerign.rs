//! The cluster's current worker pointer config (issue #37 item 6, the
//! day-2 join), shared between the CSR approver, which reads it from the
//! Secret `openshift-machine-api/worker-user-data-managed`, and the HTTP
//! service, which serves it to workers instead of `worker.ign`. `serve`
//! creates one [`WorkerIgnition`] and hands it to both (no service imports
//! another).
//!
//! Invariants:
//! - A reader asks ([`WorkerIgnition::current`]) with a freshness bound and
//!   a wait bound: a copy read within `max_age` is answered at once; else
//!   the approver is asked to read again and the reader waits at most
//!   `wait`, never longer, whatever the API server does.
//! - A read that failed (no secret, no right, not an Ignition config) is a
//!   [`Current::Fallback`] with its reason ([`Fallback`]): the caller
//!   serves `worker.ign`. The reason is kept as the approver's text (the
//!   kit does not know the service's error type).
//!   A read still running when the wait ends answers the last outcome: a
//!   copy read earlier (the pointer config changes only when the
//!   cluster's CA does), or the fallback when there is none or the last
//!   read failed.
//! - Only the approver writes ([`WorkerIgnition::store`]); nothing here
//!   does I/O.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{Notify, watch};

use crate::runtime::sync::LockExt as _;

/// A worker's ignition request has the secret read again when the copy
/// is older than this.
pub const MAX_AGE: Duration = Duration::from_secs(10);
/// How long a worker's ignition request waits for that read.
pub const WAIT: Duration = Duration::from_secs(3);

/// What a reader gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Current {
    /// The secret's `userData` (an Ignition config).
    Secret(Bytes),
    /// Serve `worker.ign`: why the secret is not used.
    Fallback(Fallback),
}

/// Why workers are served `worker.ign` rather than the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fallback {
    /// The last read failed: the approver's reason, as it logged it.
    #[error("{0}")]
    ReadFailed(String),
    /// No read has ended yet, and none within the reader's wait.
    #[error("the secret was not read within {0:?} (the API server is slow or unreachable)")]
    NotReadWithin(Duration),
}

#[derive(Default)]
struct State {
    /// The last read's outcome and when it ended.
    last: Option<(Result<Bytes, Fallback>, Instant)>,
}

/// The handle `serve` shares (see the module doc).
pub struct WorkerIgnition {
    state: Mutex<State>,
    /// Readers ask the approver for a new read.
    wanted: Notify,
    /// Bumped by every store: readers wait on it.
    reads: watch::Sender<u64>,
}

impl Default for WorkerIgnition {
    fn default() -> Self {
        WorkerIgnition {
            state: Mutex::default(),
            wanted: Notify::new(),
            reads: watch::Sender::new(0),
        }
    }
}

impl WorkerIgnition {
    /// The secret's body when read within `max_age`; else ask for a read
    /// and wait for it at most `wait` (see the module doc).
    pub async fn current(&self, max_age: Duration, wait: Duration) -> Current {
        if let Some(c) = self.fresh(max_age) {
            return c;
        }
        let mut rx = self.reads.subscribe();
        rx.mark_unchanged();
        // A read may have ended between the look and the subscription.
        if let Some(c) = self.fresh(max_age) {
            return c;
        }
        self.wanted.notify_one();
        let _ = tokio::time::timeout(wait, rx.changed()).await;
        match &self.state.locked().last {
            Some((Ok(body), _)) => Current::Secret(body.clone()),
            Some((Err(why), _)) => Current::Fallback(why.clone()),
            None => Current::Fallback(Fallback::NotReadWithin(wait)),
        }
    }

    /// The last outcome if it is younger than `max_age`.
    fn fresh(&self, max_age: Duration) -> Option<Current> {
        let st = self.state.locked();
        let (res, at) = st.last.as_ref()?;
        (at.elapsed() < max_age).then(|| match res {
            Ok(body) => Current::Secret(body.clone()),
            Err(why) => Current::Fallback(why.clone()),
        })
    }

    /// The approver: wait until a reader wants a new read.
    pub async fn wanted(&self) {
        self.wanted.notified().await;
    }

    /// The approver: the outcome of a read (a failure kept as its text).
    pub fn store<E: std::fmt::Display>(&self, res: Result<Bytes, E>) {
        let res = res.map_err(|e| Fallback::ReadFailed(e.to_string()));
        self.state.locked().last = Some((res, Instant::now()));
        self.reads.send_modify(|n| *n += 1);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const LONG: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn a_fresh_copy_is_answered_without_a_read() {
        let w = WorkerIgnition::default();
        w.store(Ok::<_, &str>(Bytes::from_static(b"{}")));
        let got = w.current(LONG, Duration::from_millis(1)).await;
        assert_eq!(got, Current::Secret(Bytes::from_static(b"{}")));
    }

    #[tokio::test]
    async fn a_stale_copy_asks_for_a_read_and_takes_its_outcome() {
        let w = Arc::new(WorkerIgnition::default());
        w.store(Ok::<_, &str>(Bytes::from_static(b"old")));
        let reader = w.clone();
        let approver = tokio::spawn(async move {
            reader.wanted().await;
            reader.store(Err("secret not found"));
        });
        let got = w.current(Duration::ZERO, LONG).await;
        assert_eq!(
            got,
            Current::Fallback(Fallback::ReadFailed("secret not found".into()))
        );
        approver.await.unwrap();
    }

    #[tokio::test]
    async fn a_slow_read_answers_the_last_outcome() {
        let w = WorkerIgnition::default();
        let got = w.current(LONG, Duration::from_millis(20)).await;
        let Current::Fallback(why) = got else {
            panic!("{got:?}")
        };
        assert_eq!(
            why.to_string(),
            "the secret was not read within 20ms (the API server is slow or unreachable)"
        );
        w.store(Ok::<_, &str>(Bytes::from_static(b"good")));
        let got = w.current(Duration::ZERO, Duration::from_millis(20)).await;
        assert_eq!(got, Current::Secret(Bytes::from_static(b"good")));
        w.store(Err("forbidden"));
        // Failed, and no read since: the failure stands (not the old copy).
        let got = w.current(Duration::ZERO, Duration::from_millis(20)).await;
        assert_eq!(
            got.clone(),
            Current::Fallback(Fallback::ReadFailed("forbidden".into()))
        );
        let Current::Fallback(why) = got else {
            panic!("{got:?}")
        };
        assert_eq!(why.to_string(), "forbidden");
    }
}
