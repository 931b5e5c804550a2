//! The socket side of unicast replies to clients without an address: the
//! packet socket on `network.interface` (crate `linksock`) and one send.
//! The frame's IPv4/UDP headers come from the pure [`super::frame`].
//!
//! Invariant: nothing here can stop a reply — a missing socket or a failed
//! send is the caller's cue to broadcast instead.

use std::net::SocketAddrV4;

use tracing::{info, warn};

use super::frame;

/// The packet socket for unicast replies on `ifname`, or None (logged:
/// those replies are then broadcast).
pub(super) fn open_link(ifname: &str) -> Option<linksock::LinkSender> {
    match linksock::LinkSender::open(ifname) {
        Ok(l) => {
            info!(
                "dhcp: unicast replies to clients without an address go out of {ifname} (packet socket)"
            );
            Some(l)
        }
        Err(e) => {
            warn!(
                "dhcp: no packet socket on {ifname} ({e}; needs CAP_NET_RAW): replies to clients without an address are broadcast"
            );
            None
        }
    }
}

/// A unicast to a client without an address, through the packet socket.
#[derive(Debug, Clone, Copy)]
pub(super) struct LinkDest {
    pub(super) from: SocketAddrV4,
    pub(super) to: SocketAddrV4,
    pub(super) mac: [u8; 6],
}

/// Write one reply as an IPv4/UDP packet to the client's MAC address.
pub(super) fn send_link(
    link: &linksock::LinkSender,
    dest: LinkDest,
    payload: &[u8],
) -> std::io::Result<()> {
    let packet = frame::ipv4_udp(dest.from, dest.to, payload)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "reply too large"))?;
    link.send_ipv4(&packet, dest.mac).map(drop)
}
