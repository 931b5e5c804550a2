//! The lease-file writer: the "on disk before the ACK" promise.
//!
//! The socket loop decides each datagram under the table lock; a batch whose
//! changes must be durable before their replies ([`Durability::BeforeReply`])
//! hands those replies to [`Writer::hold`] *while still holding the table
//! lock*, which tags them with a new generation. The writer takes its
//! snapshot (file contents, unsynced records, generation) under the same
//! lock, so a snapshot of generation `g` contains every change of every
//! batch tagged `≤ g`. After a successful write it sends the replies tagged
//! `≤ g`; after a failed one it drops them (the clients retry, and their
//! next request is written again), puts the unsynced marks back and stays
//! dirty. Lazy changes ([`Durability::Lazy`]) only set `dirty`; the socket
//! loop wakes the writer for them within a second.
//!
//! Lock order: the table, then the writer state — never the other way.
//!
//! [`Durability::BeforeReply`]: super::reply::Durability::BeforeReply
//! [`Durability::Lazy`]: super::reply::Durability::Lazy

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

use super::leases::LeaseFile;
use super::{Pending, Shared, send_all, store};
use crate::runtime::sync::LockExt as _;

/// How the lease file is written (the real one is [`store::save`]; tests
/// inject failures).
pub(super) type SaveFn = Arc<dyn Fn(&Path, &LeaseFile) -> anyhow::Result<()> + Send + Sync>;

/// The writer's state. A std `Mutex`, not a tokio one: it is held for a few
/// field updates and never across an `.await` (mini-redis `src/db.rs`
/// explains the choice), and the socket loop takes it while it holds the
/// table's std `Mutex`.
#[derive(Default)]
struct WriterState {
    /// Bumped for every batch with changes that must be on disk before
    /// their replies.
    generation: u64,
    /// Changes not on disk yet that no reply waits for.
    dirty: bool,
    /// Replies waiting for the write of their generation.
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

    /// Hold `replies` until the batch they belong to is on disk. Call with
    /// the table locked, after the batch's changes; then [`Writer::wake`].
    pub(super) fn hold(&self, replies: Vec<Pending>) {
        let mut st = self.state();
        st.generation += 1;
        let g = st.generation;
        st.held.extend(replies.into_iter().map(|p| (g, p)));
    }

    /// Note a change that must be written soon but holds no reply.
    pub(super) fn mark_dirty(&self) {
        self.state().dirty = true;
    }

    pub(super) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Wake the writer if lazy changes wait (the socket loop's 1 s tick).
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
                            "dhcp: {} ACK(s) withheld: the lease file could not be written",
                            due.len()
                        );
                    }
                }
                // More work arrived during the write: go again.
                if self.state().generation > written {
                    self.wake.notify_one();
                }
            }
            if closing {
                return Ok(());
            }
        }
    }

    /// Write the lease file on the blocking pool. True on success.
    async fn write(&self, shared: &Arc<Shared>, file: LeaseFile) -> bool {
        let path = shared.lease_file.clone();
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
                    "cannot write the DHCP lease file {}: {e:#}; withholding ACKs until it works",
                    shared.lease_file.display()
                );
                false
            }
            Err(e) => {
                c.persist_errors.fetch_add(1, Ordering::Relaxed);
                error!("lease file writer failed: {e}");
                false
            }
        }
    }
}

/// The real lease-file write.
pub(super) fn real_save() -> SaveFn {
    Arc::new(|path: &Path, file: &LeaseFile| store::save(path, file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::dhcp::leases::{LeaseTable, Scope};
    use crate::services::dhcp::status::Counters;
    use arc_swap::ArcSwapOption;
    use dhcproto::v4::MessageType;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;
    use tokio::net::UdpSocket;

    fn pending(text: &str, to: std::net::SocketAddr) -> Pending {
        Pending {
            bytes: text.as_bytes().to_vec(),
            to,
            link: None,
            kind: MessageType::Ack,
        }
    }

    /// A save that fails every other call (the first fails).
    #[tokio::test]
    async fn replies_leave_only_after_a_write_that_covers_them_succeeded() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c2 = calls.clone();
        let save: SaveFn = Arc::new(move |_: &Path, _: &LeaseFile| {
            if c2.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
                anyhow::bail!("disk full (test)")
            }
            Ok(())
        });
        let server = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let to = client.local_addr().unwrap();
        let scope = Scope::new("127.0.20.0/24".parse().unwrap(), None, [], 3600);
        let shared = Arc::new(Shared {
            table: Mutex::new(LeaseTable::new(scope)),
            counters: Counters::default(),
            socket: ArcSwapOption::new(Some(server)),
            bound: Mutex::new(None),
            link: arc_swap::ArcSwapOption::empty(),
            lease_file: "/nonexistent/leases.json".into(),
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

        // Write 1 fails: the reply it covered is dropped, never sent.
        writer.hold(vec![pending("first", to)]);
        writer.wake();
        assert_eq!(recv(300).await, None, "sent although its write failed");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(
            writer.state().dirty,
            "a failed write leaves the table dirty"
        );
        // Write 2 succeeds: its reply leaves.
        writer.hold(vec![pending("second", to)]);
        writer.wake();
        assert_eq!(recv(2000).await.as_deref(), Some("second"));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // A lazy change: write 3 fails, the writer stays dirty, write 4 works.
        writer.mark_dirty();
        writer.wake_if_dirty();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert!(writer.state().dirty);
        writer.wake_if_dirty();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        assert!(!writer.state().dirty);
        // Two batches held before one write: both leave with it (write 5
        // fails and drops both; write 6 then covers two new ones).
        writer.hold(vec![pending("a", to)]);
        writer.hold(vec![pending("b", to)]);
        writer.wake();
        assert_eq!(recv(300).await, None);
        writer.hold(vec![pending("c", to)]);
        writer.hold(vec![pending("d", to)]);
        writer.wake();
        let mut got = vec![recv(2000).await, recv(2000).await];
        got.sort();
        assert_eq!(got, vec![Some("c".to_string()), Some("d".to_string())]);
        assert_eq!(recv(200).await, None, "a dropped reply leaked");
        assert_eq!(shared.counters.persists.load(Ordering::SeqCst), 3);
        assert_eq!(shared.counters.persist_errors.load(Ordering::SeqCst), 3);
        stop.cancel();
        task.await.unwrap().unwrap();
    }
}
