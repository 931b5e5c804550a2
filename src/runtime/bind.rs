//! The listening sockets of every service (DNS, LB, HTTP, admin, TFTP,
//! NTP), bound in one place so that an HA member (`ha:`, docs/ha.md) binds
//! them with `IP_FREEBIND`: its VIPs are not local while the peer holds
//! them, yet the listeners exist, and the moment keepalived adds the
//! address they receive traffic — a takeover needs no restart.
//!
//! The options are a value ([`BindOptions`]), chosen by `serve` from the
//! plan and carried to the services in their run-time context
//! (`runtime::context::Context`), never process state.
//!
//! Invariant: `IP_FREEBIND` is set only when the [`BindOptions`] used say
//! so ([`BindOptions::for_plan`]: an HA member); a single appliance keeps
//! the kernel's check that a listen address is local, so a typo still
//! fails `serve` at start.

use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::{TcpListener, UdpSocket};

use crate::plan::Plan;

/// How a service binds its sockets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BindOptions {
    /// `IP_FREEBIND`: bind addresses that are not local (yet).
    pub freebind: bool,
}

impl BindOptions {
    /// The options for `plan`: `IP_FREEBIND` for an HA member (its VIP
    /// listeners bind before the address is local).
    pub fn for_plan(plan: &Plan) -> BindOptions {
        BindOptions {
            freebind: plan.cluster.ha.is_some(),
        }
    }

    /// A TCP listener on `addr` (SO_REUSEADDR, as tokio's `bind`).
    pub fn tcp(self, addr: SocketAddr) -> std::io::Result<TcpListener> {
        let s = socket(addr, Type::STREAM, Protocol::TCP, self)?;
        s.set_reuse_address(true)?;
        s.bind(&addr.into())?;
        s.listen(BACKLOG)?;
        TcpListener::from_std(s.into())
    }

    /// A UDP socket on `addr`.
    pub fn udp(self, addr: SocketAddr) -> std::io::Result<UdpSocket> {
        let s = socket(addr, Type::DGRAM, Protocol::UDP, self)?;
        s.bind(&addr.into())?;
        UdpSocket::from_std(s.into())
    }
}

/// Ask for a 4 MiB receive queue on a datagram socket (the kernel caps it
/// at `net.core.rmem_max`): a burst (many VMs booting at once, a reload's
/// work on a busy host) waits in it instead of being dropped. Best effort:
/// the default queue still works. DNS, DHCP and DHCPv6 use it.
pub fn deep_receive_queue(sock: &impl std::os::fd::AsFd) {
    let _ = socket2::SockRef::from(sock).set_recv_buffer_size(4 << 20);
}

/// Backlog of a listening socket (tokio's `TcpListener::bind`'s).
const BACKLOG: i32 = 1024;

fn socket(
    addr: SocketAddr,
    ty: Type,
    proto: Protocol,
    opts: BindOptions,
) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), ty, Some(proto))?;
    if opts.freebind {
        match addr {
            SocketAddr::V4(_) => s.set_freebind_v4(true)?,
            SocketAddr::V6(_) => s.set_freebind_v6(true)?,
        }
    }
    s.set_nonblocking(true)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_non_local_address_binds_only_with_freebind() {
        // 192.0.2.1 (TEST-NET-1) is not an address of this host.
        let addr: SocketAddr = "192.0.2.1:0".parse().unwrap();
        let plain = BindOptions::default();
        assert!(plain.tcp(addr).is_err() && plain.udp(addr).is_err());
        let free = BindOptions { freebind: true };
        assert!(free.tcp(addr).is_ok() && free.udp(addr).is_ok());
        // And a local one as usual; the port of a TCP listener is known.
        let l = plain.tcp("127.0.0.1:0".parse().unwrap()).unwrap();
        assert_ne!(l.local_addr().unwrap().port(), 0);
        let u = plain.udp("127.0.0.1:0".parse().unwrap()).unwrap();
        assert_ne!(u.local_addr().unwrap().port(), 0);
    }
}
