//! Rate-limited log lines for events a client can cause at line rate
//! (malformed datagrams, refused relays, accept errors, closed
//! connections): the one helper every service uses for them.
//!
//! Per limiter and reason key: the first occurrence may be logged at once
//! (the caller writes the line, with its own message, level and target,
//! naming the client); every further occurrence within `interval` is only
//! counted, keeping the first and the latest client address. The count is
//! reported in one summary line once `interval` has passed since the last
//! line: appended to the next line the caller writes, or — for the
//! limiters of a `serve` ([`LogRates`]) — written by that serve's flusher
//! task ([`LogRates::flush_every`] once a second, [`LogRates::flush_final`]
//! at shutdown) so that the count of a flood that stopped is not lost. So a
//! flood of one reason writes one line when it starts and one line per
//! interval while it lasts, each naming a client address and how many were
//! not logged.
//!
//! [`Window`] is the pure core (one reason key, injected clock, unit
//! tested); [`LogRate`] keys windows by reason under a lock; [`LogRates`]
//! is one serve's set of limiters by name, carried by its
//! `runtime::context::Context`: a service asks it for its limiter when it
//! is created, and the same name gives the same limiter (shared by every
//! call site and instance that names it, kept across reloads).
//!
//! Invariants: memory is bounded by the number of limiters and reason
//! keys, which are `&'static str` chosen by the code, never by a client
//! (client addresses are kept two per key). Counting never allocates. The
//! locks are held for a few comparisons only, never while logging. Nothing
//! is process-global: two serves in one process (two `Context`s) count
//! and flush apart.

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::runtime::sync::LockExt as _;

/// The interval of the services' per-client warnings.
pub const CLIENT_EVENTS: Duration = Duration::from_secs(10);

/// How often [`LogRates::flush_every`] writes the summaries that are due.
const FLUSH_TICK: Duration = Duration::from_secs(1);

/// Occurrences of one reason that were counted, not logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// How many.
    pub count: u64,
    /// The client of the first and of the latest of them (`None`: no
    /// client, e.g. an accept error).
    pub first: Option<SocketAddr>,
    pub latest: Option<SocketAddr>,
    /// They came from more than one client.
    pub several: bool,
    /// Time from the line before them to this summary.
    pub over: Duration,
}

impl fmt::Display for Summary {
    /// `41 more in the last 10.0s, from 10.0.0.5:68 (first) to 10.0.0.9:68 (latest)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} more in the last {:.1}s",
            self.count,
            self.over.as_secs_f64()
        )?;
        match (self.first, self.latest) {
            (Some(a), _) if !self.several => write!(f, ", all from {a}"),
            (Some(a), Some(b)) if a == b => write!(f, ", from {a} (first and latest) and others"),
            (Some(a), Some(b)) => write!(f, ", from {a} (first) to {b} (latest)"),
            (Some(a), None) | (None, Some(a)) => write!(f, ", from {a} and others"),
            (None, None) => Ok(()),
        }
    }
}

/// What a caller allowed to log appends to its line: the summary of the
/// occurrences not logged since the last line, if any and not yet flushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tail(pub Option<Summary>);

impl Tail {
    /// How many occurrences this line also stands for.
    pub fn suppressed(&self) -> u64 {
        self.0.map_or(0, |s| s.count)
    }
}

impl fmt::Display for Tail {
    /// Empty, or ` (41 more in the last 10.0s, all from 10.0.0.5:68)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(s) => write!(f, " ({s})"),
            None => Ok(()),
        }
    }
}

/// One reason's state: when its last line was written and what was counted
/// since. Pure: the clock is an argument.
#[derive(Debug, Clone, Default)]
pub struct Window {
    last_line: Option<Instant>,
    count: u64,
    first: Option<SocketAddr>,
    latest: Option<SocketAddr>,
    several: bool,
}

