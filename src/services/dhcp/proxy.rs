//! proxyDHCP (`dhcp.mode: proxy`): boot answers beside the site's DHCP
//! server, which lends every address. Pure: (configuration, request, the
//! port it came in on, its source) → a reply or silence.
//!
//! As the PXE specification (2.1, §2.2.3) and dnsmasq's
//! `dhcp-range=…,proxy` give them:
//! - Only a client that asks to boot ([`super::boot::classify`]: option 60
//!   `PXEClient…` or `HTTPClient…`, iPXE's user class or option 175) and
//!   whose MAC is a node of the inventory is answered. Anything else —
//!   an installed OS's DHCP client, an unknown MAC, a relayed request —
//!   gets nothing (unknown PXE clients are reported for a rate-limited
//!   log line by the caller).
//! - On the DHCP port (67): a DISCOVER gets an OFFER; a REQUEST only when
//!   it names this server (option 54), else it is the client taking the
//!   site's offer and is none of ours. Replies are broadcast to the client
//!   port (the client has no address yet) with the broadcast flag set.
//! - On the PXE boot server port (4011): a REQUEST (or INFORM) gets an
//!   ACK, unicast back to where it came from (iPXE and EDK2 only accept it
//!   from port 4011, at the address they asked).
//! - Every reply: `yiaddr` 0 (never an address), option 53, 54 (this
//!   server), 60 `PXEClient` (`HTTPClient` to UEFI HTTP Boot), the client's
//!   97 (machine UUID) echoed, 43 with PXE discovery control 8 (boot the
//!   named file at once: no menu, no multicast or broadcast discovery;
//!   not to HTTP Boot), `siaddr`, `file`, 66 and 67 — the same boot file
//!   choice as in server mode ([`super::boot::answer`]). No lease time,
//!   mask, router or DNS: those are the site server's. Never a NAK.

use std::net::{Ipv4Addr, SocketAddrV4};

use dhcproto::v4::{DhcpOption, Flags, HType, Message, MessageType, Opcode, OptionCode};

use super::boot::{self, Client, PXE_OPTION_43};
use super::reply::{Config, Dest, Reply, mac_of};
use crate::model::cluster::MacAddr;

/// Where a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// The DHCP server port (67).
    Dhcp,
    /// The PXE boot server port (4011).
    BootServer,
}

/// What to do with one request in proxy mode.
#[derive(Debug, Clone)]
pub struct Decision {
    pub reply: Option<Reply>,
    /// What was done, or why nothing (for logs).
    pub note: String,
    /// A PXE client whose MAC is not in the inventory (logged by the
    /// caller at most once per interval).
    pub unknown_client: bool,
}

impl Decision {
    fn silent(note: impl Into<String>) -> Decision {
        Decision {
            reply: None,
            note: note.into(),
            unknown_client: false,
        }
    }
}

/// Decide what a proxy answers to `msg`, received on `port` from `src`.
pub fn handle(cfg: &Config, msg: &Message, port: Port, src: SocketAddrV4) -> Decision {
    let Some(mac) = mac_of(msg).filter(|m| !m.is_multicast() && m.0 != [0; 6]) else {
        return Decision::silent("no usable hardware address");
    };
    let Some(kind) = msg.opts().msg_type() else {
        return Decision::silent("no message type");
    };
    let answer = match (port, kind) {
        (Port::Dhcp, MessageType::Discover) => MessageType::Offer,
        (Port::Dhcp, MessageType::Request) => match msg.opts().get(OptionCode::ServerIdentifier) {
            Some(DhcpOption::ServerIdentifier(s)) if *s == cfg.server_id => MessageType::Ack,
            _ => return Decision::silent("REQUEST for the site's DHCP server"),
        },
        (Port::BootServer, MessageType::Request | MessageType::Inform) => MessageType::Ack,
        (_, other) => return Decision::silent(format!("{other:?} is not answered by a proxy")),
    };
    if !msg.giaddr().is_unspecified() {
        return Decision::silent("relayed requests are not answered in proxy mode");
    }
    let Some(client) = super::reply::boot_client(msg) else {
        return Decision::silent("not a network boot client (no PXEClient, HTTPClient or iPXE)");
    };
    if !cfg.hostnames.contains_key(&mac) {
        return Decision {
            unknown_client: true,
            ..Decision::silent(format!(
                "network boot client {mac} is not in the inventory (nodes[].mac)"
            ))
        };
    }
    let (file, next_server) = match boot_file(cfg, client) {
        Ok(x) => x,
        Err(why) => return Decision::silent(why.to_string()),
    };
    let m = build(cfg, msg, answer, port, client, mac, &file, next_server);
    let dest = match port {
        // No address yet: the client listens for broadcasts.
        Port::Dhcp => Dest::Broadcast,
        Port::BootServer if src.ip().is_unspecified() => Dest::Broadcast,
        Port::BootServer => Dest::Unicast(src),
    };
    Decision {
        reply: Some(Reply {
            kind: answer,
            msg: m,
            dest,
        }),
        note: format!("proxy {answer:?}: {file} from {next_server}"),
        unknown_client: false,
    }
}

