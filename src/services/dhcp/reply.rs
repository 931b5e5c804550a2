//! The DHCP decision: (configuration, request, lease table, now) → reply or
//! silence. Pure: no sockets, the clock is injected.
//!
//! RFC 2131 §4.3 as applied here:
//! - DISCOVER → OFFER of [`LeaseTable::choose`]; unknown MACs without a
//!   pool get no answer (so another DHCP server on the LAN keeps them).
//! - REQUEST, by client state (§4.3.2):
//!   SELECTING (server id present): another server's id → our offer is
//!   dropped, no answer; ours → ACK if the requested address is the
//!   client's, else NAK.
//!   INIT-REBOOT (requested address, no ciaddr) and RENEWING/REBINDING
//!   (ciaddr): ACK if the address may be the client's (its reservation, its
//!   lease, or a free pool address), NAK if it is not (another node's
//!   address, wrong network, a reserved MAC asking for anything but its
//!   reservation). Clients this server does not serve get no answer.
//! - RELEASE / DECLINE update the table (no answer); INFORM → ACK with the
//!   configuration only (no address, no lease time), unicast to ciaddr.
//! - Replies go to giaddr:server-port when relayed, else NAKs are
//!   broadcast, else to ciaddr:client-port when set, else broadcast (a
//!   client without an address cannot receive unicast without ARP
//!   injection). The broadcast flag and giaddr are echoed; so are the
//!   client identifier (RFC 6842) and relay agent information (RFC 3046).
//! - Options: 53 and 54 first, then the client's parameter request list
//!   order, then the rest (81 last); padded to 300 bytes (BOOTP minimum).
//! - Client FQDN (81, RFC 4702): answered in OFFER and ACK in the encoding
//!   the client used, ASCII or wire ([`super::fqdn`]); the server does no
//!   DNS updates (N = 1).
//! - Every field of the request is treated as hostile: hardware type/length
//!   other than Ethernet/6 is ignored, nothing indexes unchecked.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};

use dhcproto::v4::{
    DhcpOption, DhcpOptions, Flags, HType, Message, MessageType, Opcode, OptionCode, UnknownOption,
};
use dhcproto::{Encodable, Encoder};

pub use super::decode::{Malformed, decode};
use super::leases::{Client, LeaseTable, NoAddress};
pub use super::relay::{Dropped, Subnet};
use crate::model::cluster::{MacAddr, PxeCfg};
use crate::plan::Plan;

/// Minimum size of a BOOTP/DHCP message on the wire.
pub const MIN_LEN: usize = 300;

/// Everything the replies carry, derived from the plan once.
#[derive(Debug, Clone)]
pub struct Config {
    pub server_id: Ipv4Addr,
    pub netmask: Ipv4Addr,
    pub broadcast: Ipv4Addr,
    pub router: Ipv4Addr,
    pub dns: Ipv4Addr,
    pub domain: String,
    pub lease_time: u32,
    pub cidr: crate::model::cluster::Ipv4Net,
    pub hostnames: HashMap<MacAddr, String>,
    pub pxe: Option<PxeCfg>,
    /// Automatic network-boot answers (the `pxe:` section's TFTP is on).
    pub netboot: Option<Netboot>,
    /// Option 42 (NTP servers): the appliance's NTP address while the
    /// `ntp:` section is on (taken from the model: this service does not
    /// know the NTP service).
    pub ntp: Option<Ipv4Addr>,
    /// Port relay agents listen on (67; the listen port in tests).
    pub server_port: u16,
    /// Port clients listen on (68; listen port + 1 in tests).
    pub client_port: u16,
    /// Relayed subnets (`dhcp.segments`).
    pub segments: Vec<Subnet>,
    /// The relay addresses (giaddr) answered: every segment's gateway and
    /// `dhcp.relays`.
    pub relays: Vec<Ipv4Addr>,
    /// `dhcp.mode: proxy`: answered by [`super::proxy`] instead.
    pub proxy: bool,
}

