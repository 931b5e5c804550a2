//! Who a DHCPv6 client is: the node's MAC address, from evidence of who
//! sent the message, not from what the client claims (pure).
//!
//! A reservation is keyed by MAC, but DHCPv6 identifies clients by DUID,
//! and the DUID a node sends changes (the live ISO and the installed RHCOS,
//! DUID-LLT and DUID-LL). Any host can put any MAC in a DUID, so what
//! counts depends on how the message came ([`Seen`]):
//!
//! - **On the appliance's link** (not relayed): the Ethernet source address
//!   of the frame that carried it, read through a packet socket
//!   ([`MacSource::Frame`]). When the frame's source could not be read (no
//!   packet socket, or its queue overflowed), the client's link-local
//!   source address when it is a modified EUI-64 one (RFC 4291 appendix A:
//!   `fe80::` + MAC with the U/L bit flipped and `ff:fe` in the middle).
//!   The DUID's MAC and earlier bindings of the DUID are no evidence here:
//!   both are the client's word (a DUID is seen by every host of the link).
//! - **Relayed by a configured relay** (the socket layer drops the others):
//!   the relay's Client Link-Layer Address option (79, RFC 6939) of the
//!   relay agent closest to the client, then the MAC inside a DUID-LLT
//!   (type 1) or DUID-LL (type 3) with hardware type Ethernet (RFC 8415
//!   §11.2, §11.4), then the innermost relay's peer-address when it is an
//!   EUI-64 link-local one; the caller then tries an earlier binding of the
//!   same DUID. The relay is trusted as DHCPv4 trusts a relay's giaddr.
//!
//! Invariant: only Ethernet (hardware type 1) addresses of 6 octets are
//! taken; anything else yields `None`, never a guess.

use std::net::Ipv6Addr;

use crate::model::cluster::MacAddr;

/// Hardware type Ethernet (RFC 826 / IANA ARP hardware types).
const HTYPE_ETHERNET: u16 = 1;

/// Where a client's MAC came from (for logs and `/status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacSource {
    /// The Ethernet source of its frame (on the appliance's link).
    Frame,
    /// Inside its DUID-LLT or DUID-LL.
    Duid,
    /// The relay's client link-layer address option (79).
    Relay,
    /// Its EUI-64 link-local address.
    LinkLocal,
    /// An earlier binding of the same DUID (learned from one of the above).
    Binding,
}

impl MacSource {
    pub fn as_str(self) -> &'static str {
        match self {
            MacSource::Frame => "frame source",
            MacSource::Duid => "duid",
            MacSource::Relay => "relay option 79",
            MacSource::LinkLocal => "eui-64 link-local",
            MacSource::Binding => "earlier binding",
        }
    }
}

/// The DUID type (first two octets), if there are two.
pub fn duid_type(duid: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes([*duid.first()?, *duid.get(1)?]))
}

/// The MAC inside a DUID-LLT (type 1) or DUID-LL (type 3) of an Ethernet
/// interface.
pub fn mac_from_duid(duid: &[u8]) -> Option<MacAddr> {
    let (htype, addr) = match duid_type(duid)? {
        // type(2) htype(2) time(4) address
        1 => (duid.get(2..4)?, duid.get(8..)?),
        // type(2) htype(2) address
        3 => (duid.get(2..4)?, duid.get(4..)?),
        _ => return None,
    };
    ethernet(htype, addr)
}

/// The MAC in a Client Link-Layer Address option's data (RFC 6939 §4:
/// link-layer type (2), link-layer address).
pub fn mac_from_option79(data: &[u8]) -> Option<MacAddr> {
    ethernet(data.get(..2)?, data.get(2..)?)
}

/// The MAC inside a modified-EUI-64 link-local address.
pub fn mac_from_link_local(ip: Ipv6Addr) -> Option<MacAddr> {
    let o = ip.octets();
    let link_local = o[..2] == [0xfe, 0x80] && o[2..8].iter().all(|b| *b == 0);
    if !link_local || o[11] != 0xff || o[12] != 0xfe {
        return None;
    }
    Some(MacAddr([o[8] ^ 0x02, o[9], o[10], o[13], o[14], o[15]]))
}

fn ethernet(htype: &[u8], addr: &[u8]) -> Option<MacAddr> {
    if htype != HTYPE_ETHERNET.to_be_bytes() {
        return None;
    }
    Some(MacAddr(addr.try_into().ok()?))
}

/// How a message reached the server: what can vouch for its MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen<'a> {
    /// On the appliance's link.
    Direct {
        /// The frame's Ethernet source, when it could be read.
        frame: Option<MacAddr>,
        /// The datagram's source address.
        source: Option<Ipv6Addr>,
    },
    /// Through a configured relay.
    Relayed {
        /// Option 79 of the innermost relay.
        option79: Option<&'a [u8]>,
        /// The innermost relay's peer-address (the client's address).
        peer: Ipv6Addr,
    },
}

impl Seen<'_> {
    pub fn relayed(&self) -> bool {
        matches!(self, Seen::Relayed { .. })
    }
}