impl Window {
    /// An occurrence at `now` from `client`: `Some` when the caller may
    /// write a line (with the summary of what it stands for), else `None`
    /// (counted).
    pub fn hit(
        &mut self,
        now: Instant,
        interval: Duration,
        client: Option<SocketAddr>,
    ) -> Option<Tail> {
        match self.last_line {
            Some(t) if now.saturating_duration_since(t) < interval => {
                self.count = self.count.saturating_add(1);
                if self.count == 1 {
                    self.first = client;
                } else if client != self.first {
                    self.several = true;
                }
                self.latest = client;
                None
            }
            _ => {
                let tail = Tail(self.take(now));
                self.last_line = Some(now);
                Some(tail)
            }
        }
    }

    /// The summary to write at `now`, if occurrences were counted and the
    /// last line is at least `interval` old; writing it counts as a line.
    pub fn due(&mut self, now: Instant, interval: Duration) -> Option<Summary> {
        let last = self.last_line?;
        if self.count == 0 || now.saturating_duration_since(last) < interval {
            return None;
        }
        let s = self.take(now);
        self.last_line = Some(now);
        s
    }

    /// Hand over (and reset) what was counted.
    fn take(&mut self, now: Instant) -> Option<Summary> {
        if self.count == 0 {
            return None;
        }
        let s = Summary {
            count: std::mem::take(&mut self.count),
            first: self.first.take(),
            latest: self.latest.take(),
            several: std::mem::take(&mut self.several),
            over: self
                .last_line
                .map_or(Duration::ZERO, |t| now.saturating_duration_since(t)),
        };
        Some(s)
    }
}

/// Windows by reason key, for one service (or one backend). A service
/// gets its limiters from its serve's [`LogRates`], whose flusher writes
/// their summaries; one made with [`LogRate::new`] alone is nobody's (its
/// counts only reach the next line it allows).
pub struct LogRate {
    /// Prefix of the summary lines (`dns`, `dhcp`, `lb api` …).
    name: &'static str,
    interval: Duration,
    windows: Mutex<Vec<(&'static str, Window)>>,
}

impl fmt::Debug for LogRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogRate")
            .field("name", &self.name)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl LogRate {
    pub const fn new(name: &'static str, interval: Duration) -> LogRate {
        LogRate {
            name,
            interval,
            windows: Mutex::new(Vec::new()),
        }
    }

    /// An occurrence of `key` now, from `client`: `Some(tail)` when the
    /// caller may log it (appending `tail`), `None` when it was counted.
    pub fn check(&self, key: &'static str, client: Option<SocketAddr>) -> Option<Tail> {
        self.check_at(key, client, Instant::now())
    }

    /// [`LogRate::check`] at `now`: for clocks other than the wall clock
    /// (tokio's paused time).
    pub fn check_at(
        &self,
        key: &'static str,
        client: Option<SocketAddr>,
        now: Instant,
    ) -> Option<Tail> {
        let mut w = self.windows.locked();
        let i = match w.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                w.push((key, Window::default()));
                w.len() - 1
            }
        };
        w[i].1.hit(now, self.interval, client)
    }

    /// The summaries due at `now`, by key (every count when `all`).
    fn due(&self, now: Instant, all: bool) -> Vec<(&'static str, Summary)> {
        let interval = if all { Duration::ZERO } else { self.interval };
        let mut w = self.windows.locked();
        w.iter_mut()
            .filter_map(|(k, win)| win.due(now, interval).map(|s| (*k, s)))
            .collect()
    }
}

/// The limiters of one `serve`, by name, and their flusher. A clone is
/// the same set (one `Arc`).
#[derive(Clone, Default)]
pub struct LogRates {
    limiters: Arc<Mutex<Vec<Arc<LogRate>>>>,
}

