//! One datagram of the DHCP port in server mode: decode (counted; a
//! malformed one is warned about, rate limited, and dropped), decide
//! ([`super::reply::handle`]), then count and log the [`Decision`] and
//! encode its reply with where it goes. Pure apart from the counters and
//! the log lines; the socket loop ([`super`]) batches, sends and makes
//! replies durable.
//!
//! [`Decision`]: super::reply::Decision

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::Ordering;

use dhcproto::v4::MessageType;
use tracing::{debug, info, warn};

use super::Pending;
use super::leases::{LeaseTable, State};
use super::link::LinkDest;
use super::reply::{self, Config, Dest, Durability};
use super::status::Counters;
use crate::model::cluster::MacAddr;
use crate::runtime::lograte::LogRate;

/// The result of one datagram.
pub(super) struct Processed {
    pub(super) reply: Option<Pending>,
    pub(super) durability: Durability,
    /// The lease an ACK bound or renewed (for the install timeline).
    pub(super) bound: Option<Bound>,
}

/// A lease an ACK bound or renewed: the client's MAC and its expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Bound {
    pub(super) mac: MacAddr,
    pub(super) expires: u64,
}

/// Decode one datagram and count it (malformed ones are logged, rate
/// limited, and dropped; one without a message type is dropped): the
/// message, its type and the client's MAC as text (empty when it has none).
/// Shared by server and proxy mode.
pub(super) fn decode_counted(
    log: &LogRate,
    counters: &Counters,
    data: &[u8],
    src: SocketAddr,
) -> Option<(dhcproto::v4::Message, MessageType, String)> {
    let msg = match reply::decode(data) {
        Ok(m) => m,
        Err(e) => {
            counters.malformed.fetch_add(1, Ordering::Relaxed);
            warn_client(log, "malformed datagram", src, None, || {
                format!("{e}; dropped (see dropped_total{{reason=\"malformed\"}})")
            });
            return None;
        }
    };
    let kind = msg.opts().msg_type()?;
    counters.rx(kind);
    let mac = reply::mac_of(&msg)
        .map(|m| m.to_string())
        .unwrap_or_default();
    Some((msg, kind, mac))
}

/// Decode, decide and encode one datagram: the reply (if any) and whether
/// the lease table changed. Never panics on input.
pub(super) fn process(
    cfg: &Config,
    counters: &Counters,
    table: &mut LeaseTable,
    data: &[u8],
    src: SocketAddr,
    now: u64,
) -> Processed {
    let none = Processed {
        reply: None,
        durability: Durability::None,
        bound: None,
    };
    let Some((msg, kind, mac)) = decode_counted(&cfg.log, counters, data, src) else {
        return none;
    };
    let out = reply::handle(cfg, table, &msg, now);
    let durability = out.apply_marks(table);
    let none = Processed {
        reply: None,
        durability,
        bound: None,
    };
    match out {
        reply::Decision::Dropped((why, note)) => {
            dropped(&cfg.log, counters, why, src, &mac, kind, &note);
            none
        }
        reply::Decision::Silent(q) => {
            quiet(&cfg.log, counters, &q, src, &mac, kind);
            none
        }
        reply::Decision::Reply(a) => {
            log_answer(cfg, &a, &msg, src, &mac, kind);
            Processed {
                reply: Some(pending(cfg, &a.reply, &msg)),
                durability,
                bound: bound_by(&a.reply, table),
            }
        }
    }
}

/// The lease `reply` bound or renewed, when it is an ACK of an address
/// (an ACK to an INFORM binds nothing).
fn bound_by(reply: &reply::Reply, table: &LeaseTable) -> Option<Bound> {
    if reply.kind != MessageType::Ack {
        return None;
    }
    table
        .lease_at(reply.msg.yiaddr())
        .filter(|l| l.state == State::Bound)
        .map(|l| Bound {
            mac: l.mac,
            expires: l.expires,
        })
}

