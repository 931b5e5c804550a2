//! The listening sockets of every service (DNS, LB, HTTP, admin, TFTP,
//! NTP), bound in one place so that an HA member (`ha:`, docs/ha.md) binds
//! them with `IP_FREEBIND`: its VIPs are not local while the peer holds
//! them, yet the listeners exist, and the moment keepalived adds the
//! address they receive traffic — a takeover needs no restart.
//!
//! Invariant: `IP_FREEBIND` is set only when [`set_freebind`] said so
//! (serve does, from the plan, before the first bind); a single appliance
//! keeps the kernel's check that a listen address is local, so a typo
//! still fails `serve` at start.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::{TcpListener, UdpSocket};

static FREEBIND: AtomicBool = AtomicBool::new(false);

/// Bind the listeners bound from now on with `IP_FREEBIND` (`on`) or not.
pub fn set_freebind(on: bool) {
    FREEBIND.store(on, Ordering::Relaxed);
}

/// Backlog of a listening socket (tokio's `TcpListener::bind`'s).
const BACKLOG: i32 = 1024;

fn socket(addr: SocketAddr, ty: Type, proto: Protocol) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), ty, Some(proto))?;
    if FREEBIND.load(Ordering::Relaxed) {
        match addr {
            SocketAddr::V4(_) => s.set_freebind_v4(true)?,
            SocketAddr::V6(_) => s.set_freebind_v6(true)?,
        }
    }
    s.set_nonblocking(true)?;
    Ok(s)
}

/// A TCP listener on `addr` (SO_REUSEADDR, as tokio's `bind`).
pub fn tcp(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let s = socket(addr, Type::STREAM, Protocol::TCP)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(BACKLOG)?;
    TcpListener::from_std(s.into())
}

/// A UDP socket on `addr`.
pub fn udp(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    let s = socket(addr, Type::DGRAM, Protocol::UDP)?;
    s.bind(&addr.into())?;
    UdpSocket::from_std(s.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_non_local_address_binds_only_with_freebind() {
        // 192.0.2.1 (TEST-NET-1) is not an address of this host.
        let addr: SocketAddr = "192.0.2.1:0".parse().unwrap();
        assert!(tcp(addr).is_err() && udp(addr).is_err());
        let s = socket(addr, Type::STREAM, Protocol::TCP).unwrap();
        s.set_freebind_v4(true).unwrap();
        assert!(s.bind(&addr.into()).is_ok());
        // And a local one as usual; the port of a TCP listener is known.
        let l = tcp("127.0.0.1:0".parse().unwrap()).unwrap();
        assert_ne!(l.local_addr().unwrap().port(), 0);
        let u = udp("127.0.0.1:0".parse().unwrap()).unwrap();
        assert_ne!(u.local_addr().unwrap().port(), 0);
    }
}