impl Config {
    pub fn from_plan(plan: &Plan, server_port: u16) -> Config {
        let c = &plan.cluster;
        Config {
            server_id: c.network.appliance_ip,
            netmask: c.network.cidr.netmask(),
            broadcast: c.network.cidr.broadcast(),
            router: c.network.gateway,
            dns: c.network.appliance_ip,
            domain: c.domain.clone(),
            lease_time: u32::try_from(c.dhcp.lease_time.as_secs()).unwrap_or(u32::MAX),
            cidr: c.network.cidr,
            hostnames: plan
                .reservations
                .iter()
                .map(|r| (r.mac, r.hostname.clone()))
                .collect(),
            pxe: c.dhcp.pxe.clone(),
            netboot: c.tftp.as_ref().filter(|t| t.enabled).map(|t| Netboot {
                offer: super::boot::Offer {
                    tftp_server: match t.listen.ip() {
                        std::net::IpAddr::V4(ip) if !ip.is_unspecified() => ip,
                        _ => c.network.appliance_ip,
                    },
                    http_base: crate::model::boot::http_base(c),
                    binaries: crate::boot::bootfiles::present_boot_files(t),
                },
                pool: t.pool,
            }),
            ntp: c.ntp_server().map(|(ip, _)| ip),
            server_port,
            client_port: if server_port == 67 {
                68
            } else {
                server_port.wrapping_add(1)
            },
            segments: c
                .dhcp
                .segments
                .iter()
                .map(|s| Subnet {
                    cidr: s.cidr,
                    router: s.gateway,
                    dns: s.dns.clone(),
                })
                .collect(),
            relays: c.dhcp.relay_addresses(),
            proxy: c.dhcp.mode == crate::model::cluster::DhcpMode::Proxy,
        }
    }
}

/// Network boot for clients that ask to boot.
#[derive(Debug, Clone)]
pub struct Netboot {
    pub offer: super::boot::Offer,
    /// Pool clients get boot options too (else nodes only).
    pub pool: bool,
}

/// Where a reply goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// 255.255.255.255:client-port on the bound interface.
    Broadcast,
    Unicast(SocketAddrV4),
    /// To `yiaddr` at the client's own MAC address: a client without an
    /// address that cleared the broadcast flag (RFC 2131 §4.1). The socket
    /// layer writes the frame through a packet socket, or broadcasts when
    /// it has none.
    Link {
        to: SocketAddrV4,
        mac: MacAddr,
    },
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub kind: MessageType,
    pub msg: Message,
    pub dest: Dest,
}

/// How a decision's change to the lease table must reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Nothing the lease file holds changed.
    None,
    /// A change that cannot cause a conflict if lost (any ACK of a reserved
    /// node's own address, first binding or renewal: the reservation, not
    /// the file, decides who gets that address). Written soon (≤ 1 s, or
    /// with the next write, retried until a write succeeds); the reply does
    /// not wait.
    Lazy,
    /// On disk before the reply is sent (a new pool binding, a pool
    /// lease's renewal, RELEASE, DECLINE).
    BeforeReply,
}

/// What to do with one request.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub reply: Option<Reply>,
    pub durability: Durability,
    /// The address an ACK bound whose record is not on disk yet: the caller
    /// marks it unsynced in the table (with [`Durability::BeforeReply`]).
    pub bound: Option<Ipv4Addr>,
    /// Why there is no reply, or what was done (for debug logs).
    pub note: String,
    /// An address was newly bound to a client (worth an info log; renewals
    /// are not).
    pub new_binding: bool,
    /// Dropped before any decision (bad or unknown relay).
    pub dropped: Option<Dropped>,
    /// A DISCOVER got no offer because the subnet's pool has no free
    /// address (the note says which subnet).
    pub pool_exhausted: bool,
}

fn durable_if(changed: bool) -> Durability {
    if changed {
        Durability::BeforeReply
    } else {
        Durability::None
    }
}

impl Outcome {
    /// What the caller does after deciding: mark the bound record unsynced
    /// in the table (so a later renewal is not taken for one already on
    /// disk) and report how the change must reach the disk.
    pub fn apply_marks(&self, table: &mut LeaseTable) -> Durability {
        if let Some(ip) = self.bound {
            table.mark_unsynced(ip);
        }
        self.durability
    }

    fn silent(note: impl Into<String>) -> Outcome {
        Outcome {
            reply: None,
            durability: Durability::None,
            bound: None,
            note: note.into(),
            new_binding: false,
            dropped: None,
            pool_exhausted: false,
        }
    }
}

/// The client's MAC (the request passed [`decode`], so hlen is 6).
pub fn mac_of(msg: &Message) -> Option<MacAddr> {
    let ch = msg.chaddr();
    let a: [u8; 6] = ch.get(..6)?.try_into().ok()?;
    Some(MacAddr(a))
}

fn opt_ip(msg: &Message, code: OptionCode) -> Option<Ipv4Addr> {
    match msg.opts().get(code)? {
        DhcpOption::RequestedIpAddress(ip) | DhcpOption::ServerIdentifier(ip) => Some(*ip),
        _ => None,
    }
}

fn client_of(msg: &Message, mac: MacAddr) -> Client {
    let client_id = match msg.opts().get(OptionCode::ClientIdentifier) {
        Some(DhcpOption::ClientIdentifier(id)) if !id.is_empty() => Some(id.clone()),
        _ => None,
    };
    Client { mac, client_id }
}

