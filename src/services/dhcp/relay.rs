//! Which subnet a request is for, and relay addresses that are refused.
//!
//! A request that is not relayed (giaddr 0) is for the local network
//! (`network.cidr`). A relayed one is for the subnet holding the relay
//! agent's link-selection sub-option (82/5, RFC 3527) or the client's
//! subnet-selection option (118, RFC 3011) when present, else giaddr: the
//! local network or a `dhcp.segments[]` entry. Anything else is dropped
//! ([`Dropped::UnknownSegment`], logged at warn by the socket layer,
//! rate-limited) — dnsmasq's "no address range available".
//!
//! Invariants: a giaddr no relay agent can have ([`Config::bad_relay`]) is
//! never answered, whatever the options say ([`Dropped::BadRelay`]); a
//! reply is never sent to a broadcast, multicast, loopback (unless the
//! network is loopback, as in tests) or the appliance's own address on a
//! request's say-so. Nor to any other address that is not a configured
//! relay — a segment's gateway or a `dhcp.relays` entry
//! ([`Dropped::UnknownRelay`]): replies to a relayed request go to giaddr,
//! so any host could otherwise have them reflected to any address of the
//! network. The giaddr is what is matched, not the datagram's source: the
//! source is the relay's address towards the server (dhcrelay's upstream
//! interface), which is not giaddr, and it is as easy to forge; matching
//! giaddr is what keeps replies from going anywhere else.

use std::net::Ipv4Addr;

use dhcproto::v4::{self, DhcpOption, Message, OptionCode};

use super::reply::Config;
use crate::model::cluster::Ipv4Net;

/// The settings of one subnet a reply is for: the local network or a
/// relayed segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subnet {
    pub cidr: Ipv4Net,
    pub router: Ipv4Addr,
    pub dns: Vec<Ipv4Addr>,
}

/// Why a request was dropped before any decision (counted apart from the
/// clients this server does not serve).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// A relay address (giaddr) no relay agent can have: the subnet's
    /// broadcast or network address, the appliance's own address,
    /// 255.255.255.255, multicast, class E, or loopback when the network is
    /// not loopback. Spoofed or broken; never answered.
    BadRelay,
    /// Relayed from (or selecting) a subnet that is neither `network.cidr`
    /// nor a `dhcp.segments[]` entry.
    UnknownSegment,
    /// Relayed for a served subnet by a giaddr that is no configured relay
    /// (a segment's gateway or `dhcp.relays`).
    UnknownRelay,
}

impl Config {
    /// The local network (`network.cidr`) as a [`Subnet`].
    pub fn local(&self) -> Subnet {
        Subnet {
            cidr: self.cidr,
            router: self.router,
            dns: vec![self.dns],
        }
    }

    /// Is `giaddr` an address no relay agent can have (see
    /// [`Dropped::BadRelay`])? `None` if it is acceptable.
    pub fn bad_relay(&self, giaddr: Ipv4Addr) -> Option<&'static str> {
        let loopback_net = self.cidr.network().is_loopback();
        let edge = |c: &Ipv4Net| c.contains(giaddr) && c.is_reserved(giaddr);
        if giaddr.is_broadcast() {
            Some("the limited broadcast address")
        } else if giaddr.is_multicast() {
            Some("a multicast address")
        } else if u32::from(giaddr) >> 28 == 0xf {
            Some("a reserved (class E) address")
        } else if giaddr.is_loopback() && !loopback_net {
            Some("a loopback address")
        } else if u32::from(giaddr) >> 24 == 0 {
            Some("an address of network 0/8")
        } else if giaddr == self.server_id {
            Some("the appliance's own address")
        } else if edge(&self.cidr) || self.segments.iter().any(|s| edge(&s.cidr)) {
            Some("a subnet's network or broadcast address")
        } else {
            None
        }
    }

    /// The subnet a request is for: the local network when it is not
    /// relayed; else the subnet holding the relay's link-selection
    /// sub-option (82/5, RFC 3527) or the subnet-selection option (118, RFC
    /// 3011) when present, else giaddr — if giaddr is a configured relay.
    /// Errors: the request is dropped.
    pub fn subnet_of(&self, msg: &Message) -> Result<Subnet, (Dropped, String)> {
        let giaddr = msg.giaddr();
        if giaddr.is_unspecified() {
            return Ok(self.local());
        }
        if let Some(why) = self.bad_relay(giaddr) {
            return Err((
                Dropped::BadRelay,
                format!("relay address {giaddr} is {why}"),
            ));
        }
        let link = match msg.opts().get(OptionCode::RelayAgentInformation) {
            Some(DhcpOption::RelayAgentInformation(ra)) => {
                match ra.get(v4::relay::RelayCode::LinkSelection) {
                    Some(v4::relay::RelayInfo::LinkSelection(ip)) => Some(*ip),
                    _ => None,
                }
            }
            _ => None,
        };
        let selection = match msg.opts().get(OptionCode::SubnetSelection) {
            Some(DhcpOption::SubnetSelection(ip)) => Some(*ip),
            _ => None,
        };
        let key = link.or(selection).unwrap_or(giaddr);
        let subnet = if self.cidr.contains(key) {
            Some(self.local())
        } else {
            self.segments.iter().find(|s| s.cidr.contains(key)).cloned()
        };
        match subnet {
            // Checked after the subnet, so that a relay on a segment that is
            // not configured at all is reported as such.
            Some(_) if !self.relays.contains(&giaddr) => Err((
                Dropped::UnknownRelay,
                format!(
                    "relay address {giaddr} is not a configured relay (a dhcp.segments[].gateway or dhcp.relays)"
                ),
            )),
            Some(s) => Ok(s),
            None => Err((
                Dropped::UnknownSegment,
                format!(
                    "no address range available: relayed from {giaddr}{}, not in network.cidr {} or dhcp.segments",
                    if key == giaddr {
                        String::new()
                    } else {
                        format!(" for subnet {key}")
                    },
                    self.cidr
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests;
