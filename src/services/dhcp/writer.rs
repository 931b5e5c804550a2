//! The lease-file writer: the "on disk before the ACK" promise, the
//! group commit of [`crate::runtime::groupcommit`] (generations, held
//! replies, lazy changes, lock order: the table, then the writer state)
//! over the lease table.
//!
//! The socket loop decides each datagram under the table lock; a batch whose
//! changes must be durable before their replies ([`Durability::BeforeReply`])
//! hands those replies to [`Writer::hold`] *while still holding the table
//! lock*; lazy changes ([`Durability::Lazy`]) only mark the writer dirty.
//!
//! [`Durability::BeforeReply`]: super::reply::Durability::BeforeReply
//! [`Durability::Lazy`]: super::reply::Durability::Lazy
//! [`Writer::hold`]: crate::runtime::groupcommit::Writer::hold

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::MutexGuard;
use std::sync::atomic::AtomicU64;

use super::leases::{LeaseFile, LeaseTable};
use super::{Pending, Shared, send_all, store};
use crate::runtime::groupcommit::{self, Host, Labels, Table};

/// How the file is written (the real one is [`store::save`]; tests inject
/// failures).
pub(super) type SaveFn = groupcommit::SaveFn<LeaseFile>;

/// The lease writer.
pub(super) type Writer = groupcommit::Writer<Shared>;

impl Table for LeaseTable {
    type File = LeaseFile;
    type Marks = HashSet<Ipv4Addr>;

    fn to_file(&self) -> LeaseFile {
        LeaseTable::to_file(self)
    }

    fn take_unsynced(&mut self) -> HashSet<Ipv4Addr> {
        LeaseTable::take_unsynced(self)
    }

    fn restore_unsynced(&mut self, marks: HashSet<Ipv4Addr>) {
        LeaseTable::restore_unsynced(self, marks)
    }
}

impl Host for Shared {
    type Table = LeaseTable;
    type Reply = Pending;
    const LABELS: Labels = Labels {
        service: "dhcp",
        replies: "ACK(s)",
        file: "lease file",
        file_long: "DHCP lease file",
        withheld: "ACKs",
    };

    fn table(&self) -> MutexGuard<'_, LeaseTable> {
        Shared::table(self)
    }

    async fn send(&self, replies: Vec<Pending>) {
        if let Some(socket) = self.socket.load_full() {
            send_all(&socket, self, replies).await;
        }
    }

    fn path(&self) -> PathBuf {
        self.lease_file.clone()
    }

    fn write_counters(&self) -> (&AtomicU64, &AtomicU64) {
        (&self.counters.persists, &self.counters.persist_errors)
    }
}

/// The real write.
pub(super) fn real_save() -> SaveFn {
    groupcommit::save_with(store::save)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::dhcp::leases::{LeaseTable, Scope};
    use crate::services::dhcp::status::Counters;
    use arc_swap::ArcSwapOption;
    use dhcproto::v4::MessageType;
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    use tokio::net::UdpSocket;
    use tokio_util::sync::CancellationToken;

    fn pending(text: &str, to: std::net::SocketAddr) -> Pending {
        Pending {
            bytes: text.as_bytes().to_vec(),
            to,
            link: None,
            kind: MessageType::Ack,
        }
    }

    /// Failure injection through the lease service: an ACK leaves only
    /// after a write that covers it succeeded (the save fails every other
    /// call, the first fails; the generic cases are in
    /// `runtime::groupcommit`).
    #[tokio::test]
    async fn acks_leave_only_after_a_write_that_covers_them_succeeded() {
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
        assert!(writer.is_dirty(), "a failed write leaves the table dirty");
        // Write 2 succeeds: its reply leaves.
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