/// A client-supplied hostname, made safe for status output.
fn client_hostname(msg: &Message) -> Option<String> {
    match msg.opts().get(OptionCode::Hostname) {
        Some(DhcpOption::Hostname(h)) => {
            let s: String = h
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
                .take(63)
                .collect();
            (!s.is_empty()).then_some(s)
        }
        _ => None,
    }
}

/// The name recorded in the lease: the node name for a reservation, else
/// what the client sent.
fn lease_hostname(cfg: &Config, msg: &Message, mac: MacAddr) -> Option<String> {
    cfg.hostnames
        .get(&mac)
        .cloned()
        .or_else(|| client_hostname(msg))
}

/// The client's option 81 (kept raw by [`decode`]), if it can be answered.
fn client_fqdn(msg: &Message) -> Option<super::fqdn::ClientFqdn> {
    match msg.opts().get(OptionCode::ClientFQDN)? {
        DhcpOption::Unknown(u) => super::fqdn::parse(u.data()),
        _ => None,
    }
}

/// Which boot client `msg` comes from, if it asks to boot.
pub(super) fn boot_client(msg: &Message) -> Option<super::boot::Client> {
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
    super::boot::classify(vendor, user, ipxe_options, &arches)
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
            super::boot::PXE_OPTION_43.to_vec(),
        ));
    }
}

/// Decide what to answer to `msg` received from `src`.
pub fn handle(cfg: &Config, table: &mut LeaseTable, msg: &Message, now: u64) -> Outcome {
    let Some(mac) = mac_of(msg) else {
        return Outcome::silent("no hardware address");
    };
    if mac.is_multicast() || mac.0 == [0; 6] {
        return Outcome::silent("multicast or zero hardware address");
    }
    let net = match cfg.subnet_of(msg) {
        Ok(n) => n,
        Err((why, note)) => {
            return Outcome {
                dropped: Some(why),
                ..Outcome::silent(note)
            };
        }
    };
    let client = client_of(msg, mac);
    let sid = opt_ip(msg, OptionCode::ServerIdentifier);
    let Some(kind) = msg.opts().msg_type() else {
        return Outcome::silent("no message type");
    };
    match kind {
        MessageType::Discover => {
            let requested = opt_ip(msg, OptionCode::RequestedIpAddress);
            match table.choose_in(&client, requested, net.cidr, now) {
                Ok(ip) if !net.cidr.contains(ip) => Outcome::silent(format!(
                    "reserved address {ip} is not on the requesting subnet {}",
                    net.cidr
                )),
                Ok(ip) => {
                    table.offer(&client, ip, lease_hostname(cfg, msg, mac).as_deref(), now);
                    Outcome {
                        reply: Some(build(cfg, &net, msg, MessageType::Offer, ip, mac)),
                        durability: Durability::None,
                        bound: None,
                        note: format!("offer {ip}"),
                        new_binding: false,
                        dropped: None,
                        pool_exhausted: false,
                    }
                }
                Err(NoAddress::NotServed) => Outcome::silent("unknown MAC, no pool"),
                Err(NoAddress::PoolExhausted) => Outcome {
                    pool_exhausted: true,
                    ..Outcome::silent(format!(
                        "no offer: the pool of {} is exhausted (every address is bound, offered or declined)",
                        net.cidr
                    ))
                },
                Err(e) => Outcome::silent(e.to_string()),
            }
        }
        MessageType::Request => {
            if !table.serves(&client) {
                return Outcome::silent("unknown MAC, no pool");
            }
            let requested = opt_ip(msg, OptionCode::RequestedIpAddress);
            let ciaddr = msg.ciaddr();
            let ip = match sid {
                Some(s) if s != cfg.server_id => {
                    table.cancel_offer(&client);
                    return Outcome::silent(format!("client selected server {s}"));
                }
                Some(_) => requested.or((!ciaddr.is_unspecified()).then_some(ciaddr)),
                None if ciaddr.is_unspecified() => requested,
                None => Some(ciaddr),
            };
            let Some(ip) = ip else {
                return Outcome::silent("REQUEST without requested address or ciaddr");
            };
            if net.cidr.contains(ip) && table.may_use(&client, ip, now) {
                let held = table
                    .lease_of(&client)
                    .is_some_and(|l| l.ip == ip && l.state == super::leases::State::Bound);
                let renewal = held && table.lease_of(&client).is_some_and(|l| l.active(now));
                // A reservation, not the lease file, decides who may use a
                // node's address: its record is written lazily, so a full
                // or read-only disk never delays a node's ACK. Only pool
                // bindings wait for the disk.
                let reserved = table.reserved_ip(&mac) == Some(ip);
                table.bind(&client, ip, lease_hostname(cfg, msg, mac).as_deref(), now);
                let (durability, bound) = if reserved {
                    (Durability::Lazy, None)
                } else {
                    (Durability::BeforeReply, Some(ip))
                };
                Outcome {
                    reply: Some(build(cfg, &net, msg, MessageType::Ack, ip, mac)),
                    durability,
                    bound,
                    note: format!("ack {ip}"),
                    new_binding: !renewal,
                    dropped: None,
                    pool_exhausted: false,
                }
            } else {
                let why = if !net.cidr.contains(ip) {
                    format!("{ip} is not on {}", net.cidr)
                } else if let Some(r) = table.reserved_ip(&mac) {
                    format!("{ip} requested, reserved address is {r}")
                } else {
                    format!("{ip} is not available to this client")
                };
                Outcome {
                    reply: Some(build(
                        cfg,
                        &net,
                        msg,
                        MessageType::Nak,
                        Ipv4Addr::UNSPECIFIED,
                        mac,
                    )),
                    durability: Durability::None,
                    bound: None,
                    note: format!("nak: {why}"),
                    new_binding: false,
                    dropped: None,
                    pool_exhausted: false,
                }
            }
        }
        MessageType::Release => {
            if sid.is_some_and(|s| s != cfg.server_id) {
                return Outcome::silent("release for another server");
            }
            let changed = table.release(&client, msg.ciaddr(), now);
            Outcome {
                reply: None,
                durability: durable_if(changed),
                bound: None,
                new_binding: false,
                dropped: None,
                pool_exhausted: false,
                note: format!(
                    "release {} ({})",
                    msg.ciaddr(),
                    if changed { "freed" } else { "no such lease" }
                ),
            }
        }
        MessageType::Decline => {
            if sid.is_some_and(|s| s != cfg.server_id) {
                return Outcome::silent("decline for another server");
            }
            let Some(ip) = opt_ip(msg, OptionCode::RequestedIpAddress) else {
                return Outcome::silent("decline without requested address");
            };
            let changed = table.decline(&client, ip, now);
            Outcome {
                reply: None,
                durability: durable_if(changed),
                bound: None,
                new_binding: false,
                dropped: None,
                pool_exhausted: false,
                note: format!(
                    "decline {ip} ({})",
                    if changed {
                        "address conflict: quarantined"
                    } else {
                        "no such lease"
                    }
                ),
            }
        }
        MessageType::Inform => {
            if !table.serves(&client) {
                return Outcome::silent("unknown MAC, no pool");
            }
            if !net.cidr.contains(msg.ciaddr()) {
                return Outcome::silent(format!(
                    "inform from {} outside {}",
                    msg.ciaddr(),
                    net.cidr
                ));
            }
            Outcome {
                reply: Some(build(
                    cfg,
                    &net,
                    msg,
                    MessageType::Ack,
                    Ipv4Addr::UNSPECIFIED,
                    mac,
                )),
                durability: Durability::None,
                bound: None,
                note: "inform".into(),
                new_binding: false,
                dropped: None,
                pool_exhausted: false,
            }
        }
        other => Outcome::silent(format!("ignored message type {other:?}")),
    }
}

