//! Unit tests of [`super`] (proxyDHCP decisions).

use super::*;
use crate::plan::Plan;
use dhcproto::{Decodable, Encodable};

fn plan(extra: &str) -> Plan {
    let text = format!(
        "name: c\nbaseDomain: example.com\nnetwork: {{ cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.1 }}\nnodes:\n  - {{ name: master-0, role: master, mac: '52:54:00:00:00:0a', ip: 10.0.0.10 }}\ndhcp:\n  mode: proxy\n  pxe: {{ bootFile: undionly.kpxe, ipxeScriptUrl: 'http://10.0.0.1:8080/boot.ipxe' }}\n{extra}"
    );
    crate::config::from_str(&text, std::path::Path::new("/"), std::path::Path::new("t")).unwrap()
}

fn cfg() -> Config {
    Config::from_plan(&plan(""), 67, crate::services::dhcp::test_log())
}

const M0: [u8; 6] = [0x52, 0x54, 0, 0, 0, 0x0a];
const UNKNOWN: [u8; 6] = [0x52, 0x54, 0, 9, 9, 9];
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 68);

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// A request of `kind` from `mac` with option 60 `vendor` (and 93 `arch`).
fn req(kind: MessageType, mac: [u8; 6], vendor: Option<&str>, arch: Option<u16>) -> Message {
    let u = Ipv4Addr::UNSPECIFIED;
    let mut m = Message::new_with_id(0x4321, u, u, u, u, &mac);
    m.opts_mut().insert(DhcpOption::MessageType(kind));
    if let Some(v) = vendor {
        m.opts_mut()
            .insert(DhcpOption::ClassIdentifier(v.as_bytes().to_vec()));
    }
    if let Some(a) = arch {
        m.opts_mut()
            .insert(DhcpOption::ClientSystemArchitecture(a.into()));
    }
    m
}

/// Through the wire format both ways, as the server does.
fn decide(cfg: &Config, m: &Message, port: Port, src: SocketAddrV4) -> (Decision, Option<Message>) {
    let bytes = m.to_vec().unwrap();
    let parsed = super::super::reply::decode(&bytes).expect("valid request");
    let d = handle(cfg, &parsed, port, src);
    let reply = d.reply.as_ref().map(|r| {
        let b = super::super::reply::encode(r, &parsed);
        Message::from_bytes(&b).expect("reply decodes")
    });
    (d, reply)
}

/// The BOOTP `file` field up to its NUL.
fn fname(m: &Message) -> &[u8] {
    let f = m.fname().unwrap_or_default();
    f.split(|b| *b == 0).next().unwrap_or_default()
}

fn opt(m: &Message, code: OptionCode) -> Option<&DhcpOption> {
    m.opts().get(code)
}

#[test]
fn bios_pxe_discover_gets_a_proxy_offer() {
    let cfg = cfg();
    let d = req(
        MessageType::Discover,
        M0,
        Some("PXEClient:Arch:00000:UNDI:002001"),
        Some(0),
    );
    let (dec, offer) = decide(&cfg, &d, Port::Dhcp, CLIENT);
    let offer = offer.expect("a proxy offer");
    assert_eq!(dec.reply.unwrap().dest, Dest::Broadcast);
    assert_eq!(offer.opts().msg_type(), Some(MessageType::Offer));
    assert_eq!(offer.opcode(), Opcode::BootReply);
    assert_eq!(offer.xid(), 0x4321);
    assert_eq!(offer.yiaddr(), Ipv4Addr::UNSPECIFIED, "never an address");
    assert_eq!(offer.siaddr(), ip("10.0.0.1"));
    assert!(offer.flags().broadcast());
    assert_eq!(offer.chaddr(), &M0);
    assert_eq!(
        opt(&offer, OptionCode::ServerIdentifier),
        Some(&DhcpOption::ServerIdentifier(ip("10.0.0.1")))
    );
    assert_eq!(
        opt(&offer, OptionCode::ClassIdentifier),
        Some(&DhcpOption::ClassIdentifier(b"PXEClient".to_vec()))
    );
    assert_eq!(
        opt(&offer, OptionCode::VendorExtensions),
        Some(&DhcpOption::VendorExtensions(vec![6, 1, 8, 0xff]))
    );
    assert_eq!(
        opt(&offer, OptionCode::BootfileName),
        Some(&DhcpOption::BootfileName(b"undionly.kpxe".to_vec()))
    );
    assert_eq!(fname(&offer), b"undionly.kpxe");
    // Nothing of a lease: those are the site server's.
    for code in [
        OptionCode::AddressLeaseTime,
        OptionCode::SubnetMask,
        OptionCode::Router,
        OptionCode::DomainNameServer,
    ] {
        assert_eq!(opt(&offer, code), None, "{code:?}");
    }
}

