use super::*;
use crate::services::dhcp6::bindings::Scope;

const NODE: MacAddr = MacAddr([0x52, 0x54, 0, 0xab, 0xcd, 0xef]);

fn a(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn cfg() -> Config {
    Config {
        server_duid: ident::duid_ll(MacAddr([2, 0, 0, 0, 0, 0xaa])),
        dns: vec![a("fd00:10::2")],
        search: vec!["c1.example.com".into()],
        ntp: vec![a("fd00:10::2")],
        hostnames: HashMap::new(),
        relays: Vec::new(),
    }
}

fn table(pool: bool) -> Table {
    Table::new(Scope {
        prefix: a("fd00:10::"),
        prefix_len: 64,
        pool: pool.then(|| (a("fd00:10::1000"), a("fd00:10::10ff"))),
        reserved: [(NODE, a("fd00:10::10"))].into(),
        lease_time: 3600,
    })
}

fn msg(
    kind: MessageType,
    duid: &[u8],
    server: Option<&[u8]>,
    ia: Option<(u32, Option<Ipv6Addr>)>,
) -> Message {
    let mut m = Message::new_with_id(kind, [1, 2, 3]);
    m.opts_mut().insert(DhcpOption::ClientId(duid.to_vec()));
    if let Some(s) = server {
        m.opts_mut().insert(DhcpOption::ServerId(s.to_vec()));
    }
    if let Some((id, addr)) = ia {
        let mut ia = IANA {
            id,
            t1: 0,
            t2: 0,
            opts: Default::default(),
        };
        if let Some(x) = addr {
            ia.opts.insert(iaaddr(x, 0));
        }
        m.opts_mut().insert(DhcpOption::IANA(ia));
    }
    // Through the wire format, as the socket layer sees it.
    decode(&encode(&m)).unwrap()
}

/// `o79`: relayed with that option 79 (from `peer`, default `fe80::1`);
/// else on the link from `peer` without a frame source; neither: an honest
/// client on the link, whose frame comes from the MAC its DUID names.
fn run(t: &mut Table, m: &Message, peer: Option<&str>, o79: Option<&[u8]>) -> Outcome {
    let duid = match m.opts().get(OptionCode::ClientId) {
        Some(DhcpOption::ClientId(d)) => d.clone(),
        _ => Vec::new(),
    };
    let seen = match (peer, o79) {
        (_, Some(o)) => Seen::Relayed {
            option79: Some(o),
            peer: a(peer.unwrap_or("fe80::1")),
        },
        (Some(p), None) => Seen::Direct {
            frame: None,
            source: Some(a(p)),
        },
        (None, None) => Seen::Direct {
            frame: ident::mac_from_duid(&duid),
            source: None,
        },
    };
    run_seen(t, m, seen)
}

/// A decision flattened for the assertions: the reply (if any), whether
/// it was a drop, and what it did.
#[derive(Debug)]
struct Outcome {
    reply: Option<Message>,
    dropped: bool,
    durability: Durability,
    mac: Option<(MacAddr, MacSource)>,
    refused: Option<NoAddress>,
    new_binding: bool,
    decline_refused: Option<DeclineRefused>,
}

fn run_seen(t: &mut Table, m: &Message, seen: Seen<'_>) -> Outcome {
    let d = handle(&cfg(), t, &Request { msg: m, seen }, 1000);
    let done = d.done().cloned().unwrap_or_default();
    Outcome {
        reply: d.sent().cloned(),
        dropped: d.is_dropped(),
        durability: d.durability(),
        mac: done.mac,
        refused: done.refused,
        new_binding: done.new_binding,
        decline_refused: done.decline_refused,
    }
}

fn addrs_of(r: &Message) -> Vec<(Ipv6Addr, u32)> {
    ias(r)
        .iter()
        .flat_map(|ia| {
            ia.opts
                .iter()
                .filter_map(|o| match o {
                    DhcpOption::IAAddr(x) => Some((x.addr, x.valid_life)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

const LL: [u8; 10] = [0, 3, 0, 1, 0x52, 0x54, 0, 0xab, 0xcd, 0xef];
const LLT: [u8; 14] = [0, 1, 0, 1, 1, 2, 3, 4, 0x52, 0x54, 0, 0xab, 0xcd, 0xef];
const EN: [u8; 7] = [0, 2, 0, 0, 0, 9, 7];

#[test]
fn solicit_request_renew_with_options() {
    let mut t = table(false);
    let o = run(
        &mut t,
        &msg(MessageType::Solicit, &LLT, None, Some((5, None))),
        None,
        None,
    );
    let adv = o.reply.unwrap();
    assert_eq!(adv.msg_type(), MessageType::Advertise);
    assert_eq!(addrs_of(&adv), vec![(a("fd00:10::10"), 3600)]);
    assert_eq!(o.durability, Durability::None, "an Advertise binds nothing");
    assert!(
        matches!(adv.opts().get(OptionCode::DomainNameServers), Some(DhcpOption::DomainNameServers(d)) if d == &[a("fd00:10::2")])
    );
    assert!(adv.opts().get(OptionCode::DomainSearchList).is_some());
    assert!(adv.opts().get(OptionCode::NtpServer).is_some());
    assert!(matches!(
        adv.opts().get(OptionCode::Preference),
        Some(DhcpOption::Preference(255))
    ));
    let sid = cfg().server_duid;
    let o = run(
        &mut t,
        &msg(
            MessageType::Request,
            &LLT,
            Some(&sid),
            Some((5, Some(a("fd00:10::99")))),
        ),
        None,
        None,
    );
    let rep = o.reply.unwrap();
    assert_eq!(rep.msg_type(), MessageType::Reply);
    assert_eq!(addrs_of(&rep), vec![(a("fd00:10::10"), 3600)]);
    assert_eq!(
        o.durability,
        Durability::Lazy,
        "a reservation is answered at once"
    );
    assert!(o.new_binding);
    // Renew with a stale second address: that one gets lifetime 0.
    let mut m = msg(
        MessageType::Renew,
        &LLT,
        Some(&sid),
        Some((5, Some(a("fd00:10::10")))),
    );
    if let Some(DhcpOption::IANA(ia)) = m.opts_mut().get_mut(OptionCode::IANA) {
        ia.opts.insert(iaaddr(a("fd00:10::77"), 100));
    }
    let rep = run(&mut t, &m, None, None).reply.unwrap();
    let mut got = addrs_of(&rep);
    got.sort();
    assert_eq!(got, vec![(a("fd00:10::10"), 3600), (a("fd00:10::77"), 0)]);
}

#[test]
fn another_duid_of_the_same_mac_gets_the_same_address() {
    let mut t = table(false);
    for duid in [&LLT[..], &LL[..]] {
        let o = run(
            &mut t,
            &msg(MessageType::Solicit, duid, None, Some((1, None))),
            None,
            None,
        );
        assert_eq!(addrs_of(&o.reply.unwrap()), vec![(a("fd00:10::10"), 3600)]);
    }
    // An opaque DUID: found by the relay's option 79, or by the EUI-64
    // link-local address; then by the earlier binding alone.
    let o79 = [0, 1, 0x52, 0x54, 0, 0xab, 0xcd, 0xef];
    let o = run(
        &mut t,
        &msg(MessageType::Solicit, &EN, None, Some((1, None))),
        None,
        Some(&o79),
    );
    assert_eq!(o.mac, Some((NODE, MacSource::Relay)));
    assert!(o.reply.is_some());
    let o = run(
        &mut t,
        &msg(MessageType::Solicit, &EN, None, Some((1, None))),
        Some("fe80::5054:ff:feab:cdef"),
        None,
    );
    assert_eq!(o.mac, Some((NODE, MacSource::LinkLocal)));
    let sid = cfg().server_duid;
    let m = msg(MessageType::Request, &EN, Some(&sid), Some((1, None)));
    run(&mut t, &m, Some("fe80::5054:ff:feab:cdef"), None)
        .reply
        .unwrap();
    // Behind a relay the earlier binding vouches; on the link it does not
    // (any host can send the DUID).
    let relayed = Seen::Relayed {
        option79: None,
        peer: a("fe80::1"),
    };
    let solicit = msg(MessageType::Solicit, &EN, None, Some((1, None)));
    let o = run_seen(&mut t, &solicit, relayed);
    assert_eq!(o.mac, Some((NODE, MacSource::Binding)));
    assert_eq!(addrs_of(&o.reply.unwrap()), vec![(a("fd00:10::10"), 3600)]);
    let o = run(&mut t, &solicit, Some("fe80::1"), None);
    assert_eq!(o.mac, None);
    assert!(o.reply.is_none());
}

/// Another host on the link with the node's MAC in its DUID (and the
/// node's DUID itself): its frame's source decides, so nothing.
#[test]
fn a_claim_of_the_nodes_mac_from_another_host_gets_nothing() {
    let other = MacAddr([2, 0, 0, 0, 0, 0x66]);
    let from_other = Seen::Direct {
        frame: Some(other),
        source: Some(a("fe80::1")),
    };
    for duid in [&LL[..], &LLT[..]] {
        let mut t = table(false);
        let mut m = msg(MessageType::Solicit, duid, None, Some((1, None)));
        m.opts_mut().insert(DhcpOption::RapidCommit);
        let o = run_seen(&mut t, &m, from_other);
        assert_eq!(o.mac, Some((other, MacSource::Frame)));
        assert!(o.reply.is_none(), "{:?}", o.reply);
        assert_eq!(o.refused, Some(NoAddress::NotReserved));
        assert_eq!(t.bindings().count(), 0);
    }
    // Without a frame source, the DUID's word is not taken either.
    let mut t = table(false);
    let m = msg(MessageType::Solicit, &LL, None, Some((1, None)));
    let o = run(&mut t, &m, Some("fe80::1c2d:3e4f:5a6b:7c8d"), None);
    assert!(o.reply.is_none());
    assert_eq!(o.refused, Some(NoAddress::NoMac));
}

/// The node's binding cannot be declined by another host replaying its
/// DUID and IAID; the node itself can.
#[test]
fn a_decline_from_another_host_does_not_lock_the_node_out() {
    let mut t = table(false);
    let sid = cfg().server_duid;
    run(
        &mut t,
        &msg(MessageType::Request, &LL, Some(&sid), Some((1, None))),
        None,
        None,
    )
    .reply
    .unwrap();
    let decline = msg(
        MessageType::Decline,
        &LL,
        Some(&sid),
        Some((1, Some(a("fd00:10::10")))),
    );
    let other = Seen::Direct {
        frame: Some(MacAddr([2, 0, 0, 0, 0, 0x66])),
        source: Some(a("fe80::1")),
    };
    let o = run_seen(&mut t, &decline, other);
    assert_eq!(o.decline_refused, Some(DeclineRefused::NotTheNode));
    assert!(!t.is_declined(a("fd00:10::10"), 1001));
    let o = run(&mut t, &decline, None, None);
    assert_eq!(o.decline_refused, None);
    assert!(t.is_declined(a("fd00:10::10"), 1001));
}

/// 400 IA_NAs from a client without an address: at most MAX_IAS answered,
/// the reason said once; the reply is smaller than the request.
#[test]
fn many_ias_get_a_reply_no_larger_than_the_request() {
    let mut t = table(false);
    let sid = cfg().server_duid;
    let mut m = msg(MessageType::Request, &EN, Some(&sid), None);
    for id in 0..400 {
        m.opts_mut().insert(DhcpOption::IANA(IANA {
            id,
            t1: 0,
            t2: 0,
            opts: Default::default(),
        }));
    }
    let request = encode(&m);
    let o = run(&mut t, &decode(&request).unwrap(), Some("fe80::1"), None);
    let r = o.reply.unwrap();
    let reply = encode(&r);
    assert!(
        reply.len() <= request.len() / 4,
        "{} -> {}",
        request.len(),
        reply.len()
    );
    let answered = r
        .opts()
        .iter()
        .filter(|o| matches!(o, DhcpOption::IANA(_)))
        .count();
    assert_eq!(answered, MAX_IAS);
    assert_eq!(status_of(r.opts()), Some(Status::NoAddrsAvail));
    for ia in ias(&r) {
        assert!(matches!(
            ia.opts.get(OptionCode::StatusCode),
            Some(DhcpOption::StatusCode(s)) if s.status == Status::NoAddrsAvail && s.msg.is_empty()
        ));
    }
}

#[test]
fn unknown_clients_get_silence_without_a_pool_and_say_why() {
    let mut t = table(false);
    let o = run(
        &mut t,
        &msg(MessageType::Solicit, &EN, None, Some((1, None))),
        Some("fe80::1"),
        None,
    );
    assert!(o.reply.is_none());
    assert_eq!(o.refused, Some(NoAddress::NoMac));
    let other = [0, 3, 0, 1, 2, 0, 0, 0, 0, 9];
    let o = run(
        &mut t,
        &msg(MessageType::Solicit, &other, None, Some((1, None))),
        None,
        None,
    );
    assert!(o.reply.is_none());
    assert_eq!(o.refused, Some(NoAddress::NotReserved));
    // With a pool: an address, written before the reply.
    let mut t = table(true);
    let sid = cfg().server_duid;
    let o = run(
        &mut t,
        &msg(MessageType::Request, &EN, Some(&sid), Some((1, None))),
        Some("fe80::1"),
        None,
    );
    assert_eq!(
        addrs_of(&o.reply.unwrap()),
        vec![(a("fd00:10::1000"), 3600)]
    );
    assert_eq!(o.durability, Durability::BeforeReply);
}

#[test]
fn rapid_commit_binds_and_replies() {
    let mut t = table(false);
    let mut m = msg(MessageType::Solicit, &LL, None, Some((1, None)));
    m.opts_mut().insert(DhcpOption::RapidCommit);
    let o = run(&mut t, &m, None, None);
    let r = o.reply.unwrap();
    assert_eq!(r.msg_type(), MessageType::Reply);
    assert!(r.opts().get(OptionCode::RapidCommit).is_some());
    assert_eq!(t.bindings().count(), 1);
}

#[test]
fn server_identifier_rules() {
    let mut t = table(false);
    let sid = cfg().server_duid;
    let other = ident::duid_ll(MacAddr([2, 0, 0, 0, 0, 0xbb]));
    assert!(
        run(
            &mut t,
            &msg(MessageType::Request, &LL, Some(&other), Some((1, None))),
            None,
            None
        )
        .dropped
    );
    assert!(
        run(
            &mut t,
            &msg(MessageType::Request, &LL, None, Some((1, None))),
            None,
            None
        )
        .dropped
    );
    assert!(
        run(
            &mut t,
            &msg(MessageType::Solicit, &LL, Some(&sid), Some((1, None))),
            None,
            None
        )
        .dropped
    );
    let mut no_id = Message::new_with_id(MessageType::Solicit, [0, 0, 1]);
    no_id.opts_mut().insert(DhcpOption::RapidCommit);
    assert!(run(&mut t, &no_id, None, None).dropped);
    assert!(
        run(
            &mut t,
            &msg(MessageType::Reply, &LL, None, None),
            None,
            None
        )
        .dropped
    );
}

/// The status code in `opts` (a message's or an IA's), if any.
fn status_of(opts: &dhcproto::v6::DhcpOptions) -> Option<Status> {
    match opts.get(OptionCode::StatusCode) {
        Some(DhcpOption::StatusCode(s)) => Some(s.status),
        _ => None,
    }
}

/// The status of the Reply to a Confirm of `addr` in IA 1.
fn confirm(t: &mut Table, addr: &str) -> Option<Status> {
    let m = msg(MessageType::Confirm, &LL, None, Some((1, Some(a(addr)))));
    status_of(run(t, &m, None, None).reply.unwrap().opts())
}

#[test]
fn confirm_release_decline_information_request() {
    let mut t = table(false);
    let sid = cfg().server_duid;
    assert_eq!(confirm(&mut t, "fd00:10::10"), Some(Status::Success));
    assert_eq!(confirm(&mut t, "fd00:99::10"), Some(Status::NotOnLink));
    run(
        &mut t,
        &msg(MessageType::Request, &LL, Some(&sid), Some((1, None))),
        None,
        None,
    )
    .reply
    .unwrap();
    let o = run(
        &mut t,
        &msg(
            MessageType::Release,
            &LL,
            Some(&sid),
            Some((1, Some(a("fd00:10::10")))),
        ),
        None,
        None,
    );
    assert!(o.reply.is_some());
    assert_eq!(o.durability, Durability::Lazy);
    // Release of something never bound: NoBinding in the IA.
    let r = run(
        &mut t,
        &msg(
            MessageType::Release,
            &LL,
            Some(&sid),
            Some((9, Some(a("fd00:10::10")))),
        ),
        None,
        None,
    )
    .reply
    .unwrap();
    let ia = ias(&r);
    assert_eq!(status_of(&ia[0].opts), Some(Status::NoBinding));
    run(
        &mut t,
        &msg(MessageType::Request, &LL, Some(&sid), Some((1, None))),
        None,
        None,
    )
    .reply
    .unwrap();
    let o = run(
        &mut t,
        &msg(
            MessageType::Decline,
            &LL,
            Some(&sid),
            Some((1, Some(a("fd00:10::10")))),
        ),
        None,
        None,
    );
    assert!(o.reply.is_some());
    assert!(t.is_declined(a("fd00:10::10"), 1001));
    let mut info = Message::new_with_id(MessageType::InformationRequest, [9, 9, 9]);
    info.opts_mut().insert(DhcpOption::ClientId(EN.to_vec()));
    let r = run(&mut t, &info, None, None).reply.unwrap();
    assert_eq!(r.msg_type(), MessageType::Reply);
    assert!(r.opts().get(OptionCode::DomainNameServers).is_some());
    assert!(ias(&r).is_empty());
}

#[test]
fn every_truncation_of_a_real_message_is_handled() {
    let mut t = table(true);
    let full = encode(&msg(
        MessageType::Solicit,
        &LLT,
        None,
        Some((1, Some(a("fd00:10::10")))),
    ));
    for n in 0..full.len() {
        if let Ok(m) = decode(&full[..n]) {
            let _ = run(&mut t, &m, None, None);
        }
    }
}

#[test]
fn a_node_gets_its_one_address_in_the_first_ia_only() {
    let mut t = table(false);
    let mut m = msg(MessageType::Solicit, &LL, None, Some((1, None)));
    m.opts_mut().insert(DhcpOption::IANA(IANA {
        id: 2,
        t1: 0,
        t2: 0,
        opts: Default::default(),
    }));
    let o = run(&mut t, &m, None, None);
    assert_eq!(o.refused, None);
    let r = o.reply.unwrap();
    assert_eq!(addrs_of(&r), vec![(a("fd00:10::10"), 3600)]);
    assert_eq!(ias(&r).len(), 2);
}
