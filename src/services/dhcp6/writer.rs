//! The binding-file writer: the "on disk before the reply" promise for
//! pool bindings, the group commit of [`crate::runtime::groupcommit`]
//! (generations, held replies, lazy changes, lock order: the table, then
//! the writer state) over the binding table, as for the DHCPv4 lease file.
//!
//! The socket loop decides a batch under the table lock; replies that must
//! wait ([`Durability::BeforeReply`]) are handed to [`Writer::hold`] while
//! the lock is held; lazy changes only mark the writer dirty.
//!
//! [`Durability::BeforeReply`]: super::reply::Durability::BeforeReply
//! [`Writer::hold`]: crate::runtime::groupcommit::Writer::hold

use std::collections::HashSet;
use std::net::Ipv6Addr;
use std::path::PathBuf;
use std::sync::MutexGuard;
use std::sync::atomic::AtomicU64;

use super::bindings::{BindingFile, Table};
use super::{Pending, Shared, send_all, store};
use crate::runtime::groupcommit::{self, Host, Labels};

/// How the file is written (the real one is [`store::save`]; tests inject
/// failures).
pub(super) type SaveFn = groupcommit::SaveFn<BindingFile>;

/// The binding writer.
pub(super) type Writer = groupcommit::Writer<Shared>;

impl groupcommit::Table for Table {
    type File = BindingFile;
    type Marks = HashSet<Ipv6Addr>;

    fn to_file(&self) -> BindingFile {
        Table::to_file(self)
    }

    fn take_unsynced(&mut self) -> HashSet<Ipv6Addr> {
        Table::take_unsynced(self)
    }

    fn restore_unsynced(&mut self, marks: HashSet<Ipv6Addr>) {
        Table::restore_unsynced(self, marks)
    }
}

impl Host for Shared {
    type Table = Table;
    type Reply = Pending;
    const LABELS: Labels = Labels {
        service: "dhcp6",
        replies: "Reply(s)",
        file: "binding file",
        file_long: "DHCPv6 binding file",
        withheld: "pool Replies",
    };

    fn table(&self) -> MutexGuard<'_, Table> {
        Shared::table(self)
    }

    async fn send(&self, replies: Vec<Pending>) {
        if let Some(socket) = self.socket.load_full() {
            send_all(&socket, self, replies).await;
        }
    }

    fn path(&self) -> PathBuf {
        self.binding_file.clone()
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
    use crate::services::dhcp6::bindings::{Scope, Table};
    use crate::services::dhcp6::status::Counters;
    use arc_swap::ArcSwapOption;
    use dhcproto::v6::MessageType;
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    use tokio::net::UdpSocket;
    use tokio_util::sync::CancellationToken;

    use crate::runtime::lograte::{CLIENT_EVENTS, LogRate};

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
            binding_log: Mutex::new(crate::services::dhcp6::BindingLog::default()),
            log: Arc::new(LogRate::new("dhcp6", CLIENT_EVENTS)),
            ra_log: Arc::new(LogRate::new("dhcp6 ra", CLIENT_EVENTS)),
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
        assert!(writer.is_dirty());
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
