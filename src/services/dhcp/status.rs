//! `/status` → `dhcp` and the `crc_appliance_dhcp_*` metrics: counters by
//! message type and the lease table as it stands.

use std::sync::atomic::{AtomicU64, Ordering};

use dhcproto::v4::MessageType;
use std::collections::BTreeMap;

use super::{Shared, now};
use crate::runtime::metrics::{Kind, family};
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::model::cluster::MacAddr;
use crate::runtime::status::LeaseState;
use crate::runtime::sync::LockExt as _;

/// Counters by message type, exported as metrics.
#[derive(Default)]
pub(super) struct Counters {
    pub(super) rx: [AtomicU64; 5], // discover request release decline inform
    pub(super) rx_other: AtomicU64,
    pub(super) malformed: AtomicU64,
    pub(super) ignored: AtomicU64,
    /// Relayed with a giaddr no relay can have ([`super::reply::Dropped::BadRelay`]).
    pub(super) bad_relay: AtomicU64,
    /// Relayed from a subnet that is not served.
    pub(super) unknown_segment: AtomicU64,
    /// Relayed by a giaddr that is no configured relay.
    pub(super) unknown_relay: AtomicU64,
    /// DISCOVERs not offered an address: the pool was exhausted.
    pub(super) pool_exhausted: AtomicU64,
    pub(super) tx: [AtomicU64; 3], // offer ack nak
    pub(super) send_errors: AtomicU64,
    pub(super) persist_errors: AtomicU64,
    pub(super) persists: AtomicU64,
}

const RX_NAMES: [&str; 5] = ["discover", "request", "release", "decline", "inform"];
const TX_NAMES: [&str; 3] = ["offer", "ack", "nak"];