#[test]
fn ipxe_gets_the_script_with_pxeclient_so_it_takes_the_proxy_offer() {
    let cfg = cfg();
    let mut d = req(
        MessageType::Discover,
        M0,
        Some("PXEClient:Arch:00000:UNDI:002001"),
        Some(0),
    );
    d.opts_mut().insert(DhcpOption::UserClass(b"iPXE".to_vec()));
    let (_, offer) = decide(&cfg, &d, Port::Dhcp, CLIENT);
    let offer = offer.expect("a proxy offer");
    assert_eq!(
        opt(&offer, OptionCode::BootfileName),
        Some(&DhcpOption::BootfileName(
            b"http://10.0.0.1:8080/boot.ipxe".to_vec()
        ))
    );
    // iPXE takes an offer as proxyDHCP only with option 60 `PXEClient`.
    assert_eq!(
        opt(&offer, OptionCode::ClassIdentifier),
        Some(&DhcpOption::ClassIdentifier(b"PXEClient".to_vec()))
    );
}

#[test]
fn boot_server_request_gets_a_unicast_ack_echoing_the_uuid() {
    let cfg = cfg();
    let mut r = req(
        MessageType::Request,
        M0,
        Some("PXEClient:Arch:00007:UNDI:003000"),
        Some(7),
    );
    let lent = ip("10.0.0.150");
    r.set_ciaddr(lent);
    let uuid = {
        let mut v = vec![0u8];
        v.extend(1..=16u8);
        v
    };
    r.opts_mut()
        .insert(DhcpOption::Unknown(dhcproto::v4::UnknownOption::new(
            OptionCode::from(97u8),
            uuid.clone(),
        )));
    let src = SocketAddrV4::new(lent, 4011);
    let (dec, ack) = decide(&cfg, &r, Port::BootServer, src);
    let ack = ack.expect("an ACK on 4011");
    assert_eq!(dec.reply.unwrap().dest, Dest::Unicast(src));
    assert_eq!(ack.opts().msg_type(), Some(MessageType::Ack));
    assert_eq!(ack.yiaddr(), Ipv4Addr::UNSPECIFIED);
    assert_eq!(ack.ciaddr(), lent);
    assert_eq!(
        opt(&ack, OptionCode::BootfileName),
        Some(&DhcpOption::BootfileName(b"undionly.kpxe".to_vec()))
    );
    let echoed = ack
        .opts()
        .get(OptionCode::from(97u8))
        .expect("option 97 echoed");
    let mut buf = Vec::new();
    echoed
        .encode(&mut dhcproto::Encoder::new(&mut buf))
        .unwrap();
    assert_eq!(&buf[2..], uuid.as_slice());
}

#[test]
fn http_boot_gets_httpclient_and_no_option_43() {
    let mut plan = plan("");
    plan.cluster.dhcp.pxe = None;
    let mut cfg = Config::from_plan(&plan, 67, crate::services::dhcp::test_log());
    cfg.netboot = Some(super::super::reply::Netboot {
        offer: boot::Offer {
            tftp_server: ip("10.0.0.1"),
            http_base: "http://10.0.0.1:8080".into(),
            binaries: vec!["snponly.efi".into(), "undionly.kpxe".into()],
        },
        pool: false,
    });
    let d = req(
        MessageType::Discover,
        M0,
        Some("HTTPClient:Arch:00016:UNDI:003001"),
        Some(16),
    );
    let (_, offer) = decide(&cfg, &d, Port::Dhcp, CLIENT);
    let offer = offer.expect("a proxy offer");
    assert_eq!(
        opt(&offer, OptionCode::ClassIdentifier),
        Some(&DhcpOption::ClassIdentifier(b"HTTPClient".to_vec()))
    );
    assert_eq!(opt(&offer, OptionCode::VendorExtensions), None);
    assert_eq!(
        opt(&offer, OptionCode::BootfileName),
        Some(&DhcpOption::BootfileName(
            b"http://10.0.0.1:8080/boot/ipxe/snponly.efi".to_vec()
        ))
    );
    // UEFI PXE (arch 7) gets snponly.efi over TFTP.
    let d = req(
        MessageType::Discover,
        M0,
        Some("PXEClient:Arch:00007:UNDI:003000"),
        Some(7),
    );
    let (_, offer) = decide(&cfg, &d, Port::Dhcp, CLIENT);
    assert_eq!(fname(&offer.unwrap()), b"snponly.efi");
}

