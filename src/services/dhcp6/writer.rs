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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::dhcp6::bindings::{Scope, Table};
    use crate::services::dhcp6::status::Counters;
    use arc_swap::ArcSwapOption;
    use dhcproto::v6::MessageType;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;
    use tokio::net::UdpSocket;

    fn pending(text: &str, to: std::net::SocketAddr) -> Pending {
        Pending {
            bytes: text.as_bytes().to_vec(),
            to,
            kind: MessageType::Reply,
        }
    }

    /// Held replies leave only after a write that covers them succeeded
    /// (the save fails every other call, the first fails).
    #[tokio::test]
    async fn held_replies_wait_for_a_successful_write() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c2 = calls.clone();
        let save: SaveFn = Arc::new(move |_: &Path, _: &BindingFile| {
            if c2.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
                anyhow::bail!("disk full (test)")
            }
            Ok(())
        });
        let server = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let to = client.local_addr().unwrap();
        let scope = Scope {
            prefix: "fd00::".parse().unwrap(),
            prefix_len: 64,
            pool: None,
            reserved: Default::default(),
            lease_time: 60,
        };
        let shared = Arc::new(Shared {
            table: Mutex::new(Table::new(scope)),
            counters: Counters::default(),
            socket: ArcSwapOption::new(Some(server)),
            bound: Mutex::new(None),
            binding_file: "/nonexistent/b6.json".into(),
            ra: ArcSwapOption::empty(),
        });
        let writer = Arc::new(Writer::new(save));
        let stop = CancellationToken::new();
        let task = tokio::spawn(writer.clone().run(shared.clone(), stop.clone()));
        let recv = |ms| {
            let client = &client;
            async move {
                let mut buf = [0u8; 64];
                match tokio::time::timeout(Duration::from_millis(ms), client.recv(&mut buf)).await {
                    Ok(Ok(n)) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
                    _ => None,
                }
            }
        };
        writer.hold(vec![pending("first", to)]);
        writer.wake();
        assert_eq!(recv(300).await, None, "sent although its write failed");
        assert!(writer.state().dirty);
        writer.hold(vec![pending("second", to)]);
        writer.wake();
        assert_eq!(recv(2000).await.as_deref(), Some("second"));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        stop.cancel();
        task.await.unwrap().unwrap();
        assert_eq!(shared.counters.persists.load(Ordering::SeqCst), 1);
        assert_eq!(shared.counters.persist_errors.load(Ordering::SeqCst), 1);
    }
}
