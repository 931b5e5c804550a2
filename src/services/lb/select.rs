//! Round-robin selection over eligible backends, separate from health (as in
//! pingora's `select_with(accept)`).
//!
//! [`RoundRobin::pick`] starts at the next position of a shared counter and
//! returns the first backend index that `eligible` accepts, so a caller that
//! must retry after a failed connect passes an `eligible` that also skips the
//! backends it already tried. An empty pool, or one with nothing eligible,
//! yields `None` (never a division by zero).

use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Debug, Default)]
pub struct RoundRobin {
    next: AtomicUsize,
}

impl RoundRobin {
    pub fn new() -> RoundRobin {
        RoundRobin::default()
    }

    /// The next eligible index among `0..len`, or `None`.
    pub fn pick(&self, len: usize, eligible: impl Fn(usize) -> bool) -> Option<usize> {
        if len == 0 {
            return None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % len;
        for k in 0..len {
            let i = (start + k) % len;
            if eligible(i) {
                // Continue after the chosen one, so skipped (ineligible)
                // backends do not make the next pick repeat this one.
                if k > 0 {
                    let _ = self.next.compare_exchange(
                        start.wrapping_add(1),
                        i.wrapping_add(1),
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                }
                return Some(i);
            }
        }
        None
    }
}

/// A small set of tried backend indices (pools have a handful of backends;
/// falls back to a vector beyond 64).
#[derive(Debug, Default)]
pub struct Tried {
    bits: u64,
    more: Vec<usize>,
}

impl Tried {
    pub fn insert(&mut self, i: usize) {
        if i < 64 {
            self.bits |= 1 << i;
        } else {
            self.more.push(i);
        }
    }
    pub fn contains(&self, i: usize) -> bool {
        if i < 64 {
            self.bits & (1 << i) != 0
        } else {
            self.more.contains(&i)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_over_all() {
        let rr = RoundRobin::new();
        let seq: Vec<_> = (0..6).map(|_| rr.pick(3, |_| true).unwrap()).collect();
        assert_eq!(seq, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn skips_ineligible_and_stays_fair() {
        let rr = RoundRobin::new();
        // Backend 1 is down: picks alternate 0, 2.
        let seq: Vec<_> = (0..6).map(|_| rr.pick(3, |i| i != 1).unwrap()).collect();
        assert_eq!(seq.iter().filter(|&&i| i == 0).count(), 3, "{seq:?}");
        assert_eq!(seq.iter().filter(|&&i| i == 2).count(), 3, "{seq:?}");
    }

    #[test]
    fn empty_or_all_down_is_none() {
        let rr = RoundRobin::new();
        assert_eq!(rr.pick(0, |_| true), None);
        assert_eq!(rr.pick(4, |_| false), None);
    }

    #[test]
    fn retry_skips_tried() {
        let rr = RoundRobin::new();
        let mut tried = Tried::default();
        let mut order = Vec::new();
        while let Some(i) = rr.pick(3, |i| !tried.contains(i)) {
            tried.insert(i);
            order.push(i);
        }
        order.sort();
        assert_eq!(order, [0, 1, 2]);
        let mut t = Tried::default();
        t.insert(70);
        assert!(t.contains(70) && !t.contains(69));
    }
}
