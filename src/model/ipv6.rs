//! The IPv6 half of a dual-stack cluster network (`network.ipv6`): the
//! typed prefix ([`Ipv6Net`]) and the validated section ([`Ipv6Cfg`]).
//!
//! Invariants (established by `config::validate`, the only producer):
//! - the prefix length is a multiple of 4 (a nibble boundary), so the
//!   prefix is exactly one `ip6.arpa` zone ([`Ipv6Net::reverse_zone`]);
//! - every address of the section (appliance, VIPs, pool bounds, the
//!   gateway unless link-local) is a host of the prefix, not its
//!   subnet-router anycast address (all host bits zero);
//! - the pool, when set, is ordered and clear of every reserved address.
//!
//! Pure: no I/O.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::str::FromStr;

use serde::Serialize;

/// An IPv6 network in CIDR form; the address is stored masked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Net {
    addr: Ipv6Addr,
    prefix: u8,
}

/// Why an IPv6 CIDR does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Ipv6NetError {
    #[error("{0:?} is not in CIDR form (address/prefix, e.g. fd00:131::/64)")]
    NotCidr(String),
    #[error("{0:?} is not an IPv6 address")]
    Address(String),
    #[error("prefix {0:?} is not 0..128")]
    Prefix(String),
    #[error("{given} has host bits set; the network is {network}")]
    HostBits { given: String, network: String },
}

impl Ipv6Net {
    pub fn new(addr: Ipv6Addr, prefix: u8) -> Option<Self> {
        (prefix <= 128).then(|| Ipv6Net {
            addr: Ipv6Addr::from(u128::from(addr) & Self::mask_bits(prefix)),
            prefix,
        })
    }
    fn mask_bits(prefix: u8) -> u128 {
        if prefix == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(prefix))
        }
    }
    pub fn network(&self) -> Ipv6Addr {
        self.addr
    }
    pub fn prefix(&self) -> u8 {
        self.prefix
    }
    pub fn contains(&self, ip: Ipv6Addr) -> bool {
        u128::from(ip) & Self::mask_bits(self.prefix) == u128::from(self.addr)
    }
    /// [`Ipv6Net::contains`] for any address (IPv4 never is).
    pub fn contains_ip(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V6(v6) => self.contains(v6),
            IpAddr::V4(_) => false,
        }
    }
    /// The subnet-router anycast address (RFC 4291 2.6.1: all host bits
    /// zero), which no host may take.
    pub fn is_reserved(&self, ip: Ipv6Addr) -> bool {
        self.prefix < 128 && ip == self.addr
    }
    /// Is the prefix on a nibble boundary (one `ip6.arpa` zone)?
    pub fn nibble_aligned(&self) -> bool {
        self.prefix.is_multiple_of(4)
    }
    /// The `ip6.arpa` zone of the prefix (absolute, trailing dot): its
    /// first `prefix / 4` nibbles, reversed. Meaningful only when
    /// [`Ipv6Net::nibble_aligned`].
    pub fn reverse_zone(&self) -> String {
        let n = usize::from(self.prefix / 4);
        let nibbles = nibbles(self.addr);
        let mut out = String::with_capacity(n * 2 + 10);
        for d in nibbles[..n].iter().rev() {
            out.push(*d);
            out.push('.');
        }
        out.push_str("ip6.arpa.");
        out
    }
}

/// The 32 hex nibbles of `ip`, most significant first.
fn nibbles(ip: Ipv6Addr) -> [char; 32] {
    let v = u128::from(ip);
    let mut out = ['0'; 32];
    for (i, c) in out.iter_mut().enumerate() {
        let d = ((v >> (124 - 4 * i)) & 0xf) as u32;
        *c = char::from_digit(d, 16).unwrap_or('0');
    }
    out
}

/// `b.a.9.8. … .ip6.arpa.` for an address (RFC 3596 2.5).
pub fn ptr_name6(ip: Ipv6Addr) -> String {
    let mut out = String::with_capacity(72);
    for d in nibbles(ip).iter().rev() {
        out.push(*d);
        out.push('.');
    }
    out.push_str("ip6.arpa.");
    out
}

