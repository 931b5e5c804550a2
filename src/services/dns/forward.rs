//! Forwarding out-of-zone queries to `network.upstreamDNS`.
//!
//! Role: pass the client's query (with a fresh random ID) to the upstreams
//! in order and hand back the first usable answer (client's ID restored, AA
//! cleared: we are not authoritative for it). Nothing is cached here.
//!
//! Timing invariant: a query is done within `dns.forwardTimeout` in total,
//! after which the caller answers SERVFAIL. Stub resolvers (glibc, dig, Go)
//! give up after 5 s, so a longer wait only turns SERVFAIL into a timeout.
//! The budget is shared out: upstream i of n gets (time left) / (n - i), and
//! its query is sent again once halfway through its share. An upstream that
//! refuses (ICMP port unreachable, seen as ECONNREFUSED on the connected UDP
//! socket, or a TCP reset) costs no time: the next one is tried at once. An
//! upstream answering SERVFAIL or REFUSED is remembered and the next one
//! tried; the last such answer is returned when no upstream does better.
//!
//! RFCs: 1035 (UDP with TCP retry when the answer has TC, for TCP clients;
//! a UDP client gets the TC answer and retries over TCP itself), 5452
//! (random ID, fresh source port per query, answers must match the ID and
//! the question).

use std::hash::{BuildHasher, RandomState};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::{Instant, timeout_at};
use tracing::debug;

use super::encode::question_end;

/// The upstream list and the total time budget of one forwarded query.
pub struct Forwarder {
    upstreams: Vec<SocketAddr>,
    budget: Duration,
    seed: RandomState,
    seq: AtomicU64,
}

const RCODE_SERVFAIL: u8 = 2;
const RCODE_REFUSED: u8 = 5;

impl Forwarder {
    pub fn new(upstreams: Vec<SocketAddr>, budget: Duration) -> Self {
        Forwarder {
            upstreams,
            budget,
            seed: RandomState::new(),
            seq: AtomicU64::new(0),
        }
    }

    /// An unpredictable query ID (SipHash with per-process random keys).
    fn next_id(&self) -> [u8; 2] {
        let h = self.seed.hash_one(self.seq.fetch_add(1, Relaxed));
        [(h >> 8) as u8, h as u8]
    }

    /// Forward `query`; `None` when no upstream answered in time. `tcp`:
    /// the client came over TCP, so a TC answer is retried over TCP.
    pub async fn forward(&self, query: &[u8], tcp: bool) -> Option<Vec<u8>> {
        if query.len() < 12 {
            return None;
        }
        let deadline = Instant::now() + self.budget;
        let n = self.upstreams.len();
        let mut fallback = None;
        for (i, up) in self.upstreams.iter().enumerate() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let share = (deadline - now) / u32::try_from(n - i).unwrap_or(1);
            let mut q = query.to_vec();
            q[..2].copy_from_slice(&self.next_id());
            let mut r = udp(*up, &q, now + share).await;
            if tcp && matches!(&r, Ok(a) if a[2] & 0x02 != 0) {
                r = tcp_query(*up, &q, now + share).await;
            }
            match r {
                Ok(mut a) => {
                    a[..2].copy_from_slice(&query[..2]);
                    a[2] &= !0x04; // AA: not our data
                    let rcode = a[3] & 0x0f;
                    if (rcode == RCODE_SERVFAIL || rcode == RCODE_REFUSED) && i + 1 < n {
                        debug!(upstream = %up, rcode, "upstream failed; trying the next");
                        fallback = Some(a);
                        continue;
                    }
                    return Some(a);
                }
                Err(e) => debug!(upstream = %up, "forwarding failed: {e}"),
            }
        }
        fallback
    }
}

/// Is `a` the answer to `q`: same ID, QR set, same question (any case)?
fn answers(q: &[u8], a: &[u8]) -> bool {
    if a.len() < 12 || a[..2] != q[..2] || a[2] & 0x80 == 0 {
        return false;
    }
    if a[4..6] == [0, 0] {
        return true; // e.g. FORMERR without the question
    }
    match (question_end(q), question_end(a)) {
        (Some(qe), Some(ae)) => q[4..6] == a[4..6] && q[12..qe].eq_ignore_ascii_case(&a[12..ae]),
        _ => false,
    }
}

fn timed_out() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time")
}

/// One UDP exchange on a connected socket (so ICMP errors are reported),
/// sent again halfway to `until`.
async fn udp(up: SocketAddr, q: &[u8], until: Instant) -> std::io::Result<Vec<u8>> {
    let local: SocketAddr = if up.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(local).await?;
    sock.connect(up).await?;
    let resend = Instant::now() + until.saturating_duration_since(Instant::now()) / 2;
    let mut buf = vec![0u8; 65_535];
    for phase_end in [resend, until] {
        sock.send(q).await?;
        let recv = async {
            loop {
                let n = sock.recv(&mut buf).await?;
                if answers(q, &buf[..n]) {
                    return Ok::<_, std::io::Error>(buf[..n].to_vec());
                }
                debug!(upstream = %up, "unrelated UDP answer ignored");
            }
        };
        if let Ok(r) = timeout_at(phase_end, recv).await {
            return r;
        }
    }
    Err(timed_out())
}

/// One TCP exchange (RFC 1035 4.2.2 framing), all of it before `until`.
async fn tcp_query(up: SocketAddr, q: &[u8], until: Instant) -> std::io::Result<Vec<u8>> {
    let exchange = async {
        let mut s = TcpStream::connect(up).await?;
        let len = u16::try_from(q.len()).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        let mut frame = len.to_be_bytes().to_vec();
        frame.extend_from_slice(q);
        s.write_all(&frame).await?;
        let mut l = [0u8; 2];
        s.read_exact(&mut l).await?;
        let mut a = vec![0u8; usize::from(u16::from_be_bytes(l))];
        s.read_exact(&mut a).await?;
        if answers(q, &a) {
            Ok(a)
        } else {
            Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "TCP answer does not match the query",
            ))
        }
    };
    timeout_at(until, exchange)
        .await
        .unwrap_or_else(|_| Err(timed_out()))
}
