//! Group commit of a state file: the "on disk before the reply" promise
//! that the DHCPv4 lease file and the DHCPv6 binding file share.
//!
//! A service's socket loop decides each datagram under its table lock; a
//! batch whose changes must be durable before their replies hands those
//! replies to [`Writer::hold`] *while still holding the table lock*, which
//! tags them with a new generation. The writer takes its snapshot (file
//! contents, unsynced marks, generation) under the same lock
//! (`snapshot`), so a snapshot of generation `g` contains every
//! change of every batch tagged `≤ g`. After a successful write it sends the
//! replies tagged `≤ g`; after a failed one it drops them (the clients
//! retry, and their next request is written again), puts the unsynced marks
//! back ([`Table::restore_unsynced`]) and stays dirty. Lazy changes only set `dirty`
//! ([`Writer::mark_dirty`]); the socket loop wakes the writer for them
//! within a second ([`Writer::wake_if_dirty`]; the socket loop's wait,
//! [`Ticks`], does that and the table's GC).
//!
//! Lock order: the host's table, then the writer state — never the other
//! way.
//!
//! What differs between services is the [`Host`]: the table, the file type,
//! the reply type and how replies leave, the counters, and the wording of
//! the log lines ([`Labels`]). The save function is injected ([`SaveFn`]) so
//! that tests can make writes fail.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::Notify;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

use crate::runtime::sync::LockExt as _;

/// How the file is written (the real one is the service's store; tests
/// inject failures).
pub type SaveFn<F> = Arc<dyn Fn(&Path, &F) -> anyhow::Result<()> + Send + Sync>;

/// The service-specific words of the writer's log lines.
pub struct Labels {
    /// Prefix of the withheld-replies warning (`dhcp`).
    pub service: &'static str,
    /// The replies, counted (`ACK(s)`).
    pub replies: &'static str,
    /// The file, short (`lease file`).
    pub file: &'static str,
    /// The file, in the write-error line (`DHCP lease file`).
    pub file_long: &'static str,
    /// What is withheld while writes fail (`ACKs`).
    pub withheld: &'static str,
}

/// The table a writer persists (the DHCPv4 lease table, the DHCPv6
/// binding table): its file form, and the marks of the records no write has
/// covered yet.
pub trait Table: Send {
    /// The file's contents, written on the blocking pool.
    type File: Send + 'static;
    /// The unsynced marks a snapshot takes (put back after a failed write).
    type Marks: Send;
    /// The whole table as the file holds it.
    fn to_file(&self) -> Self::File;
    /// Take the marks of the records changed since the last snapshot.
    fn take_unsynced(&mut self) -> Self::Marks;
    /// Put the marks of a failed write back.
    fn restore_unsynced(&mut self, marks: Self::Marks);
}

/// What a service gives the writer: its table (behind the lock the socket
/// loop decides under), how replies leave, where the file lives, the two
/// write counters and the wording of the log lines.
pub trait Host: Send + Sync + 'static {
    type Table: Table;
    /// A reply held until its batch is on disk.
    type Reply: Send + 'static;
    /// The wording of the log lines.
    const LABELS: Labels;

    /// Lock the table (lock order: the table, then the writer state).
    fn table(&self) -> MutexGuard<'_, Self::Table>;
    /// Send replies whose write succeeded.
    fn send(&self, replies: Vec<Self::Reply>) -> impl Future<Output = ()> + Send;
    /// Where the file lives.
    fn path(&self) -> PathBuf;
    /// The counters of writes: `(succeeded, failed)`.
    fn write_counters(&self) -> (&AtomicU64, &AtomicU64);
}

/// The file type of a host's table.
type FileOf<H> = <<H as Host>::Table as Table>::File;

/// Lock the table, run `under_lock` (which takes the writer state: lock
/// order), snapshot the file and take the unsynced marks.
fn snapshot<H: Host, T>(
    host: &H,
    under_lock: impl FnOnce() -> T,
) -> (T, FileOf<H>, <H::Table as Table>::Marks) {
    let mut t = host.table();
    let r = under_lock();
    (r, t.to_file(), t.take_unsynced())
}

