//! NTP counters, the per-client clock offsets, `/status` and `/metrics`.
//!
//! The offset of a client is its transmit timestamp against our receive
//! time (one-way delay ignored: on a LAN well under a millisecond), from
//! its latest request. A client is `skewed` when that exceeds
//! [`SKEW_ERROR`]: certificates then fail. Clients that randomise their
//! transmit timestamp (chrony's default for client requests since 4.x
//! does not; NTS clients may) show a meaningless offset; docs/ntp.md says
//! so. The caller records only nodes and clients inside the cluster's
//! networks. Node rows are pinned; at most [`MAX_ROWS`] other clients are
//! kept (the least recent dropped), so a flood of new sources never evicts
//! a node's row.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::runtime::clock::unix_now;
use crate::runtime::sync::LockExt as _;
use crate::services::ntp::status::{NtpClientRow, NtpStatus};

/// Above this offset (seconds) a client's clock is an error.
pub const SKEW_ERROR: f64 = 1.0;
/// Clients other than nodes kept for `/status`.
pub const MAX_ROWS: usize = 1024;

#[derive(Debug, Clone)]
struct Row {
    node: Option<String>,
    offset: f64,
    unix_time: u64,
    requests: u64,
}

#[derive(Default)]
struct Bound {
    listen: Option<SocketAddr>,
    serving: String,
    leap: u8,
    stratum: u8,
}

/// The service's counters.
#[derive(Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub replies: AtomicU64,
    pub kod_rate: AtomicU64,
    pub rate_dropped: AtomicU64,
    pub malformed: AtomicU64,
    pub refused_mode: AtomicU64,
    pub refused_acl: AtomicU64,
    pub send_errors: AtomicU64,
    bound: Mutex<Bound>,
    clients: Mutex<HashMap<IpAddr, Row>>,
}

impl Stats {
    pub fn set_bound(&self, listen: SocketAddr) {
        self.bound.locked().listen = Some(listen);
    }

    /// How the host clock is being served (`synchronised`,
    /// `unsynchronised`, `localStratum`).
    pub fn set_serving(&self, serving: &str, leap: u8, stratum: u8) {
        let mut b = self.bound.locked();
        if b.serving != serving {
            b.serving = serving.to_string();
        }
        b.leap = leap;
        b.stratum = stratum;
    }

    /// Record a client's offset estimate (`node`: the node at `ip`, whose
    /// row is never evicted).
    pub fn offset(&self, ip: IpAddr, node: Option<&str>, offset: f64) {
        let mut c = self.clients.locked();
        if node.is_none()
            && !c.contains_key(&ip)
            && c.values().filter(|r| r.node.is_none()).count() >= MAX_ROWS
            && let Some(old) = c
                .iter()
                .filter(|(_, r)| r.node.is_none())
                .min_by_key(|(_, r)| r.unix_time)
                .map(|(k, _)| *k)
        {
            c.remove(&old);
        }
        let r = c.entry(ip).or_insert(Row {
            node: None,
            offset,
            unix_time: 0,
            requests: 0,
        });
        r.node = node.map(str::to_string);
        r.offset = offset;
        r.unix_time = unix_now();
        r.requests += 1;
    }

    pub fn status(&self) -> NtpStatus {
        let b = self.bound.locked();
        let mut clients: Vec<NtpClientRow> = self
            .clients
            .locked()
            .iter()
            .map(|(ip, r)| NtpClientRow {
                client: ip.to_string(),
                node: r.node.clone(),
                offset_ms: (r.offset * 1000.0 * 1000.0).round() / 1000.0,
                skewed: r.offset.abs() > SKEW_ERROR,
                unix_time: r.unix_time,
                requests: r.requests,
            })
            .collect();
        clients.sort_by(|a, b| (&a.node, &a.client).cmp(&(&b.node, &b.client)));
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        NtpStatus {
            listen: b.listen.map(|l| l.to_string()),
            serving: b.serving.clone(),
            leap: b.leap,
            stratum: b.stratum,
            requests: g(&self.requests),
            replies: g(&self.replies),
            kod_rate: g(&self.kod_rate),
            rate_dropped: g(&self.rate_dropped),
            malformed: g(&self.malformed),
            refused_mode: g(&self.refused_mode),
            refused_acl: g(&self.refused_acl),
            skewed: clients.iter().filter(|c| c.skewed).count(),
            clients,
        }
    }

