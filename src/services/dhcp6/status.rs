//! `/status` → `dhcp6` and the `crc_appliance_dhcp6_*` metrics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use dhcproto::v6::MessageType;

use super::bindings::{NoAddress, State};
use super::{Shared, now};
use crate::runtime::metrics::{Kind, family};
use crate::runtime::status::{Binding6Row, Dhcp6Status, LeaseState, RaStatus};
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
