//! Unit tests of [`super`] (reply).

use super::super::leases::Scope;
use super::*;
use dhcproto::v4::{Flags, Opcode};
use dhcproto::{Decodable, Encodable};

const T0: u64 = 1_700_000_000;

fn plan(pool: bool, pxe: bool) -> Plan {
    let mut text = String::from(
        "name: c\nbaseDomain: example.com\nnetwork: { cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.1 }\nnodes:\n  - { name: master-0, role: master, mac: '52:54:00:00:00:0a', ip: 10.0.0.10 }\n  - { name: worker-0, role: worker, mac: '52:54:00:00:00:14', ip: 10.0.0.20 }\ndhcp:\n  leaseTime: 1h\n  relays: [10.0.0.2]\n",
    );
    if pool {
        text.push_str("  pool: { start: 10.0.0.100, end: 10.0.0.110 }\n");
    }
    if pxe {
        text.push_str(
            "  pxe: { bootFile: undionly.kpxe, ipxeScriptUrl: 'http://10.0.0.1:8080/boot.ipxe' }\n",
        );
    }
    crate::config::from_str(&text, std::path::Path::new("/"), std::path::Path::new("t")).unwrap()
}

fn setup(pool: bool, pxe: bool) -> (Config, LeaseTable) {
    let p = plan(pool, pxe);
    let c = &p.cluster;
    let scope = Scope::new(
        c.network.cidr,
        c.dhcp.pool,
        p.reservations.iter().map(|r| (r.mac, r.ip)),
        3600,
    );
    (
        Config::from_plan(&p, 67, crate::services::dhcp::test_log()),
        LeaseTable::new(scope),
    )
}

const M0: [u8; 6] = [0x52, 0x54, 0, 0, 0, 0x0a];
const UNKNOWN: [u8; 6] = [0x52, 0x54, 0, 9, 9, 9];

fn req(kind: MessageType, mac: [u8; 6]) -> Message {
    let u = Ipv4Addr::UNSPECIFIED;
    let mut m = Message::new_with_id(0x1234, u, u, u, u, &mac);
    m.opts_mut().insert(DhcpOption::MessageType(kind));
    m.opts_mut().insert(DhcpOption::ParameterRequestList(vec![
        OptionCode::Hostname,
        OptionCode::SubnetMask,
        OptionCode::Router,
        OptionCode::DomainNameServer,
        OptionCode::DomainName,
    ]));
    m
}