    pub fn metrics(&self, out: &mut String) {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let _ = writeln!(out, "# HELP crc_ntp_requests_total NTP datagrams received.");
        let _ = writeln!(out, "# TYPE crc_ntp_requests_total counter");
        let _ = writeln!(out, "crc_ntp_requests_total {}", g(&self.requests));
        let _ = writeln!(
            out,
            "# HELP crc_ntp_responses_total NTP replies sent, by kind."
        );
        let _ = writeln!(out, "# TYPE crc_ntp_responses_total counter");
        let _ = writeln!(
            out,
            "crc_ntp_responses_total{{kind=\"time\"}} {}",
            g(&self.replies)
        );
        let _ = writeln!(
            out,
            "crc_ntp_responses_total{{kind=\"kod_rate\"}} {}",
            g(&self.kod_rate)
        );
        let _ = writeln!(
            out,
            "# HELP crc_ntp_dropped_total NTP datagrams not answered, by reason."
        );
        let _ = writeln!(out, "# TYPE crc_ntp_dropped_total counter");
        let _ = writeln!(
            out,
            "crc_ntp_dropped_total{{reason=\"malformed\"}} {}",
            g(&self.malformed)
        );
        let _ = writeln!(
            out,
            "crc_ntp_dropped_total{{reason=\"mode\"}} {}",
            g(&self.refused_mode)
        );
        let _ = writeln!(
            out,
            "crc_ntp_dropped_total{{reason=\"rate\"}} {}",
            g(&self.rate_dropped)
        );
        let _ = writeln!(
            out,
            "crc_ntp_dropped_total{{reason=\"acl\"}} {}",
            g(&self.refused_acl)
        );
        let _ = writeln!(
            out,
            "# HELP crc_ntp_host_synchronised Whether the served host clock counts as synchronised (1) or not (0)."
        );
        let _ = writeln!(out, "# TYPE crc_ntp_host_synchronised gauge");
        let leap = self.bound.locked().leap;
        let _ = writeln!(out, "crc_ntp_host_synchronised {}", u8::from(leap != 3));
        let _ = writeln!(
            out,
            "# HELP crc_ntp_client_offset_seconds Clock offset estimate of each client (its transmit time against ours)."
        );
        let _ = writeln!(out, "# TYPE crc_ntp_client_offset_seconds gauge");
        for (ip, r) in self.clients.locked().iter() {
            let _ = writeln!(
                out,
                "crc_ntp_client_offset_seconds{{client=\"{ip}\",node=\"{}\"}} {}",
                r.node.as_deref().unwrap_or(""),
                r.offset
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hour_off_is_skewed() {
        let s = Stats::default();
        s.offset("10.0.0.5".parse().unwrap(), Some("master-0"), 3600.0);
        s.offset("10.0.0.6".parse().unwrap(), None, 0.0004);
        let st = s.status();
        assert_eq!(st.skewed, 1);
        assert!(
            st.clients
                .iter()
                .any(|c| c.node.as_deref() == Some("master-0") && c.skewed)
        );
        let mut m = String::new();
        s.metrics(&mut m);
        assert!(m.contains("node=\"master-0\"} 3600"));
    }

    #[test]
    fn a_flood_of_other_clients_never_evicts_a_node_row() {
        let s = Stats::default();
        s.offset("10.0.0.5".parse().unwrap(), Some("master-0"), 0.001);
        for i in 0..(MAX_ROWS as u32 * 2) {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0a01_0000 + i));
            s.offset(ip, None, 5.0);
        }
        let st = s.status();
        assert_eq!(st.clients.len(), MAX_ROWS + 1);
        assert!(
            st.clients
                .iter()
                .any(|c| c.node.as_deref() == Some("master-0"))
        );
    }
}
