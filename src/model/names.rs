//! DNS names and records: the one model that validation, the plan, `render`
//! and the DNS service share. No imports from `config` or `plan`.
//!
//! - Label and domain syntax (RFC 1123), absolute names, reverse zones.
//! - [`Record`] / [`RData`]: what a zone holds.
//! - The names the appliance generates in the cluster zone ([`ns1`],
//!   [`API`], [`API_INT`], `*.`[`APPS`], `etcd-N`, [`ETCD_SRV`], one per
//!   node) and [`reserved_node_name`], derived from them; the conflict
//!   rules between generated and user records live in [`super::conflicts`].
//!
//! [`ns1`]: NS

use std::fmt::{self, Write as _};
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use super::net::Ipv4Net;

/// The appliance's name server label (`ns1.<domain>`, the SOA MNAME).
pub const NS: &str = "ns1";
/// The API label, and the internal API label.
pub const API: &str = "api";
pub const API_INT: &str = "api-int";
/// The ingress wildcard lives under this label: `*.apps.<domain>`.
pub const APPS: &str = "apps";
/// etcd member labels are `etcd-0`, `etcd-1`, …
pub const ETCD_PREFIX: &str = "etcd-";
/// The etcd discovery SRV owner.
pub const ETCD_SRV: &str = "_etcd-server-ssl._tcp";

/// Is `label` taken by a record the appliance generates (so no node may
/// have it as its name)?
pub fn reserved_node_name(label: &str) -> bool {
    [NS, API, API_INT, APPS].contains(&label) || label.starts_with(ETCD_PREFIX)
}

/// True for an RFC 1123 host label: 1-63 of `a-z0-9-`, not starting or ending with `-`.
pub fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// True for a domain of valid labels, at most 253 characters, no trailing dot.
pub fn is_domain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_label)
}

/// Why `s` is not a valid label, for an error message.
pub fn label_problem(s: &str) -> String {
    if s.is_empty() {
        "must not be empty".into()
    } else if s.len() > 63 {
        format!("{s:?} is longer than 63 characters")
    } else if s.bytes().any(|b| b.is_ascii_uppercase()) {
        format!("{s:?} must be lower case (RFC 1123)")
    } else {
        format!(
            "{s:?} is not a valid DNS label (a-z, 0-9 and '-', not starting or ending with '-')"
        )
    }
}

/// One resource record. `name` is absolute, lower case, with a trailing dot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    pub name: String,
    pub ttl: u32,
    pub data: RData,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum RData {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Cname(String),
    Ns(String),
    Ptr(String),
    Srv {
        priority: u16,
        weight: u16,
        port: u16,
        target: String,
    },
    Txt(String),
    Soa {
        mname: String,
        rname: String,
        serial: u32,
        refresh: u32,
        retry: u32,
        expire: u32,
        minimum: u32,
    },
}

impl RData {
    pub fn type_name(&self) -> &'static str {
        match self {
            RData::A(_) => "A",
            RData::Aaaa(_) => "AAAA",
            RData::Cname(_) => "CNAME",
            RData::Ns(_) => "NS",
            RData::Ptr(_) => "PTR",
            RData::Srv { .. } => "SRV",
            RData::Txt(_) => "TXT",
            RData::Soa { .. } => "SOA",
        }
    }
}

impl fmt::Display for RData {
    /// Zone-file (RFC 1035) presentation of the data.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RData::A(ip) => write!(f, "{ip}"),
            RData::Aaaa(ip) => write!(f, "{ip}"),
            RData::Cname(n) | RData::Ns(n) | RData::Ptr(n) => f.write_str(n),
            RData::Srv {
                priority,
                weight,
                port,
                target,
            } => write!(f, "{priority} {weight} {port} {target}"),
            RData::Txt(t) => {
                f.write_char('"')?;
                for c in t.chars() {
                    if c == '"' || c == '\\' {
                        f.write_char('\\')?;
                    }
                    f.write_char(c)?;
                }
                f.write_char('"')
            }
            RData::Soa {
                mname,
                rname,
                serial,
                refresh,
                retry,
                expire,
                minimum,
            } => write!(
                f,
                "{mname} {rname} {serial} {refresh} {retry} {expire} {minimum}"
            ),
        }
    }
}

/// `name` made absolute: kept if it ends with a dot, else `name.domain.`;
/// `@` is the domain itself.
pub fn absolute(name: &str, domain: &str) -> String {
    let name = name.trim();
    if name == "@" || name.is_empty() {
        format!("{domain}.")
    } else if name.ends_with('.') {
        name.to_string()
    } else {
        format!("{name}.{domain}.")
    }
}

/// The reverse zones (absolute) for a network: one zone for an
/// octet-aligned /16 or /24, otherwise one zone per /24 the network touches.
pub fn reverse_zones(cidr: Ipv4Net) -> Vec<String> {
    let o = cidr.network().octets();
    match cidr.prefix() {
        16 => vec![format!("{}.{}.in-addr.arpa.", o[1], o[0])],
        p if p >= 24 => vec![format!("{}.{}.{}.in-addr.arpa.", o[2], o[1], o[0])],
        p => {
            let count = 1u32 << (24 - u32::from(p));
            let base = u32::from(cidr.network()) >> 8;
            (0..count)
                .map(|i| {
                    let b = ((base + i) << 8).to_be_bytes();
                    format!("{}.{}.{}.in-addr.arpa.", b[2], b[1], b[0])
                })
                .collect()
        }
    }
}

/// `d.c.b.a.in-addr.arpa.` for an address.
pub fn ptr_name(ip: Ipv4Addr) -> String {
    let o = ip.octets();
    format!("{}.{}.{}.{}.in-addr.arpa.", o[3], o[2], o[1], o[0])
}
