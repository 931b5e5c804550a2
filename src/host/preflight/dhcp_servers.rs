//! Preflight: other DHCP servers on the cluster's segment. A DHCPDISCOVER
//! from a random locally administered MAC goes out of `network.interface`
//! (broadcast flag set, so answers are broadcast to port 68); every server
//! that offers within [`WINDOW`] is named by its server identifier, source
//! address and the address it offered.
//!
//! - `dhcp.mode: server`: another server is a problem (two servers fight
//!   over every client), and `serve` refuses to start
//!   ([`blocks_start`]) unless `dhcp.allowOtherServers` is true.
//! - `dhcp.mode: proxy`: the site's server is expected; none answering is
//!   the problem (nodes would get no address).
//!
//! Probed only with DHCP on, `network.interface` set and `dhcp.listen` on
//! port 67 (test clusters on loopback have no segment to probe).
//! Invariants: bounded in time ([`WINDOW`]); the random MAC is in no
//! inventory and never reused, so no server's lease for a node moves;
//! answers from this appliance's own address are left out (a running
//! `serve` with a pool would offer too); a probe that cannot run (no
//! permission for port 68) is reported as such, never as "no server".

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use dhcproto::v4::{DhcpOption, Flags, Message, MessageType, Opcode, OptionCode};
use dhcproto::{Decodable, Decoder, Encodable};

use super::{Finding, Severity};
use crate::model::cluster::{Cluster, DhcpMode};

/// How long answers are collected.
pub(super) const WINDOW: Duration = Duration::from_millis(2500);
/// The finding's check name.
pub(super) const CHECK: &str = "dhcp";

/// One server that answered the probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Answer {
    /// Option 54 (the source address when absent).
    pub server: Ipv4Addr,
    /// Where the OFFER came from.
    pub from: Ipv4Addr,
    /// The address it offered (0 for a proxyDHCP offer).
    pub offered: Ipv4Addr,
}

/// The DISCOVER sent: `mac`, transaction `xid`, broadcast flag.
pub(super) fn discover(mac: [u8; 6], xid: u32) -> Vec<u8> {
    let u = Ipv4Addr::UNSPECIFIED;
    let mut m = Message::new_with_id(xid, u, u, u, u, &mac);
    m.set_flags(Flags::default().set_broadcast());
    m.opts_mut()
        .insert(DhcpOption::MessageType(MessageType::Discover));
    m.opts_mut().insert(DhcpOption::ParameterRequestList(vec![
        OptionCode::SubnetMask,
        OptionCode::Router,
        OptionCode::DomainNameServer,
    ]));
    let mut buf = Vec::with_capacity(300);
    // A fixed, valid message: encoding into a Vec cannot fail.
    let _ = m.encode(&mut dhcproto::Encoder::new(&mut buf));
    buf.resize(buf.len().max(300), 0);
    buf
}

/// The answer in datagram `data` from `from`, if it is an OFFER to our
/// `mac` and `xid`.
pub(super) fn parse_offer(data: &[u8], from: Ipv4Addr, mac: [u8; 6], xid: u32) -> Option<Answer> {
    if data.len() < 240 {
        return None;
    }
    // Any host on the segment can send this: dhcproto 0.15 asserts on
    // some option lengths (services::dhcp::decode checks them first).
    let m = std::panic::catch_unwind(|| Message::decode(&mut Decoder::new(data)))
        .ok()?
        .ok()?;
    if m.opcode() != Opcode::BootReply || m.xid() != xid || m.chaddr().get(..6)? != mac {
        return None;
    }
    if m.opts().msg_type() != Some(MessageType::Offer) {
        return None;
    }
    let server = match m.opts().get(OptionCode::ServerIdentifier) {
        Some(DhcpOption::ServerIdentifier(s)) => *s,
        _ => from,
    };
    Some(Answer {
        server,
        from,
        offered: m.yiaddr(),
    })
}

/// The findings for `c`'s segment: probe when there is one to probe.
pub(super) fn check(c: &Cluster) -> Vec<Finding> {
    let Some(ifname) = c.network.interface.as_deref() else {
        return Vec::new();
    };
    if !c.dhcp.enabled || c.dhcp.listen.port() != 67 {
        return Vec::new();
    }
    match probe(ifname, WINDOW) {
        Ok(answers) => {
            let own =
                |a: &Answer| a.server == c.network.appliance_ip || a.from == c.network.appliance_ip;
            let others: Vec<Answer> = answers.into_iter().filter(|a| !own(a)).collect();
            judge(c, ifname, &others)
        }
        Err(e) => vec![Finding {
            severity: Severity::Info,
            check: CHECK,
            problem: format!("could not look for other DHCP servers on {ifname}: {e}"),
            fix:
                "run `crc-appliance preflight` as root (it sends one DHCPDISCOVER from UDP port 68)"
                    .into(),
        }],
    }
}

