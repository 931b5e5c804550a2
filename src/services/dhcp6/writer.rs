//! The binding-file writer: the "on disk before the reply" promise for
//! pool bindings, the same group commit as the DHCPv4 lease writer.
//!
//! The socket loop decides a batch under the table lock; replies that must
//! wait ([`Durability::BeforeReply`]) are handed to [`Writer::hold`] while
//! the lock is held, tagged with a new generation. The writer snapshots
//! (file, unsynced marks, generation) under the same lock, so a snapshot of
//! generation `g` covers every batch tagged `≤ g`. After a successful write
//! the replies tagged `≤ g` leave; after a failed one they are dropped (the
//! clients retry and their next request is written again), the unsynced
//! marks go back and the writer stays dirty. Lazy changes only set `dirty`;
//! the socket loop wakes the writer for them within a second.
//!
//! Lock order: the table, then the writer state.
//!
//! [`Durability::BeforeReply`]: super::reply::Durability::BeforeReply

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

use super::bindings::BindingFile;
use super::{Pending, Shared, send_all, store};
use crate::runtime::sync::LockExt as _;

/// How the file is written (tests inject failures).
pub(super) type SaveFn = Arc<dyn Fn(&Path, &BindingFile) -> anyhow::Result<()> + Send + Sync>;

#[derive(Default)]
struct WriterState {
    generation: u64,
    dirty: bool,
    held: Vec<(u64, Pending)>,
}

pub(super) struct Writer {
    wake: Notify,
    state: Mutex<WriterState>,
    save: SaveFn,
}

impl Writer {
    pub(super) fn new(save: SaveFn) -> Writer {
        Writer {
            wake: Notify::new(),
            state: Mutex::new(WriterState::default()),
            save,
        }
    }

    fn state(&self) -> MutexGuard<'_, WriterState> {
        self.state.locked()
    }

    /// Hold `replies` until their batch is on disk (call with the table
    /// locked, then [`Writer::wake`]).
    pub(super) fn hold(&self, replies: Vec<Pending>) {
        let mut st = self.state();
        st.generation += 1;
        let g = st.generation;
        st.held.extend(replies.into_iter().map(|p| (g, p)));
    }

    pub(super) fn mark_dirty(&self) {
        self.state().dirty = true;
    }

    pub(super) fn wake(&self) {
        self.wake.notify_one();
    }

    pub(super) fn wake_if_dirty(&self) {
        if self.state().dirty {
            self.wake.notify_one();
        }
    }

    /// Write until `shutdown`, then once more and return.
    pub(super) async fn run(
        self: Arc<Self>,
        shared: Arc<Shared>,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()> {
        let mut written = 0u64;
        loop {
            let closing = tokio::select! {
                _ = self.wake.notified() => false,
                _ = shutdown.cancelled() => true,
            };
            let pending = {
                let st = self.state();
                st.generation > written || st.dirty
            };
            if pending {
                let (generation, file, covered) = {
                    let mut t = shared.table();
                    let mut st = self.state();
                    st.dirty = false;
                    (st.generation, t.to_file(), t.take_unsynced())
                };
                let ok = self.write(&shared, file).await;
                let due: Vec<Pending> = {
                    let mut st = self.state();
                    if !ok {
                        st.dirty = true;
                    }
                    let (due, keep) = std::mem::take(&mut st.held)
                        .into_iter()
                        .partition(|(g, _)| *g <= generation);
                    st.held = keep;
                    due.into_iter().map(|(_, p)| p).collect()
                };
                written = generation;
                if ok {
                    if let Some(socket) = shared.socket.load_full() {
                        send_all(&socket, &shared, due).await;
                    }
                } else {
                    shared.table().restore_unsynced(covered);
                    if !due.is_empty() {
                        warn!(
                            "dhcp6: {} Reply(s) withheld: the binding file could not be written",
                            due.len()
                        );
                    }
                }
                if self.state().generation > written {
                    self.wake.notify_one();
                }
            }
            if closing {
                return Ok(());
            }
        }
    }

    async fn write(&self, shared: &Arc<Shared>, file: BindingFile) -> bool {
        let path = shared.binding_file.clone();
        let save = self.save.clone();
        let res = tokio::task::spawn_blocking(move || save(&path, &file)).await;
        let c = &shared.counters;
        match res {
            Ok(Ok(())) => {
                c.persists.fetch_add(1, Ordering::Relaxed);
                true
            }
            Ok(Err(e)) => {
                c.persist_errors.fetch_add(1, Ordering::Relaxed);
                error!(
                    "cannot write the DHCPv6 binding file {}: {e:#}; withholding pool Replies until it works",
                    shared.binding_file.display()
                );
                false
            }
            Err(e) => {
                c.persist_errors.fetch_add(1, Ordering::Relaxed);
                error!("binding file writer failed: {e}");
                false
            }
        }
    }
}

/// The real write.
pub(super) fn real_save() -> SaveFn {
    Arc::new(|path: &Path, file: &BindingFile| store::save(path, file))
}
