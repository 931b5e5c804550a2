//! The skeleton every datagram service stands on (DHCPv4, DHCPv6, NTP,
//! TFTP's first packet): receive, decode, decide, send, after hickory's
//! `handle_request` (one request in, one [`Decision`] out).
//!
//! What lives here, once:
//! - [`Decision`]: the three ways a datagram ends — a reply, silence that
//!   is not a fault (another server's client, a REQUEST for another
//!   server), or a drop the client caused (malformed, refused) that is
//!   counted and warned about. A decision is exactly one of them: a reply
//!   cannot also be a drop.
//! - The receive side ([`Datagrams`]): one datagram at a time with the
//!   shutdown token ([`Datagrams::next`]; a receive error is retried after
//!   10 ms, [`MAX_RECV_ERRORS`] in a row end the listener), or the batch
//!   waiting on a readable socket ([`Datagrams::batch`]; the DHCP services
//!   decide a batch under their table lock and write it to disk once).
//! - The HA gate ([`Gate`]): a member of an HA pair that does not hold the
//!   VIPs reads and drops what a gated service receives (the holder
//!   answers: one OFFER per DISCOVER).
//! - The panic policy ([`Datagrams::guarded`]): a bug on some input must
//!   not stop the service (the decoders are fuzzed; this is the net). The
//!   panic is counted by the service, logged at error at most once every
//!   [`crate::runtime::lograte::CLIENT_EVENTS`] with the client, and the
//!   datagram is dropped.
//!
//! Invariants: nothing a client sends ends a loop; every client-caused log
//! line goes through the service's [`LogRate`] (its serve's, from the
//! run-time context).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error};

use crate::runtime::ha::HaView;
use crate::runtime::lograte::LogRate;

/// Consecutive receive errors before a one-at-a-time listener gives up.
pub const MAX_RECV_ERRORS: u32 = 1000;

/// How one datagram ends. `S` says why a datagram gets no answer although
/// nothing is wrong with it; `D` why it was dropped (counted, warned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<R, S, D> {
    /// Send this.
    Reply(R),
    /// No answer; not the client's fault (logged at debug or info).
    Silent(S),
    /// Dropped: the client sent something refused (counted, rate-limited
    /// warning).
    Dropped(D),
}

impl<R, S, D> Decision<R, S, D> {
    /// The reply, if the decision is one.
    pub fn reply(&self) -> Option<&R> {
        match self {
            Decision::Reply(r) => Some(r),
            _ => None,
        }
    }

    /// Why the datagram was dropped, if it was.
    pub fn dropped(&self) -> Option<&D> {
        match self {
            Decision::Dropped(d) => Some(d),
            _ => None,
        }
    }
}

/// Whether a service answers on an HA member that does not hold the VIPs.
#[derive(Clone)]
pub enum Gate {
    /// Only the VIP holder answers (DHCPv4: the pair shares one pool), as
    /// this member's HA view (the service's context) says.
    VipHolder(HaView),
    /// Every member answers (NTP, TFTP, DHCPv6: per-member state).
    Always,
}

impl Gate {
    /// Does this member answer now?
    pub fn open(&self) -> bool {
        match self {
            Gate::VipHolder(ha) => ha.holds_vips(),
            Gate::Always => true,
        }
    }
}

/// The receive side of one datagram listener.
pub struct Datagrams {
    /// Log prefix (`dhcp`, `ntp`, …).
    service: &'static str,
    log: Arc<LogRate>,
    gate: Gate,
    /// Receive errors in a row ([`Datagrams::next`]).
    errors: u32,
}

impl Datagrams {
    pub fn new(service: &'static str, log: Arc<LogRate>, gate: Gate) -> Datagrams {
        Datagrams {
            service,
            log,
            gate,
            errors: 0,
        }
    }

