//! The install timeline's registry steps, recorded by the registry: a
//! node's first request is `pulling` (recorded with that request,
//! [`Pulls::first_request`]); `pulled` once it pulled blobs and then asked
//! nothing for [`PULL_QUIET_SECS`] ([`Pulls::watch`]).
//!
//! Invariants: each step is recorded once per client row (the timeline
//! keeps a step's first time, so a later one would change nothing);
//! `pulled` is the absence of requests, the one step a timer decides: the
//! watch sleeps until the earliest row that pulled blobs could have been
//! quiet long enough, is woken when a row pulls its first blob byte, and
//! reads the rows' times again when it wakes (a request since moves the
//! deadline). `pulled`'s time is the row's latest request before the quiet
//! (a blob still streaming counts as a request).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::status::{ClientRow, Stats};
use crate::timeline::{Event, Events, PULL_QUIET_SECS};

/// What the registry tells the install timeline.
pub(super) struct Pulls {
    events: Events,
    /// Seconds without a request after which a node pulled.
    quiet: u64,
}

impl Pulls {
    /// `quiet`: the test hook replacing [`PULL_QUIET_SECS`], if any (a
    /// `test-hooks` build's `runtime::faults::PULL_QUIET_ENV`: a registry
    /// test does not wait a minute; always `None` in the shipped binary).
    pub(super) fn new(events: Events, quiet: Option<u64>) -> Pulls {
        Pulls {
            events,
            quiet: quiet.unwrap_or(PULL_QUIET_SECS),
        }
    }

    /// `node`'s first request, at `at` (Unix seconds).
    pub(super) fn first_request(&self, node: String, at: u64) {
        self.events.record(Event::RegistryPulling { node, at });
    }

    /// Record `pulled` for each node row of `stats` once it has been quiet
    /// long enough, until `stop`.
    pub(super) async fn watch(
        self: Arc<Self>,
        stats: Arc<Stats>,
        stop: CancellationToken,
    ) -> anyhow::Result<()> {
        let mut told: HashSet<String> = HashSet::new();
        loop {
            let now = crate::runtime::clock::unix_now();
            let (due, next) = quiet_rows(&stats.node_rows(), &told, now, self.quiet);
            for (client, ev) in due {
                told.insert(client);
                self.events.record(ev);
            }
            let wait = next.map(|t| Duration::from_secs(t.saturating_sub(now).max(1)));
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                _ = stats.first_blob.notified() => {}
                _ = sleep_or_never(wait) => {}
            }
        }
    }
}

async fn sleep_or_never(wait: Option<Duration>) {
    match wait {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// The node rows not `told` yet that pulled blobs and were quiet for
/// `quiet` seconds at `now` (their client and `pulled` event), and the
/// earliest time another could be (Unix seconds).
fn quiet_rows(
    rows: &[ClientRow],
    told: &HashSet<String>,
    now: u64,
    quiet: u64,
) -> (Vec<(String, Event)>, Option<u64>) {
    let mut due = Vec::new();
    let mut next: Option<u64> = None;
    for r in rows
        .iter()
        .filter(|r| r.blob_bytes > 0 && !told.contains(&r.client))
    {
        let Some(node) = r.node.clone() else { continue };
        let at = r.latest_request.saturating_add(quiet);
        if now >= at {
            let ev = Event::RegistryPulled {
                node,
                at: r.latest_request,
            };
            due.push((r.client.clone(), ev));
        } else {
            next = Some(next.map_or(at, |n| n.min(at)));
        }
    }
    (due, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(node: Option<&str>, latest: u64, blob_bytes: u64) -> ClientRow {
        ClientRow {
            client: "10.9.0.10".into(),
            node: node.map(str::to_string),
            first_request: 100,
            latest_request: latest,
            requests: 3,
            bytes_pulled: blob_bytes + 10,
            blob_bytes,
        }
    }

    #[test]
    fn a_node_pulled_after_a_quiet_minute_told_once() {
        let mut told = HashSet::new();
        let q = PULL_QUIET_SECS;
        let rows = [row(Some("master-0"), 150, 5000)];
        assert_eq!(
            quiet_rows(&rows, &told, 209, q),
            (vec![], Some(210)),
            "59 s quiet"
        );
        let (due, next) = quiet_rows(&rows, &told, 210, q);
        let pulled = Event::RegistryPulled {
            node: "master-0".into(),
            at: 150,
        };
        assert_eq!(
            (due.clone(), next),
            (vec![("10.9.0.10".into(), pulled)], None)
        );
        told.insert(due[0].0.clone());
        assert_eq!(quiet_rows(&rows, &told, 999, q), (vec![], None), "once");
        // Manifests only (no blob byte): never pulled; not a node: nothing.
        let none = HashSet::new();
        assert_eq!(
            quiet_rows(&[row(Some("master-0"), 150, 0)], &none, 999, q),
            (vec![], None)
        );
        assert_eq!(
            quiet_rows(&[row(None, 150, 5000)], &none, 999, q),
            (vec![], None)
        );
    }

    /// Through the watch on tokio's paused clock is not possible (the rows
    /// hold Unix seconds), so with a one-second quiet on the real clock:
    /// `pulling` with the first request, `pulled` once, after the quiet.
    #[tokio::test]
    async fn the_watch_records_pulling_then_pulled_once() {
        use crate::config::fixture::{MASTER_0, plan};
        let p = plan(&[MASTER_0], "");
        let events = crate::timeline::Recorder::new(&p);
        events.recorded();
        let pulls = Arc::new(Pulls {
            events: events.clone(),
            quiet: 1,
        });
        let stats = Arc::new(Stats::default());
        let stop = CancellationToken::new();
        let task = tokio::spawn(pulls.clone().watch(stats.clone(), stop.clone()));
        let ip = "10.9.0.10".parse().unwrap();
        if let Some(at) = stats.request(ip, Some("master-0"), 700) {
            pulls.first_request("master-0".into(), at);
        }
        assert!(
            stats.request(ip, Some("master-0"), 0).is_none(),
            "not the first"
        );
        stats.sent(ip, 5000);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while seen.len() < 2 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            seen.extend(events.recorded());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        seen.extend(events.recorded());
        stop.cancel();
        task.await.unwrap().unwrap();
        let kinds: Vec<&str> = seen
            .iter()
            .map(|e| match e {
                Event::RegistryPulling { .. } => "pulling",
                Event::RegistryPulled { .. } => "pulled",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["pulling", "pulled"], "{seen:?}");
        let row = &events.view().nodes[0];
        assert!(
            row.pulling.is_some() && row.pulled >= row.pulling,
            "{row:?}"
        );
    }
}
