//! The network types of the cluster file: IPv4 networks in CIDR form
//! ([`Ipv4Net`], stored masked), Ethernet addresses ([`MacAddr`]), the
//! IPv4-or-IPv6 networks of access lists ([`IpCidr`], [`IpNet`]) and why a
//! text does not parse as one ([`ParseError`], [`NetError`]).
//!
//! Pure and a leaf inside `model`: it imports only [`super::ipv6`], so the
//! cluster, the DNS names and the access lists build on it without
//! importing each other. Every type displays in the form it parses from;
//! an IPv4-mapped IPv6 address counts as its IPv4 address in `contains`.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::ipv6::{Ipv6Net, Ipv6NetError};

/// Why a CIDR or MAC address in the cluster file does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("{0:?} is not in CIDR form (a.b.c.d/prefix)")]
    NotCidr(String),
    #[error("{0:?} is not an IPv4 address")]
    Address(String),
    #[error("prefix {0:?} is not 0..32")]
    Prefix(String),
    #[error("{given} has host bits set; the network is {network}")]
    HostBits { given: String, network: String },
    #[error(
        "{0:?} is not a MAC address (six hex octets separated by ':' or '-', e.g. 52:54:00:12:34:56)"
    )]
    Mac(String),
}

/// Why an IPv4-or-IPv6 network ([`IpNet`], `SourceNet`) does not parse:
/// the reason of the family the text names (it has a `:`: IPv6).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    #[error(transparent)]
    V4(#[from] ParseError),
    #[error(transparent)]
    V6(#[from] Ipv6NetError),
}

/// An IPv4 or IPv6 network (an access list entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum IpCidr {
    V4(Ipv4Net),
    V6(Ipv6Net),
}

impl IpCidr {
    /// Is `ip` inside (IPv4-mapped IPv6 addresses count as IPv4)?
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        let ip = match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map(Into::into).unwrap_or(ip),
            v4 => v4,
        };
        match (self, ip) {
            (IpCidr::V4(n), std::net::IpAddr::V4(a)) => n.contains(a),
            (IpCidr::V6(n), std::net::IpAddr::V6(a)) => n.contains(a),
            _ => false,
        }
    }
}

/// An IPv4 or IPv6 network (`ntp.allowFrom`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpNet {
    V4(Ipv4Net),
    V6(Ipv6Net),
}

impl IpNet {
    /// Is `ip` inside (an IPv4-mapped IPv6 address counts as its IPv4
    /// address)?
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr;
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self, ip) {
            (IpNet::V4(n), IpAddr::V4(a)) => n.contains(a),
            (IpNet::V6(n), IpAddr::V6(a)) => n.contains(a),
            _ => false,
        }
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpNet::V4(n) => n.fmt(f),
            IpNet::V6(n) => write!(f, "{}/{}", n.network(), n.prefix()),
        }
    }
}

impl Serialize for IpNet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for IpNet {
    type Err = NetError;
    /// `a.b.c.d/n`, `x::/n`, or a bare address (one host).
    fn from_str(s: &str) -> Result<Self, NetError> {
        let s = s.trim();
        let cidr = if s.contains('/') {
            s.to_string()
        } else if s.contains(':') {
            format!("{s}/128")
        } else {
            format!("{s}/32")
        };
        if cidr.contains(':') {
            Ok(IpNet::V6(cidr.parse()?))
        } else {
            Ok(IpNet::V4(cidr.parse()?))
        }
    }
}

/// An IPv4 network in CIDR form; the address is stored masked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Net {
    addr: Ipv4Addr,
    prefix: u8,
}

impl Ipv4Net {
    pub fn new(addr: Ipv4Addr, prefix: u8) -> Option<Self> {
        (prefix <= 32).then(|| {
            let mask = Self::mask_bits(prefix);
            Ipv4Net {
                addr: Ipv4Addr::from(u32::from(addr) & mask),
                prefix,
            }
        })
    }
    fn mask_bits(prefix: u8) -> u32 {
        if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(prefix))
        }
    }
    pub fn network(&self) -> Ipv4Addr {
        self.addr
    }
    pub fn prefix(&self) -> u8 {
        self.prefix
    }
    pub fn netmask(&self) -> Ipv4Addr {
        Ipv4Addr::from(Self::mask_bits(self.prefix))
    }
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) | !Self::mask_bits(self.prefix))
    }
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & Self::mask_bits(self.prefix) == u32::from(self.addr)
    }
    /// Is `ip` a client of the cluster network: inside this network or on
    /// loopback (IPv4-mapped IPv6 addresses count as their IPv4 address)?
    /// Who may have other names resolved (DNS recursion).
    pub fn contains_or_loopback(&self, ip: std::net::IpAddr) -> bool {
        let v4 = match ip {
            std::net::IpAddr::V4(v4) => v4,
            std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4,
                None => return v6.is_loopback(),
            },
        };
        v4.is_loopback() || self.contains(v4)
    }
    /// True for the network and broadcast addresses of a /0../30.
    pub fn is_reserved(&self, ip: Ipv4Addr) -> bool {
        self.prefix <= 30 && (ip == self.network() || ip == self.broadcast())
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Serialize for Ipv4Net {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for Ipv4Net {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (a, p) = s
            .split_once('/')
            .ok_or_else(|| ParseError::NotCidr(s.to_string()))?;
        let addr: Ipv4Addr = a.parse().map_err(|_| ParseError::Address(a.to_string()))?;
        let net = p
            .parse()
            .ok()
            .and_then(|prefix| Ipv4Net::new(addr, prefix))
            .ok_or_else(|| ParseError::Prefix(p.to_string()))?;
        if net.addr != addr {
            return Err(ParseError::HostBits {
                given: s.to_string(),
                network: net.to_string(),
            });
        }
        Ok(net)
    }
}

/// A 48-bit Ethernet address; displayed lower case with colons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub fn octets(&self) -> [u8; 6] {
        self.0
    }
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            o[0], o[1], o[2], o[3], o[4], o[5]
        )
    }
}

