//! Day-2 workers' ignition (issue #37 item 6). With a `csr:` section, a
//! worker is served the cluster's current worker pointer config (the
//! Secret `openshift-machine-api/worker-user-data-managed`, read by the
//! CSR approver into the shared `runtime::workerign` handle) instead of
//! `worker.ign`, which `openshift-install` wrote once: its CA bundle goes
//! stale when the cluster rotates it, and a node served it is never
//! accepted.
//!
//! What answers a worker: its own `<node>.ign` when that file exists
//! (verbatim, as always); else the secret's `userData`, with the hostname
//! merge of any worker for `/ignition/<node>.ign` and verbatim for
//! `/ignition/worker.ign`; else (the secret cannot be read) `worker.ign`,
//! with a warning logged once per reason (the reason and the 24-h warning
//! are in `/status` `csr.workerIgnition`).
//!
//! Invariant: a request waits at most `workerign::WAIT` for a fresh read
//! of the secret, never on the API server itself.

use std::sync::Mutex;

use tracing::{error, warn};

use super::igncache::{self, IgnBody};
use super::ignition::Target;
use super::ignmerge::FileEntry;
use crate::model::cluster::{Cluster, Role};
use crate::runtime::sync::LockExt as _;
use crate::runtime::workerign::{Current, MAX_AGE, WAIT, WorkerIgnition};

/// The source, as the fetch log and `/status` name it.
const SECRET: &str = "secret worker-user-data-managed";

pub(super) struct Day2 {
    shared: std::sync::Arc<WorkerIgnition>,
    /// The last fallback reason logged (one warning per reason).
    logged: Mutex<Option<String>>,
}

impl Day2 {
    pub(super) fn new(shared: std::sync::Arc<WorkerIgnition>) -> Day2 {
        Day2 {
            shared,
            logged: Mutex::new(None),
        }
    }

    /// The body for `t` from the cluster's worker pointer config, when `t`
    /// is a worker's and `csr:` is configured; `None`: serve the files.
    pub(super) async fn worker_body(&self, c: &Cluster, t: &Target, file: &str) -> Option<IgnBody> {
        c.csr.as_ref()?;
        let added = match t {
            Target::Role(Role::Worker) => Vec::new(),
            Target::Node {
                node,
                role: Role::Worker,
                hostname,
                keyfile,
            } => {
                let own = c.http.ignition_dir.join(format!("{node}.ign"));
                if tokio::fs::try_exists(&own).await.unwrap_or(true) {
                    return None;
                }
                let mut added = vec![FileEntry::hostname(hostname)];
                added.extend(keyfile.iter().cloned());
                added
            }
            _ => return None,
        };
        match self.shared.current(MAX_AGE, WAIT).await {
            Current::Secret(raw) => match igncache::of_bytes(raw, &added, SECRET) {
                Ok(body) => Some(body),
                Err(e) => {
                    error!("ignition {file}: {e}; serving worker.ign");
                    None
                }
            },
            Current::Fallback(why) => {
                let why = why.to_string();
                let mut logged = self.logged.locked();
                if logged.as_deref() != Some(why.as_str()) {
                    warn!(
                        "ignition {file}: serving worker.ign, not the cluster's current worker pointer config: {why}"
                    );
                    *logged = Some(why);
                }
                None
            }
        }
    }
}
