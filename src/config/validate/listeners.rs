//! No two enabled listeners on the same port and address, per protocol. An
//! unspecified address collides with every address of its family, and
//! `[::]` (dual-stack on Linux) with IPv4 addresses too; `0.0.0.0` and an
//! IPv6 address do not collide (the IPv6 twins of `network.ipv6`). Port 0 (pick one)
//! never collides. The listeners are the catalogue's
//! ([`crate::model::catalogue::listeners`]), with their field paths.

use super::Errs;
use crate::model::catalogue::{self, Proto, Sections};

pub(crate) fn check(s: &Sections<'_>, e: &mut Errs) {
    let all = catalogue::listeners(s);
    for proto in [Proto::Tcp, Proto::Udp] {
        let list: Vec<_> = all.iter().filter(|l| l.proto == proto).collect();
        for (i, a) in list.iter().enumerate() {
            for b in &list[..i] {
                let (x, y) = (a.addr, b.addr);
                let same_ip = x.ip() == y.ip() || covers(x, y) || covers(y, x);
                if x.port() != 0 && x.port() == y.port() && same_ip {
                    let p = proto.as_str().to_ascii_uppercase();
                    e.push(
                        a.field.clone(),
                        format!("{p} {x} collides with {} ({y})", b.field),
                    );
                }
            }
        }
    }
}

/// Does a listener on `a` take `b`'s address: `a` unspecified and of
/// `b`'s family, or `[::]` (which also takes IPv4)?
fn covers(a: std::net::SocketAddr, b: std::net::SocketAddr) -> bool {
    a.ip().is_unspecified() && (a.is_ipv6() || b.is_ipv4())
}
