//! Log a refusal once per client address ([`OncePerAddress`]): the access
//! rules refuse a DHCP pool client or a stranger on every request, and one
//! warning per address says all an operator needs (who, and what it asked
//! for); the rest are counted and go to debug.
//!
//! Invariants: memory is bounded (at most `cap` addresses remembered;
//! entries older than `quiet` are dropped when the table is full); when the
//! table is full of recent addresses (many sources), new addresses share a
//! single line per `overflow_every`, so no number of source addresses can
//! flood the log. An address is logged again once `quiet` has passed since
//! its last line, with the count of its refusals in between.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::runtime::sync::LockExt as _;

/// How long an address stays quiet after its line.
pub const QUIET: Duration = Duration::from_secs(3600);
/// Addresses remembered.
pub const CAP: usize = 1024;
/// With the table full: one line for all new addresses per this.
pub const OVERFLOW_EVERY: Duration = Duration::from_secs(10);

/// One line per address per [`QUIET`]; see the module doc.
pub struct OncePerAddress {
    quiet: Duration,
    cap: usize,
    overflow_every: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Address → (time of its last line, refusals since not logged).
    seen: HashMap<IpAddr, (Instant, u64)>,
    overflow_last: Option<Instant>,
    overflow_suppressed: u64,
}

impl Default for OncePerAddress {
    fn default() -> Self {
        OncePerAddress::new(QUIET, CAP, OVERFLOW_EVERY)
    }
}

impl OncePerAddress {
    pub fn new(quiet: Duration, cap: usize, overflow_every: Duration) -> Self {
        OncePerAddress {
            quiet,
            cap: cap.max(1),
            overflow_every,
            state: Mutex::new(State::default()),
        }
    }

    /// `Some(n)` when a refusal from `ip` should be logged now; `n` is the
    /// refusals not logged since the previous line (of this address, or of
    /// all overflowing addresses). `None`: count it, log at debug at most.
    pub fn check(&self, ip: IpAddr) -> Option<u64> {
        self.check_at(ip, Instant::now())
    }

    fn check_at(&self, ip: IpAddr, now: Instant) -> Option<u64> {
        let mut s = self.state.locked();
        let quiet = self.quiet;
        if let Some((last, n)) = s.seen.get_mut(&ip) {
            if now.saturating_duration_since(*last) >= quiet {
                *last = now;
                return Some(std::mem::take(n));
            }
            *n += 1;
            return None;
        }
        if s.seen.len() >= self.cap {
            s.seen
                .retain(|_, (last, _)| now.saturating_duration_since(*last) < quiet);
        }
        if s.seen.len() < self.cap {
            s.seen.insert(ip, (now, 0));
            return Some(0);
        }
        let due = s
            .overflow_last
            .is_none_or(|t| now.saturating_duration_since(t) >= self.overflow_every);
        if due {
            s.overflow_last = Some(now);
            return Some(std::mem::take(&mut s.overflow_suppressed));
        }
        s.overflow_suppressed += 1;
        None
    }
}

/// The end of a refusal's line: `" (N earlier refusals not logged)"`, or
/// nothing when `n` is 0.
pub fn not_logged(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} earlier refusals not logged)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u32) -> IpAddr {
        IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n))
    }

    #[test]
    fn once_per_address_then_again_with_the_count() {
        let o = OncePerAddress::new(Duration::from_secs(60), 8, Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(o.check_at(ip(1), t0), Some(0));
        assert_eq!(o.check_at(ip(2), t0), Some(0), "another address");
        for s in 1..=5 {
            assert_eq!(o.check_at(ip(1), t0 + Duration::from_secs(s)), None);
        }
        assert_eq!(o.check_at(ip(1), t0 + Duration::from_secs(60)), Some(5));
        assert_eq!(o.check_at(ip(1), t0 + Duration::from_secs(61)), None);
    }

    #[test]
    fn many_addresses_share_one_line_and_memory_stays_bounded() {
        let o = OncePerAddress::new(Duration::from_secs(60), 4, Duration::from_secs(10));
        let t0 = Instant::now();
        for n in 0..4 {
            assert_eq!(o.check_at(ip(n), t0), Some(0));
        }
        // Full of recent addresses: one line per 10 s for all newcomers.
        assert_eq!(o.check_at(ip(100), t0), Some(0));
        for n in 101..200 {
            assert_eq!(o.check_at(ip(n), t0 + Duration::from_secs(1)), None);
        }
        assert_eq!(o.check_at(ip(300), t0 + Duration::from_secs(10)), Some(99));
        assert!(o.state.locked().seen.len() <= 4);
        // Once the old entries are quiet long enough they make room.
        assert_eq!(o.check_at(ip(400), t0 + Duration::from_secs(61)), Some(0));
        assert_eq!(o.state.locked().seen.len(), 1);
        // Known addresses are still remembered while the table is full.
        assert_eq!(o.check_at(ip(400), t0 + Duration::from_secs(62)), None);
    }
}
