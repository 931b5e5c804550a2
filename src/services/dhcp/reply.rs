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
use std::sync::Arc;

use dhcproto::v4::{DhcpOption, Message, MessageType, OptionCode};

pub use super::decode::{Malformed, decode};
use super::leases::{Client, LeaseTable, NoAddress};
pub use super::relay::{Dropped, Subnet};
use crate::model::cluster::{MacAddr, PxeCfg};
use crate::plan::Plan;
use crate::runtime::datagram;
use crate::runtime::lograte::LogRate;
pub(crate) use wire::boot_client;
use wire::build;
pub use wire::{MIN_LEN, encode};

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
    /// The service's limiter of the warnings a client can cause.
    pub log: Arc<LogRate>,
}

impl Config {
    /// The replies' configuration for `plan`, warnings rate limited by
    /// `log`.
    pub fn from_plan(plan: &Plan, server_port: u16, log: Arc<LogRate>) -> Config {
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
            log,
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

/// A reply and the change to the lease table that goes with it.
#[derive(Debug, Clone)]
pub struct Answer {
    pub reply: Reply,
    pub durability: Durability,
    /// The address an ACK bound whose record is not on disk yet: the caller
    /// marks it unsynced in the table (with [`Durability::BeforeReply`]).
    pub bound: Option<Ipv4Addr>,
    /// What was done (for the logs).
    pub note: String,
    /// An address was newly bound to a client (worth an info log; renewals
    /// are not).
    pub new_binding: bool,
}

/// No reply, and what the request changed (RELEASE and DECLINE change the
/// table without a reply).
#[derive(Debug, Clone)]
pub struct Quiet {
    /// Why there is no reply, or what was done (for the logs).
    pub note: String,
    pub durability: Durability,
    /// A DISCOVER got no offer because the subnet's pool has no free
    /// address (the note says which subnet).
    pub pool_exhausted: bool,
}

/// What to do with one request: a reply, silence, or a drop before any
/// decision (a bad or unknown relay, with the note that says why).
pub type Decision = datagram::Decision<Answer, Quiet, (Dropped, String)>;

fn durable_if(changed: bool) -> Durability {
    if changed {
        Durability::BeforeReply
    } else {
        Durability::None
    }
}

/// No reply, nothing changed.
fn silent(note: impl Into<String>) -> Decision {
    Decision::Silent(Quiet {
        note: note.into(),
        durability: Durability::None,
        pool_exhausted: false,
    })
}

/// A reply that changed nothing on disk.
fn answer(reply: Reply, note: impl Into<String>) -> Decision {
    Decision::Reply(Answer {
        reply,
        durability: Durability::None,
        bound: None,
        note: note.into(),
        new_binding: false,
    })
}

impl Decision {
    /// The reply to send, if any.
    pub fn sent(&self) -> Option<&Reply> {
        match self {
            Decision::Reply(a) => Some(&a.reply),
            _ => None,
        }
    }

    /// The reply to send, taken.
    pub fn into_reply(self) -> Option<Reply> {
        match self {
            Decision::Reply(a) => Some(a.reply),
            _ => None,
        }
    }

    /// Why the request was dropped before any decision, if it was.
    pub fn why_dropped(&self) -> Option<Dropped> {
        self.dropped().map(|(why, _)| *why)
    }

    /// How the decision's change must reach the disk.
    pub fn durability(&self) -> Durability {
        match self {
            Decision::Reply(a) => a.durability,
            Decision::Silent(q) => q.durability,
            Decision::Dropped(_) => Durability::None,
        }
    }

    /// What was done, or why not (for the logs).
    pub fn note(&self) -> &str {
        match self {
            Decision::Reply(a) => &a.note,
            Decision::Silent(q) => &q.note,
            Decision::Dropped((_, note)) => note,
        }
    }

    /// A DISCOVER found the pool exhausted.
    pub fn pool_exhausted(&self) -> bool {
        matches!(self, Decision::Silent(q) if q.pool_exhausted)
    }

    /// What the caller does after deciding: mark the bound record unsynced
    /// in the table (so a later renewal is not taken for one already on
    /// disk) and report how the change must reach the disk.
    pub fn apply_marks(&self, table: &mut LeaseTable) -> Durability {
        if let Decision::Reply(Answer {
            bound: Some(ip), ..
        }) = self
        {
            table.mark_unsynced(*ip);
        }
        self.durability()
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

/// One request as the per-type decisions see it.
struct Req<'a> {
    cfg: &'a Config,
    msg: &'a Message,
    net: Subnet,
    mac: MacAddr,
    client: Client,
    /// The server identifier the client named (option 54).
    sid: Option<Ipv4Addr>,
    now: u64,
}

/// Decide what to answer to `msg`: one function per message type.
pub fn handle(cfg: &Config, table: &mut LeaseTable, msg: &Message, now: u64) -> Decision {
    let Some(mac) = mac_of(msg) else {
        return silent("no hardware address");
    };
    if mac.is_multicast() || mac.0 == [0; 6] {
        return silent("multicast or zero hardware address");
    }
    let net = match cfg.subnet_of(msg) {
        Ok(n) => n,
        Err(why) => return Decision::Dropped(why),
    };
    let Some(kind) = msg.opts().msg_type() else {
        return silent("no message type");
    };
    let req = Req {
        cfg,
        msg,
        net,
        mac,
        client: client_of(msg, mac),
        sid: opt_ip(msg, OptionCode::ServerIdentifier),
        now,
    };
    match kind {
        MessageType::Discover => discover(&req, table),
        MessageType::Request => request(&req, table),
        MessageType::Release => release(&req, table),
        MessageType::Decline => decline(&req, table),
        MessageType::Inform => inform(&req, table),
        other => silent(format!("ignored message type {other:?}")),
    }
}

/// DISCOVER → OFFER of [`LeaseTable::choose_in`], or silence.
fn discover(r: &Req<'_>, table: &mut LeaseTable) -> Decision {
    let requested = opt_ip(r.msg, OptionCode::RequestedIpAddress);
    match table.choose_in(&r.client, requested, r.net.cidr, r.now) {
        Ok(ip) if !r.net.cidr.contains(ip) => silent(format!(
            "reserved address {ip} is not on the requesting subnet {}",
            r.net.cidr
        )),
        Ok(ip) => {
            let hostname = lease_hostname(r.cfg, r.msg, r.mac);
            table.offer(&r.client, ip, hostname.as_deref(), r.now);
            let offer = build(r.cfg, &r.net, r.msg, MessageType::Offer, ip, r.mac);
            answer(offer, format!("offer {ip}"))
        }
        Err(NoAddress::NotServed) => silent("unknown MAC, no pool"),
        Err(NoAddress::PoolExhausted) => Decision::Silent(Quiet {
            note: format!(
                "no offer: the pool of {} is exhausted (every address is bound, offered or declined)",
                r.net.cidr
            ),
            durability: Durability::None,
            pool_exhausted: true,
        }),
        Err(e) => silent(e.to_string()),
    }
}

/// REQUEST, by client state (RFC 2131 §4.3.2): ACK, NAK, or silence.
fn request(r: &Req<'_>, table: &mut LeaseTable) -> Decision {
    if !table.serves(&r.client) {
        return silent("unknown MAC, no pool");
    }
    let requested = opt_ip(r.msg, OptionCode::RequestedIpAddress);
    let ciaddr = r.msg.ciaddr();
    let ip = match r.sid {
        Some(s) if s != r.cfg.server_id => {
            table.cancel_offer(&r.client);
            return silent(format!("client selected server {s}"));
        }
        Some(_) => requested.or((!ciaddr.is_unspecified()).then_some(ciaddr)),
        None if ciaddr.is_unspecified() => requested,
        None => Some(ciaddr),
    };
    let Some(ip) = ip else {
        return silent("REQUEST without requested address or ciaddr");
    };
    if !(r.net.cidr.contains(ip) && table.may_use(&r.client, ip, r.now)) {
        let why = if !r.net.cidr.contains(ip) {
            format!("{ip} is not on {}", r.net.cidr)
        } else if let Some(res) = table.reserved_ip(&r.mac) {
            format!("{ip} requested, reserved address is {res}")
        } else {
            format!("{ip} is not available to this client")
        };
        let nak = build(
            r.cfg,
            &r.net,
            r.msg,
            MessageType::Nak,
            Ipv4Addr::UNSPECIFIED,
            r.mac,
        );
        return answer(nak, format!("nak: {why}"));
    }
    let held = table
        .lease_of(&r.client)
        .is_some_and(|l| l.ip == ip && l.state == super::leases::State::Bound);
    let renewal = held && table.lease_of(&r.client).is_some_and(|l| l.active(r.now));
    // A reservation, not the lease file, decides who may use a node's
    // address: its record is written lazily, so a full or read-only disk
    // never delays a node's ACK. Only pool bindings wait for the disk.
    let reserved = table.reserved_ip(&r.mac) == Some(ip);
    let hostname = lease_hostname(r.cfg, r.msg, r.mac);
    table.bind(&r.client, ip, hostname.as_deref(), r.now);
    let (durability, bound) = if reserved {
        (Durability::Lazy, None)
    } else {
        (Durability::BeforeReply, Some(ip))
    };
    Decision::Reply(Answer {
        reply: build(r.cfg, &r.net, r.msg, MessageType::Ack, ip, r.mac),
        durability,
        bound,
        note: format!("ack {ip}"),
        new_binding: !renewal,
    })
}

/// RELEASE frees the client's lease (no reply).
fn release(r: &Req<'_>, table: &mut LeaseTable) -> Decision {
    if r.sid.is_some_and(|s| s != r.cfg.server_id) {
        return silent("release for another server");
    }
    let changed = table.release(&r.client, r.msg.ciaddr(), r.now);
    Decision::Silent(Quiet {
        note: format!(
            "release {} ({})",
            r.msg.ciaddr(),
            if changed { "freed" } else { "no such lease" }
        ),
        durability: durable_if(changed),
        pool_exhausted: false,
    })
}

/// DECLINE quarantines the address (no reply).
fn decline(r: &Req<'_>, table: &mut LeaseTable) -> Decision {
    if r.sid.is_some_and(|s| s != r.cfg.server_id) {
        return silent("decline for another server");
    }
    let Some(ip) = opt_ip(r.msg, OptionCode::RequestedIpAddress) else {
        return silent("decline without requested address");
    };
    let changed = table.decline(&r.client, ip, r.now);
    let what = if changed {
        "address conflict: quarantined"
    } else {
        "no such lease"
    };
    Decision::Silent(Quiet {
        note: format!("decline {ip} ({what})"),
        durability: durable_if(changed),
        pool_exhausted: false,
    })
}

/// INFORM → ACK with the configuration only (no address, no lease time).
fn inform(r: &Req<'_>, table: &LeaseTable) -> Decision {
    if !table.serves(&r.client) {
        return silent("unknown MAC, no pool");
    }
    if !r.net.cidr.contains(r.msg.ciaddr()) {
        return silent(format!(
            "inform from {} outside {}",
            r.msg.ciaddr(),
            r.net.cidr
        ));
    }
    let ack = build(
        r.cfg,
        &r.net,
        r.msg,
        MessageType::Ack,
        Ipv4Addr::UNSPECIFIED,
        r.mac,
    );
    answer(ack, "inform")
}

mod wire;

#[cfg(test)]
mod tests;
