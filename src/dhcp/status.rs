//! `/status` → `dhcp` and the `crc_appliance_dhcp_*` metrics: counters by
//! message type and the lease table as it stands.

use std::sync::atomic::{AtomicU64, Ordering};

use dhcproto::v4::MessageType;
use serde_json::json;

use super::{Shared, now};
use crate::metrics::{Kind, family};

/// Counters by message type, exported as metrics.
#[derive(Default)]
pub(super) struct Counters {
    pub(super) rx: [AtomicU64; 5], // discover request release decline inform
    pub(super) rx_other: AtomicU64,
    pub(super) malformed: AtomicU64,
    pub(super) ignored: AtomicU64,
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

pub(super) fn status(s: &Shared) -> serde_json::Value {
    let now = now();
    let t = s.table();
    let leases: Vec<_> = t
        .leases()
        .into_iter()
        .map(|l| {
            json!({
                "mac": l.mac, "ip": l.ip, "hostname": l.hostname,
                "clientId": l.client_id, "state": l.state_name(now),
                "expires": l.expires, "reserved": l.reserved,
            })
        })
        .collect();
    let c = &s.counters;
    let mut received = serde_json::Map::new();
    for (n, v) in RX_NAMES.iter().zip(&c.rx) {
        received.insert((*n).into(), v.load(Ordering::Relaxed).into());
    }
    received.insert("other".into(), c.rx_other.load(Ordering::Relaxed).into());
    let mut sent = serde_json::Map::new();
    for (n, v) in TX_NAMES.iter().zip(&c.tx) {
        sent.insert((*n).into(), v.load(Ordering::Relaxed).into());
    }
    let bound = s.bound.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let local = s.socket.load_full().and_then(|u| u.local_addr().ok());
    json!({
        "listen": local.or(bound.as_ref().map(|b| b.0)).map(|a| a.to_string()),
        "interface": bound.and_then(|b| b.1),
        "leaseFile": s.lease_file.display().to_string(),
        "leases": leases,
        "declined": t.declined(),
        "received": received,
        "sent": sent,
        "malformed": c.malformed.load(Ordering::Relaxed),
        "ignored": c.ignored.load(Ordering::Relaxed),
        "sendErrors": c.send_errors.load(Ordering::Relaxed),
        "leaseFileWrites": c.persists.load(Ordering::Relaxed),
        "leaseFileErrors": c.persist_errors.load(Ordering::Relaxed),
    })
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
        "Datagrams dropped: malformed, or not for this server.",
    )
    .sample(
        &[("reason", &"malformed")],
        c.malformed.load(Ordering::Relaxed),
    )
    .sample(&[("reason", &"ignored")], c.ignored.load(Ordering::Relaxed));
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
