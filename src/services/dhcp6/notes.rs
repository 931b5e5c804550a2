//! The info line of a new binding, rate-limited: one window
//! ([`crate::runtime::lograte::Window`]) per node MAC and one shared by
//! every other client (pool clients, a churn of DUIDs).
//!
//! A node's line matters (it says which DUID took its reservation over),
//! so each node has its own window and a short interval ([`NODE_EVERY`]):
//! a churn from one node cannot hide another node's line. Everything else
//! shares one window of [`lograte::CLIENT_EVENTS`]. A line that is allowed
//! carries the count of the lines held back since the last one; counts
//! still held are written by [`BindingLog::flush`] (the GC tick).
//!
//! Invariant: memory is bounded by the number of configured nodes + 1
//! (keys are node MACs from the configuration, never a client's choice).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use std::sync::Mutex;

use tracing::{debug, info};

use super::reply::{Config, Outcome};
use crate::model::cluster::MacAddr;
use crate::runtime::lograte::{self, Tail, Window};
use crate::runtime::sync::LockExt as _;

/// At most one new-binding line per node this often.
pub const NODE_EVERY: Duration = Duration::from_secs(2);

/// The windows: per node MAC, and `None` for every other client.
#[derive(Default)]
pub struct BindingLog {
    windows: HashMap<Option<MacAddr>, Window>,
}

impl BindingLog {
    /// A new binding of `node` (`None`: not a node) from `client` at
    /// `now`: `Some(tail)` when its line may be written.
    pub fn check(
        &mut self,
        node: Option<MacAddr>,
        client: SocketAddr,
        now: Instant,
    ) -> Option<Tail> {
        let every = if node.is_some() {
            NODE_EVERY
        } else {
            lograte::CLIENT_EVENTS
        };
        self.windows
            .entry(node)
            .or_default()
            .hit(now, every, Some(client))
    }

    /// Write the summaries that are due at `now`, and forget the windows
    /// of MACs that are no longer nodes (`is_node`).
    pub fn flush(&mut self, now: Instant, is_node: impl Fn(&MacAddr) -> bool) {
        self.windows.retain(|k, _| k.as_ref().is_none_or(&is_node));
        for (k, w) in &mut self.windows {
            let every = if k.is_some() {
                NODE_EVERY
            } else {
                lograte::CLIENT_EVENTS
            };
            if let Some(s) = w.due(now, every) {
                match k {
                    Some(m) => info!("dhcp6: new bindings of {m}: {s}"),
                    None => info!("dhcp6: new bindings: {s}"),
                }
            }
        }
    }
}

/// The info line of a new binding, rate-limited per node (`notes`).
pub(super) fn log_new_binding(
    cfg: &Config,
    log: &Mutex<BindingLog>,
    out: &Outcome,
    msg: &dhcproto::v6::Message,
    src: SocketAddr,
) {
    let node = out.mac.map(|(m, _)| m).filter(|m| cfg.hostnames.contains_key(m));
    let tail = log.locked().check(node, src, Instant::now());
    let Some(tail) = tail else {
        debug!(%src, "dhcp6: {}", out.note);
        return;
    };
    let (mac, from) = match out.mac {
        Some((m, f)) => (m.to_string(), f.as_str()),
        None => ("-".into(), "-"),
    };
    let host = node
        .and_then(|m| cfg.hostnames.get(&m))
        .map(String::as_str)
        .unwrap_or("-");
    info!(%mac, mac_from = %from, hostname = %host, duid = %super::duid_hex(msg), "dhcp6: {}{tail}", out.note);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_window_per_node_and_one_for_the_rest() {
        let mut l = BindingLog::default();
        let t0 = Instant::now();
        let c: SocketAddr = "[fe80::1]:546".parse().unwrap();
        let (n0, n1) = (MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]));
        let mut lines = 0;
        for i in 0..1000u64 {
            let t = t0 + Duration::from_millis(i);
            lines += usize::from(l.check(Some(n0), c, t).is_some());
            lines += usize::from(l.check(None, c, t).is_some());
        }
        assert_eq!(lines, 2, "one per key within the interval");
        assert!(l.check(Some(n1), c, t0).is_some(), "another node: its own");
        let tail = l.check(Some(n0), c, t0 + NODE_EVERY + Duration::from_secs(1));
        assert_eq!(tail.map(|t| t.suppressed()), Some(999));
        l.flush(t0 + Duration::from_secs(60), |m| *m == n0);
        assert_eq!(l.windows.len(), 2, "n1 is no longer a node");
    }
}