impl Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for MacAddr {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let parts: Vec<&str> = s.split([':', '-']).collect();
        let bad = || ParseError::Mac(s.to_string());
        if parts.len() != 6 {
            return Err(bad());
        }
        let mut out = [0u8; 6];
        for (o, p) in out.iter_mut().zip(&parts) {
            if p.len() != 2 {
                return Err(bad());
            }
            *o = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        Ok(MacAddr(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr() {
        let n: Ipv4Net = "192.168.131.0/24".parse().unwrap();
        assert!(n.contains("192.168.131.77".parse().unwrap()));
        assert!(!n.contains("192.168.132.1".parse().unwrap()));
        assert_eq!(n.broadcast(), Ipv4Addr::new(192, 168, 131, 255));
        assert_eq!(n.netmask(), Ipv4Addr::new(255, 255, 255, 0));
        assert!("192.168.131.1/24".parse::<Ipv4Net>().is_err());
        assert!("192.168.131.0/33".parse::<Ipv4Net>().is_err());
        assert!("192.168.131.0".parse::<Ipv4Net>().is_err());
        let all: Ipv4Net = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(Ipv4Addr::new(8, 8, 8, 8)));
    }

    #[test]
    fn cluster_clients() {
        let cidr: Ipv4Net = "192.168.131.0/24".parse().unwrap();
        let ok = |s: &str| cidr.contains_or_loopback(s.parse().unwrap());
        assert!(ok("192.168.131.10"));
        assert!(ok("192.168.131.0"));
        assert!(ok("127.0.0.1"));
        assert!(ok("127.8.9.10"));
        assert!(ok("::1"));
        assert!(ok("::ffff:192.168.131.77"));
        assert!(ok("::ffff:127.0.0.1"));
        assert!(!ok("192.168.132.10"));
        assert!(!ok("10.0.0.1"));
        assert!(!ok("0.0.0.0"));
        assert!(!ok("8.8.8.8"));
        assert!(!ok("::ffff:10.0.0.1"));
        assert!(!ok("fd00::1"));
        assert!(!ok("::"));
    }

    /// An access list entry's error is its family's reason, word for word
    /// (`ntp.allowFrom`, `admin.allowFrom` print it).
    #[test]
    fn an_ip_net_says_its_familys_reason() {
        let cases: [(&str, &str); 4] = [
            (
                "10.0.0.1/24",
                "10.0.0.1/24 has host bits set; the network is 10.0.0.0/24",
            ),
            ("x/8", "\"x\" is not an IPv4 address"),
            ("fd00::/129", "prefix \"129\" is not 0..128"),
            (
                "fd00::1/64",
                "fd00::1/64 has host bits set; the network is fd00::/64",
            ),
        ];
        for (text, want) in cases {
            let err = text.parse::<IpNet>().unwrap_err();
            assert_eq!(err.to_string(), want);
            let v6 = matches!(err, NetError::V6(_));
            assert_eq!(v6, text.contains(':'), "{text}");
        }
        let v4 = NetError::from(ParseError::Prefix("33".into()));
        assert_eq!(v4.to_string(), "prefix \"33\" is not 0..32");
        let v6 = NetError::from(Ipv6NetError::NotCidr("fd00::".into()));
        assert_eq!(
            v6.to_string(),
            "\"fd00::\" is not in CIDR form (address/prefix, e.g. fd00:131::/64)"
        );
    }

    #[test]
    fn mac() {
        let m: MacAddr = "52:54:00:AB:cd:01".parse().unwrap();
        assert_eq!(m.to_string(), "52:54:00:ab:cd:01");
        assert_eq!("52-54-00-ab-cd-01".parse::<MacAddr>().unwrap(), m);
        assert!("52:54:00:ab:cd".parse::<MacAddr>().is_err());
        assert!("52:54:00:ab:cd:0g".parse::<MacAddr>().is_err());
        assert!(
            "01:00:5e:00:00:01"
                .parse::<MacAddr>()
                .unwrap()
                .is_multicast()
        );
    }
}