/// Build an OFFER/ACK/NAK for `req` (INFORM's ACK when `yiaddr` is 0).
fn build(
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
                super::fqdn::answer(&f, name.as_deref()),
            )));
        }
        // Boot options only for a client that asks to boot (firmware PXE,
        // UEFI HTTP Boot, iPXE): never for an installed OS's DHCP client.
        if let Some(client) = boot_client(req) {
            let is_node = cfg.hostnames.contains_key(&mac);
            if let Some(nb) = cfg.netboot.as_ref().filter(|nb| is_node || nb.pool) {
                match super::boot::answer(client, &nb.offer) {
                    Ok(b) => set_boot(
                        &mut m,
                        &b.file,
                        b.next_server,
                        b.vendor_class,
                        b.pxe_discovery,
                    ),
                    Err(e) => {
                        if let Some(tail) = super::LOG.check("no network boot", None) {
                            tracing::warn!(%mac, "dhcp: no network boot: {e}{tail}");
                        }
                    }
                }
            } else if let Some(p) = &cfg.pxe {
                let file = if client == super::boot::Client::Ipxe {
                    p.ipxe_script_url.as_ref().or(p.boot_file.as_ref())
                } else {
                    p.boot_file.as_ref()
                };
                if let Some(f) = file {
                    set_boot(&mut m, f, p.next_server, None, false);
                }
            }
        }
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

#[cfg(test)]
mod tests;
