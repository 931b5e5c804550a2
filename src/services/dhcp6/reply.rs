//! Request → reply for DHCPv6 (RFC 8415 §18.3), pure: the binding table
//! and the clock are passed in, no I/O.
//!
//! - Solicit → Advertise (preference 255), or Reply with Rapid Commit when
//!   the client asked for it (the binding is made then).
//! - Request / Renew / Rebind → Reply binding each IA_NA (Renew/Rebind
//!   also return addresses the client may no longer use with lifetimes 0).
//! - Release / Decline → Reply (status Success; NoBinding per unknown IA).
//!   A Decline of a reserved address counts only from the DUID bound to it
//!   and with evidence of the node's MAC ([`super::ident`]); declines are
//!   rate-limited ([`super::bindings::Table::decline`]).
//! - Confirm → Reply Success or NotOnLink.
//! - Information-Request → Reply with the configuration options.
//!
//! Every Advertise/Reply carries options 23 (DNS), 24 (domain search) and,
//! when the time service runs, 56 (NTP server). A client whose MAC cannot be
//! found ([`super::ident`]) or has no reservation gets silence for a Solicit
//! (unless a pool is configured) and the reason in [`Done::refused`].
//!
//! Invariants: a message for another server (Server Identifier not ours),
//! without a Client Identifier where one is required, or with a Server
//! Identifier where none is allowed, is dropped (§16); a reserved address
//! is given at most once per message; bad input never panics. A reply does
//! not grow with what the client sends: at most [`MAX_IAS`] IA_NAs are
//! answered, an IA without an address carries a status code without text,
//! and the reason is said once, in a top-level status, when no IA got an
//! address.

use std::collections::{HashMap, HashSet};
use std::net::Ipv6Addr;

use dhcproto::v6::{
    DhcpOption, IAAddr, IANA, Message, MessageType, NtpSuboption, OptionCode, Status, StatusCode,
};
use dhcproto::{Decodable as _, Encodable as _, Name};

use super::bindings::{Client, DeclineRefused, NoAddress, Table};
use super::ident::{self, MacSource, Seen};
use crate::model::cluster::MacAddr;
use crate::runtime::datagram;

/// IA_NAs answered per message (a node needs one or two); the rest are
/// ignored.
pub const MAX_IAS: usize = 8;

/// The reply configuration (swapped by a reload).
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Our Server Identifier (a DUID).
    pub server_duid: Vec<u8>,
    /// Option 23.
    pub dns: Vec<Ipv6Addr>,
    /// Option 24 (the cluster domain).
    pub search: Vec<String>,
    /// Option 56 (empty: the time service is off).
    pub ntp: Vec<Ipv6Addr>,
    /// Nodes' hostnames, for logs.
    pub hostnames: HashMap<MacAddr, String>,
    /// Relay agents answered (`dhcp.relays`, IPv6 entries): the source
    /// address of a Relay-Forward must be one of them.
    pub relays: Vec<Ipv6Addr>,
}

/// What a reply needs on disk before it leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Durability {
    /// Nothing changed.
    #[default]
    None,
    /// Changed, but the reply may leave at once (reserved addresses: the
    /// reservation decides them).
    Lazy,
    /// A pool binding: on disk before the reply.
    BeforeReply,
}

/// A client message and what is known of where it came from.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub msg: &'a Message,
    /// How it came, and so what vouches for the client's MAC.
    pub seen: Seen<'a>,
}

/// What a decision did, with or without a reply.
#[derive(Debug, Clone, Default)]
pub struct Done {
    pub durability: Durability,
    /// What happened, for the log.
    pub note: String,
    /// Why the client got no address (for the rate-limited warning).
    pub refused: Option<NoAddress>,
    /// The client's MAC and where it came from.
    pub mac: Option<(MacAddr, MacSource)>,
    /// A binding was made or moved (worth an info line).
    pub new_binding: bool,
    /// A Decline that was not applied, and why (for the warning).
    pub decline_refused: Option<DeclineRefused>,
}

/// The result of one message: a reply, silence (a Solicit nobody serves),
/// or a drop for a protocol reason (not ours, malformed: the note says).
pub type Decision = datagram::Decision<(Message, Done), Done, String>;

