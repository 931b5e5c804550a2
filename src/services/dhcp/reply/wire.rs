//! The wire side of a DHCP reply: the message an OFFER/ACK/NAK is built
//! into (header fields, configuration and boot options, where it goes) and
//! its encoding (option order, padding). Pure; the decisions are in
//! [`super`].

use std::net::{Ipv4Addr, SocketAddrV4};

use dhcproto::v4::{
    DhcpOption, DhcpOptions, Flags, HType, Message, MessageType, Opcode, OptionCode, UnknownOption,
};
use dhcproto::{Encodable, Encoder};

use super::{Config, Dest, Reply, Subnet};
use crate::model::cluster::MacAddr;

/// Minimum size of a BOOTP/DHCP message on the wire.
pub const MIN_LEN: usize = 300;

/// The client's option 81 (kept raw by [`decode`]), if it can be answered.
fn client_fqdn(msg: &Message) -> Option<super::super::fqdn::ClientFqdn> {
    match msg.opts().get(OptionCode::ClientFQDN)? {
        DhcpOption::Unknown(u) => super::super::fqdn::parse(u.data()),
        _ => None,
    }
}

/// Which boot client `msg` comes from, if it asks to boot.
pub(crate) fn boot_client(msg: &Message) -> Option<super::super::boot::Client> {
    let o = msg.opts();
    let vendor = match o.get(OptionCode::ClassIdentifier) {
        Some(DhcpOption::ClassIdentifier(v)) => Some(v.as_slice()),
        _ => None,
    };
    let user = match o.get(OptionCode::UserClass) {
        Some(DhcpOption::UserClass(v)) => Some(v.as_slice()),
        _ => None,
    };
    let arches: Vec<u16> = match o.get(OptionCode::ClientSystemArchitecture) {
        Some(DhcpOption::ClientSystemArchitecture(a)) => vec![u16::from(*a)],
        _ => Vec::new(),
    };
    let ipxe_options = o.get(OptionCode::Unknown(175)).is_some();
    super::super::boot::classify(vendor, user, ipxe_options, &arches)
}

/// Put a boot answer in `m`: `siaddr`, the BOOTP file field (when it fits),
/// option 66 and 67, and for firmware the vendor class echo (60) and the
/// PXE discovery control (43).
fn set_boot(
    m: &mut Message,
    file: &str,
    next_server: Ipv4Addr,
    vendor_class: Option<&str>,
    pxe_discovery: bool,
) {
    m.set_siaddr(next_server);
    // The header field holds 128 bytes NUL-terminated (and dhcproto panics
    // above 128); longer names go in option 67 only.
    if file.len() < 128 {
        m.set_fname_str(file);
    }
    let o = m.opts_mut();
    o.insert(DhcpOption::TFTPServerName(
        next_server.to_string().into_bytes(),
    ));
    o.insert(DhcpOption::BootfileName(file.as_bytes().to_vec()));
    if let Some(v) = vendor_class {
        o.insert(DhcpOption::ClassIdentifier(v.as_bytes().to_vec()));
    }
    if pxe_discovery {
        o.insert(DhcpOption::VendorExtensions(
            super::super::boot::PXE_OPTION_43.to_vec(),
        ));
    }
}

/// Build an OFFER/ACK/NAK for `req` (INFORM's ACK when `yiaddr` is 0).
pub(super) fn build(
    cfg: &Config,
    net: &Subnet,
    req: &Message,
    kind: MessageType,
    yiaddr: Ipv4Addr,
    mac: MacAddr,
) -> Reply {
    let inform = req.opts().msg_type() == Some(MessageType::Inform);
    let nak = kind == MessageType::Nak;
    let mut m = Message::new_with_id(
        req.xid(),
        Ipv4Addr::UNSPECIFIED,
        yiaddr,
        Ipv4Addr::UNSPECIFIED,
        req.giaddr(),
        &mac.0,
    );
    m.set_opcode(Opcode::BootReply);
    m.set_htype(HType::Eth);
    m.set_hops(req.hops());
    let mut flags = req.flags();
    if nak && !req.giaddr().is_unspecified() {
        flags = flags.set_broadcast();
    }
    m.set_flags(Flags::new(u16::from(flags) & 0x8000));
    if !nak && (inform || kind == MessageType::Ack) {
        m.set_ciaddr(req.ciaddr());
    }
    let o = m.opts_mut();
    o.insert(DhcpOption::MessageType(kind));
    o.insert(DhcpOption::ServerIdentifier(cfg.server_id));
    if let Some(DhcpOption::ClientIdentifier(id)) = req.opts().get(OptionCode::ClientIdentifier) {
        o.insert(DhcpOption::ClientIdentifier(id.clone()));
    }
    if let Some(ra @ DhcpOption::RelayAgentInformation(_)) =
        req.opts().get(OptionCode::RelayAgentInformation)
    {
        o.insert(ra.clone());
    }
    if nak {
        o.insert(DhcpOption::Message("requested address is not yours".into()));
    } else {
        configuration(cfg, net, req, &mut m, inform, mac);
    }
    let dest = if !req.giaddr().is_unspecified() {
        Dest::Unicast(SocketAddrV4::new(req.giaddr(), cfg.server_port))
    } else if nak {
        Dest::Broadcast
    } else if !req.ciaddr().is_unspecified() {
        Dest::Unicast(SocketAddrV4::new(req.ciaddr(), cfg.client_port))
    } else if !req.flags().broadcast()
        && req.htype() == HType::Eth
        && req.hlen() == 6
        && !yiaddr.is_unspecified()
    {
        Dest::Link {
            to: SocketAddrV4::new(yiaddr, cfg.client_port),
            mac,
        }
    } else {
        Dest::Broadcast
    };
    Reply { kind, msg: m, dest }
}