/// Count and warn about a request dropped before any decision.
fn dropped(
    log: &LogRate,
    counters: &Counters,
    why: reply::Dropped,
    src: SocketAddr,
    mac: &str,
    kind: MessageType,
    note: &str,
) {
    let (counter, key, metric) = match why {
        reply::Dropped::BadRelay => (&counters.bad_relay, "spoofed relay address", "bad_relay"),
        // At the default level, like dnsmasq's "no address range
        // available".
        reply::Dropped::UnknownSegment => (
            &counters.unknown_segment,
            "request from a subnet not served",
            "unknown_segment",
        ),
        reply::Dropped::UnknownRelay => (
            &counters.unknown_relay,
            "relay not configured",
            "unknown_relay",
        ),
    };
    counter.fetch_add(1, Ordering::Relaxed);
    warn_client(log, key, src, Some(mac), || {
        format!("{kind:?} dropped: {note} (see dropped_total{{reason=\"{metric}\"}})")
    });
}

/// Count and log a request that got no reply (RELEASE and DECLINE are
/// applied, an exhausted pool is warned about).
fn quiet(
    log: &LogRate,
    counters: &Counters,
    q: &reply::Quiet,
    src: SocketAddr,
    mac: &str,
    kind: MessageType,
) {
    if q.pool_exhausted {
        counters.pool_exhausted.fetch_add(1, Ordering::Relaxed);
        warn_client(log, "pool exhausted", src, Some(mac), || {
            format!("{kind:?}: {} (see pool_exhausted_total)", q.note)
        });
    }
    if matches!(kind, MessageType::Release | MessageType::Decline) {
        if kind == MessageType::Decline && q.durability == Durability::BeforeReply {
            warn_client(log, "address conflict (DECLINE)", src, Some(mac), || {
                q.note.clone()
            });
        } else {
            info!(%src, %mac, "dhcp: {}", q.note);
        }
    } else {
        counters.ignored.fetch_add(1, Ordering::Relaxed);
        debug!(%src, %mac, "dhcp {kind:?}: no reply: {}", q.note);
    }
}

/// Log a reply: a new binding at info with the node's name, a NAK or a
/// DECLINE at info, the rest at debug.
fn log_answer(
    cfg: &Config,
    a: &reply::Answer,
    msg: &dhcproto::v4::Message,
    src: SocketAddr,
    mac: &str,
    kind: MessageType,
) {
    if a.new_binding {
        let host = cfg
            .hostnames
            .get(&reply::mac_of(msg).unwrap_or(crate::model::cluster::MacAddr([0; 6])));
        info!(%mac, hostname = host.map(String::as_str).unwrap_or("-"), "dhcp: {}", a.note);
    } else if a.reply.kind == MessageType::Nak || kind == MessageType::Decline {
        info!(%src, %mac, "dhcp {kind:?}: {}", a.note);
    } else {
        debug!(%src, %mac, "dhcp {kind:?}: {}", a.note);
    }
}

/// Encode `r` and say where it goes.
fn pending(cfg: &Config, r: &reply::Reply, msg: &dhcproto::v4::Message) -> Pending {
    let broadcast = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::BROADCAST, cfg.client_port));
    let (to, link) = match r.dest {
        Dest::Broadcast => (broadcast, None),
        Dest::Unicast(a) => (SocketAddr::V4(a), None),
        Dest::Link { to, mac } => (
            broadcast,
            Some(LinkDest {
                from: SocketAddrV4::new(cfg.server_id, cfg.server_port),
                to,
                mac: mac.0,
            }),
        ),
    };
    Pending {
        bytes: reply::encode(r, msg),
        to,
        link,
        kind: r.kind,
    }
}

