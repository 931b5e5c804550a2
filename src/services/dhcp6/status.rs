//! `/status` → `dhcp6` and the `crc_appliance_dhcp6_*` metrics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use dhcproto::v6::MessageType;

use super::bindings::{NoAddress, State};
use super::{Shared, now};
use crate::runtime::metrics::{Kind, family};
use serde::{Deserialize, Serialize};

use crate::runtime::status::LeaseState;
use crate::runtime::sync::LockExt as _;

const RX_NAMES: [&str; 8] = [
    "solicit",
    "request",
    "renew",
    "rebind",
    "release",
    "decline",
    "confirm",
    "information-request",
];
const TX_NAMES: [&str; 2] = ["advertise", "reply"];
const REFUSED: [&str; 4] = [
    "no_mac",
    "not_reserved",
    "reserved_declined",
    "pool_exhausted",
];

#[derive(Default)]
pub(super) struct Counters {
    pub(super) rx: [AtomicU64; 8],
    pub(super) rx_other: AtomicU64,
    pub(super) tx: [AtomicU64; 2],
    pub(super) malformed: AtomicU64,
    pub(super) ignored: AtomicU64,
    pub(super) refused: [AtomicU64; 4],
    pub(super) relayed: AtomicU64,
    /// Relay-Forwards from a source that is not a configured relay.
    pub(super) unknown_relay: AtomicU64,
    /// Declines not applied (not held, not the node, rate-limited).
    pub(super) declines_refused: AtomicU64,
    pub(super) send_errors: AtomicU64,
    pub(super) persists: AtomicU64,
    pub(super) persist_errors: AtomicU64,
}