/// The configuration options of an OFFER or ACK (lease times unless
/// INFORM, the subnet's, Client FQDN, boot options for a client that asks
/// to boot).
fn configuration(
    cfg: &Config,
    net: &Subnet,
    req: &Message,
    m: &mut Message,
    inform: bool,
    mac: MacAddr,
) {
    let o = m.opts_mut();
    if !inform {
        o.insert(DhcpOption::AddressLeaseTime(cfg.lease_time));
        o.insert(DhcpOption::Renewal(cfg.lease_time / 2));
        o.insert(DhcpOption::Rebinding(
            u32::try_from(u64::from(cfg.lease_time) * 7 / 8).unwrap_or(u32::MAX),
        ));
    }
    o.insert(DhcpOption::SubnetMask(net.cidr.netmask()));
    o.insert(DhcpOption::BroadcastAddr(net.cidr.broadcast()));
    o.insert(DhcpOption::Router(vec![net.router]));
    o.insert(DhcpOption::DomainNameServer(net.dns.clone()));
    o.insert(DhcpOption::DomainName(cfg.domain.clone()));
    if let Some(ntp) = cfg.ntp {
        o.insert(DhcpOption::NtpServers(vec![ntp]));
    }
    if let Some(h) = cfg.hostnames.get(&mac) {
        o.insert(DhcpOption::Hostname(h.clone()));
    }
    if !inform && let Some(f) = client_fqdn(req) {
        let name = cfg
            .hostnames
            .get(&mac)
            .map(|h| format!("{h}.{}", cfg.domain));
        o.insert(DhcpOption::Unknown(UnknownOption::new(
            OptionCode::ClientFQDN,
            super::super::fqdn::answer(&f, name.as_deref()),
        )));
    }
    // Boot options only for a client that asks to boot (firmware PXE,
    // UEFI HTTP Boot, iPXE): never for an installed OS's DHCP client.
    if let Some(client) = boot_client(req) {
        let is_node = cfg.hostnames.contains_key(&mac);
        if let Some(nb) = cfg.netboot.as_ref().filter(|nb| is_node || nb.pool) {
            match super::super::boot::answer(client, &nb.offer) {
                Ok(b) => set_boot(m, &b.file, b.next_server, b.vendor_class, b.pxe_discovery),
                Err(e) => {
                    if let Some(tail) = cfg.log.check("no network boot", None) {
                        tracing::warn!(%mac, "dhcp: no network boot: {e}{tail}");
                    }
                }
            }
        } else if let Some(p) = &cfg.pxe {
            let file = if client == super::super::boot::Client::Ipxe {
                p.ipxe_script_url.as_ref().or(p.boot_file.as_ref())
            } else {
                p.boot_file.as_ref()
            };
            if let Some(f) = file {
                set_boot(m, f, p.next_server, None, false);
            }
        }
    }
}

/// Encode a reply: header, then options 53 and 54, the ones in the
/// request's parameter request list in that order, the rest (82 last),
/// end, padding to [`MIN_LEN`].
pub fn encode(reply: &Reply, req: &Message) -> Vec<u8> {
    let mut head = reply.msg.clone();
    let opts = std::mem::replace(head.opts_mut(), DhcpOptions::new());
    let mut buf = Vec::with_capacity(400);
    let mut e = Encoder::new(&mut buf);
    // Empty options encode to nothing: this writes header + magic cookie.
    let mut ok = head.encode(&mut e).is_ok();
    let prl: Vec<OptionCode> = match req.opts().get(OptionCode::ParameterRequestList) {
        Some(DhcpOption::ParameterRequestList(v)) => v.clone(),
        _ => Vec::new(),
    };
    // Codes compare by number: option 81 is stored as an unknown option.
    let same = |a: OptionCode, b: OptionCode| u8::from(a) == u8::from(b);
    let mut order: Vec<OptionCode> = vec![OptionCode::MessageType, OptionCode::ServerIdentifier];
    let mut push = |c: OptionCode| {
        if !order.iter().any(|o| same(*o, c)) && !same(c, OptionCode::RelayAgentInformation) {
            order.push(c);
        }
    };
    for c in prl {
        push(c);
    }
    // Unless requested, 81 goes last: a client that cannot read its ASCII
    // form (dhcproto, for one) loses the options after it.
    for (c, _) in opts.iter() {
        if !same(*c, OptionCode::ClientFQDN) {
            push(*c);
        }
    }
    push(OptionCode::ClientFQDN);
    order.push(OptionCode::RelayAgentInformation);
    for c in order {
        if let Some(o) = opts.get(c) {
            ok &= o.encode(&mut e).is_ok();
        }
    }
    ok &= DhcpOption::End.encode(&mut e).is_ok();
    debug_assert!(ok, "encoding a reply cannot fail");
    if buf.len() < MIN_LEN {
        buf.resize(MIN_LEN, 0);
    }
    buf
}