impl LogRates {
    /// The limiter `name` of this set, made with `interval` the first time
    /// it is asked for; every caller naming it shares its windows (a
    /// service's call sites, its instances, its reloads).
    pub fn get(&self, name: &'static str, interval: Duration) -> Arc<LogRate> {
        let mut all = self.limiters.locked();
        if let Some(l) = all.iter().find(|l| l.name == name) {
            debug_assert_eq!(
                l.interval, interval,
                "limiter {name} asked with two intervals"
            );
            return l.clone();
        }
        let l = Arc::new(LogRate::new(name, interval));
        all.push(l.clone());
        l
    }

    /// Write the summaries of this set's limiters at `now`: those due, or
    /// (`all`, at shutdown) every count not logged yet.
    fn flush_at(&self, now: Instant, all: bool) {
        let limiters: Vec<Arc<LogRate>> = self.limiters.locked().clone();
        for l in limiters {
            for (key, s) in l.due(now, all) {
                tracing::warn!("{}: {key}: {s}", l.name);
            }
        }
    }

    /// The flusher task: writes the summaries that are due every second
    /// until `stop`.
    pub async fn flush_every(self, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(FLUSH_TICK) => self.flush_at(Instant::now(), false),
            }
        }
    }

    /// At shutdown, once the services stopped: every count not logged yet,
    /// so the end of a flood is not lost.
    pub fn flush_final(&self) {
        self.flush_at(Instant::now(), true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: Duration = Duration::from_secs(10);

    fn addr(last: u8) -> Option<SocketAddr> {
        Some(SocketAddr::from(([10, 0, 0, last], 68)))
    }

    #[test]
    fn first_occurrence_is_logged_then_counted_until_the_interval_passed() {
        let t0 = Instant::now();
        let mut w = Window::default();
        assert_eq!(w.hit(t0, I, addr(1)), Some(Tail(None)));
        for i in 0..5u64 {
            assert_eq!(w.hit(t0 + Duration::from_secs(i + 1), I, addr(2)), None);
        }
        assert_eq!(w.hit(t0 + Duration::from_secs(9), I, addr(3)), None);
        // The next line carries the count, the first and the latest client.
        let tail = w.hit(t0 + I, I, addr(4)).unwrap();
        assert_eq!(
            tail,
            Tail(Some(Summary {
                count: 6,
                first: addr(2),
                latest: addr(3),
                several: true,
                over: I,
            }))
        );
        assert_eq!(tail.suppressed(), 6);
        assert_eq!(
            tail.to_string(),
            " (6 more in the last 10.0s, from 10.0.0.2:68 (first) to 10.0.0.3:68 (latest))"
        );
        // A new window started with that line.
        assert_eq!(w.hit(t0 + I + Duration::from_secs(1), I, addr(1)), None);
        // Several clients, the latest the same as the first.
        w.hit(t0 + I + Duration::from_secs(2), I, addr(5));
        w.hit(t0 + I + Duration::from_secs(3), I, addr(1));
        let s = w.due(t0 + I + I, I).unwrap();
        assert_eq!(
            s.to_string(),
            "3 more in the last 10.0s, from 10.0.0.1:68 (first and latest) and others"
        );
    }

    #[test]
    fn a_summary_is_due_once_the_interval_passed_and_counts_as_a_line() {
        let t0 = Instant::now();
        let mut w = Window::default();
        assert_eq!(w.due(t0, I), None, "nothing logged, nothing due");
        w.hit(t0, I, addr(1));
        assert_eq!(w.due(t0 + I, I), None, "nothing counted, nothing due");
        w.hit(t0 + Duration::from_secs(11), I, addr(1));
        for _ in 0..3 {
            w.hit(t0 + Duration::from_secs(12), I, addr(7));
        }
        assert_eq!(w.due(t0 + Duration::from_secs(20), I), None, "too early");
        let s = w.due(t0 + Duration::from_secs(21), I).unwrap();
        assert_eq!(s.count, 3);
        assert_eq!(
            s.to_string(),
            "3 more in the last 10.0s, all from 10.0.0.7:68"
        );
        assert_eq!(w.due(t0 + Duration::from_secs(40), I), None, "flushed once");
        // The summary was a line: the next occurrence within the interval
        // is counted, the one after it is logged.
        assert_eq!(w.hit(t0 + Duration::from_secs(25), I, addr(1)), None);
        assert_eq!(
            w.hit(t0 + Duration::from_secs(31), I, None)
                .map(|t| t.suppressed()),
            Some(1)
        );
    }

    #[test]
    fn a_flood_writes_one_line_per_interval() {
        let t0 = Instant::now();
        let mut w = Window::default();
        let mut lines = 0;
        let mut counted = 0;
        // 3,000 occurrences over 30 s, with a flush every second.
        for i in 0..3000u64 {
            let now = t0 + Duration::from_millis(i * 10);
            if let Some(t) = w.hit(now, I, addr(9)) {
                lines += 1;
                counted += 1 + t.suppressed();
            }
            if i % 100 == 0
                && let Some(s) = w.due(now, I)
            {
                lines += 1;
                counted += s.count;
            }
        }
        if let Some(s) = w.due(t0 + Duration::from_secs(60), I) {
            lines += 1;
            counted += s.count;
        }
        assert!(lines <= 5, "{lines} lines");
        assert_eq!(counted, 3000, "every occurrence is logged or counted");
    }

    #[test]
    fn keys_are_limited_apart_and_clients_without_address_are_fine() {
        let l = LogRate::new("test", Duration::from_secs(3600));
        let t0 = Instant::now();
        assert!(l.check_at("a", None, t0).is_some());
        assert!(l.check_at("b", addr(1), t0).is_some());
        assert!(l.check_at("a", None, t0).is_none());
        assert!(l.check_at("b", addr(1), t0).is_none());
        let later = t0 + Duration::from_secs(3600);
        assert!(l.due(t0, false).is_empty(), "not due yet");
        let due = l.due(later, false);
        assert_eq!(due.len(), 2, "{due:?}");
        assert_eq!(due[0].1.to_string(), "1 more in the last 3600.0s");
        assert!(l.check_at("c", None, t0).is_some());
        assert!(l.check_at("c", None, t0).is_none());
        assert_eq!(
            l.due(t0, true).len(),
            1,
            "at shutdown every count is written"
        );
    }

    #[test]
    fn one_name_is_one_limiter_within_a_set() {
        let set = LogRates::default();
        let a = set.get("dhcp", I);
        let b = set.clone().get("dhcp", I);
        assert!(Arc::ptr_eq(&a, &b), "the same name, the same limiter");
        assert!(!Arc::ptr_eq(&a, &set.get("dhcp6", I)));
        let t0 = Instant::now();
        assert!(a.check_at("malformed", addr(1), t0).is_some());
        assert!(b.check_at("malformed", addr(2), t0).is_none(), "counted");
        assert_eq!(a.due(t0, true).len(), 1);
    }

    /// Two serves in one process: each has its own set, and neither sees
    /// (nor flushes) the other's counts.
    #[test]
    fn two_sets_do_not_see_each_others_counts() {
        let (one, two) = (LogRates::default(), LogRates::default());
        let (a, b) = (one.get("dhcp", I), two.get("dhcp", I));
        assert!(!Arc::ptr_eq(&a, &b));
        let t0 = Instant::now();
        assert!(a.check_at("malformed", addr(1), t0).is_some());
        assert!(
            b.check_at("malformed", addr(2), t0).is_some(),
            "the other set's first occurrence is logged, not counted"
        );
        for _ in 0..3 {
            assert!(a.check_at("malformed", addr(1), t0).is_none());
        }
        assert!(b.check_at("malformed", addr(2), t0).is_none());
        // The second serve's shutdown writes its own count only.
        two.flush_final();
        assert!(b.due(t0, true).is_empty(), "flushed");
        let left = a.due(t0, true);
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!((left[0].1.count, left[0].1.first), (3, addr(1)));
    }
}
