//! A send-only `AF_PACKET` socket: hand an IPv4 packet to one interface for
//! one destination MAC address, without an ARP (neighbour) entry.
//!
//! Why this exists: a DHCP server must be able to unicast an OFFER/ACK to a
//! client that has no address yet (RFC 2131 §4.1, when the client cleared
//! the broadcast flag). The kernel's UDP path would ARP for `yiaddr`, which
//! the client does not answer. dnsmasq adds an ARP entry (`SIOCSARP`,
//! needs `CAP_NET_ADMIN`); ISC dhcpd writes the frame through a packet
//! socket (`CAP_NET_RAW`, which the appliance already holds for
//! `SO_BINDTODEVICE`). We do the latter. The kernel builds the Ethernet
//! header (`SOCK_DGRAM`), the caller builds IP and UDP.
//!
//! Why it is written here: socket2 and rustix create `AF_PACKET` sockets
//! but offer no safe `sockaddr_ll`; pnet/afpacket bind a *receiving*
//! socket (every frame of the interface would be queued to us). This crate
//! is the only place of the appliance with `unsafe` (the main crate
//! forbids it): one `sockaddr_ll` written into socket2's storage and one
//! `if_nametoindex` call.
//!
//! Invariants: the socket is created with protocol 0, so it never receives
//! a frame (packet(7)); it is non-blocking, so a full device queue is an
//! error for the caller (which falls back to broadcast), never a stall.

use std::ffi::CString;
use std::io;

use socket2::{Domain, SockAddr, SockAddrStorage, Socket, Type};

/// `ETH_P_IP`: the EtherType of IPv4.
const ETH_P_IP: u16 = 0x0800;

/// A send-only packet socket for one interface.
#[derive(Debug)]
pub struct LinkSender {
    socket: Socket,
    ifindex: u32,
    ifname: String,
}

impl LinkSender {
    /// Open the socket for `ifname` (needs `CAP_NET_RAW`; an unknown
    /// interface is `NotFound`).
    pub fn open(ifname: &str) -> io::Result<LinkSender> {
        let ifindex = index_of(ifname)?;
        // Protocol 0: no frame is ever queued to this socket.
        let socket = Socket::new(Domain::PACKET, Type::DGRAM, None)?;
        socket.set_nonblocking(true)?;
        Ok(LinkSender {
            socket,
            ifindex,
            ifname: ifname.to_string(),
        })
    }

    /// The interface this socket sends on.
    pub fn interface(&self) -> &str {
        &self.ifname
    }

    /// Send one IPv4 packet (IP header included) to `mac` on the interface.
    pub fn send_ipv4(&self, packet: &[u8], mac: [u8; 6]) -> io::Result<usize> {
        let addr = link_addr(self.ifindex, ETH_P_IP, mac)?;
        self.socket.send_to(packet, &addr)
    }
}

/// The interface index of `ifname`, in this process's network namespace.
fn index_of(ifname: &str) -> io::Result<u32> {
    let name = CString::new(ifname)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
    // SAFETY: `name` is a valid NUL-terminated string that outlives the
    // call; if_nametoindex only reads it.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {ifname}"),
        ));
    }
    Ok(index)
}

/// A `sockaddr_ll` for `mac` on interface `ifindex`, for `protocol`.
fn link_addr(ifindex: u32, protocol: u16, mac: [u8; 6]) -> io::Result<SockAddr> {
    let ifindex = i32::try_from(ifindex)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface index out of range"))?;
    let mut storage = SockAddrStorage::zeroed();
    // SAFETY: sockaddr_ll is one of this platform's sockaddr types and is
    // smaller than sockaddr_storage (view_as asserts the size); all-zero
    // bytes are a valid sockaddr_ll.
    let ll = unsafe { storage.view_as::<libc::sockaddr_ll>() };
    ll.sll_family = libc::AF_PACKET as libc::sa_family_t;
    ll.sll_protocol = protocol.to_be();
    ll.sll_ifindex = ifindex;
    ll.sll_halen = 6;
    ll.sll_addr[..6].copy_from_slice(&mac);
    let len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: the storage holds an initialised sockaddr_ll whose family is
    // AF_PACKET, and `len` is exactly its size.
    Ok(unsafe { SockAddr::new(storage, len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_addr_has_the_family_index_protocol_and_mac() {
        let a = link_addr(7, ETH_P_IP, [2, 0, 0, 0, 0, 9]).unwrap();
        assert_eq!(a.family(), libc::AF_PACKET as libc::sa_family_t);
        assert_eq!(a.len() as usize, std::mem::size_of::<libc::sockaddr_ll>());
        let bytes = a.as_storage();
        // SAFETY: test only; the storage was written as a sockaddr_ll above.
        let ll = unsafe { &*(&bytes as *const SockAddrStorage).cast::<libc::sockaddr_ll>() };
        assert_eq!(ll.sll_ifindex, 7);
        assert_eq!(u16::from_be(ll.sll_protocol), ETH_P_IP);
        assert_eq!(&ll.sll_addr[..6], &[2, 0, 0, 0, 0, 9]);
        assert_eq!(ll.sll_halen, 6);
    }

    #[test]
    fn an_unknown_interface_is_not_found() {
        let e = index_of("nosuchif0").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(index_of("lo").is_ok());
        assert_eq!(
            index_of("a\0b").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