/// What the answers mean in `c`'s mode.
pub(super) fn judge(c: &Cluster, ifname: &str, others: &[Answer]) -> Vec<Finding> {
    let named: Vec<String> = others
        .iter()
        .map(|a| {
            let via = if a.from != a.server {
                format!(" via {}", a.from)
            } else {
                String::new()
            };
            format!("{}{via} (offered {})", a.server, a.offered)
        })
        .collect();
    let list = named.join(", ");
    match (c.dhcp.mode, others.is_empty()) {
        (DhcpMode::Server, true) | (DhcpMode::Proxy, false) => vec![Finding {
            severity: Severity::Info,
            check: CHECK,
            problem: if others.is_empty() {
                format!("no other DHCP server answers on {ifname}")
            } else {
                format!("DHCP server(s) on {ifname}: {list}")
            },
            fix: match c.dhcp.mode {
                DhcpMode::Server => "the appliance owns the segment's DHCP".into(),
                DhcpMode::Proxy => "proxy mode boots the nodes beside it".into(),
            },
        }],
        (DhcpMode::Server, false) => vec![Finding {
            severity: if c.dhcp.allow_other_servers {
                Severity::Info
            } else {
                Severity::Warn
            },
            check: CHECK,
            problem: format!("another DHCP server answers on {ifname}: {list}"),
            fix: if c.dhcp.allow_other_servers {
                "dhcp.allowOtherServers is true: serving anyway (two servers answer every client)"
                    .into()
            } else {
                "set dhcp.mode: proxy to boot the nodes beside that server, or put the cluster on a segment (VLAN) of its own; \
                 dhcp.allowOtherServers: true starts anyway"
                    .into()
            },
        }],
        (DhcpMode::Proxy, true) => vec![Finding {
            severity: Severity::Warn,
            check: CHECK,
            problem: format!(
                "dhcp.mode is proxy but no DHCP server answers on {ifname}: nodes get no address"
            ),
            fix: "start the site's DHCP server on this segment, or use dhcp.mode: server".into(),
        }],
    }
}

/// Whether `findings` make `serve` refuse to start: another DHCP server
/// answers and `c` is in server mode without `dhcp.allowOtherServers`.
pub(super) fn blocks_start<'a>(c: &Cluster, findings: &'a [Finding]) -> Option<&'a Finding> {
    if c.dhcp.mode != DhcpMode::Server || c.dhcp.allow_other_servers {
        return None;
    }
    findings
        .iter()
        .find(|f| f.check == CHECK && f.severity == Severity::Warn)
}

/// A random locally administered unicast MAC and transaction id.
fn random_ids() -> std::io::Result<([u8; 6], u32)> {
    use ring::rand::SecureRandom as _;
    let mut b = [0u8; 10];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| std::io::Error::other("no random numbers"))?;
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&b[..6]);
    mac[0] = (mac[0] & 0xfc) | 0x02;
    Ok((mac, u32::from_be_bytes([b[6], b[7], b[8], b[9]])))
}

