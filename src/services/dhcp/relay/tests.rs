//! Unit tests of [`super`] (relay): refused relay addresses, subnet
//! selection, and the replies a relayed segment gets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;

use dhcproto::v4::relay::{RelayAgentInformation, RelayInfo};
use dhcproto::v4::{DhcpOption, Message, MessageType, OptionCode};

use super::super::leases::{LeaseTable, Scope};
use super::super::reply::{Config, Dest, Dropped, handle};
use crate::plan::Plan;

const T0: u64 = 1_700_000_000;
/// worker-1 lives on the relayed segment 10.77.0.0/24.
const W1: [u8; 6] = [0x52, 0x54, 0, 0, 0, 0x15];
const M0: [u8; 6] = [0x52, 0x54, 0, 0, 0, 0x0a];
const UNKNOWN: [u8; 6] = [0x52, 0x54, 0, 9, 9, 9];

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn setup() -> (Config, LeaseTable) {
    let text = "name: c\nbaseDomain: example.com\nnetwork: { cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.1 }\nnodes:\n  - { name: master-0, role: master, mac: '52:54:00:00:00:0a', ip: 10.0.0.10 }\n  - { name: worker-1, role: worker, mac: '52:54:00:00:00:15', ip: 10.77.0.21 }\ndhcp:\n  segments:\n    - { cidr: 10.77.0.0/24, gateway: 10.77.0.1, dns: [10.0.0.1, 10.0.0.2], pool: { start: 10.77.0.100, end: 10.77.0.101 } }\n  relays: [10.0.0.2, 10.0.0.3]\n";
    let p: Plan =
        crate::config::from_str(text, std::path::Path::new("/"), std::path::Path::new("t"))
            .unwrap();
    let c = &p.cluster;
    let scope = Scope::new(
        c.network.cidr,
        c.dhcp.pool,
        p.reservations.iter().map(|r| (r.mac, r.ip)),
        3600,
    )
    .with_segments(c.dhcp.segments.iter().map(|s| (s.cidr, s.pool)));
    (
        Config::from_plan(&p, 67, crate::services::dhcp::test_log()),
        LeaseTable::new(scope),
    )
}

fn req(kind: MessageType, mac: [u8; 6], giaddr: Ipv4Addr) -> Message {
    let u = Ipv4Addr::UNSPECIFIED;
    let mut m = Message::new_with_id(7, u, u, u, giaddr, &mac);
    m.opts_mut().insert(DhcpOption::MessageType(kind));
    m
}

#[test]
fn spoofed_relay_addresses_are_dropped() {
    let (cfg, mut t) = setup();
    for g in [
        "10.0.0.255",      // the network's broadcast
        "10.0.0.0",        // its network address
        "10.77.0.255",     // a segment's broadcast
        "10.0.0.1",        // the appliance itself
        "255.255.255.255", // limited broadcast
        "224.0.0.1",       // multicast
        "239.1.2.3",
        "240.0.0.1", // class E
        "127.0.0.1", // loopback on a non-loopback network
        "0.1.2.3",   // network 0/8
    ] {
        let d = req(MessageType::Discover, M0, ip(g));
        let out = handle(&cfg, &mut t, &d, T0);
        assert!(out.sent().is_none(), "{g}: answered");
        assert_eq!(
            out.why_dropped(),
            Some(Dropped::BadRelay),
            "{g}: {}",
            out.note()
        );
        // The option that selects a subnet does not launder the relay.
        let mut d = req(MessageType::Discover, W1, ip(g));
        d.opts_mut()
            .insert(DhcpOption::SubnetSelection(ip("10.77.0.0")));
        assert_eq!(
            handle(&cfg, &mut t, &d, T0).why_dropped(),
            Some(Dropped::BadRelay)
        );
    }
    // A relay on the local network itself is still fine.
    let d = req(MessageType::Discover, M0, ip("10.0.0.2"));
    assert!(handle(&cfg, &mut t, &d, T0).sent().is_some());
}