impl Decision {
    /// What the decision did (`None` for a drop).
    pub fn done(&self) -> Option<&Done> {
        match self {
            Decision::Reply((_, d)) | Decision::Silent(d) => Some(d),
            Decision::Dropped(_) => None,
        }
    }

    /// The reply, if any.
    pub fn sent(&self) -> Option<&Message> {
        match self {
            Decision::Reply((m, _)) => Some(m),
            _ => None,
        }
    }

    /// Dropped for a protocol reason.
    pub fn is_dropped(&self) -> bool {
        matches!(self, Decision::Dropped(_))
    }

    /// What happened, for the log.
    pub fn note(&self) -> &str {
        match self {
            Decision::Reply((_, d)) | Decision::Silent(d) => &d.note,
            Decision::Dropped(note) => note,
        }
    }

    /// How the change must reach the disk.
    pub fn durability(&self) -> Durability {
        self.done().map_or(Durability::None, |d| d.durability)
    }
}

/// A reply, or silence when there is none.
fn decided(reply: Option<Message>, done: Done) -> Decision {
    match reply {
        Some(m) => Decision::Reply((m, done)),
        None => Decision::Silent(done),
    }
}

/// Decode a client message.
pub fn decode(b: &[u8]) -> Result<Message, dhcproto::error::DecodeError> {
    Message::from_bytes(b)
}

/// Encode a reply (never fails for the messages built here; an empty vec
/// if it did).
pub fn encode(m: &Message) -> Vec<u8> {
    m.to_vec().unwrap_or_default()
}

fn status(code: Status, msg: &str) -> DhcpOption {
    DhcpOption::StatusCode(StatusCode {
        status: code,
        msg: msg.into(),
    })
}

/// The reply skeleton: same transaction id, the client's and our DUIDs,
/// the configuration options.
fn skeleton(cfg: &Config, kind: MessageType, req: &Message, duid: Option<&[u8]>) -> Message {
    let mut m = Message::new_with_id(kind, req.xid());
    let o = m.opts_mut();
    if let Some(d) = duid {
        o.insert(DhcpOption::ClientId(d.to_vec()));
    }
    o.insert(DhcpOption::ServerId(cfg.server_duid.clone()));
    if !cfg.dns.is_empty() {
        o.insert(DhcpOption::DomainNameServers(cfg.dns.clone()));
    }
    let names: Vec<Name> = cfg
        .search
        .iter()
        .filter_map(|d| Name::from_ascii(format!("{}.", d.trim_end_matches('.'))).ok())
        .collect();
    if !names.is_empty() {
        o.insert(DhcpOption::DomainSearchList(names));
    }
    if !cfg.ntp.is_empty() {
        o.insert(DhcpOption::NtpServer(
            cfg.ntp
                .iter()
                .map(|a| NtpSuboption::ServerAddress(*a))
                .collect(),
        ));
    }
    m
}

fn ia_addrs(ia: &IANA) -> Vec<Ipv6Addr> {
    ia.opts
        .iter()
        .filter_map(|o| match o {
            DhcpOption::IAAddr(a) => Some(a.addr),
            _ => None,
        })
        .collect()
}

/// The first [`MAX_IAS`] IA_NAs of `msg`.
fn ias(msg: &Message) -> Vec<IANA> {
    msg.opts()
        .iter()
        .filter_map(|o| match o {
            DhcpOption::IANA(ia) => Some(ia.clone()),
            _ => None,
        })
        .take(MAX_IAS)
        .collect()
}

fn iaaddr(addr: Ipv6Addr, life: u32) -> DhcpOption {
    DhcpOption::IAAddr(IAAddr {
        addr,
        preferred_life: life,
        valid_life: life,
        opts: Default::default(),
    })
}

/// An IA_NA for the reply with `opts`, T1 = ½ and T2 = ⅘ of `life`.
fn ia_reply(id: u32, life: u32, opts: Vec<DhcpOption>) -> DhcpOption {
    let mut ia = IANA {
        id,
        t1: life / 2,
        t2: life / 5 * 4,
        opts: Default::default(),
    };
    for o in opts {
        ia.opts.insert(o);
    }
    DhcpOption::IANA(ia)
}