#[test]
fn silent_to_everything_that_is_not_a_known_pxe_client() {
    let cfg = cfg();
    let pxe = Some("PXEClient:Arch:00000:UNDI:002001");
    // An installed OS's DHCP client, known MAC: the site's server answers.
    for kind in [MessageType::Discover, MessageType::Request] {
        let (d, r) = decide(&cfg, &req(kind, M0, None, None), Port::Dhcp, CLIENT);
        assert!(r.is_none() && !d.unknown_client, "{kind:?}: {}", d.note);
    }
    // An unknown MAC's PXE DISCOVER: nothing, reported for the log.
    let (d, r) = decide(
        &cfg,
        &req(MessageType::Discover, UNKNOWN, pxe, Some(0)),
        Port::Dhcp,
        CLIENT,
    );
    assert!(r.is_none());
    assert!(d.unknown_client, "{}", d.note);
    // A PXE REQUEST for the site's server (option 54 not ours), or with
    // none (INIT-REBOOT): not ours, and never a NAK.
    let mut r = req(MessageType::Request, M0, pxe, Some(0));
    r.opts_mut()
        .insert(DhcpOption::ServerIdentifier(ip("10.0.0.254")));
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.150")));
    assert!(decide(&cfg, &r, Port::Dhcp, CLIENT).1.is_none());
    let mut r = req(MessageType::Request, M0, pxe, Some(0));
    r.opts_mut()
        .insert(DhcpOption::RequestedIpAddress(ip("10.0.0.99")));
    assert!(decide(&cfg, &r, Port::Dhcp, CLIENT).1.is_none());
    // A DISCOVER on the boot server port, a RELEASE, a relayed DISCOVER.
    let d = req(MessageType::Discover, M0, pxe, Some(0));
    assert!(decide(&cfg, &d, Port::BootServer, CLIENT).1.is_none());
    let rel = req(MessageType::Release, M0, pxe, Some(0));
    assert!(decide(&cfg, &rel, Port::Dhcp, CLIENT).1.is_none());
    let mut relayed = req(MessageType::Discover, M0, pxe, Some(0));
    relayed.set_giaddr(ip("10.0.0.2"));
    assert!(decide(&cfg, &relayed, Port::Dhcp, CLIENT).1.is_none());
}

#[test]
fn a_pxe_request_naming_this_server_on_port_67_gets_an_ack() {
    let cfg = cfg();
    let mut r = req(
        MessageType::Request,
        M0,
        Some("PXEClient:Arch:00000:UNDI:002001"),
        Some(0),
    );
    r.opts_mut()
        .insert(DhcpOption::ServerIdentifier(ip("10.0.0.1")));
    let (d, ack) = decide(&cfg, &r, Port::Dhcp, CLIENT);
    let ack = ack.expect("ack");
    assert_eq!(ack.opts().msg_type(), Some(MessageType::Ack));
    assert_eq!(ack.yiaddr(), Ipv4Addr::UNSPECIFIED);
    assert_eq!(d.reply.unwrap().dest, Dest::Broadcast);
}

#[test]
fn boot_server_port_beside_the_listen_port() {
    let p = plan("");
    assert_eq!(p.cluster.dhcp.boot_server_listen().unwrap().port(), 4011);
    let p = plan("  listen: 127.0.0.1:10067\n");
    assert_eq!(p.cluster.dhcp.boot_server_listen().unwrap().port(), 10069);
}

/// The notes the log gives when a boot client gets no proxy answer.
#[test]
fn nothing_to_boot_says_why() {
    let cases = [
        (
            NothingToBoot::from(boot::NoBoot::Arch(99)),
            "client architecture 99 is not supported for network boot",
        ),
        (
            NothingToBoot::NoPxe,
            "nothing to boot: no pxe section and no dhcp.pxe",
        ),
        (
            NothingToBoot::NoBootFile,
            "nothing to boot: dhcp.pxe has no bootFile",
        ),
    ];
    for (err, text) in cases {
        assert_eq!(err.to_string(), text);
    }
}