impl Counters {
    pub(super) fn rx(&self, t: MessageType) {
        let i = match t {
            MessageType::Discover => 0,
            MessageType::Request => 1,
            MessageType::Release => 2,
            MessageType::Decline => 3,
            MessageType::Inform => 4,
            _ => {
                self.rx_other.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        self.rx[i].fetch_add(1, Ordering::Relaxed);
    }
    pub(super) fn tx(&self, t: MessageType) {
        let i = match t {
            MessageType::Offer => 0,
            MessageType::Ack => 1,
            _ => 2,
        };
        self.tx[i].fetch_add(1, Ordering::Relaxed);
    }
}

pub(super) fn status(s: &Shared) -> DhcpStatus {
    let now = now();
    let t = s.table();
    let c = &s.counters;
    let get = |v: &AtomicU64| v.load(Ordering::Relaxed);
    let mut received: BTreeMap<String, u64> = RX_NAMES
        .iter()
        .zip(&c.rx)
        .map(|(n, v)| (n.to_string(), get(v)))
        .collect();
    received.insert("other".into(), get(&c.rx_other));
    let bound = s.bound.locked().clone();
    let local = s.socket.load_full().and_then(|u| u.local_addr().ok());
    DhcpStatus {
        listen: local.or(bound.as_ref().map(|b| b.0)).map(|a| a.to_string()),
        interface: bound.and_then(|b| b.1),
        lease_file: s.lease_file.display().to_string(),
        leases: t
            .leases()
            .into_iter()
            .map(|l| LeaseRow {
                mac: l.mac,
                ip: l.ip,
                hostname: l.hostname.clone(),
                client_id: l.client_id.clone(),
                state: l.shown_state(now),
                expires: l.expires,
                reserved: l.reserved,
            })
            .collect(),
        declined: t
            .declined()
            .into_iter()
            .map(|d| DeclinedRow {
                ip: d.ip,
                until: d.until,
            })
            .collect(),
        received,
        sent: TX_NAMES
            .iter()
            .zip(&c.tx)
            .map(|(n, v)| (n.to_string(), get(v)))
            .collect(),
        malformed: get(&c.malformed),
        ignored: get(&c.ignored),
        bad_relay: get(&c.bad_relay),
        unknown_segment: get(&c.unknown_segment),
        unknown_relay: get(&c.unknown_relay),
        pool_exhausted: get(&c.pool_exhausted),
        send_errors: get(&c.send_errors),
        lease_file_writes: get(&c.persists),
        lease_file_errors: get(&c.persist_errors),
    }
}

pub(super) fn metrics(shared: &Shared, out: &mut String) {
    let c = &shared.counters;
    let mut f = family(
        out,
        "crc_appliance_dhcp_received_total",
        Kind::Counter,
        "DHCP messages received by type.",
    );
    for (n, v) in RX_NAMES.iter().zip(&c.rx) {
        f.sample(&[("type", n)], v.load(Ordering::Relaxed));
    }
    f.sample(&[("type", &"other")], c.rx_other.load(Ordering::Relaxed));
    let mut f = family(
        out,
        "crc_appliance_dhcp_sent_total",
        Kind::Counter,
        "DHCP replies sent by type.",
    );
    for (n, v) in TX_NAMES.iter().zip(&c.tx) {
        f.sample(&[("type", n)], v.load(Ordering::Relaxed));
    }
    family(
        out,
        "crc_appliance_dhcp_dropped_total",
        Kind::Counter,
        "Datagrams dropped: malformed, not for this server, a spoofed relay address, from a subnet not served, or from a relay address not configured.",
    )
    .sample(
        &[("reason", &"malformed")],
        c.malformed.load(Ordering::Relaxed),
    )
    .sample(&[("reason", &"ignored")], c.ignored.load(Ordering::Relaxed))
    .sample(
        &[("reason", &"bad_relay")],
        c.bad_relay.load(Ordering::Relaxed),
    )
    .sample(
        &[("reason", &"unknown_segment")],
        c.unknown_segment.load(Ordering::Relaxed),
    )
    .sample(
        &[("reason", &"unknown_relay")],
        c.unknown_relay.load(Ordering::Relaxed),
    );
    family(
        out,
        "crc_appliance_dhcp_pool_exhausted_total",
        Kind::Counter,
        "DISCOVERs that got no offer because the pool had no free address.",
    )
    .sample(&[], c.pool_exhausted.load(Ordering::Relaxed));
    family(
        out,
        "crc_appliance_dhcp_lease_file_errors_total",
        Kind::Counter,
        "Failed lease file writes.",
    )
    .sample(&[], c.persist_errors.load(Ordering::Relaxed));
    let now = now();
    let t = shared.table();
    let mut counts = std::collections::BTreeMap::<&str, u64>::new();
    for s in ["offered", "bound", "released", "expired"] {
        counts.insert(s, 0);
    }
    for l in t.leases() {
        *counts.entry(l.state_name(now)).or_default() += 1;
    }
    let mut f = family(
        out,
        "crc_appliance_dhcp_leases",
        Kind::Gauge,
        "Leases by state.",
    );
    for (s, n) in counts {
        f.sample(&[("state", &s)], n);
    }
}

/// `dhcp`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DhcpStatus {
    pub listen: Option<String>,
    pub interface: Option<String>,
    pub lease_file: String,
    pub leases: Vec<LeaseRow>,
    pub declined: Vec<DeclinedRow>,
    /// Messages received by type (`discover` … `inform`, `other`).
    pub received: BTreeMap<String, u64>,
    /// Replies sent by type (`offer`, `ack`, `nak`).
    pub sent: BTreeMap<String, u64>,
    pub malformed: u64,
    pub ignored: u64,
    /// Relayed requests with a giaddr no relay agent can have.
    #[serde(default)]
    pub bad_relay: u64,
    /// Relayed requests from a subnet that is neither `network.cidr` nor a
    /// `dhcp.segments[]` entry.
    #[serde(default)]
    pub unknown_segment: u64,
    /// Relayed requests for a served subnet from a giaddr that is no
    /// configured relay (a segment's gateway or `dhcp.relays`).
    #[serde(default)]
    pub unknown_relay: u64,
    /// DISCOVERs that got no offer because the pool had no free address.
    #[serde(default)]
    pub pool_exhausted: u64,
    pub send_errors: u64,
    pub lease_file_writes: u64,
    pub lease_file_errors: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRow {
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    pub hostname: Option<String>,
    pub client_id: Option<String>,
    pub state: LeaseState,
    /// Unix seconds.
    pub expires: u64,
    pub reserved: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeclinedRow {
    pub ip: Ipv4Addr,
    /// Unix seconds.
    pub until: u64,
}
