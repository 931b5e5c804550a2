//! `/status` → `ntp`: the types of the NTP service's section, and its
//! clock lines in `crc-appliance status` ([`clock_lines`]).

use serde::{Deserialize, Serialize};

/// `ntp`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NtpStatus {
    pub listen: Option<String>,
    /// How the host clock is served: `synchronised`, `unsynchronised`
    /// (leap indicator 3: clients will not select it) or `localStratum`;
    /// empty before the first request.
    pub serving: String,
    pub leap: u8,
    pub stratum: u8,
    pub requests: u64,
    pub replies: u64,
    /// KoD RATE replies sent.
    pub kod_rate: u64,
    /// Over the rate and the KoD budget: not answered.
    pub rate_dropped: u64,
    /// Too short, bad version, zero transmit timestamp.
    pub malformed: u64,
    /// Symmetric, broadcast, control, private or server mode.
    pub refused_mode: u64,
    /// From a source outside `ntp.allowFrom`: not answered.
    #[serde(default)]
    pub refused_acl: u64,
    /// Clients whose offset is above 1 s.
    pub skewed: usize,
    pub clients: Vec<NtpClientRow>,
}

/// A client's clock offset estimate (its latest request).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NtpClientRow {
    pub client: String,
    /// The cluster node with that address, if any.
    pub node: Option<String>,
    /// Our receive time minus the client's transmit time (positive: the
    /// client is behind), milliseconds.
    pub offset_ms: f64,
    /// `|offset| > 1 s`: certificates will fail.
    pub skewed: bool,
    pub unix_time: u64,
    pub requests: u64,
}

/// `status`: the clock of every NTP client (nodes first), from the NTP
/// service's section; `ERROR` where the offset is above 1 s (certificates
/// then fail), and a line for an unsynchronised appliance clock.
pub fn clock_lines(n: &NtpStatus) -> Vec<String> {
    let mut out = Vec::new();
    if n.serving == "unsynchronised" {
        out.push("ntp: the appliance's clock is not synchronised: nodes will not use it (set ntp.localStratum if it is the lab's time source)".into());
    }
    if n.clients.is_empty() {
        return out;
    }
    out.push("clock offsets (ntp clients, offset = appliance - client):".into());
    let mut rows: Vec<_> = n.clients.iter().collect();
    rows.sort_by_key(|c| (c.node.is_none(), c.node.clone(), c.client.clone()));
    for c in rows {
        let who = match &c.node {
            Some(node) => format!("{node} ({})", c.client),
            None => c.client.clone(),
        };
        let secs = c.offset_ms / 1000.0;
        let mut line = format!("  {who:<28} {secs:+.3} s");
        if c.skewed {
            line.push_str("  ERROR: clock skew above 1 s, certificates will fail");
        }
        out.push(line);
    }
    out
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    fn row(client: &str, node: Option<&str>, offset_ms: f64) -> NtpClientRow {
        NtpClientRow {
            client: client.into(),
            node: node.map(str::to_string),
            offset_ms,
            skewed: offset_ms.abs() > 1000.0,
            unix_time: 0,
            requests: 1,
        }
    }

    #[test]
    fn skewed_clients_are_errors_and_nodes_come_first() {
        let n = NtpStatus {
            listen: None,
            serving: "unsynchronised".into(),
            leap: 3,
            stratum: 16,
            requests: 2,
            replies: 2,
            kod_rate: 0,
            rate_dropped: 0,
            malformed: 0,
            refused_mode: 0,
            refused_acl: 0,
            skewed: 1,
            clients: vec![
                row("10.0.0.99", None, 0.2),
                row("10.0.0.10", Some("master-0"), 3_600_000.0),
            ],
        };
        let l = clock_lines(&n);
        assert!(l[0].contains("not synchronised"), "{l:?}");
        assert!(
            l[2].contains("master-0 (10.0.0.10)") && l[2].contains("+3600.000 s  ERROR"),
            "{l:?}"
        );
        assert!(
            l[3].contains("10.0.0.99") && !l[3].contains("ERROR"),
            "{l:?}"
        );
    }
}
