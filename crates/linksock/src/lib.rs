//! `AF_PACKET` sockets: a send-only one that hands an IPv4 packet to one
//! interface for one destination MAC address, without an ARP (neighbour)
//! entry ([`LinkSender`]); and a filtered receiving one that reports the
//! Ethernet source address of the IPv6/UDP datagrams to one port
//! ([`LinkReceiver`]: a DHCPv6 server's evidence of who sent a message).
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
//! Why a receiving socket: a UDP socket does not say which Ethernet
//! address a datagram came from, and a DHCPv6 client's DUID (which may
//! carry a MAC) is only its word; the frame's source is evidence.
//!
//! Why it is written here: socket2 and rustix create `AF_PACKET` sockets
//! but offer no safe `sockaddr_ll`; pnet/afpacket bind an unfiltered
//! receiving socket (every frame of the interface would be queued to us).
//! This crate is the only place of the appliance with `unsafe` (the main
//! crate forbids it): one `sockaddr_ll` written into socket2's storage,
//! one read from a received address, one receive buffer viewed as
//! `MaybeUninit`, and one `if_nametoindex` call.
//!
//! Invariants: the sending socket is created with protocol 0, so it never
//! receives a frame (packet(7)); it is non-blocking, so a full device queue
//! is an error for the caller (which falls back to broadcast), never a
//! stall. The receiving socket gets its BPF filter before it is bound, so
//! only IPv6 datagrams of UDP to the one port are ever queued to it, and
//! never an outgoing frame (it is bound to `ETH_P_IPV6`, not `ETH_P_ALL`).

use std::ffi::CString;
use std::io;

use socket2::{Domain, SockAddr, SockAddrStorage, Socket, Type};

/// `ETH_P_IP`: the EtherType of IPv4.
const ETH_P_IP: u16 = 0x0800;
/// `ETH_P_IPV6`: the EtherType of IPv6.
const ETH_P_IPV6: u16 = 0x86dd;
/// `PACKET_HOST`, `PACKET_BROADCAST`, `PACKET_MULTICAST` (packet(7)):
/// frames addressed to this host; others (`PACKET_OTHERHOST` in
/// promiscuous mode, `PACKET_OUTGOING`) are skipped.
const FOR_US: [u8; 3] = [0, 1, 2];

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

/// A receiving packet socket for the IPv6 UDP datagrams to one port.
#[derive(Debug)]
pub struct LinkReceiver {
    socket: Socket,
}

impl LinkReceiver {
    /// Open it on `ifname` (every interface when `None`) for UDP
    /// destination port `port` (needs `CAP_NET_RAW`).
    pub fn open(ifname: Option<&str>, port: u16) -> io::Result<LinkReceiver> {
        let ifindex = ifname.map(index_of).transpose()?.unwrap_or(0);
        // Protocol 0 until bound: nothing is queued before the filter.
        let socket = Socket::new(Domain::PACKET, Type::DGRAM, None)?;
        socket.attach_filter(&udp6_port_filter(port))?;
        socket.set_nonblocking(true)?;
        // As large as the DHCPv6 UDP socket's: a flood overflows both alike.
        let _ = socket.set_recv_buffer_size(4 << 20);
        socket.bind(&link_addr(ifindex, ETH_P_IPV6, [0; 6])?)?;
        Ok(LinkReceiver { socket })
    }

    /// The next queued datagram into `buf`: its Ethernet source and the
    /// length of the IPv6 packet (header, UDP header, payload); `Ok(None)`
    /// when nothing is queued. Frames not addressed to this host and frames
    /// without a 6-octet source address are skipped. A packet longer than
    /// `buf` is cut to its length.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<Option<([u8; 6], usize)>> {
        // SAFETY: u8 and MaybeUninit<u8> have the same layout, and
        // recv_from writes only initialised bytes into the slice.
        let uninit = unsafe { &mut *(buf as *mut [u8] as *mut [std::mem::MaybeUninit<u8>]) };
        loop {
            let (n, addr) = match self.socket.recv_from(uninit) {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(e),
            };
            if let Some(mac) = source_of(&addr) {
                return Ok(Some((mac, n.min(uninit.len()))));
            }
        }
    }
}

/// Classic BPF: accept IPv6 packets whose next header is UDP (17) and
/// whose UDP destination port is `port` (offsets from the network header:
/// a `SOCK_DGRAM` packet socket has no link header); drop the rest.
fn udp6_port_filter(port: u16) -> [socket2::SockFilter; 6] {
    use socket2::SockFilter as F;
    const LD_B_ABS: u16 = 0x30;
    const LD_H_ABS: u16 = 0x28;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    [
        F::new(LD_B_ABS, 0, 0, 6),
        F::new(JEQ_K, 0, 3, 17),
        F::new(LD_H_ABS, 0, 0, 40 + 2),
        F::new(JEQ_K, 0, 1, u32::from(port)),
        F::new(RET_K, 0, 0, 0xffff),
        F::new(RET_K, 0, 0, 0),
    ]
}

/// The Ethernet source of a received frame, if it was addressed to us.
fn source_of(addr: &SockAddr) -> Option<[u8; 6]> {
    if addr.family() != libc::AF_PACKET as libc::sa_family_t
        || (addr.len() as usize) < std::mem::size_of::<libc::sockaddr_ll>()
    {
        return None;
    }
    // SAFETY: the family is AF_PACKET and the address is at least as long
    // as a sockaddr_ll, so the storage holds one (packet(7)).
    let ll = unsafe { &*addr.as_ptr().cast::<libc::sockaddr_ll>() };
    if ll.sll_halen != 6 || !FOR_US.contains(&ll.sll_pkttype) {
        return None;
    }
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&ll.sll_addr[..6]);
    Some(mac)
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
    fn the_filter_takes_udp_to_the_port_and_drops_the_rest() {
        let f = udp6_port_filter(547);
        // SAFETY: test only; SockFilter is repr(transparent) over sock_filter.
        let raw: &[libc::sock_filter; 6] = unsafe { &*f.as_ptr().cast() };
        assert_eq!((raw[0].code, raw[0].k), (0x30, 6), "next header");
        assert_eq!((raw[1].k, raw[1].jf), (17, 3), "UDP, else drop");
        assert_eq!((raw[2].code, raw[2].k), (0x28, 42), "destination port");
        assert_eq!((raw[3].k, raw[3].jf), (547, 1), "the port, else drop");
        assert_eq!((raw[4].code, raw[4].k), (0x06, 0xffff), "accept");
        assert_eq!((raw[5].code, raw[5].k), (0x06, 0), "drop");
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