/// Handle one client message. `now` is Unix seconds. The §16 checks,
/// then one function per message type.
pub fn handle(cfg: &Config, table: &mut Table, req: &Request<'_>, now: u64) -> Decision {
    use MessageType as T;
    let msg = req.msg;
    let kind = msg.msg_type();
    let client_id = match msg.opts().get(OptionCode::ClientId) {
        Some(DhcpOption::ClientId(d)) if !d.is_empty() => Some(d.clone()),
        _ => None,
    };
    let server_id = match msg.opts().get(OptionCode::ServerId) {
        Some(DhcpOption::ServerId(d)) => Some(d.as_slice()),
        _ => None,
    };
    // §16: which messages must, may or must not name a server.
    let ours = server_id.is_some_and(|s| s == cfg.server_duid.as_slice());
    match kind {
        T::Solicit | T::Confirm | T::Rebind if server_id.is_some() => {
            return Decision::Dropped(format!("{kind:?} with a Server Identifier"));
        }
        T::Request | T::Renew | T::Release | T::Decline if !ours => {
            return Decision::Dropped(format!("{kind:?} for another server"));
        }
        T::InformationRequest if server_id.is_some() && !ours => {
            return Decision::Dropped("Information-Request for another server".into());
        }
        T::Solicit | T::Request | T::Renew | T::Rebind | T::Release | T::Decline | T::Confirm => {}
        T::InformationRequest => return information_request(cfg, msg, client_id.as_deref()),
        other => return Decision::Dropped(format!("{other:?} is not a client message")),
    }
    let Some(duid) = client_id else {
        return Decision::Dropped(format!("{kind:?} without a Client Identifier"));
    };
    // An earlier binding of the DUID vouches only behind a relay: on the
    // link, a DUID is no evidence (any host can send it).
    let mac = ident::find_mac(&duid, &req.seen).or_else(|| {
        req.seen
            .relayed()
            .then(|| table.mac_of_duid(&duid))
            .flatten()
            .map(|m| (m, MacSource::Binding))
    });
    let mut done = Done {
        mac,
        ..Done::default()
    };
    let life = table.scope().lease_time.max(1);
    let client = |iaid| Client {
        duid: duid.clone(),
        iaid,
        mac: mac.map(|m| m.0),
    };
    let requested = ias(msg);
    let reply = match kind {
        T::Confirm => {
            let Some(r) = confirm(cfg, table, msg, &requested, &duid, &mut done) else {
                return Decision::Dropped("Confirm without addresses".into());
            };
            Some(r)
        }
        T::Release | T::Decline => {
            let r = skeleton(cfg, T::Reply, msg, Some(&duid));
            let r = release_or_decline(table, msg, &requested, &client, now, &mut done, r);
            Some(r)
        }
        _ => assign(
            cfg, table, msg, &requested, &duid, &client, life, now, &mut done,
        ),
    };
    decided(reply, done)
}

/// Information-Request → Reply with the configuration options.
fn information_request(cfg: &Config, msg: &Message, duid: Option<&[u8]>) -> Decision {
    let mut r = skeleton(cfg, MessageType::Reply, msg, duid);
    r.opts_mut()
        .insert(DhcpOption::InformationRefreshTime(86_400));
    let done = Done {
        note: "configuration only".into(),
        ..Done::default()
    };
    Decision::Reply((r, done))
}

/// Confirm → Reply Success or NotOnLink (`None`: no address to confirm).
fn confirm(
    cfg: &Config,
    table: &Table,
    msg: &Message,
    requested: &[IANA],
    duid: &[u8],
    out: &mut Done,
) -> Option<Message> {
    let addrs: Vec<Ipv6Addr> = requested.iter().flat_map(ia_addrs).collect();
    if addrs.is_empty() {
        return None;
    }
    let on_link = addrs.iter().all(|a| table.scope().on_link(*a));
    let mut r = skeleton(cfg, MessageType::Reply, msg, Some(duid));
    r.opts_mut().insert(if on_link {
        status(Status::Success, "on link")
    } else {
        status(Status::NotOnLink, "not on this link")
    });
    out.note = format!(
        "Confirm: {}",
        if on_link { "on link" } else { "not on link" }
    );
    Some(r)
}

