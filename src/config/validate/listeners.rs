//! No two enabled listeners on the same port and address (an unspecified
//! address collides with every address), per protocol. Port 0 (pick one)
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
                let same_ip =
                    x.ip() == y.ip() || x.ip().is_unspecified() || y.ip().is_unspecified();
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