impl fmt::Display for Ipv6Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Serialize for Ipv6Net {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for Ipv6Net {
    type Err = Ipv6NetError;
    fn from_str(s: &str) -> Result<Self, Ipv6NetError> {
        let (a, p) = s
            .split_once('/')
            .ok_or_else(|| Ipv6NetError::NotCidr(s.to_string()))?;
        let addr: Ipv6Addr = a
            .parse()
            .map_err(|_| Ipv6NetError::Address(a.to_string()))?;
        let net = p
            .parse()
            .ok()
            .and_then(|prefix| Ipv6Net::new(addr, prefix))
            .ok_or_else(|| Ipv6NetError::Prefix(p.to_string()))?;
        if net.addr != addr {
            return Err(Ipv6NetError::HostBits {
                given: s.to_string(),
                network: net.to_string(),
            });
        }
        Ok(net)
    }
}

/// The validated `network.ipv6` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ipv6Cfg {
    /// The machine network's IPv6 prefix (nibble-aligned).
    pub cidr: Ipv6Net,
    /// The appliance's IPv6 address on the cluster network: DNS listener
    /// (by default), DNS server handed out by DHCPv6.
    pub appliance_ip: Ipv6Addr,
    /// The default router, when not the one router advertisements announce
    /// (inside `cidr`, or link-local).
    pub gateway: Option<Ipv6Addr>,
    /// Send router advertisements (M=1, O=1, prefix with A=0) on the
    /// cluster interface.
    pub router_advertisements: bool,
    /// What `api` and `api-int` resolve to over IPv6 (default: applianceIP).
    pub api_vip: Ipv6Addr,
    /// What `*.apps` resolves to over IPv6 (default: applianceIP).
    pub ingress_vip: Ipv6Addr,
    /// Inclusive DHCPv6 range for clients without a reservation.
    pub pool: Option<(Ipv6Addr, Ipv6Addr)>,
}

impl Ipv6Cfg {
    /// The IPv6 VIPs: (api, ingress).
    pub fn vips(&self) -> (Ipv6Addr, Ipv6Addr) {
        (self.api_vip, self.ingress_vip)
    }
    /// Is `ip` inside the pool?
    pub fn in_pool(&self, ip: Ipv6Addr) -> bool {
        self.pool.is_some_and(|(s, e)| s <= ip && ip <= e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr() {
        let n: Ipv6Net = "fd00:131::/64".parse().unwrap();
        assert!(n.contains("fd00:131::10".parse().unwrap()));
        assert!(!n.contains("fd00:132::10".parse().unwrap()));
        assert!(n.is_reserved("fd00:131::".parse().unwrap()));
        assert!(!n.is_reserved("fd00:131::1".parse().unwrap()));
        assert!(n.nibble_aligned());
        assert!(!"fd00::/62".parse::<Ipv6Net>().unwrap().nibble_aligned());
        assert!(matches!(
            "fd00:131::1/64".parse::<Ipv6Net>(),
            Err(Ipv6NetError::HostBits { .. })
        ));
        assert!("fd00::/129".parse::<Ipv6Net>().is_err());
        assert!("fd00::".parse::<Ipv6Net>().is_err());
        assert!("10.0.0.0/8".parse::<Ipv6Net>().is_err());
        assert!(!n.contains_ip("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn reverse_names() {
        let n: Ipv6Net = "fd00:131::/64".parse().unwrap();
        assert_eq!(
            n.reverse_zone(),
            "0.0.0.0.0.0.0.0.1.3.1.0.0.0.d.f.ip6.arpa."
        );
        let n: Ipv6Net = "2001:db8:abc::/48".parse().unwrap();
        assert_eq!(n.reverse_zone(), "c.b.a.0.8.b.d.0.1.0.0.2.ip6.arpa.");
        // RFC 3596 2.5's example.
        assert_eq!(
            ptr_name6("4321:0:1:2:3:4:567:89ab".parse().unwrap()),
            "b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.0.0.0.0.1.2.3.4.ip6.arpa."
        );
        let ip: Ipv6Addr = "fd00:131::10".parse().unwrap();
        assert!(ptr_name6(ip).ends_with(&format!(".{}", n_zone("fd00:131::/64"))));
    }

    fn n_zone(s: &str) -> String {
        s.parse::<Ipv6Net>().unwrap().reverse_zone()
    }
}