/// Release / Decline → `r`, the Reply, with Success (NoBinding per
/// unknown IA).
fn release_or_decline(
    table: &mut Table,
    msg: &Message,
    requested: &[IANA],
    client: &dyn Fn(u32) -> Client,
    now: u64,
    out: &mut Done,
    mut r: Message,
) -> Message {
    let kind = msg.msg_type();
    let mut done = Vec::new();
    for ia in requested {
        let c = client(ia.id);
        let mut any = false;
        for a in ia_addrs(ia) {
            let changed = if kind == MessageType::Release {
                table.release(&c, a) || table.holds(&c, a)
            } else {
                match table.decline(&c, a, now) {
                    Ok(()) => true,
                    Err(why) => {
                        out.decline_refused.get_or_insert(why);
                        false
                    }
                }
            };
            if changed {
                any = true;
                done.push(a);
                let d = if table.reserved(c.mac) == Some(a) {
                    Durability::Lazy
                } else {
                    Durability::BeforeReply
                };
                out.durability = out.durability.max(d);
            }
        }
        if !any {
            r.opts_mut()
                .insert(ia_reply(ia.id, 0, vec![status(Status::NoBinding, "")]));
        }
    }
    r.opts_mut().insert(status(Status::Success, "ok"));
    out.note = match out.decline_refused {
        Some(why) => format!("{kind:?} of {done:?}; not applied: {why}"),
        None => format!("{kind:?} of {done:?}"),
    };
    r
}

/// Solicit, Request, Renew, Rebind: an address for every IA_NA.
#[allow(clippy::too_many_arguments)]
fn assign(
    cfg: &Config,
    table: &mut Table,
    msg: &Message,
    requested: &[IANA],
    duid: &[u8],
    client: &dyn Fn(u32) -> Client,
    life: u32,
    now: u64,
    out: &mut Done,
) -> Option<Message> {
    use MessageType as T;
    let kind = msg.msg_type();
    let rapid = kind == T::Solicit && msg.opts().get(OptionCode::RapidCommit).is_some();
    let commit = kind != T::Solicit || rapid;
    let mut r = skeleton(
        cfg,
        if commit { T::Reply } else { T::Advertise },
        msg,
        Some(duid),
    );
    if rapid {
        r.opts_mut().insert(DhcpOption::RapidCommit);
    }
    if kind == T::Solicit {
        r.opts_mut().insert(DhcpOption::Preference(255));
    }
    let mut given: HashSet<Ipv6Addr> = HashSet::new();
    let mut notes = Vec::new();
    for ia in requested {
        let c = client(ia.id);
        let asked = ia_addrs(ia);
        // `Err(None)`: the client's one address went to an earlier IA_NA
        // of this message.
        let chosen = match table.choose(&c, asked.first().copied(), now) {
            Ok(a) if given.insert(a) => Ok(a),
            Ok(_) => Err(None),
            Err(e) => Err(Some(e)),
        };
        let mut opts = Vec::new();
        match chosen {
            Ok(a) => {
                if commit {
                    out.new_binding |= table.bind(&c, a, now);
                    let d = if table.reserved(c.mac) == Some(a) {
                        Durability::Lazy
                    } else {
                        Durability::BeforeReply
                    };
                    out.durability = out.durability.max(d);
                }
                opts.push(iaaddr(a, life));
                notes.push(a.to_string());
            }
            // The reason is said once, below, not per IA.
            Err(e) => {
                if out.refused.is_none() {
                    out.refused = e;
                }
                opts.push(status(Status::NoAddrsAvail, ""));
            }
        }
        // Addresses the client holds that are not (or no longer) its own.
        if matches!(kind, T::Renew | T::Rebind) {
            for a in asked.into_iter().filter(|a| Ok(*a) != chosen) {
                opts.push(iaaddr(a, 0));
            }
        }
        r.opts_mut().insert(ia_reply(ia.id, life, opts));
    }
    if given.is_empty() && kind == T::Solicit && !requested.is_empty() {
        // Unknown client, no pool: silence (another server may serve it).
        out.note = format!(
            "Solicit: no address: {}",
            out.refused.map(|e| e.to_string()).unwrap_or_default()
        );
        return None;
    }
    if given.is_empty() && !requested.is_empty() {
        let why = out
            .refused
            .map_or_else(|| "no address".to_string(), |e| e.to_string());
        r.opts_mut().insert(status(Status::NoAddrsAvail, &why));
    }
    out.note = format!(
        "{kind:?}{}: {}",
        if rapid { " (rapid commit)" } else { "" },
        if notes.is_empty() {
            "no address".to_string()
        } else {
            notes.join(", ")
        }
    );
    Some(r)
}

#[cfg(test)]
mod tests;