impl Counters {
    pub(super) fn rx(&self, t: MessageType) {
        use MessageType as T;
        let i = match t {
            T::Solicit => 0,
            T::Request => 1,
            T::Renew => 2,
            T::Rebind => 3,
            T::Release => 4,
            T::Decline => 5,
            T::Confirm => 6,
            T::InformationRequest => 7,
            _ => {
                self.rx_other.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        self.rx[i].fetch_add(1, Ordering::Relaxed);
    }
    pub(super) fn tx(&self, t: MessageType) {
        let i = usize::from(t != MessageType::Advertise);
        self.tx[i].fetch_add(1, Ordering::Relaxed);
    }
    pub(super) fn refused(&self, why: NoAddress) {
        let i = match why {
            NoAddress::NoMac => 0,
            NoAddress::NotReserved => 1,
            NoAddress::ReservedDeclined => 2,
            NoAddress::PoolExhausted => 3,
        };
        self.refused[i].fetch_add(1, Ordering::Relaxed);
    }
}

fn named<const N: usize>(names: [&str; N], v: &[AtomicU64; N]) -> BTreeMap<String, u64> {
    names
        .iter()
        .zip(v)
        .map(|(n, v)| (n.to_string(), v.load(Ordering::Relaxed)))
        .collect()
}

pub(super) fn status(s: &Shared) -> Dhcp6Status {
    let now = now();
    let c = &s.counters;
    let get = |v: &AtomicU64| v.load(Ordering::Relaxed);
    let mut received = named(RX_NAMES, &c.rx);
    received.insert("other".into(), get(&c.rx_other));
    let bound = s.bound.locked().clone();
    let local = s.socket.load_full().and_then(|u| u.local_addr().ok());
    let mut bindings: Vec<Binding6Row> = s
        .table()
        .bindings()
        .map(|b| Binding6Row {
            address: b.addr,
            duid: b.duid.clone(),
            iaid: b.iaid,
            mac: b.mac.clone(),
            state: match b.state {
                State::Released => LeaseState::Released,
                _ if b.expires <= now => LeaseState::Expired,
                State::Bound => LeaseState::Bound,
            },
            expires: b.expires,
            reserved: b.reserved,
        })
        .collect();
    bindings.sort_by_key(|b| b.address);
    Dhcp6Status {
        listen: local.or(bound.as_ref().map(|b| b.0)).map(|a| a.to_string()),
        interface: bound.and_then(|b| b.1),
        binding_file: s.binding_file.display().to_string(),
        bindings,
        received,
        sent: named(TX_NAMES, &c.tx),
        malformed: get(&c.malformed),
        ignored: get(&c.ignored),
        refused: named(REFUSED, &c.refused),
        relayed: get(&c.relayed),
        unknown_relay: get(&c.unknown_relay),
        declines_refused: get(&c.declines_refused),
        send_errors: get(&c.send_errors),
        binding_file_writes: get(&c.persists),
        binding_file_errors: get(&c.persist_errors),
        router_advertisements: s.ra.load_full().map(|r| RaStatus {
            sent: get(&r.sent),
            solicitations: get(&r.solicitations),
            send_errors: get(&r.send_errors),
        }),
    }
}

pub(super) fn metrics(s: &Shared, out: &mut String) {
    let st = status(s);
    let mut f = family(
        out,
        "crc_appliance_dhcp6_received_total",
        Kind::Counter,
        "DHCPv6 messages received by type.",
    );
    for (n, v) in &st.received {
        f.sample(&[("type", n)], v);
    }
    let mut f = family(
        out,
        "crc_appliance_dhcp6_sent_total",
        Kind::Counter,
        "DHCPv6 replies sent by type.",
    );
    for (n, v) in &st.sent {
        f.sample(&[("type", n)], v);
    }
    family(
        out,
        "crc_appliance_dhcp6_dropped_total",
        Kind::Counter,
        "DHCPv6 datagrams dropped: malformed, not for this server, or relayed by an unknown relay.",
    )
    .sample(&[("reason", &"malformed")], st.malformed)
    .sample(&[("reason", &"ignored")], st.ignored)
    .sample(&[("reason", &"unknown_relay")], st.unknown_relay);
    family(
        out,
        "crc_appliance_dhcp6_declines_refused_total",
        Kind::Counter,
        "DHCPv6 Declines not applied (address not held, not the node's, or rate-limited).",
    )
    .sample(&[], st.declines_refused);
    let mut f = family(
        out,
        "crc_appliance_dhcp6_refused_total",
        Kind::Counter,
        "DHCPv6 clients that got no address, by reason.",
    );
    for (n, v) in &st.refused {
        f.sample(&[("reason", n)], v);
    }
    family(
        out,
        "crc_appliance_dhcp6_relayed_total",
        Kind::Counter,
        "DHCPv6 messages received through a relay agent.",
    )
    .sample(&[], st.relayed);
    family(
        out,
        "crc_appliance_dhcp6_binding_file_errors_total",
        Kind::Counter,
        "Failed DHCPv6 binding file writes.",
    )
    .sample(&[], st.binding_file_errors);
    let mut counts = BTreeMap::<&str, u64>::from([("bound", 0), ("released", 0), ("expired", 0)]);
    for b in &st.bindings {
        let k = match b.state {
            LeaseState::Released => "released",
            LeaseState::Expired => "expired",
            _ => "bound",
        };
        *counts.entry(k).or_default() += 1;
    }
    let mut f = family(
        out,
        "crc_appliance_dhcp6_bindings",
        Kind::Gauge,
        "DHCPv6 bindings by state.",
    );
    for (k, n) in counts {
        f.sample(&[("state", &k)], n);
    }
    if let Some(ra) = st.router_advertisements {
        family(
            out,
            "crc_appliance_dhcp6_router_advertisements_sent_total",
            Kind::Counter,
            "Router advertisements sent.",
        )
        .sample(&[], ra.sent);
        family(
            out,
            "crc_appliance_dhcp6_router_solicitations_total",
            Kind::Counter,
            "Router solicitations received.",
        )
        .sample(&[], ra.solicitations);
    }
}

/// `dhcp6`: the DHCPv6 server and router advertisements.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dhcp6Status {
    pub listen: Option<String>,
    pub interface: Option<String>,
    pub binding_file: String,
    pub bindings: Vec<Binding6Row>,
    /// Messages received by type (`solicit` … `information-request`,
    /// `other`).
    pub received: BTreeMap<String, u64>,
    /// Replies sent by type (`advertise`, `reply`).
    pub sent: BTreeMap<String, u64>,
    pub malformed: u64,
    /// Messages dropped for a protocol reason (another server's, no client
    /// identifier, a server identifier where none belongs).
    pub ignored: u64,
    /// Clients that got no address, by reason (`no_mac`, `not_reserved`,
    /// `reserved_declined`, `pool_exhausted`).
    pub refused: BTreeMap<String, u64>,
    pub relayed: u64,
    /// Relay-Forwards dropped: their source is not in `dhcp.relays`.
    #[serde(default)]
    pub unknown_relay: u64,
    /// Declines not applied (not held, not the node's, rate-limited).
    #[serde(default)]
    pub declines_refused: u64,
    pub send_errors: u64,
    pub binding_file_writes: u64,
    pub binding_file_errors: u64,
    /// Router advertisements (`None`: `routerAdvertisements` is off).
    pub router_advertisements: Option<RaStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding6Row {
    pub address: std::net::Ipv6Addr,
    pub duid: String,
    pub iaid: u32,
    pub mac: Option<String>,
    pub state: LeaseState,
    /// Unix seconds.
    pub expires: u64,
    pub reserved: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RaStatus {
    pub sent: u64,
    pub solicitations: u64,
    pub send_errors: u64,
}
