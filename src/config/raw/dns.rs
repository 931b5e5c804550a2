//! `dns:` as written: the authoritative zones, their records and transfers,
//! forwarding. Checked by `validate/dns.rs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::Dur;

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dns {
    #[serde(default = "super::yes")]
    pub enabled: bool,
    /// UDP+TCP listen addresses (default `<applianceIP>:53`).
    #[serde(default)]
    pub listen: Option<Vec<String>>,
    #[serde(default = "dns_ttl")]
    pub ttl: Dur,
    /// SOA minimum: how long resolvers may cache NXDOMAIN/NODATA.
    #[serde(default = "dns_ttl")]
    pub negative_ttl: Dur,
    /// Timeout for one forwarded query.
    #[serde(default = "forward_timeout")]
    pub forward_timeout: Dur,
    /// Extra records inside the cluster zone (or its reverse zones).
    #[serde(default)]
    pub records: Vec<ExtraRecord>,
    /// Networks (CIDRs, or single addresses) whose secondaries may copy the
    /// zones by AXFR or IXFR over TCP; REFUSED to everyone else.
    #[serde(default)]
    pub transfer: Vec<String>,
    /// Secondaries sent a NOTIFY when a zone's serial moves: `ip` (port 53)
    /// or `ip:port`.
    #[serde(default)]
    pub notify: Vec<String>,
    /// SOA timers (default: RFC 1912's recommendations when `transfer` is
    /// set, short lab values otherwise; `minimum` defaults to `negativeTtl`).
    #[serde(default)]
    pub soa: Option<Soa>,
}

/// `dns.soa`: the SOA timers secondaries follow.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Soa {
    /// How often a secondary checks the serial.
    #[serde(default)]
    pub refresh: Option<Dur>,
    /// How long a secondary waits after a failed refresh.
    #[serde(default)]
    pub retry: Option<Dur>,
    /// How long a secondary serves the zone without reaching the appliance.
    #[serde(default)]
    pub expire: Option<Dur>,
    /// The negative-caching TTL (RFC 2308); replaces `negativeTtl`.
    #[serde(default)]
    pub minimum: Option<Dur>,
}

impl Default for Dns {
    fn default() -> Self {
        Dns {
            enabled: true,
            listen: None,
            ttl: dns_ttl(),
            negative_ttl: dns_ttl(),
            forward_timeout: forward_timeout(),
            records: Vec::new(),
            transfer: Vec::new(),
            notify: Vec::new(),
            soa: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtraRecord {
    /// Relative to the cluster zone (`registry`) or absolute with a trailing dot.
    pub name: String,
    /// A, AAAA, CNAME, TXT, SRV or PTR.
    #[serde(rename = "type")]
    pub rtype: String,
    /// Record data in zone-file syntax (`10.0.0.5`, `0 10 443 host.`, ...).
    pub value: String,
    #[serde(default)]
    pub ttl: Option<Dur>,
}

fn dns_ttl() -> Dur {
    Dur::secs(30)
}

fn forward_timeout() -> Dur {
    Dur::secs(2)
}