/// Send one DISCOVER (again after a second, for a lost one) out of
/// `ifname` and collect the OFFERs for `window`, one per server.
pub(super) fn probe(ifname: &str, window: Duration) -> std::io::Result<Vec<Answer>> {
    use socket2::{Domain, Protocol, Socket, Type};
    let (mac, xid) = random_ids()?;
    let sock = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    sock.set_reuse_address(true)?;
    sock.set_broadcast(true)?;
    sock.bind_device(Some(ifname.as_bytes()))
        .map_err(|e| std::io::Error::new(e.kind(), format!("binding to {ifname}: {e}")))?;
    sock.bind(&SocketAddr::from(([0, 0, 0, 0], 68)).into())
        .map_err(|e| std::io::Error::new(e.kind(), format!("binding UDP port 68: {e}")))?;
    let sock: std::net::UdpSocket = sock.into();
    let to = SocketAddrV4::new(Ipv4Addr::BROADCAST, 67);
    let packet = discover(mac, xid);
    sock.send_to(&packet, to)?;
    let start = Instant::now();
    let mut resent = false;
    let mut out: Vec<Answer> = Vec::new();
    let mut buf = [0u8; 1500];
    loop {
        let elapsed = start.elapsed();
        if elapsed >= window {
            break;
        }
        if !resent && elapsed >= Duration::from_secs(1) {
            resent = true;
            let _ = sock.send_to(&packet, to);
        }
        let wait = (window - elapsed).min(Duration::from_millis(250));
        sock.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        match sock.recv_from(&mut buf) {
            Ok((n, SocketAddr::V4(src))) => {
                if let Some(a) = parse_offer(&buf[..n], *src.ip(), mac, xid)
                    && !out.iter().any(|o| o.server == a.server)
                {
                    out.push(a);
                }
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x02, 1, 2, 3, 4, 5];

    fn offer(xid: u32, mac: [u8; 6], sid: Option<Ipv4Addr>, kind: MessageType) -> Vec<u8> {
        let u = Ipv4Addr::UNSPECIFIED;
        let mut m = Message::new_with_id(xid, u, Ipv4Addr::new(10, 0, 0, 50), u, u, &mac);
        m.set_opcode(Opcode::BootReply);
        m.opts_mut().insert(DhcpOption::MessageType(kind));
        if let Some(s) = sid {
            m.opts_mut().insert(DhcpOption::ServerIdentifier(s));
        }
        let mut buf = Vec::new();
        m.encode(&mut dhcproto::Encoder::new(&mut buf)).unwrap();
        buf
    }

    #[test]
    fn the_discover_is_a_broadcast_discover_from_the_mac() {
        let b = discover(MAC, 7);
        let m = Message::decode(&mut Decoder::new(&b)).unwrap();
        assert_eq!(m.opts().msg_type(), Some(MessageType::Discover));
        assert_eq!(m.xid(), 7);
        assert!(m.flags().broadcast());
        assert_eq!(&m.chaddr()[..6], &MAC);
        assert!(b.len() >= 300);
    }

    #[test]
    fn offers_are_named_by_server_id_and_others_ignored() {
        let from = Ipv4Addr::new(10, 0, 0, 2);
        let sid = Ipv4Addr::new(10, 0, 0, 3);
        let a = parse_offer(&offer(7, MAC, Some(sid), MessageType::Offer), from, MAC, 7).unwrap();
        assert_eq!(
            a,
            Answer {
                server: sid,
                from,
                offered: Ipv4Addr::new(10, 0, 0, 50)
            }
        );
        let a = parse_offer(&offer(7, MAC, None, MessageType::Offer), from, MAC, 7).unwrap();
        assert_eq!(a.server, from);
        // Another transaction, another client, not an offer, garbage.
        assert!(parse_offer(&offer(8, MAC, None, MessageType::Offer), from, MAC, 7).is_none());
        let other = [0x02, 9, 9, 9, 9, 9];
        assert!(parse_offer(&offer(7, other, None, MessageType::Offer), from, MAC, 7).is_none());
        assert!(parse_offer(&offer(7, MAC, None, MessageType::Ack), from, MAC, 7).is_none());
        assert!(parse_offer(&[0u8; 100], from, MAC, 7).is_none());
        assert!(parse_offer(&[0xffu8; 600], from, MAC, 7).is_none());
    }

    fn cluster(dhcp: &str) -> Cluster {
        let text = format!(
            "name: c\nbaseDomain: example.com\nnetwork: {{ cidr: 10.0.0.0/24, gateway: 10.0.0.254, applianceIP: 10.0.0.1, interface: eth9 }}\nnodes:\n  - {{ name: master-0, role: master, mac: '52:54:00:00:00:0a', ip: 10.0.0.10 }}\ndhcp:\n{dhcp}"
        );
        crate::config::from_str(&text, std::path::Path::new("/"), std::path::Path::new("t"))
            .unwrap()
            .cluster
    }

    #[test]
    fn another_server_blocks_server_mode_only() {
        let site = [Answer {
            server: Ipv4Addr::new(10, 0, 0, 254),
            from: Ipv4Addr::new(10, 0, 0, 253),
            offered: Ipv4Addr::new(10, 0, 0, 57),
        }];
        let c = cluster("  mode: server\n");
        let f = judge(&c, "eth9", &site);
        assert_eq!(f[0].severity, Severity::Warn);
        assert_eq!(
            f[0].problem,
            "another DHCP server answers on eth9: 10.0.0.254 via 10.0.0.253 (offered 10.0.0.57)"
        );
        assert!(f[0].fix.contains("dhcp.mode: proxy"), "{}", f[0].fix);
        assert!(blocks_start(&c, &f).is_some());
        // Nobody else: fine.
        let f = judge(&c, "eth9", &[]);
        assert_eq!(f[0].severity, Severity::Info);
        assert!(blocks_start(&c, &f).is_none());
        // allowOtherServers: reported, not blocking.
        let c = cluster("  allowOtherServers: true\n");
        let f = judge(&c, "eth9", &site);
        assert_eq!(f[0].severity, Severity::Info);
        assert!(blocks_start(&c, &f).is_none());
        // Proxy mode: the site's server is expected; none is the problem,
        // which does not stop serve.
        let c = cluster("  mode: proxy\n");
        let f = judge(&c, "eth9", &site);
        assert_eq!(f[0].severity, Severity::Info);
        assert!(f[0].problem.contains("10.0.0.254"));
        let f = judge(&c, "eth9", &[]);
        assert_eq!(f[0].severity, Severity::Warn);
        assert!(blocks_start(&c, &f).is_none());
    }

    #[test]
    fn random_macs_are_local_unicast() {
        for _ in 0..32 {
            let (mac, _) = random_ids().unwrap();
            assert_eq!(mac[0] & 0x03, 0x02);
        }
    }
}
