//! The Ethernet source of each datagram the DHCPv6 socket receives: the
//! evidence [`super::ident`] needs on the appliance's link.
//!
//! A UDP socket does not tell who sent a frame, so a packet socket
//! (`linksock::LinkReceiver`, filtered to IPv6 UDP for the server's port,
//! on `network.interface` or on every interface without it) sees the same
//! datagrams. Both queues are filled in the same kernel receive path, the
//! packet socket's first, so when the UDP socket hands over a datagram its
//! frame is already queued on the packet socket. [`Sources`] (pure) keeps
//! the frames seen and not yet matched, and a datagram takes the oldest
//! frame with the same source address, port and payload.
//!
//! Invariants: bounded ([`MAX_PENDING`] frames; the oldest go first); a
//! datagram without a matching frame has no frame evidence (never a guess
//! from another frame); identical datagrams from two hosts are matched in
//! arrival order, each to its own frame.

use std::collections::VecDeque;
use std::hash::{Hash as _, Hasher as _};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use tracing::{debug, info, warn};

use crate::model::cluster::MacAddr;

/// Frames kept while their datagram has not been read.
pub(super) const MAX_PENDING: usize = 512;
const IPV6_HEADER: usize = 40;
const UDP_HEADER: usize = 8;
const NEXT_UDP: u8 = 17;

/// A datagram's identity: source address, source port, payload length and
/// a hash of the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    ip: Ipv6Addr,
    port: u16,
    len: usize,
    hash: u64,
}

fn key(ip: Ipv6Addr, port: u16, payload: &[u8]) -> Key {
    let mut h = std::hash::DefaultHasher::new();
    payload.hash(&mut h);
    Key {
        ip,
        port,
        len: payload.len(),
        hash: h.finish(),
    }
}

/// The source address, source port and payload of an IPv6 packet carrying
/// UDP directly (no extension headers: DHCPv6 clients send none).
pub(super) fn udp6(packet: &[u8]) -> Option<(Ipv6Addr, u16, &[u8])> {
    let ip = packet.get(..IPV6_HEADER)?;
    if ip[0] >> 4 != 6 || ip[6] != NEXT_UDP {
        return None;
    }
    let mut src = [0u8; 16];
    src.copy_from_slice(&ip[8..24]);
    let udp = packet.get(IPV6_HEADER..IPV6_HEADER + UDP_HEADER)?;
    let port = u16::from_be_bytes([udp[0], udp[1]]);
    let len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    let payload = packet.get(IPV6_HEADER + UDP_HEADER..IPV6_HEADER + len.max(UDP_HEADER))?;
    Some((Ipv6Addr::from(src), port, payload))
}

/// Frames seen and not yet matched to a datagram (pure).
#[derive(Debug, Default)]
pub(super) struct Sources {
    pending: VecDeque<(Key, MacAddr)>,
}

impl Sources {
    /// A frame from `mac` carrying `packet` (an IPv6 packet).
    pub(super) fn push(&mut self, mac: MacAddr, packet: &[u8]) {
        let Some((ip, port, payload)) = udp6(packet) else {
            return;
        };
        if self.pending.len() >= MAX_PENDING {
            self.pending.pop_front();
        }
        self.pending.push_back((key(ip, port, payload), mac));
    }

    /// The Ethernet source of the datagram `payload` from `src` (taken:
    /// each frame vouches for one datagram).
    pub(super) fn take(&mut self, src: SocketAddr, payload: &[u8]) -> Option<MacAddr> {
        let IpAddr::V6(ip) = src.ip() else {
            return None;
        };
        let k = key(ip, src.port(), payload);
        let at = self.pending.iter().position(|(p, _)| *p == k)?;
        self.pending.remove(at).map(|(_, m)| m)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.pending.len()
    }
}

/// The packet socket and the frames it delivered.
pub(super) struct Link {
    rx: linksock::LinkReceiver,
    sources: Sources,
    buf: Vec<u8>,
}

