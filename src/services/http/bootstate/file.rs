//! The install state's file: its JSON form, the atomic write, the read at
//! start (a corrupt file kept aside as `<file>.corrupt`) and the writer task
//! that retries every [`RETRY`] while writes fail (the parent module's doc
//! says why every failure must end in `exit`, never in an install).
//!
//! Invariants: a write is temp file, fsync, rename, fsync of the directory,
//! and a failed attempt removes its temp file; the state lock is never held
//! across the write (the snapshot is taken, the lock dropped, the file
//! written on the blocking pool, then the result recorded).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use super::{BootState, NodeBoot, RELOG, RETRY};

#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct StateFile {
    version: u32,
    nodes: BTreeMap<String, NodeBoot>,
}

/// `<file>.tmp`: where a write goes before its rename.
pub(super) fn tmp_of(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// Write `bytes` to `path` atomically (temp file, fsync, rename, fsync of
/// the directory); a failed attempt removes its temp file.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = tmp_of(path);
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    let attempt = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        File::open(&dir)?.sync_all()
    };
    let res = attempt();
    if res.is_err() {
        // A full disk leaves an empty or partial temp file: never keep it.
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// What reading the file at start gave.
pub(super) enum Loaded {
    Nodes(BTreeMap<String, NodeBoot>),
    Missing,
    Unreadable(String),
}

pub(super) fn read_state(path: &Path) -> Loaded {
    match std::fs::read(path) {
        Ok(b) => match serde_json::from_slice::<StateFile>(&b) {
            Ok(f) => Loaded::Nodes(f.nodes),
            Err(e) => {
                // Kept for the operator; the assumed state replaces it.
                let mut kept = path.as_os_str().to_owned();
                kept.push(".corrupt");
                let kept = PathBuf::from(kept);
                let note = match std::fs::rename(path, &kept) {
                    Ok(()) => format!("kept as {}", kept.display()),
                    Err(re) => format!("cannot keep it as {}: {re}", kept.display()),
                };
                Loaded::Unreadable(format!("not valid JSON ({e}); {note}"))
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Loaded::Missing,
        Err(e) => Loaded::Unreadable(e.to_string()),
    }
}

impl BootState {
    /// Write whenever the state changes, retrying every [`RETRY`] while
    /// writes fail; on `shutdown`, one last attempt, then return.
    pub async fn run_writer(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut log = FailureLog::default();
        // What the load left to write (the safe state after an unreadable
        // file).
        self.write_pending(&mut log).await;
        loop {
            let failing = !self.durable() && self.inner().write_error.is_some();
            let closing = tokio::select! {
                _ = self.wake.notified() => false,
                _ = tokio::time::sleep(RETRY), if failing => false,
                _ = shutdown.cancelled() => true,
            };
            self.write_pending(&mut log).await;
            if closing {
                let left = self.store_status().unwritten_changes;
                if left > 0 {
                    error!(
                        "netboot state {} not written at shutdown: {left} change(s) lost; \
                         nodes that installed since the last write may install again",
                        self.path.display()
                    );
                }
                return Ok(());
            }
        }
    }

    /// Write the current state if it has unwritten changes.
    async fn write_pending(&self, log: &mut FailureLog) {
        let (changes, file) = {
            let st = self.inner();
            if st.durable() {
                return;
            }
            let file = StateFile {
                version: 1,
                nodes: st.nodes.clone(),
            };
            (st.changes, file)
        };
        let (path, save) = (self.path.clone(), self.save.clone());
        let res = tokio::task::spawn_blocking(move || {
            let mut body = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
            body.push(b'\n');
            save(&path, &body)
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        let mut st = self.inner();
        match res {
            Ok(()) => {
                st.written = st.written.max(changes);
                st.writes += 1;
                if st.write_error.take().is_some() {
                    info!(
                        "netboot state {} written after {} failed attempt(s): durable again",
                        self.path.display(),
                        log.failures
                    );
                }
                *log = FailureLog::default();
            }
            Err(e) => {
                st.write_failures += 1;
                let msg = e.to_string();
                log.failures += 1;
                if log.due(&msg) {
                    error!(
                        "cannot write the netboot state {}: {msg} ({} attempt(s)); the install \
                         state is NOT durable (a restart now would forget {} change(s)); \
                         retrying every {}s",
                        self.path.display(),
                        log.failures,
                        st.changes - st.written.min(st.changes),
                        RETRY.as_secs()
                    );
                }
                st.write_error = Some(msg);
            }
        }
    }
}

/// When to log a failing write again: at the first failure, when the error
/// changes, then every [`RELOG`].
#[derive(Default)]
struct FailureLog {
    failures: u64,
    last: Option<(Instant, String)>,
}

impl FailureLog {
    fn due(&mut self, msg: &str) -> bool {
        let now = Instant::now();
        let due = match &self.last {
            None => true,
            Some((at, m)) => m != msg || now.duration_since(*at) >= RELOG,
        };
        if due {
            self.last = Some((now, msg.to_string()));
        }
        due
    }
}