/// The MAC of a client by the rules of the module doc (without the
/// earlier-binding step, which needs the table).
pub fn find_mac(duid: &[u8], seen: &Seen<'_>) -> Option<(MacAddr, MacSource)> {
    match *seen {
        Seen::Direct { frame, source } => frame.map(|m| (m, MacSource::Frame)).or_else(|| {
            source
                .and_then(mac_from_link_local)
                .map(|m| (m, MacSource::LinkLocal))
        }),
        Seen::Relayed { option79, peer } => option79
            .and_then(mac_from_option79)
            .map(|m| (m, MacSource::Relay))
            .or_else(|| mac_from_duid(duid).map(|m| (m, MacSource::Duid)))
            .or_else(|| mac_from_link_local(peer).map(|m| (m, MacSource::LinkLocal))),
    }
}

/// A DUID-LL (type 3, Ethernet) for `mac`: the server identifier.
pub fn duid_ll(mac: MacAddr) -> Vec<u8> {
    let mut d = vec![0, 3, 0, 1];
    d.extend_from_slice(&mac.0);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: MacAddr = MacAddr([0x52, 0x54, 0x00, 0xab, 0xcd, 0xef]);

    #[test]
    fn duid_llt_and_ll_give_the_mac_others_do_not() {
        let llt = [
            0, 1, 0, 1, 0x2a, 0x2b, 0x2c, 0x2d, 0x52, 0x54, 0, 0xab, 0xcd, 0xef,
        ];
        assert_eq!(mac_from_duid(&llt), Some(MAC));
        assert_eq!(mac_from_duid(&duid_ll(MAC)), Some(MAC));
        // DUID-EN, DUID-UUID: no MAC.
        assert_eq!(mac_from_duid(&[0, 2, 0, 0, 0, 9, 1, 2, 3]), None);
        assert_eq!(
            mac_from_duid(&[0, 4, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]),
            None
        );
        // Not Ethernet (InfiniBand 32), truncated, too long, empty.
        assert_eq!(mac_from_duid(&[0, 3, 0, 32, 1, 2, 3, 4, 5, 6]), None);
        assert_eq!(mac_from_duid(&[0, 3, 0, 1, 1, 2, 3]), None);
        assert_eq!(mac_from_duid(&[0, 3, 0, 1, 1, 2, 3, 4, 5, 6, 7]), None);
        assert_eq!(mac_from_duid(&[0, 1, 0, 1, 0]), None);
        assert_eq!(mac_from_duid(&[]), None);
    }

    #[test]
    fn eui64_link_local_gives_the_mac_others_do_not() {
        let ll: Ipv6Addr = "fe80::5054:ff:feab:cdef".parse().unwrap();
        assert_eq!(mac_from_link_local(ll), Some(MAC));
        // Stable-privacy link-local, global EUI-64 address: no.
        assert_eq!(
            mac_from_link_local("fe80::1c2d:3e4f:5a6b:7c8d".parse().unwrap()),
            None
        );
        assert_eq!(
            mac_from_link_local("2001:db8::5054:ff:feab:cdef".parse().unwrap()),
            None
        );
    }

    #[test]
    fn relayed_option79_then_duid_then_link_local() {
        let o79 = [0, 1, 0x52, 0x54, 0, 0xab, 0xcd, 0xef];
        assert_eq!(mac_from_option79(&o79), Some(MAC));
        assert_eq!(mac_from_option79(&[0, 1, 1]), None);
        let other = MacAddr([2, 0, 0, 0, 0, 1]);
        let ll: Ipv6Addr = "fe80::5054:ff:feab:cdef".parse().unwrap();
        let relayed = |option79, peer| Seen::Relayed { option79, peer };
        let plain: Ipv6Addr = "fe80::1".parse().unwrap();
        assert_eq!(
            find_mac(&duid_ll(other), &relayed(Some(&o79), ll)),
            Some((MAC, MacSource::Relay))
        );
        assert_eq!(
            find_mac(&duid_ll(other), &relayed(None, ll)),
            Some((other, MacSource::Duid))
        );
        let en = [0, 2, 0, 0, 0, 9, 1];
        assert_eq!(
            find_mac(&en, &relayed(None, ll)),
            Some((MAC, MacSource::LinkLocal))
        );
        assert_eq!(find_mac(&en, &relayed(None, plain)), None);
    }

    /// On the link, the claim in the DUID is no evidence: the frame's
    /// source decides, else an EUI-64 source address.
    #[test]
    fn direct_the_frame_then_an_eui64_source_never_the_duid() {
        let other = MacAddr([2, 0, 0, 0, 0, 1]);
        let ll: Ipv6Addr = "fe80::5054:ff:feab:cdef".parse().unwrap();
        let direct = |frame, source| Seen::Direct { frame, source };
        // Another host claiming MAC in its DUID: its own frame's source.
        assert_eq!(
            find_mac(&duid_ll(MAC), &direct(Some(other), Some(ll))),
            Some((other, MacSource::Frame))
        );
        assert_eq!(
            find_mac(&duid_ll(MAC), &direct(None, Some(ll))),
            Some((MAC, MacSource::LinkLocal))
        );
        let private: Ipv6Addr = "fe80::1c2d:3e4f:5a6b:7c8d".parse().unwrap();
        assert_eq!(find_mac(&duid_ll(MAC), &direct(None, Some(private))), None);
        assert_eq!(find_mac(&duid_ll(MAC), &direct(None, None)), None);
    }
}