impl Link {
    /// Open it for UDP port `port` on `interface` (every interface when
    /// `None`); `None`, logged, when the packet socket cannot be opened
    /// (then only EUI-64 link-local addresses vouch for a MAC on the link).
    pub(super) fn open(interface: Option<&str>, port: u16) -> Option<Link> {
        match linksock::LinkReceiver::open(interface, port) {
            Ok(rx) => {
                info!(
                    "dhcp6: the Ethernet source of each message is read through a packet socket{}",
                    interface.map(|i| format!(" on {i}")).unwrap_or_default()
                );
                Some(Link {
                    rx,
                    sources: Sources::default(),
                    buf: vec![0; 65_536],
                })
            }
            Err(e) => {
                warn!(
                    "dhcp6: no packet socket ({e}; needs CAP_NET_RAW): on the link only an EUI-64 link-local source address vouches for a node's MAC"
                );
                None
            }
        }
    }

    /// Queue every frame waiting on the packet socket.
    fn drain(&mut self) {
        loop {
            match self.rx.try_recv(&mut self.buf) {
                Ok(Some((mac, n))) => {
                    let packet = self.buf.get(..n).unwrap_or(&[]);
                    self.sources.push(MacAddr(mac), packet);
                }
                Ok(None) => return,
                Err(e) => {
                    debug!("dhcp6 packet socket: {e}");
                    return;
                }
            }
        }
    }

    /// The Ethernet source of the datagram `payload` from `src`.
    pub(super) fn source_of(&mut self, src: SocketAddr, payload: &[u8]) -> Option<MacAddr> {
        if let Some(m) = self.sources.take(src, payload) {
            return Some(m);
        }
        self.drain();
        self.sources.take(src, payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(src: &str, port: u16, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        let len = u16::try_from(UDP_HEADER + payload.len()).unwrap();
        p.extend_from_slice(&len.to_be_bytes());
        p.extend_from_slice(&[NEXT_UDP, 1]);
        p.extend_from_slice(&src.parse::<Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(&"ff02::1:2".parse::<Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(&port.to_be_bytes());
        p.extend_from_slice(&547u16.to_be_bytes());
        p.extend_from_slice(&len.to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(payload);
        p
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    const A: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa]);
    const B: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb]);

    #[test]
    fn a_datagram_takes_its_own_frame_in_order() {
        let mut s = Sources::default();
        let msg = [1u8, 2, 3, 4, 5];
        // The same datagram from two hosts (a replay with a forged source).
        s.push(A, &packet("fe80::1", 546, &msg));
        s.push(B, &packet("fe80::1", 546, &msg));
        s.push(B, &packet("fe80::2", 546, &[9, 9]));
        assert_eq!(s.take(sa("[fe80::1]:546"), &msg), Some(A));
        assert_eq!(s.take(sa("[fe80::1]:546"), &msg), Some(B));
        assert_eq!(s.take(sa("[fe80::1]:546"), &msg), None, "taken once");
        assert_eq!(s.take(sa("[fe80::2]:547"), &[9, 9]), None, "another port");
        assert_eq!(
            s.take(sa("[fe80::2]:546"), &[9, 8]),
            None,
            "another payload"
        );
        assert_eq!(s.take(sa("[fe80::2]:546"), &[9, 9]), Some(B));
        assert_eq!(s.take(sa("10.0.0.1:546"), &[9, 9]), None);
    }

    #[test]
    fn bounded_and_bad_packets_are_skipped() {
        let mut s = Sources::default();
        for i in 0..(MAX_PENDING + 10) {
            s.push(A, &packet("fe80::1", 546, &i.to_be_bytes()));
        }
        assert_eq!(s.len(), MAX_PENDING);
        assert_eq!(s.take(sa("[fe80::1]:546"), &0usize.to_be_bytes()), None);
        let good = packet("fe80::1", 546, &[1, 2, 3]);
        for n in 0..good.len() {
            let _ = udp6(&good[..n]);
            s.push(B, &good[..n]);
        }
        let mut v4 = good.clone();
        v4[0] = 0x45;
        assert_eq!(udp6(&v4), None);
        let mut tcp = good.clone();
        tcp[6] = 6;
        assert_eq!(udp6(&tcp), None);
        assert_eq!(
            udp6(&good),
            Some(("fe80::1".parse().unwrap(), 546, &[1u8, 2, 3][..]))
        );
    }
}