/// The real save function: a service's store `save` as a [`SaveFn`].
pub fn save_with<F: 'static>(save: fn(&Path, &F) -> anyhow::Result<()>) -> SaveFn<F> {
    Arc::new(save)
}

/// The writer's state. A std `Mutex`, not a tokio one: it is held for a few
/// field updates and never across an `.await` (mini-redis `src/db.rs`
/// explains the choice), and the socket loop takes it while it holds the
/// table's std `Mutex`.
struct WriterState<R> {
    /// Bumped for every batch with changes that must be on disk before
    /// their replies.
    generation: u64,
    /// Changes not on disk yet that no reply waits for.
    dirty: bool,
    /// Replies waiting for the write of their generation.
    held: Vec<(u64, R)>,
}

pub struct Writer<H: Host> {
    wake: Notify,
    state: Mutex<WriterState<H::Reply>>,
    save: SaveFn<FileOf<H>>,
}

impl<H: Host> Writer<H> {
    pub fn new(save: SaveFn<FileOf<H>>) -> Writer<H> {
        Writer {
            wake: Notify::new(),
            state: Mutex::new(WriterState {
                generation: 0,
                dirty: false,
                held: Vec::new(),
            }),
            save,
        }
    }

    fn state(&self) -> MutexGuard<'_, WriterState<H::Reply>> {
        self.state.locked()
    }

    /// Whether changes wait that no successful write covered yet.
    pub fn is_dirty(&self) -> bool {
        self.state().dirty
    }

    /// Hold `replies` until the batch they belong to is on disk. Call with
    /// the table locked, after the batch's changes; then [`Writer::wake`].
    pub fn hold(&self, replies: Vec<H::Reply>) {
        let mut st = self.state();
        st.generation += 1;
        let g = st.generation;
        st.held.extend(replies.into_iter().map(|p| (g, p)));
    }

    /// Note a change that must be written soon but holds no reply.
    pub fn mark_dirty(&self) {
        self.state().dirty = true;
    }

    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Wake the writer if lazy changes wait (the socket loop's 1 s tick).
    pub fn wake_if_dirty(&self) {
        if self.state().dirty {
            self.wake.notify_one();
        }
    }

    /// Write until `shutdown`, then once more and return.
    pub async fn run(
        self: Arc<Self>,
        host: Arc<H>,
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
                let (generation, file, covered) = snapshot(&*host, || {
                    let mut st = self.state();
                    st.dirty = false;
                    st.generation
                });
                let ok = self.write(&host, file).await;
                let due: Vec<H::Reply> = {
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
                    host.send(due).await;
                } else {
                    host.table().restore_unsynced(covered);
                    if !due.is_empty() {
                        let l = &H::LABELS;
                        warn!(
                            "{}: {} {} withheld: the {} could not be written",
                            l.service,
                            due.len(),
                            l.replies,
                            l.file
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

    /// Write the file on the blocking pool. True on success.
    async fn write(&self, host: &Arc<H>, file: FileOf<H>) -> bool {
        let path = host.path();
        let save = self.save.clone();
        let res = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || save(&path, &file)).await
        };
        let l = &H::LABELS;
        let ok = match res {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                error!(
                    "cannot write the {} {}: {e:#}; withholding {} until it works",
                    l.file_long,
                    path.display(),
                    l.withheld
                );
                false
            }
            Err(e) => {
                error!("{} writer failed: {e}", l.file);
                false
            }
        };
        let (written, failed) = host.write_counters();
        (if ok { written } else { failed }).fetch_add(1, Ordering::Relaxed);
        ok
    }
}

/// The socket loop's wait between batches, with the table's housekeeping:
/// every `gc_every` the table's GC runs (a lazy change if it removed
/// anything), every `flush_every` the writer is woken if lazy changes
/// wait. Create once per socket loop (the intervals keep their phase).
pub struct Ticks {
    gc: tokio::time::Interval,
    flush: tokio::time::Interval,
}

impl Ticks {
    pub fn new(gc_every: Duration, flush_every: Duration) -> Ticks {
        let mut gc = tokio::time::interval(gc_every);
        gc.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut flush = tokio::time::interval(flush_every);
        flush.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Ticks { gc, flush }
    }

    /// Wait until `socket` is readable (true) or `shutdown` (false), doing
    /// the housekeeping meanwhile; `gc` returns whether it changed the
    /// table. A readiness error is logged and retried after 50 ms.
    pub async fn readable<H: Host>(
        &mut self,
        writer: &Writer<H>,
        socket: &UdpSocket,
        shutdown: &CancellationToken,
        mut gc: impl FnMut() -> bool,
    ) -> bool {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                _ = self.gc.tick() => {
                    if gc() {
                        writer.mark_dirty();
                    }
                }
                _ = self.flush.tick() => writer.wake_if_dirty(),
                r = socket.readable() => match r {
                    Ok(()) => return true,
                    Err(e) => {
                        warn!("{} socket: {e}", H::LABELS.service);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use tokio::sync::mpsc;

    /// A table of numbers, written as a list; replies are strings sent on
    /// a channel.
    struct Fake {
        table: Mutex<FakeTable>,
        sent: mpsc::UnboundedSender<String>,
        persists: AtomicU64,
        persist_errors: AtomicU64,
    }

    /// The numbers and their unsynced marks.
    type FakeTable = (Vec<u32>, HashSet<u32>);

    impl Table for FakeTable {
        type File = Vec<u32>;
        type Marks = HashSet<u32>;
        fn to_file(&self) -> Vec<u32> {
            self.0.clone()
        }
        fn take_unsynced(&mut self) -> HashSet<u32> {
            std::mem::take(&mut self.1)
        }
        fn restore_unsynced(&mut self, marks: HashSet<u32>) {
            self.1.extend(marks);
        }
    }

    impl Host for Fake {
        type Table = FakeTable;
        type Reply = String;
        const LABELS: Labels = Labels {
            service: "fake",
            replies: "reply(s)",
            file: "fake file",
            file_long: "fake state file",
            withheld: "replies",
        };
        fn table(&self) -> MutexGuard<'_, FakeTable> {
            self.table.locked()
        }
        async fn send(&self, replies: Vec<String>) {
            for r in replies {
                let _ = self.sent.send(r);
            }
        }
        fn path(&self) -> PathBuf {
            "/nonexistent/fake.json".into()
        }
        fn write_counters(&self) -> (&AtomicU64, &AtomicU64) {
            (&self.persists, &self.persist_errors)
        }
    }

    async fn recv(rx: &mut mpsc::UnboundedReceiver<String>, ms: u64) -> Option<String> {
        tokio::time::timeout(Duration::from_millis(ms), rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// Wait (at most 5 s) until `done`; a test failure naming `what` if
    /// it never is.
    async fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(tokio::time::Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A save that fails every other call (the first fails).
    #[tokio::test]
    async fn replies_leave_only_after_a_write_that_covers_them_succeeded() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c2 = calls.clone();
        let save: SaveFn<Vec<u32>> = Arc::new(move |_: &Path, _: &Vec<u32>| {
            if c2.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
                anyhow::bail!("disk full (test)")
            }
            Ok(())
        });
        let (tx, mut rx) = mpsc::unbounded_channel();
        let host = Arc::new(Fake {
            table: Mutex::new((vec![1], HashSet::from([1]))),
            sent: tx,
            persists: AtomicU64::new(0),
            persist_errors: AtomicU64::new(0),
        });
        let writer = Arc::new(Writer::<Fake>::new(save));
        let stop = CancellationToken::new();
        let task = tokio::spawn(writer.clone().run(host.clone(), stop.clone()));

        // Write 1 fails: the reply it covered is dropped, never sent, and
        // the unsynced marks go back.
        writer.hold(vec!["first".into()]);
        writer.wake();
        assert_eq!(
            recv(&mut rx, 300).await,
            None,
            "sent although its write failed"
        );
        until("write 1 ran", || calls.load(Ordering::SeqCst) == 1).await;
        // The save ran; the writer marks the failure after it returns (on
        // a loaded host, later than the 300 ms above).
        until(
            "a failed write leaves the table dirty, its marks back",
            || writer.is_dirty() && host.table.locked().1 == HashSet::from([1]),
        )
        .await;
        // Write 2 succeeds: its reply leaves.
        writer.hold(vec!["second".into()]);
        writer.wake();
        assert_eq!(recv(&mut rx, 2000).await.as_deref(), Some("second"));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(host.table.locked().1.is_empty());
        // A lazy change: write 3 fails, the writer stays dirty, write 4 works.
        writer.mark_dirty();
        writer.wake_if_dirty();
        until("write 3 ran", || calls.load(Ordering::SeqCst) == 3).await;
        until("write 3 failed: still dirty", || writer.is_dirty()).await;
        writer.wake_if_dirty();
        until("write 4 ran and cleaned", || {
            calls.load(Ordering::SeqCst) == 4 && !writer.is_dirty()
        })
        .await;
        // Two batches held before one write: both leave with it (write 5
        // fails and drops both; write 6 then covers two new ones).
        writer.hold(vec!["a".into()]);
        writer.hold(vec!["b".into()]);
        writer.wake();
        assert_eq!(recv(&mut rx, 300).await, None);
        until("write 5 ran", || calls.load(Ordering::SeqCst) == 5).await;
        writer.hold(vec!["c".into()]);
        writer.hold(vec!["d".into()]);
        writer.wake();
        let mut got = vec![recv(&mut rx, 2000).await, recv(&mut rx, 2000).await];
        got.sort();
        assert_eq!(got, vec![Some("c".to_string()), Some("d".to_string())]);
        assert_eq!(recv(&mut rx, 200).await, None, "a dropped reply leaked");
        assert_eq!(host.persists.load(Ordering::SeqCst), 3);
        assert_eq!(host.persist_errors.load(Ordering::SeqCst), 3);
        stop.cancel();
        task.await.unwrap().unwrap();
    }

    fn fake() -> (Arc<Fake>, mpsc::UnboundedReceiver<String>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let host = Arc::new(Fake {
            table: Mutex::new((vec![], HashSet::new())),
            sent: tx,
            persists: AtomicU64::new(0),
            persist_errors: AtomicU64::new(0),
        });
        (host, rx)
    }

    /// The wait runs the GC on its interval (a change marks the writer
    /// dirty), returns true for a datagram and false on shutdown.
    #[tokio::test(start_paused = true)]
    async fn ticks_run_the_gc_and_return_on_a_datagram_or_shutdown() {
        let (_host, _rx) = fake();
        let writer = Writer::<Fake>::new(Arc::new(|_: &Path, _: &Vec<u32>| Ok(())));
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let stop = CancellationToken::new();
        let mut ticks = Ticks::new(Duration::from_secs(30), Duration::from_secs(1));
        let gcs = AtomicUsize::new(0);
        let gc = || gcs.fetch_add(1, Ordering::SeqCst) == 1;
        let waited = tokio::time::timeout(
            Duration::from_secs(45),
            ticks.readable(&writer, &socket, &stop, gc),
        )
        .await;
        assert!(waited.is_err(), "returned without a datagram");
        // The first tick is immediate, the second at 30 s (which changed
        // the table).
        assert_eq!(gcs.load(Ordering::SeqCst), 2);
        assert!(writer.is_dirty());
        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client.send_to(b"x", socket.local_addr().unwrap()).unwrap();
        assert!(ticks.readable(&writer, &socket, &stop, || false).await);
        let mut buf = [0u8; 4];
        socket.try_recv(&mut buf).unwrap();
        // Drained: this WouldBlock clears the readiness.
        assert!(socket.try_recv(&mut buf).is_err());
        stop.cancel();
        assert!(!ticks.readable(&writer, &socket, &stop, || false).await);
    }
}