/// Log a warning `key` caused by the client at `src` when `log` (the
/// service's limiter) allows (with the count of the ones not logged), else
/// at debug.
pub(super) fn warn_client(
    log: &LogRate,
    key: &'static str,
    src: SocketAddr,
    mac: Option<&str>,
    detail: impl FnOnce() -> String,
) {
    let mac = mac.unwrap_or("-");
    match log.check(key, Some(src)) {
        Some(tail) => warn!(%mac, "dhcp: {key} from {src}: {}{tail}", detail()),
        None => debug!(%src, %mac, "dhcp: {key}: {}", detail()),
    }
}

#[cfg(test)]
mod tests {
    use dhcproto::Encodable as _;
    use dhcproto::v4::{DhcpOption, Message};

    use super::*;
    use crate::services::dhcp::leases::Scope;
    use crate::timeline::Event;

    const T0: u64 = 1_700_000_000;
    const M0: [u8; 6] = [0x52, 0x54, 0, 0, 0, 0x0a];

    fn plan() -> crate::plan::Plan {
        let text = "name: c\nbaseDomain: example.com\nnetwork: { cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.1 }\nnodes:\n  - { name: master-0, role: master, mac: '52:54:00:00:00:0a', ip: 10.0.0.10 }\ndhcp:\n  leaseTime: 1h\n";
        crate::config::from_str(text, std::path::Path::new("/"), std::path::Path::new("t")).unwrap()
    }

    fn msg(kind: MessageType, ciaddr: Ipv4Addr, opts: &[DhcpOption]) -> Vec<u8> {
        let u = Ipv4Addr::UNSPECIFIED;
        let mut m = Message::new_with_id(0x1234, ciaddr, u, u, u, &M0);
        m.opts_mut().insert(DhcpOption::MessageType(kind));
        for o in opts {
            m.opts_mut().insert(o.clone());
        }
        m.to_vec().unwrap()
    }

    /// An ACK reports the lease it bound (the first, then each renewal);
    /// an OFFER none. The timeline counts the first lease and a renewal.
    #[test]
    fn each_bind_and_renewal_is_reported_once() {
        let p = plan();
        let c = &p.cluster;
        let cfg = Config::from_plan(&p, 67, super::super::test_log());
        let scope = Scope::new(
            c.network.cidr,
            c.dhcp.pool,
            p.reservations.iter().map(|r| (r.mac, r.ip)),
            3600,
        );
        let mut table = LeaseTable::new(scope);
        let counters = Counters::default();
        let src: SocketAddr = "0.0.0.0:68".parse().unwrap();
        let node_ip = Ipv4Addr::new(10, 0, 0, 10);
        let mut run = |data: &[u8], now| process(&cfg, &counters, &mut table, data, src, now);
        let u = Ipv4Addr::UNSPECIFIED;
        let offer = run(&msg(MessageType::Discover, u, &[]), T0);
        assert!(
            offer.reply.is_some() && offer.bound.is_none(),
            "an offer binds nothing"
        );
        let select = [
            DhcpOption::ServerIdentifier(cfg.server_id),
            DhcpOption::RequestedIpAddress(node_ip),
        ];
        let ack = run(&msg(MessageType::Request, u, &select), T0 + 1);
        let mac = MacAddr(M0);
        assert_eq!(
            ack.bound,
            Some(Bound {
                mac,
                expires: T0 + 1 + 3600
            })
        );
        let renew = run(&msg(MessageType::Request, node_ip, &[]), T0 + 1800);
        assert_eq!(
            renew.bound,
            Some(Bound {
                mac,
                expires: T0 + 1800 + 3600
            })
        );

        let events = crate::timeline::Recorder::new(&p);
        events.recorded();
        crate::services::dhcp::record_leases(
            &events,
            [ack.bound, renew.bound].into_iter().flatten(),
        );
        let lease = |expires| Event::Lease {
            node: "master-0".into(),
            expires,
        };
        assert_eq!(
            events.recorded(),
            [lease(T0 + 1 + 3600), lease(T0 + 1800 + 3600)]
        );
        let row = &events.view().nodes[0];
        assert!(row.lease.is_some());
        assert_eq!(row.lease_renewals, 1);
    }
}