/// Through the wire format both ways, as the server does.
fn roundtrip(
    cfg: &Config,
    t: &mut LeaseTable,
    m: &Message,
    now: u64,
) -> (Decision, Option<Message>) {
    let bytes = m.to_vec().unwrap();
    let parsed = decode(&bytes).expect("valid request");
    let out = handle(cfg, t, &parsed, now);
    out.apply_marks(t);
    let reply = out.sent().map(|r| {
        let b = encode(r, &parsed);
        assert!(b.len() >= MIN_LEN);
        Message::from_bytes(&b).expect("reply decodes")
    });
    (out, reply)
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

#[test]
fn full_dora_for_a_reservation() {
    let (cfg, mut t) = setup(false, false);
    let mut d = req(MessageType::Discover, M0);
    d.set_flags(Flags::default().set_broadcast());
    let (out, offer) = roundtrip(&cfg, &mut t, &d, T0);
    let offer = offer.expect("offer");
    assert_eq!(offer.opts().msg_type(), Some(MessageType::Offer));
    assert_eq!(offer.opcode(), Opcode::BootReply);
    assert_eq!(offer.xid(), 0x1234);
    assert_eq!(offer.yiaddr(), ip("10.0.0.10"));
    assert_eq!(offer.chaddr(), &M0);
    assert!(offer.flags().broadcast());
    assert_eq!(out.sent().unwrap().dest, Dest::Broadcast);
    assert!(out.durability() != Durability::BeforeReply);
    let o = offer.opts();
    assert_eq!(
        o.get(OptionCode::ServerIdentifier),
        Some(&DhcpOption::ServerIdentifier(ip("10.0.0.1")))
    );
    assert_eq!(
        o.get(OptionCode::Hostname),
        Some(&DhcpOption::Hostname("master-0".into()))
    );
    assert_eq!(
        o.get(OptionCode::SubnetMask),
        Some(&DhcpOption::SubnetMask(ip("255.255.255.0")))
    );
    assert_eq!(
        o.get(OptionCode::Router),
        Some(&DhcpOption::Router(vec![ip("10.0.0.254")]))
    );
    assert_eq!(
        o.get(OptionCode::DomainNameServer),
        Some(&DhcpOption::DomainNameServer(vec![ip("10.0.0.1")]))
    );
    assert_eq!(
        o.get(OptionCode::DomainName),
        Some(&DhcpOption::DomainName("c.example.com".into()))
    );
    assert_eq!(
        o.get(OptionCode::AddressLeaseTime),
        Some(&DhcpOption::AddressLeaseTime(3600))
    );
    assert_eq!(o.get(OptionCode::Renewal), Some(&DhcpOption::Renewal(1800)));
    assert_eq!(
        o.get(OptionCode::Rebinding),
        Some(&DhcpOption::Rebinding(3150))
    );

    let mut r = req(MessageType::Request, M0);
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.10")));
    r.opts_mut()
        .insert(DhcpOption::ServerIdentifier(ip("10.0.0.1")));
    let (out, ack) = roundtrip(&cfg, &mut t, &r, T0 + 1);
    let ack = ack.expect("ack");
    assert_eq!(ack.opts().msg_type(), Some(MessageType::Ack));
    assert_eq!(ack.yiaddr(), ip("10.0.0.10"));
    assert!(
        out.durability() == Durability::Lazy,
        "a reserved node's first ACK must not wait for the lease file"
    );
    let l = t.lease_at(ip("10.0.0.10")).unwrap();
    assert_eq!(l.state_name(T0 + 2), "bound");
    assert_eq!(l.expires, T0 + 1 + 3600);

    // RENEWING: unicast from ciaddr, answered by unicast; lazy too, whether
    // or not the first binding reached the disk yet.
    let mut renew = req(MessageType::Request, M0);
    renew.set_ciaddr(ip("10.0.0.10"));
    let (out, _) = roundtrip(&cfg, &mut t, &renew, T0 + 2);
    assert!(out.durability() == Durability::Lazy);
    let (out, ack) = roundtrip(&cfg, &mut t, &renew, T0 + 1800);
    assert_eq!(ack.unwrap().ciaddr(), ip("10.0.0.10"));
    assert!(
        out.durability() == Durability::Lazy,
        "a node renewing its reserved lease needs no write before the ACK"
    );
    assert_eq!(
        out.sent().unwrap().dest,
        Dest::Unicast(SocketAddrV4::new(ip("10.0.0.10"), 68))
    );
    assert_eq!(
        t.lease_at(ip("10.0.0.10")).unwrap().expires,
        T0 + 1800 + 3600
    );

    // RELEASE frees it.
    let mut rel = req(MessageType::Release, M0);
    rel.set_ciaddr(ip("10.0.0.10"));
    rel.opts_mut()
        .insert(DhcpOption::ServerIdentifier(ip("10.0.0.1")));
    let (out, none) = roundtrip(&cfg, &mut t, &rel, T0 + 1900);
    assert!(none.is_none() && out.durability() == Durability::BeforeReply);
    assert_eq!(
        t.lease_at(ip("10.0.0.10")).unwrap().state_name(T0 + 1900),
        "released"
    );
}

#[test]
fn options_follow_the_parameter_request_list() {
    let (cfg, mut t) = setup(false, false);
    let d = req(MessageType::Discover, M0);
    let out = handle(&cfg, &mut t, &d, T0);
    let b = encode(out.sent().unwrap(), &d);
    let mut codes = Vec::new();
    let mut i = 240;
    while i < b.len() && b[i] != 255 {
        codes.push(b[i]);
        i += 2 + b[i + 1] as usize;
    }
    assert_eq!(&codes[..7], &[53, 54, 12, 1, 3, 6, 15], "{codes:?}");
    assert!(b.len() >= MIN_LEN);
}

#[test]
fn unknown_mac_is_ignored_without_a_pool_and_served_with_one() {
    let (cfg, mut t) = setup(false, false);
    for kind in [
        MessageType::Discover,
        MessageType::Request,
        MessageType::Inform,
    ] {
        let mut m = req(kind, UNKNOWN);
        m.opts_mut()
            .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.10")));
        m.set_ciaddr(ip("10.0.0.50"));
        assert!(roundtrip(&cfg, &mut t, &m, T0).1.is_none(), "{kind:?}");
    }
    let (cfg, mut t) = setup(true, false);
    let mut d = req(MessageType::Discover, UNKNOWN);
    d.opts_mut().insert(DhcpOption::ClientIdentifier(vec![
        1, 0x52, 0x54, 0, 9, 9, 9,
    ]));
    let offer = roundtrip(&cfg, &mut t, &d, T0).1.unwrap();
    assert_eq!(offer.yiaddr(), ip("10.0.0.100"));
    assert_eq!(offer.opts().get(OptionCode::Hostname), None);
    assert_eq!(
        offer.opts().get(OptionCode::ClientIdentifier),
        Some(&DhcpOption::ClientIdentifier(vec![
            1, 0x52, 0x54, 0, 9, 9, 9
        ])),
        "client id echoed (RFC 6842)"
    );
    // A pool binding is on disk before its ACK, and so is every renewal.
    let mut r = d.clone();
    r.opts_mut()
        .insert(DhcpOption::MessageType(MessageType::Request));
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.100")));
    let (out, ack) = roundtrip(&cfg, &mut t, &r, T0 + 1);
    assert_eq!(ack.unwrap().opts().msg_type(), Some(MessageType::Ack));
    assert!(out.durability() == Durability::BeforeReply);
    let _ = t.take_unsynced(); // written
    let mut renew = r.clone();
    renew.opts_mut().remove(OptionCode::RequestedIpAddress);
    renew.set_ciaddr(ip("10.0.0.100"));
    let (out, _) = roundtrip(&cfg, &mut t, &renew, T0 + 1800);
    assert!(out.durability() == Durability::BeforeReply);
}

#[test]
fn nak_for_a_wrong_requested_address() {
    let (cfg, mut t) = setup(true, false);
    // INIT-REBOOT of a node asking for another node's address.
    let mut r = req(MessageType::Request, M0);
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.20")));
    let (out, nak) = roundtrip(&cfg, &mut t, &r, T0);
    let nak = nak.unwrap();
    assert_eq!(nak.opts().msg_type(), Some(MessageType::Nak));
    assert_eq!(nak.yiaddr(), Ipv4Addr::UNSPECIFIED);
    assert_eq!(out.sent().unwrap().dest, Dest::Broadcast);
    assert!(
        out.note().contains("reserved address is 10.0.0.10"),
        "{}",
        out.note()
    );
    // ... or a pool address, or an address on another network.
    for bad in ["10.0.0.100", "192.168.1.5"] {
        let mut r = req(MessageType::Request, M0);
        r.opts_mut().insert(DhcpOption::RequestedIpAddress(ip(bad)));
        assert_eq!(
            roundtrip(&cfg, &mut t, &r, T0).1.unwrap().opts().msg_type(),
            Some(MessageType::Nak)
        );
    }
    // RENEWING with someone else's address.
    let mut r = req(MessageType::Request, UNKNOWN);
    r.set_ciaddr(ip("10.0.0.20"));
    assert_eq!(
        roundtrip(&cfg, &mut t, &r, T0).1.unwrap().opts().msg_type(),
        Some(MessageType::Nak)
    );
    // SELECTING with our id but not the offered address.
    let mut r = req(MessageType::Request, M0);
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.11")));
    r.opts_mut()
        .insert(DhcpOption::ServerIdentifier(ip("10.0.0.1")));
    assert_eq!(
        roundtrip(&cfg, &mut t, &r, T0).1.unwrap().opts().msg_type(),
        Some(MessageType::Nak)
    );
    // INIT-REBOOT with the right address: ACK.
    let mut r = req(MessageType::Request, M0);
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.10")));
    assert_eq!(
        roundtrip(&cfg, &mut t, &r, T0).1.unwrap().opts().msg_type(),
        Some(MessageType::Ack)
    );
}

#[test]
fn request_for_another_server_drops_our_offer() {
    let (cfg, mut t) = setup(true, false);
    let d = req(MessageType::Discover, UNKNOWN);
    let offer = roundtrip(&cfg, &mut t, &d, T0).1.unwrap();
    assert!(t.lease_at(offer.yiaddr()).is_some());
    let mut r = req(MessageType::Request, UNKNOWN);
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.77")));
    r.opts_mut()
        .insert(DhcpOption::ServerIdentifier(ip("10.0.0.2")));
    let (out, none) = roundtrip(&cfg, &mut t, &r, T0 + 1);
    assert!(none.is_none() && out.durability() != Durability::BeforeReply);
    assert!(t.lease_at(offer.yiaddr()).is_none());
}

#[test]
fn relayed_requests_are_answered_to_the_relay() {
    let (cfg, mut t) = setup(false, false);
    let mut d = req(MessageType::Discover, M0);
    d.set_giaddr(ip("10.0.0.2"));
    d.set_hops(1);
    let (out, offer) = roundtrip(&cfg, &mut t, &d, T0);
    let offer = offer.unwrap();
    assert_eq!(offer.giaddr(), ip("10.0.0.2"));
    assert_eq!(offer.hops(), 1);
    assert_eq!(
        out.sent().unwrap().dest,
        Dest::Unicast(SocketAddrV4::new(ip("10.0.0.2"), 67))
    );
    // A NAK through a relay sets the broadcast bit.
    let mut r = req(MessageType::Request, M0);
    r.set_giaddr(ip("10.0.0.2"));
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.99")));
    let nak = roundtrip(&cfg, &mut t, &r, T0).1.unwrap();
    assert!(nak.flags().broadcast());
    // A relay on another network is not ours.
    let mut d = req(MessageType::Discover, M0);
    d.set_giaddr(ip("172.16.0.1"));
    assert!(roundtrip(&cfg, &mut t, &d, T0).1.is_none());
}

#[test]
fn inform_gets_configuration_only() {
    let (cfg, mut t) = setup(false, false);
    let mut m = req(MessageType::Inform, M0);
    m.set_ciaddr(ip("10.0.0.10"));
    let (out, ack) = roundtrip(&cfg, &mut t, &m, T0);
    let ack = ack.unwrap();
    assert_eq!(ack.opts().msg_type(), Some(MessageType::Ack));
    assert_eq!(ack.yiaddr(), Ipv4Addr::UNSPECIFIED);
    assert_eq!(ack.ciaddr(), ip("10.0.0.10"));
    assert_eq!(ack.opts().get(OptionCode::AddressLeaseTime), None);
    assert!(ack.opts().get(OptionCode::Router).is_some());
    assert_eq!(
        out.sent().unwrap().dest,
        Dest::Unicast(SocketAddrV4::new(ip("10.0.0.10"), 68))
    );
    assert!(t.leases().is_empty(), "INFORM allocates nothing");
}

#[test]
fn decline_quarantines_the_address() {
    let (cfg, mut t) = setup(true, false);
    let d = req(MessageType::Discover, UNKNOWN);
    let a = roundtrip(&cfg, &mut t, &d, T0).1.unwrap().yiaddr();
    let mut r = req(MessageType::Request, UNKNOWN);
    r.opts_mut().insert(DhcpOption::RequestedIpAddress(a));
    r.opts_mut()
        .insert(DhcpOption::ServerIdentifier(cfg.server_id));
    assert_eq!(roundtrip(&cfg, &mut t, &r, T0).1.unwrap().yiaddr(), a);
    // A pool lease's renewal is written before its ACK.
    let mut renew = req(MessageType::Request, UNKNOWN);
    renew.set_ciaddr(a);
    let (out, ack) = roundtrip(&cfg, &mut t, &renew, T0);
    assert_eq!(ack.unwrap().opts().msg_type(), Some(MessageType::Ack));
    assert!(out.durability() == Durability::BeforeReply);
    let mut dec = req(MessageType::Decline, UNKNOWN);
    dec.opts_mut().insert(DhcpOption::RequestedIpAddress(a));
    dec.opts_mut()
        .insert(DhcpOption::ServerIdentifier(cfg.server_id));
    let (out, none) = roundtrip(&cfg, &mut t, &dec, T0 + 1);
    assert!(none.is_none() && out.durability() == Durability::BeforeReply);
    let b = roundtrip(&cfg, &mut t, &d, T0 + 2).1.unwrap().yiaddr();
    assert_ne!(a, b);
}

#[test]
fn pxe_and_ipxe_boot_files() {
    let (cfg, mut t) = setup(false, true);
    // An installed OS's client (no PXE vendor class, not iPXE) gets no boot
    // options (they used to go to every client).
    let plain = roundtrip(&cfg, &mut t, &req(MessageType::Discover, M0), T0)
        .1
        .unwrap();
    assert_eq!(plain.opts().get(OptionCode::BootfileName), None);
    assert_eq!(plain.siaddr(), ip("0.0.0.0"));
    let mut d = req(MessageType::Discover, M0);
    d.opts_mut().insert(DhcpOption::ClassIdentifier(
        b"PXEClient:Arch:00000:UNDI:002001".to_vec(),
    ));
    let o = roundtrip(&cfg, &mut t, &d, T0).1.unwrap();
    assert_eq!(o.siaddr(), ip("10.0.0.1"));
    let fname = |m: &Message| {
        String::from_utf8_lossy(m.fname().unwrap_or_default())
            .trim_end_matches('\0')
            .to_string()
    };
    assert_eq!(fname(&o), "undionly.kpxe");
    let mut d = req(MessageType::Discover, M0);
    d.opts_mut().insert(DhcpOption::UserClass(b"iPXE".to_vec()));
    let o = roundtrip(&cfg, &mut t, &d, T0).1.unwrap();
    assert_eq!(fname(&o), "http://10.0.0.1:8080/boot.ipxe");
    assert_eq!(
        o.opts().get(OptionCode::BootfileName),
        Some(&DhcpOption::BootfileName(
            b"http://10.0.0.1:8080/boot.ipxe".to_vec()
        ))
    );
    // A URL longer than the 128-byte header field goes in option 67 only.
    let mut cfg = cfg;
    let long = format!("http://10.0.0.1:8080/{}", "x".repeat(200));
    cfg.pxe.as_mut().unwrap().ipxe_script_url = Some(long.clone());
    let o = roundtrip(&cfg, &mut t, &d, T0).1.unwrap();
    assert_eq!(fname(&o), "");
    assert_eq!(
        o.opts().get(OptionCode::BootfileName),
        Some(&DhcpOption::BootfileName(long.into_bytes()))
    );
}

/// The data of option `code` in an encoded message (read by hand:
/// dhcproto cannot read an ASCII option 81).
fn raw_option(b: &[u8], code: u8) -> Option<Vec<u8>> {
    let mut i = 240;
    while let Some(&c) = b.get(i) {
        match c {
            0 => i += 1,
            255 => return None,
            _ => {
                let len = usize::from(*b.get(i + 1)?);
                if c == code {
                    return b.get(i + 2..i + 2 + len).map(<[u8]>::to_vec);
                }
                i += 2 + len;
            }
        }
    }
    None
}

/// `m` encoded with option 81 (`data`) as its first option, before the
/// requested address and server id, as Windows clients place it.
fn with_fqdn_first(m: &Message, data: &[u8]) -> Vec<u8> {
    let mut b = m.to_vec().unwrap();
    let mut opt = vec![81, u8::try_from(data.len()).unwrap()];
    opt.extend_from_slice(data);
    b.splice(240..240, opt);
    b
}

/// Audit D6: a REQUEST with option 81 in the ASCII form (E = 0, RFC 4702
/// §2.3.1) was dropped: dhcproto read the name as wire format, failed,
/// and lost the options after it (50, 54). Both forms are answered now,
/// each in the client's encoding.
#[test]
fn client_fqdn_in_either_encoding_is_answered_in_that_encoding() {
    let ascii: &[u8] = b"\x01\x00\x00winbox.example.org";
    for (mac, data, expect) in [
        // A pool client: its own name echoed; S asked → O set; N set.
        (UNKNOWN, ascii, &b"\x0a\xff\xffwinbox.example.org"[..]),
        // A node: the name its DNS serves, fully qualified.
        (M0, ascii, &b"\x0a\xff\xffmaster-0.c.example.com."[..]),
        // Wire form, a partial name (no root label).
        (
            UNKNOWN,
            &b"\x04\x00\x00\x06winbox"[..],
            &b"\x0c\xff\xff\x06winbox"[..],
        ),
        (
            M0,
            &b"\x04\x00\x00\x06winbox"[..],
            &b"\x0c\xff\xff\x08master-0\x01c\x07example\x03com\x00"[..],
        ),
    ] {
        let (cfg, mut t) = setup(true, false);
        let d = req(MessageType::Discover, mac);
        let parsed = decode(&with_fqdn_first(&d, data)).unwrap();
        let out = handle(&cfg, &mut t, &parsed, T0);
        let offer = encode(out.sent().unwrap(), &parsed);
        assert_eq!(raw_option(&offer, 81).as_deref(), Some(expect));
        let yiaddr = Message::from_bytes(&offer).unwrap().yiaddr();
        let mut r = req(MessageType::Request, mac);
        r.opts_mut().insert(DhcpOption::RequestedIpAddress(yiaddr));
        r.opts_mut()
            .insert(DhcpOption::ServerIdentifier(cfg.server_id));
        let bytes = with_fqdn_first(&r, data);
        let parsed = decode(&bytes).unwrap();
        let out = handle(&cfg, &mut t, &parsed, T0 + 1);
        let reply = out.sent().expect("an answer to the REQUEST");
        assert_eq!(reply.kind, MessageType::Ack, "{}", out.note());
        let ack = encode(reply, &parsed);
        assert_eq!(raw_option(&ack, 81).as_deref(), Some(expect));
        // 81 goes last (it was not requested): options before it decode.
        assert_eq!(Message::from_bytes(&ack).unwrap().yiaddr(), yiaddr);
    }
    // What went wrong: dhcproto's own decoder loses the server id behind
    // an ASCII option 81 (so the REQUEST looked like one for another
    // server).
    let mut r = req(MessageType::Request, UNKNOWN);
    r.opts_mut()
        .insert(DhcpOption::ServerIdentifier(ip("10.0.0.1")));
    let m = Message::from_bytes(&with_fqdn_first(&r, ascii)).unwrap();
    assert_eq!(m.opts().get(OptionCode::ServerIdentifier), None);
    // An option 81 that is invalid in its encoding is ignored, the
    // request is not.
    let (cfg, mut t) = setup(true, false);
    let d = req(MessageType::Discover, UNKNOWN);
    let parsed = decode(&with_fqdn_first(&d, b"\x00\x00\x00bad name")).unwrap();
    let offer = encode(handle(&cfg, &mut t, &parsed, T0).sent().unwrap(), &parsed);
    assert_eq!(raw_option(&offer, 81), None);
    // A too-short one too (it used to make the datagram malformed).
    assert!(decode(&with_fqdn_first(&d, b"\x00")).is_ok());
}

#[test]
fn an_exhausted_pool_is_reported() {
    let (cfg, mut t) = setup(true, false);
    // The pool is 10.0.0.100-110: eleven offers take it (held 30 s).
    for i in 0..11u8 {
        let out = handle(
            &cfg,
            &mut t,
            &req(MessageType::Discover, [0x52, 0x54, 0, 8, 0, i]),
            T0,
        );
        assert!(
            out.sent().is_some() && !out.pool_exhausted(),
            "{i}: {}",
            out.note()
        );
    }
    let out = handle(&cfg, &mut t, &req(MessageType::Discover, UNKNOWN), T0);
    assert!(out.sent().is_none());
    assert!(out.pool_exhausted());
    assert!(
        out.note().contains("pool of 10.0.0.0/24 is exhausted"),
        "{}",
        out.note()
    );
    // A node is still served.
    let out = handle(&cfg, &mut t, &req(MessageType::Discover, M0), T0);
    assert!(out.sent().is_some() && !out.pool_exhausted());
}

#[test]
fn malformed_requests_are_rejected_by_decode() {
    assert!(matches!(decode(&[]), Err(Malformed::Decode(_))));
    assert!(matches!(decode(&[0u8; 300]), Err(Malformed::Magic)));
    let mut m = req(MessageType::Discover, M0);
    m.set_opcode(Opcode::BootReply);
    assert_eq!(
        decode(&m.to_vec().unwrap()).unwrap_err(),
        Malformed::NotRequest
    );
    let mut b = req(MessageType::Discover, M0).to_vec().unwrap();
    b[2] = 200; // hlen > 16 would make dhcproto's chaddr() panic
    assert!(matches!(decode(&b), Err(Malformed::Hardware(..))));
    let m = Message::new_with_id(
        1,
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::UNSPECIFIED,
        &M0,
    );
    let mut b = m.to_vec().unwrap();
    b.push(255);
    assert_eq!(decode(&b).unwrap_err(), Malformed::NoMessageType);
}

/// Deterministic fuzzing: random datagrams and mutations of valid ones
/// through decode + handle + encode must never panic.
#[test]
fn fuzz_decode_and_handle_never_panic() {
    let mut seed: u64 = std::env::var("DHCP_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15);
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (cfg, mut t) = setup(true, true);
    let mut valid = Vec::new();
    for kind in [
        MessageType::Discover,
        MessageType::Request,
        MessageType::Release,
        MessageType::Decline,
        MessageType::Inform,
    ] {
        let mut m = req(kind, M0);
        m.opts_mut()
            .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.10")));
        m.opts_mut()
            .insert(DhcpOption::ClientIdentifier(vec![1, 2, 3]));
        m.opts_mut().insert(DhcpOption::UserClass(b"iPXE".to_vec()));
        m.opts_mut()
            .insert(DhcpOption::Hostname("h\u{0}\u{7f}ost".into()));
        m.opts_mut()
            .insert(DhcpOption::Unknown(dhcproto::v4::UnknownOption::new(
                OptionCode::ClientFQDN,
                b"\x01\x00\x00host.example.org".to_vec(),
            )));
        valid.push(m.to_vec().unwrap());
    }
    let mut handled = 0;
    let iters: u64 = std::env::var("DHCP_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60_000);
    for i in 0..iters {
        let buf: Vec<u8> = if i % 4 == 0 {
            let len = (rnd() % 700) as usize;
            (0..len).map(|_| rnd() as u8).collect()
        } else if i % 4 == 1 {
            // A valid header and message type, then random TLV options
            // (every option code, lengths that may overrun).
            let mut b = valid[0][..240].to_vec();
            b.extend_from_slice(&[53, 1, 1 + (rnd() % 8) as u8]);
            for _ in 0..(rnd() % 12) {
                let code = rnd() as u8;
                let len = (rnd() % 40) as u8;
                b.push(code);
                b.push(len);
                let real = if rnd() % 8 == 0 {
                    rnd() % 40
                } else {
                    u64::from(len)
                };
                b.extend((0..real).map(|_| rnd() as u8));
            }
            if rnd() % 2 == 0 {
                b.push(255);
            }
            b
        } else {
            let mut b = valid[(rnd() % valid.len() as u64) as usize].clone();
            for _ in 0..(1 + rnd() % 8) {
                let pos = (rnd() as usize) % b.len();
                match rnd() % 4 {
                    0 => b[pos] = rnd() as u8,
                    1 => b.truncate(pos.max(1)),
                    2 => b.insert(pos, rnd() as u8),
                    _ => {
                        // Keep the header sane so the options get exercised.
                        if pos >= 240 {
                            b[pos] = rnd() as u8;
                        }
                    }
                }
            }
            b
        };
        if let Ok(m) = decode(&buf) {
            let out = handle(&cfg, &mut t, &m, T0 + i);
            if let Some(r) = out.sent() {
                let bytes = encode(r, &m);
                assert!(bytes.len() >= MIN_LEN);
            }
            handled += 1;
        }
    }
    assert!(
        handled > 1000,
        "the mutations should often stay decodable ({handled})"
    );
}

#[test]
fn a_client_without_an_address_that_cleared_the_broadcast_flag_gets_a_link_unicast() {
    let (cfg, mut t) = setup(false, false);
    // Broadcast flag clear (the request's default here): unicast to yiaddr
    // at the client's MAC, for the OFFER and the ACK alike.
    let d = req(MessageType::Discover, M0);
    assert!(!d.flags().broadcast());
    let (out, offer) = roundtrip(&cfg, &mut t, &d, T0);
    assert!(!offer.unwrap().flags().broadcast());
    let link = Dest::Link {
        to: SocketAddrV4::new(ip("10.0.0.10"), 68),
        mac: crate::model::cluster::MacAddr(M0),
    };
    assert_eq!(out.sent().unwrap().dest, link);
    let mut r = req(MessageType::Request, M0);
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.10")));
    r.opts_mut()
        .insert(DhcpOption::ServerIdentifier(ip("10.0.0.1")));
    let (out, ack) = roundtrip(&cfg, &mut t, &r, T0);
    assert_eq!(ack.unwrap().opts().msg_type(), Some(MessageType::Ack));
    assert_eq!(out.sent().unwrap().dest, link);
    // A NAK is always broadcast, whatever the flag.
    let mut wrong = req(MessageType::Request, M0);
    wrong
        .opts_mut()
        .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.20")));
    let (out, _) = roundtrip(&cfg, &mut t, &wrong, T0);
    assert_eq!(out.sent().unwrap().dest, Dest::Broadcast);
    // (An Ethernet request whose hlen is not 6 never gets here: decode
    // refuses it, see malformed_requests_are_rejected_by_decode.)
    let mut flagged = req(MessageType::Discover, M0);
    flagged.set_flags(Flags::default().set_broadcast());
    let (out, _) = roundtrip(&cfg, &mut t, &flagged, T0);
    assert_eq!(out.sent().map(|r| r.dest), Some(Dest::Broadcast));
}

/// Option 42 names the appliance's NTP address while `ntp:` is on, and is
/// absent otherwise (the answers stay as they were).
#[test]
fn option_42_names_the_ntp_server_only_when_ntp_is_on() {
    let (cfg, mut t) = setup(false, false);
    assert_eq!(cfg.ntp, None);
    let (_, r) = roundtrip(&cfg, &mut t, &req(MessageType::Discover, M0), T0);
    assert!(r.unwrap().opts().get(OptionCode::NtpServers).is_none());

    let mut p = plan(false, false);
    let base = p.cluster.network.appliance_ip;
    p.cluster.ntp = Some(crate::model::cluster::NtpCfg {
        enabled: true,
        listen: "0.0.0.0:123".parse().unwrap(),
        local_stratum: None,
        client_rate: 8,
        allow_from: None,
    });
    let cfg = Config::from_plan(&p, 67, crate::services::dhcp::test_log());
    assert_eq!(cfg.ntp, Some(base));
    let (_, r) = roundtrip(&cfg, &mut t, &req(MessageType::Discover, M0), T0);
    match r.unwrap().opts().get(OptionCode::NtpServers) {
        Some(DhcpOption::NtpServers(v)) => assert_eq!(v, &vec![base]),
        other => panic!("option 42: {other:?}"),
    }
    p.cluster.ntp.as_mut().unwrap().listen = "10.0.0.3:123".parse().unwrap();
    assert_eq!(
        Config::from_plan(&p, 67, crate::services::dhcp::test_log()).ntp,
        Some(ip("10.0.0.3"))
    );
    p.cluster.ntp.as_mut().unwrap().enabled = false;
    assert_eq!(
        Config::from_plan(&p, 67, crate::services::dhcp::test_log()).ntp,
        None
    );
}