#[test]
fn a_node_on_a_relayed_segment_gets_the_segment_settings() {
    let (cfg, mut t) = setup();
    let relay = ip("10.77.0.1");
    let out = handle(&cfg, &mut t, &req(MessageType::Discover, W1, relay), T0);
    let offer = out.into_reply().expect("offer").msg;
    assert_eq!(offer.yiaddr(), ip("10.77.0.21"));
    let o = offer.opts();
    assert_eq!(
        o.get(OptionCode::SubnetMask),
        Some(&DhcpOption::SubnetMask(ip("255.255.255.0")))
    );
    assert_eq!(
        o.get(OptionCode::Router),
        Some(&DhcpOption::Router(vec![ip("10.77.0.1")]))
    );
    assert_eq!(
        o.get(OptionCode::BroadcastAddr),
        Some(&DhcpOption::BroadcastAddr(ip("10.77.0.255")))
    );
    assert_eq!(
        o.get(OptionCode::DomainNameServer),
        Some(&DhcpOption::DomainNameServer(vec![
            ip("10.0.0.1"),
            ip("10.0.0.2")
        ]))
    );
    assert_eq!(
        o.get(OptionCode::ServerIdentifier),
        Some(&DhcpOption::ServerIdentifier(ip("10.0.0.1")))
    );
    let mut r = req(MessageType::Request, W1, relay);
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(ip("10.77.0.21")));
    let ack = handle(&cfg, &mut t, &r, T0 + 1).into_reply().expect("ack");
    assert_eq!(ack.kind, MessageType::Ack);
    assert_eq!(
        ack.dest,
        Dest::Unicast(std::net::SocketAddrV4::new(relay, 67))
    );
    // The local network's node does not get an offer on the segment, nor
    // the segment's node on the local network.
    assert!(
        handle(&cfg, &mut t, &req(MessageType::Discover, M0, relay), T0)
            .sent()
            .is_none()
    );
    let local = req(MessageType::Discover, W1, Ipv4Addr::UNSPECIFIED);
    assert!(handle(&cfg, &mut t, &local, T0).sent().is_none());
    // An unknown client gets the segment's pool, not the local network's.
    let out = handle(
        &cfg,
        &mut t,
        &req(MessageType::Discover, UNKNOWN, relay),
        T0,
    );
    assert_eq!(
        out.into_reply().expect("pool offer").msg.yiaddr(),
        ip("10.77.0.100")
    );
}

#[test]
fn link_selection_and_subnet_selection_choose_the_subnet() {
    let (cfg, mut t) = setup();
    // A relay whose giaddr is on the local network, asking for the segment
    // by link selection (82/5).
    let mut d = req(MessageType::Discover, W1, ip("10.0.0.3"));
    let mut ra = RelayAgentInformation::default();
    ra.insert(RelayInfo::LinkSelection(ip("10.77.0.0")));
    d.opts_mut().insert(DhcpOption::RelayAgentInformation(ra));
    let offer = handle(&cfg, &mut t, &d, T0)
        .into_reply()
        .expect("offer")
        .msg;
    assert_eq!(offer.yiaddr(), ip("10.77.0.21"));
    // Option 118 the same way.
    let mut d = req(MessageType::Discover, W1, ip("10.0.0.3"));
    d.opts_mut()
        .insert(DhcpOption::SubnetSelection(ip("10.77.0.5")));
    assert!(handle(&cfg, &mut t, &d, T0).sent().is_some());
    // Selecting a subnet that is not served drops the request.
    let mut d = req(MessageType::Discover, W1, ip("10.77.0.1"));
    d.opts_mut()
        .insert(DhcpOption::SubnetSelection(ip("10.99.0.0")));
    let out = handle(&cfg, &mut t, &d, T0);
    assert_eq!(out.why_dropped(), Some(Dropped::UnknownSegment));
}

/// Replies go to giaddr: only configured relays (a segment's gateway,
/// `dhcp.relays`) are answered, else any host of the network could have
/// them reflected anywhere (audit D8: giaddr = a plain host).
#[test]
fn only_configured_relays_are_answered() {
    let (cfg, mut t) = setup();
    assert_eq!(
        cfg.relays,
        [ip("10.0.0.2"), ip("10.0.0.3"), ip("10.77.0.1")]
    );
    for (g, mac) in [("10.0.0.150", M0), ("10.77.0.5", W1), ("10.0.0.254", M0)] {
        let out = handle(&cfg, &mut t, &req(MessageType::Discover, mac, ip(g)), T0);
        assert!(out.sent().is_none(), "{g}: answered");
        assert_eq!(
            out.why_dropped(),
            Some(Dropped::UnknownRelay),
            "{g}: {}",
            out.note()
        );
        assert!(
            out.note().contains("not a configured relay"),
            "{}",
            out.note()
        );
        // Selecting a served subnet does not make the relay configured.
        let mut d = req(MessageType::Discover, W1, ip(g));
        d.opts_mut()
            .insert(DhcpOption::SubnetSelection(ip("10.77.0.0")));
        assert_eq!(
            handle(&cfg, &mut t, &d, T0).why_dropped(),
            Some(Dropped::UnknownRelay)
        );
    }
    // A segment's gateway and a dhcp.relays entry are answered.
    assert!(
        handle(
            &cfg,
            &mut t,
            &req(MessageType::Discover, W1, ip("10.77.0.1")),
            T0
        )
        .sent()
        .is_some()
    );
    assert!(
        handle(
            &cfg,
            &mut t,
            &req(MessageType::Discover, M0, ip("10.0.0.2")),
            T0
        )
        .sent()
        .is_some()
    );
    // Not relayed at all: the local network, as before.
    let local = req(MessageType::Discover, M0, Ipv4Addr::UNSPECIFIED);
    assert!(handle(&cfg, &mut t, &local, T0).sent().is_some());
}

#[test]
fn an_unknown_segment_is_dropped() {
    let (cfg, mut t) = setup();
    let out = handle(
        &cfg,
        &mut t,
        &req(MessageType::Discover, W1, ip("172.16.0.1")),
        T0,
    );
    assert!(out.sent().is_none());
    assert_eq!(out.why_dropped(), Some(Dropped::UnknownSegment));
    assert!(
        out.note().contains("no address range available"),
        "{}",
        out.note()
    );
}
