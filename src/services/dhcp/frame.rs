//! IPv4 + UDP headers for a DHCP reply sent through a packet socket
//! (`linksock`), for clients that have no address yet and asked for
//! unicast (broadcast flag clear, RFC 2131 §4.1). Pure: bytes in, bytes out.
//!
//! Invariants: the IPv4 header is 20 bytes (no options), TTL 64, not
//! fragmented; both checksums are filled (a UDP checksum of 0 is sent as
//! 0xffff, RFC 768); a payload that would not fit an IPv4 packet is
//! refused rather than truncated.

use std::net::SocketAddrV4;

const IP_HEADER: usize = 20;
const UDP_HEADER: usize = 8;
const TTL: u8 = 64;
const PROTO_UDP: u8 = 17;

/// One IPv4 packet carrying `payload` from `src` to `dst` over UDP, or
/// None when the payload is too large for one packet.
pub(super) fn ipv4_udp(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Option<Vec<u8>> {
    let udp_len = u16::try_from(UDP_HEADER + payload.len()).ok()?;
    let total = u16::try_from(IP_HEADER + usize::from(udp_len)).ok()?;
    let mut p = Vec::with_capacity(usize::from(total));
    // IPv4 header.
    p.extend_from_slice(&[0x45, 0]);
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 0]); // identification, flags, fragment offset
    p.extend_from_slice(&[TTL, PROTO_UDP, 0, 0]);
    p.extend_from_slice(&src.ip().octets());
    p.extend_from_slice(&dst.ip().octets());
    let ip_sum = checksum(&[&p[..IP_HEADER]]);
    p[10..12].copy_from_slice(&ip_sum.to_be_bytes());
    // UDP header, then the payload.
    p.extend_from_slice(&src.port().to_be_bytes());
    p.extend_from_slice(&dst.port().to_be_bytes());
    p.extend_from_slice(&udp_len.to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    let mut pseudo = [0u8; 12];
    pseudo[..4].copy_from_slice(&src.ip().octets());
    pseudo[4..8].copy_from_slice(&dst.ip().octets());
    pseudo[9] = PROTO_UDP;
    pseudo[10..12].copy_from_slice(&udp_len.to_be_bytes());
    let udp_sum = match checksum(&[&pseudo, &p[IP_HEADER..]]) {
        0 => 0xffff,
        s => s,
    };
    p[IP_HEADER + 6..IP_HEADER + 8].copy_from_slice(&udp_sum.to_be_bytes());
    Some(p)
}

/// The Internet checksum (RFC 1071) of the concatenated parts; each part
/// but the last has an even length here.
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    for part in parts {
        let mut words = part.chunks_exact(2);
        for w in &mut words {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        if let [last] = words.remainder() {
            sum += u32::from(*last) << 8;
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    #[test]
    fn headers_and_checksums_verify() {
        let payload: Vec<u8> = (0..301u16).map(|i| (i * 7) as u8).collect();
        let p = ipv4_udp(addr("10.0.0.1:67"), addr("10.0.0.10:68"), &payload).unwrap();
        assert_eq!(p.len(), 20 + 8 + payload.len());
        assert_eq!(p[0], 0x45);
        assert_eq!(u16::from_be_bytes([p[2], p[3]]) as usize, p.len());
        assert_eq!(p[8], 64);
        assert_eq!(p[9], 17);
        assert_eq!(&p[12..16], &[10, 0, 0, 1]);
        assert_eq!(&p[16..20], &[10, 0, 0, 10]);
        // A header with its checksum in place sums to zero.
        assert_eq!(checksum(&[&p[..20]]), 0);
        assert_eq!(u16::from_be_bytes([p[20], p[21]]), 67);
        assert_eq!(u16::from_be_bytes([p[22], p[23]]), 68);
        assert_eq!(
            u16::from_be_bytes([p[24], p[25]]) as usize,
            8 + payload.len()
        );
        let mut pseudo = [0u8; 12];
        pseudo[..4].copy_from_slice(&p[12..16]);
        pseudo[4..8].copy_from_slice(&p[16..20]);
        pseudo[9] = 17;
        pseudo[10..12].copy_from_slice(&p[24..26]);
        assert_eq!(checksum(&[&pseudo, &p[20..]]), 0);
        assert_eq!(&p[28..], &payload[..]);
    }

    #[test]
    fn a_known_header_checksum() {
        // The classic example header (Wikipedia, "IPv4 header checksum").
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&[&h]), 0xb861);
    }

    #[test]
    fn an_oversized_payload_is_refused() {
        let big = vec![0u8; 65_536];
        assert!(ipv4_udp(addr("10.0.0.1:67"), addr("10.0.0.10:68"), &big).is_none());
    }
}
