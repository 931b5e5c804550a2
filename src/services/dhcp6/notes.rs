//! The info line of a new binding, rate-limited: one budget per node MAC
//! and one shared by every other client (pool clients).
//!
//! A node's line matters (it says which DUID took its reservation over),
//! and a node may legitimately change DUIDs a few times in a row (live ISO,
//! installed system, DUID-LLT then DUID-LL), so each key allows a burst of
//! [`BURST`] lines and then one more per [`REFILL`]: a churn of DUIDs from
//! one node writes a handful of lines and cannot hide another node's. A
//! line that is allowed carries the count of those held back since the
//! previous one, in the summary form of [`crate::runtime::lograte`];
//! counts still held are written by [`BindingLog::flush`] (the GC tick).
//!
//! Invariant: memory is bounded by the number of configured nodes + 1
//! (keys are node MACs from the configuration, never a client's choice).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::{debug, info};

use super::reply::{Config, Done};
use crate::model::cluster::MacAddr;
use crate::runtime::lograte::{self, Summary, Tail};
use crate::runtime::sync::LockExt as _;

/// Lines a key may write at once.
pub(super) const BURST: u32 = 4;
/// One more line per key this often.
pub(super) const REFILL: Duration = lograte::CLIENT_EVENTS;

/// One key's allowance and what it held back.
#[derive(Debug, Clone)]
struct Budget {
    tokens: u32,
    refilled: Instant,
    /// When the last line was written.
    last_line: Instant,
    held: u64,
    first: Option<SocketAddr>,
    latest: Option<SocketAddr>,
    several: bool,
}

impl Budget {
    fn new(now: Instant) -> Budget {
        Budget {
            tokens: BURST,
            refilled: now,
            last_line: now,
            held: 0,
            first: None,
            latest: None,
            several: false,
        }
    }

    fn refill(&mut self, now: Instant) {
        let periods = now.saturating_duration_since(self.refilled).as_secs() / REFILL.as_secs();
        if periods == 0 {
            return;
        }
        let add = u32::try_from(periods).unwrap_or(BURST).min(BURST);
        self.tokens = (self.tokens + add).min(BURST);
        self.refilled = now;
    }

    /// Spend a token on a line at `now`: the summary of what was held.
    fn line(&mut self, now: Instant) -> Option<Option<Summary>> {
        self.refill(now);
        if self.tokens == 0 {
            return None;
        }
        self.tokens -= 1;
        let held = (self.held > 0).then(|| Summary {
            count: std::mem::take(&mut self.held),
            first: self.first.take(),
            latest: self.latest.take(),
            several: std::mem::take(&mut self.several),
            over: now.saturating_duration_since(self.last_line),
        });
        self.last_line = now;
        Some(held)
    }

    fn hold(&mut self, client: SocketAddr) {
        self.held = self.held.saturating_add(1);
        if self.held == 1 {
            self.first = Some(client);
        } else if self.first != Some(client) {
            self.several = true;
        }
        self.latest = Some(client);
    }
}

/// The budgets: per node MAC, and `None` for every other client.
#[derive(Default)]
pub(super) struct BindingLog {
    budgets: HashMap<Option<MacAddr>, Budget>,
}

impl BindingLog {
    /// A new binding of `node` (`None`: not a node) from `client` at
    /// `now`: `Some(tail)` when its line may be written.
    pub(super) fn check(
        &mut self,
        node: Option<MacAddr>,
        client: SocketAddr,
        now: Instant,
    ) -> Option<Tail> {
        let b = self.budgets.entry(node).or_insert_with(|| Budget::new(now));
        match b.line(now) {
            Some(held) => Some(Tail(held)),
            None => {
                b.hold(client);
                None
            }
        }
    }

    /// Write the summaries that can be written at `now`, and forget the
    /// budgets of MACs that are no longer nodes (`is_node`).
    pub(super) fn flush(&mut self, now: Instant, is_node: impl Fn(&MacAddr) -> bool) {
        self.budgets.retain(|k, _| k.as_ref().is_none_or(&is_node));
        for (k, b) in &mut self.budgets {
            if b.held == 0 {
                continue;
            }
            if let Some(Some(s)) = b.line(now) {
                match k {
                    Some(m) => info!("dhcp6: new bindings of {m} not logged: {s}"),
                    None => info!("dhcp6: new bindings not logged: {s}"),
                }
            }
        }
    }
}

/// The info line of a new binding, rate-limited per node (`notes`).
pub(super) fn log_new_binding(
    cfg: &Config,
    log: &Mutex<BindingLog>,
    out: &Done,
    msg: &dhcproto::v6::Message,
    src: SocketAddr,
) {
    let node = out
        .mac
        .map(|(m, _)| m)
        .filter(|m| cfg.hostnames.contains_key(m));
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
    fn a_burst_per_node_and_one_for_the_rest_then_one_per_refill() {
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
        assert_eq!(lines, 2 * BURST as usize, "a burst per key");
        assert!(l.check(Some(n1), c, t0).is_some(), "another node: its own");
        let tail = l.check(Some(n0), c, t0 + REFILL + Duration::from_secs(1));
        assert_eq!(tail.map(|t| t.suppressed()), Some(1000 - u64::from(BURST)));
        l.check(None, c, t0 + Duration::from_secs(2));
        l.flush(t0 + Duration::from_secs(60), |m| *m == n0);
        assert_eq!(l.budgets.len(), 2, "n1 is no longer a node");
        assert_eq!(l.budgets[&None].held, 0, "flushed");
    }
}