/// Why a network boot client gets no proxy answer (the log's note).
#[derive(Debug, thiserror::Error)]
enum NothingToBoot {
    /// The automatic network boot has nothing for this client.
    #[error(transparent)]
    Netboot(#[from] boot::NoBoot),
    /// Neither the `pxe:` section nor `dhcp.pxe`.
    #[error("nothing to boot: no pxe section and no dhcp.pxe")]
    NoPxe,
    /// `dhcp.pxe` without `bootFile` (and, for iPXE, without
    /// `ipxeScriptUrl`).
    #[error("nothing to boot: dhcp.pxe has no bootFile")]
    NoBootFile,
}

/// The boot file and server for `client`: the automatic network boot (the
/// `pxe:` section's TFTP), else `dhcp.pxe`'s `bootFile`/`ipxeScriptUrl`.
fn boot_file(cfg: &Config, client: Client) -> Result<(String, Ipv4Addr), NothingToBoot> {
    if let Some(nb) = &cfg.netboot {
        let b = boot::answer(client, &nb.offer)?;
        return Ok((b.file, b.next_server));
    }
    let p = cfg.pxe.as_ref().ok_or(NothingToBoot::NoPxe)?;
    let file = match client {
        Client::Ipxe => p.ipxe_script_url.as_ref().or(p.boot_file.as_ref()),
        _ => p.boot_file.as_ref(),
    };
    file.map(|f| (f.clone(), p.next_server))
        .ok_or(NothingToBoot::NoBootFile)
}

/// The proxy reply: BOOTP header with `yiaddr` 0, then the boot options.
#[allow(clippy::too_many_arguments)]
fn build(
    cfg: &Config,
    req: &Message,
    kind: MessageType,
    port: Port,
    client: Client,
    mac: MacAddr,
    file: &str,
    next_server: Ipv4Addr,
) -> Message {
    let ciaddr = match port {
        Port::BootServer => req.ciaddr(),
        Port::Dhcp => Ipv4Addr::UNSPECIFIED,
    };
    let mut m = Message::new_with_id(
        req.xid(),
        ciaddr,
        Ipv4Addr::UNSPECIFIED,
        next_server,
        Ipv4Addr::UNSPECIFIED,
        &mac.0,
    );
    m.set_opcode(Opcode::BootReply);
    m.set_htype(HType::Eth);
    let flags = match port {
        Port::Dhcp => Flags::default().set_broadcast(),
        Port::BootServer => Flags::new(u16::from(req.flags()) & 0x8000),
    };
    m.set_flags(flags);
    // The header field holds 128 bytes NUL-terminated (dhcproto panics
    // above); longer names go in option 67 only.
    if file.len() < 128 {
        m.set_fname_str(file);
    }
    let http = matches!(client, Client::Http(_));
    let o = m.opts_mut();
    o.insert(DhcpOption::MessageType(kind));
    o.insert(DhcpOption::ServerIdentifier(cfg.server_id));
    let vendor: &str = if http { "HTTPClient" } else { "PXEClient" };
    o.insert(DhcpOption::ClassIdentifier(vendor.as_bytes().to_vec()));
    // The machine UUID (97), echoed as the PXE specification asks.
    if let Some(uuid) = req.opts().get(OptionCode::from(97u8)) {
        o.insert(uuid.clone());
    }
    if !http {
        o.insert(DhcpOption::VendorExtensions(PXE_OPTION_43.to_vec()));
    }
    o.insert(DhcpOption::TFTPServerName(
        next_server.to_string().into_bytes(),
    ));
    o.insert(DhcpOption::BootfileName(file.as_bytes().to_vec()));
    m
}

#[cfg(test)]
mod tests;
