//! A source network of an access list written as IPv4 or IPv6 CIDR
//! (`admin.allowFrom`): the admin listener answers a connection only when
//! its source is in one of them (or is loopback, this host, or `ha.peer`).
//!
//! Pure: no I/O. An IPv4-mapped IPv6 source counts as its IPv4 address, so
//! a dual-stack socket's `::ffff:10.0.0.5` matches `10.0.0.0/24`.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::Serialize;

use super::ipv6::Ipv6Net;
use super::net::{Ipv4Net, NetError};

/// An IPv4 or IPv6 network in CIDR form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceNet {
    V4(Ipv4Net),
    V6(Ipv6Net),
}

impl SourceNet {
    /// Whether `ip` (IPv4-mapped IPv6 as IPv4) is inside.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self, canonical(ip)) {
            (SourceNet::V4(n), IpAddr::V4(v4)) => n.contains(v4),
            (SourceNet::V6(n), IpAddr::V6(v6)) => n.contains(v6),
            _ => false,
        }
    }

    /// The prefix length (0: every address of its family).
    pub fn prefix(&self) -> u8 {
        match self {
            SourceNet::V4(n) => n.prefix(),
            SourceNet::V6(n) => n.prefix(),
        }
    }
}

/// `ip`, or the IPv4 address an IPv4-mapped IPv6 address carries.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl FromStr for SourceNet {
    type Err = NetError;
    fn from_str(s: &str) -> Result<Self, NetError> {
        if s.contains(':') {
            Ok(SourceNet::V6(s.parse()?))
        } else {
            Ok(SourceNet::V4(s.parse()?))
        }
    }
}

impl fmt::Display for SourceNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceNet::V4(n) => n.fmt(f),
            SourceNet::V6(n) => n.fmt(f),
        }
    }
}

impl Serialize for SourceNet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn contains_both_families_and_mapped_v4() {
        let v4: SourceNet = "10.1.0.0/16".parse().unwrap();
        assert!(v4.contains(ip("10.1.2.3")));
        assert!(v4.contains(ip("::ffff:10.1.2.3")));
        assert!(!v4.contains(ip("10.2.0.1")));
        assert!(!v4.contains(ip("fd00::1")));
        let v6: SourceNet = "fd00:1::/64".parse().unwrap();
        assert!(v6.contains(ip("fd00:1::5")));
        assert!(!v6.contains(ip("fd00:2::5")));
        assert!(!v6.contains(ip("10.1.2.3")));
        assert_eq!(v6.to_string(), "fd00:1::/64");
    }

    #[test]
    fn bad_cidrs_say_why() {
        for bad in [
            "10.0.0.0",
            "10.0.0.1/24",
            "10.0.0.0/33",
            "fd00::/129",
            "x/8",
            "",
        ] {
            assert!(bad.parse::<SourceNet>().is_err(), "{bad}");
        }
    }
}