    /// Wait for the next datagram the gate lets through: its length and
    /// source, or `None` once `shutdown` is cancelled. A receive error is
    /// retried after 10 ms; [`MAX_RECV_ERRORS`] in a row are the
    /// listener's failure.
    pub async fn next(
        &mut self,
        socket: &UdpSocket,
        buf: &mut [u8],
        shutdown: &CancellationToken,
    ) -> anyhow::Result<Option<(usize, SocketAddr)>> {
        loop {
            let r = tokio::select! {
                _ = shutdown.cancelled() => return Ok(None),
                r = socket.recv_from(buf) => r,
            };
            match r {
                Ok((n, src)) => {
                    self.errors = 0;
                    if self.gate.open() {
                        return Ok(Some((n, src)));
                    }
                }
                Err(e) => {
                    self.errors += 1;
                    if self.errors >= MAX_RECV_ERRORS {
                        let local = socket.local_addr().map(|a| a.to_string());
                        anyhow::bail!(
                            "{} listener {}: receive keeps failing: {e}",
                            self.service,
                            local.unwrap_or_default()
                        );
                    }
                    debug!("{} recv: {e}", self.service);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }

    /// Read the datagrams waiting on `socket` (at most `max`) and hand each
    /// one the gate lets through to `decide`, under the panic policy
    /// (`on_panic` counts it). Stops at the first receive that would block
    /// or fails.
    pub fn batch(
        &self,
        socket: &UdpSocket,
        buf: &mut [u8],
        max: usize,
        on_panic: impl Fn(),
        mut decide: impl FnMut(&[u8], SocketAddr),
    ) {
        for _ in 0..max {
            let (n, src) = match socket.try_recv_from(buf) {
                Ok(x) => x,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    debug!("{} recv: {e}", self.service);
                    break;
                }
            };
            if !self.gate.open() {
                continue;
            }
            let data = buf.get(..n).unwrap_or(&[]);
            self.guarded(src, n, &on_panic, || decide(data, src));
        }
    }

    /// Run `decide` for a datagram of `len` bytes from `src`: its result,
    /// or `None` when it panicked (counted by `on_panic`, logged at error
    /// at most once per [`crate::runtime::lograte::CLIENT_EVENTS`]).
    pub fn guarded<T>(
        &self,
        src: SocketAddr,
        len: usize,
        on_panic: impl FnOnce(),
        decide: impl FnOnce() -> T,
    ) -> Option<T> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(decide)) {
            Ok(t) => Some(t),
            Err(_) => {
                on_panic();
                if let Some(tail) = self.log.check("internal error", Some(src)) {
                    error!(%src, "{}: internal error on a {len}-byte datagram from {src} (dropped); please report{tail}", self.service);
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log() -> Arc<LogRate> {
        Arc::new(LogRate::new("test", crate::runtime::lograte::CLIENT_EVENTS))
    }

    #[tokio::test]
    async fn a_panicking_decision_is_counted_and_the_batch_goes_on() {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let to = server.local_addr().unwrap();
        for d in [&b"ok"[..], b"boom", b"ok"] {
            client.send_to(d, to).await.unwrap();
        }
        server.readable().await.unwrap();
        // Give the other two datagrams time to arrive on loopback.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let d = Datagrams::new("test", log(), Gate::Always);
        let panics = std::cell::Cell::new(0);
        let mut seen = Vec::new();
        let mut buf = [0u8; 64];
        d.batch(
            &server,
            &mut buf,
            16,
            || panics.set(panics.get() + 1),
            |data, _| {
                assert!(data != b"boom", "injected");
                seen.push(data.to_vec());
            },
        );
        assert_eq!(panics.get(), 1);
        assert_eq!(seen, vec![b"ok".to_vec(), b"ok".to_vec()]);
    }

    #[tokio::test]
    async fn next_returns_none_on_shutdown() {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client
            .send_to(b"hello", server.local_addr().unwrap())
            .await
            .unwrap();
        let mut d = Datagrams::new("test", log(), Gate::Always);
        let stop = CancellationToken::new();
        let mut buf = [0u8; 64];
        let got = d.next(&server, &mut buf, &stop).await.unwrap();
        assert_eq!(got.map(|(n, _)| n), Some(5));
        stop.cancel();
        assert!(d.next(&server, &mut buf, &stop).await.unwrap().is_none());
    }

    /// Two gated listeners in one process, each with its own HA view: the
    /// member holding the VIPs answers, the other drops what it receives.
    #[tokio::test]
    async fn two_ha_views_gate_two_listeners_independently() {
        use std::net::Ipv4Addr;
        let holder = HaView::single();
        // Its VIP (192.0.2.1, TEST-NET-1) is not local: the peer holds it.
        let standby = HaView::start(
            Ipv4Addr::new(127, 0, 0, 2),
            Ipv4Addr::new(192, 0, 2, 1),
            Some(Ipv4Addr::new(127, 0, 0, 3)),
        );
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut seen = Vec::new();
        for view in [&holder, &standby] {
            let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            for d in [&b"one"[..], b"two"] {
                client
                    .send_to(d, server.local_addr().unwrap())
                    .await
                    .unwrap();
            }
            server.readable().await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            let d = Datagrams::new("test", log(), Gate::VipHolder(view.clone()));
            let mut got = 0;
            d.batch(&server, &mut [0u8; 64], 16, || {}, |_, _| got += 1);
            seen.push(got);
        }
        assert_eq!(seen, vec![2, 0]);
        assert!(holder.holds_vips() && !standby.holds_vips());
    }

    #[test]
    fn a_decision_is_one_thing() {
        let r: Decision<u8, (), &str> = Decision::Reply(1);
        assert_eq!((r.reply(), r.dropped()), (Some(&1), None));
        let d: Decision<u8, (), &str> = Decision::Dropped("bad relay");
        assert_eq!((d.reply(), d.dropped()), (None, Some(&"bad relay")));
    }
}
